package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the actual output")

// TestMain lets the scripts run this test binary as the gpurr command.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"gpurr": func() {
			if os.Getenv(fakeRecordEnv) != "" && len(os.Args) > 1 && os.Args[1] == "record" {
				os.Exit(fakeTrainedRecord(os.Args[2:]))
			}
			os.Exit(Main(os.Args[1:]))
		},
	})
}

// fakeRecordEnv, set in a script, makes gpurr record write a synthetic training run
// (testrec.TrainedRun of its command and flags) instead of running anything, so that gpurr
// bisect, which runs gpurr record, is tested without a GPU. Two words of the command act
// here: "steps-at NAME N" gives the run whose folder is NAME N steps, and "interrupt-at NAME"
// makes that run send SIGINT to its parent (bisect) and wait to be signalled in turn, as a
// program under a terminal's Ctrl-C would.
const fakeRecordEnv = "GPURR_TEST_FAKE_RECORD"

func fakeTrainedRecord(args []string) int {
	var dir string
	var flags, command []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-o" && i+1 < len(args):
			dir = args[i+1]
			i++
		case args[i] == "--":
			command = args[i+1:]
			i = len(args)
		default:
			flags = append(flags, args[i])
		}
	}
	name := filepath.Base(dir)
	run := 1
	for _, c := range name {
		run = run*31 + int(c)
	}
	o := testrec.TrainedRun(command, flags, run, nil)
	for i, w := range command {
		switch {
		case w == "steps-at" && i+2 < len(command) && command[i+1] == name:
			o.Steps, _ = strconv.Atoi(command[i+2])
		case w == "interrupt-at" && i+1 < len(command) && command[i+1] == name:
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGINT)
			syscall.Kill(os.Getppid(), syscall.SIGINT)
			select {
			case <-sigs:
				return 128 + int(syscall.SIGINT)
			case <-time.After(10 * time.Second):
				return 97 // bisect never passed the interrupt on
			}
		}
	}
	if err := testrec.WriteTrained(dir, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// realRecordings are the recordings made on a GPU machine by
// scripts/gen-testdata, relative to this package. The scripts read them in
// place through these variables; golden files write their paths as $NAME,
// so that they do not depend on where the tree is checked out.
var realRecordings = []struct{ name, path string }{
	{"REC_TORCH_GRAPHS", "../../testdata/recordings/torch-graphs"},
	{"REC_KILLED", "../../testdata/recordings/killed"},
	{"REC_DEMO", "../demo/bundled/rec"},
}

// workloadsDir holds the programs that made the real recordings, for
// markline. Golden files keep its path as it is: the recordings' Python
// frames name it as it was on the machine that recorded them.
const workloadsDir = "../../testdata/workloads"

// TestScripts runs testdata/script/*.txtar. Each script's $WORK holds a
// synthetic recording of two ranks in rec/ (see internal/testrec); the real
// recordings are at $REC_TORCH_GRAPHS, $REC_KILLED and $REC_DEMO, and the
// programs that made them in $WORKLOADS.
//
// Commands added for the scripts:
//
//	mkrec VARIANT DIR     write a synthetic recording (good, lossy, incomplete,
//	                      truncated, corrupt, newer, empty, step-range, ...: testrec.Variants) into DIR
//	exits CODE CMD ARGS   run CMD; require exit CODE and, when CODE is not 0,
//	                      exactly one "gpurr: ..." line on stderr
//	golden NAME           compare stdout with testdata/golden/NAME ($WORK and
//	                      the real recordings' paths written as variables);
//	                      -update rewrites the file
//	markline VAR FILE MARK  set VAR to the number of the line of FILE that
//	                      ends with the comment "# FIXTURE: MARK"
//	mkjax [-diverged] DIR write the JAX program's recording with its XLA dump
//	                      (testrec.WriteJAX), of the diverged run or not, into DIR
//	mkreplayable [-ptx FILE] DIR [MODULE]
//	                      write testrec.WriteReplayable's recording (launch 2 of
//	                      saxpy_gridstride snapshotted) into DIR, its module the file
//	                      MODULE or a stand-in cubin; -ptx stores FILE beside it as its PTX
//
// The condition [cuda] holds where this process can use a GPU.
func TestScripts(t *testing.T) {
	goldenDir, err := filepath.Abs(filepath.Join("testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, r := range realRecordings {
		if vars[r.name], err = filepath.Abs(filepath.FromSlash(r.path)); err != nil {
			t.Fatal(err)
		}
	}
	workloads, err := filepath.Abs(filepath.FromSlash(workloadsDir))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			for name, path := range vars {
				env.Setenv(name, path)
			}
			env.Setenv("WORKLOADS", workloads)
			return testrec.Write(filepath.Join(env.WorkDir, "rec"), testrec.Good)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"mkrec":        cmdMkrec,
			"exits":        cmdExits,
			"golden":       func(ts *testscript.TestScript, neg bool, args []string) { cmdGolden(ts, neg, args, goldenDir) },
			"markline":     cmdMarkline,
			"mkjax":        cmdMkjax,
			"mkreplayable": cmdMkreplayable,
		},
		Condition: func(cond string) (bool, error) {
			if cond != "cuda" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			return cuda.Init() == nil, nil
		},
		RequireExplicitExec: true,
	})
}

