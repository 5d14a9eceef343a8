package agent

import "testing"

// Memory capture's own copies are left out of the program's by correlation id, each once;
// the ids kept are bounded when records never come for them.
func TestOwnCalls(t *testing.T) {
	var o ownCalls
	o.add(7)
	if o.take(8) || !o.take(7) || o.take(7) {
		t.Fatal("an own call's copy not taken exactly once")
	}
	for i := range uint32(3 * ownCallsKept) {
		o.add(100 + i)
	}
	if len(o.ids) > ownCallsKept || len(o.fifo) > ownCallsKept {
		t.Fatalf("%d ids, %d in order kept", len(o.ids), len(o.fifo))
	}
	if !o.take(100+3*ownCallsKept-1) || o.take(100) {
		t.Error("the newest call forgotten, or the oldest kept")
	}
}
