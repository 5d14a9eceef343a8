/*
 * unwind.c - the calling thread's native callstack from cached unwind rules
 * (see unwind.h for the contract).
 *
 * Why not glibc's backtrace(): libgcc's unwinder finds the FDE and interprets
 * the CFA program of every frame on every call, under a lock; 24 frames of
 * libtorch cost ~20 µs, per kernel launch. What a frame needs from all that
 * is tiny and depends only on its return address, so it is derived once per
 * address and cached, the way the OpenTelemetry eBPF profiler's "stack
 * deltas" work (there they are extracted ahead of time; here lazily, on the
 * first walk that meets an address).
 *
 * A rule, for the code at one return address:
 *   CFA = rsp + off or rbp + off   (the caller's rsp once this frame returns)
 *   return address at CFA - 8      (x86-64 SysV; anything else is unsupported)
 *   caller's rbp: unchanged, saved at CFA + off, or lost
 *   or a reason to stop: no FDE / no object (then a frame-pointer step is
 *   tried), an unsupported rule, a signal frame, the outermost frame.
 *
 * The cache is an open-addressed table of (pc, rule) slots, never evicted.
 * Readers take no lock: a writer claims an empty slot with a CAS, fills in
 * the rule, then publishes the pc with release order, so a reader that sees
 * the pc sees the rule. A miss derives the rule on the calling thread:
 * _dl_find_object (or dl_iterate_phdr before glibc 2.35) gives the object
 * and its .eh_frame_hdr, whose sorted table gives the FDE; its CIE and FDE
 * programs run up to the address. Nothing allocates. When the table is
 * full, rules are derived without being kept (slower, still correct).
 *
 * A rule describes the code that was at an address when it was derived: if
 * a library is unloaded and other code is loaded at the same place, its old
 * rules may cut or misplace later stacks through that place, never make a
 * read outside the thread's stack.
 */
#define _GNU_SOURCE
#include "unwind.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

// ---- rules and their cache ----

enum {
  RULE_CFA_RBP = 1 << 0,      // CFA = rbp + cfa_off (else rsp + cfa_off)
  RULE_RBP_SAVED = 1 << 1,    // the caller's rbp is at CFA + rbp_off (else unchanged)
  RULE_RBP_LOST = 1 << 2,     // the caller's rbp cannot be recovered
  RULE_NO_FDE = 1 << 3,       // in a loaded object that has no FDE for it
  RULE_NO_OBJECT = 1 << 4,    // in no loaded object (JIT code, garbage)
  RULE_UNSUPPORTED = 1 << 5,  // CFI this unwinder does not model, or broken
  RULE_SIGNAL = 1 << 6,       // a signal trampoline's frame
  RULE_OUTERMOST = 1 << 7,    // the return address is undefined: the thread's first frame
};
enum { RULE_STOP = RULE_UNSUPPORTED | RULE_SIGNAL | RULE_OUTERMOST };

typedef struct {
  int32_t cfa_off;
  int16_t rbp_off;
  uint16_t flags;
} rule;

enum { CACHE_BITS = 15, CACHE_SLOTS = 1 << CACHE_BITS, CACHE_PROBES = 16 };
// A slot's pc while its writer fills in the rule. No lookup uses it: walks
// stop at return addresses in the first page.
#define SLOT_CLAIMED 1
enum { FIRST_VALID_PC = 4096 };

static struct {
  _Atomic uint64_t pc;
  rule r;
} cache[CACHE_SLOTS];

static inline uint64_t slot_of(uint64_t pc) { return (pc * 0x9e3779b97f4a7c15ULL) >> (64 - CACHE_BITS); }

static void cache_put(uint64_t pc, rule r) {
  for (uint64_t i = slot_of(pc), n = 0; n < CACHE_PROBES; i++, n++) {
    typeof(&cache[0]) s = &cache[i & (CACHE_SLOTS - 1)];
    uint64_t k = atomic_load_explicit(&s->pc, memory_order_acquire);
    if (k == pc) return;  // another thread derived it too
    if (k != 0) continue;
    if (!atomic_compare_exchange_strong_explicit(&s->pc, &k, SLOT_CLAIMED, memory_order_acquire,
                                                 memory_order_acquire)) {
      if (k == pc) return;
      continue;
    }
    s->r = r;
    atomic_store_explicit(&s->pc, pc, memory_order_release);
    return;
  }
}

