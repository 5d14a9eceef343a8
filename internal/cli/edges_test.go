package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// newRec writes a recording with write into a new folder and returns its path.
func newRec(t *testing.T, write func(dir string) error) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rec")
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// variantRec writes the synthetic recording of two ranks (testrec.Variants).
func variantRec(t *testing.T, v testrec.Variant) string {
	t.Helper()
	return newRec(t, func(dir string) error { return testrec.Write(dir, v) })
}

// SQL that opens with a "--" comment is SQL, not an unknown flag, and flags after it count.
func TestQuerySQLComment(t *testing.T) {
	rec := variantRec(t, testrec.Good)
	for _, args := range [][]string{
		{"query", rec, "-- launches of every rank\nSELECT 7 AS n", "--format", "csv"},
		{"query", "--format", "csv", rec, "--no blank after the dashes\nSELECT 7 AS n"},
		{"query", "--format", "csv", rec, "--", "--x=1\nSELECT 7 AS n"},
	} {
		code, out, errs := runCLI(args...)
		if code != 0 || out != "n\n7\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	if code, _, errs := runCLI("query", rec, "--bogus"); code != exitUsage || !strings.Contains(errs, "unknown flag: --bogus") {
		t.Errorf("an unknown flag: exit %d, stderr %q", code, errs)
	}
}

// Flags left unset by default (-1 inside) show no "(default -1)" in help.
func TestHelpHidesUnsetDefaults(t *testing.T) {
	for verb, flag := range map[string]string{"replay": "--smem size", "tune": "--device int", "race": "--device int", "probe": "--device int", "rewind": "--region int"} {
		code, out, _ := runCLI(verb, "--help")
		if code != 0 || !strings.Contains(out, flag) || strings.Contains(out, "(default -1)") {
			t.Errorf("%s --help: exit %d, %s shown with a sentinel default or not at all:\n%s", verb, code, flag, out)
		}
	}
}

// Errors reading a damaged chunk pack name the file and what is wrong with it, not a Go package.
func TestDamagedPackNamesNoPackage(t *testing.T) {
	// One launch, so one chunk: the pack's first entry. (Workers compress chunks in
	// parallel, so with more the first entry could be any launch's.)
	rec := writeRun(t, "snapshot", trainRun(1.5, false)[:1])
	pack := filepath.Join(rec, "box-7", "chunks", "pack-000001.pack")
	f, err := os.OpenFile(pack, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("garbage"), 40); err != nil { // inside the first entry's header
		t.Fatal(err)
	}
	f.Close()
	for _, args := range [][]string{
		{"rewind", rec, "--launch", "1", "--after", "--region", "0", "-o", filepath.Join(t.TempDir(), "x.bin")},
		{"nan", rec},
	} {
		code, _, errs := runCLI(args...)
		if code != exitUsage || !strings.Contains(errs, pack+": entry at offset 16") || strings.Contains(errs, "chunkstore") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %s and no Go package", args[0], code, errs, pack)
		}
	}
}

// An unknown --process lists the processes the recording holds, after the verb, as every
// error does. One that cannot be read is named as such, not left out as if the recording
// did not hold it; --process naming it gets why it cannot be read.
func TestUnknownProcessListsThem(t *testing.T) {
	rec := variantRec(t, testrec.Good)
	code, _, errs := runCLI("nan", rec, "--process", "nope")
	if want := `gpurr: nan: ` + rec + ` has no process "nope"; it holds gpu-box-4242, gpu-box-4243 (--process takes a name, a pid or a rank)` + "\n"; code != exitUsage || errs != want {
		t.Errorf("exit %d, stderr %q; want %q", code, errs, want)
	}
	code, _, errs = runCLI("rewind", rec, "--launch", "1", "--after", "--region", "0", "-o", "-")
	if want := "gpurr: rewind: " + rec + " holds 2 processes; pick one with --process (gpu-box-4242, gpu-box-4243)\n"; code != exitUsage || errs != want {
		t.Errorf("no --process: exit %d, stderr %q; want %q", code, errs, want)
	}
	empty := variantRec(t, testrec.Empty)
	for _, c := range []struct{ which, want string }{
		{"0", `gpurr: replay: ` + empty + ` has no process "0"; it holds gpu-box-4243 (--process takes a name, a pid or a rank); gpu-box-4242 cannot be read (gpurr info ` + empty + " says why)\n"},
		{"gpu-box-4242", "gpurr: replay: " + filepath.Join(empty, "gpu-box-4242", "events.gpurr") + ": empty file (the program was killed before its first write)\n"},
	} {
		code, _, errs := runCLI("replay", empty, "--process", c.which)
		if code != exitUsage || errs != c.want {
			t.Errorf("--process %s of a recording with a process that cannot be read: exit %d, stderr %q; want %q", c.which, code, errs, c.want)
		}
	}
}

