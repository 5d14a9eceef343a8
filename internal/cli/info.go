package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gpurr/gpurr/internal/info"
)

func newInfoCmd() *cobra.Command {
	var format string
	var check bool
	cmd := &cobra.Command{
		Use:   "info REC [--check]",
		Short: "Summarize a recording: processes, devices, launches, top kernels, and anything lost",
		Long: `Summarize a recording: for each process its command, devices, time span,
launches, GPU time, top kernels, modules and callstacks.

A recording that was cut short, was not closed, or counted any dropped or
failed record is reported first, marked !!, and the command exits with 1; so
is one recorded with write sets that holds a region state carried from a
lost one, or an audit that found a learned write set wrong, a process whose
events file cannot be opened (empty, damaged), and a file the recording
needs that is missing or damaged (a chunk pack, a module image of the wrong
size or whose bytes do not hash to its name). Module images missing from
modules/ are noted without a problem: replay, extract, tune, race and probe
need them, the other verbs do not.

--check reads every chunk of each process's chunk store (snapshot mode) and
checks that its bytes hash to its name, as replay, rewind and extract check
each chunk they read: a chunk that does not is a problem, named with the
states that hold it (up to 3). It reads the whole store, so it takes as long
as copying it.`,
		Args: positional(1, 1, "one recording directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat("info", format, "table", "json"); err != nil {
				return err
			}
			set, err := openRecording(cmd, args[0])
			if err != nil {
				return err
			}
			report, err := info.Summarize(set, args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			if check {
				if err := report.CheckChunks(set, chunkProgress()); err != nil {
					return usageErrorf("info: --check: %v", err)
				}
			}
			if format == "json" {
				err = report.WriteJSON(cmd.OutOrStdout())
			} else {
				err = report.WriteTable(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			return problemsError(args[0], report)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	completeValues(cmd, "format", "table", "json")
	cmd.Flags().BoolVar(&check, "check", false, "read every chunk of the chunk store and check it hashes to its name")
	addStepRangeFlag(cmd)
	return cmd
}

// chunkProgressMin is the store size, in chunks (64 KiB each at most), from which reading it
// takes long enough to deserve a progress bar.
const chunkProgressMin = 4096

// chunkProgress shows, on a terminal, how many chunks of a process --check has read.
func chunkProgress() func(process string, done, total int) {
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(process string, done, total int) {
		if total < chunkProgressMin {
			return
		}
		if bar == nil || bar.GetMax() != total {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(),
				progressbar.OptionSetDescription("checking "+process+"'s chunks"), progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish())
		}
		if done >= total {
			bar.Finish()
			bar = nil
			return
		}
		bar.Set(done)
	}
}

// problemsError is exit 1 with one line naming what each process lost,
// when anything was; the report above it has the details.
func problemsError(path string, r *info.Report) error {
	var parts []string
	for _, p := range r.Processes {
		if probs := p.Problems(); len(probs) > 0 {
			parts = append(parts, p.Name+": "+strings.Join(probs, ", "))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return &exitError{code: exitFound, err: fmt.Errorf("%s: recording has problems (%s); see the report", path, info.Few(parts, "; "))}
}
