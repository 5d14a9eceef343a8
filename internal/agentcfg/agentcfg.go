// Package agentcfg is the recording configuration: what `gpurr record` asks of the agent it
// injects into every process, and the one place its rules live. Config holds the fields,
// Default their defaults, Validate every rule between them; Encode carries a Config to the
// agent in environment variables and Decode reads it back there, so that record and the agent
// cannot disagree. It is pure Go, so the CLI uses it without linking the agent.
package agentcfg

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/gpurr/gpurr/recording"
)

// Config is the recording configuration. Every field holds the value in force: record fills
// it from Default and its flags, Decode from Default and the environment. Validate's errors
// name the fields by record's flags.
type Config struct {
	Out       string // the recording directory
	Agent     string // the agent's library, which the CUDA driver loads
	CUPTI     string // the libcupti.so the agent loads
	Kernels   string // regular expression over mangled kernel names: record only these; "" for all
	Callstack string // CallstackAuto, CallstackPython, CallstackNative or CallstackOff
	RingBytes uint64 // size of the record ring

	GPUTiming       string        // TimingSteps, TimingOn, TimingSerial, TimingSample or TimingOff
	GPUTimingSample string        // with TimingSample or TimingSteps, its window "ON/EVERY" (ParseSample); "" otherwise
	GPUTimingSteps  string        // with TimingSteps, the steps timed, "FIRST/EVERY" (ParseTimingSteps); "" otherwise
	HangTimeout     time.Duration // report a launch unfinished this long; 0 for never
	HangKill        bool          // with HangTimeout: then end the program

	StepRange string // NVTX range messages that are training steps; "" for optimizer steps
	StepEvery uint32 // training steps are runs of this many launch calls; 0 for optimizer steps
	Probe     string // --probe as given (ParseProbe), "" for none

	Memory MemoryConfig
}

// MemoryConfig is the memory capture asked for (docs/memory.md).
type MemoryConfig struct {
	Mode             string // recording.MemoryOff, MemoryHash, MemorySnapshot or MemoryDigest
	SnapshotKernels  string // snapshot mode: regular expression over mangled kernel names
	SnapshotLaunches string // snapshot mode: launch ranges (ParseRanges)
	OnFull           string // OnFullBackpressure or OnFullDropOldest
	StagingBytes     uint64 // pinned staging ring for snapshots
	FlightRecorder   uint64 // snapshot mode: keep only the last N launches' snapshots; 0 for all
	NanScan          string // comma-separated kernels.NanScanTypes, "" for none (ParseNanScan)
	WriteSets        string // WriteSetsProved, WriteSetsLearned or WriteSetsAll: which regions hash mode may skip
	DeferHashes      string // "" (off), DeferBeside or DeferStream: hash mode with write sets, one hash kernel for several launches
	HashSteps        string // hash mode: "K" or "K-L", the training steps whose launches are hashed (ParseSteps); "" for all
	DigestEvery      uint32 // step digests of every Nth step only (steps N-1, 2N-1, ...); 0 or 1 for every step
	DigestAll        bool   // step digests hash every live allocation of the program's, not only what the optimizer reached
}

// Callstack modes: which frames a launch's callstack holds.
const (
	CallstackAuto   = "auto" // Python frames where the thread runs Python, else native ones
	CallstackPython = "python"
	CallstackNative = "native"
	CallstackOff    = "off"
)

// GPU timing modes: kernel start and end times from CUPTI's activity records.
const (
	// The kernels of the first training steps and of one step in so many (GPUTimingSteps); until
	// a first step ends, those launched in windows (GPUTimingSample), as TimingSample.
	TimingSteps  = "steps"
	TimingOn     = "on"     // every kernel
	TimingSerial = "serial" // every kernel, in CUPTI's serial kernel mode (kernels run one at a time)
	TimingSample = "sample" // the kernels launched in windows (GPUTimingSample)
	TimingOff    = "off"
)

// What a full snapshot staging ring does.
const (
	OnFullBackpressure = "backpressure" // the program waits; nothing is lost
	OnFullDropOldest   = "drop-oldest"  // the oldest unsaved snapshots are dropped and counted
)

