"""memory.*, writesets.*: memory capture (hashes, snapshots, the ring, the flight
recorder) and the write sets that carry states between captures."""
from pathlib import Path

from harness import ROOT, Skip, WL, check, diff_scatter, last_json, mark_line, nan_at, test, truthy


# --- memory capture ------------------------------------------------------------------------
def h128():
    """The Python implementation of gpurr-h128 in scripts/gen-hash-vectors (stdlib only)."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("gen_hash_vectors", str(ROOT / "scripts" / "gen-hash-vectors"))
    spec = importlib.util.spec_from_loader("gen_hash_vectors", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def region_hash_hex(data):
    m = h128()
    chunks = [m.chunk_hash(data[i:i + m.CHUNK]) for i in range(0, len(data), m.CHUNK)]
    return m.hexsum(m.region_hash(chunks, len(data)))


def mem_states(h, d, kernel, point="after"):
    return h.query(d, f"""SELECT l.seq AS seq, m.region AS region, m.address AS address, m.size AS size,
                                 m.hash AS hash, m.chunks AS chunks, m.chunks_transferred AS xfer,
                                 m.snapshot AS snapshot, m.lost AS lost
                          FROM launches l JOIN memory_states m ON m.process = l.process AND m.launch_seq = l.seq
                          WHERE l.name = '{kernel}' AND m.point = '{point}' ORDER BY l.seq, m.region""")


@test("memory.hash")
def t_memory_hash(h):
    """Hash mode: every launch's after-hash equals gpurr-h128 (Python) of the bytes the program
    itself read back; odd sizes and tails; a concurrent second stream does not disturb it."""
    return memory_hash(h, "memory_hash", [])


@test("memory.hash_deferred")
def t_memory_hash_deferred(h):
    """memory.hash with --defer-hashes: hash kernels wait and hash several launches at once,
    yet every hash is the one in stream order after its launch, and the race between the two
    streams is left as the program made it (no ordering added)."""
    return memory_hash(h, "memory_hash_deferred", ["--defer-hashes"])


@test("memory.hash_deferred_stream")
def t_memory_hash_deferred_stream(h):
    """memory.hash with --defer-hashes=stream: batches run on the program's own streams, and
    every hash is still the one in stream order after its launch."""
    return memory_hash(h, "memory_hash_deferred_stream", ["--defer-hashes=stream"])


def memory_hash(h, name, flags):
    out = h.tmp / name
    want, d = h.py_workload(name, script="memory_hash.py", args=[out], flags=["--memory", "hash", *flags])
    rows = mem_states(h, d, "gpurr_mem_fill")
    checks = want["checks"]
    check(len(rows) == len(checks), f"{len(rows)} after-states of gpurr_mem_fill, want {len(checks)}: {rows[:3]}")
    for c, r in zip(checks, rows):
        check(r["size"] == c["size"], f"{c['name']}: region of {r['size']} bytes, the allocation has {c['size']}")
        data = (out / f"{c['name']}.bin").read_bytes()
        if len(data) > (1 << 20):  # the pure-Python hash is slow: compare big ones by chunk count only
            check(r["chunks"] == (len(data) + 65535) // 65536, f"{c['name']}: {r['chunks']} chunks")
            continue
        want_hash = region_hash_hex(data)
        check(r["hash"] == want_hash, f"{c['name']} ({c['size']} B): recorded {r['hash']}, bytes hash to {want_hash}")
    # The stream race: the buffer ends as stream 2 wrote it, yet stream 1's launch is hashed
    # as stream 1 left it. 4 MiB is too slow for the Python hash: compare through the chunk
    # hashes of chunk 0 (the whole first 64 KiB).
    m = h128()
    by_name = {c["name"]: r for c, r in zip(checks, rows)}
    s1, s2 = by_name["stream1"], by_name["stream2"]
    check(s1["hash"] != s2["hash"], "both streams' launches hashed alike: the hash did not follow stream order")
    for name in ("stream1", "stream2"):
        first = (out / f"{name}.bin").read_bytes()[:65536]
        got = h.one(d, f"""SELECT c.hash AS hash FROM memory_chunks c
                           WHERE c.launch_seq = {by_name[name]['seq']} AND c.point = 'after' AND c.chunk = 0""")["hash"]
        check(got == m.hexsum(m.chunk_hash(first)), f"{name}: chunk 0 hash {got} is not that of its own bytes")
    regions = h.n(d, "SELECT count(*) AS n FROM regions r JOIN launches l ON l.process = r.process AND l.seq = r.launch_seq "
                     "WHERE l.name = 'gpurr_mem_fill' AND r.param_offsets = '0'")
    check(regions == len(checks), f"{regions} regions found through parameter offset 0, want {len(checks)}")
    return f"{len(checks)} launches: hashes equal the program's bytes (sizes 17 B..8 MiB), stream order kept"


def rewind(h, d, seq, point, out):
    r = h.sh([h.gpurr, "rewind", d, "--launch", seq, f"--{point}", "--region", "0", "-o", out, "--force"], 120)
    check(r.rc == 0, f"gpurr rewind --launch {seq} --{point}: {r.why()}")
    return Path(out).read_bytes()


def carried_states(h, d, kernel):
    return h.query(d, f"""SELECT l.seq AS seq, m.region AS region, m.hash AS hash, m.carried AS carried,
                                 m.carried_from AS carried_from, m.unknown AS unknown, r.param_offsets AS offsets
                          FROM launches l JOIN memory_states m ON m.process = l.process AND m.launch_seq = l.seq
                          JOIN regions r ON r.process = l.process AND r.launch_seq = l.seq AND r.region = m.region
                          WHERE l.name LIKE '%{kernel}%' AND m.point = 'after' ORDER BY l.seq, m.region""")


def by_offsets(rows, offsets):
    return [r for r in rows if r["offsets"] == offsets]


@test("writesets.proved")
def t_writesets_proved(h):
    """--memory hash carries what a launch cannot write: a Triton kernel reading src and writing
    dst (its PTX proves src read-only) hashes only dst after the launches that follow its
    description, and every carried state of src is the hash of src's bytes as the program read
    them back; dst is hashed every time and ends as the program's bytes. A cuBLAS GEMM (no PTX)
    is hashed whole under the default --write-sets proved; under --write-sets learned its
    inputs a and b are carried after a few launches, with their true hashes, and c never is."""
    out = h.tmp / "write_sets_proved"
    want, d = h.py_workload("write_sets_proved", script="write_sets.py", args=["proved", out], flags=["--memory", "hash"])
    rows = carried_states(h, d, "scale_kernel")
    src_hash = region_hash_hex((out / "src.bin").read_bytes())
    dst_hash = region_hash_hex((out / "dst.bin").read_bytes())
    src, dst = by_offsets(rows, "0"), by_offsets(rows, "8")
    check(len(src) == want["launches"] and len(dst) == want["launches"],
          f"{len(src)} src and {len(dst)} dst states of scale_kernel, want {want['launches']} each: {rows[:4]}")
    carried = [r for r in src if r["carried"] == "proved"]
    check(len(carried) >= want["launches"] - 2, f"only {len(carried)} of {len(src)} src states carried (proved): {src}")
    check(all(r["hash"] == src_hash and not truthy(r["unknown"]) for r in src),
          f"a src state is not the hash of src's bytes {src_hash}: {[r for r in src if r['hash'] != src_hash][:2]}")
    check(all(r["carried"] == "" for r in dst), f"dst carried though the kernel writes it: {dst[:3]}")
    check(dst[-1]["hash"] == dst_hash, f"dst's last state {dst[-1]['hash']}, its bytes hash to {dst_hash}")
    gemm = h.query(d, """SELECT count(*) AS n, sum(CASE WHEN m.carried != '' THEN 1 ELSE 0 END) AS carried
                         FROM launches l JOIN memory_states m ON m.process = l.process AND m.launch_seq = l.seq
                         WHERE (l.name LIKE '%gemm%' OR l.name LIKE '%sm90%' OR l.name LIKE '%cutlass%') AND m.point = 'after'""")[0]
    check(gemm["n"] and not gemm["carried"], f"GEMM states under --write-sets proved: {gemm} (none may be carried: no PTX)")

    out2 = h.tmp / "write_sets_learned"
    _, d2 = h.py_workload("write_sets_learned", script="write_sets.py", args=["proved", out2],
                          flags=["--memory", "hash", "--write-sets", "learned"])
    hashes = {n: region_hash_hex((out2 / f"{n}.bin").read_bytes()) for n in ("a", "b", "c")}
    states = carried_states(h, d2, "gemm")
    learned = [r for r in states if r["carried"] == "learned"]
    # The launches after the workload's pause (the writer learns from the first ones) carry
    # the inputs; the output too, since every launch writes the same bytes into it, which
    # learning cannot tell from not writing. Every carried state must be the true one.
    inputs = [r for r in learned if r["offsets"] in ("0", "8")]
    check(len(inputs) >= 2 * (want["launches"] - 6),
          f"{len(inputs)} GEMM input states carried (learned) of {len(states)} states, want both inputs of most launches")
    check(all(r["hash"] in (hashes["a"], hashes["b"]) and not truthy(r["unknown"]) for r in inputs),
          f"a learned input carry is neither a's nor b's hash: {[r for r in inputs if r['hash'] not in (hashes['a'], hashes['b'])][:2]}")
    outputs = [r for r in states if r["offsets"].startswith("16")]
    check(outputs and all(r["hash"] == hashes["c"] for r in outputs[1:]),
          f"c's states are not its bytes' hash {hashes['c']}: {[r for r in outputs if r['hash'] != hashes['c']][:2]}")
    info = h.sh([h.gpurr, "info", d2], 60, log="writesets.info")
    line = [l.strip() for l in info.out.splitlines() if "write sets" in l]
    return (f"scale_kernel: {len(carried)}/{len(src)} src states carried (proved), all equal to src's bytes; "
            f"GEMM learned: {len(learned)}/{len(states)} states carried; info: {line[:1]}")


@test("writesets.chase")
def t_writesets_chase(h):
    """A Triton kernel storing through a pointer it loads from memory (its PTX may write
    anything) ends every carry: the next launch reading the buffer it wrote hashes it again,
    and that hash is the buffer's bytes; two runs storing different values part ways there."""
    recs = []
    for i, value in ((1, "3.0"), (2, "4.0")):
        out = h.tmp / f"write_sets_chase{i}"
        _, d = h.py_workload(f"write_sets_chase{i}", script="write_sets.py", args=["chase", out, value],
                             flags=["--memory", "hash"])
        recs.append((d, out))
    d, out = recs[0]
    rows = by_offsets(carried_states(h, d, "scale_kernel"), "0")
    check(len(rows) == 5, f"{len(rows)} target states of scale_kernel, want 5: {rows}")
    check(any(r["carried"] == "proved" for r in rows[:4]), f"no target state carried before the chase: {rows[:4]}")
    last = rows[-1]
    want_hash = region_hash_hex((out / "target.bin").read_bytes())
    check(last["carried"] == "" and last["hash"] == want_hash,
          f"after the chase, target is {last} (carried: {last['carried']!r}), want hashed anew as {want_hash}")
    r = h.sh([h.gpurr, "diff", recs[0][0], recs[1][0]], 120, log="writesets.chase.diff")
    check(r.rc == 1, f"gpurr diff exit {r.rc}, want 1: {r.why()} {r.out[:400]}")
    kernel = [l.strip() for l in r.out.splitlines() if l.strip().startswith("kernel")]
    check(kernel and ("chase_kernel" in kernel[0] or "scale_kernel" in kernel[0]),
          f"diff names {kernel[:1]}, want chase_kernel or the scale_kernel after it:\n{r.out[:800]}")
    return f"target hashed anew after the chase and equal to its bytes; diff: {kernel[0][:80]}"


