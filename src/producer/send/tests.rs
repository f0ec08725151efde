use super::*;
use crate::client::validators::AUTO_CREATE_TOPIC_KEY_TOPIC;
use crate::testkit::fault_peer::{Fault, FaultPeer};

#[test]
fn topics_nobody_sends_to_leave_the_publish_and_route_tables() {
    // Every topic routes to one broker (never contacted: nothing is sent).
    let route = r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:1"},"brokerName":"b","cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
    let namesrv = FaultPeer::start(Fault::Answer(route.as_bytes().to_vec())).unwrap();
    let config = crate::client::ClientOptions::new()
        .namesrv_addr(namesrv.addr())
        .instance_name("idle-topics")
        .into_config();
    let options = ProducerOptions {
        idle_topic_timeout: Duration::from_millis(400),
        ..ProducerOptions::default()
    };
    let p = ProducerImpl::new("idle_topics".into(), config, options).unwrap();
    p.start().unwrap();
    let instance = p.instance.read().clone().unwrap();
    for topic in ["kept", "idle"] {
        p.find_publish_info(&instance, topic).unwrap();
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        // "kept" is sent to all along, "idle" never again; the refresh job runs.
        p.find_publish_info(&instance, "kept").unwrap();
        instance.update_topic_route_info_from_name_server();
        std::thread::sleep(Duration::from_millis(100));
    }
    let published = p.publish_topics();
    let (kept, idle) = (instance.topic_route("kept"), instance.topic_route("idle"));
    p.shutdown();
    assert!(published.iter().any(|t| t == "kept"), "{published:?}");
    assert!(!published.iter().any(|t| t == "idle"), "{published:?}");
    assert!(kept.is_some(), "the route of a topic in use was dropped");
    assert!(idle.is_none(), "the route of an idle topic is still kept");
    // The auto-create topic's entry is kept: sends to new topics start from it.
    assert!(published.iter().any(|t| t == AUTO_CREATE_TOPIC_KEY_TOPIC));
}

/// Reads one frame from `s`; `None` at the end of the stream or on garbage.
fn read_frame(s: &mut std::net::TcpStream) -> Option<RemotingCommand> {
    use std::io::Read;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut frame).ok()?;
    RemotingCommand::decode(&frame).ok()
}

/// The route of one writable queue on broker `name` at `addr`.
fn route_on(name: &str, addr: &str) -> Vec<u8> {
    format!(
        r#"{{"brokerDatas":[{{"brokerAddrs":{{"0":"{addr}"}},"brokerName":"{name}","cluster":"c"}}],"filterServerTable":{{}},"queueDatas":[{{"brokerName":"{name}","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}}]}}"#
    )
    .into_bytes()
}

