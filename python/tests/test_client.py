"""The Python package against a real cluster: every send mode, push (concurrent and
orderly) and lite pull consumption, tags, errors, and a clean interpreter exit with a
consumer running. Messages are counted by id."""

import os
import subprocess
import sys
import threading
from collections import Counter, defaultdict

import pytest

import rocketmq_blocking as rmq
from conftest import unique, wait_for


def send_all_modes(namesrv, topic, n=5):
    """Sync, async, batch and one-way sends; returns the acknowledged ids."""
    acked = []
    lock = threading.Lock()
    done = threading.Event()
    errors = []
    with rmq.Producer(unique("py_producer"), namesrv=namesrv, send_timeout_ms=20000) as p:
        for i in range(n):
            r = p.send(rmq.Message(topic, f"sync {i}".encode(), tags="TagA", keys=[f"k{i}"], properties={"i": str(i)}))
            assert r.status == 0 and len(r.msg_id) == 32
            acked.append(r.msg_id)

        def cb(result, error):
            with lock:
                if error is not None:
                    errors.append(error)
                else:
                    acked.append(result.msg_id)
                if len(acked) + len(errors) == 2 * n:
                    done.set()

        for i in range(n):
            p.send_async(rmq.Message(topic, f"async {i}".encode(), tags="TagA"), cb)
        assert done.wait(60), "async callbacks did not all run"
        assert not errors, errors
        r = p.send_batch([rmq.Message(topic, f"batch {i}".encode(), tags="TagA") for i in range(3)])
        acked.extend(r.msg_id.split(","))
        p.send_oneway(rmq.Message(topic, b"one way", tags="OneWay"))
    return acked


def test_every_send_mode_is_read_back_by_a_push_consumer(namesrv, topic):
    acked = send_all_modes(namesrv, topic)
    assert len(acked) == 13
    seen = Counter()
    lock = threading.Lock()

    def listener(msgs):
        with lock:
            for m in msgs:
                assert m.topic == topic and m.tags == "TagA"
                seen[m.msg_id] += 1
        return rmq.ConsumeStatus.SUCCESS

    with rmq.PushConsumer(unique("py_push"), topic, listener, expression="TagA", namesrv=namesrv, from_first=True):
        assert wait_for(lambda: all(i in seen for i in acked)), f"missing {set(acked) - set(seen)}"
    dups = sum(c - 1 for c in seen.values())
    print(f"push: acked {len(acked)} received {sum(seen.values())} duplicates {dups}")


def test_a_lite_pull_consumer_iterates_from_the_first_offset(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        acked = [p.send(rmq.Message(topic, f"m{i}".encode(), keys=["a", "b"])).msg_id for i in range(5)]
    got = []
    with rmq.LitePullConsumer(unique("py_lite"), topic, namesrv=namesrv, from_first=True) as c:
        for m in c:
            assert m.keys == ["a", "b"] and m.body.startswith(b"m")
            got.append(m.msg_id)
            if set(acked) <= set(got):
                break
        c.commit()
    assert set(acked) <= set(got)


def test_an_orderly_listener_sees_each_queue_in_offset_order(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        acked = {p.send(rmq.Message(topic, f"o{i}".encode())).msg_id for i in range(12)}
    offsets = defaultdict(list)
    seen = set()
    lock = threading.Lock()

    def listener(msgs):
        with lock:
            for m in msgs:
                offsets[m.queue_id].append(m.queue_offset)
                seen.add(m.msg_id)
        return rmq.ConsumeStatus.SUCCESS

    with rmq.PushConsumer(unique("py_orderly"), topic, listener, namesrv=namesrv, orderly=True, from_first=True):
        assert wait_for(lambda: acked <= seen)
    for q, offs in offsets.items():
        assert offs == sorted(offs), f"queue {q} out of order: {offs}"


def test_a_tag_subscription_gets_only_its_tag(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        b_ids = set()
        for i in range(6):
            r = p.send(rmq.Message(topic, b"x", tags="TagB" if i % 2 else "TagA"))
            if i % 2:
                b_ids.add(r.msg_id)
    tags = []
    seen = set()

    def listener(msgs):
        for m in msgs:
            tags.append(m.tags)
            seen.add(m.msg_id)
        return rmq.ConsumeStatus.SUCCESS

    with rmq.PushConsumer(unique("py_tags"), topic, listener, expression="TagB", namesrv=namesrv, from_first=True):
        assert wait_for(lambda: b_ids <= seen)
    assert set(tags) == {"TagB"}


def test_errors_carry_the_kind(namesrv):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        with pytest.raises(rmq.RocketMQError) as e:
            p.send(rmq.Message("bad topic!", b"x"))
        assert e.value.kind == "RMQ_INVALID_ARGUMENT"
        assert e.value.response_code is None
    # A name server nobody listens on: the send fails with a network kind, not a crash.
    with rmq.Producer(unique("py_producer"), namesrv="127.0.0.1:1", send_timeout_ms=2000, retries=0) as p:
        with pytest.raises(rmq.RocketMQError) as e:
            p.send(rmq.Message("TopicTest", b"x"))
        assert e.value.kind in {"RMQ_CONNECT", "RMQ_NO_ROUTE", "RMQ_TIMEOUT", "RMQ_CONNECTION_CLOSED"}, e.value
    closed = rmq.Producer(unique("py_producer"), namesrv=namesrv)
    closed.close()
    with pytest.raises(rmq.RocketMQError) as e:
        closed.send(rmq.Message("TopicTest", b"x"))
    assert e.value.kind == "RMQ_STATE"


EXIT_SCRIPT = r"""
import sys, threading, time
import rocketmq_blocking as rmq
namesrv, topic, group = sys.argv[1:4]
started = threading.Event()
def listener(msgs):
    started.set()
    time.sleep(0.3)  # still in flight when the interpreter exits
    return rmq.ConsumeStatus.SUCCESS
c = rmq.PushConsumer(group, topic, listener, namesrv=namesrv, from_first=True)
with rmq.Producer(group + "_p", namesrv=namesrv) as p:
    for i in range(3):
        p.send(rmq.Message(topic, b"x"))
assert started.wait(60), "no listener call"
print("exiting with the consumer running", flush=True)
"""


def test_the_interpreter_exits_cleanly_with_a_consumer_running(namesrv, topic):
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, namesrv, topic, unique("py_exit")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "exiting with the consumer running" in out.stdout
    assert "Fatal Python error" not in out.stderr and "Segmentation" not in out.stderr
