package memview_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// launches reads every launch of p both ways, loaded (FromLinks) and
// streamed (FromRecord), checks that the two agree, and returns them by
// sequence number.
func launches(t *testing.T, p *recording.Process) map[uint64]memview.Launch {
	t.Helper()
	data, err := p.Load()
	if err != nil {
		t.Fatal(err)
	}
	links := data.Links()
	out := map[uint64]memview.Launch{}
	var seqs []uint64
	for _, l := range data.Launches {
		ml, ok := memview.FromLinks(links, l.GetSeq())
		if !ok || ml.Launch != l {
			t.Fatalf("FromLinks(%d): %v, %v", l.GetSeq(), ml.Launch, ok)
		}
		out[l.GetSeq()] = ml
		seqs = append(seqs, l.GetSeq())
	}
	if _, ok := memview.FromLinks(links, 1<<40); ok {
		t.Error("FromLinks found a launch the recording does not hold")
	}
	_, err = p.Ordered(seqs, func(r *recording.LaunchRecord) error {
		got, want := memview.FromRecord(r), out[r.Launch.GetSeq()]
		for _, pt := range []pb.MemoryState_Point{memview.Before, memview.After} {
			g, w := got.State(pt), want.State(pt)
			if (g == nil) != (w == nil) || g.GetLost() != w.GetLost() || g.GetSnapshot() != w.GetSnapshot() || g.GetPoint() != w.GetPoint() {
				t.Errorf("launch %d %v: FromRecord %v, FromLinks %v", r.Launch.GetSeq(), pt, g, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStates: State's verdict on every launch of testrec's memory
// recording (a snapshot-mode rank with selected, unselected, skipped and
// lost launches; a hash-mode rank) follows the records, in the documented
// order. Its chunk store is removed here, so every read of a state that has
// bytes fails with the store's error, and State still answers.
func TestStates(t *testing.T) {
	set := testrec.Open(t, testrec.Memory)
	for _, p := range set.Processes {
		if err := os.RemoveAll(filepath.Join(p.Dir, chunkstore.DirName)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[error]int{}
	for _, p := range set.Processes {
		v := memview.New(p)
		mode := p.Info.GetMemory().GetMode()
		for seq, l := range launches(t, p) {
			for _, pt := range []pb.MemoryState_Point{memview.Before, memview.After} {
				st := l.State(pt)
				var want error
				switch {
				case mode != "snapshot":
					want = memview.ErrNoSnapshots
				case st == nil:
					want = memview.ErrNoState
				case st.GetLost():
					want = memview.ErrLost
				case !st.GetSnapshot():
					want = memview.ErrHashOnly
				}
				seen[want]++
				got, err := v.State(l, pt)
				var e *memview.Error
				switch {
				case want == nil && (err != nil || got != st || !memview.HasBytes(st)):
					t.Errorf("%s launch %d %v: State %v, %v; want the state", p.Name, seq, pt, got, err)
				case want != nil && (got != nil || !errors.As(err, &e) || e.Err != want || e.Seq != seq || e.Point != pt || e.Mode != mode || memview.HasBytes(st)):
					t.Errorf("%s launch %d %v: State %v, %v; want %v", p.Name, seq, pt, got, err, want)
				}
				if want != nil || len(l.Launch.GetRegions()) == 0 {
					continue
				}
				if _, _, err := v.Read(l, pt, 0, 0, 1); !errors.Is(err, chunkstore.ErrNoChunks) {
					t.Errorf("%s launch %d %v: Read without a chunk store: %v", p.Name, seq, pt, err)
				}
				if _, err := v.Chunk(l, pt, len(l.Launch.GetRegions()), 0); !errors.Is(err, memview.ErrNoRegion) {
					t.Errorf("%s launch %d %v: a region past the last: %v", p.Name, seq, pt, err)
				}
			}
		}
		if _, err := v.Store(); mode == "snapshot" && !errors.Is(err, chunkstore.ErrNoChunks) {
			t.Errorf("%s: Store: %v", p.Name, err)
		}
		if err := v.Close(); err != nil {
			t.Error(err)
		}
	}
	for _, want := range []error{nil, memview.ErrNoSnapshots, memview.ErrNoState, memview.ErrLost, memview.ErrHashOnly} {
		if seen[want] == 0 {
			t.Errorf("the recording has no state of the case %v", want)
		}
	}
}

// writeSnapshots writes a snapshot-mode recording of one launch whose one
// region has before and after states holding before and after; chunk 1
// of after was dropped while recording.
// snapshotRecording starts the recording of process box-PID in a new folder, with its chunk store.
func snapshotRecording(t *testing.T, pid uint32, memory *pb.MemoryConfig) (string, *recording.Writer, *chunkstore.Writer) {
	t.Helper()
	dir := t.TempDir()
	w, err := recording.Create(dir, fmt.Sprintf("box-%d", pid), &pb.Batch{Process: &pb.Process{Hostname: "box", Pid: pid, Memory: memory}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := chunkstore.Create(w.Dir(), chunkstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, w, store
}

func writeSnapshots(t *testing.T, before, after []byte) *recording.Process {
	t.Helper()
	dir, w, store := snapshotRecording(t, 5, &pb.MemoryConfig{Mode: "snapshot", ChunkBytes: memhash.ChunkSize})
	rsBefore, err := testrec.RegionState(before, store)
	if err != nil {
		t.Fatal(err)
	}
	rsAfter, err := testrec.RegionState(after, nil) // hashes only: put all but chunk 1
	if err != nil {
		t.Fatal(err)
	}
	for k, h := range recording.ChunkHashes(rsAfter) {
		if lo := k * memhash.ChunkSize; k != 1 {
			if err := store.Put([16]byte(h), after[lo:min(lo+memhash.ChunkSize, len(after))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := &pb.Batch{
		Launches: []*pb.Launch{{Seq: 1, Regions: []*pb.Region{{Address: 0x7000_0000, Size: uint64(len(after))}}}},
		Memory: []*pb.MemoryState{
			{LaunchSeq: 1, Point: memview.After, Snapshot: true, Regions: []*pb.RegionState{rsAfter}},
			{LaunchSeq: 1, Point: memview.Before, Snapshot: true, Regions: []*pb.RegionState{rsBefore}},
		},
		End: &pb.End{Reason: "exit"},
	}
	if err := errors.Join(w.Write(b), store.Close(), w.Close()); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set.Processes[0]
}

func TestRead(t *testing.T) {
	const size = 3*memhash.ChunkSize - 1000
	before, after := make([]byte, size), make([]byte, size)
	for i := range before {
		before[i], after[i] = byte(i), byte(i/7)
	}
	p := writeSnapshots(t, before, after)
	l := launches(t, p)[1]
	v := memview.New(p)
	defer v.Close()
	if v.ChunkBytes() != memhash.ChunkSize {
		t.Errorf("ChunkBytes %d", v.ChunkBytes())
	}

	got, missing, err := v.Read(l, memview.Before, 0, 0, size)
	if err != nil || missing != nil || !bytes.Equal(got, before) {
		t.Fatalf("the region before: %d bytes, missing %v, %v", len(got), missing, err)
	}
	// Callers judge every launch of a long recording: that costs no allocation.
	if n := testing.AllocsPerRun(100, func() {
		if _, err := v.State(l, memview.After); err != nil || !memview.HasBytes(l.Before) {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("State allocates %v times", n)
	}
	if region, _ := memhash.Hash(got); region.Bytes() != [16]byte(l.Before.Regions[0].Hash) {
		t.Error("the bytes read do not hash to the region's recorded hash")
	}
	for _, r := range [][2]uint64{{memhash.ChunkSize - 3, memhash.ChunkSize + 5}, {7, 7}, {size - 10, size}} {
		got, _, err := v.Read(l, memview.Before, 0, r[0], r[1])
		if err != nil || !bytes.Equal(got, before[r[0]:r[1]]) {
			t.Errorf("bytes [%d, %d) before: %v", r[0], r[1], err)
		}
	}
	if _, _, err := v.Read(l, memview.Before, 0, 10, size+1); err == nil || !strings.Contains(err.Error(), "outside region 0") {
		t.Errorf("a range past the region: %v", err)
	}
	for k := range 3 {
		lo := k * memhash.ChunkSize
		got, err := v.Chunk(l, memview.Before, 0, k)
		if err != nil || !bytes.Equal(got, before[lo:min(lo+memhash.ChunkSize, size)]) {
			t.Errorf("chunk %d before: %d bytes, %v", k, len(got), err)
		}
	}
	if _, err := v.Chunk(l, memview.Before, 0, 3); err == nil || !strings.Contains(err.Error(), "has 3 chunks; no chunk 3") {
		t.Errorf("chunk 3 of 3: %v", err)
	}
	if got, err := v.Get([16]byte(recording.ChunkHashes(l.Before.Regions[0])[2])); err != nil || !bytes.Equal(got, before[2*memhash.ChunkSize:]) {
		t.Errorf("Get of chunk 2 by its hash: %d bytes, %v", len(got), err)
	}

	// A chunk dropped while recording: zeros and its index, or ErrNotFound.
	got, missing, err = v.Read(l, memview.After, 0, 0, size)
	zeros := make([]byte, memhash.ChunkSize)
	if err != nil || len(missing) != 1 || missing[0] != 1 || !bytes.Equal(got[:memhash.ChunkSize], after[:memhash.ChunkSize]) ||
		!bytes.Equal(got[memhash.ChunkSize:2*memhash.ChunkSize], zeros) || !bytes.Equal(got[2*memhash.ChunkSize:], after[2*memhash.ChunkSize:]) {
		t.Errorf("a dropped chunk: missing %v, %v", missing, err)
	}
	if got, missing, err := v.Read(l, memview.After, 0, 2*memhash.ChunkSize, size); err != nil || missing != nil || !bytes.Equal(got, after[2*memhash.ChunkSize:]) {
		t.Errorf("a range without the dropped chunk: missing %v, %v", missing, err)
	}
	if _, err := v.Chunk(l, memview.After, 0, 1); !errors.Is(err, chunkstore.ErrNotFound) {
		t.Errorf("the dropped chunk: %v, want ErrNotFound", err)
	}

	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Read(l, memview.Before, 0, 0, 1); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a read after Close: %v", err)
	}
}

func TestErrorText(t *testing.T) {
	lost := &pb.MemoryState{Lost: true, LostReason: "dropped (--on-full drop-oldest)"}
	for _, c := range []struct {
		err  *memview.Error
		want string
	}{
		{&memview.Error{Seq: 4, Point: memview.After, Err: memview.ErrNoSnapshots, Mode: "hash"}, "launch 4: the recording holds no snapshots (memory capture hash): record with --memory snapshot"},
		{&memview.Error{Seq: 4, Point: memview.After, Err: memview.ErrNoSnapshots}, "launch 4: the recording holds no snapshots (memory capture off): record with --memory snapshot"},
		{&memview.Error{Seq: 4, Point: memview.Before, Err: memview.ErrNoState}, "launch 4 has no memory state before it"},
		{&memview.Error{Seq: 4, Point: memview.After, Err: memview.ErrLost, State: lost}, "the memory state after launch 4 was lost: dropped (--on-full drop-oldest)"},
		{&memview.Error{Seq: 4, Point: memview.After, Err: memview.ErrHashOnly}, "launch 4 has only hashes after it, no bytes"},
		{&memview.Error{Seq: 4, Point: memview.Before, Err: memview.ErrNoRegion, Region: 3}, "launch 4 has no region 3 before it"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%v: %q, want %q", c.err.Err, got, c.want)
		}
		if !errors.Is(c.err, c.err.Err) {
			t.Errorf("%v: errors.Is fails", c.err.Err)
		}
	}
}

// A snapshot state's carried region (write sets, format 1.11) reads as the state it was carried
// from, whose chunks the store holds; one carried from a lost state has no bytes: ErrUnknown.
func TestCarriedRegions(t *testing.T) {
	data := bytes.Repeat([]byte{7, 1, 9}, memhash.ChunkSize/2)
	dir, w, store := snapshotRecording(t, 6, &pb.MemoryConfig{Mode: "snapshot", ChunkBytes: memhash.ChunkSize, WriteSets: "proved"})
	rs, err := testrec.RegionState(data, store)
	if err != nil {
		t.Fatal(err)
	}
	carried := &pb.RegionState{Hash: rs.Hash, ChunkHashes: rs.ChunkHashes, Carried: pb.RegionState_PROVED_READ_ONLY, CarriedFrom: 1}
	unknown := &pb.RegionState{Carried: pb.RegionState_PROVED_READ_ONLY, Unknown: true}
	regions := []*pb.Region{{Address: 0x7000_0000, Size: uint64(len(data))}, {Address: 0x7100_0000, Size: 4096}}
	b := &pb.Batch{
		Launches: []*pb.Launch{{Seq: 2, Regions: regions}},
		Memory:   []*pb.MemoryState{{LaunchSeq: 2, Point: memview.After, Snapshot: true, Regions: []*pb.RegionState{carried, unknown}}},
		End:      &pb.End{Reason: "exit"},
	}
	if err := errors.Join(w.Write(b), store.Close(), w.Close()); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := launches(t, set.Processes[0])[2]
	v := memview.New(set.Processes[0])
	defer v.Close()
	if got, _, err := v.Read(l, memview.After, 0, 0, uint64(len(data))); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the carried region: %d bytes, %v", len(got), err)
	}
	_, _, err = v.Read(l, memview.After, 1, 0, 4096)
	var e *memview.Error
	if !errors.Is(err, memview.ErrUnknown) || !errors.As(err, &e) || e.Region != 1 ||
		err.Error() != "the state of region 1 after launch 2 is unknown: it was carried from a state that was lost (write sets)" {
		t.Errorf("the unknown region: %v", err)
	}
	if _, err := v.Chunk(l, memview.After, 1, 0); !errors.Is(err, memview.ErrUnknown) {
		t.Errorf("a chunk of the unknown region: %v", err)
	}
}
