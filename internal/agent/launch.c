// The CUPTI callback on the program's threads, and what it records there:
// each launch (kernel, dimensions, parameters, stream, callstack, memory
// capture around it), graph launches and the graph nodes captured launches
// become, kernel nodes added or changed through the graph API (recorded as
// captured launches), modules as they load, each kernel's parameter layout and each
// device, once. Nothing here calls into Go on the common path, allocates per
// launch, or synchronizes with the GPU. See DESIGN.md, invariants 1-3.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "_cgo_export.h"
#include "autograd.h"
#include "hostcall.h"
#include "internal.h"
#include "probe.h"

// ---- kernels: one description per CUfunction, found without locks ----

enum { MAX_PARAMS = 1024, FUNC_TABLE = 1 << 14 };

typedef struct {
  _Atomic uint64_t key;  // CUfunction handle, published last; FUNC_GONE once its module is unloaded
  uint64_t id;
  void *module;  // the CUmodule holding it (cuFuncGetModule), NULL when unknown
  uint32_t nparams, param_bytes;
  uint32_t *layout;  // nparams × (offset, size)
  int selected;
  int snapshot;  // matches --snapshot-kernels
  int library;   // a communication library's own kernel (gp_library_kernel)
  gp_probe_fn probe;  // --probe
  _Atomic(const gp_readonly *) readonly;  // write sets: published by the writer, NULL until then
  _Atomic uint64_t launches;              // learned write sets: every audit_every-th launch is an audit
} func_entry;

static func_entry funcs[FUNC_TABLE];
static pthread_mutex_t funcs_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_kernel_id;

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

// A handle whose module was unloaded: the driver hands its address out
// again for a kernel of a later module (XLA's autotuning loads and unloads
// hundreds), whose parameters the old description would misread. Its entry
// stays, unmatched, so that look-ups go on past it, until a new kernel takes
// it: a program that loads and unloads modules for hours does not fill the
// table.
#define FUNC_GONE UINT64_MAX

static func_entry *func_find(uint64_t key) {
  for (uint64_t i = mix64(key), n = 0; n < 64; i++, n++) {
    func_entry *e = &funcs[i & (FUNC_TABLE - 1)];
    uint64_t k = atomic_load_explicit(&e->key, memory_order_acquire);
    if (k == key) return e;
    if (k == 0) return NULL;
  }
  return NULL;
}

// describe_function reads the parameter layout and pushes a kernel record.
static func_entry *func_describe(gp_CUfunction f, const char *symbol) {
  uint64_t key = (uint64_t)(uintptr_t)f;
  pthread_mutex_lock(&funcs_mu);
  func_entry *e = func_find(key);
  if (e) {
    pthread_mutex_unlock(&funcs_mu);
    return e;
  }
  func_entry *slot = NULL;
  for (uint64_t i = mix64(key), n = 0; n < 64; i++, n++) {
    func_entry *c = &funcs[i & (FUNC_TABLE - 1)];
    uint64_t k = atomic_load_explicit(&c->key, memory_order_relaxed);
    if (k == 0 || k == FUNC_GONE) {
      slot = c;
      break;
    }
  }
  static uint32_t layout[2 * MAX_PARAMS];  // guarded by funcs_mu
  uint32_t nparams = 0, bytes = 0;
  for (; nparams < MAX_PARAMS; nparams++) {
    size_t off = 0, size = 0;
    gp_CUresult r = gp_cu.funcGetParamInfo ? gp_cu.funcGetParamInfo(f, nparams, &off, &size) : 1;
    if (r != 0 && gp_cu.kernelGetParamInfo) r = gp_cu.kernelGetParamInfo((void *)f, nparams, &off, &size);
    if (r != 0) break;
    layout[2 * nparams] = off;
    layout[2 * nparams + 1] = size;
    if (off + size > bytes) bytes = off + size;
  }
  const char *name = symbol;
  if ((!name || !*name) && gp_cu.funcGetName) gp_cu.funcGetName(&name, f);
  if ((!name || !*name) && gp_cu.kernelGetName) gp_cu.kernelGetName(&name, (void *)f);
  if (!name) name = "";
  int selected = 1;
  if (gp_proc.cfg.has_kernel_filter) selected = gpurrKernelSelected((char *)name);
  int snapshot = gp_proc.cfg.memory_mode == GP_MEM_SNAPSHOT && gpurrSnapshotKernel((char *)name);

  uint64_t id = ++next_kernel_id;
  size_t name_len = strnlen(name, 4096);
  size_t size = gp_pad8(sizeof(gp_kernel_rec) + 8u * nparams + name_len);
  gp_kernel_rec *rec = malloc(size);
  if (rec) {
    rec->h.type = GP_REC_KERNEL;
    rec->h.size = size;
    rec->function = key;
    rec->kernel_id = id;
    rec->nparams = nparams;
    rec->param_bytes = bytes;
    rec->name_len = name_len;
    memcpy(rec + 1, layout, 8u * nparams);
    memcpy((uint8_t *)(rec + 1) + 8u * nparams, name, name_len);
    gp_ring_push(rec);
    free(rec);
  }
  if (!slot) {  // table full: describe it anew next time; the writer dedups
    pthread_mutex_unlock(&funcs_mu);
    static func_entry overflow;
    overflow.id = id;
    overflow.nparams = 0;
    overflow.selected = selected;
    overflow.snapshot = snapshot;
    overflow.library = gp_library_kernel(name);
    overflow.probe.state = GP_PROBE_NO;  // shared by kernels the table has no room for
    return &overflow;
  }
  if (atomic_load_explicit(&slot->key, memory_order_relaxed) == FUNC_GONE) {
    // A retired kernel's entry, taken again: nothing launches a kernel of an unloaded module,
    // so its layout goes; a write set stays allocated (gp_kernel_readonly keeps them all).
    free(slot->layout);
    slot->layout = NULL;
    memset(&slot->probe, 0, sizeof slot->probe);
    atomic_store_explicit(&slot->readonly, NULL, memory_order_relaxed);
    atomic_store_explicit(&slot->launches, 0, memory_order_relaxed);
  }
  slot->id = id;
  slot->module = NULL;
  if (gp_cu.funcGetModule && gp_cu.funcGetModule(&slot->module, f) != 0) slot->module = NULL;
  slot->nparams = nparams;
  slot->param_bytes = bytes;
  slot->layout = malloc(8u * nparams + 8);
  if (slot->layout) {
    memcpy(slot->layout, layout, 8u * nparams);
  } else {
    slot->nparams = 0;
  }
  slot->selected = selected;
  slot->snapshot = snapshot;
  slot->library = gp_library_kernel(name);
  // What its PTX proves, known before its first launch runs: a kernel that stores through
  // loaded pointers must end carries from that launch on.
  if (gp_proc.cfg.memory_mode == GP_MEM_HASH && gp_proc.cfg.write_sets != GP_WRITE_SETS_ALL) {
    gp_in_agent_call(1);
    atomic_store_explicit(&slot->readonly, gpurrKernelReadOnly((char *)name, bytes), memory_order_release);
    gp_in_agent_call(0);
  }
  atomic_store_explicit(&slot->key, key, memory_order_release);
  pthread_mutex_unlock(&funcs_mu);
  return slot;
}

