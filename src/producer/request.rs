//! Request-reply (Java `DefaultMQProducer.request`, `RequestFutureHolder`,
//! `MessageUtil.createReplyMessage`).
//!
//! A request is a message with three properties: `CORRELATION_ID` (unique per request),
//! `REPLY_TO_CLIENT` (this client id) and `TTL` (the timeout, ms). The responder, any
//! consumer of the topic, sends a reply built by [`create_reply_message`] to the cluster's
//! `<cluster>_REPLY_TOPIC`; the broker does not deliver that topic to consumers but pushes
//! the reply to the requesting client over its own connection
//! (`PUSH_REPLY_MESSAGE_TO_CLIENT`), so the requester needs no subscription.
//!
//! The [`ReplyTable`] of the client instance owns the requests waiting for replies: one
//! entry per request from before its send until its reply, its timeout or the instance's
//! shutdown, whichever comes first; the entry is removed by whoever ends it, so a late
//! reply finds nothing, is counted and dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Sender};
use log::{debug, warn};
use parking_lot::Mutex;

use super::send::ProducerImpl;
use crate::client::MQClientInstance;
use crate::error::{Error, Result};
use crate::message::{self, property, sys_flag, CompressionType, Message, MessageExt};
use crate::protocol::{DecodeError, RemotingCommand};
use crate::remoting::RemotingClient;

/// What a request's async form calls with the reply or the failure.
pub(crate) type ReplyCallback = Box<dyn FnOnce(Result<MessageExt>) + Send + 'static>;

/// The `MSG_TYPE` value of a reply (Java `MixAll.REPLY_MESSAGE_FLAG`).
pub(crate) const REPLY_MESSAGE_FLAG: &str = "reply";

/// The topic replies go to in `cluster` (Java `MixAll.getReplyTopic`).
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}_REPLY_TOPIC")
}

/// The reply to `request`, carrying `body`, for a responder to send with any producer
/// (Java `MessageUtil.createReplyMessage`): to the reply topic of the request's cluster,
/// with the request's correlation id, requester and TTL. Fails with
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a message that is not a request as the broker stored
/// it (no `CLUSTER` property, which the broker adds, or no correlation id).
pub fn create_reply_message(request: &MessageExt, body: impl Into<Vec<u8>>) -> Result<Message> {
    let (Some(cluster), Some(correlation_id)) = (
        request.property(property::CLUSTER),
        request.property(property::CORRELATION_ID),
    ) else {
        return Err(Error::invalid_argument(format!(
            "message {} is not a stored request (it has no {} or no {} property)",
            request.msg_id(),
            property::CLUSTER,
            property::CORRELATION_ID
        )));
    };
    let mut reply = Message::new(reply_topic(cluster), body);
    reply.put_property(property::MSG_TYPE, REPLY_MESSAGE_FLAG);
    reply.put_property(property::CORRELATION_ID, correlation_id);
    for key in [property::REPLY_TO_CLIENT, property::TTL] {
        if let Some(v) = request.property(key) {
            reply.put_property(key, v);
        }
    }
    Ok(reply)
}

/// Whether `msg` is a reply (sent with `SEND_REPLY_MESSAGE_V2`, as Java does).
pub(crate) fn is_reply(msg: &Message) -> bool {
    msg.property(property::MSG_TYPE) == Some(REPLY_MESSAGE_FLAG)
}

enum Waiter {
    /// A caller blocked in `request`.
    Sync(Sender<MessageExt>),
    /// `request_async`'s callback.
    Async(ReplyCallback),
}

/// Requests of one client instance waiting for their replies.
#[derive(Default)]
pub(crate) struct ReplyTable {
    pending: Mutex<HashMap<String, Waiter>>,
    /// Replies that matched no waiting request (late, or never ours).
    unmatched: AtomicU64,
}

impl ReplyTable {
    fn insert(&self, correlation_id: String, waiter: Waiter) {
        self.pending.lock().insert(correlation_id, waiter);
    }

    fn take(&self, correlation_id: &str) -> Option<Waiter> {
        self.pending.lock().remove(correlation_id)
    }

    /// Requests waiting now.
    pub(crate) fn len(&self) -> usize {
        self.pending.lock().len()
    }

