// Package agent is gpurr's in-process recorder: the CUDA driver loads it
// (through cmd/libgpurr, a c-shared library named by CUDA_INJECTION64_PATH)
// into the program being recorded. Its C half receives CUPTI callbacks on
// the program's threads and pushes fixed-layout records into a bounded ring
// (internal.h lists its files by job); its Go half drains the ring on a
// goroutine and writes the recording. Configuration comes from the
// environment that `gpurr record` sets (internal/agentcfg).
package agent

/*
#cgo CFLAGS: -O2 -std=gnu11 -Wall -Wno-unused-function -fvisibility=hidden
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "agent.h"
#include "autograd.h"
#include "memcap.h"
*/
import "C"

import (
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/kernels"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// CallstackModes are the C side's callstack modes, by agentcfg's.
var CallstackModes = map[string]C.int{
	agentcfg.CallstackOff:    C.GP_STACK_OFF,
	agentcfg.CallstackAuto:   C.GP_STACK_AUTO,
	agentcfg.CallstackPython: C.GP_STACK_PYTHON,
	agentcfg.CallstackNative: C.GP_STACK_NATIVE,
}

// The process-wide recorder: the agent is a singleton by nature (one per
// process, created by the driver's single InitializeInjection call).
var (
	active         *recorder
	kernelFilter   *regexp.Regexp
	snapshotFilter *regexp.Regexp
	stepRange      *regexp.Regexp // --step-range: the NVTX ranges that are training steps
)

// Initialize starts recording in this process. It never fails the program:
// problems are reported on stderr (and in the recording when one exists)
// and the program runs on unrecorded. It returns 1, CUDA's "success" for
// InitializeInjection.
func Initialize() (ok int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "gpurr: agent: internal error, not recording: %v\n%s", p, debug.Stack())
		}
		ok = 1
	}()
	if active != nil {
		return 1
	}
	if os.Getenv(agentcfg.Out) == "" {
		return 1 // loaded without `gpurr record`: stay out of the way
	}
	cfg, err := configFromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpurr: agent: %v; not recording this process\n", err)
		return 1
	}
	r, err := newRecorder(cfg.Out, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpurr: agent: %v; not recording this process\n", err)
		return 1
	}
	if err := r.start(); err != nil {
		r.logf("error", "not recording: %v", err)
		r.close("agent failed to start")
		fmt.Fprintf(os.Stderr, "gpurr: agent: %v; not recording this process (see %s)\n", err, r.w.Dir())
		return 1
	}
	active = r
	return 1
}

// configFromEnv reads the configuration gpurr record passed, and compiles its kernel filters.
func configFromEnv() (agentcfg.Config, error) {
	cfg, err := agentcfg.Decode(os.LookupEnv)
	if err != nil {
		return cfg, err
	}
	if cfg.Kernels != "" {
		kernelFilter = regexp.MustCompile(cfg.Kernels) // Decode validated them
	}
	if cfg.Memory.SnapshotKernels != "" {
		snapshotFilter = regexp.MustCompile(cfg.Memory.SnapshotKernels)
	}
	if cfg.StepRange != "" {
		stepRange, _ = recording.CompileStepRange(cfg.StepRange) // Decode validated it
	}
	return cfg, nil
}

