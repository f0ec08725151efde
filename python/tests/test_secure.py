"""TLS and ACL credentials as keyword arguments, against a cluster that enforces both:
mutual TLS (its CA, a client certificate) and signed requests. Run by
python/tests/pytest_suite.rs against a cluster of its own, which it describes in the
RMQ_SECURE_* variables; the main suite leaves this file out."""

import os
import time

import pytest

import rocketmq_blocking as rmq
from conftest import unique


@pytest.fixture(scope="module")
def secure():
    names = ("NAMESRV", "CA", "CERT", "KEY", "ACCESS_KEY", "SECRET_KEY")
    env = {n: os.environ.get(f"RMQ_SECURE_{n}") for n in names}
    if not all(env.values()):
        pytest.fail("set RMQ_SECURE_* (python/tests/pytest_suite.rs runs this file against its TLS and ACL cluster)")
    return env


def tls(s):
    return rmq.TlsConfig(ca_file=s["CA"], client_cert=s["CERT"], client_key=s["KEY"])


def test_a_client_with_tls_and_credentials_sends_and_consumes(secure):
    s = secure
    auth = dict(access_key=s["ACCESS_KEY"], secret_key=s["SECRET_KEY"], tls=tls(s))
    topic = unique("PySecure")
    rmq.create_topic(s["NAMESRV"], topic, 2, **auth)
    time.sleep(0.5)  # the route, as the topic fixture waits
    with rmq.Producer(unique("py_secure_p"), namesrv=s["NAMESRV"], **auth) as p:
        sent = {p.send(rmq.Message(topic, f"secure {i}".encode())).msg_id for i in range(3)}
    got = set()
    deadline = time.monotonic() + 60
    with rmq.LitePullConsumer(unique("py_secure_c"), topic, namesrv=s["NAMESRV"], from_first=True, **auth) as c:
        while sent - got and time.monotonic() < deadline:
            got |= {m.msg_id for m in c.poll(500)}
    assert sent <= got, f"not read back: {sent - got}"


def test_a_wrong_secret_is_refused_and_no_tls_gets_no_answer(secure):
    s = secure
    topic = unique("PySecureRefused")
    rmq.create_topic(s["NAMESRV"], topic, 2, access_key=s["ACCESS_KEY"], secret_key=s["SECRET_KEY"], tls=tls(s))
    time.sleep(0.5)
    with rmq.Producer(
        unique("py_secure_bad"),
        namesrv=s["NAMESRV"],
        access_key=s["ACCESS_KEY"],
        secret_key="not the secret",
        tls=tls(s),
        retries=0,
    ) as p:
        with pytest.raises(rmq.RocketMQError) as e:
            p.send(rmq.Message(topic, b"x"))
        assert e.value.kind == "RMQ_RESPONSE" and e.value.response_code is not None, e.value
    # Plain TCP to a TLS-only cluster: the name server closes the connection.
    with rmq.Producer(
        unique("py_secure_plain"),
        namesrv=s["NAMESRV"],
        access_key=s["ACCESS_KEY"],
        secret_key=s["SECRET_KEY"],
        send_timeout_ms=3000,
        retries=0,
    ) as p:
        with pytest.raises(rmq.RocketMQError) as e:
            p.send(rmq.Message(topic, b"x"))
        assert e.value.kind in {"RMQ_CONNECTION_CLOSED", "RMQ_NO_ROUTE", "RMQ_TIMEOUT", "RMQ_CONNECT"}, e.value


def test_bad_option_combinations_raise_before_anything_is_sent(secure):
    with pytest.raises(ValueError):
        rmq.Producer(unique("py_bad"), namesrv=secure["NAMESRV"], access_key="only the key")
    with pytest.raises(ValueError):
        rmq.Producer(unique("py_bad"), namesrv=secure["NAMESRV"], tls=rmq.TlsConfig(client_cert="c.pem"))
    with pytest.raises(TypeError):
        rmq.Producer(unique("py_bad"), namesrv=secure["NAMESRV"], tls="yes")
