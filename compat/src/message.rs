//! Messages of the 2.x API: `CMessage` (made by `CreateMessage`, to send), `CMessageExt`
//! (a received message, lent to a callback or held by a `CPullResult`) and
//! `CBatchMessage`. Both message kinds are one registered type here, so the getters of
//! either header work on either pointer (the Python client reads the `CMessage` of a
//! local transaction with the `CMessageExt` getters; the original read out of bounds).
//!
//! Strings returned by getters are NUL-terminated copies owned by the message: valid until
//! the message is destroyed (a lent `CMessageExt`: until its callback returns, or
//! `ReleasePullResult`) or the same field is read again after it changed. A missing field
//! is "" (as the original's empty `std::string`); a bad handle is NULL.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_longlong};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use rocketmq_blocking::{Message, MessageExt};

use crate::registry::{self, Obj};
use crate::{c_str, guard, guard_value, CResult, Failure};

/// `typedef struct CMessage CMessage;` and `CMessageExt`.
pub struct CMessage {
    _private: [u8; 0],
}

/// `typedef struct CBatchMessage CBatchMessage;`
pub struct CBatchMessage {
    _private: [u8; 0],
}

enum Kind {
    /// Made by `CreateMessage` (or a local transaction's half message).
    Plain(Message),
    /// Received.
    Received(Box<MessageExt>),
}

struct MsgData {
    kind: Kind,
    /// NUL-terminated copies handed to C, by field.
    texts: HashMap<String, Box<[u8]>>,
}

/// A registered message.
pub(crate) struct Msg {
    data: Mutex<MsgData>,
    /// Lent to a callback or a pull result: not the caller's to destroy.
    lent: bool,
}

impl Msg {
    fn new(kind: Kind, lent: bool) -> Arc<Msg> {
        Arc::new(Msg {
            data: Mutex::new(MsgData {
                kind,
                texts: HashMap::new(),
            }),
            lent,
        })
    }

    /// The message to send (a copy).
    pub(crate) fn message(&self) -> Message {
        match &self.data.lock().kind {
            Kind::Plain(m) => m.clone(),
            Kind::Received(e) => e.message().clone(),
        }
    }
}

/// Registers `msg` and returns its C pointer.
fn register(msg: Arc<Msg>) -> *mut CMessage {
    let p = Arc::as_ptr(&msg) as *mut CMessage;
    registry::insert(p as usize, Obj::Msg(msg));
    p
}

/// A message lent to C for the length of a callback or a pull result; unregistered by
/// [`Lent`]'s drop (or [`release`]).
pub(crate) struct Lent(pub(crate) *mut CMessage);

impl Lent {
    pub(crate) fn received(ext: MessageExt) -> Lent {
        Lent(register(Msg::new(Kind::Received(Box::new(ext)), true)))
    }

    pub(crate) fn plain(msg: Message) -> Lent {
        Lent(register(Msg::new(Kind::Plain(msg), true)))
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        release(self.0);
    }
}

/// Unregisters a lent message.
pub(crate) fn release(p: *mut CMessage) {
    registry::remove(p.cast());
}

/// Applies `f` to the message to send; a received message cannot be changed.
fn modify(msg: *mut CMessage, f: impl FnOnce(&mut Message) -> CResult<()>) -> i32 {
    guard(|| {
        let m = registry::msg(msg, "msg")?;
        let mut d = m.data.lock();
        match &mut d.kind {
            Kind::Plain(m) => f(m),
            Kind::Received(_) => Err(Failure::bad("msg is a received message, not one to send")),
        }
    })
}

/// Reads a text field: a NUL-terminated copy kept in the message under `key`.
fn text(msg: *mut CMessage, key: &str, read: impl FnOnce(&Kind) -> Vec<u8>) -> *const c_char {
    guard_value(std::ptr::null(), || {
        let m = registry::msg(msg, "msg")?;
        let mut d = m.data.lock();
        let mut value = read(&d.kind);
        value.push(0);
        let slot = d.texts.entry(key.to_string()).or_default();
        if **slot != *value {
            *slot = value.into_boxed_slice();
        }
        Ok(slot.as_ptr().cast())
    })
}

