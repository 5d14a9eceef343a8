package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/demo"
	"github.com/gpurr/gpurr/internal/testrec"
)

// demoInterruptEnv names, in the process TestDemoInterrupted starts, the signal to stop
// gpurr demo with.
const demoInterruptEnv = "GPURR_TEST_DEMO_SIGNAL"

// demoStopsAt is what demo prints once the story's recordings are in its folder and trace
// has written its timeline there.
const demoStopsAt = "$ gpurr diff"

// stopOn is demo's stdout: when demo prints text, stop runs (it ends the process).
type stopOn struct {
	text string
	stop func()
	seen []byte
}

func (w *stopOn) Write(p []byte) (int, error) {
	w.seen = append(w.seen, p...)
	if bytes.Contains(w.seen, []byte(w.text)) {
		w.stop()
	}
	return len(p), nil
}

// signalSelf sends sig to this process and waits for it to end the process.
func signalSelf(sig syscall.Signal) func() {
	return func() {
		syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Minute)
		os.Exit(99)
	}
}

// gpurr demo stopped by Ctrl-C, SIGTERM or SIGHUP half way through its walk removes the
// temporary folder it extracted the story into (with the timeline trace wrote there) and
// exits with 128 + the signal's number. Before, the folder stayed in $TMPDIR.
func TestDemoInterrupted(t *testing.T) {
	skipWithGPU(t)
	if !demo.HasTrain() && !demo.HasStory() {
		t.Skip("this build carries no recordings of a story to walk through")
	}
	if sig := os.Getenv(demoInterruptEnv); sig != "" {
		n, _ := strconv.Atoi(sig)
		run([]string{"demo"}, &stopOn{text: demoStopsAt, stop: signalSelf(syscall.Signal(n))}, io.Discard)
		os.Exit(98) // demo never printed demoStopsAt
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		tmp := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), demoInterruptEnv+"="+strconv.Itoa(int(sig)), "TMPDIR="+tmp)
		done := testrec.Interruptible()
		log, err := cmd.CombinedOutput()
		done()
		if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) {
			t.Errorf("%v: exit %d (%v), want %d:\n%s", sig, code, err, 128+int(sig), log)
		}
		entries, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			// The test binary's TestMain (testscript) makes testscript-main* at its start,
			// and an interrupt ends it before it removes that.
			if !strings.HasPrefix(e.Name(), "testscript-main") {
				t.Errorf("%v: demo left %s in $TMPDIR", sig, e.Name())
			}
		}
	}
}

// gpurr demo -o DIR interrupted half way puts DIR back as it found it, gone or empty, so that
// the same command can run again (demo -o refuses a folder that is not empty).
func TestDemoOutputInterrupted(t *testing.T) {
	skipWithGPU(t)
	if !demo.HasTrain() && !demo.HasStory() {
		t.Skip("this build carries no recordings of a story to walk through")
	}
	testrec.InterruptPartWay(t, func(out string, stop func()) {
		run([]string{"demo", "-o", out}, &stopOn{text: demoStopsAt, stop: stop}, io.Discard)
	})
}

// recordInterruptEnv names, in the process TestRecordWorkloadInterrupted starts, the program
// that stands for gpurr record.
const recordInterruptEnv = "GPURR_TEST_RECORD_STANDIN"

// fakeRecord stands for gpurr record -o DIR ... in recordWorkload: it makes DIR, says so on
// stdout, and when signalled goes on writing into DIR for a while, as gpurr record does while
// the workload and the agent finish the recording.
const fakeRecord = `#!/bin/sh
dir=$3
mkdir -p "$dir"
trap 'sleep 0.5; mkdir -p "$dir"; echo end > "$dir/end"; exit 1' INT TERM HUP
echo recording
while :; do sleep 0.1; done
`

// demo and doctor interrupted (Ctrl-C reaches the whole foreground process group) while gpurr
// record runs their workload stop it and wait for it to end before they remove their folder:
// nothing is left in $TMPDIR once all have ended. Before, the folder was removed at once and
// gpurr record, still finishing, wrote into it again.
func TestRecordWorkloadInterrupted(t *testing.T) {
	if fake := os.Getenv(recordInterruptEnv); fake != "" {
		tmp, _, err := tempDir("gpurr-demo-")
		if err != nil {
			panic(err)
		}
		ctrlC := func() { syscall.Kill(-syscall.Getpgrp(), syscall.SIGINT) }
		recordWorkload(context.Background(), fake, filepath.Join(tmp, "a"), nil, "a", &stopOn{text: "recording", stop: ctrlC}, io.Discard)
		os.Exit(98) // the interrupt ends the process first
	}
	fake := filepath.Join(t.TempDir(), "record")
	if err := os.WriteFile(fake, []byte(fakeRecord), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), recordInterruptEnv+"="+fake, "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a process group of its own, as a shell's job
	done := testrec.Interruptible()
	log, err := cmd.CombinedOutput()
	done()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit %d (%v), want 130:\n%s", code, err, log)
	}
	// Wait for every process of the group, the stand-in included, to end.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-cmd.Process.Pid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatal("the stand-in for gpurr record still runs 10 s after the interrupt")
		}
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "testscript-main") { // as in TestDemoInterrupted
			t.Errorf("left in $TMPDIR: %s", e.Name())
		}
	}
}
