// The launch APIs the agent records: one row each, and what is derived from
// the rows. Adding a launch API is a row of GP_LAUNCH_APIS (with a shape
// below when its parameter struct is new) and its tests: the callback id
// constant, the subscription (start.c), the launch tests, the view every
// launch is read through (launch.c, probe.c), the layout check against
// CUPTI's header (layoutcheck) and recording.LaunchAPIName's names
// (held to this table by recording's test) all come from it.
#ifndef GPURR_LAUNCHAPI_H
#define GPURR_LAUNCHAPI_H

#include <stdint.h>
#include <string.h>

#include "cabi.h"

// The parameter structs launch APIs pass (CUPTI's functionParams).
enum {
  GP_SHAPE_NONE = 0,         // not a launch API
  GP_SHAPE_KERNEL = 1,       // gp_cuLaunchKernel_params
  GP_SHAPE_COOPERATIVE = 2,  // gp_cuLaunchKernel_params without `extra`
  GP_SHAPE_EX = 3,           // gp_cuLaunchKernelEx_params
  GP_SHAPE_GRAPH = 4,        // gp_cuGraphLaunch_params: a graph, not a kernel
};

// GP_LAUNCH_APIS(X) calls X(name, CUPTI driver callback id, per-thread
// default stream (the _ptsz variant), shape) for each launch API.
#define GP_LAUNCH_APIS(X)                                     \
  X(cuLaunchKernel, 307, 0, GP_SHAPE_KERNEL)                  \
  X(cuLaunchKernel_ptsz, 442, 1, GP_SHAPE_KERNEL)             \
  X(cuLaunchCooperativeKernel, 477, 0, GP_SHAPE_COOPERATIVE)  \
  X(cuLaunchCooperativeKernel_ptsz, 478, 1, GP_SHAPE_COOPERATIVE) \
  X(cuGraphLaunch, 514, 0, GP_SHAPE_GRAPH)                    \
  X(cuGraphLaunch_ptsz, 515, 1, GP_SHAPE_GRAPH)               \
  X(cuLaunchKernelEx, 652, 0, GP_SHAPE_EX)                    \
  X(cuLaunchKernelEx_ptsz, 653, 1, GP_SHAPE_EX)

// GP_CBID_<name>: CUpti_driver_api_trace_cbid values of the launch APIs.
#define GP_LAUNCH_API_CBID(name, cbid, ptsz, shape) GP_CBID_##name = cbid,
enum { GP_LAUNCH_APIS(GP_LAUNCH_API_CBID) };
#undef GP_LAUNCH_API_CBID

// Tests on a callback id, each an `||` of one comparison per row that the
// compiler folds as it did the hand-written lists.

// gp_launch_is_kernel: cbid launches one kernel (not a graph).
static inline int gp_launch_is_kernel(uint32_t cbid) {
#define GP_ROW(name, id, ptsz, shape) || (cbid == id && shape != GP_SHAPE_GRAPH)
  return 0 GP_LAUNCH_APIS(GP_ROW);
#undef GP_ROW
}

// gp_launch_is_graph: cbid launches a graph.
static inline int gp_launch_is_graph(uint32_t cbid) {
#define GP_ROW(name, id, ptsz, shape) || (cbid == id && shape == GP_SHAPE_GRAPH)
  return 0 GP_LAUNCH_APIS(GP_ROW);
#undef GP_ROW
}

// gp_launch_ptsz: cbid's stream 0 is the per-thread default stream.
static inline int gp_launch_ptsz(uint32_t cbid) {
#define GP_ROW(name, id, ptsz, shape) || (cbid == id && ptsz)
  return 0 GP_LAUNCH_APIS(GP_ROW);
#undef GP_ROW
}

// gp_launch_has_shape: cbid passes parameters of shape.
static inline int gp_launch_has_shape(uint32_t cbid, int shape_) {
#define GP_ROW(name, id, ptsz, shape) || (cbid == id && shape == shape_)
  return 0 GP_LAUNCH_APIS(GP_ROW);
#undef GP_ROW
}

