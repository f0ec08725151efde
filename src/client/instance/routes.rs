//! Routes: the name-server address fetch, the periodic and on-demand route refresh
//! (requests from threads that must not fetch are served on the timer), the route and
//! broker-address tables, and the broker lookups producers and consumers make.

use std::collections::HashSet;
#[cfg(feature = "unstable-internals")]
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use log::{debug, info};
use parking_lot::Mutex;

use super::{with, FindBrokerResult, MQClientInstance, LOCK_TIMEOUT};
use crate::client::http;
use crate::client::route::{self};
use crate::client::validators::AUTO_CREATE_TOPIC_KEY_TOPIC;
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::{ResponseCode, TopicRouteData};

/// Topics whose routes one step of the periodic refresh requests at once, under one hold
/// of the name-server lock (other lookups wait for one batch, not for the round).
const ROUTE_BATCH: usize = 256;

/// A job that waits for a route fetched on the timer.
pub(crate) type AfterRoute = Box<dyn FnOnce() + Send + 'static>;

/// Routes wanted by threads that must not fetch them (callback, pull): one fetch on the
/// client timer serves every request made before it.
#[derive(Default)]
pub(super) struct RouteRequests {
    topics: HashSet<String>,
    /// Run on the callback pool once the fetch is over, whatever its outcome.
    then: Vec<AfterRoute>,
    /// A fetch is scheduled and has not taken the requests yet.
    scheduled: bool,
}

impl MQClientInstance {
    // --- job 1 -----------------------------------------------------------------

    /// Asks the HTTP address server for name-server addresses and adopts a changed answer.
    /// Returns the answer.
    pub fn fetch_name_server_addr(&self) -> Result<String> {
        let url = &self.config.name_server_address_url;
        let in_context = |e: Error| e.context(format!("address server {url}"));
        let (status, body) =
            http::get(url, self.config.mq_client_api_timeout).map_err(in_context)?;
        if status != 200 {
            return Err(in_context(Error::new(
                ErrorKind::Response,
                format!("answered HTTP {status}"),
            )));
        }
        let addrs = http::clear_new_line(&body);
        if addrs.is_empty() {
            return Err(in_context(Error::new(
                ErrorKind::Response,
                "answered nothing",
            )));
        }
        let mut last = self.fetched_namesrv_addr.lock();
        if last.as_deref() != Some(addrs.as_str()) {
            info!("name-server address changed: {:?} -> {addrs}", *last);
            self.remoting().update_name_server_address_list(
                &crate::client::config::parse_namesrv_list(&addrs),
            );
            *last = Some(addrs.clone());
        }
        Ok(addrs)
    }

    // --- job 2 -----------------------------------------------------------------

    /// Refreshes the route of every published and subscribed topic.
    pub fn update_topic_route_info_from_name_server(&self) {
        let mut topics: HashSet<String> = HashSet::new();
        for c in self.consumer_list() {
            for s in c.consumer_data().subscription_data_set {
                topics.insert(s.topic);
            }
        }
        for p in self.producer_list() {
            topics.extend(p.publish_topics());
        }
        self.forget_routes_not_in(&topics);
        let topics: Vec<String> = topics.into_iter().collect();
        for batch in topics.chunks(ROUTE_BATCH) {
            self.update_routes(batch);
        }
    }

    /// Refreshes the routes of `topics` as [`update_topic_route`](Self::update_topic_route)
    /// does one's, with every request sent at once: under the name-server lock the
    /// batch's requests go out together and the changed routes are stored, then they are
    /// handed out with no lock held. A route round of 5,000 topics one request at a time
    /// (Java) took longer than a second here.
    fn update_routes(&self, topics: &[String]) {
        // Asked before the lock is taken: it calls into producers and consumers.
        let needed: Vec<bool> = topics
            .iter()
            .map(|t| self.is_need_update_topic_route_info(t))
            .collect();
        let stored = {
            let Some(_guard) = self.namesrv_lock.try_lock_for(LOCK_TIMEOUT) else {
                debug!(
                    "route refresh of {} topics: the name-server lock is busy",
                    topics.len()
                );
                return;
            };
            let timeout = self.config.mq_client_api_timeout;
            let routes = match self.api.get_topic_route_infos(topics, timeout) {
                Ok(r) => r,
                Err(e) => {
                    debug!("route refresh of {} topics: {e}", topics.len());
                    return;
                }
            };
            let mut stored = Vec::new();
            for ((topic, route), needed) in topics.iter().zip(routes).zip(needed) {
                match route {
                    Ok(route) => {
                        if let Some((route, new_addr)) = self.store_route(topic, route, needed) {
                            stored.push((topic, route, new_addr));
                        }
                    }
                    Err(e) => debug!("route refresh of {topic}: {e}"),
                }
            }
            stored
        };
        for (topic, route, new_addr) in stored {
            self.publish_route(topic, route, new_addr);
        }
    }

