"""The prometheus_client collector example (python/examples/prometheus_collector.py): a
scrape shows what the clients' stats() count."""

import os
import sys
import time

from prometheus_client import CollectorRegistry, generate_latest

import rocketmq_blocking as rmq
from conftest import unique

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from prometheus_collector import RocketMQCollector  # noqa: E402


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the sample `name` whose labels include `labels`."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in:\n{text}")


def test_a_scrape_of_the_collector_shows_the_clients_stats(namesrv, topic):
    with rmq.Producer(unique("py_prom_p"), namesrv=namesrv) as p:
        for i in range(7):
            p.send(rmq.Message(topic, f"m{i}".encode()))
        got = []
        c = rmq.PushConsumer(unique("py_prom_c"), topic, lambda msgs: got.extend(msgs) or rmq.ConsumeStatus.SUCCESS,
                             namesrv=namesrv, from_first=True)
        with c:
            deadline = time.monotonic() + 60
            while c.stats()["topics"].get(topic, {}).get("consumed_ok", 0) < 7 and time.monotonic() < deadline:
                time.sleep(0.1)
            registry = CollectorRegistry()
            registry.register(RocketMQCollector([p, c]))
            text = generate_latest(registry).decode()
    assert sample(text, "rocketmq_send_messages_total", topic=topic) == 7
    assert sample(text, "rocketmq_send_failures_total", topic=topic) == 0
    assert sample(text, "rocketmq_send_cost_time_p99_seconds", topic=topic) > 0
    assert sample(text, "rocketmq_consume_messages_total", topic=topic) == 7
    assert sample(text, "rocketmq_consumer_lag_messages") == 0
