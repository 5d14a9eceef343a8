package query

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
)

// tempFiles is the files of this process open in dir, by their descriptor's link.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasPrefix(target, dir+"/") {
			out = append(out, fd)
		}
	}
	return out
}

// smallCache makes SQLite write the database's file at once: a small recording's database
// otherwise stays in the page cache.
func smallCache(t *testing.T) {
	t.Helper()
	defer func(n int) { t.Cleanup(func() { cacheKiB = n }) }(cacheKiB)
	cacheKiB = 40
}

// The database's file is in $TMPDIR, 0600, and has no name there from the start: nothing is
// left to remove, however the process ends. Close closes it. SQLite reads TMPDIR as the
// process started with it: the checks run in a process started with the test's.
func TestTempFile(t *testing.T) {
	if os.Getenv(signalEnv) == "check" {
		smallCache(t)
		tmp := os.Getenv("TMPDIR")
		db, err := Load(context.Background(), testrec.Open(t, testrec.Memory))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Query(context.Background(), "SELECT count(*) FROM memory_chunks", &collect{}); err != nil {
			t.Fatal(err)
		}
		open := tempFiles(t, tmp)
		if len(open) == 0 {
			t.Fatalf("no file of the database open in %s", tmp)
		}
		for _, fd := range open {
			st, err := os.Stat(fd)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", fd, st.Mode())
			}
		}
		if names, _ := filepath.Glob(filepath.Join(tmp, "[^T]*")); len(names) != 0 { // Test...: the tests' own
			t.Errorf("%s holds %v while the database is open, want nothing", tmp, names)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if open := tempFiles(t, tmp); len(open) != 0 {
			t.Errorf("after Close, %v still open", open)
		}
		return
	}
	if state, log := inChild(t, "check", t.TempDir()); !state.Success() {
		t.Errorf("%v:\n%s", state, log)
	}
}

// inChild runs the test again in a process of its own, with signalEnv set to what and TMPDIR
// to tmp, and returns how it ended and what it wrote.
func inChild(t *testing.T, what, tmp string) (*os.ProcessState, []byte) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), signalEnv+"="+what, "TMPDIR="+tmp)
	defer testrec.Interruptible()()
	log, _ := cmd.CombinedOutput()
	return cmd.ProcessState, log
}

// A full disk, while Load fills the tables or a statement fills memory_chunks, is a one-line
// error naming the folder and TMPDIR.
func TestDiskFull(t *testing.T) {
	tmp := t.TempDir()
	set := testrec.Open(t, testrec.Memory)
	t.Setenv("TMPDIR", tmp)
	defer func(n int) { maxPages = n }(maxPages)
	check := func(what string, err error) {
		t.Helper()
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), tmp) ||
			!strings.Contains(err.Error(), "TMPDIR") || !strings.Contains(err.Error(), "disk is full") {
			t.Errorf("%s: %v, want one line naming %s and TMPDIR", what, err, tmp)
		}
	}
	maxPages = 3
	_, err := Load(context.Background(), set)
	check("Load", err)
	// Room for the tables, not for the chunk hashes.
	maxPages = 0
	db, err := Load(context.Background(), set)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pages int64
	if err := db.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.Exec("PRAGMA max_page_count=" + strconv.FormatInt(pages, 10)); err != nil {
		t.Fatal(err)
	}
	const count = "SELECT count(*) FROM memory_chunks"
	check("memory_chunks", db.Query(context.Background(), count, &collect{}))
	// The failed fill rolled back: with room again, the table fills as a new database's does.
	if _, err := db.db.Exec("PRAGMA max_page_count=1000000"); err != nil {
		t.Fatal(err)
	}
	var got, want collect
	if err := db.Query(context.Background(), count, &got); err != nil {
		t.Fatal(err)
	}
	fresh, err := Load(context.Background(), set)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Query(context.Background(), count, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.rows, want.rows) || len(want.rows) != 1 {
		t.Errorf("after the full disk: %v, want %v", got.rows, want.rows)
	}
}

// signalEnv names, in the process TestTempInterrupted starts, the signal it sends itself once
// the database is loaded.
const signalEnv = "GPURR_TEST_QUERY_SIGNAL"

// An interrupt (Ctrl-C, SIGTERM) or SIGKILL while the database is open leaves nothing in
// $TMPDIR.
func TestTempInterrupted(t *testing.T) {
	if sig := os.Getenv(signalEnv); sig != "" && sig != "check" {
		smallCache(t)
		db, err := Load(context.Background(), testrec.Open(t, testrec.Good))
		if err != nil {
			os.Exit(97)
		}
		defer db.Close()
		if len(tempFiles(t, os.Getenv("TMPDIR"))) == 0 {
			os.Exit(96) // the database's file is elsewhere
		}
		n, _ := strconv.Atoi(sig)
		syscall.Kill(os.Getpid(), syscall.Signal(n))
		time.Sleep(time.Minute) // the signal ends the process first
		os.Exit(99)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		tmp := t.TempDir()
		state, log := inChild(t, strconv.Itoa(int(sig)), tmp)
		if ws, ok := state.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
			t.Errorf("%v: the process ended with %v, want by the signal:\n%s", sig, state, log)
		}
		// testrec.Open's copy of the recording is under TMPDIR, in a folder of the test's.
		err := filepath.WalkDir(tmp, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.Contains(path, t.Name()) {
				t.Errorf("%v: left %s", sig, path)
			}
			return err
		})
		if err != nil {
			t.Error(err)
		}
	}
}
