# test_pystack.py - checks pystack.c against the interpreter's own view of
# the stack. Usage: python3 test_pystack.py LIB.so [OFFSETS.txt]
#
# ctypes.CDLL releases the GIL around each call, which is exactly the
# situation of a CUDA callback in a PyTorch op; ctypes.PyDLL keeps it held.
# Every check compares the native walk (file, function, line; innermost
# first) with what sys._getframe()/traceback report for the same frames,
# captured on the same source line as the native call.

import ctypes
import gc
import os
import sys
import threading
import traceback
import types

LIBPATH = sys.argv[1]
OFFSETS = sys.argv[2] if len(sys.argv) > 2 else None
LIB = ctypes.CDLL(LIBPATH)  # GIL released during calls
PLIB = ctypes.PyDLL(LIBPATH)  # GIL held during calls

c_int_p = ctypes.POINTER(ctypes.c_int)
for lib in (LIB, PLIB):
    lib.t_init.restype = ctypes.c_int
    lib.t_describe.restype = ctypes.c_char_p
    lib.t_holds_gil.restype = ctypes.c_int
    lib.t_walk_text.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, c_int_p]
    lib.t_walk_text.restype = ctypes.c_int
    lib.t_resolve_raw.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                  ctypes.c_char_p, ctypes.c_int, c_int_p]
    lib.t_resolve_raw.restype = ctypes.c_int
    lib.t_pthread_walk.argtypes = [c_int_p]
    lib.t_pthread_walk.restype = ctypes.c_int
    lib.t_pthread_callback.argtypes = [ctypes.c_void_p]
    lib.t_pthread_callback.restype = ctypes.c_int
    lib.t_check_lines.argtypes = [ctypes.py_object, c_int_p, c_int_p, c_int_p]
    lib.t_check_lines.restype = ctypes.c_int
    lib.t_bench_walk.argtypes = [ctypes.c_int, ctypes.c_int, c_int_p]
    lib.t_bench_walk.restype = ctypes.c_double
    lib.t_bench_walk_raw.argtypes = [ctypes.c_int, ctypes.c_int, c_int_p]
    lib.t_bench_walk_raw.restype = ctypes.c_double
    lib.t_bench_resolve.argtypes = [ctypes.c_int, ctypes.c_int, c_int_p]
    lib.t_bench_resolve.restype = ctypes.c_double
    lib.t_dump_layout.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.t_dump_layout.restype = ctypes.c_int

LIB.t_init()  # before MODULE_SNAPSHOT below; main() checks the result

HAS_QUALNAME = sys.version_info >= (3, 11)
BUFSZ = 1 << 17

RESULTS = []


def record(name, ok, detail=""):
    RESULTS.append((name, ok))
    print("  %s %-34s %s" % ("ok  " if ok else "FAIL", name, detail), flush=True)


def clean(s):
    # pystack writes lone surrogates (undecodable file names) as U+FFFD.
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)


def funcname(code):
    return code.co_qualname if HAS_QUALNAME else code.co_name


def parse(buf, n):
    if n == -2:
        raise RuntimeError("t_walk_text: gp_py_walk_raw + gp_py_frame_of disagree with gp_py_walk")
    if n < 0:
        raise RuntimeError("t_walk_text: buffer too small")
    raw = buf.raw[: buf.raw.index(b"\0")] if n else b""
    out = []
    for rec in raw.split(b"\x1e")[:n]:
        file, func, line, ok, lasti = rec.split(b"\x1f")
        # strict decoding: pystack must produce valid UTF-8
        out.append((file.decode("utf-8"), func.decode("utf-8"), int(line), int(ok), int(lasti)))
    return out


def expected_from(frame, innermost_line):
    """(file, func, line, f_lasti) for frame and its callers, innermost first.

    f_lasti (bytes) is None for the innermost frame: it keeps executing after
    the native call, so only its line was captured at the right moment."""
    exp = [(clean(frame.f_code.co_filename), clean(funcname(frame.f_code)), innermost_line, None)]
    f = frame.f_back
    while f is not None:
        ln = f.f_lineno
        exp.append((clean(f.f_code.co_filename), clean(funcname(f.f_code)), -1 if ln is None else ln,
                    f.f_lasti))
        f = f.f_back
    return exp


