//! Request-reply: a requester waits for the answer of whoever consumes its request.
//!
//! A push consumer answers each request on the topic with a reply made by
//! [`create_reply_message`] and sent with an ordinary producer; the broker pushes that reply
//! to the requesting client, where [`Producer::request`] returns it. Then the same with
//! [`Producer::request_async`], and a request nobody answers, which times out.
//!
//! Java equivalent: `Message reply = producer.request(msg, 3000);` and, in the responder,
//! `producer.send(MessageUtil.createReplyMessage(request, body))`.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example request_reply
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_blocking::{
    create_reply_message, ConsumeFromWhere, ConsumeStatus, ErrorKind, Message, Producer,
    PushConsumer, TopicConfig,
};

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    let topic = common::unique("RequestTopic");
    let quiet = common::unique("NobodyAnswers");
    let admin = target.admin()?;
    admin.create_topic(&TopicConfig::new(&topic, 4))?;
    admin.create_topic(&TopicConfig::new(&quiet, 1))?;

    // The responder: a consumer of the topic and a producer for the replies.
    let replier = Arc::new(
        Producer::builder(common::unique("replier"))
            .client_options(target.options())
            .start()?,
    );
    let responder = PushConsumer::builder(common::unique("responder"))
        .client_options(target.options())
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |requests, _| {
            for request in requests {
                let question = String::from_utf8_lossy(request.body());
                let answer = format!("the answer to {question:?}");
                match create_reply_message(request, answer) {
                    Ok(reply) => {
                        if replier.send(&reply).is_err() {
                            return ConsumeStatus::ReconsumeLater;
                        }
                    }
                    Err(e) => eprintln!("not a request: {e}"),
                }
            }
            ConsumeStatus::Success
        })
        .start()?;

    let requester = Producer::builder(common::unique("requester"))
        .client_options(target.options())
        .start()?;
    for i in 0..3 {
        let t = Instant::now();
        let reply = requester.request(
            &Message::new(&topic, format!("question {i}")),
            Duration::from_secs(30),
        )?;
        println!(
            "request {i}: {:?} after {} ms",
            String::from_utf8_lossy(reply.body()),
            t.elapsed().as_millis()
        );
    }

    let (tx, rx) = mpsc::channel();
    requester.request_async(
        Message::new(&topic, "an async question"),
        Duration::from_secs(30),
        move |r| {
            let _ = tx.send(r);
        },
    )?;
    let reply = rx.recv_timeout(Duration::from_secs(60))??;
    println!("async request: {:?}", String::from_utf8_lossy(reply.body()));

    let t = Instant::now();
    match requester.request(&Message::new(&quiet, "anyone?"), Duration::from_secs(2)) {
        Err(e) if e.kind() == ErrorKind::Timeout => {
            println!(
                "unanswered request: timed out after {} ms ({e})",
                t.elapsed().as_millis()
            )
        }
        other => return Err(format!("expected a timeout, got {other:?}").into()),
    }

    requester.shutdown();
    responder.shutdown();
    Ok(())
}