    /// Replies dropped because no request waited for them.
    pub(crate) fn unmatched(&self) -> u64 {
        self.unmatched.load(Ordering::Relaxed)
    }

    /// Hands a reply pushed by a broker to its request; callbacks run on the callback
    /// pool. False (and counted) when no request waits for it.
    pub(crate) fn complete(&self, remoting: &RemotingClient, reply: MessageExt) -> bool {
        let id = reply.property(property::CORRELATION_ID).unwrap_or_default();
        match self.take(id) {
            Some(Waiter::Sync(tx)) => tx.send(reply).is_ok(),
            Some(Waiter::Async(callback)) => {
                remoting.execute_callback(move || callback(Ok(reply)));
                true
            }
            None => {
                self.unmatched.fetch_add(1, Ordering::Relaxed);
                debug!(
                    "a reply with correlation id {id:?} from {} matches no waiting request \
                     (late or not ours); dropped",
                    reply.born_host()
                );
                false
            }
        }
    }

    /// Ends every waiting request with `error` (the instance is shutting down). Sync
    /// callers see their channel close; callbacks run here.
    pub(crate) fn fail_all(&self, error: impl Fn() -> Error) {
        let waiting: Vec<Waiter> = self.pending.lock().drain().map(|(_, w)| w).collect();
        for w in waiting {
            if let Waiter::Async(callback) = w {
                callback(Err(error()));
            }
        }
    }
}

/// Decodes a reply the broker pushes (`PUSH_REPLY_MESSAGE_TO_CLIENT`, Java
/// `ClientRemotingProcessor.receiveReplyMessage`): the header carries the stored message's
/// fields, the body its (maybe compressed) body, decompressed here up to `max_body`.
pub(crate) fn decode_reply(
    req: &RemotingCommand,
    max_body: usize,
) -> std::result::Result<MessageExt, DecodeError> {
    let ext = |k: &str| req.ext_fields.get(k).unwrap_or_default();
    let int = |k: &str| -> std::result::Result<i64, DecodeError> {
        ext(k)
            .trim()
            .parse()
            .map_err(|_| DecodeError::new(format!("reply header field {k} is not a number")))
    };
    let topic = ext("topic");
    if topic.is_empty() {
        return Err(DecodeError::new("reply without a topic"));
    }
    let flags = i32::try_from(int("sysFlag")?)
        .map_err(|_| DecodeError::new("reply sysFlag out of range"))?;
    let body = if flags & sys_flag::COMPRESSED != 0 {
        CompressionType::of_flag(flags)?.decompress(&req.body, max_body)?
    } else {
        req.body.clone()
    };
    let unspecified = MessageExt::default().born_host;
    let host = |k: &str| ext(k).parse().unwrap_or(unspecified);
    let small = |k: &str| i32::try_from(int(k).unwrap_or(0)).unwrap_or(0);
    let mut message = Message::new(topic, body);
    message.set_properties_wire(ext("properties"));
    message.put_property(property::ARRIVE_TIME, crate::util::now_millis().to_string());
    message.set_flag(small("flag"));
    let m = MessageExt {
        message,
        queue_id: small("queueId"),
        sys_flag: flags,
        born_timestamp: int("bornTimestamp").unwrap_or(0),
        store_timestamp: int("storeTimestamp").unwrap_or(0),
        born_host: host("bornHost"),
        store_host: host("storeHost"),
        reconsume_times: small("reconsumeTimes"),
        ..MessageExt::default()
    };
    Ok(m)
}

impl ProducerImpl {
    /// The request as sent: a copy of `msg` with the correlation id, reply-to client and
    /// TTL; and the instance, which has told the brokers of the topic who this client is
    /// (the broker finds the requester's connection by client id from its heartbeats).
    fn prepare_request(
        &self,
        msg: &Message,
        timeout: Duration,
    ) -> Result<(Message, String, Arc<MQClientInstance>)> {
        if timeout.is_zero() {
            return Err(Error::invalid_argument("a request needs a timeout above 0"));
        }
        let instance = self.instance()?;
        let correlation_id = message::uniq::create_uniq_id();
        let mut request = msg.clone();
        request.put_property(property::CORRELATION_ID, &correlation_id);
        request.put_property(property::REPLY_TO_CLIENT, instance.client_id());
        request.put_property(property::TTL, timeout.as_millis().to_string());
        if self.ensure_route_and_heartbeat(&instance, msg.topic())? {
            instance.send_heartbeat_to_all_brokers_with_lock();
        }
        Ok((request, correlation_id, instance))
    }

