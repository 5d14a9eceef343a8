// Drives autograd.c against fake_torch.cpp: exits 0 when every check holds,
// else prints what failed. Built and run by autograd_cpu_test.go:
//   harness LIB_DIR WANT_LINKED
#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "internal.h"

// What autograd.c pushed into the ring.
static int nclasses, drop_next;  // drop_next: the next record finds the ring full
static char class_names[8][128];
static uint32_t class_ids[8], class_kinds[8];

int gp_ring_push(const void *rec) {
  const gp_nodeclass_rec *r = rec;
  if (drop_next) {
    drop_next = 0;
    return 0;
  }
  if (r->h.type != GP_REC_NODECLASS || nclasses == 8) return 1;
  snprintf(class_names[nclasses], sizeof class_names[0], "%.*s", (int)r->name_len, (const char *)(r + 1));
  class_ids[nclasses] = r->id;
  class_kinds[nclasses] = r->kind;
  nclasses++;
  return 1;
}

static int failures;
#define CHECK(cond, ...)                  \
  do {                                    \
    if (!(cond)) {                        \
      failures++;                         \
      printf("FAIL %s: ", #cond);         \
      printf(__VA_ARGS__);                \
      printf("\n");                       \
    }                                     \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  char lib[4096];
  snprintf(lib, sizeof lib, "%s/libtorch_cpu.so", argv[1]);
  // Python loads torch's libraries RTLD_LOCAL: their symbols are not global.
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("dlopen %s: %s\n", lib, dlerror());
    return 2;
  }
  void (*set_next_nr)(uint64_t) = (void (*)(uint64_t))dlsym(h, "fake_set_next_nr");
  void (*enter_node)(int, uint64_t, uint64_t) = (void (*)(int, uint64_t, uint64_t))dlsym(h, "fake_enter_node");
  long (*use_count)(void) = (long (*)(void))dlsym(h, "fake_use_count");
  uint64_t (*thread_id)(void) = (uint64_t(*)(void))dlsym(h, "fake_thread_id");

  gp_autograd_init();
  gp_autograd_info info;
  gp_autograd_describe(&info);
  int want_linked = atoi(argv[2]);
  CHECK(info.present == 1, "present %d", info.present);
  CHECK(info.linked == want_linked, "linked %d, reason %s", info.linked, info.reason);
  printf("version %s linked %d reason %s\n", info.version, info.linked, info.reason);
  gp_autograd ag;
  if (!want_linked) {
    gp_autograd_take(&ag);
    CHECK(ag.present == 0 && ag.thread == 0 && ag.sequence_nr == 0, "took context though not linked");
    return failures ? 1 : 0;
  }

  // Forward: the thread's next sequence number and its PyTorch thread id.
  set_next_nr(41);
  gp_autograd_take(&ag);
  CHECK(ag.present && ag.node_class == 0 && ag.sequence_nr == 41 && ag.thread == thread_id(),
        "forward: present %u class %u seq %llu thread %llu", ag.present, ag.node_class,
        (unsigned long long)ag.sequence_nr, (unsigned long long)ag.thread);

  // Backward: the running node's number and forward thread, its class named once.
  enter_node(1, 40, 7);
  long before = use_count();
  gp_autograd_take(&ag);
  CHECK(use_count() == before, "use count %ld after a take, %ld before: the reference leaked or was dropped twice",
        use_count(), before);
  CHECK(ag.present && ag.sequence_nr == 40 && ag.thread == 7 && ag.node_class != 0, "backward: seq %llu thread %llu class %u",
        (unsigned long long)ag.sequence_nr, (unsigned long long)ag.thread, ag.node_class);
  uint32_t mm = ag.node_class;
  enter_node(1, 38, 7);  // another MmBackward0: same class, no new record
  gp_autograd_take(&ag);
  CHECK(ag.node_class == mm && nclasses == 1, "second MmBackward0: class %u (want %u), %d class records", ag.node_class,
        mm, nclasses);
  // ReluBackward0's first record is dropped (a full ring): its next launch names it again.
  enter_node(2, 39, 7);
  drop_next = 1;
  gp_autograd_take(&ag);
  CHECK(ag.node_class != 0 && nclasses == 1, "dropped class record: class %u, %d class records", ag.node_class, nclasses);
  gp_autograd_take(&ag);
  CHECK(ag.node_class != mm && ag.node_class != 0 && nclasses == 2, "ReluBackward0: class %u, %d class records",
        ag.node_class, nclasses);
  CHECK(nclasses == 2 && strcmp(class_names[0], "N5torch8autograd9generated11MmBackward0E") == 0 &&
            class_ids[0] == mm && class_kinds[0] == GP_NODECLASS_CXX &&
            strcmp(class_names[1], "N5torch8autograd9generated13ReluBackward0E") == 0,
        "class records: %s (%u, kind %u), %s", class_names[0], class_ids[0], class_kinds[0], class_names[1]);
  // Python Functions' nodes are all PyNodes: each is named by its Python class.
  enter_node(3, 37, 7);
  gp_autograd_take(&ag);
  uint32_t compiled = ag.node_class;
  enter_node(4, 36, 7);
  gp_autograd_take(&ag);
  uint32_t custom = ag.node_class;
  enter_node(3, 35, 7);
  gp_autograd_take(&ag);
  CHECK(compiled != 0 && custom != 0 && compiled != custom && ag.node_class == compiled && nclasses == 4 &&
            class_kinds[2] == GP_NODECLASS_PYTHON && strcmp(class_names[2], "CompiledFunctionBackward") == 0 &&
            strcmp(class_names[3], "MyFunctionBackward") == 0,
        "PyNode classes %u %u (again %u), %d class records: %s (kind %u), %s", compiled, custom, ag.node_class,
        nclasses, class_names[2], class_kinds[2], class_names[3]);
  enter_node(0, 0, 0);
  set_next_nr(42);
  gp_autograd_take(&ag);
  CHECK(ag.node_class == 0 && ag.sequence_nr == 42, "back in forward: class %u seq %llu", ag.node_class,
        (unsigned long long)ag.sequence_nr);

  gp_autograd_stop();
  gp_autograd_take(&ag);
  CHECK(!ag.present, "context taken after gp_autograd_stop");
  if (!failures) printf("ok\n");
  return failures ? 1 : 0;
}
