package testrec

import (
	"bytes"
	"fmt"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/gpurr/gpurr/chunkstore"
	"github.com/gpurr/gpurr/memhash"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// WriteBig writes a recording of one process with n launches into dir, for
// benchmarks of readers over large recordings: frames of 4096 launches (as
// the agent writes them), 2 regions each (64 KiB and 4 KiB), 3 streams, 50
// kernels.
//
// In hash mode every launch's regions get their own synthetic hashes; the
// launch numbered differAt (1-based; 0 for none) gets other ones than in
// any other recording WriteBig makes. In snapshot mode (--memory snapshot
// of every launch) the regions hold zeros before and after every launch,
// stored once in the chunk store, but after launch differAt, where they
// hold 0x01 bytes. It returns the process.
func WriteBig(dir string, n, differAt int, snapshot bool) (*recording.Process, error) {
	mode := "hash"
	if snapshot {
		mode = "snapshot"
	}
	w, err := recording.Create(dir, "box-1", &pb.Batch{Process: &pb.Process{Hostname: "box", Pid: 1,
		Memory: &pb.MemoryConfig{Mode: mode, ChunkBytes: memhash.ChunkSize}}})
	if err != nil {
		return nil, err
	}
	sizes := []uint64{memhash.ChunkSize, 4096}
	var stored [2][]*pb.RegionState // snapshot mode: zeros, and 0x01 bytes
	var store *chunkstore.Writer
	if snapshot {
		if store, err = chunkstore.Create(w.Dir(), chunkstore.Options{}); err != nil {
			return nil, err
		}
		for v := range stored {
			for _, size := range sizes {
				rs, err := RegionState(bytes.Repeat([]byte{byte(v)}, int(size)), store)
				if err != nil {
					return nil, err
				}
				stored[v] = append(stored[v], rs)
			}
		}
		if err := store.Close(); err != nil {
			return nil, err
		}
	}
	batch := &pb.Batch{}
	for k := uint64(1); k <= 50; k++ {
		batch.Kernels = append(batch.Kernels, &pb.Kernel{Id: k, Identity: 7000 + k, Name: fmt.Sprintf("kernel_%d", k)})
	}
	h := func(seq, r uint64) []byte {
		s := memhash.Sum{uint32(seq), uint32(r), 1, 2}.Bytes()
		return s[:]
	}
	plan := &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}
	if snapshot {
		plan = &pb.MemoryPlan{Status: pb.MemoryPlan_SNAPSHOT, SnapshotSelected: true}
	}
	for i := 1; i <= n; i++ {
		seq := uint64(i)
		batch.Launches = append(batch.Launches, &pb.Launch{Seq: seq, KernelId: seq%50 + 1, Stream: seq % 3, CallstackId: seq % 97,
			Params: make([]byte, 64), Memory: plan,
			Regions: []*pb.Region{{Address: 1 << 40, Size: sizes[0], ParamOffsets: []uint32{0}}, {Address: 2 << 40, Size: sizes[1], ParamOffsets: []uint32{8}}}})
		st := &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Snapshot: snapshot}
		switch {
		case snapshot && i == differAt:
			st.Regions = stored[1]
		case snapshot:
			st.Regions = stored[0]
		default:
			for r := uint64(0); r < 2; r++ {
				hh := h(seq, r)
				if i == differAt {
					hh = h(seq, r+10)
				}
				st.Regions = append(st.Regions, &pb.RegionState{Hash: hh, ChunkHashes: hh})
			}
		}
		if snapshot {
			batch.Memory = append(batch.Memory, &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_BEFORE, Snapshot: true, Regions: stored[0]})
		}
		batch.Memory = append(batch.Memory, st)
		if len(batch.Launches) == 4096 || i == n {
			if i == n {
				batch.End = &pb.End{Reason: "exit"}
			}
			if err := w.Write(batch); err != nil {
				return nil, err
			}
			batch = &pb.Batch{}
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	set, err := recording.Open(dir)
	if err != nil {
		return nil, err
	}
	return set.Processes[0], nil
}

// PeakLiveHeap samples the live heap (as of each garbage collection) until
// the function it returns is called, which returns the largest sample in
// MB: what a benchmark of a streaming reader reports as its memory.
func PeakLiveHeap() (stop func() float64) {
	var peak uint64
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() float64 {
		close(done)
		wg.Wait()
		return float64(peak) / (1 << 20)
	}
}
