"""Request-reply from Python: a push consumer answers requests with
``Producer.send_reply``, a requester's ``Producer.request`` returns the reply."""

import threading
from typing import List

import pytest

import rocketmq_blocking as rmq
from conftest import unique


def test_a_python_responder_answers_a_python_requester(namesrv, topic):
    answered = []
    with rmq.Producer(unique("py_replier"), namesrv=namesrv) as replier:

        def respond(msgs: List[rmq.ReceivedMessage]) -> int:
            for m in msgs:
                assert m.is_request
                replier.send_reply(m, b"re:" + m.body)
                answered.append(m.msg_id)
            return rmq.ConsumeStatus.SUCCESS

        with rmq.PushConsumer(unique("py_responder"), topic, respond, namesrv=namesrv, from_first=True):
            with rmq.Producer(unique("py_requester"), namesrv=namesrv) as requester:
                replies = {}

                def ask(i: int) -> None:
                    replies[i] = requester.request(rmq.Message(topic, f"ping{i}".encode()), 30_000)

                threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
    assert {i: r.body for i, r in replies.items()} == {i: f"re:ping{i}".encode() for i in range(4)}
    assert len(answered) == 4
    # A reply is no request.
    assert not any(r.is_request for r in replies.values())


def test_a_request_nobody_answers_times_out_and_a_plain_message_cannot_be_answered(namesrv, topic):
    with rmq.Producer(unique("py_requester"), namesrv=namesrv) as p:
        with pytest.raises(rmq.RocketMQError) as e:
            p.request(rmq.Message(topic, b"anyone?"), 1500)
        assert e.value.kind == "RMQ_TIMEOUT", e.value
        sent = p.send(rmq.Message(topic, b"plain"))
        with rmq.Admin(namesrv) as a:
            plain = a.view_message(sent.offset_msg_id)
        assert not plain.is_request
        with pytest.raises(rmq.RocketMQError) as e:
            p.send_reply(plain, b"no")
        assert e.value.kind == "RMQ_INVALID_ARGUMENT"
