package testrec

import (
	"fmt"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// NestedRanges are the batches of a process, "solo" of OpenBatches, that pushes n NVTX ranges,
// each inside the one before ("level 1" outermost), and launches one kernel in each: what a
// recursive program instrumented with NVTX writes, a recording of a few bytes per range whose
// range paths, written whole, would hold n²/2 names.
func NestedRanges(n int) []*pb.Batch {
	const tid = 7
	k := kernels[kAdd]
	params, total := layout(k.params)
	b := &pb.Batch{Kernels: []*pb.Kernel{{Id: 1, Name: k.name, Params: params, ParamBytes: total}}}
	for i := range n {
		id, at := uint64(i+1), uint64(startNS+i*launchGapNS)
		b.Ranges = append(b.Ranges, &pb.Range{Id: id, ParentId: uint64(i), Tid: tid, Message: fmt.Sprintf("level %d", id), StartNs: at, Pushed: true})
		b.Launches = append(b.Launches, &pb.Launch{Seq: id, CorrelationId: uint32(id), KernelId: 1, Tid: tid, HostNs: at + 1, RangeId: id,
			Grid: dim(1, 1, 1), Block: dim(32, 1, 1), Params: make([]byte, total), Api: 307})
	}
	ends := &pb.Batch{End: &pb.End{EndNs: uint64(startNS + (n+1)*launchGapNS), Reason: "exit"}}
	for i := n; i > 0; i-- {
		ends.RangeEnds = append(ends.RangeEnds, &pb.RangeEnd{Id: uint64(i), EndNs: uint64(startNS + n*launchGapNS + (n - i))})
	}
	process := &pb.Batch{Process: &pb.Process{Hostname: "deep", Pid: 1, Argv: []string{"python", "recurse.py"}, Nvtx: true, StartNs: startNS}}
	return []*pb.Batch{process, b, ends}
}