// gp_kernel_readonly publishes what the writer knows of kernel_id's
// parameter words (gp_readonly, which it allocates; ro is kept for the
// life of the process, since a launch on another thread may be reading
// the one it replaces, which is therefore never freed).
void gp_kernel_readonly(uint64_t kernel_id, gp_readonly *ro) {
  pthread_mutex_lock(&funcs_mu);
  for (int i = 0; i < FUNC_TABLE; i++) {
    if (atomic_load_explicit(&funcs[i].key, memory_order_acquire) && funcs[i].id == kernel_id) {
      atomic_store_explicit(&funcs[i].readonly, ro, memory_order_release);
      break;
    }
  }
  pthread_mutex_unlock(&funcs_mu);
}

// ---- devices: described once per context ----

enum { MAX_CONTEXTS = 256 };
static struct {
  _Atomic uint32_t uid;
  uint32_t ordinal;
} contexts[MAX_CONTEXTS];
static pthread_mutex_t contexts_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t devices_described;  // bit per ordinal < 64

static uint32_t device_of(uint32_t ctx_uid) {
  for (int i = 0; i < MAX_CONTEXTS; i++) {
    uint32_t u = atomic_load_explicit(&contexts[i].uid, memory_order_acquire);
    if (u == ctx_uid) return contexts[i].ordinal;
    if (u == 0) break;
  }
  gp_CUdevice dev = 0;
  if (!gp_cu.ctxGetDevice || gp_cu.ctxGetDevice(&dev) != 0) return 0;
  pthread_mutex_lock(&contexts_mu);
  for (int i = 0; i < MAX_CONTEXTS; i++) {
    uint32_t u = atomic_load_explicit(&contexts[i].uid, memory_order_relaxed);
    if (u == ctx_uid) break;
    if (u == 0) {
      contexts[i].ordinal = dev;
      atomic_store_explicit(&contexts[i].uid, ctx_uid, memory_order_release);
      break;
    }
  }
  int describe = dev < 64 && !(devices_described & (1ULL << dev));
  if (describe) devices_described |= 1ULL << dev;
  pthread_mutex_unlock(&contexts_mu);
  if (describe) {
    gp_device_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.h.type = GP_REC_DEVICE;
    rec.h.size = gp_pad8(sizeof rec);
    rec.ordinal = dev;
    rec.context_uid = ctx_uid;
    int v = 0;
    if (gp_cu.deviceGetName) gp_cu.deviceGetName(rec.name, sizeof rec.name - 1, dev);
    if (gp_cu.deviceGetUuid) gp_cu.deviceGetUuid((gp_CUuuid *)rec.uuid, dev);
    if (gp_cu.deviceGetAttribute) {
      if (gp_cu.deviceGetAttribute(&v, GP_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR, dev) == 0) rec.cc_major = v;
      if (gp_cu.deviceGetAttribute(&v, GP_DEV_ATTR_COMPUTE_CAPABILITY_MINOR, dev) == 0) rec.cc_minor = v;
      if (gp_cu.deviceGetAttribute(&v, GP_DEV_ATTR_MULTIPROCESSOR_COUNT, dev) == 0) rec.sm_count = v;
    }
    size_t mem = 0;
    if (gp_cu.deviceTotalMem && gp_cu.deviceTotalMem(&mem, dev) == 0) rec.memory_bytes = mem;
    gp_ring_push(&rec);
  }
  return dev;
}

// ---- launches ----

