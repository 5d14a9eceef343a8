package testrec

import (
	"bytes"
	"fmt"
	"runtime/metrics"
	"sync"
	"syscall"
	"time"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Big shapes a large generated recording, for benchmarks over a million
// launches: what the agent writes for a long run, without the variety of
// the small synthetic recording.
type Big struct {
	Launches int // launches, 1..Launches
	// DifferAt is the launch (1-based) whose region hashes differ from
	// those another Big recording with DifferAt 0 has; 0 for none.
	DifferAt int
	// Activities adds a kernel execution per launch, written one frame
	// after its launch (as the agent's activity buffers arrive late).
	Activities bool
	// Snapshot records in snapshot mode, every launch selected: the
	// regions hold zeros before and after every launch (stored once in the
	// chunk store), but after launch DifferAt, where they hold 0x01 bytes.
	Snapshot bool
	// NanAt, in hash mode, records with --nan-scan f32,bf16: every AFTER
	// state counts NaN and Inf, and those of launch NanAt count 3 f32 NaN
	// in region 1 (0 for none).
	NanAt int
}

// Number of kernels, streams and distinct callstacks of a Big recording.
const (
	BigKernels    = 50
	BigStreams    = 3
	BigCallstacks = 97
	bigFrame      = 4096 // launches per frame
)

// WriteBig writes a hash-mode (or, with Snapshot, snapshot-mode) recording
// of one process, "box-1", into dir:
// frames of 4096 launches, 2 regions each, BigStreams streams, BigKernels
// kernels, BigCallstacks Python callstacks.
func WriteBig(dir string, o Big) (*recording.Process, error) {
	const start = 1_000_000_000
	mode := recording.MemoryHash
	if o.Snapshot {
		mode = recording.MemorySnapshot
	}
	memory := &pb.MemoryConfig{Mode: mode, ChunkBytes: memhash.ChunkSize}
	if o.NanAt > 0 {
		memory.NanScan = []string{"f32", "bf16"}
	}
	w, err := recording.Create(dir, "box-1", &pb.Batch{Process: &pb.Process{Hostname: "box", Pid: 1,
		StartNs: start, StartUnixNs: startUnixNS, GpuTiming: o.Activities, Memory: memory}})
	if err != nil {
		return nil, err
	}
	sizes := []uint64{1 << 20, 4096}
	var stored [2][]*pb.RegionState // snapshot mode: zeros, and 0x01 bytes
	if o.Snapshot {
		store, err := chunkstore.Create(w.Dir(), chunkstore.Options{})
		if err != nil {
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
	plan := &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}
	if o.Snapshot {
		plan = &pb.MemoryPlan{Status: pb.MemoryPlan_SNAPSHOT, SnapshotSelected: true}
	}
	batch := &pb.Batch{}
	for k := uint64(1); k <= BigKernels; k++ {
		batch.Kernels = append(batch.Kernels, &pb.Kernel{Id: k, Identity: 7000 + k, Name: fmt.Sprintf("kernel_%d", k)})
	}
	for c := uint64(1); c <= BigCallstacks; c++ {
		batch.Callstacks = append(batch.Callstacks, &pb.Callstack{Id: c, Source: "python", Frames: []*pb.Frame{
			py("/home/ada/train.py", uint32(c), "step"), py("/home/ada/train.py", 200, "main")}})
	}
	h := func(seq, r uint64) []byte {
		s := memhash.Sum{uint32(seq), uint32(r), 1, 2}.Bytes()
		return s[:]
	}
	var late []*pb.KernelActivity // the previous frame's kernels
	streamEnd := make([]uint64, BigStreams)
	for i := 1; i <= o.Launches; i++ {
		seq := uint64(i)
		host := start + seq*2_000
		l := &pb.Launch{Seq: seq, Tid: 1, KernelId: seq%BigKernels + 1, Stream: seq % BigStreams, StreamId: uint32(seq%BigStreams) + 7,
			CallstackId: seq%BigCallstacks + 1, CorrelationId: uint32(seq), HostNs: host, Api: 307,
			Grid: &pb.Dim3{X: 128, Y: 1, Z: 1}, Block: &pb.Dim3{X: 256, Y: 1, Z: 1},
			Params: make([]byte, 64), Memory: plan,
			Regions: []*pb.Region{{Address: 1 << 40, Size: sizes[0], ParamOffsets: []uint32{0}}, {Address: 2 << 40, Size: sizes[1], ParamOffsets: []uint32{8}}}}
		batch.Launches = append(batch.Launches, l)
		if o.Activities {
			s := seq % BigStreams
			begin := max(host+5_000, streamEnd[s]+100)
			streamEnd[s] = begin + 1_500
			batch.Activities = append(batch.Activities, &pb.KernelActivity{CorrelationId: l.CorrelationId, StreamId: l.StreamId,
				StartNs: begin, EndNs: streamEnd[s], Name: fmt.Sprintf("kernel_%d", l.KernelId), Grid: l.Grid, Block: l.Block})
		}
		st := &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Snapshot: o.Snapshot}
		switch {
		case o.Snapshot && i == o.DifferAt:
			st.Regions = stored[1]
		case o.Snapshot:
			st.Regions = stored[0]
		default:
			for r := uint64(0); r < 2; r++ {
				hh := h(seq, r)
				if i == o.DifferAt {
					hh = h(seq, r+10)
				}
				rs := &pb.RegionState{Hash: hh, ChunkHashes: hh}
				if o.NanAt > 0 {
					rs.NanCount, rs.InfCount = []uint64{0, 0}, []uint64{0, 0}
					if i == o.NanAt && r == 1 {
						rs.NanCount[0] = 3
					}
				}
				st.Regions = append(st.Regions, rs)
			}
		}
		if o.Snapshot {
			batch.Memory = append(batch.Memory, &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_BEFORE, Snapshot: true, Regions: stored[0]})
		}
		batch.Memory = append(batch.Memory, st)
		if len(batch.Launches) == bigFrame || i == o.Launches {
			batch.Activities, late = late, batch.Activities
			if i == o.Launches {
				batch.Activities = append(batch.Activities, late...)
				batch.End = &pb.End{EndNs: host + 1_000_000, Reason: "exit"}
			}
			if err := w.Write(batch); err != nil {
				w.Close()
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

// CPUTime is the CPU time (user and system) the process has used so far: a
// benchmark reports the difference over its work, which other programs
// sharing the machine's cores change less than they change the wall time.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
