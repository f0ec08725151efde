use std::collections::{HashMap, HashSet};

use super::*;
use crate::testkit::fault_peer::{Fault, FaultPeer};

/// A name server that routes every topic to `broker` as `fake-broker` (4 queues).
fn namesrv_routing_to(broker: &str) -> FaultPeer {
    let route = format!(
        r#"{{"brokerDatas":[{{"brokerAddrs":{{"0":"{broker}"}},"brokerName":"fake-broker","cluster":"FakeCluster"}}],"filterServerTable":{{}},"queueDatas":[{{"brokerName":"fake-broker","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}}]}}"#
    );
    FaultPeer::start(Fault::Answer(route.into_bytes())).unwrap()
}

#[test]
fn failed_start_offset_lookups_are_retried_about_once_a_second_per_queue() {
    use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};
    use crate::testkit::fault_peer::Responder;
    use std::sync::atomic::AtomicUsize;

    // A broker that refuses every offset query (as one refuses a group without rights).
    let queries = Arc::new(AtomicUsize::new(0));
    let counted = queries.clone();
    let broker = FaultPeer::start(Fault::Respond(Responder::new(move |req| {
        if req.code == RequestCode::QUERY_CONSUMER_OFFSET.0 {
            counted.fetch_add(1, Ordering::SeqCst);
            return RemotingCommand::response(ResponseCode::SYSTEM_ERROR, 0, None);
        }
        RemotingCommand::response(ResponseCode::SUCCESS, 0, None)
    })))
    .unwrap();
    let namesrv = namesrv_routing_to(broker.addr());
    let c = LitePullConsumer::builder("lp_refused_lookup")
        .client_options(
            crate::ClientOptions::new()
                .namesrv_addr(namesrv.addr())
                .instance_name("lp-refused-lookup"),
        )
        .start()
        .unwrap();
    let mqs: Vec<MessageQueue> = (0..4)
        .map(|q| MessageQueue::new("lp_refused", "fake-broker", q))
        .collect();
    c.assign(&mqs).unwrap();
    // Assigning the same queues again must not start a second chain of tries.
    c.assign(&mqs).unwrap();
    let from = queries.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(4));
    let tries = queries.load(Ordering::SeqCst) - from;
    c.shutdown();
    // Four queues, a try each per `pull_time_delay_when_exception` (1 s): about 16.
    assert!(
        tries >= 4,
        "the failed lookups were not tried again ({tries})"
    );
    assert!(tries <= 24, "{tries} lookups in 4 s for 4 queues");
    eprintln!("{tries} refused start-offset lookups in 4 s for 4 queues");
}

#[test]
fn start_offset_lookups_on_a_hung_broker_leave_the_pull_timer_free() {
    let broker = FaultPeer::start(Fault::Silent).unwrap();
    let namesrv = namesrv_routing_to(broker.addr());
    let c = LitePullConsumer::builder("lp_hung_lookup")
        .client_options(
            crate::ClientOptions::new()
                .namesrv_addr(namesrv.addr())
                .instance_name("lp-hung-lookup")
                .api_timeout(Duration::from_millis(500))
                .shutdown_timeout(Duration::from_secs(2)),
        )
        .start()
        .unwrap();
    let mqs: Vec<MessageQueue> = (0..4)
        .map(|q| MessageQueue::new("lp_hung", "fake-broker", q))
        .collect();
    c.assign(&mqs).unwrap();
    // The four start-offset lookups (5 s each against the silent broker) are under way
    // now; the timer that runs every consumer's delayed pulls must not wait for them.
    std::thread::sleep(Duration::from_millis(300));
    let (tx, rx) = crossbeam_channel::bounded(1);
    let asked = Instant::now();
    c.inner
        .instance
        .schedule_later("probe", Duration::ZERO, move || {
            let _ = tx.send(asked.elapsed());
        });
    let waited = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    c.shutdown();
    assert!(
        waited < Duration::from_secs(2),
        "a delayed job waited {waited:?} behind the start-offset lookups"
    );
}

/// What a fake broker was told by UPDATE_CONSUMER_OFFSET: every offset written, per
/// queue id.
type Written = Arc<parking_lot::Mutex<HashMap<i32, HashSet<i64>>>>;

