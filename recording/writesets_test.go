package recording_test

import (
	"bytes"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Write set misses written in two frames are all loaded, in the order written, with every field.
func TestWriteSetMissesAcrossFrames(t *testing.T) {
	first := &pb.WriteSetMiss{KernelId: 2, ParamOffsets: []uint32{0, 16}, AuditSeq: 40, SinceSeq: 8, AllocationId: 5}
	second := &pb.WriteSetMiss{KernelId: 3, ParamOffsets: []uint32{8}, AuditSeq: 72, SinceSeq: 41, AllocationId: 6}
	set := testrec.OpenBatches(t,
		&pb.Batch{Process: &pb.Process{Pid: 1, Memory: &pb.MemoryConfig{Mode: "hash", WriteSets: "learned", AuditEvery: 32}}},
		&pb.Batch{WriteSetMisses: []*pb.WriteSetMiss{first}},
		&pb.Batch{Launches: []*pb.Launch{{Seq: 1}}},
		&pb.Batch{WriteSetMisses: []*pb.WriteSetMiss{second}, End: &pb.End{Reason: "exit"}})
	d, err := set.Processes[0].Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.WriteSetMisses) != 2 {
		t.Fatalf("%d misses, want 2", len(d.WriteSetMisses))
	}
	for i, want := range []*pb.WriteSetMiss{first, second} {
		got := d.WriteSetMisses[i]
		if got.GetKernelId() != want.KernelId || got.GetAuditSeq() != want.AuditSeq || got.GetSinceSeq() != want.SinceSeq ||
			got.GetAllocationId() != want.AllocationId || len(got.GetParamOffsets()) != len(want.ParamOffsets) {
			t.Errorf("miss %d: %v, want %v", i, got, want)
		}
	}
	if m := d.Process.GetMemory(); m.GetWriteSets() != "learned" || m.GetAuditEvery() != 32 {
		t.Errorf("memory config %v", m)
	}
}

// The write-sets variant's states as the reader gives them: a carried region holds the hash of
// the state it was carried from; the one carried from a lost state has none.
func TestCarriedStates(t *testing.T) {
	d, err := testrec.Open(t, testrec.WriteSets).Processes[0].Load()
	if err != nil {
		t.Fatal(err)
	}
	links := d.Links()
	after := func(seq uint64) *pb.MemoryState {
		for _, s := range links.MemoryFor(seq) {
			if s.GetPoint() == pb.MemoryState_AFTER {
				return s
			}
		}
		t.Fatalf("launch %d has no AFTER state", seq)
		return nil
	}
	w1, w2 := after(1).GetRegions()[0], after(2).GetRegions()[0]
	if w1.GetCarried() != pb.RegionState_NOT_CARRIED || w2.GetCarried() != pb.RegionState_PROVED_READ_ONLY || w2.GetCarriedFrom() != 1 ||
		!bytes.Equal(w1.GetHash(), w2.GetHash()) || len(w2.GetHash()) != recording.HashBytes {
		t.Errorf("launch 2's W: %v; launch 1's: %v", w2, w1)
	}
	if x := after(5).GetRegions()[0]; x.GetCarried() != pb.RegionState_LEARNED_READ_ONLY || x.GetCarriedFrom() != 4 {
		t.Errorf("launch 5's X: %v", x)
	}
	u := after(testrec.WriteSetsUnknown)
	if recording.UnknownRegions(u) != 1 || !u.GetRegions()[0].GetUnknown() || len(u.GetRegions()[0].GetHash()) != 0 ||
		recording.UnknownRegions(after(2)) != 0 {
		t.Errorf("launch %d: %v", testrec.WriteSetsUnknown, u)
	}
	if len(d.WriteSetMisses) != 1 || d.WriteSetMisses[0].GetAuditSeq() != testrec.WriteSetsMissAudit ||
		d.WriteSetMisses[0].GetSinceSeq() != testrec.WriteSetsMissSince || d.WriteSetMisses[0].GetAllocationId() != testrec.WriteSetsX {
		t.Errorf("misses %v", d.WriteSetMisses)
	}
	if s := d.Stats; s.GetRegionsCarriedProved() != 3 || s.GetRegionsCarriedLearned() != 2 || s.GetRegionsCarriedUnknown() != 1 ||
		s.GetWriteSetAudits() != 1 || s.GetWriteSetMisses() != 1 {
		t.Errorf("stats %v", s)
	}
}

func TestCarriedText(t *testing.T) {
	for c, want := range map[pb.RegionState_Carried]string{
		pb.RegionState_NOT_CARRIED:       "",
		pb.RegionState_PROVED_READ_ONLY:  "proved",
		pb.RegionState_LEARNED_READ_ONLY: "learned",
		pb.RegionState_Carried(7):        "7",
	} {
		if got := recording.CarriedText(c); got != want {
			t.Errorf("CarriedText(%v) = %q, want %q", c, got, want)
		}
	}
}
