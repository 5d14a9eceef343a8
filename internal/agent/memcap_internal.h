// What memory capture's files (mem*.c) share; memcap.h is what the rest of
// the agent and the Go writer call. Each file does one job:
//
//   memctx.c      each context's GPU state: the memcap kernels, the pinned
//                 rings and their device mirrors, the shadow pool
//   memalloc.c    the allocation table: allocations added, removed and
//                 found, the write epoch, the driver's range query
//   memregions.c  the regions of a launch and what may be carried (write
//                 sets); the driver calls that write memory outside kernels
//   memjobs.c     a launch's memory jobs: the job FIFO and its rings,
//                 deferred batches and hashes beside the program; a copy's
//                 (copy states)
//   memdigest.c   step digests: the optimizer's set, a step's digest
//   memcap.c      the driver calls' callbacks (allocations, writes), the
//                 writer's side (gp_mem_poll, gp_mem_release), the start
//
// They use each other in that order, the later the higher: a file calls or
// reads only the files above it in this list.
#ifndef GPURR_MEMCAP_INTERNAL_H
#define GPURR_MEMCAP_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "internal.h"

#pragma GCC visibility push(hidden)

static inline const char *gp_cu_error(gp_CUresult r) {
  const char *s = NULL;
  if (gp_cu.getErrorName && gp_cu.getErrorName(r, &s) == 0 && s) return s;
  return "CUDA error";
}

// ---- memctx.c ----

enum { GP_NJOBS = 8192 };

typedef struct {
  void *ctx;
  int ok;                   // 0: not tried, 1: ready, -1: failed (logged once)
  gp_CUfunction fn, fn_nan;  // gpurr_memcap, gpurr_memcap_nan (jobs that count NaN)
  uint64_t results_dev;     // the results ring, as this context addresses it
  uint64_t staging_dev;
  uint64_t scratch;         // device mirror of the results ring
  uint64_t counters;        // GP_NJOBS × 2 zeroed uint32
  uint64_t nan_counts;      // nan-scan: GP_NJOBS × GP_NAN_JOB_BYTES zeroed
  uint64_t pool, pool_size; // shadow pool: one hash per chunk of snapshotted allocations
  uint64_t *free_off, *free_len;  // free extents of the pool, unsorted
  uint32_t nfree, free_cap;
} gp_mem_context;

// The pinned rings, shared by every context (CU_MEMHOSTALLOC_PORTABLE).
extern uint8_t *gp_results_host, *gp_staging_host;
extern uint64_t gp_results_cap, gp_staging_cap;

// gp_context_state is ctx's state, made at its first use; NULL when
// memory capture cannot work there.
gp_mem_context *gp_context_state(void *ctx);
// Shadow extents: first fit over a short free list. Caller holds gp_alloc_lock.
uint64_t gp_shadow_alloc(gp_mem_context *c, uint64_t size);
void gp_shadow_free(void *ctx, uint64_t shadow, uint64_t size);

// ---- memalloc.c: allocations, sorted by base, under gp_alloc_lock ----

typedef struct {
  uint64_t base, size, id;
  uint32_t kind, device;
  uint64_t shadow;          // device address of one hash per chunk, 0 until the first snapshot
  void *shadow_ctx;         // the context whose pool holds it
  int copy_all;             // next snapshot copies every chunk (new, or a drop lost chunks)
  uint64_t last_job;        // hash mode: the last job that hashed it, enqueued ...
  uint64_t last_epoch;      // ... in this write epoch; another epoch: written since, unhashed
  int owner;                // GP_OWNER_*: a library's own memory is left out of step digests
} gp_allocation;

// Write epoch: moved by every write memory capture does not hash whose
// target is unknown (graph launches, skipped launches, copies it cannot
// place); an allocation's last hash is its state only within its epoch.
extern _Atomic uint64_t gp_write_epoch;

extern gp_spinlock gp_alloc_lock;
// The table is sorted keys pointing at allocations that never move
// (PyTorch under cudaMallocAsync keeps thousands alive, each tensor one
// allocation, and frees and allocates several per launch). A free leaves
// its key in place, dead (end == base, no allocation), and an insert takes
// a dead key beside its place: cudaMallocAsync hands a freed address out
// again soon, so most frees and allocations move no key at all. Dead keys
// are swept out when they are a quarter of the table. No key's base lies
// inside a live allocation other than its own, so the last key at or
// below an address is the only one that can hold it.
typedef struct {
  uint64_t base, end;
  gp_allocation *a;  // NULL: dead
} gp_alloc_key;
extern gp_alloc_key *gp_alloc_keys;
extern uint32_t gp_nallocs;  // counts dead keys too
extern uint64_t gp_alloc_lo, gp_alloc_hi;  // span of every allocation ever seen

