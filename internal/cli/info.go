package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/info"
)

func newInfoCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "info REC",
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
need them, the other verbs do not.`,
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
	addStepRangeFlag(cmd)
	return cmd
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
