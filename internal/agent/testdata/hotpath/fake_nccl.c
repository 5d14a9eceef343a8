// fake_nccl.c - built as libnccl_fake.so: a library whose file name is a
// communication library's, so an allocation made through it is that
// library's own (gp_callstack_owner) in the digest scenario.
#include <stdint.h>

// fake_nccl_alloc calls alloc(n) from inside this library, as NCCL calls
// cuMemAlloc for its buffers, and returns what it returned.
__attribute__((visibility("default"), noinline)) uint64_t fake_nccl_alloc(uint64_t (*alloc)(uint64_t), uint64_t n) {
  uint64_t d = alloc(n);
  __asm__ volatile("" ::: "memory");  // not a tail call: this frame stays on the stack
  return d;
}
