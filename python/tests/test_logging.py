"""The library's own log (the Rust `log` records) reaches Python's `logging`, on loggers
named after the module that logged (`rocketmq_blocking.consumer.lite_pull`, ...), so a
`rocketmq_blocking` logger configuration covers it."""

import logging

import rocketmq_blocking as rmq
from conftest import unique, wait_for


def test_the_librarys_warnings_reach_python_logging(namesrv, caplog):
    caplog.set_level(logging.WARNING, logger="rocketmq_blocking")
    missing = unique("PyNoSuchTopic")

    def records():
        return [r for r in caplog.records if missing in r.getMessage()]

    # Subscribing to a topic that does not exist: the consumer warns that it has no route.
    with rmq.LitePullConsumer(unique("py_log"), missing, namesrv=namesrv):
        assert wait_for(lambda: records(), timeout=30), caplog.text
    r = records()[0]
    assert r.name.startswith("rocketmq_blocking.") and r.name != "rocketmq_blocking", r.name
    assert r.levelno == logging.WARNING, r
    assert r.pathname.endswith(".rs") and r.lineno > 0, (r.pathname, r.lineno)


def test_set_log_level_forwards_less_severe_records(namesrv, caplog):
    caplog.set_level(logging.DEBUG, logger="rocketmq_blocking")
    rmq.set_log_level(logging.DEBUG)
    try:
        with rmq.Producer(unique("py_log_p"), namesrv=namesrv):
            pass
        assert wait_for(
            lambda: any(r.levelno <= logging.INFO and r.name.startswith("rocketmq_blocking.") for r in caplog.records),
            timeout=30,
        ), caplog.text
    finally:
        rmq.set_log_level(logging.WARNING)
