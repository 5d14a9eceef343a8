// Hand-declared subset of the CUDA driver and CUPTI ABI (CUDA 13.0,
// CUPTI API version 13.0.1) that the agent uses. Declaring it here keeps the
// build free of the CUDA SDK; layoutcheck/layoutcheck.c, compiled against the
// real headers on a GPU machine, checks every size and offset below.
#ifndef GPURR_CABI_H
#define GPURR_CABI_H

#include <stddef.h>
#include <stdint.h>

typedef int gp_CUresult;  // CUDA_SUCCESS = 0
typedef int gp_CUptiResult;  // CUPTI_SUCCESS = 0
typedef int gp_CUdevice;
typedef void *gp_CUcontext;
typedef void *gp_CUstream;
typedef void *gp_CUfunction;
typedef void *gp_CUgraph;
typedef void *gp_CUgraphNode;
typedef void *gp_CUgraphExec;
typedef void *gp_CUpti_SubscriberHandle;

// CUpti_CallbackDomain
enum { GP_CB_DOMAIN_DRIVER_API = 1, GP_CB_DOMAIN_RESOURCE = 3 };
// CUpti_ApiCallbackSite
enum { GP_API_ENTER = 0, GP_API_EXIT = 1 };

// The launch APIs' CUpti_driver_api_trace_cbid values are launchapi.h's table.

// Allocation callbacks (memory capture) and the calls that report a
// failed kernel (flight recorder).
enum {
  GP_CBID_cuCtxSynchronize = 17,
  GP_CBID_cuModuleLoadData = 19,
  GP_CBID_cuModuleLoadDataEx = 20,
  GP_CBID_cuModuleLoadFatBinary = 21,
  GP_CBID_cuModuleUnload = 22,
  GP_CBID_cuEventSynchronize = 121,
  GP_CBID_cuStreamSynchronize = 126,
  GP_CBID_cuMemAlloc_v2 = 243,
  GP_CBID_cuMemAllocPitch_v2 = 244,
  GP_CBID_cuMemFree_v2 = 245,
  GP_CBID_cuMemcpyDtoH_v2 = 278,
  GP_CBID_cuMemcpyDtoHAsync_v2 = 279,
  GP_CBID_cuMemcpy = 305,
  GP_CBID_cuMemcpyAsync = 306,
  GP_CBID_cuIpcCloseMemHandle = 330,
  GP_CBID_cuMemAllocManaged = 371,
  GP_CBID_cuMemcpyDtoH_v2_ptds = 398,
  GP_CBID_cuMemcpy_ptds = 408,
  GP_CBID_cuMemcpyAsync_ptsz = 418,
  GP_CBID_cuMemcpyDtoHAsync_v2_ptsz = 422,
  GP_CBID_cuStreamSynchronize_ptsz = 440,
  GP_CBID_cuMemMap = 551,
  GP_CBID_cuMemUnmap = 552,
  GP_CBID_cuMemAllocAsync = 598,
  GP_CBID_cuMemAllocAsync_ptsz = 599,
  GP_CBID_cuMemFreeAsync = 600,
  GP_CBID_cuMemFreeAsync_ptsz = 601,
  GP_CBID_cuMemAllocFromPoolAsync = 611,
  GP_CBID_cuMemAllocFromPoolAsync_ptsz = 612,
  GP_CBID_cuCtxSynchronize_v2 = 800,
};

// cuMemAlloc_v2_params; cuMemAllocManaged, cuMemAllocAsync and
// cuMemAllocFromPoolAsync start with the same two fields.
typedef struct {
  uint64_t *dptr;
  size_t bytesize;
} gp_cuMemAlloc_params;

typedef struct {
  uint64_t *dptr;
  size_t bytesize;
  gp_CUstream hStream;
} gp_cuMemAllocAsync_params;

typedef struct {
  uint64_t *dptr;
  size_t bytesize;
  void *pool;
  gp_CUstream hStream;
} gp_cuMemAllocFromPoolAsync_params;

