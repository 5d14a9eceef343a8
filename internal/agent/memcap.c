// Memory capture on the program's threads: the allocation table, the
// regions of each launch, and the memory jobs enqueued on the launch's own
// stream (invariant 2: stream order is truth, no host synchronization).
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

#include "internal.h"

static const char *cu_error(gp_CUresult r) {
  const char *s = NULL;
  if (gp_cu.getErrorName && gp_cu.getErrorName(r, &s) == 0 && s) return s;
  return "CUDA error";
}

static _Atomic int stopped;
static char stop_reason[256];

void gp_mem_stop(const char *reason) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&stopped, &expected, 1)) {
    snprintf(stop_reason, sizeof stop_reason, "%s", reason);
    gp_logf(2, "memory capture stopped: %s", reason);
  }
}

const char *gp_mem_stop_reason(void) { return atomic_load(&stopped) ? stop_reason : ""; }

// ---- allocations: sorted by base, under alloc_lock ----

typedef struct {
  uint64_t base, size, id;
  uint32_t kind, device;
  uint64_t shadow;          // device address of one hash per chunk, 0 until the first snapshot
  void *shadow_ctx;         // the context whose pool holds it
  int copy_all;             // next snapshot copies every chunk (new, or a drop lost chunks)
  uint64_t last_job;        // hash mode: the last job that hashed it, enqueued ...
  uint64_t last_epoch;      // ... in this write epoch; another epoch: written since, unhashed
  int owner;                // GP_OWNER_*: a library's own memory is left out of step digests
} allocation;

// Write epoch: moved by every write memory capture does not hash whose
// target is unknown (graph launches, skipped launches, copies it cannot
// place); an allocation's last hash is its state only within its epoch.
static _Atomic uint64_t write_epoch = 1;
// Set when CUPTI cannot name the copy and memset calls: then nothing is carried.
static int writes_unseen;

void gp_mem_unhashed_write(void) {
  atomic_fetch_add_explicit(&write_epoch, 1, memory_order_relaxed);
  GP_COUNT(write_epochs, 1);
}

static gp_spinlock alloc_lock;
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
  allocation *a;  // NULL: dead
} alloc_key;
static alloc_key *keys;
static uint32_t nallocs, allocs_cap, ndead;  // nallocs counts dead keys too
static allocation *spare;  // freed records, linked through shadow_ctx
static uint64_t alloc_lo = UINT64_MAX, alloc_hi;  // span of every allocation ever seen
static uint64_t next_alloc_id;

#define ALLOC(i) (keys[i].a)

static void push_alloc_rec(const allocation *a, int freed, uint64_t callstack_id) {
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
  gp_ring_push(&r);
  if (!freed) GP_COUNT(allocations, 1);
}

// first_above is the number of keys whose base is at most addr. Caller holds alloc_lock.
// Branch-free (the compare becomes a conditional move): a launch looks up dozens of
// parameter words, and a mispredicted branch per halving cost more than the halving.
static uint32_t first_above(uint64_t addr) {
  if (!nallocs) return 0;
  const alloc_key *k = keys;
  uint32_t n = nallocs;
  while (n > 1) {
    uint32_t half = n / 2;
    k = k[half - 1].base <= addr ? k + half : k;
    n -= half;
  }
  return (uint32_t)(k - keys) + (k->base <= addr);
}

// find returns the index of the allocation holding addr, or -1. Caller holds alloc_lock.
static int find_alloc(uint64_t addr) {
  if (addr < alloc_lo || addr >= alloc_hi) return -1;
  uint32_t i = first_above(addr);
  return i > 0 && addr < keys[i - 1].end ? (int)(i - 1) : -1;
}

// find_alloc_at returns the index of the live allocation at base: key hint
// if it still is (the launch's ENTER found it there, and keys move only
// when the table grows, shrinks or is swept), else a search. Caller holds
// alloc_lock.
static int find_alloc_at(uint64_t base, int32_t hint) {
  if (hint >= 0 && (uint32_t)hint < nallocs && keys[hint].a && keys[hint].base == base) return hint;
  int i = find_alloc(base);
  return i >= 0 && keys[i].base == base ? i : -1;
}

// Whether allocation i and the one after it are cuMemMap'd pieces mapped end to end.
static int joined(uint32_t i) {
  return i + 1 < nallocs && ALLOC(i) && ALLOC(i + 1) && ALLOC(i)->kind == GP_ALLOC_MAP &&
         ALLOC(i + 1)->kind == GP_ALLOC_MAP && keys[i].end == keys[i + 1].base;
}

static void shadow_free(void *ctx, uint64_t shadow, uint64_t size);

// sweep removes the dead keys. Caller holds alloc_lock.
static void sweep(void) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < nallocs; i++)
    if (keys[i].a) keys[n++] = keys[i];
  nallocs = n;
  ndead = 0;
}

// kill_key frees live key i's allocation, keeps its record for reuse and
// leaves the key dead. Caller holds alloc_lock.
static void kill_key(uint32_t i) {
  allocation *a = ALLOC(i);
  shadow_free(a->shadow_ctx, a->shadow, a->size);
  a->shadow_ctx = spare;
  spare = a;
  keys[i].end = keys[i].base;
  keys[i].a = NULL;
  ndead++;
}

// remove_keys removes keys [i, k). Caller holds alloc_lock.
static void remove_keys(uint32_t i, uint32_t k) {
  for (uint32_t j = i; j < k; j++) ndead -= !keys[j].a;
  memmove(&keys[i], &keys[k], (nallocs - k) * sizeof *keys);
  nallocs -= k - i;
}

// key_slot returns the index where a key for [base, end) goes, making room
// for it: the keys there (dead, or live ones whose frees were never seen)
// give way. Caller holds alloc_lock and has room for one more key.
static uint32_t key_slot(uint64_t base, uint64_t end) {
  uint32_t i = first_above(base);
  if (i > 0 && (keys[i - 1].end > base || (!keys[i - 1].a && keys[i - 1].base == base))) i--;
  uint32_t k = i;
  for (; k < nallocs && keys[k].base < end; k++)
    if (keys[k].a) kill_key(k);
  if (k > i) {  // the first key in the way takes the new one, the rest go
    remove_keys(i + 1, k);
    ndead--;
    return i;
  }
  // A dead neighbour takes it in place; else the keys move up to the
  // nearest dead key above, if there is one near, or to the end.
  if (i > 0 && !keys[i - 1].a) {
    ndead--;
    return i - 1;
  }
  uint32_t d = i;
  while (d < nallocs && d - i < 64 && keys[d].a) d++;
  if (d < nallocs && !keys[d].a) {
    ndead--;
  } else {
    d = nallocs++;
  }
  memmove(&keys[i + 1], &keys[i], (d - i) * sizeof *keys);
  return i;
}

static void add_alloc(uint64_t base, uint64_t size, uint32_t kind, int owner, uint64_t callstack_id) {
  if (!size) return;
  gp_CUdevice dev = 0;
  if (gp_cu.ctxGetDevice) gp_cu.ctxGetDevice(&dev);
  gp_spin_lock(&alloc_lock);
  allocation *rec = spare;
  if (rec)
    spare = rec->shadow_ctx;
  else
    rec = malloc(sizeof *rec);
  if (nallocs == allocs_cap) {
    uint32_t cap = allocs_cap ? 2 * allocs_cap : 1024;
    alloc_key *n = rec ? realloc(keys, cap * sizeof *n) : NULL;
    if (n) keys = n, allocs_cap = cap;
  }
  if (!rec || nallocs == allocs_cap) {
    if (rec) rec->shadow_ctx = spare, spare = rec;
    gp_spin_unlock(&alloc_lock);
    gp_logf(2, "memory capture: out of host memory for the allocation table");
    return;
  }
  uint32_t i = key_slot(base, base + size);
  *rec = (allocation){
      .base = base, .size = size, .id = ++next_alloc_id, .kind = kind, .device = dev, .copy_all = 1, .owner = owner};
  keys[i] = (alloc_key){base, base + size, rec};
  if (base < alloc_lo) alloc_lo = base;
  if (base + size > alloc_hi) alloc_hi = base + size;
  allocation a = *rec;
  gp_spin_unlock(&alloc_lock);
  push_alloc_rec(&a, 0, callstack_id);
}

static void remove_alloc(uint64_t base, uint64_t size) {
  gp_spin_lock(&alloc_lock);
  int i = find_alloc(base);
  allocation a = {0};
  if (i >= 0 && keys[i].base == base && (!size || ALLOC(i)->size == size)) {
    a = *ALLOC(i);
    kill_key((uint32_t)i);
    if (ndead > 64 && ndead > nallocs / 4) sweep();
  }
  gp_spin_unlock(&alloc_lock);
  if (a.id) push_alloc_rec(&a, 1, 0);
}

