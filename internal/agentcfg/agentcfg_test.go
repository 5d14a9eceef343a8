package agentcfg

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpurr/gpurr/recording"
)

// lookupIn looks a variable up in NAME=value entries as a child's environment holds them: the
// last entry of a name wins.
func lookupIn(env []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, kv := range slices.Backward(env) {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v, true
			}
		}
		return "", false
	}
}

// found is what record finds rather than takes from flags.
func found(c Config) Config {
	c.Out, c.Agent, c.CUPTI = "/runs/r1", "/opt/gpurr/lib/libgpurr.so", "/usr/local/cuda/lib64/libcupti.so.13"
	return c
}

// roundTrips are valid configurations that, together, set every field to a value other than
// its default.
func roundTrips() []Config {
	sampled := found(Default())
	sampled.Kernels, sampled.Callstack, sampled.RingBytes = "gemm|softmax", CallstackPython, 2<<20
	sampled.GPUTiming, sampled.GPUTimingSample, sampled.GPUTimingSteps = TimingSample, "10ms/1s", ""
	sampled.StepEvery, sampled.Probe = 7, "triton_.*:entry,exit,global-store"
	sampled.Memory = MemoryConfig{Mode: recording.MemorySnapshot, SnapshotKernels: "gemm", SnapshotLaunches: "1-100,250,900-",
		OnFull: OnFullDropOldest, StagingBytes: 4 << 20, FlightRecorder: 50, NanScan: "f32,bf16", WriteSets: WriteSetsProved, DigestEvery: 1}

	hung := found(Default())
	hung.Callstack, hung.GPUTiming, hung.HangTimeout, hung.HangKill, hung.StepRange = CallstackNative, TimingSerial, 90*time.Second, true, "^train_step"
	hung.Memory.Mode, hung.Memory.WriteSets, hung.Memory.DeferHashes = recording.MemoryHash, WriteSetsLearned, DeferStream
	hung.Memory.HashSteps, hung.Memory.DigestEvery, hung.Memory.DigestAll = "3-5", 4, true

	digest := found(Default())
	digest.Callstack, digest.GPUTiming = CallstackOff, TimingOff
	digest.Memory.Mode, digest.Memory.WriteSets = recording.MemoryDigest, WriteSetsAll // no NaN scan: given empty

	beside := found(Default())
	beside.Memory.Mode, beside.Memory.DeferHashes, beside.Memory.NanScan = recording.MemoryHash, DeferBeside, "bf16"
	beside.GPUTimingSteps = "2/5"
	cases := []Config{found(Default()), sampled, hung, digest, beside}
	for i := range cases {
		cases[i].ModeDefaults(true) // as Decode does; no NaN scan is given one
	}
	return cases
}

// TestEncodeDecode holds the codec to its promise, Decode(Encode(c)) == c, on configurations
// that set every field: a field that Encode or Decode leaves out fails here, and one that no
// case sets fails the coverage check.
func TestEncodeDecode(t *testing.T) {
	cases := roundTrips()
	for _, c := range cases {
		if err := c.Validate(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		// What the environment held before does not count.
		stale := []string{Memory + "=snapshot", HangKill + "=on", NanScan + "=f64", GPUTimingSample + "=1s/2s"}
		got, err := Decode(lookupIn(append(stale, Encode(c)...)))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("Decode(Encode(c)) = %+v, %v\nwant %+v", got, err, c)
		}
	}
	var check func(path string, v func(Config) reflect.Value)
	check = func(path string, v func(Config) reflect.Value) {
		typ := v(Default()).Type()
		if typ.Kind() == reflect.Struct {
			for i := range typ.NumField() {
				check(path+"."+typ.Field(i).Name, func(c Config) reflect.Value { return v(c).Field(i) })
			}
			return
		}
		for _, c := range cases {
			if !v(c).Equal(v(Default())) {
				return
			}
		}
		t.Errorf("no round trip sets %s to a value other than its default", path)
	}
	check("Config", func(c Config) reflect.Value { return reflect.ValueOf(c) })
}

