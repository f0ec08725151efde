//! PULL_MESSAGE and what the client does with the answer (Java `PullAPIWrapper`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use log::warn;
use parking_lot::Mutex;

use crate::client::MQClientInstance;
use crate::error::{Error, ErrorKind, Result};
use crate::message::{
    decode_messages_shared, property, DecodeOptions, MessageExt, MessageQueue, SkippedRecord,
};
use crate::protocol::header::{PullMessageRequestHeader, PullMessageResponseHeader};
use crate::protocol::heartbeat::SubscriptionData;
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};
use crate::remoting::{InvokeAsyncError, InvokeCallback};

use super::subscription::{filters_by_tag, tag_matches};

/// Pull flags (Java `PullSysFlag`).
pub mod sys_flag {
    /// The request commits `commitOffset`.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// The broker may hold the request (long polling).
    pub const SUSPEND: i32 = 0x2;
    /// The request carries its subscription.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// A lite-pull consumer's request.
    pub const LITE_PULL: i32 = 0x10;
}

/// What a pull found (Java `PullStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullStatus {
    /// Messages.
    Found,
    /// Nothing new (PULL_NOT_FOUND).
    NoNewMsg,
    /// Nothing that matches the filter (PULL_RETRY_IMMEDIATELY).
    NoMatchedMsg,
    /// The offset is out of range (PULL_OFFSET_MOVED).
    OffsetIllegal,
}

/// One pull's outcome (Java `PullResult`).
#[derive(Debug, Clone)]
pub struct PullResult {
    /// Status.
    pub status: PullStatus,
    /// Where the next pull starts.
    pub next_begin_offset: i64,
    /// Queue's smallest offset.
    #[allow(dead_code)] // reported by the broker; read by tests
    pub min_offset: i64,
    /// Queue's next offset to be written.
    #[allow(dead_code)] // reported by the broker; read by tests
    pub max_offset: i64,
    /// Messages that passed the tag filter.
    pub msgs: Vec<MessageExt>,
    /// Records of the body that could not be decoded (logged, and not delivered; the
    /// next pull still starts at `next_begin_offset`, past them).
    #[allow(dead_code)] // logged where found; read by tests
    pub skipped: Vec<SkippedRecord>,
}

/// Parameters of one pull.
pub(crate) struct PullParams<'a> {
    pub mq: &'a MessageQueue,
    pub sub: &'a SubscriptionData,
    pub offset: i64,
    pub max_nums: i32,
    pub sys_flag: i32,
    pub commit_offset: i64,
    pub suspend: Duration,
    pub timeout: Duration,
    pub post_subscription: bool,
}

/// Remembers which broker id each queue should be pulled from next.
#[derive(Default)]
pub(crate) struct PullRouting {
    from_which: Mutex<HashMap<MessageQueue, u64>>,
}

impl PullRouting {
    fn broker_id(&self, mq: &MessageQueue) -> u64 {
        self.from_which.lock().get(mq).copied().unwrap_or(0)
    }

    /// `id` is the broker's `suggestWhichBrokerId`; a negative one (no broker sends it)
    /// means the master.
    fn remember(&self, mq: &MessageQueue, id: i64) {
        let id = u64::try_from(id).unwrap_or(0);
        self.from_which.lock().insert(mq.clone(), id);
    }
}

fn request(
    instance: &MQClientInstance,
    routing: &PullRouting,
    group: &str,
    p: &PullParams<'_>,
) -> Result<(String, RemotingCommand)> {
    let find = || {
        instance.find_broker_address_in_subscribe(&p.mq.broker_name, routing.broker_id(p.mq), false)
    };
    // Called on the pull thread: a broker not cached has its route fetched on the client
    // timer, and this pull fails now, to be tried again after the caller's delay.
    let found = match find() {
        Some(f) => f,
        None => {
            instance.request_route(&p.mq.topic, None);
            return Err(Error::new(
                ErrorKind::NoRoute,
                format!(
                    "the broker {} is not in the cached route; its route is being fetched",
                    p.mq.broker_name
                ),
            ));
        }
    };
    let mut flag = p.sys_flag;
    if found.slave {
        flag &= !sys_flag::COMMIT_OFFSET; // slaves do not take offset commits
    }
    let header = PullMessageRequestHeader {
        consumer_group: group.to_string(),
        topic: p.mq.topic.to_string(),
        queue_id: p.mq.queue_id,
        queue_offset: p.offset,
        max_msg_nums: p.max_nums,
        sys_flag: flag,
        commit_offset: p.commit_offset,
        suspend_timeout_millis: p.suspend.as_millis() as i64,
        subscription: p.post_subscription.then(|| p.sub.sub_string.clone()),
        sub_version: p.sub.sub_version,
        expression_type: Some(p.sub.expression_type.clone()),
        broker_name: Some(p.mq.broker_name.to_string()),
    };
    Ok((
        found.addr,
        RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header),
    ))
}

