//! `rmq` in mqadmin's words: the commands that `mqadmin` has and `Admin` can do
//! (`clusterList`, `topicStatus`, `consumerConnection`, `producerConnection`,
//! `updateSubGroup`) and mqadmin's names and short flags on the existing commands, each
//! checked against the shared cluster and, where its output is plain enough, against what
//! the official `mqadmin` of the cluster's version prints.

use std::time::{Duration, Instant};

use rocketmq_blocking::{ConsumeStatus, Producer, PushConsumer};
use serde_json::{json, Value};

use super::{cluster, namesrv, rmq, stderr, stdout_lines, unique};
use rocketmq_blocking::ClientOptions;

const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

fn mqadmin(args: &[&str]) -> String {
    cluster()
        .mqadmin(args, TOOL_TIMEOUT)
        .unwrap_or_else(|e| panic!("mqadmin {args:?}: {e}"))
}

fn lines_of(args: &[&str]) -> Vec<Value> {
    let out = rmq(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout_lines(&out)
}

/// Runs `rmq args` until `done` holds for its lines, at most 30 s (brokers learn of
/// clients from heartbeats and index keys in the background).
fn lines_until(args: &[&str], done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = rmq(args);
        let lines = if out.status.success() {
            stdout_lines(&out)
        } else {
            Vec::new()
        };
        if done(&lines) {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "{args:?}: {lines:?} {}",
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn fails_with_one_line(args: &[&str]) -> String {
    let out = rmq(args);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(out.stdout.is_empty(), "{args:?}");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    err
}

/// The rows of an mqadmin table whose first column is `first`, split on whitespace.
fn rows<'a>(table: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cols| cols.first() == Some(&first))
        .collect()
}

#[test]
fn cluster_list_prints_the_brokers_mqadmin_lists() {
    let lines = lines_of(&["clusterList"]);
    let brokers = cluster().broker_addrs();
    assert_eq!(lines.len(), brokers.len(), "{lines:?}");
    let table = mqadmin(&["clusterList"]);
    for (name, addr) in &brokers {
        let line = lines
            .iter()
            .find(|l| l["brokerName"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} not in {lines:?}"));
        assert_eq!(
            line,
            &json!({"cluster": "DefaultCluster", "brokerName": name, "brokerId": 0, "addr": addr})
        );
        // mqadmin: `#Cluster Name  #Broker Name  #BID  #Addr ...`.
        let row = &rows(&table, "DefaultCluster")
            .into_iter()
            .find(|r| r.get(1) == Some(&name.as_str()))
            .unwrap_or_else(|| panic!("no row of {name} in:\n{table}"));
        assert_eq!((row[2], row[3]), ("0", addr.as_str()), "{table}");
    }
    assert_eq!(lines_of(&["clusterList", "-c", "DefaultCluster"]), lines);
    let err = fails_with_one_line(&["clusterList", "-c", "NoSuchCluster"]);
    assert!(err.contains("NoSuchCluster"), "{err}");
}

#[test]
fn topic_status_prints_each_queues_offsets_as_mqadmin_does() {
    let topic = unique("cli_mq_status");
    let created = lines_of(&[
        "updateTopic",
        "-t",
        &topic,
        "-c",
        "DefaultCluster",
        "-w",
        "2",
    ]);
    assert_eq!(
        created,
        vec![json!({"topic": topic, "queues": 2, "brokers": ["broker-a"]})]
    );
    let sent = lines_of(&["sendMessage", "-t", &topic, "-p", "x", "--count", "3"]);
    assert_eq!(sent.last().map(|s| &s["sent"]), Some(&json!(3)));

    let status = lines_until(&["topicStatus", "-t", &topic], |l| {
        l.len() == 2
            && l.iter()
                .map(|q| q["maxOffset"].as_i64())
                .sum::<Option<i64>>()
                == Some(3)
    });
    // mqadmin: `#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated`.
    let table = mqadmin(&["topicStatus", "-t", &topic]);
    for (i, q) in status.iter().enumerate() {
        assert_eq!(q["topic"], topic.as_str());
        assert_eq!(q["broker"], "broker-a");
        assert_eq!(q["queueId"], i);
        assert_eq!(q["minOffset"], 0);
        assert_eq!(q["lastUpdated"].is_u64(), q["maxOffset"] != 0, "{q}");
        let row = rows(&table, "broker-a")
            .into_iter()
            .find(|r| r.get(1) == Some(&i.to_string().as_str()))
            .unwrap_or_else(|| panic!("no queue {i} in:\n{table}"));
        assert_eq!(row[2], q["minOffset"].to_string(), "{table}");
        assert_eq!(row[3], q["maxOffset"].to_string(), "{table}");
    }
    let err = fails_with_one_line(&["topicStatus", "-t", &unique("cli_mq_none")]);
    assert!(err.contains("TOPIC_NOT_EXIST"), "{err}");
}

#[test]
fn consumer_connection_lists_the_client_ids_mqadmin_lists() {
    let topic = unique("cli_mq_conn");
    lines_of(&["updateTopic", "-t", &topic, "-c", "DefaultCluster"]);
    let group = unique("cli_mq_cg");
    let err = fails_with_one_line(&["consumerConnection", "-g", &group]);
    assert!(err.contains("not online"), "{err}");

    let consumer = PushConsumer::builder(&group)
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .subscribe(&topic, "*")
        .listener(|_, _| ConsumeStatus::Success)
        .start()
        .expect("consumer");
    let client_id = consumer.client_id();
    let lines = lines_until(&["consumerConnection", "-g", &group], |l| !l.is_empty());
    let broker = &cluster().broker_addrs()[0];
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line["group"], group.as_str());
    assert_eq!(line["broker"], broker.0.as_str());
    assert_eq!(line["clientId"], client_id.as_str());
    assert_eq!(line["language"], "RUST");
    assert_eq!(line["consumeType"], "CONSUME_PASSIVELY");
    assert_eq!(line["messageModel"], "CLUSTERING");
    assert_eq!(line["subscriptions"][topic.as_str()], "*");
    assert!(line["clientAddr"].as_str().is_some_and(|a| !a.is_empty()));
    let on_broker = lines_of(&["consumerConnection", "-g", &group, "-b", &broker.1]);
    assert_eq!(on_broker, lines);
    let table = mqadmin(&["consumerConnection", "-g", &group]);
    assert!(table.contains(&client_id), "{client_id} not in:\n{table}");
    consumer.shutdown();
}

#[test]
fn producer_connection_lists_a_running_producer() {
    let topic = unique("cli_mq_pconn");
    lines_of(&["updateTopic", "-t", &topic, "-c", "DefaultCluster"]);
    let group = unique("cli_mq_pg");
    let producer = Producer::builder(&group)
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("producer");
    // A producer is known to the brokers of the topics it sent to.
    producer
        .send(&rocketmq_blocking::Message::new(&topic, b"x".to_vec()))
        .expect("send");
    let lines = lines_until(&["producerConnection", "-g", &group, "-t", &topic], |l| {
        !l.is_empty()
    });
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["clientId"], producer.client_id().as_str());
    assert_eq!(lines[0]["language"], "RUST");
    assert!(lines[0]["clientAddr"]
        .as_str()
        .is_some_and(|a| a.contains(':')));
    let table = mqadmin(&["producerConnection", "-g", &group, "-t", &topic]);
    assert!(
        table.contains(&producer.client_id()),
        "{} not in:\n{table}",
        producer.client_id()
    );
    producer.shutdown();
}

#[test]
fn update_sub_group_creates_the_group_with_the_settings_given() {
    let group = unique("cli_mq_sub");
    let created = lines_of(&[
        "updateSubGroup",
        "-g",
        &group,
        "-c",
        "DefaultCluster",
        "-r",
        "5",
        "-q",
        "2",
        "-d",
        "false",
    ]);
    assert_eq!(
        created,
        vec![json!({"group": group, "brokers": ["broker-a"]})]
    );
    let listed = lines_of(&["group", "list"]);
    let ours = listed
        .iter()
        .find(|g| g["group"] == group.as_str())
        .unwrap_or_else(|| panic!("{group} not in {listed:?}"));
    assert_eq!(ours["retryMaxTimes"], 5);
    assert_eq!(ours["retryQueueNums"], 2);
    assert_eq!(ours["consumeBroadcastEnable"], false);
    assert_eq!(ours["consumeEnable"], true);

    // On one broker by address, changing a setting.
    let addr = &cluster().broker_addrs()[0].1;
    let again = lines_of(&["updateSubGroup", "-g", &group, "-b", addr, "-s", "false"]);
    assert_eq!(again, vec![json!({"group": group, "brokers": [addr]})]);
    let listed = lines_of(&["group", "list"]);
    let ours = listed
        .iter()
        .find(|g| g["group"] == group.as_str())
        .expect("still listed");
    assert_eq!(ours["consumeEnable"], false);
    let err = fails_with_one_line(&["updateSubGroup", "-g", "bad group"]);
    assert!(err.contains("illegal character"), "{err}");
}

#[test]
fn mqadmin_names_and_short_flags_drive_the_existing_commands() {
    let topic = unique("cli_mq_names");
    lines_of(&[
        "updateTopic",
        "-t",
        &topic,
        "-c",
        "DefaultCluster",
        "-w",
        "2",
    ]);
    let route: Value = {
        let out = rmq(&["topicRoute", "-t", &topic]);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("route is JSON")
    };
    assert_eq!(route["queueDatas"][0]["writeQueueNums"], 2);
    assert!(lines_of(&["topicList"]).contains(&json!({ "topic": topic })));

    let key = unique("cli_mq_key");
    let sent = lines_of(&[
        "sendMessage",
        "-t",
        &topic,
        "-p",
        "hello",
        "-k",
        &key,
        "-c",
        "TagA",
    ]);
    let (msg_id, offset_id) = (
        sent[0]["msgId"].as_str().expect("msgId"),
        sent[0]["offsetMsgId"].as_str().expect("offsetMsgId"),
    );
    let by_key = lines_until(&["queryMsgByKey", "-t", &topic, "-k", &key], |l| {
        l.len() == 1
    });
    assert_eq!(by_key[0]["msgId"], msg_id);
    assert_eq!(by_key[0]["tags"], "TagA");
    assert_eq!(by_key[0]["body"], "hello");
    let by_id = lines_of(&["queryMsgById", "-i", offset_id]);
    assert_eq!(by_id[0]["msgId"], msg_id);
    let by_unique = lines_of(&["queryMsgByUniqueKey", "-i", msg_id, "-t", &topic]);
    assert_eq!(by_unique[0]["offsetMsgId"], offset_id);

    let group = unique("cli_mq_names_g");
    let consumed = lines_of(&[
        "consume",
        "-t",
        &topic,
        "-g",
        &group,
        "--count",
        "1",
        "--from",
        "first",
        "--timeout",
        "60",
    ]);
    assert_eq!(consumed.len(), 2, "{consumed:?}");
    assert_eq!(consumed[0]["msgId"], msg_id);
    assert_eq!(consumed[1], json!({"consumed": 1}));
    let progress = lines_until(&["consumerProgress", "-g", &group, "-t", &topic], |l| {
        l.last().is_some_and(|s| s["totalLag"] == 0)
    });
    assert_eq!(progress.len(), 3, "{progress:?}");
    let reset = lines_of(&["resetOffsetByTime", "-g", &group, "-t", &topic, "-s", "0"]);
    assert!(reset.iter().all(|q| q["offset"] == 0), "{reset:?}");
    assert_eq!(reset.len(), 2, "{reset:?}");
    let to_now = lines_of(&["resetOffsetByTime", "-g", &group, "-t", &topic, "-s", "now"]);
    assert_eq!(
        to_now
            .iter()
            .map(|q| q["offset"].as_i64())
            .sum::<Option<i64>>(),
        Some(1),
        "{to_now:?}"
    );

    let err = fails_with_one_line(&["deleteTopic", "-t", &topic, "-c", "NoSuchCluster"]);
    assert!(err.contains("NoSuchCluster"), "{err}");
    let deleted = lines_of(&["deleteTopic", "-t", &topic, "-c", "DefaultCluster"]);
    assert_eq!(
        deleted,
        vec![json!({"topic": topic, "deleted": true, "brokers": ["broker-a"]})]
    );
    assert!(!lines_of(&["topicList"]).contains(&json!({ "topic": topic })));

    // On one broker by address: that broker is the one named, and the route follows.
    let addr = &cluster().broker_addrs()[0].1;
    let on_one = unique("cli_mq_one");
    let created = lines_of(&["updateTopic", "-t", &on_one, "-b", addr, "-w", "3"]);
    assert_eq!(
        created,
        vec![json!({"topic": on_one, "queues": 3, "brokers": [addr]})]
    );
    let status = lines_until(&["topicStatus", "-t", &on_one], |l| l.len() == 3);
    assert!(status.iter().all(|q| q["maxOffset"] == 0), "{status:?}");
    let err = fails_with_one_line(&["updateTopic", "-t", &on_one, "-c", "NoSuchCluster"]);
    assert!(err.contains("NoSuchCluster"), "{err}");
}
