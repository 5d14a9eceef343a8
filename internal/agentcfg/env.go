package agentcfg

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Variables that carry a Config to the agent in the recorded process; fields pairs each with
// its field and record's flag.
const (
	Out              = "GPURR_OUT" // the agent is idle without it
	CUPTI            = "GPURR_CUPTI"
	Kernels          = "GPURR_KERNELS"
	Callstack        = "GPURR_CALLSTACK"
	RingBytes        = "GPURR_RING_BYTES"
	GPUTiming        = "GPURR_GPU_TIMING"
	GPUTimingSample  = "GPURR_GPU_TIMING_SAMPLE"
	GPUTimingSteps   = "GPURR_GPU_TIMING_STEPS"
	HangTimeout      = "GPURR_HANG_TIMEOUT"
	HangKill         = "GPURR_HANG_KILL"
	StepRange        = "GPURR_STEP_RANGE"
	StepEvery        = "GPURR_STEP_EVERY"
	Probe            = "GPURR_PROBE"
	Memory           = "GPURR_MEMORY"
	SnapshotKernels  = "GPURR_SNAPSHOT_KERNELS"
	SnapshotLaunches = "GPURR_SNAPSHOT_LAUNCHES"
	OnFull           = "GPURR_ON_FULL"
	StagingBytes     = "GPURR_STAGING_BYTES"
	FlightRecorder   = "GPURR_FLIGHT_RECORDER"
	NanScan          = "GPURR_NAN_SCAN"
	WriteSets        = "GPURR_WRITE_SETS"
	DeferHashes      = "GPURR_DEFER_HASHES"
	HashSteps        = "GPURR_HASH_STEPS"
	DigestEvery      = "GPURR_DIGEST_EVERY"
	DigestAll        = "GPURR_DIGEST_ALL"
	// Injection is read by the CUDA driver, which loads the named library (Config.Agent) into
	// every process that initializes CUDA and calls its InitializeInjection.
	Injection = "CUDA_INJECTION64_PATH"
	// NVTXInjection is read by NVTX, which loads the named library at the program's first
	// NVTX call and calls its InitializeInjectionNvtx2. Naming the agent's library sends NVTX
	// calls straight to the agent. Record sets it unless the user named another tool's.
	NVTXInjection = "NVTX_INJECTION64_PATH"
)

// fields pairs every variable with the field of c it carries and the flag of record that sets
// it (for Decode's errors): the one list Encode and Decode follow.
func fields(c *Config) []field {
	m := &c.Memory
	return []field{
		text(Injection, "", &c.Agent),
		text(Out, "", &c.Out),
		text(CUPTI, "", &c.CUPTI),
		text(Kernels, "--kernels", &c.Kernels),
		text(Callstack, "--callstack", &c.Callstack),
		count(RingBytes, "--ring-bytes", &c.RingBytes, "a byte count"),
		text(GPUTiming, "--gpu-timing", &c.GPUTiming),
		text(GPUTimingSample, "--gpu-timing-sample", &c.GPUTimingSample),
		text(GPUTimingSteps, "--gpu-timing-steps", &c.GPUTimingSteps),
		duration(HangTimeout, "--hang-timeout", &c.HangTimeout),
		onOff(HangKill, "--hang-kill", &c.HangKill),
		text(StepRange, "--step-range", &c.StepRange),
		count(StepEvery, "--step-every", &c.StepEvery, "a launch count"),
		text(Probe, "--probe", &c.Probe),
		text(Memory, "--memory", &m.Mode),
		text(SnapshotKernels, "--snapshot-kernels", &m.SnapshotKernels),
		text(SnapshotLaunches, "--snapshot-launches", &m.SnapshotLaunches),
		text(OnFull, "--on-full", &m.OnFull),
		count(StagingBytes, "--staging-bytes", &m.StagingBytes, "a byte count"),
		count(FlightRecorder, "--flight-recorder", &m.FlightRecorder, "a launch count"),
		text(NanScan, "--nan-scan", &m.NanScan),
		text(WriteSets, "--write-sets", &m.WriteSets),
		deferHashes(&m.DeferHashes),
		text(HashSteps, "--hash-steps", &m.HashSteps),
		count(DigestEvery, "--digest-every", &m.DigestEvery, "a step count"),
		onOff(DigestAll, "--digest-all", &m.DigestAll),
	}
}

