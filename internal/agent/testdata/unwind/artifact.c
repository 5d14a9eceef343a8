/*
 * artifact.c - gp_unwind as the real agent runs it: from bin/libgpurr.so,
 * compiled by cgo and linked by Go's linker, whose own frame must be found
 * in that library's .eh_frame_hdr. The functions are hidden there, so
 * run.sh passes their offsets (from nm).
 *
 * Usage: artifact LIBGPURR GP_UNWIND_INIT_OFFSET GP_UNWIND_OFFSET (hex)
 * Prints "ok artifact" when the library's gp_unwind returns what
 * backtrace() does from the same function, else "FAIL artifact: why".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAXF = 64 };

static int (*lib_unwind)(uint64_t *, int);

static __attribute__((noinline)) int compare(void) {
  void *bt[MAXF];
  uint64_t gp[MAXF];
  int nbt = backtrace(bt, MAXF), ngp = lib_unwind(gp, MAXF);
  uint64_t d = gp[0] - (uint64_t)(uintptr_t)bt[0];
  if (ngp != nbt || ngp < 3 || (d > 64 && -d > 64)) {
    printf("FAIL artifact: %d frames, backtrace %d\n", ngp, nbt);
    return 1;
  }
  for (int i = 1; i < ngp; i++) {
    if (gp[i] != (uint64_t)(uintptr_t)bt[i]) {
      printf("FAIL artifact: frame %d is %#lx, backtrace's %p\n", i, (unsigned long)gp[i], bt[i]);
      return 1;
    }
  }
  printf("ok artifact (%d frames)\n", ngp);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: artifact LIBGPURR GP_UNWIND_INIT_OFFSET GP_UNWIND_OFFSET\n");
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW);
  struct link_map *m;
  if (!lib || dlinfo(lib, RTLD_DI_LINKMAP, &m) != 0) {
    printf("FAIL artifact: dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  void (*init)(void) = (void (*)(void))(m->l_addr + strtoull(argv[2], NULL, 16));
  lib_unwind = (int (*)(uint64_t *, int))(m->l_addr + strtoull(argv[3], NULL, 16));
  init();
  return compare();
}
