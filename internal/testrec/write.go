package testrec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Variant selects what happened to the first rank's recording; the other
// rank's is always whole.
type Variant string

const (
	Good       Variant = "good"       // complete, nothing lost
	Lossy      Variant = "lossy"      // complete, but the agent counted drops and errors
	Incomplete Variant = "incomplete" // killed between frames: no End record
	Truncated  Variant = "truncated"  // killed while writing: the last frame is cut short
	Corrupt    Variant = "corrupt"    // a byte of the second frame is flipped
	Newer      Variant = "newer"      // written by a gpurr of the next major format version
	Empty      Variant = "empty"      // killed before the first write: an empty events file
	// Memory is recorded with memory capture, both ranks: rank 0 in
	// snapshot mode (gemm launches), where one snapshot did not fit the
	// staging ring and capture stopped near the end (disk full), losing a
	// state; rank 1 in hash mode, nothing lost.
	Memory Variant = "memory"
	// CorruptChunk is Memory where one chunk of rank 0's store holds other bytes than those its
	// name hashes, as when they changed between hashing and copying: its entry's CRC is right,
	// its hash is not (CorruptChunkIndex names it).
	CorruptChunk Variant = "corrupt-chunk"
	// Autograd is a PyTorch training step after the good recording's
	// program, both ranks recorded with --memory hash --nan-scan bf16.
	// Rank 0's agent read PyTorch's autograd state: every launch carries
	// its autograd context, and the launches of the backward pass, made on
	// autograd's engine thread, name their node and the callstack of their
	// forward launch, except one (AccumulateGrad) that has none. The
	// gradient of the Linear layer's weight turns NaN in its backward.
	// Rank 1's torch is a version the agent does not know: its launches
	// carry no autograd context, and Process.autograd says why.
	Autograd Variant = "autograd"
	// AutogradDiverged is Autograd where a gemm of the Linear layer's
	// backward computed a different result, as a nondeterministic kernel
	// does: gpurr diff of the two parts ways there.
	AutogradDiverged Variant = "autograd-diverged"
	// StepRange is the good recording made with --step-range '^(init|weights)$' (format
	// 1.8): readers number steps by the program's "init" and "weights" NVTX ranges.
	StepRange Variant = "step-range"
	// Probe is the good recording with rank 0 made with --probe ProbeRecorded (format 1.10):
	// the eager Triton launch ran with live probes (probedTriton), the captured one without
	// (its graph's replays run unprobed), and add_kernel was picked but not instrumented.
	// Rank 1 was recorded without --probe.
	Probe Variant = "probe"
	// WriteSets is one process recorded with --memory hash --nan-scan f32 --write-sets learned
	// (format 1.11): the program WriteSetsOptions describes, whose states carry regions its kernels
	// cannot write, with a write set miss, a lost state and a region carried from it.
	WriteSets Variant = "write-sets"
	// WriteSetsDiverged is WriteSets where the step kernel of launch 6 computed another
	// result: gpurr diff of the two parts ways there, after the miss's since launch.
	WriteSetsDiverged Variant = "write-sets-diverged"
	// Digests is one process recorded with --memory digest (format 1.12): a training run of
	// DefaultTrained, with a step digest at each of its 5 step boundaries.
	Digests Variant = "digests"
	// DigestsDiverged is Digests where launch 1 of step 2 wrote other bytes: gpurr diff of the two
	// parts ways in step 2.
	DigestsDiverged Variant = "digests-diverged"
	// Hang is the good recording with rank 0 made with --hang-timeout 5s --hang-kill (format
	// 1.13): at its end a launch never finishes (HangLaunch), and the agent reported it and
	// ended the program.
	Hang Variant = "hang"
	// Copies is the good recording made by an agent that records copies, memsets, host waits
	// and launch calls' host time (format 1.15), both ranks: after initialization the program
	// loads a batch (copyBatch): copies to and from the GPU, one asynchronous from pageable
	// memory, a memset, a copy of 0 bytes, and waits for a stream, an event and the context.
	// The good recording is one made before 1.15: no copies, no waits.
	Copies Variant = "copies"
	// GraphNodes is the good recording of a program that also builds a graph node by node
	// through the graph API and changes a node's parameters in the executable graph between
	// replays (graphNodesBatch), both ranks.
	GraphNodes Variant = "graph-nodes"
	// TimedSteps is a training run of 12 steps of 4 launches recorded with GPU timing by steps,
	// --gpu-timing-steps 2/5 (format 1.16): the kernels of steps 0, 1, 5 and 10 timed, the
	// launches of the others untimed.
	TimedSteps Variant = "timed-steps"
)

// StepRangeRecorded is the step range of the StepRange variant.
const StepRangeRecorded = "^(init|weights)$"

// Variants lists every variant.
var Variants = []Variant{Good, Lossy, Incomplete, Truncated, Corrupt, Newer, Empty, Memory, CorruptChunk, Autograd, AutogradDiverged, StepRange, Probe,
	WriteSets, WriteSetsDiverged, Digests, DigestsDiverged, Hang, Copies, GraphNodes, TimedSteps}

