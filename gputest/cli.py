"""cli.*, demo.story: gpurr's usage errors (one stderr line, exit 2: an unknown verb, a missing
recording, bad SQL), and gpurr demo's story on a GPU."""
import shutil

from harness import Skip, check, test


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
