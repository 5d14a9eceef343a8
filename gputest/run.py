#!/usr/bin/env python3
"""GPU test suite for gpurr: runs each workload under gputest/workloads bare, then under
`gpurr record`, and checks the recording with `gpurr query ... --format json`.

Every test prints one line, PASS/FAIL/SKIP NAME: reason. Exit status 1 if any test failed.
Stdlib only; needs a CUDA machine with the workloads' Python packages and a built bin/.

  python3 gputest/run.py [--only PATTERN] [--part K/N] [--bare-only] [--raw-cuda-bin PATH] [--tmp DIR]

GPURR_RESULTS=path writes a JSON summary there. Logs of every run go to TMP/logs.
"""
import argparse
import fnmatch
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WL = ROOT / "gputest" / "workloads"
SKIP_EXIT = 3  # a workload's "cannot run here" exit status
# cuBLAS kernel names seen on Hopper: cutlass/xmma "gemm"s and the cuBLAS 12.8+ "nvjet" kernels.
CUBLAS_NAME = re.compile(r"gemm|gemv|sm90|cutlass|xmma|nvjet", re.I)
CBID_LAUNCH_KERNEL, CBID_LAUNCH_KERNEL_EX = 307, 652


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def mark_line(path, tag):
    """Line number of the line that carries '# MARK: tag' (or '// MARK: tag')."""
    pat = re.compile(r"(#|//) MARK: " + re.escape(tag) + r"\s*$")
    hits = [i for i, line in enumerate(Path(path).read_text().splitlines(), 1) if pat.search(line)]
    if len(hits) != 1:
        raise Fail(f"{Path(path).name}: expected one '# MARK: {tag}' line, found {len(hits)}")
    return hits[0]


def at_line(col, path, line):
    """SQL predicate: python_line-style column 'file:line function' names this file and line."""
    f = Path(path).name
    return f"({col} LIKE '%{f}:{line} %' OR {col} LIKE '%{f}:{line}')"


def frame_at(alias, path, line):
    return f"({alias}.file LIKE '%{Path(path).name}' AND {alias}.line = {line})"


def steady(result):
    """A workload's result line without the keys it names in "varies" (thread ids, say): what a
    recorded run must print as the bare one did."""
    return {k: v for k, v in result.items() if k not in result.get("varies", ())}


def last_json(text):
    """The last stdout line that is a JSON object with a 'workload' key (gpurr may print too)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and "workload" in obj:
                return obj
    return None


def tail(text, n=3):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:])[-400:]


def truthy(v):
    return v in (1, True, "1", "true", "TRUE", "True")


class Run:
    def __init__(self, argv, rc, out, err, secs, timed_out):
        self.argv, self.rc, self.out, self.err, self.secs, self.timed_out = argv, rc, out, err, secs, timed_out

    def why(self):
        if self.timed_out:
            return f"timed out after {self.secs:.0f} s; stderr: {tail(self.err)}"
        return f"exit {self.rc}; stderr: {tail(self.err)}"


class Harness:
    def __init__(self, args):
        self.gpurr = str(Path(args.gpurr).resolve())
        self.py = args.python
        self.tmp = Path(args.tmp or tempfile.mkdtemp(prefix="gpurr-gputest-")).resolve()
        self.logs = self.tmp / "logs"
        self.recs = self.tmp / "rec"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.recs.mkdir(parents=True, exist_ok=True)
        self.bare_only = args.bare_only
        self.raw_cuda_bin = args.raw_cuda_bin
        self.nvcc = args.nvcc
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.env.pop("CUDA_INJECTION64_PATH", None)  # bare runs must be bare
        self.cache = {}
        self.bare_cache = {}
        self.recordings = []

    # --- processes ---------------------------------------------------------------------
    def sh(self, argv, timeout, log=None):
        t0 = time.monotonic()
        p = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=self.env, cwd=ROOT, start_new_session=True)
        timed_out = False
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGKILL)  # the session we started for it, nothing else
            out, err = p.communicate()
        r = Run(argv, p.returncode, out, err, time.monotonic() - t0, timed_out)
        if log:
            self.save_log(log, r)
        return r

    def save_log(self, log, r):
        (self.logs / f"{log}.out").write_text(r.out or "")
        (self.logs / f"{log}.err").write_text(
            f"$ {' '.join(map(str, r.argv))}\n# rc={r.rc} secs={r.secs:.1f} timed_out={r.timed_out}\n"
            + (r.err or ""))

    def record_argv(self, d, argv, flags=()):
        return [self.gpurr, "record", "-o", d, *flags, "--", *argv]

    def new_recdir(self, name):
        d = self.recs / name
        shutil.rmtree(d, ignore_errors=True)
        return d

    def save_info(self, name, d):
        r = self.sh([self.gpurr, "info", d], 60, log=f"{name}.info")
        return r

    # --- queries -----------------------------------------------------------------------
    def query(self, d, sql, timeout=120):
        r = self.sh([self.gpurr, "query", d, sql, "--format", "json"], timeout)
        if r.rc != 0 or r.timed_out:
            raise Fail(f"gpurr query failed ({r.why()}) for: {sql}")
        try:
            rows = json.loads(r.out)
        except ValueError as e:
            raise Fail(f"gpurr query printed no JSON ({e}): {r.out[:200]!r} for: {sql}")
        check(isinstance(rows, list), f"gpurr query printed {type(rows).__name__}, not a list, for: {sql}")
        return rows

    def one(self, d, sql):
        rows = self.query(d, sql)
        check(len(rows) == 1, f"expected one row, got {len(rows)} for: {sql}")
        return rows[0]

    def n(self, d, sql):
        """Value of the column 'n' of a one-row query."""
        v = self.one(d, sql).get("n")
        return 0 if v is None else v

    def sample(self, d, col, table="launches", where="1=1", k=5):
        rows = self.query(d, f"SELECT DISTINCT {col} AS v FROM {table} WHERE {where} LIMIT {k}")
        return [r.get("v") for r in rows]

    def drops(self, d):
        row = self.one(d, "SELECT sum(launches_dropped) AS l, sum(activities_dropped) AS a FROM stats")
        return f"(dropped: {row.get('l')} launches, {row.get('a')} activities)"

    # --- workloads ---------------------------------------------------------------------
    def workload(self, name, argv, timeout=240, flags=()):
        """Run a workload bare then recorded with gpurr record's flags (once per name);
        returns (expected_json, recording_dir).

        SKIP when the bare run says it cannot run here (exit 3); FAIL when the bare run fails
        (the workload is broken, not gpurr), when the recorded run fails, prints different
        results from the bare one, or leaves a recording whose processes are not complete."""
        if name in self.cache:
            res = self.cache[name]
            if isinstance(res, Exception):
                raise type(res)(f"{name} workload: {res}")
            return res
        try:
            res = self._workload(name, argv, timeout, flags)
        except (Fail, Skip) as e:
            self.cache[name] = e
            raise
        self.cache[name] = res
        return res

    def bare(self, name, argv, timeout):
        """The JSON result line of argv run bare. Runs once per command line: the recordings
        of one workload under different flags share it."""
        key = tuple(map(str, argv))
        if key not in self.bare_cache:
            try:
                self.bare_cache[key] = self._bare(name, argv, timeout)
            except (Fail, Skip) as e:
                self.bare_cache[key] = e
        res = self.bare_cache[key]
        if isinstance(res, Exception):
            raise type(res)(str(res))
        return res

    def _bare(self, name, argv, timeout):
        bare = self.sh(argv, timeout, log=f"{name}.bare")
        if bare.rc == SKIP_EXIT:
            said = [l[5:].strip() for l in bare.out.splitlines() if l.startswith("SKIP:")]
            raise Skip(said[-1] if said else f"workload exited 3: {tail(bare.out + bare.err, 1)}")
        if bare.rc != 0 or bare.timed_out:
            raise Fail(f"bare run of the workload failed: {bare.why()}")
        want = last_json(bare.out)
        check(want is not None, f"bare run printed no JSON result line: {tail(bare.out)}")
        if self.bare_only:
            raise Skip(f"bare run ok in {bare.secs:.1f} s: {json.dumps(want)}")
        return want

    def _workload(self, name, argv, timeout, flags):
        want = self.bare(name, argv, timeout)
        d = self.new_recdir(name)
        rec = self.sh(self.record_argv(d, argv, flags), timeout, log=f"{name}.rec")
        self.save_info(name, d)
        check(rec.rc == 0 and not rec.timed_out,
              f"under gpurr record the workload failed ({rec.why()}); bare it passed")
        got = last_json(rec.out)
        check(got is not None and steady(got) == steady(want), f"under gpurr record it printed {got}, bare {want}")
        self.recordings.append(d)
        procs = self.query(d, "SELECT process, complete, truncated FROM processes")
        check(len(procs) >= 1, "recording has no process")
        bad = [p for p in procs if not truthy(p.get("complete"))]
        check(not bad, f"program exited normally but processes are not complete: {bad}")
        return got, d

    def py_workload(self, name, script=None, args=(), **kw):
        return self.workload(name, [self.py, WL / (script or f"{name}.py"), *args], **kw)


# --- tests -------------------------------------------------------------------------------
TESTS = []


def test(name):
    def reg(fn):
        TESTS.append((name, fn))
        return fn
    return reg


@test("cli.unknown_command")
def t_unknown_command(h):
    r = h.sh([h.gpurr, "no-such-verb"], 30, log="cli.unknown_command")
    check(r.rc == 2, f"exit {r.rc}, want 2")
    lines = r.err.strip().splitlines()
    check(len(lines) == 1, f"stderr has {len(lines)} lines, want 1: {r.err[:300]!r}")
    return f"exit 2, stderr: {lines[0][:120]}"


@test("cli.query_missing_recording")
def t_query_missing(h):
    r = h.sh([h.gpurr, "query", h.tmp / "does-not-exist", "SELECT 1", "--format", "json"], 30,
             log="cli.query_missing")
    check(r.rc == 2, f"exit {r.rc}, want 2")
    lines = r.err.strip().splitlines()
    check(len(lines) == 1, f"stderr has {len(lines)} lines, want 1: {r.err[:300]!r}")
    return f"exit 2, stderr: {lines[0][:120]}"


@test("exit_code")
def t_exit_code(h):
    script = WL / "exit_code.py"
    bare = h.sh([h.py, script, "7"], 120, log="exit_code.bare")
    check(bare.rc == 7, f"bare workload exited {bare.rc} ({bare.why()}), want 7")
    if h.bare_only:
        raise Skip("bare run ok (exit 7)")
    d = h.new_recdir("exit_code")
    rec = h.sh(h.record_argv(d, [h.py, script, "7"]), 120, log="exit_code.rec")
    h.save_info("exit_code", d)
    check(rec.rc == 7, f"gpurr record exited {rec.rc}, the program 7 ({rec.why()})")
    line = mark_line(script, "exit-add")
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {at_line('python_line', script, line)}")
    check(n >= 1, f"no launch recorded at exit_code.py:{line}")
    procs = h.query(d, "SELECT complete FROM processes")
    check(procs and all(truthy(p.get("complete")) for p in procs), f"exited normally, yet complete: {procs}")
    h.recordings.append(d)
    return f"exit 7 passed through; {n} launch(es) at the marked line"


@test("eager.python_line")
def t_eager_line(h):
    want, d = h.py_workload("eager")
    script, line = WL / "eager.py", mark_line(WL / "eager.py", "eager-add")
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE python_line LIKE '%eager.py:{line} run_adds'")
    if n == 0:
        seen = h.sample(d, "python_line", where="python_line LIKE '%eager.py%'")
        raise Fail(f"no launch with python_line 'eager.py:{line} run_adds'; seen: {seen}")
    check(n % want["adds"] == 0, f"{n} launches at eager.py:{line}, not a multiple of {want['adds']} calls")
    return f"{n} launches at eager.py:{line} run_adds ({want['adds']} calls)"


@test("wheel.record")
def t_wheel_record(h):
    """The wheel pip installs (make wheel) records a PyTorch program: installed into a venv over
    the Python that has torch, its own gpurr (and agent) record eager.py, and the Python reader
    reads the launches back."""
    wheels = sorted((ROOT / "dist").glob("gpurr-*.whl"))
    if not wheels:
        raise Skip("no wheel in dist/ (make wheel builds one; carry dist)")
    venv = h.tmp / "wheel-venv"
    shutil.rmtree(venv, ignore_errors=True)
    r = h.sh([h.py, "-m", "venv", venv], 120, log="wheel.venv")
    check(r.rc == 0, f"venv: {r.why()}")
    # h.py is itself a venv's, whose packages --system-site-packages would not reach: a .pth
    # file puts torch's site-packages behind the new venv's own, as if gpurr were installed
    # into the user's torch environment.
    r = h.sh([h.py, "-c", "import site; print('\\n'.join(site.getsitepackages()))"], 60, log="wheel.site")
    own = h.sh([venv / "bin" / "python", "-c", "import site; print(site.getsitepackages()[0])"], 60, log="wheel.ownsite")
    check(r.rc == 0 and own.rc == 0, f"site-packages: {r.why()} {own.why()}")
    (Path(own.out.strip()) / "torch-env.pth").write_text(r.out)
    r = h.sh([venv / "bin" / "pip", "install", "--quiet", "--no-index", "--no-deps", wheels[-1]], 120, log="wheel.pip")
    check(r.rc == 0, f"pip install {wheels[-1].name}: {r.why()}")
    d = h.new_recdir("wheel")
    r = h.sh([venv / "bin" / "gpurr", "record", "-o", d, "--", venv / "bin" / "python", WL / "eager.py"], 240, log="wheel.record")
    check(r.rc == 0, f"the wheel's gpurr record: {r.why()}")
    code = f"import gpurr; print(gpurr.open({str(d)!r}).rows('SELECT count(*) AS n FROM launches')[0]['n'])"
    r = h.sh([venv / "bin" / "python", "-c", code], 120, log="wheel.reader")
    check(r.rc == 0 and int(r.out.strip() or 0) > 0, f"the Python reader: {r.why()} {r.out[-200:]}")
    return f"{wheels[-1].name}: recorded eager.py, {r.out.strip()} launches read back from Python"


@test("eager.callstack")
def t_eager_callstack(h):
    want, d = h.py_workload("eager")
    script, line = WL / "eager.py", mark_line(WL / "eager.py", "eager-add")
    at = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {at_line('python_line', script, line)}")
    check(at > 0, f"no launch at eager.py:{line}")
    n = h.n(d, f"""SELECT count(DISTINCT l.seq) AS n FROM launches l JOIN frames f
                   ON f.process = l.process AND f.callstack_id = l.callstack_id
                   WHERE {frame_at('f', script, line)} AND f.function = 'run_adds'""")
    if n != at:
        seen = h.sample(d, "file || ':' || line || ' ' || function", "frames", "file LIKE '%eager.py'")
        raise Fail(f"{n} of the {at} launches at eager.py:{line} have that frame (run_adds) in their "
                   f"callstack; eager.py frames seen: {seen}")
    return f"all {n} launches carry frame eager.py:{line} run_adds"


@test("eager.cublas")
def t_eager_cublas(h):
    want, d = h.py_workload("eager")
    script = WL / "eager.py"
    found = []
    for tag in ("eager-mm", "eager-mm-bf16"):
        line = mark_line(script, tag)
        rows = h.query(d, f"SELECT name, api FROM launches WHERE {at_line('python_line', script, line)}")
        ok = [r for r in rows if CUBLAS_NAME.search(r.get("name") or "")
              and (r.get("api") == CBID_LAUNCH_KERNEL_EX or "652" in str(r.get("api"))
                   or "LaunchKernelEx" in str(r.get("api")))]
        check(ok, f"{tag}: no cuBLAS-named launch via cuLaunchKernelEx (652) at eager.py:{line}; got "
                  f"{[((r.get('name') or '')[:60], r.get('api')) for r in rows][:4]}")
        found.append(ok[0]["name"][:50])
    return f"cuBLAS kernels via api 652: {found}"


@test("threads_streams.launches")
def t_threads_launches(h):
    want, d = h.py_workload("threads_streams")
    k, per = want["kernel"], want["per_thread"]
    total = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name LIKE '%{k}%'")
    check(total == want["launches_expected"],
          f"{total} launches of {k}, the program made {want['launches_expected']} {h.drops(d)}")
    corr = h.n(d, f"SELECT count(DISTINCT correlation_id) AS n FROM launches WHERE name LIKE '%{k}%'")
    check(corr == total, f"{corr} distinct correlation ids for {total} launches")
    rows = h.query(d, f"""SELECT stream_id, count(*) AS n, count(DISTINCT tid) AS tids FROM launches
                          WHERE name LIKE '%{k}%' GROUP BY stream_id""")
    check(len(rows) == want["streams"], f"{len(rows)} distinct stream_id, want {want['streams']}: {rows}")
    check(all(r["n"] == per for r in rows), f"per-stream counts {[r['n'] for r in rows]}, want {per} each")
    check(all(r["tids"] == 1 for r in rows), f"a stream's launches came from >1 thread: {rows}")
    tids = h.n(d, f"SELECT count(DISTINCT tid) AS n FROM launches WHERE name LIKE '%{k}%'")
    check(tids >= want["threads"], f"{tids} distinct tid, want >= {want['threads']}")
    return f"{total} launches = {want['threads']} threads x {per}, {len(rows)} streams, {tids} tids"


@test("threads_streams.activity")
def t_threads_activity(h):
    want, d = h.py_workload("threads_streams")
    k = want["kernel"]
    n = h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE name LIKE '%{k}%'")
    check(n == want["launches_expected"],
          f"{n} gpu_activity rows for {k}, want {want['launches_expected']} {h.drops(d)}")
    streams = h.n(d, f"SELECT count(DISTINCT stream_id) AS n FROM gpu_activity WHERE name LIKE '%{k}%'")
    check(streams == want["streams"], f"activity on {streams} streams, want {want['streams']}")
    bad = h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE name LIKE '%{k}%' "
                 f"AND NOT (end_ns > start_ns AND duration_ns = end_ns - start_ns)")
    check(bad == 0, f"{bad} activity rows with end <= start or duration != end - start")
    joined = h.n(d, f"""SELECT count(*) AS n FROM gpu_activity a JOIN launches l
                        ON l.process = a.process AND l.correlation_id = a.correlation_id
                        WHERE a.name LIKE '%{k}%'""")
    check(joined == n, f"only {joined} of {n} activity rows join a launch by correlation_id")
    return f"{n} kernel activities on {streams} streams, each joined to its launch"


@test("nvtx.jax")
def t_nvtx_jax(h):
    """JAX's named scopes reach gpurr through the NVTX ranges XLA opens around each thunk it
    runs ("Thunk:#name=jit(step)/gpurr_scope/cos,hlo_op=...#", jax_nvtx.py): at least one such
    range per call for each scoped op, ended on the thread that opened it, and the kernels XLA
    launches inside them name them. jax.profiler.TraceAnnotation is a profiler TraceMe, which
    JAX 0.11 does not send to NVTX: counted and reported, not required."""
    want, d = h.py_workload("jax_nvtx")
    p = h.one(d, "SELECT nvtx, nvtx_reason FROM processes")
    check(truthy(p.get("nvtx")), f"processes.nvtx is {p.get('nvtx')}: {p.get('nvtx_reason')}")
    seen = h.query(d, "SELECT message, count(*) AS n FROM ranges GROUP BY 1 ORDER BY n DESC LIMIT 8")
    scoped = h.query(d, "SELECT message, tid, end_ns FROM ranges WHERE message LIKE '%jit(step)/gpurr_scope%'")
    ops = {r["message"].split("hlo_op=")[-1].split(",")[0] for r in scoped}
    check(len(scoped) >= want["calls"] and ops,
          f"{len(scoped)} ranges naming jit(step)/gpurr_scope, want at least {want['calls']} "
          f"(jax {want['jax']}); ranges seen: {seen}")
    for op in ops:
        n = sum(1 for r in scoped if f"hlo_op={op}," in r["message"])
        check(n >= want["calls"], f"op {op}: {n} ranges, want one per call ({want['calls']})")
    check(all(r["end_ns"] is not None for r in scoped), "a gpurr_scope range was never ended")
    inside = h.n(d, "SELECT count(*) AS n FROM launches WHERE range LIKE '%gpurr_scope%'")
    check(inside >= want["calls"], f"{inside} launches inside a gpurr_scope range, want at least {want['calls']}")
    steps = h.n(d, "SELECT count(*) AS n FROM ranges WHERE message LIKE 'gpurr_step %'")
    total = h.n(d, "SELECT count(*) AS n FROM ranges")
    return (f"jax {want['jax']}: {len(scoped)} thunk ranges naming jit(step)/gpurr_scope "
            f"(ops {', '.join(sorted(ops))}); {inside} launches inside them; {total} ranges in all; "
            f"{steps} TraceAnnotation ranges")


@test("nvtx.ranges")
def t_nvtx_ranges(h):
    """NVTX push/pop ranges of two threads (torch.cuda.nvtx.range): every range recorded on
    the thread that pushed it, nested as pushed, and every launch made in one names the
    innermost with its path ("worker 0 / step 1 / forward"); launches outside ranges name
    none; nothing dropped."""
    want, d = h.py_workload("nvtx_ranges")
    p = h.one(d, "SELECT nvtx, nvtx_reason FROM processes")
    check(truthy(p.get("nvtx")), f"processes.nvtx is {p.get('nvtx')}: {p.get('nvtx_reason')}")
    T, S = want["threads"], want["steps"]
    dropped = h.n(d, "SELECT ranges_dropped AS n FROM stats")
    check(dropped == 0, f"stats.ranges_dropped = {dropped}")
    for t, tid in enumerate(want["tids"]):
        for s in range(S):
            for part, n in (("forward", want["forward"]), ("backward", want["backward"])):
                path = f"worker {t} / step {s} / {part}"
                rows = h.query(d, f"SELECT tid, depth, pushed, end_ns FROM ranges WHERE path = '{path}'")
                check(len(rows) == 1, f"{len(rows)} ranges with path {path!r}, want 1")
                r = rows[0]
                check(r["tid"] == tid and r["depth"] == 2 and truthy(r["pushed"]) and r["end_ns"] is not None,
                      f"range {path!r}: {r}, want tid {tid}, depth 2, pushed, ended")
                got = h.query(d, f"SELECT tid, count(*) AS n FROM launches WHERE range = '{path}' GROUP BY tid")
                check(len(got) == 1 and got[0]["n"] == n and got[0]["tid"] == tid,
                      f"launches in {path!r}: {got}, want {n} from tid {tid} {h.drops(d)}")
    bad = h.n(d, """SELECT count(*) AS n FROM launches l JOIN ranges r ON r.process = l.process
                    AND r.range_id = l.range_id WHERE r.tid != l.tid OR r.start_ns > l.host_ns
                    OR (r.end_ns IS NOT NULL AND r.end_ns < l.host_ns)""")
    check(bad == 0, f"{bad} launches name a range of another thread, or one not open when they were made")
    line = mark_line(WL / "nvtx_ranges.py", "outside-ranges")
    outside = h.query(d, f"SELECT range FROM launches WHERE {at_line('python_line', WL / 'nvtx_ranges.py', line)}")
    check(outside and all(r["range"] is None for r in outside), f"launches outside every range name one: {outside}")
    ops = h.n(d, "SELECT count(*) AS n FROM launches WHERE range LIKE '%aten::%'")
    check(ops > 0, "no launch in an emit_nvtx op range (aten::...)")
    return f"{T} threads x {S} steps of nested ranges, launches in each; {ops} launches in emit_nvtx op ranges"


@test("nvtx.start_end")
def t_nvtx_start_end(h):
    """A start/end range (torch.cuda.nvtx.range_start on the main thread, range_end on a
    worker): recorded unpushed, ended; it needs NVTX's range id as CUPTI's callback returns it."""
    want, d = h.py_workload("nvtx_ranges")
    rows = h.query(d, "SELECT tid, pushed, end_ns, duration_ns FROM ranges WHERE message = 'load'")
    check(len(rows) == 1, f"{len(rows)} ranges named load, want 1")
    r = rows[0]
    check(not truthy(r["pushed"]), f"load is recorded as a push/pop range: {r}")
    check(r["end_ns"] is not None,
          "load never ended: CUPTI's callback gave no range id for nvtxRangeStartA (functionReturnValue), "
          "or nvtxRangeEnd's did not match it")
    return f"load: {r['duration_ns']} ns, started on tid {r['tid']}, ended on a worker"


@test("nvtx.trace_info")
def t_nvtx_trace_info(h):
    """gpurr trace draws the ranges on their threads (a valid timeline) and gpurr info lists
    the top ranges by GPU time."""
    want, d = h.py_workload("nvtx_ranges")
    out = h.tmp / "nvtx_ranges.json"
    r = h.sh([h.gpurr, "trace", d, "-o", out], 120, log="nvtx_ranges.trace")
    check(r.rc == 0, f"gpurr trace: {r.why()}")
    events = json.loads(out.read_text())["traceEvents"]
    nvtx = [e for e in events if e.get("cat") == "nvtx"]
    tids = {e["tid"] for e in nvtx if e["name"] == "forward"}
    check(len(tids) == want["threads"], f"forward ranges on {len(tids)} thread tracks, want {want['threads']}")
    info = info_of(h, "nvtx_ranges", d)
    check("top NVTX ranges by GPU time" in info and "step N" in info,
          f"gpurr info lists no NVTX ranges: {tail(info, 12)}")
    return f"{len(nvtx)} range slices in the trace; info lists them"


@test("nvtx.before_cuda")
def t_nvtx_before_cuda(h):
    """A range pushed before the program's first CUDA call makes NVTX load the agent before
    the CUDA driver does: the recording is whole, the ranges pushed once CUDA is up are
    recorded with their launches, and the early range (pushed before the agent recorded) is
    not, its pop counted as dropped."""
    want, d = h.py_workload("nvtx_early")
    p = h.one(d, "SELECT nvtx, nvtx_reason FROM processes")
    check(truthy(p.get("nvtx")), f"processes.nvtx is {p.get('nvtx')}: {p.get('nvtx_reason')}")
    n = h.n(d, "SELECT count(*) AS n FROM launches WHERE range = 'after cuda'")
    check(n == want["launches_in_range"], f"{n} launches in 'after cuda', want {want['launches_in_range']} {h.drops(d)}")
    early = h.n(d, "SELECT count(*) AS n FROM ranges WHERE message = 'before cuda'")
    check(early == 0, f"{early} ranges 'before cuda' recorded: it was pushed before the agent started")
    dropped = h.n(d, "SELECT ranges_dropped AS n FROM stats")
    check(dropped == 1, f"stats.ranges_dropped = {dropped}, want 1 (the early range's pop)")
    return f"{n} launches in 'after cuda'; the early range's pop counted as dropped"


@test("nvtx.injection_kept")
def t_nvtx_kept(h):
    """A user's own NVTX_INJECTION64_PATH (another tool) is kept: the program runs, gpurr record
    warns, and the recording says why it holds no ranges."""
    if h.bare_only:
        raise Skip("--bare-only: needs gpurr")
    other = "/nonexistent/libother_nvtx_tool.so"
    saved = h.env
    h.env = dict(saved, NVTX_INJECTION64_PATH=other)
    try:
        want, d = h.workload("nvtx_kept", [h.py, WL / "nvtx_ranges.py"])
    finally:
        h.env = saved
    err = (h.logs / "nvtx_kept.rec.err").read_text()
    check("NVTX ranges are not recorded" in err, f"gpurr record did not warn: {tail(err)}")
    p = h.one(d, "SELECT nvtx, nvtx_reason FROM processes")
    check(not truthy(p["nvtx"]) and other in (p["nvtx_reason"] or ""), f"processes: {p}")
    n = h.n(d, "SELECT count(*) AS n FROM ranges")
    check(n == 0, f"{n} ranges recorded through another tool's injection")
    return f"kept; recording says: {p['nvtx_reason']}"


def graph_lines(want):
    return {tag: mark_line(WL / "graphs.py", tag) for tag in want["marks"]}


@test("graphs.capture")
def t_graphs_capture(h):
    want, d = h.py_workload("graphs")
    script, lines = WL / "graphs.py", graph_lines(want)
    per_line = {}
    for tag, line in lines.items():
        per_line[tag] = h.n(d, f"SELECT count(*) AS n FROM launches WHERE captured = 1 AND "
                               f"{at_line('python_line', script, line)}")
        check(per_line[tag] >= 1, f"no captured launch at graphs.py:{line} ({tag}); captured lines seen: "
                                  f"{h.sample(d, 'python_line', where='captured = 1')}")
    captured = h.n(d, "SELECT count(*) AS n FROM launches WHERE captured = 1")
    check(captured == sum(per_line.values()),
          f"{captured} captured launches, {sum(per_line.values())} of them at the marked lines")
    any_line = " OR ".join(at_line("python_line", script, l) for l in lines.values())
    eager = h.n(d, f"SELECT count(*) AS n FROM launches WHERE captured = 0 AND ({any_line})")
    check(eager == want["warmup"] * captured,
          f"{eager} eager launches at the marked lines, want warmup {want['warmup']} x {captured}")
    glaunch = h.n(d, "SELECT count(*) AS n FROM graph_launches")
    check(glaunch == want["replays"], f"{glaunch} graph_launches, the program replayed {want['replays']}")
    return f"{captured} captured launches {per_line}, {eager} eager, {glaunch} graph launches"


@test("graphs.replay_lines")
def t_graphs_replay(h):
    want, d = h.py_workload("graphs")
    script, lines = WL / "graphs.py", graph_lines(want)
    captured = h.n(d, "SELECT count(*) AS n FROM launches WHERE captured = 1")
    check(captured > 0, "no captured launches")
    via = h.n(d, "SELECT count(*) AS n FROM gpu_activity WHERE via_graph = 1")
    check(via == want["replays"] * captured,
          f"{via} kernel activities via graph, want {want['replays']} replays x {captured} {h.drops(d)}")
    for tag, line in lines.items():
        cap = h.n(d, f"SELECT count(*) AS n FROM launches WHERE captured = 1 AND "
                     f"{at_line('python_line', script, line)}")
        got = h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE via_graph = 1 AND "
                     f"{at_line('python_line', script, line)}")
        check(got == want["replays"] * cap,
              f"{got} replayed kernels carry graphs.py:{line} ({tag}), want {want['replays']} x {cap}; "
              f"lines seen: {h.sample(d, 'python_line', table='gpu_activity', where='via_graph = 1')}")
    return f"{via} replayed kernels, each with its capture-time line"


@test("triton")
def t_triton(h):
    want, d = h.py_workload("triton_kernel")
    script, line = WL / "triton_kernel.py", mark_line(WL / "triton_kernel.py", "triton-launch")
    k = want["kernel"]
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name LIKE '%{k}%'")
    check(n == want["launches_expected"], f"{n} launches of {k}, want {want['launches_expected']} {h.drops(d)}")
    grid = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name LIKE '%{k}%' AND grid_x = {want['grid_x']}")
    check(grid == n, f"{n - grid} launches of {k} with grid_x != {want['grid_x']}")
    framed = h.n(d, f"""SELECT count(DISTINCT l.seq) AS n FROM launches l JOIN frames f
                        ON f.process = l.process AND f.callstack_id = l.callstack_id
                        WHERE l.name LIKE '%{k}%' AND {frame_at('f', script, line)}""")
    check(framed == n, f"{framed} of {n} Triton launches have triton_kernel.py:{line} in their callstack")
    mod = h.n(d, f"""SELECT count(*) AS n FROM kernels k JOIN modules m
                     ON m.process = k.process AND m.sha256 = k.module_sha256 WHERE k.name LIKE '%{k}%'""")
    check(mod >= 1, f"kernel {k} has no module in the modules table")
    # The module is byte for byte a cubin of Triton's cache: its PTX is stored beside it.
    rows = h.query(d, f"""SELECT m.sha256, m.ptx FROM kernels k JOIN modules m
                          ON m.process = k.process AND m.sha256 = k.module_sha256 WHERE k.name LIKE '%{k}%'""")
    check(rows and rows[0]["ptx"] == "triton-cache", f"modules.ptx of {k}'s module: {rows}")
    ptx = (Path(d) / "modules" / f"{rows[0]['sha256']}.ptx").read_text()
    check(f".entry {k}" in ptx, f"the stored PTX has no .entry {k}: {ptx[:200]!r}")
    # From that PTX the writer proves which parameter words no store goes through: an
    # elementwise Triton kernel stores through its output only.
    proved = h.query(d, f"""SELECT p.param, p.proved_read_only FROM kernel_params p JOIN kernels k
                            ON k.process = p.process AND k.kernel_id = p.kernel_id WHERE k.name LIKE '%{k}%'""")
    check(any(truthy(r["proved_read_only"]) for r in proved) and not all(truthy(r["proved_read_only"]) for r in proved),
          f"proved_read_only of {k}'s parameters: {proved}")
    return f"{n} launches of {k}, grid_x={want['grid_x']}, all with the user's line in their callstack; its PTX stored from Triton's cache"


@test("compiled")
def t_compiled(h):
    want, d = h.py_workload("compiled", timeout=400)
    script, line = WL / "compiled.py", mark_line(WL / "compiled.py", "compiled-call")
    calls = want["calls"]
    base = f"""FROM launches l JOIN frames f ON f.process = l.process AND f.callstack_id = l.callstack_id
               WHERE {frame_at('f', script, line)}"""
    n = h.n(d, f"SELECT count(DISTINCT l.seq) AS n {base}")
    check(n >= calls and n % calls == 0,
          f"{n} launches with compiled.py:{line} in their callstack, want a non-zero multiple of {calls}")
    tri = h.n(d, f"SELECT count(DISTINCT l.seq) AS n {base} AND l.name LIKE 'triton%'")
    check(tri >= calls, f"{tri} Inductor (triton_*) launches from the marked line, want >= {calls}; names: "
                        f"{h.sample(d, 'name')}")
    return f"{n} launches from {calls} compiled calls, {tri} of them Inductor Triton kernels"


def raw_cuda_binary(h):
    """The raw_cuda workload binary: --raw-cuda-bin, else built here with nvcc."""
    binary = h.raw_cuda_bin
    if not binary:
        nvcc = h.nvcc if Path(h.nvcc).exists() else shutil.which("nvcc")
        if not nvcc:
            raise Skip("no nvcc to build raw_cuda.cu and no --raw-cuda-bin given")
        binary = h.tmp / "raw_cuda"
        if not binary.exists():
            r = h.sh([nvcc, "-O2", "-o", binary, WL / "raw_cuda.cu", "-lcuda"], 300, log="raw_cuda.nvcc")
            check(r.rc == 0, f"nvcc failed: {r.why()}")
    check(Path(binary).exists(), f"{binary} does not exist (did nvcc fail?)")
    return binary


def frame_chain(h, d, kernel, names, where="1=1"):
    """Checks that every launch of kernel (that satisfies where) has a native callstack holding
    functions that start with names, innermost first, at increasing depths; returns the number
    of launches and the functions of one stack."""
    sel = f"FROM launches WHERE name LIKE '%{kernel}%' AND {where}"
    launches = h.n(d, f"SELECT count(*) AS n {sel}")
    check(launches > 0, f"no launch of {kernel} recorded")
    stacks = h.query(d, f"SELECT DISTINCT callstack_id AS id {sel}")
    for s in stacks:
        frames = h.query(d, f"SELECT depth, function, file FROM frames WHERE callstack_id = {s['id']} ORDER BY depth")
        funcs = [f.get("function") or "" for f in frames]
        at = -1
        for name in names:
            hit = [i for i, f in enumerate(funcs) if f.startswith(name) and i > at]
            check(hit, f"callstack {s['id']} of {kernel} has no frame {name!r} after depth {at}; frames: "
                       f"{[(f['depth'], f.get('function'), Path(f.get('file') or '').name) for f in frames][:24]}")
            at = hit[0]
    return launches, funcs


@test("native.symbols_cpp")
def t_native_cpp(h):
    """A C++ program (nvcc -O2, no -g) launches through three static functions, which only the
    executable's symbol table names: native callstacks name them, innermost first, then main."""
    binary = raw_cuda_binary(h)
    want, d = h.workload("raw_cuda.native", [binary], flags=["--callstack", "native"])
    n, funcs = frame_chain(h, d, want["drv_kernel"],
                           ["drv_launch_inner", "drv_launch_middle", "drv_launch_outer", "main"],
                           where=f"api = {CBID_LAUNCH_KERNEL}")
    return f"{n} launches; frames: {' > '.join(f for f in funcs if f)[:160]}"