/// Sends one pull. On `Ok`, `callback` runs exactly once (on the callback pool) with the
/// processed result; on `Err`, the pull was not sent and `callback` comes back unrun.
pub(crate) fn pull_async<F>(
    instance: &MQClientInstance,
    routing: Arc<PullRouting>,
    group: &str,
    p: &PullParams<'_>,
    callback: F,
) -> std::result::Result<(), InvokeAsyncError<F>>
where
    F: FnOnce(Result<PullResult>) + Send + 'static,
{
    let (addr, req) = match request(instance, &routing, group, p) {
        Ok(r) => r,
        Err(e) => return Err(InvokeAsyncError::new(e, callback)),
    };
    let pull = InFlightPull {
        routing,
        mq: p.mq.clone(),
        sub: p.sub.clone(),
        callback,
    };
    instance
        .remoting()
        .invoke_async_with(&addr, req, p.timeout, pull)
        .map_err(|e| {
            let (e, pull) = e.into_parts();
            InvokeAsyncError::new(e, pull.callback)
        })
}

/// A pull on the wire: processes the response, then calls the caller's callback.
struct InFlightPull<F> {
    routing: Arc<PullRouting>,
    mq: MessageQueue,
    sub: SubscriptionData,
    callback: F,
}

impl<F> InvokeCallback for InFlightPull<F>
where
    F: FnOnce(Result<PullResult>) + Send + 'static,
{
    fn operation_complete(self, r: Result<RemotingCommand>) {
        let result = r.and_then(|resp| process_response(&self.routing, &self.mq, &self.sub, resp));
        (self.callback)(result)
    }
}

