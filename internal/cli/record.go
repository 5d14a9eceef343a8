package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/agentpath"
	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/cupti/locate"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/termsafe"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// recordOptions are record's flags: most are fields of the recording configuration, the rest
// are spelled otherwise there (see config) or are record's own.
type recordOptions struct {
	cfg             agentcfg.Config
	out             string
	cupti           string
	gpuTiming       string // --gpu-timing as given: steps, all, serial, sample or false (or true, on, off)
	gpuTimingSample string
	gpuTimingSteps  string
	deferHashes     string // --defer-hashes as given: beside, stream or off (true and false as a bool flag took them)
	// keepTorchAllocator leaves PyTorch's caching allocator in place under
	// --memory (see pytorchAllocatorEnv).
	keepTorchAllocator bool
}

func newRecordCmd() *cobra.Command {
	var o recordOptions
	cmd := &cobra.Command{
		Use:   "record [flags] -- CMD [ARGS...]",
		Short: "Run a program and record every kernel launch it and its child processes make",
		Long: `record runs CMD with gpurr's agent injected through CUDA_INJECTION64_PATH.
Every process of CMD that initializes CUDA (the program, its children, each
torchrun rank) writes its own recording inside the output directory. The
program is not changed and its exit code is gpurr's exit code (128+N when
signal N killed it).

--gpu-timing and --defer-hashes take their value after =, as in
--gpu-timing=false: a value written as a word of its own would be the
program to record, so record refuses it.`,
		Example: `  gpurr record -o run1 -- python train.py --epochs 1
  gpurr record --kernels 'gemm|softmax' --callstack python -- torchrun --nproc-per-node 2 train.py
  gpurr record --memory hash --gpu-timing=false -o run2 -- python train.py`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("record: no command given (usage: gpurr record [flags] -- CMD [ARGS...])")
			}
			if err := valueAfterBareFlag(cmd, args); err != nil {
				return err
			}
			cfg, err := o.config(cmd.Flags())
			if err != nil {
				return err
			}
			return runRecord(cmd, o, cfg, args)
		},
	}
	cmd.Flags().SetInterspersed(false) // flags after CMD belong to CMD
	o.define(cmd)
	return cmd
}

