/*
 * unwind.h - the calling thread's native callstack on x86-64 Linux, fast
 * enough for every kernel launch. (On aarch64, gp_unwind follows frame
 * records instead: see the end of unwind.c.)
 *
 * Each return address's unwind rule (where the caller's frame starts, where
 * the return address and the caller's rbp were saved) is derived once from
 * the .eh_frame CFI of the object that holds it and kept in a process-wide
 * cache; a walk over known addresses is a cache look-up and two bounds-checked
 * stack reads per frame, with no lock, allocation or system call.
 *
 * The walk is cut short (what was found so far is kept) at an address no
 * loaded object's CFI covers and no frame-pointer step can leave, a rule
 * this unwinder does not model (DWARF expressions, a CFA on a register other
 * than rsp or rbp), a signal frame, the outermost frame, a frame outside the
 * calling thread's stack or not above the previous one, or a return address
 * in the first page. See unwind.c.
 */
#ifndef GPURR_UNWIND_H
#define GPURR_UNWIND_H

#include <stdint.h>

/* gp_unwind_init looks up what the unwinder uses from the loader
 * (_dl_find_object, glibc 2.35+); call it once, before any gp_unwind. */
void gp_unwind_init(void);

/* gp_unwind stores up to max return addresses of the calling thread's stack
 * into pcs, innermost first, and returns how many it stored. pcs[0] is the
 * address gp_unwind returns to, as with glibc's backtrace(). Never faults:
 * every stack read is checked against the thread's stack bounds (learned
 * once per thread with pthread_getattr_np), so a thread running on a stack
 * of its own making (a coroutine, a signal stack) gets 0 frames. */
int gp_unwind(uint64_t *pcs, int max);

/* Why the calling thread's last gp_unwind stopped (gp_unwind_stop). */
enum {
  GP_UNWIND_END = 0,          /* the thread's outermost frame: the whole stack */
  GP_UNWIND_MAX = 1,          /* max frames taken */
  GP_UNWIND_NO_INFO = 2,      /* code no loaded object's CFI covers, and no frame pointer to step over it */
  GP_UNWIND_UNSUPPORTED = 3,  /* CFI this unwinder does not model (an expression), or a signal frame */
  GP_UNWIND_CORRUPT = 4,      /* a frame outside the thread's stack, or a return address no code can have */
  GP_UNWIND_NO_STACK = 5,     /* the thread runs on a stack of its own making */
};
int gp_unwind_stop(void);

/* gp_unwind_forget empties the process-wide rule cache, so the next walks
 * derive every rule again: for the unwinder's own checks and benchmark
 * (testdata/unwind), which measure both paths. */
void gp_unwind_forget(void);

/* gp_object_range sets [*start, *end) to the address range of the loaded
 * object that holds pc and returns 1, or returns 0 when none does. */
int gp_object_range(uint64_t pc, uint64_t *start, uint64_t *end);

#endif
