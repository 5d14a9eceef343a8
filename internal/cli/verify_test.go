package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

// writeManifest runs gpurr manifest on rec and returns the manifest's path.
func writeManifest(t *testing.T, rec string) string {
	t.Helper()
	m := filepath.Join(t.TempDir(), "m.json")
	code, _, errs := runCLI("manifest", rec, "-o", m)
	if code != 0 {
		t.Fatalf("manifest %s: exit %d: %s", rec, code, errs)
	}
	return m
}

func TestManifestVerify(t *testing.T) {
	good := writeRun(t, "snapshot", trainRun(1.5, false))
	m := writeManifest(t, good)

	code, out, errs := runCLI("verify", writeRun(t, "hash", trainRun(1.5, false)), "--manifest", m)
	expectOutput(t, "same run", code, 0, out, errs, "box-7: matches the manifest: 4 launches compared after they ran (4 matched)")

	// A run whose scatter-add came out otherwise, with an extra warm-up.
	bad := writeRun(t, "snapshot", trainRun(1.5000001, true))
	code, out, errs = runCLI("verify", bad, "--manifest", m)
	expectOutput(t, "differing run", code, 1, out, errs,
		"box-7: launch 4 differs from the manifest (its launch 3): the memory after it differs",
		"kernel   scatter_add_kernel (stream 0)",
		"at       train.py:30 step",
		"region 0 (192.0 KiB, parameter offset 0): 1 of 3 chunks differ, the first at byte 0x20000 (chunk 2)",
		"first differing byte 0x20008",
		"expected 0x20000  00 00 00 00 00 00 00 00 00 00 c0 3f 00 00 00 00",
		"actual   0x20000  00 00 00 00 00 00 00 00 01 00 c0 3f 00 00 00 00",
		"4 launches matched, 4 compared; 1 of them differ from the manifest, this one first",
		"1 launch only in the recording:\n    1 warmup_kernel")

	// The reference recording moved: no expected bytes, and verify says where to point it.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(good, moved); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI("verify", bad, "--manifest", m)
	expectOutput(t, "reference moved", code, 1, out, errs, "is not in the reference recording", "pass --reference")
	code, out, errs = runCLI("verify", bad, "--manifest", m, "--reference", moved, "--window", "16")
	expectOutput(t, "--reference", code, 1, out, errs, "expected 0x20000  00 00 00 00 00 00 00 00 00 00 c0 3f 00 00 00 00\n    actual ")
	code, out, errs = runCLI("verify", bad, "--manifest", m, "--reference", filepath.Join(moved, "box-7"))
	expectOutput(t, "--reference to the process", code, 1, out, errs, "expected 0x20000  00 00 00 00 00 00 00 00 00 00 c0 3f 00 00 00 00")

	// Hash-only run: no bytes, and verify says which mode shows them.
	code, out, errs = runCLI("verify", writeRun(t, "hash", trainRun(2, false)), "--manifest", m)
	expectOutput(t, "hash-only run", code, 1, out, errs, "the recording has hashes only after this launch: record with --memory snapshot --snapshot-launches 3 to see the bytes")

	// --continue lists every launch that differs.
	ls := trainRun(2, false)
	ls[0].after = floats(1, 2, 9)
	code, out, errs = runCLI("verify", writeRun(t, "hash", ls), "--manifest", m, "--continue")
	expectOutput(t, "--continue", code, 1, out, errs,
		"box-7: launch 1 differs from the manifest (its launch 1)",
		"launch 3 differs from the manifest (its launch 3)\n  kernel   scatter_add_kernel (stream 0)\n  at       train.py:30 step\n",
		"2 of them differ from the manifest, all listed above")
	if strings.Count(out, "differs from the manifest") != 2 {
		t.Errorf("--continue: want 2 launches listed:\n%s", out)
	}
}

