package export

import (
	"os"
	"sync/atomic"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

// An export interrupted part way (Ctrl-C) leaves neither its files nor the hidden file that
// claims the folder, which made the same command fail as "not empty".
func TestParquetInterrupted(t *testing.T) {
	testrec.InterruptPartWay(t, func(out string, stop func()) {
		set := testrec.Open(t, testrec.Memory)
		var created atomic.Int32
		create := createFile
		createFile = func(name string) (*os.File, error) {
			if created.Add(1) == 3 {
				stop()
			}
			return create(name)
		}
		Parquet(out, set.Processes)
	})
}