void gp_unwind_forget(void) { memset(cache, 0, sizeof cache); }

static rule derive_rule(uint64_t ra);

static __attribute__((noinline)) rule rule_miss(uint64_t pc) {
  rule r = derive_rule(pc);
  cache_put(pc, r);
  return r;
}

static inline rule rule_of(uint64_t pc) {
  for (uint64_t i = slot_of(pc), n = 0; n < CACHE_PROBES; i++, n++) {
    typeof(&cache[0]) s = &cache[i & (CACHE_SLOTS - 1)];
    uint64_t k = atomic_load_explicit(&s->pc, memory_order_acquire);
    if (k == pc) return s->r;
    if (k == 0) break;
  }
  return rule_miss(pc);
}

// ---- loaded objects ----

typedef struct {
  uint64_t start, end;  // the object's whole mapping
  const uint8_t *hdr;   // its .eh_frame_hdr (PT_GNU_EH_FRAME), NULL when none
} object;

static int (*dl_find_object_fn)(void *, struct dl_find_object *);

void gp_unwind_init(void) {
  dl_find_object_fn = (int (*)(void *, struct dl_find_object *))dlsym(RTLD_DEFAULT, "_dl_find_object");
}

struct phdr_search {
  uint64_t pc;
  object *o;
  int found;
};

static int phdr_visit(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct phdr_search *s = arg;
  uint64_t lo = UINT64_MAX, hi = 0;
  const uint8_t *hdr = NULL;
  int holds = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uint64_t at = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD) {
      if (at < lo) lo = at;
      if (at + ph->p_memsz > hi) hi = at + ph->p_memsz;
      if (s->pc >= at && s->pc - at < ph->p_memsz) holds = 1;
    } else if (ph->p_type == PT_GNU_EH_FRAME) {
      hdr = (const uint8_t *)(uintptr_t)at;
    }
  }
  if (!holds) return 0;
  *s->o = (object){lo, hi, hdr};
  s->found = 1;
  return 1;
}

static int find_object(uint64_t pc, object *o) {
  if (dl_find_object_fn) {
    struct dl_find_object fo;
    if (dl_find_object_fn((void *)(uintptr_t)pc, &fo) != 0) return 0;
    *o = (object){(uintptr_t)fo.dlfo_map_start, (uintptr_t)fo.dlfo_map_end, fo.dlfo_eh_frame};
    return 1;
  }
  // Older glibc: walks every object's program headers under the loader's
  // lock, which only a miss pays.
  struct phdr_search s = {pc, o, 0};
  dl_iterate_phdr(phdr_visit, &s);
  return s.found;
}

int gp_object_range(uint64_t pc, uint64_t *start, uint64_t *end) {
  object o;
  if (!find_object(pc, &o)) return 0;
  *start = o.start;
  *end = o.end;
  return 1;
}

// ---- reading CFI ----
//
// Every read goes through a cursor that stays inside one CIE, FDE or the
// object's mapping, so a damaged .eh_frame yields "unsupported", not a
// fault.

typedef struct {
  const uint8_t *p, *end;
  int bad;
} cursor;

static uint64_t take(cursor *c, size_t n) {
  if (c->bad || (size_t)(c->end - c->p) < n) {
    c->bad = 1;
    return 0;
  }
  uint64_t v = 0;
  memcpy(&v, c->p, n);  // little-endian
  c->p += n;
  return v;
}

static uint64_t uleb(cursor *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    uint8_t b = (uint8_t)take(c, 1);
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  c->bad = 1;
  return 0;
}

static int64_t sleb(cursor *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    uint8_t b = (uint8_t)take(c, 1);
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      if (shift + 7 < 64 && (b & 0x40)) v |= ~0ULL << (shift + 7);
      return (int64_t)v;
    }
  }
  c->bad = 1;
  return 0;
}

