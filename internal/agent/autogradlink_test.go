package agent

import (
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func TestForwardLinks(t *testing.T) {
	f := newForwardLinks()
	f.classes[1] = "MmBackward0"
	var stats pb.Stats
	launch := func(thread, seq uint64, class uint32, stack uint64) *pb.Autograd {
		l := &pb.Launch{CallstackId: stack}
		f.launch(l, thread, seq, class, &stats)
		return l.Autograd
	}
	// Thread 1's forward: node 10 created, then its op launches twice (next number 11);
	// node 11 created by a view (no launch); node 12's op launches with 13.
	launch(1, 11, 0, 100)
	launch(1, 11, 0, 101) // a later launch with the same number: not the op's first
	launch(1, 13, 0, 300)
	launch(1, 40, 0, 400)
	launch(1, 39, 0, 390) // numbers never go back on a thread: ignored
	launch(2, 11, 0, 200) // another thread's numbers are its own
	launch(1, 50, 0, 0)   // no callstack: nothing to link to

	for _, c := range []struct {
		thread, seq uint64
		stack       uint64
		link        pb.Autograd_Link
	}{
		{1, 10, 100, pb.Autograd_NEXT_LAUNCH},
		{1, 11, 300, pb.Autograd_LATER_LAUNCH},
		{1, 12, 300, pb.Autograd_NEXT_LAUNCH},
		{2, 10, 200, pb.Autograd_NEXT_LAUNCH},
		{1, 14, 0, pb.Autograd_LINK_UNSPECIFIED},         // the next launch is 26 nodes on: other code
		{1, 45, 0, pb.Autograd_LINK_UNSPECIFIED},         // nothing after it
		{3, 10, 0, pb.Autograd_LINK_UNSPECIFIED},         // a thread with no forward launches
		{1, ^uint64(0), 0, pb.Autograd_LINK_UNSPECIFIED}, // AccumulateGrad's number
	} {
		a := launch(c.thread, c.seq, 1, 7)
		if a.ForwardCallstackId != c.stack || a.Link != c.link || a.BackwardNode != "MmBackward0" {
			t.Errorf("backward of node %d on thread %d: stack %d link %v node %q, want %d %v", c.seq, c.thread,
				a.ForwardCallstackId, a.Link, a.BackwardNode, c.stack, c.link)
		}
	}
	if stats.BackwardLaunches != 8 || stats.BackwardLinked != 4 {
		t.Errorf("stats: %d backward launches, %d linked; want 8, 4", stats.BackwardLaunches, stats.BackwardLinked)
	}
	// A class whose name a full ring dropped still marks the launch as backward.
	if a := launch(1, 10, 2, 7); a.BackwardNode != "(unnamed node class 2)" || a.ForwardCallstackId != 100 {
		t.Errorf("backward launch of an unnamed class: %v", a)
	}
	if a := launch(1, 12, 0, 5); a.BackwardNode != "" || a.SequenceNr != 12 || a.Thread != 1 {
		t.Errorf("forward launch: %v", a)
	}
}

func TestForwardLinksBounded(t *testing.T) {
	f := newForwardLinks()
	for seq := uint64(1); seq <= maxForwardSeqs+10; seq++ {
		f.forward(1, seq, seq)
	}
	if n := len(f.threads[1].seqs); n > maxForwardSeqs {
		t.Fatalf("%d numbers held, want at most %d", n, maxForwardSeqs)
	}
	if stack, link := f.backward(1, maxForwardSeqs+5); stack != maxForwardSeqs+6 || link != pb.Autograd_NEXT_LAUNCH {
		t.Errorf("recent node: stack %d link %v", stack, link)
	}
	if stack, _ := f.backward(1, 2); stack == 3 {
		t.Errorf("node 2's forward launch should have been let go")
	}
}

func TestNodeClassName(t *testing.T) {
	for _, c := range []struct {
		name string
		cxx  bool
		want string
	}{
		{"N5torch8autograd9generated11MmBackward0E", true, "MmBackward0"},
		{"N5torch8autograd14AccumulateGradE", true, "AccumulateGrad"},
		{"N5torch8autograd7CppNodeIN2ns3FooEEE", true, "CppNode<ns::Foo>"},
		{"CompiledFunctionBackward", false, "CompiledFunctionBackward"},
		{"not a mangled name (", true, "not a mangled name ("},
		{"", true, ""},
	} {
		if got := nodeClassName(c.name, c.cxx); got != c.want {
			t.Errorf("nodeClassName(%q, %v) = %q, want %q", c.name, c.cxx, got, c.want)
		}
	}
}
