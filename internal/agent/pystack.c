/*
 * pystack.c - walk the calling thread's own CPython stack without the GIL.
 *
 * Context: the agent runs inside CUDA driver callbacks, on the thread that
 * made the CUDA call. PyTorch releases the GIL around op dispatch, so that
 * thread usually does NOT hold the GIL. We therefore cannot use any CPython
 * API that needs the GIL, allocates or touches reference counts. Instead we
 * read the interpreter's structures directly, which is sound for the
 * calling thread's own frames:
 *   - only the owning thread pushes and pops its frames, and it is busy
 *     running us, so its frame chain is frozen for the duration of the call;
 *   - every frame on the chain holds a strong reference to its code object,
 *     and a code object's name, file name and line table are immutable, so
 *     they stay alive and unchanged while the frame is live.
 * Other threads may run Python concurrently; we never look at their state.
 *
 * CPython is never linked. Every symbol is resolved with
 * dlsym(RTLD_DEFAULT, ...): on the target, python3 is statically linked and
 * exports its symbols from the executable; with a shared libpython the
 * library is in the global scope too. No Python headers are needed to
 * compile: the layouts below (and in pystack_layout.h) are hand-declared per
 * version. They were taken from the installed headers by
 * testdata/pystack/offsets.c (output at the end of this comment block) and
 * are cross-checked at run time where the interpreter lets us (type sizes
 * for all versions, _PyRuntime.debug_offsets on 3.13).
 *
 * Getting the calling thread's PyThreadState without the GIL:
 *   PyGILState_GetThisThreadState(). In 3.10-3.13 it reads one field of
 *   _PyRuntime (gilstate initialised / TSS key created) and then calls
 *   PyThread_tss_get(), i.e. pthread_getspecific(): no GIL, no lock, no
 *   allocation (checked by disassembling each version). Unlike
 *   _PyThreadState_GetCurrent()/_PyThreadState_UncheckedGet(), which return
 *   the thread that holds the GIL (3.10/3.11) or NULL once this thread has
 *   released it (3.12+), the gilstate TSS slot keeps pointing at this
 *   thread's own state while the GIL is released. Threads started by the
 *   threading module and the main thread are registered there; a thread
 *   with no Python state (e.g. a pure C pthread) gets NULL.
 *
 * Frame chain per version:
 *   3.10  tstate->frame: PyFrameObject chain via f_back; f_code, f_lasti
 *         (already in code units, -1 before the first instruction).
 *   3.11  tstate->cframe->current_frame: _PyInterpreterFrame chain via
 *         previous; f_code; prev_instr points at the code unit before the
 *         next instruction and lasti = prev_instr - _PyCode_CODE(code).
 *   3.12  same as 3.11 with a different field order, plus entry/shim frames
 *         owned by the C stack (owner == FRAME_OWNED_BY_CSTACK).
 *   3.13  tstate->current_frame (no cframe), f_executable (code object or
 *         something else, e.g. None: check the type), instr_ptr points at
 *         the current instruction and lasti = instr_ptr - _PyCode_CODE(code).
 *   3.11+ frames whose lasti is before co->_co_firsttraceable (and that are
 *   not generator frames) are "incomplete": they are being set up (copying
 *   free variables, MAKE_CELL, ...) and CPython hides them from sys._getframe
 *   and tracebacks; we skip them as well. 3.12+ C-stack frames are skipped.
 *
 * Line numbers are decoded from co_linetable by our own code (two formats:
 * 3.10's PEP 626 table and 3.11+'s location table) instead of calling
 * PyCode_Addr2Line: on 3.11 that function may read _co_linearray, a cache
 * that another thread can be building concurrently while it holds the GIL
 * (it is created lazily for tracing). co_linetable itself is immutable.
 * testdata/pystack checks our decoder against PyCode_Addr2Line for every
 * instruction of every code object the test can reach.
 *
 * Strings are copied from the canonical PEP 393 storage (latin-1, UCS-2 or
 * UCS-4 data of a ready str) and encoded to UTF-8 here; the optional utf8
 * cache of non-ASCII strings is never used (it may be NULL and filling it
 * would allocate). Both compact strings (data inline after the header: every
 * str CPython creates itself) and non-compact ones (data behind a pointer:
 * instances of str subclasses, which code.replace() accepts as names) are
 * handled.
 *
 * Known limitations:
 *   - Free-threaded (3.13t), debug/trace-refs and other ABI variants are
 *     rejected at init (the object header check fails).
 *   - Sub-interpreters: the gilstate slot holds the thread's state for the
 *     main interpreter only; frames running in a sub-interpreter on this
 *     thread are not seen. PyGILState_Check answers 1 unconditionally once
 *     sub-interpreters exist on 3.10/3.11 (CPython disables the check).
 *   - Interpreter finalisation: CPython frees other threads' states during
 *     Py_FinalizeEx. We return 0 frames once finalisation has started, but a
 *     walk that is already running when another thread starts finalising
 *     could read freed memory. Daemon threads in CUDA calls at exit are the
 *     only realistic case.
 *   - The experimental 3.13 JIT (off by default) may leave instr_ptr stale
 *     for frames executing JIT code, giving a wrong line (not a crash).
 *   - Layouts are those of 3.10.13, 3.11.7, 3.12.1 and 3.13.0. CPython does
 *     not promise these internal layouts across patch releases; the run-time
 *     cross-checks below refuse a version whose code/str sizes or 3.13 debug
 *     offsets disagree, but changes they do not cover would go unnoticed.
 *   - A gp_pyframe must be resolved while its frame is live: once the frame
 *     returns, its code object may be freed and the pointer reused.
 *
 * offsets.c output (x86-64, the versions installed in the build image):
 *
 *   field                            3.10.13 3.11.7 3.12.1 3.13.0
 *   PyObject.ob_type                       8      8      8      8
 *   PyVarObject.ob_size                   16     16     16     16
 *   PyTypeObject.tp_basicsize             32     32     32     32
 *   PyTypeObject.tp_itemsize              40     40     40     40
 *   PyTypeObject.tp_flags                168    168    168    168
 *   Py_TPFLAGS_UNICODE_SUBCLASS        1<<28  1<<28  1<<28  1<<28
 *   PyThreadState.frame                   24      -      -      -
 *   PyThreadState.cframe                   -     56     56      -
 *   _PyCFrame.current_frame                -      8      0      -
 *   PyThreadState.current_frame            -      -      -     72
 *   PyFrameObject.f_back                  24      -      -      -
 *   PyFrameObject.f_code                  32      -      -      -
 *   PyFrameObject.f_lasti                 96      -      -      -
 *   _PyInterpreterFrame.f_code             -     32      0      -
 *   _PyInterpreterFrame.f_executable       -      -      -      0
 *   _PyInterpreterFrame.prev_instr         -     56     56      -
 *   _PyInterpreterFrame.instr_ptr          -      -      -     56
 *   _PyInterpreterFrame.previous           -     48      8      8
 *   _PyInterpreterFrame.owner              -     69     70     70
 *   FRAME_OWNED_BY_GENERATOR               -      1      1      1
 *   FRAME_OWNED_BY_CSTACK                  -      -      3      3
 *   sizeof(_Py_CODEUNIT)                   -      2      2      2
 *   PyCodeObject.co_filename             104    112    112    112
 *   PyCodeObject.co_name                 112    120    120    120
 *   PyCodeObject.co_qualname               -    128    128    128
 *   PyCodeObject.co_firstlineno           40     72     68     68
 *   PyCodeObject.co_linetable            120    136    136    136
 *   PyCodeObject._co_firsttraceable        -    168    176    184
 *   PyCodeObject.co_code_adaptive          -    184    192    200
 *   PyCodeObject.co_code                  48      -      -      -
 *   sizeof(PyCodeObject)                 176      -      -      -
 *   PyBytesObject.ob_sval                 32     32     32     32
 *   PyASCIIObject.length                  16     16     16     16
 *   PyASCIIObject.state                   32     32     32     32
 *   sizeof(PyASCIIObject)                 48     48     40     40
 *   PyCompactUnicodeObject.utf8_length    48     48     40     40
 *   PyCompactUnicodeObject.utf8           56     56     48     48
 *   sizeof(PyCompactUnicodeObject)        72     72     56     56
 *   PyUnicodeObject.data                  72     72     56     56
 *   sizeof(PyUnicodeObject)               80     80     64     64
 *   state.kind bit (3 bits)                2      2      2      2
 *   state.compact bit                      5      5      5      5
 *   state.ascii bit                        6      6      6      6
 *   state.ready bit                        7      7      -      -
 *   3.13 only: _PyRuntimeState.debug_offsets 0; inside _Py_DebugOffsets:
 *   version 8, free_threaded 16, thread_state.current_frame 184,
 *   interpreter_frame.previous 232, .executable 240, .instr_ptr 248,
 *   .owner 264, code_object.filename 280, .qualname 296, .linetable 304,
 *   .firstlineno 312, .co_code_adaptive 344, pyobject.ob_type 360.
 *   (3.11+: tp_basicsize of code == offsetof(co_code_adaptive), itemsize 2.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_DEFAULT */
