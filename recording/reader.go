package recording

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/internal/regular"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Set is an opened recording: one or more process recordings sharing a
// modules folder.
type Set struct {
	Dir       string     // the recording directory (holds modules/)
	Processes []*Process // sorted by rank (processes without one last), then host, pid and name
	// Damaged holds one error per process directory that could not be opened (a damaged
	// header or first frame, an empty events file, one that is not a regular file, a
	// directory or events file the reader may not read, a symlink loop), each a
	// *ProcessError naming its file; Open reads the other processes and fails only when none
	// opens.
	Damaged []error
}

// ProcessError is why Open could not open one process directory of a set.
type ProcessError struct {
	Name string // the process directory's name inside the set, as Process.Name
	Err  error  // names the file
}

func (e *ProcessError) Error() string { return e.Err.Error() }
func (e *ProcessError) Unwrap() error { return e.Err }

// Process is one process's recording, opened but not read.
type Process struct {
	Dir     string // the process directory
	Name    string // its name inside the set, e.g. "host-1234"
	Info    *pb.Process
	Version Version
	Size    int64 // bytes in the events file when it was opened
	// StepRange is the regular expression of NVTX range messages that number the process's
	// training steps for its readers (Stepper): the one it was recorded with
	// (Info.step_range), unless a reader sets another; "" for optimizer steps.
	StepRange string
	// StepEvery numbers steps by runs of this many launch calls (Info.step_every, format 1.12)
	// when StepRange is "": a program without optimizer steps recorded with --step-every.
	StepEvery uint32
	setDir    string

	progress func(read int64) // bytes of the events file read so far, while scanning
}

// ReportProgress makes later scans and loads of the set's processes call
// fn with the bytes read so far over all processes and their total, about
// every megabyte: for a progress bar over large recordings.
func (s *Set) ReportProgress(fn func(done, total int64)) {
	var total int64
	for _, p := range s.Processes {
		total += p.Size
	}
	var base int64
	for _, p := range s.Processes {
		start := base
		p.progress = func(read int64) { fn(start+read, total) }
		base += p.Size
	}
}

// Process finds the process that which names: its directory name inside the set, its pid, or
// its torchrun rank. It returns nil when none matches.
func (s *Set) Process(which string) *Process {
	for _, p := range s.Processes {
		if p.Name == which || strconv.Itoa(int(p.Info.GetPid())) == which ||
			(p.Info.Rank != nil && strconv.Itoa(int(p.Info.GetRank())) == which) {
			return p
		}
	}
	return nil
}

// nestedRecordings names the entries of path that are recordings themselves (gpurr demo -o DIR
// keeps DIR/a and DIR/b; a job's hosts may each have one), for the error saying path is not one.
func nestedRecordings(path string, entries []fs.DirEntry) []string {
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(path, e.Name())
		subs, _ := os.ReadDir(dir)
		for _, sub := range subs {
			if _, err := os.Stat(filepath.Join(dir, sub.Name(), EventsFile)); err == nil {
				names = append(names, e.Name())
				break
			}
		}
	}
	return names
}

