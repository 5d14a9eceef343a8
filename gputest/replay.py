"""replay.*, tune.gridstride: replaying recorded launches, and tuning a kernel's shape."""
import json
import re
import shutil
import time
from pathlib import Path

from harness import Fail, Skip, WL, build_cu_fatbin, check, tail, test


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


@test("replay.module_ptx")
def t_replay_module_ptx(h):
    """--ptx runs a launch from the PTX the recording holds of its module, JIT-compiled by the
    driver, instead of its machine code. race_free.cu built with -arch=sm_90 (its fat binary
    holds sm_90 code and the compute_90 PTX, which gpurr record keeps beside the module) replays
    bit-exact from that PTX, alone and with --all, and the report names the PTX and its target;
    that PTX retargeted to sm_100 (--ptx=FILE) is refused with one line naming both (exit 2);
    clocked.cu built as machine code only is refused with one line: it holds no PTX (exit 2)."""
    binary = build_cu_fatbin(h, "race_free")
    _, d = h.workload("race_free_sm90", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "^synced_neighbour$"])
    mods = h.query(d, "SELECT ptx FROM modules WHERE ptx != ''")
    check(mods and all(m["ptx"] == "fatbin" for m in mods), f"modules with PTX: {mods}")
    sass = h.sh([h.gpurr, "replay", d], 120, log="replay_ptx.sass")
    check(sass.rc == 0 and "bit-exact" in sass.out and "code:" not in sass.out,
          f"replay of the recorded machine code: exit {sass.rc}: {sass.out[-400:]} {sass.err[-300:]}")
    code = "PTX from the recording, for compute_90, JIT-compiled by the driver for sm_"
    one = h.sh([h.gpurr, "replay", d, "--ptx"], 120, log="replay_ptx.one")
    check(one.rc == 0 and "result: bit-exact" in one.out and f"  code: {code}" in one.out,
          f"replay --ptx: exit {one.rc}: {one.out[-500:]} {one.err[-300:]}")
    r, launches = replay_json(h, [d, "--ptx"], "replay_ptx.json")
    check(r.rc == 0 and len(launches) == 1 and launches[0]["status"] == "bit-exact" and code in launches[0].get("code", ""),
          f"replay --ptx --format json: exit {r.rc}: {launches}")
    every = h.sh([h.gpurr, "replay", d, "--all", "--ptx"], 120, log="replay_ptx.all")
    check(every.rc == 0 and "code: PTX from the recording of each launch's module" in every.out
          and "1 launch replayed: 1 bit-exact" in every.out, f"replay --all --ptx: exit {every.rc}: {every.out[-500:]} {every.err[-300:]}")
    kept = [p for p in sorted((Path(d) / "modules").glob("*.ptx")) if "synced_neighbour" in p.read_text()]
    check(kept, f"no PTX beside the modules of {d} declares synced_neighbour")
    text = kept[0].read_text()
    check(".target sm_90" in text, f"{kept[0].name} has no .target sm_90")
    newer = h.tmp / "race_free.recorded.sm100.ptx"
    newer.write_text(text.replace(".target sm_90", ".target sm_100"))
    refused = h.sh([h.gpurr, "replay", d, f"--ptx={newer}"], 120, log="replay_ptx.sm100")
    lines = refused.err.strip().splitlines()
    check(refused.rc == 2 and len(lines) == 1 and "targets compute_100, newer than this" in lines[0] and "(sm_90)" in lines[0],
          f"PTX for sm_100: exit {refused.rc}, stderr {refused.err.strip()[-400:]!r}")
    clocked = build_cu(h, "clocked", ["-gencode", "arch=compute_90,code=sm_90"])
    _, c = h.workload("clocked", [clocked], flags=["--memory", "snapshot", "--snapshot-kernels", "clocked"])
    none = h.sh([h.gpurr, "replay", c, "--ptx"], 120, log="replay_ptx.none")
    nlines = none.err.strip().splitlines()
    check(none.rc == 2 and len(nlines) == 1 and "holds no PTX (SASS only)" in nlines[0] and "code=[sm_90,compute_90]" in nlines[0],
          f"machine code only: exit {none.rc}, stderr {none.err.strip()[-400:]!r}")
    return f"bit-exact from {launches[0]['code']} | sm_100: {lines[0][:100]} | no PTX: {nlines[0][:80]}"


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


