// The program's own CUPTI client beside the agent. A process has one CUPTI
// subscriber (CUPTI 13.0), and the agent holds it from the driver's start, so
// a profiler inside the program (torch.profiler's Kineto, which links
// libcupti) would get CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED and trace
// no GPU work. Instead the agent rebinds every cupti* function that another
// loaded object imports (its GOT slots) to the CUPTI the agent loaded, and
// serves the calls that would collide itself: the client gets a subscriber of
// its own, whose callbacks the agent's one subscription passes on, and its
// activity kinds are turned on beside the agent's, their records copied into
// the client's own buffers. Each side turns off only what the other does not
// use. Objects loaded after the agent starts are rebound as CUDA loads modules
// (gp_client_rescan). A client that subscribed before the agent (an injection
// of its own) keeps the subscription, and the agent records nothing.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

enum {
  DOMAINS = 8,        // CUpti_CallbackDomain values are below it
  CBIDS = 4096,       // callback ids of a domain are below it (CUDA 13.0's driver domain ends near 800)
  KINDS = 128,        // CUpti_ActivityKind values are below it
  MAX_OBJECTS = 4096, // objects rebound, remembered so that a rescan skips them
  CUPTI_ERROR_INVALID_PARAMETER = 1,
  CUPTI_ERROR_NOT_SUPPORTED = 27,
  CUPTI_ERROR_MULTIPLE_SUBSCRIBERS = 39,
};

static void *cupti_lib;                  // the agent's CUPTI: what other objects' cupti* calls go to
static gp_CUpti_SubscriberHandle agent_sub;
static _Atomic uint8_t own[DOMAINS][CBIDS];     // callbacks the agent enabled for itself
static _Atomic uint8_t wanted[DOMAINS][CBIDS];  // callbacks the client enabled
static _Atomic uint8_t agent_kind[KINDS], client_kind[KINDS];
static pthread_mutex_t client_mu = PTHREAD_MUTEX_INITIALIZER;  // subscribing, kinds

// The client's subscriber handle: a value of the agent's own that no CUPTI hands out.
static const char client_handle_tag;
#define CLIENT_HANDLE ((gp_CUpti_SubscriberHandle)(uintptr_t)&client_handle_tag)

static _Atomic(gp_CallbackFunc) client_cb;
static void *client_userdata;
static _Atomic(gp_BufferRequestFunc) client_request;
static _Atomic(gp_BufferCompletedFunc) client_completed;
static int agent_activity;    // the agent registered activity buffers: the client's are served by it
static _Atomic int client_direct;  // no agent activity: the client's activity calls go to CUPTI as they are
static char client_name[256];  // the object that subscribed, for the log

// The agent's CUPTI entry points that the client's calls reach when they are not served here.
static gp_CUptiResult (*real_enable_domain)(uint32_t, gp_CUpti_SubscriberHandle, int);
static gp_CUptiResult (*real_unsubscribe)(gp_CUpti_SubscriberHandle);
static gp_CUptiResult (*real_get_callback_state)(uint32_t *, gp_CUpti_SubscriberHandle, int, uint32_t);

static int in_range(int domain, uint32_t cbid) { return domain >= 0 && domain < DOMAINS && cbid < CBIDS; }

void gp_client_own_callback(int domain, uint32_t cbid) {
  if (in_range(domain, cbid)) atomic_store_explicit(&own[domain][cbid], 1, memory_order_relaxed);
}

int gp_client_callback(int domain, uint32_t cbid, const void *data) {
  if (!in_range(domain, cbid)) return 1;
  if (atomic_load_explicit(&wanted[domain][cbid], memory_order_relaxed) && !gp_thread.in_agent) {
    gp_CallbackFunc cb = atomic_load_explicit(&client_cb, memory_order_acquire);
    if (cb) cb(client_userdata, domain, cbid, data);
  }
  return atomic_load_explicit(&own[domain][cbid], memory_order_relaxed);
}

