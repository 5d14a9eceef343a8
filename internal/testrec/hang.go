package testrec

import (
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// The Hang variant's program: after the good recording's, it waits for a peer in a kernel
// that never finishes (HangLaunch, launched at HangLine), which another launch waits behind on
// its stream, while a gemm on another stream has not finished either (made at HangGemmLine,
// in torch's linear.py). gpurr record --hang-timeout 5s --hang-kill reports it and ends the
// program.
const (
	HangLaunch   = 17
	HangLine     = script + ":48 sync_step"
	HangGemmLine = script + ":25 Model.forward via " + linear + ":125 Linear.forward"
	hangTimeout  = 5_000_000_000
	hangSID      = 21
)

var csHang = []*pb.Frame{
	native("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuLaunchKernel", 0x2f1a40),
	py(script, 48, "sync_step"),
	py(script, 52, "<module>"),
}

// hang is the frame the agent writes when it finds the hang, --hang-timeout after the stuck
// launch: the launches the GPU never finished (no activity), the Hang record, and its report
// in the log, as the agent writes them; batches are the frames before it.
func (p *program) hang(batches []*pb.Batch) *pb.Batch {
	cs := callstack(csHang)
	p.stats.Callstacks++
	stuck := p.launch(kAdd, cs, 5, false)
	behind := p.launch(kFill, cs, 6, false)
	gemm := p.launch(kGemm, callstack(csGemm), 7, false)
	gemm.Stream, gemm.StreamId = captureStream, hangSID
	at := stuck.GetHostNs() + hangTimeout + 500_000_000
	h := &pb.Hang{HostNs: at, TimeoutNs: hangTimeout, Killed: true,
		Launch:  recording.NewHangLaunch(stuck, 2),
		Streams: []*pb.HangLaunch{recording.NewHangLaunch(gemm, 1)}}
	b := &pb.Batch{Callstacks: []*pb.Callstack{cs}, Launches: []*pb.Launch{stuck, behind, gemm}, Hangs: []*pb.Hang{h}}

	links := recording.NewLinks()
	for _, earlier := range append(batches, b) {
		links.Add(earlier, false)
	}
	for _, line := range append(links.HangReport(h), "gpurr ends the program (--hang-kill)") {
		b.Log = append(b.Log, &pb.LogEntry{HostNs: at, Level: "error", Message: recording.HangLogPrefix + line})
		p.stats.Errors++
	}
	return b
}
