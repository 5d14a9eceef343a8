"""replay.*, tune.gridstride: replaying recorded launches, and tuning a kernel's shape."""
import json
import re

from harness import Fail, Skip, WL, check, tail, test


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
