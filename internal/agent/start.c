// Start-up: gp_start takes the configuration, loads CUPTI, checks the driver
// functions the Go side bound, prepares the stack walkers and subscribes to
// exactly the callbacks the agent needs. Also the fork guard, the clock, the
// exit handler and the versions Go reads.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "_cgo_export.h"
#include "autograd.h"
#include "internal.h"
#include "probe.h"

gp_process gp_proc __attribute__((aligned(64)));
gp_cupti_api gp_cupti;
gp_CUptiResult (*gp_cupti_callback_name)(int, uint32_t, const char **);
gp_cu_api gp_cu;

static gp_CUpti_SubscriberHandle subscriber;
static uint32_t cupti_version;
static int driver_version;

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

// ---- exit ----

// on_exit_flush runs at exit(), before the CUDA runtime's own teardown
// (atexit handlers run in reverse order and the runtime registered first).
static void on_exit_flush(void) {
  if (gp_proc.forked_child || getpid() != gp_proc.agent_pid) return;
  gp_autograd_stop();
  if (gp_proc.cfg.memory_mode != GP_MEM_OFF) gp_mem_flush_batch();  // before the writer waits for them
  gpurrAtExit();
}

// ---- start ----

static int load_cupti(const char *path, char *err, size_t errcap) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    snprintf(err, errcap, "cannot load CUPTI %s: %s", path, dlerror());
    return 0;
  }
  // In gp_cupti's slot order.
  static const char *const names[] = {
      "cuptiSubscribe",        "cuptiEnableCallback",
      "cuptiActivityRegisterCallbacks", "cuptiActivityEnable", "cuptiActivityDisable",
      "cuptiActivityGetNextRecord",     "cuptiActivityFlushAll",
      "cuptiActivityGetNumDroppedRecords", "cuptiGetTimestamp",
      "cuptiGetStreamIdEx",    "cuptiGetGraphNodeId",
      "cuptiGetGraphId",       "cuptiGetVersion",
      "cuptiGetResultString",
  };
  _Static_assert(sizeof names / sizeof *names == sizeof(gp_cupti_api) / sizeof(void *),
                 "names names every slot of gp_cupti_api, in order");
  void **slots = (void **)&gp_cupti;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    slots[i] = dlsym(lib, names[i]);
    if (!slots[i]) {
      snprintf(err, errcap, "%s has no symbol %s", path, names[i]);
      return 0;
    }
  }
  gp_cupti.getVersion(&cupti_version);
  gp_cupti_callback_name = (gp_CUptiResult(*)(int, uint32_t, const char **))dlsym(lib, "cuptiGetCallbackName");
  return 1;
}

const char *gp_cupti_error(gp_CUptiResult r) {
  const char *s = NULL;
  if (gp_cupti.getResultString && gp_cupti.getResultString(r, &s) == 0 && s) return s;
  return "unknown CUPTI error";
}

static int enable(uint32_t domain, const uint32_t *cbids, size_t n, char *err, size_t errcap) {
  for (size_t i = 0; i < n; i++) {
    gp_CUptiResult r = gp_cupti.enableCallback(1, subscriber, domain, cbids[i]);
    if (r != 0) {
      snprintf(err, errcap, "cuptiEnableCallback(%s %u): %s", domain == GP_CB_DOMAIN_RESOURCE ? "resource" : "driver",
               cbids[i], gp_cupti_error(r));
      return 0;
    }
  }
  return 1;
}

void gp_start_process(const gp_config *cfg) {
  gp_proc.cfg = *cfg;
  gp_proc.agent_pid = getpid();
  tsc_start = gp_cycles();
  ns_start = gp_monotonic_ns();
  gp_launch_init();
  pthread_atfork(NULL, NULL, on_fork_child);
}

// ring_alloc maps the ring, in huge pages where the kernel gives them (a
// hint), and faults in its start; the writer's thread faults in the rest
// ahead of the records (gp_ring_prefault), so the program's threads do not
// pay a page fault every few kilobytes of records in the ring's first lap.
static uint8_t *ring_alloc(uint64_t cap) {
  void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  madvise(p, cap, MADV_HUGEPAGE);
  return p;
}