int gp_mem_alloc_callback(uint32_t cbid) {
  switch (cbid) {
  case GP_CBID_cuMemAlloc_v2:
  case GP_CBID_cuMemAllocPitch_v2:
  case GP_CBID_cuMemAllocManaged:
  case GP_CBID_cuMemAllocAsync:
  case GP_CBID_cuMemAllocAsync_ptsz:
  case GP_CBID_cuMemAllocFromPoolAsync:
  case GP_CBID_cuMemAllocFromPoolAsync_ptsz:
  case GP_CBID_cuMemFree_v2:
  case GP_CBID_cuMemFreeAsync:
  case GP_CBID_cuMemFreeAsync_ptsz:
  case GP_CBID_cuMemMap:
  case GP_CBID_cuMemUnmap:
  case GP_CBID_cuIpcCloseMemHandle:
    return 1;
  }
  return 0;
}

// Calls where a kernel's failure (an illegal address, a trap) surfaces.
int gp_mem_error_callback(uint32_t cbid) {
  switch (cbid) {
  case GP_CBID_cuCtxSynchronize:
  case GP_CBID_cuCtxSynchronize_v2:
  case GP_CBID_cuStreamSynchronize:
  case GP_CBID_cuStreamSynchronize_ptsz:
  case GP_CBID_cuEventSynchronize:
  case GP_CBID_cuMemcpyDtoH_v2:
  case GP_CBID_cuMemcpyDtoH_v2_ptds:
  case GP_CBID_cuMemcpyDtoHAsync_v2:
  case GP_CBID_cuMemcpyDtoHAsync_v2_ptsz:
  case GP_CBID_cuMemcpy:
  case GP_CBID_cuMemcpy_ptds:
  case GP_CBID_cuMemcpyAsync:
  case GP_CBID_cuMemcpyAsync_ptsz:
    return 1;
  }
  return 0;
}

static void before_free(uint32_t cbid, const gp_CallbackData *cb, uint64_t ptr);
static gp_CUstream job_stream(gp_CUstream stream, int ptsz);

// zero_fill clears a stream-ordered allocation on its stream, under hash and
// snapshot modes. A pool hands out memory freed earlier in the process without
// clearing it, and which freed block a tensor gets depends on when other
// streams' work completed, so the bytes a program never writes (an output a
// split-K GEMM leaves to its reduction, padding) would differ from run to run
// and look like a divergence. The driver clears memory it maps fresh
// (cuMemAlloc, cuMemCreate), so only pools need it. A capturing stream is left
// alone: a memset there would become a node of the program's graph.
static void zero_fill(uint64_t ptr, uint64_t size, gp_CUstream stream) {
  if (!size || (gp_proc.cfg.memory_mode != GP_MEM_HASH && gp_proc.cfg.memory_mode != GP_MEM_SNAPSHOT)) return;
  int capturing = 0;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.streamIsCapturing(stream, &capturing);
  if (r == 0 && !capturing) r = gp_cu.memsetD8Async(ptr, 0, size, stream);
  gp_in_agent_call(0);
  if (r != 0) {
    static _Atomic int said;
    if (!atomic_exchange(&said, 1))
      gp_logf(1, "memory capture: cuMemsetD8Async(new allocation, %llu bytes): %s (%d); memory a program never writes may differ between runs",
              (unsigned long long)size, cu_error(r), r);
  }
}

// gp_mem_on_api tracks allocations: new ones at API exit (when the address
// is known and the call succeeded), frees at API enter (before the address
// can be handed out again).
void gp_mem_on_api(uint32_t cbid, const gp_CallbackData *cb) {
  const void *p = cb->functionParams;
  int exit = cb->callbackSite == GP_API_EXIT;
  if (exit && cb->functionReturnValue && *(gp_CUresult *)cb->functionReturnValue != 0) return;
  // A new allocation: who made it (a library for its own use, or the
  // program) and the line that did.
  int owner = 0;
  uint64_t stack = 0;
  // Stream-ordered allocations (a tensor each, under PyTorch's cudaMallocAsync
  // backend: thousands a step) are the program's and go without a line:
  // communication libraries allocate with cuMemAlloc or cuMemCreate/cuMemMap.
  if (exit && (cbid == GP_CBID_cuMemAlloc_v2 || cbid == GP_CBID_cuMemAllocManaged || cbid == GP_CBID_cuMemAllocPitch_v2 ||
               cbid == GP_CBID_cuMemMap)) {
    owner = gp_callstack_owner();
    stack = gp_callstack_take(0, NULL);
  }
  switch (cbid) {
  case GP_CBID_cuMemAlloc_v2:
    if (exit) add_alloc(*((const gp_cuMemAlloc_params *)p)->dptr, ((const gp_cuMemAlloc_params *)p)->bytesize,
                        GP_ALLOC_MEM_ALLOC, owner, stack);
    break;
  case GP_CBID_cuMemAllocManaged:
    if (exit) add_alloc(*((const gp_cuMemAlloc_params *)p)->dptr, ((const gp_cuMemAlloc_params *)p)->bytesize,
                        GP_ALLOC_MANAGED, owner, stack);
    break;
  case GP_CBID_cuMemAllocAsync:
  case GP_CBID_cuMemAllocAsync_ptsz:
    if (exit) {
      const gp_cuMemAllocAsync_params *a = p;
      add_alloc(*a->dptr, a->bytesize, GP_ALLOC_ASYNC, owner, stack);
      zero_fill(*a->dptr, a->bytesize, job_stream(a->hStream, cbid == GP_CBID_cuMemAllocAsync_ptsz));
    }
    break;
  case GP_CBID_cuMemAllocFromPoolAsync:
  case GP_CBID_cuMemAllocFromPoolAsync_ptsz:
    if (exit) {
      const gp_cuMemAllocFromPoolAsync_params *a = p;
      add_alloc(*a->dptr, a->bytesize, GP_ALLOC_ASYNC, owner, stack);
      zero_fill(*a->dptr, a->bytesize, job_stream(a->hStream, cbid == GP_CBID_cuMemAllocFromPoolAsync_ptsz));
    }
    break;
  case GP_CBID_cuMemAllocPitch_v2:
    if (exit) {
      const gp_cuMemAllocPitch_params *a = p;
      add_alloc(*a->dptr, (uint64_t)*a->pPitch * a->Height, GP_ALLOC_PITCH, owner, stack);
    }
    break;
  case GP_CBID_cuMemMap:
    if (exit)
      add_alloc(((const gp_cuMemMap_params *)p)->ptr, ((const gp_cuMemMap_params *)p)->size, GP_ALLOC_MAP, owner, stack);
    break;
  case GP_CBID_cuMemFree_v2:
  case GP_CBID_cuMemFreeAsync:
  case GP_CBID_cuMemFreeAsync_ptsz:
  case GP_CBID_cuIpcCloseMemHandle:
    if (!exit) {
      before_free(cbid, cb, *(const uint64_t *)p);
      remove_alloc(*(const uint64_t *)p, 0);
    }
    break;
  case GP_CBID_cuMemUnmap:
    if (!exit) {
      before_free(cbid, cb, ((const gp_cuMemUnmap_params *)p)->ptr);
      remove_alloc(((const gp_cuMemUnmap_params *)p)->ptr, ((const gp_cuMemUnmap_params *)p)->size);
    }
    break;
  }
}

// Memory the callbacks never showed (IPC handles, graph allocations) is
// found with the driver's range query, for words that look like device
// pointers; misses are remembered so a hot launch does not ask again.
enum { MISS_CACHE = 4096, QUERIES_PER_LAUNCH = 8 };
static _Atomic uint64_t misses[MISS_CACHE];

// owner: whose memory it is taken to be (a library kernel's unknown memory is its library's).
static int range_query(uint64_t word, int owner) {
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
  add_alloc(base, size, GP_ALLOC_RANGE_QUERY, owner, 0);
  return 0;
}

// ---- regions of one launch ----

enum { CARRY_UNSET = 0xff };

// merge_carry notes that region r is reached through a word whose write
// status is carry (GP_CARRY_*): a region is carried only if no word reaching
// it may write, learned if any word's status is learned.
static void merge_carry(gp_mem_launch *m, uint32_t r, uint8_t carry) {
  uint8_t *c = &m->carry[r];
  if (*c == CARRY_UNSET || carry == GP_CARRY_NONE || (*c != GP_CARRY_NONE && carry == GP_CARRY_LEARNED)) *c = carry;
}