    /// Java `DefaultMQProducerImpl.request`: sends, then waits for the reply, all within
    /// `timeout`.
    pub(super) fn request_reply(&self, msg: &Message, timeout: Duration) -> Result<MessageExt> {
        let begin = Instant::now();
        let (request, id, instance) = self.prepare_request(msg, timeout)?;
        let (tx, rx) = bounded(1);
        instance.replies().insert(id.clone(), Waiter::Sync(tx));
        if let Err(e) = self.send_sync(&request, timeout) {
            instance.replies().take(&id);
            return Err(e.context(format!("request to {}", msg.topic())));
        }
        let left = timeout.saturating_sub(begin.elapsed());
        match rx.recv_timeout(left) {
            Ok(reply) => Ok(reply),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                // Taken here, a reply that comes later finds nothing and is dropped.
                instance.replies().take(&id);
                Err(no_reply(msg.topic(), timeout))
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(Error::state(format!(
                "request to {}: the client shut down",
                msg.topic()
            ))),
        }
    }

    /// The async form: `callback` runs exactly once, with the reply, the send's failure,
    /// the timeout or the client's shutdown, unless this returns `Err` (then never).
    pub(super) fn request_reply_async(
        self: &Arc<Self>,
        msg: Message,
        timeout: Duration,
        callback: ReplyCallback,
    ) -> Result<()> {
        let (request, id, instance) = self.prepare_request(&msg, timeout)?;
        let topic = msg.topic().to_string();
        instance
            .replies()
            .insert(id.clone(), Waiter::Async(callback));
        // The timeout: whoever takes the entry first ends the request.
        let weak = Arc::downgrade(&instance);
        let (expired_id, expired_topic) = (id.clone(), topic.clone());
        instance.schedule_later("request-timeout", timeout, move || {
            let Some(instance) = weak.upgrade() else {
                return;
            };
            if let Some(Waiter::Async(callback)) = instance.replies().take(&expired_id) {
                let e = no_reply(&expired_topic, timeout);
                instance
                    .remoting()
                    .execute_callback(move || callback(Err(e)));
            }
        });
        let weak = Arc::downgrade(&instance);
        let sent_id = id.clone();
        let queued = self.send_async(
            request,
            None,
            timeout,
            Box::new(move |r| {
                let Err(e) = r else { return };
                let Some(instance) = weak.upgrade() else {
                    return;
                };
                if let Some(Waiter::Async(callback)) = instance.replies().take(&sent_id) {
                    callback(Err(e.context(format!("request to {topic}"))));
                }
            }),
        );
        if let Err(e) = queued {
            // Not sent: the callback goes with the entry, unrun.
            instance.replies().take(&id);
            return Err(e.into_parts().0);
        }
        Ok(())
    }
}

fn no_reply(topic: &str, timeout: Duration) -> Error {
    Error::timeout(crate::TimeoutPhase::Response, timeout).context(format!(
        "request to {topic} sent, but no reply within {timeout:?}"
    ))
}

