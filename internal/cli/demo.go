package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/agent/agentenv"
	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/demo"
)

func newDemoCmd() *cobra.Command {
	var out string
	var workload bool
	cmd := &cobra.Command{
		Use:   "demo [-o DIR]",
		Short: "Record a small built-in GPU workload and show what gpurr saw",
		Long: `demo records gpurr's own workload (20 kernel launches on 2 streams,
checked against the host) with gpurr record, shows the recording with
gpurr info, and suggests what to try next.

Without a usable GPU it says why, and shows the recording of the same
workload that ships inside gpurr instead, extracted to DIR.

Exit status: 0 when the demo ran, 1 when the workload or its recording
failed, or when there is no GPU and this build carries no recording.`,
		Example: `  gpurr demo
  gpurr demo -o demo-run && gpurr query demo-run 'SELECT name, count(*) FROM launches GROUP BY name'`,
		Args: positional(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if workload {
				return runWorkload(cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return runDemo(cmd.OutOrStdout(), cmd.ErrOrStderr(), out)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "directory for the recording (default: a new temporary directory)")
	// --workload is the recorded program: gpurr demo runs
	// "gpurr record -- gpurr demo --workload".
	f.BoolVar(&workload, "workload", false, "run the demo workload in this process and exit")
	f.MarkHidden("workload")
	return cmd
}

// runWorkload is gpurr demo --workload.
func runWorkload(stdout, stderr io.Writer) error {
	_, err := demo.RunWorkload(stdout)
	if err != nil {
		err = fmt.Errorf("demo workload: %w", err)
	}
	if os.Getenv(agentenv.Injection) != "" {
		// A Go program skips atexit handlers on exit, and the injected
		// agent writes the end of the recording in one: leave through
		// the C library.
		code := exitOK
		if err != nil {
			fmt.Fprintf(stderr, "gpurr: %v\n", err)
			code = exitFound
		}
		cuda.Exit(code)
	}
	if err != nil {
		return &exitError{code: exitFound, err: err}
	}
	return nil
}

func runDemo(stdout, stderr io.Writer, out string) error {
	sys, err := cuda.Probe()
	if err != nil {
		fmt.Fprintf(stdout, "No usable GPU here (%v).\n", err)
		return showBundled(stdout, stderr, out)
	}
	exe, err := os.Executable()
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("demo: cannot find the gpurr executable: %w", err)}
	}
	dir, err := demoDir(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Recording gpurr's demo workload on GPU 0 (%s) into %s\n\n", describeDevice(sys.Devices[0]), dir)
	if err := recordWorkload(context.Background(), exe, dir, nil, stdout, stderr); err != nil {
		return &exitError{code: exitFound, err: fmt.Errorf("demo: %w (gpurr doctor checks what recording needs)", err)}
	}
	return showRecording(stdout, stderr, dir)
}

// showBundled extracts the recording that ships in the binary and shows it.
func showBundled(stdout, stderr io.Writer, out string) error {
	if !demo.HasBundled() {
		return &exitError{code: exitFound, err: fmt.Errorf("demo: %w, so there is nothing to show (gpurr doctor says what recording needs)", demo.ErrNoBundled)}
	}
	dir, err := demoDir(out)
	if err != nil {
		return err
	}
	if err := demo.ExtractBundled(dir); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
	}
	fmt.Fprintf(stdout, "Showing instead the recording of this demo that ships with gpurr, extracted to %s\n"+
		"(gpurr doctor says what this machine needs to record one itself).\n\n", dir)
	return showRecording(stdout, stderr, dir)
}

// demoDir returns the directory to record into: out, or a new temporary
// directory that is left for the user to explore.
func demoDir(out string) (string, error) {
	if out != "" {
		return out, nil
	}
	dir, err := os.MkdirTemp("", "gpurr-demo-")
	if err != nil {
		return "", &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
	}
	return dir, nil
}

// showRecording runs gpurr info on dir and suggests next commands.
func showRecording(stdout, stderr io.Writer, dir string) error {
	if code := run([]string{"info", dir}, stdout, stderr); code != exitOK {
		return exitWith(code)
	}
	q := shellQuote(dir)
	fmt.Fprintf(stdout, "\nNext, try:\n"+
		"  gpurr query %s 'SELECT name, count(*) FROM launches GROUP BY name'\n"+
		"  gpurr info %s\n"+
		"  gpurr record -o DIR -- YOUR-PROGRAM   to record your own\n", q, q)
	return nil
}

// recordWorkload runs "exe record -o dir [recordFlags] -- exe demo
// --workload" and waits for it. Cancelling ctx sends gpurr record SIGTERM,
// which it passes on to the workload.
func recordWorkload(ctx context.Context, exe, dir string, recordFlags []string, stdout, stderr io.Writer) error {
	args := append([]string{"record", "-o", dir}, recordFlags...)
	args = append(args, "--", exe, "demo", "--workload")
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("gpurr record %s -- gpurr demo --workload: %w", dir, ctx.Err())
	case errors.As(err, &ee):
		return fmt.Errorf("gpurr record %s -- gpurr demo --workload exited with status %d", dir, ee.ExitCode())
	default:
		return fmt.Errorf("gpurr record: %w", err)
	}
}

// describeDevice reads "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.2 GiB".
func describeDevice(p cuda.Properties) string {
	return fmt.Sprintf("%s, %s, %d SMs, %.1f GiB", p.Name, p.Arch(), p.SMCount, float64(p.MemoryBytes)/(1<<30))
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./+:=@%,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
