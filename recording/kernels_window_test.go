package recording

import (
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Most calls leave as their kernel arrives; the few that stay keep their
// order through the queue's compactions, and oldest finds them.
func TestCallsOrderSurvivesCompaction(t *testing.T) {
	var c calls[int]
	for i := uint32(1); i <= 10_000; i++ {
		c.add(i, int(i), false)
		if i%1000 != 0 {
			c.remove(i)
		}
	}
	if c.len() != 10 || len(c.queue)-c.head > 2*c.len()+1024 {
		t.Fatalf("%d waiting, queue %d", c.len(), len(c.queue)-c.head)
	}
	for want := 1000; want <= 10_000; want += 1000 {
		id, e, ok := c.oldest()
		if !ok || e.v != want || id != uint32(want) {
			t.Fatalf("oldest %d %v %v, want %d", id, e, ok, want)
		}
		c.remove(id)
	}
	if _, _, ok := c.oldest(); ok || c.len() != 0 {
		t.Fatal("window not empty")
	}
	c.add(5, 1, false)
	c.add(5, 2, false) // a reused id replaces the call
	if e, _ := c.get(5); e.v != 2 || c.len() != 1 {
		t.Fatalf("reused id: %d, %d waiting", e.v, c.len())
	}
	if _, e, _ := c.oldest(); e.v != 2 {
		t.Fatalf("oldest after reuse %d", e.v)
	}
}

func TestKernelsOrderSurvivesCompaction(t *testing.T) {
	var k earlyKernels
	for i := uint32(1); i <= 5000; i++ {
		k.add(&pb.KernelActivity{CorrelationId: i, StartNs: uint64(i)})
		if i%500 == 0 {
			k.add(&pb.KernelActivity{CorrelationId: i, StartNs: uint64(i) + 1}) // a second kernel of the call
		} else {
			k.take(i)
		}
	}
	if k.len() != 20 {
		t.Fatalf("%d waiting", k.len())
	}
	if got := k.take(1000); len(got) != 2 || got[1].GetStartNs() != 1001 {
		t.Fatalf("take 1000: %v", got)
	}
	var last uint64
	for a := k.oldest(); a != nil; a = k.oldest() {
		if a.GetStartNs() <= last {
			t.Fatalf("out of order: %d after %d", a.GetStartNs(), last)
		}
		last = a.GetStartNs()
	}
	if k.len() != 0 || last != 5001 {
		t.Fatalf("%d left, last %d", k.len(), last)
	}
}
