// The agent's memory-capture kernel: gpurr-h128 v1 (docs/hash.md) of each
// 64 KiB chunk of every region of one launch, and in snapshot mode the bytes
// of the chunks that changed since the region was last copied. The region
// hash, a short sequential fold of the chunk hashes, is left to the host: on
// the GPU it would hold up the program's stream (about 6 ns per chunk, 100 us
// for a 1 GiB region) for work the reader does for free.
// Package memhash computes the same hashes on the CPU; tests compare them bit
// for bit. scripts/gen-ptx turns this file into ptx/hash.ptx, and the layout
// of gpurr_job is mirrored in internal/agent/memcap.h and internal/kernels.

#define P1 0x9E3779B1u
#define P2 0x85EBCA77u
#define P3 0xC2B2AE3Du
#define P4 0x27D4EB2Fu
#define P5 0x165667B1u

#define CHUNK 65536u
#define GROUPS 256u
#define MAX_JOB_REGIONS 48

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

// A job, passed by value as the kernel's only parameter (1600 bytes).
//
// out is host memory the GPU writes through a mapping:
//   u64 done            written last: equals seq once everything below is valid
//   u32 transferred     chunks copied to staging (snapshot)
//   u32 pad, u64 pad[6] (64-byte header)
//   uint4 chunk_hash[total_chunks]
//   u32 transfer_list[total_chunks]   snapshot: staging slot k holds chunk transfer_list[k]
// staging (snapshot only) is host memory too: slot k at k*CHUNK bytes.
// scratch is device memory: the chunk hashes again, for the final fold.
// counters points to two zeroed device words (blocks done, chunks copied);
// the last block zeroes them again.
struct gpurr_job {
  unsigned long long seq;
  unsigned char *out;
  unsigned char *staging;
  uint4 *scratch;
  unsigned int *counters;
  unsigned int nregions, total_chunks;
  unsigned int snapshot, pad;
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

__device__ __forceinline__ bool same(uint4 a, uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; }

// One block of GROUPS threads per chunk; thread g is lane group g. The last
// block to finish publishes the chunk hashes and the done flag.
extern "C" __global__ void __launch_bounds__(GROUPS) gpurr_memcap(const gpurr_job job) {
  __shared__ uint4 groups[GROUPS];
  __shared__ unsigned int ticket, slot;
  const unsigned int b = blockIdx.x, g = threadIdx.x;

  unsigned int ri = 0;
  while (ri + 1 < job.nregions && job.r[ri + 1].first_chunk <= b) ri++;
  const gpurr_region &reg = job.r[ri];
  const unsigned long long start = (unsigned long long)(b - reg.first_chunk) * CHUNK;
  const unsigned int m = (unsigned int)min((unsigned long long)CHUNK, reg.size - start);
  const unsigned char *p = reg.base + start;
  const bool aligned = ((unsigned long long)p & 15u) == 0;

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
    }
  } else {
    const unsigned int stripes = (m + 15u) / 16u;
#pragma unroll 4
    for (unsigned int s = g; s < stripes; s += GROUPS) round4(acc, load_stripe(p, s, m, aligned));
  }
  groups[g] = acc;
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
