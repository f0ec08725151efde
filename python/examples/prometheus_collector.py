"""A prometheus_client collector over the clients' ``stats()``: register it, and every
scrape reads fresh snapshots, under RocketMQ's client metric names where they exist.

    python prometheus_collector.py TOPIC [PORT]   # NAMESRV_ADDR must be set

serves http://127.0.0.1:PORT/metrics (default 8000) while it sends a message a second.
``pip install prometheus-client`` first.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Dict, Iterable, List

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

import rocketmq_blocking as rmq


class RocketMQCollector(Collector):
    """Reads ``stats()`` of the clients given (producers and consumers) at each scrape."""

    def __init__(self, clients: Iterable[Any]) -> None:
        self.clients = list(clients)

    def collect(self) -> Iterable[Any]:
        sent = CounterMetricFamily(
            "rocketmq_send_messages", "messages the broker acknowledged", labels=["topic", "client_id"]
        )
        failed = CounterMetricFamily(
            "rocketmq_send_failures", "messages whose send failed", labels=["topic", "client_id"]
        )
        p99 = GaugeMetricFamily(
            "rocketmq_send_cost_time_p99_seconds",
            "p99 of the send latency since start",
            labels=["topic", "client_id"],
        )
        consumed = CounterMetricFamily(
            "rocketmq_consume_messages", "messages the listener consumed", labels=["topic", "consumer_group", "client_id"]
        )
        cached = GaugeMetricFamily(
            "rocketmq_consumer_cached_messages", "messages pulled, not yet consumed", labels=["consumer_group", "client_id"]
        )
        lag = GaugeMetricFamily("rocketmq_consumer_lag_messages", "messages not yet consumed", labels=["consumer_group", "client_id"])
        for client in self.clients:
            s: Dict[str, Any] = client.stats()
            cid = s["client"]["client_id"]
            for topic, t in s["topics"].items():
                if "messages_sent" in t:
                    sent.add_metric([topic, cid], t["messages_sent"])
                    failed.add_metric([topic, cid], t["failed"])
                    p99.add_metric([topic, cid], t["send_latency"]["p99_us"] / 1e6)
                else:
                    consumed.add_metric([topic, s["group"], cid], t["consumed_ok"])
            if "cached_messages" in s:
                cached.add_metric([s["group"], cid], s["cached_messages"])
                lag.add_metric([s["group"], cid], s["lag"])
        families: List[Any] = [sent, failed, p99, consumed, cached, lag]
        return families


def main() -> None:
    from prometheus_client import REGISTRY, start_http_server

    topic = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
    with rmq.Producer("prometheus_example_producer") as p:
        REGISTRY.register(RocketMQCollector([p]))
        start_http_server(port)
        print(f"serving http://127.0.0.1:{port}/metrics")
        while True:
            p.send(rmq.Message(topic, b"tick"))
            time.sleep(1)


if __name__ == "__main__":
    main()
