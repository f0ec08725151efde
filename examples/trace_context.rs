//! Hooks carrying a W3C trace context from producer to consumer: a send hook puts a
//! `traceparent` property on every message (a new trace, or the caller's span as parent),
//! and a consume hook reads it before the listener runs and sees the outcome after. With
//! a tracing library, the hooks would start and end spans at those points.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example trace_context
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::{mpsc, Arc};
use std::time::Duration;

use rocketmq_blocking::{
    ConsumeContext, ConsumeFromWhere, ConsumeHook, ConsumeStatus, Error, Message, Producer,
    PushConsumer, SendContext, SendHook, SendResult, TopicConfig,
};

/// The property name the W3C Trace Context specification gives the header.
const TRACEPARENT: &str = "traceparent";

/// A `traceparent` of a new trace: version 00, random trace and span ids, sampled.
fn new_traceparent() -> String {
    let r = |salt: u64| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        h.finish()
    };
    format!("00-{:016x}{:016x}-{:016x}-01", r(1), r(2), r(3))
}

struct InjectTraceparent;

impl SendHook for InjectTraceparent {
    fn before_send(&self, ctx: &mut SendContext<'_>) {
        if ctx.message().property(TRACEPARENT).is_none() {
            let tp = new_traceparent();
            // Property names and values are checked; a traceparent is always valid.
            let _ = ctx.message_mut().put_user_property(TRACEPARENT, tp);
        }
    }

    fn after_send(&self, ctx: &SendContext<'_>, result: Result<Option<&SendResult>, &Error>) {
        let tp = ctx.message().property(TRACEPARENT).unwrap_or("-");
        match result {
            Ok(Some(r)) => println!("producer span {tp}: stored as {}", r.msg_id()),
            Ok(None) => println!("producer span {tp}: sent oneway"),
            Err(e) => println!("producer span {tp}: failed: {e}"),
        }
    }
}

/// Tells `main` the trace context of each consumed batch once the listener is done.
struct ExtractTraceparent {
    done: mpsc::Sender<Option<String>>,
}

impl ConsumeHook for ExtractTraceparent {
    fn before_consume(&self, ctx: &ConsumeContext<'_>) {
        for m in ctx.messages() {
            let tp = m.property(TRACEPARENT).unwrap_or("-");
            println!(
                "consumer span, parent {tp}: {} from {}",
                m.msg_id(),
                ctx.queue()
            );
        }
    }

    fn after_consume(&self, ctx: &ConsumeContext<'_>) {
        println!(
            "consumer span ends: {:?} after {} earlier deliveries",
            ctx.status(),
            ctx.reconsume_times()
        );
        for m in ctx.messages() {
            let _ = self.done.send(m.property(TRACEPARENT).map(str::to_string));
        }
    }
}

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    let topic = common::unique("TracedContextTopic");
    target.admin()?.create_topic(&TopicConfig::new(&topic, 1))?;

    let producer = Producer::builder(common::unique("tc_producer"))
        .client_options(target.options())
        .send_hook(Arc::new(InjectTraceparent))
        .start()?;

    let (tx, rx) = mpsc::channel();
    let consumer = PushConsumer::builder(common::unique("tc_consumer"))
        .client_options(target.options())
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(|_, _| ConsumeStatus::Success)
        // The hook reports before its consume task ends: let shutdown wait for the task.
        .await_termination_when_shutdown(Duration::from_secs(2))
        .consume_hook(Arc::new(ExtractTraceparent { done: tx }))
        .start()?;

    producer.send(&Message::new(&topic, "traced"))?;
    let received = rx.recv_timeout(Duration::from_secs(60))?;
    println!("consumed with traceparent {received:?}");
    consumer.shutdown();
    producer.shutdown();
    Ok(())
}
