package manifest

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/regular"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Manifest is a manifest read for verifying: each process reduced to a
// diff.Run (one small entry per launch) and where each launch's line lies,
// to read the hashes of the few that differ again.
type Manifest struct {
	Path      string
	Header    Header
	Processes []*Expected
	f         *os.File
}

// Expected is one process of a manifest.
type Expected struct {
	Process *Process
	Run     *diff.Run // Process is nil; a launch's KernelID is its kernel's identity
	// Where each launch's line lies (Span), by index of Run.Launches: as two slices, 12 bytes a
	// launch where a []Span takes 16.
	offsets []int64
	lens    []uint32
}

// span is where launch i's line lies.
func (e *Expected) span(i int) Span { return Span{Offset: e.offsets[i], Len: e.lens[i]} }

// ReadOptions say how a manifest's launches are read for verify.
type ReadOptions struct {
	// IncludeLibrary keeps the regions of communication libraries' own memory (Region.Owner)
	// in each launch's state, as diff.ScanOptions.IncludeLibrary does for the recording.
	IncludeLibrary bool
}

// Open reads the manifest at path, a regular file (internal/regular). Errors are one line,
// naming the path.
func Open(path string, o ReadOptions) (*Manifest, error) {
	f, err := regular.Open(path)
	if err != nil {
		return nil, err
	}
	return Read(f, o)
}

// Read reads the manifest f holds, and keeps f to read launches of it again (Close closes
// it); on an error it closes f. Errors are one line, naming f's path.
func Read(f *os.File, o ReadOptions) (*Manifest, error) {
	m, err := read(f, o)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	m.Path, m.f = f.Name(), f
	return m, nil
}

// Close closes the manifest's file.
func (m *Manifest) Close() error { return m.f.Close() }

func read(f io.Reader, o ReadOptions) (*Manifest, error) {
	r, err := NewReader(f)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Header: r.Header}
	for {
		p, err := r.NextProcess()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		e := &Expected{Process: p, Run: &diff.Run{Mode: p.Memory, Complete: p.Complete, WriteSets: p.WriteSets, Kernels: map[uint64]*pb.Kernel{}}}
		for _, k := range p.Kernels {
			id, _ := parseIdentity(k.Identity) // checked by the Reader
			e.Run.Kernels[id] = &pb.Kernel{Id: id, Identity: id, Name: k.Name, Demangled: k.Name}
		}
		for {
			l, span, err := r.NextLaunch()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			dl := diff.Launch{Seq: l.Seq, Stream: int32(l.Stream)}
			if p.StreamUnits != nil {
				dl.Stream = int32(p.StreamUnits[l.Stream])
			}
			if l.After != nil {
				hashes := make([][]byte, 0, len(l.After.Regions))
				for i := range l.After.Regions {
					if l.After.Regions[i].Owner != "" && !o.IncludeLibrary {
						continue
					}
					hashes = append(hashes, l.After.Regions[i].hash)
					dl.Unknown = dl.Unknown || l.After.Regions[i].Unknown
				}
				dl.State, dl.HasState = diff.Digest(hashes), len(hashes) > 0 || len(l.After.Regions) == 0
			}
			e.Run.Append(dl, l.ID())
			e.offsets, e.lens = append(e.offsets, span.Offset), append(e.lens, span.Len)
		}
		m.Processes = append(m.Processes, e)
	}
	if len(m.Processes) == 0 {
		return nil, errors.New("manifest: holds no processes")
	}
	return m, nil
}

// Launch reads launch i (an index of e.Run.Launches) again, whole.
func (m *Manifest) Launch(e *Expected, i int) (*Launch, error) {
	return ReadLaunchAt(m.f, e.span(i))
}

// Options say what Verify reports.
type Options struct {
	All bool // every launch that differs, not only the first
	// Reference is the recording the manifest was made from, where the
	// expected bytes are; "" for the path in the manifest's header.
	Reference string
	Window    int // bytes of each side to show around the first differing byte
	// IncludeLibrary compares communication libraries' own memory too (ReadOptions).
	IncludeLibrary bool
}

// Mismatch is a launch of the recording whose memory after it differs from
// the manifest's.
type Mismatch struct {
	Actual   *recording.LaunchRecord
	Stream   int
	Expected *Launch
	Regions  []RegionMismatch
}

