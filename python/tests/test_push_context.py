"""The push consumer beyond a plain listener: the consume context (ack index, delay level,
dead-letter queue, orderly suspend time), subscribing and unsubscribing while running,
suspend/resume, message trace; and the producer's request_async and the transaction
producer's ordinary sends."""

import threading
import time

import pytest

import rocketmq_blocking as rmq
from conftest import unique, wait_for


def test_a_listener_with_two_parameters_gets_the_context_and_its_queue(namesrv, topic):
    seen = []

    def listener(messages, context):
        seen.append((context.queue, [m.queue_id for m in messages]))
        return rmq.ConsumeStatus.SUCCESS

    with rmq.Producer(unique("ctx_p"), namesrv=namesrv) as p, rmq.PushConsumer(
        unique("ctx_g"), topic, listener, from_first=True, namesrv=namesrv
    ):
        p.send(rmq.Message(topic, b"with a context"))
        assert wait_for(lambda: seen, 60)
    queue, ids = seen[0]
    assert isinstance(queue, rmq.MessageQueue)
    assert queue.topic == topic
    assert ids == [queue.queue_id]


def test_an_ack_index_consumes_the_head_of_a_batch_and_the_rest_comes_again(namesrv, topic):
    """Java ``setAckIndex(0)`` with a success: only the first message of a call is consumed,
    the others are sent back and come again as retries."""
    lock = threading.Lock()
    calls = []

    def listener(messages, context):
        with lock:
            calls.append([(m.body, m.reconsume_times) for m in messages])
        context.ack_index = 0
        context.delay_level = 1  # 1 s, so the test does not wait for the broker's 10 s
        return rmq.ConsumeStatus.SUCCESS

    def acked():
        with lock:
            return {c[0][0] for c in calls}

    bodies = [f"ack-{i}".encode() for i in range(3)]
    with rmq.Producer(unique("ack_p"), namesrv=namesrv) as p:
        q = p.fetch_queues(topic)[0]
        for b in bodies:
            p.send(rmq.Message(topic, b), queue=q)
        # The three are stored before the consumer starts: its first pull takes them all
        # and its first call gets them together.
        with rmq.PushConsumer(
            unique("ack_g"), topic, listener, from_first=True, batch_max_size=3, namesrv=namesrv
        ):
            assert wait_for(lambda: acked() == set(bodies), 90), calls
    first = calls[0]
    assert [b for b, _ in first] == bodies and all(n == 0 for _, n in first), calls
    later = [m for c in calls[1:] for m in c]
    # The acknowledged head never comes again; each of the others comes again as a retry.
    assert all(b != bodies[0] for b, _ in later), calls
    for b in bodies[1:]:
        assert any(lb == b and n >= 1 for lb, n in later), calls


def test_a_delay_level_of_minus_one_sends_a_failed_message_to_the_dead_letter_queue(namesrv, topic):
    group = unique("dlq_g")
    calls = []

    def listener(messages, context):
        calls.extend(m.body for m in messages)
        context.delay_level = -1
        return rmq.ConsumeStatus.LATER

    with rmq.Producer(unique("dlq_p"), namesrv=namesrv) as p, rmq.PushConsumer(
        group, topic, listener, from_first=True, namesrv=namesrv
    ):
        sent = p.send(rmq.Message(topic, b"to the DLQ"))
        assert wait_for(lambda: calls, 60)
        # The dead-letter topic exists once the broker put the message there.
        dead = []
        with rmq.LitePullConsumer(unique("dlq_reader"), f"%DLQ%{group}", from_first=True, namesrv=namesrv) as reader:
            deadline = time.monotonic() + 60
            while not dead and time.monotonic() < deadline:
                dead.extend(reader.poll(1000))
    assert [m.body for m in dead] == [b"to the DLQ"]
    assert dead[0].properties.get("UNIQ_KEY") == sent.msg_id
    assert calls == [b"to the DLQ"], "a message sent to the DLQ is not retried"


def test_an_orderly_listener_sets_its_suspend_time(namesrv, topic):
    times = []

    def listener(messages, context):
        times.append(time.monotonic())
        if len(times) == 1:
            context.suspend_time_ms = 1500
            return rmq.ConsumeStatus.LATER
        return rmq.ConsumeStatus.SUCCESS

    with rmq.Producer(unique("sus_p"), namesrv=namesrv) as p, rmq.PushConsumer(
        unique("sus_g"), topic, listener, orderly=True, from_first=True, namesrv=namesrv
    ):
        p.send(rmq.Message(topic, b"suspended once"))
        assert wait_for(lambda: len(times) >= 2, 60)
    # The default suspend time is 1 s; the listener's 1.5 s held the queue that long.
    assert times[1] - times[0] >= 1.4, times


def test_a_context_setting_of_the_wrong_type_is_ignored_and_logged(namesrv, topic, caplog):
    got = []

    def listener(messages, context):
        context.delay_level = "soon"
        got.extend(messages)
        return rmq.ConsumeStatus.SUCCESS

    with rmq.Producer(unique("bad_p"), namesrv=namesrv) as p, rmq.PushConsumer(
        unique("bad_g"), topic, listener, from_first=True, namesrv=namesrv
    ):
        p.send(rmq.Message(topic, b"x"))
        assert wait_for(lambda: got, 60)
        assert wait_for(lambda: "delay_level" in caplog.text, 10)


