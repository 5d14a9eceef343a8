// A launch's memory jobs (invariant 2: stream order is truth, no host
// synchronization): the GPU work enqueued on the launch's own stream to hash
// or snapshot its regions, the job FIFO and the rings its results go to,
// jobs batched into one kernel (deferred hash kernels) and run beside the
// program on streams of gpurr's own.
//
// A job is one gpurr_memcap kernel over up to GP_MAX_JOB_REGIONS regions.
// Its results go to a slice of the results ring (pinned host memory the GPU
// writes through a mapping, mirrored by device scratch of the same size) and,
// for a snapshot, the changed chunks to a slice of the staging ring. Jobs sit
// in a FIFO; the Go writer takes the oldest once the GPU has published it
// (gp_mem_poll) and frees its space (gp_mem_release).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcap_internal.h"

_Atomic int gp_mem_stopped;
static char stop_reason[256];

void gp_mem_stop(const char *reason) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&gp_mem_stopped, &expected, 1)) {
    snprintf(stop_reason, sizeof stop_reason, "%s", reason);
    gp_logf(2, "memory capture stopped: %s", reason);
  }
}

const char *gp_mem_stop_reason(void) { return atomic_load(&gp_mem_stopped) ? stop_reason : ""; }

// ---- the job FIFO and the two rings ----

gp_spinlock gp_job_lock;

int gp_mem_stuck(void) { return gp_spin_stuck(&gp_alloc_lock) || gp_spin_stuck(&gp_job_lock); }
gp_mem_job *gp_jobs;
uint64_t gp_job_head, gp_job_tail;     // FIFO of jobs, under gp_job_lock
static uint64_t res_head, res_tail;     // bytes of the results ring
static uint64_t stg_head, stg_tail;     // bytes of the staging ring

// ring_restart moves an empty ring to its start: else a request longer than
// the space on either side of where the ring last stopped would never fit,
// and backpressure would wait for it forever.
static void ring_restart(uint64_t *head, uint64_t *tail, uint64_t cap) {
  if (cap && *head == *tail && *head % cap) *head = *tail = *head + cap - *head % cap;
}

// ring_reserve finds n contiguous bytes in a ring of cap bytes whose free
// space runs from *head to tail + cap; a slice never wraps, so the bytes
// left at the end are skipped. Returns the start position, or UINT64_MAX.

static uint64_t ring_reserve(uint64_t *head, uint64_t tail, uint64_t cap, uint64_t n) {
  uint64_t pos = *head, off = pos % cap;
  if (off + n > cap) pos += cap - off;  // skip to the ring's start
  if (pos + n - tail > cap) return UINT64_MAX;
  *head = pos + n;
  return pos;
}

void gp_release_tail(void) {  // caller holds gp_job_lock
  gp_mem_job *j = &gp_jobs[gp_job_tail % GP_NJOBS];
  res_tail = j->res_end;
  if (j->snapshot) stg_tail = j->stg_end;
  atomic_store_explicit(&j->state, GP_JOB_FREE, memory_order_release);
  gp_job_tail++;
}

int gp_job_done(const gp_mem_job *j) {
  const volatile uint64_t *done = (const volatile uint64_t *)(gp_results_host + j->res_off % gp_results_cap);
  return *done == j->job_seq;
}

// lost_rec is a gp_memlost_rec and, for a copy state, the regions it names.
typedef struct {
  gp_memlost_rec r;
  gp_region_rec regions[GP_MAX_JOB_REGIONS];
} lost_rec;

static void push_lost_rec(lost_rec *l, uint64_t launch_seq, uint32_t point, uint32_t call, const char *reason) {
  l->r.h.type = GP_REC_MEMLOST;
  l->r.h.size = sizeof l->r + (point == GP_POINT_COPY ? l->r.nregions * sizeof *l->regions : 0);
  l->r.launch_seq = launch_seq;
  l->r.point = point;
  l->r.call = call;
  snprintf(l->r.reason, sizeof l->r.reason, "%s", reason);
  gp_ring_push(l);
}

void gp_push_lost(const gp_mem_job *j, const char *reason) {
  lost_rec l;
  memset(&l.r, 0, sizeof l.r);
  l.r.region_base = j->region_base;
  l.r.nregions = j->nregions;
  l.r.njobs = j->njobs;
  for (uint32_t i = 0; j->point == GP_POINT_COPY && i < j->nregions; i++)
    l.regions[i] = (gp_region_rec){j->region_addr[i], j->region_size[i], j->alloc_id[i]};
  push_lost_rec(&l, j->launch_seq, j->point, j->point == GP_POINT_COPY ? j->step : 0, reason);
  GP_COUNT(memory_jobs_dropped, 1);
}

// drop_oldest frees the oldest job if the GPU has finished it and the
// writer has not started on it; its chunks are lost, so every allocation it
// covered copies all chunks at its next snapshot. Caller holds gp_job_lock.
static int drop_oldest(void) {
  if (gp_job_tail == gp_job_head) return 0;
  gp_mem_job *j = &gp_jobs[gp_job_tail % GP_NJOBS];
  uint32_t expected = GP_JOB_ENQUEUED;
  if (!gp_job_done(j) || !atomic_compare_exchange_strong(&j->state, &expected, GP_JOB_CONSUMING)) return 0;
  gp_push_lost(j, "dropped: staging ring full (--on-full drop-oldest)");
  if (j->snapshot) gp_mem_copy_all(j->alloc_id, j->nregions);
  gp_release_tail();
  return 1;
}

// DROP_WAIT_NS bounds how long drop-oldest waits for the GPU to finish the
// oldest job before it gives up on this launch's snapshot instead: the
// oldest may sit behind a long kernel of the program.
#define DROP_WAIT_NS (10ull * 1000000ull)