// start configures and starts the C side, then the writer goroutine.
func (r *recorder) start() error {
	cupti := C.CString(r.cfg.CUPTI)
	defer C.free(unsafe.Pointer(cupti))
	ccfg := C.gp_config{
		cupti_path:     cupti,
		ring_bytes:     C.uint64_t(r.cfg.RingBytes),
		callstack_mode: CallstackModes[r.cfg.Callstack],
	}
	if kernelFilter != nil {
		ccfg.has_kernel_filter = 1
	}
	ccfg.gpu_timing = map[string]C.int{agentcfg.TimingOn: C.GP_TIMING_CONCURRENT, agentcfg.TimingSerial: C.GP_TIMING_SERIAL,
		agentcfg.TimingSample: C.GP_TIMING_SAMPLED, agentcfg.TimingSteps: C.GP_TIMING_STEPS, agentcfg.TimingOff: C.GP_TIMING_OFF}[r.cfg.GPUTiming]
	if r.cfg.GPUTiming == agentcfg.TimingSteps {
		first, every, _ := agentcfg.ParseTimingSteps(r.cfg.GPUTimingSteps) // Decode validated it
		ccfg.timing_first_steps, ccfg.timing_step_every = C.uint32_t(first), C.uint32_t(every)
	}
	if r.cfg.HangTimeout > 0 {
		ccfg.gpu_timing_from_start = 1
	}
	if m := r.cfg.Memory; m.Mode != recording.MemoryOff {
		mem, err := newMemoryCapture(r)
		if err != nil {
			return fmt.Errorf("memory capture: %w", err)
		}
		r.mem = mem
		ccfg.memory_mode = map[string]C.int{recording.MemoryHash: C.GP_MEM_HASH, recording.MemorySnapshot: C.GP_MEM_SNAPSHOT, recording.MemoryDigest: C.GP_MEM_DIGEST}[m.Mode]
		if m.Digests() {
			ccfg.digests = 1
			ccfg.digest_every = C.uint32_t(m.DigestEvery)
			if m.DigestAll {
				ccfg.digest_all = 1
			}
		}
		if m.HashSteps != "" {
			lo, hi, _ := agentcfg.ParseSteps(m.HashSteps) // Decode validated it
			ccfg.hash_steps, ccfg.hash_step_lo, ccfg.hash_step_hi = 1, C.uint32_t(lo), C.uint32_t(hi)
		}
		if m.OnFull == agentcfg.OnFullDropOldest {
			ccfg.on_full = C.GP_ON_FULL_DROP_OLDEST
		}
		// Both stay allocated for the life of the process: C keeps them.
		ptx := kernels.MemcapPTX()
		ccfg.memcap_ptx = (*C.char)(C.CBytes(ptx))
		ccfg.results_bytes = defaultResultsBytes
		ccfg.staging_bytes = C.uint64_t(m.StagingBytes)
		mask, _, _ := agentcfg.ParseNanScan(m.NanScan) // Decode validated it
		ccfg.nan_dtypes = C.uint32_t(mask)
		if m.Mode == recording.MemoryHash && m.WriteSets != agentcfg.WriteSetsAll {
			startLoadedWriteSets()
		}
		if m.Mode == recording.MemoryHash {
			ccfg.write_sets = map[string]C.int{agentcfg.WriteSetsAll: C.GP_WRITE_SETS_ALL, agentcfg.WriteSetsProved: C.GP_WRITE_SETS_PROVED,
				agentcfg.WriteSetsLearned: C.GP_WRITE_SETS_LEARNED}[m.WriteSets]
			ccfg.audit_every = auditEvery
			ccfg.defer_hashes = map[string]C.int{agentcfg.DeferBeside: C.GP_DEFER_BESIDE, agentcfg.DeferStream: C.GP_DEFER_STREAM}[m.DeferHashes]
		}
		if m.FlightRecorder > 0 {
			ccfg.flight_recorder = 1
			r.watchDumpSignal()
		}
		ranges, _ := agentcfg.ParseRanges(m.SnapshotLaunches)
		if len(ranges) > 0 {
			arr := (*[1 << 20]C.uint64_t)(C.malloc(C.size_t(24 * len(ranges))))
			for i, rg := range ranges {
				arr[3*i], arr[3*i+1], arr[3*i+2] = C.uint64_t(rg.Lo), C.uint64_t(rg.Hi), C.uint64_t(rg.Step)
			}
			ccfg.snapshot_ranges = &arr[0]
			ccfg.nsnapshot_ranges = C.int(len(ranges))
		}
	}
	ccfg.step_every = C.uint32_t(r.cfg.StepEvery)
	if stepRange != nil {
		ccfg.step_range = 1
	}
	if r.cfg.Probe != "" {
		p, err := newLiveProbes(r.cfg.Probe)
		if err != nil {
			return err
		}
		probes = p
		ccfg.probes = 1
	}
	r.info.Nvtx, r.info.NvtxReason = nvtxEnabled()
	if r.info.Nvtx {
		ccfg.nvtx = 1
	} else {
		r.logf("warn", "NVTX ranges are not recorded: %s", r.info.NvtxReason)
	}
	if err := bindDriver(); err != nil {
		ccfg.driver_error = C.CString(err.Error()) // C keeps it
	}
	var errbuf [512]C.char
	started := C.gp_start(&ccfg, &errbuf[0], C.size_t(len(errbuf))) != 0
	r.info.CuptiApiVersion = uint32(C.gp_cupti_version())
	r.info.DriverVersion = int32(C.gp_driver_version())
	r.info.Python = pythonDescription()
	r.info.Autograd = autogradInfo()
	if a := r.info.Autograd; a != nil && !a.Linked {
		r.logf("warn", "backward launches are not linked to forward lines: %s", a.Reason)
	}
	r.info.StartNs = uint64(C.gp_timestamp())
	if err := r.w.Write(&pb.Batch{Process: r.info}); err != nil {
		return fmt.Errorf("write recording: %w", err)
	}
	if !started {
		return fmt.Errorf("%s", C.GoString(&errbuf[0]))
	}
	if err := r.watchFatalSignals(); err != nil {
		r.logf("warn", "a crash of the program will lose the launches since the last frame: %v", err)
	}
	r.wg.Add(1)
	go r.loop()
	if r.mem != nil {
		r.wg.Add(1)
		go r.memLoop()
	}
	return nil
}

