// The allocation table of memory capture: every device allocation the
// program made, added and removed as the driver's calls make and free them
// (memcap.c), found for each parameter word of a launch (memregions.c);
// the write epoch; the driver's range query for memory no call showed.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcap_internal.h"

// Write epoch: moved by every write memory capture does not hash whose
// target is unknown (graph launches, skipped launches, copies it cannot
// place); an allocation's last hash is its state only within its epoch.
_Atomic uint64_t gp_write_epoch = 1;

void gp_mem_unhashed_write(void) {
  atomic_fetch_add_explicit(&gp_write_epoch, 1, memory_order_relaxed);
  GP_COUNT(write_epochs, 1);
}

gp_spinlock gp_alloc_lock;
gp_alloc_key *gp_alloc_keys;
uint32_t gp_nallocs;  // counts dead keys too
static uint32_t allocs_cap, ndead;
static gp_allocation *spare;  // freed records, linked through shadow_ctx
uint64_t gp_alloc_lo = UINT64_MAX, gp_alloc_hi;
static uint64_t next_alloc_id;

static void push_alloc_rec(const gp_allocation *a, int freed, uint64_t callstack_id, int cleared) {
  gp_alloc_rec r;
  memset(&r, 0, sizeof r);
  r.h.type = GP_REC_ALLOC;
  r.h.size = sizeof r;
  r.id = a->id;
  r.address = a->base;
  r.size = a->size;
  r.host_ns = gp_timestamp();
  r.kind = a->kind;
  r.device = a->device;
  r.freed = freed;
  r.owner = (uint32_t)a->owner;
  r.callstack_id = callstack_id;
  r.cleared = (uint32_t)cleared;
  r.launch_seq = gp_last_launch();
  gp_ring_push(&r);
  if (!freed) GP_COUNT(allocations, 1);
}

// sweep removes the dead keys. Caller holds gp_alloc_lock.
static void sweep(void) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < gp_nallocs; i++)
    if (gp_alloc_keys[i].a) gp_alloc_keys[n++] = gp_alloc_keys[i];
  gp_nallocs = n;
  ndead = 0;
}

// kill_key frees live key i's allocation, keeps its record for reuse and
// leaves the key dead. Caller holds gp_alloc_lock.
static void kill_key(uint32_t i) {
  gp_allocation *a = GP_ALLOC_AT(i);
  gp_shadow_free(a->shadow_ctx, a->shadow, a->size);
  a->shadow_ctx = spare;
  spare = a;
  gp_alloc_keys[i].end = gp_alloc_keys[i].base;
  gp_alloc_keys[i].a = NULL;
  ndead++;
}

// remove_keys removes keys [i, k). Caller holds gp_alloc_lock.
static void remove_keys(uint32_t i, uint32_t k) {
  for (uint32_t j = i; j < k; j++) ndead -= !gp_alloc_keys[j].a;
  memmove(&gp_alloc_keys[i], &gp_alloc_keys[k], (gp_nallocs - k) * sizeof *gp_alloc_keys);
  gp_nallocs -= k - i;
}

// key_slot returns the index where a key for [base, end) goes, making room
// for it: the keys there (dead, or live ones whose frees were never seen)
// give way. Caller holds gp_alloc_lock and has room for one more key.
static uint32_t key_slot(uint64_t base, uint64_t end) {
  uint32_t i = gp_first_above(base);
  if (i > 0 && (gp_alloc_keys[i - 1].end > base || (!gp_alloc_keys[i - 1].a && gp_alloc_keys[i - 1].base == base))) i--;
  uint32_t k = i;
  for (; k < gp_nallocs && gp_alloc_keys[k].base < end; k++)
    if (gp_alloc_keys[k].a) kill_key(k);
  if (k > i) {  // the first key in the way takes the new one, the rest go
    remove_keys(i + 1, k);
    ndead--;
    return i;
  }
  // A dead neighbour takes it in place; else the keys move up to the
  // nearest dead key above, if there is one near, or to the end.
  if (i > 0 && !gp_alloc_keys[i - 1].a) {
    ndead--;
    return i - 1;
  }
  uint32_t d = i;
  while (d < gp_nallocs && d - i < 64 && gp_alloc_keys[d].a) d++;
  if (d < gp_nallocs && !gp_alloc_keys[d].a) {
    ndead--;
  } else {
    d = gp_nallocs++;
  }
  memmove(&gp_alloc_keys[i + 1], &gp_alloc_keys[i], (d - i) * sizeof *gp_alloc_keys);
  return i;
}

