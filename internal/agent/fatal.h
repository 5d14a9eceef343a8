// Fatal and stop signals: before a crashing or stopped program dies, the Go
// writer gets a chance to write what the agent holds (the last launches, the
// flight recorder).
#ifndef GPURR_FATAL_H
#define GPURR_FATAL_H

// gp_watch_fatal_signals installs handlers for SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT, SIGTERM and SIGINT (the last two unless the program
// ignores them) that write the signal number to notify_fd, its top bit set
// when the program will end (a crash, or a stop signal with no handler of
// the program's), wait up to wait_ms for a byte on ack_fd, then hand the
// signal to the handler that was there before (or the default action).
// Returns 0, or -1 with errno set.
int gp_watch_fatal_signals(int notify_fd, int ack_fd, int wait_ms);

#endif
