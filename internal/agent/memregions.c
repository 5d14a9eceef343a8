// The regions of a launch (the allocations its parameter words point into)
// and which of them may go unhashed (carried) by what is known of the
// kernel's writes (write sets, docs/memory.md); the driver calls that write
// device memory outside kernels, or order work after launches.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcap_internal.h"

// Set when CUPTI cannot name the copy and memset calls: then nothing is carried.
int gp_writes_unseen;

// ---- regions of one launch ----

enum { QUERIES_PER_LAUNCH = 8 };  // range queries (memalloc.c) a launch may make
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
    const gp_allocation *a = GP_ALLOC_AT(ai);
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

// gp_find_regions widens every parameter word that points into an allocation
// to the whole allocation; a cuMemMap'd piece brings the pieces mapped right
// next to it, since a tensor may straddle them (expandable segments).
void gp_find_regions(gp_mem_launch *m, const uint8_t *params, uint32_t len, const gp_readonly *ro, int learned,
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
    if (w >= gp_alloc_lo && w < gp_alloc_hi) {
      for (uint32_t i = m->nregions; i-- > 0;) {
        const gp_alloc_key *k = &gp_alloc_keys[m->alloc_index[i]];
        if (w - k->base < k->end - k->base) {
          r = (int)i, ai = m->alloc_index[i];
          break;
        }
      }
      if (ai < 0) ai = gp_find_alloc(w);
    }
    if (ai < 0 && queries < QUERIES_PER_LAUNCH) {
      // Looked up without the lock held: gp_range_query takes it to insert.
      gp_spin_unlock(&gp_alloc_lock);
      queries++;
      int ok = gp_range_query(w, owner) == 0;
      gp_spin_lock(&gp_alloc_lock);
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
    if (GP_ALLOC_AT(ai)->kind != GP_ALLOC_MAP) continue;
    for (int j = ai - 1; j >= 0 && gp_alloc_joined((uint32_t)j); j--)
      if (add_region(m, j, carry) < 0) break;
    for (int j = ai; gp_alloc_joined((uint32_t)j); j++)
      if (add_region(m, j + 1, carry) < 0) break;
  }
  for (uint32_t r = 0; r < m->nregions; r++)
    if (m->carry[r] == CARRY_UNSET) m->carry[r] = GP_CARRY_NONE;
}

// gp_write_regions finds the regions a copy or memset writing from dst on
// may reach: the allocation holding dst and the cuMemMap'd pieces mapped
// next to it, which a copy may run into. Only allocations the table holds:
// a destination it does not know is host memory (cuMemcpy to the host) or
// memory no call showed, and no range query is made for it.
void gp_write_regions(gp_mem_launch *m, uint64_t dst) {
  m->nregions = m->npointers = m->host_written = 0;
  int ai = gp_find_alloc(dst);
  if (ai < 0) return;
  add_region(m, ai, GP_CARRY_NONE);
  for (int j = ai - 1; j >= 0 && gp_alloc_joined((uint32_t)j); j--)
    if (add_region(m, j, GP_CARRY_NONE) < 0) break;
  for (int j = ai; gp_alloc_joined((uint32_t)j); j++)
    if (add_region(m, j + 1, GP_CARRY_NONE) < 0) break;
}

// gp_decide_carry settles, at the launch's exit, which regions go unhashed:
// those no word may write (m->carry) whose allocation's last hash is still
// its state (hashed in this epoch, by a job still named). It notes for
// every region the job whose hash is its state before the launch.
void gp_decide_carry(gp_mem_launch *m, uint64_t epoch, int carrying) {
  gp_spin_lock(&gp_alloc_lock);
  for (uint32_t r = 0; r < m->nregions; r++) {
    int ai = gp_find_alloc_at(m->regions[r].base, m->alloc_index[r]);
    const gp_allocation *a = ai >= 0 ? GP_ALLOC_AT(ai) : NULL;
    m->prev_job[r] = a && a->last_epoch == epoch ? a->last_job : 0;
    if (!carrying || !m->prev_job[r]) m->carry[r] = GP_CARRY_NONE;
  }
  gp_spin_unlock(&gp_alloc_lock);
}

// gp_note_hashed makes job the last hash of the job's hashed regions; hint[r]
// is where the launch found region r's allocation.
void gp_note_hashed(const gp_mem_job *j, const int32_t *hint, uint64_t epoch) {
  gp_spin_lock(&gp_alloc_lock);
  for (uint32_t r = 0; r < j->nregions; r++) {
    if (j->carry[r]) continue;
    int ai = gp_find_alloc_at(j->region_addr[r], hint[r]);
    if (ai < 0) continue;
    GP_ALLOC_AT(ai)->last_job = j->job_seq;
    GP_ALLOC_AT(ai)->last_epoch = epoch;
  }
  gp_spin_unlock(&gp_alloc_lock);
}


// ---- writes outside kernels ----

// By driver cbid: how a call that writes device memory names what it writes (GP_WRITE_*).
uint8_t gp_call_write_class[GP_MAX_WRITE_CBID];
// By driver cbid, for hashes running beside the program (--defer-hashes):
// what the call must wait for (GP_ORDER_*), and where its parameters name
// its stream (byte offset + 1; 0: it names none), per-thread when gp_call_ptsz.
uint8_t gp_call_order[GP_MAX_WRITE_CBID], gp_call_stream_at[GP_MAX_WRITE_CBID], gp_call_ptsz[GP_MAX_WRITE_CBID];

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
    gp_writes_unseen = 1;
    gp_logf(1, "memory capture: CUPTI cannot name driver calls (no cuptiGetCallbackName): copies go unseen, with no copy states, and every region is hashed after every launch");
    return 0;
  }
  size_t n = 0;
  for (uint32_t cbid = 1; cbid < GP_MAX_WRITE_CBID; cbid++) {
    const char *name = NULL;
    if (gp_cupti_callback_name(GP_CB_DOMAIN_DRIVER_API, cbid, &name) != 0 || !name) continue;
    gp_call_write_class[cbid] = (uint8_t)gp_mem_write_class(name);
    gp_call_order[cbid] = (uint8_t)gp_mem_call_order(name, &gp_call_stream_at[cbid]);
    gp_call_ptsz[cbid] = (uint8_t)is_ptsz_name(name);
    // Calls that write nothing matter only to deferred hash kernels: else
    // their callbacks would cost the program for nothing.
    if (gp_call_write_class[cbid] == GP_WRITE_FLUSH && !gp_proc.cfg.defer_hashes) gp_call_write_class[cbid] = GP_WRITE_NONE;
    if (!gp_call_write_class[cbid]) continue;
    if (n == cap) {  // a call left unwatched could write what is carried
      gp_writes_unseen = 1;
      gp_logf(1, "memory capture: more driver calls write memory than the agent watches (%zu): every region is hashed after every launch", cap);
      return n;
    }
    out[n++] = cbid;
  }
  if (!n) gp_writes_unseen = 1;
  return n;
}

int gp_mem_write_callback(uint32_t cbid) { return cbid < GP_MAX_WRITE_CBID && gp_call_write_class[cbid]; }

int gp_mem_teardown_call(uint32_t cbid) {
  return cbid < GP_MAX_WRITE_CBID && gp_call_order[cbid] == GP_ORDER_HOST && !gp_call_stream_at[cbid];
}
