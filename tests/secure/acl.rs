//! Signed clients against brokers that enforce ACL: what works with the right keys, and
//! what each broker answers to a wrong secret, an unsigned client and missing grants.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::protocol::{RemotingCommand, RequestCode};
use rocketmq_blocking::remoting::RpcHook;
use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeStatus, Credentials, ErrorKind, LitePullConsumer, Message,
    MessageQueue, Producer, PushConsumer, PushConsumerBuilder, ReconsumeDelay, TopicConfig,
};

use crate::env::*;
use rocketmq_blocking::ClientOptions;

/// Messages per send phase (scaled by `RMQ_RELIABILITY_SCALE`, default 1).
fn count() -> usize {
    let scale = std::env::var("RMQ_RELIABILITY_SCALE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    20 * scale
}

pub fn producer(env: &Env, credentials: Option<Credentials>) -> Producer {
    let mut options = ClientOptions::new().namesrv_addr(&env.namesrv);
    if let Some(c) = credentials {
        options = options.credentials(c);
    }
    Producer::builder(unique("acl_pg"))
        .client_options(options)
        .start()
        .expect("a producer starts (it talks to no broker yet)")
}

/// Sends `n` messages to `topic`; every one must be acknowledged. Returns their ids.
pub fn send_all(producer: &Producer, topic: &str, n: usize) -> HashSet<String> {
    (0..n)
        .map(|i| {
            let r = producer
                .send(&Message::new(topic, format!("acl message {i}")))
                .unwrap_or_else(|e| panic!("send {i} to {topic}: {e}"));
            r.msg_id().to_string()
        })
        .collect()
}

pub fn push(env: &Env, group: &str, topic: &str, credentials: Credentials) -> PushConsumerBuilder {
    PushConsumer::builder(group)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&env.namesrv)
                .credentials(credentials),
        )
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
}

/// Starts `builder` with a listener that records every message id and succeeds.
pub fn recording(builder: PushConsumerBuilder) -> (PushConsumer, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let c = builder
        .listener(move |msgs, _| {
            s.lock().extend(msgs.iter().map(|m| m.msg_id().to_string()));
            ConsumeStatus::Success
        })
        .start()
        .expect("a signed push consumer starts");
    (c, seen)
}

/// Waits until every id of `sent` was seen; returns (lost, duplicates).
pub fn await_all(sent: &HashSet<String>, seen: &Mutex<Vec<String>>) -> (usize, usize) {
    eventually(Duration::from_secs(60), || {
        compare(sent, &seen.lock()).0 == 0
    });
    // A little longer, so that a duplicate would show.
    std::thread::sleep(Duration::from_millis(500));
    compare(sent, &seen.lock())
}

/// The broker's answer to a refused request: (code, remark).
fn refusal(e: &rocketmq_blocking::Error) -> (i32, String) {
    assert_eq!(
        e.kind(),
        ErrorKind::Response,
        "not the broker's answer: {e}"
    );
    let code = e.response_code().expect("a response error has a code").0;
    (code, e.remark().unwrap_or_default().to_string())
}

fn assert_no_secret(text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "a secret leaked: {text}");
    }
}

fn signed_clients_send_push_and_lite_pull_consume_and_look_up_routes(env: &Env) {
    let n = count();
    let started = Instant::now();
    let p = producer(env, Some(credentials(APP)));
    let sent = send_all(&p, T_APP, n);
    let (c, seen) = recording(push(env, G_PUSH, T_APP, credentials(APP)));
    let (lost, dups) = await_all(&sent, &seen);
    c.shutdown();
    eprintln!(
        "{} push: sent {n}, lost {lost}, duplicates {dups}",
        env.version
    );
    assert_eq!(lost, 0, "{} push consumer lost messages", env.version);

    let sent = send_all(&p, T_LITE, n);
    let lite = LitePullConsumer::builder(G_LITE)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&env.namesrv)
                .credentials(credentials(APP)),
        )
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .subscribe(T_LITE, "*")
        .start()
        .expect("a signed lite pull consumer starts");
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while compare(&sent, &got).0 > 0 && Instant::now() < deadline {
        let batch = lite
            .poll_timeout(Duration::from_millis(500))
            .expect("a signed poll");
        got.extend(batch.iter().map(|m| m.msg_id().to_string()));
    }
    lite.shutdown();
    let (lost, dups) = compare(&sent, &got);
    eprintln!(
        "{} lite pull: sent {n}, lost {lost}, duplicates {dups}; both in {:.1}s",
        env.version,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(lost, 0, "{} lite pull consumer lost messages", env.version);

    let admin = admin_of(&env.namesrv, credentials(APP));
    let route = admin.topic_route(T_APP).expect("a signed route lookup");
    assert!(!route.queue_datas.is_empty());
    p.shutdown();
}

