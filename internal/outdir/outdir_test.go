package outdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// Undo of a folder Track did not find removes the folders above it that were not there either
// (the command made them with it: -o new/deeper/out), where nothing else came into them; it
// left them behind, so the command did not leave the file system as it found it.
func TestTrackFoldersAbove(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "new", "deeper", "out")
	undo := Track(out)
	if err := os.MkdirAll(filepath.Join(out, "table"), 0o755); err != nil {
		t.Fatal(err)
	}
	undo()
	if entries, err := os.ReadDir(base); err != nil || len(entries) != 0 {
		t.Errorf("after undo, %s holds %v (%v), want nothing", base, entries, err)
	}

	undo = Track(out)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(base, "new", "other")
	if err := os.WriteFile(other, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	undo()
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file another put beside: %v, want it kept", err)
	}
	if _, err := os.Stat(filepath.Join(base, "new", "deeper")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a folder the command made above out: %v, want it gone", err)
	}
}

// What is not a folder is refused and, whatever undo is called after, left as it was: a
// file, a symlink to a file, to nothing, or in a loop, a path through a file.
func TestNotAFolder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, link := range [][2]string{{"to-file", "file"}, {"to-nothing", "nothing"}, {"loop-a", "loop-b"}, {"loop-b", "loop-a"}} {
		if err := os.Symlink(link[1], filepath.Join(dir, link[0])); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"file":       "is a file, not a folder",
		"to-file":    "is a file, not a folder",
		"to-nothing": "is a symlink to nothing",
		"loop-a":     "too many levels of symbolic links",
		"file/sub":   "a folder on its path is a file",
	} {
		path := filepath.Join(dir, name)
		before, _ := os.Lstat(path)
		if err := Check(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%s) = %v, want %q", name, err, want)
		}
		Track(path)()
		after, err := os.Lstat(path)
		if before != nil && (err != nil || after.Mode() != before.Mode()) {
			t.Errorf("%s after undo: %v, want it left as it was", name, err)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep" {
		t.Errorf("file after undo: %q %v", b, err)
	}
	for _, ok := range []string{dir, filepath.Join(dir, "new", "deeper")} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%s) = %v, want nil", ok, err)
		}
	}
}
