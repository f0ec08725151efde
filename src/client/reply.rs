//! Replies to requests (Java `RequestFutureHolder`, `ClientRemotingProcessor.receiveReplyMessage`).
//!
//! A producer's request waits for its reply in the [`ReplyTable`] of the client instance:
//! one entry per request from before its send until its reply, its timeout or the
//! instance's shutdown, whichever comes first; the entry is removed by whoever ends it, so
//! a late reply finds nothing, is counted and dropped. The broker pushes a reply over the
//! requester's own connection (`PUSH_REPLY_MESSAGE_TO_CLIENT`), decoded here. The table and
//! the decoder belong to the client layer, which receives the push; the producer
//! (`producer/request.rs`) sends requests and builds replies.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_channel::Sender;
use log::{debug, warn};
use parking_lot::Mutex;

use super::MQClientInstance;
use crate::error::{Error, Result};
use crate::message::{property, sys_flag, CompressionType, Message, MessageExt};
use crate::protocol::{DecodeError, RemotingCommand};
use crate::remoting::RemotingClient;

/// What a request's async form calls with the reply or the failure.
pub(crate) type ReplyCallback = Box<dyn FnOnce(Result<MessageExt>) + Send + 'static>;

pub(crate) enum Waiter {
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
    pub(crate) fn insert(&self, correlation_id: String, waiter: Waiter) {
        self.pending.lock().insert(correlation_id, waiter);
    }

    pub(crate) fn take(&self, correlation_id: &str) -> Option<Waiter> {
        self.pending.lock().remove(correlation_id)
    }

    /// Requests waiting now.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub(crate) fn len(&self) -> usize {
        self.pending.lock().len()
    }

    /// Replies dropped because no request waited for them.
    #[cfg(any(test, feature = "unstable-internals"))]
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
        CompressionType::from_sys_flag(flags)?
            .decompress_capped(&req.body, max_body, || format!("{max_body} bytes"))?
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
    use crossbeam_channel::bounded;

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
        let props = crate::message::properties_to_string([
            (property::CORRELATION_ID, "c-1"),
            (property::MSG_TYPE, "reply"),
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
