// A stand-in for CUPTI with one subscriber, and a profiler that links it, for the check of
// the program's own CUPTI client (cupticlient.c): built as libcupti.so.13 (-DFAKE_CUPTI), which
// the harness loads as the agent's CUPTI, and libprofclient.so (-DPROFILER), which imports
// cupti* from it as torch.profiler's Kineto does from the real one.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))
typedef void (*callback_fn)(void *, int, uint32_t, const void *);
typedef void (*request_fn)(uint8_t **, size_t *, size_t *);
typedef void (*completed_fn)(void *, uint32_t, uint8_t *, size_t, size_t);

enum { REC = 512 };  // every record's size here: more than any record layout the agent reads

#ifdef FAKE_CUPTI
static int subscribed;
static char handle;  // the one subscriber's
#define HANDLE ((void *)&handle)
static request_fn request;
static completed_fn completed;
API int fake_enabled[8][4096];  // callbacks enabled on the one subscriber
API int fake_kind_on[128];
API const char *fake_kernel_names[2] = {"gpurr_memcap_hash", NULL};  // the flush's two kernel records
API size_t fake_name_offset, fake_start_offset;  // of CUpti_ActivityKernel10.name and .start, which the harness sets
static uint64_t fake_now = 1000000;
API int cuptiGetTimestamp(uint64_t *t) { return *t = fake_now++, 0; }  // a clock that ticks at every reading

API int cuptiSubscribe(void **sub, callback_fn cb, void *userdata) {
  (void)cb, (void)userdata;
  if (subscribed) return 39;  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
  subscribed = 1;
  *sub = HANDLE;
  return 0;
}
API int cuptiUnsubscribe(void *sub) { return sub == HANDLE ? (subscribed = 0) : 1; }
API int cuptiEnableCallback(uint32_t enable, void *sub, int domain, uint32_t cbid) {
  if (sub != HANDLE || domain < 0 || domain >= 8 || cbid >= 4096) return 1;
  fake_enabled[domain][cbid] = enable != 0;
  return 0;
}
API int cuptiActivityRegisterCallbacks(request_fn r, completed_fn c) {
  request = r, completed = c;
  return 0;
}
API int cuptiActivityEnable(int kind) { return kind >= 0 && kind < 128 ? (fake_kind_on[kind] = 1, 0) : 1; }
API int cuptiActivityDisable(int kind) { return kind >= 0 && kind < 128 ? (fake_kind_on[kind] = 0, 0) : 1; }
API int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **rec) {
  uint8_t *next = *rec ? (uint8_t *)*rec + REC : buffer;
  if (next + REC > buffer + valid) return 3;  // CUPTI_ERROR_MAX_LIMIT_REACHED
  *rec = next;
  return 0;
}
API int cuptiGetVersion(uint32_t *v) { return *v = 130001, 0; }
API int fake_clock_registered;
API int cuptiActivityRegisterTimestampCallback(uint64_t (*fn)(void)) { return (void)fn, fake_clock_registered = 1, 0; }
// One record of each kind that is on (two kernels: one of the agent's own, one of the
// program's), in one buffer of the registered client's.
API int cuptiActivityFlushAll(uint32_t flags) {
  (void)flags;
  uint8_t *b = NULL;
  size_t size = 0, max_records = 0, n = 0;
  request(&b, &size, &max_records);
  static const int kinds[] = {10, 10, 1, 2, 38, 5};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds && (n + 1) * REC <= size; i++) {
    if (!fake_kind_on[kinds[i]]) continue;
    uint8_t *r = b + n++ * REC;
    memset(r, 0, REC);
    memcpy(r, &kinds[i], sizeof(int));
    if (kinds[i] == 10) {
      const char *name = fake_kernel_names[i];
      uint64_t start = 5000000;
      memcpy(r + fake_name_offset, &name, sizeof name);
      memcpy(r + fake_start_offset, &start, sizeof start);
    }
  }
  completed(NULL, 0, b, size, n * REC);
  return 0;
}
#endif

#ifdef PROFILER
int cuptiSubscribe(void **sub, callback_fn cb, void *userdata);
int cuptiUnsubscribe(void *sub);
int cuptiEnableCallback(uint32_t enable, void *sub, int domain, uint32_t cbid);
int cuptiActivityRegisterCallbacks(request_fn r, completed_fn c);
int cuptiActivityEnable(int kind);
int cuptiActivityDisable(int kind);
int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **rec);
int cuptiActivityFlushAll(uint32_t flags);
int cuptiActivityRegisterTimestampCallback(uint64_t (*fn)(void));
int cuptiGetTimestamp(uint64_t *t);

static void *sub;
API uint64_t prof_kernel_start;  // of the last kernel record it got
API size_t prof_start_offset;
// Its own clock, as Kineto's cycle counter: three ticks a ns of CUPTI's, from 1000.
static uint64_t their_clock(void) {
  uint64_t t;
  cuptiGetTimestamp(&t);
  return 3 * t + 1000;
}
API int prof_callbacks, prof_records[128], prof_buffers;
static int outstanding;  // buffers handed to CUPTI and not back
static void on_callback(void *userdata, int domain, uint32_t cbid, const void *data) {
  (void)userdata, (void)domain, (void)cbid, (void)data;
  prof_callbacks++;
}
API int prof_no_buffer;  // set: it gives CUPTI no buffer (out of memory, or over its own limit)
static void on_request(uint8_t **buffer, size_t *size, size_t *max_records) {
  if (prof_no_buffer) {
    *buffer = NULL, *size = 0, *max_records = 0;
    return;
  }
  *buffer = aligned_alloc(8, 8 * REC);
  *size = 8 * REC;
  outstanding++;
  *max_records = 0;
}
static void on_completed(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  void *rec = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == 0) {
    prof_records[*(int *)rec]++;
    if (*(int *)rec == 10) memcpy(&prof_kernel_start, (uint8_t *)rec + prof_start_offset, sizeof prof_kernel_start);
  }
  prof_buffers++;
  outstanding--;
  free(buffer);
}
API int prof_start(void) {
  int r = cuptiSubscribe(&sub, on_callback, NULL);
  if (r) return r;
  if ((r = cuptiEnableCallback(1, sub, 2, 211)) || (r = cuptiActivityRegisterCallbacks(on_request, on_completed)) ||
      (r = cuptiActivityRegisterTimestampCallback(their_clock)) ||
      (r = cuptiActivityEnable(10)) || (r = cuptiActivityEnable(5)))
    return 100 + r;
  return 0;
}
// As Kineto does: a flush only when CUPTI holds a buffer of its own.
API int prof_flush(void) { return outstanding ? cuptiActivityFlushAll(1) : -1; }
API int prof_flush_anyway(void) { return cuptiActivityFlushAll(1); }
// As Kineto stops: its kinds off, then a flush of what CUPTI holds of its.
API int prof_stop(void) {
  cuptiActivityDisable(10);
  cuptiActivityDisable(5);
  prof_flush();
  return cuptiUnsubscribe(sub);
}
#endif
