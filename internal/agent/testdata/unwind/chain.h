/*
 * chain.h - call chains of a chosen depth through code built three ways,
 * for the unwinder's tests and benchmark: chain.c is compiled into
 * libchain_nofp.so (-O2 -fomit-frame-pointer, like libtorch) and
 * libchain_fp.so (-O2 -fno-omit-frame-pointer).
 */
#ifndef CHAIN_H
#define CHAIN_H

struct chain;
typedef int (*chain_step)(int depth, struct chain *c);

struct chain {
  // steps[depth % nsteps] makes the call at each level, e.g. chain_nofp,
  // chain_fp, chain_qsort_nofp and chain_qsort_fp (through glibc's qsort_r)
  // to mix all kinds.
  chain_step steps[8];
  int nsteps;
  int (*leaf)(struct chain *c);  // called at depth 0
  int pending;                   // qsort_r: only the first comparison goes on
  int depth;
};

int chain_nofp(int depth, struct chain *c);
int chain_fp(int depth, struct chain *c);
int chain_qsort_nofp(int depth, struct chain *c);
int chain_qsort_fp(int depth, struct chain *c);

#endif
