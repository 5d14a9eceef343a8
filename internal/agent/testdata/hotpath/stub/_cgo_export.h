/* Stand-in for the _cgo_export.h that cgo generates: the Go exports
 * the agent's C calls (start.c, launch.c), implemented by hotpath.c. */
#ifndef GPURR_HOTPATH_CGO_EXPORT_H
#define GPURR_HOTPATH_CGO_EXPORT_H
extern int gpurrKernelSelected(char *name);
extern void gpurrAtExit(void);
extern int gpurrSnapshotKernel(char *name);
extern void gpurrCudaError(char *call, int code);
#endif
