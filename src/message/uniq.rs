//! The client-side message id, property `UNIQ_KEY` (Java `MessageClientIDSetter`).
//!
//! Layout, as uppercase hex: client IP (4 or 16 bytes), pid as i16, 4 random bytes fixed
//! per process (Java: the class loader's hash code), milliseconds since the start of the
//! current month as 32 bits, and a wrapping 16-bit counter: 32 characters with an IPv4
//! address, 56 with IPv6. Everything before the time is fixed per process and computed
//! once, so making an id costs a clock read and an atomic increment; a send writes it from
//! the stack into its property string ([`create_uniq_id`] makes a `String` of it).
//!
//! Three deliberate differences from Java: the month starts in UTC, not local time (std
//! has no time zones; Java readers use the field only for [`nearly_time_from_id`]); the
//! client IP comes from [`set_client_ip`] because std cannot list network interfaces; and
//! [`nearly_time_from_id`] reads an id made in the current millisecond as of this month
//! (Java's `>=` puts it a month back).

use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use super::codec::{parse_hex, push_hex, write_hex};
use super::{property, Message};
use crate::util;

const DAY_MS: i64 = 86_400_000;

/// Hex of IP, pid and the per-process random bytes.
static PREFIX: OnceLock<String> = OnceLock::new();
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Fixes the IP written into every id of this process; call it before the first id.
///
/// Returns false (and changes nothing) when the prefix is already fixed, by an earlier
/// call or by an id made before any call, which uses Java's fallback: the low 4 bytes of
/// the current time in ms. [`choose_client_ip`] picks the address as Java does.
pub fn set_client_ip(ip: IpAddr) -> bool {
    PREFIX.set(build_prefix(ip_bytes(ip).as_slice())).is_ok()
}

/// Picks the address Java's `UtilAll.getIP()` would from addresses in interface order:
/// the first IPv4 address outside 10/8, 172.16/12 and 192.168/16 (loopback included) or
/// the first IPv6 address that is not unspecified, link-local, loopback or site-local,
/// whichever comes first; else the first private IPv4 address.
pub fn choose_client_ip(candidates: impl IntoIterator<Item = IpAddr>) -> Option<IpAddr> {
    let mut private = None;
    for ip in candidates {
        match ip {
            IpAddr::V4(v4) => {
                let [a, b, ..] = v4.octets();
                let internal =
                    a == 10 || (a == 172 && (16..=31).contains(&b)) || (a == 192 && b == 168);
                if !internal {
                    return Some(ip);
                }
                private.get_or_insert(ip);
            }
            IpAddr::V6(v6) => {
                if !is_internal_v6(&v6) {
                    return Some(ip);
                }
            }
        }
    }
    private
}

/// Java `isAnyLocalAddress || isLinkLocalAddress || isLoopbackAddress || isSiteLocalAddress`.
fn is_internal_v6(ip: &Ipv6Addr) -> bool {
    let top10 = ip.segments()[0] & 0xFFC0;
    ip.is_unspecified() || ip.is_loopback() || top10 == 0xFE80 || top10 == 0xFEC0
}

/// A new id.
pub fn create_uniq_id() -> String {
    new_uniq_id(util::now_millis()).to_string()
}

/// A new id made at `now_ms` (Unix milliseconds, which the caller read for the send's
/// other uses), made on the stack: a send puts it into its property string and its
/// result without a string of its own.
pub(crate) fn new_uniq_id(now_ms: i64) -> UniqId {
    let prefix = PREFIX.get_or_init(|| build_prefix(&fake_ip(now_ms)));
    let counter = COUNTER.fetch_add(1, Ordering::Relaxed);
    format_id(prefix, now_ms, counter)
}

/// The longest id: an IPv6 address, pid, random bytes, time and counter, in hex.
const ID_MAX: usize = 2 * (16 + 2 + 4 + 4 + 2);

/// An id held inline (32 or 56 uppercase hex characters).
#[derive(Clone, Copy)]
pub(crate) struct UniqId {
    len: u8,
    text: [u8; ID_MAX],
}

impl std::ops::Deref for UniqId {
    type Target = str;