// define defines record's flags on cmd, the recording configuration's with agentcfg's defaults.
func (o *recordOptions) define(cmd *cobra.Command) {
	o.cfg = agentcfg.Default()
	d := o.cfg
	f := cmd.Flags()
	outputVar(f, &o.out, "output", "o", "", "recording directory to create (default gpurr-YYYYMMDD-HHMMSS)")
	f.StringVar(&o.cfg.Kernels, "kernels", d.Kernels, "record only kernels whose mangled name matches this regular expression")
	f.StringVar(&o.cfg.Callstack, "callstack", d.Callstack, "callstacks: auto (Python frames where the thread runs Python, else native), python, native, off")
	completeValues(cmd, "callstack", agentcfg.CallstackAuto, agentcfg.CallstackPython, agentcfg.CallstackNative, agentcfg.CallstackOff)
	f.StringVar(&o.cupti, "cupti", "", "path of libcupti.so to use (default: search; also $"+locate.EnvCUPTI+")")
	f.StringVar(&o.gpuTiming, "gpu-timing", "steps", "record kernels' start and end on the GPU (CUPTI activity): steps (every kernel of some training steps, --gpu-timing-steps; a program without steps in windows, --gpu-timing-sample; CUPTI's cost on the GPU is paid there only); all (every kernel; true says the same); serial (every kernel in CUPTI's serial kernel mode: no code added to kernels, but kernels run one at a time across streams); sample (only kernels launched in windows, --gpu-timing-sample); false (the default with --memory digest)")
	f.Lookup("gpu-timing").NoOptDefVal = "all"
	completeValues(cmd, "gpu-timing", "steps", "all", "serial", "sample", "false")
	f.StringVar(&o.gpuTimingSample, "gpu-timing-sample", agentcfg.DefaultSample, "with --gpu-timing=sample, or steps before a first step ends: ON/EVERY, time the kernels launched in the first ON of every EVERY")
	f.StringVar(&o.gpuTimingSteps, "gpu-timing-steps", agentcfg.DefaultTimingSteps, "with --gpu-timing=steps: FIRST/EVERY, time every kernel of training steps 0 to FIRST-1 and of every EVERY-th step (EVERY, 2×EVERY, ...; 0: none after the first)")
	sizeVar(f, &o.cfg.RingBytes, "ring-bytes", d.RingBytes, "size of the agent's in-memory record ring per process, at least 1 MiB")
	f.StringVar(&o.cfg.Memory.Mode, "memory", d.Memory.Mode, "memory capture: off, hash (a hash of every region after every launch), snapshot (contents before and after selected launches), digest (a hash of the program's memory at each training step boundary only: cheap enough to leave on; gpurr diff names the first step that differs, gpurr bisect narrows it to the launch; docs/memory.md)")
	completeValues(cmd, "memory", recording.MemoryOff, recording.MemoryHash, recording.MemorySnapshot, recording.MemoryDigest)
	f.StringVar(&o.cfg.Memory.HashSteps, "hash-steps", d.Memory.HashSteps, "with --memory hash: hash only the launches of these training steps, K or K-L (from 0), and take step digests at the others' boundaries, as --memory digest does")
	f.BoolVar(&o.cfg.Memory.DigestAll, "digest-all", d.Memory.DigestAll, "with step digests: hash every live allocation of the program's (a loss, a batch, a cache), not only the parameters, gradients and optimizer state the step's optimizer reached")
	f.Uint32Var(&o.cfg.Memory.DigestEvery, "digest-every", d.Memory.DigestEvery, "with step digests: take the digest of every Nth step only (steps N-1, 2N-1, ...), 1/N the cost; a divergence is then placed within N steps")
	f.Uint32Var(&o.cfg.StepEvery, "step-every", d.StepEvery, "training steps are runs of N launch calls (launches 1..N are step 0), for programs without torch.optim optimizer steps: step digests, --hash-steps and every report number steps by them")
	f.StringVar(&o.cfg.Memory.SnapshotKernels, "snapshot-kernels", d.Memory.SnapshotKernels, "with --memory snapshot: snapshot only kernels whose mangled name matches this regular expression")
	f.StringVar(&o.cfg.Memory.SnapshotLaunches, "snapshot-launches", d.Memory.SnapshotLaunches, "with --memory snapshot: snapshot only these launches, e.g. 1-100,250,900- or 1-:10 (every 10th; launch numbers as gpurr info shows them)")
	f.StringVar(&o.cfg.Memory.OnFull, "on-full", d.Memory.OnFull, "when the snapshot staging ring is full: backpressure (the program waits; nothing is lost) or drop-oldest (oldest unsaved snapshots are dropped and counted)")
	completeValues(cmd, "on-full", agentcfg.OnFullBackpressure, agentcfg.OnFullDropOldest)
	sizeVar(f, &o.cfg.Memory.StagingBytes, "staging-bytes", d.Memory.StagingBytes, "pinned host memory per process for snapshot transfers; a larger region goes through it in pieces, so it changes speed only")
	f.BoolVar(&o.keepTorchAllocator, "keep-pytorch-allocator", false, "with --memory: leave PyTorch's caching allocator in place instead of its cudaMallocAsync backend (regions become whole cached segments; hashing costs more)")
	f.StringVar(&o.cfg.Memory.WriteSets, "write-sets", d.Memory.WriteSets, "with --memory hash: which regions a launch leaves unhashed, carrying the state of the last launch that hashed them: proved (its PTX proves no store reaches them; exact), learned (also those its earlier launches never changed, audited every 32nd launch), all (hash every region)")
	f.StringVar(&o.deferHashes, "defer-hashes", "off", "with --memory hash and --write-sets proved or learned: let hash kernels wait until something may write what they hash and hash several launches in one kernel, run beside the program on a stream of its own (beside, what a bare --defer-hashes means) or on the program's stream (stream: fewer driver calls, no overlap); off (see docs/memory.md)")
	f.Lookup("defer-hashes").NoOptDefVal = "beside"
	completeValues(cmd, "defer-hashes", agentcfg.DeferBeside, agentcfg.DeferStream, "off")
	f.StringVar(&o.cfg.Memory.NanScan, "nan-scan", d.Memory.NanScan, "with --memory: count NaN and Inf on the GPU in every region after every launch (and in step digests), as each of these types (f32, f64, f16, bf16, comma-separated), for gpurr nan without snapshots; --memory digest counts f32 unless given")
	f.DurationVar(&o.cfg.HangTimeout, "hang-timeout", d.HangTimeout, "report a launch the GPU has not finished after this long (e.g. 5m): kernel, shape, stream, callstack and what waits behind it, on stderr and in the recording, with everything written out")
	f.BoolVar(&o.cfg.HangKill, "hang-kill", d.HangKill, "with --hang-timeout: then end the program (SIGKILL), the recording complete up to the hang")
	f.StringVar(&o.cfg.Probe, "probe", d.Probe, "run the kernels whose name matches REGEX with in-kernel probes: each CTA's start, end and SM (and counts of CLASSES, as gpurr probe --count takes them), per launch: 'REGEX:entry,exit[,CLASSES]'; needs the kernel's PTX (Triton kernels, modules loaded from PTX)")
	f.StringVar(&o.cfg.StepRange, "step-range", d.StepRange, "training steps are the NVTX ranges whose message matches this regular expression (e.g. '^train_step'), for programs without torch.optim: every report (diff, nan, info, query's step columns) numbers launches by them; default: torch.optim optimizer steps")
	f.Uint64Var(&o.cfg.Memory.FlightRecorder, "flight-recorder", d.Memory.FlightRecorder, "with --memory snapshot: keep only the last N launches' snapshots in memory and write them at exit, on SIGUSR2 or when a CUDA call fails")
}

