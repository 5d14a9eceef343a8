package agentpath

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/cupti/locate/locatetest"
)

func agent(t *testing.T, path string) string {
	locatetest.Write(t, path, locatetest.Library{Soname: FileName, Exports: []string{EntryPoint}})
	return path
}

func TestBesideExecutable(t *testing.T) {
	root := t.TempDir()
	exe := filepath.Join(root, "bin", "gpurr")
	installed := agent(t, filepath.Join(root, "lib", "gpurr", FileName))
	r := SearchFor(exe, "")
	if r.Path != installed {
		t.Fatalf("installed layout: found %q, want %q (%+v)", r.Path, installed, r.Looked)
	}
	beside := agent(t, filepath.Join(root, "bin", FileName))
	if r := SearchFor(exe, ""); r.Path != beside || len(r.Looked) != 1 {
		t.Fatalf("beside: found %q after %d places, want %q first", r.Path, len(r.Looked), beside)
	}
}

func TestOverride(t *testing.T) {
	root := t.TempDir()
	exe := filepath.Join(root, "bin", "gpurr")
	agent(t, filepath.Join(root, "bin", FileName))
	custom := agent(t, filepath.Join(root, "custom.so"))
	if r := SearchFor(exe, custom); r.Path != custom {
		t.Errorf("override: found %q", r.Path)
	}
	r := SearchFor(exe, filepath.Join(root, "missing.so"))
	if r.Path != "" {
		t.Errorf("bad override fell back to %q", r.Path)
	}
	if msg := r.Err().Error(); !strings.Contains(msg, "$GPURR_AGENT") || !strings.Contains(msg, "missing.so") {
		t.Errorf("Err() = %q", msg)
	}
}

func TestNotAnAgent(t *testing.T) {
	root := t.TempDir()
	exe := filepath.Join(root, "gpurr")
	locatetest.Write(t, filepath.Join(root, FileName), locatetest.Library{Exports: []string{"main"}})
	r := SearchFor(exe, "")
	if r.Path != "" {
		t.Fatalf("accepted a library without %s", EntryPoint)
	}
	if err := r.Looked[0].Err; err == nil || !strings.Contains(err.Error(), EntryPoint) {
		t.Errorf("error = %v", err)
	}
	if msg := r.Err().Error(); !strings.Contains(msg, "libgpurr.so") {
		t.Errorf("Err() = %q", msg)
	}
}
