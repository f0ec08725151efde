//! IP-literal addresses, parsed once per thread: a sender queues to the same few brokers
//! again and again, and parsing `ip:port` costs more than the rest of queueing a frame.
//! Host names are not kept (they resolve anew each time, as before).

use std::cell::RefCell;
use std::net::SocketAddr;

/// The longest text kept; longer literals (some IPv6 forms) are parsed every time.
const MAX_TEXT: usize = 46;
const ENTRIES: usize = 4;

#[derive(Clone, Copy)]
struct Entry {
    len: u8,
    text: [u8; MAX_TEXT],
    sock: SocketAddr,
}

struct Recent {
    entries: [Option<Entry>; ENTRIES],
    /// The entry the next new address replaces.
    next: usize,
}

thread_local! {
    static RECENT: RefCell<Recent> = const {
        RefCell::new(Recent { entries: [None; ENTRIES], next: 0 })
    };
}

/// `addr` as a socket address when it is an IP literal (`SocketAddr`'s `FromStr`).
pub(super) fn literal(addr: &str) -> Option<SocketAddr> {
    let text = addr.as_bytes();
    if text.len() > MAX_TEXT {
        return addr.parse().ok();
    }
    RECENT.with(|recent| {
        let Ok(mut recent) = recent.try_borrow_mut() else {
            return addr.parse().ok();
        };
        let hit = recent
            .entries
            .iter()
            .flatten()
            .find(|e| &e.text[..usize::from(e.len)] == text);
        if let Some(e) = hit {
            return Some(e.sock);
        }
        let sock: SocketAddr = addr.parse().ok()?;
        let mut entry = Entry {
            len: text.len() as u8,
            text: [0; MAX_TEXT],
            sock,
        };
        entry.text[..text.len()].copy_from_slice(text);
        let at = recent.next;
        recent.entries[at] = Some(entry);
        recent.next = (at + 1) % ENTRIES;
        Some(sock)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_parse_as_std_does_whether_kept_or_not() {
        let addrs = [
            "127.0.0.1:10911",
            "10.0.0.2:10911",
            "[::1]:9876",
            "127.0.0.1:10911",
            "192.168.100.200:1",
            "10.0.0.3:10911",
            "10.0.0.4:10911",
            "127.0.0.1:10911",
            "[fe80::1234:5678:9abc:def0%4]:65535",
            "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535",
        ];
        // Twice over: the second round answers from what the first kept (the last
        // four), the rest parsed again.
        for _ in 0..2 {
            for a in addrs {
                assert_eq!(literal(a), a.parse().ok(), "{a}");
            }
        }
        for bad in ["localhost:9876", "127.0.0.1", "127.0.0.1:99999", "", ":1"] {
            assert_eq!(literal(bad), None, "{bad}");
            assert_eq!(literal(bad), None, "{bad} again");
        }
    }

    #[test]
    fn an_address_is_not_mistaken_for_a_kept_one_it_begins_or_ends() {
        assert_eq!(literal("10.0.0.1:1091"), "10.0.0.1:1091".parse().ok());
        assert_eq!(literal("10.0.0.1:10911"), "10.0.0.1:10911".parse().ok());
        assert_eq!(literal("10.0.0.1:1091"), "10.0.0.1:1091".parse().ok());
        assert_eq!(literal("0.0.0.1:10911"), "0.0.0.1:10911".parse().ok());
    }
}
