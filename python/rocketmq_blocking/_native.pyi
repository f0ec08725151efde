"""Types of ``rocketmq_blocking._native`` (``python/src/lib.rs``): the native clients the
Python layer wraps. Messages, queues and results cross as tuples the layer turns into its
dataclasses; these aliases name them."""

from typing import Any, Callable, Dict, List, Optional, Tuple, Union, final

#: ``(topic, body, tags, keys, properties, delay_level)``.
MessageTuple = Tuple[
    str, bytes, Optional[str], List[str], Dict[str, str], Optional[int], Optional[int], Optional[int]
]
#: (batch_max_delay_ms, batch_max_bytes, total_batch_max_bytes)
AutoBatch = Tuple[Optional[int], Optional[int], Optional[int]]
#: ``(topic, broker_name, queue_id)``.
QueueTuple = Tuple[str, str, int]
#: ``(msg_id, offset_msg_id, broker_name, queue_id, queue_offset, status)``.
SendResultTuple = Tuple[str, str, str, int, int, int]
#: ``(msg_id, topic, tags, keys, body, queue_id, queue_offset, reconsume_times,
#: born_timestamp_ms, store_timestamp_ms, properties, reply)``.
ReceivedTuple = Tuple[
    str,
    str,
    Optional[str],
    List[str],
    bytes,
    int,
    int,
    int,
    int,
    int,
    Dict[str, str],
    Optional["ReplyTemplate"],
]
#: The client options as ``_client_options`` passes them (``credentials`` and ``tls``
#: as tuples).
Common = Dict[str, Union[str, int, bool, Tuple[Any, ...]]]
#: ``(consume_tps, total_diff, [(queue, broker_offset, consumer_offset, pull_offset,
#: last_timestamp_ms)])``.
#: A send hook as the Python layer passes it: ``before(message)`` returns the properties
#: to add (``None``: the user's hook raised), ``after(message, result, error)`` whether
#: the user's hook ran without raising.
SendHookPair = Tuple[
    Callable[[MessageTuple], Optional[Dict[str, str]]],
    Callable[[MessageTuple, Optional[SendResultTuple], Optional[BaseException]], bool],
]
#: A consume hook: ``before(messages)`` and ``after(messages, status)``, each returning
#: whether the user's hook ran without raising.
ConsumeHookPair = Tuple[
    Callable[[List[ReceivedTuple]], bool],
    Callable[[List[ReceivedTuple], int], bool],
]
ConsumeStatsTuple = Tuple[float, int, List[Tuple[QueueTuple, int, int, int, Optional[int]]]]

def set_error_class(
    make: Callable[[str, str, Optional[int], bool], BaseException],
) -> None: ...
def set_log_level(level: int) -> None: ...
def version() -> str: ...
def create_topic(common: Common, topic: str, queues: int) -> None: ...
@final
class ReplyTemplate:
    """The reply to a received request, without its body."""

@final
class Producer:
    def __new__(
        cls,
        group: str,
        common: Common,
        send_timeout_ms: Optional[int],
        retries: Optional[int],
        send_hook: Optional[SendHookPair],
        auto_batch: Optional[AutoBatch],
    ) -> "Producer": ...
    def stats(self) -> str: ...
    def send(self, m: MessageTuple) -> SendResultTuple: ...
    def send_to_queue(self, m: MessageTuple, queue: QueueTuple) -> SendResultTuple: ...
    def send_by_key(self, m: MessageTuple, key: str) -> SendResultTuple: ...
    def fetch_queues(self, topic: str) -> List[QueueTuple]: ...
    def send_oneway(self, m: MessageTuple) -> None: ...
    def send_batch(self, ms: List[MessageTuple]) -> SendResultTuple: ...
    def send_async(
        self,
        m: MessageTuple,
        done: Callable[[Optional[SendResultTuple], Optional[BaseException]], None],
    ) -> None: ...
    def request(self, m: MessageTuple, timeout_ms: int) -> ReceivedTuple: ...
    def send_reply(self, template: ReplyTemplate, body: bytes) -> SendResultTuple: ...
    def free(self) -> None: ...

@final
class TransactionProducer:
    def __new__(
        cls,
        group: str,
        execute: Callable[[MessageTuple, object], int],
        check: Callable[[ReceivedTuple], int],
        common: Common,
        send_timeout_ms: Optional[int],
        retries: Optional[int],
    ) -> "TransactionProducer": ...
    def send_in_transaction(self, m: MessageTuple, arg: object) -> Tuple[SendResultTuple, int]: ...
    def free(self) -> None: ...

@final
class PushConsumer:
    def __new__(
        cls,
        group: str,
        topic: str,
        on_messages: Callable[[List[ReceivedTuple]], int],
        common: Common,
        expression: str,
        sql: Optional[str],
        orderly: bool,
        broadcasting: bool,
        from_first: bool,
        threads: Optional[Tuple[int, int]],
        batch_max_size: Optional[int],
        consume_hook: Optional[ConsumeHookPair],
    ) -> "PushConsumer": ...
    def stats(self) -> str: ...
    def free(self) -> None: ...

@final
class LitePullConsumer:
    def __new__(
        cls,
        group: str,
        topic: Optional[str],
        common: Common,
        expression: str,
        from_first: bool,
        auto_commit: bool,
    ) -> "LitePullConsumer": ...
    def stats(self) -> str: ...
    def poll(self, timeout_ms: int) -> List[ReceivedTuple]: ...
    def commit(self) -> None: ...
    def assign(self, queues: List[QueueTuple]) -> None: ...
    def assignment(self) -> List[QueueTuple]: ...
    def seek(self, queue: QueueTuple, offset: int) -> None: ...
    def seek_to_begin(self, queue: QueueTuple) -> None: ...
    def seek_to_end(self, queue: QueueTuple) -> None: ...
    def committed(self, queue: QueueTuple) -> Optional[int]: ...
    def offset_for_timestamp(self, queue: QueueTuple, timestamp_ms: int) -> int: ...
    def pause(self, queues: List[QueueTuple]) -> None: ...
    def resume(self, queues: List[QueueTuple]) -> None: ...
    def free(self) -> None: ...

@final
class NativeAdmin:
    def __new__(cls, common: Common) -> "NativeAdmin": ...
    def create_topic(self, topic: str, queues: int) -> List[str]: ...
    def delete_topic(self, topic: str) -> List[str]: ...
    def topic_list(self) -> List[str]: ...
    def total_max_offset(self, topic: str) -> int: ...
    def view_message(self, offset_msg_id: str) -> ReceivedTuple: ...
    def query_message_by_unique_key(self, topic: str, msg_id: str) -> Optional[ReceivedTuple]: ...
    def consume_stats(self, group: str, topic: Optional[str]) -> ConsumeStatsTuple: ...
    def free(self) -> None: ...
