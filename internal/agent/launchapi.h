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
  // Graph nodes: a kernel that graph launches will run, added or changed
  // through the graph API (gp_view_node), not launched.
  GP_SHAPE_NODE_ADD = 5,           // gp_cuGraphAddKernelNode_params
  GP_SHAPE_NODE_SET = 6,           // gp_cuGraphKernelNodeSetParams_params
  GP_SHAPE_NODE_EXEC_SET = 7,      // gp_cuGraphExecKernelNodeSetParams_params
  GP_SHAPE_NODE_ADD_ANY = 8,       // gp_cuGraphAddNode_params: any node type
  GP_SHAPE_NODE_ADD_ANY_V2 = 9,    // gp_cuGraphAddNode_v2_params
  GP_SHAPE_NODE_SET_ANY = 10,      // gp_cuGraphNodeSetParams_params
  GP_SHAPE_NODE_EXEC_SET_ANY = 11, // gp_cuGraphExecNodeSetParams_params
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
  X(cuLaunchKernelEx_ptsz, 653, 1, GP_SHAPE_EX)                \
  X(cuGraphAddKernelNode, 502, 0, GP_SHAPE_NODE_ADD)          \
  X(cuGraphKernelNodeSetParams, 521, 0, GP_SHAPE_NODE_SET)    \
  X(cuGraphExecKernelNodeSetParams, 538, 0, GP_SHAPE_NODE_EXEC_SET) \
  X(cuGraphAddKernelNode_v2, 689, 0, GP_SHAPE_NODE_ADD)       \
  X(cuGraphKernelNodeSetParams_v2, 691, 0, GP_SHAPE_NODE_SET) \
  X(cuGraphExecKernelNodeSetParams_v2, 692, 0, GP_SHAPE_NODE_EXEC_SET) \
  X(cuGraphAddNode, 712, 0, GP_SHAPE_NODE_ADD_ANY)            \
  X(cuGraphNodeSetParams, 713, 0, GP_SHAPE_NODE_SET_ANY)      \
  X(cuGraphExecNodeSetParams, 714, 0, GP_SHAPE_NODE_EXEC_SET_ANY) \
  X(cuGraphAddNode_v2, 723, 0, GP_SHAPE_NODE_ADD_ANY_V2)

// GP_CBID_<name>: CUpti_driver_api_trace_cbid values of the launch APIs.
#define GP_LAUNCH_API_CBID(name, cbid, ptsz, shape) GP_CBID_##name = cbid,
enum { GP_LAUNCH_APIS(GP_LAUNCH_API_CBID) };
#undef GP_LAUNCH_API_CBID

// Tests on a callback id, each an `||` of one comparison per row that the
// compiler folds as it did the hand-written lists.

// gp_launch_is_kernel: cbid launches one kernel (not a graph).
static inline int gp_launch_is_kernel(uint32_t cbid) {
#define GP_ROW(name, id, ptsz, shape) || (cbid == id && shape < GP_SHAPE_GRAPH)
  return 0 GP_LAUNCH_APIS(GP_ROW);
#undef GP_ROW
}

// gp_launch_is_node: cbid adds or changes a graph node (GP_SHAPE_NODE_*).
static inline int gp_launch_is_node(uint32_t cbid) {
#define GP_ROW(name, id, ptsz, shape) || (cbid == id && shape >= GP_SHAPE_NODE_ADD)
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

// gp_node_view is what every graph node API says of the node it adds or
// changes: launch is its kernel, as a launch API would say it (no stream),
// when the node is a kernel node.
typedef struct {
  gp_CUgraphNode node;     // the node changed; the node added, at EXIT
  gp_CUgraphExec exec;     // the executable graph changed, NULL for a graph's node
  int node_type;           // CUgraphNodeType; GP_GRAPH_NODE_TYPE_KERNEL for the kernel node APIs
  int kernel;              // launch holds the node's kernel
  gp_launch_view launch;
} gp_node_view;

// gp_view_node reads a graph node API's parameters, params, into v; at
// ENTER, an added node is not known yet (v->node is NULL).
static inline void gp_view_node(uint32_t cbid, const void *params, int exit, gp_node_view *v) {
  memset(v, 0, sizeof *v);
  const gp_KERNEL_NODE_PARAMS *k = NULL;
  const gp_CUgraphNodeParams *any = NULL;
  gp_CUgraphNode *added = NULL;
  if (gp_launch_has_shape(cbid, GP_SHAPE_NODE_ADD)) {
    const gp_cuGraphAddKernelNode_params *p = params;
    added = p->phGraphNode, k = p->nodeParams;
  } else if (gp_launch_has_shape(cbid, GP_SHAPE_NODE_SET)) {
    const gp_cuGraphKernelNodeSetParams_params *p = params;
    v->node = p->hNode, k = p->nodeParams;
  } else if (gp_launch_has_shape(cbid, GP_SHAPE_NODE_EXEC_SET)) {
    const gp_cuGraphExecKernelNodeSetParams_params *p = params;
    v->exec = p->hGraphExec, v->node = p->hNode, k = p->nodeParams;
  } else if (gp_launch_has_shape(cbid, GP_SHAPE_NODE_ADD_ANY)) {
    const gp_cuGraphAddNode_params *p = params;
    added = p->phGraphNode, any = p->nodeParams;
  } else if (gp_launch_has_shape(cbid, GP_SHAPE_NODE_ADD_ANY_V2)) {
    const gp_cuGraphAddNode_v2_params *p = params;
    added = p->phGraphNode, any = p->nodeParams;
  } else if (gp_launch_has_shape(cbid, GP_SHAPE_NODE_SET_ANY)) {
    const gp_cuGraphNodeSetParams_params *p = params;
    v->node = p->hNode, any = p->nodeParams;
  } else if (gp_launch_has_shape(cbid, GP_SHAPE_NODE_EXEC_SET_ANY)) {
    const gp_cuGraphExecNodeSetParams_params *p = params;
    v->exec = p->hGraphExec, v->node = p->hNode, any = p->nodeParams;
  } else {
    return;
  }
  if (added && exit) v->node = *added;
  if (any) {
    v->node_type = any->type;
    if (any->type == GP_GRAPH_NODE_TYPE_KERNEL) k = &any->kernel;
  }
  if (!k) return;
  v->kernel = 1;
  gp_launch_view *l = &v->launch;
  // A _v1 struct ends at extra: kern is read only through the _v2 APIs.
  int v1 = cbid == GP_CBID_cuGraphAddKernelNode || cbid == GP_CBID_cuGraphKernelNodeSetParams ||
           cbid == GP_CBID_cuGraphExecKernelNodeSetParams;
  l->f = k->func ? k->func : (v1 ? NULL : (gp_CUfunction)k->kern);
  l->grid[0] = k->gridDimX, l->grid[1] = k->gridDimY, l->grid[2] = k->gridDimZ;
  l->block[0] = k->blockDimX, l->block[1] = k->blockDimY, l->block[2] = k->blockDimZ;
  l->smem = k->sharedMemBytes;
  l->kernel_params = k->kernelParams;
  l->extra = k->extra;
}

#endif
