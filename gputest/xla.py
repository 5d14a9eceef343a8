"""jax.*: JAX programs as gpurr sees them through XLA's HLO dump: each kernel of a jitted step at
its jnp line, the launches of XLA's autotuning marked and left out, diff and nan at the lines
of planted faults, with XLA's memory preallocation off (jax_gpu's default) and on; replay of a
jitted step's snapshotted launches, and bisect with a step for each run of the jitted step."""
import re
from collections import Counter

from harness import WL, at_line, check, mark_line, nan_at, record_twice, test, truthy
from replay import replay_json


def marked(script, prefix):
    """The lines of script marked '# MARK: PREFIX...', by tag."""
    text = script.read_text().splitlines()
    tags = [m.group(1) for m in (re.search(r"# MARK: (" + re.escape(prefix) + r"\S*)\s*$", l) for l in text) if m]
    return {t: mark_line(script, t) for t in tags}


@test("jax.lines")
def t_jax_lines(h):
    """Each kernel XLA launches for the jitted step (op_name jit(step)/...) has python_line at one
    of the step's marked lines; info says how many launches the dump placed and how many XLA's
    autotuning made; the dump gpurr keeps is small."""
    script = WL / "jax_lines.py"
    lines = marked(script, "jax-")
    want, d = h.py_workload("jax_lines", timeout=400)
    step = "op_name LIKE 'jit(step)/%' AND compile = 0"
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {step}")
    # A step XLA runs as a command buffer it builds node by node has no launches: its kernels
    # are graph kernels without launch_seq, found in the dump by name, grid and block.
    graph = f"via_graph = 1 AND launch_seq IS NULL AND python_line LIKE '%{script.name}:%'"
    g = h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE {graph}")
    check(n + g >= want["steps"], f"{n} launches of the step's fusions (op_name jit(step)/...) and {g} command buffer "
                                  f"kernels at {script.name}, want at least one a step; op names seen: "
                                  f"{h.sample(d, 'op_name')}; graph kernels: {h.sample(d, 'name', table='gpu_activity', where='via_graph = 1')}")
    any_line = " OR ".join(at_line("python_line", script, l) for l in lines.values())
    off = h.query(d, f"SELECT name, op_name, python_line FROM launches WHERE {step} AND NOT ({any_line}) LIMIT 5")
    off += h.query(d, f"SELECT name, python_line FROM gpu_activity WHERE {graph} AND NOT ({any_line}) LIMIT 5")
    check(not off, f"step kernels not at a marked line {sorted(lines.values())}: {off}")
    seen = {t: h.n(d, f"SELECT count(*) AS n FROM launches WHERE {step} AND {at_line('python_line', script, l)}")
            + h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE {graph} AND {at_line('python_line', script, l)}")
            for t, l in lines.items()}
    check(sum(1 for v in seen.values() if v) >= 2, f"step kernels at only {seen}")
    user = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {step} AND user_line = python_line")
    check(user == n, f"{n - user} step launches whose user_line is not their python_line")
    compile_ = h.n(d, "SELECT count(*) AS n FROM launches WHERE compile = 1")
    redzone = h.n(d, "SELECT count(*) AS n FROM launches WHERE name LIKE '%RedzoneAllocatorKernel%' AND compile = 0")
    check(redzone == 0, f"{redzone} redzone checks not marked compile")
    info = h.sh([h.gpurr, "info", d], 60, log="jax_lines.info2").out
    xla = [l.strip() for l in info.splitlines() if l.strip().startswith("XLA ")]
    check(xla and "optimized modules dumped" in xla[0], f"info has no XLA line: {xla}\n{info[:1500]}")
    dump = d / "xla"
    files = list(dump.iterdir()) if dump.is_dir() else []
    size = sum(f.stat().st_size for f in files)
    check(files and all(f.name.endswith(("_gpu_after_optimizations.txt", ".thunk_sequence.txt")) for f in files),
          f"the dump kept other files: {[f.name for f in files][:8]}")
    return (f"{n} step launches, {g} command buffer kernels, lines {seen}; {compile_} compile launches; "
            f"dump {len(files)} files, {size / 1024:.0f} KiB; {xla[0]}")


