// What the agent's C files share. Each file does one job:
//
//   start.c      gp_start: configuration, fork guard, clock, CUPTI's and the
//                driver's function tables, the callback subscription, exit
//   ring.c       the record ring the Go writer drains, the counters, log records
//   launch.c     the CUPTI callback on the program's threads: launches, graph
//                launches and nodes, modules, kernels, devices, stream ids
//   callstack.c  each launch's callstack, each distinct stack described once
//   steps.c      training steps as the program runs (step digests, --hash-steps)
//   activity.c   GPU timing: CUPTI's activity buffers into activity records
//   memcap.c     memory capture (memcap.h)
//   nvtx.c       NVTX ranges (the agent as NVTX's injection library) and the range a launch is in
//   autograd.c   PyTorch's autograd context of a launch (autograd.h)
//   pystack.c    the calling thread's Python frames (pystack.h)
//   unwind.c     the calling thread's native frames (unwind.h)
//   fatal.c      fatal signals (fatal.h)
//
// agent.h is the contract with the Go writer (record layouts, configuration,
// the calls Go makes) and cabi.h the hand-declared CUDA and CUPTI ABI. Every
// name declared here starts with gp_ and stays inside libgpurr.so (hidden
// visibility, so a use from another file is a direct call or a PC-relative
// access, as within one file); what one file alone uses is static there.
#ifndef GPURR_INTERNAL_H
#define GPURR_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "agent.h"
#include "cabi.h"
#include "memcap.h"

#pragma GCC visibility push(hidden)

// ---- start.c: process-wide state, set once by gp_start ----

// Every launch reads the fork guard and the configuration: they share a
// cache line (gp_proc is 64-byte aligned, and the fields a launch reads are
// in its first 64 bytes).
typedef struct {
  volatile int forked_child;  // set in a child forked after gp_start: no work there, and never Go
  pid_t agent_pid;            // the process gp_start ran in
  gp_config cfg;
} gp_process;
extern gp_process gp_proc;
_Static_assert(offsetof(gp_process, cfg) + offsetof(gp_config, memory_mode) + sizeof(int) <= 64,
               "the launch path's fields of gp_proc share its first cache line");

// CUPTI's entry points, resolved with dlsym from the library the
// configuration names.
typedef struct {
  gp_CUptiResult (*subscribe)(gp_CUpti_SubscriberHandle *, gp_CallbackFunc, void *);
  gp_CUptiResult (*enableCallback)(uint32_t, gp_CUpti_SubscriberHandle, int, uint32_t);
  gp_CUptiResult (*activityRegisterCallbacks)(gp_BufferRequestFunc, gp_BufferCompletedFunc);
  gp_CUptiResult (*activityEnable)(int);
  gp_CUptiResult (*activityDisable)(int);
  gp_CUptiResult (*activityGetNextRecord)(uint8_t *, size_t, gp_Activity **);
  gp_CUptiResult (*activityFlushAll)(uint32_t);
  gp_CUptiResult (*activityGetNumDroppedRecords)(gp_CUcontext, uint32_t, size_t *);
  gp_CUptiResult (*getTimestamp)(uint64_t *);
  gp_CUptiResult (*getStreamIdEx)(gp_CUcontext, gp_CUstream, uint8_t, uint32_t *);
  gp_CUptiResult (*getGraphNodeId)(gp_CUgraphNode, uint64_t *);
  gp_CUptiResult (*getGraphId)(gp_CUgraph, uint32_t *);
  gp_CUptiResult (*getVersion)(uint32_t *);
  gp_CUptiResult (*getResultString)(gp_CUptiResult, const char **);
} gp_cupti_api;
extern gp_cupti_api gp_cupti;
// cuptiGetCallbackName, optional: NULL where CUPTI lacks it.
extern gp_CUptiResult (*gp_cupti_callback_name)(int domain, uint32_t cbid, const char **name);

