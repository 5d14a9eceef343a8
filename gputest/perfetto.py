"""trace.*: gpurr trace's Chrome JSON and Perfetto files: the kernels of CUDA-graph replays, and
gpurr's own memory-capture kernels on a track of their own."""
import json

from harness import Fail, WL, at_line, check, graph_lines, test


# --- gpurr trace --------------------------------------------------------------------------
def proto_fields(buf):
    """The fields of one protobuf message: (number, wire type, value) with value an int for
    varint and fixed types and bytes for length-delimited ones. Raises Fail on bad bytes."""
    out, i, n = [], 0, len(buf)

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            check(i < n and shift < 70, "Perfetto trace: truncated varint")
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v
    while i < n:
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            out.append((num, wt, varint()))
        elif wt == 1:
            check(i + 8 <= n, "Perfetto trace: truncated fixed64")
            out.append((num, wt, int.from_bytes(buf[i:i + 8], "little")))
            i += 8
        elif wt == 2:
            ln = varint()
            check(i + ln <= n, "Perfetto trace: length past the end")
            out.append((num, wt, buf[i:i + ln]))
            i += ln
        elif wt == 5:
            check(i + 4 <= n, "Perfetto trace: truncated fixed32")
            out.append((num, wt, int.from_bytes(buf[i:i + 4], "little")))
            i += 4
        else:
            raise Fail(f"Perfetto trace: wire type {wt} at byte {i}")
    return out


def perfetto_events(data):
    """Track events of a Perfetto trace as dicts {cat, name, args}, names resolved through
    the interning tables (TracePacket.interned_data): field numbers of Perfetto's
    trace_packet.proto, track_event.proto, debug_annotation.proto and interned_data.proto."""
    names, cats, annos, events = {}, {}, {}, []

    def interned(entry):
        f = {num: v for num, _, v in proto_fields(entry)}
        return f.get(1), f.get(2, b"").decode()
    for num, wt, packet in proto_fields(data):
        check(num == 1 and wt == 2, f"Perfetto trace: top-level field {num}/{wt}, want packets (1)")
        fields = proto_fields(packet)
        for pn, _, v in fields:
            if pn == 12:  # interned_data
                for inum, _, e in proto_fields(v):
                    table = {1: cats, 2: names, 3: annos}.get(inum)
                    if table is not None:
                        iid, name = interned(e)
                        table[iid] = name
        for pn, _, v in fields:
            if pn != 11:  # track_event
                continue
            ev = {"cat": None, "name": None, "args": {}, "type": None}
            for en, _, ev_v in proto_fields(v):
                if en == 9:
                    ev["type"] = ev_v
                elif en == 10:
                    ev["name"] = names.get(ev_v)
                elif en == 3:
                    ev["cat"] = cats.get(ev_v)
                elif en == 4:
                    a = {an: av for an, _, av in proto_fields(ev_v)}
                    key = annos.get(a.get(1))
                    ev["args"][key] = a[6].decode() if 6 in a else a.get(4)
            events.append(ev)
    return events


def trace_file(h, d, name, fmt_ext):
    out = h.tmp / f"{name}.{fmt_ext}"
    r = h.sh([h.gpurr, "trace", d, "-o", out], 180, log=f"{name}.trace.{fmt_ext}")
    check(r.rc == 0 and out.exists(), f"gpurr trace -o {out.name}: {r.why()} {r.out[:300]}")
    return out, r


