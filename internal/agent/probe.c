// Live probes: swapping in instrumented kernels at launch, and the pool their records land in
// (probe.h). Only launches of kernels --probe picked come here; each takes the pool's lock.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"
#include "internal.h"
#include "probe.h"

enum {
  RECORD_BYTES = 32,          // instrument.ProbeRecordBytes
  POOL_BYTES = 64 << 20,      // per context: 2M CTAs' records in flight
  PENDING = 8192,             // probed launches in flight per context
  MAX_POOLS = 64,             // contexts
  CU_STREAM_PER_THREAD = 2,   // the per-thread default stream's handle
  CU_EVENT_DISABLE_TIMING = 2,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,  // the agent's own calls never disturb a capture on another thread
  CUDA_ERROR_NOT_READY = 600,
};

typedef struct {
  uint64_t seq, off, bytes;
  void *event;  // recorded behind the copy; NULL until the launch's EXIT
  uint32_t lost;  // GP_PROBE_SKIP_*: the records will not come
} pending_launch;

// A pool per context: device records and their pinned host copies at the same offsets, handed
// out as a ring in launch order and freed in that order as the writer collects them.
typedef struct {
  gp_CUcontext ctx;
  uint64_t dev;
  uint8_t *host;
  uint64_t head;  // where the next launch's records go
  uint32_t first, count;  // the pending ring
  pending_launch pending[PENDING];
  void *free_events[PENDING];
  uint32_t nfree_events;
} pool;

static pool *pools[MAX_POOLS];
static int npools;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;  // the pools
static pthread_mutex_t resolve_mu = PTHREAD_MUTEX_INITIALIZER;  // first launches
static _Atomic uint64_t outstanding;
static int viewed = -1;  // the pool whose oldest launch gp_probe_poll handed out

// The launch in flight on this thread, between ENTER and EXIT.
static GP_TLS struct {
  pool *p;
  uint32_t slot;  // its pending_launch
  uint64_t arg;   // its records' device address: the added parameter points here
  gp_CUstream stream;
  const void *image;  // the module being loaded (gp_probe_module_image)
  size_t image_size;
} cur;

void gp_probe_module_image(const void *image, size_t size) {
  cur.image = image;
  cur.image_size = size;
}

int gp_probe_start(char *err, size_t errcap) {
  const char *missing = gp_driver_missing(GP_NEED_PROBE);
  if (!missing && (!gp_cu.moduleLoadData || !gp_cu.moduleGetFunction || !gp_cu.memAlloc || !gp_cu.memHostAlloc ||
                   !gp_cu.streamIsCapturing || !gp_cu.threadExchangeStreamCaptureMode))
    missing = "cuModuleLoadData, cuModuleGetFunction, cuMemAlloc_v2, cuMemHostAlloc, cuStreamIsCapturing or "
              "cuThreadExchangeStreamCaptureMode";
  if (missing) {
    snprintf(err, errcap, "--probe: libcuda.so.1 has no symbol %s (driver too old?)", missing);
    return 0;
  }
  return 1;
}

static void skip(uint64_t seq, uint32_t reason) {
  gp_probe_skip_rec rec = {.h = {GP_REC_PROBE_SKIP, gp_pad8(sizeof rec)}, .seq = seq, .reason = reason};
  gp_ring_push(&rec);
  GP_COUNT(probe_skipped, 1);
}

void gp_probe_module_api(uint32_t cbid, const gp_CallbackData *cb) {
  if (cbid == GP_CBID_cuModuleUnload) {
    const gp_cuModuleUnload_params *p = cb->functionParams;
    if (cb->callbackSite == GP_API_ENTER && p) gpurrProbeForgetModule(p->hmod);
    return;
  }
  if (cb->callbackSite == GP_API_ENTER) {
    cur.image = NULL;
    return;
  }
  if (!cb->functionReturnValue || *(gp_CUresult *)cb->functionReturnValue != 0) return;
  const gp_cuModuleLoadData_params *p = cb->functionParams;
  const void *image = cur.image;
  size_t size = cur.image_size;
  cur.image = NULL;
  cur.image_size = 0;
  if (!p || !p->module || !*p->module || !p->image) return;
  gp_in_agent_call(1);
  gpurrProbeModule(*p->module, (void *)p->image, (void *)image, size);
  gp_in_agent_call(0);
}

