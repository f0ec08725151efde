//! Send, consume and request hooks against the real broker: a W3C `traceparent` carried
//! from producer to consumer, the threads hooks run on, panicking hooks caught and
//! counted, the status and reconsume count a consume hook sees. Run them with
//! `cargo test --test it hook`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rocketmq_blocking::{
    ConsumeContext, ConsumeHook, ConsumeHookStatus, ConsumeStatus, Error, Message, Producer,
    ReconsumeDelay, RequestContext, RequestHook, ResponseContext, SendContext, SendHook, SendMode,
    SendResult,
};

use crate::cluster;
use crate::consumer::{consumer, producer, wait_for};
use crate::java::{lines_after, wait_or_kill, JavaProgram};

/// How long a Java side may take (a JVM start and a rebalance on a loaded machine).
const JAVA_TIMEOUT: Duration = Duration::from_secs(180);

/// The Java side of the trace-context tests, built against the cluster's client jars.
fn java() -> JavaProgram {
    let version = cluster::cluster().lock().version().to_string();
    JavaProgram::compile(
        &version,
        "tests/it/java/TraceContextInterop.java",
        "TraceContextInterop",
    )
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_string()
}

/// Adds a `traceparent` to every message and records what it saw after each send.
#[derive(Default)]
struct Inject {
    next: AtomicU64,
    /// msg id → (traceparent, thread of `after_send`, mode).
    sent: Mutex<HashMap<String, (String, String, SendMode)>>,
    threads: Mutex<Vec<String>>,
}

impl SendHook for Inject {
    fn before_send(&self, ctx: &mut SendContext<'_>) {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let tp = format!("00-{:032x}-{:016x}-01", n + 1, n + 7);
        ctx.message_mut()
            .put_user_property("traceparent", tp)
            .unwrap();
        self.threads.lock().push(thread_name());
    }

    fn after_send(&self, ctx: &SendContext<'_>, result: Result<Option<&SendResult>, &Error>) {
        if let Ok(Some(r)) = result {
            let tp = ctx
                .message()
                .property("traceparent")
                .unwrap_or("")
                .to_string();
            self.sent
                .lock()
                .insert(r.msg_id().to_string(), (tp, thread_name(), ctx.mode()));
        }
    }
}

/// Records what the consume hook saw.
#[derive(Default)]
struct Extract {
    /// msg id → traceparent, from `before_consume`.
    before: Mutex<HashMap<String, String>>,
    /// (status, reconsume times, thread) of each `after_consume`.
    after: Mutex<Vec<(ConsumeHookStatus, i32, String)>>,
}

impl ConsumeHook for Extract {
    fn before_consume(&self, ctx: &ConsumeContext<'_>) {
        assert!(ctx.status().is_none());
        let mut b = self.before.lock();
        for m in ctx.messages() {
            let tp = m.property("traceparent").unwrap_or("").to_string();
            b.insert(m.msg_id().to_string(), tp);
        }
    }

    fn after_consume(&self, ctx: &ConsumeContext<'_>) {
        if let Some(s) = ctx.status() {
            self.after
                .lock()
                .push((s, ctx.reconsume_times(), thread_name()));
        }
    }
}