// set_callback turns the client's wish for one callback into the agent's subscription: on when
// either wants it, off when neither does.
static gp_CUptiResult set_callback(uint32_t enable, int domain, uint32_t cbid) {
  if (!in_range(domain, cbid)) return CUPTI_ERROR_INVALID_PARAMETER;
  atomic_store(&wanted[domain][cbid], enable != 0);
  if (atomic_load(&own[domain][cbid])) return 0;
  return gp_cupti.enableCallback(enable != 0, agent_sub, domain, cbid);
}

// ---- what the client calls ----

static gp_CUptiResult client_subscribe(gp_CUpti_SubscriberHandle *sub, gp_CallbackFunc cb, void *userdata) {
  if (!sub) return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&client_mu);
  if (atomic_load(&gp_proc.client_active)) {
    pthread_mutex_unlock(&client_mu);
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS;
  }
  client_userdata = userdata;
  atomic_store_explicit(&client_cb, cb, memory_order_release);
  atomic_store(&gp_proc.client_active, 1);
  *sub = CLIENT_HANDLE;
  pthread_mutex_unlock(&client_mu);
  GP_COUNT(cupti_clients, 1);
  Dl_info who;
  const char *name = dladdr(__builtin_return_address(0), &who) && who.dli_fname ? who.dli_fname : "?";
  const char *base = strrchr(name, '/');
  snprintf(client_name, sizeof client_name, "%s", base ? base + 1 : name);
  gp_logf(1, "the program's own CUPTI client (%s: a profiler such as torch.profiler) subscribed: it shares the agent's "
             "subscription, and sees its callbacks and activity records as it would alone",
          client_name);
  static _Atomic int said;
  if (atomic_exchange(&said, 1)) return 0;
  char line[512];
  int n = snprintf(line, sizeof line,
                   "gpurr: the program's own CUPTI client (%s, e.g. torch.profiler) shares gpurr's CUPTI subscription: "
                   "both record the GPU's work\n",
                   client_name);
  if (n > 0) (void)!write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  return 0;
}

static void client_gone(void) {
  for (int d = 0; d < DOMAINS; d++)
    for (uint32_t c = 0; c < CBIDS; c++)
      if (atomic_exchange(&wanted[d][c], 0) && !atomic_load(&own[d][c])) gp_cupti.enableCallback(0, agent_sub, d, c);
  atomic_store(&gp_proc.client_active, 0);
  atomic_store(&client_cb, NULL);
}

static gp_CUptiResult client_unsubscribe(gp_CUpti_SubscriberHandle sub) {
  if (sub != CLIENT_HANDLE) return real_unsubscribe ? real_unsubscribe(sub) : CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&client_mu);
  client_gone();
  pthread_mutex_unlock(&client_mu);
  return 0;
}

static gp_CUptiResult client_enable_callback(uint32_t enable, gp_CUpti_SubscriberHandle sub, int domain, uint32_t cbid) {
  if (sub != CLIENT_HANDLE) return gp_cupti.enableCallback(enable, sub, domain, cbid);
  return set_callback(enable, domain, cbid);
}

// The callback ids of a domain that CUPTI knows: up to the first it has no name for, past
// the last one. Without cuptiGetCallbackName, every id below CBIDS.
static uint32_t domain_end(int domain) {
  if (!gp_cupti_callback_name) return CBIDS;
  uint32_t end = 1;
  for (uint32_t c = 1; c < CBIDS; c++) {
    const char *name = NULL;
    if (gp_cupti_callback_name(domain, c, &name) == 0 && name) end = c + 1;
  }
  return end;
}

static gp_CUptiResult client_enable_domain(uint32_t enable, gp_CUpti_SubscriberHandle sub, int domain) {
  if (sub != CLIENT_HANDLE) return real_enable_domain ? real_enable_domain(enable, sub, domain) : CUPTI_ERROR_NOT_SUPPORTED;
  if (domain <= 0 || domain >= DOMAINS) return CUPTI_ERROR_INVALID_PARAMETER;
  if (enable && real_enable_domain) {
    uint32_t end = domain_end(domain);
    for (uint32_t c = 0; c < end; c++) atomic_store(&wanted[domain][c], 1);
    return real_enable_domain(1, agent_sub, domain);
  }
  for (uint32_t c = 0; c < CBIDS; c++)
    if (enable || atomic_load(&wanted[domain][c])) set_callback(enable, domain, c);
  return 0;
}

