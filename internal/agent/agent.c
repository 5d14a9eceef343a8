// The agent's hot path: CUPTI callbacks that describe each launch and push
// fixed-layout records into a bounded ring that the Go writer drains.
// Nothing here calls into Go on the common path, allocates per launch, or
// synchronizes with the GPU. See DESIGN.md, invariants 1-3.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include "_cgo_export.h"
#include "agent.h"
#include "autograd.h"
#include "cabi.h"
#include "memcap.h"
#include "pystack.h"
#include "unwind.h"

// ---- CUPTI and driver entry points, resolved with dlsym ----

static struct {
  gp_CUptiResult (*subscribe)(gp_CUpti_SubscriberHandle *, gp_CallbackFunc, void *);
  gp_CUptiResult (*enableCallback)(uint32_t, gp_CUpti_SubscriberHandle, int, uint32_t);
  gp_CUptiResult (*activityRegisterCallbacks)(gp_BufferRequestFunc, gp_BufferCompletedFunc);
  gp_CUptiResult (*activityEnable)(int);
  gp_CUptiResult (*activityGetNextRecord)(uint8_t *, size_t, gp_Activity **);
  gp_CUptiResult (*activityFlushAll)(uint32_t);
  gp_CUptiResult (*activityGetNumDroppedRecords)(gp_CUcontext, uint32_t, size_t *);
  gp_CUptiResult (*getTimestamp)(uint64_t *);
  gp_CUptiResult (*getStreamIdEx)(gp_CUcontext, gp_CUstream, uint8_t, uint32_t *);
  gp_CUptiResult (*getGraphNodeId)(gp_CUgraphNode, uint64_t *);
  gp_CUptiResult (*getGraphId)(gp_CUgraph, uint32_t *);
  gp_CUptiResult (*getVersion)(uint32_t *);
  gp_CUptiResult (*getResultString)(gp_CUptiResult, const char **);
} cupti;

static struct {
  gp_CUresult (*funcGetParamInfo)(gp_CUfunction, size_t, size_t *, size_t *);
  gp_CUresult (*kernelGetParamInfo)(void *, size_t, size_t *, size_t *);
  gp_CUresult (*funcGetName)(const char **, gp_CUfunction);
  gp_CUresult (*ctxGetDevice)(gp_CUdevice *);
  gp_CUresult (*deviceGetName)(char *, int, gp_CUdevice);
  gp_CUresult (*deviceGetUuid)(gp_CUuuid *, gp_CUdevice);
  gp_CUresult (*deviceGetAttribute)(int *, int, gp_CUdevice);
  gp_CUresult (*deviceTotalMem)(size_t *, gp_CUdevice);
  gp_CUresult (*driverGetVersion)(int *);
} cu;

static gp_CUpti_SubscriberHandle subscriber;
static uint32_t cupti_version;
static int driver_version;
gp_config config;
static int started;

// ---- fork guard: no work, and never Go, in a forked child ----

static pid_t agent_pid;
static volatile int forked_child;

static void on_fork_child(void) { forked_child = 1; }

int gp_is_forked_child(void) { return forked_child; }

// ---- counters ----

gp_counters counters;

void gp_read_counters(gp_counters *out) {
  uint64_t *src = (uint64_t *)&counters, *dst = (uint64_t *)out;
  for (size_t i = 0; i < sizeof(counters) / sizeof(uint64_t); i++)
    dst[i] = atomic_load_explicit((_Atomic uint64_t *)&src[i], memory_order_relaxed);
}

// ---- the ring: bounded, many writers, one reader (the Go writer) ----
//
// A record is built on the writer's side first, so the lock is held only for
// a memcpy; the reader copies out without it. When the ring is full the record
// is dropped and counted (invariant 3): the program never waits.
//
// The lock is a spinlock, not a mutex: every critical section is a bounded
// copy (a few hundred bytes typically), so an uncontended push costs one
// atomic exchange and one store instead of two calls into libc, and the whole
// ring state shares one cache line. A waiter that spins too long yields, so a
// holder that was preempted gets the CPU back.

static struct {
  _Atomic int lock;
  uint8_t *buf;
  uint64_t cap;   // power of two, multiple of 8
  uint64_t head;  // total bytes written; under lock
  uint64_t tail;  // total bytes taken; under lock
} ring __attribute__((aligned(64)));

static pthread_mutex_t ring_take_mu = PTHREAD_MUTEX_INITIALIZER;  // one reader at a time

static inline void ring_lock(void) {
  for (unsigned spins = 0; atomic_exchange_explicit(&ring.lock, 1, memory_order_acquire);) {
    while (atomic_load_explicit(&ring.lock, memory_order_relaxed)) {
      if (++spins < 128)  // a push holds the lock for ~50 ns; PAUSE is 10-140 cycles
        _mm_pause();
      else
        sched_yield();
    }
  }
}

static inline void ring_unlock(void) { atomic_store_explicit(&ring.lock, 0, memory_order_release); }

static inline uint32_t pad8(uint32_t n) { return (n + 7u) & ~7u; }

static void ring_copy_in(uint64_t pos, const void *src, uint64_t n) {
  uint64_t off = pos & (ring.cap - 1), first = ring.cap - off;
  if (first >= n) {
    memcpy(ring.buf + off, src, n);
  } else {
    memcpy(ring.buf + off, src, first);
    memcpy(ring.buf, (const uint8_t *)src + first, n - first);
  }
}

static void ring_copy_out(uint64_t pos, void *dst, uint64_t n) {
  uint64_t off = pos & (ring.cap - 1), first = ring.cap - off;
  if (first >= n) {
    memcpy(dst, ring.buf + off, n);
  } else {
    memcpy(dst, ring.buf + off, first);
    memcpy((uint8_t *)dst + first, ring.buf, n - first);
  }
}

