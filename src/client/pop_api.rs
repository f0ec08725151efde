//! The typed POP requests of 5.x brokers (Java `MQClientAPIImpl.popMessageAsync`,
//! `ackMessageAsync`, `batchAckMessageAsync`, `changeInvisibleTimeAsync`,
//! `MQClientAPIExt.notification`), blocking or with a callback, and the reading of a pop
//! response into messages with their receipts (Java `processPopResponse`).
//!
//! A 4.x broker answers each of them REQUEST_CODE_NOT_SUPPORTED, which becomes an
//! [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) error.

use std::sync::Arc;
use std::time::Duration;

use log::warn;

use super::MQClientAPI;
use crate::error::{Error, Result};
use crate::message::{decode_messages_shared, DecodeOptions, MessageExt};
use crate::protocol::heartbeat::MessageModel;
use crate::protocol::pop::{
    decode_query_assignment, MessageQueueAssignment, QueryAssignmentRequestBody,
};
use crate::protocol::pop::{
    AckMessageRequestHeader, BatchAckMessageRequestBody, ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader, ExtraInfo, NotificationRequestHeader,
    NotificationResponseHeader, PopMessageRequestHeader, PopMessageResponseHeader, PopOffsets,
};
use crate::protocol::pop::{MessageRequestMode, SetMessageRequestModeRequestBody};
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};
use crate::remoting::InvokeCallback;

/// How a pop ended (Java `PopStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PopStatus {
    /// Messages came back.
    Found,
    /// Nothing within the poll time (POLLING_TIMEOUT, PULL_NOT_FOUND).
    NoNewMessage,
    /// Too many pops wait at the broker (POLLING_FULL): try again later.
    PollingFull,
}

/// What a POP_MESSAGE returned.
#[derive(Debug)]
pub struct PopResult {
    pub status: PopStatus,
    /// Each message with its receipt (the ack handle).
    pub messages: Vec<(MessageExt, ExtraInfo)>,
}

/// The error of a response that is neither success nor an expected miss.
fn failure(what: &str, addr: &str, response: &RemotingCommand) -> Error {
    let remark = response.remark.as_deref();
    if response.code == ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0 {
        Error::unsupported(what, remark).with_addr(addr)
    } else {
        Error::response(response.response_code(), remark)
            .with_addr(addr)
            .context(what)
    }
}

/// A pop on the wire: reads the response, then calls the caller's callback.
struct InFlightPop<F> {
    addr: String,
    broker_name: String,
    topic: String,
    callback: F,
}

impl<F> InvokeCallback for InFlightPop<F>
where
    F: FnOnce(Result<PopResult>) + Send + 'static,
{
    fn operation_complete(self, r: Result<RemotingCommand>) {
        let result =
            r.and_then(|resp| read_pop_response(&self.addr, &self.broker_name, &self.topic, resp));
        (self.callback)(result)
    }
}

/// Reads a POP_MESSAGE response (Java `processPopResponse`): messages with their
/// receipts, each message's topic the request's `topic`.
fn read_pop_response(
    addr: &str,
    broker_name: &str,
    topic: &str,
    mut response: RemotingCommand,
) -> Result<PopResult> {
    let status = match ResponseCode(response.code) {
        ResponseCode::SUCCESS => PopStatus::Found,
        ResponseCode::POLLING_FULL => PopStatus::PollingFull,
        ResponseCode::POLLING_TIMEOUT | ResponseCode::PULL_NOT_FOUND => PopStatus::NoNewMessage,
        _ => return Err(failure("pop", addr, &response)),
    };
    let what = || format!("pop response of {addr}");
    let h: PopMessageResponseHeader = response
        .decode_header()
        .map_err(|e| Error::from(e).context(what()))?;
    if status != PopStatus::Found {
        return Ok(PopResult {
            status,
            messages: Vec::new(),
        });
    }
    let mut offsets = PopOffsets::new(&h).map_err(|e| Error::from(e).context(what()))?;
    let body = Arc::new(std::mem::take(&mut response.body));
    let decoded = decode_messages_shared(body, DecodeOptions::new());
    for s in &decoded.skipped {
        // Its receipt is lost with it: the broker delivers it again after the
        // invisible time, and after the retries to the group's DLQ.
        warn!(
            "pop from {addr}: a message of {topic} that cannot be decoded was skipped (offset {:?}): {}",
            s.queue_offset, s.error
        );
    }
    let broker: Arc<str> = Arc::from(broker_name);
    let mut messages = Vec::with_capacity(decoded.messages.len());
    for mut m in decoded.messages {
        let receipt = offsets
            .receipt(
                m.topic(),
                m.property(crate::message::property::POP_CK),
                broker_name,
                m.queue_id,
                m.queue_offset,
            )
            .map_err(|e| Error::from(e).context(what()))?;
        m.broker_name = broker.clone();
        m.message.set_topic(topic);
        messages.push((m, receipt));
    }
    Ok(PopResult { status, messages })
}

