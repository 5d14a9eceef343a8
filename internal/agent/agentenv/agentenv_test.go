package agentenv

import (
	"math"
	"reflect"
	"testing"
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
	ok := MemoryConfig{Mode: "snapshot", SnapshotKernels: "gemm", SnapshotLaunches: "1-:10", OnFull: "drop-oldest", StagingBytes: 1 << 20}
	if err := ok.Validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
	for _, bad := range []MemoryConfig{
		{Mode: "full"}, {OnFull: "wait"}, {SnapshotKernels: "("}, {SnapshotLaunches: "x"}, {StagingBytes: 100},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
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