def snapshot(max_frames=512, lib=LIB):
    """Native walk of this thread plus the expected stack, taken on one line.

    Returns (native, expected, traceback_summary, holds_gil). The innermost
    frame of all three is this function, at the line of the native call.
    lib=PLIB makes the call with the GIL held."""
    buf = ctypes.create_string_buffer(BUFSZ)
    gil = ctypes.c_int(-1)
    n = lib.t_walk_text(buf, BUFSZ, max_frames, ctypes.byref(gil)); f = sys._getframe(); ln = f.f_lineno; tb = traceback.extract_stack(f)  # noqa: E702 (same line on purpose)
    return parse(buf, n), expected_from(f, ln), tb, gil.value


def compare(native, expected, tb, max_frames=512):
    """Empty string when native matches expected (and traceback), else why."""
    exp = [e[:3] for e in expected[:max_frames]]
    got = [(a, b, c) for (a, b, c, _, _) in native]
    if any(r[3] != 1 for r in native):
        return "resolve returned 0 for some frame: %r" % (native,)
    if got != exp:
        lines = ["native vs expected differ:"]
        for i in range(max(len(got), len(exp))):
            g = got[i] if i < len(got) else None
            e = exp[i] if i < len(exp) else None
            lines.append("   %s %r\n     %r" % ("  " if g == e else "!!", g, e))
        return "\n".join(lines)
    # Raw lasti (code units) must be CPython's frame.f_lasti (bytes) / 2.
    for i, (r, e) in enumerate(zip(native, expected)):
        if e[3] is not None and r[4] * 2 != e[3]:
            return "frame %d (%s): lasti %d, f_lasti %d" % (i, r[1], r[4], e[3])
    # Cross-check file/line against traceback (innermost last there).
    tbl = [(clean(fs.filename), fs.lineno if fs.lineno is not None else -1) for fs in reversed(tb)]
    if [(a, c) for (a, _, c) in got] != tbl[: len(got)]:
        return "traceback disagrees: %r vs %r" % (got, tbl)
    return ""


def check(name, result, max_frames=512, want_depth=None, want_gil=0):
    native, expected, tb, gil = result
    why = compare(native, expected, tb, max_frames)
    if not why and gil != want_gil:
        why = "gp_py_thread_holds_gil() = %d during the call, want %d" % (gil, want_gil)
    if not why and want_depth is not None and len(native) != want_depth:
        why = "depth %d, want %d" % (len(native), want_depth)
    record(name, not why, why if why else "(%d frames, innermost %s:%d)" % (
        len(native), native[0][1] if native else "-", native[0][2] if native else 0))


# ---------------------------------------------------------------- scenarios

class Klass:
    def method(self):
        def inner():
            fn = lambda: snapshot()  # noqa: E731
            return fn()
        return inner()

    @staticmethod
    def static():
        return snapshot()


def outer():
    return Klass().method()


def gen():
    yield snapshot()


def gen_outer():
    yield from gen()


async def co_inner():
    return snapshot()


async def co_outer():
    return await co_inner()


def run_coroutine(c):
    try:
        c.send(None)
    except StopIteration as e:
        return e.value
    raise AssertionError("coroutine did not finish")


def recurse(n, max_frames=512, lib=LIB):
    if n == 0:
        return snapshot(max_frames, lib)
    return recurse(n - 1, max_frames, lib)


def via_c_callback():
    # sorted() calls the key function from C: on 3.12+ this enters a new
    # eval loop with a C-stack shim frame that must be skipped.
    out = []
    sorted([1], key=lambda x: out.append(snapshot()))
    return out[0]


def in_class_body():
    class Body:
        r = snapshot()
    return Body.r


NONASCII_SRC = '''
def fünf():           # latin-1 range (UCS1, not ASCII)
    return 関数()
def 関数():            # UCS2
    return 𠀀𠀁()
def 𠀀𠀁():            # UCS4 (CJK extension B)
    return snap()
'''


def load_nonascii(filename):
    ns = {"snap": snapshot}
    exec(compile(NONASCII_SRC, filename, "exec"), ns)
    return ns["fünf"]


def test_tracing():
    # sys.settrace makes 3.10 keep f_lineno itself, 3.11 build its line
    # array cache and 3.12+ instrument the bytecode; lines must not change.
    def tracer(frame, event, arg):
        return tracer
    sys.settrace(tracer)
    try:
        r = outer()
    finally:
        sys.settrace(None)
    check("under sys.settrace", r)
    sys.setprofile(lambda *a: None)
    try:
        r = run_coroutine(co_outer())
    finally:
        sys.setprofile(None)
    check("under sys.setprofile", r)