// TestVerifyLeavesOutLibraryMemory: two runs whose only difference is in memory NCCL made for
// itself match by default, saying how much was left out, and differ with --include-library.
func TestVerifyLeavesOutLibraryMemory(t *testing.T) {
	run := func(nccl uint64) string {
		o := testrec.DefaultTrained()
		o.Hash, o.HashSteps, o.NCCL = true, [2]int{0, 5}, nccl
		dir := filepath.Join(t.TempDir(), "run")
		if err := testrec.WriteTrained(dir, o); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	m := writeManifest(t, run(1))
	other := run(2)
	code, out, errs := runCLI("verify", other, "--manifest", m)
	expectOutput(t, "NCCL's memory left out", code, 0, out, errs, "matches the manifest: 24 launches compared",
		"left out 6 region states of NCCL's own memory (it differs from run to run by design; --include-library compares it)")
	code, out, errs = runCLI("verify", other, "--manifest", m, "--include-library")
	expectOutput(t, "--include-library", code, 1, out, errs, "launch 1 differs from the manifest")
	code, out, errs = runCLI("verify", other, "--manifest", m, "--format", "json")
	expectOutput(t, "json", code, 0, out, errs, `"library_left_out": {`, `"nccl": 6`)
}

func TestVerifyBadInput(t *testing.T) {
	rec := writeRun(t, "hash", trainRun(1, false))
	m := writeManifest(t, rec)
	noMem := writeRun(t, "", trainRun(1, false))
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	v2 := write("v2.json", strings.Replace(string(b), `"version":1`, `"version":2`, 1))
	cut := write("cut.json", string(b[:len(b)/2]))
	expectUsageErrors(t, []usageCase{
		{[]string{"manifest", noMem, "-o", filepath.Join(dir, "x.json")}, "recorded without memory capture: record with --memory hash (or --memory snapshot)"},
		{[]string{"manifest", rec}, "-o FILE is required"},
		{[]string{"verify", noMem, "--manifest", m}, "recorded without memory capture: record with --memory hash"},
		{[]string{"verify", rec}, "--manifest FILE is required"},
		{[]string{"verify", rec, "--manifest", v2}, "version 2; this gpurr reads version 1 manifests"},
		{[]string{"verify", rec, "--manifest", cut}, "cut short?"},
		{[]string{"verify", rec, "--manifest", write("other.json", `{"format":"other","version":1,"processes":[]}`)}, "not a gpurr manifest"},
		{[]string{"verify", rec, "--manifest", write("garbage.json", "\x00\x01 binary")}, "not a gpurr manifest"},
		{[]string{"verify", rec, "--manifest", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"verify", rec, "--manifest", m, "--window", "-1"}, "take a count of 0 or more"},
	})
	if _, err := os.Stat(filepath.Join(dir, "x.json")); err == nil {
		t.Errorf("a failed manifest left its file")
	}

	// A manifest made from another command line: a warning, then verify
	// aligns what it can.
	renamed := write("renamed.json", strings.Replace(string(b), `"argv":["python","train.py"]`, `"argv":["python","eval.py"]`, 1))
	code, out, errs := runCLI("verify", rec, "--manifest", renamed)
	if code != 0 || !strings.Contains(errs, `warning: box-7 ran "python train.py", box-7 ran "python eval.py": different programs? aligning what can be aligned`) ||
		!strings.Contains(out, "matches the manifest: 4 launches compared") {
		t.Errorf("other command line: exit %d, out %q, err %q", code, out, errs)
	}

	// A manifest of another program: nothing aligns.
	other := writeRun(t, "hash", []fakeLaunch{{kernel: 3, line: 1, after: floats(0)}})
	code, out, errs = runCLI("verify", other, "--manifest", m)
	if code != 2 || !strings.Contains(errs, "no launch matched with the manifest has hashes on both sides (0 matched)") {
		t.Errorf("other program: exit %d, out %q, err %q", code, out, errs)
	}
}

// A rank whose recording is damaged mid-file does not hide the others, as in diff: they are
// verified, and the command ends with exit 2 naming it. Before, verify stopped at it, and a
// later rank that differs from the manifest went unreported.
func TestVerifyDamagedRank(t *testing.T) {
	m := writeManifest(t, rankedJob(t, []int32{0, 1, 2}, []float32{1.5, 1.5, 1.5}))
	bad := rankedJob(t, []int32{0, 1, 2}, []float32{1.5, 1.5, 2})
	damageEvents(t, filepath.Join(bad, "node1-11"))
	code, out, errs := runCLI("verify", bad, "--manifest", m)
	expectOutput(t, "damaged rank 1", code, exitUsage, out, errs,
		"node0-11: matches the manifest", "node1-11: not verified: ", "node2-11: launch 3 differs from the manifest (its launch 3)")
	if want := "gpurr: verify: 1 process could not be read (node1-11); the others are verified above\n"; errs != want {
		t.Errorf("damaged rank 1: stderr %q; want %q", errs, want)
	}
}
