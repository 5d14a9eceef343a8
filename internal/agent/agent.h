// The contract between the agent's C half and its Go writer: the records the
// C hot path passes through the ring, the configuration, the counters and
// the calls Go makes. Every record starts with gp_rec_hdr; sizes are padded
// to 8 bytes so a header never straddles the end of the ring. (internal.h
// is what the C files share among themselves.)
#ifndef GPURR_AGENT_H
#define GPURR_AGENT_H

#include <stdint.h>
#include <stddef.h>

enum {
  GP_REC_LAUNCH = 1,
  GP_REC_KERNEL = 2,
  GP_REC_STACK = 3,
  GP_REC_MODULE = 4,
  GP_REC_ACTIVITY = 5,
  GP_REC_GRAPHNODE = 6,
  GP_REC_GRAPHLAUNCH = 7,
  GP_REC_DEVICE = 8,
  GP_REC_LOG = 9,
  GP_REC_ALLOC = 10,
  GP_REC_MEMLOST = 11,
  GP_REC_OWN_ACTIVITY = 12,  // a gp_activity_rec of gpurr's own memory-capture kernel
  GP_REC_NODECLASS = 13,     // a gp_nodeclass_rec (autograd.h)
  GP_REC_RANGE = 14,         // an NVTX range opened (nvtx.c)
  GP_REC_RANGE_END = 15,     // an NVTX range closed
  GP_REC_NVTX_NAME = 16,     // an NVTX domain or registered string named
  GP_REC_PROBE_SKIP = 17,    // a launch of a probed kernel ran without probes (probe.h)
  GP_REC_COPY = 18,          // a gp_copy_rec: a memory copy or memset on the GPU (activity.c)
  GP_REC_SYNC = 19,          // a gp_sync_rec: the host waited for the GPU (activity.c)
  GP_REC_HOSTCALL = 20,      // a gp_hostcall_rec: the program's copy, memset or synchronization call (hostcall.c)
};

typedef struct {
  uint32_t type;
  uint32_t size;  // whole record, header included, multiple of 8
} gp_rec_hdr;

// GP_REC_PROBE_SKIP: why (GP_PROBE_SKIP_*; probe.go words them).
typedef struct {
  gp_rec_hdr h;
  uint64_t seq;
  uint32_t reason, pad;
} gp_probe_skip_rec;

enum {
  GP_PROBE_SKIP_EXTRA = 1,      // parameters passed packed (extra), not as kernelParams
  GP_PROBE_SKIP_CAPTURED = 2,   // launched into a CUDA graph being captured
  GP_PROBE_SKIP_POOL_FULL = 3,  // earlier launches' records still hold the pool
  GP_PROBE_SKIP_TOO_LARGE = 4,  // more CTAs than the pool holds records for
  GP_PROBE_SKIP_FAILED = 5,     // the launch itself failed
  GP_PROBE_SKIP_CUDA_ERROR = 6, // the agent's own CUDA call around it failed
  GP_PROBE_SKIP_PARAMS = 7,     // too many parameters
  GP_PROBE_SKIP_RESOURCES = 8,  // a block larger, or more shared memory, than the instrumented copy can take
  GP_PROBE_SKIP_COOPERATIVE = 9,  // a cooperative launch: the copy's registers might not let its grid be resident at once
};

typedef struct {
  gp_rec_hdr h;
  uint64_t seq, host_ns, kernel_id, context, stream, graph_node_id, callstack_id;
  uint32_t tid, device, context_uid, stream_id, correlation_id, api;
  int32_t result;
  uint32_t grid[3], block[3], cluster[3];
  uint32_t shared_mem, params_len;
  uint8_t captured, mem_status, snapshot_selected;
  uint8_t untimed;  // made while sampled GPU timing was between windows (gp_activity_sample)
  uint8_t cooperative;  // a cooperative launch (gp_launch_cooperative)
  uint8_t pad[3];
  uint32_t nregions, npointers;
  uint64_t ag_thread, ag_seq;     // PyTorch autograd context (autograd.h), when ag_present
  uint32_t ag_class, ag_present;
  uint64_t range_id;  // the innermost NVTX push/pop range open on the launching thread, 0 none
  uint64_t end_ns;    // when the launch call returned (host_ns is when it entered)
  // params_len bytes of parameters follow (padded to 8), then nregions
  // gp_region_rec and npointers gp_pointer_rec (memcap.h)
} gp_launch_rec;

