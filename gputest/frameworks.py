"""graphs.*, triton, compiled, cupy_raw, cudnn, jax, raw_cuda: the libraries and APIs
programs launch through: CUDA graphs, Triton, torch.compile, CuPy, cuDNN, JAX, the CUDA
runtime and driver."""
import re
from pathlib import Path

from harness import (CBID_LAUNCH_KERNEL, WL, at_line, build_cu_fatbin, check, frame_at, graph_lines,
                     mark_line, raw_cuda_binary, test, truthy)


@test("graphs.capture")
def t_graphs_capture(h):
    want, d = h.py_workload("graphs")
    script, lines = WL / "graphs.py", graph_lines(want)
    per_line = {}
    for tag, line in lines.items():
        per_line[tag] = h.n(d, f"SELECT count(*) AS n FROM launches WHERE captured = 1 AND "
                               f"{at_line('python_line', script, line)}")
        check(per_line[tag] >= 1, f"no captured launch at graphs.py:{line} ({tag}); captured lines seen: "
                                  f"{h.sample(d, 'python_line', where='captured = 1')}")
    captured = h.n(d, "SELECT count(*) AS n FROM launches WHERE captured = 1")
    check(captured == sum(per_line.values()),
          f"{captured} captured launches, {sum(per_line.values())} of them at the marked lines")
    any_line = " OR ".join(at_line("python_line", script, l) for l in lines.values())
    eager = h.n(d, f"SELECT count(*) AS n FROM launches WHERE captured = 0 AND ({any_line})")
    check(eager == want["warmup"] * captured,
          f"{eager} eager launches at the marked lines, want warmup {want['warmup']} x {captured}")
    glaunch = h.n(d, "SELECT count(*) AS n FROM graph_launches")
    check(glaunch == want["replays"], f"{glaunch} graph_launches, the program replayed {want['replays']}")
    return f"{captured} captured launches {per_line}, {eager} eager, {glaunch} graph launches"


@test("graphs.replay_lines")
def t_graphs_replay(h):
    want, d = h.py_workload("graphs")
    script, lines = WL / "graphs.py", graph_lines(want)
    captured = h.n(d, "SELECT count(*) AS n FROM launches WHERE captured = 1")
    check(captured > 0, "no captured launches")
    via = h.n(d, "SELECT count(*) AS n FROM gpu_activity WHERE via_graph = 1")
    check(via == want["replays"] * captured,
          f"{via} kernel activities via graph, want {want['replays']} replays x {captured} {h.drops(d)}")
    for tag, line in lines.items():
        cap = h.n(d, f"SELECT count(*) AS n FROM launches WHERE captured = 1 AND "
                     f"{at_line('python_line', script, line)}")
        got = h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE via_graph = 1 AND "
                     f"{at_line('python_line', script, line)}")
        check(got == want["replays"] * cap,
              f"{got} replayed kernels carry graphs.py:{line} ({tag}), want {want['replays']} x {cap}; "
              f"lines seen: {h.sample(d, 'python_line', table='gpu_activity', where='via_graph = 1')}")
    return f"{via} replayed kernels, each with its capture-time line"


