package testrec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurr/gpurr/recording"
)

// TestDeterministic: golden outputs depend on the same bytes every time.
func TestDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if err := Write(dir, Good); err != nil {
			t.Fatal(err)
		}
	}
	for rank := range Ranks {
		x, err := os.ReadFile(filepath.Join(a, Name(rank), recording.EventsFile))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, Name(rank), recording.EventsFile))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("rank %d: two writes differ", rank)
		}
	}
}

func TestVariantsWrite(t *testing.T) {
	for _, v := range Variants {
		if err := Write(filepath.Join(t.TempDir(), "rec"), v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	if err := Write(t.TempDir(), "nope"); err == nil {
		t.Error("an unknown variant was accepted")
	}
}

// TestModulesStored: every module a kernel names is in modules/.
func TestModulesStored(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, Good); err != nil {
		t.Fatal(err)
	}
	for _, k := range kernelRecords() {
		if _, err := os.Stat(filepath.Join(dir, recording.ModulesDir, k.ModuleSha256+recording.ModuleExt)); err != nil {
			t.Errorf("kernel %s: %v", k.Name, err)
		}
	}
}
