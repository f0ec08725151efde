"""A Pythonic Apache RocketMQ client on the rocketmq-blocking C ABI (ctypes).

    from rocketmq_blocking import Message, Producer

    with Producer("my_group", namesrv="127.0.0.1:9876") as p:
        r = p.send(Message("TopicTest", b"hello", tags="TagA"))
        print(r.msg_id)

Producers and consumers are context managers that shut down on exit; clients still
open when the interpreter exits are shut down by an ``atexit`` hook first. Every client
may be used from several threads at once, and ``close`` may come from any of them: it
waits for the calls in flight, and later calls raise :class:`RocketMQError` of kind
``"RMQ_STATE"``. Errors are :class:`RocketMQError` with the C ABI's code name (``kind``)
and the broker's response code when it sent one. The package logs (listener exceptions,
for one) on the ``rocketmq_blocking`` logger.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence

from ._lib import CONSUME_CALLBACK, SEND_CALLBACK, c_bytes_p, lib

__all__ = [
    "ConsumeStatus",
    "LitePullConsumer",
    "Message",
    "Producer",
    "PushConsumer",
    "ReceivedMessage",
    "RocketMQError",
    "SendResult",
    "version",
]


_log = logging.getLogger("rocketmq_blocking")


def version() -> str:
    """The C library's version."""
    return lib.rmq_version().decode()