@test("native.symbols_go")
def t_native_go(h):
    """A Go program launching through cgo (bin/cgolaunch, built by make): its static C functions
    and cgo's wrapper are named from the Go binary's symbol table."""
    binary = ROOT / "bin" / "cgolaunch"
    if not binary.exists():
        raise Fail(f"{binary} is missing: make builds it")
    want, d = h.workload("cgolaunch", [binary], flags=["--callstack", "native"])
    n, funcs = frame_chain(h, d, want["kernel"], ["cgolaunch_inner", "cgolaunch_outer"])
    check(any("_Cfunc_cgolaunch_outer" in f for f in funcs), f"no cgo wrapper frame named; frames: {funcs[:16]}")
    check(n == want["launches"], f"{n} launches recorded, want {want['launches']} {h.drops(d)}")
    return f"{n} launches; frames: {' > '.join(f for f in funcs if f)[:160]}"


def backward_rows(h, d):
    """The training process's autograd context (torch.compile's compile workers are processes
    too) and its backward launches, each with its user_line: the forward line."""
    main = "(SELECT process FROM launches GROUP BY process ORDER BY count(*) DESC LIMIT 1)"
    proc = h.one(d, f"SELECT torch_version, autograd_linked, autograd_reason FROM processes WHERE process = {main}")
    check(truthy(proc.get("autograd_linked")), f"backward launches not linked: {proc}")
    rows = h.query(d, "SELECT seq, tid, name, backward_node AS node, user_line AS line, forward_link AS link "
                      f"FROM launches WHERE backward_node IS NOT NULL AND process = {main}")
    check(rows, "no launch recorded as made in backward")
    return proc, rows


