//! Queue allocation strategies (Java `AllocateMessageQueueStrategy` and its
//! implementations). Every consumer of a group runs the same strategy over the same sorted
//! inputs, so mixed Java and Rust groups agree only if the arithmetic is Java's exactly.

use std::collections::BTreeMap;

use md5::{Digest, Md5};

use crate::message::MessageQueue;

/// Splits the queues of a topic among the consumers of a group.
pub trait AllocateStrategy: Send + Sync {
    /// Java strategy name (`AVG`, `AVG_BY_CIRCLE`, ...).
    fn name(&self) -> &str;
    /// The queues `current` gets. `all` is sorted by (topic, broker, queue id), `cids` by
    /// string; both are non-empty and contain `current` (checked by the caller).
    fn allocate(&self, current: &str, all: &[MessageQueue], cids: &[String]) -> Vec<MessageQueue>;
}

/// Java `AllocateMessageQueueStrategy.check`: whether allocation can proceed.
pub fn check(current: &str, all: &[MessageQueue], cids: &[String]) -> bool {
    !current.is_empty() && !all.is_empty() && !cids.is_empty() && cids.iter().any(|c| c == current)
}

/// "AVG", the default: contiguous blocks, the first `|mq| % |cid|` consumers get one more.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocateAveragely;

impl AllocateStrategy for AllocateAveragely {
    fn name(&self) -> &str {
        "AVG"
    }
    fn allocate(&self, current: &str, all: &[MessageQueue], cids: &[String]) -> Vec<MessageQueue> {
        if !check(current, all, cids) {
            return Vec::new();
        }
        let Some(index) = cids.iter().position(|c| c == current) else {
            return Vec::new();
        };
        let (n, c) = (all.len(), cids.len());
        let modulo = n % c;
        let average = if n <= c {
            1
        } else if modulo > 0 && index < modulo {
            n / c + 1
        } else {
            n / c
        };
        let start = if modulo > 0 && index < modulo {
            index * average
        } else {
            index * average + modulo
        };
        let range = average.min(n.saturating_sub(start));
        (0..range).map(|i| all[(start + i) % n].clone()).collect()
    }
}

/// "AVG_BY_CIRCLE": queue `i` goes to consumer `i % |cid|`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocateAveragelyByCircle;

impl AllocateStrategy for AllocateAveragelyByCircle {
    fn name(&self) -> &str {
        "AVG_BY_CIRCLE"
    }
    fn allocate(&self, current: &str, all: &[MessageQueue], cids: &[String]) -> Vec<MessageQueue> {
        if !check(current, all, cids) {
            return Vec::new();
        }
        let Some(index) = cids.iter().position(|c| c == current) else {
            return Vec::new();
        };
        all.iter()
            .enumerate()
            .filter(|(i, _)| i % cids.len() == index)
            .map(|(_, q)| q.clone())
            .collect()
    }
}

/// "CONSISTENT_HASH": a ring of `virtual_nodes` MD5 points per consumer.
#[derive(Debug, Clone, Copy)]
pub struct AllocateConsistentHash {
    /// Virtual nodes per consumer (Java default 10).
    pub virtual_nodes: usize,
}

impl Default for AllocateConsistentHash {
    fn default() -> Self {
        AllocateConsistentHash { virtual_nodes: 10 }
    }
}

/// Java `ConsistentHashRouter.MD5Hash`: the first four digest bytes as an unsigned
/// big-endian 32-bit value.
fn md5_hash(key: &str) -> u64 {
    let d = Md5::digest(key.as_bytes());
    d[..4].iter().fold(0u64, |h, b| (h << 8) | u64::from(*b))
}

impl AllocateStrategy for AllocateConsistentHash {
    fn name(&self) -> &str {
        "CONSISTENT_HASH"
    }
    fn allocate(&self, current: &str, all: &[MessageQueue], cids: &[String]) -> Vec<MessageQueue> {
        if !check(current, all, cids) {
            return Vec::new();
        }
        let mut ring: BTreeMap<u64, &str> = BTreeMap::new();
        for cid in cids {
            for i in 0..self.virtual_nodes {
                ring.insert(md5_hash(&format!("{cid}-{i}")), cid);
            }
        }
        all.iter()
            .filter(|mq| {
                let h = md5_hash(&mq.to_string());
                let owner = ring
                    .range(h..)
                    .next()
                    .or_else(|| ring.iter().next())
                    .map(|(_, c)| *c);
                owner == Some(current)
            })
            .cloned()
            .collect()
    }
}

