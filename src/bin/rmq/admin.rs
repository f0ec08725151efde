//! `rmq message`, `rmq group`, `rmq offset`, `rmq topic list|delete` and the commands
//! under mqadmin's names (`clusterList`, `topicStatus`, `consumerConnection`,
//! `producerConnection`, `updateSubGroup`): the admin calls of [`Admin`] from the command
//! line, as JSON lines on stdout (one object per line), with a progress line on stderr
//! before work that asks every broker.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use rocketmq_blocking::client::validators::{check_group, check_topic};
use rocketmq_blocking::SubscriptionGroupConfig;
use rocketmq_blocking::{Admin, ErrorKind, MessageExt, MessageQuery, ResetTarget};
use serde_json::json;

use crate::consume::{epoch_millis, render};
use crate::CliResult;

#[derive(Subcommand)]
pub(crate) enum MessageAction {
    /// Print one message by its id: an offset message id (the broker's), or with --topic
    /// a unique key (the id a producer gave it) first (mqadmin queryMsgById).
    Show(ShowArgs),
    /// Print the messages of a topic with a key (or a unique key) stored in a time range
    /// (mqadmin queryMsgByKey).
    Query(QueryArgs),
}

#[derive(Args)]
pub(crate) struct ShowArgs {
    /// The message id: the offset message id `send` prints as `offsetMsgId`, or with
    /// --topic the `msgId`.
    #[arg(
        short = 'i',
        long = "msg-id",
        value_name = "ID",
        required_unless_present = "msg_id_pos",
        conflicts_with = "msg_id_pos"
    )]
    msg_id: Option<String>,
    /// The message id, positionally (the older form of `-i`).
    #[arg(id = "msg_id_pos", value_name = "ID", hide = true)]
    msg_id_pos: Option<String>,
    /// Topic of the message, to look the id up as a unique key.
    #[arg(short = 't', long)]
    topic: Option<String>,
}

/// mqadmin queryMsgByUniqueKey: both the id and the topic.
#[derive(Args)]
pub(crate) struct UniqueKeyArgs {
    /// The unique key (the `msgId` `send` prints).
    #[arg(short = 'i', long = "msg-id", value_name = "ID")]
    msg_id: String,
    /// The topic of the message.
    #[arg(short = 't', long)]
    topic: String,
}

impl From<UniqueKeyArgs> for ShowArgs {
    fn from(a: UniqueKeyArgs) -> Self {
        ShowArgs {
            msg_id: Some(a.msg_id),
            msg_id_pos: None,
            topic: Some(a.topic),
        }
    }
}

#[derive(Args)]
pub(crate) struct QueryArgs {
    /// The topic.
    #[arg(short = 't', long)]
    topic: String,
    /// A message key (`send --key`).
    #[arg(
        short = 'k',
        long,
        required_unless_present = "unique_key",
        conflicts_with = "unique_key"
    )]
    key: Option<String>,
    /// A unique key (the msgId `send` prints).
    #[arg(long)]
    unique_key: Option<String>,
    /// Only messages stored at or after this time, ms since the epoch (default: any).
    #[arg(short = 'b', long, value_name = "MS")]
    begin: Option<u64>,
    /// Only messages stored at or before this time, ms since the epoch (default: any).
    #[arg(short = 'e', long, value_name = "MS")]
    end: Option<u64>,
    /// At most this many messages from each broker.
    #[arg(short = 'm', long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    max: u32,
}

#[derive(Subcommand)]
pub(crate) enum GroupAction {
    /// A consumer group's progress: one line per queue (broker and consumer offsets, lag),
    /// then a line with the total lag and TPS (mqadmin consumerProgress).
    Progress(ProgressArgs),
    /// The subscription groups of every master broker, one line each.
    List,
}

