// NVTX ranges: the agent is NVTX's injection library (NVTX_INJECTION64_PATH
// names it), so nvtxRangePushA and the rest call the functions below
// directly on the program's threads, with no profiler in between. Each
// thread keeps its open push/pop ranges as a stack (in its scratch), so a
// launch names the innermost one with a single TLS read (gp_thread.range_current).
// Every open and close becomes a ring record; the Go writer pairs them and
// names domains and registered strings from their own records.
//
// NVTX may load the agent before CUDA does (a range pushed before the first
// CUDA call): calls before gp_nvtx_start are not recorded, but the domains
// and strings created then are kept and named at the start.
//
// Limits: wide-character (W) messages and names are recorded without their
// text; ranges nested deeper than GP_RANGE_DEPTH on one thread, and pops
// with no push the agent saw (pushed before it started), are counted as
// dropped.
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"
#include "internal.h"

static _Atomic uint64_t next_range_id;

// live is set once the agent records (gp_nvtx_start); NVTX calls before it
// and in a forked child are answered but not recorded.
static _Atomic int live;

static inline int recording(void) {
  return atomic_load_explicit(&live, memory_order_relaxed) && !gp_proc.forked_child;
}

enum { MESSAGE_CAP = 1024 };

// message is what a range says of itself: its text (ascii), a registered
// string's handle, or neither.
typedef struct {
  uint32_t kind, category;
  const char *ascii;
  uint64_t registered;
} message;

static message of_ascii(const char *s) {
  message m = {s ? GP_RANGE_MSG_ASCII : GP_RANGE_MSG_NONE, 0, s, 0};
  return m;
}

static message of_attributes(const gp_nvtxEventAttributes *a) {
  message m = {GP_RANGE_MSG_NONE, 0, NULL, 0};
  if (!a) return m;
  m.category = a->category;
  if (a->size < sizeof *a) return m;  // an older layout without the message where ours has it
  switch (a->messageType) {
  case GP_NVTX_MESSAGE_ASCII:
    if (a->message.ascii) m.kind = GP_RANGE_MSG_ASCII, m.ascii = a->message.ascii;
    break;
  case GP_NVTX_MESSAGE_REGISTERED:
    m.kind = GP_RANGE_MSG_REGISTERED, m.registered = (uint64_t)(uintptr_t)a->message.registered;
    break;
  case GP_NVTX_MESSAGE_UNICODE:
    m.kind = GP_RANGE_MSG_UNICODE;
    break;
  }
  return m;
}

static int registered_is_step(uint64_t handle);

// is_step says whether a range with message m ends a training step
// (--step-range, asked only where steps matter: digests, --hash-steps).
static int is_step(const message *m) {
  if (!gp_proc.cfg.step_range || !gp_steps_on()) return 0;
  if (m->kind == GP_RANGE_MSG_ASCII) return gpurrStepRange((char *)m->ascii, (int)strnlen(m->ascii, MESSAGE_CAP));
  if (m->kind == GP_RANGE_MSG_REGISTERED) return registered_is_step(m->registered);
  return 0;  // wide-character messages are not read (as the reader's Range.message is empty)
}

// Start/end ranges that are steps, open now: their end may come on any thread.
enum { OPEN_STEPS = 64 };
static gp_spinlock open_steps_lock;
static uint64_t open_steps[OPEN_STEPS];

static void open_step(uint64_t id) {
  gp_spin_lock(&open_steps_lock);
  for (int i = 0; i < OPEN_STEPS; i++)
    if (!open_steps[i]) {
      open_steps[i] = id;
      break;
    }
  gp_spin_unlock(&open_steps_lock);
}

static void end_step(uint64_t id) {
  int was = 0;
  gp_spin_lock(&open_steps_lock);
  for (int i = 0; i < OPEN_STEPS && !was; i++)
    if (open_steps[i] == id) open_steps[i] = 0, was = 1;
  gp_spin_unlock(&open_steps_lock);
  if (was) gp_step_range_ended();
}

