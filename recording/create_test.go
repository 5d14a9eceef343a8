package recording

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// A process directory CreateNew made can be written by another process before CreateNew starts
// its events file there: one whose gpurr makes its directory with Create (MkdirAll), an agent
// of before CreateNew sharing the recording folder. CreateNew leaves that process's events file
// as it is and takes the next name; it removed the directory, with the other's recording.
func TestCreateNewLeavesWhatAnotherStarted(t *testing.T) {
	setDir := t.TempDir()
	taken := filepath.Join(setDir, "box-1")
	other := []byte("the other process's recording")
	mkdir = func(dir string, perm fs.FileMode) error {
		err := os.Mkdir(dir, perm)
		if err == nil && dir == taken {
			err = os.WriteFile(filepath.Join(dir, EventsFile), other, 0o600)
		}
		return err
	}
	defer func() { mkdir = os.Mkdir }()
	w, err := CreateNew(setDir, "box-1", &pb.Batch{Process: &pb.Process{Hostname: "box", Pid: 1}})
	if b, err := os.ReadFile(filepath.Join(taken, EventsFile)); err != nil || string(b) != string(other) {
		t.Errorf("the other process's events file: %q, %v; want it as it was", b, err)
	}
	if err != nil {
		t.Fatalf("CreateNew: %v, want box-1+2 made", err)
	}
	defer w.Close()
	if w.Dir() != taken+"+2" {
		t.Errorf("CreateNew made %s, want %s+2", w.Dir(), taken)
	}
}

// Create and CreateNew leave no events file when its first frame cannot be written (here a
// process description proto.Marshal refuses): Create of the same name left a file of a header
// and no frame, and refused the next Create as a recording already there.
func TestCreateFailureLeavesNoEventsFile(t *testing.T) {
	setDir := t.TempDir()
	bad := &pb.Batch{Process: &pb.Process{Hostname: "\xff"}} // not UTF-8
	if _, err := Create(setDir, "p", bad); err == nil {
		t.Fatal("Create with an unwritable first frame succeeded")
	}
	if _, err := os.Stat(filepath.Join(setDir, "p", EventsFile)); err == nil {
		t.Error("Create left an events file after failing")
	}
	w, err := Create(setDir, "p", &pb.Batch{Process: &pb.Process{Hostname: "box"}})
	if err != nil {
		t.Fatalf("Create after a failed Create: %v", err)
	}
	w.Close()
	if _, err := CreateNew(setDir, "q", bad); err == nil {
		t.Fatal("CreateNew with an unwritable first frame succeeded")
	}
	if _, err := os.Lstat(filepath.Join(setDir, "q")); err == nil {
		t.Error("CreateNew left its directory after failing")
	}
}

// CreateSet makes a recording only of a folder that holds nothing but its recording.json once
// that is made: another command (export --parquet, which claims a folder with a file of its own
// and writes it whole) could write into the folder between CreateSet's look and its claim, and
// the recording was then made in with the other's files.
func TestCreateSetLooksAgain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	other := filepath.Join(dir, ".gpurr-export-in-progress")
	mkdirAll = func(path string, perm fs.FileMode) error {
		err := os.MkdirAll(path, perm)
		if err == nil {
			err = os.WriteFile(other, nil, 0o600)
		}
		return err
	}
	defer func() { mkdirAll = os.MkdirAll }()
	if err := CreateSet(dir, []string{"python", "train.py"}); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("CreateSet of a folder another command wrote into meanwhile: %v, want it refused as not empty", err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 || entries[0].Name() != filepath.Base(other) {
		t.Errorf("the folder after the refused CreateSet: %v %v, want only the other command's file", entries, err)
	}
}
