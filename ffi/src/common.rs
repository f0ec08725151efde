//! What the builders share: TLS settings, trace, the slot their `_start` takes the Rust
//! builder from; and the gate that keeps C callbacks from running after their client is
//! freed. The client options are in `options.rs`.

use std::cell::RefCell;
use std::ffi::c_char;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use rocketmq_blocking::{LitePullConsumerBuilder, ProducerBuilder, PushConsumerBuilder, TlsConfig};

use crate::error::{fail, guard, guard_void, rmq_result};
use crate::util::{handle_mut, out_handle, str_arg, take_handle};

/// TLS settings for client options (`rmq_client_options_tls`), copied into them.
/// Not thread-safe; free with `rmq_tls_config_free`.
pub struct rmq_tls_config {
    pub(crate) inner: TlsConfig,
}

/// TLS that verifies the server against the system's roots (and, with
/// `rmq_tls_config_ca_file`, a CA file).
#[no_mangle]
pub extern "C" fn rmq_tls_config_new(config_out: *mut *mut rmq_tls_config) -> rmq_result {
    guard(|| {
        out_handle(
            config_out,
            rmq_tls_config {
                inner: TlsConfig::new(),
            },
        )
    })
}

/// DANGER: TLS that accepts ANY server certificate (Java's default client,
/// `tls.test.mode`): it encrypts but does not authenticate the server, so anyone on the
/// path can pose as it. For tests only (the Rust
/// `TlsConfig::danger_accept_any_server_certificate`).
#[no_mangle]
pub extern "C" fn rmq_tls_config_new_danger_accept_any_server_certificate(
    config_out: *mut *mut rmq_tls_config,
) -> rmq_result {
    guard(|| {
        out_handle(
            config_out,
            rmq_tls_config {
                inner: TlsConfig::danger_accept_any_server_certificate(),
            },
        )
    })
}

fn update_tls(
    c: *mut rmq_tls_config,
    f: impl FnOnce(TlsConfig) -> Result<TlsConfig, rmq_result>,
) -> rmq_result {
    guard(|| {
        let c = handle_mut(c, "tls config")?;
        let t = std::mem::take(&mut c.inner);
        c.inner = f(t)?;
        Ok(())
    })
}

/// Trusts the CA certificates of a PEM file (path as UTF-8).
#[no_mangle]
pub extern "C" fn rmq_tls_config_ca_file(
    c: *mut rmq_tls_config,
    path: *const c_char,
    path_len: usize,
) -> rmq_result {
    update_tls(c, |t| Ok(t.ca_file(str_arg(path, path_len, "path")?)))
}

/// Presents a client certificate chain and its private key (PEM files).
#[no_mangle]
pub extern "C" fn rmq_tls_config_client_cert(
    c: *mut rmq_tls_config,
    cert_path: *const c_char,
    cert_path_len: usize,
    key_path: *const c_char,
    key_path_len: usize,
) -> rmq_result {
    update_tls(c, |t| {
        Ok(t.client_cert(
            str_arg(cert_path, cert_path_len, "cert_path")?,
            str_arg(key_path, key_path_len, "key_path")?,
        ))
    })
}

/// Whether the server's certificate must name the host connected to (default true).
#[no_mangle]
pub extern "C" fn rmq_tls_config_verify_server_name(
    c: *mut rmq_tls_config,
    verify: bool,
) -> rmq_result {
    update_tls(c, |t| Ok(t.verify_server_name(verify)))
}

/// Frees TLS settings. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_tls_config_free(c: *mut rmq_tls_config) {
    guard_void(|| drop(take_handle(c)));
}

/// Builders of clients that trace (Java `enableMsgTrace`).
pub(crate) trait TracedBuilder: Sized {
    fn trace(self, topic: Option<String>) -> Self;
}

macro_rules! traced_builder {
    ($($t:ty),*) => {$(
        impl TracedBuilder for $t {
            fn trace(self, topic: Option<String>) -> Self {
                match topic {
                    Some(t) => self.trace_topic(t),
                    None => self.enable_msg_trace(true),
                }
            }
        }
    )*};
}
traced_builder!(
    ProducerBuilder,
    PushConsumerBuilder,
    LitePullConsumerBuilder
);

