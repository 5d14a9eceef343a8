"""native.*, autograd.*: native callstacks of C++ and Go programs, and backward launches
named by their forward line."""
import json
from pathlib import Path

from harness import (CBID_LAUNCH_KERNEL, CUBLAS_NAME, Fail, ROOT, WL, at_line, check, frame_at, info_of,
                     mark_line, raw_cuda_binary, tail, test, truthy)


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
