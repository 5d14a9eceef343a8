// GPU timing: CUPTI hands over buffers of activity records (every kernel's
// start and end on the GPU), on its own thread or on the Go writer's when it
// flushes them; each kernel record becomes an activity record in the ring.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { ACTIVITY_BUFFER = 8 << 20 };

static void buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = NULL;
  *size = 0;
  *max_records = 0;
  if (gp_proc.forked_child) return;
  void *p = NULL;
  if (posix_memalign(&p, 8, ACTIVITY_BUFFER) == 0) {
    *buffer = p;
    *size = ACTIVITY_BUFFER;
  }
}

static void push_kernel_activity(const gp_ActivityKernel10 *k) {
  // Our own kernels: their cost is a statistic, and each run a record kept
  // apart from the program's (Batch.own_activities), for gpurr trace.
  int own = k->name && strncmp(k->name, "gpurr_memcap", 12) == 0;
  if (own) GP_COUNT(memcap_gpu_ns, k->end > k->start ? k->end - k->start : 0);
  struct {
    gp_activity_rec r;
    char name[4096];
  } rec;
  memset(&rec.r, 0, sizeof rec.r);
  size_t n = k->name ? strnlen(k->name, sizeof rec.name) : 0;
  rec.r.h.type = own ? GP_REC_OWN_ACTIVITY : GP_REC_ACTIVITY;
  rec.r.h.size = gp_pad8(sizeof rec.r + n);
  rec.r.start = k->start;
  rec.r.end = k->end;
  rec.r.graph_node_id = k->graphNodeId;
  rec.r.correlation_id = k->correlationId;
  rec.r.device = k->deviceId;
  rec.r.context_uid = k->contextId;
  rec.r.stream_id = k->streamId;
  rec.r.graph_id = k->graphId;
  rec.r.grid[0] = k->gridX, rec.r.grid[1] = k->gridY, rec.r.grid[2] = k->gridZ;
  rec.r.block[0] = k->blockX, rec.r.block[1] = k->blockY, rec.r.block[2] = k->blockZ;
  rec.r.registers = k->registersPerThread;
  rec.r.dynamic_smem = k->dynamicSharedMemory;
  rec.r.static_smem = k->staticSharedMemory;
  rec.r.name_len = n;
  if (n) memcpy(rec.name, k->name, n);
  if (gp_ring_push(&rec) && !own) GP_COUNT(activities, 1);
}

