package cli

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/demo"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// skipWithGPU skips tests of the no-GPU paths on a machine with a GPU.
func skipWithGPU(t *testing.T) {
	t.Helper()
	if _, err := cuda.Probe(); err == nil {
		t.Skip("a CUDA device is usable here; this test covers machines without one")
	}
}

func TestDemoWithoutGPU(t *testing.T) {
	skipWithGPU(t)
	var stdout, stderr bytes.Buffer
	dir := filepath.Join(t.TempDir(), "demo")
	code := run([]string{"demo", "-o", dir}, &stdout, &stderr)
	out := stdout.String()
	if !strings.HasPrefix(out, "No usable GPU here (") {
		t.Errorf("first line does not say why: %q", out)
	}
	if _, err := cuda.Probe(); !strings.Contains(out, err.Error()) {
		t.Errorf("output lacks the cuda error %q:\n%s", err, out)
	}
	if demo.HasTrain() {
		if code != exitOK || !strings.Contains(out, "PyTorch training loop") || !strings.Contains(out, "$ gpurr diff "+filepath.Join(dir, "a")) {
			t.Errorf("with the bundled training story: exit %d, output:\n%s\nstderr:\n%s", code, out, stderr.String())
		}
		if _, err := os.Stat(filepath.Join(dir, demo.TrainScriptName)); err != nil {
			t.Errorf("the script the lines name was not written out: %v", err)
		}
		return
	}
	if demo.HasStory() {
		if code != exitOK || !strings.Contains(out, "$ gpurr diff "+filepath.Join(dir, "a")) {
			t.Errorf("with the bundled story: exit %d, output:\n%s\nstderr:\n%s", code, out, stderr.String())
		}
		return
	}
	if demo.HasBundled() {
		if code != exitOK || !strings.Contains(out, "gpurr query "+dir) {
			t.Errorf("with a bundled recording: exit %d, output:\n%s\nstderr:\n%s", code, out, stderr.String())
		}
		return
	}
	if code != exitFound {
		t.Errorf("exit %d, want %d", code, exitFound)
	}
	if !strings.Contains(stderr.String(), "no bundled recording in this build") {
		t.Errorf("stderr = %q", stderr.String())
	}
}

func TestDemoWorkloadWithoutGPU(t *testing.T) {
	skipWithGPU(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"demo", "--workload"}, &stdout, &stderr)
	if code != exitFound || !strings.Contains(stderr.String(), "demo workload: no CUDA driver") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestDemoUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"demo", "extra"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("gpurr demo extra: exit %d, want %d", code, exitUsage)
	}
	stdout.Reset()
	run([]string{"demo", "--help"}, &stdout, &stderr)
	if strings.Contains(stdout.String(), "--workload") {
		t.Error("--help shows the hidden --workload flag")
	}
}

// TestDemoOutputNotEmpty: a second gpurr demo -o DIR (the help's example) is refused up front
// as a usage error, before anything is written into DIR, not part way with exit 3.
func TestDemoOutputNotEmpty(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"demo", "-o", dir}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "-o "+dir+" already exists and is not empty") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	if n := strings.Count(stderr.String(), "\n"); n != 1 {
		t.Errorf("stderr has %d lines, want 1: %q", n, stderr.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("demo wrote into the folder it refused: %v", entries)
	}
}

// TestDemoOnGPU runs the whole demo with this test binary standing in for
// gpurr, so it needs the real binary: it is covered by the GPU suite.
func TestDemoOnGPU(t *testing.T) {
	if _, err := cuda.Probe(); err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Skip("needs the gpurr binary and its agent: run bin/gpurr demo on the GPU machine")
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/gpurr-demo-123": "/tmp/gpurr-demo-123",
		"my run":              "'my run'",
		"it's":                `'it'\''s'`,
		"":                    "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWalkStory walks the story through two small recordings made here: each step runs and
// ends as the story expects (diff, nan and verify find what they look for).
func TestWalkStory(t *testing.T) {
	run := func(sum float32) string {
		ls := trainRun(sum, false)
		ls[2].before = ls[2].after
		ls[2].after = append([]byte(nil), ls[2].after...)
		copy(ls[2].after[100*4:], floats(float32(math.NaN())))
		return writeRun(t, "snapshot+nan-scan", ls)
	}
	a, b, work := run(1.5), run(2), t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := walkStory(&stdout, &stderr, a, b, work, false); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"$ gpurr info " + a, "$ gpurr diff " + a + " " + b, "the runs part ways at launch 3",
		"NaN or Inf first after launch 3", "$ gpurr rewind " + a + " --launch 3 --before --region 0 --npy --dtype f32",
		"$ gpurr verify " + b, "gpurr replay " + a + " --launch 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the walk lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "before.npy")); err != nil {
		t.Errorf("rewind wrote no array: %v", err)
	}
}

