"""The GPU suite's harness: the Harness that runs workloads bare and under gpurr record and
queries their recordings, the @test registry, the helpers that tests of more than one
capability use, and the runner behind run.py's command line (selection, budget, the result
lines and GPURR_RESULTS). The tests live in one module per capability beside this file.
"""
import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
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


# --- the registry: each capability module adds its tests with @test ----------------------
TESTS = []


def test(name):
    def reg(fn):
        TESTS.append((name, fn))
        return fn
    return reg


# --- helpers that the tests of more than one capability use ------------------------------
def graph_lines(want):
    return {tag: mark_line(WL / "graphs.py", tag) for tag in want["marks"]}


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


def build_cu_fatbin(h, name):
    """Build gputest/workloads/NAME.cu with nvcc -arch=sm_90 -lineinfo: a program whose fat
    binary holds sm_90 code and the compute_90 PTX it came from, which gpurr record keeps beside
    the module (no --ptx needed). Returns the program."""
    nvcc = h.nvcc if Path(h.nvcc).exists() else shutil.which("nvcc")
    if not nvcc:
        raise Skip(f"no nvcc to build {name}.cu")
    binary = h.tmp / f"{name}.sm90"
    r = h.sh([nvcc, "-O2", "-lineinfo", "-arch=sm_90", "-o", binary, WL / f"{name}.cu"], 300, log=f"{name}.sm90.nvcc")
    check(r.rc == 0, f"nvcc -arch=sm_90 {name}.cu: {r.why()}")
    return binary


def record_twice(h, tag, argv, flags, timeout=240):
    """Two recordings of argv with flags, TAG1 and TAG2: their folders; a failed one fails the test."""
    recs = []
    for i in (1, 2):
        d = h.new_recdir(f"{tag}{i}")
        r = h.sh(h.record_argv(d, argv, flags), timeout, log=f"{tag}{i}.rec")
        check(r.rc == 0, f"recording {i}: {r.why()}")
        recs.append(d)
    return recs


def info_of(h, name, d):
    info = h.save_info(name, d)
    check(info.rc == 0, f"gpurr info: {info.why()}")
    return info.out


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


def nan_at(h, d, dtypes, log):
    """gpurr nan over d with --dtype dtypes: (result, the launch it names, its 'at' line)."""
    r = h.sh([h.gpurr, "nan", d, "--dtype", dtypes], 120, log=log)
    check(r.rc in (0, 1), f"gpurr nan --dtype {dtypes} exit {r.rc}: {r.why()} {r.err[:300]}")
    check("!!" not in r.out, f"the GPU's NaN counts contradict the snapshot:\n{r.out[:1500]}")
    m = re.search(r"first after launch (\d+)", r.out)
    at = [l.strip() for l in r.out.splitlines() if l.strip().startswith("at ")]
    return r, int(m.group(1)) if m else None, at[0] if at else ""


# --- the runner --------------------------------------------------------------------------
def parse_part(text):
    """K/N of --part, checked: 1 <= K <= N."""
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        print(f"gputest: --part {text!r}: want K/N with 1 <= K <= N, e.g. 1/2", file=sys.stderr)
        sys.exit(2)
    return int(m[1]), int(m[2])


def in_order(tests, order):
    """The (name, function) pairs @test registered, in order's order of names. The order decides
    each test's share under --part and how early it runs under the budget, so a test order
    leaves out, a name in order that no test has, or a name twice is an error (exit 2)."""
    names = [n for n, _ in tests]
    wrong = {"registered twice": sorted({n for n in names if names.count(n) > 1}),
             "named twice in ORDER": sorted({n for n in order if order.count(n) > 1}),
             "missing from ORDER": [n for n in names if n not in order],
             "in ORDER but registered by no module": [n for n in order if n not in names]}
    wrong = [f"{what}: {', '.join(ns)}" for what, ns in wrong.items() if ns]
    if wrong:
        print(f"gputest: run.py's ORDER and the registered tests disagree; {'; '.join(wrong)}", file=sys.stderr)
        sys.exit(2)
    fns = dict(tests)
    return [(n, fns[n]) for n in order]


def main(doc, order):
    """run.py's command line; doc is its docstring, order its ORDER."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
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
    ap.add_argument("--list", action="store_true", help="print the selected tests' names in run order and exit")
    args = ap.parse_args()

    selected = [(n, f) for n, f in in_order(TESTS, order) if not args.only or any(
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