// reserve_job claims a FIFO slot and ring space for a job, waiting
// (backpressure) or dropping old jobs (drop-oldest) when full. Returns the
// job, or NULL with *status set to why not.
static gp_mem_job *reserve_job(uint64_t res_bytes, uint64_t stg_bytes, uint32_t *status) {
  if (res_bytes > gp_results_cap || stg_bytes > gp_staging_cap) {
    *status = GP_PLAN_SKIPPED_RING_TOO_SMALL;
    return NULL;
  }
  uint64_t t0 = 0;
  for (;;) {
    gp_spin_lock(&gp_job_lock);
    if (gp_job_head - gp_job_tail < GP_NJOBS) {
      ring_restart(&res_head, &res_tail, gp_results_cap);
      ring_restart(&stg_head, &stg_tail, gp_staging_cap);
      uint64_t rh = res_head, sh = stg_head;
      uint64_t ro = ring_reserve(&rh, res_tail, gp_results_cap, res_bytes);
      uint64_t so = stg_bytes ? ring_reserve(&sh, stg_tail, gp_staging_cap, stg_bytes) : 0;
      if (ro != UINT64_MAX && so != UINT64_MAX) {
        res_head = rh;
        stg_head = sh;
        gp_mem_job *j = &gp_jobs[gp_job_head % GP_NJOBS];
        // Only the scalars: gp_enqueue_point fills the arrays up to the job's regions and pointers.
        memset((uint8_t *)j + sizeof j->state, 0, offsetof(gp_mem_job, region_addr) - sizeof j->state);
        j->npointers = 0;
        j->job_seq = gp_job_head + 1;
        j->res_off = ro;
        j->res_end = rh;
        j->stg_off = so;
        j->stg_end = stg_bytes ? sh : stg_tail;
        gp_job_head++;
        gp_spin_unlock(&gp_job_lock);
        if (t0) GP_COUNT(staging_wait_ns, gp_monotonic_ns() - t0);
        return j;
      }
    }
    int dropped = gp_proc.cfg.on_full == GP_ON_FULL_DROP_OLDEST && drop_oldest();
    gp_spin_unlock(&gp_job_lock);
    if (dropped) continue;
    gp_mem_flush_batch();  // the writer waits for the oldest jobs, which may be in it
    if (!t0) t0 = gp_monotonic_ns();
    if (gp_proc.cfg.on_full == GP_ON_FULL_DROP_OLDEST) {
      // The oldest job is still on the GPU (or being saved): wait for it a
      // little, so that it is the one dropped rather than this launch's
      // snapshot; the newest snapshots are the ones worth keeping.
      if (gp_monotonic_ns() - t0 > DROP_WAIT_NS) {
        *status = GP_PLAN_SKIPPED_RING_FULL;
        GP_COUNT(staging_wait_ns, gp_monotonic_ns() - t0);
        return NULL;
      }
      usleep(20);
      continue;
    }
    if (gp_monotonic_ns() - t0 > 60ull * 1000000000ull) {
      // The GPU is not finishing our jobs (a fault, a hung kernel): stop,
      // so no later launch waits again.
      gp_mem_stop("the GPU did not finish memory jobs for 60 s (staging ring full)");
      *status = GP_PLAN_SKIPPED_RING_FULL;
      return NULL;
    }
    usleep(20);
  }
}

// cancel_job returns a reserved job that could not be launched: it stays
// in the FIFO, already "done", and the writer reports it lost.
static void cancel_job(gp_mem_job *j, const char *why) {
  volatile uint64_t *done = (volatile uint64_t *)(gp_results_host + j->res_off % gp_results_cap);
  ((volatile uint32_t *)done)[3] = 1;  // lost marker (header word 3)
  ((volatile uint32_t *)done)[2] = 0;
  *done = j->job_seq;
  (void)why;
}

// ---- enqueueing ----

static uint64_t selected_launch(uint64_t seq) {
  if (!gp_proc.cfg.nsnapshot_ranges) return 1;
  for (int i = 0; i < gp_proc.cfg.nsnapshot_ranges; i++) {
    const uint64_t *r = &gp_proc.cfg.snapshot_ranges[3 * i];
    if (seq >= r[0] && seq <= r[1] && (seq - r[0]) % r[2] == 0) return 1;
  }
  return 0;
}

// complete_on_host publishes a job with nothing to hash (every region
// carried): no kernel runs, the writer fills it in from earlier jobs.
static void complete_on_host(gp_mem_job *j) {
  volatile uint64_t *done = (volatile uint64_t *)(gp_results_host + j->res_off % gp_results_cap);
  ((volatile uint32_t *)done)[2] = 0;
  ((volatile uint32_t *)done)[3] = 0;
  atomic_thread_fence(memory_order_release);
  *done = j->job_seq;
}

// ---- deferred hash kernels ----
//
// In hash mode with write sets, a job's kernel need not run right after its
// launch: only before anything may write what it hashes, and before the
// program can order other work after that launch. Jobs wait in one batch,
// on the stream of their launches, and one kernel hashes them all when the
// batch is launched (flushed), on that stream, before:
// - a launch on that stream that may write a batched region (by proved
//   write sets only: a learned set's miss must stay visible to the next
//   audit), or that may write anything (a graph, a filtered kernel, one
//   that stores through loaded pointers);
// - any launch on another stream, and any event record, stream wait,
//   synchronization, copy to the host, capture begin or teardown
//   (GP_WRITE_FLUSH): whatever the program orders after the launches, by
//   an event or the host, is then ordered after their hashes too, as it was
//   when each hash ran right after its launch; nothing the program did not
//   order is ordered by us (a race stays a race);
// - a copy, memset or free of a batched region;
// - the batch is full, or 1 ms old (when the next job comes, or when the
//   writer finds the oldest job still waiting), or the process exits.

// A batch older than this is launched with the next job: the writer, and
// whoever reads the recording live, should not wait long for a hash.
uint64_t gp_batch_max_age_ns = 1000000;

typedef struct {
  gp_mem_context *c;
  gp_CUstream stream;
  int nan;                               // jobs count NaN: gpurr_memcap_nan
  uint32_t blocks;
  uint64_t since_ns, bytes;
  gp_mem_job *job[GP_MAX_BATCH_JOBS];
  int host_written;                      // a job's memory may be written by the host
  gp_batch_param p;
} pending_batch;

static gp_spinlock batch_lock;
static pending_batch batch;          // under batch_lock
static _Atomic uint32_t batch_jobs;  // batch.p.njobs, read without the lock
static int deferring;                // hash mode with write sets, copies seen

static int batched(uint64_t base, uint64_t size) {  // caller holds batch_lock
  for (uint32_t i = 0; i < batch.p.nregions; i++) {
    const gp_job_region *r = &batch.p.r[i];  // a carried region has no bytes: not hashed
    if (r->size && base < r->base + r->size && r->base < base + size) return 1;
  }
  return 0;
}

// ---- hashes beside the program ----
//
// A batch runs on a stream of gpurr's own, one per program stream (its
// side), after an event recorded on that program stream: the GPU runs it
// beside what the program launches next. What it hashes is in flight until
// the GPU has finished it, and the program's stream must not write that
// meanwhile. So before a stream
// - launches a kernel that may write a region in flight in its side (a
//   graph, or a kernel that may write anything, counts as writing all),
// - frees one, or copies or sets memory into one, or
// - records an event or is synchronized (how the program orders its other
//   streams, and the host, after this stream's launches),
// it waits for its side (cuStreamWaitEvent: the GPU waits, not the host),
// once for every batch launched until then. Other streams wait for nothing:
// what the program orders after this stream's launches it orders through
// those events and synchronizations, and what it leaves unordered stays a
// race. The legacy stream is ordered with every blocking stream, so it and
// the others wait for each other's sides. Calls that name no stream
// (synchronous copies, memsets and frees, unmaps) and teardown make the
// host wait (cuEventSynchronize). Per-thread default streams, and streams
// beyond MAX_SIDES, hash on the program's stream as before.

