"""nan.*: gpurr nan from snapshots and from the counts the GPU takes."""
from harness import WL, check, mark_line, nan_at, test


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
