package diff

import (
	"bytes"
	"cmp"
	"fmt"
	"strings"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Side is one run's record of a launch, with what it refers to.
type Side struct {
	Process       *recording.Process
	Launch        *pb.Launch
	Kernel        *pb.Kernel
	Callstack     *pb.Callstack // nil when none was taken
	Forward       *pb.Callstack // a backward launch's forward callstack (LaunchRecord.Forward)
	Before, After *pb.MemoryState
	ChunkBytes    uint64
}

// ReadLaunch reads the launch with sequence number seq from p's recording
// (a second pass over it), with its kernel, callstack and memory states.
func ReadLaunch(p *recording.Process, seq uint64) (*Side, error) {
	s := &Side{Process: p, ChunkBytes: uint64(cmp.Or(p.Info.GetMemory().GetChunkBytes(), memhash.ChunkSize))}
	_, err := p.Ordered([]uint64{seq}, func(r *recording.LaunchRecord) error {
		s.Launch, s.Kernel, s.Callstack, s.Forward, s.Before, s.After = r.Launch, r.Kernel, r.Callstack, r.Forward, r.Before, r.After
		return recording.ErrStop
	})
	if err != nil {
		return nil, err
	}
	if s.Launch == nil {
		return nil, fmt.Errorf("%s has no launch %d", p.Name, seq)
	}
	return s, nil
}

// RegionDiff is one region of a launch whose memory after it differs.
type RegionDiff struct {
	Index           int
	A, B            *pb.Region // as each run recorded it (address, size, parameter offsets)
	Chunks          int        // chunk hashes compared
	DifferentChunks int
	FirstChunk      int // index of the first differing chunk, -1 when only the sizes differ
	// UnknownA and UnknownB: the region's state after the launch is unknown on that side
	// (carried from a state that was lost, format 1.11): it is not compared, and listed so.
	UnknownA, UnknownB bool
	// With snapshots of the first differing chunk on both sides and a dtype:
	Elements    []dtype.Element // the first differing elements of that chunk
	ElementsOff uint64          // byte offset in the region of that chunk
	Note        string          // why elements are not shown, when they are not
}

// carriedNote says where the chunk hashes of a carried state are (format 1.11: a carried state
// holds its source's region hash only), "" when both sides have theirs.
func carriedNote(a, b *pb.RegionState) string {
	var parts []string
	for _, s := range []struct {
		run string
		rs  *pb.RegionState
	}{{"A", a}, {"B", b}} {
		if s.rs.GetCarried() != pb.RegionState_NOT_CARRIED && len(s.rs.GetChunkHashes()) == 0 {
			parts = append(parts, fmt.Sprintf("in %s carried from launch %d, whose state holds its chunk hashes", s.run, s.rs.GetCarriedFrom()))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "not hashed after this launch (" + strings.Join(parts, "; ") + "): compare there for the chunks that differ"
}

// Differences lists the regions whose state after the launch differs, with
// element values from the snapshots when both sides have them and dtype is
// set, and those whose state is unknown on a side (not compared). maxElems
// bounds the elements listed per region.
func Differences(a, b *Side, dt *dtype.Type, maxElems int) ([]RegionDiff, error) {
	var out []RegionDiff
	var va, vb *memview.View // opened when a region's bytes are compared
	defer func() {
		for _, v := range []*memview.View{va, vb} {
			if v != nil {
				v.Close()
			}
		}
	}()
	ra, rb := a.After.GetRegions(), b.After.GetRegions()
	for i := 0; i < max(len(ra), len(rb)); i++ {
		d := RegionDiff{Index: i, FirstChunk: -1}
		if i < len(a.Launch.GetRegions()) {
			d.A = a.Launch.GetRegions()[i]
		}
		if i < len(b.Launch.GetRegions()) {
			d.B = b.Launch.GetRegions()[i]
		}
		if i >= len(ra) || i >= len(rb) {
			d.Note = "present after the launch in one run only"
			out = append(out, d)
			continue
		}
		if d.UnknownA, d.UnknownB = ra[i].GetUnknown(), rb[i].GetUnknown(); d.UnknownA || d.UnknownB {
			out = append(out, d)
			continue
		}
		if bytes.Equal(ra[i].GetHash(), rb[i].GetHash()) {
			continue
		}
		if note := carriedNote(ra[i], rb[i]); note != "" { // its chunk hashes are with the state it came from
			d.Note = note
			out = append(out, d)
			continue
		}
		ca, cb := recording.ChunkHashes(ra[i]), recording.ChunkHashes(rb[i])
		d.Chunks = max(len(ca), len(cb))
		for k := 0; k < d.Chunks; k++ {
			if k >= len(ca) || k >= len(cb) || !bytes.Equal(ca[k], cb[k]) {
				d.DifferentChunks++
				if d.FirstChunk < 0 {
					d.FirstChunk = k
				}
			}
		}
		if d.FirstChunk >= 0 && d.FirstChunk < len(ca) && d.FirstChunk < len(cb) {
			d.ElementsOff = uint64(d.FirstChunk) * a.ChunkBytes
			snapA, snapB := memview.HasBytes(a.After), memview.HasBytes(b.After)
			switch {
			case dt == nil:
			case !snapA && !snapB:
				again := snapshotFlags(a)
				if a.Launch.GetSeq() != b.Launch.GetSeq() {
					again = fmt.Sprintf("%s (A) and %s (B)", again, snapshotFlags(b))
				}
				d.Note = "neither run has a snapshot after this launch, only hashes: record with " + again + " to see values"
			case !snapA || !snapB:
				with, without, side := "A", "B", b
				if snapB {
					with, without, side = "B", "A", a
				}
				d.Note = fmt.Sprintf("only %s has a snapshot after this launch; %s has hashes only, so no values can be compared (record %s with %s)", with, without, without, snapshotFlags(side))
			default:
				if va == nil {
					va, vb = memview.New(a.Process), memview.New(b.Process)
				}
				ba, err := a.afterChunk(va, i, d.FirstChunk)
				if err != nil {
					return nil, err
				}
				bb, err := b.afterChunk(vb, i, d.FirstChunk)
				if err != nil {
					return nil, err
				}
				d.Elements = dt.Compare(ba, bb, d.ElementsOff, maxElems)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// snapshotFlags are the gpurr record flags that snapshot this launch in a run of the same
// program: a run in snapshot mode already lacks only the selection.
func snapshotFlags(s *Side) string {
	return fmt.Sprintf("--memory snapshot --snapshot-launches %d", s.Launch.GetSeq())
}

// afterChunk reads chunk k of region i of the side's memory after its
// launch, through v, the view of its process.
func (s *Side) afterChunk(v *memview.View, i, k int) ([]byte, error) {
	if _, err := v.Store(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Process.Name, err)
	}
	b, err := v.Chunk(memview.Launch{Launch: s.Launch, After: s.After}, memview.After, i, k)
	if err != nil {
		return nil, fmt.Errorf("%s: chunk %x: %w", s.Process.Name, recording.ChunkHashes(s.After.GetRegions()[i])[k], err)
	}
	return b, nil
}
