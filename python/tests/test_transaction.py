"""Transactional messages from Python: a local transaction commits, rolls back, or says
unknown (by its return value or by raising) and the broker's check settles it; only the
committed messages reach a consumer. The suite's cluster checks every second."""

import logging
import threading
import time

import pytest

import rocketmq_blocking as rmq
from conftest import broker_4x, unique, wait_for

State = rmq.LocalTransactionState


def read_all(namesrv, topic, want, settle_s=5.0, timeout=120.0):
    """Bodies read from the first offset until the ``want`` bodies arrived, then for
    ``settle_s`` more (what must not arrive would by then)."""
    got = []
    with rmq.LitePullConsumer(unique("py_tx_reader"), topic, namesrv=namesrv, from_first=True) as c:
        deadline = time.monotonic() + timeout
        while not want <= {m.body for m in got} and time.monotonic() < deadline:
            got += c.poll(500)
        settle = time.monotonic() + settle_s
        while time.monotonic() < settle:
            got += c.poll(500)
    return [m.body for m in got]


def test_committed_rolled_back_and_checked_transactions(namesrv, topic, caplog):
    caplog.set_level(logging.WARNING, logger="rocketmq_blocking")
    executed = []
    checked = {}
    lock = threading.Lock()

    def execute(msg: rmq.Message, arg: object) -> rmq.LocalTransactionState:
        with lock:
            executed.append((msg.body, arg, msg.properties.get("UNIQ_KEY")))
        if arg == "raise":
            raise ValueError("local transaction failed")
        return {"commit": State.COMMIT, "rollback": State.ROLLBACK}.get(str(arg), State.UNKNOWN)

    def check(msg: rmq.ReceivedMessage) -> rmq.LocalTransactionState:
        with lock:
            checked[msg.body] = checked.get(msg.body, 0) + 1
        # The unknown one commits, the one whose transaction raised rolls back.
        return State.COMMIT if msg.body == b"unknown" else State.ROLLBACK

    with rmq.TransactionProducer(unique("py_tx"), execute, check, namesrv=namesrv) as p:
        results = {
            body: p.send_in_transaction(rmq.Message(topic, body.encode(), keys=[body]), arg=body)
            for body in ("commit", "rollback", "unknown", "raise")
        }
        assert {b: r.local_transaction_state for b, r in results.items()} == {
            "commit": State.COMMIT,
            "rollback": State.ROLLBACK,
            "unknown": State.UNKNOWN,
            "raise": State.UNKNOWN,
        }
        assert isinstance(results["commit"], rmq.SendResult) and results["commit"].msg_id
        # execute ran on this thread with the argument and the message's id.
        assert [(b, a) for b, a, _ in executed] == [(b"commit", "commit"), (b"rollback", "rollback"),
                                                    (b"unknown", "unknown"), (b"raise", "raise")]
        assert [k for _, _, k in executed] == [r.msg_id for r in results.values()]
        # The broker asks about the two unknown ones; the check settles them.
        assert wait_for(lambda: b"unknown" in checked and b"raise" in checked, timeout=90), checked
        got = read_all(namesrv, topic, {b"commit", b"unknown"})
    assert sorted(got) == [b"commit", b"unknown"], got
    assert b"commit" not in checked and b"rollback" not in checked, checked
    assert any("local transaction raised" in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_check_that_raises_or_returns_no_state_leaves_the_transaction_unknown(namesrv, topic, caplog):
    caplog.set_level(logging.WARNING, logger="rocketmq_blocking")
    asked = []

    def check(msg: rmq.ReceivedMessage) -> rmq.LocalTransactionState:
        asked.append(msg.msg_id)
        if len(asked) == 1:
            raise RuntimeError("check failed")
        if len(asked) == 2:
            return "commit"  # type: ignore[return-value]
        return State.COMMIT

    def execute(msg: rmq.Message, arg: object) -> rmq.LocalTransactionState:
        return None  # type: ignore[return-value]

    with rmq.TransactionProducer(unique("py_tx_check"), execute, check, namesrv=namesrv) as p:
        r = p.send_in_transaction(rmq.Message(topic, b"checked thrice"))
        assert r.local_transaction_state is State.UNKNOWN
        # Asked again after each answer that was not a state, until the third commits.
        # The broker checks every 30 s (5.x) or 60 s (4.x, transactionCheckInterval).
        assert wait_for(lambda: len(asked) >= 3, timeout=200 if broker_4x() else 120), asked
        assert set(asked) == {r.msg_id}
        assert read_all(namesrv, topic, {b"checked thrice"}, settle_s=2.0) == [b"checked thrice"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("transaction check raised" in m for m in messages), messages
    assert any("returned 'commit', not a LocalTransactionState" in m for m in messages), messages
    assert any("returned None, not a LocalTransactionState" in m for m in messages), messages


def test_a_closed_transaction_producer_refuses_sends(namesrv, topic):
    p = rmq.TransactionProducer(unique("py_tx_closed"), lambda m, a: State.COMMIT, lambda m: State.COMMIT,
                                namesrv=namesrv)
    p.close()
    with pytest.raises(rmq.RocketMQError) as e:
        p.send_in_transaction(rmq.Message(topic, b"late"))
    assert e.value.kind == "RMQ_STATE"
