//! Route and cluster bodies from the name server.
//!
//! The public types ([`TopicRouteData`], [`QueueData`], [`BrokerData`], [`ClusterInfo`])
//! are what the client means: unsigned queue counts and broker ids, typed permissions.
//! The wire's shape (fastjson field names, Java's `int` and `long`) lives in the private
//! `*Wire` structs below, converted at the boundary, so a serde impl never becomes part of
//! the public API. A number no broker should send (a negative queue count) is a decode
//! error there, not a value.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
#[cfg(any(test, feature = "unstable-internals"))]
use serde::Serialize;

use super::{json, DecodeError, Perm};

/// The most queues of one topic on one broker that a route may give: a route from the wire
/// claiming more (a corrupt or hostile answer, up to `i32::MAX`) is cut at this many, with a
/// warning, when it is expanded into queues.
pub const MAX_QUEUES_PER_BROKER: u32 = 65_536;

/// The most queues a route may expand to over all its brokers (readable or writable, each
/// broker's count cut at [`MAX_QUEUES_PER_BROKER`]), far above any real cluster (100
/// brokers of 64 queues are 6,400). A route claiming more is a decode error, not a queue
/// list of that size.
pub const MAX_ROUTE_QUEUES: u64 = 1 << 18;

/// The most brokers a route may list (its queue data, broker data and `orderTopicConf`
/// entries, each counted on its own).
pub const MAX_ROUTE_BROKERS: usize = 4_096;

/// One broker group: a master (id 0) and its slaves (Java `BrokerData`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct BrokerData {
    /// Cluster name.
    pub cluster: String,
    /// Broker name shared by master and slaves.
    pub broker_name: String,
    /// Broker id → `ip:port`; id 0 is the master, slaves have 1 and up. (A broker that
    /// registers with a negative id, as a DLedger broker does before its first election,
    /// is left out: no client can address it by id.)
    pub broker_addrs: BTreeMap<u64, String>,
}

impl BrokerData {
    /// A broker group of `cluster` named `broker_name`, without addresses.
    pub fn new(cluster: impl Into<String>, broker_name: impl Into<String>) -> Self {
        BrokerData {
            cluster: cluster.into(),
            broker_name: broker_name.into(),
            broker_addrs: BTreeMap::new(),
        }
    }

    /// The master's address, if the broker group has one.
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&0).map(String::as_str)
    }

    /// The master's address, or else any slave's (Java `selectBrokerAddr`).
    pub fn select_addr(&self) -> Option<&str> {
        self.master_addr()
            .or_else(|| self.broker_addrs.values().next().map(String::as_str))
    }
}

/// Queue counts and permissions of a topic on one broker (Java `QueueData`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct QueueData {
    /// Broker name.
    pub broker_name: String,
    /// Readable queues (ids `0..read_queue_nums`).
    pub read_queue_nums: u32,
    /// Writable queues (ids `0..write_queue_nums`).
    pub write_queue_nums: u32,
    /// What the topic allows on this broker.
    pub perm: Perm,
    /// Topic system flag; spelled `topicSynFlag` by servers before 4.9.
    pub topic_sys_flag: i32,
}

impl QueueData {
    /// `queues` read and write queues of a topic on `broker_name`, with `perm`.
    pub fn new(broker_name: impl Into<String>, queues: u32, perm: Perm) -> Self {
        QueueData {
            broker_name: broker_name.into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm,
            topic_sys_flag: 0,
        }
    }
}

/// The route of one topic (Java `TopicRouteData`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TopicRouteData {
    /// `brokerName:queues;...` for ordered topics, when the name server has it.
    pub order_topic_conf: Option<String>,
    /// Queue data per broker.
    pub queue_datas: Vec<QueueData>,
    /// Broker groups serving the topic.
    pub broker_datas: Vec<BrokerData>,
    /// Filter servers per broker address (legacy).
    pub filter_server_table: HashMap<String, Vec<String>>,
}

impl TopicRouteData {
    /// A route with these queues and broker groups (no `orderTopicConf`).
    pub fn new(queue_datas: Vec<QueueData>, broker_datas: Vec<BrokerData>) -> Self {
        TopicRouteData {
            queue_datas,
            broker_datas,
            ..TopicRouteData::default()
        }
    }

    /// A copy with queue and broker lists sorted, for change detection (Java sorts both
    /// before `equals`).
    pub fn sorted(&self) -> TopicRouteData {
        let mut r = self.clone();
        r.queue_datas
            .sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
        r.broker_datas
            .sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
        r
    }
}

