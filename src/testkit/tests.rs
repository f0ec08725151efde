use super::*;

#[test]
fn broker_names() {
    assert_eq!(broker_name(0), "broker-a");
    assert_eq!(broker_name(2), "broker-c");
    assert_eq!(broker_name(25), "broker-z");
    assert_eq!(broker_name(26), "broker-26");
}

#[test]
fn bad_arguments_are_rejected() {
    let err = Cluster::builder().version("../x").validate();
    assert!(matches!(err, Err(TestkitError::InvalidArgument(_))));
    let err = Cluster::builder().name_servers(0).validate();
    assert!(matches!(err, Err(TestkitError::InvalidArgument(_))));
    let err = Cluster::builder().broker_config("a\nb", "1").validate();
    assert!(matches!(err, Err(TestkitError::InvalidArgument(_))));
    // 4.x binds every address: no proxy could take the advertised one.
    let err = Cluster::builder()
        .version("4.9.7")
        .broker_proxies(true)
        .validate();
    assert!(matches!(err, Err(TestkitError::InvalidArgument(_))));
    assert!(Cluster::builder().broker_proxies(true).validate().is_ok());
}

#[test]
fn cluster_can_live_in_a_static() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Cluster>();
}

#[test]
fn broker_conf_lets_callers_override() {
    let extra = vec![("autoCreateTopicEnable".to_string(), "false".to_string())];
    let conf = config::broker_conf(
        "broker-a",
        20000,
        "127.0.0.1:20000",
        "127.0.0.1:1",
        Path::new("/s"),
        &config::BrokerKind::Master,
        &extra,
    );
    let first = conf.find("autoCreateTopicEnable=true");
    let last = conf.find("autoCreateTopicEnable=false");
    assert!(first.is_some() && last > first);
    assert!(conf.contains("storePathCommitLog=/s/commitlog\n"));
    assert!(conf.contains("haListenPort=20001\n"));
}

#[test]
fn controller_mode_configs_name_the_controllers() {
    let controller = config::EmbeddedController {
        peers: "n0-127.0.0.1:20001",
        self_id: "n0",
    };
    let ns = config::namesrv_properties(20000, Path::new("/n"), Some(&controller));
    for line in [
        "enableControllerInNamesrv=true\n",
        "controllerDLegerPeers=n0-127.0.0.1:20001\n",
        "controllerDLegerSelfId=n0\n",
        "controllerStorePath=/n/controller\n",
    ] {
        assert!(ns.contains(line), "{line} in {ns}");
    }
    let kind = config::BrokerKind::Controlled {
        controllers: "127.0.0.1:20001".into(),
    };
    let conf = config::broker_conf(
        "broker-a",
        20010,
        "127.0.0.1:20010",
        "ns",
        Path::new("/s"),
        &kind,
        &[],
    );
    for line in [
        "enableControllerMode=true\n",
        "controllerAddr=127.0.0.1:20001\n",
        "allAckInSyncStateSet=true\n",
    ] {
        assert!(conf.contains(line), "{line} in {conf}");
    }
    let err = Cluster::builder()
        .version("4.9.7")
        .controller_mode(1)
        .validate();
    assert!(matches!(err, Err(TestkitError::InvalidArgument(_))));
}

#[test]
fn a_slave_conf_names_its_id_role_and_master() {
    let slave = config::BrokerKind::Slave { id: 1 };
    let conf = config::broker_conf(
        "broker-a",
        20010,
        "127.0.0.1:20010",
        "ns",
        Path::new("/s"),
        &slave,
        &[],
    );
    let last = |key: &str| {
        conf.lines()
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .next_back()
            .map(str::to_string)
    };
    assert_eq!(last("brokerName").as_deref(), Some("broker-a"));
    assert_eq!(last("brokerId").as_deref(), Some("1"));
    assert_eq!(last("brokerRole").as_deref(), Some("SLAVE"));
    assert_eq!(last("haListenPort").as_deref(), Some("20011"));
}

#[test]
fn a_proxied_broker_binds_loopback_and_advertises_its_proxy() {
    let conf = config::broker_conf(
        "broker-a",
        20000,
        "127.0.0.2:20000",
        "127.0.0.1:1",
        Path::new("/s"),
        &config::BrokerKind::Master,
        &[],
    );
    assert!(conf.contains("brokerIP1=127.0.0.2\n"));
    assert!(conf.contains("bindAddress=127.0.0.1\n"));
    assert!(conf.contains("listenPort=20000\n"));
}
