/*
 * pystack.h - walk the calling thread's own CPython stack without the GIL.
 *
 * Supported: CPython 3.10, 3.11, 3.12 and 3.13 (default GIL builds) on
 * x86-64 Linux. Python is not linked: every CPython symbol is looked up at
 * run time with dlsym(RTLD_DEFAULT, ...), so this compiles without Python
 * headers and degrades to "no python" in a process without CPython.
 *
 * Only the calling thread's frames are read. That thread cannot push or pop
 * Python frames while it is inside our code, and every frame on its chain
 * holds a strong reference to its code object, so the reads are stable and
 * memory-safe without the GIL. Nothing here allocates, takes a lock, calls
 * into the interpreter's evaluation machinery or touches a reference count.
 *
 * See pystack.c for the per-version layouts and the known limitations.
 */
#ifndef GPURR_PYSTACK_H
#define GPURR_PYSTACK_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * One raw Python frame.
 *   code:  the PyCodeObject* executing in the frame (borrowed: only valid
 *          while that frame is alive, i.e. resolve it before the calling
 *          thread returns to Python).
 *   lasti: index of the current instruction in 16-bit code units
 *          (CPython's "lasti"; byte offset = lasti * 2). -1 means the frame
 *          has not executed an instruction yet (line = co_firstlineno).
 */
typedef struct {
    const void *code;
    int32_t lasti;
} gp_pyframe;

/*
 * Look up the CPython symbols and select the struct layout for the running
 * version (Py_Version when present, else parsed from Py_GetVersion()).
 * Returns 1 when a supported CPython is present, 0 otherwise; after a 0 all
 * other calls return 0. Thread-safe, idempotent, cheap after the first call.
 * The first call's answer is kept: call it once CPython is loaded.
 */
int gp_py_init(void);

/* What gp_py_init found, e.g. "CPython 3.12.1", "no python",
 * "CPython 3.9.18 (unsupported)". Static storage, never NULL. */
const char *gp_py_describe(void);

/*
 * Raw frames of the CALLING thread, innermost first, at most max.
 * No GIL needed; no allocation, no refcount changes, no locks.
 * Returns the number of frames written (0 when the thread has no Python
 * thread state, no Python frames, or gp_py_init did not succeed).
 */
int gp_py_walk(gp_pyframe *out, int max);

/*
 * Raw identity of the calling thread's frames, innermost first, at most max:
 * what each frame points at (code object or, on 3.13, any executable) and
 * where it is in it, read from the frames alone and never from the objects
 * they point to. Cheap enough for every launch: a cache key for a stack.
 * C-stack shim frames (3.12+) are left out; incomplete frames and frames
 * that run no code object are not, so convert each with gp_py_frame_of.
 * Same rules as gp_py_walk otherwise.
 */
typedef struct {
    const void *code;
    uintptr_t instr;   /* 3.10: f_lasti; 3.11+: prev_instr / instr_ptr */
    uint8_t owner;     /* 3.11+: the frame's owner */
} gp_pyraw;

int gp_py_walk_raw(gp_pyraw *out, int max);

/*
 * Validate a raw frame and convert it into the frame gp_py_walk would give.
 * Returns 0 for a frame gp_py_walk skips (no code object, incomplete).
 * Reads the code object: call it while the frame is live.
 */
int gp_py_frame_of(const gp_pyraw *raw, gp_pyframe *out);

/* 1 when the calling thread holds the GIL (PyGILState_Check), 0 when it does
 * not or when that is unknown. */
int gp_py_thread_holds_gil(void);

/*
 * Resolve a frame from gp_py_walk into file name, function name
 * (co_qualname on 3.11+, co_name on 3.10) and line number.
 * Strings are written as NUL-terminated UTF-8, truncated to the buffer size
 * on a character boundary; a string that cannot be read without allocating
 * is written as "<?>". file/func may be NULL (or cap 0) to skip them, line
 * may be NULL. *line is -1 when the instruction has no line number.
 * Returns 1 when the code object was valid and the line was computed,
 * 0 otherwise (placeholders are still written).
 * Must be called while the frame is still live (see gp_pyframe.code).
 */
int gp_py_resolve(const gp_pyframe *f, char *file, size_t file_cap,
                  char *func, size_t func_cap, int *line);

#ifdef __cplusplus
}
#endif

#endif /* GPURR_PYSTACK_H */