// The host runs far ahead of a GPU-bound stream: a side may hold a step's
// worth of batches the GPU has not reached yet.
enum { MAX_SIDES = 8, INFLIGHT_SLOTS = 8192, INFLIGHT_BATCHES = 2048 };

typedef struct {
  uint64_t base, end, gen;  // base 0: an empty slot
} inflight_region;

typedef struct {
  uint64_t gen;
  uint32_t njobs;
  uint64_t seq[GP_MAX_BATCH_JOBS], res_off[GP_MAX_BATCH_JOBS];
} inflight_batch;

typedef struct {
  gp_CUcontext ctx;
  gp_CUstream program;  // the program's stream whose batches it runs
  gp_CUstream side;     // NULL: none could be made; the program's stream hashes
  void *ev_program, *ev_hashed;
  uint64_t gen, done_gen, waited_gen;  // batches launched; known finished; the program's stream waited for
  // What its batches hash, by allocation base (open addressing): the gen of
  // the newest batch hashing it. Slots of finished batches are stale, not
  // empty, until the whole table is cleared when nothing is in flight.
  inflight_region *slots;  // INFLIGHT_SLOTS
  uint32_t slots_used;
  inflight_batch *batches;  // INFLIGHT_BATCHES, FIFO by gen
  uint64_t b_head, b_tail;
} side_stream;

static side_stream sides[MAX_SIDES];  // under batch_lock
static uint32_t nsides;
static _Atomic int side_busy;  // some side has batches not known finished

static int is_legacy(gp_CUstream s) { return !s || s == (gp_CUstream)0x1; }

// canon names the legacy stream one way (0, or CU_STREAM_LEGACY).
static gp_CUstream canon(gp_CUstream s) { return is_legacy(s) ? NULL : s; }

static side_stream *side_of(gp_CUcontext ctx, gp_CUstream program) {
  program = canon(program);
  for (uint32_t i = 0; i < nsides; i++)
    if (sides[i].ctx == ctx && sides[i].program == program) return &sides[i];
  return NULL;
}

// side_make makes, in the current context ctx, the side of stream program;
// one that cannot be made is remembered as none.
static side_stream *side_make(gp_CUcontext ctx, gp_CUstream program) {
  if (nsides == MAX_SIDES || !gp_cu.streamCreate || !gp_cu.streamWaitEvent || !gp_cu.eventSynchronize ||
      !gp_cu.eventCreate || !gp_cu.eventRecord)
    return NULL;
  side_stream *sd = &sides[nsides++];
  sd->ctx = ctx, sd->program = canon(program);
  sd->slots = calloc(INFLIGHT_SLOTS, sizeof *sd->slots);
  sd->batches = calloc(INFLIGHT_BATCHES, sizeof *sd->batches);
  if (!sd->slots || !sd->batches) {
    free(sd->slots), free(sd->batches);
    sd->slots = NULL, sd->batches = NULL;
    return sd;  // no side: its batches run on the program's stream
  }
  int mode = 2;  // relaxed: another thread's capture does not forbid it
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  // Non-blocking: the legacy stream does not wait for it, nor it for the legacy stream.
  gp_CUresult r = gp_cu.streamCreate(&sd->side, 0x1);
  if (r == 0) r = gp_cu.eventCreate(&sd->ev_program, 0x2);  // CU_EVENT_DISABLE_TIMING
  if (r == 0) r = gp_cu.eventCreate(&sd->ev_hashed, 0x2);
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  if (r != 0) {
    sd->side = NULL;
    gp_logf(1, "memory capture: no stream for hashes beside the program: %s (%d); they run on its streams",
            gp_cu_error(r), r);
  }
  return sd;
}

static int batch_finished(const inflight_batch *b) {
  uint64_t consumed = __atomic_load_n(&gp_job_tail, __ATOMIC_ACQUIRE);  // the writer took them: done
  for (uint32_t k = 0; k < b->njobs; k++)
    if (consumed < b->seq[k] && *(const volatile uint64_t *)(gp_results_host + b->res_off[k] % gp_results_cap) != b->seq[k])
      return 0;
  return 1;
}

static void update_busy(void) {
  int busy = 0;
  for (uint32_t i = 0; i < nsides && !busy; i++) busy = sides[i].gen > sides[i].done_gen;
  atomic_store_explicit(&side_busy, busy, memory_order_relaxed);
}

static void clear_slots(side_stream *sd) {
  memset(sd->slots, 0, INFLIGHT_SLOTS * sizeof *sd->slots);
  sd->slots_used = 0;
}

// retire forgets the batches the GPU has finished: a side runs them in order.
static void retire(side_stream *sd) {
  while (sd->b_tail < sd->b_head && batch_finished(&sd->batches[sd->b_tail % INFLIGHT_BATCHES]))
    sd->done_gen = sd->batches[sd->b_tail++ % INFLIGHT_BATCHES].gen;
  if (sd->done_gen == sd->gen && sd->slots_used > INFLIGHT_SLOTS / 4) clear_slots(sd);
}

static uint32_t slot_of(uint64_t base) { return (uint32_t)((base >> 8) * 0x9E3779B97F4A7C15ull >> 51); }
_Static_assert(INFLIGHT_SLOTS == 1 << 13, "slot_of takes the hash's top 13 bits");

// in_flight: whether [base, base+size) (anything when size is 0) overlaps a
// region a batch of sd after batch `after` hashes. exact: base is an
// allocation's, as every region's is; else every slot is looked at.
static int in_flight(const side_stream *sd, uint64_t base, uint64_t size, uint64_t after, int exact) {
  if (sd->gen <= after) return 0;
  if (!size) return 1;
  if (!exact) {
    for (uint32_t i = 0; i < INFLIGHT_SLOTS; i++) {
      const inflight_region *r = &sd->slots[i];
      if (r->base && r->gen > after && base < r->end && r->base < base + size) return 1;
    }
    return 0;
  }
  for (uint32_t i = slot_of(base), n = 0; n < INFLIGHT_SLOTS; i = (i + 1) % INFLIGHT_SLOTS, n++) {
    const inflight_region *r = &sd->slots[i];
    if (!r->base) return 0;
    if (r->base == base) return r->gen > after;
  }
  return 0;
}

// note_in_flight notes that batch gen of sd hashes [base, end): in its
// slot, else in the first finished batch's slot on the way (no lookup
// needs a finished slot), else in an empty one; 0 when there is no room
// (the table is three quarters full).
static int note_in_flight(side_stream *sd, uint64_t base, uint64_t end, uint64_t gen) {
  inflight_region *stale = NULL;
  uint32_t i = slot_of(base);
  for (uint32_t n = 0; n < INFLIGHT_SLOTS; i = (i + 1) % INFLIGHT_SLOTS, n++) {
    inflight_region *r = &sd->slots[i];
    if (r->base == base) {
      r->end = end, r->gen = gen;
      return 1;
    }
    if (!r->base) break;
    if (!stale && r->gen <= sd->done_gen) stale = r;
  }
  if (stale) {
    *stale = (inflight_region){base, end, gen};
    return 1;
  }
  if (sd->slots_used >= INFLIGHT_SLOTS / 4 * 3) return 0;
  sd->slots[i] = (inflight_region){base, end, gen};
  sd->slots_used++;
  return 1;
}

