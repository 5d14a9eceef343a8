// What the agent's C files share. Each file does one job:
//
//   process.c    process-wide state (process.h): configuration, fork guard,
//                clock, CUPTI's and the driver's function tables
//   thread.c     per-thread state (thread.h): ids, scratch buffers
//   start.c      gp_start: loading CUPTI, the callback subscription, exit
//   ring.c       the record ring the Go writer drains, the counters, log records
//   launch.c     the CUPTI callback on the program's threads: launches, graph
//                launches and nodes, modules, kernels, devices, stream ids
//   callstack.c  each launch's callstack, each distinct stack described once
//   steps.c      training steps as the program runs (step digests, --hash-steps)
//   activity.c   GPU timing: CUPTI's activity buffers into activity records
//   hostcall.c   the program's copy, memset and synchronization calls (hostcall.h)
//   cupticlient.c the program's own CUPTI client (a profiler) served beside the agent
//   mem*.c       memory capture (memcap.h), one file per job, listed in
//                memcap_internal.h: memctx.c, memalloc.c, memregions.c,
//                memjobs.c, memdigest.c, memcap.c
//   nvtx.c       NVTX ranges (the agent as NVTX's injection library) and the range a launch is in
//   autograd.c   PyTorch's autograd context of a launch (autograd.h)
//   pystack.c    the calling thread's Python frames (pystack.h)
//   unwind.c     the calling thread's native frames (unwind.h)
//   fatal.c      fatal signals (fatal.h)
//
// agent.h is the contract with the Go writer (record layouts, configuration,
// the calls Go makes), cabi.h the hand-declared CUDA and CUPTI ABI and
// launchapi.h the table of launch APIs. Every name declared here starts with
// gp_ and stays inside libgpurr.so (hidden visibility, so a use from another
// file is a direct call or a PC-relative access, as within one file); what
// one file alone uses is static there.
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
#include "launchapi.h"
#include "memcap.h"
#include "process.h"
#include "thread.h"

#pragma GCC visibility push(hidden)

// ---- ring.c: records to the Go writer, counters, log ----

extern gp_counters gp_counts;
#define GP_COUNT(field, n) atomic_fetch_add_explicit((_Atomic uint64_t *)&gp_counts.field, (n), memory_order_relaxed)

// gp_launch_seq is the seq of the last launch call (kernel or graph) the
// process made: launch.c takes the next one from it; what is not a launch
// (an allocation, a copy) reads it to say where it lies among them.
extern _Atomic uint64_t gp_launch_seq;
static inline uint64_t gp_last_launch(void) { return atomic_load_explicit(&gp_launch_seq, memory_order_relaxed); }

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
// memjobs.c) is held by the interrupted thread (gp_spin_stuck), so a signal
// handler must not wait for the writer.
int gp_ring_stuck(void);
int gp_mem_stuck(void);

// ---- launch.c: the CUPTI callback ----

// gp_on_callback is the one CUPTI callback (cuptiSubscribe).
void gp_on_callback(void *userdata, int domain, uint32_t cbid, const void *data);

// ---- nvtx.c ----

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

// gp_step_where notes the launch call seq on stream of ctx, the last so far;
// gp_step_final_digest, at exit, takes the digest of the step the last call
// was in (step digests only), which no next step's first call took.
void gp_step_where(gp_CUcontext ctx, gp_CUstream stream, int ptsz, uint64_t seq);
void gp_step_final_digest(void);

// gp_step_forget: a context ended (cuCtxDestroy, a primary context's release
// or reset): the last call's stream and memory may be gone, so no digest is
// taken at exit unless another call comes.
void gp_step_forget(void);

// gp_step_range_ended: a range that --step-range matches ended (nvtx.c); the
// next launch call begins the next step.
void gp_step_range_ended(void);

// gp_steps_on: the configuration needs steps while the program runs.
static inline int gp_steps_on(void) {
  return gp_proc.cfg.digests || gp_proc.cfg.hash_steps || gp_proc.cfg.gpu_timing == GP_TIMING_STEPS;
}

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

// gp_activity_step: the step-th training step begins (step > 0, from
// gp_step_call): timing by steps turns kernel activity on or off for it.
void gp_activity_step(uint32_t step);

// Set while sampled GPU timing is between windows: launches made then are
// not timed (gp_launch_rec.untimed).
extern atomic_uchar gp_timing_paused;

// ---- hostcall.c ----

// gp_hostcall_enter and gp_hostcall_exit take a call of hostcall.h's table
// as it enters and returns; device is the ordinal of its context.
void gp_hostcall_enter(uint32_t cbid);
void gp_hostcall_exit(uint32_t cbid, const gp_CallbackData *cb, uint32_t device);
// gp_hostcall_own notes a call of the table that gpurr made itself, at its exit.
void gp_hostcall_own(uint32_t cbid, const gp_CallbackData *cb);
// gp_hostcall_subscribe asks for the table's callbacks, through enable (1
// when CUPTI took the callback id).
void gp_hostcall_subscribe(int (*enable)(uint32_t cbid));

// ---- cupticlient.c ----

// gp_client_init rebinds the cupti* imports of every object loaded but CUPTI
// and the agent to lib, the CUPTI the agent loaded, serving the calls a second
// subscriber would collide on beside sub, the agent's subscription;
// gp_client_rescan does the same for objects loaded since (a few loads each
// call when none was).
void gp_client_init(void *lib, gp_CUpti_SubscriberHandle sub);
void gp_client_rescan(void);
// gp_client_own_callback notes a callback the agent enabled for itself.
void gp_client_own_callback(int domain, uint32_t cbid);
// While the program's own CUPTI client is subscribed (gp_proc.client_active),
// gp_client_callback passes each callback it enabled on to it, and says
// whether the agent enabled the callback itself.
int gp_client_callback(int domain, uint32_t cbid, const void *data);
// gp_client_kind turns an activity kind on or off for the agent, leaving on
// what the client uses.
gp_CUptiResult gp_client_kind(int kind, int on);
// gp_client_activity_registered: the agent's activity buffers are CUPTI's,
// and serve the client's records too (gp_client_activity copies them out of
// each completed buffer).
void gp_client_activity_registered(void);
void gp_client_activity(const uint8_t *buffer, size_t valid);

#pragma GCC visibility pop

#endif
