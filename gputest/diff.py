"""diff.*, digest.*, bisect.*, verify.rerun: where two runs part ways, from hashes, step
digests, bisection and manifests; on one GPU and on two."""
import re

from harness import Skip, WL, check, diff_scatter, mark_line, record_twice, test


@test("diff.torchrun")
def t_diff_torchrun(h):
    """Two recordings of a 2-GPU torchrun job whose rank 1 adds OS-random noise at a marked
    line: gpurr diff pairs rank with rank (leaving out the launcher), finds both ranks part
    ways, rank 1 at the marked line, and names rank 1 as the first in time. Needs 2 GPUs
    (the device tool's nvidia-h200-x2); skips with fewer."""
    gpus = h.sh([h.py, "-c", "import torch; print(torch.cuda.device_count())"], 120, log="diff.torchrun.gpus")
    if gpus.rc != 0 or int(gpus.out.strip() or 0) < 2:
        raise Skip("needs 2 GPUs (the device tool's nvidia-h200-x2)")
    script = WL / "ddp_diverge.py"
    argv = [h.py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", script]
    _, a = h.workload("ddp_diverge_a", argv, flags=["--memory", "hash"])
    _, b = h.workload("ddp_diverge_b", argv, flags=["--memory", "hash"])
    r = h.sh([h.gpurr, "diff", a, b], 300, log="diff.torchrun")
    check(r.rc == 1, f"exit {r.rc}, want 1 (the runs part ways): {r.why()}")
    line = mark_line(script, "planted-noise")
    reports = re.split(r"(?m)^(?=\S+ vs \S+: )", r.out)
    rank1 = [x for x in reports if f"ddp_diverge.py:{line}" in x]
    check(rank1, f"no pair's report names ddp_diverge.py:{line}: {r.out[-800:]}")
    m = re.search(r"(?m)^2 of 2 pairs part ways; first in time: rank (\d+)", r.out)
    check(m and m.group(1) == "1", f"first in time is not rank 1: {r.out[-400:]}")
    return f"both ranks part ways, rank 1 first, at ddp_diverge.py:{line}"


def two_gpus(h, log):
    gpus = h.sh([h.py, "-c", "import torch; print(torch.cuda.device_count())"], 120, log=log)
    if gpus.rc != 0 or int(gpus.out.strip() or 0) < 2:
        raise Skip("needs 2 GPUs (the device tool's nvidia-h200-x2)")


def bisect(h, tag, args, timeout=420):
    """gpurr bisect ARGS with its runs in a new folder of tag's; (result, folder)."""
    d = h.new_recdir(tag)
    return h.sh([h.gpurr, "bisect", "-o", d, *args], timeout, log=tag), d


@test("digest.agree")
def t_digest_agree(h):
    """The deterministic training loop recorded twice with --memory digest: a digest at every
    step boundary, of the allocations the optimizer reaches, and gpurr diff says the runs agree
    at every digest (exit 0)."""
    recs = record_twice(h, "digest_agree", [h.py, WL / "bisect_train.py"], ["--memory", "digest"])
    rows = h.query(recs[0], "SELECT step, of, count(*) AS n, sum(size) AS bytes FROM digests GROUP BY step ORDER BY step")
    check([r["step"] for r in rows] == list(range(5)), f"digests of steps {[r['step'] for r in rows]}, want 0-4 (6 steps)")
    check(all(r["of"] == "optimizer" for r in rows), f"digests not of the optimizer's allocations: {rows}")
    r = h.sh([h.gpurr, "diff", *recs], 120, log="digest_agree.diff")
    check(r.rc == 0 and "agree" in r.out, f"gpurr diff of two deterministic digest runs: {r.why()}\n{r.out[:800]}")
    return f"{len(rows)} digests of {rows[0]['n']} allocations ({rows[0]['bytes'] / 2**20:.1f} MiB); diff: agree"


@test("bisect.scatter")
def t_bisect_scatter(h):
    """gpurr bisect of the training loop with a float index_add_ planted from step 2: the
    digests part ways at step 2, the reruns hashing only step 2's launches name the
    index_add_ kernel at its line, and call it nondeterministic (same inputs)."""
    script = WL / "bisect_train.py"
    line = mark_line(script, "planted-scatter")
    r, d = bisect(h, "bisect_scatter", ["--", h.py, script, "--plant", "scatter"])
    check(r.rc == 1, f"gpurr bisect exit {r.rc}, want 1 (the runs part ways): {r.why()}\n{r.out[-1500:]}")
    check("step 2" in r.out, f"bisect does not name step 2:\n{r.out[-1500:]}")
    check(f"bisect_train.py:{line}" in r.out, f"bisect does not name bisect_train.py:{line}:\n{r.out[-1500:]}")
    check("nondeterministic" in r.out, f"bisect does not call the kernel nondeterministic:\n{r.out[-1500:]}")
    runs = sorted(p.name for p in d.iterdir() if p.is_dir())
    check(len(runs) >= 4, f"bisect kept {runs}, want its 4 runs' recordings")
    cost = [l for l in r.out.splitlines() if "runs" in l and "job" in l]
    return f"step 2, bisect_train.py:{line}, nondeterministic; {cost[-1].strip()[:90] if cost else ''}"


@test("bisect.step_range")
def t_bisect_step_range(h):
    """gpurr bisect --step-range of the loop without torch.optim (a hand-written update, each
    step an NVTX range "step N") with the float index_add_ planted from step 2: digests are taken
    where the ranges end, part ways at step 2, and the reruns name the index_add_ line."""
    script = WL / "bisect_train.py"
    line = mark_line(script, "planted-scatter")
    r, d = bisect(h, "bisect_step_range", ["--step-range", "^step ", "--", h.py, script, "--plant", "scatter",
                                           "--opt", "manual"])
    check(r.rc == 1, f"gpurr bisect exit {r.rc}, want 1 (the runs part ways): {r.why()}\n{r.out[-1500:]}")
    check("step 2" in r.out, f"bisect does not name step 2:\n{r.out[-1500:]}")
    check(f"bisect_train.py:{line}" in r.out, f"bisect does not name bisect_train.py:{line}:\n{r.out[-1500:]}")
    return f"NVTX steps: step 2, bisect_train.py:{line}"


@test("bisect.nan")
def t_bisect_nan(h):
    """gpurr bisect --nan of the training loop whose loss is the log of a negative at step 3:
    one digest run finds the first digest with NaN after step 3, one rerun counting NaN after
    every launch of step 3 names the log kernel and its line, which made it (finite inputs)."""
    script = WL / "bisect_train.py"
    line = mark_line(script, "planted-nan")
    r, d = bisect(h, "bisect_nan", ["--nan", "--", h.py, script, "--plant", "nan"])
    check(r.rc == 1, f"gpurr bisect --nan exit {r.rc}, want 1 (found): {r.why()}\n{r.out[-1500:]}")
    check("step 3" in r.out, f"bisect --nan does not name step 3:\n{r.out[-1500:]}")
    check(f"bisect_train.py:{line}" in r.out, f"bisect --nan does not name bisect_train.py:{line}:\n{r.out[-1500:]}")
    check("made" in r.out, f"bisect --nan does not say the launch made the NaN:\n{r.out[-1500:]}")
    return f"step 3 at bisect_train.py:{line}, made there"


@test("bisect.agree")
def t_bisect_agree(h):
    """gpurr bisect of the deterministic loop: the two digest runs agree at every digest (exit
    0), and no rerun is made."""
    r, d = bisect(h, "bisect_agree", ["--", h.py, WL / "bisect_train.py"])
    check(r.rc == 0 and "agree at every digest" in r.out, f"gpurr bisect of a deterministic loop: {r.why()}\n{r.out[-800:]}")
    runs = sorted(p.name for p in d.iterdir() if p.is_dir())
    check(len(runs) == 2, f"bisect made runs {runs}, want the 2 digest runs alone")
    return "agree at every digest; 2 runs"


@test("bisect.lr_ulp")
def t_bisect_lr_ulp(h):
    """Two digest recordings of the loop whose learning rates are one float32 ulp apart, given
    to gpurr bisect: each rerun runs its own recording's command, and the first launch that
    differs (the optimizer's update, step 0) is explained by that scalar parameter."""
    script = WL / "bisect_train.py"
    recs = []
    for i, lr in enumerate(["0.001", "0.0010000001639127731"]):
        d = h.new_recdir(f"lr_ulp{i}")
        r = h.sh(h.record_argv(d, [h.py, script, "--lr", lr], ["--memory", "digest"]), 240, log=f"lr_ulp{i}.rec")
        check(r.rc == 0, f"recording with --lr {lr}: {r.why()}")
        recs.append(d)
    r, _ = bisect(h, "bisect_lr_ulp", [*recs])
    check(r.rc == 1, f"gpurr bisect A B exit {r.rc}, want 1: {r.why()}\n{r.out[-1500:]}")
    check("step 0" in r.out, f"bisect does not name step 0:\n{r.out[-1500:]}")
    why = [l.strip() for l in r.out.splitlines() if l.strip().startswith("why")]
    check(why and "parameter" in why[0] and "0.001" in why[0], f"bisect does not explain the divergence by the lr parameter:\n{r.out[-1500:]}")
    return why[0][:100]


@test("digest.nccl_owned")
def t_digest_nccl_owned(h):
    """A one-rank DistributedDataParallel job (NCCL on one GPU) recorded twice with --memory
    digest: NCCL's own allocations are recorded as owned by nccl and left out of every digest,
    and gpurr diff says the two runs agree (exit 0)."""
    recs = record_twice(h, "nccl_owned", [h.py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                                          WL / "ddp_one.py"], ["--memory", "digest"], 300)
    own = h.one(recs[0], "SELECT count(*) AS n, sum(size) AS bytes FROM allocations WHERE owner = 'nccl'")
    check(own["n"] > 0, "no allocation owned by nccl in a DDP job")
    leak = h.n(recs[0], "SELECT count(*) AS n FROM digests d JOIN allocations a ON a.process = d.process AND "
                        "a.allocation_id = d.allocation_id WHERE a.owner = 'nccl'")
    check(leak == 0, f"{leak} digest rows of NCCL's allocations")
    r = h.sh([h.gpurr, "diff", *recs], 120, log="nccl_owned.diff")
    check(r.rc == 0 and "agree" in r.out, f"gpurr diff of two deterministic one-rank DDP runs: {r.why()}\n{r.out[:800]}")
    return f"{own['n']} NCCL allocations ({own['bytes'] / 2**20:.0f} MiB) left out; the runs agree"


@test("bisect.ddp_scatter")
def t_bisect_ddp_scatter(h):
    """2 GPUs: DDP whose rank 1 adds a float index_add_ into its activations: the digests part
    ways at step 0; bisect names rank 1, the index_add_ line and a nondeterministic kernel, and
    rank 0 as having followed through the all-reduce."""
    two_gpus(h, "bisect.ddp_scatter.gpus")
    script = WL / "ddp_train.py"
    line = mark_line(script, "planted-scatter")
    r, _ = bisect(h, "bisect_ddp_scatter", ["--", h.py, "-m", "torch.distributed.run", "--standalone",
                                            "--nproc-per-node", "2", script, "--plant", "scatter"])
    check(r.rc == 1, f"gpurr bisect exit {r.rc}, want 1: {r.why()}\n{r.out[-1500:]}")
    check("rank 1" in r.out and f"ddp_train.py:{line}" in r.out and "nondeterministic" in r.out,
          f"bisect does not name rank 1, ddp_train.py:{line} and a nondeterministic kernel:\n{r.out[-2000:]}")
    check(re.search(r"rank 0 followed rank 1 through \S*(AllReduce|all_reduce)", r.out, re.I),
          f"bisect does not say rank 0 followed through the all-reduce:\n{r.out[-2000:]}")
    return f"rank 1 at ddp_train.py:{line}; rank 0 followed"


@test("bisect.ddp_nan")
def t_bisect_ddp_nan(h):
    """2 GPUs: DDP whose rank 0 loss is NaN at step 3: bisect --nan names rank 0, step 3, the
    log kernel and its line."""
    two_gpus(h, "bisect.ddp_nan.gpus")
    script = WL / "ddp_train.py"
    line = mark_line(script, "planted-nan")
    r, _ = bisect(h, "bisect_ddp_nan", ["--nan", "--", h.py, "-m", "torch.distributed.run", "--standalone",
                                        "--nproc-per-node", "2", script, "--plant", "nan"])
    check(r.rc == 1 and "rank 0" in r.out and "step 3" in r.out and f"ddp_train.py:{line}" in r.out,
          f"bisect --nan: {r.why()}\n{r.out[-2000:]}")
    return f"rank 0, step 3, ddp_train.py:{line}"


@test("bisect.ddp_agree")
def t_bisect_ddp_agree(h):
    """2 GPUs: two deterministic DDP runs: digest diff, hash diff and bisect all say they
    agree, NCCL's own memory left out."""
    two_gpus(h, "bisect.ddp_agree.gpus")
    script = WL / "ddp_train.py"
    argv = [h.py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", script]
    r, _ = bisect(h, "bisect_ddp_agree", ["--", *argv])
    check(r.rc == 0 and "agree at every digest" in r.out, f"bisect of deterministic DDP: {r.why()}\n{r.out[-1500:]}")
    recs = []
    for i in (1, 2):
        d = h.new_recdir(f"ddp_agree_hash{i}")
        rr = h.sh(h.record_argv(d, argv, ["--memory", "hash"]), 300, log=f"ddp_agree_hash{i}.rec")
        check(rr.rc == 0, f"hash recording {i}: {rr.why()}")
        recs.append(d)
    r = h.sh([h.gpurr, "diff", *recs], 300, log="ddp_agree.diff")
    check(r.rc == 0, f"gpurr diff of two deterministic DDP hash recordings: {r.why()}\n{r.out[-1500:]}")
    return "bisect and diff agree"


@test("diff.scatter")
def t_diff_scatter(h):
    """Two recordings of a loop whose only nondeterministic kernel is a float scatter-add with
    colliding indices: gpurr diff names that kernel and the Python line that launched it."""
    return diff_scatter(h, "diff_scatter", [])


@test("diff.leftovers")
def t_diff_leftovers(h):
    """A deterministic program half-writes a tensor whose memory the pool took back from a
    tensor of random bytes: recorded twice with --memory hash, the runs agree, since new
    allocations are cleared and memory the program never wrote is the same in both."""
    recs = record_twice(h, "leftovers", [h.py, WL / "leftovers.py"], ["--memory", "hash"])
    half = h.n(recs[0], "SELECT count(*) AS n FROM launches WHERE name LIKE '%fill%'")
    check(half >= 3, f"{half} fill launches recorded, want 3")
    r = h.sh([h.gpurr, "diff", *recs], 120, log="leftovers.diff")
    check(r.rc == 0 and "agree" in r.out, f"gpurr diff of a program that half-writes reused memory: {r.why()}\n{r.out[:800]}")
    return "the runs agree: the unwritten half was cleared in both"


@test("diff.threads_paired")
def t_diff_threads_paired(h):
    """8 threads, each copying in its own data and launching on a stream of its own after a
    random sleep, recorded twice with --memory hash: the threads reach the GPU in another order
    in each run, and gpurr diff pairs their streams thread by thread (by the order the threads
    were created), so the runs agree."""
    script = WL / "threads_paired.py"
    recs, orders = [], []
    for i in (1, 2):
        d = h.new_recdir(f"threads_paired{i}")
        r = h.sh(h.record_argv(d, [h.py, script], ["--memory", "hash"]), 240, log=f"threads_paired{i}.rec")
        check(r.rc == 0, f"recording {i}: {r.why()}")
        recs.append(d)
        h.recordings.append(d)
        # Each worker's rank by creation (tid) in the order the workers first launched.
        rows = h.query(d, "SELECT tid, min(seq) AS first FROM launches WHERE tid != (SELECT pid FROM processes) "
                          "GROUP BY tid ORDER BY first")
        check(len(rows) == 8, f"recording {i}: {len(rows)} worker threads launched, want 8: {rows}")
        tids = sorted(row["tid"] for row in rows)
        orders.append([tids.index(row["tid"]) for row in rows])
    r = h.sh([h.gpurr, "diff", *recs], 120, log="threads_paired.diff")
    check(r.rc == 0 and "the runs agree" in r.out,
          f"gpurr diff exit {r.rc}, want 0 (the runs agree); threads launched in the orders {orders}: {r.why()}\n{r.out[:1200]}")
    alike = [l.strip() for l in r.out.splitlines() if "threads launch alike" in l]
    order = "the same order in both runs (by chance)" if orders[0] == orders[1] else f"orders {orders[0]} and {orders[1]}"
    return f"agree; threads launched in {order}; {alike[0] if alike else 'no alike line'}"


@test("verify.rerun")
def t_verify_rerun(h):
    """The diff_scatter loop recorded twice with snapshots of every launch, once made
    deterministic and once with its float scatter-add: run 2 verified against the manifest of
    run 1 matches for the deterministic loop, and for the scatter-add names that kernel and its
    line and shows expected and actual bytes."""
    script = WL / "diff_scatter.py"
    line = mark_line(script, "scatter")

    def verify_rerun(tag, args):
        recs = []
        for i in (1, 2):
            d = h.new_recdir(f"verify_{tag}{i}")
            r = h.sh(h.record_argv(d, [h.py, script, *args], ["--memory", "snapshot"]), 240, log=f"verify_{tag}{i}.rec")
            check(r.rc == 0, f"{tag} recording {i}: {r.why()}")
            recs.append(d)
        m = h.tmp / f"verify_{tag}.json"
        r = h.sh([h.gpurr, "manifest", recs[0], "-o", m], 120, log=f"verify_{tag}.manifest")
        check(r.rc == 0 and m.exists(), f"gpurr manifest of the {tag} run exit {r.rc}: {r.why()}")
        return h.sh([h.gpurr, "verify", recs[1], "--manifest", m], 120, log=f"verify_{tag}.verify")

    r = verify_rerun("det", ["--deterministic"])
    check(r.rc == 0 and "matches the manifest" in r.out,
          f"deterministic loop: gpurr verify exit {r.rc}, want 0 (matches): {r.why()}\n{r.out[:1200]}")
    agree = [l for l in r.out.splitlines() if "matches the manifest" in l]
    r = verify_rerun("scatter", [])
    check(r.rc == 1, f"scatter-add loop: gpurr verify exit {r.rc}, want 1 (differs): {r.why()} {r.out[:300]}")
    kernel = [l.strip() for l in r.out.splitlines() if l.strip().startswith("kernel")]
    check(kernel and "scatter" in kernel[0], f"verify names {kernel[:1]}, want the scatter-add kernel:\n{r.out[:1200]}")
    check(f"diff_scatter.py:{line}" in r.out, f"verify does not name diff_scatter.py:{line}:\n{r.out[:1200]}")
    check("expected 0x" in r.out and "actual   0x" in r.out,
          f"verify shows no expected/actual bytes though both runs have snapshots:\n{r.out[:1200]}")
    return (f"deterministic: {agree[0].split(': ', 1)[-1][:60]}; scatter-add: {kernel[0][6:].strip()[:50]} "
            f"at diff_scatter.py:{line} with bytes")
