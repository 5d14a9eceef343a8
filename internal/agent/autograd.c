// autograd.c - PyTorch autograd context of each launch (see autograd.h).
//
// libtorch is never linked: its three entry points are looked up in the
// loaded libtorch_cpu.so, and the two fields read from an autograd node are at
// offsets that depend on the torch version (struct torch::autograd::Node in
// torch/csrc/autograd/function.h). Only versions whose offsets were checked
// against their headers (torch_layouts.h) are read; any other version is left alone and
// the recording says why. The node's class is named from its C++ RTTI, or,
// for a Python autograd.Function's node (PyNode), from its Python class.
#define _GNU_SOURCE
#include "autograd.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "torch_layouts.h"

// A std::shared_ptr<Node> as libstdc++ lays it out: get_current_node()
// returns one by value (through a hidden pointer, as the C++ ABI passes
// class results), having added a reference that the caller drops.
typedef struct {
  const char *node;
  char *ctrl;  // _Sp_counted_base: vptr, then the int use count at offset 8
} node_ptr;

static struct {
  void (*current_node)(node_ptr *ret);  // torch::autograd::get_current_node()
  uint64_t (*peek)(void);               // at::sequence_number::peek()
  uint64_t (*thread_id)(void);          // at::RecordFunction::currentThreadId()
  gp_torch_layout layout;
} torch;

static _Atomic int linked;
static int present;
static char version[64], reason[192];

// ---- start ----

static int find_libtorch(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  const char *name = info->dlpi_name, *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, "libtorch_cpu.so", 15) != 0) return 0;
  snprintf(data, 4096, "%s", name);
  return 1;
}

// read_version finds torch's version beside its library: torch/version.py
// in a Python install, build-version in a libtorch distribution.
static void read_version(const char *lib) {
  char dir[4096], path[4200], line[256];
  snprintf(dir, sizeof dir, "%s", lib);
  char *slash = strrchr(dir, '/');
  if (!slash) return;
  *slash = 0;  // .../torch/lib
  snprintf(path, sizeof path, "%s/../version.py", dir);
  FILE *f = fopen(path, "r");
  if (f) {
    // The assignment `__version__ = '2.11.0+cu130'` (with or without a type
    // annotation); other lines name __version__ too (__all__).
    while (fgets(line, sizeof line, f)) {
      char *q = line + strspn(line, " \t");
      if (strncmp(q, "__version__", 11) != 0 || !(q = strchr(q, '=')) || !(q = strpbrk(q, "'\""))) continue;
      char *end = strchr(q + 1, *q);
      if (end) snprintf(version, sizeof version, "%.*s", (int)(end - q - 1), q + 1);
      break;
    }
    fclose(f);
    return;
  }
  snprintf(path, sizeof path, "%s/../build-version", dir);
  if ((f = fopen(path, "r"))) {
    if (fgets(line, sizeof line, f)) snprintf(version, sizeof version, "%.*s", (int)strcspn(line, "\r\n"), line);
    fclose(f);
  }
}

void gp_autograd_init(void) {
  char lib[4096] = "";
  if (!dl_iterate_phdr(find_libtorch, lib)) return;  // no torch in this process
  present = 1;
  read_version(lib);
  void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) {
    snprintf(reason, sizeof reason, "cannot open the loaded %s", lib);
    return;
  }
  static const char *const names[] = {
      "_ZN5torch8autograd16get_current_nodeEv",
      "_ZN2at15sequence_number4peekEv",
      "_ZN2at14RecordFunction15currentThreadIdEv",
  };
  void *syms[3];
  for (int i = 0; i < 3; i++) {
    if (!(syms[i] = dlsym(h, names[i]))) {
      snprintf(reason, sizeof reason, "libtorch_cpu.so has no %s", names[i]);
      dlclose(h);
      return;
    }
  }
  dlclose(h);  // RTLD_NOLOAD took a reference; the library stays loaded
  int major = 0, minor = 0;
  sscanf(version, "%d.%d", &major, &minor);
  const gp_torch_layout *l = NULL;
  for (size_t i = 0; i < sizeof gp_torch_layouts / sizeof *gp_torch_layouts; i++)
    if (gp_torch_layouts[i].major == major && gp_torch_layouts[i].minor == minor) l = &gp_torch_layouts[i];
  if (!l) {
    snprintf(reason, sizeof reason, "torch %s: the autograd node layout of this version is not known to gpurr %s",
             *version ? version : "(unknown version)", "(it knows 2.11)");
    return;
  }
  memcpy(&torch.current_node, &syms[0], sizeof syms[0]);
  memcpy(&torch.peek, &syms[1], sizeof syms[1]);
  memcpy(&torch.thread_id, &syms[2], sizeof syms[2]);
  torch.layout = *l;
  atomic_store_explicit(&linked, 1, memory_order_release);
}

void gp_autograd_describe(gp_autograd_info *out) {
  out->present = present;
  out->linked = atomic_load_explicit(&linked, memory_order_acquire);
  out->version = version;
  out->reason = reason;
}

void gp_autograd_stop(void) { atomic_store_explicit(&linked, 0, memory_order_release); }

// ---- node classes: each named once ----

