//! `rmq_producer_free` against async-send callbacks still to come, without a broker:
//! the wrapper `async_callback` builds is what the crate calls when a send ends.
use super::send_async::{async_callback, request_callback};
use super::*;
use crate::message::rmq_message_ext;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// What the C side of a test sees: its callbacks count here, and `freed` is set
/// right after `rmq_producer_free` of `victim` returned (C would free userdata then).
#[derive(Default)]
pub(crate) struct Probe {
    pub(crate) victim: AtomicPtr<rmq_producer>,
    pub(crate) freed: AtomicBool,
    pub(crate) calls: AtomicUsize,
    pub(crate) calls_after_free: AtomicUsize,
    entered: AtomicBool,
    pub(crate) release: AtomicBool,
}

pub(crate) fn probe<'a>(ud: *mut c_void) -> &'a Probe {
    // SAFETY: every test passes a `Probe` that outlives the callbacks it is given to.
    unsafe { &*(ud as *const Probe) }
}

/// A send callback of the victim: counts, and counts again if it runs after the free.
pub(crate) extern "C" fn counting(ud: *mut c_void, _r: rmq_result, _s: *const rmq_send_result) {
    let p = probe(ud);
    p.entered.store(true, Ordering::SeqCst);
    while !p.release.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }
    p.calls.fetch_add(1, Ordering::SeqCst);
    if p.freed.load(Ordering::SeqCst) {
        p.calls_after_free.fetch_add(1, Ordering::SeqCst);
    }
}

/// A started producer that needs no broker: nothing is sent.
pub(crate) fn producer(send_timeout_ms: u64) -> *mut rmq_producer {
    let (mut b, mut p) = (null_mut(), null_mut());
    let group = format!("ffi_free_{}", std::process::id());
    assert_eq!(
        rmq_producer_builder_new(group.as_ptr().cast(), group.len(), &mut b),
        rmq_result::RMQ_OK
    );
    let addr = "127.0.0.1:1";
    let mut o = null_mut();
    assert_eq!(
        crate::options::rmq_client_options_new(&mut o),
        rmq_result::RMQ_OK
    );
    assert_eq!(
        crate::options::rmq_client_options_namesrv_addr(o, addr.as_ptr().cast(), addr.len()),
        rmq_result::RMQ_OK
    );
    assert_eq!(
        rmq_producer_builder_client_options(b, o),
        rmq_result::RMQ_OK
    );
    crate::options::rmq_client_options_free(o);
    assert_eq!(
        rmq_producer_builder_send_timeout_ms(b, send_timeout_ms),
        rmq_result::RMQ_OK
    );
    assert_eq!(rmq_producer_builder_start(b, &mut p), rmq_result::RMQ_OK);
    p
}

pub(crate) type Callback =
    Box<dyn FnOnce(rocketmq_blocking::Result<rocketmq_blocking::SendResult>) + Send>;

/// An async send's callback as the crate holds it: admitted at the producer's gate.
pub(crate) fn pending(p: *mut rmq_producer, cb: rmq_send_callback, probe: &Probe) -> Callback {
    let p = handle(p, "producer").expect("live producer");
    let ud = probe as *const Probe as *mut c_void;
    match async_callback(p, cb, ud) {
        Ok(f) => Box::new(f),
        Err(code) => panic!("not admitted: {code:?}"),
    }
}

pub(crate) fn failed() -> rocketmq_blocking::Result<rocketmq_blocking::SendResult> {
    Err(rocketmq_blocking::Error::new(
        rocketmq_blocking::ErrorKind::Timeout,
        "test",
    ))
}

