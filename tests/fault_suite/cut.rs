//! Connections cut: both brokers' proxies close every client connection again and again
//! while clients send or consume.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::{ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer};

use crate::{
    eventually, proxy, read_back, scale, serial, table, tally, topic_on_both, unique,
    ForwardOnDrop, BROKER_A, BROKER_B,
};
use rocketmq_blocking::ClientOptions;

/// Cuts every connection through both proxies every `period` until `stop` is set;
/// returns how many cut rounds and connections.
fn cut_until(stop: &AtomicBool, period: Duration) -> (usize, usize) {
    let (mut rounds, mut conns) = (0, 0);
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(period);
        conns += proxy(BROKER_A).cut_all() + proxy(BROKER_B).cut_all();
        rounds += 1;
    }
    (rounds, conns)
}

#[test]
fn connections_cut_every_200_ms_under_sync_sends_lose_nothing_acknowledged() {
    let _serial = serial();
    let _forward = ForwardOnDrop;
    let topic = topic_on_both("cut_sync", 4);
    let duration = Duration::from_secs(6 * scale() as u64);
    let p = Producer::builder(unique("pg_cut_sync"))
        .client_options(ClientOptions::new().namesrv_addr(crate::namesrv()))
        .start()
        .unwrap();
    let acked = Mutex::new(HashSet::new());
    let failed = AtomicUsize::new(0);
    let sends = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let accepted_before = proxy(BROKER_A).stats().accepted + proxy(BROKER_B).stats().accepted;
    let began = Instant::now();
    let cuts = std::thread::scope(|s| {
        for t in 0..4 {
            let (p, topic, acked, failed, sends, stop) =
                (&p, &topic, &acked, &failed, &sends, &stop);
            s.spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    sends.fetch_add(1, Ordering::SeqCst);
                    match p.send(&Message::new(topic.as_str(), format!("t{t} m{i}"))) {
                        Ok(r) => {
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
        let cutter = s.spawn(|| cut_until(&stop, Duration::from_millis(200)));
        std::thread::sleep(duration);
        stop.store(true, Ordering::SeqCst);
        cutter.join().unwrap()
    });
    let elapsed = began.elapsed();
    p.shutdown();
    let accepted =
        proxy(BROKER_A).stats().accepted + proxy(BROKER_B).stats().accepted - accepted_before;
    let acked = acked.into_inner();
    let seen = read_back(
        &topic,
        &acked,
        Duration::from_secs(60 + 10 * scale() as u64),
    );
    let t = tally(&acked, &seen);
    let sends = sends.load(Ordering::SeqCst);
    let failed = failed.load(Ordering::SeqCst);
    table(
        "connections to both brokers cut every 200 ms under 4-thread sync sends",
        &[
            ("duration", format!("{:.1} s", elapsed.as_secs_f64())),
            (
                "cut rounds / connections cut",
                format!("{} / {}", cuts.0, cuts.1),
            ),
            ("connections accepted by the proxies", accepted.to_string()),
            ("sends", sends.to_string()),
            ("acked", acked.len().to_string()),
            ("failed sends", failed.to_string()),
            ("acked but lost", t.lost.to_string()),
            ("duplicates read back", t.duplicates.to_string()),
            (
                "stored though the send failed",
                t.stored_unacked.to_string(),
            ),
        ],
    );
    assert_eq!(t.lost, 0, "acknowledged sends lost");
    assert_eq!(
        acked.len() + failed,
        sends,
        "every send either acked or failed"
    );
    assert!(cuts.1 > cuts.0 / 2, "the cuts met no connection: {cuts:?}");
    // Retries go out on fresh connections: most sends get through.
    assert!(failed * 4 < sends, "{failed} of {sends} sends failed");
}

#[test]
fn connections_cut_repeatedly_under_push_consumption_lose_nothing() {
    let _serial = serial();
    let _forward = ForwardOnDrop;
    let topic = topic_on_both("cut_push", 4);
    // Longer than the pull's retry delay after an error (1 s), so that a retried pull
    // can find the connection its heartbeat registered.
    const CUT_PERIOD: Duration = Duration::from_secs(2);
    let duration = Duration::from_secs(10 * scale() as u64);
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let s = seen.clone();
    let c = PushConsumer::builder(unique("cg_cut_push"))
        .client_options(ClientOptions::new().namesrv_addr(crate::namesrv()))
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .persist_offset_interval(Duration::from_millis(500))
        .listener(move |msgs, _| {
            let mut s = s.lock();
            for m in msgs {
                *s.entry(m.msg_id().to_string()).or_default() += 1;
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    let p = Producer::builder(unique("pg_cut_push"))
        .client_options(ClientOptions::new().namesrv_addr(crate::namesrv()))
        .start()
        .unwrap();
    // Messages flow all the time (about 200 a second), so pulls go on through the cuts.
    let acked = Mutex::new(HashSet::new());
    let failed = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let began = Instant::now();
    // The longest time in which nothing new was consumed while acknowledged messages
    // were waiting for it.
    let mut longest_pause = Duration::ZERO;
    let mut all = false;
    let cuts = std::thread::scope(|sc| {
        let cutter = sc.spawn(|| cut_until(&stop, CUT_PERIOD));
        let sender = sc.spawn(|| {
            let mut i = 0;
            while began.elapsed() < duration {
                match p.send(&Message::new(topic.as_str(), format!("m{i}"))) {
                    Ok(r) => {
                        acked.lock().insert(r.msg_id().to_string());
                    }
                    Err(_) => {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let mut last_change = Instant::now();
        let mut last_count = 0;
        all = eventually(duration + Duration::from_secs(90), || {
            let s = seen.lock();
            let waiting = acked.lock().iter().any(|id| !s.contains_key(id));
            if s.len() != last_count || !waiting {
                (last_count, last_change) = (s.len(), Instant::now());
            }
            longest_pause = longest_pause.max(last_change.elapsed());
            sender.is_finished() && !waiting
        });
        stop.store(true, Ordering::SeqCst);
        cutter.join().unwrap()
    });
    let elapsed = began.elapsed();
    p.shutdown();
    // A moment without cuts for redeliveries that were on their way.
    std::thread::sleep(Duration::from_secs(2));
    c.shutdown();
    let seen = seen.lock().clone();
    let acked = acked.into_inner();
    let t = tally(&acked, &seen);
    table(
        "connections to both brokers cut every 2 s under push consumption of a steady stream",
        &[
            ("sending for", format!("{:.0} s", duration.as_secs_f64())),
            (
                "acked / failed sends",
                format!("{} / {}", acked.len(), failed.load(Ordering::SeqCst)),
            ),
            (
                "all consumed after",
                format!("{:.1} s", elapsed.as_secs_f64()),
            ),
            (
                "longest pause in consumption",
                format!("{:.1} s", longest_pause.as_secs_f64()),
            ),
            (
                "cut rounds / connections cut",
                format!("{} / {}", cuts.0, cuts.1),
            ),
            ("acked but not consumed", t.lost.to_string()),
            (
                "duplicates",
                format!(
                    "{} ({:.2} %)",
                    t.duplicates,
                    100.0 * t.duplicates as f64 / acked.len().max(1) as f64
                ),
            ),
            (
                "consumed though the send failed",
                t.stored_unacked.to_string(),
            ),
        ],
    );
    assert!(
        all,
        "not every acknowledged message was consumed: {} missing",
        t.lost
    );
    assert_eq!(t.lost, 0);
    assert!(cuts.1 > 0, "no connection was cut");
    // A broker forgets the consumer with the connection it lost; the new connection's
    // heartbeat registers it again at once. (Before, pulls were refused with
    // SUBSCRIPTION_NOT_EXIST until the next periodic heartbeat, up to 30 s.)
    assert!(
        longest_pause < Duration::from_secs(10),
        "consumption stood still for {longest_pause:?}"
    );
}
