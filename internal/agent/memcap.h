// Memory capture: the device memory each launch can reach (regions), and
// the GPU work the agent enqueues around a launch on its own stream to hash
// or snapshot that memory (internal/kernels/src/hash.cu). Results land in
// pinned host rings that the Go writer drains (docs/memory.md).
#ifndef GPURR_MEMCAP_H
#define GPURR_MEMCAP_H

#include <stdint.h>

#include "agent.h"
#include "cabi.h"

// GP_MEM_DIGEST: no memory work per launch, only step digests.
enum { GP_MEM_OFF = 0, GP_MEM_HASH = 1, GP_MEM_SNAPSHOT = 2, GP_MEM_DIGEST = 3 };
enum { GP_ON_FULL_BACKPRESSURE = 0, GP_ON_FULL_DROP_OLDEST = 1 };

// MemoryPlan.Status values (recording.proto).
enum {
  GP_PLAN_NONE = 0,
  GP_PLAN_HASH = 1,
  GP_PLAN_SNAPSHOT = 2,
  GP_PLAN_SKIPPED_CAPTURE = 3,
  GP_PLAN_SKIPPED_NO_REGIONS = 4,
  GP_PLAN_SKIPPED_RING_TOO_SMALL = 5,
  GP_PLAN_SKIPPED_RING_FULL = 6,
  GP_PLAN_SKIPPED_ERROR = 7,
  GP_PLAN_SKIPPED_STOPPED = 8,
  GP_PLAN_OUTSIDE_STEPS = 9,
};

// Allocation.Kind values.
enum {
  GP_ALLOC_MEM_ALLOC = 1,
  GP_ALLOC_PITCH = 2,
  GP_ALLOC_ASYNC = 3,
  GP_ALLOC_MAP = 4,
  GP_ALLOC_MANAGED = 5,
  GP_ALLOC_RANGE_QUERY = 6,
};

enum { GP_POINT_BEFORE = 1, GP_POINT_AFTER = 2, GP_POINT_DIGEST = 3, GP_POINT_COPY = 4 };

// Allocation.owner: the library that made an allocation for its own use.
enum { GP_OWNER_PROGRAM = 0, GP_OWNER_NCCL = 1, GP_OWNER_NVSHMEM = 2, GP_OWNER_UCX = 3 };

// Write sets (docs/memory.md): which regions hash mode may leave unhashed.
enum { GP_WRITE_SETS_ALL = 0, GP_WRITE_SETS_PROVED = 1, GP_WRITE_SETS_LEARNED = 2 };
// Why a region may be carried (RegionState.Carried); NONE: the launch may write it.
enum { GP_CARRY_NONE = 0, GP_CARRY_PROVED = 1, GP_CARRY_LEARNED = 2 };

// What is known of a kernel's parameter words, published by the writer
// (gp_kernel_readonly) and never changed after: bit w of proved (learned)
// says no store goes through the word at byte 8w (its launches never
// changed what it points to). bits holds proved's n64 words, then learned's.
typedef struct {
  uint32_t nwords, n64;
  uint32_t writes_anywhere;  // its PTX stores through pointers loaded from memory
  uint32_t pad;
  uint64_t bits[];
} gp_readonly;

enum { GP_MAX_JOB_REGIONS = 48, GP_CHUNK = 65536, GP_RESULT_HEADER = 64 };
// nan-scan: 8 uint64 counters per region (NaN and Inf of f32, f64, f16, bf16).
enum { GP_NAN_REGION_BYTES = 64, GP_NAN_JOB_BYTES = GP_MAX_JOB_REGIONS * GP_NAN_REGION_BYTES };

// gpurr_batch of hash.cu, the kernel's parameter (2120 bytes): up to
// GP_MAX_BATCH_JOBS jobs, GP_MAX_JOB_REGIONS regions in all.
typedef struct {
  uint64_t base, size, shadow;
  uint32_t first_chunk, flags;  // first_chunk counts from the job's first
} gp_job_region;

enum { GP_MAX_BATCH_JOBS = 8 };

typedef struct {
  uint64_t seq, out, staging, scratch, counters, nan_counts;
  uint32_t nregions, total_chunks, snapshot, nan_dtypes;
  uint32_t first_region, first_block;  // its regions and blocks in the batch
} gp_batch_job;

typedef struct {
  uint32_t njobs, nregions;
  gp_batch_job j[GP_MAX_BATCH_JOBS];
  gp_job_region r[GP_MAX_JOB_REGIONS];
} gp_batch_param;
_Static_assert(sizeof(gp_batch_param) == 2120, "gp_batch_param mirrors hash.cu's gpurr_batch");

