//! Route and cluster bodies from the name server.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::{json, DecodeError};

/// The most queues of one topic on one broker that a route may give: a route from the wire
/// claiming more (a corrupt or hostile answer, up to `i32::MAX`) is cut at this many, with a
/// warning, when it is expanded into queues.
pub const MAX_QUEUES_PER_BROKER: i32 = 65_536;

/// The most queues a route may expand to over all its brokers (readable or writable, each
/// broker's count cut at [`MAX_QUEUES_PER_BROKER`]), far above any real cluster (100
/// brokers of 64 queues are 6,400). A route claiming more is a decode error, not a queue
/// list of that size.
pub const MAX_ROUTE_QUEUES: u64 = 1 << 18;

/// The most brokers a route may list (its queue data, broker data and `orderTopicConf`
/// entries, each counted on its own).
pub const MAX_ROUTE_BROKERS: usize = 4_096;

/// One broker group: a master (id 0) and its slaves (Java `BrokerData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    /// Cluster name.
    #[serde(default)]
    pub cluster: String,
    /// Broker name shared by master and slaves.
    pub broker_name: String,
    /// Broker id → `ip:port`; id 0 is the master.
    #[serde(default)]
    pub broker_addrs: BTreeMap<i64, String>,
}

impl BrokerData {
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
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    /// Broker name.
    pub broker_name: String,
    /// Readable queues.
    #[serde(default)]
    pub read_queue_nums: i32,
    /// Writable queues.
    #[serde(default)]
    pub write_queue_nums: i32,
    /// Permission bits: 2 readable, 4 writable, 1 inherited (Java `PermName`).
    #[serde(default)]
    pub perm: i32,
    /// Topic system flag; spelled `topicSynFlag` by servers before 4.9.
    #[serde(default, alias = "topicSynFlag")]
    pub topic_sys_flag: i32,
}

/// The route of one topic (Java `TopicRouteData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    /// `brokerName:queues;...` for ordered topics, when the name server has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    /// Queue data per broker.
    #[serde(default)]
    pub queue_datas: Vec<QueueData>,
    /// Broker groups serving the topic.
    #[serde(default)]
    pub broker_datas: Vec<BrokerData>,
    /// Filter servers per broker address (legacy).
    #[serde(default)]
    pub filter_server_table: HashMap<String, Vec<String>>,
}

impl TopicRouteData {
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
    /// An error when the route lists more than [`MAX_ROUTE_BROKERS`] brokers or would
    /// expand to more than [`MAX_ROUTE_QUEUES`] queues.
    /// The `broker:queues` entries of `orderTopicConf` (an entry without a `:` is skipped,
    /// a count that is not a number is 0), as producers expand them.
    pub(crate) fn order_topic_entries(&self) -> impl Iterator<Item = (&str, i32)> {
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

    pub(crate) fn check_bounds(&self) -> Result<(), DecodeError> {
        let per_broker = |n: i32| n.clamp(0, MAX_QUEUES_PER_BROKER) as u64;
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
/// allocate without bound.
pub fn decode_route(body: &[u8]) -> Result<TopicRouteData, DecodeError> {
    let route: TopicRouteData = json::from_slice(body)?;
    route.check_bounds()?;
    Ok(route)
}

/// GET_BROKER_CLUSTER_INFO body (Java `ClusterInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// Broker name → broker group.
    #[serde(default)]
    pub broker_addr_table: HashMap<String, BrokerData>,
    /// Cluster name → broker names.
    #[serde(default)]
    pub cluster_addr_table: HashMap<String, Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::json;

    #[test]
    fn route_with_bare_integer_keys_from_old_name_servers() {
        let body = br#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"writeQueueNums":4}]}"#;
        let r: TopicRouteData = json::from_slice(body).unwrap();
        assert_eq!(r.broker_datas[0].master_addr(), Some("127.0.0.1:10911"));
        assert_eq!(r.broker_datas[0].broker_addrs.len(), 2);
        assert_eq!(r.queue_datas[0].write_queue_nums, 4);
        assert_eq!(r.queue_datas[0].perm, 6);
    }

    #[test]
    fn route_in_standard_json_with_5x_extras() {
        let body = br#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false,"zoneName":null}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}],"topicQueueMappingByBroker":null}"#;
        let r: TopicRouteData = json::from_slice(body).unwrap();
        assert_eq!(r.broker_datas[0].select_addr(), Some("127.0.0.1:10911"));
        assert_eq!(r.queue_datas[0].read_queue_nums, 8);
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