static gp_CUptiResult client_enable_all_domains(uint32_t enable, gp_CUpti_SubscriberHandle sub) {
  for (int d = 1; d < DOMAINS; d++) {
    gp_CUptiResult r = client_enable_domain(enable, sub, d);
    if (r != 0 && r != CUPTI_ERROR_INVALID_PARAMETER) return r;
  }
  return 0;
}

static gp_CUptiResult client_get_callback_state(uint32_t *enable, gp_CUpti_SubscriberHandle sub, int domain, uint32_t cbid) {
  if (sub != CLIENT_HANDLE)
    return real_get_callback_state ? real_get_callback_state(enable, sub, domain, cbid) : CUPTI_ERROR_NOT_SUPPORTED;
  if (!enable || !in_range(domain, cbid)) return CUPTI_ERROR_INVALID_PARAMETER;
  *enable = atomic_load(&wanted[domain][cbid]);
  return 0;
}

// The client's buffer being filled, under buf_mu. One is open while the client is registered,
// as CUPTI keeps one: Kineto flushes only when it has handed out a buffer that is not back.
static pthread_mutex_t buf_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *open_buf;
static size_t open_cap, open_used, open_max, open_records;

static void open_next(gp_BufferRequestFunc request) {
  open_buf = NULL;
  open_cap = open_used = open_max = open_records = 0;
  if (request) request(&open_buf, &open_cap, &open_max);
}

static void complete_open(gp_BufferCompletedFunc completed) {
  if (open_buf && completed) completed(NULL, 0, open_buf, open_cap, open_used);
  open_buf = NULL;
}

// The client's clock (Kineto's: the CPU's cycle counter). CUPTI keeps its own for every
// record, the agent's included; the records passed to the client are moved to the client's
// clock on the way, by a line through pairs of readings of both clocks: the first taken as
// the client registered its clock, the latest as its records are passed (under buf_mu).
static uint64_t (*client_clock)(void);
static uint64_t ours0, theirs0;
static double their_rate;  // the client's clock's ticks per ns of CUPTI's

static void clock_pair(uint64_t *ours, uint64_t *theirs) {
  uint64_t a = gp_clock();
  *theirs = client_clock();
  uint64_t b = gp_clock();
  *ours = a + (b - a) / 2;
}

static gp_CUptiResult client_timestamp_callback(uint64_t (*fn)(void)) {
  if (!fn) return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&buf_mu);
  client_clock = fn;
  clock_pair(&ours0, &theirs0);
  uint64_t o = ours0, t = theirs0;
  while (o - ours0 < 2000000) clock_pair(&o, &t);  // 2 ms apart: a first rate
  their_rate = (double)(t - theirs0) / (double)(o - ours0);
  pthread_mutex_unlock(&buf_mu);
  gp_logf(0, "CUPTI client: its records are passed in its own clock (%.4f of its ticks a ns)", their_rate);
  return 0;
}

static uint64_t their_time(uint64_t t) {
  return t ? theirs0 + (uint64_t)(int64_t)((double)(int64_t)(t - ours0) * their_rate) : 0;
}

static void move_time(uint8_t *at) {
  uint64_t v;
  memcpy(&v, at, sizeof v);
  v = their_time(v);
  memcpy(at, &v, sizeof v);
}