// add_region adds allocation ai as a region reached through a word whose
// write status is carry, or merges carry into its region; returns the
// region, -1 when the launch has no room for another.
static int add_region(gp_mem_launch *m, int ai, uint8_t carry) {
  uint32_t r = 0;
  while (r < m->nregions && m->alloc_index[r] != ai) r++;
  if (r == m->nregions) {
    if (m->nregions == GP_MAX_REGIONS) return -1;
    const allocation *a = ALLOC(ai);
    gp_region_rec *reg = &m->regions[m->nregions];
    reg->base = a->base;
    reg->size = a->size;
    reg->alloc_id = a->kind == GP_ALLOC_RANGE_QUERY ? 0 : a->id;
    m->alloc_index[m->nregions] = ai;
    // Memory the host or another process may write between launches is never carried.
    int host = a->kind == GP_ALLOC_MANAGED || a->kind == GP_ALLOC_RANGE_QUERY;
    m->carry[r] = host ? GP_CARRY_NONE : CARRY_UNSET;
    m->host_written |= host;
    m->nregions++;
  }
  merge_carry(m, r, carry);
  return (int)r;
}

// word_carry is what is known of the parameter word at byte off.
static uint8_t word_carry(const gp_readonly *ro, uint32_t off, int learned) {
  uint32_t w = off / 8;
  if (!ro || w >= ro->nwords) return GP_CARRY_NONE;
  uint64_t bit = 1ull << (w % 64);
  if (ro->bits[w / 64] & bit) return GP_CARRY_PROVED;
  if (learned && (ro->bits[ro->n64 + w / 64] & bit)) return GP_CARRY_LEARNED;
  return GP_CARRY_NONE;
}

// find_regions widens every parameter word that points into an allocation
// to the whole allocation; a cuMemMap'd piece brings the pieces mapped right
// next to it, since a tensor may straddle them (expandable segments).
static void find_regions(gp_mem_launch *m, const uint8_t *params, uint32_t len, const gp_readonly *ro, int learned,
                         int owner) {
  m->nregions = m->npointers = m->host_written = 0;
  int queries = 0;
  for (uint32_t off = 0; off + 8 <= len; off += 8) {
    uint64_t w;
    memcpy(&w, params + off, 8);
    if (!w) continue;
    // Most words that point into an allocation point into one an earlier
    // word of the launch did (a cuBLAS GEMM's pointers and the TMA
    // descriptors built on them): those regions are searched first.
    int ai = -1, r = -1;
    if (w >= alloc_lo && w < alloc_hi) {
      for (uint32_t i = m->nregions; i-- > 0;) {
        const alloc_key *k = &keys[m->alloc_index[i]];
        if (w - k->base < k->end - k->base) {
          r = (int)i, ai = m->alloc_index[i];
          break;
        }
      }
      if (ai < 0) ai = find_alloc(w);
    }
    if (ai < 0 && queries < QUERIES_PER_LAUNCH) {
      // Looked up without the lock held: range_query takes it to insert.
      gp_spin_unlock(&alloc_lock);
      queries++;
      int ok = range_query(w, owner) == 0;
      gp_spin_lock(&alloc_lock);
      if (ok) {
        m->nregions = m->npointers = m->host_written = 0;  // the table moved: start over with the new entry
        off = (uint32_t)-8;
        continue;
      }
    }
    if (ai < 0) continue;
    uint8_t carry = word_carry(ro, off, learned);
    if (r >= 0)
      merge_carry(m, (uint32_t)r, carry);
    else if ((r = add_region(m, ai, carry)) < 0)
      break;
    if (m->npointers < GP_MAX_POINTERS) m->pointers[m->npointers++] = (gp_pointer_rec){off, (uint32_t)r};
    if (ALLOC(ai)->kind != GP_ALLOC_MAP) continue;
    for (int j = ai - 1; j >= 0 && joined((uint32_t)j); j--)
      if (add_region(m, j, carry) < 0) break;
    for (int j = ai; joined((uint32_t)j); j++)
      if (add_region(m, j + 1, carry) < 0) break;
  }
  for (uint32_t r = 0; r < m->nregions; r++)
    if (m->carry[r] == CARRY_UNSET) m->carry[r] = GP_CARRY_NONE;
}

// ---- writes outside kernels ----

// By driver cbid: how a call that writes device memory names what it writes (GP_WRITE_*).
enum { MAX_WRITE_CBID = 1024 };
static uint8_t write_class[MAX_WRITE_CBID];
// By driver cbid, for hashes running beside the program (--defer-hashes):
// what the call must wait for (GP_ORDER_*), and where its parameters name
// its stream (byte offset + 1; 0: it names none), per-thread when call_ptsz.
static uint8_t call_order[MAX_WRITE_CBID], call_stream_at[MAX_WRITE_CBID], call_ptsz[MAX_WRITE_CBID];

static int has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

// gp_mem_write_class sorts a driver call by its name: copies and memsets whose
// first parameter is the device address written (GP_WRITE_DST), other calls
// that may write device memory (GP_WRITE_ANY: 2D/3D and batched copies, array
// copies, stream memory operations), and the rest.
int gp_mem_write_class(const char *name) {
  static const char *const flush[] = {"cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
                                      "cuStreamQuery", "cuEventQuery", "cuStreamBeginCapture",
                                      "cuStreamDestroy", "cuCtxDestroy", "cuDevicePrimaryCtxRelease",
                                      "cuDevicePrimaryCtxReset", "cuStreamWaitEvent", "cuEventRecord"};
  for (size_t i = 0; i < sizeof flush / sizeof *flush; i++)
    if (has_prefix(name, flush[i])) return GP_WRITE_FLUSH;
  if (has_prefix(name, "cuMemset")) return GP_WRITE_DST;
  if (has_prefix(name, "cuStreamWriteValue") || has_prefix(name, "cuStreamBatchMemOp")) return GP_WRITE_ANY;
  if (!has_prefix(name, "cuMemcpy")) return GP_WRITE_NONE;
  const char *rest = name + strlen("cuMemcpy");
  if (strstr(rest, "DtoH") || strstr(rest, "AtoH")) return GP_WRITE_FLUSH;
  if (has_prefix(rest, "HtoD") || has_prefix(rest, "DtoD") || has_prefix(rest, "Peer")) return GP_WRITE_DST;
  // cuMemcpy and cuMemcpyAsync (with _ptds/_ptsz): dst, src, bytes.
  if (!*rest || *rest == '_' || (has_prefix(rest, "Async") && (!rest[5] || rest[5] == '_'))) return GP_WRITE_DST;
  return GP_WRITE_ANY;
}

int gp_mem_call_order(const char *name, uint8_t *stream_at) {
  static const struct {
    const char *prefix;
    uint8_t order, stream_at;
  } calls[] = {
      {"cuEventRecord", GP_ORDER_STREAM, GP_STREAM_AT_EVENT_RECORD + 1},
      {"cuStreamSynchronize", GP_ORDER_STREAM, GP_STREAM_AT_STREAM_CALL + 1},
      {"cuStreamDestroy", GP_ORDER_HOST, GP_STREAM_AT_STREAM_CALL + 1},  // its side's batches finish first
      {"cuCtxDestroy", GP_ORDER_HOST, 0},
      {"cuDevicePrimaryCtxRelease", GP_ORDER_HOST, 0},
      {"cuDevicePrimaryCtxReset", GP_ORDER_HOST, 0},
      {"cuMemsetD8Async", GP_ORDER_NONE, GP_STREAM_AT_MEMSET_ASYNC + 1},
      {"cuMemsetD16Async", GP_ORDER_NONE, GP_STREAM_AT_MEMSET_ASYNC + 1},
      {"cuMemsetD32Async", GP_ORDER_NONE, GP_STREAM_AT_MEMSET_ASYNC + 1},
      {"cuMemcpyAsync", GP_ORDER_NONE, GP_STREAM_AT_MEMCPY_ASYNC + 1},
      {"cuMemcpyHtoDAsync", GP_ORDER_NONE, GP_STREAM_AT_MEMCPY_ASYNC + 1},
      {"cuMemcpyDtoDAsync", GP_ORDER_NONE, GP_STREAM_AT_MEMCPY_ASYNC + 1},
      {"cuMemsetD2D", GP_ORDER_NONE, 0},  // below
      {"cuMemcpyPeerAsync", GP_ORDER_NONE, GP_STREAM_AT_PEER_ASYNC + 1},
      {"cuMemcpy2DAsync", GP_ORDER_NONE, GP_STREAM_AT_COPY_DESC_ASYNC + 1},
      {"cuMemcpy3DAsync", GP_ORDER_NONE, GP_STREAM_AT_COPY_DESC_ASYNC + 1},
      {"cuMemcpy3DPeerAsync", GP_ORDER_NONE, GP_STREAM_AT_COPY_DESC_ASYNC + 1},
      {"cuStreamWriteValue", GP_ORDER_NONE, GP_STREAM_AT_STREAM_CALL + 1},
      {"cuStreamBatchMemOp", GP_ORDER_NONE, GP_STREAM_AT_STREAM_CALL + 1},
  };
  *stream_at = 0;
  for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
    if (!has_prefix(name, calls[i].prefix)) continue;
    const char *rest = name + strlen(calls[i].prefix);
    // A name goes on only with a version, a width or _ptsz (cuMemsetD2D
    // with the width first: cuMemsetD2D8Async).
    if (has_prefix(calls[i].prefix, "cuMemsetD2D")) {
      *stream_at = strstr(rest, "Async") ? GP_STREAM_AT_MEMSET2D_ASYNC + 1 : 0;
    } else if (*rest && *rest != '_' && !(*rest >= '0' && *rest <= '9') && !has_prefix(rest, "WithFlags")) {
      continue;
    } else {
      *stream_at = calls[i].stream_at;
    }
    return calls[i].order;
  }
  return GP_ORDER_NONE;
}

