package diff

import (
	"cmp"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// wideLaunch is what Scan kept of a launch before it folded states in as it read them and
// kept its kernel by index: the reference TestScanCompact compares with.
type wideLaunch struct {
	Seq, KernelID, Identity, Handle uint64
	Stream, Step                    int
	State                           [16]byte
	HasState, Unknown               bool
}

// wideScan reduces p as Scan did: every launch and every AFTER state kept aside, the
// launches sorted by seq, streams numbered in that order, then each state given to its
// launch, the last one read winning.
func wideScan(t *testing.T, p *recording.Process) ([]wideLaunch, error) {
	t.Helper()
	var out []wideLaunch
	var states []stateAfter
	kernels := map[uint64]uint64{}
	steps, err := recording.NewStepper(p.StepRange)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Scan(func(b *pb.Batch) error {
		for _, k := range b.Kernels {
			kernels[k.GetId()] = k.GetIdentity()
		}
		steps.Add(b)
		recording.EachCall(b, func(l *pb.Launch) {
			step := steps.Launch(l)
			if !l.GetCaptured() {
				out = append(out, wideLaunch{Seq: l.GetSeq(), KernelID: l.GetKernelId(), Handle: l.GetStream(), Step: step})
			}
		}, func(g *pb.GraphLaunch) { steps.GraphLaunch(g) })
		for _, s := range b.Memory {
			if s.GetPoint() == pb.MemoryState_AFTER && !s.GetLost() {
				states = append(states, stateAfter{s.GetLaunchSeq(), s})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b wideLaunch) int { return cmp.Compare(a.Seq, b.Seq) })
	streams := Streams{}
	for i := range out {
		out[i].Identity = kernels[out[i].KernelID]
		out[i].Stream = streams.Number(out[i].Handle)
	}
	for _, s := range states {
		if i, ok := slices.BinarySearchFunc(out, s.seq, func(l wideLaunch, seq uint64) int { return cmp.Compare(l.Seq, seq) }); ok {
			out[i].State, out[i].HasState, out[i].Unknown = StateDigest(s.s), true, recording.UnknownRegions(s.s) > 0
		}
	}
	return out, nil
}

// checkCompact: Scan of p keeps what wideScan does, launch by launch.
func checkCompact(t *testing.T, name string, p *recording.Process) {
	t.Helper()
	want, werr := wideScan(t, p)
	r, err := Scan(p)
	if (err != nil) != (werr != nil) {
		t.Fatalf("%s: error %v, want %v", name, err, werr)
	}
	if err != nil {
		return
	}
	if len(r.Launches) != len(want) {
		t.Fatalf("%s: %d launches, want %d", name, len(r.Launches), len(want))
	}
	for i, l := range r.Launches {
		w := want[i]
		got := wideLaunch{Seq: l.Seq, KernelID: r.KernelID(l), Identity: r.Identity(l), Handle: w.Handle, Stream: int(l.Stream), Step: int(l.Step),
			State: l.State, HasState: l.HasState, Unknown: l.Unknown}
		if got != w {
			t.Fatalf("%s: launch %d: %+v, want %+v", name, i, got, w)
		}
	}
}

// Scan folds each state into its launch as it reads it, keeps a launch's kernel by index
// and, for launches that come out of seq order, reads the recording again keeping the
// states aside: whichever way, each launch is what it was when every state was kept aside
// to the end.
func TestScanCompact(t *testing.T) {
	for _, v := range testrec.Variants {
		if v == testrec.Newer {
			continue // does not open
		}
		for _, p := range testrec.Open(t, v).Processes {
			checkCompact(t, string(v)+"/"+p.Name, p)
		}
	}
	big, err := testrec.WriteBig(filepath.Join(t.TempDir(), "big"), testrec.Big{Launches: 3000, DifferAt: 1234})
	if err != nil {
		t.Fatal(err)
	}
	checkCompact(t, "big", big)
	whole, err := Scan(big)
	if err != nil {
		t.Fatal(err)
	}
	// Room made for another count of launches changes nothing kept, and what is left over is
	// given back.
	for _, room := range []int{1, 2999, 3000, 3001, 100_000} {
		r, err := ScanSized(big, room)
		if err != nil || !slices.Equal(r.Launches, whole.Launches) || cap(r.Launches)-len(r.Launches) > len(r.Launches)/4 {
			t.Errorf("room for %d: %d launches (cap %d), %v; want %d", room, len(r.Launches), cap(r.Launches), err, len(whole.Launches))
		}
	}

	// Launches out of seq order (put in their place as they come), states before their launch, several
	// states of one launch (the last wins), states of no launch, streams whose handles
	// differ only above 32 bits, captured launches.
	state := func(seq uint64, hash byte) *pb.MemoryState {
		h := make([]byte, recording.HashBytes)
		h[0] = hash
		return &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{{Hash: h}}}
	}
	first := &pb.Batch{Process: &pb.Process{Pid: 1, Memory: &pb.MemoryConfig{Mode: "hash"}},
		Kernels: []*pb.Kernel{{Id: 1, Identity: 11, Name: "a"}, {Id: 2, Identity: 22, Name: "b"}}}
	launch := func(seq, kernel, stream uint64) *pb.Launch {
		return &pb.Launch{Seq: seq, KernelId: kernel, Stream: stream, HostNs: seq}
	}
	inOrder := []*pb.Batch{first,
		{Memory: []*pb.MemoryState{state(2, 1), state(9, 1)}, Launches: []*pb.Launch{launch(1, 1, 1<<40), launch(2, 2, 2<<40)}},
		{Launches: []*pb.Launch{launch(3, 1, 1<<40), launch(5, 3, 2<<40), {Seq: 6, KernelId: 1, Captured: true}},
			Memory: []*pb.MemoryState{state(2, 2), state(4, 1), state(1, 3), state(5, 4), state(5, 5)}},
		{Memory: []*pb.MemoryState{state(7, 6), state(8, 8)}},
		{Launches: []*pb.Launch{launch(7, 2, 1<<40), launch(8, 1, 3<<40)}, Memory: []*pb.MemoryState{state(7, 7), {LaunchSeq: 3, Point: pb.MemoryState_AFTER, Lost: true}}},
	}
	outOfOrder := []*pb.Batch{first,
		{Launches: []*pb.Launch{launch(4, 1, 5), launch(2, 2, 6)}, Memory: []*pb.MemoryState{state(4, 1), state(3, 2)}},
		{Launches: []*pb.Launch{launch(3, 1, 6), launch(1, 2, 7)}, Memory: []*pb.MemoryState{state(2, 3), state(3, 4), state(4, 5)}},
	}
	for name, batches := range map[string][]*pb.Batch{"in order": inOrder, "out of order": outOfOrder} {
		p := testrec.OpenBatches(t, batches...).Processes[0]
		checkCompact(t, name, p)
	}
}