// to_their_clock moves a record's timestamps to the client's clock, and says whether it knows
// where they lie in the record's kind (a record it cannot move is not passed).
static int to_their_clock(uint8_t *rec) {
  int kind = ((gp_Activity *)rec)->kind;
#define MOVE(type, field) move_time(rec + offsetof(type, field))
  switch (kind) {
  case GP_ACTIVITY_KIND_KERNEL:
  case GP_ACTIVITY_KIND_CONCURRENT_KERNEL:
    MOVE(gp_ActivityKernel10, start), MOVE(gp_ActivityKernel10, end), MOVE(gp_ActivityKernel10, completed);
    MOVE(gp_ActivityKernel10, queued), MOVE(gp_ActivityKernel10, submitted);
    return 1;
  case GP_ACTIVITY_KIND_MEMCPY:
    MOVE(gp_ActivityMemcpy6, start), MOVE(gp_ActivityMemcpy6, end);
    return 1;
  case GP_ACTIVITY_KIND_MEMSET:
    MOVE(gp_ActivityMemset4, start), MOVE(gp_ActivityMemset4, end);
    return 1;
  case GP_ACTIVITY_KIND_SYNCHRONIZATION:
    MOVE(gp_ActivitySynchronization2, start), MOVE(gp_ActivitySynchronization2, end);
    return 1;
  case GP_ACTIVITY_KIND_DRIVER:
  case GP_ACTIVITY_KIND_RUNTIME:
    MOVE(gp_ActivityAPI, start), MOVE(gp_ActivityAPI, end);
    return 1;
  case GP_ACTIVITY_KIND_OVERHEAD:
    MOVE(gp_ActivityOverhead3, start), MOVE(gp_ActivityOverhead3, end);
    return 1;
  case GP_ACTIVITY_KIND_EXTERNAL_CORRELATION:
    return 1;  // no timestamps
  }
#undef MOVE
  static _Atomic int said;
  if (!atomic_exchange(&said, 1))
    gp_logf(1, "CUPTI client: activity records of kind %d are not passed to it: their timestamps cannot be moved to its clock", kind);
  return 0;
}

static gp_CUptiResult client_register(gp_BufferRequestFunc request, gp_BufferCompletedFunc completed) {
  pthread_mutex_lock(&client_mu);
  int direct = !agent_activity;
  atomic_store(&client_direct, direct);
  pthread_mutex_unlock(&client_mu);
  if (direct) return gp_cupti.activityRegisterCallbacks(request, completed);
  pthread_mutex_lock(&buf_mu);
  if (open_buf && atomic_load(&client_completed) != completed) complete_open(atomic_load(&client_completed));
  atomic_store(&client_request, request);
  atomic_store(&client_completed, completed);
  if (!open_buf) open_next(request);
  pthread_mutex_unlock(&buf_mu);
  return 0;
}

// set_kind turns an activity kind on while the agent or the client wants it.
static gp_CUptiResult set_kind(_Atomic uint8_t *mine, const _Atomic uint8_t *theirs, int kind, int on) {
  if (kind < 0 || kind >= KINDS) return on ? gp_cupti.activityEnable(kind) : gp_cupti.activityDisable(kind);
  pthread_mutex_lock(&client_mu);
  gp_CUptiResult r = 0;
  if (on)
    r = gp_cupti.activityEnable(kind);
  else if (!atomic_load(&theirs[kind]))
    r = gp_cupti.activityDisable(kind);
  if (r == 0) atomic_store(&mine[kind], on != 0);
  pthread_mutex_unlock(&client_mu);
  return r;
}

gp_CUptiResult gp_client_kind(int kind, int on) { return set_kind(agent_kind, client_kind, kind, on); }

void gp_client_activity_registered(void) {
  pthread_mutex_lock(&client_mu);
  agent_activity = 1;
  pthread_mutex_unlock(&client_mu);
}

static gp_CUptiResult client_activity_enable(int kind) {
  if (client_direct) return gp_cupti.activityEnable(kind);
  gp_CUptiResult r = set_kind(client_kind, agent_kind, kind, 1);
  gp_logf(0, "CUPTI client: activity kind %d on: %s", kind, r ? gp_cupti_error(r) : "ok");
  return r;
}

