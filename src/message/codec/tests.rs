use super::*;
use crate::message::property;
use crate::protocol::{frame_len, RemotingCommand, RequestCode, SerializeType, DEFAULT_MAX_FRAME};

use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// Property strings

fn check_props(input: &str, expected: &[(&str, &str)]) {
    let got = string_to_properties(input);
    let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(got, expected, "{input:?}");
}

#[test]
fn property_strings_parse_like_java() {
    check_props("", &[]);
    check_props("A\u{1}B", &[("A", "B")]);
    check_props("A\u{1}B\u{2}", &[("A", "B")]); // trailing separator of clients <= 4.9.0
    check_props("A\u{1}B\u{2}C\u{1}D", &[("A", "B"), ("C", "D")]);
    check_props(
        "TAGS\u{1}TAG\u{2}WAIT\u{1}true\u{2}KEYS\u{1}ffff\u{2}",
        &[("KEYS", "ffff"), ("TAGS", "TAG"), ("WAIT", "true")],
    );
    check_props("\u{1}B\u{2}C\u{1}D", &[("C", "D")]); // empty name dropped
    check_props("A\u{1}\u{2}C\u{1}D", &[("C", "D")]); // empty value dropped
    check_props("A\u{1}", &[]);
    check_props("\u{1}", &[]);
    check_props("\u{2}\u{2}\u{2}", &[]);
    check_props("AB", &[]); // no name/value separator
    check_props("AB\u{2}C\u{1}D", &[("C", "D")]); // Java's indexOf looks past the segment
    check_props("A\u{1}B\u{1}C", &[("A", "B\u{1}C")]); // first 0x01 splits
    check_props("A\u{1}1\u{2}A\u{1}2", &[("A", "2")]); // last value wins
    check_props("名字\u{1}值\u{2}é\u{1}x", &[("é", "x"), ("名字", "值")]);
    check_props("K\u{1}v w\u{2} \u{1} ", &[(" ", " "), ("K", "v w")]);
}

#[test]
fn property_strings_are_written_like_java() {
    assert_eq!(properties_to_string([]), "");
    assert_eq!(properties_to_string([("A", "B")]), "A\u{1}B");
    assert_eq!(
        properties_to_string([("A", "B"), ("C", "D")]),
        "A\u{1}B\u{2}C\u{1}D"
    );
    let m = Message::new("T", Vec::new())
        .with_tags("t")
        .with_keys(["k1", "k2"]);
    let s = properties_to_string(m.properties().collect::<Vec<_>>());
    assert_eq!(s, "KEYS\u{1}k1 k2\u{2}TAGS\u{1}t\u{2}WAIT\u{1}true");
    assert_eq!(string_to_properties(&s), m.properties_map());
}

// ---------------------------------------------------------------------------------------
// Batch bodies

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn batch_layout_is_byte_exact() {
    let mut a = Message::new("T", b"ab".to_vec());
    a.set_flag(7);
    let b = Message::new("T", b"xyz".to_vec()).with_tags("t");
    let got = encode_batch(&[a.clone(), b.clone()]).unwrap();
    let expected = cat(&[
        &33i32.to_be_bytes(), // 22 + 2 + 9
        &[0, 0, 0, 0],        // magic
        &[0, 0, 0, 0],        // crc
        &7i32.to_be_bytes(),
        &2i32.to_be_bytes(),
        b"ab",
        &9i16.to_be_bytes(),
        b"WAIT\x01true",
        &41i32.to_be_bytes(), // 22 + 3 + 16
        &[0, 0, 0, 0],
        &[0, 0, 0, 0],
        &0i32.to_be_bytes(),
        &3i32.to_be_bytes(),
        b"xyz",
        &16i16.to_be_bytes(),
        b"TAGS\x01t\x02WAIT\x01true",
    ]);
    assert_eq!(got, expected);
    let back = decode_batch(&got).unwrap();
    assert_eq!(back.len(), 2);
    for (m, orig) in back.iter().zip([&a, &b]) {
        assert_eq!(m.flag(), orig.flag());
        assert_eq!(m.body(), orig.body());
        assert_eq!(m.properties_map(), orig.properties_map());
    }
}

#[test]
fn batch_extra_properties_are_added_or_replace_their_names() {
    let a = Message::new("T", b"ab".to_vec()).with_tags("t");
    let mut b = Message::new("T", b"xyz".to_vec());
    b.put_property(property::UNIQ_KEY, "OLD");
    b.put_property(property::INSTANCE_ID, "old-ns");
    let msgs = [a.clone(), b.clone()];
    let ids = ["ID-A", "ID-B"];
    let got = encode_batch_with(&msgs, |i| {
        [
            Some((property::UNIQ_KEY, ids[i])),
            Some((property::INSTANCE_ID, "ns")),
        ]
    })
    .unwrap();
    let back = decode_batch(&got).unwrap();
    assert_eq!(back.len(), 2);
    for (i, (m, orig)) in back.iter().zip([&a, &b]).enumerate() {
        assert_eq!(m.body(), orig.body());
        assert_eq!(m.property(property::UNIQ_KEY), Some(ids[i]));
        assert_eq!(m.property(property::INSTANCE_ID), Some("ns"));
        // Every other property as it was, each name once.
        let mut expected = orig.properties_map();
        expected.insert(property::UNIQ_KEY.to_string(), ids[i].to_string());
        expected.insert(property::INSTANCE_ID.to_string(), "ns".to_string());
        assert_eq!(m.properties_map(), expected);
        assert_eq!(m.properties().count(), expected.len());
    }
    // Without extras, the same bytes as `encode_batch`.
    assert_eq!(
        encode_batch_with(&msgs, |_| [None, None]).unwrap(),
        encode_batch(&msgs).unwrap()
    );
}