def build_cu(h, name, flags):
    """gputest/workloads/NAME.cu built with nvcc and flags (once): the program's path."""
    nvcc = h.nvcc if Path(h.nvcc).exists() else shutil.which("nvcc")
    if not nvcc:
        raise Skip(f"no nvcc to build {name}.cu")
    binary = h.tmp / name
    if not binary.exists():
        r = h.sh([nvcc, "-O2", *flags, "-o", binary, WL / f"{name}.cu"], 300, log=f"{name}.nvcc")
        check(r.rc == 0, f"nvcc {name}.cu: {r.why()}")
    return binary


@test("replay.streams_shared")
def t_replay_streams_shared(h):
    """Kernels on 32 streams writing their own slices of one allocation at once, every 7th
    launch snapshotted: the recording is consistent (gpurr info --check exits 0: every chunk
    holds the bytes its name hashes, though other streams wrote them while they were copied),
    some states are marked torn, and replay --all fails no launch: each is bit-exact or torn."""
    binary = build_cu(h, "streams_shared", [])
    _, d = h.workload("streams_shared", [binary], flags=["--memory", "snapshot", "--snapshot-launches", "1-:7"])
    r = h.sh([h.gpurr, "info", "--check", d], 300, log="streams_shared.check")
    check(r.rc == 0, f"gpurr info --check: {r.why()} {r.out[-300:]}")
    torn = h.n(d, "SELECT count(DISTINCT launch_seq) AS n FROM torn_states")
    r, launches = replay_json(h, [d, "--all"], "streams_shared.replay")
    check(len(launches) >= 40, f"only {len(launches)} launches replayed")
    bad = [l for l in launches if l["status"] not in ("bit-exact", "torn")]
    check(not bad, f"{len(bad)} launches neither bit-exact nor torn: "
          + "; ".join(f"{l['launch']} {l['status']}: {l.get('why', '')[:160]}" for l in bad[:4]))
    check(torn > 0, "no torn state: the 32 streams' kernels never overlapped gpurr's copies (GPU timing on?)")
    n_torn = sum(1 for l in launches if l["status"] == "torn")
    return f"{len(launches)} launches replayed, {n_torn} torn ({torn} launches with torn states); info --check: 0"


@test("replay.cooperative")
def t_replay_cooperative(h):
    """A cooperative kernel with a grid-wide sync (cudaLaunchCooperativeKernel) replays
    bit-exact: launched as an ordinary kernel it would fault."""
    binary = build_cu(h, "coop_sync", ["-arch=sm_90"])
    _, d = h.workload("coop_sync", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "grid_sum"])
    r, launches = replay_json(h, [d, "--all"], "coop_sync.replay")
    grid = [l for l in launches if "grid_sum" in l["kernel"]]
    check(len(grid) == 1, f"grid_sum replayed {len(grid)} times: {r.out[:300]}")
    check(grid[0]["status"] == "bit-exact", f"grid_sum: {grid[0]['status']}: {grid[0].get('why', '')[:200]}")
    return "grid_sum (cooperative, grid.sync) bit-exact"