impl TopicRouteData {
    /// The `broker:queues` entries of `orderTopicConf` (an entry without a `:` is skipped,
    /// a count that is not a number, negative ones included, is 0), as producers expand
    /// them.
    pub(crate) fn order_topic_entries(&self) -> impl Iterator<Item = (&str, u32)> {
        self.order_topic_conf
            .as_deref()
            .unwrap_or("")
            .split(';')
            .filter_map(|item| {
                let (broker, n) = item.split_once(':')?;
                let n = n.split(':').next().unwrap_or("");
                Some((broker, n.trim().parse().unwrap_or(0)))
            })
    }

    /// An error when the route lists more than [`MAX_ROUTE_BROKERS`] brokers or would
    /// expand to more than [`MAX_ROUTE_QUEUES`] queues.
    pub(crate) fn check_bounds(&self) -> Result<(), DecodeError> {
        let per_broker = |n: u32| u64::from(n.min(MAX_QUEUES_PER_BROKER));
        let (mut order, mut order_queues) = (0usize, 0u64);
        for (_, n) in self.order_topic_entries() {
            order += 1;
            order_queues += per_broker(n);
        }
        let brokers = [
            ("queue data", self.queue_datas.len()),
            ("broker data", self.broker_datas.len()),
            ("orderTopicConf", order),
        ];
        if let Some((what, n)) = brokers.iter().find(|(_, n)| *n > MAX_ROUTE_BROKERS) {
            return Err(DecodeError::new(format!(
                "route lists {n} brokers in its {what}, more than {MAX_ROUTE_BROKERS}"
            )));
        }
        let queues: u64 = self
            .queue_datas
            .iter()
            .map(|q| per_broker(q.read_queue_nums).max(per_broker(q.write_queue_nums)))
            .sum();
        let most = order_queues.max(queues);
        if most > MAX_ROUTE_QUEUES {
            return Err(DecodeError::new(format!(
                "route would expand to {most} queues, more than {MAX_ROUTE_QUEUES}"
            )));
        }
        Ok(())
    }
}

/// Decodes a GET_ROUTEINFO_BY_TOPIC body and checks that it stays within
/// [`MAX_ROUTE_BROKERS`] and [`MAX_ROUTE_QUEUES`], so that expanding it into queues cannot
/// allocate without bound. A negative queue count is a decode error.
pub fn decode_route(body: &[u8]) -> Result<TopicRouteData, DecodeError> {
    let wire: RouteWire = json::from_slice(body)?;
    let route = TopicRouteData::try_from(wire)?;
    route.check_bounds()?;
    Ok(route)
}

/// The route as Java's JSON (`TopicRouteData`, fastjson's field names), for the `rmq`
/// tool's output and the fuzz target's round trip; [`decode_route`] reads it back.
#[cfg(any(test, feature = "unstable-internals"))]
pub fn route_to_json(route: &TopicRouteData) -> serde_json::Value {
    // Strings, integers and maps with integer keys: serde_json cannot fail on them.
    serde_json::to_value(RouteWire::from(route)).unwrap_or_default()
}

/// GET_BROKER_CLUSTER_INFO body (Java `ClusterInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ClusterInfo {
    /// Broker name → broker group.
    pub broker_addr_table: HashMap<String, BrokerData>,
    /// Cluster name → broker names.
    pub cluster_addr_table: HashMap<String, Vec<String>>,
}

/// Decodes a GET_BROKER_CLUSTER_INFO body.
pub fn decode_cluster_info(body: &[u8]) -> Result<ClusterInfo, DecodeError> {
    let wire: ClusterInfoWire = json::from_slice(body)?;
    Ok(ClusterInfo {
        broker_addr_table: wire
            .broker_addr_table
            .into_iter()
            .map(|(name, b)| (name, BrokerData::from(b)))
            .collect(),
        cluster_addr_table: wire.cluster_addr_table,
    })
}

// The wire: Java's field names and integer types. Serialize only for the internals' users.

#[derive(Deserialize)]
#[cfg_attr(any(test, feature = "unstable-internals"), derive(Serialize))]
#[serde(rename_all = "camelCase")]
struct BrokerDataWire {
    #[serde(default)]
    cluster: String,
    broker_name: String,
    #[serde(default)]
    broker_addrs: BTreeMap<i64, String>,
}