// One region in a launch record's tail.
typedef struct {
  uint64_t base, size, alloc_id;
} gp_region_rec;

// One parameter word that points into a region.
typedef struct {
  uint32_t offset, region;
} gp_pointer_rec;

typedef struct {
  gp_rec_hdr h;
  uint64_t id, address, size, host_ns;
  uint32_t kind, device, freed, owner;  // owner: GP_OWNER_*
  uint64_t callstack_id;                // the allocating call's, 0 none
  uint32_t cleared, pad;                // memory capture cleared it (zero_fill, memcap.c)
  uint64_t launch_seq;                  // the last launch call before it (gp_launch_seq)
} gp_alloc_rec;

// A memory job that will never produce results (dropped to make room), or a
// copy state that could not be taken. A lost copy state (point
// GP_POINT_COPY) is followed by its nregions gp_region_rec: what it wrote.
typedef struct {
  gp_rec_hdr h;
  uint64_t launch_seq;
  uint32_t point, region_base, nregions, njobs;
  char reason[64];
  uint32_t call, pad;  // GP_POINT_COPY: the call's correlation id
} gp_memlost_rec;

// The parameter words of a job's launch that point into its regions, for
// the writer to learn write sets by (region numbered within the job).
enum { GP_JOB_POINTERS = 96 };

// What the Go writer sees of a completed job (gp_mem_poll).
typedef struct {
  uint64_t launch_seq, job_seq, kernel_id;
  uint32_t point, snapshot, nan_dtypes, region_base, nregions, njobs, total_chunks, transferred, lost;
  uint32_t audit, npointers;  // npointers > GP_JOB_POINTERS: not all listed
  uint32_t step, digest_all;  // GP_POINT_DIGEST: the step that ended; every live allocation (1) or the optimizer's (0)
  uint32_t piece, piece_first;  // piece: chunks [piece_first, + total_chunks) of its one region (region_* the whole)
  uint32_t call, pad;  // GP_POINT_COPY: the copy's correlation id; launch_seq is the last launch call before it
  const uint8_t *result;   // ResultLayout of internal/kernels
  const uint8_t *staging;  // transferred × GP_CHUNK bytes
  uint64_t region_addr[GP_MAX_JOB_REGIONS], region_size[GP_MAX_JOB_REGIONS];
  uint64_t alloc_id[GP_MAX_JOB_REGIONS], prev_job[GP_MAX_JOB_REGIONS];
  uint8_t carry[GP_MAX_JOB_REGIONS];  // GP_CARRY_*: not hashed (size 0 in the job), state of prev_job's
  gp_pointer_rec pointers[GP_JOB_POINTERS];
} gp_memjob_view;

// Per-launch state between ENTER and EXIT, kept in thread scratch.
enum { GP_MAX_REGIONS = 512, GP_MAX_POINTERS = 4096 };
typedef struct {
  uint32_t nregions, npointers;
  uint32_t status, snapshot;
  uint64_t kernel_id;
  uint32_t audit;  // learned write sets: hash every region of this launch, to check them
  uint32_t host_written;  // a region is memory the host or another process may write (managed, IPC)
  gp_region_rec regions[GP_MAX_REGIONS];
  int32_t alloc_index[GP_MAX_REGIONS];
  uint8_t carry[GP_MAX_REGIONS];      // GP_CARRY_*, from the words pointing into each region
  uint64_t prev_job[GP_MAX_REGIONS];  // the job whose hash is the region's state before the launch, 0: unknown
  gp_pointer_rec pointers[GP_MAX_POINTERS];
} gp_mem_launch;

// Implemented in the mem*.c files (memcap_internal.h lists them by job).
int gp_mem_start(const gp_config *cfg, char *err, size_t errcap);
// Step digests: gp_mem_note_optimizer adds the allocations a launch made
// inside an optimizer step can reach to what the step's digest hashes (all
// of them, after gp_mem_note_optimizer_all: a graph ran in the step);
// gp_mem_digest enqueues the digest of the step that ended on stream,
// before launch seq.
void gp_mem_note_optimizer(const uint8_t *params, uint32_t params_len);
void gp_mem_note_optimizer_all(void);
void gp_mem_digest(gp_CUcontext ctx, gp_CUstream stream, int ptsz, uint64_t seq, uint32_t step);
int gp_mem_alloc_callback(uint32_t cbid);  // is cbid one memcap needs?
int gp_mem_error_callback(uint32_t cbid);  // does cbid report a failed kernel (flight recorder)?
void gp_mem_on_api(uint32_t cbid, const gp_CallbackData *cb);
void gp_mem_launch_enter(gp_mem_launch *m, const uint8_t *params, uint32_t params_len, gp_CUcontext ctx,
                         gp_CUstream stream, int ptsz, uint64_t seq, int snapshot_kernel, uint64_t kernel_id,
                         const gp_readonly *ro, int audit, int library_kernel);
