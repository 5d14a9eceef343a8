/*
 * fp_test.c - the frame-record walk gp_unwind does off x86-64 (aarch64): through code built
 * with frame pointers it gives the frames glibc's backtrace() gives, innermost first; a
 * thread whose stack gpurr does not know gets none. Built and run by run.sh's "fp" check
 * (a cross compiler and qemu-user run it on an x86-64 machine: CC and RUN).
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>

#include "chain.h"
#include "unwind.h"

enum { DEPTH = 24, MAX = 64 };

static uint64_t ours[MAX];
static void *theirs[MAX];
static int nours, ntheirs;

__attribute__((noinline)) static int leaf(struct chain *c) {
  (void)c;
  nours = gp_unwind(ours, MAX);
  ntheirs = backtrace(theirs, MAX);
  return 0;
}

int main(void) {
  gp_unwind_init();
  struct chain c = {.steps = {chain_fp}, .nsteps = 1, .leaf = leaf};
  chain_fp(DEPTH, &c);
  // Both first give an address in leaf, after their own call: compare from the chain's frames
  // on, the return addresses of leaf and of each chain_fp.
  int fail = 0, matched = 0;
  for (int i = 1; i <= DEPTH + 1 && i < ntheirs && i < nours; i++) {
    if (ours[i] != (uint64_t)(uintptr_t)theirs[i]) {
      printf("FAIL fp.chain: frame %d is %#lx, backtrace() says %p\n", i, (unsigned long)ours[i], theirs[i]);
      fail = 1;
      break;
    }
    matched++;
  }
  if (!fail && matched < DEPTH + 1) {
    printf("FAIL fp.chain: %d frames match backtrace()'s, want %d (gp_unwind gave %d, stop %d)\n", matched, DEPTH,
           nours, gp_unwind_stop());
    fail = 1;
  }
  if (!fail) printf("ok fp.chain (%d frames as backtrace() gives them)\n", matched);
  return fail;
}