#[derive(Deserialize)]
#[cfg_attr(any(test, feature = "unstable-internals"), derive(Serialize))]
#[serde(rename_all = "camelCase")]
struct QueueDataWire {
    broker_name: String,
    #[serde(default)]
    read_queue_nums: i32,
    #[serde(default)]
    write_queue_nums: i32,
    #[serde(default)]
    perm: i32,
    #[serde(default, alias = "topicSynFlag")]
    topic_sys_flag: i32,
}

#[derive(Deserialize)]
#[cfg_attr(any(test, feature = "unstable-internals"), derive(Serialize))]
#[serde(rename_all = "camelCase")]
struct RouteWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    order_topic_conf: Option<String>,
    #[serde(default)]
    queue_datas: Vec<QueueDataWire>,
    #[serde(default)]
    broker_datas: Vec<BrokerDataWire>,
    #[serde(default)]
    filter_server_table: HashMap<String, Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterInfoWire {
    #[serde(default)]
    broker_addr_table: HashMap<String, BrokerDataWire>,
    #[serde(default)]
    cluster_addr_table: HashMap<String, Vec<String>>,
}

impl From<BrokerDataWire> for BrokerData {
    fn from(w: BrokerDataWire) -> Self {
        let broker_addrs = w
            .broker_addrs
            .into_iter()
            .filter_map(|(id, addr)| match u64::try_from(id) {
                Ok(id) => Some((id, addr)),
                Err(_) => {
                    log::debug!("broker {} at {addr} has id {id}: left out", w.broker_name);
                    None
                }
            })
            .collect();
        BrokerData {
            cluster: w.cluster,
            broker_name: w.broker_name,
            broker_addrs,
        }
    }
}

/// A queue count from the wire: Java's `int`, never negative from a sane broker.
fn queue_count(broker: &str, field: &str, n: i32) -> Result<u32, DecodeError> {
    u32::try_from(n).map_err(|_| {
        DecodeError::new(format!(
            "queue data of broker {broker}: {field} is {n}, a negative count"
        ))
    })
}

impl TryFrom<QueueDataWire> for QueueData {
    type Error = DecodeError;
    fn try_from(w: QueueDataWire) -> Result<Self, DecodeError> {
        Ok(QueueData {
            read_queue_nums: queue_count(&w.broker_name, "readQueueNums", w.read_queue_nums)?,
            write_queue_nums: queue_count(&w.broker_name, "writeQueueNums", w.write_queue_nums)?,
            perm: Perm::from_bits(w.perm),
            topic_sys_flag: w.topic_sys_flag,
            broker_name: w.broker_name,
        })
    }
}

impl TryFrom<RouteWire> for TopicRouteData {
    type Error = DecodeError;
    fn try_from(w: RouteWire) -> Result<Self, DecodeError> {
        Ok(TopicRouteData {
            order_topic_conf: w.order_topic_conf,
            queue_datas: w
                .queue_datas
                .into_iter()
                .map(QueueData::try_from)
                .collect::<Result<_, _>>()?,
            broker_datas: w.broker_datas.into_iter().map(BrokerData::from).collect(),
            filter_server_table: w.filter_server_table,
        })
    }
}

