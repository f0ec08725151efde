"""A Pythonic Apache RocketMQ client: rocketmq-blocking's Rust client in a native
extension module (``rocketmq_blocking._native``, PyO3).

    from rocketmq_blocking import Message, Producer

    with Producer("my_group", namesrv="127.0.0.1:9876") as p:
        r = p.send(Message("TopicTest", b"hello", tags="TagA"))
        print(r.msg_id)

Every client (and :func:`create_topic`) takes the same client options as keyword
arguments, listed in :data:`CLIENT_OPTIONS` (the Rust ``ClientOptions``): ``namesrv``
(else ``NAMESRV_ADDR``), ``instance_name``, ``namespace`` (Java ``setNamespace``: groups
and topics are ``ns%Name`` on the wire, and the client shows them without the prefix),
ACL credentials (``access_key``, ``secret_key``, ``security_token``: every request is
signed, as Java's ``AclClientRPCHook`` does), ``tls`` (``True`` for the system's trust
store, or a :class:`TlsConfig`), timeouts and periods in milliseconds
(``api_timeout_ms``, ``heartbeat_interval_ms``, ...), and ``serialize_type``, the
encoding of request headers (``"json"``, Java's default, or ``"rocketmq"``, the compact
binary one Java's benchmark tools use). An unknown option is a ``TypeError``.

Producers and consumers are context managers that shut down on exit; clients still
open when the interpreter exits are shut down by an ``atexit`` hook first. Every client
may be used from several threads at once, and ``close`` may come from any of them: it
waits for the calls in flight, and later calls raise :class:`RocketMQError` of kind
``"RMQ_STATE"``. Every call that waits (a send, a poll, a close) releases the GIL, and
listeners and callbacks hold it only while they run. Errors are subclasses of
:class:`RocketMQError`, one per kind (:data:`ERROR_CLASSES`), with the error kind's name
(``kind``, as in the C ABI), the broker's response code when it sent one, and whether a
retry may succeed (``retriable``). The package logs (listener exceptions, for one) on the
``rocketmq_blocking`` logger, and the library's own records reach :mod:`logging` on
loggers under it (warnings and errors; see :func:`set_log_level`).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import enum
import json
import logging
import os
import inspect
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Dict,
    Generator,
    Generic,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from . import _native

# A native client: ``_native.Producer``, ``PushConsumer``, ``LitePullConsumer``, ...
_Native = TypeVar(
    "_Native",
    _native.Producer,
    _native.TransactionProducer,
    _native.PushConsumer,
    _native.LitePullConsumer,
    _native.SimpleConsumer,
    _native.NativeAdmin,
)
_Self = TypeVar("_Self", bound="_Client[Any]")
# A native client that sends: ``_native.Producer`` or ``TransactionProducer``.
_Sender = TypeVar("_Sender", _native.Producer, _native.TransactionProducer)

__all__ = [
    "Admin",
    "CLIENT_OPTIONS",
    "ConfigError",
    "ConnectError",
    "ConnectionClosedError",
    "ConsumeContext",
    "ConsumeHook",
    "ConsumeHookStatus",
    "ConsumeStats",
    "ConsumeStatus",
    "DecodeError",
    "ERROR_CLASSES",
    "InvalidArgumentError",
    "IoError",
    "LitePullConsumer",
    "LocalTransactionState",
    "Message",
    "MessageQueue",
    "NoRouteError",
    "OverloadedError",
    "Producer",
    "ProducerConnection",
    "PoppedMessage",
    "PushConsumer",
    "QueueProgress",
    "ReceivedMessage",
    "ResponseError",
    "RocketMQError",
    "RocketMQTimeoutError",
    "ReplyFuture",
    "SendFuture",
    "SendHook",
    "SendResult",
    "set_log_level",
    "SimpleConsumer",
    "StateError",
    "SubscriptionGroup",
    "TlsConfig",
    "TlsError",
    "UnsupportedError",
    "TransactionProducer",
    "TraceStats",
    "TransactionSendResult",
    "version",
]


_log = logging.getLogger("rocketmq_blocking")


def set_log_level(level: int) -> None:
    """The least severe of the library's own records that reach :mod:`logging`
    (default ``logging.WARNING``). They go to loggers named after the Rust module that
    logged, under ``rocketmq_blocking`` (``rocketmq_blocking.consumer.lite_pull``, ...),
    where the usual levels and handlers apply; lowering this costs the library time."""
    _native.set_log_level(int(level))


def version() -> str:
    """The library's version."""
    return _native.version()