// ring_push_counted publishes one record whose header size is already set,
// and when it fits adds 1 to *pushed (if not NULL) under the lock: a counter
// changed only there needs no atomic read-modify-write (a locked instruction)
// of its own. Readers still load it atomically.
static int ring_push_counted(const void *rec, uint64_t *pushed) {
  const gp_rec_hdr *h = rec;
  int ok = 0;
  ring_lock();
  if (ring.cap - (ring.head - ring.tail) >= h->size) {
    ring_copy_in(ring.head, rec, h->size);
    ring.head += h->size;
    ok = 1;
    if (pushed) {
      _Atomic uint64_t *c = (_Atomic uint64_t *)pushed;
      atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
    }
  }
  ring_unlock();
  if (!ok) {
    COUNT(records_dropped, 1);
    COUNT(ring_bytes_dropped, h->size);
  }
  return ok;
}

int ring_push(const void *rec) { return ring_push_counted(rec, NULL); }

// gp_ring_take copies whole records out. Bytes in [tail, head) are complete
// (written under the lock before head moved past them) and stay put until
// tail moves (a writer only reuses space below tail + cap), so the copy needs
// no lock: program threads never wait for it.
size_t gp_ring_take(uint8_t *dst, size_t cap) {
  pthread_mutex_lock(&ring_take_mu);
  ring_lock();
  uint64_t tail = ring.tail, head = ring.head;
  ring_unlock();
  size_t n = 0;
  while (tail + n < head) {
    gp_rec_hdr h;
    ring_copy_out(tail + n, &h, sizeof h);
    if (h.size < sizeof h) break;  // never written so; never loop on it
    if (n + h.size > cap) break;
    ring_copy_out(tail + n, dst + n, h.size);
    n += h.size;
  }
  if (n) {
    ring_lock();
    ring.tail += n;
    ring_unlock();
  }
  pthread_mutex_unlock(&ring_take_mu);
  return n;
}

// TSC frequency, measured against CLOCK_MONOTONIC between gp_start and now.
static uint64_t tsc_start, ns_start;

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

double gp_tsc_ns_per_cycle(void) {
  uint64_t cycles = __rdtsc() - tsc_start, ns = monotonic_ns() - ns_start;
  return cycles ? (double)ns / (double)cycles : 0;
}

// ---- per-thread state ----

// Initial-exec TLS: an offset from %fs instead of a __tls_get_addr call per
// access (about ten per launch with -fPIC's default model). A Go c-shared
// library is marked STATIC_TLS anyway (the Go runtime's own TLS is
// initial-exec), so this asks the loader for nothing it does not already do.
#define GP_TLS __thread __attribute__((tls_model("initial-exec")))

static GP_TLS struct {
  pid_t tid;
  int in_launch;           // between ENTER and EXIT of a recorded launch
  uint64_t seq, host_ns;   // of that launch
  uint64_t graph_node_id;  // node built by that launch during stream capture
  gp_CUstream stream;      // the last stream id looked up, valid for stream_epoch
  gp_CUcontext stream_ctx;
  uint32_t stream_id, stream_epoch;
  int stream_ptsz;
  uint32_t callbacks;        // on this thread, for sampling the agent's own time
  int sample_launch;         // the launch in flight is sampled
  const void *launch_func;  // func_entry of the launch in flight
  int in_agent;             // inside the agent's own CUDA calls: ignore their callbacks
  uint32_t params_len;      // memory capture: parameters already copied at ENTER
} tls;

int gp_in_agent_call(int enter) { return tls.in_agent = enter; }

// Large per-thread buffers live on the heap: the library's TLS block must
// stay tiny, because a Go c-shared library is marked static-TLS and the
// loader fits its whole TLS segment into a small reserve at dlopen.
typedef struct {
  struct {
    gp_launch_rec r;
    // CUDA 12.1+ allows up to 32764 bytes of parameters; regions follow them.
    uint8_t tail[32768 + GP_MAX_REGIONS * sizeof(gp_region_rec) + GP_MAX_POINTERS * sizeof(gp_pointer_rec)];
  } launch;
  struct stack_builder *stack;
  gp_mem_launch mem;
} thread_scratch;

static GP_TLS thread_scratch *tls_scratch;
static pthread_key_t scratch_key;

static void free_scratch(void *p) {
  thread_scratch *s = p;
  free(s->stack);
  free(s);
}

static thread_scratch *scratch(void) {
  if (!tls_scratch) {
    tls_scratch = calloc(1, sizeof *tls_scratch);
    if (tls_scratch) pthread_setspecific(scratch_key, tls_scratch);
  }
  return tls_scratch;
}

static inline pid_t thread_id(void) {
  if (!tls.tid) tls.tid = (pid_t)syscall(SYS_gettid);
  return tls.tid;
}

uint64_t gp_timestamp(void) {
  uint64_t t = 0;
  if (cupti.getTimestamp) cupti.getTimestamp(&t);
  return t;
}

void gp_log(int level, const char *msg) {
  struct {
    gp_log_rec r;
    char text[1024];
  } rec;
  size_t n = strnlen(msg, sizeof rec.text);
  rec.r.h.type = GP_REC_LOG;
  rec.r.h.size = pad8(sizeof rec.r + n);
  rec.r.host_ns = gp_timestamp();
  rec.r.level = level;
  rec.r.len = n;
  memcpy(rec.text, msg, n);
  ring_push(&rec);
}

void logf_(int level, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  gp_log(level, buf);
}

// ---- kernels: one description per CUfunction, found without locks ----

enum { MAX_PARAMS = 1024, FUNC_TABLE = 1 << 14 };

