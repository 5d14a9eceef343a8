/*
 * pystack_layout.h - the CPython struct layouts pystack.c reads, and how it
 * reads raw memory. Private to pystack.c and its white-box checks
 * (testdata/pystack/testlib.c, which compares these numbers with the
 * installed headers and the line decoder with CPython's): the agent uses
 * pystack.h. See pystack.c for where the numbers come from.
 */
#ifndef GPURR_PYSTACK_LAYOUT_H
#define GPURR_PYSTACK_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Offsets that are identical in every supported version. */
enum {
    OB_TYPE = 8,        /* PyObject.ob_type */
    OB_SIZE = 16,       /* PyVarObject.ob_size */
    TP_BASICSIZE = 32,  /* PyTypeObject.tp_basicsize */
    TP_ITEMSIZE = 40,   /* PyTypeObject.tp_itemsize */
    TP_FLAGS = 168,     /* PyTypeObject.tp_flags (unsigned long) */
    BYTES_SVAL = 32,    /* PyBytesObject.ob_sval */
    STR_LENGTH = 16,    /* PyASCIIObject.length */
    STR_STATE = 32,     /* PyASCIIObject.state (32-bit bitfield word) */
    STATE_KIND_SHIFT = 2, /* state.kind: 3 bits */
    STATE_COMPACT_BIT = 5,
    STATE_ASCII_BIT = 6,
    STATE_READY_BIT = 7,  /* 3.10/3.11 only (3.12 removed not-ready strings) */
};

/* Offsets that differ between versions. For 3.10 the "frame" fields refer to
 * PyFrameObject, for 3.11+ to _PyInterpreterFrame. */
struct gp_py_layout {
    int minor;                /* 10..13 */
    size_t ts_frame;          /* 3.10 PyThreadState.frame, 3.11/3.12 .cframe,
                                 3.13 .current_frame */
    int has_cframe;           /* 3.11/3.12: ts_frame points at a _PyCFrame */
    size_t cf_current;        /* _PyCFrame.current_frame */
    size_t fr_code;           /* f_code / f_executable */
    size_t fr_back;           /* f_back / previous */
    size_t fr_instr;          /* 3.10 f_lasti (int); 3.11+ prev_instr/instr_ptr */
    size_t fr_owner;          /* 3.11+ owner (char) */
    int has_cstack_owner;     /* 3.12+: FRAME_OWNED_BY_CSTACK exists */
    size_t co_filename;
    size_t co_funcname;       /* co_qualname (3.11+) or co_name (3.10) */
    size_t co_firstlineno;    /* int */
    size_t co_linetable;
    size_t co_firsttraceable; /* 3.11+, int */
    size_t co_code_adaptive;  /* 3.11+ */
    size_t code_basicsize;    /* expected PyCode_Type.tp_basicsize */
    size_t code_itemsize;     /* expected PyCode_Type.tp_itemsize */
    size_t str_ascii_size;    /* sizeof(PyASCIIObject): compact ASCII data */
    size_t str_compact_size;  /* sizeof(PyCompactUnicodeObject): compact data */
    size_t str_data;          /* PyUnicodeObject.data (non-compact strings) */
    size_t str_basicsize;     /* sizeof(PyUnicodeObject) == str's tp_basicsize */
    int has_ready_bit;        /* 3.10/3.11 */
};

enum { OWNED_BY_GENERATOR = 1, OWNED_BY_CSTACK = 3 };

#define TPFLAGS_UNICODE_SUBCLASS (1UL << 28) /* Py_TPFLAGS_UNICODE_SUBCLASS */

/* 3.13 publishes its own layout in _PyRuntime.debug_offsets (for debuggers
 * and profilers). pystack.c compares the fields it relies on and refuses the
 * version on any disagreement instead of reading the wrong memory. `pos` is
 * the position of each entry inside _Py_DebugOffsets in 3.13.0 (see the
 * offsets.c table); `field` is the matching entry of struct gp_py_layout. */
enum {
    DBG313_COOKIE = 0,
    DBG313_VERSION = 8,
    DBG313_FREE_THREADED = 16,
    DBG313_OB_TYPE = 360,
};

static const struct {
    size_t pos;
    size_t field;
    const char *name;
} DBG313[] = {
    {184, offsetof(struct gp_py_layout, ts_frame), "thread_state.current_frame"},
    {232, offsetof(struct gp_py_layout, fr_back), "interpreter_frame.previous"},
    {240, offsetof(struct gp_py_layout, fr_code), "interpreter_frame.executable"},
    {248, offsetof(struct gp_py_layout, fr_instr), "interpreter_frame.instr_ptr"},
    {264, offsetof(struct gp_py_layout, fr_owner), "interpreter_frame.owner"},
    {280, offsetof(struct gp_py_layout, co_filename), "code_object.filename"},
    {296, offsetof(struct gp_py_layout, co_funcname), "code_object.qualname"},
    {304, offsetof(struct gp_py_layout, co_linetable), "code_object.linetable"},
    {312, offsetof(struct gp_py_layout, co_firstlineno), "code_object.firstlineno"},
    {344, offsetof(struct gp_py_layout, co_code_adaptive), "code_object.co_code_adaptive"},
};

/* Raw memory reads. memcpy keeps them free of alignment and strict-aliasing
 * assumptions; each compiles to a single load. */
static inline const void *rd_ptr(const void *base, size_t off)
{
    const void *v;
    memcpy(&v, (const char *)base + off, sizeof v);
    return v;
}

static inline int32_t rd_i32(const void *base, size_t off)
{
    int32_t v;
    memcpy(&v, (const char *)base + off, sizeof v);
    return v;
}

static inline uint32_t rd_u32(const void *base, size_t off)
{
    uint32_t v;
    memcpy(&v, (const char *)base + off, sizeof v);
    return v;
}

static inline int64_t rd_i64(const void *base, size_t off)
{
    int64_t v;
    memcpy(&v, (const char *)base + off, sizeof v);
    return v;
}

static inline uint8_t rd_u8(const void *base, size_t off)
{
    return *((const uint8_t *)base + off);
}

static inline const void *type_of(const void *obj)
{
    return rd_ptr(obj, OB_TYPE);
}

/* White-box entry points (pystack.c). gp_py_layout is the layout gp_py_init
 * selected, NULL when it selected none; gp_py_code_line is the line of
 * instruction lasti of code, 0 when code is not a code object or its line
 * table cannot be read. */
const struct gp_py_layout *gp_py_layout(void);
int gp_py_code_line(const void *code, int32_t lasti, int *line);

#endif /* GPURR_PYSTACK_LAYOUT_H */