// Open opens a recording directory, or a single process directory inside
// one. The error names the path and the problem in one line.
func Open(path string) (*Set, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	if !st.IsDir() {
		if base := filepath.Base(path); base == SetFile || base == EventsFile {
			return nil, fmt.Errorf("%s: a file of a recording; give its directory, %s", path, filepath.Dir(path))
		}
		return nil, fmt.Errorf("%s: not a directory (a recording is the directory gpurr record -o wrote)", path)
	}
	if _, err := os.Stat(filepath.Join(path, EventsFile)); err == nil {
		p, err := openProcess(filepath.Dir(path), path)
		if err != nil {
			return nil, err
		}
		return &Set{Dir: filepath.Dir(path), Processes: []*Process{p}}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	set := &Set{Dir: path}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == ModulesDir {
			continue
		}
		dir := filepath.Join(path, e.Name())
		events := filepath.Join(dir, EventsFile)
		if _, err := os.Stat(events); errors.Is(err, fs.ErrNotExist) {
			continue // not a process directory
		} else if err != nil {
			// A process directory that cannot be read (no permission, its events file a
			// symlink loop) is damaged, not absent.
			set.Damaged = append(set.Damaged, &ProcessError{Name: e.Name(), Err: fmt.Errorf("%s: %w", events, unwrapPathError(err))})
			continue
		}
		p, err := openProcess(path, dir)
		if errors.Is(err, ErrNewerVersion) {
			return nil, err
		}
		if err != nil {
			set.Damaged = append(set.Damaged, &ProcessError{Name: e.Name(), Err: err})
			continue
		}
		set.Processes = append(set.Processes, p)
	}
	if len(set.Processes) == 0 {
		if len(set.Damaged) > 0 {
			return nil, set.Damaged[0]
		}
		if nested := nestedRecordings(path, entries); len(nested) > 0 {
			return nil, fmt.Errorf("%s: not a gpurr recording but a folder of recordings (%s): give one of them", path, strings.Join(nested, ", "))
		}
		return nil, fmt.Errorf("%s: not a gpurr recording (no %s in it or its subdirectories)", path, EventsFile)
	}
	sort.Slice(set.Processes, func(i, j int) bool { return processLess(set.Processes[i], set.Processes[j]) })
	return set, nil
}

func processLess(a, b *Process) bool {
	// Ranked processes first (a launcher such as torchrun's has no rank), so the order is a
	// total one: comparing ranks only where both have one made it cycle through hostnames.
	if (a.Info.Rank != nil) != (b.Info.Rank != nil) {
		return a.Info.Rank != nil
	}
	if ra, rb := a.Info.GetRank(), b.Info.GetRank(); ra != rb {
		return ra < rb
	}
	if a.Info.GetHostname() != b.Info.GetHostname() {
		return a.Info.GetHostname() < b.Info.GetHostname()
	}
	if a.Info.GetPid() != b.Info.GetPid() {
		return a.Info.GetPid() < b.Info.GetPid()
	}
	// Processes of containers that share host and pid (CreateNew): by name, host-1 before
	// host-1+2, +2 before +10, the same in every reading, so that diff pairs them alike.
	if len(a.Name) != len(b.Name) {
		return len(a.Name) < len(b.Name)
	}
	return a.Name < b.Name
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r      io.Reader
	n      int64
	report func(int64)
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	c.report(c.n)
	return n, err
}

