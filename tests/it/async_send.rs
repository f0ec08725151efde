//! `Producer::send_async`'s contract: `Ok` means the callback runs exactly once (answer,
//! timeout, connection error or shutdown); `Err` means it never runs and the message comes
//! back. Against the real broker, and against fault peers for what it never does.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, Sender};
use rocketmq_blocking::testkit::fault_peer::{Fault, FaultPeer};
use rocketmq_blocking::{Admin, ErrorKind, Message, MessageQueue, Producer, SendResult};

use crate::cluster;
use rocketmq_blocking::ClientOptions;

type Outcome = (usize, Result<SendResult, ErrorKind>);

/// How often each send's callback ran, by send index, and what it got.
struct Tracker {
    runs: Vec<AtomicU8>,
    tx: Sender<Outcome>,
}

impl Tracker {
    fn new(n: usize) -> (Arc<Tracker>, Receiver<Outcome>) {
        let (tx, rx) = unbounded();
        let runs = (0..n).map(|_| AtomicU8::new(0)).collect();
        (Arc::new(Tracker { runs, tx }), rx)
    }

    fn callback(
        self: &Arc<Self>,
        i: usize,
    ) -> impl FnOnce(rocketmq_blocking::Result<SendResult>) + Send + 'static {
        let me = self.clone();
        move |r| {
            me.runs[i].fetch_add(1, Ordering::SeqCst);
            let _ = me.tx.send((i, r.map_err(|e| e.kind())));
        }
    }

    fn runs(&self, i: usize) -> u8 {
        self.runs[i].load(Ordering::SeqCst)
    }
}

/// A name server that routes every topic to `broker` (4 queues on one broker).
fn namesrv_routing_to(broker: &str) -> FaultPeer {
    let route = format!(
        r#"{{"brokerDatas":[{{"brokerAddrs":{{"0":"{broker}"}},"brokerName":"fake-broker","cluster":"FakeCluster"}}],"filterServerTable":{{}},"queueDatas":[{{"brokerName":"fake-broker","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}}]}}"#
    );
    FaultPeer::start(Fault::Answer(route.into_bytes())).unwrap()
}

fn producer_via(namesrv: &str, send_timeout: Duration) -> Producer {
    Producer::builder(cluster::unique("apg"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(namesrv)
                .api_timeout(Duration::from_millis(500)),
        )
        .send_timeout(send_timeout)
        .start()
        .unwrap()
}

/// Sends `n` messages; every send must be accepted.
fn send_all(p: &Producer, topic: &str, tracker: &Arc<Tracker>, n: usize) {
    for i in 0..n {
        if let Err(e) = p.send_async(Message::new(topic, format!("m{i}")), tracker.callback(i)) {
            panic!("send {i} not queued: {e}");
        }
    }
}

#[test]
fn async_sends_to_the_real_broker_call_back_once_each_with_the_result() {
    let topic = cluster::topic("acb_ok", 4);
    let p = Producer::builder(cluster::unique("apg"))
        .client_options(cluster::options())
        .start()
        .unwrap();
    let n = 200;
    let (tracker, rx) = Tracker::new(n);
    send_all(&p, &topic, &tracker, n);
    let mut results = Vec::new();
    for _ in 0..n {
        let (i, r) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        let r = r.unwrap_or_else(|k| panic!("send {i}: {k:?}"));
        assert_eq!(r.message_queue().topic(), topic);
        results.push(r);
    }
    // Each result reports the id its message was stored with (`UNIQ_KEY`), all distinct.
    let ids: HashSet<&str> = results.iter().map(SendResult::msg_id).collect();
    assert_eq!(ids.len(), n);
    let admin = Admin::builder()
        .client_options(cluster::options())
        .start()
        .unwrap();
    for r in results.iter().step_by(50) {
        let stored = admin.view_message(r.offset_msg_id()).unwrap();
        assert_eq!(stored.msg_id(), r.msg_id());
        assert_eq!(r.msg_id().len(), 32, "{}", r.msg_id());
    }
    // Shutdown joins the callback pool: a second call would have happened by now.
    p.shutdown();
    assert!((0..n).all(|i| tracker.runs(i) == 1));
    assert!(rx.try_recv().is_err());
}

/// The I/O thread remembers the connection of the last address a send named; a send
/// after that connection closed must open a new one, not write to the closed one.
#[test]
fn async_sends_after_their_broker_connection_closed_reconnect_and_succeed() {
    let topic = cluster::topic("acb_reconnect", 4);
    let p = Producer::builder(cluster::unique("apg"))
        .client_options(cluster::options())
        .start()
        .unwrap();
    let instance = p.client_instance().unwrap();
    let rounds = 3;
    let per_round = 20;
    let (tracker, rx) = Tracker::new(rounds * per_round);
    for round in 0..rounds {
        for i in round * per_round..(round + 1) * per_round {
            p.send_async(Message::new(&topic, format!("m{i}")), tracker.callback(i))
                .unwrap_or_else(|e| panic!("send {i} not queued: {e}"));
        }
        for _ in 0..per_round {
            let (i, r) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
            r.unwrap_or_else(|k| panic!("round {round}, send {i}: {k:?}"));
        }
        // Every broker connection closes; the next round's sends name the same addresses.
        for (_, addrs) in instance.broker_addresses() {
            for addr in addrs.values() {
                instance.remoting().close_connection(addr, "test");
            }
        }
    }
    p.shutdown();
    assert!((0..rounds * per_round).all(|i| tracker.runs(i) == 1));
}

#[test]
fn a_refused_connection_calls_back_once_with_a_connect_error() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let namesrv = namesrv_routing_to(&dead);
    let p = producer_via(namesrv.addr(), Duration::from_secs(3));
    let n = 20;
    let (tracker, rx) = Tracker::new(n);
    send_all(&p, "acb_refused", &tracker, n);
    for _ in 0..n {
        let (i, r) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(r.err(), Some(ErrorKind::Connect), "send {i}");
    }
    p.shutdown();
    assert!((0..n).all(|i| tracker.runs(i) == 1));
}