fn a_consumer_retry_comes_back_and_is_consumed(env: &Env) {
    let p = producer(env, Some(credentials(APP)));
    let sent = send_all(&p, T_RETRY, 5);
    let first: Arc<Mutex<Vec<String>>> = Arc::default();
    let again: Arc<Mutex<Vec<String>>> = Arc::default();
    let (f, a) = (first.clone(), again.clone());
    let c = push(env, G_RETRY, T_RETRY, credentials(APP))
        .listener(move |msgs, ctx| {
            // The first delivery fails; the retry (through %RETRY%group) succeeds.
            if msgs.iter().all(|m| m.reconsume_times() == 0) {
                f.lock().extend(msgs.iter().map(|m| m.msg_id().to_string()));
                ctx.set_reconsume_delay(ReconsumeDelay::Level(1));
                return ConsumeStatus::ReconsumeLater;
            }
            a.lock().extend(msgs.iter().map(|m| m.msg_id().to_string()));
            ConsumeStatus::Success
        })
        .start()
        .expect("a signed push consumer starts");
    let (lost, dups) = await_all(&sent, &again);
    c.shutdown();
    p.shutdown();
    eprintln!(
        "{} retry: 5 failed once ({} first deliveries), retried: lost {lost}, duplicates {dups}",
        env.version,
        first.lock().len()
    );
    assert_eq!(
        lost, 0,
        "{}: a retried message did not come back",
        env.version
    );
}

fn the_admin_creates_topics_and_a_user_may_not(env: &Env) {
    let topic = unique("AclAdminTopic");
    let admin = admin_of(&env.namesrv, credentials(ADMIN));
    admin
        .create_topic(&TopicConfig::new(&topic, 1))
        .expect("the admin creates a topic");
    let route = admin.topic_route(&topic).expect("its route");
    assert_eq!(route.queue_datas.len(), 1);
    let p = producer(env, Some(credentials(ADMIN)));
    send_all(&p, &topic, 3);
    p.shutdown();

    let user = admin_of(&env.namesrv, credentials(APP));
    let e = user
        .create_topic(&TopicConfig::new(unique("AclUserTopic"), 1))
        .expect_err("a user without admin rights creates no topic");
    let (code, remark) = refusal(&e);
    eprintln!(
        "{} create topic as a user: code {code}, remark {remark:?}",
        env.version
    );
}