// bindDriver hands the C side the driver functions it calls, from the
// libcuda.so.1 that internal/cuda opens: libcuda is opened in one place.
// gp_start says which ones it cannot do without.
func bindDriver() error {
	if err := cuda.Load(); err != nil {
		return err
	}
	for i := C.size_t(0); ; i++ {
		name := C.gp_driver_symbol(i)
		if name == nil {
			return nil
		}
		C.gp_driver_bind(i, C.uintptr_t(cuda.Proc(C.GoString(name))))
	}
}

// autogradInfo says whether launches carry PyTorch's autograd context, nil
// when the process has no libtorch.
func autogradInfo() *pb.AutogradInfo {
	var a C.gp_autograd_info
	C.gp_autograd_describe(&a)
	if a.present == 0 {
		return nil
	}
	return &pb.AutogradInfo{TorchVersion: C.GoString(a.version), Linked: a.linked != 0, Reason: C.GoString(a.reason)}
}

func pythonDescription() string {
	s := C.GoString(C.gp_python_description())
	if s == "no python" {
		return ""
	}
	return s
}

//export gpurrKernelSelected
func gpurrKernelSelected(name *C.char) (selected C.int) {
	defer func() {
		if recover() != nil {
			selected = 1 // record rather than lose launches
		}
	}()
	if kernelFilter == nil || kernelFilter.MatchString(C.GoString(name)) {
		return 1
	}
	return 0
}

// gpurrStepRange says whether an NVTX range's message (n bytes at msg) marks a training step:
// the reader's rule (recording.Stepper), so that step digests fall where reports number steps.
//
//export gpurrStepRange
func gpurrStepRange(msg *C.char, n C.int) (step C.int) {
	defer func() {
		if recover() != nil {
			step = 0
		}
	}()
	if stepRange != nil && stepRange.MatchString(C.GoStringN(msg, n)) {
		return 1
	}
	return 0
}

//export gpurrSnapshotKernel
func gpurrSnapshotKernel(name *C.char) (selected C.int) {
	defer func() {
		if recover() != nil {
			selected = 0
		}
	}()
	if snapshotFilter == nil || snapshotFilter.MatchString(C.GoString(name)) {
		return 1
	}
	return 0
}

// gpurrCudaError is called on the program's thread when a call that
// reports kernel failures returns an error: the flight recorder writes its
// window before the program reacts (often by exiting). It waits at most
// a few seconds.
//
//export gpurrCudaError
func gpurrCudaError(call *C.char, code C.int) {
	defer func() { _ = recover() }()
	r := active
	if r == nil || r.mem == nil || r.mem.flight == nil {
		return
	}
	reason := fmt.Sprintf("%s returned CUDA error %d", C.GoString(call), int(code))
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.dumpFlightRecorder(reason)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

var exitOnce sync.Once

//export gpurrAtExit
func gpurrAtExit() {
	defer func() { _ = recover() }()
	exitOnce.Do(func() {
		if active != nil {
			active.shutdown("exit")
		}
	})
}