#[test]
fn hook_carries_a_traceparent_from_producer_to_consumer() {
    let topic = cluster::topic("hook_tp", 2);
    let p = producer();
    let inject = Arc::new(Inject::default());
    p.register_send_hook(inject.clone());
    let extract = Arc::new(Extract::default());
    let seen: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let s = seen.clone();
    let c = consumer(&cluster::unique("hook_tp_g"), &topic)
        .listener(move |msgs, _| {
            let mut s = s.lock();
            for m in msgs {
                let tp = m.property("traceparent").unwrap_or("").to_string();
                s.insert(m.msg_id().to_string(), tp);
            }
            ConsumeStatus::Success
        })
        .consume_hook(extract.clone())
        .start()
        .unwrap();
    for i in 0..5 {
        let r = p.send(&Message::new(&topic, format!("sync {i}"))).unwrap();
        assert!(inject.sent.lock().contains_key(r.msg_id()));
    }
    let done = Arc::new(AtomicU64::new(0));
    for i in 0..5 {
        let d = done.clone();
        p.send_async(Message::new(&topic, format!("async {i}")), move |r| {
            r.unwrap();
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    wait_for("the async sends", Duration::from_secs(30), || {
        done.load(Ordering::SeqCst) == 5
    });
    wait_for("every message consumed", Duration::from_secs(60), || {
        seen.lock().len() == 10
    });
    let sent = inject.sent.lock().clone();
    assert_eq!(sent.len(), 10);
    let seen = seen.lock().clone();
    let before = extract.before.lock().clone();
    for (id, (tp, thread, mode)) in &sent {
        assert!(tp.starts_with("00-") && tp.len() == 55, "{tp}");
        assert_eq!(
            seen.get(id),
            Some(tp),
            "the listener saw the producer's traceparent"
        );
        assert_eq!(
            before.get(id),
            Some(tp),
            "the consume hook saw it before the listener"
        );
        assert_ne!(thread, "rmq-io", "after_send never runs on the I/O thread");
        if *mode == SendMode::Async {
            assert!(thread.starts_with("rmq-callback"), "{thread}");
        }
    }
    // before_send ran on the caller's (test) thread.
    assert!(inject.threads.lock().iter().all(|t| !t.starts_with("rmq-")));
    let after = extract.after.lock().clone();
    assert!(!after.is_empty());
    for (status, reconsumed, thread) in &after {
        assert_eq!(*status, ConsumeHookStatus::Success);
        assert_eq!(*reconsumed, 0);
        assert!(thread.starts_with("rmq-consume"), "{thread}");
    }
    assert_eq!(p.stats().hook_panics, 0);
    assert_eq!(c.stats().hook_panics, 0);
    c.shutdown();
    p.shutdown();
}

struct Panics;

impl SendHook for Panics {
    fn before_send(&self, _: &mut SendContext<'_>) {
        panic!("a send hook that panics before");
    }
    fn after_send(&self, _: &SendContext<'_>, _: Result<Option<&SendResult>, &Error>) {
        panic!("a send hook that panics after");
    }
}

impl ConsumeHook for Panics {
    fn before_consume(&self, _: &ConsumeContext<'_>) {
        panic!("a consume hook that panics");
    }
}

#[test]
fn hook_that_panics_is_caught_and_counted_and_messages_still_flow() {
    let topic = cluster::topic("hook_panic", 1);
    let p = producer();
    p.register_send_hook(Arc::new(Panics));
    let consumed = Arc::new(AtomicU64::new(0));
    let n = consumed.clone();
    let c = consumer(&cluster::unique("hook_panic_g"), &topic)
        .consume_message_batch_max_size(1)
        .listener(move |msgs, _| {
            n.fetch_add(msgs.len() as u64, Ordering::SeqCst);
            ConsumeStatus::Success
        })
        .consume_hook(Arc::new(Panics))
        .start()
        .unwrap();
    for i in 0..4 {
        p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
    }
    p.send_oneway(&Message::new(&topic, "oneway")).unwrap();
    // Two panics per send (before and after), all caught.
    assert_eq!(p.stats().hook_panics, 10);
    wait_for("every message consumed", Duration::from_secs(60), || {
        consumed.load(Ordering::SeqCst) == 5
    });
    let s = c.stats();
    assert_eq!(s.hook_panics, 5, "one panic per listener call: {s:?}");
    assert_eq!(s.topics[&topic].consumed_ok, 5);
    c.shutdown();
    p.shutdown();
}

#[test]
fn hook_sees_the_status_and_reconsume_count_of_a_failed_listener_call() {
    let topic = cluster::topic("hook_retry", 1);
    let p = producer();
    let extract = Arc::new(Extract::default());
    let calls = Arc::new(AtomicU64::new(0));
    let n = calls.clone();
    let c = consumer(&cluster::unique("hook_retry_g"), &topic)
        .listener(move |_, ctx| {
            // The first delivery fails; the retry (after 1 s, level 1) succeeds.
            if n.fetch_add(1, Ordering::SeqCst) == 0 {
                ctx.set_reconsume_delay(ReconsumeDelay::Level(1));
                ConsumeStatus::ReconsumeLater
            } else {
                ConsumeStatus::Success
            }
        })
        .consume_hook(extract.clone())
        .start()
        .unwrap();
    p.send(&Message::new(&topic, "fails once")).unwrap();
    wait_for("the retry", Duration::from_secs(90), || {
        extract.after.lock().len() >= 2
    });
    let after = extract.after.lock().clone();
    assert_eq!(after[0].0, ConsumeHookStatus::ReconsumeLater);
    assert_eq!(after[0].1, 0);
    assert_eq!(after[1].0, ConsumeHookStatus::Success);
    assert_eq!(after[1].1, 1, "the retry is the second delivery");
    let s = c.stats();
    assert_eq!(
        s.topics.get(&topic).map(|t| t.consumed_failed),
        Some(1),
        "{s:?}"
    );
    c.shutdown();
    p.shutdown();
}

/// Adds a header field to every request and records the response codes of sends.
#[derive(Default)]
struct Rpc {
    /// Requests of any code: the route queries and heartbeats of `start` included.
    requests: AtomicU64,
    sends: AtomicU64,
    send_responses: Mutex<Vec<i32>>,
    panic_after: bool,
}

impl RequestHook for Rpc {
    fn before_request(&self, request: &mut RequestContext<'_>) {
        self.requests.fetch_add(1, Ordering::SeqCst);
        if request.code() == 310 {
            self.sends.fetch_add(1, Ordering::SeqCst);
            assert!(request.field("topic").is_some() || request.field("b").is_some());
            assert!(request.body_len() > 0);
        }
        request.set_field("hookField", "yes");
    }

    fn after_response(&self, response: &ResponseContext<'_>) {
        if response.request_code() == 310 {
            self.send_responses.lock().push(response.code());
        }
        if self.panic_after {
            panic!("a request hook that panics");
        }
    }
}

#[test]
fn hook_on_requests_sees_every_send_and_its_response() {
    let topic = cluster::topic("hook_rpc", 1);
    // A client instance of its own: request hooks apply to every client sharing one.
    let hook = Arc::new(Rpc::default());
    let p = Producer::builder(cluster::unique("hook_rpc_pg"))
        .client_options(cluster::options().instance_name(cluster::unique("hook_rpc_inst")))
        .request_hook(hook.clone())
        .start()
        .unwrap();
    assert_eq!(hook.sends.load(Ordering::SeqCst), 0);
    for i in 0..3 {
        p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
    }
    assert_eq!(hook.sends.load(Ordering::SeqCst), 3);
    assert_eq!(*hook.send_responses.lock(), vec![0, 0, 0]);
    // The topic's route query, before the first send, went through the hook too.
    assert!(hook.requests.load(Ordering::SeqCst) > 3);
    assert_eq!(p.stats().client.request_hook_panics, 0);
    p.register_request_hook(Arc::new(Rpc {
        panic_after: true,
        ..Rpc::default()
    }))
    .unwrap();
    p.send(&Message::new(&topic, "after a panicking hook"))
        .unwrap();
    assert!(p.stats().client.request_hook_panics >= 1);
    assert_eq!(hook.sends.load(Ordering::SeqCst), 4);
    p.shutdown();
}

/// A Rust send hook's `traceparent` reaches a Java consumer whose own
/// `ConsumeMessageHook` reads it, unchanged, for every message.
#[test]
fn hook_traceparent_from_a_rust_producer_reaches_a_java_consume_hook() {
    let topic = cluster::topic("hook_tp_java_c", 2);
    let inject = Arc::new(Inject::default());
    let p = Producer::builder(cluster::unique("hook_tp_java_pg"))
        .client_options(cluster::options())
        .send_hook(inject.clone())
        .start()
        .unwrap();
    for i in 0..4 {
        p.send(&Message::new(&topic, format!("rust {i}"))).unwrap();
    }
    let child = java()
        .command(
            &[],
            &[
                "consume",
                cluster::namesrv(),
                &topic,
                &cluster::unique("hook_tp_java_g"),
                "4",
            ],
        )
        .spawn()
        .expect("java runs");
    let out = wait_or_kill(child, JAVA_TIMEOUT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    let seen: HashMap<String, String> = lines_after(&text, "TRACEPARENT ")
        .iter()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, tp)| (id.to_string(), tp.to_string()))
        .collect();
    let sent = inject.sent.lock().clone();
    assert_eq!(sent.len(), 4);
    for (id, (tp, _, _)) in &sent {
        assert_eq!(seen.get(id), Some(tp), "{id}: Java saw {seen:?}");
    }
    p.shutdown();
}

/// A Java producer's `SendMessageHook` puts a `traceparent` on each message; a Rust
/// consume hook reads the same value.
#[test]
fn hook_traceparent_from_a_java_send_hook_reaches_a_rust_consume_hook() {
    let topic = cluster::topic("hook_tp_java_p", 2);
    let out = java().run(
        &[],
        &["produce", cluster::namesrv(), &topic, "4"],
        JAVA_TIMEOUT,
    );
    let sent: HashMap<String, String> = lines_after(&out, "SENT ")
        .iter()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, tp)| (id.to_string(), tp.to_string()))
        .collect();
    assert_eq!(sent.len(), 4, "{out}");
    assert!(sent
        .values()
        .all(|tp| tp.starts_with("00-") && tp.len() == 55));
    let extract = Arc::new(Extract::default());
    let c = consumer(&cluster::unique("hook_tp_java_rg"), &topic)
        .consume_hook(extract.clone())
        .listener(|_, _| ConsumeStatus::Success)
        .start()
        .unwrap();
    wait_for("the Java messages", Duration::from_secs(60), || {
        sent.keys().all(|id| extract.before.lock().contains_key(id))
    });
    let before = extract.before.lock().clone();
    for (id, tp) in &sent {
        assert_eq!(before.get(id), Some(tp), "{id}");
    }
    c.shutdown();
}