#[test]
fn a_broker_that_never_answers_times_out_and_calls_back_once() {
    let broker = FaultPeer::start(Fault::Silent).unwrap();
    let namesrv = namesrv_routing_to(broker.addr());
    let p = producer_via(namesrv.addr(), Duration::from_millis(400));
    let n = 20;
    let (tracker, rx) = Tracker::new(n);
    send_all(&p, "acb_timeout", &tracker, n);
    for _ in 0..n {
        let (i, r) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(r.err(), Some(ErrorKind::Timeout), "send {i}");
    }
    p.shutdown();
    assert!((0..n).all(|i| tracker.runs(i) == 1));
}

#[test]
fn shutdown_calls_back_every_send_still_pending_once() {
    let broker = FaultPeer::start(Fault::Silent).unwrap();
    let namesrv = namesrv_routing_to(broker.addr());
    let p = producer_via(namesrv.addr(), Duration::from_secs(60));
    let n = 100;
    let (tracker, rx) = Tracker::new(n);
    send_all(&p, "acb_pending", &tracker, n);
    p.shutdown();
    for i in 0..n {
        assert_eq!(tracker.runs(i), 1, "send {i}");
    }
    let outcomes: Vec<Outcome> = rx.try_iter().collect();
    assert_eq!(outcomes.len(), n);
    for (i, r) in outcomes {
        assert_eq!(r.err(), Some(ErrorKind::State), "send {i}");
    }
}

