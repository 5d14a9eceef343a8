/*
 * testlib.c - test/benchmark entry points around pystack.c, loaded by
 * test_pystack.py through ctypes. Built by run.sh into a shared object,
 * linked with pystack.c built on its own; pystack_layout.h gives the checks
 * its layout table and line decoder. No Python headers: objects coming from
 * Python are plain pointers (ctypes.py_object).
 *
 * Functions called through ctypes.CDLL run with the GIL released (the
 * situation of a CUDA callback); those called through ctypes.PyDLL run with
 * the GIL held (needed for t_check_lines, which calls PyCode_Addr2Line).
 */
#define _GNU_SOURCE 1 /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pystack.h"
#include "pystack_layout.h"

int t_init(void) { return gp_py_init(); }
const char *t_describe(void) { return gp_py_describe(); }
int t_holds_gil(void) { return gp_py_thread_holds_gil(); }

/* Walk the calling thread (at most max frames), resolve every frame and write
 * records "file \x1f func \x1f line \x1f ok \x1f lasti \x1e" into buf. Returns the frame
 * count, or -1 if buf is too small. *holds_gil gets gp_py_thread_holds_gil()
 * as seen during the walk. */
int t_walk_text(char *buf, int cap, int max, int *holds_gil)
{
    gp_pyframe fr[512];
    if (max > 512)
        max = 512;
    *holds_gil = gp_py_thread_holds_gil();
    int n = gp_py_walk(fr, max);
    /* The agent's path (raw walk, then gp_py_frame_of on a stack not seen
     * before) must give exactly these frames: -2 when it does not. */
    gp_pyraw raw[512];
    int nraw = gp_py_walk_raw(raw, 512), k = 0;
    for (int i = 0; i < nraw && k < n; i++) {
        gp_pyframe f;
        if (!gp_py_frame_of(&raw[i], &f))
            continue;
        if (f.code != fr[k].code || f.lasti != fr[k].lasti)
            return -2;
        k++;
    }
    if (k != n)
        return -2;
    int pos = 0;
    for (int i = 0; i < n; i++) {
        char file[1024], func[512];
        int line;
        int ok = gp_py_resolve(&fr[i], file, sizeof file, func, sizeof func, &line);
        int w = snprintf(buf + pos, (size_t)(cap - pos), "%s\x1f%s\x1f%d\x1f%d\x1f%d\x1e", file, func, line, ok,
                         (int)fr[i].lasti);
        if (w < 0 || w >= cap - pos)
            return -1;
        pos += w;
    }
    if (pos < cap)
        buf[pos] = '\0';
    return n;
}

/* Resolve an arbitrary (code pointer, lasti) with caller-chosen buffer sizes. */
int t_resolve_raw(const void *code, int lasti, char *file, int file_cap,
                  char *func, int func_cap, int *line)
{
    gp_pyframe f = {code, lasti};
    return gp_py_resolve(&f, file, (size_t)file_cap, func, (size_t)func_cap, line);
}

/* A pthread that CPython knows nothing about. */
struct pt_result { int n; int gil; int resolved; };

static void *pt_main(void *arg)
{
    struct pt_result *r = arg;
    gp_pyframe fr[64];
    r->n = gp_py_walk(fr, 64);
    r->gil = gp_py_thread_holds_gil();
    char file[64], func[64];
    int line;
    r->resolved = r->n > 0 ? gp_py_resolve(&fr[0], file, sizeof file, func, sizeof func, &line) : 0;
    return NULL;
}

int t_pthread_walk(int *holds_gil)
{
    struct pt_result r = {-1, -1, -1};
    pthread_t t;
    if (pthread_create(&t, NULL, pt_main, &r) != 0)
        return -100;
    pthread_join(t, NULL);
    *holds_gil = r.gil;
    return r.n;
}

/* A C thread that enters Python through a ctypes callback (which takes the
 * GIL with PyGILState_Ensure, creating a thread state for the call) and, once
 * the callback has returned and the state is gone again, walks once more.
 * Returns the frame count of that second walk (want 0). */
