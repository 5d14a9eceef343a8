package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/manifest"
	"github.com/gpurr/gpurr/recording"
)

// A rank whose events file cannot be read is treated alike whether it is empty (killed before
// its first write: Open cannot read it) or has a damaged frame (found while reading it).
// manifest leaves it out and names it with why, in one warning line, and writes the others;
// verify lists it as not verified, verifies the others and exits 2 naming it. Before, an empty
// rank was left out of a manifest with only Open's warning, and verify against a manifest
// that promised it exited 0; a damaged one made manifest refuse the whole recording.
func TestManifestVerifyUnreadableRank(t *testing.T) {
	harms := map[string]struct {
		harm func(t *testing.T, procDir string)
		why  string
	}{
		"empty": {func(t *testing.T, procDir string) {
			if err := os.Truncate(filepath.Join(procDir, recording.EventsFile), 0); err != nil {
				t.Fatal(err)
			}
		}, "empty file (the program was killed before its first write)"},
		"damaged frame": {damageEvents, "checksum mismatch (corrupt file)"},
	}
	good := writeManifest(t, rankedJob(t, []int32{0, 1, 2}, []float32{1.5, 1.5, 1.5}))
	for name, h := range harms {
		rec := rankedJob(t, []int32{0, 1, 2}, []float32{1.5, 1.5, 1.5})
		h.harm(t, filepath.Join(rec, "node1-11"))
		events := filepath.Join(rec, "node1-11", recording.EventsFile)

		m := filepath.Join(t.TempDir(), "m.json")
		code, out, errs := runCLI("manifest", rec, "-o", m)
		wantWarning := "gpurr: manifest: warning: left out node1-11, which cannot be read: " + events + ": "
		wantSummary := "manifest: wrote 8 launches of 2 processes to " + m + " (8 with hashes, 0 of them with their bytes in " + rec + "); left out 1 process (node1-11)\n"
		// The summary, then the warnings (held until the end of the command).
		lines := strings.SplitAfter(errs, "\n")
		if code != 0 || out != "" || len(lines) != 3 || lines[0] != wantSummary || !strings.HasPrefix(lines[1], wantWarning) ||
			!strings.Contains(lines[1], h.why) || !strings.HasSuffix(lines[1], "; the manifest promises nothing for it\n") {
			t.Errorf("%s: manifest: exit %d, stdout %q, stderr:\n%s\nwant %q, then one warning %q...%q", name, code, out, errs, wantSummary, wantWarning, h.why)
		}
		mf, err := manifest.Open(m, manifest.ReadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var procs []string
		for _, e := range mf.Processes {
			procs = append(procs, e.Process.Name)
		}
		mf.Close()
		if strings.Join(procs, " ") != "node0-11 node2-11" {
			t.Errorf("%s: the manifest holds %q, want node0-11 node2-11", name, procs)
		}

		// Rank 2 differs: verify goes past the rank it cannot read and reports it.
		bad := rankedJob(t, []int32{0, 1, 2}, []float32{1.5, 1.5, 2})
		h.harm(t, filepath.Join(bad, "node1-11"))
		code, out, errs = runCLI("verify", bad, "--manifest", good)
		expectOutput(t, name+": verify", code, exitUsage, out, errs,
			"node1-11: not verified: "+filepath.Join(bad, "node1-11", recording.EventsFile)+": ",
			"node0-11: matches the manifest", "node2-11: launch 3 differs from the manifest (its launch 3)")
		if !strings.Contains(out, h.why) || strings.Count(out, "not verified") != 1 {
			t.Errorf("%s: verify: want node1-11 not verified once, for %q:\n%s", name, h.why, out)
		}
		if want := "gpurr: verify: 1 process could not be read (node1-11); the others are verified above\n"; !strings.HasSuffix(errs, want) ||
			strings.Contains(errs, "reading the other processes") {
			t.Errorf("%s: verify: stderr %q; want it to end %q, without open's warning", name, errs, want)
		}
	}
}

// A recording none of whose processes can be read makes no manifest, and verify of one whose
// only readable process cannot be read through verifies nothing: both exit 2 and say why.
func TestManifestVerifyNothingReadable(t *testing.T) {
	rec := rankedJob(t, []int32{0, 1}, []float32{1.5, 1.5})
	good := writeManifest(t, rec)
	if err := os.Truncate(filepath.Join(rec, "node0-11", recording.EventsFile), 0); err != nil {
		t.Fatal(err)
	}
	damageEvents(t, filepath.Join(rec, "node1-11"))
	m := filepath.Join(t.TempDir(), "m.json")
	code, out, errs := runCLI("manifest", rec, "-o", m)
	if code != exitUsage || !strings.HasPrefix(errs, "gpurr: manifest: "+filepath.Join(rec, "node1-11", recording.EventsFile)+": ") {
		t.Errorf("manifest: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if _, err := os.Stat(m); err == nil {
		t.Errorf("manifest of nothing readable wrote %s", m)
	}
	code, out, errs = runCLI("verify", rec, "--manifest", good)
	expectOutput(t, "verify", code, exitUsage, out, errs, "node0-11: not verified: ", "node1-11: not verified: ")
	if want := "gpurr: verify: 2 processes could not be read (node0-11, node1-11); no other process was verified\n"; !strings.HasSuffix(errs, want) {
		t.Errorf("verify: stderr %q; want it to end %q", errs, want)
	}
}
