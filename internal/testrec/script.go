package testrec

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Script is a small synthetic process for tests of what diff and nan say about a launch's
// inputs: kernels with parameter layouts, device allocations, and calls in program order
// (kernel launches, CUDA graph replays, copies), each with the bytes it leaves in the
// allocations it writes. WriteScript records it as gpurr record --memory Mode would: every
// launch gets its regions (the allocations its pointer parameters point into) and an AFTER
// state; in snapshot mode a BEFORE state too, and the chunks of both.
type Script struct {
	Host        string
	Pid         uint32
	Rank        *int32
	StartUnixNs int64  // the wall clock at the process's start; launches are 1 ms apart from it
	Mode        string // hash or snapshot
	NanScan     bool   // the GPU counted NaN and Inf as f32 after each launch (--nan-scan f32)
	Kernels     []ScriptKernel
	Allocs      []uint64 // allocation sizes; allocation i has id i+1
	AllocBase   uint64   // address of the first allocation (0: 0x7f00_0000_0000); each is 16 MiB above the one before
	// Cleared are the allocations made stream-ordered, which the agent cleared (format 1.17):
	// zeros until a call writes them.
	Cleared map[int]bool
	Calls   []Call
}

// ScriptKernel is a kernel of a Script: its name and the sizes of its parameters, laid out
// with natural alignment.
type ScriptKernel struct {
	Name   string
	Params []uint32
}

// Call is one call of a Script's program.
type Call struct {
	Kernel int   // index into Script.Kernels, for a launch
	Args   []Arg // one per kernel parameter
	// Writes are the bytes the call leaves in allocations (by index), from their first byte;
	// the rest of an allocation keeps what it held.
	Writes map[int][]byte
	Graph  bool // a CUDA graph replay (cuGraphLaunch): it takes a seq and writes, with no memory state
	Copy   bool // a copy or memset the agent did not see (a 2D copy): it writes, and leaves no record
	// Copied is a copy or memset whose state the agent took (format 1.17): it writes, and
	// leaves a host call (CopyAPI, cuMemcpyHtoDAsync_v2 if "", made at train.py line CopyLine)
	// and a copy state of the allocations it writes, a snapshot in snapshot mode; with
	// CopyLost that state was lost.
	Copied, CopyLost bool
	CopyAPI          string
	CopyLine         uint32
	Lost             bool // a launch whose memory states were lost
	// Unhashed: a launch that ran without memory capture (its plan SKIPPED_ERROR): no state.
	Unhashed bool
	// HashOnly: in snapshot mode, a launch outside the snapshot selection: an AFTER hash only.
	HashOnly bool
}

// Arg is one parameter of a launch: a pointer into an allocation, or bytes.
type Arg struct {
	alloc int // allocation index + 1; 0 for bytes
	Bytes []byte
}

// Ptr is a pointer to the start of allocation i.
func Ptr(i int) Arg { return Arg{alloc: i + 1} }

// I32 is an int parameter.
func I32(v int32) Arg { return Arg{Bytes: binary.LittleEndian.AppendUint32(nil, uint32(v))} }

// F32 is a float parameter.
func F32(v float32) Arg {
	return Arg{Bytes: binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))}
}

// F64 is a double parameter.
func F64(v float64) Arg {
	return Arg{Bytes: binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))}
}

// Raw is a parameter of the given bytes (a struct).
func Raw(b []byte) Arg { return Arg{Bytes: b} }

// address is where allocation i starts.
func (s *Script) address(i int) uint64 {
	base := s.AllocBase
	if base == 0 {
		base = 0x7f00_0000_0000
	}
	return base + uint64(i)<<24
}

