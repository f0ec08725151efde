"""What a push listener returns decides the fate of its messages: only a success
acknowledges them; anything else (a wrong value, None, an exception) means "deliver again
later", and exceptions are logged with their traceback."""

import logging
import threading

import rocketmq_blocking as rmq
from conftest import unique, wait_for


class Weird:
    pass


def _raise(e):
    raise e


# What the listener does with the first delivery of each message, by its body.
FIRST_DELIVERY = {
    "later": lambda: "later",
    "none": lambda: None,
    "float": lambda: 1.5,
    "object": lambda: Weird(),
    "value_error": lambda: _raise(ValueError("listener failed: value_error")),
    "keyboard_interrupt": lambda: _raise(KeyboardInterrupt("listener failed: keyboard_interrupt")),
}


def test_a_listener_that_does_not_return_success_gets_its_message_again_and_exceptions_are_logged(
    namesrv, topic, caplog
):
    caplog.set_level(logging.WARNING, logger="rocketmq_blocking")
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        for case in FIRST_DELIVERY:
            p.send(rmq.Message(topic, case.encode()))
    again = {}
    lock = threading.Lock()

    def listener(msgs):
        assert len(msgs) == 1
        m = msgs[0]
        case = m.body.decode()
        if m.reconsume_times == 0:
            return FIRST_DELIVERY[case]()
        with lock:
            again[case] = m.reconsume_times
        return rmq.ConsumeStatus.SUCCESS

    with rmq.PushConsumer(unique("py_retry"), topic, listener, namesrv=namesrv, from_first=True):
        # The broker's first retry delay is 10 s (delay level 3).
        came_again = wait_for(lambda: set(again) == set(FIRST_DELIVERY), timeout=90)
    assert came_again, f"acknowledged instead of retried: {sorted(set(FIRST_DELIVERY) - set(again))}"
    assert all(n > 0 for n in again.values()), again
    for case in ("value_error", "keyboard_interrupt"):
        logged = [
            r
            for r in caplog.records
            if r.name == "rocketmq_blocking" and r.exc_info and f"listener failed: {case}" in str(r.exc_info[1])
        ]
        assert logged, f"no log record with the {case} exception: {caplog.text}"
    assert "Traceback (most recent call last)" in caplog.text
    assert "ValueError: listener failed: value_error" in caplog.text
    assert "KeyboardInterrupt: listener failed: keyboard_interrupt" in caplog.text


def test_push_send_message_back_redelivers_through_the_retry_topic_with_one_more_reconsume(namesrv, topic):
    body = unique("send_back").encode()
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        sent = p.send(rmq.Message(topic, body))
    got = []
    lock = threading.Lock()

    def listener(msgs):
        with lock:
            got.extend(m for m in msgs if m.body == body)
        # Acknowledged: only the send-back brings it again.
        return rmq.ConsumeStatus.SUCCESS

    with rmq.PushConsumer(unique("py_send_back"), topic, listener, namesrv=namesrv, from_first=True) as c:
        assert wait_for(lambda: len(got) >= 1, timeout=60), "the message never came"
        first = got[0]
        assert first.reconsume_times == 0
        assert first.broker_name == sent.broker_name
        assert first.commit_log_offset > 0 and ":" in first.store_host, first
        c.send_message_back(first, delay_level=1)  # 1 s
        assert wait_for(lambda: len(got) >= 2, timeout=60), "the message sent back never came again"
    again = got[1]
    assert again.body == body and again.msg_id == first.msg_id
    assert again.reconsume_times == 1
    # It came through the group's retry topic: the broker records the original topic.
    assert again.properties.get("RETRY_TOPIC") == topic, again.properties
    assert again.commit_log_offset != first.commit_log_offset
    assert len(got) == 2, got
