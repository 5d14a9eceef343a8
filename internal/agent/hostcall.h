// The copy, memset and synchronization calls the agent records as host
// calls (gp_hostcall_rec): one row each, and what is derived from the rows.
// Adding one is a row: the callback id constant, the subscription
// (start.c), the names the writer gives them (gp_hostcall_name) and the
// layout check against CUPTI's header (layoutcheck) all come from it.
#ifndef GPURR_HOSTCALL_H
#define GPURR_HOSTCALL_H

#include <stdint.h>

enum { GP_HOSTCALL_COPY = 1, GP_HOSTCALL_MEMSET = 2, GP_HOSTCALL_SYNC = 3 };

// GP_HOST_CALLS(X) calls X(name, CUPTI driver callback id, class) for each
// call. cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize and the
// copies that memory capture or the flight recorder also watch are in
// cabi.h's list too, with the same ids.
#define GP_HOST_CALLS(X)                                   \
  X(cuCtxSynchronize, 17, GP_HOSTCALL_SYNC)                \
  X(cuEventSynchronize, 121, GP_HOSTCALL_SYNC)             \
  X(cuStreamSynchronize, 126, GP_HOSTCALL_SYNC)            \
  X(cuStreamSynchronize_ptsz, 440, GP_HOSTCALL_SYNC)       \
  X(cuStreamWaitEvent, 295, GP_HOSTCALL_SYNC)              \
  X(cuStreamWaitEvent_ptsz, 436, GP_HOSTCALL_SYNC)         \
  X(cuCtxSynchronize_v2, 800, GP_HOSTCALL_SYNC)            \
  X(cuMemsetD8Async, 216, GP_HOSTCALL_MEMSET)              \
  X(cuMemsetD16Async, 218, GP_HOSTCALL_MEMSET)             \
  X(cuMemsetD32Async, 220, GP_HOSTCALL_MEMSET)             \
  X(cuMemsetD2D8Async, 222, GP_HOSTCALL_MEMSET)            \
  X(cuMemsetD2D16Async, 224, GP_HOSTCALL_MEMSET)           \
  X(cuMemsetD2D32Async, 226, GP_HOSTCALL_MEMSET)           \
  X(cuMemsetD8_v2, 249, GP_HOSTCALL_MEMSET)                \
  X(cuMemsetD16_v2, 250, GP_HOSTCALL_MEMSET)               \
  X(cuMemsetD32_v2, 251, GP_HOSTCALL_MEMSET)               \
  X(cuMemsetD2D8_v2, 252, GP_HOSTCALL_MEMSET)              \
  X(cuMemsetD2D16_v2, 253, GP_HOSTCALL_MEMSET)             \
  X(cuMemsetD2D32_v2, 254, GP_HOSTCALL_MEMSET)             \
  X(cuMemsetD8_v2_ptds, 411, GP_HOSTCALL_MEMSET)           \
  X(cuMemsetD16_v2_ptds, 412, GP_HOSTCALL_MEMSET)          \
  X(cuMemsetD32_v2_ptds, 413, GP_HOSTCALL_MEMSET)          \
  X(cuMemsetD8Async_ptsz, 428, GP_HOSTCALL_MEMSET)         \
  X(cuMemsetD16Async_ptsz, 429, GP_HOSTCALL_MEMSET)        \
  X(cuMemsetD32Async_ptsz, 430, GP_HOSTCALL_MEMSET)        \
  X(cuMemcpyHtoD_v2, 276, GP_HOSTCALL_COPY)                \
  X(cuMemcpyHtoDAsync_v2, 277, GP_HOSTCALL_COPY)           \
  X(cuMemcpyDtoH_v2, 278, GP_HOSTCALL_COPY)                \
  X(cuMemcpyDtoHAsync_v2, 279, GP_HOSTCALL_COPY)           \
  X(cuMemcpyDtoD_v2, 280, GP_HOSTCALL_COPY)                \
  X(cuMemcpyDtoDAsync_v2, 281, GP_HOSTCALL_COPY)           \
  X(cuMemcpy2D_v2, 287, GP_HOSTCALL_COPY)                  \
  X(cuMemcpy2DUnaligned_v2, 288, GP_HOSTCALL_COPY)         \
  X(cuMemcpy2DAsync_v2, 289, GP_HOSTCALL_COPY)             \
  X(cuMemcpy3D_v2, 290, GP_HOSTCALL_COPY)                  \
  X(cuMemcpy3DAsync_v2, 291, GP_HOSTCALL_COPY)             \
  X(cuMemcpy, 305, GP_HOSTCALL_COPY)                       \
  X(cuMemcpyAsync, 306, GP_HOSTCALL_COPY)                  \
  X(cuMemcpyPeer, 318, GP_HOSTCALL_COPY)                   \
  X(cuMemcpyPeerAsync, 319, GP_HOSTCALL_COPY)              \
  X(cuMemcpyHtoD_v2_ptds, 397, GP_HOSTCALL_COPY)           \
  X(cuMemcpyDtoH_v2_ptds, 398, GP_HOSTCALL_COPY)           \
  X(cuMemcpyDtoD_v2_ptds, 399, GP_HOSTCALL_COPY)           \
  X(cuMemcpy2D_v2_ptds, 405, GP_HOSTCALL_COPY)             \
  X(cuMemcpy3D_v2_ptds, 407, GP_HOSTCALL_COPY)             \
  X(cuMemcpy_ptds, 408, GP_HOSTCALL_COPY)                  \
  X(cuMemcpyPeer_ptds, 409, GP_HOSTCALL_COPY)              \
  X(cuMemcpyAsync_ptsz, 418, GP_HOSTCALL_COPY)             \
  X(cuMemcpyHtoDAsync_v2_ptsz, 421, GP_HOSTCALL_COPY)      \
  X(cuMemcpyDtoHAsync_v2_ptsz, 422, GP_HOSTCALL_COPY)      \
  X(cuMemcpyDtoDAsync_v2_ptsz, 423, GP_HOSTCALL_COPY)      \
  X(cuMemcpy2DAsync_v2_ptsz, 424, GP_HOSTCALL_COPY)        \
  X(cuMemcpy3DAsync_v2_ptsz, 425, GP_HOSTCALL_COPY)        \
  X(cuMemcpyPeerAsync_ptsz, 426, GP_HOSTCALL_COPY)

// gp_hostcall_class: cbid's GP_HOSTCALL_* class, 0 for a call not in the table.
static inline int gp_hostcall_class(uint32_t cbid) {
  switch (cbid) {
#define GP_ROW(name, id, class) \
  case id:                      \
    return class;
    GP_HOST_CALLS(GP_ROW)
#undef GP_ROW
  }
  return 0;
}

#endif
