package agentenv

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseRanges(t *testing.T) {
	got, err := ParseRanges(" 1-100, 250 ,900-,5-:10,7-20:3")
	if err != nil {
		t.Fatal(err)
	}
	want := []Range{{1, 100, 1}, {250, 250, 1}, {900, math.MaxUint64, 1}, {5, math.MaxUint64, 10}, {7, 20, 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseRanges = %v, want %v", got, want)
	}
	if r, err := ParseRanges(""); r != nil || err != nil {
		t.Errorf(`ParseRanges("") = %v, %v; want every launch (nil)`, r, err)
	}
	for _, bad := range []string{"0", "a", "5-3", "1-x", "1-:0", "1-:y", ","} {
		if _, err := ParseRanges(bad); err == nil {
			t.Errorf("ParseRanges(%q) accepted", bad)
		}
	}
}

func TestMemoryConfigValidate(t *testing.T) {
	ok := MemoryConfig{Mode: "snapshot", SnapshotKernels: "gemm", SnapshotLaunches: "1-:10", OnFull: "drop-oldest", StagingBytes: 1 << 20, NanScan: "bf16, f32"}
	for _, good := range []MemoryConfig{ok, {Mode: "digest", DigestAll: true}, {Mode: "hash", HashSteps: "3", DigestAll: true}} {
		if err := good.Validate(); err != nil {
			t.Errorf("%+v: %v", good, err)
		}
	}
	for _, bad := range []MemoryConfig{
		{Mode: "full"}, {OnFull: "wait"}, {SnapshotKernels: "("}, {SnapshotLaunches: "x"}, {StagingBytes: 100},
		{Mode: "hash", NanScan: "f32,i32"}, {Mode: "hash", NanScan: "f32,"}, {Mode: "off", NanScan: "f32"}, {NanScan: "f16"},
		{Mode: "hash", DigestAll: true}, {Mode: "snapshot", DigestAll: true},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestParseNanScan checks the kernel's type bits and that recordings list
// the types in one order, whatever order the user gave.
func TestParseNanScan(t *testing.T) {
	mask, types, err := ParseNanScan(" bf16,f32,bf16")
	if err != nil || mask != 0b1001 || !slices.Equal(types, []string{"f32", "bf16"}) {
		t.Errorf("ParseNanScan(bf16,f32,bf16) = %b %v %v, want 1001 [f32 bf16]", mask, types, err)
	}
	if _, _, err := ParseNanScan("f32,i8"); err == nil || !strings.Contains(err.Error(), `"i8" is not a type the GPU counts NaN as (want f32, f64, f16, bf16)`) {
		t.Errorf("ParseNanScan(f32,i8): %v", err)
	}
	if mask, types, err := ParseNanScan(""); mask != 0 || types != nil || err != nil {
		t.Errorf("ParseNanScan(\"\") = %b %v %v", mask, types, err)
	}
}

func TestVarsCarryMemory(t *testing.T) {
	v := Vars(Config{Memory: MemoryConfig{Mode: "hash", OnFull: "backpressure"}})
	found := false
	for _, kv := range v {
		found = found || kv == Memory+"=hash"
	}
	if !found {
		t.Errorf("Vars has no %s=hash: %v", Memory, v)
	}
	for _, kv := range Vars(Config{}) {
		if len(kv) > len(Memory) && kv[:len(Memory)+1] == Memory+"=" {
			t.Errorf("memory off, yet Vars sets %s", kv)
		}
	}
}

func TestParseSample(t *testing.T) {
	on, every, err := ParseSample(DefaultSample)
	if err != nil || on != 20*time.Millisecond || every != 200*time.Millisecond {
		t.Errorf("ParseSample(%q) = %v, %v, %v", DefaultSample, on, every, err)
	}
	for _, bad := range []string{"", "20ms", "20ms/", "/200ms", "200ms/20ms", "20ms/20ms", "0s/1s", "1ms/10ms", "x/y"} {
		if _, _, err := ParseSample(bad); err == nil {
			t.Errorf("ParseSample(%q) accepted", bad)
		}
	}
	vars := strings.Join(Vars(Config{GPUTiming: true, GPUTimingSample: "10ms/1s"}), " ")
	if !strings.Contains(vars, GPUTiming+"=sample") || !strings.Contains(vars, GPUTimingSample+"=10ms/1s") {
		t.Errorf("sampled timing's variables: %s", vars)
	}
	if vars := strings.Join(Vars(Config{GPUTiming: true}), " "); strings.Contains(vars, GPUTimingSample) {
		t.Errorf("timing every kernel, yet %s", vars)
	}
}

func TestParseProbe(t *testing.T) {
	s, err := ParseProbe("triton_.*:entry,exit")
	if err != nil || !s.Kernels.MatchString("triton_poi_0") || s.Classes != "" {
		t.Errorf("%+v, %v", s, err)
	}
	// The expression may hold colons; the counted classes may too (op:REGEX).
	s, err = ParseProbe("a:b|c:entry,exit,global-store,op:^ld")
	if err != nil || s.Kernels.String() != "a:b|c" || s.Classes != "global-store,op:^ld" || len(s.Count.Classes) != 1 || len(s.Count.Patterns) != 1 {
		t.Errorf("%+v, %v", s, err)
	}
	for _, bad := range []string{"triton_.*", "x:entry", "x:entry,exitx", "(:entry,exit", "x:entry,exit,nosuchclass"} {
		if _, err := ParseProbe(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestTritonCacheDirsFindsInductorsPerDeviceCaches(t *testing.T) {
	base := t.TempDir()
	t.Setenv("TRITON_CACHE_DIR", filepath.Join(base, "plain"))
	t.Setenv("TORCHINDUCTOR_CACHE_DIR", filepath.Join(base, "inductor"))
	for _, d := range []string{"inductor/triton/0", "inductor/triton/1"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	got := TritonCacheDirs()
	want := []string{filepath.Join(base, "plain"), filepath.Join(base, "inductor/triton/0"), filepath.Join(base, "inductor/triton/1")}
	if !slices.Equal(got, want) {
		t.Errorf("TritonCacheDirs() = %v, want %v", got, want)
	}
}
