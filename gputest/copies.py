"""copies.*: memory copies, memsets and host waits in query, trace and info, each with its
bytes, stream, duration and the Python line that made it; and the states of what copies wrote,
as rewind and nan read them."""
import json
import struct

from harness import WL, at_line, check, info_of, mark_line, nan_at, tail, test, truthy


def _line(tag):
    # call_user_line: torch's wrappers (Stream.synchronize, Event.wait) are the innermost frame
    return at_line("call_user_line", WL / "copies.py", mark_line(WL / "copies.py", tag))


@test("copies.timeline")
def t_copies_timeline(h):
    """A PyTorch program copies to and from the GPU (pinned and, asynchronously, pageable
    memory), sets memory through the driver, and waits for a stream, an event and the device
    (copies.py): each copy and memset is in query's copies table with its bytes, stream,
    GPU duration and line, each wait in syncs with the time the host waited and its line;
    the trace has them with arrows from their calls, and info the time in copies and waits
    and the waiting lines. Every launch call has its host time."""
    want, d = h.py_workload("copies")
    check(want["memset_result"] == 0, f"cuMemsetD8Async returned {want['memset_result']}")
    stream_of = {}
    for tag in ("sum", "sleep"):
        line = mark_line(WL / "copies.py", tag)
        # user_line: torch.cuda._sleep's innermost frame is torch's own wrapper
        rows = h.query(d, f"SELECT DISTINCT stream_id FROM launches WHERE {at_line('user_line', WL / 'copies.py', line)}")
        check(len(rows) == 1, f"launches at copies.py:{line} ({tag}): {rows}, want one stream")
        stream_of[tag] = rows[0]["stream_id"]
    check(stream_of["sum"] != stream_of["sleep"], f"the side stream is the default one: {stream_of}")

    def copy(tag, where):
        rows = h.query(d, f"SELECT kind, direction, src_memory, dst_memory, bytes, value, async, pageable_async, "
                          f"stream_id, duration_ns, call_api FROM copies WHERE {_line(tag)} AND {where}")
        check(len(rows) == 1, f"copies at the {tag} line ({where}): {rows}, want one "
                              f"(copies in all: {h.query(d, 'SELECT kind, direction, bytes, call_python_line FROM copies')})")
        r = rows[0]
        check(r["duration_ns"] is not None and r["duration_ns"] > 0, f"{tag}: GPU duration {r['duration_ns']}")
        return r

    h2d = copy("h2d", "direction = 'HtoD'")
    check(h2d["bytes"] == want["h2d_bytes"] and h2d["src_memory"] == "pinned" and h2d["stream_id"] == stream_of["sum"],
          f"pinned copy {h2d}, want {want['h2d_bytes']} bytes from pinned memory on stream {stream_of['sum']}")
    pg = copy("h2d_pageable", "direction = 'HtoD'")
    check(pg["bytes"] == want["pageable_bytes"] and pg["src_memory"] == "pageable" and pg["stream_id"] == stream_of["sleep"],
          f"pageable copy {pg}, want {want['pageable_bytes']} bytes from pageable memory on stream {stream_of['sleep']}")
    if pg["async"]:
        check(pg["pageable_async"], f"an asynchronous copy of pageable memory not marked: {pg}")
    ms = copy("memset", "kind = 'memset'")
    check(ms["bytes"] == want["memset_bytes"] and ms["value"] == want["memset_value"] and ms["stream_id"] == stream_of["sum"],
          f"memset {ms}, want {want['memset_bytes']} bytes of {want['memset_value']} on stream {stream_of['sum']}")
    d2h = copy("d2h", "direction = 'DtoH'")
    check(d2h["bytes"] == want["d2h_bytes"] and d2h["stream_id"] == stream_of["sum"], f"loss copied back: {d2h}")

    def sync(tag, typ):
        rows = h.query(d, f"SELECT type, stream_id, event_id, wait_ns, call_api FROM syncs WHERE {_line(tag)} AND type = '{typ}'")
        check(len(rows) >= 1, f"no {typ} wait at the {tag} line (syncs: {h.query(d, 'SELECT type, wait_ns, call_python_line FROM syncs')})")
        return rows[0]

    s = sync("stream_sync", "stream")
    check(s["stream_id"] == stream_of["sleep"] and s["wait_ns"] > 0, f"side.synchronize(): {s}")
    e = sync("event_sync", "event")
    check(e["event_id"] is not None and e["wait_ns"] > 0, f"Event.synchronize(): {e}")
    w = sync("wait_event", "stream_wait_event")
    check(w["stream_id"] == stream_of["sum"], f"wait_event: {w}")

    untimed = h.n(d, "SELECT count(*) AS n FROM launches WHERE host_duration_ns IS NULL OR host_duration_ns <= 0")
    check(untimed == 0, f"{untimed} launches without a host time")

    out = h.tmp / "copies.json"
    r = h.sh([h.gpurr, "trace", d, "-o", out], 120, log="copies.trace")
    check(r.rc == 0, f"gpurr trace: {r.why()}")
    events = json.loads(out.read_text())["traceEvents"]
    calls = {(e["pid"], e.get("bind_id")): e for e in events if e.get("cat") == "copy_call" and e.get("flow_out")}
    gpu = [e for e in events if e.get("cat") in ("memcpy", "memset")]
    check(len(gpu) >= 4, f"{len(gpu)} copy and memset slices in the trace, want at least 4")
    linked = [e for e in gpu if e.get("flow_in") and (e["pid"], e.get("bind_id")) in calls]
    lined = [e for e in linked if "copies.py:" in str(calls[(e["pid"], e["bind_id"])]["args"].get("python_line", ""))]
    check(len(lined) >= 4, f"{len(lined)} of {len(gpu)} copies have an arrow from a call at a line of copies.py")
    waits = [e for e in events if e.get("cat") == "sync" and e["args"].get("wait_ns", 0) > 0]
    check(any("copies.py:" in str(e["args"].get("python_line", "")) for e in waits),
          f"no wait of copies.py in the trace: {[(e['name'], e['args'].get('python_line')) for e in waits][:5]}")

    info = info_of(h, "copies", d)
    check("  copies " in info and "  waits " in info and "top waiting lines" in info,
          f"gpurr info says nothing of copies and waits: {tail(info, 20)}")
    top = info.split("top waiting lines", 1)[1]
    check("copies.py:" in top, f"info's waiting lines name no line of copies.py: {tail(top, 8)}")
    return (f"{len(gpu)} copies and memsets, pinned {h2d['duration_ns']} ns, pageable {pg['duration_ns']} ns; "
            f"stream wait {s['wait_ns']} ns, event wait {e['wait_ns']} ns")


