"""race.*: gpurr race on planted and race-free kernels."""
import re
import shutil
from pathlib import Path

from harness import WL, build_cu_fatbin, build_cu_with_ptx, check, mark_line, test


def race_lines(r, *words):
    """The lines of gpurr race's output holding any of words, joined for a test's summary."""
    return " | ".join(l.strip() for l in r.out.splitlines() if any(w in l for w in words))[:300]


@test("race.planted")
def t_race_planted(h):
    """gpurr race on a kernel whose missing barrier is planted (racy.cu): --list names the
    shared store and load with their source lines, and a hunt finds a witness and shrinks it
    to the racing instructions."""
    binary, ptxfile = build_cu_with_ptx(h, "racy")
    _, d = h.workload("racy", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "racy_neighbour"])
    listed = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--list", "--at", "shared-store,shared-load"], 120, log="race.list")
    check(listed.rc == 0 and "racy.cu:" in listed.out, f"race --list: {listed.why()} {listed.out[-400:]}")
    hunt = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--at", "shared-store,shared-load,barrier",
                 "--trials", "30", "--placement", "warp", "--fraction", "0.5", "--delay", "20us"], 600, log="race.hunt")
    check(hunt.rc == 1 and "RACE" in hunt.out, f"race found no witness: exit {hunt.rc}: {hunt.out[-600:]} {hunt.err[-300:]}")
    check("st.shared" in hunt.out, f"the witness does not name the shared store: {hunt.out[-600:]}")
    return race_lines(hunt, "RACE", "st.shared", "from the plain replay", "per second")


def race_free_recording(h):
    """race_free.cu built for sm_90 SASS alone (nvcc's default would keep compute_75 PTX beside
    it, which race takes) and recorded with snapshots of its kernel, and its PTX built apart
    (for --ptx): (recording, PTX file)."""
    _, ptxfile = build_cu_with_ptx(h, "race_free")
    nvcc = h.nvcc if Path(h.nvcc).exists() else shutil.which("nvcc")
    binary = h.tmp / "race_free.sass"
    if not binary.exists():
        r = h.sh([nvcc, "-O2", "-lineinfo", "-gencode", "arch=compute_90,code=sm_90", "-o", binary, WL / "race_free.cu"],
                 300, log="race_free.sass.nvcc")
        check(r.rc == 0, f"nvcc race_free.cu: {r.why()}")
    _, d = h.workload("race_free_sass", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "synced_neighbour"])
    return d, ptxfile


@test("race.correct")
def t_race_correct(h):
    """racy.cu's kernel with its barrier (race_free.cu): 200 trials of the delays that expose
    racy.cu's race change nothing, so gpurr race reports no witness and exits 0."""
    d, ptxfile = race_free_recording(h)
    hunt = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--at", "shared-store,shared-load,barrier",
                 "--trials", "200", "--placement", "warp", "--fraction", "0.5", "--delay", "20us"], 300, log="race.correct")
    check(hunt.rc == 0 and "no trial of 200 changed the result" in hunt.out and "RACE" not in hunt.out,
          f"race on a correct kernel: exit {hunt.rc}: {hunt.out[-600:]} {hunt.err[-300:]}")
    check(hunt.secs < 60, f"200 trials took {hunt.secs:.0f} s, want under 60")
    return f"{race_lines(hunt, 'no trial', 'per second')} ({hunt.secs:.1f} s)"


@test("race.roundtrip")
def t_race_roundtrip(h):
    """Parse, print, JIT keeps what the kernel computes: gpurr race --trials 0 replays the
    launch from its PTX as gpurr's parser and printer give it back, without delays, and the
    result must equal the recording (which the plain replay of the nvcc-built cubin reproduces
    bit for bit) in every region."""
    d, ptxfile = race_free_recording(h)
    plain = h.sh([h.gpurr, "replay", d], 120, log="race.roundtrip.replay")
    check(plain.rc == 0 and "bit-exact" in plain.out, f"plain replay of the recorded cubin: {plain.why()} {plain.out[-400:]}")
    r = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--trials", "0"], 120, log="race.roundtrip")
    check(r.rc == 0 and "plain replay of the PTX as gpurr prints it: identical to the recording" in r.out,
          f"race --trials 0: exit {r.rc}: {r.out[-600:]} {r.err[-300:]}")
    return race_lines(r, "plain replay")


