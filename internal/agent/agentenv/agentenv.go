// Package agentenv is the contract between `gpurr record` and the agent it
// injects: the environment variables that configure the agent. It is pure Go
// so the CLI can use it without linking the agent.
package agentenv

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/kernels"
)

// Variables read by the agent in the recorded process.
const (
	Out       = "GPURR_OUT"        // recording directory; the agent is idle without it
	CUPTI     = "GPURR_CUPTI"      // path of the libcupti.so to load
	Kernels   = "GPURR_KERNELS"    // regular expression: record only matching kernel names
	Callstack = "GPURR_CALLSTACK"  // auto | python | native | off
	RingBytes = "GPURR_RING_BYTES" // size of the record ring (bytes)
	GPUTiming = "GPURR_GPU_TIMING" // on | serial | sample | off: kernel start/end times from CUPTI activity
	// GPUTimingSample is sampled timing's window, "ON/EVERY" (ParseSample): kernels launched in
	// the first ON of every EVERY are timed.
	GPUTimingSample = "GPURR_GPU_TIMING_SAMPLE"
	// HangTimeout is how long a launch may stay unfinished on the GPU before the agent reports
	// it (a Go duration, "" for never); HangKill ("on") then ends the program.
	HangTimeout = "GPURR_HANG_TIMEOUT"
	HangKill    = "GPURR_HANG_KILL"
	// Memory capture (docs/memory.md).
	Memory           = "GPURR_MEMORY"            // off | hash | snapshot | digest
	SnapshotKernels  = "GPURR_SNAPSHOT_KERNELS"  // regular expression over mangled kernel names
	SnapshotLaunches = "GPURR_SNAPSHOT_LAUNCHES" // launch ranges, e.g. "1-100,250,900-"
	OnFull           = "GPURR_ON_FULL"           // backpressure | drop-oldest
	StagingBytes     = "GPURR_STAGING_BYTES"     // pinned staging ring for snapshots
	FlightRecorder   = "GPURR_FLIGHT_RECORDER"   // keep only the last N launches' snapshots
	NanScan          = "GPURR_NAN_SCAN"          // types to count NaN and Inf as on the GPU, e.g. "f32,bf16"
	WriteSets        = "GPURR_WRITE_SETS"        // proved | learned | all: which regions hash mode may skip
	DeferHashes      = "GPURR_DEFER_HASHES"      // beside (or on) / stream: hash kernels wait and hash several launches at once, beside the program or on its streams
	HashSteps        = "GPURR_HASH_STEPS"        // "K" or "K-L": hash mode hashes the launches of these training steps only, with step digests elsewhere
	DigestEvery      = "GPURR_DIGEST_EVERY"      // N: step digests of every Nth step only
	DigestAll        = "GPURR_DIGEST_ALL"        // on: step digests hash every live allocation of the program's, not only what the optimizer reached
	// StepEvery is --step-every N: training steps are runs of N launch calls (programs without
	// optimizer steps), for step digests, --hash-steps and every reader.
	StepEvery = "GPURR_STEP_EVERY"
	// StepRange is a regular expression over NVTX range messages, kept in the recording
	// (Process.step_range): readers number training steps by the ranges it matches.
	StepRange = "GPURR_STEP_RANGE"
	// Probe is --probe, "REGEX:entry,exit[,CLASSES]" (ParseProbe): launches of kernels whose
	// name matches run a copy with per-CTA entry and exit probes (and counts of CLASSES).
	Probe = "GPURR_PROBE"
	// Injection is read by the CUDA driver, which loads the named library
	// into every process that initializes CUDA and calls its
	// InitializeInjection.
	Injection = "CUDA_INJECTION64_PATH"
	// NVTXInjection is read by NVTX, which loads the named library at the
	// program's first NVTX call and calls its InitializeInjectionNvtx2.
	// Naming the agent's library sends NVTX calls straight to the agent.
	NVTXInjection = "NVTX_INJECTION64_PATH"
)