// A demo that fails puts -o DIR back as it found it, gone or empty, so that the same command
// can run again (demo -o refuses a folder that is not empty).
func TestDemoFailureUndoesOutput(t *testing.T) {
	for _, there := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "demo")
		if there {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		got, release, err := demoDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(got, "a"), 0o700); err != nil {
			t.Fatal(err)
		}
		release(false)
		entries, err := os.ReadDir(dir)
		if there && (err != nil || len(entries) > 0) || !there && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("folder there before: %v; after a failed demo: %v, %v", there, entries, err)
		}
	}
}

// trainStory writes the training story's two runs as the agent would record them (hashes, NaN
// counted as f32), made here: run b's lr is one float32 ulp above run a's, and step 4 makes a
// NaN. They stand in for the recordings made on a GPU (internal/demo/bundled/regen.sh).
func trainStory(t *testing.T) (a, b string) {
	t.Helper()
	write := func(name string, lr float32) string {
		o := testrec.DefaultTrained()
		o.Hash, o.HashSteps, o.LR = true, [2]int{0, 5}, lr
		o.NaNStep, o.NaNLaunch = 4, 1
		dir := filepath.Join(t.TempDir(), name)
		if err := recording.CreateSet(dir, []string{"python", testrec.TrainedScript, name}); err != nil {
			t.Fatal(err)
		}
		if err := testrec.WriteTrained(dir, o); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return write("a", 0.05), write("b", math.Nextafter32(0.05, 1))
}

// TestWalkTrain walks the training story through stand-ins of its recordings: a line per
// launch, diff's decoded learning rate, nan's launch and line, and the commands to see values.
func TestWalkTrain(t *testing.T) {
	a, b := trainStory(t)
	work := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := walkTrain(&stdout, &stderr, a, b, work, "python3"); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"$ gpurr info " + a, "train.py:31 train", "$ gpurr diff " + a + " " + b,
		"the runs part ways at launch 1", "parameter 2 (f32): 0.05 vs 0.050000004",
		"NaN or Inf first after launch 18", "it made the NaN: its inputs were finite",
		"$ gpurr verify " + b, "--snapshot-launches 18 -o " + filepath.Join(work, "a-values") + " -- python3 " + filepath.Join(work, "train.py") + " a",
		"$ gpurr rewind " + filepath.Join(work, "a-values") + " --launch 18 --before --region 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the walk lacks %q:\n%s", want, out)
		}
	}
}

// Without -o, the folder the walk's commands name stays when the demo ends, and its last lines
// say where: before, it was removed, and every command the walk printed failed after it.
func TestDemoKeepsItsFolder(t *testing.T) {
	skipWithGPU(t)
	if !demo.HasTrain() && !demo.HasStory() {
		t.Skip("this build carries no recordings of a story to walk through")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"demo"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout.String(), stderr.String())
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "gpurr-demo-*"))
	if len(dirs) != 1 {
		t.Fatalf("folders in $TMPDIR: %v, want the demo's", dirs)
	}
	out := stdout.String()
	if !strings.Contains(out, "$ gpurr diff "+filepath.Join(dirs[0], "a")) || !strings.Contains(out, "The recordings stay in "+dirs[0]) {
		t.Errorf("the walk does not name %s at its end:\n%s", dirs[0], out)
	}
	if code, _, errs := runCLI("diff", filepath.Join(dirs[0], "a"), filepath.Join(dirs[0], "b")); code != exitFound {
		t.Errorf("gpurr diff as the walk printed it, after it ended: exit %d, %s", code, errs)
	}
}

// torchPython takes $PYTHON, and says why it cannot record the training loop with it: no such
// program, no torch, torch without a GPU, another failure (its last stderr line).
func TestTorchPython(t *testing.T) {
	dir := t.TempDir()
	fake := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for python, want := range map[string]string{
		fake("ok", "exit 0"): "",
		fake("notorch", `echo "ModuleNotFoundError: No module named 'torch'" >&2; exit 1`): "does not import torch: set PYTHON to one that does",
		fake("nogpu", "exit 3"): "imports torch, which sees no GPU",
		fake("broken", `printf 'Traceback\nImportError: libcudart.so.13: cannot open\033]0;x\a\n' >&2; exit 1`): `exit status 1: ImportError: libcudart.so.13: cannot open\x1b]0;x\a`,
		filepath.Join(dir, "missing"): "no " + filepath.Join(dir, "missing") + ": set PYTHON",
	} {
		t.Setenv("PYTHON", python)
		got, err := torchPython(t.Context())
		switch {
		case want == "" && (err != nil || got != python):
			t.Errorf("PYTHON=%s: %q, %v", python, got, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("PYTHON=%s: %v, want %q", python, err, want)
		}
	}
}
