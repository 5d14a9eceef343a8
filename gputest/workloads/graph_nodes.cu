// A CUDA graph built node by node through the graph API, not by stream capture: a kernel node
// added with cudaGraphAddKernelNode, one with cudaGraphAddNode, a conditional (IF) node whose
// body holds a kernel node (CUDA 12.4+), and a memory allocation node, a kernel on it and its
// free node. The executable graph is replayed kReplays times; between the first and the second
// replay the add node's parameters change in the executable graph
// (cudaGraphExecKernelNodeSetParams). A second graph of two kernel nodes (gu_mul, gu_inc) is
// updated in its executable graph twice with cudaGraphExecUpdate: from itself, after a node's
// parameters changed (cudaGraphKernelNodeSetParams), and from a graph of the same shape
// captured from a stream. Each node is added, or changed, by a static function of its own,
// which native callstacks name from the executable's symbol table. Every CUDA call is checked.
// The last stdout line is a JSON object with the expected counts.
//
// Build: nvcc -O2 -arch=sm_90 -o graph_nodes graph_nodes.cu
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_RT(call)                                                                     \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#if CUDART_VERSION >= 12040
#define HAVE_CONDITIONAL 1
#else
#define HAVE_CONDITIONAL 0
#endif

constexpr int kN = 1 << 16, kBlock = 256, kGrid = kN / kBlock, kReplays = 4;
constexpr float kScale = 2.0f, kAddFirst = 1.0f, kAddLater = 3.0f, kBody = 10.0f;

__global__ void gn_scale(float* x, float f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= f;
}

__global__ void gn_add(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

__global__ void gn_body(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

__global__ void gu_mul(float* x, float f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= f;
}

__global__ void gu_inc(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

__global__ void gn_fill(float* scratch, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) scratch[i] = static_cast<float>(i);
}

// Arguments of the kernel nodes: the graph API copies them when a node is added or changed.
static float* g_x;
static int g_n = kN;
static float g_scale = kScale, g_add = kAddFirst, g_body = kBody;

// add_node is cudaGraphAddNode with no edge data, whose signature CUDA 13 changed.
static cudaError_t add_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t ndeps,
                            cudaGraphNodeParams* params) {
#if CUDART_VERSION >= 13000
  return cudaGraphAddNode(node, graph, deps, nullptr, ndeps, params);
#else
  return cudaGraphAddNode(node, graph, deps, ndeps, params);
#endif
}

static __attribute__((noinline)) cudaGraphNode_t add_scale_node(cudaGraph_t graph) {
  void* args[] = {&g_x, &g_scale, &g_n};
  cudaKernelNodeParams p = {};
  p.func = reinterpret_cast<void*>(gn_scale);
  p.gridDim = dim3(kGrid);
  p.blockDim = dim3(kBlock);
  p.kernelParams = args;
  cudaGraphNode_t node;
  CHECK_RT(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &p));
  asm volatile("" ::: "memory");  // keeps this frame (no tail call)
  return node;
}

static __attribute__((noinline)) cudaGraphNode_t add_add_node(cudaGraph_t graph, cudaGraphNode_t after) {
  void* args[] = {&g_x, &g_add, &g_n};
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeKernel;
  p.kernel.func = reinterpret_cast<void*>(gn_add);
  p.kernel.gridDim = dim3(kGrid);
  p.kernel.blockDim = dim3(kBlock);
  p.kernel.kernelParams = args;
  cudaGraphNode_t node;
  CHECK_RT(add_node(&node, graph, &after, 1, &p));
  asm volatile("" ::: "memory");
  return node;
}

// add_body_node adds the conditional body's kernel node.
static __attribute__((noinline)) void add_body_node(cudaGraph_t body) {
  void* args[] = {&g_x, &g_body, &g_n};
  cudaKernelNodeParams p = {};
  p.func = reinterpret_cast<void*>(gn_body);
  p.gridDim = dim3(kGrid);
  p.blockDim = dim3(kBlock);
  p.kernelParams = args;
  cudaGraphNode_t node;
  CHECK_RT(cudaGraphAddKernelNode(&node, body, nullptr, 0, &p));
  asm volatile("" ::: "memory");
}

