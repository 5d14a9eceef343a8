// Per-thread state (thread.h): the TLS every file reads, and the heap
// buffers of each thread, freed when it exits.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

GP_TLS gp_thread_state gp_thread;

static pthread_key_t scratch_key;

static void free_scratch(void *p) {
  gp_thread_scratch *s = p;
  free(s->stack);
  free(s);
}

void gp_thread_init(void) { pthread_key_create(&scratch_key, free_scratch); }

gp_thread_scratch *gp_scratch_alloc(void) {
  gp_thread.scratch = calloc(1, sizeof *gp_thread.scratch);
  if (gp_thread.scratch) pthread_setspecific(scratch_key, gp_thread.scratch);
  return gp_thread.scratch;
}

pid_t gp_thread_tid(void) { return gp_thread.tid = (pid_t)syscall(SYS_gettid); }