/// Turns a PULL_MESSAGE response into a result (Java `processPullResponse` +
/// `processPullResult`): decode, re-filter by tag, add MIN/MAX_OFFSET, note the broker hint.
pub(crate) fn process_response(
    routing: &PullRouting,
    mq: &MessageQueue,
    sub: &SubscriptionData,
    mut response: RemotingCommand,
) -> Result<PullResult> {
    let status = match response.response_code() {
        ResponseCode::SUCCESS => PullStatus::Found,
        ResponseCode::PULL_NOT_FOUND => PullStatus::NoNewMsg,
        ResponseCode::PULL_RETRY_IMMEDIATELY => PullStatus::NoMatchedMsg,
        ResponseCode::PULL_OFFSET_MOVED => PullStatus::OffsetIllegal,
        code => {
            return Err(
                Error::response(code, response.remark.as_deref()).context(format!("pull {mq}"))
            )
        }
    };
    let h: PullMessageResponseHeader = response.decode_header()?;
    routing.remember(mq, h.suggest_which_broker_id);
    let mut msgs = Vec::new();
    let mut skipped = Vec::new();
    if status == PullStatus::Found {
        let (min, max) = (h.min_offset.to_string(), h.max_offset.to_string());
        let body = Arc::new(std::mem::take(&mut response.body));
        let decoded = decode_messages_shared(body, DecodeOptions::new());
        // A message that cannot be decoded is skipped, never retried: retrying the pull
        // would get the same bytes and stall the queue for good.
        for s in &decoded.skipped {
            let which = match s.queue_offset {
                Some(o) => format!("the message at offset {o}"),
                None => format!(
                    "the rest of the body (before offset {})",
                    h.next_begin_offset
                ),
            };
            warn!("{mq}: skipped {which}, undecodable: {}", s.error);
        }
        skipped = decoded.skipped;
        let by_tag = filters_by_tag(sub);
        for mut m in decoded.messages {
            if by_tag && !tag_matches(sub, m.tags()) {
                continue;
            }
            if m.property(property::TRAN_MSG).is_some_and(|v| v == "true") {
                if let Some(uniq) = m.property(property::UNIQ_KEY).map(str::to_string) {
                    m.message.set_transaction_id(Some(uniq));
                }
            }
            m.message.put_property(property::MIN_OFFSET, &min);
            m.message.put_property(property::MAX_OFFSET, &max);
            m.broker_name = mq.broker_name.clone();
            msgs.push(m);
        }
    }
    Ok(PullResult {
        status,
        next_begin_offset: h.next_begin_offset,
        min_offset: h.min_offset,
        max_offset: h.max_offset,
        msgs,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::subscription::{build_subscription_data, MessageSelector};
    use crate::message::{encode_message_ext, Message};
    use crate::protocol::header::CommandHeader;

    /// A stored record of `T` at `offset`.
    fn record(offset: i64) -> Vec<u8> {
        let m = MessageExt {
            message: Message::new("T", format!("m{offset}")),
            queue_offset: offset,
            ..MessageExt::default()
        };
        encode_message_ext(&m).unwrap()
    }

    fn found(body: Vec<u8>, next_begin_offset: i64) -> RemotingCommand {
        let mut r = RemotingCommand::response(ResponseCode::SUCCESS, 1, None).with_body(body);
        PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset,
            min_offset: 0,
            max_offset: next_begin_offset,
        }
        .write_to(&mut r.ext_fields);
        r
    }

    #[test]
    fn an_undecodable_message_is_skipped_and_the_pull_moves_past_it() {
        let mq = MessageQueue::new("T", "b", 0);
        let sub = build_subscription_data("T", &MessageSelector::by_tag("*")).unwrap();
        let mut bad = record(11);
        bad[4] ^= 0xFF; // its magic code
        let body = [record(10), bad, record(12)].concat();
        let r = process_response(&PullRouting::default(), &mq, &sub, found(body, 13))
            .expect("one bad message does not fail the pull");
        assert_eq!(r.status, PullStatus::Found);
        assert_eq!(
            r.next_begin_offset, 13,
            "the next pull starts past all three"
        );
        let got: Vec<(i64, &[u8])> = r.msgs.iter().map(|m| (m.queue_offset, m.body())).collect();
        assert_eq!(got, [(10, &b"m10"[..]), (12, &b"m12"[..])]);
        let skipped: Vec<Option<i64>> = r.skipped.iter().map(|s| s.queue_offset).collect();
        assert_eq!(skipped, [Some(11)]);
    }

    #[cfg(feature = "testkit")]
    #[test]
    fn a_pull_of_a_broker_not_cached_fails_at_once_and_its_route_comes_on_the_timer() {
        use crate::testkit::fault_peer::{Fault, FaultPeer, Responder};
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::Instant;
        // A name server that holds each request until released (or 20 s), then routes
        // every topic to broker "b".
        let route = r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:1"},"brokerName":"b","cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}]}"#;
        let asked = Arc::new(AtomicUsize::new(0));
        let (release, held) = crossbeam_channel::bounded::<()>(0);
        let counter = asked.clone();
        let namesrv = FaultPeer::start(Fault::Respond(Responder::new(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = held.recv_timeout(Duration::from_secs(20));
            RemotingCommand::response(ResponseCode::SUCCESS, 0, None)
                .with_body(route.as_bytes().to_vec())
        })))
        .unwrap();
        let config = crate::client::ClientOptions::new()
            .namesrv_addr(namesrv.addr())
            .instance_name(format!("pull-route-{}", std::process::id()))
            .into_config();
        let instance = MQClientInstance::new(config).unwrap();
        instance.start().unwrap();
        let mq = MessageQueue::new("T", "b", 0);
        let sub = build_subscription_data("T", &MessageSelector::by_tag("*")).unwrap();
        let params = PullParams {
            mq: &mq,
            sub: &sub,
            offset: 0,
            max_nums: 32,
            sys_flag: 0,
            commit_offset: 0,
            suspend: Duration::from_secs(15),
            timeout: Duration::from_secs(30),
            post_subscription: false,
        };
        let routing = PullRouting::default();
        // On the pull thread: no wait for the stalled name server.
        let began = Instant::now();
        let e = request(&instance, &routing, "g", &params).unwrap_err();
        let took = began.elapsed();
        assert!(
            took < Duration::from_millis(500),
            "the pull thread waited {took:?} for the name server"
        );
        assert_eq!(e.kind(), ErrorKind::NoRoute, "{e}");
        // The route is asked for on the timer; once it is in, the next pull goes out.
        let deadline = Instant::now() + Duration::from_secs(10);
        while asked.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(release);
        // (A route nobody subscribes to may be forgotten by the periodic refresh; then
        // the next pull asks for it again.)
        let mut next = request(&instance, &routing, "g", &params);
        while next.is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            next = request(&instance, &routing, "g", &params);
        }
        let (addr, _) = next.unwrap();
        assert_eq!(addr, "127.0.0.1:1");
        instance.shutdown();
    }
}