struct cb_arg { void (*cb)(void); int after; };

static void *cb_main(void *p)
{
    struct cb_arg *a = p;
    gp_pyframe fr[16];
    a->cb();
    a->after = gp_py_walk(fr, 16);
    return NULL;
}

int t_pthread_callback(void (*cb)(void))
{
    struct cb_arg a = {cb, -1};
    pthread_t t;
    if (pthread_create(&t, NULL, cb_main, &a) != 0)
        return -100;
    pthread_join(t, NULL);
    return a.after;
}

/* Compare our line decoder with CPython's PyCode_Addr2Line for every
 * instruction of one code object. Must be called with the GIL held (PyDLL).
 * Returns the number of mismatches (first one reported through the out
 * parameters), or -1 when code is not a code object. */
int t_check_lines(const void *code, int *bad_lasti, int *ours, int *theirs)
{
    int (*addr2line)(const void *, int);
    void *p = dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
    memcpy(&addr2line, &p, sizeof p);
    const struct gp_py_layout *L = gp_py_layout();
    int first;
    if (!L || !addr2line || !gp_py_code_line(code, -1, &first))
        return -1;
    int64_t units;
    if (L->minor == 10)
        units = rd_i64(rd_ptr(code, 48 /* co_code */), OB_SIZE) / 2;
    else
        units = rd_i64(code, OB_SIZE);
    int bad = 0;
    for (int64_t i = -1; i < units; i++) {
        int a = -2;
        if (!gp_py_code_line(code, (int32_t)i, &a))
            a = -2;
        int b = addr2line(code, (int)(i * 2));
        if (a != b) {
            if (!bad) {
                *bad_lasti = (int)i;
                *ours = a;
                *theirs = b;
            }
            bad++;
        }
    }
    return bad;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static gp_pyframe bench_frames[64];
static gp_pyraw bench_raw[64];
static int walk_frames(void) { return gp_py_walk(bench_frames, 64); }
static int walk_raw(void) { return gp_py_walk_raw(bench_raw, 64); }

/* Median over `batches` of the mean ns per walk() call, each batch
 * `per_batch` calls. *depth gets the frame count. */
static double bench_walker(int (*walk)(void), int batches, int per_batch, int *depth)
{
    double *v = malloc(sizeof(double) * (size_t)batches);
    if (!v)
        return -1;
    volatile int sink = 0;
    for (int b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (int i = 0; i < per_batch; i++)
            sink += walk();
        v[b] = (now_ns() - t0) / per_batch;
    }
    *depth = walk();
    double m = median(v, batches);
    free(v);
    (void)sink;
    return m;
}

/* gp_py_walk (max 64 frames), and gp_py_walk_raw, the agent's per-launch walk. */
double t_bench_walk(int batches, int per_batch, int *depth) { return bench_walker(walk_frames, batches, per_batch, depth); }
double t_bench_walk_raw(int batches, int per_batch, int *depth) { return bench_walker(walk_raw, batches, per_batch, depth); }

/* Same for gp_py_resolve, per frame, over all frames of one walk. */
double t_bench_resolve(int batches, int per_batch, int *nframes)
{
    gp_pyframe fr[64];
    int n = gp_py_walk(fr, 64);
    *nframes = n;
    if (n == 0)
        return -1;
    double *v = malloc(sizeof(double) * (size_t)batches);
    if (!v)
        return -1;
    char file[512], func[256];
    int line;
    volatile int sink = 0;
    for (int b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (int i = 0; i < per_batch; i++)
            for (int k = 0; k < n; k++)
                sink += gp_py_resolve(&fr[k], file, sizeof file, func, sizeof func, &line);
        v[b] = (now_ns() - t0) / ((double)per_batch * n);
    }
    double m = median(v, batches);
    free(v);
    (void)sink;
    return m;
}

/* The layout table selected for this interpreter, printed with the names
 * that offsets.c uses, so the test can compare it with the headers. */
int t_dump_layout(char *buf, int cap)
{
    const struct gp_py_layout *L = gp_py_layout();
    if (!L)
        return -1;
    int pos = 0;
#define D(name, val)                                                                   \
    do {                                                                               \
        int w_ = snprintf(buf + pos, (size_t)(cap - pos), "%s %zu\n", name, (size_t)(val)); \
        if (w_ < 0 || w_ >= cap - pos)                                                 \
            return -1;                                                                 \
        pos += w_;                                                                     \
    } while (0)
    D("PyObject.ob_type", OB_TYPE);
    D("PyVarObject.ob_size", OB_SIZE);
    D("PyTypeObject.tp_basicsize", TP_BASICSIZE);
    D("PyTypeObject.tp_itemsize", TP_ITEMSIZE);
    D("PyTypeObject.tp_flags", TP_FLAGS);
    D("Py_TPFLAGS_UNICODE_SUBCLASS", TPFLAGS_UNICODE_SUBCLASS);
    D("PyBytesObject.ob_sval", BYTES_SVAL);
    D("PyASCIIObject.length", STR_LENGTH);
    D("PyASCIIObject.state", STR_STATE);
    D("state.kind bit", STATE_KIND_SHIFT);
    D("state.compact bit", STATE_COMPACT_BIT);
    D("state.ascii bit", STATE_ASCII_BIT);
    if (L->has_ready_bit)
        D("state.ready bit", STATE_READY_BIT);
    D("sizeof(PyASCIIObject)", L->str_ascii_size);
    D("sizeof(PyCompactUnicodeObject)", L->str_compact_size);
    D("PyUnicodeObject.data", L->str_data);
    D("sizeof(PyUnicodeObject)", L->str_basicsize);
    D("PyCodeObject.co_filename", L->co_filename);
    D("PyCodeObject.co_firstlineno", L->co_firstlineno);
    D("PyCodeObject.co_linetable", L->co_linetable);
    if (L->minor == 10) {
        D("PyThreadState.frame", L->ts_frame);
        D("PyFrameObject.f_back", L->fr_back);
        D("PyFrameObject.f_code", L->fr_code);
        D("PyFrameObject.f_lasti", L->fr_instr);
        D("PyCodeObject.co_name", L->co_funcname);
        D("sizeof(PyCodeObject)", L->code_basicsize);
    } else {
        if (L->has_cframe) {
            D("PyThreadState.cframe", L->ts_frame);
            D("_PyCFrame.current_frame", L->cf_current);
        } else {
            D("PyThreadState.current_frame", L->ts_frame);
        }
        D(L->minor >= 13 ? "_PyInterpreterFrame.f_executable" : "_PyInterpreterFrame.f_code", L->fr_code);
        D(L->minor >= 13 ? "_PyInterpreterFrame.instr_ptr" : "_PyInterpreterFrame.prev_instr", L->fr_instr);
        D("_PyInterpreterFrame.previous", L->fr_back);
        D("_PyInterpreterFrame.owner", L->fr_owner);
        D("FRAME_OWNED_BY_GENERATOR", OWNED_BY_GENERATOR);
        if (L->has_cstack_owner)
            D("FRAME_OWNED_BY_CSTACK", OWNED_BY_CSTACK);
        D("PyCodeObject.co_qualname", L->co_funcname);
        D("PyCodeObject._co_firsttraceable", L->co_firsttraceable);
        D("PyCodeObject.co_code_adaptive", L->co_code_adaptive);
    }
    if (L->minor == 13) {
        D("_PyRuntimeState.debug_offsets", 0);
        D("_Py_DebugOffsets.version", DBG313_VERSION);
        D("_Py_DebugOffsets.free_threaded", DBG313_FREE_THREADED);
        D("_Py_DebugOffsets.pyobject.ob_type", DBG313_OB_TYPE);
        for (size_t i = 0; i < sizeof DBG313 / sizeof DBG313[0]; i++) {
            char name[96];
            snprintf(name, sizeof name, "_Py_DebugOffsets.%s", DBG313[i].name);
            D(name, DBG313[i].pos);
        }
    }
#undef D
    return pos;
}