@test("race.bad_input")
def t_race_bad_input(h):
    """gpurr race on input it cannot hunt gives one line on stderr and exit 2: a launch whose
    module has no PTX in the recording (built for sm_90 SASS alone), the kernel's PTX rewritten
    to target an architecture this GPU cannot JIT for (sm_100), and --all over a recording
    whose one launch has no PTX."""
    d, ptxfile = race_free_recording(h)
    newer = h.tmp / "race_free.sm100.ptx"
    text = Path(ptxfile).read_text()
    check(".target sm_90" in text, f"{ptxfile.name} has no .target sm_90")
    newer.write_text(text.replace(".target sm_90", ".target sm_100"))
    got = []
    for name, args, want in (("no PTX", [], "holds no PTX (SASS only)"),
                             ("sm_100 PTX", ["--ptx", newer], "cannot replay the launch"),
                             ("--all, no PTX", ["--all"], "none of the 1 launch could be hunted")):
        r = h.sh([h.gpurr, "race", d, *args], 120, log=f"race.bad_input.{name.replace(' ', '_').replace(',', '')}")
        lines = r.err.strip().splitlines()
        check(r.rc == 2 and len(lines) == 1 and want in lines[0],
              f"{name}: exit {r.rc}, stderr {r.err.strip()[-400:]!r}; want exit 2 and one line with {want!r}")
        got.append(f"{name}: {lines[0][:90]}")
    return " | ".join(got)


@test("race.hang")
def t_race_hang(h):
    """A hand-off that deadlocks when its producer warp is late (delay_hang.cu): a trial that
    delays the producer's store makes the kernel spin forever; gpurr race's watchdog reports
    the hang with the delay points at their source line and ends the process, exit 1."""
    binary, ptxfile = build_cu_with_ptx(h, "delay_hang")
    _, d = h.workload("delay_hang", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "handoff"])
    r = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--at", "global-store", "--placement", "warp",
              "--fraction", "0.5", "--delay", "200us", "--trials", "20"], 180, log="race.hang")
    line = mark_line(WL / "delay_hang.cu", "producer-store")
    check(r.rc == 1 and "HANG" in r.out, f"race on delay_hang: exit {r.rc}: {r.out[-600:]} {r.err[-300:]}")
    check(f"delay_hang.cu:{line}" in r.out, f"the hang's delay points do not name delay_hang.cu:{line}: {r.out[-600:]}")
    return race_lines(r, "HANG", "delay_hang.cu")


@test("race.atomics")
def t_race_atomics(h):
    """A kernel that sums floats with atomicAdd into one cell from 256 CTAs (float_atomics.cu):
    its plain replays disagree, so gpurr race calls it nondeterministic, names the bytes of the
    sum that vary, runs no trial and exits 1."""
    binary, ptxfile = build_cu_with_ptx(h, "float_atomics")
    _, d = h.workload("float_atomics", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "atomic_sum"])
    r = h.sh([h.gpurr, "race", d, "--ptx", ptxfile, "--at", "atomic", "--plain-runs", "10"], 120, log="race.atomics")
    check(r.rc == 1 and "nondeterministic without any delay" in r.out and "RACE" not in r.out,
          f"race on float atomics: exit {r.rc}: {r.out[-600:]} {r.err[-300:]}")
    # The sum is the one float that varies: the first differing byte lies within it.
    spread = re.search(r"region \d+: (\d+) bytes? of (\d+) differ between plain replays, the first at byte (\d+)", r.out)
    check(spread and 1 <= int(spread[1]) <= 4 and int(spread[3]) < 4, f"which bytes vary: {r.out[-600:]}")
    return race_lines(r, "nondeterministic", "differ between")


