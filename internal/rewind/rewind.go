// Package rewind rebuilds a region of a launch, or a range of bytes inside
// it, as it was just before or just after the launch ran, from the chunks
// a --memory snapshot recording stored (gpurr rewind). The bytes come from
// package memview; rewind picks the region (by index, or by an address
// inside it) and says, in one line, what the recording lacks when it
// cannot. Before a launch with no snapshot of its own, a recording that
// holds copy states (format 1.17) gives the region's latest state before
// it (diff.PriorStates): a copy's or an earlier launch's snapshot, or the
// zeros of an allocation gpurr cleared.
package rewind

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Request names the bytes to rebuild.
type Request struct {
	Launch uint64               // the launch's sequence number
	Point  pb.MemoryState_Point // memview.Before or memview.After
	Region int                  // the region's index in the launch, unless ByAddr
	// ByAddr picks the region holding device address Addr instead, and
	// the bytes from Addr: Len of them, or to the region's end when Len
	// is 0.
	ByAddr bool
	Addr   uint64
	Len    uint64
}

// Result is the bytes rebuilt and the region they come from.
type Result struct {
	Data   []byte
	Index  int        // the region's index in the launch
	Region *pb.Region // its address and size
	// Tears lists the kernels of other streams, reaching the same memory, that ran while gpurr
	// took the state (recording.Timeline): its bytes may be part from before they wrote, part
	// from after. Empty when none did, or the recording has no GPU timeline to tell.
	Tears []recording.Tear
	// From says, for bytes before a launch with no snapshot of its own, which state they are:
	// "the state after the host-to-device copy at train.py:12 <module>", "the state after
	// launch 5", "zeros: gpurr cleared it when it was allocated, and nothing wrote it since";
	// "" for the launch's own.
	From string
}

// Rewind reads process p's recording and rebuilds the bytes r names. Every
// error is one line about the input: what the recording lacks, or the
// request gets wrong.
//
// It reads the recording frame by frame until it has the launch and the states its memory
// plan promised (Process.Ordered), keeping none of the other launches, so its memory does not
// grow with the recording and an early launch is found without reading the rest. A launch the
// recording lacks makes it read to the end, and again for the line that says which launches
// it has.
func Rewind(p *recording.Process, r Request) (*Result, error) {
	l, err := findLaunch(p, r.Launch)
	if err != nil {
		return nil, err
	}
	v := memview.New(p)
	defer v.Close()
	at := recording.EnumText(r.Point)
	if _, err := v.State(l, r.Point); err != nil {
		var e *memview.Error
		if !errors.As(err, &e) {
			return nil, err
		}
		var why error
		switch e.Err {
		case memview.ErrNoSnapshots:
			return nil, fmt.Errorf("%s was recorded without snapshots (record with --memory snapshot)", p.Name)
		case memview.ErrNoState:
			why = fmt.Errorf("launch %d has no memory state %s it (status %s; not selected for snapshots?)",
				r.Launch, at, recording.EnumText(l.Launch.GetMemory().GetStatus()))
		case memview.ErrLost:
			why = fmt.Errorf("the state %s launch %d was lost: %s", at, r.Launch, e.State.GetLostReason())
		default:
			why = fmt.Errorf("launch %d has only hashes %s it, no contents (snapshot selection or flight-recorder window)", r.Launch, at)
		}
		if r.Point != memview.Before || p.Version.Major == 1 && p.Version.Minor < 17 {
			return nil, why
		}
		return latestBefore(p, v, l, r, why)
	}
	regions := l.Launch.GetRegions()
	idx, start, end, err := pick(regions, r)
	if err != nil {
		return nil, err
	}
	buf, missing, err := v.Read(l, r.Point, idx, start, end)
	var e *memview.Error
	switch {
	case errors.As(err, &e) && e.Err == memview.ErrUnknown:
		return nil, fmt.Errorf("region %d %s launch %d: its state is unknown, carried from a state that was lost (write sets): no bytes to rebuild", idx, at, r.Launch)
	case errors.As(err, &e): // the state has bytes (checked above): no such region
		return nil, fmt.Errorf("launch %d has %s; no region %d", r.Launch, info.Count(len(regions), "region"), idx)
	case err != nil:
		if _, serr := v.Store(); serr != nil {
			return nil, serr
		}
		return nil, fmt.Errorf("region %d: %v", idx, err)
	case len(missing) > 0:
		return nil, fmt.Errorf("region %d: %d of its chunks in this range %s; first chunk %d", idx, len(missing), memview.MissingWhy(p), missing[0])
	}
	tears, err := tearsOf(p, recording.StateKey{Seq: r.Launch, Point: r.Point})
	if err != nil {
		return nil, err
	}
	return &Result{Data: buf, Index: idx, Region: regions[idx], Tears: tears}, nil
}