@test("autograd.forward_lines")
def t_autograd_lines(h):
    """A two-layer model's backward kernels run on autograd's engine thread: each names the
    forward line of the op whose backward it is (the matmuls' backward GEMMs their matmul line),
    in query, info and trace."""
    script = WL / "autograd_lines.py"
    marks = {t: mark_line(script, t) for t in ("fwd-mm1", "fwd-relu", "fwd-mm2", "fwd-loss")}
    want, d = h.py_workload("autograd_lines")
    proc, rows = backward_rows(h, d)
    on = lambda r, t: f"autograd_lines.py:{marks[t]} " in (r.get("line") or "")
    stray = [r for r in rows if r["node"] != "AccumulateGrad" and not any(on(r, t) for t in marks)]
    check(not stray, f"{len(stray)} of {len(rows)} backward launches name no marked forward line: {stray[:4]}")
    mm = [r for r in rows if r["node"] == "MmBackward0"]
    check(mm, f"no MmBackward0 launch; nodes: {sorted({r['node'] for r in rows})}")
    check(all(CUBLAS_NAME.search(r["name"]) and (on(r, "fwd-mm1") or on(r, "fwd-mm2")) for r in mm),
          f"MmBackward0 launches that are not GEMMs at a matmul line: {[r for r in mm if not on(r, 'fwd-mm1') and not on(r, 'fwd-mm2')][:3]}")
    check(any(on(r, "fwd-mm1") for r in mm) and any(on(r, "fwd-mm2") for r in mm),
          "the backward GEMMs do not cover both matmul lines")
    relu = [r for r in rows if r["node"] == "ReluBackward0"]
    check(relu and all(on(r, "fwd-relu") for r in relu), f"ReluBackward0 launches: {relu[:3]}")
    exact = sum(1 for r in rows if r.get("link") == "next_launch")
    fwd_tid = h.one(d, f"SELECT tid FROM launches WHERE {at_line('user_line', script, marks['fwd-mm1'])} "
                       "AND backward_node IS NULL LIMIT 1").get("tid")
    check(all(r["tid"] != fwd_tid for r in rows), "backward launches on the forward thread: not autograd's engine")
    info = info_of(h, "autograd_lines", d)
    check(f"autograd_lines.py:{marks['fwd-mm1']}" in info and "backward" in info,
          f"gpurr info's top lines do not show the forward lines of backward launches:\n{tail(info, 30)}")
    out = h.tmp / "autograd_lines.trace.json"
    r = h.sh([h.gpurr, "trace", d, "-o", out], 120, log="autograd_lines.trace")
    check(r.rc == 0, f"gpurr trace: {r.why()}")
    ev = json.loads(out.read_text())
    ev = ev.get("traceEvents", ev) if isinstance(ev, dict) else ev
    slices = [e for e in ev if isinstance(e, dict) and (e.get("args") or {}).get("backward_node") == "MmBackward0"]
    check(slices and all(f"autograd_lines.py:" in str(e["args"].get("python_line")) for e in slices),
          f"no trace slice of MmBackward0 with its forward python_line: {slices[:2]}")
    # PowBackward0's forward op is `** 2` through torch's Tensor.__pow__: python_line is in torch,
    # user_line the model's line.
    pw = h.query(d, "SELECT DISTINCT python_line AS p, user_line AS u FROM launches WHERE backward_node = 'PowBackward0'")
    check(pw and all(on({"line": r["u"]}, "fwd-loss") for r in pw), f"PowBackward0's lines: {pw}")
    nodes = sorted({r["node"] for r in rows})
    return (f"torch {proc.get('torch_version')}: {len(rows)} backward launches ({exact} exact), nodes "
            f"{', '.join(nodes)[:120]}; all at marked forward lines; info and trace agree")


@test("autograd.nan_backward")
def t_autograd_nan(h):
    """A NaN first made by a backward kernel (SqrtBackward0: 0 / (2 * sqrt(0))): gpurr nan names
    the backward node and the forward line whose backward produced it."""
    script = WL / "autograd_lines.py"
    line = mark_line(script, "fwd-sqrt")
    _, d = h.py_workload("autograd_lines.nan", script="autograd_lines.py", args=["--nan"],
                         flags=["--memory", "hash", "--nan-scan", "f32"])
    r = h.sh([h.gpurr, "nan", d, "--dtype", "f32"], 120, log="autograd_lines.nan.nan")
    check(r.rc == 1, f"gpurr nan exit {r.rc}, want 1 (found): {r.why()} {r.out[:400]}")
    check("SqrtBackward0" in r.out and f"autograd_lines.py:{line}" in r.out,
          f"gpurr nan does not name SqrtBackward0 and autograd_lines.py:{line}:\n{r.out[:1200]}")
    at = [l.strip() for l in r.out.splitlines() if "SqrtBackward0" in l]
    return f"{at[0][:120]}"


@test("autograd.compiled")
def t_autograd_compiled(h):
    """The same model under torch.compile: the compiled backward runs as one autograd node
    (CompiledFunctionBackward) whose launches link to the forward launches of the compiled call,
    made from the marked call line. The loss, outside the model, stays eager."""
    script = WL / "autograd_lines.py"
    line = mark_line(script, "call")
    _, d = h.py_workload("autograd_lines.compiled", script="autograd_lines.py", args=["--compile"], timeout=400)
    proc, rows = backward_rows(h, d)
    nodes = sorted({r["node"] for r in rows})
    compiled = [r for r in rows if r["node"] == "CompiledFunctionBackward"]
    check(compiled, f"no launch in CompiledFunctionBackward; backward nodes {nodes}")
    linked = h.n(d, f"""SELECT count(DISTINCT l.seq) AS n FROM launches l JOIN frames f
                        ON f.process = l.process AND f.callstack_id = l.forward_callstack_id
                        WHERE l.backward_node = 'CompiledFunctionBackward' AND {frame_at('f', script, line)}""")
    check(linked == len(compiled), f"{linked} of {len(compiled)} compiled backward launches link to a forward "
                                   f"callstack through autograd_lines.py:{line}; user lines "
                                   f"{sorted({r.get('line') for r in compiled})[:4]}")
    return (f"{len(compiled)} launches of CompiledFunctionBackward, all linked through autograd_lines.py:{line}; "
            f"user_line {sorted({r.get('line') for r in compiled})[0]}")


@test("cupy_raw")
def t_cupy(h):
    want, d = h.py_workload("cupy_raw")
    k = want["kernel"]
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{k}'")
    check(n == want["launches_expected"], f"{n} launches of {k}, want {want['launches_expected']} {h.drops(d)}")
    dims = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{k}' AND grid_x = {want['grid_x']} "
                  f"AND grid_y = 1 AND block_x = {want['block_x']} AND block_y = 1")
    check(dims == n, f"{n - dims} launches with wrong dims (want grid {want['grid_x']}, block {want['block_x']})")
    api = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{k}' AND "
                 f"(api = {CBID_LAUNCH_KERNEL} OR api LIKE '%cuLaunchKernel')")
    check(api == n, f"{n - api} launches not via cuLaunchKernel (307): {h.sample(d, 'api')}")
    rows = h.query(d, f"""SELECT k.param_count AS pc, k.param_bytes AS pb, m.kernel_count AS kc
                          FROM kernels k JOIN modules m ON m.process = k.process AND m.sha256 = k.module_sha256
                          WHERE k.name = '{k}'""")
    check(len(rows) == 1, f"{len(rows)} rows for {k} in kernels joined to modules, want 1")
    r = rows[0]
    check(r["pc"] == want["param_count"] and r["pb"] == want["param_bytes"],
          f"param_count/bytes {r['pc']}/{r['pb']}, want {want['param_count']}/{want['param_bytes']}")
    check(r["kc"] >= 1, f"its module says kernel_count {r['kc']}")
    return f"{n} launches, params {r['pc']}/{r['pb']} B, module with {r['kc']} kernel(s)"


@test("torchrun_ranks")
def t_torchrun(h):
    """torchrun starts 2 ranks; each must get its own recording tagged with its rank."""
    script = WL / "torchrun_ranks.py"
    want, d = h.workload("torchrun_ranks", [h.py, "-m", "torch.distributed.run", "--standalone",
                                            "--nproc-per-node", "2", script])
    # torchrun's own process may initialize CUDA (and so be recorded) without launching.
    procs = h.query(d, "SELECT process, rank, local_rank, world_size FROM processes p WHERE EXISTS "
                       "(SELECT 1 FROM launches l WHERE l.process = p.process) ORDER BY rank")
    check([(p["rank"], p["local_rank"], p["world_size"]) for p in procs] == [(0, 0, 2), (1, 1, 2)],
          f"processes that launched (rank, local_rank, world_size): {procs}, want ranks 0 and 1 of 2")
    line = mark_line(script, "rank-add")
    rows = h.query(d, f"SELECT process, count(*) AS n FROM launches WHERE {at_line('python_line', script, line)} "
                      "GROUP BY process ORDER BY process")
    counts = [r["n"] for r in rows]
    check(len(counts) == 2 and all(c == want["launches_per_rank"] for c in counts),
          f"launches at torchrun_ranks.py:{line} per process: {rows}, want {want['launches_per_rank']} each")
    return f"2 recordings, ranks 0 and 1 of 2, {counts[0]} launches at the marked line in each"


@test("demo.story")
def t_demo_story(h):
    """gpurr demo on a GPU records the story's two runs and walks through them: diff finds
    where they part ways, nan the overflow's NaN, and the replay of that launch is bit-exact."""
    out = h.tmp / "demo-story"
    shutil.rmtree(out, ignore_errors=True)
    r = h.sh([h.gpurr, "demo", "-o", out], 300, log="demo.story")
    check(r.rc == 0, f"gpurr demo: {r.why()}")
    for want in ["the runs part ways at launch", "NaN or Inf first after launch", "$ gpurr replay", "bit-exact"]:
        check(want in r.out, f"the walk lacks {want!r}: {r.out[-600:]}")
    check((out / "a").is_dir() and (out / "b").is_dir(), f"no recordings kept in {out}")
    return "story recorded on the GPU; diff, nan and a bit-exact replay of the NaN's launch"


def build_cu_with_ptx(h, name):
    """Build gputest/workloads/NAME.cu with nvcc twice: a program (-O2 -lineinfo) and its
    kernels' PTX for sm_90 (-lineinfo: the PTX's .loc lines name NAME.cu), which gpurr race and
    probe take with --ptx. Returns (program, ptx file)."""
    nvcc = h.nvcc if Path(h.nvcc).exists() else shutil.which("nvcc")
    if not nvcc:
        raise Skip(f"no nvcc to build {name}.cu")
    src, binary, ptxfile = WL / f"{name}.cu", h.tmp / name, h.tmp / f"{name}.ptx"
    for args, out in ((["-O2", "-lineinfo", "-o"], binary), (["-ptx", "-lineinfo", "-arch=sm_90", "-o"], ptxfile)):
        r = h.sh([nvcc, *args, out, src], 300, log=f"{name}.nvcc")
        check(r.rc == 0, f"nvcc {name}.cu: {r.why()}")
    return binary, ptxfile


def race_lines(r, *words):
    """The lines of gpurr race's output holding any of words, joined for a test's summary."""
    return " | ".join(l.strip() for l in r.out.splitlines() if any(w in l for w in words))[:300]


@test("race.planted")
def t_race_planted(h):
    """gpurr race on a kernel whose missing barrier is planted (racy.cu): --list names the
    shared store and load with their source lines, and a hunt finds a witness and shrinks it
    to the racing instructions."""
    binary, ptxfile = build_cu_with_ptx(h, "racy")
    _, d = h.workload("racy", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "racy_neighbour"])
    listed = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--list", "--at", "shared-store,shared-load"], 120, log="race.list")
    check(listed.rc == 0 and "racy.cu:" in listed.out, f"race --list: {listed.why()} {listed.out[-400:]}")
    hunt = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--at", "shared-store,shared-load,barrier",
                 "--trials", "30", "--placement", "warp", "--fraction", "0.5", "--delay", "20us"], 600, log="race.hunt")
    check(hunt.rc == 1 and "RACE" in hunt.out, f"race found no witness: exit {hunt.rc}: {hunt.out[-600:]} {hunt.err[-300:]}")
    check("st.shared" in hunt.out, f"the witness does not name the shared store: {hunt.out[-600:]}")
    return race_lines(hunt, "RACE", "st.shared", "from the plain replay", "per second")


@test("race.correct")
def t_race_correct(h):
    """racy.cu's kernel with its barrier (race_free.cu): 200 trials of the delays that expose
    racy.cu's race change nothing, so gpurr race reports no witness and exits 0."""
    binary, ptxfile = build_cu_with_ptx(h, "race_free")
    _, d = h.workload("race_free", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "synced_neighbour"])
    hunt = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--at", "shared-store,shared-load,barrier",
                 "--trials", "200", "--placement", "warp", "--fraction", "0.5", "--delay", "20us"], 300, log="race.correct")
    check(hunt.rc == 0 and "no trial of 200 changed the result" in hunt.out and "RACE" not in hunt.out,
          f"race on a correct kernel: exit {hunt.rc}: {hunt.out[-600:]} {hunt.err[-300:]}")
    check(hunt.secs < 60, f"200 trials took {hunt.secs:.0f} s, want under 60")
    return f"{race_lines(hunt, 'no trial', 'per second')} ({hunt.secs:.1f} s)"


@test("race.roundtrip")
def t_race_roundtrip(h):
    """Parse, print, JIT keeps what the kernel computes: gpurr race --trials 0 replays the
    launch from its PTX as gpurr's parser and printer give it back, without delays, and the
    result must equal the recording (which the plain replay of the nvcc-built cubin reproduces
    bit for bit) in every region."""
    binary, ptxfile = build_cu_with_ptx(h, "race_free")
    _, d = h.workload("race_free", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "synced_neighbour"])
    plain = h.sh([h.gpurr, "replay", d], 120, log="race.roundtrip.replay")
    check(plain.rc == 0 and "bit-exact" in plain.out, f"plain replay of the recorded cubin: {plain.why()} {plain.out[-400:]}")
    r = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--trials", "0"], 120, log="race.roundtrip")
    check(r.rc == 0 and "plain replay of the PTX as gpurr prints it: identical to the recording" in r.out,
          f"race --trials 0: exit {r.rc}: {r.out[-600:]} {r.err[-300:]}")
    return race_lines(r, "plain replay")


@test("race.bad_input")
def t_race_bad_input(h):
    """gpurr race on input it cannot hunt gives one line on stderr and exit 2: a launch whose
    module has no PTX in the recording (nvcc's cubin), the kernel's PTX rewritten to target an
    architecture this GPU cannot JIT for (sm_100), and --all over a recording whose one launch
    has no PTX."""
    binary, ptxfile = build_cu_with_ptx(h, "race_free")
    _, d = h.workload("race_free", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "synced_neighbour"])
    newer = h.tmp / "race_free.sm100.ptx"
    text = Path(ptxfile).read_text()
    check(".target sm_90" in text, f"{ptxfile.name} has no .target sm_90")
    newer.write_text(text.replace(".target sm_90", ".target sm_100"))
    got = []
    for name, args, want in (("no PTX", [], "has no PTX of synced_neighbour's module"),
                             ("sm_100 PTX", ["--ptx", newer], "cannot replay the launch"),
                             ("--all, no PTX", ["--all"], "none of the 1 launch could be hunted")):
        r = h.sh([h.gpurr, "race", d, *args], 120, log=f"race.bad_input.{name.replace(' ', '_').replace(',', '')}")
        lines = r.err.strip().splitlines()
        check(r.rc == 2 and len(lines) == 1 and want in lines[0],
              f"{name}: exit {r.rc}, stderr {r.err.strip()[-400:]!r}; want exit 2 and one line with {want!r}")
        got.append(f"{name}: {lines[0][:90]}")
    return " | ".join(got)


@test("race.hang")
def t_race_hang(h):
    """A hand-off that deadlocks when its producer warp is late (delay_hang.cu): a trial that
    delays the producer's store makes the kernel spin forever; gpurr race's watchdog reports
    the hang with the delay points at their source line and ends the process, exit 1."""
    binary, ptxfile = build_cu_with_ptx(h, "delay_hang")
    _, d = h.workload("delay_hang", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "handoff"])
    r = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--at", "global-store", "--placement", "warp",
              "--fraction", "0.5", "--delay", "200us", "--trials", "20"], 180, log="race.hang")
    line = mark_line(WL / "delay_hang.cu", "producer-store")
    check(r.rc == 1 and "HANG" in r.out, f"race on delay_hang: exit {r.rc}: {r.out[-600:]} {r.err[-300:]}")
    check(f"delay_hang.cu:{line}" in r.out, f"the hang's delay points do not name delay_hang.cu:{line}: {r.out[-600:]}")
    return race_lines(r, "HANG", "delay_hang.cu")


@test("race.atomics")
def t_race_atomics(h):
    """A kernel that sums floats with atomicAdd into one cell from 256 CTAs (float_atomics.cu):
    its plain replays disagree, so gpurr race calls it nondeterministic, names the bytes of the
    sum that vary, runs no trial and exits 1."""
    binary, ptxfile = build_cu_with_ptx(h, "float_atomics")
    _, d = h.workload("float_atomics", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "atomic_sum"])
    r = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--at", "atomic", "--plain-runs", "10"], 120, log="race.atomics")
    check(r.rc == 1 and "nondeterministic without any delay" in r.out and "RACE" not in r.out,
          f"race on float atomics: exit {r.rc}: {r.out[-600:]} {r.err[-300:]}")
    # The sum is the one float that varies: the first differing byte lies within it.
    spread = re.search(r"region \d+: (\d+) bytes? of (\d+) differ between plain replays, the first at byte (\d+)", r.out)
    check(spread and 1 <= int(spread[1]) <= 4 and int(spread[3]) < 4, f"which bytes vary: {r.out[-600:]}")
    return race_lines(r, "nondeterministic", "differ between")


@test("race.triton_cta")
def t_race_triton_cta(h):
    """A Triton split reduction whose program 0 reads the others' partial sums without waiting
    (triton_race.py), recorded with its PTX from Triton's cache: gpurr race with whole CTAs
    delayed before their global stores finds the race and shrinks it to the partial's store
    at its source line; --all and --kernels say the same in one line."""
    _, d = h.py_workload("triton_race", flags=["--memory", "snapshot", "--snapshot-kernels", "gpurr_split_sum"])
    line = mark_line(WL / "triton_race.py", "partial-store")
    flags = ["--at", "global-store", "--placement", "cta", "--fraction", "0.5", "--delay", "200us", "--trials", "20"]
    hunt = h.sh([h.gpurr, "race", d, *flags], 300, log="race.triton_cta")
    check(hunt.rc == 1 and "RACE" in hunt.out, f"race found no witness: exit {hunt.rc}: {hunt.out[-600:]} {hunt.err[-300:]}")
    check("PTX from the recording" in hunt.out, f"the PTX did not come from the recording: {hunt.out[:300]}")
    witness = [l for l in hunt.out.splitlines() if "st.global" in l]
    check(witness and all(f"triton_race.py:{line}" in l for l in witness),
          f"the witness is not the partial's store at triton_race.py:{line}: {hunt.out[-600:]}")
    many = h.sh([h.gpurr, "race", d, "--kernels", "split_sum", *flags], 300, log="race.triton_cta.kernels")
    check(many.rc == 1 and sum("RACE at" in l for l in many.out.splitlines()) == 1 and f"triton_race.py:{line}" in many.out,
          f"race --kernels: exit {many.rc}: {many.out[-600:]} {many.err[-300:]}")
    return race_lines(hunt, "RACE", "st.global", "from the plain replay", "per second")


