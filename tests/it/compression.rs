//! Compressed bodies between the official Java 5.x client (`java/CompressInterop.java`)
//! and this client, both ways, for each of the three compression types (`compressType`):
//! the bodies read are byte-identical to those sent (SHA-1 on both sides) and the stored
//! `sysFlag` names the type the producer chose. The 4.x line has no compression types
//! (zlib only, checked in `producer.rs`), so these tests need a 5.x cluster.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use rocketmq_blocking::message::sys_flag;
use rocketmq_blocking::{
    CompressionType, ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer,
};
use sha1::{Digest, Sha1};

use crate::cluster;
use crate::consumer::wait_for;
use crate::java::{lines_after, JavaProgram};

const MESSAGES: usize = 5;
const SIZE: usize = 8192;
const JAVA_TIMEOUT: Duration = Duration::from_secs(180);
const TYPES: [(CompressionType, &str, i32); 3] = [
    (CompressionType::Lz4, "LZ4", sys_flag::COMPRESSION_LZ4),
    (CompressionType::Zstd, "ZSTD", sys_flag::COMPRESSION_ZSTD),
    (CompressionType::Zlib, "ZLIB", sys_flag::COMPRESSION_ZLIB),
];

/// The Java program, or `None` on a 4.x cluster.
fn java() -> Option<JavaProgram> {
    let version = cluster::cluster().lock().version().to_string();
    if version.starts_with("4.") {
        eprintln!("compression types need a 5.x broker and client; {version} has none");
        return None;
    }
    Some(JavaProgram::compile(
        &version,
        "tests/it/java/CompressInterop.java",
        "CompressInterop",
    ))
}

fn sha1_hex(body: &[u8]) -> String {
    Sha1::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A compressible body of `SIZE` bytes that differs per message.
fn body(i: usize) -> Vec<u8> {
    let unit = format!("rust message {i} of the compression interop test; ");
    unit.repeat(SIZE / unit.len() + 1).into_bytes()[..SIZE].to_vec()
}

#[test]
fn java_lz4_zstd_and_zlib_bodies_reach_a_rust_consumer_intact() {
    let Some(java) = java() else { return };
    for (_, name, flag) in TYPES {
        let topic = cluster::topic(&format!("jcomp_{name}"), 2);
        let out = java.run(
            &[],
            &[
                "produce",
                cluster::namesrv(),
                &topic,
                name,
                &MESSAGES.to_string(),
                &SIZE.to_string(),
            ],
            JAVA_TIMEOUT,
        );
        let sent: HashMap<String, String> = lines_after(&out, "SENT ")
            .iter()
            .filter_map(|l| l.split_once(' '))
            .map(|(id, sha)| (id.to_string(), sha.to_string()))
            .collect();
        assert_eq!(sent.len(), MESSAGES, "{out}");

        let got: std::sync::Arc<Mutex<HashMap<String, (String, i32)>>> = Default::default();
        let g = got.clone();
        let c = PushConsumer::builder(cluster::unique("jcomp_g"))
            .client_options(cluster::options())
            .subscribe(&topic, "*")
            .consume_from_where(ConsumeFromWhere::FirstOffset)
            .listener(move |msgs, _| {
                for m in msgs {
                    g.lock()
                        .insert(m.msg_id().to_string(), (sha1_hex(m.body()), m.sys_flag()));
                }
                ConsumeStatus::Success
            })
            .start()
            .unwrap();
        wait_for(
            &format!("{MESSAGES} {name} messages"),
            Duration::from_secs(60),
            || got.lock().len() >= MESSAGES,
        );
        c.shutdown();
        let got = got.lock();
        for (id, sha) in &sent {
            let (read, flags) = got.get(id).unwrap_or_else(|| panic!("{id} not consumed"));
            assert_eq!(read, sha, "{name}: the body of {id} differs");
            assert_eq!(
                flags & sys_flag::COMPRESSION_TYPE_MASK,
                flag,
                "{name}: {id}"
            );
            assert_eq!(
                flags & sys_flag::COMPRESSED,
                sys_flag::COMPRESSED,
                "{name}: {id}"
            );
        }
    }
}

#[test]
fn rust_lz4_zstd_and_zlib_bodies_reach_a_java_consumer_intact() {
    let Some(java) = java() else { return };
    for (kind, name, flag) in TYPES {
        let topic = cluster::topic(&format!("rcomp_{name}"), 2);
        let p = Producer::builder(cluster::unique("rcomp_pg"))
            .client_options(cluster::options())
            .compress_type(kind)
            .compress_over(1024)
            .start()
            .unwrap();
        let sent: HashMap<String, String> = (0..MESSAGES)
            .map(|i| {
                let b = body(i);
                let r = p.send(&Message::new(&topic, b.clone())).unwrap();
                (r.msg_id().to_string(), sha1_hex(&b))
            })
            .collect();
        p.shutdown();
        let group = cluster::unique("rcomp_g");
        let out = java.run(
            &[],
            &[
                "consume",
                cluster::namesrv(),
                &topic,
                &group,
                &MESSAGES.to_string(),
            ],
            JAVA_TIMEOUT,
        );
        let got: HashMap<String, (i32, String)> = lines_after(&out, "GOT ")
            .iter()
            .filter_map(|l| {
                let mut f = l.split(' ');
                let id = f.next()?.to_string();
                let flags = f.next()?.parse().ok()?;
                Some((id, (flags, f.next()?.to_string())))
            })
            .collect();
        assert_eq!(got.len(), MESSAGES, "{out}");
        for (id, sha) in &sent {
            let (flags, read) = got.get(id).unwrap_or_else(|| panic!("{id} not in:\n{out}"));
            assert_eq!(read, sha, "{name}: the body of {id} differs");
            assert_eq!(
                flags & sys_flag::COMPRESSION_TYPE_MASK,
                flag,
                "{name}: {id}"
            );
        }
    }
}
