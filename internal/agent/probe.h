// Live probes (gpurr record --probe): launches of a kernel the Go side could instrument run its
// instrumented copy instead (instrument.InjectLiveProbes), given one more parameter, the
// device address of the launch's per-CTA records in a pool the agent owns. The records come
// back to pinned host memory behind the launch, on its stream, and the Go writer collects
// them in launch order once the launch's event says they arrived. Launches whose records
// cannot be taken still run, unprobed, and say why (GP_REC_PROBE_SKIP).
#ifndef GPURR_PROBE_H
#define GPURR_PROBE_H

#include <stdint.h>

#include "agent.h"
#include "cabi.h"
#include "launchapi.h"

// gp_probe_fn.state
enum { GP_PROBE_UNKNOWN = 0, GP_PROBE_NO = 1, GP_PROBE_YES = 2 };

// What a kernel (func_entry) knows of its probes, decided at its first launch.
typedef struct {
  _Atomic int state;
  gp_CUfunction fn;  // the instrumented copy, when GP_PROBE_YES
  void *module;      // the program's module the kernel is in
  int max_threads;   // per block, of the copy (its registers may allow fewer than the kernel's)
  int max_dynamic_smem;  // of the copy, as the kernel's was set when it was instrumented
} gp_probe_fn;

// gp_probe_start checks the driver functions probes need; 0 with err set when one is missing.
int gp_probe_start(char *err, size_t errcap);

// gp_probe_module_image notes, on the loading thread, the image CUPTI says a module load made
// (its MODULE_LOADED callback, inside the load call): exact bytes for the Go side to hash.
void gp_probe_module_image(const void *image, size_t size);

// gp_probe_module_api takes cuModuleLoad* exits (the image and the module it became, for the
// Go side to find PTX for) and cuModuleUnload enters.
void gp_probe_module_api(uint32_t cbid, const gp_CallbackData *cb);

// gp_probe_enter, at a launch's ENTER, decides pf at the kernel's first launch and, for a
// probed kernel, puts the instrumented copy and its records' address into the launch's
// parameters. args has room for nparams + 1 pointers. 1 when the launch is probed.
// v is the launch's view (launchapi.h); cbid says where its parameters take the copy.
int gp_probe_enter(gp_probe_fn *pf, uint32_t cbid, const gp_launch_view *v, const gp_CallbackData *cb, int ptsz,
                   uint32_t nparams, uint64_t kernel_id, uint64_t seq, void **args);

// gp_probe_exit, at that launch's EXIT, queues the copy of its records behind it.
void gp_probe_exit(const gp_CallbackData *cb);

// gp_probe_load JITs an instrumented module's PTX into the current context and finds its
// kernel name (the Go side calls it from gpurrProbeFunction).
gp_CUresult gp_probe_load(const char *ptx, const char *name, gp_CUfunction *fn);

// gp_probe_unloaded forgets, on every kernel of module, what its first launch decided
// (launch.c walks its kernels: a later module may reuse their handles).
void gp_probe_unloaded(gp_probe_fn *pf, void *module);

// The Go writer's side: the oldest probed launch whose records have arrived.
typedef struct {
  uint64_t seq;
  const uint8_t *records;  // ctas × 32 bytes, the entry time complemented
  uint64_t bytes;
  uint32_t skipped;  // GP_PROBE_SKIP_*, when the records are lost after all
} gp_probe_view;

int gp_probe_poll(gp_probe_view *v);  // 1 with v set; 0 when none has arrived
void gp_probe_release(void);         // done with the view gp_probe_poll gave
uint64_t gp_probe_outstanding(void);  // probed launches not yet collected

#endif
