"""Sync sends from one Python thread through the package: WARMUP, then COUNT measured.

    NAMESRV_ADDR=... python3 produce_bench.py TOPIC COUNT WARMUP SIZE
"""
import os
import resource
import sys
import time

import rocketmq_blocking as rmq


def cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


topic, count, warmup, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
body = b"x" * size
with rmq.Producer("ffi_bench_py", namesrv=os.environ["NAMESRV_ADDR"]) as p:
    msg = rmq.Message(topic, body)
    for _ in range(warmup):
        p.send(msg)
    t0, c0 = time.monotonic(), cpu()
    for _ in range(count):
        p.send(msg)
    secs, cpus = time.monotonic() - t0, cpu() - c0
print(f"python tps={count / secs:.0f} cpu_us_per_msg={cpus * 1e6 / count:.1f}")
