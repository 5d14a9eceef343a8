package kernels

import (
	"regexp"
	"testing"
)

// TestDemoPTXEntries checks that the embedded PTX declares each kernel the
// package names, for a target the driver can JIT on Ampere and newer.
func TestDemoPTXEntries(t *testing.T) {
	ptx := string(DemoPTX())
	for _, name := range []string{DemoFill, DemoSaxpy, DemoReduce} {
		if !regexp.MustCompile(`\.visible\s+\.entry\s+` + name + `\(`).MatchString(ptx) {
			t.Errorf("demo.ptx has no .entry %s", name)
		}
	}
	m := regexp.MustCompile(`(?m)^\.target\s+(sm_\d+)`).FindStringSubmatch(ptx)
	if m == nil || m[1] != "sm_80" {
		t.Errorf("demo.ptx target = %v, want sm_80 (so it JITs on every GPU gpurr supports)", m)
	}
	if !regexp.MustCompile(`(?m)^\.address_size\s+64`).MatchString(ptx) {
		t.Error("demo.ptx is not .address_size 64")
	}
}

func TestDemoPTXIsACopy(t *testing.T) {
	a := DemoPTX()
	a[0] ^= 0xFF
	if b := DemoPTX(); b[0] == a[0] {
		t.Error("DemoPTX returned the embedded bytes, not a copy")
	}
}