typedef struct {
  gp_rec_hdr h;
  uint64_t function;  // CUfunction handle
  uint64_t kernel_id;
  uint32_t nparams, param_bytes, name_len, pad;
  // nparams × (uint32 offset, uint32 size), then name_len bytes of name
} gp_kernel_rec;

enum { GP_FRAME_PYTHON = 1, GP_FRAME_NATIVE = 2 };

typedef struct {
  gp_rec_hdr h;
  uint64_t id;
  uint32_t nframes, source;  // source: bit 0 python, bit 1 native
  uint32_t cut, pad;         // why it ends before the thread's first frame: a GP_UNWIND_* value (unwind.h), 0 when whole
  // nframes × gp_frame_rec, each followed by file_len + func_len bytes, padded to 8
} gp_stack_rec;

typedef struct {
  uint64_t pc, offset;
  uint32_t kind, line;
  uint16_t file_len, func_len;
  uint32_t pad;
} gp_frame_rec;

typedef struct {
  gp_rec_hdr h;
  void *image;  // malloc'd copy; the Go side frees it
  uint64_t size, host_ns;
  uint32_t module_id, context_uid;
} gp_module_rec;

typedef struct {
  gp_rec_hdr h;
  uint64_t start, end, graph_node_id;
  uint32_t correlation_id, device, context_uid, stream_id, graph_id;
  uint32_t grid[3], block[3];
  uint32_t registers, dynamic_smem, static_smem, name_len;
  // name_len bytes of name follow
} gp_activity_rec;

// GP_REC_COPY: CUPTI's memcpy (memset set) or memset record, as CUPTI numbers
// its kinds (docs/format.md, Copy).
typedef struct {
  gp_rec_hdr h;
  uint64_t bytes, start, end, graph_node_id;
  uint32_t device, context_uid, stream_id, correlation_id, graph_id, value;
  uint8_t memset, copy_kind, src_kind, dst_kind, async, pad[3];
} gp_copy_rec;

// GP_REC_SYNC: CUPTI's synchronization record; stream_id and event_id are
// 0xFFFFFFFF (GP_SYNC_NONE, cabi.h) where they do not apply.
typedef struct {
  gp_rec_hdr h;
  uint64_t start, end;
  uint32_t type, correlation_id, context_uid, stream_id, event_id, pad;
} gp_sync_rec;

// GP_REC_HOSTCALL: a call of hostcall.h's table, from its enter to its return.
typedef struct {
  gp_rec_hdr h;
  uint64_t start, end, callstack_id, range_id;
  uint32_t cbid, correlation_id, tid, device;
  int32_t result;
  uint32_t own;  // a call of gpurr's own (memory capture's copies and memsets): its GPU records are not the program's
} gp_hostcall_rec;

typedef struct {
  gp_rec_hdr h;
  uint64_t node_id, original_node_id, launch_seq;
  uint32_t graph_id, node_type;
  uint64_t updated_after_seq;  // cuGraphExecUpdate re-pointed node_id to original_node_id
} gp_graphnode_rec;

typedef struct {
  gp_rec_hdr h;
  uint64_t seq, host_ns, graph_exec, stream, callstack_id;
  uint32_t tid, device, stream_id, correlation_id;
  int32_t result, pad;
  uint64_t range_id;  // as gp_launch_rec's
} gp_graphlaunch_rec;

typedef struct {
  gp_rec_hdr h;
  uint64_t memory_bytes;
  uint32_t ordinal, context_uid, cc_major, cc_minor, sm_count, pad;
  uint8_t uuid[16];
  char name[256];
} gp_device_rec;

typedef struct {
  gp_rec_hdr h;
  uint64_t host_ns;
  uint32_t level, len;  // level: 0 info, 1 warn, 2 error
  // len bytes of message follow
} gp_log_rec;

// GP_REC_RANGE: an NVTX range opened. Push/pop ranges nest on their
// thread; start/end ranges (pushed 0) may end on another thread, and NVTX's
// range id (nvtx_id) names them to the end record.
typedef struct {
  gp_rec_hdr h;
  uint64_t id;         // the agent's, from 1; launches name it (gp_launch_rec.range_id)
  uint64_t parent_id;  // the range open on the thread when this one opened, 0 none
  uint64_t start_ns, domain, nvtx_id;
  uint64_t registered;  // message_kind GP_RANGE_MSG_REGISTERED: the string's handle (a gp_nvtx_name_rec)
  uint32_t tid, category, message_kind, message_len;
  uint32_t pushed, pad;
  // message_len bytes of the message follow (message_kind GP_RANGE_MSG_ASCII)
} gp_range_rec;