void gp_probe_unloaded(gp_probe_fn *pf, void *module) {
  if (pf->module == module) atomic_store_explicit(&pf->state, GP_PROBE_UNKNOWN, memory_order_release);
}

// copy_attributes gives the copy what the program set on its kernel before the first launch (a
// Triton kernel's dynamic shared memory above 48 KiB, cluster settings), and notes what blocks
// and shared memory the copy can take: a launch beyond them runs the kernel itself.
static void copy_attributes(gp_probe_fn *pf, gp_CUfunction f, gp_CUfunction fn) {
  static const int copied[] = {
      GP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
      GP_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
      GP_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
      GP_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
  };
  for (size_t i = 0; i < sizeof copied / sizeof *copied; i++) {
    int v = 0;
    if (gp_cu.funcGetAttribute(&v, copied[i], f) == 0) gp_cu.funcSetAttribute(fn, copied[i], v);
  }
  pf->max_threads = 0;
  pf->max_dynamic_smem = 0;
  gp_cu.funcGetAttribute(&pf->max_threads, GP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
  gp_cu.funcGetAttribute(&pf->max_dynamic_smem, GP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn);
}

// resolve asks the Go side, once per kernel, whether it is probed and for its instrumented copy.
// symbol is CUPTI's name of the launch's kernel: a runtime launch may pass the driver a handle
// (a CUkernel) whose name cuFuncGetName does not give, and whose module is none the program
// loaded itself (the Go side then looks in the program's fat binaries by that name).
static int resolve(gp_probe_fn *pf, gp_CUfunction f, const char *symbol, uint32_t nparams, uint64_t kernel_id) {
  pthread_mutex_lock(&resolve_mu);
  int st = atomic_load_explicit(&pf->state, memory_order_acquire);
  if (st == GP_PROBE_UNKNOWN) {
    void *module = NULL;
    const char *name = NULL;
    gp_cu.funcGetModule(&module, f);
    if (gp_cu.funcGetName && gp_cu.funcGetName(&name, f) != 0) name = NULL;
    if (!name) name = symbol;
    gp_CUfunction fn = NULL;
    gp_in_agent_call(1);
    int ok = name && nparams + 1 <= GP_PROBE_ARGS &&
             gpurrProbeFunction(module, (char *)name, kernel_id, nparams, (void **)&fn) && fn;
    gp_in_agent_call(0);
    if (ok) copy_attributes(pf, f, fn);
    pf->module = module;
    pf->fn = fn;
    st = ok ? GP_PROBE_YES : GP_PROBE_NO;
    atomic_store_explicit(&pf->state, st, memory_order_release);
  }
  pthread_mutex_unlock(&resolve_mu);
  return st;
}

// pool_of finds or makes the calling context's pool; mu is held.
static pool *pool_of(gp_CUcontext ctx) {
  for (int i = 0; i < npools; i++)
    if (pools[i]->ctx == ctx) return pools[i];
  if (npools == MAX_POOLS) return NULL;
  pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  gp_in_agent_call(1);
  int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  int ok = gp_cu.memAlloc(&p->dev, POOL_BYTES) == 0 && gp_cu.memHostAlloc((void **)&p->host, POOL_BYTES, 0) == 0;
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  gp_in_agent_call(0);
  if (!ok) {  // the device memory, if any, stays: the context is short of memory anyway
    free(p);
    return NULL;
  }
  p->ctx = ctx;
  pools[npools++] = p;
  return p;
}

// take reserves bytes of p's ring for a launch; mu is held. UINT32_MAX when full.
static uint32_t take(pool *p, uint64_t seq, uint64_t bytes) {
  if (p->count == PENDING) return UINT32_MAX;
  uint64_t off;
  if (p->count == 0) {
    p->head = 0;
    off = 0;
  } else {
    uint64_t tail = p->pending[p->first].off;  // the oldest records still held
    if (p->head > tail) {
      if (p->head + bytes <= POOL_BYTES)
        off = p->head;
      else if (bytes < tail)
        off = 0;
      else
        return UINT32_MAX;
    } else if (p->head + bytes < tail) {
      off = p->head;
    } else {
      return UINT32_MAX;
    }
  }
  p->head = off + bytes;
  uint32_t slot = (p->first + p->count++) % PENDING;
  p->pending[slot] = (pending_launch){.seq = seq, .off = off, .bytes = bytes};
  atomic_fetch_add_explicit(&outstanding, 1, memory_order_relaxed);
  return slot;
}

int gp_probe_enter(gp_probe_fn *pf, uint32_t cbid, const gp_launch_view *v, const gp_CallbackData *cb, int ptsz,
                   uint32_t nparams, uint64_t kernel_id, uint64_t seq, void **args) {
  cur.p = NULL;
  int st = atomic_load_explicit(&pf->state, memory_order_acquire);
  if (st == GP_PROBE_UNKNOWN) st = resolve(pf, v->f, cb->symbolName, nparams, kernel_id);
  if (st != GP_PROBE_YES) return 0;

  gp_CUstream stream = v->stream;
  uint64_t ctas = (uint64_t)v->grid[0] * v->grid[1] * v->grid[2];
  if (ptsz && !stream) stream = (gp_CUstream)(uintptr_t)CU_STREAM_PER_THREAD;
  uint64_t threads = (uint64_t)v->block[0] * v->block[1] * v->block[2];
  if (threads > (uint64_t)pf->max_threads || v->smem > (unsigned)pf->max_dynamic_smem) {
    skip(seq, GP_PROBE_SKIP_RESOURCES);
    return 0;
  }
  // Packed parameters (`extra`) leave no room to add one; the driver takes kernelParams when
  // both are given.
  if (gp_launch_cooperative(cbid, cb->functionParams)) {
    skip(seq, GP_PROBE_SKIP_COOPERATIVE);
    return 0;
  }
  if (!v->kernel_params) {
    skip(seq, GP_PROBE_SKIP_EXTRA);
    return 0;
  }
  if (nparams + 1 > GP_PROBE_ARGS) {
    skip(seq, GP_PROBE_SKIP_PARAMS);
    return 0;
  }
  int capturing = 0;
  if (gp_cu.streamIsCapturing(stream, &capturing) != 0 || capturing) {
    skip(seq, capturing ? GP_PROBE_SKIP_CAPTURED : GP_PROBE_SKIP_CUDA_ERROR);
    return 0;
  }
  uint64_t bytes = ctas * RECORD_BYTES;
  if (bytes == 0 || bytes > POOL_BYTES / 2) {
    skip(seq, GP_PROBE_SKIP_TOO_LARGE);
    return 0;
  }
  pthread_mutex_lock(&mu);
  pool *p = pool_of(cb->context);
  uint32_t slot = p ? take(p, seq, bytes) : UINT32_MAX;
  pthread_mutex_unlock(&mu);
  if (slot == UINT32_MAX) {
    skip(seq, p ? GP_PROBE_SKIP_POOL_FULL : GP_PROBE_SKIP_CUDA_ERROR);
    return 0;
  }
  uint64_t at = p->dev + p->pending[slot].off;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.memsetD32Async(at, 0, bytes / 4, stream);  // records start zeroed
  gp_in_agent_call(0);
  if (r != 0) {
    pthread_mutex_lock(&mu);
    p->pending[slot].lost = GP_PROBE_SKIP_CUDA_ERROR;
    pthread_mutex_unlock(&mu);
    skip(seq, GP_PROBE_SKIP_CUDA_ERROR);
    return 0;
  }
  memcpy(args, v->kernel_params, nparams * sizeof *args);
  cur.arg = at;
  args[nparams] = &cur.arg;
  cur.p = p;
  cur.slot = slot;
  cur.stream = stream;
  gp_launch_set_kernel(cbid, (void *)cb->functionParams, pf->fn, args);
  return 1;
}

void gp_probe_exit(const gp_CallbackData *cb) {
  pool *p = cur.p;
  if (!p) return;
  cur.p = NULL;
  pending_launch *pl = &p->pending[cur.slot];
  uint64_t seq = pl->seq;  // pl may be reused once lost or event is set
  gp_CUresult result = cb->functionReturnValue ? *(gp_CUresult *)cb->functionReturnValue : 0;
  uint32_t lost = result != 0 ? GP_PROBE_SKIP_FAILED : 0;
  void *event = NULL;
  if (!lost) {
    pthread_mutex_lock(&mu);
    if (p->nfree_events) event = p->free_events[--p->nfree_events];
    pthread_mutex_unlock(&mu);
    gp_in_agent_call(1);
    if (!event) {
      int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
      gp_cu.threadExchangeStreamCaptureMode(&mode);
      if (gp_cu.eventCreate(&event, CU_EVENT_DISABLE_TIMING) != 0) event = NULL;
      gp_cu.threadExchangeStreamCaptureMode(&mode);
    }
    if (!event ||
        gp_cu.memcpyDtoHAsync(p->host + pl->off, p->dev + pl->off, pl->bytes, cur.stream) != 0 ||
        gp_cu.eventRecord(event, cur.stream) != 0)
      lost = GP_PROBE_SKIP_CUDA_ERROR;
    gp_in_agent_call(0);
  }
  pthread_mutex_lock(&mu);
  if (lost) {
    pl->lost = lost;
    if (event) p->free_events[p->nfree_events++] = event;
  } else {
    pl->event = event;
  }
  pthread_mutex_unlock(&mu);
  if (lost)
    skip(seq, lost);
  else
    GP_COUNT(probe_launches, 1);
}

int gp_probe_poll(gp_probe_view *v) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < npools; i++) {
    pool *p = pools[i];
    while (p->count) {
      pending_launch *pl = &p->pending[p->first];
      if (pl->lost) {  // said already (skip); free its records
        p->first = (p->first + 1) % PENDING;
        p->count--;
        atomic_fetch_sub_explicit(&outstanding, 1, memory_order_relaxed);
        continue;
      }
      if (!pl->event) break;  // its EXIT has not run yet
      gp_CUresult q = gp_cu.eventQuery(pl->event);
      if (q == CUDA_ERROR_NOT_READY) break;
      v->seq = pl->seq;
      v->records = p->host + pl->off;
      v->bytes = pl->bytes;
      v->skipped = q == 0 ? 0 : GP_PROBE_SKIP_CUDA_ERROR;
      viewed = i;
      pthread_mutex_unlock(&mu);
      return 1;
    }
  }
  pthread_mutex_unlock(&mu);
  return 0;
}

void gp_probe_release(void) {
  pthread_mutex_lock(&mu);
  if (viewed >= 0) {
    pool *p = pools[viewed];
    pending_launch *pl = &p->pending[p->first];
    p->free_events[p->nfree_events++] = pl->event;
    p->first = (p->first + 1) % PENDING;
    p->count--;
    atomic_fetch_sub_explicit(&outstanding, 1, memory_order_relaxed);
    viewed = -1;
  }
  pthread_mutex_unlock(&mu);
}

uint64_t gp_probe_outstanding(void) { return atomic_load_explicit(&outstanding, memory_order_relaxed); }

gp_CUresult gp_probe_load(const char *ptx, const char *name, gp_CUfunction *fn) {
  void *module = NULL;
  int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  gp_CUresult r = gp_cu.moduleLoadData(&module, ptx);
  if (r == 0) r = gp_cu.moduleGetFunction(fn, module, name);
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  return r;
}