static void await_host(side_stream *sd) {
  gp_in_agent_call(1);
  int mode = 2;
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  gp_CUresult r = gp_cu.eventSynchronize(sd->ev_hashed);
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  gp_in_agent_call(0);
  if (r != 0) {  // the context is failing: its hashes are lost with it
    gp_logf(2, "memory capture: cuEventSynchronize(hashes): %s (%d)", gp_cu_error(r), r);
    gp_mem_unhashed_write();
  }
  GP_COUNT(side_host_waits, 1);
  sd->done_gen = sd->gen;
  sd->b_tail = sd->b_head;
  if (sd->slots_used > INFLIGHT_SLOTS / 4) clear_slots(sd);
}

// await_side makes stream s, of the caller's current context, wait for
// every batch of sd launched so far; the host waits where it cannot.
static void await_side(side_stream *sd, gp_CUstream s) {
  int capturing = 0;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.streamIsCapturing(s, &capturing);
  // A capturing stream runs nothing now: the launch of its graph waits.
  if (r == 0 && !capturing) r = gp_cu.streamWaitEvent(s, sd->ev_hashed, 0);
  gp_in_agent_call(0);
  if (r != 0) {
    await_host(sd);
    return;
  }
  if (capturing) return;
  GP_COUNT(side_stream_waits, 1);
  if (canon(s) == sd->program) sd->waited_gen = sd->gen;
}

// await_write: stream s of ctx is about to write [base, base+size)
// (anything when size is 0), or to order other work after its launches;
// named 0: the call names no stream, so the host waits.
static void await_write(gp_CUcontext ctx, gp_CUstream s, int named, uint64_t base, uint64_t size, int exact) {
  if (!atomic_load_explicit(&side_busy, memory_order_relaxed)) return;
  s = canon(s);
  for (uint32_t i = 0; i < nsides; i++) {
    side_stream *sd = &sides[i];
    if (sd->ctx != ctx || sd->gen == sd->done_gen) continue;
    if (named && sd->program != s && !is_legacy(s) && !is_legacy(sd->program)) continue;
    retire(sd);
    uint64_t after = sd->done_gen;
    if (named && s == sd->program && sd->waited_gen > after) after = sd->waited_gen;
    if (!in_flight(sd, base, size, after, exact)) continue;
    if (named)
      await_side(sd, s);
    else
      await_host(sd);
  }
  update_busy();
}

// await_all: teardown of stream s (named) or of a context: the host waits
// for their sides. A context's teardown also forgets every side: the
// context's streams and events die with it (its handle may come back for
// a new context), and sides are made again at their first batch.
static void await_all(gp_CUcontext ctx, gp_CUstream s, int named) {
  for (uint32_t i = 0; i < nsides; i++)
    if ((named ? sides[i].ctx == ctx && sides[i].program == canon(s) : 1) && sides[i].gen > sides[i].done_gen)
      await_host(&sides[i]);
  if (!named) {
    for (uint32_t i = 0; i < nsides; i++) free(sides[i].slots), free(sides[i].batches);
    memset(sides, 0, sizeof sides);
    nsides = 0;
  }
  update_busy();
}

// launch_jobs launches one kernel for the jobs of p on stream of context
// c, or beside it; current is the caller's context (NULL: unknown).
// waited: the jobs waited in a batch, so the stream may have begun
// capturing since. Caller holds batch_lock when beside.
static void launch_jobs(gp_mem_context *c, gp_CUstream stream, int nan, gp_batch_param *p, gp_mem_job *const *jobs,
                        uint32_t blocks, uint64_t bytes, gp_CUcontext current, int waited, int beside) {
  gp_in_agent_call(1);
  int pushed = current != c->ctx && gp_cu.ctxPushCurrent(c->ctx) == 0;
  side_stream *sd = NULL;
  if (beside && stream != (gp_CUstream)0x2) {  // a per-thread stream is the caller's thread's, maybe not the launcher's
    sd = side_of(c->ctx, stream);
    if (!sd) sd = side_make(c->ctx, stream);
    if (sd) retire(sd);
    // Room for the batch and its regions, or it runs on the program's stream.
    if (sd && (!sd->side || sd->b_head - sd->b_tail == INFLIGHT_BATCHES ||
               sd->slots_used + p->nregions > INFLIGHT_SLOTS / 4 * 3))
      sd = NULL;
  }
  uint64_t t0 = gp_timing_this_launch() ? gp_cycles() : 0;
  void *args[] = {p};
  // A stream that joined a capture since its jobs waited (by waiting on a
  // captured event) would put the kernel, or the event, in the program's
  // graph: the jobs are lost instead. Jobs that never waited were checked
  // at their launch.
  int capturing = 0;
  gp_CUresult r = waited ? gp_cu.streamIsCapturing(stream, &capturing) : 0;
  if (r == 0 && capturing) r = 900;  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
  gp_CUresult after = 0;
  if (r == 0 && sd) {
    r = gp_cu.eventRecord(sd->ev_program, stream);
    if (r == 0) r = gp_cu.streamWaitEvent(sd->side, sd->ev_program, 0);
    if (r == 0) r = gp_cu.launchKernel(nan ? c->fn_nan : c->fn, blocks, 1, 1, 256, 1, 1, 0, sd->side, args, NULL);
    if (r == 0) after = gp_cu.eventRecord(sd->ev_hashed, sd->side);
  } else if (r == 0) {
    r = gp_cu.launchKernel(nan ? c->fn_nan : c->fn, blocks, 1, 1, 256, 1, 1, 0, stream, args, NULL);
  }
  if (t0) GP_COUNT(memory_launch_cycles, (gp_cycles() - t0) * GP_TIMING_SAMPLE);
  if (pushed) {
    gp_CUcontext popped;
    gp_cu.ctxPopCurrent(&popped);
  }
  gp_in_agent_call(0);
  if (r != 0) {
    for (uint32_t k = 0; k < p->njobs; k++) cancel_job(jobs[k], gp_cu_error(r));
    gp_logf(2, "memory capture: cuLaunchKernel(gpurr_memcap) for %u jobs: %s (%d)", p->njobs, gp_cu_error(r), r);
    gp_mem_unhashed_write();  // later launches must not carry what these jobs lost
    return;
  }
  GP_COUNT(bytes_hashed, bytes);
  GP_COUNT(memory_hash_kernels, 1);
  if (!sd) return;
  if (after != 0) {  // nothing could wait for this kernel: no later write is safe from it
    gp_mem_stop("cuEventRecord after a hash kernel beside the program failed");
    gp_logf(2, "memory capture: cuEventRecord(hashes): %s (%d)", gp_cu_error(after), after);
  }
  GP_COUNT(side_batches, 1);
  inflight_batch *b = &sd->batches[sd->b_head++ % INFLIGHT_BATCHES];
  b->gen = ++sd->gen;
  b->njobs = p->njobs;
  for (uint32_t k = 0; k < p->njobs; k++) b->seq[k] = jobs[k]->job_seq, b->res_off[k] = jobs[k]->res_off;
  for (uint32_t i = 0; i < p->nregions; i++)
    if (p->r[i].size) note_in_flight(sd, p->r[i].base, p->r[i].base + p->r[i].size, sd->gen);  // room checked above
  atomic_store_explicit(&side_busy, 1, memory_order_relaxed);
}

