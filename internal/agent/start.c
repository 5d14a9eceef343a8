// Start-up: gp_start takes the configuration (process.c), loads CUPTI, checks
// the driver functions the Go side bound, prepares the stack walkers and
// subscribes to exactly the callbacks the agent needs. Also the exit handler
// and the driver's version Go reads.
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

static gp_CUpti_SubscriberHandle subscriber;
static int driver_version;

// ---- exit ----

// on_exit_flush runs at exit(), before the CUDA runtime's own teardown
// (atexit handlers run in reverse order and the runtime registered first).
static void on_exit_flush(void) {
  if (gp_proc.forked_child || getpid() != gp_proc.agent_pid) return;
  gp_autograd_stop();
  if (gp_proc.cfg.memory_mode != GP_MEM_OFF) {
    gp_step_final_digest();  // the last step's, which no next step began
    gp_mem_flush_batch();    // before the writer waits for them
  }
  gpurrAtExit();
}

// ---- start ----

static void *cupti_lib;

static int load_cupti(const char *path, char *err, size_t errcap) {
  void *lib = cupti_lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
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
  gp_cupti_version();
  gp_cupti_callback_name = (gp_CUptiResult(*)(int, uint32_t, const char **))dlsym(lib, "cuptiGetCallbackName");
  gp_cupti_graph_exec_id = (gp_CUptiResult(*)(gp_CUgraphExec, uint32_t *))dlsym(lib, "cuptiGetGraphExecId");
  return 1;
}

static int enable_driver_cbid(uint32_t cbid) {
  if (gp_cupti.enableCallback(1, subscriber, GP_CB_DOMAIN_DRIVER_API, cbid) != 0) return 0;
  gp_client_own_callback(GP_CB_DOMAIN_DRIVER_API, cbid);
  return 1;
}

static int enable(uint32_t domain, const uint32_t *cbids, size_t n, char *err, size_t errcap) {
  for (size_t i = 0; i < n; i++) {
    gp_CUptiResult r = gp_cupti.enableCallback(1, subscriber, domain, cbids[i]);
    if (r != 0) {
      snprintf(err, errcap, "cuptiEnableCallback(%s %u): %s", domain == GP_CB_DOMAIN_RESOURCE ? "resource" : "driver",
               cbids[i], gp_cupti_error(r));
      return 0;
    }
    gp_client_own_callback(domain, cbids[i]);
  }
  return 1;
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
  // Graph node APIs newer than the CUDA in use are not there to enable: no graph is built through them.
  static const uint32_t driver_cbids[] = {
#define LAUNCH_CBID(name, cbid, ptsz, shape) shape < GP_SHAPE_NODE_ADD ? cbid : GP_CBID_cuLaunchKernel,
      GP_LAUNCH_APIS(LAUNCH_CBID)
#undef LAUNCH_CBID
  };
#define NODE_CBID(name, cbid, ptsz, shape) if (shape >= GP_SHAPE_NODE_ADD) enable_driver_cbid(cbid);
  GP_LAUNCH_APIS(NODE_CBID)
#undef NODE_CBID
  static const uint32_t resource_cbids[] = {
      GP_CBID_RESOURCE_MODULE_LOADED,
      GP_CBID_RESOURCE_GRAPHNODE_CREATED,
      GP_CBID_RESOURCE_GRAPHNODE_CLONED,
      GP_CBID_RESOURCE_STREAM_DESTROY_STARTING,
  };
  if (!enable(GP_CB_DOMAIN_DRIVER_API, driver_cbids, sizeof driver_cbids / sizeof *driver_cbids, err, errcap) ||
      !enable(GP_CB_DOMAIN_RESOURCE, resource_cbids, sizeof resource_cbids / sizeof *resource_cbids, err, errcap))
    return 0;
  // A module's unload ends its kernels' handles, which a later module's may reuse (launch.c).
  static const uint32_t unload_cbid[] = {GP_CBID_cuModuleUnload};
  if (!enable(GP_CB_DOMAIN_DRIVER_API, unload_cbid, 1, err, errcap)) return 0;
  // Graphs built whole: memory nodes, and executable graphs updated from another graph (launch.c).
  static const uint32_t build_cbids[] = {GP_CBID_cuGraphExecUpdate, GP_CBID_cuGraphAddMemAllocNode, GP_CBID_cuGraphAddMemFreeNode,
                                         GP_CBID_cuGraphExecUpdate_v2};
  for (size_t i = 0; i < sizeof build_cbids / sizeof *build_cbids; i++) enable_driver_cbid(build_cbids[i]);  // absent from older CUDA
  gp_hostcall_subscribe(enable_driver_cbid);
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
    if (cfg->memory_mode == GP_MEM_HASH || cfg->memory_mode == GP_MEM_SNAPSHOT) {
      // Copies and memsets get copy states, and end the carry of what they write.
      static uint32_t write_cbids[256];
      size_t n = gp_mem_write_cbids(write_cbids, sizeof write_cbids / sizeof *write_cbids);
      if (!enable(GP_CB_DOMAIN_DRIVER_API, write_cbids, n, err, errcap)) return 0;
      gp_mem_defer();
    }
    if (cfg->digests) {
      // A context's end takes the last step's stream with it: no digest at exit then.
      uint32_t calls[256], teardown[8];
      size_t n = gp_mem_write_cbids(calls, sizeof calls / sizeof *calls), k = 0;
      for (size_t i = 0; i < n && k < sizeof teardown / sizeof *teardown; i++)
        if (gp_mem_teardown_call(calls[i])) teardown[k++] = calls[i];
      if (!enable(GP_CB_DOMAIN_DRIVER_API, teardown, k, err, errcap)) return 0;
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
  gp_client_init(cupti_lib, subscriber);  // last: a profiler of the program's finds the agent's subscription whole
  return 1;
}

int gp_driver_version(void) { return driver_version; }