typedef struct {
  _Atomic uint64_t key;  // CUfunction handle; published last
  uint64_t id;
  uint32_t nparams, param_bytes;
  uint32_t *layout;  // nparams × (offset, size)
  int selected;
  int snapshot;  // matches --snapshot-kernels
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
    if (atomic_load_explicit(&c->key, memory_order_relaxed) == 0) {
      slot = c;
      break;
    }
  }
  static uint32_t layout[2 * MAX_PARAMS];  // guarded by funcs_mu
  uint32_t nparams = 0, bytes = 0;
  for (; nparams < MAX_PARAMS; nparams++) {
    size_t off = 0, size = 0;
    gp_CUresult r = cu.funcGetParamInfo ? cu.funcGetParamInfo(f, nparams, &off, &size) : 1;
    if (r != 0 && cu.kernelGetParamInfo) r = cu.kernelGetParamInfo((void *)f, nparams, &off, &size);
    if (r != 0) break;
    layout[2 * nparams] = off;
    layout[2 * nparams + 1] = size;
    if (off + size > bytes) bytes = off + size;
  }
  const char *name = symbol;
  if ((!name || !*name) && cu.funcGetName) cu.funcGetName(&name, f);
  if (!name) name = "";
  int selected = 1;
  if (config.has_kernel_filter) selected = gpurrKernelSelected((char *)name);
  int snapshot = config.memory_mode == GP_MEM_SNAPSHOT && gpurrSnapshotKernel((char *)name);

  uint64_t id = ++next_kernel_id;
  size_t name_len = strnlen(name, 4096);
  size_t size = pad8(sizeof(gp_kernel_rec) + 8u * nparams + name_len);
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
    ring_push(rec);
    free(rec);
  }
  if (!slot) {  // table full: describe it anew next time; the writer dedups
    pthread_mutex_unlock(&funcs_mu);
    static func_entry overflow;
    overflow.id = id;
    overflow.nparams = 0;
    overflow.selected = selected;
    overflow.snapshot = snapshot;
    return &overflow;
  }
  slot->id = id;
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
  atomic_store_explicit(&slot->key, key, memory_order_release);
  pthread_mutex_unlock(&funcs_mu);
  return slot;
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
  if (!cu.ctxGetDevice || cu.ctxGetDevice(&dev) != 0) return 0;
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
    rec.h.size = pad8(sizeof rec);
    rec.ordinal = dev;
    rec.context_uid = ctx_uid;
    int v = 0;
    if (cu.deviceGetName) cu.deviceGetName(rec.name, sizeof rec.name - 1, dev);
    if (cu.deviceGetUuid) cu.deviceGetUuid((gp_CUuuid *)rec.uuid, dev);
    if (cu.deviceGetAttribute) {
      if (cu.deviceGetAttribute(&v, GP_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR, dev) == 0) rec.cc_major = v;
      if (cu.deviceGetAttribute(&v, GP_DEV_ATTR_COMPUTE_CAPABILITY_MINOR, dev) == 0) rec.cc_minor = v;
      if (cu.deviceGetAttribute(&v, GP_DEV_ATTR_MULTIPROCESSOR_COUNT, dev) == 0) rec.sm_count = v;
    }
    size_t mem = 0;
    if (cu.deviceTotalMem && cu.deviceTotalMem(&mem, dev) == 0) rec.memory_bytes = mem;
    ring_push(&rec);
  }
  return dev;
}

// ---- callstacks: each distinct stack described once ----
//
// The hot path hashes the raw frames (code object + instruction for Python,
// return addresses for native code) and looks the hash up; only a new stack
// is resolved to text. The id is FNV-1a 64 over the frames' text with 0xFF
// between frames, so it is the same in every run of the same program.

enum { STACK_TABLE = 1 << 16, MAX_FRAMES = 64, AUTO_NATIVE_FRAMES = 24 };
static struct {
  _Atomic uint64_t key;
  _Atomic uint64_t id;
} stacks[STACK_TABLE];

static int py_present;

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static inline uint64_t fnv_bytes(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * FNV_PRIME;
  return h;
}

// hash_word folds one 64-bit word into h; the hot path hashes raw frames
// word by word, which costs a few ns where byte-wise FNV cost tens.
static inline uint64_t hash_word(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
  return h ^ (h >> 29);
}

// An entry's key is claimed first and its id published after, so two
// threads inserting into one slot cannot pair a key with the other's id; a
// lookup that sees the key before its id finds 0 and takes the stack anew
// (the writer drops the repeated record).
static uint64_t stack_lookup(uint64_t key) {
  for (uint64_t i = key, n = 0; n < 32; i++, n++) {
    uint64_t k = atomic_load_explicit(&stacks[i & (STACK_TABLE - 1)].key, memory_order_acquire);
    if (k == key) return atomic_load_explicit(&stacks[i & (STACK_TABLE - 1)].id, memory_order_acquire);
    if (k == 0) return 0;
  }
  return 0;
}

static void stack_insert(uint64_t key, uint64_t id) {
  for (uint64_t i = key, n = 0; n < 32; i++, n++) {
    typeof(&stacks[0]) e = &stacks[i & (STACK_TABLE - 1)];
    uint64_t k = atomic_load_explicit(&e->key, memory_order_acquire);
    if (k == key) return;
    if (k != 0) continue;
    uint64_t zero = 0;
    if (atomic_compare_exchange_strong_explicit(&e->key, &zero, key, memory_order_acq_rel, memory_order_acquire)) {
      atomic_store_explicit(&e->id, id, memory_order_release);
      return;
    }
    if (zero == key) return;
  }
}

// stack_builder accumulates a stack record; frames that do not fit are cut.
typedef struct stack_builder {
  uint8_t buf[32768];
  size_t len;
  uint32_t nframes;
  uint64_t id;
} stack_builder;

static void stack_add(stack_builder *b, uint32_t kind, const char *file, const char *func, uint32_t line,
                      uint64_t pc, uint64_t offset) {
  size_t fl = strnlen(file, 1024), gl = strnlen(func, 1024);
  size_t need = pad8(sizeof(gp_frame_rec) + fl + gl);
  if (b->len + need > sizeof b->buf) return;
  gp_frame_rec *f = (gp_frame_rec *)(b->buf + b->len);
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->line = line;
  f->pc = pc;
  f->offset = offset;
  f->file_len = fl;
  f->func_len = gl;
  memcpy(f + 1, file, fl);
  memcpy((uint8_t *)(f + 1) + fl, func, gl);
  b->len += need;
  b->nframes++;
  // The id hashes what a person reads: file, line, function (Python) or
  // object and offset (native), never addresses that move between runs.
  if (b->nframes > 1) b->id = fnv_bytes(b->id, "\xff", 1);
  b->id = fnv_bytes(b->id, file, fl);
  b->id = fnv_bytes(b->id, &line, sizeof line);
  b->id = fnv_bytes(b->id, func, gl);
  if (kind == GP_FRAME_NATIVE) b->id = fnv_bytes(b->id, &offset, sizeof offset);
}