fn a_wrong_secret_fails_with_the_brokers_code_and_remark(env: &Env) {
    let wrong = Credentials::new(APP.0, WRONG_SECRET);
    let root = admin_of(&env.namesrv, credentials(ADMIN));
    let stored_before = root
        .total_max_offset(T_WRONG)
        .expect("the admin reads offsets");
    let p = producer(env, Some(wrong.clone()));
    for _ in 0..3 {
        let e = p
            .send(&Message::new(T_WRONG, "never stored"))
            .expect_err("a wrongly signed send is refused");
        let (code, remark) = refusal(&e);
        eprintln!(
            "{} send with a wrong secret: code {code}, remark {remark:?}",
            env.version
        );
        assert_no_secret(&format!("{e} {e:?}"));
    }
    p.shutdown();
    let stored_after = root
        .total_max_offset(T_WRONG)
        .expect("the admin reads offsets");
    assert_eq!(
        stored_before, stored_after,
        "a wrongly signed message was stored"
    );

    let admin = admin_of(&env.namesrv, Credentials::new(ADMIN.0, WRONG_SECRET));
    let e = admin
        .create_topic(&TopicConfig::new(unique("AclWrongTopic"), 1))
        .expect_err("a wrongly signed admin call is refused");
    let (code, remark) = refusal(&e);
    eprintln!(
        "{} create topic with a wrong secret: code {code}, remark {remark:?}",
        env.version
    );
    assert_no_secret(&format!("{e} {e:?}"));

    // A consumer with a wrong secret gets nothing (its heartbeat and pulls are refused)
    // and still shuts down cleanly.
    let group = unique("acl_wrong_group");
    let consumer = push(env, &group, T_APP, wrong)
        .listener(|_, _| ConsumeStatus::Success)
        .start();
    eprintln!(
        "{} push consumer start with a wrong secret: {}",
        env.version,
        match &consumer {
            Ok(_) => "started".to_string(),
            Err(e) => format!("{e}"),
        }
    );
    match consumer {
        Ok(consumer) => consumer.shutdown(),
        Err(e) => assert_no_secret(&format!("{e} {e:?}")),
    }
}

fn an_unsigned_client_is_refused(env: &Env) {
    // Name servers check nothing on either line: the route comes back.
    let unsigned = rocketmq_blocking::Admin::builder()
        .client_options(rocketmq_blocking::ClientOptions::new().namesrv_addr(&env.namesrv))
        .start()
        .expect("an admin");
    let route = unsigned.topic_route(T_APP);
    eprintln!(
        "{} unsigned route lookup at the name server: {}",
        env.version,
        if route.is_ok() { "answered" } else { "refused" }
    );
    let p = producer(env, None);
    let e = p
        .send(&Message::new(T_APP, "never stored"))
        .expect_err("an unsigned send is refused");
    let (code, remark) = refusal(&e);
    eprintln!(
        "{} unsigned send: code {code}, remark {remark:?}",
        env.version
    );
    p.shutdown();
}

fn an_account_without_pub_gets_no_permission_on_send(env: &Env) {
    let p = producer(env, Some(credentials(SUB_ONLY)));
    let e = p
        .send(&Message::new(T_SUB, "never stored"))
        .expect_err("a send without PUB is refused");
    let (code, remark) = refusal(&e);
    eprintln!(
        "{} send without PUB: code {code}, remark {remark:?}",
        env.version
    );
    p.shutdown();
    // The same account may not send anywhere else either; PUB_ONLY may send on its topic.
    let p = producer(env, Some(credentials(PUB_ONLY)));
    send_all(&p, T_PUB, 2);
    p.shutdown();
}

/// Counts the requests of one client instance by code, and keeps the refusals that sync
/// calls got (request code, response code, remark).
#[derive(Default)]
struct RequestCounter {
    sent: Mutex<BTreeMap<i32, usize>>,
    refused: Mutex<BTreeMap<(i32, i32, String), usize>>,
}

impl RpcHook for RequestCounter {
    fn before_request(&self, _addr: &str, request: &mut RemotingCommand) {
        *self.sent.lock().entry(request.code).or_default() += 1;
    }

    fn after_response(&self, _addr: &str, code: RequestCode, response: &mut RemotingCommand) {
        if response.code != 0 {
            let remark = response.remark.clone().unwrap_or_default();
            *self
                .refused
                .lock()
                .entry((code.0, response.code, remark))
                .or_default() += 1;
        }
    }
}