// A record with text after its fixed part, built on the stack: the text is
// cut at MESSAGE_CAP bytes.
typedef union {
  gp_range_rec range;
  gp_nvtx_name_rec name;
} text_head;

typedef struct {
  text_head head;
  char text[MESSAGE_CAP];
} text_rec;

// with_text zeroes rec's fixed part (fixed bytes), copies s (may be NULL)
// after it and returns its length.
static uint32_t with_text(text_rec *rec, size_t fixed, const char *s) {
  memset(rec, 0, sizeof rec->head);
  uint32_t len = s ? (uint32_t)strnlen(s, MESSAGE_CAP) : 0;
  memcpy((char *)rec + fixed, s ? s : "", len);
  return len;
}

// push_open writes a range's open record; 0 when the ring had no room.
static int push_open(uint64_t id, uint64_t parent, uint64_t domain, uint64_t nvtx_id, int pushed, const message *m) {
  text_rec buf;
  gp_range_rec *r = &buf.head.range;
  uint32_t len = with_text(&buf, sizeof *r, m->ascii);
  r->h.type = GP_REC_RANGE;
  r->h.size = gp_pad8(sizeof *r + len);
  r->id = id;
  r->parent_id = parent;
  r->start_ns = gp_clock();
  r->domain = domain;
  r->nvtx_id = nvtx_id;
  r->registered = m->registered;
  r->tid = (uint32_t)gp_thread_id();
  r->category = m->category;
  r->message_kind = m->kind;
  r->message_len = len;
  r->pushed = pushed;
  return gp_ring_push_counted(r, &gp_counts.ranges);
}

static void push_end(uint64_t id, uint64_t nvtx_id, uint64_t domain) {
  gp_range_end_rec r;
  memset(&r, 0, sizeof r);
  r.h.type = GP_REC_RANGE_END;
  r.h.size = gp_pad8(sizeof r);
  r.id = id;
  r.nvtx_id = nvtx_id;
  r.end_ns = gp_clock();
  r.domain = domain;
  r.tid = (uint32_t)gp_thread_id();
  if (!gp_ring_push(&r)) GP_COUNT(ranges_dropped, 1);
}

// level is how many ranges of domain are open below position i of s's stack:
// NVTX numbers each domain's levels on their own.
static int level(const gp_thread_scratch *s, uint32_t i, uint64_t domain) {
  int n = 0;
  while (i-- > 0) n += s->ranges[i].domain == domain;
  return n;
}

// range_push opens a push/pop range and returns its level in its domain (0
// outermost), as nvtxRangePush does; negative when the agent cannot keep it.
static int range_push(uint64_t domain, const message *m) {
  gp_thread_scratch *s = gp_scratch();
  if (!s) {
    GP_COUNT(ranges_dropped, 1);
    return -1;
  }
  if (s->range_depth >= GP_RANGE_DEPTH) {  // too deep: its pop only undoes this
    GP_COUNT(ranges_dropped, 1);
    return (int)s->range_depth++;
  }
  uint64_t id = atomic_fetch_add_explicit(&next_range_id, 1, memory_order_relaxed) + 1;
  s->ranges[s->range_depth].id = id;
  s->ranges[s->range_depth].domain = domain;
  s->ranges[s->range_depth].step = is_step(m);
  s->range_depth++;
  // Launches name it even when its record is lost: the reader says the range is unknown.
  if (!push_open(id, gp_thread.range_current, domain, 0, 1, m)) GP_COUNT(ranges_dropped, 1);
  gp_thread.range_current = id;
  return level(s, s->range_depth - 1, domain);
}