/// A lite pull consumer without auto-commit, assigned the 4 queues of a topic on a broker
/// that records the offsets written to it and knows none.
fn consumer_on_recording_broker(
    group: &str,
) -> (
    FaultPeer,
    FaultPeer,
    LitePullConsumer,
    Written,
    Vec<MessageQueue>,
) {
    use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};
    use crate::testkit::fault_peer::Responder;

    let written: Written = Arc::default();
    let seen = written.clone();
    let broker = FaultPeer::start(Fault::Respond(Responder::new(move |req| {
        if req.code == RequestCode::UPDATE_CONSUMER_OFFSET.0 {
            let field = |k: &str| req.ext_fields.get(k).and_then(|v| v.parse::<i64>().ok());
            if let (Some(q), Some(o)) = (field("queueId"), field("commitOffset")) {
                seen.lock().entry(q as i32).or_default().insert(o);
            }
            return RemotingCommand::response(ResponseCode::SUCCESS, 0, None);
        }
        if req.code == RequestCode::QUERY_CONSUMER_OFFSET.0 {
            return RemotingCommand::response(ResponseCode::QUERY_NOT_FOUND, 0, None);
        }
        RemotingCommand::response(ResponseCode::SUCCESS, 0, None)
    })))
    .unwrap();
    let namesrv = namesrv_routing_to(broker.addr());
    let c = LitePullConsumer::builder(group)
        .client_options(
            crate::ClientOptions::new()
                .namesrv_addr(namesrv.addr())
                .instance_name(group.replace('_', "-")),
        )
        .options(LitePullOptions {
            auto_commit: false,
            ..Default::default()
        })
        .start()
        .unwrap();
    let mqs: Vec<MessageQueue> = (0..4)
        .map(|q| MessageQueue::new(format!("{group}_topic"), "fake-broker", q))
        .collect();
    c.assign(&mqs).unwrap();
    (broker, namesrv, c, written, mqs)
}

/// A commit written through (`commit(.., true)`) reaches the broker with every offset it
/// was given, even while a persist of an older assignment (job 4 reads the held queues
/// before it takes the store's lock) runs. Before the fix that persist forgot the offsets
/// of queues it did not know, and when the forget landed between the commit's update of
/// the table and its write, the write left that queue out while the commit returned Ok.
#[test]
fn a_commit_written_through_is_not_undone_by_a_persist_of_an_older_assignment() {
    use std::sync::atomic::AtomicBool;

    let (_broker, _namesrv, c, written, mqs) = consumer_on_recording_broker("lp_commit_race");
    // Job 4 as it runs when queue 2 was assigned after it read the held queues.
    let stale: HashSet<MessageQueue> = mqs.iter().filter(|mq| mq.queue_id != 2).cloned().collect();
    let stop = AtomicBool::new(false);
    let rounds = 100;
    let missing = std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                c.inner.store.persist_all(&stale);
                std::thread::yield_now();
            }
        });
        let mut missing = Vec::new();
        for round in 1..=rounds {
            let offsets: HashMap<MessageQueue, i64> =
                mqs.iter().map(|mq| (mq.clone(), round)).collect();
            c.commit(&offsets, true).unwrap();
            if !written.lock().get(&2).is_some_and(|s| s.contains(&round)) {
                missing.push(round);
            }
        }
        stop.store(true, Ordering::Relaxed);
        missing
    });
    c.shutdown();
    assert!(
        missing.is_empty(),
        "{} of {rounds} commits returned Ok without writing queue 2's offset: rounds {missing:?}",
        missing.len()
    );
}

/// The same older persist does not make the store forget an offset it holds for a
/// queue taken meanwhile: the next write of every held queue (a push consumer's
/// shutdown writes what the table holds) still carries it.
#[test]
fn a_persist_of_an_older_assignment_forgets_no_offset() {
    let (_broker, _namesrv, c, written, mqs) = consumer_on_recording_broker("lp_stale_persist");
    let stale: HashSet<MessageQueue> = mqs.iter().filter(|mq| mq.queue_id != 2).cloned().collect();
    let store = &c.inner.store;
    store.update_offset(&mqs[2], 7, false);
    store.persist_all(&stale);
    let all: HashSet<MessageQueue> = mqs.iter().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    store.persist_until(&all, deadline).unwrap();
    c.shutdown();
    assert!(
        written.lock().get(&2).is_some_and(|s| s.contains(&7)),
        "queue 2's offset 7 was never written: {:?}",
        written.lock()
    );
}
