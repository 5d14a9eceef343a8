// Hand-declared subset of the CUDA driver API (no CUDA headers needed to
// build). Each type has the size and meaning the real cuda.h gives it; the
// functions are reached through pointers filled by gpurr_cuda_open.

#ifndef GPURR_DLCUDA_H
#define GPURR_DLCUDA_H

#include <stddef.h>

#include "dltypes.h"

typedef int CUresult;                 // an enum in cuda.h: int-sized
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct { char bytes[16]; } CUuuid;

// What a wrapper returns when its function was not loaded:
// CUDA_ERROR_NOT_INITIALIZED, so a call before Load fails cleanly.
#define GPURR_CUDA_NOT_LOADED 3

// gpurr_cuda_open dlopens name and resolves every function. It returns 0 on
// success; otherwise 1 with *what set to the dlerror text (the library
// could not be opened) or 2 with *what set to the first missing symbol.
int gpurr_cuda_open(const char *name, const char **what);

// gpurr_cuda_sym returns the address of the function the library that
// gpurr_cuda_open opened exports as name, NULL when it exports none or
// gpurr_cuda_open has not succeeded.
void *gpurr_cuda_sym(const char *name);

// gpurr_dl_check dlopens path and closes it again; it returns NULL when the
// library loads, else the dlerror text.
const char *gpurr_dl_check(const char *path);

CUresult gpurr_cuInit(unsigned int flags);
CUresult gpurr_cuDriverGetVersion(int *version);
CUresult gpurr_cuDeviceGetCount(int *count);
CUresult gpurr_cuDeviceGet(CUdevice *dev, int ordinal);
CUresult gpurr_cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult gpurr_cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult gpurr_cuDeviceGetAttribute(int *value, int attr, CUdevice dev);
CUresult gpurr_cuDeviceTotalMem(size_t *bytes, CUdevice dev);
CUresult gpurr_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult gpurr_cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult gpurr_cuDevicePrimaryCtxReset(CUdevice dev);
CUresult gpurr_cuCtxSetCurrent(CUcontext ctx);
CUresult gpurr_cuCtxSynchronize(void);
// gpurr_cuModuleLoadData loads image with cuModuleLoadDataEx, the JIT's error
// log (NUL-terminated) in log, which holds size bytes.
CUresult gpurr_cuModuleLoadData(CUmodule *mod, const void *image, char *log, unsigned int size);
CUresult gpurr_cuModuleUnload(CUmodule mod);
CUresult gpurr_cuModuleGetFunction(CUfunction *fn, CUmodule mod, const char *name);
CUresult gpurr_cuModuleGetGlobal(CUdeviceptr *ptr, size_t *bytes, CUmodule mod, const char *name);
CUresult gpurr_cuMemAlloc(CUdeviceptr *ptr, size_t bytes);
CUresult gpurr_cuMemFree(CUdeviceptr ptr);
CUresult gpurr_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes);
CUresult gpurr_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes);
CUresult gpurr_cuStreamCreate(CUstream *stream, unsigned int flags);
CUresult gpurr_cuStreamSynchronize(CUstream stream);
CUresult gpurr_cuStreamDestroy(CUstream stream);
CUresult gpurr_cuLaunchKernel(CUfunction fn,
	unsigned int gx, unsigned int gy, unsigned int gz,
	unsigned int bx, unsigned int by, unsigned int bz,
	unsigned int shared, CUstream stream, void **params, void **extra);
CUresult gpurr_cuGetErrorName(CUresult r, const char **s);
CUresult gpurr_cuGetErrorString(CUresult r, const char **s);
CUresult gpurr_cuEventCreate(CUevent *ev, unsigned int flags);
CUresult gpurr_cuEventRecord(CUevent ev, CUstream stream);
CUresult gpurr_cuEventSynchronize(CUevent ev);
CUresult gpurr_cuEventElapsedTime(float *ms, CUevent start, CUevent end);
CUresult gpurr_cuEventDestroy(CUevent ev);
CUresult gpurr_cuMemHostAlloc(void **p, size_t bytes, unsigned int flags);
CUresult gpurr_cuMemFreeHost(void *p);
CUresult gpurr_cuMemHostGetDevicePointer(CUdeviceptr *dptr, void *p, unsigned int flags);
CUresult gpurr_cuMemsetD8(CUdeviceptr p, unsigned char value, size_t bytes);
CUresult gpurr_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
CUresult gpurr_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
CUresult gpurr_cuMemAddressReserve(CUdeviceptr *ptr, size_t bytes, size_t alignment, CUdeviceptr hint, unsigned long long flags);
CUresult gpurr_cuMemAddressFree(CUdeviceptr ptr, size_t bytes);
CUresult gpurr_cuMemCreate(unsigned long long *handle, size_t bytes, const gp_MemAllocationProp *prop, unsigned long long flags);
CUresult gpurr_cuMemRelease(unsigned long long handle);
CUresult gpurr_cuMemMap(CUdeviceptr ptr, size_t bytes, size_t offset, unsigned long long handle, unsigned long long flags);
CUresult gpurr_cuMemUnmap(CUdeviceptr ptr, size_t bytes);
CUresult gpurr_cuMemSetAccess(CUdeviceptr ptr, size_t bytes, const gp_MemAccessDesc *desc, size_t count);
CUresult gpurr_cuMemGetAllocationGranularity(size_t *granularity, const gp_MemAllocationProp *prop, int option);
CUresult gpurr_cuFuncGetAttribute(int *value, int attr, CUfunction fn);
CUresult gpurr_cuFuncSetAttribute(CUfunction fn, int attr, int value);
// Optional (CUDA 12+): GPURR_CUDA_NOT_LOADED when the driver lacks them.
CUresult gpurr_cuLaunchKernelEx(const gp_CUlaunchConfig *config, CUfunction fn, void **params, void **extra);
CUresult gpurr_cuFuncGetParamInfo(CUfunction fn, size_t index, size_t *offset, size_t *size);

#endif
