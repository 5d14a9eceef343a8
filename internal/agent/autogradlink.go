package agent

import (
	"cmp"
	"fmt"
	"sort"
	"strings"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// forwardLinks joins each backward launch to the forward launch of the op
// that created its autograd node. PyTorch gives every node the forward
// thread's next sequence number and the op launches its kernels after
// creating the node, so node N's forward launch is the first one its thread
// made with the next number at N+1 (autograd.h). Forward launches reach the
// writer before the backward launches of their nodes, in ring order.
type forwardLinks struct {
	threads map[uint64]*forwardThread // by PyTorch forward thread id
	classes map[uint32]string         // node class id -> name, from GP_REC_NODECLASS
}

// forwardThread holds, per sequence number, the callstack of the first
// forward launch made with it, in ascending order.
type forwardThread struct {
	seqs   []uint64
	stacks []uint64
}

const (
	// maxForwardSeqs bounds memory per forward thread: a backward pass
	// reaches back one step's nodes (thousands), never a million.
	maxForwardSeqs = 1 << 20
	// maxLaterGap is how many nodes may lie between a node and the launch
	// that names its line when the op that created it launched nothing
	// (views, reshapes): further on, the launch belongs to other code.
	maxLaterGap = 16
)

func newForwardLinks() *forwardLinks {
	return &forwardLinks{threads: map[uint64]*forwardThread{}, classes: map[uint32]string{}}
}

// forward notes a forward launch with a callstack.
func (f *forwardLinks) forward(thread, seq, callstack uint64) {
	if callstack == 0 {
		return
	}
	t := f.threads[thread]
	if t == nil {
		t = &forwardThread{}
		f.threads[thread] = t
	}
	if n := len(t.seqs); n > 0 && seq <= t.seqs[n-1] {
		return // not the first launch with this number
	}
	if len(t.seqs) >= maxForwardSeqs {
		half := len(t.seqs) / 2
		t.seqs = append(t.seqs[:0], t.seqs[half:]...)
		t.stacks = append(t.stacks[:0], t.stacks[half:]...)
	}
	t.seqs = append(t.seqs, seq)
	t.stacks = append(t.stacks, callstack)
}

// backward finds the forward callstack of node seq created on thread.
func (f *forwardLinks) backward(thread, seq uint64) (uint64, pb.Autograd_Link) {
	t := f.threads[thread]
	if t == nil {
		return 0, pb.Autograd_LINK_UNSPECIFIED
	}
	i := sort.Search(len(t.seqs), func(i int) bool { return t.seqs[i] > seq })
	if i == len(t.seqs) {
		return 0, pb.Autograd_LINK_UNSPECIFIED
	}
	switch gap := t.seqs[i] - (seq + 1); {
	case gap == 0:
		return t.stacks[i], pb.Autograd_NEXT_LAUNCH
	case gap <= maxLaterGap:
		return t.stacks[i], pb.Autograd_LATER_LAUNCH
	}
	return 0, pb.Autograd_LINK_UNSPECIFIED
}

// launch fills l.Autograd from a launch record's fields and counts
// backward launches in stats.
func (f *forwardLinks) launch(l *pb.Launch, thread, seq uint64, class uint32, stats *pb.Stats) {
	a := &pb.Autograd{Thread: thread, SequenceNr: seq}
	l.Autograd = a
	if class == 0 {
		f.forward(thread, seq, l.CallstackId)
		return
	}
	// A class whose record a full ring dropped still marks the launch as
	// backward (the drop is counted in ring_bytes_dropped).
	a.BackwardNode = cmp.Or(f.classes[class], fmt.Sprintf("(unnamed node class %d)", class))
	a.ForwardCallstackId, a.Link = f.backward(thread, seq)
	stats.BackwardLaunches++
	if a.ForwardCallstackId != 0 {
		stats.BackwardLinked++
	}
}

// nodeClassName is the name PyTorch users know a node by (its grad_fn's
// class name, e.g. MmBackward0) from a C++ type's mangled name, or a Python
// class name as it is.
func nodeClassName(name string, cxx bool) string {
	if !cxx || name == "" {
		return name
	}
	// The type's typeinfo-name symbol reads "typeinfo name for T" demangled.
	full, ok := strings.CutPrefix(recording.Demangle("_ZTS"+name), "typeinfo name for ")
	if !ok {
		return name
	}
	// The last component outside template arguments: CppNode<ns::Foo> stays whole.
	depth, cut := 0, 0
	for i := 0; i < len(full); i++ {
		switch full[i] {
		case '<':
			depth++
		case '>':
			depth--
		case ':':
			if depth == 0 && i+1 < len(full) && full[i+1] == ':' {
				cut = i + 2
			}
		}
	}
	return full[cut:]
}