#[test]
fn a_batch_written_after_other_bytes_is_the_same_body_and_its_length_is_known_first() {
    let a = Message::new("T", b"ab".to_vec()).with_tags("t");
    let mut b = Message::new("T", vec![7u8; 3000]);
    b.put_property(property::UNIQ_KEY, "OLD");
    let msgs = [a, b, Message::new("T", Vec::new())];
    let ids = ["ID-A", "ID-B", "ID-C"];
    let extra = |i: usize| {
        [
            Some((property::UNIQ_KEY, ids[i])),
            (i == 1).then_some((property::INSTANCE_ID, "ns")),
        ]
    };
    let body = encode_batch_with(&msgs, extra).unwrap();
    let len = batch_len_with(&msgs, extra).unwrap();
    assert_eq!(len, body.len());
    // Appended after a frame's header: the records start there, not at 0.
    let mut frame = b"header".to_vec();
    encode_batch_into(&msgs, extra, &mut frame).unwrap();
    assert_eq!(&frame[..6], b"header");
    assert_eq!(&frame[6..], &body[..]);
    let back = decode_batch(&frame[6..]).unwrap();
    assert_eq!(back.len(), 3);
    assert_eq!(back[1].property(property::UNIQ_KEY), Some("ID-B"));
    assert_eq!(back[1].body(), &[7u8; 3000][..]);
    assert_eq!(back[2].property(property::INSTANCE_ID), None);
}

#[test]
fn a_batch_too_big_for_its_fields_is_refused_by_its_length_before_it_is_written() {
    let mut m = Message::new("T", b"x".to_vec());
    m.put_property("big", "v".repeat(40_000));
    let msgs = [Message::new("T", b"ok".to_vec()), m];
    let e = batch_len_with(&msgs, |_| [None, None]).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("40014 bytes"), "{e}");
    // Written anyway, it stops at the same record with the same error.
    let mut buf = Vec::new();
    let e = encode_batch_into(&msgs, |_| [None, None], &mut buf).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
}

#[test]
fn batch_rejects_oversized_properties() {
    let mut m = Message::new("T", b"x".to_vec());
    m.put_property("big", "v".repeat(40_000));
    let e = encode_batch(&[m]).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
}

#[test]
fn malformed_batches_are_errors() {
    let good = encode_batch(&[Message::new("T", b"ab".to_vec())]).unwrap();
    for cut in 1..good.len() {
        assert!(decode_batch(&good[..cut]).is_err(), "cut at {cut}");
    }
    let mut small = good.clone();
    small[..4].copy_from_slice(&21i32.to_be_bytes());
    assert!(decode_batch(&small).is_err());
    let mut neg = good.clone();
    neg[16..20].copy_from_slice(&(-1i32).to_be_bytes());
    assert!(decode_batch(&neg).is_err());
    let mut long = good;
    long[..4].copy_from_slice(&40i32.to_be_bytes());
    long.extend_from_slice(&[0; 7]);
    assert!(decode_batch(&long).is_err(), "TOTALSIZE past the fields");
}

// ---------------------------------------------------------------------------------------
// Stored records, built field by field from the layout table (not with our encoder)

#[derive(Clone)]
struct Rec {
    total: Option<i32>,
    magic: i32,
    crc: i32,
    queue_id: i32,
    flag: i32,
    queue_offset: i64,
    phys: i64,
    sys_flag: i32,
    born_ts: i64,
    born_ip: Vec<u8>,
    born_port: i32,
    store_ts: i64,
    store_ip: Vec<u8>,
    store_port: i32,
    reconsume: i32,
    prepared: i64,
    body_len: Option<i32>,
    body: Vec<u8>,
    topic_len: Option<i32>,
    topic: Vec<u8>,
    props_len: Option<i16>,
    props: Vec<u8>,
}

impl Rec {
    fn sample() -> Rec {
        Rec {
            total: None,
            magic: MESSAGE_MAGIC_CODE,
            crc: body_crc32(b"hello"),
            queue_id: 3,
            flag: 0x55,
            queue_offset: 1000,
            phys: 0x1_63E6_0ADB,
            sys_flag: 0,
            born_ts: 1_700_000_000_000,
            born_ip: vec![192, 168, 0, 7],
            born_port: 54321,
            store_ts: 1_700_000_000_005,
            store_ip: vec![10, 2, 223, 165],
            store_port: 10911,
            reconsume: 2,
            prepared: 0,
            body_len: None,
            body: b"hello".to_vec(),
            topic_len: None,
            topic: b"TopicTest".to_vec(),
            props_len: None,
            props: b"TAGS\x01TagA\x02CLUSTER\x01DefaultCluster".to_vec(),
        }
    }

    fn v6(mut self) -> Rec {
        self.sys_flag |= sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6;
        self.born_ip = "2001:db8::7".parse::<Ipv6Addr>().unwrap().octets().to_vec();
        self.store_ip = "fe80::1:2".parse::<Ipv6Addr>().unwrap().octets().to_vec();
        self
    }

    fn compressed(mut self, type_bits: i32) -> Rec {
        self.body = compress(b"hello hello hello hello", 5);
        self.crc = body_crc32(&self.body);
        self.sys_flag |= sys_flag::COMPRESSED | type_bits;
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&self.magic.to_be_bytes());
        b.extend_from_slice(&self.crc.to_be_bytes());
        b.extend_from_slice(&self.queue_id.to_be_bytes());
        b.extend_from_slice(&self.flag.to_be_bytes());
        b.extend_from_slice(&self.queue_offset.to_be_bytes());
        b.extend_from_slice(&self.phys.to_be_bytes());
        b.extend_from_slice(&self.sys_flag.to_be_bytes());
        b.extend_from_slice(&self.born_ts.to_be_bytes());
        b.extend_from_slice(&self.born_ip);
        b.extend_from_slice(&self.born_port.to_be_bytes());
        b.extend_from_slice(&self.store_ts.to_be_bytes());
        b.extend_from_slice(&self.store_ip);
        b.extend_from_slice(&self.store_port.to_be_bytes());
        b.extend_from_slice(&self.reconsume.to_be_bytes());
        b.extend_from_slice(&self.prepared.to_be_bytes());
        let body_len = self.body_len.unwrap_or(self.body.len() as i32);
        b.extend_from_slice(&body_len.to_be_bytes());
        b.extend_from_slice(&self.body);
        let topic_len = self.topic_len.unwrap_or(self.topic.len() as i32);
        if self.magic == MESSAGE_MAGIC_CODE_V2 {
            b.extend_from_slice(&(topic_len as i16).to_be_bytes());
        } else {
            b.push(topic_len as i8 as u8);
        }
        b.extend_from_slice(&self.topic);
        let props_len = self.props_len.unwrap_or(self.props.len() as i16);
        b.extend_from_slice(&props_len.to_be_bytes());
        b.extend_from_slice(&self.props);
        let total = self.total.unwrap_or(b.len() as i32);
        b[..4].copy_from_slice(&total.to_be_bytes());
        b
    }
}