static void skip(cursor *c, uint64_t n) {
  if (c->bad || (uint64_t)(c->end - c->p) < n)
    c->bad = 1;
  else
    c->p += n;
}

// DW_EH_PE_* pointer encodings.
enum {
  PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03, PE_UDATA8 = 0x04,
  PE_SLEB128 = 0x09, PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
  PE_PCREL = 0x10, PE_DATAREL = 0x30, PE_INDIRECT = 0x80, PE_OMIT = 0xff,
};

// encoded reads a pointer in encoding enc; datarel is the base of
// PE_DATAREL values, 0 where that encoding is not expected.
static uint64_t encoded(cursor *c, uint8_t enc, uint64_t datarel) {
  uint64_t at = (uintptr_t)c->p, v;
  switch (enc & 0x0f) {
  case PE_ABSPTR:
  case PE_UDATA8:
  case PE_SDATA8: v = take(c, 8); break;
  case PE_ULEB128: v = uleb(c); break;
  case PE_UDATA2: v = take(c, 2); break;
  case PE_UDATA4: v = take(c, 4); break;
  case PE_SLEB128: v = (uint64_t)sleb(c); break;
  case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)take(c, 2); break;
  case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)take(c, 4); break;
  default: c->bad = 1; return 0;
  }
  switch (enc & 0x70) {
  case 0: return v;
  case PE_PCREL: return v + at;
  case PE_DATAREL:
    if (datarel) return v + datarel;
    break;
  }
  c->bad = 1;
  return 0;
}

static int inside(const object *o, const uint8_t *p, uint64_t n) {
  uint64_t a = (uintptr_t)p;
  return a >= o->start && a <= o->end && o->end - a >= n;
}

// fde_for finds, in the .eh_frame_hdr search table, the FDE of the last
// function that starts at or before pc (it may still end before pc).
static const uint8_t *fde_for(const object *o, uint64_t pc) {
  const uint8_t *h = o->hdr;
  // The table's encoding is what every linker writes; entries of a fixed
  // size are what makes a binary search possible.
  if (!h || !inside(o, h, 4) || h[0] != 1 || h[3] != (PE_DATAREL | PE_SDATA4)) return NULL;
  cursor c = {h + 4, (const uint8_t *)(uintptr_t)o->end, 0};
  encoded(&c, h[1], (uintptr_t)h);  // .eh_frame's address: the table points into it directly
  uint64_t count = h[2] == PE_OMIT ? 0 : encoded(&c, h[2], (uintptr_t)h);
  if (c.bad || count == 0 || count > (uint64_t)(c.end - c.p) / 8) return NULL;
  const uint8_t *table = c.p;
  uint64_t lo = 0, hi = count;
  int32_t v;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    memcpy(&v, table + mid * 8, 4);
    if ((uint64_t)(uintptr_t)h + (uint64_t)(int64_t)v <= pc)
      lo = mid;
    else
      hi = mid;
  }
  memcpy(&v, table + lo * 8, 4);
  if ((uint64_t)(uintptr_t)h + (uint64_t)(int64_t)v > pc) return NULL;
  memcpy(&v, table + lo * 8 + 4, 4);
  return (const uint8_t *)((uintptr_t)h + (uint64_t)(int64_t)v);
}

// entry opens the CIE or FDE at p: c covers what follows its length field.
static int entry(const object *o, const uint8_t *p, cursor *c) {
  if (!inside(o, p, 4)) return 0;
  cursor h = {p, (const uint8_t *)(uintptr_t)o->end, 0};
  uint64_t len = take(&h, 4);
  if (len == 0xffffffff) len = take(&h, 8);
  if (h.bad || len == 0 || len > (uint64_t)(h.end - h.p)) return 0;
  *c = (cursor){h.p, h.p + len, 0};
  return 1;
}

typedef struct {
  uint64_t code_align;
  int64_t data_align;
  uint8_t fde_enc;  // how the FDEs of this CIE encode addresses ('R')
  int has_aug_data, signal;
  cursor insns;     // initial instructions
} cie;

enum { DWARF_RBP = 6, DWARF_RSP = 7, DWARF_RA = 16 };

