package cli

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

// A verb interrupted while it writes its -o file leaves neither the file nor the temporary
// one it writes first beside it.
func TestOutputInterrupted(t *testing.T) {
	testrec.InterruptPartWay(t, writeRowsUntil)
}

// writeRowsUntil writes part of an -o file at out (or in it, a folder), as query would, then
// calls stop.
func writeRowsUntil(out string, stop func()) {
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		out = filepath.Join(out, "rows.csv")
	}
	o, err := createOutput("query", out, io.Discard, false)
	if err == nil {
		_, err = o.Write([]byte("seq,kernel\n1,saxpy\n"))
	}
	if err != nil {
		panic(err)
	}
	stop()
}