class RocketMQError(Exception):
    """A failed call, the base of one subclass per kind of error (:class:`NoRouteError`,
    :class:`ResponseError`, ...): ``kind`` is the kind's name as in the C ABI
    (``"RMQ_TIMEOUT"``, ``"RMQ_RESPONSE"``, ...), ``response_code`` the broker's code or
    ``None``, ``retriable`` whether the same call may succeed if tried again (a timeout, a
    lost connection, a busy broker: the cases the Java producer retries)."""

    def __init__(
        self, kind: str, message: str, response_code: Optional[int] = None, retriable: bool = False
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.response_code = response_code
        self.retriable = retriable


class RocketMQTimeoutError(RocketMQError):
    """``RMQ_TIMEOUT``: a call ran out of time (named so as not to shadow the builtin)."""


class ConnectError(RocketMQError):
    """``RMQ_CONNECT``: no connection to a name server or broker."""


class ConnectionClosedError(RocketMQError):
    """``RMQ_CONNECTION_CLOSED``: the connection closed before the answer came."""


class ResponseError(RocketMQError):
    """``RMQ_RESPONSE``: the broker or name server answered with an error code
    (``response_code``)."""


class DecodeError(RocketMQError):
    """``RMQ_DECODE``: a peer sent what could not be decoded."""


class InvalidArgumentError(RocketMQError):
    """``RMQ_INVALID_ARGUMENT``: bad input, refused before anything was sent."""


class StateError(RocketMQError):
    """``RMQ_STATE``: the client cannot do that now (closed, shutting down)."""


class OverloadedError(RocketMQError):
    """``RMQ_OVERLOADED``: too many async calls in flight (``async_permits``)."""


class NoRouteError(RocketMQError):
    """``RMQ_NO_ROUTE``: no route for the topic (it does not exist, or no broker has it)."""


class IoError(RocketMQError):
    """``RMQ_IO``: a local I/O failure (reading a file, a socket)."""


class ConfigError(RocketMQError):
    """``RMQ_CONFIG``: an invalid client configuration."""


class TlsError(RocketMQError):
    """``RMQ_TLS``: the TLS handshake or its configuration failed."""


class UnsupportedError(RocketMQError):
    """``RMQ_UNSUPPORTED``: the broker does not offer the request (POP on a 4.x broker)."""


#: The error class of each kind; a kind not listed (``RMQ_OTHER``) is :class:`RocketMQError`.
ERROR_CLASSES: Dict[str, Type[RocketMQError]] = {
    "RMQ_TIMEOUT": RocketMQTimeoutError,
    "RMQ_CONNECT": ConnectError,
    "RMQ_CONNECTION_CLOSED": ConnectionClosedError,
    "RMQ_RESPONSE": ResponseError,
    "RMQ_DECODE": DecodeError,
    "RMQ_INVALID_ARGUMENT": InvalidArgumentError,
    "RMQ_STATE": StateError,
    "RMQ_OVERLOADED": OverloadedError,
    "RMQ_NO_ROUTE": NoRouteError,
    "RMQ_IO": IoError,
    "RMQ_CONFIG": ConfigError,
    "RMQ_TLS": TlsError,
    "RMQ_UNSUPPORTED": UnsupportedError,
}


def _error(kind: str, message: str, response_code: Optional[int] = None, retriable: bool = False) -> RocketMQError:
    """The error of ``kind``, as its class; what ``_native`` raises errors with."""
    return ERROR_CLASSES.get(kind, RocketMQError)(kind, message, response_code, retriable)


_native.set_error_class(_error)


def _as_error(e: Optional[BaseException]) -> Optional[RocketMQError]:
    """An error ``_native`` passed (a :class:`RocketMQError`, the class it raises)."""
    if e is None or isinstance(e, RocketMQError):
        return e
    return RocketMQError("RMQ_OTHER", str(e))


@dataclass
class Message:
    """A message to send.

    A timer message (5.x brokers) is delivered at ``deliver_time_ms`` (milliseconds since
    the Unix epoch; Java ``setDeliverTimeMs``) or ``delivery_delay_ms`` after the broker
    stores it (Java ``setDelayTimeMs``, ``setDelayTimeSec`` for whole seconds); at most
    one of the two, and not with ``delay_level``. A time in the past (beyond the broker's
    tolerance) or beyond the broker's maximum delay raises :class:`RocketMQError`; a 4.x
    broker has no timer and delivers such a message at once."""

    topic: str
    body: bytes
    tags: Optional[str] = None
    keys: Sequence[str] = ()
    properties: Dict[str, str] = field(default_factory=dict)
    delay_level: Optional[int] = None
    deliver_time_ms: Optional[int] = None
    delivery_delay_ms: Optional[int] = None

    def _tuple(self) -> _native.MessageTuple:
        """The form ``_native`` takes."""
        if self.deliver_time_ms is not None and self.delivery_delay_ms is not None:
            raise ValueError("deliver_time_ms and delivery_delay_ms exclude each other")
        for name in ("deliver_time_ms", "delivery_delay_ms"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ValueError(f"{name} must be a non-negative int, not {v!r}")
        return (
            self.topic,
            bytes(self.body),
            self.tags,
            list(self.keys),
            dict(self.properties),
            self.delay_level,
            self.deliver_time_ms,
            self.delivery_delay_ms,
        )


def _message(m: object) -> _native.MessageTuple:
    """``m``'s form for ``_native``; ``TypeError`` for anything but a :class:`Message`."""
    if not isinstance(m, Message):
        raise TypeError(f"expected a Message, not {type(m).__name__}")
    return m._tuple()


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
    #: Every property, the system's (``TAGS``, ``KEYS``, ``UNIQ_KEY``, ...) included.
    properties: Dict[str, str] = field(default_factory=dict)
    #: The broker group that delivered it (Java ``getBrokerName``).
    broker_name: str = ""
    #: Where the broker keeps it: the offset in its commit log and the storing broker's
    #: ``ip:port`` (Java ``getCommitLogOffset``, ``getStoreHost``), which
    #: :meth:`PushConsumer.send_message_back` sends.
    commit_log_offset: int = 0
    store_host: str = ""
    #: For a request (:meth:`Producer.request`), its reply without the body, for
    #: :meth:`Producer.send_reply`; else ``None``.
    _reply: Optional[_native.ReplyTemplate] = field(default=None, repr=False, compare=False)

    @property
    def is_request(self) -> bool:
        """Whether this is a request a responder answers with :meth:`Producer.send_reply`."""
        return self._reply is not None


@dataclass(frozen=True)
class MessageQueue:
    """One queue of a topic on one broker (:meth:`Producer.fetch_queues`)."""

    topic: str
    broker_name: str
    queue_id: int


@dataclass(frozen=True)
class SendResult:
    """What the broker answered to a send."""

    msg_id: str
    offset_msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int
    status: int


def _callback_raised(what: str, e: BaseException) -> None:
    """Logs what an async call's callback raised, with its traceback (called by
    ``_native``, which calls the callback)."""
    _log.error("the %s callback raised", what, exc_info=e)


# The producers' sends read a Message and make a SendResult in ``_native`` (a send's
# Python code runs on cold caches, after the thread slept on the broker's answer).
_native.set_classes(Message, SendResult, _callback_raised)


class SendHook:
    """Called around every send of a :class:`Producer` given it as ``send_hook=`` (Rust
    ``SendHook``, Java ``SendMessageHook``). Subclass it and override either method.

    ``before_send(message)`` runs on the sending thread before the message is encoded:
    properties it adds to (or changes in) ``message.properties`` are sent with it; other
    changes are ignored. ``after_send(message, result, error)`` runs with the outcome:
    on the sending thread for ``send``, ``send_oneway`` and batches, on a library thread
    for ``send_async``; one of ``result`` and ``error`` is ``None`` (both are for a
    one-way send, which has no answer). A batch runs them once per message. An exception
    is logged with its traceback on the ``rocketmq_blocking`` logger and counted in
    ``stats()["hook_panics"]``; the send goes on."""

    def before_send(self, message: Message) -> None:
        """Runs before ``message`` is sent."""

    def after_send(self, message: Message, result: Optional[SendResult], error: Optional[RocketMQError]) -> None:
        """Runs with the outcome of sending ``message``."""


def _sent_message(m: _native.MessageTuple) -> Message:
    """A message as a hook sees it; its properties include the system's (``TAGS``, ...)."""
    return Message(m[0], m[1], m[2], list(m[3]), dict(m[4]))


def _send_hook_pair(hook: SendHook) -> _native.SendHookPair:
    """``hook`` in the form ``_native`` takes; the user's exceptions stop here, logged."""

    def before(m: _native.MessageTuple) -> Optional[Dict[str, str]]:
        try:
            msg = _sent_message(m)
            sent = dict(msg.properties)
            hook.before_send(msg)
            return {str(k): str(v) for k, v in msg.properties.items() if sent.get(k) != v}
        except BaseException:
            _log_hook_error("before_send")
            return None

    def after(m: _native.MessageTuple, result: Optional[_native.SendResultTuple], error: Optional[BaseException]) -> bool:
        try:
            hook.after_send(_sent_message(m), None if result is None else SendResult(*result), _as_error(error))
            return True
        except BaseException:
            _log_hook_error("after_send")
            return False

    return (before, after)


def _log_hook_error(where: str) -> None:
    try:
        _log.exception("a hook raised in %s; the client goes on", where)
    except BaseException:
        pass


def _stats(json_text: str) -> Dict[str, Any]:
    stats: Dict[str, Any] = json.loads(json_text)
    return stats


def _queue(q: object) -> _native.QueueTuple:
    """``q``'s form for ``_native``; ``TypeError`` for anything but a :class:`MessageQueue`."""
    if not isinstance(q, MessageQueue):
        raise TypeError(f"expected a MessageQueue, not {type(q).__name__}")
    return (q.topic, q.broker_name, q.queue_id)


@dataclass(frozen=True)
class TlsConfig:
    """TLS to the name servers and brokers: the server verified against ``ca_file``
    (PEM; ``None``: the system's trust store), its name checked against the address
    unless ``verify_server_name`` is false (Java checks only the chain), and a client
    certificate when the cluster asks for one (``client_cert`` and ``client_key``, PEM)."""

    ca_file: Optional[str] = None
    client_cert: Optional[str] = None
    client_key: Optional[str] = None
    verify_server_name: bool = True


#: The client options every client takes as keyword arguments, with their types; each is
#: the Rust ``ClientOptions`` setter of the same name (``namesrv``: ``namesrv_addr``;
#: ``*_ms``: a duration in milliseconds; the three ACL keys: ``credentials``).
CLIENT_OPTIONS: Dict[str, type] = {
    "namesrv": str,
    "instance_name": str,
    "unit_name": str,
    "namespace": str,
    "client_ip": str,
    "vip_channel": bool,
    "access_key": str,
    "secret_key": str,
    "security_token": str,
    "tls": object,
    "api_timeout_ms": int,
    "connect_timeout_ms": int,
    "poll_name_server_interval_ms": int,
    "heartbeat_interval_ms": int,
    "max_frame_size": int,
    "async_permits": int,
    "callback_threads": int,
    "shutdown_timeout_ms": int,
    "serialize_type": str,
}


def _client_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """The client options in the form ``_native`` takes them: ``None`` left out, the ACL
    keys as one ``credentials`` tuple, ``tls`` as a tuple."""
    unknown = sorted(set(options) - set(CLIENT_OPTIONS))
    if unknown:
        raise TypeError(f"unknown client option(s): {', '.join(unknown)}")
    out = {k: v for k, v in options.items() if v is not None and k not in ("access_key", "secret_key", "security_token", "tls")}
    access_key, secret_key = options.get("access_key"), options.get("secret_key")
    security_token = options.get("security_token")
    if (access_key is None) != (secret_key is None):
        raise ValueError("access_key and secret_key go together")
    if security_token is not None and access_key is None:
        raise ValueError("security_token needs access_key and secret_key")
    if access_key is not None:
        out["credentials"] = (access_key, secret_key, security_token)
    tls = options.get("tls")
    if tls is True:
        tls = TlsConfig()
    if tls is None or tls is False:
        pass
    elif isinstance(tls, TlsConfig):
        if (tls.client_cert is None) != (tls.client_key is None):
            raise ValueError("client_cert and client_key go together")
        out["tls"] = (
            None if tls.ca_file is None else os.fspath(tls.ca_file),
            None if tls.client_cert is None else os.fspath(tls.client_cert),
            None if tls.client_key is None else os.fspath(tls.client_key),
            bool(tls.verify_server_name),
        )
    else:
        raise TypeError(f"tls must be a bool or a TlsConfig, not {type(tls).__name__}")
    return out


# Clients still open at interpreter exit are closed first, before Python tears down the
# objects their callbacks use.
_open: "weakref.WeakSet[_Client[Any]]" = weakref.WeakSet()

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


class _Use(Generic[_Native]):
    """One call's hold on a client's native handle: a plain class, not a generator-based
    context manager, because every send pays for it (1.8 µs against 0.6 µs)."""

    __slots__ = ("_client",)

    def __init__(self, client: "_Client[_Native]") -> None:
        self._client: "_Client[_Native]" = client

    def __enter__(self) -> _Native:
        return self._client._enter()

    def __exit__(self, *exc: object) -> None:
        self._client._leave()


class _Client(Generic[_Native]):
    """A native client shared by threads. ``free`` shuts it down, so every call holds it
    through ``_use`` and ``close`` frees it only once no call is inside the library: a
    reader/writer guard whose writer comes once. The producers' sends take ``_direct``
    instead: the native client guards them itself, and its ``free`` waits for them."""

    def __init__(self) -> None:
        self._h: Optional[_Native] = None
        # Guards the three below; notified whenever a call leaves.
        self._lock = threading.Lock()
        # Waited on by a close only: notified when a call leaves once closing began.
        self._state = threading.Condition(self._lock)
        self._inside: Dict[int, int] = {}  # calls inside the library, by thread
        self._closing = False
        self._free_on_leave = False

    def _direct(self) -> _Native:
        """The native client for a call it guards itself (the producers' sends: its
        ``free`` waits for them, and once it began they raise the closed error); raises
        the closed error once ``close`` has begun."""
        h = self._h
        if h is None or self._closing:
            raise StateError("RMQ_STATE", "the client is closed")
        return h

    def _use(self) -> "_Use[_Native]":
        """The native client for one call into the library (``with self._use() as h``);
        raises the closed error once ``close`` has begun."""
        return _Use(self)

    def _enter(self) -> _Native:
        me = threading.get_ident()
        with self._lock:
            if self._closing or self._h is None:
                raise StateError("RMQ_STATE", "the client is closed")
            self._inside[me] = self._inside.get(me, 0) + 1
            return self._h

    def _leave(self) -> None:
        me = threading.get_ident()
        free = None
        with self._lock:
            n = self._inside.pop(me) - 1
            if n:
                self._inside[me] = n
            elif not self._inside and self._free_on_leave:
                # The close came from inside a call on this thread: the last call out frees.
                free, self._h, self._free_on_leave = self._h, None, False
            if self._closing:
                self._state.notify_all()
        if free is not None:
            free.free()

    def _begin_close(self) -> bool:
        """Refuses new calls; False if another close began first."""
        with self._state:
            if self._closing:
                return False
            self._closing = True
            return True

    def _finish_close(self, timeout: Optional[float]) -> bool:
        """Waits up to ``timeout`` seconds (``None``: as long as it takes) for the calls
        inside the library to return, then frees the client. False, leaving it open, if
        calls were still inside when the time was up."""
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
            # Releases the GIL while it waits for listeners and callbacks in flight.
            h.free()
        return True

    def close(self) -> None:
        """Shuts down and frees the client, after the calls other threads are making on
        it have returned; calls made from now on raise :class:`RocketMQError` of kind
        ``"RMQ_STATE"``. Idempotent. A close that finds another one under way returns at
        once (so a listener may close its own consumer while another thread closes it)."""
        if self._begin_close():
            self._finish_close(None)

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


@dataclass(frozen=True)
class TraceStats:
    """What a client's message trace did so far (Rust ``TraceStats``)."""

    #: Trace messages the broker stored (each holds up to 100 records).
    sent: int
    #: Trace messages that could not be sent (logged).
    failed: int
    #: Records dropped because the trace queue was full.
    dropped: int


def _trace(trace: bool, trace_topic: Optional[str]) -> Tuple[bool, Optional[str]]:
    """The trace keywords as ``_native`` takes them: a topic turns the trace on."""
    if trace_topic is not None and not trace_topic:
        raise ValueError("trace_topic must not be empty")
    return (bool(trace) or trace_topic is not None, trace_topic)


def _trace_stats(t: Optional[Tuple[int, int, int]]) -> Optional[TraceStats]:
    return None if t is None else TraceStats(*t)


class _Sends(_Client[_Sender]):
    """The sends a producer and a transaction producer share."""

    def send(
        self, message: Message, *, queue: Optional[MessageQueue] = None, sharding_key: Optional[str] = None
    ) -> SendResult:
        """Sends and waits for the broker. With ``queue``, to that queue (from
        :meth:`Producer.fetch_queues`) and no other; with ``sharding_key``, to the queue
        Java's ``SelectMessageQueueByHash`` picks for it, so the messages of one key stay
        in order (both: ``ValueError``)."""
        if queue is None and sharding_key is None:
            # The common send, with the fewest steps (a send's Python runs on cold caches).
            return self._direct().send(message)
        if queue is not None and sharding_key is not None:
            raise ValueError("queue and sharding_key exclude each other")
        q = None if queue is None else _queue(queue)
        return self._direct().send(message, q, sharding_key)

    def send_oneway(self, message: Message) -> None:
        """Sends without waiting for an answer."""
        self._direct().send_oneway(message)

    def send_batch(self, messages: Sequence[Message]) -> SendResult:
        """Sends messages of one topic as one batch."""
        return self._direct().send_batch(list(messages))

    def trace_stats(self) -> Optional[TraceStats]:
        """What the message trace did so far; ``None`` when the client does not trace
        (``trace=True`` or ``trace_topic=`` turns it on)."""
        with self._use() as h:
            return _trace_stats(h.trace_stats())


class Producer(_Sends[_native.Producer]):
    """A started producer (Java ``DefaultMQProducer``). Thread-safe. ``close`` waits (up
    to the send timeout plus 10 s) for the callbacks of async sends in flight. With
    ``trace=True`` every send is traced into ``RMQ_SYS_TRACE_TOPIC`` (Java
    ``enableMsgTrace``), with ``trace_topic`` into that topic.

    ``auto_batch=True`` gathers single sends into batches (Java 5 ``setAutoBatch``): a
    message waits up to ``batch_max_delay_ms`` (default 10) for others of its topic (and
    queue, when one was chosen), and a batch goes as soon as its bodies reach
    ``batch_max_bytes`` (default 32 KiB); at most ``total_batch_max_bytes`` (default
    32 MiB) wait at once, beyond which messages go alone. Each ``send`` still returns its
    own :class:`SendResult` (or raises the batch's error), each async send gets its own
    callback; delayed, timer and large messages go alone; ``close`` sends the batches
    still open first."""

    def __init__(
        self,
        group: str,
        *,
        send_timeout_ms: Optional[int] = None,
        retries: Optional[int] = None,
        send_hook: Optional[SendHook] = None,
        trace: bool = False,
        trace_topic: Optional[str] = None,
        auto_batch: bool = False,
        batch_max_delay_ms: Optional[int] = None,
        batch_max_bytes: Optional[int] = None,
        total_batch_max_bytes: Optional[int] = None,
        **options: Any,
    ) -> None:
        super().__init__()
        common = _client_options(options)
        hook = None if send_hook is None else _send_hook_pair(send_hook)
        batching: Optional[_native.AutoBatch] = None
        if auto_batch:
            batching = (batch_max_delay_ms, batch_max_bytes, total_batch_max_bytes)
        elif (batch_max_delay_ms, batch_max_bytes, total_batch_max_bytes) != (None, None, None):
            raise ValueError("the batch_* options need auto_batch=True")
        self._h = _native.Producer(
            group, common, send_timeout_ms, retries, hook, _trace(trace, trace_topic), batching
        )
        _open.add(self)

    def stats(self) -> Dict[str, Any]:
        """A snapshot of the producer's figures (Rust ``Producer::stats``), as the C
        ``rmq_producer_stats_json`` gives them: ``topics[topic]`` with ``messages_sent``,
        ``bytes_sent``, ``failed``, ``failed_by_kind`` and ``send_latency`` (``count``,
        ``p50_us``, ``p90_us``, ``p99_us``, ``max_us``, ... in microseconds), then
        ``async_in_flight``, ``hook_panics`` (send hooks that raised included) and
        ``client``. See docs/observability.md."""
        with self._use() as h:
            return _stats(h.stats())

    def fetch_queues(self, topic: str) -> List[MessageQueue]:
        """The queues of ``topic`` a send can go to, in the order the producer picks from."""
        with self._use() as h:
            return [MessageQueue(*q) for q in h.fetch_queues(topic)]

    def send_async(
        self,
        message: Message,
        callback: Optional[Callable[[Optional[SendResult], Optional[RocketMQError]], None]] = None,
    ) -> Optional["SendFuture"]:
        """Sends without blocking. With ``callback``, ``callback(result, error)`` runs
        later on a library thread (one of the two is ``None``; what it raises is logged on
        the ``rocketmq_blocking`` logger) and this returns ``None``. Without, this returns
        a :class:`SendFuture`: ``.result()`` waits for the :class:`SendResult` (or raises
        the :class:`RocketMQError`), and asyncio code can ``await`` it. Errors found
        before sending (a closed producer, an invalid message, no route) are raised here."""
        future: Optional[SendFuture] = None
        if callback is None:
            future = SendFuture()
            callback = _completer(future)
        # ``_native`` calls it with the SendResult or the RocketMQError, and logs what it
        # raises.
        self._direct().send_async(message, callback)
        return future

    def request(self, message: Message, timeout_ms: int) -> ReceivedMessage:
        """Sends ``message`` as a request and waits up to ``timeout_ms`` for the reply a
        consumer of its topic sends with :meth:`send_reply` (Java ``request(msg,
        timeout)``); no reply in time raises :class:`RocketMQError` of kind
        ``"RMQ_TIMEOUT"``."""
        m = _message(message)
        with self._use() as h:
            return ReceivedMessage(*h.request(m, int(timeout_ms)))

    def request_async(
        self,
        message: Message,
        timeout_ms: int,
        callback: Optional[Callable[[Optional[ReceivedMessage], Optional[RocketMQError]], None]] = None,
    ) -> Optional["ReplyFuture"]:
        """:meth:`request` without blocking (Java ``request(msg, callback, timeout)``).
        With ``callback``, ``callback(reply, error)`` runs once on a library thread (what
        it raises is logged) and this returns ``None``; without, this returns a
        :class:`ReplyFuture` that asyncio code may also ``await``. No reply in time is an
        error of kind ``"RMQ_TIMEOUT"``; errors found before sending are raised here."""
        future: Optional[ReplyFuture] = None
        user: Callable[[Optional[ReceivedMessage], Optional[RocketMQError]], None]
        if callback is None:
            future = ReplyFuture()
            user = _completer(future)
        else:
            user = callback

        def done(reply: Optional[_native.ReceivedTuple], error: Optional[BaseException]) -> None:
            try:
                user(None if reply is None else ReceivedMessage(*reply), _as_error(error))
            except BaseException:
                _log.exception("the request_async callback raised")

        m = _message(message)
        with self._use() as h:
            h.request_async(m, int(timeout_ms), done)
        return future

    def send_reply(self, request: ReceivedMessage, body: bytes) -> SendResult:
        """Answers ``request`` (a received message whose :attr:`~ReceivedMessage.is_request`
        is true) with ``body``: the reply goes to the requester, whose :meth:`request`
        returns it (Java ``MessageUtil.createReplyMessage``, then ``send``). Any producer
        may send it; a message that is no request raises :class:`RocketMQError` of kind
        ``"RMQ_INVALID_ARGUMENT"``."""
        if not isinstance(request, ReceivedMessage):
            raise TypeError(f"expected a ReceivedMessage, not {type(request).__name__}")
        if request._reply is None:
            raise InvalidArgumentError("RMQ_INVALID_ARGUMENT", f"message {request.msg_id} is not a request")
        template = request._reply
        with self._use() as h:
            return SendResult(*h.send_reply(template, bytes(body)))


class LocalTransactionState(enum.Enum):
    """How a local transaction ended (Java ``LocalTransactionState``): ``COMMIT`` makes
    the message visible to consumers, ``ROLLBACK`` discards it, ``UNKNOWN`` leaves the
    broker to ask again later (:class:`TransactionProducer`'s ``check``)."""

    COMMIT = 0
    ROLLBACK = 1
    UNKNOWN = 2


def _transaction_state(what: str, state: object) -> int:
    """The value ``_native`` takes for what a transaction callback returned."""
    if isinstance(state, LocalTransactionState):
        return state.value
    _log.warning("the %s callback returned %r, not a LocalTransactionState: the state is UNKNOWN", what, state)
    return LocalTransactionState.UNKNOWN.value


@dataclass(frozen=True)
class TransactionSendResult(SendResult):
    """What :meth:`TransactionProducer.send_in_transaction` did (Java
    ``TransactionSendResult``): the half message's send result and the state sent to the
    broker."""

    local_transaction_state: LocalTransactionState


class TransactionProducer(_Sends[_native.TransactionProducer]):
    """A transactional producer (Java ``TransactionMQProducer``). :meth:`send_in_transaction`
    stores a half message, runs ``execute(message, arg)`` on the calling thread and
    commits or rolls back as it returns; when it returns ``UNKNOWN`` (or its answer was
    lost), the broker later asks ``check(received_message)`` on a library thread. Both
    return a :class:`LocalTransactionState`; anything else, or an exception (logged with
    its traceback on the ``rocketmq_blocking`` logger), means ``UNKNOWN``. The message
    ``execute`` gets carries every property, ``UNIQ_KEY`` (the message id a check's
    message has as ``msg_id``) included. Thread-safe; ``close`` runs the checks already
    queued and waits for the callbacks in flight. Like Java's ``TransactionMQProducer``,
    it also sends ordinary messages (:meth:`send`, :meth:`send_oneway`,
    :meth:`send_batch`), and takes ``trace``/``trace_topic`` as :class:`Producer` does."""

    def __init__(
        self,
        group: str,
        execute: Callable[[Message, Any], LocalTransactionState],
        check: Callable[[ReceivedMessage], LocalTransactionState],
        *,
        send_timeout_ms: Optional[int] = None,
        retries: Optional[int] = None,
        trace: bool = False,
        trace_topic: Optional[str] = None,
        **options: Any,
    ) -> None:
        super().__init__()

        def on_execute(m: _native.MessageTuple, arg: object) -> int:
            try:
                return _transaction_state("execute", execute(Message(*m), arg))
            except BaseException:
                _log.exception("the local transaction raised: its state is UNKNOWN")
                return LocalTransactionState.UNKNOWN.value

        def on_check(m: _native.ReceivedTuple) -> int:
            try:
                return _transaction_state("check", check(ReceivedMessage(*m)))
            except BaseException:
                _log.exception("the transaction check raised: its state is UNKNOWN")
                return LocalTransactionState.UNKNOWN.value

        common = _client_options(options)
        self._h = _native.TransactionProducer(
            group, on_execute, on_check, common, send_timeout_ms, retries, _trace(trace, trace_topic)
        )
        _open.add(self)

    def send_in_transaction(self, message: Message, arg: Any = None) -> TransactionSendResult:
        """Sends ``message`` as a half message, runs ``execute(message, arg)`` and ends the
        transaction as it says. A failed send raises and ``execute`` does not run; once
        the half message is stored this returns, whatever the local transaction did."""
        m = _message(message)
        with self._use() as h:
            r, state = h.send_in_transaction(m, arg)
        return TransactionSendResult(*r, local_transaction_state=LocalTransactionState(state))


_T = TypeVar("_T")


def _completer(
    future: "concurrent.futures.Future[_T]",
) -> Callable[[Optional[_T], Optional[RocketMQError]], None]:
    """A ``(result, error)`` callback that completes ``future``."""

    def complete(result: Optional[_T], error: Optional[RocketMQError]) -> None:
        try:
            if error is not None:
                future.set_exception(error)
            elif result is not None:
                future.set_result(result)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled by its owner meanwhile

    return complete


class ReplyFuture(concurrent.futures.Future[ReceivedMessage]):
    """The outcome of :meth:`Producer.request_async` without a callback: a
    :class:`concurrent.futures.Future` of the reply that asyncio code may also ``await``."""

    def __await__(self) -> Generator[Any, None, ReceivedMessage]:
        import asyncio

        return asyncio.wrap_future(self).__await__()


class SendFuture(concurrent.futures.Future[SendResult]):
    """The outcome of :meth:`Producer.send_async` without a callback: a
    :class:`concurrent.futures.Future` of a :class:`SendResult` that asyncio code may
    also ``await`` (the library's thread completes the event loop's future with
    ``call_soon_threadsafe``, so the loop never blocks)."""

    def __await__(self) -> Generator[Any, None, SendResult]:
        import asyncio

        return asyncio.wrap_future(self).__await__()


class ConsumeStatus:
    """What a listener returns. Only ``SUCCESS`` (or ``True``) acknowledges the messages;
    anything else (``LATER``, ``False``, ``None``, any other value, an exception) means
    "deliver them again later", as Java treats a ``null`` status."""

    SUCCESS = 0
    LATER = 1


class ConsumeHookStatus:
    """What a push listener's call came to, as :meth:`ConsumeHook.after_consume` sees it
    (the C ``rmq_consume_hook_status``)."""

    SUCCESS = 0
    RECONSUME_LATER = 1
    #: An orderly listener's queue pauses and the batch comes again.
    SUSPEND = 2
    #: The listener failed otherwise.
    FAILED = 3


class ConsumeHook:
    """Called around every listener call of a :class:`PushConsumer` given it as
    ``consume_hook=`` (Rust ``ConsumeHook``, Java ``ConsumeMessageHook``), on the consume
    thread: ``before_consume(messages)`` just before the listener, ``after_consume(messages,
    status)`` just after, with a :class:`ConsumeHookStatus`. Subclass it and override
    either. An exception is logged with its traceback and counted in
    ``stats()["hook_panics"]``; consumption goes on."""

    def before_consume(self, messages: List[ReceivedMessage]) -> None:
        """Runs before the listener sees ``messages``."""

    def after_consume(self, messages: List[ReceivedMessage], status: int) -> None:
        """Runs after the listener returned, with what it came to."""


def _consume_hook_pair(hook: ConsumeHook) -> _native.ConsumeHookPair:
    """``hook`` in the form ``_native`` takes; the user's exceptions stop here, logged."""

    def before(msgs: List[_native.ReceivedTuple]) -> bool:
        try:
            hook.before_consume([ReceivedMessage(*m) for m in msgs])
            return True
        except BaseException:
            _log_hook_error("before_consume")
            return False

    def after(msgs: List[_native.ReceivedTuple], status: int) -> bool:
        try:
            hook.after_consume([ReceivedMessage(*m) for m in msgs], status)
            return True
        except BaseException:
            _log_hook_error("after_consume")
            return False

    return (before, after)


def _consume_status(status: object) -> int:
    """The status of what a listener returned: success only for an explicit success."""
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


class ConsumeContext:
    """What a push listener that takes a second parameter gets with its messages (Java
    ``ConsumeConcurrentlyContext`` / ``ConsumeOrderlyContext``): the queue they came from,
    and settings for this call that the listener may change before it returns."""

    def __init__(self, queue: MessageQueue) -> None:
        #: The queue the messages came from.
        self.queue = queue
        #: With a success, only messages ``0..=ack_index`` count as consumed and the rest
        #: come again (Java ``setAckIndex``); a negative index consumes none. ``None``:
        #: all (concurrent listeners only).
        self.ack_index: Optional[int] = None
        #: When the messages not consumed come again (Java
        #: ``setDelayLevelWhenNextConsume``): 0 as the broker chooses, a delay level
        #: (1 = 1 s, 2 = 5 s, 3 = 10 s, ...), or -1 straight to the dead-letter queue
        #: ``%DLQ%<group>`` (concurrent listeners only).
        self.delay_level: Optional[int] = None
        #: The pause before a suspended batch comes again, in milliseconds, for this call
        #: only (Java ``setSuspendCurrentQueueTimeMillis``; orderly listeners only).
        self.suspend_time_ms: Optional[int] = None


def _takes_context(listener: Callable[..., object]) -> bool:
    """Whether ``listener`` can take a second positional argument: the context."""
    try:
        params = inspect.signature(listener).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = 0
    for p in params:
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            return True
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2


def _context_answer(status: int, ctx: Optional[ConsumeContext]) -> _native.ListenerAnswer:
    """A listener's status and context as ``_native`` takes them; settings of the wrong
    type are logged and left out."""
    if ctx is None:
        return (status, None, None, None)

    def setting(name: str, value: object, minimum: int) -> Optional[int]:
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            return value
        _log.warning("ConsumeContext.%s = %r is not an int >= %d: ignored", name, value, minimum)
        return None

    return (
        status,
        setting("ack_index", ctx.ack_index, -(2**62)),
        setting("delay_level", ctx.delay_level, -1),
        setting("suspend_time_ms", ctx.suspend_time_ms, 0),
    )


class PushConsumer(_Client[_native.PushConsumer]):
    """A push consumer (Java ``DefaultMQPushConsumer``) calling ``listener(messages)``
    on library threads; ``listener`` returns a :class:`ConsumeStatus` (or a bool): only
    a success acknowledges the messages, anything else means "deliver again later". An
    exception in the listener (any, ``KeyboardInterrupt`` included) means the same, and
    is logged with its traceback on the ``rocketmq_blocking`` logger. ``close`` returns
    after every listener call in flight has returned (a listener may close its own
    consumer: that close does not wait for the call it is made from).

    A listener that takes two parameters gets a :class:`ConsumeContext` as its second,
    for the ack index, the delay level of messages that come again, or an orderly
    queue's suspend time. ``trace=True`` (or ``trace_topic=``) traces every consumption
    (Java ``enableMsgTrace``).

    ``client_rebalance=False`` (Java ``setClientRebalance(false)``) follows a 5.x broker's
    assignment and request mode: once an operator switches the group to POP (``mqadmin
    setConsumeMode -m POP``) it consumes by POP, each message invisible to the group for
    ``pop_invisible_time_ms`` (default 60,000, renewed while the listener runs) and
    ``pop_batch_nums`` (default 32) per pop; a 4.x broker keeps it pulling.
    ``pop_batch_ack=True`` acks what the listener calls of one pop consumed with one
    BATCH_ACK_MESSAGE per broker (default False, as Java's push consumer)."""

    def __init__(
        self,
        group: str,
        topic: str,
        listener: Union[
            Callable[[List[ReceivedMessage]], object],
            Callable[[List[ReceivedMessage], ConsumeContext], object],
        ],
        expression: str = "*",
        *,
        sql: Optional[str] = None,
        orderly: bool = False,
        broadcasting: bool = False,
        from_first: bool = False,
        threads: Optional[Tuple[int, int]] = None,
        batch_max_size: Optional[int] = None,
        consume_hook: Optional[ConsumeHook] = None,
        trace: bool = False,
        trace_topic: Optional[str] = None,
        client_rebalance: bool = True,
        pop_invisible_time_ms: Optional[int] = None,
        pop_batch_nums: Optional[int] = None,
        pop_batch_ack: bool = False,
        **options: Any,
    ) -> None:
        super().__init__()
        with_context = _takes_context(listener)
        call: Callable[..., object] = listener

        def on_messages(msgs: List[_native.ReceivedTuple], queue: _native.QueueTuple) -> _native.ListenerAnswer:
            # Everything inside the try: the library takes anything but 0 as "later".
            try:
                received = [ReceivedMessage(*m) for m in msgs]
                if with_context:
                    ctx = ConsumeContext(MessageQueue(*queue))
                    status = _consume_status(call(received, ctx))
                    return _context_answer(status, ctx)
                return (_consume_status(call(received)), None, None, None)
            except BaseException:
                try:
                    _log.exception("the listener raised: its messages come again later")
                except BaseException:
                    pass
                return (ConsumeStatus.LATER, None, None, None)

        common = _client_options(options)
        self._h = _native.PushConsumer(
            group,
            topic,
            on_messages,
            common,
            expression,
            sql,
            orderly,
            broadcasting,
            from_first,
            None if threads is None else (threads[0], threads[1]),
            batch_max_size,
            None if consume_hook is None else _consume_hook_pair(consume_hook),
            _trace(trace, trace_topic),
            (bool(client_rebalance), pop_invisible_time_ms, pop_batch_nums, bool(pop_batch_ack)),
        )
        _open.add(self)

    def subscribe(self, topic: str, expression: str = "*", *, sql: Optional[str] = None) -> None:
        """Subscribes to one more topic while running, by tags or (``sql``) SQL92, or
        replaces a topic's expression (Java ``subscribe`` on a started consumer): the
        consumer rebalances at once."""
        with self._use() as h:
            h.subscribe(topic, expression, sql)

    def unsubscribe(self, topic: str) -> None:
        """Stops consuming ``topic``; its queues are given up at the next rebalance."""
        with self._use() as h:
            h.unsubscribe(topic)

    def subscriptions(self) -> List[str]:
        """The topics subscribed to."""
        with self._use() as h:
            return h.subscriptions()

    def assigned_queues(self) -> List[MessageQueue]:
        """The queues this consumer holds now."""
        with self._use() as h:
            return [MessageQueue(*q) for q in h.assigned_queues()]

    def send_message_back(self, message: ReceivedMessage, delay_level: int = 0, broker_name: Optional[str] = None) -> None:
        """Sends ``message``, which this consumer received, back to the broker to be
        delivered again to the group, through its retry topic, with ``reconsume_times``
        one more (Java ``sendMessageBack(msg, delayLevel, brokerName)``). ``delay_level``
        0 lets the broker choose from the reconsume count, 1, 2, ... is one of its delay
        levels (1 s, 5 s, 10 s, ...), below 0 sends it straight to the dead-letter queue;
        past the group's maximum reconsume times the broker moves it there too.
        ``broker_name`` is the broker to send it to, by default the one that delivered
        it. May be called from the listener."""
        if not isinstance(message, ReceivedMessage):
            raise TypeError(f"expected a ReceivedMessage, not {type(message).__name__}")
        m: _native.SentBackTuple = (
            message.topic,
            message.broker_name if broker_name is None else broker_name,
            message.queue_id,
            message.queue_offset,
            bytes(message.body),
            dict(message.properties),
            message.store_host,
            message.commit_log_offset,
            message.reconsume_times,
        )
        with self._use() as h:
            h.send_message_back(m, int(delay_level))

    def suspend(self) -> None:
        """Stops pulling (the queues stay assigned) until :meth:`resume`."""
        with self._use() as h:
            h.suspend()

    def resume(self) -> None:
        """Pulls again after :meth:`suspend`."""
        with self._use() as h:
            h.resume()

    def trace_stats(self) -> Optional[TraceStats]:
        """What the message trace did so far; ``None`` when the consumer does not trace."""
        with self._use() as h:
            return _trace_stats(h.trace_stats())

    def stats(self) -> Dict[str, Any]:
        """A snapshot of the consumer's figures (Rust ``PushConsumer::stats``), as the C
        ``rmq_push_consumer_stats_json`` gives them: ``topics[topic]`` with ``pulled``,
        ``pulled_bytes``, ``consumed_ok``, ``consumed_failed`` and ``consume_latency``
        (microseconds), ``queues`` (each with its cache, ``consumed_offset`` and ``lag``,
        ``None`` when unknown), their sums, ``pool_size``, ``pool_busy``, ``hook_panics``
        (consume hooks that raised included) and ``client``."""
        with self._use() as h:
            return _stats(h.stats())


class LitePullConsumer(_Client[_native.LitePullConsumer]):
    """A lite pull consumer (Java ``DefaultLitePullConsumer``): ``poll`` or iterate. With
    ``topic`` it subscribes (queues assigned by rebalance); with ``topic=None`` it takes
    the queues :meth:`assign` gives it."""

    def __init__(
        self,
        group: str,
        topic: Optional[str],
        expression: str = "*",
        *,
        from_first: bool = False,
        auto_commit: bool = True,
        poll_timeout_ms: int = 1000,
        **options: Any,
    ) -> None:
        super().__init__()
        self.poll_timeout_ms = poll_timeout_ms
        common = _client_options(options)
        self._h = _native.LitePullConsumer(group, topic, common, expression, from_first, auto_commit)
        _open.add(self)

    def stats(self) -> Dict[str, Any]:
        """A snapshot of the consumer's figures (Rust ``LitePullConsumer::stats``), in the
        shape of :meth:`PushConsumer.stats`; ``consumed_ok`` counts the messages ``poll``
        returned."""
        with self._use() as h:
            return _stats(h.stats())

    def poll(self, timeout_ms: Optional[int] = None) -> List[ReceivedMessage]:
        """Waits up to ``timeout_ms`` for messages (possibly none)."""
        t = self.poll_timeout_ms if timeout_ms is None else timeout_ms
        with self._use() as h:
            msgs = h.poll(t)
        return [ReceivedMessage(*m) for m in msgs]

    def commit(self, offsets: Optional[Mapping[MessageQueue, int]] = None, *, persist: bool = True) -> None:
        """Commits the offsets of what was polled; with ``offsets``, commits those instead
        (Java ``commit(Map<MessageQueue, Long>, boolean)``): each the next offset to
        consume of a held queue, written to the broker before this returns with
        ``persist``, else with the next periodic persist. A queue not held or a negative
        offset raises, and nothing is committed."""
        with self._use() as h:
            if offsets is None:
                h.commit()
            else:
                h.commit_offsets([(_queue(q), int(o)) for q, o in offsets.items()], persist)

    def fetch_message_queues(self, topic: str) -> List[MessageQueue]:
        """The readable queues of ``topic`` (Java ``fetchMessageQueues``), which may be
        more or fewer than the writable ones :meth:`Producer.fetch_queues` gives."""
        with self._use() as h:
            return [MessageQueue(*q) for q in h.fetch_message_queues(topic)]

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Subscribes the running consumer to one more topic (Java ``subscribe`` after
        ``start``); its queues are taken at once. Not for a consumer that assigns."""
        with self._use() as h:
            h.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stops consuming ``topic``: its queues are dropped before this returns."""
        with self._use() as h:
            h.unsubscribe(topic)

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        """Takes these queues (replacing earlier ones); for a consumer without a topic."""
        with self._use() as h:
            h.assign([_queue(q) for q in queues])

    def assignment(self) -> List[MessageQueue]:
        """The queues :meth:`assign` gave."""
        with self._use() as h:
            return [MessageQueue(*q) for q in h.assignment()]

    def seek(self, queue: MessageQueue, offset: int) -> None:
        """The next pulls of ``queue`` start at ``offset``; what was cached is dropped."""
        with self._use() as h:
            h.seek(_queue(queue), offset)

    def seek_to_begin(self, queue: MessageQueue) -> None:
        """Seeks to the first stored message of ``queue``."""
        with self._use() as h:
            h.seek_to_begin(_queue(queue))

    def seek_to_end(self, queue: MessageQueue) -> None:
        """Seeks past the last stored message of ``queue``."""
        with self._use() as h:
            h.seek_to_end(_queue(queue))

    def committed(self, queue: MessageQueue) -> Optional[int]:
        """The committed offset of ``queue`` in the store (the broker's), or ``None``."""
        with self._use() as h:
            return h.committed(_queue(queue))

    def offset_for_timestamp(self, queue: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the first message of ``queue`` stored at or after
        ``timestamp_ms`` (ms since the epoch)."""
        with self._use() as h:
            return h.offset_for_timestamp(_queue(queue), timestamp_ms)

    def pause(self, queues: Sequence[MessageQueue]) -> None:
        """Stops pulling these queues (what is cached can still be polled)."""
        with self._use() as h:
            h.pause([_queue(q) for q in queues])

    def resume(self, queues: Sequence[MessageQueue]) -> None:
        """Resumes pulling these queues."""
        with self._use() as h:
            h.resume([_queue(q) for q in queues])

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

    def __aiter__(self) -> AsyncIterator[ReceivedMessage]:
        """``async for``: as iterating, each poll on the event loop's default executor
        (the poll releases the GIL), so the loop runs on while it waits."""
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[ReceivedMessage]:
        import asyncio

        loop = asyncio.get_running_loop()
        while True:
            try:
                batch = await loop.run_in_executor(None, self.poll)
            except RocketMQError as e:
                if e.kind == "RMQ_STATE" and self._closing:
                    return
                raise
            for m in batch:
                yield m


@dataclass(frozen=True)
class PoppedMessage:
    """A message :meth:`SimpleConsumer.receive` returned, with the receipt that acks it."""

    message: ReceivedMessage
    _receipt: _native.PopReceipt = field(repr=False, compare=False)

    @property
    def receipt_handle(self) -> str:
        """The receipt as the broker's text (Java ``POP_CK``); it changes with every
        :meth:`SimpleConsumer.change_invisible_duration`."""
        return self._receipt.receipt_handle()


class SimpleConsumer(_Client[_native.SimpleConsumer]):
    """A POP consumer (RocketMQ 5.x; the Rust ``SimpleConsumer``): :meth:`receive`
    messages that stay invisible to the group for a time, :meth:`ack` each (or many with
    :meth:`ack_batch`), or move its time with :meth:`change_invisible_duration`; unacked
    messages come back after it. :meth:`wait_for_messages` waits for one without taking it.
    On a 4.x broker every call raises :class:`UnsupportedError`."""

    def __init__(
        self,
        group: str,
        topic: str,
        expression: str = "*",
        *,
        from_first: bool = False,
        await_ms: int = 5000,
        **options: Any,
    ) -> None:
        super().__init__()
        common = _client_options(options)
        self._h = _native.SimpleConsumer(group, topic, common, expression, from_first, await_ms)
        _open.add(self)

    def receive(self, max_messages: int = 32, invisible_ms: int = 30_000) -> List[PoppedMessage]:
        """Up to ``max_messages`` (1..32) messages, each invisible to the group for
        ``invisible_ms`` (5 s..12 h); waits up to ``await_ms`` at the broker when nothing
        is there, then returns an empty list."""
        with self._use() as h:
            got = h.receive(max_messages, invisible_ms)
        return [PoppedMessage(ReceivedMessage(*m), r) for m, r in got]

    def ack(self, message: PoppedMessage) -> None:
        """The group never gets the message again."""
        with self._use() as h:
            h.ack(message._receipt)

    def ack_batch(self, messages: Sequence[PoppedMessage]) -> None:
        """:meth:`ack` of every message, with one BATCH_ACK_MESSAGE per broker and topic
        (single acks on a broker before 5.1.1); every message is tried, the first error
        raised."""
        receipts = [m._receipt for m in messages]
        with self._use() as h:
            h.ack_batch(receipts)

    def wait_for_messages(self, timeout_ms: int) -> bool:
        """Waits up to ``timeout_ms`` (at most an hour) until the topic has a message the
        group could receive, without taking it (Java's NOTIFICATION): True then, False
        when the time passed with none. 0 asks without waiting."""
        with self._use() as h:
            return h.wait_for_messages(timeout_ms)

    def change_invisible_duration(self, message: PoppedMessage, invisible_ms: int) -> None:
        """The message becomes visible again ``invisible_ms`` from now; it gets a new
        receipt (the old one no longer acks it)."""
        with self._use() as h:
            h.change_invisible_duration(message._receipt, invisible_ms)


@dataclass(frozen=True)
class QueueProgress:
    """One queue in :meth:`Admin.consume_stats`."""

    queue: MessageQueue
    #: The queue's max offset: where the next message goes.
    broker_offset: int
    #: The group's committed offset (0 when it has none).
    consumer_offset: int
    #: The offset pulled up to (5.x brokers; 0 from 4.x).
    pull_offset: int
    #: Store time of the last consumed message, if any, in ms since the epoch.
    last_timestamp_ms: Optional[int]

    @property
    def lag(self) -> int:
        """Messages stored but not consumed by the group."""
        return max(0, self.broker_offset - self.consumer_offset)


@dataclass(frozen=True)
class ConsumeStats:
    """A group's progress (Java ``ConsumeStats``)."""

    consume_tps: float
    #: Every queue's lag summed (Java ``computeTotalDiff``).
    total_diff: int
    queues: List[QueueProgress]


@dataclass(frozen=True)
class ProducerConnection:
    """A client connected under a producer group (mqadmin ``producerConnection``)."""

    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True)
class SubscriptionGroup:
    """A subscription group as the brokers keep it (Java ``SubscriptionGroupConfig``)."""

    name: str
    consume_enable: bool
    orderly: bool
    broadcast: bool
    retry_max_times: int


class Admin(_Client[_native.NativeAdmin]):
    """An admin client (Java ``DefaultMQAdminExt``, in part): topics, offsets, messages,
    consume stats, groups. Thread-safe; a context manager. Takes the options every client
    does."""

    def __init__(
        self,
        namesrv: Optional[str] = None,
        **options: Any,
    ) -> None:
        super().__init__()
        common = _client_options(dict(options, namesrv=namesrv))
        self._h = _native.NativeAdmin(common)
        _open.add(self)

    def max_offset(self, queue: MessageQueue) -> int:
        """The queue's max offset on its master: one past its last message."""
        q = _queue(queue)
        with self._use() as h:
            return h.max_offset(q)

    def min_offset(self, queue: MessageQueue) -> int:
        """The queue's min offset on its master: its first message still stored."""
        q = _queue(queue)
        with self._use() as h:
            return h.min_offset(q)

    def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the queue's first message stored at or after ``timestamp_ms``
        (Java ``searchOffset``)."""
        q = _queue(queue)
        with self._use() as h:
            return h.search_offset(q, int(timestamp_ms))

    def reset_offset(
        self, group: str, topic: str, timestamp_ms: Optional[int] = None, *, earliest: bool = False
    ) -> Dict[MessageQueue, int]:
        """Moves ``group``'s offsets in ``topic`` (mqadmin ``resetOffsetByTime``): to the
        messages stored at ``timestamp_ms``, to each queue's first message with
        ``earliest=True``, or with neither to each queue's end. Returns every queue's new
        offset; running consumers of the group move there."""
        with self._use() as h:
            moved = h.reset_offset(group, topic, None if timestamp_ms is None else int(timestamp_ms), earliest)
        return {MessageQueue(*q): o for q, o in moved}

    def query_messages(self, topic: str, key: str, max_messages: int = 32) -> List[ReceivedMessage]:
        """The messages of ``topic`` with ``key`` among their keys (mqadmin
        ``queryMsgByKey``), at most ``max_messages``."""
        with self._use() as h:
            return [ReceivedMessage(*m) for m in h.query_messages(topic, key, int(max_messages))]

    def producer_connections(self, group: str) -> List[ProducerConnection]:
        """The clients connected under producer ``group``, from every master."""
        with self._use() as h:
            return [ProducerConnection(*c) for c in h.producer_connections(group)]

    def subscription_groups(self) -> Dict[str, SubscriptionGroup]:
        """Every subscription group the master brokers know, by name."""
        with self._use() as h:
            groups = h.subscription_groups()
        return {name: SubscriptionGroup(name, *g) for name, g in groups.items()}

    def create_subscription_group(
        self, group: str, *, orderly: bool = False, broadcast: bool = False, retry_max_times: Optional[int] = None
    ) -> List[str]:
        """Creates (or updates) subscription group ``group`` on every master (mqadmin
        ``updateSubGroup``); the brokers' names."""
        with self._use() as h:
            return h.create_subscription_group(group, orderly, broadcast, retry_max_times)

    def create_topic(self, topic: str, queues: int = 4) -> List[str]:
        """Creates (or updates) ``topic`` with ``queues`` read and write queues on every
        master broker; their names."""
        with self._use() as h:
            return h.create_topic(topic, queues)

    def delete_topic(self, topic: str) -> List[str]:
        """Deletes ``topic`` from every master broker and name server; the brokers' names."""
        with self._use() as h:
            return h.delete_topic(topic)

    def set_message_request_mode(
        self, topic: str, group: str, *, pop: bool, pop_share_queue_num: int = 0
    ) -> List[str]:
        """Sets how ``group`` consumes ``topic`` on every master broker (Java
        ``setMessageRequestMode``, ``mqadmin setConsumeMode``): by POP (``pop=True``, up to
        ``pop_share_queue_num + 1`` consumers sharing each queue) or by PULL. Push consumers
        made with ``client_rebalance=False`` follow it at their next rebalance; a 4.x broker
        raises :class:`UnsupportedError`. The brokers' names."""
        with self._use() as h:
            return h.set_message_request_mode(topic, group, bool(pop), int(pop_share_queue_num))

    def topic_list(self) -> List[str]:
        """Every topic the name servers know."""
        with self._use() as h:
            return h.topic_list()

    def total_max_offset(self, topic: str) -> int:
        """The max offsets of ``topic``'s queues summed: messages stored so far."""
        with self._use() as h:
            return h.total_max_offset(topic)

    def view_message(self, offset_msg_id: str) -> ReceivedMessage:
        """The message stored at ``offset_msg_id`` (:attr:`SendResult.offset_msg_id`)."""
        with self._use() as h:
            return ReceivedMessage(*h.view_message(offset_msg_id))

    def query_message_by_unique_key(self, topic: str, msg_id: str) -> Optional[ReceivedMessage]:
        """The message of ``topic`` whose unique key is ``msg_id`` (:attr:`SendResult.msg_id`),
        or ``None``."""
        with self._use() as h:
            m = h.query_message_by_unique_key(topic, msg_id)
        return None if m is None else ReceivedMessage(*m)

    def consumer_connections(self, group: str) -> Dict[str, Any]:
        """The online consumers of ``group`` (mqadmin ``consumerConnection``):
        ``connections`` (``clientId``, ``clientAddr``, ``language``, ``version``),
        ``subscriptions`` (topic to expression), ``consumeType``, ``messageModel``,
        ``consumeFromWhere``. Raises when the group is online nowhere."""
        with self._use() as h:
            return _stats(h.consumer_connections(group))

    def topic_stats(self, topic: str) -> Dict[str, Any]:
        """The queues of ``topic`` (mqadmin ``topicStatus``): ``queues``, each with
        ``topic``, ``brokerName``, ``queueId``, ``minOffset``, ``maxOffset`` and
        ``lastUpdateMs`` (``None`` for an empty queue)."""
        with self._use() as h:
            return _stats(h.topic_stats(topic))

    def earliest_msg_store_time(self, queue: MessageQueue) -> Optional[int]:
        """The store time (ms since the epoch) of the first message still in ``queue``,
        ``None`` for an empty queue (Java ``earliestMsgStoreTime``)."""
        with self._use() as h:
            return h.earliest_msg_store_time(_queue(queue))

    def consume_stats(self, group: str, topic: Optional[str] = None) -> ConsumeStats:
        """``group``'s progress in ``topic`` (``None``: every topic it consumes)."""
        with self._use() as h:
            tps, diff, queues = h.consume_stats(group, topic)
        return ConsumeStats(
            tps,
            diff,
            [QueueProgress(MessageQueue(*q), b, c, p, t) for q, b, c, p, t in queues],
        )


def create_topic(
    namesrv: str,
    topic: str,
    queues: int = 4,
    **options: Any,
) -> None:
    """Creates ``topic`` on every master broker of the cluster; ``options`` are the client
    options (:data:`CLIENT_OPTIONS`)."""
    common = _client_options(dict(options, namesrv=namesrv))
    _native.create_topic(common, topic, queues)


__all__.append("create_topic")