@test("race.triton_cta")
def t_race_triton_cta(h):
    """A Triton split reduction whose program 0 reads the others' partial sums without waiting
    (triton_race.py), recorded with its PTX from Triton's cache: gpurr race with whole CTAs
    delayed before their global stores finds the race and shrinks it to the partial's store
    at its source line; --all and --kernels say the same in one line."""
    _, d = h.py_workload("triton_race", flags=["--memory", "snapshot", "--snapshot-kernels", "gpurr_split_sum"])
    line = mark_line(WL / "triton_race.py", "partial-store")
    flags = ["--at", "global-store", "--placement", "cta", "--fraction", "0.5", "--delay", "200us", "--trials", "20"]
    hunt = h.sh([h.gpurr, "race", d, *flags], 300, log="race.triton_cta")
    check(hunt.rc == 1 and "RACE" in hunt.out, f"race found no witness: exit {hunt.rc}: {hunt.out[-600:]} {hunt.err[-300:]}")
    check("PTX from the recording" in hunt.out, f"the PTX did not come from the recording: {hunt.out[:300]}")
    witness = [l for l in hunt.out.splitlines() if "st.global" in l]
    check(witness and all(f"triton_race.py:{line}" in l for l in witness),
          f"the witness is not the partial's store at triton_race.py:{line}: {hunt.out[-600:]}")
    many = h.sh([h.gpurr, "race", d, "--kernels", "split_sum", *flags], 300, log="race.triton_cta.kernels")
    check(many.rc == 1 and sum("RACE at" in l for l in many.out.splitlines()) == 1 and f"triton_race.py:{line}" in many.out,
          f"race --kernels: exit {many.rc}: {many.out[-600:]} {many.err[-300:]}")
    return race_lines(hunt, "RACE", "st.global", "from the plain replay", "per second")


def sides(h, name, kernel, store, load):
    """gpurr race with its defaults (no --ptx: the PTX comes from the program's fat binary;
    the delays climb to the launch's own time) on the planted race of NAME.cu finds a witness
    and names both sides, the store at the MARK store and the access at the MARK load, with
    their source lines; the fixed kernel gives no witness in 200 trials."""
    binary = build_cu_fatbin(h, name)
    _, d = h.workload(name, [binary], flags=["--memory", "snapshot", "--snapshot-kernels", f"^{kernel}$"])
    hunt = h.sh([h.gpurr, "race", d], 600, log=f"race.sides.{name}")
    check(hunt.rc == 1 and "RACE" in hunt.out, f"race with defaults found no witness: exit {hunt.rc}: {hunt.out[-800:]} {hunt.err[-300:]}")
    check("PTX from the recording" in hunt.out, f"the PTX did not come from the recording: {hunt.out[:300]}")
    s, l = mark_line(WL / f"{name}.cu", store), mark_line(WL / f"{name}.cu", load)
    pair = [x for x in hunt.out.splitlines() if " vs " in x and f"{name}.cu:{s}" in x and f"{name}.cu:{l}" in x]
    check(pair, f"no conflict names {name}.cu:{s} and {name}.cu:{l}: {hunt.out[-800:]}")
    js = h.sh([h.gpurr, "race", d, "--format", "json"], 600, log=f"race.sides.{name}.json")
    check(js.rc == 1 and '"other_side"' in js.out and f"{name}.cu:{l}" in js.out, f"--format json: exit {js.rc}: {js.out[-600:]}")
    _, f = h.workload(f"{name}_fixed", [binary, "fixed"], flags=["--memory", "snapshot", "--snapshot-kernels", f"^{kernel}_fixed$"])
    fixed = h.sh([h.gpurr, "race", f, "--trials", "200", "--budget", "120s"], 600, log=f"race.sides.{name}.fixed")
    ran = re.search(r"no trial of (\d+) changed the result", fixed.out)
    check(fixed.rc == 0 and ran and int(ran[1]) >= 200 and "RACE" not in fixed.out,
          f"the fixed kernel: exit {fixed.rc}: {fixed.out[-600:]} {fixed.err[-300:]}")
    return f"{pair[0].strip()[:200]} | fixed: {ran[0]}"


