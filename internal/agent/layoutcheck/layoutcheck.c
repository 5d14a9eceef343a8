// layoutcheck compares every type the agent's cabi.h declares by hand
// (this file) and every type internal/cuda's dltypes.h declares
// (cuda_types.c) with the real CUDA and CUPTI headers. It needs the CUDA
// SDK, so it is built on the GPU machine by scripts/gpu-check:
//   gcc -I/usr/local/cuda/include internal/agent/layoutcheck/*.c -o layoutcheck && ./layoutcheck
// It prints one line per mismatch and exits 1 if there is any.
#include <cuda.h>
#include <cupti.h>
#include <stddef.h>
// CUPTI's NVTX parameter structs need NVTX's own types first.
#if __has_include(<nvtx3/nvToolsExt.h>) && __has_include(<generated_nvtx_meta.h>)
#include <nvtx3/nvToolsExt.h>
#include <generated_nvtx_meta.h>
#define HAVE_NVTX_META 1
#endif
#include <stdio.h>

#include "../cabi.h"
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

// check_nvtx compares the NVTX declarations (nvtx.c reads them), or says
// once that the headers to compare them with are missing.
static void check_nvtx(void) {
  SIZE(gp_NvtxData, CUpti_NvtxData);
  FIELD(gp_NvtxData, CUpti_NvtxData, functionName);
  FIELD(gp_NvtxData, CUpti_NvtxData, functionParams);
  FIELD(gp_NvtxData, CUpti_NvtxData, functionReturnValue);
  VALUE(GP_CBID_NVTX_nvtxRangeStartA, CUPTI_CBID_NVTX_nvtxRangeStartA);
  VALUE(GP_CBID_NVTX_nvtxRangeStartEx, CUPTI_CBID_NVTX_nvtxRangeStartEx);
  VALUE(GP_CBID_NVTX_nvtxRangeEnd, CUPTI_CBID_NVTX_nvtxRangeEnd);
  VALUE(GP_CBID_NVTX_nvtxRangePushA, CUPTI_CBID_NVTX_nvtxRangePushA);
  VALUE(GP_CBID_NVTX_nvtxRangePushEx, CUPTI_CBID_NVTX_nvtxRangePushEx);
  VALUE(GP_CBID_NVTX_nvtxRangePop, CUPTI_CBID_NVTX_nvtxRangePop);
  VALUE(GP_CBID_NVTX_nvtxDomainRangeStartEx, CUPTI_CBID_NVTX_nvtxDomainRangeStartEx);
  VALUE(GP_CBID_NVTX_nvtxDomainRangeEnd, CUPTI_CBID_NVTX_nvtxDomainRangeEnd);
  VALUE(GP_CBID_NVTX_nvtxDomainRangePushEx, CUPTI_CBID_NVTX_nvtxDomainRangePushEx);
  VALUE(GP_CBID_NVTX_nvtxDomainRangePop, CUPTI_CBID_NVTX_nvtxDomainRangePop);
  VALUE(GP_CBID_NVTX_nvtxDomainRegisterStringA, CUPTI_CBID_NVTX_nvtxDomainRegisterStringA);
  VALUE(GP_CBID_NVTX_nvtxDomainCreateA, CUPTI_CBID_NVTX_nvtxDomainCreateA);
#ifdef HAVE_NVTX_META
  SIZE(gp_nvtxEventAttributes, nvtxEventAttributes_t);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, version);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, category);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, payload);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, messageType);
  FIELD(gp_nvtxEventAttributes, nvtxEventAttributes_t, message);
  VALUE(GP_NVTX_MESSAGE_ASCII, NVTX_MESSAGE_TYPE_ASCII);
  VALUE(GP_NVTX_MESSAGE_UNICODE, NVTX_MESSAGE_TYPE_UNICODE);
  VALUE(GP_NVTX_MESSAGE_REGISTERED, NVTX_MESSAGE_TYPE_REGISTERED);
  SIZE(gp_nvtxMessageA_params, nvtxRangePushA_params);
  FIELD(gp_nvtxMessageA_params, nvtxRangePushA_params, message);
  FIELD(gp_nvtxMessageA_params, nvtxRangeStartA_params, message);
  FIELD(gp_nvtxEx_params, nvtxRangePushEx_params, eventAttrib);
  FIELD(gp_nvtxEx_params, nvtxRangeStartEx_params, eventAttrib);
  SIZE(gp_nvtxRangeEnd_params, nvtxRangeEnd_params);
  FIELD(gp_nvtxRangeEnd_params, nvtxRangeEnd_params, id);
  FIELD(gp_nvtxDomainEx_params, nvtxDomainRangePushEx_params, domain);
  FIELD(gp_nvtxDomainEx_params, nvtxDomainRangePushEx_params, core);
  FIELD(gp_nvtxDomainEx_params, nvtxDomainRangeStartEx_params, domain);
  FIELD(gp_nvtxDomainEx_params, nvtxDomainRangeStartEx_params, core);
  FIELD(gp_nvtxDomainRangeEnd_params, nvtxDomainRangeEnd_params, domain);
  FIELD(gp_nvtxDomainRangeEnd_params, nvtxDomainRangeEnd_params, core);
  FIELD(gp_nvtxDomainRangePop_params, nvtxDomainRangePop_params, domain);
  FIELD(gp_nvtxDomainCreateA_params, nvtxDomainCreateA_params, name);
  FIELD(gp_nvtxDomainRegisterStringA_params, nvtxDomainRegisterStringA_params, domain);
  FIELD(gp_nvtxDomainRegisterStringA_params, nvtxDomainRegisterStringA_params, string);
#else
  printf("NOTE nvtx3/nvToolsExt.h or generated_nvtx_meta.h not found: NVTX parameter structs not checked\n");
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
  FIELD(gp_cuGraphLaunch_params, cuGraphLaunch_params, hGraph);
  FIELD(gp_cuGraphLaunch_params, cuGraphLaunch_params, hStream);
  FIELD(gp_cuGraphLaunch_params, cuGraphLaunch_ptsz_params, hStream);

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

  SIZE(gp_CUuuid, CUuuid);

  VALUE(GP_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_DRIVER_API);
  VALUE(GP_CB_DOMAIN_RESOURCE, CUPTI_CB_DOMAIN_RESOURCE);
  VALUE(GP_CB_DOMAIN_NVTX, CUPTI_CB_DOMAIN_NVTX);
  check_nvtx();
  VALUE(GP_API_ENTER, CUPTI_API_ENTER);
  VALUE(GP_API_EXIT, CUPTI_API_EXIT);
  VALUE(GP_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  VALUE(GP_CBID_cuLaunchKernel_ptsz, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz);
  VALUE(GP_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel);
  VALUE(GP_CBID_cuLaunchCooperativeKernel_ptsz, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz);
  VALUE(GP_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch);
  VALUE(GP_CBID_cuGraphLaunch_ptsz, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz);
  VALUE(GP_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
  VALUE(GP_CBID_cuLaunchKernelEx_ptsz, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz);
  VALUE(GP_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  VALUE(GP_CBID_RESOURCE_STREAM_DESTROY_STARTING, CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING);
  VALUE(GP_CBID_RESOURCE_MODULE_LOADED, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  VALUE(GP_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
  VALUE(GP_CBID_RESOURCE_GRAPHNODE_CLONED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
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