    fn deref(&self) -> &str {
        // Only ASCII hex digits are ever written, so this never falls back.
        std::str::from_utf8(&self.text[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Debug for UniqId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

/// Sets `UNIQ_KEY` unless the message has one (Java `setUniqID`); returns the id.
pub fn set_uniq_id(message: &mut Message) -> &str {
    if message.property(property::UNIQ_KEY).is_none() {
        message.put_property(property::UNIQ_KEY, create_uniq_id());
    }
    message.property(property::UNIQ_KEY).unwrap_or_default()
}

/// When an id was made, to within the month (Java `getNearlyTimeFromID`), in ms since the
/// epoch; `None` if `id` is not a 32- or 56-character hex id. The time field is read as
/// an offset into the current month, or into the previous one when that would lie in the
/// future, so ids older than a month come out wrong, as in Java.
pub fn nearly_time_from_id(id: &str) -> Option<i64> {
    nearly_time_at(id, util::now_millis())
}

fn nearly_time_at(id: &str, now: i64) -> Option<i64> {
    if id.len() != 32 && id.len() != 56 {
        return None;
    }
    let mut bytes = Vec::with_capacity(28);
    parse_hex(id, &mut bytes)?;
    let at = if bytes.len() == 28 { 16 } else { 4 } + 2 + 4;
    let span = bytes.get(at..at + 4)?;
    let span = i64::from(u32::from_be_bytes([span[0], span[1], span[2], span[3]]));
    let mut start = month_start(now);
    // Only a time after `now` is in the future: an id read in the millisecond it was made
    // is of this month.
    if start + span > now {
        start = previous_month_start(start);
    }
    Some(start + span)
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

/// Java `createFakeIP`: bytes 4..8 of the big-endian time in ms.
fn fake_ip(now: i64) -> [u8; 4] {
    let b = now.to_be_bytes();
    [b[4], b[5], b[6], b[7]]
}

fn build_prefix(ip: &[u8]) -> String {
    let mut bytes = ip.to_vec();
    // Java writes `(short) pid`: the low 16 bits.
    bytes.extend_from_slice(&(std::process::id() as u16).to_be_bytes());
    // Stands in for the class loader's identity hash: random, fixed for the process.
    bytes.extend_from_slice(&(util::random_u64() as u32).to_be_bytes());
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, &bytes);
    s
}

fn format_id(prefix: &str, now: i64, counter: u32) -> UniqId {
    let mut id = UniqId {
        len: 0,
        text: [0; ID_MAX],
    };
    // A prefix is 20 or 44 characters (an IPv4 or IPv6 address): it always fits.
    let n = prefix.len().min(ID_MAX - 12);
    id.text[..n].copy_from_slice(&prefix.as_bytes()[..n]);
    // Java casts the span to int; past 24.8 days it wraps, and readers take the 32 bits
    // as unsigned, so write the low 32 bits.
    let span = ((now - month_start_cached(now)) as u32).to_be_bytes();
    let count = (counter as u16).to_be_bytes();
    write_hex(&mut id.text[n..], span.iter().chain(&count));
    id.len = (n + 12) as u8;
    id
}

/// [`month_start`], computed once a month per thread (Java keeps the month's start and
/// the next one's, too).
fn month_start_cached(ms: i64) -> i64 {
    thread_local! {
        /// The start of the month last asked for, and of the month after it.
        static MONTH: std::cell::Cell<(i64, i64)> = const { std::cell::Cell::new((0, 0)) };
    }
    MONTH.with(|month| {
        let (start, next) = month.get();
        if (start..next).contains(&ms) {
            return start;
        }
        let start = month_start(ms);
        let (y, m, _) = civil_from_days(start.div_euclid(DAY_MS));
        let next = if m == 12 {
            days_from_civil(y + 1, 1, 1)
        } else {
            days_from_civil(y, m + 1, 1)
        } * DAY_MS;
        month.set((start, next));
        start
    })
}

/// Start of the UTC month holding `ms`, in ms since the epoch.
fn month_start(ms: i64) -> i64 {
    let days = ms.div_euclid(DAY_MS);
    let (_, _, day) = civil_from_days(days);
    (days - i64::from(day - 1)) * DAY_MS
}

fn previous_month_start(month_start_ms: i64) -> i64 {
    let (y, m, _) = civil_from_days(month_start_ms.div_euclid(DAY_MS));
    let (y, m) = if m == 1 { (y - 1, 12) } else { (y, m - 1) };
    days_from_civil(y, m, 1) * DAY_MS
}

/// Days since 1970-01-01 to (year, month 1..=12, day 1..=31), proleptic Gregorian
/// (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The inverse of [`civil_from_days`].
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ms(y: i64, m: u32, d: u32, h: i64) -> i64 {
        days_from_civil(y, m, d) * DAY_MS + h * 3_600_000
    }

    #[test]
    fn calendar_round_trips_and_knows_month_starts() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        let check = |now: i64, start: i64| {
            assert_eq!(month_start(now), start, "{now}");
            assert_eq!(month_start_cached(now), start, "{now} (cached)");
        };
        check(ms(2024, 3, 31, 23), ms(2024, 3, 1, 0));
        check(ms(2024, 3, 1, 0), ms(2024, 3, 1, 0));
        check(ms(2024, 3, 1, 0) - 1, ms(2024, 2, 1, 0));
        check(-1, ms(1969, 12, 1, 0));
        // The cached month ends where the next begins, December's too.
        check(ms(2023, 12, 31, 23), ms(2023, 12, 1, 0));
        check(ms(2024, 1, 1, 0), ms(2024, 1, 1, 0));
        check(ms(2024, 1, 1, 0) - 1, ms(2023, 12, 1, 0));
        assert_eq!(previous_month_start(ms(2024, 1, 1, 0)), ms(2023, 12, 1, 0));
        assert_eq!(previous_month_start(ms(2024, 3, 1, 0)), ms(2024, 2, 1, 0));
    }

    #[test]
    fn id_layout_is_ip_pid_random_time_counter() {
        let prefix = build_prefix(&[10, 2, 223, 165]);
        assert_eq!(prefix.len(), 20);
        assert!(prefix.starts_with("0A02DFA5"));
        let pid = format!("{:04X}", std::process::id() as u16);
        assert_eq!(&prefix[8..12], pid);

        let now = ms(2024, 3, 2, 1) + 5; // 1 day, 1 hour and 5 ms into March
        let id = format_id(&prefix, now, 0x1_0203);
        assert_eq!(id.len(), 32);
        assert_eq!(&id[..20], prefix);
        assert_eq!(&id[20..28], format!("{:08X}", 90_000_005u32));
        assert_eq!(&id[28..], "0203", "counter truncated to 16 bits");
        assert_eq!(nearly_time_at(&id, now + 1000), Some(now));
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()));
    }

