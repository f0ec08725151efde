//! Requests a broker sends to the client (Java `ClientRemotingProcessor`). The table of
//! every broker-initiated request code and its handler is
//! `MQClientInstance::register_processors`, below: a new request is an entry there, a
//! handler here and, when a producer or consumer answers it, a method of `ProducerInner`
//! or `ConsumerInner` (`mod.rs`).

use std::sync::Arc;

use log::{debug, info, warn};

use super::MQClientInstance;
use crate::client::namespace;
use crate::message::property;
use crate::protocol::consumer_admin::{self, prop, ConsumerRunningInfo};
use crate::protocol::transaction::CheckTransactionStateRequestHeader;
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};

/// The process's threads, one `id name` a line: what Java's thread dump is to an
/// operator asking `consumerStatus -s`.
fn thread_listing() -> String {
    let mut out = String::from("Threads of this process (id name):\n");
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        out.push_str("(no /proc on this system)\n");
        return out;
    };
    let mut names: Vec<(u64, String)> = tasks
        .flatten()
        .filter_map(|t| {
            let id = t.file_name().to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(t.path().join("comm")).ok()?;
            Some((id, name.trim_end().to_string()))
        })
        .collect();
    names.sort();
    for (id, name) in names {
        out.push_str(&format!("{id} {name}\n"));
    }
    out
}

impl MQClientInstance {
    /// The table of broker-initiated requests: each code and its handler, run on the
    /// processor pool. Called once, by `start`.
    pub(super) fn register_processors(&self) {
        // The admin tool's requests about a consumer, relayed by a broker (Java
        // `ClientRemotingProcessor`). They run on the processor pool.
        for code in [
            RequestCode::GET_CONSUMER_RUNNING_INFO,
            RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT,
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET,
            RequestCode::CONSUME_MESSAGE_DIRECTLY,
        ] {
            let me = self.me.clone();
            self.remoting().register_processor(
                code,
                Arc::new(move |addr: &str, req: RemotingCommand| {
                    let i = me.upgrade()?;
                    i.process_admin_request(addr, req)
                }),
            );
        }
        // Replies to this client's requests, pushed by the broker that took them.
        let me = self.me.clone();
        self.remoting().register_processor(
            RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT,
            Arc::new(move |addr: &str, req: RemotingCommand| {
                let i = me.upgrade()?;
                Some(crate::client::process_reply(&i, addr, &req))
            }),
        );
        let me = self.me.clone();
        self.remoting().register_processor(
            RequestCode::CHECK_TRANSACTION_STATE,
            Arc::new(move |addr: &str, req: RemotingCommand| {
                if let Some(i) = me.upgrade() {
                    i.process_check_transaction_state(addr, req);
                }
                None
            }),
        );
        let me = self.me.clone();
        self.remoting().register_processor(
            crate::protocol::RequestCode::NOTIFY_CONSUMER_IDS_CHANGED,
            Arc::new(move |addr: &str, req: crate::protocol::RemotingCommand| {
                let group = req
                    .ext_fields
                    .get("consumerGroup")
                    .unwrap_or_default()
                    .to_string();
                info!("broker {addr} says the consumers of group {group} changed; rebalancing");
                if let Some(i) = me.upgrade() {
                    i.rebalance_immediately();
                }
                None
            }),
        );
    }

