#!/usr/bin/env python3
"""The reporting half of benches/compare-java.sh (python3 standard library only).

  compare_report.py header                 the column line of rows.tsv
  compare_report.py row --base B ...       turns one client run (B.out: the client's JSON
                                           summary as its last JSON line, B.time: GNU time's
                                           "%U %S %M %e") into a row of rows.tsv and a console line
  compare_report.py summary --out DIR      medians and ratios (Rust/Java 5.3.3; with TLS runs
                                           also TLS/plain; every side with rust / best peer
                                           against the issue's targets) on stdout and in
                                           DIR/summary.md, the SVG plot of the sync workloads
                                           (plain sides); exit status 1 if any row failed
                                           ("not supported" rows are not failures)
  compare_report.py acked FILE             messages acknowledged in a run's output
  compare_report.py brokers < ROUTE_JSON   the broker addresses of a route
"""

import argparse
import html
import json
import math
import statistics
import sys
from pathlib import Path

COLUMNS = ["workload", "threads", "pair", "side", "warmup", "messages", "expected", "tps",
           "p50_ms", "p99_ms", "max_ms", "cpu_s", "cpu_us_per_msg", "cpu_total_s", "rss_MiB",
           "wall_s", "first_ms", "duplicates", "status"]
# (column, printf format): every figure summarised; TPS is the only one where higher is better.
# tps, the latencies, cpu_s and cpu_us_per_msg are of the measured phase (producers: after the
# warm-up; cpu_s as the client reads it from the OS at the phase's start and end, consumers:
# not measured); cpu_total_s, rss, wall and first_ms are of the whole process.
FIGURES = [("tps", "{:.0f}"), ("p50_ms", "{:.3f}"), ("p99_ms", "{:.3f}"), ("max_ms", "{:.3f}"),
           ("cpu_s", "{:.2f}"), ("cpu_us_per_msg", "{:.1f}"), ("cpu_total_s", "{:.2f}"),
           ("rss_MiB", "{:.0f}"), ("wall_s", "{:.2f}"), ("first_ms", "{:.0f}"),
           ("duplicates", "{:.0f}")]
ORDER = ["sync1", "sync8", "sync64", "sync64ab", "async", "batch", "oneway", "push", "litepull"]
CONSUMERS = {"push", "litepull"}
SYNC = {"sync1": 1, "sync8": 8, "sync64": 64}
# The plain sides of compare-java.sh in run order, their names in the plot and colours.
PEERS = {"java": ("Java rocketmq-client 5.3.3", "#d1495b"),
         "java49": ("Java rocketmq-client 4.9.8", "#edae49"),
         "rust": ("Rust rocketmq-blocking", "#00798c"),
         "rust-async": ("Rust rocketmq-client-rust", "#66a182"),
         "go": ("Go rocketmq-client-go", "#6a4c93")}
NA = "NA"
OK = "ok"
# The status of a run whose client lacks the capability (exit 3, {"unsupported": ...}).
UNSUPPORTED = "not supported"
# The targets for rocketmq-blocking against the best other client that ran it:
# figure -> (best is the highest?, rust/best must be >= (True) or <= (False) this).
# Consumers have no measured-phase CPU; their whole-process CPU stands in for it.
TARGETS = {"tps": (True, 1.3), "p99_ms": (False, 0.8), "cpu_us_per_msg": (False, 0.5),
           "rss_MiB": (False, 0.5)}
CONSUMER_CPU = "cpu_total_s"


def cmd_header(_args):
    print("\t".join(COLUMNS))


def last_json(path):
    """The last line of `path` that parses as a JSON object, or {}."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return {}


def gnu_time(path):
    """user, sys, max RSS KiB, elapsed from the last line of a `/usr/bin/time -f '%U %S %M %e'`
    file (it writes "Command exited with non-zero status N" above it on failure)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        parts = line.split()
        try:
            if len(parts) == 4:
                return [float(p) for p in parts]
        except ValueError:
            continue
    return None


def fmt(value, spec):
    return NA if value is None else spec.format(value)


