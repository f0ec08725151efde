"""The simple (POP) consumer against the real cluster: receive, ack, change the invisible
time, nothing back after the acks; on a 4.x cluster (``RMQ_TEST_VERSION=4.9.7``) the
typed ``UnsupportedError``."""

import threading
import time

import pytest

import rocketmq_blocking as rmq
from conftest import broker_4x, unique, wait_for


def test_pop_simple_consumer_receives_acks_and_changes_invisible_time(namesrv, topic):
    with rmq.Producer(unique("py_pop_p"), namesrv=namesrv) as p:
        sent = {p.send(rmq.Message(topic, f"pop{i}".encode())).msg_id for i in range(8)}
    with rmq.SimpleConsumer(unique("py_pop"), topic, from_first=True, await_ms=1000, namesrv=namesrv) as c:
        if broker_4x():
            with pytest.raises(rmq.UnsupportedError) as e:
                c.receive(1, 10_000)
            assert e.value.response_code == 3
            return
        with pytest.raises(rmq.InvalidArgumentError):
            c.receive(33, 10_000)
        got = {}
        changed = False
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            for m in c.receive(32, 10_000):
                got[m.message.msg_id] = got.get(m.message.msg_id, 0) + 1
                if not changed:
                    before = m.receipt_handle
                    c.change_invisible_duration(m, 5_000)
                    assert m.receipt_handle != before
                    changed = True
                c.ack(m)
        assert set(got) == sent, sent - set(got)
        # Past the invisible time: acked messages stay away.
        again = []
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            again += [m.message.msg_id for m in c.receive(32, 5_000)]
        assert again == [], again


def test_pop_push_consumer_follows_the_group_switched_to_pop_and_back(namesrv, topic):
    """``client_rebalance=False`` follows the broker: switched to POP with the admin, the
    consumer pops (its assignment is the whole topic, queue -1; acks by batch) and gets
    every message; switched back, it pulls queues again. A 4.x broker refuses the
    switch."""
    group = unique("py_pop_push")
    with rmq.Admin(namesrv) as admin:
        if broker_4x():
            with pytest.raises(rmq.UnsupportedError):
                admin.set_message_request_mode(topic, group, pop=True)
            return
        assert admin.set_message_request_mode(topic, group, pop=True)
        got: dict = {}
        lock = threading.Lock()

        def listener(msgs):
            with lock:
                for m in msgs:
                    got[m.msg_id] = got.get(m.msg_id, 0) + 1
            return rmq.ConsumeStatus.SUCCESS

        with rmq.PushConsumer(
            group,
            topic,
            listener,
            namesrv=namesrv,
            client_rebalance=False,
            pop_invisible_time_ms=10_000,
            pop_batch_ack=True,
        ) as c:

            def popping() -> bool:
                return any(q.topic == topic and q.queue_id == -1 for q in c.assigned_queues())

            assert wait_for(popping, timeout=60), c.assigned_queues()
            with rmq.Producer(unique("py_pop_push_p"), namesrv=namesrv) as p:
                sent = {p.send(rmq.Message(topic, f"popped {i}".encode())).msg_id for i in range(20)}
            assert wait_for(lambda: set(got) >= sent, timeout=60), len(sent - set(got))

            admin.set_message_request_mode(topic, group, pop=False)

            def pulling() -> bool:
                qs = [q for q in c.assigned_queues() if q.topic == topic]
                return bool(qs) and all(q.queue_id >= 0 for q in qs)

            assert wait_for(pulling, timeout=60), c.assigned_queues()
            with rmq.Producer(unique("py_pop_push_p"), namesrv=namesrv) as p:
                later = {p.send(rmq.Message(topic, f"pulled {i}".encode())).msg_id for i in range(10)}
            assert wait_for(lambda: set(got) >= later, timeout=60), len(later - set(got))


def test_pop_wait_for_messages_and_ack_batch(namesrv, topic):
    """``wait_for_messages`` is False after its timeout with nothing and True once a
    message is there, taking nothing; ``ack_batch`` acks what was received, and nothing
    comes back after the invisible time. On 4.x both raise ``UnsupportedError``."""
    with rmq.SimpleConsumer(unique("py_pop_nb"), topic, from_first=True, await_ms=1000, namesrv=namesrv) as c:
        if broker_4x():
            with pytest.raises(rmq.UnsupportedError):
                c.wait_for_messages(1000)
            return
        t0 = time.monotonic()
        assert c.wait_for_messages(1500) is False
        assert time.monotonic() - t0 >= 1.0
        with rmq.Producer(unique("py_pop_nb_p"), namesrv=namesrv) as p:
            sent = {p.send(rmq.Message(topic, f"nb{i}".encode())).msg_id for i in range(6)}
        assert c.wait_for_messages(20_000) is True
        got = []
        deadline = time.monotonic() + 60
        while len({m.message.msg_id for m in got}) < len(sent) and time.monotonic() < deadline:
            got += c.receive(32, 10_000)
        assert {m.message.msg_id for m in got} == sent
        c.ack_batch(got + got[:1])
        c.ack_batch([])
        again = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            again += [m.message.msg_id for m in c.receive(32, 5_000)]
        assert again == [], again