// RegionMismatch is a region that differs. In the embedded diff.RegionDiff,
// A is the recording and B the manifest.
type RegionMismatch struct {
	diff.RegionDiff
	Bytes *Bytes // the first differing chunk's bytes around the first difference; nil when not at hand
	Note  string // why Bytes is nil
}

// Bytes are windows of the expected and actual bytes of a region, from the
// same offset.
type Bytes struct {
	First            uint64 // offset in the region of the first differing byte
	Offset           uint64 // offset in the region of the windows
	Expected, Actual []byte
}

// Verify aligns the launches of actual (a process of the recording
// verified, as diff.Scan reduced it) with e's, as diff aligns two runs, and
// calls fn for the first launch whose memory after it differs (every one
// with o.All), in the recording's launch order. It reads actual's
// recording once more for them. Against a manifest made before streams were
// numbered by thread (no Process.StreamUnits), actual's streams are
// renumbered in order of first use, as that manifest's are.
func (m *Manifest) Verify(actual *diff.Run, e *Expected, o Options, fn func(*Mismatch) error) (*diff.Result, error) {
	if cb := cmp.Or(actual.Process.Info.GetMemory().GetChunkBytes(), memhash.ChunkSize); cb != e.Process.ChunkBytes {
		return nil, fmt.Errorf("%s hashes chunks of %d bytes, the manifest's process %s of %d: the chunk hashes cannot be compared",
			actual.Process.Name, cb, e.Process.Name, e.Process.ChunkBytes)
	}
	if e.Process.StreamUnits == nil {
		actual.NumberByFirstUse()
	}
	var pairs []diff.Pair
	res := diff.AlignEach(actual, e.Run, func(p diff.Pair) {
		if o.All {
			pairs = append(pairs, p)
		}
	})
	if res.First != nil && !o.All {
		pairs = []diff.Pair{*res.First}
	}
	if len(pairs) == 0 {
		return res, nil
	}
	slices.SortFunc(pairs, func(x, y diff.Pair) int { return cmp.Compare(actual.Launches[x.A].Seq, actual.Launches[y.A].Seq) })
	seqs := make([]uint64, len(pairs))
	for i, p := range pairs {
		seqs[i] = actual.Launches[p.A].Seq
	}
	src := &byteSources{actual: memview.New(actual.Process), ref: cmp.Or(o.Reference, m.Header.Recording), refName: e.Process.Name}
	defer src.close()
	j := 0
	_, err := actual.Process.Ordered(seqs, func(r *recording.LaunchRecord) error {
		for seqs[j] != r.Launch.GetSeq() {
			j++
		}
		p := pairs[j]
		exp, err := m.Launch(e, p.B)
		if err != nil {
			return err
		}
		mm, err := compare(r, exp, int(actual.Launches[p.A].Stream), e.Process.ChunkBytes, o, src)
		if err != nil {
			return err
		}
		if err := fn(mm); err != nil {
			return err
		}
		if j == len(seqs)-1 {
			return recording.ErrStop // the rest of the recording holds none of them
		}
		return nil
	})
	return res, err
}

func compare(r *recording.LaunchRecord, exp *Launch, stream int, chunkBytes uint32, o Options, src *byteSources) (*Mismatch, error) {
	mm := &Mismatch{Actual: r, Stream: stream, Expected: exp}
	if exp.After == nil || r.After == nil {
		return nil, fmt.Errorf("launch %d: no memory state to compare (the manifest changed since it was read?)", r.Launch.GetSeq())
	}
	a := &diff.Side{Launch: r.Launch, After: r.After, ChunkBytes: uint64(chunkBytes)}
	b := &diff.Side{Launch: &pb.Launch{}, After: &pb.MemoryState{Snapshot: exp.After.Snapshot}, ChunkBytes: uint64(chunkBytes)}
	for _, reg := range exp.After.Regions {
		b.Launch.Regions = append(b.Launch.Regions, &pb.Region{Size: reg.Size})
		rs := &pb.RegionState{Hash: reg.hash, Unknown: reg.Unknown}
		for _, c := range reg.chunks {
			rs.ChunkHashes = append(rs.ChunkHashes, c...)
		}
		b.After.Regions = append(b.After.Regions, rs)
	}
	regions, err := diff.Differences(a, b, nil, 0)
	if err != nil {
		return nil, err
	}
	for _, d := range regions {
		if d.Index < len(exp.After.Regions) && exp.After.Regions[d.Index].Owner != "" && !o.IncludeLibrary {
			continue
		}
		rm := RegionMismatch{RegionDiff: d}
		if d.FirstChunk >= 0 && d.FirstChunk < len(exp.After.Regions[d.Index].chunks) &&
			d.FirstChunk < len(recording.ChunkHashes(r.After.GetRegions()[d.Index])) {
			rm.Bytes, rm.Note = src.window(r, d, exp, o.Window)
		}
		mm.Regions = append(mm.Regions, rm)
	}
	return mm, nil
}

