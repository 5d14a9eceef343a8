package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/internal/trace"
)

// fixtureLine is the number of the line of a testdata workload that ends
// with "# FIXTURE: mark".
func fixtureLine(t *testing.T, file, mark string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(workloadsDir, file))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), "# FIXTURE: "+mark) {
			return i + 1
		}
	}
	t.Fatalf("%s: no line marked %q", file, mark)
	return 0
}

func validTrace(t *testing.T, path string) (*trace.ChromeFile, trace.ChromeSummary) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	file, sum, err := trace.ValidateChrome(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return file, sum
}

// The recording made on an H100 of testdata/workloads/torch_graphs.py: a
// graph captured at the graph-mul and graph-sin lines, replayed 4 times.
// Every replayed kernel is named and carries its capture-time line.
func TestTraceRealGraphs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "graphs.json")
	code, stdout, stderr := runCLI("trace", realRecordings[0].path, "-o", out)
	expectOutput(t, "trace", code, 0, stdout, stderr, "1 process, ", "8 kernels run by graph replays, 8 of them with their capture-time launch", "22 kernels linked to their call of 22")
	f, sum := validTrace(t, out)
	if sum.ByCat["graph_kernel"] != 8 || sum.ByCat["graph_launch"] != 4 {
		t.Errorf("slices by category %v", sum.ByCat)
	}
	lines := map[string]int{}
	for _, e := range f.TraceEvents {
		if e.Cat == "graph_kernel" {
			line, _ := e.Args["python_line"].(string)
			file, _, _ := strings.Cut(filepath.Base(line), " ")
			lines[file]++
			if e.Name == "" || !e.FlowIn || e.Args["graph_launch"] == nil {
				t.Errorf("graph kernel %q: flow_in %v, args %v", e.Name, e.FlowIn, e.Args)
			}
		}
	}
	mul, sin := fixtureLine(t, "torch_graphs.py", "graph-mul"), fixtureLine(t, "torch_graphs.py", "graph-sin")
	want := map[string]int{fmt.Sprintf("torch_graphs.py:%d", mul): 4, fmt.Sprintf("torch_graphs.py:%d", sin): 4}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("graph kernels by capture-time line %v, want %v", lines, want)
	}

	// The same in Perfetto's format, to a name --format must agree with.
	pf := filepath.Join(t.TempDir(), "graphs.pftrace")
	code, stdout, stderr = runCLI("trace", realRecordings[0].path, "-o", pf, "--format", "perfetto")
	expectOutput(t, "perfetto", code, 0, stdout, stderr, "(perfetto, ")
}

