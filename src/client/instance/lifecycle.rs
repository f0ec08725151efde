//! The instance's life: start (the timer and its periodic jobs, the consumer services,
//! the processors), shutdown and drop, and the registration of producers and consumers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::{with, ConsumerInner, MQClientInstance, ProducerInner, ServiceState};
use crate::client::manager;
use crate::error::{Error, Result};
use crate::scheduler::ScheduledExecutor;

/// Java's initial delays of the periodic jobs.
const FETCH_NAMESRV_INITIAL_DELAY: Duration = Duration::from_secs(10);
const ROUTE_INITIAL_DELAY: Duration = Duration::from_millis(10);
const HEARTBEAT_INITIAL_DELAY: Duration = Duration::from_millis(1000);
const PERSIST_INITIAL_DELAY: Duration = Duration::from_secs(10);
/// The least time a shutdown gives its threads to be joined, even past its deadline.
pub(crate) const JOIN_GRACE: Duration = Duration::from_millis(500);

impl MQClientInstance {
    /// Starts the jobs. A running instance stays running (producers and consumers share
    /// it); a failed or shut-down one is a state error.
    ///
    /// A failed start stops what it started and removes the instance from the manager.
    pub fn start(&self) -> Result<()> {
        if !self.may_start(self.state())? {
            return Ok(());
        }
        // The HTTP fetch runs before the state lock is taken: no lock is held across I/O.
        let name_servers = self.name_servers_for_start();
        let mut state = self.state.lock();
        if !self.may_start(*state)? {
            return Ok(()); // another user started it meanwhile
        }
        match name_servers
            .and_then(|()| self.start_scheduled_tasks())
            .and_then(|exec| Ok((exec, self.start_consumer_services()?)))
        {
            Ok((exec, services)) => {
                *self.scheduler.lock() = Some(exec);
                *self.services.lock() = Some(services);
                self.register_processors();
                self.register_connect_listener();
                *state = ServiceState::Running;
                info!("client instance {} started", self.client_id);
                Ok(())
            }
            Err(e) => {
                *state = ServiceState::StartFailed;
                drop(state);
                manager::remove(&self.client_id, self);
                self.stop_threads(Instant::now() + self.config.remoting.shutdown_timeout);
                Err(e.context(format!("starting client instance {}", self.client_id)))
            }
        }
    }

    /// Whether there are name servers to start with: configured ones, else the answer of an
    /// address server the user chose (job 1, once now). Otherwise a `Config` error naming
    /// the fix, at once: Java's built-in address server (`jmenv.tbsite.net`) is asked only
    /// when chosen, since elsewhere its lookup takes seconds and then fails.
    fn name_servers_for_start(&self) -> Result<()> {
        let c = &self.config;
        if c.namesrv_addr.is_some() {
            // Set but empty (`namesrv_addr("")`) is no name server either.
            return if c.namesrv_addr_list().is_empty() {
                Err(crate::client::config::no_name_server(None))
            } else {
                Ok(())
            };
        }
        if !c.address_server_configured {
            return Err(crate::client::config::no_name_server(None));
        }
        self.fetch_name_server_addr()
            .map(|_| ())
            .map_err(|e| crate::client::config::no_name_server(Some(&e)))
    }

    /// Whether `start` has work to do in `state`: false when running, an error when failed
    /// or shut down.
    fn may_start(&self, state: ServiceState) -> Result<bool> {
        match state {
            ServiceState::CreateJust => Ok(true),
            ServiceState::Running => Ok(false),
            ServiceState::StartFailed => Err(Error::state(format!(
                "client instance {} failed to start before",
                self.client_id
            ))),
            ServiceState::ShutdownAlready => Err(Error::state(format!(
                "client instance {} is shut down",
                self.client_id
            ))),
        }
    }

    fn start_scheduled_tasks(&self) -> Result<ScheduledExecutor> {
        let exec = ScheduledExecutor::new("rmq-client-timer", 1)?;
        let c = &self.config;
        if c.namesrv_addr.is_none() {
            let me = self.me.clone();
            exec.schedule_at_fixed_rate(
                "fetch-namesrv-addr",
                FETCH_NAMESRV_INITIAL_DELAY.min(c.fetch_name_server_interval),
                c.fetch_name_server_interval,
                move || with(&me, |i| i.fetch_name_server_addr().map(|_| ())),
            )?;
        }
        let me = self.me.clone();
        exec.schedule_at_fixed_rate(
            "update-topic-routes",
            ROUTE_INITIAL_DELAY,
            c.poll_name_server_interval,
            move || {
                with(&me, |i| {
                    i.update_topic_route_info_from_name_server();
                    Ok(())
                })
            },
        )?;
        let me = self.me.clone();
        exec.schedule_at_fixed_rate(
            "clean-offline-broker-and-heartbeat",
            HEARTBEAT_INITIAL_DELAY.min(c.heartbeat_broker_interval),
            c.heartbeat_broker_interval,
            move || {
                with(&me, |i| {
                    i.clean_offline_broker();
                    i.send_heartbeat_to_all_brokers_with_lock();
                    Ok(())
                })
            },
        )?;
        let me = self.me.clone();
        exec.schedule_at_fixed_rate(
            "persist-consumer-offsets",
            PERSIST_INITIAL_DELAY.min(c.persist_consumer_offset_interval),
            c.persist_consumer_offset_interval,
            move || {
                with(&me, |i| {
                    i.persist_all_consumer_offsets();
                    Ok(())
                })
            },
        )?;
        let me = self.me.clone();
        exec.schedule_at_fixed_rate(
            "adjust-thread-pool",
            c.adjust_thread_pool_interval,
            c.adjust_thread_pool_interval,
            move || {
                with(&me, |i| {
                    i.adjust_thread_pool();
                    Ok(())
                })
            },
        )?;
        Ok(exec)
    }