#[test]
fn shutdown_racing_async_sends_calls_back_each_accepted_send_once_and_returns_the_rest() {
    let topic = cluster::topic("acb_race", 4);
    let p = Arc::new(
        Producer::builder(cluster::unique("apg"))
            .client_options(cluster::options())
            .start()
            .unwrap(),
    );
    // Warm the route so that sends are queued at full speed.
    p.send(&Message::new(&topic, "warm")).unwrap();
    let cap = 200_000;
    let (tracker, rx) = Tracker::new(cap);
    let accepted = Arc::new(AtomicUsize::new(0));
    let sender = {
        let (p, tracker, accepted, topic) =
            (p.clone(), tracker.clone(), accepted.clone(), topic.clone());
        std::thread::spawn(move || {
            let mut oks = Vec::new();
            for i in 0..cap {
                let msg = Message::new(&topic, format!("r{i}")).with_tags("T");
                match p.send_async(msg.clone(), tracker.callback(i)) {
                    Ok(()) => {
                        oks.push(i);
                        accepted.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => {
                        assert_eq!(e.error().kind(), ErrorKind::State, "{e}");
                        assert_eq!(e.into_message(), msg, "the message comes back unchanged");
                        return (oks, true);
                    }
                }
            }
            (oks, false)
        })
    };
    while accepted.load(Ordering::SeqCst) < 300 {
        std::thread::yield_now();
    }
    p.shutdown();
    let (oks, refused) = sender.join().unwrap();
    assert!(refused, "the sender ran into the shutdown");
    // Every accepted send has been called back once: shutdown joined the callback pool.
    assert_eq!(rx.try_iter().count(), oks.len());
    for &i in &oks {
        assert_eq!(tracker.runs(i), 1, "send {i}");
    }
    let last = oks.last().map_or(0, |i| i + 1);
    assert_eq!(
        tracker.runs(last),
        0,
        "the refused send's callback never ran"
    );
}

#[test]
fn a_message_that_is_not_sent_comes_back_unchanged_and_its_callback_never_runs() {
    let topic = cluster::topic("acb_invalid", 1);
    let p = Producer::builder(cluster::unique("apg"))
        .client_options(cluster::options())
        .max_message_size(1024)
        .start()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let cb = || {
        let ran = ran.clone();
        move |_: rocketmq_blocking::Result<SendResult>| {
            ran.fetch_add(1, Ordering::SeqCst);
        }
    };
    let mut big = Message::new(&topic, b"secret body ".repeat(100))
        .with_tags("TagA")
        .with_keys(["k1"]);
    big.put_user_property("user-a", "1").unwrap();
    let e = p.send_async(big.clone(), cb()).unwrap_err();
    assert_eq!(e.error().kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(e.message(), &big);
    let debug = format!("{e:?}");
    assert!(debug.contains("body_len: 1200"), "{debug}");
    assert!(
        !debug.contains("secret"),
        "the body is not printed: {debug}"
    );
    assert!(e.to_string().contains(&topic), "{e}");
    let back = e.into_message();
    assert_eq!((back.topic(), back.body()), (topic.as_str(), big.body()));
    assert_eq!(back, big);

    let bad_topic = Message::new("no spaces allowed", "x");
    let e = p.send_async(bad_topic.clone(), cb()).unwrap_err();
    assert_eq!(e.error().kind(), ErrorKind::InvalidArgument, "{e}");
    let (_, back) = e.into_parts();
    assert_eq!(back, bad_topic);

    let e = p.send_async_future(big.clone()).unwrap_err();
    assert_eq!(e.into_message(), big);

    // Refused after it was prepared for the wire, when the send owns its body: a queue of
    // a broker the route does not have. The body comes back with the rest.
    let mut fits = Message::new(&topic, b"secret body ".repeat(50)).with_tags("TagA");
    fits.put_user_property("user-a", "1").unwrap();
    let nowhere = MessageQueue::new(&topic, "no_such_broker", 0);
    let e = p
        .send_async_to_queue(fits.clone(), &nowhere, cb())
        .unwrap_err();
    assert_eq!(e.error().kind(), ErrorKind::NoRoute, "{e}");
    let back = e.into_message();
    assert_eq!(back.body(), fits.body());
    assert_eq!(back, fits);

    // Shut down: a state error, the message back.
    let small = Message::new(&topic, "small");
    p.shutdown();
    let e = p.send_async(small.clone(), cb()).unwrap_err();
    assert_eq!(e.error().kind(), ErrorKind::State, "{e}");
    // `?` keeps the error.
    let as_error: rocketmq_blocking::Error = e.into();
    assert_eq!(as_error.kind(), ErrorKind::State);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn a_stuck_callback_holds_shutdown_only_for_the_shutdown_timeout() {
    let topic = cluster::topic("acb_stuck", 4);
    let p = Producer::builder(cluster::unique("apg"))
        .client_options(cluster::options().shutdown_timeout(Duration::from_millis(500)))
        .start()
        .unwrap();
    // The callback blocks until the test releases it, long after shutdown has returned.
    let (entered_tx, entered) = unbounded::<()>();
    let (release, release_rx) = unbounded::<()>();
    p.send_async(Message::new(&topic, "stuck"), move |r| {
        assert!(r.is_ok(), "{:?}", r.err());
        let _ = entered_tx.send(());
        let _ = release_rx.recv_timeout(Duration::from_secs(60));
    })
    .unwrap();
    entered.recv_timeout(Duration::from_secs(30)).unwrap();
    let started = std::time::Instant::now();
    p.shutdown();
    let took = started.elapsed();
    // Let the stuck thread end before the assertion can fail, so no thread outlives the test.
    let _ = release.send(());
    // Before: the callback pool's join waited its own 10 s whatever the client was told.
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");
}