// byteSources reads, when first needed, the chunk stores that may hold a
// differing chunk: the recording verified, and the reference recording.
type byteSources struct {
	actual       *memview.View
	ref, refName string // the reference recording, and the process in it
	refs         *memview.View
	actualErr    error
	refErr       error
	opened       bool
}

func (s *byteSources) open() {
	if s.opened {
		return
	}
	s.opened = true
	_, s.actualErr = s.actual.Store()
	var p *recording.Process
	if p, s.refErr = referenceProcess(s.ref, s.refName); s.refErr == nil {
		s.refs = memview.New(p)
		_, s.refErr = s.refs.Store()
	}
}

// referenceProcess finds the process named name in the reference
// recording ref: the recording, or the process's own directory, or a
// recording of one process under another name.
func referenceProcess(ref, name string) (*recording.Process, error) {
	set, err := recording.Open(ref)
	if err != nil {
		return nil, err
	}
	for _, p := range set.Processes {
		if p.Name == name {
			return p, nil
		}
	}
	if len(set.Processes) == 1 {
		return set.Processes[0], nil
	}
	return nil, fmt.Errorf("%s has no process %s", ref, name)
}

func (s *byteSources) close() {
	for _, v := range []*memview.View{s.actual, s.refs} {
		if v != nil {
			v.Close()
		}
	}
}

// window reads the first differing chunk of a region from both sides and
// cuts a window of n bytes around the first differing byte.
func (s *byteSources) window(r *recording.LaunchRecord, d diff.RegionDiff, exp *Launch, n int) (*Bytes, string) {
	l := memview.FromRecord(r)
	if _, err := s.actual.State(l, memview.After); err != nil {
		return nil, fmt.Sprintf("the recording has hashes only after this launch: record with --memory snapshot --snapshot-launches %d to see the bytes", r.Launch.GetSeq())
	}
	s.open()
	if s.actualErr != nil {
		return nil, fmt.Sprintf("actual bytes: %v", s.actualErr)
	}
	actual, err := s.actual.Chunk(l, memview.After, d.Index, d.FirstChunk)
	if err != nil {
		return nil, fmt.Sprintf("actual bytes: %v", err)
	}
	h := [16]byte(exp.After.Regions[d.Index].chunks[d.FirstChunk])
	var expected []byte
	if s.refs != nil {
		expected, err = s.refs.Get(h)
	}
	if expected == nil { // content-addressed: the run verified may hold the same bytes
		if b, aerr := s.actual.Get(h); aerr == nil {
			expected = b
		}
	}
	if expected == nil {
		why := "it has hashes only after this launch"
		switch {
		case s.refErr != nil:
			why = s.refErr.Error()
		case exp.After.Snapshot:
			why = err.Error()
		}
		return nil, fmt.Sprintf("expected bytes: chunk %x is not in the reference recording %s (%s); pass --reference with the recording the manifest was made from", h, s.ref, why)
	}
	first := 0
	for first < min(len(expected), len(actual)) && expected[first] == actual[first] {
		first++
	}
	start := first &^ 15
	cut := func(b []byte) []byte { return b[min(start, len(b)):min(start+n, len(b))] }
	base := d.ElementsOff // the chunk's offset in the region
	return &Bytes{First: base + uint64(first), Offset: base + uint64(start), Expected: cut(expected), Actual: cut(actual)}, ""
}
