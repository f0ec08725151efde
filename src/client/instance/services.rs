//! The consumer services (Java `PullMessageService`, `RebalanceService`): the `rmq-pull`
//! and `rmq-rebalance` threads, the `rmq-pull-delay` timer, and the periodic jobs they
//! serve (offset persistence, consume-pool adjustment, rebalance).

use std::sync::Arc;
use std::time::{Duration, Instant};

use log::debug;

use super::{ConsumerInner, MQClientInstance, PullTask};
use crate::error::{Error, Result};
use crate::scheduler::ScheduledExecutor;
use crate::util::worker::{self, Worker, JOIN_TIMEOUT};

/// The pull and rebalance services (Java `PullMessageService`, `RebalanceService`):
/// threads `rmq-pull` and `rmq-rebalance`, and the `rmq-pull-delay` timer for delayed
/// pulls and consume retries.
pub(super) struct ConsumerServices {
    pull_tx: crossbeam_channel::Sender<Box<dyn PullTask>>,
    rebalance_tx: crossbeam_channel::Sender<()>,
    /// Jobs for the rebalance thread between its rounds (see
    /// [`MQClientInstance::run_on_rebalance_thread`]).
    rebalance_jobs: crossbeam_channel::Sender<RebalanceJob>,
    delay: ScheduledExecutor,
    threads: Vec<Worker>,
}

impl ConsumerServices {
    /// Stops the delay timer (its pending pulls hold senders), closes both channels, which
    /// ends both loops, and joins the threads (by `deadline`, never the calling one).
    pub(super) fn stop(self, deadline: Instant) {
        let ConsumerServices {
            pull_tx,
            rebalance_tx,
            rebalance_jobs,
            delay,
            threads,
        } = self;
        delay.shutdown_until(deadline);
        drop(pull_tx);
        drop(rebalance_tx);
        drop(rebalance_jobs);
        worker::join_all_until(threads, deadline, "consumer services");
    }
}

/// How long the rebalance service waits between rounds (Java
/// `rocketmq.client.rebalance.waitInterval`).
pub const REBALANCE_WAIT_INTERVAL: Duration = Duration::from_secs(20);

/// A job run on the rebalance thread between rounds.
type RebalanceJob = Box<dyn FnOnce() + Send + 'static>;

impl MQClientInstance {
    // --- jobs 4 and 5 ----------------------------------------------------------

    pub(super) fn persist_all_consumer_offsets(&self) {
        for c in self.consumer_list() {
            c.persist_consumer_offset();
        }
    }

    pub(super) fn adjust_thread_pool(&self) {
        for c in self.consumer_list() {
            c.adjust_thread_pool();
        }
    }

    // --- consumer services ------------------------------------------------------

    pub(super) fn start_consumer_services(&self) -> Result<ConsumerServices> {
        let delay = ScheduledExecutor::new("rmq-pull-delay", 1)?;
        let (pull_tx, pull_rx) = crossbeam_channel::unbounded::<Box<dyn PullTask>>();
        let (rebalance_tx, rebalance_rx) = crossbeam_channel::bounded::<()>(1);
        let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded::<RebalanceJob>();
        // Both loops run each job under `run_caught`: a panicking job is logged and the
        // service goes on (every consumer of the instance depends on it).
        let pull = worker::spawn("rmq-pull", move || {
            for task in pull_rx.iter() {
                worker::run_caught("a pull task", || task.pull());
            }
        })
        .map_err(|e| Error::io("starting the pull service", e))?;
        let me = self.me.clone();
        let rebalance = worker::spawn("rmq-rebalance", move || {
            // Jobs run between rounds and do not push the next periodic round back.
            let mut next_round = Instant::now() + REBALANCE_WAIT_INTERVAL;
            loop {
                let wait = next_round.saturating_duration_since(Instant::now());
                crossbeam_channel::select! {
                    recv(rebalance_rx) -> r => if r.is_err() { return },
                    recv(jobs_rx) -> job => {
                        let Ok(job) = job else { return };
                        worker::run_caught("a rebalance-thread job", job);
                        continue;
                    }
                    default(wait) => {}
                }
                let Some(instance) = me.upgrade() else { return };
                worker::run_caught("a rebalance round", || instance.do_rebalance());
                next_round = Instant::now() + REBALANCE_WAIT_INTERVAL;
            }
        });
        let threads = match rebalance {
            Ok(r) => vec![pull, r],
            Err(e) => {
                drop(pull_tx); // ends the pull thread
                worker::join_all([pull], JOIN_TIMEOUT, "consumer services");
                return Err(Error::io("starting the rebalance service", e));
            }
        };
        Ok(ConsumerServices {
            pull_tx,
            rebalance_tx,
            rebalance_jobs: jobs_tx,
            delay,
            threads,
        })
    }

    /// Hands a pull request to the pull service now.
    pub(crate) fn execute_pull_request_immediately(&self, request: impl PullTask + 'static) {
        if let Some(s) = self.services.lock().as_ref() {
            let _ = s.pull_tx.send(Box::new(request));
        }
    }

    /// Hands a pull request to the pull service after `delay`.
    pub(crate) fn execute_pull_request_later(
        &self,
        request: impl PullTask + 'static,
        delay: Duration,
    ) {
        let guard = self.services.lock();
        let Some(s) = guard.as_ref() else { return };
        let tx = s.pull_tx.clone();
        let request: Box<dyn PullTask> = Box::new(request);
        if let Err(e) = s.delay.schedule_once("pull-later", delay, move || {
            let _ = tx.send(request);
            Ok(())
        }) {
            debug!("pull request dropped: {e}");
        }
    }

    /// Runs `job` on the pull-delay timer after `delay` (consume retries, lock refresh).
    pub(crate) fn schedule_later(
        &self,
        name: &str,
        delay: Duration,
        job: impl FnOnce() + Send + 'static,
    ) {
        let guard = self.services.lock();
        if let Some(s) = guard.as_ref() {
            let _ = s.delay.schedule_once(name, delay, move || {
                job();
                Ok(())
            });
        }
    }

    /// Wakes the rebalance service (Java `rebalanceImmediately`).
    /// Runs `job` on the rebalance thread before its next round: for broker calls that
    /// decide where a queue starts (Java runs `computePullFromWhere` there), which must
    /// not hold up the pull-delay timer that every consumer's delayed pulls share. False
    /// when the services are stopped (the job is dropped).
    pub(crate) fn run_on_rebalance_thread(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let guard = self.services.lock();
        guard
            .as_ref()
            .is_some_and(|s| s.rebalance_jobs.send(Box::new(job)).is_ok())
    }

    pub fn rebalance_immediately(&self) {
        if let Some(s) = self.services.lock().as_ref() {
            let _ = s.rebalance_tx.try_send(());
        }
    }

    /// One rebalance round for every consumer. A consumer whose rebalance panics is
    /// logged and the others still run.
    pub fn do_rebalance(&self) {
        let consumers: Vec<(String, Arc<dyn ConsumerInner>)> = self
            .consumers
            .read()
            .iter()
            .map(|(g, c)| (g.clone(), c.clone()))
            .collect();
        crate::stats::ClientCounters::bump(&self.counters.rebalances);
        for (group, c) in consumers {
            worker::run_caught(format_args!("the rebalance of group {group}"), || {
                c.do_rebalance()
            });
        }
    }
}