// range_pop closes the innermost open range of domain (NVTX nests each
// domain's ranges on their own, so another domain's may be above it) and
// returns its level; negative when none is open.
static int range_pop(uint64_t domain) {
  gp_thread_scratch *s = gp_scratch();
  if (!s || s->range_depth == 0) {
    GP_COUNT(ranges_dropped, 1);
    return -1;
  }
  if (s->range_depth > GP_RANGE_DEPTH) return (int)--s->range_depth;
  uint32_t i = s->range_depth;
  while (i > 0 && s->ranges[i - 1].domain != domain) i--;
  if (i == 0) {
    GP_COUNT(ranges_dropped, 1);
    return -1;
  }
  uint64_t id = s->ranges[i - 1].id;
  int step = s->ranges[i - 1].step;
  memmove(&s->ranges[i - 1], &s->ranges[i], (s->range_depth - i) * sizeof s->ranges[0]);
  s->range_depth--;
  gp_thread.range_current = s->range_depth ? s->ranges[s->range_depth - 1].id : 0;
  push_end(id, 0, domain);
  if (step) gp_step_range_ended();
  return level(s, i - 1, domain);
}

// range_start opens a start/end range: it does not nest, and the id it
// returns to the program (NVTX's nvtxRangeId_t) names it to its end.
static uint64_t range_start(uint64_t domain, const message *m) {
  uint64_t id = atomic_fetch_add_explicit(&next_range_id, 1, memory_order_relaxed) + 1;
  if (!push_open(id, gp_thread.range_current, domain, id, 0, m)) GP_COUNT(ranges_dropped, 1);
  if (is_step(m)) open_step(id);
  return id;
}

// A domain or registered string: the agent hands out its address as the
// handle. Each is kept (the list), so those NVTX made before the agent
// started are named when it starts.
typedef struct named {
  struct named *next;    // in names
  struct named *bucket;  // next in its bucket of by_text
  uint64_t domain;       // of a registered string
  uint32_t kind;         // GP_NVTX_NAME_*
  int step;              // a string: 1 when it matches --step-range, 0 not, -1 not asked yet
  char name[];           // empty for a wide-character name
} named;

// names, newest first, and the lock that orders a name's record before
// any range that can use it: taken to add one, and to write those made
// before the start. by_text finds a name made already, so a program that
// registers the same string or domain again (every step, say) gets its
// handle back instead of growing the list and the recording.
enum { NAME_BUCKETS = 4096 };
static named *names;
static named *by_text[NAME_BUCKETS];
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static void name_record(const named *n) {
  text_rec buf;
  gp_nvtx_name_rec *r = &buf.head.name;
  uint32_t len = with_text(&buf, sizeof *r, n->name);
  r->h.type = GP_REC_NVTX_NAME;
  r->h.size = gp_pad8(sizeof *r + len);
  r->handle = (uint64_t)(uintptr_t)n;
  r->domain = n->domain;
  r->kind = n->kind;
  r->len = len;
  gp_ring_push(r);
}

static uint32_t name_bucket(uint32_t kind, uint64_t domain, const char *s, size_t len) {
  uint64_t h = 0xcbf29ce484222325ULL ^ kind ^ (domain * 0x9E3779B97F4A7C15ull);
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
  return (uint32_t)(h >> 32) & (NAME_BUCKETS - 1);
}

// new_name returns a handle for a domain or string named s (NULL: none):
// the one it gave for the same text before, else a new one. Wide-character
// names (s NULL) are never the same as another.
static void *new_name(uint32_t kind, uint64_t domain, const char *s) {
  size_t len = s ? strnlen(s, MESSAGE_CAP - 1) : 0;
  uint32_t b = name_bucket(kind, domain, s, len);
  pthread_mutex_lock(&names_lock);
  for (named *o = s ? by_text[b] : NULL; o; o = o->bucket) {
    if (o->kind == kind && o->domain == domain && strlen(o->name) == len && memcmp(o->name, s, len) == 0) {
      pthread_mutex_unlock(&names_lock);
      return o;
    }
  }
  named *n = calloc(1, sizeof *n + len + 1);
  if (!n) {
    pthread_mutex_unlock(&names_lock);
    return NULL;  // NVTX's own answer when no tool is attached
  }
  n->kind = kind, n->domain = domain, n->step = -1;
  memcpy(n->name, s ? s : "", len);
  n->next = names;
  names = n;
  if (s) n->bucket = by_text[b], by_text[b] = n;
  if (recording()) name_record(n);
  pthread_mutex_unlock(&names_lock);
  return n;
}

