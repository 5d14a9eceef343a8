package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/outdir"
)

// What demo and doctor share: gpurr's own workload recorded by gpurr record, in a temporary
// folder that an interrupt removes, on a GPU they describe.

// tempDir makes a temporary directory for a verb's own files (pattern as os.MkdirTemp's).
// Until release, an interrupt (Ctrl-C, SIGTERM, SIGHUP) removes it with what it holds before
// the process exits: demo and doctor leave nothing in $TMPDIR when stopped half way.
func tempDir(pattern string) (dir string, release func(), err error) {
	release, err = outdir.Undoable(func() (func(), error) {
		d, err := os.MkdirTemp("", pattern)
		if err != nil {
			return nil, err
		}
		dir = d
		return func() { os.RemoveAll(d) }, nil
	})
	return dir, release, err
}

// recordWorkload runs "exe record -o dir [recordFlags] -- exe demo
// --workload" and waits for it, as recordProgram does.
func recordWorkload(ctx context.Context, exe, dir string, recordFlags []string, variant string, stdout, stderr io.Writer) error {
	program := []string{exe, "demo", "--workload"}
	if variant != "" {
		program = append(program, "--variant", variant)
	}
	return recordProgram(ctx, exe, dir, recordFlags, program, "", stdout, stderr)
}

// recordProgram runs "exe record -o dir [recordFlags] -- program..." in the folder cwd (""
// for this process's) and waits for it. Cancelling ctx sends gpurr record SIGTERM, which it
// passes on to the program; so does an interrupt, which then waits for gpurr record to end
// before the folders it writes in are removed (it would write there after, making them again).
func recordProgram(ctx context.Context, exe, dir string, recordFlags, program []string, cwd string, stdout, stderr io.Writer) error {
	args := append([]string{"record", "-o", dir}, recordFlags...)
	args = append(args, "--")
	args = append(args, program...)
	what := strings.Join(append([]string{filepath.Base(program[0])}, program[1:]...), " ")
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = cwd
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	ended := make(chan struct{})
	release, err := outdir.Undoable(func() (func(), error) {
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-ended:
			case <-time.After(cmd.WaitDelay):
				cmd.Process.Kill()
			}
		}, nil
	})
	if err == nil {
		err = cmd.Wait()
		close(ended)
		release()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("gpurr record %s -- %s: %w", dir, what, ctx.Err())
	case errors.As(err, &ee):
		return fmt.Errorf("gpurr record %s -- %s exited with status %d", dir, what, ee.ExitCode())
	default:
		return fmt.Errorf("gpurr record: %w", err)
	}
}

// describeDevice reads "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.2 GiB".
func describeDevice(p cuda.Properties) string {
	return fmt.Sprintf("%s, %s, %d SMs, %.1f GiB", p.Name, p.Arch(), p.SMCount, float64(p.MemoryBytes)/(1<<30))
}