#[derive(Args)]
pub(crate) struct ProgressArgs {
    /// The consumer group.
    #[arg(
        short = 'g',
        long,
        required_unless_present = "group_pos",
        conflicts_with = "group_pos"
    )]
    group: Option<String>,
    /// The consumer group, positionally (the older form of `-g`).
    #[arg(id = "group_pos", value_name = "GROUP", hide = true)]
    group_pos: Option<String>,
    /// Only this topic (default: every topic the group has offsets in).
    #[arg(short = 't', long)]
    topic: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum OffsetAction {
    /// Move a group's offsets in a topic, through the brokers so that running consumers
    /// are told (mqadmin resetOffsetByTime); prints one line per queue.
    Reset(ResetArgs),
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["timestamp", "to_earliest", "to_latest"])))]
pub(crate) struct ResetArgs {
    /// The consumer group.
    #[arg(short = 'g', long)]
    group: String,
    /// The topic.
    #[arg(short = 't', long)]
    topic: String,
    /// To the first message stored at this time or later: ms since the epoch, or `now`.
    #[arg(short = 's', long, value_name = "MS", value_parser = parse_timestamp)]
    timestamp: Option<u64>,
    /// To each queue's first message.
    #[arg(long)]
    to_earliest: bool,
    /// To each queue's end.
    #[arg(long)]
    to_latest: bool,
}

/// `rmq clusterList`.
#[derive(Args)]
pub(crate) struct ClusterListArgs {
    /// Only the brokers of this cluster.
    #[arg(short = 'c', long)]
    cluster: Option<String>,
}

/// `rmq topicStatus`.
#[derive(Args)]
pub(crate) struct TopicStatusArgs {
    /// The topic.
    #[arg(short = 't', long)]
    topic: String,
}

/// `rmq consumerConnection`.
#[derive(Args)]
pub(crate) struct ConsumerConnectionArgs {
    /// The consumer group.
    #[arg(short = 'g', long)]
    group: String,
    /// Ask only the broker at this address (`host:port`; default: every master broker).
    #[arg(short = 'b', long, value_name = "ADDR")]
    broker: Option<String>,
}

/// `rmq producerConnection`.
#[derive(Args)]
pub(crate) struct ProducerConnectionArgs {
    /// The producer group.
    #[arg(short = 'g', long)]
    group: String,
    /// A topic the group sends to: its master brokers are asked.
    #[arg(short = 't', long)]
    topic: String,
}

/// `rmq updateSubGroup`: mqadmin's flags; a setting not given keeps Java's default.
#[derive(Args)]
pub(crate) struct SubGroupArgs {
    /// The consumer group.
    #[arg(short = 'g', long)]
    group: String,
    /// Only on the master brokers of this cluster (default: every master broker).
    #[arg(short = 'c', long, conflicts_with = "broker")]
    cluster: Option<String>,
    /// Only on the broker at this address (`host:port`).
    #[arg(short = 'b', long, value_name = "ADDR")]
    broker: Option<String>,
    /// Whether the group may consume (default true).
    #[arg(short = 's', long, value_name = "BOOL")]
    consume_enable: Option<bool>,
    /// Whether a new group may start from the first offset (default true).
    #[arg(short = 'm', long, value_name = "BOOL")]
    consume_from_min_enable: Option<bool>,
    /// Whether the group may consume in broadcasting mode (default true).
    #[arg(short = 'd', long, value_name = "BOOL")]
    consume_broadcast_enable: Option<bool>,
    /// Whether the group consumes orderly (5.x brokers; default false).
    #[arg(short = 'o', long, value_name = "BOOL")]
    consume_message_orderly: Option<bool>,
    /// Queues of the group's retry topic (default 1).
    #[arg(short = 'q', long, value_name = "N")]
    retry_queue_nums: Option<u32>,
    /// Reconsume attempts before the dead-letter queue (default 16).
    #[arg(short = 'r', long, value_name = "N")]
    retry_max_times: Option<u32>,
    /// The broker id to consume from (default 0, the master).
    #[arg(short = 'i', long, value_name = "ID")]
    broker_id: Option<u64>,
    /// The broker id to consume from when the group is slow (default 1).
    #[arg(short = 'w', long, value_name = "ID")]
    which_broker_when_consume_slowly: Option<u64>,
    /// Whether the broker tells consumers when the group changes (default true).
    #[arg(short = 'a', long, value_name = "BOOL")]
    notify_consumer_ids_changed: Option<bool>,
}

/// Milliseconds since the epoch, or `now` (mqadmin's `-s now`).
fn parse_timestamp(s: &str) -> Result<u64, String> {
    if s == "now" {
        return Ok(u64::try_from(epoch_millis(SystemTime::now())).unwrap_or(0));
    }
    s.parse()
        .map_err(|_| format!("expected ms since the epoch or `now`, got {s:?}"))
}