// A client turns its kinds off before it flushes (Kineto does): the records still in CUPTI's
// buffers are passed to it first, while the kind is its.
static gp_CUptiResult client_activity_disable(int kind) {
  if (client_direct) return gp_cupti.activityDisable(kind);
  if (kind >= 0 && kind < KINDS && atomic_load(&client_kind[kind])) gp_cupti.activityFlushAll(GP_ACTIVITY_FLAG_FLUSH_FORCED);
  return set_kind(client_kind, agent_kind, kind, 0);
}

// cuptiFinalize would end the agent's CUPTI too: the client's part ends instead, its records
// delivered first.
static gp_CUptiResult client_finalize(void) {
  if (!client_direct) gp_cupti.activityFlushAll(GP_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&client_mu);
  for (int k = 0; k < KINDS; k++)
    if (atomic_exchange(&client_kind[k], 0) && !atomic_load(&agent_kind[k]) && !client_direct) gp_cupti.activityDisable(k);
  client_gone();
  pthread_mutex_lock(&buf_mu);
  complete_open(atomic_load(&client_completed));
  atomic_store(&client_request, NULL);
  atomic_store(&client_completed, NULL);
  client_clock = NULL;
  pthread_mutex_unlock(&buf_mu);
  pthread_mutex_unlock(&client_mu);
  return 0;
}

// ---- the client's activity records ----

// gp_client_activity copies, from a buffer of activity records CUPTI completed for the agent,
// the records of the kinds the client turned on into the client's open buffer, and hands it
// back once it holds any (or is full), opening the next: the agent's own kernels aside.
void gp_client_activity(const uint8_t *buffer, size_t valid) {
  gp_BufferRequestFunc request = atomic_load(&client_request);
  gp_BufferCompletedFunc completed = atomic_load(&client_completed);
  if (!request || !completed || !buffer) return;
  uint64_t passed = 0, dropped = 0;
  const uint8_t *prev = NULL;
  gp_Activity *rec = NULL;
  pthread_mutex_lock(&buf_mu);
  if (client_clock) {  // a later pair: the rate over a longer span
    uint64_t o, t;
    clock_pair(&o, &t);
    if (o - ours0 > 2000000) their_rate = (double)(t - theirs0) / (double)(o - ours0);
  }
  for (;;) {
    int more = gp_cupti.activityGetNextRecord((uint8_t *)buffer, valid, &rec) == 0;
    const uint8_t *at = more ? (const uint8_t *)rec : buffer + valid;
    if (prev && at > prev) {
      // A record's bytes run to the next one's start: its size, in the layout CUPTI gave it.
      const gp_Activity *a = (const gp_Activity *)prev;
      size_t n = (size_t)(at - prev);
      int pass = a->kind >= 0 && a->kind < KINDS && atomic_load_explicit(&client_kind[a->kind], memory_order_relaxed);
      if (pass && (a->kind == GP_ACTIVITY_KIND_CONCURRENT_KERNEL || a->kind == GP_ACTIVITY_KIND_KERNEL)) {
        const char *name = ((const gp_ActivityKernel10 *)a)->name;
        pass = !(name && strncmp(name, "gpurr_", 6) == 0);
      }
      if (pass && open_buf && (open_used + n > open_cap || (open_max && open_records == open_max))) {
        complete_open(completed);
        open_next(request);
      }
      if (pass && !open_buf) open_next(request);
      if (pass && open_buf && open_used + n <= open_cap) {
        memcpy(open_buf + open_used, prev, n);
        if (!client_clock || to_their_clock(open_buf + open_used))
          open_used += n, open_records++, passed++;
        else
          dropped++;
      } else if (pass) {
        dropped++;  // the client gave no buffer, or one too small for the record
      }
    }
    if (!more) break;
    prev = (const uint8_t *)rec;
  }
  if (open_buf && open_used) {
    complete_open(completed);
    open_next(request);
  }
  pthread_mutex_unlock(&buf_mu);
  if (passed) GP_COUNT(cupti_client_records, passed);
  if (dropped) GP_COUNT(cupti_client_records_dropped, dropped);
}

// ---- rebinding other objects' cupti* imports ----