#endif
#include "pystack.h"
#include "pystack_layout.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* ---------------------------------------------------------------------- */
/* Layouts                                                                 */
/* ---------------------------------------------------------------------- */

static const struct gp_py_layout L310 = {
    .minor = 10, .ts_frame = 24, .has_cframe = 0, .cf_current = 0,
    .fr_code = 32, .fr_back = 24, .fr_instr = 96, .fr_owner = 0,
    .has_cstack_owner = 0,
    .co_filename = 104, .co_funcname = 112, .co_firstlineno = 40,
    .co_linetable = 120, .co_firsttraceable = 0, .co_code_adaptive = 0,
    .code_basicsize = 176, .code_itemsize = 0,
    .str_ascii_size = 48, .str_compact_size = 72, .str_data = 72,
    .str_basicsize = 80, .has_ready_bit = 1,
};

static const struct gp_py_layout L311 = {
    .minor = 11, .ts_frame = 56, .has_cframe = 1, .cf_current = 8,
    .fr_code = 32, .fr_back = 48, .fr_instr = 56, .fr_owner = 69,
    .has_cstack_owner = 0,
    .co_filename = 112, .co_funcname = 128, .co_firstlineno = 72,
    .co_linetable = 136, .co_firsttraceable = 168, .co_code_adaptive = 184,
    .code_basicsize = 184, .code_itemsize = 2,
    .str_ascii_size = 48, .str_compact_size = 72, .str_data = 72,
    .str_basicsize = 80, .has_ready_bit = 1,
};