def jax_diff_scatter(h, tag, args):
    script = WL / "jax_scatter.py"
    line = mark_line(script, "jax-scatter")
    h.bare(tag, [h.py, script, *args], 240)  # SKIP here when XLA's scatter is deterministic
    recs = record_twice(h, tag, [h.py, script, *args], ["--memory", "hash"], timeout=400)
    r = h.sh([h.gpurr, "diff", *recs], 300, log=f"{tag}.diff")
    check(r.rc == 1, f"gpurr diff exit {r.rc}, want 1 (the runs part ways): {r.why()} {r.out[:300]}")
    kernel = [l.strip() for l in r.out.splitlines() if l.strip().startswith("kernel")]
    check(f"jax_scatter.py:{line}" in r.out, f"diff does not name jax_scatter.py:{line} (kernel {kernel[:1]}):\n{r.out[:1200]}")
    same = h.sh([h.gpurr, "diff", recs[0], recs[0]], 300, log=f"{tag}.same")
    check(same.rc == 0 and "agree" in same.out, f"a recording diffed with itself: exit {same.rc}: {same.out[:300]}")
    left = [l.strip() for l in r.out.splitlines() if l.strip().startswith("compile ")]
    return f"parts ways at {kernel[0][6:].strip()[:50] if kernel else '?'} at jax_scatter.py:{line}; {left[0] if left else 'no compile launches'}"


@test("jax.diff_scatter")
def t_jax_diff_scatter(h):
    """Two recordings (--memory hash, preallocation off) of a jitted step whose one
    nondeterministic kernel is x.at[idx].add(y) with colliding indices: gpurr diff parts ways at
    its line, the launches of XLA's autotuning left out of the alignment."""
    return jax_diff_scatter(h, "jax_scatter", [])


@test("jax.diff_scatter_prealloc")
def t_jax_diff_scatter_prealloc(h):
    """The same with XLA's memory preallocation on: one pool holds every buffer."""
    return jax_diff_scatter(h, "jax_scatter_prealloc", ["--preallocate"])


@test("jax.nan")
def t_jax_nan(h):
    """A jitted loop that takes jnp.log of a negative at step 3, recorded with --memory hash
    --nan-scan f32: gpurr nan names the kernel at the marked line, not a launch of XLA's
    autotuning (whose scratch memory may hold NaN)."""
    return jax_nan(h, "jax_nan", [])


@test("jax.nan_prealloc")
def t_jax_nan_prealloc(h):
    """The same with XLA's memory preallocation on: one pool holds every buffer."""
    return jax_nan(h, "jax_nan_prealloc", ["--preallocate"])


def jax_nan(h, tag, args):
    script = WL / "jax_nan.py"
    line = mark_line(script, "jax-log")
    want, d = h.py_workload(tag, script="jax_nan.py", args=args, flags=["--memory", "hash", "--nan-scan", "f32"],
                            timeout=400)
    check(want["nan_from"] == 3, f"the workload's loss turned NaN at step {want['nan_from']}, want 3")
    r, seq, at = nan_at(h, d, "f32", f"{tag}.nan")
    check(r.rc == 1 and seq, f"gpurr nan found nothing (exit {r.rc}):\n{r.out[:800]}")
    check(f"jax_nan.py:{line}" in at, f"gpurr nan points at {at!r}, want jax_nan.py:{line}:\n{r.out[:1200]}")
    row = h.one(d, f"SELECT name, op_name, compile FROM launches WHERE seq = {seq}")
    check(not truthy(row.get("compile")), f"gpurr nan found a launch of XLA's autotuning: {row}")
    return f"launch {seq} ({row.get('name')}, {row.get('op_name')}) at jax_nan.py:{line}"