    /// Drops the cached routes of topics no producer sends to and no consumer subscribes,
    /// so that the table shrinks with use (Java's only grows); their brokers then go with
    /// the offline-broker cleanup. A topic needed again is looked up again.
    fn forget_routes_not_in(&self, in_use: &HashSet<String>) {
        let Some(_guard) = self.namesrv_lock.try_lock_for(LOCK_TIMEOUT) else {
            return;
        };
        self.route_table.write().retain(|topic, _| {
            let keep = in_use.contains(topic);
            if !keep {
                debug!("route of {topic}: no producer or consumer uses it; forgotten");
            }
            keep
        });
    }

    /// Fetches the route of `topic` and, if it changed (or a user needs it), updates the
    /// broker table and every producer's and consumer's view. Returns whether it did.
    pub fn update_topic_route(&self, topic: &str) -> Result<bool> {
        self.update_route_inner(topic, None)
    }

    /// Like [`update_topic_route`](Self::update_topic_route) but from the TBW102 route,
    /// with the queue counts capped at `default_queue_nums`: the broker creates the topic
    /// on first send (Java `isDefault = true`).
    pub(crate) fn update_topic_route_from_default(
        &self,
        topic: &str,
        default_queue_nums: u32,
    ) -> Result<bool> {
        self.update_route_inner(topic, Some(default_queue_nums))
    }