def cmd_row(a):
    s = last_json(a.base + ".out")
    t = gnu_time(a.base + ".time")
    messages = int(s.get("messages") or 0)
    failures = int(s.get("failures") or 0)
    lat = s.get("latencyMs") or {}
    warm = s.get("warmup") or {}
    consumer = a.workload in CONSUMERS
    first_us = s.get("firstAckEpochUs") or s.get("firstMessageEpochUs")
    values = {
        "tps": s.get("tps"),
        # A consumer's latency is the backlog's age (end to end from bornTimestamp), which
        # says nothing about the client; it is left out.
        "p50_ms": None if consumer else lat.get("p50"),
        "p99_ms": None if consumer else lat.get("p99"),
        "max_ms": None if consumer else lat.get("max"),
        "cpu_s": (s.get("measuredCpuSeconds") or {}).get("total"),
        "cpu_us_per_msg": s.get("cpuUsPerMsg"),
        "cpu_total_s": t[0] + t[1] if t else None,
        "rss_MiB": t[2] / 1024 if t else None,
        "wall_s": t[3] if t else None,
        "first_ms": first_us / 1000 - a.t0_ns / 1e6 if first_us else None,
        "duplicates": s.get("duplicates") if consumer else None,
    }
    warm_acked = int(warm.get("messages") or 0)
    failures += int(warm.get("failures") or 0)
    ok = a.exit == 0 and messages == a.expect and warm_acked == a.warmup and failures == 0
    if a.exit == 3 and s.get("unsupported"):
        # The peer contract: a capability the client does not have. No figures.
        status = UNSUPPORTED
        values = dict.fromkeys(values)
    elif ok:
        status = OK
    else:
        status = (
            f"FAILED(exit {a.exit}, {messages}/{a.expect} {'consumed' if consumer else 'acked'}"
            f"{f', warm-up {warm_acked}/{a.warmup} acked' if a.warmup else ''}"
            f"{f', {failures} failed' if failures else ''}; see {a.base}.err)")
    cells = [a.workload, str(a.threads), str(a.pair), a.side, str(a.warmup), str(messages),
             str(a.expect)]
    cells += [fmt(values[c], spec) for c, spec in FIGURES] + [status]
    with open(a.rows, "a") as f:
        f.write("\t".join(cells) + "\n")
    v = dict(zip(COLUMNS, cells))
    if status == UNSUPPORTED:
        status += f" ({s['unsupported']})"
    print(f"{a.workload:<8} pair {a.pair} {a.side:<10}  tps {v['tps']:>8}  p50 {v['p50_ms']:>8}"
          f"  p99 {v['p99_ms']:>9}  max {v['max_ms']:>9} ms  cpu {v['cpu_s']:>6} s"
          f" {v['cpu_us_per_msg']:>6} us/msg (total {v['cpu_total_s']:>6} s)"
          f"  rss {v['rss_MiB']:>4} MiB  wall {v['wall_s']:>6} s  first {v['first_ms']:>5} ms"
          f"  dup {v['duplicates']:>3}  {status}", flush=True)


def cmd_acked(a):
    """Messages a run got acknowledged, from its JSON summary (0 without one)."""
    print(int(last_json(a.file).get("messages") or 0))


def cmd_brokers(_args):
    """Every broker address of the route JSON (`rmq route TOPIC`) on stdin, one a line."""
    route = json.load(sys.stdin)
    for broker in route.get("brokerDatas", []):
        for addr in (broker.get("brokerAddrs") or {}).values():
            print(addr)


def read_rows(path):
    lines = Path(path).read_text().splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:] if line.strip()]


def number(cell):
    try:
        return float(cell)
    except (TypeError, ValueError):
        return None


def median_of(rows, workload, side, column):
    """Median over the runs that succeeded; None when there is none."""
    vals = [number(r[column]) for r in rows
            if r["workload"] == workload and r["side"] == side and r["status"] == "ok"]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarise(rows, base="java", other="rust"):
    """(workload, figure, base median, other median, ratio other/base) for every figure
    measured on either side."""
    table = []
    workloads = [w for w in ORDER if any(r["workload"] == w for r in rows)]
    for w in workloads:
        for column, spec in FIGURES:
            j = median_of(rows, w, base, column)
            r = median_of(rows, w, other, column)
            if j is None and r is None:
                continue
            ratio = f"{r / j:.2f}" if j and r is not None else NA
            table.append((w, column, fmt(j, spec), fmt(r, spec), ratio))
    return table


