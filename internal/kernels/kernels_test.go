package kernels

import (
	"regexp"
	"strconv"
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

// TestMemcapParamSize checks that Job.Encode matches the parameter size the
// compiler gave gpurr_memcap: the agent and the kernel agree on the layout.
func TestMemcapParamSize(t *testing.T) {
	for _, kernel := range []string{Memcap, MemcapNan} {
		m := regexp.MustCompile(`\.param \.align 8 \.b8 ` + kernel + `_param_0\[(\d+)\]`).FindStringSubmatch(string(MemcapPTX()))
		if m == nil {
			t.Fatalf("hash.ptx has no %s parameter", kernel)
		}
		if want := strconv.Itoa(JobBytes); m[1] != want {
			t.Fatalf("%s takes %s bytes, JobBytes = %s", kernel, m[1], want)
		}
	}
	b, err := NewJob(1, 65537).Encode()
	if err != nil || len(b) != JobBytes {
		t.Fatalf("Encode: %d bytes, %v", len(b), err)
	}
	if _, err := (Job{}).Encode(); err == nil {
		t.Error("a job without regions encoded")
	}
}
