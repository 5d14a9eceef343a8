package outdir

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
)

// undoHangsEnv names, in the process TestSecondInterrupt starts, that it runs an undo that
// never returns.
const undoHangsEnv = "GPURR_TEST_UNDO_HANGS"

// A second interrupt while the first one's undo runs ends the process at once, as an interrupt
// does where nothing is to be undone: the second was caught and dropped, and an undo that
// hangs (a folder on a network file system gone away) left Ctrl-C without effect.
func TestSecondInterrupt(t *testing.T) {
	if os.Getenv(undoHangsEnv) != "" {
		Undoable(func() (func(), error) {
			return func() {
				os.Stdout.WriteString("undoing\n")
				select {}
			}, nil
		})
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(time.Minute)
		os.Exit(99)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), undoHangsEnv+"=1")
	defer testrec.Interruptible()()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "undoing\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the process printed %q (%v), want the undo begun", line, err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	waitEnded(t, cmd, "a second interrupt")
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("the process ended with %v, want by SIGINT", cmd.ProcessState)
	}
}

// brokenPipeEnv names, in the process TestBrokenPipe starts, the folder its output is.
const brokenPipeEnv = "GPURR_TEST_BROKEN_PIPE"

// A command whose standard output's reader goes away (gpurr demo -o DIR | head) undoes its
// output and ends as SIGPIPE would have ended it (exit 141): killed by the signal, it left the
// folder behind.
func TestBrokenPipe(t *testing.T) {
	if dir := os.Getenv(brokenPipeEnv); dir != "" {
		Undoable(func() (func(), error) {
			return func() { os.RemoveAll(dir) }, os.Mkdir(dir, 0o755)
		})
		for {
			os.Stdout.WriteString("a line of the walk\n")
			time.Sleep(10 * time.Millisecond)
		}
	}
	dir := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), brokenPipeEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	out.Close()
	waitEnded(t, cmd, "its output's reader went away")
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGPIPE) {
		t.Errorf("the process ended with %v, want exit %d", cmd.ProcessState, 128+int(syscall.SIGPIPE))
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is still there: %v", dir, err)
	}
}

// waitEnded waits up to 10 s for cmd to end after what, and kills it past that.
func waitEnded(t *testing.T, cmd *exec.Cmd, what string) {
	t.Helper()
	ended := make(chan struct{})
	go func() {
		cmd.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-ended
		t.Fatalf("the process still runs 10 s after %s", what)
	}
}

// lateAddEnv names, in the process TestAddAfterUndo starts, the folder its output is.
const lateAddEnv = "GPURR_TEST_LATE_ADD"

// A goroutine still writing an output when an interrupt comes adds nothing to it once the undo
// has begun: the undo (here one that takes a while after removing the folder, as removing a
// large one does) is the output's end. Without Add, the goroutine made the folder again, with a
// file in it, and the process ended with them there.
func TestAddAfterUndo(t *testing.T) {
	if out := os.Getenv(lateAddEnv); out != "" {
		undone := make(chan struct{})
		Undoable(func() (func(), error) {
			return func() {
				os.RemoveAll(out)
				close(undone)
				time.Sleep(200 * time.Millisecond)
			}, os.Mkdir(out, 0o755)
		})
		go func() {
			<-undone
			Add(func() error {
				if err := os.MkdirAll(filepath.Join(out, "table"), 0o755); err != nil {
					return err
				}
				return os.WriteFile(filepath.Join(out, "table", "late"), nil, 0o600)
			})
		}()
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(time.Minute)
		os.Exit(99)
	}
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), lateAddEnv+"="+out)
	defer testrec.Interruptible()()
	log, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGINT) {
		t.Fatalf("exit %d (%v), want 130:\n%s", code, err, log)
	}
	if _, err := os.Lstat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after the interrupt: %v, want it gone", out, err)
	}
}

// ignoredEnv names, in the process TestIgnoredSignals starts, the folder its output is.
const ignoredEnv = "GPURR_TEST_IGNORED_SIGNALS"

// A process started ignoring SIGHUP and SIGINT (nohup; a command a script runs in the
// background) is not ended by them while it writes its output, nor is the output undone: the
// signals were caught all the same, so hanging up on nohup gpurr export undid the export and
// ended it with 129.
func TestIgnoredSignals(t *testing.T) {
	if out := os.Getenv(ignoredEnv); out != "" {
		release, err := Undoable(func() (func(), error) {
			return func() { os.RemoveAll(out) }, os.Mkdir(out, 0o755)
		})
		if err != nil {
			os.Exit(97)
		}
		syscall.Kill(os.Getpid(), syscall.SIGHUP)
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(200 * time.Millisecond) // what comes of the signals comes within this
		release()
		os.Exit(0)
	}
	out := filepath.Join(t.TempDir(), "out")
	// The shell starts the test binary with both signals ignored, as nohup and a script's & do.
	cmd := exec.Command("sh", "-c", `trap '' HUP INT; exec "$0" "$@"`, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), ignoredEnv+"="+out)
	log, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d (%v), want 0: the ignored signals ended it:\n%s", code, err, log)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("the output after the ignored signals: %v, want it kept", err)
	}
}