typedef struct {
  uint64_t *dptr;
  size_t *pPitch;
  size_t WidthInBytes;
  size_t Height;
  unsigned int ElementSizeBytes;
} gp_cuMemAllocPitch_params;

typedef struct {
  uint64_t ptr;
  size_t size;
  size_t offset;
  unsigned long long handle;
  unsigned long long flags;
} gp_cuMemMap_params;

typedef struct {
  uint64_t ptr;
  size_t size;
} gp_cuMemUnmap_params;

// CUpti_CallbackIdResource values.
enum {
  GP_CBID_RESOURCE_CONTEXT_CREATED = 1,
  GP_CBID_RESOURCE_STREAM_DESTROY_STARTING = 4,
  GP_CBID_RESOURCE_MODULE_LOADED = 6,
  GP_CBID_RESOURCE_GRAPHNODE_CREATED = 13,
  GP_CBID_RESOURCE_GRAPHNODE_CLONED = 20,
};

// CUpti_CallbackData
typedef struct {
  int callbackSite;  // CUpti_ApiCallbackSite
  const char *functionName;
  const void *functionParams;
  void *functionReturnValue;
  const char *symbolName;
  gp_CUcontext context;
  uint32_t contextUid;
  uint64_t *correlationData;
  uint32_t correlationId;
} gp_CallbackData;

// CUpti_ResourceData
typedef struct {
  gp_CUcontext context;
  union {
    gp_CUstream stream;
  } resourceHandle;
  void *resourceDescriptor;
} gp_ResourceData;

// CUpti_ModuleResourceData
typedef struct {
  uint32_t moduleId;
  size_t cubinSize;
  const char *pCubin;
} gp_ModuleResourceData;

// CUpti_GraphData
typedef struct {
  gp_CUgraph graph;
  gp_CUgraph originalGraph;
  gp_CUgraphNode node;
  gp_CUgraphNode originalNode;
  int nodeType;  // CUgraphNodeType
  gp_CUgraphNode dependency;
  gp_CUgraphExec graphExec;
} gp_GraphData;

// cuLaunchKernel_params (also cuLaunchKernel_ptsz) and
// cuLaunchCooperativeKernel_params, which is the same without `extra`.
typedef struct {
  gp_CUfunction f;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  gp_CUstream hStream;
  void **kernelParams;
  void **extra;
} gp_cuLaunchKernel_params;

// CUlaunchAttribute: an id and a 64-byte value union. (internal/cuda, a
// package of its own, declares what replay passes to the driver itself:
// cgo builds track only the headers in a package's own directory.)
typedef struct {
  int id;  // CUlaunchAttributeID
  char pad[4];
  union {
    char pad[64];
    struct {
      unsigned int x, y, z;
    } clusterDim;
    int cooperative;
  } value;
} gp_CUlaunchAttribute;

enum { GP_LAUNCH_ATTRIBUTE_COOPERATIVE = 2, GP_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4 };

// CUlaunchConfig
typedef struct {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  gp_CUstream hStream;
  gp_CUlaunchAttribute *attrs;
  unsigned int numAttrs;
} gp_CUlaunchConfig;

// CU_LAUNCH_PARAM_* markers in the `extra` array of a launch.
#define GP_LAUNCH_PARAM_END ((void *)0x00)
#define GP_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define GP_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

// cuLaunchKernelEx_params
typedef struct {
  const gp_CUlaunchConfig *config;
  gp_CUfunction f;
  void **kernelParams;
  void **extra;
} gp_cuLaunchKernelEx_params;

