// The agent's memory-capture kernel: gpurr-h128 v1 (docs/hash.md) of each
// 64 KiB chunk of every region of one or more launches (a batch of jobs),
// and in snapshot mode the bytes of the chunks that changed since the
// region was last copied. The region
// hash, a short sequential fold of the chunk hashes, is left to the host: on
// the GPU it would hold up the program's stream (about 6 ns per chunk, 100 us
// for a 1 GiB region) for work the reader does for free.
// Package memhash computes the same hashes on the CPU; tests compare them bit
// for bit. scripts/gen-ptx turns this file into ptx/hash.ptx, and the layout
// of gpurr_batch is mirrored in internal/agent/memcap.h and internal/kernels.
//
// With nan-scan (gpurr record --nan-scan) the kernel also counts, per region,
// the elements that are NaN or Inf when the bytes are read as each asked-for
// float type, from the same loads as the hash: gpurr nan then needs no
// snapshots.

#define P1 0x9E3779B1u
#define P2 0x85EBCA77u
#define P3 0xC2B2AE3Du
#define P4 0x27D4EB2Fu
#define P5 0x165667B1u

#define CHUNK 65536u
#define GROUPS 256u
#define MAX_JOB_REGIONS 48

// nan_dtypes bits; counter k of a region is NaN (2k) and Inf (2k+1) of type k.
#define NAN_F32 1u
#define NAN_F64 2u
#define NAN_F16 4u
#define NAN_BF16 8u
#define NAN_COUNTERS 8u

// One region of a job. Chunks of all regions are numbered consecutively:
// region i owns chunks [first_chunk, first_chunk + ceil(size / CHUNK)).
struct gpurr_region {
  const unsigned char *base;
  unsigned long long size;
  uint4 *shadow;            // snapshot: hash of each chunk as last copied (device memory), or 0
  unsigned int first_chunk;
  unsigned int flags;       // REGION_COPY_ALL: copy every chunk whatever shadow says
};
#define REGION_COPY_ALL 1u

// A job: one launch's regions, hashed after (or before) it. Several jobs
// may share one kernel launch: the batch, passed by value as the kernel's
// only parameter (2120 bytes).
//
// out is host memory the GPU writes through a mapping:
//   u64 done            written last: equals seq once everything below is valid
//   u32 transferred     chunks copied to staging (snapshot)
//   u32 pad, u64 pad[6] (64-byte header)
//   uint4 chunk_hash[total_chunks]
//   u32 transfer_list[total_chunks]   snapshot: staging slot k holds chunk transfer_list[k]
//   (8-byte aligned) u64 nan_count[nregions][NAN_COUNTERS]   nan-scan only
// staging (snapshot only) is host memory too: slot k at k*CHUNK bytes.
// scratch is device memory: the chunk hashes again, for the final fold.
// counters points to two zeroed device words (blocks done, chunks copied);
// nan_counts (nan-scan only) to nregions*NAN_COUNTERS zeroed device u64s.
// The job's last block zeroes both again.
struct gpurr_job {
  unsigned long long seq;
  unsigned char *out;
  unsigned char *staging;
  uint4 *scratch;
  unsigned int *counters;
  unsigned long long *nan_counts;
  unsigned int nregions, total_chunks;
  unsigned int snapshot, nan_dtypes;
  unsigned int first_region;  // its regions are r[first_region, first_region + nregions) of the batch
  unsigned int first_block;   // its chunks are blocks [first_block, first_block + total_chunks)
};

#define MAX_BATCH_JOBS 8

// Jobs in block order; a region's first_chunk counts from its job's first.
// Every job has at least one chunk.
struct gpurr_batch {
  unsigned int njobs, nregions;
  gpurr_job j[MAX_BATCH_JOBS];
  gpurr_region r[MAX_JOB_REGIONS];
};

__device__ __forceinline__ unsigned int round32(unsigned int acc, unsigned int x) {
  unsigned int v = acc + x * P2;
  return __funnelshift_l(v, v, 13) * P1;  // rotl(v, 13)
}