// copy_params assembles the parameter buffer the kernel will see.
static uint32_t copy_params(const func_entry *fe, const gp_launch_view *v, uint8_t *dst, uint32_t cap) {
  if (v->kernel_params && fe->layout) {
    uint32_t n = fe->param_bytes < cap ? fe->param_bytes : cap;
    memset(dst, 0, n);
    for (uint32_t i = 0; i < fe->nparams; i++) {
      uint32_t off = fe->layout[2 * i], size = fe->layout[2 * i + 1];
      const void *src = v->kernel_params[i];
      if (off + size > n || !src) continue;
      // Constant sizes compile to one move: most parameters are 8 or 4 bytes.
      if (size == 8)
        memcpy(dst + off, src, 8);
      else if (size == 4)
        memcpy(dst + off, src, 4);
      else
        memcpy(dst + off, src, size);
    }
    return n;
  }
  if (v->extra) {
    const void *buf = NULL;
    size_t size = 0;
    for (int i = 0; i < 16 && v->extra[i] != GP_LAUNCH_PARAM_END; i += 2) {
      if (v->extra[i] == GP_LAUNCH_PARAM_BUFFER_POINTER) buf = v->extra[i + 1];
      if (v->extra[i] == GP_LAUNCH_PARAM_BUFFER_SIZE && v->extra[i + 1]) size = *(size_t *)v->extra[i + 1];
    }
    if (buf && size) {
      uint32_t n = size < cap ? size : cap;
      memcpy(dst, buf, n);
      return n;
    }
  }
  return 0;
}

// Stream ids are cached per thread (a thread usually launches on one
// stream after another); destroying any stream invalidates every cache,
// since a new stream may reuse the handle.
static _Atomic uint32_t stream_epoch = 1;

static uint32_t stream_id_of(gp_CUcontext ctx, gp_CUstream stream, uint32_t cbid) {
  uint32_t epoch = atomic_load_explicit(&stream_epoch, memory_order_acquire);
  int ptsz = gp_launch_ptsz(cbid);
  if (gp_thread.stream_epoch == epoch && gp_thread.stream == stream && gp_thread.stream_ctx == ctx && gp_thread.stream_ptsz == ptsz)
    return gp_thread.stream_id;
  uint32_t id = 0;
  if (gp_cupti.getStreamIdEx) gp_cupti.getStreamIdEx(ctx, stream, ptsz, &id);
  gp_thread.stream_epoch = epoch;
  gp_thread.stream = stream;
  gp_thread.stream_ctx = ctx;
  gp_thread.stream_ptsz = ptsz;
  gp_thread.stream_id = id;
  return id;
}

// The agent's time on the program's threads is measured on one launch in
// TIMING_SAMPLE per thread (both its callbacks: the ENTER decides for its
// EXIT) and scaled up, so a recording says what the agent costs a launch
// without paying for two TSC reads (about 20 ns each in a VM) on every one.
// Every other callback (module loads, which copy megabytes of code, graph
// nodes, allocations) is timed each time: scaling a rare, long one up would
// swamp the launches' figure.
enum { TIMING_SAMPLE = GP_TIMING_SAMPLE };

// TIMED runs stmt and, when the launch in flight is one of those sampled
// for the agent's time (gp_on_callback), adds its cycles, scaled as
// launch_callback_cycles is, to counter: where that time goes.
#define TIMED(counter, stmt)                                        \
  do {                                                              \
    uint64_t timed_t0 = gp_thread.sample_launch ? gp_cycles() : 0;          \
    stmt;                                                           \
    if (gp_thread.sample_launch) GP_COUNT(counter, (gp_cycles() - timed_t0) * TIMING_SAMPLE); \
  } while (0)

// take_stack takes the launch call's autograd context and callstack into gp_thread,
// and returns whether it was made inside an optimizer step.
static int take_stack(void) {
  int in_opt = 0;
  TIMED(autograd_cycles, gp_autograd_take(&gp_thread.ag));
  // AccumulateGrad nodes have no forward op: their number is UINT64_MAX.
  TIMED(stack_cycles, gp_thread.stack_id = gp_callstack_take(gp_thread.ag.node_class != 0 && gp_thread.ag.sequence_nr != UINT64_MAX, &in_opt));
  gp_thread.have_stack = 1;
  return in_opt;
}

// step_enter: a launch call seq on stream of ctx is about to be made while the
// configuration needs steps (gp_steps_on). Its callstack is taken now, to
// know its step before it runs: when it begins a step, the digest of the step
// that ended goes on its stream first. Returns whether it was made inside an
// optimizer step.
static int step_enter(gp_CUcontext ctx, gp_CUstream stream, int ptsz, uint64_t seq) {
  int in_opt = take_stack(), began = 0;
  uint32_t step = gp_step_call(seq, in_opt, &began);
  gp_step_where(ctx, stream, ptsz, seq);
  uint32_t every = gp_proc.cfg.digest_every ? gp_proc.cfg.digest_every : 1;
  if (began && gp_proc.cfg.digests && step % every == 0)
    TIMED(memory_cycles, gp_mem_digest(ctx, stream, ptsz, seq, step - 1));
  gp_thread.outside_steps = !gp_step_hashed(step);
  return in_opt;
}