    /// Stops the jobs and the remoting client once no producer or consumer uses the
    /// instance any more, and removes it from the manager. Java `shutdown`.
    #[cfg(feature = "unstable-internals")]
    pub fn shutdown(&self) {
        self.shutdown_until(Instant::now() + self.config.remoting.shutdown_timeout);
    }

    /// [`shutdown`](Self::shutdown), joining the threads by `deadline` (a client's own
    /// shutdown passes the deadline its other steps shared). The threads get at least
    /// [`JOIN_GRACE`] even when the deadline has passed: once told to stop they end in
    /// milliseconds, and a thread left behind would outlive its client.
    pub(crate) fn shutdown_until(&self, deadline: Instant) {
        if !self.consumers.read().is_empty() || !self.producers.read().is_empty() {
            return;
        }
        let mut state = self.state.lock();
        if *state == ServiceState::ShutdownAlready {
            return;
        }
        *state = ServiceState::ShutdownAlready;
        drop(state);
        manager::remove(&self.client_id, self);
        self.stop_threads(deadline.max(Instant::now() + JOIN_GRACE));
        info!("client instance {} shut down", self.client_id);
    }

    /// Stops the timer, the consumer services and the remoting client, joining their
    /// threads (never the calling one) by one deadline: a thread still running then (a
    /// stuck callback) is left behind with a warning. Idempotent.
    fn stop_threads(&self, deadline: Instant) {
        // Waiting requests end now, each exactly once, before the timer that would time
        // them out stops.
        self.replies.fail_all(|| {
            Error::state(format!(
                "client instance {} shut down before the reply came",
                self.client_id
            ))
        });
        // Take each out first: a guard held across the joins would deadlock with a
        // service thread that needs the same lock to finish its current step.
        let scheduler = self.scheduler.lock().take();
        if let Some(exec) = scheduler {
            exec.shutdown_until(deadline);
        }
        // Jobs waiting for a route the stopped timer will not fetch run now, while the
        // callback pool still takes them (each owns a callback that must run once).
        self.release_route_requests();
        let services = self.services.lock().take();
        if let Some(services) = services {
            services.stop(deadline);
        }
        self.remoting().shutdown_until(deadline);
    }

    // --- registration ----------------------------------------------------------

    /// Registers a producer; false if the group is already registered here.
    pub(crate) fn register_producer(&self, group: &str, producer: Arc<dyn ProducerInner>) -> bool {
        let mut p = self.producers.write();
        if p.contains_key(group) {
            return false;
        }
        p.insert(group.to_string(), producer);
        true
    }

    /// Unregisters a producer locally and at every broker, within `deadline` when given.
    pub(crate) fn unregister_producer_until(&self, group: &str, deadline: Option<Instant>) {
        self.producers.write().remove(group);
        self.unregister_client(Some(group), None, deadline);
    }

    /// Registers a consumer; false if the group is already registered here.
    pub(crate) fn register_consumer(&self, group: &str, consumer: Arc<dyn ConsumerInner>) -> bool {
        let mut c = self.consumers.write();
        if c.contains_key(group) {
            return false;
        }
        c.insert(group.to_string(), consumer);
        true
    }

    /// Unregisters a consumer locally and at every broker.
    pub(crate) fn unregister_consumer(&self, group: &str) {
        self.unregister_consumer_until(group, None);
    }

    /// [`unregister_consumer`](Self::unregister_consumer) within `deadline`: a broker not
    /// asked by then forgets the consumer when the instance's connections close.
    pub(crate) fn unregister_consumer_until(&self, group: &str, deadline: Option<Instant>) {
        self.consumers.write().remove(group);
        self.unregister_client(None, Some(group), deadline);
    }

    fn unregister_client(
        &self,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
        deadline: Option<Instant>,
    ) {
        let addrs: Vec<String> = self
            .broker_addr_table
            .read()
            .values()
            .flat_map(|m| m.values().map(|a| a.to_string()))
            .collect();
        for addr in addrs {
            let mut timeout = self.config.mq_client_api_timeout;
            if let Some(d) = deadline {
                timeout = timeout.min(d.saturating_duration_since(Instant::now()));
                if timeout.is_zero() {
                    warn!("no time left to unregister {} at {addr}", self.client_id);
                    continue;
                }
            }
            if let Err(e) = self.api.unregister_client(
                &addr,
                &self.client_id,
                producer_group,
                consumer_group,
                timeout,
            ) {
                warn!("unregister client {} at {addr}: {e}", self.client_id);
            }
        }
    }

    /// Runs `job` on the client timer after `delay`: work that waits for brokers or the
    /// name server (an offset written after an illegal one), which must not hold up the
    /// pull-delay timer every consumer's delayed pulls share. Dropped when not running.
    pub(crate) fn schedule_on_client_timer(
        &self,
        name: &str,
        delay: Duration,
        job: impl FnOnce() + Send + 'static,
    ) {
        let guard = self.scheduler.lock();
        if let Some(s) = guard.as_ref() {
            let _ = s.schedule_once(name, delay, move || {
                job();
                Ok(())
            });
        }
    }
}

impl Drop for MQClientInstance {
    /// The last user is gone (its own threads hold only weak references): stop every
    /// thread, bounded, and never joining the current one — the last reference may be
    /// dropped on one of them.
    fn drop(&mut self) {
        *self.state.get_mut() = ServiceState::ShutdownAlready;
        manager::remove(&self.client_id, self);
        self.stop_threads(Instant::now() + self.config.remoting.shutdown_timeout);
        debug!("client instance {} dropped", self.client_id);
    }
}