@test("probe.slow_cta")
def t_probe_slow_cta(h):
    """gpurr probe on a kernel whose CTA 7 spins ~200 µs: the probe table names CTA 7 the
    slowest, and says the span is mostly tail; --count global-store counts each thread's one
    store."""
    binary, ptxfile = build_cu_with_ptx(h, "slowcta")
    _, d = h.workload("slowcta", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "slow_cta"])
    timeline = h.tmp / "slowcta-probe.json"
    timeline.unlink(missing_ok=True)
    r = h.sh([h.gpurr, "probe", d, "--ptx", ptxfile, "--top", "3", "--count", "global-store", "-o", timeline], 300,
             log="probe.run")
    check(r.rc == 0, f"gpurr probe: {r.why()}")
    lines = r.out.splitlines()
    i = next((k for k, l in enumerate(lines) if "slowest CTAs" in l), None)
    check(i is not None and lines[i + 2].split()[0] == "7", f"CTA 7 is not the slowest: {r.out[-600:]}")
    # Each of the 64 CTAs' 128 threads stores once.
    check("8192 run in all; per CTA median 128, max 128" in r.out, f"the store count is not 64 x 128: {r.out[-600:]}")
    events = json.loads(timeline.read_text())["traceEvents"]
    check(sum(e["ph"] == "X" for e in events) == 64, "the timeline does not hold a slice per CTA")
    return " | ".join(l.strip() for l in lines[1:4] + [l for l in lines if "count of" in l])[:400]


@test("probe.live")
def t_probe_live(h):
    """gpurr record --probe on a PyTorch program whose two threads each launch a Triton kernel
    20 times on their own streams, program 5 of 48 running a long loop (probe_live.py): the
    program's results stay right; the picked kernel is instrumented and the other Triton kernel
    is not; every launch of it has a record for each of its 48 CTAs, CTA 5 the slowest in every
    one; launches from both threads; --count global-store counts the same stores in every CTA;
    gpurr probe reads a launch from the recording without replaying it."""
    _, d = h.py_workload("probe_live", flags=["--probe", "gpurr_probe_slow:entry,exit,global-store"])
    kernels = h.query(d, "SELECT name, instrumented, reason, counted FROM probe_kernels")
    check(kernels and all("gpurr_probe_slow" in k["name"] and k["instrumented"] for k in kernels),
          f"probe_kernels: {kernels}")
    check(all(k["counted"] > 0 for k in kernels), f"no global-store counted in the kernel: {kernels}")
    n = h.one(d, "SELECT count(DISTINCT p.launch_seq) AS launches, count(*) AS ctas, count(DISTINCT l.tid) AS threads "
                 "FROM probe_ctas p JOIN launches l ON l.seq = p.launch_seq AND l.process = p.process")
    launched = h.one(d, "SELECT count(*) AS n FROM launches l JOIN kernels k ON k.kernel_id = l.kernel_id "
                        "AND k.process = l.process WHERE k.name LIKE '%gpurr_probe_slow%'")["n"]
    check(launched == 40 and n["launches"] == 40 and n["ctas"] == 40 * 48 and n["threads"] == 2,
          f"{launched} launches of the kernel; probe records: {n}")
    slowest = h.query(d, "SELECT launch_seq, cta FROM probe_ctas p WHERE duration_ns = "
                         "(SELECT max(duration_ns) FROM probe_ctas q WHERE q.launch_seq = p.launch_seq)")
    check(len(slowest) == 40 and all(r["cta"] == 5 for r in slowest), f"the slowest CTAs: {slowest[:10]}")
    counts = h.one(d, "SELECT min(count) AS lo, max(count) AS hi FROM probe_ctas")
    check(counts["lo"] > 0 and counts["lo"] == counts["hi"], f"global-store counts per CTA: {counts}")
    seq = slowest[0]["launch_seq"]
    r = h.sh([h.gpurr, "probe", d, "--launch", str(seq), "--top", "2"], 120, log="probe.live.read")
    check(r.rc == 0 and "probed live" in r.out, f"gpurr probe --launch {seq}: {r.why()} {r.out[-400:]}")
    lines = r.out.splitlines()
    i = next((k for k, l in enumerate(lines) if "slowest CTAs" in l), None)
    check(i is not None and lines[i + 2].split()[0] == "5", f"CTA 5 is not the slowest: {r.out[-400:]}")
    return f"{len(kernels)} kernel handle(s) instrumented; {n['launches']} launches x 48 CTAs from {n['threads']} threads; " \
           f"CTA 5 slowest in all; {counts['lo']} stores counted per CTA | " + " | ".join(l.strip() for l in lines[:3])[:300]


@test("diff.torchrun")
def t_diff_torchrun(h):
    """Two recordings of a 2-GPU torchrun job whose rank 1 adds OS-random noise at a marked
    line: gpurr diff pairs rank with rank (leaving out the launcher), finds both ranks part
    ways, rank 1 at the marked line, and names rank 1 as the first in time. Needs 2 GPUs
    (the device tool's nvidia-h200-x2); skips with fewer."""
    gpus = h.sh([h.py, "-c", "import torch; print(torch.cuda.device_count())"], 120, log="diff.torchrun.gpus")
    if gpus.rc != 0 or int(gpus.out.strip() or 0) < 2:
        raise Skip("needs 2 GPUs (the device tool's nvidia-h200-x2)")
    script = WL / "ddp_diverge.py"
    argv = [h.py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", script]
    _, a = h.workload("ddp_diverge_a", argv, flags=["--memory", "hash"])
    _, b = h.workload("ddp_diverge_b", argv, flags=["--memory", "hash"])
    r = h.sh([h.gpurr, "diff", a, b], 300, log="diff.torchrun")
    check(r.rc == 1, f"exit {r.rc}, want 1 (the runs part ways): {r.why()}")
    line = mark_line(script, "planted-noise")
    reports = re.split(r"(?m)^(?=\S+ vs \S+: )", r.out)
    rank1 = [x for x in reports if f"ddp_diverge.py:{line}" in x]
    check(rank1, f"no pair's report names ddp_diverge.py:{line}: {r.out[-800:]}")
    m = re.search(r"(?m)^2 of 2 pairs part ways; first in time: rank (\d+)", r.out)
    check(m and m.group(1) == "1", f"first in time is not rank 1: {r.out[-400:]}")
    return f"both ranks part ways, rank 1 first, at ddp_diverge.py:{line}"


def two_gpus(h, log):
    gpus = h.sh([h.py, "-c", "import torch; print(torch.cuda.device_count())"], 120, log=log)
    if gpus.rc != 0 or int(gpus.out.strip() or 0) < 2:
        raise Skip("needs 2 GPUs (the device tool's nvidia-h200-x2)")


def bisect(h, tag, args, timeout=420):
    """gpurr bisect ARGS with its runs in a new folder of tag's; (result, folder)."""
    d = h.new_recdir(tag)
    return h.sh([h.gpurr, "bisect", "-o", d, *args], timeout, log=tag), d


def record_twice(h, tag, argv, flags, timeout=240):
    """Two recordings of argv with flags, TAG1 and TAG2: their folders; a failed one fails the test."""
    recs = []
    for i in (1, 2):
        d = h.new_recdir(f"{tag}{i}")
        r = h.sh(h.record_argv(d, argv, flags), timeout, log=f"{tag}{i}.rec")
        check(r.rc == 0, f"recording {i}: {r.why()}")
        recs.append(d)
    return recs


@test("digest.agree")
def t_digest_agree(h):
    """The deterministic training loop recorded twice with --memory digest: a digest at every
    step boundary, of the allocations the optimizer reaches, and gpurr diff says the runs agree
    at every digest (exit 0)."""
    recs = record_twice(h, "digest_agree", [h.py, WL / "bisect_train.py"], ["--memory", "digest"])
    rows = h.query(recs[0], "SELECT step, of, count(*) AS n, sum(size) AS bytes FROM digests GROUP BY step ORDER BY step")
    check([r["step"] for r in rows] == list(range(5)), f"digests of steps {[r['step'] for r in rows]}, want 0-4 (6 steps)")
    check(all(r["of"] == "optimizer" for r in rows), f"digests not of the optimizer's allocations: {rows}")
    r = h.sh([h.gpurr, "diff", *recs], 120, log="digest_agree.diff")
    check(r.rc == 0 and "agree" in r.out, f"gpurr diff of two deterministic digest runs: {r.why()}\n{r.out[:800]}")
    return f"{len(rows)} digests of {rows[0]['n']} allocations ({rows[0]['bytes'] / 2**20:.1f} MiB); diff: agree"


@test("bisect.scatter")
def t_bisect_scatter(h):
    """gpurr bisect of the training loop with a float index_add_ planted from step 2: the
    digests part ways at step 2, the reruns hashing only step 2's launches name the
    index_add_ kernel at its line, and call it nondeterministic (same inputs)."""
    script = WL / "bisect_train.py"
    line = mark_line(script, "planted-scatter")
    r, d = bisect(h, "bisect_scatter", ["--", h.py, script, "--plant", "scatter"])
    check(r.rc == 1, f"gpurr bisect exit {r.rc}, want 1 (the runs part ways): {r.why()}\n{r.out[-1500:]}")
    check("step 2" in r.out, f"bisect does not name step 2:\n{r.out[-1500:]}")
    check(f"bisect_train.py:{line}" in r.out, f"bisect does not name bisect_train.py:{line}:\n{r.out[-1500:]}")
    check("nondeterministic" in r.out, f"bisect does not call the kernel nondeterministic:\n{r.out[-1500:]}")
    runs = sorted(p.name for p in d.iterdir() if p.is_dir())
    check(len(runs) >= 4, f"bisect kept {runs}, want its 4 runs' recordings")
    cost = [l for l in r.out.splitlines() if "runs" in l and "job" in l]
    return f"step 2, bisect_train.py:{line}, nondeterministic; {cost[-1].strip()[:90] if cost else ''}"


@test("bisect.nan")
def t_bisect_nan(h):
    """gpurr bisect --nan of the training loop whose loss is the log of a negative at step 3:
    one digest run finds the first digest with NaN after step 3, one rerun counting NaN after
    every launch of step 3 names the log kernel and its line, which made it (finite inputs)."""
    script = WL / "bisect_train.py"
    line = mark_line(script, "planted-nan")
    r, d = bisect(h, "bisect_nan", ["--nan", "--", h.py, script, "--plant", "nan"])
    check(r.rc == 1, f"gpurr bisect --nan exit {r.rc}, want 1 (found): {r.why()}\n{r.out[-1500:]}")
    check("step 3" in r.out, f"bisect --nan does not name step 3:\n{r.out[-1500:]}")
    check(f"bisect_train.py:{line}" in r.out, f"bisect --nan does not name bisect_train.py:{line}:\n{r.out[-1500:]}")
    check("made" in r.out, f"bisect --nan does not say the launch made the NaN:\n{r.out[-1500:]}")
    return f"step 3 at bisect_train.py:{line}, made there"


@test("bisect.agree")
def t_bisect_agree(h):
    """gpurr bisect of the deterministic loop: the two digest runs agree at every digest (exit
    0), and no rerun is made."""
    r, d = bisect(h, "bisect_agree", ["--", h.py, WL / "bisect_train.py"])
    check(r.rc == 0 and "agree at every digest" in r.out, f"gpurr bisect of a deterministic loop: {r.why()}\n{r.out[-800:]}")
    runs = sorted(p.name for p in d.iterdir() if p.is_dir())
    check(len(runs) == 2, f"bisect made runs {runs}, want the 2 digest runs alone")
    return "agree at every digest; 2 runs"


@test("bisect.lr_ulp")
def t_bisect_lr_ulp(h):
    """Two digest recordings of the loop whose learning rates are one float32 ulp apart, given
    to gpurr bisect: each rerun runs its own recording's command, and the first launch that
    differs (the optimizer's update, step 0) is explained by that scalar parameter."""
    script = WL / "bisect_train.py"
    recs = []
    for i, lr in enumerate(["0.001", "0.0010000001639127731"]):
        d = h.new_recdir(f"lr_ulp{i}")
        r = h.sh(h.record_argv(d, [h.py, script, "--lr", lr], ["--memory", "digest"]), 240, log=f"lr_ulp{i}.rec")
        check(r.rc == 0, f"recording with --lr {lr}: {r.why()}")
        recs.append(d)
    r, _ = bisect(h, "bisect_lr_ulp", [*recs])
    check(r.rc == 1, f"gpurr bisect A B exit {r.rc}, want 1: {r.why()}\n{r.out[-1500:]}")
    check("step 0" in r.out, f"bisect does not name step 0:\n{r.out[-1500:]}")
    why = [l.strip() for l in r.out.splitlines() if l.strip().startswith("why")]
    check(why and "parameter" in why[0] and "0.001" in why[0], f"bisect does not explain the divergence by the lr parameter:\n{r.out[-1500:]}")
    return why[0][:100]


@test("digest.nccl_owned")
def t_digest_nccl_owned(h):
    """A one-rank DistributedDataParallel job (NCCL on one GPU) recorded twice with --memory
    digest: NCCL's own allocations are recorded as owned by nccl and left out of every digest,
    and gpurr diff says the two runs agree (exit 0)."""
    recs = record_twice(h, "nccl_owned", [h.py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                                          WL / "ddp_one.py"], ["--memory", "digest"], 300)
    own = h.one(recs[0], "SELECT count(*) AS n, sum(size) AS bytes FROM allocations WHERE owner = 'nccl'")
    check(own["n"] > 0, "no allocation owned by nccl in a DDP job")
    leak = h.n(recs[0], "SELECT count(*) AS n FROM digests d JOIN allocations a ON a.process = d.process AND "
                        "a.allocation_id = d.allocation_id WHERE a.owner = 'nccl'")
    check(leak == 0, f"{leak} digest rows of NCCL's allocations")
    r = h.sh([h.gpurr, "diff", *recs], 120, log="nccl_owned.diff")
    check(r.rc == 0 and "agree" in r.out, f"gpurr diff of two deterministic one-rank DDP runs: {r.why()}\n{r.out[:800]}")
    return f"{own['n']} NCCL allocations ({own['bytes'] / 2**20:.0f} MiB) left out; the runs agree"


@test("bisect.ddp_scatter")
def t_bisect_ddp_scatter(h):
    """2 GPUs: DDP whose rank 1 adds a float index_add_ into its activations: the digests part
    ways at step 0; bisect names rank 1, the index_add_ line and a nondeterministic kernel, and
    rank 0 as having followed through the all-reduce."""
    two_gpus(h, "bisect.ddp_scatter.gpus")
    script = WL / "ddp_train.py"
    line = mark_line(script, "planted-scatter")
    r, _ = bisect(h, "bisect_ddp_scatter", ["--", h.py, "-m", "torch.distributed.run", "--standalone",
                                            "--nproc-per-node", "2", script, "--plant", "scatter"])
    check(r.rc == 1, f"gpurr bisect exit {r.rc}, want 1: {r.why()}\n{r.out[-1500:]}")
    check("rank 1" in r.out and f"ddp_train.py:{line}" in r.out and "nondeterministic" in r.out,
          f"bisect does not name rank 1, ddp_train.py:{line} and a nondeterministic kernel:\n{r.out[-2000:]}")
    check(re.search(r"rank 0 followed rank 1 through \S*(AllReduce|all_reduce)", r.out, re.I),
          f"bisect does not say rank 0 followed through the all-reduce:\n{r.out[-2000:]}")
    return f"rank 1 at ddp_train.py:{line}; rank 0 followed"


@test("bisect.ddp_nan")
def t_bisect_ddp_nan(h):
    """2 GPUs: DDP whose rank 0 loss is NaN at step 3: bisect --nan names rank 0, step 3, the
    log kernel and its line."""
    two_gpus(h, "bisect.ddp_nan.gpus")
    script = WL / "ddp_train.py"
    line = mark_line(script, "planted-nan")
    r, _ = bisect(h, "bisect_ddp_nan", ["--nan", "--", h.py, "-m", "torch.distributed.run", "--standalone",
                                        "--nproc-per-node", "2", script, "--plant", "nan"])
    check(r.rc == 1 and "rank 0" in r.out and "step 3" in r.out and f"ddp_train.py:{line}" in r.out,
          f"bisect --nan: {r.why()}\n{r.out[-2000:]}")
    return f"rank 0, step 3, ddp_train.py:{line}"


@test("bisect.ddp_agree")
def t_bisect_ddp_agree(h):
    """2 GPUs: two deterministic DDP runs: digest diff, hash diff and bisect all say they
    agree, NCCL's own memory left out."""
    two_gpus(h, "bisect.ddp_agree.gpus")
    script = WL / "ddp_train.py"
    argv = [h.py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", script]
    r, _ = bisect(h, "bisect_ddp_agree", ["--", *argv])
    check(r.rc == 0 and "agree at every digest" in r.out, f"bisect of deterministic DDP: {r.why()}\n{r.out[-1500:]}")
    recs = []
    for i in (1, 2):
        d = h.new_recdir(f"ddp_agree_hash{i}")
        rr = h.sh(h.record_argv(d, argv, ["--memory", "hash"]), 300, log=f"ddp_agree_hash{i}.rec")
        check(rr.rc == 0, f"hash recording {i}: {rr.why()}")
        recs.append(d)
    r = h.sh([h.gpurr, "diff", *recs], 300, log="ddp_agree.diff")
    check(r.rc == 0, f"gpurr diff of two deterministic DDP hash recordings: {r.why()}\n{r.out[-1500:]}")
    return "bisect and diff agree"


@test("cudnn")
def t_cudnn(h):
    script = WL / "conv_cudnn.py"
    want, d = h.py_workload("conv_cudnn")
    line = mark_line(script, "conv-forward")
    names = [r["name"] for r in h.query(d, f"SELECT DISTINCT name FROM launches WHERE "
                                           f"{at_line('python_line', script, line)}")]
    conv = [n for n in names if re.search(r"cudnn|conv|fprop|xmma|implicit|winograd|sm90", n, re.I)]
    check(conv, f"no convolution kernel at conv_cudnn.py:{line}; kernels there: {names[:6]}")
    return f"cuDNN {want['cudnn']}: {conv[0][:60]} at the conv line"


@test("jax")
def t_jax(h):
    want, d = h.py_workload("jax_jit")
    n = h.n(d, "SELECT count(*) AS n FROM launches")
    check(n >= want["calls"], f"{n} launches for {want['calls']} jitted calls {h.drops(d)}")
    ran = h.n(d, "SELECT count(*) AS n FROM gpu_activity WHERE launch_seq IS NOT NULL")
    check(ran >= want["calls"], f"only {ran} kernel runs linked to launches")
    mods = h.n(d, "SELECT count(*) AS n FROM modules WHERE kernel_count > 0")
    check(mods >= 1, "no module with kernels recorded (XLA loads its kernels as modules)")
    return f"{n} launches for {want['calls']} calls, {ran} linked kernel runs, {mods} module(s)"


@test("raw_cuda")
def t_raw_cuda(h):
    binary = raw_cuda_binary(h)
    want, d = h.workload("raw_cuda", [binary])
    like = lambda k: f"name LIKE '%{k}%'"
    rt, drv = want["rt_kernel"], want["drv_kernel"]
    n_rt = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {like(rt)}")
    check(n_rt == want["rt_launches"], f"{n_rt} runtime launches of {rt}, want {want['rt_launches']} {h.drops(d)}")
    dem = h.sample(d, "demangled", where=like(rt))
    check(dem and all(str(x).startswith(f"{rt}(") for x in dem), f"demangled names of {rt}: {dem}")
    streams = h.n(d, f"SELECT count(DISTINCT stream_id) AS n FROM launches WHERE {like(rt)}")
    check(streams == want["streams"], f"runtime launches on {streams} streams, want {want['streams']}")
    plain = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {like(drv)} AND (cluster_x IS NULL OR cluster_x <= 1)")
    check(plain == want["drv_launches"], f"{plain} cuLaunchKernel launches of {drv}, want {want['drv_launches']}")
    api = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {like(drv)} AND (cluster_x IS NULL OR cluster_x <= 1) "
                 f"AND (api = {CBID_LAUNCH_KERNEL} OR api LIKE '%cuLaunchKernel')")
    check(api == plain, f"{plain - api} of the driver launches not recorded as cuLaunchKernel (307)")
    ex = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {like(drv)} AND cluster_x = {want['cluster_x']}")
    check(ex == want["ex_launches"], f"{ex} launches of {drv} with cluster_x={want['cluster_x']}, "
                                     f"want {want['ex_launches']}")
    pc = h.n(d, f"SELECT param_count AS n FROM kernels WHERE {like(drv)}")
    check(pc == 3, f"kernel {drv} (loaded from PTX) has param_count {pc}, want 3")
    total = want["rt_launches"] + want["drv_launches"] + want["ex_launches"]
    acts = h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE {like(rt)} OR {like(drv)}")
    check(acts == total, f"{acts} kernel activities, want {total} {h.drops(d)}")
    return (f"runtime {n_rt} on {streams} streams ({dem[0]}), cuLaunchKernel {plain}, "
            f"cuLaunchKernelEx cluster 2: {ex}, {acts} activities")


@test("fork_after_init")
def t_fork(h):
    want, d = h.py_workload("fork_after_init", timeout=180)
    script, line = WL / "fork_after_init.py", mark_line(WL / "fork_after_init.py", "after-fork")
    procs = h.n(d, "SELECT count(*) AS n FROM processes")
    check(procs == 1, f"{procs} processes recorded; the forked children and workers never touched CUDA")
    calls = want["after_fork_calls"]
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {at_line('python_line', script, line)}")
    check(n >= calls and n % calls == 0,
          f"{n} launches at fork_after_init.py:{line} after the fork, want a non-zero multiple of {calls}")
    return f"children exited 0, parent's {n} post-fork launches recorded, 1 process"


def record_and_signal(h, name, sig):
    """Record sigkill.py, wait for it to run, send its own pid sig two seconds later; returns
    (gpurr record's exit code, the program's stdout lines, the recording, the kernel's name)."""
    script = WL / "sigkill.py"
    bare = h.sh([h.py, script, "--max", "2001"], 120, log=f"{name}.bare")
    check(bare.rc == 0 and last_json(bare.out), f"bare run with --max failed: {bare.why()}")
    if h.bare_only:
        raise Skip("bare run ok")
    kernel = last_json(bare.out)["kernel"]
    d = h.new_recdir(name)
    argv = [str(a) for a in h.record_argv(d, [h.py, script])]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=h.env,
                         cwd=ROOT, start_new_session=True)
    lines, errs = queue.Queue(), []

    def read_out():
        for l in p.stdout:
            lines.put(l)
        lines.put(None)

    threading.Thread(target=read_out, daemon=True).start()
    threading.Thread(target=lambda: errs.extend(p.stderr), daemon=True).start()
    out, pid, rc = [], None, None
    try:
        deadline = time.monotonic() + 120
        while pid is None and time.monotonic() < deadline:
            try:
                l = lines.get(timeout=1)
            except queue.Empty:
                continue
            if l is None:
                break
            out.append(l)
            if l.startswith("READY "):
                pid = int(l.split()[1])
        check(pid, f"no READY line in 120 s (gpurr exit {p.poll()}): {tail(''.join(errs))}")
        time.sleep(2.0)
        os.kill(pid, sig)  # the workload's own pid, which it printed
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise Fail(f"gpurr record did not exit within 60 s after its program got signal {sig}")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)  # the session we started for gpurr record
            p.wait()
        try:
            while (l := lines.get(timeout=10)) is not None:
                out.append(l)
        except queue.Empty:
            out.append("# harness: stdout still open 10 s after gpurr exited\n")
        h.save_log(f"{name}.rec", Run(argv, rc, "".join(out), "".join(errs), time.monotonic() - t0, False))
    return rc, out, d, kernel