static const struct gp_py_layout L312 = {
    .minor = 12, .ts_frame = 56, .has_cframe = 1, .cf_current = 0,
    .fr_code = 0, .fr_back = 8, .fr_instr = 56, .fr_owner = 70,
    .has_cstack_owner = 1,
    .co_filename = 112, .co_funcname = 128, .co_firstlineno = 68,
    .co_linetable = 136, .co_firsttraceable = 176, .co_code_adaptive = 192,
    .code_basicsize = 192, .code_itemsize = 2,
    .str_ascii_size = 40, .str_compact_size = 56, .str_data = 56,
    .str_basicsize = 64, .has_ready_bit = 0,
};

static const struct gp_py_layout L313 = {
    .minor = 13, .ts_frame = 72, .has_cframe = 0, .cf_current = 0,
    .fr_code = 0, .fr_back = 8, .fr_instr = 56, .fr_owner = 70,
    .has_cstack_owner = 1,
    .co_filename = 112, .co_funcname = 128, .co_firstlineno = 68,
    .co_linetable = 136, .co_firsttraceable = 184, .co_code_adaptive = 200,
    .code_basicsize = 200, .code_itemsize = 2,
    .str_ascii_size = 40, .str_compact_size = 56, .str_data = 56,
    .str_basicsize = 64, .has_ready_bit = 0,
};

/* ---------------------------------------------------------------------- */
/* Global state                                                            */
/* ---------------------------------------------------------------------- */

typedef void *(*tstate_fn)(void);
typedef int (*int_fn)(void);
typedef const char *(*str_fn)(void);

enum { ST_UNINIT = 0, ST_OK = 1, ST_NONE = 2 };

static struct {
    const struct gp_py_layout *L;
    tstate_fn this_tstate;     /* PyGILState_GetThisThreadState */
    int_fn gil_check;          /* PyGILState_Check */
    int_fn is_finalizing;      /* _Py_IsFinalizing / Py_IsFinalizing, may be NULL */
    const void *code_type;     /* &PyCode_Type */
    const void *frame_type;    /* &PyFrame_Type (3.10 frame objects) */
    const void *bytes_type;    /* &PyBytes_Type */
    const void *unicode_type;  /* &PyUnicode_Type */
} g;

/* Written once by init_once(), then only read. */
static int g_state = ST_UNINIT;     /* accessed atomically */
static char g_desc[96] = "not initialized";
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Acquire pairs with the release store at the end of init_once(), so a thread
 * that sees ST_OK also sees the fully written g. */
static inline int ready(void)
{
    return __atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == ST_OK;
}

/* ---------------------------------------------------------------------- */
/* Initialisation                                                          */
/* ---------------------------------------------------------------------- */

/* dlsym returns an object pointer; converting it to a function pointer
 * through memcpy is the POSIX-sanctioned way that avoids -pedantic noise. */
static void *sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

#define SYM_FN(dst, name)                   \
    do {                                    \
        void *p_ = sym(name);               \
        memcpy(&(dst), &p_, sizeof(dst));   \
    } while (0)

static const char *level_suffix(unsigned level)
{
    switch (level) {
    case 0xA: return "a";
    case 0xB: return "b";
    case 0xC: return "rc";
    default: return "";
    }
}

/* 3.13 publishes its own layout in _PyRuntime.debug_offsets (for debuggers
 * and profilers): DBG313 in pystack_layout.h. */