// Write writes a synthetic recording into dir (created if needed).
func Write(dir string, v Variant) error {
	if !slices.Contains(Variants, v) {
		return fmt.Errorf("testrec: unknown variant %q", v)
	}
	switch v {
	case Digests, DigestsDiverged, TimedSteps:
		o := DefaultTrained()
		if v == DigestsDiverged {
			o.DivergeStep, o.DivergeLaunch = 2, 1
		}
		if v == TimedSteps {
			o.Steps, o.TimedSteps = 12, [2]int{2, 5}
		}
		if err := recording.CreateSet(dir, []string{"python", TrainedScript}); err != nil {
			return err
		}
		return WriteTrained(dir, o)
	case WriteSets, WriteSetsDiverged:
		o := WriteSetsOptions{}
		if v == WriteSetsDiverged {
			o.Diverge = 6
		}
		_, err := writeFrames(dir, 0, WriteSetsBatches(o))
		return err
	}
	for _, img := range Images() {
		if _, err := recording.PutModule(dir, img); err != nil {
			return err
		}
	}
	if err := writeVariant(dir, v); err != nil {
		return err
	}
	for rank := 1; rank < Ranks; rank++ {
		if _, err := writeFrames(dir, rank, build(rank, variantOptions(v, rank))); err != nil {
			return err
		}
	}
	return nil
}

// variantOptions is how the agent recorded rank's process of variant v.
func variantOptions(v Variant, rank int) options {
	var o options
	switch v {
	case Lossy:
		o.lossy = rank == 0
	case Memory, CorruptChunk:
		o.memory = hashConfig()
		if rank == 0 {
			o.memory, o.stopMemory = snapshotConfig(), true
		}
	case Autograd, AutogradDiverged:
		o.memory, o.autograd = hashConfig(), linkedTorch()
		if rank != 0 {
			o.autograd = unlinkedTorch()
		}
		o.diverge = v == AutogradDiverged
	case StepRange:
		o.stepRange = StepRangeRecorded
	case Probe:
		o.probe = rank == 0
	case Hang:
		o.hang = rank == 0
	case Copies:
		o.copies = true
	case GraphNodes:
		o.graphNodes = true
	}
	return o
}

// writeFrames writes the batches as one process and returns the events
// file's size after each frame.
func writeFrames(dir string, rank int, batches []*pb.Batch) (ends []int64, err error) {
	w, err := recording.Create(dir, Name(rank), batches[0])
	if err != nil {
		return nil, err
	}
	path := filepath.Join(w.Dir(), recording.EventsFile)
	size := func() {
		if st, serr := os.Stat(path); serr == nil {
			ends = append(ends, st.Size())
		}
	}
	size()
	for _, b := range batches[1:] {
		if err := w.Write(b); err != nil {
			w.Close()
			return nil, err
		}
		size()
	}
	return ends, w.Close()
}

// writeVariant writes rank 0's process, and the chunk store of its snapshots.
func writeVariant(dir string, v Variant) error {
	o := variantOptions(v, 0)
	type chunk struct {
		hash [16]byte
		data []byte
	}
	var chunks []chunk
	o.storeChunk = func(hash [16]byte, data []byte) { chunks = append(chunks, chunk{hash, data}) }
	batches := build(0, o)
	if v == Incomplete {
		batches = batches[:len(batches)-1]
	}
	ends, err := writeFrames(dir, 0, batches)
	if err != nil {
		return err
	}
	if len(chunks) > 0 {
		store, err := chunkstore.Create(filepath.Join(dir, Name(0)), chunkstore.Options{})
		if err != nil {
			return err
		}
		for i, c := range chunks {
			if v == CorruptChunk && i == CorruptChunkIndex {
				c.data = slices.Clone(c.data)
				c.data[len(c.data)/2] ^= 0x01
			}
			if err := store.Put(c.hash, c.data); err != nil {
				return errors.Join(err, store.Close())
			}
		}
		if err := store.Close(); err != nil {
			return err
		}
	}
	path := filepath.Join(dir, Name(0), recording.EventsFile)
	switch v {
	case Truncated:
		last, prev := ends[len(ends)-1], ends[len(ends)-2]
		return os.Truncate(path, prev+(last-prev)/2)
	case Corrupt:
		return patch(path, func(b []byte) { b[corruptOffset(ends)] ^= 0x55 })
	case Newer:
		return patch(path, func(b []byte) { binary.LittleEndian.PutUint16(b[8:], recording.MajorVersion+1) })
	case Empty:
		return os.Truncate(path, 0)
	}
	return nil
}

// CorruptChunkIndex is which chunk the CorruptChunk variant alters, in the order the agent wrote
// them: the second, the first chunk stored of the AFTER state of the first gemm.
const CorruptChunkIndex = 1

// corruptOffset is the byte the Corrupt variant flips: the middle of the
// second frame's payload, given the file size after each frame.
func corruptOffset(ends []int64) int64 {
	const frameHeader = 12
	start := ends[0] + frameHeader
	return start + (ends[1]-start)/2
}

func patch(path string, change func([]byte)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	change(b)
	return os.WriteFile(path, b, 0o600)
}

// Open writes a synthetic recording into a temporary directory of tb and
// opens it: the usual first line of a test that reads recordings.
func Open(tb testing.TB, v Variant) *recording.Set {
	tb.Helper()
	dir := tb.TempDir()
	if err := Write(dir, v); err != nil {
		tb.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

// OpenBatches writes a recording of one process, "solo", that wrote
// batches (the first holds its Process), into a temporary directory of
// tb, and opens it: for a test of records the variants do not hold.
func OpenBatches(tb testing.TB, batches ...*pb.Batch) *recording.Set {
	tb.Helper()
	dir := tb.TempDir()
	w, err := recording.Create(dir, "solo", batches[0])
	if err != nil {
		tb.Fatal(err)
	}
	for _, b := range batches[1:] {
		if err := w.Write(b); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	set, err := recording.Open(filepath.Join(dir, "solo"))
	if err != nil {
		tb.Fatal(err)
	}
	return set
}