/// "CONFIG": a fixed list, whatever the group looks like.
#[derive(Debug, Clone, Default)]
pub struct AllocateByConfig {
    /// The queues to take.
    pub queues: Vec<MessageQueue>,
}

impl AllocateStrategy for AllocateByConfig {
    fn name(&self) -> &str {
        "CONFIG"
    }
    fn allocate(
        &self,
        _current: &str,
        _all: &[MessageQueue],
        _cids: &[String],
    ) -> Vec<MessageQueue> {
        self.queues.clone()
    }
}

/// "MACHINE_ROOM": brokers named `room@name`; only queues of the listed rooms, split in
/// contiguous blocks with the remainder spread from the first consumer.
#[derive(Debug, Clone, Default)]
pub struct AllocateByMachineRoom {
    /// Rooms this group consumes from.
    pub consumer_idcs: Vec<String>,
}

impl AllocateStrategy for AllocateByMachineRoom {
    fn name(&self) -> &str {
        "MACHINE_ROOM"
    }
    fn allocate(&self, current: &str, all: &[MessageQueue], cids: &[String]) -> Vec<MessageQueue> {
        let Some(index) = cids.iter().position(|c| c == current) else {
            return Vec::new();
        };
        let premq: Vec<&MessageQueue> = all
            .iter()
            .filter(|mq| {
                mq.broker_name
                    .split_once('@')
                    .is_some_and(|(room, _)| self.consumer_idcs.iter().any(|r| r == room))
            })
            .collect();
        let c = cids.len();
        let per = premq.len() / c;
        let rem = premq.len() % c;
        let start = per * index;
        let mut out: Vec<MessageQueue> = premq[start..start + per]
            .iter()
            .map(|q| (*q).clone())
            .collect();
        if index < rem {
            out.push(premq[per * c + index].clone());
        }
        out
    }
}

/// Names the machine room of a broker name or a client id.
pub type MachineRoomResolver = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// `MACHINE_ROOM_NEARBY-<inner>`: consumers take their own room's queues with the inner
/// strategy; rooms without a consumer are shared by everyone.
pub struct AllocateMachineRoomNearby {
    inner: Box<dyn AllocateStrategy>,
    /// Maps a broker name or a client id to its machine room.
    resolver: MachineRoomResolver,
    name: String,
}

impl std::fmt::Debug for AllocateMachineRoomNearby {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllocateMachineRoomNearby")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AllocateMachineRoomNearby {
    /// Wraps `inner`; `resolver` names the room of a broker name or a client id.
    pub fn new(
        inner: Box<dyn AllocateStrategy>,
        resolver: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        let name = format!("MACHINE_ROOM_NEARBY-{}", inner.name());
        AllocateMachineRoomNearby {
            inner,
            resolver: Box::new(resolver),
            name,
        }
    }
}

