// Each CUDA context's GPU state for memory capture: the memcap kernels
// (internal/kernels/src/hash.cu), the pinned results and staging rings
// shared by every context and their device mirrors, and the shadow pool
// that holds the chunk hashes of snapshotted allocations.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcap_internal.h"

enum { MAX_MEM_CONTEXTS = 64 };

static gp_mem_context mctx[MAX_MEM_CONTEXTS];
static pthread_mutex_t mctx_mu = PTHREAD_MUTEX_INITIALIZER;

// The pinned rings, shared by every context (CU_MEMHOSTALLOC_PORTABLE).
uint8_t *gp_results_host, *gp_staging_host;
uint64_t gp_results_cap, gp_staging_cap;

static void init_context(gp_mem_context *c) {
  gp_CUresult r;
  const char *step = "";
  int mode = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED: our calls never disturb another thread's capture
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  if (!gp_results_host) {
    step = "cuMemHostAlloc(results)";
    if ((r = gp_cu.memHostAlloc((void **)&gp_results_host, gp_results_cap, 0x01 | 0x02)) != 0) goto fail;
    memset(gp_results_host, 0, gp_results_cap);
    if (gp_staging_cap) {
      step = "cuMemHostAlloc(staging)";
      if ((r = gp_cu.memHostAlloc((void **)&gp_staging_host, gp_staging_cap, 0x01 | 0x02)) != 0) goto fail;
    }
  }
  step = "cuMemHostGetDevicePointer";
  if ((r = gp_cu.memHostGetDevicePointer(&c->results_dev, gp_results_host, 0)) != 0) goto fail;
  if (gp_staging_host && (r = gp_cu.memHostGetDevicePointer(&c->staging_dev, gp_staging_host, 0)) != 0) goto fail;
  void *mod = NULL;
  step = "cuModuleLoadData(memcap PTX)";
  if ((r = gp_cu.moduleLoadData(&mod, gp_proc.cfg.memcap_ptx)) != 0) goto fail;
  step = "cuModuleGetFunction(gpurr_memcap)";
  if ((r = gp_cu.moduleGetFunction(&c->fn, mod, "gpurr_memcap")) != 0) goto fail;
  step = "cuModuleGetFunction(gpurr_memcap_nan)";
  if ((r = gp_cu.moduleGetFunction(&c->fn_nan, mod, "gpurr_memcap_nan")) != 0) goto fail;
  step = "cuMemAlloc(scratch)";
  if ((r = gp_cu.memAlloc(&c->scratch, gp_results_cap)) != 0) goto fail;
  step = "cuMemAlloc(counters)";
  if ((r = gp_cu.memAlloc(&c->counters, GP_NJOBS * 8)) != 0) goto fail;
  step = "cuMemsetD8(counters)";
  if ((r = gp_cu.memsetD8(c->counters, 0, GP_NJOBS * 8)) != 0) goto fail;
  if (gp_proc.cfg.nan_dtypes) {
    // Without its counters this context only hashes: its states carry no
    // NaN counts, which gpurr nan reports, rather than no memory capture.
    size_t bytes = (size_t)GP_NJOBS * GP_NAN_JOB_BYTES;
    if ((r = gp_cu.memAlloc(&c->nan_counts, bytes)) != 0 || (r = gp_cu.memsetD8(c->nan_counts, 0, bytes)) != 0) {
      c->nan_counts = 0;  // a failed memset leaves the allocation unused: the context is likely lost anyway
      gp_logf(1, "memory capture: no device memory for NaN counters (%zu bytes): %s (%d); this GPU's launches are hashed but not counted",
            bytes, gp_cu_error(r), r);
    }
  }
  if (gp_proc.cfg.memory_mode == GP_MEM_SNAPSHOT) {
    gp_CUdevice dev = 0;
    size_t total = 0;
    gp_cu.ctxGetDevice(&dev);
    gp_cu.deviceTotalMem(&total, dev);
    c->pool_size = (total / GP_CHUNK + 1) * 16 * 2;  // twice what all of memory needs: room for fragments
    if (gp_cu.memAlloc(&c->pool, c->pool_size) != 0) {
      c->pool = c->pool_size = 0;
      gp_logf(1, "memory capture: no shadow pool (%llu bytes): every snapshot copies every chunk",
            (unsigned long long)c->pool_size);
    } else {
      c->free_cap = 64;
      c->free_off = malloc(c->free_cap * sizeof(uint64_t));
      c->free_len = malloc(c->free_cap * sizeof(uint64_t));
      if (c->free_off && c->free_len) {
        c->free_off[0] = 0;
        c->free_len[0] = c->pool_size;
        c->nfree = 1;
      }
    }
  }
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  c->ok = 1;
  return;
fail:
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  c->ok = -1;
  gp_logf(2, "memory capture disabled in this context: %s: %s (%d)", step, gp_cu_error(r), r);
}

gp_mem_context *gp_context_state(void *ctx) {
  for (int i = 0; i < MAX_MEM_CONTEXTS; i++) {
    gp_mem_context *c = &mctx[i];
    if (c->ctx == ctx && c->ok) return c->ok > 0 ? c : NULL;
  }
  pthread_mutex_lock(&mctx_mu);
  gp_mem_context *c = NULL;
  for (int i = 0; i < MAX_MEM_CONTEXTS && !c; i++) {
    if (mctx[i].ctx == ctx && mctx[i].ok) c = &mctx[i];
    if (!mctx[i].ctx) {
      c = &mctx[i];
      c->ctx = ctx;
      gp_in_agent_call(1);
      init_context(c);
      gp_in_agent_call(0);
    }
  }
  pthread_mutex_unlock(&mctx_mu);
  return c && c->ok > 0 ? c : NULL;
}

// Shadow extents: first fit over a short free list. Caller holds gp_alloc_lock.
uint64_t gp_shadow_alloc(gp_mem_context *c, uint64_t size) {
  uint64_t need = (size + GP_CHUNK - 1) / GP_CHUNK * 16;
  for (uint32_t i = 0; i < c->nfree; i++) {
    if (c->free_len[i] < need) continue;
    uint64_t off = c->free_off[i];
    c->free_off[i] += need;
    c->free_len[i] -= need;
    return c->pool + off;
  }
  return 0;
}

void gp_shadow_free(void *ctx, uint64_t shadow, uint64_t size) {
  if (!shadow) return;
  for (int i = 0; i < MAX_MEM_CONTEXTS; i++) {
    gp_mem_context *c = &mctx[i];
    if (c->ctx != ctx || !c->pool) continue;
    if (c->nfree == c->free_cap) {
      uint32_t cap = 2 * c->free_cap;
      uint64_t *o = realloc(c->free_off, cap * sizeof *o);
      if (o) c->free_off = o;
      uint64_t *l = realloc(c->free_len, cap * sizeof *l);
      if (l) c->free_len = l;
      if (!o || !l) return;  // leaked: the pool only shrinks
      c->free_cap = cap;
    }
    c->free_off[c->nfree] = shadow - c->pool;
    c->free_len[c->nfree] = (size + GP_CHUNK - 1) / GP_CHUNK * 16;
    c->nfree++;
    return;
  }
}