// flush_locked launches the batch's kernel, beside the program unless
// --defer-hashes=stream or a job's memory may be written by the host (mapped
// or managed memory, which no stream orders); current is the caller's
// context (NULL: unknown).
// Caller holds batch_lock.
static void flush_locked(gp_CUcontext current) {
  if (!batch.p.njobs) return;
  launch_jobs(batch.c, batch.stream, batch.nan, &batch.p, batch.job, batch.blocks, batch.bytes, current, 1,
              gp_proc.cfg.defer_hashes == GP_DEFER_BESIDE && !batch.host_written);
  batch.p.njobs = batch.p.nregions = 0;
  batch.blocks = 0;
  batch.bytes = 0;
  batch.host_written = 0;
  atomic_store_explicit(&batch_jobs, 0, memory_order_relaxed);
}

// flush launches the batch if it hashes any of [base, base+size), or
// whatever it hashes when size is 0.
static void flush(gp_CUcontext current, uint64_t base, uint64_t size) {
  if (!atomic_load_explicit(&batch_jobs, memory_order_relaxed)) return;
  gp_spin_lock(&batch_lock);
  if (!size || batched(base, size)) flush_locked(current);
  gp_spin_unlock(&batch_lock);
}

void gp_mem_flush_batch(void) { flush(NULL, 0, 0); }

// gp_flush_if_old launches a batch that has waited longer than
// gp_batch_max_age_ns, from whichever thread calls it (the writer's, when
// the program has stopped launching).
void gp_flush_if_old(void) {
  if (!atomic_load_explicit(&batch_jobs, memory_order_relaxed)) return;
  gp_spin_lock(&batch_lock);
  if (batch.p.njobs && gp_monotonic_ns() - batch.since_ns > gp_batch_max_age_ns) flush_locked(NULL);
  gp_spin_unlock(&batch_lock);
}

// batch_job adds job j with regions r[0..n) to the batch, launching the
// batch first when it cannot take it, and after when it must not wait
// (host_written: the host may write its memory) or is old. Caller holds
// batch_lock.
static void batch_job(gp_mem_context *c, gp_CUstream stream, int nan, gp_mem_job *j, const gp_batch_job *h,
                      const gp_job_region *r, uint32_t n, uint64_t bytes, int host_written) {
  if (batch.p.njobs && (batch.c != c || batch.stream != stream || batch.nan != nan ||
                        batch.p.njobs == GP_MAX_BATCH_JOBS || batch.p.nregions + n > GP_MAX_JOB_REGIONS))
    flush_locked(c->ctx);
  if (!batch.p.njobs) {
    batch.c = c, batch.stream = stream, batch.nan = nan;
    batch.since_ns = gp_monotonic_ns();
  }
  gp_batch_job *bj = &batch.p.j[batch.p.njobs];
  *bj = *h;
  bj->first_region = batch.p.nregions;
  bj->first_block = batch.blocks;
  memcpy(&batch.p.r[batch.p.nregions], r, n * sizeof *r);
  batch.job[batch.p.njobs++] = j;
  batch.p.nregions += n;
  batch.blocks += h->total_chunks;
  batch.bytes += bytes;
  batch.host_written |= host_written;
  atomic_store_explicit(&batch_jobs, batch.p.njobs, memory_order_relaxed);
  // A per-thread stream's batch, named from another thread, would be that thread's stream: not kept.
  if (host_written || stream == (gp_CUstream)0x2 || gp_monotonic_ns() - batch.since_ns > gp_batch_max_age_ns)
    flush_locked(c->ctx);
}

// before_launch: a launch on stream of ctx, with the regions m found,
// about to be enqueued. anywhere: its kernel may write any memory.
static void before_launch(const gp_mem_launch *m, gp_CUcontext ctx, gp_CUstream stream, int anywhere) {
  if (!atomic_load_explicit(&batch_jobs, memory_order_relaxed) && !atomic_load_explicit(&side_busy, memory_order_relaxed))
    return;
  gp_spin_lock(&batch_lock);
  if (batch.p.njobs) {
    int go = anywhere || batch.c->ctx != ctx || batch.stream != stream;
    for (uint32_t r = 0; r < m->nregions && !go; r++)
      go = m->carry[r] != GP_CARRY_PROVED && batched(m->regions[r].base, m->regions[r].size);
    if (go) flush_locked(ctx);
  }
  if (anywhere) {
    await_write(ctx, stream, 1, 0, 0, 1);
  } else {
    for (uint32_t r = 0; r < m->nregions && atomic_load_explicit(&side_busy, memory_order_relaxed); r++)
      if (m->carry[r] != GP_CARRY_PROVED) await_write(ctx, stream, 1, m->regions[r].base, m->regions[r].size, 1);
  }
  gp_spin_unlock(&batch_lock);
}

// call_stream is the stream a driver call names, *named 0 when it names none.
static gp_CUstream call_stream(uint32_t cbid, const gp_CallbackData *cb, int *named) {
  *named = cb->functionParams && gp_call_stream_at[cbid];
  if (!*named) return 0;
  gp_CUstream s = *(gp_CUstream const *)((const uint8_t *)cb->functionParams + gp_call_stream_at[cbid] - 1);
  return gp_job_stream(s, gp_call_ptsz[cbid]);
}

void gp_before_call(uint32_t cbid, const gp_CallbackData *cb) {
  if (!deferring) return;
  // A context's teardown forgets the sides even when nothing is in flight.
  int teardown = gp_call_order[cbid] == GP_ORDER_HOST && !gp_call_stream_at[cbid];
  if (!atomic_load_explicit(&batch_jobs, memory_order_relaxed) && !atomic_load_explicit(&side_busy, memory_order_relaxed) &&
      !teardown)
    return;
  uint64_t base = 0, size = 0;  // what the call writes; size 0: anything
  int exact = 1;                // base is an allocation's
  if (gp_call_write_class[cbid] == GP_WRITE_DST && cb->functionParams)
    exact = gp_alloc_span(*(const uint64_t *)cb->functionParams, &base, &size);
  int named = 0;
  gp_CUstream s = call_stream(cbid, cb, &named);
  gp_spin_lock(&batch_lock);
  if (batch.p.njobs && (!size || batched(base, size))) flush_locked(cb->context);
  if (gp_call_order[cbid] == GP_ORDER_HOST)
    await_all(cb->context, s, named);
  else if (gp_call_order[cbid] == GP_ORDER_STREAM && named)
    await_write(cb->context, s, 1, 0, 0, 1);
  else if (gp_call_write_class[cbid] == GP_WRITE_DST || gp_call_write_class[cbid] == GP_WRITE_ANY)
    await_write(cb->context, s, named, base, size, exact);
  gp_spin_unlock(&batch_lock);
}