typedef struct {
  const char *name;
  void *fn;
} served;

static const served serve[] = {
    {"cuptiSubscribe", (void *)client_subscribe},
    {"cuptiUnsubscribe", (void *)client_unsubscribe},
    {"cuptiEnableCallback", (void *)client_enable_callback},
    {"cuptiEnableDomain", (void *)client_enable_domain},
    {"cuptiEnableAllDomains", (void *)client_enable_all_domains},
    {"cuptiGetCallbackState", (void *)client_get_callback_state},
    {"cuptiActivityRegisterCallbacks", (void *)client_register},
    {"cuptiActivityEnable", (void *)client_activity_enable},
    {"cuptiActivityDisable", (void *)client_activity_disable},
    {"cuptiActivityRegisterTimestampCallback", (void *)client_timestamp_callback},
    {"cuptiFinalize", (void *)client_finalize},
};

static void *binding(const char *name) {
  for (size_t i = 0; i < sizeof serve / sizeof *serve; i++)
    if (strcmp(serve[i].name, name) == 0) return serve[i].fn;
  return dlsym(cupti_lib, name);
}

static uintptr_t own_base;  // the agent's own object
static uintptr_t seen[MAX_OBJECTS];
static size_t nseen;
static unsigned long long loads_seen;
static pthread_mutex_t scan_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rebound;

// page_prot is what protection the page at p has: read-only inside the object's RELRO (as the
// dynamic linker left it, whole pages only), else its segment's.
static int page_prot(const struct dl_phdr_info *info, uintptr_t page, long pagesz) {
  int prot = PROT_READ | PROT_WRITE;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_type == PT_LOAD && page >= (lo & ~(uintptr_t)(pagesz - 1)) && page < hi)
      prot = (ph->p_flags & PF_R ? PROT_READ : 0) | (ph->p_flags & PF_W ? PROT_WRITE : 0) | (ph->p_flags & PF_X ? PROT_EXEC : 0);
  }
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_GNU_RELRO) continue;
    uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(pagesz - 1);
    uintptr_t hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(uintptr_t)(pagesz - 1);
    if (page >= lo && page < hi) prot = PROT_READ;
  }
  return prot;
}

static void rebind(const struct dl_phdr_info *info, const ElfW(Rela) *rel, size_t bytes, const ElfW(Sym) *symtab,
                   const char *strtab, size_t strsz) {
  long pagesz = sysconf(_SC_PAGESIZE);
  for (size_t i = 0; i < bytes / sizeof *rel; i++) {
    uint32_t type = ELF64_R_TYPE(rel[i].r_info), symi = ELF64_R_SYM(rel[i].r_info);
#if defined(__x86_64__)
    int slot_type = type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT || (type == R_X86_64_64 && rel[i].r_addend == 0);
#elif defined(__aarch64__)
    int slot_type = type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_GLOB_DAT || (type == R_AARCH64_ABS64 && rel[i].r_addend == 0);
#else
    int slot_type = 0;
#endif
    if (!slot_type || !symi) continue;
    const ElfW(Sym) *sym = &symtab[symi];
    if (sym->st_shndx != SHN_UNDEF || sym->st_name >= strsz) continue;
    const char *name = strtab + sym->st_name;
    if (strncmp(name, "cupti", 5) != 0) continue;
    void *to = binding(name);
    void **slot = (void **)(info->dlpi_addr + rel[i].r_offset);
    if (!to || *slot == to) continue;
    uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(pagesz - 1);
    int prot = page_prot(info, page, pagesz);
    if (!(prot & PROT_WRITE) && mprotect((void *)page, (size_t)pagesz, PROT_READ | PROT_WRITE) != 0) {
      gp_logf(1, "CUPTI client: cannot rebind %s in %s (mprotect failed)", name, info->dlpi_name);
      continue;
    }
    *slot = to;
    if (!(prot & PROT_WRITE)) mprotect((void *)page, (size_t)pagesz, prot);
    rebound++;
  }
}