fn decode_one(bytes: &[u8], opts: DecodeOptions) -> Result<MessageExt, DecodeError> {
    let mut v = decode_messages(bytes, opts)?;
    assert_eq!(v.len(), 1);
    Ok(v.remove(0))
}

fn decode_err(rec: &Rec, opts: DecodeOptions) -> String {
    match decode_messages(&rec.bytes(), opts) {
        Ok(v) => panic!("decoded {} messages, expected an error", v.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn decodes_a_hand_built_ipv4_record() {
    let bytes = Rec::sample().bytes();
    assert_eq!(bytes.len(), 91 + 5 + 9 + 32);
    assert_eq!(
        body_crc32(b"hello"),
        907_060_870,
        "Java's CRC32 & 0x7FFFFFFF"
    );
    let m = decode_one(&bytes, DecodeOptions::new().check_crc(true)).unwrap();
    assert_eq!(m.store_size, bytes.len() as i32);
    assert_eq!(m.body_crc, body_crc32(b"hello"));
    assert_eq!(m.queue_id, 3);
    assert_eq!(m.flag(), 0x55);
    assert_eq!(m.queue_offset, 1000);
    assert_eq!(m.commit_log_offset, 0x1_63E6_0ADB);
    assert_eq!(m.sys_flag, 0);
    assert_eq!(m.born_timestamp, 1_700_000_000_000);
    assert_eq!(m.born_host, "192.168.0.7:54321".parse().unwrap());
    assert_eq!(m.store_timestamp, 1_700_000_000_005);
    assert_eq!(m.store_host, "10.2.223.165:10911".parse().unwrap());
    assert_eq!(m.reconsume_times, 2);
    assert_eq!(m.prepared_transaction_offset, 0);
    assert_eq!(m.body(), b"hello");
    assert_eq!(m.topic(), "TopicTest");
    assert_eq!(m.tags(), Some("TagA"));
    assert_eq!(m.property(property::CLUSTER), Some("DefaultCluster"));
    // The example of the fact sheet: 10.2.223.165:10911, offset 0x163E60ADB.
    assert_eq!(m.offset_msg_id(), "0A02DFA500002A9F0000000163E60ADB");
    assert_eq!(m.msg_id(), m.offset_msg_id(), "no UNIQ_KEY");
}

#[test]
fn decodes_ipv6_hosts() {
    let m = decode_one(&Rec::sample().v6().bytes(), DecodeOptions::new()).unwrap();
    assert_eq!(m.born_host, "[2001:db8::7]:54321".parse().unwrap());
    assert_eq!(m.store_host, "[fe80::1:2]:10911".parse().unwrap());
    assert_eq!(m.offset_msg_id().len(), 56);
    assert_eq!(
        decode_offset_msg_id(m.offset_msg_id()).unwrap(),
        (m.store_host, 0x1_63E6_0ADB)
    );
    assert_eq!(m.body(), b"hello");
    // Only the born host in IPv6.
    let mut r = Rec::sample();
    r.sys_flag = sys_flag::BORNHOST_V6;
    r.born_ip = vec![0; 16];
    let m = decode_one(&r.bytes(), DecodeOptions::new()).unwrap();
    assert!(m.born_host.is_ipv6() && m.store_host.is_ipv4());
}

#[test]
fn decodes_the_v2_magic_with_a_long_topic() {
    let mut r = Rec::sample();
    r.magic = MESSAGE_MAGIC_CODE_V2;
    r.topic = vec![b'x'; 300];
    let m = decode_one(&r.bytes(), DecodeOptions::new()).unwrap();
    assert_eq!(m.topic(), "x".repeat(300));
    assert_eq!(m.tags(), Some("TagA"));
}

#[test]
fn decompresses_zlib_bodies_of_type_0_and_3() {
    for bits in [0, sys_flag::COMPRESSION_ZLIB] {
        let r = Rec::sample().compressed(bits);
        let m = decode_one(&r.bytes(), DecodeOptions::new().check_crc(true)).unwrap();
        assert_eq!(m.body(), b"hello hello hello hello");
        assert_eq!(
            m.sys_flag & sys_flag::COMPRESSED,
            1,
            "flag kept as in 4.9.8"
        );
        let raw = decode_one(&r.bytes(), DecodeOptions::new().decompress(false)).unwrap();
        assert_eq!(raw.body(), r.body.as_slice());
    }
    // "hello hello hello hello" through Java's DeflaterOutputStream(new Deflater(5)).
    let java: &[u8] = &[
        0x78, 0x5e, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x57, 0xc8, 0x40, 0x27, 0x01, 0x68, 0x03, 0x08,
        0xb1,
    ];
    assert_eq!(decompress(java, 100).unwrap(), b"hello hello hello hello");
}

#[test]
fn lz4_and_zstd_bodies_decode_as_java_5_writes_them() {
    let body = b"hello hello hello hello";
    // Through Java 5.3.3's compressors: lz4-java's LZ4FrameOutputStream, and zstd-jni's
    // ZstdOutputStream at level 5.
    let java_lz4: &[u8] = &[
        0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0x73, 0x0f, 0x00, 0x00, 0x00, 0x68, 0x68, 0x65, 0x6c,
        0x6c, 0x6f, 0x20, 0x06, 0x00, 0x50, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x00, 0x00, 0x00, 0x00,
    ];
    let java_zstd: &[u8] = &[
        0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0x65, 0x00, 0x00, 0x30, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
        0x20, 0x01, 0x00, 0x99, 0x4b, 0x11,
    ];
    for (bits, java) in [
        (sys_flag::COMPRESSION_LZ4, java_lz4),
        (sys_flag::COMPRESSION_ZSTD, java_zstd),
    ] {
        let kind = CompressionType::of_flag(sys_flag::COMPRESSED | bits).unwrap();
        assert_eq!(kind.flag(), bits);
        assert_eq!(kind.decompress(java, 100).unwrap(), body, "{kind:?}");
        // Ours round-trip, inside a stored record too.
        let ours = kind.compress(body, 5);
        assert_eq!(kind.decompress(&ours, 100).unwrap(), body, "{kind:?}");
        let mut r = Rec::sample();
        r.body = java.to_vec();
        r.crc = body_crc32(&r.body);
        r.sys_flag |= sys_flag::COMPRESSED | bits;
        let m = decode_one(&r.bytes(), DecodeOptions::new().check_crc(true)).unwrap();
        assert_eq!(m.body(), body, "{kind:?}");
        // A truncated or corrupt frame is an error, never a panic.
        assert!(
            kind.decompress(&java[..java.len() / 2], 100).is_err(),
            "{kind:?}"
        );
        assert!(
            kind.decompress(b"not a frame at all", 100).is_err(),
            "{kind:?}"
        );
        assert!(kind.decompress(b"", 100).is_err(), "{kind:?}");
    }
    let e = decode_err(&Rec::sample().compressed(0x500), DecodeOptions::new());
    assert!(e.contains("unknown compression type 5"), "{e}");
}

#[test]
fn public_compression_calls_fail_with_the_crates_decode_error() {
    let e = CompressionType::of_flag(sys_flag::COMPRESSED | 0x500).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Decode);
    assert!(e.to_string().contains("unknown compression type 5"), "{e}");
    let e = CompressionType::Lz4.decompress(b"", 100).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Decode);
}

#[test]
fn lz4_and_zstd_bombs_stop_at_the_cap() {
    let zeros = vec![0u8; 2_000_000];
    for kind in [CompressionType::Lz4, CompressionType::Zstd] {
        let bomb = kind.compress(&zeros, 5);
        assert!(bomb.len() < 100_000, "{kind:?}: {}", bomb.len());
        assert_eq!(kind.decompress(&bomb, 2_000_000).unwrap().len(), 2_000_000);
        let e = kind.decompress(&bomb, 1_000_000).unwrap_err().to_string();
        assert!(e.contains("exceeds 1000000"), "{kind:?}: {e}");
        let mut r = Rec::sample();
        r.body = bomb;
        r.sys_flag = sys_flag::COMPRESSED | kind.flag();
        let e = decode_err(&r, DecodeOptions::new().max_body_len(1_000_000));
        assert!(e.contains("exceeds 1000000"), "{kind:?}: {e}");
    }
}

#[test]
fn decompression_is_capped() {
    let big = compress(&vec![0u8; 100_000], 5);
    assert!(big.len() < 1000);
    assert_eq!(decompress(&big, 100_000).unwrap().len(), 100_000);
    let e = decompress(&big, 99_999).unwrap_err().to_string();
    assert!(e.contains("exceeds 99999"), "{e}");
    assert!(decompress(&big, 0).is_err());
    assert!(
        decompress(&big[..big.len() - 1], 1 << 20).is_err(),
        "truncated"
    );
    assert!(decompress(b"\x78\x9c\xff\xff", 1 << 20).is_err(), "corrupt");
    assert!(decompress(b"", 1 << 20).is_err());
    assert_eq!(decompress(&compress(b"", 5), 0).unwrap(), b"");

    let mut r = Rec::sample();
    r.body = big;
    r.sys_flag = sys_flag::COMPRESSED;
    let e = decode_err(&r, DecodeOptions::new().max_body_len(50_000));
    assert!(e.contains("exceeds 50000"), "{e}");
    // Two records of 100 000 bytes each against a total budget of 150 000.
    let two = [r.bytes(), r.bytes()].concat();
    assert!(decode_messages(&two, DecodeOptions::new()).is_ok());
    let e = decode_messages(&two, DecodeOptions::new().max_total_body_len(150_000))
        .unwrap_err()
        .to_string();
    assert!(e.contains("message 1") && e.contains("all bodies"), "{e}");
}

#[test]
fn crc_mismatch_is_detected_when_enabled() {
    let mut r = Rec::sample();
    r.crc ^= 1;
    let e = decode_err(&r, DecodeOptions::new().check_crc(true));
    assert!(e.contains("CRC"), "{e}");
    assert!(
        decode_one(&r.bytes(), DecodeOptions::new()).is_ok(),
        "off by default"
    );
    // The CRC covers the stored (compressed) bytes.
    let r = Rec::sample().compressed(0);
    assert!(decode_one(&r.bytes(), DecodeOptions::new().check_crc(true)).is_ok());
}

fn two_records() -> (Vec<u8>, usize) {
    let a = Rec::sample().bytes();
    let b = Rec::sample().v6().compressed(0).bytes();
    let boundary = a.len();
    ([a, b].concat(), boundary)
}

#[test]
fn truncation_at_every_offset_is_an_error_or_the_complete_prefix() {
    let (body, boundary) = two_records();
    let full = decode_messages(&body, DecodeOptions::new().check_crc(true)).unwrap();
    assert_eq!(full.len(), 2);
    for cut in 0..=body.len() {
        match decode_messages(&body[..cut], DecodeOptions::new().check_crc(true)) {
            Ok(v) => {
                let expected = match cut {
                    0 => 0,
                    c if c == boundary => 1,
                    c if c == body.len() => 2,
                    c => panic!("cut at {c} decoded {} messages", v.len()),
                };
                assert_eq!(v, full[..expected], "cut at {cut}");
            }
            Err(_) => assert!(cut != 0 && cut != boundary && cut != body.len()),
        }
    }
}

#[test]
fn lengths_that_disagree_with_totalsize_are_errors() {
    let check = |r: Rec, what: &str| {
        let e = decode_err(&r, DecodeOptions::new());
        assert!(!e.is_empty(), "{what}");
    };
    let mut r = Rec::sample();
    r.total = Some(90);
    check(r, "TOTALSIZE below the smallest record");
    let mut r = Rec::sample();
    r.total = Some(100); // the fields need 137
    check(r, "TOTALSIZE smaller than its fields");
    let mut r = Rec::sample();
    r.total = Some(138);
    check(r, "TOTALSIZE past the input");
    let mut r = Rec::sample();
    r.total = Some(-5);
    check(r, "negative TOTALSIZE");
    let mut r = Rec::sample();
    r.body_len = Some(-1);
    check(r, "negative body length");
    let mut r = Rec::sample();
    r.body_len = Some(i32::MAX);
    check(r, "body length past the record");
    let mut r = Rec::sample();
    r.topic_len = Some(-3);
    check(r, "negative topic length");
    let mut r = Rec::sample();
    r.magic = MESSAGE_MAGIC_CODE_V2;
    r.topic_len = Some(-3);
    check(r, "negative V2 topic length");
    let mut r = Rec::sample();
    r.props_len = Some(-1);
    check(r, "negative properties length");
    let mut r = Rec::sample();
    r.props_len = Some(i16::MAX);
    check(r, "properties length past the record");
    let mut r = Rec::sample();
    r.born_port = 70_000;
    check(r, "port out of range");
    let mut r = Rec::sample();
    r.store_port = -1;
    check(r, "negative port");
    let mut r = Rec::sample();
    r.magic = 0xCBD4_3194_u32 as i32;
    let e = decode_err(&r, DecodeOptions::new());
    assert!(e.contains("0xCBD43194"), "{e}");
    let mut r = Rec::sample();
    r.sys_flag = sys_flag::STOREHOST_V6; // claims 16 address bytes, has 4
    check(r, "host bit without the bytes");

    // Bytes inside TOTALSIZE after the properties.
    let mut b = Rec::sample().bytes();
    b.extend_from_slice(&[0; 3]);
    let total = b.len() as i32;
    b[..4].copy_from_slice(&total.to_be_bytes());
    let e = decode_messages(&b, DecodeOptions::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("leaves 3 bytes"), "{e}");
}

#[test]
fn errors_name_the_record_and_its_offset() {
    let (mut body, boundary) = two_records();
    body[boundary + 4] ^= 0xFF; // second record's magic
    let e = decode_messages(&body, DecodeOptions::new())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("message 1 at offset {boundary}:")),
        "{e}"
    );
}

