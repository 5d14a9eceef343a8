/*
 * test.c - checks of the agent's native unwinder (gp_unwind, unwind.c),
 * linked with unwind.c built as the agent builds it. A check empties the
 * rule cache (gp_unwind_forget) to see both the derivation (miss) and the
 * cached (hit) paths.
 *
 *   equivalence.*  at the end of chains of 1..64 calls through
 *                  libchain_nofp.so (-fomit-frame-pointer), libchain_fp.so
 *                  (frame pointers), glibc's qsort_r calling back and a
 *                  call that ends its function (as a call to a noreturn
 *                  function does), gp_unwind returns what glibc's
 *                  backtrace() (libgcc's DWARF unwinder) returns, frame by
 *                  frame, to the outermost frame; on the main thread and
 *                  on a pthread, with an empty and with a full cache, and
 *                  on 8 threads filling an empty cache at once; max cuts
 *                  the walk.
 *   signal_frame   in a signal handler the walk stops at the signal
 *                  trampoline, agreeing with backtrace() up to there.
 *   garbage.*      a function overwrites its own return address and 4 KiB
 *                  of its callers' frames above it (restoring them before
 *                  it returns) and unwinds: fixed patterns must be cut
 *                  where expected, and 20000 random fillings (addresses
 *                  in code, in the stack, around its top, random words)
 *                  must never fault. The thread's stack has PROT_NONE
 *                  pages on both sides, so a read outside it crashes the
 *                  test.
 *   jit.*          a return address in code no object holds (an anonymous
 *                  executable page): without a frame pointer the walk
 *                  stops there; with one, a frame-pointer step continues
 *                  into the caller, exactly.
 *   coroutine      a stack of the program's own making (ucontext) gets no
 *                  frames.
 *
 * Prints "ok NAME" or "FAIL NAME: why" per check; exits 1 if any failed.
 */
#define _GNU_SOURCE
#include "unwind.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "chain.h"

enum { MAXF = 256, DEPTHS = 64 };

static int failures;

static void result(const char *name, const char *fmt, ...) {
  if (!fmt) {
    printf("ok %s\n", name);
    return;
  }
  failures++;
  printf("FAIL %s: ", name);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
}

static void empty_cache(void) { gp_unwind_forget(); }

// No code lives in the first page: a walk never returns such an address.
enum { FIRST_PAGE_END = 4096 };

// thread_top is the top of the calling thread's stack.
static uint64_t thread_top(void) {
  pthread_attr_t a;
  void *lo = NULL;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &a) == 0) {
    pthread_attr_getstack(&a, &lo, &size);
    pthread_attr_destroy(&a);
  }
  return (uintptr_t)lo + size;
}

static const char *name_of(uint64_t pc) {
  static char buf[8][160];
  static int next;
  char *b = buf[next++ % 8];
  Dl_info info;
  if (dladdr((void *)(uintptr_t)pc, &info) && info.dli_fname)
    snprintf(b, sizeof buf[0], "%#lx %s(%s)", (unsigned long)pc, info.dli_fname,
             info.dli_sname ? info.dli_sname : "?");
  else
    snprintf(b, sizeof buf[0], "%#lx", (unsigned long)pc);
  return b;
}

// ---- equivalence ----

struct capture {
  struct chain c;  // first: the chain's leaf gets it back
  void *bt[MAXF];
  uint64_t gp[MAXF], cut[MAXF];
  int nbt, ngp, ncut;
  int stop, cut_stop;  // gp_unwind_stop() after each walk
};

enum { CUT = 5 };

static __attribute__((noinline)) int take_both(struct chain *c) {
  struct capture *k = (struct capture *)c;
  k->nbt = backtrace(k->bt, MAXF);
  k->ngp = gp_unwind(k->gp, MAXF);
  k->stop = gp_unwind_stop();
  k->ncut = gp_unwind(k->cut, CUT);
  k->cut_stop = gp_unwind_stop();
  return k->ngp;
}