static int scan_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size, (void)data;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  if (info->dlpi_addr == own_base || strstr(name, "libcupti") || strstr(name, "linux-vdso") || strstr(name, "libcuda.so"))
    return 0;
  for (size_t i = 0; i < nseen; i++)
    if (seen[i] == info->dlpi_addr) return 0;
  if (nseen < MAX_OBJECTS) seen[nseen++] = info->dlpi_addr;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  uintptr_t symtab = 0, strtab = 0, jmprel = 0, rela = 0;
  size_t strsz = 0, pltsz = 0, relasz = 0;
  int plt_rela = 1;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
    case DT_SYMTAB: symtab = dyn->d_un.d_ptr; break;
    case DT_STRTAB: strtab = dyn->d_un.d_ptr; break;
    case DT_STRSZ: strsz = dyn->d_un.d_val; break;
    case DT_JMPREL: jmprel = dyn->d_un.d_ptr; break;
    case DT_PLTRELSZ: pltsz = dyn->d_un.d_val; break;
    case DT_PLTREL: plt_rela = dyn->d_un.d_val == DT_RELA; break;
    case DT_RELA: rela = dyn->d_un.d_ptr; break;
    case DT_RELASZ: relasz = dyn->d_un.d_val; break;
    }
  }
  // The dynamic linker has made these addresses absolute where the section is writable;
  // elsewhere they are still relative to the object's base.
#define ABS(p) ((p) && (p) < info->dlpi_addr ? (p) + info->dlpi_addr : (p))
  symtab = ABS(symtab), strtab = ABS(strtab), jmprel = ABS(jmprel), rela = ABS(rela);
#undef ABS
  if (!symtab || !strtab) return 0;
  if (jmprel && plt_rela)
    rebind(info, (const ElfW(Rela) *)jmprel, pltsz, (const ElfW(Sym) *)symtab, (const char *)strtab, strsz);
  if (rela) rebind(info, (const ElfW(Rela) *)rela, relasz, (const ElfW(Sym) *)symtab, (const char *)strtab, strsz);
  return 0;
}

static int count_loads(struct dl_phdr_info *info, size_t size, void *data) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds) *(unsigned long long *)data = info->dlpi_adds;
  return 1;  // the first object holds the counts
}

void gp_client_rescan(void) {
  if (!cupti_lib || gp_proc.forked_child) return;
  unsigned long long loads = 0;
  dl_iterate_phdr(count_loads, &loads);
  if (loads && loads == __atomic_load_n(&loads_seen, __ATOMIC_RELAXED)) return;
  pthread_mutex_lock(&scan_mu);
  uint64_t before = rebound;
  __atomic_store_n(&loads_seen, loads, __ATOMIC_RELAXED);
  dl_iterate_phdr(scan_object, NULL);
  if (rebound != before)
    gp_logf(0, "CUPTI client: %llu cupti* imports of the program's libraries now call the agent's CUPTI",
            (unsigned long long)(rebound - before));
  pthread_mutex_unlock(&scan_mu);
}

void gp_client_init(void *lib, gp_CUpti_SubscriberHandle sub) {
  cupti_lib = lib;
  agent_sub = sub;
  real_enable_domain = (gp_CUptiResult(*)(uint32_t, gp_CUpti_SubscriberHandle, int))dlsym(lib, "cuptiEnableDomain");
  real_unsubscribe = (gp_CUptiResult(*)(gp_CUpti_SubscriberHandle))dlsym(lib, "cuptiUnsubscribe");
  real_get_callback_state =
      (gp_CUptiResult(*)(uint32_t *, gp_CUpti_SubscriberHandle, int, uint32_t))dlsym(lib, "cuptiGetCallbackState");
  Dl_info me;
  if (dladdr((void *)gp_client_init, &me)) own_base = (uintptr_t)me.dli_fbase;
  // dli_fbase is the mapping's start; dlpi_addr is its load bias. For a shared object they
  // agree (its first segment at virtual address 0).
  gp_client_rescan();
}