    /// A broker's CHECK_TRANSACTION_STATE (oneway; Java
    /// `ClientRemotingProcessor.checkTransactionState`): the half message is decoded and
    /// handed to the producer of its group (`PGROUP`), which queues the check; the answer
    /// is that producer's END_TRANSACTION. A request that cannot be read is logged and
    /// dropped: the broker checks again.
    pub(super) fn process_check_transaction_state(&self, addr: &str, req: RemotingCommand) {
        let header: CheckTransactionStateRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => {
                warn!("broker {addr}: a transaction check whose header cannot be read: {e}");
                return;
            }
        };
        let msg = crate::message::decode_messages(&req.body, Default::default())
            .ok()
            .and_then(|v| v.into_iter().next());
        let Some(mut msg) = msg else {
            warn!("broker {addr}: a transaction check whose message cannot be decoded");
            return;
        };
        if let Some(ns) = self.config.namespace() {
            let topic = namespace::unwrap(Some(&ns), msg.topic());
            msg.message.set_topic(topic);
        }
        if let Some(id) = msg.property(property::UNIQ_KEY).filter(|id| !id.is_empty()) {
            let id = id.to_string();
            msg.message.set_transaction_id(Some(id));
        }
        let Some(group) = msg.property(property::PGROUP).map(str::to_string) else {
            warn!("broker {addr}: a transaction check of a message without a producer group");
            return;
        };
        let producer = self.producers.read().get(&group).cloned();
        match producer {
            Some(p) => p.check_transaction_state(addr, msg, header),
            None => {
                debug!("broker {addr} checks a transaction of group {group}, which is not here")
            }
        }
    }

    /// Answers one admin request about a consumer of this instance; `None` for a oneway
    /// request (the offset reset).
    fn process_admin_request(&self, addr: &str, req: RemotingCommand) -> Option<RemotingCommand> {
        let ext = |k: &str| req.ext_fields.get(k).unwrap_or_default().to_string();
        let code = RequestCode(req.code);
        // The reset and the status name the group `group`, the others `consumerGroup`.
        let group = match code {
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET
            | RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT => ext("group"),
            _ => ext("consumerGroup"),
        };
        let consumer = self.consumers.read().get(&group).cloned();
        let Some(consumer) = consumer else {
            if code == RequestCode::RESET_CONSUMER_CLIENT_OFFSET {
                info!("broker {addr} resets offsets of group {group}, which is not here");
                return None;
            }
            return Some(RemotingCommand::response(
                ResponseCode::SYSTEM_ERROR,
                req.opaque,
                Some(format!(
                    "The Consumer Group <{group}> not exist in this consumer"
                )),
            ));
        };
        let answer = |body: std::result::Result<Vec<u8>, crate::protocol::DecodeError>| {
            Some(match body {
                Ok(b) => {
                    let mut r = RemotingCommand::response(ResponseCode::SUCCESS, req.opaque, None);
                    r.body = b;
                    r
                }
                Err(e) => RemotingCommand::response(
                    ResponseCode::SYSTEM_ERROR,
                    req.opaque,
                    Some(e.to_string()),
                ),
            })
        };
        match code {
            RequestCode::GET_CONSUMER_RUNNING_INFO => {
                let mut info = consumer.running_info();
                self.add_running_info_properties(&mut info);
                if ext("jstackEnable") == "true" {
                    info.jstack = Some(thread_listing());
                }
                answer(info.encode())
            }
            RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT => answer(
                consumer_admin::encode_consumer_status(&consumer.offsets_of(&ext("topic"))),
            ),
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET => {
                let topic = ext("topic");
                let offsets = match consumer_admin::decode_reset_offsets(&req.body) {
                    Ok(o) => o,
                    Err(e) => {
                        warn!("broker {addr}: an offset reset of {group} that cannot be read: {e}");
                        return None;
                    }
                };
                info!(
                    "broker {addr} resets {} queue offsets of topic {topic} for group {group}",
                    offsets.len()
                );
                consumer.reset_offset(&topic, &offsets);
                None
            }
            RequestCode::CONSUME_MESSAGE_DIRECTLY => {
                let msg = crate::message::decode_messages(&req.body, Default::default())
                    .ok()
                    .and_then(|v| v.into_iter().next());
                let Some(msg) = msg else {
                    return Some(RemotingCommand::response(
                        ResponseCode::SYSTEM_ERROR,
                        req.opaque,
                        Some("the message to consume cannot be decoded".into()),
                    ));
                };
                match consumer.consume_message_directly(msg, &ext("brokerName")) {
                    Some(result) => answer(result.encode()),
                    None => Some(RemotingCommand::response(
                        ResponseCode::SYSTEM_ERROR,
                        req.opaque,
                        Some(format!(
                            "The Consumer Group <{group}> not exist in this consumer"
                        )),
                    )),
                }
            }
            _ => None,
        }
    }

    /// The properties Java's `MQClientInstance.consumerRunningInfo` adds.
    fn add_running_info_properties(&self, info: &mut ConsumerRunningInfo) {
        let p = &mut info.properties;
        p.insert(
            prop::NAMESERVER_ADDR.into(),
            self.remoting().name_server_address_list().join(";"),
        );
        p.insert(
            prop::CLIENT_VERSION.into(),
            crate::protocol::CURRENT_VERSION.to_string(),
        );
        p.insert("clientId".into(), self.client_id.clone());
    }
}