impl AllocateStrategy for AllocateMachineRoomNearby {
    fn name(&self) -> &str {
        &self.name
    }
    fn allocate(&self, current: &str, all: &[MessageQueue], cids: &[String]) -> Vec<MessageQueue> {
        if !check(current, all, cids) {
            return Vec::new();
        }
        let mut mq_by_room: BTreeMap<String, Vec<MessageQueue>> = BTreeMap::new();
        for mq in all {
            if let Some(room) = (self.resolver)(&mq.broker_name) {
                mq_by_room.entry(room).or_default().push(mq.clone());
            }
        }
        let mut cid_by_room: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for cid in cids {
            if let Some(room) = (self.resolver)(cid) {
                cid_by_room.entry(room).or_default().push(cid.clone());
            }
        }
        let my_room = (self.resolver)(current);
        let mut out = Vec::new();
        if let Some(room) = &my_room {
            if let (Some(mqs), Some(room_cids)) = (mq_by_room.get(room), cid_by_room.get(room)) {
                out.extend(self.inner.allocate(current, mqs, room_cids));
            }
        }
        for (room, mqs) in &mq_by_room {
            if !cid_by_room.contains_key(room) {
                out.extend(self.inner.allocate(current, mqs, cids));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|i| MessageQueue::new("T", "b", i)).collect()
    }

    fn cids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    fn ids(v: &[MessageQueue]) -> Vec<i32> {
        v.iter().map(|q| q.queue_id).collect()
    }

    fn check_avg(nq: i32, nc: usize, expected: &[&[i32]]) {
        let (all, cs) = (queues(nq), cids(nc));
        for (i, want) in expected.iter().enumerate() {
            assert_eq!(
                ids(&AllocateAveragely.allocate(&cs[i], &all, &cs)),
                *want,
                "{nq} queues / {nc} consumers, #{i}"
            );
        }
    }

    #[test]
    fn averagely_follows_java_arithmetic() {
        check_avg(8, 3, &[&[0, 1, 2], &[3, 4, 5], &[6, 7]]);
        check_avg(2, 3, &[&[0], &[1], &[]]);
        check_avg(8, 8, &[&[0], &[1], &[2], &[3], &[4], &[5], &[6], &[7]]);
        check_avg(10, 4, &[&[0, 1, 2], &[3, 4, 5], &[6, 7], &[8, 9]]);
        check_avg(4, 1, &[&[0, 1, 2, 3]]);
    }

    #[test]
    fn every_strategy_covers_each_queue_exactly_once() {
        let all = queues(13);
        for nc in 1..6 {
            let cs = cids(nc);
            let strategies: Vec<Box<dyn AllocateStrategy>> = vec![
                Box::new(AllocateAveragely),
                Box::new(AllocateAveragelyByCircle),
                Box::new(AllocateConsistentHash::default()),
            ];
            for s in &strategies {
                let mut got: Vec<i32> = cs
                    .iter()
                    .flat_map(|c| ids(&s.allocate(c, &all, &cs)))
                    .collect();
                got.sort();
                assert_eq!(
                    got,
                    (0..13).collect::<Vec<_>>(),
                    "{} with {nc} consumers",
                    s.name()
                );
            }
        }
    }

    #[test]
    fn by_circle_deals_round_robin() {
        let (all, cs) = (queues(5), cids(2));
        assert_eq!(
            ids(&AllocateAveragelyByCircle.allocate("c0", &all, &cs)),
            vec![0, 2, 4]
        );
        assert_eq!(
            ids(&AllocateAveragelyByCircle.allocate("c1", &all, &cs)),
            vec![1, 3]
        );
    }

    #[test]
    fn a_consumer_not_in_the_list_gets_nothing() {
        assert!(AllocateAveragely
            .allocate("x", &queues(4), &cids(2))
            .is_empty());
    }

    #[test]
    fn md5_hash_matches_java_router() {
        // Java: ConsistentHashRouter.MD5Hash("abc") — MD5 900150983cd24fb0...; the first
        // four bytes big-endian.
        assert_eq!(md5_hash("abc"), 0x9001_5098);
    }

    #[test]
    fn machine_room_takes_only_listed_rooms() {
        let all: Vec<MessageQueue> = ["r1@a", "r2@b"]
            .iter()
            .flat_map(|b| (0..3).map(move |i| MessageQueue::new("T", *b, i)))
            .collect();
        let s = AllocateByMachineRoom {
            consumer_idcs: vec!["r1".into()],
        };
        let cs = cids(2);
        let a = s.allocate("c0", &all, &cs);
        let b = s.allocate("c1", &all, &cs);
        assert_eq!(a.len() + b.len(), 3);
        assert!(a.iter().chain(&b).all(|q| &*q.broker_name == "r1@a"));
    }

    #[test]
    fn nearby_shares_rooms_without_consumers() {
        let all: Vec<MessageQueue> = ["r1@a", "r2@b"]
            .iter()
            .flat_map(|b| (0..2).map(move |i| MessageQueue::new("T", *b, i)))
            .collect();
        let resolver = |s: &str| s.split_once('@').map(|(r, _)| r.to_string());
        let s = AllocateMachineRoomNearby::new(Box::new(AllocateAveragely), resolver);
        let cs = vec!["r1@c0".to_string(), "r1@c1".to_string()];
        let mut total = 0;
        for c in &cs {
            let got = s.allocate(c, &all, &cs);
            total += got.len();
        }
        assert_eq!(total, 4, "r2 has no consumer: its queues are shared too");
    }
}
