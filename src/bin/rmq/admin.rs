//! `rmq message`, `rmq group`, `rmq offset`, `rmq topic list|delete`: the admin calls of
//! [`Admin`] from the command line, as JSON lines on stdout (one object per line), with a
//! progress line on stderr before work that asks every broker.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use rocketmq_blocking::client::validators::{check_group, check_topic};
use rocketmq_blocking::{Admin, MessageExt, MessageQuery, ResetTarget};
use serde_json::json;

use crate::consume::{epoch_millis, render};
use crate::CliResult;

#[derive(Subcommand)]
pub(crate) enum MessageAction {
    /// Print one message by its id: an offset message id (the broker's), or with --topic
    /// a unique key (the id a producer gave it) first.
    Show {
        msg_id: String,
        /// Topic of the message, to look the id up as a unique key.
        #[arg(long)]
        topic: Option<String>,
    },
    /// Print the messages of a topic with a key (or a unique key) stored in a time range.
    Query(QueryArgs),
}

#[derive(Args)]
pub(crate) struct QueryArgs {
    /// The topic.
    #[arg(long)]
    topic: String,
    /// A message key (`send --key`).
    #[arg(
        long,
        required_unless_present = "unique_key",
        conflicts_with = "unique_key"
    )]
    key: Option<String>,
    /// A unique key (the msgId `send` prints).
    #[arg(long)]
    unique_key: Option<String>,
    /// Only messages stored at or after this time, ms since the epoch (default: any).
    #[arg(long, value_name = "MS")]
    begin: Option<u64>,
    /// Only messages stored at or before this time, ms since the epoch (default: any).
    #[arg(long, value_name = "MS")]
    end: Option<u64>,
    /// At most this many messages from each broker.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    max: u32,
}

#[derive(Subcommand)]
pub(crate) enum GroupAction {
    /// A consumer group's progress: one line per queue (broker and consumer offsets, lag),
    /// then a line with the total lag and TPS.
    Progress {
        group: String,
        /// Only this topic (default: every topic the group has offsets in).
        #[arg(long)]
        topic: Option<String>,
    },
    /// The subscription groups of every master broker, one line each.
    List,
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
    #[arg(long)]
    group: String,
    #[arg(long)]
    topic: String,
    /// To the first message stored at this time or later, ms since the epoch.
    #[arg(long, value_name = "MS")]
    timestamp: Option<u64>,
    /// To each queue's first message.
    #[arg(long)]
    to_earliest: bool,
    /// To each queue's end.
    #[arg(long)]
    to_latest: bool,
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
        MessageAction::Show { msg_id, topic } => {
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
        GroupAction::Progress { group, topic } => {
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
