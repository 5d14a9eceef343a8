package agent

/*
#include <stdlib.h>
#include "probe.h"
*/
import "C"

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/fatbin"
	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/ptx"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// liveProbes is --probe in the recorded process (probe.h has the C half). Modules are noted
// as the program loads them, with their PTX when there is some (the module was loaded from
// PTX, or Triton's cache holds the PTX of its cubin); at a kernel's first launch, a kernel
// --probe picks is instrumented (instrument.InjectLiveProbes) and JITted into the launching
// context, and its launches from then on run that copy.
type liveProbes struct {
	spec    agentcfg.ProbeSpec
	mu      sync.Mutex
	modules map[uintptr]probeModule // by CUmodule handle
	kernels []*pb.ProbeKernel       // decided since the writer last took them (and logs them: it alone may)
}

// probeModule is what a loaded module offers probes: its PTX, or why there is none.
type probeModule struct {
	ptx    []byte
	reason string
}

// probes is set before the agent starts when --probe is given.
var probes *liveProbes

func newLiveProbes(spec string) (*liveProbes, error) {
	s, err := agentcfg.ParseProbe(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", agentcfg.Probe, err)
	}
	return &liveProbes{spec: s, modules: map[uintptr]probeModule{}}, nil
}

// probeSkipReasons words GP_PROBE_SKIP_* (agent.h) for ProbeResult.skipped.
var probeSkipReasons = map[C.uint32_t]string{
	C.GP_PROBE_SKIP_EXTRA:       "parameters passed packed (extra): no room for the probes' own",
	C.GP_PROBE_SKIP_CAPTURED:    "launched into a CUDA graph being captured",
	C.GP_PROBE_SKIP_POOL_FULL:   "earlier launches' records still filled the probe pool",
	C.GP_PROBE_SKIP_TOO_LARGE:   "more CTAs than the probe pool holds records for",
	C.GP_PROBE_SKIP_FAILED:      "the launch failed",
	C.GP_PROBE_SKIP_CUDA_ERROR:  "a CUDA call of the agent's around it failed",
	C.GP_PROBE_SKIP_PARAMS:      "too many parameters",
	C.GP_PROBE_SKIP_RESOURCES:   "a larger block or more shared memory than the instrumented copy can take (it ran uninstrumented)",
	C.GP_PROBE_SKIP_COOPERATIVE: "a cooperative launch, whose grid must be resident at once: the instrumented copy's registers might not allow it",
}

// gpurrProbeModule is called on the program's thread as a cuModuleLoadData, ...Ex or
// ...FatBinary returns: input is what the program passed, image and size the module image
// CUPTI reported for it (nil when it did not).
//
//export gpurrProbeModule
func gpurrProbeModule(module, input, image unsafe.Pointer, size C.size_t) {
	defer func() { _ = recover() }()
	p := probes
	if p == nil || module == nil {
		return
	}
	head := unsafe.Slice((*byte)(input), 4)
	text := func() string { return C.GoString((*C.char)(input)) }
	cubin := func() []byte {
		if image == nil || size == 0 {
			return nil
		}
		return C.GoBytes(image, C.int(size))
	}
	whole := func() []byte { // a fat binary's header says its size
		head := unsafe.Slice((*byte)(input), 16)
		return unsafe.Slice((*byte)(input), 16+binary.LittleEndian.Uint64(head[8:]))
	}
	m, keep := p.classify(head, text, cubin, whole)
	if !keep {
		return
	}
	p.mu.Lock()
	p.modules[uintptr(module)] = m
	p.mu.Unlock()
}