/* Returns NULL when the layouts agree, else the first mismatching entry. */
static const char *check_debug_offsets_313(const struct gp_py_layout *L)
{
    const char *rt = sym("_PyRuntime");
    if (!rt)
        return NULL; /* not exported: nothing to compare against */
    if (memcmp(rt + DBG313_COOKIE, "xdebugpy", 8) != 0)
        return "debug_offsets.cookie";
    if (((uint64_t)rd_i64(rt, DBG313_VERSION) >> 16) != 0x030D)
        return "debug_offsets.version";
    if (rd_i64(rt, DBG313_FREE_THREADED) != 0)
        return "free_threaded";
    for (size_t i = 0; i < sizeof DBG313 / sizeof DBG313[0]; i++) {
        size_t want;
        memcpy(&want, (const char *)L + DBG313[i].field, sizeof want);
        if ((uint64_t)rd_i64(rt, DBG313[i].pos) != (uint64_t)want)
            return DBG313[i].name;
    }
    if (rd_i64(rt, DBG313_OB_TYPE) != OB_TYPE)
        return "pyobject.ob_type";
    return NULL;
}

static void init_once(void)
{
    unsigned major = 0, minor = 0, micro = 0, level = 0xF, serial = 0;
    str_fn get_version;
    SYM_FN(get_version, "Py_GetVersion");
    const char *vstr = get_version ? get_version() : NULL;

    /* Py_Version (3.11+) is a constant; Py_GetVersion() formats into a static
     * buffer (no allocation) and starts with "X.Y.Z". */
    const uint32_t *hexp = sym("Py_Version");
    if (hexp) {
        uint32_t hex = *hexp;
        major = hex >> 24;
        minor = (hex >> 16) & 0xFF;
        micro = (hex >> 8) & 0xFF;
        level = (hex >> 4) & 0xF;
        serial = hex & 0xF;
    } else if (vstr) {
        if (sscanf(vstr, "%u.%u.%u", &major, &minor, &micro) < 2)
            major = 0;
    }
    if (major == 0) {
        snprintf(g_desc, sizeof g_desc, "no python");
        goto fail;
    }
    char ver[32];
    if (level != 0xF)
        snprintf(ver, sizeof ver, "%u.%u.%u%s%u", major, minor, micro, level_suffix(level), serial);
    else
        snprintf(ver, sizeof ver, "%u.%u.%u", major, minor, micro);

    const struct gp_py_layout *L = NULL;
    if (major == 3) {
        switch (minor) {
        case 10: L = &L310; break;
        case 11: L = &L311; break;
        case 12: L = &L312; break;
        case 13: L = &L313; break;
        default: break;
        }
    }
    if (!L) {
        snprintf(g_desc, sizeof g_desc, "CPython %s (unsupported)", ver);
        goto fail;
    }
    if (vstr && strstr(vstr, "free-threading")) {
        snprintf(g_desc, sizeof g_desc, "CPython %s (free-threaded build unsupported)", ver);
        goto fail;
    }

    SYM_FN(g.this_tstate, "PyGILState_GetThisThreadState");
    SYM_FN(g.gil_check, "PyGILState_Check");
    SYM_FN(g.is_finalizing, minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing");
    g.code_type = sym("PyCode_Type");
    g.frame_type = sym("PyFrame_Type");
    g.bytes_type = sym("PyBytes_Type");
    g.unicode_type = sym("PyUnicode_Type");
    const void *type_type = sym("PyType_Type");
    if (!g.this_tstate || !g.gil_check || !g.code_type || !g.frame_type ||
        !g.bytes_type || !g.unicode_type || !type_type) {
        snprintf(g_desc, sizeof g_desc, "CPython %s (missing symbols)", ver);
        goto fail;
    }

    /* ABI sanity: a standard PyObject header puts ob_type at offset 8; in
     * free-threaded and Py_TRACE_REFS builds it sits elsewhere and this
     * reads something that is not &PyType_Type. The type sizes then catch a
     * layout that moved within a minor version. */
    const char *bad = NULL;
    if (type_of(g.code_type) != type_type || type_of(g.unicode_type) != type_type)
        bad = "object header";
    else if ((size_t)rd_i64(g.code_type, TP_BASICSIZE) != L->code_basicsize ||
             (size_t)rd_i64(g.code_type, TP_ITEMSIZE) != L->code_itemsize)
        bad = "code object size";
    else if ((size_t)rd_i64(g.unicode_type, TP_BASICSIZE) != L->str_basicsize)
        bad = "str object size";
    else if ((size_t)rd_i64(g.bytes_type, TP_BASICSIZE) != BYTES_SVAL + 1)
        bad = "bytes object size";
    else if (minor == 13)
        bad = check_debug_offsets_313(L);
    if (bad) {
        snprintf(g_desc, sizeof g_desc, "CPython %s (layout mismatch: %s)", ver, bad);
        goto fail;
    }

    g.L = L;
    snprintf(g_desc, sizeof g_desc, "CPython %s", ver);
    __atomic_store_n(&g_state, ST_OK, __ATOMIC_RELEASE);
    return;
fail:
    __atomic_store_n(&g_state, ST_NONE, __ATOMIC_RELEASE);
}

int gp_py_init(void)
{
    /* pthread_once makes concurrent first calls safe; its fast path after
     * the first call is a single load. */
    pthread_once(&g_once, init_once);
    return ready();
}

const char *gp_py_describe(void)
{
    /* g_desc is final once g_state is set; before that it says so. */
    if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == ST_UNINIT)
        return "not initialized";
    return g_desc;
}

