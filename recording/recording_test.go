package recording_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// writeProcess writes batches as one process of a recording in setDir and
// returns the events file's path and its size after each frame.
func writeProcess(t *testing.T, setDir, name string, batches []*pb.Batch) (path string, ends []int64) {
	t.Helper()
	w, err := recording.Create(setDir, name, batches[0])
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(w.Dir(), recording.EventsFile)
	for i, b := range batches {
		if i > 0 {
			if err := w.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, st.Size())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path, ends
}

// patch rewrites a file through change.
func patch(t *testing.T, path string, change func([]byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	change(b)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func openOne(t *testing.T, dir string) *recording.Process {
	t.Helper()
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Processes) != 1 {
		t.Fatalf("opened %d processes, want 1", len(set.Processes))
	}
	return set.Processes[0]
}

// wantOneLine checks the reader's promise: an error is one line that names
// the path and says what is wrong.
func wantOneLine(t *testing.T, err error, path string, says ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one naming %s", path)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	if !strings.Contains(msg, path) {
		t.Errorf("error %q does not name %s", msg, path)
	}
	for _, s := range says {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not say %q", msg, s)
		}
	}
}

// writeSet writes testrec's processes into one recording and opens it.
func writeSet(t *testing.T) *recording.Set {
	t.Helper()
	dir := t.TempDir()
	for rank := range testrec.Ranks {
		writeProcess(t, dir, testrec.Name(rank), testrec.Batches(rank))
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestRoundTrip(t *testing.T) {
	set := writeSet(t)
	if len(set.Processes) != testrec.Ranks {
		t.Fatalf("opened %d processes, want %d", len(set.Processes), testrec.Ranks)
	}
	for rank, p := range set.Processes {
		want := testrec.Batches(rank)
		if p.Name != testrec.Name(rank) {
			t.Errorf("process %d is %s, want %s (sorted by rank)", rank, p.Name, testrec.Name(rank))
		}
		if p.Version != (recording.Version{Major: recording.MajorVersion, Minor: recording.MinorVersion}) {
			t.Errorf("version %v", p.Version)
		}
		var got []*pb.Batch
		res, err := p.Scan(func(b *pb.Batch) error { got = append(got, b); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if res.Truncated || res.Frames != len(want) || len(got) != len(want) {
			t.Fatalf("scan: %+v, %d batches; want %d frames, not truncated", res, len(got), len(want))
		}
		for i := range want {
			if !proto.Equal(got[i], want[i]) {
				t.Errorf("rank %d frame %d differs:\n got %v\nwant %v", rank, i, got[i], want[i])
			}
		}
		d, err := p.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !d.Complete() || d.Truncated || d.Frames != len(want) {
			t.Errorf("complete=%v truncated=%v frames=%d", d.Complete(), d.Truncated, d.Frames)
		}
		last := want[len(want)-1]
		if !proto.Equal(d.Stats, last.Stats) || !proto.Equal(d.End, last.End) || !proto.Equal(d.Process, want[0].Process) {
			t.Errorf("loaded stats/end/process differ from the written ones")
		}
		if n := countLaunches(want); len(d.Launches) != n {
			t.Errorf("loaded %d launches, want %d", len(d.Launches), n)
		}
	}
}

func countLaunches(bs []*pb.Batch) int {
	n := 0
	for _, b := range bs {
		n += len(b.Launches)
	}
	return n
}

// TestTruncatedLastFrame cuts the file at every byte of its last frame: the
// reader must deliver every earlier frame and say the file was cut short.
func TestTruncatedLastFrame(t *testing.T) {
	batches := testrec.Batches(0)
	src := t.TempDir()
	path, ends := writeProcess(t, src, "p", batches)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	prev, last := ends[len(ends)-2], ends[len(ends)-1]
	dir := t.TempDir()
	cut := filepath.Join(dir, recording.EventsFile)
	for n := prev; n < last; n++ {
		if err := os.WriteFile(cut, whole[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := openOne(t, dir).Load()
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		if d.Frames != len(batches)-1 || d.Truncated != (n > prev) || d.Complete() {
			t.Fatalf("cut at %d: frames=%d truncated=%v complete=%v; want %d, %v, false",
				n, d.Frames, d.Truncated, d.Complete(), len(batches)-1, n > prev)
		}
		if n := countLaunches(batches); len(d.Launches) != n {
			t.Fatalf("cut at %d: %d launches, want %d", n, len(d.Launches), n)
		}
	}
}

func TestCutBeforeFirstFrame(t *testing.T) {
	src := t.TempDir()
	path, ends := writeProcess(t, src, "p", testrec.Batches(0))
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size int64
		says string
	}{
		{0, "empty file"},
		{7, "file header cut short"},
		{16, "holds no frame"},
		{ends[0] - 1, "holds no frame"},
	} {
		dir := t.TempDir()
		events := filepath.Join(dir, recording.EventsFile)
		if err := os.WriteFile(events, whole[:tc.size], 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := recording.Open(dir)
		wantOneLine(t, err, events, tc.says)
	}
}

func TestCorruptByte(t *testing.T) {
	dir := t.TempDir()
	path, ends := writeProcess(t, dir, "p", testrec.Batches(0))
	// The middle of the second frame's payload: its header sits at ends[0].
	patch(t, path, func(b []byte) { b[ends[0]+12+(ends[1]-ends[0]-12)/2] ^= 0x01 })
	_, err := openOne(t, filepath.Dir(path)).Load()
	wantOneLine(t, err, path, fmt.Sprintf("offset %d", ends[0]), "checksum")
}

func TestNewerMajorVersion(t *testing.T) {
	dir := t.TempDir()
	path, _ := writeProcess(t, dir, "p", testrec.Batches(0))
	patch(t, path, func(b []byte) { binary.LittleEndian.PutUint16(b[8:], recording.MajorVersion+1) })
	_, err := recording.Open(dir)
	wantOneLine(t, err, path, "upgrade gpurr", fmt.Sprintf("%d.%d", recording.MajorVersion+1, recording.MinorVersion))
}

func TestNewerMinorVersionReads(t *testing.T) {
	dir := t.TempDir()
	path, _ := writeProcess(t, dir, "p", testrec.Batches(0))
	patch(t, path, func(b []byte) { binary.LittleEndian.PutUint16(b[10:], recording.MinorVersion+1) })
	d, err := openOne(t, filepath.Dir(path)).Load()
	if err != nil || !d.Complete() {
		t.Fatalf("a newer minor version must read: %v", err)
	}
}

func TestNotARecording(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	magic := filepath.Join(dir, "magic")
	if err := os.Mkdir(magic, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(magic, recording.EventsFile), bytes.Repeat([]byte("z"), 64), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, says := range map[string]string{
		file:    "not a directory",
		empty:   "not a gpurr recording",
		missing: "no such file",
		magic:   "bad magic",
		// A file the recording holds names the directory to give instead.
		filepath.Join(magic, recording.EventsFile): "a file of a recording; give its directory, " + magic,
	} {
		_, err := recording.Open(path)
		wantOneLine(t, err, path, says)
	}
}

func TestOpenProcessDirectory(t *testing.T) {
	dir := t.TempDir()
	for rank := range testrec.Ranks {
		writeProcess(t, dir, testrec.Name(rank), testrec.Batches(rank))
	}
	p := openOne(t, filepath.Join(dir, testrec.Name(1)))
	if p.Info.GetRank() != 1 {
		t.Errorf("opened rank %d, want 1", p.Info.GetRank())
	}
}

func TestSetProcessByNamePidOrRank(t *testing.T) {
	set := writeSet(t)
	second := testrec.Name(1)
	pid := strconv.Itoa(int(set.Processes[1].Info.GetPid()))
	for _, which := range []string{second, pid, "1"} {
		if p := set.Process(which); p == nil || p.Name != second {
			t.Errorf("Process(%q) = %v, want %s", which, p, second)
		}
	}
	for _, which := range []string{"", "7", "gpu-box"} {
		if p := set.Process(which); p != nil {
			t.Errorf("Process(%q) = %s, want none", which, p.Name)
		}
	}
}

func TestPutModule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	image := []byte("\x7fELF module image")
	sum := sha256.Sum256(image)
	want := hex.EncodeToString(sum[:])
	for range 2 {
		got, err := recording.PutModule(dir, image)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("digest %s, want %s", got, want)
		}
	}
	modules := filepath.Join(dir, recording.ModulesDir)
	entries, err := os.ReadDir(modules)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != want+recording.ModuleExt {
		t.Fatalf("modules/ holds %v, want only %s%s (no temporary files)", entries, want, recording.ModuleExt)
	}
	stored := filepath.Join(modules, want+recording.ModuleExt)
	if b, err := os.ReadFile(stored); err != nil || !bytes.Equal(b, image) {
		t.Fatalf("stored image differs: %v", err)
	}
	for path, perm := range map[string]os.FileMode{dir: 0o700, modules: 0o700, stored: 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != perm {
			t.Errorf("%s has mode %v, want %v", path, st.Mode().Perm(), perm)
		}
	}
	w, err := recording.Create(dir, "p", testrec.Batches(0)[0])
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got, err := w.PutModule(image); err != nil || got != want {
		t.Fatalf("Writer.PutModule: %s, %v", got, err)
	}
	st, err := os.Stat(filepath.Join(w.Dir(), recording.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("events file has mode %v, want 0600", st.Mode().Perm())
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	writeProcess(t, dir, "p", testrec.Batches(0))
	if _, err := recording.Create(dir, "p", testrec.Batches(0)[0]); err == nil {
		t.Fatal("Create over an existing events file succeeded; it must never append to another run")
	}
}

// Processes of containers on one host with its network have its host name and pids of their
// own PID namespace: several can be box-1. CreateNew gives each a directory of its own, where
// Create would find the first's events file and fail, and Open reads them all, in the order
// they took the name.
func TestCreateNewNumbersTakenNames(t *testing.T) {
	dir := t.TempDir()
	var made []string
	for range 11 {
		w, err := recording.CreateNew(dir, "box-1", &pb.Batch{Process: &pb.Process{Hostname: "box", Pid: 1}})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, filepath.Base(w.Dir()))
		if err := errors.Join(w.Write(&pb.Batch{End: &pb.End{Reason: "exit"}}), w.Close()); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"box-1", "box-1+2", "box-1+3", "box-1+4", "box-1+5", "box-1+6", "box-1+7", "box-1+8", "box-1+9", "box-1+10", "box-1+11"}
	if !slices.Equal(made, want) {
		t.Fatalf("CreateNew made %q, want %q", made, want)
	}
	set, got := openNames(t, dir)
	for _, p := range set.Processes {
		d, err := p.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !d.Complete() || d.Process.GetPid() != 1 {
			t.Errorf("%s: complete %v, process %v; want the whole process", p.Name, d.Complete(), d.Process)
		}
	}
	if !slices.Equal(got, want) || len(set.Damaged) != 0 {
		t.Errorf("Open read %q (damaged %v), want %q", got, set.Damaged, want)
	}
	if p := set.Process("box-1+10"); p == nil || p.Name != "box-1+10" {
		t.Errorf("Process(box-1+10) = %v", p)
	}
}

// CreateNew makes no directory of a name where something else is (a file, a symlink to
// elsewhere): it takes the next name.
func TestCreateNewPassesOverWhatIsThere(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(dir, "box-1")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "box-1+2"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := recording.CreateNew(dir, "box-1", testrec.Batches(0)[0])
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Dir() != filepath.Join(dir, "box-1+3") {
		t.Errorf("CreateNew made %s, want box-1+3", w.Dir())
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("CreateNew wrote through the symlink: %v", entries)
	}
}

func TestReportProgressReachesTotal(t *testing.T) {
	set, err := recording.Open("../testdata/recordings/torch-graphs")
	if err != nil {
		t.Fatal(err)
	}
	var last, total int64
	calls := 0
	set.ReportProgress(func(done, all int64) {
		if done < last {
			t.Errorf("progress went back from %d to %d", last, done)
		}
		last, total = done, all
		calls++
	})
	for _, p := range set.Processes {
		if _, err := p.Load(); err != nil {
			t.Fatal(err)
		}
	}
	if calls == 0 || last != total || total != set.Processes[0].Size {
		t.Fatalf("progress: %d calls, last %d of %d, file size %d", calls, last, total, set.Processes[0].Size)
	}
}

// A FIFO in place of one process's events file neither blocks Open nor hides the other
// process.
func TestOpenSkipsDamagedProcess(t *testing.T) {
	set := writeSet(t)
	events := filepath.Join(set.Processes[0].Dir, recording.EventsFile)
	if err := os.Remove(events); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(events, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	got, err := recording.Open(set.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Processes) != 1 || got.Processes[0].Name != testrec.Name(1) {
		t.Fatalf("opened %d processes, want only %s", len(got.Processes), testrec.Name(1))
	}
	if len(got.Damaged) != 1 || !strings.Contains(got.Damaged[0].Error(), "not a regular file (a FIFO)") {
		t.Errorf("Damaged = %v, want the FIFO named", got.Damaged)
	}
}

// A batch whose memory states hold many hashes is written as two frames, the states stored
// raw: reading gives back every launch and state, in order.
func TestMemoryHeavyBatchRoundTrips(t *testing.T) {
	first := testrec.Batches(0)[0]
	heavy := &pb.Batch{Launches: []*pb.Launch{{Seq: 1, KernelId: 1}, {Seq: 2, KernelId: 1}}}
	for seq := uint64(1); seq <= 2; seq++ {
		s := &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER}
		for r := range 4 {
			chunks := make([]byte, 16*1024) // 1024 chunk hashes: 64 MiB of region
			for i := range chunks {
				chunks[i] = byte(i*7 + r + int(seq))
			}
			s.Regions = append(s.Regions, &pb.RegionState{Hash: chunks[:16], ChunkHashes: chunks})
		}
		heavy.Memory = append(heavy.Memory, s)
	}
	light := &pb.Batch{Launches: []*pb.Launch{{Seq: 3, KernelId: 1}},
		Memory: []*pb.MemoryState{{LaunchSeq: 3, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{{Hash: make([]byte, 16)}}}}}
	dir := t.TempDir()
	_, ends := writeProcess(t, dir, "p", []*pb.Batch{first, heavy, light})
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := set.Processes[0].Load()
	if err != nil {
		t.Fatal(err)
	}
	if d.Frames != 4 { // the first, the heavy batch's two, the light one's
		t.Errorf("%d frames, want 4 (file sizes after each write %v)", d.Frames, ends)
	}
	var seqs []uint64
	for _, l := range d.Launches {
		seqs = append(seqs, l.Seq)
	}
	if len(d.Memory) != 3 || !slices.Equal(seqs[len(seqs)-3:], []uint64{1, 2, 3}) {
		t.Fatalf("launches %v, %d memory states", seqs, len(d.Memory))
	}
	for i, s := range d.Memory {
		want := append(heavy.Memory, light.Memory...)[i]
		if !proto.Equal(s, want) {
			t.Errorf("memory state %d differs after the round trip", i)
		}
	}
}

// A process directory that cannot be read is damaged, not absent: here its events file is a
// symlink loop.
func TestOpenNamesUnreadableProcess(t *testing.T) {
	set := writeSet(t)
	events := filepath.Join(set.Processes[0].Dir, recording.EventsFile)
	if err := os.Remove(events); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(recording.EventsFile, events); err != nil {
		t.Fatal(err)
	}
	openNamesDamage(t, set.Dir, events+": too many levels of symbolic links")
}

// ... and here the directory is closed to the reader, where permissions hold (not for root).
func TestOpenNamesClosedProcess(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a directory closed to it")
	}
	set := writeSet(t)
	dir := set.Processes[0].Dir
	if err := os.Chmod(dir, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	openNamesDamage(t, set.Dir, filepath.Join(dir, recording.EventsFile)+": permission denied")
}

// openNamesDamage opens the set in dir and wants one process read and one damaged, want.
func openNamesDamage(t *testing.T, dir, want string) {
	t.Helper()
	got, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Processes) != 1 || len(got.Damaged) != 1 || !strings.Contains(got.Damaged[0].Error(), want) {
		t.Errorf("%d processes, Damaged = %v; want one of each, %s", len(got.Processes), got.Damaged, want)
	}
}

// Processes sort in one total order: ranked ones by rank, then those without a rank (a
// launcher). Comparing ranks only where both had one made a cycle through hostnames, so the
// order depended on the directory listing: rank 0 on host z, the launcher on host m and rank 1
// on host a each came before another.
func TestProcessOrderTotal(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []*pb.Process{
		{Hostname: "z", Pid: 1, Rank: proto.Int32(0)},
		{Hostname: "m", Pid: 2},
		{Hostname: "a", Pid: 3, Rank: proto.Int32(1)},
	} {
		writeProcess(t, dir, fmt.Sprintf("p%d", p.Pid), []*pb.Batch{{Process: p}})
	}
	if _, got := openNames(t, dir); !slices.Equal(got, []string{"p1", "p3", "p2"}) {
		t.Errorf("processes in order %v, want [p1 p3 p2] (rank 0, rank 1, then the one without a rank)", got)
	}
}

// openNames opens the recording at dir and names its processes in order.
func openNames(t *testing.T, dir string) (*recording.Set, []string) {
	t.Helper()
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range set.Processes {
		names = append(names, p.Name)
	}
	return set, names
}