// classify finds a loaded module's PTX from the first 4 bytes of what the program passed, its
// text (PTX is NUL-terminated) and the cubin CUPTI reported; keep is false for a cubin none of
// whose kernels --probe picks (most modules: nothing to remember).
func (p *liveProbes) classify(head []byte, text func() string, cubin, fatbinBytes func() []byte) (m probeModule, keep bool) {
	switch {
	case bytes.Equal(head, []byte("\x7fELF")):
		img := cubin()
		if img == nil {
			return probeModule{reason: "no PTX: CUPTI gave no image for its cubin"}, true
		}
		names := moduleFunctions(img)
		if !p.picks(names) {
			return m, false
		}
		sum := sha256.Sum256(img)
		m.ptx = programTritonPTX(hex.EncodeToString(sum[:]), names)
		if m.ptx == nil {
			m.reason = "no PTX: its module is a cubin whose PTX Triton's cache does not hold (probes instrument PTX)"
		}
		return m, true
	case binary.LittleEndian.Uint32(head) == fatbin.Magic:
		return fatbinModule(fatbinBytes())
	}
	t := text()
	if s := strings.TrimLeft(t, " \t\r\n"); !strings.HasPrefix(s, "//") && !strings.HasPrefix(s, ".") {
		return probeModule{reason: "no PTX: its module is an image gpurr does not read (not PTX text, a cubin or a fat binary)"}, true
	}
	if _, err := ptx.Parse([]byte(t)); err != nil {
		return probeModule{reason: fmt.Sprintf("its module's PTX does not parse: %v", err)}, true
	}
	return probeModule{ptx: []byte(t)}, true
}

// fatbinModule is what a module loaded from a fat binary offers: the PTX entry of the newest
// architecture, when it has one.
func fatbinModule(b []byte) (probeModule, bool) {
	ptxs, err := fatbin.PTXs(b)
	if err != nil {
		return probeModule{reason: fmt.Sprintf("no PTX: its module was loaded from a fat binary: %v", err)}, true
	}
	p, _ := fatbin.Pick(ptxs, 0)
	return probeModule{ptx: bytes.Clone(p.Text)}, true
}

// gpurrProbeForgetModule is called as the program unloads a module.
//
//export gpurrProbeForgetModule
func gpurrProbeForgetModule(module unsafe.Pointer) {
	defer func() { _ = recover() }()
	if p := probes; p != nil {
		p.mu.Lock()
		delete(p.modules, uintptr(module))
		p.mu.Unlock()
	}
}

// gpurrProbeFunction decides, at a kernel's first launch on the program's thread, whether
// its launches run with probes: 1 with *out set to the instrumented copy, 0 when --probe does
// not pick it or it cannot be instrumented (the recording says why, once).
//
//export gpurrProbeFunction
func gpurrProbeFunction(module unsafe.Pointer, name *C.char, kernelID C.uint64_t, nparams C.uint32_t, out *unsafe.Pointer) (ok C.int) {
	p := probes
	if p == nil {
		return 0
	}
	kernel := C.GoString(name)
	if !p.spec.Kernels.MatchString(kernel) {
		return 0
	}
	pk := &pb.ProbeKernel{KernelId: uint64(kernelID), Count: p.spec.Classes}
	defer func() {
		if e := recover(); e != nil {
			pk.Instrumented, pk.Reason, ok = false, fmt.Sprintf("internal error: %v", e), 0
		}
		p.mu.Lock()
		p.kernels = append(p.kernels, pk)
		p.mu.Unlock()
	}()
	fn, counted, err := p.instrument(uintptr(module), kernel, int(nparams))
	if err != nil {
		pk.Reason = err.Error()
		return 0
	}
	pk.Instrumented, pk.Counted = true, uint32(counted)
	*out = fn
	return 1
}

// picks says whether --probe's expression matches any of a module's kernels.
func (p *liveProbes) picks(names []string) bool {
	for _, n := range names {
		if p.spec.Kernels.MatchString(n) {
			return true
		}
	}
	return false
}

