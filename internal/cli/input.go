package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/regular"
	"github.com/gpurr/gpurr/recording"
)

// openRecording opens the recording a verb was given; any failure is an
// input error naming the path. Reading a large recording shows a progress
// bar on stderr when stderr is a terminal.
func openRecording(cmd *cobra.Command, path string) (*recording.Set, error) {
	set, err := recording.Open(path)
	if err != nil {
		return nil, usageErrorf("%s: %v", cmd.Name(), err)
	}
	if f := cmd.Flags().Lookup(stepRangeFlag); f != nil && f.Changed {
		for _, p := range set.Processes {
			p.StepRange = f.Value.String()
		}
	}
	for _, d := range set.Damaged {
		warnf(cmd, "%v; reading the other processes", d)
	}
	showProgress(set, path)
	return set, nil
}

// inputFile is a kind of file a flag names for a verb to read. Every such flag opens its file
// here, as a recording's own files are opened (internal/regular): a regular file only, so that
// a FIFO cannot hang the verb nor a device stream into memory without end, and no larger than
// its kind may be.
type inputFile struct {
	flag string // "--ptx"
	what string // what the error calls it: "a PTX file"
	max  int64  // bytes
}

var (
	// A module's PTX is parsed whole, into several times its size.
	ptxInput = inputFile{"--ptx", "a PTX file", 256 << 20}
	// A cubin, PTX or fatbin is read whole and handed to the driver; a fatbin holds a
	// library's kernels for several architectures.
	moduleInput = inputFile{"--module", "a module", 512 << 20}
	// A manifest is streamed (a few hundred bytes a launch: 16 GiB is some 50 million
	// launches); verify keeps about a hundred bytes a launch of it.
	manifestInput = inputFile{"--manifest", "a manifest", 16 << 30}
)

// open opens the file path that verb's flag names; the error is an input error naming both.
func (in inputFile) open(verb, path string) (*os.File, error) {
	f, err := regular.Open(path)
	if err != nil {
		return nil, usageErrorf("%s: %s %s: %v", verb, in.flag, path, plainError(err))
	}
	st, err := f.Stat()
	if err == nil && st.Size() > in.max {
		err = fmt.Errorf("is %d bytes; %s", st.Size(), in.limit())
	}
	if err != nil {
		f.Close()
		return nil, usageErrorf("%s: %s %s: %v", verb, in.flag, path, plainError(err))
	}
	return f, nil
}

// read reads the whole file path that verb's flag names (open); one that grew past the
// limit while it was read is refused too.
func (in inputFile) read(verb, path string) ([]byte, error) {
	f, err := in.open(verb, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, in.max+1))
	if err == nil && int64(len(b)) > in.max {
		err = fmt.Errorf("grew while read; %s", in.limit())
	}
	if err != nil {
		return nil, usageErrorf("%s: %s %s: %v", verb, in.flag, path, plainError(err))
	}
	return b, nil
}

func (in inputFile) limit() string {
	return fmt.Sprintf("%s may be at most %s", in.what, info.FormatBytes(uint64(in.max)))
}

// stepRangeFlag is the flag of the verbs that number launches by training step: it names the
// NVTX ranges that are the steps, in place of those the recording was made with
// (recording.Process.StepRange).
const stepRangeFlag = "step-range"

// addStepRangeFlag gives cmd --step-range, checked when the flags are parsed; openRecording
// applies it.
func addStepRangeFlag(cmd *cobra.Command) {
	cmd.Flags().String(stepRangeFlag, "", "number training steps by the NVTX ranges whose message matches this regular expression (for a recording made with another or without: gpurr record --step-range); default: the recording's, else torch.optim optimizer steps")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if re, _ := cmd.Flags().GetString(stepRangeFlag); re != "" {
			if _, err := recording.CompileStepRange(re); err != nil {
				return usageErrorf("%s: --%s: %v", cmd.Name(), stepRangeFlag, err)
			}
		}
		return nil
	}
}

// progressMinBytes is the recording size from which reading takes long
// enough (a second or more) to deserve a progress bar.
const progressMinBytes = 64 << 20