// WriteScript writes s as a process of the recording at dir (made if needed) and returns the
// process's name.
func WriteScript(dir string, s Script) (string, error) {
	name := fmt.Sprintf("%s-%d", s.Host, s.Pid)
	proc := &pb.Process{Hostname: s.Host, Pid: s.Pid, Rank: s.Rank, Argv: []string{"python", "train.py"}, StartUnixNs: s.StartUnixNs,
		Memory: &pb.MemoryConfig{Mode: s.Mode, ChunkBytes: memhash.ChunkSize}}
	if s.NanScan {
		proc.Memory.NanScan = []string{"f32"}
	}
	w, err := recording.Create(dir, name, &pb.Batch{Process: proc})
	if err != nil {
		return "", err
	}
	var store *chunkstore.Writer
	if s.Mode == recording.MemorySnapshot {
		if store, err = chunkstore.Create(w.Dir(), chunkstore.Options{}); err != nil {
			return "", err
		}
	}
	b, err := s.batch(store)
	if err == nil {
		err = w.Write(b)
	}
	if store != nil {
		if cerr := store.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return name, err
}

// OpenScript writes s into a temporary folder of tb's and opens its process.
func OpenScript(tb testing.TB, s Script) *recording.Process {
	tb.Helper()
	dir := tb.TempDir()
	if _, err := WriteScript(dir, s); err != nil {
		tb.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return set.Processes[0]
}

// batch is the whole recording of s in one batch.
func (s *Script) batch(store *chunkstore.Writer) (*pb.Batch, error) {
	b := &pb.Batch{}
	params := make([][]*pb.ParamInfo, len(s.Kernels))
	for i, k := range s.Kernels {
		var total uint32
		params[i], total = layout(k.Params)
		b.Kernels = append(b.Kernels, &pb.Kernel{Id: uint64(i + 1), Identity: recording.KernelIdentity("", k.Name), Name: k.Name,
			Demangled: recording.Demangle(k.Name), Params: params[i], ParamBytes: total})
	}
	mem := make([][]byte, len(s.Allocs))
	for i, size := range s.Allocs {
		mem[i] = make([]byte, size)
		a := &pb.Allocation{Id: uint64(i + 1), Kind: pb.Allocation_MEM_ALLOC, Address: s.address(i), Size: size}
		if s.Cleared[i] {
			a.Kind, a.Cleared = pb.Allocation_MEM_ALLOC_ASYNC, true
		}
		b.Allocations = append(b.Allocations, a)
	}
	write := func(c Call) {
		for i, data := range c.Writes {
			copy(mem[i], data)
		}
	}
	state := func(point pb.MemoryState_Point, seq uint64, allocs []int, snap bool) (*pb.MemoryState, error) {
		st := &pb.MemoryState{LaunchSeq: seq, Point: point, Snapshot: snap}
		for _, i := range allocs {
			put := store
			if !snap {
				put = nil
			}
			rs, err := RegionState(mem[i], put)
			if err != nil {
				return nil, err
			}
			if point != pb.MemoryState_BEFORE && s.NanScan {
				nan, inf := countF32(mem[i])
				rs.NanCount, rs.InfCount = []uint64{nan}, []uint64{inf}
			}
			st.Regions = append(st.Regions, rs)
		}
		return st, nil
	}
	seq := uint64(0)
	for n, c := range s.Calls {
		switch {
		case c.Copy:
			write(c)
			continue
		case c.Copied:
			write(c)
			st, err := s.copied(b, c, seq, uint32(1000+n), store, state)
			if err != nil {
				return nil, err
			}
			b.CopyStates = append(b.CopyStates, st)
			continue
		case c.Graph:
			seq++
			b.GraphLaunches = append(b.GraphLaunches, &pb.GraphLaunch{Seq: seq, HostNs: seq * 1e6})
			write(c)
			continue
		}
		seq++
		l := &pb.Launch{Seq: seq, KernelId: uint64(c.Kernel + 1), HostNs: seq * 1e6, Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}}
		var allocs []int
		for a, arg := range c.Args {
			off := params[c.Kernel][a].GetOffset()
			for len(l.Params) < int(off) {
				l.Params = append(l.Params, 0)
			}
			if arg.alloc == 0 {
				l.Params = append(l.Params, arg.Bytes...)
				continue
			}
			i := arg.alloc - 1
			l.Params = binary.LittleEndian.AppendUint64(l.Params, s.address(i))
			r := slices.Index(allocs, i)
			if r < 0 {
				r = len(allocs)
				allocs = append(allocs, i)
				l.Regions = append(l.Regions, &pb.Region{Address: s.address(i), Size: s.Allocs[i], AllocationId: uint64(i + 1)})
			}
			l.Regions[r].ParamOffsets = append(l.Regions[r].ParamOffsets, off)
		}
		b.Launches = append(b.Launches, l)
		if c.Unhashed {
			l.Memory.Status = pb.MemoryPlan_SKIPPED_ERROR
			write(c)
			continue
		}
		snap := store != nil && !c.HashOnly
		if snap {
			l.Memory.Status, l.Memory.SnapshotSelected = pb.MemoryPlan_SNAPSHOT, true
			before, err := state(pb.MemoryState_BEFORE, seq, allocs, true)
			if err != nil {
				return nil, err
			}
			if !c.Lost {
				b.Memory = append(b.Memory, before)
			}
		}
		write(c)
		after, err := state(pb.MemoryState_AFTER, seq, allocs, snap)
		if err != nil {
			return nil, err
		}
		if c.Lost {
			after = &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Lost: true, LostReason: "the GPU faulted"}
		}
		b.Memory = append(b.Memory, after)
	}
	b.Stats = &pb.Stats{Launches: uint64(len(b.Launches)), GraphLaunches: uint64(len(b.GraphLaunches))}
	b.End = &pb.End{Reason: "exit"}
	return b, nil
}

// copied records copy c, made after launch call seq with correlation id corr: its host call and
// callstack, and its copy state (state takes it).
func (s *Script) copied(b *pb.Batch, c Call, seq uint64, corr uint32, store *chunkstore.Writer,
	state func(pb.MemoryState_Point, uint64, []int, bool) (*pb.MemoryState, error)) (*pb.MemoryState, error) {
	frames := []*pb.Frame{{Kind: pb.Frame_PYTHON, File: "train.py", Line: c.CopyLine, Function: "<module>"}}
	cs := &pb.Callstack{Id: recording.CallstackID(frames), Frames: frames}
	b.Callstacks = append(b.Callstacks, cs)
	api := c.CopyAPI
	if api == "" {
		api = "cuMemcpyHtoDAsync_v2"
	}
	b.HostCalls = append(b.HostCalls, &pb.HostCall{Api: api, CorrelationId: corr, CallstackId: cs.Id, StartNs: seq*1e6 + 1, EndNs: seq*1e6 + 2})
	allocs := slices.Sorted(maps.Keys(c.Writes))
	st, err := state(pb.MemoryState_COPY, seq, allocs, store != nil)
	if err != nil {
		return nil, err
	}
	if c.CopyLost {
		st = &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_COPY, Lost: true, LostReason: "memory capture had stopped"}
	}
	st.CorrelationId = corr
	for _, i := range allocs {
		st.CopyRegions = append(st.CopyRegions, &pb.Region{Address: s.address(i), Size: s.Allocs[i], AllocationId: uint64(i + 1)})
	}
	return st, nil
}

// countF32 counts b's NaN and Inf elements as f32, as the agent's --nan-scan f32 does.
func countF32(b []byte) (nan, inf uint64) {
	for i := 0; i+4 <= len(b); i += 4 {
		switch v := binary.LittleEndian.Uint32(b[i:]) & 0x7fff_ffff; {
		case v > 0x7f80_0000:
			nan++
		case v == 0x7f80_0000:
			inf++
		}
	}
	return nan, inf
}
