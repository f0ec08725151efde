//! The files the JVMs read: logback configuration, `namesrv.properties`, `broker.conf`,
//! and the JVM command line.

use std::ffi::OsString;
use std::fs;
use std::path::Path;

use super::TestkitError;

/// One logback configuration for every process and both RocketMQ lines: all loggers go
/// to one INFO file per process, named by the `rmq.testkit.logfile` system property.
/// 4.9.x reads it as `$ROCKETMQ_HOME/conf/logback_{namesrv,broker}.xml` (and exits when
/// that is missing); 5.x uses its shaded logback, pointed at it by
/// `-Drmq.logback.configurationFile`, which also keeps it from picking the first
/// `rmq.*.logback.xml` on the shared classpath (the broker's, for a name server too).
const LOGBACK_XML: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${rmq.testkit.logfile}</file>
    <append>true</append>
    <encoder>
      <pattern>%d{yyyy-MM-dd HH:mm:ss.SSS} %p [%t] %c - %m%n</pattern>
    </encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="FILE"/>
  </root>
</configuration>
"#;

pub(crate) const LOGBACK_5X_FILE: &str = "rmq.logback.xml";

/// Writes the logback files into `<rocketmq_home>/conf`.
pub(crate) fn write_logback(rocketmq_home: &Path) -> Result<(), TestkitError> {
    let conf = rocketmq_home.join("conf");
    fs::create_dir_all(&conf).map_err(|e| TestkitError::io("create conf dir", &conf, e))?;
    for name in ["logback_namesrv.xml", "logback_broker.xml", LOGBACK_5X_FILE] {
        write(&conf.join(name), LOGBACK_XML)?;
    }
    Ok(())
}

pub(crate) fn write(path: &Path, text: &str) -> Result<(), TestkitError> {
    fs::write(path, text).map_err(|e| TestkitError::io("write file", path, e))
}

/// A `key=value` line for a Java properties file.
fn prop(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    out.push('=');
    // Backslash is the only escape that matters for our values (paths, addresses).
    out.push_str(&value.replace('\\', "\\\\"));
    out.push('\n');
}

/// An embedded controller (5.x `enableControllerInNamesrv`): one peer of a DLedger group.
pub(crate) struct EmbeddedController<'a> {
    /// Every peer, `n0-127.0.0.1:p0;n1-127.0.0.1:p1` (Java `controllerDLegerPeers`).
    pub(crate) peers: &'a str,
    /// This peer's id in `peers` (`n0`, ...).
    pub(crate) self_id: &'a str,
}

/// Name server configuration; `dir` holds its kv and persisted config, and the store of
/// its embedded controller, if it runs one.
pub(crate) fn namesrv_properties(
    port: u16,
    dir: &Path,
    controller: Option<&EmbeddedController<'_>>,
) -> String {
    let mut s = String::from("# written by rocketmq-testkit\n");
    prop(&mut s, "listenPort", &port.to_string());
    // 5.x only; 4.9.x has no such key and binds the wildcard address.
    prop(&mut s, "bindAddress", "127.0.0.1");
    // 5.x: the name server's own client probes <first non-loopback IP>:<port> every
    // 3 s, which a loopback-bound server refuses, filling the log; nothing needs it.
    prop(&mut s, "scanAvailableNameSrv", "false");
    prop(
        &mut s,
        "kvConfigPath",
        &dir.join("kvConfig.json").to_string_lossy(),
    );
    prop(
        &mut s,
        "configStorePath",
        &dir.join("namesrv.properties").to_string_lossy(),
    );
    if let Some(c) = controller {
        // 5.x `ControllerConfig`, read from the same file when the name server embeds
        // the controller; it listens on its peer address in `controllerDLegerPeers`.
        prop(&mut s, "enableControllerInNamesrv", "true");
        prop(&mut s, "controllerDLegerGroup", "testkit");
        prop(&mut s, "controllerDLegerPeers", c.peers);
        prop(&mut s, "controllerDLegerSelfId", c.self_id);
        prop(
            &mut s,
            "controllerStorePath",
            &dir.join("controller").to_string_lossy(),
        );
        // The DLedger log's mapped files are 1 GiB by default.
        prop(&mut s, "mappedFileSize", "8388608");
    }
    s
}

/// What a broker is in its group.
pub(crate) enum BrokerKind {
    /// `brokerId` 0, `ASYNC_MASTER`.
    Master,
    /// `brokerId` `id`, `SLAVE`. It learns its master's HA address from the name
    /// server's answer to its registration: a `haMasterAddress` in the config is lost in
    /// 5.3.3 (`BrokerController.initialize` hands it to an HA client that
    /// `DefaultMessageStore.start` has not created yet, and then stops asking the name
    /// server), so the slave would never replicate.
    Slave { id: i64 },
    /// 5.x controller mode: the controllers at `controllers` (`;`-separated) give the
    /// broker its id and role; it starts as a slave, as in Apache's quick-start configs.
    Controlled { controllers: String },
}