int gp_start(const gp_config *cfg, char *err, size_t errcap) {
  gp_start_process(cfg);

  uint64_t cap = 1;
  while (cap < cfg->ring_bytes) cap <<= 1;
  uint8_t *buf = ring_alloc(cap);
  if (!buf) {
    snprintf(err, errcap, "cannot map a %llu-byte ring", (unsigned long long)cap);
    return 0;
  }
  gp_ring_init(buf, cap);
  gp_ring_prefault(GP_RING_AHEAD);

  if (!load_cupti(cfg->cupti_path, err, errcap)) return 0;
  if (cfg->driver_error) {
    snprintf(err, errcap, "cannot load libcuda.so.1: %s", cfg->driver_error);
    return 0;
  }
  const char *missing = gp_driver_missing(GP_NEED_ALWAYS);
  if (missing) {
    snprintf(err, errcap, "libcuda.so.1 has no symbol %s (driver too old?)", missing);
    return 0;
  }
  gp_cu.driverGetVersion(&driver_version);

  gp_autograd_init();
  gp_callstack_init();

  gp_CUptiResult r = gp_cupti.subscribe(&subscriber, (gp_CallbackFunc)gp_on_callback, NULL);
  if (r != 0) {
    snprintf(err, errcap, "cuptiSubscribe: %s (is another CUPTI client, e.g. a profiler, attached?)",
             gp_cupti_error(r));
    return 0;
  }
  // Only the callbacks we need: the whole driver domain costs µs per call.
  static const uint32_t driver_cbids[] = {
      GP_CBID_cuLaunchKernel,         GP_CBID_cuLaunchKernel_ptsz,    GP_CBID_cuLaunchCooperativeKernel,
      GP_CBID_cuLaunchCooperativeKernel_ptsz, GP_CBID_cuLaunchKernelEx, GP_CBID_cuLaunchKernelEx_ptsz,
      GP_CBID_cuGraphLaunch,          GP_CBID_cuGraphLaunch_ptsz,
  };
  static const uint32_t resource_cbids[] = {
      GP_CBID_RESOURCE_MODULE_LOADED,
      GP_CBID_RESOURCE_GRAPHNODE_CREATED,
      GP_CBID_RESOURCE_GRAPHNODE_CLONED,
      GP_CBID_RESOURCE_STREAM_DESTROY_STARTING,
  };
  if (!enable(GP_CB_DOMAIN_DRIVER_API, driver_cbids, sizeof driver_cbids / sizeof *driver_cbids, err, errcap) ||
      !enable(GP_CB_DOMAIN_RESOURCE, resource_cbids, sizeof resource_cbids / sizeof *resource_cbids, err, errcap))
    return 0;
  if (cfg->memory_mode != GP_MEM_OFF) {
    if (!gp_mem_start(cfg, err, errcap)) return 0;
    static const uint32_t alloc_cbids[] = {
        GP_CBID_cuMemAlloc_v2,        GP_CBID_cuMemAllocPitch_v2,          GP_CBID_cuMemAllocManaged,
        GP_CBID_cuMemAllocAsync,      GP_CBID_cuMemAllocAsync_ptsz,        GP_CBID_cuMemAllocFromPoolAsync,
        GP_CBID_cuMemAllocFromPoolAsync_ptsz, GP_CBID_cuMemFree_v2,        GP_CBID_cuMemFreeAsync,
        GP_CBID_cuMemFreeAsync_ptsz,  GP_CBID_cuMemMap,                    GP_CBID_cuMemUnmap,
        GP_CBID_cuIpcCloseMemHandle,
    };
    if (!enable(GP_CB_DOMAIN_DRIVER_API, alloc_cbids, sizeof alloc_cbids / sizeof *alloc_cbids, err, errcap))
      return 0;
    if (cfg->memory_mode == GP_MEM_HASH && cfg->write_sets != GP_WRITE_SETS_ALL) {
      // Copies and memsets end the carry of what they write.
      static uint32_t write_cbids[256];
      size_t n = gp_mem_write_cbids(write_cbids, sizeof write_cbids / sizeof *write_cbids);
      if (!enable(GP_CB_DOMAIN_DRIVER_API, write_cbids, n, err, errcap)) return 0;
      gp_mem_defer();
    }
    for (uint32_t cbid = 1; cfg->flight_recorder && cbid < 1024; cbid++)
      if (gp_mem_error_callback(cbid) && !enable(GP_CB_DOMAIN_DRIVER_API, &cbid, 1, err, errcap)) return 0;
  }
  if (cfg->probes) {
    if (!gp_probe_start(err, errcap)) return 0;
    static const uint32_t module_cbids[] = {
        GP_CBID_cuModuleLoadData, GP_CBID_cuModuleLoadDataEx, GP_CBID_cuModuleLoadFatBinary, GP_CBID_cuModuleUnload,
    };
    if (!enable(GP_CB_DOMAIN_DRIVER_API, module_cbids, sizeof module_cbids / sizeof *module_cbids, err, errcap))
      return 0;
  }
  if (cfg->nvtx) gp_nvtx_start();
  atexit(on_exit_flush);
  gp_activity_start(cfg->gpu_timing, cfg->gpu_timing_from_start);
  return 1;
}

uint32_t gp_cupti_version(void) {
  if (!cupti_version && gp_cupti.getVersion) gp_cupti.getVersion(&cupti_version);  // gp_start's, or a harness's CUPTI
  return cupti_version;
}
int gp_driver_version(void) { return driver_version; }