enum { GP_RANGE_MSG_NONE = 0, GP_RANGE_MSG_ASCII = 1, GP_RANGE_MSG_REGISTERED = 2, GP_RANGE_MSG_UNICODE = 3 };

// GP_REC_RANGE_END: a range closed; id 0 for a start/end range, which
// nvtx_id names.
typedef struct {
  gp_rec_hdr h;
  uint64_t id, nvtx_id, end_ns, domain;
  uint32_t tid, pad;
} gp_range_end_rec;

// GP_REC_NVTX_NAME: the name of a domain (nvtxDomainCreateA) or of a
// registered string (nvtxDomainRegisterStringA), by its handle.
typedef struct {
  gp_rec_hdr h;
  uint64_t handle, domain;
  uint32_t kind, len;  // kind: GP_NVTX_NAME_*
  // len bytes of the name follow
} gp_nvtx_name_rec;

enum { GP_NVTX_NAME_DOMAIN = 1, GP_NVTX_NAME_STRING = 2 };

// Counters kept by the C side, read by Go for every frame's Stats.
typedef struct {
  uint64_t launches, launches_filtered, launches_dropped;
  uint64_t graph_launches, activities, activities_dropped;
  uint64_t callstacks_failed, modules, modules_dropped;
  uint64_t ring_bytes_dropped, records_dropped;
  uint64_t callback_cycles;  // TSC cycles spent in CUPTI callbacks on program threads, all of them
  uint64_t launch_callback_cycles;  // of those, in launch callbacks (sampled, scaled)
  uint64_t allocations, memory_launches, memory_skipped, bytes_hashed;
  uint64_t staging_wait_ns, memcap_gpu_ns, memory_jobs_dropped;
  uint64_t write_epochs;  // write sets: writes the agent could not place, each ending every carry
  uint64_t memory_hash_kernels;  // gpurr_memcap launches (a batch of jobs each)
  // --defer-hashes: batches run beside the program; the program's streams,
  // and the host, made to wait for them.
  uint64_t side_batches, side_stream_waits, side_host_waits;
  uint64_t ranges, ranges_dropped;  // NVTX ranges recorded; lost (ring full, nested too deep, pop without push)
  // Of launch_callback_cycles (sampled, scaled as it is): taking the callstack,
  // reading the autograd context, writing the launch record to the ring.
  uint64_t stack_cycles, autograd_cycles, ring_cycles;
  // Memory capture's part (regions, carry, jobs), and of it the launches of gpurr's own kernel.
  uint64_t memory_cycles, memory_launch_cycles;
  // Callstacks seen for the first time (frames decoded, record written), and
  // the cycles they took, every one of them.
  uint64_t stacks_new, stack_new_cycles;
  uint64_t probe_launches, probe_skipped;  // live probes: launches that ran with them; without (GP_REC_PROBE_SKIP)
  uint64_t digests, digests_skipped;       // step digests enqueued; not taken (capture, no context, stopped)
  uint64_t copies, syncs;                  // GP_REC_COPY and GP_REC_SYNC records written
  uint64_t host_calls, host_calls_dropped; // GP_REC_HOSTCALL records written; lost to a full ring
  // The program's own CUPTI client: subscriptions shared; activity records passed on; records
  // of its kinds not passed (no buffer from it, or a layout whose timestamps cannot be moved).
  uint64_t cupti_clients, cupti_client_records, cupti_client_records_dropped;
} gp_counters;

