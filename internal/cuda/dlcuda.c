// Function pointers into libcuda.so.1, resolved by gpurr_cuda_open, and one
// thin wrapper per function (cgo cannot call through a C function pointer).

#include <dlfcn.h>
#include <stddef.h>

#include "dlcuda.h"

static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetUuid)(CUuuid *, CUdevice);
static CUresult (*p_cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*p_cuDeviceTotalMem)(size_t *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuDevicePrimaryCtxReset)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuModuleLoadDataEx)(CUmodule *, const void *, unsigned int, int *, void **);
static CUresult (*p_cuModuleUnload)(CUmodule);
static CUresult (*p_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*p_cuModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*p_cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned int);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
	unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
static CUresult (*p_cuGetErrorName)(CUresult, const char **);
static CUresult (*p_cuGetErrorString)(CUresult, const char **);
static CUresult (*p_cuEventCreate)(CUevent *, unsigned int);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuEventSynchronize)(CUevent);
static CUresult (*p_cuEventElapsedTime)(float *, CUevent, CUevent);
static CUresult (*p_cuEventDestroy)(CUevent);
static CUresult (*p_cuMemHostAlloc)(void **, size_t, unsigned int);
static CUresult (*p_cuMemFreeHost)(void *);
static CUresult (*p_cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned int);
static CUresult (*p_cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
static CUresult (*p_cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*p_cuMemAddressFree)(CUdeviceptr, size_t);
static CUresult (*p_cuMemCreate)(unsigned long long *, size_t, const gp_MemAllocationProp *, unsigned long long);
static CUresult (*p_cuMemRelease)(unsigned long long);
static CUresult (*p_cuMemMap)(CUdeviceptr, size_t, size_t, unsigned long long, unsigned long long);
static CUresult (*p_cuMemUnmap)(CUdeviceptr, size_t);
static CUresult (*p_cuMemSetAccess)(CUdeviceptr, size_t, const gp_MemAccessDesc *, size_t);
static CUresult (*p_cuMemGetAllocationGranularity)(size_t *, const gp_MemAllocationProp *, int);
static CUresult (*p_cuFuncGetAttribute)(int *, int, CUfunction);
static CUresult (*p_cuFuncSetAttribute)(CUfunction, int, int);
static CUresult (*p_cuLaunchKernelEx)(const gp_CUlaunchConfig *, CUfunction, void **, void **);
static CUresult (*p_cuFuncGetParamInfo)(CUfunction, size_t, size_t *, size_t *);

// Each entry names the exported symbol that cuda.h (CUDA 13) maps the API
// name to, and an older export with the same signature to fall back on, so
// drivers from CUDA 11 on work too.
struct sym {
	void **slot;
	const char *name;
	const char *fallback;
	int optional;  // newer than CUDA 11: a missing one leaves its slot NULL
};

#define SLOT(p) ((void **)&(p))

static const struct sym syms[] = {
	{SLOT(p_cuInit), "cuInit", NULL},
	{SLOT(p_cuDriverGetVersion), "cuDriverGetVersion", NULL},
	{SLOT(p_cuDeviceGetCount), "cuDeviceGetCount", NULL},
	{SLOT(p_cuDeviceGet), "cuDeviceGet", NULL},
	{SLOT(p_cuDeviceGetName), "cuDeviceGetName", NULL},
	{SLOT(p_cuDeviceGetUuid), "cuDeviceGetUuid_v2", "cuDeviceGetUuid"},
	{SLOT(p_cuDeviceGetAttribute), "cuDeviceGetAttribute", NULL},
	{SLOT(p_cuDeviceTotalMem), "cuDeviceTotalMem_v2", NULL},
	{SLOT(p_cuDevicePrimaryCtxRetain), "cuDevicePrimaryCtxRetain", NULL},
	{SLOT(p_cuDevicePrimaryCtxRelease), "cuDevicePrimaryCtxRelease_v2", NULL},
	{SLOT(p_cuDevicePrimaryCtxReset), "cuDevicePrimaryCtxReset_v2", NULL},
	{SLOT(p_cuCtxSetCurrent), "cuCtxSetCurrent", NULL},
	{SLOT(p_cuCtxSynchronize), "cuCtxSynchronize", NULL},
	{SLOT(p_cuModuleLoadDataEx), "cuModuleLoadDataEx", NULL},
	{SLOT(p_cuModuleUnload), "cuModuleUnload", NULL},
	{SLOT(p_cuModuleGetFunction), "cuModuleGetFunction", NULL},
	{SLOT(p_cuModuleGetGlobal), "cuModuleGetGlobal_v2", NULL},
	{SLOT(p_cuMemAlloc), "cuMemAlloc_v2", NULL},
	{SLOT(p_cuMemFree), "cuMemFree_v2", NULL},
	{SLOT(p_cuMemcpyHtoD), "cuMemcpyHtoD_v2", NULL},
	{SLOT(p_cuMemcpyDtoH), "cuMemcpyDtoH_v2", NULL},
	{SLOT(p_cuStreamCreate), "cuStreamCreate", NULL},
	{SLOT(p_cuStreamSynchronize), "cuStreamSynchronize", NULL},
	{SLOT(p_cuStreamDestroy), "cuStreamDestroy_v2", NULL},
	{SLOT(p_cuLaunchKernel), "cuLaunchKernel", NULL},
	{SLOT(p_cuGetErrorName), "cuGetErrorName", NULL},
	{SLOT(p_cuGetErrorString), "cuGetErrorString", NULL},
	{SLOT(p_cuEventCreate), "cuEventCreate", NULL},
	{SLOT(p_cuEventRecord), "cuEventRecord", NULL},
	{SLOT(p_cuEventSynchronize), "cuEventSynchronize", NULL},
	{SLOT(p_cuEventElapsedTime), "cuEventElapsedTime_v2", "cuEventElapsedTime"},
	{SLOT(p_cuEventDestroy), "cuEventDestroy_v2", NULL},
	{SLOT(p_cuMemHostAlloc), "cuMemHostAlloc", NULL},
	{SLOT(p_cuMemFreeHost), "cuMemFreeHost", NULL},
	{SLOT(p_cuMemHostGetDevicePointer), "cuMemHostGetDevicePointer_v2", NULL},
	{SLOT(p_cuMemsetD8), "cuMemsetD8_v2", NULL},
	{SLOT(p_cuMemcpyDtoDAsync), "cuMemcpyDtoDAsync_v2", NULL},
	{SLOT(p_cuMemcpyDtoHAsync), "cuMemcpyDtoHAsync_v2", NULL},
	{SLOT(p_cuMemAddressReserve), "cuMemAddressReserve", NULL},
	{SLOT(p_cuMemAddressFree), "cuMemAddressFree", NULL},
	{SLOT(p_cuMemCreate), "cuMemCreate", NULL},
	{SLOT(p_cuMemRelease), "cuMemRelease", NULL},
	{SLOT(p_cuMemMap), "cuMemMap", NULL},
	{SLOT(p_cuMemUnmap), "cuMemUnmap", NULL},
	{SLOT(p_cuMemSetAccess), "cuMemSetAccess", NULL},
	{SLOT(p_cuMemGetAllocationGranularity), "cuMemGetAllocationGranularity", NULL},
	{SLOT(p_cuFuncGetAttribute), "cuFuncGetAttribute", NULL},
	{SLOT(p_cuFuncSetAttribute), "cuFuncSetAttribute", NULL},
	{SLOT(p_cuLaunchKernelEx), "cuLaunchKernelEx", NULL, 1},
	{SLOT(p_cuFuncGetParamInfo), "cuFuncGetParamInfo", NULL, 1},
};

// The library gpurr_cuda_open opened, for gpurr_cuda_sym.
static void *handle;

int gpurr_cuda_open(const char *name, const char **what) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		*what = dlerror();
		return 1;
	}
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		void *p = dlsym(h, syms[i].name);
		if (p == NULL && syms[i].fallback != NULL) {
			p = dlsym(h, syms[i].fallback);
		}
		if (p == NULL && syms[i].optional) {
			continue;
		}
		if (p == NULL) {
			// Leave every slot empty: a half-loaded table would let some
			// calls through and not others.
			for (size_t j = 0; j < i; j++) {
				*syms[j].slot = NULL;
			}
			dlclose(h);
			*what = syms[i].name;
			return 2;
		}
		*syms[i].slot = p;
	}
	// The handle stays open for the life of the process.
	handle = h;
	return 0;
}

