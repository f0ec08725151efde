"""The GIL is released while a call waits in the library: another Python thread keeps
ticking during a long poll and during a close that waits for a listener in flight."""

import threading
import time

import rocketmq_blocking as rmq
from conftest import unique, wait_for


def max_tick_gap(during):
    """Runs `during()` while another thread ticks every 10 ms; the longest gap between
    two ticks while it ran, in seconds."""
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    t = threading.Thread(target=tick)
    t.start()
    try:
        during()
    finally:
        stop.set()
        t.join()
    return max(b - a for a, b in zip(ticks, ticks[1:]))


def test_a_long_poll_releases_the_gil(namesrv, topic):
    with rmq.LitePullConsumer(unique("py_gil"), topic, namesrv=namesrv) as c:
        c.poll(100)
        started = time.monotonic()
        gap = max_tick_gap(lambda: c.poll(2000))  # nothing to read: waits the 2 s
        assert time.monotonic() - started >= 1.9
    assert gap < 1.0, f"Python stood still for {gap:.2f} s during a poll"


def test_a_close_waiting_for_a_listener_releases_the_gil(namesrv, topic):
    inside = threading.Event()

    def listener(msgs):
        inside.set()
        time.sleep(1.5)  # Python code: needs the GIL back to finish
        return rmq.ConsumeStatus.SUCCESS

    c = rmq.PushConsumer(unique("py_gil_push"), topic, listener, namesrv=namesrv, from_first=True)
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        p.send(rmq.Message(topic, b"x"))
    assert wait_for(inside.is_set, timeout=60)
    gap = max_tick_gap(c.close)
    assert gap < 1.0, f"Python stood still for {gap:.2f} s during close"
