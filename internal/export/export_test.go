package export

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/gpurr/gpurr/internal/tables"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func read[T any](t *testing.T, dir, table string, proc *recording.Process) []T {
	t.Helper()
	rows, err := parquet.ReadFile[T](filepath.Join(dir, table, Partition(proc.Info), proc.Name+".parquet"))
	if err != nil {
		t.Fatalf("read back %s: %v", table, err)
	}
	return rows
}

// The memory variant: two ranks recorded with memory capture (snapshot and
// hash). Every table has a file per process, in the process's partition,
// empty or not; the tables a recording's records make have a row per
// record (TestSameAsQuery compares every value with gpurr query's).
func TestParquetRoundTrip(t *testing.T) {
	set := testrec.Open(t, testrec.Memory)
	dir := filepath.Join(t.TempDir(), "pq")
	st, err := Parquet(dir, set.Processes)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 2*len(Tables) {
		t.Errorf("%d files, want %d", st.Files, 2*len(Tables))
	}
	for _, proc := range set.Processes {
		d, err := proc.Load()
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join("host=gpu-box", "rank="+map[string]string{testrec.Name(0): "0", testrec.Name(1): "1"}[proc.Name]); Partition(proc.Info) != want {
			t.Errorf("%s: partition %s, want %s", proc.Name, Partition(proc.Info), want)
		}
		if n := len(read[launchesRow](t, dir, "launches", proc)); n != len(d.Launches) {
			t.Errorf("%s: %d launch rows, recording has %d launches", proc.Name, n, len(d.Launches))
		}
		if n := len(read[graphLaunchesRow](t, dir, "graph_launches", proc)); n != len(d.GraphLaunches) {
			t.Errorf("%s: %d graph launch rows, recording has %d", proc.Name, n, len(d.GraphLaunches))
		}
		graph := 0
		for _, r := range read[gpuActivityRow](t, dir, "gpu_activity", proc) {
			if r.ViaGraph {
				graph++
				if r.PythonLine == nil || *r.PythonLine != "/home/ada/train.py:33 capture_step" || r.GraphLaunchSeq == nil || r.LaunchSeq == nil {
					t.Errorf("%s: graph kernel row %+v", proc.Name, r)
				}
			}
		}
		if n := len(read[gpuActivityRow](t, dir, "gpu_activity", proc)); n != len(d.Activities) || graph != 4 {
			t.Errorf("%s: %d kernel rows (%d of graphs), recording has %d", proc.Name, n, graph, len(d.Activities))
		}
		own := read[gpurrActivityRow](t, dir, "gpurr_activity", proc)
		if len(own) != len(d.OwnActivities) || len(own) == 0 {
			t.Errorf("%s: %d rows of gpurr's own kernels, recording has %d", proc.Name, len(own), len(d.OwnActivities))
		}
		if n := len(read[probeCtasRow](t, dir, "probe_ctas", proc)); n != 0 {
			t.Errorf("%s: %d probe_ctas rows of a recording without --probe", proc.Name, n)
		}
	}
	if _, err := Parquet(dir, set.Processes); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("export into a used folder: %v", err)
	}
}

// A process whose events file cannot be read at all has its processes row, in the partition
// its directory name gives, and no file in the other tables; two that would write the same
// file are refused.
func TestParquetUnreadable(t *testing.T) {
	set := testrec.Open(t, testrec.Good)
	dir := filepath.Join(t.TempDir(), "pq")
	st, err := Parquet(dir, set.Processes, "rank3-node7-99")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.ReadFile[processesRow](filepath.Join(dir, "processes", "host=node7", "rank=3", "rank3-node7-99.parquet"))
	if err != nil || len(rows) != 1 || rows[0].Readable || *rows[0].Pid != 99 || *rows[0].Hostname != "node7" || *rows[0].Rank != 3 || rows[0].Argv != nil {
		t.Errorf("the unreadable process's row: %+v, %v", rows, err)
	}
	if st.Files != 2*len(Tables)+1 || st.Rows["processes"] != 3 {
		t.Errorf("%d files, %d processes rows", st.Files, st.Rows["processes"])
	}
	if _, err := Parquet(filepath.Join(t.TempDir(), "pq"), set.Processes, "node7-99", "node7-99"); err == nil || !strings.Contains(err.Error(), "would write the same files") {
		t.Errorf("two unreadable processes of one name: %v", err)
	}
}