@test("replay.fault_fresh_context")
def t_replay_fault_fresh_context(h):
    """A kernel that traps once the GPU's timer passes a deadline its program's run ends before
    (fault_later.cu), between two that do not: gpurr replay --all after the deadline faults in
    it, says the CUDA context was lost and that the launches after it run in a fresh one, and
    the next kernel, scale, replays bit-exact there (after_fault names the trap's launch)."""
    binary = build_cu(h, "fault_later", ["-arch=sm_90"])
    want, d = h.workload("fault_later", [binary], flags=["--memory", "snapshot", "--snapshot-launches", "1-"])
    time.sleep(want["delay_s"] + 1)  # past the deadline, counted from the program's start
    r, launches = replay_json(h, [d, "--all"], "fault_later.replay")
    by = {l["kernel"].split("(")[0]: l for l in launches}
    trap, after = by.get("late_trap"), by.get("scale")
    check(trap and after, f"late_trap and scale not both replayed: {[l['kernel'] for l in launches]}")
    check(trap.get("fresh_context"), f"late_trap: {trap['status']}, no fresh context after it: {trap.get('why', '')[:200]}")
    check(after["status"] == "bit-exact" and after.get("after_fault") == trap["launch"],
          f"scale: {after['status']}, after_fault {after.get('after_fault')}, want bit-exact after launch {trap['launch']}")
    check("run in a fresh context" in r.err, f"replay's stderr does not say so: {r.err[-300:]!r}")
    return f"late_trap (launch {trap['launch']}): {trap['status']}; scale bit-exact in a fresh context"


@test("replay.big_operands")
def t_replay_big_operands(h):
    """A launch with 1.5 GiB of operands, with the default 256 MiB staging ring: snapshotted
    (in pieces, not skipped for its size: info names no launch not captured) and replayed
    bit-exact."""
    binary = build_cu(h, "big_operands", [])
    _, d = h.workload("big_operands", [binary], timeout=600,
                      flags=["--memory", "snapshot", "--snapshot-kernels", "fma_big", "--staging-bytes", "256MiB"])
    st = h.one(d, "SELECT l.memory_status AS s, sum(r.size) AS b FROM launches l JOIN regions r "
                  "ON r.process = l.process AND r.launch_seq = l.seq WHERE l.name LIKE '%fma_big%' GROUP BY l.seq, l.memory_status")
    check(st.get("s") == "snapshot", f"fma_big's memory status is {st.get('s')}, want snapshot")
    check((st.get("b") or 0) >= 3 << 29, f"fma_big's regions hold {st.get('b')} bytes, want 1.5 GiB")
    info = h.sh([h.gpurr, "info", d], 120, log="big_operands.info2")
    check("NOT CAPTURED" not in info.out, f"gpurr info: {[l for l in info.out.splitlines() if 'NOT CAPTURED' in l]}")
    r, launches = replay_json(h, [d, "--all"], "big_operands.replay", timeout=600)
    big = [l for l in launches if "fma_big" in l["kernel"]]
    check(len(big) == 1 and big[0]["status"] == "bit-exact", f"fma_big replay: {big}")
    return f"fma_big: {st.get('b')} region bytes snapshotted through a 256 MiB ring, bit-exact"


@test("replay.clocked_cubin")
def t_replay_clocked_cubin(h):
    """A kernel that spins on clock64(), built as machine code only (no PTX in the binary):
    its replay differs, and replay says why from its SASS (it reads SR_CLOCKLO: its output
    depends on when it runs), not that it may read memory outside its regions; with no
    cuobjdump or nvdisasm installed it says that instead."""
    binary = build_cu(h, "clocked", ["-gencode", "arch=compute_90,code=sm_90"])
    _, d = h.workload("clocked", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "clocked"])
    r, launches = replay_json(h, [d, "--all"], "clocked.replay")
    clocked = [l for l in launches if "clocked" in l["kernel"]]
    check(len(clocked) == 1, f"clocked replayed {len(clocked)} times: {r.out[:300]}")
    l = clocked[0]
    check(l["status"] in ("differs", "nondeterministic"), f"clocked: {l['status']}, want differs")
    why = l.get("why", "")
    tools = [t for t in ("cuobjdump", "nvdisasm") if shutil.which(t) or Path("/usr/local/cuda/bin", t).exists()]
    if tools:
        check("SR_CLOCK" in why and "when it runs" in why and "outside its regions" not in why,
              f"clocked's explanation ({tools[0]} installed): {why}")
    else:
        check("no cuobjdump or nvdisasm" in why, f"clocked's explanation (no disassembler): {why}")
    return f"clocked: {l['status']}: {why[:160]}"