# The comparisons summary makes, when both sides ran: (base, other, title). The TLS sides
# (compare-java.sh TLS=both|only) are the same clients over TLS against the same broker.
COMPARISONS = [
    ("java", "rust", "Java client vs rocketmq-blocking"),
    ("java-tls", "rust-tls", "Over TLS: Java client vs rocketmq-blocking"),
    ("rust", "rust-tls", "The cost of TLS for rocketmq-blocking (TLS / plain)"),
    ("java", "java-tls", "The cost of TLS for the Java client (TLS / plain)"),
]


def side_cell(rows, workload, side, column, spec):
    """(median or None, the table cell) of one side's runs of a workload: the median of the
    successful runs, else why there is none."""
    mine = [r for r in rows if r["workload"] == workload and r["side"] == side]
    value = median_of(rows, workload, side, column)
    if value is not None:
        return value, fmt(value, spec)
    if not mine:
        return None, "-"
    if any(r["status"] == OK for r in mine):
        return None, NA
    if all(r["status"] == UNSUPPORTED for r in mine):
        return None, UNSUPPORTED
    return None, "failed"


def target_of(workload, column):
    """The issue's target for a figure of a workload, or None: (higher is better, bound)."""
    if workload in CONSUMERS:
        if column == CONSUMER_CPU:
            return TARGETS["cpu_us_per_msg"]
        if column == "cpu_us_per_msg":
            return None
    return TARGETS.get(column)


def peer_table(rows, workload, sides, us="rust"):
    """Rows [figure, cell per side..., best peer, us/best, target] of one workload: the
    medians of every side, and how `us` compares with the best of the other sides that
    succeeded (highest TPS, lowest everything else), against the issue's targets."""
    table = []
    for column, spec in FIGURES:
        cells = {side: side_cell(rows, workload, side, column, spec) for side in sides}
        if column != "tps" and all(v is None for v, _ in cells.values()):
            continue
        higher = column == "tps"
        others = [(v, side) for side, (v, _) in cells.items() if side != us and v is not None]
        # Ties go to the first side in run order.
        best = (max if higher else min)(others, key=lambda o: o[0], default=None)
        ours = cells[us][0] if us in cells else None
        ratio = ours / best[0] if best and ours is not None and best[0] else None
        target = target_of(workload, column)
        verdict = ""
        if target:
            want = f"{'>=' if target[0] else '<='} {target[1]}"
            if ratio is None:
                verdict = f"{want}: {NA}"
            else:
                met = ratio >= target[1] if target[0] else ratio <= target[1]
                verdict = f"{want}: {'met' if met else 'not met'}"
        table.append([column] + [cells[side][1] for side in sides]
                     + [best[1] if best else NA, fmt(ratio, "{:.2f}"), verdict])
    return table


def peers_section(rows, sides):
    """The markdown (and console text) of the every-side comparison: a table per workload,
    then the targets of every workload at a glance."""
    workloads = [w for w in ORDER if any(r["workload"] == w for r in rows)]
    head = ["figure"] + sides + ["best peer", "rust / best", "target"]
    md = ["", "## Every client side by side", "",
          "Medians over successful runs of each side. \"best peer\" is the best of the "
          "other sides that succeeded (highest TPS, lowest everything else); \"rust / best\" "
          "is rocketmq-blocking's median over it. The issue's targets: TPS >= 1.3x best, p99 "
          "<= 0.8x, CPU per message <= 0.5x (consumers: cpu_total_s, the whole process), RSS "
          "<= 0.5x. \"not supported\": the client lacks that capability; \"failed\": no run "
          "of the side succeeded; \"-\": the side did not run."]
    glance = {}
    for w in workloads:
        table = peer_table(rows, w, sides)
        threads = next(r["threads"] for r in rows if r["workload"] == w)
        threads = f"{threads} {'consume ' if w == 'push' else ''}thread{'' if threads == '1' else 's'}"
        md += ["", f"### {w} ({threads})", "", "| " + " | ".join(head) + " |",
               "|---|" + "---:|" * (len(head) - 2) + "---|"]
        md += ["| " + " | ".join(line) + " |" for line in table]
        print(f"{w} ({threads}): medians of every side")
        print(f"{'figure':<15}" + "".join(f"{h:>15}" for h in head[1:-1]) + "  target")
        for line in table:
            print(f"{line[0]:<15}" + "".join(f"{c:>15}" for c in line[1:-1]) + f"  {line[-1]}")
        print()
        for line in table:
            if target_of(w, line[0]):
                glance.setdefault(w, {})["cpu" if "cpu" in line[0] else line[0]] = \
                    f"{line[-2]} ({line[-1].split(': ')[1]})"
    columns = ["tps", "p99_ms", "cpu", "rss_MiB"]
    md += ["", "### Targets at a glance (rust / best peer)", "",
           "| workload | TPS (>= 1.3) | p99 (<= 0.8) | CPU per message (<= 0.5) | RSS (<= 0.5) |",
           "|---|---|---|---|---|"]
    md += [f"| {w} | " + " | ".join(glance[w].get(c, "") for c in columns) + " |"
           for w in workloads if w in glance]
    return md


