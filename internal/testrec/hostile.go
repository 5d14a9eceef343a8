package testrec

import (
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Hostile is text a crafted recording holds to take over the terminal that prints it: an
// escape sequence that retitles the window, a bell, and a carriage return and newline that
// forge a line of the report.
const Hostile = "\x1b]0;owned\x07\r\ngpurr: FORGED\x1b[2J"

// HostileBatches are the batches of a process, "solo" of OpenBatches, whose strings all end
// in Hostile: its host name, argv, a kernel name, an NVTX range's message, a Python frame's
// file and function, and an error in its log. It launched the kernel twice, in the range.
func HostileBatches() []*pb.Batch {
	name := "add_kernel" + Hostile
	cs := &pb.Callstack{Id: 1, Source: "python", Frames: []*pb.Frame{py("/home/ada/train.py"+Hostile, 3, "main"+Hostile)}}
	b := &pb.Batch{
		Process: &pb.Process{Hostname: "box" + Hostile, Pid: 1, Argv: []string{"python", "train.py" + Hostile}, Nvtx: true,
			StartNs: startNS, GpuTiming: true},
		Kernels:    []*pb.Kernel{{Id: 1, Name: name}},
		Callstacks: []*pb.Callstack{cs},
		Ranges:     []*pb.Range{{Id: 1, Tid: 7, Message: "step" + Hostile, StartNs: startNS + 1, Pushed: true}},
		Log:        []*pb.LogEntry{{HostNs: startNS + 2, Level: "error", Message: "failed" + Hostile}},
	}
	for seq := uint64(1); seq <= 2; seq++ {
		at := startNS + seq*launchGapNS
		b.Launches = append(b.Launches, &pb.Launch{Seq: seq, CorrelationId: uint32(seq), KernelId: 1, Tid: 7, HostNs: at, RangeId: 1,
			CallstackId: cs.Id, Grid: dim(1, 1, 1), Block: dim(32, 1, 1), Api: 307})
		b.Activities = append(b.Activities, &pb.KernelActivity{CorrelationId: uint32(seq), Name: name, StartNs: at + queueNS,
			EndNs: at + queueNS + 1000, Grid: dim(1, 1, 1), Block: dim(32, 1, 1)})
	}
	end := &pb.Batch{RangeEnds: []*pb.RangeEnd{{Id: 1, EndNs: startNS + 10*launchGapNS}}, End: &pb.End{EndNs: startNS + 10*launchGapNS, Reason: "exit"}}
	return []*pb.Batch{b, end}
}
