"""Admin against the real cluster: topics (create, list, delete), offsets, a message by
its offset id and by its unique key, and a group's consume stats."""

import time

import rocketmq_blocking as rmq
from conftest import broker_4x, unique, wait_for


def test_admin_creates_lists_inspects_and_deletes_a_topic(namesrv):
    topic, group = unique("PyAdminTopic"), unique("py_admin_c")
    with rmq.Admin(namesrv) as a:
        brokers = a.create_topic(topic, 2)
        assert brokers and all(isinstance(b, str) for b in brokers), brokers
        assert wait_for(lambda: topic in a.topic_list(), timeout=30)
        time.sleep(0.5)  # the route, as the topic fixture waits
        with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
            sent = [p.send(rmq.Message(topic, f"admin {i}".encode(), keys=[f"k{i}"])) for i in range(3)]
        # SEND_OK is the commit log; the broker fills the consume queue a moment later.
        assert wait_for(lambda: a.total_max_offset(topic) >= 3, timeout=10)
        assert a.total_max_offset(topic) == 3

        m = a.view_message(sent[1].offset_msg_id)
        assert (m.msg_id, m.topic, m.body) == (sent[1].msg_id, topic, b"admin 1"), m
        found = a.query_message_by_unique_key(topic, sent[2].msg_id)
        assert found is not None and found.body == b"admin 2", found
        assert a.query_message_by_unique_key(topic, "0" * 32) is None

        with rmq.LitePullConsumer(group, topic, namesrv=namesrv, from_first=True, auto_commit=False) as c:
            got = set()
            deadline = time.monotonic() + 60
            while len(got) < 3 and time.monotonic() < deadline:
                got |= {m.msg_id for m in c.poll(500)}
            assert got == {r.msg_id for r in sent}
            c.commit()

            def caught_up():
                s = a.consume_stats(group, topic)
                return s.total_diff == 0 and sum(q.broker_offset for q in s.queues) == 3

            assert wait_for(caught_up, timeout=30), a.consume_stats(group, topic)
        stats = a.consume_stats(group, topic)
        assert {q.queue.topic for q in stats.queues} == {topic} and len(stats.queues) == 2, stats
        assert sum(q.consumer_offset for q in stats.queues) == 3, stats

        deleted = a.delete_topic(topic)
        assert sorted(deleted) == sorted(brokers)
        assert wait_for(lambda: topic not in a.topic_list(), timeout=30)
    try:
        a.topic_list()
        raise AssertionError("a closed Admin answered")
    except rmq.RocketMQError as e:
        assert e.kind == "RMQ_STATE"


def test_admin_offsets_queries_groups_and_connections(namesrv, topic):
    group, producer_group = unique("py_admin_g"), unique("py_admin_p")
    with rmq.Admin(namesrv) as a, rmq.Producer(producer_group, namesrv=namesrv) as p:
        q = p.fetch_queues(topic)[0]
        before_ms = int(time.time() * 1000) - 1000
        first = [p.send(rmq.Message(topic, f"early {i}".encode(), keys=["kx"]), queue=q) for i in range(2)]
        time.sleep(1.5)
        middle_ms = int(time.time() * 1000)
        time.sleep(0.2)
        later = [p.send(rmq.Message(topic, f"late {i}".encode()), queue=q) for i in range(3)]
        assert wait_for(lambda: a.max_offset(q) >= 5, timeout=10)
        assert a.min_offset(q) == 0
        assert a.max_offset(q) == 5
        assert a.search_offset(q, before_ms) == 0
        assert a.search_offset(q, middle_ms) == later[0].queue_offset == 2

        keyed = a.query_messages(topic, "kx")
        assert sorted(m.msg_id for m in keyed) == sorted(r.msg_id for r in first)

        # The producer shows under its group on the broker.
        assert wait_for(lambda: a.producer_connections(producer_group), timeout=30)
        conn = a.producer_connections(producer_group)[0]
        assert conn.language == "RUST", conn
        assert conn.client_id

        # A group that does not exist yet, created, then reset to a time and to the end.
        assert group not in a.subscription_groups()
        assert a.create_subscription_group(group, retry_max_times=3)
        created = a.subscription_groups()[group]
        assert (created.consume_enable, created.orderly, created.retry_max_times) == (True, False, 3)
        with rmq.LitePullConsumer(group, topic, namesrv=namesrv, from_first=True) as c:
            assert wait_for(lambda: q in c.assignment(), timeout=60)
            if broker_4x():
                # A 4.x broker resets only a group with an offset on every queue of the
                # topic ("THe consumer group <g> not exist" otherwise, Broker2Client).
                c.commit({queue: 0 for queue in p.fetch_queues(topic)})
            moved = a.reset_offset(group, topic, middle_ms)
            assert moved[q] == 2, moved
            moved = a.reset_offset(group, topic)
            assert moved[q] == 5, moved
            moved = a.reset_offset(group, topic, earliest=True)
            assert moved[q] == 0, moved