// Where CUPTI's parameter structs of driver calls name the stream (byte
// offsets): memjobs.c makes that stream wait for hashes beside the program.
enum {
  GP_STREAM_AT_STREAM_CALL = 0,      // cuStreamSynchronize, cuStreamDestroy, cuStreamWriteValue32, cuStreamBatchMemOp
  GP_STREAM_AT_EVENT_RECORD = 8,     // cuEventRecord, cuEventRecordWithFlags: (hEvent, hStream)
  GP_STREAM_AT_FREE_ASYNC = 8,       // cuMemFreeAsync: (dptr, hStream)
  GP_STREAM_AT_COPY_DESC_ASYNC = 8,  // cuMemcpy2DAsync, cuMemcpy3DAsync, cuMemcpy3DPeerAsync: (pCopy, hStream)
  GP_STREAM_AT_MEMSET_ASYNC = 24,    // cuMemsetD8Async, D16, D32: (dst, value, N, hStream)
  GP_STREAM_AT_MEMCPY_ASYNC = 24,    // cuMemcpyAsync, cuMemcpyHtoDAsync, cuMemcpyDtoDAsync: (dst, src, n, hStream)
  GP_STREAM_AT_MEMSET2D_ASYNC = 40,  // cuMemsetD2D8Async, D16, D32: (dst, pitch, value, width, height, hStream)
  GP_STREAM_AT_PEER_ASYNC = 40,      // cuMemcpyPeerAsync: (dst, dstCtx, src, srcCtx, n, hStream)
};

// cuGraphLaunch_params
typedef struct {
  gp_CUgraphExec hGraph;
  gp_CUstream hStream;
} gp_cuGraphLaunch_params;

// CUDA_KERNEL_NODE_PARAMS_v2 (and _v3, CUgraphNodeParams' kernel member, the
// same fields). _v1, which cuGraphAddKernelNode (not _v2) passes, is its
// prefix, up to extra.
typedef struct {
  gp_CUfunction func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void **kernelParams;
  void **extra;
  void *kern;  // CUkernel, when func is NULL (v2 on)
  gp_CUcontext ctx;
} gp_KERNEL_NODE_PARAMS;

// CUgraphNodeType values the agent tells apart.
enum {
  GP_GRAPH_NODE_TYPE_KERNEL = 0,
  GP_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
  GP_GRAPH_NODE_TYPE_MEM_FREE = 11,
  GP_GRAPH_NODE_TYPE_CONDITIONAL = 13,
};

// CUgraphNodeParams: a type, then the node's parameters as a union.
typedef struct {
  int type;  // CUgraphNodeType
  int reserved0[3];
  union {
    long long reserved1[29];
    gp_KERNEL_NODE_PARAMS kernel;
  };
  long long reserved2;
} gp_CUgraphNodeParams;

// cuGraphAddKernelNode_params and _v2's: nodeParams is _v1 or _v2.
typedef struct {
  gp_CUgraphNode *phGraphNode;
  gp_CUgraph hGraph;
  const gp_CUgraphNode *dependencies;
  size_t numDependencies;
  const gp_KERNEL_NODE_PARAMS *nodeParams;
} gp_cuGraphAddKernelNode_params;

// cuGraphKernelNodeSetParams_params (and _v2)
typedef struct {
  gp_CUgraphNode hNode;
  const gp_KERNEL_NODE_PARAMS *nodeParams;
} gp_cuGraphKernelNodeSetParams_params;

// cuGraphExecKernelNodeSetParams_params (and _v2)
typedef struct {
  gp_CUgraphExec hGraphExec;
  gp_CUgraphNode hNode;
  const gp_KERNEL_NODE_PARAMS *nodeParams;
} gp_cuGraphExecKernelNodeSetParams_params;

// cuGraphAddNode_params
typedef struct {
  gp_CUgraphNode *phGraphNode;
  gp_CUgraph hGraph;
  const gp_CUgraphNode *dependencies;
  size_t numDependencies;
  gp_CUgraphNodeParams *nodeParams;
} gp_cuGraphAddNode_params;

// cuGraphAddNode_v2_params: edge data between dependencies and their count.
typedef struct {
  gp_CUgraphNode *phGraphNode;
  gp_CUgraph hGraph;
  const gp_CUgraphNode *dependencies;
  const void *dependencyData;  // CUgraphEdgeData
  size_t numDependencies;
  gp_CUgraphNodeParams *nodeParams;
} gp_cuGraphAddNode_v2_params;

