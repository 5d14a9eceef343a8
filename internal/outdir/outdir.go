// Package outdir undoes a command's output folder when the command fails part way or is
// interrupted: the verbs that write a folder of files (export, extract) leave it as
// they found it, gone or as it was, so that the same command can run again instead of being
// refused because the folder is not empty. Undoable does the same for an interrupt (Ctrl-C)
// of any output, the temporary file behind every -o included.
package outdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// TempPrefix begins the name of what a command writes beside its output, to rename into
// place when whole (a file, a folder), followed by os.CreateTemp's random digits. It is short
// and of a fixed length, so that any name the file system takes for the output can be
// written: a name made from the output's own would pass the file system's limit of 255.
const TempPrefix = ".gpurr-"

// Check refuses dir as a command's output folder when something other than a folder is
// there: a file, a symlink to nothing or in a loop, a path through a file. A folder, or
// nothing (the command makes it), passes; whether a folder that holds entries may be
// written into is the command's to say.
func Check(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("%s is a file, not a folder: name a new or empty folder", dir)
	case err == nil:
		if _, err := os.ReadDir(dir); err != nil {
			return fmt.Errorf("%s: %v: name a new or empty folder", dir, plain(err))
		}
		return nil
	}
	lst, lerr := os.Lstat(dir)
	switch {
	case errors.Is(lerr, fs.ErrNotExist):
		return nil // nothing there
	case lerr == nil && lst.Mode()&fs.ModeSymlink == 0:
		return nil // made since Stat looked: the command meets it as it is now
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s is a symlink to nothing: remove it or name a new or empty folder", dir)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s: a folder on its path is a file: name a new or empty folder", dir)
	}
	return fmt.Errorf("%s: %v: name a new or empty folder", dir, plain(err))
}

// plain is err without the path an *fs.PathError adds: the messages name the path.
func plain(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Track notes what dir holds now and returns undo, which puts dir back that way: it removes
// dir when nothing was there, with the folders above it that were not there either (the
// command makes them with dir) where they are empty, and otherwise every entry that was not
// there. Entries that were there are never touched, so undo is safe whatever the command
// found: a file, a symlink (dangling, or in a loop) or a folder it cannot list where dir
// should be is left alone, as the command that fails on it found it.
func Track(dir string) (undo func()) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		var above []string // the folders above dir that are not there, nearest first
		for p := filepath.Dir(dir); p != filepath.Dir(p); p = filepath.Dir(p) {
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				break
			}
			above = append(above, p)
		}
		return func() {
			os.RemoveAll(dir)
			for _, p := range above {
				if os.Remove(p) != nil {
					break // only when empty: never what another command put there meanwhile
				}
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return func() {}
	}
	before := make(map[string]bool, len(entries))
	for _, e := range entries {
		before[e.Name()] = true
	}
	return func() {
		now, _ := os.ReadDir(dir)
		for _, e := range now {
			if !before[e.Name()] {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
}