static inline uint64_t handle(gp_nvtxDomainHandle d) { return (uint64_t)(uintptr_t)d; }

// A registered string is asked once whether it is a step (the handle is the
// agent's own named; none other reaches here).
static int registered_is_step(uint64_t h) {
  named *n = (named *)(uintptr_t)h;
  if (!n || n->kind != GP_NVTX_NAME_STRING) return 0;
  int step = __atomic_load_n(&n->step, __ATOMIC_RELAXED);
  if (step < 0) {
    step = gpurrStepRange(n->name, (int)strlen(n->name));
    __atomic_store_n(&n->step, step, __ATOMIC_RELAXED);
  }
  return step;
}

// ---- the functions NVTX calls, one per slot the agent fills ----

static int push_a(const char *msg) {
  if (!recording()) return 0;
  message m = of_ascii(msg);
  return range_push(0, &m);
}

static int push_w(const void *msg) {
  if (!recording()) return 0;
  message m = {msg ? GP_RANGE_MSG_UNICODE : GP_RANGE_MSG_NONE, 0, NULL, 0};
  return range_push(0, &m);
}

static int push_ex(const gp_nvtxEventAttributes *a) {
  if (!recording()) return 0;
  message m = of_attributes(a);
  return range_push(0, &m);
}

static int pop(void) { return recording() ? range_pop(0) : 0; }

static uint64_t start_a(const char *msg) {
  if (!recording()) return 0;
  message m = of_ascii(msg);
  return range_start(0, &m);
}

static uint64_t start_w(const void *msg) {
  if (!recording()) return 0;
  message m = {msg ? GP_RANGE_MSG_UNICODE : GP_RANGE_MSG_NONE, 0, NULL, 0};
  return range_start(0, &m);
}

static uint64_t start_ex(const gp_nvtxEventAttributes *a) {
  if (!recording()) return 0;
  message m = of_attributes(a);
  return range_start(0, &m);
}

static void end(uint64_t id) {
  if (!recording() || !id) return;
  push_end(0, id, 0);
  end_step(id);
}

static int domain_push_ex(gp_nvtxDomainHandle d, const gp_nvtxEventAttributes *a) {
  if (!recording()) return 0;
  message m = of_attributes(a);
  return range_push(handle(d), &m);
}

static int domain_pop(gp_nvtxDomainHandle d) { return recording() ? range_pop(handle(d)) : 0; }

static uint64_t domain_start_ex(gp_nvtxDomainHandle d, const gp_nvtxEventAttributes *a) {
  if (!recording()) return 0;
  message m = of_attributes(a);
  return range_start(handle(d), &m);
}

static void domain_end(gp_nvtxDomainHandle d, uint64_t id) {
  if (!recording() || !id) return;
  push_end(0, id, handle(d));
  end_step(id);
}

static gp_nvtxDomainHandle domain_create_a(const char *name) { return new_name(GP_NVTX_NAME_DOMAIN, 0, name); }
static gp_nvtxDomainHandle domain_create_w(const void *name) {
  (void)name;
  return new_name(GP_NVTX_NAME_DOMAIN, 0, NULL);
}

static gp_nvtxStringHandle register_string_a(gp_nvtxDomainHandle d, const char *s) {
  return new_name(GP_NVTX_NAME_STRING, handle(d), s);
}
static gp_nvtxStringHandle register_string_w(gp_nvtxDomainHandle d, const void *s) {
  (void)s;
  return new_name(GP_NVTX_NAME_STRING, handle(d), NULL);
}

