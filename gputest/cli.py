"""cli.*, demo.story: gpurr's usage errors (one stderr line, exit 2: an unknown verb, a missing
recording, bad SQL), and gpurr demo's story on a GPU."""
import shutil

from harness import Skip, at_line, check, mark_line, test


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


@test("demo.story")
def t_demo_story(h):
    """gpurr demo on a GPU with torch records the training loop's two runs (train.py, written
    into -o DIR) and walks through them: query gives each launch a line of train.py and a
    backward kernel its forward line, diff decodes the learning rate that differs as an f32
    parameter, and nan names the log's launch at its marked line, made from finite inputs."""
    out = h.tmp / "demo-story"
    shutil.rmtree(out, ignore_errors=True)
    r = h.sh(["env", f"PYTHON={h.py}", h.gpurr, "demo", "-o", out], 300, log="demo.story")
    check(r.rc == 0, f"gpurr demo: {r.why()}")
    check("Recording two runs of a small PyTorch training loop" in r.out,
          f"gpurr demo did not record the training loop with {h.py}: {r.out[:600]}")
    script = out / "train.py"
    check((out / "a").is_dir() and (out / "b").is_dir() and script.is_file(), f"no recordings or script kept in {out}")
    fwd, nan = mark_line(script, "forward"), mark_line(script, "nan")
    row = h.one(out / "a", "SELECT count(*) AS n, sum(user_line LIKE '%train.py:%') AS lined, "
                  "sum(in_backward = 1) AS backward, sum(in_backward = 1 AND forward_callstack_id IS NULL) AS unlinked, "
                  f"sum(in_backward = 1 AND {at_line('user_line', script, fwd)}) AS at_forward FROM launches WHERE step = 1")
    # Every launch of the step has a line of train.py but those of backward nodes that belong
    # to no forward op (AccumulateGrad), made on autograd's thread, which runs no Python.
    check(row["n"] and row["lined"] >= row["n"] - row["unlinked"], f"step 1's launches without a line of train.py: {row}")
    check(row["backward"] and row["at_forward"], f"no backward kernel at train.py:{fwd} (Model.forward): {row}")
    check(f"train.py:{fwd} " in r.out, f"the walk's query shows no launch at train.py:{fwd}: {r.out[:2000]}")
    check("$ gpurr diff" in r.out and "$ gpurr nan" in r.out, f"the walk lacks diff or nan: {r.out[-1500:]}")
    diff = r.out[r.out.index("$ gpurr diff"):]
    check("the runs part ways at launch" in diff and "(f32): " in diff.split("$ gpurr nan")[0],
          f"diff does not decode an f32 parameter: {diff[:1500]}")
    nan_out = r.out[r.out.index("$ gpurr nan"):]
    at = [l.strip() for l in nan_out.splitlines() if l.strip().startswith("at ")]
    check(at and f"train.py:{nan}" in at[0], f"gpurr nan points at {at[:1]}, want train.py:{nan}:\n{nan_out[:1500]}")
    check("it made the NaN: its inputs were finite" in nan_out, f"nan does not say the log made it: {nan_out[:1500]}")
    param = [l.strip() for l in diff.splitlines() if "(f32): " in l][:1]
    return f"{row['n']} launches of step 1 at lines of train.py, {row['at_forward']} backward at its forward line; {param}; NaN at train.py:{nan}"


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
