//! Auto-batching (`ProducerBuilder::auto_batch`, Java 5 `setAutoBatch`) against the real
//! broker: single sends from many threads go as `SEND_BATCH_MESSAGE`s, and each caller
//! still gets its own message id and queue offset, which the consumer sees its message at.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use parking_lot::Mutex;
use rocketmq_blocking::{
    ConsumeStatus, ErrorKind, Message, MessageExt, MessageQueue, Producer, RequestContext,
    RequestHook, SendResult,
};

use crate::cluster;
use crate::consumer::{consumer, wait_for};

/// Counts the producer's single and batch send requests.
#[derive(Default)]
struct Sends {
    single: AtomicU64,
    batch: AtomicU64,
}

impl RequestHook for Sends {
    fn before_request(&self, request: &mut RequestContext<'_>) {
        match request.code() {
            310 => self.single.fetch_add(1, Ordering::SeqCst),
            320 => self.batch.fetch_add(1, Ordering::SeqCst),
            _ => 0,
        };
    }
}

/// An auto-batching producer on a client instance of its own (request hooks see every
/// request of their instance), with its send counter.
fn batching_producer(delay: Duration) -> (Producer, Arc<Sends>) {
    let sends = Arc::new(Sends::default());
    let p = Producer::builder(cluster::unique("ab_pg"))
        .client_options(cluster::options().instance_name(cluster::unique("ab_inst")))
        .auto_batch(true)
        .batch_max_delay(delay)
        .request_hook(sends.clone())
        .start()
        .unwrap();
    (p, sends)
}

/// Queue `id` of `topic` on its broker.
fn queue(p: &Producer, topic: &str, id: i32) -> MessageQueue {
    let mqs = p.fetch_publish_message_queues(topic).unwrap();
    MessageQueue::new(topic, mqs[0].broker_name(), id)
}

fn message(topic: &str, i: usize) -> Message {
    let mut m = Message::new(topic, format!("body-{i}")).with_tags(format!("tag{}", i % 3));
    m.put_user_property("index", i.to_string()).unwrap();
    m
}

/// Sends messages `0..n` async; their results as the callbacks report them.
fn send_async_all(p: &Producer, topic: &str, n: usize) -> Arc<Mutex<Vec<(usize, SendResult)>>> {
    let results: Arc<Mutex<Vec<(usize, SendResult)>>> = Arc::default();
    for i in 0..n {
        let results = results.clone();
        p.send_async(message(topic, i), move |r| {
            results.lock().push((i, r.unwrap()));
        })
        .unwrap();
    }
    results
}

