"""Message properties on received messages, sends to a chosen queue and by sharding key
(the queue Java's SelectMessageQueueByHash picks), against the real cluster."""

import rocketmq_blocking as rmq
from conftest import unique


def java_hash(s: str) -> int:
    """Java's String.hashCode (ASCII keys: one UTF-16 unit per character), as an int."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def read_back(namesrv, topic, ids, timeout_s=60):
    """The received messages with these ids, by id (lite pull from the first offset)."""
    import time

    got = {}
    deadline = time.monotonic() + timeout_s
    with rmq.LitePullConsumer(unique("py_read"), topic, namesrv=namesrv, from_first=True, poll_timeout_ms=500) as c:
        while set(ids) - set(got) and time.monotonic() < deadline:
            for m in c.poll():
                if m.msg_id in ids:
                    got[m.msg_id] = m
    assert set(got) == set(ids), f"not read back: {set(ids) - set(got)}"
    return got


def test_received_messages_carry_their_properties(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        sent = p.send(rmq.Message(topic, b"p", tags="TagP", keys=["k1", "k2"], properties={"color": "red", "n": "1"}))
    m = read_back(namesrv, topic, [sent.msg_id])[sent.msg_id]
    assert m.properties["color"] == "red" and m.properties["n"] == "1", m.properties
    # The system properties too, as Java's getProperties() has them.
    assert m.properties["TAGS"] == "TagP" and m.properties["KEYS"] == "k1 k2", m.properties


def test_sends_to_a_chosen_queue_and_by_sharding_key_land_where_java_puts_them(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        queues = p.fetch_queues(topic)
        assert len(queues) == 4 and all(q.topic == topic for q in queues), queues
        sent = {}
        for q in queues:
            r = p.send(rmq.Message(topic, f"to {q.queue_id}".encode()), queue=q)
            assert (r.broker_name, r.queue_id) == (q.broker_name, q.queue_id), (r, q)
            sent[r.msg_id] = q.queue_id
        for key in ("order-1", "order-2", "order-3", "order-42"):
            want = queues[abs(java_hash(key)) % len(queues)]
            for i in range(3):
                r = p.send(rmq.Message(topic, f"{key} {i}".encode()), sharding_key=key)
                assert r.queue_id == want.queue_id, (key, r.queue_id, want)
                sent[r.msg_id] = want.queue_id
        try:
            p.send(rmq.Message(topic, b"x"), queue=queues[0], sharding_key="k")
            raise AssertionError("queue and sharding_key together were accepted")
        except ValueError:
            pass
    got = read_back(namesrv, topic, list(sent))
    assert {i: m.queue_id for i, m in got.items()} == sent


def test_a_namespace_prefixes_names_on_the_wire_and_clients_show_them_without_it(namesrv):
    import time

    ns, topic = unique("pyns"), unique("PyNsTopic")
    wire = f"{ns}%{topic}"
    rmq.create_topic(namesrv, wire, 4)
    time.sleep(0.5)  # the route, as the topic fixture waits
    with rmq.Producer(unique("py_producer"), namesrv=namesrv, namespace=ns) as p:
        sent = p.send(rmq.Message(topic, b"namespaced")).msg_id
        assert [q.topic for q in p.fetch_queues(topic)] == [topic] * 4
    # The namespaced client reads the plain name; a plain client the wire name.
    with rmq.LitePullConsumer(unique("py_ns"), topic, namesrv=namesrv, namespace=ns, from_first=True) as c:
        got = []
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            got = [m for m in c.poll(500) if m.msg_id == sent]
        assert got and got[0].topic == topic, got
    m = read_back(namesrv, wire, [sent])[sent]
    assert m.topic == wire and m.body == b"namespaced"


def test_bad_input_raises_a_clear_exception_before_anything_is_sent(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        invalid = {
            "the topic is blank": rmq.Message("", b"x"),
            "more than the maximum": rmq.Message(topic, b"x" * (4 * 1024 * 1024 + 1)),
            "used by the system": rmq.Message(topic, b"x", properties={"TAGS": "x"}),
        }
        for text, m in invalid.items():
            try:
                p.send(m)
                raise AssertionError(f"sent: {text}")
            except rmq.RocketMQError as e:
                assert e.kind == "RMQ_INVALID_ARGUMENT" and text in str(e), e
        for text, batch in {"empty": [], "one topic": [rmq.Message(topic, b"x"), rmq.Message(topic + "2", b"y")]}.items():
            try:
                p.send_batch(batch)
                raise AssertionError(f"sent: {text}")
            except rmq.RocketMQError as e:
                assert e.kind == "RMQ_INVALID_ARGUMENT" and text in str(e), e
        wrong_types = [
            lambda: p.send(None),
            lambda: p.send(rmq.Message(5, b"x")),
            lambda: p.send(rmq.Message(topic, "a str body")),
            lambda: p.send(rmq.Message(topic, b"x", properties={"n": 1})),
            lambda: p.send_batch([rmq.Message(topic, b"x"), "not a message"]),
            lambda: p.send_oneway(b"x"),
            lambda: p.send_async(None, lambda r, e: None),
        ]
        for i, f in enumerate(wrong_types):
            try:
                f()
                raise AssertionError(f"wrong type {i} accepted")
            except TypeError:
                pass
        try:
            p.send(rmq.Message(topic, b"x", delay_level=-1))
            raise AssertionError("a negative delay level was accepted")
        except (ValueError, OverflowError):
            pass
        # Still usable after all that.
        assert p.send(rmq.Message(topic, b"fine")).status == 0


def test_every_client_option_is_a_keyword_and_an_unknown_one_is_a_type_error(namesrv, topic):
    import pytest

    with pytest.raises(TypeError, match="no_such_option"):
        rmq.Producer(unique("py_opt"), namesrv=namesrv, no_such_option=1)
    with pytest.raises(ValueError, match="access_key and secret_key"):
        rmq.LitePullConsumer(unique("py_opt"), topic, namesrv=namesrv, access_key="ak")
    with pytest.raises(TypeError, match="no_such_option"):
        rmq.Admin(namesrv, no_such_option=1)
    # Every option the package lists reaches the library (a wrong type would raise).
    values = {
        "namesrv": namesrv,
        "instance_name": unique("py_opt_i"),
        "unit_name": "u1",
        "client_ip": "127.0.0.1",
        "vip_channel": False,
        "api_timeout_ms": 10_000,
        "connect_timeout_ms": 3_000,
        "poll_name_server_interval_ms": 30_000,
        "heartbeat_interval_ms": 30_000,
        "max_frame_size": 16 << 20,
        "async_permits": 1_000,
        "callback_threads": 2,
        "shutdown_timeout_ms": 5_000,
        "serialize_type": "rocketmq",
    }
    untested = set(rmq.CLIENT_OPTIONS) - set(values) - {"namespace", "access_key", "secret_key", "security_token", "tls"}
    assert not untested, f"options this test does not set: {untested}"
    with rmq.Producer(unique("py_opt"), **values) as p:
        sent = p.send(rmq.Message(topic, b"with every option")).msg_id
    assert read_back(namesrv, topic, [sent])[sent].body == b"with every option"
    # Both header encodings reach the broker; another name is refused before any client starts.
    with rmq.Producer(unique("py_opt"), namesrv=namesrv, serialize_type="json") as p:
        sent = p.send(rmq.Message(topic, b"json headers")).msg_id
    assert read_back(namesrv, topic, [sent])[sent].body == b"json headers"
    with pytest.raises(ValueError, match="serialize_type"):
        rmq.Producer(unique("py_opt"), namesrv=namesrv, serialize_type="xml")
