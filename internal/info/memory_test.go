package info

import (
	"strings"
	"testing"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// A Triton kernel whose PTX proves its first pointer read-only: of its launch's two regions the
// input counts as read-only; a region the written pointer also points into does not; a launch
// memory capture skipped and a kernel without proofs count as written or not at all.
func TestReadOnlyBytes(t *testing.T) {
	hashed := &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}
	d := &recording.Data{
		Process: &pb.Process{Memory: &pb.MemoryConfig{Mode: "hash"}},
		Kernels: []*pb.Kernel{
			{Id: 1, Name: "triton_add", Params: []*pb.ParamInfo{{Offset: 0, Size: 8, ProvedReadOnly: true}, {Offset: 8, Size: 8}}},
			{Id: 2, Name: "cublas_gemm", Params: []*pb.ParamInfo{{Offset: 0, Size: 8}}},
		},
		Launches: []*pb.Launch{
			{Seq: 1, KernelId: 1, Memory: hashed, Regions: []*pb.Region{
				{Size: 1000, ParamOffsets: []uint32{0}}, // the input: read-only
				{Size: 300, ParamOffsets: []uint32{8}},  // the output
			}},
			{Seq: 2, KernelId: 1, Memory: hashed, Regions: []*pb.Region{
				{Size: 500, ParamOffsets: []uint32{0, 8}}, // in and out in one allocation
			}},
			{Seq: 3, KernelId: 2, Memory: hashed, Regions: []*pb.Region{{Size: 4000, ParamOffsets: []uint32{0}}}},
			{Seq: 4, KernelId: 1, Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_SKIPPED_CAPTURE},
				Regions: []*pb.Region{{Size: 7000, ParamOffsets: []uint32{0}}}},
		},
	}
	all, ro := readOnlyBytes(d)
	if all != 5800 || ro != 1000 {
		t.Errorf("%d read-only bytes of %d, want 1000 of 5800", ro, all)
	}
	var b strings.Builder
	summarizeMemory(d).write(&textWriter{w: &b})
	if !strings.Contains(b.String(), "read-only    1000 B of the 5.7 KiB of regions captured after their launches (17.2%)") {
		t.Errorf("info:\n%s", b.String())
	}
}