def _copy_named(text, line):
    """Whether a line of text names a copy made at copy_states.py:LINE ("... copy at
    /path/copy_states.py:LINE main"; the file as Python named it)."""
    return any("copy at " in l and f"copy_states.py:{line} " in l for l in text.splitlines())


@test("copies.rewind_after_copy")
def t_copies_rewind_after_copy(h):
    """Snapshot mode, only the fill kernel selected (--snapshot-kernels FillFunctor): a kernel
    fills a tensor, a copy from the host overwrites it, a kernel that is not snapshotted reads
    it (copy_states.py rewind). The copy has a copy state, a snapshot, tied to its call's line
    (query's copy_states joined to host_calls); gpurr rewind --before the reading kernel writes
    the copied bytes, from that state, and says so."""
    script = WL / "copy_states.py"
    got, d = h.py_workload("copy_states.rewind", script="copy_states.py", args=["rewind"],
                           flags=["--memory", "snapshot", "--snapshot-kernels", "FillFunctor"])
    n = got["n"]
    copy_line = mark_line(script, "copy")
    states = h.query(d, "SELECT s.launch_seq, s.hash, s.snapshot, s.lost, h.api FROM copy_states s JOIN host_calls h "
                        f"USING (process, correlation_id) WHERE {at_line('h.user_line', script, copy_line)}")
    check(len(states) >= 1 and all(truthy(s["snapshot"]) and not truthy(s["lost"]) and s["hash"] for s in states),
          f"copy states at copy_states.py:{copy_line}: {states}, want a snapshot "
          f"(all: {h.query(d, 'SELECT launch_seq, correlation_id, allocation_id, snapshot, lost, lost_reason FROM copy_states')})")
    read_line = mark_line(script, "read")
    reads = h.query(d, f"SELECT seq, memory_status FROM launches WHERE {at_line('user_line', script, read_line)}")
    check(len(reads) == 1, f"launches at copy_states.py:{read_line} (x * 2): {reads}, want one")
    seq = reads[0]["seq"]
    out = h.tmp / "copy_states.x.bin"
    r = h.sh([h.gpurr, "rewind", d, "--launch", seq, "--before", "--addr", hex(got["x_addr"]), "--len", n * 4,
              "-o", out, "--force"], 120, log="copy_states.rewind")
    check(r.rc == 0, f"gpurr rewind --launch {seq} --before: {r.why()}")
    want = struct.pack(f"<{n}f", *map(float, range(n)))
    data = out.read_bytes()
    check(data == want, f"rewind --before launch {seq}: {len(data)} bytes, the first {data[:16].hex()}; "
                        f"want the copied floats 0..{n - 1} ({want[:16].hex()})")
    check(_copy_named(r.err, copy_line), f"rewind does not say the bytes are the copy's at copy_states.py:{copy_line}: {tail(r.err, 4)}")
    return f"rewind --before launch {seq} ({reads[0]['memory_status']}): the {n * 4} bytes the copy at line {copy_line} left"


