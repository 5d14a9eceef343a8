package cli

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/gpurr/gpurr/internal/testrec"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the actual output")

// TestMain lets the scripts run this test binary as the gpurr command.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"gpurr": func() { os.Exit(Main(os.Args[1:])) },
	})
}

// TestScripts runs testdata/script/*.txtar. Each script's $WORK holds a
// synthetic recording of two ranks in rec/ (see internal/testrec).
//
// Commands added for the scripts:
//
//	mkrec VARIANT DIR     write a synthetic recording (good, lossy, incomplete,
//	                      truncated, corrupt, newer, empty) into DIR
//	exits CODE CMD ARGS   run CMD; require exit CODE and, when CODE is not 0,
//	                      exactly one "gpurr: ..." line on stderr
//	golden NAME           compare stdout with testdata/golden/NAME ($WORK
//	                      written as $WORK); -update rewrites the file
func TestScripts(t *testing.T) {
	goldenDir, err := filepath.Abs(filepath.Join("testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			return testrec.Write(filepath.Join(env.WorkDir, "rec"), testrec.Good)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"mkrec":  cmdMkrec,
			"exits":  cmdExits,
			"golden": func(ts *testscript.TestScript, neg bool, args []string) { cmdGolden(ts, neg, args, goldenDir) },
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
		ts.Fatalf("stdout differs from %s (go test ./internal/cli -update rewrites it):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first lines where want and got part.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			shown++
		}
	}
	return b.String()
}