@test("jax.replay")
def t_jax_replay(h):
    """The jitted step run kernel by kernel (no command buffer), every third launch snapshotted:
    gpurr replay --all runs each; every launch of the program's own kernels (compile = 0) is
    bit-exact, or skipped, torn or nondeterministic (a reduction XLA made with float atomics)
    with its reason: none differs or fails. The launches of XLA's autotuning are tallied apart
    (its delay kernel is skipped: it waits on host memory)."""
    _, d = h.py_workload("jax_replay", script="jax_lines.py", args=["--no-command-buffer"],
                         flags=["--memory", "snapshot", "--snapshot-launches", "1-:3"], timeout=400)
    r, launches = replay_json(h, [d, "--all"], "jax_replay.replay", timeout=600)
    compile_ = {row["seq"] for row in h.query(d, "SELECT seq FROM launches WHERE compile = 1")}
    own = [l for l in launches if l["launch"] not in compile_]
    tally = Counter(l["status"] for l in own)
    tuning = Counter(l["status"] for l in launches if l["launch"] in compile_)
    summary = f"step's launches {dict(tally)}; autotuning's {dict(tuning)}"
    check(own, f"no launch of the program's own kernels was replayed ({len(launches)} in all): {summary}")
    bad = [l for l in own if l["status"] not in ("bit-exact", "skipped", "torn", "nondeterministic")
           or l["status"] != "bit-exact" and not l.get("why")]
    check(not bad, f"{len(bad)} of the step's launches neither bit-exact nor explained: "
          + "; ".join(f"{l['launch']} {l['kernel'][:40]} {l['status']}: {l.get('why', '')[:160]}" for l in bad[:5])
          + f" -- {summary}")
    delay = [l for l in launches if "DelayKernel" in l["kernel"]]
    check(all(l["status"] == "skipped" and "waits on host memory" in l.get("why", "") for l in delay),
          f"XLA's delay kernel not skipped: {[(l['launch'], l['status'], l.get('why', '')[:80]) for l in delay[:3]]}")
    return f"{len(launches)} launches replayed: {summary}"


def jax_bisect(h, tag, flags, script, args, line, step):
    """gpurr bisect FLAGS with the JAX recipe's step rule (each run of jit_step a step) of
    script ARGS: exit 1 naming step STEP and script's line LINE; its result."""
    d = h.new_recdir(tag)
    r = h.sh([h.gpurr, "bisect", "-o", d, "--step-range", "hlo_module=jit_step,", *flags, "--", h.py, script, *args],
             600, log=tag)
    check(r.rc == 1, f"gpurr bisect exit {r.rc}, want 1: {r.why()}\n{r.out[-1500:]}")
    check(f"step {step}" in r.out, f"bisect does not name step {step}:\n{r.out[-1500:]}")
    check(f"{script.name}:{line}" in r.out, f"bisect does not name {script.name}:{line}:\n{r.out[-1500:]}")
    return r


@test("jax.bisect")
def t_jax_bisect(h):
    """gpurr bisect --step-range 'hlo_module=jit_step,' (a step for each run of the jitted step,
    by XLA's NVTX range of it) of a JAX loop whose scatter-add with colliding indices runs, and
    is compiled, from step 2 on: the digests part ways at step 2, and the reruns name the
    scatter-add's jnp line, nondeterministic."""
    script = WL / "jax_scatter.py"
    line = mark_line(script, "jax-scatter")
    h.bare("jax_scatter", [h.py, script], 240)  # SKIP here when XLA's scatter is deterministic
    r = jax_bisect(h, "jax_bisect", [], script, ["--plant-from", "2"], line, 2)
    check("nondeterministic" in r.out, f"bisect does not call the kernel nondeterministic:\n{r.out[-1500:]}")
    return f"step 2 at {script.name}:{line}, nondeterministic"


@test("jax.bisect_nan")
def t_jax_bisect_nan(h):
    """gpurr bisect --nan with the same step rule of the jitted loop whose loss takes jnp.log
    of a negative at step 3: the digests find NaN first at step 3, and the rerun names the
    log's line, not a launch of XLA's autotuning (whose scratch memory may hold NaN)."""
    script = WL / "jax_nan.py"
    line = mark_line(script, "jax-log")
    jax_bisect(h, "jax_bisect_nan", ["--nan"], script, [], line, 3)
    return f"step 3 at {script.name}:{line}"