void gp_add_alloc(uint64_t base, uint64_t size, uint32_t kind, int owner, uint64_t callstack_id, int cleared) {
  if (!size) return;
  gp_CUdevice dev = 0;
  if (gp_cu.ctxGetDevice) gp_cu.ctxGetDevice(&dev);
  gp_spin_lock(&gp_alloc_lock);
  gp_allocation *rec = spare;
  if (rec)
    spare = rec->shadow_ctx;
  else
    rec = malloc(sizeof *rec);
  if (gp_nallocs == allocs_cap) {
    uint32_t cap = allocs_cap ? 2 * allocs_cap : 1024;
    gp_alloc_key *n = rec ? realloc(gp_alloc_keys, cap * sizeof *n) : NULL;
    if (n) gp_alloc_keys = n, allocs_cap = cap;
  }
  if (!rec || gp_nallocs == allocs_cap) {
    if (rec) rec->shadow_ctx = spare, spare = rec;
    gp_spin_unlock(&gp_alloc_lock);
    gp_logf(2, "memory capture: out of host memory for the allocation table");
    return;
  }
  uint32_t i = key_slot(base, base + size);
  *rec = (gp_allocation){
      .base = base, .size = size, .id = ++next_alloc_id, .kind = kind, .device = dev, .copy_all = 1, .owner = owner};
  gp_alloc_keys[i] = (gp_alloc_key){base, base + size, rec};
  if (base < gp_alloc_lo) gp_alloc_lo = base;
  if (base + size > gp_alloc_hi) gp_alloc_hi = base + size;
  gp_allocation a = *rec;
  gp_spin_unlock(&gp_alloc_lock);
  push_alloc_rec(&a, 0, callstack_id, cleared);
}

void gp_remove_alloc(uint64_t base, uint64_t size) {
  gp_spin_lock(&gp_alloc_lock);
  int i = gp_find_alloc(base);
  gp_allocation a = {0};
  if (i >= 0 && gp_alloc_keys[i].base == base && (!size || GP_ALLOC_AT(i)->size == size)) {
    a = *GP_ALLOC_AT(i);
    kill_key((uint32_t)i);
    if (ndead > 64 && ndead > gp_nallocs / 4) sweep();
  }
  gp_spin_unlock(&gp_alloc_lock);
  if (a.id) push_alloc_rec(&a, 1, 0, 0);
}

void gp_mem_copy_all(const uint64_t *alloc_ids, uint32_t n) {
  gp_spin_lock(&gp_alloc_lock);
  for (uint32_t i = 0; i < gp_nallocs; i++)
    for (uint32_t r = 0; r < n; r++)
      if (GP_ALLOC_AT(i) && GP_ALLOC_AT(i)->id == alloc_ids[r]) GP_ALLOC_AT(i)->copy_all = 1;
  gp_spin_unlock(&gp_alloc_lock);
}

// Memory the callbacks never showed (IPC handles, graph allocations) is
// found with the driver's range query, for words that look like device
// pointers; misses are remembered so a hot launch does not ask again.
enum { MISS_CACHE = 4096 };
static _Atomic uint64_t misses[MISS_CACHE];

// owner: whose memory it is taken to be (a library kernel's unknown memory is its library's).
int gp_range_query(uint64_t word, int owner) {
  if (word < (1ull << 32) || word >= (1ull << 48) || (word & 15) || !gp_cu.memGetAddressRange) return -1;
  uint64_t page = word >> 21, slot = (page * 0x9E3779B97F4A7C15ull) >> 52;
  if (atomic_load_explicit(&misses[slot], memory_order_relaxed) == page) return -1;
  uint64_t base = 0;
  size_t size = 0;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.memGetAddressRange(&base, &size, word);
  gp_in_agent_call(0);
  if (r != 0 || !size) {
    atomic_store_explicit(&misses[slot], page, memory_order_relaxed);
    return -1;
  }
  gp_add_alloc(base, size, GP_ALLOC_RANGE_QUERY, owner, 0, 0);
  return 0;
}

// gp_alloc_span is the allocation holding addr, as [*base, *base + *size);
// addr alone (1 byte) when the table has none, and then 0.
int gp_alloc_span(uint64_t addr, uint64_t *base, uint64_t *size) {
  *base = addr, *size = 1;
  gp_spin_lock(&gp_alloc_lock);
  int ai = gp_find_alloc(addr);
  if (ai >= 0) *base = gp_alloc_keys[ai].base, *size = gp_alloc_keys[ai].end - gp_alloc_keys[ai].base;
  gp_spin_unlock(&gp_alloc_lock);
  return ai >= 0;
}
