package testrec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FailPartWay runs a command that writes a folder (run, given the folder) twice, once into a
// folder it must make and once into an empty one that is there, and requires each run to fail
// with want and to leave the folder as it found it: gone, or empty.
func FailPartWay(tb testing.TB, want error, run func(out string) error) {
	tb.Helper()
	for _, out := range []string{filepath.Join(tb.TempDir(), "out"), tb.TempDir()} {
		_, existed := os.Stat(out)
		if err := run(out); !errors.Is(err, want) {
			tb.Fatalf("%s: %v, want %v", out, err, want)
		}
		entries, err := os.ReadDir(out)
		switch {
		case existed != nil && !errors.Is(err, fs.ErrNotExist):
			tb.Errorf("%s, made by the command: %v, %d entries left", out, err, len(entries))
		case existed == nil && (err != nil || len(entries) != 0):
			tb.Errorf("%s, there before: %v, %d entries left", out, err, len(entries))
		}
	}
}

// AtOnce runs run n times at once, as n commands writing one folder would, and returns how
// many returned nil; lost sees each error of the others.
func AtOnce(n int, run func() error, lost func(error)) (won int) {
	errs := make(chan error, n)
	for range n {
		go func() { errs <- run() }()
	}
	for range n {
		if err := <-errs; err != nil {
			lost(err)
		} else {
			won++
		}
	}
	return won
}