static int parse_cie(const object *o, const uint8_t *p, cie *ci) {
  cursor c;
  if (!entry(o, p, &c) || take(&c, 4) != 0) return 0;  // a CIE's id is 0 in .eh_frame
  uint64_t version = take(&c, 1);
  if (version != 1 && version != 3 && version != 4) return 0;
  const char *aug = (const char *)c.p;
  size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
  skip(&c, aug_len + 1);
  if (version == 4 && (take(&c, 1) != 8 || take(&c, 1) != 0)) return 0;  // address and segment sizes
  ci->code_align = uleb(&c);
  ci->data_align = sleb(&c);
  if ((version == 1 ? take(&c, 1) : uleb(&c)) != DWARF_RA) return 0;
  ci->fde_enc = PE_ABSPTR;
  ci->signal = memchr(aug, 'S', aug_len) != NULL;
  ci->has_aug_data = aug[0] == 'z';
  if (ci->has_aug_data) {
    uint64_t n = uleb(&c);
    cursor data = {c.p, c.p, 0};
    skip(&c, n);
    data.end = c.p;
    for (size_t i = 1; i < aug_len && !data.bad; i++) {
      if (aug[i] == 'R') {
        ci->fde_enc = (uint8_t)take(&data, 1);
      } else if (aug[i] == 'P') {
        uint8_t enc = (uint8_t)take(&data, 1);
        encoded(&data, (uint8_t)(enc & ~PE_INDIRECT), 0);  // the personality routine: not ours to follow
      } else if (aug[i] == 'L') {
        take(&data, 1);
      } else if (aug[i] != 'S') {
        break;  // unknown: its data, if any, ends the known part
      }
    }
    if (data.bad) return 0;
  } else if (aug_len != 0) {
    return 0;  // without 'z' an unknown augmentation cannot be skipped
  }
  if (c.bad || ci->code_align == 0) return 0;
  ci->insns = c;
  return 1;
}

// ---- running CFA programs ----

// How a tracked register (rbp, the return address) is recovered.
enum { REG_SAME, REG_AT_CFA, REG_UNDEFINED, REG_OTHER };

typedef struct {
  int64_t cfa_reg;  // DWARF register number; -1 after an expression
  int64_t cfa_off;
  uint8_t rbp, ra;
  int64_t rbp_off, ra_off;
} row;

static void set_rule(row *r, uint64_t reg, uint8_t how, int64_t off) {
  if (reg == DWARF_RBP) {
    r->rbp = how;
    r->rbp_off = off;
  } else if (reg == DWARF_RA) {
    r->ra = how;
    r->ra_off = off;
  }
}

static void restore_rule(row *r, const row *initial, uint64_t reg) {
  if (reg == DWARF_RBP) {
    r->rbp = initial->rbp;
    r->rbp_off = initial->rbp_off;
  } else if (reg == DWARF_RA) {
    r->ra = initial->ra;
    r->ra_off = initial->ra_off;
  }
}

// DW_CFA_* opcodes without an operand in the low bits.
enum {
  CFA_nop = 0x00, CFA_set_loc = 0x01, CFA_advance_loc1 = 0x02, CFA_advance_loc2 = 0x03,
  CFA_advance_loc4 = 0x04, CFA_offset_extended = 0x05, CFA_restore_extended = 0x06,
  CFA_undefined = 0x07, CFA_same_value = 0x08, CFA_register = 0x09, CFA_remember_state = 0x0a,
  CFA_restore_state = 0x0b, CFA_def_cfa = 0x0c, CFA_def_cfa_register = 0x0d,
  CFA_def_cfa_offset = 0x0e, CFA_def_cfa_expression = 0x0f, CFA_expression = 0x10,
  CFA_offset_extended_sf = 0x11, CFA_def_cfa_sf = 0x12, CFA_def_cfa_offset_sf = 0x13,
  CFA_val_offset = 0x14, CFA_val_offset_sf = 0x15, CFA_val_expression = 0x16,
  CFA_GNU_args_size = 0x2e, CFA_GNU_negative_offset_extended = 0x2f,
};
enum { REMEMBER_DEPTH = 8 };

