/*
 * offsets.c - prints the CPython struct offsets that pystack.c hard-codes.
 *
 * Build against one CPython version's headers, e.g.
 *   gcc -I$PREFIX/include/python3.12 offsets.c -o offsets && ./offsets
 * (run.sh does this for every installed version and diffs the result with
 * the table in pystack.c). Only headers are needed: nothing is linked and no
 * Python API is called.
 *
 * The internal headers (pycore_*.h) require Py_BUILD_CORE.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#else
#include <internal/pycore_frame.h>
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include <internal/pycore_runtime.h>
#endif

#define P(name, value) printf("%-34s %zu\n", name, (size_t)(value))
#define OFF(type, field) P(#type "." #field, offsetof(type, field))

/* Bit position of a one-bit-or-wider bitfield of PyASCIIObject.state:
 * offsetof() does not work on bitfields, so set the field in a zeroed
 * object and see which bit of the 32-bit word lights up. */
static int state_bit(const PyASCIIObject *o)
{
    unsigned int w;
    memcpy(&w, &o->state, sizeof w);
    for (int i = 0; i < 32; i++)
        if (w & (1u << i))
            return i;
    return -1;
}

int main(void)
{
    printf("# CPython %s (PY_VERSION_HEX 0x%08x)\n", PY_VERSION, (unsigned)PY_VERSION_HEX);

    /* Generic object header. */
    OFF(PyObject, ob_type);
    OFF(PyVarObject, ob_size);
    OFF(PyTypeObject, tp_basicsize);
    OFF(PyTypeObject, tp_itemsize);
    OFF(PyTypeObject, tp_flags);
    P("Py_TPFLAGS_UNICODE_SUBCLASS", Py_TPFLAGS_UNICODE_SUBCLASS);

    /* Thread state: the root of the frame chain. */
#if PY_VERSION_HEX < 0x030B0000
    OFF(PyThreadState, frame);
#elif PY_VERSION_HEX < 0x030D0000
    OFF(PyThreadState, cframe);
    OFF(_PyCFrame, current_frame);
#else
    OFF(PyThreadState, current_frame);
#endif

    /* Frames. */
#if PY_VERSION_HEX < 0x030B0000
    OFF(PyFrameObject, f_back);
    OFF(PyFrameObject, f_code);
    OFF(PyFrameObject, f_lasti);
#else
#if PY_VERSION_HEX < 0x030D0000
    OFF(_PyInterpreterFrame, f_code);
    OFF(_PyInterpreterFrame, prev_instr);
#else
    OFF(_PyInterpreterFrame, f_executable);
    OFF(_PyInterpreterFrame, instr_ptr);
#endif
    OFF(_PyInterpreterFrame, previous);
    OFF(_PyInterpreterFrame, owner);
    P("FRAME_OWNED_BY_GENERATOR", FRAME_OWNED_BY_GENERATOR);
#if PY_VERSION_HEX >= 0x030C0000
    P("FRAME_OWNED_BY_CSTACK", FRAME_OWNED_BY_CSTACK);
#endif
    P("sizeof(_Py_CODEUNIT)", sizeof(_Py_CODEUNIT));
#endif

    /* Code objects. */
    OFF(PyCodeObject, co_filename);
    OFF(PyCodeObject, co_name);
#if PY_VERSION_HEX >= 0x030B0000
    OFF(PyCodeObject, co_qualname);
    OFF(PyCodeObject, _co_firsttraceable);
    OFF(PyCodeObject, co_code_adaptive);
#else
    OFF(PyCodeObject, co_code);
    P("sizeof(PyCodeObject)", sizeof(PyCodeObject));
#endif
    OFF(PyCodeObject, co_firstlineno);
    OFF(PyCodeObject, co_linetable);

    /* bytes objects (co_linetable, and co_code in 3.10). */
    OFF(PyBytesObject, ob_sval);

    /* str objects. */
    OFF(PyASCIIObject, length);
    OFF(PyASCIIObject, state);
    P("sizeof(PyASCIIObject)", sizeof(PyASCIIObject));
    OFF(PyCompactUnicodeObject, utf8_length);
    OFF(PyCompactUnicodeObject, utf8);
    P("sizeof(PyCompactUnicodeObject)", sizeof(PyCompactUnicodeObject));
    OFF(PyUnicodeObject, data);
    P("sizeof(PyUnicodeObject)", sizeof(PyUnicodeObject));
    {
        PyASCIIObject o;
        memset(&o, 0, sizeof o); o.state.kind = 1;    P("state.kind bit", state_bit(&o));
        memset(&o, 0, sizeof o); o.state.compact = 1; P("state.compact bit", state_bit(&o));
        memset(&o, 0, sizeof o); o.state.ascii = 1;   P("state.ascii bit", state_bit(&o));
#if PY_VERSION_HEX < 0x030C0000
        memset(&o, 0, sizeof o); o.state.ready = 1;   P("state.ready bit", state_bit(&o));
#endif
    }

#if PY_VERSION_HEX >= 0x030D0000
    /* 3.13 publishes its own layout in _PyRuntime.debug_offsets; pystack.c
     * cross-checks its hard-coded table against it at init. These are the
     * positions of the fields it reads inside that struct. */
    OFF(_PyRuntimeState, debug_offsets);
    OFF(_Py_DebugOffsets, version);
    OFF(_Py_DebugOffsets, free_threaded);
    OFF(_Py_DebugOffsets, thread_state.current_frame);
    OFF(_Py_DebugOffsets, interpreter_frame.previous);
    OFF(_Py_DebugOffsets, interpreter_frame.executable);
    OFF(_Py_DebugOffsets, interpreter_frame.instr_ptr);
    OFF(_Py_DebugOffsets, interpreter_frame.owner);
    OFF(_Py_DebugOffsets, code_object.filename);
    OFF(_Py_DebugOffsets, code_object.qualname);
    OFF(_Py_DebugOffsets, code_object.linetable);
    OFF(_Py_DebugOffsets, code_object.firstlineno);
    OFF(_Py_DebugOffsets, code_object.co_code_adaptive);
    OFF(_Py_DebugOffsets, pyobject.ob_type);
#endif
    return 0;
}
