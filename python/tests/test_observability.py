"""Stats snapshots and hooks from Python: the same figures as the Rust `stats()` (in the
shape of the C `rmq_*_stats_json`), a send hook that adds a traceparent the consumer's
hook sees, and hooks that raise without stopping the client."""

import logging
import threading

import rocketmq_blocking as rmq
from conftest import unique, wait_for

N = 6


class Tracer(rmq.SendHook):
    def __init__(self):
        self.lock = threading.Lock()
        self.before = 0
        self.results = []

    def before_send(self, message):
        with self.lock:
            self.before += 1
            n = self.before
        message.properties["traceparent"] = f"00-{n:032x}-{n:016x}-01"

    def after_send(self, message, result, error):
        with self.lock:
            self.results.append((message.properties.get("traceparent"), result, error))


class Seen(rmq.ConsumeHook):
    def __init__(self):
        self.lock = threading.Lock()
        self.traceparents = set()
        self.statuses = []

    def before_consume(self, messages):
        with self.lock:
            for m in messages:
                if "traceparent" in m.properties:
                    self.traceparents.add(m.properties["traceparent"])

    def after_consume(self, messages, status):
        with self.lock:
            self.statuses.extend(status for _ in messages)


def test_stats_count_the_sends_and_the_consumed_messages_and_a_traceparent_crosses_the_hooks(namesrv, topic):
    tracer = Tracer()
    with rmq.Producer(unique("py_obs_p"), namesrv=namesrv, send_hook=tracer) as p:
        for i in range(N):
            p.send(rmq.Message(topic, f"m{i}".encode()))
        stats = p.stats()
    t = stats["topics"][topic]
    assert t["messages_sent"] == N, stats
    assert t["failed"] == 0 and t["failed_by_kind"] == {}, stats
    assert t["bytes_sent"] == sum(len(f"m{i}") for i in range(N)), stats
    assert t["send_latency"]["count"] == N, stats
    assert 0 < t["send_latency"]["p50_us"] <= t["send_latency"]["max_us"], stats
    assert stats["hook_panics"] == 0 and stats["client"]["connections"] >= 1, stats
    assert tracer.before == N
    assert len(tracer.results) == N
    assert all(tp and r is not None and e is None for tp, r, e in tracer.results), tracer.results
    sent = {tp for tp, _, _ in tracer.results}

    seen = Seen()
    got = []
    lock = threading.Lock()

    def listener(msgs):
        with lock:
            got.extend(msgs)
        return rmq.ConsumeStatus.SUCCESS

    with rmq.PushConsumer(
        unique("py_obs_c"), topic, listener, namesrv=namesrv, from_first=True, consume_hook=seen
    ) as c:
        assert wait_for(lambda: len(got) >= N, timeout=60), len(got)
        assert wait_for(lambda: c.stats()["topics"].get(topic, {}).get("consumed_ok", 0) >= N, timeout=10), c.stats()

        def next_offsets():
            # The topic's queues (the group's retry topic has its own).
            return sum(q["consumed_offset"] or 0 for q in c.stats()["queues"] if q["topic"] == topic)

        assert wait_for(lambda: next_offsets() == N, timeout=10), c.stats()
        cs = c.stats()
    assert cs["topics"][topic]["pulled"] >= N, cs
    assert cs["topics"][topic]["consume_latency"]["count"] >= 1, cs
    assert sent <= seen.traceparents, (sent, seen.traceparents)
    assert {m.properties.get("traceparent") for m in got} >= sent
    assert seen.statuses and all(s == rmq.ConsumeHookStatus.SUCCESS for s in seen.statuses), seen.statuses

    with rmq.LitePullConsumer(unique("py_obs_l"), topic, namesrv=namesrv, from_first=True) as lite:
        polled = 0
        for _ in range(60):
            polled += len(lite.poll(1000))
            if polled >= N:
                break
        ls = lite.stats()
    assert polled >= N
    assert ls["topics"][topic]["consumed_ok"] == polled, ls


class Raising(rmq.SendHook):
    def before_send(self, message):
        raise ValueError("hook failed: before")

    def after_send(self, message, result, error):
        raise ValueError("hook failed: after")


def test_a_raising_send_hook_is_logged_and_counted_and_the_send_goes_on(namesrv, topic, caplog):
    caplog.set_level(logging.WARNING, logger="rocketmq_blocking")
    with rmq.Producer(unique("py_obs_raise"), namesrv=namesrv, send_hook=Raising()) as p:
        p.send(rmq.Message(topic, b"x"))
        stats = p.stats()
    assert stats["topics"][topic]["messages_sent"] == 1, stats
    assert stats["hook_panics"] == 2, stats
    logged = [r for r in caplog.records if r.exc_info and "hook failed" in str(r.exc_info[1])]
    assert len(logged) == 2, caplog.records


def test_a_failed_send_counts_as_failed_by_kind(namesrv):
    with rmq.Producer(unique("py_obs_fail"), namesrv="127.0.0.1:1", send_timeout_ms=300, retries=0) as p:
        try:
            p.send(rmq.Message("NoSuchTopicAnywhere", b"x"))
        except rmq.RocketMQError:
            pass
        else:
            raise AssertionError("a send to a dead name server succeeded")
        stats = p.stats()
    t = stats["topics"]["NoSuchTopicAnywhere"]
    assert (t["messages_sent"], t["failed"]) == (0, 1), stats
    assert sum(t["failed_by_kind"].values()) == 1, stats
