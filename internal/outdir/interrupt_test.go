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
		t.Fatal("the process still runs 10 s after a second interrupt")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("the process ended with %v, want by SIGINT", cmd.ProcessState)
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
	log, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGINT) {
		t.Fatalf("exit %d (%v), want 130:\n%s", code, err, log)
	}
	if _, err := os.Lstat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after the interrupt: %v, want it gone", out, err)
	}
}
