"""Drives the official rocketmq-client-python 2.0.0 package (from PyPI, unmodified) against
a real cluster through whatever librocketmq.so it finds (the test points it at ours with
LD_LIBRARY_PATH). Run by compat/tests/python_client.rs; one mode per run:

  produce     <namesrv> <topic> <count>          Producer: send_sync (+ one oneway)
  orderly     <namesrv> <topic> <count> <keys>   Producer(orderly=True): by sharding key
  transaction <namesrv> <topic> <count>          TransactionMQProducer: commit, rollback,
                                                 unknown (then the checker commits)
  consume     <namesrv> <topic> <group> <count> <orderly 0|1> <seconds> [<expression>]
                                                 PushConsumer until <count> distinct ids
  errors      <namesrv> <topic>                  the package's exceptions for failed calls

With RMQ_ACCESS_KEY and RMQ_SECRET_KEY set, every client gets them as session credentials
(ACL). consume also reads RMQ_MODEL ("broadcasting": MessageModel.BROADCASTING),
RMQ_INSTANCE (set_instance_name, which a broadcasting consumer's local offsets are kept
under) and RMQ_RAISE ("1": the listener raises on a message's first delivery, printing
"RAISED <id> <reconsume times>"); RMQ_BATCH the batch size (4). Messages tagged Probe are printed as "PROBE <queue>" and not counted (the
test sends them until a broadcasting consumer holds every queue). Prints "SENT <id> <body> ..." per acknowledged send and "GOT <id> <queue> <tags> <keys>
<body>" per distinct received message; the library it located as "LIB <name>" and the
file mapped as "MAPPED <path>".
"""
import os
import sys
import threading
import time

from rocketmq import ffi
from rocketmq.exceptions import (
    ProducerSendSyncFailed,
    ProducerStartFailed,
    PushConsumerStartFailed,
)
from rocketmq.ffi import MessageModel
from rocketmq.client import (
    ConsumeStatus,
    Message,
    Producer,
    PushConsumer,
    SendStatus,
    TransactionMQProducer,
    TransactionStatus,
)


def say(*parts):
    print(*parts, flush=True)


def credentials(client):
    ak = os.environ.get("RMQ_ACCESS_KEY")
    if ak:
        client.set_session_credentials(ak, os.environ["RMQ_SECRET_KEY"], "ALIYUN")


def message(topic, i, tag, prefix):
    msg = Message(topic)
    msg.set_keys("key-%d" % i)
    msg.set_tags(tag)
    msg.set_property("origin", "python")
    body = "%s-%d" % (prefix, i)
    msg.set_body(body)
    return msg, body


def produce(ns, topic, count):
    producer = Producer("py_producer_%d" % time.monotonic_ns())
    producer.set_name_server_address(ns)
    credentials(producer)
    producer.start()
    for i in range(count):
        msg, body = message(topic, i, "TagPy", "python")
        r = producer.send_sync(msg)
        assert r.status == SendStatus.OK, r
        say("SENT", r.msg_id, body, r.offset)
    msg, body = message(topic, count, "TagPy", "python-oneway")
    producer.send_oneway(msg)
    say("ONEWAY", body)
    producer.shutdown()


def orderly(ns, topic, count, keys):
    producer = Producer("py_orderly_%d" % time.monotonic_ns(), orderly=True)
    producer.set_name_server_address(ns)
    producer.start()
    for i in range(count):
        key = "order-%d" % (i % keys)
        msg, body = message(topic, i, "TagOrder", key)
        r = producer.send_orderly_with_sharding_key(msg, key)
        assert r.status == SendStatus.OK, r
        say("SENT", r.msg_id, body, r.offset)
    producer.shutdown()


def transaction(ns, topic, count):
    checked = []

    def check(msg):
        checked.append(msg.id)
        say("CHECK", msg.id, msg.body.decode())
        return TransactionStatus.COMMIT

    producer = TransactionMQProducer("py_tx_%d" % time.monotonic_ns(), check)
    producer.set_name_server_address(ns)
    producer.start()
    states = [TransactionStatus.COMMIT, TransactionStatus.ROLLBACK, TransactionStatus.UNKNOWN]
    unknown = set()
    for i in range(count):
        state = states[i % 3]
        msg, body = message(topic, i, "TagTx", "tx-" + state.name.lower())

        def local(m, args, state=state):
            say("LOCAL", m.id, m.body.decode(), args)
            return state

        r = producer.send_message_in_transaction(msg, local, None)
        assert r.status == SendStatus.OK, r
        say("SENT", r.msg_id, body, state.name)
        if state == TransactionStatus.UNKNOWN:
            unknown.add(r.msg_id)
    # The broker asks about unknown transactions within seconds (the test cluster's
    # transactionCheckInterval); the checker commits them.
    deadline = time.time() + 60
    while not unknown.issubset(set(checked)) and time.time() < deadline:
        time.sleep(0.2)
    say("CHECKED", len(set(checked) & unknown), "of", len(unknown))
    producer.shutdown()


