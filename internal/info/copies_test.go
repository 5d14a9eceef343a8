package info

import (
	"strings"
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// A program that copies but never synchronizes says so; its copy of 0 bytes is a call with
// no copy; a copy whose call was lost is counted; the waiting lines are those that waited,
// longest first.
func TestCopiesWaits(t *testing.T) {
	cs := &pb.Callstack{Id: 9, Frames: []*pb.Frame{{Kind: pb.Frame_PYTHON, File: "/w/train.py", Line: 3, Function: "main"}}}
	cs2 := &pb.Callstack{Id: 10, Frames: []*pb.Frame{{Kind: pb.Frame_PYTHON, File: "/w/train.py", Line: 7, Function: "main"}}}
	never := func() *Copies {
		cc := newCopyCounter()
		line := func(id uint64) string { return map[uint64]string{9: "/w/train.py:3 main"}[id] }
		cc.add(&pb.Batch{Callstacks: []*pb.Callstack{cs}, HostCalls: []*pb.HostCall{
			{Api: "cuMemcpyHtoD_v2", CorrelationId: 1, CallstackId: 9},
			{Api: "cuMemcpyDtoD_v2", CorrelationId: 2, CallstackId: 9}, // 0 bytes: no copy ran
		}}, line)
		cc.add(&pb.Batch{Copies: []*pb.Copy{
			{CopyKind: 1, SrcKind: 2, DstKind: 3, Bytes: 1 << 20, CorrelationId: 1, StartNs: 100, EndNs: 600},
			{CopyKind: 1, SrcKind: 1, DstKind: 3, Bytes: 4096, Async: true, CorrelationId: 77, StartNs: 700, EndNs: 900}, // its call was lost
		}}, line)
		return cc.summarize()
	}()
	if never == nil || never.HostCalls != 2 || never.Copies != 2 || never.CopyNS != 700 || never.PageableAsync != 1 || never.Unlinked != 1 || never.Waits != 0 {
		t.Fatalf("%+v", never)
	}
	var b strings.Builder
	never.write(&textWriter{w: &b})
	never.writeTop(&textWriter{w: &b})
	for _, want := range []string{"waits        none: the host never waited", "1 asynchronous copy to or from pageable host memory (4.0 KiB)", "copies and waits without a recorded call (no line): 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "top waiting lines") {
		t.Errorf("waiting lines of a program that never waited:\n%s", b.String())
	}

	cc := newCopyCounter()
	line := func(id uint64) string {
		return map[uint64]string{9: "/w/train.py:3 main", 10: "/w/train.py:7 main"}[id]
	}
	cc.add(&pb.Batch{Callstacks: []*pb.Callstack{cs, cs2}, HostCalls: []*pb.HostCall{
		{Api: "cuStreamSynchronize", CorrelationId: 1, CallstackId: 9},
		{Api: "cuCtxSynchronize", CorrelationId: 2, CallstackId: 10},
		{Api: "cuStreamWaitEvent", CorrelationId: 3, CallstackId: 10},
	}}, line)
	cc.add(&pb.Batch{Syncs: []*pb.Sync{
		{Type: pb.Sync_STREAM_SYNCHRONIZE, CorrelationId: 1, StartNs: 10, EndNs: 110},
		{Type: pb.Sync_CONTEXT_SYNCHRONIZE, CorrelationId: 2, StartNs: 200, EndNs: 1200},
		{Type: pb.Sync_STREAM_WAIT_EVENT, CorrelationId: 3, StartNs: 1300, EndNs: 1300},
	}}, line)
	c := cc.summarize()
	if c.Waits != 2 || c.WaitNS != 1100 || c.StreamWaits != 1 || len(c.TopWaits) != 2 || c.TopWaits[0].Line != "/w/train.py:7 main" {
		t.Fatalf("%+v", c)
	}
	if newCopyCounter().summarize() != nil {
		t.Error("a recording without copy records has copies")
	}
}
