//! Batches (Java `send(Collection)`): the checks that make a list of messages one
//! `SEND_BATCH_MESSAGE`, and its records. A sync batch's records are written straight
//! into each attempt's frame; an async one owns its encoded body, since a retry outlives
//! the call.

use std::borrow::Cow;
use std::time::Duration;

use super::{check_queue_topic, Mode, Prepared, ProducerImpl, SendId};
use crate::client::validators::{check_body, check_send_topic, is_retry_topic};
use crate::error::{Error, Result};
use crate::message::{self, property, Message, MessageQueue};
use crate::producer::SendResult;
use crate::util;

/// A batch whose body is written into each attempt's frame rather than built apart and
/// copied in (a 16-message batch of 1 KiB bodies spent a tenth of its CPU on that copy).
pub(super) struct Records<'a> {
    msgs: &'a [Message],
    /// Each message's id (`UNIQ_KEY`), put into its record as it is written.
    ids: Vec<String>,
    namespace: Option<&'a str>,
    /// The encoded body's length.
    pub(super) len: usize,
}

impl Records<'_> {
    /// Message `i`'s id and the namespace, for its record.
    fn extra(&self, i: usize) -> [Option<(&str, &str)>; 2] {
        [
            self.ids.get(i).map(|id| (property::UNIQ_KEY, id.as_str())),
            self.namespace.map(|ns| (property::INSTANCE_ID, ns)),
        ]
    }

    pub(super) fn encode_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        message::encode_batch_into(self.msgs, |i| self.extra(i), buf)
    }

    pub(super) fn to_vec(&self) -> Result<Vec<u8>> {
        let mut body = Vec::with_capacity(self.len);
        self.encode_into(&mut body)?;
        Ok(body)
    }
}

impl ProducerImpl {
    /// A batch prepared for an async send, which owns its body.
    pub(super) fn prepare_batch(&self, msgs: &[Message]) -> Result<Prepared<'static>> {
        self.prepare_batch_records(msgs)?.into_owned()
    }

    /// A batch prepared for a sync send: its messages are encoded into each attempt's
    /// frame.
    fn prepare_batch_records<'a>(&'a self, msgs: &'a [Message]) -> Result<Prepared<'a>> {
        let Some(first) = msgs.first() else {
            return Err(Error::invalid_argument("the batch is empty"));
        };
        let mut ids = Vec::with_capacity(msgs.len());
        let born_ms = util::now_millis();
        // The topic is checked once: every other message must name the same.
        check_send_topic(first.topic())?;
        let wait = first.wait_store_msg_ok();
        for m in msgs {
            if m.topic() != first.topic() {
                return Err(Error::invalid_argument(format!(
                    "a batch must have one topic; found {} and {}",
                    first.topic(),
                    m.topic()
                )));
            }
            if m.wait_store_msg_ok() != wait {
                return Err(Error::invalid_argument(
                    "a batch must have one waitStoreMsgOK value",
                ));
            }
            if m.delay_time_level().is_some() {
                return Err(Error::invalid_argument(
                    "delayed messages cannot be batched",
                ));
            }
            if is_retry_topic(m.topic()) {
                return Err(Error::invalid_argument(
                    "retry-topic messages cannot be batched",
                ));
            }
            self.check_message_content(m)?;
            ids.push(match m.property(property::UNIQ_KEY) {
                Some(id) => id.to_string(),
                None => message::uniq::new_uniq_id(born_ms).to_string(),
            });
        }
        // Each message's id (and the namespace) go into its record as it is encoded, not
        // into a copy of the message first. Checked here, before anything is sent.
        let msg_id = SendId::Given(ids.join(","));
        let mut records = Records {
            msgs,
            ids,
            namespace: self.namespace.as_deref(),
            len: 0,
        };
        records.len = message::batch_len_with(msgs, |i| records.extra(i))?;
        check_body(records.len, self.options.max_message_size)
            .map_err(|e| e.context("encoded batch"))?;
        let wait = if wait { "true" } else { "false" };
        let (topic, user_topic) = self.topics(util::shared_name(first.topic()));
        Ok(Prepared {
            topic,
            user_topic,
            body: Cow::Borrowed(&[]),
            records: Some(records),
            properties: message::properties_to_string([(property::WAIT, wait)]),
            sys_flag: 0,
            flag: 0,
            msg_id,
            batch: true,
            reply: false,
            reconsume_times: None,
            max_reconsume_times: None,
            born_ms,
        })
    }

    pub(in crate::producer) fn send_batch(
        &self,
        msgs: &[Message],
        timeout: Duration,
    ) -> Result<SendResult> {
        self.observer.batch(&self.group, msgs, |msgs, begin| {
            let p = self.prepare_batch_records(msgs)?;
            self.send_default(&p, Mode::Sync, timeout, begin)?
                .ok_or_else(|| Error::state("sync send returned no result"))
        })
    }

    /// Sends a batch to `mq` once (Java `send(Collection, mq)`).
    pub(in crate::producer) fn send_batch_to_queue(
        &self,
        msgs: &[Message],
        mq: &MessageQueue,
        timeout: Duration,
    ) -> Result<SendResult> {
        self.observer.batch(&self.group, msgs, |msgs, begin| {
            let p = self.prepare_batch_records(msgs)?;
            check_queue_topic(&p.user_topic, mq)?;
            self.send_prepared_to_queue(&p, mq, Mode::Sync, timeout, begin)?
                .ok_or_else(|| Error::state("sync send returned no result"))
        })
    }
}