@test("writesets.learned_miss")
def t_writesets_learned_miss(h):
    """--write-sets learned: a kernel that writes its input only on its 50th launch. The input
    is learned read-only and carried; an audit finds the write (write_set_misses names the
    kernel, the input's word and a range of launches holding the 50th); gpurr diff of two runs
    adding different values then names launch 50 or says its answer may be earlier, in a range
    that holds launch 50."""
    recs = []
    for i, value in ((1, "1.0"), (2, "2.0")):
        out = h.tmp / f"write_sets_miss{i}"
        want, d = h.py_workload(f"write_sets_miss{i}", script="write_sets.py", args=["miss", out, value],
                                flags=["--memory", "hash", "--write-sets", "learned"])
        recs.append(d)
    d = recs[0]
    seqs = [r["seq"] for r in h.query(d, "SELECT seq FROM launches WHERE name LIKE '%maybe_kernel%' ORDER BY seq")]
    check(len(seqs) == want["launches"], f"{len(seqs)} maybe_kernel launches, want {want['launches']}")
    at = seqs[want["miss_at"] - 1]
    src = by_offsets(carried_states(h, d, "maybe_kernel"), "0")
    learned = [r for r in src if r["carried"] == "learned"]
    check(len(learned) > want["launches"] // 2, f"only {len(learned)} of {len(src)} src states carried (learned)")
    misses = h.query(d, "SELECT * FROM write_set_misses")
    check(len(misses) >= 1, f"no write-set miss recorded: {misses}")
    m = misses[0]
    check(m["since_seq"] < at <= m["audit_seq"], f"miss {m}: its range does not hold the 50th launch (seq {at})")
    r = h.sh([h.gpurr, "diff", *recs], 120, log="writesets.miss.diff")
    check(r.rc == 1, f"gpurr diff exit {r.rc}, want 1: {r.why()} {r.out[:400]}")
    named = f"launch {at}" in r.out or f"#{at}" in r.out
    uncertain = "may be" in r.out and "learned" in r.out
    check(named or uncertain, f"diff neither names launch {at} nor says its answer may be earlier:\n{r.out[:1200]}")
    note = [l.strip() for l in r.out.splitlines() if "may be" in l or "learned" in l]
    return f"miss found by the audit at launch {m['audit_seq']} (since {m['since_seq']}, write at {at}); diff: {note[:2]}"


@test("memory.snapshot")
def t_memory_snapshot(h):
    """Snapshot mode: rewind before/after each poke equals the program's own copies; only the
    changed chunk crosses PCIe."""
    out = h.tmp / "memory_snapshot"
    want, d = h.py_workload("memory_snapshot_exact", "memory_snapshot.py", args=["exact", out], flags=["--memory", "snapshot",
                            "--snapshot-kernels", "gpurr_snap_", "--staging-bytes", str(256 << 20)])
    pokes = mem_states(h, d, "gpurr_snap_poke")
    check(len(pokes) == want["pokes"], f"{len(pokes)} poke after-states, want {want['pokes']}")
    seqs = [r["seq"] for r in pokes]
    for i, seq in enumerate(seqs):
        before = rewind(h, d, seq, "before", h.tmp / "rw-before.bin")
        prev = out / ("before0.bin" if i == 0 else f"after{i - 1}.bin")
        check(before == prev.read_bytes(), f"poke {i} (launch {seq}): rewind --before differs from the program's copy")
        after = rewind(h, d, seq, "after", h.tmp / "rw-after.bin")
        check(after == (out / f"after{i}.bin").read_bytes(), f"poke {i} (launch {seq}): rewind --after differs")
    xfer = [r["xfer"] for r in pokes]
    check(all(x == 1 for x in xfer), f"chunks transferred after each poke: {xfer}, want 1 each (1 of 1024 changed)")
    bx = [r["xfer"] for r in mem_states(h, d, "gpurr_snap_poke", "before")]
    check(all(x == 0 for x in bx), f"chunks transferred before each poke: {bx}, want 0 (nothing changed since)")
    st = h.one(d, "SELECT sum(chunks_total) AS total, sum(chunks_transferred) AS xfer FROM stats")
    return (f"{len(seqs)} pokes: rewind before/after == program copies; 1 of 1024 chunks per poke crossed PCIe "
            f"({st['xfer']} of {st['total']} chunks in all)")


@test("memory.drop_oldest")
def t_memory_drop(h):
    out = h.tmp / "memory_drop"
    want, d = h.py_workload("memory_snapshot_drop", "memory_snapshot.py", args=["drop", out], flags=[
        "--memory", "snapshot", "--on-full", "drop-oldest", "--staging-bytes", str(4 << 20)])
    lost = h.query(d, "SELECT count(DISTINCT launch_seq) AS n, min(lost_reason) AS why FROM memory_states WHERE lost = 1")[0]
    st = h.one(d, "SELECT sum(memory_states_lost) AS lost, sum(snapshots) AS snaps FROM stats")
    check(lost["n"] and lost["n"] > 0, f"no lost memory states with a 4 MiB ring and drop-oldest (stats {st})")
    check("drop" in (lost["why"] or ""), f"lost reason {lost['why']!r} does not say dropped")
    info = h.save_info("memory_drop", d)
    check(info.rc == 1 and "LOST" in info.out, f"gpurr info does not flag the drops loudly (exit {info.rc})")
    return f"{lost['n']} launches lost states ({lost['why']}), {st['snaps']} snapshots kept; info exits 1"


@test("memory.ring_restart")
def t_memory_ring(h):
    """Snapshots that need most of the staging ring, after small ones left it part-way: each
    fits once the ring empties (before the fix, backpressure waited forever and capture stopped)."""
    out = h.tmp / "memory_ring"
    want, d = h.py_workload("memory_snapshot_ring", "memory_snapshot.py", args=["ring", out], flags=[
        "--memory", "snapshot", "--staging-bytes", str(4 << 20)])
    st = h.one(d, "SELECT max(memory_stopped) AS stopped, sum(memory_states_lost) AS lost, sum(snapshots) AS snaps FROM stats")
    check(not st["stopped"], f"memory capture stopped: {st['stopped']}")
    statuses = h.query(d, "SELECT memory_status AS s, count(*) AS n FROM launches GROUP BY 1")
    check(statuses == [{"s": "snapshot", "n": want["fills"]}], f"launch memory statuses {statuses}, want {want['fills']} snapshot")
    last = h.query(d, "SELECT max(seq) AS seq FROM launches")[0]["seq"]
    data = rewind(h, d, last, "after", h.tmp / "ring.bin")
    check(data == (out / "big.bin").read_bytes(), "rewind of the 3.5 MiB buffer after its last fill differs from the program's copy")
    return f"{want['fills']} launches snapshotted through a 4 MiB ring ({st['snaps']} states), none lost"


@test("memory.disk_full")
def t_memory_disk_full(h):
    """Snapshots into a 40 MiB file system: the chunk store runs out of space, memory capture
    stops, the program still finishes with its own exit status, and info says what happened."""
    fs = h.tmp / "smallfs"
    fs.mkdir(exist_ok=True)
    m = h.sh(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", fs], 30, log="memory_disk_full.mount")
    if m.rc != 0:
        raise Skip(f"cannot mount a small tmpfs here (needs root): {m.why()}")
    try:
        d = fs / "rec"
        r = h.sh(h.record_argv(d, [h.py, WL / "memory_snapshot.py", "exact", h.tmp / "memory_disk_full"],
                               ["--memory", "snapshot", "--snapshot-kernels", "gpurr_snap_"]), 240, log="memory_disk_full.rec")
        got = last_json(r.out)
        check(r.rc == 0 and got and got.get("pokes"), f"the program did not finish normally: {r.why()}")
        info = h.save_info("memory_disk_full", d)
        check(info.rc == 1, f"gpurr info exits {info.rc} on a recording whose disk filled up, want 1")
        said = [l.strip() for l in info.out.splitlines() if "memory capture stopped" in l.lower()]
        check(said, f"gpurr info does not say memory capture stopped: {info.out[:600]!r}")
        check("!! TRUNCATED" not in info.out and "!! INCOMPLETE" not in info.out,
              f"the launch log did not go on after the disk filled: {info.out[:600]!r}")
        n = h.n(d, "SELECT count(*) AS n FROM launches")
        check(n == 1 + got["pokes"], f"{n} launches in the log, want {1 + got['pokes']} (every launch, snapshots or not)")
        return f"program exit 0; memory capture stopped, all {n} launches logged; info: {said[0][:120]}"
    finally:
        h.sh(["umount", "-l", fs], 30, log="memory_disk_full.umount")


@test("memory.flight_sigusr2")
def t_memory_flight(h):
    out = h.tmp / "memory_flight"
    want, d = h.py_workload("memory_snapshot_flight", "memory_snapshot.py", args=["flight", out], flags=[
        "--memory", "snapshot", "--snapshot-kernels", "gpurr_snap_poke", "--flight-recorder", "3"])
    st = h.one(d, "SELECT max(flight_dumps) AS dumps FROM stats")
    check(st["dumps"] and st["dumps"] >= 2, f"flight_dumps {st['dumps']}, want >= 2 (SIGUSR2 and exit)")
    snap = [r["seq"] for r in mem_states(h, d, "gpurr_snap_poke") if truthy(r["snapshot"])]
    allp = [r["seq"] for r in mem_states(h, d, "gpurr_snap_poke")]
    check(len(allp) == want["pokes"], f"{len(allp)} poke after-states, want {want['pokes']}")
    # Window of 3 launches at the signal (pokes 6..8) and at exit (pokes 10..12).
    want_snap = allp[5:8] + allp[9:12]
    check(snap == want_snap, f"snapshots kept for launches {snap}, want the windows {want_snap}")
    rewind(h, d, allp[7], "after", h.tmp / "fl.bin")
    return f"{st['dumps']} dumps; snapshots of launches {snap} kept, the others hash-only"


@test("memory.flight_fault")
def t_memory_fault(h):
    script = WL / "memory_snapshot.py"
    d = h.new_recdir("memory_fault")
    r = h.sh(h.record_argv(d, [h.py, script, "fault", h.tmp / "memory_fault"],
                           ["--memory", "snapshot", "--flight-recorder", "4"]), 240, log="memory_fault.rec")
    got = last_json(r.out)
    check(got and got.get("fault", "none") != "none", f"the planted illegal-address kernel did not fault: {got} {r.why()}")
    st = h.one(d, "SELECT max(flight_dumps) AS dumps FROM stats")
    check(st["dumps"] and st["dumps"] >= 1, f"no flight-recorder dump after {got['fault']} (stats {st})")
    bad = h.query(d, "SELECT seq FROM launches WHERE name = 'gpurr_snap_bad'")
    check(len(bad) == 1, f"{len(bad)} launches of the faulting kernel recorded")
    seq = bad[0]["seq"]
    before = h.query(d, f"SELECT snapshot FROM memory_states WHERE launch_seq = {seq} AND point = 'before'")
    check(before and all(truthy(b["snapshot"]) for b in before), f"no stored snapshot before the faulting launch {seq}: {before}")
    data = rewind(h, d, seq, "before", h.tmp / "fault-before.bin")
    h.recordings.append(d)
    return f"{got['fault']}: dumped; the faulting launch's inputs ({len(data)} B) are in the recording"


@test("memory.flight_crash")
def t_memory_crash(h):
    """A host crash (SIGSEGV, then SIGABRT) writes the flight recorder's window and every launch
    record before the program dies; the recording is still called incomplete."""
    script = WL / "memory_snapshot.py"
    got = []
    for sig in ("segv", "abort"):
        d = h.new_recdir(f"memory_{sig}")
        r = h.sh(h.record_argv(d, [h.py, script, sig, h.tmp / f"memory_{sig}"],
                               ["--memory", "snapshot", "--snapshot-kernels", "gpurr_snap_poke", "--flight-recorder", "3"]),
                 240, log=f"memory_{sig}.rec")
        want = last_json(r.out)
        check(want and want.get("pokes"), f"{sig}: the workload did not reach the crash: {r.why()}")
        check(r.rc != 0, f"{sig}: gpurr record exited 0; the program was meant to die")
        st = h.one(d, "SELECT max(flight_dumps) AS dumps FROM stats")
        check(st["dumps"] and st["dumps"] >= 1, f"{sig}: no flight-recorder dump before the crash (stats {st})")
        pokes = mem_states(h, d, "gpurr_snap_poke")
        check(len(pokes) == want["pokes"], f"{sig}: {len(pokes)} poke after-states written, want {want['pokes']}")
        snap = [p["seq"] for p in pokes if truthy(p["snapshot"])]
        want_snap = [p["seq"] for p in pokes][-3:]
        check(snap == want_snap, f"{sig}: snapshots kept for launches {snap}, want the last 3 {want_snap}")
        log = h.query(d, "SELECT message FROM log WHERE message LIKE '%received SIG%'")
        check(log, f"{sig}: the recording's log does not say which signal ended the program")
        if sig == "segv":  # ctypes.string_at(0): a read of address 0, in libc
            msg = str(log[0].get("message", ""))
            check(" in lib" in msg and "address 0x0" in msg, f"segv: the log does not say where it crashed: {msg}")
        rewind(h, d, want_snap[-1], "after", h.tmp / f"{sig}.bin")
        h.recordings.append(d)
        got.append(f"{sig} (exit {r.rc}): {len(pokes)} launches, {len(snap)} snapshots written")
    return "; ".join(got)


@test("writesets.diff_scatter_learned")
def t_writesets_diff_scatter(h):
    """diff.scatter with --write-sets learned: the same kernel and line, though most regions
    are carried, not hashed."""
    return diff_scatter(h, "diff_scatter_learned", ["--write-sets", "learned"])


@test("writesets.diff_scatter_deferred")
def t_writesets_diff_scatter_deferred(h):
    """diff.scatter with --defer-hashes: the divergence found at the same kernel and line."""
    return diff_scatter(h, "diff_scatter_deferred", ["--defer-hashes"])


@test("writesets.nan_learned")
def t_writesets_nan(h):
    """nan.gpu_counts with --write-sets learned: the planted NaN found from the GPU's counts at
    the same launch and line (carried states keep the counts of the state they came from)."""
    line = mark_line(WL / "nan_loop.py", "nan")
    _, d = h.py_workload("nan_loop.learned", script="nan_loop.py",
                         flags=["--memory", "hash", "--nan-scan", "f32,bf16", "--write-sets", "learned"])
    r, seq, at = nan_at(h, d, "f32", "nan_loop.learned.nan")
    check(r.rc == 1 and seq, f"gpurr nan found nothing (exit {r.rc}):\n{r.out[:800]}")
    check(f"nan_loop.py:{line}" in at, f"gpurr nan points at {at!r}, want nan_loop.py:{line}:\n{r.out[:800]}")
    carried = h.n(d, "SELECT count(*) AS n FROM memory_states WHERE carried = 'learned'")
    return f"launch {seq} at nan_loop.py:{line} with learned write sets ({carried} states carried)"
