"""A lite pull consumer with queues assigned by hand: seek, committed offsets, pause and
resume, offset for a timestamp, against the real cluster."""

import time

import pytest

import rocketmq_blocking as rmq
from conftest import broker_4x, unique, wait_for


def poll_until(c, n, timeout=60):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += c.poll(300)
    return got


def test_an_assigned_consumer_seeks_commits_pauses_and_resumes(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        q = p.fetch_queues(topic)[1]
        sent = [p.send(rmq.Message(topic, f"q{i}".encode()), queue=q).msg_id for i in range(6)]
        with rmq.LitePullConsumer(unique("py_assign"), None, namesrv=namesrv, auto_commit=False) as c:
            c.assign([q])
            assert c.assignment() == [q]
            c.seek_to_begin(q)
            got = poll_until(c, 6)
            assert [m.msg_id for m in got] == sent and {m.queue_id for m in got} == {q.queue_id}
            assert [m.queue_offset for m in got] == list(range(6))

            c.seek(q, 3)
            again = poll_until(c, 3)
            assert [m.queue_offset for m in again] == [3, 4, 5], [m.queue_offset for m in again]

            c.commit()
            assert wait_for(lambda: c.committed(q) == 6, timeout=30), c.committed(q)

            c.pause([q])
            c.seek(q, 6)  # drops anything already cached
            late = p.send(rmq.Message(topic, b"late"), queue=q).msg_id
            assert c.poll(1500) == [], "a paused queue was pulled"
            c.resume([q])
            assert [m.msg_id for m in poll_until(c, 1)] == [late]

            assert c.offset_for_timestamp(q, 0) == 0
            # Past the last message: 5.x brokers answer the queue's end, 4.x brokers the
            # last message's offset (ConsumeQueue.getOffsetInQueueByTime of 4.9.7).
            future = c.offset_for_timestamp(q, int(time.time() * 1000) + 3_600_000)
            assert future == (6 if broker_4x() else 7), future
            c.seek_to_end(q)
            assert c.poll(500) == []


def test_a_running_consumer_subscribes_commits_given_offsets_and_unsubscribes(namesrv, topic):
    group = unique("py_follow")
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        for i in range(4):
            p.send(rmq.Message(topic, f"m{i}".encode()))
        with rmq.LitePullConsumer(group, None, namesrv=namesrv, from_first=True, auto_commit=False) as c:
            queues = c.fetch_message_queues(topic)
            assert [q.queue_id for q in queues] == [0, 1, 2, 3] and all(q.topic == topic for q in queues)
            c.subscribe(topic)
            assert len(poll_until(c, 4)) == 4
            assert wait_for(lambda: len(c.assignment()) == 4, timeout=30), c.assignment()

            c.commit({queues[0]: 1, queues[1]: 2})
            assert c.committed(queues[0]) == 1 and c.committed(queues[1]) == 2
            with pytest.raises(rmq.RocketMQError):
                c.commit({queues[0]: -1})
            assert c.committed(queues[0]) == 1

            with rmq.Admin(namesrv) as admin:
                conns = admin.consumer_connections(group)
                assert [x["language"] for x in conns["connections"]] == ["RUST"]
                assert conns["subscriptions"] == {topic: "*"} and conns["consumeType"] == "CONSUME_ACTIVELY"
                stats = admin.topic_stats(topic)
                assert len(stats["queues"]) == 4
                assert sum(q["maxOffset"] for q in stats["queues"]) == 4
                stored = [admin.earliest_msg_store_time(q) for q in queues]
                with_msgs = [q for q in stats["queues"] if q["maxOffset"] > 0]
                assert len([t for t in stored if t is not None]) == len(with_msgs)

            c.unsubscribe(topic)
            assert c.assignment() == []
            with pytest.raises(rmq.RocketMQError):
                c.unsubscribe(topic)