// compare_stacks describes the first difference between the two
// unwinders' stacks into why, or returns 0 when there is none. pcs[0] is
// in take_both for both, at two different calls.
static int compare_stacks(const struct capture *k, char *why, size_t cap) {
  if (k->ngp != k->nbt) {
    int i = 0;
    while (i < k->ngp && i < k->nbt && (i == 0 || k->gp[i] == (uint64_t)(uintptr_t)k->bt[i])) i++;
    snprintf(why, cap, "gp_unwind found %d frames, backtrace %d; first difference at %d: %s vs %s", k->ngp,
             k->nbt, i, i < k->ngp ? name_of(k->gp[i]) : "end", i < k->nbt ? name_of((uintptr_t)k->bt[i]) : "end");
    return 1;
  }
  // A whole stack ends at the thread's first frame; one cut at max says so.
  if (k->stop != GP_UNWIND_END || (k->ngp > CUT && k->cut_stop != GP_UNWIND_MAX)) {
    snprintf(why, cap, "gp_unwind_stop %d after the whole walk (want %d), %d after one cut at %d (want %d)", k->stop,
             GP_UNWIND_END, k->cut_stop, CUT, GP_UNWIND_MAX);
    return 1;
  }
  uint64_t d = k->gp[0] - (uint64_t)(uintptr_t)k->bt[0];
  if (k->ngp == 0 || (d > 64 && -d > 64)) {
    snprintf(why, cap, "frame 0: %s is not next to backtrace's %s", k->ngp ? name_of(k->gp[0]) : "none",
             k->nbt ? name_of((uintptr_t)k->bt[0]) : "none");
    return 1;
  }
  for (int i = 1; i < k->ngp; i++) {
    if (k->gp[i] != (uint64_t)(uintptr_t)k->bt[i]) {
      snprintf(why, cap, "frame %d of %d: %s vs backtrace's %s", i, k->ngp, name_of(k->gp[i]),
               name_of((uintptr_t)k->bt[i]));
      return 1;
    }
  }
  if (k->ncut != CUT || memcmp(k->cut + 1, k->gp + 1, (CUT - 1) * sizeof k->gp[0]) != 0) {
    snprintf(why, cap, "with max %d: %d frames, not the first %d of the full walk", CUT, k->ncut, CUT);
    return 1;
  }
  return 0;
}

// noreturn_call(depth, c, fn) calls fn(depth, c) as its last instruction,
// like a call to a noreturn function: the return address is the first byte
// of the next function, whose CFI is not the caller's (the unwinder must
// look up the address before it). fn leaves with longjmp.
int noreturn_call(int depth, struct chain *c, chain_step fn);
__asm__(".text\n"
        ".type noreturn_call, @function\n"
        "noreturn_call:\n"
        ".cfi_startproc\n"
        "  sub $8, %rsp\n"
        "  .cfi_def_cfa_offset 16\n"
        "  call *%rdx\n"
        ".cfi_endproc\n"
        ".size noreturn_call, .-noreturn_call\n"
        ".type after_noreturn_call, @function\n"
        "after_noreturn_call:\n"
        ".cfi_startproc\n"
        "  ud2\n"
        ".cfi_endproc\n"
        ".size after_noreturn_call, .-after_noreturn_call\n");

static __thread jmp_buf *escape_to;

static int escaping(int depth, struct chain *c) {
  jmp_buf *back = escape_to;  // before deeper levels replace it
  chain_nofp(depth, c);
  longjmp(*back, 1);
}

static __attribute__((noinline)) int chain_escape(int depth, struct chain *c) {
  jmp_buf back;
  jmp_buf *volatile outer = escape_to;
  if (setjmp(back) == 0) {
    escape_to = &back;
    noreturn_call(depth, c, escaping);
  }
  escape_to = outer;
  return 1;
}

static struct chain mixed_chain(int (*leaf)(struct chain *)) {
  return (struct chain){{chain_nofp, chain_fp, chain_qsort_nofp, chain_qsort_fp, chain_escape}, 5, leaf, 0, 0};
}

struct chains_run {
  char why[512];  // the first difference, "" when none
  int frames;
};

