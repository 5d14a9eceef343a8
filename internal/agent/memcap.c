// Memory capture's calls from the driver's callbacks that are not a
// launch's (allocations made and freed, memory written outside kernels),
// the Go writer's side of the job FIFO (gp_mem_poll, gp_mem_release) and
// the start. The other files of memory capture are listed in
// memcap_internal.h.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcap_internal.h"

int gp_mem_alloc_callback(uint32_t cbid) {
  switch (cbid) {
  case GP_CBID_cuMemAlloc_v2:
  case GP_CBID_cuMemAllocPitch_v2:
  case GP_CBID_cuMemAllocManaged:
  case GP_CBID_cuMemAllocAsync:
  case GP_CBID_cuMemAllocAsync_ptsz:
  case GP_CBID_cuMemAllocFromPoolAsync:
  case GP_CBID_cuMemAllocFromPoolAsync_ptsz:
  case GP_CBID_cuMemFree_v2:
  case GP_CBID_cuMemFreeAsync:
  case GP_CBID_cuMemFreeAsync_ptsz:
  case GP_CBID_cuMemMap:
  case GP_CBID_cuMemUnmap:
  case GP_CBID_cuIpcCloseMemHandle:
    return 1;
  }
  return 0;
}

// Calls where a kernel's failure (an illegal address, a trap) surfaces.
int gp_mem_error_callback(uint32_t cbid) {
  switch (cbid) {
  case GP_CBID_cuCtxSynchronize:
  case GP_CBID_cuCtxSynchronize_v2:
  case GP_CBID_cuStreamSynchronize:
  case GP_CBID_cuStreamSynchronize_ptsz:
  case GP_CBID_cuEventSynchronize:
  case GP_CBID_cuMemcpyDtoH_v2:
  case GP_CBID_cuMemcpyDtoH_v2_ptds:
  case GP_CBID_cuMemcpyDtoHAsync_v2:
  case GP_CBID_cuMemcpyDtoHAsync_v2_ptsz:
  case GP_CBID_cuMemcpy:
  case GP_CBID_cuMemcpy_ptds:
  case GP_CBID_cuMemcpyAsync:
  case GP_CBID_cuMemcpyAsync_ptsz:
    return 1;
  }
  return 0;
}

// zero_fill clears a stream-ordered allocation on its stream, under hash and
// snapshot modes. A pool hands out memory freed earlier in the process without
// clearing it, and which freed block a tensor gets depends on when other
// streams' work completed, so the bytes a program never writes (an output a
// split-K GEMM leaves to its reduction, padding) would differ from run to run
// and look like a divergence. The driver clears memory it maps fresh
// (cuMemAlloc, cuMemCreate), so only pools need it. A capturing stream is left
// alone: a memset there would become a node of the program's graph. It
// returns 1 when it cleared the memory (the allocation's record says so).
static int zero_fill(uint64_t ptr, uint64_t size, gp_CUstream stream) {
  if (!size || (gp_proc.cfg.memory_mode != GP_MEM_HASH && gp_proc.cfg.memory_mode != GP_MEM_SNAPSHOT)) return 0;
  int capturing = 0;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.streamIsCapturing(stream, &capturing);
  if (r == 0 && !capturing) r = gp_cu.memsetD8Async(ptr, 0, size, stream);
  gp_in_agent_call(0);
  if (r != 0) {
    static _Atomic int said;
    if (!atomic_exchange(&said, 1))
      gp_logf(1, "memory capture: cuMemsetD8Async(new allocation, %llu bytes): %s (%d); memory a program never writes may differ between runs",
              (unsigned long long)size, gp_cu_error(r), r);
  }
  return r == 0 && !capturing;
}

