// NVTX ranges: CUPTI's NVTX callbacks on the program's threads. Each
// thread keeps its open push/pop ranges as a stack (in its scratch), so a
// launch names the innermost one with a single TLS read (gp_range_current).
// Every open and close becomes a ring record; the Go writer pairs them and
// names domains and registered strings from their own records.
//
// Limits: wide-character (W) messages are recorded without their text;
// ranges nested deeper than GP_RANGE_DEPTH on one thread, and pops with no
// push the agent saw (pushed before it started), are counted as dropped.
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

GP_TLS uint64_t gp_range_current;

static _Atomic uint64_t next_range_id;

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

static void range_push(uint64_t domain, const message *m) {
  gp_thread_scratch *s = gp_scratch();
  if (!s) {
    GP_COUNT(ranges_dropped, 1);
    return;
  }
  if (s->range_depth >= GP_RANGE_DEPTH) {  // too deep: its pop only undoes this
    s->range_depth++;
    GP_COUNT(ranges_dropped, 1);
    return;
  }
  uint64_t id = atomic_fetch_add_explicit(&next_range_id, 1, memory_order_relaxed) + 1;
  s->ranges[s->range_depth].id = id;
  s->ranges[s->range_depth].domain = domain;
  s->range_depth++;
  // Launches name it even when its record is lost: the reader says the range is unknown.
  if (!push_open(id, gp_range_current, domain, 0, 1, m)) GP_COUNT(ranges_dropped, 1);
  gp_range_current = id;
}

// range_pop closes the innermost open range of domain: NVTX nests each
// domain's ranges on their own, so another domain's may be above it.
static void range_pop(uint64_t domain) {
  gp_thread_scratch *s = gp_scratch();
  if (!s || s->range_depth == 0) {
    GP_COUNT(ranges_dropped, 1);
    return;
  }
  if (s->range_depth > GP_RANGE_DEPTH) {
    s->range_depth--;
    return;
  }
  uint32_t i = s->range_depth;
  while (i > 0 && s->ranges[i - 1].domain != domain) i--;
  if (i == 0) {
    GP_COUNT(ranges_dropped, 1);
    return;
  }
  uint64_t id = s->ranges[i - 1].id;
  memmove(&s->ranges[i - 1], &s->ranges[i], (s->range_depth - i) * sizeof s->ranges[0]);
  s->range_depth--;
  gp_range_current = s->range_depth ? s->ranges[s->range_depth - 1].id : 0;
  push_end(id, 0, domain);
}

// range_start opens a start/end range: it does not nest, and NVTX's id
// (the call's return value) names it to its end.
static void range_start(uint64_t domain, const message *m, const void *ret) {
  uint64_t nvtx_id = ret ? *(const uint64_t *)ret : 0;
  uint64_t id = atomic_fetch_add_explicit(&next_range_id, 1, memory_order_relaxed) + 1;
  if (!push_open(id, gp_range_current, domain, nvtx_id, 0, m)) GP_COUNT(ranges_dropped, 1);
}

static void name_record(uint32_t kind, const void *ret, uint64_t domain, const char *name) {
  if (!ret || !name) return;
  text_rec buf;
  gp_nvtx_name_rec *r = &buf.head.name;
  uint32_t len = with_text(&buf, sizeof *r, name);
  r->h.type = GP_REC_NVTX_NAME;
  r->h.size = gp_pad8(sizeof *r + len);
  r->handle = (uint64_t)(uintptr_t)*(void *const *)ret;
  r->domain = domain;
  r->kind = kind;
  r->len = len;
  gp_ring_push(r);
}

static inline uint64_t handle(gp_nvtxDomainHandle d) { return (uint64_t)(uintptr_t)d; }

void gp_nvtx_callback(uint32_t cbid, const gp_NvtxData *d) {
  const void *p = d->functionParams;
  if (!p) return;
  switch (cbid) {
  case GP_CBID_NVTX_nvtxRangePushA: {
    message m = of_ascii(((const gp_nvtxMessageA_params *)p)->message);
    range_push(0, &m);
    break;
  }
  case GP_CBID_NVTX_nvtxRangePushEx: {
    message m = of_attributes(((const gp_nvtxEx_params *)p)->eventAttrib);
    range_push(0, &m);
    break;
  }
  case GP_CBID_NVTX_nvtxDomainRangePushEx: {
    const gp_nvtxDomainEx_params *q = p;
    message m = of_attributes(q->core.eventAttrib);
    range_push(handle(q->domain), &m);
    break;
  }
  case GP_CBID_NVTX_nvtxRangePop:
    range_pop(0);
    break;
  case GP_CBID_NVTX_nvtxDomainRangePop:
    range_pop(handle(((const gp_nvtxDomainRangePop_params *)p)->domain));
    break;
  case GP_CBID_NVTX_nvtxRangeStartA: {
    message m = of_ascii(((const gp_nvtxMessageA_params *)p)->message);
    range_start(0, &m, d->functionReturnValue);
    break;
  }
  case GP_CBID_NVTX_nvtxRangeStartEx: {
    message m = of_attributes(((const gp_nvtxEx_params *)p)->eventAttrib);
    range_start(0, &m, d->functionReturnValue);
    break;
  }
  case GP_CBID_NVTX_nvtxDomainRangeStartEx: {
    const gp_nvtxDomainEx_params *q = p;
    message m = of_attributes(q->core.eventAttrib);
    range_start(handle(q->domain), &m, d->functionReturnValue);
    break;
  }
  case GP_CBID_NVTX_nvtxRangeEnd:
    push_end(0, ((const gp_nvtxRangeEnd_params *)p)->id, 0);
    break;
  case GP_CBID_NVTX_nvtxDomainRangeEnd: {
    const gp_nvtxDomainRangeEnd_params *q = p;
    push_end(0, q->core.id, handle(q->domain));
    break;
  }
  case GP_CBID_NVTX_nvtxDomainCreateA:
    name_record(GP_NVTX_NAME_DOMAIN, d->functionReturnValue, 0, ((const gp_nvtxDomainCreateA_params *)p)->name);
    break;
  case GP_CBID_NVTX_nvtxDomainRegisterStringA: {
    const gp_nvtxDomainRegisterStringA_params *q = p;
    name_record(GP_NVTX_NAME_STRING, d->functionReturnValue, handle(q->domain), q->string);
    break;
  }
  }
}

const uint32_t gp_nvtx_cbids[] = {
    GP_CBID_NVTX_nvtxRangePushA,         GP_CBID_NVTX_nvtxRangePushEx,        GP_CBID_NVTX_nvtxDomainRangePushEx,
    GP_CBID_NVTX_nvtxRangePop,           GP_CBID_NVTX_nvtxDomainRangePop,     GP_CBID_NVTX_nvtxRangeStartA,
    GP_CBID_NVTX_nvtxRangeStartEx,       GP_CBID_NVTX_nvtxDomainRangeStartEx, GP_CBID_NVTX_nvtxRangeEnd,
    GP_CBID_NVTX_nvtxDomainRangeEnd,     GP_CBID_NVTX_nvtxDomainCreateA,      GP_CBID_NVTX_nvtxDomainRegisterStringA,
};
const size_t gp_nvtx_ncbids = sizeof gp_nvtx_cbids / sizeof *gp_nvtx_cbids;
