// layoutcheck compares every type the agent's cabi.h declares by hand
// (this file) and every type internal/cuda's dltypes.h declares
// (cuda_types.c) with the real CUDA and CUPTI headers. It needs the CUDA
// SDK, so it is built on the GPU machine by scripts/gpu-check:
//   gcc -I/usr/local/cuda/include internal/agent/layoutcheck/*.c -o layoutcheck && ./layoutcheck
// It prints one line per mismatch and exits 1 if there is any.
#include <cuda.h>
#include <cupti.h>
#include <stddef.h>
// NVTX's injection types come with its header-only implementation.
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define HAVE_NVTX 1
#endif
#include <stdio.h>

#include "../cabi.h"
#include "../hostcall.h"
#include "../launchapi.h"
#include "check.h"

static int failures, checks;

void check(const char *file, const char *what, size_t ours, size_t real) {
  checks++;
  if (ours != real) {
    failures++;
    printf("MISMATCH %s: %s %zu, CUDA headers %zu\n", what, file, ours, real);
  }
}

#define CHECK_FILE "cabi.h"

// check_nvtx compares the NVTX injection declarations (nvtx.c fills NVTX's
// slots by them), or says once that the header to compare them with is
// missing.
static void check_nvtx(void) {
#ifdef HAVE_NVTX
  VALUE(GP_NVTX_ETID_CALLBACKS, NVTX_ETID_CALLBACKS);
  VALUE(GP_NVTX_CB_MODULE_CORE, NVTX_CB_MODULE_CORE);
  VALUE(GP_NVTX_CB_MODULE_CORE2, NVTX_CB_MODULE_CORE2);
  VALUE(GP_NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeStartEx);
  VALUE(GP_NVTX_CBID_CORE_RangeStartA, NVTX_CBID_CORE_RangeStartA);
  VALUE(GP_NVTX_CBID_CORE_RangeStartW, NVTX_CBID_CORE_RangeStartW);
  VALUE(GP_NVTX_CBID_CORE_RangeEnd, NVTX_CBID_CORE_RangeEnd);
  VALUE(GP_NVTX_CBID_CORE_RangePushEx, NVTX_CBID_CORE_RangePushEx);
  VALUE(GP_NVTX_CBID_CORE_RangePushA, NVTX_CBID_CORE_RangePushA);
  VALUE(GP_NVTX_CBID_CORE_RangePushW, NVTX_CBID_CORE_RangePushW);
  VALUE(GP_NVTX_CBID_CORE_RangePop, NVTX_CBID_CORE_RangePop);
  VALUE(GP_NVTX_CBID_CORE2_DomainRangeStartEx, NVTX_CBID_CORE2_DomainRangeStartEx);
  VALUE(GP_NVTX_CBID_CORE2_DomainRangeEnd, NVTX_CBID_CORE2_DomainRangeEnd);
  VALUE(GP_NVTX_CBID_CORE2_DomainRangePushEx, NVTX_CBID_CORE2_DomainRangePushEx);
  VALUE(GP_NVTX_CBID_CORE2_DomainRangePop, NVTX_CBID_CORE2_DomainRangePop);
  VALUE(GP_NVTX_CBID_CORE2_DomainRegisterStringA, NVTX_CBID_CORE2_DomainRegisterStringA);
  VALUE(GP_NVTX_CBID_CORE2_DomainRegisterStringW, NVTX_CBID_CORE2_DomainRegisterStringW);
  VALUE(GP_NVTX_CBID_CORE2_DomainCreateA, NVTX_CBID_CORE2_DomainCreateA);
  VALUE(GP_NVTX_CBID_CORE2_DomainCreateW, NVTX_CBID_CORE2_DomainCreateW);
  SIZE(gp_NvtxExportTableCallbacks, NvtxExportTableCallbacks);
  FIELD(gp_NvtxExportTableCallbacks, NvtxExportTableCallbacks, struct_size);
  FIELD(gp_NvtxExportTableCallbacks, NvtxExportTableCallbacks, GetModuleFunctionTable);
  SIZE(gp_nvtxEventAttributes, nvtxEventAttributes_t);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, version);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, size);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, category);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, payload);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, messageType);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, message);
  VALUE(GP_NVTX_MESSAGE_ASCII, NVTX_MESSAGE_TYPE_ASCII);
  VALUE(GP_NVTX_MESSAGE_UNICODE, NVTX_MESSAGE_TYPE_UNICODE);
  VALUE(GP_NVTX_MESSAGE_REGISTERED, NVTX_MESSAGE_TYPE_REGISTERED);
  VALUE(sizeof(uint64_t), sizeof(nvtxRangeId_t));