// Write set modes: which regions of a launch hash mode may leave unhashed, carrying the state
// of the last launch that hashed them (docs/memory.md, Write sets).
const (
	WriteSetsProved  = "proved"  // those the kernel's PTX proves it cannot store to (exact)
	WriteSetsLearned = "learned" // also those its earlier launches never changed, audited every Nth launch
	WriteSetsAll     = "all"     // hash every region after every launch
)

// Where a batch of deferred hash jobs runs.
const (
	DeferBeside = "beside" // on a stream of gpurr's own beside each program stream
	DeferStream = "stream" // on the program's stream, where each launch's own hash kernel would have run
)

// Default is the configuration of `gpurr record` without flags, less what record finds
// (Out, Agent, CUPTI).
func Default() Config {
	return Config{
		Callstack: CallstackAuto,
		RingBytes: 64 << 20,
		GPUTiming: TimingSteps,
		Memory: MemoryConfig{
			Mode:         recording.MemoryOff,
			OnFull:       OnFullBackpressure,
			StagingBytes: 256 << 20,
			WriteSets:    WriteSetsProved,
			DigestEvery:  1,
		},
	}
}

// ModeDefaults gives the fields whose default follows a mode theirs: sampled timing's window
// and steps, and in digest mode a count of NaN as f32 unless a NaN scan was given (even an
// empty one).
func (c *Config) ModeDefaults(nanScanGiven bool) {
	if (c.GPUTiming == TimingSample || c.GPUTiming == TimingSteps) && c.GPUTimingSample == "" {
		c.GPUTimingSample = DefaultSample
	}
	if c.GPUTiming == TimingSteps && c.GPUTimingSteps == "" {
		c.GPUTimingSteps = DefaultTimingSteps
	}
	if c.Memory.Mode == recording.MemoryDigest && !nanScanGiven {
		c.Memory.NanScan = "f32"
	}
}

// Digests reports whether the mode takes step digests: digest mode, and hash mode restricted
// to some steps (the others get digests).
func (c MemoryConfig) Digests() bool {
	return c.Mode == recording.MemoryDigest || (c.Mode == recording.MemoryHash && c.HashSteps != "")
}

// Validate checks every rule of the configuration, so that record can refuse bad flags before
// the program starts and the agent a bad environment. Its errors name record's flags.
func (c Config) Validate() error {
	if !slices.Contains([]string{CallstackAuto, CallstackPython, CallstackNative, CallstackOff}, c.Callstack) {
		return fmt.Errorf("--callstack %q: want auto, python, native or off", c.Callstack)
	}
	if _, err := regexp.Compile(c.Kernels); err != nil {
		return fmt.Errorf("--kernels: %v", err)
	}
	if _, err := ParseProbe(c.Probe); c.Probe != "" && err != nil {
		return fmt.Errorf("--probe: %v", err)
	}
	if _, err := recording.CompileStepRange(c.StepRange); err != nil {
		return fmt.Errorf("--step-range: %v", err)
	}
	if c.StepEvery > 0 && c.StepRange != "" {
		return fmt.Errorf("--step-every and --step-range each say what a training step is: give one")
	}
	if c.RingBytes < 1<<20 {
		return fmt.Errorf("--ring-bytes %d: want at least 1 MiB", c.RingBytes)
	}
	if err := c.Memory.validate(); err != nil {
		return err
	}
	switch c.GPUTiming {
	case TimingOn, TimingSerial, TimingOff, TimingSample, TimingSteps:
	default:
		return fmt.Errorf("--gpu-timing=%s: want steps, on, serial, sample or off", c.GPUTiming)
	}
	if c.GPUTimingSample != "" {
		if c.GPUTiming != TimingSample && c.GPUTiming != TimingSteps {
			return fmt.Errorf("--gpu-timing-sample goes with --gpu-timing=sample or steps")
		}
		if _, _, err := ParseSample(c.GPUTimingSample); err != nil {
			return fmt.Errorf("--gpu-timing-sample %v", err)
		}
	}
	if c.GPUTimingSteps != "" {
		if c.GPUTiming != TimingSteps {
			return fmt.Errorf("--gpu-timing-steps goes with --gpu-timing=steps")
		}
		if _, _, err := ParseTimingSteps(c.GPUTimingSteps); err != nil {
			return fmt.Errorf("--gpu-timing-steps %v", err)
		}
	}
	switch {
	case c.HangTimeout < 0:
		return fmt.Errorf("--hang-timeout %v: want a positive duration such as 5m", c.HangTimeout)
	case c.HangTimeout > 0 && c.GPUTiming != TimingOn && c.GPUTiming != TimingSerial:
		word := c.GPUTiming
		if word == TimingOff {
			word = "false" // as record's help spells it
		}
		return fmt.Errorf("--hang-timeout needs GPU timing of every kernel (it tells which launches finished): give --gpu-timing=all, not %s", word)
	case c.HangKill && c.HangTimeout == 0:
		return fmt.Errorf("--hang-kill goes with --hang-timeout")
	}
	return nil
}