// add_conditional_node adds an IF node after `after` whose condition is 1 at every launch
// (its handle's default, assigned at each launch), so its body runs every replay.
static __attribute__((noinline)) int add_conditional_node(cudaGraph_t graph, cudaGraphNode_t after) {
#if HAVE_CONDITIONAL
  cudaGraphConditionalHandle handle;
  CHECK_RT(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = handle;
  p.conditional.type = cudaGraphCondTypeIf;
  p.conditional.size = 1;
  cudaGraphNode_t node;
  CHECK_RT(add_node(&node, graph, &after, 1, &p));
  add_body_node(p.conditional.phGraph_out[0]);
  asm volatile("" ::: "memory");
  return 1;
#else
  (void)graph, (void)after;
  return 0;
#endif
}

// add_mem_nodes adds an allocation, a kernel that fills it and its free, apart from the rest.
static __attribute__((noinline)) void add_mem_nodes(cudaGraph_t graph) {
  cudaMemAllocNodeParams mp = {};
  mp.poolProps.allocType = cudaMemAllocationTypePinned;
  mp.poolProps.location.type = cudaMemLocationTypeDevice;
  mp.poolProps.location.id = 0;
  mp.bytesize = kN * sizeof(float);
  cudaGraphNode_t alloc, fill, release;
  CHECK_RT(cudaGraphAddMemAllocNode(&alloc, graph, nullptr, 0, &mp));
  float* scratch = static_cast<float*>(mp.dptr);
  void* args[] = {&scratch, &g_n};
  cudaKernelNodeParams p = {};
  p.func = reinterpret_cast<void*>(gn_fill);
  p.gridDim = dim3(kGrid);
  p.blockDim = dim3(kBlock);
  p.kernelParams = args;
  CHECK_RT(cudaGraphAddKernelNode(&fill, graph, &alloc, 1, &p));
  CHECK_RT(cudaGraphAddMemFreeNode(&release, graph, &fill, 1, mp.dptr));
  asm volatile("" ::: "memory");
}

// retune_add_node changes the add node's value in the executable graph.
static __attribute__((noinline)) void retune_add_node(cudaGraphExec_t exec, cudaGraphNode_t node) {
  g_add = kAddLater;
  void* args[] = {&g_x, &g_add, &g_n};
  cudaKernelNodeParams p = {};
  p.func = reinterpret_cast<void*>(gn_add);
  p.gridDim = dim3(kGrid);
  p.blockDim = dim3(kBlock);
  p.kernelParams = args;
  CHECK_RT(cudaGraphExecKernelNodeSetParams(exec, node, &p));
  asm volatile("" ::: "memory");
}

// The update graph's arguments, and what each of its three phases does to y: phase 0 as
// built, phase 1 after the multiply node changed in the graph and the executable graph was
// updated from it, phase 2 after the update from the captured graph.
static float* g_y;
static float g_mul = 2.0f, g_inc = 1.0f;
constexpr float kMul[3] = {2.0f, 4.0f, 0.5f}, kInc[3] = {1.0f, 1.0f, 7.0f};

static __attribute__((noinline)) cudaGraphNode_t add_update_nodes(cudaGraph_t graph, cudaGraphNode_t* inc) {
  void* margs[] = {&g_y, &g_mul, &g_n};
  void* iargs[] = {&g_y, &g_inc, &g_n};
  cudaKernelNodeParams p = {};
  p.func = reinterpret_cast<void*>(gu_mul);
  p.gridDim = dim3(kGrid);
  p.blockDim = dim3(kBlock);
  p.kernelParams = margs;
  cudaGraphNode_t mul;
  CHECK_RT(cudaGraphAddKernelNode(&mul, graph, nullptr, 0, &p));
  p.func = reinterpret_cast<void*>(gu_inc);
  p.kernelParams = iargs;
  CHECK_RT(cudaGraphAddKernelNode(inc, graph, &mul, 1, &p));
  asm volatile("" ::: "memory");
  return mul;
}

// change_then_update changes the multiply node in the graph, then updates the executable graph
// from it.
static __attribute__((noinline)) void change_then_update(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphNode_t mul) {
  g_mul = kMul[1];
  void* args[] = {&g_y, &g_mul, &g_n};
  cudaKernelNodeParams p = {};
  p.func = reinterpret_cast<void*>(gu_mul);
  p.gridDim = dim3(kGrid);
  p.blockDim = dim3(kBlock);
  p.kernelParams = args;
  CHECK_RT(cudaGraphKernelNodeSetParams(mul, &p));
  cudaGraphExecUpdateResultInfo info;
  CHECK_RT(cudaGraphExecUpdate(exec, graph, &info));
  asm volatile("" ::: "memory");
}

// capture_same_shape captures gu_mul then gu_inc, with phase 2's arguments, from a stream.
static __attribute__((noinline)) cudaGraph_t capture_same_shape(cudaStream_t s) {
  cudaGraph_t g;
  CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  gu_mul<<<kGrid, kBlock, 0, s>>>(g_y, kMul[2], g_n);
  gu_inc<<<kGrid, kBlock, 0, s>>>(g_y, kInc[2], g_n);
  CHECK_RT(cudaStreamEndCapture(s, &g));
  asm volatile("" ::: "memory");
  return g;
}

// update_from_capture updates the executable graph from the captured graph.
static __attribute__((noinline)) void update_from_capture(cudaGraphExec_t exec, cudaGraph_t captured) {
  cudaGraphExecUpdateResultInfo info;
  CHECK_RT(cudaGraphExecUpdate(exec, captured, &info));
  asm volatile("" ::: "memory");
}

// run_update_graph replays the update graph twice in each phase; it returns y's value.
static float run_update_graph(cudaStream_t s) {
  CHECK_RT(cudaMalloc(&g_y, kN * sizeof(float)));
  CHECK_RT(cudaMemset(g_y, 0, kN * sizeof(float)));
  cudaGraph_t graph, captured;
  CHECK_RT(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t inc;
  cudaGraphNode_t mul = add_update_nodes(graph, &inc);
  cudaGraphExec_t exec;
  CHECK_RT(cudaGraphInstantiate(&exec, graph, 0));
  float want = 0.0f;
  for (int phase = 0; phase < 3; phase++) {
    if (phase == 1) change_then_update(exec, graph, mul);
    if (phase == 2) {
      captured = capture_same_shape(s);
      update_from_capture(exec, captured);
    }
    for (int r = 0; r < 2; r++) {
      CHECK_RT(cudaGraphLaunch(exec, s));
      want = want * kMul[phase] + kInc[phase];
    }
  }
  CHECK_RT(cudaStreamSynchronize(s));
  std::vector<float> hy(kN);
  CHECK_RT(cudaMemcpy(hy.data(), g_y, kN * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kN; i++) {
    if (hy[i] != want) {
      fprintf(stderr, "graph_nodes: wrong updated result: y[%d]=%g, want %g\n", i, hy[i], want);
      exit(1);
    }
  }
  CHECK_RT(cudaGraphExecDestroy(exec));
  CHECK_RT(cudaGraphDestroy(graph));
  CHECK_RT(cudaGraphDestroy(captured));
  CHECK_RT(cudaFree(g_y));
  return want;
}

int main() {
  CHECK_RT(cudaSetDevice(0));
  CHECK_RT(cudaMalloc(&g_x, kN * sizeof(float)));
  CHECK_RT(cudaMemset(g_x, 0, kN * sizeof(float)));
  cudaStream_t s;
  CHECK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cudaGraph_t graph;
  CHECK_RT(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t scale = add_scale_node(graph);
  cudaGraphNode_t add = add_add_node(graph, scale);
  const int conditional = add_conditional_node(graph, add);
  add_mem_nodes(graph);
  cudaGraphExec_t exec;
  CHECK_RT(cudaGraphInstantiate(&exec, graph, 0));

  float want = 0.0f;
  for (int r = 0; r < kReplays; r++) {
    if (r == 1) retune_add_node(exec, add);
    CHECK_RT(cudaGraphLaunch(exec, s));
    want = want * kScale + (r == 0 ? kAddFirst : kAddLater) + (conditional ? kBody : 0.0f);
  }
  CHECK_RT(cudaStreamSynchronize(s));

  std::vector<float> hx(kN);
  CHECK_RT(cudaMemcpy(hx.data(), g_x, kN * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kN; i++) {
    if (hx[i] != want) {
      fprintf(stderr, "graph_nodes: wrong result: x[%d]=%g, want %g\n", i, hx[i], want);
      return 1;
    }
  }
  CHECK_RT(cudaGraphExecDestroy(exec));
  CHECK_RT(cudaGraphDestroy(graph));
  const float updated = run_update_graph(s);
  CHECK_RT(cudaStreamDestroy(s));
  CHECK_RT(cudaFree(g_x));
  // Per replay: scale, add, fill, and the body when there is a conditional node.
  const int per_replay = 3 + conditional;
  printf(
      "{\"workload\": \"graph_nodes\", \"replays\": %d, \"kernel_runs\": %d, \"conditional\": %d, "
      "\"memory_nodes\": 2, \"result\": %g, \"update_runs\": 6, \"updated_result\": %g}\n",
      kReplays, kReplays * per_replay, conditional, want, updated);
  return 0;
}