// Config is what record hands to the agent.
type Config struct {
	Out, Agent, CUPTI, Kernels, Callstack string
	RingBytes                             uint64
	GPUTiming                             bool
	GPUTimingSerial                       bool   // with GPUTiming: CUPTI's serial kernel mode
	GPUTimingSample                       string // with GPUTiming: time kernels in windows, "ON/EVERY"; "" for all
	Memory                                MemoryConfig
	HangTimeout                           time.Duration // 0: no watchdog
	HangKill                              bool
	StepRange                             string // NVTX range messages that are training steps; "" for optimizer steps
	StepEvery                             uint32 // training steps are runs of this many launch calls; 0 for optimizer steps
	Probe                                 string // --probe, "" for none
}

// MemoryConfig is the memory capture asked for; the zero value is off.
type MemoryConfig struct {
	Mode             string // "", "off", "hash" or "snapshot"
	SnapshotKernels  string
	SnapshotLaunches string
	OnFull           string
	StagingBytes     uint64
	FlightRecorder   uint64
	NanScan          string // comma-separated kernels.NanScanTypes, "" for none
	WriteSets        string // "", "proved", "learned" or "all" (WriteSetModes)
	DeferHashes      string // "", "beside" or "stream" (DeferModes): hash mode with write sets, one hash kernel for several launches (docs/memory.md)
	HashSteps        string // hash mode: "K" or "K-L", the training steps whose launches are hashed (ParseSteps); "" for all
	DigestEvery      uint32 // step digests of every Nth step only (steps N-1, 2N-1, ...); 0 or 1 for every step
	DigestAll        bool   // step digests hash every live allocation of the program's (a loss, a batch), not only what the optimizer reached
}

// MemoryModes are the --memory choices.
var MemoryModes = map[string]string{
	"off":      "no memory capture",
	"hash":     "a hash of every region after every launch (what diff, verify and nan compare)",
	"snapshot": "the bytes of the selected launches' regions before and after them (rewind, replay)",
	"digest":   "a hash of the program's memory at each training step boundary only: cheap enough to leave on",
}

// Digests reports whether the mode takes step digests: digest mode, and hash mode restricted
// to some steps (the others get digests).
func (c MemoryConfig) Digests() bool {
	return c.Mode == "digest" || (c.Mode == "hash" && c.HashSteps != "")
}

// ParseSteps reads --hash-steps, "K" or "K-L": training steps K to L, inclusive, from 0.
func ParseSteps(s string) (lo, hi uint32, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	x, err := strconv.ParseUint(a, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("%q: want a step K or a range K-L (steps count from 0)", s)
	}
	y := x
	if isRange {
		if y, err = strconv.ParseUint(b, 10, 32); err != nil {
			return 0, 0, fmt.Errorf("%q: want a step K or a range K-L (steps count from 0)", s)
		}
		if y < x {
			return 0, 0, fmt.Errorf("%q ends before it starts", s)
		}
	}
	return uint32(x), uint32(y), nil
}

// DeferModes are the --defer-hashes choices: where a batch of deferred hash jobs runs.
var DeferModes = map[string]string{
	"beside": "on a stream of gpurr's own beside each program stream, which waits for it only before it writes what is in flight (the default of a bare --defer-hashes)",
	"stream": "on the program's stream, where each launch's own hash kernel would have run: fewer driver calls than beside, no overlap",
}

// DeferMode is the DeferModes key an environment value names: "on" is "beside"; "" when off
// or unknown.
func DeferMode(v string) string {
	if v == "on" {
		return "beside"
	}
	if _, ok := DeferModes[v]; ok {
		return v
	}
	return ""
}

// WriteSetModes are the --write-sets choices: which regions of a launch hash
// mode may leave unhashed, carrying the state of the last launch that hashed
// them (docs/memory.md, Write sets).
var WriteSetModes = map[string]string{
	"proved":  "skip regions the kernel's PTX proves it cannot store to (exact; the default)",
	"learned": "also skip regions the kernel's earlier launches never changed, re-checked every Nth launch",
	"all":     "hash every region after every launch",
}

