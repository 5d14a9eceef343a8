package kernels

import (
	"encoding/binary"
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

// TestMemcapParamSize checks that EncodeBatch matches the parameter size the
// compiler gave gpurr_memcap: the agent and the kernel agree on the layout.
func TestMemcapParamSize(t *testing.T) {
	for _, kernel := range []string{Memcap, MemcapNan} {
		m := regexp.MustCompile(`\.param \.align 8 \.b8 ` + kernel + `_param_0\[(\d+)\]`).FindStringSubmatch(string(MemcapPTX()))
		if m == nil {
			t.Fatalf("hash.ptx has no %s parameter", kernel)
		}
		if want := strconv.Itoa(BatchBytes); m[1] != want {
			t.Fatalf("%s takes %s bytes, BatchBytes = %s", kernel, m[1], want)
		}
	}
	b, err := NewJob(1, 65537).Encode()
	if err != nil || len(b) != BatchBytes {
		t.Fatalf("Encode: %d bytes, %v", len(b), err)
	}
	if _, err := (Job{}).Encode(); err == nil {
		t.Error("a job without regions encoded")
	}
	if _, err := NewJob(0).Encode(); err == nil {
		t.Error("a job without chunks encoded: it would get no block")
	}
	many := make([]uint64, MaxJobRegions/2+1)
	if _, err := EncodeBatch(NewJob(many...), NewJob(many...)); err == nil {
		t.Errorf("a batch of %d regions encoded", 2*len(many))
	}
}

// TestEncodeBatchLayout checks where EncodeBatch puts a second job and its
// regions: after the first job's blocks and regions.
func TestEncodeBatchLayout(t *testing.T) {
	a, c := NewJob(65536*3, 5), NewJob(7)
	a.Seq, c.Seq = 11, 12
	c.Regions[0].Base = 0xabc0
	b, err := EncodeBatch(a, c)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if n, r := le.Uint32(b), le.Uint32(b[4:]); n != 2 || r != 3 {
		t.Fatalf("header: %d jobs, %d regions; want 2, 3", n, r)
	}
	second := b[8+jobBytes:]
	if le.Uint64(second) != 12 || le.Uint32(second[48:]) != 1 || le.Uint32(second[52:]) != 1 ||
		le.Uint32(second[64:]) != 2 || le.Uint32(second[68:]) != 4 {
		t.Fatalf("second job: seq %d, %d regions, %d chunks, first region %d, first block %d; want 12, 1, 1, 2, 4",
			le.Uint64(second), le.Uint32(second[48:]), le.Uint32(second[52:]), le.Uint32(second[64:]), le.Uint32(second[68:]))
	}
	third := b[8+MaxBatchJobs*jobBytes+2*32:]
	if le.Uint64(third) != 0xabc0 || le.Uint64(third[8:]) != 7 || le.Uint32(third[24:]) != 0 {
		t.Fatalf("the second job's region: base %#x, size %d, first chunk %d", le.Uint64(third), le.Uint64(third[8:]), le.Uint32(third[24:]))
	}
}