// A recording made without memory capture has memory_states files without
// rows; a corrupt rank among others leaves a shortfall naming it, and alone
// fails with an error naming its file.
func TestParquetInputs(t *testing.T) {
	set := testrec.Open(t, testrec.Good)
	st, err := Parquet(filepath.Join(t.TempDir(), "pq"), set.Processes)
	if err != nil || st.Files != 2*len(Tables) || st.Rows["memory_states"] != 0 {
		t.Errorf("good recording: %v, %+v", err, st)
	}
	set = testrec.Open(t, testrec.Corrupt)
	st, err = Parquet(filepath.Join(t.TempDir(), "pq"), set.Processes)
	if err != nil || len(st.Shortfalls) != 1 || !strings.Contains(st.Shortfalls[0], set.Processes[0].Name+": damaged (") ||
		st.Rows["launches"] == 0 {
		t.Errorf("a corrupt rank among others: %v, %+v", err, st)
	}
	if _, err := Parquet(filepath.Join(t.TempDir(), "pq"), set.Processes[:1]); err == nil || !strings.Contains(err.Error(), recording.EventsFile) {
		t.Errorf("a corrupt recording alone: %v", err)
	}
	if p := Partition(&pb.Process{Hostname: "a/b=c"}); p != filepath.Join("host=a_b_c", "rank=-1") {
		t.Errorf("partition %s", p)
	}
}

// Two runs of a job whose processes have the same names, hosts and ranks (containers, where
// pids repeat) would write the same files: the second run's replaced the first's while export
// counted the rows and files of both. They are refused before anything is written.
func TestParquetSameProcessTwice(t *testing.T) {
	run1, run2 := testrec.Open(t, testrec.Good), testrec.Open(t, testrec.Good)
	dir := filepath.Join(t.TempDir(), "pq")
	_, err := Parquet(dir, append(run1.Processes, run2.Processes...))
	want := fmt.Sprintf("%s and %s would write the same files (TABLE/%s): export them into separate folders",
		run1.Processes[0].Dir, run2.Processes[0].Dir, filepath.Join("host=gpu-box", "rank=0", testrec.Name(0)+".parquet"))
	if err == nil || err.Error() != want {
		t.Errorf("the same processes twice: %v; want %q", err, want)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("refused, yet %s is there: %v", dir, err)
	}
}

// Ranges nested thousands deep cost memory in proportion to their count: paths written whole
// would hold n²/2 names (2.7 GB for 20000 levels, 193 MB for these 5000). What an export
// allocates beyond a small recording's (a writer per table, their buffers) must grow with the
// ranges, not their square. The bytes are counted in a process of their own: TotalAlloc is the
// whole process's, and other tests' goroutines would add to it.
func TestParquetNestedRanges(t *testing.T) {
	if s := os.Getenv(allocEnv); s != "" {
		n, _ := strconv.Atoi(s)
		set := testrec.OpenBatches(t, testrec.NestedRanges(n)...)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Parquet(filepath.Join(t.TempDir(), "pq"), set.Processes)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("allocated %d\n", after.TotalAlloc-before.TotalAlloc)
		return
	}
	allocated := func(n int) uint64 {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), allocEnv+"="+strconv.Itoa(n))
		out, err := cmd.CombinedOutput()
		var b uint64
		if _, serr := fmt.Sscanf(string(out[bytes.Index(out, []byte("allocated ")):]), "allocated %d", &b); err != nil || serr != nil {
			t.Fatalf("export of %d ranges in a process of its own: %v %v\n%s", n, err, serr, out)
		}
		return b
	}
	const small, n = 100, 5000
	base, got := allocated(small), allocated(n)
	// 16 KiB a range: what the tables' writers and their compressors allocate for each range's
	// rows varies with the pools they reuse (57-61 MB over the small export here), well under
	// the square's 193 MB.
	if limit := base + uint64(16<<20+(n-small)*16<<10); got > limit {
		t.Errorf("exporting %d nested ranges allocated %d bytes, %d of them more than %d ranges, want at most %d", n, got, got-base, small, limit)
	}
	set := testrec.OpenBatches(t, testrec.NestedRanges(n)...)
	dir := filepath.Join(t.TempDir(), "pq")
	st, err := Parquet(dir, set.Processes)
	if err != nil {
		t.Fatal(err)
	}
	launches := read[launchesRow](t, dir, "launches", set.Processes[0])
	if len(launches) != n || !strings.HasPrefix(*launches[n-1].Range, "level 1 / level 2 / level 3 / level 4 / … 4988 more … / ") {
		t.Errorf("%d launches, the last in %q", len(launches), *launches[len(launches)-1].Range)
	}
	if !slices.ContainsFunc(st.Shortfalls, func(s string) bool { return strings.Contains(s, "NVTX ranges nest 5000 deep") }) {
		t.Errorf("no warning of shortened paths: %q", st.Shortfalls)
	}
}

// allocEnv, in the process TestParquetNestedRanges starts, is the count of nested ranges to
// export and report the bytes allocated of.
const allocEnv = "GPURR_TEST_EXPORT_ALLOC"

