/* Stand-in for the _cgo_export.h that cgo generates: the Go exports
 * the agent's C calls (start.c, launch.c), implemented by hotpath.c. */
#ifndef GPURR_HOTPATH_CGO_EXPORT_H
#define GPURR_HOTPATH_CGO_EXPORT_H
#include <stddef.h>
#include <stdint.h>
extern int gpurrKernelSelected(char *name);
extern void gpurrAtExit(void);
extern int gpurrSnapshotKernel(char *name);
extern int gpurrStepRange(char *msg, int n);
extern void gpurrCudaError(char *call, int code);
extern void gpurrProbeModule(void *module, void *input, void *image, size_t size);
extern void gpurrProbeForgetModule(void *module);
extern int gpurrProbeFunction(void *module, char *name, uint64_t kernelID, uint32_t nparams, void **out);
extern void gpurrModuleWriteSets(void *image, size_t size);
extern void *gpurrKernelReadOnly(char *name, uint32_t paramBytes);
#endif