static void on_launch_enter(uint32_t cbid, const gp_CallbackData *cb) {
  gp_activity_first_launch();  // before the launch is enqueued: it is timed
  gp_CUfunction f = gp_launch_func(cbid, cb->functionParams);
  func_entry *fe = func_find((uint64_t)(uintptr_t)f);
  if (!fe) fe = func_describe(f, cb->symbolName);
  if (!fe->selected) {
    GP_COUNT(launches_filtered, 1);
    if (gp_proc.cfg.memory_mode != GP_MEM_OFF) {  // it runs, unhashed
      gp_launch_view v;
      gp_view_launch(cbid, cb->functionParams, &v);
      gp_mem_before_unhashed(cb->context, v.stream, gp_launch_ptsz(cbid));
      gp_mem_unhashed_write();
    }
    return;
  }
  gp_thread.in_launch = 1;
  gp_thread.launch_func = fe;
  gp_thread.seq = atomic_fetch_add_explicit(&gp_launch_seq, 1, memory_order_relaxed) + 1;
  gp_thread.host_ns = gp_clock();
  gp_thread.graph_node_id = 0;
  gp_thread.params_len = 0;
  gp_thread.have_stack = gp_thread.outside_steps = 0;
  int in_opt = 0;
  if (gp_steps_on()) {
    gp_launch_view v;
    gp_view_launch(cbid, cb->functionParams, &v);
    in_opt = step_enter(cb->context, v.stream, gp_launch_ptsz(cbid), gp_thread.seq);
    if (gp_thread.outside_steps && gp_proc.cfg.memory_mode == GP_MEM_HASH) {  // it runs, unhashed
      gp_mem_before_unhashed(cb->context, v.stream, gp_launch_ptsz(cbid));
      gp_mem_unhashed_write();
    }
  }
  int per_launch = (gp_proc.cfg.memory_mode == GP_MEM_HASH || gp_proc.cfg.memory_mode == GP_MEM_SNAPSHOT) &&
                   !gp_thread.outside_steps;
  int note = in_opt && gp_proc.cfg.memory_mode == GP_MEM_DIGEST;
  if (!per_launch && !note && !gp_proc.cfg.probes) return;
  gp_thread_scratch *s = gp_scratch();
  if (!s) return;
  if (note) {  // what the step's digest hashes: the memory its optimizer reaches
    gp_launch_view v;
    gp_view_launch(cbid, cb->functionParams, &v);
    TIMED(memory_cycles, gp_mem_note_optimizer(s->launch.tail, copy_params(fe, &v, s->launch.tail, GP_PARAMS_CAP)));
  }
  if (per_launch) {
    gp_launch_view v;
    gp_view_launch(cbid, cb->functionParams, &v);
    gp_thread.params_len = copy_params(fe, &v, s->launch.tail, GP_PARAMS_CAP);
    const gp_readonly *ro = atomic_load_explicit(&fe->readonly, memory_order_acquire);
    int audit = 0;
    if (ro && gp_proc.cfg.write_sets == GP_WRITE_SETS_LEARNED && gp_proc.cfg.audit_every)
      audit = (atomic_fetch_add_explicit(&fe->launches, 1, memory_order_relaxed) + 1) % gp_proc.cfg.audit_every == 0;
    TIMED(memory_cycles, gp_mem_launch_enter(&s->mem, s->launch.tail, gp_thread.params_len, cb->context, v.stream,
                                             gp_launch_ptsz(cbid), gp_thread.seq, fe->snapshot, fe->id, ro, audit, fe->library));
  }
  // Last: it may swap the launch's function and parameters for the instrumented ones.
  if (gp_proc.cfg.probes && fe->layout) {
    gp_launch_view v;
    gp_view_launch(cbid, cb->functionParams, &v);
    gp_probe_enter(&fe->probe, cbid, &v, cb, gp_launch_ptsz(cbid), fe->nparams, fe->id, gp_thread.seq, s->probe_args);
  }
}


