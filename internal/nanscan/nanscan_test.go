package nanscan

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func f32s(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// TestScanInLaunchOrder: the recording holds the states of later launches
// ahead of earlier ones (the GPU finished them first, or a flight recorder
// wrote them at exit); nan still reports the first launch in launch order,
// and sees a BEFORE state written frames after its AFTER.
func TestScanInLaunchOrder(t *testing.T) {
	nan := float32(math.NaN())
	w, err := recording.Create(t.TempDir(), "p-1", &pb.Batch{Process: &pb.Process{Pid: 1,
		Memory: &pb.MemoryConfig{Mode: "snapshot", ChunkBytes: memhash.ChunkSize}}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := chunkstore.Create(w.Dir(), chunkstore.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	state := func(seq uint64, point pb.MemoryState_Point, data []byte) *pb.MemoryState {
		rs, err := testrec.RegionState(data, store)
		if err != nil {
			t.Fatal(err)
		}
		return &pb.MemoryState{LaunchSeq: seq, Point: point, Snapshot: true, Regions: []*pb.RegionState{rs}}
	}
	plan := &pb.MemoryPlan{Status: pb.MemoryPlan_SNAPSHOT}
	launch := func(seq uint64) *pb.Launch {
		return &pb.Launch{Seq: seq, KernelId: seq, Memory: plan, Regions: []*pb.Region{{Address: seq << 20, Size: 8}}}
	}
	for _, b := range []*pb.Batch{
		{Kernels: []*pb.Kernel{{Id: 1, Name: "one"}, {Id: 2, Name: "two"}, {Id: 3, Name: "three"}},
			Launches: []*pb.Launch{launch(1), launch(2), launch(3)}},
		{Memory: []*pb.MemoryState{state(3, pb.MemoryState_BEFORE, f32s(0, 0)), state(3, pb.MemoryState_AFTER, f32s(nan, nan)),
			state(1, pb.MemoryState_BEFORE, f32s(0, 0)), state(1, pb.MemoryState_AFTER, f32s(1, 2)), state(2, pb.MemoryState_AFTER, f32s(3, nan))}},
		{Memory: []*pb.MemoryState{state(2, pb.MemoryState_BEFORE, f32s(0, nan))}, End: &pb.End{Reason: "exit"}},
	} {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	set := closeAndOpen(t, w, store)
	found, st := scanSnapshotsF32(t, set)
	if found == nil || found.Launch.GetSeq() != 2 || found.Kernel.GetName() != "two" || len(found.Regions) != 1 {
		t.Fatalf("found %+v, want launch 2", found)
	}
	r := found.Regions[0]
	if c := r.Counts[0]; c.NaN != 1 || c.First != 4 || !r.Before || r.Region.GetAddress() != 2<<20 {
		t.Errorf("region %+v counts %+v, want 1 NaN at byte 4, there before", r, r.Counts)
	}
	if st.Launches != 2 {
		t.Errorf("%d launches scanned, want 2 (launch 3 comes after the finding)", st.Launches)
	}
}

// TestGPUCountsAndSnapshots: with the GPU's counts and snapshots both in
// the recording, the first launch comes from the counts, its snapshot gives
// offsets, and counts the snapshot contradicts are reported.
func TestGPUCountsAndSnapshots(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	w, err := recording.Create(t.TempDir(), "p-1", &pb.Batch{Process: &pb.Process{Pid: 1,
		Memory: &pb.MemoryConfig{Mode: "snapshot", ChunkBytes: memhash.ChunkSize, NanScan: []string{"f32", "bf16"}}}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := chunkstore.Create(w.Dir(), chunkstore.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	// gpu: the NaN and Inf counts as f32 and bf16 the agent wrote.
	state := func(seq uint64, data []byte, gpu ...uint64) *pb.MemoryState {
		rs, err := testrec.RegionState(data, store)
		if err != nil {
			t.Fatal(err)
		}
		rs.NanCount, rs.InfCount = []uint64{gpu[0], gpu[2]}, []uint64{gpu[1], gpu[3]}
		return &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Snapshot: true, Regions: []*pb.RegionState{rs}}
	}
	var launches []*pb.Launch
	for seq := uint64(1); seq <= 3; seq++ {
		launches = append(launches, &pb.Launch{Seq: seq, KernelId: 1, Regions: []*pb.Region{{Address: seq << 20, Size: 12}}})
	}
	for _, b := range []*pb.Batch{
		{Kernels: []*pb.Kernel{{Id: 1, Name: "k"}}, Launches: launches},
		// Launch 2's f32 counts are right, its bf16 counts wrong (its
		// bytes hold 1 NaN and 1 Inf as bf16 too).
		{Memory: []*pb.MemoryState{state(3, f32s(nan, 0, 0), 5, 0, 0, 0), state(1, f32s(1, 2, 3), 0, 0, 0, 0), state(2, f32s(1, inf, nan), 1, 1, 2, 0)},
			End: &pb.End{Reason: "exit"}},
	} {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	set := closeAndOpen(t, w, store)
	types, err := dtype.ParseList("f32")
	if err != nil {
		t.Fatal(err)
	}
	found, st, err := Scan(set.Processes[0], types, Options{Explicit: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Source != GPUCounts || st.Launches != 2 || found == nil || found.Launch.GetSeq() != 2 || found.Source != Snapshots {
		t.Fatalf("found %+v (stats %+v), want launch 2 from the GPU's counts, decoded from its snapshot", found, st)
	}
	if c := found.Regions[0].Counts[0]; c.NaN != 1 || c.Inf != 1 || c.First != 4 || len(found.Disagree) != 0 {
		t.Errorf("counts %+v, disagreements %q; want 1 NaN, 1 Inf, the first at byte 4, none", c, found.Disagree)
	}

	if types, err = dtype.ParseList("f32,bf16"); err != nil {
		t.Fatal(err)
	}
	found, _, err = Scan(set.Processes[0], types, Options{Explicit: true})
	if err != nil {
		t.Fatal(err)
	}
	if found == nil || found.Launch.GetSeq() != 2 || len(found.Disagree) != 1 ||
		found.Disagree[0] != "region 0 as bf16: the GPU counted 2 NaN, 0 Inf; the snapshot holds 1 NaN, 1 Inf" {
		t.Errorf("found %+v, want launch 2 with one disagreement", found)
	}
}

// closeAndOpen finishes a recording written by a test (store nil: none)
// and opens it.
func closeAndOpen(t *testing.T, w *recording.Writer, store *chunkstore.Writer) *recording.Set {
	t.Helper()
	if store != nil {
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(w.Dir())
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestDamagedGPUCounts: a state with fewer counts than the recording says
// it counted is read as not counted for the missing types, not a panic.
func TestDamagedGPUCounts(t *testing.T) {
	w, err := recording.Create(t.TempDir(), "p-1", &pb.Batch{Process: &pb.Process{Pid: 1,
		Memory: &pb.MemoryConfig{Mode: "hash", ChunkBytes: memhash.ChunkSize, NanScan: []string{"f32", "bf16"}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := make([]byte, 16)
	err = w.Write(&pb.Batch{Kernels: []*pb.Kernel{{Id: 1, Name: "k"}},
		Launches: []*pb.Launch{{Seq: 1, KernelId: 1, Regions: []*pb.Region{{Address: 1 << 20, Size: 8}}}},
		Memory: []*pb.MemoryState{{LaunchSeq: 1, Point: pb.MemoryState_AFTER,
			Regions: []*pb.RegionState{{Hash: h, ChunkHashes: h, NanCount: []uint64{0, 7}, InfCount: []uint64{0}}}}},
		End: &pb.End{Reason: "exit"}})
	if err != nil {
		t.Fatal(err)
	}
	set := closeAndOpen(t, w, nil)
	types, err := dtype.ParseList("bf16,f32")
	if err != nil {
		t.Fatal(err)
	}
	found, st, err := Scan(set.Processes[0], types, Options{Explicit: true})
	if err != nil || found != nil || st.Launches != 1 {
		t.Errorf("found %+v, %+v, %v; want no NaN in 1 launch (the bf16 count is damaged)", found, st, err)
	}
}

// From the GPU's counts, a recording with write sets (format 1.11): a carried region holds the
// counts of the state it was carried from; one carried from a lost state holds none, is not
// scanned and is counted so, and, as region 0 of launch 9, does not hide the counts of the
// launch's other regions.
// scanSnapshotsF32 scans a recording's snapshots for NaN and Inf as f32.
func scanSnapshotsF32(t *testing.T, set *recording.Set) (*Finding, Stats) {
	t.Helper()
	f32, err := dtype.Parse("f32")
	if err != nil {
		t.Fatal(err)
	}
	found, st, err := Scan(set.Processes[0], []*dtype.Type{f32}, Options{Explicit: true})
	if err != nil {
		t.Fatal(err)
	}
	return found, st
}

func TestWriteSetsCounts(t *testing.T) {
	f32, err := dtype.Parse("f32")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		nanAt, found      uint64
		launches, unknown int
	}{
		{nanAt: testrec.WriteSetsUnknown, found: testrec.WriteSetsUnknown, launches: 8, unknown: 1},
		{nanAt: 5, found: 5, launches: 5, unknown: 0},
		{launches: 8, unknown: 1},
	} {
		set := testrec.OpenBatches(t, testrec.WriteSetsBatches(testrec.WriteSetsOptions{NaNAt: c.nanAt})...)
		found, st, err := Scan(set.Processes[0], []*dtype.Type{f32}, Options{Explicit: false})
		if err != nil {
			t.Fatal(err)
		}
		got := uint64(0)
		if found != nil {
			got = found.Launch.GetSeq()
		}
		if got != c.found || st.Source != GPUCounts || st.Launches != c.launches || st.Unknown != c.unknown || st.NotScanned != 1 {
			t.Errorf("NaN from launch %d: found after launch %d, %+v; want launch %d, %d launches, %d unknown, 1 not scanned (the lost state)",
				c.nanAt, got, st, c.found, c.launches, c.unknown)
		}
		if found != nil && (len(found.Regions) != 1 || found.Regions[0].Index != 1 || found.Regions[0].Counts[0].NaN != 1) {
			t.Errorf("NaN from launch %d: regions %+v", c.nanAt, found.Regions)
		}
	}
}

// From snapshots: a region carried from a lost state has no chunks to read; it is skipped and
// counted, and the launch's other region is scanned.
func TestWriteSetsSnapshots(t *testing.T) {
	nan := float32(math.NaN())
	w, err := recording.Create(t.TempDir(), "p-1", &pb.Batch{Process: &pb.Process{Pid: 1,
		Memory: &pb.MemoryConfig{Mode: "snapshot", ChunkBytes: memhash.ChunkSize, WriteSets: "proved"}}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := chunkstore.Create(w.Dir(), chunkstore.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := testrec.RegionState(f32s(1, nan), store)
	if err != nil {
		t.Fatal(err)
	}
	unknown := &pb.RegionState{Carried: pb.RegionState_PROVED_READ_ONLY, Unknown: true}
	regions := []*pb.Region{{Address: 1 << 20, Size: 8}, {Address: 2 << 20, Size: 8}}
	err = w.Write(&pb.Batch{Kernels: []*pb.Kernel{{Id: 1, Name: "k"}},
		Launches: []*pb.Launch{{Seq: 1, KernelId: 1, Regions: regions, Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_SNAPSHOT}}},
		Memory: []*pb.MemoryState{
			{LaunchSeq: 1, Point: pb.MemoryState_BEFORE, Snapshot: true, Regions: []*pb.RegionState{unknown, rs}},
			{LaunchSeq: 1, Point: pb.MemoryState_AFTER, Snapshot: true, Regions: []*pb.RegionState{unknown, rs}},
		},
		End: &pb.End{Reason: "exit"}})
	if err != nil {
		t.Fatal(err)
	}
	set := closeAndOpen(t, w, store)
	found, st := scanSnapshotsF32(t, set)
	if found == nil || len(found.Regions) != 1 || found.Regions[0].Index != 1 || !found.Regions[0].Before || st.Unknown != 1 || st.Launches != 1 {
		t.Errorf("found %+v, %+v; want region 1 of launch 1, there before, 1 unknown", found, st)
	}
}

// With --hash-steps, a region no launch of the steps hashed reached before the one that made
// the NaN has its counts from the last step digest: the launch made it.
func TestInputsFromDigest(t *testing.T) {
	o := testrec.DefaultTrained()
	o.Hash, o.HashSteps = true, [2]int{3, 3}
	o.NaNStep, o.NaNLaunch = 3, 0 // step 3's first launch: its regions were last written in step 2
	types, _ := dtype.ParseFloatList("f32")
	f, _, err := Scan(testrec.OpenTrained(t, o), types, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f == nil || f.Launch.GetSeq() != 3*4+1 || f.Inputs == nil || f.Inputs.Kind != "made" {
		t.Fatalf("found %+v; want launch 13, made there", f)
	}
	if !slices.ContainsFunc(f.Inputs.Regions, func(in Input) bool { return in.From == "digest" && in.State == "finite" }) {
		t.Errorf("no input counted from the digest: %+v", f.Inputs.Regions)
	}
}

// NaN bit patterns in memory NCCL made for itself (its flags and FIFOs) are no finding: they
// are left out, counted, unless asked for; a NaN of the program's is found past them, and its
// inputs list NCCL's region as left out.
func TestLibraryMemoryLeftOut(t *testing.T) {
	o := testrec.DefaultTrained()
	o.Hash, o.HashSteps, o.NCCL, o.NCCLNaN = true, [2]int{0, 5}, 1, true
	types, _ := dtype.ParseFloatList("f32")
	f, st, err := Scan(testrec.OpenTrained(t, o), types, Options{})
	if err != nil || f != nil || st.Library[recording.OwnerNCCL] != 6 {
		t.Fatalf("found %+v, library left out %v, %v; want none found, 6 of NCCL's states left out", f, st.Library, err)
	}
	f, _, err = Scan(testrec.OpenTrained(t, o), types, Options{IncludeLibrary: true})
	if err != nil || f == nil || f.Launch.GetSeq() != 1 {
		t.Fatalf("with IncludeLibrary: found %+v, %v; want launch 1 (NCCL's region)", f, err)
	}
	o.NaNStep, o.NaNLaunch = 2, 0
	f, _, err = Scan(testrec.OpenTrained(t, o), types, Options{})
	if err != nil || f == nil || f.Launch.GetSeq() != 2*4+1 || f.Inputs == nil {
		t.Fatalf("found %+v, %v; want launch 9", f, err)
	}
	if !slices.ContainsFunc(f.Inputs.Regions, func(in Input) bool { return in.State == "library" && in.Owner == recording.OwnerNCCL }) {
		t.Errorf("NCCL's region not listed as left out among the inputs: %+v", f.Inputs.Regions)
	}
}

// With XLA's memory preallocated every launch reaches the one pool, which holds the NaN
// autotuning's redzone check left: the launches after it pass that NaN on, and nan finds the
// launch that added one (the loss's), counting those it passed over; with
// IncludeCompile the redzone check itself comes first.
func TestStaleNaNPassedOver(t *testing.T) {
	p := testrec.OpenBatches(t, testrec.JAXPoolBatches()...).Processes[0]
	types, _ := dtype.ParseFloatList("f32")
	f, st, err := Scan(p, types, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f == nil || f.Kernel.GetName() != testrec.JAXNaNKernel || len(f.Regions) != 1 || f.Regions[0].Counts[0].NaN != 2 {
		t.Fatalf("found %+v; want %s, the pool holding 2 NaN", f, testrec.JAXNaNKernel)
	}
	if st.Stale != 4 || st.Compile != 3 {
		t.Errorf("stale %d, compile %d; want the 4 launches before it passed over, autotuning's 3 left out", st.Stale, st.Compile)
	}
	report, err := NewReport(p, types, false, f, st, 2)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := report.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if want := "(passed over: 4 launches whose regions held only the NaN or Inf their memory held before"; !strings.Contains(text.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, text.String())
	}
	f, _, err = Scan(p, types, Options{IncludeCompile: true})
	if err != nil || f == nil || f.Launch.GetSeq() != 3 {
		t.Fatalf("with IncludeCompile: found %+v, %v; want launch 3, the redzone check", f, err)
	}
}

// A memset that fills part of a pool with 0xff bytes (NaN as f32: XLA's preallocated pool,
// which its autotuning fills) made that NaN, not the launch after it, which only reaches the
// pool: nan passes that launch over and finds the one that added a NaN of its own.
func TestNaNFromMemsetPassedOver(t *testing.T) {
	k := testrec.ScriptKernel{Name: "touch", Params: []uint32{8}}
	ff := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	nan := float32(math.NaN())
	p := testrec.OpenScript(t, testrec.Script{Host: "box", Pid: 7, Mode: "hash", NanScan: true,
		Kernels: []testrec.ScriptKernel{k}, Allocs: []uint64{4096},
		Calls: []testrec.Call{
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: f32s(1, 2, 3, 4)}},
			{Copied: true, CopyAPI: "cuMemsetD8Async", CopyLine: 9, Writes: map[int][]byte{0: ff}},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: append(slices.Clone(ff), f32s(nan)...)}},
		}})
	types, _ := dtype.ParseFloatList("f32")
	f, st, err := Scan(p, types, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f == nil || f.Launch.GetSeq() != 3 || st.Stale != 1 {
		t.Fatalf("found %+v, stale %d; want launch 3 (the memset's NaN passed over once)", f, st.Stale)
	}
}

// A NaN a copy brought in, which the launches after it only carry along (in place): the
// first launch to pass it on is the finding, as nothing added one.
func TestNaNFromCopyOnlyPassedOn(t *testing.T) {
	k := testrec.ScriptKernel{Name: "touch", Params: []uint32{8}}
	nan := float32(math.NaN())
	p := testrec.OpenScript(t, testrec.Script{Host: "box", Pid: 7, Mode: "hash", NanScan: true,
		Kernels: []testrec.ScriptKernel{k}, Allocs: []uint64{4096},
		Calls: []testrec.Call{
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: f32s(1, 2)}},
			{Copied: true, CopyLine: 9, Writes: map[int][]byte{0: f32s(nan)}},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}},
		}})
	types, _ := dtype.ParseFloatList("f32")
	f, st, err := Scan(p, types, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f == nil || f.Launch.GetSeq() != 2 || st.Stale != 0 {
		t.Fatalf("found %+v, stale %d; want launch 2, the first to pass the copy's NaN on", f, st.Stale)
	}
}