// optionalValues are record's flags whose value is optional, with the values they take.
var optionalValues = []struct {
	flag   string
	values []string
}{
	{"gpu-timing", []string{"steps", "all", "true", "on", "serial", "sample", "false", "off"}},
	{"defer-hashes", []string{"beside", "stream", "true", "off", "false"}},
}

// valueAfterBareFlag refuses a value written after a flag whose value is optional, as its
// own word (--gpu-timing false): the parser takes the flag bare and the value for the
// program, so record would run "false" with GPU timing on. Behind --, such a word is the
// program, as written.
func valueAfterBareFlag(cmd *cobra.Command, args []string) error {
	if cmd.ArgsLenAtDash() == 0 {
		return nil
	}
	for _, o := range optionalValues {
		f := cmd.Flags().Lookup(o.flag)
		if f.Changed && f.Value.String() == f.NoOptDefVal && slices.Contains(o.values, args[0]) {
			return usageErrorf("record: --%s %s: give the value with = (--%s=%s); as written, %q is the program to record", o.flag, args[0], o.flag, args[0], args[0])
		}
	}
	return nil
}

// deferMode is --defer-hashes' value as the configuration words it, "" when off; true, as the
// bool flag it once was took it, is beside.
func deferMode(v string) (string, error) {
	switch v {
	case agentcfg.DeferBeside, agentcfg.DeferStream:
		return v, nil
	case "true":
		return agentcfg.DeferBeside, nil
	case "off", "false":
		return "", nil
	}
	return "", fmt.Errorf("--defer-hashes=%s: want beside, stream or off", v)
}

// config is the recording configuration the flags ask for, validated. Two flags are spelled
// otherwise in it (--gpu-timing's true and false, --defer-hashes' off); the rules Validate
// cannot check are about flags given where they change nothing, which a configuration does not
// tell from flags left out.
func (o recordOptions) config(flags *pflag.FlagSet) (agentcfg.Config, error) {
	c := o.cfg
	switch o.gpuTiming {
	case "all", "true", "on":
		c.GPUTiming = agentcfg.TimingOn
	case "steps", "serial", "sample":
		c.GPUTiming = o.gpuTiming
	case "false", "off":
		c.GPUTiming = agentcfg.TimingOff
	default:
		return c, usageErrorf("record: --gpu-timing=%s: want steps, all, serial, sample or false", o.gpuTiming)
	}
	// The hang watch tells finished launches by their kernel records: it times every kernel
	// unless told otherwise.
	if c.HangTimeout > 0 && !flags.Changed("gpu-timing") {
		c.GPUTiming = agentcfg.TimingOn
	}
	// Step digests are meant to be left on: with kernel timing on beside PyTorch's
	// cudaMallocAsync allocator (which digest mode runs it with), a GPU-bound step took 25 to
	// 37 ms against 22.2 bare in 9 of 9 processes, and 22.4 ms with timing off (H200,
	// 2026-11-28; bench/README.md). Asked for, it is on.
	if c.Memory.Mode == recording.MemoryDigest && c.HangTimeout == 0 && !flags.Changed("gpu-timing") {
		c.GPUTiming = agentcfg.TimingOff
	}
	if flags.Changed("gpu-timing-sample") {
		c.GPUTimingSample = o.gpuTimingSample
	}
	if flags.Changed("gpu-timing-steps") {
		c.GPUTimingSteps = o.gpuTimingSteps
	}
	var err error
	if c.Memory.DeferHashes, err = deferMode(o.deferHashes); err != nil {
		return c, usageErrorf("record: %v", err)
	}
	c.ModeDefaults(flags.Changed("nan-scan"))
	if err := c.Validate(); err != nil {
		return c, usageErrorf("record: %v", err)
	}
	switch {
	case flags.Changed("step-every") && c.StepEvery == 0:
		return c, usageErrorf("record: --step-every 0: want a launch count of 1 or more")
	case flags.Changed("write-sets") && c.Memory.Mode != recording.MemoryHash:
		return c, usageErrorf("record: --write-sets needs --memory hash (snapshots and memory capture off hash nothing to skip)")
	case o.keepTorchAllocator && c.Memory.Mode == recording.MemoryOff:
		return c, usageErrorf("record: --keep-pytorch-allocator only matters with --memory hash, snapshot or digest")
	}
	return c, nil
}

