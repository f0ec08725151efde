"""Medians of benches/floor-compare.sh output: python3 benches/floor_report.py FILE.

One line per workload and side (floor, before, after, the peer), then a table per workload
of floor / ours (after) / best peer with the ratios ours ÷ floor and ours ÷ peer. A drain's
figures are the drain alone where the side reports it (the floor: from the first pull;
`rmq bench consume`: drainTps and cpuUsPerMsg, from the first message); a peer consumer
reports TPS from its start and the CPU of its whole process (GNU time), so its drain row
includes its start-up."""
import json, sys, statistics, collections

rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    parts = line.split(' ', 3)
    if len(parts) < 4 or not parts[3].strip().startswith('{'):
        continue
    r, who, w, js = parts
    try:
        j = json.loads(js)
    except ValueError:
        continue
    if 'tps' not in j:
        continue  # a failed or unsupported run
    messages = max(1, j.get('messages') or 0)
    cpu = j.get('cpuUsPerMsg')
    if cpu is None and j.get('processCpuSeconds') is not None:
        cpu = j['processCpuSeconds'] * 1e6 / messages
    if cpu is None and 'cpuSeconds' in j:
        cpu = j['cpuSeconds']['total'] * 1e6 / messages
    rss = j.get('peakRssKiB') or j.get('processPeakRssKiB')
    lat = j.get('latencyMs') or {}
    tps = j.get('drainTps') or j['tps']
    rows[(w, who)].append((tps, lat.get('p50'), lat.get('p99'), cpu, rss))


def med(v, i):
    xs = [x[i] for x in v if x[i] is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec):
    return '-' if x is None else format(x, spec)


WORKLOADS = ['sync1', 'sync8', 'sync64', 'batch64', 'async', 'drain', 'drain-sizes', 'drain-lite', 'drain-push']
whos = sorted({who for (_, who) in rows}, key=lambda x: (['floor', 'before', 'after'] + [x]).index(x))
for w in WORKLOADS:
    for who in whos:
        v = rows.get((w, who))
        if not v:
            continue
        m = [med(v, i) for i in range(5)]
        print(f"{w:11} {who:16} tps {fmt(m[0], '9.0f')} p50 {fmt(m[1], '.3f')} p99 {fmt(m[2], '.3f')}"
              f" cpu {fmt(m[3], '.2f')} rss {fmt(m[4], '.0f')}  rounds tps={[round(x[0]) for x in v]}"
              f" cpu={[x[3] for x in v]}")

# Side by side: each of our rows against its floor and its best peer.
FLOOR_OF = {'drain-lite': 'drain', 'drain-push': 'drain'}


def ratio(a, b):
    return '-' if a is None or b in (None, 0) else f"{a / b:.2f}"


print()
print("| workload | figure | floor | ours | best peer | ours ÷ floor | ours ÷ peer |")
print("|---|---|---:|---:|---:|---:|---:|")
for w in ['sync1', 'sync8', 'sync64', 'batch64', 'async', 'drain-lite', 'drain-push']:
    ours = rows.get((w, 'after'))
    if not ours:
        continue
    floor = rows.get((FLOOR_OF.get(w, w), 'floor'), [])
    peers = [who for (pw, who) in rows if pw == w and who.startswith('peer:')]
    peer = rows.get((w, peers[0]), []) if peers else []
    name = peers[0][5:] if peers else '-'
    for label, i, spec in [('TPS', 0, '.0f'), ('p50 ms', 1, '.3f'), ('CPU µs/msg', 3, '.2f'),
                           ('peak RSS MiB', 4, '.1f')]:
        f, o, p = (med(v, i) if v else None for v in (floor, ours, peer))
        if i == 4:
            f, o, p = (None if x is None else x / 1024 for x in (f, o, p))
        if o is None or (i == 1 and w.startswith('drain')):
            continue  # a drain's latency is the backlog's age, nothing about the client
        print(f"| {w} | {label} | {fmt(f, spec)} | {fmt(o, spec)} | {fmt(p, spec)} ({name}) |"
              f" {ratio(o, f)} | {ratio(o, p)} |")