// TestDecodeDefaults: a variable left out is the flag left out. internal/cli's
// TestRecordConfigIsDecodes holds record's side to the same defaults.
func TestDecodeDefaults(t *testing.T) {
	env := []string{CUPTI + "=/c/libcupti.so"}
	want := Default()
	want.CUPTI = "/c/libcupti.so"
	want.ModeDefaults(false)
	if got, err := Decode(lookupIn(env)); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Decode(%v) = %+v, %v\nwant Default() %+v", env, got, err, want)
	}
	// Empty is unset too, but for the NaN scan, where empty is none.
	if got, err := Decode(lookupIn(append(env, Callstack+"=", RingBytes+"=", Memory+"=", NanScan+"="))); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("empty variables: %+v, %v\nwant Default() %+v", got, err, want)
	}
	for _, tc := range []struct {
		env  []string
		want func(*Config)
	}{
		{[]string{Memory + "=digest"}, func(c *Config) { c.Memory.Mode, c.Memory.NanScan = recording.MemoryDigest, "f32" }},
		{[]string{Memory + "=digest", NanScan + "="}, func(c *Config) { c.Memory.Mode = recording.MemoryDigest }},
		{[]string{GPUTiming + "=sample"}, func(c *Config) { c.GPUTiming, c.GPUTimingSample, c.GPUTimingSteps = TimingSample, DefaultSample, "" }},
		{[]string{GPUTiming + "=on"}, func(c *Config) { c.GPUTiming, c.GPUTimingSample, c.GPUTimingSteps = TimingOn, "", "" }},
		{[]string{Memory + "=hash", DeferHashes + "=on"}, func(c *Config) { c.Memory.Mode, c.Memory.DeferHashes = recording.MemoryHash, DeferBeside }},
	} {
		w := want
		tc.want(&w)
		if got, err := Decode(lookupIn(append(env, tc.env...))); err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("Decode(%v) = %+v, %v\nwant %+v", tc.env, got, err, w)
		}
	}
}

// TestDecodeErrors: each error names the variables at fault.
func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "GPURR_CUPTI is not set (run the program through gpurr record)"},
		{[]string{RingBytes + "=64MiB"}, `GPURR_RING_BYTES="64MiB": want a byte count`},
		{[]string{RingBytes + "=1024"}, "GPURR_RING_BYTES: --ring-bytes 1024: want at least 1 MiB"},
		{[]string{StepEvery + "=99999999999"}, `GPURR_STEP_EVERY="99999999999": want a launch count`},
		{[]string{StepEvery + "=2", StepRange + "=^step"}, "GPURR_STEP_EVERY, GPURR_STEP_RANGE: --step-every and --step-range each say what a training step is: give one"},
		{[]string{HangKill + "=yes"}, `GPURR_HANG_KILL="yes": want on or off`},
		{[]string{HangTimeout + "=soon"}, `GPURR_HANG_TIMEOUT="soon": want a duration such as 60s`},
		{[]string{GPUTiming + "=maybe"}, "GPURR_GPU_TIMING: --gpu-timing=maybe: want steps, on, serial, sample or off"},
		{[]string{GPUTiming + "=sample", GPUTimingSample + "=5ms"}, `GPURR_GPU_TIMING_SAMPLE: --gpu-timing-sample "5ms": want ON/EVERY`},
		{[]string{GPUTiming + "=on", GPUTimingSample + "=1s/2s"}, "GPURR_GPU_TIMING_SAMPLE, GPURR_GPU_TIMING: --gpu-timing-sample goes with --gpu-timing=sample or steps"},
		{[]string{GPUTiming + "=sample", GPUTimingSteps + "=3/10"}, "GPURR_GPU_TIMING_STEPS, GPURR_GPU_TIMING: --gpu-timing-steps goes with --gpu-timing=steps"},
		{[]string{GPUTimingSteps + "=three"}, `GPURR_GPU_TIMING_STEPS: --gpu-timing-steps "three": want FIRST/EVERY, such as 3/10`},
		{[]string{GPUTimingSteps + "=0/0"}, `GPURR_GPU_TIMING_STEPS, GPURR_GPU_TIMING: --gpu-timing-steps "0/0" times no step: --gpu-timing=false times none`},
		{[]string{Memory + "=hash", SnapshotKernels + "=gemm"}, "GPURR_SNAPSHOT_KERNELS, GPURR_SNAPSHOT_LAUNCHES, GPURR_FLIGHT_RECORDER, GPURR_MEMORY: --snapshot-kernels"},
		{[]string{Memory + "=hash", DeferHashes + "=later"}, "GPURR_DEFER_HASHES: --defer-hashes=later: want beside, stream or off"},
	} {
		_, err := Decode(lookupIn(append(tc.env[:len(tc.env):len(tc.env)], cuptiUnless(tc.env == nil)...)))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Decode(%v): %v, want %s", tc.env, err, tc.want)
		}
	}
}