fn an_account_without_sub_is_refused_on_consume_and_does_not_spin(env: &Env) {
    let p = producer(env, Some(credentials(PUB_ONLY)));
    send_all(&p, T_PUB, 3);
    p.shutdown();

    // A producer on the consumer's client instance carries the counting hook.
    let instance = unique("acl_nosub");
    let carrier = Producer::builder(unique("acl_nosub_pg"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&env.namesrv)
                .credentials(credentials(PUB_ONLY))
                .instance_name(&instance),
        )
        .start()
        .expect("a producer starts");
    let counter = Arc::new(RequestCounter::default());
    carrier
        .client_instance()
        .expect("a running producer has an instance")
        .remoting()
        .register_rpc_hook(counter.clone());
    let consumed = Arc::new(Mutex::new(0usize));
    let c2 = consumed.clone();
    let consumer = PushConsumer::builder(G_NOSUB)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&env.namesrv)
                .credentials(credentials(PUB_ONLY))
                .instance_name(&instance),
        )
        .subscribe(T_PUB, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _| {
            *c2.lock() += msgs.len();
            ConsumeStatus::Success
        })
        .start();
    eprintln!(
        "{} push consumer start without SUB: {}",
        env.version,
        match &consumer {
            Ok(_) => "started".to_string(),
            Err(e) => format!("{e}"),
        }
    );
    let window = Duration::from_secs(6);
    std::thread::sleep(window);
    let counts = counter.sent.lock().clone();
    let total: usize = counts.values().sum();
    let by_name: Vec<String> = counts
        .iter()
        .map(|(code, n)| format!("{:?}={n}", RequestCode(*code)))
        .collect();
    eprintln!(
        "{} without SUB: {total} requests in {}s ({}), {} messages consumed",
        env.version,
        window.as_secs(),
        by_name.join(", "),
        consumed.lock()
    );
    for ((request, code, remark), n) in counter.refused.lock().iter() {
        eprintln!(
            "{} without SUB: {:?} refused {n}x: code {code}, remark {remark:?}",
            env.version,
            RequestCode(*request)
        );
    }
    assert_eq!(*consumed.lock(), 0, "{}: consumed without SUB", env.version);
    // Pulls are retried after `pull_time_delay_when_exception` (1 s) per queue, routes
    // and heartbeats come every 30 s: a few dozen requests, never a spin.
    assert!(
        total <= 100,
        "{}: {total} requests in {window:?}: the refused consumer spins",
        env.version
    );
    let t = Instant::now();
    if let Ok(consumer) = consumer {
        consumer.shutdown();
    }
    assert!(t.elapsed() < Duration::from_secs(15), "shutdown hung");

    carrier.shutdown();

    // A lite pull consumer with assigned queues sends no heartbeat subscription, so its
    // pulls themselves reach the broker and are refused; each queue's next pull waits
    // `pull_time_delay_when_exception` (1 s), so it does not spin either.
    let instance = unique("acl_nosub_lite");
    let carrier = Producer::builder(unique("acl_nosub_pg"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&env.namesrv)
                .credentials(credentials(PUB_ONLY))
                .instance_name(&instance),
        )
        .start()
        .expect("a producer starts");
    let counter = Arc::new(RequestCounter::default());
    carrier
        .client_instance()
        .expect("a running producer has an instance")
        .remoting()
        .register_rpc_hook(counter.clone());
    let lite = LitePullConsumer::builder(G_NOSUB)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&env.namesrv)
                .credentials(credentials(PUB_ONLY))
                .instance_name(&instance),
        )
        .start()
        .expect("a lite pull consumer starts");
    let route = admin_of(&env.namesrv, credentials(ADMIN))
        .topic_route(T_PUB)
        .expect("the route");
    let queues: Vec<MessageQueue> = route
        .queue_datas
        .iter()
        .flat_map(|q| {
            (0..q.read_queue_nums as i32).map(|i| MessageQueue::new(T_PUB, &q.broker_name, i))
        })
        .collect();
    lite.assign(&queues).expect("assign");
    for mq in &queues {
        if let Err(e) = lite.seek(mq, 0) {
            eprintln!("{} lite seek without SUB: {e}", env.version);
        }
    }
    let t = Instant::now();
    let mut got = 0;
    while t.elapsed() < window {
        match lite.poll_timeout(Duration::from_millis(500)) {
            Ok(batch) => got += batch.len(),
            Err(e) => panic!("{}: poll failed instead of waiting: {e}", env.version),
        }
    }
    lite.shutdown();
    let counts = counter.sent.lock().clone();
    let pulls = counts
        .get(&RequestCode::PULL_MESSAGE.0)
        .copied()
        .unwrap_or(0);
    let total: usize = counts.values().sum();
    eprintln!(
        "{} lite pull without SUB: {total} requests in {}s ({pulls} pulls over {} queues), {got} messages",
        env.version,
        window.as_secs(),
        queues.len()
    );
    for ((request, code, remark), n) in counter.refused.lock().iter() {
        eprintln!(
            "{} lite pull without SUB: {:?} refused {n}x: code {code}, remark {remark:?}",
            env.version,
            RequestCode(*request)
        );
    }
    assert_eq!(got, 0, "{}: polled without SUB", env.version);
    assert!(
        pulls <= 20 * queues.len() && total <= 200,
        "{}: {total} requests ({pulls} pulls) in {window:?}: the refused consumer spins",
        env.version
    );
    carrier.shutdown();
}

