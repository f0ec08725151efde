//! Heartbeats: to every broker on the timer, at once when asked (a new producer or consumer,
//! a new broker address, a new connection) without sending on the caller's thread, and
//! the offline-broker cleanup that runs before each periodic one.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::Mutex;

use super::{with, MQClientInstance, LOCK_TIMEOUT};
use crate::client::validators::CLIENT_INNER_PRODUCER_GROUP;
use crate::protocol::heartbeat::{HeartbeatData, ProducerData};

/// The least time between two heartbeats that new broker connections ask for.
const CONNECT_HEARTBEAT_SPACING: Duration = Duration::from_secs(1);

impl MQClientInstance {
    // --- job 3 -----------------------------------------------------------------

    /// Drops broker addresses that no cached route mentions any more.
    pub fn clean_offline_broker(&self) {
        let Some(_guard) = self.namesrv_lock.try_lock_for(LOCK_TIMEOUT) else {
            warn!("clean_offline_broker: name-server lock not acquired");
            return;
        };
        let live: HashSet<String> = self
            .route_table
            .read()
            .values()
            .flat_map(|r| {
                r.broker_datas
                    .iter()
                    .flat_map(|b| b.broker_addrs.values().cloned())
            })
            .collect();
        let mut table = self.broker_addr_table.write();
        table.retain(|name, addrs| {
            addrs.retain(|id, addr| {
                let keep = live.contains(&**addr);
                if !keep {
                    info!("broker {name} id {id} at {addr} is offline; removed");
                }
                keep
            });
            !addrs.is_empty()
        });
    }

    /// Sends a heartbeat unless one is already being sent (Java
    /// `sendHeartbeatToAllBrokerWithLock`).
    pub fn send_heartbeat_to_all_brokers_with_lock(&self) {
        let heartbeat = self.prepare_heartbeat_data();
        match self.heartbeat_lock.try_lock() {
            Some(_g) => self.send_heartbeat_to_all_brokers(heartbeat),
            None => warn!("heartbeat skipped: another one is in progress"),
        }
    }

    /// Sends a heartbeat, waiting for one in progress to finish first: after a rebalance
    /// the broker must learn the new subscription version before the next pulls carry it.
    pub(crate) fn send_heartbeat_to_all_brokers_waiting(&self) {
        let heartbeat = self.prepare_heartbeat_data();
        let _g = self.heartbeat_lock.lock();
        self.send_heartbeat_to_all_brokers(heartbeat);
    }

    /// Sends a heartbeat soon, on the client timer rather than the calling thread: callers
    /// on the callback pool (a pull answered SUBSCRIPTION_NOT_LATEST) must not block on the
    /// network. Requests made before it goes out are served by that one heartbeat.
    pub(crate) fn request_heartbeat(&self) {
        self.request_heartbeat_in(Duration::ZERO);
    }

    /// [`request_heartbeat`](Self::request_heartbeat), sent after `delay`.
    fn request_heartbeat_in(&self, delay: Duration) {
        if self.heartbeat_requested.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.me.clone();
        let scheduled = self.scheduler.lock().as_ref().map(|s| {
            s.schedule_once("heartbeat-now", delay, move || {
                with(&me, |i| {
                    i.heartbeat_requested.store(false, Ordering::Release);
                    i.send_heartbeat_to_all_brokers_waiting();
                    Ok(())
                })
            })
        });
        if !matches!(scheduled, Some(Ok(_))) {
            // Not running: nothing to send, and the next request may try again.
            self.heartbeat_requested.store(false, Ordering::Release);
        }
    }