#[test]
fn an_async_retry_that_needs_a_route_does_not_hold_up_other_producers_callbacks() {
    use crate::testkit::fault_peer::Responder;
    use std::io::Write;
    use std::sync::atomic::AtomicUsize;
    // Broker "a" answers everything but a send, and closes the connection on a send
    // once told to: the async send fails with a transport error and is re-sent.
    let broker_a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr_a = broker_a.local_addr().unwrap().to_string();
    let (got_send_tx, got_send) = crossbeam_channel::unbounded::<()>();
    let (close_tx, close_rx) = crossbeam_channel::bounded::<()>(0);
    let broker_a = std::thread::spawn(move || {
        let Ok((mut s, _)) = broker_a.accept() else {
            return;
        };
        while let Some(req) = read_frame(&mut s) {
            if req.request_code() == RequestCode::SEND_MESSAGE_V2 {
                let _ = got_send_tx.send(());
                let _ = close_rx.recv_timeout(Duration::from_secs(30));
                return; // closes the connection
            }
            let ok = RemotingCommand::response(ResponseCode::SUCCESS, req.opaque, None);
            if s.write_all(&ok.to_frame()).is_err() {
                return;
            }
        }
    });
    // Broker "b" answers every send at once.
    let broker_b = FaultPeer::start(Fault::Respond(Responder::new(|_| {
        let mut ok = RemotingCommand::response(ResponseCode::SUCCESS, 0, None);
        ok.ext_fields.insert("msgId", "0A0000010000000000000000");
        ok.ext_fields.insert("queueId", "0");
        ok.ext_fields.insert("queueOffset", "0");
        ok
    })))
    .unwrap();
    // The name server routes "TA" to broker a and "TB" to broker b; once stalled, it
    // holds every request until released (or 20 s).
    let stalled = Arc::new(AtomicBool::new(false));
    let stalled_requests = Arc::new(AtomicUsize::new(0));
    let (unstall_tx, unstall) = crossbeam_channel::bounded::<()>(0);
    // The instance's first periodic route refresh, 10 ms after start, asks for the
    // producers' default topic; the test waits for it so that it cannot store the
    // route of "TA" again after the test dropped it.
    let (refreshed_tx, refreshed) = crossbeam_channel::unbounded::<()>();
    let (s, n, a, b) = (
        stalled.clone(),
        stalled_requests.clone(),
        addr_a.clone(),
        broker_b.addr().to_string(),
    );
    let namesrv = FaultPeer::start(Fault::Respond(Responder::new(move |req| {
        if req.ext_fields.get("topic") == Some(AUTO_CREATE_TOPIC_KEY_TOPIC) {
            let _ = refreshed_tx.send(());
        }
        if s.load(Ordering::SeqCst) {
            n.fetch_add(1, Ordering::SeqCst);
            let _ = unstall.recv_timeout(Duration::from_secs(20));
        }
        let body = match req.ext_fields.get("topic") {
            Some("TA") => route_on("a", &a),
            Some("TB") => route_on("b", &b),
            _ => return RemotingCommand::response(ResponseCode::TOPIC_NOT_EXIST, 0, None),
        };
        RemotingCommand::response(ResponseCode::SUCCESS, 0, None).with_body(body)
    })))
    .unwrap();
    // Two producers on one client instance with one callback thread.
    let config = crate::client::ClientOptions::new()
        .namesrv_addr(namesrv.addr())
        .instance_name(format!("retry-route-{}", std::process::id()))
        .callback_threads(1)
        .into_config();
    let pa =
        ProducerImpl::new("retry_a".into(), config.clone(), ProducerOptions::default()).unwrap();
    let pb = ProducerImpl::new("retry_b".into(), config, ProducerOptions::default()).unwrap();
    pa.start().unwrap();
    pb.start().unwrap();
    let instance = pa.instance().unwrap();
    assert!(Arc::ptr_eq(&instance, &pb.instance().unwrap()));
    let send_b = || {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let sent = Instant::now();
        pb.send_async(
            Message::new("TB", b"b".to_vec()),
            None,
            Duration::from_secs(10),
            Box::new(move |r| {
                let _ = tx.send((sent.elapsed(), r.map(|_| ())));
            }),
        )
        .unwrap();
        rx
    };
    // Producer b's route and connection are ready.
    let (_, warm) = send_b().recv_timeout(Duration::from_secs(10)).unwrap();
    warm.unwrap();
    refreshed.recv_timeout(Duration::from_secs(10)).unwrap();
    // Producer a's send is on the wire to broker a.
    let (a_tx, a_done) = crossbeam_channel::unbounded();
    pa.send_async(
        Message::new("TA", b"a".to_vec()),
        None,
        Duration::from_secs(15),
        Box::new(move |r| {
            let _ = a_tx.send(r.map(|_| ()));
        }),
    )
    .unwrap();
    got_send.recv_timeout(Duration::from_secs(10)).unwrap();
    // Meanwhile the route of "TA" is dropped (as the idle sweep and the offline-broker
    // cleanup drop it) and the name server stalls: the re-send needs a route lookup.
    pa.publish_table.write().remove("TA");
    instance.update_topic_route_info_from_name_server();
    instance.clean_offline_broker();
    assert_eq!(instance.find_broker_address_in_publish("a"), None);
    stalled.store(true, Ordering::SeqCst);
    drop(close_tx); // broker a closes: the send fails and is re-sent
    let deadline = Instant::now() + Duration::from_secs(10);
    while stalled_requests.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        stalled_requests.load(Ordering::SeqCst),
        1,
        "the route lookup"
    );
    // The lookup waits for the name server; producer b's callbacks must not.
    let (took, r) = send_b().recv_timeout(Duration::from_secs(20)).unwrap();
    r.unwrap();
    drop(unstall_tx);
    // Producer a's callback runs once, whatever the re-send's outcome.
    let a_result = a_done.recv_timeout(Duration::from_secs(20));
    assert!(a_result.is_ok(), "producer a's callback never ran");
    pa.shutdown();
    pb.shutdown();
    drop(broker_a.join());
    assert!(
        a_done.try_recv().is_err(),
        "producer a's callback ran twice"
    );
    assert!(
        took < Duration::from_millis(500),
        "producer b's callback waited {took:?} behind a route lookup"
    );
}

