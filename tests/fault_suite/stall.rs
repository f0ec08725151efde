//! A broker that stops reading: its proxy stalls client → broker, the connections stay
//! open, and the clients' writes pile up first in the socket buffers, then in the
//! remoting client's write queue.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::testkit::proxy::Direction;
use rocketmq_blocking::{Message, Producer};

use crate::{
    eventually, proxy, read_back, rss_kib, scale, serial, table, tally, topic_on_both, unique,
    ForwardOnDrop, BROKER_A,
};
use rocketmq_blocking::ClientOptions;

#[test]
fn a_broker_that_stops_reading_costs_each_sync_send_at_most_its_timeout() {
    let _serial = serial();
    let _forward = ForwardOnDrop;
    let topic = topic_on_both("stall_sync", 4);
    let stall = Duration::from_secs(5 * scale() as u64);
    let send_timeout = Duration::from_secs(1);
    let p = Producer::builder(unique("pg_stall_sync"))
        .client_options(ClientOptions::new().namesrv_addr(crate::namesrv()))
        .send_timeout(send_timeout)
        .start()
        .unwrap();
    let remoting = p.client_instance().unwrap().remoting().clone();
    let acked = Mutex::new(HashSet::new());
    let failed = AtomicUsize::new(0);
    let slowest = Mutex::new(Duration::ZERO);
    let max_queued = AtomicUsize::new(0);
    let a_acked_while_stalled = AtomicUsize::new(0);
    let stalled = AtomicBool::new(false);
    let ended_at: Mutex<Option<Instant>> = Mutex::new(None);
    let first_a_after: Mutex<Option<Instant>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (p, topic, acked, failed, slowest) = (&p, &topic, &acked, &failed, &slowest);
            let (stalled, stop, a_while) = (&stalled, &stop, &a_acked_while_stalled);
            let (ended_at, first_a_after) = (&ended_at, &first_a_after);
            s.spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    let r = p.send(&Message::new(topic.as_str(), format!("t{t} m{i}")));
                    let took = started.elapsed();
                    {
                        let mut s = slowest.lock();
                        *s = (*s).max(took);
                    }
                    match r {
                        Ok(r) => {
                            if r.message_queue().broker_name() == BROKER_A {
                                if stalled.load(Ordering::SeqCst) {
                                    a_while.fetch_add(1, Ordering::SeqCst);
                                } else if ended_at.lock().is_some_and(|e| started > e) {
                                    first_a_after.lock().get_or_insert_with(Instant::now);
                                }
                            }
                            acked.lock().insert(r.msg_id().to_string());
                        }
                        Err(_) => {
                            failed.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    i += 1;
                }
            });
        }
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(1));
            proxy(BROKER_A).stall(Direction::ToUpstream);
            stalled.store(true, Ordering::SeqCst);
            let until = Instant::now() + stall;
            while Instant::now() < until {
                max_queued.fetch_max(remoting.queued_write_bytes(), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
            stalled.store(false, Ordering::SeqCst);
            proxy(BROKER_A).forward();
            *ended_at.lock() = Some(Instant::now());
            eventually(Duration::from_secs(20), || first_a_after.lock().is_some());
            std::thread::sleep(Duration::from_secs(1));
            stop.store(true, Ordering::SeqCst);
        });
    });
    p.shutdown();
    let acked = acked.into_inner();
    let seen = read_back(&topic, &acked, Duration::from_secs(60));
    let t = tally(&acked, &seen);
    let slowest = *slowest.lock();
    let recovery = first_a_after
        .lock()
        .zip(*ended_at.lock())
        .map(|(a, e)| a.saturating_duration_since(e));
    let max_queued = max_queued.load(Ordering::SeqCst);
    let failed = failed.load(Ordering::SeqCst);
    table(
        "broker-a stops reading (proxy stalls client -> broker) under 4-thread sync sends",
        &[
            ("stall", format!("{:.0} s", stall.as_secs_f64())),
            ("send timeout", format!("{} ms", send_timeout.as_millis())),
            ("acked", acked.len().to_string()),
            ("failed sends", failed.to_string()),
            (
                "acked by broker-a while stalled",
                a_acked_while_stalled.load(Ordering::SeqCst).to_string(),
            ),
            (
                "slowest send",
                format!("{:.0} ms", slowest.as_secs_f64() * 1e3),
            ),
            ("most bytes queued for writing", max_queued.to_string()),
            (
                "first broker-a ack after the stall",
                recovery.map_or("never".into(), |d| format!("{:.2} s", d.as_secs_f64())),
            ),
            ("acked but lost", t.lost.to_string()),
            ("duplicates read back", t.duplicates.to_string()),
            (
                "stored though the send failed",
                t.stored_unacked.to_string(),
            ),
        ],
    );
    assert_eq!(t.lost, 0, "acknowledged sends lost");
    // A send never outlives its budget by more than scheduling noise on a busy machine.
    assert!(
        slowest < send_timeout + Duration::from_secs(2),
        "{slowest:?}"
    );
    assert!(
        failed > 0,
        "the stall made no send fail: was broker-a stalled at all?"
    );
    // One small frame per sender at most waits for the stalled socket.
    assert!(max_queued < 64 * 1024, "{max_queued} bytes queued");
    let recovery = recovery.expect("broker-a acknowledged sends again after the stall");
    assert!(recovery < Duration::from_secs(10), "{recovery:?}");
}