// pick picks the region r names among regions and the bytes of it: its index (out of range
// when r names a region the launch lacks: the caller says so), and [start, end).
func pick(regions []*pb.Region, r Request) (idx int, start, end uint64, err error) {
	idx = r.Region
	if r.ByAddr {
		idx = -1
		for i, reg := range regions {
			if r.Addr >= reg.Address && r.Addr-reg.Address < reg.Size {
				idx = i
			}
		}
		if idx < 0 {
			return 0, 0, 0, fmt.Errorf("0x%x is outside every region of launch %d: %s", r.Addr, r.Launch, nearestRegions(regions, r.Addr))
		}
	}
	if idx >= 0 && idx < len(regions) {
		end = regions[idx].Size
		if r.ByAddr {
			start = r.Addr - regions[idx].Address
			if r.Len > end-start {
				return 0, 0, 0, fmt.Errorf("--len %d runs past the end of region %d: %d bytes from 0x%x to its end (0x%x)",
					r.Len, idx, end-start, r.Addr, regions[idx].Address+regions[idx].Size)
			}
			if r.Len > 0 {
				end = start + r.Len
			}
		}
	}
	return idx, start, end, nil
}

// latestBefore rebuilds the bytes r names before launch l, which has no snapshot before it
// (why), from the region's latest state before it (diff.PriorStates): the state after the
// copy or launch that last wrote it, when that state is a snapshot, or zeros where gpurr
// cleared the allocation and nothing wrote it since. It reads the recording twice more: for
// its launches before l, and for their states and the copies between them.
func latestBefore(p *recording.Process, v *memview.View, l memview.Launch, r Request, why error) (*Result, error) {
	regions := l.Launch.GetRegions()
	idx, start, end, err := pick(regions, r)
	if err != nil {
		return nil, err
	}
	if idx < 0 || idx >= len(regions) {
		return nil, fmt.Errorf("launch %d has %s; no region %d", r.Launch, info.Count(len(regions), "region"), idx)
	}
	var seqs []uint64
	if _, err := p.Scan(func(b *pb.Batch) error {
		for _, la := range b.GetLaunches() {
			if la.GetSeq() < r.Launch {
				seqs = append(seqs, la.GetSeq())
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	slices.Sort(seqs)
	prior, err := diff.PriorStates(p, seqs, l.Launch)
	if err != nil {
		return nil, err
	}
	pr := prior[idx]
	res := &Result{Index: idx, Region: regions[idx]}
	switch {
	case pr.State == nil:
		return nil, fmt.Errorf("%v, and region %d's state before it is unknown: %s", why, idx, pr.Unknown)
	case pr.Cleared:
		res.Data, res.From = make([]byte, end-start), "zeros: gpurr cleared it when it was allocated, and nothing wrote it since"
		return res, nil
	case pr.Copy != "":
		res.From = "the state after the " + pr.Copy
		if pr.CopyLine != "" {
			res.From += " at " + pr.CopyLine
		}
	default:
		res.From = fmt.Sprintf("the state after launch %d", pr.Seq)
	}
	if !pr.Stored {
		return nil, fmt.Errorf("%v, and region %d's latest state before it, %s, holds hashes only", why, idx, res.From)
	}
	store, err := v.Store()
	if err != nil {
		return nil, err
	}
	data, missing, err := store.Assemble(recording.ChunkHashes(pr.State), v.ChunkBytes(), start, end)
	switch {
	case err != nil:
		return nil, fmt.Errorf("region %d: %v", idx, err)
	case len(missing) > 0:
		return nil, fmt.Errorf("region %d: %d of its chunks in this range %s; first chunk %d", idx, len(missing), memview.MissingWhy(p), missing[0])
	}
	res.Data = data
	return res, nil
}

// tearsOf finds what tore state key (Result.Tears). The GPU timeline comes after the launch
// in the recording, so this is one more pass over all of it, keeping every launch with regions
// and every kernel run: made only where there is a timeline (Process.gpu_timing).
func tearsOf(p *recording.Process, key recording.StateKey) ([]recording.Tear, error) {
	if !p.Info.GetGpuTiming() {
		return nil, nil
	}
	t := recording.NewTimeline()
	_, err := p.Scan(func(b *pb.Batch) error {
		var state []*pb.MemoryState
		for _, s := range b.GetMemory() {
			if s.GetLaunchSeq() == key.Seq && s.GetPoint() == key.Point {
				state = append(state, s)
			}
		}
		t.Add(&pb.Batch{Launches: b.GetLaunches(), Activities: b.GetActivities(), OwnActivities: b.GetOwnActivities(), Memory: state})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t.Torn()[key], nil
}

// findLaunch reads p's launch seq and the states taken around it; the error says, when p has
// no such launch, which launches it has (noLaunch).
func findLaunch(p *recording.Process, seq uint64) (memview.Launch, error) {
	var l memview.Launch
	_, err := p.Ordered([]uint64{seq}, func(rec *recording.LaunchRecord) error {
		l = memview.FromRecord(rec)
		return recording.ErrStop
	})
	if err == nil && l.Launch == nil {
		err = noLaunch(p, seq)
	}
	return l, err
}

// noLaunch says that p has no launch seq, as info.NoLaunch does of the loaded recording: it
// reads the recording again for its first and last launch and how it ends.
func noLaunch(p *recording.Process, seq uint64) error {
	ends := &recording.Data{}
	var first, last *pb.Launch
	res, err := p.Scan(func(b *pb.Batch) error {
		if n := len(b.Launches); n > 0 {
			first = cmp.Or(first, b.Launches[0])
			last = b.Launches[n-1]
		}
		if b.End != nil {
			ends.End = b.End
		}
		return nil
	})
	if err != nil {
		return err
	}
	if first != nil {
		ends.Launches = []*pb.Launch{first, last}
	}
	ends.Truncated = res.Truncated
	return errors.New(info.NoLaunch(p.Name, seq, ends))
}

// nearestRegions names the regions that end closest below addr and start
// closest above it, for a message about an address in none of them.
func nearestRegions(regions []*pb.Region, addr uint64) string {
	below, above := -1, -1
	for i, r := range regions {
		if end := r.Address + r.Size; end <= addr && (below < 0 || end > regions[below].Address+regions[below].Size) {
			below = i
		}
		if r.Address > addr && (above < 0 || r.Address < regions[above].Address) {
			above = i
		}
	}
	span := func(i int) string {
		r := regions[i]
		return fmt.Sprintf("region %d [0x%x, 0x%x)", i, r.Address, r.Address+r.Size)
	}
	var near []string
	if below >= 0 {
		near = append(near, fmt.Sprintf("%s ends %d bytes below it", span(below), addr-(regions[below].Address+regions[below].Size)))
	}
	if above >= 0 {
		near = append(near, fmt.Sprintf("%s starts %d bytes above it", span(above), regions[above].Address-addr))
	}
	if len(near) == 0 {
		return "it has no regions"
	}
	return "nearest, " + strings.Join(near, "; ") + " (gpurr query REC 'SELECT * FROM regions' lists them)"
}