static int is_ptsz_name(const char *name) {
  size_t n = strlen(name);
  return n > 5 && (strcmp(name + n - 5, "_ptsz") == 0 || strcmp(name + n - 5, "_ptds") == 0);
}

size_t gp_mem_write_cbids(uint32_t *out, size_t cap) {
  if (!gp_cupti_callback_name) {
    writes_unseen = 1;
    gp_logf(1, "memory capture: CUPTI cannot name driver calls (no cuptiGetCallbackName): copies would go unseen, so every region is hashed after every launch");
    return 0;
  }
  size_t n = 0;
  for (uint32_t cbid = 1; cbid < MAX_WRITE_CBID; cbid++) {
    const char *name = NULL;
    if (gp_cupti_callback_name(GP_CB_DOMAIN_DRIVER_API, cbid, &name) != 0 || !name) continue;
    write_class[cbid] = (uint8_t)gp_mem_write_class(name);
    call_order[cbid] = (uint8_t)gp_mem_call_order(name, &call_stream_at[cbid]);
    call_ptsz[cbid] = (uint8_t)is_ptsz_name(name);
    // Calls that write nothing matter only to deferred hash kernels: else
    // their callbacks would cost the program for nothing.
    if (write_class[cbid] == GP_WRITE_FLUSH && !gp_proc.cfg.defer_hashes) write_class[cbid] = GP_WRITE_NONE;
    if (!write_class[cbid]) continue;
    if (n == cap) {  // a call left unwatched could write what is carried
      writes_unseen = 1;
      gp_logf(1, "memory capture: more driver calls write memory than the agent watches (%zu): every region is hashed after every launch", cap);
      return n;
    }
    out[n++] = cbid;
  }
  if (!n) writes_unseen = 1;
  return n;
}

int gp_mem_write_callback(uint32_t cbid) { return cbid < MAX_WRITE_CBID && write_class[cbid]; }

static void before_call(uint32_t cbid, const gp_CallbackData *cb);

// gp_mem_on_write, at the exit of a successful call: the allocation written
// (and the pieces mapped next to it, which a copy may run into) is hashed
// again at its next launch; a write whose target is unknown moves the epoch.
void gp_mem_on_write(uint32_t cbid, const gp_CallbackData *cb) {
  if (cb->callbackSite != GP_API_EXIT) {
    before_call(cbid, cb);
    return;
  }
  if (write_class[cbid] == GP_WRITE_FLUSH) return;
  if (cb->functionReturnValue && *(gp_CUresult *)cb->functionReturnValue != 0) return;
  if (write_class[cbid] != GP_WRITE_DST || !cb->functionParams) {
    gp_mem_unhashed_write();
    return;
  }
  uint64_t dst = *(const uint64_t *)cb->functionParams;
  gp_spin_lock(&alloc_lock);
  int ai = find_alloc(dst);
  if (ai >= 0) {
    ALLOC(ai)->last_job = 0;
    for (int j = ai - 1; j >= 0 && joined((uint32_t)j); j--) ALLOC(j)->last_job = 0;
    for (int j = ai; joined((uint32_t)j); j++) ALLOC(j + 1)->last_job = 0;
  }
  gp_spin_unlock(&alloc_lock);
}

// ---- per-context GPU state ----

enum { MAX_MEM_CONTEXTS = 64, NJOBS = 8192 };

typedef struct {
  void *ctx;
  int ok;                   // 0: not tried, 1: ready, -1: failed (logged once)
  gp_CUfunction fn, fn_nan;  // gpurr_memcap, gpurr_memcap_nan (jobs that count NaN)
  uint64_t results_dev;     // the results ring, as this context addresses it
  uint64_t staging_dev;
  uint64_t scratch;         // device mirror of the results ring
  uint64_t counters;        // NJOBS × 2 zeroed uint32
  uint64_t nan_counts;      // nan-scan: NJOBS × GP_NAN_JOB_BYTES zeroed
  uint64_t pool, pool_size; // shadow pool: one hash per chunk of snapshotted allocations
  uint64_t *free_off, *free_len;  // free extents of the pool, unsorted
  uint32_t nfree, free_cap;
} mem_context;

static mem_context mctx[MAX_MEM_CONTEXTS];
static pthread_mutex_t mctx_mu = PTHREAD_MUTEX_INITIALIZER;

// The pinned rings, shared by every context (CU_MEMHOSTALLOC_PORTABLE).
static uint8_t *results_host, *staging_host;
static uint64_t results_cap, staging_cap;

static void init_context(mem_context *c) {
  gp_CUresult r;
  const char *step = "";
  int mode = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED: our calls never disturb another thread's capture
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  if (!results_host) {
    step = "cuMemHostAlloc(results)";
    if ((r = gp_cu.memHostAlloc((void **)&results_host, results_cap, 0x01 | 0x02)) != 0) goto fail;
    memset(results_host, 0, results_cap);
    if (staging_cap) {
      step = "cuMemHostAlloc(staging)";
      if ((r = gp_cu.memHostAlloc((void **)&staging_host, staging_cap, 0x01 | 0x02)) != 0) goto fail;
    }
  }
  step = "cuMemHostGetDevicePointer";
  if ((r = gp_cu.memHostGetDevicePointer(&c->results_dev, results_host, 0)) != 0) goto fail;
  if (staging_host && (r = gp_cu.memHostGetDevicePointer(&c->staging_dev, staging_host, 0)) != 0) goto fail;
  void *mod = NULL;
  step = "cuModuleLoadData(memcap PTX)";
  if ((r = gp_cu.moduleLoadData(&mod, gp_proc.cfg.memcap_ptx)) != 0) goto fail;
  step = "cuModuleGetFunction(gpurr_memcap)";
  if ((r = gp_cu.moduleGetFunction(&c->fn, mod, "gpurr_memcap")) != 0) goto fail;
  step = "cuModuleGetFunction(gpurr_memcap_nan)";
  if ((r = gp_cu.moduleGetFunction(&c->fn_nan, mod, "gpurr_memcap_nan")) != 0) goto fail;
  step = "cuMemAlloc(scratch)";
  if ((r = gp_cu.memAlloc(&c->scratch, results_cap)) != 0) goto fail;
  step = "cuMemAlloc(counters)";
  if ((r = gp_cu.memAlloc(&c->counters, NJOBS * 8)) != 0) goto fail;
  step = "cuMemsetD8(counters)";
  if ((r = gp_cu.memsetD8(c->counters, 0, NJOBS * 8)) != 0) goto fail;
  if (gp_proc.cfg.nan_dtypes) {
    // Without its counters this context only hashes: its states carry no
    // NaN counts, which gpurr nan reports, rather than no memory capture.
    size_t bytes = (size_t)NJOBS * GP_NAN_JOB_BYTES;
    if ((r = gp_cu.memAlloc(&c->nan_counts, bytes)) != 0 || (r = gp_cu.memsetD8(c->nan_counts, 0, bytes)) != 0) {
      c->nan_counts = 0;  // a failed memset leaves the allocation unused: the context is likely lost anyway
      gp_logf(1, "memory capture: no device memory for NaN counters (%zu bytes): %s (%d); this GPU's launches are hashed but not counted",
            bytes, cu_error(r), r);
    }
  }
  if (gp_proc.cfg.memory_mode == GP_MEM_SNAPSHOT) {
    gp_CUdevice dev = 0;
    size_t total = 0;
    gp_cu.ctxGetDevice(&dev);
    gp_cu.deviceTotalMem(&total, dev);
    c->pool_size = (total / GP_CHUNK + 1) * 16 * 2;  // twice what all of memory needs: room for fragments
    if (gp_cu.memAlloc(&c->pool, c->pool_size) != 0) {
      c->pool = c->pool_size = 0;
      gp_logf(1, "memory capture: no shadow pool (%llu bytes): every snapshot copies every chunk",
            (unsigned long long)c->pool_size);
    } else {
      c->free_cap = 64;
      c->free_off = malloc(c->free_cap * sizeof(uint64_t));
      c->free_len = malloc(c->free_cap * sizeof(uint64_t));
      if (c->free_off && c->free_len) {
        c->free_off[0] = 0;
        c->free_len[0] = c->pool_size;
        c->nfree = 1;
      }
    }
  }
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  c->ok = 1;
  return;
fail:
  gp_cu.threadExchangeStreamCaptureMode(&mode);
  c->ok = -1;
  gp_logf(2, "memory capture disabled in this context: %s: %s (%d)", step, cu_error(r), r);
}

