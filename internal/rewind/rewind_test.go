package rewind

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// open writes a recording with write and opens its process.
func open(t *testing.T, write func(dir string) (testrec.Replayable, error)) (*recording.Process, testrec.Replayable) {
	t.Helper()
	dir := t.TempDir()
	want, err := write(dir)
	if err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set.Processes[0], want
}

func TestRewind(t *testing.T) {
	p, want := open(t, testrec.WriteReplayable)
	for _, c := range []struct {
		name   string
		req    Request
		region int
		want   []byte
	}{
		{"after, by index", Request{Launch: 2, Point: memview.After, Region: 1}, 1, want.YAfter},
		{"before, by index", Request{Launch: 2, Point: memview.Before, Region: 0}, 0, want.XBefore},
		{"by address, to the end", Request{Launch: 2, Point: memview.Before, ByAddr: true, Addr: want.Y + 70000}, 1, want.YBefore[70000:]},
		{"by address, a range across chunks", Request{Launch: 2, Point: memview.After, ByAddr: true, Addr: want.Y + 65530, Len: 12}, 1, want.YAfter[65530:65542]},
		{"a range up to the end", Request{Launch: 2, Point: memview.After, ByAddr: true, Addr: want.Y + 159990, Len: uint64(len(want.YAfter) - 159990)}, 1, want.YAfter[159990:]},
	} {
		res, err := Rewind(p, c.req)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if res.Index != c.region || res.Region.GetAddress() != []uint64{want.X, want.Y}[c.region] || !bytes.Equal(res.Data, c.want) {
			t.Errorf("%s: region %d at 0x%x, %d bytes; want region %d, %d bytes", c.name, res.Index, res.Region.GetAddress(), len(res.Data), c.region, len(c.want))
		}
	}
	for _, c := range []struct {
		req  Request
		want string
	}{
		{Request{Launch: 9, Point: memview.After}, "box-9 has no launch 9"},
		{Request{Launch: 1, Point: memview.After}, "launch 1 has only hashes after it, no contents (snapshot selection or flight-recorder window)"},
		{Request{Launch: 1, Point: memview.Before}, "launch 1 has no memory state before it (status hash; not selected for snapshots?)"},
		{Request{Launch: 3, Point: memview.After}, "launch 3 has no memory state after it (status skipped_capture;"},
		{Request{Launch: 2, Point: memview.After, Region: 2}, "launch 2 has 2 regions; no region 2"},
		// A range past the region's end is an error, not silently shorter.
		{Request{Launch: 2, Point: memview.After, ByAddr: true, Addr: want.Y + 159990, Len: uint64(len(want.YAfter) - 159990 + 1)}, "runs past the end of region 1"},
		{Request{Launch: 2, Point: memview.After, ByAddr: true, Addr: want.Y - 1}, "0x7f3a003fffff is outside every region of launch 2: nearest, region 0 [0x7f3a00200000, 0x7f3a00227100) ends"},
	} {
		if _, err := Rewind(p, c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.req, err, c.want)
		}
	}
}

func TestNearestRegions(t *testing.T) {
	regions := []*pb.Region{{Address: 0x3000, Size: 0x100}, {Address: 0x1000, Size: 0x100}, {Address: 0x1800, Size: 0x10}}
	for addr, want := range map[uint64]string{
		0x2000: "nearest, region 2 [0x1800, 0x1810) ends 2032 bytes below it; region 0 [0x3000, 0x3100) starts 4096 bytes above it",
		0x0800: "nearest, region 1 [0x1000, 0x1100) starts 2048 bytes above it",
		0x3100: "nearest, region 0 [0x3000, 0x3100) ends 0 bytes below it",
	} {
		if got := nearestRegions(regions, addr); !strings.HasPrefix(got, want) {
			t.Errorf("0x%x: %q, want %q", addr, got, want)
		}
	}
	if got := nearestRegions(nil, 5); got != "it has no regions" {
		t.Errorf("no regions: %q", got)
	}
}