// A manifest made from a recording that lost a memory state warns, in one line, that it
// promises nothing for what is missing; one made from a whole recording says nothing more.
func TestManifestOfLossyRecordingWarns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.json")
	code, _, errs := runCLI("manifest", variantRec(t, testrec.WriteSets), "-o", out)
	want := "gpurr: manifest: warning: gpu-box-4242: lost or failed while recording, so missing here: memory_states_lost 1 (gpurr info says more); verify cannot check what is missing\n"
	if code != 0 || !strings.HasSuffix(errs, want) || strings.Count(errs, "warning") != 1 {
		t.Errorf("lossy: exit %d, stderr %q; want exit 0 ending %q", code, errs, want)
	}
	code, _, errs = runCLI("manifest", variantRec(t, testrec.Autograd), "-o", out+"2")
	if code != 0 || strings.Contains(errs, "warning") {
		t.Errorf("whole: exit %d, stderr %q", code, errs)
	}
}

// When no process of one side pairs with one of the other, diff and verify name both sides'
// processes and how they pair.
func TestNoPairsNamesProcesses(t *testing.T) {
	ranks, one := variantRec(t, testrec.Good), writeRun(t, "hash", trainRun(1.5, false))
	m := filepath.Join(t.TempDir(), "m.json")
	if code, _, errs := runCLI("manifest", one, "-o", m); code != 0 {
		t.Fatalf("manifest: exit %d: %s", code, errs)
	}
	for _, c := range []struct{ args []string }{
		{[]string{"diff", ranks, one}},
		{[]string{"verify", ranks, "--manifest", m}},
	} {
		want := c.args[0] + ": no processes to compare: " + ranks + " has gpu-box-4242 (rank 0), gpu-box-4243 (rank 1); "
		code, _, errs := runCLI(c.args...)
		if code != exitUsage || !strings.Contains(errs, want) || !strings.Contains(errs, "box-7 (no rank) (processes pair by torchrun rank") {
			t.Errorf("%s: exit %d, stderr %q; want %q and box-7", c.args[0], code, errs, want)
		}
	}
}