@test("sigkill")
def t_sigkill(h):
    rc, out, d, kernel = record_and_signal(h, "sigkill", signal.SIGKILL)
    check(rc in (128 + signal.SIGKILL, -signal.SIGKILL), f"gpurr record exited {rc}, want 137 (killed by signal 9)")
    upto = max((int(l.split()[1]) for l in out if l.startswith("UPTO ")), default=1)
    info = h.save_info("sigkill", d)
    check(info.rc in (0, 1), f"gpurr info on the killed recording: {info.why()}")
    check(re.search(r"incomplete|not complete|complete\W+(no|false)", info.out + info.err, re.I),
          f"gpurr info does not say the recording is incomplete: {tail(info.out, 6)}")
    procs = h.query(d, "SELECT complete FROM processes")
    check(procs and not any(truthy(p.get("complete")) for p in procs), f"processes.complete: {procs}")
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{kernel}'")
    check(0 < n <= upto, f"{n} launches recorded; the program had issued at most {upto}")
    h.recordings.append(d)
    return f"exit {rc}, info says incomplete, {n} of <= {upto} launches readable"


@test("sigterm")
def t_sigterm(h):
    """A scheduler stops the program with SIGTERM: the agent writes what it holds before the
    program dies, so every launch the program had finished (its last DONE line) is in the
    recording, and the log says the signal came."""
    rc, out, d, kernel = record_and_signal(h, "sigterm", signal.SIGTERM)
    check(rc in (128 + signal.SIGTERM, -signal.SIGTERM), f"gpurr record exited {rc}, want 143 (signal 15)")
    done = max((int(l.split()[1]) for l in out if l.startswith("DONE ")), default=0)
    upto = max((int(l.split()[1]) for l in out if l.startswith("UPTO ")), default=1)
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{kernel}'")
    check(done <= n <= upto, f"{n} launches recorded; the program had finished {done} and issued at most {upto}")
    logged = h.n(d, "SELECT count(*) AS n FROM log WHERE message LIKE '%received SIGTERM%'")
    check(logged >= 1, "the recording's log does not say the program received SIGTERM")
    return f"exit {rc}, {n} launches recorded of {done} finished (<= {upto} issued), SIGTERM logged"


@test("hang")
def t_hang(h):
    """gpurr record --hang-timeout 5s --hang-kill on a kernel spinning on a flag nobody sets: the
    watchdog names it on stderr and in the recording's log, writes what it holds, and ends the
    program; the launches before it are recorded."""
    script = WL / "hang.py"
    bare = h.sh([h.py, script, "--bare"], 120, log="hang.bare")
    if bare.rc != 0:
        raise Skip(f"the bare run cannot run here (cupy?): {bare.why()}")
    d = h.new_recdir("hang")
    r = h.sh(h.record_argv(d, [h.py, script], ["--hang-timeout", "5s", "--hang-kill"]), 120, log="hang.rec")
    check(r.rc in (128 + signal.SIGKILL, -signal.SIGKILL), f"gpurr record exited {r.rc}, want 137 (--hang-kill): {r.why()}")
    check("has not finished on the GPU after 5s" in r.err and "gpurr_hang_spin" in r.err,
          f"no hang report on stderr: {r.err[-600:]}")
    logged = h.n(d, "SELECT count(*) AS n FROM log WHERE level = 'error' AND message LIKE 'hang: launch %gpurr_hang_spin%'")
    check(logged == 1, "the recording's log has no hang report")
    ticks = h.n(d, "SELECT count(*) AS n FROM launches WHERE name = 'gpurr_hang_tick'")
    check(ticks == 10, f"{ticks} of the 10 launches before the hang recorded")
    return next((l for l in r.err.splitlines() if "has not finished" in l), "")[:200]


@test("multi_gpu")
def t_multi_gpu(h):
    want, d = h.py_workload("multi_gpu")
    script, line = WL / "multi_gpu.py", mark_line(WL / "multi_gpu.py", "multi-add")
    devs = h.n(d, "SELECT count(DISTINCT ordinal) AS n FROM devices")
    check(devs >= want["devices"], f"{devs} devices recorded, the program used {want['devices']}")
    rows = h.query(d, f"""SELECT device, count(*) AS n FROM launches
                          WHERE {at_line('python_line', script, line)} GROUP BY device""")
    per = want["per_device"]
    check(len(rows) == want["devices"], f"marked-line launches on {len(rows)} devices, want {want['devices']}")
    check(all(r["n"] >= per and r["n"] % per == 0 for r in rows),
          f"per-device counts {rows}, want a non-zero multiple of {per} each")
    return f"{len(rows)} devices, {[r['n'] for r in rows]} launches"


# --- gpurr record's options, on eager.py (one bare run shared by all) ----------------------
def eager_with(h, name, flags, **process):
    """Record eager.py with gpurr record's flags; the recording names its own options:
    each keyword is a column of the processes table and the value it must hold."""
    want, d = h.py_workload(name, script="eager.py", flags=flags)
    for col, value in process.items():
        got = h.one(d, f"SELECT {col} FROM processes").get(col)
        check(got == value, f"processes.{col} = {got!r}, want {value!r}")
    return want, d


def want_none(h, d, what, sql):
    """sql counts, as n, what must not be in the recording."""
    n = h.n(d, sql)
    check(n == 0, f"{n} {what}, want none")


def info_of(h, name, d):
    info = h.save_info(name, d)
    check(info.rc == 0, f"gpurr info: {info.why()}")
    return info.out


@test("options.kernels_filter")
def t_opt_kernels(h):
    pattern = "nvjet|gemm"
    want, d = eager_with(h, "eager_kernels", ["--kernels", pattern], kernel_filter=pattern)
    rows = h.query(d, "SELECT name, api, python_line FROM launches")
    check(rows, "no launch recorded; the filter should keep cuBLAS's")
    other = [r["name"] for r in rows if not re.search(pattern, r.get("name") or "")]
    check(not other, f"{len(other)} of {len(rows)} launches do not match {pattern!r}: {other[:3]}")
    script = WL / "eager.py"
    mm_lines = [mark_line(script, tag) for tag in ("eager-mm", "eager-mm-bf16")]
    cublas = [r for r in rows if r.get("api") == CBID_LAUNCH_KERNEL_EX
              and any(re.search(rf"eager\.py:{l}\b", r.get("python_line") or "") for l in mm_lines)]
    check(cublas, f"no cuBLAS launch (api 652) at eager.py:{mm_lines}; kept: "
                  f"{[((r.get('name') or '')[:40], r.get('api'), r.get('python_line')) for r in rows[:4]]}")
    filtered = h.n(d, "SELECT sum(launches_filtered) AS n FROM stats")
    check(filtered >= want["adds"], f"stats.launches_filtered = {filtered}, want >= the {want['adds']} add_ launches")
    out = info_of(h, "eager_kernels", d)
    check(pattern in out and "filtered" in out, f"gpurr info does not mention the filter: {tail(out, 12)}")
    return f"{len(rows)} launches all match {pattern!r} ({len(cublas)} cuBLAS at the mm lines), {filtered} filtered"


@test("options.callstack_native")
def t_opt_native(h):
    want, d = eager_with(h, "eager_native", ["--callstack", "native"], callstack_mode="native")
    sources = h.query(d, "SELECT source, count(*) AS n FROM callstacks GROUP BY source")
    check(sources, "no callstack recorded")
    check([r["source"] for r in sources] == ["native"], f"callstack sources {sources}, want only native")
    want_none(h, d, "frames that are not native", "SELECT count(*) AS n FROM frames WHERE kind != 'native'")
    want_none(h, d, "launches with a python_line (no Python frame was taken)",
              "SELECT count(python_line) AS n FROM launches")
    ours = h.n(d, """SELECT count(DISTINCT callstack_id) AS n FROM frames WHERE kind = 'native'
                     AND (file LIKE '%libtorch%' OR file LIKE '%libc10%' OR file LIKE '%python%')""")
    check(ours >= 1, f"no callstack has a native frame in libtorch, libc10 or python; objects seen: "
                     f"{h.sample(d, 'file', 'frames')}")
    total = sum(r["n"] for r in sources)
    return f"{total} native callstacks, {ours} through libtorch/libc10/python"


@test("options.callstack_off")
def t_opt_off(h):
    want, d = eager_with(h, "eager_nostack", ["--callstack", "off"], callstack_mode="off")
    launches = h.n(d, "SELECT count(*) AS n FROM launches")
    check(launches >= want["adds"], f"{launches} launches, want >= the {want['adds']} add_ calls")
    want_none(h, d, f"of {launches} launches name a callstack",
              "SELECT count(*) AS n FROM launches WHERE callstack_id IS NOT NULL AND callstack_id != 0")
    want_none(h, d, "rows in callstacks", "SELECT count(*) AS n FROM callstacks")
    want_none(h, d, "rows in frames", "SELECT count(*) AS n FROM frames")
    want_none(h, d, "callstacks_failed (off is not a failure)", "SELECT sum(callstacks_failed) AS n FROM stats")
    return f"{launches} launches, no callstack taken or stored"


@test("options.gpu_timing_serial")
def t_opt_timing_serial(h):
    """--gpu-timing=serial: CUPTI's serial kernel mode still times every kernel, each joined to
    its launch, and the recording and info say the mode."""
    want, d = eager_with(h, "eager_serial", ["--gpu-timing=serial"], gpu_timing=1, gpu_timing_serial=1)
    runs = h.n(d, "SELECT count(*) AS n FROM gpu_activity WHERE launch_seq IS NOT NULL")
    launches = h.n(d, "SELECT count(*) AS n FROM launches WHERE NOT captured")
    check(runs >= launches > 0, f"{runs} kernel runs joined to launches for {launches} launches {h.drops(d)}")
    out = info_of(h, "eager_serial", d)
    check("GPU timing serial" in out, f"gpurr info does not say serial: {tail(out, 12)}")
    return f"{runs} kernel runs timed in serial mode for {launches} launches"


@test("options.gpu_timing_sample")
def t_opt_timing_sample(h):
    """--gpu-timing=sample: over a second of launches, kernels launched in the windows are timed
    and joined to their launch, those launched between windows say untimed and have no kernel
    run, and the recording and info say the window."""
    want, d = h.py_workload("sampled", flags=["--gpu-timing=sample", "--gpu-timing-sample", "10ms/50ms"])
    got = h.one(d, "SELECT gpu_timing_sample FROM processes")["gpu_timing_sample"]
    check(got == "10ms/50ms", f"processes.gpu_timing_sample = {got!r}")
    launches = h.n(d, "SELECT count(*) AS n FROM launches WHERE NOT captured")
    untimed = h.n(d, "SELECT count(*) AS n FROM launches WHERE untimed")
    check(launches >= want["adds"] and 0.5 * launches < untimed < 0.95 * launches,
          f"{untimed} of {launches} launches untimed, want about 80% (10 ms of every 50 ms timed)")
    timed_runs = h.n(d, "SELECT count(DISTINCT a.launch_seq) AS n FROM gpu_activity a JOIN launches l "
                        "ON l.process = a.process AND l.seq = a.launch_seq WHERE NOT l.untimed")
    untimed_runs = h.n(d, "SELECT count(DISTINCT a.launch_seq) AS n FROM gpu_activity a JOIN launches l "
                          "ON l.process = a.process AND l.seq = a.launch_seq WHERE l.untimed")
    timed = launches - untimed
    check(timed_runs >= 0.9 * timed, f"{timed_runs} kernel runs for {timed} timed launches {h.drops(d)}")
    check(untimed_runs <= 0.01 * untimed, f"{untimed_runs} kernel runs for launches marked untimed")
    out = info_of(h, "sampled", d)
    check("GPU timing sampled (10ms/50ms)" in out, f"gpurr info does not say sampled: {tail(out, 12)}")
    return f"{timed} of {launches} launches timed, {timed_runs} of them with their kernel run; {untimed_runs} runs of untimed ones"


@test("steps.optimizer")
def t_steps_optimizer(h):
    """Three torch.optim.SGD steps and a forward pass: launches.step numbers the launches by
    the optimizer steps before them (0, 1, 2, then 3 for the last forward), and info counts 3."""
    _, d = h.py_workload("train_steps")
    rows = h.query(d, "SELECT step, count(*) AS n FROM launches GROUP BY step ORDER BY step")
    steps = [r["step"] for r in rows]
    check(steps == [0, 1, 2, 3], f"launches by step {rows}, want steps 0 to 3")
    script, line = WL / "train_steps.py", mark_line(WL / "train_steps.py", "after-steps")
    last = h.n(d, f"SELECT count(*) AS n FROM launches WHERE step = 3 AND NOT {at_line('user_line', script, line)}")
    check(last == 0, f"{last} launches of step 3 are not the final forward's")
    out = info_of(h, "train_steps", d)
    check("3 training steps" in out, f"gpurr info does not count 3 steps: {tail(out, 12)}")
    return "launches per step " + ", ".join(f"{r['step']}: {r['n']}" for r in rows)


@test("steps.range")
def t_steps_range(h):
    """gpurr record --step-range numbers steps by NVTX ranges: the nvtx_ranges workload's two
    workers each run ranges "step 0" to "step 2"; the recording keeps the expression, and the
    launches made after both workers joined follow all 6 matching ranges (step 6)."""
    regex = "^step [0-9]+$"
    want, d = h.workload("nvtx_step_range", [h.py, WL / "nvtx_ranges.py"], flags=["--step-range", regex])
    got = h.one(d, "SELECT step_range FROM processes")
    check(got.get("step_range") == regex, f"processes.step_range is {got.get('step_range')!r}, want {regex!r}")
    line = mark_line(WL / "nvtx_ranges.py", "outside-ranges")
    rows = h.query(d, f"SELECT DISTINCT step FROM launches WHERE {at_line('python_line', WL / 'nvtx_ranges.py', line)}")
    ends = 2 * want["steps"]
    check([r["step"] for r in rows] == [ends], f"launches after the workers are in steps {rows}, want {ends}")
    first = h.n(d, "SELECT min(step) AS n FROM launches WHERE range LIKE 'worker % / step 0 / %'")
    check(first == 0, f"the first step range's launches are in step {first}, want 0")
    return f"stored {regex!r}; launches after the workers are step {ends}"


@test("options.gpu_timing_off")
def t_opt_no_timing(h):
    want, d = eager_with(h, "eager_notiming", ["--gpu-timing=false"], gpu_timing=0)
    want_none(h, d, "gpu_activity rows", "SELECT count(*) AS n FROM gpu_activity")
    script, line = WL / "eager.py", mark_line(WL / "eager.py", "eager-add")
    adds = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {at_line('python_line', script, line)}")
    check(adds >= want["adds"] and adds % want["adds"] == 0,
          f"{adds} launches at eager.py:{line}, want a non-zero multiple of {want['adds']} {h.drops(d)}")
    ex = h.n(d, f"SELECT count(*) AS n FROM launches WHERE api = {CBID_LAUNCH_KERNEL_EX}")
    check(ex >= 1, "no cuLaunchKernelEx (652) launch: cuBLAS's matmuls are missing")
    out = info_of(h, "eager_notiming", d)
    check("GPU timing off" in out, f"gpurr info does not say GPU timing is off: {tail(out, 12)}")
    return f"no activity; {adds} launches at eager.py:{line}, {ex} via cuLaunchKernelEx"


