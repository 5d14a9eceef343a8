// Package cli implements the gpurr command line: one file per verb, each
// a thin layer over the package that owns the capability.
//
// A verb file declares its verb's command (newXxxCmd); a shared file declares
// none (root.go, flags.go, input.go, output.go, replayopen.go, compare.go,
// workload.go, cmdline.go, ...). A verb file uses its own names, the shared
// files' and other packages', never another verb file's; a shared file uses
// no verb file's names but the commands root.go joins (verbfiles_test.go).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/termsafe"
)

// Exit codes shared by every verb; exitStatusHelp says them to users, and `gpurr record`
// passes its program's own exit code through instead.
const (
	exitOK      = 0
	exitFound   = 1 // the command found what it looks for: a divergence, a NaN, a failed check
	exitUsage   = 2 // usage or input error: a flag, a path, a damaged recording, a launch replay cannot run
	exitFailure = 3 // gpurr or its environment failed: a write error, no usable GPU, a program that cannot start
)

const exitStatusHelp = `Exit status (record, once its program runs, exits with the program's code):
  0  done, nothing found
  1  found what the verb looks for: a divergence (diff, verify), a NaN (nan),
     a launch that differs on replay, a race witness (race), a problem
     (info, doctor)
  2  usage or input error: a bad flag or path (a program record cannot find),
     a damaged recording, a launch that cannot be replayed; one line on stderr
  3  gpurr or its environment failed: a write error, no usable GPU, a program
     that cannot be started; one line on stderr
  128+N  interrupted by signal N (130 for Ctrl-C), having removed what it
     had written, so the same command can be run again`

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is a bad-input error: one line, exit 2; or exit 3 when one of args is an error
// writing output (the disk, not the input, failed: isWriteFailure).
func usageErrorf(format string, args ...any) error {
	code := exitUsage
	for _, a := range args {
		if err, ok := a.(error); ok && isWriteFailure(err) {
			code = exitFailure
		}
	}
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// parserDetail is what pflag quotes of Go's number parsers: `strconv.ParseUint: parsing "-5": invalid syntax`.
var parserDetail = regexp.MustCompile(`strconv\.Parse(Int|Uint|Float|Bool): parsing "[^"]*": (invalid syntax|value out of range)`)

// flagError says a bad flag value in the user's terms rather than Go's parser's.
func flagError(err error) string {
	return parserDetail.ReplaceAllStringFunc(err.Error(), func(m string) string {
		kind := map[string]string{"Int": "an integer", "Uint": "a whole number, 0 or more", "Float": "a number", "Bool": "true or false"}[parserDetail.FindStringSubmatch(m)[1]]
		if strings.HasSuffix(m, "value out of range") {
			return "out of range"
		}
		return "want " + kind
	})
}

// writeFailure is an error writing a verb's output, named by the path the user gave.
type writeFailure struct {
	path string
	err  error
}

func (w *writeFailure) Error() string { return fmt.Sprintf("write %s: %v", w.path, plainError(w.err)) }
func (w *writeFailure) Unwrap() error { return w.err }

// isWriteFailure: err is a failure to write output, or an I/O error of the machine: the
// environment, not the input, failed (exit 3).
func isWriteFailure(err error) bool {
	var wf *writeFailure
	return errors.As(err, &wf) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EFBIG)
}

// exitWith ends the command with code and no message (the command printed its own report).
func exitWith(code int) error { return &exitError{code: code} }

// warningsKey holds, in a command's context, the warnings it has given.
type warningsKey struct{}

// warnf gives a warning: "gpurr: VERB: warning: ..." on stderr when the command ends, unless
// it ends with an error, which is then the one line stderr holds. Its strings may come from
// a recording: they are made safe for a terminal, as errors are.
func warnf(cmd *cobra.Command, format string, args ...any) {
	line := fmt.Sprintf("gpurr: %s: warning: %s", cmd.Name(), termsafe.String(fmt.Sprintf(format, args...)))
	if w, ok := cmd.Context().Value(warningsKey{}).(*[]string); ok {
		*w = append(*w, line)
		return
	}
	fmt.Fprintln(cmd.ErrOrStderr(), line)
}

