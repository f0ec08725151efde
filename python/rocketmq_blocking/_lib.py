"""Loading librocketmq_blocking and declaring the C functions this package calls."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_bytes_p = ctypes.POINTER(ctypes.c_char)
c_void_pp = ctypes.POINTER(ctypes.c_void_p)

SEND_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
CONSUME_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p
)


def _candidates() -> list[str]:
    env = os.environ.get("ROCKETMQ_BLOCKING_LIB")
    if env:
        return [env]
    here = Path(__file__).resolve().parent
    # In the source tree: python/rocketmq_blocking -> ../../target/{release,debug}.
    found = [str(here.parent.parent / "target" / p / "librocketmq_blocking.so") for p in ("release", "debug")]
    system = ctypes.util.find_library("rocketmq_blocking")
    if system:
        found.append(system)
    return found


def _load() -> ctypes.CDLL:
    tried = _candidates()
    for path in tried:
        if os.path.exists(path) or not os.path.sep in path:
            try:
                # CDLL releases the GIL during every call, so a call that waits for a
                # listener running Python code does not deadlock.
                return ctypes.CDLL(path)
            except OSError:
                continue
    raise ImportError(
        "librocketmq_blocking not found (build it with `cargo build --release -p rocketmq-blocking-ffi` "
        f"or set ROCKETMQ_BLOCKING_LIB); tried {tried}"
    )


lib = _load()

_S = (ctypes.c_char_p, ctypes.c_size_t)  # a string as pointer + length
_V = ctypes.c_void_p
_SIGNATURES: dict[str, tuple] = {
    "rmq_last_error": (ctypes.c_char_p, ctypes.c_size_t, c_size_p),
    "rmq_last_response_code": (ctypes.POINTER(ctypes.c_bool), ctypes.POINTER(ctypes.c_int32)),
    "rmq_message_new": (*_S, ctypes.c_char_p, ctypes.c_size_t, c_void_pp),
    "rmq_message_set_tags": (_V, *_S),
    "rmq_message_set_keys": (_V, *_S),
    "rmq_message_put_property": (_V, *_S, *_S),
    "rmq_message_set_delay_level": (_V, ctypes.c_uint32),
    "rmq_message_ext_topic": (_V, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_message_ext_tags": (_V, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_message_ext_keys": (_V, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_message_ext_msg_id": (_V, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_message_ext_body": (_V, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_message_ext_property": (_V, *_S, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_message_ext_queue_id": (_V, ctypes.POINTER(ctypes.c_int32)),
    "rmq_message_ext_queue_offset": (_V, ctypes.POINTER(ctypes.c_int64)),
    "rmq_message_ext_reconsume_times": (_V, ctypes.POINTER(ctypes.c_uint32)),
    "rmq_message_ext_born_timestamp_ms": (_V, ctypes.POINTER(ctypes.c_int64)),
    "rmq_message_ext_store_timestamp_ms": (_V, ctypes.POINTER(ctypes.c_int64)),
    "rmq_message_list_len": (_V, c_size_p),
    "rmq_message_list_get": (_V, ctypes.c_size_t, c_void_pp),
    "rmq_send_result_msg_id": (_V, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_send_result_offset_msg_id": (_V, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_send_result_queue": (_V, c_void_pp),
    "rmq_send_result_queue_offset": (_V, ctypes.POINTER(ctypes.c_int64)),
    "rmq_send_result_status": (_V, ctypes.POINTER(ctypes.c_int)),
    "rmq_message_queue_topic": (_V, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_message_queue_broker_name": (_V, ctypes.POINTER(c_bytes_p), c_size_p),
    "rmq_message_queue_id": (_V, ctypes.POINTER(ctypes.c_int32)),
    "rmq_producer_builder_new": (*_S, c_void_pp),
    "rmq_producer_builder_namesrv": (_V, *_S),
    "rmq_producer_builder_instance_name": (_V, *_S),
    "rmq_producer_builder_send_timeout_ms": (_V, ctypes.c_uint64),
    "rmq_producer_builder_retries": (_V, ctypes.c_uint32),
    "rmq_producer_builder_start": (_V, c_void_pp),
    "rmq_producer_send": (_V, _V, c_void_pp),
    "rmq_producer_send_oneway": (_V, _V),
    "rmq_producer_send_async": (_V, _V, SEND_CALLBACK, _V),
    "rmq_producer_send_batch": (_V, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, c_void_pp),
    "rmq_producer_shutdown": (_V,),
    "rmq_push_consumer_builder_new": (*_S, c_void_pp),
    "rmq_push_consumer_builder_namesrv": (_V, *_S),
    "rmq_push_consumer_builder_instance_name": (_V, *_S),
    "rmq_push_consumer_builder_subscribe": (_V, *_S, *_S),
    "rmq_push_consumer_builder_subscribe_sql": (_V, *_S, *_S),
    "rmq_push_consumer_builder_message_model": (_V, ctypes.c_int32),
    "rmq_push_consumer_builder_consume_from": (_V, ctypes.c_int32, ctypes.c_int64),
    "rmq_push_consumer_builder_consume_threads": (_V, ctypes.c_size_t, ctypes.c_size_t),
    "rmq_push_consumer_builder_consume_batch_max_size": (_V, ctypes.c_size_t),
    "rmq_push_consumer_builder_listener": (_V, CONSUME_CALLBACK, _V),
    "rmq_push_consumer_builder_orderly_listener": (_V, CONSUME_CALLBACK, _V),
    "rmq_push_consumer_builder_start": (_V, c_void_pp),
    "rmq_push_consumer_shutdown": (_V,),
    "rmq_lite_pull_consumer_builder_new": (*_S, c_void_pp),
    "rmq_lite_pull_consumer_builder_namesrv": (_V, *_S),
    "rmq_lite_pull_consumer_builder_instance_name": (_V, *_S),
    "rmq_lite_pull_consumer_builder_subscribe": (_V, *_S, *_S),
    "rmq_lite_pull_consumer_builder_consume_from": (_V, ctypes.c_int32, ctypes.c_int64),
    "rmq_lite_pull_consumer_builder_auto_commit": (_V, ctypes.c_bool),
    "rmq_lite_pull_consumer_builder_start": (_V, c_void_pp),
    "rmq_lite_pull_consumer_poll": (_V, ctypes.c_uint64, c_void_pp),
    "rmq_lite_pull_consumer_commit": (_V,),
    "rmq_lite_pull_consumer_shutdown": (_V,),
    "rmq_admin_new": (*_S, c_void_pp),
    "rmq_admin_create_topic": (_V, *_S, ctypes.c_uint32),
}
_FREES = [
    "rmq_message_free",
    "rmq_message_list_free",
    "rmq_send_result_free",
    "rmq_producer_builder_free",
    "rmq_producer_free",
    "rmq_push_consumer_builder_free",
    "rmq_push_consumer_free",
    "rmq_lite_pull_consumer_builder_free",
    "rmq_lite_pull_consumer_free",
    "rmq_admin_free",
]

for _name, _args in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.argtypes = list(_args)
    _f.restype = ctypes.c_int
for _name in _FREES:
    _f = getattr(lib, _name)
    _f.argtypes = [ctypes.c_void_p]
    _f.restype = None
lib.rmq_result_name.argtypes = [ctypes.c_int32]
lib.rmq_result_name.restype = ctypes.c_char_p
lib.rmq_version.argtypes = []
lib.rmq_version.restype = ctypes.c_char_p
