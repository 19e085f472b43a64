//! Every reason a received frame is refused, one test each, asserting the exact
//! [`FrameError`] variant and the `reason` label it is counted under
//! (`conclave_frames_dropped_total{reason}`).
//!
//! Covers PROTO-4 (oversize on encode), PROTO-5 (bad tag, foreign cluster, replay and the
//! replay window, a keyed node receiving an untagged frame), PROTO-6 (malformed, truncated and
//! trailing bytes are typed errors), and TR-2 (each refusal maps to one drop reason).

use conclave_protocol::{
    AppendEntries, AuthKey, ClusterId, DEFAULT_TAG_LEN, DropReason, ESPNOW_V1_MTU, Envelope,
    FrameCodec, FrameError, FrameReceiver, PROTOCOL_VERSION, PeerId, Ping, REPLAY_WINDOW,
};

const SECRET: &[u8] = b"conclave-test-key-0123456789";

fn cluster(name: &str) -> ClusterId {
    ClusterId::new(name).expect("valid cluster id")
}

fn key() -> AuthKey {
    AuthKey::new(SECRET, DEFAULT_TAG_LEN).expect("valid key")
}

fn keyed_codec() -> FrameCodec {
    FrameCodec::new(cluster("site-1"), Some(key()))
}

fn heartbeat(seq: u64) -> Envelope {
    Envelope::new(
        cluster("site-1"),
        PeerId::from_static("gw-a"),
        3,
        seq,
        None,
        AppendEntries {
            prev_index: 1234,
            prev_term: 7,
            commit: 1234,
            ..AppendEntries::new(7, PeerId::from_static("gw-a"))
        },
    )
}

fn encode(codec: &FrameCodec, envelope: &Envelope) -> Vec<u8> {
    codec
        .encode(envelope, ESPNOW_V1_MTU)
        .expect("a heartbeat fits ESP-NOW")
}

/// PROTO-5: a frame whose tag does not match is `BadTag`, counted as `bad_tag`; so is a frame
/// whose envelope was altered after tagging, and one tagged with another key.
#[test]
fn bad_tag_is_refused() {
    let codec = keyed_codec();
    let frame = encode(&codec, &heartbeat(1));

    let mut forged_tag = frame.clone();
    let last = forged_tag.len() - 1;
    forged_tag[last] ^= 0x01;
    let err = codec.decode(&forged_tag).unwrap_err();
    assert_eq!(err, FrameError::BadTag);
    assert_eq!(err.drop_reason(), DropReason::BadTag);
    assert_eq!(err.drop_reason().label(), "bad_tag");

    // A valid envelope (seq 2) carrying the tag computed over another one (seq 1).
    let unkeyed = FrameCodec::new(cluster("site-1"), None);
    let mut altered = encode(&unkeyed, &heartbeat(2));
    altered.extend_from_slice(&frame[frame.len() - DEFAULT_TAG_LEN..]);
    assert_eq!(codec.decode(&altered), Err(FrameError::BadTag));

    let stranger = FrameCodec::new(
        cluster("site-1"),
        Some(AuthKey::new(b"another-cluster-key-9876543210", DEFAULT_TAG_LEN).unwrap()),
    );
    assert_eq!(
        codec.decode(&encode(&stranger, &heartbeat(1))),
        Err(FrameError::BadTag)
    );
}

/// PROTO-5: a frame naming another cluster is `ForeignCluster`, even under the same key, and
/// is reported as such rather than as a bad tag.
#[test]
fn foreign_cluster_is_refused() {
    let ours = keyed_codec();
    let theirs = FrameCodec::new(cluster("site-2"), Some(key()));
    let mut envelope = heartbeat(1);
    envelope.cluster = cluster("site-2");
    let frame = encode(&theirs, &envelope);

    let err = ours.decode(&frame).unwrap_err();
    assert_eq!(
        err,
        FrameError::ForeignCluster {
            got: cluster("site-2"),
            expected: cluster("site-1"),
        }
    );
    assert_eq!(err.drop_reason(), DropReason::ForeignCluster);
    assert_eq!(err.drop_reason().label(), "foreign_cluster");

    let mut receiver = FrameReceiver::new(ours);
    assert!(matches!(
        receiver.receive(&frame),
        Err(FrameError::ForeignCluster { .. })
    ));
}