@test("race.sides_shared")
def t_race_sides_shared(h):
    """A shared-memory race hidden by ~10 µs of work (race_shared.cu), hunted with defaults."""
    return sides(h, "race_shared", "shared_hidden", "shared-store", "shared-load")


@test("race.sides_global")
def t_race_sides_global(h):
    """A producer/consumer across CTAs without a fence (race_global.cu), hunted with defaults."""
    return sides(h, "race_global", "global_handoff", "producer-store", "consumer-load")


@test("race.sides_warp")
def t_race_sides_warp(h):
    """A warp-divergent read before a __syncwarp (race_warp.cu), hunted with defaults."""
    return sides(h, "race_warp", "warp_pairs", "even-store", "neighbour-load")


@test("race.fatbin_ptx")
def t_race_fatbin_ptx(h):
    """A program built by nvcc -arch=sm_90 (PTX in its fat binary): gpurr record keeps the PTX
    beside its module (modules.ptx = 'fatbin'), so gpurr race --list and gpurr probe run with
    no --ptx."""
    binary = build_cu_fatbin(h, "race_shared")
    _, d = h.workload("race_shared", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "^shared_hidden$"])
    mods = h.query(d, "SELECT ptx FROM modules WHERE ptx != ''")
    check(mods and all(m["ptx"] == "fatbin" for m in mods), f"modules with PTX: {mods}")
    listed = h.sh([h.gpurr, "race", d, "--list"], 120, log="race.fatbin_ptx.list")
    check(listed.rc == 0 and "PTX from the recording" in listed.out and "race_shared.cu:" in listed.out,
          f"race --list: {listed.why()} {listed.out[-400:]}")
    probe = h.sh([h.gpurr, "probe", d, "--top", "2"], 300, log="race.fatbin_ptx.probe")
    check(probe.rc == 0 and "slowest CTAs" in probe.out, f"probe: {probe.why()} {probe.out[-400:]}")
    return race_lines(listed, "PTX from") + " | probe ok"


@test("race.demo")
def t_race_demo(h):
    """gpurr demo without torch records gpurr's own program, whose recordings keep the PTX of
    its kernels (modules.ptx = 'gpurr-demo'): gpurr race --all hunts in its snapshotted saxpy
    launches with no --ptx and finds no race. (With torch, the demo records train.py in hash
    mode: nothing to replay.)"""
    out = h.tmp / "race-demo"
    shutil.rmtree(out, ignore_errors=True)
    r = h.sh(["env", "PYTHON=/nonexistent/python3", h.gpurr, "demo", "-o", out], 300, log="race.demo.demo")
    check("recording gpurr's own demo program" in r.out, f"gpurr demo did not record its own program: {r.out[:300]}")
    check(r.rc == 0, f"gpurr demo: {r.why()}")
    d = out / "a"
    mods = h.query(d, "SELECT ptx FROM modules WHERE kernel_count = 3")
    check(mods and all(m["ptx"] == "gpurr-demo" for m in mods), f"the demo's modules: {mods}")
    hunt = h.sh([h.gpurr, "race", d, "--all", "--trials", "5", "--budget", "2s"], 600, log="race.demo")
    check(hunt.rc == 0 and "no PTX" not in hunt.out, f"race --all on the demo: exit {hunt.rc}: {hunt.out[-600:]} {hunt.err[-300:]}")
    return race_lines(hunt, "hunted")
