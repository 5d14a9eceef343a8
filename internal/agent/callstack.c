// Callstacks: each launch's Python frames (pystack.c) or native frames
// (unwind.c), each distinct stack described once in a stack record.
//
// The hot path hashes the raw frames (code object + instruction for Python,
// return addresses for native code) and looks the hash up; only a new stack
// is resolved to text. The id is FNV-1a 64 over the frames' text with 0xFF
// between frames, so it is the same in every run of the same program.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fatal.h"
#include "internal.h"
#include "pystack.h"
#include "unwind.h"

enum { STACK_TABLE = 1 << 16, MAX_FRAMES = 64, AUTO_NATIVE_FRAMES = 24 };
static struct {
  _Atomic uint64_t key;
  _Atomic uint64_t id;
  _Atomic int flags;
} stacks[STACK_TABLE];

static int py_present;

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static inline uint64_t fnv_bytes(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * FNV_PRIME;
  return h;
}

// hash_word folds one 64-bit word into h; the hot path hashes raw frames
// word by word, which costs a few ns where byte-wise FNV cost tens.
static inline uint64_t hash_word(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
  return h ^ (h >> 29);
}

// An entry's key is claimed first and its id published after, so two
// threads inserting into one slot cannot pair a key with the other's id; a
// lookup that sees the key before its id finds 0 and takes the stack anew
// (the writer drops the repeated record).
// The id carries one flag in the entry beside it: the stack is inside an
// optimizer's step (STACK_IN_OPTIMIZER), published with the id.
enum { STACK_IN_OPTIMIZER = 1 };

static uint64_t stack_lookup(uint64_t key, int *flags) {
  for (uint64_t i = key, n = 0; n < 32; i++, n++) {
    typeof(&stacks[0]) e = &stacks[i & (STACK_TABLE - 1)];
    uint64_t k = atomic_load_explicit(&e->key, memory_order_acquire);
    if (k == key) {
      uint64_t id = atomic_load_explicit(&e->id, memory_order_acquire);
      *flags = atomic_load_explicit(&e->flags, memory_order_relaxed);
      return id;
    }
    if (k == 0) return 0;
  }
  return 0;
}

static void stack_insert(uint64_t key, uint64_t id, int flags) {
  for (uint64_t i = key, n = 0; n < 32; i++, n++) {
    typeof(&stacks[0]) e = &stacks[i & (STACK_TABLE - 1)];
    uint64_t k = atomic_load_explicit(&e->key, memory_order_acquire);
    if (k == key) return;
    if (k != 0) continue;
    uint64_t zero = 0;
    if (atomic_compare_exchange_strong_explicit(&e->key, &zero, key, memory_order_acq_rel, memory_order_acquire)) {
      atomic_store_explicit(&e->flags, flags, memory_order_relaxed);
      atomic_store_explicit(&e->id, id, memory_order_release);
      return;
    }
    if (zero == key) return;
  }
}

// stack_builder accumulates a stack record; frames that do not fit are cut.
typedef struct gp_stack_builder {
  uint8_t buf[32768];
  size_t len;
  uint32_t nframes;
  uint64_t id;
  int flags;  // STACK_IN_OPTIMIZER
} stack_builder;

int gp_optimizer_frame(const char *file, const char *func) {
  if (!strstr(file, "/torch/optim/")) return 0;
  size_t n = strlen(func);
  return strcmp(func, "step") == 0 || (n > 5 && strcmp(func + n - 5, ".step") == 0) ||
         strstr(func, "profile_hook_step") != NULL;
}

static void stack_add(stack_builder *b, uint32_t kind, const char *file, const char *func, uint32_t line,
                      uint64_t pc, uint64_t offset) {
  size_t fl = strnlen(file, 1024), gl = strnlen(func, 1024);
  size_t need = gp_pad8(sizeof(gp_frame_rec) + fl + gl);
  if (b->len + need > sizeof b->buf) return;
  gp_frame_rec *f = (gp_frame_rec *)(b->buf + b->len);
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->line = line;
  f->pc = pc;
  f->offset = offset;
  f->file_len = fl;
  f->func_len = gl;
  memcpy(f + 1, file, fl);
  memcpy((uint8_t *)(f + 1) + fl, func, gl);
  b->len += need;
  if (kind == GP_FRAME_PYTHON && gp_optimizer_frame(file, func)) b->flags |= STACK_IN_OPTIMIZER;
  b->nframes++;
  // The id hashes what a person reads: file, line, function (Python) or
  // object and offset (native), never addresses that move between runs.
  if (b->nframes > 1) b->id = fnv_bytes(b->id, "\xff", 1);
  b->id = fnv_bytes(b->id, file, fl);
  b->id = fnv_bytes(b->id, &line, sizeof line);
  b->id = fnv_bytes(b->id, func, gl);
  if (kind == GP_FRAME_NATIVE) b->id = fnv_bytes(b->id, &offset, sizeof offset);
}

