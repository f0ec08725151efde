//! Configuration mistakes a newcomer makes, reported by `start()` as what they are. No
//! cluster: these clients are never meant to reach one.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{
    Admin, ConsumeStatus, Error, ErrorKind, LitePullConsumer, LocalTransactionState, Message,
    MessageExt, Producer, PushConsumer, TransactionProducer,
};

/// Far below the seconds an address-server lookup on the public internet takes.
const PROMPT: Duration = Duration::from_millis(1500);

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// The error a start without any name server must give: a `Config` error that names the
/// fix, returned promptly.
fn assert_names_the_fix(what: &str, began: Instant, e: &Error) {
    let took = began.elapsed();
    assert_eq!(e.kind(), ErrorKind::Config, "{what}: {e}");
    let s = e.to_string();
    assert!(s.contains("namesrv_addr"), "{what}: {s}");
    assert!(s.contains("NAMESRV_ADDR"), "{what}: {s}");
    assert!(!e.is_retriable(), "{what}: {s}");
    assert!(took < PROMPT, "{what}: start took {took:?}");
}

#[test]
fn every_client_without_a_name_server_fails_to_start_with_a_config_error_naming_the_fix() {
    let began = Instant::now();
    let e = Producer::builder(unique("no_ns_producer"))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .instance_name(unique("no_ns")),
        )
        .start()
        .map(|_| ())
        .expect_err("a producer without a name server started");
    assert_names_the_fix("producer", began, &e);

    let began = Instant::now();
    let execute = |_: &Message, _: &dyn std::any::Any| LocalTransactionState::CommitMessage;
    let check = |_: &MessageExt| LocalTransactionState::CommitMessage;
    let e = TransactionProducer::builder(unique("no_ns_tx"), (execute, check))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .instance_name(unique("no_ns")),
        )
        .start()
        .map(|_| ())
        .expect_err("a transaction producer without a name server started");
    assert_names_the_fix("transaction producer", began, &e);

    let began = Instant::now();
    let e = PushConsumer::builder(unique("no_ns_push"))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .instance_name(unique("no_ns")),
        )
        .subscribe("TopicTest", "*")
        .listener(|_, _| ConsumeStatus::Success)
        .start()
        .map(|_| ())
        .expect_err("a push consumer without a name server started");
    assert_names_the_fix("push consumer", began, &e);

    let began = Instant::now();
    let e = LitePullConsumer::builder(unique("no_ns_lite"))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .instance_name(unique("no_ns")),
        )
        .subscribe("TopicTest", "*")
        .start()
        .map(|_| ())
        .expect_err("a lite pull consumer without a name server started");
    assert_names_the_fix("lite pull consumer", began, &e);
}

#[test]
fn an_admin_without_a_name_server_is_the_same_config_error() {
    let began = Instant::now();
    let e = Admin::builder()
        .client_options(ClientOptions::new().no_namesrv_addr())
        .start()
        .map(|_| ())
        .expect_err("an admin without a name server started");
    assert_names_the_fix("admin", began, &e);
    let e = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(""))
        .start()
        .map(|_| ())
        .expect_err("an admin for \"\"");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
}

#[test]
fn an_address_server_without_an_answer_is_named_with_what_it_said() {
    // A configured address server that answers 404: start fails with what it answered.
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/rocketmq/nsaddr", l.local_addr().expect("addr"));
    let server = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.0 404 Not Found\r\n\r\nno such subgroup\n");
        }
    });
    let began = Instant::now();
    let e = Producer::builder(unique("no_ns_addr_server"))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .name_server_address_url(&url)
                .instance_name(unique("no_ns")),
        )
        .start()
        .map(|_| ())
        .expect_err("a producer whose address server answered 404 started");
    server.join().expect("address server thread");
    assert_names_the_fix("producer with an address server", began, &e);
    let s = e.to_string();
    assert!(s.contains(&url), "{s}");
    assert!(s.contains("HTTP 404"), "{s}");
}

#[test]
fn an_address_server_that_never_answers_holds_start_only_for_the_api_timeout() {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/rocketmq/nsaddr", l.local_addr().expect("addr"));
    let timeout = Duration::from_millis(300);
    let began = Instant::now();
    let e = Producer::builder(unique("no_ns_silent"))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .name_server_address_url(&url)
                .api_timeout(timeout)
                .instance_name(unique("no_ns")),
        )
        .start()
        .map(|_| ())
        .expect_err("a producer whose address server never answered started");
    drop(l);
    assert_names_the_fix("producer with a silent address server", began, &e);
    let s = e.to_string();
    assert!(s.contains(&url), "{s}");
    assert!(s.contains("timed out"), "{s}");
}
