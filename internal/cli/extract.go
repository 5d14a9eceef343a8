package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/replay"
)

func newExtractCmd() *cobra.Command {
	var launch uint64
	var out, process string
	cmd := &cobra.Command{
		Use:   "extract REC --launch SEQ -o DIR",
		Short: "Write one snapshotted launch as a self-contained reproducer",
		Long: `extract writes one launch of a --memory snapshot recording to DIR as a
recording of its own: the launch, its kernel and module image, its callstack,
its regions' contents before and after it, and a README.md with the command
that replays it. Attach DIR to a bug report: gpurr replay DIR runs it on any
machine with a suitable GPU, and gpurr info DIR describes it.`,
		Example: `  gpurr extract run1 --launch 42 -o repro
  gpurr replay repro`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErrorf("extract: -o DIR is required")
			}
			if err := checkOutFolder("extract", "-o", out, args); err != nil {
				return err
			}
			src, err := openReplaySource(cmd, args[0], process)
			if err != nil {
				return err
			}
			defer src.Close()
			seqs, err := pickLaunches("extract", src, launch, false, 0)
			if err != nil {
				return err
			}
			n, err := replay.Extract(src, seqs[0], out)
			if err != nil {
				return usageErrorf("extract: %v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "extract: wrote launch %d to %s (%s of memory contents); run it with: gpurr replay %s\n"+
				"  it is readable by you only, as recordings are (the memory may be private): chmod -R go+rX %s shares it on this machine\n",
				seqs[0], out, info.FormatBytes(uint64(n)), out, out)
			return nil
		},
	}
	launchVar(cmd.Flags(), &launch, "launch", "launch sequence number (default: the only snapshotted launch)")
	outputVar(cmd.Flags(), &out, "output", "o", "", "directory to create (must not exist or be empty)")
	cmd.Flags().StringVar(&process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	return cmd
}
