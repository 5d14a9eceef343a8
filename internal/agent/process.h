// Process-wide state, set once at start (process.c): the configuration and
// the fork guard (gp_proc), CUPTI's and the driver's function tables, the
// clocks. Every other file of the agent reads these; none of them is
// written after gp_start but by the fork guard.
#ifndef GPURR_PROCESS_H
#define GPURR_PROCESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "agent.h"
#include "cabi.h"

#pragma GCC visibility push(hidden)

// Every launch reads the fork guard and the configuration: they share a
// cache line (gp_proc is 64-byte aligned, and the fields a launch reads are
// in its first 64 bytes).
typedef struct {
  volatile int forked_child;  // set in a child forked after gp_start: no work there, and never Go
  pid_t agent_pid;            // the process gp_start ran in
  _Atomic int client_active;  // the program's own CUPTI client is subscribed (cupticlient.c)
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
// cuptiGetGraphExecId, optional: NULL where CUPTI lacks it.
extern gp_CUptiResult (*gp_cupti_graph_exec_id)(gp_CUgraphExec exec, uint32_t *id);

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
  // memory capture (mem*.c), needed only when it is on
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
  // hash mode's deferred hash kernels (memjobs.c): launched from any thread
  gp_CUresult (*ctxPushCurrent)(gp_CUcontext);
  gp_CUresult (*ctxPopCurrent)(gp_CUcontext *);
  // ... and the stream they run on beside the program's (memjobs.c)
  gp_CUresult (*streamCreate)(gp_CUstream *, unsigned);
  gp_CUresult (*streamWaitEvent)(gp_CUstream, void *, unsigned);
  gp_CUresult (*eventSynchronize)(void *);
  // a graph kernel node named by its CUkernel alone (launch.c), which cuFuncGetName does not name
  gp_CUresult (*kernelGetName)(const char **, void *);
  // the nodes of a graph an executable graph is updated from (launch.c)
  gp_CUresult (*graphGetNodes)(gp_CUgraph, gp_CUgraphNode *, size_t *);
  gp_CUresult (*graphNodeGetType)(gp_CUgraphNode, int *);
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

#pragma GCC visibility pop

#endif