static uint64_t stack_publish(stack_builder *b, uint64_t key, uint32_t source, uint32_t cut) {
  gp_stack_rec *r = (gp_stack_rec *)b->buf;
  if (b->id == 0) b->id = 1;
  r->h.type = GP_REC_STACK;
  r->h.size = b->len;
  r->id = b->id;
  r->nframes = b->nframes;
  r->source = source;
  r->cut = cut;
  r->pad = 0;
  if (!ring_push(r)) return 0;
  stack_insert(key, b->id);
  return b->id;
}

static stack_builder *builder(void) {
  thread_scratch *s = scratch();
  if (!s) return NULL;
  if (!s->stack) s->stack = malloc(sizeof(stack_builder));
  stack_builder *b = s->stack;
  if (b) {
    b->len = sizeof(gp_stack_rec);
    b->nframes = 0;
    b->id = FNV_OFFSET;
  }
  return b;
}

// python_stack keys the stack on the frames' raw identities (code object and
// instruction pointers, read from the frames alone); only a stack not seen
// before reads the code objects to name its frames.
static uint64_t python_stack(void) {
  gp_pyraw raw[MAX_FRAMES];
  int n = gp_py_walk_raw(raw, MAX_FRAMES);
  if (n <= 0) return 0;
  uint64_t key = FNV_OFFSET ^ 1;
  for (int i = 0; i < n; i++) key = hash_word(hash_word(key, (uint64_t)(uintptr_t)raw[i].code), raw[i].instr);
  uint64_t id = stack_lookup(key);
  if (id) return id;
  stack_builder *b = builder();
  if (!b) return 0;
  for (int i = 0; i < n; i++) {
    gp_pyframe f;
    if (!gp_py_frame_of(&raw[i], &f)) continue;  // a frame CPython hides too
    char file[512], func[256];
    int line = 0;
    if (!gp_py_resolve(&f, file, sizeof file, func, sizeof func, &line)) {
      COUNT(callstacks_failed, 1);
      continue;
    }
    stack_add(b, GP_FRAME_PYTHON, file, func, line, 0, 0);
  }
  if (b->nframes == 0) return 0;  // shims only: no Python code on this thread now
  return stack_publish(b, key, 1, n == MAX_FRAMES ? GP_UNWIND_MAX : GP_UNWIND_END);
}

// _dl_find_object (glibc 2.35+) finds the object holding an address in
// tens of ns; dladdr, the fallback, is much slower.
static int (*find_object)(void *, struct dl_find_object *);

static void object_of(void *pc, const char **obj, uint64_t *off) {
  struct dl_find_object fo;
  if (find_object && find_object(pc, &fo) == 0 && fo.dlfo_link_map) {
    *obj = fo.dlfo_link_map->l_name ? fo.dlfo_link_map->l_name : "";
    *off = (uint64_t)(uintptr_t)pc - fo.dlfo_link_map->l_addr;
    return;
  }
  Dl_info info;
  if (dladdr(pc, &info)) {
    *obj = info.dli_fname ? info.dli_fname : "";
    *off = (uint64_t)(uintptr_t)pc - (uint64_t)(uintptr_t)info.dli_fbase;
  }
}

// The agent's and CUPTI's own frames sit innermost in every native stack;
// they are dropped so a stack starts at the driver call the program made.
static struct {
  uint64_t start, end;
} own_code[2];  // the agent's and CUPTI's address ranges
static char exe_path[512];

static int is_own_code(uint64_t pc) {
  for (int i = 0; i < 2; i++)
    if (pc >= own_code[i].start && pc < own_code[i].end) return 1;
  return 0;
}

static uint64_t native_stack(int depth) {
  uint64_t pcs[MAX_FRAMES + 16];
  int n = gp_unwind(pcs, depth + 16 < MAX_FRAMES + 16 ? depth + 16 : MAX_FRAMES + 16);
  int cut = gp_unwind_stop();
  int skip = 0;
  while (skip < n && skip < 16 && is_own_code(pcs[skip])) skip++;
  if (n - skip >= depth) {
    if (n - skip > depth || cut == GP_UNWIND_MAX) cut = GP_UNWIND_MAX;
    n = skip + depth;
  }
  if (n - skip <= 0) return 0;
  uint64_t key = FNV_OFFSET ^ 2;
  for (int i = skip; i < n; i++) key = hash_word(key, pcs[i]);
  uint64_t id = stack_lookup(key);
  if (id) return id;
  stack_builder *b = builder();
  if (!b) return 0;
  for (int i = skip; i < n; i++) {
    uint64_t pc = pcs[i], off = pc;
    const char *obj = "";
    object_of((void *)(uintptr_t)pc, &obj, &off);
    if (!*obj) obj = exe_path;  // the main program's link map has no name
    // Symbol names are looked up later by the writer, from the object's
    // symbol tables: far too much work for a launch.
    stack_add(b, GP_FRAME_NATIVE, obj, "", 0, pc, off);
  }
  return stack_publish(b, key, 2, cut);
}

// take_callstack takes the calling thread's stack as the mode asks. backward
// is set for a launch made inside a PyTorch autograd node's backward whose
// forward line the writer can find (autograd.h): auto mode takes no native
// frames for it, since that line, not autograd's engine internals, is what
// its frames would be read for.
static uint64_t take_callstack(int backward) {
  switch (config.callstack_mode) {
  case GP_STACK_OFF:
    return 0;
  case GP_STACK_PYTHON:
    return py_present ? python_stack() : 0;
  case GP_STACK_NATIVE:
    return native_stack(MAX_FRAMES);
  default: {  // auto: Python where the thread runs Python, else native
    uint64_t id = py_present ? python_stack() : 0;
    // Auto keeps the innermost AUTO_NATIVE_FRAMES, which name the library
    // call that launched.
    return id || backward ? id : native_stack(AUTO_NATIVE_FRAMES);
  }
  }
}

// ---- launches ----

static _Atomic uint64_t launch_seq;

static int is_launch(uint32_t cbid) {
  switch (cbid) {
  case GP_CBID_cuLaunchKernel:
  case GP_CBID_cuLaunchKernel_ptsz:
  case GP_CBID_cuLaunchCooperativeKernel:
  case GP_CBID_cuLaunchCooperativeKernel_ptsz:
  case GP_CBID_cuLaunchKernelEx:
  case GP_CBID_cuLaunchKernelEx_ptsz:
    return 1;
  }
  return 0;
}