func showProgress(set *recording.Set, path string) {
	var total int64
	for _, p := range set.Processes {
		total += p.Size
	}
	if total < progressMinBytes || !term.IsTerminal(int(os.Stderr.Fd())) {
		return
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("reading "+path),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	set.ReportProgress(func(done, _ int64) {
		if done >= total {
			bar.Finish()
			return
		}
		bar.Set64(done)
	})
}

// checkFormat accepts one of the formats a verb writes.
func checkFormat(verb, format string, formats ...string) error {
	if slices.Contains(formats, format) {
		return nil
	}
	return usageErrorf("%s: unknown --format %q (want %s)", verb, format, strings.Join(formats, ", "))
}

// openProcesses opens the recordings a verb was given and returns their
// processes, recording by recording, each in its recording's order. A
// process given twice (a recording and a process directory inside it) is
// an input error: it would be counted twice.
func openProcesses(cmd *cobra.Command, paths []string) ([]*recording.Process, error) {
	procs, _, err := openProcessesAndUnreadable(cmd, paths)
	return procs, err
}

// openProcessesAndUnreadable is openProcesses, and the names of the processes whose events
// file cannot be read at all (recording.Set.Damaged; openRecording warns of each).
func openProcessesAndUnreadable(cmd *cobra.Command, paths []string) (procs []*recording.Process, unreadable []string, err error) {
	verb := cmd.Name()
	seen := map[string]string{}
	for _, path := range paths {
		set, err := openRecording(cmd, path)
		if err != nil {
			return nil, nil, err
		}
		for _, p := range set.Processes {
			dir, err := filepath.Abs(p.Dir)
			if err != nil {
				return nil, nil, usageErrorf("%s: %v", verb, err)
			}
			if first, ok := seen[dir]; ok {
				return nil, nil, usageErrorf("%s: process %s is in both %s and %s: give each recording once", verb, p.Name, first, path)
			}
			seen[dir] = path
			procs = append(procs, p)
		}
		for _, d := range set.Damaged {
			if pe := (*recording.ProcessError)(nil); errors.As(d, &pe) {
				unreadable = append(unreadable, pe.Name)
			}
		}
	}
	return procs, unreadable, nil
}

// pickProcess chooses the process verb works on: the only one, or the one --process names by
// directory name, pid or rank. A process that could not be opened is named as damaged, not
// passed over as if the recording did not hold it: --process naming it gets its damage.
func pickProcess(verb string, set *recording.Set, which string) (*recording.Process, error) {
	if which == "" && len(set.Processes) == 1 {
		return set.Processes[0], nil
	}
	if which != "" {
		if p, err := matchProcess(verb, set, which); p != nil || err != nil {
			return p, err
		}
	}
	var names, damaged []string
	for _, p := range set.Processes {
		names = append(names, p.Name)
	}
	for _, d := range set.Damaged {
		var pe *recording.ProcessError
		if !errors.As(d, &pe) {
			continue
		}
		if pe.Name == which {
			return nil, usageErrorf("%s: %v", verb, pe)
		}
		damaged = append(damaged, pe.Name)
	}
	unread := ""
	if len(damaged) > 0 {
		unread = fmt.Sprintf("; %s cannot be read (gpurr info %s says why)", fewNames(damaged), set.Dir)
	}
	if which == "" {
		return nil, usageErrorf("%s: %s holds %d processes; pick one with --process (%s)%s", verb, set.Dir, len(set.Processes), fewNames(names), unread)
	}
	return nil, usageErrorf("%s: %s has no process %q; it holds %s (--process takes a name, a pid or a rank)%s", verb, set.Dir, which, fewNames(names), unread)
}

// matchProcess finds the process which names: by its directory name, else by a pid or rank
// that only one process has. A number may be the pid of more than one (ranks on other
// hosts, in containers), or one's pid and another's rank: the first of them is no answer.
func matchProcess(verb string, set *recording.Set, which string) (*recording.Process, error) {
	var all []*recording.Process
	for _, p := range set.Processes {
		if p.Name == which {
			return p, nil
		}
		if strconv.Itoa(int(p.Info.GetPid())) == which || p.Info.Rank != nil && strconv.Itoa(int(p.Info.GetRank())) == which {
			all = append(all, p)
		}
	}
	switch len(all) {
	case 0:
		return nil, nil
	case 1:
		return all[0], nil
	}
	var names []string
	for _, p := range all {
		names = append(names, p.Name)
	}
	return nil, usageErrorf("%s: --process %s is the pid or rank of %d processes (%s): name one by its directory name", verb, which, len(all), fewNames(names))
}

// fewNames joins names with commas, a few of them and a count of the rest (info.Few).
func fewNames(names []string) string { return info.Few(names, ", ") }

// positional checks a verb's argument count: at least min and at most max (-1: no limit),
// naming what it wants ("two recordings") and the usage line when the count is wrong.
func positional(min, max int, want string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= min && (max < 0 || len(args) <= max) {
			return nil
		}
		return usageErrorf("%s: want %s, got %s (%s)", cmd.Name(), want, info.Count(len(args), "argument"), cmd.UseLine())
	}
}

// completeValues lets the shell complete flag's values (gpurr completion); in a
// comma-separated list, the item being typed.
func completeValues(cmd *cobra.Command, flag string, values ...string) {
	cmd.RegisterFlagCompletionFunc(flag, func(_ *cobra.Command, _ []string, typed string) ([]string, cobra.ShellCompDirective) {
		done := typed[:strings.LastIndex(typed, ",")+1]
		out := make([]string, len(values))
		for i, v := range values {
			out[i] = done + v
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

// openToCheck opens the recording of manifest or verify. Unlike openRecording it does not
// warn of the process directories it cannot read (recording.Set.Damaged): each verb says
// what such a process means for what it promises or checks.
func openToCheck(cmd *cobra.Command, path string) (*recording.Set, error) {
	set, err := recording.Open(path)
	if err != nil {
		return nil, usageErrorf("%s: %v", cmd.Name(), err)
	}
	showProgress(set, path)
	return set, nil
}

// unreadable lists, by name, the processes of a recording that cannot be read: those Open
// could not (damaged, each a *recording.ProcessError) and those found damaged later (read).
func unreadable(damaged []error, read []*recording.ProcessError) []*recording.ProcessError {
	out := slices.Clone(read)
	for _, err := range damaged {
		var pe *recording.ProcessError
		if errors.As(err, &pe) {
			out = append(out, pe)
		}
	}
	slices.SortStableFunc(out, func(a, b *recording.ProcessError) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// unreadNames names a few of the processes that could not be read.
func unreadNames(procs []*recording.ProcessError) string {
	names := make([]string, len(procs))
	for i, p := range procs {
		names[i] = p.Name
	}
	return fewNames(names)
}