// stack_publish writes a new stack's record and remembers it under key;
// since is the TSC when the lookup missed, for the new-stack counters.
static uint64_t stack_publish(stack_builder *b, uint64_t key, uint32_t source, uint32_t cut, uint64_t since) {
  gp_stack_rec *r = (gp_stack_rec *)b->buf;
  if (b->id == 0) b->id = 1;
  r->h.type = GP_REC_STACK;
  r->h.size = b->len;
  r->id = b->id;
  r->nframes = b->nframes;
  r->source = source;
  r->cut = cut;
  r->pad = 0;
  if (!gp_ring_push(r)) return 0;
  stack_insert(key, b->id, b->flags);
  GP_COUNT(stacks_new, 1);
  GP_COUNT(stack_new_cycles, gp_cycles() - since);
  return b->id;
}

static stack_builder *builder(void) {
  gp_thread_scratch *s = gp_scratch();
  if (!s) return NULL;
  if (!s->stack) s->stack = malloc(sizeof(stack_builder));
  stack_builder *b = s->stack;
  if (b) {
    b->len = sizeof(gp_stack_rec);
    b->nframes = 0;
    b->id = FNV_OFFSET;
    b->flags = 0;
  }
  return b;
}

// python_stack keys the stack on the frames' raw identities (code object and
// instruction pointers, read from the frames alone); only a stack not seen
// before reads the code objects to name its frames.
static uint64_t python_stack(int *flags) {
  gp_pyraw raw[MAX_FRAMES];
  int n = gp_py_walk_raw(raw, MAX_FRAMES);
  if (n <= 0) return 0;
  uint64_t key = FNV_OFFSET ^ 1;
  for (int i = 0; i < n; i++) key = hash_word(hash_word(key, (uint64_t)(uintptr_t)raw[i].code), raw[i].instr);
  uint64_t id = stack_lookup(key, flags);
  if (id) return id;
  uint64_t missed = gp_cycles();
  stack_builder *b = builder();
  if (!b) return 0;
  for (int i = 0; i < n; i++) {
    gp_pyframe f;
    if (!gp_py_frame_of(&raw[i], &f)) continue;  // a frame CPython hides too
    char file[512], func[256];
    int line = 0;
    if (!gp_py_resolve(&f, file, sizeof file, func, sizeof func, &line)) {
      GP_COUNT(callstacks_failed, 1);
      continue;
    }
    stack_add(b, GP_FRAME_PYTHON, file, func, line, 0, 0);
  }
  if (b->nframes == 0) return 0;  // shims only: no Python code on this thread now
  *flags = b->flags;
  return stack_publish(b, key, 1, n == MAX_FRAMES ? GP_UNWIND_MAX : GP_UNWIND_END, missed);
}

// _dl_find_object (glibc 2.35+) finds the object holding an address in
// tens of ns; dladdr, the fallback, is much slower.
static int (*find_object)(void *, struct dl_find_object *);

void gp_object_of(uint64_t addr, const char **obj, uint64_t *off) {
  void *pc = (void *)(uintptr_t)addr;
  struct dl_find_object fo;
  if (find_object && find_object(pc, &fo) == 0 && fo.dlfo_link_map) {
    *obj = fo.dlfo_link_map->l_name ? fo.dlfo_link_map->l_name : "";
    *off = (uint64_t)(uintptr_t)pc - fo.dlfo_link_map->l_addr;
    return;
  }
  Dl_info info;
  if (dladdr(pc, &info)) {
    *obj = info.dli_fname ? info.dli_fname : "";
    *off = (uint64_t)(uintptr_t)pc - (uint64_t)(uintptr_t)info.dli_fbase;
  }
}

// The agent's and CUPTI's own frames sit innermost in every native stack;
// they are dropped so a stack starts at the driver call the program made.
static struct {
  uint64_t start, end;
} own_code[2];  // the agent's and CUPTI's address ranges
static char exe_path[512];

static int is_own_code(uint64_t pc) {
  for (int i = 0; i < 2; i++)
    if (pc >= own_code[i].start && pc < own_code[i].end) return 1;
  return 0;
}

