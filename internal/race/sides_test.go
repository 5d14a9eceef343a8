package race

import (
	"encoding/binary"
	"testing"

	"github.com/gpurr/gpurr/internal/instrument"
)

// The pairs of a synthetic log: a shared store and a load of the same word by another thread
// between the same barriers race; after a barrier, or in another CTA's window, they do not.
// In global memory a store and a load by two CTAs race whatever their epochs.
func TestConflicts(t *testing.T) {
	const st, ld, ld2, gst, gld = 10, 20, 21, 30, 40
	log := []Access{
		{Addr: 0x40, Instr: st, Store: true, Shared: true, CTA: 0, Thread: 1, Epoch: 0},
		{Addr: 0x40, Instr: ld, Shared: true, CTA: 0, Thread: 33, Epoch: 0},  // races
		{Addr: 0x40, Instr: ld, Shared: true, CTA: 0, Thread: 34, Epoch: 0},  // races
		{Addr: 0x40, Instr: ld2, Shared: true, CTA: 0, Thread: 33, Epoch: 1}, // after a barrier
		{Addr: 0x40, Instr: ld, Shared: true, CTA: 1, Thread: 33, Epoch: 0},  // another CTA's window
		{Addr: 0x40, Instr: ld, Shared: true, CTA: 0, Thread: 1, Epoch: 0},   // its own thread
		{Addr: 0x7000, Instr: gst, Store: true, CTA: 0, Thread: 0, Epoch: 0},
		{Addr: 0x7000, Instr: gld, CTA: 5, Thread: 0, Epoch: 3}, // another CTA: no barrier between
		{Addr: 0x7004, Instr: gld, CTA: 5, Thread: 0, Epoch: 3}, // another address
	}
	got := Conflicts(log)
	if len(got) != 2 {
		t.Fatalf("conflicts %+v; want 2", got)
	}
	if c := got[0]; c.Store != st || c.Other != ld || !c.Shared || c.Pairs != 2 || c.StoreThread != 1 {
		t.Errorf("first %+v; want st %d with ld %d, shared, 2 pairs", c, st, ld)
	}
	if c := got[1]; c.Store != gst || c.Other != gld || c.Shared || c.Pairs != 1 || c.OtherCTA != 5 || c.Addr != 0x7000 {
		t.Errorf("second %+v; want the global pair", c)
	}
	// Two stores of one address are one pair, not two.
	ww := Conflicts([]Access{{Addr: 8, Instr: 1, Store: true, CTA: 0}, {Addr: 8, Instr: 1, Store: true, CTA: 1}})
	if len(ww) != 1 || ww[0].Pairs != 1 {
		t.Errorf("write-write %+v", ww)
	}
	if c := Conflicts(nil); len(c) != 0 {
		t.Errorf("empty log: %+v", c)
	}
}

func TestDecodeAccessLog(t *testing.T) {
	buf := make([]byte, instrument.AccessHeaderBytes+2*instrument.AccessRecordBytes)
	binary.LittleEndian.PutUint32(buf, 5) // 5 noted, room for 2
	r := buf[instrument.AccessHeaderBytes+instrument.AccessRecordBytes:]
	binary.LittleEndian.PutUint64(r, 0xdead0)
	binary.LittleEndian.PutUint32(r[8:], 7)
	binary.LittleEndian.PutUint32(r[12:], instrument.AccessStore|instrument.AccessShared|4<<8)
	binary.LittleEndian.PutUint32(r[16:], 3)
	binary.LittleEndian.PutUint32(r[20:], 65)
	binary.LittleEndian.PutUint32(r[24:], 2)
	log, noted, err := DecodeAccessLog(buf)
	if err != nil || noted != 5 || len(log) != 2 {
		t.Fatalf("%d records, %d noted, %v", len(log), noted, err)
	}
	want := Access{Addr: 0xdead0, Instr: 7, Store: true, Shared: true, Size: 4, CTA: 3, Thread: 65, Epoch: 2}
	if log[1] != want {
		t.Errorf("record %+v, want %+v", log[1], want)
	}
	if _, _, err := DecodeAccessLog(buf[:8]); err == nil {
		t.Error("a short buffer: no error")
	}
}
