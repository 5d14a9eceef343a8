// Fatal and stop signals: before a crashing or stopped program dies, the Go
// writer gets a chance to write what the agent holds (the last launches, the
// flight recorder).
#ifndef GPURR_FATAL_H
#define GPURR_FATAL_H

#include <stdint.h>

// gp_watch_fatal_signals installs handlers for SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT, SIGTERM and SIGINT (the last two unless the program
// ignores them) that write the signal number to notify_fd, its top bit set
// when the program will end (a crash, or a stop signal with no handler of
// the program's), wait up to wait_ms for a byte on ack_fd, then hand the
// signal to the handler that was there before (or the default action).
// Returns 0, or -1 with errno set.
int gp_watch_fatal_signals(int notify_fd, int ack_fd, int wait_ms);

// gp_fatal_where gives the instruction the first crash happened at and the
// address it touched (the signal's si_addr), 0 where unknown.
void gp_fatal_where(uint64_t *pc, uint64_t *addr);

// gp_object_of names the loaded object holding pc (callstack.c): its path
// ("" for the executable, NULL when none) and pc's offset in it.
void gp_object_of(uint64_t pc, const char **obj, uint64_t *off);

#endif