@test("graphs.api_nodes")
def t_graphs_api_nodes(h):
    """A C++ program builds a graph node by node through the graph API (cudaGraphAddKernelNode,
    cudaGraphAddNode, a conditional node's body, memory nodes), replays it, and changes a node's
    parameters in the executable graph after the first replay: every kernel run links to a
    launch of its node, made in the function that added it or, for the changed node's later
    runs, that changed it (native frames, from the executable's symbol table). A second graph's
    executable graph is updated whole (cudaGraphExecUpdate) from itself after a node changed,
    then from a captured graph: its runs link to the change, then to the capture."""
    binary = build_cu_fatbin(h, "graph_nodes")
    want, d = h.workload("graph_nodes", [binary], flags=["--callstack", "native"])
    gn = "a.via_graph = 1 AND a.name LIKE '%gn_%'"
    runs = h.n(d, f"SELECT count(*) AS n FROM gpu_activity a WHERE {gn}")
    check(runs == want["kernel_runs"], f"{runs} kernel runs by the graph, want {want['kernel_runs']} {h.drops(d)}")
    unlinked = h.query(d, f"""SELECT a.name, a.graph_node_id FROM gpu_activity a LEFT JOIN launches l
                              ON l.process = a.process AND l.seq = a.launch_seq WHERE {gn} AND l.seq IS NULL""")
    check(not unlinked, f"{len(unlinked)} of {runs} kernel runs not linked to a launch: {unlinked[:4]}")
    adders = {"gn_scale": "add_scale_node", "gn_add": "add_add_node", "gn_fill": "add_mem_nodes"}
    if want["conditional"]:
        adders["gn_body"] = "add_body_node"
    seen = {}
    for kernel, adder in adders.items():
        rows = h.query(d, f"""SELECT a.graph_launch_seq AS replay, l.seq, l.captured, l.api,
                                     (SELECT min(f.function) FROM frames f WHERE f.process = l.process
                                      AND f.callstack_id = l.callstack_id AND (f.function LIKE '{adder}%'
                                      OR f.function LIKE 'retune_add_node%')) AS function
                              FROM gpu_activity a JOIN launches l ON l.process = a.process AND l.seq = a.launch_seq
                              WHERE a.via_graph = 1 AND a.name LIKE '%{kernel}%' ORDER BY a.graph_launch_seq""")
        check(len(rows) == want["replays"], f"{len(rows)} linked runs of {kernel}, want one per replay ({want['replays']})")
        check(all(truthy(r.get("captured")) for r in rows), f"{kernel}'s runs link to launches not captured: {rows}")
        # The add node's parameters changed after the first replay: the later runs ran the change.
        fns = [adder] + ["retune_add_node"] * (len(rows) - 1) if kernel == "gn_add" else [adder] * len(rows)
        got = [(r.get("function") or "").split("(")[0] for r in rows]
        check(got == fns, f"{kernel}'s runs link to launches made in {got}, want {fns}: {rows}")
        seen[kernel] = len({r["seq"] for r in rows})
    check(seen["gn_add"] == 2, f"gn_add's runs link to {seen['gn_add']} launches, want 2 (added, then changed)")
    # The second graph, updated whole twice: from itself after its multiply node changed, then
    # from a graph of the same shape captured from a stream.
    want_fns = {"gu_mul": ["add_update_nodes"] * 2 + ["change_then_update"] * 2 + ["capture_same_shape"] * 2,
                "gu_inc": ["add_update_nodes"] * 4 + ["capture_same_shape"] * 2}
    for kernel, fns in want_fns.items():
        rows = h.query(d, f"""SELECT a.graph_launch_seq AS replay, l.seq, (SELECT min(f.function) FROM frames f
                                     WHERE f.process = l.process AND f.callstack_id = l.callstack_id
                                     AND (f.function LIKE 'add_update_nodes%' OR f.function LIKE 'change_then_update%'
                                          OR f.function LIKE 'capture_same_shape%')) AS function
                              FROM gpu_activity a JOIN launches l ON l.process = a.process AND l.seq = a.launch_seq
                              WHERE a.via_graph = 1 AND a.name LIKE '%{kernel}%' ORDER BY a.graph_launch_seq""")
        got = [(r.get("function") or "").split("(")[0] for r in rows]
        check(got == fns, f"{kernel}'s runs of the updated graph link to launches made in {got}, want {fns}: {rows}")
    info = h.sh([h.gpurr, "info", d], 60, log="graph_nodes.info2").out
    line = next((l for l in info.splitlines() if l.strip().startswith("graph API")), "")
    check("memory node" in line and ("conditional node" in line or not want["conditional"]),
          f"info's graph API line does not count the conditional and memory nodes: {line!r}")
    return f"{runs} kernel runs, all linked; launches per kernel {seen}; {line.strip()}"


