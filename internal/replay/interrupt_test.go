package replay

import (
	"os"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

// An extract interrupted part way (Ctrl-C) leaves no folder beside its target and nothing in
// an empty folder it was given, so that the same command can run again.
func TestExtractInterrupted(t *testing.T) {
	testrec.InterruptPartWay(t, func(out string, stop func()) {
		dir := t.TempDir()
		if _, err := testrec.WriteReplayable(dir); err != nil {
			panic(err)
		}
		writeFile = func(string, []byte, os.FileMode) error { // the README, last
			stop()
			return nil
		}
		Extract(openSource(t, dir), 2, out)
	})
}