@test("options.bad_flags")
def t_opt_bad_flags(h):
    if h.bare_only:
        raise Skip("--bare-only: needs gpurr")
    said = []
    for i, (flags, names) in enumerate([(["--callstack", "bogus"], "callstack"),
                                        (["--kernels", "("], "kernels"),
                                        (["--gpu-timing=maybe"], "gpu-timing")]):
        d, ran = h.new_recdir(f"bad_flags_{i}"), h.tmp / f"bad_flags_{i}.ran"
        ran.unlink(missing_ok=True)
        r = h.sh(h.record_argv(d, ["touch", ran], flags), 30, log=f"options.bad_flags_{i}")
        check(r.rc == 2, f"{' '.join(flags)}: exit {r.rc}, want 2 ({r.why()})")
        lines = r.err.strip().splitlines()
        check(len(lines) == 1 and lines[0].startswith("gpurr: ") and names in lines[0],
              f"{' '.join(flags)}: stderr is not one 'gpurr: ...' line naming --{names}: {r.err[:300]!r}")
        check(not ran.exists(), f"{' '.join(flags)}: the program ran")
        check(not d.exists(), f"{' '.join(flags)}: {d} was created")
        said.append(lines[0][:80])
    return "exit 2, program not run: " + " | ".join(said)


@test("cli.query_bad_sql")
def t_bad_sql(h):
    if not h.recordings:
        raise Skip("no recording was made to query")
    r = h.sh([h.gpurr, "query", h.recordings[0], "SELEC nonsense FROM", "--format", "json"], 60,
             log="cli.query_bad_sql")
    check(r.rc == 2, f"exit {r.rc}, want 2")
    lines = r.err.strip().splitlines()
    check(len(lines) == 1, f"stderr has {len(lines)} lines, want 1: {r.err[:300]!r}")
    return f"exit 2, stderr: {lines[0][:120]}"


# --- memory capture ------------------------------------------------------------------------
def h128():
    """The Python implementation of gpurr-h128 in scripts/gen-hash-vectors (stdlib only)."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("gen_hash_vectors", str(ROOT / "scripts" / "gen-hash-vectors"))
    spec = importlib.util.spec_from_loader("gen_hash_vectors", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def region_hash_hex(data):
    m = h128()
    chunks = [m.chunk_hash(data[i:i + m.CHUNK]) for i in range(0, len(data), m.CHUNK)]
    return m.hexsum(m.region_hash(chunks, len(data)))


def mem_states(h, d, kernel, point="after"):
    return h.query(d, f"""SELECT l.seq AS seq, m.region AS region, m.address AS address, m.size AS size,
                                 m.hash AS hash, m.chunks AS chunks, m.chunks_transferred AS xfer,
                                 m.snapshot AS snapshot, m.lost AS lost
                          FROM launches l JOIN memory_states m ON m.process = l.process AND m.launch_seq = l.seq
                          WHERE l.name = '{kernel}' AND m.point = '{point}' ORDER BY l.seq, m.region""")


@test("memory.hash")
def t_memory_hash(h):
    """Hash mode: every launch's after-hash equals gpurr-h128 (Python) of the bytes the program
    itself read back; odd sizes and tails; a concurrent second stream does not disturb it."""
    return memory_hash(h, "memory_hash", [])


@test("memory.hash_deferred")
def t_memory_hash_deferred(h):
    """memory.hash with --defer-hashes: hash kernels wait and hash several launches at once,
    yet every hash is the one in stream order after its launch, and the race between the two
    streams is left as the program made it (no ordering added)."""
    return memory_hash(h, "memory_hash_deferred", ["--defer-hashes"])


@test("memory.hash_deferred_stream")
def t_memory_hash_deferred_stream(h):
    """memory.hash with --defer-hashes=stream: batches run on the program's own streams, and
    every hash is still the one in stream order after its launch."""
    return memory_hash(h, "memory_hash_deferred_stream", ["--defer-hashes=stream"])


def memory_hash(h, name, flags):
    out = h.tmp / name
    want, d = h.py_workload(name, script="memory_hash.py", args=[out], flags=["--memory", "hash", *flags])
    rows = mem_states(h, d, "gpurr_mem_fill")
    checks = want["checks"]
    check(len(rows) == len(checks), f"{len(rows)} after-states of gpurr_mem_fill, want {len(checks)}: {rows[:3]}")
    for c, r in zip(checks, rows):
        check(r["size"] == c["size"], f"{c['name']}: region of {r['size']} bytes, the allocation has {c['size']}")
        data = (out / f"{c['name']}.bin").read_bytes()
        if len(data) > (1 << 20):  # the pure-Python hash is slow: compare big ones by chunk count only
            check(r["chunks"] == (len(data) + 65535) // 65536, f"{c['name']}: {r['chunks']} chunks")
            continue
        want_hash = region_hash_hex(data)
        check(r["hash"] == want_hash, f"{c['name']} ({c['size']} B): recorded {r['hash']}, bytes hash to {want_hash}")
    # The stream race: the buffer ends as stream 2 wrote it, yet stream 1's launch is hashed
    # as stream 1 left it. 4 MiB is too slow for the Python hash: compare through the chunk
    # hashes of chunk 0 (the whole first 64 KiB).
    m = h128()
    by_name = {c["name"]: r for c, r in zip(checks, rows)}
    s1, s2 = by_name["stream1"], by_name["stream2"]
    check(s1["hash"] != s2["hash"], "both streams' launches hashed alike: the hash did not follow stream order")
    for name in ("stream1", "stream2"):
        first = (out / f"{name}.bin").read_bytes()[:65536]
        got = h.one(d, f"""SELECT c.hash AS hash FROM memory_chunks c
                           WHERE c.launch_seq = {by_name[name]['seq']} AND c.point = 'after' AND c.chunk = 0""")["hash"]
        check(got == m.hexsum(m.chunk_hash(first)), f"{name}: chunk 0 hash {got} is not that of its own bytes")
    regions = h.n(d, "SELECT count(*) AS n FROM regions r JOIN launches l ON l.process = r.process AND l.seq = r.launch_seq "
                     "WHERE l.name = 'gpurr_mem_fill' AND r.param_offsets = '0'")
    check(regions == len(checks), f"{regions} regions found through parameter offset 0, want {len(checks)}")
    return f"{len(checks)} launches: hashes equal the program's bytes (sizes 17 B..8 MiB), stream order kept"


def rewind(h, d, seq, point, out):
    r = h.sh([h.gpurr, "rewind", d, "--launch", seq, f"--{point}", "--region", "0", "-o", out, "--force"], 120)
    check(r.rc == 0, f"gpurr rewind --launch {seq} --{point}: {r.why()}")
    return Path(out).read_bytes()


def carried_states(h, d, kernel):
    return h.query(d, f"""SELECT l.seq AS seq, m.region AS region, m.hash AS hash, m.carried AS carried,
                                 m.carried_from AS carried_from, m.unknown AS unknown, r.param_offsets AS offsets
                          FROM launches l JOIN memory_states m ON m.process = l.process AND m.launch_seq = l.seq
                          JOIN regions r ON r.process = l.process AND r.launch_seq = l.seq AND r.region = m.region
                          WHERE l.name LIKE '%{kernel}%' AND m.point = 'after' ORDER BY l.seq, m.region""")


def by_offsets(rows, offsets):
    return [r for r in rows if r["offsets"] == offsets]


@test("writesets.proved")
def t_writesets_proved(h):
    """--memory hash carries what a launch cannot write: a Triton kernel reading src and writing
    dst (its PTX proves src read-only) hashes only dst after the launches that follow its
    description, and every carried state of src is the hash of src's bytes as the program read
    them back; dst is hashed every time and ends as the program's bytes. A cuBLAS GEMM (no PTX)
    is hashed whole under the default --write-sets proved; under --write-sets learned its
    inputs a and b are carried after a few launches, with their true hashes, and c never is."""
    out = h.tmp / "write_sets_proved"
    want, d = h.py_workload("write_sets_proved", script="write_sets.py", args=["proved", out], flags=["--memory", "hash"])
    rows = carried_states(h, d, "scale_kernel")
    src_hash = region_hash_hex((out / "src.bin").read_bytes())
    dst_hash = region_hash_hex((out / "dst.bin").read_bytes())
    src, dst = by_offsets(rows, "0"), by_offsets(rows, "8")
    check(len(src) == want["launches"] and len(dst) == want["launches"],
          f"{len(src)} src and {len(dst)} dst states of scale_kernel, want {want['launches']} each: {rows[:4]}")
    carried = [r for r in src if r["carried"] == "proved"]
    check(len(carried) >= want["launches"] - 2, f"only {len(carried)} of {len(src)} src states carried (proved): {src}")
    check(all(r["hash"] == src_hash and not truthy(r["unknown"]) for r in src),
          f"a src state is not the hash of src's bytes {src_hash}: {[r for r in src if r['hash'] != src_hash][:2]}")
    check(all(r["carried"] == "" for r in dst), f"dst carried though the kernel writes it: {dst[:3]}")
    check(dst[-1]["hash"] == dst_hash, f"dst's last state {dst[-1]['hash']}, its bytes hash to {dst_hash}")
    gemm = h.query(d, """SELECT count(*) AS n, sum(CASE WHEN m.carried != '' THEN 1 ELSE 0 END) AS carried
                         FROM launches l JOIN memory_states m ON m.process = l.process AND m.launch_seq = l.seq
                         WHERE (l.name LIKE '%gemm%' OR l.name LIKE '%sm90%' OR l.name LIKE '%cutlass%') AND m.point = 'after'""")[0]
    check(gemm["n"] and not gemm["carried"], f"GEMM states under --write-sets proved: {gemm} (none may be carried: no PTX)")

    out2 = h.tmp / "write_sets_learned"
    _, d2 = h.py_workload("write_sets_learned", script="write_sets.py", args=["proved", out2],
                          flags=["--memory", "hash", "--write-sets", "learned"])
    hashes = {n: region_hash_hex((out2 / f"{n}.bin").read_bytes()) for n in ("a", "b", "c")}
    states = carried_states(h, d2, "gemm")
    learned = [r for r in states if r["carried"] == "learned"]
    # The launches after the workload's pause (the writer learns from the first ones) carry
    # the inputs; the output too, since every launch writes the same bytes into it, which
    # learning cannot tell from not writing. Every carried state must be the true one.
    inputs = [r for r in learned if r["offsets"] in ("0", "8")]
    check(len(inputs) >= 2 * (want["launches"] - 6),
          f"{len(inputs)} GEMM input states carried (learned) of {len(states)} states, want both inputs of most launches")
    check(all(r["hash"] in (hashes["a"], hashes["b"]) and not truthy(r["unknown"]) for r in inputs),
          f"a learned input carry is neither a's nor b's hash: {[r for r in inputs if r['hash'] not in (hashes['a'], hashes['b'])][:2]}")
    outputs = [r for r in states if r["offsets"].startswith("16")]
    check(outputs and all(r["hash"] == hashes["c"] for r in outputs[1:]),
          f"c's states are not its bytes' hash {hashes['c']}: {[r for r in outputs if r['hash'] != hashes['c']][:2]}")
    info = h.sh([h.gpurr, "info", d2], 60, log="writesets.info")
    line = [l.strip() for l in info.out.splitlines() if "write sets" in l]
    return (f"scale_kernel: {len(carried)}/{len(src)} src states carried (proved), all equal to src's bytes; "
            f"GEMM learned: {len(learned)}/{len(states)} states carried; info: {line[:1]}")


@test("writesets.chase")
def t_writesets_chase(h):
    """A Triton kernel storing through a pointer it loads from memory (its PTX may write
    anything) ends every carry: the next launch reading the buffer it wrote hashes it again,
    and that hash is the buffer's bytes; two runs storing different values part ways there."""
    recs = []
    for i, value in ((1, "3.0"), (2, "4.0")):
        out = h.tmp / f"write_sets_chase{i}"
        _, d = h.py_workload(f"write_sets_chase{i}", script="write_sets.py", args=["chase", out, value],
                             flags=["--memory", "hash"])
        recs.append((d, out))
    d, out = recs[0]
    rows = by_offsets(carried_states(h, d, "scale_kernel"), "0")
    check(len(rows) == 5, f"{len(rows)} target states of scale_kernel, want 5: {rows}")
    check(any(r["carried"] == "proved" for r in rows[:4]), f"no target state carried before the chase: {rows[:4]}")
    last = rows[-1]
    want_hash = region_hash_hex((out / "target.bin").read_bytes())
    check(last["carried"] == "" and last["hash"] == want_hash,
          f"after the chase, target is {last} (carried: {last['carried']!r}), want hashed anew as {want_hash}")
    r = h.sh([h.gpurr, "diff", recs[0][0], recs[1][0]], 120, log="writesets.chase.diff")
    check(r.rc == 1, f"gpurr diff exit {r.rc}, want 1: {r.why()} {r.out[:400]}")
    kernel = [l.strip() for l in r.out.splitlines() if l.strip().startswith("kernel")]
    check(kernel and ("chase_kernel" in kernel[0] or "scale_kernel" in kernel[0]),
          f"diff names {kernel[:1]}, want chase_kernel or the scale_kernel after it:\n{r.out[:800]}")
    return f"target hashed anew after the chase and equal to its bytes; diff: {kernel[0][:80]}"