#[cfg(any(test, feature = "unstable-internals"))]
impl From<&TopicRouteData> for RouteWire {
    fn from(r: &TopicRouteData) -> Self {
        // Counts and ids past Java's `int`/`long` only come from a caller's own route; they
        // are written as Java's largest value.
        let int = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        RouteWire {
            order_topic_conf: r.order_topic_conf.clone(),
            queue_datas: r
                .queue_datas
                .iter()
                .map(|q| QueueDataWire {
                    broker_name: q.broker_name.clone(),
                    read_queue_nums: int(q.read_queue_nums),
                    write_queue_nums: int(q.write_queue_nums),
                    perm: q.perm.bits(),
                    topic_sys_flag: q.topic_sys_flag,
                })
                .collect(),
            broker_datas: r
                .broker_datas
                .iter()
                .map(|b| BrokerDataWire {
                    cluster: b.cluster.clone(),
                    broker_name: b.broker_name.clone(),
                    broker_addrs: b
                        .broker_addrs
                        .iter()
                        .map(|(id, a)| (i64::try_from(*id).unwrap_or(i64::MAX), a.clone()))
                        .collect(),
                })
                .collect(),
            filter_server_table: r.filter_server_table.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_with_bare_integer_keys_from_old_name_servers() {
        let body = br#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"writeQueueNums":4}]}"#;
        let r = decode_route(body).unwrap();
        assert_eq!(r.broker_datas[0].master_addr(), Some("127.0.0.1:10911"));
        assert_eq!(r.broker_datas[0].broker_addrs.len(), 2);
        assert_eq!(r.queue_datas[0].write_queue_nums, 4);
        assert_eq!(r.queue_datas[0].perm, Perm::READ | Perm::WRITE);
    }

    #[test]
    fn route_in_standard_json_with_5x_extras() {
        let body = br#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false,"zoneName":null}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}],"topicQueueMappingByBroker":null}"#;
        let r = decode_route(body).unwrap();
        assert_eq!(r.broker_datas[0].select_addr(), Some("127.0.0.1:10911"));
        assert_eq!(r.queue_datas[0].read_queue_nums, 8);
    }

    const ROUTE: &str = r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"queueDatas":[{"brokerName":"broker-a","perm":PERM,"readQueueNums":READ,"topicSysFlag":0,"writeQueueNums":WRITE}]}"#;

    fn route_body(perm: &str, read: &str, write: &str) -> Vec<u8> {
        ROUTE
            .replace("PERM", perm)
            .replace("READ", read)
            .replace("WRITE", write)
            .into_bytes()
    }

    #[test]
    fn a_negative_queue_count_from_the_wire_is_a_decode_error() {
        for (read, write, field) in [("-1", "4", "readQueueNums"), ("4", "-8", "writeQueueNums")] {
            let e = decode_route(&route_body("6", read, write)).unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
            assert!(e.to_string().contains("negative"), "{e}");
        }
        let r = decode_route(&route_body("6", "0", "2147483647")).unwrap();
        assert_eq!(r.queue_datas[0].write_queue_nums, i32::MAX as u32);
    }

    #[test]
    fn perm_reads_and_writes_javas_integer() {
        for (bits, readable, writeable) in [
            (2, false, true),
            (4, true, false),
            (6, true, true),
            (1, false, false),
            (7, true, true),
        ] {
            let r = decode_route(&route_body(&bits.to_string(), "4", "4")).unwrap();
            let p = r.queue_datas[0].perm;
            assert_eq!(p.bits(), bits);
            assert_eq!((p.is_readable(), p.is_writeable()), (readable, writeable));
            assert_eq!(route_to_json(&r)["queueDatas"][0]["perm"], bits);
        }
    }

    #[test]
    fn a_route_reads_back_what_it_writes_and_negative_broker_ids_are_left_out() {
        let body = br#"{"brokerDatas":[{"brokerAddrs":{"-1":"127.0.0.1:3","0":"127.0.0.1:1","1":"127.0.0.1:2"},"brokerName":"b","cluster":"c"}],"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}],"orderTopicConf":"b:4"}"#;
        let r = decode_route(body).unwrap();
        let ids: Vec<u64> = r.broker_datas[0].broker_addrs.keys().copied().collect();
        assert_eq!(ids, [0, 1]);
        let json = route_to_json(&r);
        assert_eq!(json["brokerDatas"][0]["brokerAddrs"]["0"], "127.0.0.1:1");
        assert_eq!(json["queueDatas"][0]["readQueueNums"], 4);
        assert_eq!(json["orderTopicConf"], "b:4");
        let back = decode_route(&serde_json::to_vec(&json).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn cluster_info_maps_broker_ids_to_unsigned() {
        let body = br#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"C"}},"clusterAddrTable":{"C":["broker-a"]}}"#;
        let info = decode_cluster_info(body).unwrap();
        let b = &info.broker_addr_table["broker-a"];
        assert_eq!(b.master_addr(), Some("127.0.0.1:10911"));
        assert_eq!(
            b.broker_addrs.get(&1).map(String::as_str),
            Some("127.0.0.1:10921")
        );
        assert_eq!(info.cluster_addr_table["C"], ["broker-a"]);
    }

    #[test]
    fn sorted_copies_compare_equal_regardless_of_order() {
        let a = QueueData {
            broker_name: "a".into(),
            ..Default::default()
        };
        let b = QueueData {
            broker_name: "b".into(),
            ..Default::default()
        };
        let r1 = TopicRouteData {
            queue_datas: vec![a.clone(), b.clone()],
            ..Default::default()
        };
        let r2 = TopicRouteData {
            queue_datas: vec![b, a],
            ..Default::default()
        };
        assert_ne!(r1, r2);
        assert_eq!(r1.sorted(), r2.sorted());
    }
}