class RocketMQError(Exception):
    """A failed call: ``kind`` is the result code's name (``"RMQ_TIMEOUT"``,
    ``"RMQ_RESPONSE"``, ...), ``response_code`` the broker's code or ``None``."""

    def __init__(self, kind: str, message: str, response_code: Optional[int] = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.response_code = response_code


def _error(code: int) -> RocketMQError:
    buf = ctypes.create_string_buffer(1024)
    n = ctypes.c_size_t()
    lib.rmq_last_error(buf, len(buf), ctypes.byref(n))
    present, rc = ctypes.c_bool(), ctypes.c_int32()
    lib.rmq_last_response_code(ctypes.byref(present), ctypes.byref(rc))
    name = (lib.rmq_result_name(code) or b"RMQ_UNKNOWN").decode()
    return RocketMQError(name, buf.value.decode("utf-8", "replace"), rc.value if present.value else None)


def _check(code: int) -> None:
    if code != 0:
        raise _error(code)


def _s(text: str) -> tuple:
    b = text.encode()
    return b, len(b)


def _str_out(f, handle) -> Optional[str]:
    p, n = c_bytes_p(), ctypes.c_size_t()
    _check(f(handle, ctypes.byref(p), ctypes.byref(n)))
    return ctypes.string_at(p, n.value).decode("utf-8", "replace") if p else None


def _bytes_out(f, handle) -> bytes:
    p, n = c_bytes_p(), ctypes.c_size_t()
    _check(f(handle, ctypes.byref(p), ctypes.byref(n)))
    return ctypes.string_at(p, n.value) if n.value else b""


def _int_out(f, handle, ctype) -> int:
    v = ctype()
    _check(f(handle, ctypes.byref(v)))
    return v.value


@dataclass
class Message:
    """A message to send."""

    topic: str
    body: bytes
    tags: Optional[str] = None
    keys: Sequence[str] = ()
    properties: Dict[str, str] = field(default_factory=dict)
    delay_level: Optional[int] = None

    def _handle(self) -> ctypes.c_void_p:
        h = ctypes.c_void_p()
        body = bytes(self.body)
        _check(lib.rmq_message_new(*_s(self.topic), body, len(body), ctypes.byref(h)))
        try:
            if self.tags is not None:
                _check(lib.rmq_message_set_tags(h, *_s(self.tags)))
            if self.keys:
                _check(lib.rmq_message_set_keys(h, *_s(" ".join(self.keys))))
            for k, v in self.properties.items():
                _check(lib.rmq_message_put_property(h, *_s(k), *_s(v)))
            if self.delay_level is not None:
                _check(lib.rmq_message_set_delay_level(h, self.delay_level))
        except BaseException:
            lib.rmq_message_free(h)
            raise
        return h


@dataclass(frozen=True)
class ReceivedMessage:
    """A received message, copied out of the library."""

    msg_id: str
    topic: str
    tags: Optional[str]
    keys: List[str]
    body: bytes
    queue_id: int
    queue_offset: int
    reconsume_times: int
    born_timestamp_ms: int
    store_timestamp_ms: int

    @staticmethod
    def _of(h) -> "ReceivedMessage":
        keys = _str_out(lib.rmq_message_ext_keys, h)
        return ReceivedMessage(
            msg_id=_str_out(lib.rmq_message_ext_msg_id, h) or "",
            topic=_str_out(lib.rmq_message_ext_topic, h) or "",
            tags=_str_out(lib.rmq_message_ext_tags, h),
            keys=keys.split() if keys else [],
            body=_bytes_out(lib.rmq_message_ext_body, h),
            queue_id=_int_out(lib.rmq_message_ext_queue_id, h, ctypes.c_int32),
            queue_offset=_int_out(lib.rmq_message_ext_queue_offset, h, ctypes.c_int64),
            reconsume_times=_int_out(lib.rmq_message_ext_reconsume_times, h, ctypes.c_uint32),
            born_timestamp_ms=_int_out(lib.rmq_message_ext_born_timestamp_ms, h, ctypes.c_int64),
            store_timestamp_ms=_int_out(lib.rmq_message_ext_store_timestamp_ms, h, ctypes.c_int64),
        )


@dataclass(frozen=True)
class SendResult:
    """What the broker answered to a send."""

    msg_id: str
    offset_msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int
    status: int

    @staticmethod
    def _of(h) -> "SendResult":
        q = ctypes.c_void_p()
        _check(lib.rmq_send_result_queue(h, ctypes.byref(q)))
        return SendResult(
            msg_id=_str_out(lib.rmq_send_result_msg_id, h) or "",
            offset_msg_id=_str_out(lib.rmq_send_result_offset_msg_id, h) or "",
            broker_name=_str_out(lib.rmq_message_queue_broker_name, q) or "",
            queue_id=_int_out(lib.rmq_message_queue_id, q, ctypes.c_int32),
            queue_offset=_int_out(lib.rmq_send_result_queue_offset, h, ctypes.c_int64),
            status=_int_out(lib.rmq_send_result_status, h, ctypes.c_int),
        )


# Clients still open at interpreter exit are closed first, before Python tears down the
# objects their callbacks use.
_open: "weakref.WeakSet" = weakref.WeakSet()

# How long the exit hook waits, for all clients together, for calls other threads (daemon
# threads, typically) are making; a client still in use then is left open, not freed.
_EXIT_WAIT_S = 5.0


@atexit.register
def _close_all() -> None:
    clients = list(_open)
    for c in clients:
        c._begin_close()
    deadline = time.monotonic() + _EXIT_WAIT_S
    for c in clients:
        try:
            if not c._finish_close(max(0.0, deadline - time.monotonic())):
                _log.warning(
                    "%s still in use by another thread %.0f s after the interpreter began to exit: left open",
                    type(c).__name__,
                    _EXIT_WAIT_S,
                )
        except Exception:
            _log.exception("closing %s at exit", type(c).__name__)


def _configure(prefix: str, b, namesrv: Optional[str], instance_name: Optional[str]) -> None:
    if namesrv is not None:
        _check(getattr(lib, f"{prefix}_namesrv")(b, *_s(namesrv)))
    if instance_name is not None:
        _check(getattr(lib, f"{prefix}_instance_name")(b, *_s(instance_name)))


def _start(prefix: str, b) -> ctypes.c_void_p:
    h = ctypes.c_void_p()
    _check(getattr(lib, f"{prefix}_start")(b, ctypes.byref(h)))  # consumes the builder
    return h


class _Client:
    """A handle shared by threads. The C ABI frees a handle only with exclusive access, so
    every call holds it through ``_use`` and ``close`` frees it only once no call is inside
    the library: a reader/writer guard whose writer comes once."""

    _free: Callable

    def __init__(self) -> None:
        self._h: Optional[ctypes.c_void_p] = None
        self._lock = threading.Lock()
        # Guards the three below; notified whenever a call leaves.
        self._state = threading.Condition(threading.Lock())
        self._inside: Dict[int, int] = {}  # calls inside the library, by thread
        self._closing = False
        self._free_on_leave = False

    @contextmanager
    def _use(self) -> Iterator[ctypes.c_void_p]:
        """The handle for one call into the library; raises the closed error once ``close``
        has begun."""
        me = threading.get_ident()
        with self._state:
            if self._closing or self._h is None:
                raise RocketMQError("RMQ_STATE", "the client is closed")
            self._inside[me] = self._inside.get(me, 0) + 1
            h = self._h
        try:
            yield h
        finally:
            free = None
            with self._state:
                n = self._inside.pop(me) - 1
                if n:
                    self._inside[me] = n
                elif not self._inside and self._free_on_leave:
                    # The close came from inside a call on this thread: the last call out frees.
                    free, self._h, self._free_on_leave = self._h, None, False
                self._state.notify_all()
            if free is not None:
                type(self)._free(free)

    def _begin_close(self) -> bool:
        """Refuses new calls; False if another close began first."""
        with self._state:
            if self._closing:
                return False
            self._closing = True
            return True

    def _finish_close(self, timeout: Optional[float]) -> bool:
        """Waits up to ``timeout`` seconds (``None``: as long as it takes) for the calls
        inside the library to return, then frees the handle. False, leaving the handle
        unfreed, if calls were still inside when the time was up."""
        me = threading.get_ident()
        with self._state:
            if self._h is None:
                return True
            if me in self._inside:
                # A call on this thread is inside: it cannot be waited for here.
                self._free_on_leave = True
                return True
            if not self._state.wait_for(lambda: not self._inside, timeout):
                return False
            h, self._h = self._h, None
        if h is not None:  # None: a concurrent close freed it meanwhile
            type(self)._free(h)
        return True

    def close(self) -> None:
        """Shuts down and frees the client, after the calls other threads are making on
        it have returned; calls made from now on raise :class:`RocketMQError` of kind
        ``"RMQ_STATE"``. Idempotent. A close that finds another one under way returns at
        once (so a listener may close its own consumer while another thread closes it)."""
        if self._begin_close():
            self._finish_close(None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Producer(_Client):
    """A started producer (Java ``DefaultMQProducer``). Thread-safe."""

    _free = lib.rmq_producer_free

    def __init__(
        self,
        group: str,
        namesrv: Optional[str] = None,
        send_timeout_ms: Optional[int] = None,
        retries: Optional[int] = None,
        instance_name: Optional[str] = None,
    ) -> None:
        super().__init__()
        b = ctypes.c_void_p()
        _check(lib.rmq_producer_builder_new(*_s(group), ctypes.byref(b)))
        try:
            _configure("rmq_producer_builder", b, namesrv, instance_name)
            if send_timeout_ms is not None:
                _check(lib.rmq_producer_builder_send_timeout_ms(b, send_timeout_ms))
            if retries is not None:
                _check(lib.rmq_producer_builder_retries(b, retries))
        except BaseException:
            lib.rmq_producer_builder_free(b)
            raise
        self._h = _start("rmq_producer_builder", b)
        # Async callbacks in flight, kept alive until they ran.
        self._pending: Dict[int, object] = {}
        self._next = 0
        _open.add(self)

    def send(self, message: Message) -> SendResult:
        """Sends and waits for the broker."""
        m = message._handle()
        try:
            r = ctypes.c_void_p()
            with self._use() as h:
                _check(lib.rmq_producer_send(h, m, ctypes.byref(r)))
            try:
                return SendResult._of(r)
            finally:
                lib.rmq_send_result_free(r)
        finally:
            lib.rmq_message_free(m)

    def send_oneway(self, message: Message) -> None:
        """Sends without waiting for an answer."""
        m = message._handle()
        try:
            with self._use() as h:
                _check(lib.rmq_producer_send_oneway(h, m))
        finally:
            lib.rmq_message_free(m)

    def send_batch(self, messages: Sequence[Message]) -> SendResult:
        """Sends messages of one topic as one batch."""
        handles = [m._handle() for m in messages]
        try:
            arr = (ctypes.c_void_p * len(handles))(*[h.value for h in handles])
            r = ctypes.c_void_p()
            with self._use() as h:
                _check(lib.rmq_producer_send_batch(h, arr, len(handles), ctypes.byref(r)))
            try:
                return SendResult._of(r)
            finally:
                lib.rmq_send_result_free(r)
        finally:
            for h in handles:
                lib.rmq_message_free(h)

    def send_async(self, message: Message, callback: Callable[[Optional[SendResult], Optional[RocketMQError]], None]) -> None:
        """Sends without blocking; ``callback(result, error)`` runs later on a library
        thread (one of the two is ``None``)."""
        with self._lock:
            key = self._next
            self._next += 1

        def done(_ud, code, r) -> None:
            # Nothing may escape into ctypes, which would only print it.
            try:
                if code == 0:
                    callback(SendResult._of(r), None)
                else:
                    callback(None, _error(code))
            except BaseException:
                _log.exception("the send_async callback raised")
            finally:
                with self._lock:
                    self._pending.pop(key, None)

        cb = SEND_CALLBACK(done)
        with self._lock:
            self._pending[key] = cb
        m = message._handle()
        try:
            with self._use() as h:
                rc = lib.rmq_producer_send_async(h, m, cb, None)
            if rc != 0:
                with self._lock:
                    self._pending.pop(key, None)
                raise _error(rc)
        finally:
            lib.rmq_message_free(m)


class ConsumeStatus:
    """What a listener returns. Only ``SUCCESS`` (or ``True``) acknowledges the messages;
    anything else (``LATER``, ``False``, ``None``, any other value, an exception) means
    "deliver them again later", as Java treats a ``null`` status."""

    SUCCESS = 0
    LATER = 1


def _consume_status(status: object) -> int:
    """The C status of what a listener returned: success only for an explicit success."""
    if status is True:
        return ConsumeStatus.SUCCESS
    if isinstance(status, int) and not isinstance(status, bool):
        if status == ConsumeStatus.SUCCESS:
            return ConsumeStatus.SUCCESS
        if status == ConsumeStatus.LATER:
            return ConsumeStatus.LATER
    if status is not False:
        _log.warning("the listener returned %r, not a ConsumeStatus: its messages come again later", status)
    return ConsumeStatus.LATER


class PushConsumer(_Client):
    """A push consumer (Java ``DefaultMQPushConsumer``) calling ``listener(messages)``
    on library threads; ``listener`` returns a :class:`ConsumeStatus` (or a bool): only
    a success acknowledges the messages, anything else means "deliver again later". An
    exception in the listener (any, ``KeyboardInterrupt`` included) means the same, and
    is logged with its traceback on the ``rocketmq_blocking`` logger. ``close`` returns
    after every listener call in flight has returned (a listener may close its own
    consumer: that close does not wait for the call it is made from)."""

    _free = lib.rmq_push_consumer_free

    def __init__(
        self,
        group: str,
        topic: str,
        listener: Callable[[List[ReceivedMessage]], object],
        expression: str = "*",
        sql: Optional[str] = None,
        namesrv: Optional[str] = None,
        orderly: bool = False,
        broadcasting: bool = False,
        from_first: bool = False,
        threads: Optional[tuple] = None,
        batch_max_size: Optional[int] = None,
        instance_name: Optional[str] = None,
    ) -> None:
        super().__init__()

        def on_messages(_ud, msgs, count, _queue) -> int:
            # Everything inside the try: an exception escaping into ctypes would leave the
            # C return value undefined (0 is success).
            try:
                return _consume_status(listener([ReceivedMessage._of(msgs[i]) for i in range(count)]))
            except BaseException:
                try:
                    _log.exception("the listener raised: its messages come again later")
                except BaseException:
                    pass
                return ConsumeStatus.LATER

        self._callback = CONSUME_CALLBACK(on_messages)  # must outlive the consumer
        b = ctypes.c_void_p()
        _check(lib.rmq_push_consumer_builder_new(*_s(group), ctypes.byref(b)))
        try:
            _configure("rmq_push_consumer_builder", b, namesrv, instance_name)
            if sql is not None:
                _check(lib.rmq_push_consumer_builder_subscribe_sql(b, *_s(topic), *_s(sql)))
            else:
                _check(lib.rmq_push_consumer_builder_subscribe(b, *_s(topic), *_s(expression)))
            _check(lib.rmq_push_consumer_builder_message_model(b, 1 if broadcasting else 0))
            _check(lib.rmq_push_consumer_builder_consume_from(b, 1 if from_first else 0, 0))
            if threads is not None:
                _check(lib.rmq_push_consumer_builder_consume_threads(b, threads[0], threads[1]))
            if batch_max_size is not None:
                _check(lib.rmq_push_consumer_builder_consume_batch_max_size(b, batch_max_size))
            register = (
                lib.rmq_push_consumer_builder_orderly_listener if orderly else lib.rmq_push_consumer_builder_listener
            )
            _check(register(b, self._callback, None))
        except BaseException:
            lib.rmq_push_consumer_builder_free(b)
            raise
        self._h = _start("rmq_push_consumer_builder", b)
        _open.add(self)


class LitePullConsumer(_Client):
    """A lite pull consumer (Java ``DefaultLitePullConsumer``): ``poll`` or iterate."""

    _free = lib.rmq_lite_pull_consumer_free

    def __init__(
        self,
        group: str,
        topic: str,
        expression: str = "*",
        namesrv: Optional[str] = None,
        from_first: bool = False,
        auto_commit: bool = True,
        poll_timeout_ms: int = 1000,
        instance_name: Optional[str] = None,
    ) -> None:
        super().__init__()
        self.poll_timeout_ms = poll_timeout_ms
        b = ctypes.c_void_p()
        _check(lib.rmq_lite_pull_consumer_builder_new(*_s(group), ctypes.byref(b)))
        try:
            _configure("rmq_lite_pull_consumer_builder", b, namesrv, instance_name)
            _check(lib.rmq_lite_pull_consumer_builder_subscribe(b, *_s(topic), *_s(expression)))
            _check(lib.rmq_lite_pull_consumer_builder_consume_from(b, 1 if from_first else 0, 0))
            _check(lib.rmq_lite_pull_consumer_builder_auto_commit(b, auto_commit))
        except BaseException:
            lib.rmq_lite_pull_consumer_builder_free(b)
            raise
        self._h = _start("rmq_lite_pull_consumer_builder", b)
        _open.add(self)

    def poll(self, timeout_ms: Optional[int] = None) -> List[ReceivedMessage]:
        """Waits up to ``timeout_ms`` for messages (possibly none)."""
        t = self.poll_timeout_ms if timeout_ms is None else timeout_ms
        lst = ctypes.c_void_p()
        with self._use() as h:
            _check(lib.rmq_lite_pull_consumer_poll(h, t, ctypes.byref(lst)))
        try:
            n = _int_out(lib.rmq_message_list_len, lst, ctypes.c_size_t)
            out = []
            for i in range(n):
                m = ctypes.c_void_p()
                _check(lib.rmq_message_list_get(lst, i, ctypes.byref(m)))
                out.append(ReceivedMessage._of(m))
            return out
        finally:
            lib.rmq_message_list_free(lst)

    def commit(self) -> None:
        """Commits the offsets of what was polled."""
        with self._use() as h:
            _check(lib.rmq_lite_pull_consumer_commit(h))

    def __iter__(self) -> Iterator[ReceivedMessage]:
        """Yields messages as they come, until the consumer is closed (by any thread)."""
        while True:
            try:
                batch = self.poll()
            except RocketMQError as e:
                if e.kind == "RMQ_STATE" and self._closing:
                    return
                raise
            yield from batch


def create_topic(namesrv: str, topic: str, queues: int = 4) -> None:
    """Creates ``topic`` on every master broker of the cluster."""
    a = ctypes.c_void_p()
    _check(lib.rmq_admin_new(*_s(namesrv), ctypes.byref(a)))
    try:
        _check(lib.rmq_admin_create_topic(a, *_s(topic), queues))
    finally:
        lib.rmq_admin_free(a)


__all__.append("create_topic")
