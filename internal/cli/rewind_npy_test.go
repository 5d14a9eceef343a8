package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