// Validate checks c the way the agent will, so record can refuse bad flags
// before the program starts.
func (c MemoryConfig) Validate() error {
	if _, ok := MemoryModes[c.Mode]; !ok && c.Mode != "" {
		return fmt.Errorf("memory mode %q: want off, hash, snapshot or digest", c.Mode)
	}
	if c.DigestEvery > 1 && !c.Digests() {
		return fmt.Errorf("digest-every needs step digests: memory mode digest, or hash with hash-steps")
	}
	if c.DigestAll && !c.Digests() {
		return fmt.Errorf("digest-all needs step digests: memory mode digest, or hash with hash-steps")
	}
	if c.HashSteps != "" {
		if c.Mode != "hash" {
			return fmt.Errorf("hash-steps needs memory mode hash: it says which steps' launches are hashed")
		}
		if _, _, err := ParseSteps(c.HashSteps); err != nil {
			return fmt.Errorf("hash-steps %v", err)
		}
	}
	switch c.OnFull {
	case "", "backpressure", "drop-oldest":
	default:
		return fmt.Errorf("on-full %q: want backpressure or drop-oldest", c.OnFull)
	}
	if c.SnapshotKernels != "" {
		if _, err := regexp.Compile(c.SnapshotKernels); err != nil {
			return fmt.Errorf("snapshot-kernels: %v", err)
		}
	}
	if _, err := ParseRanges(c.SnapshotLaunches); err != nil {
		return fmt.Errorf("snapshot-launches: %v", err)
	}
	if _, _, err := ParseNanScan(c.NanScan); err != nil {
		return err
	}
	if c.NanScan != "" && (c.Mode == "" || c.Mode == "off") {
		return fmt.Errorf("nan-scan needs memory mode hash, snapshot or digest: the GPU counts NaN while it hashes")
	}
	if _, ok := WriteSetModes[c.WriteSets]; !ok && c.WriteSets != "" {
		return fmt.Errorf("write-sets %q: want proved, learned or all", c.WriteSets)
	}
	if c.StagingBytes != 0 && c.StagingBytes < 1<<20 {
		return fmt.Errorf("staging-bytes %d: want at least 1 MiB", c.StagingBytes)
	}
	return nil
}

// ParseNanScan parses a --nan-scan list such as "f32,bf16" into the memory
// kernel's type bits and the type names in the order recordings list them.
func ParseNanScan(s string) (mask uint32, types []string, err error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil, nil
	}
	names := strings.Split(s, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	if mask, types, err = kernels.NanScanMask(names); err != nil {
		return 0, nil, fmt.Errorf("nan-scan %s: %v", s, err)
	}
	return mask, types, nil
}

// Range is an inclusive range of launch sequence numbers, every Step-th
// from Lo.
type Range struct{ Lo, Hi, Step uint64 }

// ParseRanges parses "1-100,250,900-,1-:10" (an open end runs to the last
// launch; ":N" keeps every Nth launch of the range from its start); "" is
// no ranges (every launch). The error names the part at fault, for the caller
// to put after the flag's name.
func ParseRanges(s string) ([]Range, error) {
	var out []Range
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		step := uint64(1)
		if body, st, ok := strings.Cut(part, ":"); ok {
			n, err := strconv.ParseUint(st, 10, 64)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("%q: the step %q is not a positive number", part, st)
			}
			part, step = body, n
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil || a == 0 {
			return nil, fmt.Errorf("%q is not a launch number (launches count from 1; ranges read like 1-100,250,900- or 1-:10)", lo)
		}
		b := a
		if isRange {
			b = math.MaxUint64
			if hi != "" {
				if b, err = strconv.ParseUint(hi, 10, 64); err != nil {
					return nil, fmt.Errorf("%q is not a launch number (ranges read like 1-100,250,900- or 1-:10)", hi)
				}
				if b < a {
					return nil, fmt.Errorf("%q ends before it starts", part)
				}
			}
		}
		out = append(out, Range{a, b, step})
	}
	return out, nil
}

