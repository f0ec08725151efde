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