    fn update_route_inner(&self, topic: &str, default_queue_nums: Option<u32>) -> Result<bool> {
        // Asked before the name-server lock is taken: it calls into producers and consumers.
        let needed = self.is_need_update_topic_route_info(topic);
        let route = self.fetch_and_store_route(topic, default_queue_nums, needed)?;
        match route {
            Some((route, new_addr)) => {
                self.publish_route(topic, route, new_addr);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Under the name-server lock: fetches the route of `topic` and, if it changed (or
    /// `needed`), stores it and the broker addresses. Returns the stored route and
    /// whether it names an address the instance did not know for a broker name it knew.
    fn fetch_and_store_route(
        &self,
        topic: &str,
        default_queue_nums: Option<u32>,
        needed: bool,
    ) -> Result<Option<(TopicRouteData, bool)>> {
        let Some(_guard) = self.namesrv_lock.try_lock_for(LOCK_TIMEOUT) else {
            return Err(Error::timeout(crate::TimeoutPhase::Lock, LOCK_TIMEOUT)
                .context(format!("route refresh of {topic}")));
        };
        let timeout = self.config.mq_client_api_timeout;
        let route = match default_queue_nums {
            Some(n) => {
                let mut r = self
                    .api
                    .get_topic_route_info(AUTO_CREATE_TOPIC_KEY_TOPIC, timeout)?;
                for qd in &mut r.queue_datas {
                    let q = n.min(qd.read_queue_nums);
                    qd.read_queue_nums = q;
                    qd.write_queue_nums = q;
                }
                r
            }
            None => self.api.get_topic_route_info(topic, timeout)?,
        };
        crate::stats::ClientCounters::bump(&self.counters.route_refreshes);
        Ok(self.store_route(topic, route, needed))
    }

    /// Under the name-server lock: stores the fetched `route` of `topic` and the broker
    /// addresses if it changed (or `needed`). Returns the stored route and whether it
    /// names an address the instance did not know for a broker name it knew.
    fn store_route(
        &self,
        topic: &str,
        route: TopicRouteData,
        needed: bool,
    ) -> Option<(TopicRouteData, bool)> {
        let changed = {
            let table = self.route_table.read();
            match table.get(topic) {
                Some(old) => old.sorted() != route.sorted(),
                None => true,
            }
        } || needed;
        if !changed {
            return None;
        }
        info!("route of topic {topic} changed: {route:?}");
        let new_addr = {
            let mut brokers = self.broker_addr_table.write();
            // Only for a broker name already known: a first route is followed by the
            // heartbeat of whoever starts, and a new name by the rebalance that adds its
            // queues.
            let known = |addr: &String| brokers.values().any(|m| m.values().any(|a| **a == **addr));
            let new_addr = route.broker_datas.iter().any(|bd| {
                brokers.contains_key(&bd.broker_name) && bd.broker_addrs.values().any(|a| !known(a))
            });
            for bd in &route.broker_datas {
                let addrs = bd
                    .broker_addrs
                    .iter()
                    .map(|(id, a)| (*id, Arc::from(a.as_str())));
                brokers.insert(bd.broker_name.clone(), addrs.collect());
            }
            new_addr
        };
        self.route_table
            .write()
            .insert(topic.to_string(), route.clone());
        Some((route, new_addr))
    }

    /// Hands `route` to every producer and consumer, with no lock held (Java does this
    /// under its name-server lock). A concurrent refresh may have stored a newer route and
    /// handed it out before this call gets here, so after handing out, the stored route is
    /// compared with what was handed out and, if it differs, handed out too: the last
    /// update any user receives is the stored route. `new_addr`: the route names a broker
    /// address the instance did not know.
    fn publish_route(&self, topic: &str, mut route: TopicRouteData, mut new_addr: bool) {
        loop {
            let mut publish = route::to_publish_info(topic, &route);
            publish.have_topic_router_info = true;
            let publish = Arc::new(publish);
            let subscribe = route::to_subscribe_info(topic, &route);
            for p in self.producer_list() {
                p.update_topic_publish_info(topic, publish.clone());
            }
            let consumers = self.consumer_list();
            let mut queues_added = false;
            for c in &consumers {
                queues_added |= c.update_topic_subscribe_info(topic, &subscribe);
            }
            // A broker came (back) for a subscribed topic, or an address it did not know
            // serves a group it has (a master restarted while its slave stayed, a slave
            // promoted by the controller): register with it (a heartbeat on the timer, not
            // on whoever refreshed the route) and rebalance now. Java waits for the next
            // heartbeat (30 s) and rebalance (20 s), and such a broker refuses pulls of a
            // group it does not know (SUBSCRIPTION_NOT_EXIST) until then.
            if queues_added || (new_addr && !consumers.is_empty()) {
                self.request_heartbeat();
                self.rebalance_immediately();
            }
            match self.route_table.read().get(topic) {
                Some(stored) if *stored != route => route = stored.clone(),
                _ => return,
            }
            // The refresh that stored the newer route reports its own new addresses.
            new_addr = false;
        }
    }

    /// Java `isNeedUpdateTopicRouteInfo`: some user lacks usable info for `topic`.
    fn is_need_update_topic_route_info(&self, topic: &str) -> bool {
        self.producer_list()
            .iter()
            .any(|p| p.is_publish_topic_need_update(topic))
            || self
                .consumer_list()
                .iter()
                .any(|c| c.is_subscribe_topic_need_update(topic))
    }

    /// The cached route of `topic`.
    pub fn topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        self.route_table.read().get(topic).cloned()
    }

    /// Fetches the route of `topic` soon, on the client timer rather than the calling
    /// thread (callback and pull threads must not wait for the name server, Java's
    /// callback executor does), then runs `then` on the callback pool, whatever the
    /// fetch's outcome. Requests made before the fetch starts are served by it.
    pub(crate) fn request_route(&self, topic: &str, then: Option<AfterRoute>) {
        let mut requests = self.route_requests.lock();
        requests.topics.insert(topic.to_string());
        requests.then.extend(then);
        if requests.scheduled {
            return;
        }
        requests.scheduled = true;
        drop(requests);
        let me = self.me.clone();
        let scheduled = self.scheduler.lock().as_ref().map(|s| {
            s.schedule_once("route-now", Duration::ZERO, move || {
                with(&me, |i| {
                    i.serve_route_requests();
                    Ok(())
                })
            })
        });
        if !matches!(scheduled, Some(Ok(_))) {
            // Not running: nothing is fetched; the waiting jobs find what is cached.
            self.release_route_requests();
        }
    }

    /// Drops the requested routes unfetched and lets their waiting jobs go.
    pub(super) fn release_route_requests(&self) {
        let waiting = {
            let mut requests = self.route_requests.lock();
            requests.scheduled = false;
            requests.topics.clear();
            std::mem::take(&mut requests.then)
        };
        self.run_after_route(waiting);
    }

    /// On the timer: fetches the requested routes, then lets their waiting jobs go.
    fn serve_route_requests(&self) {
        let (topics, waiting) = {
            let mut requests = self.route_requests.lock();
            requests.scheduled = false;
            (
                std::mem::take(&mut requests.topics),
                std::mem::take(&mut requests.then),
            )
        };
        let topics: Vec<String> = topics.into_iter().collect();
        for batch in topics.chunks(ROUTE_BATCH) {
            self.update_routes(batch);
        }
        self.run_after_route(waiting);
    }

    /// Runs each job on the callback pool, or here once the pool is shut down: each owns
    /// a callback that must run once.
    fn run_after_route(&self, jobs: Vec<AfterRoute>) {
        for job in jobs {
            let slot = Arc::new(Mutex::new(Some(job)));
            let queued = slot.clone();
            let accepted = self.remoting().execute_callback(move || {
                let job = queued.lock().take();
                if let Some(job) = job {
                    job();
                }
            });
            if !accepted {
                let job = slot.lock().take();
                if let Some(job) = job {
                    job();
                }
            }
        }
    }

    /// Java `findBrokerAddressInSubscribe`: the address of `broker_id` in `broker_name`,
    /// else (for a slave id) the next slave, else — unless `only_this` — any address.
    pub fn find_broker_address_in_subscribe(
        &self,
        broker_name: &str,
        broker_id: u64,
        only_this: bool,
    ) -> Option<FindBrokerResult> {
        let table = self.broker_addr_table.read();
        let map = table.get(broker_name)?;
        if let Some(a) = map.get(&broker_id) {
            return Some(FindBrokerResult {
                addr: a.to_string(),
                slave: broker_id != 0,
            });
        }
        if broker_id != 0 {
            if let Some(a) = map.get(&(broker_id + 1)) {
                return Some(FindBrokerResult {
                    addr: a.to_string(),
                    slave: true,
                });
            }
        }
        if only_this {
            return None;
        }
        map.iter().next().map(|(id, a)| FindBrokerResult {
            addr: a.to_string(),
            slave: *id != 0,
        })
    }

    /// Client ids of `group`'s consumers, asked from a broker serving `topic` (Java
    /// `findConsumerIdList`).
    pub fn find_consumer_id_list(&self, topic: &str, group: &str) -> Result<Vec<String>> {
        let pick = |i: &MQClientInstance| -> Option<String> {
            let route = i.route_table.read().get(topic).cloned()?;
            let n = route.broker_datas.len();
            if n == 0 {
                return None;
            }
            let bd = &route.broker_datas[(crate::util::random_u64() % n as u64) as usize];
            bd.select_addr().map(str::to_string)
        };
        let addr = match pick(self) {
            Some(a) => a,
            None => {
                self.update_topic_route(topic)?;
                pick(self).ok_or_else(|| {
                    Error::new(
                        ErrorKind::NoRoute,
                        format!("no broker serves topic {topic}"),
                    )
                })?
            }
        };
        self.api
            .get_consumer_id_list(&addr, group, self.config.mq_client_api_timeout)
    }

    // --- lookups ----------------------------------------------------------------

    /// The master address of `broker_name` (Java `findBrokerAddressInPublish`).
    pub fn find_broker_address_in_publish(&self, broker_name: &str) -> Option<String> {
        self.publish_address(broker_name).map(|a| a.to_string())
    }

    /// [`find_broker_address_in_publish`](Self::find_broker_address_in_publish), shared
    /// with the table: a send copies no text.
    pub(crate) fn publish_address(&self, broker_name: &str) -> Option<Arc<str>> {
        self.broker_addr_table
            .read()
            .get(broker_name)
            .and_then(|m| m.get(&0).cloned())
    }

    /// Broker names and their addresses, as known now.
    #[cfg(feature = "unstable-internals")]
    pub fn broker_addresses(&self) -> HashMap<String, BTreeMap<u64, String>> {
        let table = self.broker_addr_table.read();
        let text =
            |m: &BTreeMap<u64, Arc<str>>| m.iter().map(|(id, a)| (*id, a.to_string())).collect();
        table
            .iter()
            .map(|(name, m)| (name.clone(), text(m)))
            .collect()
    }

    /// Whether `addr` is in the broker table.
    #[cfg(feature = "unstable-internals")]
    pub fn knows_broker_addr(&self, addr: &str) -> bool {
        self.broker_addr_table
            .read()
            .values()
            .any(|m| m.values().any(|a| **a == *addr))
    }

    /// True when a route error means the topic does not exist.
    pub(crate) fn is_topic_not_exist(e: &Error) -> bool {
        e.response_code() == Some(ResponseCode::TOPIC_NOT_EXIST)
    }
}
