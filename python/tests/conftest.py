import os
import time
import uuid

import pytest

import rocketmq_blocking as rmq


@pytest.fixture(scope="session")
def namesrv() -> str:
    addr = os.environ.get("NAMESRV_ADDR")
    if not addr:
        pytest.fail("set NAMESRV_ADDR (cargo test -p rocketmq-blocking-ffi runs these tests against its cluster)")
    return addr


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def topic(namesrv) -> str:
    name = unique("PyTopic")
    rmq.create_topic(namesrv, name, 4)
    # The producer's first send waits for the route; give the name server a moment.
    time.sleep(0.5)
    return name


def wait_for(pred, timeout=60.0, interval=0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def broker_4x() -> bool:
    """Whether the tests run against a 4.x cluster (``RMQ_TEST_VERSION=4.9.7``)."""
    return os.environ.get("RMQ_TEST_VERSION", "").startswith("4.")