static int is_ptsz(uint32_t cbid) {
  return cbid == GP_CBID_cuLaunchKernel_ptsz || cbid == GP_CBID_cuLaunchCooperativeKernel_ptsz ||
         cbid == GP_CBID_cuLaunchKernelEx_ptsz || cbid == GP_CBID_cuGraphLaunch_ptsz;
}

// launch_view is what every launch API says, whatever its parameter struct.
typedef struct {
  gp_CUfunction f;
  unsigned grid[3], block[3], cluster[3], smem;
  gp_CUstream stream;
  void **kernel_params, **extra;
} launch_view;

static void view_launch(uint32_t cbid, const void *params, launch_view *v) {
  memset(v, 0, sizeof *v);
  if (cbid == GP_CBID_cuLaunchKernelEx || cbid == GP_CBID_cuLaunchKernelEx_ptsz) {
    const gp_cuLaunchKernelEx_params *p = params;
    const gp_CUlaunchConfig *c = p->config;
    v->f = p->f;
    v->kernel_params = p->kernelParams;
    v->extra = p->extra;
    if (!c) return;
    v->grid[0] = c->gridDimX, v->grid[1] = c->gridDimY, v->grid[2] = c->gridDimZ;
    v->block[0] = c->blockDimX, v->block[1] = c->blockDimY, v->block[2] = c->blockDimZ;
    v->smem = c->sharedMemBytes;
    v->stream = c->hStream;
    for (unsigned i = 0; c->attrs && i < c->numAttrs; i++) {
      if (c->attrs[i].id == GP_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        v->cluster[0] = c->attrs[i].value.clusterDim.x;
        v->cluster[1] = c->attrs[i].value.clusterDim.y;
        v->cluster[2] = c->attrs[i].value.clusterDim.z;
      }
    }
    return;
  }
  const gp_cuLaunchKernel_params *p = params;
  v->f = p->f;
  v->grid[0] = p->gridDimX, v->grid[1] = p->gridDimY, v->grid[2] = p->gridDimZ;
  v->block[0] = p->blockDimX, v->block[1] = p->blockDimY, v->block[2] = p->blockDimZ;
  v->smem = p->sharedMemBytes;
  v->stream = p->hStream;
  v->kernel_params = p->kernelParams;
  // cuLaunchCooperativeKernel_params has no `extra` member.
  if (cbid == GP_CBID_cuLaunchKernel || cbid == GP_CBID_cuLaunchKernel_ptsz) v->extra = p->extra;
}

// launch_func is view_launch's f alone: all that ENTER needs.
static inline gp_CUfunction launch_func(uint32_t cbid, const void *params) {
  if (cbid == GP_CBID_cuLaunchKernelEx || cbid == GP_CBID_cuLaunchKernelEx_ptsz)
    return ((const gp_cuLaunchKernelEx_params *)params)->f;
  return ((const gp_cuLaunchKernel_params *)params)->f;
}

// copy_params assembles the parameter buffer the kernel will see.
static uint32_t copy_params(const func_entry *fe, const launch_view *v, uint8_t *dst, uint32_t cap) {
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
  int ptsz = is_ptsz(cbid);
  if (tls.stream_epoch == epoch && tls.stream == stream && tls.stream_ctx == ctx && tls.stream_ptsz == ptsz)
    return tls.stream_id;
  uint32_t id = 0;
  if (cupti.getStreamIdEx) cupti.getStreamIdEx(ctx, stream, ptsz, &id);
  tls.stream_epoch = epoch;
  tls.stream = stream;
  tls.stream_ctx = ctx;
  tls.stream_ptsz = ptsz;
  tls.stream_id = id;
  return id;
}

static void on_launch_enter(uint32_t cbid, const gp_CallbackData *cb) {
  gp_CUfunction f = launch_func(cbid, cb->functionParams);
  func_entry *fe = func_find((uint64_t)(uintptr_t)f);
  if (!fe) fe = func_describe(f, cb->symbolName);
  if (!fe->selected) {
    COUNT(launches_filtered, 1);
    return;
  }
  tls.in_launch = 1;
  tls.launch_func = fe;
  tls.seq = atomic_fetch_add_explicit(&launch_seq, 1, memory_order_relaxed) + 1;
  tls.host_ns = gp_timestamp();
  tls.graph_node_id = 0;
  tls.params_len = 0;
  if (config.memory_mode == GP_MEM_OFF) return;
  thread_scratch *s = scratch();
  if (!s) return;
  launch_view v;
  view_launch(cbid, cb->functionParams, &v);
  tls.params_len = copy_params(fe, &v, s->launch.tail, 32768);
  gp_mem_launch_enter(&s->mem, s->launch.tail, tls.params_len, cb->context, v.stream, is_ptsz(cbid), tls.seq,
                      fe->snapshot);
}