typedef struct {
  int module;
  unsigned slot;
  gp_NvtxFunctionPointer fn;
} slot_fn;

#define FN(f) ((gp_NvtxFunctionPointer)(f))
static const slot_fn slots[] = {
    {GP_NVTX_CB_MODULE_CORE, GP_NVTX_CBID_CORE_RangePushA, FN(push_a)},
    {GP_NVTX_CB_MODULE_CORE, GP_NVTX_CBID_CORE_RangePushW, FN(push_w)},
    {GP_NVTX_CB_MODULE_CORE, GP_NVTX_CBID_CORE_RangePushEx, FN(push_ex)},
    {GP_NVTX_CB_MODULE_CORE, GP_NVTX_CBID_CORE_RangePop, FN(pop)},
    {GP_NVTX_CB_MODULE_CORE, GP_NVTX_CBID_CORE_RangeStartA, FN(start_a)},
    {GP_NVTX_CB_MODULE_CORE, GP_NVTX_CBID_CORE_RangeStartW, FN(start_w)},
    {GP_NVTX_CB_MODULE_CORE, GP_NVTX_CBID_CORE_RangeStartEx, FN(start_ex)},
    {GP_NVTX_CB_MODULE_CORE, GP_NVTX_CBID_CORE_RangeEnd, FN(end)},
    {GP_NVTX_CB_MODULE_CORE2, GP_NVTX_CBID_CORE2_DomainRangePushEx, FN(domain_push_ex)},
    {GP_NVTX_CB_MODULE_CORE2, GP_NVTX_CBID_CORE2_DomainRangePop, FN(domain_pop)},
    {GP_NVTX_CB_MODULE_CORE2, GP_NVTX_CBID_CORE2_DomainRangeStartEx, FN(domain_start_ex)},
    {GP_NVTX_CB_MODULE_CORE2, GP_NVTX_CBID_CORE2_DomainRangeEnd, FN(domain_end)},
    {GP_NVTX_CB_MODULE_CORE2, GP_NVTX_CBID_CORE2_DomainCreateA, FN(domain_create_a)},
    {GP_NVTX_CB_MODULE_CORE2, GP_NVTX_CBID_CORE2_DomainCreateW, FN(domain_create_w)},
    {GP_NVTX_CB_MODULE_CORE2, GP_NVTX_CBID_CORE2_DomainRegisterStringA, FN(register_string_a)},
    {GP_NVTX_CB_MODULE_CORE2, GP_NVTX_CBID_CORE2_DomainRegisterStringW, FN(register_string_w)},
};
#undef FN

// On failure (0) NVTX turns every slot of the instance into a no-op, those
// filled already included.
int gp_nvtx_inject(gp_NvtxGetExportTableFunc get) {
  const gp_NvtxExportTableCallbacks *cb = get ? get(GP_NVTX_ETID_CALLBACKS) : NULL;
  if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable) return 0;
  static const int modules[] = {GP_NVTX_CB_MODULE_CORE, GP_NVTX_CB_MODULE_CORE2};
  for (size_t m = 0; m < sizeof modules / sizeof *modules; m++) {
    int module = modules[m];
    gp_NvtxFunctionPointer **table = NULL;
    unsigned size = 0;
    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table) return 0;
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
      if (slots[i].module == module && slots[i].slot < size && table[slots[i].slot]) *table[slots[i].slot] = slots[i].fn;
  }
  return 1;
}

void gp_nvtx_start(void) {
  pthread_mutex_lock(&names_lock);
  for (named *p = names; p; p = p->next) name_record(p);
  atomic_store_explicit(&live, 1, memory_order_release);
  pthread_mutex_unlock(&names_lock);
}

// NVTX's entry point in an injection library (NVTX_INJECTION64_PATH); the
// one symbol of nvtx.c the agent's library exports besides the driver's.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(gp_NvtxGetExportTableFunc get) {
  return gp_nvtx_inject(get);
}