#[test]
fn after_the_free_bound_a_running_callback_is_waited_for_and_a_later_one_never_reaches_c() {
    let probe = Arc::new(Probe::default());
    let p = producer(100);
    let running = pending(p, Some(counting), &probe);
    let later = pending(p, Some(counting), &probe);
    let t = std::thread::spawn(move || running(failed()));
    while !probe.entered.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let pr = probe.clone();
    let pp = p as usize;
    let freer = std::thread::spawn(move || {
        rmq_producer_free(pp as *mut rmq_producer);
        pr.freed.store(true, Ordering::SeqCst);
    });
    // Past the bound (send timeout 100 ms + 10 s), with the first callback still in C:
    // nothing to await here but the time the bound takes.
    std::thread::sleep(Duration::from_millis(10_600));
    assert!(
        !probe.freed.load(Ordering::SeqCst),
        "rmq_producer_free returned while a callback of the producer was running"
    );
    probe.release.store(true, Ordering::SeqCst);
    t.join().unwrap();
    freer.join().unwrap();
    assert!(probe.freed.load(Ordering::SeqCst));
    // A send whose callback comes after the free: the crate still calls the wrapper,
    // which must not call C with the userdata C has freed by now.
    later(failed());
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        probe.calls_after_free.load(Ordering::SeqCst),
        0,
        "a callback reached C after rmq_producer_free returned"
    );
}

