"""Medians of benches/floor-compare.sh output: python3 benches/floor_report.py FILE."""
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
    cpu = j.get('cpuUsPerMsg')
    if cpu is None and 'cpuSeconds' in j:
        cpu = j['cpuSeconds']['total'] * 1e6 / max(1, j['messages'])
    lat = j.get('latencyMs', {'p50': 0, 'p99': 0})
    rows[(w, who)].append((j['tps'], lat['p50'], lat['p99'], cpu, j.get('peakRssKiB')))
for w in ['sync1', 'sync8', 'sync64', 'async', 'drain', 'drain-lite', 'drain-push']:
    for who in ['floor', 'before', 'after']:
        v = rows.get((w, who))
        if not v: continue
        med = [statistics.median(x[i] for x in v if x[i] is not None) for i in range(5)]
        print(f"{w:7} {who:7} tps {med[0]:9.0f} p50 {med[1]:.3f} p99 {med[2]:.3f} cpu {med[3]:.1f} rss {med[4]:.0f}  rounds tps={[round(x[0]) for x in v]} cpu={[x[3] for x in v]}")
