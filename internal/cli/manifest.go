package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/manifest"
)

func newManifestCmd() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "manifest REC -o M.json",
		Short: "Write the per-launch memory hashes of a known-good run, for gpurr verify",
		Long: `manifest writes a JSON manifest of a recording made with memory capture:
for every launch of every process, its kernel, its stream and the hash of
each region (and of each 64 KiB chunk) after it ran. gpurr verify checks a
later run against it: the deterministic-run contract of a known-good run.

A recording that lost memory states or records, or ended short, still
makes a manifest (it promises what the recording holds), with a warning
line per such process: record the known-good run again for a complete one.
A process whose events file cannot be read (empty: killed before its first
write; or a damaged frame) is left out, with a warning line naming it and
why: the manifest promises nothing for it.

The manifest holds hashes only and names the recording it was made from:
keep that recording (snapshot mode) to see expected bytes when verify finds
a difference. docs/manifest.md describes the format.`,
		Example: `  gpurr record --memory snapshot -o good -- python train.py
  gpurr manifest good -o good.json
  gpurr record --memory hash -o run2 -- python train.py
  gpurr verify run2 --manifest good.json`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runManifest(cmd, args[0], out, force) },
	}
	outputVar(cmd.Flags(), &out, "output", "o", "", "manifest file to write, - for stdout")
	cmd.Flags().BoolVar(&force, "force", false, "replace the -o file when it exists")
	return cmd
}

func runManifest(cmd *cobra.Command, path, out string, force bool) error {
	if out == "" {
		return usageErrorf("manifest: -o FILE is required (- for stdout)")
	}
	set, err := openToCheck(cmd, path)
	if err != nil {
		return err
	}
	w, err := createOutput("manifest", out, cmd.OutOrStdout(), force, path)
	if err != nil {
		return err
	}
	defer w.Abort()
	sum, err := manifest.Write(w, set)
	if err != nil {
		return usageErrorf("manifest: %v", err)
	}
	if err := w.Commit(); err != nil {
		return err
	}
	for _, warning := range sum.Warnings {
		warnf(cmd, "%s", warning)
	}
	left := unreadable(set.Damaged, sum.Unread)
	for _, e := range left {
		warnf(cmd, "left out %s, which cannot be read: %v; the manifest promises nothing for it", e.Name, e.Err)
	}
	if out == "-" {
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "manifest: wrote %s of %s to %s (%d with hashes, %d of them with their bytes in %s)",
		info.Count(sum.Launches, "launch"), info.Count(sum.Processes, "process"), out, sum.States, sum.Snapshots, path)
	if len(left) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "; left out %s (%s)", info.Count(len(left), "process"), unreadNames(left))
	}
	fmt.Fprintln(cmd.ErrOrStderr())
	return nil
}