// runRecord records args under cfg.
func runRecord(cmd *cobra.Command, o recordOptions, cfg agentcfg.Config, args []string) error {
	stderr := cmd.ErrOrStderr()
	if o.out == "" {
		o.out = "gpurr-" + time.Now().Format("20060102-150405")
	}
	if err := checkOutFolder("record", "-o", o.out, nil); err != nil {
		return err
	}
	program, err := exec.LookPath(args[0])
	if err != nil {
		return usageErrorf("record: cannot run %q: %v", args[0], unwrapExecError(err))
	}
	agentLib, err := agentpath.Find()
	if err != nil { // gpurr's own install is broken: exit 3
		return &exitError{code: exitFailure, err: fmt.Errorf("record: %v", err)}
	}
	cuptiLib, err := locate.Find(o.cupti)
	if err != nil {
		if o.cupti == "" && os.Getenv(locate.EnvCUPTI) == "" { // the machine lacks it, not a path the user gave
			return noCUPTIError(err, cuda.Load())
		}
		return usageErrorf("record: %v", err)
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return usageErrorf("record: -o %s: %v", o.out, err)
	}
	if err := recording.CreateSet(out, args); err != nil {
		return usageErrorf("record: %v", err)
	}

	child := exec.Command(program, args[1:]...)
	child.Args[0] = args[0]
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	cfg.Out, cfg.Agent, cfg.CUPTI = out, agentLib, cuptiLib
	child.Env = append(os.Environ(), agentcfg.Encode(cfg)...)
	conf, confSet := os.LookupEnv(pytorchAllocConf)
	if add, note := pytorchAllocatorEnv(cfg.Memory.Mode, o.keepTorchAllocator, conf, confSet); add != "" || note != "" {
		if add != "" {
			child.Env = append(child.Env, add)
		}
		fmt.Fprintln(stderr, note)
	}
	if prev := os.Getenv("CUDA_INJECTION64_PATH"); prev != "" {
		fmt.Fprintf(stderr, "gpurr: record: replacing CUDA_INJECTION64_PATH=%s for the recorded program\n", prev)
	}
	child.Env = append(child.Env, godebugEnv(os.LookupEnv("GODEBUG")))
	xlaFlags, xlaOwn := os.LookupEnv(xlaFlagsVar)
	if add, note := xlaEnv(xlaFlags, xlaOwn, filepath.Join(out, recording.XLADir)); add != "" {
		child.Env = append(child.Env, add)
	} else {
		fmt.Fprintln(stderr, note)
	}
	if add, note := nvtxEnv(agentLib, os.Getenv(agentcfg.NVTXInjection)); add != "" {
		child.Env = append(child.Env, add)
	} else {
		fmt.Fprintln(stderr, note)
	}

	// The terminal sends SIGINT to the whole process group, the program
	// included; other signals sent to gpurr are passed on.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	forward := make(chan os.Signal, 4)
	signal.Notify(forward, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(forward)

	if err := child.Start(); err != nil { // found, but the system would not run it: exit 3, as --help says
		return &exitError{code: exitFailure, err: fmt.Errorf("record: start %s: %v", args[0], unwrapExecError(err))}
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-forward:
				child.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	waitErr := child.Wait()
	close(done)

	code := 0
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		code = exitErr.ExitCode()
		if st, ok := exitErr.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			code = 128 + int(st.Signal())
			fmt.Fprintf(stderr, "gpurr: record: %s was killed by %s; its recording is incomplete\n", args[0], unix.SignalName(st.Signal()))
		}
	default:
		return &exitError{code: exitFailure, err: fmt.Errorf("record: %v", waitErr)}
	}
	if note := pruneXLADump(filepath.Join(out, recording.XLADir)); note != "" {
		fmt.Fprintln(stderr, note)
	}
	summarizeRecording(stderr, out)
	if code != 0 {
		return exitWith(code)
	}
	return nil
}