static void on_launch_exit(uint32_t cbid, const gp_CallbackData *cb) {
  if (!tls.in_launch) return;
  tls.in_launch = 0;
  launch_view v;
  view_launch(cbid, cb->functionParams, &v);
  const func_entry *fe = tls.launch_func;
  thread_scratch *s = scratch();
  if (!s) {
    COUNT(launches_dropped, 1);
    return;
  }
  // Every field is written below, so no memset: pad[] is set explicitly and
  // the 4 padding bytes before ag_thread are never written (zero since
  // calloc) nor read.
  gp_launch_rec *rec = &s->launch.r;
  rec->h.type = GP_REC_LAUNCH;
  rec->seq = tls.seq;
  rec->host_ns = tls.host_ns;
  rec->kernel_id = fe ? fe->id : 0;
  rec->context = (uint64_t)(uintptr_t)cb->context;
  rec->stream = (uint64_t)(uintptr_t)v.stream;
  rec->graph_node_id = tls.graph_node_id;
  rec->captured = tls.graph_node_id != 0;
  rec->mem_status = 0;
  rec->snapshot_selected = 0;
  rec->pad = 0;
  rec->nregions = rec->npointers = 0;
  rec->tid = thread_id();
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
  gp_autograd ag;
  gp_autograd_take(&ag);
  // AccumulateGrad nodes have no forward op: their number is UINT64_MAX.
  rec->callstack_id = take_callstack(ag.node_class != 0 && ag.sequence_nr != UINT64_MAX);
  rec->ag_thread = ag.thread;
  rec->ag_seq = ag.sequence_nr;
  rec->ag_class = ag.node_class;
  rec->ag_present = ag.present;
  if (config.memory_mode == GP_MEM_OFF) {
    rec->params_len = fe ? copy_params(fe, &v, s->launch.tail, 32768) : 0;
    rec->h.size = pad8(sizeof *rec + rec->params_len);
  } else {
    gp_mem_launch *m = &s->mem;
    rec->params_len = tls.params_len;
    gp_mem_launch_exit(m, cb->context, v.stream, is_ptsz(cbid), tls.seq, rec->captured, rec->result);
    rec->mem_status = m->status;
    rec->snapshot_selected = m->snapshot;
    rec->nregions = m->nregions;
    rec->npointers = m->npointers;
    uint32_t at = pad8(rec->params_len);
    memset(s->launch.tail + rec->params_len, 0, at - rec->params_len);
    memcpy(s->launch.tail + at, m->regions, m->nregions * sizeof(gp_region_rec));
    at += m->nregions * sizeof(gp_region_rec);
    memcpy(s->launch.tail + at, m->pointers, m->npointers * sizeof(gp_pointer_rec));
    at += m->npointers * sizeof(gp_pointer_rec);
    rec->h.size = pad8(sizeof *rec + at);
  }
  if (!ring_push_counted(rec, &counters.launches)) COUNT(launches_dropped, 1);
}

static void on_graph_launch(uint32_t cbid, const gp_CallbackData *cb) {
  const gp_cuGraphLaunch_params *p = cb->functionParams;
  gp_graphlaunch_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.h.type = GP_REC_GRAPHLAUNCH;
  rec.h.size = pad8(sizeof rec);
  rec.seq = atomic_fetch_add_explicit(&launch_seq, 1, memory_order_relaxed) + 1;
  rec.host_ns = gp_timestamp();
  rec.graph_exec = (uint64_t)(uintptr_t)p->hGraph;
  rec.stream = (uint64_t)(uintptr_t)p->hStream;
  rec.tid = thread_id();
  rec.device = device_of(cb->contextUid);
  rec.stream_id = stream_id_of(cb->context, p->hStream, cbid);
  rec.correlation_id = cb->correlationId;
  rec.result = cb->functionReturnValue ? *(gp_CUresult *)cb->functionReturnValue : 0;
  rec.callstack_id = take_callstack(0);
  if (ring_push(&rec)) COUNT(graph_launches, 1);
}

// ---- resources: modules and graph nodes ----

static void on_module_loaded(const gp_ResourceData *rd) {
  const gp_ModuleResourceData *m = rd->resourceDescriptor;
  if (!m || !m->pCubin || !m->cubinSize) return;
  void *copy = malloc(m->cubinSize);
  if (!copy) {
    COUNT(modules_dropped, 1);
    return;
  }
  memcpy(copy, m->pCubin, m->cubinSize);
  gp_module_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.h.type = GP_REC_MODULE;
  rec.h.size = pad8(sizeof rec);
  rec.image = copy;
  rec.size = m->cubinSize;
  rec.host_ns = gp_timestamp();
  rec.module_id = m->moduleId;
  rec.context_uid = 0;
  if (ring_push(&rec)) {
    COUNT(modules, 1);
  } else {
    free(copy);
    COUNT(modules_dropped, 1);
  }
}

static void on_graph_node(uint32_t cbid, const gp_ResourceData *rd) {
  const gp_GraphData *g = rd->resourceDescriptor;
  if (!g || !g->node || !cupti.getGraphNodeId) return;
  gp_graphnode_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.h.type = GP_REC_GRAPHNODE;
  rec.h.size = pad8(sizeof rec);
  rec.node_type = g->nodeType;
  if (cupti.getGraphNodeId(g->node, &rec.node_id) != 0) return;
  if (g->graph && cupti.getGraphId) cupti.getGraphId(g->graph, &rec.graph_id);
  if (cbid == GP_CBID_RESOURCE_GRAPHNODE_CLONED) {
    if (!g->originalNode || cupti.getGraphNodeId(g->originalNode, &rec.original_node_id) != 0) return;
  } else if (tls.in_launch) {
    // A node created inside a launch call is that launch, captured.
    rec.launch_seq = tls.seq;
    tls.graph_node_id = rec.node_id;
  } else {
    return;  // built with the graph API, not by a recorded launch
  }
  ring_push(&rec);
}

// ---- the callback ----

static void dispatch(int domain, uint32_t cbid, const void *data);

// The agent's time on the program's threads is measured on one launch in
// TIMING_SAMPLE per thread (both its callbacks: the ENTER decides for its
// EXIT) and scaled up, so a recording says what the agent costs a launch
// without paying for two TSC reads (about 20 ns each in a VM) on every one.
// Every other callback (module loads, which copy megabytes of code, graph
// nodes, allocations) is timed each time: scaling a rare, long one up would
// swamp the launches' figure.
enum { TIMING_SAMPLE = 16 };

static void on_cupti_callback(void *userdata, int domain, uint32_t cbid, const void *data) {
  (void)userdata;
  if (forked_child || tls.in_agent) return;
  uint64_t t0;
  if (domain == GP_CB_DOMAIN_DRIVER_API && is_launch(cbid)) {
    if (((const gp_CallbackData *)data)->callbackSite == GP_API_ENTER)
      tls.sample_launch = ++tls.callbacks % TIMING_SAMPLE == 0;
    if (!tls.sample_launch) {
      dispatch(domain, cbid, data);
      return;
    }
    t0 = __rdtsc();
    dispatch(domain, cbid, data);
    uint64_t spent = (__rdtsc() - t0) * TIMING_SAMPLE;
    COUNT(callback_cycles, spent);
    COUNT(launch_callback_cycles, spent);
    return;
  }
  t0 = __rdtsc();
  dispatch(domain, cbid, data);
  COUNT(callback_cycles, __rdtsc() - t0);
}