// The driver functions the agent calls, in the order gp_driver_symbol
// names them. The Go side binds them (gp_driver_bind) from the
// libcuda.so.1 that internal/cuda opened: the agent does not open libcuda
// itself.
typedef struct {
  // launches (launch.c)
  gp_CUresult (*funcGetParamInfo)(gp_CUfunction, size_t, size_t *, size_t *);
  gp_CUresult (*kernelGetParamInfo)(void *, size_t, size_t *, size_t *);  // optional: older drivers lack it
  gp_CUresult (*funcGetName)(const char **, gp_CUfunction);
  gp_CUresult (*ctxGetDevice)(gp_CUdevice *);
  gp_CUresult (*deviceGetName)(char *, int, gp_CUdevice);
  gp_CUresult (*deviceGetUuid)(gp_CUuuid *, gp_CUdevice);
  gp_CUresult (*deviceGetAttribute)(int *, int, gp_CUdevice);
  gp_CUresult (*deviceTotalMem)(size_t *, gp_CUdevice);
  gp_CUresult (*driverGetVersion)(int *);
  // memory capture (memcap.c), needed only when it is on
  gp_CUresult (*memGetAddressRange)(uint64_t *, size_t *, uint64_t);
  gp_CUresult (*moduleLoadData)(void **, const void *);
  gp_CUresult (*moduleGetFunction)(gp_CUfunction *, void *, const char *);
  gp_CUresult (*launchKernel)(gp_CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              gp_CUstream, void **, void **);
  gp_CUresult (*memHostAlloc)(void **, size_t, unsigned);
  gp_CUresult (*memHostGetDevicePointer)(uint64_t *, void *, unsigned);
  gp_CUresult (*memAlloc)(uint64_t *, size_t);
  gp_CUresult (*memsetD8)(uint64_t, unsigned char, size_t);
  gp_CUresult (*memsetD8Async)(uint64_t, unsigned char, size_t, gp_CUstream);
  gp_CUresult (*streamIsCapturing)(gp_CUstream, int *);
  gp_CUresult (*threadExchangeStreamCaptureMode)(int *);
  gp_CUresult (*getErrorName)(gp_CUresult, const char **);
  // live probes (probe.c), needed only with --probe
  gp_CUresult (*funcGetModule)(void **, gp_CUfunction);
  gp_CUresult (*memsetD32Async)(uint64_t, unsigned, size_t, gp_CUstream);
  gp_CUresult (*memcpyDtoHAsync)(void *, uint64_t, size_t, gp_CUstream);
  gp_CUresult (*eventCreate)(void **, unsigned);
  gp_CUresult (*eventRecord)(void *, gp_CUstream);
  gp_CUresult (*eventQuery)(void *);
  gp_CUresult (*funcGetAttribute)(int *, int, gp_CUfunction);
  gp_CUresult (*funcSetAttribute)(gp_CUfunction, int, int);
  // hash mode's deferred hash kernels (memcap.c): launched from any thread
  gp_CUresult (*ctxPushCurrent)(gp_CUcontext);
  gp_CUresult (*ctxPopCurrent)(gp_CUcontext *);
  // ... and the stream they run on beside the program's (memcap.c)
  gp_CUresult (*streamCreate)(gp_CUstream *, unsigned);
  gp_CUresult (*streamWaitEvent)(gp_CUstream, void *, unsigned);
  gp_CUresult (*eventSynchronize)(void *);
} gp_cu_api;
extern gp_cu_api gp_cu;

enum { GP_NEED_ALWAYS = 0, GP_NEED_MEMORY = 1, GP_NEED_OPTIONAL = 2, GP_NEED_PROBE = 3 };

// gp_driver_missing returns the first driver function of that need that
// was not bound, NULL when none is missing.
const char *gp_driver_missing(int need);

// gp_cupti_error names a CUPTI result.
const char *gp_cupti_error(gp_CUptiResult r);

// gp_start_process takes the configuration and sets up what needs neither
// CUPTI nor the driver: the fork guard, the clock, per-thread state.
void gp_start_process(const gp_config *cfg);

static inline uint64_t gp_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

// gp_cycles reads the CPU's cycle counter (x86-64's TSC, aarch64's virtual counter): what the
// agent times its own work with, cheaply (gp_tsc_ns_per_cycle converts).
static inline uint64_t gp_cycles(void) {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return gp_monotonic_ns();
#endif
}

// gp_clock is CUPTI's timestamp (gp_timestamp), inline for the launch path.
static inline uint64_t gp_clock(void) {
  uint64_t t = 0;
  if (gp_cupti.getTimestamp) gp_cupti.getTimestamp(&t);
  return t;
}

// ---- ring.c: records to the Go writer, counters, log ----

