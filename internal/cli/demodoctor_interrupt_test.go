package cli

import (
	"bytes"
	"io"
	"os"
	"os/exec"
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
	if !demo.HasStory() {
		t.Skip("this build carries no recordings of the story to walk through")
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
		log, err := cmd.CombinedOutput()
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
	if !demo.HasStory() {
		t.Skip("this build carries no recordings of the story to walk through")
	}
	testrec.InterruptPartWay(t, func(out string, stop func()) {
		run([]string{"demo", "-o", out}, &stopOn{text: demoStopsAt, stop: stop}, io.Discard)
	})
}