def test_describe():
    d = LIB.t_describe().decode()
    want = "CPython %d.%d.%d" % sys.version_info[:3]
    record("describe", d.startswith(want), repr(d))


def test_layout():
    if not OFFSETS:
        record("layout vs headers", True, "(skipped: no offsets file)")
        return
    hdr = {}
    for line in open(OFFSETS):
        if line.startswith("#") or not line.strip():
            continue
        k, v = line.rsplit(None, 1)
        hdr[k.strip()] = int(v)
    buf = ctypes.create_string_buffer(8192)
    n = LIB.t_dump_layout(buf, 8192)
    bad = []
    count = 0
    for line in buf.raw[:n].decode().splitlines():
        k, v = line.rsplit(" ", 1)
        count += 1
        if hdr.get(k) != int(v):
            bad.append("%s: pystack %s, headers %s" % (k, v, hdr.get(k)))
    record("layout vs headers", not bad and count > 20, "; ".join(bad) or "(%d fields)" % count)


def test_gil():
    a = LIB.t_holds_gil()  # GIL released
    b = PLIB.t_holds_gil()  # GIL held
    record("holds_gil CDLL=0 PyDLL=1", (a, b) == (0, 1), "(got %d, %d)" % (a, b))


def test_pthread():
    gil = ctypes.c_int(-1)
    n = LIB.t_pthread_walk(ctypes.byref(gil))
    record("non-python pthread", n == 0 and gil.value == 0, "(frames=%d gil=%d)" % (n, gil.value))


def test_truncation():
    full = recurse(30)
    check("deep recursion (30)", full)
    cut = recurse(30, 7)
    check("max=7 truncates innermost-first", cut, max_frames=7, want_depth=7)
    one = recurse(3, 1)
    check("max=1", one, max_frames=1, want_depth=1)


def test_nonascii():
    check("non-ASCII func names + file", load_nonascii("/tmp/dätei_文件_😀.py")())
    check("lone surrogate in file name", load_nonascii("/tmp/bad_\udcff_name.py")())
    # Truncation must cut on a character boundary and stay NUL-terminated.
    fn = load_nonascii("/tmp/dätei_文件_😀.py")
    code = fn.__code__.co_consts  # noqa: F841 (keeps the module alive)
    target = None
    for c in fn.__globals__.values():
        if isinstance(c, types.FunctionType) and c.__name__ == "𠀀𠀁":
            target = c.__code__
    fullname = funcname(target).encode()
    fullfile = target.co_filename.encode()
    bad = []
    for cap in range(1, len(fullfile) + 3):
        fbuf = ctypes.create_string_buffer(cap)
        nbuf = ctypes.create_string_buffer(cap)
        line = ctypes.c_int(0)
        ok = LIB.t_resolve_raw(id(target), -1, fbuf, cap, nbuf, cap, ctypes.byref(line))
        for full, buf in ((fullname, nbuf), (fullfile, fbuf)):
            got = buf.raw[: buf.raw.index(b"\0")]
            # longest prefix of full that decodes and fits in cap-1 bytes
            want = full[: cap - 1]
            while want:
                try:
                    want.decode("utf-8")
                    break
                except UnicodeDecodeError:
                    want = want[:-1]
            if got != want:
                bad.append("cap=%d got %r want %r" % (cap, got, want))
        if ok != 1 or line.value != target.co_firstlineno:
            bad.append("cap=%d ok=%d line=%d" % (cap, ok, line.value))
    record("UTF-8 truncation on char boundary", not bad,
           "; ".join(bad[:3]) or "(caps 1..%d)" % (len(fullfile) + 2))