def consume(ns, topic, group, count, is_orderly, seconds, expression="*"):
    seen = {}
    raised = set()
    done = threading.Event()
    lock = threading.Lock()
    model = MessageModel.CLUSTERING
    if os.environ.get("RMQ_MODEL") == "broadcasting":
        model = MessageModel.BROADCASTING
    raise_first = os.environ.get("RMQ_RAISE") == "1"

    def on_message(msg):
        if msg.tags == b"Probe":
            say("PROBE", msg.queue_id)
            return ConsumeStatus.CONSUME_SUCCESS
        with lock:
            if raise_first and msg.id not in raised:
                raised.add(msg.id)
                say("RAISED", msg.id, msg.reconsume_times)
                raise RuntimeError("listener failure for " + msg.id)
            if msg.id not in seen:
                seen[msg.id] = True
                say("GOT", msg.id, msg.queue_id, msg.tags.decode(), msg.keys.decode(),
                    msg.body.decode(), msg.get_property("origin").decode(),
                    msg.topic, msg.queue_offset, msg.reconsume_times)
            if len(seen) >= count:
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, orderly=is_orderly, message_model=model)
    consumer.set_name_server_address(ns)
    credentials(consumer)
    if os.environ.get("RMQ_INSTANCE"):
        consumer.set_instance_name(os.environ["RMQ_INSTANCE"])
    consumer.set_thread_count(2)
    consumer.set_message_batch_max_size(int(os.environ.get("RMQ_BATCH", "4")))
    consumer.subscribe(topic, on_message, expression=expression)
    consumer.start()
    say("STARTED")
    done.wait(seconds)
    consumer.shutdown()
    say("DONE", len(seen))


def expect(exc, call):
    try:
        call()
    except exc as e:
        say("RAISED", type(e).__name__, str(e).replace("\n", " "))
        return
    raise AssertionError("no %s" % exc.__name__)


def errors(ns, topic):
    # Sending before start: the library's status and GetLatestErrorMessage's text.
    producer = Producer("py_errors_%d" % time.monotonic_ns())
    producer.set_name_server_address(ns)
    msg, _ = message(topic, 0, "TagErr", "errors")
    expect(ProducerSendSyncFailed, lambda: producer.send_sync(msg))
    # No name server at all: the start fails.
    lost = Producer("py_errors_nons_%d" % time.monotonic_ns())
    expect(ProducerStartFailed, lost.start)
    # A consumer without a subscription's callback cannot start.
    consumer = PushConsumer("py_errors_c_%d" % time.monotonic_ns())
    consumer.set_name_server_address(ns)
    expect(PushConsumerStartFailed, consumer.start)
    # Bad values are refused before anything is sent.
    expect(Exception, lambda: producer.set_timeout(-5))
    expect(Exception, lambda: msg.set_property("UNIQ_KEY", "forged"))
    producer.start()
    r = producer.send_sync(msg)
    say("SENT", r.msg_id, "errors-0", r.offset)
    producer.shutdown()
    producer.shutdown()


def main():
    say("LIB", ffi._DYLIB_PATH)
    with open("/proc/self/maps") as maps:
        for path in sorted({l.split()[-1] for l in maps if "/librocketmq.so" in l.split()[-1]}):
            say("MAPPED", path)
    mode, ns, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "produce":
        produce(ns, topic, int(sys.argv[4]))
    elif mode == "orderly":
        orderly(ns, topic, int(sys.argv[4]), int(sys.argv[5]))
    elif mode == "transaction":
        transaction(ns, topic, int(sys.argv[4]))
    elif mode == "consume":
        expression = sys.argv[8] if len(sys.argv) > 8 else "*"
        consume(ns, topic, sys.argv[4], int(sys.argv[5]), sys.argv[6] == "1",
                float(sys.argv[7]), expression)
    elif mode == "errors":
        errors(ns, topic)
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
