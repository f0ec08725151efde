"""Closing a client while other threads use it: calls in flight finish or fail with a
typed "closed" error, and the handle is freed only once none is inside the library.
Each scenario runs in a subprocess (a use-after-free is a crash, which would take pytest
with it), with glibc's MALLOC_PERTURB_ so that freed memory is overwritten at once."""

import os
import subprocess
import sys

from conftest import unique

CLOSE_SCRIPT = r"""
import random, sys, threading
import rocketmq_blocking as rmq

namesrv, topic, group, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
counts = {}
lock = threading.Lock()


def record(what):
    with lock:
        counts[what] = counts.get(what, 0) + 1


def until_closed(call):
    # Calls in a loop; returns once a call says the client is closed.
    while True:
        try:
            call()
            record("returned")
        except rmq.RocketMQError as e:
            if e.kind == "RMQ_STATE":
                record("closed")
                return
            record("error " + e.kind)


def iterate(c):
    for _ in c:
        record("iterated")
    record("iteration ended")


for i in range(rounds):
    p = rmq.Producer(group + "_p", namesrv=namesrv, send_timeout_ms=5000)
    c = rmq.LitePullConsumer(group + "_c", topic, namesrv=namesrv, from_first=True, poll_timeout_ms=20)
    threads = [
        threading.Thread(target=until_closed, args=(lambda: p.send(rmq.Message(topic, b"x")),)),
        threading.Thread(target=until_closed, args=(lambda: p.send_oneway(rmq.Message(topic, b"y")),)),
        threading.Thread(target=until_closed, args=(lambda: c.poll(20),)),
        threading.Thread(target=iterate, args=(c,)),
    ]
    for t in threads:
        t.start()
    threading.Event().wait(random.uniform(0.0, 0.03))
    # Both closes at once, from two threads, while the calls go on.
    closer = threading.Thread(target=c.close)
    closer.start()
    p.close()
    closer.join(60)
    for t in threads:
        t.join(60)
    alive = [t for t in threads if t.is_alive()] + ([closer] if closer.is_alive() else [])
    if alive:
        print(f"round {i}: {len(alive)} threads never returned", flush=True)
        sys.exit(3)
print("rounds", rounds, "counts", sorted(counts.items()), flush=True)
"""


def run_script(script, *args, timeout=600):
    env = dict(os.environ, MALLOC_PERTURB_="165", PYTHONFAULTHANDLER="1")
    return subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_closing_clients_while_threads_send_and_poll_never_crashes(namesrv, topic):
    out = run_script(CLOSE_SCRIPT, namesrv, topic, unique("py_close"), "200")
    print(out.stdout, out.stderr[-3000:])
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout}\n{out.stderr[-5000:]}"
    assert "panicked" not in out.stderr, out.stderr[-5000:]
    assert "rounds 200" in out.stdout
    # Every thread of every round saw the close as a typed error (4 threads minus the
    # iterator, which ends instead).
    assert "('closed', 600)" in out.stdout, out.stdout
    assert "('iteration ended', 200)" in out.stdout, out.stdout


EXIT_SCRIPT = r"""
import atexit, sys, threading, time

# Registered first, so it runs after the package's hook: the process lives on for a
# second after the hook, as with other libraries' exit hooks, and daemon threads run.
atexit.register(time.sleep, 1.0)
import rocketmq_blocking as rmq

namesrv, topic, group = sys.argv[1:4]
p = rmq.Producer(group + "_p", namesrv=namesrv)
c = rmq.LitePullConsumer(group + "_c", topic, namesrv=namesrv, from_first=True)
slow = rmq.LitePullConsumer(group + "_slow", topic, expression="NeverSent", namesrv=namesrv)
inside = threading.Event()


def send():
    while True:
        try:
            p.send(rmq.Message(topic, b"x"))
        except rmq.RocketMQError:
            return


def poll():
    while True:
        try:
            inside.set()
            c.poll(200)
        except rmq.RocketMQError:
            return


stuck_inside = threading.Event()


def stuck():
    # Inside the library far longer than the exit hook waits: its handle is left alone.
    try:
        stuck_inside.set()
        slow.poll(120000)
    except rmq.RocketMQError:
        pass


for f in (send, poll, stuck):
    threading.Thread(target=f, daemon=True).start()
inside.wait(30)
stuck_inside.wait(30)
# A round trip to the broker, with the GIL released: the daemon threads enter their calls.
p.send(rmq.Message(topic, b"before exit"))
print("exiting with daemon threads inside the library", flush=True)
"""


def test_the_exit_hook_does_not_free_a_client_a_daemon_thread_is_inside(namesrv, topic):
    out = run_script(EXIT_SCRIPT, namesrv, topic, unique("py_exit_daemon"), timeout=120)
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout}\n{out.stderr[-5000:]}"
    assert "exiting with daemon threads inside the library" in out.stdout
    # The stuck poll outlasted the hook's wait: that consumer was left open, not freed.
    assert "LitePullConsumer still in use by another thread" in out.stderr, out.stderr[-5000:]
    # A panic inside the library is caught at the C boundary, so look for it too: freeing
    # a consumer a thread is polling drops the channel that thread waits on.
    for bad in ("Fatal Python error", "Segmentation", "panicked"):
        assert bad not in out.stderr, out.stderr[-5000:]