/// Broker configuration; `extra` comes last so callers can override our defaults.
/// `advertised` is the `host:port` the broker registers with the name servers.
pub(crate) fn broker_conf(
    name: &str,
    port: u16,
    advertised: &str,
    namesrv_addr: &str,
    store: &Path,
    kind: &BrokerKind,
    extra: &[(String, String)],
) -> String {
    let mut s = String::from("# written by rocketmq-testkit\n");
    let store_s = store.to_string_lossy();
    let commitlog = store.join("commitlog");
    let port_s = port.to_string();
    let ha_port = (u32::from(port) + 1).to_string();
    let advertised_ip = advertised
        .rsplit_once(':')
        .map_or("127.0.0.1", |(ip, _)| ip);
    let defaults: [(&str, &str); 20] = [
        ("brokerClusterName", "DefaultCluster"),
        ("brokerName", name),
        ("brokerId", "0"),
        // What clients are given: `brokerIP1:listenPort` (5.x `getBrokerAddr`).
        ("brokerIP1", advertised_ip),
        // HA address; 5.x otherwise advertises the machine's first non-loopback address.
        ("brokerIP2", "127.0.0.1"),
        ("listenPort", &port_s),
        // 4.9.x always takes listenPort + 1; 5.x a set value, else the same.
        ("haListenPort", &ha_port),
        // 5.x: the remoting servers bind loopback only (the HA port stays wildcard).
        ("bindAddress", "127.0.0.1"),
        ("namesrvAddr", namesrv_addr),
        ("storePathRootDir", &store_s),
        ("storePathCommitLog", &commitlog.to_string_lossy()),
        // Small mapped files: they are sparse, but keep them small anyway.
        ("mappedFileSizeCommitLog", "67108864"),
        ("mappedFileSizeConsumeQueue", "600000"),
        ("maxHashSlotNum", "50000"),
        ("maxIndexNum", "200000"),
        ("autoCreateTopicEnable", "true"),
        ("autoCreateSubscriptionGroup", "true"),
        ("flushDiskType", "ASYNC_FLUSH"),
        // On a disk past 85% used the broker would otherwise delete commit-log files
        // that are not yet expired, taking messages a test still reads with them.
        ("cleanFileForciblyEnable", "false"),
        ("brokerRole", "ASYNC_MASTER"),
    ];
    for (k, v) in defaults {
        prop(&mut s, k, v);
    }
    match kind {
        BrokerKind::Master => {}
        BrokerKind::Slave { id } => {
            prop(&mut s, "brokerId", &id.to_string());
            prop(&mut s, "brokerRole", "SLAVE");
        }
        BrokerKind::Controlled { controllers } => {
            // The controller assigns the id (5.x persists it in the store).
            prop(&mut s, "brokerId", "-1");
            prop(&mut s, "brokerRole", "SLAVE");
            prop(&mut s, "enableControllerMode", "true");
            prop(&mut s, "controllerAddr", controllers);
            // A send is acknowledged once every replica of the sync state set has it,
            // so a promoted slave has every acknowledged message.
            prop(&mut s, "allAckInSyncStateSet", "true");
        }
    }
    for (k, v) in extra {
        prop(&mut s, k, v);
    }
    s
}

/// JVM properties of brokers only.
///
/// A broker refuses every write once its store's disk is more than 90% used. A test
/// machine's disk fills with build output, not with messages, so 4.9.x brokers are let
/// write up to 98%. (5.x caps both ratios at their defaults, 90% and 85%.)
pub(crate) fn broker_jvm_properties() -> Vec<OsString> {
    [
        "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.98",
        "-Drocketmq.broker.diskSpaceCleanForciblyRatio=0.97",
    ]
    .iter()
    .map(OsString::from)
    .collect()
}

/// JVM options common to name servers and brokers.
pub(crate) fn jvm_options(
    heap: &str,
    max_heap: &str,
    run_dir: &Path,
    rocketmq_home: &Path,
    log_file: &Path,
) -> Vec<OsString> {
    let mut v: Vec<OsString> = [
        heap,
        max_heap,
        // 5.x brokers' Netty pools and POP buffers outgrew 256 MiB in the shared
        // cluster of `tests/it` (an OutOfMemoryError on direct buffers after the POP,
        // auto-batch and lite-pull tests); the memory is taken only as it is used.
        "-XX:MaxDirectMemorySize=512m",
        "-XX:+UseG1GC",
        // Keeps the JVM from writing /tmp/hsperfdata_<user>/<pid>.
        "-XX:-UsePerfData",
        "--add-opens",
        "java.base/java.nio=ALL-UNNAMED",
        "--add-exports",
        "java.base/jdk.internal.ref=ALL-UNNAMED",
        "--add-exports",
        "java.base/sun.nio.ch=ALL-UNNAMED",
        "--add-opens",
        "java.base/java.lang=ALL-UNNAMED",
        "-XX:+IgnoreUnrecognizedVMOptions",
        // Creating the self-signed TLS context of the default "permissive" mode costs
        // ~1.5 s per JVM; the client speaks plain TCP.
        "-Dtls.server.mode=disabled",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let mut define = |key: &str, path: &Path| {
        let mut s = OsString::from(format!("-D{key}="));
        s.push(path);
        v.push(s);
    };
    // Nothing may land in the real home or /tmp.
    define("user.home", rocketmq_home);
    define("java.io.tmpdir", &run_dir.join("tmp"));
    define(
        "rmq.logback.configurationFile",
        &rocketmq_home.join("conf").join(LOGBACK_5X_FILE),
    );
    define("rmq.testkit.logfile", log_file);
    v
}