static void push_copy(const gp_Activity *a) {
  gp_copy_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.h.type = GP_REC_COPY;
  rec.h.size = gp_pad8(sizeof rec);
  if (a->kind == GP_ACTIVITY_KIND_MEMCPY) {
    const gp_ActivityMemcpy6 *m = (const gp_ActivityMemcpy6 *)a;
    rec.copy_kind = m->copyKind, rec.src_kind = m->srcKind, rec.dst_kind = m->dstKind;
    rec.async = (m->flags & GP_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
    rec.bytes = m->bytes, rec.start = m->start, rec.end = m->end;
    rec.device = m->deviceId, rec.context_uid = m->contextId, rec.stream_id = m->streamId;
    rec.correlation_id = m->correlationId, rec.graph_id = m->graphId, rec.graph_node_id = m->graphNodeId;
  } else {
    const gp_ActivityMemset4 *m = (const gp_ActivityMemset4 *)a;
    rec.memset = 1;
    rec.dst_kind = (uint8_t)m->memoryKind;
    rec.value = m->value;
    rec.async = (m->flags & GP_ACTIVITY_FLAG_MEMSET_ASYNC) != 0;
    rec.bytes = m->bytes, rec.start = m->start, rec.end = m->end;
    rec.device = m->deviceId, rec.context_uid = m->contextId, rec.stream_id = m->streamId;
    rec.correlation_id = m->correlationId, rec.graph_id = m->graphId, rec.graph_node_id = m->graphNodeId;
  }
  gp_ring_push_counted(&rec, &gp_counts.copies);
}

static void push_sync(const gp_ActivitySynchronization2 *s) {
  gp_sync_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.h.type = GP_REC_SYNC;
  rec.h.size = gp_pad8(sizeof rec);
  rec.type = s->type;
  rec.start = s->start, rec.end = s->end;
  rec.correlation_id = s->correlationId, rec.context_uid = s->contextId;
  rec.stream_id = s->streamId, rec.event_id = s->cudaEventId;
  gp_ring_push_counted(&rec, &gp_counts.syncs);
}

static void buffer_completed(gp_CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid) {
  (void)size;
  if (!gp_proc.forked_child && buffer) {
    gp_Activity *rec = NULL;
    while (gp_cupti.activityGetNextRecord(buffer, valid, &rec) == 0) {
      // Both kinds' records are laid out as CUpti_ActivityKernel10.
      if (rec->kind == GP_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == GP_ACTIVITY_KIND_KERNEL)
        push_kernel_activity((const gp_ActivityKernel10 *)rec);
      else if (rec->kind == GP_ACTIVITY_KIND_MEMCPY || rec->kind == GP_ACTIVITY_KIND_MEMSET)
        push_copy(rec);
      else if (rec->kind == GP_ACTIVITY_KIND_SYNCHRONIZATION)
        push_sync((const gp_ActivitySynchronization2 *)rec);
    }
    size_t dropped = 0;
    if (gp_cupti.activityGetNumDroppedRecords && gp_cupti.activityGetNumDroppedRecords(ctx, stream_id, &dropped) == 0 &&
        dropped)
      GP_COUNT(activities_dropped, dropped);
    gp_client_activity(buffer, valid);
  }
  free(buffer);
}

static int started;  // gp_start got this far: CUPTI is subscribed
static int sampled_kind;  // the activity kind sampled GPU timing turns on and off; 0 when not sampled
static int steps_rule;    // timing by steps: a first step ended, windows no longer count
static int timing_on = 1; // kernel activity is on (as gp_timing_paused says, under activity_mu)

// Kernel activity is turned on as the process's first launch begins, once a
// context exists, not at start: on an H100 (CUPTI 13.0) a context made while
// it is on pays 3-4 us of GPU time for every kernel, for the context's life,
// even once it is off again (+15% to +28% on a compiled GPT-2 step), while
// turned on later it costs the same step about nothing (bench/NOTES.md,
// 2026-11-24).
static int deferred_kind;  // waits for the first launch; 0 when not deferred
static _Atomic int first_launch_seen;
static pthread_mutex_t activity_mu = PTHREAD_MUTEX_INITIALIZER;  // the first launch against the sampler
static int sample_wants = 1;  // what the sampler last asked for (it starts on)

atomic_uchar gp_timing_paused;

// Copies, memsets and host waits are timed whenever kernels are, sampled
// timing's windows aside: they are few beside launches, and a wait outside
// a window is as long. They go on with the kernel kind, deferred as it is.
static const int copy_kinds[] = {GP_ACTIVITY_KIND_MEMCPY, GP_ACTIVITY_KIND_MEMSET, GP_ACTIVITY_KIND_SYNCHRONIZATION};

static void enable_copy_kinds(void) {
  for (size_t i = 0; i < sizeof copy_kinds / sizeof *copy_kinds; i++) {
    gp_CUptiResult r = gp_client_kind(copy_kinds[i], 1);
    if (r != 0) gp_logf(1, "copies and waits: CUPTI activity kind %d: %s", copy_kinds[i], gp_cupti_error(r));
  }
}

void gp_activity_start(int gpu_timing, int from_start) {
  started = 1;
  if (!gpu_timing) return;
  // Activity records are laid out as CUpti_ActivityKernel10, CUPTI 13's.
  uint32_t version = gp_cupti_version();
  if (version < 130000) {
    gp_logf(1, "GPU timing disabled: CUPTI API version %u predates CUDA 13", version);
    return;
  }
  gp_CUptiResult r = gp_cupti.activityRegisterCallbacks(buffer_requested, buffer_completed);
  // Serial mode runs the program's kernels one at a time across streams.
  int kind = gpu_timing == GP_TIMING_SERIAL ? GP_ACTIVITY_KIND_KERNEL : GP_ACTIVITY_KIND_CONCURRENT_KERNEL;
  if (r == 0) gp_client_activity_registered();
  if (r == 0 && from_start) r = gp_client_kind(kind, 1);
  if (r != 0) {
    gp_logf(2, "GPU timing disabled: CUPTI activity: %s", gp_cupti_error(r));
    return;
  }
  if (from_start) enable_copy_kinds();
  if (!from_start) {
    deferred_kind = kind;
    atomic_store(&gp_timing_paused, 1);
  }
  if (gpu_timing == GP_TIMING_SAMPLED || gpu_timing == GP_TIMING_STEPS) sampled_kind = kind;
}

int gp_activity_launched(void) { return atomic_load_explicit(&first_launch_seen, memory_order_relaxed); }

void gp_activity_first_launch(void) {
  if (atomic_load_explicit(&first_launch_seen, memory_order_relaxed)) return;
  pthread_mutex_lock(&activity_mu);
  if (!atomic_load(&first_launch_seen)) {
    atomic_store(&first_launch_seen, 1);
    if (deferred_kind && !gp_proc.forked_child) enable_copy_kinds();
    if (deferred_kind && sample_wants && !gp_proc.forked_child) {
      gp_CUptiResult r = gp_client_kind(deferred_kind, 1);
      if (r == 0)
        atomic_store(&gp_timing_paused, 0);
      else
        gp_logf(2, "GPU timing disabled: CUPTI activity: %s", gp_cupti_error(r));
    }
  }
  pthread_mutex_unlock(&activity_mu);
}

// Sampled timing: that cost is paid only in windows, or steps. The order
// keeps the launch records' untimed flag a promise: set before the kind goes
// off and cleared after it is on again, so no launch made while it was off
// is taken for timed. Before the first launch it only notes what the window
// wants. Called with activity_mu held.
static gp_CUptiResult set_timing(int on) {
  gp_CUptiResult r = 0;
  sample_wants = on;
  if (!deferred_kind || atomic_load(&first_launch_seen)) {
    if (on) {
      r = gp_client_kind(sampled_kind, 1);
      if (r == 0) atomic_store(&gp_timing_paused, 0);
    } else {
      atomic_store(&gp_timing_paused, 1);
      r = gp_client_kind(sampled_kind, 0);
    }
  }
  if (r == 0) timing_on = on;  // before the first launch: what it turns on
  return r;
}

int gp_activity_sample(int on) {
  if (!sampled_kind || gp_proc.forked_child) return -1;
  pthread_mutex_lock(&activity_mu);
  gp_CUptiResult r = steps_rule ? -1 : set_timing(on);
  pthread_mutex_unlock(&activity_mu);
  if (r > 0) gp_logf(2, "sampled GPU timing stops: turning kernel activity %s: %s", on ? "on" : "off", gp_cupti_error(r));
  return r;
}

// Timing by steps: the windows end as the first step does; each step is then
// timed whole or not at all. CUPTI is asked only where the answer changes.
void gp_activity_step(uint32_t step) {
  if (!sampled_kind || gp_proc.forked_child) return;
  uint32_t first = gp_proc.cfg.timing_first_steps, every = gp_proc.cfg.timing_step_every;
  int want = step < first || (every && step % every == 0);
  gp_CUptiResult r = 0;
  pthread_mutex_lock(&activity_mu);
  int stopped = steps_rule < 0;
  if (!stopped) {
    steps_rule = 1;
    if (want != timing_on) r = set_timing(want);
    if (r != 0) steps_rule = -1;  // CUPTI refused: leave it as it is
  }
  pthread_mutex_unlock(&activity_mu);
  if (r != 0) gp_logf(2, "GPU timing by steps stops: turning kernel activity %s: %s", want ? "on" : "off", gp_cupti_error(r));
}

void gp_flush_activity(int forced) {
  if (started && !gp_proc.forked_child && gp_cupti.activityFlushAll)
    gp_cupti.activityFlushAll(forced ? GP_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}