#[test]
fn a_broker_that_stops_reading_under_async_sends_keeps_the_write_queue_bounded() {
    let _serial = serial();
    let _forward = ForwardOnDrop;
    let topic = topic_on_both("stall_async", 4);
    let body_len = 16 * 1024;
    let rate = 200u64; // sends per second
    let send_timeout = Duration::from_secs(3);
    let before = Duration::from_secs(2);
    let stall = Duration::from_secs(5 * scale() as u64);
    let after = Duration::from_secs(5);
    let total = (rate * (before + stall + after).as_secs()) as usize;
    let p = Producer::builder(unique("pg_stall_async"))
        .client_options(ClientOptions::new().namesrv_addr(crate::namesrv()))
        .send_timeout(send_timeout)
        .start()
        .unwrap();
    let remoting = p.client_instance().unwrap().remoting().clone();
    let runs: Arc<Vec<AtomicU8>> = Arc::new((0..total).map(|_| AtomicU8::new(0)).collect());
    let acked: Arc<Mutex<HashSet<String>>> = Arc::default();
    let callback_errors = Arc::new(AtomicUsize::new(0));
    let not_queued = AtomicUsize::new(0);
    let max_queued = AtomicUsize::new(0);
    let rss_before = rss_kib();
    let max_rss = AtomicU64::new(rss_before);
    let done = AtomicBool::new(false);
    let began = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            let body = vec![b'x'; body_len];
            for i in 0..total {
                let at = began + Duration::from_micros(i as u64 * 1_000_000 / rate);
                if let Some(wait) = at.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let (r2, acked, errors) = (runs.clone(), acked.clone(), callback_errors.clone());
                let msg = Message::new(topic.as_str(), body.clone());
                let queued = p.send_async(msg, move |r| {
                    r2[i].fetch_add(1, Ordering::SeqCst);
                    match r {
                        Ok(r) => {
                            acked.lock().insert(r.msg_id().to_string());
                        }
                        Err(_) => {
                            errors.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
                if queued.is_err() {
                    not_queued.fetch_add(1, Ordering::SeqCst);
                    // Its callback never runs: mark it so the count below holds.
                    runs[i].fetch_add(1, Ordering::SeqCst);
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        s.spawn(|| {
            let sample = || {
                max_queued.fetch_max(remoting.queued_write_bytes(), Ordering::SeqCst);
                max_rss.fetch_max(rss_kib(), Ordering::SeqCst);
            };
            let until = |t: Instant| {
                while Instant::now() < t {
                    sample();
                    std::thread::sleep(Duration::from_millis(20));
                }
            };
            until(began + before);
            proxy(BROKER_A).stall(Direction::ToUpstream);
            until(began + before + stall);
            proxy(BROKER_A).forward();
            while !done.load(Ordering::SeqCst) {
                sample();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
    });
    // Every callback comes by the send timeout (plus noise) after the last send.
    let all_ran = eventually(send_timeout + Duration::from_secs(10), || {
        runs.iter().all(|r| r.load(Ordering::SeqCst) >= 1)
    });
    std::thread::sleep(Duration::from_millis(500));
    p.shutdown();
    let never = runs
        .iter()
        .filter(|r| r.load(Ordering::SeqCst) == 0)
        .count();
    let twice = runs.iter().filter(|r| r.load(Ordering::SeqCst) > 1).count();
    let acked = acked.lock().clone();
    let seen = read_back(
        &topic,
        &acked,
        Duration::from_secs(60 + 10 * scale() as u64),
    );
    let t = tally(&acked, &seen);
    let max_queued = max_queued.load(Ordering::SeqCst);
    let rss_growth_kib = max_rss.load(Ordering::SeqCst).saturating_sub(rss_before);
    // What the senders could put in a send timeout's worth of sends, with room to spare:
    // frames wholly unwritten at their deadline leave the queue, so it cannot grow with
    // the length of the stall.
    let bound = (rate as usize) * body_len * (send_timeout.as_secs() as usize + 2);
    table(
        "broker-a stops reading under async sends of 16 KiB at a fixed rate",
        &[
            ("stall", format!("{:.0} s", stall.as_secs_f64())),
            (
                "rate",
                format!("{rate}/s, send timeout {} s", send_timeout.as_secs()),
            ),
            ("sends", total.to_string()),
            ("acked", acked.len().to_string()),
            (
                "callbacks with an error",
                callback_errors.load(Ordering::SeqCst).to_string(),
            ),
            (
                "refused at once (not queued)",
                not_queued.load(Ordering::SeqCst).to_string(),
            ),
            (
                "callbacks never run / run twice",
                format!("{never} / {twice}"),
            ),
            ("peak bytes queued for writing", max_queued.to_string()),
            ("peak RSS growth", format!("{} KiB", rss_growth_kib)),
            ("acked but lost", t.lost.to_string()),
            ("duplicates read back", t.duplicates.to_string()),
            (
                "stored though the callback had an error",
                t.stored_unacked.to_string(),
            ),
        ],
    );
    assert!(all_ran, "{never} callbacks never ran");
    assert_eq!((never, twice), (0, 0), "every callback exactly once");
    assert_eq!(t.lost, 0, "acknowledged sends lost");
    assert!(
        max_queued < bound,
        "{max_queued} bytes queued (bound {bound})"
    );
    assert!(
        rss_growth_kib < (2 * bound / 1024 + 128 * 1024) as u64,
        "RSS grew by {rss_growth_kib} KiB"
    );
}

#[test]
fn push_consumer_shutdown_with_a_broker_that_stops_reading_ends_within_its_shutdown_timeout() {
    use rocketmq_blocking::{ConsumeFromWhere, ConsumeStatus, PushConsumer};
    let _serial = serial();
    let _forward = ForwardOnDrop;
    // 16 queues on each broker: the consumer holds 16 of broker-a's queues, each with an
    // offset to commit at shutdown.
    let topic = topic_on_both("stall_shutdown", 16);
    let p = Producer::builder(unique("pg_stall_shutdown"))
        .client_options(ClientOptions::new().namesrv_addr(crate::namesrv()))
        .start()
        .unwrap();
    let total = 128;
    for i in 0..total {
        p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
    }
    let consumed = Arc::new(AtomicUsize::new(0));
    let seen = consumed.clone();
    let shutdown_timeout = Duration::from_secs(3);
    let c = PushConsumer::builder(unique("cg_stall_shutdown"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(crate::namesrv())
                .shutdown_timeout(shutdown_timeout),
        )
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .subscribe(&topic, "*")
        .listener(move |msgs, _| {
            seen.fetch_add(msgs.len(), Ordering::SeqCst);
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(60), || consumed.load(Ordering::SeqCst)
            >= total),
        "only {} of {total} consumed",
        consumed.load(Ordering::SeqCst)
    );
    let held_on_a = c
        .assigned_queues()
        .iter()
        .filter(|mq| mq.broker_name() == BROKER_A)
        .count();
    proxy(BROKER_A).stall(Direction::ToUpstream);
    let began = Instant::now();
    c.shutdown();
    let took = began.elapsed();
    proxy(BROKER_A).forward();
    table(
        "push consumer shutdown while broker-a stops reading",
        &[
            ("queues held on broker-a", held_on_a.to_string()),
            ("shutdown_timeout", format!("{shutdown_timeout:?}")),
            ("shutdown took", format!("{:.2} s", took.as_secs_f64())),
        ],
    );
    assert!(held_on_a >= 16, "{held_on_a} queues held on broker-a");
    // One deadline covers the commits, the unlocks, the unregistration and the threads;
    // the margin is for the work that waits on nothing.
    assert!(
        took <= shutdown_timeout + Duration::from_secs(2),
        "shutdown took {took:?} with a shutdown_timeout of {shutdown_timeout:?}"
    );
}