// Configuration handed from Go to C at start.
typedef struct {
  const char *cupti_path;
  uint64_t ring_bytes;
  int callstack_mode;  // 0 off, 1 auto, 2 python, 3 native
  int has_kernel_filter;
  int gpu_timing;  // kernel start/end on the GPU (CUPTI activity): 0 off, 1 concurrent, 2 serial (GP_TIMING_*)
  uint32_t timing_first_steps, timing_step_every;  // GP_TIMING_STEPS: steps 0..first-1 and each every-th are timed
  int gpu_timing_from_start;  // the hang watch: kernel activity on before the first launch, not after it
  int memory_mode;  // GP_MEM_* (memcap.h)
  int on_full;      // GP_ON_FULL_*
  const char *memcap_ptx;
  uint64_t results_bytes, staging_bytes;
  const uint64_t *snapshot_ranges;  // (lo, hi, step) launch seq triples, inclusive; none: every launch
  int nsnapshot_ranges;
  int flight_recorder;  // watch for failing CUDA calls (gpurrCudaError)
  uint32_t nan_dtypes;  // nan-scan: gpurr_job.nan_dtypes bits counted after each launch, 0 for none
  int write_sets;       // GP_WRITE_SETS_* (memcap.h): which regions hash mode may carry instead of hashing
  uint32_t audit_every; // learned write sets: every Nth launch of a kernel hashes all its regions
  int defer_hashes;     // hash mode with write sets: batch hash jobs (memjobs.c, deferred hash kernels): GP_DEFER_*
  int nvtx;  // record NVTX ranges (the agent is NVTX's injection library)
  int probes;  // --probe: gpurrProbeFunction decides, at each kernel's first launch
  const char *driver_error;  // why internal/cuda could not open libcuda.so.1 (gp_driver_bind), NULL when it did
  // Training steps as the program runs (steps.c): what step digests and --hash-steps need.
  int digests;          // at each step boundary, hash the program's allocations (a DIGEST state)
  uint32_t digest_every;  // ... of every Nth step only; 0 or 1: every step
  int digest_all;       // ... every live allocation of the program's, not only what the step's optimizer reached
  uint32_t step_every;  // steps are runs of this many launch calls; 0: optimizer steps
  int step_range;       // steps end where an NVTX range that --step-range matches ends (nvtx.c)
  int hash_steps;       // hash mode hashes only the launches of steps hash_step_lo..hash_step_hi
  uint32_t hash_step_lo, hash_step_hi;
} gp_config;

enum { GP_STACK_OFF = 0, GP_STACK_AUTO = 1, GP_STACK_PYTHON = 2, GP_STACK_NATIVE = 3 };
// Deferred hash kernels' batches run beside the program on gpurr's streams, or on the program's.
enum { GP_DEFER_OFF = 0, GP_DEFER_BESIDE = 1, GP_DEFER_STREAM = 2 };
// GP_TIMING_SAMPLED: concurrent, turned on and off by gp_activity_sample.
// GP_TIMING_STEPS: the same, by training steps (steps.c) once a first step ended.
enum { GP_TIMING_OFF = 0, GP_TIMING_CONCURRENT = 1, GP_TIMING_SERIAL = 2, GP_TIMING_SAMPLED = 3, GP_TIMING_STEPS = 4 };

// The driver functions the agent calls, by the name libcuda.so.1 exports
// them under: gp_driver_symbol(i) names the i-th (NULL past the last) and
// gp_driver_bind sets it. The Go side binds them all before gp_start, from
// the library internal/cuda opened (start.c).
const char *gp_driver_symbol(size_t i);
void gp_driver_bind(size_t i, uintptr_t fn);

// gp_start starts recording in this process; 0 with err set when it cannot.
int gp_start(const gp_config *cfg, char *err, size_t errcap);  // start.c
uint64_t gp_timestamp(void);         // CUPTI's clock, which GPU activity shares
double gp_tsc_ns_per_cycle(void);    // for the counters' cycle counts
int gp_is_forked_child(void);
uint32_t gp_cupti_version(void);
int gp_driver_version(void);
size_t gp_ring_take(uint8_t *dst, size_t cap);  // ring.c: whole records, at most cap bytes
// gp_ring_prefault (ring.c) faults in the ring's pages up to ahead bytes past
// the records written, during its first lap (later laps find them mapped),
// from the writer's thread, so the program's threads write to mapped pages.
// It returns how many bytes of the ring are faulted in: the ring's size once
// all are, or when the kernel cannot do it (MADV_POPULATE_WRITE, Linux 5.14).
enum { GP_RING_AHEAD = 4 << 20 };
uint64_t gp_ring_prefault(uint64_t ahead);
void gp_read_counters(gp_counters *out);
void gp_log(int level, const char *msg);
void gp_flush_activity(int forced);  // activity.c
// gp_activity_sample turns sampled GPU timing's kernel activity on or off; it
// returns CUPTI's result (0 done), or -1 when GPU timing is not sampled or,
// timed by steps, a first step ended: steps rule from then on.
int gp_activity_sample(int on);  // activity.c
// gp_activity_launched: the process made its first launch (timing by steps
// waits for it before windows begin).
int gp_activity_launched(void);  // activity.c
const char *gp_python_description(void);  // callstack.c
const char *gp_hostcall_name(uint32_t cbid);  // hostcall.c: the driver call's name, "" for one not in the table

#endif
