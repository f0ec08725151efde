//! `rmq request` against a responder built on the library: replies printed as JSON lines,
//! sync and async, and an unanswered request reported and reflected in the exit status.

use std::time::Duration;

use rocketmq_blocking::{create_reply_message, ConsumeFromWhere, ConsumeStatus, PushConsumer};

use super::{created_topic, namesrv, rmq, stderr, stdout_lines, unique};
use rocketmq_blocking::ClientOptions;

fn responder(topic: &str) -> PushConsumer {
    let replier = rocketmq_blocking::Producer::builder(unique("cli_replier"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .unwrap();
    PushConsumer::builder(unique("cli_responder"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _| {
            for m in msgs {
                let mut body = b"echo:".to_vec();
                body.extend_from_slice(m.body());
                let sent = create_reply_message(m, body).and_then(|r| replier.send(&r));
                if sent.is_err() {
                    return ConsumeStatus::ReconsumeLater;
                }
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap()
}

#[test]
fn request_prints_each_reply_and_a_summary() {
    let topic = created_topic(2);
    let c = responder(&topic);
    for mode in ["sync", "async"] {
        let out = rmq(&[
            "request",
            &topic,
            "--body",
            "ping",
            "--count",
            "2",
            "--mode",
            mode,
            "--timeout",
            "60",
        ]);
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        let lines = stdout_lines(&out);
        assert_eq!(lines.len(), 3, "{mode}: {lines:?}");
        for l in &lines[..2] {
            assert_eq!(l["reply"], "echo:ping", "{mode}: {l}");
            assert!(l["correlationId"].is_string(), "{l}");
        }
        assert_eq!(lines[2]["replies"], 2);
        assert_eq!(lines[2]["failed"], 0);
    }
    c.shutdown();
}

#[test]
fn an_unanswered_request_is_reported_and_fails_the_command() {
    let topic = created_topic(1);
    let started = std::time::Instant::now();
    let out = rmq(&["request", &topic, "--body", "anyone?", "--timeout", "1"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no reply"), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines.last().map(|l| l["failed"].clone()), Some(1.into()));
    assert!(started.elapsed() < Duration::from_secs(30));
    let out = rmq(&["request", &topic, "--body", "x", "--mode", "oneway"]);
    assert!(!out.status.success(), "oneway makes no sense for a request");
}
