package testrec

import (
	"encoding/binary"
	"math"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Threaded is a run of a program whose worker threads each launch on a stream of their own,
// the shape of gputest/workloads/threads_paired.py: the main thread launches an init kernel
// on the legacy stream, then starts Workers threads one after another (tids pid+1, pid+2,
// ...); each creates a stream, copies in data of its own and fills a buffer of its own from
// it, Launches times, on its stream. Which thread reaches its launches first is up to the
// scheduler (Order), and so is which stream handle each thread gets: the k-th thread to
// launch gets the k-th handle. Recorded with --memory hash; one process, Name(0).
type Threaded struct {
	Workers  int
	Launches int   // launches per worker; 1 when 0
	Order    []int // the workers (from 0) in the order they launch, round by round; nil: creation order
	Changed  int   // the worker (from 1) whose data differs from the other runs'; 0: none
	Late     bool  // each worker's launches are written in a batch of its own, in creation order: those of workers that launched first reach the recording after later launches
}

// Callstacks of the Threaded program, innermost frame first.
var (
	csThreadInit = callstack([]*pb.Frame{py(threadsScript, 12, "main"), py(threadsScript, 40, "<module>")})
	csThreadWork = callstack([]*pb.Frame{py(threadsScript, 25, "work"), py("/usr/lib/python3.12/threading.py", 1010, "Thread.run")})
)

const (
	threadsScript = "/home/ada/threads.py"
	kThreadInit   = 1 // Kernel.id of the init kernel
	kThreadFill   = 2 // and of the workers' fill kernel
)

// WorkerTID is the Linux thread id of worker w (from 0) of a Threaded run.
func WorkerTID(w int) uint32 { return pid(0) + 1 + uint32(w) }

// ThreadedBatches are the batches the agent writes for a Threaded run, and the seq of each
// launch of each worker (from 0), in the order it made them.
func ThreadedBatches(o Threaded) (batches []*pb.Batch, seqs [][]uint64) {
	order, rounds := o.Order, max(o.Launches, 1)
	if order == nil {
		for w := range o.Workers {
			order = append(order, w)
		}
	}
	proc := &pb.Process{Hostname: "gpu-box", Pid: pid(0), Argv: []string{"python", threadsScript}, StartNs: startNS, StartUnixNs: startUnixNS,
		Memory: &pb.MemoryConfig{Mode: recording.MemoryHash, ChunkBytes: memhash.ChunkSize}}
	first := &pb.Batch{Process: proc, Callstacks: []*pb.Callstack{csThreadInit, csThreadWork},
		Kernels: []*pb.Kernel{{Id: kThreadInit, Identity: 0x1a17, Name: "init_kernel"}, {Id: kThreadFill, Identity: 0xf111, Name: "fill_kernel"}}}
	seq := uint64(0)
	launch := func(b *pb.Batch, tid uint32, stream, kernel uint64, cs *pb.Callstack, address uint64, data []byte) {
		seq++
		b.Launches = append(b.Launches, &pb.Launch{Seq: seq, Tid: tid, Stream: stream, KernelId: kernel, CallstackId: cs.Id, HostNs: startNS + seq*launchGapNS, Api: 307,
			Regions: []*pb.Region{{Address: address, Size: uint64(len(data)), ParamOffsets: []uint32{0}}}})
		rs, _ := RegionState(data, nil) // without a store it cannot fail
		b.Memory = append(b.Memory, &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{rs}})
	}
	launch(first, pid(0), 0, kThreadInit, csThreadInit, 0x7f00_0000_0000, threadData(0))
	perWorker := make([]*pb.Batch, o.Workers)
	seqs = make([][]uint64, o.Workers)
	for w := range perWorker {
		perWorker[w] = &pb.Batch{}
	}
	inOrder := &pb.Batch{}
	for r := range rounds {
		for k, w := range order {
			data := threadData(float32(w+1) * float32(r+1))
			if w+1 == o.Changed {
				data = threadData(-1)
			}
			b := inOrder
			if o.Late {
				b = perWorker[w]
			}
			launch(b, WorkerTID(w), 0x5000_0000+uint64(k)<<8, kThreadFill, csThreadWork, 0x7f00_1000_0000+uint64(w)<<20, data)
			seqs[w] = append(seqs[w], seq)
		}
	}
	batches = []*pb.Batch{first}
	if o.Late {
		batches = append(batches, perWorker...)
	} else {
		batches = append(batches, inOrder)
	}
	end := &pb.Batch{Stats: &pb.Stats{Launches: seq}, End: &pb.End{Reason: "exit"}}
	return append(batches, end), seqs
}

// threadData is a worker's buffer after its fill: 64 copies of v.
func threadData(v float32) []byte {
	b := make([]byte, 0, 256)
	for range 64 {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// WriteThreaded writes a Threaded run into dir and opens its process.
func WriteThreaded(dir string, o Threaded) (*recording.Process, error) {
	batches, _ := ThreadedBatches(o)
	if _, err := writeFrames(dir, 0, batches); err != nil {
		return nil, err
	}
	set, err := recording.Open(dir)
	if err != nil {
		return nil, err
	}
	return set.Processes[0], nil
}