/// PROTO-5: a frame accepted once is refused the second time as `Replay`, counted as `replay`.
#[test]
fn replay_of_an_accepted_frame_is_refused() {
    let codec = keyed_codec();
    let frame = encode(&codec, &heartbeat(123_456));
    let mut receiver = FrameReceiver::new(codec);

    assert_eq!(receiver.receive(&frame), Ok(heartbeat(123_456)));
    let err = receiver.receive(&frame).unwrap_err();
    assert_eq!(
        err,
        FrameError::Replay {
            from: PeerId::from_static("gw-a"),
            incarnation: 3,
            seq: 123_456,
        }
    );
    assert_eq!(err.drop_reason(), DropReason::Replay);
    assert_eq!(err.drop_reason().label(), "replay");
}

/// PROTO-5: inside the window a late frame is accepted exactly once; a frame older than the
/// window, or from an older incarnation, is a replay even if it was never seen.
#[test]
fn frames_older_than_the_window_are_refused() {
    let codec = keyed_codec();
    let mut receiver = FrameReceiver::new(codec.clone());
    let newest = 1_000;
    receiver
        .receive(&encode(&codec, &heartbeat(newest)))
        .unwrap();

    let late = encode(&codec, &heartbeat(newest - 1));
    assert!(receiver.receive(&late).is_ok(), "overtaken frame, accepted");
    assert!(matches!(
        receiver.receive(&late),
        Err(FrameError::Replay { seq: 999, .. })
    ));

    let oldest_in_window = newest - (REPLAY_WINDOW - 1);
    assert!(
        receiver
            .receive(&encode(&codec, &heartbeat(oldest_in_window)))
            .is_ok()
    );
    let too_old = newest - REPLAY_WINDOW;
    let err = receiver
        .receive(&encode(&codec, &heartbeat(too_old)))
        .unwrap_err();
    assert_eq!(
        err,
        FrameError::Replay {
            from: PeerId::from_static("gw-a"),
            incarnation: 3,
            seq: too_old,
        }
    );
    assert_eq!(err.drop_reason().label(), "replay");

    let mut previous_life = heartbeat(newest + 10);
    previous_life.incarnation = 2;
    assert!(matches!(
        receiver.receive(&encode(&codec, &previous_life)),
        Err(FrameError::Replay { incarnation: 2, .. })
    ));
}

/// PROTO-5: refused frames never move the replay window: a forged frame with a huge seq does
/// not lock the real sender out.
#[test]
fn refused_frames_do_not_advance_the_window() {
    let codec = keyed_codec();
    let mut receiver = FrameReceiver::new(codec.clone());
    let mut forged = encode(&codec, &heartbeat(u64::MAX));
    let last = forged.len() - 1;
    forged[last] ^= 0x80;
    assert_eq!(receiver.receive(&forged), Err(FrameError::BadTag));
    assert!(receiver.receive(&encode(&codec, &heartbeat(5))).is_ok());
}

/// PROTO-6: a version this node does not speak is `UnsupportedVersion`, counted as `version`,
/// with or without a key and before the tag is looked at.
#[test]
fn unsupported_version_is_refused() {
    for codec in [keyed_codec(), FrameCodec::new(cluster("site-1"), None)] {
        // A newer version, and version 1, which has no challenge handshake.
        for version in [PROTOCOL_VERSION + 1, 1] {
            let mut envelope = heartbeat(1);
            envelope.version = version;
            let frame = encode(&codec, &envelope);
            assert_eq!(
                codec.decode(&frame),
                Err(FrameError::UnsupportedVersion {
                    got: version,
                    supported: PROTOCOL_VERSION,
                })
            );
        }
        let mut envelope = heartbeat(1);
        envelope.version = PROTOCOL_VERSION + 1;
        let err = codec.decode(&encode(&codec, &envelope)).unwrap_err();
        assert_eq!(err.drop_reason(), DropReason::Version);
        assert_eq!(err.drop_reason().label(), "version");

        // A future version may change everything after the version byte.
        let mut future = vec![0x93, 0x05, 0xc0, 0xc0];
        future.resize(future.len() + codec.tag_len(), 0);
        assert_eq!(
            codec.decode(&future),
            Err(FrameError::UnsupportedVersion {
                got: 5,
                supported: PROTOCOL_VERSION,
            })
        );
    }
}