/// Consumes `topic` until `n` messages came, and returns them by message id; fails on a
/// duplicate.
fn consume_all(topic: &str, n: usize) -> HashMap<String, MessageExt> {
    let seen: Arc<Mutex<Vec<MessageExt>>> = Arc::default();
    let s = seen.clone();
    let c = consumer(&cluster::unique("ab_cg"), topic)
        .listener(move |msgs, _| {
            s.lock().extend(msgs.iter().cloned());
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    wait_for("every message", Duration::from_secs(60), || {
        seen.lock().len() >= n
    });
    c.shutdown();
    let seen = std::mem::take(&mut *seen.lock());
    assert_eq!(seen.len(), n, "duplicates or strays");
    let by_id: HashMap<String, MessageExt> = seen
        .into_iter()
        .map(|m| (m.msg_id().to_string(), m))
        .collect();
    assert_eq!(by_id.len(), n, "a message id came twice");
    by_id
}

/// Every result is the caller's own, and the consumer got each message once, intact, at
/// the queue and offset its sender was told.
fn check_results_against_consumer(topic: &str, results: &[(usize, SendResult)]) {
    let ids: HashSet<&str> = results.iter().map(|(_, r)| r.msg_id()).collect();
    assert_eq!(ids.len(), results.len(), "two callers got one message id");
    let places: HashSet<(i32, i64)> = results
        .iter()
        .map(|(_, r)| (r.message_queue().queue_id(), r.queue_offset()))
        .collect();
    assert_eq!(places.len(), results.len(), "two callers got one offset");
    let offset_ids: HashSet<&str> = results.iter().map(|(_, r)| r.offset_msg_id()).collect();
    assert_eq!(offset_ids.len(), results.len());
    let got = consume_all(topic, results.len());
    for (i, r) in results {
        let m = got
            .get(r.msg_id())
            .unwrap_or_else(|| panic!("message {i} ({}) not consumed", r.msg_id()));
        assert_eq!(m.body(), format!("body-{i}").as_bytes());
        assert_eq!(m.property("index"), Some(i.to_string().as_str()));
        assert_eq!(m.tags(), Some(format!("tag{}", i % 3).as_str()));
        assert_eq!(m.queue_id(), r.message_queue().queue_id(), "message {i}");
        assert_eq!(m.queue_offset(), r.queue_offset(), "message {i}");
        assert_eq!(m.offset_msg_id(), r.offset_msg_id(), "message {i}");
    }
}

#[test]
fn auto_batch_many_sync_threads_each_get_their_own_result_and_every_message_arrives_once() {
    let topic = cluster::topic("ab_sync", 4);
    let (p, sends) = batching_producer(Duration::from_millis(50));
    let (threads, per_thread) = (32, 20);
    let results: Mutex<Vec<(usize, SendResult)>> = Mutex::default();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (p, topic, results) = (&p, &topic, &results);
            s.spawn(move || {
                for j in 0..per_thread {
                    let i = t * per_thread + j;
                    let r = p.send(&message(topic, i)).unwrap();
                    assert_eq!(r.message_queue().topic(), topic.as_str());
                    results.lock().push((i, r));
                }
            });
        }
    });
    let n = threads * per_thread;
    let (single, batch) = (
        sends.single.load(Ordering::SeqCst),
        sends.batch.load(Ordering::SeqCst),
    );
    println!("{n} sync sends went as {batch} batches and {single} single sends");
    assert_eq!(single, 0, "every message could be batched");
    assert!(batch > 0 && batch < n as u64 / 2, "{batch} batches");
    let stats = p.stats();
    let t = &stats.topics[&topic];
    assert_eq!((t.messages_sent, t.failed), (n as u64, 0));
    check_results_against_consumer(&topic, &results.into_inner());
    p.shutdown();
}

#[test]
fn auto_batch_async_sends_each_get_their_own_callback() {
    let topic = cluster::topic("ab_async", 2);
    let (p, sends) = batching_producer(Duration::from_millis(20));
    let n = 400;
    let results = send_async_all(&p, &topic, n);
    wait_for("every callback", Duration::from_secs(30), || {
        results.lock().len() >= n
    });
    assert_eq!(sends.single.load(Ordering::SeqCst), 0);
    assert!(sends.batch.load(Ordering::SeqCst) < n as u64 / 2);
    let results = std::mem::take(&mut *results.lock());
    check_results_against_consumer(&topic, &results);
    p.shutdown();
}

#[test]
fn auto_batch_keeps_the_order_of_sends_to_a_chosen_queue() {
    let topic = cluster::topic("ab_order", 4);
    let (p, sends) = batching_producer(Duration::from_millis(20));
    let mq = queue(&p, &topic, 2);
    // Async sends to one queue from one thread: stored in the order sent.
    let offsets: Arc<Mutex<HashMap<usize, i64>>> = Arc::default();
    let n = 200;
    for i in 0..n {
        let offsets = offsets.clone();
        p.send_async_to_queue(message(&topic, i), &mq, move |r| {
            let r = r.unwrap();
            assert_eq!(r.message_queue().queue_id(), 2);
            offsets.lock().insert(i, r.queue_offset());
        })
        .unwrap();
    }
    wait_for("every callback", Duration::from_secs(30), || {
        offsets.lock().len() >= n
    });
    let offsets = offsets.lock();
    for i in 1..n {
        assert!(
            offsets[&i] > offsets[&(i - 1)],
            "message {i} stored before {}",
            i - 1
        );
    }
    // Sync sends by selector from several threads: each thread's messages in its order.
    let by_thread: Mutex<Vec<Vec<i64>>> = Mutex::default();
    std::thread::scope(|s| {
        for t in 0..8usize {
            let (p, topic, by_thread) = (&p, &topic, &by_thread);
            s.spawn(move || {
                let mut mine = Vec::new();
                for j in 0..10 {
                    let select = |mqs: &[MessageQueue], _: &Message, t: &usize| {
                        mqs.get(t % mqs.len()).cloned()
                    };
                    let r = p
                        .send_with_selector(&message(topic, 1000 + t * 10 + j), &select, &t)
                        .unwrap();
                    assert_eq!(r.message_queue().queue_id() as usize, t % 4);
                    mine.push(r.queue_offset());
                }
                by_thread.lock().push(mine);
            });
        }
    });
    for mine in by_thread.lock().iter() {
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "{mine:?}");
    }
    assert_eq!(sends.single.load(Ordering::SeqCst), 0);
    p.shutdown();
}