void *gpurr_cuda_sym(const char *name) {
	return handle == NULL ? NULL : dlsym(handle, name);
}

const char *gpurr_dl_check(const char *path) {
	void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) {
		return dlerror();
	}
	dlclose(h);
	return NULL;
}

#define CALL(p, ...) ((p) == NULL ? GPURR_CUDA_NOT_LOADED : (p)(__VA_ARGS__))

CUresult gpurr_cuInit(unsigned int flags) { return CALL(p_cuInit, flags); }
CUresult gpurr_cuDriverGetVersion(int *v) { return CALL(p_cuDriverGetVersion, v); }
CUresult gpurr_cuDeviceGetCount(int *n) { return CALL(p_cuDeviceGetCount, n); }
CUresult gpurr_cuDeviceGet(CUdevice *d, int i) { return CALL(p_cuDeviceGet, d, i); }
CUresult gpurr_cuDeviceGetName(char *s, int n, CUdevice d) { return CALL(p_cuDeviceGetName, s, n, d); }
CUresult gpurr_cuDeviceGetUuid(CUuuid *u, CUdevice d) { return CALL(p_cuDeviceGetUuid, u, d); }
CUresult gpurr_cuDeviceGetAttribute(int *v, int a, CUdevice d) { return CALL(p_cuDeviceGetAttribute, v, a, d); }
CUresult gpurr_cuDeviceTotalMem(size_t *b, CUdevice d) { return CALL(p_cuDeviceTotalMem, b, d); }
CUresult gpurr_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { return CALL(p_cuDevicePrimaryCtxRetain, c, d); }
CUresult gpurr_cuDevicePrimaryCtxRelease(CUdevice d) { return CALL(p_cuDevicePrimaryCtxRelease, d); }
CUresult gpurr_cuDevicePrimaryCtxReset(CUdevice d) { return CALL(p_cuDevicePrimaryCtxReset, d); }
CUresult gpurr_cuCtxSetCurrent(CUcontext c) { return CALL(p_cuCtxSetCurrent, c); }
CUresult gpurr_cuCtxSynchronize(void) { return p_cuCtxSynchronize == NULL ? GPURR_CUDA_NOT_LOADED : p_cuCtxSynchronize(); }
CUresult gpurr_cuModuleLoadData(CUmodule *m, const void *image, char *log, unsigned int size) {
	int options[] = {GP_JIT_ERROR_LOG_BUFFER, GP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *values[] = {log, (void *)(size_t)size};
	return CALL(p_cuModuleLoadDataEx, m, image, 2, options, values);
}
CUresult gpurr_cuModuleUnload(CUmodule m) { return CALL(p_cuModuleUnload, m); }
CUresult gpurr_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) { return CALL(p_cuModuleGetFunction, f, m, name); }
CUresult gpurr_cuModuleGetGlobal(CUdeviceptr *p, size_t *n, CUmodule m, const char *name) { return CALL(p_cuModuleGetGlobal, p, n, m, name); }
CUresult gpurr_cuMemAlloc(CUdeviceptr *p, size_t n) { return CALL(p_cuMemAlloc, p, n); }
CUresult gpurr_cuMemFree(CUdeviceptr p) { return CALL(p_cuMemFree, p); }
CUresult gpurr_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) { return CALL(p_cuMemcpyHtoD, dst, src, n); }
CUresult gpurr_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) { return CALL(p_cuMemcpyDtoH, dst, src, n); }
CUresult gpurr_cuStreamCreate(CUstream *s, unsigned int flags) { return CALL(p_cuStreamCreate, s, flags); }
CUresult gpurr_cuStreamSynchronize(CUstream s) { return CALL(p_cuStreamSynchronize, s); }
CUresult gpurr_cuStreamDestroy(CUstream s) { return CALL(p_cuStreamDestroy, s); }
CUresult gpurr_cuLaunchKernel(CUfunction f,
	unsigned int gx, unsigned int gy, unsigned int gz,
	unsigned int bx, unsigned int by, unsigned int bz,
	unsigned int shared, CUstream s, void **params, void **extra) {
	return CALL(p_cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}
CUresult gpurr_cuGetErrorName(CUresult r, const char **s) { return CALL(p_cuGetErrorName, r, s); }
CUresult gpurr_cuGetErrorString(CUresult r, const char **s) { return CALL(p_cuGetErrorString, r, s); }
CUresult gpurr_cuEventCreate(CUevent *e, unsigned int flags) { return CALL(p_cuEventCreate, e, flags); }
CUresult gpurr_cuEventRecord(CUevent e, CUstream s) { return CALL(p_cuEventRecord, e, s); }
CUresult gpurr_cuEventSynchronize(CUevent e) { return CALL(p_cuEventSynchronize, e); }
CUresult gpurr_cuEventElapsedTime(float *ms, CUevent a, CUevent b) { return CALL(p_cuEventElapsedTime, ms, a, b); }
CUresult gpurr_cuEventDestroy(CUevent e) { return CALL(p_cuEventDestroy, e); }
CUresult gpurr_cuMemHostAlloc(void **p, size_t n, unsigned int flags) { return CALL(p_cuMemHostAlloc, p, n, flags); }
CUresult gpurr_cuMemFreeHost(void *p) { return CALL(p_cuMemFreeHost, p); }
CUresult gpurr_cuMemHostGetDevicePointer(CUdeviceptr *d, void *p, unsigned int flags) { return CALL(p_cuMemHostGetDevicePointer, d, p, flags); }
CUresult gpurr_cuMemsetD8(CUdeviceptr p, unsigned char v, size_t n) { return CALL(p_cuMemsetD8, p, v, n); }
CUresult gpurr_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return CALL(p_cuMemcpyDtoDAsync, dst, src, n, s); }
CUresult gpurr_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) { return CALL(p_cuMemcpyDtoHAsync, dst, src, n, s); }
CUresult gpurr_cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr hint, unsigned long long flags) { return CALL(p_cuMemAddressReserve, p, n, align, hint, flags); }
CUresult gpurr_cuMemAddressFree(CUdeviceptr p, size_t n) { return CALL(p_cuMemAddressFree, p, n); }
CUresult gpurr_cuMemCreate(unsigned long long *h, size_t n, const gp_MemAllocationProp *prop, unsigned long long flags) { return CALL(p_cuMemCreate, h, n, prop, flags); }
CUresult gpurr_cuMemRelease(unsigned long long h) { return CALL(p_cuMemRelease, h); }
CUresult gpurr_cuMemMap(CUdeviceptr p, size_t n, size_t off, unsigned long long h, unsigned long long flags) { return CALL(p_cuMemMap, p, n, off, h, flags); }
CUresult gpurr_cuMemUnmap(CUdeviceptr p, size_t n) { return CALL(p_cuMemUnmap, p, n); }
CUresult gpurr_cuMemSetAccess(CUdeviceptr p, size_t n, const gp_MemAccessDesc *desc, size_t count) { return CALL(p_cuMemSetAccess, p, n, desc, count); }
CUresult gpurr_cuMemGetAllocationGranularity(size_t *g, const gp_MemAllocationProp *prop, int option) { return CALL(p_cuMemGetAllocationGranularity, g, prop, option); }
CUresult gpurr_cuFuncGetAttribute(int *v, int attr, CUfunction f) { return CALL(p_cuFuncGetAttribute, v, attr, f); }
CUresult gpurr_cuFuncSetAttribute(CUfunction f, int attr, int v) { return CALL(p_cuFuncSetAttribute, f, attr, v); }
CUresult gpurr_cuLaunchKernelEx(const gp_CUlaunchConfig *c, CUfunction f, void **params, void **extra) { return CALL(p_cuLaunchKernelEx, c, f, params, extra); }
CUresult gpurr_cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size) { return CALL(p_cuFuncGetParamInfo, f, i, off, size); }