def test_str_subclass_names():
    # code.replace() keeps str-subclass instances, which are non-compact
    # strings (data behind a pointer): exercise that path, ASCII and not.
    class S(str):
        pass
    for label, fname, qual in (("ASCII", "/tmp/subclass.py", "Sub.name"),
                               ("UCS2", "/tmp/sübclass_文.py", "Süb.名前")):
        name = "str-subclass names (%s)" % label
        kw = {"co_filename": S(fname), "co_name": S(qual.split(".")[-1])}
        if HAS_QUALNAME:
            kw["co_qualname"] = S(qual)
        try:
            co = outer.__code__.replace(**kw)
        except Exception as e:  # not accepted by this version
            record(name, True, "(skipped: %s)" % e)
            continue
        if type(co.co_filename) is str:
            record(name, True, "(skipped: coerced to str)")
            continue
        fbuf = ctypes.create_string_buffer(128)
        nbuf = ctypes.create_string_buffer(128)
        line = ctypes.c_int(0)
        ok = LIB.t_resolve_raw(id(co), -1, fbuf, 128, nbuf, 128, ctypes.byref(line))
        got = (ok, fbuf.value.decode(), nbuf.value.decode(), line.value)
        want = (1, fname, funcname(co), co.co_firstlineno)
        record(name, got == want, "(%r)" % (got,) if got != want else "")


def test_bad_pointers():
    line = ctypes.c_int(0)
    fbuf = ctypes.create_string_buffer(16)
    nbuf = ctypes.create_string_buffer(16)
    s = "not a code object"
    r1 = LIB.t_resolve_raw(id(s), 0, fbuf, 16, nbuf, 16, ctypes.byref(line))
    ok1 = r1 == 0 and fbuf.value == b"<?>" and nbuf.value == b"<?>" and line.value == -1
    r2 = LIB.t_resolve_raw(None, 0, fbuf, 16, nbuf, 16, ctypes.byref(line))
    # out-of-range lasti: decoder runs off the table and reports "no line"
    r3 = LIB.t_resolve_raw(id(outer.__code__), 1 << 20, fbuf, 16, nbuf, 16, ctypes.byref(line))
    ok3 = r3 == 1 and line.value == -1
    record("resolve rejects non-code / NULL", ok1 and r2 == 0 and ok3, "(%d %d %d line=%d)" % (r1, r2, r3, line.value))


def all_code_objects():
    seen, out = set(), []

    def add(co):
        if id(co) in seen:
            return
        seen.add(id(co))
        out.append(co)
        for c in co.co_consts:
            if isinstance(c, types.CodeType):
                add(c)

    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType):
            add(obj.__code__)
    # Plus everything in the top level of the stdlib, compiled fresh.
    libdir = os.path.dirname(os.__file__)
    for name in sorted(os.listdir(libdir)):
        if name.endswith(".py"):
            try:
                with open(os.path.join(libdir, name), "rb") as fh:
                    add(compile(fh.read(), os.path.join(libdir, name), "exec"))
            except (SyntaxError, ValueError):
                pass
    add(compile(NONASCII_SRC, "x.py", "exec"))
    return out


def test_line_tables():
    codes = all_code_objects()
    bad_codes, total_bad = [], 0
    units = 0
    for co in codes:
        bl, ours, theirs = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        r = PLIB.t_check_lines(co, ctypes.byref(bl), ctypes.byref(ours), ctypes.byref(theirs))
        units += len(co.co_code) // 2
        if r != 0:
            total_bad += max(r, 1)
            bad_codes.append("%s:%s lasti=%d ours=%d cpython=%d (r=%d)" % (
                co.co_filename, co.co_name, bl.value, ours.value, theirs.value, r))
    record("line decoder == PyCode_Addr2Line", not bad_codes,
           "; ".join(bad_codes[:3]) or "(%d code objects, %d instructions)" % (len(codes), units))


def test_line_cache_reuse():
    """Long functions' line tables are decoded once per code object and kept: a code object
    freed and another made where it was (same address, a different table) must get its own
    lines, never the old one's. Each round compiles a long function whose lines start at a
    different first line, checks every instruction, then drops it."""
    bad = []
    body = "".join("    x = x + %d\n" % i for i in range(400))  # a line table well over 512 bytes
    addresses = set()
    for r in range(60):
        src = "\n" * r + "def long_fn(x):\n" + body + "    return x\n"
        co = [c for c in compile(src, "reuse_%d.py" % (r % 3), "exec").co_consts if isinstance(c, types.CodeType)][0]
        addresses.add(id(co))
        bl, ours, theirs = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        got = PLIB.t_check_lines(co, ctypes.byref(bl), ctypes.byref(ours), ctypes.byref(theirs))
        if got != 0:
            bad.append("round %d lasti=%d ours=%d cpython=%d" % (r, bl.value, ours.value, theirs.value))
        del co
        gc.collect()
    record("line cache: code objects at reused addresses", not bad,
           "; ".join(bad[:3]) or "(60 rounds, %d distinct addresses)" % len(addresses))


