/*
 * hotpath.c - CPU micro-benchmark and equivalence check of the agent's hot
 * path (the CUPTI launch callbacks), without a GPU, CUPTI or libcuda.
 *
 * The harness is linked with the agent's own objects (run.sh builds them
 * with the real build's flags) and sets the agent up the way gp_start does,
 * minus loading CUPTI and binding libcuda: the gp_cupti and gp_cu tables
 * (internal.h) get fakes (a timestamp on CLOCK_REALTIME, a stream-id lookup
 * that spins STREAM_ID_NS like the real one on the H100, a 3-param layout).
 * A drainer thread empties the ring every 2 ms, like the Go writer.
 *
 * Entry points (ctypes from bench.py, or main() in the hotpath binary):
 *   hp_setup(mode)       once; mode = callstack mode (0 off, 1 auto, 2 python, 3 native)
 *   hp_set_mode(mode)    change the callstack mode
 *   hp_bench(n, batches, out) ENTER+EXIT of cuLaunchKernel n×batches times on
 *                        the calling thread; out[i] = ns per launch of batch i
 *                        (wall clock, or thread CPU time with hp_cpu_clock(1))
 *   hp_scenario(path)    a fixed sequence covering every launch API and the
 *                        resource callbacks; writes every record the ring got
 *                        (host_ns and tid zeroed) and the counters to path,
 *                        so two builds of the agent can be compared byte for
 *                        byte (run.sh --base).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "internal.h"
#include "nvtxhost.h"
#include "pystack.h"
#include "unwind.h"

// The real build hides every symbol (-fvisibility=hidden); ctypes needs these.
#define HP_API __attribute__((visibility("default")))

enum { STREAM_ID_NS = 220 };

// ---- the Go exports ----

int gpurrKernelSelected(char *name) { return strstr(name, "skip") == NULL; }
void gpurrAtExit(void) {}
int gpurrSnapshotKernel(char *name) { return name != NULL; }
// --step-range '^step ' as the Go side would answer it.
int gpurrStepRange(char *msg, int n) { return n >= 5 && strncmp(msg, "step ", 5) == 0; }
void gpurrCudaError(char *call, int code) { (void)call, (void)code; }
// The harness records without --probe: these are never called.
void gpurrProbeModule(void *module, void *input, void *image, size_t size) { (void)module, (void)input, (void)image, (void)size; }
void gpurrProbeForgetModule(void *module) { (void)module; }
int gpurrProbeFunction(void *module, char *name, uint64_t kernelID, uint32_t nparams, void **out) {
  (void)module, (void)name, (void)kernelID, (void)nparams, (void)out;
  return 0;
}

// Hash mode's write sets: no module has PTX here, but "ex_kernel"'s first word is proved
// read-only and "ro_kernel" stores nothing (the memory scenario's kernels).
void gpurrModuleWriteSets(void *image, size_t size) { (void)image, (void)size; }
void *gpurrKernelReadOnly(char *name, uint32_t paramBytes) {
  (void)paramBytes;
  uint64_t words;
  if (strcmp(name, "ex_kernel") == 0)
    words = 1;  // word 0
  else if (strcmp(name, "ro_kernel") == 0)
    words = 3;  // words 0 and 1
  else
    return NULL;
  gp_readonly *ro = calloc(1, sizeof *ro + 2 * sizeof(uint64_t));
  ro->nwords = 64, ro->n64 = 1;
  ro->bits[0] = words;
  return ro;
}

// ---- fakes for CUPTI and the driver ----

static double hp_cycles_per_ns;
static _Atomic uint32_t stream_generation;  // bumped by each STREAM_DESTROY the harness sends
static _Atomic uint64_t stream_id_calls;

static gp_CUptiResult fake_getTimestamp(uint64_t *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  *t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  return 0;
}

static gp_CUptiResult fake_getStreamIdEx(gp_CUcontext ctx, gp_CUstream s, uint8_t ptsz, uint32_t *id) {
  (void)ctx;
  uint64_t end = __rdtsc() + (uint64_t)(STREAM_ID_NS * hp_cycles_per_ns);
  while (__rdtsc() < end) _mm_pause();
  atomic_fetch_add_explicit(&stream_id_calls, 1, memory_order_relaxed);
  // The id depends on everything the agent's cache keys on, and on the
  // stream generation, so a stale cached id shows in the scenario output.
  *id = (uint32_t)((uintptr_t)s >> 4) + 1000u * ptsz + 7u + 100000u * atomic_load(&stream_generation);
  return 0;
}

static gp_CUptiResult fake_getGraphNodeId(gp_CUgraphNode n, uint64_t *id) {
  *id = (uint64_t)(uintptr_t)n * 3;
  return 0;
}

static gp_CUptiResult fake_getGraphId(gp_CUgraph g, uint32_t *id) {
  *id = (uint32_t)(uintptr_t)g;
  return 0;
}

// The executable graph 0xe0e0 is CUPTI's graph 0x48; graph 0x44, which it is updated from,
// holds two nodes, a kernel node and an empty one.
static gp_CUptiResult fake_getGraphExecId(gp_CUgraphExec e, uint32_t *id) {
  if (e != (gp_CUgraphExec)0xe0e0) return 1;
  *id = 0x48;
  return 0;
}

static gp_CUresult fake_graphGetNodes(gp_CUgraph g, gp_CUgraphNode *nodes, size_t *n) {
  if (g != (gp_CUgraph)0x44) return 400;
  if (nodes)
    for (size_t i = 0; i < *n && i < 2; i++) nodes[i] = (gp_CUgraphNode)(0x44000000000 + i);
  *n = 2;
  return 0;
}

static gp_CUresult fake_graphNodeGetType(gp_CUgraphNode node, int *type) {
  *type = (uintptr_t)node & 1 ? 5 : GP_GRAPH_NODE_TYPE_KERNEL;  // CU_GRAPH_NODE_TYPE_EMPTY
  return 0;
}

// Kernels: F_MAIN has 3 params (8, 4, 4 bytes), F_EXTRA none (its launches
// pass `extra`), F_SKIP is filtered out by name, F_EX has 2 params (8, 8),
// F_WIDE one of WIDE_WORDS words (a cuBLAS GEMM's: pointers, TMA descriptors).
#define F_MAIN ((gp_CUfunction)0x7f0000001000)
#define F_EXTRA ((gp_CUfunction)0x7f0000002000)
#define F_SKIP ((gp_CUfunction)0x7f0000003000)
#define F_EX ((gp_CUfunction)0x7f0000004000)
#define F_RO ((gp_CUfunction)0x7f0000005000)
#define F_WIDE ((gp_CUfunction)0x7f0000006000)
// F_REUSE's module is unloaded mid-scenario and the handle comes back for a
// later module's kernel of one 8-byte parameter (reuse_generation 1).
#define F_REUSE ((gp_CUfunction)0x7f0000007000)
#define MOD_REUSE ((void *)0x7f00000e0000)
// K_NODE is a CUkernel a graph kernel node names alone (func NULL): cuFuncGetName
// does not name it, cuKernelGetName does; its parameters are F_EX's.
#define K_NODE ((gp_CUfunction)0x7f0000008000)
static int reuse_generation;
enum { WIDE_WORDS = 80 };

static gp_CUresult fake_funcGetParamInfo(gp_CUfunction f, size_t i, size_t *off, size_t *size) {
  static const size_t main_l[][2] = {{0, 8}, {8, 4}, {12, 4}}, ex_l[][2] = {{0, 8}, {8, 8}};
  if ((f == F_MAIN || f == F_SKIP) && i < 3) {
    *off = main_l[i][0], *size = main_l[i][1];
    return 0;
  }
  if ((f == F_EX || f == F_RO || f == K_NODE) && i < 2) {
    *off = ex_l[i][0], *size = ex_l[i][1];
    return 0;
  }
  if (f == F_REUSE && (reuse_generation ? i < 1 : i < 3)) {
    *off = main_l[i][0], *size = main_l[i][1];
    return 0;
  }
  if (f == F_WIDE && i == 0) {
    *off = 0, *size = 8 * WIDE_WORDS;
    return 0;
  }
  return 1;  // CUDA_ERROR_INVALID_VALUE
}

static gp_CUresult fake_funcGetModule(void **mod, gp_CUfunction f) {
  *mod = f == F_REUSE ? MOD_REUSE : NULL;
  return f == F_REUSE ? 0 : 1;
}

static gp_CUresult fake_kernelGetName(const char **name, void *k) {
  if (k != K_NODE) return 400;  // CUDA_ERROR_INVALID_HANDLE
  *name = "node_kernel";
  return 0;
}

static gp_CUresult fake_funcGetName(const char **name, gp_CUfunction f) {
  if (f == K_NODE) return 400;
  *name = f == F_SKIP ? "skip_me" : f == F_EX ? "ex_kernel" : f == F_RO ? "ro_kernel" : f == F_WIDE ? "wide_kernel" : "extra_kernel";
  return 0;
}

static int fake_device;  // the current context's device
static gp_CUresult fake_ctxGetDevice(gp_CUdevice *d) {
  *d = fake_device;
  return 0;
}

static gp_CUresult fake_deviceGetName(char *name, int len, gp_CUdevice d) {
  snprintf(name, (size_t)len, "Fake GPU %d", d);
  return 0;
}

// ---- setup ----

static uint8_t *drain_buf;
enum { DRAIN_CAP = 4 << 20 };
static _Atomic int drain_paused, drain_stop;
static _Atomic uint64_t drained_bytes, drained_launches;
static pthread_t drainer;

static void *drain_loop(void *arg) {
  (void)arg;
  while (!atomic_load(&drain_stop)) {
    if (!atomic_load(&drain_paused)) {
      size_t n;
      while ((n = gp_ring_take(drain_buf, DRAIN_CAP)) > 0) {
        for (size_t off = 0; off < n;) {
          const gp_rec_hdr *h = (const gp_rec_hdr *)(drain_buf + off);
          if (h->type == GP_REC_LAUNCH) drained_launches++;
          off += h->size;
        }
        drained_bytes += n;
      }
    }
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static int hp_ready;

HP_API int hp_setup(int mode) {
  if (hp_ready) return 1;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  uint64_t c0 = __rdtsc();
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec) < 20000000);
  hp_cycles_per_ns = (double)(__rdtsc() - c0) / (double)((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec));

  // What gp_start does, minus loading CUPTI and binding libcuda.
  gp_config cfg = {.cupti_path = "fake", .ring_bytes = 64 << 20, .callstack_mode = mode, .has_kernel_filter = 1};
  gp_start_process(&cfg);
  uint64_t cap = 1;
  while (cap < cfg.ring_bytes) cap <<= 1;
  uint8_t *ring = malloc(cap);
  memset(ring, 0, cap);  // fault the pages in: steady state, not first touch
  gp_ring_init(ring, cap);
  gp_cupti.getTimestamp = fake_getTimestamp;
  gp_cupti.getStreamIdEx = fake_getStreamIdEx;
  gp_cupti.getGraphNodeId = fake_getGraphNodeId;
  gp_cupti.getGraphId = fake_getGraphId;
  gp_cupti_graph_exec_id = fake_getGraphExecId;
  gp_cu.graphGetNodes = fake_graphGetNodes;
  gp_cu.graphNodeGetType = fake_graphNodeGetType;
  gp_cu.funcGetParamInfo = fake_funcGetParamInfo;
  gp_cu.funcGetName = fake_funcGetName;
  gp_cu.kernelGetName = fake_kernelGetName;
  gp_cu.funcGetModule = fake_funcGetModule;
  gp_cu.ctxGetDevice = fake_ctxGetDevice;
  gp_cu.deviceGetName = fake_deviceGetName;
  gp_callstack_init();
  uint64_t pcs[4];
  gp_unwind(pcs, 4);  // this thread's stack bounds, whatever the mode
  drain_buf = malloc(DRAIN_CAP);
  memset(drain_buf, 0, DRAIN_CAP);
  pthread_create(&drainer, NULL, drain_loop, NULL);
  hp_ready = 1;
  return gp_py_init();
}

HP_API void hp_set_mode(int mode) { gp_proc.cfg.callstack_mode = mode; }

// hp_set_timing_steps: launches as the default GPU timing (by steps) makes them, each taking
// its step as it begins; no step ends here (no optimizer), so this is an untimed step's cost.
HP_API void hp_set_timing_steps(int on) { gp_proc.cfg.gpu_timing = on ? GP_TIMING_STEPS : GP_TIMING_OFF; }

// ---- the launches ----

static gp_CUcontext const CTX = (gp_CUcontext)0x5555000010;
static _Atomic uint32_t correlation;

static void callback(uint32_t cbid, int site, const void *params, gp_CUresult *ret, const char *symbol) {
  gp_CallbackData cb = {
      .callbackSite = site,
      .functionName = "cuLaunchKernel",
      .functionParams = params,
      .functionReturnValue = site == GP_API_EXIT ? ret : NULL,
      .symbolName = symbol,
      .context = CTX,
      .contextUid = 1,
      .correlationId = atomic_load_explicit(&correlation, memory_order_relaxed),
  };
  gp_on_callback(NULL, GP_CB_DOMAIN_DRIVER_API, cbid, &cb);
}

static void resource(uint32_t cbid, void *descriptor, gp_CUstream stream) {
  gp_ResourceData rd = {.context = CTX, .resourceHandle.stream = stream, .resourceDescriptor = descriptor};
  gp_on_callback(NULL, GP_CB_DOMAIN_RESOURCE, cbid, &rd);
}

static int hp_cpu;  // time batches with the thread's CPU clock
HP_API void hp_cpu_clock(int on) { hp_cpu = on; }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(hp_cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *const SYM_MAIN = "_Z11fake_kernelPfif";

// launch_args holds the parameter values the benchmark's launches point to.
typedef struct {
  void *ptr;
  int count;
  float alpha;
  void *kp[3];
} launch_args;

// eager_launch is what PyTorch's eager `x + 1` passes to cuLaunchKernel: one
// kernel with 3 parameters on the default stream.
static gp_cuLaunchKernel_params eager_launch(launch_args *a) {
  a->ptr = (void *)0x7e0000200000;
  a->count = 1 << 20;
  a->alpha = 1.0f;
  a->kp[0] = &a->ptr;
  a->kp[1] = &a->count;
  a->kp[2] = &a->alpha;
  return (gp_cuLaunchKernel_params){
      .f = F_MAIN, .gridDimX = 4096, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256, .blockDimY = 1,
      .blockDimZ = 1, .sharedMemBytes = 0, .hStream = NULL, .kernelParams = a->kp, .extra = NULL,
  };
}

// hp_bench: what PyTorch's eager `x + 1` looks like to the agent: a
// cuLaunchKernel on the default stream of one kernel with 3 parameters.
HP_API int hp_bench(long n, int batches, double *out) {
  launch_args a;
  gp_cuLaunchKernel_params p = eager_launch(&a);
  gp_CUresult ret = 0;
  for (int b = 0; b < batches; b++) {
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
      atomic_fetch_add_explicit(&correlation, 1, memory_order_relaxed);
      callback(GP_CBID_cuLaunchKernel, GP_API_ENTER, &p, &ret, SYM_MAIN);
      callback(GP_CBID_cuLaunchKernel, GP_API_EXIT, &p, &ret, SYM_MAIN);
    }
    out[b] = (double)(now_ns() - t0) / (double)n;
  }
  return 0;
}

// hp_bench_cold: the same launches, but before each one the harness writes
// evict_bytes of its own memory, as the framework code between two launches
// does (PyTorch's dispatcher, the interpreter), so the agent's data is no
// longer in L1/L2 and the cost of its cache footprint shows. Only the
// ENTER+EXIT is timed (rdtsc), minus the cost of an empty timed region.
HP_API int hp_bench_cold(long n, int batches, long evict_bytes, double *out) {
  launch_args a;
  gp_cuLaunchKernel_params p = eager_launch(&a);
  gp_CUresult ret = 0;
  static __thread volatile uint8_t *evict;
  if (!evict) evict = calloc(1, (size_t)evict_bytes);
  uint64_t empty = UINT64_MAX;
  for (int i = 0; i < 1000; i++) {
    _mm_lfence();
    uint64_t t0 = __rdtsc();
    _mm_lfence();
    uint64_t t1 = __rdtsc();
    if (t1 - t0 < empty) empty = t1 - t0;
  }
  for (int b = 0; b < batches; b++) {
    uint64_t cycles = 0;
    for (long i = 0; i < n; i++) {
      for (long j = 0; j < evict_bytes; j += 64) evict[j]++;
      atomic_fetch_add_explicit(&correlation, 1, memory_order_relaxed);
      _mm_lfence();
      uint64_t t0 = __rdtsc();
      callback(GP_CBID_cuLaunchKernel, GP_API_ENTER, &p, &ret, SYM_MAIN);
      callback(GP_CBID_cuLaunchKernel, GP_API_EXIT, &p, &ret, SYM_MAIN);
      _mm_lfence();
      cycles += __rdtsc() - t0 - empty;
    }
    out[b] = (double)cycles / hp_cycles_per_ns / (double)n;
  }
  return 0;
}

// Stream-id lookups so far (the fake's calls): shows the cache at work.
HP_API uint64_t hp_stream_id_calls(void) { return atomic_load(&stream_id_calls); }
HP_API uint64_t hp_drained_launches(void) { return drained_launches; }
HP_API uint64_t hp_stacks_new(void) { return atomic_load((_Atomic uint64_t *)&gp_counts.stacks_new); }

// ---- the equivalence scenario ----

static void launch(uint32_t cbid, void *params, gp_CUresult result, const char *symbol) {
  atomic_fetch_add_explicit(&correlation, 1, memory_order_relaxed);
  gp_CUresult r = result;
  callback(cbid, GP_API_ENTER, params, &r, symbol);
  callback(cbid, GP_API_EXIT, params, &r, symbol);
}

static void dump(FILE *f, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) fprintf(f, "%s%02x", i % 32 ? "" : "\n  ", p[i]);
}

// handle_no numbers the NVTX handles the agent hands out (addresses) in the
// order the dump meets them, so the dump is the same in every run.
static uint64_t handle_no(uint64_t h) {
  static uint64_t seen[16];
  if (!h) return 0;
  for (int i = 0; i < 16; i++) {
    if (seen[i] == h) return i + 1;
    if (!seen[i]) return seen[i] = h, i + 1;
  }
  return 99;
}

// write_records prints every byte of each record that the Go reader reads;
// padding the agent never initialises (pad8 tails, gp_kernel_rec.pad) and
// what differs between runs (host_ns, tid) are left out.
static void write_records(FILE *f, const uint8_t *buf, size_t n) {
  static uint8_t rec[65536];
  for (size_t off = 0; off < n;) {
    gp_rec_hdr h;
    memcpy(&h, buf + off, sizeof h);
    size_t keep = h.size < sizeof rec ? h.size : sizeof rec;
    memcpy(rec, buf + off, keep);
    fprintf(f, "rec type %u size %u:", h.type, h.size);
    if (h.type == GP_REC_LAUNCH) {
      gp_launch_rec *l = (gp_launch_rec *)rec;
      if (l->host_ns == 0) fprintf(f, " !! host_ns is 0");
      if (l->end_ns < l->host_ns) fprintf(f, " !! end_ns before host_ns");
      l->host_ns = 0, l->end_ns = 0, l->tid = 0;
      dump(f, rec, sizeof *l + l->params_len);
    } else if (h.type == GP_REC_KERNEL) {
      gp_kernel_rec *k = (gp_kernel_rec *)rec;
      k->pad = 0;
      dump(f, rec, sizeof *k + 8u * k->nparams + k->name_len);
    } else if (h.type == GP_REC_STACK) {
      gp_stack_rec *s = (gp_stack_rec *)rec;
      dump(f, rec, sizeof *s);
      size_t at = sizeof *s;
      for (uint32_t i = 0; i < s->nframes && at < keep; i++) {
        const gp_frame_rec *fr = (const gp_frame_rec *)(rec + at);
        dump(f, rec + at, sizeof *fr + fr->file_len + fr->func_len);
        at += gp_pad8(sizeof *fr + fr->file_len + fr->func_len);
      }
    } else if (h.type == GP_REC_HOSTCALL) {
      gp_hostcall_rec *c = (gp_hostcall_rec *)rec;
      if (!c->own && (c->start == 0 || c->end < c->start)) fprintf(f, " !! start %llu end %llu", (unsigned long long)c->start, (unsigned long long)c->end);
      c->start = c->end = 0, c->tid = 0;
      dump(f, rec, keep);
    } else if (h.type == GP_REC_GRAPHLAUNCH) {
      gp_graphlaunch_rec *g = (gp_graphlaunch_rec *)rec;
      g->host_ns = 0, g->tid = 0;
      dump(f, rec, keep);
    } else if (h.type == GP_REC_RANGE) {
      gp_range_rec *g = (gp_range_rec *)rec;
      if (g->start_ns == 0) fprintf(f, " !! start_ns is 0");
      g->start_ns = 0, g->tid = 0;
      g->domain = handle_no(g->domain), g->registered = handle_no(g->registered);
      dump(f, rec, sizeof *g + g->message_len);
    } else if (h.type == GP_REC_RANGE_END) {
      gp_range_end_rec *g = (gp_range_end_rec *)rec;
      g->end_ns = 0, g->tid = 0;
      g->domain = handle_no(g->domain);
      dump(f, rec, keep);
    } else if (h.type == GP_REC_NVTX_NAME) {
      gp_nvtx_name_rec *nr = (gp_nvtx_name_rec *)rec;
      nr->handle = handle_no(nr->handle), nr->domain = handle_no(nr->domain);
      dump(f, rec, sizeof *nr + nr->len);
    } else if (h.type == GP_REC_LOG) {
      gp_log_rec *l = (gp_log_rec *)rec;
      l->host_ns = 0;
      dump(f, rec, sizeof *l + l->len);
    } else {
      dump(f, rec, keep);
    }
    fprintf(f, "\n");
    off += h.size;
  }
}

// nvtx_scenario nests ranges of two domains around launches of p, through
// the slots the agent fills as NVTX's injection library: the launches name
// the innermost push/pop range, pops of one domain skip the other's, and a
// start/end range and a pop with nothing open are recorded or counted.
static void nvtx_scenario(gp_cuLaunchKernel_params *p) {
  if (!nvtxhost_inject()) {
    fprintf(stderr, "hotpath: the agent refused NVTX's export table\n");
    exit(1);
  }
  gp_nvtx_start();
  nvtxhost_push_a("step 1");
  launch(GP_CBID_cuLaunchKernel, p, 0, SYM_MAIN);
  uintptr_t dom = nvtxhost_domain_create("torch");
  uintptr_t str = nvtxhost_register_string(dom, "backward");
  gp_nvtxEventAttributes fwd = {.version = 2, .size = sizeof fwd, .category = 7,
                                .messageType = GP_NVTX_MESSAGE_ASCII, .message.ascii = "forward"};
  nvtxhost_domain_push_ex(dom, &fwd);
  launch(GP_CBID_cuLaunchKernel, p, 0, SYM_MAIN);
  gp_nvtxEventAttributes inner = {.version = 2, .size = sizeof inner, .messageType = GP_NVTX_MESSAGE_ASCII,
                                  .message.ascii = "inner"};
  nvtxhost_push_ex(&inner);
  gp_nvtxEventAttributes bwd = {.version = 2, .size = sizeof bwd, .messageType = GP_NVTX_MESSAGE_REGISTERED,
                                .message.registered = (gp_nvtxStringHandle)str};
  nvtxhost_domain_push_ex(dom, &bwd);
  launch(GP_CBID_cuLaunchKernel, p, 0, SYM_MAIN);
  nvtxhost_domain_pop(dom);                        // backward
  nvtxhost_domain_pop(dom);                        // forward, under inner
  launch(GP_CBID_cuLaunchKernel, p, 0, SYM_MAIN);  // still in inner
  gp_cuGraphLaunch_params pg = {(gp_CUgraphExec)0xe0e0, (gp_CUstream)0x7000a0};
  launch(GP_CBID_cuGraphLaunch, &pg, 0, NULL);  // so is a graph launch
  uint64_t load = nvtxhost_start_a("load");
  nvtxhost_pop();  // inner
  nvtxhost_pop();  // step 1
  nvtxhost_end(load);
  launch(GP_CBID_cuLaunchKernel, p, 0, SYM_MAIN);  // in no range
  nvtxhost_pop();                                  // nothing open: dropped
}

HP_API int hp_scenario(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  atomic_store(&drain_paused, 1);
  // Let a drain in progress finish, then start from an empty ring.
  struct timespec ts = {0, 10000000};
  nanosleep(&ts, NULL);
  while (gp_ring_take(drain_buf, DRAIN_CAP) > 0) {
  }

  void *ptr = (void *)0x7e0000200000;
  int count = 77;
  float alpha = 2.5f;
  void *kp[3] = {&ptr, &count, &alpha};
  void *kp_null[3] = {&ptr, NULL, &alpha};  // a NULL parameter pointer is skipped
  gp_cuLaunchKernel_params p = {F_MAIN, 10, 2, 3, 128, 2, 1, 48, NULL, kp, NULL};
  launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
  p.gridDimX = 11;
  launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
  p.hStream = (gp_CUstream)0x7000a0;  // another stream
  launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
  launch(GP_CBID_cuLaunchKernel_ptsz, &p, 0, SYM_MAIN);  // same stream, per-thread flavour
  p.kernelParams = kp_null;
  launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
  p.kernelParams = kp;
  launch(GP_CBID_cuLaunchKernel, &p, 719, SYM_MAIN);  // a failed launch
  launch(GP_CBID_cuLaunchCooperativeKernel, &p, 0, SYM_MAIN);
  launch(GP_CBID_cuLaunchCooperativeKernel_ptsz, &p, 0, "");

  // Parameters through `extra` (no layout for this kernel), no symbol name.
  uint8_t argbuf[20];
  for (int i = 0; i < 20; i++) argbuf[i] = (uint8_t)(0xa0 + i);
  size_t argsize = sizeof argbuf;
  void *extra[] = {GP_LAUNCH_PARAM_BUFFER_POINTER, argbuf, GP_LAUNCH_PARAM_BUFFER_SIZE, &argsize, GP_LAUNCH_PARAM_END};
  gp_cuLaunchKernel_params px = {F_EXTRA, 1, 1, 1, 32, 1, 1, 0, (gp_CUstream)0x7000a0, NULL, extra};
  launch(GP_CBID_cuLaunchKernel, &px, 0, NULL);

  // Filtered by name: no launch record, counted.
  gp_cuLaunchKernel_params ps = {F_SKIP, 1, 1, 1, 32, 1, 1, 0, NULL, kp, NULL};
  launch(GP_CBID_cuLaunchKernel, &ps, 0, NULL);
  launch(GP_CBID_cuLaunchKernel, &ps, 0, NULL);

  // cuLaunchKernelEx with a cluster attribute.
  uint64_t a0 = 0x1111222233334444ull, a1 = 0x5555666677778888ull;
  void *kpx[2] = {&a0, &a1};
  gp_CUlaunchAttribute attrs[2];
  memset(attrs, 0, sizeof attrs);
  attrs[0].id = 1;
  attrs[1].id = GP_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[1].value.clusterDim.x = 2, attrs[1].value.clusterDim.y = 1, attrs[1].value.clusterDim.z = 1;
  gp_CUlaunchConfig lc = {64, 1, 1, 256, 1, 1, 1024, (gp_CUstream)0x7000c0, attrs, 2};
  gp_cuLaunchKernelEx_params pe = {&lc, F_EX, kpx, NULL};
  launch(GP_CBID_cuLaunchKernelEx, &pe, 0, "_Z9ex_kernelll");
  launch(GP_CBID_cuLaunchKernelEx_ptsz, &pe, 0, "_Z9ex_kernelll");
  lc.numAttrs = 1;
  launch(GP_CBID_cuLaunchKernelEx, &pe, 0, "_Z9ex_kernelll");
  // And with the cooperative attribute: recorded as a cooperative launch.
  attrs[0].id = GP_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attrs[0].value.cooperative = 1;
  launch(GP_CBID_cuLaunchKernelEx, &pe, 0, "_Z9ex_kernelll");

  // A launch captured into a graph: the node is created between ENTER and EXIT.
  atomic_fetch_add(&correlation, 1);
  gp_CUresult r = 0;
  callback(GP_CBID_cuLaunchKernel, GP_API_ENTER, &p, &r, SYM_MAIN);
  gp_GraphData gd = {.graph = (gp_CUgraph)0x42, .node = (gp_CUgraphNode)0x9000, .nodeType = 0};
  resource(GP_CBID_RESOURCE_GRAPHNODE_CREATED, &gd, NULL);
  callback(GP_CBID_cuLaunchKernel, GP_API_EXIT, &p, &r, SYM_MAIN);
  // A node cloned when the graph is instantiated; one built by the graph API.
  gp_GraphData gc = {.graph = (gp_CUgraph)0x43, .node = (gp_CUgraphNode)0x9100,
                     .originalNode = (gp_CUgraphNode)0x9000, .nodeType = 0};
  resource(GP_CBID_RESOURCE_GRAPHNODE_CLONED, &gc, NULL);
  gp_GraphData gapi = {.graph = (gp_CUgraph)0x42, .node = (gp_CUgraphNode)0x9200, .nodeType = 0};
  resource(GP_CBID_RESOURCE_GRAPHNODE_CREATED, &gapi, NULL);
  // Kernel nodes added and changed through the graph API: each a captured
  // launch of its node (kernel, dimensions, parameters, line) and the node
  // naming it; the change a later launch of the same node.
  gp_CUgraphNode added = (gp_CUgraphNode)0x9300;
  gp_KERNEL_NODE_PARAMS kn = {.func = F_MAIN, .gridDimX = 8, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
                              .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = 64, .kernelParams = kp};
  gp_cuGraphAddKernelNode_params pan = {&added, (gp_CUgraph)0x42, NULL, 0, &kn};
  launch(GP_CBID_cuGraphAddKernelNode_v2, &pan, 0, NULL);
  kn.gridDimX = 16;
  gp_cuGraphExecKernelNodeSetParams_params pes = {(gp_CUgraphExec)0xe0e0, added, &kn};
  launch(GP_CBID_cuGraphExecKernelNodeSetParams_v2, &pes, 0, NULL);
  // cuGraphAddNode_v2 of a kernel node, through CUgraphNodeParams.
  gp_CUgraphNode added2 = (gp_CUgraphNode)0x9400;
  gp_CUgraphNodeParams np;
  memset(&np, 0, sizeof np);
  np.type = GP_GRAPH_NODE_TYPE_KERNEL;
  np.kernel = (gp_KERNEL_NODE_PARAMS){.func = F_EX, .gridDimX = 2, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
                                      .blockDimY = 1, .blockDimZ = 1, .kernelParams = kpx};
  gp_cuGraphAddNode_v2_params pany = {&added2, (gp_CUgraph)0x42, NULL, NULL, 0, &np};
  launch(GP_CBID_cuGraphAddNode_v2, &pany, 0, NULL);
  // Not recorded as launches: memory nodes and a conditional node (their
  // graph node records alone, to be counted, whether added by cuGraphAddNode
  // or by the memory node calls; their creation callbacks record nothing), a
  // failed add, and a _v1 add naming its kernel only in kern (a _v2 member
  // the _v1 struct does not have).
  gp_CUgraphNode mem = (gp_CUgraphNode)0x9500, cond = (gp_CUgraphNode)0x9600;
  np.type = GP_GRAPH_NODE_TYPE_MEM_ALLOC;
  pany.phGraphNode = &mem;
  launch(GP_CBID_cuGraphAddNode_v2, &pany, 0, NULL);
  gp_GraphData gmem = {.graph = (gp_CUgraph)0x42, .node = mem, .nodeType = GP_GRAPH_NODE_TYPE_MEM_ALLOC};
  resource(GP_CBID_RESOURCE_GRAPHNODE_CREATED, &gmem, NULL);
  np.type = GP_GRAPH_NODE_TYPE_CONDITIONAL;
  pany.phGraphNode = &cond;
  launch(GP_CBID_cuGraphAddNode_v2, &pany, 0, NULL);
  gp_GraphData gcond = {.graph = (gp_CUgraph)0x42, .node = cond, .nodeType = GP_GRAPH_NODE_TYPE_CONDITIONAL};
  resource(GP_CBID_RESOURCE_GRAPHNODE_CREATED, &gcond, NULL);
  gp_CUgraphNode alloc = (gp_CUgraphNode)0x9700, release = (gp_CUgraphNode)0x9800;
  gp_cuGraphAddMemNode_params pm = {&alloc, (gp_CUgraph)0x42};
  launch(GP_CBID_cuGraphAddMemAllocNode, &pm, 0, NULL);
  pm.phGraphNode = &release;
  launch(GP_CBID_cuGraphAddMemFreeNode, &pm, 0, NULL);
  pany.phGraphNode = &added2;
  launch(GP_CBID_cuGraphAddKernelNode_v2, &pan, 1, NULL);
  kn.func = NULL, kn.kern = K_NODE;
  launch(GP_CBID_cuGraphAddKernelNode, &pan, 0, NULL);
  // Through _v2, the same node names its CUkernel, which cuKernelGetName names.
  kn.kernelParams = kpx;
  launch(GP_CBID_cuGraphAddKernelNode_v2, &pan, 0, NULL);
  // And the next launch is not captured.
  launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);

  // A graph launch (EXIT only is recorded).
  gp_cuGraphLaunch_params pg = {(gp_CUgraphExec)0xe0e0, (gp_CUstream)0x7000a0};
  launch(GP_CBID_cuGraphLaunch, &pg, 0, NULL);
  // The executable graph updated whole from graph 0x44: a record for each of its two
  // nodes, re-pointing the executable graph's node of the same index to it after the
  // last launch; a failed update, and one of an executable graph CUPTI does not name,
  // record nothing.
  gp_cuGraphExecUpdate_params pu = {(gp_CUgraphExec)0xe0e0, (gp_CUgraph)0x44};
  launch(GP_CBID_cuGraphExecUpdate_v2, &pu, 0, NULL);
  launch(GP_CBID_cuGraphExecUpdate_v2, &pu, 1, NULL);
  gp_cuGraphExecUpdate_params pbad = {(gp_CUgraphExec)0xe0f0, (gp_CUgraph)0x44};
  launch(GP_CBID_cuGraphExecUpdate, &pbad, 0, NULL);
  launch(GP_CBID_cuGraphLaunch_ptsz, &pg, 0, NULL);

  // Destroying a stream invalidates the cached ids.
  atomic_fetch_add(&stream_generation, 1);
  resource(GP_CBID_RESOURCE_STREAM_DESTROY_STARTING, NULL, (gp_CUstream)0x7000b0);
  launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
  launch(GP_CBID_cuGraphLaunch, &pg, 0, NULL);

  // An EXIT without its ENTER (agent started mid-call) records nothing.
  callback(GP_CBID_cuLaunchKernel, GP_API_EXIT, &p, &r, SYM_MAIN);

  // Copies and waits are host calls: their name's callback id, correlation
  // id, result and line; a kernel launch's records are not among them.
  struct {
    uint64_t dst;
    const void *src;
    size_t bytes;
  } htod = {0x7e0000200000, argbuf, 0};  // a copy of 0 bytes is a call as any
  launch(276, &htod, 0, NULL);  // cuMemcpyHtoD_v2
  gp_CUstream sync_stream = (gp_CUstream)0x7000a0;
  launch(126, &sync_stream, 700, NULL);  // cuStreamSynchronize, failed
  gp_in_agent_call(1);  // memory capture's own copy: marked, so that its GPU record is left out
  launch(276, &htod, 0, NULL);
  gp_in_agent_call(0);

  // A kernel of 3 parameters, its module unloaded, and the handle back for a
  // later module's kernel of one: described anew (a new kernel record), its
  // launch's parameters read by the new layout (8 bytes, not 16).
  gp_cuLaunchKernel_params pr = {F_REUSE, 1, 1, 1, 32, 1, 1, 0, NULL, kp, NULL};
  launch(GP_CBID_cuLaunchKernel, &pr, 0, "reused_before");
  void *unload[1] = {MOD_REUSE};
  launch(GP_CBID_cuModuleUnload, unload, 0, NULL);
  reuse_generation = 1;
  launch(GP_CBID_cuLaunchKernel, &pr, 0, "reused_after");

  nvtx_scenario(&p);

  size_t n = gp_ring_take(drain_buf, DRAIN_CAP);
  write_records(f, drain_buf, n);
  gp_counters c;
  gp_read_counters(&c);
  c.callback_cycles = c.launch_callback_cycles = 0;
  fprintf(f, "counters: launches %llu filtered %llu dropped %llu graph %llu stacks_failed %llu rec_dropped %llu ranges %llu ranges_dropped %llu\n",
          (unsigned long long)c.launches, (unsigned long long)c.launches_filtered,
          (unsigned long long)c.launches_dropped, (unsigned long long)c.graph_launches,
          (unsigned long long)c.callstacks_failed, (unsigned long long)c.records_dropped, (unsigned long long)c.ranges,
          (unsigned long long)c.ranges_dropped);
  fclose(f);
  atomic_store(&drain_paused, 0);
  return 0;
}

// ---- the memory scenario: hash mode's write sets on a fake driver ----

// The fake GPU runs each hash job at once: its results are "done" as it is launched.
static FILE *mem_out;
static gp_CUresult fake_ok(void) { return 0; }
static gp_CUresult fake_memHostAlloc(void **p, size_t n, unsigned flags) {
  (void)flags;
  *p = calloc(1, n);
  return *p ? 0 : 2;
}
static gp_CUresult fake_memHostGetDevicePointer(uint64_t *d, void *p, unsigned flags) {
  (void)flags;
  *d = (uint64_t)(uintptr_t)p;  // the "device" writes host memory through the same address
  return 0;
}
static uint64_t next_dev = 0x7f1000000000ull;
static gp_CUresult fake_memAlloc(uint64_t *d, size_t n) {
  *d = next_dev;
  next_dev += (n + 0xfffff) & ~0xfffffull;
  return 0;
}
static gp_CUresult fake_memsetD8(uint64_t d, unsigned char v, size_t n) { return (void)d, (void)v, (void)n, 0; }
static gp_CUresult fake_memsetD8Async(uint64_t d, unsigned char v, size_t n, gp_CUstream s) {
  if (mem_out)
    fprintf(mem_out, "  cuMemsetD8Async(0x%llx, %u, %zu) on stream 0x%llx\n", (unsigned long long)d, v, n,
            (unsigned long long)(uintptr_t)s);
  return 0;
}
static gp_CUresult fake_moduleLoadData(void **m, const void *image) { return (void)image, *m = (void *)0x3, 0; }
static gp_CUresult fake_moduleGetFunction(gp_CUfunction *f, void *m, const char *name) {
  (void)m;
  *f = (gp_CUfunction)(uintptr_t)(strcmp(name, "gpurr_memcap") == 0 ? 0x11 : 0x12);
  return 0;
}
static gp_CUresult fake_captureMode(int *mode) { return (void)mode, 0; }
static gp_CUstream capturing_stream;  // the one stream the fake says is capturing, if any
static gp_CUresult fake_isCapturing(gp_CUstream s, int *c) { return *c = s && s == capturing_stream, 0; }
static gp_CUresult fake_totalMem(size_t *n, gp_CUdevice d) { return (void)d, *n = 1ull << 30, 0; }
// gpurr's own streams (hashes beside the program, 0x5100, 0x5110, ...):
// their jobs finish at once when side_instant, else when gpu_catch_up says
// the GPU got to them.
static int is_side(gp_CUstream s) { return (uintptr_t)s >= 0x5100 && (uintptr_t)s < 0x5200; }
static int side_instant = 1;
static uint64_t side_pending[4096][3];  // results header address, job seq, side stream
static uint32_t side_npending;
static gp_CUresult fake_launchKernel(gp_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned smem, gp_CUstream s, void **args, void **extra) {
  (void)f, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)extra;
  const gp_batch_param *p = args[0];
  if (mem_out) fprintf(mem_out, "  hash kernel on stream %p, %u blocks:", s, gx);
  for (uint32_t k = 0; k < p->njobs; k++) {
    const gp_batch_job *j = &p->j[k];
    if (mem_out) {
      fprintf(mem_out, " job %llu", (unsigned long long)j->seq);
      for (uint32_t r = 0; r < j->nregions; r++)
        fprintf(mem_out, " [0x%llx %llu B]", (unsigned long long)p->r[j->first_region + r].base,
                (unsigned long long)p->r[j->first_region + r].size);
    }
    if (is_side(s) && !side_instant && side_npending < 4096) {
      side_pending[side_npending][0] = j->out, side_pending[side_npending][1] = j->seq;
      side_pending[side_npending++][2] = (uintptr_t)s;
      continue;
    }
    *(volatile uint64_t *)(uintptr_t)j->out = j->seq;  // done: the chunk hashes stay zero
  }
  if (mem_out) fprintf(mem_out, "\n");
  return 0;
}
// side_finish finishes the jobs launched on side stream s (0: on every one).
static void side_finish(uintptr_t s) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < side_npending; i++) {
    if (s && side_pending[i][2] != s) {
      memcpy(side_pending[kept++], side_pending[i], sizeof side_pending[i]);
      continue;
    }
    *(volatile uint64_t *)(uintptr_t)side_pending[i][0] = side_pending[i][1];
  }
  side_npending = kept;
}
static void gpu_catch_up(void) { side_finish(0); }
static gp_CUresult fake_streamCreate(gp_CUstream *s, unsigned flags) {
  static uintptr_t next = 0x5100;
  *s = (gp_CUstream)next;
  next += 0x10;
  return (void)flags, 0;
}
static gp_CUresult fake_eventCreate(void **e, unsigned flags) {
  static uintptr_t next = 0xe1;
  return (void)flags, *e = (void *)next++, 0;
}
static gp_CUresult fake_eventRecord(void *e, gp_CUstream s) { return (void)e, (void)s, 0; }
static gp_CUresult fake_streamWaitEvent(gp_CUstream s, void *e, unsigned flags) {
  (void)flags;
  if (!is_side(s) && mem_out) fprintf(mem_out, "  stream %p waits for event %p (hashes beside)\n", s, e);
  return 0;
}
static gp_CUresult fake_eventSynchronize(void *e) {
  if (mem_out) fprintf(mem_out, "  the host waits for event %p (hashes beside)\n", e);
  side_finish(0x5100 + 0x10 * (((uintptr_t)e - 0xe1) / 2));  // each side makes two events, the second after its hashes
  return 0;
}
static gp_CUresult fake_ctxPush(gp_CUcontext c) { return (void)c, 0; }
static gp_CUresult fake_ctxPop(gp_CUcontext *c) { return *c = NULL, 0; }
static const char *fake_names[1024];
static gp_CUptiResult fake_callbackName(int domain, uint32_t cbid, const char **name) {
  if (domain != GP_CB_DOMAIN_DRIVER_API || cbid >= 1024 || !fake_names[cbid]) return 1;
  *name = fake_names[cbid];
  return 0;
}

enum { CB_MEMSET = 900, CB_MEMCPY2D = 901, CB_DTOH = 902, CB_EVENT = 903, CB_CTX_DESTROY = 904 };
// Copies and memsets whose stream matters to copy states, by their real callback ids.
enum { CB_HTOD = 276, CB_HTOD_ASYNC = 277, CB_MEMSET_PTSZ = 430 };

static void driver_call(uint32_t cbid, const char *name, void *params) {
  static uint32_t calls = 1000;  // correlation ids
  gp_CUresult r = 0;
  gp_CallbackData cb = {.callbackSite = GP_API_ENTER, .functionName = name, .functionParams = params,
                        .context = CTX, .contextUid = 1, .correlationId = ++calls};
  gp_on_callback(NULL, GP_CB_DOMAIN_DRIVER_API, cbid, &cb);
  cb.callbackSite = GP_API_EXIT;
  cb.functionReturnValue = &r;
  gp_on_callback(NULL, GP_CB_DOMAIN_DRIVER_API, cbid, &cb);
}

static uint64_t mem_alloc(size_t n) {
  static uint64_t next = 0x7e0000000000ull;
  uint64_t d = next;
  next += n;
  gp_cuMemAlloc_params p = {&d, n};
  driver_call(GP_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &p);
  return d;
}

// alloc_async reports an allocation of n bytes at d on stream s, as the exit callback of
// cuMemAllocAsync (or its _ptsz form, cbid) does.
static void alloc_async(uint32_t cbid, uint64_t d, size_t n, gp_CUstream s) {
  gp_cuMemAllocAsync_params p = {&d, n, s};
  gp_CUresult r = 0;
  gp_CallbackData cb = {.callbackSite = GP_API_EXIT, .functionName = "cuMemAllocAsync", .functionParams = &p,
                        .functionReturnValue = &r, .context = CTX, .contextUid = 1};
  gp_on_callback(NULL, GP_CB_DOMAIN_DRIVER_API, cbid, &cb);
}

static void alloc_at(uint64_t d, size_t n) { alloc_async(GP_CBID_cuMemAllocAsync, d, n, (gp_CUstream)0x7000a0); }

static void mem_poll(void);

// mem_launch_on launches f on (x, y) on stream s and prints the jobs
// gp_mem_poll then hands the writer.
static void mem_launch_on(const char *what, gp_CUfunction f, uint64_t x, uint64_t y, uintptr_t s) {
  fprintf(mem_out, "%s\n", what);
  void *kp[2] = {&x, &y};
  gp_cuLaunchKernel_params p = {f, 1, 1, 1, 32, 1, 1, 0, (gp_CUstream)s, kp, NULL};
  launch(GP_CBID_cuLaunchKernel, &p, 0, NULL);
  mem_poll();
}

static void mem_launch(const char *what, gp_CUfunction f, uint64_t x, uint64_t y) {
  mem_launch_on(what, f, x, y, 0x7000a0);
}

static void mem_poll(void) {
  gp_memjob_view v;
  while (gp_mem_poll(&v)) {
    if (v.point == GP_POINT_COPY)
      fprintf(mem_out, "  job %llu of the copy of call %u after launch %llu, %u chunks%s:", (unsigned long long)v.job_seq,
              v.call, (unsigned long long)v.launch_seq, v.total_chunks, v.lost ? ", LOST" : "");
    else
      fprintf(mem_out, "  job %llu of launch %llu, %u chunks%s:", (unsigned long long)v.job_seq,
              (unsigned long long)v.launch_seq, v.total_chunks, v.lost ? ", LOST" : "");
    if (v.point == GP_POINT_DIGEST)
      fprintf(mem_out, " digest of step %u (%s), regions from %u of %u jobs:", v.step,
              v.digest_all ? "every allocation" : "the optimizer's", v.region_base, v.njobs);
    for (uint32_t r = 0; r < v.nregions; r++) {
      static const char *const how[] = {"hashed", "carried (proved)", "carried (learned)"};
      fprintf(mem_out, " [0x%llx %s", (unsigned long long)v.region_addr[r], how[v.carry[r] % 3]);
      if (v.prev_job[r]) fprintf(mem_out, ", before: job %llu", (unsigned long long)v.prev_job[r]);
      fprintf(mem_out, "]");
    }
    fprintf(mem_out, "\n");
    gp_mem_release();
  }
}

static int mem_setup(void) {
  gp_cu.memHostAlloc = fake_memHostAlloc;
  gp_cu.memHostGetDevicePointer = fake_memHostGetDevicePointer;
  gp_cu.memAlloc = fake_memAlloc;
  gp_cu.memsetD8 = fake_memsetD8;
  gp_cu.memsetD8Async = fake_memsetD8Async;
  gp_cu.moduleLoadData = fake_moduleLoadData;
  gp_cu.moduleGetFunction = fake_moduleGetFunction;
  gp_cu.threadExchangeStreamCaptureMode = fake_captureMode;
  gp_cu.streamIsCapturing = fake_isCapturing;
  gp_cu.deviceTotalMem = fake_totalMem;
  gp_cu.launchKernel = fake_launchKernel;
  gp_cu.ctxPushCurrent = fake_ctxPush;
  gp_cu.ctxPopCurrent = fake_ctxPop;
  gp_cu.streamCreate = fake_streamCreate;
  gp_cu.eventCreate = fake_eventCreate;
  gp_cu.eventRecord = fake_eventRecord;
  gp_cu.streamWaitEvent = fake_streamWaitEvent;
  gp_cu.eventSynchronize = fake_eventSynchronize;
  gp_cu.memGetAddressRange = (void *)fake_ok;
  gp_cu.getErrorName = (void *)fake_ok;
  gp_cupti_callback_name = fake_callbackName;
  fake_names[CB_MEMSET] = "cuMemsetD8_v2";
  fake_names[CB_MEMCPY2D] = "cuMemcpy2D_v2";
  fake_names[CB_DTOH] = "cuMemcpyDtoH_v2";
  fake_names[CB_EVENT] = "cuEventRecord";
  fake_names[CB_CTX_DESTROY] = "cuCtxDestroy_v2";
  fake_names[CB_HTOD] = "cuMemcpyHtoD_v2";
  fake_names[CB_HTOD_ASYNC] = "cuMemcpyHtoDAsync_v2";
  fake_names[CB_MEMSET_PTSZ] = "cuMemsetD32Async_ptsz";
  gp_proc.cfg.memory_mode = GP_MEM_HASH;
  gp_proc.cfg.write_sets = GP_WRITE_SETS_PROVED;
  gp_proc.cfg.defer_hashes = 1;
  gp_proc.cfg.memcap_ptx = "";
  gp_proc.cfg.results_bytes = 1 << 20;
  gp_proc.cfg.has_kernel_filter = 0;
  char err[256];
  if (!gp_mem_start(&gp_proc.cfg, err, sizeof err)) {
    fprintf(stderr, "hotpath: gp_mem_start: %s\n", err);
    return -1;
  }
  uint32_t cbids[16];
  gp_mem_write_cbids(cbids, 16);
  gp_mem_defer();
  gp_batch_max_age_ns = UINT64_MAX;  // the scenario's output must not depend on the machine's speed
  return 0;
}

// ring_pause stops the background drain and empties the ring, so that what the scenario
// does next is all the ring holds; ring_memory_records prints its allocation and lost-state
// records and lets the drain go on.
static void ring_pause(void) {
  atomic_store(&drain_paused, 1);
  struct timespec ts = {0, 10000000};  // a drain in progress finishes
  nanosleep(&ts, NULL);
  while (gp_ring_take(drain_buf, DRAIN_CAP) > 0) {
  }
}

static void ring_memory_records(void) {
  size_t n = gp_ring_take(drain_buf, DRAIN_CAP);
  for (size_t off = 0; off < n;) {
    const gp_rec_hdr *h = (const gp_rec_hdr *)(drain_buf + off);
    if (h->type == GP_REC_ALLOC) {
      const gp_alloc_rec *a = (const gp_alloc_rec *)h;
      fprintf(mem_out, "  allocation %llu [0x%llx %llu B] on device %u%s, after launch %llu\n", (unsigned long long)a->id,
              (unsigned long long)a->address, (unsigned long long)a->size, a->device,
              a->freed ? " freed" : a->cleared ? " cleared" : "", (unsigned long long)a->launch_seq);
    } else if (h->type == GP_REC_MEMLOST) {
      const gp_memlost_rec *l = (const gp_memlost_rec *)h;
      fprintf(mem_out, "  lost: point %u of call %u after launch %llu (%s):", l->point, l->call,
              (unsigned long long)l->launch_seq, l->reason);
      const gp_region_rec *r = (const gp_region_rec *)(l + 1);
      for (uint32_t i = 0; l->point == GP_POINT_COPY && i < l->nregions; i++)
        fprintf(mem_out, " [0x%llx %llu B, allocation %llu]", (unsigned long long)r[i].base,
                (unsigned long long)r[i].size, (unsigned long long)r[i].alloc_id);
      fprintf(mem_out, "\n");
    }
    off += h->size;
  }
  atomic_store(&drain_paused, 0);
}

// copy_states_scenario: under hash mode, a copy or memset into an allocation gets a copy
// state on the stream it ran on (the legacy stream for a synchronous call, the per-thread
// stream for a _ptsz call naming stream 0), after the last launch call; a copy into a
// capturing stream, or to memory no allocation holds, gets none; one into another device's
// memory a lost state naming it. A stream-ordered allocation is cleared and says so.
static void copy_states_scenario(void) {
  fprintf(mem_out, "-- copy states\n");
  gp_proc.cfg.defer_hashes = 0;
  gp_mem_defer();
  ring_pause();
  uint64_t x = mem_alloc(1 << 16), y = mem_alloc(2 << 16);
  mem_launch("ex_kernel(x, y)", F_EX, x, y);
  fprintf(mem_out, "cuMemcpyHtoD(x + 256, 64 B): x's copy state, on the legacy stream\n");
  uint64_t htod[3] = {x + 256, 0x1000, 64};
  driver_call(CB_HTOD, "cuMemcpyHtoD_v2", htod);
  mem_poll();
  fprintf(mem_out, "cuMemcpyHtoDAsync(y) on stream 0x7000a0: y's, on that stream\n");
  uint64_t htod_async[4] = {y, 0x1000, 64, 0x7000a0};
  driver_call(CB_HTOD_ASYNC, "cuMemcpyHtoDAsync_v2", htod_async);
  mem_poll();
  fprintf(mem_out, "cuMemsetD32Async_ptsz(x, 7) on stream 0: x's, on the per-thread stream\n");
  uint64_t set_ptsz[4] = {x, 7, 16, 0};
  driver_call(CB_MEMSET_PTSZ, "cuMemsetD32Async_ptsz", set_ptsz);
  mem_poll();
  fprintf(mem_out, "cuMemcpyHtoDAsync(y) on stream 0x7000a0 while it is captured: it ran nothing, no copy state\n");
  capturing_stream = (gp_CUstream)0x7000a0;
  driver_call(CB_HTOD_ASYNC, "cuMemcpyHtoDAsync_v2", htod_async);
  capturing_stream = NULL;
  mem_poll();
  fprintf(mem_out, "cuMemcpyHtoD to memory no allocation holds: no copy state\n");
  uint64_t nowhere[3] = {0x1000, 0x2000, 64};
  driver_call(CB_HTOD, "cuMemcpyHtoD_v2", nowhere);
  mem_poll();
  fprintf(mem_out, "an allocation z of device 1, then cuMemcpyHtoD(z) in a context of device 0: a lost copy state naming z\n");
  fake_device = 1;
  uint64_t z = mem_alloc(1 << 16);
  fake_device = 0;
  uint64_t htod_z[3] = {z, 0x1000, 64};
  driver_call(CB_HTOD, "cuMemcpyHtoD_v2", htod_z);
  mem_poll();
  fprintf(mem_out, "cuMemAllocAsync(w) on stream 0x7000a0: cleared, and its record says so\n");
  alloc_at(0x7e00f0000000ull, 4096);
  mem_launch("ex_kernel(y, x): x hashed again after the copies", F_EX, y, x);
  fprintf(mem_out, "the ring's allocation and lost-state records:\n");
  ring_memory_records();
}

HP_API int hp_memory_scenario(const char *path) {
  mem_out = fopen(path, "w");
  if (!mem_out || mem_setup() != 0) return -1;
  uint32_t cbids[16];
  size_t n = gp_mem_write_cbids(cbids, 16);
  fprintf(mem_out, "write callbacks:");
  for (size_t i = 0; i < n; i++) fprintf(mem_out, " %s", fake_names[cbids[i]]);
  fprintf(mem_out, "\n");

  gp_proc.cfg.defer_hashes = 0;  // first each job's kernel at once, as without --defer-hashes
  gp_mem_defer();
  uint64_t a = mem_alloc(1 << 20), b = mem_alloc(3 << 16);
  mem_launch("ex_kernel(a, b), first launch: nothing hashed before", F_EX, a, b);
  mem_launch("ex_kernel(a, b): a (word 0, proved read-only) carried from the job before", F_EX, a, b);
  uint64_t set[3] = {a + 4096, 0, 16};
  driver_call(CB_MEMSET, "cuMemsetD8_v2", set);
  mem_launch("after a memset into a: a hashed again", F_EX, a, b);
  uint64_t dtoh[3] = {0x1000, a, 16};
  driver_call(CB_DTOH, "cuMemcpyDtoH_v2", dtoh);
  mem_launch("after a copy out of a (no write): a carried", F_EX, a, b);
  driver_call(CB_MEMCPY2D, "cuMemcpy2D_v2", NULL);
  mem_launch("after a 2D copy (its target unknown): a hashed again", F_EX, a, b);
  gp_cuGraphLaunch_params pg = {(gp_CUgraphExec)0xe0e0, (gp_CUstream)0x7000a0};
  launch(GP_CBID_cuGraphLaunch, &pg, 0, NULL);
  mem_launch("after a graph launch: a hashed again", F_EX, a, b);
  // A kernel node added through the graph API: its runs are the graph launches', so its launch
  // record is skipped as a captured launch's is (counted), and no job is made for it.
  uint64_t skipped = atomic_load((_Atomic uint64_t *)&gp_counts.memory_skipped);
  gp_CUgraphNode node = (gp_CUgraphNode)0x9700;
  uint64_t na = a, nb = b;
  void *nkp[2] = {&na, &nb};
  gp_KERNEL_NODE_PARAMS nkn = {.func = F_EX, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
                               .blockDimY = 1, .blockDimZ = 1, .kernelParams = nkp};
  gp_cuGraphAddKernelNode_params pnode = {&node, (gp_CUgraph)0x42, NULL, 0, &nkn};
  launch(GP_CBID_cuGraphAddKernelNode_v2, &pnode, 0, NULL);
  fprintf(mem_out, "a kernel node of ex_kernel(a, b) added through the graph API: %llu skipped, no job\n",
          (unsigned long long)(atomic_load((_Atomic uint64_t *)&gp_counts.memory_skipped) - skipped));
  mem_launch("ro_kernel(a, b), neither written, both hashed before: no hash kernel at all", F_RO, a, b);
  mem_launch("ex_kernel(b, a): b carried, a hashed (word 1 may write)", F_EX, b, a);

  fprintf(mem_out, "-- deferred hash kernels (--defer-hashes)\n");
  gp_proc.cfg.defer_hashes = 1;
  gp_mem_defer();
  uint64_t c2 = mem_alloc(1 << 16), d2 = mem_alloc(1 << 16), e2 = mem_alloc(1 << 16);
  mem_launch("ex_kernel(c, d): its job waits", F_EX, c2, d2);
  mem_launch("ex_kernel(d, e): d only read (proved), so its job joins the batch", F_EX, d2, e2);
  fprintf(mem_out, "a copy to the host: the batch first\n");
  driver_call(CB_DTOH, "cuMemcpyDtoH_v2", dtoh);
  mem_poll();
  mem_launch("ex_kernel(c, e): waits", F_EX, c2, e2);
  mem_launch("ex_kernel(e, c): c was carried in the waiting job, not hashed: joins the batch", F_EX, e2, c2);
  mem_launch_on("ex_kernel(d, c) on another stream: the batch first, on its own stream", F_EX, d2, c2,
                0x7000b0);
  mem_launch_on("ex_kernel(c, d) on that stream: waits", F_EX, c2, d2, 0x7000b0);
  fprintf(mem_out, "cuMemFreeAsync(d): the batch first\n");
  uint64_t fr[2] = {d2, 0x7000b0};
  driver_call(GP_CBID_cuMemFreeAsync, "cuMemFreeAsync", fr);
  mem_poll();
  mem_launch_on("ex_kernel(c, e) on the second stream: waits", F_EX, c2, e2, 0x7000b0);
  fprintf(mem_out, "cuEventRecord on the second stream: the batch first\n");
  uint64_t ev[2] = {0xe7, 0x7000b0};
  driver_call(CB_EVENT, "cuEventRecord", ev);
  mem_poll();
  mem_launch_on("ex_kernel(c, d) on the second stream: d was freed, c carried: nothing to hash", F_EX, c2, d2, 0x7000b0);
  mem_launch_on("ex_kernel(c, e) on the second stream: waits", F_EX, c2, e2, 0x7000b0);
  fprintf(mem_out, "the second stream joins a capture (waiting on a captured event): the batch is lost, not captured\n");
  capturing_stream = (gp_CUstream)0x7000b0;
  driver_call(CB_DTOH, "cuMemcpyDtoH_v2", dtoh);
  capturing_stream = NULL;
  mem_poll();
  mem_launch_on("ex_kernel(c, e) on the second stream: the loss moved the epoch, so both hashed again; waits", F_EX,
                c2, e2, 0x7000b0);
  fprintf(mem_out, "-- hashes beside the program (the GPU finishes them only when the scenario says so)\n");
  gp_mem_flush_batch();
  gpu_catch_up();
  mem_poll();
  side_instant = 0;
  const uintptr_t A = 0x7000a0, B = 0x7000c0;
  uint64_t f3 = mem_alloc(1 << 16), g3 = mem_alloc(1 << 16), h3 = mem_alloc(1 << 16), k3 = mem_alloc(1 << 16);
  mem_launch_on("ex_kernel(f, g) on A: waits in the batch", F_EX, f3, g3, A);
  mem_launch_on("ex_kernel(h, k) on B: A's batch runs beside; B writes nothing in flight", F_EX, h3, k3, B);
  mem_launch_on("ro_kernel(f, g) on B: only reads f and g, in flight: no wait", F_RO, f3, g3, B);
  mem_launch_on("ex_kernel(g, f) on A: B's batch beside, then A waits: f is in flight", F_EX, g3, f3, A);
  mem_launch_on("ex_kernel(g, k) on A: k is in flight beside B, which A is not ordered after: no wait", F_EX, g3,
                k3, A);
  fprintf(mem_out, "cuEventRecord on A: A's batch beside, and A waits for it\n");
  uint64_t ev_a[2] = {0xe8, A};
  driver_call(CB_EVENT, "cuEventRecord", ev_a);
  mem_poll();
  fprintf(mem_out, "cuMemFreeAsync(k) on B: k is in flight and B has not waited: B waits\n");
  uint64_t fr_k[2] = {k3, B};
  driver_call(GP_CBID_cuMemFreeAsync, "cuMemFreeAsync", fr_k);
  fprintf(mem_out, "cuMemsetD8(h), naming no stream: h is in flight: the host waits\n");
  uint64_t set_h[3] = {h3, 0, 16};
  driver_call(CB_MEMSET, "cuMemsetD8_v2", set_h);
  fprintf(mem_out, "cuMemsetD8(f): f is in flight beside A: the host waits for A's side\n");
  uint64_t set_f[3] = {f3, 0, 16};
  driver_call(CB_MEMSET, "cuMemsetD8_v2", set_f);
  mem_poll();
  mem_launch_on("ex_kernel(g, f) on B: nothing in flight: no wait", F_EX, g3, f3, B);
  mem_launch_on("ex_kernel(g, f) on A: B's batch beside", F_EX, g3, f3, A);
  mem_launch_on("ex_kernel(g, f) on B: A's batch beside; f is in flight beside A and beside B (its launch before): "
                "B waits for its own side only",
                F_EX, g3, f3, B);
  mem_launch_on("ex_kernel(f, g) on A: B's batch beside", F_EX, f3, g3, A);
  fprintf(mem_out, "the GPU finishes the hashes beside\n");
  gpu_catch_up();
  mem_poll();
  // A host far ahead of a GPU-bound stream: hundreds of batches in flight at once.
  fprintf(mem_out, "1000 launches on A, each writing a fresh allocation, the GPU finishing none of their hashes:\n");
  gp_counters c0, c1;
  gp_read_counters(&c0);
  FILE *out = mem_out;
  mem_out = NULL;
  uint64_t first_out = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t x = mem_alloc(4096), y = mem_alloc(4096);
    if (!i) first_out = y;
    void *kp[2] = {&x, &y};
    gp_cuLaunchKernel_params lp = {F_EX, 1, 1, 1, 32, 1, 1, 0, (gp_CUstream)A, kp, NULL};
    launch(GP_CBID_cuLaunchKernel, &lp, 0, NULL);
  }
  gp_mem_flush_batch();
  mem_out = out;
  gp_read_counters(&c1);
  fprintf(mem_out, "  %llu hash kernels, %llu of them beside, A waited %llu times\n",
          (unsigned long long)(c1.memory_hash_kernels - c0.memory_hash_kernels),
          (unsigned long long)(c1.side_batches - c0.side_batches),
          (unsigned long long)(c1.side_stream_waits - c0.side_stream_waits));
  mem_launch_on("ex_kernel(f, first output) on A: the first of them is still in flight: A waits", F_EX, f3, first_out, A);
  gpu_catch_up();
  gp_memjob_view *jv = malloc(sizeof *jv);
  uint32_t polled = 0;
  while (jv && gp_mem_poll(jv)) polled++, gp_mem_release();
  free(jv);
  fprintf(mem_out, "the GPU finishes them: %u jobs\n", polled);
  mem_launch_on("ex_kernel(g, f) on B: all finished: no wait", F_EX, g3, f3, B);
  mem_launch_on("ex_kernel(f, g) on A: B's batch beside, unfinished", F_EX, f3, g3, A);
  fprintf(mem_out, "cuCtxDestroy: A's batch beside, the host waits for every side, and the sides are forgotten\n");
  uint64_t ctx_param = (uint64_t)(uintptr_t)CTX;
  driver_call(CB_CTX_DESTROY, "cuCtxDestroy_v2", &ctx_param);
  mem_poll();
  mem_launch_on("ex_kernel(g, f) on A: its batch will need a side made anew", F_EX, g3, f3, A);
  fprintf(mem_out, "exit\n");
  gp_mem_flush_batch();
  gpu_catch_up();
  mem_poll();
  fprintf(mem_out, "-- --defer-hashes=stream: batches run on the program's own stream, nothing beside\n");
  gp_proc.cfg.defer_hashes = GP_DEFER_STREAM;
  gp_mem_defer();
  uint64_t s4 = mem_alloc(1 << 16);
  mem_launch_on("ex_kernel(g, f) on A: its job waits", F_EX, g3, f3, A);
  mem_launch_on("ex_kernel(g, s) on A: g only read (proved): joins the batch", F_EX, g3, s4, A);
  fprintf(mem_out, "a copy to the host: the batch first, on A itself, with no event and no wait\n");
  driver_call(CB_DTOH, "cuMemcpyDtoH_v2", dtoh);
  mem_poll();
  mem_launch_on("ex_kernel(s, f) on A: waits", F_EX, s4, f3, A);
  mem_launch_on("ex_kernel(f, s) on A: s was carried in the waiting job, not hashed: joins the batch", F_EX, f3, s4, A);
  fprintf(mem_out, "exit: the batch, on A\n");
  gp_mem_flush_batch();
  mem_poll();
  copy_states_scenario();
  gp_counters c;
  gp_read_counters(&c);
  fprintf(mem_out, "counters: memory launches %llu, bytes hashed %llu, write epochs %llu, hash kernels %llu\n",
          (unsigned long long)c.memory_launches, (unsigned long long)c.bytes_hashed, (unsigned long long)c.write_epochs,
          (unsigned long long)c.memory_hash_kernels);
  fprintf(mem_out, "beside the program: %llu batches; waits by program streams %llu, by the host %llu\n",
          (unsigned long long)c.side_batches, (unsigned long long)c.side_stream_waits,
          (unsigned long long)c.side_host_waits);
  fclose(mem_out);
  return 0;
}

// The digest scenario: step digests and --hash-steps (steps.c, memdigest.c).
uint64_t fake_nccl_alloc(uint64_t (*alloc)(uint64_t), uint64_t n);  // libnccl_fake.so
static uint64_t mem_alloc_u64(uint64_t n) { return mem_alloc(n); }

static void digest_launches(const char *what, int n, uint64_t x, uint64_t y) {
  fprintf(mem_out, "%s\n", what);
  for (int i = 0; i < n; i++) {
    void *kp[2] = {&x, &y};
    gp_cuLaunchKernel_params p = {F_EX, 1, 1, 1, 32, 1, 1, 0, (gp_CUstream)0x7000a0, kp, NULL};
    launch(GP_CBID_cuLaunchKernel, &p, 0, NULL);
    mem_poll();
  }
}

HP_API int hp_digest_scenario(const char *path) {
  mem_out = fopen(path, "w");
  if (!mem_out || mem_setup() != 0) return -1;
  gp_proc.cfg.defer_hashes = 0;
  gp_mem_defer();
  gp_proc.cfg.memory_mode = GP_MEM_DIGEST;
  gp_proc.cfg.digests = 1;
  gp_proc.cfg.step_every = 3;
  uint64_t a = mem_alloc(1 << 20), b = mem_alloc(3 << 16), c = mem_alloc(1 << 16);
  uint64_t lib = fake_nccl_alloc(mem_alloc_u64, 1 << 21);
  fprintf(mem_out, "-- --memory digest --step-every 3: a (1 MiB), b (192 KiB), c (64 KiB); 2 MiB allocated by libnccl_fake.so\n");
  digest_launches("launches 1-3, step 0: no memory work", 3, a, b);
  digest_launches("launch 4 begins step 1: before it, the digest of step 0, of a, b and c (not the library's)", 1, a, b);
  uint64_t fr[1] = {b};
  driver_call(GP_CBID_cuMemFree_v2, "cuMemFree_v2", fr);
  digest_launches("b freed; launches 5-6", 2, a, c);
  digest_launches("launch 7 begins step 2: a and c", 1, a, c);
  gp_cuGraphLaunch_params pg = {(gp_CUgraphExec)0xe0e0, (gp_CUstream)0x7000a0};
  launch(GP_CBID_cuGraphLaunch, &pg, 0, NULL);
  mem_poll();
  digest_launches("a graph launch (8), then launch 9", 1, a, c);
  digest_launches("launch 10 begins step 3", 1, a, c);
  fprintf(mem_out, "cuMemAllocAsync(x, 4 KiB) on stream 0x7000a0: digest mode leaves it as the pool gave it\n");
  alloc_async(GP_CBID_cuMemAllocAsync, 0x7e8000000000ull, 4096, (gp_CUstream)0x7000a0);
  fprintf(mem_out, "-- --memory hash --hash-steps 4 (digests elsewhere)\n");
  gp_proc.cfg.memory_mode = GP_MEM_HASH;
  gp_proc.cfg.write_sets = GP_WRITE_SETS_ALL;
  fprintf(mem_out, "cuMemAllocAsync(y, 8 KiB) on stream 0x7000a0: zeroed on its stream\n");
  alloc_async(GP_CBID_cuMemAllocAsync, 0x7e8000001000ull, 8192, (gp_CUstream)0x7000a0);
  fprintf(mem_out, "cuMemAllocAsync_ptsz(z, 256 B) on stream 0: zeroed on the per-thread stream\n");
  alloc_async(GP_CBID_cuMemAllocAsync_ptsz, 0x7e8000003000ull, 256, NULL);
  fprintf(mem_out, "cuMemAllocAsync(w, 4 KiB) on a capturing stream: left alone (a memset would join the graph)\n");
  capturing_stream = (gp_CUstream)0x7000b0;
  alloc_async(GP_CBID_cuMemAllocAsync, 0x7e8000004000ull, 4096, (gp_CUstream)0x7000b0);
  capturing_stream = NULL;
  for (uint64_t x = 0x7e8000000000ull; x <= 0x7e8000004000ull; x += 0x1000) {
    uint64_t f[1] = {x};
    if (x != 0x7e8000002000ull) driver_call(GP_CBID_cuMemFree_v2, "cuMemFree_v2", f);
  }
  gp_proc.cfg.hash_steps = 1;
  gp_proc.cfg.hash_step_lo = gp_proc.cfg.hash_step_hi = 4;
  digest_launches("launches 11-12, step 3: not hashed", 2, a, c);
  digest_launches("launches 13-15, step 4: the digest of step 3, then each launch hashed", 3, a, c);
  digest_launches("launches 16-18, step 5: the digest of step 4; not hashed", 3, a, c);
  fprintf(mem_out, "-- --step-range '^step ': a step ends where a range it matches ends (push/pop, registered, start/end)\n");
  gp_proc.cfg.memory_mode = GP_MEM_DIGEST;
  gp_proc.cfg.hash_steps = 0;
  gp_proc.cfg.step_every = 0;
  gp_proc.cfg.step_range = 1;
  if (!nvtxhost_inject()) return -1;
  gp_nvtx_start();
  nvtxhost_push_a("step 0");
  digest_launches("launches 19-20 inside range 'step 0'", 2, a, c);
  nvtxhost_push_a("forward");
  digest_launches("launch 21 inside 'forward', inside 'step 0'", 1, a, c);
  nvtxhost_pop();
  digest_launches("'forward' ended (not a step): launch 22, no digest", 1, a, c);
  nvtxhost_pop();
  digest_launches("'step 0' ended: launch 23 begins step 1, the digest of step 0 before it", 1, a, c);
  uintptr_t s1 = nvtxhost_register_string(0, "step 1");
  gp_nvtxEventAttributes reg = {.version = 2, .size = sizeof reg, .messageType = GP_NVTX_MESSAGE_REGISTERED,
                                .message.registered = (gp_nvtxStringHandle)s1};
  nvtxhost_push_ex(&reg);
  digest_launches("launch 24 inside the registered string 'step 1'", 1, a, c);
  nvtxhost_pop();
  uint64_t s2 = nvtxhost_start_a("step 2");
  digest_launches("'step 1' ended: launch 25 begins step 2, the digest of step 1 before it; inside start/end range 'step 2'", 1, a, c);
  nvtxhost_end(s2);
  digest_launches("'step 2' ended: launch 26 begins step 3, the digest of step 2 before it", 1, a, c);
  fprintf(mem_out, "exit: the digest of step 3, the last, on the last launch's stream, named before launch 27\n");
  gp_step_final_digest();
  mem_poll();
  fprintf(mem_out, "cuCtxDestroy, then exit: no digest (the last launch's stream and memory are gone)\n");
  uint64_t ctx_param = (uint64_t)(uintptr_t)CTX;
  driver_call(CB_CTX_DESTROY, "cuCtxDestroy_v2", &ctx_param);
  gp_step_final_digest();
  mem_poll();
  gp_counters k;
  gp_read_counters(&k);
  fprintf(mem_out, "counters: digests %llu, skipped %llu, memory launches %llu, allocations %llu\n",
          (unsigned long long)k.digests, (unsigned long long)k.digests_skipped,
          (unsigned long long)k.memory_launches, (unsigned long long)k.allocations);
  (void)lib;
  fclose(mem_out);
  return 0;
}

// mem_drain_loop is the Go writer's part in hash mode: it takes finished jobs.
static void *mem_drain_loop(void *arg) {
  (void)arg;
  gp_memjob_view *v = malloc(sizeof *v);
  while (!atomic_load(&drain_stop)) {
    while (gp_mem_poll(v)) gp_mem_release();
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  free(v);
  return NULL;
}


static uint64_t bench_alloc(size_t n) {
  static uint64_t next = 0x7e0000000000ull;
  uint64_t d = next;
  next += n;
  alloc_at(d, n);
  return d;
}

static void bench_free(uint64_t d) {
  uint64_t p[2] = {d, 0};
  gp_CallbackData cb = {.callbackSite = GP_API_ENTER, .functionName = "cuMemFreeAsync", .functionParams = p,
                        .context = CTX, .contextUid = 1};
  gp_on_callback(NULL, GP_CB_DOMAIN_DRIVER_API, GP_CBID_cuMemFreeAsync, &cb);
}

// membench_launch launches ex_kernel on (x, y): its own function so that
// callgrind can count it alone (run.sh --memory-bench --callgrind).
__attribute__((noinline)) static void membench_launch(uint64_t x, uint64_t y) {
  void *kp[2] = {&x, &y};
  gp_cuLaunchKernel_params p = {F_EX, 1, 1, 1, 32, 1, 1, 0, (gp_CUstream)0x7000a0, kp, NULL};
  launch(GP_CBID_cuLaunchKernel, &p, 0, NULL);
}

// membench_launch_wide launches wide_kernel as the compiled GPT-2 step's
// launches look on the GPU (2026-11-27: 47 non-zero parameter words, 8
// regions per launch): 24 words pointing into 6 of the allocations in p,
// each reached 4 times (a pointer and TMA descriptors built on it), 22
// small integers (sizes, strides, packed pairs of them), the rest 0.
__attribute__((noinline)) static void membench_launch_wide(const uint64_t *p) {
  uint64_t w[WIDE_WORDS] = {0};
  for (int k = 0; k < 24; k++) w[(k * 37) % 60] = p[k % 6] + 256 * (uint64_t)k;
  for (int k = 0; k < 22; k++) w[60 + k % 20] += (uint64_t)(k + 1) << (k % 2 ? 32 : 4);
  void *kp[1] = {w};
  gp_cuLaunchKernel_params lp = {F_WIDE, 1, 1, 1, 32, 1, 1, 0, (gp_CUstream)0x7000a0, kp, NULL};
  launch(GP_CBID_cuLaunchKernel, &lp, 0, NULL);
}

// hp_memory_bench: hash mode's host cost with live allocations, as cudaMallocAsync gives
// PyTorch (a tensor, an allocation): each round frees one allocation, allocates one and
// launches ex_kernel on two of them. Prints ns per round, per launch and per alloc+free.
// evict_bytes > 0 writes that much other memory before each round, as the framework does
// between launches, so the agent's data has left the caches. wide: the
// launches are wide_kernel's, on six allocations.
HP_API int hp_memory_bench(long live, long rounds, long evict_bytes, int wide) {
  if (mem_setup() != 0) return -1;
  uint64_t *a = malloc((size_t)live * sizeof *a);
  volatile uint8_t *evict = evict_bytes > 0 ? calloc(1, (size_t)evict_bytes) : NULL;
  for (long i = 0; i < live; i++) a[i] = bench_alloc(1 << 20);
  pthread_t t;
  pthread_create(&t, NULL, mem_drain_loop, NULL);
  uint64_t launch_ns = 0, alloc_ns = 0, total = 0;
  for (long k = 0; k < rounds; k++) {
    for (long j = 0; j < evict_bytes; j += 64) evict[j]++;
    long i = (k * 7919) % live, j = (k * 104729 + 1) % live;
    uint64_t t1 = now_ns();
    bench_free(a[i]);
    a[i] = bench_alloc(1 << 20);
    uint64_t t2 = now_ns();
    if (wide) {
      uint64_t six[6] = {a[i], a[j], a[(i + 17) % live], a[(j + 29) % live], a[(i + j) % live], a[(i * 3 + 1) % live]};
      membench_launch_wide(six);
    } else {
      membench_launch(a[i], a[j]);
    }
    uint64_t t3 = now_ns();
    launch_ns += t3 - t2;
    alloc_ns += t2 - t1;
    total += t3 - t1;
  }
  atomic_store(&drain_stop, 1);
  pthread_join(t, NULL);
  printf("live %ld%s%s: %.0f ns per round, launch %.0f ns, alloc+free %.0f ns\n", live, evict ? " cold" : "",
         wide ? ", wide launches" : "",
         (double)total / rounds, (double)launch_ns / rounds, (double)alloc_ns / rounds);
  return 0;
}

// hp_alloc_check checks the allocation table against a plain list of live
// intervals over random allocations (half at addresses freed before, as
// cudaMallocAsync hands them out again; some over live ones, whose frees
// were never seen: they give way), frees (some of addresses never
// allocated) and lookups: after every step, 8 parameter words, most inside live
// allocations, must each find exactly the allocation holding it, as a hash
// mode launch's regions. Prints "ok" or the first difference.
typedef struct {
  uint64_t base, end;
} interval;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {  // xorshift64*
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

HP_API int hp_alloc_check(long steps) {
  if (mem_setup() != 0) return -1;
  enum { WINDOW = 1 << 26, MAX_LIVE = 4096 };
  const uint64_t lo = 0x7d0000000000ull;
  interval *live = calloc(MAX_LIVE, sizeof *live);
  gp_mem_launch *m = malloc(sizeof *m);
  uint64_t freed[64];
  long n = 0, nfreed = 0, lookups = 0, found = 0, most = 0;
  for (long step = 0; step < steps; step++) {
    uint64_t op = rng() % 100;
    if (op < 60 && n < MAX_LIVE) {  // allocate, over whatever was there
      uint64_t base = lo + (rng() % (WINDOW / 256)) * 256, size = 256 * (1 + rng() % 64);
      if (op < 30 && nfreed) base = freed[rng() % nfreed];  // a freed address handed out again
      if (op < 3 && n) base = live[rng() % n].base;        // over a live one whose free went unseen
      long k = 0;
      for (long i = 0; i < n; i++)
        if (live[i].end <= base || live[i].base >= base + size) live[k++] = live[i];
      n = k;
      live[n++] = (interval){base, base + size};
      alloc_at(base, size);
    } else if (op < 95 && n) {  // free a live one
      long i = (long)(rng() % (uint64_t)n);
      bench_free(live[i].base);
      freed[nfreed < 64 ? nfreed++ : (long)(rng() % 64)] = live[i].base;
      live[i] = live[--n];
    } else {  // free what was never allocated
      bench_free(lo + WINDOW + 256 * (rng() % 1024));
    }
    uint64_t words[8];
    for (int w = 0; w < 8; w++) {
      if (n && rng() % 4) {
        interval v = live[rng() % n];
        words[w] = v.base + rng() % (v.end - v.base);
      } else {
        words[w] = lo + rng() % (WINDOW + (1 << 20));
      }
    }
    gp_mem_launch_enter(m, (const uint8_t *)words, sizeof words, CTX, (gp_CUstream)0x7000a0, 0, (uint64_t)step + 1,
                        0, 1, NULL, 0, 0);
    for (int w = 0; w < 8; w++, lookups++) {
      const interval *want = NULL;
      for (long i = 0; i < n && !want; i++)
        if (words[w] >= live[i].base && words[w] < live[i].end) want = &live[i];
      const gp_region_rec *got = NULL;
      for (uint32_t p = 0; p < m->npointers && !got; p++)
        if (m->pointers[p].offset == 8u * (uint32_t)w) got = &m->regions[m->pointers[p].region];
      int same = want ? got && got->base == want->base && got->size == want->end - want->base : !got;
      if (!same) {
        printf("step %ld, word 0x%llx: table says [0x%llx, +%llu), the live list [0x%llx, +%llu)\n", step,
               (unsigned long long)words[w], got ? (unsigned long long)got->base : 0ull,
               got ? (unsigned long long)got->size : 0ull, want ? (unsigned long long)want->base : 0ull,
               want ? (unsigned long long)(want->end - want->base) : 0ull);
        return 1;
      }
      found += want != NULL;
    }
    if (n > most) most = n;
  }
  printf("ok: %ld steps, %ld lookups, %ld inside a live allocation, up to %ld live\n", steps, lookups, found, most);
  return 0;
}

// ---- GPU timing begins after the first launch ----

static int enables, disables, copy_enables;  // kernel kinds; copies, memsets and waits (all three)
static gp_CUptiResult count_enable(int kind) {
  if (kind == GP_ACTIVITY_KIND_KERNEL || kind == GP_ACTIVITY_KIND_CONCURRENT_KERNEL)
    enables++;
  else
    copy_enables++;
  return 0;
}
static gp_CUptiResult count_disable(int kind) { return (void)kind, disables++, 0; }
static gp_CUptiResult fake_register(void *requested, void *completed) { return (void)requested, (void)completed, 0; }
static gp_CUptiResult fake_version(uint32_t *v) { return *v = 130001, 0; }

// hp_timing_check: kernel activity is turned on as the first launch begins (not at start: a
// context made while it is on pays for it on every kernel), sampled timing's windows before it only note what they want, and the hang watch's timing
// starts at once; timed by steps, windows until a first step ends, then whole steps, turned as
// each begins. One variant per process: the agent's state is per process.
static int hp_timing_check(const char *variant) {
  gp_cupti.activityEnable = count_enable;
  gp_cupti.activityDisable = count_disable;
  gp_cupti.activityRegisterCallbacks = (void *)fake_register;
  gp_cupti.getVersion = fake_version;
  launch_args a;
  gp_cuLaunchKernel_params p = eager_launch(&a);
  const char *fail = NULL;
  if (strcmp(variant, "deferred") == 0) {
    gp_activity_start(GP_TIMING_CONCURRENT, 0);
    if (enables || !gp_timing_paused) fail = "kernel activity on before any launch";
    launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
    if (!fail && (enables != 1 || gp_timing_paused)) fail = "kernel activity not on for the first launch";
    launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
    if (!fail && enables != 1) fail = "kernel activity turned on twice";
    if (!fail && copy_enables != 3) fail = "copies and waits not timed from the first launch";
  } else if (strcmp(variant, "sampled") == 0) {
    gp_activity_start(GP_TIMING_SAMPLED, 0);
    gp_activity_sample(0);  // a window closes before the first launch
    if (enables || disables) fail = "the sampler called CUPTI before the first launch";
    launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
    if (!fail && (enables || !gp_timing_paused)) fail = "turned on after the first launch outside a window";
    if (!fail && copy_enables != 3) fail = "copies and waits not timed outside a window";
    gp_activity_sample(1);
    if (!fail && (enables != 1 || gp_timing_paused)) fail = "the next window did not turn it on";
  } else if (strcmp(variant, "steps") == 0) {
    // Steps of two launches; steps 0-1 and every 4th timed (--gpu-timing-steps 2/4).
    gp_proc.cfg.gpu_timing = GP_TIMING_STEPS;
    gp_proc.cfg.step_every = 2;
    gp_proc.cfg.timing_first_steps = 2, gp_proc.cfg.timing_step_every = 4;
    gp_activity_start(GP_TIMING_STEPS, 0);
    launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
    if (enables != 1 || gp_timing_paused) fail = "step 0's first launch not timed";
    // Before a first step ends, windows rule: one closes in step 0.
    if (!fail && (gp_activity_sample(0) != 0 || !gp_timing_paused)) fail = "a window before the first step did not turn it off";
    launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
    for (int step = 1; step < 12 && !fail; step++)
      for (int i = 0; i < 2 && !fail; i++) {
        launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
        int timed = step < 2 || step % 4 == 0;
        if (gp_timing_paused == timed) fail = timed ? "a launch of a timed step untimed" : "a launch of an untimed step timed";
        if (!fail && step == 2 && gp_activity_sample(1) != -1) fail = "a window turned timing on once steps rule";
      }
    // On at 0 and 1 (after the window), 4 and 8; off in the window, at 2, 5 and 9.
    if (!fail && (enables != 4 || disables != 4)) fail = "kernel activity turned other than as steps changed";
  } else if (strcmp(variant, "from_start") == 0) {
    gp_activity_start(GP_TIMING_CONCURRENT, 1);
    if (enables != 1 || gp_timing_paused) fail = "the hang watch's timing did not start at once";
    if (!fail && copy_enables != 3) fail = "copies and waits not timed from the start";
    launch(GP_CBID_cuLaunchKernel, &p, 0, SYM_MAIN);
    if (!fail && enables != 1) fail = "turned on again at the first launch";
  } else {
    fail = "unknown variant";
  }
  if (fail)
    printf("FAIL timing_%s: %s (enables %d, disables %d, paused %d)\n", variant, fail, enables, disables, gp_timing_paused);
  else
    printf("ok timing_%s\n", variant);
  return 0;
}

// ---- the program's own CUPTI client ----

// hp_client_check: a profiler in the program that links CUPTI (libprofclient.so, importing
// cupti* from the stand-in libcupti.so.13 in dir, which the agent uses as its CUPTI and which
// takes one subscriber) subscribes beside the agent, gets the callback it enabled and the
// activity records of its kinds (not the agent's own kernels, not the kinds only the agent
// asked for), keeps a kind on that the agent turns off, and leaves the agent's kinds and
// callbacks on when it stops.
static int hp_client_check(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/libcupti.so.13", dir);
  void *cupti = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  snprintf(path, sizeof path, "%s/libprofclient.so", dir);
  void *prof = cupti ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
  if (!prof) {
    printf("FAIL client_setup: %s\n", dlerror());
    return 1;
  }
  int (*enabled)[4096] = dlsym(cupti, "fake_enabled");
  int *kind_on = dlsym(cupti, "fake_kind_on");
  *(size_t *)dlsym(cupti, "fake_name_offset") = offsetof(gp_ActivityKernel10, name);
  *(size_t *)dlsym(cupti, "fake_start_offset") = *(size_t *)dlsym(prof, "prof_start_offset") = offsetof(gp_ActivityKernel10, start);
  uint64_t *kernel_start = dlsym(prof, "prof_kernel_start");
  int (*start)(void) = dlsym(prof, "prof_start"), (*flush)(void) = dlsym(prof, "prof_flush"), (*stop)(void) = dlsym(prof, "prof_stop");
  int *callbacks = dlsym(prof, "prof_callbacks"), *records = dlsym(prof, "prof_records");
  if (sizeof(gp_ActivityKernel10) > 512 || sizeof(gp_ActivityMemcpy6) > 512 || sizeof(gp_ActivitySynchronization2) > 512) {
    printf("FAIL client_setup: the stand-in's 512-byte records hold no CUpti_ActivityKernel10\n");
    return 1;
  }
  // What gp_start does with CUPTI: subscribe, enable the launch callback, time kernels and copies.
  void **slots = (void **)&gp_cupti;
  static const char *const names[] = {"cuptiSubscribe", "cuptiEnableCallback", "cuptiActivityRegisterCallbacks",
                                      "cuptiActivityEnable", "cuptiActivityDisable", "cuptiActivityGetNextRecord",
                                      "cuptiActivityFlushAll"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) slots[i] = dlsym(cupti, names[i]);
  gp_cupti.getVersion = dlsym(cupti, "cuptiGetVersion");
  gp_cupti.getTimestamp = dlsym(cupti, "cuptiGetTimestamp");
  gp_cupti.activityGetNumDroppedRecords = NULL;
  gp_CUpti_SubscriberHandle sub = NULL;
  if (gp_cupti.subscribe(&sub, (gp_CallbackFunc)gp_on_callback, NULL) != 0 ||
      gp_cupti.enableCallback(1, sub, GP_CB_DOMAIN_DRIVER_API, GP_CBID_cuLaunchKernel) != 0) {
    printf("FAIL client_setup: the agent's subscription\n");
    return 1;
  }
  gp_client_own_callback(GP_CB_DOMAIN_DRIVER_API, GP_CBID_cuLaunchKernel);
  gp_activity_start(GP_TIMING_CONCURRENT, 1);
  gp_client_init(cupti, sub);

  const char *fail = NULL;
#define CHECK(name, cond, why)                   \
  do {                                           \
    if (!fail && !(cond)) fail = why;            \
    printf(fail ? "FAIL %s: %s\n" : "ok %s\n", name, fail); \
    if (fail) return 1;                          \
  } while (0)
  int r = start();
  CHECK("client_subscribes", r == 0, r == 39 ? "its cuptiSubscribe reached CUPTI, which refused a second subscriber" : "prof_start failed");
  CHECK("client_callback_enabled", enabled[2][211] == 1, "the client's callback is not on in the agent's subscription");
  gp_CallbackData cb = {.callbackSite = GP_API_ENTER};
  gp_on_callback(NULL, 2, 211, &cb);
  CHECK("client_callback_passed", *callbacks == 1, "the client's callback did not reach it");
  gp_client_kind(GP_ACTIVITY_KIND_CONCURRENT_KERNEL, 0);  // the agent's timing turns off between steps
  CHECK("client_kind_kept", kind_on[10] == 1, "the agent turned off kernel activity the client still uses");
  r = flush();
  CHECK("client_buffer_held", r == 0, "the client held no buffer of its own, so it never flushes (as Kineto does not)");
  CHECK("client_records", records[10] == 1 && records[5] == 1 && records[1] == 0 && records[38] == 0,
        "the client's buffers do not hold one program kernel and one runtime record, and nothing of the agent's kinds");
  // The agent keeps what it reads: the program's kernel (timed while the client times it), the
  // copy, the memset and the wait.
  CHECK("client_clock", *kernel_start == 3 * 5000000 + 1000 && !*(int *)dlsym(cupti, "fake_clock_registered"),
        "the kernel's start is not in the client's clock, or CUPTI's clock changed for the agent too");
  CHECK("agent_records", gp_counts.activities == 1 && gp_counts.copies == 2 && gp_counts.syncs == 1,
        "the agent did not keep its kernel, copy, memset and sync records");
  stop();
  CHECK("client_records_at_stop", records[10] == 2, "the kernel records CUPTI held as the client turned kernels off did not reach it");
  CHECK("client_stopped", enabled[2][211] == 0 && kind_on[10] == 0 && kind_on[5] == 0 && kind_on[1] == 1 && kind_on[38] == 1 &&
                              enabled[GP_CB_DOMAIN_DRIVER_API][GP_CBID_cuLaunchKernel] == 1,
        "after the client stopped, its kinds or callback stayed on, or the agent's went off");
  r = start();
  int again = start();
  CHECK("client_again", r == 0 && again == 39, "a second subscription after the first ended, or two at once, went wrong");
  // A client that gives no buffer loses the records of its kinds: counted, not silent.
  *(int *)dlsym(prof, "prof_no_buffer") = 1;
  int (*flush_anyway)(void) = dlsym(prof, "prof_flush_anyway");
  flush_anyway();  // fills the buffer it had open, and asks for the next in vain
  flush_anyway();
  CHECK("client_drops_counted", gp_counts.cupti_client_records_dropped > 0, "records the client had no buffer for were not counted");
  stop();
#undef CHECK
  return 0;
}

#include "snapshot.c"

#ifdef HP_MAIN
// C-only runs (no Python anywhere): callstack off and native.
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int mode = argc > 1 ? atoi(argv[1]) : 0;
  long n = argc > 2 ? atol(argv[2]) : 2000;
  int batches = argc > 3 ? atoi(argv[3]) : 300;
  hp_setup(mode);
  if (argc > 5 && strcmp(argv[5], "memory") == 0) return hp_memory_scenario(argv[4]);
  if (argc > 5 && strcmp(argv[5], "digest") == 0) return hp_digest_scenario(argv[4]);
  if (argc > 5 && strcmp(argv[5], "snapshot") == 0) return hp_snapshot_scenario(argv[4]);
  if (argc > 5 && strcmp(argv[4], "timing") == 0) return hp_timing_check(argv[5]);
  if (argc > 5 && strcmp(argv[4], "client") == 0) return hp_client_check(argv[5]);
  if (argc > 4 && strcmp(argv[4], "alloccheck") == 0) return hp_alloc_check(n);
  if (argc > 4 && strncmp(argv[4], "membench", 8) == 0)
    return hp_memory_bench(n, batches, argc > 5 ? atol(argv[5]) : 0, strcmp(argv[4], "membench-wide") == 0);
  if (argc > 4) return hp_scenario(argv[4]);
  double *out = calloc((size_t)batches, sizeof *out);
  hp_bench(n, 20, out);  // warm up
  hp_bench(n, batches, out);
  qsort(out, (size_t)batches, sizeof *out, cmp_double);
  printf("%.1f\n", out[batches / 2]);
  return 0;
}
#endif
