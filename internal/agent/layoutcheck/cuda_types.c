// The half of layoutcheck for internal/cuda/dltypes.h: the types replay
// passes to the driver itself (VMM, launches). A source of its own, since
// dltypes.h and the agent's cabi.h both declare the launch shape.
#include <cuda.h>
#include <stddef.h>

#include "../../cuda/dltypes.h"
#include "check.h"

#define CHECK_FILE "dltypes.h"

void check_cuda_types(void) {
  CHECK_LAUNCH_CONFIG();
  FIELD2(gp_CUlaunchAttribute, CUlaunchAttribute, value.cooperative, value.cooperative);
  VALUE(GP_LAUNCH_ATTRIBUTE_COOPERATIVE, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  SIZE(gp_MemLocation, CUmemLocation);
  FIELD(gp_MemLocation, CUmemLocation, id);
  SIZE(gp_MemAllocationProp, CUmemAllocationProp);
  FIELD(gp_MemAllocationProp, CUmemAllocationProp, requestedHandleTypes);
  FIELD(gp_MemAllocationProp, CUmemAllocationProp, location);
  FIELD(gp_MemAllocationProp, CUmemAllocationProp, win32HandleMetaData);
  FIELD(gp_MemAllocationProp, CUmemAllocationProp, allocFlags);
  FIELD2(gp_MemAllocationProp, CUmemAllocationProp, allocFlags.usage, allocFlags.usage);
  SIZE(gp_MemAccessDesc, CUmemAccessDesc);
  FIELD(gp_MemAccessDesc, CUmemAccessDesc, flags);
  VALUE(GP_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
  VALUE(GP_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
  VALUE(GP_MEM_ACCESS_FLAGS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  VALUE(GP_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  VALUE(GP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  VALUE(GP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  VALUE(GP_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_NUM_REGS);
  VALUE(GP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  VALUE(GP_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
  VALUE(GP_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER);
  VALUE(GP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
}