enum { CLASS_TABLE = 1 << 12 };
static struct {
  _Atomic uintptr_t key;  // a C++ vtable, or a Python type tagged with bit 0
  uint32_t id;
} classes[CLASS_TABLE];
static pthread_mutex_t classes_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t next_class;
static const void *_Atomic pynode_vtable;  // learned when the first PyNode is named

static inline const void *rd_ptr(const void *base, ptrdiff_t off) {
  const void *v;
  memcpy(&v, (const char *)base + off, sizeof v);
  return v;
}

static inline uint64_t rd_u64(const void *base, size_t off) {
  uint64_t v;
  memcpy(&v, (const char *)base + off, sizeof v);
  return v;
}

static uint32_t class_find(uintptr_t key) {
  for (uintptr_t i = key >> 4, n = 0; n < 32; i++, n++) {
    uintptr_t k = atomic_load_explicit(&classes[i & (CLASS_TABLE - 1)].key, memory_order_acquire);
    if (k == key) return classes[i & (CLASS_TABLE - 1)].id;
    if (k == 0) return 0;
  }
  return 0;
}

// class_key is a node's class: its vtable, or for a PyNode its Python ctx's
// type, whose name is the Function's backward class (CompiledFunctionBackward).
static uintptr_t class_key(const char *node) {
  const void *vt = rd_ptr(node, 0);
  if (vt && vt == atomic_load_explicit(&pynode_vtable, memory_order_relaxed) && torch.layout.pynode_obj) {
    const void *obj = rd_ptr(node, torch.layout.pynode_obj);
    if (obj) return (uintptr_t)rd_ptr(obj, 8) | 1;  // ob_type
  }
  return (uintptr_t)vt;
}

static int push_class(uint32_t id, uint32_t kind, const char *name) {
  struct {
    gp_nodeclass_rec r;
    char name[512];
  } rec;
  size_t n = name ? strnlen(name, sizeof rec.name) : 0;
  memset(&rec.r, 0, sizeof rec.r);
  rec.r.h.type = GP_REC_NODECLASS;
  rec.r.h.size = gp_pad8(sizeof rec.r + n);
  rec.r.id = id;
  rec.r.kind = kind;
  rec.r.name_len = n;
  memcpy(rec.name, name, n);
  return gp_ring_push(&rec);
}

// describe_class names a class the first time a launch meets it: from the
// vtable's std::type_info (the word before the vtable's address point), or
// from the Python type's tp_name (offset 24 in every CPython 3).
static uint32_t describe_class(const char *node) {
  pthread_mutex_lock(&classes_mu);
  uintptr_t key = class_key(node);
  uint32_t id = class_find(key);
  if (id) goto out;
  const char *name = NULL;
  if (!(key & 1)) {
    const void *vt = rd_ptr(node, 0);
    const void *ti = vt ? rd_ptr(vt, -(ptrdiff_t)sizeof(void *)) : NULL;
    name = ti ? rd_ptr(ti, sizeof(void *)) : NULL;  // type_info::__name
    if (name && *name == '*') name++;               // GCC's mark of a local type
    if (name && strcmp(name, "N5torch8autograd6PyNodeE") == 0) {
      // The first PyNode: from now on PyNodes are told apart by Python class.
      atomic_store_explicit(&pynode_vtable, vt, memory_order_relaxed);
      key = class_key(node);
      if ((key & 1) && (id = class_find(key))) goto out;
    }
  }
  uint32_t kind = GP_NODECLASS_CXX;
  if (key & 1) {
    name = rd_ptr((const void *)(key & ~(uintptr_t)1), 24);
    kind = GP_NODECLASS_PYTHON;
  }
  id = ++next_class;
  // A class whose record the full ring dropped stays out of the table, so a
  // later launch names it again (the writer names an unknown id as such).
  if (!push_class(id, kind, name)) goto out;
  for (uintptr_t i = key >> 4, n = 0; n < 32; i++, n++) {
    typeof(&classes[0]) e = &classes[i & (CLASS_TABLE - 1)];
    if (atomic_load_explicit(&e->key, memory_order_relaxed) != 0) continue;
    e->id = id;
    atomic_store_explicit(&e->key, key, memory_order_release);
    break;
  }  // a full table leaves the class unnamed in the table: described anew next time, deduplicated by the writer
out:
  pthread_mutex_unlock(&classes_mu);
  return id;
}

// ---- the hot path ----

static __thread __attribute__((tls_model("initial-exec"))) uint64_t forward_thread;

void gp_autograd_take(gp_autograd *out) {
  if (!atomic_load_explicit(&linked, memory_order_acquire)) {
    memset(out, 0, sizeof *out);
    return;
  }
  node_ptr cur = {0, 0};
  torch.current_node(&cur);
  if (cur.node) {
    out->sequence_nr = rd_u64(cur.node, torch.layout.sequence_nr);
    out->thread = rd_u64(cur.node, torch.layout.thread_id);
    uint32_t id = class_find(class_key(cur.node));
    out->node_class = id ? id : describe_class(cur.node);
  } else {
    if (!forward_thread) forward_thread = torch.thread_id();
    out->thread = forward_thread;
    out->sequence_nr = torch.peek();
    out->node_class = 0;
  }
  // Drop the reference the copy took. The thread's current-node slot holds
  // another, so the count never reaches zero here.
  if (cur.ctrl) atomic_fetch_sub_explicit((_Atomic int *)(cur.ctrl + 8), 1, memory_order_acq_rel);
  out->present = 1;
}