    /// Sends `heartbeat`; called with `heartbeat_lock` held. The data was gathered before
    /// the lock (gathering calls into the consumers), so a heartbeat gathered later may
    /// have gone out first: then this one is older and is not sent.
    fn send_heartbeat_to_all_brokers(&self, (seq, data): (u64, HeartbeatData)) {
        if self.heartbeat_sent.load(Ordering::Acquire) > seq {
            debug!("heartbeat skipped: a newer one went out meanwhile");
            return;
        }
        self.heartbeat_sent.store(seq, Ordering::Release);
        let no_consumer = data.consumer_data_set.is_empty();
        if no_consumer && self.producers.read().is_empty() {
            debug!("heartbeat skipped: no producer and no consumer");
            return;
        }
        let body = match serde_json::to_vec(&data) {
            Ok(b) => b,
            Err(e) => {
                warn!("encoding the heartbeat: {e}");
                return;
            }
        };
        let times = self.heartbeat_times.fetch_add(1, Ordering::Relaxed);
        crate::stats::ClientCounters::bump(&self.counters.heartbeats);
        let targets: Vec<(String, u64, Arc<str>)> = self
            .broker_addr_table
            .read()
            .iter()
            .flat_map(|(name, addrs)| {
                addrs
                    .iter()
                    .map(move |(id, a)| (name.clone(), *id, a.clone()))
            })
            .collect();
        for (name, id, addr) in targets {
            // Without consumers only masters need to know us.
            if no_consumer && id != 0 {
                continue;
            }
            match self
                .api
                .send_heartbeat(&addr, body.clone(), self.config.mq_client_api_timeout)
            {
                Ok(version) => {
                    self.broker_version_table
                        .write()
                        .entry(name.clone())
                        .or_default()
                        .insert(addr.to_string(), version);
                    if times.is_multiple_of(20) {
                        info!("heartbeat to broker {name} {addr} ok (broker version {version})");
                    }
                }
                Err(e) => warn!("heartbeat to broker {name} {addr} failed: {e}"),
            }
        }
    }

    /// The heartbeat body and its sequence number, gathered without holding a lock.
    fn prepare_heartbeat_data(&self) -> (u64, HeartbeatData) {
        let seq = self.heartbeat_gathered.fetch_add(1, Ordering::AcqRel) + 1;
        let mut producer_data_set: Vec<ProducerData> = self
            .producers
            .read()
            .keys()
            .map(|g| ProducerData {
                group_name: g.clone(),
            })
            .collect();
        // Java's instance always has its inner producer registered.
        if !producer_data_set
            .iter()
            .any(|p| p.group_name == CLIENT_INNER_PRODUCER_GROUP)
        {
            producer_data_set.push(ProducerData {
                group_name: CLIENT_INNER_PRODUCER_GROUP.to_string(),
            });
        }
        let consumer_data_set = self
            .consumer_list()
            .iter()
            .map(|c| c.consumer_data())
            .collect();
        let data = HeartbeatData {
            client_id: self.client_id.clone(),
            consumer_data_set,
            producer_data_set,
        };
        (seq, data)
    }

    /// Java 5.x `onChannelActive`: a new connection to a broker gets a heartbeat at once
    /// (requested, so it goes out on the timer). A broker forgets a client's consumers and
    /// producers when a connection of the client closes, and until it hears from it again
    /// refuses the group's pulls (SUBSCRIPTION_NOT_EXIST); without this, a connection
    /// lost and made again stopped consumption until the next periodic heartbeat (30 s).
    /// These heartbeats are spaced by `CONNECT_HEARTBEAT_SPACING`: a peer that accepts
    /// and closes every connection (a proxy whose broker is down) would otherwise make
    /// each heartbeat's own connection ask for the next one, without pause.
    pub(super) fn register_connect_listener(&self) {
        let me = self.me.clone();
        let last: Mutex<Option<Instant>> = Mutex::new(None);
        self.remoting().set_connect_listener(move |addr| {
            let Some(i) = me.upgrade() else { return };
            let is_broker = i
                .broker_addr_table
                .read()
                .values()
                .any(|m| m.values().any(|a| **a == *addr));
            if !is_broker {
                return;
            }
            let now = Instant::now();
            let at = {
                let mut last = last.lock();
                let at = last.map_or(now, |t| (t + CONNECT_HEARTBEAT_SPACING).max(now));
                *last = Some(at);
                at
            };
            debug!("new connection to broker {addr}: heartbeat");
            i.request_heartbeat_in(at - now);
        });
    }
}