#else
  printf("NOTE nvtx3/nvToolsExt.h not found: NVTX injection declarations not checked\n");
#endif
}

int main(void) {
  SIZE(gp_CallbackData, CUpti_CallbackData);
  FIELD(gp_CallbackData, CUpti_CallbackData, callbackSite);
  FIELD(gp_CallbackData, CUpti_CallbackData, functionName);
  FIELD(gp_CallbackData, CUpti_CallbackData, functionParams);
  FIELD(gp_CallbackData, CUpti_CallbackData, functionReturnValue);
  FIELD(gp_CallbackData, CUpti_CallbackData, symbolName);
  FIELD(gp_CallbackData, CUpti_CallbackData, context);
  FIELD(gp_CallbackData, CUpti_CallbackData, contextUid);
  FIELD(gp_CallbackData, CUpti_CallbackData, correlationData);
  FIELD(gp_CallbackData, CUpti_CallbackData, correlationId);

  SIZE(gp_ResourceData, CUpti_ResourceData);
  FIELD(gp_ResourceData, CUpti_ResourceData, context);
  FIELD(gp_ResourceData, CUpti_ResourceData, resourceHandle);
  FIELD(gp_ResourceData, CUpti_ResourceData, resourceDescriptor);

  SIZE(gp_ModuleResourceData, CUpti_ModuleResourceData);
  FIELD(gp_ModuleResourceData, CUpti_ModuleResourceData, moduleId);
  FIELD(gp_ModuleResourceData, CUpti_ModuleResourceData, cubinSize);
  FIELD(gp_ModuleResourceData, CUpti_ModuleResourceData, pCubin);

  SIZE(gp_GraphData, CUpti_GraphData);
  FIELD(gp_GraphData, CUpti_GraphData, graph);
  FIELD(gp_GraphData, CUpti_GraphData, originalGraph);
  FIELD(gp_GraphData, CUpti_GraphData, node);
  FIELD(gp_GraphData, CUpti_GraphData, originalNode);
  FIELD(gp_GraphData, CUpti_GraphData, nodeType);
  FIELD(gp_GraphData, CUpti_GraphData, dependency);
  FIELD(gp_GraphData, CUpti_GraphData, graphExec);

  // Where memjobs.c finds the stream of calls that must wait for hashes beside the program.
  VALUE(GP_STREAM_AT_STREAM_CALL, offsetof(cuStreamSynchronize_params, hStream));
  VALUE(GP_STREAM_AT_STREAM_CALL, offsetof(cuStreamDestroy_v2_params, hStream));
  VALUE(GP_STREAM_AT_STREAM_CALL, offsetof(cuStreamWriteValue32_v2_params, stream));
  VALUE(GP_STREAM_AT_STREAM_CALL, offsetof(cuStreamBatchMemOp_v2_params, stream));
  VALUE(GP_STREAM_AT_EVENT_RECORD, offsetof(cuEventRecord_params, hStream));
  VALUE(GP_STREAM_AT_EVENT_RECORD, offsetof(cuEventRecordWithFlags_params, hStream));
  VALUE(GP_STREAM_AT_FREE_ASYNC, offsetof(cuMemFreeAsync_params, hStream));
  VALUE(GP_STREAM_AT_COPY_DESC_ASYNC, offsetof(cuMemcpy2DAsync_v2_params, hStream));
  VALUE(GP_STREAM_AT_COPY_DESC_ASYNC, offsetof(cuMemcpy3DAsync_v2_params, hStream));
  VALUE(GP_STREAM_AT_COPY_DESC_ASYNC, offsetof(cuMemcpy3DPeerAsync_params, hStream));
  VALUE(GP_STREAM_AT_MEMSET_ASYNC, offsetof(cuMemsetD8Async_params, hStream));
  VALUE(GP_STREAM_AT_MEMSET_ASYNC, offsetof(cuMemsetD16Async_params, hStream));
  VALUE(GP_STREAM_AT_MEMSET_ASYNC, offsetof(cuMemsetD32Async_params, hStream));
  VALUE(GP_STREAM_AT_MEMCPY_ASYNC, offsetof(cuMemcpyAsync_params, hStream));
  VALUE(GP_STREAM_AT_MEMCPY_ASYNC, offsetof(cuMemcpyHtoDAsync_v2_params, hStream));
  VALUE(GP_STREAM_AT_MEMCPY_ASYNC, offsetof(cuMemcpyDtoDAsync_v2_params, hStream));
  VALUE(GP_STREAM_AT_MEMSET2D_ASYNC, offsetof(cuMemsetD2D8Async_params, hStream));
  VALUE(GP_STREAM_AT_MEMSET2D_ASYNC, offsetof(cuMemsetD2D32Async_params, hStream));
  VALUE(GP_STREAM_AT_PEER_ASYNC, offsetof(cuMemcpyPeerAsync_params, hStream));

  SIZE(gp_cuLaunchKernel_params, cuLaunchKernel_params);
  FIELD(gp_cuLaunchKernel_params, cuLaunchKernel_params, f);
  FIELD(gp_cuLaunchKernel_params, cuLaunchKernel_params, gridDimX);
  FIELD(gp_cuLaunchKernel_params, cuLaunchKernel_params, blockDimZ);
  FIELD(gp_cuLaunchKernel_params, cuLaunchKernel_params, sharedMemBytes);
  FIELD(gp_cuLaunchKernel_params, cuLaunchKernel_params, hStream);
  FIELD(gp_cuLaunchKernel_params, cuLaunchKernel_params, kernelParams);
  FIELD(gp_cuLaunchKernel_params, cuLaunchKernel_params, extra);
  // The _ptsz and cooperative variants share the prefix the agent reads.
  FIELD(gp_cuLaunchKernel_params, cuLaunchKernel_ptsz_params, kernelParams);
  FIELD(gp_cuLaunchKernel_params, cuLaunchKernel_ptsz_params, extra);
  FIELD(gp_cuLaunchKernel_params, cuLaunchCooperativeKernel_params, hStream);
  FIELD(gp_cuLaunchKernel_params, cuLaunchCooperativeKernel_params, kernelParams);
  FIELD(gp_cuLaunchKernel_params, cuLaunchCooperativeKernel_ptsz_params, kernelParams);

  SIZE(gp_cuLaunchKernelEx_params, cuLaunchKernelEx_params);
  FIELD(gp_cuLaunchKernelEx_params, cuLaunchKernelEx_params, config);
  FIELD(gp_cuLaunchKernelEx_params, cuLaunchKernelEx_params, f);
  FIELD(gp_cuLaunchKernelEx_params, cuLaunchKernelEx_params, kernelParams);
  FIELD(gp_cuLaunchKernelEx_params, cuLaunchKernelEx_params, extra);
  FIELD(gp_cuLaunchKernelEx_params, cuLaunchKernelEx_ptsz_params, extra);

  CHECK_LAUNCH_CONFIG();

  SIZE(gp_cuGraphLaunch_params, cuGraphLaunch_params);
  FIELD(gp_cuModuleLoadData_params, cuModuleLoadData_params, module);
  FIELD(gp_cuModuleLoadData_params, cuModuleLoadData_params, image);
  FIELD(gp_cuModuleLoadData_params, cuModuleLoadDataEx_params, module);
  FIELD(gp_cuModuleLoadData_params, cuModuleLoadDataEx_params, image);
  FIELD(gp_cuModuleLoadData_params, cuModuleLoadFatBinary_params, module);
  FIELD2(gp_cuModuleLoadData_params, cuModuleLoadFatBinary_params, image, fatCubin);
  SIZE(gp_cuModuleUnload_params, cuModuleUnload_params);
  FIELD(gp_cuModuleUnload_params, cuModuleUnload_params, hmod);
  FIELD(gp_cuGraphLaunch_params, cuGraphLaunch_params, hGraph);
  FIELD(gp_cuGraphLaunch_params, cuGraphLaunch_params, hStream);
  FIELD(gp_cuGraphLaunch_params, cuGraphLaunch_ptsz_params, hStream);

  // Graph node APIs (launchapi.h's GP_SHAPE_NODE_* rows).
  SIZE(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2);
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, func);
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, gridDimX);
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, blockDimZ);
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, sharedMemBytes);
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, kernelParams);
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, extra);
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, kern);
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, ctx);
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v1, extra);  // _v1 is the prefix
  FIELD(gp_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v3, kern);
  SIZE(gp_CUgraphNodeParams, CUgraphNodeParams);
  FIELD(gp_CUgraphNodeParams, CUgraphNodeParams, type);
  FIELD(gp_CUgraphNodeParams, CUgraphNodeParams, kernel);
  VALUE(GP_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_KERNEL);
  VALUE(GP_GRAPH_NODE_TYPE_MEM_ALLOC, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  VALUE(GP_GRAPH_NODE_TYPE_MEM_FREE, CU_GRAPH_NODE_TYPE_MEM_FREE);
  VALUE(GP_GRAPH_NODE_TYPE_CONDITIONAL, CU_GRAPH_NODE_TYPE_CONDITIONAL);
  SIZE(gp_cuGraphAddKernelNode_params, cuGraphAddKernelNode_v2_params);
  FIELD(gp_cuGraphAddKernelNode_params, cuGraphAddKernelNode_v2_params, phGraphNode);
  FIELD(gp_cuGraphAddKernelNode_params, cuGraphAddKernelNode_v2_params, nodeParams);
  SIZE(gp_cuGraphKernelNodeSetParams_params, cuGraphKernelNodeSetParams_v2_params);
  FIELD(gp_cuGraphKernelNodeSetParams_params, cuGraphKernelNodeSetParams_v2_params, hNode);
  FIELD(gp_cuGraphKernelNodeSetParams_params, cuGraphKernelNodeSetParams_v2_params, nodeParams);
  SIZE(gp_cuGraphExecKernelNodeSetParams_params, cuGraphExecKernelNodeSetParams_v2_params);
  FIELD(gp_cuGraphExecKernelNodeSetParams_params, cuGraphExecKernelNodeSetParams_v2_params, hGraphExec);
  FIELD(gp_cuGraphExecKernelNodeSetParams_params, cuGraphExecKernelNodeSetParams_v2_params, hNode);
  FIELD(gp_cuGraphExecKernelNodeSetParams_params, cuGraphExecKernelNodeSetParams_v2_params, nodeParams);
  SIZE(gp_cuGraphAddNode_v2_params, cuGraphAddNode_v2_params);
  FIELD(gp_cuGraphAddNode_v2_params, cuGraphAddNode_v2_params, phGraphNode);
  FIELD(gp_cuGraphAddNode_v2_params, cuGraphAddNode_v2_params, dependencyData);
  FIELD(gp_cuGraphAddNode_v2_params, cuGraphAddNode_v2_params, numDependencies);
  FIELD(gp_cuGraphAddNode_v2_params, cuGraphAddNode_v2_params, nodeParams);
  SIZE(gp_cuGraphNodeSetParams_params, cuGraphNodeSetParams_params);
  FIELD(gp_cuGraphNodeSetParams_params, cuGraphNodeSetParams_params, hNode);
  FIELD(gp_cuGraphNodeSetParams_params, cuGraphNodeSetParams_params, nodeParams);
  SIZE(gp_cuGraphExecNodeSetParams_params, cuGraphExecNodeSetParams_params);
  FIELD(gp_cuGraphExecNodeSetParams_params, cuGraphExecNodeSetParams_params, hGraphExec);
  FIELD(gp_cuGraphExecNodeSetParams_params, cuGraphExecNodeSetParams_params, hNode);
  FIELD(gp_cuGraphExecNodeSetParams_params, cuGraphExecNodeSetParams_params, nodeParams);
#if CUDA_VERSION < 13000  // the _v1 APIs' parameter structs, gone from CUDA 13's headers
  SIZE(gp_cuGraphAddKernelNode_params, cuGraphAddKernelNode_params);
  FIELD(gp_cuGraphAddKernelNode_params, cuGraphAddKernelNode_params, nodeParams);
  SIZE(gp_cuGraphKernelNodeSetParams_params, cuGraphKernelNodeSetParams_params);
  SIZE(gp_cuGraphExecKernelNodeSetParams_params, cuGraphExecKernelNodeSetParams_params);
  SIZE(gp_cuGraphAddNode_params, cuGraphAddNode_params);
  FIELD(gp_cuGraphAddNode_params, cuGraphAddNode_params, numDependencies);
  FIELD(gp_cuGraphAddNode_params, cuGraphAddNode_params, nodeParams);
#endif

  SIZE(gp_ActivityKernel10, CUpti_ActivityKernel10);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, kind);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, registersPerThread);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, start);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, end);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, deviceId);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, contextId);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, streamId);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, gridX);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, blockZ);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, staticSharedMemory);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, dynamicSharedMemory);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, correlationId);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, gridId);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, name);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, graphNodeId);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, graphId);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, clusterX);
  FIELD(gp_ActivityKernel10, CUpti_ActivityKernel10, isDeviceLaunched);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, kind);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, copyKind);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, srcKind);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, dstKind);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, flags);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, bytes);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, start);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, end);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, deviceId);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, contextId);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, streamId);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, correlationId);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, graphNodeId);
  FIELD(gp_ActivityMemcpy6, CUpti_ActivityMemcpy6, graphId);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, kind);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, value);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, bytes);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, start);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, end);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, deviceId);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, contextId);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, streamId);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, correlationId);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, flags);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, memoryKind);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, graphNodeId);
  FIELD(gp_ActivityMemset4, CUpti_ActivityMemset4, graphId);
  FIELD(gp_ActivitySynchronization2, CUpti_ActivitySynchronization2, kind);
  FIELD(gp_ActivitySynchronization2, CUpti_ActivitySynchronization2, type);
  FIELD(gp_ActivitySynchronization2, CUpti_ActivitySynchronization2, start);
  FIELD(gp_ActivitySynchronization2, CUpti_ActivitySynchronization2, end);
  FIELD(gp_ActivitySynchronization2, CUpti_ActivitySynchronization2, correlationId);
  FIELD(gp_ActivitySynchronization2, CUpti_ActivitySynchronization2, contextId);
  FIELD(gp_ActivitySynchronization2, CUpti_ActivitySynchronization2, streamId);
  FIELD(gp_ActivitySynchronization2, CUpti_ActivitySynchronization2, cudaEventId);
  FIELD(gp_ActivityAPI, CUpti_ActivityAPI, kind);
  FIELD(gp_ActivityAPI, CUpti_ActivityAPI, cbid);
  FIELD(gp_ActivityAPI, CUpti_ActivityAPI, start);
  FIELD(gp_ActivityAPI, CUpti_ActivityAPI, end);
  FIELD(gp_ActivityAPI, CUpti_ActivityAPI, processId);
  FIELD(gp_ActivityAPI, CUpti_ActivityAPI, threadId);
  FIELD(gp_ActivityAPI, CUpti_ActivityAPI, correlationId);
  FIELD(gp_ActivityAPI, CUpti_ActivityAPI, returnValue);
  SIZE(gp_ActivityAPI, CUpti_ActivityAPI);
  FIELD(gp_ActivityOverhead3, CUpti_ActivityOverhead3, kind);
  FIELD(gp_ActivityOverhead3, CUpti_ActivityOverhead3, overheadKind);
  FIELD(gp_ActivityOverhead3, CUpti_ActivityOverhead3, objectKind);
  FIELD(gp_ActivityOverhead3, CUpti_ActivityOverhead3, objectId);
  FIELD(gp_ActivityOverhead3, CUpti_ActivityOverhead3, start);
  FIELD(gp_ActivityOverhead3, CUpti_ActivityOverhead3, end);
  FIELD(gp_ActivityOverhead3, CUpti_ActivityOverhead3, correlationId);
  VALUE(GP_ACTIVITY_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_OVERHEAD);
  VALUE(GP_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_DRIVER);
  VALUE(GP_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_RUNTIME);
  VALUE(GP_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  VALUE(GP_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY);
  VALUE(GP_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMSET);
  VALUE(GP_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  VALUE(GP_ACTIVITY_FLAG_MEMCPY_ASYNC, CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC);
  VALUE(GP_ACTIVITY_FLAG_MEMSET_ASYNC, CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC);
  VALUE(GP_SYNC_NONE, CUPTI_SYNCHRONIZATION_INVALID_VALUE);
  // Every row of hostcall.h's table.
#define HOST_CALL_VALUE(name, cbid, class) VALUE(cbid, CUPTI_DRIVER_TRACE_CBID_##name);
  GP_HOST_CALLS(HOST_CALL_VALUE)
#undef HOST_CALL_VALUE

  SIZE(gp_CUuuid, CUuuid);

  VALUE(GP_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_DRIVER_API);
  VALUE(GP_CB_DOMAIN_RESOURCE, CUPTI_CB_DOMAIN_RESOURCE);
  check_nvtx();
  VALUE(GP_API_ENTER, CUPTI_API_ENTER);
  VALUE(GP_API_EXIT, CUPTI_API_EXIT);
  // Every row of launchapi.h's table.
#define LAUNCH_API_VALUE(name, cbid, ptsz, shape) VALUE(GP_CBID_##name, CUPTI_DRIVER_TRACE_CBID_##name);
  GP_LAUNCH_APIS(LAUNCH_API_VALUE)
#undef LAUNCH_API_VALUE
  VALUE(GP_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  VALUE(GP_CBID_RESOURCE_STREAM_DESTROY_STARTING, CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING);
  VALUE(GP_CBID_RESOURCE_MODULE_LOADED, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  VALUE(GP_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
  VALUE(GP_CBID_RESOURCE_GRAPHNODE_CLONED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
  // graphs built whole: memory nodes, executable graphs updated (launch.c)
  VALUE(GP_CBID_cuGraphExecUpdate, CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate);
  VALUE(GP_CBID_cuGraphExecUpdate_v2, CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2);
  VALUE(GP_CBID_cuGraphAddMemAllocNode, CUPTI_DRIVER_TRACE_CBID_cuGraphAddMemAllocNode);
  VALUE(GP_CBID_cuGraphAddMemFreeNode, CUPTI_DRIVER_TRACE_CBID_cuGraphAddMemFreeNode);
  FIELD(gp_cuGraphAddMemNode_params, cuGraphAddMemAllocNode_params, phGraphNode);
  FIELD(gp_cuGraphAddMemNode_params, cuGraphAddMemAllocNode_params, hGraph);
  FIELD(gp_cuGraphAddMemNode_params, cuGraphAddMemFreeNode_params, phGraphNode);
  FIELD(gp_cuGraphAddMemNode_params, cuGraphAddMemFreeNode_params, hGraph);
  FIELD(gp_cuGraphExecUpdate_params, cuGraphExecUpdate_v2_params, hGraphExec);
  FIELD(gp_cuGraphExecUpdate_params, cuGraphExecUpdate_v2_params, hGraph);
  VALUE(GP_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  VALUE(GP_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL);
  VALUE(GP_ACTIVITY_FLAG_FLUSH_FORCED, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  VALUE(GP_DEV_ATTR_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  VALUE(GP_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  VALUE(GP_DEV_ATTR_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);

  // memory capture and the flight recorder
  SIZE(gp_cuMemAlloc_params, cuMemAlloc_v2_params);
  FIELD(gp_cuMemAlloc_params, cuMemAlloc_v2_params, bytesize);
  FIELD(gp_cuMemAlloc_params, cuMemAllocManaged_params, bytesize);
  FIELD(gp_cuMemAlloc_params, cuMemAllocAsync_params, bytesize);
  FIELD(gp_cuMemAlloc_params, cuMemAllocFromPoolAsync_params, bytesize);
  SIZE(gp_cuMemAllocAsync_params, cuMemAllocAsync_params);
  FIELD(gp_cuMemAllocAsync_params, cuMemAllocAsync_params, dptr);
  FIELD(gp_cuMemAllocAsync_params, cuMemAllocAsync_params, bytesize);
  FIELD(gp_cuMemAllocAsync_params, cuMemAllocAsync_params, hStream);
  SIZE(gp_cuMemAllocFromPoolAsync_params, cuMemAllocFromPoolAsync_params);
  FIELD(gp_cuMemAllocFromPoolAsync_params, cuMemAllocFromPoolAsync_params, dptr);
  FIELD(gp_cuMemAllocFromPoolAsync_params, cuMemAllocFromPoolAsync_params, bytesize);
  FIELD(gp_cuMemAllocFromPoolAsync_params, cuMemAllocFromPoolAsync_params, pool);
  FIELD(gp_cuMemAllocFromPoolAsync_params, cuMemAllocFromPoolAsync_params, hStream);
  SIZE(gp_cuMemAllocPitch_params, cuMemAllocPitch_v2_params);
  FIELD(gp_cuMemAllocPitch_params, cuMemAllocPitch_v2_params, pPitch);
  FIELD(gp_cuMemAllocPitch_params, cuMemAllocPitch_v2_params, Height);
  SIZE(gp_cuMemMap_params, cuMemMap_params);
  FIELD(gp_cuMemMap_params, cuMemMap_params, size);
  SIZE(gp_cuMemUnmap_params, cuMemUnmap_params);
  FIELD(gp_cuMemUnmap_params, cuMemUnmap_params, size);
  check(CHECK_FILE, "cuMemFree_v2_params.dptr", offsetof(cuMemFree_v2_params, dptr), 0);
  check(CHECK_FILE, "cuMemFreeAsync_params.dptr", offsetof(cuMemFreeAsync_params, dptr), 0);
  check(CHECK_FILE, "cuIpcCloseMemHandle_params.dptr", offsetof(cuIpcCloseMemHandle_params, dptr), 0);
  VALUE(GP_CBID_cuCtxSynchronize, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize);
  VALUE(GP_CBID_cuModuleLoadData, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData);
  VALUE(GP_LAUNCH_ATTRIBUTE_COOPERATIVE, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  FIELD2(gp_CUlaunchAttribute, CUlaunchAttribute, value.cooperative, value.cooperative);
  VALUE(GP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  VALUE(GP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  VALUE(GP_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
  VALUE(GP_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
  VALUE(GP_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
  VALUE(GP_CBID_cuModuleLoadDataEx, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx);
  VALUE(GP_CBID_cuModuleLoadFatBinary, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary);
  VALUE(GP_CBID_cuModuleUnload, CUPTI_DRIVER_TRACE_CBID_cuModuleUnload);
  VALUE(GP_CBID_cuEventSynchronize, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize);
  VALUE(GP_CBID_cuStreamSynchronize, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize);
  VALUE(GP_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
  VALUE(GP_CBID_cuMemAllocPitch_v2, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2);
  VALUE(GP_CBID_cuMemFree_v2, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2);
  VALUE(GP_CBID_cuMemcpyDtoH_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2);
  VALUE(GP_CBID_cuMemcpyDtoHAsync_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2);
  VALUE(GP_CBID_cuMemcpy, CUPTI_DRIVER_TRACE_CBID_cuMemcpy);
  VALUE(GP_CBID_cuMemcpyAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync);
  VALUE(GP_CBID_cuIpcCloseMemHandle, CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle);
  VALUE(GP_CBID_cuMemAllocManaged, CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged);
  VALUE(GP_CBID_cuMemcpyDtoH_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds);
  VALUE(GP_CBID_cuMemcpy_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds);
  VALUE(GP_CBID_cuMemcpyAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz);
  VALUE(GP_CBID_cuMemcpyDtoHAsync_v2_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz);
  VALUE(GP_CBID_cuStreamSynchronize_ptsz, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz);
  VALUE(GP_CBID_cuMemMap, CUPTI_DRIVER_TRACE_CBID_cuMemMap);
  VALUE(GP_CBID_cuMemUnmap, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap);
  VALUE(GP_CBID_cuMemAllocAsync, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync);
  VALUE(GP_CBID_cuMemAllocAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz);
  VALUE(GP_CBID_cuMemFreeAsync, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync);
  VALUE(GP_CBID_cuMemFreeAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz);
  VALUE(GP_CBID_cuMemAllocFromPoolAsync, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync);
  VALUE(GP_CBID_cuMemAllocFromPoolAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz);
  VALUE(GP_CBID_cuCtxSynchronize_v2, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2);

  check_cuda_types();

  printf("layoutcheck: %d checks, %d mismatches\n", checks, failures);
  return failures ? 1 : 0;
}