extern gp_counters gp_counts;
#define GP_COUNT(field, n) atomic_fetch_add_explicit((_Atomic uint64_t *)&gp_counts.field, (n), memory_order_relaxed)

// gp_ring_init hands the ring its buffer, cap bytes (a power of two), and
// empties it.
void gp_ring_init(uint8_t *buf, uint64_t cap);


// gp_ring_push publishes one record whose header size is set; a record
// that does not fit is dropped and counted (invariant 3). It returns 1 when
// pushed. gp_ring_push_counted also adds 1 to *pushed (if not NULL) when the
// record fits, under the ring's lock, so that counter needs no atomic
// read-modify-write of its own.
int gp_ring_push(const void *rec);
int gp_ring_push_counted(const void *rec, uint64_t *pushed);

// gp_logf pushes a log record (level: 0 info, 1 warn, 2 error).
void gp_logf(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline uint32_t gp_pad8(uint32_t n) { return (n + 7u) & ~7u; }

// ---- the spinlock of the ring and of memory capture ----
//
// Every critical section under it is a bounded copy or table edit, so an
// uncontended lock costs one atomic exchange and one store, not two calls
// into libc. A waiter that spins too long yields, so a holder that was
// preempted gets the CPU back.

typedef _Atomic int gp_spinlock;

// gp_cpu_relax tells the core a spin-wait is under way.
static inline void gp_cpu_relax(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static inline void gp_spin_lock(gp_spinlock *l) {
  for (unsigned spins = 0; atomic_exchange_explicit(l, 1, memory_order_acquire);) {
    while (atomic_load_explicit(l, memory_order_relaxed)) {
      if (++spins < 128)  // a ring push holds the lock for ~50 ns; PAUSE is 10-140 cycles
        gp_cpu_relax();
      else
        sched_yield();
    }
  }
}

static inline void gp_spin_unlock(gp_spinlock *l) { atomic_store_explicit(l, 0, memory_order_release); }

// gp_spin_stuck reports whether l stays held for a millisecond: held by the
// thread a signal interrupted, which will not let it go while its handler
// waits. Another thread's hold lasts nanoseconds. Async-signal-safe.
static inline int gp_spin_stuck(gp_spinlock *l) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (atomic_load_explicit(l, memory_order_acquire)) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 1000000L) return 1;
  }
  return 0;
}

// gp_ring_stuck and gp_mem_stuck: a lock the Go writer needs (ring.c,
// memcap.c) is held by the interrupted thread (gp_spin_stuck), so a signal
// handler must not wait for the writer.
int gp_ring_stuck(void);
int gp_mem_stuck(void);

// ---- launch.c: the callback and per-thread state ----

// Initial-exec TLS: an offset from %fs instead of a __tls_get_addr call per
// access (about ten per launch with -fPIC's default model). A Go c-shared
// library is marked STATIC_TLS anyway (the Go runtime's own TLS is
// initial-exec), so this asks the loader for nothing it does not already do.
#define GP_TLS __thread __attribute__((tls_model("initial-exec")))

// GP_RANGE_DEPTH bounds the NVTX ranges a thread's stack holds (nvtx.c).
enum { GP_RANGE_DEPTH = 128 };

// GP_PARAMS_CAP bounds a launch's parameter bytes: CUDA 12.1+ allows up to
// 32764.
enum { GP_PARAMS_CAP = 32768 };

// GP_PROBE_ARGS bounds a probed launch's parameter count, the one probes add included.
enum { GP_PROBE_ARGS = 1025 };

// Large per-thread buffers live on the heap: the library's TLS block must
// stay tiny, because a Go c-shared library is marked static-TLS and the
// loader fits its whole TLS segment into a small reserve at dlopen.
typedef struct {
  struct {
    gp_launch_rec r;
    // The parameters, then the regions (memcap.h).
    uint8_t tail[GP_PARAMS_CAP + GP_MAX_REGIONS * sizeof(gp_region_rec) + GP_MAX_POINTERS * sizeof(gp_pointer_rec)];
  } launch;
  struct gp_stack_builder *stack;  // callstack.c's, allocated on first use
  gp_mem_launch mem;
  void *probe_args[GP_PROBE_ARGS];  // a probed launch's parameters: the kernel's, then its records' address
  // nvtx.c: the open push/pop ranges, innermost last; range_depth counts
  // those nested beyond the array too.
  struct {
    uint64_t id, domain;
  } ranges[GP_RANGE_DEPTH];
  uint32_t range_depth;
} gp_thread_scratch;

