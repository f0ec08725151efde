"""Sends through the Python package from one Python thread: WARMUP, then COUNT measured.

    NAMESRV_ADDR=... python3 produce_bench.py TOPIC COUNT WARMUP SIZE [MODE] [ARG]

MODE ``sync`` (the default) waits for each acknowledgement; ``async`` keeps up to ARG
(default 1024) sends in flight with callbacks, as ``rmq bench produce --mode async
--inflight ARG`` does; ``batch`` sends ARG (default 32) messages per ``send_batch``, as
``rmq bench produce --batch ARG``. Prints one line: the TPS and the process's CPU time
per message in the measured phase.
"""
import os
import resource
import sys
import threading
import time

import rocketmq_blocking as rmq


def cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def run_sync(p: rmq.Producer, msg: rmq.Message, n: int) -> None:
    for _ in range(n):
        p.send(msg)


def run_batch(p: rmq.Producer, msg: rmq.Message, n: int, size: int) -> None:
    batch = [msg] * size
    for _ in range(n // size):
        p.send_batch(batch)


def run_async(p: rmq.Producer, msg: rmq.Message, n: int, inflight: int) -> None:
    window = threading.BoundedSemaphore(inflight)
    done = threading.Event()
    left = [n]
    failed = [0]
    lock = threading.Lock()

    def callback(result, error) -> None:
        window.release()
        with lock:
            if error is not None:
                failed[0] += 1
            left[0] -= 1
            if left[0] == 0:
                done.set()

    for _ in range(n):
        window.acquire()
        p.send_async(msg, callback)
    done.wait()
    if failed[0]:
        sys.exit(f"{failed[0]} async sends failed")


topic, count, warmup, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
mode = sys.argv[5] if len(sys.argv) > 5 else "sync"
arg = int(sys.argv[6]) if len(sys.argv) > 6 else (1024 if mode == "async" else 32)
body = b"x" * size
with rmq.Producer("ffi_bench_py", namesrv=os.environ["NAMESRV_ADDR"]) as p:
    msg = rmq.Message(topic, body)

    def go(n: int) -> None:
        if mode == "sync":
            run_sync(p, msg, n)
        elif mode == "async":
            run_async(p, msg, n, arg)
        elif mode == "batch":
            run_batch(p, msg, n, arg)
        else:
            sys.exit(f"unknown mode {mode}")

    go(warmup)
    t0, c0 = time.monotonic(), cpu()
    go(count)
    secs, cpus = time.monotonic() - t0, cpu() - c0
print(f"python {mode} tps={count / secs:.0f} cpu_us_per_msg={cpus * 1e6 / count:.1f}")