// gp_launch_view is what every kernel launch API says, whatever its parameter struct.
typedef struct {
  gp_CUfunction f;
  unsigned grid[3], block[3], cluster[3], smem;
  gp_CUstream stream;
  void **kernel_params, **extra;
} gp_launch_view;

// gp_view_launch reads a kernel launch's parameters, params, into v.
static inline void gp_view_launch(uint32_t cbid, const void *params, gp_launch_view *v) {
  memset(v, 0, sizeof *v);
  if (gp_launch_has_shape(cbid, GP_SHAPE_EX)) {
    const gp_cuLaunchKernelEx_params *p = params;
    const gp_CUlaunchConfig *c = p->config;
    v->f = p->f;
    v->kernel_params = p->kernelParams;
    v->extra = p->extra;
    if (!c) return;
    v->grid[0] = c->gridDimX, v->grid[1] = c->gridDimY, v->grid[2] = c->gridDimZ;
    v->block[0] = c->blockDimX, v->block[1] = c->blockDimY, v->block[2] = c->blockDimZ;
    v->smem = c->sharedMemBytes;
    v->stream = c->hStream;
    for (unsigned i = 0; c->attrs && i < c->numAttrs; i++) {
      if (c->attrs[i].id == GP_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        v->cluster[0] = c->attrs[i].value.clusterDim.x;
        v->cluster[1] = c->attrs[i].value.clusterDim.y;
        v->cluster[2] = c->attrs[i].value.clusterDim.z;
      }
    }
    return;
  }
  const gp_cuLaunchKernel_params *p = params;
  v->f = p->f;
  v->grid[0] = p->gridDimX, v->grid[1] = p->gridDimY, v->grid[2] = p->gridDimZ;
  v->block[0] = p->blockDimX, v->block[1] = p->blockDimY, v->block[2] = p->blockDimZ;
  v->smem = p->sharedMemBytes;
  v->stream = p->hStream;
  v->kernel_params = p->kernelParams;
  // cuLaunchCooperativeKernel_params has no `extra` member.
  if (gp_launch_has_shape(cbid, GP_SHAPE_KERNEL)) v->extra = p->extra;
}

// gp_launch_cooperative: the launch runs as a cooperative kernel, by its API
// or by a launch attribute.
static inline int gp_launch_cooperative(uint32_t cbid, const void *params) {
  if (gp_launch_has_shape(cbid, GP_SHAPE_COOPERATIVE)) return 1;
  if (!gp_launch_has_shape(cbid, GP_SHAPE_EX)) return 0;
  const gp_CUlaunchConfig *c = ((const gp_cuLaunchKernelEx_params *)params)->config;
  for (unsigned i = 0; c && c->attrs && i < c->numAttrs; i++)
    if (c->attrs[i].id == GP_LAUNCH_ATTRIBUTE_COOPERATIVE && c->attrs[i].value.cooperative) return 1;
  return 0;
}

// gp_launch_func is gp_view_launch's f alone: all that a launch's ENTER needs.
static inline gp_CUfunction gp_launch_func(uint32_t cbid, const void *params) {
  if (gp_launch_has_shape(cbid, GP_SHAPE_EX)) return ((const gp_cuLaunchKernelEx_params *)params)->f;
  return ((const gp_cuLaunchKernel_params *)params)->f;
}

// gp_launch_set_kernel swaps the function and kernelParams a launch passes,
// in its parameters (the driver reads them after ENTER).
static inline void gp_launch_set_kernel(uint32_t cbid, void *params, gp_CUfunction f, void **kernel_params) {
  if (gp_launch_has_shape(cbid, GP_SHAPE_EX)) {
    gp_cuLaunchKernelEx_params *p = params;
    p->f = f;
    p->kernelParams = kernel_params;
  } else {
    gp_cuLaunchKernel_params *p = params;
    p->f = f;
    p->kernelParams = kernel_params;
  }
}

#endif