@test("triton")
def t_triton(h):
    want, d = h.py_workload("triton_kernel")
    script, line = WL / "triton_kernel.py", mark_line(WL / "triton_kernel.py", "triton-launch")
    k = want["kernel"]
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name LIKE '%{k}%'")
    check(n == want["launches_expected"], f"{n} launches of {k}, want {want['launches_expected']} {h.drops(d)}")
    grid = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name LIKE '%{k}%' AND grid_x = {want['grid_x']}")
    check(grid == n, f"{n - grid} launches of {k} with grid_x != {want['grid_x']}")
    framed = h.n(d, f"""SELECT count(DISTINCT l.seq) AS n FROM launches l JOIN frames f
                        ON f.process = l.process AND f.callstack_id = l.callstack_id
                        WHERE l.name LIKE '%{k}%' AND {frame_at('f', script, line)}""")
    check(framed == n, f"{framed} of {n} Triton launches have triton_kernel.py:{line} in their callstack")
    mod = h.n(d, f"""SELECT count(*) AS n FROM kernels k JOIN modules m
                     ON m.process = k.process AND m.sha256 = k.module_sha256 WHERE k.name LIKE '%{k}%'""")
    check(mod >= 1, f"kernel {k} has no module in the modules table")
    # The module is byte for byte a cubin of Triton's cache: its PTX is stored beside it.
    rows = h.query(d, f"""SELECT m.sha256, m.ptx FROM kernels k JOIN modules m
                          ON m.process = k.process AND m.sha256 = k.module_sha256 WHERE k.name LIKE '%{k}%'""")
    check(rows and rows[0]["ptx"] == "triton-cache", f"modules.ptx of {k}'s module: {rows}")
    ptx = (Path(d) / "modules" / f"{rows[0]['sha256']}.ptx").read_text()
    check(f".entry {k}" in ptx, f"the stored PTX has no .entry {k}: {ptx[:200]!r}")
    # From that PTX the writer proves which parameter words no store goes through: an
    # elementwise Triton kernel stores through its output only.
    proved = h.query(d, f"""SELECT p.param, p.proved_read_only FROM kernel_params p JOIN kernels k
                            ON k.process = p.process AND k.kernel_id = p.kernel_id WHERE k.name LIKE '%{k}%'""")
    check(any(truthy(r["proved_read_only"]) for r in proved) and not all(truthy(r["proved_read_only"]) for r in proved),
          f"proved_read_only of {k}'s parameters: {proved}")
    return f"{n} launches of {k}, grid_x={want['grid_x']}, all with the user's line in their callstack; its PTX stored from Triton's cache"


@test("compiled")
def t_compiled(h):
    want, d = h.py_workload("compiled", timeout=400)
    script, line = WL / "compiled.py", mark_line(WL / "compiled.py", "compiled-call")
    calls = want["calls"]
    base = f"""FROM launches l JOIN frames f ON f.process = l.process AND f.callstack_id = l.callstack_id
               WHERE {frame_at('f', script, line)}"""
    n = h.n(d, f"SELECT count(DISTINCT l.seq) AS n {base}")
    check(n >= calls and n % calls == 0,
          f"{n} launches with compiled.py:{line} in their callstack, want a non-zero multiple of {calls}")
    tri = h.n(d, f"SELECT count(DISTINCT l.seq) AS n {base} AND l.name LIKE 'triton%'")
    check(tri >= calls, f"{tri} Inductor (triton_*) launches from the marked line, want >= {calls}; names: "
                        f"{h.sample(d, 'name')}")
    return f"{n} launches from {calls} compiled calls, {tri} of them Inductor Triton kernels"


@test("cupy_raw")
def t_cupy(h):
    want, d = h.py_workload("cupy_raw")
    k = want["kernel"]
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{k}'")
    check(n == want["launches_expected"], f"{n} launches of {k}, want {want['launches_expected']} {h.drops(d)}")
    dims = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{k}' AND grid_x = {want['grid_x']} "
                  f"AND grid_y = 1 AND block_x = {want['block_x']} AND block_y = 1")
    check(dims == n, f"{n - dims} launches with wrong dims (want grid {want['grid_x']}, block {want['block_x']})")
    api = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{k}' AND "
                 f"(api = {CBID_LAUNCH_KERNEL} OR api LIKE '%cuLaunchKernel')")
    check(api == n, f"{n - api} launches not via cuLaunchKernel (307): {h.sample(d, 'api')}")
    rows = h.query(d, f"""SELECT k.param_count AS pc, k.param_bytes AS pb, m.kernel_count AS kc
                          FROM kernels k JOIN modules m ON m.process = k.process AND m.sha256 = k.module_sha256
                          WHERE k.name = '{k}'""")
    check(len(rows) == 1, f"{len(rows)} rows for {k} in kernels joined to modules, want 1")
    r = rows[0]
    check(r["pc"] == want["param_count"] and r["pb"] == want["param_bytes"],
          f"param_count/bytes {r['pc']}/{r['pb']}, want {want['param_count']}/{want['param_bytes']}")
    check(r["kc"] >= 1, f"its module says kernel_count {r['kc']}")
    return f"{n} launches, params {r['pc']}/{r['pb']} B, module with {r['kc']} kernel(s)"


