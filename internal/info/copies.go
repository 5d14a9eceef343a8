package info

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gpurr/gpurr/internal/termsafe"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Copies is the time a process spent in copies and memsets on the GPU and waiting for the GPU
// on the host (format 1.15), and the lines that waited longest.
type Copies struct {
	Copies             int    `json:"copies"` // memcpy runs on the GPU
	CopyBytes          uint64 `json:"copy_bytes"`
	CopyNS             uint64 `json:"copy_ns"`
	Memsets            int    `json:"memsets"`
	MemsetBytes        uint64 `json:"memset_bytes"`
	MemsetNS           uint64 `json:"memset_ns"`
	PageableAsync      int    `json:"pageable_async,omitempty"` // asynchronous copies of pageable memory: the host waited anyway
	PageableAsyncBytes uint64 `json:"pageable_async_bytes,omitempty"`
	HostCalls          int    `json:"host_calls"`                  // copy, memset and synchronization calls
	Waits              int    `json:"waits"`                       // times the host waited: stream, event and context synchronizations
	WaitNS             uint64 `json:"wait_ns"`                     // how long, in all
	StreamWaits        int    `json:"stream_waits,omitempty"`      // streams made to wait for an event: no host time
	TopWaits           []Wait `json:"top_waiting_lines,omitempty"` // the lines that waited longest
	Unlinked           int    `json:"unlinked,omitempty"`          // copies and waits whose call was not recorded
}

// Wait is how long one line of the program waited for the GPU.
type Wait struct {
	Line   string `json:"line"` // file:line function; "" when the call had no line
	Waits  int    `json:"waits"`
	WaitNS uint64 `json:"wait_ns"`
}

// topWaits is how many waiting lines info lists.
const topWaits = 5

// copyCounter adds up copies and waits while the frames are read. A call is kept by
// correlation id until its GPU record comes (the activity buffer arrives after the call):
// copies and waits are few beside launches.
type copyCounter struct {
	c     Copies
	calls map[uint32]string // line of each call whose record has not come yet
	waits map[string]*Wait
}

func newCopyCounter() *copyCounter {
	return &copyCounter{calls: map[uint32]string{}, waits: map[string]*Wait{}}
}

func (cc *copyCounter) add(b *pb.Batch, line func(callstack uint64) string) {
	for _, h := range b.HostCalls {
		cc.c.HostCalls++
		cc.calls[h.GetCorrelationId()] = line(h.GetCallstackId())
	}
	for _, c := range b.Copies {
		if _, ok := cc.calls[c.GetCorrelationId()]; !ok && c.GetGraphId() == 0 {
			cc.c.Unlinked++
		}
		delete(cc.calls, c.GetCorrelationId())
		if c.GetMemset() {
			cc.c.Memsets++
			cc.c.MemsetBytes += c.GetBytes()
			cc.c.MemsetNS += recording.CopyTime(c)
			continue
		}
		cc.c.Copies++
		cc.c.CopyBytes += c.GetBytes()
		cc.c.CopyNS += recording.CopyTime(c)
		if recording.PageableAsync(c) {
			cc.c.PageableAsync++
			cc.c.PageableAsyncBytes += c.GetBytes()
		}
	}
	for _, s := range b.Syncs {
		l, ok := cc.calls[s.GetCorrelationId()]
		if !ok {
			cc.c.Unlinked++
		}
		delete(cc.calls, s.GetCorrelationId())
		if s.GetType() == pb.Sync_STREAM_WAIT_EVENT {
			cc.c.StreamWaits++
			continue
		}
		cc.c.Waits++
		cc.c.WaitNS += recording.HostWait(s)
		w := cc.waits[l]
		if w == nil {
			w = &Wait{Line: l}
			cc.waits[l] = w
		}
		w.Waits++
		w.WaitNS += recording.HostWait(s)
	}
}

// summarize is nil for a process with no copy, memset or synchronization record: one that
// made none, or recorded before format 1.15.
func (cc *copyCounter) summarize() *Copies {
	c := cc.c
	if c.HostCalls == 0 && c.Copies == 0 && c.Memsets == 0 && c.Waits == 0 && c.StreamWaits == 0 {
		return nil
	}
	for _, l := range slices.Sorted(maps.Keys(cc.waits)) {
		c.TopWaits = append(c.TopWaits, *cc.waits[l])
	}
	slices.SortStableFunc(c.TopWaits, func(a, b Wait) int { return cmp.Compare(b.WaitNS, a.WaitNS) })
	c.TopWaits = c.TopWaits[:min(len(c.TopWaits), topWaits)]
	return &c
}

// write is the copies and waits fields, and the lines that waited longest.
func (c *Copies) write(t *textWriter) {
	if c == nil {
		return
	}
	t.field("copies", "%s, %s, %s on the GPU; %s, %s, %s",
		Count(c.Copies, "memcpy"), FormatBytes(c.CopyBytes), formatNS(c.CopyNS),
		Count(c.Memsets, "memset"), FormatBytes(c.MemsetBytes), formatNS(c.MemsetNS))
	if c.PageableAsync > 0 {
		t.field("", "%s to or from pageable host memory (%s): the host waited for them anyway (pin the memory to overlap them)",
			copies(c.PageableAsync, "asynchronous copy"), FormatBytes(c.PageableAsyncBytes))
	}
	switch {
	case c.Waits == 0:
		t.field("waits", "none: the host never waited for the GPU in a synchronization call")
	default:
		t.field("waits", "the host waited %s in %s", formatNS(c.WaitNS), Count(c.Waits, "synchronization"))
	}
	if c.StreamWaits > 0 {
		t.field("", "%s made to wait for an event (no host time)", Count(c.StreamWaits, "stream"))
	}
	if c.Unlinked > 0 {
		t.field("", "copies and waits without a recorded call (no line): %d", c.Unlinked)
	}
}

// writeTop lists the lines that waited longest.
func (c *Copies) writeTop(t *textWriter) {
	if c == nil || len(c.TopWaits) == 0 || t.err != nil {
		return
	}
	t.printf("\n  top waiting lines (host time in synchronization calls)\n")
	tab := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tab, "    waits\twaited\t  line\n")
	for _, w := range c.TopWaits {
		fmt.Fprintf(tab, "    %d\t%s\t  %s\n", w.Waits, formatNS(w.WaitNS), termsafe.String(shortenPath(cmp.Or(w.Line, "(no line)"), 100)))
	}
	t.err = tab.Flush()
}

// copies is n and noun, "copy" made plural as Count cannot.
func copies(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
}
