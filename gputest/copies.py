"""copies.*: memory copies, memsets and host waits in query, trace and info, each with its
bytes, stream, duration and the Python line that made it."""
import json

from harness import WL, at_line, check, info_of, mark_line, tail, test


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