// noCUPTIError is record's error when the machine has no CUPTI. On a machine without the
// NVIDIA driver either (a laptop, a CI runner) installing CUPTI would only lead to a recording
// of nothing, so the missing driver is said first, with where to go next.
func noCUPTIError(cuptiErr, driverErr error) error {
	if driverErr != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("record: %v; CUPTI is missing too: gpurr doctor says what this machine needs to record, and gpurr demo walks through recordings without a GPU", driverErr)}
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("record: %v", cuptiErr)}
}

// nvtxEnv makes the agent NVTX's injection library, so the program's NVTX
// calls reach it directly. A library the user named already (another
// tool's) is kept: then ranges are not recorded, and note says so.
func nvtxEnv(agent, prev string) (add, note string) {
	if prev == "" || agentcfg.SameLibrary(prev, agent) {
		return agentcfg.NVTXInjection + "=" + agent, ""
	}
	return "", fmt.Sprintf("gpurr: record: warning: %s=%s is kept for the recorded program, so its NVTX ranges are not recorded (unset it to record them)", agentcfg.NVTXInjection, prev)
}

// godebugEnv turns the Go runtime's asynchronous preemption off in the recorded
// program, where the agent is a Go library: preemption signals (SIGURG) the
// threads that run Go, and a host program's thread that calls into the agent
// may have had its signal stack disabled by the program (a torchrun launcher
// did, one run in three), which the runtime answers with "fatal error: non-Go
// code disabled sigaltstack". A GODEBUG of the user's own is kept, extended.
func godebugEnv(prev string, set bool) string {
	const off = "asyncpreemptoff=1"
	switch {
	case !set || prev == "":
		return "GODEBUG=" + off
	case strings.Contains(prev, "asyncpreemptoff="):
		return "GODEBUG=" + prev
	}
	return "GODEBUG=" + prev + "," + off
}

const xlaFlagsVar = "XLA_FLAGS"

// xlaEnv has XLA (JAX's compiler) dump the optimized HLO modules it compiles, as text, into
// the recording's dump folder: their metadata names the JAX op and the Python line of each
// instruction, which readers give the kernels XLA launches (docs/python.md, JAX). Other
// programs never read the variable. The user's own XLA_FLAGS are kept and extended, except
// that a --xla_dump_to of the user's wins: then the variable is left alone, and note says
// that XLA's kernels will have no lines. Only flags every XLA of the last years knows are
// added, since XLA refuses to start on one it does not.
func xlaEnv(prev string, set bool, dir string) (add, note string) {
	if strings.Contains(prev, "--xla_dump_to") {
		return "", fmt.Sprintf("gpurr: record: %s names its own --xla_dump_to, which is kept: XLA's kernels (JAX's) are shown without their lines", xlaFlagsVar)
	}
	flags := "--xla_dump_to=" + dir + " --xla_dump_hlo_as_text"
	if set && strings.TrimSpace(prev) != "" {
		flags = prev + " " + flags
	}
	return xlaFlagsVar + "=" + flags, ""
}