/* ---------------------------------------------------------------------- */
/* Walking                                                                 */
/* ---------------------------------------------------------------------- */

/* Caller's thread state, or NULL (no Python state, finalising). */
static inline const void *this_tstate(void)
{
    /* After finalisation starts CPython frees other threads' states, so a
     * daemon thread must stop looking at its own. */
    if (g.is_finalizing && g.is_finalizing())
        return NULL;
    return g.this_tstate();
}

/* Bound on how many links we follow in total, including skipped frames, so a
 * corrupted chain that loops through skipped frames still terminates. In a
 * sane chain there is at most one skipped C-stack frame per real frame. */
static inline int64_t link_budget(int max)
{
    return (int64_t)max * 4 + 64;
}

/* 3.10: the PyFrameObject chain, into raw, or validated into out when raw
 * is NULL. Frames are heap objects here, so each is checked to be one (a
 * cheap read of its own header) either way; only out reads code objects. */
static int walk_310(const void *ts, gp_pyraw *raw, gp_pyframe *out, int max)
{
    const struct gp_py_layout *L = &L310;
    const void *f = rd_ptr(ts, L->ts_frame);
    int n = 0;
    int64_t budget = link_budget(max);
    while (f && n < max && budget-- > 0) {
        /* Frames are real objects here: stop at anything that is not one. */
        if (type_of(f) != g.frame_type)
            break;
        const void *code = rd_ptr(f, L->fr_code);
        int32_t lasti = rd_i32(f, L->fr_instr);
        if (raw) {
            raw[n].code = code;
            raw[n].instr = (uintptr_t)(intptr_t)lasti;
            raw[n].owner = 0;
            n++;
        } else if (code && type_of(code) == g.code_type) {
            out[n].code = code;
            out[n].lasti = lasti;
            n++;
        }
        const void *next = rd_ptr(f, L->fr_back);
        if (next == f)
            break;
        f = next;
    }
    return n;
}

/* 3.11+: one frame's code pointer and instruction index as gp_py_walk
 * reports it; 0 for a frame it skips. */
static inline __attribute__((always_inline)) int
frame_311plus(const struct gp_py_layout *L, const void *code, uintptr_t ip, uint8_t owner, gp_pyframe *out)
{
    /* 3.13 f_executable may be None (or anything): only code objects. */
    if (!code || type_of(code) != g.code_type)
        return 0;
    /* Index of the instruction in code units. Integer arithmetic: the
     * pointers are only compared, never dereferenced. */
    uintptr_t start = (uintptr_t)code + L->co_code_adaptive;
    int64_t idx = (int64_t)(ip - start) / 2;
    /* Incomplete frame (still being set up): CPython hides it too. */
    if (owner != OWNED_BY_GENERATOR && idx < rd_i32(code, L->co_firsttraceable))
        return 0;
    /* Keep lasti meaningful even for an odd pointer: -1 means "unknown
     * instruction", which resolves to co_firstlineno. */
    if (idx < -1 || idx >= rd_i64(code, OB_SIZE))
        idx = -1;
    out->code = code;
    out->lasti = (int32_t)idx;
    return 1;
}

/* 3.11+: the _PyInterpreterFrame chain, into raw (frames only: they live in
 * the thread's own data stack, which the interpreter just used) or, when raw
 * is NULL, validated into out. Always inlined with a constant layout and
 * destination, so the offsets fold into the loads and one branch is left. */
static inline __attribute__((always_inline)) int
walk_311plus(const struct gp_py_layout *L, const void *ts, gp_pyraw *raw, gp_pyframe *out, int max)
{
    const void *f = rd_ptr(ts, L->ts_frame);
    if (L->has_cframe && f)
        f = rd_ptr(f, L->cf_current);
    int n = 0;
    int64_t budget = link_budget(max);
    while (f && n < max && budget-- > 0) {
        const void *next = rd_ptr(f, L->fr_back);
        uint8_t owner = rd_u8(f, L->fr_owner);
        /* Shim frames pushed by the C entry into the eval loop: not user code. */
        if (!(L->has_cstack_owner && owner == OWNED_BY_CSTACK)) {
            const void *code = rd_ptr(f, L->fr_code);
            uintptr_t instr = (uintptr_t)rd_ptr(f, L->fr_instr);
            if (raw) {
                raw[n].code = code;
                raw[n].instr = instr;
                raw[n].owner = owner;
                n++;
            } else if (frame_311plus(L, code, instr, owner, &out[n])) {
                n++;
            }
        }
        if (next == f)
            break;
        f = next;
    }
    return n;
}