// The Parquet schemas of the row types made from tables.Query are those of
// testdata/schema.golden (go test -run TestSchemasUnchanged -update
// rewrites it): the same columns, types, repetition and encodings, in the
// same order; and they are what the files hold.
func TestSchemasUnchanged(t *testing.T) {
	set := testrec.Open(t, testrec.Memory)
	dir := filepath.Join(t.TempDir(), "pq")
	if _, err := Parquet(dir, set.Processes); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, table := range tables.Query {
		s := newTableFile(table, "", nil).schema()
		fmt.Fprintln(&b, s.String())
		for _, c := range s.Columns() {
			l, _ := s.Lookup(c...)
			if e := l.Node.Encoding(); e != nil {
				fmt.Fprintf(&b, "%s.%s %v\n", table.Name, c[0], e)
			}
		}
		f, err := os.Open(filepath.Join(dir, table.Name, Partition(set.Processes[0].Info), set.Processes[0].Name+".parquet"))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := pf.Schema().String(), s.String(); got != want {
			t.Errorf("%s: the file's schema\n%s\nis not the table's\n%s", table.Name, got, want)
		}
		f.Close()
	}
	if *update {
		if err := os.WriteFile("testdata/schema.golden", []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/schema.golden")
	if err != nil {
		t.Fatal(err)
	}
	if diff := testrec.LineDiff(string(want), b.String()); diff != "" {
		t.Errorf("schemas changed (a change to the Parquet columns must be deliberate: go test ./internal/export -run TestSchemasUnchanged -update):\n%s", diff)
	}
}

// The writer runs writes in order; after one fails it runs no more, sends
// stop, and wait says why.
func TestWriterFails(t *testing.T) {
	w := startWriter()
	var ran []int
	broken := errors.New("disk full")
	for i := range 3 {
		if err := w.send(func() error { ran = append(ran, i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.send(func() error { return broken }); err != nil {
		t.Fatal(err)
	}
	<-w.failed
	if err := w.send(func() error { ran = append(ran, 99); return nil }); !errors.Is(err, errWriteFailed) {
		t.Errorf("send after a failed write: %v", err)
	}
	if err := w.wait(); !errors.Is(err, broken) || !slices.Equal(ran, []int{0, 1, 2}) {
		t.Errorf("wait: %v; ran %v", err, ran)
	}
}

// An export that fails part way (here the disk refuses the fifth file) leaves the folder as it
// found it: gone when it made it, empty when it was there, so the same command can run again.
func TestParquetFailureLeavesNothing(t *testing.T) {
	full := errors.New("no space left on device")
	created, create := 0, createFile
	createFile = func(name string) (*os.File, error) {
		if created++; created == 5 {
			return nil, full
		}
		return create(name)
	}
	t.Cleanup(func() { createFile = create })
	set := testrec.Open(t, testrec.Good)
	testrec.FailPartWay(t, full, func(out string) error {
		created = 0
		_, err := Parquet(out, set.Processes)
		return err
	})
}

// Of several exports into one folder at once, new or empty, one writes it and the others fail
// without touching what it wrote; they wrote the same files over one another, and a loser's
// undo removed the winner's files. Nothing of the claim is left.
func TestParquetOnceAtATime(t *testing.T) {
	set := testrec.Open(t, testrec.Good)
	want, err := Parquet(filepath.Join(t.TempDir(), "alone"), set.Processes)
	if err != nil {
		t.Fatal(err)
	}
	for _, empty := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "pq")
		if empty {
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		const n = 5000
		won := testrec.AtOnce(n, func() error {
			_, err := Parquet(out, set.Processes)
			return err
		}, func(err error) {
			if !strings.Contains(err.Error(), "is not empty") {
				t.Errorf("a losing export: %v", err)
			}
		})
		var files int
		filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files++
				if strings.HasPrefix(d.Name(), ".") {
					t.Errorf("%s left behind", path)
				}
			}
			return nil
		})
		if won != 1 || files != want.Files {
			t.Errorf("folder there %v: %d of %d exports succeeded, %d files; want 1 and %d files", empty, won, n, files, want.Files)
		}
	}
}

// An export claims a folder only where nothing else is once its claim is made: one that found
// the folder empty and was then overtaken by another export, which wrote the folder whole and
// dropped its claim, would otherwise write over the other's files and, failing, undo them.
func TestClaimLooksAgain(t *testing.T) {
	set := testrec.Open(t, testrec.Good)
	out := filepath.Join(t.TempDir(), "pq")
	if _, err := Parquet(out, set.Processes); err != nil {
		t.Fatal(err)
	}
	files := func() []string {
		var paths []string
		filepath.WalkDir(out, func(path string, _ fs.DirEntry, _ error) error {
			paths = append(paths, path)
			return nil
		})
		return paths
	}
	before := files()
	if _, err := claim(out); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("claim of a folder another export wrote: %v, want it refused as not empty", err)
	}
	if after := files(); !slices.Equal(after, before) {
		t.Errorf("the refused claim left %d paths: %v, want the %d there before", len(after), after[:min(len(after), 3)], len(before))
	}
}