// pruneXLADump deletes from XLA's dump folder, once the program has ended, every file readers
// do not use (the modules before optimization, buffer assignments, configurations: about
// five sixths of the dump), and the folder when nothing is left of it (no XLA program ran).
// note is a warning line when the dump left is one that readers cannot read, or "".
func pruneXLADump(dir string) (note string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	kept := 0
	for _, e := range entries {
		if !e.IsDir() && recording.KeepXLAFile(e.Name()) {
			kept++
			continue
		}
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
	if kept == 0 {
		os.Remove(dir)
		return ""
	}
	if x := recording.ReadXLA(dir); x != nil && x.Err != nil {
		return fmt.Sprintf("gpurr: record: warning: %v: XLA's kernels are shown without their lines", x.Err)
	}
	return ""
}

const pytorchAllocConf = "PYTORCH_CUDA_ALLOC_CONF"

// pytorchAllocatorEnv decides how a PyTorch program allocates under memory
// capture. PyTorch's caching allocator carves tensors out of segments of up
// to gigabytes that the driver sees as one allocation, so every launch would
// hash whole segments (a GPT training step: 0.48 GB per launch, 8.5x slower).
// Its cudaMallocAsync backend makes each tensor its own driver allocation, at
// no measurable cost to the step, so regions are the tensors themselves. Step
// digests need it as much: where the caching allocator places a tensor inside a
// segment depends on when other streams' events complete (DDP's buckets,
// NCCL's recordStream), so two runs of a deterministic DDP job would hash
// segments that differ. A setting of the user's own is kept. It returns the variable to add to the
// program's environment (or "") and a line for stderr (or "").
func pytorchAllocatorEnv(memoryMode string, keep bool, conf string, confSet bool) (add, note string) {
	switch {
	case memoryMode == recording.MemoryOff || keep:
		return "", ""
	case strings.Contains(conf, "cudaMallocAsync"):
		return "", ""
	case confSet:
		return "", fmt.Sprintf("gpurr: record: %s=%s is kept: a PyTorch program's regions are whole caching-allocator segments, so hashing costs more (docs/memory.md)", pytorchAllocConf, conf)
	}
	add = pytorchAllocConf + "=backend:cudaMallocAsync"
	return add, "gpurr: record: --memory: if the program uses PyTorch, it runs with " + add + " so that each tensor is its own region (--keep-pytorch-allocator to keep the caching allocator)"
}

// summaryMaxBytes bounds the recordings record summarizes at exit: reading
// one costs about a second per 100 MB, and info is there for larger ones.
const summaryMaxBytes = 256 << 20

// summarizeRecording says in a line or two what was recorded, and loudly
// what is incomplete or was lost.
func summarizeRecording(w io.Writer, dir string) {
	set, err := recording.Open(dir)
	if err != nil {
		fmt.Fprintf(w, "gpurr: record: nothing recorded in %s: no process initialized CUDA (run gpurr doctor if it should have)\n", dir)
		return
	}
	var size int64
	for _, p := range set.Processes {
		size += p.Size
	}
	if size > summaryMaxBytes {
		fmt.Fprintf(w, "gpurr: recorded %s into %s (gpurr info %s)\n", info.Count(len(set.Processes), "process"), dir, dir)
		return
	}
	var launches, lost uint64
	var problems []string
	unmatched := ""
	for _, p := range set.Processes {
		var stats *pb.Stats
		var memory *pb.MemoryConfig
		var selected int
		complete := false
		res, err := p.Scan(func(b *pb.Batch) error {
			if b.Stats != nil {
				stats = b.Stats
			}
			if b.Process != nil {
				memory = b.Process.GetMemory()
			}
			for _, l := range b.Launches {
				if l.GetMemory().GetSnapshotSelected() {
					selected++
				}
			}
			complete = complete || b.End != nil
			return nil
		})
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s unreadable: %v", p.Name, err))
		case res.Truncated || !complete:
			problems = append(problems, p.Name+" incomplete")
		}
		if s := snapshotSelection(memory); s != "" && complete && selected == 0 {
			unmatched = s
		}
		launches += stats.GetLaunches()
		lost += stats.GetLaunchesDropped() + stats.GetActivitiesDropped() + stats.GetRingBytesDropped() + stats.GetModulesFailed()
	}
	fmt.Fprintf(w, "gpurr: recorded %s in %s into %s (gpurr info %s)\n", info.Count(launches, "launch"), info.Count(len(set.Processes), "process"), dir, dir)
	if lost > 0 {
		problems = append(problems, "records were lost (see gpurr info)")
	}
	if unmatched != "" {
		problems = append(problems, unmatched+" matched no launch: nothing was snapshotted")
	}
	if len(problems) > 0 {
		termsafe.Fprintf(w, "gpurr: record: %s\n", strings.Join(problems, "; ")) // process names are host names
	}
}

// snapshotSelection is the snapshot selection a recording asked for, as
// its flags, or "" when it asked for none.
func snapshotSelection(m *pb.MemoryConfig) string {
	if m.GetMode() != recording.MemorySnapshot {
		return ""
	}
	var flags []string
	if k := m.GetSnapshotKernels(); k != "" {
		flags = append(flags, fmt.Sprintf("--snapshot-kernels %q", k))
	}
	if l := m.GetSnapshotLaunches(); l != "" {
		flags = append(flags, "--snapshot-launches "+l)
	}
	return strings.Join(flags, " ")
}