// check_chains compares both unwinders at the end of every chain depth.
static void check_chains(struct chains_run *run) {
  struct capture *k = malloc(sizeof *k);  // large: not on a thread's stack
  run->why[0] = 0;
  run->frames = 0;
  for (int depth = 1; depth <= DEPTHS && !run->why[0]; depth++) {
    memset(k, 0, sizeof *k);
    k->c = mixed_chain(take_both);
    chain_nofp(depth, &k->c);
    if (compare_stacks(k, run->why, sizeof run->why - 32))
      snprintf(run->why + strlen(run->why), 32, " (depth %d)", depth);
    run->frames += k->ngp;
  }
  free(k);
  uint64_t none[1];
  if (!run->why[0] && gp_unwind(none, 0) != 0) snprintf(run->why, sizeof run->why, "max 0 gave frames");
}

static void equivalence(const char *name) {
  struct chains_run run;
  check_chains(&run);
  if (run.why[0])
    result(name, "%s", run.why);
  else
    printf("ok %s (%d frames in %d stacks)\n", name, run.frames, DEPTHS);
}

static void *equivalence_thread(void *arg) {
  (void)arg;
  empty_cache();
  equivalence("equivalence.thread.empty_cache");
  equivalence("equivalence.thread.cached");
  return NULL;
}

static pthread_barrier_t all_ready;

static void *check_chains_thread(void *run) {
  pthread_barrier_wait(&all_ready);
  check_chains(run);
  return NULL;
}

// Threads that derive and insert the same rules at once, into an empty
// cache, must each get their stacks right.
static void equivalence_concurrent(void) {
  enum { THREADS = 8 };
  struct chains_run runs[THREADS];
  pthread_t t[THREADS];
  empty_cache();
  pthread_barrier_init(&all_ready, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, check_chains_thread, &runs[i]);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&all_ready);
  int frames = 0;
  for (int i = 0; i < THREADS; i++) {
    if (runs[i].why[0]) {
      result("equivalence.concurrent", "thread %d: %s", i, runs[i].why);
      return;
    }
    frames += runs[i].frames;
  }
  printf("ok equivalence.concurrent (%d frames in %d stacks on %d threads)\n", frames, THREADS * DEPTHS, THREADS);
}

// ---- a signal handler ----

static struct capture in_handler;

static void on_signal(int sig) {
  (void)sig;
  take_both(&in_handler.c);
  __asm__ volatile("" ::: "memory");  // a call, not a jump: on_signal keeps its frame
}

static void signal_frame(void) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, &old);
  raise(SIGUSR1);
  sigaction(SIGUSR1, &old, NULL);
  // take_both, on_signal, then the trampoline the handler returns to.
  const struct capture *k = &in_handler;
  if (k->ngp != 3 || k->nbt <= 3 || k->gp[1] != (uintptr_t)k->bt[1] || k->gp[2] != (uintptr_t)k->bt[2])
    result("signal_frame", "%d frames (last %s), backtrace %d; want 3, ending at backtrace's third, %s", k->ngp,
           k->ngp ? name_of(k->gp[k->ngp - 1]) : "none", k->nbt, k->nbt > 2 ? name_of((uintptr_t)k->bt[2]) : "none");
  else if (k->stop != GP_UNWIND_UNSUPPORTED)
    result("signal_frame", "gp_unwind_stop %d, want %d (unsupported: a signal frame)", k->stop, GP_UNWIND_UNSUPPORTED);
  else
    result("signal_frame", NULL);
}

// ---- garbage above a frame ----

enum { GARBAGE_WORDS = 512, GARBAGE_RUNS = 20000, GUARDED_STACK = 256 << 10 };

static uint64_t garbage[GARBAGE_WORDS];
static uint64_t code_pcs[MAXF];
static int ncode_pcs;
static uint64_t victim_fp;

// victim puts garbage over its saved rbp, its return address and the
// frames of its callers above them, unwinds, and puts them back.
static __attribute__((noinline)) int victim(uint64_t *pcs) {
  volatile uint64_t *fp = __builtin_frame_address(0);  // fp[0] saved rbp, fp[1] return address
  uint64_t saved[GARBAGE_WORDS];
  victim_fp = (uintptr_t)fp;
  for (int i = 0; i < GARBAGE_WORDS; i++) saved[i] = fp[i];
  for (int i = 0; i < GARBAGE_WORDS; i++) fp[i] = garbage[i];
  int n = gp_unwind(pcs, MAXF);
  for (int i = 0; i < GARBAGE_WORDS; i++) fp[i] = saved[i];
  return n;
}