// givenWarnings are the warnings the command has given so far, without their "gpurr: VERB:
// warning: " prefix: a JSON report lists them too.
func givenWarnings(cmd *cobra.Command) []string {
	out := []string{}
	if w, ok := cmd.Context().Value(warningsKey{}).(*[]string); ok {
		prefix := fmt.Sprintf("gpurr: %s: warning: ", cmd.Name())
		for _, line := range *w {
			out = append(out, strings.TrimPrefix(line, prefix))
		}
	}
	return out
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "gpurr",
		Short:         "Record, replay and time-travel debugging for CUDA programs",
		Long:          "Record, replay and time-travel debugging for CUDA programs.\n\n" + exitStatusHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	showVersion := root.Flags().BoolP("version", "v", false, "print the versions of gpurr, its formats and its agent")
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if *showVersion {
			printVersion(cmd.OutOrStdout())
			return nil
		}
		return cmd.Help()
	}
	// cobra's own help verb answers an unknown topic with the whole usage, exit 0.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 || (cmd == root && len(args) > 0) {
				return usageErrorf("help: no command %q: gpurr --help lists them", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	})
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s: %s (see %s --help)", strings.TrimPrefix(c.CommandPath(), "gpurr "), flagError(err), c.CommandPath())}
	})
	root.AddCommand(
		newRecordCmd(),
		newInfoCmd(),
		newQueryCmd(),
		newDoctorCmd(),
		newDemoCmd(),
		newRewindCmd(),
		newDiffCmd(),
		newBisectCmd(),
		newNanCmd(),
		newReplayCmd(),
		newTuneCmd(),
		newExtractCmd(),
		newManifestCmd(),
		newVerifyCmd(),
		newTraceCmd(),
		newExportCmd(),
		newRaceCmd(),
		newProbeCmd(),
	)
	// cobra's completion verb answers a shell it does not know with its help, exit 0.
	root.InitDefaultCompletionCmd()
	if completion, _, err := root.Find([]string{"completion"}); err == nil && completion != root {
		var shells []string
		for _, c := range completion.Commands() {
			shells = append(shells, c.Name())
		}
		completion.Args = cobra.ArbitraryArgs
		completion.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return usageErrorf("completion: no shell %q (want %s)", args[0], strings.Join(shells, ", "))
		}
	}
	return root
}

// unknownCommand matches cobra's error for a verb it does not know.
var unknownCommand = regexp.MustCompile(`^unknown command ("[^"]*") for "gpurr"`)

// unknownCommandError says, in one line, that verb is no gpurr verb, with the ones it may
// have meant; cobra's own message spreads "Did you mean this?" over several lines.
func unknownCommandError(root *cobra.Command, err error) error {
	m := unknownCommand.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	verb, _ := strconv.Unquote(m[1])
	if near := root.SuggestionsFor(verb); len(near) > 0 {
		return fmt.Errorf("unknown command %s: did you mean %s? (gpurr --help lists them)", m[1], strings.Join(near, " or "))
	}
	return fmt.Errorf("unknown command %s (gpurr --help lists them)", m[1])
}

// sqlComments keeps gpurr query's SQL when it begins with a "--" comment from being taken
// for a flag: an argument after "query" that starts with "--" and has white space (a line
// break, a blank) before any "=" cannot be a flag, so it gets a leading blank, which SQLite
// skips, and the flag parser takes it for an argument. Flags after it are still flags.
func sqlComments(args []string) []string {
	if len(args) == 0 || args[0] != "query" {
		return args
	}
	out := slices.Clone(args)
	for i, a := range out[1:] {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(a, "--") && strings.ContainsFunc(name, unicode.IsSpace) {
			out[i+1] = " " + a
		}
	}
	return out
}

// Main runs the CLI and returns the process exit code.
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(sqlComments(args))
	var warnings []string
	cmd, err := root.ExecuteContextC(context.WithValue(context.Background(), warningsKey{}, &warnings))
	var ee *exitError
	if err == nil || errors.As(err, &ee) && ee.err == nil {
		for _, w := range warnings {
			fmt.Fprintln(stderr, w)
		}
	}
	if err == nil {
		return exitOK
	}
	if ee != nil {
		if ee.err != nil {
			fmt.Fprintf(stderr, "gpurr: %s\n", termsafe.String(ee.err.Error())) // one line, whatever a recording holds
		}
		return ee.code
	}
	if isWriteFailure(err) {
		fmt.Fprintf(stderr, "gpurr: %s\n", termsafe.String(err.Error()))
		return exitFailure
	}
	// cobra's own errors (unknown command, bad args) are usage errors; they
	// do not name the verb, so the message does.
	if cmd != nil && cmd != root {
		fmt.Fprintf(stderr, "gpurr: %s: %v (see %s --help)\n", strings.TrimPrefix(cmd.CommandPath(), "gpurr "), err, cmd.CommandPath())
	} else {
		fmt.Fprintf(stderr, "gpurr: %v\n", unknownCommandError(root, err))
	}
	return exitUsage
}