// gp_before_free: what the batch hashes, and what hashes beside read, is
// hashed before an allocation is freed (its memory may be handed out
// again, or unmapped): cuMemFreeAsync's stream waits for them, the host
// for other frees.
void gp_before_free(uint32_t cbid, const gp_CallbackData *cb, uint64_t ptr) {
  if (!deferring) return;
  if (!atomic_load_explicit(&batch_jobs, memory_order_relaxed) && !atomic_load_explicit(&side_busy, memory_order_relaxed))
    return;
  uint64_t base, size;
  int exact = gp_alloc_span(ptr, &base, &size);
  int async = cbid == GP_CBID_cuMemFreeAsync || cbid == GP_CBID_cuMemFreeAsync_ptsz;
  gp_CUstream s = async ? *(gp_CUstream const *)((const uint8_t *)cb->functionParams + GP_STREAM_AT_FREE_ASYNC) : 0;
  gp_spin_lock(&batch_lock);
  if (batch.p.njobs && batched(base, size)) flush_locked(cb->context);
  await_write(cb->context, gp_job_stream(s, cbid == GP_CBID_cuMemFreeAsync_ptsz), async, base, size, exact);
  gp_spin_unlock(&batch_lock);
}

void gp_mem_before_unhashed(gp_CUcontext ctx, gp_CUstream stream, int ptsz) {
  if (!deferring) return;
  flush(ctx, 0, 0);
  if (!atomic_load_explicit(&side_busy, memory_order_relaxed)) return;
  gp_spin_lock(&batch_lock);
  await_write(ctx, gp_job_stream(stream, ptsz), 1, 0, 0, 1);
  gp_spin_unlock(&batch_lock);
}

void gp_mem_defer(void) {
  deferring = gp_proc.cfg.defer_hashes && gp_proc.cfg.memory_mode == GP_MEM_HASH &&
              gp_proc.cfg.write_sets != GP_WRITE_SETS_ALL &&
              !gp_writes_unseen && gp_cu.ctxPushCurrent && gp_cu.ctxPopCurrent;
}

// gp_enqueue_point launches the jobs for one point (before/after) of a launch.
// Returns a GP_PLAN_* status.
// A point of more than GP_MAX_REGIONS regions (a step digest) is enqueued in
// parts: m holds the regions from region_offset, a multiple of
// GP_MAX_JOB_REGIONS, of total; step and digest_all describe a digest.
// A point's jobs: up to GP_MAX_JOB_REGIONS regions each and, in a snapshot,
// at most half the staging ring of chunks (so the GPU fills one half while
// the writer drains the other); a region larger than that is taken in
// pieces, one job each, which wait for staging space like any job
// (backpressure), so no launch is skipped for its size alone.
typedef struct {
  uint32_t region, chunk;  // the next job starts at this chunk of this region
} job_cursor;

typedef struct {
  uint32_t first, n;                 // regions [first, first + n)
  uint32_t piece;                    // 1: chunks [piece_first, + piece_chunks) of region first alone
  uint64_t piece_first, piece_chunks;
} job_plan;

static uint64_t region_chunks(uint64_t size) { return (size + GP_CHUNK - 1) / GP_CHUNK; }

// next_job plans the job at *cur and moves past it; 0 when no region is left.
// limit: the most chunks of a job (a snapshot's, whose regions are given all
// their bytes); 0: no staging, so runs of GP_MAX_JOB_REGIONS regions.
static inline int next_job(const gp_mem_launch *m, uint64_t limit, job_cursor *cur, job_plan *out) {
  if (cur->region >= m->nregions) return 0;
  out->first = cur->region, out->piece = 0, out->piece_first = 0, out->piece_chunks = 0;
  if (!limit) {
    out->n = m->nregions - cur->region < GP_MAX_JOB_REGIONS ? m->nregions - cur->region : GP_MAX_JOB_REGIONS;
    cur->region += out->n;
    return 1;
  }
  uint64_t k = region_chunks(m->regions[cur->region].size);
  if (cur->chunk || k > limit) {
    out->n = 1, out->piece = 1, out->piece_first = cur->chunk;
    out->piece_chunks = k - cur->chunk < limit ? k - cur->chunk : limit;
    cur->chunk += (uint32_t)out->piece_chunks;
    if (cur->chunk >= k) cur->region++, cur->chunk = 0;
    return 1;
  }
  uint64_t sum = 0;
  out->n = 0;
  while (cur->region < m->nregions && out->n < GP_MAX_JOB_REGIONS) {
    k = region_chunks(m->regions[cur->region].size);
    if (out->n && (k > limit || sum + k > limit)) break;
    sum += k, out->n++, cur->region++;
  }
  return 1;
}