func (c MemoryConfig) validate() error {
	if !slices.Contains([]string{recording.MemoryOff, recording.MemoryHash, recording.MemorySnapshot, recording.MemoryDigest}, c.Mode) {
		return fmt.Errorf("--memory mode %q: want off, hash, snapshot or digest", c.Mode)
	}
	if c.DigestEvery > 1 && !c.Digests() {
		return fmt.Errorf("--digest-every needs step digests: memory mode digest, or hash with hash-steps")
	}
	if c.DigestAll && !c.Digests() {
		return fmt.Errorf("--digest-all needs step digests: memory mode digest, or hash with hash-steps")
	}
	if c.HashSteps != "" {
		if c.Mode != recording.MemoryHash {
			return fmt.Errorf("--hash-steps needs memory mode hash: it says which steps' launches are hashed")
		}
		if _, _, err := ParseSteps(c.HashSteps); err != nil {
			return fmt.Errorf("--hash-steps %v", err)
		}
	}
	if c.OnFull != OnFullBackpressure && c.OnFull != OnFullDropOldest {
		return fmt.Errorf("--on-full %q: want backpressure or drop-oldest", c.OnFull)
	}
	if _, err := regexp.Compile(c.SnapshotKernels); err != nil {
		return fmt.Errorf("--snapshot-kernels: %v", err)
	}
	if _, err := ParseRanges(c.SnapshotLaunches); err != nil {
		return fmt.Errorf("--snapshot-launches: %v", err)
	}
	if _, _, err := ParseNanScan(c.NanScan); err != nil {
		return fmt.Errorf("--nan-scan %v", err)
	}
	if c.NanScan != "" && c.Mode == recording.MemoryOff {
		return fmt.Errorf("--nan-scan needs memory mode hash, snapshot or digest: the GPU counts NaN while it hashes")
	}
	if !slices.Contains([]string{WriteSetsProved, WriteSetsLearned, WriteSetsAll}, c.WriteSets) {
		return fmt.Errorf("--write-sets %q: want proved, learned or all", c.WriteSets)
	}
	if c.StagingBytes < 1<<20 {
		return fmt.Errorf("--staging-bytes %d: want at least 1 MiB", c.StagingBytes)
	}
	if c.Mode != recording.MemorySnapshot && (c.SnapshotKernels != "" || c.SnapshotLaunches != "" || c.FlightRecorder != 0) {
		return fmt.Errorf("--snapshot-kernels, --snapshot-launches and --flight-recorder need --memory snapshot")
	}
	if !slices.Contains([]string{"", DeferBeside, DeferStream}, c.DeferHashes) {
		return fmt.Errorf("--defer-hashes=%s: want beside, stream or off", c.DeferHashes)
	}
	if c.DeferHashes != "" && (c.Mode != recording.MemoryHash || c.WriteSets == WriteSetsAll) {
		return fmt.Errorf("--defer-hashes needs --memory hash with write sets (proved or learned): they say when a hash may wait")
	}
	return nil
}