// run_cfa executes a CFA program on r while loc <= pc: the rows that begin
// at or before pc apply to it. It returns 0 on an opcode it does not know
// or a program it cannot read.
static int run_cfa(cursor c, const cie *ci, row *r, const row *initial, uint64_t loc, uint64_t pc) {
  row remembered[REMEMBER_DEPTH];
  int depth = 0;
  while (c.p < c.end && loc <= pc && !c.bad) {
    uint8_t op = (uint8_t)take(&c, 1);
    uint64_t reg;
    switch (op >> 6) {
    case 1: loc += (op & 0x3f) * ci->code_align; continue;                          // advance_loc
    case 2: set_rule(r, op & 0x3f, REG_AT_CFA, (int64_t)uleb(&c) * ci->data_align); continue;  // offset
    case 3: restore_rule(r, initial, op & 0x3f); continue;                          // restore
    }
    switch (op) {
    case CFA_nop: break;
    case CFA_set_loc: loc = encoded(&c, ci->fde_enc, 0); break;
    case CFA_advance_loc1: loc += take(&c, 1) * ci->code_align; break;
    case CFA_advance_loc2: loc += take(&c, 2) * ci->code_align; break;
    case CFA_advance_loc4: loc += take(&c, 4) * ci->code_align; break;
    case CFA_offset_extended:
      reg = uleb(&c);
      set_rule(r, reg, REG_AT_CFA, (int64_t)uleb(&c) * ci->data_align);
      break;
    case CFA_offset_extended_sf:
      reg = uleb(&c);
      set_rule(r, reg, REG_AT_CFA, sleb(&c) * ci->data_align);
      break;
    case CFA_GNU_negative_offset_extended:
      reg = uleb(&c);
      set_rule(r, reg, REG_AT_CFA, -(int64_t)uleb(&c) * ci->data_align);
      break;
    case CFA_restore_extended: restore_rule(r, initial, uleb(&c)); break;
    case CFA_undefined: set_rule(r, uleb(&c), REG_UNDEFINED, 0); break;
    case CFA_same_value: set_rule(r, uleb(&c), REG_SAME, 0); break;
    case CFA_register:  // in another register, which is not tracked
      reg = uleb(&c);
      uleb(&c);
      set_rule(r, reg, REG_OTHER, 0);
      break;
    case CFA_val_offset:
      reg = uleb(&c);
      uleb(&c);
      set_rule(r, reg, REG_OTHER, 0);
      break;
    case CFA_val_offset_sf:
      reg = uleb(&c);
      sleb(&c);
      set_rule(r, reg, REG_OTHER, 0);
      break;
    case CFA_expression:
    case CFA_val_expression:
      reg = uleb(&c);
      skip(&c, uleb(&c));
      set_rule(r, reg, REG_OTHER, 0);
      break;
    case CFA_remember_state:
      if (depth == REMEMBER_DEPTH) return 0;
      remembered[depth++] = *r;
      break;
    case CFA_restore_state:
      if (depth == 0) return 0;
      *r = remembered[--depth];
      break;
    case CFA_def_cfa:
      r->cfa_reg = (int64_t)uleb(&c);
      r->cfa_off = (int64_t)uleb(&c);
      break;
    case CFA_def_cfa_sf:
      r->cfa_reg = (int64_t)uleb(&c);
      r->cfa_off = sleb(&c) * ci->data_align;
      break;
    case CFA_def_cfa_register: r->cfa_reg = (int64_t)uleb(&c); break;
    case CFA_def_cfa_offset: r->cfa_off = (int64_t)uleb(&c); break;
    case CFA_def_cfa_offset_sf: r->cfa_off = sleb(&c) * ci->data_align; break;
    case CFA_def_cfa_expression:
      skip(&c, uleb(&c));
      r->cfa_reg = -1;
      break;
    case CFA_GNU_args_size: uleb(&c); break;
    default: return 0;
    }
  }
  return !c.bad;
}

