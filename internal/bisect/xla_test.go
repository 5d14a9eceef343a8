package bisect

import (
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// A JAX program's recording without digests: bisect names the --step-range of its most-run
// XLA module, leaving out the modules XLA's autotuner runs (no program_id), which ran more.
func TestNoDigestsNamesJAXStep(t *testing.T) {
	var ranges []*pb.Range
	add := func(msg string, n int) {
		for range n {
			id := uint64(len(ranges) + 1)
			ranges = append(ranges, &pb.Range{Id: id, Tid: 7, Domain: "TSL", Message: msg, StartNs: 10 * id, EndNs: 10*id + 5, Pushed: true})
		}
	}
	add("XlaModule:#prefix=args[0],hlo_module=jit_stage,program_id=0#", 1)
	add("XlaModule:#hlo_module=gemm_fusion_dot.3#", 9)
	add("Thunk:#hlo_op=loop_reduce_fusion#", 9)
	add("XlaModule:#hlo_module=jit_step,program_id=12#", 4)
	add("XlaModule:#hlo_module=jit__normal,program_id=3#", 2)
	process := &pb.Batch{Process: &pb.Process{Hostname: "box", Pid: 1, Argv: []string{"python", "train.py"}, Nvtx: true, StartNs: 1}}
	set := testrec.OpenBatches(t, process, &pb.Batch{Ranges: ranges}, &pb.Batch{End: &pb.End{EndNs: 1000, Reason: "exit"}})
	msg := noDigests(set).Error()
	if want := "most-run XLA modules are jit_step (4 runs), jit__normal (2), jit_stage (1): give --step-range 'hlo_module=jit_NAME,' for a step at each run of the jitted function NAME (here 'hlo_module=jit_step,', the most-run)"; !strings.Contains(msg, want) {
		t.Errorf("noDigests: %s\nwant it to say %q", msg, want)
	}
	plain := testrec.OpenBatches(t, process, &pb.Batch{End: &pb.End{EndNs: 1000, Reason: "exit"}})
	if msg := noDigests(plain).Error(); strings.Contains(msg, "XLA") {
		t.Errorf("a program without XLA: %s", msg)
	}
}
