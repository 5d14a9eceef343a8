package diff

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpurr/gpurr/memhash"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// writeBig writes a hash-mode recording of n launches (frames of 4096, as
// the agent writes them), 2 regions each, 3 streams, 50 kernels; the
// launch at differAt (1-based) gets a different region hash.
func writeBig(b *testing.B, dir string, n, differAt int) *recording.Process {
	w, err := recording.Create(dir, "box-1", &pb.Batch{Process: &pb.Process{Hostname: "box", Pid: 1,
		Memory: &pb.MemoryConfig{Mode: "hash", ChunkBytes: memhash.ChunkSize}}})
	if err != nil {
		b.Fatal(err)
	}
	batch := &pb.Batch{}
	for k := uint64(1); k <= 50; k++ {
		batch.Kernels = append(batch.Kernels, &pb.Kernel{Id: k, Identity: 7000 + k, Name: fmt.Sprintf("kernel_%d", k)})
	}
	h := func(seq, r uint64) []byte {
		s := memhash.Sum{uint32(seq), uint32(r), 1, 2}.Bytes()
		return s[:]
	}
	for i := 1; i <= n; i++ {
		seq := uint64(i)
		batch.Launches = append(batch.Launches, &pb.Launch{Seq: seq, KernelId: seq%50 + 1, Stream: seq % 3, CallstackId: seq % 97,
			Params:  make([]byte, 64),
			Regions: []*pb.Region{{Address: 1 << 40, Size: 1 << 20, ParamOffsets: []uint32{0}}, {Address: 2 << 40, Size: 4096, ParamOffsets: []uint32{8}}}})
		st := &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER}
		for r := uint64(0); r < 2; r++ {
			hh := h(seq, r)
			if i == differAt {
				hh = h(seq, r+10)
			}
			st.Regions = append(st.Regions, &pb.RegionState{Hash: hh, ChunkHashes: hh})
		}
		batch.Memory = append(batch.Memory, st)
		if len(batch.Launches) == 4096 || i == n {
			if i == n {
				batch.End = &pb.End{Reason: "exit"}
			}
			if err := w.Write(batch); err != nil {
				b.Fatal(err)
			}
			batch = &pb.Batch{}
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	return set.Processes[0]
}

// BenchmarkDiffMillion: Scan both recordings and Align them, 1 million
// launches each (the target: under 10 s on a 2-core machine).
func BenchmarkDiffMillion(b *testing.B) {
	const n = 1_000_000
	tmp := b.TempDir()
	pa := writeBig(b, filepath.Join(tmp, "a"), n, 0)
	pb_ := writeBig(b, filepath.Join(tmp, "b"), n, 777_777)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		ra, err := Scan(pa)
		if err != nil {
			b.Fatal(err)
		}
		rb, err := Scan(pb_)
		if err != nil {
			b.Fatal(err)
		}
		res := Align(ra, rb)
		if res.First == nil || ra.Launches[res.First.A].Seq != 777_777 || res.Matched != n {
			b.Fatalf("first %v matched %d", res.First, res.Matched)
		}
		b.ReportMetric(time.Since(t0).Seconds(), "s/diff")
	}
}
