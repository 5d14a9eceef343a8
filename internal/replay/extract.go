package replay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/internal/outdir"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// ReadmeFile is the note Extract writes beside the reproducer.
const ReadmeFile = "README.md"

// Extract writes launch seq of src to dir as a recording of its own: the
// process header, the launch with its kernel, module image, callstack (and
// a backward launch's forward callstack, where its line is) and
// allocations, its two snapshots and their chunks, and a README with the
// command that replays it. `gpurr replay DIR`, info and rewind read it like
// any recording. It returns the bytes of chunks written.
//
// An error leaves dir as it found it (gone, or empty), so the same command can run again;
// of two extracts into one dir at once, one wins and the other fails without touching
// what the first wrote.
func Extract(src *Source, seq uint64, dir string) (int64, error) {
	c, err := src.Case(seq)
	if err != nil {
		return 0, err
	}
	if err := outdir.Check(dir); err != nil {
		return 0, err
	}
	if _, err := os.Stat(dir); err == nil {
		return extractInto(src, c, dir)
	}
	return extractBeside(src, c, dir)
}

// extractInto writes into dir, a folder that is there (empty, or CreateSet refuses it) and
// may be someone's working directory, so it stays the same folder. CreateSet claims it: of
// two extracts, one makes its recording.json, and the other fails before it writes.
func extractInto(src *Source, c *Case, dir string) (int64, error) {
	undo := outdir.Track(dir)
	release, err := outdir.Undoable(func() (func(), error) { // an interrupt undoes the extract
		return undo, recording.CreateSet(dir, src.Data.Process.GetArgv())
	})
	if err != nil {
		return 0, err // nothing of this extract's is there
	}
	defer release()
	n, err := extract(src, c, dir, filepath.Base(dir))
	if err != nil {
		undo()
	}
	return n, err
}

// extractBeside writes a new folder beside dir and renames it into place when whole, but
// over nothing, should another extract have put a folder there meanwhile: no reader sees
// the reproducer half-written.
func extractBeside(src *Source, c *Case, dir string) (int64, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return 0, err
	}
	var tmp string
	release, err := outdir.Undoable(func() (func(), error) { // an interrupt removes the folder beside
		tmp, err = os.MkdirTemp(parent, outdir.TempPrefix+"*")
		return func() { os.RemoveAll(tmp) }, err
	})
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // it names the folder beside, which the user never asked for
		}
		return 0, fmt.Errorf("%s: cannot create a folder in %s: %w", dir, filepath.Dir(dir), err)
	}
	defer release()
	var n int64
	err = add(func() error { return recording.CreateSet(tmp, src.Data.Process.GetArgv()) })
	if err == nil {
		n, err = extract(src, c, tmp, filepath.Base(dir))
	}
	if err != nil {
		err = &besideError{err: err, tmp: tmp, dir: dir}
	}
	if err == nil {
		// Under the lock too: an undo removing the folder beside as it is renamed would
		// leave what it had not yet removed in dir.
		err = add(func() error { return renameNew(tmp, abs) })
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%s appeared while the reproducer was written (another extract?): choose another -o or remove it", dir)
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return 0, err
	}
	return n, nil
}

// besideError is an error writing the folder beside dir, in words that name dir instead.
type besideError struct {
	err      error
	tmp, dir string
}

func (e *besideError) Error() string { return strings.ReplaceAll(e.err.Error(), e.tmp, e.dir) }
func (e *besideError) Unwrap() error { return e.err }

