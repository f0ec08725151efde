"""Async send callbacks: the library runs them in batches under one hold of the GIL
(python/src/deferred.rs). Each runs exactly once, with its own result, whatever thread
sent; and a callback that blocks on something only a later callback brings does not
hold up that callback (the queue moves to another thread)."""

import threading

import rocketmq_blocking as rmq
from conftest import unique


def test_every_callback_of_many_sending_threads_runs_once_with_its_result(namesrv, topic):
    threads, per_thread = 4, 500
    seen: dict = {}
    errors = []
    lock = threading.Lock()
    all_done = threading.Event()

    with rmq.Producer(unique("py_async_cb"), namesrv=namesrv) as p:

        def sender(t: int) -> None:
            for i in range(per_thread):
                body = f"{t}-{i}"

                def cb(result, error, body=body):
                    with lock:
                        if error is not None:
                            errors.append(error)
                        else:
                            seen[body] = seen.get(body, 0) + 1
                            seen.setdefault("ids", set()).add(result.msg_id)
                        if len(seen) - 1 + len(errors) == threads * per_thread:
                            all_done.set()

                p.send_async(rmq.Message(topic, body.encode()), cb)

        ts = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert all_done.wait(60), f"{len(seen) - 1} of {threads * per_thread} callbacks ran"
    assert not errors, errors[:3]
    ids = seen.pop("ids")
    assert len(seen) == threads * per_thread
    assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n != 1][:5]
    assert len(ids) == threads * per_thread


def test_a_callback_waiting_for_a_later_send_gets_its_result(namesrv, topic):
    """Callback A waits for the future of a send made inside it; that future is completed
    by a callback queued behind A. Run one after the other on one thread, A would wait
    forever."""
    outcome = []
    done = threading.Event()
    with rmq.Producer(unique("py_async_nested"), namesrv=namesrv) as p:

        def first(result, error):
            try:
                inner = p.send_async(rmq.Message(topic, b"inner"))
                outcome.append(("inner", inner.result(timeout=20).queue_offset >= 0))
            except BaseException as e:  # recorded, not raised: the test asserts it
                outcome.append(("inner", repr(e)))
            finally:
                done.set()

        p.send_async(rmq.Message(topic, b"outer"), first)
        assert done.wait(30), "the outer callback never finished"
    assert outcome == [("inner", True)], outcome


def test_a_raising_callback_is_logged_with_its_traceback_and_the_rest_run(namesrv, topic, caplog):
    import logging

    caplog.set_level(logging.ERROR, logger="rocketmq_blocking")
    ran = []
    done = threading.Event()
    n = 20
    with rmq.Producer(unique("py_async_raise"), namesrv=namesrv) as p:

        def cb(result, error, i=0):
            ran.append(i)
            if len(ran) == n:
                done.set()
            if i % 2 == 0:
                raise ValueError(f"callback {i} failed")

        for i in range(n):
            p.send_async(rmq.Message(topic, b"r"), lambda r, e, i=i: cb(r, e, i))
        assert done.wait(30), f"{len(ran)} of {n} callbacks ran"
    assert sorted(ran) == list(range(n))
    raised = [r for r in caplog.records if "the send_async callback raised" in r.getMessage()]
    assert len(raised) == n // 2, caplog.text
    assert "Traceback (most recent call last)" in caplog.text
    assert "ValueError: callback 0 failed" in caplog.text
