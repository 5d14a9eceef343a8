// Driver-API structs declared by hand, with gp_ names so that the layout
// check (internal/agent/layoutcheck/cuda_types.c) can compile them beside
// the real cuda.h and compare sizes and offsets. Only base C types appear
// here. No other package includes this file: a cgo build tracks only the
// headers in its package's own directory (the agent declares what it reads
// of a launch in its cabi.h).

#ifndef GPURR_DLTYPES_H
#define GPURR_DLTYPES_H

// CUmemLocation
typedef struct {
	int type;  // CUmemLocationType: 1 = CU_MEM_LOCATION_TYPE_DEVICE
	int id;    // device ordinal
} gp_MemLocation;

// CUmemAllocationProp
typedef struct {
	int type;                  // CUmemAllocationType: 1 = CU_MEM_ALLOCATION_TYPE_PINNED
	int requestedHandleTypes;  // CUmemAllocationHandleType: 0 = none
	gp_MemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} gp_MemAllocationProp;

// CUmemAccessDesc
typedef struct {
	gp_MemLocation location;
	int flags;  // CUmemAccess_flags: 3 = CU_MEM_ACCESS_FLAGS_PROT_READWRITE
} gp_MemAccessDesc;

enum {
	GP_MEM_ALLOCATION_TYPE_PINNED = 1,
	GP_MEM_LOCATION_TYPE_DEVICE = 1,
	GP_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
	GP_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
};

// CUlaunchAttribute: an id and a 64-byte value union.
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

// CUlaunchAttributeID values replay passes.
enum {
	GP_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
	GP_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
};

// CUlaunchConfig
typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	void *hStream;
	gp_CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} gp_CUlaunchConfig;

// CU_LAUNCH_PARAM_* markers in the `extra` array of a launch.
#define GP_LAUNCH_PARAM_END ((void *)0x00)
#define GP_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define GP_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

// CUfunction_attribute values used by replay.
enum {
	GP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
	GP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
	GP_FUNC_ATTRIBUTE_NUM_REGS = 4,
	GP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
	GP_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
};

// CUjit_option values: the JIT's error log, so a PTX that fails says why.
enum {
	GP_JIT_ERROR_LOG_BUFFER = 5,
	GP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

#endif