@test("copies.nan_from_copy")
def t_copies_nan_from_copy(h):
    """Hash mode with --nan-scan f32 under PyTorch's cudaMallocAsync allocator: a copy from the
    host puts -1.0 into a fresh tensor, then torch.log of it makes NaN (copy_states.py log).
    gpurr nan names the log's line and says it made the NaN from finite inputs: the copy's
    state, counted on the GPU after it, and the output, an allocation gpurr cleared."""
    script = WL / "copy_states.py"
    got, d = h.py_workload("copy_states.log", script="copy_states.py", args=["log"],
                           flags=["--memory", "hash", "--nan-scan", "f32"])
    check(got["nans"] == got["n"], f"torch.log of -1.0 made {got['nans']} NaN of {got['n']}: {got}")
    check(got["allocator"] == "cudaMallocAsync", f"PyTorch's allocator is {got['allocator']}, not cudaMallocAsync")
    cleared = h.n(d, "SELECT count(*) AS n FROM allocations WHERE cleared = 1")
    check(cleared > 0, "no allocation is marked cleared, though PyTorch allocated with cudaMallocAsync")
    log_line, copy_line = mark_line(script, "log"), mark_line(script, "copy_neg")
    r, seq, at = nan_at(h, d, "f32", "copy_states.log.nan")
    check(r.rc == 1 and seq, f"gpurr nan found nothing (exit {r.rc}):\n{r.out[:800]}")
    check(f"copy_states.py:{log_line}" in at, f"gpurr nan points at {at!r}, want copy_states.py:{log_line}:\n{r.out[:800]}")
    check("it made the NaN: its inputs were finite" in r.out,
          f"gpurr nan does not say the log made the NaN from finite inputs:\n{r.out[:1500]}")
    check(_copy_named(r.out, copy_line), f"gpurr nan does not name the copy at copy_states.py:{copy_line} as an input's writer:\n{r.out[:1500]}")
    check("gpurr cleared it when it was allocated" in r.out,
          f"gpurr nan does not say the output held zeros gpurr cleared:\n{r.out[:1500]}")
    return f"launch {seq} at copy_states.py:{log_line} made the NaN; its input came from the copy at line {copy_line}"
