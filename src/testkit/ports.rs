//! Choosing loopback ports for the JVMs.
//!
//! A broker binds `listenPort - 2` (fast/VIP server), `listenPort` and `listenPort + 1`
//! (HA, on the wildcard address), so all of a broker's ports are checked together.
//! Ports come from below Linux's default ephemeral range (32768..) so that outgoing
//! connections of this machine do not grab them between our check and the JVM's bind.

use std::collections::hash_map::RandomState;
use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::TestkitError;

const LOW: u16 = 20_000;
const HIGH: u16 = 32_000;

/// Ports handed out in this process and not yet released: two clusters started by
/// parallel tests must not pick the same free port before either JVM binds it.
static RESERVED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Offsets from `listenPort` of every port the process binds. A name server's second
/// port is its embedded controller's, reserved whether it runs one or not.
pub(crate) const NAMESRV_OFFSETS: &[i32] = &[0, 1];
pub(crate) const BROKER_OFFSETS: &[i32] = &[-2, 0, 1];

fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(nanos);
    h.finish()
}

/// All ports for a given base, or `None` when one falls outside the u16 range.
pub(crate) fn ports_of(base: u16, offsets: &[i32]) -> Option<Vec<u16>> {
    offsets
        .iter()
        .map(|o| u16::try_from(i32::from(base) + o).ok())
        .collect()
}

/// True when every port can be bound on the wildcard address right now (which also
/// fails when something listens on 127.0.0.1 with that port).
pub(crate) fn all_free(ports: &[u16]) -> bool {
    all_free_on("0.0.0.0", ports)
}

/// True when every port can be bound on `ip` right now.
fn all_free_on(ip: &str, ports: &[u16]) -> bool {
    let mut held = Vec::with_capacity(ports.len());
    for &p in ports {
        match TcpListener::bind((ip, p)) {
            Ok(l) => held.push(l),
            Err(_) => return false,
        }
    }
    true
}

/// Picks a base port whose whole group is free and not reserved in this process, and
/// reserves the group until [`release`].
pub(crate) fn pick(offsets: &[i32]) -> Result<u16, TestkitError> {
    for _ in 0..200 {
        let span = u64::from(HIGH - LOW);
        let base = LOW + u16::try_from(random_u64() % span).unwrap_or(0);
        let Some(ports) = ports_of(base, offsets) else {
            continue;
        };
        let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
        if ports.iter().any(|p| reserved.contains(p)) || !all_free(&ports) {
            continue;
        }
        reserved.extend(ports.iter().copied());
        return Ok(base);
    }
    Err(TestkitError::InvalidArgument(format!(
        "no free loopback port group found in {LOW}..{HIGH} after 200 tries"
    )))
}

/// Returns a group reserved by [`pick`] (after its process is gone for good).
pub(crate) fn release(base: u16, offsets: &[i32]) {
    if let Some(ports) = ports_of(base, offsets) {
        let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
        for p in ports {
            reserved.remove(&p);
        }
    }
}

/// Waits until every port can be bound again on `ip` (a stopped JVM's sockets are gone).
pub(crate) fn wait_free_on(ip: &str, ports: &[u16], timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if all_free_on(ip, ports) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