@test("cudnn")
def t_cudnn(h):
    script = WL / "conv_cudnn.py"
    want, d = h.py_workload("conv_cudnn")
    line = mark_line(script, "conv-forward")
    names = [r["name"] for r in h.query(d, f"SELECT DISTINCT name FROM launches WHERE "
                                           f"{at_line('python_line', script, line)}")]
    conv = [n for n in names if re.search(r"cudnn|conv|fprop|xmma|implicit|winograd|sm90", n, re.I)]
    check(conv, f"no convolution kernel at conv_cudnn.py:{line}; kernels there: {names[:6]}")
    return f"cuDNN {want['cudnn']}: {conv[0][:60]} at the conv line"


@test("jax")
def t_jax(h):
    want, d = h.py_workload("jax_jit")
    n = h.n(d, "SELECT count(*) AS n FROM launches")
    check(n >= want["calls"], f"{n} launches for {want['calls']} jitted calls {h.drops(d)}")
    ran = h.n(d, "SELECT count(*) AS n FROM gpu_activity WHERE launch_seq IS NOT NULL")
    check(ran >= want["calls"], f"only {ran} kernel runs linked to launches")
    mods = h.n(d, "SELECT count(*) AS n FROM modules WHERE kernel_count > 0")
    check(mods >= 1, "no module with kernels recorded (XLA loads its kernels as modules)")
    return f"{n} launches for {want['calls']} calls, {ran} linked kernel runs, {mods} module(s)"


@test("raw_cuda")
def t_raw_cuda(h):
    binary = raw_cuda_binary(h)
    want, d = h.workload("raw_cuda", [binary])
    like = lambda k: f"name LIKE '%{k}%'"
    rt, drv = want["rt_kernel"], want["drv_kernel"]
    n_rt = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {like(rt)}")
    check(n_rt == want["rt_launches"], f"{n_rt} runtime launches of {rt}, want {want['rt_launches']} {h.drops(d)}")
    dem = h.sample(d, "demangled", where=like(rt))
    check(dem and all(str(x).startswith(f"{rt}(") for x in dem), f"demangled names of {rt}: {dem}")
    streams = h.n(d, f"SELECT count(DISTINCT stream_id) AS n FROM launches WHERE {like(rt)}")
    check(streams == want["streams"], f"runtime launches on {streams} streams, want {want['streams']}")
    plain = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {like(drv)} AND (cluster_x IS NULL OR cluster_x <= 1)")
    check(plain == want["drv_launches"], f"{plain} cuLaunchKernel launches of {drv}, want {want['drv_launches']}")
    api = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {like(drv)} AND (cluster_x IS NULL OR cluster_x <= 1) "
                 f"AND (api = {CBID_LAUNCH_KERNEL} OR api LIKE '%cuLaunchKernel')")
    check(api == plain, f"{plain - api} of the driver launches not recorded as cuLaunchKernel (307)")
    ex = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {like(drv)} AND cluster_x = {want['cluster_x']}")
    check(ex == want["ex_launches"], f"{ex} launches of {drv} with cluster_x={want['cluster_x']}, "
                                     f"want {want['ex_launches']}")
    pc = h.n(d, f"SELECT param_count AS n FROM kernels WHERE {like(drv)}")
    check(pc == 3, f"kernel {drv} (loaded from PTX) has param_count {pc}, want 3")
    total = want["rt_launches"] + want["drv_launches"] + want["ex_launches"]
    acts = h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE {like(rt)} OR {like(drv)}")
    check(acts == total, f"{acts} kernel activities, want {total} {h.drops(d)}")
    return (f"runtime {n_rt} on {streams} streams ({dem[0]}), cuLaunchKernel {plain}, "
            f"cuLaunchKernelEx cluster 2: {ex}, {acts} activities")
