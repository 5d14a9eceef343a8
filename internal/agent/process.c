// Process-wide state (process.h): the configuration and the fork guard,
// CUPTI's and the driver's function tables, the clock. gp_start_process and
// gp_start (start.c) fill them once; every other file reads them.
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>

#include "internal.h"

gp_process gp_proc __attribute__((aligned(64)));
gp_cupti_api gp_cupti;
gp_CUptiResult (*gp_cupti_callback_name)(int, uint32_t, const char **);
gp_CUptiResult (*gp_cupti_graph_exec_id)(gp_CUgraphExec, uint32_t *);
gp_cu_api gp_cu;

static uint32_t cupti_version;

// ---- fork guard: no work, and never Go, in a forked child ----

static void on_fork_child(void) { gp_proc.forked_child = 1; }

int gp_is_forked_child(void) { return gp_proc.forked_child; }

// ---- the clock ----

// TSC frequency, measured against CLOCK_MONOTONIC between gp_start and now.
static uint64_t tsc_start, ns_start;

double gp_tsc_ns_per_cycle(void) {
  uint64_t cycles = gp_cycles() - tsc_start, ns = gp_monotonic_ns() - ns_start;
  return cycles ? (double)ns / (double)cycles : 0;
}

uint64_t gp_timestamp(void) { return gp_clock(); }

// ---- the driver's functions ----

// In gp_cu's slot order. Memory capture's are needed only when it is on
// (gp_mem_start checks them); older drivers lack the optional one.
static const struct {
  const char *name;
  int need;
} driver_symbols[] = {
    {"cuFuncGetParamInfo", GP_NEED_ALWAYS},
    {"cuKernelGetParamInfo", GP_NEED_OPTIONAL},
    {"cuFuncGetName", GP_NEED_ALWAYS},
    {"cuCtxGetDevice", GP_NEED_ALWAYS},
    {"cuDeviceGetName", GP_NEED_ALWAYS},
    {"cuDeviceGetUuid_v2", GP_NEED_ALWAYS},
    {"cuDeviceGetAttribute", GP_NEED_ALWAYS},
    {"cuDeviceTotalMem_v2", GP_NEED_ALWAYS},
    {"cuDriverGetVersion", GP_NEED_ALWAYS},
    {"cuMemGetAddressRange_v2", GP_NEED_MEMORY},
    {"cuModuleLoadData", GP_NEED_MEMORY},
    {"cuModuleGetFunction", GP_NEED_MEMORY},
    {"cuLaunchKernel", GP_NEED_MEMORY},
    {"cuMemHostAlloc", GP_NEED_MEMORY},
    {"cuMemHostGetDevicePointer_v2", GP_NEED_MEMORY},
    {"cuMemAlloc_v2", GP_NEED_MEMORY},
    {"cuMemsetD8_v2", GP_NEED_MEMORY},
    {"cuMemsetD8Async", GP_NEED_MEMORY},
    {"cuStreamIsCapturing", GP_NEED_MEMORY},
    {"cuThreadExchangeStreamCaptureMode", GP_NEED_MEMORY},
    {"cuGetErrorName", GP_NEED_MEMORY},
    {"cuFuncGetModule", GP_NEED_PROBE},
    {"cuMemsetD32Async", GP_NEED_PROBE},
    {"cuMemcpyDtoHAsync_v2", GP_NEED_PROBE},
    {"cuEventCreate", GP_NEED_PROBE},
    {"cuEventRecord", GP_NEED_PROBE},
    {"cuEventQuery", GP_NEED_PROBE},
    {"cuFuncGetAttribute", GP_NEED_PROBE},
    {"cuFuncSetAttribute", GP_NEED_PROBE},
    {"cuCtxPushCurrent_v2", GP_NEED_OPTIONAL},
    {"cuCtxPopCurrent_v2", GP_NEED_OPTIONAL},
    {"cuStreamCreate", GP_NEED_OPTIONAL},
    {"cuStreamWaitEvent", GP_NEED_OPTIONAL},
    {"cuEventSynchronize", GP_NEED_OPTIONAL},
    {"cuKernelGetName", GP_NEED_OPTIONAL},
    {"cuGraphGetNodes", GP_NEED_OPTIONAL},
    {"cuGraphNodeGetType", GP_NEED_OPTIONAL},
};
_Static_assert(sizeof driver_symbols / sizeof *driver_symbols == sizeof(gp_cu_api) / sizeof(void *),
               "driver_symbols names every slot of gp_cu_api, in order");

const char *gp_driver_symbol(size_t i) {
  return i < sizeof driver_symbols / sizeof *driver_symbols ? driver_symbols[i].name : NULL;
}

void gp_driver_bind(size_t i, uintptr_t fn) {
  if (i < sizeof driver_symbols / sizeof *driver_symbols) ((void **)&gp_cu)[i] = (void *)fn;
}

const char *gp_driver_missing(int need) {
  for (size_t i = 0; i < sizeof driver_symbols / sizeof *driver_symbols; i++)
    if (driver_symbols[i].need == need && !((void **)&gp_cu)[i]) return driver_symbols[i].name;
  return NULL;
}

const char *gp_cupti_error(gp_CUptiResult r) {
  const char *s = NULL;
  if (gp_cupti.getResultString && gp_cupti.getResultString(r, &s) == 0 && s) return s;
  return "unknown CUPTI error";
}

void gp_start_process(const gp_config *cfg) {
  gp_proc.cfg = *cfg;
  gp_proc.agent_pid = getpid();
  tsc_start = gp_cycles();
  ns_start = gp_monotonic_ns();
  gp_thread_init();
  pthread_atfork(NULL, NULL, on_fork_child);
}

uint32_t gp_cupti_version(void) {
  if (!cupti_version && gp_cupti.getVersion) gp_cupti.getVersion(&cupti_version);  // gp_start's, or a harness's CUPTI
  return cupti_version;
}