/// Answers `PUSH_REPLY_MESSAGE_TO_CLIENT`: SUCCESS once the reply is handed over (or
/// dropped as unmatched), SYSTEM_ERROR for one that cannot be read.
pub(crate) fn process_reply(
    instance: &MQClientInstance,
    addr: &str,
    req: &RemotingCommand,
) -> RemotingCommand {
    use crate::protocol::ResponseCode;
    match decode_reply(req, crate::message::DEFAULT_MAX_BODY_LEN) {
        Ok(reply) => {
            instance.replies().complete(instance.remoting(), reply);
            RemotingCommand::response(ResponseCode::SUCCESS, req.opaque, None)
        }
        Err(e) => {
            warn!("broker {addr} pushed a reply that cannot be read: {e}");
            RemotingCommand::response(
                ResponseCode::SYSTEM_ERROR,
                req.opaque,
                Some("process reply message fail".into()),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RequestCode;

    fn pushed(fields: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT);
        for (k, v) in fields {
            cmd.ext_fields.insert(k, v);
        }
        cmd.body = body.to_vec();
        cmd
    }

    #[test]
    fn a_pushed_reply_decodes_with_its_properties_and_compressed_body() {
        let body = b"the reply".repeat(100);
        let props = message::properties_to_string([
            (property::CORRELATION_ID, "c-1"),
            (property::MSG_TYPE, REPLY_MESSAGE_FLAG),
        ]);
        let flags = (sys_flag::COMPRESSED | CompressionType::Zstd.flag()).to_string();
        let cmd = pushed(
            &[
                ("topic", "DefaultCluster_REPLY_TOPIC"),
                ("sysFlag", &flags),
                ("properties", &props),
                ("bornHost", "10.0.0.7:4321"),
                ("bornTimestamp", "1700000000000"),
                ("queueId", "0"),
            ],
            &CompressionType::Zstd.compress(&body, 3),
        );
        let m = decode_reply(&cmd, 1 << 20).unwrap();
        assert_eq!(m.body(), &body[..]);
        assert_eq!(m.property(property::CORRELATION_ID), Some("c-1"));
        assert!(m.property(property::ARRIVE_TIME).is_some());
        assert_eq!(m.born_host().to_string(), "10.0.0.7:4321");
    }

    #[test]
    fn hostile_pushed_replies_are_errors_not_panics() {
        // No topic; a sysFlag that is not a number; a "compressed" body that is not; a
        // body that inflates past the cap.
        assert!(decode_reply(&pushed(&[("sysFlag", "0")], b"x"), 100).is_err());
        assert!(decode_reply(&pushed(&[("topic", "T"), ("sysFlag", "x")], b"x"), 100).is_err());
        let compressed = sys_flag::COMPRESSED.to_string();
        let junk = pushed(&[("topic", "T"), ("sysFlag", &compressed)], b"not zlib");
        assert!(decode_reply(&junk, 100).is_err());
        let bomb = CompressionType::Zlib.compress(&[0u8; 10_000], 9);
        let big = pushed(&[("topic", "T"), ("sysFlag", &compressed)], &bomb);
        assert!(decode_reply(&big, 1000).is_err());
        // Hosts that do not parse fall back to the unspecified address.
        let m = decode_reply(
            &pushed(&[("topic", "T"), ("sysFlag", "0"), ("bornHost", "?")], b""),
            10,
        )
        .unwrap();
        assert_eq!(m.born_host(), MessageExt::default().born_host());
    }

    #[test]
    fn a_reply_needs_a_stored_request() {
        let mut request = MessageExt {
            message: Message::new("T", "q"),
            ..MessageExt::default()
        };
        let e = create_reply_message(&request, "a").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        request.message.put_property(property::CLUSTER, "C");
        request
            .message
            .put_property(property::CORRELATION_ID, "id-9");
        request
            .message
            .put_property(property::REPLY_TO_CLIENT, "1.2.3.4@x");
        request.message.put_property(property::TTL, "3000");
        let reply = create_reply_message(&request, "a").unwrap();
        assert_eq!(reply.topic(), "C_REPLY_TOPIC");
        assert!(is_reply(&reply));
        for (k, v) in [
            (property::CORRELATION_ID, "id-9"),
            (property::REPLY_TO_CLIENT, "1.2.3.4@x"),
            (property::TTL, "3000"),
        ] {
            assert_eq!(reply.property(k), Some(v));
        }
    }

    #[test]
    fn a_late_reply_is_counted_and_an_early_one_reaches_its_waiter() {
        let remoting = RemotingClient::new(Default::default()).unwrap();
        let table = ReplyTable::default();
        let (tx, rx) = bounded(1);
        table.insert("a".into(), Waiter::Sync(tx));
        let mut reply = MessageExt::default();
        reply.message.put_property(property::CORRELATION_ID, "a");
        assert!(table.complete(&remoting, reply.clone()));
        assert!(rx.try_recv().is_ok());
        assert!(
            !table.complete(&remoting, reply),
            "a second reply matches nothing"
        );
        assert_eq!((table.len(), table.unmatched()), (0, 1));
        remoting.shutdown();
    }
}
