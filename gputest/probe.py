"""probe.*: gpurr probe's per-CTA timing and counts, and gpurr record --probe on a live program."""
import json

from harness import build_cu_fatbin, build_cu_with_ptx, check, test


@test("probe.slow_cta")
def t_probe_slow_cta(h):
    """gpurr probe on a kernel whose CTA 7 spins ~200 µs: the probe table names CTA 7 the
    slowest, and says the span is mostly tail; --count global-store counts each thread's one
    store."""
    binary, ptxfile = build_cu_with_ptx(h, "slowcta")
    _, d = h.workload("slowcta", [binary], flags=["--memory", "snapshot", "--snapshot-kernels", "slow_cta"])
    timeline = h.tmp / "slowcta-probe.json"
    timeline.unlink(missing_ok=True)
    r = h.sh([h.gpurr, "probe", d, "--ptx", ptxfile, "--top", "3", "--count", "global-store", "-o", timeline], 300,
             log="probe.run")
    check(r.rc == 0, f"gpurr probe: {r.why()}")
    lines = r.out.splitlines()
    i = next((k for k, l in enumerate(lines) if "slowest CTAs" in l), None)
    check(i is not None and lines[i + 2].split()[0] == "7", f"CTA 7 is not the slowest: {r.out[-600:]}")
    # Each of the 64 CTAs' 128 threads stores once.
    check("8192 run in all; per CTA median 128, max 128" in r.out, f"the store count is not 64 x 128: {r.out[-600:]}")
    events = json.loads(timeline.read_text())["traceEvents"]
    check(sum(e["ph"] == "X" for e in events) == 64, "the timeline does not hold a slice per CTA")
    return " | ".join(l.strip() for l in lines[1:4] + [l for l in lines if "count of" in l])[:400]


@test("probe.live")
def t_probe_live(h):
    """gpurr record --probe on a PyTorch program whose two threads each launch a Triton kernel
    20 times on their own streams, program 5 of 48 running a long loop (probe_live.py): the
    program's results stay right; the picked kernel is instrumented and the other Triton kernel
    is not; every launch of it has a record for each of its 48 CTAs, CTA 5 the slowest in every
    one; launches from both threads; --count global-store counts the same stores in every CTA;
    gpurr probe reads a launch from the recording without replaying it."""
    _, d = h.py_workload("probe_live", flags=["--probe", "gpurr_probe_slow:entry,exit,global-store"])
    kernels = h.query(d, "SELECT name, instrumented, reason, counted FROM probe_kernels")
    check(kernels and all("gpurr_probe_slow" in k["name"] and k["instrumented"] for k in kernels),
          f"probe_kernels: {kernels}")
    check(all(k["counted"] > 0 for k in kernels), f"no global-store counted in the kernel: {kernels}")
    n = h.one(d, "SELECT count(DISTINCT p.launch_seq) AS launches, count(*) AS ctas, count(DISTINCT l.tid) AS threads "
                 "FROM probe_ctas p JOIN launches l ON l.seq = p.launch_seq AND l.process = p.process")
    launched = h.one(d, "SELECT count(*) AS n FROM launches l JOIN kernels k ON k.kernel_id = l.kernel_id "
                        "AND k.process = l.process WHERE k.name LIKE '%gpurr_probe_slow%'")["n"]
    check(launched == 40 and n["launches"] == 40 and n["ctas"] == 40 * 48 and n["threads"] == 2,
          f"{launched} launches of the kernel; probe records: {n}")
    slowest = h.query(d, "SELECT launch_seq, cta FROM probe_ctas p WHERE duration_ns = "
                         "(SELECT max(duration_ns) FROM probe_ctas q WHERE q.launch_seq = p.launch_seq)")
    check(len(slowest) == 40 and all(r["cta"] == 5 for r in slowest), f"the slowest CTAs: {slowest[:10]}")
    counts = h.one(d, "SELECT min(count) AS lo, max(count) AS hi FROM probe_ctas")
    check(counts["lo"] > 0 and counts["lo"] == counts["hi"], f"global-store counts per CTA: {counts}")
    seq = slowest[0]["launch_seq"]
    r = h.sh([h.gpurr, "probe", d, "--launch", str(seq), "--top", "2"], 120, log="probe.live.read")
    check(r.rc == 0 and "probed live" in r.out, f"gpurr probe --launch {seq}: {r.why()} {r.out[-400:]}")
    lines = r.out.splitlines()
    i = next((k for k, l in enumerate(lines) if "slowest CTAs" in l), None)
    check(i is not None and lines[i + 2].split()[0] == "5", f"CTA 5 is not the slowest: {r.out[-400:]}")
    return f"{len(kernels)} kernel handle(s) instrumented; {n['launches']} launches x 48 CTAs from {n['threads']} threads; " \
           f"CTA 5 slowest in all; {counts['lo']} stores counted per CTA | " + " | ".join(l.strip() for l in lines[:3])[:300]


@test("probe.runtime")
def t_probe_runtime(h):
    """gpurr record --probe on a <<<>>> launch (slowcta.cu built with -arch=sm_90, its PTX in
    the program's fat binary): the runtime's launch is probed from that PTX, and its records
    name CTA 7 the slowest."""
    binary = build_cu_fatbin(h, "slowcta")
    _, d = h.workload("slowcta_live", [binary], flags=["--probe", "^slow_cta$:entry,exit"])
    kernels = h.query(d, "SELECT name, instrumented, reason FROM probe_kernels")
    check(kernels and all(k["instrumented"] for k in kernels), f"probe_kernels: {kernels}")
    slowest = h.query(d, "SELECT cta FROM probe_ctas ORDER BY duration_ns DESC LIMIT 1")
    check(slowest and slowest[0]["cta"] == 7, f"the slowest CTA: {slowest}")
    return f"{kernels[0]['name']} instrumented; CTA {slowest[0]['cta']} slowest"
