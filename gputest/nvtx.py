"""nvtx.*: NVTX ranges from PyTorch's threads and JAX's XLA, in query, trace and info; ranges
pushed before the first CUDA call; another tool's NVTX injection kept."""
import json

from harness import Skip, WL, at_line, check, info_of, mark_line, tail, test, truthy


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
