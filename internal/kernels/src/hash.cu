// gpurr-h128 v1 on the GPU (docs/hash.md): the memory-capture kernels of the
// agent. Package memhash computes the same values on the CPU; tests compare
// them bit for bit. scripts/gen-ptx turns this file into ptx/hash.ptx.
//
// Work in progress for the memory-capture issue: not yet loaded by the
// agent, and not yet run on a GPU.

#define P1 0x9E3779B1u
#define P2 0x85EBCA77u
#define P3 0xC2B2AE3Du
#define P4 0x27D4EB2Fu
#define P5 0x165667B1u

#define CHUNK 65536u
#define GROUPS 256u

__device__ __forceinline__ unsigned int round32(unsigned int acc, unsigned int x) {
  unsigned int v = acc + x * P2;
  return __funnelshift_l(v, v, 13) * P1;  // rotl(v, 13)
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
  if (aligned && off + 16u <= m) return __ldg(reinterpret_cast<const uint4 *>(p + off));
  unsigned int w[4] = {0, 0, 0, 0};
  for (unsigned int i = 0; i < 16u && off + i < m; i++) w[i / 4] |= (unsigned int)__ldg(p + off + i) << (8 * (i % 4));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// gpurr_hash_chunks hashes the n bytes at base, one 64 KiB chunk per block
// of GROUPS threads: thread g is lane group g. out[k] is chunk k's hash.
extern "C" __global__ void __launch_bounds__(GROUPS) gpurr_hash_chunks(const unsigned char *base, unsigned long long n,
                                                                       uint4 *out) {
  __shared__ uint4 groups[GROUPS];
  unsigned long long start = (unsigned long long)blockIdx.x * CHUNK;
  if (start >= n) return;
  unsigned int m = (unsigned int)min((unsigned long long)CHUNK, n - start);
  const unsigned char *p = base + start;
  bool aligned = ((unsigned long long)p & 15u) == 0;
  unsigned int g = threadIdx.x;
  uint4 acc = make_uint4(P1 * 1u + P2 * g, P1 * 2u + P2 * g, P1 * 3u + P2 * g, P1 * 4u + P2 * g);
  unsigned int stripes = (m + 15u) / 16u;
  for (unsigned int s = g; s < stripes; s += GROUPS) {
    uint4 w = load_stripe(p, s, m, aligned);
    acc.x = round32(acc.x, w.x);
    acc.y = round32(acc.y, w.y);
    acc.z = round32(acc.z, w.z);
    acc.w = round32(acc.w, w.w);
  }
  groups[g] = acc;
  __syncthreads();
  if (g != 0) return;
  uint4 h = make_uint4(P3 ^ m, P4 ^ m, P5 ^ m, P1 ^ m);
  for (unsigned int i = 0; i < GROUPS; i++) {
    uint4 a = groups[i];
    h.x = round32(h.x, a.x);
    h.y = round32(h.y, a.y);
    h.z = round32(h.z, a.z);
    h.w = round32(h.w, a.w);
  }
  out[blockIdx.x] = avalanche(h);
}

// gpurr_hash_region folds nchunks chunk hashes of an n-byte region into its
// hash (one thread: the fold is sequential by definition).
extern "C" __global__ void gpurr_hash_region(const uint4 *chunks, unsigned long long nchunks, unsigned long long n,
                                             uint4 *out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  unsigned int lo = (unsigned int)n, hi = (unsigned int)(n >> 32);
  uint4 h = make_uint4(P5 ^ lo, P4 ^ hi, P3 ^ lo, P2 ^ hi);
  for (unsigned long long i = 0; i < nchunks; i++) {
    uint4 c = chunks[i];
    h.x = round32(h.x, c.x);
    h.y = round32(h.y, c.y);
    h.z = round32(h.z, c.z);
    h.w = round32(h.w, c.w);
  }
  *out = avalanche(h);
}
