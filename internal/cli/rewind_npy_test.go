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
