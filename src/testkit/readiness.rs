//! Readiness: following launched JVMs until they are up (port open, broker booted)
//! and the cluster is ready (a custom check, or registrations seen in the logs), with
//! early-exit detection, port-race retries and the 5.x registration nudge.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::process::{self, JvmProcess};
use super::{logs, ports, remoting, Cluster, Role, TestkitError, LOG_TAIL_LINES, PORT_ATTEMPTS};

const POLL: Duration = Duration::from_millis(100);
/// How long a booted broker may go unregistered before we nudge it, and how often.
const NUDGE_AFTER: Duration = Duration::from_millis(1500);
const NUDGE_EVERY: Duration = Duration::from_secs(3);

/// One start of one node, followed until it is ready.
pub(super) struct Launch {
    pub(super) role: Role,
    pub(super) idx: usize,
    pub(super) spawned: Instant,
    pub(super) out_offset: u64,
    pub(super) log_offset: u64,
    /// Length of each name server's log when this broker was spawned.
    pub(super) ns_offsets: Vec<u64>,
    pub(super) up_after: Option<Duration>,
    pub(super) last_nudge: Option<Instant>,
    pub(super) attempts: usize,
}

impl Cluster {
    /// Waits until every launched node is up (port open; broker booted), then, with
    /// `check_cluster`, until the cluster is ready (custom check, or every launched
    /// broker registered with every name server according to the logs).
    pub(super) fn await_ready(
        &mut self,
        launches: &mut [Launch],
        deadline: Instant,
        retry_ports: bool,
        check_cluster: bool,
    ) -> Result<(), TestkitError> {
        let began = Instant::now();
        let mut last_check_error: Option<String> = None;
        // When every JVM was first up: the readiness check has its own bound from there.
        let mut checks_began: Option<Instant> = None;
        loop {
            self.check_others_alive(launches)?;
            for launch in launches.iter_mut() {
                if launch.up_after.is_none() {
                    self.poll_launch(launch, retry_ports)?;
                }
            }
            for launch in launches.iter_mut() {
                self.nudge_if_unregistered(launch);
            }
            if launches.iter().all(|l| l.up_after.is_some()) {
                checks_began.get_or_insert_with(Instant::now);
                let ready = match &self.readiness {
                    _ if !check_cluster => true,
                    Some(check) => {
                        let expected: Vec<(String, String)> = self
                            .brokers
                            .iter()
                            .filter(|b| b.process.is_some())
                            .map(|b| (b.group.clone(), b.addr()))
                            .collect();
                        match check(&self.namesrv_addr(), &expected) {
                            Ok(ready) => ready,
                            Err(e) => {
                                last_check_error = Some(e);
                                false
                            }
                        }
                    }
                    None => launches.iter().all(|l| self.registered_everywhere(l)),
                };
                if ready {
                    for l in launches.iter() {
                        let node = &self.nodes(l.role)[l.idx];
                        info!(
                            "{} ({}) at {} up in {:.2}s, ready after {:.2}s",
                            node.name,
                            self.version,
                            node.addr(),
                            l.up_after.unwrap_or_default().as_secs_f64(),
                            l.spawned.elapsed().as_secs_f64()
                        );
                    }
                    return Ok(());
                }
            }
            let check_expired = match (checks_began, self.readiness_timeout) {
                (Some(t), Some(limit)) => t.elapsed() >= limit,
                _ => false,
            };
            if Instant::now() >= deadline || check_expired {
                return Err(self.timeout_error(launches, began, last_check_error));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Fails when a node that is not being launched right now died meanwhile (a name
    /// server crashing while the brokers start, say).
    fn check_others_alive(&mut self, launches: &[Launch]) -> Result<(), TestkitError> {
        for role in [Role::Namesrv, Role::Broker] {
            for idx in 0..self.nodes(role).len() {
                if launches.iter().any(|l| l.role == role && l.idx == idx) {
                    continue;
                }
                let node = &mut self.nodes_mut(role)[idx];
                let Some(p) = node.process.as_mut() else {
                    continue;
                };
                if let Some(status) = p.exit_status() {
                    let name = node.name.clone();
                    node.process = None;
                    return Err(self.exited_error(&name, Some(status)));
                }
            }
        }
        Ok(())
    }

    /// One readiness poll of one launch: notices an early exit (retrying a lost port
    /// race if allowed) and records when the node is up.
    fn poll_launch(&mut self, launch: &mut Launch, retry_ports: bool) -> Result<(), TestkitError> {
        let node = &mut self.nodes_mut(launch.role)[launch.idx];
        let name = node.name.clone();
        let exited = node.process.as_mut().and_then(JvmProcess::exit_status);
        if let Some(status) = exited {
            node.process = None;
            let out = logs::read_since(&self.out_file(&name), launch.out_offset);
            let lost_port_race = out.contains("Address already in use");
            if retry_ports && lost_port_race && launch.attempts < PORT_ATTEMPTS {
                warn!(
                    "{name} lost a port race ({out_tail}); retrying with new ports",
                    out_tail = out.lines().last().unwrap_or("")
                );
                self.repick_ports(launch.role, launch.idx)?;
                let attempts = launch.attempts + 1;
                *launch = self.launch(launch.role, launch.idx)?;
                launch.attempts = attempts;
                return Ok(());
            }
            return Err(self.exited_error(&name, Some(status)));
        }
        let node = &self.nodes(launch.role)[launch.idx];
        let up = match launch.role {
            Role::Namesrv => accepts(node.port),
            Role::Broker => {
                logs::read_since(&self.out_file(&name), launch.out_offset).contains("boot success")
                    && accepts(node.port)
            }
        };
        if up {
            let after = launch.spawned.elapsed();
            launch.up_after = Some(after);
            debug!(
                "{name} ({}) accepting connections after {:.2}s",
                self.version,
                after.as_secs_f64()
            );
        }
        Ok(())
    }

    /// See [`remoting`]: a booted broker that has not registered everywhere soon after
    /// boot is asked to register again instead of waiting for its 10 s timer.
    fn nudge_if_unregistered(&self, launch: &mut Launch) {
        let Some(up_after) = launch.up_after else {
            return;
        };
        if launch.role != Role::Broker
            || launch.spawned.elapsed() < up_after + NUDGE_AFTER
            || launch.last_nudge.is_some_and(|t| t.elapsed() < NUDGE_EVERY)
            || self.registered_everywhere(launch)
        {
            return;
        }
        launch.last_nudge = Some(Instant::now());
        let broker = &self.brokers[launch.idx];
        match self.nudge(broker.port) {
            Ok(()) => info!("{} booted but had not registered; asked it to", broker.name),
            Err(e) => warn!("{}: registration nudge failed: {e}", broker.name),
        }
    }

    /// Asks the broker at `port` to register again (see [`remoting`]).
    fn nudge(&self, port: u16) -> Result<(), String> {
        let permission = self
            .broker_extra
            .iter()
            .rev()
            .find(|(k, _)| k == "brokerPermission")
            .map_or("6", |(_, v)| v.as_str());
        remoting::nudge_registration(
            &SocketAddr::from(([127, 0, 0, 1], port)),
            permission,
            self.acl_admin(),
            self.client_tls(),
        )
    }

    /// Has every running slave (without controller mode) register again once the masters
    /// are registered: a slave learns its master's HA address only from the name server's
    /// answer to a registration, and one that registered before its master did would
    /// otherwise wait for its next periodic registration (30 s) to start replicating.
    pub(super) fn reregister_slaves(&self) {
        if self.controllers > 0 {
            return;
        }
        for b in self
            .brokers
            .iter()
            .filter(|b| b.ordinal > 0 && b.process.is_some())
        {
            if let Err(e) = self.nudge(b.port) {
                warn!("{}: registration nudge failed: {e}", b.name);
            }
        }
    }

    fn repick_ports(&mut self, role: Role, idx: usize) -> Result<(), TestkitError> {
        let offsets = role.port_offsets();
        let new_port = ports::pick(offsets)?;
        let node = &mut self.nodes_mut(role)[idx];
        ports::release(node.port, offsets);
        node.port = new_port;
        Ok(())
    }

    /// Whether the logs show that a launched broker registered with every name server.
    /// The broker logs each successful registration (5.x: `... completed.
    /// TargetHost=<ns>`, 4.9.x: `register broker[0]to name server <ns> OK`); the name
    /// server logs `new broker registered, ... 127.0.0.1:<port>` the first time.
    fn registered_everywhere(&self, launch: &Launch) -> bool {
        if launch.role != Role::Broker {
            return true;
        }
        let broker = &self.brokers[launch.idx];
        let broker_log = logs::read_since(&self.log_file(&broker.name), launch.log_offset);
        let broker_addr = broker.addr();
        self.namesrvs.iter().enumerate().all(|(i, ns)| {
            let ns_addr = ns.addr();
            if broker_log.contains(&format!("TargetHost={ns_addr}"))
                || broker_log.contains(&format!("to name server {ns_addr} OK"))
            {
                return true;
            }
            let offset = launch.ns_offsets.get(i).copied().unwrap_or(0);
            logs::read_since(&self.log_file(&ns.name), offset)
                .lines()
                .any(|l| l.contains("new broker registered") && contains_addr(l, &broker_addr))
        })
    }

    fn exited_error(&self, name: &str, status: Option<std::process::ExitStatus>) -> TestkitError {
        TestkitError::JvmExited {
            process: name.to_string(),
            status: process::describe(status),
            log_dir: self.log_dir.clone(),
            log_tail: self.tails(name),
        }
    }

    fn timeout_error(
        &self,
        launches: &[Launch],
        began: Instant,
        check_error: Option<String>,
    ) -> TestkitError {
        let pending: Vec<&Launch> = launches.iter().filter(|l| l.up_after.is_none()).collect();
        let mut log_tail = String::new();
        let what = if pending.is_empty() {
            if let Some(e) = &check_error {
                log_tail.push_str(&format!("last readiness check error: {e}\n"));
            }
            for (i, node) in self.namesrvs.iter().enumerate() {
                let launched = launches
                    .iter()
                    .any(|l| l.role == Role::Namesrv && l.idx == i);
                if !launched {
                    log_tail.push_str(&logs::tail(&self.log_file(&node.name), 10));
                }
            }
            for l in launches {
                log_tail.push_str(&self.tails(&self.nodes(l.role)[l.idx].name));
            }
            match self.readiness {
                Some(_) => "the custom readiness check".to_string(),
                None => "broker registration with every name server".to_string(),
            }
        } else {
            let names: Vec<String> = pending
                .iter()
                .map(|l| self.nodes(l.role)[l.idx].name.clone())
                .collect();
            for n in &names {
                log_tail.push_str(&self.tails(n));
            }
            format!("{} to accept connections / boot", names.join(", "))
        };
        TestkitError::Timeout {
            what,
            waited: began.elapsed(),
            log_dir: self.log_dir.clone(),
            log_tail,
        }
    }

    fn tails(&self, name: &str) -> String {
        let mut s = logs::tail(&self.out_file(name), LOG_TAIL_LINES);
        s.push_str(&logs::tail(&self.log_file(name), LOG_TAIL_LINES));
        s
    }
}

/// Whether `line` mentions `addr` exactly (`127.0.0.1:1234` must not match `...:12345`).
fn contains_addr(line: &str, addr: &str) -> bool {
    line.match_indices(addr).any(|(at, _)| {
        !line[at + addr.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

fn accepts(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addr_match_is_exact() {
        let line = "new broker registered, 127.0.0.1:30921 HAServer: 127.0.0.1:30922";
        assert!(contains_addr(line, "127.0.0.1:30921"));
        assert!(!contains_addr(line, "127.0.0.1:3092"));
        assert!(contains_addr("brokerAddr=127.0.0.1:5]", "127.0.0.1:5"));
    }
}
