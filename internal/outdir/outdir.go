// Package outdir undoes a command's output folder when the command fails part way: the
// verbs that write a folder of files (export --parquet, extract) leave it as they found it,
// gone or as it was, so that the same command can run again instead of being refused
// because the folder is not empty.
package outdir

import (
	"os"
	"path/filepath"
)

// Track notes what dir holds now and returns undo, which puts dir back that way: it removes
// dir when it did not exist, and otherwise every entry that was not there. Entries that were
// there are never touched, so undo is safe whatever the command found.
func Track(dir string) (undo func()) {
	entries, err := os.ReadDir(dir)
	existed := err == nil
	before := make(map[string]bool, len(entries))
	for _, e := range entries {
		before[e.Name()] = true
	}
	return func() {
		if !existed {
			os.RemoveAll(dir)
			return
		}
		now, _ := os.ReadDir(dir)
		for _, e := range now {
			if !before[e.Name()] {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
}