/// PROTO-6: bytes after a complete envelope make the frame `Malformed`, counted as
/// `malformed`.
#[test]
fn trailing_bytes_are_refused() {
    let unkeyed = FrameCodec::new(cluster("site-1"), None);
    let mut frame = encode(&unkeyed, &heartbeat(1));
    frame.push(0xc0);
    let err = unkeyed.decode(&frame).unwrap_err();
    assert!(
        matches!(&err, FrameError::Malformed(reason) if reason.contains("1 bytes after")),
        "{err:?}"
    );
    assert_eq!(err.drop_reason(), DropReason::Malformed);
    assert_eq!(err.drop_reason().label(), "malformed");

    // PROTO-9: with a key the extra byte shifts the tag window: the sealed body is no longer
    // what was sealed, and the frame does not open.
    let keyed = keyed_codec();
    let mut frame = encode(&keyed, &heartbeat(1));
    frame.push(0xc0);
    assert_eq!(keyed.decode(&frame), Err(FrameError::BadTag));
}

/// PROTO-6: a frame cut short is `Truncated` when it cannot even hold the tag, `Malformed`
/// when the envelope is cut; both are counted as `malformed`.
#[test]
fn truncated_frames_are_refused() {
    let keyed = keyed_codec();
    let frame = encode(&keyed, &heartbeat(1));

    let err = keyed.decode(&frame[..DEFAULT_TAG_LEN]).unwrap_err();
    assert_eq!(
        err,
        FrameError::Truncated {
            len: DEFAULT_TAG_LEN,
            tag_len: DEFAULT_TAG_LEN,
        }
    );
    assert_eq!(err.drop_reason(), DropReason::Malformed);
    assert_eq!(err.drop_reason().label(), "malformed");
    assert_eq!(
        keyed.decode(&[]),
        Err(FrameError::Truncated {
            len: 0,
            tag_len: DEFAULT_TAG_LEN,
        })
    );

    let unkeyed = FrameCodec::new(cluster("site-1"), None);
    assert_eq!(
        unkeyed.decode(&[]),
        Err(FrameError::Truncated { len: 0, tag_len: 0 })
    );
    let plain = encode(&unkeyed, &heartbeat(1));
    for cut in 1..plain.len() {
        let err = unkeyed.decode(&plain[..cut]).unwrap_err();
        assert!(
            matches!(err, FrameError::Malformed(_)),
            "cut {cut}: {err:?}"
        );
        assert_eq!(err.drop_reason().label(), "malformed");
    }
    // PROTO-9: dropping the last byte of the tag leaves a frame that does not open.
    assert_eq!(
        keyed.decode(&frame[..frame.len() - 1]),
        Err(FrameError::BadTag)
    );
}

/// PROTO-5, ESP-8: a keyed node given an untagged frame (a node without the key, or a forger
/// who has none) counts it as `bad_tag`, not as `malformed`, so a key missing on one node shows
/// up under the right reason.
#[test]
fn keyed_receiver_refuses_untagged_frames_as_bad_tag() {
    let unkeyed = FrameCodec::new(cluster("site-1"), None);
    let mut receiver = FrameReceiver::new(keyed_codec());

    let frame = encode(&unkeyed, &heartbeat(1));
    let err = receiver.receive(&frame).unwrap_err();
    assert_eq!(err, FrameError::BadTag);
    assert_eq!(err.drop_reason().label(), "bad_tag");

    // Shorter than a tag: nothing to authenticate at all.
    let tiny = Envelope::new(
        cluster("s"),
        PeerId::from_static("a"),
        0,
        0,
        None,
        conclave_protocol::Hello {},
    );
    let tiny_frame = FrameCodec::new(cluster("s"), None)
        .encode(&tiny, ESPNOW_V1_MTU)
        .unwrap();
    assert!(tiny_frame.len() <= DEFAULT_TAG_LEN);
    let err = FrameReceiver::new(FrameCodec::new(cluster("s"), Some(key())))
        .receive(&tiny_frame)
        .unwrap_err();
    assert!(
        matches!(err, FrameError::Truncated { .. } | FrameError::BadTag),
        "{err:?}"
    );

    // An untagged frame from another cluster is still reported as foreign first.
    let mut foreign = heartbeat(2);
    foreign.cluster = cluster("site-2");
    let foreign_frame = encode(&FrameCodec::new(cluster("site-2"), None), &foreign);
    assert!(matches!(
        receiver.receive(&foreign_frame),
        Err(FrameError::ForeignCluster { .. })
    ));

    // Nothing was admitted: the real sender's frame with the same seq is accepted.
    assert!(
        receiver
            .receive(&encode(&keyed_codec(), &heartbeat(1)))
            .is_ok()
    );
}