extern "C" fn count_request(ud: *mut c_void, r: rmq_result, reply: *const rmq_message_ext) {
    let p = probe(ud);
    assert_eq!(r == rmq_result::RMQ_OK, !reply.is_null());
    p.calls.fetch_add(1, Ordering::SeqCst);
    if p.freed.load(Ordering::SeqCst) {
        p.calls_after_free.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn an_async_request_needs_a_producer_a_message_and_a_callback() {
    let probe = Probe::default();
    let ud = &probe as *const Probe as *mut c_void;
    let p = producer(100);
    let mut m = null_mut();
    assert_eq!(
        crate::message::rmq_message_new(c"T".as_ptr(), 1, c"b".as_ptr().cast(), 1, &mut m),
        rmq_result::RMQ_OK
    );
    assert_eq!(
        rmq_producer_request_async(std::ptr::null(), m, 1000, Some(count_request), ud),
        rmq_result::RMQ_NULL_PARAMETER
    );
    assert_eq!(
        rmq_producer_request_async(p, std::ptr::null(), 1000, Some(count_request), ud),
        rmq_result::RMQ_NULL_PARAMETER
    );
    assert_eq!(
        rmq_producer_request_async(p, m, 1000, None, ud),
        rmq_result::RMQ_NULL_PARAMETER
    );
    crate::message::rmq_message_free(m);
    rmq_producer_free(p);
    assert_eq!(probe.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn an_async_request_ending_after_the_free_never_reaches_c() {
    let probe = Probe::default();
    let ud = &probe as *const Probe as *mut c_void;
    let p = producer(100);
    let live = handle(p, "producer").expect("live producer");
    let Ok(done) = request_callback(live, Some(count_request), ud) else {
        panic!("not admitted");
    };
    let Ok(late) = request_callback(live, Some(count_request), ud) else {
        panic!("not admitted");
    };
    done(Err(rocketmq_blocking::Error::new(
        rocketmq_blocking::ErrorKind::Timeout,
        "test",
    )));
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1);
    // `late` holds the gate open: the free waits its bound (100 ms + 10 s), then
    // gives up on it.
    rmq_producer_free(p);
    probe.freed.store(true, Ordering::SeqCst);
    late(Err(rocketmq_blocking::Error::new(
        rocketmq_blocking::ErrorKind::Timeout,
        "test",
    )));
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1);
    assert_eq!(probe.calls_after_free.load(Ordering::SeqCst), 0);
}
extern "C" fn before_tag(ud: *mut c_void, _m: *const rmq_message, ctx: *mut rmq_send_hook_context) {
    probe(ud).calls.fetch_add(1, Ordering::SeqCst);
    let (k, v) = ("traceparent", "00-1-2-01");
    let r = rmq_send_hook_context_put_property(
        ctx,
        k.as_ptr().cast(),
        k.len(),
        v.as_ptr().cast(),
        v.len(),
    );
    assert_eq!(r, rmq_result::RMQ_OK);
    let reserved = "UNIQ_KEY";
    let r = rmq_send_hook_context_put_property(
        ctx,
        reserved.as_ptr().cast(),
        reserved.len(),
        v.as_ptr().cast(),
        v.len(),
    );
    assert_eq!(r, rmq_result::RMQ_INVALID_ARGUMENT);
}

extern "C" fn after_failed(
    ud: *mut c_void,
    m: *const rmq_message,
    r: rmq_result,
    sr: *const rmq_send_result,
) {
    let p = probe(ud);
    assert!(sr.is_null());
    let m = handle(m, "message").expect("a message view");
    if r != rmq_result::RMQ_OK && m.inner.get().property("traceparent") == Some("00-1-2-01") {
        p.calls_after_free.fetch_add(1, Ordering::SeqCst); // here: "failed, traced"
    }
}

/// A send hook and the stats JSON on a producer whose name server is dead: the hook
/// runs before and after the failed send, and the JSON counts the failure.
#[test]
fn a_failed_send_runs_the_c_send_hook_and_counts_in_the_stats_json() {
    let probe = Probe::default();
    let ud = &probe as *const Probe as *mut c_void;
    let (mut b, mut p) = (null_mut(), null_mut());
    let (group, addr) = ("ffi_stats", "127.0.0.1:1");
    assert_eq!(
        rmq_producer_builder_new(group.as_ptr().cast(), group.len(), &mut b),
        rmq_result::RMQ_OK
    );
    let mut o = null_mut();
    assert_eq!(
        crate::options::rmq_client_options_new(&mut o),
        rmq_result::RMQ_OK
    );
    assert_eq!(
        crate::options::rmq_client_options_namesrv_addr(o, addr.as_ptr().cast(), addr.len()),
        rmq_result::RMQ_OK
    );
    assert_eq!(
        rmq_producer_builder_client_options(b, o),
        rmq_result::RMQ_OK
    );
    crate::options::rmq_client_options_free(o);
    assert_eq!(
        rmq_producer_builder_send_timeout_ms(b, 300),
        rmq_result::RMQ_OK
    );
    assert_eq!(rmq_producer_builder_retries(b, 0), rmq_result::RMQ_OK);
    assert_eq!(
        rmq_producer_builder_send_hook(b, None, None, ud),
        rmq_result::RMQ_NULL_PARAMETER
    );
    assert_eq!(
        rmq_producer_builder_send_hook(b, Some(before_tag), Some(after_failed), ud),
        rmq_result::RMQ_OK
    );
    assert_eq!(rmq_producer_builder_start(b, &mut p), rmq_result::RMQ_OK);
    let mut m = null_mut();
    assert_eq!(
        crate::message::rmq_message_new(c"StatsT".as_ptr(), 6, c"b".as_ptr().cast(), 1, &mut m),
        rmq_result::RMQ_OK
    );
    assert_ne!(rmq_producer_send(p, m, null_mut()), rmq_result::RMQ_OK);
    assert_eq!(
        probe.calls.load(Ordering::SeqCst),
        1,
        "before_send ran once"
    );
    assert_eq!(
        probe.calls_after_free.load(Ordering::SeqCst),
        1,
        "after_send saw the failure and the property"
    );

    let (mut small, mut need) = ([0 as c_char; 4], 0usize);
    assert_eq!(
        rmq_producer_stats_json(p, small.as_mut_ptr(), small.len(), &mut need),
        rmq_result::RMQ_BUFFER_TOO_SMALL
    );
    let mut buf = vec![0 as c_char; need + 1];
    let mut written = 0usize;
    assert_eq!(
        rmq_producer_stats_json(p, buf.as_mut_ptr(), buf.len(), &mut written),
        rmq_result::RMQ_OK
    );
    assert_eq!(written, need);
    let bytes: Vec<u8> = buf[..written].iter().map(|c| *c as u8).collect();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
    let t = &v["topics"]["StatsT"];
    assert_eq!(
        (t["messages_sent"].as_u64(), t["failed"].as_u64()),
        (Some(0), Some(1)),
        "{v}"
    );
    assert_eq!(
        t["failed_by_kind"]
            .as_object()
            .map(|o| o.values().filter_map(|n| n.as_u64()).sum::<u64>()),
        Some(1),
        "{v}"
    );
    assert_eq!(v["group"], "ffi_stats");
    assert_eq!(
        rmq_producer_stats_json(std::ptr::null(), buf.as_mut_ptr(), buf.len(), &mut written),
        rmq_result::RMQ_NULL_PARAMETER
    );
    crate::message::rmq_message_free(m);
    rmq_producer_free(p);
}
