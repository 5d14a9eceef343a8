package testrec

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// FailPartWay runs a command that writes a folder (run, given the folder) twice, once into a
// folder it must make and once into an empty one that is there, and requires each run to fail
// with want and to leave the folder as it found it: gone, or empty.
func FailPartWay(tb testing.TB, want error, run func(out string) error) {
	tb.Helper()
	for _, out := range []string{filepath.Join(tb.TempDir(), "out"), tb.TempDir()} {
		_, existed := os.Stat(out)
		if err := run(out); !errors.Is(err, want) {
			tb.Fatalf("%s: %v, want %v", out, err, want)
		}
		asFound(tb, out, out, existed == nil)
	}
}

// asFound requires out as a command found it: gone when it was not there, else empty. what
// names the run in the failure.
func asFound(tb testing.TB, what, out string, existed bool) {
	tb.Helper()
	entries, err := os.ReadDir(out)
	switch {
	case !existed && !errors.Is(err, fs.ErrNotExist):
		tb.Errorf("%s, made by the command: %v, %d entries left", what, err, len(entries))
	case existed && (err != nil || len(entries) != 0):
		tb.Errorf("%s, there before: %v, %d entries left", what, err, len(entries))
	}
}

// AtOnce runs run n times at once, as n commands writing one folder would, and returns how
// many returned nil; lost sees each error of the others.
func AtOnce(n int, run func() error, lost func(error)) (won int) {
	errs := make(chan error, n)
	for range n {
		go func() { errs <- run() }()
	}
	for range n {
		if err := <-errs; err != nil {
			lost(err)
		} else {
			won++
		}
	}
	return won
}

// interruptEnv names, in the process InterruptPartWay or InterruptAtEach starts, the folder it
// writes; interruptAtEnv, in one of InterruptAtEach, the point it is interrupted at.
const (
	interruptEnv   = "GPURR_TEST_INTERRUPTED_OUT"
	interruptAtEnv = "GPURR_TEST_INTERRUPTED_AT"
)

// InterruptPartWay is FailPartWay for an interrupt: it runs the calling test again in a
// process of its own, where write runs the command into the folder and calls stop where the
// command writes (a test hook: its next file, say); stop sends the process SIGINT and waits for
// the end. It requires the process to exit 130, as an interrupted command does, and the folder
// as the command found it: gone, or empty. In that process it runs write and nothing else.
func InterruptPartWay(t *testing.T, write func(out string, stop func())) {
	t.Helper()
	if out := os.Getenv(interruptEnv); out != "" {
		write(out, func() {
			syscall.Kill(os.Getpid(), syscall.SIGINT)
			time.Sleep(time.Minute) // the interrupt ends the process first
			os.Exit(99)
		})
		os.Exit(98) // write never called stop
	}
	for _, out := range []string{filepath.Join(t.TempDir(), "out"), t.TempDir()} {
		if code := interrupted(t, out, ""); code != 128+int(syscall.SIGINT) {
			t.FailNow()
		}
	}
}

// InterruptAtEach is InterruptPartWay for a command that goes on writing after the interrupt,
// as a goroutine of one does while the interrupt's undo runs on another. write calls point
// before each file or folder the command adds to its output (a test hook), and the command is
// interrupted at each point in turn, each time in a process of its own: there, point sends
// SIGINT, waits until the undo has put the folder back as the command found it and returns, so
// that the command goes on. Whatever it adds then must not be left when the process ends.
// write keeps the process from ending as soon as the undo is done, as the slow undo of another
// output would (outdir.Undoable of one that sleeps): else the interrupt's exit would seldom
// leave the command time to add anything.
func InterruptAtEach(t *testing.T, write func(out string, point func())) {
	t.Helper()
	if out := os.Getenv(interruptEnv); out != "" {
		at, _ := strconv.Atoi(os.Getenv(interruptAtEnv))
		_, err := os.Stat(out)
		existed := err == nil
		n := 0
		write(out, func() {
			if n++; n != at {
				return
			}
			syscall.Kill(os.Getpid(), syscall.SIGINT)
			for deadline := time.Now().Add(10 * time.Second); !undone(out, existed); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					os.Exit(97) // the interrupt did not put the folder back
				}
			}
		})
		if n < at {
			os.Exit(98) // write has fewer points
		}
		time.Sleep(time.Minute) // the interrupt ends the process first
		os.Exit(99)
	}
	for _, there := range []bool{false, true} {
		for at := 1; ; at++ {
			out := t.TempDir()
			if !there {
				out = filepath.Join(out, "out")
			}
			code := interrupted(t, out, strconv.Itoa(at))
			if code == 98 && at == 1 {
				t.Fatalf("%s: write has no point to interrupt at", out)
			}
			if code == 98 {
				break
			}
			if code != 128+int(syscall.SIGINT) {
				t.FailNow()
			}
		}
	}
}

// interrupted runs the calling test again with out, as InterruptPartWay and InterruptAtEach
// do, and returns its exit code. It fails the test where the process exits otherwise than 98
// (fewer points than at) or 130, or where it leaves the folder otherwise than as it found it.
func interrupted(t *testing.T, out, at string) (code int) {
	t.Helper()
	_, existed := os.Stat(out)
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	// The process ends without its tests' cleanup: its temporary files go where this one's do.
	cmd.Env = append(os.Environ(), interruptEnv+"="+out, interruptAtEnv+"="+at, "TMPDIR="+t.TempDir())
	done := Interruptible()
	log, err := cmd.CombinedOutput()
	done()
	what := out
	if at != "" {
		what += ", interrupted at point " + at
	}
	switch code = cmd.ProcessState.ExitCode(); {
	case code == 98 && at != "":
		return code
	case code != 128+int(syscall.SIGINT):
		t.Errorf("%s: exit %d (%v), want 130:\n%s", what, code, err, log)
		return code
	}
	asFound(t, what, out, existed == nil)
	if beside, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*")); len(beside) > 0 {
		t.Errorf("%s: left beside it: %v", what, beside)
	}
	return code
}

// undone says whether out is back as a command found it, gone or empty, with nothing beside it.
func undone(out string, existed bool) bool {
	entries, err := os.ReadDir(out)
	if existed && (err != nil || len(entries) > 0) || !existed && !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	beside, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*"))
	return len(beside) == 0
}

// Interruptible makes the processes this one starts until done is called start with the
// default action of SIGINT, SIGTERM and SIGHUP, as they do under go test, also where this test
// binary was started ignoring them (run in the background by a shell without job control, or
// by nohup): a process started ignoring a signal keeps ignoring it (outdir's
// TestIgnoredSignals), so a test that interrupts it would wait in vain. A signal a process
// catches is reset to its default action in what it executes; an ignored one stays ignored.
// One that comes to this process meanwhile (Ctrl-C of the test run) is sent again once done
// has stopped catching them, and does to it then what it would have done.
func Interruptible() (done func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return func() {
		signal.Stop(ch)
		select {
		case sig := <-ch:
			syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		default:
		}
	}
}