static void on_launch_exit(uint32_t cbid, const gp_CallbackData *cb) {
  if (!gp_thread.in_launch) return;
  uint64_t end_ns = gp_clock();  // first: the call's host time leaves the agent's out
  gp_thread.in_launch = 0;
  if (gp_proc.cfg.probes) gp_probe_exit(cb);
  gp_launch_view v;
  gp_view_launch(cbid, cb->functionParams, &v);
  const func_entry *fe = gp_thread.launch_func;
  gp_thread_scratch *s = gp_scratch();
  if (!s) {
    GP_COUNT(launches_dropped, 1);
    return;
  }
  // Every field is written below, so no memset: pad[] is set explicitly, and
  // the record has no padding the compiler adds.
  gp_launch_rec *rec = &s->launch.r;
  rec->h.type = GP_REC_LAUNCH;
  rec->seq = gp_thread.seq;
  rec->host_ns = gp_thread.host_ns;
  rec->end_ns = end_ns;
  rec->kernel_id = fe ? fe->id : 0;
  rec->context = (uint64_t)(uintptr_t)cb->context;
  rec->stream = (uint64_t)(uintptr_t)v.stream;
  rec->graph_node_id = gp_thread.graph_node_id;
  rec->captured = gp_thread.graph_node_id != 0;
  rec->mem_status = 0;
  rec->snapshot_selected = 0;
  rec->untimed = atomic_load_explicit(&gp_timing_paused, memory_order_relaxed);
  rec->cooperative = (uint8_t)gp_launch_cooperative(cbid, cb->functionParams);
  memset(rec->pad, 0, sizeof rec->pad);
  rec->nregions = rec->npointers = 0;
  rec->tid = gp_thread_id();
  rec->context_uid = cb->contextUid;
  rec->device = device_of(cb->contextUid);
  rec->stream_id = stream_id_of(cb->context, v.stream, cbid);
  rec->correlation_id = cb->correlationId;
  rec->api = cbid;
  rec->result = cb->functionReturnValue ? *(gp_CUresult *)cb->functionReturnValue : 0;
  memcpy(rec->grid, v.grid, sizeof v.grid);
  memcpy(rec->block, v.block, sizeof v.block);
  memcpy(rec->cluster, v.cluster, sizeof v.cluster);
  rec->shared_mem = v.smem;
  if (!gp_thread.have_stack) take_stack();
  rec->callstack_id = gp_thread.stack_id;
  rec->ag_thread = gp_thread.ag.thread;
  rec->ag_seq = gp_thread.ag.sequence_nr;
  rec->ag_class = gp_thread.ag.node_class;
  rec->ag_present = gp_thread.ag.present;
  rec->range_id = gp_thread.range_current;
  if (gp_proc.cfg.memory_mode == GP_MEM_OFF || gp_proc.cfg.memory_mode == GP_MEM_DIGEST || gp_thread.outside_steps) {
    rec->params_len = fe ? copy_params(fe, &v, s->launch.tail, GP_PARAMS_CAP) : 0;
    rec->h.size = gp_pad8(sizeof *rec + rec->params_len);
    if (gp_thread.outside_steps && gp_proc.cfg.memory_mode == GP_MEM_HASH) rec->mem_status = GP_PLAN_OUTSIDE_STEPS;
  } else {
    gp_mem_launch *m = &s->mem;
    rec->params_len = gp_thread.params_len;
    const gp_readonly *ro = fe ? atomic_load_explicit(&fe->readonly, memory_order_acquire) : NULL;
    TIMED(memory_cycles, gp_mem_launch_exit(m, cb->context, v.stream, gp_launch_ptsz(cbid), gp_thread.seq, rec->captured,
                                            rec->result, ro && ro->writes_anywhere));
    rec->mem_status = m->status;
    rec->snapshot_selected = m->snapshot;
    rec->nregions = m->nregions;
    rec->npointers = m->npointers;
    uint32_t at = gp_pad8(rec->params_len);
    memset(s->launch.tail + rec->params_len, 0, at - rec->params_len);
    memcpy(s->launch.tail + at, m->regions, m->nregions * sizeof(gp_region_rec));
    at += m->nregions * sizeof(gp_region_rec);
    memcpy(s->launch.tail + at, m->pointers, m->npointers * sizeof(gp_pointer_rec));
    at += m->npointers * sizeof(gp_pointer_rec);
    rec->h.size = gp_pad8(sizeof *rec + at);
  }
  TIMED(ring_cycles, if (!gp_ring_push_counted(rec, &gp_counts.launches)) GP_COUNT(launches_dropped, 1));
}

// on_graph_enter: a graph launch's step is known before it runs, as a kernel
// launch's (step_enter); one made inside an optimizer step leaves the step's
// digest not knowing what its kernels reach: it hashes every allocation.
static void on_graph_enter(uint32_t cbid, const gp_CallbackData *cb) {
  const gp_cuGraphLaunch_params *p = cb->functionParams;
  gp_thread.graph_seq = atomic_fetch_add_explicit(&gp_launch_seq, 1, memory_order_relaxed) + 1;
  if (step_enter(cb->context, p->hStream, gp_launch_ptsz(cbid), gp_thread.graph_seq) && gp_proc.cfg.memory_mode == GP_MEM_DIGEST)
    gp_mem_note_optimizer_all();
}

static void on_graph_launch(uint32_t cbid, const gp_CallbackData *cb) {
  const gp_cuGraphLaunch_params *p = cb->functionParams;
  gp_graphlaunch_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.h.type = GP_REC_GRAPHLAUNCH;
  rec.h.size = gp_pad8(sizeof rec);
  rec.seq = gp_thread.graph_seq ? gp_thread.graph_seq : atomic_fetch_add_explicit(&gp_launch_seq, 1, memory_order_relaxed) + 1;
  gp_thread.graph_seq = 0;
  rec.host_ns = gp_clock();
  rec.graph_exec = (uint64_t)(uintptr_t)p->hGraph;
  rec.stream = (uint64_t)(uintptr_t)p->hStream;
  rec.tid = gp_thread_id();
  rec.device = device_of(cb->contextUid);
  rec.stream_id = stream_id_of(cb->context, p->hStream, cbid);
  rec.correlation_id = cb->correlationId;
  rec.result = cb->functionReturnValue ? *(gp_CUresult *)cb->functionReturnValue : 0;
  rec.callstack_id = gp_thread.have_stack ? gp_thread.stack_id : gp_callstack_take(0, NULL);
  gp_thread.have_stack = 0;
  rec.range_id = gp_thread.range_current;
  if (gp_proc.cfg.memory_mode != GP_MEM_OFF && rec.result == 0) gp_mem_unhashed_write();  // its kernels and copies go unhashed
  if (gp_ring_push(&rec)) GP_COUNT(graph_launches, 1);
}

// ---- resources: modules and graph nodes ----

