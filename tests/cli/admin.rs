//! `rmq message`, `rmq group`, `rmq offset` and `rmq topic list|delete` against the
//! shared cluster: JSON lines on stdout that say what the broker holds, one line on
//! stderr for errors.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{consume_logged, created_topic, rmq, send_numbered, stderr, stdout_lines, unique};

/// Runs `rmq args` until it succeeds with `want` lines on stdout, at most 30 s (the
/// broker indexes keys and takes offsets in the background).
fn lines_eventually(args: &[&str], want: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = rmq(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let lines = stdout_lines(&out);
        if lines.len() == want || Instant::now() >= deadline {
            assert_eq!(lines.len(), want, "{args:?}: {lines:?}");
            return lines;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn only_line(args: &[&str]) -> Value {
    let out = rmq(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let mut lines = stdout_lines(&out);
    assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
    lines.remove(0)
}

fn fails_with_one_line(args: &[&str]) -> String {
    let out = rmq(args);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(out.stdout.is_empty(), "{args:?}");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    err
}

#[test]
fn message_query_and_show_find_a_message_by_key_unique_key_and_id() {
    let topic = created_topic(2);
    let key = unique("cli_key");
    let out = rmq(&["send", &topic, "--body", "hello", "--key", &key]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ack = &stdout_lines(&out)[0];
    let (msg_id, offset_id) = (
        ack["msgId"].as_str().unwrap(),
        ack["offsetMsgId"].as_str().unwrap(),
    );

    let query = ["message", "query", "--topic", &topic, "--key", &key];
    let found = &lines_eventually(&query, 1)[0];
    assert_eq!(found["msgId"], msg_id);
    assert_eq!(found["offsetMsgId"], offset_id);
    assert_eq!(found["body"], "hello");
    assert_eq!(found["keys"], json!([key]));
    assert_eq!(found["queue"]["queueId"], ack["queue"]);
    let out = rmq(&query);
    assert!(
        stderr(&out).starts_with("rmq: querying"),
        "{}",
        stderr(&out)
    );

    let by_unique = only_line(&[
        "message",
        "query",
        "--topic",
        &topic,
        "--unique-key",
        msg_id,
    ]);
    assert_eq!(by_unique["offsetMsgId"], offset_id);
    // Stored before this range begins: nothing.
    let future = (std::time::SystemTime::now() + Duration::from_secs(3600))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    let later = rmq(&[
        "message", "query", "--topic", &topic, "--key", &key, "--begin", &future,
    ]);
    assert!(later.status.success(), "{}", stderr(&later));
    assert!(stdout_lines(&later).is_empty());

    // By the broker's id, and by the producer's with the topic.
    assert_eq!(only_line(&["message", "show", offset_id])["msgId"], msg_id);
    let shown = only_line(&["message", "show", msg_id, "--topic", &topic]);
    assert_eq!(shown["offsetMsgId"], offset_id);
    assert_eq!(shown["body"], "hello");

    let fresh = "7F0000010000000000000000000000AA";
    let err = fails_with_one_line(&["message", "show", fresh, "--topic", &topic]);
    assert!(err.contains("no message"), "{err}");
    let err = fails_with_one_line(&["message", "query", "--topic", "bad topic", "--key", "k"]);
    assert!(err.contains("illegal character"), "{err}");
}

#[test]
fn group_progress_offset_reset_and_group_list_follow_a_group() {
    let topic = created_topic(2);
    let group = unique("cli_adm_g");
    send_numbered(&topic, 4);
    let (lines, consume_log) = consume_logged(&[
        &topic,
        "--group",
        &group,
        "--count",
        "4",
        "--from",
        "first",
        "--timeout",
        "60",
    ]);
    assert_eq!(lines.len(), 4);

    let progress = ["group", "progress", &group, "--topic", &topic];
    let check_progress = |lag: u64| {
        let lines = lines_eventually(&progress, 3);
        let queues = &lines[..2];
        let committed: i64 = queues
            .iter()
            .map(|q| q["consumerOffset"].as_i64().unwrap())
            .sum();
        let stored: i64 = queues
            .iter()
            .map(|q| q["brokerOffset"].as_i64().unwrap())
            .sum();
        assert_eq!(stored, 4, "{lines:?}");
        // A commit missing here failed or never left: `rmq consume` logs why.
        assert_eq!(
            committed,
            4 - lag as i64,
            "{lines:?}\nrmq consume's stderr:\n{consume_log}"
        );
        assert!(
            queues.iter().all(|q| q["topic"] == topic.as_str()),
            "{lines:?}"
        );
        assert_eq!(lines[2]["group"], group.as_str());
        assert_eq!(lines[2]["queues"], 2);
        assert_eq!(lines[2]["totalLag"], lag, "{lines:?}");
    };
    check_progress(0);

    // No consumer runs: the offsets are written straight to the broker.
    let reset = ["offset", "reset", "--group", &group, "--topic", &topic];
    let back = lines_eventually(&[&reset[..], &["--to-earliest"]].concat(), 2);
    assert!(back.iter().all(|q| q["offset"] == 0), "{back:?}");
    check_progress(4);
    let end = lines_eventually(&[&reset[..], &["--to-latest"]].concat(), 2);
    assert_eq!(
        end.iter()
            .map(|q| q["offset"].as_i64().unwrap())
            .sum::<i64>(),
        4
    );
    check_progress(0);
    fails_with_one_line(&reset);

    let out = rmq(&["group", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let groups = stdout_lines(&out);
    let ours = groups
        .iter()
        .find(|g| g["group"] == group.as_str())
        .unwrap_or_else(|| panic!("{group} not in {groups:?}"));
    assert_eq!(ours["retryMaxTimes"], 16);
    assert_eq!(ours["consumeEnable"], true);
}

#[test]
fn topic_list_shows_a_topic_until_topic_delete_removes_it() {
    let topic = created_topic(2);
    let listed = |t: &str| {
        let out = rmq(&["topic", "list"]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout_lines(&out).contains(&json!({ "topic": t }))
    };
    assert!(listed(&topic));
    let deleted = only_line(&["topic", "delete", &topic]);
    assert_eq!(
        deleted,
        json!({"topic": topic, "deleted": true, "brokers": ["broker-a"]})
    );
    assert!(!listed(&topic));
    let err = fails_with_one_line(&["route", &topic]);
    assert!(err.contains("TOPIC_NOT_EXIST"), "{err}");
    fails_with_one_line(&["topic", "delete", "bad topic"]);
}