// cuGraphNodeSetParams_params
typedef struct {
  gp_CUgraphNode hNode;
  gp_CUgraphNodeParams *nodeParams;
} gp_cuGraphNodeSetParams_params;

// cuGraphExecNodeSetParams_params
typedef struct {
  gp_CUgraphExec hGraphExec;
  gp_CUgraphNode hNode;
  gp_CUgraphNodeParams *nodeParams;
} gp_cuGraphExecNodeSetParams_params;

// Graph building calls that are not kernel node calls (launch.c): memory nodes, which readers
// count, and executable graphs updated whole.
enum {
  GP_CBID_cuGraphExecUpdate = 561,  // the _v1 call, of CUDA 11; its parameters began as _v2's do
  GP_CBID_cuGraphAddMemAllocNode = 638,
  GP_CBID_cuGraphAddMemFreeNode = 639,
  GP_CBID_cuGraphExecUpdate_v2 = 696,
};

// cuGraphAddMemAllocNode_params and cuGraphAddMemFreeNode_params begin alike: the node
// out-parameter, then the graph.
typedef struct {
  gp_CUgraphNode *phGraphNode;
  gp_CUgraph hGraph;
} gp_cuGraphAddMemNode_params;

// cuGraphExecUpdate_v2_params: the executable graph, then the graph it is updated from.
typedef struct {
  gp_CUgraphExec hGraphExec;
  gp_CUgraph hGraph;
} gp_cuGraphExecUpdate_params;

// CUfunction_attribute values a probed kernel's instrumented copy takes from it, or is checked by.
enum {
  GP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  GP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  GP_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9,
  GP_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
  GP_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15,
};

// cuModuleLoadData_params; cuModuleLoadDataEx_params and cuModuleLoadFatBinary_params start
// the same way (the module out-parameter, then the image).
typedef struct {
  void **module;
  const void *image;
} gp_cuModuleLoadData_params;

// cuModuleUnload_params
typedef struct {
  void *hmod;
} gp_cuModuleUnload_params;

// CUpti_ActivityKind values.
enum {
  GP_ACTIVITY_KIND_MEMCPY = 1,
  GP_ACTIVITY_KIND_MEMSET = 2,
  GP_ACTIVITY_KIND_KERNEL = 3,
  GP_ACTIVITY_KIND_CONCURRENT_KERNEL = 10,
  GP_ACTIVITY_KIND_SYNCHRONIZATION = 38,
};
// CUpti_ActivityFlag
enum { GP_ACTIVITY_FLAG_FLUSH_FORCED = 1, GP_ACTIVITY_FLAG_MEMCPY_ASYNC = 1, GP_ACTIVITY_FLAG_MEMSET_ASYNC = 1 };

// The leading fields of CUpti_ActivityMemcpy6 (CUDA 13.0's memcpy record),
// all the agent reads; the layout check holds each offset.
typedef struct __attribute__((packed, aligned(8))) {
  int kind;
  uint8_t copyKind;
  uint8_t srcKind;
  uint8_t dstKind;
  uint8_t flags;
  uint64_t bytes;
  uint64_t start;
  uint64_t end;
  uint32_t deviceId;
  uint32_t contextId;
  uint32_t streamId;
  uint32_t correlationId;
  uint32_t runtimeCorrelationId;
  uint32_t pad;
  void *reserved0;
  uint64_t graphNodeId;
  uint32_t graphId;
} gp_ActivityMemcpy6;

// The leading fields of CUpti_ActivityMemset4.
typedef struct __attribute__((packed, aligned(8))) {
  int kind;
  uint32_t value;
  uint64_t bytes;
  uint64_t start;
  uint64_t end;
  uint32_t deviceId;
  uint32_t contextId;
  uint32_t streamId;
  uint32_t correlationId;
  uint16_t flags;
  uint16_t memoryKind;
  uint32_t pad;
  void *reserved0;
  uint64_t graphNodeId;
  uint32_t graphId;
} gp_ActivityMemset4;

