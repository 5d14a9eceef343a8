"""torchrun_ranks, multi_gpu: a recording per torchrun rank, and launches on several devices
of one process (the 2-GPU diff and bisect tests are diff.py's)."""
from harness import WL, at_line, check, mark_line, test


@test("torchrun_ranks")
def t_torchrun(h):
    """torchrun starts 2 ranks; each must get its own recording tagged with its rank."""
    script = WL / "torchrun_ranks.py"
    want, d = h.workload("torchrun_ranks", [h.py, "-m", "torch.distributed.run", "--standalone",
                                            "--nproc-per-node", "2", script])
    # torchrun's own process may initialize CUDA (and so be recorded) without launching.
    procs = h.query(d, "SELECT process, rank, local_rank, world_size FROM processes p WHERE EXISTS "
                       "(SELECT 1 FROM launches l WHERE l.process = p.process) ORDER BY rank")
    check([(p["rank"], p["local_rank"], p["world_size"]) for p in procs] == [(0, 0, 2), (1, 1, 2)],
          f"processes that launched (rank, local_rank, world_size): {procs}, want ranks 0 and 1 of 2")
    line = mark_line(script, "rank-add")
    rows = h.query(d, f"SELECT process, count(*) AS n FROM launches WHERE {at_line('python_line', script, line)} "
                      "GROUP BY process ORDER BY process")
    counts = [r["n"] for r in rows]
    check(len(counts) == 2 and all(c == want["launches_per_rank"] for c in counts),
          f"launches at torchrun_ranks.py:{line} per process: {rows}, want {want['launches_per_rank']} each")
    return f"2 recordings, ranks 0 and 1 of 2, {counts[0]} launches at the marked line in each"


@test("multi_gpu")
def t_multi_gpu(h):
    want, d = h.py_workload("multi_gpu")
    script, line = WL / "multi_gpu.py", mark_line(WL / "multi_gpu.py", "multi-add")
    devs = h.n(d, "SELECT count(DISTINCT ordinal) AS n FROM devices")
    check(devs >= want["devices"], f"{devs} devices recorded, the program used {want['devices']}")
    rows = h.query(d, f"""SELECT device, count(*) AS n FROM launches
                          WHERE {at_line('python_line', script, line)} GROUP BY device""")
    per = want["per_device"]
    check(len(rows) == want["devices"], f"marked-line launches on {len(rows)} devices, want {want['devices']}")
    check(all(r["n"] >= per and r["n"] % per == 0 for r in rows),
          f"per-device counts {rows}, want a non-zero multiple of {per} each")
    return f"{len(rows)} devices, {[r['n'] for r in rows]} launches"