uint32_t gp_enqueue_point(gp_mem_launch *m, gp_mem_context *c, gp_CUstream stream, uint64_t seq, uint32_t point,
                              int snapshot, uint32_t region_offset, uint32_t total, uint32_t step, uint32_t digest_all) {
  // Hash mode only: a snapshot's shadow and chunk copies want every region.
  int tracking = gp_proc.cfg.memory_mode == GP_MEM_HASH && point == GP_POINT_AFTER;
  uint64_t epoch = atomic_load_explicit(&gp_write_epoch, memory_order_relaxed);
  if (tracking) gp_decide_carry(m, epoch, gp_proc.cfg.write_sets != GP_WRITE_SETS_ALL && !gp_writes_unseen);
  uint64_t limit = 0;
  uint32_t njobs = (total + GP_MAX_JOB_REGIONS - 1) / GP_MAX_JOB_REGIONS;
  job_cursor cur = {0, 0};
  job_plan plan;
  if (snapshot) {  // only a snapshot needs staging; its point is never enqueued in parts, nor carries
    limit = gp_staging_cap / GP_CHUNK / 2 ? gp_staging_cap / GP_CHUNK / 2 : 1;
    for (njobs = 0; next_job(m, limit, &cur, &plan);) njobs++;
    cur = (job_cursor){0, 0};
  }
  while (next_job(m, limit, &cur, &plan)) {
    uint32_t first = plan.first, n = plan.n;
    // The kernel's parameter for this job alone, built in place: the
    // kernel reads jobs up to njobs and regions up to nregions only, so
    // the rest (most of its 2120 bytes) is left unwritten.
    gp_batch_param p;
    gp_batch_job *h = &p.j[0];
    p.njobs = 1, p.nregions = n;
    memset(h, 0, sizeof *h);
    memset(p.r, 0, n * sizeof *p.r);
    uint64_t chunks = 0;
    for (uint32_t r = 0; r < n; r++) {
      p.r[r].base = m->regions[first + r].base;
      // A carried region is given no bytes: the kernel reads nothing of it.
      p.r[r].size = tracking && m->carry[first + r] ? 0 : m->regions[first + r].size;
      if (plan.piece) {
        uint64_t off = plan.piece_first * GP_CHUNK;
        p.r[r].base += off;
        p.r[r].size = p.r[r].size - off < plan.piece_chunks * GP_CHUNK ? p.r[r].size - off : plan.piece_chunks * GP_CHUNK;
      }
      p.r[r].first_chunk = (uint32_t)chunks;
      chunks += region_chunks(p.r[r].size);
    }
    if (chunks >= (1ull << 31)) return GP_PLAN_SKIPPED_RING_TOO_SMALL;
    // Only the state after a launch is scanned for NaN: before it, the
    // regions hold what the previous launch's scan already counted.
    uint32_t nan_dtypes = point != GP_POINT_BEFORE && c->nan_counts ? gp_proc.cfg.nan_dtypes : 0;
    uint64_t res_bytes = ((GP_RESULT_HEADER + 20 * chunks + 7) & ~7ull) + (nan_dtypes ? n * GP_NAN_REGION_BYTES : 0);
    res_bytes = (res_bytes + 63) & ~63ull;
    uint64_t stg_bytes = snapshot ? chunks * GP_CHUNK : 0;
    uint32_t status = 0;
    gp_mem_job *j = reserve_job(res_bytes, stg_bytes, &status);
    if (!j) return status;
    j->point = point;
    j->snapshot = snapshot;
    j->nan_dtypes = nan_dtypes;
    j->region_base = region_offset + first;
    j->nregions = n;
    j->njobs = njobs;
    j->step = step;
    j->digest_all = digest_all;
    j->total_chunks = (uint32_t)chunks;
    j->piece = plan.piece;
    j->piece_first = (uint32_t)plan.piece_first;
    j->launch_seq = seq;
    // Clear the header so a stale done from a previous lap never matches.
    memset(gp_results_host + j->res_off % gp_results_cap, 0, GP_RESULT_HEADER);
    if (!tracking) {  // tracking sets all three below
      for (uint32_t r = 0; r < n; r++) j->alloc_id[r] = point >= GP_POINT_DIGEST ? m->regions[first + r].alloc_id : 0;
      memset(j->prev_job, 0, n * sizeof *j->prev_job);
      memset(j->carry, 0, n * sizeof *j->carry);
    }
    if (snapshot) {
      gp_spin_lock(&gp_alloc_lock);
      for (uint32_t r = 0; r < n; r++) {
        const gp_region_rec *whole = &m->regions[first + r];
        int ai = gp_find_alloc(whole->base);
        gp_allocation *a = ai >= 0 && gp_alloc_keys[ai].base == whole->base && GP_ALLOC_AT(ai)->size == whole->size ? GP_ALLOC_AT(ai) : NULL;
        if (!a) {
          p.r[r].flags = 1;
          continue;
        }
        if (!a->shadow && c->pool) {
          a->shadow = gp_shadow_alloc(c, a->size);
          a->shadow_ctx = c->ctx;
          a->copy_all = 1;
        }
        if (a->shadow_ctx != c->ctx) a->copy_all = 1;  // another device's shadow: compare nothing
        // One hash per chunk; a piece's start at its first chunk's.
        p.r[r].shadow = a->shadow_ctx == c->ctx && a->shadow ? a->shadow + plan.piece_first * 16 : 0;
        p.r[r].flags = a->copy_all ? 1 : 0;
        // Every piece of the region copies all when the first does.
        if (!plan.piece || plan.piece_first + plan.piece_chunks >= region_chunks(whole->size)) a->copy_all = 0;
        j->alloc_id[r] = a->id;
      }
      gp_spin_unlock(&gp_alloc_lock);
    }
    for (uint32_t r = 0; r < n; r++) j->region_addr[r] = m->regions[first + r].base, j->region_size[r] = m->regions[first + r].size;
    j->kernel_id = m->kernel_id;
    j->audit = m->audit;
    if (tracking) {
      for (uint32_t r = 0; r < n; r++) {
        j->carry[r] = m->carry[first + r];
        j->prev_job[r] = m->prev_job[first + r];
        j->alloc_id[r] = m->regions[first + r].alloc_id;
      }
      for (uint32_t i = 0; i < m->npointers; i++) {
        uint32_t r = m->pointers[i].region;
        if (r < first || r >= first + n) continue;
        if (j->npointers < GP_JOB_POINTERS) j->pointers[j->npointers] = (gp_pointer_rec){m->pointers[i].offset, r - first};
        j->npointers++;
      }
      gp_note_hashed(j, m->alloc_index + first, epoch);
    }
    if (!chunks) {
      atomic_store_explicit(&j->state, GP_JOB_ENQUEUED, memory_order_release);
      complete_on_host(j);
      continue;
    }
    uint64_t slot = (j->job_seq - 1) % GP_NJOBS;
    h->seq = j->job_seq;
    h->out = c->results_dev + j->res_off % gp_results_cap;
    h->staging = snapshot ? c->staging_dev + j->stg_off % gp_staging_cap : 0;
    h->scratch = c->scratch + (j->res_off % gp_results_cap + GP_RESULT_HEADER);
    h->counters = c->counters + slot * 8;
    h->nan_counts = nan_dtypes ? c->nan_counts + slot * GP_NAN_JOB_BYTES : 0;
    h->nan_dtypes = nan_dtypes;
    h->nregions = n;
    h->total_chunks = (uint32_t)chunks;
    h->snapshot = snapshot;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) bytes += p.r[i].size;
    atomic_store_explicit(&j->state, GP_JOB_ENQUEUED, memory_order_release);
    if (!deferring || snapshot || point >= GP_POINT_DIGEST) {  // a digest's or copy's, or a snapshot: a kernel for this job alone, now
      launch_jobs(c, stream, nan_dtypes != 0, &p, &j, (uint32_t)chunks, bytes, c->ctx, 0, 0);
      continue;
    }
    // Memory the host or another process may write does not wait.
    gp_spin_lock(&batch_lock);
    batch_job(c, stream, nan_dtypes != 0, j, h, p.r, n, bytes, m->host_written);
    gp_spin_unlock(&batch_lock);
  }
  return snapshot ? GP_PLAN_SNAPSHOT : GP_PLAN_HASH;
}

// ---- copy states ----

// copy_lost records a copy state that could not be taken, naming the
// regions the copy wrote: their state after it is unknown.
static void copy_lost(const gp_mem_launch *m, uint64_t seq, uint32_t call, const char *reason) {
  lost_rec l;
  memset(&l.r, 0, sizeof l.r);
  l.r.nregions = m->nregions < GP_MAX_JOB_REGIONS ? m->nregions : GP_MAX_JOB_REGIONS;
  l.r.njobs = 1;
  memcpy(l.regions, m->regions, l.r.nregions * sizeof *l.regions);
  push_lost_rec(&l, seq, GP_POINT_COPY, call, reason);
}