// The leading fields of CUpti_ActivitySynchronization2; streamId and
// cudaEventId are CUPTI_SYNCHRONIZATION_INVALID_VALUE where they do not apply.
typedef struct __attribute__((packed, aligned(8))) {
  int kind;
  int type;  // CUpti_ActivitySynchronizationType
  uint64_t start;
  uint64_t end;
  uint32_t correlationId;
  uint32_t contextId;
  uint32_t streamId;
  uint32_t cudaEventId;
} gp_ActivitySynchronization2;

// CUPTI_SYNCHRONIZATION_INVALID_VALUE
enum { GP_SYNC_NONE = 0xFFFFFFFFu };

// CUpti_ActivityAPI: a driver or runtime call's record (activity kinds DRIVER and RUNTIME).
typedef struct __attribute__((packed, aligned(8))) {
  int kind;
  uint32_t cbid;
  uint64_t start;
  uint64_t end;
  uint32_t processId;
  uint32_t threadId;
  uint32_t correlationId;
  uint32_t returnValue;
} gp_ActivityAPI;

// The leading fields of CUpti_ActivityOverhead3: CUPTI's and the driver's own time.
typedef struct __attribute__((packed, aligned(8))) {
  int kind;
  int overheadKind;
  int objectKind;
  uint8_t objectId[12];  // CUpti_ActivityObjectKindId
  uint64_t start;
  uint64_t end;
  uint32_t correlationId;
} gp_ActivityOverhead3;

enum {
  GP_ACTIVITY_KIND_DRIVER = 4,
  GP_ACTIVITY_KIND_RUNTIME = 5,
  GP_ACTIVITY_KIND_OVERHEAD = 17,
  GP_ACTIVITY_KIND_EXTERNAL_CORRELATION = 39,
};

// CUpti_Activity: the common record header.
typedef struct __attribute__((packed, aligned(8))) {
  int kind;
} gp_Activity;

// CUpti_ActivityKernel10: packed, 8-byte aligned, 216 bytes.
typedef struct __attribute__((packed, aligned(8))) {
  int kind;
  uint8_t cacheConfig;
  uint8_t sharedMemoryConfig;
  uint16_t registersPerThread;
  int partitionedGlobalCacheRequested;
  int partitionedGlobalCacheExecuted;
  uint64_t start;
  uint64_t end;
  uint64_t completed;
  uint32_t deviceId;
  uint32_t contextId;
  uint32_t streamId;
  int32_t gridX, gridY, gridZ;
  int32_t blockX, blockY, blockZ;
  int32_t staticSharedMemory;
  int32_t dynamicSharedMemory;
  uint32_t localMemoryPerThread;
  uint32_t localMemoryTotal;
  uint32_t correlationId;
  int64_t gridId;
  const char *name;
  void *reserved0;
  uint64_t queued;
  uint64_t submitted;
  uint8_t launchType;
  uint8_t isSharedMemoryCarveoutRequested;
  uint8_t sharedMemoryCarveoutRequested;
  uint8_t padding;
  uint32_t sharedMemoryExecuted;
  uint64_t graphNodeId;
  int shmemLimitConfig;
  uint32_t graphId;
  void *pAccessPolicyWindow;
  uint32_t channelID;
  int channelType;
  uint32_t clusterX, clusterY, clusterZ;
  uint32_t clusterSchedulingPolicy;
  uint64_t localMemoryTotal_v2;
  uint32_t maxPotentialClusterSize;
  uint32_t maxActiveClusters;
  uint8_t isDeviceLaunched;
  uint8_t padding3[7];
} gp_ActivityKernel10;

// CUuuid
typedef struct {
  char bytes[16];
} gp_CUuuid;

// CUdevice_attribute values.
enum {
  GP_DEV_ATTR_MULTIPROCESSOR_COUNT = 16,
  GP_DEV_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
  GP_DEV_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
};

