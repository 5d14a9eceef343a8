// Package joinwin holds the two sides of the join between launch calls and
// the kernels they ran while a recording is streamed: CUPTI correlation
// ids pair them, and either side can come first. Both sides wait in
// arrival order, so a reader can bound how many wait and let the oldest go
// (a call whose kernel was dropped, a recording without GPU timing),
// keeping its memory independent of the recording's length. trace and
// export read recordings through it.
package joinwin

import (
	"slices"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Default bounds of the window: calls waiting for their kernels (a call
// leaves when its kernel comes; only calls whose kernel never comes reach
// the bound: about 40 MB), and kernels that came before their call.
const (
	MaxCalls   = 1 << 18
	MaxKernels = 1 << 16
)

// Calls are launch calls waiting for their kernels, by correlation id.
type Calls[T any] struct {
	byID  map[uint32]*entry[T]
	queue []*entry[T] // arrival order; entries that left stay until skipped or compacted
	head  int
}

type entry[T any] struct {
	id   uint32
	v    T
	gone bool
}

// Len is how many calls wait.
func (c *Calls[T]) Len() int { return len(c.byID) }

// Add puts a call in the window. A call with the same id already there
// leaves it (ids are not reused in one process; a damaged recording may).
func (c *Calls[T]) Add(id uint32, v T) {
	if c.byID == nil {
		c.byID = map[uint32]*entry[T]{}
	}
	if old := c.byID[id]; old != nil {
		old.gone = true
	}
	e := &entry[T]{id: id, v: v}
	c.byID[id] = e
	c.queue = append(c.queue, e)
}

// Get returns the waiting call with this id.
func (c *Calls[T]) Get(id uint32) (T, bool) {
	if e := c.byID[id]; e != nil {
		return e.v, true
	}
	var zero T
	return zero, false
}

// Remove takes the call with this id out of the window.
func (c *Calls[T]) Remove(id uint32) {
	e := c.byID[id]
	if e == nil {
		return
	}
	e.gone = true
	delete(c.byID, id)
	// Calls that left (most, as their kernels arrive) still sit in the
	// queue: drop them once they are most of it, so it stays within a
	// constant factor of the window.
	if len(c.queue)-c.head > 2*len(c.byID)+1024 {
		q := c.queue[:0]
		for _, x := range c.queue[c.head:] {
			if !x.gone {
				q = append(q, x)
			}
		}
		clear(c.queue[len(q):])
		c.queue, c.head = q, 0
	}
}

// Oldest returns the call that has waited longest, without removing it;
// false when none waits.
func (c *Calls[T]) Oldest() (uint32, T, bool) {
	for c.head < len(c.queue) {
		e := c.queue[c.head]
		if !e.gone {
			return e.id, e.v, true
		}
		c.queue[c.head] = nil
		c.head++
	}
	var zero T
	return 0, zero, false
}

// Kernels are kernels whose launch call has not come (yet), by
// correlation id, in arrival order.
type Kernels struct {
	byID  map[uint32][]*pb.KernelActivity
	order []uint32 // ids in arrival order, with repeats
	head  int
	n     int
}

// Len is how many kernels wait.
func (k *Kernels) Len() int { return k.n }

// Add puts a kernel in the window.
func (k *Kernels) Add(a *pb.KernelActivity) {
	if k.byID == nil {
		k.byID = map[uint32][]*pb.KernelActivity{}
	}
	id := a.GetCorrelationId()
	k.byID[id] = append(k.byID[id], a)
	k.order = append(k.order, id)
	k.n++
}

// Take removes and returns the kernels waiting for the call id.
func (k *Kernels) Take(id uint32) []*pb.KernelActivity {
	as := k.byID[id]
	if as == nil {
		return nil
	}
	delete(k.byID, id)
	k.n -= len(as)
	if len(k.order)-k.head > 2*k.n+1024 {
		// Keep the order of the kernels still waiting: each id as many
		// times as kernels wait for it, the latest occurrences.
		left := map[uint32]int{}
		for c, w := range k.byID {
			left[c] = len(w)
		}
		kept := make([]uint32, 0, k.n)
		for i := len(k.order) - 1; i >= k.head; i-- {
			if c := k.order[i]; left[c] > 0 {
				left[c]--
				kept = append(kept, c)
			}
		}
		slices.Reverse(kept)
		k.order, k.head = kept, 0
	}
	return as
}

// Oldest removes and returns the kernel that has waited longest; nil when
// none waits.
func (k *Kernels) Oldest() *pb.KernelActivity {
	for k.head < len(k.order) {
		id := k.order[k.head]
		k.head++
		if as := k.byID[id]; len(as) > 0 {
			a := as[0]
			if len(as) == 1 {
				delete(k.byID, id)
			} else {
				k.byID[id] = as[1:]
			}
			k.n--
			return a
		}
	}
	k.order, k.head = k.order[:0], 0
	return nil
}