func TestTraceMerge(t *testing.T) {
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	for _, d := range []string{a, b} {
		if err := testrec.Write(d, testrec.Good); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(tmp, "job.json")
	code, stdout, stderr := runCLI("trace", a, b, "-o", out, "--kernels", "gemm", "--time", "0:1s")
	expectOutput(t, "merged", code, 0, stdout, stderr, "4 processes, ", "20 kernels linked to their call of 20", "8 kernels run by graph replays")
	_, sum := validTrace(t, out)
	if sum.Processes != 4 {
		t.Errorf("%d processes on the timeline", sum.Processes)
	}
	code, stdout, _ = runCLI("trace", a, "-o", "-", "--format", "chrome", "--launches", "1-2")
	if code != 0 || !strings.HasPrefix(stdout, `{"displayTimeUnit"`) || strings.Count(stdout, `"cat":"kernel"`) != 4 {
		t.Errorf("to stdout: exit %d, %d kernels:\n%.300s", code, strings.Count(stdout, `"cat":"kernel"`), stdout)
	}

	corrupt := filepath.Join(tmp, "corrupt")
	if err := testrec.Write(corrupt, testrec.Corrupt); err != nil {
		t.Fatal(err)
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"trace", a}, "-o FILE is required"},
		{[]string{"trace", a, "-o", filepath.Join(tmp, "x.txt")}, "cannot tell the format"},
		{[]string{"trace", a, "-o", "-"}, "-o - (standard output) has no name to tell the format by: give --format chrome or --format perfetto"},
		{[]string{"trace", a, "-o", filepath.Join(tmp, "x.json"), "--format", "perfetto"}, "names a chrome file"},
		{[]string{"trace", a, "-o", "-", "--format", "svg"}, "unknown trace format"},
		{[]string{"trace", a, "-o", out, "--kernels", "("}, "--kernels: error parsing regexp"},
		{[]string{"trace", a, "-o", out, "--launches", "0-3"}, "launches count from 1"},
		{[]string{"trace", a, "-o", out, "--time", "2s"}, "want A:B"},
		{[]string{"trace", a, "-o", out, "--time", "2s:1s"}, "ends before it starts"},
		{[]string{"trace", a, "-o", out, "--time", "x:"}, "is not a time"},
		{[]string{"trace", a, a, "-o", out}, "give each recording once"},
		{[]string{"trace", filepath.Join(tmp, "missing"), "-o", out}, "no such file"},
		{[]string{"trace", filepath.Join(corrupt, testrec.Name(0)), "-o", filepath.Join(tmp, "c.json")}, "checksum"},
		{[]string{"trace", a, "-o", filepath.Join(tmp, "no-dir", "x.json")}, "does not exist"},
	})
	if _, err := os.Stat(filepath.Join(tmp, "c.json")); !os.IsNotExist(err) {
		t.Errorf("a failed trace left its file: %v", err)
	}
}

func TestExport(t *testing.T) {
	tmp := t.TempDir()
	rec := filepath.Join(tmp, "rec")
	if err := testrec.Write(rec, testrec.Memory); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "pq")
	code, stdout, stderr := runCLI("export", rec, "--parquet", out)
	expectOutput(t, "export", code, 0, stdout, stderr, "2 processes, 60 files; rows: processes 2, devices 2, modules 6, kernels 8, kernel_params 34, launches 28, gpu_activity 32, gpurr_activity 23,")
	if _, err := os.Stat(filepath.Join(out, "gpu_activity", "host=gpu-box", "rank=1", testrec.Name(1)+".parquet")); err != nil {
		t.Error(err)
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"export", rec}, "-o DIR is required"},
		{[]string{"export", rec, "--parquet", out}, "is not empty"},
		{[]string{"export", filepath.Join(tmp, "missing"), "--parquet", filepath.Join(tmp, "x")}, "no such file"},
	})
}

// A full disk is the environment failing, not bad input: exit 3, one line naming the file the
// user gave (not a temporary one).
func TestTraceWriteFailure(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this machine")
	}
	code, stdout, stderr := runCLI("trace", realRecordings[0].path, "-o", "/dev/full", "--format", "chrome")
	if code != exitFailure || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
		!strings.Contains(stderr, "write /dev/full: no space left on device") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 3 and one line naming /dev/full", code, stdout, stderr)
	}
}

// A bad number in a flag is said in the user's terms, not Go's parser's.
func TestFlagValueErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", "a", "b", "--elements", "abc"}, `invalid argument "abc" for "--elements" flag: want an integer`},
		{[]string{"rewind", "a", "--len", "-5"}, `invalid argument "-5" for "--len" flag: want a whole number, 0 or more`},
		{[]string{"rewind", "a", "--launch", "99999999999999999999999"}, `flag: out of range`},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "strconv") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// `gpurr help` with a topic that is no command is a usage error, one line, not the usage and exit 0.
func TestHelpUnknownTopic(t *testing.T) {
	code, stdout, stderr := runCLI("help", "nosuch")
	if code != exitUsage || stdout != "" || strings.TrimSpace(stderr) != `gpurr: help: no command "nosuch": gpurr --help lists them` {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, _ := runCLI("help", "info"); code != exitOK || !strings.Contains(stdout, "Summarize a recording") {
		t.Errorf("help info: exit %d, stdout %q", code, stdout)
	}
}