static rule rule_from_row(const row *r) {
  rule out = {0, 0, 0};
  if (r->ra == REG_UNDEFINED) {
    out.flags = RULE_OUTERMOST;
    return out;
  }
  if (r->ra != REG_AT_CFA || r->ra_off != -8 || (r->cfa_reg != DWARF_RSP && r->cfa_reg != DWARF_RBP) ||
      r->cfa_off != (int32_t)r->cfa_off) {
    out.flags = RULE_UNSUPPORTED;
    return out;
  }
  out.cfa_off = (int32_t)r->cfa_off;
  if (r->cfa_reg == DWARF_RBP) out.flags |= RULE_CFA_RBP;
  if (r->rbp == REG_AT_CFA && r->rbp_off == (int16_t)r->rbp_off) {
    out.flags |= RULE_RBP_SAVED;
    out.rbp_off = (int16_t)r->rbp_off;
  } else if (r->rbp != REG_SAME) {
    out.flags |= RULE_RBP_LOST;
  }
  return out;
}

// derive_rule computes the rule of the frame whose return address is ra.
// The call instruction ends at ra, and a call to a noreturn function may
// be the last instruction of its function, so the code looked up is ra-1.
static rule derive_rule(uint64_t ra) {
  const rule no_object = {0, 0, RULE_NO_OBJECT}, no_fde = {0, 0, RULE_NO_FDE},
             unsupported = {0, 0, RULE_UNSUPPORTED}, signal = {0, 0, RULE_SIGNAL};
  uint64_t pc = ra - 1;
  object o;
  if (!find_object(pc, &o)) return no_object;
  const uint8_t *fde = fde_for(&o, pc);
  cursor c;
  if (!fde || !entry(&o, fde, &c)) return no_fde;
  const uint8_t *id_at = c.p;
  uint64_t cie_off = take(&c, 4);
  cie ci;
  if (c.bad || cie_off == 0 || !parse_cie(&o, (const uint8_t *)((uintptr_t)id_at - cie_off), &ci)) return unsupported;
  uint64_t begin = encoded(&c, ci.fde_enc, 0), range = encoded(&c, ci.fde_enc & 0x0f, 0);
  if (c.bad || pc < begin || pc - begin >= range) return no_fde;
  if (ci.signal) return signal;
  if (ci.has_aug_data) skip(&c, uleb(&c));
  row initial = {-2, 0, REG_SAME, REG_OTHER, 0, 0}, r;
  if (c.bad || !run_cfa(ci.insns, &ci, &initial, &initial, 0, UINT64_MAX)) return unsupported;
  r = initial;
  if (!run_cfa(c, &ci, &r, &initial, begin, pc)) return unsupported;
  return rule_from_row(&r);
}

// ---- walking ----

// The calling thread's stack, learned on its first walk. Initial-exec TLS,
// like internal.h's GP_TLS (the library is static-TLS; see there).
static __thread __attribute__((tls_model("initial-exec"))) struct {
  uint64_t lo, hi;
} thread_stack;

// stack_top returns the top of the calling thread's stack when sp lies in
// it, else 0. The bounds come from pthread_getattr_np once per thread (on
// the main thread it reads /proc/self/maps).
static uint64_t stack_top(uint64_t sp) {
  if (!thread_stack.hi) {
    thread_stack.lo = thread_stack.hi = 1;  // unknown: no stacks on this thread
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      void *addr;
      size_t size;
      if (pthread_attr_getstack(&a, &addr, &size) == 0) {
        thread_stack.lo = (uintptr_t)addr;
        thread_stack.hi = (uintptr_t)addr + size;
      }
      pthread_attr_destroy(&a);
    }
  }
  return sp >= thread_stack.lo && sp < thread_stack.hi ? thread_stack.hi : 0;
}

// on_stack says whether n bytes at a lie in [sp, top): the live part of
// the stack above the frame being unwound, all mapped.
static inline int on_stack(uint64_t a, uint64_t n, uint64_t sp, uint64_t top) {
  return a >= sp && a <= top - n;
}

static inline uint64_t stack_word(uint64_t a) { return *(const uint64_t *)(uintptr_t)a; }

static __thread __attribute__((tls_model("initial-exec"))) int last_stop;

int gp_unwind_stop(void) { return last_stop; }

