//! Message trace against the real broker, read back with the official admin tool
//! (`mqadmin queryMsgTraceById`): the Pub record of a traced producer and the Sub records
//! of a traced push consumer and lite pull consumer, in the default and in a custom trace topic.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_blocking::{ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer};

use crate::cluster;
use crate::consumer::wait_for;

const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

fn mqadmin(args: &[&str]) -> String {
    let c = cluster::cluster().lock();
    c.mqadmin(args, TOOL_TIMEOUT)
        .unwrap_or_else(|e| panic!("mqadmin {args:?}: {e}"))
}

/// `queryMsgTraceById` until it shows `want` (trace messages are indexed asynchronously).
fn trace_of(msg_id: &str, topic: Option<&str>, want: &[&str]) -> String {
    let mut args = vec!["queryMsgTraceById", "-i", msg_id];
    if let Some(t) = topic {
        args.extend(["-t", t]);
    }
    let mut out = String::new();
    for _ in 0..10 {
        out = mqadmin(&args);
        if want.iter().all(|w| out.contains(w)) {
            return out;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    panic!("the trace of {msg_id} never showed {want:?}:\n{out}");
}

#[test]
fn a_traced_producer_and_consumer_show_in_query_msg_trace_by_id() {
    let topic = cluster::topic("traced", 2);
    let pgroup = cluster::unique("trace_pg");
    let cgroup = cluster::unique("trace_cg");
    let p = Producer::builder(&pgroup)
        .client_options(cluster::options())
        .enable_msg_trace(true)
        .start()
        .unwrap();
    let consumed = Arc::new(AtomicUsize::new(0));
    let n = consumed.clone();
    let c = PushConsumer::builder(&cgroup)
        .client_options(cluster::options())
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .enable_msg_trace(true)
        .listener(move |msgs, _| {
            n.fetch_add(msgs.len(), Ordering::SeqCst);
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    let ids: Vec<String> = (0..3)
        .map(|i| {
            let m = Message::new(&topic, format!("t{i}")).with_keys([format!("tk{i}")]);
            p.send(&m).unwrap().msg_id().to_string()
        })
        .collect();
    wait_for("3 consumed", Duration::from_secs(60), || {
        consumed.load(Ordering::SeqCst) >= 3
    });
    // A traced lite pull consumer of another group reads them too.
    let lgroup = cluster::unique("trace_lg");
    let lite = crate::consumer::lite(&lgroup)
        .subscribe(&topic, "*")
        .enable_msg_trace(true)
        .start()
        .unwrap();
    let mut polled = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while polled < 3 && std::time::Instant::now() < deadline {
        polled += lite.poll_timeout(Duration::from_millis(500)).unwrap().len();
    }
    assert_eq!(polled, 3);
    wait_for("trace messages stored", Duration::from_secs(30), || {
        p.trace_stats().is_some_and(|s| s.sent >= 1) && c.trace_stats().is_some_and(|s| s.sent >= 1)
    });
    let (ps, cs) = (p.trace_stats().unwrap(), c.trace_stats().unwrap());
    assert_eq!((ps.dropped, ps.failed, cs.dropped, cs.failed), (0, 0, 0, 0));
    // Shutdown sends the lite pull consumer's queued records before it returns.
    lite.shutdown();
    let out = trace_of(&ids[1], None, &["Pub", &pgroup, "Sub", &cgroup, &lgroup]);
    assert!(out.contains("success"), "{out}");
    c.shutdown();
    p.shutdown();
}

#[test]
fn a_custom_trace_topic_holds_the_trace() {
    let topic = cluster::topic("traced_custom", 1);
    let trace_topic = cluster::topic("my_trace", 1);
    let pgroup = cluster::unique("trace_custom_pg");
    let p = Producer::builder(&pgroup)
        .client_options(cluster::options())
        .trace_topic(&trace_topic)
        .start()
        .unwrap();
    let id = p
        .send(&Message::new(&topic, "custom"))
        .unwrap()
        .msg_id()
        .to_string();
    // Shutdown sends what is queued before it returns.
    p.shutdown();
    trace_of(&id, Some(&trace_topic), &["Pub", &pgroup, "success"]);
    let admin = rocketmq_blocking::Admin::builder()
        .client_options(rocketmq_blocking::ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .unwrap();
    assert!(admin.total_max_offset(&trace_topic).unwrap() >= 1);
}
