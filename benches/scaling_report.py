#!/usr/bin/env python3
"""Report of benches/scaling.sh: reads OUT/<experiment>.jsonl (lines of `rmq bench scale`),
writes OUT/report.md (a table per experiment: its stated expectation, the criterion, the
measured figures and whether they met it) and one SVG line chart per experiment.
Python 3 standard library only.

    python3 benches/scaling_report.py target/scaling
"""
import json
import math
import os
import sys

COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def rows(out, experiment):
    path = os.path.join(out, experiment + ".jsonl")
    if not os.path.exists(path):
        return []
    result = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    result.append(json.loads(line))
                except ValueError:
                    pass
    return result


def svg(path, title, xlabel, ylabel, series, logx=False, logy=False):
    """A line chart: series is a list of (name, [(x, y)...]); no points, no file."""
    pts = [p for _, s in series for p in s if p[1] is not None]
    if not pts:
        return False
    w, h, left, right, top, bottom = 640, 360, 70, 20, 40, 50

    def tx(v):
        return math.log10(v) if logx else v

    def ty(v):
        return math.log10(max(v, 1e-9)) if logy else v

    xs = [tx(p[0]) for p in pts]
    ys = [ty(p[1]) for p in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = (min(ys), max(ys)) if logy else (0.0, max(ys) * 1.1 or 1.0)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1

    def px(v):
        return left + (tx(v) - x0) / (x1 - x0) * (w - left - right)

    def py(v):
        return h - bottom - (ty(v) - y0) / (y1 - y0) * (h - top - bottom)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">{xlabel}</text>',
           f'<text x="15" y="{h / 2}" text-anchor="middle" transform="rotate(-90 15 {h / 2})">{ylabel}</text>']
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        label = 10 ** yv if logy else yv
        y = h - bottom - i / 4 * (h - top - bottom)
        out.append(f'<text x="{left - 5}" y="{y + 4}" text-anchor="end">{label:.3g}</text>')
        out.append(f'<line x1="{left}" y1="{y}" x2="{w - right}" y2="{y}" stroke="#eee"/>')
    for x in sorted({p[0] for p in pts}) if len({p[0] for p in pts}) <= 12 else []:
        out.append(f'<text x="{px(x)}" y="{h - bottom + 15}" text-anchor="middle">{x:g}</text>')
    for i, (name, s) in enumerate(series):
        s = [p for p in s if p[1] is not None]
        if not s:
            continue
        c = COLORS[i % len(COLORS)]
        d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s)
        out.append(f'<polyline points="{d}" fill="none" stroke="{c}" stroke-width="2"/>')
        if len(s) <= 20:
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>' for x, y in s]
        out.append(f'<text x="{w - right - 5}" y="{top + 15 * (i + 1)}" text-anchor="end" fill="{c}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True


def yes(ok):
    return "yes" if ok else "**no**"


def soak(out, md):
    s = [r for r in rows(out, "soak") if r.get("kind") == "sample"]
    if not s:
        return
    def at(t):
        return min(s, key=lambda r: abs(r["t_s"] - t))
    end = s[-1]
    m1, m5 = at(60), at(300)
    growth = (end["rss_kib"] - m5["rss_kib"]) / max(m5["rss_kib"], 1) * 100
    later = [r["threads"] for r in s if r["t_s"] >= 60]
    sent = end["sent"] + end["async_sent"]
    svg(os.path.join(out, "soak.svg"), "Soak: one process, mixed load", "minutes", "RSS MiB / threads",
        [("RSS MiB", [(r["t_s"] / 60, r["rss_kib"] / 1024) for r in s]),
         ("threads", [(r["t_s"] / 60, r["threads"]) for r in s])])
    md += ["## Soak", "",
           f"{end['t_s'] / 60:.1f} min; {sent:,} sent ({end['failed']:,} failed), "
           f"{end['push_consumed']:,} push / {end['lite_consumed']:,} lite pull consumed, "
           f"CPU {end['cpu_s']:.0f} s, client instances (rmq-io threads) {end['io_threads']}.", "",
           "| expectation | criterion | measured | met |", "|---|---|---|---|",
           f"| RSS flat after warm-up | growth < 5 % from minute 5 to the end | "
           f"{m1['rss_kib'] / 1024:.1f} MiB at 1 min, {m5['rss_kib'] / 1024:.1f} at 5, "
           f"{end['rss_kib'] / 1024:.1f} at the end ({growth:+.1f} %) | {yes(growth < 5)} |",
           threads_rows(s, m1, later),
           f"| consumers keep up | each consumer within 1 % of what was sent | "
           f"consumed − acknowledged: push {end['push_consumed'] - sent:+,}, lite {end['lite_consumed'] - sent:+,} "
           f"(a send that failed may still be stored) | "
           f"{yes(abs(sent - end['push_consumed']) <= sent / 100 and abs(sent - end['lite_consumed']) <= sent / 100)} |",
           "", "![soak](soak.svg)", ""]


def threads_rows(s, m1, later):
    """The soak's thread and descriptor criteria. Samples that count the push consumer's
    pool apart (`consume_threads`) are judged on the client's fixed threads, constant, and
    the pool, on demand within its maximum (Java's consume_thread_max, 20); older samples
    on the whole count."""
    after = [r for r in s if r["t_s"] >= 60]
    if "consume_threads" not in m1:
        return (f"| threads constant | the same count at every sample from minute 1 | "
                f"{m1['threads']} at 1 min, {min(later)}–{max(later)} after | {yes(min(later) == max(later))} |")
    fixed = [r["threads"] - r["consume_threads"] for r in after]
    pool = [r["consume_threads"] for r in after]
    fds = [r["fds"] for r in after]
    return "\n".join([
        f"| threads constant apart from the consume pool | the count without the push consumer's "
        f"pool the same at every sample from minute 1 | {min(fixed)}–{max(fixed)} "
        f"(all threads {min(later)}–{max(later)}) | {yes(min(fixed) == max(fixed))} |",
        f"| the consume pool bounded | its workers (started on demand) never above "
        f"consume_thread_max (20) | {min(pool)}–{max(pool)} | {yes(max(pool) <= 20)} |",
        f"| descriptors flat | the same count of open descriptors at every sample from minute 1 | "
        f"{m1['fds']} at 1 min, {min(fds)}–{max(fds)} after | {yes(min(fds) == max(fds))} |"])


def threads(out, md):
    r = [x for x in rows(out, "threads") if x.get("kind") == "point"]
    if not r:
        return
    ours = sorted([x for x in r if x["side"] == "ours"], key=lambda x: x["threads"])
    floor = {x["threads"]: x for x in r if x["side"] == "floor"}
    svg(os.path.join(out, "threads.svg"), "Sync sends against sending threads", "threads",
        "TPS / 1000, CPU µs per message", [
            ("TPS / 1000, ours", [(x["threads"], x["tps"] / 1000) for x in ours]),
            ("TPS / 1000, floor", [(t, x["tps"] / 1000) for t, x in sorted(floor.items())]),
            ("CPU µs/msg, ours", [(x["threads"], x["cpu_us_per_msg"]) for x in ours]),
            ("CPU µs/msg, floor", [(t, x["cpu_us_per_msg"]) for t, x in sorted(floor.items())])],
        logx=True)
    md += ["## Sending threads", "",
           "| threads | TPS ours | TPS floor | p50 ms ours / floor | p99 ms ours / floor | "
           "CPU µs/msg ours | floor | ours ÷ floor | peak RSS MiB ours / floor |",
           "|---:|---:|---:|---|---|---:|---:|---:|---|"]
    ratios = []
    for x in ours:
        f = floor.get(x["threads"])
        ratio = round(x["cpu_us_per_msg"] / f["cpu_us_per_msg"], 2) if f and f["cpu_us_per_msg"] else None
        if ratio is not None:
            ratios.append(ratio)
        md.append(f"| {x['threads']} | {x['tps']:,.0f} | {f['tps']:,.0f} | {x['p50']} / {f['p50']} | "
                  f"{x['p99']} / {f['p99']} | {x['cpu_us_per_msg']} | {f['cpu_us_per_msg']} | {ratio} | "
                  f"{x['rss_kib'] / 1024:.1f} / {f['rss_kib'] / 1024:.1f} |" if f else
                  f"| {x['threads']} | {x['tps']:,.0f} | – | {x['p50']} / – | {x['p99']} / – | "
                  f"{x['cpu_us_per_msg']} | – | – | {x['rss_kib'] / 1024:.1f} / – |")
    best = max(ours, key=lambda x: x["tps"])
    cpu = [x["cpu_us_per_msg"] for x in ours]
    md += ["", "| expectation | criterion | measured | met |", "|---|---|---|---|",
           f"| CPU per message does not grow with threads | max ≤ 1.5 × the value at 1 thread | "
           f"{cpu[0]} at 1 thread, {min(cpu)}–{max(cpu)} | {yes(max(cpu) <= 1.5 * cpu[0])} |",
           f"| near the floor at every count | CPU ≤ 2 × the floor's at the same count | "
           f"{min(ratios) if ratios else '–'}–{max(ratios) if ratios else '–'} × | "
           f"{yes(bool(ratios) and max(ratios) <= 2)} |",
           f"| throughput does not collapse | TPS at the most threads ≥ 0.8 × the best | "
           f"best {best['tps']:,.0f} at {best['threads']}, {ours[-1]['tps']:,.0f} at {ours[-1]['threads']} | "
           f"{yes(ours[-1]['tps'] >= 0.8 * best['tps'])} |",
           "", "![threads](threads.svg)", ""]


def topics(out, md):
    r = rows(out, "topics")
    idle = sorted([x for x in r if x.get("kind") == "idle"], key=lambda x: x["topics"])
    if not idle:
        return
    rep = {x["topics"]: x["routes"] for x in r if x.get("kind") == "republished"}
    create = {x["topics"]: x for x in r if x.get("kind") == "create"}
    svg(os.path.join(out, "topics.svg"), "Idle cost per second against topics (1 s refresh and heartbeat)",
        "topics", "per second", [
            ("CPU ms", [(x["topics"], x["cpu_ms_per_s"]) for x in idle]),
            ("TCP KB sent", [(x["topics"], x["tcp_sent_bytes_per_s"] / 1000) for x in idle]),
            ("TCP KB received", [(x["topics"], x["tcp_received_bytes_per_s"] / 1000) for x in idle])],
        logx=True, logy=True)
    md += ["## Topics", "",
           "One producer (one message sent to each topic) and one push consumer subscribed to every "
           "topic, on one client instance, route refresh and heartbeat every second, idle window.", "",
           "| topics | create s | CPU ms/s | CPU µs/s per topic | TCP sent B/s | TCP received B/s "
           "| route rounds/s | heartbeats/s | routes re-published |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for x in idle:
        n = x["topics"]
        c = create.get(n, {})
        md.append(f"| {n:,} | {c.get('seconds', '-')} | {x['cpu_ms_per_s']:.1f} | "
                  f"{x['cpu_ms_per_s'] * 1000 / n:.1f} | {x['tcp_sent_bytes_per_s']:,.0f} | "
                  f"{x['tcp_received_bytes_per_s']:,.0f} | {x.get('route_rounds_per_s', '-')} | "
                  f"{x.get('heartbeats_per_s', '-')} | {rep.get(n, '-')} |")
    hi = idle[-1]
    # The reference is the smallest point from 100 topics on (below, fixed costs dominate
    # and a short window may read 0 CPU ticks), never the largest point itself.
    lo = next((x for x in idle[:-1] if x["topics"] >= 100), idle[0])
    # A window with no CPU tick at the reference (10 ms ticks, few topics) gives no ratio.
    ratio = ((hi["cpu_ms_per_s"] / hi["topics"]) / (lo["cpu_ms_per_s"] / lo["topics"])
             if lo["cpu_ms_per_s"] > 0 else None)
    bratio = (hi["tcp_received_bytes_per_s"] / hi["topics"]) / max(lo["tcp_received_bytes_per_s"] / lo["topics"], 1e-9)
    cpu_text = f"CPU {ratio:.2f} ×" if ratio is not None else f"CPU not measured at {lo['topics']:,} (0 ticks)"
    md += ["", "| expectation | criterion | measured | met |", "|---|---|---|---|",
           f"| linear in topics | CPU and bytes per topic at {hi['topics']:,} topics ≤ 1.5 × at {lo['topics']:,} | "
           f"{cpu_text}, received bytes {bratio:.2f} × | {yes((ratio is None or ratio <= 1.5) and bratio <= 1.5)} |",
           f"| an unchanged route is not re-published | no \"route … changed\" in the idle window | "
           f"{sum(v for v in rep.values())} | {yes(rep and not any(rep.values()))} |"]
    # Route queries are sent one after another on the one timer thread (as in Java): past
    # some number of topics a round outlasts the interval and fewer rounds run.
    timed = [x for x in idle if "route_rounds_per_s" in x]
    if timed:
        late = [x for x in timed if x["route_rounds_per_s"] < 0.8 / x["interval_s"]]
        measured = ", ".join(f"{x['topics']:,}: {x['route_rounds_per_s']}" for x in timed)
        md.append(f"| a route round within its interval | route rounds/s ≥ 0.8 / interval | "
                  f"{measured} | {yes(not late)} |")
    md += ["", "![topics](topics.svg)", ""]


def clients(out, md):
    r = [x for x in rows(out, "clients") if x.get("kind") == "step"]
    if not r:
        return
    md += ["## Clients", "",
           "| instances | producers | push consumers | threads | consume threads | RSS MiB |",
           "|---|---:|---:|---:|---:|---:|"]
    series = []
    for mode in ("shared", "separate"):
        s = [x for x in r if x["instances"] == mode]
        for x in s:
            md.append(f"| {mode} | {x['producers']} | {x['consumers']} | {x['threads']} | "
                      f"{x['consume_threads']} | {x['rss_kib'] / 1024:.1f} |")
        series.append((f"threads, {mode}", [(x["producers"] + x["consumers"], x["threads"]) for x in s if x["producers"] + x["consumers"]]))
    svg(os.path.join(out, "clients.svg"), "Threads against clients (producers + push consumers)",
        "clients", "threads", series, logx=True, logy=True)
    md += ["", "| expectation | criterion | measured | met |", "|---|---|---|---|"]
    for mode in ("shared", "separate"):
        s = [x for x in r if x["instances"] == mode]
        p = [x for x in s if x["consumers"] == 0 or True]
        # Steps after adding producers only, and after adding consumers.
        prod = [(a, b) for a, b in zip(s, s[1:]) if b["producers"] > a["producers"]]
        cons = [(a, b) for a, b in zip(s, s[1:]) if b["consumers"] > a["consumers"]]
        if not prod or not cons:
            continue
        tp = [(b["threads"] - a["threads"]) / (b["producers"] - a["producers"]) for a, b in prod[1:]] or [0]
        tc = [(b["threads"] - a["threads"] - (b["consume_threads"] - a["consume_threads"])) /
              (b["consumers"] - a["consumers"]) for a, b in cons]
        cc = [(b["consume_threads"] - a["consume_threads"]) / (b["consumers"] - a["consumers"]) for a, b in cons]
        rc = [(b["rss_kib"] - a["rss_kib"]) / (b["consumers"] - a["consumers"]) for a, b in cons]
        flat = max(tp) <= 0.5 if mode == "shared" else True
        md.append(f"| {mode} instance: a small constant per client | producers after the first add no "
                  f"thread (shared); threads per consumer the same at every step | threads per extra producer "
                  f"{', '.join(f'{v:.1f}' for v in tp)}; per consumer {', '.join(f'{v:.1f}' for v in tc)} "
                  f"+ consume threads {', '.join(f'{v:.0f}' for v in cc)}; RSS KiB per consumer "
                  f"{', '.join(f'{v:.0f}' for v in rc)} | {yes(flat and max(cc) - min(cc) <= 1)} |")
    md += ["", "![clients](clients.svg)", ""]


def size(out, md):
    r = [x for x in rows(out, "size") if x.get("kind") == "point"]
    if not r:
        return
    off = sorted([x for x in r if x["compression"] == "off"], key=lambda x: x["size"])
    on = sorted([x for x in r if x["compression"] == "on"], key=lambda x: x["size"])
    svg(os.path.join(out, "size.svg"), "Sync sends (8 threads) against message size", "body bytes",
        "MB/s, CPU ms per MB", [
            ("MB/s, compression off", [(x["size"], x["mb_per_s"]) for x in off]),
            ("MB/s, compression on", [(x["size"], x["mb_per_s"]) for x in on]),
            ("CPU ms/MB, off", [(x["size"], x["cpu_ms_per_mb"]) for x in off]),
            ("CPU ms/MB, on", [(x["size"], x["cpu_ms_per_mb"]) for x in on])], logx=True, logy=True)
    md += ["## Message size", "",
           "| size | compression | msg/s | MB/s | CPU ms/MB | bytes written per body byte | failed |",
           "|---:|---|---:|---:|---:|---:|---:|"]
    for x in sorted(r, key=lambda x: (x["size"], x["compression"])):
        md.append(f"| {x['size']:,} | {x['compression']} | {x['msgs_per_s']:,.0f} | {x['mb_per_s']:.1f} | "
                  f"{x['cpu_ms_per_mb']} | {x['written_per_body_byte']} | {x['failed']} |")
    md += ["", "| expectation | criterion | measured | met |", "|---|---|---|---|"]
    if len(off) >= 2:
        best = max(off, key=lambda x: x["mb_per_s"])
        md.append(f"| MB/s rises then flattens | the best MB/s at ≥ 256 KiB, and the largest within 0.5 × of it | "
                  f"best {best['mb_per_s']:.1f} MB/s at {best['size']:,} B, largest {off[-1]['mb_per_s']:.1f} | "
                  f"{yes(best['size'] >= 262144 and off[-1]['mb_per_s'] >= best['mb_per_s'] / 2)} |")
        md.append(f"| CPU per MB falls with size | CPU/MB at the largest ≤ 0.1 × at the smallest | "
                  f"{off[0]['cpu_ms_per_mb']} → {off[-1]['cpu_ms_per_mb']} ms/MB | "
                  f"{yes((off[-1]['cpu_ms_per_mb'] or 0) <= 0.1 * (off[0]['cpu_ms_per_mb'] or 0))} |")
    big = [(a, b) for a in off for b in on if a["size"] == b["size"] and a["size"] > 4096]
    if big:
        md.append("| compression costs CPU and saves bytes | over 4 KiB: more CPU/MB and fewer bytes written | "
                  + ", ".join(f"{a['size']:,} B: {a['cpu_ms_per_mb']}→{b['cpu_ms_per_mb']} ms/MB, "
                              f"{a['written_per_body_byte']}→{b['written_per_body_byte']} B/B" for a, b in big)
                  + f" | {yes(all(b['cpu_ms_per_mb'] > a['cpu_ms_per_mb'] and b['written_per_body_byte'] < a['written_per_body_byte'] for a, b in big))} |")
    md += ["", "![size](size.svg)", ""]


def queues(out, md):
    r = [x for x in rows(out, "queues") if x.get("kind") == "drain"]
    if not r:
        return
    md += ["## Queues", "",
           "| queues | backlog | s | RSS before MiB | RSS growth MiB | bound MiB | peak threads | CPU µs/msg |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for x in r:
        md.append(f"| {x['queues']} | {x['backlog']:,} | {x['seconds']} | {x['rss_before_kib'] / 1024:.1f} | "
                  f"{x['rss_growth_kib'] / 1024:.1f} | {x['bound_kib'] / 1024:.1f} | {x['peak_threads']} | "
                  f"{x['cpu_us_per_msg']} |")
    # Cached messages cost more than their bodies (headers, properties, the pull buffer):
    # the criterion allows twice the bound plus 16 MiB of fixed cost.
    within = all(x["rss_growth_kib"] <= 2 * x["bound_kib"] + 16 * 1024 for x in r)
    backlog = r[0]["backlog"]
    same = [x for x in r if x["backlog"] == backlog]
    cpu = [x["cpu_us_per_msg"] for x in same if x["cpu_us_per_msg"]]
    md += ["", "| expectation | criterion | measured | met |", "|---|---|---|---|",
           f"| memory bounded by the pull thresholds (1,000 messages / 100 MiB per queue) | RSS growth ≤ 2 × "
           f"min(backlog, queues × 1,000) × size + 16 MiB | max growth "
           f"{max(x['rss_growth_kib'] for x in r) / 1024:.1f} MiB | {yes(within)} |",
           f"| CPU per message flat in queues | max ≤ 2 × min at a backlog of {backlog:,} | "
           f"{min(cpu):.1f}–{max(cpu):.1f} µs/msg | {yes(max(cpu) <= 2 * min(cpu))} |" if cpu else "",
           ""]
    svg(os.path.join(out, "queues.svg"), "Push drain against queues", "queues", "RSS growth MiB, CPU µs/msg",
        [("RSS growth MiB", [(x["queues"], x["rss_growth_kib"] / 1024) for x in same]),
         ("CPU µs/msg", [(x["queues"], x["cpu_us_per_msg"]) for x in same])], logx=True)
    md += ["![queues](queues.svg)", ""]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "target/scaling"
    md = ["# How cost grows", ""]
    for f in (soak, threads, topics, clients, size, queues):
        f(out, md)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