static void on_module_loaded(const gp_ResourceData *rd) {
  const gp_ModuleResourceData *m = rd->resourceDescriptor;
  if (!m || !m->pCubin || !m->cubinSize) return;
  if (gp_proc.cfg.probes) gp_probe_module_image(m->pCubin, m->cubinSize);
  if (gp_proc.cfg.memory_mode == GP_MEM_HASH && gp_proc.cfg.write_sets != GP_WRITE_SETS_ALL) {
    gp_in_agent_call(1);
    gpurrModuleWriteSets((void *)m->pCubin, m->cubinSize);
    gp_in_agent_call(0);
  }
  void *copy = malloc(m->cubinSize);
  if (!copy) {
    GP_COUNT(modules_dropped, 1);
    return;
  }
  memcpy(copy, m->pCubin, m->cubinSize);
  gp_module_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.h.type = GP_REC_MODULE;
  rec.h.size = gp_pad8(sizeof rec);
  rec.image = copy;
  rec.size = m->cubinSize;
  rec.host_ns = gp_clock();
  rec.module_id = m->moduleId;
  rec.context_uid = 0;
  if (gp_ring_push(&rec)) {
    GP_COUNT(modules, 1);
  } else {
    free(copy);
    GP_COUNT(modules_dropped, 1);
  }
}

// graph_node_rec is an empty graph node record of node_type.
static gp_graphnode_rec graph_node_rec(uint32_t node_type) {
  gp_graphnode_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.h.type = GP_REC_GRAPHNODE;
  rec.h.size = gp_pad8(sizeof rec);
  rec.node_type = node_type;
  return rec;
}

static void on_graph_node(uint32_t cbid, const gp_ResourceData *rd) {
  const gp_GraphData *g = rd->resourceDescriptor;
  if (!g || !g->node || !gp_cupti.getGraphNodeId) return;
  gp_graphnode_rec rec = graph_node_rec(g->nodeType);
  if (gp_cupti.getGraphNodeId(g->node, &rec.node_id) != 0) return;
  if (g->graph && gp_cupti.getGraphId) gp_cupti.getGraphId(g->graph, &rec.graph_id);
  if (cbid == GP_CBID_RESOURCE_GRAPHNODE_CLONED) {
    if (!g->originalNode || gp_cupti.getGraphNodeId(g->originalNode, &rec.original_node_id) != 0) return;
  } else if (gp_thread.in_launch) {
    // A node created inside a launch call is that launch, captured.
    rec.launch_seq = gp_thread.seq;
    gp_thread.graph_node_id = rec.node_id;
  } else {
    return;  // built with the graph API: recorded by its call (on_node_call, on_graph_build)
  }
  gp_ring_push(&rec);
}

// built_node records a conditional or memory node added through the graph API, with no
// launch: readers count them, to say what of a graph's work is not a launch.
static void built_node(gp_CUgraphNode node, gp_CUgraph graph, uint32_t node_type) {
  gp_graphnode_rec rec = graph_node_rec(node_type);
  if (!node || gp_cupti.getGraphNodeId(node, &rec.node_id) != 0) return;
  if (graph && gp_cupti.getGraphId) gp_cupti.getGraphId(graph, &rec.graph_id);
  gp_ring_push(&rec);
}

// exec_updated: an executable graph was updated whole from graph (cuGraphExecUpdate): from
// the next graph launch on, each of its nodes runs the work of the node of graph with the
// same index, which the update pairs it with. CUPTI's node ids are a graph's id in the high
// 32 bits and the node's index in the low ones (CUDA 13.0), so the executable graph's node
// is named without asking.
static void exec_updated(gp_CUgraphExec exec, gp_CUgraph graph) {
  uint32_t exec_id = 0;
  size_t n = 0;
  if (!gp_cupti_graph_exec_id || gp_cupti_graph_exec_id(exec, &exec_id) != 0 || !gp_cu.graphGetNodes ||
      gp_cu.graphGetNodes(graph, NULL, &n) != 0) {
    static atomic_flag said;
    if (!atomic_flag_test_and_set(&said))
      gp_logf(1, "graph update: cannot name the updated graph's nodes (cuptiGetGraphExecId or cuGraphGetNodes missing or failing): its kernels link to the nodes it was instantiated from");
    return;
  }
  gp_CUgraphNode stack[64], *nodes = n <= 64 ? stack : malloc(n * sizeof *nodes);
  if (!nodes || gp_cu.graphGetNodes(graph, nodes, &n) != 0) n = 0;
  uint64_t after = gp_last_launch();
  for (size_t i = 0; i < n; i++) {
    int type = GP_GRAPH_NODE_TYPE_KERNEL;
    if (gp_cu.graphNodeGetType) gp_cu.graphNodeGetType(nodes[i], &type);
    gp_graphnode_rec rec = graph_node_rec((uint32_t)type);
    if (gp_cupti.getGraphNodeId(nodes[i], &rec.original_node_id) != 0) continue;
    rec.node_id = (uint64_t)exec_id << 32 | (rec.original_node_id & 0xffffffffu);
    rec.graph_id = exec_id;
    rec.updated_after_seq = after ? after : 1;  // 0 would read as no update
    gp_ring_push(&rec);
  }
  if (nodes != stack) free(nodes);
}

// on_graph_build: a memory node added, or an executable graph updated whole.
static void on_graph_build(uint32_t cbid, const gp_CallbackData *cb) {
  if (cb->callbackSite != GP_API_EXIT || !gp_cupti.getGraphNodeId) return;
  if (cb->functionReturnValue && *(gp_CUresult *)cb->functionReturnValue != 0) return;
  gp_in_agent_call(1);
  if (cbid == GP_CBID_cuGraphAddMemAllocNode || cbid == GP_CBID_cuGraphAddMemFreeNode) {
    const gp_cuGraphAddMemNode_params *p = cb->functionParams;
    built_node(p->phGraphNode ? *p->phGraphNode : NULL, p->hGraph,
               cbid == GP_CBID_cuGraphAddMemAllocNode ? GP_GRAPH_NODE_TYPE_MEM_ALLOC : GP_GRAPH_NODE_TYPE_MEM_FREE);
  } else {
    const gp_cuGraphExecUpdate_params *p = cb->functionParams;
    exec_updated(p->hGraphExec, p->hGraph);
  }
  gp_in_agent_call(0);
}