#define GP_ALLOC_AT(i) (gp_alloc_keys[i].a)

// gp_first_above is the number of keys whose base is at most addr. Caller holds gp_alloc_lock.
// Branch-free (the compare becomes a conditional move): a launch looks up dozens of
// parameter words, and a mispredicted branch per halving cost more than the halving.
static inline uint32_t gp_first_above(uint64_t addr) {
  if (!gp_nallocs) return 0;
  const gp_alloc_key *k = gp_alloc_keys;
  uint32_t n = gp_nallocs;
  while (n > 1) {
    uint32_t half = n / 2;
    k = k[half - 1].base <= addr ? k + half : k;
    n -= half;
  }
  return (uint32_t)(k - gp_alloc_keys) + (k->base <= addr);
}

// find returns the index of the allocation holding addr, or -1. Caller holds gp_alloc_lock.
static inline int gp_find_alloc(uint64_t addr) {
  if (addr < gp_alloc_lo || addr >= gp_alloc_hi) return -1;
  uint32_t i = gp_first_above(addr);
  return i > 0 && addr < gp_alloc_keys[i - 1].end ? (int)(i - 1) : -1;
}

// gp_find_alloc_at returns the index of the live allocation at base: key hint
// if it still is (the launch's ENTER found it there, and keys move only
// when the table grows, shrinks or is swept), else a search. Caller holds
// gp_alloc_lock.
static inline int gp_find_alloc_at(uint64_t base, int32_t hint) {
  if (hint >= 0 && (uint32_t)hint < gp_nallocs && gp_alloc_keys[hint].a && gp_alloc_keys[hint].base == base) return hint;
  int i = gp_find_alloc(base);
  return i >= 0 && gp_alloc_keys[i].base == base ? i : -1;
}

// Whether allocation i and the one after it are cuMemMap'd pieces mapped end to end.
static inline int gp_alloc_joined(uint32_t i) {
  return i + 1 < gp_nallocs && GP_ALLOC_AT(i) && GP_ALLOC_AT(i + 1) && GP_ALLOC_AT(i)->kind == GP_ALLOC_MAP &&
         GP_ALLOC_AT(i + 1)->kind == GP_ALLOC_MAP && gp_alloc_keys[i].end == gp_alloc_keys[i + 1].base;
}

// cleared: memory capture cleared it (zero_fill), said in its record.
void gp_add_alloc(uint64_t base, uint64_t size, uint32_t kind, int owner, uint64_t callstack_id, int cleared);
void gp_remove_alloc(uint64_t base, uint64_t size);
// Memory the callbacks never showed (IPC handles, graph allocations) is
// found with the driver's range query, for words that look like device
// pointers; misses are remembered so a hot launch does not ask again.
// owner: whose memory it is taken to be (a library kernel's unknown memory is its library's).
int gp_range_query(uint64_t word, int owner);
// gp_alloc_span is the allocation holding addr, as [*base, *base + *size);
// addr alone (1 byte) when the table has none, and then 0.
int gp_alloc_span(uint64_t addr, uint64_t *base, uint64_t *size);

// ---- memjobs.c: the job FIFO (declared here for memregions.c and the writer's side) ----

enum { GP_JOB_FREE = 0, GP_JOB_ENQUEUED = 1, GP_JOB_CONSUMING = 2 };

typedef struct {
  _Atomic uint32_t state;
  uint32_t point, snapshot, nan_dtypes, region_base, nregions, njobs, total_chunks;
  // piece: the job holds chunks [piece_first, piece_first + total_chunks) of its one region,
  // larger than the staging ring takes at once (region_addr and region_size are the whole region's).
  uint32_t piece, piece_first;
  uint64_t launch_seq, job_seq;
  uint64_t res_off, res_end, stg_off, stg_end;  // ring positions (monotonic byte counts)
  uint64_t region_addr[GP_MAX_JOB_REGIONS], region_size[GP_MAX_JOB_REGIONS];
  uint64_t alloc_id[GP_MAX_JOB_REGIONS], prev_job[GP_MAX_JOB_REGIONS];
  uint8_t carry[GP_MAX_JOB_REGIONS];
  uint64_t kernel_id;
  uint32_t audit, npointers;
  uint32_t step, digest_all;  // GP_POINT_DIGEST; GP_POINT_COPY: step is the copy's correlation id (gp_memjob_view.call)
  gp_pointer_rec pointers[GP_JOB_POINTERS];
} gp_mem_job;

