//! Hostile reply bodies decoded in a child process with a capped address space, on a
//! thread with a 2 MiB stack (the size of the client's own threads): each must be a typed
//! decode error, never an exhausted memory or an overflowed stack. Each test runs itself
//! again as a child under `ulimit -v`, so a decoder that tries to build gigabytes fails
//! that child instead of exhausting the machine.

use std::process::Command;

use rocketmq_blocking::protocol::{decode_route, json};

/// Address space a child may map, in KiB (`ulimit -v`): room for the test harness and its
/// threads, far below what the doubling of escaped keys would build.
const CAP_KIB: u64 = 1 << 20;

/// Runs this binary's test `name` again in a child process whose address space is capped,
/// with `HOSTILE_CHILD=name`, and fails unless it passes there. Returns false in the
/// parent, true in the child (which then does the work).
fn in_capped_child(name: &str) -> bool {
    if std::env::var("HOSTILE_CHILD").as_deref() == Ok(name) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {CAP_KIB} && exec \"$0\" \"$@\""))
        .arg(exe)
        .args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env("HOSTILE_CHILD", name)
        .output()
        .expect("run the capped child");
    assert!(
        out.status.success(),
        "{name} under a {CAP_KIB} KiB address-space cap: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// Runs `f` on a thread with a 2 MiB stack, returning what it returned.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the decode thread panicked")
}

/// `n` opening braces then `n` closing ones: every brace after the first opens an object
/// used as a map key, nested `n - 1` deep.
fn nested_keys(n: usize) -> Vec<u8> {
    let mut v = vec![b'{'; n];
    v.resize(2 * n, b'}');
    v
}

#[test]
fn a_68_byte_route_of_nested_object_keys_is_a_decode_error_within_the_memory_cap() {
    if !in_capped_child(
        "a_68_byte_route_of_nested_object_keys_is_a_decode_error_within_the_memory_cap",
    ) {
        return;
    }
    for n in [34, 28, 22] {
        let body = nested_keys(n);
        let r = on_small_stack(move || decode_route(&body).map(|_| ()));
        let e = r.expect_err("a route of nested object keys must not decode");
        assert!(
            e.to_string().contains("nest"),
            "n={n}: the error should say the body nests too deep: {e}"
        );
    }
}

#[test]
fn a_200_kb_body_of_nesting_is_a_decode_error_not_a_stack_overflow() {
    if !in_capped_child("a_200_kb_body_of_nesting_is_a_decode_error_not_a_stack_overflow") {
        return;
    }
    for body in [nested_keys(100_000), {
        let mut v = vec![b'['; 100_000];
        v.resize(200_000, b']');
        v
    }] {
        let r = on_small_stack(move || json::from_slice::<serde_json::Value>(&body).map(|_| ()));
        let e = r.expect_err("200 KB of nesting must not decode");
        assert!(e.to_string().contains("nest"), "{e}");
    }
}

#[test]
fn real_object_keys_still_decode_on_a_small_stack() {
    let body = br#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:100}}"#.to_vec();
    let v = on_small_stack(move || json::from_slice::<serde_json::Value>(&body))
        .expect("an offset table decodes");
    let table = v["offsetTable"].as_object().expect("an object");
    let (k, v) = table.iter().next().expect("one entry");
    assert_eq!(v, 100);
    let key: serde_json::Value = serde_json::from_str(k).expect("the key is JSON text");
    assert_eq!(key["queueId"], 0);
}

/// A route body of `items` entries in `queueDatas`, each a distinct readable and writable
/// broker of `queues` queues, with a master in `brokerDatas`.
fn route_of_many_brokers(items: usize, queues: u32) -> Vec<u8> {
    let qds: Vec<String> = (0..items)
        .map(|i| {
            format!(r#"{{"brokerName":"b{i}","perm":6,"readQueueNums":{queues},"writeQueueNums":{queues}}}"#)
        })
        .collect();
    let bds: Vec<String> = (0..items)
        .map(|i| format!(r#"{{"brokerName":"b{i}","brokerAddrs":{{"0":"127.0.0.1:{i}"}}}}"#))
        .collect();
    format!(
        r#"{{"queueDatas":[{}],"brokerDatas":[{}]}}"#,
        qds.join(","),
        bds.join(",")
    )
    .into_bytes()
}

#[test]
fn a_route_that_would_expand_to_billions_of_queues_is_a_decode_error() {
    if !in_capped_child("a_route_that_would_expand_to_billions_of_queues_is_a_decode_error") {
        return;
    }
    use rocketmq_blocking::client::{to_publish_info, to_subscribe_info};
    // "a:65536;" until a 2 MiB frame is full: 262,144 entries of 65,536 queues.
    let conf = "a:65536;".repeat((2 << 20) / 8);
    let order = format!(r#"{{"orderTopicConf":"{conf}","queueDatas":[],"brokerDatas":[]}}"#);
    for (what, body) in [
        ("orderTopicConf", order.into_bytes()),
        (
            "100k brokers of 1,024 queues",
            route_of_many_brokers(100_000, 1024),
        ),
    ] {
        let r = on_small_stack(move || {
            decode_route(&body).map(|route| {
                let publish = to_publish_info("T", &route).message_queues.len();
                (publish, to_subscribe_info("T", &route).len())
            })
        });
        let e = r.expect_err(what);
        assert!(e.to_string().contains("route"), "{what}: {e}");
    }
    // A large real-looking cluster is fine: 100 brokers of 64 queues.
    let body = route_of_many_brokers(100, 64);
    let queues = on_small_stack(move || {
        decode_route(&body).map(|route| to_subscribe_info("T", &route).len())
    });
    assert_eq!(queues.expect("a large real route decodes"), 6400);
}
