// nvtxhost.h: NVTX's side of its injection protocol, for tests (canned.go,
// testdata/hotpath): the slot tables of the core and core2 modules, the
// export table NVTX hands InitializeInjectionNvtx2, and calls through the
// slots as nvtxRangePushA and the rest make them once a tool filled them.
// Nothing here runs in the agent.
#ifndef GPURR_NVTXHOST_H
#define GPURR_NVTXHOST_H

#include "cabi.h"

enum { NVTXHOST_CORE_SLOTS = 16, NVTXHOST_CORE2_SLOTS = 16 };

static gp_NvtxFunctionPointer nvtxhost_core[NVTXHOST_CORE_SLOTS], nvtxhost_core2[NVTXHOST_CORE2_SLOTS];
static gp_NvtxFunctionPointer *nvtxhost_core_table[NVTXHOST_CORE_SLOTS], *nvtxhost_core2_table[NVTXHOST_CORE2_SLOTS];

static int nvtxhost_module_table(int module, gp_NvtxFunctionPointer ***out, unsigned *size) {
  if (module == GP_NVTX_CB_MODULE_CORE) {
    *out = nvtxhost_core_table, *size = NVTXHOST_CORE_SLOTS;
  } else if (module == GP_NVTX_CB_MODULE_CORE2) {
    *out = nvtxhost_core2_table, *size = NVTXHOST_CORE2_SLOTS;
  } else {
    return 0;
  }
  return 1;
}

static const gp_NvtxExportTableCallbacks nvtxhost_callbacks = {sizeof nvtxhost_callbacks, nvtxhost_module_table};

static const void *nvtxhost_export_table(uint32_t id) {
  return id == GP_NVTX_ETID_CALLBACKS ? &nvtxhost_callbacks : NULL;
}

// nvtxhost_inject hands the tables to the agent, as NVTX's first call does;
// 1 when the agent took them.
static int nvtxhost_inject(void) {
  for (int i = 0; i < NVTXHOST_CORE_SLOTS; i++) nvtxhost_core_table[i] = &nvtxhost_core[i], nvtxhost_core[i] = 0;
  for (int i = 0; i < NVTXHOST_CORE2_SLOTS; i++) nvtxhost_core2_table[i] = &nvtxhost_core2[i], nvtxhost_core2[i] = 0;
  return gp_nvtx_inject(nvtxhost_export_table);
}

// The NVTX calls; each returns what the filled slot returned.
static int nvtxhost_push_a(const char *m) { return ((int (*)(const char *))nvtxhost_core[GP_NVTX_CBID_CORE_RangePushA])(m); }
static int nvtxhost_push_ex(const gp_nvtxEventAttributes *a) {
  return ((int (*)(const gp_nvtxEventAttributes *))nvtxhost_core[GP_NVTX_CBID_CORE_RangePushEx])(a);
}
static int nvtxhost_push_w(const void *m) { return ((int (*)(const void *))nvtxhost_core[GP_NVTX_CBID_CORE_RangePushW])(m); }
static uintptr_t nvtxhost_domain_create_w(const void *name) {
  return (uintptr_t)((gp_nvtxDomainHandle(*)(const void *))nvtxhost_core2[GP_NVTX_CBID_CORE2_DomainCreateW])(name);
}
static int nvtxhost_pop(void) { return ((int (*)(void))nvtxhost_core[GP_NVTX_CBID_CORE_RangePop])(); }
static uint64_t nvtxhost_start_a(const char *m) {
  return ((uint64_t(*)(const char *))nvtxhost_core[GP_NVTX_CBID_CORE_RangeStartA])(m);
}
static void nvtxhost_end(uint64_t id) { ((void (*)(uint64_t))nvtxhost_core[GP_NVTX_CBID_CORE_RangeEnd])(id); }
// Handles pass as numbers: they are opaque to the program.
static uintptr_t nvtxhost_domain_create(const char *name) {
  return (uintptr_t)((gp_nvtxDomainHandle(*)(const char *))nvtxhost_core2[GP_NVTX_CBID_CORE2_DomainCreateA])(name);
}
static uintptr_t nvtxhost_register_string(uintptr_t d, const char *s) {
  typedef gp_nvtxStringHandle (*fn)(gp_nvtxDomainHandle, const char *);
  return (uintptr_t)((fn)nvtxhost_core2[GP_NVTX_CBID_CORE2_DomainRegisterStringA])((gp_nvtxDomainHandle)d, s);
}
static int nvtxhost_domain_push_ex(uintptr_t d, const gp_nvtxEventAttributes *a) {
  typedef int (*fn)(gp_nvtxDomainHandle, const gp_nvtxEventAttributes *);
  return ((fn)nvtxhost_core2[GP_NVTX_CBID_CORE2_DomainRangePushEx])((gp_nvtxDomainHandle)d, a);
}
static int nvtxhost_domain_pop(uintptr_t d) {
  return ((int (*)(gp_nvtxDomainHandle))nvtxhost_core2[GP_NVTX_CBID_CORE2_DomainRangePop])((gp_nvtxDomainHandle)d);
}

#endif
