// The ring: bounded, many writers (the program's threads), one reader (the
// Go writer). Also the counters Go reads with every frame, and log records.
//
// A record is built on the writer's side first, so the lock is held only for
// a memcpy; the reader copies out without it. When the ring is full the record
// is dropped and counted (invariant 3): the program never waits. The lock is
// the spinlock of internal.h, and the whole ring state shares one cache line.
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

gp_counters gp_counts;
_Atomic uint64_t gp_launch_seq;

void gp_read_counters(gp_counters *out) {
  uint64_t *src = (uint64_t *)&gp_counts, *dst = (uint64_t *)out;
  for (size_t i = 0; i < sizeof(gp_counts) / sizeof(uint64_t); i++)
    dst[i] = atomic_load_explicit((_Atomic uint64_t *)&src[i], memory_order_relaxed);
}

static struct {
  gp_spinlock lock;
  uint8_t *buf;
  uint64_t cap;   // power of two, multiple of 8
  uint64_t head;  // total bytes written; under lock
  uint64_t tail;  // total bytes taken; under lock
} ring __attribute__((aligned(64)));

static pthread_mutex_t ring_take_mu = PTHREAD_MUTEX_INITIALIZER;  // one reader at a time

// faulted is how many bytes from the ring's start gp_ring_prefault has
// faulted in (its callers are serialized: gp_start, then the writer).
static uint64_t faulted;

void gp_ring_init(uint8_t *buf, uint64_t cap) {
  gp_spin_lock(&ring.lock);
  ring.buf = buf;
  ring.cap = cap;
  // A new buffer holds none of the old one's bytes: positions left over
  // would point the reader at zeroes, which it never reads past.
  ring.head = ring.tail = 0;
  gp_spin_unlock(&ring.lock);
  faulted = 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

uint64_t gp_ring_prefault(uint64_t ahead) {
  if (faulted >= ring.cap) return ring.cap;
  gp_spin_lock(&ring.lock);
  uint64_t head = ring.head;
  gp_spin_unlock(&ring.lock);
  uint64_t want = head + ahead < ring.cap ? head + ahead : ring.cap;
  if (want <= faulted) return faulted;
  // madvise wants a page-aligned start; the page holding the ring's start
  // is the ring's, or the allocator's and mapped already.
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t from = ((uintptr_t)ring.buf + faulted) & ~(page - 1), to = (uintptr_t)ring.buf + want;
  // Populating writes nothing: records being written there concurrently
  // are left as they are.
  if (madvise((void *)from, to - from, MADV_POPULATE_WRITE) != 0) {
    if (errno == EINTR) return faulted;  // a signal came: the next call goes on
    faulted = ring.cap;  // not on this kernel, or no memory now: the pages fault in as written
    return faulted;
  }
  faulted = want;
  return faulted;
}

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

int gp_ring_push_counted(const void *rec, uint64_t *pushed) {
  const gp_rec_hdr *h = rec;
  int ok = 0;
  gp_spin_lock(&ring.lock);
  if (ring.cap - (ring.head - ring.tail) >= h->size) {
    ring_copy_in(ring.head, rec, h->size);
    ring.head += h->size;
    ok = 1;
    if (pushed) {
      _Atomic uint64_t *c = (_Atomic uint64_t *)pushed;
      atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
    }
  }
  gp_spin_unlock(&ring.lock);
  if (!ok) {
    GP_COUNT(records_dropped, 1);
    GP_COUNT(ring_bytes_dropped, h->size);
  }
  return ok;
}

int gp_ring_push(const void *rec) { return gp_ring_push_counted(rec, NULL); }

int gp_ring_stuck(void) { return gp_spin_stuck(&ring.lock); }

// gp_ring_take copies whole records out. Bytes in [tail, head) are complete
// (written under the lock before head moved past them) and stay put until
// tail moves (a writer only reuses space below tail + cap), so the copy needs
// no lock: program threads never wait for it.
size_t gp_ring_take(uint8_t *dst, size_t cap) {
  pthread_mutex_lock(&ring_take_mu);
  gp_spin_lock(&ring.lock);
  uint64_t tail = ring.tail, head = ring.head;
  gp_spin_unlock(&ring.lock);
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
    gp_spin_lock(&ring.lock);
    ring.tail += n;
    gp_spin_unlock(&ring.lock);
  }
  pthread_mutex_unlock(&ring_take_mu);
  return n;
}

void gp_log(int level, const char *msg) {
  struct {
    gp_log_rec r;
    char text[1024];
  } rec;
  size_t n = strnlen(msg, sizeof rec.text);
  rec.r.h.type = GP_REC_LOG;
  rec.r.h.size = gp_pad8(sizeof rec.r + n);
  rec.r.host_ns = gp_clock();
  rec.r.level = level;
  rec.r.len = n;
  memcpy(rec.text, msg, n);
  gp_ring_push(&rec);
}

void gp_logf(int level, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  gp_log(level, buf);
}