static void dispatch(int domain, uint32_t cbid, const void *data) {
  if (domain == GP_CB_DOMAIN_DRIVER_API) {
    const gp_CallbackData *cb = data;
    if (is_launch(cbid)) {
      if (cb->callbackSite == GP_API_ENTER)
        on_launch_enter(cbid, cb);
      else
        on_launch_exit(cbid, cb);
    } else if ((cbid == GP_CBID_cuGraphLaunch || cbid == GP_CBID_cuGraphLaunch_ptsz) &&
               cb->callbackSite == GP_API_EXIT) {
      on_graph_launch(cbid, cb);
    } else if (gp_mem_alloc_callback(cbid)) {
      gp_mem_on_api(cbid, cb);
    } else if (gp_mem_error_callback(cbid) && cb->callbackSite == GP_API_EXIT && cb->functionReturnValue) {
      gp_CUresult r = *(gp_CUresult *)cb->functionReturnValue;
      if (r != 0 && r != 600 && !forked_child && getpid() == agent_pid)  // 600: CUDA_ERROR_NOT_READY
        gpurrCudaError((char *)cb->functionName, r);
    }
    return;
  }
  if (domain == GP_CB_DOMAIN_RESOURCE) {
    const gp_ResourceData *rd = data;
    switch (cbid) {
    case GP_CBID_RESOURCE_MODULE_LOADED:
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

// ---- GPU activity ----

enum { ACTIVITY_BUFFER = 8 << 20 };

static void buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = NULL;
  *size = 0;
  *max_records = 0;
  if (forked_child) return;
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
  if (own) COUNT(memcap_gpu_ns, k->end > k->start ? k->end - k->start : 0);
  struct {
    gp_activity_rec r;
    char name[4096];
  } rec;
  memset(&rec.r, 0, sizeof rec.r);
  size_t n = k->name ? strnlen(k->name, sizeof rec.name) : 0;
  rec.r.h.type = own ? GP_REC_OWN_ACTIVITY : GP_REC_ACTIVITY;
  rec.r.h.size = pad8(sizeof rec.r + n);
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
  if (ring_push(&rec) && !own) COUNT(activities, 1);
}

static void buffer_completed(gp_CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid) {
  (void)size;
  if (!forked_child && buffer) {
    gp_Activity *rec = NULL;
    while (cupti.activityGetNextRecord(buffer, valid, &rec) == 0) {
      if (rec->kind == GP_ACTIVITY_KIND_CONCURRENT_KERNEL) push_kernel_activity((const gp_ActivityKernel10 *)rec);
    }
    size_t dropped = 0;
    if (cupti.activityGetNumDroppedRecords && cupti.activityGetNumDroppedRecords(ctx, stream_id, &dropped) == 0 &&
        dropped)
      COUNT(activities_dropped, dropped);
  }
  free(buffer);
}

void gp_flush_activity(int forced) {
  if (started && !forked_child && cupti.activityFlushAll)
    cupti.activityFlushAll(forced ? GP_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

// ---- exit ----

// on_exit_flush runs at exit(), before the CUDA runtime's own teardown
// (atexit handlers run in reverse order and the runtime registered first).
static void on_exit_flush(void) {
  if (forked_child || getpid() != agent_pid) return;
  gp_autograd_stop();
  gpurrAtExit();
}

// ---- start ----

static int load_symbols(void *lib, const char *const *names, void **slots, size_t n, char *err, size_t errcap,
                        const char *what) {
  for (size_t i = 0; i < n; i++) {
    slots[i] = dlsym(lib, names[i]);
    if (!slots[i] && names[i][0] != '?') {
      snprintf(err, errcap, "%s has no symbol %s", what, names[i]);
      return 0;
    }
  }
  return 1;
}

static const char *cupti_error(gp_CUptiResult r) {
  const char *s = NULL;
  if (cupti.getResultString && cupti.getResultString(r, &s) == 0 && s) return s;
  return "unknown CUPTI error";
}

int gp_start(const gp_config *cfg, char *err, size_t errcap) {
  config = *cfg;
  agent_pid = getpid();
  tsc_start = __rdtsc();
  ns_start = monotonic_ns();
  pthread_key_create(&scratch_key, free_scratch);
  pthread_atfork(NULL, NULL, on_fork_child);

  uint64_t cap = 1;
  while (cap < cfg->ring_bytes) cap <<= 1;
  ring.buf = malloc(cap);
  if (!ring.buf) {
    snprintf(err, errcap, "cannot allocate a %llu-byte ring", (unsigned long long)cap);
    return 0;
  }
  ring.cap = cap;

  void *libcupti = dlopen(cfg->cupti_path, RTLD_NOW | RTLD_GLOBAL);
  if (!libcupti) {
    snprintf(err, errcap, "cannot load CUPTI %s: %s", cfg->cupti_path, dlerror());
    return 0;
  }
  static const char *const cupti_names[] = {
      "cuptiSubscribe",        "cuptiEnableCallback",
      "cuptiActivityRegisterCallbacks", "cuptiActivityEnable",
      "cuptiActivityGetNextRecord",     "cuptiActivityFlushAll",
      "cuptiActivityGetNumDroppedRecords", "cuptiGetTimestamp",
      "cuptiGetStreamIdEx",    "cuptiGetGraphNodeId",
      "cuptiGetGraphId",       "cuptiGetVersion",
      "cuptiGetResultString",
  };
  if (!load_symbols(libcupti, cupti_names, (void **)&cupti, sizeof cupti_names / sizeof *cupti_names, err, errcap,
                    cfg->cupti_path))
    return 0;
  cupti.getVersion(&cupti_version);

  void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!libcuda) libcuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!libcuda) {
    snprintf(err, errcap, "cannot load libcuda.so.1: %s", dlerror());
    return 0;
  }
  // A leading '?' marks an optional symbol (older drivers lack it).
  static const char *const cu_names[] = {
      "cuFuncGetParamInfo", "?cuKernelGetParamInfo", "cuFuncGetName",    "cuCtxGetDevice", "cuDeviceGetName",
      "cuDeviceGetUuid_v2", "cuDeviceGetAttribute",  "cuDeviceTotalMem_v2", "cuDriverGetVersion",
  };
  void **cu_slots = (void **)&cu;
  for (size_t i = 0; i < sizeof cu_names / sizeof *cu_names; i++) {
    const char *name = cu_names[i][0] == '?' ? cu_names[i] + 1 : cu_names[i];
    cu_slots[i] = dlsym(libcuda, name);
    if (!cu_slots[i] && cu_names[i][0] != '?') {
      snprintf(err, errcap, "libcuda.so.1 has no symbol %s (driver too old?)", name);
      return 0;
    }
  }
  cu.driverGetVersion(&driver_version);

  py_present = gp_py_init();
  gp_autograd_init();
  find_object = (int (*)(void *, struct dl_find_object *))dlsym(RTLD_DEFAULT, "_dl_find_object");
  gp_unwind_init();
  gp_object_range((uintptr_t)gp_start, &own_code[0].start, &own_code[0].end);
  gp_object_range((uintptr_t)cupti.subscribe, &own_code[1].start, &own_code[1].end);
  ssize_t len = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
  exe_path[len > 0 ? len : 0] = 0;
  if (cfg->callstack_mode == GP_STACK_NATIVE || cfg->callstack_mode == GP_STACK_AUTO) {
    uint64_t pcs[4];
    // Learns this thread's stack bounds (on the main thread that reads
    // /proc/self/maps) now, not inside the first launch.
    gp_unwind(pcs, 4);
  }

  gp_CUptiResult r = cupti.subscribe(&subscriber, (gp_CallbackFunc)on_cupti_callback, NULL);
  if (r != 0) {
    snprintf(err, errcap, "cuptiSubscribe: %s (is another CUPTI client, e.g. a profiler, attached?)",
             cupti_error(r));
    return 0;
  }
  // Only the callbacks we need: the whole driver domain costs µs per call.
  static const uint32_t driver_cbids[] = {
      GP_CBID_cuLaunchKernel,         GP_CBID_cuLaunchKernel_ptsz,    GP_CBID_cuLaunchCooperativeKernel,
      GP_CBID_cuLaunchCooperativeKernel_ptsz, GP_CBID_cuLaunchKernelEx, GP_CBID_cuLaunchKernelEx_ptsz,
      GP_CBID_cuGraphLaunch,          GP_CBID_cuGraphLaunch_ptsz,
  };
  for (size_t i = 0; i < sizeof driver_cbids / sizeof *driver_cbids; i++) {
    r = cupti.enableCallback(1, subscriber, GP_CB_DOMAIN_DRIVER_API, driver_cbids[i]);
    if (r != 0) {
      snprintf(err, errcap, "cuptiEnableCallback(driver %u): %s", driver_cbids[i], cupti_error(r));
      return 0;
    }
  }
  static const uint32_t resource_cbids[] = {
      GP_CBID_RESOURCE_MODULE_LOADED,
      GP_CBID_RESOURCE_GRAPHNODE_CREATED,
      GP_CBID_RESOURCE_GRAPHNODE_CLONED,
      GP_CBID_RESOURCE_STREAM_DESTROY_STARTING,
  };
  for (size_t i = 0; i < sizeof resource_cbids / sizeof *resource_cbids; i++) {
    r = cupti.enableCallback(1, subscriber, GP_CB_DOMAIN_RESOURCE, resource_cbids[i]);
    if (r != 0) {
      snprintf(err, errcap, "cuptiEnableCallback(resource %u): %s", resource_cbids[i], cupti_error(r));
      return 0;
    }
  }
  if (cfg->memory_mode != GP_MEM_OFF) {
    if (!gp_mem_start(cfg, err, errcap)) return 0;
    static const uint32_t alloc_cbids[] = {
        GP_CBID_cuMemAlloc_v2,        GP_CBID_cuMemAllocPitch_v2,          GP_CBID_cuMemAllocManaged,
        GP_CBID_cuMemAllocAsync,      GP_CBID_cuMemAllocAsync_ptsz,        GP_CBID_cuMemAllocFromPoolAsync,
        GP_CBID_cuMemAllocFromPoolAsync_ptsz, GP_CBID_cuMemFree_v2,        GP_CBID_cuMemFreeAsync,
        GP_CBID_cuMemFreeAsync_ptsz,  GP_CBID_cuMemMap,                    GP_CBID_cuMemUnmap,
        GP_CBID_cuIpcCloseMemHandle,
    };
    for (size_t i = 0; i < sizeof alloc_cbids / sizeof *alloc_cbids; i++) {
      r = cupti.enableCallback(1, subscriber, GP_CB_DOMAIN_DRIVER_API, alloc_cbids[i]);
      if (r != 0) {
        snprintf(err, errcap, "cuptiEnableCallback(driver %u): %s", alloc_cbids[i], cupti_error(r));
        return 0;
      }
    }
    for (uint32_t cbid = 1; cfg->flight_recorder && cbid < 1024; cbid++) {
      if (!gp_mem_error_callback(cbid)) continue;
      r = cupti.enableCallback(1, subscriber, GP_CB_DOMAIN_DRIVER_API, cbid);
      if (r != 0) {
        snprintf(err, errcap, "cuptiEnableCallback(driver %u): %s", cbid, cupti_error(r));
        return 0;
      }
    }
  }
  started = 1;
  atexit(on_exit_flush);
  // Activity records are laid out as CUpti_ActivityKernel10, CUPTI 13's.
  // Kernel timing makes CUPTI instrument every kernel: measured on an H100
  // it is most of the agent's per-launch cost, so it can be turned off.
  if (!cfg->gpu_timing) return 1;
  if (cupti_version < 130000) {
    logf_(1, "GPU timing disabled: CUPTI API version %u predates CUDA 13", cupti_version);
    return 1;
  }
  r = cupti.activityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r == 0) r = cupti.activityEnable(GP_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != 0) logf_(2, "GPU timing disabled: CUPTI activity: %s", cupti_error(r));
  return 1;
}

const char *gp_python_description(void) { return gp_py_describe(); }

uint32_t gp_cupti_version(void) { return cupti_version; }
int gp_driver_version(void) { return driver_version; }
