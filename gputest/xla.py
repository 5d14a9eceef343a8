"""jax.*: JAX programs as gpurr sees them through XLA's HLO dump: each kernel of a jitted step at
its jnp line, the launches of XLA's autotuning marked and left out, diff and nan at the lines
of planted faults, with XLA's memory preallocation off (jax_gpu's default) and on."""
import re

from harness import WL, at_line, check, mark_line, nan_at, record_twice, test, truthy


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
    script = WL / "jax_nan.py"
    line = mark_line(script, "jax-log")
    want, d = h.py_workload("jax_nan", flags=["--memory", "hash", "--nan-scan", "f32"], timeout=400)
    check(want["nan_from"] == 3, f"the workload's loss turned NaN at step {want['nan_from']}, want 3")
    r, seq, at = nan_at(h, d, "f32", "jax_nan.nan")
    check(r.rc == 1 and seq, f"gpurr nan found nothing (exit {r.rc}):\n{r.out[:800]}")
    check(f"jax_nan.py:{line}" in at, f"gpurr nan points at {at!r}, want jax_nan.py:{line}:\n{r.out[:1200]}")
    row = h.one(d, f"SELECT name, op_name, compile FROM launches WHERE seq = {seq}")
    check(not truthy(row.get("compile")), f"gpurr nan found a launch of XLA's autotuning: {row}")
    return f"launch {seq} ({row.get('name')}, {row.get('op_name')}) at jax_nan.py:{line}"