/* The calling thread's frames into raw, or validated into out when raw is
 * NULL (see walk_311plus). */
static int walk(gp_pyraw *raw, gp_pyframe *out, int max)
{
    if ((!raw && !out) || max <= 0 || !ready())
        return 0;
    const void *ts = this_tstate();
    if (!ts)
        return 0;
    switch (g.L->minor) {
    case 10: return walk_310(ts, raw, out, max);
    case 11: return walk_311plus(&L311, ts, raw, out, max);
    case 12: return walk_311plus(&L312, ts, raw, out, max);
    case 13: return walk_311plus(&L313, ts, raw, out, max);
    default: return 0;
    }
}

int gp_py_walk(gp_pyframe *out, int max) { return out ? walk(NULL, out, max) : 0; }

int gp_py_walk_raw(gp_pyraw *out, int max) { return walk(out, NULL, max); }

int gp_py_frame_of(const gp_pyraw *raw, gp_pyframe *out)
{
    if (!raw || !out || !ready())
        return 0;
    switch (g.L->minor) {
    case 10:
        if (!raw->code || type_of(raw->code) != g.code_type)
            return 0;
        out->code = raw->code;
        out->lasti = (int32_t)(intptr_t)raw->instr;
        return 1;
    case 11: return frame_311plus(&L311, raw->code, raw->instr, raw->owner, out);
    case 12: return frame_311plus(&L312, raw->code, raw->instr, raw->owner, out);
    case 13: return frame_311plus(&L313, raw->code, raw->instr, raw->owner, out);
    default: return 0;
    }
}

int gp_py_thread_holds_gil(void)
{
    if (!ready())
        return 0;
    /* A thread without a Python thread state cannot hold the GIL; checking
     * first also avoids PyGILState_Check's "1 when checks are disabled"
     * answer for such threads. */
    if (!this_tstate())
        return 0;
    return g.gil_check() ? 1 : 0;
}

/* ---------------------------------------------------------------------- */
/* Line numbers                                                            */
/* ---------------------------------------------------------------------- */

/* Unsigned varint of the 3.11+ location table: 6 data bits per byte, least
 * significant group first, bit 6 set on every byte but the last. */
static unsigned read_varint(const uint8_t *p, int64_t len, int64_t *i)
{
    unsigned v = 0, shift = 0;
    while (*i < len && shift < 32) {
        uint8_t b = p[(*i)++];
        v |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64))
            break;
    }
    return v;
}

/* Signed varint: zig-zag style, sign in the lowest bit. */
static int read_svarint(const uint8_t *p, int64_t len, int64_t *i)
{
    unsigned v = read_varint(p, len, i);
    return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

/* A position in a line table: the entries read so far cover code bytes
 * [0, end), and line is the running line number. */
typedef struct {
    int64_t i, end;
    int line;
} line_cursor;

/* line_next reads one entry of the table: it covers code bytes up to c->end
 * and has line *cur (-1: no line). 0 at the table's end or a corrupt byte.
 *
 * 3.10 (PEP 626): pairs of (byte-offset delta: uint8, line delta: int8).
 * Each pair covers the next `delta` bytes of bytecode; a line delta of -128
 * marks a range without a line number and leaves the running line
 * unchanged. Zero-length pairs only carry line deltas.
 *
 * 3.11+ location table: every entry starts with a byte that has bit 7 set:
 * bits 3-6 are the entry kind, bits 0-2 the number of code units covered
 * minus one. Later bytes of the entry have bit 7 clear. Kinds:
 *   0-9   short form, same line (column data follows)
 *   10-12 one-line form, line delta = kind - 10 (columns follow)
 *   13    no columns, line delta as signed varint
 *   14    long form, line delta as signed varint first (then end line and
 *         columns, which we skip)
 *   15    no location: this range has no line; running line unchanged. */
static int line_next(int minor, const uint8_t *p, int64_t len, line_cursor *c, int *cur)
{
    if (minor == 10) {
        if (c->i + 1 >= len)
            return 0;
        int ldelta = (int8_t)p[c->i + 1];
        c->end += p[c->i];
        c->i += 2;
        if (ldelta == -128) {
            *cur = -1;
        } else {
            c->line += ldelta;
            *cur = c->line;
        }
        return 1;
    }
    if (c->i >= len)
        return 0;
    uint8_t first = p[c->i++];
    if (!(first & 0x80))
        return 0; /* not at an entry start: corrupt table */
    int kind = (first >> 3) & 15;
    c->end += ((first & 7) + 1) * 2;
    if (kind == 15) {
        *cur = -1;
    } else {
        if (kind == 13 || kind == 14)
            c->line += read_svarint(p, len, &c->i);
        else if (kind >= 10)
            c->line += kind - 10;
        *cur = c->line;
    }
    while (c->i < len && !(p[c->i] & 0x80))
        c->i++;
    return 1;
}

/* line_scan is the line of code byte addr: the table read from its start. */
static int line_scan(int minor, const uint8_t *p, int64_t len, int first, int64_t addr)
{
    line_cursor c = {0, 0, first};
    int cur;
    while (line_next(minor, p, len, &c, &cur))
        if (c.end > addr)
            return cur;
    return -1;
}

/* Long functions (Inductor's generated call() has thousands of lines) make
 * line_scan slow: a stack seen for the first time decodes every frame, so
 * their tables are decoded once into sorted (end, line) arrays, kept per
 * code object, and searched. A code object may be freed and its address
 * reused: an entry also holds the table's address, length and first bytes,
 * and is rebuilt when they differ. */
enum { LINE_CACHE_SLOTS = 1024, LINE_CACHE_MIN = 512 /* table bytes */, LINE_CACHE_BYTES = 32 << 20 };

typedef struct {
    const void *code, *table;
    int64_t len;
    uint64_t head; /* the table's first 8 bytes */
    int first, n;
    int32_t *end, *line;
} line_entry;

static struct {
    pthread_mutex_t mu;
    size_t bytes; /* held by the arrays */
    line_entry slot[LINE_CACHE_SLOTS];
} lines = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};