__device__ __forceinline__ void round4(uint4 &h, uint4 w) {
  h.x = round32(h.x, w.x);
  h.y = round32(h.y, w.y);
  h.z = round32(h.z, w.z);
  h.w = round32(h.w, w.w);
}

__device__ __forceinline__ uint4 avalanche(uint4 h) {
  unsigned int v[4] = {h.x, h.y, h.z, h.w};
  for (int r = 0; r < 2; r++) {
    for (int l = 0; l < 4; l++) {
      unsigned int x = v[l];
      x ^= x >> 15;
      x *= P2;
      x ^= x >> 13;
      x *= P3;
      x ^= x >> 16;
      v[l] = x;
    }
    v[0] += v[1];
    v[1] += v[2];
    v[2] += v[3];
    v[3] += v[0];
  }
  return make_uint4(v[0], v[1], v[2], v[3]);
}

// The words of stripe s of a chunk of m bytes at p, zero-padded past m.
__device__ __forceinline__ uint4 load_stripe(const unsigned char *p, unsigned int s, unsigned int m, bool aligned) {
  unsigned int off = 16u * s;
  if (aligned && off + 16u <= m) return __ldcs(reinterpret_cast<const uint4 *>(p + off));
  unsigned int w[4] = {0, 0, 0, 0};
  for (unsigned int i = 0; i < 16u && off + i < m; i++) w[i / 4] |= (unsigned int)p[off + i] << (8 * (i % 4));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Counts the NaN and Inf elements of one 16-byte stripe as each type in
// mask. Elements count from the region's start and a stripe is 16 bytes
// from it, so no element straddles two stripes; the zero padding of a short
// last stripe is neither NaN nor Inf.
__device__ __forceinline__ void count_nan(uint4 w, unsigned int mask, unsigned int c[NAN_COUNTERS]) {
  const unsigned int x[4] = {w.x, w.y, w.z, w.w};
  if (mask & NAN_F32) {
#pragma unroll
    for (int l = 0; l < 4; l++) {
      unsigned int a = x[l] & 0x7fffffffu;
      c[0] += a > 0x7f800000u;
      c[1] += a == 0x7f800000u;
    }
  }
  if (mask & NAN_F64) {
#pragma unroll
    for (int l = 1; l < 4; l += 2) {  // little endian: the high word is second
      unsigned int hi = x[l] & 0x7fffffffu, lo = x[l - 1];
      c[2] += hi > 0x7ff00000u || (hi == 0x7ff00000u && lo != 0);
      c[3] += hi == 0x7ff00000u && lo == 0;
    }
  }
  // Half-width types, two per word: __vcmp*2 give 0xffff per true half.
  if (mask & NAN_F16) {
#pragma unroll
    for (int l = 0; l < 4; l++) {
      unsigned int a = x[l] & 0x7fff7fffu;
      c[4] += __popc(__vcmpgtu2(a, 0x7c007c00u)) >> 4;
      c[5] += __popc(__vcmpeq2(a, 0x7c007c00u)) >> 4;
    }
  }
  if (mask & NAN_BF16) {
#pragma unroll
    for (int l = 0; l < 4; l++) {
      unsigned int a = x[l] & 0x7fff7fffu;
      c[6] += __popc(__vcmpgtu2(a, 0x7f807f80u)) >> 4;
      c[7] += __popc(__vcmpeq2(a, 0x7f807f80u)) >> 4;
    }
  }
}

// Whether some element of the stripe may be NaN or Inf as a type in mask:
// for each type, (x & exponent) + its lowest bit carries into the element's
// sign bit (clear after masking) exactly when the exponent is all ones;
// ORed over the stripe, test the result with maybe_nan_bits. Far cheaper
// than counting, which runs only where this says yes: real data seldom
// holds NaN or Inf. f32 needs no test of its own beside bf16: its exponent
// is the high bf16's.
__device__ __forceinline__ unsigned int maybe_nan(uint4 w, unsigned int mask) {
  const unsigned int x[4] = {w.x, w.y, w.z, w.w};
  unsigned int acc = 0;
#pragma unroll
  for (int l = 0; l < 4; l++) {
    if ((mask & NAN_F32) && !(mask & NAN_BF16)) acc |= (x[l] & 0x7f800000u) + 0x00800000u;
    if ((mask & NAN_F64) && (l & 1)) acc |= (x[l] & 0x7ff00000u) + 0x00100000u;
    if (mask & NAN_F16) acc |= (x[l] & 0x7c007c00u) + 0x04000400u;
    if (mask & NAN_BF16) acc |= (x[l] & 0x7f807f80u) + 0x00800080u;
  }
  return acc;
}

__device__ __forceinline__ bool maybe_nan_bits(unsigned int acc) { return (acc & 0x80008000u) != 0; }

__device__ __forceinline__ bool same(uint4 a, uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; }

// One block of GROUPS threads per chunk; thread g is lane group g. The last
// block to finish publishes the chunk hashes and the done flag. SCAN: count
// NaN and Inf too (gpurr_memcap_nan); the plain kernel is compiled without
// that code, so hashing alone keeps its registers and speed.
template <bool SCAN>
__device__ __forceinline__ void memcap(const gpurr_batch &batch) {
  __shared__ uint4 groups[GROUPS];
  __shared__ unsigned int ticket, slot;

  unsigned int k = 0;
  while (k + 1 < batch.njobs && batch.j[k + 1].first_block <= blockIdx.x) k++;
  const gpurr_job &job = batch.j[k];
  const gpurr_region *regions = batch.r + job.first_region;
  const unsigned int b = blockIdx.x - job.first_block, g = threadIdx.x;  // b: the chunk of the job

  unsigned int ri = 0;
  while (ri + 1 < job.nregions && regions[ri + 1].first_chunk <= b) ri++;
  const gpurr_region &reg = regions[ri];
  const unsigned long long start = (unsigned long long)(b - reg.first_chunk) * CHUNK;
  const unsigned int m = (unsigned int)min((unsigned long long)CHUNK, reg.size - start);
  const unsigned char *p = reg.base + start;
  const bool aligned = ((unsigned long long)p & 15u) == 0;

  const unsigned int nan_mask = SCAN ? job.nan_dtypes : 0u;
  unsigned int nan[NAN_COUNTERS] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint4 acc = make_uint4(P1 * 1u + P2 * g, P1 * 2u + P2 * g, P1 * 3u + P2 * g, P1 * 4u + P2 * g);
  if (aligned && m == CHUNK) {
    // A whole chunk: 16 stripes per thread, loaded 8 at a time so that many
    // loads are in flight before the first round needs one.
    const uint4 *q = reinterpret_cast<const uint4 *>(p) + g;
#pragma unroll
    for (unsigned int half = 0; half < 2; half++) {
      uint4 w[8];
#pragma unroll
      for (unsigned int i = 0; i < 8; i++) w[i] = __ldcs(q + GROUPS * (8 * half + i));
#pragma unroll
      for (unsigned int i = 0; i < 8; i++) round4(acc, w[i]);
      if (nan_mask) {
        unsigned int maybe = 0;
#pragma unroll
        for (unsigned int i = 0; i < 8; i++) maybe |= maybe_nan(w[i], nan_mask);
        if (maybe_nan_bits(maybe)) {
#pragma unroll
          for (unsigned int i = 0; i < 8; i++) count_nan(w[i], nan_mask, nan);
        }
      }
    }
  } else {
    const unsigned int stripes = (m + 15u) / 16u;
#pragma unroll 4
    for (unsigned int s = g; s < stripes; s += GROUPS) {
      const uint4 w = load_stripe(p, s, m, aligned);
      round4(acc, w);
      if (nan_mask && maybe_nan_bits(maybe_nan(w, nan_mask))) count_nan(w, nan_mask, nan);
    }
  }
  groups[g] = acc;
  if (nan_mask) {
    // Sum over the warp; only warps that found something touch memory.
#pragma unroll
    for (unsigned int k = 0; k < NAN_COUNTERS; k++) {
      const unsigned int v = __reduce_add_sync(0xffffffffu, nan[k]);
      if ((g & 31u) == 0 && v) atomicAdd(job.nan_counts + ri * NAN_COUNTERS + k, (unsigned long long)v);
    }
  }
  __syncthreads();

  uint4 *chunk_out = reinterpret_cast<uint4 *>(job.out + 64);
  if (g == 0) {
    uint4 h = make_uint4(P3 ^ m, P4 ^ m, P5 ^ m, P1 ^ m);
#pragma unroll 16
    for (unsigned int i = 0; i < GROUPS; i++) round4(h, groups[i]);
    h = avalanche(h);
    job.scratch[b] = h;  // the last block publishes chunk hashes to out in one pass
    slot = 0xffffffffu;
    if (job.snapshot) {
      uint4 *shadow = reg.shadow ? reg.shadow + (b - reg.first_chunk) : 0;
      if ((reg.flags & REGION_COPY_ALL) || !shadow || !same(*shadow, h)) {
        slot = atomicAdd(&job.counters[1], 1u);
        if (shadow) *shadow = h;
        reinterpret_cast<unsigned int *>(chunk_out + job.total_chunks)[slot] = b;
      }
    }
  }
  __syncthreads();

  if (slot != 0xffffffffu) {  // copy the changed chunk to its staging slot
    uint4 *dst = reinterpret_cast<uint4 *>(job.staging + (unsigned long long)slot * CHUNK);
    if (aligned) {
      const uint4 *src = reinterpret_cast<const uint4 *>(p);
      for (unsigned int s = g; s < m / 16u; s += GROUPS) dst[s] = __ldcs(src + s);
      for (unsigned int i = (m & ~15u) + g; i < m; i += GROUPS) job.staging[(unsigned long long)slot * CHUNK + i] = p[i];
    } else {
      for (unsigned int i = g; i < m; i += GROUPS) job.staging[(unsigned long long)slot * CHUNK + i] = p[i];
    }
  }

  // Make this block's writes visible before counting it done: a block that
  // wrote host memory (staging) needs a system-scope fence, which costs a
  // PCIe round trip; the others only wrote device memory.
  if (slot != 0xffffffffu)
    __threadfence_system();
  else
    __threadfence();
  __syncthreads();
  if (g == 0) ticket = atomicAdd(&job.counters[0], 1u);
  __syncthreads();
  if (ticket != job.total_chunks - 1) return;
  __threadfence();

  // Last block: publish every chunk hash.
  for (unsigned int c = g; c < job.total_chunks; c += GROUPS) chunk_out[c] = __ldcg(job.scratch + c);
  if (nan_mask) {
    // Read and re-zero each counter in one step, so the next job finds them zero.
    unsigned long long *nan_out = reinterpret_cast<unsigned long long *>(
        (reinterpret_cast<unsigned long long>(chunk_out + job.total_chunks) + 4ull * job.total_chunks + 7ull) & ~7ull);
    for (unsigned int i = g; i < job.nregions * NAN_COUNTERS; i += GROUPS) nan_out[i] = atomicExch(job.nan_counts + i, 0ull);
  }
  __threadfence_system();  // every thread's chunk_out writes, before the done flag
  __syncthreads();
  if (g == 0) {
    reinterpret_cast<volatile unsigned int *>(job.out)[2] = __ldcg(&job.counters[1]);
    job.counters[0] = 0;
    job.counters[1] = 0;
    __threadfence_system();
    *reinterpret_cast<volatile unsigned long long *>(job.out) = job.seq;
  }
}

extern "C" __global__ void __launch_bounds__(GROUPS) gpurr_memcap(const gpurr_batch batch) { memcap<false>(batch); }

extern "C" __global__ void __launch_bounds__(GROUPS) gpurr_memcap_nan(const gpurr_batch batch) { memcap<true>(batch); }
