// Per-thread state (thread.c): what the agent keeps for each of the
// program's threads that calls into it. The launch path reads it on every
// callback, so the small part is initial-exec TLS and its accessors inline;
// the large buffers are one heap block per thread (gp_thread_scratch).
#ifndef GPURR_THREAD_H
#define GPURR_THREAD_H

#include <stdint.h>
#include <sys/types.h>

#include "agent.h"
#include "autograd.h"
#include "cabi.h"
#include "memcap.h"

#pragma GCC visibility push(hidden)

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
    int step;  // its message matches --step-range: its pop ends a training step
  } ranges[GP_RANGE_DEPTH];
  uint32_t range_depth;
} gp_thread_scratch;

// The agent's time per launch is measured on one launch in GP_TIMING_SAMPLE per thread;
// gp_timing_this_launch says whether the launch in flight is one.
enum { GP_TIMING_SAMPLE = 16 };

// The calling thread's state: one TLS block, in one place, so a launch
// touches as few cache lines of it as it can (the fields are in the order
// the launch path reads them). Large buffers are in its scratch, on the heap.
typedef struct {
  pid_t tid;               // the Linux thread id, 0 until asked (gp_thread_id)
  int in_launch;           // launch.c: between ENTER and EXIT of a recorded launch
  uint64_t seq, host_ns;   // of that launch
  uint64_t graph_node_id;  // node built by that launch during stream capture
  gp_CUstream stream;      // the last stream id looked up, valid for stream_epoch
  gp_CUcontext stream_ctx;
  uint32_t stream_id, stream_epoch;
  int stream_ptsz;
  uint32_t callbacks;          // on this thread, for sampling the agent's own time
  int sample_launch;           // the launch in flight is sampled (gp_timing_this_launch)
  const void *launch_func;     // launch.c's func_entry of the launch in flight
  int in_agent;                // inside the agent's own CUDA calls: ignore their callbacks
  uint32_t params_len;         // memory capture: parameters already copied at ENTER
  gp_thread_scratch *scratch;  // the thread's heap buffers (gp_scratch), freed at its exit
  // Steps (steps.c): the call's callstack and autograd context, taken at ENTER (have_stack),
  // and whether hash mode leaves it unhashed (--hash-steps).
  int have_stack, outside_steps;
  uint64_t stack_id;
  gp_autograd ag;
  uint64_t graph_seq;  // seq of the graph launch in flight, given at its ENTER
  // nvtx.c: the innermost NVTX push/pop range open on this thread, 0 none: what a launch
  // record names.
  uint64_t range_current;
} gp_thread_state;
extern GP_TLS gp_thread_state gp_thread;

// gp_thread_init creates the per-thread state's key; gp_start_process calls it.
void gp_thread_init(void);

// gp_scratch_alloc allocates the calling thread's scratch (gp_scratch's slow path).
gp_thread_scratch *gp_scratch_alloc(void);

// gp_thread_tid asks the kernel for the calling thread's id (gp_thread_id's slow path).
pid_t gp_thread_tid(void);

// gp_scratch returns the calling thread's scratch, allocated on first use;
// NULL when out of memory.
static inline gp_thread_scratch *gp_scratch(void) {
  return gp_thread.scratch ? gp_thread.scratch : gp_scratch_alloc();
}

// gp_thread_id is the calling thread's Linux id, cached.
static inline pid_t gp_thread_id(void) { return gp_thread.tid ? gp_thread.tid : gp_thread_tid(); }

// gp_in_agent_call marks the calling thread as inside the agent's own CUDA
// calls (enter 1) or out of them (0): their callbacks are ignored.
static inline int gp_in_agent_call(int enter) { return gp_thread.in_agent = enter; }

static inline int gp_timing_this_launch(void) { return gp_thread.sample_launch; }

#pragma GCC visibility pop

#endif