def cmd_summary(a):
    out = Path(a.out)
    rows = read_rows(out / "rows.tsv")
    meta = (out / "meta.txt").read_text().splitlines() if (out / "meta.txt").exists() else []
    sides = {r["side"] for r in rows}
    failed = [r for r in rows if r["status"] not in (OK, UNSUPPORTED)]

    md = ["# rocketmq-blocking side by side with other clients", ""]
    md += [f"- {line}" for line in meta]
    md += ["", "Medians over successful runs. Ratio = second column / first: for TPS higher "
           "is better, for the rest lower is better. Producers send a warm-up first (same "
           "producer, threads and window); tps, latency (per send call), cpu_s (user+sys CPU "
           "seconds the client reads from the OS at the start and end of that phase) and "
           "cpu_us_per_msg (cpu_s per message, µs) are of the measured phase after it "
           "(consumers: not measured). cpu_total_s is the whole client process's CPU (GNU "
           "time), rss_MiB its peak; wall_s and first_ms (first acknowledgement, of the "
           "warm-up if any, or first message) count from just before exec (JVM start "
           "included); duplicates are redeliveries of an offset."]
    for base, other, title in COMPARISONS:
        if base not in sides or other not in sides:
            continue
        table = summarise(rows, base, other)
        print(f"{title}: medians over successful runs (ratio = {other} / {base}; for tps "
              "higher is better, for the rest lower is better)")
        print(f"{'workload':<9}{'figure':<15}{base:>12}{other:>12}{'ratio':>8}")
        for w, fig, j, r, ratio in table:
            print(f"{w:<9}{fig:<15}{j:>12}{r:>12}{ratio:>8}")
        print()
        md += ["", f"## {title}", "",
               f"| workload | figure | {base} | {other} | {other}/{base} |",
               "|---|---|---:|---:|---:|"]
        md += [f"| {w} | {fig} | {j} | {r} | {ratio} |" for w, fig, j, r, ratio in table]
    peers = [side for side in PEERS if side in sides]
    if "rust" in peers and len(peers) > 1:
        md += peers_section(rows, peers)
    unsupported = sorted({(r["workload"], r["side"]) for r in rows if r["status"] == UNSUPPORTED},
                         key=lambda ws: (ORDER.index(ws[0]), ws[1]))
    if unsupported:
        md += ["", "Not supported by the client (the run exited 3; see runs/WORKLOAD-PAIR-SIDE.out): "
               + ", ".join(f"{w} {side}" for w, side in unsupported) + "."]
    if failed:
        md += ["", "Failed runs:", ""]
        md += [f"- {r['workload']} pair {r['pair']} {r['side']}: {r['status']}" for r in failed]
    (out / "summary.md").write_text("\n".join(md) + "\n")

    plotted = plot(rows, out / "throughput-vs-threads.svg")
    print(f"rows: {out / 'rows.tsv'}")
    print(f"summary: {out / 'summary.md'}")
    if plotted:
        print(f"plot: {plotted}")
    if failed:
        for r in failed:
            print(f"FAILED: {r['workload']} pair {r['pair']} {r['side']}: {r['status']}")
        return 1
    return 0


def nice_step(top, ticks=5):
    """A 1-2-5 step that divides [0, top] into about `ticks` intervals."""
    if top <= 0:
        return 1.0
    raw = top / ticks
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def linear_axis(vals):
    """(to_fraction, ticks) of a linear axis from 0 to a round number above every value."""
    top = max(vals, default=1) * 1.05
    step = nice_step(top)
    ymax = step * math.ceil(top / step)
    ticks = [i * step for i in range(int(round(ymax / step)) + 1)]
    return (lambda v: v / ymax), ticks