/// Turns message trace on: to `topic` (pointer + length) when it is not NULL, else to
/// `RMQ_SYS_TRACE_TOPIC`.
pub(crate) fn set_trace<H: HasSlot<B: TracedBuilder>>(
    b: *mut H,
    topic: *const c_char,
    topic_len: usize,
) -> rmq_result {
    guard(|| {
        let topic = if topic.is_null() {
            None
        } else {
            Some(str_arg(topic, topic_len, "trace topic")?.to_string())
        };
        handle_mut(b, "builder")?.slot().update(|b| b.trace(topic))
    })
}

/// A builder handle's slot: the Rust builder, taken by `_start`.
pub(crate) struct Slot<B>(pub(crate) Option<B>);

impl<B> Slot<B> {
    /// Applies `f`; callers parse their arguments first, so a bad argument leaves the
    /// builder as it was.
    pub(crate) fn update(&mut self, f: impl FnOnce(B) -> B) -> Result<(), rmq_result> {
        let b = self.take()?;
        self.0 = Some(f(b));
        Ok(())
    }

    pub(crate) fn take(&mut self) -> Result<B, rmq_result> {
        self.0
            .take()
            .ok_or_else(|| fail(rmq_result::RMQ_STATE, "the builder was already used"))
    }
}

/// Builder handles expose their slot so the shared setters work on all of them.
pub(crate) trait HasSlot {
    type B;
    fn slot(&mut self) -> &mut Slot<Self::B>;
}

/// Sets an option that cannot be wrong.
pub(crate) fn set<H: HasSlot>(b: *mut H, f: impl FnOnce(H::B) -> H::B) -> rmq_result {
    guard(|| handle_mut(b, "builder")?.slot().update(f))
}

/// Parses the arguments, then sets the option: a bad argument is an error code and
/// leaves the builder as it was.
pub(crate) fn configure<H: HasSlot, A>(
    b: *mut H,
    args: impl FnOnce() -> Result<A, rmq_result>,
    f: impl FnOnce(H::B, A) -> H::B,
) -> rmq_result {
    guard(|| {
        let h = handle_mut(b, "builder")?;
        let a = args()?;
        h.slot().update(|b| f(b, a))
    })
}

thread_local! {
    /// The gates whose callbacks this thread is running now, innermost last: a `_free`
    /// called from inside a callback of its own client does not wait for itself, and a
    /// `_free` of any other client waits as from any thread.
    static INSIDE: RefCell<Vec<*const Gate>> = const { RefCell::new(Vec::new()) };
}

/// Counts the C callbacks of one client that are running or still to come, and closes
/// the door on new ones. `_free` closes it and waits, so that after `_free` returns no
/// callback runs with the caller's userdata, nor ever will.
#[derive(Default)]
pub(crate) struct Gate {
    state: Mutex<GateState>,
    idle: Condvar,
}

#[derive(Default)]
struct GateState {
    /// No new pass is admitted.
    closed: bool,
    /// Passes that exist (callbacks running or still to come).
    admitted: usize,
    /// Passes inside C now.
    running: usize,
    /// `_free` stopped waiting for passes that had not called C yet: they never will.
    abandoned: bool,
}

/// One admitted callback (or one pending async send); dropping it leaves the gate.
pub(crate) struct Pass(Arc<Gate>);

impl Gate {
    /// Admits one more unless closed.
    pub(crate) fn enter(gate: &Arc<Gate>) -> Option<Pass> {
        let mut s = gate.state.lock();
        if s.closed {
            return None;
        }
        s.admitted += 1;
        Some(Pass(gate.clone()))
    }

    /// Closes the gate and waits until every admitted pass has left. From inside a
    /// callback of this gate it does not wait (it would wait for itself); inside a
    /// callback of another gate it waits like anywhere else. With a `bound`, passes that
    /// have not called C when it expires never will, and this still waits for those
    /// inside C: it never returns while C runs with the userdata.
    pub(crate) fn close_and_wait(&self, bound: Option<Duration>) {
        let mut s = self.state.lock();
        s.closed = true;
        let me: *const Gate = self;
        if INSIDE
            .try_with(|v| v.borrow().contains(&me))
            .unwrap_or(false)
        {
            return;
        }
        let deadline = bound.map(|b| Instant::now() + b);
        while s.admitted > 0 {
            match deadline {
                Some(d) if Instant::now() >= d => {
                    log::warn!(
                        "{} C callbacks still pending when the client was freed: those not \
                         yet started will not be called",
                        s.admitted - s.running
                    );
                    s.abandoned = true;
                    while s.running > 0 {
                        self.idle.wait(&mut s);
                    }
                    return;
                }
                Some(d) => {
                    self.idle.wait_until(&mut s, d);
                }
                None => self.idle.wait(&mut s),
            }
        }
    }
}