// on_node_call: a kernel node was added to a graph, or its parameters
// changed (in a graph, or in an executable graph), through the graph API.
// It is recorded as a launch made during stream capture is: a captured
// launch (kernel, dimensions, parameters read through the kernel's layout,
// the callstack of the call) and the graph node it names, so that graph
// replays of the node lead to it. A later change of the same node is a
// later launch of it; the reader takes the one made last before a replay.
static void on_node_call(uint32_t cbid, const gp_CallbackData *cb) {
  if (cb->callbackSite != GP_API_EXIT || !gp_cupti.getGraphNodeId) return;
  if (cb->functionReturnValue && *(gp_CUresult *)cb->functionReturnValue != 0) return;
  gp_node_view nv;
  gp_view_node(cbid, cb->functionParams, 1, &nv);
  if (!nv.kernel && !nv.exec && (nv.node_type == GP_GRAPH_NODE_TYPE_CONDITIONAL || nv.node_type == GP_GRAPH_NODE_TYPE_MEM_ALLOC ||
                                 nv.node_type == GP_GRAPH_NODE_TYPE_MEM_FREE)) {
    if (gp_launch_has_shape(cbid, GP_SHAPE_NODE_ADD_ANY) || gp_launch_has_shape(cbid, GP_SHAPE_NODE_ADD_ANY_V2))
      built_node(nv.node, NULL, (uint32_t)nv.node_type);
    return;
  }
  if (!nv.kernel || !nv.node || !nv.launch.f) return;
  uint64_t node_id = 0;
  if (gp_cupti.getGraphNodeId(nv.node, &node_id) != 0 || !node_id) return;
  func_entry *fe = func_find((uint64_t)(uintptr_t)nv.launch.f);
  if (!fe) fe = func_describe(nv.launch.f, NULL);
  gp_thread_scratch *s = gp_scratch();
  if (!s) {
    GP_COUNT(launches_dropped, 1);
    return;
  }
  uint64_t seq = atomic_fetch_add_explicit(&gp_launch_seq, 1, memory_order_relaxed) + 1;
  gp_launch_rec *rec = &s->launch.r;
  memset(rec, 0, sizeof *rec);
  rec->h.type = GP_REC_LAUNCH;
  rec->seq = seq;
  rec->host_ns = rec->end_ns = gp_clock();
  rec->kernel_id = fe->id;
  rec->context = (uint64_t)(uintptr_t)cb->context;
  rec->graph_node_id = node_id;
  rec->captured = 1;
  // Its kernel's memory is not hashed around the node's runs: as a captured
  // launch's, the graph launch leaves what they write unhashed.
  if (gp_proc.cfg.memory_mode == GP_MEM_HASH || gp_proc.cfg.memory_mode == GP_MEM_SNAPSHOT) {
    rec->mem_status = GP_PLAN_SKIPPED_CAPTURE;
    GP_COUNT(memory_skipped, 1);
  }
  rec->tid = gp_thread_id();
  rec->context_uid = cb->contextUid;
  rec->device = device_of(cb->contextUid);
  rec->correlation_id = cb->correlationId;
  rec->api = cbid;
  memcpy(rec->grid, nv.launch.grid, sizeof rec->grid);
  memcpy(rec->block, nv.launch.block, sizeof rec->block);
  rec->shared_mem = nv.launch.smem;
  rec->callstack_id = gp_callstack_take(0, NULL);
  rec->range_id = gp_thread.range_current;
  rec->params_len = copy_params(fe, &nv.launch, s->launch.tail, GP_PARAMS_CAP);
  rec->h.size = gp_pad8(sizeof *rec + rec->params_len);
  memset(s->launch.tail + rec->params_len, 0, gp_pad8(rec->params_len) - rec->params_len);
  if (!gp_ring_push_counted(rec, &gp_counts.launches)) {
    GP_COUNT(launches_dropped, 1);
    return;
  }
  gp_graphnode_rec n = graph_node_rec(GP_GRAPH_NODE_TYPE_KERNEL);
  n.node_id = node_id;
  n.launch_seq = seq;
  gp_ring_push(&n);
}

// forget_module: a module is being unloaded: its kernels' handles may come back for a
// later module's kernels, which are described anew (and probed anew).
static void forget_module(const gp_CallbackData *cb) {
  const gp_cuModuleUnload_params *p = cb->functionParams;
  if (!p || !p->hmod) return;
  pthread_mutex_lock(&funcs_mu);
  for (int i = 0; i < FUNC_TABLE; i++) {
    uint64_t k = atomic_load_explicit(&funcs[i].key, memory_order_acquire);
    if (!k || k == FUNC_GONE) continue;
    if (gp_proc.cfg.probes) gp_probe_unloaded(&funcs[i].probe, p->hmod);
    if (funcs[i].module == p->hmod) atomic_store_explicit(&funcs[i].key, FUNC_GONE, memory_order_release);
  }
  pthread_mutex_unlock(&funcs_mu);
}

// ---- the callback ----