def test_a_running_consumer_subscribes_and_unsubscribes(namesrv, topic):
    other = unique("PyTopic2")
    rmq.create_topic(namesrv, other, 2)
    got = []
    lock = threading.Lock()

    def listener(messages):
        with lock:
            got.extend((m.topic, m.body) for m in messages)
        return True

    with rmq.Producer(unique("sub_p"), namesrv=namesrv) as p, rmq.PushConsumer(
        unique("sub_g"), topic, listener, from_first=True, namesrv=namesrv
    ) as c:
        def topics():
            # The group's retry topic is subscribed to as well, as in Java.
            return sorted(t for t in c.subscriptions() if not t.startswith("%RETRY%"))

        assert topics() == [topic]
        c.subscribe(other, "TagA")
        assert topics() == sorted([topic, other])
        assert wait_for(lambda: any(q.topic == other for q in c.assigned_queues()), 60)
        p.send(rmq.Message(other, b"tag a", tags="TagA"))
        p.send(rmq.Message(other, b"tag b", tags="TagB"))
        assert wait_for(lambda: (other, b"tag a") in got, 60)
        c.unsubscribe(other)
        assert topics() == [topic]
        assert wait_for(lambda: not any(q.topic == other for q in c.assigned_queues()), 60)
        time.sleep(1)
        assert (other, b"tag b") not in got


def test_suspend_stops_consumption_until_resume(namesrv, topic):
    got = []
    with rmq.Producer(unique("pause_p"), namesrv=namesrv) as p, rmq.PushConsumer(
        unique("pause_g"), topic, lambda ms: got.extend(m.body for m in ms) or True, from_first=True, namesrv=namesrv
    ) as c:
        assert wait_for(lambda: c.assigned_queues(), 60)
        q = p.fetch_queues(topic)[0]
        c.suspend()
        # A pull the broker holds (long polling) when the consumer is suspended still
        # delivers what arrives, as in Java; no pull of the queue follows it.
        p.send(rmq.Message(topic, b"first"), queue=q)
        wait_for(lambda: b"first" in got, 5)
        p.send(rmq.Message(topic, b"while suspended"), queue=q)
        time.sleep(3)
        assert b"while suspended" not in got
        c.resume()
        assert wait_for(lambda: b"while suspended" in got, 60)


def test_trace_records_sends_and_consumption(namesrv, topic):
    trace_topic = unique("PyTrace")
    rmq.create_topic(namesrv, trace_topic, 1)
    got = []
    with rmq.Producer(unique("tr_p"), trace_topic=trace_topic, namesrv=namesrv) as p, rmq.PushConsumer(
        unique("tr_g"), topic, lambda ms: got.extend(ms) or True, from_first=True, trace=True, namesrv=namesrv
    ) as c, rmq.Producer(unique("plain_p"), namesrv=namesrv) as plain:
        assert plain.trace_stats() is None
        sent = p.send(rmq.Message(topic, b"traced"))
        assert wait_for(lambda: got, 60)
        assert wait_for(lambda: p.trace_stats().sent >= 1, 30)
        assert wait_for(lambda: c.trace_stats().sent >= 1, 30)
        assert p.trace_stats().failed == 0
    # The producer's record is in its trace topic, naming the message.
    records = []
    with rmq.LitePullConsumer(unique("tr_reader"), trace_topic, from_first=True, namesrv=namesrv) as reader:
        deadline = time.monotonic() + 30
        while not any(sent.msg_id.encode() in r.body for r in records) and time.monotonic() < deadline:
            records.extend(reader.poll(1000))
    assert any(sent.msg_id.encode() in r.body for r in records)
    with pytest.raises(ValueError):
        rmq.Producer(unique("tr_bad"), trace_topic="", namesrv=namesrv)


def test_request_async_gets_the_reply_by_callback_and_by_future(namesrv, topic):
    def responder(messages):
        for m in messages:
            if m.is_request:
                server.send_reply(m, b"re: " + m.body)
        return True

    with rmq.Producer(unique("rq_srv"), namesrv=namesrv) as server, rmq.PushConsumer(
        unique("rq_g"), topic, responder, namesrv=namesrv
    ) as c, rmq.Producer(unique("rq_cli"), namesrv=namesrv) as client:
        assert wait_for(lambda: c.assigned_queues(), 60)
        future = client.request_async(rmq.Message(topic, b"one"), 20000)
        assert future.result(30).body == b"re: one"
        done = threading.Event()
        out = []

        def callback(reply, error):
            out.append((reply, error))
            done.set()

        assert client.request_async(rmq.Message(topic, b"two"), 20000, callback) is None
        assert done.wait(30)
        reply, error = out[0]
        assert error is None and reply.body == b"re: two"
        # Nobody answers on a topic without a responder: a timeout error, once.
        quiet = unique("PyQuiet")
        rmq.create_topic(namesrv, quiet, 1)
        time.sleep(0.5)
        with pytest.raises(rmq.RocketMQTimeoutError):
            client.request_async(rmq.Message(quiet, b"unanswered"), 1000).result(30)


def test_a_transaction_producer_sends_ordinary_messages_too(namesrv, topic):
    with rmq.TransactionProducer(
        unique("txs_p"),
        lambda m, arg: rmq.LocalTransactionState.COMMIT,
        lambda m: rmq.LocalTransactionState.COMMIT,
        namesrv=namesrv,
    ) as tp:
        one = tp.send(rmq.Message(topic, b"plain"))
        batch = tp.send_batch([rmq.Message(topic, b"b1"), rmq.Message(topic, b"b2")])
        tp.send_oneway(rmq.Message(topic, b"oneway"))
        keyed = tp.send(rmq.Message(topic, b"keyed"), sharding_key="k1")
        assert tp.trace_stats() is None
    got = set()
    with rmq.LitePullConsumer(unique("txs_reader"), topic, from_first=True, namesrv=namesrv) as reader:
        deadline = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < deadline:
            got.update(m.body for m in reader.poll(1000))
    assert got == {b"plain", b"b1", b"b2", b"oneway", b"keyed"}
    assert one.msg_id and batch.msg_id and keyed.msg_id