    #[test]
    fn ipv6_ids_have_56_characters() {
        let prefix = build_prefix(&ip_bytes("2001:db8::1".parse().unwrap()));
        assert_eq!(prefix.len(), 44);
        let now = ms(2024, 5, 20, 0);
        let id = format_id(&prefix, now, 7);
        assert_eq!(id.len(), 56);
        assert!(id.starts_with("20010DB8"));
        assert_eq!(nearly_time_at(&id, now + 10), Some(now));
    }

    #[test]
    fn late_in_a_long_month_the_span_wraps_like_javas_int() {
        let now = ms(2024, 1, 31, 23); // 30 days and 23 hours: more than i32::MAX ms
        let id = format_id(&build_prefix(&[1, 2, 3, 4]), now, 0);
        assert_eq!(nearly_time_at(&id, now + 1), Some(now));
    }

    #[test]
    fn an_id_read_in_the_millisecond_it_was_made_is_of_this_month() {
        let now = ms(2026, 12, 2, 7);
        let id = format_id(&build_prefix(&[1, 2, 3, 4]), now, 0);
        assert_eq!(nearly_time_at(&id, now), Some(now));
    }

    #[test]
    fn nearly_time_uses_the_previous_month_for_future_spans() {
        let id = format_id("0102030400000000ABCD", ms(2024, 2, 28, 0), 0);
        // Read on 2 March: 27 days into March would be in the future, so February.
        assert_eq!(
            nearly_time_at(&id, ms(2024, 3, 2, 0)),
            Some(ms(2024, 2, 28, 0))
        );
        assert_eq!(nearly_time_at("XYZ", 0), None);
        assert_eq!(nearly_time_at(&"G".repeat(32), 0), None);
    }

    #[test]
    fn fake_ip_is_the_low_four_bytes_of_the_time() {
        assert_eq!(fake_ip(0x0102_0304_0506_0708), [5, 6, 7, 8]);
    }

    #[test]
    fn process_ids_share_a_prefix_and_count_up() {
        // Another test may have fixed the prefix already; either way it stays fixed.
        let took = set_client_ip(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4)));
        let a = create_uniq_id();
        let b = create_uniq_id();
        assert!(!set_client_ip(IpAddr::V4(Ipv4Addr::new(5, 6, 7, 8))));
        assert_eq!(a.len(), 32);
        assert_eq!(a[..20], b[..20]);
        if took {
            assert!(a.starts_with("01020304"));
        }
        let counter = |id: &str| u16::from_str_radix(&id[28..], 16).unwrap();
        // Other test threads may take ids in between; ours still count up (mod 2^16).
        let step = counter(&b).wrapping_sub(counter(&a));
        assert!((1..1000).contains(&step), "{a} {b}");
        let mut m = Message::new("T", Vec::new());
        let id = set_uniq_id(&mut m).to_string();
        assert_eq!(set_uniq_id(&mut m), id, "kept once set");
        assert!(nearly_time_from_id(&id).is_some());
    }

    #[test]
    fn client_ip_choice_follows_java() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let check = |input: &[&str], expected: Option<&str>| {
            let got = choose_client_ip(input.iter().map(|s| ip(s)));
            assert_eq!(got, expected.map(ip), "{input:?}");
        };
        check(&[], None);
        check(&["127.0.0.1", "8.8.8.8"], Some("127.0.0.1"));
        check(&["10.0.0.1", "192.168.1.2", "172.20.0.1"], Some("10.0.0.1"));
        check(&["10.0.0.1", "172.32.0.1"], Some("172.32.0.1"));
        check(
            &["::1", "fe80::1", "fec0::1", "::", "10.1.1.1"],
            Some("10.1.1.1"),
        );
        check(
            &["192.168.0.9", "2001:db8::5", "8.8.8.8"],
            Some("2001:db8::5"),
        );
    }
}
