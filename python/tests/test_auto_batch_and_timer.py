"""Auto-batching (``Producer(auto_batch=True)``) and timer messages
(``Message(deliver_time_ms=...)``, ``Message(delivery_delay_ms=...)``) against the real
cluster."""

import threading
import time

import rocketmq_blocking as rmq
from conftest import broker_4x, unique, wait_for
from test_features import read_back


def test_auto_batch_threads_each_get_their_own_result_and_every_message_arrives(namesrv, topic):
    results = {}
    lock = threading.Lock()
    with rmq.Producer(unique("py_ab"), namesrv=namesrv, auto_batch=True, batch_max_delay_ms=50) as p:

        def sender(t: int) -> None:
            for j in range(10):
                i = t * 10 + j
                r = p.send(rmq.Message(topic, f"ab-{i}".encode(), tags="TagAB", properties={"i": str(i)}))
                with lock:
                    results[i] = r

        threads = [threading.Thread(target=sender, args=(t,)) for t in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done = []
        p.send_async(rmq.Message(topic, b"ab-async"), lambda r, e: done.append((r, e)))
        assert wait_for(lambda: done, timeout=30)
        r, e = done[0]
        assert e is None and r is not None, e
        results[-1] = r
    assert len(results) == 161
    ids = {r.msg_id for r in results.values()}
    assert len(ids) == 161 and all("," not in i for i in ids), "each send has its own id"
    places = {(r.queue_id, r.queue_offset) for r in results.values()}
    assert len(places) == 161, "each send has its own offset"
    got = read_back(namesrv, topic, list(ids))
    for i, r in results.items():
        m = got[r.msg_id]
        assert (m.queue_id, m.queue_offset) == (r.queue_id, r.queue_offset), (i, m, r)
        if i >= 0:
            assert m.body == f"ab-{i}".encode() and m.properties["i"] == str(i), m


def test_auto_batch_options_are_checked(namesrv):
    for bad in ({"batch_max_delay_ms": 0}, {"batch_max_bytes": 3 * 1024 * 1024}, {"total_batch_max_bytes": 0}):
        try:
            rmq.Producer(unique("py_ab"), namesrv=namesrv, auto_batch=True, **bad)
            raise AssertionError(f"accepted {bad}")
        except rmq.RocketMQError as e:
            assert e.kind == "RMQ_INVALID_ARGUMENT", e
    try:
        rmq.Producer(unique("py_ab"), namesrv=namesrv, batch_max_delay_ms=5)
        raise AssertionError("batch options without auto_batch were accepted")
    except ValueError:
        pass


def _consumed_after(namesrv: str, topic: str, message: rmq.Message) -> float:
    """Seconds from just before the send of ``message`` until a push consumer got it."""
    arrived = []

    def listener(msgs):
        if msgs and not arrived:
            arrived.append(time.monotonic())
        return rmq.ConsumeStatus.SUCCESS

    with rmq.PushConsumer(unique("py_timer_c"), topic, listener, namesrv=namesrv, from_first=True) as c:
        # The consumer holds the queue before the message exists, so its arrival is not
        # delayed by the first rebalance.
        assert wait_for(lambda: any(q["topic"] == topic for q in c.stats()["queues"]), timeout=30), "no queue"
        with rmq.Producer(unique("py_timer_p"), namesrv=namesrv) as p:
            sent = time.monotonic()
            p.send(message)
        assert wait_for(lambda: arrived, timeout=60), "the timer message never came"
    return arrived[0] - sent


def test_timer_messages_due_in_3_s_arrive_then_and_not_before(namesrv):
    due = 3.0
    took = {}
    for how in ("deliver_time_ms", "delivery_delay_ms"):
        topic = unique("PyTimer")
        rmq.create_topic(namesrv, topic, 1)
        time.sleep(0.5)
        if how == "deliver_time_ms":
            m = rmq.Message(topic, b"at", deliver_time_ms=int(time.time() * 1000 + due * 1000))
        else:
            m = rmq.Message(topic, b"after", delivery_delay_ms=int(due * 1000))
        took[how] = _consumed_after(namesrv, topic, m)
    for how, t in took.items():
        if broker_4x():
            assert t < 2.5, (how, t)  # no timer on 4.x: delivered at once
        else:
            # The broker rounds down to its 1 s precision.
            assert due - 1.0 <= t <= due + 3.0, (how, t)


def test_timer_message_input_is_checked_before_anything_is_sent(namesrv, topic):
    with rmq.Producer(unique("py_timer_p"), namesrv=namesrv) as p:
        for bad in (
            rmq.Message(topic, b"x", deliver_time_ms=1, delivery_delay_ms=1),
            rmq.Message(topic, b"x", delivery_delay_ms=-5),
            rmq.Message(topic, b"x", deliver_time_ms=1.5),  # type: ignore[arg-type]
        ):
            try:
                p.send(bad)
                raise AssertionError(f"sent {bad}")
            except ValueError:
                pass
        # An hour ago is not a time to deliver at; a timer with a delay level neither.
        for bad, text in (
            (rmq.Message(topic, b"x", deliver_time_ms=int(time.time() * 1000) - 3_600_000), "in the past"),
            (rmq.Message(topic, b"x", delivery_delay_ms=5000, delay_level=2), "delay level"),
        ):
            try:
                p.send(bad)
                raise AssertionError(f"sent {bad}")
            except rmq.RocketMQError as e:
                assert e.kind == "RMQ_INVALID_ARGUMENT" and text in str(e), e
        # Fractions of a second go as TIMER_DELAY_MS, whole seconds as TIMER_DELAY_SEC: both
        # are delivered.
        r = p.send(rmq.Message(topic, b"t", delivery_delay_ms=1500))
        r2 = p.send(rmq.Message(topic, b"t2", delivery_delay_ms=2000))
    got = read_back(namesrv, topic, [r.msg_id, r2.msg_id])
    assert {m.body for m in got.values()} == {b"t", b"t2"}
