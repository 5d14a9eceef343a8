package trace

import (
	"slices"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// pendingCalls is the join window: launch calls by correlation id, in the
// order they arrived, until their kernels come or they are the oldest of
// too many.
type pendingCalls struct {
	byCorr map[uint32]*call
	queue  []*call // arrival order; calls that left stay until skipped or compacted
	head   int
}

func (p *pendingCalls) len() int { return len(p.byCorr) }

func (p *pendingCalls) add(c *call) {
	if old := p.byCorr[c.corr]; old != nil {
		old.gone = true // a reused id: the older call cannot get kernels any more
	}
	p.byCorr[c.corr] = c
	p.queue = append(p.queue, c)
}

func (p *pendingCalls) remove(c *call) {
	if c.gone {
		return
	}
	c.gone = true
	if p.byCorr[c.corr] == c {
		delete(p.byCorr, c.corr)
	}
	// Calls that left (most, as their kernels arrive) still sit in the
	// queue: drop them once they are most of it, so it stays within a
	// constant factor of the window.
	if live := len(p.byCorr); len(p.queue)-p.head > 2*live+1024 {
		q := p.queue[:0]
		for _, x := range p.queue[p.head:] {
			if !x.gone {
				q = append(q, x)
			}
		}
		clear(p.queue[len(q):])
		p.queue, p.head = q, 0
	}
}

// oldest returns the call that has waited longest, nil when none waits.
func (p *pendingCalls) oldest() *call {
	for p.head < len(p.queue) {
		c := p.queue[p.head]
		if !c.gone {
			return c
		}
		p.queue[p.head] = nil
		p.head++
	}
	return nil
}

// earlyKernels are kernels whose launch call has not arrived (yet): the
// agent writes a launch before its kernel, but a recording that dropped
// the launch never has it. They wait, oldest first, for a bounded number.
type earlyKernels struct {
	byCorr map[uint32][]*pb.KernelActivity
	order  []uint32 // correlation ids in arrival order, with repeats
	head   int
	n      int
}

func (e *earlyKernels) add(a *pb.KernelActivity) {
	corr := a.GetCorrelationId()
	e.byCorr[corr] = append(e.byCorr[corr], a)
	e.order = append(e.order, corr)
	e.n++
}

// take removes and returns the kernels waiting for the call corr.
func (e *earlyKernels) take(corr uint32) []*pb.KernelActivity {
	as := e.byCorr[corr]
	if as == nil {
		return nil
	}
	delete(e.byCorr, corr)
	e.n -= len(as)
	if len(e.order)-e.head > 2*e.n+1024 {
		// Keep the order of the kernels still waiting: each id as many
		// times as kernels wait for it, the latest occurrences.
		left := map[uint32]int{}
		for c, w := range e.byCorr {
			left[c] = len(w)
		}
		kept := make([]uint32, 0, e.n)
		for i := len(e.order) - 1; i >= e.head; i-- {
			if c := e.order[i]; left[c] > 0 {
				left[c]--
				kept = append(kept, c)
			}
		}
		slices.Reverse(kept)
		e.order, e.head = kept, 0
	}
	return as
}

// oldest removes and returns the kernel that has waited longest; nil when
// none waits.
func (e *earlyKernels) oldest() *pb.KernelActivity {
	for e.head < len(e.order) {
		corr := e.order[e.head]
		e.head++
		if as := e.byCorr[corr]; len(as) > 0 {
			a := as[0]
			if len(as) == 1 {
				delete(e.byCorr, corr)
			} else {
				e.byCorr[corr] = as[1:]
			}
			e.n--
			return a
		}
	}
	e.order, e.head = e.order[:0], 0
	return nil
}

func dim3(d *pb.Dim3) [3]uint32 { return [3]uint32{d.GetX(), d.GetY(), d.GetZ()} }
