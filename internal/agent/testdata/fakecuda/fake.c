// A stand-in for CUPTI and for the driver functions gp_start cannot do
// without (none of memory capture's), so that start_test.go can run
// gp_start on a machine with no CUDA: every call succeeds and does nothing.
// Built into a shared library by the test.
#include <stddef.h>
#include <stdint.h>

int cuptiSubscribe(void **subscriber, void *callback, void *userdata) {
  (void)callback, (void)userdata;
  *subscriber = (void *)1;
  return 0;
}
int cuptiEnableCallback(uint32_t enable, void *subscriber, int domain, uint32_t cbid) {
  (void)enable, (void)subscriber, (void)domain, (void)cbid;
  return 0;
}
int cuptiActivityRegisterCallbacks(void *requested, void *completed) {
  (void)requested, (void)completed;
  return 0;
}
int cuptiActivityEnable(int kind) { return kind < 0; }
int cuptiActivityDisable(int kind) { return kind < 0; }
int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record) {
  (void)buffer, (void)valid, (void)record;
  return 1;
}
int cuptiActivityFlushAll(uint32_t flags) { return (int)flags < 0; }
int cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *dropped) {
  (void)ctx, (void)stream;
  *dropped = 0;
  return 0;
}
int cuptiGetTimestamp(uint64_t *t) {
  *t = 42;
  return 0;
}
int cuptiGetStreamIdEx(void *ctx, void *stream, uint8_t ptsz, uint32_t *id) {
  (void)ctx, (void)stream, (void)ptsz;
  *id = 7;
  return 0;
}
int cuptiGetGraphNodeId(void *node, uint64_t *id) {
  (void)node;
  *id = 1;
  return 0;
}
int cuptiGetGraphId(void *graph, uint32_t *id) {
  (void)graph;
  *id = 1;
  return 0;
}
int cuptiGetVersion(uint32_t *version) {
  *version = 130001;
  return 0;
}
int cuptiGetResultString(int result, const char **s) {
  (void)result;
  *s = "FAKE_CUPTI_ERROR";
  return 0;
}

int cuFuncGetParamInfo(void *f, size_t i, size_t *offset, size_t *size) {
  (void)f, (void)i, (void)offset, (void)size;
  return 1;
}
int cuFuncGetName(const char **name, void *f) {
  (void)f;
  *name = "fake";
  return 0;
}
int cuCtxGetDevice(int *dev) {
  *dev = 0;
  return 0;
}
int cuDeviceGetName(char *name, int len, int dev) {
  (void)dev;
  if (len > 0) name[0] = 0;
  return 0;
}
int cuDeviceGetUuid_v2(void *uuid, int dev) {
  (void)uuid, (void)dev;
  return 0;
}
int cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)attr, (void)dev;
  *v = 0;
  return 0;
}
int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
  (void)dev;
  *bytes = 0;
  return 0;
}
int cuDriverGetVersion(int *version) {
  *version = 13000;
  return 0;
}