impl Pass {
    /// Runs `f`, the call into C, as a callback of this pass's gate; `None`, without
    /// running it, once `_free` has stopped waiting for this pass (its userdata may be
    /// freed).
    pub(crate) fn call<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let gate: &Gate = &self.0;
        {
            let mut s = gate.state.lock();
            if s.abandoned {
                return None;
            }
            s.running += 1;
        }
        struct Leave<'a>(&'a Gate);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                let me: *const Gate = self.0;
                // `try_with`: a drop must not panic, even in thread-local teardown.
                let _ = INSIDE.try_with(|v| {
                    let mut v = v.borrow_mut();
                    if let Some(i) = v.iter().rposition(|&g| g == me) {
                        v.remove(i);
                    }
                });
                let mut s = self.0.state.lock();
                s.running -= 1;
                if s.running == 0 {
                    self.0.idle.notify_all();
                }
            }
        }
        let _leave = Leave(gate);
        let _ = INSIDE.try_with(|v| v.borrow_mut().push(gate));
        Some(f())
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut s = self.0.state.lock();
        s.admitted -= 1;
        if s.admitted == 0 {
            self.0.idle.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn closing_the_gate_waits_for_passes_in_flight_and_refuses_new_ones() {
        let gate = Arc::new(Gate::default());
        let pass = Gate::enter(&gate).expect("open gate admits");
        let released = Arc::new(AtomicBool::new(false));
        let r = released.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            r.store(true, Ordering::SeqCst);
            drop(pass);
        });
        gate.close_and_wait(None);
        assert!(
            released.load(Ordering::SeqCst),
            "returned before the pass left"
        );
        assert!(
            Gate::enter(&gate).is_none(),
            "a closed gate admitted a call"
        );
        t.join().unwrap();
    }

    #[test]
    fn closing_from_inside_a_callback_does_not_wait_for_itself() {
        let gate = Arc::new(Gate::default());
        let pass = Gate::enter(&gate).unwrap();
        // Would block forever if it waited for its own pass.
        assert_eq!(pass.call(|| gate.close_and_wait(None)), Some(()));
        assert!(Gate::enter(&gate).is_none());
    }

    #[test]
    fn closing_inside_another_gates_callback_still_waits_for_this_gates_passes() {
        let (other, gate) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
        let in_other = Gate::enter(&other).expect("open gate admits");
        let pass = Gate::enter(&gate).expect("open gate admits");
        let released = Arc::new(AtomicBool::new(false));
        let r = released.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            r.store(true, Ordering::SeqCst);
            drop(pass);
        });
        // A listener of one client freeing another client.
        in_other.call(|| gate.close_and_wait(None));
        assert!(
            released.load(Ordering::SeqCst),
            "returned before the other client's callback left"
        );
        t.join().unwrap();
    }

    #[test]
    fn a_bounded_wait_stops_waiting_for_a_pass_that_has_not_called_and_it_never_will() {
        let gate = Arc::new(Gate::default());
        let pass = Gate::enter(&gate).unwrap();
        let start = Instant::now();
        gate.close_and_wait(Some(Duration::from_millis(200)));
        assert!(start.elapsed() >= Duration::from_millis(200));
        assert_eq!(pass.call(|| "called C"), None);
    }

    #[test]
    fn a_builder_used_once_reports_state_not_a_crash() {
        let mut slot = Slot(Some(1u32));
        assert_eq!(slot.take(), Ok(1));
        assert_eq!(slot.take(), Err(rmq_result::RMQ_STATE));
        assert_eq!(slot.update(|b| b + 1), Err(rmq_result::RMQ_STATE));
    }
}
