package demo

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The training story: gpurr demo records TrainScript, a small PyTorch training loop, twice
// (runs TrainRuns), on a machine with a GPU and a Python that imports torch; elsewhere it walks
// through the recordings of the same two runs that ship in the binary (bundled/train.zip,
// made on a GPU by bundled/regen.sh).

// TrainScript is the story's program: python train.py a|b. Run b's learning rate is one
// float32 ulp above run a's, and at a marked step the loss takes the log of a prediction that
// may be negative.
//
//go:embed train.py
var TrainScript []byte

// TrainScriptName is the name the script is written under, in the folder its runs are
// recorded in: the recordings' lines name it.
const TrainScriptName = "train.py"

// TrainRecordFlags are gpurr record's flags for the story's runs: hashes of every launch's
// memory (what diff, manifest and verify compare) and NaN counted as f32 on the GPU (what nan
// reads). Small tensors: each run records in seconds.
var TrainRecordFlags = []string{"--memory", "hash", "--nan-scan", "f32"}

// TrainNaNStep is the training step (from 0) whose loss takes the log of negative numbers:
// train.py's NAN_STEP.
const TrainNaNStep = 4

// TrainRuns names the story's runs: the script's argument, and the recordings' folders.
var TrainRuns = StoryRuns

const bundledTrain = "bundled/train.zip"

// WriteTrainScript writes TrainScript into dir (made if it is not there: gpurr demo -o DIR
// records into a folder that does not exist yet) as TrainScriptName and returns its path.
func WriteTrainScript(dir string) (string, error) {
	path := filepath.Join(dir, TrainScriptName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("writing the demo's script: %w", err)
	}
	if err := os.WriteFile(path, TrainScript, 0o644); err != nil {
		return "", fmt.Errorf("writing the demo's script: %w", err)
	}
	return path, nil
}

// HasTrain reports whether this build carries recordings of the training story.
func HasTrain() bool {
	st, err := fs.Stat(bundled, bundledTrain)
	return err == nil && st.Mode().IsRegular()
}

// ExtractTrain writes the training story's recordings into dir/a and dir/b, which must not
// exist yet (dir is created when missing).
func ExtractTrain(dir string) error {
	if !HasTrain() {
		return ErrNoBundled
	}
	return extractZip(bundled, bundledTrain, dir)
}

// extractZip writes the files of the zip archive name in fsys into dir. Names that would leave
// dir, links and other special files are refused (zip.Reader's file system view and
// os.CopyFS see to that).
func extractZip(fsys fs.FS, name, dir string) error {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("reading the bundled recordings %s: %w", name, err)
	}
	if err := os.CopyFS(dir, zr); err != nil {
		return fmt.Errorf("extracting the bundled recordings to %s: %w", dir, err)
	}
	return nil
}
