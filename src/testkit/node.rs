//! One node of a cluster, a name server or a broker, and the ports and files that are its
//! identity across restarts.

use std::path::PathBuf;
use std::time::Duration;

use super::process::JvmProcess;
use super::proxy::TcpProxy;
use super::{ports, PROXY_HOST};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Role {
    Namesrv,
    Broker,
}

impl Role {
    /// Offsets from `listenPort` of every port the JVM binds.
    pub(super) fn port_offsets(self) -> &'static [i32] {
        match self {
            Role::Namesrv => ports::NAMESRV_OFFSETS,
            Role::Broker => ports::BROKER_OFFSETS,
        }
    }
}

/// One name server or broker: its identity is stable across restarts.
pub(super) struct Node {
    pub(super) role: Role,
    /// The node's own name (`namesrv-0`, `broker-a`, `broker-a-1`): logs, directories.
    pub(super) name: String,
    /// A broker's `brokerName` (its group).
    pub(super) group: String,
    /// A broker's place in its group: 0 for the master (the first node, in controller
    /// mode), else the slave's `brokerId`.
    pub(super) ordinal: i64,
    pub(super) port: u16,
    /// `<run>/<name>`: config file and pid file.
    pub(super) dir: PathBuf,
    pub(super) process: Option<JvmProcess>,
    /// Whether clients reach it through a proxy on `PROXY_HOST` (brokers only).
    pub(super) proxied: bool,
    /// The proxy, once the node was first launched; it lives across restarts.
    pub(super) proxy: Option<TcpProxy>,
}

impl Node {
    /// The address clients are given: the advertised one, behind the proxy if any.
    pub(super) fn addr(&self) -> String {
        if self.proxied {
            let [a, b, c, d] = PROXY_HOST;
            format!("{a}.{b}.{c}.{d}:{}", self.port)
        } else {
            format!("127.0.0.1:{}", self.port)
        }
    }

    /// Whether every port of the node can be bound again. With a proxy listening on
    /// the advertised address the wildcard check would always fail, so the node's own
    /// loopback address is checked (which any of the JVM's sockets still blocks).
    pub(super) fn ports_free(&self, timeout: Duration) -> bool {
        let ip = if self.proxied { "127.0.0.1" } else { "0.0.0.0" };
        ports::wait_free_on(ip, &self.ports(), timeout)
    }

    /// Where a name server's embedded controller listens (a port reserved with it).
    pub(super) fn controller_addr(&self) -> String {
        format!("127.0.0.1:{}", u32::from(self.port) + 1)
    }

    pub(super) fn ports(&self) -> Vec<u16> {
        ports::ports_of(self.port, self.role.port_offsets()).unwrap_or_default()
    }

    pub(super) fn conf_path(&self) -> PathBuf {
        match self.role {
            Role::Namesrv => self.dir.join("namesrv.conf"),
            Role::Broker => self.dir.join("broker.conf"),
        }
    }
}