static void dispatch(int domain, uint32_t cbid, const void *data);

void gp_on_callback(void *userdata, int domain, uint32_t cbid, const void *data) {
  (void)userdata;
  if (gp_proc.forked_child) return;
  if (atomic_load_explicit(&gp_proc.client_active, memory_order_relaxed) && !gp_client_callback(domain, cbid, data)) return;
  if (gp_thread.in_agent) {
    // Memory capture's own copies and memsets: their GPU records must not pass for the program's.
    if (domain == GP_CB_DOMAIN_DRIVER_API && ((const gp_CallbackData *)data)->callbackSite == GP_API_EXIT &&
        gp_hostcall_class(cbid))
      gp_hostcall_own(cbid, data);
    return;
  }
  uint64_t t0;
  if (domain == GP_CB_DOMAIN_DRIVER_API && gp_launch_is_kernel(cbid)) {
    if (((const gp_CallbackData *)data)->callbackSite == GP_API_ENTER)
      gp_thread.sample_launch = ++gp_thread.callbacks % TIMING_SAMPLE == 0;
    if (!gp_thread.sample_launch) {
      dispatch(domain, cbid, data);
      return;
    }
    t0 = gp_cycles();
    dispatch(domain, cbid, data);
    uint64_t spent = (gp_cycles() - t0) * TIMING_SAMPLE;
    GP_COUNT(callback_cycles, spent);
    GP_COUNT(launch_callback_cycles, spent);
    return;
  }
  t0 = gp_cycles();
  dispatch(domain, cbid, data);
  GP_COUNT(callback_cycles, gp_cycles() - t0);
}

static void dispatch(int domain, uint32_t cbid, const void *data) {
  if (domain == GP_CB_DOMAIN_DRIVER_API) {
    const gp_CallbackData *cb = data;
    if (gp_launch_is_kernel(cbid)) {
      if (cb->callbackSite == GP_API_ENTER)
        on_launch_enter(cbid, cb);
      else
        on_launch_exit(cbid, cb);
    } else if (gp_launch_is_graph(cbid)) {
      if (cb->callbackSite == GP_API_ENTER) {
        gp_activity_first_launch();
        gp_thread.have_stack = 0;
        gp_thread.graph_seq = 0;
        if (gp_steps_on()) on_graph_enter(cbid, cb);
      }
      if (cb->callbackSite == GP_API_EXIT)
        on_graph_launch(cbid, cb);
      else if (gp_proc.cfg.memory_mode != GP_MEM_OFF)  // its kernels may write what waits to be hashed
        gp_mem_before_unhashed(cb->context, ((const gp_cuGraphLaunch_params *)cb->functionParams)->hStream,
                               gp_launch_ptsz(cbid));
    } else if (gp_launch_is_node(cbid)) {
      on_node_call(cbid, cb);
    } else if (cbid == GP_CBID_cuGraphExecUpdate || cbid == GP_CBID_cuGraphExecUpdate_v2 ||
               cbid == GP_CBID_cuGraphAddMemAllocNode || cbid == GP_CBID_cuGraphAddMemFreeNode) {
      on_graph_build(cbid, cb);
    } else if (cbid == GP_CBID_cuModuleUnload || (gp_proc.cfg.probes && cbid >= GP_CBID_cuModuleLoadData && cbid <= GP_CBID_cuModuleUnload)) {
      if (cbid == GP_CBID_cuModuleUnload && cb->callbackSite == GP_API_ENTER) forget_module(cb);
      if (gp_proc.cfg.probes) gp_probe_module_api(cbid, cb);
    } else if (gp_mem_alloc_callback(cbid)) {
      gp_mem_on_api(cbid, cb);
    } else {
      // A copy, memset or synchronization: its host time is the program's
      // call alone, memory capture's work around it left out.
      int host = gp_hostcall_class(cbid);
      if (host && cb->callbackSite == GP_API_EXIT) gp_hostcall_exit(cbid, cb, device_of(cb->contextUid));
      if (gp_mem_write_callback(cbid)) {
        if (cb->callbackSite == GP_API_ENTER && gp_mem_teardown_call(cbid)) gp_step_forget();
        gp_mem_on_write(cbid, cb);
      }
      if (gp_mem_error_callback(cbid) && cb->callbackSite == GP_API_EXIT && cb->functionReturnValue) {
      gp_CUresult r = *(gp_CUresult *)cb->functionReturnValue;
      if (r != 0 && r != 600 && !gp_proc.forked_child && getpid() == gp_proc.agent_pid)  // 600: CUDA_ERROR_NOT_READY
        gpurrCudaError((char *)cb->functionName, r);
      }
      if (host && cb->callbackSite == GP_API_ENTER) gp_hostcall_enter(cbid);
    }
    return;
  }
  if (domain == GP_CB_DOMAIN_RESOURCE) {
    const gp_ResourceData *rd = data;
    switch (cbid) {
    case GP_CBID_RESOURCE_MODULE_LOADED:
      gp_client_rescan();  // a library loaded since may be a profiler's
      on_module_loaded(rd);
      break;
    case GP_CBID_RESOURCE_GRAPHNODE_CREATED:
    case GP_CBID_RESOURCE_GRAPHNODE_CLONED:
      on_graph_node(cbid, rd);
      break;
    case GP_CBID_RESOURCE_STREAM_DESTROY_STARTING:
      atomic_fetch_add_explicit(&stream_epoch, 1, memory_order_release);
      break;
    }
  }
}
