//! The client's own decoders of what a peer sends that are not reachable through the
//! other internal modules, for the `fuzz/` targets (feature `unstable-internals`; not
//! covered by semver). Each function only calls the code the client runs on that input.

use std::collections::BTreeMap;

use crate::message::{MessageExt, MessageQueue};
use crate::protocol::{DecodeError, RemotingCommand};
use crate::Connection;

/// LOCK_BATCH_MQ's answer: the queues the broker locked.
pub fn lock_batch_response(body: &[u8]) -> Result<Vec<MessageQueue>, DecodeError> {
    crate::client::decode_lock_batch_response(body)
}

/// GET_CONSUMER_LIST_BY_GROUP's answer: the group's client ids.
pub fn consumer_id_list(body: &[u8]) -> Result<Vec<String>, DecodeError> {
    crate::client::decode_consumer_id_list(body)
}

/// GET_PRODUCER_CONNECTION_LIST's answer.
pub fn producer_connections(body: &[u8]) -> Result<Vec<Connection>, DecodeError> {
    crate::admin::decode_connection_set(body)
}

/// A broadcasting consumer's offsets file (`LocalFileOffsetStore`); `None` when blank.
pub fn offsets_file(bytes: &[u8]) -> Result<Option<BTreeMap<MessageQueue, i64>>, DecodeError> {
    crate::consumer::parse_offsets_file(bytes)
}

/// A reply pushed by a broker (PUSH_REPLY_MESSAGE_TO_CLIENT), its body inflated up to
/// `max_body` bytes.
pub fn reply_message(req: &RemotingCommand, max_body: usize) -> Result<MessageExt, DecodeError> {
    crate::client::decode_reply(req, max_body)
}

/// The HTTP address server's raw answer read as the client instance reads it: the status
/// and body of the response, then for a 200 the body's first line as name-server
/// addresses.
pub fn name_server_answer(raw: &[u8]) -> crate::Result<(u16, Vec<String>)> {
    let (status, body) = crate::client::http::parse_response(raw)?;
    if status != 200 {
        return Ok((status, Vec::new()));
    }
    let line = crate::client::http::clear_new_line(&body);
    Ok((status, crate::client::parse_namesrv_list(&line)))
}

/// A found PULL_MESSAGE response for `mq` carrying `body` (stored messages) as a consumer
/// processes it: the messages decoded (undecodable ones skipped), filtered by tag (here:
/// every tag), with MIN_OFFSET 0 and MAX_OFFSET `next_begin_offset` added.
pub fn pull_response(
    mq: &MessageQueue,
    body: Vec<u8>,
    next_begin_offset: i64,
) -> crate::Result<Vec<MessageExt>> {
    use crate::protocol::header::{CommandHeader, PullMessageResponseHeader};
    let mut response =
        RemotingCommand::response(crate::protocol::ResponseCode::SUCCESS, 0, None).with_body(body);
    PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset,
        min_offset: 0,
        max_offset: next_begin_offset,
    }
    .write_to(&mut response.ext_fields);
    crate::consumer::process_pull_response(mq, response)
}