/// A prepared send whose id is the tail of its properties, as the usual send's is.
fn prepared_with_made_id(id: &str) -> Prepared<'static> {
    Prepared {
        topic: Arc::from("T"),
        user_topic: Arc::from("T"),
        body: Cow::Owned(b"x".to_vec()),
        records: None,
        properties: message::properties_to_string([
            (property::WAIT, "true"),
            (property::UNIQ_KEY, id),
        ]),
        sys_flag: 0,
        flag: 0,
        msg_id: SendId::Tail(id.len()),
        batch: false,
        reply: false,
        reconsume_times: None,
        max_reconsume_times: None,
        born_ms: 0,
    }
}

fn send_response(fields: &[(&str, &str)]) -> RemotingCommand {
    let mut resp = RemotingCommand::response(ResponseCode::SUCCESS, 7, None);
    for (k, v) in fields {
        resp.ext_fields.insert(k, v);
    }
    resp
}

#[test]
fn a_send_response_is_read_in_one_pass_with_javas_defaults() {
    let id = "7F00000100002A9F0000000000000001";
    let p = prepared_with_made_id(id);
    let mq = MessageQueue::new("T", "broker-a", 0);
    let header = [
        ("msgId", "7F00000100002A9F00000000000004D2"),
        ("queueId", "3"),
        ("queueOffset", "42"),
        ("transactionId", id),
    ];
    // What a 5.x broker sends: its region and the trace switch beside the header.
    let mut fields = header.to_vec();
    fields.extend([
        (property::MSG_REGION, "DefaultRegion"),
        (property::TRACE_ON, "true"),
    ]);
    let r = ProducerImpl::process_response(&p, &mq, "b:1", send_response(&fields)).unwrap();
    assert_eq!(r.msg_id(), id, "the id from the tail of the properties");
    assert_eq!(r.offset_msg_id(), "7F00000100002A9F00000000000004D2");
    assert_eq!(r.message_queue().queue_id(), 3);
    assert_eq!(r.message_queue().broker_name(), "broker-a");
    assert_eq!(r.queue_offset(), 42);
    assert_eq!(r.transaction_id(), Some(id));
    assert_eq!((r.region_id(), r.trace_on()), ("DefaultRegion", true));
    assert!(matches!(r.region_id, Cow::Borrowed(_)), "no allocation");

    // No region or an empty one is Java's default; another is kept; "false" turns trace off.
    for (region, expected) in [
        (None, "DefaultRegion"),
        (Some(""), "DefaultRegion"),
        (Some("eu"), "eu"),
    ] {
        let mut fields = header.to_vec();
        fields.extend(region.map(|r| (property::MSG_REGION, r)));
        fields.push((property::TRACE_ON, "false"));
        let r = ProducerImpl::process_response(&p, &mq, "b:1", send_response(&fields)).unwrap();
        assert_eq!((r.region_id(), r.trace_on()), (expected, false));
    }

    // A header field missing or malformed is a decode error, not a panic or a zero.
    for bad in ["queueId", "queueOffset", "msgId"] {
        let fields: Vec<_> = header.iter().copied().filter(|(k, _)| *k != bad).collect();
        let e =
            ProducerImpl::process_response(&p, &mq, "b:1", send_response(&fields)).expect_err(bad);
        assert!(e.to_string().contains(bad), "{e}");
    }
    let mut fields = header.to_vec();
    fields[1] = ("queueId", "three");
    assert!(ProducerImpl::process_response(&p, &mq, "b:1", send_response(&fields)).is_err());

    // A refusal names its code and the queue.
    let refused = RemotingCommand::response(ResponseCode::SYSTEM_BUSY, 7, Some("busy".into()));
    let e = ProducerImpl::process_response(&p, &mq, "b:1", refused).unwrap_err();
    assert!(e.to_string().contains("busy"), "{e}");
}