// gp_mem_on_api tracks allocations: new ones at API exit (when the address
// is known and the call succeeded), frees at API enter (before the address
// can be handed out again).
void gp_mem_on_api(uint32_t cbid, const gp_CallbackData *cb) {
  const void *p = cb->functionParams;
  int exit = cb->callbackSite == GP_API_EXIT;
  if (exit && cb->functionReturnValue && *(gp_CUresult *)cb->functionReturnValue != 0) return;
  // A new allocation: who made it (a library for its own use, or the
  // program) and the line that did.
  int owner = 0;
  uint64_t stack = 0;
  // Stream-ordered allocations (a tensor each, under PyTorch's cudaMallocAsync
  // backend: thousands a step) are the program's and go without a line:
  // communication libraries allocate with cuMemAlloc or cuMemCreate/cuMemMap.
  if (exit && (cbid == GP_CBID_cuMemAlloc_v2 || cbid == GP_CBID_cuMemAllocManaged || cbid == GP_CBID_cuMemAllocPitch_v2 ||
               cbid == GP_CBID_cuMemMap)) {
    owner = gp_callstack_owner();
    stack = gp_callstack_take(0, NULL);
  }
  switch (cbid) {
  case GP_CBID_cuMemAlloc_v2:
    if (exit) gp_add_alloc(*((const gp_cuMemAlloc_params *)p)->dptr, ((const gp_cuMemAlloc_params *)p)->bytesize,
                        GP_ALLOC_MEM_ALLOC, owner, stack, 0);
    break;
  case GP_CBID_cuMemAllocManaged:
    if (exit) gp_add_alloc(*((const gp_cuMemAlloc_params *)p)->dptr, ((const gp_cuMemAlloc_params *)p)->bytesize,
                        GP_ALLOC_MANAGED, owner, stack, 0);
    break;
  case GP_CBID_cuMemAllocAsync:
  case GP_CBID_cuMemAllocAsync_ptsz:
    if (exit) {
      const gp_cuMemAllocAsync_params *a = p;
      int cleared = zero_fill(*a->dptr, a->bytesize, gp_job_stream(a->hStream, cbid == GP_CBID_cuMemAllocAsync_ptsz));
      gp_add_alloc(*a->dptr, a->bytesize, GP_ALLOC_ASYNC, owner, stack, cleared);
    }
    break;
  case GP_CBID_cuMemAllocFromPoolAsync:
  case GP_CBID_cuMemAllocFromPoolAsync_ptsz:
    if (exit) {
      const gp_cuMemAllocFromPoolAsync_params *a = p;
      int cleared = zero_fill(*a->dptr, a->bytesize, gp_job_stream(a->hStream, cbid == GP_CBID_cuMemAllocFromPoolAsync_ptsz));
      gp_add_alloc(*a->dptr, a->bytesize, GP_ALLOC_ASYNC, owner, stack, cleared);
    }
    break;
  case GP_CBID_cuMemAllocPitch_v2:
    if (exit) {
      const gp_cuMemAllocPitch_params *a = p;
      gp_add_alloc(*a->dptr, (uint64_t)*a->pPitch * a->Height, GP_ALLOC_PITCH, owner, stack, 0);
    }
    break;
  case GP_CBID_cuMemMap:
    if (exit)
      gp_add_alloc(((const gp_cuMemMap_params *)p)->ptr, ((const gp_cuMemMap_params *)p)->size, GP_ALLOC_MAP, owner,
                   stack, 0);
    break;
  case GP_CBID_cuMemFree_v2:
  case GP_CBID_cuMemFreeAsync:
  case GP_CBID_cuMemFreeAsync_ptsz:
  case GP_CBID_cuIpcCloseMemHandle:
    if (!exit) {
      gp_before_free(cbid, cb, *(const uint64_t *)p);
      gp_remove_alloc(*(const uint64_t *)p, 0);
    }
    break;
  case GP_CBID_cuMemUnmap:
    if (!exit) {
      gp_before_free(cbid, cb, ((const gp_cuMemUnmap_params *)p)->ptr);
      gp_remove_alloc(((const gp_cuMemUnmap_params *)p)->ptr, ((const gp_cuMemUnmap_params *)p)->size);
    }
    break;
  }
}

// gp_mem_on_write, at the exit of a successful call: the allocation written
// (and the pieces mapped next to it, which a copy may run into) is hashed
// again at its next launch, and gets a copy state; a write whose target is
// unknown moves the epoch.
void gp_mem_on_write(uint32_t cbid, const gp_CallbackData *cb) {
  if (cb->callbackSite != GP_API_EXIT) {
    gp_before_call(cbid, cb);
    return;
  }
  if (gp_call_write_class[cbid] == GP_WRITE_FLUSH) return;
  if (cb->functionReturnValue && *(gp_CUresult *)cb->functionReturnValue != 0) return;
  gp_thread_scratch *s = gp_call_write_class[cbid] == GP_WRITE_DST && cb->functionParams ? gp_scratch() : NULL;
  if (!s) {  // a write whose target is unknown (or no scratch to find it in)
    gp_mem_unhashed_write();
    return;
  }
  gp_mem_launch *m = &s->mem;
  gp_spin_lock(&gp_alloc_lock);
  gp_write_regions(m, *(const uint64_t *)cb->functionParams);
  for (uint32_t r = 0; r < m->nregions; r++) GP_ALLOC_AT(m->alloc_index[r])->last_job = 0;
  gp_spin_unlock(&gp_alloc_lock);
  if (m->nregions && (gp_proc.cfg.memory_mode == GP_MEM_HASH || gp_proc.cfg.memory_mode == GP_MEM_SNAPSHOT))
    gp_copy_state(m, cbid, cb);
}