CALLBACK = ctypes.CFUNCTYPE(None)


def test_foreign_thread_callback():
    got = []

    def cb():
        got.append(Klass.static())
    cfunc = CALLBACK(cb)
    after = LIB.t_pthread_callback(ctypes.cast(cfunc, ctypes.c_void_p))
    if len(got) != 1:
        record("C thread calling into Python", False, "callback did not run")
        return
    check("C thread calling into Python", got[0])
    record("  ... after PyGILState_Release", after == 0, "(frames=%d)" % after)


def test_thread():
    results = []
    stop = threading.Event()

    def body():
        try:
            for _ in range(300):
                results.append(outer())
                results.append(run_coroutine(co_outer()))
        finally:
            stop.set()

    t = threading.Thread(target=body, name="walker")
    t.start()
    spins = 0
    while not stop.is_set():  # keep the main thread busy in Python
        spins += sum(range(200)) > 0
        recurse_noop(8)
    t.join()
    fails = []
    for r in results:
        why = compare(*r[:3])
        if not why and r[3] != 0:
            why = "gil=%d" % r[3]
        if why:
            fails.append(why)
    thread_frames = results[0][0] if results else []
    in_threading = any(f[0].endswith("threading.py") for f in thread_frames)
    record("python thread (main busy)", not fails and len(results) == 600 and in_threading,
           fails[0] if fails else "(%d walks, %d frames each, main spun %d times)" % (
               len(results), len(thread_frames), spins))


def recurse_noop(n):
    return 0 if n == 0 else recurse_noop(n - 1)


def bench():
    depth = ctypes.c_int(0)
    nfr = ctypes.c_int(0)

    def at_depth(n):
        if n > 0:
            return at_depth(n - 1)
        w = LIB.t_bench_walk(301, 2000, ctypes.byref(depth))
        r = LIB.t_bench_resolve(101, 200, ctypes.byref(nfr))
        return w, r

    def raw_at_depth(n):
        if n > 0:
            return raw_at_depth(n - 1)
        return LIB.t_bench_walk_raw(301, 2000, ctypes.byref(depth))

    base = len(traceback.extract_stack())
    w, r = at_depth(max(0, 20 - base - 1))
    print("  BENCH %s: gp_py_walk %.1f ns at depth %d (%.2f ns/frame); gp_py_resolve %.1f ns/frame (%d frames)"
          % (sys.version.split()[0], w, depth.value, w / max(depth.value, 1), r, nfr.value), flush=True)
    raw = raw_at_depth(max(0, 70 - base - 1))
    print("  BENCH %s: gp_py_walk_raw %.1f ns at depth %d (the agent's per-launch walk)"
          % (sys.version.split()[0], raw, depth.value), flush=True)


def main():
    print("python %s: %s" % (sys.version.split()[0], sys.executable), flush=True)
    if LIB.t_init() != 1:
        record("init", False, LIB.t_describe().decode())
        return 1
    test_describe()
    test_layout()
    test_gil()
    check("nested: method/closure/lambda", outer())
    check("staticmethod", Klass.static())
    check("GIL held (PyDLL call)", recurse(5, 512, PLIB), want_gil=1)
    check("generator", next(gen()))
    check("yield from", next(gen_outer()))
    check("coroutine await chain", run_coroutine(co_outer()))
    check("key func called from C", via_c_callback())
    check("class body", in_class_body())
    check("module level", MODULE_SNAPSHOT)
    test_tracing()
    test_truncation()
    test_nonascii()
    test_str_subclass_names()
    test_bad_pointers()
    test_pthread()
    test_foreign_thread_callback()
    test_thread()
    test_line_tables()
    test_line_cache_reuse()
    bench()
    failed = [n for n, ok in RESULTS if not ok]
    print("RESULT %s: %d/%d passed%s" % (sys.version.split()[0], len(RESULTS) - len(failed), len(RESULTS),
                                         "" if not failed else " FAILED: " + ", ".join(failed)), flush=True)
    return 1 if failed else 0


MODULE_SNAPSHOT = snapshot()

if __name__ == "__main__":
    sys.exit(main())