// tune checks its output files before the search: an existing one is refused without --force,
// before any GPU work, and a run that fails later leaves it as it was.
func TestTuneChecksOutputsFirst(t *testing.T) {
	rec, dir := writeReplayable(t), t.TempDir()
	csv, chart := filepath.Join(dir, "t.csv"), filepath.Join(dir, "t.svg")
	if err := os.WriteFile(csv, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"tune", rec, "--launch", "2", "--block", "64,128", "--csv", csv, "--chart", chart}
	code, _, errs := runCLI(args...)
	if want := "tune: --csv " + csv + " exists: --force replaces it"; code != exitUsage || !strings.Contains(errs, want) {
		t.Errorf("existing --csv: exit %d, stderr %q; want %q", code, errs, want)
	}
	code, _, errs = runCLI(append(args[:len(args)-2], "--chart", csv)...)
	if code != exitUsage || !strings.Contains(errs, "--csv and --chart are both") {
		t.Errorf("the same file twice: exit %d, stderr %q", code, errs)
	}
	// One file spelt two ways, or reached through a symlinked folder: the chart was renamed over
	// the CSV when the search was done.
	if err := os.Symlink(dir, filepath.Join(dir, "via")); err != nil {
		t.Fatal(err)
	}
	for _, same := range [][2]string{
		{filepath.Join(dir, "new.csv"), dir + "/./new.csv"},
		{filepath.Join(dir, "new.csv"), filepath.Join(dir, "via", "new.csv")},
		{csv, filepath.Join(dir, "via", "t.csv")},
	} {
		code, _, errs = runCLI(append(args[:len(args)-4], "--csv", same[0], "--chart", same[1], "--force")...)
		if want := "--csv " + same[0] + " and --chart " + same[1] + " are one file"; code != exitUsage || !strings.Contains(errs, want) {
			t.Errorf("%s and %s: exit %d, stderr %q; want %q", same[0], same[1], code, errs, want)
		}
	}
	os.Remove(filepath.Join(dir, "via"))
	runCLI(append(args, "--force")...) // no GPU here: it fails after the check
	if b, err := os.ReadFile(csv); err != nil || string(b) != "mine\n" {
		t.Errorf("a tune that failed changed --csv: %q %v", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a tune that failed left %d files in %s, want only t.csv", len(entries), dir)
	}
}

// A chunk pack that is missing, damaged or no regular file (a FIFO, which no reader may block
// on) is a problem info names (exit 1), and rewind says what happened to it instead of
// blaming --on-full drop-oldest, which the run did not use.
func TestBrokenChunkPack(t *testing.T) {
	for _, harm := range []string{"missing", "damaged", "not a regular file"} {
		rec := writeRun(t, "snapshot", trainRun(1.5, false))
		if code, _, errs := runCLI("info", rec); code != 0 {
			t.Fatalf("info of the whole recording: exit %d: %s", code, errs)
		}
		pack := filepath.Join(rec, "box-7", "chunks", "pack-000001.pack")
		err := os.Remove(pack)
		switch harm {
		case "damaged":
			err = os.WriteFile(pack, []byte("not a chunk pack at all, long enough"), 0o600)
		case "not a regular file":
			err = errors.Join(err, syscall.Mkfifo(pack, 0o600))
		}
		if err != nil {
			t.Fatal(err)
		}
		code, out, errs := runCLI("info", rec)
		want := map[string]string{"missing": pack + ": missing (the index lists it", "damaged": pack + ": not a gpurr chunk pack",
			"not a regular file": pack + ": not a regular file (a FIFO)"}[harm]
		if code != exitFound || !strings.Contains(out, "!! FILE MISSING OR DAMAGED: "+want) || !strings.Contains(errs, "(box-7: files_damaged)") ||
			strings.Contains(out, "nothing lost") || harm != "missing" && strings.Contains(out, "missing (the index lists it") {
			t.Errorf("info, pack %s: exit %d, stderr %q, want exit 1 and %q in:\n%s", harm, code, errs, want, out)
		}
		code, _, errs = runCLI("rewind", rec, "--launch", "1", "--after", "--region", "0", "-o", filepath.Join(t.TempDir(), "x.bin"))
		if code != exitUsage || !strings.Contains(errs, "pack-000001.pack is "+harm) || strings.Contains(errs, "drop-oldest") {
			t.Errorf("rewind, pack %s: exit %d, stderr %q", harm, code, errs)
		}
		code, _, errs = runCLI("manifest", rec, "-o", filepath.Join(t.TempDir(), "m.json"))
		if code != 0 || !strings.Contains(errs, "gpurr: manifest: warning: "+want) || !strings.Contains(errs, "; verify cannot show those bytes where a run differs\n") {
			t.Errorf("manifest, pack %s: exit %d, stderr %q", harm, code, errs)
		}
	}
}

// Module images not in modules/ are reported; one of the wrong size is a problem.
func TestModuleFiles(t *testing.T) {
	rec := variantRec(t, testrec.Good)
	modules, err := filepath.Glob(filepath.Join(rec, "modules", "*.cubin"))
	if err != nil || len(modules) < 2 {
		t.Fatalf("modules %v: %v", modules, err)
	}
	if err := os.Remove(modules[0]); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("info", rec)
	if code != 0 || !strings.Contains(out, "1 image not in modules/ (deleted, or left out when the recording was copied)") {
		t.Errorf("a module image missing: exit %d, stderr %q:\n%s", code, errs, out)
	}
	if err := os.WriteFile(modules[1], []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI("info", rec)
	if code != exitFound || !strings.Contains(out, "!! FILE MISSING OR DAMAGED: "+modules[1]+": module image of 5 bytes, the recording stored ") ||
		!strings.Contains(errs, "files_damaged") {
		t.Errorf("a module image cut short: exit %d, stderr %q:\n%s", code, errs, out)
	}
}

// A module image damaged in place, its size kept, is a problem too: info checks its bytes
// against its name, as replay and extract do before they use it.
func TestModuleDamagedSameSize(t *testing.T) {
	rec := variantRec(t, testrec.Good)
	modules, err := filepath.Glob(filepath.Join(rec, "modules", "*.cubin"))
	if err != nil || len(modules) == 0 {
		t.Fatalf("modules %v: %v", modules, err)
	}
	image, err := os.ReadFile(modules[0])
	if err != nil || len(image) == 0 {
		t.Fatalf("%s: %d bytes, %v", modules[0], len(image), err)
	}
	image[len(image)/2] ^= 0xff
	if err := os.WriteFile(modules[0], image, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("info", rec)
	if code != exitFound || !strings.Contains(out, "!! FILE MISSING OR DAMAGED: "+modules[0]+": module image damaged: its bytes do not hash to its name") ||
		!strings.Contains(errs, "files_damaged") {
		t.Errorf("a module image damaged in place: exit %d, stderr %q:\n%s", code, errs, out)
	}
}

// Without its index, a store that lost a pack cannot say so; info counts the chunks the
// snapshots name that it lacks, and rewind does not blame drop-oldest for them.
func TestChunksGoneWithIndex(t *testing.T) {
	rec := writeRun(t, "snapshot", trainRun(1.5, false))
	chunks := filepath.Join(rec, "box-7", "chunks")
	for _, f := range []string{"index", "pack-000001.pack"} {
		if err := os.Remove(filepath.Join(chunks, f)); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := runCLI("info", rec)
	if code != exitFound || !strings.Contains(out, "!! FILE MISSING OR DAMAGED: "+chunks+": ") || !strings.Contains(out, "that snapshots name not in the store, and not dropped while recording") {
		t.Errorf("info: exit %d:\n%s", code, out)
	}
	code, _, errs := runCLI("rewind", rec, "--launch", "1", "--after", "--region", "0", "-o", filepath.Join(t.TempDir(), "x.bin"))
	if code != exitUsage || !strings.Contains(errs, "are not in the chunk store, and the recording was not made with --on-full drop-oldest") {
		t.Errorf("rewind: exit %d, stderr %q", code, errs)
	}
}

// A --process number that is the pid or rank of more than one process (pids repeat across
// hosts and containers) is refused, naming them; the first in rank order was taken. A
// directory name is never ambiguous, nor a number only one process has.
func TestAmbiguousProcess(t *testing.T) {
	rec := newRec(t, func(dir string) error {
		if err := recording.CreateSet(dir, []string{"torchrun", "train.py"}); err != nil {
			return err
		}
		for _, p := range []*pb.Process{
			{Hostname: "node-a", Pid: 1, Rank: proto.Int32(0)},
			{Hostname: "node-b", Pid: 1, Rank: proto.Int32(1)},
			{Hostname: "node-c", Pid: 7, Rank: proto.Int32(2)},
		} {
			w, err := recording.Create(dir, fmt.Sprintf("%s-%d", p.Hostname, p.Pid), &pb.Batch{Process: p})
			if err != nil {
				return err
			}
			if err := w.Close(); err != nil {
				return err
			}
		}
		return nil
	})
	out := filepath.Join(t.TempDir(), "x.bin")
	for which, want := range map[string]string{
		"1":        "nan: --process 1 is the pid or rank of 2 processes (node-a-1, node-b-1): name one by its directory name",
		"2":        "/node-c-7 was recorded without snapshots",
		"7":        "/node-c-7 was recorded without snapshots",
		"node-b-1": "/node-b-1 was recorded without snapshots",
	} {
		code, _, errs := runCLI("nan", rec, "--process", which)
		if code != exitUsage || !strings.Contains(errs, want) {
			t.Errorf("--process %s: exit %d, stderr %q; want %q", which, code, errs, want)
		}
	}
	if code, _, errs := runCLI("rewind", rec, "--process", "0", "--launch", "1", "--after", "--region", "0", "-o", out); code != exitUsage || !strings.Contains(errs, "node-a-1 ") {
		t.Errorf("--process 0, rank 0 alone: exit %d, stderr %q", code, errs)
	}
}

// A process whose events file cannot be read at all is a row of processes (readable 0),
// with the host, pid and rank its directory name gives; before, it was only a warning on
// stderr, and SQL over the job counted fewer ranks than ran.
func TestQueryUnreadableProcess(t *testing.T) {
	job := rankedJob(t, []int32{0, 1}, []float32{1.5, 1.5})
	for _, name := range []string{"rank3-node-a-7+2", "odd"} {
		dir := filepath.Join(job, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, recording.EventsFile), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runCLI("query", job, "--format", "csv",
		"SELECT process, hostname, pid, rank, readable, complete, argv FROM processes ORDER BY process")
	want := "process,hostname,pid,rank,readable,complete,argv\n" +
		"node0-11,node0,11,0,1,1,python train.py\n" +
		"node1-11,node1,11,1,1,1,python train.py\n" +
		"odd,,,,0,,\n" +
		"rank3-node-a-7+2,node-a,7,3,0,,\n"
	if code != 0 || out != want || !strings.Contains(errs, "odd") || !strings.Contains(errs, "rank3-node-a-7+2") {
		t.Errorf("exit %d, stderr %q, rows:\n%s\nwant:\n%s", code, errs, out, want)
	}
}