// A region carried from a lost state (write sets, format 1.11) has no bytes to rebuild, and
// rewind says so rather than that the region is missing.
func TestRewindUnknownRegion(t *testing.T) {
	set := testrec.OpenBatches(t,
		&pb.Batch{Process: &pb.Process{Pid: 3, Memory: &pb.MemoryConfig{Mode: "snapshot", WriteSets: "proved"}}},
		&pb.Batch{Launches: []*pb.Launch{{Seq: 4, Regions: []*pb.Region{{Address: 0x7000_0000, Size: 4096}}}},
			Memory: []*pb.MemoryState{{LaunchSeq: 4, Point: memview.After, Snapshot: true,
				Regions: []*pb.RegionState{{Carried: pb.RegionState_PROVED_READ_ONLY, Unknown: true}}}},
			End: &pb.End{Reason: "exit"}})
	_, err := Rewind(set.Processes[0], Request{Launch: 4, Point: memview.After})
	want := "region 0 after launch 4: its state is unknown, carried from a state that was lost (write sets): no bytes to rebuild"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// Rewind finds a launch and its states reading the recording frame by frame: what it finds,
// and the line for a launch the recording lacks, are those of the loaded recording
// (Process.Load, Links), for every launch of the synthetic recordings and for launches at and
// around the frame boundaries of a generated snapshot recording of several frames.
func TestFindLaunchStreams(t *testing.T) {
	tmp := t.TempDir()
	if _, err := testrec.WriteReplayable(filepath.Join(tmp, "replayable")); err != nil {
		t.Fatal(err)
	}
	recs := []string{"replayable"}
	for _, v := range []testrec.Variant{testrec.Memory, testrec.Incomplete, testrec.Truncated, testrec.WriteSets} {
		if err := testrec.Write(filepath.Join(tmp, string(v)), v); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, string(v))
	}
	const big = 10_000 // three frames
	if _, err := testrec.WriteBig(filepath.Join(tmp, "big"), testrec.Big{Launches: big, Snapshot: true, DifferAt: 4097}); err != nil {
		t.Fatal(err)
	}
	recs = append(recs, "big")
	for _, name := range recs {
		set, err := recording.Open(filepath.Join(tmp, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range set.Processes {
			d, err := p.Load()
			if err != nil {
				t.Fatal(err)
			}
			links := d.Links()
			seqs := []uint64{0, 1, 2, 4095, 4096, 4097, 8192, 8193, big, big + 1}
			if name != "big" {
				seqs = nil
				for seq := range uint64(len(d.Launches) + 3) {
					seqs = append(seqs, seq)
				}
			}
			for _, seq := range seqs {
				got, err := findLaunch(p, seq)
				want, ok := memview.FromLinks(links, seq)
				switch {
				case !ok:
					if msg := info.NoLaunch(p.Name, seq, d); err == nil || err.Error() != msg {
						t.Errorf("%s %s launch %d: error %v, want %q", name, p.Name, seq, err, msg)
					}
				case err != nil:
					t.Errorf("%s %s launch %d: %v", name, p.Name, seq, err)
				case !proto.Equal(got.Launch, want.Launch) || !proto.Equal(got.Before, want.Before) || !proto.Equal(got.After, want.After):
					t.Errorf("%s %s launch %d: found %v, want %v", name, p.Name, seq, got, want)
				}
			}
		}
	}
}

// The state after launch 2 of WriteReplayableTorn was taken while launch 4's kernel, on
// another stream, wrote the same region: its bytes are rebuilt all the same, with the tear.
func TestRewindTorn(t *testing.T) {
	p, want := open(t, testrec.WriteReplayableTorn)
	res, err := Rewind(p, Request{Launch: 2, Point: memview.After, Region: 1})
	tear := recording.Tear{Stream: testrec.TornStream, Launch: testrec.TornLaunch, Kernel: "saxpy_gridstride"}
	if err != nil || !bytes.Equal(res.Data, want.YAfter) || len(res.Tears) != 1 || res.Tears[0] != tear {
		t.Fatalf("after launch 2: %v, tears %v; want its bytes and %v", err, res.Tears, tear)
	}
	res, err = Rewind(p, Request{Launch: 2, Point: memview.Before, Region: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tears) != 0 {
		t.Errorf("before launch 2, taken alone: tears %v; want none", res.Tears)
	}
}

// Before a launch with no snapshot of its own (outside the snapshot selection), rewind gives
// the region's latest state before it (format 1.17): the bytes a copy from the host left after
// the last launch that wrote the region, and zeros for an allocation gpurr cleared that nothing
// wrote since; it says which. Where the latest state holds hashes only, or is unknown, it says so.
func TestRewindAfterCopy(t *testing.T) {
	fill := testrec.ScriptKernel{Name: "fill", Params: []uint32{8}}
	use := testrec.ScriptKernel{Name: "use", Params: []uint32{8, 8}}
	copied := bytes.Repeat([]byte{7}, 100)
	script := func(copyCall testrec.Call) testrec.Script {
		return testrec.Script{Host: "box", Pid: 3, Mode: "snapshot", Kernels: []testrec.ScriptKernel{fill, use}, Allocs: []uint64{4096, 4096},
			Cleared: map[int]bool{1: true},
			Calls: []testrec.Call{
				{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: {1, 2, 3}}},
				copyCall,
				{Kernel: 1, Args: []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1)}, Writes: map[int][]byte{1: {9}}, HashOnly: true},
			}}
	}
	p := testrec.OpenScript(t, script(testrec.Call{Copied: true, CopyLine: 12, Writes: map[int][]byte{0: copied}}))
	res, err := Rewind(p, Request{Launch: 2, Point: memview.Before, Region: 0})
	want := append(append([]byte{}, copied...), make([]byte, 4096-len(copied))...)
	if err != nil || !bytes.Equal(res.Data, want) || res.From != "the state after the host-to-device copy at train.py:12 <module>" {
		t.Fatalf("region 0 before launch 2: %v, from %q", err, res.From)
	}
	res, err = Rewind(p, Request{Launch: 2, Point: memview.Before, ByAddr: true, Addr: res.Region.GetAddress() + 96, Len: 8})
	if err != nil || !bytes.Equal(res.Data, []byte{7, 7, 7, 7, 0, 0, 0, 0}) {
		t.Errorf("8 bytes of region 0 from byte 96 before launch 2: %v, %v", err, res)
	}
	res, err = Rewind(p, Request{Launch: 2, Point: memview.Before, Region: 1})
	if err != nil || !bytes.Equal(res.Data, make([]byte, 4096)) || !strings.HasPrefix(res.From, "zeros: gpurr cleared it") {
		t.Errorf("region 1, cleared, before launch 2: %v, %v", err, res)
	}
	if res, err := Rewind(p, Request{Launch: 1, Point: memview.Before, Region: 0}); err != nil || res.From != "" {
		t.Errorf("launch 1's own snapshot before it: %v, from %q", err, res.From)
	}

	// A copy the agent did not see (a 2D copy) is not in the recording: launch 1's bytes are the
	// latest it holds.
	p = testrec.OpenScript(t, script(testrec.Call{Copy: true, Writes: map[int][]byte{0: copied}}))
	if res, err := Rewind(p, Request{Launch: 2, Point: memview.Before, Region: 0}); err != nil || !bytes.Equal(res.Data[:3], []byte{1, 2, 3}) ||
		res.From != "the state after launch 1" {
		t.Errorf("after a copy the agent did not see: %v, %v", err, res)
	}
	lost := testrec.Call{Copied: true, CopyLost: true, CopyLine: 12, Writes: map[int][]byte{0: copied}}
	_, err = Rewind(testrec.OpenScript(t, script(lost)), Request{Launch: 2, Point: memview.Before, Region: 0})
	if err == nil || !strings.Contains(err.Error(), "launch 2 has no memory state before it (status hash; not selected for snapshots?)") ||
		!strings.Contains(err.Error(), "region 0's state before it is unknown: the host-to-device copy at train.py:12 <module> that last wrote it lost its state") {
		t.Errorf("after a copy whose state was lost: %v", err)
	}
}