#[test]
fn invalid_utf8_in_topic_and_properties_is_replaced_like_java() {
    let mut r = Rec::sample();
    r.topic = b"T\xffT".to_vec();
    r.props = b"K\x01v\xfe".to_vec();
    let m = decode_one(&r.bytes(), DecodeOptions::new()).unwrap();
    assert_eq!(m.topic(), "T\u{FFFD}T");
    assert_eq!(m.property("K"), Some("v\u{FFFD}"));
}

#[test]
fn empty_input_is_no_messages() {
    assert!(decode_messages(&[], DecodeOptions::new())
        .unwrap()
        .is_empty());
    assert!(decode_batch(&[]).unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------
// Our encoder

#[test]
fn encoder_writes_the_hand_built_layout() {
    let r = Rec::sample();
    let m = decode_one(&r.bytes(), DecodeOptions::new()).unwrap();
    // Properties come back sorted; rebuild the expected bytes in that order.
    let mut expected = r.clone();
    expected.props = b"CLUSTER\x01DefaultCluster\x02TAGS\x01TagA".to_vec();
    assert_eq!(encode_message_ext(&m).unwrap(), expected.bytes());
}

#[test]
fn encoder_fixes_host_bits_magic_and_compression_type() {
    let mut m = decode_one(&Rec::sample().bytes(), DecodeOptions::new()).unwrap();
    m.store_host = "[::1]:10911".parse().unwrap();
    m.sys_flag = sys_flag::BORNHOST_V6 | sys_flag::COMPRESSED | sys_flag::COMPRESSION_LZ4;
    m.message.set_topic("t".repeat(200));
    let bytes = encode_message_ext(&m).unwrap();
    assert_eq!(&bytes[4..8], &MESSAGE_MAGIC_CODE_V2.to_be_bytes());
    let back = decode_one(&bytes, DecodeOptions::new().check_crc(true)).unwrap();
    assert_eq!(
        back.sys_flag,
        sys_flag::STOREHOST_V6 | sys_flag::COMPRESSED | sys_flag::COMPRESSION_LZ4
    );
    assert_eq!(back.body(), m.body());
    assert_eq!(back.topic(), m.topic());
    assert_eq!(back.store_host, m.store_host);

    m.message.set_topic("t".repeat(40_000));
    assert!(encode_message_ext(&m).is_err());
}

// ---------------------------------------------------------------------------------------
// offsetMsgId

#[test]
fn offset_msg_id_matches_the_captured_example() {
    let id = "0A02DFA500002A9F0000000163E60ADB";
    let (host, offset) = decode_offset_msg_id(id).unwrap();
    assert_eq!(host, "10.2.223.165:10911".parse().unwrap());
    assert_eq!(offset, 0x1_63E6_0ADB);
    assert_eq!(create_offset_msg_id(host, offset), id);
    assert_eq!(
        decode_offset_msg_id(&id.to_lowercase()).unwrap(),
        (host, offset)
    );
}

#[test]
fn offset_msg_id_handles_ipv6_and_rejects_garbage() {
    let host: SocketAddr = "[2001:db8::1]:65535".parse().unwrap();
    let id = create_offset_msg_id(host, -1);
    assert_eq!(id.len(), 56);
    assert!(id.starts_with("20010DB8") && id.ends_with("0000FFFFFFFFFFFFFFFFFFFF"));
    assert_eq!(decode_offset_msg_id(&id).unwrap(), (host, -1));
    for bad in [
        "",
        "0A02DFA500002A9F0000000163E60AD",
        "0A02DFA500002A9F0000000163E60ADBX",
        "0A02DFA500002A9F0000000163E60ADG",
        "0A02DFA5FFFFFFFF0000000163E60ADB", // port -1
        "é1234567890123456789012345678901",
    ] {
        assert!(decode_offset_msg_id(bad).is_err(), "{bad:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Round trips

fn arb_host() -> impl Strategy<Value = SocketAddr> {
    (any::<IpAddr>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(ip, port))
}

fn arb_properties() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map("[^\\x01\\x02]{1,12}", "[^\\x02]{1,24}", 0..8)
}

prop_compose! {
    fn arb_message_ext()(
        topic in ".{0,160}",
        flag in any::<i32>(),
        properties in arb_properties(),
        body in proptest::collection::vec(any::<u8>(), 0..1500),
        compressed in any::<bool>(),
        zlib_type in prop_oneof![Just(0), Just(sys_flag::COMPRESSION_ZLIB)],
        other_bits in any::<i32>(),
        born_host in arb_host(),
        store_host in arb_host(),
        nums in (any::<i32>(), any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        more in (any::<i32>(), any::<i64>()),
    ) -> MessageExt {
        let mut message = Message::empty(topic, body);
        message.set_flag(flag);
        message.set_properties(properties);
        let mut sys = other_bits
            & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6 | sys_flag::COMPRESSED);
        if compressed {
            sys = (sys & !sys_flag::COMPRESSION_TYPE_MASK) | sys_flag::COMPRESSED | zlib_type;
        }
        if born_host.is_ipv6() {
            sys |= sys_flag::BORNHOST_V6;
        }
        if store_host.is_ipv6() {
            sys |= sys_flag::STOREHOST_V6;
        }
        let (queue_id, queue_offset, commit_log_offset, born_timestamp, store_timestamp) = nums;
        MessageExt {
            message,
            broker_name: std::sync::Arc::from(""),
            queue_id,
            store_size: 0,
            queue_offset,
            sys_flag: sys,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            offset_msg_id: std::sync::OnceLock::from(create_offset_msg_id(store_host, commit_log_offset)),
            commit_log_offset,
            body_crc: 0,
            reconsume_times: more.0,
            prepared_transaction_offset: more.1,
        }
    }
}

proptest! {
    #[test]
    fn encode_then_decode_gives_the_message_back(
        msgs in proptest::collection::vec(arb_message_ext(), 1..4)
    ) {
        let mut body = Vec::new();
        for m in &msgs {
            body.extend_from_slice(&encode_message_ext(m).unwrap());
        }
        let back = decode_messages(&body, DecodeOptions::new().check_crc(true)).unwrap();
        prop_assert_eq!(back.len(), msgs.len());
        let shared = decode_messages_shared(Arc::new(body.clone()), DecodeOptions::new());
        prop_assert!(shared.skipped.is_empty());
        prop_assert_eq!(&shared.messages, &back, "bodies shared with the pull decode the same");
        let mut at = 0;
        for (got, orig) in back.iter().zip(&msgs) {
            let len = got.store_size as usize;
            let stored = decode_one(&body[at..at + len], DecodeOptions::new().decompress(false))
                .unwrap();
            prop_assert_eq!(got.body_crc, body_crc32(stored.body()));
            let mut expected = orig.clone();
            expected.store_size = got.store_size;
            expected.body_crc = got.body_crc;
            prop_assert_eq!(got, &expected);
            at += len;
        }
        prop_assert_eq!(at, body.len());
    }

    #[test]
    fn property_strings_round_trip(props in arb_properties()) {
        let s = properties_to_string(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        prop_assert_eq!(string_to_properties(&s), props.clone());
        // With the trailing separator of old clients too.
        prop_assert_eq!(string_to_properties(&format!("{s}\u{2}")), props);
    }

    #[test]
    fn batches_round_trip(bodies in proptest::collection::vec(
        (proptest::collection::vec(any::<u8>(), 0..300), arb_properties(), any::<i32>()), 0..5)
    ) {
        let msgs: Vec<Message> = bodies
            .into_iter()
            .map(|(body, props, flag)| {
                let mut m = Message::empty(String::new(), body);
                m.set_properties(props);
                m.set_flag(flag);
                m
            })
            .collect();
        let bytes = encode_batch(&msgs).unwrap();
        prop_assert_eq!(decode_batch(&bytes).unwrap(), msgs);
    }
}

// ---------------------------------------------------------------------------------------
// Robustness: a deterministic stand-in for the cargo-fuzz targets in fuzz/

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let (two, _) = two_records();
    let mut v2 = Rec::sample();
    v2.magic = MESSAGE_MAGIC_CODE_V2;
    let mut frames = Vec::new();
    for ty in [SerializeType::Json, SerializeType::RocketMq] {
        let mut c = RemotingCommand::request(RequestCode::PULL_MESSAGE);
        c.serialize_type = ty;
        c.ext_fields.insert("topic", "TopicTest");
        c.remark = Some("r".into());
        c.body = two.clone();
        frames.push(c.to_frame());
    }
    let batch = encode_batch(&[
        Message::new("T", b"ab".to_vec()),
        Message::new("T", b"c".to_vec()).with_tags("x"),
    ])
    .unwrap();
    vec![
        two,
        v2.bytes(),
        frames[0].clone(),
        frames[1].clone(),
        batch,
        compress(b"hello hello hello", 5),
        b"0A02DFA500002A9F0000000163E60ADB".to_vec(),
        b"A\x01B\x02C\x01D\x02".to_vec(),
    ]
}

fn mutate(rng: &mut XorShift, input: &mut Vec<u8>) {
    const INTERESTING: [i32; 9] = [0, 1, -1, 4, 91, 127, i16::MAX as i32, i32::MAX, i32::MIN];
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] = rng.next() as u8;
            }
            1 if input.len() >= 4 => {
                let i = rng.below(input.len() - 3);
                let v = INTERESTING[rng.below(INTERESTING.len())];
                input[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            2 => input.truncate(rng.below(input.len() + 1)),
            3 => {
                let i = rng.below(input.len() + 1);
                let n = rng.below(8);
                for _ in 0..n {
                    input.insert(i, rng.next() as u8);
                }
            }
            4 if !input.is_empty() => {
                let i = rng.below(input.len());
                let n = rng.below(input.len() - i).min(64);
                let chunk = input[i..i + n].to_vec();
                input.extend_from_slice(&chunk);
            }
            _ if input.len() >= 2 => {
                let i = rng.below(input.len() - 1);
                input[i] ^= 1 << rng.below(8);
            }
            _ => {}
        }
    }
}

/// Every decoder over one input; the fuzz targets call the same two entry points.
/// Returns whether the input decoded as a pull body.
fn run_all_decoders(input: &[u8]) -> bool {
    let opts = DecodeOptions::new()
        .check_crc(true)
        .max_body_len(1 << 20)
        .max_total_body_len(4 << 20);
    let decoded = decode_messages(input, opts);
    let shared = decode_messages_shared(Arc::new(input.to_vec()), opts);
    let lenient = decode_messages_lenient(input, opts);
    assert_eq!(shared.messages, lenient.messages);
    assert_eq!(shared.skipped, lenient.skipped);
    // The lenient decoder accounts for every byte, in order, and agrees with the strict
    // one whenever that one succeeds.
    let mut at = 0;
    for s in &lenient.skipped {
        assert!(s.at >= at && s.len > 0 && s.at + s.len <= input.len());
        at = s.at + s.len;
    }
    let covered: usize = lenient.skipped.iter().map(|s| s.len).sum::<usize>()
        + lenient
            .messages
            .iter()
            .map(|m| m.store_size as usize)
            .sum::<usize>();
    assert_eq!(covered, input.len());
    match &decoded {
        Ok(v) => {
            assert_eq!(v, &lenient.messages);
            assert!(lenient.skipped.is_empty());
        }
        Err(_) => assert!(!lenient.skipped.is_empty()),
    }
    let _ = decode_messages(input, DecodeOptions::new().decompress(false));
    let _ = decode_batch(input);
    let _ = decompress(input, 1 << 16);
    let text = String::from_utf8_lossy(input);
    let _ = string_to_properties(&text);
    let _ = decode_offset_msg_id(&text);
    if let Ok(Some(n)) = frame_len(input, DEFAULT_MAX_FRAME) {
        if let Some(frame) = input.get(4..4 + n) {
            let _ = RemotingCommand::decode(frame);
        }
    }
    let _ = RemotingCommand::decode(input);
    decoded.is_ok_and(|v| !v.is_empty())
}

#[test]
fn fuzz_like_random_inputs_never_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let seeds = seeds();
    for s in &seeds {
        run_all_decoders(s);
    }
    let rounds = 200_000;
    let mut decoded = 0;
    for i in 0..rounds {
        let input = if i % 4 == 0 {
            let len = rng.below(300);
            (0..len).map(|_| rng.next() as u8).collect()
        } else {
            let mut v = seeds[rng.below(seeds.len())].clone();
            mutate(&mut rng, &mut v);
            v
        };
        decoded += usize::from(run_all_decoders(&input));
    }
    // Mutations that keep a body valid (a flipped body or timestamp byte) must still occur,
    // or the inputs would only exercise the first checks.
    println!("{decoded} of {rounds} inputs decoded as a pull body");
    assert!(decoded > rounds / 100, "{decoded}");
}

// ---------------------------------------------------------------------------------------
// Measurements (printed, not asserted; run with --release --nocapture)

#[test]
fn measure_decode_of_a_32_message_pull_body() {
    let mut body = Vec::new();
    let mut r = Rec::sample();
    r.body = vec![b'x'; 1024];
    r.crc = body_crc32(&r.body);
    r.props = b"TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x017F0000010001136F8C5A5B34C69A0000\x02CLUSTER\x01DefaultCluster\x02MIN_OFFSET\x010\x02MAX_OFFSET\x0132".to_vec();
    for _ in 0..32 {
        body.extend_from_slice(&r.bytes());
    }
    let iters = if cfg!(debug_assertions) { 50 } else { 5_000 };
    for crc in [false, true] {
        let opts = DecodeOptions::new().check_crc(crc);
        let start = std::time::Instant::now();
        for _ in 0..iters {
            let v = decode_messages(std::hint::black_box(&body), opts).unwrap();
            assert_eq!(v.len(), 32);
        }
        let per_msg = start.elapsed().as_nanos() / (iters * 32) as u128;
        println!(
            "decode 32 x 1 KiB pull body ({} bytes), crc check {crc}: {per_msg} ns/message",
            body.len()
        );
    }
    let shared = Arc::new(body.clone());
    let start = std::time::Instant::now();
    for _ in 0..iters {
        let v = decode_messages_shared(shared.clone(), DecodeOptions::new());
        assert_eq!(v.messages.len(), 32);
    }
    println!(
        "decode 32 x 1 KiB pull body, bodies shared: {} ns/message",
        start.elapsed().as_nanos() / (iters * 32) as u128
    );
    let start = std::time::Instant::now();
    let n = if cfg!(debug_assertions) {
        10_000
    } else {
        1_000_000
    };
    for _ in 0..n {
        std::hint::black_box(crate::message::uniq::create_uniq_id());
    }
    println!(
        "create_uniq_id: {} ns/id",
        start.elapsed().as_nanos() / n as u128
    );
}

// ---------------------------------------------------------------------------------------
// Lenient decoding (pull bodies): a record that cannot be decoded is skipped, not fatal

/// Three records at queue offsets 10, 11, 12, the middle one built by `corrupt`.
fn three_with_a_bad_middle(corrupt: impl FnOnce(Rec) -> Rec) -> Vec<u8> {
    let at = |offset: i64| {
        let mut r = Rec::sample();
        r.queue_offset = offset;
        r
    };
    [at(10).bytes(), corrupt(at(11)).bytes(), at(12).bytes()].concat()
}

/// Decodes `body` leniently: the messages at offsets 10 and 12 come back and the one at
/// 11 is reported skipped, with its error (which must contain `why`).
fn check_middle_skipped(body: &[u8], opts: DecodeOptions, why: &str) {
    let d = decode_messages_lenient(body, opts);
    let offsets: Vec<i64> = d.messages.iter().map(|m| m.queue_offset).collect();
    assert_eq!(offsets, [10, 12], "{why}");
    assert!(d.messages.iter().all(|m| m.body() == b"hello"), "{why}");
    assert_eq!(d.skipped.len(), 1, "{why}");
    let s = &d.skipped[0];
    assert_eq!((s.index, s.queue_offset), (1, Some(11)), "{why}");
    let first = Rec::sample().bytes().len();
    assert_eq!(s.at, first, "{why}");
    assert!(s.error.to_string().contains(why), "{why}: {}", s.error);
    assert!(
        decode_messages(body, opts).is_err(),
        "{why}: the strict decoder still refuses the body"
    );
}

#[test]
fn a_corrupt_record_in_the_middle_is_skipped_and_the_others_decode() {
    let o = DecodeOptions::new();
    let zlib_bomb = compress(&vec![0u8; 2_000_000], 9);
    type Corrupt = Box<dyn FnOnce(Rec) -> Rec>;
    let cases: Vec<(&str, DecodeOptions, Corrupt)> = vec![
        (
            "body CRC",
            o.check_crc(true),
            Box::new(|mut r: Rec| {
                r.crc ^= 1;
                r
            }),
        ),
        (
            "unknown magic code",
            o,
            Box::new(|mut r: Rec| {
                r.magic = 0x1234_5678;
                r
            }),
        ),
        (
            "length 32767", // the properties length
            o,
            Box::new(|mut r: Rec| {
                r.props_len = Some(i16::MAX);
                r
            }),
        ),
        (
            "length 1048576", // the body length
            o,
            Box::new(|mut r: Rec| {
                r.body_len = Some(1 << 20);
                r
            }),
        ),
        (
            "exceeds 1000000",
            o.max_body_len(1_000_000),
            Box::new(move |mut r: Rec| {
                r.body = zlib_bomb;
                r.sys_flag |= sys_flag::COMPRESSED;
                r
            }),
        ),
        (
            "unknown compression type 5",
            o,
            Box::new(|r: Rec| r.compressed(0x500)),
        ),
        (
            "corrupt LZ4 body",
            o,
            // A zlib stream flagged as LZ4.
            Box::new(|r: Rec| r.compressed(sys_flag::COMPRESSION_LZ4)),
        ),
        (
            "zlib",
            o,
            Box::new(|mut r: Rec| {
                r.body = b"\x78\x9c\xff\xff not zlib".to_vec();
                r.sys_flag |= sys_flag::COMPRESSED;
                r
            }),
        ),
    ];
    for (why, opts, corrupt) in cases {
        check_middle_skipped(&three_with_a_bad_middle(corrupt), opts, why);
    }
}

#[test]
fn a_totalsize_that_cannot_be_trusted_skips_the_rest_of_the_body() {
    for total in [-1, 5, i32::MAX] {
        let body = three_with_a_bad_middle(|mut r| {
            r.total = Some(total);
            r
        });
        let d = decode_messages_lenient(&body, DecodeOptions::new());
        assert_eq!(d.messages.len(), 1, "TOTALSIZE {total}");
        assert_eq!(d.messages[0].queue_offset, 10);
        assert_eq!(d.skipped.len(), 1);
        let s = &d.skipped[0];
        assert_eq!(s.at + s.len, body.len(), "the rest of the body is skipped");
        assert_eq!(s.queue_offset, Some(11), "read from the record's header");
        assert!(
            s.error.to_string().contains("message 1 at offset"),
            "{}",
            s.error
        );
    }
    // A body cut inside the last record: the first two decode.
    let body = three_with_a_bad_middle(|r| r);
    let d = decode_messages_lenient(&body[..body.len() - 3], DecodeOptions::new());
    assert_eq!(d.messages.len(), 2);
    assert_eq!(d.skipped.len(), 1);
    assert_eq!(d.skipped[0].queue_offset, Some(12));
    // A clean body skips nothing.
    let d = decode_messages_lenient(&body, DecodeOptions::new());
    assert_eq!((d.messages.len(), d.skipped.len()), (3, 0));
}

#[test]
fn records_of_a_body_share_a_topic_only_when_theirs_is_the_same() {
    let rec = |topic: &[u8]| {
        let mut r = Rec::sample();
        r.topic = topic.to_vec();
        r.bytes()
    };
    let body = [
        rec(b"A"),
        rec(b"B"),
        rec(b"B"),
        rec(b"T\xffT"),
        rec(b"T\xffT"),
        rec(b"A"),
    ]
    .concat();
    let topics: Vec<String> = decode_messages(&body, DecodeOptions::new())
        .unwrap()
        .iter()
        .map(|m| m.topic().to_string())
        .collect();
    assert_eq!(topics, ["A", "B", "B", "T\u{FFFD}T", "T\u{FFFD}T", "A"]);
    // The shared path (pull responses) decodes the same.
    let shared = decode_messages_shared(Arc::new(body), DecodeOptions::new());
    let again: Vec<&str> = shared.messages.iter().map(|m| m.topic()).collect();
    assert_eq!(again, topics);
}
