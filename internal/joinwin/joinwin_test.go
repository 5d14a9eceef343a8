package joinwin

import (
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Most calls leave as their kernel arrives; the few that stay keep their
// order through the queue's compactions, and Oldest finds them.
func TestCallsOrderSurvivesCompaction(t *testing.T) {
	var c Calls[int]
	for i := uint32(1); i <= 10_000; i++ {
		c.Add(i, int(i))
		if i%1000 != 0 {
			c.Remove(i)
		}
	}
	if c.Len() != 10 || len(c.queue)-c.head > 2*c.Len()+1024 {
		t.Fatalf("%d waiting, queue %d", c.Len(), len(c.queue)-c.head)
	}
	for want := 1000; want <= 10_000; want += 1000 {
		id, v, ok := c.Oldest()
		if !ok || v != want || id != uint32(want) {
			t.Fatalf("oldest %d %d %v, want %d", id, v, ok, want)
		}
		c.Remove(id)
	}
	if _, _, ok := c.Oldest(); ok || c.Len() != 0 {
		t.Fatal("window not empty")
	}
	c.Add(5, 1)
	c.Add(5, 2) // a reused id replaces the call
	if v, _ := c.Get(5); v != 2 || c.Len() != 1 {
		t.Fatalf("reused id: %d, %d waiting", v, c.Len())
	}
	if _, v, _ := c.Oldest(); v != 2 {
		t.Fatalf("oldest after reuse %d", v)
	}
}

func TestKernelsOrderSurvivesCompaction(t *testing.T) {
	var k Kernels
	for i := uint32(1); i <= 5000; i++ {
		k.Add(&pb.KernelActivity{CorrelationId: i, StartNs: uint64(i)})
		if i%500 == 0 {
			k.Add(&pb.KernelActivity{CorrelationId: i, StartNs: uint64(i) + 1}) // a second kernel of the call
		} else {
			k.Take(i)
		}
	}
	if k.Len() != 20 {
		t.Fatalf("%d waiting", k.Len())
	}
	if got := k.Take(1000); len(got) != 2 || got[1].GetStartNs() != 1001 {
		t.Fatalf("take 1000: %v", got)
	}
	var last uint64
	for a := k.Oldest(); a != nil; a = k.Oldest() {
		if a.GetStartNs() <= last {
			t.Fatalf("out of order: %d after %d", a.GetStartNs(), last)
		}
		last = a.GetStartNs()
	}
	if k.Len() != 0 || last != 5001 {
		t.Fatalf("%d left, last %d", k.Len(), last)
	}
}
