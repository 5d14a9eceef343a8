package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
)

// Every flag that names a file to read refuses, at once and in one line, what is not a
// regular file or is larger than its kind may be: /dev/zero would otherwise be read into
// memory without end, and a FIFO no one writes to would hang the verb. Each case runs gpurr
// as a process of its own with a deadline, so that a regression fails rather than hangs.
func TestInputFilesAreRegularAndBounded(t *testing.T) {
	if _, err := exec.LookPath("gpurr"); err != nil {
		t.Fatalf("gpurr is not on $PATH (TestMain puts this test binary there): %v", err)
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	if _, err := testrec.WriteReplayable(rec); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Sparse: a file larger than the limit costs nothing on disk.
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sized := func(size int64) string {
		if err := os.Truncate(big, size); err != nil {
			t.Fatal(err)
		}
		return big
	}
	flags := []struct {
		args []string // before the file
		in   inputFile
	}{
		{[]string{"race", rec, "--launch", "2", "--list", "--ptx"}, ptxInput},
		{[]string{"probe", rec, "--launch", "2", "--ptx"}, ptxInput},
		{[]string{"replay", rec, "--launch", "2", "--module"}, moduleInput},
		{[]string{"verify", rec, "--manifest"}, manifestInput},
	}
	for _, f := range flags {
		for _, c := range []struct{ file, want string }{
			{"/dev/zero", "not a regular file (a device)"},
			{fifo, "not a regular file (a FIFO)"},
			{dir, "not a regular file (a directory)"},
			{sized(f.in.max + 1), fmt.Sprintf("is %d bytes; %s may be at most ", f.in.max+1, f.in.what)},
		} {
			args := append(append([]string{}, f.args...), c.file)
			code, stderr := runGpurrWithin(t, 10*time.Second, args...)
			want := "gpurr: " + args[0] + ": " + f.in.flag + " " + c.file + ": " + c.want
			if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
				t.Errorf("gpurr %s: exit %d, stderr %q; want exit 2 and one line with %q", strings.Join(args, " "), code, stderr, want)
			}
		}
	}
}

// runGpurrWithin runs gpurr args as a process, killed after d.
func runGpurrWithin(t *testing.T, d time.Duration, args ...string) (code int, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "gpurr", args...)
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Errorf("gpurr %s: still running after %v: killed", strings.Join(args, " "), d)
		return -1, errb.String()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), errb.String()
}