fn time_of(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn print_lines(lines: impl IntoIterator<Item = String>) -> CliResult {
    let mut out = std::io::stdout().lock();
    for line in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

fn render_message(m: &MessageExt) -> String {
    render(m, &m.message_queue())
}

pub(crate) fn message(admin: &Admin, action: MessageAction) -> CliResult {
    match action {
        MessageAction::Show(a) => {
            let msg_id = a.msg_id.or(a.msg_id_pos).unwrap_or_default();
            let topic = a.topic;
            let found = match &topic {
                Some(t) => match admin.query_message_by_unique_key(t, &msg_id)? {
                    Some(m) => Some(m),
                    None => admin.view_message(&msg_id).ok(),
                },
                None => Some(admin.view_message(&msg_id)?),
            };
            let m = found.ok_or_else(|| match &topic {
                Some(t) => format!("no message {msg_id} in {t}"),
                None => format!("no message {msg_id}"),
            })?;
            print_lines([render_message(&m)])
        }
        MessageAction::Query(a) => {
            let mut q = match (&a.key, &a.unique_key) {
                (Some(k), _) => MessageQuery::by_key(&a.topic, k),
                (None, Some(u)) => MessageQuery::by_unique_key(&a.topic, u),
                (None, None) => return Err("pass --key or --unique-key".into()),
            };
            q = q.max(a.max);
            if let Some(b) = a.begin {
                q = q.begin(time_of(b));
            }
            if let Some(e) = a.end {
                q = q.end(time_of(e));
            }
            q.check()?;
            eprintln!(
                "rmq: querying every broker of {} for {} {}",
                a.topic,
                if q.is_unique_key() {
                    "unique key"
                } else {
                    "key"
                },
                q.key()
            );
            let r = admin.query_messages(&q)?;
            print_lines(r.messages.iter().map(render_message))
        }
    }
}

pub(crate) fn group(admin: &Admin, action: GroupAction) -> CliResult {
    match action {
        GroupAction::Progress(a) => {
            let (group, topic) = (a.group.or(a.group_pos).unwrap_or_default(), a.topic);
            check_group(&group)?;
            eprintln!("rmq: reading the progress of {group} from every broker");
            let stats = admin.consume_stats(&group, topic.as_deref())?;
            let mut lines: Vec<String> = stats
                .queues
                .values()
                .map(|q| {
                    json!({
                        "topic": q.queue.topic(),
                        "broker": q.queue.broker_name(),
                        "queueId": q.queue.queue_id(),
                        "brokerOffset": q.broker_offset,
                        "consumerOffset": q.consumer_offset,
                        "lag": q.lag(),
                        "lastTimestamp": q.last_timestamp.map(epoch_millis),
                    })
                    .to_string()
                })
                .collect();
            lines.push(
                json!({
                    "group": group,
                    "queues": stats.queues.len(),
                    "totalLag": stats.total_diff(),
                    "consumeTps": stats.consume_tps,
                })
                .to_string(),
            );
            print_lines(lines)
        }
        GroupAction::List => {
            let groups = admin.subscription_groups()?;
            print_lines(groups.values().map(|g| {
                json!({
                    "group": g.group_name,
                    "consumeEnable": g.consume_enable,
                    "consumeBroadcastEnable": g.consume_broadcast_enable,
                    "consumeFromMinEnable": g.consume_from_min_enable,
                    "retryQueueNums": g.retry_queue_nums,
                    "retryMaxTimes": g.retry_max_times,
                    "brokerId": g.broker_id,
                })
                .to_string()
            }))
        }
    }
}

pub(crate) fn offset(admin: &Admin, action: OffsetAction) -> CliResult {
    let OffsetAction::Reset(a) = action;
    let target = match (a.timestamp, a.to_earliest, a.to_latest) {
        (Some(ms), false, false) => ResetTarget::Timestamp(time_of(ms)),
        (None, true, false) => ResetTarget::Earliest,
        (None, false, true) => ResetTarget::Latest,
        _ => return Err("pass one of --timestamp, --to-earliest, --to-latest".into()),
    };
    check_group(&a.group)?;
    check_topic(&a.topic)?;
    eprintln!(
        "rmq: resetting {} in {} on every broker of the topic",
        a.group, a.topic
    );
    let offsets = admin.reset_offset(&a.group, &a.topic, target)?;
    print_lines(offsets.iter().map(|(mq, offset)| {
        json!({
            "topic": mq.topic(),
            "broker": mq.broker_name(),
            "queueId": mq.queue_id(),
            "offset": offset,
        })
        .to_string()
    }))
}

pub(crate) fn topic_list(admin: &Admin) -> CliResult {
    print_lines(
        admin
            .topic_list()?
            .iter()
            .map(|t| json!({ "topic": t }).to_string()),
    )
}

pub(crate) fn topic_delete(admin: &Admin, topic: &str) -> CliResult {
    check_topic(topic)?;
    eprintln!("rmq: deleting {topic} on every master broker and name server");
    let brokers = admin.delete_topic(topic)?;
    print_lines([json!({"topic": topic, "deleted": true, "brokers": brokers}).to_string()])
}

/// What an admin call waits for when the CLI goes to the typed API underneath (`Admin`'s
/// own default).
const CALL_TIMEOUT: Duration = Duration::from_secs(6);

/// The master brokers of one cluster, name → address; an unknown cluster is an error.
pub(crate) fn cluster_masters(
    admin: &Admin,
    cluster: &str,
) -> Result<BTreeMap<String, String>, Box<dyn std::error::Error>> {
    let info = admin.cluster_info()?;
    let names = info
        .cluster_addr_table
        .get(cluster)
        .ok_or_else(|| format!("no cluster {cluster} in the name server's cluster list"))?;
    Ok(names
        .iter()
        .filter_map(|name| {
            let master = info.broker_addr_table.get(name)?.master_addr()?;
            Some((name.clone(), master.to_string()))
        })
        .collect())
}

/// `rmq clusterList`: one line per broker (master and slaves), by cluster and name.
pub(crate) fn cluster_list(admin: &Admin, args: ClusterListArgs) -> CliResult {
    let info = admin.cluster_info()?;
    let clusters: BTreeMap<&String, &Vec<String>> = info
        .cluster_addr_table
        .iter()
        .filter(|(c, _)| args.cluster.as_ref().is_none_or(|want| want == *c))
        .collect();
    if let (Some(want), true) = (&args.cluster, clusters.is_empty()) {
        return Err(format!("no cluster {want} in the name server's cluster list").into());
    }
    let mut lines = Vec::new();
    for (cluster, names) in clusters {
        let mut names: Vec<&String> = names.iter().collect();
        names.sort();
        for name in names {
            let Some(bd) = info.broker_addr_table.get(name) else {
                continue;
            };
            for (id, addr) in &bd.broker_addrs {
                lines.push(
                    json!({"cluster": cluster, "brokerName": name, "brokerId": id, "addr": addr})
                        .to_string(),
                );
            }
        }
    }
    print_lines(lines)
}

/// `rmq topicStatus`: each queue's min and max offset and last store time, from every
/// broker of the topic in one GET_TOPIC_STATS_INFO each, as mqadmin asks.
pub(crate) fn topic_status(admin: &Admin, args: TopicStatusArgs) -> CliResult {
    check_topic(&args.topic)?;
    let stats = admin.topic_stats(&args.topic)?;
    let lines = stats.queues.iter().map(|(mq, o)| {
        json!({
            "topic": args.topic,
            "broker": mq.broker_name(),
            "queueId": mq.queue_id(),
            "minOffset": o.min_offset,
            "maxOffset": o.max_offset,
            "lastUpdated": o.last_update.map(millis),
        })
        .to_string()
    });
    print_lines(lines.collect::<Vec<_>>())
}

/// Milliseconds since the epoch of `t` (0 before it).
fn millis(t: SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `rmq consumerConnection`: the connections each master broker (or the one given) holds
/// for the group, with the group's subscriptions and settings (GET_CONSUMER_CONNECTION_LIST,
/// as mqadmin asks). A broker that does not know the group answers with an error code and is
/// skipped; a group no broker knows is an error, as in mqadmin.
pub(crate) fn consumer_connection(admin: &Admin, args: ConsumerConnectionArgs) -> CliResult {
    check_group(&args.group)?;
    let masters = admin.master_addrs()?;
    let brokers: Vec<(String, String)> = match &args.broker {
        Some(addr) => {
            let name = masters
                .iter()
                .find(|(_, a)| *a == addr)
                .map_or_else(|| addr.clone(), |(n, _)| n.clone());
            vec![(name, addr.clone())]
        }
        None => masters.into_iter().collect(),
    };
    let mut lines = Vec::new();
    for (name, addr) in &brokers {
        let conn = match admin.consumer_connections_on(addr, &args.group) {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::Response => continue,
            Err(e) => return Err(e.into()),
        };
        for c in conn.connections {
            lines.push(
                json!({
                    "group": args.group,
                    "broker": name,
                    "clientId": c.client_id,
                    "clientAddr": c.client_addr,
                    "language": c.language,
                    "version": c.version,
                    "consumeType": conn.consume_type,
                    "messageModel": conn.message_model,
                    "consumeFromWhere": conn.consume_from_where,
                    "subscriptions": conn.subscriptions,
                })
                .to_string(),
            );
        }
    }
    if lines.is_empty() {
        return Err(format!("the consumer group {} is not online", args.group).into());
    }
    print_lines(lines)
}

/// `rmq producerConnection`: the connections of the group on the master brokers of the
/// topic. A broker that does not know the group is skipped.
pub(crate) fn producer_connection(admin: &Admin, args: ProducerConnectionArgs) -> CliResult {
    check_group(&args.group)?;
    check_topic(&args.topic)?;
    let route = admin.topic_route(&args.topic)?;
    let mut lines = Vec::new();
    for bd in &route.broker_datas {
        let Some(addr) = bd.master_addr() else {
            continue;
        };
        let conns = match admin.producer_connections_on(addr, &args.group) {
            Ok(conns) => conns,
            Err(e) if e.kind() == ErrorKind::Response => continue,
            Err(e) => return Err(e.into()),
        };
        for c in conns {
            lines.push(
                json!({
                    "group": args.group,
                    "broker": bd.broker_name,
                    "clientId": c.client_id,
                    "clientAddr": c.client_addr,
                    "language": c.language,
                    "version": c.version,
                })
                .to_string(),
            );
        }
    }
    if lines.is_empty() {
        return Err(format!(
            "the producer group {} is not online on the brokers of {}",
            args.group, args.topic
        )
        .into());
    }
    print_lines(lines)
}

/// `rmq updateSubGroup`: the group with Java's defaults and the settings given, on every
/// master, a cluster's masters, or one broker; one line naming where.
pub(crate) fn update_sub_group(admin: &Admin, a: SubGroupArgs) -> CliResult {
    check_group(&a.group)?;
    let mut config = SubscriptionGroupConfig::new(&a.group);
    if let Some(v) = a.consume_enable {
        config.consume_enable = v;
    }
    if let Some(v) = a.consume_from_min_enable {
        config.consume_from_min_enable = v;
    }
    if let Some(v) = a.consume_broadcast_enable {
        config.consume_broadcast_enable = v;
    }
    if let Some(v) = a.consume_message_orderly {
        config.consume_message_orderly = v;
    }
    if let Some(v) = a.retry_queue_nums {
        config.retry_queue_nums = v;
    }
    if let Some(v) = a.retry_max_times {
        config.retry_max_times = v;
    }
    if let Some(v) = a.broker_id {
        config.broker_id = v;
    }
    if let Some(v) = a.which_broker_when_consume_slowly {
        config.which_broker_when_consume_slowly = v;
    }
    if let Some(v) = a.notify_consumer_ids_changed {
        config.notify_consumer_ids_changed_enable = v;
    }
    let brokers = match (&a.cluster, &a.broker) {
        (_, Some(addr)) => {
            admin
                .api()
                .create_subscription_group(addr, &config, CALL_TIMEOUT)?;
            vec![addr.clone()]
        }
        (Some(cluster), None) => {
            let masters = cluster_masters(admin, cluster)?;
            for addr in masters.values() {
                admin
                    .api()
                    .create_subscription_group(addr, &config, CALL_TIMEOUT)?;
            }
            masters.into_keys().collect()
        }
        (None, None) => admin.create_subscription_group(&config)?,
    };
    print_lines([json!({"group": a.group, "brokers": brokers}).to_string()])
}