// instrument makes kernel's instrumented copy in the current context.
func (p *liveProbes) instrument(module uintptr, kernel string, nparams int) (unsafe.Pointer, int, error) {
	p.mu.Lock()
	m, known := p.modules[module]
	p.mu.Unlock()
	text := m.ptx
	if text == nil {
		// A module the runtime loaded (cuLibraryLoadData, lazily) for a <<<>>> launch, or a
		// cubin: the program's own fat binaries may hold the kernel's PTX.
		var err error
		if text, err = programFatbins.ptx(kernel); err != nil {
			if known && m.reason != "" {
				return nil, 0, fmt.Errorf("%s; %v", m.reason, err)
			}
			return nil, 0, err
		}
	}
	mod, err := ptx.Parse(text)
	if err != nil {
		return nil, 0, fmt.Errorf("its PTX does not parse: %v", err)
	}
	if f := mod.Function(kernel); f != nil && len(f.Params) != nparams {
		return nil, 0, fmt.Errorf("its PTX declares %d parameters, the driver %d: not the PTX it was built from", len(f.Params), nparams)
	}
	counted, err := instrument.InjectLiveProbes(mod, kernel, p.spec.Count)
	if err != nil {
		return nil, 0, err
	}
	ctext := C.CString(mod.String())
	defer C.free(unsafe.Pointer(ctext))
	cname := C.CString(kernel)
	defer C.free(unsafe.Pointer(cname))
	var fn C.gp_CUfunction
	if r := C.gp_probe_load(ctext, cname, &fn); r != 0 {
		return nil, 0, fmt.Errorf("the driver did not load the instrumented PTX: %s", cuda.Result(r).Error())
	}
	return unsafe.Pointer(fn), counted, nil
}

// drainProbes moves what probes produced into the batch: the kernels decided, and the
// records of launches whose copies have arrived, in launch order per context.
func (r *recorder) drainProbes() {
	p := probes
	if p == nil {
		return
	}
	p.mu.Lock()
	kernels := p.kernels
	p.kernels = nil
	p.mu.Unlock()
	for _, k := range kernels {
		r.batch.ProbeKernels = append(r.batch.ProbeKernels, k)
		r.added()
		name := fmt.Sprintf("kernel %d", k.GetKernelId())
		if kern := r.kernels[k.GetKernelId()]; kern != nil {
			name = kern.GetName()
		}
		if k.GetInstrumented() {
			r.logf("info", "probes: %s instrumented", name)
		} else {
			r.logf("warn", "probes: %s runs without probes: %s", name, k.GetReason())
		}
	}
	var v C.gp_probe_view
	for C.gp_probe_poll(&v) != 0 {
		res := &pb.ProbeResult{LaunchSeq: uint64(v.seq)}
		if v.skipped != 0 {
			res.Skipped = probeSkipReasons[v.skipped]
		} else {
			res.Ctas = C.GoBytes(unsafe.Pointer(v.records), C.int(v.bytes))
			// The GPU kept the entry time complemented (an atomic max over zeroed records): a
			// record no thread reached reads as all ones, as the replay path's do.
			for i := 0; i+instrument.ProbeRecordBytes <= len(res.Ctas); i += instrument.ProbeRecordBytes {
				binary.LittleEndian.PutUint64(res.Ctas[i:], ^binary.LittleEndian.Uint64(res.Ctas[i:]))
			}
		}
		C.gp_probe_release()
		r.batch.Probes = append(r.batch.Probes, res)
		r.added()
	}
}

// finishProbes collects, at the end, the records of launches still in flight: for at most
// wait, as the program's last kernels finish.
func (r *recorder) finishProbes(wait time.Duration) {
	if probes == nil {
		return
	}
	deadline := time.Now().Add(wait)
	for {
		r.drainProbes()
		if C.gp_probe_outstanding() == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := C.gp_probe_outstanding(); n > 0 {
		r.logf("warn", "probes: the records of %d launches had not arrived when the recording ended", uint64(n))
	}
}

// probeSkipped turns a GP_REC_PROBE_SKIP record into the launch's ProbeResult.
func (r *recorder) probeSkipped(s *C.gp_probe_skip_rec) {
	r.batch.Probes = append(r.batch.Probes, &pb.ProbeResult{LaunchSeq: uint64(s.seq), Skipped: probeSkipReasons[s.reason]})
}