static mem_context *context_state(void *ctx) {
  for (int i = 0; i < MAX_MEM_CONTEXTS; i++) {
    mem_context *c = &mctx[i];
    if (c->ctx == ctx && c->ok) return c->ok > 0 ? c : NULL;
  }
  pthread_mutex_lock(&mctx_mu);
  mem_context *c = NULL;
  for (int i = 0; i < MAX_MEM_CONTEXTS && !c; i++) {
    if (mctx[i].ctx == ctx && mctx[i].ok) c = &mctx[i];
    if (!mctx[i].ctx) {
      c = &mctx[i];
      c->ctx = ctx;
      gp_in_agent_call(1);
      init_context(c);
      gp_in_agent_call(0);
    }
  }
  pthread_mutex_unlock(&mctx_mu);
  return c && c->ok > 0 ? c : NULL;
}

// Shadow extents: first fit over a short free list. Caller holds alloc_lock.
static uint64_t shadow_alloc(mem_context *c, uint64_t size) {
  uint64_t need = (size + GP_CHUNK - 1) / GP_CHUNK * 16;
  for (uint32_t i = 0; i < c->nfree; i++) {
    if (c->free_len[i] < need) continue;
    uint64_t off = c->free_off[i];
    c->free_off[i] += need;
    c->free_len[i] -= need;
    return c->pool + off;
  }
  return 0;
}

static void shadow_free(void *ctx, uint64_t shadow, uint64_t size) {
  if (!shadow) return;
  for (int i = 0; i < MAX_MEM_CONTEXTS; i++) {
    mem_context *c = &mctx[i];
    if (c->ctx != ctx || !c->pool) continue;
    if (c->nfree == c->free_cap) {
      uint32_t cap = 2 * c->free_cap;
      uint64_t *o = realloc(c->free_off, cap * sizeof *o);
      if (o) c->free_off = o;
      uint64_t *l = realloc(c->free_len, cap * sizeof *l);
      if (l) c->free_len = l;
      if (!o || !l) return;  // leaked: the pool only shrinks
      c->free_cap = cap;
    }
    c->free_off[c->nfree] = shadow - c->pool;
    c->free_len[c->nfree] = (size + GP_CHUNK - 1) / GP_CHUNK * 16;
    c->nfree++;
    return;
  }
}

// ---- the job FIFO and the two rings ----

enum { JOB_FREE = 0, JOB_ENQUEUED = 1, JOB_CONSUMING = 2 };

typedef struct {
  _Atomic uint32_t state;
  uint32_t point, snapshot, nan_dtypes, region_base, nregions, njobs, total_chunks;
  uint64_t launch_seq, job_seq;
  uint64_t res_off, res_end, stg_off, stg_end;  // ring positions (monotonic byte counts)
  uint64_t region_addr[GP_MAX_JOB_REGIONS], region_size[GP_MAX_JOB_REGIONS];
  uint64_t alloc_id[GP_MAX_JOB_REGIONS], prev_job[GP_MAX_JOB_REGIONS];
  uint8_t carry[GP_MAX_JOB_REGIONS];
  uint64_t kernel_id;
  uint32_t audit, npointers;
  uint32_t step, digest_all;  // GP_POINT_DIGEST
  gp_pointer_rec pointers[GP_JOB_POINTERS];
} mem_job;

static gp_spinlock job_lock;

int gp_mem_stuck(void) { return gp_spin_stuck(&alloc_lock) || gp_spin_stuck(&job_lock); }
static mem_job *jobs;
static uint64_t job_head, job_tail;     // FIFO of jobs, under job_lock
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

static void release_tail(void) {  // caller holds job_lock
  mem_job *j = &jobs[job_tail % NJOBS];
  res_tail = j->res_end;
  if (j->snapshot) stg_tail = j->stg_end;
  atomic_store_explicit(&j->state, JOB_FREE, memory_order_release);
  job_tail++;
}

static int job_done(const mem_job *j) {
  const volatile uint64_t *done = (const volatile uint64_t *)(results_host + j->res_off % results_cap);
  return *done == j->job_seq;
}

static void push_lost(const mem_job *j, const char *reason) {
  gp_memlost_rec r;
  memset(&r, 0, sizeof r);
  r.h.type = GP_REC_MEMLOST;
  r.h.size = sizeof r;
  r.launch_seq = j->launch_seq;
  r.point = j->point;
  r.region_base = j->region_base;
  r.nregions = j->nregions;
  r.njobs = j->njobs;
  snprintf(r.reason, sizeof r.reason, "%s", reason);
  gp_ring_push(&r);
  GP_COUNT(memory_jobs_dropped, 1);
}

// drop_oldest frees the oldest job if the GPU has finished it and the
// writer has not started on it; its chunks are lost, so every allocation it
// covered copies all chunks at its next snapshot. Caller holds job_lock.
static int drop_oldest(void) {
  if (job_tail == job_head) return 0;
  mem_job *j = &jobs[job_tail % NJOBS];
  uint32_t expected = JOB_ENQUEUED;
  if (!job_done(j) || !atomic_compare_exchange_strong(&j->state, &expected, JOB_CONSUMING)) return 0;
  push_lost(j, "dropped: staging ring full (--on-full drop-oldest)");
  if (j->snapshot) {
    gp_spin_lock(&alloc_lock);
    for (uint32_t r = 0; r < j->nregions; r++)
      for (uint32_t i = 0; i < nallocs; i++)
        if (ALLOC(i) && ALLOC(i)->id == j->alloc_id[r]) ALLOC(i)->copy_all = 1;
    gp_spin_unlock(&alloc_lock);
  }
  release_tail();
  return 1;
}

// DROP_WAIT_NS bounds how long drop-oldest waits for the GPU to finish the
// oldest job before it gives up on this launch's snapshot instead: the
// oldest may sit behind a long kernel of the program.
#define DROP_WAIT_NS (10ull * 1000000ull)