extern gp_spinlock gp_job_lock;
extern gp_mem_job *gp_jobs;
extern uint64_t gp_job_head, gp_job_tail;  // FIFO of jobs, under gp_job_lock

// ---- memregions.c ----

// gp_find_regions widens every parameter word that points into an allocation
// to the whole allocation; a cuMemMap'd piece brings the pieces mapped right
// next to it, since a tensor may straddle them (expandable segments).
void gp_find_regions(gp_mem_launch *m, const uint8_t *params, uint32_t len, const gp_readonly *ro, int learned,
                     int owner);
// gp_write_regions finds the regions a copy or memset writing from dst on
// may reach: the allocation holding dst and the cuMemMap'd pieces mapped
// next to it. Caller holds gp_alloc_lock.
void gp_write_regions(gp_mem_launch *m, uint64_t dst);
// gp_decide_carry settles, at the launch's exit, which regions go unhashed:
// those no word may write (m->carry) whose allocation's last hash is still
// its state (hashed in this epoch, by a job still named). It notes for
// every region the job whose hash is its state before the launch.
void gp_decide_carry(gp_mem_launch *m, uint64_t epoch, int carrying);
// gp_note_hashed makes job the last hash of the job's hashed regions; hint[r]
// is where the launch found region r's allocation.
void gp_note_hashed(const gp_mem_job *j, const int32_t *hint, uint64_t epoch);

// By driver cbid: how a call that writes device memory names what it writes (GP_WRITE_*).
enum { GP_MAX_WRITE_CBID = 1024 };
extern uint8_t gp_call_write_class[GP_MAX_WRITE_CBID];
// By driver cbid, for hashes running beside the program (--defer-hashes):
// what the call must wait for (GP_ORDER_*), and where its parameters name
// its stream (byte offset + 1; 0: it names none), per-thread when gp_call_ptsz.
extern uint8_t gp_call_order[GP_MAX_WRITE_CBID], gp_call_stream_at[GP_MAX_WRITE_CBID], gp_call_ptsz[GP_MAX_WRITE_CBID];
// Set when CUPTI cannot name the copy and memset calls: then nothing is carried.
extern int gp_writes_unseen;

// ---- memjobs.c ----

extern _Atomic int gp_mem_stopped;

static inline gp_CUstream gp_job_stream(gp_CUstream stream, int ptsz) {
  // A _ptsz call on stream 0 ran on the per-thread stream; our plain
  // calls must name it (CU_STREAM_PER_THREAD), or it would land on
  // the legacy stream.
  return ptsz && !stream ? (gp_CUstream)0x2 : stream;
}

void gp_release_tail(void);  // caller holds gp_job_lock
int gp_job_done(const gp_mem_job *j);
void gp_push_lost(const gp_mem_job *j, const char *reason);
// gp_flush_if_old launches a batch that has waited longer than
// gp_batch_max_age_ns, from whichever thread calls it (the writer's, when
// the program has stopped launching).
void gp_flush_if_old(void);
// A point of more than GP_MAX_REGIONS regions (a step digest) is enqueued in
// parts: m holds the regions from region_offset, a multiple of
// GP_MAX_JOB_REGIONS, of total; step and digest_all describe a digest, step
// names a copy state's call (GP_POINT_COPY).
uint32_t gp_enqueue_point(gp_mem_launch *m, gp_mem_context *c, gp_CUstream stream, uint64_t seq, uint32_t point,
                          int snapshot, uint32_t region_offset, uint32_t total, uint32_t step, uint32_t digest_all);
// gp_before_call and gp_before_free: a driver call (at its entry) that may
// write memory or order work after launches, and a free, wait for the
// hashes that read that memory.
void gp_before_call(uint32_t cbid, const gp_CallbackData *cb);
// gp_copy_state enqueues the copy state of a copy or memset call that wrote
// m's regions (gp_write_regions), at its exit, on its stream; or records it
// lost, naming them. Not for a copy into a capturing stream: that ran nothing.
void gp_copy_state(gp_mem_launch *m, uint32_t cbid, const gp_CallbackData *cb);
void gp_before_free(uint32_t cbid, const gp_CallbackData *cb, uint64_t ptr);

#pragma GCC visibility pop

#endif