// mid is the frame victim tramples, padded so 4 KiB above victim stay
// inside frames of this test.
static __attribute__((noinline)) int mid(uint64_t *pcs) {
  volatile char pad[8192];
  pad[0] = 1;
  int n = victim(pcs);
  return n + pad[0] - 1;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_random(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

// random_word picks what garbage on a stack tends to be.
static uint64_t random_word(uint64_t frame, uint64_t top) {
  uint64_t r = next_random();
  switch (r % 8) {
  case 0: return next_random();
  case 1: return r >> 56;  // small integers, 0 included
  case 2: return frame + ((r >> 8) % (GARBAGE_WORDS + 64)) * 8 - 256;  // into the trampled frames
  case 3: return top - 32 + (r >> 8) % 64;                              // around the stack's top
  case 4:
  case 5: return code_pcs[(r >> 8) % ncode_pcs] + ((r >> 40) % 3) - 1;  // near real return addresses
  case 6: return (uintptr_t)qsort_r + (r >> 8) % 256;                  // inside libc's code
  default: return (uintptr_t)victim + (r >> 8) % 64;
  }
}

static void *garbage_thread(void *arg) {
  (void)arg;
  uint64_t pcs[MAXF], top = thread_top();
  memset(garbage, 0, sizeof garbage);
  int n = mid(pcs);
  if (n != 1)
    result("garbage.zeros", "%d frames, want 1 (victim's return address read as 0)", n);
  else
    result("garbage.zeros", NULL);
  uint64_t victim_ra = pcs[0];

  for (int i = 0; i < GARBAGE_WORDS; i++) garbage[i] = 0x4141414141414141ULL;
  n = mid(pcs);
  if (n != 2 || pcs[1] != 0x4141414141414141ULL)
    result("garbage.unknown_pc", "%d frames (last %s), want 2 ending at 0x4141414141414141", n,
           n ? name_of(pcs[n - 1]) : "none");
  else
    result("garbage.unknown_pc", NULL);

  // The real frames of a normal walk, as code addresses for the fillings.
  struct capture k;
  memset(&k, 0, sizeof k);
  k.c = mixed_chain(take_both);
  chain_nofp(12, &k.c);
  memcpy(code_pcs, k.gp, sizeof k.gp);
  ncode_pcs = k.ngp;

  uint64_t frame = victim_fp;
  int bad = 0, longest = 0;
  for (int run = 0; run < GARBAGE_RUNS && !bad; run++) {
    if (run % 1000 == 0) empty_cache();  // derive rules for garbage addresses too
    for (int i = 0; i < GARBAGE_WORDS; i++) garbage[i] = random_word(frame, top);
    n = mid(pcs);
    if (n > longest) longest = n;
    if (n < 1 || n > MAXF || pcs[0] != victim_ra) bad = 1;
    for (int i = 0; i < n && !bad; i++) bad = pcs[i] < FIRST_PAGE_END;
    if (bad) result("garbage.random", "run %d: %d frames, first %s", run, n, n ? name_of(pcs[0]) : "none");
  }
  if (!bad) printf("ok garbage.random (%d fillings, longest walk %d frames)\n", GARBAGE_RUNS, longest);
  return NULL;
}

// run_guarded runs fn on a thread whose stack has PROT_NONE pages on both
// sides: a read past either end faults.
static void run_guarded(void *(*fn)(void *)) {
  long page = sysconf(_SC_PAGESIZE);
  uint8_t *m = mmap(NULL, GUARDED_STACK + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    result("garbage", "mmap: no memory for the guarded stack");
    return;
  }
  mprotect(m, page, PROT_NONE);
  mprotect(m + page + GUARDED_STACK, page, PROT_NONE);
  pthread_attr_t a;
  pthread_t t;
  pthread_attr_init(&a);
  pthread_attr_setstack(&a, m + page, GUARDED_STACK);
  if (pthread_create(&t, &a, fn, NULL) == 0)
    pthread_join(t, NULL);
  else
    result("garbage", "pthread_create failed");
  pthread_attr_destroy(&a);
  munmap(m, GUARDED_STACK + 2 * page);
}

// ---- code no object holds ----

static uint64_t jit_pcs[MAXF];
static int jit_n, jit_stop;

static __attribute__((noinline)) void jit_callee(void) {
  jit_n = gp_unwind(jit_pcs, MAXF);
  jit_stop = gp_unwind_stop();
}

typedef void (*jit_code)(void (*callee)(void));

// run_jit unwinds from here (into ref), then calls callee through code.
static __attribute__((noinline)) int run_jit(jit_code code, uint64_t *ref) {
  int nref = gp_unwind(ref, MAXF);
  code(jit_callee);
  __asm__ volatile("" ::: "memory");  // the call above stays a call
  return nref;
}

static void jit(const char *name, const uint8_t *insns, size_t len, size_t call_end, int frame_pointer) {
  long page = sysconf(_SC_PAGESIZE);
  uint8_t *m = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    result(name, "mmap failed");
    return;
  }
  memcpy(m, insns, len);
  if (mprotect(m, page, PROT_READ | PROT_EXEC) != 0) {
    result(name, "mprotect PROT_EXEC refused");
    munmap(m, page);
    return;
  }
  uint64_t ref[MAXF], ra = (uintptr_t)m + call_end;
  int nref = run_jit((jit_code)(void *)m, ref);
  munmap(m, page);
  if (jit_n < 2 || jit_pcs[1] != ra) {
    result(name, "frame 1 is %s, want the JIT code's %#lx", jit_n > 1 ? name_of(jit_pcs[1]) : "none",
           (unsigned long)ra);
  } else if (!frame_pointer && (jit_n != 2 || jit_stop != GP_UNWIND_NO_INFO)) {
    result(name, "%d frames, gp_unwind_stop %d; want the walk to stop at the JIT code (2 frames, %d)", jit_n, jit_stop,
           GP_UNWIND_NO_INFO);
  } else if (frame_pointer && (nref < 1 || jit_n != nref + 2 || memcmp(jit_pcs + 3, ref + 1, (nref - 1) * sizeof ref[0]))) {
    result(name, "%d frames, want 2 + run_jit's %d, the same past run_jit", jit_n, nref);
  } else {
    result(name, NULL);
  }
}

// ---- a stack of the program's own ----

static ucontext_t main_ctx, co_ctx;
static int co_n = -1, co_stop = -1;

static void coroutine(void) {
  uint64_t pcs[MAXF];
  co_n = gp_unwind(pcs, MAXF);
  co_stop = gp_unwind_stop();
}

static void coroutine_check(void) {
  enum { SIZE = 64 << 10 };
  void *stack = malloc(SIZE);
  getcontext(&co_ctx);
  co_ctx.uc_stack.ss_sp = stack;
  co_ctx.uc_stack.ss_size = SIZE;
  co_ctx.uc_link = &main_ctx;
  makecontext(&co_ctx, coroutine, 0);
  swapcontext(&main_ctx, &co_ctx);
  free(stack);
  if (co_n != 0 || co_stop != GP_UNWIND_NO_STACK)
    result("coroutine", "%d frames on a malloc'd stack, gp_unwind_stop %d; want 0, %d", co_n, co_stop,
           GP_UNWIND_NO_STACK);
  else
    result("coroutine", NULL);
}

int main(void) {
  gp_unwind_init();
  empty_cache();
  equivalence("equivalence.main.empty_cache");
  equivalence("equivalence.main.cached");
  pthread_t t;
  pthread_create(&t, NULL, equivalence_thread, NULL);
  pthread_join(t, NULL);
  equivalence_concurrent();
  signal_frame();

  run_guarded(garbage_thread);

  // push rbp; xor ebp,ebp; call *rdi; pop rbp; ret
  static const uint8_t no_fp[] = {0x55, 0x31, 0xed, 0xff, 0xd7, 0x5d, 0xc3};
  // push rbp; mov rbp,rsp; call *rdi; pop rbp; ret
  static const uint8_t with_fp[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3};
  jit("jit.no_frame_pointer", no_fp, sizeof no_fp, 5, 0);
  jit("jit.frame_pointer", with_fp, sizeof with_fp, 6, 1);

  coroutine_check();

  printf(failures ? "SOME CHECKS FAILED\n" : "ALL PASSED\n");
  return failures != 0;
}
