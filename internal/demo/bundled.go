package demo

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// bundled holds README.md and, in builds made after the recording was
// produced on a GPU machine, rec/: a recording of gpurr demo.
//
//go:embed bundled
var bundled embed.FS

// bundledRecording is the recording's directory inside bundled.
const bundledRecording = "bundled/rec"

// ErrNoBundled is returned by ExtractBundled when this build carries no
// recording.
var ErrNoBundled = errors.New("no bundled recording in this build")

// HasBundled reports whether this build carries a recording of the demo.
func HasBundled() bool {
	st, err := fs.Stat(bundled, bundledRecording)
	return err == nil && st.IsDir()
}

// ExtractBundled writes the bundled recording into dir, which must not
// hold any of its files yet (it is created when missing).
func ExtractBundled(dir string) error {
	if !HasBundled() {
		return ErrNoBundled
	}
	sub, err := fs.Sub(bundled, bundledRecording)
	if err != nil {
		return err
	}
	if err := os.CopyFS(dir, sub); err != nil {
		return fmt.Errorf("extracting the bundled recording to %s: %w", dir, err)
	}
	return nil
}
