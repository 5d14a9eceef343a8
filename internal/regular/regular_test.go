package regular

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestOpenRefusesFIFOWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "events.gpurr")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	// No writer ever opens the FIFO: a plain open would block this test forever.
	_, err := Open(fifo)
	if err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
		t.Fatalf("Open(FIFO) = %v, want a refusal naming the FIFO", err)
	}
	if _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "a directory") {
		t.Errorf("ReadFile(dir) = %v, want a refusal naming the directory", err)
	}
}

func TestReadFileThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	if err := os.WriteFile(target, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(link)
	if err != nil || string(b) != "abc" {
		t.Fatalf("ReadFile(link) = %q, %v", b, err)
	}
}
