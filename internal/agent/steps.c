// Training steps as the program runs: step digests are taken where one step
// ends and the next begins, and --hash-steps hashes the launches of some
// steps only. The rule is recording.Stepper's, which numbers a recording's
// launches afterwards, applied to each launch call as it is made: a step
// ends where a run of calls made inside a PyTorch optimizer's step() is
// followed by a call made outside one (the optimizer's own launches belong to
// their step), or, with step_every N, every N calls (seq 1..N is step 0).
// Calls of several threads are taken in the order they reach here, which is
// the order of their seq up to a race between threads that launch at once.
#include <stdatomic.h>

#include "internal.h"

static atomic_int in_optimizer;  // the last call was made inside an optimizer step
static _Atomic uint32_t ended;   // steps ended so far

uint32_t gp_step_call(uint64_t seq, int in_opt, int *began) {
  *began = 0;
  uint32_t every = gp_proc.cfg.step_every;
  if (every) {
    *began = seq > 1 && (seq - 1) % every == 0;
    return (uint32_t)((seq - 1) / every);
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