/// Reads a number field of either kind; `fallback` for a bad handle.
fn number<T>(msg: *mut CMessage, fallback: T, read: impl FnOnce(&Kind) -> T) -> T {
    guard_value(fallback, || {
        let m = registry::msg(msg, "msg")?;
        let d = m.data.lock();
        Ok(read(&d.kind))
    })
}

fn base(k: &Kind) -> &Message {
    match k {
        Kind::Plain(m) => m,
        Kind::Received(e) => e.message(),
    }
}

fn millis(t: SystemTime) -> c_longlong {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn keys_of(k: &Kind) -> Vec<u8> {
    base(k).keys().collect::<Vec<_>>().join(" ").into_bytes()
}

// --- CMessage.h ---

/// A message of `topic` with an empty body; NULL when `topic` is NULL or not UTF-8.
#[no_mangle]
pub extern "C" fn CreateMessage(topic: *const c_char) -> *mut CMessage {
    guard_value(std::ptr::null_mut(), || {
        let topic = c_str(topic, "topic")?;
        Ok(register(Msg::new(
            Kind::Plain(Message::new(topic, Vec::new())),
            false,
        )))
    })
}

/// Frees a message made by `CreateMessage`. A message lent to a callback or held by a
/// pull result, or one already destroyed, is `NULL_POINTER` (and left alone).
#[no_mangle]
pub extern "C" fn DestroyMessage(msg: *mut CMessage) -> c_int {
    guard(|| {
        let m = registry::msg(msg, "msg")?;
        if m.lent {
            return Err(Failure::bad(
                "msg is lent by the library (a received message); it is not yours to destroy",
            ));
        }
        registry::remove(msg.cast());
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SetMessageTopic(msg: *mut CMessage, topic: *const c_char) -> c_int {
    modify(msg, |m| {
        m.set_topic(c_str(topic, "topic")?);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SetMessageTags(msg: *mut CMessage, tags: *const c_char) -> c_int {
    modify(msg, |m| {
        m.set_tags(c_str(tags, "tags")?);
        Ok(())
    })
}

/// Sets the `KEYS` property (several keys separated by spaces).
#[no_mangle]
pub extern "C" fn SetMessageKeys(msg: *mut CMessage, keys: *const c_char) -> c_int {
    modify(msg, |m| {
        let keys = c_str(keys, "keys")?;
        m.set_keys(keys.split(' ').filter(|k| !k.is_empty()));
        Ok(())
    })
}

/// The body: the bytes of `body` up to its NUL.
#[no_mangle]
pub extern "C" fn SetMessageBody(msg: *mut CMessage, body: *const c_char) -> c_int {
    modify(msg, |m| {
        if body.is_null() {
            return Err(Failure::bad("body is NULL"));
        }
        // SAFETY: `body` is a NUL-terminated string valid for the call (the API's
        // contract), not NULL.
        let bytes = unsafe { std::ffi::CStr::from_ptr(body) }.to_bytes();
        m.set_body(bytes.to_vec());
        Ok(())
    })
}

/// The body: `len` bytes at `body` (any bytes); a negative `len` is `NULL_POINTER`.
#[no_mangle]
pub extern "C" fn SetByteMessageBody(msg: *mut CMessage, body: *const c_char, len: c_int) -> c_int {
    modify(msg, |m| {
        let len = usize::try_from(len)
            .map_err(|_| Failure::bad(format!("body length {len} is negative")))?;
        if body.is_null() && len > 0 {
            return Err(Failure::bad("body is NULL"));
        }
        let bytes = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller passes `len` readable bytes at `body` (the API's
            // contract); `body` is not NULL and `len` is within isize (it came from int).
            unsafe { std::slice::from_raw_parts(body.cast::<u8>(), len) }.to_vec()
        };
        m.set_body(bytes);
        Ok(())
    })
}

/// A property. `TAGS`, `KEYS` and `DELAY` set those fields; other names the broker or the
/// client reserve (`UNIQ_KEY`, `TRAN_MSG`, ...) are refused with `NULL_POINTER`, as are
/// blank names and values (Java's `putUserProperty` rules).
#[no_mangle]
pub extern "C" fn SetMessageProperty(
    msg: *mut CMessage,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    modify(msg, |m| {
        let key = c_str(key, "key")?;
        let value = c_str(value, "value")?;
        match key {
            "TAGS" => m.set_tags(value),
            "KEYS" => m.set_keys(value.split(' ').filter(|k| !k.is_empty())),
            "DELAY" => {
                let level = value
                    .parse::<u32>()
                    .map_err(|_| Failure::bad(format!("DELAY {value:?} is not a level")))?;
                m.set_delay_time_level(level);
            }
            _ => m
                .put_user_property(key, value)
                .map_err(|e| Failure::bad(e.to_string()))?,
        }
        Ok(())
    })
}

/// The delay level (1 = 1 s ... 18 = 2 h by the broker's default list; 0 = none).
#[no_mangle]
pub extern "C" fn SetDelayTimeLevel(msg: *mut CMessage, level: c_int) -> c_int {
    modify(msg, |m| {
        let level = u32::try_from(level)
            .map_err(|_| Failure::bad(format!("delay level {level} is negative")))?;
        m.set_delay_time_level(level);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn GetOriginMessageTopic(msg: *mut CMessage) -> *const c_char {
    GetMessageTopic(msg)
}

#[no_mangle]
pub extern "C" fn GetOriginMessageTags(msg: *mut CMessage) -> *const c_char {
    GetMessageTags(msg)
}

#[no_mangle]
pub extern "C" fn GetOriginMessageKeys(msg: *mut CMessage) -> *const c_char {
    GetMessageKeys(msg)
}

#[no_mangle]
pub extern "C" fn GetOriginMessageBody(msg: *mut CMessage) -> *const c_char {
    GetMessageBody(msg)
}

#[no_mangle]
pub extern "C" fn GetOriginMessageProperty(
    msg: *mut CMessage,
    key: *const c_char,
) -> *const c_char {
    GetMessageProperty(msg, key)
}

#[no_mangle]
pub extern "C" fn GetOriginDelayTimeLevel(msg: *mut CMessage) -> c_int {
    GetMessageDelayTimeLevel(msg)
}

// --- CMessageExt.h (the same type) ---

#[no_mangle]
pub extern "C" fn GetMessageTopic(msg: *mut CMessage) -> *const c_char {
    text(msg, "topic", |k| base(k).topic().as_bytes().to_vec())
}

#[no_mangle]
pub extern "C" fn GetMessageTags(msg: *mut CMessage) -> *const c_char {
    text(msg, "tags", |k| {
        base(k).tags().unwrap_or_default().as_bytes().to_vec()
    })
}

#[no_mangle]
pub extern "C" fn GetMessageKeys(msg: *mut CMessage) -> *const c_char {
    text(msg, "keys", keys_of)
}

/// The body up to its first NUL byte as C reads it (the original's `c_str()`); the
/// stored copy holds every byte.
#[no_mangle]
pub extern "C" fn GetMessageBody(msg: *mut CMessage) -> *const c_char {
    text(msg, "body", |k| base(k).body().to_vec())
}

#[no_mangle]
pub extern "C" fn GetMessageProperty(msg: *mut CMessage, key: *const c_char) -> *const c_char {
    let Ok(key) = c_str(key, "key").map(str::to_string) else {
        crate::set_error("key is NULL or not UTF-8");
        return std::ptr::null();
    };
    text(msg, &format!("property:{key}"), |k| {
        base(k)
            .property(&key)
            .unwrap_or_default()
            .as_bytes()
            .to_vec()
    })
}

/// The message id: of a received message its `UNIQ_KEY` (else the broker's offset id); of
/// a message to send its `UNIQ_KEY` once a send or a transaction set it, else "".
#[no_mangle]
pub extern "C" fn GetMessageId(msg: *mut CMessage) -> *const c_char {
    text(msg, "id", |k| match k {
        Kind::Received(e) => e.msg_id().as_bytes().to_vec(),
        Kind::Plain(m) => m
            .property("UNIQ_KEY")
            .unwrap_or_default()
            .as_bytes()
            .to_vec(),
    })
}

#[no_mangle]
pub extern "C" fn GetMessageDelayTimeLevel(msg: *mut CMessage) -> c_int {
    number(msg, 0, |k| {
        base(k)
            .delay_time_level()
            .map_or(0, |l| c_int::try_from(l).unwrap_or(c_int::MAX))
    })
}

/// The queue id of a received message; -1 for a message to send.
#[no_mangle]
pub extern "C" fn GetMessageQueueId(msg: *mut CMessage) -> c_int {
    number(msg, -1, |k| match k {
        Kind::Received(e) => e.queue_id(),
        Kind::Plain(_) => -1,
    })
}

#[no_mangle]
pub extern "C" fn GetMessageReconsumeTimes(msg: *mut CMessage) -> c_int {
    number(msg, 0, |k| match k {
        Kind::Received(e) => c_int::try_from(e.reconsume_times()).unwrap_or(c_int::MAX),
        Kind::Plain(_) => 0,
    })
}

#[no_mangle]
pub extern "C" fn GetMessageStoreSize(msg: *mut CMessage) -> c_int {
    number(msg, 0, |k| match k {
        Kind::Received(e) => c_int::try_from(e.store_size()).unwrap_or(c_int::MAX),
        Kind::Plain(_) => 0,
    })
}

/// Milliseconds since the epoch; 0 for a message to send.
#[no_mangle]
pub extern "C" fn GetMessageBornTimestamp(msg: *mut CMessage) -> c_longlong {
    number(msg, 0, |k| match k {
        Kind::Received(e) => millis(e.born_timestamp()),
        Kind::Plain(_) => 0,
    })
}

/// Milliseconds since the epoch; 0 for a message to send.
#[no_mangle]
pub extern "C" fn GetMessageStoreTimestamp(msg: *mut CMessage) -> c_longlong {
    number(msg, 0, |k| match k {
        Kind::Received(e) => millis(e.store_timestamp()),
        Kind::Plain(_) => 0,
    })
}

#[no_mangle]
pub extern "C" fn GetMessageQueueOffset(msg: *mut CMessage) -> c_longlong {
    number(msg, -1, |k| match k {
        Kind::Received(e) => e.queue_offset(),
        Kind::Plain(_) => -1,
    })
}

#[no_mangle]
pub extern "C" fn GetMessageCommitLogOffset(msg: *mut CMessage) -> c_longlong {
    number(msg, -1, |k| match k {
        Kind::Received(e) => e.commit_log_offset(),
        Kind::Plain(_) => -1,
    })
}

/// Always 0: rocketmq-blocking does not expose the prepared-transaction offset of a
/// received message (the broker sets it only on transaction checks, which this library
/// answers itself).
#[no_mangle]
pub extern "C" fn GetMessagePreparedTransactionOffset(msg: *mut CMessage) -> c_longlong {
    number(msg, 0, |_| 0)
}

// --- CBatchMessage.h ---

/// A batch: copies of the messages added, sent together by `SendBatchMessage`.
pub(crate) struct Batch {
    pub(crate) msgs: Mutex<Vec<Message>>,
}

#[no_mangle]
pub extern "C" fn CreateBatchMessage() -> *mut CBatchMessage {
    guard_value(std::ptr::null_mut(), || {
        let b = Arc::new(Batch {
            msgs: Mutex::new(Vec::new()),
        });
        let p = Arc::as_ptr(&b) as *mut CBatchMessage;
        registry::insert(p as usize, Obj::Batch(b));
        Ok(p)
    })
}

/// Adds a copy of `msg` (the caller still owns and destroys `msg`).
#[no_mangle]
pub extern "C" fn AddMessage(batch: *mut CBatchMessage, msg: *mut CMessage) -> c_int {
    guard(|| {
        let b = registry::batch(batch, "batchMsg")?;
        let m = registry::msg(msg, "msg")?;
        b.msgs.lock().push(m.message());
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn DestroyBatchMessage(batch: *mut CBatchMessage) -> c_int {
    guard(|| {
        registry::batch(batch, "batchMsg")?;
        registry::remove(batch.cast());
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status;
    use std::ffi::CStr;

    fn s(p: *const c_char) -> String {
        assert!(!p.is_null());
        // SAFETY: getters return NUL-terminated strings owned by a live message.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    #[test]
    fn message_fields_round_trip_through_the_getters_of_both_headers() {
        let m = CreateMessage(c"T".as_ptr());
        assert_eq!(SetMessageTags(m, c"TagA".as_ptr()), status::OK);
        assert_eq!(SetMessageKeys(m, c"k1 k2".as_ptr()), status::OK);
        assert_eq!(
            SetByteMessageBody(m, b"a\0b".as_ptr().cast(), 3),
            status::OK
        );
        assert_eq!(
            SetMessageProperty(m, c"p".as_ptr(), c"v".as_ptr()),
            status::OK
        );
        assert_eq!(SetDelayTimeLevel(m, 3), status::OK);
        assert_eq!(s(GetOriginMessageTopic(m)), "T");
        assert_eq!(s(GetMessageTags(m)), "TagA");
        assert_eq!(s(GetMessageKeys(m)), "k1 k2");
        assert_eq!(s(GetMessageBody(m)), "a");
        assert_eq!(s(GetMessageProperty(m, c"p".as_ptr())), "v");
        assert_eq!(s(GetMessageProperty(m, c"none".as_ptr())), "");
        assert_eq!(GetOriginDelayTimeLevel(m), 3);
        assert_eq!(GetMessageQueueId(m), -1);
        assert_eq!(
            SetMessageProperty(m, c"UNIQ_KEY".as_ptr(), c"x".as_ptr()),
            status::NULL_POINTER
        );
        assert_eq!(
            SetByteMessageBody(m, c"x".as_ptr(), -1),
            status::NULL_POINTER
        );
        assert_eq!(DestroyMessage(m), status::OK);
    }

    #[test]
    fn null_destroyed_and_mistyped_handles_are_errors_not_crashes() {
        assert!(CreateMessage(std::ptr::null()).is_null());
        assert_eq!(DestroyMessage(std::ptr::null_mut()), status::NULL_POINTER);
        let m = CreateMessage(c"T".as_ptr());
        assert_eq!(DestroyMessage(m), status::OK);
        assert_eq!(DestroyMessage(m), status::NULL_POINTER, "double destroy");
        assert!(GetMessageTopic(m).is_null(), "use after destroy");
        assert_eq!(SetMessageTags(m, c"t".as_ptr()), status::NULL_POINTER);
        let b = CreateBatchMessage();
        assert!(
            GetMessageTopic(b.cast()).is_null(),
            "a batch is not a message"
        );
        assert_eq!(AddMessage(b, std::ptr::null_mut()), status::NULL_POINTER);
        assert_eq!(DestroyBatchMessage(b), status::OK);
        assert_eq!(DestroyBatchMessage(b), status::NULL_POINTER);
        let lent = Lent::plain(Message::new("T", b"x".to_vec()));
        assert_eq!(DestroyMessage(lent.0), status::NULL_POINTER, "lent message");
        let p = lent.0;
        drop(lent);
        assert!(
            GetMessageBody(p).is_null(),
            "a lent message after its callback"
        );
    }
}
