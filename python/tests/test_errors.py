"""Errors are a hierarchy: one subclass of RocketMQError per kind, raised by the native
module and by the Python layer alike, with the broker's response code and whether a
retry may succeed."""

import pytest

import rocketmq_blocking as rmq
from conftest import unique


def test_every_kind_has_its_own_subclass_of_rocketmq_error():
    classes = list(rmq.ERROR_CLASSES.values())
    assert len(set(classes)) == len(classes) == 13
    for kind, cls in rmq.ERROR_CLASSES.items():
        assert issubclass(cls, rmq.RocketMQError) and cls is not rmq.RocketMQError, kind
        assert kind in cls.__doc__, (kind, cls.__doc__)
        assert getattr(rmq, cls.__name__) is cls and cls.__name__ in rmq.__all__


def test_the_library_raises_the_subclass_of_the_kind(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        with pytest.raises(rmq.InvalidArgumentError) as bad:
            p.send(rmq.Message("bad topic!", b"x"))
        assert bad.value.kind == "RMQ_INVALID_ARGUMENT"
        assert bad.value.response_code is None and bad.value.retriable is False

        with pytest.raises(rmq.RocketMQTimeoutError) as late:
            p.request(rmq.Message(topic, b"nobody answers"), 1000)
        assert late.value.kind == "RMQ_TIMEOUT" and late.value.retriable is True

        # From the async path too: the callback gets the subclass.
        with pytest.raises(rmq.InvalidArgumentError):
            p.send_async(rmq.Message("bad topic!", b"x"))

    # Raised by the Python layer: a closed client.
    with pytest.raises(rmq.StateError) as closed:
        p.send(rmq.Message(topic, b"x"))
    assert closed.value.kind == "RMQ_STATE" and not closed.value.retriable

    # A name server nobody listens on: a transport failure, worth a retry.
    with rmq.Producer(unique("py_producer"), namesrv="127.0.0.1:1", send_timeout_ms=2000, retries=0) as p:
        with pytest.raises(rmq.RocketMQError) as down:
            p.send(rmq.Message(topic, b"x"))
    e = down.value
    assert type(e) is rmq.ERROR_CLASSES[e.kind], (type(e), e.kind)
    assert e.retriable == (e.kind != "RMQ_NO_ROUTE"), e


def test_the_base_class_still_catches_everything_and_keeps_its_fields():
    e = rmq.RocketMQError("RMQ_OTHER", "something", 17)
    assert (e.kind, e.message, e.response_code, e.retriable) == ("RMQ_OTHER", "something", 17, False)
    assert str(e) == "RMQ_OTHER: something"
    with pytest.raises(rmq.RocketMQError):
        raise rmq.ResponseError("RMQ_RESPONSE", "busy", 2, True)
