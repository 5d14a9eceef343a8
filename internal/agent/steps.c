// Training steps as the program runs: step digests are taken where one step
// ends and the next begins, and --hash-steps hashes the launches of some
// steps only. The rule is recording.Stepper's, which numbers a recording's
// launches afterwards, applied to each launch call as it is made: a step
// ends where a run of calls made inside a PyTorch optimizer's step() is
// followed by a call made outside one (the optimizer's own launches belong to
// their step), or, with step_every N, every N calls (seq 1..N is step 0).
// With step_range, a step ends where an NVTX range the --step-range expression
// matches ends, and the next call begins the next one (steps ended so far is
// its number, as the reader counts the ranges ended before a call).
// Calls of several threads are taken in the order they reach here, which is
// the order of their seq up to a race between threads that launch at once.
#include <stdatomic.h>

#include "internal.h"

static atomic_int in_optimizer;  // the last call was made inside an optimizer step
static _Atomic uint32_t ended;   // steps ended so far
static atomic_int range_ended;   // step_range: a step range ended since the last call

// The last launch call: where the digest of the last step goes at exit.
static _Atomic(gp_CUcontext) last_ctx;
static _Atomic(gp_CUstream) last_stream;
static atomic_int last_ptsz;
static _Atomic uint64_t last_seq;

void gp_step_where(gp_CUcontext ctx, gp_CUstream stream, int ptsz, uint64_t seq) {
  atomic_store_explicit(&last_ctx, ctx, memory_order_relaxed);
  atomic_store_explicit(&last_stream, stream, memory_order_relaxed);
  atomic_store_explicit(&last_ptsz, ptsz, memory_order_relaxed);
  atomic_store_explicit(&last_seq, seq, memory_order_relaxed);
}

void gp_step_forget(void) { atomic_store_explicit(&last_seq, 0, memory_order_relaxed); }

// The last step's digest would be taken before the next step's first call, which never
// comes: it is taken at exit instead, on the stream of the last call, after its work, and
// named as taken before the call after the last one (seq + 1), which no launch has.
void gp_step_final_digest(void) {
  uint64_t seq = atomic_load_explicit(&last_seq, memory_order_relaxed);
  if (!gp_proc.cfg.digests || !seq) return;
  uint32_t every = gp_proc.cfg.step_every;
  uint32_t step = every ? (uint32_t)((seq - 1) / every) : atomic_load_explicit(&ended, memory_order_relaxed);
  gp_CUcontext ctx = atomic_load_explicit(&last_ctx, memory_order_relaxed);
  gp_in_agent_call(1);
  int pushed = gp_cu.ctxPushCurrent && gp_cu.ctxPushCurrent(ctx) == 0;
  gp_in_agent_call(0);
  gp_mem_digest(ctx, atomic_load_explicit(&last_stream, memory_order_relaxed),
                atomic_load_explicit(&last_ptsz, memory_order_relaxed), seq + 1, step);
  if (pushed) {
    gp_CUcontext popped;
    gp_in_agent_call(1);
    gp_cu.ctxPopCurrent(&popped);
    gp_in_agent_call(0);
  }
}

void gp_step_range_ended(void) {
  atomic_fetch_add_explicit(&ended, 1, memory_order_relaxed);
  atomic_store_explicit(&range_ended, 1, memory_order_relaxed);
}

static uint32_t step_of(uint64_t seq, int in_opt, int *began);

uint32_t gp_step_call(uint64_t seq, int in_opt, int *began) {
  uint32_t step = step_of(seq, in_opt, began);
  // Timing by steps: the step's first call turns kernel activity on or off
  // before it is enqueued, so the whole step is timed or none of it.
  if (*began && gp_proc.cfg.gpu_timing == GP_TIMING_STEPS) gp_activity_step(step);
  return step;
}

static uint32_t step_of(uint64_t seq, int in_opt, int *began) {
  *began = 0;
  uint32_t every = gp_proc.cfg.step_every;
  if (every) {
    *began = seq > 1 && (seq - 1) % every == 0;
    return (uint32_t)((seq - 1) / every);
  }
  if (gp_proc.cfg.step_range) {
    // Of the threads that see the step end, one alone takes its digest.
    *began = atomic_load_explicit(&range_ended, memory_order_relaxed) &&
             atomic_exchange_explicit(&range_ended, 0, memory_order_relaxed);
    return atomic_load_explicit(&ended, memory_order_relaxed);
  }
  if (in_opt) {
    atomic_store_explicit(&in_optimizer, 1, memory_order_relaxed);
    return atomic_load_explicit(&ended, memory_order_relaxed);
  }
  // Of the threads that see the step end, one alone begins the next.
  if (atomic_load_explicit(&in_optimizer, memory_order_relaxed) &&
      atomic_exchange_explicit(&in_optimizer, 0, memory_order_relaxed)) {
    *began = 1;
    return atomic_fetch_add_explicit(&ended, 1, memory_order_relaxed) + 1;
  }
  return atomic_load_explicit(&ended, memory_order_relaxed);
}
