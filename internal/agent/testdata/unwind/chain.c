/*
 * chain.c - see chain.h. Built twice, with CHAIN_KIND nofp and fp, so each
 * library defines its own chain_<kind> and chain_qsort_<kind>.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "chain.h"

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define CHAIN CAT(chain_, CHAIN_KIND)
#define CHAIN_QSORT CAT(chain_qsort_, CHAIN_KIND)
#define COMPARE CAT(compare_, CHAIN_KIND)

// The "+ 1" after each call keeps it from being a tail call, which would
// leave no frame.
__attribute__((noinline)) int CHAIN(int depth, struct chain *c) {
  if (depth == 0) return c->leaf(c) + 1;
  return c->steps[depth % c->nsteps](depth - 1, c) + 1;
}

static int COMPARE(const void *a, const void *b, void *arg) {
  struct chain *c = arg;
  if (c->pending) {
    c->pending = 0;
    CHAIN(c->depth, c);
  }
  return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) int CHAIN_QSORT(int depth, struct chain *c) {
  int v[2] = {2, 1};
  c->pending = 1;
  c->depth = depth;
  qsort_r(v, 2, sizeof v[0], COMPARE, c);
  return v[0];
}