// renameNew renames from to a path where nothing is, failing with an error that wraps
// fs.ErrExist when something is there.
func renameNew(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) { // a filesystem without it
		if _, lerr := os.Lstat(to); lerr == nil {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: fs.ErrExist}
		}
		return os.Rename(from, to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// writeFile writes the README (a test makes it fail, as a full disk would).
var writeFile = os.WriteFile

// add makes a file or folder of the reproducer, through outdir.Add: an interrupt's undo runs
// on a goroutine of its own while extract goes on, and what extract made after the undo had
// looked (the folder beside made again by MkdirAll, a file in the folder it was given) was
// left behind. A test interrupts the extract before one.
var add = outdir.Add

// storeOptions are those of the reproducer's chunk store, which makes each of its files and
// folders through add: the packs its own goroutine starts past the first (1 GiB each) too,
// while extract goes on putting chunks. A test makes its packs small.
var storeOptions = chunkstore.Options{Guard: func(step func() error) error { return add(step) }}

// extract writes the reproducer into dir, a recording CreateSet made, whose README calls it
// name.
func extract(src *Source, c *Case, dir, name string) (int64, error) {
	proc := proto.Clone(src.Data.Process).(*pb.Process)
	proc.Probe = "" // no probe records come along: info would say the expression matched no kernel
	var w *recording.Writer
	err := add(func() (err error) {
		w, err = recording.Create(dir, src.Proc.Name, &pb.Batch{Process: proc, Devices: src.Data.Devices})
		return err
	})
	if err != nil {
		return 0, err
	}
	n, err := writeCase(src, c, w)
	return n, errors.Join(err, w.Close(), writeReadme(src, c, dir, name, n))
}

func writeCase(src *Source, c *Case, w *recording.Writer) (int64, error) {
	if err := add(func() error { _, err := w.PutModule(c.Module); return err }); err != nil {
		return 0, err
	}
	// The module's PTX, where the recording kept it (Triton's), which race and probe need.
	ptx, err := src.Proc.ModulePTX(c.ModuleHash)
	switch {
	case err == nil:
		if err := add(func() error { return w.PutModulePTX(c.ModuleHash, ptx) }); err != nil {
			return 0, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return 0, err
	}
	b := &pb.Batch{Kernels: []*pb.Kernel{c.Kernel}, Launches: []*pb.Launch{c.Launch}}
	for _, m := range src.Data.Modules {
		if m.Sha256 == c.ModuleHash {
			b.Modules = []*pb.Module{m}
			break
		}
	}
	// The launch's run on the GPU, where the recording timed it, so that info counts the
	// reproducer's kernel run and its time.
	err = src.Data.JoinKernels(src.Links, func(a *pb.KernelActivity, l *pb.Launch, replay *pb.GraphLaunch) error {
		if l == c.Launch && replay == nil {
			b.Activities = append(b.Activities, a)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if cs := src.Links.Callstack(c.Launch.CallstackId); cs != nil {
		b.Callstacks = []*pb.Callstack{cs}
	}
	if cs := src.Links.Forward(c.Launch); cs != nil {
		b.Callstacks = append(b.Callstacks, cs)
	}
	for _, r := range c.Launch.Regions {
		if a := src.Links.Allocation(r.AllocationId); a != nil {
			b.Allocations = append(b.Allocations, a)
		}
	}
	store, err := chunkstore.Create(w.Dir(), storeOptions)
	if err != nil {
		return 0, err
	}
	var bytes int64
	// The counters describe what the reproducer holds, so that info's memory lines say so.
	stats := &pb.Stats{Launches: 1, MemoryLaunches: 1, Activities: uint64(len(b.Activities))}
	ml, _ := memview.FromLinks(src.Links, c.Seq)
	for _, st := range []*pb.MemoryState{ml.Before, ml.After} {
		b.Memory = append(b.Memory, st)
		stats.MemoryStates++
		stats.Snapshots++
		for i, rs := range st.Regions {
			if i < len(c.Regions) {
				stats.BytesHashed += c.Regions[i].Size
			}
			hashes := recording.ChunkHashes(rs)
			stats.ChunksTotal += uint64(len(hashes))
			for _, h := range hashes {
				if store.Has([16]byte(h)) {
					continue
				}
				chunk, err := src.view.Get([16]byte(h))
				if errors.Is(err, chunkstore.ErrNotFound) {
					continue // dropped while recording; the state says so
				}
				if err != nil {
					return 0, errors.Join(err, store.Close())
				}
				if err := store.Put([16]byte(h), chunk); err != nil {
					return 0, errors.Join(err, store.Close())
				}
				bytes += int64(len(chunk))
			}
		}
	}
	if err := store.Close(); err != nil {
		return 0, err
	}
	stored := store.Stats()
	stats.ChunksTransferred, stats.ChunksStored, stats.ChunkBytesStored = uint64(stored.Chunks), uint64(stored.Chunks), uint64(stored.StoredBytes)
	b.Stats = stats
	b.End = &pb.End{EndNs: c.Launch.HostNs, Reason: "extract"}
	return bytes, w.Write(b)
}

func writeReadme(src *Source, c *Case, dir, name string, chunkBytes int64) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# gpurr reproducer: launch %d of %s\n\n", c.Seq, c.Name)
	fmt.Fprintf(&sb, "Kernel `%s`", c.Name)
	if c.Line != "" {
		fmt.Fprintf(&sb, ", launched at `%s`", c.Line)
	}
	if node := c.Launch.GetAutograd().GetBackwardNode(); node != "" {
		fmt.Fprintf(&sb, " in the backward of %s", node)
	}
	cfg := c.Recorded()
	fmt.Fprintf(&sb, ", grid %d,%d,%d, block %d,%d,%d, %d bytes of dynamic shared memory.\n\n",
		cfg.Grid.X, cfg.Grid.Y, cfg.Grid.Z, cfg.Block.X, cfg.Block.Y, cfg.Block.Z, cfg.SharedMem)
	fmt.Fprintf(&sb, "Recorded from `%s`", strings.Join(src.Data.Process.GetArgv(), " "))
	if c.Device != nil {
		fmt.Fprintf(&sb, " on %s (sm_%d%d)", c.Device.Name, c.Device.CcMajor, c.Device.CcMinor)
	}
	fmt.Fprintf(&sb, ". Module: %s, `modules/%s%s`.\n\n", ModuleKind(c.Module), c.ModuleHash, recording.ModuleExt)
	fmt.Fprintf(&sb, "%d regions, their contents just before and just after the launch (%d bytes of chunks):\n\n", len(c.Regions), chunkBytes)
	for i, r := range c.Regions {
		fmt.Fprintf(&sb, "- region %d: 0x%x, %d bytes\n", i, r.Address, r.Size)
	}
	fmt.Fprintf(&sb, "\nRun it again on a machine with a suitable GPU and compare with the recorded result:\n\n")
	fmt.Fprintf(&sb, "    gpurr replay %s\n\n", name)
	fmt.Fprintf(&sb, "Exit status 0: bit-exact; 1: the result differs; 2: it could not run. `gpurr info %s` describes the recording.\n", name)
	return add(func() error { return writeFile(filepath.Join(dir, ReadmeFile), []byte(sb.String()), 0o600) })
}