/// What a NOTIFICATION answered (Java `NotifyResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotifyResult {
    /// The group has a message of the topic to pop (at the time of the answer).
    pub has_msg: bool,
    /// Too many requests wait at the broker: it answered at once, without waiting.
    pub polling_full: bool,
}

/// An async request on the wire whose response `read` turns into the callback's value.
struct InFlight<R, F> {
    addr: String,
    read: R,
    callback: F,
}

impl<T, R, F> InvokeCallback for InFlight<R, F>
where
    R: FnOnce(&str, &RemotingCommand) -> Result<T> + Send + 'static,
    F: FnOnce(Result<T>) + Send + 'static,
{
    fn operation_complete(self, r: Result<RemotingCommand>) {
        let addr = self.addr;
        let read = self.read;
        (self.callback)(r.and_then(|response| read(&addr, &response)))
    }
}

fn batch_ack_request(body: &BatchAckMessageRequestBody) -> Result<RemotingCommand> {
    let body = serde_json::to_vec(body)
        .map_err(|e| Error::invalid_argument(format!("encoding the batch ack: {e}")))?;
    Ok(RemotingCommand::request(RequestCode::BATCH_ACK_MESSAGE).with_body(body))
}

fn expect_acked(addr: &str, response: &RemotingCommand) -> Result<()> {
    if response.code == ResponseCode::SUCCESS.0 {
        return Ok(());
    }
    Err(failure("batch ack", addr, response))
}

/// The new receipt a CHANGE_MESSAGE_INVISIBLETIME answer gives (`old` is the request's).
fn read_change_invisible(
    addr: &str,
    broker_name: &str,
    header: &ChangeInvisibleTimeRequestHeader,
    old: &ExtraInfo,
    response: &RemotingCommand,
) -> Result<ExtraInfo> {
    if response.code != ResponseCode::SUCCESS.0 {
        return Err(failure("change invisible time", addr, response));
    }
    let h: ChangeInvisibleTimeResponseHeader = response
        .decode_header()
        .map_err(|e| Error::from(e).context(format!("change invisible time of {addr}")))?;
    // Java `changeInvisibleTimeAsync`: the check point restarts at this message.
    Ok(ExtraInfo {
        ck_queue_offset: header.offset,
        pop_time: h.pop_time,
        invisible_time: h.invisible_time,
        revive_qid: h.revive_qid,
        retry: old.retry,
        broker_name: broker_name.to_string(),
        queue_id: header.queue_id,
        queue_offset: header.offset,
    })
}

fn read_notification(addr: &str, response: &RemotingCommand) -> Result<NotifyResult> {
    if response.code != ResponseCode::SUCCESS.0 {
        return Err(failure("notification", addr, response));
    }
    let h: NotificationResponseHeader = response
        .decode_header()
        .map_err(|e| Error::from(e).context(format!("notification of {addr}")))?;
    Ok(NotifyResult {
        has_msg: h.has_msg,
        polling_full: h.polling_full.unwrap_or(false),
    })
}

impl MQClientAPI {
    /// POP_MESSAGE to one broker, waiting up to `timeout` (which must cover the header's
    /// `poll_time`). `broker_name` goes into every receipt; each message's topic becomes
    /// the request's topic (a retried message is stored in the group's retry topic).
    pub fn pop_message(
        &self,
        addr: &str,
        broker_name: &str,
        header: &PopMessageRequestHeader,
        timeout: Duration,
    ) -> Result<PopResult> {
        let request = RemotingCommand::request_with_header(RequestCode::POP_MESSAGE, header);
        let response = self.remoting().invoke_sync(addr, request, timeout)?;
        read_pop_response(addr, broker_name, &header.topic, response)
    }