fn clients_sharing_an_instance_need_the_same_credentials(env: &Env) {
    let instance = unique("acl_shared");
    let first = Producer::builder(unique("acl_pg"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&env.namesrv)
                .credentials(credentials(APP))
                .instance_name(&instance),
        )
        .start()
        .expect("the first producer starts");
    let second = Producer::builder(unique("acl_pg"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&env.namesrv)
                .credentials(credentials(PUB_ONLY))
                .instance_name(&instance),
        )
        .start();
    let e = second.expect_err("a second client with other credentials is refused");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert_no_secret(&format!("{e} {e:?}"));
    let consumer = push(env, G_PUSH, T_APP, Credentials::new(APP.0, WRONG_SECRET))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&env.namesrv)
                .credentials(Credentials::new(APP.0, WRONG_SECRET))
                .instance_name(&instance),
        )
        .listener(|_, _| ConsumeStatus::Success)
        .start();
    let e = consumer.expect_err("a consumer with other credentials is refused");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert_no_secret(&format!("{e} {e:?}"));
    first.shutdown();
}

/// The log of everything this process did so far — at trace level, every test of the
/// binary, a full signed run and refused ones — holds no secret, and neither do the
/// clients' `Debug` forms.
fn secrets_never_appear_in_logs_or_debug_output(env: &Env) {
    let p = producer(env, Some(credentials(APP)));
    let sent = send_all(&p, T_APP, 5);
    let (c, seen) = recording(push(env, G_SECRETS, T_APP, credentials(APP)));
    assert_eq!(
        await_all(&sent, &seen).0,
        0,
        "a signed consumer lost messages"
    );
    c.shutdown();
    p.shutdown();
    a_wrong_secret_fails_with_the_brokers_code_and_remark(env);
    let builder = Producer::builder("acl_debug")
        .client_options(ClientOptions::new().credentials(credentials(APP)));
    let consumer = push(env, G_PUSH, T_APP, credentials(APP));
    let text = format!("{builder:?} {consumer:?} {:?}", credentials(APP));
    assert!(text.contains(APP.0), "{text}");
    assert_no_secret(&text);
    let (lines, bytes, _) = log_lines_containing("");
    assert!(lines > 20, "the log captured only {lines} lines");
    for secret in SECRETS {
        let (_, _, hits) = log_lines_containing(secret);
        assert!(
            hits.is_empty(),
            "secret in the log: {:?}",
            &hits[..hits.len().min(3)]
        );
    }
    eprintln!(
        "{}: searched {lines} log lines ({bytes} bytes, trace level) for {} secrets: none found",
        env.version,
        SECRETS.len()
    );
}

on_both_lines!(
    signed_clients_send_push_and_lite_pull_consume_and_look_up_routes,
    a_consumer_retry_comes_back_and_is_consumed,
    the_admin_creates_topics_and_a_user_may_not,
    a_wrong_secret_fails_with_the_brokers_code_and_remark,
    an_unsigned_client_is_refused,
    an_account_without_pub_gets_no_permission_on_send,
    an_account_without_sub_is_refused_on_consume_and_does_not_spin,
);

#[test]
fn clients_sharing_an_instance_need_the_same_credentials_v5() {
    clients_sharing_an_instance_need_the_same_credentials(Env::v5());
}

#[test]
fn secrets_never_appear_in_logs_or_debug_output_v5() {
    secrets_never_appear_in_logs_or_debug_output(Env::v5());
}