// gp_scratch returns the calling thread's scratch, allocated on first use;
// NULL when out of memory.
gp_thread_scratch *gp_scratch(void);

// gp_launch_init creates the per-thread state's key; gp_start_process calls it.
void gp_launch_init(void);

// gp_on_callback is the one CUPTI callback (cuptiSubscribe).
void gp_on_callback(void *userdata, int domain, uint32_t cbid, const void *data);
// The agent's time per launch is measured on one launch in GP_TIMING_SAMPLE per thread;
// gp_timing_this_launch says whether the launch in flight is one.
enum { GP_TIMING_SAMPLE = 16 };
int gp_timing_this_launch(void);

// gp_thread_id is the calling thread's Linux id, cached.
pid_t gp_thread_id(void);

// gp_in_agent_call marks the calling thread as inside the agent's own CUDA
// calls (enter 1) or out of them (0): their callbacks are ignored.
int gp_in_agent_call(int enter);

// ---- nvtx.c ----

// The innermost NVTX push/pop range open on this thread, 0 none: what a
// launch record names (one TLS read on the launch path).
extern GP_TLS uint64_t gp_range_current;

// gp_nvtx_inject fills the core and core2 slots of one NVTX instance with
// the agent's functions (what InitializeInjectionNvtx2 does); 0 when its
// export table is not what the agent knows.
int gp_nvtx_inject(gp_NvtxGetExportTableFunc get);
// gp_nvtx_start starts recording ranges, after naming the domains and
// strings made before it.
void gp_nvtx_start(void);

// ---- callstack.c ----

// gp_callstack_init prepares the stack walkers before the first launch.
void gp_callstack_init(void);

// gp_callstack_take takes the calling thread's stack as the configuration
// asks and returns its id, 0 for none. backward is set for a launch made in
// a PyTorch autograd node's backward whose forward line the writer can find
// (autograd.h). in_optimizer, when not NULL, is set to whether the stack is
// inside a PyTorch optimizer's step() (the rule of recording.InOptimizerStep).
uint64_t gp_callstack_take(int backward, int *in_optimizer);

// gp_optimizer_frame is that rule for one Python frame.
int gp_optimizer_frame(const char *file, const char *func);

// gp_callstack_owner walks the calling thread's native frames and returns
// the library among them that allocates memory for its own use (GP_OWNER_*,
// memcap.h): what an allocation made in this call belongs to.
int gp_callstack_owner(void);

// gp_library_kernel: whether a kernel of this name is a communication
// library's own (NCCL's collectives), whose unknown memory is the library's.
int gp_library_kernel(const char *name);

// ---- steps.c ----

// gp_step_call takes a launch call (a kernel or graph launch) in the order
// the program made it, seq, made inside an optimizer step or not, and
// returns its step: how many steps ended before it; *began is set when it
// is the first call of a step after the first.
uint32_t gp_step_call(uint64_t seq, int in_optimizer, int *began);

// gp_steps_on: the configuration needs steps while the program runs.
static inline int gp_steps_on(void) { return gp_proc.cfg.digests || gp_proc.cfg.hash_steps; }

// gp_step_hashed: hash mode hashes the launches of this step.
static inline int gp_step_hashed(uint32_t step) {
  return !gp_proc.cfg.hash_steps || (step >= gp_proc.cfg.hash_step_lo && step <= gp_proc.cfg.hash_step_hi);
}

// ---- activity.c ----

// gp_activity_start lets gp_flush_activity work and, with gpu_timing,
// asks CUPTI for kernel activity records: from now with from_start, else
// from the first launch on (gp_activity_first_launch).
void gp_activity_start(int gpu_timing, int from_start);

// gp_activity_first_launch turns kernel activity on as the process's first
// launch (or graph launch) begins, where gp_activity_start deferred it; one
// atomic load after that.
void gp_activity_first_launch(void);

// Set while sampled GPU timing is between windows: launches made then are
// not timed (gp_launch_rec.untimed).
extern atomic_uchar gp_timing_paused;

#pragma GCC visibility pop

#endif
