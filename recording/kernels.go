package recording

import (
	"slices"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Default bounds of a Join: calls waiting for their kernels (a call
// leaves when its kernel comes; only calls whose kernel never comes reach
// the bound: about 40 MB), and kernels that came before their call.
const (
	DefaultMaxCalls   = 1 << 18
	DefaultMaxKernels = 1 << 16
)

// Join pairs each kernel execution on the GPU (KernelActivity) with the
// launch call that ran it, while a process's records stream by
// (Process.Scan): the one join of launches and GPU activity that every
// reader of gpurr uses.
//
// A call is an eager launch (a Launch not made during stream capture) or a
// graph replay (GraphLaunch); CUPTI gives a kernel its call's correlation
// id, and either side can be read first. An eager launch runs one kernel
// and leaves when it arrives; a replay runs a kernel per graph node and
// stays until Trim pushes it out. A graph replay's kernel is also the
// kernel of the launch that captured its node: Links.CaptureLaunch finds
// that one.
//
// Calls and kernels wait in arrival order. Trim pushes out the oldest
// beyond MaxCalls and MaxKernels: calls whose kernel never comes (dropped,
// or a recording without GPU timing) and kernels whose call never comes
// (dropped, or filtered by record --kernels), so a streaming reader's
// memory does not grow with the recording. A reader that never calls Trim
// joins a whole recording without bounds.
//
// T is what the reader keeps of a call. A Join is not safe for concurrent
// use.
type Join[T any] struct {
	// MaxCalls and MaxKernels bound the window that Trim keeps; 0 means
	// DefaultMaxCalls and DefaultMaxKernels.
	MaxCalls, MaxKernels int

	kernel func(a *pb.KernelActivity, call T, ok bool) error
	left   func(call T) error
	calls  calls[T]
	early  earlyKernels
}

// NewJoin returns a join that calls kernel for each kernel with its call
// (ok true), or without one (ok false: pushed out by Trim, or still
// waiting at Flush), and left, which may be nil, when a call leaves: an
// eager launch after its kernel, any call pushed out by Trim or still
// waiting at Flush.
func NewJoin[T any](kernel func(a *pb.KernelActivity, call T, ok bool) error, left func(call T) error) *Join[T] {
	return &Join[T]{kernel: kernel, left: left}
}

// Call adds a launch call with its correlation id; replay says it is a
// graph replay (it stays for more kernels). Kernels that came before it
// are joined to it now. A call with the same id already waiting is
// replaced (ids are not reused in one process; a damaged recording may).
func (j *Join[T]) Call(correlationID uint32, call T, replay bool) error {
	early := j.early.take(correlationID)
	for _, a := range early {
		if err := j.kernel(a, call, true); err != nil {
			return err
		}
	}
	if len(early) > 0 && !replay {
		// An eager launch whose kernel is here already does not wait.
		if j.left == nil {
			return nil
		}
		return j.left(call)
	}
	j.calls.add(correlationID, call, replay)
	return nil
}

// Kernel joins a kernel execution to its call, or keeps it until the call
// comes. An eager call leaves once its kernel is joined.
func (j *Join[T]) Kernel(a *pb.KernelActivity) error {
	id := a.GetCorrelationId()
	c, ok := j.calls.get(id)
	if !ok {
		j.early.add(a)
		return nil
	}
	if err := j.kernel(a, c.v, true); err != nil {
		return err
	}
	if c.replay {
		return nil
	}
	return j.leave(id, c.v)
}

func (j *Join[T]) leave(id uint32, call T) error {
	j.calls.remove(id)
	if j.left == nil {
		return nil
	}
	return j.left(call)
}

// Trim pushes the oldest calls and then the oldest kernels out of the
// window until it holds at most MaxCalls calls and MaxKernels kernels.
// Readers call it after each batch.
func (j *Join[T]) Trim() error {
	for j.calls.len() > cmpOr(j.MaxCalls, DefaultMaxCalls) {
		id, e, _ := j.calls.oldest()
		if err := j.leave(id, e.v); err != nil {
			return err
		}
	}
	for j.early.len() > cmpOr(j.MaxKernels, DefaultMaxKernels) {
		var zero T
		if err := j.kernel(j.early.oldest(), zero, false); err != nil {
			return err
		}
	}
	return nil
}

// Flush ends the join at the end of the recording: kernels still waiting
// go without their call, oldest first, then the calls still waiting leave.
func (j *Join[T]) Flush() error {
	var zero T
	for a := j.early.oldest(); a != nil; a = j.early.oldest() {
		if err := j.kernel(a, zero, false); err != nil {
			return err
		}
	}
	for id, e, ok := j.calls.oldest(); ok; id, e, ok = j.calls.oldest() {
		if err := j.leave(id, e.v); err != nil {
			return err
		}
	}
	return nil
}

// Waiting is how many calls and kernels wait.
func (j *Join[T]) Waiting() (calls, kernels int) { return j.calls.len(), j.early.len() }

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// calls are launch calls waiting for their kernels, by correlation id.
type calls[T any] struct {
	byID  map[uint32]*call[T]
	queue []*call[T] // arrival order; calls that left stay until skipped or compacted
	head  int
}

type call[T any] struct {
	id     uint32
	v      T
	replay bool
	gone   bool
}

func (c *calls[T]) len() int { return len(c.byID) }

func (c *calls[T]) add(id uint32, v T, replay bool) {
	if c.byID == nil {
		c.byID = map[uint32]*call[T]{}
	}
	if old := c.byID[id]; old != nil {
		old.gone = true
	}
	e := &call[T]{id: id, v: v, replay: replay}
	c.byID[id] = e
	c.queue = append(c.queue, e)
}

func (c *calls[T]) get(id uint32) (*call[T], bool) {
	e := c.byID[id]
	return e, e != nil
}

func (c *calls[T]) remove(id uint32) {
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

// oldest returns the call that has waited longest, without removing it;
// false when none waits.
func (c *calls[T]) oldest() (uint32, *call[T], bool) {
	for c.head < len(c.queue) {
		e := c.queue[c.head]
		if !e.gone {
			return e.id, e, true
		}
		c.queue[c.head] = nil
		c.head++
	}
	return 0, nil, false
}

// earlyKernels are kernels whose launch call has not come (yet), by
// correlation id, in arrival order.
type earlyKernels struct {
	byID  map[uint32][]*pb.KernelActivity
	order []uint32 // ids in arrival order, with repeats
	head  int
	n     int
}

func (k *earlyKernels) len() int { return k.n }

func (k *earlyKernels) add(a *pb.KernelActivity) {
	if k.byID == nil {
		k.byID = map[uint32][]*pb.KernelActivity{}
	}
	id := a.GetCorrelationId()
	k.byID[id] = append(k.byID[id], a)
	k.order = append(k.order, id)
	k.n++
}

// take removes and returns the kernels waiting for the call id.
func (k *earlyKernels) take(id uint32) []*pb.KernelActivity {
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

// oldest removes and returns the kernel that has waited longest; nil when
// none waits.
func (k *earlyKernels) oldest() *pb.KernelActivity {
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

// JoinKernels calls fn for each kernel execution of a whole recording
// (Activities) with the launch whose code it ran and, for a graph replay's
// kernel, the replay (GraphLaunch) that ran it: the eager launch by Join,
// a graph kernel's capture-time launch by links.CaptureLaunch. Either is
// nil when the recording lacks it. links is d.Links(). Kernels come in
// recording order, except those whose call the recording lacks, which
// come last.
func (d *Data) JoinKernels(links *Links, fn func(a *pb.KernelActivity, launch *pb.Launch, replay *pb.GraphLaunch) error) error {
	type ran struct {
		launch *pb.Launch
		replay *pb.GraphLaunch
	}
	j := NewJoin(func(a *pb.KernelActivity, r ran, _ bool) error {
		if a.GetGraphId() == 0 {
			return fn(a, r.launch, nil)
		}
		return fn(a, links.CaptureLaunch(a), r.replay)
	}, nil)
	for _, l := range d.Launches {
		if !l.GetCaptured() {
			if err := j.Call(l.GetCorrelationId(), ran{launch: l}, false); err != nil {
				return err
			}
		}
	}
	for _, g := range d.GraphLaunches {
		if err := j.Call(g.GetCorrelationId(), ran{replay: g}, true); err != nil {
			return err
		}
	}
	for _, a := range d.Activities {
		if err := j.Kernel(a); err != nil {
			return err
		}
	}
	return j.Flush()
}