// ---- NVTX (the agent is NVTX's injection library) ----
//
// gpurr record points NVTX_INJECTION64_PATH at the agent. NVTX loads it on
// the program's first NVTX call and calls InitializeInjectionNvtx2 with
// its export table; the agent writes its own functions into the slots of
// the core and core2 modules, so each nvtxRangePushA is one direct call
// into nvtx.c. Values and layouts are those of nvtx3/nvtxDetail/nvtxTypes.h
// and nvToolsExt.h (checked by layoutcheck).

// NvtxExportTableID and NvtxCallbackModule
enum { GP_NVTX_ETID_CALLBACKS = 1 };
enum { GP_NVTX_CB_MODULE_CORE = 1, GP_NVTX_CB_MODULE_CORE2 = 5 };

// NvtxCallbackIdCore: the slots of the core module the agent fills
enum {
  GP_NVTX_CBID_CORE_RangeStartEx = 4,
  GP_NVTX_CBID_CORE_RangeStartA = 5,
  GP_NVTX_CBID_CORE_RangeStartW = 6,
  GP_NVTX_CBID_CORE_RangeEnd = 7,
  GP_NVTX_CBID_CORE_RangePushEx = 8,
  GP_NVTX_CBID_CORE_RangePushA = 9,
  GP_NVTX_CBID_CORE_RangePushW = 10,
  GP_NVTX_CBID_CORE_RangePop = 11,
};

// NvtxCallbackIdCore2: the slots of the core2 (domain) module the agent fills
enum {
  GP_NVTX_CBID_CORE2_DomainRangeStartEx = 2,
  GP_NVTX_CBID_CORE2_DomainRangeEnd = 3,
  GP_NVTX_CBID_CORE2_DomainRangePushEx = 4,
  GP_NVTX_CBID_CORE2_DomainRangePop = 5,
  GP_NVTX_CBID_CORE2_DomainRegisterStringA = 10,
  GP_NVTX_CBID_CORE2_DomainRegisterStringW = 11,
  GP_NVTX_CBID_CORE2_DomainCreateA = 12,
  GP_NVTX_CBID_CORE2_DomainCreateW = 13,
};

typedef void (*gp_NvtxFunctionPointer)(void);

// NvtxExportTableCallbacks: GetModuleFunctionTable hands out a module's
// table, an array of pointers to its function pointer slots.
typedef struct {
  size_t struct_size;
  int (*GetModuleFunctionTable)(int module, gp_NvtxFunctionPointer ***out_table, unsigned int *out_size);
} gp_NvtxExportTableCallbacks;

// NvtxGetExportTableFunc_t
typedef const void *(*gp_NvtxGetExportTableFunc)(uint32_t exportTableId);

typedef void *gp_nvtxDomainHandle;
typedef void *gp_nvtxStringHandle;

// nvtxMessageType_t
enum { GP_NVTX_MESSAGE_UNKNOWN = 0, GP_NVTX_MESSAGE_ASCII = 1, GP_NVTX_MESSAGE_UNICODE = 2, GP_NVTX_MESSAGE_REGISTERED = 3 };

// nvtxEventAttributes_t (version 2, 48 bytes)
typedef struct {
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t colorType;
  uint32_t color;
  int32_t payloadType;
  int32_t reserved0;
  union {
    uint64_t ullValue;
    double dValue;
  } payload;
  int32_t messageType;
  union {
    const char *ascii;
    const void *unicode;  // wchar_t *
    gp_nvtxStringHandle registered;
  } message;
} gp_nvtxEventAttributes;

typedef void (*gp_CallbackFunc)(void *userdata, int domain, uint32_t cbid, const void *cbdata);
typedef void (*gp_BufferRequestFunc)(uint8_t **buffer, size_t *size, size_t *maxNumRecords);
typedef void (*gp_BufferCompletedFunc)(gp_CUcontext ctx, uint32_t streamId, uint8_t *buffer, size_t size, size_t validSize);

#endif