// openProcess reads the file header and the first frame (Process).
func openProcess(setDir, dir string) (*Process, error) {
	p := &Process{Dir: dir, Name: filepath.Base(dir), setDir: setDir}
	if st, err := os.Stat(filepath.Join(dir, EventsFile)); err == nil {
		p.Size = st.Size()
	}
	first := true
	err := p.scan(func(b *pb.Batch) error {
		if first && b.Process == nil {
			return errors.New("first frame has no process description")
		}
		first = false
		p.Info = b.Process
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) && !errors.Is(err, errTruncated) {
		return nil, err
	}
	if p.Info == nil {
		return nil, fmt.Errorf("%s: recording holds no frame (the program was killed before its first write)", filepath.Join(dir, EventsFile))
	}
	p.StepRange = p.Info.GetStepRange()
	p.StepEvery = p.Info.GetStepEvery()
	return p, nil
}

var errStop = errors.New("stop")

// ScanResult says how a scan ended.
type ScanResult struct {
	Frames    int
	Truncated bool // the file ended inside a frame: the program was killed mid-write
}

// HasLaunches reports whether the process recorded any kernel launch, reading only up to the
// first frame that holds one. A launcher (torchrun's agent, a shell) that loads CUDA but
// launches nothing has none.
func (p *Process) HasLaunches() (bool, error) {
	found := false
	_, err := p.Scan(func(b *pb.Batch) error {
		if len(b.Launches) > 0 || len(b.GraphLaunches) > 0 {
			found = true
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return found, err
}

// Scan calls fn for each frame's batch in file order. It returns
// Truncated when the file ends inside a frame (all whole frames were
// delivered). Errors name the file.
func (p *Process) Scan(fn func(*pb.Batch) error) (ScanResult, error) {
	var res ScanResult
	err := p.scan(func(b *pb.Batch) error {
		res.Frames++
		return fn(b)
	})
	if errors.Is(err, errTruncated) {
		res.Truncated = true
		return res, nil
	}
	return res, err
}

func (p *Process) scan(fn func(*pb.Batch) error) error {
	path := filepath.Join(p.Dir, EventsFile)
	f, err := regular.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	defer f.Close()
	var r io.Reader = f
	if p.progress != nil {
		r = &countingReader{r: f, report: p.progress}
	}
	err = scanFrames(bufio.NewReaderSize(r, 1<<20), func(v Version) { p.Version = v }, fn)
	if err != nil && !errors.Is(err, errStop) && !errors.Is(err, errTruncated) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return err
}

// scanFrames reads a whole events stream: header, then frames.
func scanFrames(r io.Reader, version func(Version), fn func(*pb.Batch) error) error {
	h := make([]byte, headerSize)
	if n, err := io.ReadFull(r, h); err != nil {
		if n == 0 {
			return errors.New("empty file (the program was killed before its first write)")
		}
		if err == io.ErrUnexpectedEOF {
			return errTruncatedHeader
		}
		return err
	}
	v, err := decodeFileHeader(h)
	if err != nil {
		return err
	}
	version(v)
	fr := &frameReader{r: r, offset: headerSize}
	for {
		payload, err := fr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		b := &pb.Batch{}
		if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(payload, b); err != nil {
			return fmt.Errorf("frame ending at offset %d: %v", fr.offset, err)
		}
		if err := fn(b); err != nil {
			return err
		}
	}
}

// Data is a process recording read whole into memory.
type Data struct {
	Process       *pb.Process
	Devices       []*pb.Device
	Modules       []*pb.Module
	Kernels       []*pb.Kernel
	Callstacks    []*pb.Callstack
	Launches      []*pb.Launch
	Activities    []*pb.KernelActivity
	OwnActivities []*pb.KernelActivity // gpurr's own memory-capture kernels (format 1.2)
	GraphNodes    []*pb.GraphNode
	GraphLaunches []*pb.GraphLaunch
	Allocations   []*pb.Allocation  // allocations and frees in order; a free repeats its allocation's id
	Memory        []*pb.MemoryState // launches' memory states, in the order they completed (after their launch)
	Log           []*pb.LogEntry
	Ranges        []*pb.Range       // NVTX ranges as written, opened in order (format 1.7); AllRanges applies RangeEnds
	RangeEnds     []*pb.RangeEnd    // ends of ranges written in earlier frames
	ProbeResults  []*pb.ProbeResult // launches probed live (--probe; format 1.10), in the order written: ProbeCTAs decodes their CTAs
	ProbeKernels  []*pb.ProbeKernel // the kernels --probe picked: instrumented or why not
	// WriteSetMisses are the audits that found a region a learned write set called read-only
	// changed (--write-sets learned; format 1.11), in the order written: the states of that
	// allocation carried between each one's since_seq and audit_seq may be stale.
	WriteSetMisses []*pb.WriteSetMiss
	// Digests are the step digests (format 1.12): the state of the program's allocations at
	// each step boundary, in the order they completed.
	Digests []*pb.MemoryState
	// Hangs are what gpurr record --hang-timeout reported (format 1.13): a launch the GPU had
	// not finished past the timeout; HangReport writes each as the agent did.
	Hangs []*pb.Hang
	// Copies, Syncs and HostCalls (format 1.15) are the memory copies and memsets the GPU
	// ran, the times the host waited for it, and the program's calls that made them,
	// joined by correlation id; none in older recordings.
	Copies    []*pb.Copy
	Syncs     []*pb.Sync
	HostCalls []*pb.HostCall
	// CopyStates (format 1.17) are the states of the allocations the program's copies and
	// memsets wrote (point COPY), in the order they completed; none in older recordings.
	CopyStates []*pb.MemoryState
	Stats      *pb.Stats // cumulative, from the last frame that had them
	End        *pb.End   // nil when the recording is incomplete
	Truncated  bool      // the file ended inside a frame
	Frames     int
}

// Complete reports whether the process ended normally and its recording
// was closed.
func (d *Data) Complete() bool { return d.End != nil }

// Shortfall says in one line what a process's recording lacks at its end, "" when nothing:
// truncated (the file ends inside a frame) or incomplete (no End record). Every reader that
// warns about it uses these words.
func Shortfall(name string, truncated, ended bool) string {
	switch {
	case truncated:
		return name + ": recording truncated (the program was killed mid-write); what was written before is read"
	case !ended:
		return name + ": recording incomplete (no end record: the program was killed or is still running)"
	}
	return ""
}

// Load reads the whole process recording.
func (p *Process) Load() (*Data, error) {
	d := &Data{Stats: &pb.Stats{}}
	res, err := p.Scan(func(b *pb.Batch) error {
		if b.Process != nil {
			d.Process = b.Process
		}
		d.Devices = append(d.Devices, b.Devices...)
		d.Modules = append(d.Modules, b.Modules...)
		d.Kernels = append(d.Kernels, b.Kernels...)
		d.Callstacks = append(d.Callstacks, b.Callstacks...)
		d.Launches = append(d.Launches, b.Launches...)
		d.Activities = append(d.Activities, b.Activities...)
		d.OwnActivities = append(d.OwnActivities, b.OwnActivities...)
		d.GraphNodes = append(d.GraphNodes, b.GraphNodes...)
		d.GraphLaunches = append(d.GraphLaunches, b.GraphLaunches...)
		d.Allocations = append(d.Allocations, b.Allocations...)
		d.Memory = append(d.Memory, b.Memory...)
		d.Log = append(d.Log, b.Log...)
		d.Ranges = append(d.Ranges, b.Ranges...)
		d.RangeEnds = append(d.RangeEnds, b.RangeEnds...)
		d.ProbeResults = append(d.ProbeResults, b.Probes...)
		d.ProbeKernels = append(d.ProbeKernels, b.ProbeKernels...)
		d.WriteSetMisses = append(d.WriteSetMisses, b.WriteSetMisses...)
		d.Digests = append(d.Digests, b.Digests...)
		d.Hangs = append(d.Hangs, b.Hangs...)
		d.Copies = append(d.Copies, b.Copies...)
		d.Syncs = append(d.Syncs, b.Syncs...)
		d.HostCalls = append(d.HostCalls, b.HostCalls...)
		d.CopyStates = append(d.CopyStates, b.CopyStates...)
		if b.Stats != nil {
			d.Stats = b.Stats
		}
		if b.End != nil {
			d.End = b.End
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	d.Truncated = res.Truncated
	d.Frames = res.Frames
	return d, nil
}

// ModulePath is where the module image with the given digest is stored.
func (p *Process) ModulePath(sha256 string) string {
	return filepath.Join(p.setDir, ModulesDir, sha256+ModuleExt)
}

// ModuleImage reads the module image with the given digest, stored at ModulePath; anything
// but a regular file there (a FIFO would block the reader forever) is an error naming it.
func (p *Process) ModuleImage(sha256 string) ([]byte, error) {
	return regular.ReadFile(p.ModulePath(sha256))
}

// ModulePTX reads the PTX stored beside a module image (Module.ptx says where it came from);
// an error wrapping fs.ErrNotExist when none was.
func (p *Process) ModulePTX(sha256 string) ([]byte, error) {
	return regular.ReadFile(filepath.Join(p.setDir, ModulesDir, sha256+PTXExt))
}