static void line_entry_free(line_entry *e)
{
    lines.bytes -= (size_t)e->n * 2 * sizeof(int32_t);
    free(e->end);
    free(e->line);
    memset(e, 0, sizeof *e);
}

/* line_entry_fill decodes the table into e; 0 when memory is short. */
static int line_entry_fill(line_entry *e, int minor, const uint8_t *p, int64_t len)
{
    line_cursor c = {0, 0, e->first};
    int cur, n = 0;
    while (line_next(minor, p, len, &c, &cur))
        n++;
    size_t bytes = (size_t)n * 2 * sizeof(int32_t);
    if (n == 0 || lines.bytes + bytes > LINE_CACHE_BYTES)
        return 0;
    e->end = malloc((size_t)n * sizeof(int32_t));
    e->line = malloc((size_t)n * sizeof(int32_t));
    if (!e->end || !e->line) {
        free(e->end);
        free(e->line);
        e->end = e->line = NULL;
        return 0;
    }
    c = (line_cursor){0, 0, e->first};
    for (int k = 0; k < n && line_next(minor, p, len, &c, &cur); k++)
        e->end[k] = (int32_t)c.end, e->line[k] = cur;
    e->n = n;
    lines.bytes += bytes;
    return 1;
}

/* line_cached answers line_scan from the code object's decoded table; 0
 * when it could not keep one (then scan). */
static int line_cached(const void *code, const void *table, int minor, const uint8_t *p, int64_t len, int first,
                       int64_t addr, int *line)
{
    uint64_t head;
    memcpy(&head, p, sizeof head); /* len >= LINE_CACHE_MIN */
    uintptr_t h = (uintptr_t)code;
    line_entry *e = &lines.slot[((h >> 4) ^ (h >> 14)) & (LINE_CACHE_SLOTS - 1)];
    int ok = 0;
    pthread_mutex_lock(&lines.mu);
    if (e->code != code || e->table != table || e->len != len || e->head != head || e->first != first) {
        if (e->code)
            line_entry_free(e);
        *e = (line_entry){.code = code, .table = table, .len = len, .head = head, .first = first};
        if (!line_entry_fill(e, minor, p, len))
            memset(e, 0, sizeof *e);
    }
    if (e->code) {
        int lo = 0, hi = e->n; /* the first entry ending past addr */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (e->end[mid] > addr)
                hi = mid;
            else
                lo = mid + 1;
        }
        *line = lo < e->n ? e->line[lo] : -1;
        ok = 1;
    }
    pthread_mutex_unlock(&lines.mu);
    return ok;
}

/* Line of instruction `lasti` (code units) of `code`; 0 when the line table
 * cannot be read. Mirrors PyCode_Addr2Line(code, lasti * 2). */
static int code_line(const struct gp_py_layout *L, const void *code, int32_t lasti, int *line)
{
    int first = rd_i32(code, L->co_firstlineno);
    if (lasti < 0) {
        *line = first;
        return 1;
    }
    const void *tab = rd_ptr(code, L->co_linetable);
    if (!tab || type_of(tab) != g.bytes_type)
        return 0;
    int64_t len = rd_i64(tab, OB_SIZE);
    if (len < 0)
        return 0;
    const uint8_t *p = (const uint8_t *)tab + BYTES_SVAL;
    int64_t addr = (int64_t)lasti * 2;
    if (len < LINE_CACHE_MIN || !line_cached(code, tab, L->minor, p, len, first, addr, line))
        *line = line_scan(L->minor, p, len, first, addr);
    return 1;
}

const struct gp_py_layout *gp_py_layout(void)
{
    return ready() ? g.L : NULL;
}