// other_device: whether a region of m is memory of another device than the
// calling context's, which gpurr's kernel there may not be able to read
// (a copy needs no peer access).
static int other_device(const gp_mem_launch *m) {
  gp_CUdevice dev = 0;
  if (!gp_cu.ctxGetDevice || gp_cu.ctxGetDevice(&dev) != 0) return 1;
  int other = 0;
  gp_spin_lock(&gp_alloc_lock);
  for (uint32_t r = 0; r < m->nregions && !other; r++) {
    int ai = gp_find_alloc_at(m->regions[r].base, m->alloc_index[r]);
    other = ai >= 0 && GP_ALLOC_AT(ai)->device != (uint32_t)dev;
  }
  gp_spin_unlock(&gp_alloc_lock);
  return other;
}

void gp_copy_state(gp_mem_launch *m, uint32_t cbid, const gp_CallbackData *cb) {
  uint64_t seq = gp_last_launch();
  uint32_t call = cb->correlationId;
  m->status = GP_PLAN_NONE;
  m->kernel_id = 0;
  m->audit = 0;
  if (atomic_load_explicit(&gp_mem_stopped, memory_order_relaxed)) {
    copy_lost(m, seq, call, "memory capture had stopped");
    return;
  }
  if (other_device(m)) {
    copy_lost(m, seq, call, "it wrote memory of another device than its context's");
    return;
  }
  int named = 0;
  gp_CUstream s = call_stream(cbid, cb, &named);
  if (!named) s = gp_job_stream(0, cbid < GP_MAX_WRITE_CBID && gp_call_ptsz[cbid]);  // a synchronous call's default stream
  int capturing = 0;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.streamIsCapturing(s, &capturing);
  gp_in_agent_call(0);
  if (r == 0 && capturing) return;  // it became a node of the program's graph and wrote nothing now
  gp_mem_context *c = r == 0 ? gp_context_state(cb->context) : NULL;
  if (!c) {
    copy_lost(m, seq, call, "the agent's CUDA calls failed in its context (see the log)");
    return;
  }
  uint32_t st = gp_enqueue_point(m, c, s, seq, GP_POINT_COPY, gp_proc.cfg.memory_mode == GP_MEM_SNAPSHOT, 0,
                                 m->nregions, call, 0);
  if (st == GP_PLAN_SKIPPED_RING_FULL)
    copy_lost(m, seq, call, "no room in the rings");
  else if (st != GP_PLAN_HASH && st != GP_PLAN_SNAPSHOT)
    copy_lost(m, seq, call, "its chunk hashes do not fit the results ring");
}

void gp_mem_launch_enter(gp_mem_launch *m, const uint8_t *params, uint32_t params_len, gp_CUcontext ctx,
                         gp_CUstream stream, int ptsz, uint64_t seq, int snapshot_kernel, uint64_t kernel_id,
                         const gp_readonly *ro, int audit, int library_kernel) {
  m->status = GP_PLAN_NONE;
  m->snapshot = gp_proc.cfg.memory_mode == GP_MEM_SNAPSHOT && snapshot_kernel && selected_launch(seq);
  m->kernel_id = kernel_id;
  m->audit = audit;
  int learned = gp_proc.cfg.write_sets == GP_WRITE_SETS_LEARNED && !audit;
  gp_spin_lock(&gp_alloc_lock);
  gp_find_regions(m, params, params_len, ro, learned, library_kernel ? GP_OWNER_NCCL : GP_OWNER_PROGRAM);
  gp_spin_unlock(&gp_alloc_lock);
  if (deferring) before_launch(m, ctx, gp_job_stream(stream, ptsz), ro && ro->writes_anywhere);
  if (!m->nregions) {
    m->status = GP_PLAN_SKIPPED_NO_REGIONS;
    return;
  }
  if (atomic_load_explicit(&gp_mem_stopped, memory_order_relaxed)) {
    m->status = GP_PLAN_SKIPPED_STOPPED;
    return;
  }
  if (!m->snapshot) return;  // hash mode works at exit only
  gp_CUstream s = gp_job_stream(stream, ptsz);
  int capturing = 0;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.streamIsCapturing(s, &capturing);
  gp_in_agent_call(0);
  if (r != 0 || capturing) {
    m->status = GP_PLAN_SKIPPED_CAPTURE;
    return;
  }
  gp_mem_context *c = gp_context_state(ctx);
  if (!c) {
    m->status = GP_PLAN_SKIPPED_ERROR;
    return;
  }
  m->status = gp_enqueue_point(m, c, s, seq, GP_POINT_BEFORE, 1, 0, m->nregions, 0, 0);
}

// A launch that ran and may have written memory without its regions being
// hashed ends every carry: its writes are unseen.
static void skipped(uint32_t status) {
  if (status != GP_PLAN_SKIPPED_NO_REGIONS && status != GP_PLAN_SKIPPED_CAPTURE) gp_mem_unhashed_write();
  GP_COUNT(memory_skipped, status != GP_PLAN_SKIPPED_NO_REGIONS);
}

void gp_mem_launch_exit(gp_mem_launch *m, gp_CUcontext ctx, gp_CUstream stream, int ptsz, uint64_t seq,
                        int captured, int result, int writes_anywhere) {
  if (m->status != GP_PLAN_NONE && m->status != GP_PLAN_SNAPSHOT) {
    if (result == 0) {
      skipped(m->status);
    } else {
      GP_COUNT(memory_skipped, m->status != GP_PLAN_SKIPPED_NO_REGIONS);
    }
    return;
  }
  if (captured) {
    m->status = GP_PLAN_SKIPPED_CAPTURE;
    GP_COUNT(memory_skipped, 1);
    return;
  }
  if (result != 0) {  // the kernel never ran: nothing after it to observe
    if (m->status == GP_PLAN_NONE) m->status = GP_PLAN_SKIPPED_ERROR;
    return;
  }
  gp_mem_context *c = gp_context_state(ctx);
  if (!c) {
    m->status = GP_PLAN_SKIPPED_ERROR;
    skipped(m->status);
    return;
  }
  uint32_t s = gp_enqueue_point(m, c, gp_job_stream(stream, ptsz), seq, GP_POINT_AFTER, m->snapshot, 0, m->nregions, 0, 0);
  if (m->status == GP_PLAN_NONE || s != GP_PLAN_SNAPSHOT) m->status = s;
  if (m->status == GP_PLAN_HASH || m->status == GP_PLAN_SNAPSHOT) {
    GP_COUNT(memory_launches, 1);
    // Its PTX stores through pointers loaded from memory: it may have
    // written allocations that are not its regions.
    if (writes_anywhere) gp_mem_unhashed_write();
  } else {
    skipped(m->status);
  }
}
