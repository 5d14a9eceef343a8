package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

func TestRewindNPY(t *testing.T) {
	rec := writeRun(t, "snapshot", trainRun(1.5, false))
	out := filepath.Join(t.TempDir(), "x.npy")
	code, _, errs := runCLI("rewind", rec, "--launch", "1", "--after", "--region", "0", "--npy", "--dtype", "f32", "--shape", "1,3", "-o", out)
	if code != 0 {
		t.Fatalf("rewind --npy: exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "\x93NUMPY\x01\x00") || !bytes.Contains(b, []byte("'shape': (1, 3), }")) ||
		!bytes.HasSuffix(b, floats(1, 2, 3)) || (len(b)-12)%64 != 0 {
		t.Errorf("npy file %q", b)
	}
	base := []string{"rewind", rec, "--launch", "1", "--after", "--region", "0", "-o", out}
	expectUsageErrors(t, []usageCase{
		{append(base, "--npy"), "--npy needs --dtype"},
		{append(base, "--dtype", "f32"), "--dtype and --shape go with --npy"},
		{append(base, "--npy", "--dtype", "f32", "--shape", "2,2"), "shape [2 2] holds 4 elements, the data has 3 f32 elements"},
		{append(base, "--npy", "--dtype", "f32", "--shape", "x"), "--shape \"x\": want sizes like 8,1024"},
	})
}

func TestRewindAddressOutsideRegions(t *testing.T) {
	// writeRun puts launch 2's one region of 8 bytes at 0x70200000.
	rec := writeRun(t, "snapshot", trainRun(1.5, false))
	out := filepath.Join(t.TempDir(), "x.bin")
	base := []string{"rewind", rec, "--launch", "2", "--after", "-o", out, "--addr"}
	expectUsageErrors(t, []usageCase{
		{append(base, "0x70200010"), "0x70200010 is outside every region of launch 2: nearest, region 0 [0x70200000, 0x70200008) ends 8 bytes below it (gpurr query REC"},
		{append(base, "0x701ffff0"), "nearest, region 0 [0x70200000, 0x70200008) starts 16 bytes above it"},
	})
	code, _, errs := runCLI(append(base, "0x70200004")...)
	if code != 0 {
		t.Errorf("an address inside the region: exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.Equal(b, floats(5)) {
		t.Errorf("rewind --addr inside: %v %v, want the region's second float", b, err)
	}
}

// Conflicting or meaningless rewind flags are named for what they are.
func TestRewindFlagConflicts(t *testing.T) {
	rec := realRecordings[0].path
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--launch", "2", "--after", "--before", "--region", "0"}, "--before and --after: say one"},
		{[]string{"--launch", "0", "--after", "--region", "0"}, `invalid argument "0" for "--launch" flag: launches are numbered from 1`},
		{[]string{"--launch", "2", "--after", "--region", "0", "--addr", "0x1"}, "--region and --addr: say one"},
		{[]string{"--launch", "2", "--after", "--region", "-2"}, `invalid argument "-2" for "--region" flag: want a whole number, 0 or more`},
		{[]string{"--launch", "2", "--after", "--region", "0", "--len", "10"}, "--len goes with --addr"},
		// Hex, but past 64 bits: it was called no hex address.
		{[]string{"--launch", "2", "--after", "--addr", "0x1ffffffffffffffff"}, "--addr 0x1ffffffffffffffff is wider than 64 bits: no device address is"},
		{[]string{"--after", "--region", "0"}, "--launch is required"},
	} {
		args := append([]string{"rewind", rec, "-o", filepath.Join(t.TempDir(), "x.bin")}, c.args...)
		code, _, stderr := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if code, _, stderr := runCLI("extract", rec, "-o", "-"); code != exitUsage || !strings.Contains(stderr, "extract writes a folder, not a stream") {
		t.Errorf("extract -o -: exit %d, stderr %q", code, stderr)
	}
}

// A torn state is written all the same, with one warning line that names what tore it.
func TestRewindTornWarns(t *testing.T) {
	rec := t.TempDir()
	want, err := testrec.WriteReplayableTorn(rec)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "y.bin")
	code, _, errs := runCLI("rewind", rec, "--launch", "2", "--after", "--region", "1", "-o", out)
	warning := "gpurr: rewind: warning: the state after launch 2 is torn: stream 5's kernel saxpy_gridstride (launch 4) ran while it was taken; its bytes may be part from before, part from after their writes\n"
	if code != 0 || strings.Count(errs, "gpurr: ") != 1 || !strings.Contains(errs, warning) {
		t.Errorf("exit %d, stderr %q; want 0 and %q", code, errs, warning)
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.Equal(b, want.YAfter) {
		t.Errorf("wrote %d bytes (%v), want the state after launch 2", len(b), err)
	}
	code, _, errs = runCLI("rewind", rec, "--launch", "2", "--before", "--region", "1", "-o", out, "--force")
	if code != 0 || strings.Contains(errs, "warning") {
		t.Errorf("the state before launch 2, taken alone: exit %d, stderr %q", code, errs)
	}
}