// Encode renders c as NAME=value entries to append to a child's environment. It writes every
// field, so that what the environment held before does not count: Decode(Encode(c)) is c.
func Encode(c Config) []string {
	var env []string
	for _, f := range fields(&c) {
		env = append(env, f.name+"="+f.encode())
	}
	return env
}

// Decode reads the configuration from the environment that lookup (os.LookupEnv) gives, and
// validates it. A variable unset or empty takes Default's value, as a flag left out does in
// record, and ModeDefaults applies (GPURR_NAN_SCAN set empty is no NaN scan). Its errors name
// the variables at fault.
func Decode(lookup func(name string) (string, bool)) (Config, error) {
	c := Default()
	for _, f := range fields(&c) {
		if v, _ := lookup(f.name); v != "" {
			if err := f.decode(v); err != nil {
				return c, fmt.Errorf("%s=%q: %v", f.name, v, err)
			}
		}
	}
	if c.CUPTI == "" {
		return c, fmt.Errorf("%s is not set (run the program through gpurr record)", CUPTI)
	}
	_, nanScanGiven := lookup(NanScan)
	c.ModeDefaults(nanScanGiven)
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%s: %v", strings.Join(varsNamed(err.Error()), ", "), err)
	}
	return c, nil
}

// varsNamed lists the variables of the flags that msg names, in its order.
func varsNamed(msg string) []string {
	at := map[string]int{}
	var names []string
	for _, f := range fields(&Config{}) {
		if f.flag == "" {
			continue
		}
		if i := regexp.MustCompile(regexp.QuoteMeta(f.flag) + `([^a-z-]|$)`).FindStringIndex(msg); i != nil {
			at[f.name] = i[0]
			names = append(names, f.name)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return at[a] - at[b] })
	return names
}

// field is one variable: its name, record's flag, and its value to and from a Config's field.
type field struct {
	name, flag string
	encode     func() string
	decode     func(v string) error // v is not empty; the error says what v should be
}

func text(name, flag string, p *string) field {
	return field{name, flag, func() string { return *p }, func(v string) error { *p = v; return nil }}
}

func count[T uint32 | uint64](name, flag string, p *T, what string) field {
	bits := 64
	if _, ok := any(*p).(uint32); ok {
		bits = 32
	}
	return field{name, flag, func() string { return strconv.FormatUint(uint64(*p), 10) }, func(v string) error {
		n, err := strconv.ParseUint(v, 10, bits)
		if err != nil {
			return fmt.Errorf("want %s", what)
		}
		*p = T(n)
		return nil
	}}
}

func duration(name, flag string, p *time.Duration) field {
	return field{name, flag, func() string { return p.String() }, func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want a duration such as 60s")
		}
		*p = d
		return nil
	}}
}

func onOff(name, flag string, p *bool) field {
	return field{name, flag, func() string {
		if *p {
			return "on"
		}
		return "off"
	}, func(v string) error {
		if v != "on" && v != "off" {
			return fmt.Errorf("want on or off")
		}
		*p = v == "on"
		return nil
	}}
}

// deferHashes is GPURR_DEFER_HASHES: off for none, and on, as the flag's bool once was, beside.
func deferHashes(p *string) field {
	return field{DeferHashes, "--defer-hashes", func() string { return cmp.Or(*p, "off") }, func(v string) error {
		switch v {
		case "off":
			*p = ""
		case "on":
			*p = DeferBeside
		default:
			*p = v
		}
		return nil
	}}
}