#if defined(__x86_64__)
__attribute__((noinline)) int gp_unwind(uint64_t *pcs, int max) {
  uint64_t pc, sp, bp;
  // One asm block: no instruction of the compiler's between the three
  // reads, so the CFI row at pc describes sp and bp exactly. pc is the
  // address after the lea, looked up as pc-1 like every return address.
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
  uint64_t top = stack_top(sp);
  int n = 0, bp_known = 1, stop = GP_UNWIND_MAX;
  if (!top) {
    last_stop = GP_UNWIND_NO_STACK;
    return 0;
  }
  while (n < max) {
    rule r = rule_of(pc);
    uint64_t cfa, ra;
    if (r.flags & (RULE_NO_FDE | RULE_NO_OBJECT)) {
      // Code without CFI (JIT, Go): a frame-pointer step, when rbp points
      // at a frame of this stack whose return address is in an object.
      stop = GP_UNWIND_NO_INFO;
      if (!bp_known || !on_stack(bp, 16, sp, top)) break;
      ra = stack_word(bp + 8);
      if (ra < FIRST_VALID_PC || (rule_of(ra).flags & RULE_NO_OBJECT)) break;
      cfa = bp + 16;
      bp = stack_word(bp);
    } else {
      stop = (r.flags & RULE_OUTERMOST) ? GP_UNWIND_END : GP_UNWIND_UNSUPPORTED;
      if (r.flags & RULE_STOP) break;
      if ((r.flags & RULE_CFA_RBP) && !bp_known) break;
      cfa = ((r.flags & RULE_CFA_RBP) ? bp : sp) + (uint64_t)(int64_t)r.cfa_off;
      // Above this frame (which also makes every walk finish) and in the stack.
      stop = GP_UNWIND_CORRUPT;
      if (cfa < 8 || !on_stack(cfa - 8, 8, sp, top)) break;
      ra = stack_word(cfa - 8);
      if (r.flags & RULE_RBP_SAVED) {
        uint64_t at = cfa + (uint64_t)(int64_t)r.rbp_off;
        if (!on_stack(at, 8, sp, top)) break;
        bp = stack_word(at);
        bp_known = 1;
      } else if (r.flags & RULE_RBP_LOST) {
        bp_known = 0;
      }
    }
    // A zero return address ends some threads' first frames (no CFI says so).
    stop = ra == 0 ? GP_UNWIND_END : GP_UNWIND_CORRUPT;
    if (ra < FIRST_VALID_PC) break;
    pcs[n++] = ra;
    pc = ra;
    sp = cfa;
    stop = GP_UNWIND_MAX;
  }
  last_stop = stop;
  return n;
}
#else
// Other architectures (aarch64): the frame records the procedure-call standard chains, the
// caller's frame pointer and the return address at the frame pointer, each read checked
// against the thread's stack. The .eh_frame rules above model x86-64 only, so code built
// without frame pointers cuts the walk there (GP_UNWIND_NO_INFO).
__attribute__((noinline)) int gp_unwind(uint64_t *pcs, int max) {
  uint64_t fp = (uintptr_t)__builtin_frame_address(0), sp = fp;
  uint64_t top = stack_top(fp);
  if (!top) {
    last_stop = GP_UNWIND_NO_STACK;
    return 0;
  }
  int n = 0, stop = GP_UNWIND_MAX;
  while (n < max) {
    stop = GP_UNWIND_CORRUPT;
    if (!on_stack(fp, 16, sp, top)) break;
    uint64_t next = stack_word(fp);
    // Pointer authentication signs return addresses in their top bits: a 48-bit address space.
    uint64_t ra = stack_word(fp + 8) & ((1ULL << 48) - 1);
    stop = ra == 0 ? GP_UNWIND_END : GP_UNWIND_CORRUPT;
    if (ra < FIRST_VALID_PC) break;
    pcs[n++] = ra;
    stop = next == 0 ? GP_UNWIND_END : GP_UNWIND_NO_INFO;
    if (next <= fp) break;  // the outermost frame, or code without a frame record
    sp = fp + 16;
    fp = next;
    stop = GP_UNWIND_MAX;
  }
  last_stop = stop;
  return n;
}
#endif