int gp_py_code_line(const void *code, int32_t lasti, int *line)
{
    if (!ready() || !code || type_of(code) != g.code_type)
        return 0;
    return code_line(g.L, code, lasti, line);
}

/* ---------------------------------------------------------------------- */
/* Strings                                                                 */
/* ---------------------------------------------------------------------- */

static void put_placeholder(char *dst, size_t cap)
{
    static const char ph[] = "<?>";
    size_t n = cap - 1 < sizeof ph - 1 ? cap - 1 : sizeof ph - 1;
    memcpy(dst, ph, n);
    dst[n] = '\0';
}

/* Append code point c as UTF-8 if it fits in dst[*pos..cap-2] (one byte is
 * kept for the NUL). Surrogates cannot be encoded and become U+FFFD.
 * Returns 0 when it does not fit (the caller stops: no partial sequence). */
static int put_utf8(char *dst, size_t cap, size_t *pos, uint32_t c)
{
    unsigned char b[4];
    size_t n;
    if (c >= 0xD800 && c <= 0xDFFF)
        c = 0xFFFD;
    if (c < 0x80) {
        b[0] = (unsigned char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = (unsigned char)(0xC0 | (c >> 6));
        b[1] = (unsigned char)(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (c >> 12));
        b[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (c & 0x3F));
        n = 3;
    } else if (c <= 0x10FFFF) {
        b[0] = (unsigned char)(0xF0 | (c >> 18));
        b[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
        b[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        b[3] = (unsigned char)(0x80 | (c & 0x3F));
        n = 4;
    } else {
        return put_utf8(dst, cap, pos, 0xFFFD);
    }
    if (*pos + n > cap - 1)
        return 0;
    memcpy(dst + *pos, b, n);
    *pos += n;
    return 1;
}

/* str or a subclass of it. The type object outlives its instances, so
 * reading its flags is as safe as reading the instance. */
static int is_str(const void *s)
{
    const void *t = type_of(s);
    if (t == g.unicode_type)
        return 1;
    if (!t)
        return 0;
    unsigned long flags;
    memcpy(&flags, (const char *)t + TP_FLAGS, sizeof flags);
    return (flags & TPFLAGS_UNICODE_SUBCLASS) != 0;
}

/* Copy a str object as UTF-8 into dst (cap > 0). Reads only the canonical
 * PEP 393 data: compact strings store it right after the header, non-compact
 * ones (str subclasses, 3.10/3.11 legacy strings) through data.any. */
static void copy_str(const struct gp_py_layout *L, const void *s, char *dst, size_t cap)
{
    if (!dst || cap == 0)
        return;
    if (!s || !is_str(s))
        goto bad;
    uint32_t state = rd_u32(s, STR_STATE);
    unsigned kind = (state >> STATE_KIND_SHIFT) & 7;
    int compact = (state >> STATE_COMPACT_BIT) & 1;
    int ascii = (state >> STATE_ASCII_BIT) & 1;
    int64_t len = rd_i64(s, STR_LENGTH);
    if (L->has_ready_bit && !((state >> STATE_READY_BIT) & 1))
        goto bad; /* 3.10/3.11 legacy string without canonical data */
    if (len < 0 || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
        goto bad;
    const uint8_t *data;
    if (compact)
        data = (const uint8_t *)s + (ascii ? L->str_ascii_size : L->str_compact_size);
    else
        data = rd_ptr(s, L->str_data);
    if (!data)
        goto bad;

    size_t pos = 0;
    if (ascii) {
        /* Already UTF-8: one copy. */
        size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1;
        memcpy(dst, data, n);
        pos = n;
    } else {
        for (int64_t i = 0; i < len; i++) {
            uint32_t c;
            if (kind == 1) {
                c = data[i];
            } else if (kind == 2) {
                uint16_t u;
                memcpy(&u, data + i * 2, 2);
                c = u;
            } else {
                memcpy(&c, data + i * 4, 4);
            }
            if (!put_utf8(dst, cap, &pos, c))
                break;
        }
    }
    dst[pos] = '\0';
    return;
bad:
    put_placeholder(dst, cap);
}

int gp_py_resolve(const gp_pyframe *f, char *file, size_t file_cap,
                  char *func, size_t func_cap, int *line)
{
    if (file && file_cap)
        put_placeholder(file, file_cap);
    if (func && func_cap)
        put_placeholder(func, func_cap);
    if (line)
        *line = -1;
    if (!f || !ready())
        return 0;
    const struct gp_py_layout *L = g.L;
    const void *code = f->code;
    if (!code || type_of(code) != g.code_type)
        return 0;
    copy_str(L, rd_ptr(code, L->co_filename), file, file_cap);
    copy_str(L, rd_ptr(code, L->co_funcname), func, func_cap);
    int ln;
    if (!code_line(L, code, f->lasti, &ln))
        return 0;
    if (line)
        *line = ln;
    return 1;
}
