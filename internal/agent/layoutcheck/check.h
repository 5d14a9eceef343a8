// What the two halves of the layout check share: check() counts and reports
// one comparison; the macros compare a hand declaration (of the file the
// including source names as CHECK_FILE) with the real headers' type.
#ifndef GPURR_LAYOUTCHECK_H
#define GPURR_LAYOUTCHECK_H

#include <stddef.h>

void check(const char *file, const char *what, size_t ours, size_t real);
void check_cuda_types(void);  // cuda_types.c

#define SIZE(ours, real) check(CHECK_FILE, "sizeof " #ours, sizeof(ours), sizeof(real))
#define FIELD(ours, real, f) check(CHECK_FILE, #ours "." #f, offsetof(ours, f), offsetof(real, f))
#define FIELD2(ours, real, fo, fr) check(CHECK_FILE, #ours "." #fo, offsetof(ours, fo), offsetof(real, fr))
#define VALUE(ours, real) check(CHECK_FILE, #ours, (size_t)(ours), (size_t)(real))

// The launch shape that both the agent (reading cuLaunchKernelEx's
// parameters) and replay (passing its own) declare, each in its package.
#define CHECK_LAUNCH_CONFIG()                                                                      \
  do {                                                                                             \
    SIZE(gp_CUlaunchConfig, CUlaunchConfig);                                                       \
    FIELD(gp_CUlaunchConfig, CUlaunchConfig, gridDimX);                                            \
    FIELD(gp_CUlaunchConfig, CUlaunchConfig, blockDimX);                                           \
    FIELD(gp_CUlaunchConfig, CUlaunchConfig, sharedMemBytes);                                      \
    FIELD(gp_CUlaunchConfig, CUlaunchConfig, hStream);                                             \
    FIELD(gp_CUlaunchConfig, CUlaunchConfig, attrs);                                               \
    FIELD(gp_CUlaunchConfig, CUlaunchConfig, numAttrs);                                            \
    SIZE(gp_CUlaunchAttribute, CUlaunchAttribute);                                                 \
    FIELD(gp_CUlaunchAttribute, CUlaunchAttribute, id);                                            \
    FIELD(gp_CUlaunchAttribute, CUlaunchAttribute, value);                                         \
    FIELD2(gp_CUlaunchAttribute, CUlaunchAttribute, value.clusterDim.x, value.clusterDim.x);       \
    FIELD2(gp_CUlaunchAttribute, CUlaunchAttribute, value.clusterDim.z, value.clusterDim.z);       \
    VALUE(GP_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);           \
    VALUE(GP_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_POINTER);                         \
    VALUE(GP_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_BUFFER_SIZE);                               \
    VALUE(GP_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_END);                                               \
  } while (0)

#endif