func cuptiUnless(none bool) []string {
	if none {
		return nil
	}
	return []string{CUPTI + "=/c/libcupti.so"}
}

func TestValidate(t *testing.T) {
	with := func(f func(*Config)) Config {
		c := Default()
		f(&c)
		return c
	}
	for _, good := range []Config{
		with(func(c *Config) {
			c.Memory = MemoryConfig{Mode: recording.MemorySnapshot, SnapshotKernels: "gemm", SnapshotLaunches: "1-:10", OnFull: OnFullDropOldest,
				StagingBytes: 1 << 20, NanScan: "bf16, f32", WriteSets: WriteSetsProved}
		}),
		with(func(c *Config) { c.Memory.Mode, c.Memory.DigestAll = recording.MemoryDigest, true }),
		with(func(c *Config) {
			c.Memory.Mode, c.Memory.HashSteps, c.Memory.DigestAll = recording.MemoryHash, "3", true
		}),
		with(func(c *Config) { c.HangTimeout, c.HangKill, c.GPUTiming = time.Minute, true, TimingOn }),
		with(func(c *Config) { c.GPUTimingSample, c.GPUTimingSteps = DefaultSample, "0/4" }),
	} {
		if err := good.Validate(); err != nil {
			t.Errorf("%+v: %v", good, err)
		}
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Memory.Mode = "full" },
		func(c *Config) { c.Memory.Mode = "" },
		func(c *Config) { c.Memory.OnFull = "wait" },
		func(c *Config) { c.Memory.SnapshotKernels = "(" },
		func(c *Config) { c.Memory.SnapshotLaunches = "x" },
		func(c *Config) { c.Memory.StagingBytes = 100 },
		func(c *Config) { c.Memory.StagingBytes = 0 },
		func(c *Config) { c.Memory.Mode, c.Memory.NanScan = recording.MemoryHash, "f32,i32" },
		func(c *Config) { c.Memory.Mode, c.Memory.NanScan = recording.MemoryHash, "f32," },
		func(c *Config) { c.Memory.NanScan = "f32" },
		func(c *Config) { c.Memory.NanScan = "f16" },
		func(c *Config) { c.Memory.Mode, c.Memory.DigestAll = recording.MemoryHash, true },
		func(c *Config) { c.Memory.Mode, c.Memory.DigestAll = recording.MemorySnapshot, true },
		func(c *Config) { c.Memory.Mode, c.Memory.DigestEvery = recording.MemorySnapshot, 4 },
		func(c *Config) { c.Memory.HashSteps = "3" },
		func(c *Config) { c.Memory.Mode, c.Memory.HashSteps = recording.MemoryHash, "5-3" },
		func(c *Config) { c.Memory.Mode, c.Memory.WriteSets = recording.MemoryHash, "some" },
		func(c *Config) { c.Memory.Mode, c.Memory.FlightRecorder = recording.MemoryHash, 10 },
		func(c *Config) { c.Memory.DeferHashes = DeferBeside },
		func(c *Config) {
			c.Memory.Mode, c.Memory.WriteSets, c.Memory.DeferHashes = recording.MemoryHash, WriteSetsAll, DeferBeside
		},
		func(c *Config) { c.Callstack = "bogus" },
		func(c *Config) { c.Kernels = "(" },
		func(c *Config) { c.Probe = "triton_.*" },
		func(c *Config) { c.StepRange = "step (" },
		func(c *Config) { c.StepRange, c.StepEvery = "step", 3 },
		func(c *Config) { c.RingBytes = 1024 },
		func(c *Config) { c.GPUTiming = "maybe" },
		func(c *Config) { c.GPUTiming, c.GPUTimingSample = TimingSample, "200ms/20ms" },
		func(c *Config) { c.GPUTiming, c.GPUTimingSample = TimingOn, DefaultSample },
		func(c *Config) { c.GPUTiming, c.GPUTimingSteps = TimingSample, DefaultTimingSteps },
		func(c *Config) { c.GPUTimingSteps = "3" },
		func(c *Config) { c.HangTimeout = time.Minute }, // the default times a sample of kernels
		func(c *Config) { c.HangTimeout = -time.Second },
		func(c *Config) { c.HangTimeout, c.GPUTiming = time.Minute, TimingOff },
		func(c *Config) {
			c.HangTimeout, c.GPUTiming, c.GPUTimingSample = time.Minute, TimingSample, DefaultSample
		},
		func(c *Config) { c.HangKill = true },
	} {
		if c := with(bad); c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

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