// reserve_job claims a FIFO slot and ring space for a job, waiting
// (backpressure) or dropping old jobs (drop-oldest) when full. Returns the
// job, or NULL with *status set to why not.
static mem_job *reserve_job(uint64_t res_bytes, uint64_t stg_bytes, uint32_t *status) {
  if (res_bytes > results_cap || stg_bytes > staging_cap) {
    *status = GP_PLAN_SKIPPED_RING_TOO_SMALL;
    return NULL;
  }
  uint64_t t0 = 0;
  for (;;) {
    gp_spin_lock(&job_lock);
    if (job_head - job_tail < NJOBS) {
      ring_restart(&res_head, &res_tail, results_cap);
      ring_restart(&stg_head, &stg_tail, staging_cap);
      uint64_t rh = res_head, sh = stg_head;
      uint64_t ro = ring_reserve(&rh, res_tail, results_cap, res_bytes);
      uint64_t so = stg_bytes ? ring_reserve(&sh, stg_tail, staging_cap, stg_bytes) : 0;
      if (ro != UINT64_MAX && so != UINT64_MAX) {
        res_head = rh;
        stg_head = sh;
        mem_job *j = &jobs[job_head % NJOBS];
        // Only the scalars: enqueue_point fills the arrays up to the job's regions and pointers.
        memset((uint8_t *)j + sizeof j->state, 0, offsetof(mem_job, region_addr) - sizeof j->state);
        j->npointers = 0;
        j->job_seq = job_head + 1;
        j->res_off = ro;
        j->res_end = rh;
        j->stg_off = so;
        j->stg_end = stg_bytes ? sh : stg_tail;
        job_head++;
        gp_spin_unlock(&job_lock);
        if (t0) GP_COUNT(staging_wait_ns, gp_monotonic_ns() - t0);
        return j;
      }
    }
    int dropped = gp_proc.cfg.on_full == GP_ON_FULL_DROP_OLDEST && drop_oldest();
    gp_spin_unlock(&job_lock);
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
static void cancel_job(mem_job *j, const char *why) {
  volatile uint64_t *done = (volatile uint64_t *)(results_host + j->res_off % results_cap);
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

// enqueue_point launches the jobs for one point (before/after) of a launch.
// Returns a GP_PLAN_* status.
// decide_carry settles, at the launch's exit, which regions go unhashed:
// those no word may write (m->carry) whose allocation's last hash is still
// its state (hashed in this epoch, by a job still named). It notes for
// every region the job whose hash is its state before the launch.
static void decide_carry(gp_mem_launch *m, uint64_t epoch, int carrying) {
  gp_spin_lock(&alloc_lock);
  for (uint32_t r = 0; r < m->nregions; r++) {
    int ai = find_alloc_at(m->regions[r].base, m->alloc_index[r]);
    const allocation *a = ai >= 0 ? ALLOC(ai) : NULL;
    m->prev_job[r] = a && a->last_epoch == epoch ? a->last_job : 0;
    if (!carrying || !m->prev_job[r]) m->carry[r] = GP_CARRY_NONE;
  }
  gp_spin_unlock(&alloc_lock);
}

// note_hashed makes job the last hash of the job's hashed regions; hint[r]
// is where the launch found region r's allocation.
static void note_hashed(const mem_job *j, const int32_t *hint, uint64_t epoch) {
  gp_spin_lock(&alloc_lock);
  for (uint32_t r = 0; r < j->nregions; r++) {
    if (j->carry[r]) continue;
    int ai = find_alloc_at(j->region_addr[r], hint[r]);
    if (ai < 0) continue;
    ALLOC(ai)->last_job = j->job_seq;
    ALLOC(ai)->last_epoch = epoch;
  }
  gp_spin_unlock(&alloc_lock);
}

// complete_on_host publishes a job with nothing to hash (every region
// carried): no kernel runs, the writer fills it in from earlier jobs.
static void complete_on_host(mem_job *j) {
  volatile uint64_t *done = (volatile uint64_t *)(results_host + j->res_off % results_cap);
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
  mem_context *c;
  gp_CUstream stream;
  int nan;                               // jobs count NaN: gpurr_memcap_nan
  uint32_t blocks;
  uint64_t since_ns, bytes;
  mem_job *job[GP_MAX_BATCH_JOBS];
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

static gp_CUstream job_stream(gp_CUstream stream, int ptsz) {
  // A _ptsz call on stream 0 ran on the per-thread stream; our plain
  // calls must name it (CU_STREAM_PER_THREAD), or it would land on
  // the legacy stream.
  return ptsz && !stream ? (gp_CUstream)0x2 : stream;
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
            cu_error(r), r);
  }
  return sd;
}

static int batch_finished(const inflight_batch *b) {
  uint64_t consumed = __atomic_load_n(&job_tail, __ATOMIC_ACQUIRE);  // the writer took them: done
  for (uint32_t k = 0; k < b->njobs; k++)
    if (consumed < b->seq[k] && *(const volatile uint64_t *)(results_host + b->res_off[k] % results_cap) != b->seq[k])
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
    gp_logf(2, "memory capture: cuEventSynchronize(hashes): %s (%d)", cu_error(r), r);
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
static void launch_jobs(mem_context *c, gp_CUstream stream, int nan, gp_batch_param *p, mem_job *const *jobs,
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
    for (uint32_t k = 0; k < p->njobs; k++) cancel_job(jobs[k], cu_error(r));
    gp_logf(2, "memory capture: cuLaunchKernel(gpurr_memcap) for %u jobs: %s (%d)", p->njobs, cu_error(r), r);
    gp_mem_unhashed_write();  // later launches must not carry what these jobs lost
    return;
  }
  GP_COUNT(bytes_hashed, bytes);
  GP_COUNT(memory_hash_kernels, 1);
  if (!sd) return;
  if (after != 0) {  // nothing could wait for this kernel: no later write is safe from it
    gp_mem_stop("cuEventRecord after a hash kernel beside the program failed");
    gp_logf(2, "memory capture: cuEventRecord(hashes): %s (%d)", cu_error(after), after);
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

// flush_if_old launches a batch that has waited longer than
// gp_batch_max_age_ns, from whichever thread calls it (the writer's, when
// the program has stopped launching).
static void flush_if_old(void) {
  if (!atomic_load_explicit(&batch_jobs, memory_order_relaxed)) return;
  gp_spin_lock(&batch_lock);
  if (batch.p.njobs && gp_monotonic_ns() - batch.since_ns > gp_batch_max_age_ns) flush_locked(NULL);
  gp_spin_unlock(&batch_lock);
}

// batch_job adds job j with regions r[0..n) to the batch, launching the
// batch first when it cannot take it, and after when it must not wait
// (host_written: the host may write its memory) or is old. Caller holds
// batch_lock.
static void batch_job(mem_context *c, gp_CUstream stream, int nan, mem_job *j, const gp_batch_job *h,
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

// alloc_span is the allocation holding addr, as [*base, *base + *size);
// addr alone (1 byte) when the table has none, and then 0.
static int alloc_span(uint64_t addr, uint64_t *base, uint64_t *size) {
  *base = addr, *size = 1;
  gp_spin_lock(&alloc_lock);
  int ai = find_alloc(addr);
  if (ai >= 0) *base = keys[ai].base, *size = keys[ai].end - keys[ai].base;
  gp_spin_unlock(&alloc_lock);
  return ai >= 0;
}

// call_stream is the stream a driver call names, *named 0 when it names none.
static gp_CUstream call_stream(uint32_t cbid, const gp_CallbackData *cb, int *named) {
  *named = cb->functionParams && call_stream_at[cbid];
  if (!*named) return 0;
  gp_CUstream s = *(gp_CUstream const *)((const uint8_t *)cb->functionParams + call_stream_at[cbid] - 1);
  return job_stream(s, call_ptsz[cbid]);
}

static void before_call(uint32_t cbid, const gp_CallbackData *cb) {
  if (!deferring) return;
  // A context's teardown forgets the sides even when nothing is in flight.
  int teardown = call_order[cbid] == GP_ORDER_HOST && !call_stream_at[cbid];
  if (!atomic_load_explicit(&batch_jobs, memory_order_relaxed) && !atomic_load_explicit(&side_busy, memory_order_relaxed) &&
      !teardown)
    return;
  uint64_t base = 0, size = 0;  // what the call writes; size 0: anything
  int exact = 1;                // base is an allocation's
  if (write_class[cbid] == GP_WRITE_DST && cb->functionParams)
    exact = alloc_span(*(const uint64_t *)cb->functionParams, &base, &size);
  int named = 0;
  gp_CUstream s = call_stream(cbid, cb, &named);
  gp_spin_lock(&batch_lock);
  if (batch.p.njobs && (!size || batched(base, size))) flush_locked(cb->context);
  if (call_order[cbid] == GP_ORDER_HOST)
    await_all(cb->context, s, named);
  else if (call_order[cbid] == GP_ORDER_STREAM && named)
    await_write(cb->context, s, 1, 0, 0, 1);
  else if (write_class[cbid] == GP_WRITE_DST || write_class[cbid] == GP_WRITE_ANY)
    await_write(cb->context, s, named, base, size, exact);
  gp_spin_unlock(&batch_lock);
}

// before_free: what the batch hashes, and what hashes beside read, is
// hashed before an allocation is freed (its memory may be handed out
// again, or unmapped): cuMemFreeAsync's stream waits for them, the host
// for other frees.
static void before_free(uint32_t cbid, const gp_CallbackData *cb, uint64_t ptr) {
  if (!deferring) return;
  if (!atomic_load_explicit(&batch_jobs, memory_order_relaxed) && !atomic_load_explicit(&side_busy, memory_order_relaxed))
    return;
  uint64_t base, size;
  int exact = alloc_span(ptr, &base, &size);
  int async = cbid == GP_CBID_cuMemFreeAsync || cbid == GP_CBID_cuMemFreeAsync_ptsz;
  gp_CUstream s = async ? *(gp_CUstream const *)((const uint8_t *)cb->functionParams + GP_STREAM_AT_FREE_ASYNC) : 0;
  gp_spin_lock(&batch_lock);
  if (batch.p.njobs && batched(base, size)) flush_locked(cb->context);
  await_write(cb->context, job_stream(s, cbid == GP_CBID_cuMemFreeAsync_ptsz), async, base, size, exact);
  gp_spin_unlock(&batch_lock);
}

void gp_mem_before_unhashed(gp_CUcontext ctx, gp_CUstream stream, int ptsz) {
  if (!deferring) return;
  flush(ctx, 0, 0);
  if (!atomic_load_explicit(&side_busy, memory_order_relaxed)) return;
  gp_spin_lock(&batch_lock);
  await_write(ctx, job_stream(stream, ptsz), 1, 0, 0, 1);
  gp_spin_unlock(&batch_lock);
}

void gp_mem_defer(void) {
  deferring = gp_proc.cfg.defer_hashes && gp_proc.cfg.memory_mode == GP_MEM_HASH &&
              gp_proc.cfg.write_sets != GP_WRITE_SETS_ALL &&
              !writes_unseen && gp_cu.ctxPushCurrent && gp_cu.ctxPopCurrent;
}

// A point of more than GP_MAX_REGIONS regions (a step digest) is enqueued in
// parts: m holds the regions from region_offset, a multiple of
// GP_MAX_JOB_REGIONS, of total; step and digest_all describe a digest.
static uint32_t enqueue_point(gp_mem_launch *m, mem_context *c, gp_CUstream stream, uint64_t seq, uint32_t point,
                              int snapshot, uint32_t region_offset, uint32_t total, uint32_t step, uint32_t digest_all) {
  uint32_t njobs = (total + GP_MAX_JOB_REGIONS - 1) / GP_MAX_JOB_REGIONS;
  // Hash mode only: a snapshot's shadow and chunk copies want every region.
  int tracking = gp_proc.cfg.memory_mode == GP_MEM_HASH && point == GP_POINT_AFTER;
  uint64_t epoch = atomic_load_explicit(&write_epoch, memory_order_relaxed);
  if (tracking) decide_carry(m, epoch, gp_proc.cfg.write_sets != GP_WRITE_SETS_ALL && !writes_unseen);
  for (uint32_t first = 0; first < m->nregions; first += GP_MAX_JOB_REGIONS) {
    uint32_t n = m->nregions - first < GP_MAX_JOB_REGIONS ? m->nregions - first : GP_MAX_JOB_REGIONS;
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
      p.r[r].first_chunk = (uint32_t)chunks;
      chunks += (p.r[r].size + GP_CHUNK - 1) / GP_CHUNK;
    }
    if (chunks >= (1ull << 31)) return GP_PLAN_SKIPPED_RING_TOO_SMALL;
    // Only the state after a launch is scanned for NaN: before it, the
    // regions hold what the previous launch's scan already counted.
    uint32_t nan_dtypes = point != GP_POINT_BEFORE && c->nan_counts ? gp_proc.cfg.nan_dtypes : 0;
    uint64_t res_bytes = ((GP_RESULT_HEADER + 20 * chunks + 7) & ~7ull) + (nan_dtypes ? n * GP_NAN_REGION_BYTES : 0);
    res_bytes = (res_bytes + 63) & ~63ull;
    uint64_t stg_bytes = snapshot ? chunks * GP_CHUNK : 0;
    uint32_t status = 0;
    mem_job *j = reserve_job(res_bytes, stg_bytes, &status);
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
    j->launch_seq = seq;
    // Clear the header so a stale done from a previous lap never matches.
    memset(results_host + j->res_off % results_cap, 0, GP_RESULT_HEADER);
    if (!tracking) {  // tracking sets all three below
      for (uint32_t r = 0; r < n; r++) j->alloc_id[r] = point == GP_POINT_DIGEST ? m->regions[first + r].alloc_id : 0;
      memset(j->prev_job, 0, n * sizeof *j->prev_job);
      memset(j->carry, 0, n * sizeof *j->carry);
    }
    if (snapshot) {
      gp_spin_lock(&alloc_lock);
      for (uint32_t r = 0; r < n; r++) {
        int ai = find_alloc(p.r[r].base);
        allocation *a = ai >= 0 && keys[ai].base == p.r[r].base && ALLOC(ai)->size == p.r[r].size ? ALLOC(ai) : NULL;
        if (!a) {
          p.r[r].flags = 1;
          continue;
        }
        if (!a->shadow && c->pool) {
          a->shadow = shadow_alloc(c, a->size);
          a->shadow_ctx = c->ctx;
          a->copy_all = 1;
        }
        if (a->shadow_ctx != c->ctx) a->copy_all = 1;  // another device's shadow: compare nothing
        p.r[r].shadow = a->shadow_ctx == c->ctx ? a->shadow : 0;
        p.r[r].flags = a->copy_all ? 1 : 0;
        a->copy_all = 0;
        j->alloc_id[r] = a->id;
      }
      gp_spin_unlock(&alloc_lock);
    }
    for (uint32_t r = 0; r < n; r++) j->region_addr[r] = p.r[r].base, j->region_size[r] = m->regions[first + r].size;
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
      note_hashed(j, m->alloc_index + first, epoch);
    }
    if (!chunks) {
      atomic_store_explicit(&j->state, JOB_ENQUEUED, memory_order_release);
      complete_on_host(j);
      continue;
    }
    uint64_t slot = (j->job_seq - 1) % NJOBS;
    h->seq = j->job_seq;
    h->out = c->results_dev + j->res_off % results_cap;
    h->staging = snapshot ? c->staging_dev + j->stg_off % staging_cap : 0;
    h->scratch = c->scratch + (j->res_off % results_cap + GP_RESULT_HEADER);
    h->counters = c->counters + slot * 8;
    h->nan_counts = nan_dtypes ? c->nan_counts + slot * GP_NAN_JOB_BYTES : 0;
    h->nan_dtypes = nan_dtypes;
    h->nregions = n;
    h->total_chunks = (uint32_t)chunks;
    h->snapshot = snapshot;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) bytes += p.r[i].size;
    atomic_store_explicit(&j->state, JOB_ENQUEUED, memory_order_release);
    if (!deferring || snapshot || point == GP_POINT_DIGEST) {  // a kernel for this job alone, now: nothing waits
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

void gp_mem_launch_enter(gp_mem_launch *m, const uint8_t *params, uint32_t params_len, gp_CUcontext ctx,
                         gp_CUstream stream, int ptsz, uint64_t seq, int snapshot_kernel, uint64_t kernel_id,
                         const gp_readonly *ro, int audit, int library_kernel) {
  m->status = GP_PLAN_NONE;
  m->snapshot = gp_proc.cfg.memory_mode == GP_MEM_SNAPSHOT && snapshot_kernel && selected_launch(seq);
  m->kernel_id = kernel_id;
  m->audit = audit;
  int learned = gp_proc.cfg.write_sets == GP_WRITE_SETS_LEARNED && !audit;
  gp_spin_lock(&alloc_lock);
  find_regions(m, params, params_len, ro, learned, library_kernel ? GP_OWNER_NCCL : GP_OWNER_PROGRAM);
  gp_spin_unlock(&alloc_lock);
  if (deferring) before_launch(m, ctx, job_stream(stream, ptsz), ro && ro->writes_anywhere);
  if (!m->nregions) {
    m->status = GP_PLAN_SKIPPED_NO_REGIONS;
    return;
  }
  if (atomic_load_explicit(&stopped, memory_order_relaxed)) {
    m->status = GP_PLAN_SKIPPED_STOPPED;
    return;
  }
  if (!m->snapshot) return;  // hash mode works at exit only
  gp_CUstream s = job_stream(stream, ptsz);
  int capturing = 0;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.streamIsCapturing(s, &capturing);
  gp_in_agent_call(0);
  if (r != 0 || capturing) {
    m->status = GP_PLAN_SKIPPED_CAPTURE;
    return;
  }
  mem_context *c = context_state(ctx);
  if (!c) {
    m->status = GP_PLAN_SKIPPED_ERROR;
    return;
  }
  m->status = enqueue_point(m, c, s, seq, GP_POINT_BEFORE, 1, 0, m->nregions, 0, 0);
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
  mem_context *c = context_state(ctx);
  if (!c) {
    m->status = GP_PLAN_SKIPPED_ERROR;
    skipped(m->status);
    return;
  }
  uint32_t s = enqueue_point(m, c, job_stream(stream, ptsz), seq, GP_POINT_AFTER, m->snapshot, 0, m->nregions, 0, 0);
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

// ---- step digests ----
//
// Where a training step ends, the state of the memory the program keeps
// across steps is hashed (one DIGEST point): two runs whose digests agree
// agree on their parameters, gradients and optimizer state, whatever their
// launches did in between. With optimizer steps, a step's digest hashes the
// allocations its optimizer's launches reached (parameters, gradients, the
// optimizer's state: what a divergence flows into by the step's end), found
// as those launches are made; a step whose optimizer ran a graph, or steps
// without an optimizer (--step-every), hash every live allocation the
// program owns. Libraries' own memory (Allocation.owner) is never hashed:
// it differs from run to run by design.

enum { OPT_SET = 4096 };  // open addressing over allocation bases; a step's optimizer reaches far fewer
static gp_spinlock opt_lock;
static uint64_t opt_set[OPT_SET];
static uint32_t opt_count;
static int opt_all;  // the step ran something whose memory is unknown: hash every allocation

void gp_mem_note_optimizer_all(void) {
  gp_spin_lock(&opt_lock);
  opt_all = 1;
  gp_spin_unlock(&opt_lock);
}

void gp_mem_note_optimizer(const uint8_t *params, uint32_t params_len) {
  gp_thread_scratch *s = gp_scratch();
  if (!s) {
    gp_mem_note_optimizer_all();
    return;
  }
  gp_mem_launch *m = &s->mem;
  gp_spin_lock(&alloc_lock);
  find_regions(m, params, params_len, NULL, 0, GP_OWNER_PROGRAM);
  gp_spin_unlock(&alloc_lock);
  gp_spin_lock(&opt_lock);
  for (uint32_t r = 0; r < m->nregions; r++) {
    uint64_t base = m->regions[r].base;
    uint32_t i = (uint32_t)((base >> 8) * 0x9E3779B97F4A7C15ull >> 52) % OPT_SET;
    while (opt_set[i] && opt_set[i] != base) i = (i + 1) % OPT_SET;
    if (opt_set[i]) continue;
    if (opt_count >= OPT_SET / 2) {
      opt_all = 1;  // more than a digest of chosen allocations is worth: hash them all
      break;
    }
    opt_set[i] = base;
    opt_count++;
  }
  gp_spin_unlock(&opt_lock);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

// The regions of one digest part: a multiple of GP_MAX_JOB_REGIONS, at most GP_MAX_REGIONS.
enum { DIGEST_PART = GP_MAX_REGIONS / GP_MAX_JOB_REGIONS * GP_MAX_JOB_REGIONS };

static pthread_mutex_t digest_mu = PTHREAD_MUTEX_INITIALIZER;
static gp_mem_launch digest_part;  // under digest_mu

static void digest_skipped(const char *why) {
  static _Atomic int said;
  GP_COUNT(digests_skipped, 1);
  if (!atomic_exchange(&said, 1)) gp_logf(1, "step digest not taken: %s (later ones are counted, not logged)", why);
}

void gp_mem_digest(gp_CUcontext ctx, gp_CUstream stream, int ptsz, uint64_t seq, uint32_t step) {
  // The step's optimizer set is taken, and emptied for the next step, whatever becomes of it.
  gp_spin_lock(&opt_lock);
  int all = opt_all || !opt_count || gp_proc.cfg.step_every || gp_proc.cfg.digest_all;
  uint64_t *chosen = all ? NULL : malloc(opt_count * sizeof *chosen);
  uint32_t nchosen = 0;
  for (uint32_t i = 0; chosen && i < OPT_SET; i++)
    if (opt_set[i]) chosen[nchosen++] = opt_set[i];
  if (!all && !chosen) all = 1;
  if (chosen) qsort(chosen, nchosen, sizeof *chosen, cmp_u64);
  memset(opt_set, 0, sizeof opt_set);
  opt_count = 0;
  opt_all = 0;
  gp_spin_unlock(&opt_lock);
  if (atomic_load_explicit(&stopped, memory_order_relaxed)) {
    free(chosen);
    digest_skipped("memory capture stopped");
    return;
  }
  gp_CUstream s = job_stream(stream, ptsz);
  int capturing = 0;
  gp_in_agent_call(1);
  gp_CUresult r = gp_cu.streamIsCapturing(s, &capturing);
  gp_in_agent_call(0);
  mem_context *c = r == 0 && !capturing ? context_state(ctx) : NULL;
  gp_CUdevice dev = 0;
  if (c && gp_cu.ctxGetDevice(&dev) != 0) c = NULL;
  if (!c) {
    free(chosen);
    digest_skipped(capturing ? "the step began inside a stream capture" : "no memory capture on this context");
    return;
  }
  // The allocations, in address order, as the table holds them.
  uint32_t n = 0, cap = 256;
  gp_region_rec *regs = malloc(cap * sizeof *regs);
  gp_spin_lock(&alloc_lock);
  for (uint32_t i = 0; regs && i < nallocs; i++) {
    const allocation *a = ALLOC(i);
    if (!a || a->owner != GP_OWNER_PROGRAM || a->device != (uint32_t)dev || a->kind == GP_ALLOC_MANAGED ||
        a->kind == GP_ALLOC_RANGE_QUERY)
      continue;
    if (!all && !bsearch(&a->base, chosen, nchosen, sizeof *chosen, cmp_u64)) continue;
    if (n == cap) {
      gp_region_rec *grown = realloc(regs, 2 * cap * sizeof *regs);
      if (!grown) break;
      regs = grown, cap *= 2;
    }
    regs[n++] = (gp_region_rec){a->base, a->size, a->id};
  }
  gp_spin_unlock(&alloc_lock);
  free(chosen);
  if (!regs || !n) {
    free(regs);
    digest_skipped(regs ? "no allocation of the program's on this device" : "out of host memory");
    return;
  }
  pthread_mutex_lock(&digest_mu);
  gp_mem_launch *m = &digest_part;
  uint32_t status = GP_PLAN_HASH;
  for (uint32_t off = 0; off < n && status == GP_PLAN_HASH; off += DIGEST_PART) {
    uint32_t k = n - off < DIGEST_PART ? n - off : DIGEST_PART;
    memset(m, 0, offsetof(gp_mem_launch, regions));
    m->nregions = k;
    memcpy(m->regions, regs + off, k * sizeof *regs);
    for (uint32_t i = 0; i < k; i++) m->alloc_index[i] = -1, m->carry[i] = GP_CARRY_NONE, m->prev_job[i] = 0;
    status = enqueue_point(m, c, s, seq, GP_POINT_DIGEST, 0, off, n, step, (uint32_t)all);
  }
  pthread_mutex_unlock(&digest_mu);
  free(regs);
  if (status != GP_PLAN_HASH) {
    digest_skipped(status == GP_PLAN_SKIPPED_RING_TOO_SMALL ? "its chunk hashes do not fit the results ring"
                                                            : "no room for its jobs");
    return;
  }
  GP_COUNT(digests, 1);
}

// ---- the writer's side ----

int gp_mem_poll(gp_memjob_view *v) {
  if (!jobs) return 0;
  gp_spin_lock(&job_lock);
  if (job_tail == job_head) {
    gp_spin_unlock(&job_lock);
    return 0;
  }
  mem_job *j = &jobs[job_tail % NJOBS];
  uint32_t expected = JOB_ENQUEUED;
  if (!job_done(j) || !atomic_compare_exchange_strong(&j->state, &expected, JOB_CONSUMING)) {
    gp_spin_unlock(&job_lock);
    flush_if_old();  // the oldest job may be waiting in a batch no launch has come to end
    return 0;
  }
  gp_spin_unlock(&job_lock);
  const uint8_t *res = results_host + j->res_off % results_cap;
  v->launch_seq = j->launch_seq;
  v->job_seq = j->job_seq;
  v->point = j->point;
  v->snapshot = j->snapshot;
  v->nan_dtypes = j->nan_dtypes;
  v->region_base = j->region_base;
  v->nregions = j->nregions;
  v->njobs = j->njobs;
  v->total_chunks = j->total_chunks;
  v->transferred = ((const volatile uint32_t *)res)[2];
  v->lost = ((const volatile uint32_t *)res)[3];
  v->result = res;
  v->staging = j->snapshot ? staging_host + j->stg_off % staging_cap : NULL;
  // The arrays hold nregions and npointers entries: the rest is stale.
  memcpy(v->region_addr, j->region_addr, j->nregions * sizeof *v->region_addr);
  memcpy(v->region_size, j->region_size, j->nregions * sizeof *v->region_size);
  memcpy(v->alloc_id, j->alloc_id, j->nregions * sizeof *v->alloc_id);
  memcpy(v->prev_job, j->prev_job, j->nregions * sizeof *v->prev_job);
  memcpy(v->carry, j->carry, j->nregions * sizeof *v->carry);
  v->kernel_id = j->kernel_id;
  v->audit = j->audit;
  v->npointers = j->npointers;
  v->step = j->step;
  v->digest_all = j->digest_all;
  memcpy(v->pointers, j->pointers, (j->npointers < GP_JOB_POINTERS ? j->npointers : GP_JOB_POINTERS) * sizeof *v->pointers);
  return 1;
}

void gp_mem_release(void) {
  gp_spin_lock(&job_lock);
  if (job_tail != job_head) release_tail();
  gp_spin_unlock(&job_lock);
}

uint64_t gp_mem_outstanding(void) {
  gp_spin_lock(&job_lock);
  uint64_t n = job_head - job_tail;
  gp_spin_unlock(&job_lock);
  return n;
}

// gp_mem_flush_lost reports every job still in the FIFO as lost (at exit,
// after the writer gave the GPU time to finish them).
void gp_mem_flush_lost(const char *reason) {
  gp_spin_lock(&job_lock);
  while (job_tail != job_head) {
    mem_job *j = &jobs[job_tail % NJOBS];
    push_lost(j, reason);
    release_tail();
  }
  gp_spin_unlock(&job_lock);
}

// ---- start ----

int gp_mem_start(const gp_config *cfg, char *err, size_t errcap) {
  const char *missing = gp_driver_missing(GP_NEED_MEMORY);
  if (missing) {
    snprintf(err, errcap, "libcuda.so.1 has no symbol %s (driver too old for memory capture?)", missing);
    return 0;
  }
  results_cap = cfg->results_bytes;
  staging_cap = cfg->memory_mode == GP_MEM_SNAPSHOT ? cfg->staging_bytes : 0;
  jobs = calloc(NJOBS, sizeof *jobs);
  if (!jobs) {
    snprintf(err, errcap, "cannot allocate the memory job table");
    return 0;
  }
  return 1;
}
