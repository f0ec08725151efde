"""The simple (POP) consumer against the real cluster: receive, ack, change the invisible
time, nothing back after the acks; on a 4.x cluster (``RMQ_TEST_VERSION=4.9.7``) the
typed ``UnsupportedError``."""

import os
import time

import pytest

import rocketmq_blocking as rmq
from conftest import unique


def broker_4x() -> bool:
    return os.environ.get("RMQ_TEST_VERSION", "").startswith("4.")


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