func cmdMkrec(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mkrec VARIANT DIR")
	}
	ts.Check(testrec.Write(ts.MkAbs(args[1]), testrec.Variant(args[0])))
}

func cmdMkjax(ts *testscript.TestScript, neg bool, args []string) {
	diverged := len(args) == 2 && args[0] == "-diverged"
	if neg || len(args) != 1 && !diverged {
		ts.Fatalf("usage: mkjax [-diverged] DIR")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	ts.Check(err)
	ts.Check(testrec.WriteJAX(ts.MkAbs(args[len(args)-1]), root, diverged))
}

func cmdMkreplayable(ts *testscript.TestScript, neg bool, args []string) {
	var ptxFile string
	if len(args) > 2 && args[0] == "-ptx" {
		ptxFile, args = args[1], args[2:]
	}
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: mkreplayable [-ptx FILE] DIR [MODULE]")
	}
	var module []byte
	if len(args) == 2 {
		module = []byte(ts.ReadFile(args[1]))
	}
	dir := ts.MkAbs(args[0])
	r, err := testrec.WriteReplayableModule(dir, module)
	ts.Check(err)
	if ptxFile != "" {
		sum := sha256.Sum256(r.Module)
		ts.Check(recording.PutModulePTX(dir, hex.EncodeToString(sum[:]), []byte(ts.ReadFile(ptxFile))))
	}
}

func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE CMD [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		got = exitErr.ExitCode()
	case err != nil:
		ts.Fatalf("%v", err)
	}
	if got != want {
		ts.Fatalf("exit code %d, want %d", got, want)
	}
	if want == 0 {
		return
	}
	stderr := ts.ReadFile("stderr")
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "gpurr: ") || !strings.HasSuffix(stderr, "\n") {
		ts.Fatalf("stderr must be exactly one line starting with \"gpurr: \", got:\n%s", stderr)
	}
}

func cmdGolden(ts *testscript.TestScript, neg bool, args []string, dir string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: golden NAME")
	}
	got := strings.ReplaceAll(ts.ReadFile("stdout"), ts.Getenv("WORK"), "$WORK")
	for _, r := range realRecordings {
		got = strings.ReplaceAll(got, ts.Getenv(r.name), "$"+r.name)
	}
	path := filepath.Join(dir, args[0])
	if *update {
		ts.Check(os.MkdirAll(dir, 0o755))
		ts.Check(os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		ts.Fatalf("%v (run go test ./internal/cli -update to create it)", err)
	}
	if got != string(want) {
		ts.Fatalf("stdout differs from %s (go test ./internal/cli -update rewrites it):\n%s", path, testrec.LineDiff(string(want), got))
	}
}

func cmdMarkline(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: markline VAR FILE MARK")
	}
	comment := "# FIXTURE: " + args[2]
	var found []int
	for i, line := range strings.Split(ts.ReadFile(args[1]), "\n") {
		if strings.HasSuffix(strings.TrimRight(line, " \t\r"), comment) {
			found = append(found, i+1)
		}
	}
	if len(found) != 1 {
		ts.Fatalf("%s: %d lines end with %q, want 1 (lines %v)", args[1], len(found), comment, found)
	}
	ts.Setenv(args[0], strconv.Itoa(found[0]))
}