def log_axis(vals):
    """(to_fraction, ticks) of a log axis over whole decades around the (positive) values."""
    vals = [v for v in vals if v > 0] or [1.0]
    lo = math.floor(math.log10(min(vals)))
    hi = max(math.ceil(math.log10(max(vals))), lo + 1)
    ticks = [10.0 ** e for e in range(lo, hi + 1)]
    return (lambda v: (math.log10(max(v, 10.0 ** lo)) - lo) / (hi - lo)), ticks


def plot(rows, path):
    """TPS (linear axis) and p99 (log axis) against thread count (sync1/8/64), a line per
    plain side (PEERS), medians as lines and every run as a dot. Returns the path written, or None when no
    sync workload ran."""
    points = [(SYNC[r["workload"]], r["side"], number(r["tps"]), number(r["p99_ms"]))
              for r in rows if r["workload"] in SYNC and r["status"] == "ok"]
    threads = sorted({p[0] for p in points})
    if not threads:
        return None
    width, height = 980, 450
    panel_w, panel_h, top, left_pad = 400, 290, 95, 80
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="16">Sync send: '
           'throughput and p99 latency vs threads (1 KiB bodies; lines = medians, dots = '
           'runs)</text>']
    drawn = [side for side in PEERS if any(p[1] == side for p in points)]
    for i, side in enumerate(drawn):
        name, color = PEERS[side]
        x = width / 2 - len(drawn) * 95 + i * 190
        svg.append(f'<rect x="{x}" y="42" width="14" height="4" fill="{color}"/>')
        svg.append(f'<text x="{x + 20}" y="48">{html.escape(name)}</text>')

    def x_of(t, x0):
        lo, hi = math.log2(threads[0]), math.log2(threads[-1])
        frac = 0.5 if hi == lo else (math.log2(t) - lo) / (hi - lo)
        return x0 + 30 + frac * (panel_w - 60)

    panels = [(2, "throughput (msg/s)", linear_axis), (3, "p99 latency (ms, log scale)", log_axis)]
    for panel, (index, label, axis) in enumerate(panels):
        x0 = left_pad + panel * (panel_w + 90)
        to_fraction, ticks = axis([p[index] for p in points if p[index] is not None])

        def y_of(v):
            return top + panel_h - to_fraction(v) * panel_h

        svg.append(f'<rect x="{x0}" y="{top}" width="{panel_w}" height="{panel_h}" '
                   'fill="none" stroke="#444"/>')
        for tick in ticks:
            y = y_of(tick)
            svg.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + panel_w}" y2="{y:.1f}" '
                       'stroke="#ddd"/>')
            svg.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}</text>')
        for t in threads:
            x = x_of(t, x0)
            svg.append(f'<text x="{x:.1f}" y="{top + panel_h + 18}" text-anchor="middle">{t}</text>')
        svg.append(f'<text x="{x0 + panel_w / 2}" y="{top + panel_h + 40}" '
                   'text-anchor="middle">sending threads</text>')
        svg.append(f'<text x="{x0 + panel_w / 2}" y="{top - 10}" text-anchor="middle" '
                   f'font-size="14">{html.escape(label)}</text>')
        for side in drawn:
            color = PEERS[side][1]
            line = []
            for t in threads:
                runs = [p[index] for p in points
                        if p[0] == t and p[1] == side and p[index] is not None]
                for v in runs:
                    svg.append(f'<circle cx="{x_of(t, x0):.1f}" cy="{y_of(v):.1f}" r="3" '
                               f'fill="{color}" fill-opacity="0.35"/>')
                if runs:
                    line.append((x_of(t, x0), y_of(statistics.median(runs))))
            if line:
                coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in line)
                svg.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                           'stroke-width="2"/>')
                svg += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{color}"/>'
                        for x, y in line]
    svg.append("</svg>")
    path.write_text("\n".join(svg) + "\n")
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("header")
    r = sub.add_parser("row")
    for name in ("workload", "side", "base", "rows"):
        r.add_argument(f"--{name}", required=True)
    for name in ("threads", "pair", "expect", "warmup", "exit", "t0-ns"):
        r.add_argument(f"--{name}", type=int, required=True)
    s = sub.add_parser("summary")
    s.add_argument("--out", required=True)
    sub.add_parser("acked").add_argument("file")
    sub.add_parser("brokers")
    a = p.parse_args()
    handlers = {"header": cmd_header, "row": cmd_row, "summary": cmd_summary,
                "acked": cmd_acked, "brokers": cmd_brokers}
    sys.exit(handlers[a.cmd](a) or 0)


if __name__ == "__main__":
    main()
