package replay

import (
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/outdir"
	"github.com/gpurr/gpurr/internal/testrec"
)

// An extract interrupted (Ctrl-C) before any file or folder it makes leaves no folder beside
// its target and nothing in an empty folder it was given, so that the same command can run
// again; and that although extract goes on while the interrupt's undo runs on another
// goroutine: it made the folder beside again (MkdirAll), or a file in the folder it was given,
// after the undo had looked, and they were left.
func TestExtractInterrupted(t *testing.T) {
	testrec.InterruptAtEach(t, func(out string, point func()) {
		dir := t.TempDir()
		if _, err := testrec.WriteReplayable(dir); err != nil {
			panic(err)
		}
		// An output the process began before, whose undo takes a while (removing a large
		// folder): the process ends only once it is undone too.
		outdir.Undoable(func() (func(), error) {
			return func() { time.Sleep(200 * time.Millisecond) }, nil
		})
		add = func(f func() error) error {
			point()
			return outdir.Add(f)
		}
		Extract(openSource(t, dir), 2, out)
	})
}
