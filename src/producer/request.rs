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
//! The requests waiting for replies are in the client instance's `ReplyTable`
//! (`client/reply.rs`), which also decodes the pushed replies.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;

use super::send::ProducerImpl;
use crate::client::{MQClientInstance, ReplyCallback, Waiter};
use crate::error::{Error, Result};
use crate::message::{self, property, Message, MessageExt};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
