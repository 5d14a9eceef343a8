/*
 * bench.c - what a native stack of 24 frames costs (the agent's auto mode
 * keeps 24), at the end of a chain of 30 distinct functions built without
 * frame pointers (-O2's default), like libtorch:
 *   gp_unwind hot    rule cache warm: every launch after the first from
 *                    the same place
 *   gp_unwind miss   cache emptied before each call: every rule derived
 *                    from .eh_frame (pages already resident), as the first
 *                    launch from a new place pays
 *   gp_unwind first  the process's first call (stack bounds of the main
 *                    thread, first touch of .eh_frame pages), once
 *   backtrace        glibc's backtrace() on the same stack; its first call
 *                    loads libgcc_s
 * It is linked with unwind.c, built as the agent builds it; the miss runs
 * empty the rule cache with gp_unwind_forget.
 */
#include "unwind.h"

#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { FRAMES = 24, BATCHES = 200, HOT_CALLS = 1000, BT_CALLS = 20, MISS_CALLS = 2000 };

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

static double samples[MISS_CALLS];

static __attribute__((noinline)) int leaf(void) {
  uint64_t pcs[FRAMES];
  void *bt[FRAMES];
  double t = now_ns();
  int n = gp_unwind(pcs, FRAMES);
  double first_gp = now_ns() - t;
  t = now_ns();
  int nbt = backtrace(bt, FRAMES);
  double first_bt = now_ns() - t;
  if (n != FRAMES || nbt != FRAMES) {
    fprintf(stderr, "bench: the stack has %d (gp_unwind) / %d (backtrace) frames, want %d\n", n, nbt, FRAMES);
    exit(1);
  }

  for (int b = 0; b < BATCHES; b++) {
    t = now_ns();
    for (int i = 0; i < HOT_CALLS; i++) gp_unwind(pcs, FRAMES);
    samples[b] = (now_ns() - t) / HOT_CALLS;
  }
  double hot = median(samples, BATCHES);

  for (int i = 0; i < MISS_CALLS; i++) {
    gp_unwind_forget();
    t = now_ns();
    gp_unwind(pcs, FRAMES);
    samples[i] = now_ns() - t;
  }
  double miss = median(samples, MISS_CALLS);

  for (int b = 0; b < BATCHES; b++) {
    t = now_ns();
    for (int i = 0; i < BT_CALLS; i++) backtrace(bt, FRAMES);
    samples[b] = (now_ns() - t) / BT_CALLS;
  }
  double slow = median(samples, BATCHES);

  printf("native stack of %d frames, each a different function without frame pointer, medians:\n", FRAMES);
  printf("  gp_unwind hot    %8.0f ns  (%.1f ns/frame)\n", hot, hot / FRAMES);
  printf("  gp_unwind miss   %8.0f ns  (%.0f ns/frame: every rule derived)\n", miss, miss / FRAMES);
  printf("  gp_unwind first  %8.0f ns  (once per process)\n", first_gp);
  printf("  backtrace        %8.0f ns  (%.1fx gp_unwind hot)\n", slow, slow / hot);
  printf("  backtrace first  %8.0f ns  (loads libgcc_s)\n", first_bt);
  return 0;
}

// level_N calls level_N-1; the "+ 1" keeps the calls from being tail calls.
static __attribute__((noinline)) int level_0(void) { return leaf() + 1; }
#define LEVEL(n, below) \
  static __attribute__((noinline)) int level_##n(void) { return level_##below() + 1; }
LEVEL(1, 0) LEVEL(2, 1) LEVEL(3, 2) LEVEL(4, 3) LEVEL(5, 4) LEVEL(6, 5) LEVEL(7, 6) LEVEL(8, 7) LEVEL(9, 8)
LEVEL(10, 9) LEVEL(11, 10) LEVEL(12, 11) LEVEL(13, 12) LEVEL(14, 13) LEVEL(15, 14) LEVEL(16, 15)
LEVEL(17, 16) LEVEL(18, 17) LEVEL(19, 18) LEVEL(20, 19) LEVEL(21, 20) LEVEL(22, 21) LEVEL(23, 22)
LEVEL(24, 23) LEVEL(25, 24) LEVEL(26, 25) LEVEL(27, 26) LEVEL(28, 27) LEVEL(29, 28)

int main(void) {
  gp_unwind_init();
  return level_29() != 31;
}