#[test]
fn auto_batch_broker_error_fails_each_caller_of_the_batch() {
    let topic = cluster::topic("ab_error", 2);
    let (p, sends) = batching_producer(Duration::from_millis(300));
    // Queue 7 of a 2-queue topic: the broker refuses the batch sent to it.
    let bad = queue(&p, &topic, 7);
    let n = 8;
    let barrier = Barrier::new(n);
    let errors: Mutex<Vec<rocketmq_blocking::Error>> = Mutex::default();
    std::thread::scope(|s| {
        for i in 0..n {
            let (p, topic, bad, barrier, errors) = (&p, &topic, &bad, &barrier, &errors);
            s.spawn(move || {
                barrier.wait();
                let e = p.send_to_queue(&message(topic, i), bad).unwrap_err();
                errors.lock().push(e);
            });
        }
    });
    let errors = errors.into_inner();
    assert_eq!(errors.len(), n);
    for e in &errors {
        assert_eq!(e.kind(), ErrorKind::Response, "{e}");
        assert!(e.response_code().is_some(), "{e}");
    }
    let batches = sends.batch.load(Ordering::SeqCst);
    assert!((1..n as u64).contains(&batches), "{batches} batches");
    assert_eq!(sends.single.load(Ordering::SeqCst), 0);
    // The producer goes on: a good send after the failed batch.
    let r = p.send(&message(&topic, 0)).unwrap();
    assert_eq!(r.msg_id().split(',').count(), 1);
    p.shutdown();
}

#[test]
fn auto_batch_sends_delayed_timed_and_big_messages_alone() {
    let topic = cluster::topic("ab_alone", 1);
    let (p, sends) = batching_producer(Duration::from_millis(5));
    let mut delayed = message(&topic, 0);
    delayed.set_delay_time_level(1);
    let timed = message(&topic, 1).with_delivery_delay(Duration::from_secs(2));
    let big = Message::new(&topic, vec![b'x'; 40 * 1024]);
    for m in [&delayed, &timed, &big] {
        p.send(m).unwrap();
    }
    assert_eq!(sends.single.load(Ordering::SeqCst), 3);
    assert_eq!(sends.batch.load(Ordering::SeqCst), 0);
    p.send(&message(&topic, 2)).unwrap();
    assert_eq!(sends.batch.load(Ordering::SeqCst), 1);
    p.shutdown();
}

#[test]
fn auto_batch_shutdown_sends_the_open_batches_first() {
    let topic = cluster::topic("ab_shutdown", 1);
    // Batches would wait 30 s: only shutdown sends them.
    let (p, sends) = batching_producer(Duration::from_secs(30));
    let n = 20;
    let results = send_async_all(&p, &topic, n);
    assert!(results.lock().is_empty());
    p.shutdown();
    // Answered before shutdown returned.
    assert_eq!(results.lock().len(), n);
    assert_eq!(sends.batch.load(Ordering::SeqCst), 1);
    let results = std::mem::take(&mut *results.lock());
    check_results_against_consumer(&topic, &results);
    // After shutdown a send is refused, not held.
    let e = p.send(&message(&topic, 99)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::State);
}

#[test]
fn auto_batch_settings_outside_javas_ranges_are_refused() {
    let cases = [
        Producer::builder("ab_bad").batch_max_delay(Duration::ZERO),
        Producer::builder("ab_bad").batch_max_delay(Duration::from_secs(31)),
        Producer::builder("ab_bad").batch_max_bytes(0),
        Producer::builder("ab_bad").batch_max_bytes(2 * 1024 * 1024 + 1),
        Producer::builder("ab_bad").total_batch_max_bytes(0),
    ];
    for b in cases {
        let e = b
            .client_options(cluster::options())
            .auto_batch(true)
            .start()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
}