// ---- the writer's side ----

int gp_mem_poll(gp_memjob_view *v) {
  if (!gp_jobs) return 0;
  gp_spin_lock(&gp_job_lock);
  if (gp_job_tail == gp_job_head) {
    gp_spin_unlock(&gp_job_lock);
    return 0;
  }
  gp_mem_job *j = &gp_jobs[gp_job_tail % GP_NJOBS];
  uint32_t expected = GP_JOB_ENQUEUED;
  if (!gp_job_done(j) || !atomic_compare_exchange_strong(&j->state, &expected, GP_JOB_CONSUMING)) {
    gp_spin_unlock(&gp_job_lock);
    gp_flush_if_old();  // the oldest job may be waiting in a batch no launch has come to end
    return 0;
  }
  gp_spin_unlock(&gp_job_lock);
  const uint8_t *res = gp_results_host + j->res_off % gp_results_cap;
  v->launch_seq = j->launch_seq;
  v->job_seq = j->job_seq;
  v->point = j->point;
  v->snapshot = j->snapshot;
  v->nan_dtypes = j->nan_dtypes;
  v->region_base = j->region_base;
  v->nregions = j->nregions;
  v->njobs = j->njobs;
  v->total_chunks = j->total_chunks;
  v->piece = j->piece;
  v->piece_first = j->piece_first;
  v->call = j->point == GP_POINT_COPY ? j->step : 0;
  v->transferred = ((const volatile uint32_t *)res)[2];
  v->lost = ((const volatile uint32_t *)res)[3];
  v->result = res;
  v->staging = j->snapshot ? gp_staging_host + j->stg_off % gp_staging_cap : NULL;
  // The arrays hold nregions and npointers entries: the rest is stale.
  memcpy(v->region_addr, j->region_addr, j->nregions * sizeof *v->region_addr);
  memcpy(v->region_size, j->region_size, j->nregions * sizeof *v->region_size);
  memcpy(v->alloc_id, j->alloc_id, j->nregions * sizeof *v->alloc_id);
  memcpy(v->prev_job, j->prev_job, j->nregions * sizeof *v->prev_job);
  memcpy(v->carry, j->carry, j->nregions * sizeof *v->carry);
  v->kernel_id = j->kernel_id;
  v->audit = j->audit;
  v->npointers = j->npointers;
  v->step = j->step;
  v->digest_all = j->digest_all;
  memcpy(v->pointers, j->pointers, (j->npointers < GP_JOB_POINTERS ? j->npointers : GP_JOB_POINTERS) * sizeof *v->pointers);
  return 1;
}

void gp_mem_release(void) {
  gp_spin_lock(&gp_job_lock);
  if (gp_job_tail != gp_job_head) gp_release_tail();
  gp_spin_unlock(&gp_job_lock);
}

uint64_t gp_mem_outstanding(void) {
  gp_spin_lock(&gp_job_lock);
  uint64_t n = gp_job_head - gp_job_tail;
  gp_spin_unlock(&gp_job_lock);
  return n;
}

// gp_mem_flush_lost reports every job still in the FIFO as lost (at exit,
// after the writer gave the GPU time to finish them).
void gp_mem_flush_lost(const char *reason) {
  gp_spin_lock(&gp_job_lock);
  while (gp_job_tail != gp_job_head) {
    gp_mem_job *j = &gp_jobs[gp_job_tail % GP_NJOBS];
    gp_push_lost(j, reason);
    gp_release_tail();
  }
  gp_spin_unlock(&gp_job_lock);
}

// ---- start ----

int gp_mem_start(const gp_config *cfg, char *err, size_t errcap) {
  const char *missing = gp_driver_missing(GP_NEED_MEMORY);
  if (missing) {
    snprintf(err, errcap, "libcuda.so.1 has no symbol %s (driver too old for memory capture?)", missing);
    return 0;
  }
  gp_results_cap = cfg->results_bytes;
  gp_staging_cap = cfg->memory_mode == GP_MEM_SNAPSHOT ? cfg->staging_bytes : 0;
  gp_jobs = calloc(GP_NJOBS, sizeof *gp_jobs);
  if (!gp_jobs) {
    snprintf(err, errcap, "cannot allocate the memory job table");
    return 0;
  }
  return 1;
}
