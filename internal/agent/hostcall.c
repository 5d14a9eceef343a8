// The program's copy, memset and synchronization calls (hostcall.h's
// table): when each entered and returned on the host, and the line that
// made it. What the call did on the GPU comes apart, in CUPTI's activity
// records (activity.c), and the writer's readers join the two by
// correlation id.
#include <string.h>

#include "hostcall.h"
#include "internal.h"

static GP_TLS uint64_t entered;  // when the call in flight on this thread entered

const char *gp_hostcall_name(uint32_t cbid) {
  switch (cbid) {
#define ROW(name, id, class) \
  case id:                   \
    return #name;
    GP_HOST_CALLS(ROW)
#undef ROW
  }
  return "";
}

void gp_hostcall_enter(uint32_t cbid) {
  int class = gp_hostcall_class(cbid);
  // Activity is turned on before the first copy or memset as before the
  // first launch: its GPU work is timed.
  if (class == GP_HOSTCALL_COPY || class == GP_HOSTCALL_MEMSET) gp_activity_first_launch();
  entered = gp_clock();
}

void gp_hostcall_exit(uint32_t cbid, const gp_CallbackData *cb, uint32_t device) {
  gp_hostcall_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.end = gp_clock();
  rec.start = entered && entered <= rec.end ? entered : rec.end;
  entered = 0;
  rec.h.type = GP_REC_HOSTCALL;
  rec.h.size = gp_pad8(sizeof rec);
  rec.cbid = cbid;
  rec.correlation_id = cb->correlationId;
  rec.tid = gp_thread_id();
  rec.device = device;
  rec.result = cb->functionReturnValue ? *(gp_CUresult *)cb->functionReturnValue : 0;
  rec.callstack_id = gp_callstack_take(0, NULL);
  rec.range_id = gp_thread.range_current;
  if (!gp_ring_push_counted(&rec, &gp_counts.host_calls)) GP_COUNT(host_calls_dropped, 1);
}

void gp_hostcall_own(uint32_t cbid, const gp_CallbackData *cb) {
  gp_hostcall_rec rec;
  memset(&rec, 0, sizeof rec);
  rec.h.type = GP_REC_HOSTCALL;
  rec.h.size = gp_pad8(sizeof rec);
  rec.cbid = cbid;
  rec.correlation_id = cb->correlationId;
  rec.own = 1;
  gp_ring_push(&rec);
}

void gp_hostcall_subscribe(int (*enable)(uint32_t cbid)) {
  static const uint32_t cbids[] = {
#define ROW(name, id, class) id,
      GP_HOST_CALLS(ROW)
#undef ROW
  };
  int failed = 0;
  for (size_t i = 0; i < sizeof cbids / sizeof *cbids; i++) failed += !enable(cbids[i]);
  // A CUPTI older than the table lacks some calls: the rest are still recorded.
  if (failed) gp_logf(1, "host calls: %d of %zu copy, memset and synchronization callbacks could not be enabled", failed,
                      sizeof cbids / sizeof *cbids);
}