// Writes memory capture does not hash: a copy or memset (gp_mem_on_write,
// for the driver calls gp_mem_write_callback names), a graph launch, a
// launch whose memory ops were skipped. Regions they may reach are hashed
// again at their next launch rather than carried.
int gp_mem_write_callback(uint32_t cbid);

// gp_mem_teardown_call: of those, a call that ends a context (cuCtxDestroy,
// cuDevicePrimaryCtxRelease and Reset), after which its streams and memory
// are gone.
int gp_mem_teardown_call(uint32_t cbid);
// gp_kernel_readonly publishes ro (malloc'd, kept for the process's life) for kernel_id (launch.c).
void gp_kernel_readonly(uint64_t kernel_id, gp_readonly *ro);
// gp_mem_on_write, at a write call's exit: under hash and snapshot modes, a
// copy or memset into an allocation the agent knows also gets a copy state
// (GP_POINT_COPY): the state of what it wrote, taken on its stream right
// after it, as a launch's regions are after the launch.
void gp_mem_on_write(uint32_t cbid, const gp_CallbackData *cb);
void gp_mem_unhashed_write(void);
// Deferred hash kernels (memjobs.c): gp_mem_defer turns them on once the
// calls that write memory are watched; gp_mem_before_unhashed launches the
// waiting ones, and makes stream wait for those running, before something
// runs on it that may write anything (a graph, a filtered kernel);
// gp_mem_flush_batch launches them (exit).
void gp_mem_defer(void);
void gp_mem_before_unhashed(gp_CUcontext ctx, gp_CUstream stream, int ptsz);
void gp_mem_flush_batch(void);
extern uint64_t gp_batch_max_age_ns;
// gp_mem_write_cbids lists the driver calls that write device memory
// outside kernels (by CUPTI's names for them); 0 when CUPTI cannot name
// them, and then nothing is carried.
size_t gp_mem_write_cbids(uint32_t *out, size_t cap);
// GP_WRITE_FLUSH: calls that write no device memory but after which the
// program may look at it or capture its stream (synchronizations, copies
// to the host, capture begins, stream and context teardown): deferred hash
// kernels are launched before them.
enum { GP_WRITE_NONE = 0, GP_WRITE_DST = 1, GP_WRITE_ANY = 2, GP_WRITE_FLUSH = 3 };
int gp_mem_write_class(const char *driver_call);  // GP_WRITE_*
// gp_mem_call_order sorts a driver call by what it waits for while hashes
// run beside the program (--defer-hashes): GP_ORDER_STREAM, its stream (it
// orders the program's other streams, or the host, after that stream's
// launches: event records, stream synchronizations); GP_ORDER_HOST, the
// host (teardown of what the hashes run on or read). *stream_at is where
// its parameters name its stream (byte offset + 1), 0 where they name none.
enum { GP_ORDER_NONE = 0, GP_ORDER_STREAM = 1, GP_ORDER_HOST = 2 };
int gp_mem_call_order(const char *driver_call, uint8_t *stream_at);
void gp_mem_launch_exit(gp_mem_launch *m, gp_CUcontext ctx, gp_CUstream stream, int ptsz, uint64_t seq,
                        int captured, int result, int writes_anywhere);
int gp_mem_poll(gp_memjob_view *v);
// gp_mem_copy_all makes the next snapshot of each allocation named copy
// every chunk, whatever its shadow says: the writer found chunks whose
// copied bytes are not what the GPU hashed (another stream wrote them in
// between), so the shadow names bytes that were never stored.
void gp_mem_copy_all(const uint64_t *alloc_ids, uint32_t n);
void gp_mem_release(void);
uint64_t gp_mem_outstanding(void);
void gp_mem_stop(const char *reason);
// gp_mem_stop_reason is why memory capture stopped, "" while it runs.
const char *gp_mem_stop_reason(void);
void gp_mem_flush_lost(const char *reason);

#endif