// Selects reports whether launch seq is in one of the ranges (every
// launch when there are none).
func Selects(ranges []Range, seq uint64) bool {
	if len(ranges) == 0 {
		return true
	}
	for _, r := range ranges {
		if seq >= r.Lo && seq <= r.Hi && (seq-r.Lo)%r.Step == 0 {
			return true
		}
	}
	return false
}

// Vars renders c as NAME=value entries to append to a child's environment.
func Vars(c Config) []string {
	v := []string{
		Injection + "=" + c.Agent,
		Out + "=" + c.Out,
		CUPTI + "=" + c.CUPTI,
		Callstack + "=" + c.Callstack,
		Kernels + "=" + c.Kernels,
		GPUTiming + "=" + timingMode(c),
	}
	if c.GPUTiming && c.GPUTimingSample != "" {
		v = append(v, GPUTimingSample+"="+c.GPUTimingSample)
	}
	if c.StepRange != "" {
		v = append(v, StepRange+"="+c.StepRange)
	}
	if c.StepEvery != 0 {
		v = append(v, StepEvery+"="+strconv.FormatUint(uint64(c.StepEvery), 10))
	}
	if c.Probe != "" {
		v = append(v, Probe+"="+c.Probe)
	}
	if c.RingBytes != 0 {
		v = append(v, RingBytes+"="+strconv.FormatUint(c.RingBytes, 10))
	}
	if c.HangTimeout > 0 {
		v = append(v, HangTimeout+"="+c.HangTimeout.String(), HangKill+"="+onOff(c.HangKill))
	}
	if m := c.Memory; m.Mode != "" && m.Mode != "off" {
		v = append(v, Memory+"="+m.Mode, SnapshotKernels+"="+m.SnapshotKernels,
			SnapshotLaunches+"="+m.SnapshotLaunches, OnFull+"="+m.OnFull,
			StagingBytes+"="+strconv.FormatUint(m.StagingBytes, 10),
			FlightRecorder+"="+strconv.FormatUint(m.FlightRecorder, 10), NanScan+"="+m.NanScan,
			WriteSets+"="+m.WriteSets, DeferHashes+"="+cmp.Or(m.DeferHashes, "off"), HashSteps+"="+m.HashSteps,
			DigestEvery+"="+strconv.FormatUint(uint64(m.DigestEvery), 10), DigestAll+"="+onOff(m.DigestAll))
	}
	return v
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func timingMode(c Config) string {
	switch {
	case c.GPUTiming && c.GPUTimingSerial:
		return "serial"
	case c.GPUTiming && c.GPUTimingSample != "":
		return "sample"
	}
	return onOff(c.GPUTiming)
}

// DefaultSample is sampled GPU timing's window unless one is given: a tenth of the kernels,
// in windows short enough that a training step of a few hundred milliseconds has several.
const DefaultSample = "20ms/200ms"

// ParseSample reads a sampled-timing window, "ON/EVERY" such as "20ms/200ms": kernels are
// timed for ON out of every EVERY.
func ParseSample(s string) (on, every time.Duration, err error) {
	a, b, ok := strings.Cut(s, "/")
	if ok {
		on, err = time.ParseDuration(a)
		if err == nil {
			every, err = time.ParseDuration(b)
		}
	}
	switch {
	case !ok || err != nil:
		return 0, 0, fmt.Errorf("%q: want ON/EVERY, such as %s", s, DefaultSample)
	case on <= 0 || every <= on:
		return 0, 0, fmt.Errorf("%q: want 0 < ON < EVERY, such as %s", s, DefaultSample)
	case on < 5*time.Millisecond:
		// The agent's writer turns timing on and off; it wakes every few milliseconds.
		return 0, 0, fmt.Errorf("%q: ON must be at least 5ms", s)
	}
	return on, every, nil
}

// SameLibrary reports whether two paths name one library: the same string, or
// one file reached through links, as the loader would open it once for both
// (NVTX_INJECTION64_PATH naming the agent that CUDA_INJECTION64_PATH names).
func SameLibrary(a, b string) bool {
	if a == b {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// ProbeSpec is --probe read: which kernels to probe and what to count in them.
type ProbeSpec struct {
	Kernels *regexp.Regexp       // over mangled kernel names
	Count   instrument.Selection // instructions counted per CTA; empty for none
	Classes string               // Count as given, "" for none
}

// probePoints is what every probe records; the spec names it so that it reads as what it does.
const probePoints = ":entry,exit"

// ParseProbe reads "REGEX:entry,exit[,CLASSES]": the kernels whose (mangled) name REGEX
// matches get entry and exit probes per CTA, and counts of CLASSES (instrument.ParseSelection,
// e.g. global-store or op:REGEX) when given.
func ParseProbe(s string) (ProbeSpec, error) {
	i := strings.LastIndex(s, probePoints)
	if i < 0 || (len(s) > i+len(probePoints) && s[i+len(probePoints)] != ',') {
		return ProbeSpec{}, fmt.Errorf("want REGEX%s[,CLASSES], e.g. 'triton_.*%s'", probePoints, probePoints)
	}
	var spec ProbeSpec
	var err error
	if spec.Kernels, err = regexp.Compile(s[:i]); err != nil {
		return ProbeSpec{}, fmt.Errorf("the kernel expression: %v", err)
	}
	if rest := s[i+len(probePoints):]; rest != "" {
		spec.Classes = rest[1:]
		if spec.Count, err = instrument.ParseSelection(spec.Classes); err != nil {
			return ProbeSpec{}, fmt.Errorf("what to count: %v", err)
		}
	}
	return spec, nil
}

// TritonCacheDir is where Triton keeps its compiled kernels, each as NAME.cubin beside NAME.ptx
// in a folder of its own: TRITON_CACHE_DIR, else ~/.triton/cache ("" when there is no home).
// The agent finds Triton kernels' PTX there (race, probes, write sets); doctor reports on it.
func TritonCacheDir() string {
	if dir := os.Getenv("TRITON_CACHE_DIR"); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".triton", "cache")
}

// TritonCacheDirs are the folders Triton's compiled kernels may be in as a program runs:
// TritonCacheDir, and the per-device caches torch.compile (Inductor) points Triton at,
// TORCHINDUCTOR_CACHE_DIR (else TMPDIR's torchinductor_USER)/triton/DEVICE, which Inductor
// sets inside the process, where the agent does not see it. Listed anew at each call: a
// device's folder appears when Inductor first compiles for it.
func TritonCacheDirs() []string {
	var dirs []string
	d := TritonCacheDir()
	if d != "" {
		dirs = append(dirs, d)
	}
	for _, i := range InductorTritonCacheDirs() {
		if i != d {
			dirs = append(dirs, i)
		}
	}
	return dirs
}

// InductorTritonCacheDirs are the per-device Triton caches of torch.compile (Inductor) that
// exist now: TORCHINDUCTOR_CACHE_DIR (else TMPDIR's torchinductor_USER)/triton/DEVICE.
func InductorTritonCacheDirs() []string {
	var dirs []string
	base := os.Getenv("TORCHINDUCTOR_CACHE_DIR")
	if base == "" {
		name := os.Getenv("USER")
		if name == "" {
			if u, err := user.Current(); err == nil {
				name = u.Username
			}
		}
		base = filepath.Join(os.TempDir(), "torchinductor_"+name)
	}
	devices, _ := filepath.Glob(filepath.Join(base, "triton", "*"))
	for _, d := range devices {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs
}
