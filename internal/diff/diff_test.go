package diff

import (
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// run builds a Run from kernel identities per launch (stream 0) and the
// state digest's first byte (0: no state).
func run(ids []uint64, states []byte, streams []int32) *Run {
	r := &Run{Kernels: map[uint64]*pb.Kernel{}}
	for _, id := range ids {
		r.Kernels[id] = &pb.Kernel{Id: id, Identity: id}
	}
	for i, id := range ids {
		l := Launch{Seq: uint64(i + 1)}
		if streams != nil {
			l.Stream = streams[i]
		}
		if states[i] != 0 {
			l.HasState = true
			l.State[0] = states[i]
		}
		r.Append(l, id)
	}
	return r
}

func TestAlign(t *testing.T) {
	for _, c := range []struct {
		name            string
		a, b            *Run
		first           *Pair
		matched, differ int
		onlyA, onlyB    []int
		compared        int
	}{
		{name: "identical", a: run([]uint64{1, 2, 3}, []byte{1, 2, 3}, nil), b: run([]uint64{1, 2, 3}, []byte{1, 2, 3}, nil),
			matched: 3, compared: 3},
		{name: "second differs and everything after it", a: run([]uint64{1, 2, 3}, []byte{1, 2, 3}, nil), b: run([]uint64{1, 2, 3}, []byte{1, 9, 9}, nil),
			first: &Pair{1, 1}, matched: 3, compared: 3, differ: 2},
		{name: "extra warm-up in A", a: run([]uint64{7, 7, 1, 2}, []byte{5, 5, 1, 2}, nil), b: run([]uint64{1, 2}, []byte{1, 3}, nil),
			first: &Pair{3, 1}, matched: 2, compared: 2, differ: 1, onlyA: []int{0, 1}},
		{name: "extra launch in B's middle", a: run([]uint64{1, 2, 3}, []byte{1, 2, 3}, nil), b: run([]uint64{1, 8, 2, 3}, []byte{1, 8, 2, 3}, nil),
			matched: 3, compared: 3, onlyB: []int{1}},
		{name: "no state on one side is not compared", a: run([]uint64{1, 2}, []byte{1, 0}, nil), b: run([]uint64{1, 2}, []byte{1, 4}, nil),
			matched: 2, compared: 1},
		{name: "streams align apart; the first is by A's order", a: run([]uint64{1, 2, 1, 2}, []byte{1, 2, 3, 4}, []int32{0, 1, 0, 1}),
			b:     run([]uint64{2, 1, 2, 1}, []byte{2, 1, 9, 9}, []int32{1, 0, 1, 0}),
			first: &Pair{2, 3}, matched: 4, compared: 4, differ: 2},
		{name: "different kernels, no resync", a: run([]uint64{1, 2}, []byte{1, 2}, nil), b: run([]uint64{3, 4}, []byte{1, 2}, nil),
			onlyA: []int{0, 1}, onlyB: []int{0, 1}},
	} {
		res := Align(c.a, c.b)
		if (res.First == nil) != (c.first == nil) || res.First != nil && *res.First != *c.first {
			t.Errorf("%s: first %v, want %v", c.name, res.First, c.first)
		}
		if res.Matched != c.matched || res.Compared != c.compared || res.Differ != c.differ {
			t.Errorf("%s: matched/compared/differ %d/%d/%d, want %d/%d/%d", c.name, res.Matched, res.Compared, res.Differ, c.matched, c.compared, c.differ)
		}
		if !equalInts(res.OnlyA, c.onlyA) || !equalInts(res.OnlyB, c.onlyB) {
			t.Errorf("%s: only A %v only B %v, want %v %v", c.name, res.OnlyA, res.OnlyB, c.onlyA, c.onlyB)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
