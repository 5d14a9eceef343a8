package cli

import (
	"fmt"
	"io"

	"github.com/gpurr/gpurr/internal/agentpath"
	"github.com/gpurr/gpurr/internal/version"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
)

// printVersion answers gpurr --version: the CLI, the formats it writes and reads, and the
// agent record would inject, with a warning when the two were built from different commits.
func printVersion(w io.Writer) {
	cli := version.This()
	fmt.Fprintf(w, "gpurr %s (%s)\n", version.Version, cli)
	fmt.Fprintf(w, "recording format %d.%d, chunk store %d.%d\n",
		recording.MajorVersion, recording.MinorVersion, chunkstore.MajorVersion, chunkstore.MinorVersion)
	path, err := agentpath.Find()
	if err != nil {
		fmt.Fprintf(w, "agent: not found (%v)\n", err)
		return
	}
	agent, err := version.Of(path)
	if err != nil {
		fmt.Fprintf(w, "agent: %s (unreadable: %v)\n", path, err)
		return
	}
	fmt.Fprintf(w, "agent: %s (%s)\n", path, agent)
	if agent.Commit != "" && cli.Commit != "" && agent != cli {
		fmt.Fprintln(w, "warning: the agent and gpurr were built from different trees: run make")
	}
}