/// PROTO-6, PROTO-9: an unkeyed node given a sealed frame sees noise where the body should
/// be: `malformed`.
#[test]
fn unkeyed_receiver_refuses_tagged_frames_as_malformed() {
    let frame = encode(&keyed_codec(), &heartbeat(1));
    let err = FrameCodec::new(cluster("site-1"), None)
        .decode(&frame)
        .unwrap_err();
    assert!(matches!(&err, FrameError::Malformed(_)), "{err:?}");
    assert_eq!(err.drop_reason(), DropReason::Malformed);
}

/// PROTO-4: encoding never truncates; a frame one byte over the MTU is `Oversize` with both
/// numbers, counted as `oversize`.
#[test]
fn oversize_is_an_encode_error() {
    let codec = keyed_codec();
    let envelope = Envelope::new(
        cluster("site-1"),
        PeerId::from_static("gw-a"),
        3,
        1,
        Some(PeerId::from_static("gw-b")),
        Ping {
            timestamp_ms: 1_700_000_000_000,
        },
    );
    let len = encode(&codec, &envelope).len();
    assert_eq!(
        codec.encode(&envelope, len - 1),
        Err(FrameError::Oversize { len, mtu: len - 1 })
    );
    assert_eq!(
        FrameError::Oversize { len, mtu: len - 1 }
            .drop_reason()
            .label(),
        "oversize"
    );
    assert_eq!(codec.encode(&envelope, len).map(|f| f.len()), Ok(len));
}

/// TR-2: every refusal above lands on a distinct label, and every label is accounted for.
#[test]
fn drop_reason_labels_are_distinct() {
    let labels: std::collections::BTreeSet<_> = DropReason::ALL.iter().map(|r| r.label()).collect();
    assert_eq!(labels.len(), DropReason::ALL.len());
    let expected = [
        "malformed",
        "version",
        "foreign_cluster",
        "bad_tag",
        "replay",
        "oversize",
        "misaddressed",
        "unverified",
        "duplicate_id",
        "peer_limit",
        "incarnation_ahead",
        "queue_full",
        "other_mode",
    ];
    assert_eq!(labels, expected.into_iter().collect());
}

/// PROTO-3, PROTO-6: an unknown body kind, log entry kind or resign reason makes the whole
/// frame `Malformed` (docs/wire-protocol.md §3).
#[test]
fn unknown_kinds_are_malformed() {
    let codec = FrameCodec::new(cluster("s"), None);
    // cluster "s", from "a", incarnation 1, seq 1, broadcast, then the body.
    let frame = |body: &[u8]| {
        [
            &[
                0x97,
                PROTOCOL_VERSION,
                0xa1,
                b's',
                0xa1,
                b'a',
                0x01,
                0x01,
                0xc0,
            ][..],
            body,
        ]
        .concat()
    };

    // goodbye (4) is known, and challenge_ack (6); kind 7 is not.
    assert!(codec.decode(&frame(&[0x92, 0x04, 0x90])).is_ok());
    assert!(codec.decode(&frame(&[0x92, 0x06, 0x91, 0x2a])).is_ok());
    let err = codec.decode(&frame(&[0x92, 0x07, 0x90])).unwrap_err();
    assert!(
        matches!(&err, FrameError::Malformed(reason) if reason.contains("unknown body kind 7")),
        "{err:?}"
    );

    // append_entries with one entry [index 1, term 1, kind, bin ""], commit 0, not pinned:
    // entry kind 1 is a command, 2 a configuration (MEMB-1), 3 is unknown.
    let append = |entry_kind: u8| {
        frame(&[
            0x92, 18, 0x97, 0x01, 0xa1, b'a', 0x00, 0x00, 0x91, 0x94, 0x01, 0x01, entry_kind, 0xc4,
            0x00, 0x00, 0xc2,
        ])
    };
    assert!(codec.decode(&append(1)).is_ok());
    assert!(codec.decode(&append(2)).is_ok());
    assert!(matches!(
        codec.decode(&append(3)),
        Err(FrameError::Malformed(_))
    ));

    // master_resign [reason, successor nil, round 1]: shutdown is 2, 3 is unknown.
    assert!(
        codec
            .decode(&frame(&[0x92, 53, 0x93, 0x02, 0xc0, 0x01]))
            .is_ok()
    );
    assert!(matches!(
        codec.decode(&frame(&[0x92, 53, 0x93, 0x03, 0xc0, 0x01])),
        Err(FrameError::Malformed(_))
    ));
}