@test("trace.graphs")
def t_trace_graphs(h):
    """gpurr trace of the CUDA-graph workload, as Chrome JSON and as Perfetto protobuf: every
    kernel a graph replay ran is a slice named after its kernel that carries the graphs.py
    line of the launch that captured it (joined through the graph nodes, not by name), an
    arrow from its cuGraphLaunch call, and the line that replayed it."""
    want, d = h.py_workload("graphs")
    script, lines = WL / "graphs.py", graph_lines(want)
    cap = {tag: h.n(d, f"SELECT count(*) AS n FROM launches WHERE captured = 1 AND "
                       f"{at_line('python_line', script, line)}") for tag, line in lines.items()}
    captured = sum(cap.values())
    check(captured > 0, "no captured launches")
    out, r = trace_file(h, d, "graphs", "json")
    doc = json.loads(out.read_text())
    slices = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    gk = [e for e in slices if e.get("cat") == "graph_kernel"]
    check(len(gk) == want["replays"] * captured,
          f"{len(gk)} graph kernel slices, want {want['replays']} replays x {captured} captured launches {h.drops(d)}")
    bad = [e for e in gk if not any(f"graphs.py:{line} " in str(e.get("args", {}).get("python_line", ""))
                                    for line in lines.values())]
    check(not bad, f"{len(bad)} graph kernel slices without a marked capture-time line, e.g. "
                   f"{bad[0].get('name')!r} args {json.dumps(bad[0].get('args'))[:300]}" if bad else "")
    for tag, line in lines.items():
        got = sum(1 for e in gk if f"graphs.py:{line} " in e["args"]["python_line"])
        check(got == want["replays"] * cap[tag], f"{got} graph kernel slices carry graphs.py:{line} ({tag}), "
                                                 f"want {want['replays']} x {cap[tag]}")
    unnamed = [e for e in gk if not e.get("name") or e["name"].startswith("[")]
    check(not unnamed, f"{len(unnamed)} graph kernel slices have no kernel name")
    outs = {e["bind_id"] for e in slices if e.get("flow_out") and e.get("cat") == "graph_launch"}
    no_flow = [e for e in gk if not e.get("flow_in") or e.get("bind_id") not in outs]
    check(not no_flow, f"{len(no_flow)} graph kernel slices have no arrow from a cuGraphLaunch call")
    # The replay call's innermost Python frame is torch's CUDAGraph.replay.
    unreplayed = [e["args"].get("replayed_at") for e in gk if "replay" not in e["args"].get("replayed_at", "")]
    check(not unreplayed, f"{len(unreplayed)} graph kernel slices lack the replaying line: {unreplayed[:2]}")

    pout, _ = trace_file(h, d, "graphs", "perfetto-trace")
    events = perfetto_events(pout.read_bytes())
    pg = [e for e in events if e["cat"] == "graph_kernel" and e["type"] == 1]  # TYPE_SLICE_BEGIN
    check(len(pg) == len(gk), f"Perfetto trace: {len(pg)} graph kernel slices, the JSON has {len(gk)}")
    for tag, line in lines.items():
        got = sum(1 for e in pg if f"graphs.py:{line} " in str(e["args"].get("python_line")))
        check(got == want["replays"] * cap[tag], f"Perfetto trace: {got} graph kernels carry graphs.py:{line} ({tag})")
    return (f"{len(gk)} replayed kernel slices in JSON and Perfetto, each with its capture-time line "
            f"{ {t: lines[t] for t in lines} } and an arrow from its cuGraphLaunch; {r.out.strip()[:120]}")


@test("trace.memcap")
def t_trace_memcap(h):
    """gpurr's own memory-capture kernels (--memory hash) are on a track of their own in the
    trace, not among the program's kernels, and their durations add up to the recording's
    memory_capture_gpu_ns statistic."""
    out = h.tmp / "memory_hash"
    want, d = h.py_workload("memory_hash", args=[out], flags=["--memory", "hash"])
    ours = h.n(d, "SELECT count(*) AS n FROM gpu_activity WHERE name LIKE 'gpurr_memcap%'")
    check(ours == 0, f"{ours} of gpurr's own kernels are among the program's in gpu_activity")
    gpu_ns = h.n(d, "SELECT sum(memory_capture_gpu_ns) AS n FROM stats")
    check(gpu_ns > 0, "memory_capture_gpu_ns is 0 in a --memory hash recording")
    tout, r = trace_file(h, d, "memory_hash", "json")
    doc = json.loads(tout.read_text())
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in doc["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    own = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "gpurr"]
    check(own, f"no memory-capture slices in the trace ({r.out.strip()[:200]})")
    off = [names.get((e["pid"], e["tid"])) for e in own if "gpurr memory capture" not in names.get((e["pid"], e["tid"]), "")]
    check(not off, f"{len(off)} memory-capture slices on other tracks: {sorted(set(map(str, off)))[:3]}")
    total_ns = sum(round(e["dur"] * 1000) for e in own)
    # Both come from the same CUPTI records; runs that completed after the last frame's
    # counters were taken may make them differ a little.
    check(abs(total_ns - gpu_ns) <= max(1000, gpu_ns // 100),
          f"memory-capture slices last {total_ns} ns in all, the recording counted {gpu_ns} ns")
    program = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e.get("name", "").startswith("gpurr_memcap")]
    check(not program, f"{len(program)} gpurr_memcap slices among the program's kernels")
    return f"{len(own)} memory-capture kernels on their own track, {total_ns / 1e6:.3f} ms = memory_capture_gpu_ns"
