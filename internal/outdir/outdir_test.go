package outdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Undo removes a folder Track did not find, and from one it found only what came after.
func TestTrack(t *testing.T) {
	made := filepath.Join(t.TempDir(), "out")
	undo := Track(made)
	if err := os.MkdirAll(filepath.Join(made, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	undo()
	if _, err := os.Stat(made); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a folder the command made: %v, want it gone", err)
	}

	there := t.TempDir()
	keep := filepath.Join(there, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	undo = Track(there)
	if err := os.WriteFile(filepath.Join(there, "new"), []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	undo()
	entries, err := os.ReadDir(there)
	if err != nil || len(entries) != 1 || entries[0].Name() != "keep" {
		t.Errorf("a folder that was there: %v %v, want only keep", entries, err)
	}
}
