package manifest

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/info"
)

// Report is what gpurr verify found, process by process: the data model of both its text and
// its JSON.
type Report struct {
	Recording string           `json:"recording"` // as given
	Manifest  string           `json:"manifest"`
	Processes []*ProcessReport `json:"processes"`
	Warnings  []string         `json:"warnings"`
}

// ProcessReport is one process of the recording verified against its pair in the manifest.
type ProcessReport struct {
	Process  string `json:"process"`
	Expected string `json:"manifest_process,omitempty"` // the manifest's process it was paired with
	// Outcome: "matches", "differs", or "not-verified" (Error says why).
	Outcome     string `json:"outcome"`
	Error       string `json:"error,omitempty"`
	Matched     int    `json:"matched"`
	Compared    int    `json:"compared"`
	NotCompared int    `json:"not_compared"` // matched launches with a region's state unknown on a side
	Differ      int    `json:"differ"`
	// Mismatches are the launches that differ: the first, or with --continue (All) every one.
	Mismatches    []*MismatchReport  `json:"mismatches,omitempty"`
	All           bool               `json:"all"`
	WriteSets     *diff.WriteSetNote `json:"write_sets,omitempty"`
	OnlyRecording *diff.Unmatched    `json:"only_recording,omitempty"`
	OnlyManifest  *diff.Unmatched    `json:"only_manifest,omitempty"`
	// Library counts the recording's region states left out because a communication library
	// made their memory for its own use, by owner (diff.Run.Library); empty with
	// --include-library.
	Library map[string]int `json:"library_left_out,omitempty"`
}

// Label names the process in the report, with its manifest's process when that is named
// otherwise.
func (p *ProcessReport) Label() string {
	if p.Expected != "" && p.Expected != p.Process {
		return fmt.Sprintf("%s (manifest: %s)", p.Process, p.Expected)
	}
	return p.Process
}

// MismatchReport is a launch whose memory after it differs from the manifest's.
type MismatchReport struct {
	Seq         uint64                 `json:"seq"`
	ExpectedSeq uint64                 `json:"manifest_seq"`
	Kernel      string                 `json:"kernel"`
	Stream      int                    `json:"stream"`
	Origin      diff.Origin            `json:"origin"`
	Regions     []RegionMismatchReport `json:"regions"` // the first diff.MaxListed
	RegionsMore int                    `json:"regions_more,omitempty"`
}

// RegionMismatchReport is a region that differs from the manifest's (A is the recording, B the
// manifest), with the bytes around the first difference where both are at hand.
type RegionMismatchReport struct {
	diff.RegionReport
	Bytes     *BytesReport `json:"bytes,omitempty"`
	BytesNote string       `json:"bytes_note,omitempty"` // why Bytes is absent
}

// BytesReport are windows of the expected and actual bytes (hex) from the same offset.
type BytesReport struct {
	First    uint64 `json:"first"`  // offset in the region of the first differing byte
	Offset   uint64 `json:"offset"` // offset in the region of the windows
	Expected string `json:"expected"`
	Actual   string `json:"actual"`
}

// NewMismatchReport is the report of a mismatch, its kernel named by kernelName and its origin
// with at most frames frames.
func NewMismatchReport(mm *Mismatch, kernelName string, frames int) *MismatchReport {
	l := mm.Actual.Launch
	r := &MismatchReport{Seq: l.GetSeq(), ExpectedSeq: mm.Expected.Seq, Kernel: kernelName, Stream: mm.Stream,
		Origin: diff.NewOrigin(l, mm.Actual.Callstack, mm.Actual.Forward, frames), Regions: []RegionMismatchReport{}}
	for i, reg := range mm.Regions {
		if i == diff.MaxListed {
			r.RegionsMore = len(mm.Regions) - diff.MaxListed
			break
		}
		rr := RegionMismatchReport{RegionReport: diff.NewRegionReport(reg.RegionDiff), BytesNote: reg.Note}
		if b := reg.Bytes; b != nil {
			rr.Bytes = &BytesReport{First: b.First, Offset: b.Offset, Expected: fmt.Sprintf("%x", b.Expected), Actual: fmt.Sprintf("%x", b.Actual)}
		}
		r.Regions = append(r.Regions, rr)
	}
	return r
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error { return diff.WriteJSON(w, r) }

// WriteText writes a launch that differs: the first of a process in full, under the process's
// label, the others (--continue) after it.
func (m *MismatchReport) WriteText(w io.Writer, label string, first bool) error {
	t := info.NewTextWriter(w)
	if first {
		t.Printf("%s: launch %d differs from the manifest (its launch %d): the memory after it differs\n", label, m.Seq, m.ExpectedSeq)
	} else {
		t.Printf("launch %d differs from the manifest (its launch %d)\n", m.Seq, m.ExpectedSeq)
	}
	t.Printf("  kernel   %s (stream %d)\n", m.Kernel, m.Stream)
	m.Origin.Write(t, "at")
	for _, r := range m.Regions {
		t.Printf("  region %d %s\n", r.Index, r.Text("recording", "manifest"))
		if r.Note != "" {
			t.Printf("    (%s)\n", r.Note)
		}
		if r.BytesNote != "" {
			t.Printf("    (%s)\n", r.BytesNote)
		}
		if b := r.Bytes; b != nil {
			t.Printf("    first differing byte 0x%x\n", b.First)
			for _, side := range []struct{ name, data string }{{"expected", b.Expected}, {"actual  ", b.Actual}} {
				for off := 0; off < len(side.data); off += 32 {
					name := side.name
					if off > 0 {
						name = "        "
					}
					t.Printf("    %s 0x%x  %s\n", name, b.Offset+uint64(off/2), hexLine(side.data[off:min(off+32, len(side.data))]))
				}
			}
		}
	}
	diff.WriteMore(t, "  ", m.RegionsMore)
	return t.Err()
}

// hexLine spaces hex digits into bytes: "0a1b" is "0a 1b".
func hexLine(h string) string {
	parts := make([]string, 0, len(h)/2)
	for i := 0; i+2 <= len(h); i += 2 {
		parts = append(parts, h[i:i+2])
	}
	return strings.Join(parts, " ")
}

// WriteText writes what follows a process's mismatches: whether it matches the manifest, the
// count of those that differ, what the answer rests on, and the launches on one side only.
func (p *ProcessReport) WriteText(w io.Writer) error {
	t := info.NewTextWriter(w)
	switch p.Outcome {
	case "not-verified":
		t.Printf("%s: not verified: %s\n", p.Process, p.Error)
		return t.Err()
	case "matches":
		t.Printf("%s: matches the manifest: %d launches compared after they ran (%d matched)\n", p.Label(), p.Compared, p.Matched)
	default:
		which := "this one first"
		if p.All {
			which = "all listed above"
		}
		t.Printf("  %d launches matched, %d compared; %d of them differ from the manifest, %s\n", p.Matched, p.Compared, p.Differ, which)
	}
	for _, owner := range slices.Sorted(maps.Keys(p.Library)) {
		t.Printf("  %s\n", diff.LibraryLine(p.Library[owner], owner))
	}
	p.WriteSets.Write(t)
	p.OnlyRecording.Write(t, "the recording")
	p.OnlyManifest.Write(t, "the manifest")
	return t.Err()
}
