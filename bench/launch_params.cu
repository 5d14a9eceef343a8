// launch_params.cu: what a kernel launch costs the launching thread as its parameter grows.
//
// gpurr's hash kernel takes one parameter of 2120 bytes (8 jobs, 48 regions), and hash mode
// launches it after every program launch; this measures whether a smaller parameter would
// launch faster, and what any launch costs at least (the floor under a per-launch hash kernel).
//
// For each parameter size, the same empty kernel shape as the hash kernel's smallest launch
// (1 block of 256 threads) is launched in batches of 256 with the stream synchronized between
// batches, so the launch queue never fills and only the launch calls are timed (host clock).
// Prints one line per size, "params N B: M us per launch" (median of the rounds), then the
// same as one JSON line for bench/run.py.
//
//   nvcc -O2 -o launch_params bench/launch_params.cu && ./launch_params [rounds]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

template <int N>
struct Param {
  unsigned char bytes[N];
};

// Reads its parameter only when asked, so that it is not optimized away.
template <int N>
__global__ void take(const Param<N> p, unsigned char *sink) {
  if (sink && threadIdx.x == 0) *sink = p.bytes[N - 1];
}

static void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "launch_params: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

enum { BATCH = 256, BATCHES = 40 };

template <int N>
static double us_per_launch(cudaStream_t s) {
  Param<N> p = {};
  double ns = 0;
  for (int b = 0; b < BATCHES; b++) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < BATCH; i++) take<N><<<1, 256, 0, s>>>(p, nullptr);
    auto t1 = std::chrono::steady_clock::now();
    check(cudaGetLastError(), "launch");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
  }
  return ns / 1e3 / (BATCH * BATCHES);
}

template <int N>
static double measure(cudaStream_t s, int rounds) {
  us_per_launch<N>(s);  // warm up: the module's first launch loads it
  std::vector<double> got;
  for (int r = 0; r < rounds; r++) got.push_back(us_per_launch<N>(s));
  std::sort(got.begin(), got.end());
  return got[got.size() / 2];
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  if (rounds < 1) rounds = 1;
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  const int sizes[] = {16, 256, 1024, 2120, 4000};  // 4000 + the sink: under the 4 KB of older drivers
  double us[5] = {0, 0, 0, 0, 0};
  // Two sweeps over the sizes, each size's figure the lower of its two, so drift that hits one
  // sweep does not decide the comparison.
  for (int sweep = 0; sweep < 2; sweep++) {
    double got[5] = {measure<16>(s, rounds), measure<256>(s, rounds), measure<1024>(s, rounds),
                     measure<2120>(s, rounds), measure<4000>(s, rounds)};
    for (int i = 0; i < 5; i++) us[i] = sweep ? std::min(us[i], got[i]) : got[i];
  }
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  for (int i = 0; i < 5; i++) std::printf("params %d B: %.3f us per launch\n", sizes[i], us[i]);
  std::printf("{\"launches\": %d, \"us_per_launch\": {", 2 * 5 * (rounds + 1) * BATCH * BATCHES);
  for (int i = 0; i < 5; i++) std::printf("%s\"%d\": %.3f", i ? ", " : "", sizes[i], us[i]);
  std::printf("}}\n");
  return 0;
}
