"""send_async without a callback: a concurrent.futures.Future, which asyncio code can
await without blocking its event loop (the library's thread completes the loop's future
through call_soon_threadsafe)."""

import asyncio
import threading
import concurrent.futures

import rocketmq_blocking as rmq
from conftest import unique


def test_send_async_without_a_callback_returns_a_future(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        futures = [p.send_async(rmq.Message(topic, f"f{i}".encode())) for i in range(10)]
        assert all(isinstance(f, concurrent.futures.Future) for f in futures)
        results = [f.result(timeout=60) for f in futures]
    assert all(isinstance(r, rmq.SendResult) and r.status == 0 for r in results)
    assert len({r.msg_id for r in results}) == 10


def test_send_async_can_be_awaited_and_the_loop_keeps_running(namesrv, topic):
    async def main():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        t = asyncio.ensure_future(ticker())
        with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
            results = await asyncio.gather(*(p.send_async(rmq.Message(topic, f"a{i}".encode())) for i in range(50)))
            one = await p.send_async(rmq.Message(topic, b"one more"))
        stop.set()
        await t
        return results + [one], ticks

    results, ticks = asyncio.run(main())
    assert len({r.msg_id for r in results}) == 51 and all(r.status == 0 for r in results)
    assert ticks > 0


def test_async_for_over_a_lite_pull_consumer_reads_everything_and_ends_at_close(namesrv, topic):
    with rmq.Producer(unique("py_producer"), namesrv=namesrv) as p:
        sent = {p.send(rmq.Message(topic, f"it{i}".encode())).msg_id for i in range(5)}

    async def main():
        ticks = 0
        c = rmq.LitePullConsumer(unique("py_aiter"), topic, namesrv=namesrv, from_first=True, poll_timeout_ms=200)

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.ensure_future(ticker())
        got = set()
        ended = False
        async for m in c:
            got.add(m.msg_id)
            if got >= sent:
                # Closed from another thread while the iteration waits: it ends.
                asyncio.get_running_loop().call_later(0.3, lambda: threading.Thread(target=c.close).start())
        ended = True
        t.cancel()
        return got, ended, ticks

    got, ended, ticks = asyncio.run(asyncio.wait_for(main(), 90))
    assert sent <= got and ended, (sorted(sent - got), len(got), ended)
    # The loop ran its other task while polls waited (at least 0.3 s of them).
    assert ticks >= 10, ticks