    /// [`pop_message`](Self::pop_message) without waiting: `callback` gets the result on
    /// the callback pool (the push consumer's POP mode, Java `popMessageAsync`). When the
    /// request cannot be sent, the error and the callback come back.
    pub(crate) fn pop_message_async<F>(
        &self,
        addr: &str,
        broker_name: &str,
        header: &PopMessageRequestHeader,
        timeout: Duration,
        callback: F,
    ) -> std::result::Result<(), (Error, F)>
    where
        F: FnOnce(Result<PopResult>) + Send + 'static,
    {
        let request = RemotingCommand::request_with_header(RequestCode::POP_MESSAGE, header);
        let pop = InFlightPop {
            addr: addr.to_string(),
            broker_name: broker_name.to_string(),
            topic: header.topic.clone(),
            callback,
        };
        self.remoting()
            .invoke_async_with(addr, request, timeout, pop)
            .map_err(|e| {
                let (e, pop) = e.into_parts();
                (e, pop.callback)
            })
    }

    /// ACK_MESSAGE: the message of the receipt in the header is done with.
    pub fn ack_message(
        &self,
        addr: &str,
        header: &AckMessageRequestHeader,
        timeout: Duration,
    ) -> Result<()> {
        let request = RemotingCommand::request_with_header(RequestCode::ACK_MESSAGE, header);
        let response = self.remoting().invoke_sync(addr, request, timeout)?;
        if response.code == ResponseCode::SUCCESS.0 {
            return Ok(());
        }
        Err(failure("ack", addr, &response))
    }

    /// BATCH_ACK_MESSAGE (5.1.1 and later): the messages of every receipt in `body` are
    /// done with, in one request. The broker answers success even for entries it skips
    /// (a queue it does not have); an older broker refuses the code, an
    /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) error.
    #[doc(alias = "batchAckMessageAsync")]
    pub fn batch_ack_message(
        &self,
        addr: &str,
        body: &BatchAckMessageRequestBody,
        timeout: Duration,
    ) -> Result<()> {
        let request = batch_ack_request(body)?;
        let response = self.remoting().invoke_sync(addr, request, timeout)?;
        expect_acked(addr, &response)
    }

    /// [`batch_ack_message`](Self::batch_ack_message) without waiting: `callback` gets
    /// the result on the callback pool. When the request cannot be sent, the error and
    /// the callback come back.
    pub(crate) fn batch_ack_message_async<F>(
        &self,
        addr: &str,
        body: &BatchAckMessageRequestBody,
        timeout: Duration,
        callback: F,
    ) -> std::result::Result<(), (Error, F)>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        let request = match batch_ack_request(body) {
            Ok(r) => r,
            Err(e) => return Err((e, callback)),
        };
        self.invoke_reading(addr, request, timeout, expect_acked, callback)
    }

    /// CHANGE_MESSAGE_INVISIBLETIME: the message becomes visible again `invisible_time`
    /// ms from now; returns its new receipt (the old one no longer acks it).
    pub fn change_invisible_time(
        &self,
        addr: &str,
        broker_name: &str,
        header: &ChangeInvisibleTimeRequestHeader,
        timeout: Duration,
    ) -> Result<ExtraInfo> {
        let old = ExtraInfo::parse(&header.extra_info)?;
        let request =
            RemotingCommand::request_with_header(RequestCode::CHANGE_MESSAGE_INVISIBLETIME, header);
        let response = self.remoting().invoke_sync(addr, request, timeout)?;
        read_change_invisible(addr, broker_name, header, &old, &response)
    }

    /// [`change_invisible_time`](Self::change_invisible_time) without waiting: `callback`
    /// gets the new receipt on the callback pool (Java `changeInvisibleTimeAsync`). When
    /// the request cannot be sent, the error and the callback come back.
    pub(crate) fn change_invisible_time_async<F>(
        &self,
        addr: &str,
        broker_name: &str,
        header: &ChangeInvisibleTimeRequestHeader,
        timeout: Duration,
        callback: F,
    ) -> std::result::Result<(), (Error, F)>
    where
        F: FnOnce(Result<ExtraInfo>) + Send + 'static,
    {
        let old = match ExtraInfo::parse(&header.extra_info) {
            Ok(old) => old,
            Err(e) => return Err((e.into(), callback)),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::CHANGE_MESSAGE_INVISIBLETIME, header);
        let (broker, h) = (broker_name.to_string(), header.clone());
        let read = move |addr: &str, response: &RemotingCommand| {
            read_change_invisible(addr, &broker, &h, &old, response)
        };
        self.invoke_reading(addr, request, timeout, read, callback)
    }

    /// NOTIFICATION (5.x): waits at the broker up to the header's `poll_time` for a
    /// message of the topic the group could pop, without popping it (Java
    /// `MQClientAPIExt.notification`, which the 5.x proxy uses). `timeout` must cover
    /// the poll time.
    #[cfg_attr(not(feature = "unstable-internals"), allow(dead_code))]
    pub fn notification(
        &self,
        addr: &str,
        header: &NotificationRequestHeader,
        timeout: Duration,
    ) -> Result<NotifyResult> {
        let request = RemotingCommand::request_with_header(RequestCode::NOTIFICATION, header);
        let response = self.remoting().invoke_sync(addr, request, timeout)?;
        read_notification(addr, &response)
    }

    /// [`notification`](Self::notification) without waiting: `callback` gets the
    /// answer on the callback pool. When the request cannot be sent, the error and the
    /// callback come back.
    pub(crate) fn notification_async<F>(
        &self,
        addr: &str,
        header: &NotificationRequestHeader,
        timeout: Duration,
        callback: F,
    ) -> std::result::Result<(), (Error, F)>
    where
        F: FnOnce(Result<NotifyResult>) + Send + 'static,
    {
        let request = RemotingCommand::request_with_header(RequestCode::NOTIFICATION, header);
        self.invoke_reading(addr, request, timeout, read_notification, callback)
    }

    /// Sends `request` async; `read` turns the response into `callback`'s value on the
    /// callback pool. When it cannot be sent, the error and the callback come back.
    fn invoke_reading<T, R, F>(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
        read: R,
        callback: F,
    ) -> std::result::Result<(), (Error, F)>
    where
        R: FnOnce(&str, &RemotingCommand) -> Result<T> + Send + 'static,
        F: FnOnce(Result<T>) + Send + 'static,
    {
        let sent = InFlight {
            addr: addr.to_string(),
            read,
            callback,
        };
        self.remoting()
            .invoke_async_with(addr, request, timeout, sent)
            .map_err(|e| {
                let (e, sent) = e.into_parts();
                (e, sent.callback)
            })
    }
}

