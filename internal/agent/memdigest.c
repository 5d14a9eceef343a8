// Step digests: at the end of a training step, one hash of the memory the
// program keeps across steps (docs/memory.md).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcap_internal.h"

// ---- step digests ----
//
// Where a training step ends, the state of the memory the program keeps
// across steps is hashed (one DIGEST point): two runs whose digests agree
// agree on their parameters, gradients and optimizer state, whatever their
// launches did in between. With optimizer steps, a step's digest hashes the
// allocations its optimizer's launches reached (parameters, gradients, the
// optimizer's state: what a divergence flows into by the step's end), found
// as those launches are made; a step whose optimizer ran a graph, or steps
// without an optimizer (--step-every), hash every live allocation the
// program owns. Libraries' own memory (Allocation.owner) is never hashed:
// it differs from run to run by design.

enum { OPT_SET = 4096 };  // open addressing over allocation bases; a step's optimizer reaches far fewer
static gp_spinlock opt_lock;
static uint64_t opt_set[OPT_SET];
static uint32_t opt_count;
static int opt_all;  // the step ran something whose memory is unknown: hash every allocation

void gp_mem_note_optimizer_all(void) {
  gp_spin_lock(&opt_lock);
  opt_all = 1;
  gp_spin_unlock(&opt_lock);
}

void gp_mem_note_optimizer(const uint8_t *params, uint32_t params_len) {
  gp_thread_scratch *s = gp_scratch();
  if (!s) {
    gp_mem_note_optimizer_all();
    return;
  }
  gp_mem_launch *m = &s->mem;
  gp_spin_lock(&gp_alloc_lock);
  gp_find_regions(m, params, params_len, NULL, 0, GP_OWNER_PROGRAM);
  gp_spin_unlock(&gp_alloc_lock);
  gp_spin_lock(&opt_lock);
  for (uint32_t r = 0; r < m->nregions; r++) {
    uint64_t base = m->regions[r].base;
    uint32_t i = (uint32_t)((base >> 8) * 0x9E3779B97F4A7C15ull >> 52) % OPT_SET;
    while (opt_set[i] && opt_set[i] != base) i = (i + 1) % OPT_SET;
    if (opt_set[i]) continue;
    if (opt_count >= OPT_SET / 2) {
      opt_all = 1;  // more than a digest of chosen allocations is worth: hash them all
      break;
    }
    opt_set[i] = base;
    opt_count++;
  }
  gp_spin_unlock(&opt_lock);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

// The regions of one digest part: a multiple of GP_MAX_JOB_REGIONS, at most GP_MAX_REGIONS.
enum { DIGEST_PART = GP_MAX_REGIONS / GP_MAX_JOB_REGIONS * GP_MAX_JOB_REGIONS };

static pthread_mutex_t digest_mu = PTHREAD_MUTEX_INITIALIZER;
static gp_mem_launch digest_part;  // under digest_mu

static void digest_skipped(const char *why) {
  static _Atomic int said;
  GP_COUNT(digests_skipped, 1);
  if (!atomic_exchange(&said, 1)) gp_logf(1, "step digest not taken: %s (later ones are counted, not logged)", why);
}

void gp_mem_digest(gp_CUcontext ctx, gp_CUstream stream, int ptsz, uint64_t seq, uint32_t step) {
  // The step's optimizer set is taken, and emptied for the next step, whatever becomes of it.
  gp_spin_lock(&opt_lock);
  int all = opt_all || !opt_count || gp_proc.cfg.step_every || gp_proc.cfg.digest_all;
  uint64_t *chosen = all ? NULL : malloc(opt_count * sizeof *chosen);
  uint32_t nchosen = 0;
  for (uint32_t i = 0; chosen && i < OPT_SET; i++)
    if (opt_set[i]) chosen[nchosen++] = opt_set[i];
  if (!all && !chosen) all = 1;
  if (chosen) qsort(chosen, nchosen, sizeof *chosen, cmp_u64);
  memset(opt_set, 0, sizeof opt_set);
  opt_count = 0;
  opt_all = 0;
  gp_spin_unlock(&opt_lock);
  if (atomic_load_explicit(&gp_mem_stopped, memory_order_relaxed)) {
    free(chosen);
    digest_skipped("memory capture stopped");
    return;
  }
  gp_CUstream s = gp_job_stream(stream, ptsz);
  int capturing = 0;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.streamIsCapturing(s, &capturing);
  gp_in_agent_call(0);
  gp_mem_context *c = r == 0 && !capturing ? gp_context_state(ctx) : NULL;
  gp_CUdevice dev = 0;
  if (c && gp_cu.ctxGetDevice(&dev) != 0) c = NULL;
  if (!c) {
    free(chosen);
    digest_skipped(capturing ? "the step began inside a stream capture" : "no memory capture on this context");
    return;
  }
  // The allocations, in address order, as the table holds them.
  uint32_t n = 0, cap = 256;
  gp_region_rec *regs = malloc(cap * sizeof *regs);
  gp_spin_lock(&gp_alloc_lock);
  for (uint32_t i = 0; regs && i < gp_nallocs; i++) {
    const gp_allocation *a = GP_ALLOC_AT(i);
    if (!a || a->owner != GP_OWNER_PROGRAM || a->device != (uint32_t)dev || a->kind == GP_ALLOC_MANAGED ||
        a->kind == GP_ALLOC_RANGE_QUERY)
      continue;
    if (!all && !bsearch(&a->base, chosen, nchosen, sizeof *chosen, cmp_u64)) continue;
    if (n == cap) {
      gp_region_rec *grown = realloc(regs, 2 * cap * sizeof *regs);
      if (!grown) break;
      regs = grown, cap *= 2;
    }
    regs[n++] = (gp_region_rec){a->base, a->size, a->id};
  }
  gp_spin_unlock(&gp_alloc_lock);
  free(chosen);
  if (!regs || !n) {
    free(regs);
    digest_skipped(regs ? "no allocation of the program's on this device" : "out of host memory");
    return;
  }
  pthread_mutex_lock(&digest_mu);
  gp_mem_launch *m = &digest_part;
  uint32_t status = GP_PLAN_HASH;
  for (uint32_t off = 0; off < n && status == GP_PLAN_HASH; off += DIGEST_PART) {
    uint32_t k = n - off < DIGEST_PART ? n - off : DIGEST_PART;
    memset(m, 0, offsetof(gp_mem_launch, regions));
    m->nregions = k;
    memcpy(m->regions, regs + off, k * sizeof *regs);
    for (uint32_t i = 0; i < k; i++) m->alloc_index[i] = -1, m->carry[i] = GP_CARRY_NONE, m->prev_job[i] = 0;
    status = gp_enqueue_point(m, c, s, seq, GP_POINT_DIGEST, 0, off, n, step, (uint32_t)all);
  }
  pthread_mutex_unlock(&digest_mu);
  free(regs);
  if (status != GP_PLAN_HASH) {
    digest_skipped(status == GP_PLAN_SKIPPED_RING_TOO_SMALL ? "its chunk hashes do not fit the results ring"
                                                            : "no room for its jobs");
    return;
  }
  GP_COUNT(digests, 1);
}
