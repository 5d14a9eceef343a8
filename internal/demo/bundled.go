package demo

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// bundled holds README.md and, in builds made after they were recorded on a
// GPU machine: train.zip, the training story's two runs (bundled/regen.sh);
// rec/, a recording of the plain workload, and story/a and story/b, the Go
// program's story (scripts/gen-testdata).
//
//go:embed bundled
var bundled embed.FS

const (
	bundledRecording = "bundled/rec"
	bundledStory     = "bundled/story"
)

// StoryRuns names the story's runs, as directories of an extracted story.
var StoryRuns = [2]string{"a", "b"}

// ErrNoBundled is returned by ExtractBundled and ExtractStory when this
// build carries no such recording.
var ErrNoBundled = errors.New("no bundled recording in this build")

func hasDir(name string) bool {
	st, err := fs.Stat(bundled, name)
	return err == nil && st.IsDir()
}

// HasBundled reports whether this build carries a recording of the demo.
func HasBundled() bool { return hasDir(bundledRecording) }

// HasStory reports whether this build carries the recordings of the story.
func HasStory() bool {
	return hasDir(bundledStory+"/"+StoryRuns[0]) && hasDir(bundledStory+"/"+StoryRuns[1])
}

// ExtractBundled writes the bundled recording into dir, which must not
// hold any of its files yet (it is created when missing).
func ExtractBundled(dir string) error { return extract(HasBundled(), bundledRecording, dir) }

// ExtractStory writes the story's recordings into dir/a and dir/b.
func ExtractStory(dir string) error { return extract(HasStory(), bundledStory, dir) }

func extract(present bool, name, dir string) error {
	if !present {
		return ErrNoBundled
	}
	sub, err := fs.Sub(bundled, name)
	if err != nil {
		return err
	}
	if err := os.CopyFS(dir, sub); err != nil {
		return fmt.Errorf("extracting the bundled recording to %s: %w", dir, err)
	}
	return nil
}