impl MQClientAPI {
    /// QUERY_ASSIGNMENT: the queues of `topic` the broker assigns this client of `group`,
    /// and how to consume each (PULL or POP), by the broker's allocation `strategy`
    /// (Java `AllocateMessageQueueStrategy.getName()`, `AVG`). `None` when the broker
    /// could not allocate (Java's null: keep the current queues).
    #[allow(clippy::too_many_arguments)]
    pub fn query_assignment(
        &self,
        addr: &str,
        topic: &str,
        group: &str,
        client_id: &str,
        strategy: &str,
        model: MessageModel,
        timeout: Duration,
    ) -> Result<Option<Vec<MessageQueueAssignment>>> {
        let body = serde_json::to_vec(&QueryAssignmentRequestBody {
            topic,
            consumer_group: group,
            client_id,
            strategy_name: strategy,
            message_model: match model {
                MessageModel::Clustering => "CLUSTERING",
                MessageModel::Broadcasting => "BROADCASTING",
            },
        })
        .map_err(|e| Error::invalid_argument(format!("encoding the assignment query: {e}")))?;
        let request = RemotingCommand::request(RequestCode::QUERY_ASSIGNMENT).with_body(body);
        let response = self.remoting().invoke_sync(addr, request, timeout)?;
        if response.code != ResponseCode::SUCCESS.0 {
            return Err(failure("query assignment", addr, &response));
        }
        decode_query_assignment(&response.body)
            .map_err(|e| Error::from(e).with_addr(addr).context("query assignment"))
    }

    /// SET_MESSAGE_REQUEST_MODE: how `group` consumes `topic` on that broker (what
    /// `mqadmin setConsumeMode` sends); with POP, up to `pop_share_queue_num + 1`
    /// consumers share each queue.
    pub fn set_message_request_mode(
        &self,
        addr: &str,
        topic: &str,
        group: &str,
        mode: MessageRequestMode,
        pop_share_queue_num: u32,
        timeout: Duration,
    ) -> Result<()> {
        let share = i32::try_from(pop_share_queue_num)
            .map_err(|_| Error::invalid_argument("pop_share_queue_num is over i32::MAX"))?;
        let body = serde_json::to_vec(&SetMessageRequestModeRequestBody {
            topic,
            consumer_group: group,
            mode: mode.wire(),
            pop_share_queue_num: share,
        })
        .map_err(|e| Error::invalid_argument(format!("encoding the request mode: {e}")))?;
        let request =
            RemotingCommand::request(RequestCode::SET_MESSAGE_REQUEST_MODE).with_body(body);
        let response = self.remoting().invoke_sync(addr, request, timeout)?;
        if response.code != ResponseCode::SUCCESS.0 {
            return Err(failure("set message request mode", addr, &response));
        }
        Ok(())
    }
}