static uint64_t native_stack(int depth) {
  uint64_t pcs[MAX_FRAMES + 16];
  int n = gp_unwind(pcs, depth + 16 < MAX_FRAMES + 16 ? depth + 16 : MAX_FRAMES + 16);
  int cut = gp_unwind_stop();
  int skip = 0;
  while (skip < n && skip < 16 && is_own_code(pcs[skip])) skip++;
  if (n - skip >= depth) {
    if (n - skip > depth || cut == GP_UNWIND_MAX) cut = GP_UNWIND_MAX;
    n = skip + depth;
  }
  if (n - skip <= 0) return 0;
  uint64_t key = FNV_OFFSET ^ 2;
  for (int i = skip; i < n; i++) key = hash_word(key, pcs[i]);
  int flags = 0;
  uint64_t id = stack_lookup(key, &flags);
  if (id) return id;
  uint64_t missed = gp_cycles();
  stack_builder *b = builder();
  if (!b) return 0;
  for (int i = skip; i < n; i++) {
    uint64_t pc = pcs[i], off = pc;
    const char *obj = "";
    gp_object_of(pc, &obj, &off);
    if (!*obj) obj = exe_path;  // the main program's link map has no name
    // Symbol names are looked up later by the writer, from the object's
    // symbol tables: far too much work for a launch.
    stack_add(b, GP_FRAME_NATIVE, obj, "", 0, pc, off);
  }
  return stack_publish(b, key, 2, cut, missed);
}

// gp_callstack_take: auto mode takes no native frames for a backward launch,
// since its forward line, not autograd's engine internals, is what its
// frames would be read for.
uint64_t gp_callstack_take(int backward, int *in_optimizer) {
  int flags = 0;
  uint64_t id = 0;
  switch (gp_proc.cfg.callstack_mode) {
  case GP_STACK_OFF:
    break;
  case GP_STACK_PYTHON:
    id = py_present ? python_stack(&flags) : 0;
    break;
  case GP_STACK_NATIVE:
    id = native_stack(MAX_FRAMES);
    break;
  default:  // auto: Python where the thread runs Python, else native
    id = py_present ? python_stack(&flags) : 0;
    // Auto keeps the innermost AUTO_NATIVE_FRAMES, which name the library
    // call that launched.
    if (!id && !backward) id = native_stack(AUTO_NATIVE_FRAMES);
  }
  if (in_optimizer) *in_optimizer = (flags & STACK_IN_OPTIMIZER) != 0;
  return id;
}

// Libraries that allocate device memory for their own use, by the start of
// their file name.
static const struct {
  const char *prefix;
  int owner;
} owners[] = {
    {"libnccl", GP_OWNER_NCCL}, {"librccl", GP_OWNER_NCCL}, {"libnvshmem", GP_OWNER_NVSHMEM},
    {"libucp", GP_OWNER_UCX},   {"libuct", GP_OWNER_UCX},   {"libucs", GP_OWNER_UCX},
    {"libucc", GP_OWNER_UCX},
};

int gp_callstack_owner(void) {
  uint64_t pcs[48];
  int n = gp_unwind(pcs, 48);
  for (int i = 0; i < n; i++) {
    if (is_own_code(pcs[i])) continue;
    const char *obj = "";
    uint64_t off = 0;
    gp_object_of(pcs[i], &obj, &off);
    const char *base = strrchr(obj, '/');
    base = base ? base + 1 : obj;
    for (size_t k = 0; k < sizeof owners / sizeof *owners; k++)
      if (strncmp(base, owners[k].prefix, strlen(owners[k].prefix)) == 0) return owners[k].owner;
  }
  return GP_OWNER_PROGRAM;
}

int gp_library_kernel(const char *name) {
  // NCCL's kernels: ncclDevKernel_* / ncclKernel_* (C names), or mangled C++ names holding them.
  return strstr(name, "ncclDevKernel") || strstr(name, "ncclKernel") || strstr(name, "nvshmem");
}

void gp_callstack_init(void) {
  py_present = gp_py_init();
  find_object = (int (*)(void *, struct dl_find_object *))dlsym(RTLD_DEFAULT, "_dl_find_object");
  gp_unwind_init();
  gp_object_range((uintptr_t)gp_callstack_init, &own_code[0].start, &own_code[0].end);
  gp_object_range((uintptr_t)gp_cupti.subscribe, &own_code[1].start, &own_code[1].end);
  ssize_t len = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
  exe_path[len > 0 ? len : 0] = 0;
  if (gp_proc.cfg.callstack_mode == GP_STACK_NATIVE || gp_proc.cfg.callstack_mode == GP_STACK_AUTO) {
    uint64_t pcs[4];
    // Learns this thread's stack bounds (on the main thread that reads
    // /proc/self/maps) now, not inside the first launch.
    gp_unwind(pcs, 4);
  }
}

const char *gp_python_description(void) { return gp_py_describe(); }
