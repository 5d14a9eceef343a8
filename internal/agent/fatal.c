// Everything here runs in a signal handler on the crashing thread, so it uses
// only async-signal-safe calls (write, poll, read, sigaction, raise). The
// thread that writes the recording is a Go goroutine, woken through a pipe.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // REG_RIP
#endif
#include "fatal.h"

#include "internal.h"

#include <errno.h>
#include <stdint.h>
#include <ucontext.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

// Crashes, then the signals schedulers and users stop a program with. A
// program may handle a stop signal and go on (Python turns SIGINT into
// KeyboardInterrupt), so each one flushes, not only the first.
static const int watched_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT};
#define NWATCHED (sizeof watched_signals / sizeof watched_signals[0])
#define NFATAL 5

static struct sigaction previous[NWATCHED];
static int notify_fd = -1, ack_fd = -1, wait_ms;
static pid_t owner;  // a forked child inherits the handler but not the writer
static atomic_int notified, stopping;
// Where the first crash happened: the instruction and the address it touched.
static _Atomic uint64_t crash_pc, crash_addr;

static uint64_t pc_of(const void *uc) {
  if (!uc) return 0;
  const ucontext_t *u = uc;
#if defined(__x86_64__)
  return (uint64_t)u->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (uint64_t)u->uc_mcontext.pc;
#else
  return 0;
#endif
}

void gp_fatal_where(uint64_t *pc, uint64_t *addr) {
  *pc = atomic_load(&crash_pc);
  *addr = atomic_load(&crash_addr);
}

static int slot_of(int sig) {
  for (unsigned i = 0; i < NWATCHED; i++)
    if (watched_signals[i] == sig) return (int)i;
  return -1;
}

// wait_for_writer hands the signal to the Go writer and waits for it to say
// the recording is written, up to wait_ms. Not when this thread holds a lock
// the writer needs: the writer would wait for it as long as we wait for the
// writer.
static void wait_for_writer(unsigned char b) {
  if (gp_ring_stuck() || gp_mem_stuck()) return;
  if (write(notify_fd, &b, 1) == 1) {
    struct pollfd p = {.fd = ack_fd, .events = POLLIN};
    if (poll(&p, 1, wait_ms) == 1) (void)!read(ack_fd, &b, 1);
  }
}

static void on_fatal(int sig, siginfo_t *info, void *uc) {
  int saved_errno = errno;
  int i = slot_of(sig);
  if (getpid() == owner && i >= NFATAL) {
    // A stop signal: one at a time waits; the program ends unless it had a
    // handler of its own (the writer is told which, in the top bit).
    if (atomic_exchange(&stopping, 1) == 0) {
      int ends = previous[i].sa_handler == SIG_DFL && !(previous[i].sa_flags & SA_SIGINFO);
      wait_for_writer((unsigned char)(sig | (ends ? 0x80 : 0)));
      atomic_store(&stopping, 0);
    }
  } else if (getpid() == owner && atomic_exchange(&notified, 1) == 0) {
    // Only the first fatal signal waits for the writer: a second one
    // (another thread, or the writer itself crashing) goes straight on.
    atomic_store(&crash_pc, pc_of(uc));
    atomic_store(&crash_addr, info ? (uint64_t)(uintptr_t)info->si_addr : 0);
    wait_for_writer((unsigned char)(sig | 0x80));
  }
  const struct sigaction *prev = i >= 0 ? &previous[i] : NULL;
  if (prev && (prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
    prev->sa_sigaction(sig, info, uc);  // e.g. the Go runtime's, or Python's faulthandler
  } else if (prev && prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
    prev->sa_handler(sig);
  } else {
    // Default action: restore it and raise again; the signal is blocked in
    // this handler, so it lands as soon as the handler returns.
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
  }
  errno = saved_errno;
}

int gp_watch_fatal_signals(int notify, int ack, int wait) {
  notify_fd = notify;
  ack_fd = ack;
  wait_ms = wait;
  owner = getpid();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal;
  // SA_ONSTACK: the Go runtime requires it of every handler in its process.
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (unsigned i = 0; i < NWATCHED; i++) {
    if (i >= NFATAL) {
      // A stop signal the program ignores (nohup) stays ignored.
      if (sigaction(watched_signals[i], NULL, &previous[i]) != 0) return -1;
      if (!(previous[i].sa_flags & SA_SIGINFO) && previous[i].sa_handler == SIG_IGN) continue;
    }
    if (sigaction(watched_signals[i], &sa, &previous[i]) != 0) return -1;
  }
  return 0;
}