@test("writesets.learned_miss")
def t_writesets_learned_miss(h):
    """--write-sets learned: a kernel that writes its input only on its 50th launch. The input
    is learned read-only and carried; an audit finds the write (write_set_misses names the
    kernel, the input's word and a range of launches holding the 50th); gpurr diff of two runs
    adding different values then names launch 50 or says its answer may be earlier, in a range
    that holds launch 50."""
    recs = []
    for i, value in ((1, "1.0"), (2, "2.0")):
        out = h.tmp / f"write_sets_miss{i}"
        want, d = h.py_workload(f"write_sets_miss{i}", script="write_sets.py", args=["miss", out, value],
                                flags=["--memory", "hash", "--write-sets", "learned"])
        recs.append(d)
    d = recs[0]
    seqs = [r["seq"] for r in h.query(d, "SELECT seq FROM launches WHERE name LIKE '%maybe_kernel%' ORDER BY seq")]
    check(len(seqs) == want["launches"], f"{len(seqs)} maybe_kernel launches, want {want['launches']}")
    at = seqs[want["miss_at"] - 1]
    src = by_offsets(carried_states(h, d, "maybe_kernel"), "0")
    learned = [r for r in src if r["carried"] == "learned"]
    check(len(learned) > want["launches"] // 2, f"only {len(learned)} of {len(src)} src states carried (learned)")
    misses = h.query(d, "SELECT * FROM write_set_misses")
    check(len(misses) >= 1, f"no write-set miss recorded: {misses}")
    m = misses[0]
    check(m["since_seq"] < at <= m["audit_seq"], f"miss {m}: its range does not hold the 50th launch (seq {at})")
    r = h.sh([h.gpurr, "diff", *recs], 120, log="writesets.miss.diff")
    check(r.rc == 1, f"gpurr diff exit {r.rc}, want 1: {r.why()} {r.out[:400]}")
    named = f"launch {at}" in r.out or f"#{at}" in r.out
    uncertain = "may be" in r.out and "learned" in r.out
    check(named or uncertain, f"diff neither names launch {at} nor says its answer may be earlier:\n{r.out[:1200]}")
    note = [l.strip() for l in r.out.splitlines() if "may be" in l or "learned" in l]
    return f"miss found by the audit at launch {m['audit_seq']} (since {m['since_seq']}, write at {at}); diff: {note[:2]}"


@test("memory.snapshot")
def t_memory_snapshot(h):
    """Snapshot mode: rewind before/after each poke equals the program's own copies; only the
    changed chunk crosses PCIe."""
    out = h.tmp / "memory_snapshot"
    want, d = h.py_workload("memory_snapshot_exact", "memory_snapshot.py", args=["exact", out], flags=["--memory", "snapshot",
                            "--snapshot-kernels", "gpurr_snap_", "--staging-bytes", str(256 << 20)])
    pokes = mem_states(h, d, "gpurr_snap_poke")
    check(len(pokes) == want["pokes"], f"{len(pokes)} poke after-states, want {want['pokes']}")
    seqs = [r["seq"] for r in pokes]
    for i, seq in enumerate(seqs):
        before = rewind(h, d, seq, "before", h.tmp / "rw-before.bin")
        prev = out / ("before0.bin" if i == 0 else f"after{i - 1}.bin")
        check(before == prev.read_bytes(), f"poke {i} (launch {seq}): rewind --before differs from the program's copy")
        after = rewind(h, d, seq, "after", h.tmp / "rw-after.bin")
        check(after == (out / f"after{i}.bin").read_bytes(), f"poke {i} (launch {seq}): rewind --after differs")
    xfer = [r["xfer"] for r in pokes]
    check(all(x == 1 for x in xfer), f"chunks transferred after each poke: {xfer}, want 1 each (1 of 1024 changed)")
    bx = [r["xfer"] for r in mem_states(h, d, "gpurr_snap_poke", "before")]
    check(all(x == 0 for x in bx), f"chunks transferred before each poke: {bx}, want 0 (nothing changed since)")
    st = h.one(d, "SELECT sum(chunks_total) AS total, sum(chunks_transferred) AS xfer FROM stats")
    return (f"{len(seqs)} pokes: rewind before/after == program copies; 1 of 1024 chunks per poke crossed PCIe "
            f"({st['xfer']} of {st['total']} chunks in all)")


@test("memory.drop_oldest")
def t_memory_drop(h):
    out = h.tmp / "memory_drop"
    want, d = h.py_workload("memory_snapshot_drop", "memory_snapshot.py", args=["drop", out], flags=[
        "--memory", "snapshot", "--on-full", "drop-oldest", "--staging-bytes", str(4 << 20)])
    lost = h.query(d, "SELECT count(DISTINCT launch_seq) AS n, min(lost_reason) AS why FROM memory_states WHERE lost = 1")[0]
    st = h.one(d, "SELECT sum(memory_states_lost) AS lost, sum(snapshots) AS snaps FROM stats")
    check(lost["n"] and lost["n"] > 0, f"no lost memory states with a 4 MiB ring and drop-oldest (stats {st})")
    check("drop" in (lost["why"] or ""), f"lost reason {lost['why']!r} does not say dropped")
    info = h.save_info("memory_drop", d)
    check(info.rc == 1 and "LOST" in info.out, f"gpurr info does not flag the drops loudly (exit {info.rc})")
    return f"{lost['n']} launches lost states ({lost['why']}), {st['snaps']} snapshots kept; info exits 1"


@test("memory.ring_restart")
def t_memory_ring(h):
    """Snapshots that need most of the staging ring, after small ones left it part-way: each
    fits once the ring empties (before the fix, backpressure waited forever and capture stopped)."""
    out = h.tmp / "memory_ring"
    want, d = h.py_workload("memory_snapshot_ring", "memory_snapshot.py", args=["ring", out], flags=[
        "--memory", "snapshot", "--staging-bytes", str(4 << 20)])
    st = h.one(d, "SELECT max(memory_stopped) AS stopped, sum(memory_states_lost) AS lost, sum(snapshots) AS snaps FROM stats")
    check(not st["stopped"], f"memory capture stopped: {st['stopped']}")
    statuses = h.query(d, "SELECT memory_status AS s, count(*) AS n FROM launches GROUP BY 1")
    check(statuses == [{"s": "snapshot", "n": want["fills"]}], f"launch memory statuses {statuses}, want {want['fills']} snapshot")
    last = h.query(d, "SELECT max(seq) AS seq FROM launches")[0]["seq"]
    data = rewind(h, d, last, "after", h.tmp / "ring.bin")
    check(data == (out / "big.bin").read_bytes(), "rewind of the 3.5 MiB buffer after its last fill differs from the program's copy")
    return f"{want['fills']} launches snapshotted through a 4 MiB ring ({st['snaps']} states), none lost"


@test("memory.disk_full")
def t_memory_disk_full(h):
    """Snapshots into a 40 MiB file system: the chunk store runs out of space, memory capture
    stops, the program still finishes with its own exit status, and info says what happened."""
    fs = h.tmp / "smallfs"
    fs.mkdir(exist_ok=True)
    m = h.sh(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", fs], 30, log="memory_disk_full.mount")
    if m.rc != 0:
        raise Skip(f"cannot mount a small tmpfs here (needs root): {m.why()}")
    try:
        d = fs / "rec"
        r = h.sh(h.record_argv(d, [h.py, WL / "memory_snapshot.py", "exact", h.tmp / "memory_disk_full"],
                               ["--memory", "snapshot", "--snapshot-kernels", "gpurr_snap_"]), 240, log="memory_disk_full.rec")
        got = last_json(r.out)
        check(r.rc == 0 and got and got.get("pokes"), f"the program did not finish normally: {r.why()}")
        info = h.save_info("memory_disk_full", d)
        check(info.rc == 1, f"gpurr info exits {info.rc} on a recording whose disk filled up, want 1")
        said = [l.strip() for l in info.out.splitlines() if "memory capture stopped" in l.lower()]
        check(said, f"gpurr info does not say memory capture stopped: {info.out[:600]!r}")
        check("!! TRUNCATED" not in info.out and "!! INCOMPLETE" not in info.out,
              f"the launch log did not go on after the disk filled: {info.out[:600]!r}")
        n = h.n(d, "SELECT count(*) AS n FROM launches")
        check(n == 1 + got["pokes"], f"{n} launches in the log, want {1 + got['pokes']} (every launch, snapshots or not)")
        return f"program exit 0; memory capture stopped, all {n} launches logged; info: {said[0][:120]}"
    finally:
        h.sh(["umount", "-l", fs], 30, log="memory_disk_full.umount")


@test("memory.flight_sigusr2")
def t_memory_flight(h):
    out = h.tmp / "memory_flight"
    want, d = h.py_workload("memory_snapshot_flight", "memory_snapshot.py", args=["flight", out], flags=[
        "--memory", "snapshot", "--snapshot-kernels", "gpurr_snap_poke", "--flight-recorder", "3"])
    st = h.one(d, "SELECT max(flight_dumps) AS dumps FROM stats")
    check(st["dumps"] and st["dumps"] >= 2, f"flight_dumps {st['dumps']}, want >= 2 (SIGUSR2 and exit)")
    snap = [r["seq"] for r in mem_states(h, d, "gpurr_snap_poke") if truthy(r["snapshot"])]
    allp = [r["seq"] for r in mem_states(h, d, "gpurr_snap_poke")]
    check(len(allp) == want["pokes"], f"{len(allp)} poke after-states, want {want['pokes']}")
    # Window of 3 launches at the signal (pokes 6..8) and at exit (pokes 10..12).
    want_snap = allp[5:8] + allp[9:12]
    check(snap == want_snap, f"snapshots kept for launches {snap}, want the windows {want_snap}")
    rewind(h, d, allp[7], "after", h.tmp / "fl.bin")
    return f"{st['dumps']} dumps; snapshots of launches {snap} kept, the others hash-only"


@test("memory.flight_fault")
def t_memory_fault(h):
    script = WL / "memory_snapshot.py"
    d = h.new_recdir("memory_fault")
    r = h.sh(h.record_argv(d, [h.py, script, "fault", h.tmp / "memory_fault"],
                           ["--memory", "snapshot", "--flight-recorder", "4"]), 240, log="memory_fault.rec")
    got = last_json(r.out)
    check(got and got.get("fault", "none") != "none", f"the planted illegal-address kernel did not fault: {got} {r.why()}")
    st = h.one(d, "SELECT max(flight_dumps) AS dumps FROM stats")
    check(st["dumps"] and st["dumps"] >= 1, f"no flight-recorder dump after {got['fault']} (stats {st})")
    bad = h.query(d, "SELECT seq FROM launches WHERE name = 'gpurr_snap_bad'")
    check(len(bad) == 1, f"{len(bad)} launches of the faulting kernel recorded")
    seq = bad[0]["seq"]
    before = h.query(d, f"SELECT snapshot FROM memory_states WHERE launch_seq = {seq} AND point = 'before'")
    check(before and all(truthy(b["snapshot"]) for b in before), f"no stored snapshot before the faulting launch {seq}: {before}")
    data = rewind(h, d, seq, "before", h.tmp / "fault-before.bin")
    h.recordings.append(d)
    return f"{got['fault']}: dumped; the faulting launch's inputs ({len(data)} B) are in the recording"


@test("memory.flight_crash")
def t_memory_crash(h):
    """A host crash (SIGSEGV, then SIGABRT) writes the flight recorder's window and every launch
    record before the program dies; the recording is still called incomplete."""
    script = WL / "memory_snapshot.py"
    got = []
    for sig in ("segv", "abort"):
        d = h.new_recdir(f"memory_{sig}")
        r = h.sh(h.record_argv(d, [h.py, script, sig, h.tmp / f"memory_{sig}"],
                               ["--memory", "snapshot", "--snapshot-kernels", "gpurr_snap_poke", "--flight-recorder", "3"]),
                 240, log=f"memory_{sig}.rec")
        want = last_json(r.out)
        check(want and want.get("pokes"), f"{sig}: the workload did not reach the crash: {r.why()}")
        check(r.rc != 0, f"{sig}: gpurr record exited 0; the program was meant to die")
        st = h.one(d, "SELECT max(flight_dumps) AS dumps FROM stats")
        check(st["dumps"] and st["dumps"] >= 1, f"{sig}: no flight-recorder dump before the crash (stats {st})")
        pokes = mem_states(h, d, "gpurr_snap_poke")
        check(len(pokes) == want["pokes"], f"{sig}: {len(pokes)} poke after-states written, want {want['pokes']}")
        snap = [p["seq"] for p in pokes if truthy(p["snapshot"])]
        want_snap = [p["seq"] for p in pokes][-3:]
        check(snap == want_snap, f"{sig}: snapshots kept for launches {snap}, want the last 3 {want_snap}")
        log = h.query(d, "SELECT message FROM log WHERE message LIKE '%received SIG%'")
        check(log, f"{sig}: the recording's log does not say which signal ended the program")
        rewind(h, d, want_snap[-1], "after", h.tmp / f"{sig}.bin")
        h.recordings.append(d)
        got.append(f"{sig} (exit {r.rc}): {len(pokes)} launches, {len(snap)} snapshots written")
    return "; ".join(got)


@test("diff.scatter")
def t_diff_scatter(h):
    """Two recordings of a loop whose only nondeterministic kernel is a float scatter-add with
    colliding indices: gpurr diff names that kernel and the Python line that launched it."""
    return diff_scatter(h, "diff_scatter", [])


@test("writesets.diff_scatter_learned")
def t_writesets_diff_scatter(h):
    """diff.scatter with --write-sets learned: the same kernel and line, though most regions
    are carried, not hashed."""
    return diff_scatter(h, "diff_scatter_learned", ["--write-sets", "learned"])


@test("writesets.diff_scatter_deferred")
def t_writesets_diff_scatter_deferred(h):
    """diff.scatter with --defer-hashes: the divergence found at the same kernel and line."""
    return diff_scatter(h, "diff_scatter_deferred", ["--defer-hashes"])


@test("writesets.nan_learned")
def t_writesets_nan(h):
    """nan.gpu_counts with --write-sets learned: the planted NaN found from the GPU's counts at
    the same launch and line (carried states keep the counts of the state they came from)."""
    line = mark_line(WL / "nan_loop.py", "nan")
    _, d = h.py_workload("nan_loop.learned", script="nan_loop.py",
                         flags=["--memory", "hash", "--nan-scan", "f32,bf16", "--write-sets", "learned"])
    r, seq, at = nan_at(h, d, "f32", "nan_loop.learned.nan")
    check(r.rc == 1 and seq, f"gpurr nan found nothing (exit {r.rc}):\n{r.out[:800]}")
    check(f"nan_loop.py:{line}" in at, f"gpurr nan points at {at!r}, want nan_loop.py:{line}:\n{r.out[:800]}")
    carried = h.n(d, "SELECT count(*) AS n FROM memory_states WHERE carried = 'learned'")
    return f"launch {seq} at nan_loop.py:{line} with learned write sets ({carried} states carried)"


def diff_scatter(h, tag, flags):
    script = WL / "diff_scatter.py"
    line = mark_line(script, "scatter")
    recs = record_twice(h, tag, [h.py, script], ["--memory", "hash", *flags])
    r = h.sh([h.gpurr, "diff", *recs], 120, log=f"{tag}.diff")
    check(r.rc == 1, f"gpurr diff exit {r.rc}, want 1 (the runs part ways): {r.why()} {r.out[:300]}")
    kernel = [l.strip() for l in r.out.splitlines() if l.strip().startswith("kernel")]
    check(kernel and "scatter" in kernel[0], f"diff names {kernel[:1]}, want the scatter-add kernel:\n{r.out[:800]}")
    check(f"diff_scatter.py:{line}" in r.out, f"diff does not name diff_scatter.py:{line}:\n{r.out[:800]}")
    same = h.sh([h.gpurr, "diff", recs[0], recs[0]], 120, log=f"{tag}.same")
    check(same.rc == 0 and "agree" in same.out, f"a recording diffed with itself: exit {same.rc}: {same.out[:300]}")
    return f"parts ways at {kernel[0][6:].strip()[:70]} at diff_scatter.py:{line}; a run with itself agrees"


@test("diff.leftovers")
def t_diff_leftovers(h):
    """A deterministic program half-writes a tensor whose memory the pool took back from a
    tensor of random bytes: recorded twice with --memory hash, the runs agree, since new
    allocations are cleared and memory the program never wrote is the same in both."""
    recs = record_twice(h, "leftovers", [h.py, WL / "leftovers.py"], ["--memory", "hash"])
    half = h.n(recs[0], "SELECT count(*) AS n FROM launches WHERE name LIKE '%fill%'")
    check(half >= 3, f"{half} fill launches recorded, want 3")
    r = h.sh([h.gpurr, "diff", *recs], 120, log="leftovers.diff")
    check(r.rc == 0 and "agree" in r.out, f"gpurr diff of a program that half-writes reused memory: {r.why()}\n{r.out[:800]}")
    return "the runs agree: the unwritten half was cleared in both"


@test("diff.threads_paired")
def t_diff_threads_paired(h):
    """8 threads, each copying in its own data and launching on a stream of its own after a
    random sleep, recorded twice with --memory hash: the threads reach the GPU in another order
    in each run, and gpurr diff pairs their streams thread by thread (by the order the threads
    were created), so the runs agree."""
    script = WL / "threads_paired.py"
    recs, orders = [], []
    for i in (1, 2):
        d = h.new_recdir(f"threads_paired{i}")
        r = h.sh(h.record_argv(d, [h.py, script], ["--memory", "hash"]), 240, log=f"threads_paired{i}.rec")
        check(r.rc == 0, f"recording {i}: {r.why()}")
        recs.append(d)
        h.recordings.append(d)
        # Each worker's rank by creation (tid) in the order the workers first launched.
        rows = h.query(d, "SELECT tid, min(seq) AS first FROM launches WHERE tid != (SELECT pid FROM processes) "
                          "GROUP BY tid ORDER BY first")
        check(len(rows) == 8, f"recording {i}: {len(rows)} worker threads launched, want 8: {rows}")
        tids = sorted(row["tid"] for row in rows)
        orders.append([tids.index(row["tid"]) for row in rows])
    r = h.sh([h.gpurr, "diff", *recs], 120, log="threads_paired.diff")
    check(r.rc == 0 and "the runs agree" in r.out,
          f"gpurr diff exit {r.rc}, want 0 (the runs agree); threads launched in the orders {orders}: {r.why()}\n{r.out[:1200]}")
    alike = [l.strip() for l in r.out.splitlines() if "threads launch alike" in l]
    order = "the same order in both runs (by chance)" if orders[0] == orders[1] else f"orders {orders[0]} and {orders[1]}"
    return f"agree; threads launched in {order}; {alike[0] if alike else 'no alike line'}"


@test("verify.rerun")
def t_verify_rerun(h):
    """The diff_scatter loop recorded twice with snapshots of every launch, once made
    deterministic and once with its float scatter-add: run 2 verified against the manifest of
    run 1 matches for the deterministic loop, and for the scatter-add names that kernel and its
    line and shows expected and actual bytes."""
    script = WL / "diff_scatter.py"
    line = mark_line(script, "scatter")

    def verify_rerun(tag, args):
        recs = []
        for i in (1, 2):
            d = h.new_recdir(f"verify_{tag}{i}")
            r = h.sh(h.record_argv(d, [h.py, script, *args], ["--memory", "snapshot"]), 240, log=f"verify_{tag}{i}.rec")
            check(r.rc == 0, f"{tag} recording {i}: {r.why()}")
            recs.append(d)
        m = h.tmp / f"verify_{tag}.json"
        r = h.sh([h.gpurr, "manifest", recs[0], "-o", m], 120, log=f"verify_{tag}.manifest")
        check(r.rc == 0 and m.exists(), f"gpurr manifest of the {tag} run exit {r.rc}: {r.why()}")
        return h.sh([h.gpurr, "verify", recs[1], "--manifest", m], 120, log=f"verify_{tag}.verify")

    r = verify_rerun("det", ["--deterministic"])
    check(r.rc == 0 and "matches the manifest" in r.out,
          f"deterministic loop: gpurr verify exit {r.rc}, want 0 (matches): {r.why()}\n{r.out[:1200]}")
    agree = [l for l in r.out.splitlines() if "matches the manifest" in l]
    r = verify_rerun("scatter", [])
    check(r.rc == 1, f"scatter-add loop: gpurr verify exit {r.rc}, want 1 (differs): {r.why()} {r.out[:300]}")
    kernel = [l.strip() for l in r.out.splitlines() if l.strip().startswith("kernel")]
    check(kernel and "scatter" in kernel[0], f"verify names {kernel[:1]}, want the scatter-add kernel:\n{r.out[:1200]}")
    check(f"diff_scatter.py:{line}" in r.out, f"verify does not name diff_scatter.py:{line}:\n{r.out[:1200]}")
    check("expected 0x" in r.out and "actual   0x" in r.out,
          f"verify shows no expected/actual bytes though both runs have snapshots:\n{r.out[:1200]}")
    return (f"deterministic: {agree[0].split(': ', 1)[-1][:60]}; scatter-add: {kernel[0][6:].strip()[:50]} "
            f"at diff_scatter.py:{line} with bytes")


@test("nan.planted")
def t_nan_planted(h):
    """A loop that writes one NaN at step 3, recorded with snapshots of every launch: gpurr nan
    names the launch at the marked line, and counts it as f32."""
    script = WL / "nan_loop.py"
    line = mark_line(script, "nan")
    want, d = h.py_workload("nan_loop", flags=["--memory", "snapshot"])
    check(want["nans"] > 0, f"the workload did not end with NaN: {want}")
    r = h.sh([h.gpurr, "nan", d, "--dtype", "f32"], 120, log="nan_loop.nan")
    check(r.rc == 1, f"gpurr nan exit {r.rc}, want 1 (found): {r.why()} {r.out[:300]}")
    at = [l.strip() for l in r.out.splitlines() if l.strip().startswith("at ")]
    check(at and f"nan_loop.py:{line}" in at[0], f"gpurr nan points at {at[:1]}, want nan_loop.py:{line}:\n{r.out[:800]}")
    check("as f32 1 NaN" in r.out, f"gpurr nan does not count the one planted f32 NaN:\n{r.out[:800]}")
    first = [l for l in r.out.splitlines() if "first after launch" in l]
    return f"{first[0].split(': ', 1)[-1][:60]} at nan_loop.py:{line}; 1 f32 NaN counted"



def nan_at(h, d, dtypes, log):
    """gpurr nan over d with --dtype dtypes: (result, the launch it names, its 'at' line)."""
    r = h.sh([h.gpurr, "nan", d, "--dtype", dtypes], 120, log=log)
    check(r.rc in (0, 1), f"gpurr nan --dtype {dtypes} exit {r.rc}: {r.why()} {r.err[:300]}")
    check("!!" not in r.out, f"the GPU's NaN counts contradict the snapshot:\n{r.out[:1500]}")
    m = re.search(r"first after launch (\d+)", r.out)
    at = [l.strip() for l in r.out.splitlines() if l.strip().startswith("at ")]
    return r, int(m.group(1)) if m else None, at[0] if at else ""


@test("nan.gpu_counts")
def t_nan_gpu_counts(h):
    """The same loop recorded in hash mode with --nan-scan f32,bf16 (no snapshots): gpurr nan
    finds the planted NaN from the counts the GPU took while recording, names the marked line,
    counts it as f32, and gpurr query's nan_counts table agrees on the launch."""
    line = mark_line(WL / "nan_loop.py", "nan")
    _, d = h.py_workload("nan_loop.gpu_counts", script="nan_loop.py",
                         flags=["--memory", "hash", "--nan-scan", "f32,bf16"])
    r, seq, at = nan_at(h, d, "f32", "nan_loop.gpu_counts.nan")
    check(r.rc == 1 and seq, f"gpurr nan found nothing (exit {r.rc}):\n{r.out[:800]}")
    check(f"nan_loop.py:{line}" in at, f"gpurr nan points at {at!r}, want nan_loop.py:{line}:\n{r.out[:800]}")
    check("as f32 1 NaN, 0 Inf" in r.out and "counted on the GPU" in r.out,
          f"gpurr nan does not report the GPU's count of the one planted f32 NaN:\n{r.out[:800]}")
    first = h.one(d, "SELECT min(launch_seq) AS s FROM nan_counts WHERE dtype = 'f32'")
    check(first.get("s") == seq, f"nan_counts says the first f32 NaN is after launch {first.get('s')}, gpurr nan {seq}")
    bf16 = h.one(d, "SELECT count(DISTINCT launch_seq) AS n, min(launch_seq) AS s FROM nan_counts WHERE dtype = 'bf16'")
    return (f"launch {seq} at nan_loop.py:{line}, 1 f32 NaN, from GPU counts; bf16 bit patterns in "
            f"{bf16.get('n')} launches from launch {bf16.get('s')} (f32 data read as bf16)")


@test("nan.counts_match_snapshots")
def t_nan_counts_match(h):
    """Recorded with snapshots and --nan-scan f32,bf16,f16: for the launch gpurr nan finds as each
    type, the counts the GPU took equal the counts decoded from the snapshot of the same bytes
    (gpurr nan prints '!!' when they differ), and the f32 finding is the planted NaN."""
    line = mark_line(WL / "nan_loop.py", "nan")
    _, d = h.py_workload("nan_loop.counts_match", script="nan_loop.py",
                         flags=["--memory", "snapshot", "--nan-scan", "f32,bf16,f16"])
    found = {}
    for t in ("f32", "bf16", "f16"):
        r, seq, at = nan_at(h, d, t, f"nan_loop.counts_match.{t}")
        found[t] = seq
        if t == "f32":
            check(r.rc == 1 and f"nan_loop.py:{line}" in at and "as f32 1 NaN, 0 Inf (first at byte" in r.out,
                  f"gpurr nan --dtype f32 does not name the planted NaN with its offset:\n{r.out[:800]}")
    return "GPU counts equal the snapshots' at the first launch as " + ", ".join(f"{t} ({s})" for t, s in found.items())


REPLAY_KERNELS = "softmax|gemm|nvjet|cutlass|sm90|xmma|gelu_kernel|reduce_kernel|layer_norm|scatter"


def replay_json(h, argv, log, timeout=300):
    r = h.sh([h.gpurr, "replay", *argv, "--format", "json"], timeout, log=log)
    try:
        return r, json.loads(r.out)["launches"]
    except (ValueError, KeyError):
        raise Fail(f"gpurr replay printed no JSON ({r.why()}): {r.out[:300]} {r.err[:300]}")


@test("replay.transformer")
def t_replay_transformer(h):
    """A transformer training step recorded with snapshots of every launch of a handful of
    kernels (GEMMs, softmax, the Triton GELU, reductions, layer norm, a float scatter-add):
    gpurr replay --all replays each; every deterministic kernel is bit-exact, and the
    scatter-add is reported nondeterministic rather than failing."""
    want, d = h.py_workload("transformer_step", flags=["--memory", "snapshot", "--snapshot-kernels", REPLAY_KERNELS])
    r, launches = replay_json(h, [d, "--all", "--repeat", "3"], "transformer_step.replay")
    check(len(launches) >= 8, f"only {len(launches)} launches replayed: {r.out[:300]}")
    bad = [l for l in launches if l["status"] not in ("bit-exact", "nondeterministic")]
    kinds = {"gemm": r"gemm|nvjet|cutlass|sm90|xmma", "softmax": "softmax", "triton": "gelu_kernel",
             "reduce": "reduce_kernel", "scatter": "scatter"}
    exact = {k: sum(1 for l in launches if re.search(p, l["kernel"]) and l["status"] == "bit-exact") for k, p in kinds.items()}
    nondet = [l for l in launches if l["status"] == "nondeterministic"]
    summary = (f"{len(launches)} launches: {sum(1 for l in launches if l['status'] == 'bit-exact')} bit-exact; "
               f"by kind {exact}; nondeterministic: {[l['kernel'][:40] for l in nondet]}")
    check(not bad, f"{len(bad)} launches neither bit-exact nor nondeterministic: "
          + "; ".join(f"{l['launch']} {l['kernel'][:50]} {l['status']}: {l.get('why', '')[:120]}" for l in bad[:4])
          + f" -- {summary}")
    for k in ("gemm", "softmax", "triton", "reduce"):
        check(exact[k] > 0, f"no bit-exact {k} launch: {summary}")
    check(all("scatter" in l["kernel"] for l in nondet), f"a kernel other than the scatter-add is nondeterministic: {summary}")
    return summary


@test("replay.extract")
def t_replay_extract(h):
    """gpurr extract writes the Triton launch of the transformer step as a reproducer; gpurr
    replay DIR runs it bit-exact, and its README holds the command."""
    _, d = h.py_workload("transformer_step", flags=["--memory", "snapshot", "--snapshot-kernels", REPLAY_KERNELS])
    rows = h.query(d, "SELECT seq FROM launches WHERE name LIKE '%gelu_kernel%' AND memory_status = 'snapshot' LIMIT 1")
    check(rows, "no gelu_kernel launch in the recording")
    seq = rows[0]["seq"]
    out = h.new_recdir("transformer_extract")
    r = h.sh([h.gpurr, "extract", d, "--launch", seq, "-o", out], 120, log="transformer_step.extract")
    check(r.rc == 0, f"gpurr extract: {r.why()} {r.err[:300]}")
    check("gpurr replay" in (out / "README.md").read_text(), "the README lacks the replay command")
    r, launches = replay_json(h, [out], "transformer_step.extract.replay")
    check(r.rc == 0 and launches[0]["status"] == "bit-exact", f"replay of the reproducer: exit {r.rc}, {launches}")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    return f"launch {seq} (gelu_kernel) extracted, {size >> 10} KiB, replays bit-exact from the reproducer"


@test("replay.module")
def t_replay_module(h):
    """--module runs a replacement cubin on the recorded inputs: one with the same arithmetic
    replays bit-exact (exit 0), one that adds 1 differs (exit 1), and a cubin for another GPU
    architecture is refused with one line naming it (exit 2)."""
    _, d = h.py_workload("gridstride", flags=["--memory", "snapshot", "--snapshot-kernels", "saxpy"])
    src = WL / "saxpy_variant.cu"
    cubins = {}
    for name, flags in {"same": ["-arch=sm_90"], "wrong": ["-arch=sm_90", "-DWRONG"], "sm80": ["-arch=sm_80"]}.items():
        out = h.tmp / f"saxpy_{name}.cubin"
        r = h.sh([h.nvcc, "-cubin", *flags, "-o", out, src], 120, log=f"saxpy_{name}.nvcc")
        if r.rc != 0:
            raise Skip(f"nvcc failed: {tail(r.err, 1)}")
        cubins[name] = out
    same = h.sh([h.gpurr, "replay", d, "--module", cubins["same"]], 120, log="replay_module.same")
    check(same.rc == 0 and "bit-exact" in same.out, f"same-arithmetic module: exit {same.rc}: {same.out[-300:]} {same.err[-200:]}")
    wrong = h.sh([h.gpurr, "replay", d, "--module", cubins["wrong"], "--dtype", "f32"], 120, log="replay_module.wrong")
    check(wrong.rc == 1 and "DIFFERS" in wrong.out, f"module that adds 1: exit {wrong.rc}: {wrong.out[-300:]}")
    other = h.sh([h.gpurr, "replay", d, "--module", cubins["sm80"]], 120, log="replay_module.sm80")
    check(other.rc == 2 and "sm_80" in other.err and other.err.strip().count("\n") == 0,
          f"sm_80 cubin: exit {other.rc}, stderr {other.err!r}")
    return f"same: bit-exact; +1: differs; sm_80 cubin: {other.err.strip()[:110]}"


@test("replay.bad_input")
def t_replay_bad(h):
    """Bad input gives one line and exit 2: a launch that does not exist, a recording without
    snapshots (naming --memory snapshot), a launch without snapshots."""
    _, snap = h.py_workload("gridstride", flags=["--memory", "snapshot", "--snapshot-kernels", "saxpy"])
    _, hashed = h.py_workload("gridstride_hash", script="gridstride.py", flags=["--memory", "hash"])
    cases = [([snap, "--launch", "999999"], "no launch 999999"),
             ([hashed, "--launch", "1"], "--memory snapshot"),
             ([snap, "--launch", "1"], "no snapshot")]
    for argv, want in cases:
        r = h.sh([h.gpurr, "replay", *argv], 60, log="replay_bad")
        check(r.rc == 2 and want in r.err and r.err.strip().count("\n") == 0,
              f"replay {argv[1:]}: exit {r.rc}, stderr {r.err!r}; want exit 2 and one line with {want!r}")
    return f"{len(cases)} bad inputs: one line, exit 2"


@test("tune.gridstride")
def t_tune_gridstride(h):
    """gpurr tune on a grid-stride kernel recorded with a small shape: every shape verifies,
    and the fastest is faster than the recorded one; CSV and SVG are written."""
    _, d = h.py_workload("gridstride", flags=["--memory", "snapshot", "--snapshot-kernels", "saxpy"])
    csv_path, svg = h.tmp / "tune.csv", h.tmp / "tune.svg"
    r = h.sh([h.gpurr, "tune", d, "--block", "32,64,128,256,512,1024", "--grid", "16,66,132,264,528",
              "--csv", csv_path, "--chart", svg], 240, log="tune_gridstride")
    check(r.rc == 0, f"gpurr tune: {r.why()} {r.err[-300:]}")
    best = [l for l in r.out.splitlines() if l.startswith("fastest verified")]
    check(best, f"no fastest verified shape printed: {r.out[-300:]}")
    rows = csv_path.read_text().splitlines()
    check(len(rows) == 31, f"CSV has {len(rows)} lines, want a header and 30 shapes")
    check(svg.read_text().lstrip().startswith("<svg"), "chart is not SVG")
    speed = float(re.search(r"\(([\d.]+)x the recorded", best[0]).group(1))
    check(speed > 1, f"fastest verified shape is not faster than the recorded one: {best[0]}")
    rate = [l for l in r.out.splitlines() if l.startswith("measured")]
    return f"{best[0][18:]}; {rate[0][:80] if rate else ''}"


# --- gpurr trace --------------------------------------------------------------------------
def proto_fields(buf):
    """The fields of one protobuf message: (number, wire type, value) with value an int for
    varint and fixed types and bytes for length-delimited ones. Raises Fail on bad bytes."""
    out, i, n = [], 0, len(buf)

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            check(i < n and shift < 70, "Perfetto trace: truncated varint")
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v
    while i < n:
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            out.append((num, wt, varint()))
        elif wt == 1:
            check(i + 8 <= n, "Perfetto trace: truncated fixed64")
            out.append((num, wt, int.from_bytes(buf[i:i + 8], "little")))
            i += 8
        elif wt == 2:
            ln = varint()
            check(i + ln <= n, "Perfetto trace: length past the end")
            out.append((num, wt, buf[i:i + ln]))
            i += ln
        elif wt == 5:
            check(i + 4 <= n, "Perfetto trace: truncated fixed32")
            out.append((num, wt, int.from_bytes(buf[i:i + 4], "little")))
            i += 4
        else:
            raise Fail(f"Perfetto trace: wire type {wt} at byte {i}")
    return out


def perfetto_events(data):
    """Track events of a Perfetto trace as dicts {cat, name, args}, names resolved through
    the interning tables (TracePacket.interned_data): field numbers of Perfetto's
    trace_packet.proto, track_event.proto, debug_annotation.proto and interned_data.proto."""
    names, cats, annos, events = {}, {}, {}, []

    def interned(entry):
        f = {num: v for num, _, v in proto_fields(entry)}
        return f.get(1), f.get(2, b"").decode()
    for num, wt, packet in proto_fields(data):
        check(num == 1 and wt == 2, f"Perfetto trace: top-level field {num}/{wt}, want packets (1)")
        fields = proto_fields(packet)
        for pn, _, v in fields:
            if pn == 12:  # interned_data
                for inum, _, e in proto_fields(v):
                    table = {1: cats, 2: names, 3: annos}.get(inum)
                    if table is not None:
                        iid, name = interned(e)
                        table[iid] = name
        for pn, _, v in fields:
            if pn != 11:  # track_event
                continue
            ev = {"cat": None, "name": None, "args": {}, "type": None}
            for en, _, ev_v in proto_fields(v):
                if en == 9:
                    ev["type"] = ev_v
                elif en == 10:
                    ev["name"] = names.get(ev_v)
                elif en == 3:
                    ev["cat"] = cats.get(ev_v)
                elif en == 4:
                    a = {an: av for an, _, av in proto_fields(ev_v)}
                    key = annos.get(a.get(1))
                    ev["args"][key] = a[6].decode() if 6 in a else a.get(4)
            events.append(ev)
    return events


def trace_file(h, d, name, fmt_ext):
    out = h.tmp / f"{name}.{fmt_ext}"
    r = h.sh([h.gpurr, "trace", d, "-o", out], 180, log=f"{name}.trace.{fmt_ext}")
    check(r.rc == 0 and out.exists(), f"gpurr trace -o {out.name}: {r.why()} {r.out[:300]}")
    return out, r


@test("trace.graphs")
def t_trace_graphs(h):
    """gpurr trace of the CUDA-graph workload, as Chrome JSON and as Perfetto protobuf: every
    kernel a graph replay ran is a slice named after its kernel that carries the graphs.py
    line of the launch that captured it (joined through the graph nodes, not by name), an
    arrow from its cuGraphLaunch call, and the line that replayed it."""
    want, d = h.py_workload("graphs")
    script, lines = WL / "graphs.py", graph_lines(want)
    cap = {tag: h.n(d, f"SELECT count(*) AS n FROM launches WHERE captured = 1 AND "
                       f"{at_line('python_line', script, line)}") for tag, line in lines.items()}
    captured = sum(cap.values())
    check(captured > 0, "no captured launches")
    out, r = trace_file(h, d, "graphs", "json")
    doc = json.loads(out.read_text())
    slices = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    gk = [e for e in slices if e.get("cat") == "graph_kernel"]
    check(len(gk) == want["replays"] * captured,
          f"{len(gk)} graph kernel slices, want {want['replays']} replays x {captured} captured launches {h.drops(d)}")
    bad = [e for e in gk if not any(f"graphs.py:{line} " in str(e.get("args", {}).get("python_line", ""))
                                    for line in lines.values())]
    check(not bad, f"{len(bad)} graph kernel slices without a marked capture-time line, e.g. "
                   f"{bad[0].get('name')!r} args {json.dumps(bad[0].get('args'))[:300]}" if bad else "")
    for tag, line in lines.items():
        got = sum(1 for e in gk if f"graphs.py:{line} " in e["args"]["python_line"])
        check(got == want["replays"] * cap[tag], f"{got} graph kernel slices carry graphs.py:{line} ({tag}), "
                                                 f"want {want['replays']} x {cap[tag]}")
    unnamed = [e for e in gk if not e.get("name") or e["name"].startswith("[")]
    check(not unnamed, f"{len(unnamed)} graph kernel slices have no kernel name")
    outs = {e["bind_id"] for e in slices if e.get("flow_out") and e.get("cat") == "graph_launch"}
    no_flow = [e for e in gk if not e.get("flow_in") or e.get("bind_id") not in outs]
    check(not no_flow, f"{len(no_flow)} graph kernel slices have no arrow from a cuGraphLaunch call")
    # The replay call's innermost Python frame is torch's CUDAGraph.replay.
    unreplayed = [e["args"].get("replayed_at") for e in gk if "replay" not in e["args"].get("replayed_at", "")]
    check(not unreplayed, f"{len(unreplayed)} graph kernel slices lack the replaying line: {unreplayed[:2]}")

    pout, _ = trace_file(h, d, "graphs", "perfetto-trace")
    events = perfetto_events(pout.read_bytes())
    pg = [e for e in events if e["cat"] == "graph_kernel" and e["type"] == 1]  # TYPE_SLICE_BEGIN
    check(len(pg) == len(gk), f"Perfetto trace: {len(pg)} graph kernel slices, the JSON has {len(gk)}")
    for tag, line in lines.items():
        got = sum(1 for e in pg if f"graphs.py:{line} " in str(e["args"].get("python_line")))
        check(got == want["replays"] * cap[tag], f"Perfetto trace: {got} graph kernels carry graphs.py:{line} ({tag})")
    return (f"{len(gk)} replayed kernel slices in JSON and Perfetto, each with its capture-time line "
            f"{ {t: lines[t] for t in lines} } and an arrow from its cuGraphLaunch; {r.out.strip()[:120]}")


@test("trace.memcap")
def t_trace_memcap(h):
    """gpurr's own memory-capture kernels (--memory hash) are on a track of their own in the
    trace, not among the program's kernels, and their durations add up to the recording's
    memory_capture_gpu_ns statistic."""
    out = h.tmp / "memory_hash"
    want, d = h.py_workload("memory_hash", args=[out], flags=["--memory", "hash"])
    ours = h.n(d, "SELECT count(*) AS n FROM gpu_activity WHERE name LIKE 'gpurr_memcap%'")
    check(ours == 0, f"{ours} of gpurr's own kernels are among the program's in gpu_activity")
    gpu_ns = h.n(d, "SELECT sum(memory_capture_gpu_ns) AS n FROM stats")
    check(gpu_ns > 0, "memory_capture_gpu_ns is 0 in a --memory hash recording")
    tout, r = trace_file(h, d, "memory_hash", "json")
    doc = json.loads(tout.read_text())
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in doc["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    own = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "gpurr"]
    check(own, f"no memory-capture slices in the trace ({r.out.strip()[:200]})")
    off = [names.get((e["pid"], e["tid"])) for e in own if "gpurr memory capture" not in names.get((e["pid"], e["tid"]), "")]
    check(not off, f"{len(off)} memory-capture slices on other tracks: {sorted(set(map(str, off)))[:3]}")
    total_ns = sum(round(e["dur"] * 1000) for e in own)
    # Both come from the same CUPTI records; runs that completed after the last frame's
    # counters were taken may make them differ a little.
    check(abs(total_ns - gpu_ns) <= max(1000, gpu_ns // 100),
          f"memory-capture slices last {total_ns} ns in all, the recording counted {gpu_ns} ns")
    program = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e.get("name", "").startswith("gpurr_memcap")]
    check(not program, f"{len(program)} gpurr_memcap slices among the program's kernels")
    return f"{len(own)} memory-capture kernels on their own track, {total_ns / 1e6:.3f} ms = memory_capture_gpu_ns"


def parse_part(text):
    """K/N of --part, checked: 1 <= K <= N."""
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        print(f"gputest: --part {text!r}: want K/N with 1 <= K <= N, e.g. 1/2", file=sys.stderr)
        sys.exit(2)
    return int(m[1]), int(m[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpurr", default=str(ROOT / "bin" / "gpurr"))
    ap.add_argument("--python", default=sys.executable, help="interpreter for the workloads")
    ap.add_argument("--only", action="append", help="run tests whose name matches (glob or prefix); repeatable")
    ap.add_argument("--bare-only", action="store_true", help="only check that the workloads run bare")
    ap.add_argument("--raw-cuda-bin", help="prebuilt raw_cuda (else built here with nvcc)")
    ap.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
    ap.add_argument("--tmp", help="directory for recordings and logs (default: a new temp dir)")
    ap.add_argument("--budget", type=float, default=480, help="seconds; later tests SKIP once spent")
    ap.add_argument("--part", default="1/1", help="K/N: only the Kth of N interleaved shares of the selected tests, "
                    "so a suite longer than one device call runs in N calls")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()

    selected = [(n, f) for n, f in TESTS if not args.only or any(
        fnmatch.fnmatch(n, p) or n.startswith(p) for p in args.only)]
    part, parts = parse_part(args.part)
    selected = selected[part - 1::parts]
    if args.list:
        print("\n".join(name for name, _ in selected))
        return 0
    h = Harness(args)
    if not args.bare_only and not os.access(h.gpurr, os.X_OK):
        print(f"FAIL setup: {h.gpurr} is not an executable (build bin/ first)")
        return 1
    print(f"gputest: {len(selected)} tests, logs and recordings in {h.tmp}", flush=True)
    t_start, results = time.monotonic(), []
    for name, fn in selected:
        t0 = time.monotonic()
        if args.bare_only and name.startswith("cli."):
            status, reason = "SKIP", "--bare-only: needs gpurr"
        elif t0 - t_start > args.budget:
            status, reason = "SKIP", f"time budget of {args.budget:.0f} s spent"
        else:
            try:
                status, reason = "PASS", fn(h) or "ok"
            except Fail as e:
                status, reason = "FAIL", str(e)
            except Skip as e:
                status, reason = "SKIP", str(e)
            except Exception as e:  # a harness bug still reports as this test's failure
                status, reason = "FAIL", f"harness error {type(e).__name__}: {e}"
        reason = " ".join(reason.split())
        secs = time.monotonic() - t0
        results.append({"name": name, "status": status, "reason": reason, "seconds": round(secs, 1)})
        print(f"{status} {name}: {reason} [{secs:.1f} s]", flush=True)
        write_results(results, h.tmp)  # after every test, so a killed run still leaves its results

    counts = write_results(results, h.tmp)
    print(f"gputest: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped "
          f"in {time.monotonic() - t_start:.0f} s", flush=True)
    return 1 if counts["FAIL"] else 0


def write_results(results, tmp):
    counts = {s: sum(r["status"] == s for r in results) for s in ("PASS", "FAIL", "SKIP")}
    out = os.environ.get("GPURR_RESULTS")
    if out:
        Path(out).write_text(json.dumps({"tests": results, "counts": counts, "tmp": str(tmp)}, indent=1))
    return counts


if __name__ == "__main__":
    sys.exit(main())
