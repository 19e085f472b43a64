//! Property tests of the frame codec: decoding is total, authentication cannot be bypassed
//! by altering a frame, and every envelope survives an encode/decode round trip.
//!
//! Covers PROTO-6 (any byte string yields a frame or a typed error, never a panic), PROTO-5 (a
//! tagged frame that was altered in any way is never accepted; replays of whatever was accepted
//! are refused), PROTO-2/PROTO-3 (every body kind round-trips inside an envelope) and PROTO-4
//! (a frame that does not fit the MTU is an `Oversize` error, never a truncated frame).
//!
//! Each property runs at least [`ARBITRARY_CASES`], [`MUTATION_CASES`] or [`ROUND_TRIP_CASES`]
//! cases and asserts that it did; `PROPTEST_CASES` can raise the count, never lower it. A
//! failure prints the minimal failing input, which is enough to replay it.

use std::cell::Cell;
use std::fmt::Debug;

use conclave_protocol::{
    AppendEntries, AppendResp, AuthKey, Body, BodyKind, Candidate, Challenge, ChallengeAck,
    ChunkAck, ClusterId, ConflictHint, DEFAULT_TAG_LEN, Declaration, Discover, DiscoverAck,
    ESPNOW_V1_MTU, EntryChunk, EntryKind, Envelope, FrameCodec, FrameError, FrameReceiver, Goodbye,
    Hello, HelloAck, InstallSnapshot, LeaderAssign, LogEntry, MAX_ID_LEN, MAX_TAG_LEN, MIN_KEY_LEN,
    MIN_TAG_LEN, MasterAnnounce, MasterResign, NotLeader, PROTOCOL_VERSION, PeerId, Ping, Pong,
    PriorityVote, Proposal, RequestVote, ResignReason, SnapshotResp, TimeoutNow, Vote,
};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRunner};

/// Cases of arbitrary bytes, and separately of envelope-shaped noise.
const ARBITRARY_CASES: u32 = 10_000;
/// Cases of mutated valid frames; each case mutates an untagged and a tagged frame.
const MUTATION_CASES: u32 = 10_000;
/// Cases of the round trip and MTU property.
const ROUND_TRIP_CASES: u32 = 10_000;

/// Runs `test` on `cases` generated inputs (more if `PROPTEST_CASES` says so), panics with
/// the minimal failing input on failure, and checks that the cases really ran.
fn check<S>(cases: u32, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy,
    S::Value: Debug,
{
    let defaults = Config::default();
    let cases = cases.max(defaults.cases);
    let mut runner = TestRunner::new(Config {
        cases,
        source_file: Some(file!()),
        // ChaCha, the default, dominates the run time in an unoptimised test build; the
        // inputs need variety, not cryptographic randomness.
        rng_algorithm: RngAlgorithm::XorShift,
        ..defaults
    });
    let ran = Cell::new(0u32);
    let result = runner.run(&strategy, |input| {
        ran.set(ran.get() + 1);
        test(input)
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    assert!(
        ran.get() >= cases,
        "only {} of {cases} cases ran",
        ran.get()
    );
}

// ---------------------------------------------------------------------------------------------
// strategies

const ID_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";

/// Valid id text: mostly short, as deployed, but any length up to 32, which crosses the
/// fixstr/str8 boundary at 31/32 bytes.
fn id_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => vec(select(ID_ALPHABET), 1..=8),
        1 => vec(select(ID_ALPHABET), 1..=MAX_ID_LEN),
        1 => vec(select(ID_ALPHABET), MAX_ID_LEN - 1..=MAX_ID_LEN),
    ]
    .prop_map(|bytes| String::from_utf8(bytes).expect("the alphabet is ASCII"))
}

fn peer_id() -> impl Strategy<Value = PeerId> {
    id_text().prop_map(|text| PeerId::new(&text).expect("generated from the id alphabet"))
}

fn cluster_id() -> impl Strategy<Value = ClusterId> {
    id_text().prop_map(|text| ClusterId::new(&text).expect("generated from the id alphabet"))
}

/// A u64 drawn evenly from each MessagePack width, so every uint encoding appears.
fn wide_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..=0x7f_u64,
        0x80..=0xff_u64,
        0x100..=0xffff_u64,
        0x1_0000..=0xffff_ffff_u64,
        0x1_0000_0000..=u64::MAX,
        Just(u64::MAX),
    ]
}

fn wide_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        0..=0x7f_u32,
        0x80..=0xffff_u32,
        any::<u32>(),
        Just(u32::MAX)
    ]
}

fn wide_u16() -> impl Strategy<Value = u16> {
    prop_oneof![0..=0x7f_u16, any::<u16>(), Just(u16::MAX)]
}

/// Free text: any Unicode, occasionally long enough for str16.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        9 => vec(any::<char>(), 0..=40).prop_map(String::from_iter),
        1 => vec(any::<char>(), 64..=100).prop_map(String::from_iter),
    ]
}

/// Opaque bytes: mostly small, sometimes past 255 bytes (bin16).
fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        9 => vec(any::<u8>(), 0..=max.min(40)),
        1 => vec(any::<u8>(), 0..=max),
    ]
}

fn log_entry() -> impl Strategy<Value = LogEntry> {
    (
        wide_u64(),
        wide_u64(),
        prop_oneof![
            Just(EntryKind::Noop),
            Just(EntryKind::Command),
            Just(EntryKind::Config)
        ],
        bytes(64),
    )
        .prop_map(|(index, term, kind, data)| LogEntry {
            index,
            term,
            kind,
            data,
        })
}

/// MEMB-6: a piece of an entry too large for one frame.
fn entry_chunk() -> impl Strategy<Value = EntryChunk> {
    (log_entry(), any::<u32>(), any::<u32>()).prop_map(|(entry, offset, total_len)| EntryChunk {
        index: entry.index,
        term: entry.term,
        kind: entry.kind,
        offset,
        total_len,
        data: entry.data,
    })
}

/// Bodies of one kind. The match has no wildcard, so a new kind does not compile until it has
/// a strategy here.
fn body_of_kind(kind: BodyKind) -> BoxedStrategy<Body> {
    match kind {
        BodyKind::Hello => Just(Body::from(Hello {})).boxed(),
        BodyKind::HelloAck => (any::<bool>(), option::of(text()))
            .prop_map(|(success, error_reason)| {
                HelloAck {
                    success,
                    error_reason,
                }
                .into()
            })
            .boxed(),
        BodyKind::Ping => wide_u64()
            .prop_map(|timestamp_ms| Ping { timestamp_ms }.into())
            .boxed(),
        BodyKind::Pong => wide_u64()
            .prop_map(|timestamp_ms| Pong { timestamp_ms }.into())
            .boxed(),
        BodyKind::Goodbye => Just(Body::from(Goodbye {})).boxed(),
        BodyKind::Challenge => wide_u64()
            .prop_map(|nonce| Challenge { nonce }.into())
            .boxed(),
        BodyKind::ChallengeAck => wide_u64()
            .prop_map(|nonce| ChallengeAck { nonce }.into())
            .boxed(),
        BodyKind::RequestVote => (
            wide_u64(),
            peer_id(),
            wide_u64(),
            wide_u64(),
            any::<bool>(),
            any::<bool>(),
            option::of(any::<u8>()),
        )
            .prop_map(
                |(term, candidate, last_log_index, last_log_term, pre_vote, transfer, priority)| {
                    RequestVote {
                        term,
                        candidate,
                        last_log_index,
                        last_log_term,
                        pre_vote,
                        leadership_transfer: transfer,
                        priority,
                    }
                    .into()
                },
            )
            .boxed(),
        BodyKind::Vote => (
            wide_u64(),
            any::<bool>(),
            any::<bool>(),
            option::of(any::<u8>()),
        )
            .prop_map(|(term, granted, pre_vote, priority)| {
                Vote {
                    term,
                    granted,
                    pre_vote,
                    priority,
                }
                .into()
            })
            .boxed(),
        BodyKind::AppendEntries => (
            wide_u64(),
            peer_id(),
            wide_u64(),
            wide_u64(),
            // Past 15 entries the array header changes from fixarray to array16.
            vec(log_entry(), 0..=18),
            wide_u64(),
            any::<bool>(),
            option::of(wide_u64()),
            option::of(entry_chunk().prop_map(Box::new)),
        )
            .prop_map(
                |(
                    term,
                    leader,
                    prev_index,
                    prev_term,
                    entries,
                    commit,
                    pinned,
                    read_round,
                    chunk,
                )| {
                    AppendEntries {
                        term,
                        leader,
                        prev_index,
                        prev_term,
                        entries,
                        commit,
                        pinned,
                        read_round,
                        chunk,
                    }
                    .into()
                },
            )
            .boxed(),
        BodyKind::AppendResp => (
            wide_u64(),
            any::<bool>(),
            wide_u64(),
            option::of(
                (wide_u64(), wide_u64()).prop_map(|(index, term)| ConflictHint { index, term }),
            ),
            option::of(any::<u8>()),
            option::of(wide_u64()),
            option::of(
                (wide_u64(), any::<u32>())
                    .prop_map(|(index, next_offset)| ChunkAck { index, next_offset }),
            ),
        )
            .prop_map(
                |(term, success, match_index, hint, priority, read_round, chunk)| {
                    AppendResp {
                        term,
                        success,
                        match_index,
                        hint,
                        priority,
                        read_round,
                        chunk,
                    }
                    .into()
                },
            )
            .boxed(),
        BodyKind::InstallSnapshot => (
            wide_u64(),
            peer_id(),
            wide_u64(),
            wide_u64(),
            wide_u64(),
            bytes(300),
            any::<bool>(),
        )
            .prop_map(
                |(term, leader, last_index, last_term, offset, data, done)| {
                    InstallSnapshot {
                        term,
                        leader,
                        last_index,
                        last_term,
                        offset,
                        data,
                        done,
                        config: None,
                    }
                    .into()
                },
            )
            .boxed(),
        BodyKind::SnapshotResp => (wide_u64(), wide_u64(), wide_u64(), any::<bool>())
            .prop_map(|(term, last_index, next_offset, success)| {
                SnapshotResp {
                    term,
                    last_index,
                    next_offset,
                    success,
                }
                .into()
            })
            .boxed(),
        BodyKind::LeaderAssign => (wide_u64(), peer_id(), peer_id())
            .prop_map(|(term, leader, assigner)| {
                LeaderAssign {
                    term,
                    leader,
                    assigner,
                }
                .into()
            })
            .boxed(),
        BodyKind::TimeoutNow => (wide_u64(), any::<bool>())
            .prop_map(|(term, pin)| TimeoutNow { term, pin }.into())
            .boxed(),
        BodyKind::Proposal => (wide_u64(), option::of(peer_id()))
            .prop_map(|(epoch, leader)| Proposal { epoch, leader }.into())
            .boxed(),
        BodyKind::Declaration => wide_u64()
            .prop_map(|epoch| Declaration { epoch }.into())
            .boxed(),
        BodyKind::Discover => (any::<u8>(), wide_u32(), wide_u64())
            .prop_map(|(protocol_version, priority, round)| {
                Discover {
                    protocol_version,
                    priority,
                    round,
                }
                .into()
            })
            .boxed(),
        BodyKind::DiscoverAck => (wide_u32(), option::of(peer_id()), wide_u64())
            .prop_map(|(priority, known_master, round)| {
                DiscoverAck {
                    priority,
                    known_master,
                    round,
                }
                .into()
            })
            .boxed(),
        BodyKind::Candidate => (wide_u32(), wide_u64())
            .prop_map(|(priority, round)| Candidate { priority, round }.into())
            .boxed(),
        BodyKind::PriorityVote => (peer_id(), wide_u32(), any::<bool>(), wide_u64())
            .prop_map(|(candidate, voter_priority, accept, round)| {
                PriorityVote {
                    candidate,
                    voter_priority,
                    accept,
                    round,
                }
                .into()
            })
            .boxed(),
        BodyKind::MasterAnnounce => (
            (wide_u16(), wide_u32(), any::<u8>()),
            (wide_u32(), wide_u64(), any::<bool>()),
        )
            .prop_map(
                |((peer_count, uptime_s, battery), (priority, round, forced))| {
                    MasterAnnounce {
                        peer_count,
                        uptime_s,
                        battery,
                        priority,
                        round,
                        forced,
                    }
                    .into()
                },
            )
            .boxed(),
        BodyKind::MasterResign => (
            prop_oneof![
                Just(ResignReason::LowBattery),
                Just(ResignReason::UserRequest),
                Just(ResignReason::Shutdown),
            ],
            option::of(peer_id()),
            wide_u64(),
        )
            .prop_map(|(reason, successor, round)| {
                MasterResign {
                    reason,
                    successor,
                    round,
                }
                .into()
            })
            .boxed(),
        BodyKind::NotLeader => (option::of(peer_id()), option::of(text()))
            .prop_map(|(leader, addr)| NotLeader { leader, addr }.into())
            .boxed(),
    }
}

/// A body of any kind, every kind equally likely.
fn body() -> impl Strategy<Value = Body> {
    select(BodyKind::ALL).prop_flat_map(body_of_kind)
}

fn envelope_in(cluster: ClusterId) -> impl Strategy<Value = Envelope> {
    (
        peer_id(),
        wide_u64(),
        wide_u64(),
        option::of(peer_id()),
        body(),
    )
        .prop_map(move |(from, incarnation, seq, to, body)| {
            Envelope::new(cluster, from, incarnation, seq, to, body)
        })
}

fn envelope() -> impl Strategy<Value = Envelope> {
    cluster_id().prop_flat_map(envelope_in)
}

/// Two envelopes of one cluster, so that either is a valid frame for the same codec.
fn envelope_pair() -> impl Strategy<Value = (Envelope, Envelope)> {
    cluster_id().prop_flat_map(|cluster| (envelope_in(cluster), envelope_in(cluster)))
}

/// A pre-shared key as configured: its bytes are kept so a failure can be replayed.
#[derive(Debug, Clone)]
struct KeySpec {
    secret: Vec<u8>,
    tag_len: usize,
}

impl KeySpec {
    fn key(&self) -> AuthKey {
        AuthKey::new(&self.secret, self.tag_len).expect("generated within the limits")
    }
}

fn key_spec() -> impl Strategy<Value = KeySpec> {
    (
        vec(any::<u8>(), MIN_KEY_LEN..=64),
        prop_oneof![
            2 => Just(DEFAULT_TAG_LEN),
            1 => MIN_TAG_LEN..=MAX_TAG_LEN,
        ],
    )
        .prop_map(|(secret, tag_len)| KeySpec { secret, tag_len })
}

// ---------------------------------------------------------------------------------------------
// checks shared by the properties

/// Whether `err` is one of the errors decoding may produce. Encoding errors and replays are
/// never the codec's answer to received bytes.
fn is_decode_error(err: &FrameError) -> bool {
    matches!(
        err,
        FrameError::Truncated { .. }
            | FrameError::Malformed(_)
            | FrameError::UnsupportedVersion { .. }
            | FrameError::ForeignCluster { .. }
            | FrameError::BadTag
    )
}

/// The outcome of decoding received bytes with `codec`: no panic (a panic fails the case),
/// the same answer twice, a typed decode error or an envelope that round-trips.
fn decode_checked(
    codec: &FrameCodec,
    frame: &[u8],
) -> Result<Result<Envelope, FrameError>, TestCaseError> {
    let outcome = codec.decode(frame);
    prop_assert_eq!(&codec.decode(frame), &outcome, "decoding is deterministic");
    match &outcome {
        Ok(envelope) => {
            let again = codec
                .encode(envelope, usize::MAX)
                .map_err(|err| TestCaseError::fail(format!("re-encoding failed: {err}")))?;
            prop_assert_eq!(&codec.decode(&again), &Ok(envelope.clone()));
        }
        Err(err) => prop_assert!(is_decode_error(err), "unexpected error {err:?}"),
    }
    Ok(outcome)
}

/// A fresh receiver gives the codec's answer; whatever it accepts it refuses the second time
/// as a replay of exactly that sender, incarnation and seq.
fn receive_checked(
    codec: &FrameCodec,
    frame: &[u8],
    expected: &Result<Envelope, FrameError>,
) -> Result<(), TestCaseError> {
    let mut receiver = FrameReceiver::new(codec.clone());
    prop_assert_eq!(&receiver.receive(frame), expected);
    let second = receiver.receive(frame);
    match expected {
        Ok(envelope) => prop_assert_eq!(
            second,
            Err(FrameError::Replay {
                from: envelope.from,
                incarnation: envelope.incarnation,
                seq: envelope.seq,
            })
        ),
        Err(err) => prop_assert_eq!(&second, &Err(err.clone())),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// arbitrary input

/// PROTO-6: arbitrary byte strings of 0 to 600 bytes never panic the codec or the receiver,
/// with or without a key: each yields an envelope that round-trips or a typed decode error,
/// the same one every time. A keyed codec accepts none of them (that would be a forged tag).
#[test]
fn proto_6_arbitrary_bytes_decode_totally() {
    let input = (
        vec(any::<u8>(), 0..600),
        cluster_id(),
        option::of(key_spec()),
    );
    check(ARBITRARY_CASES, input, |(frame, cluster, key)| {
        let plain = FrameCodec::new(cluster, None);
        let outcome = decode_checked(&plain, &frame)?;
        receive_checked(&plain, &frame, &outcome)?;

        let key = key.unwrap_or(KeySpec {
            secret: b"proptest-fixed-key-0000".to_vec(),
            tag_len: DEFAULT_TAG_LEN,
        });
        let keyed = FrameCodec::new(cluster, Some(key.key()));
        let outcome = decode_checked(&keyed, &frame)?;
        prop_assert!(outcome.is_err(), "random bytes passed authentication");
        receive_checked(&keyed, &frame, &outcome)?;
        Ok(())
    });
}

/// One value in MessagePack, as the encoder writes it inside an envelope.
fn msgpack<T: serde::Serialize>(value: &T) -> Vec<u8> {
    rmp_serde::to_vec(value).expect("ids, numbers and strings always encode")
}

/// One MessagePack-ish token, chosen to reach deep into the envelope decoder: valid markers,
/// ids, nested arrays, and length fields claiming far more than the frame holds.
fn noise_token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0..=0x7f_u8).prop_map(|v| vec![v]),
        Just(vec![0xc0]),
        prop_oneof![Just(0xc2_u8), Just(0xc3)].prop_map(|v| vec![v]),
        (
            prop_oneof![Just(0xcc_u8), Just(0xcd), Just(0xce), Just(0xcf)],
            vec(any::<u8>(), 8)
        )
            .prop_map(|(marker, raw)| {
                let width = 1 << (marker - 0xcc);
                let mut token = vec![marker];
                token.extend_from_slice(&raw[..width]);
                token
            }),
        id_text().prop_map(|text| msgpack(&text)),
        (0..=0x0f_u8).prop_map(|n| vec![0x90 | n]),
        (0..=0x0f_u8).prop_map(|n| vec![0x80 | n]),
        // Declared lengths far past the end of any frame.
        prop_oneof![
            Just(vec![0xdc, 0xff, 0xff]),
            Just(vec![0xdd, 0xff, 0xff, 0xff, 0xff]),
            Just(vec![0xdb, 0xff, 0xff, 0xff, 0xff]),
            Just(vec![0xc6, 0xff, 0xff, 0xff, 0xff]),
            Just(vec![0xdf, 0xff, 0xff, 0xff, 0xff]),
            Just(vec![0xc9, 0xff, 0xff, 0xff, 0xff, 0x01]),
        ],
        any::<u8>().prop_map(|len| vec![0xc4, len]),
        any::<u8>().prop_map(|v| vec![v]),
    ]
}

/// Bytes that start like an envelope for `cluster`: the first `valid_parts` of its parts
/// written correctly (cluster, sender, incarnation, seq, addressee, then the body's array
/// marker and kind), then MessagePack-ish noise. The deeper the valid prefix, the deeper into
/// the decoder the noise lands.
#[derive(Debug, Clone)]
struct EnvelopeNoise {
    cluster: ClusterId,
    parts: Vec<Vec<u8>>,
    valid_parts: usize,
    noise: Vec<Vec<u8>>,
}

impl EnvelopeNoise {
    fn bytes(&self) -> Vec<u8> {
        let mut frame = vec![0x97, PROTOCOL_VERSION];
        frame.extend(self.parts.iter().take(self.valid_parts).flatten());
        frame.extend(self.noise.iter().flatten());
        frame
    }
}

fn envelope_noise() -> impl Strategy<Value = EnvelopeNoise> {
    (
        cluster_id(),
        peer_id(),
        wide_u64(),
        wide_u64(),
        option::of(peer_id()),
        select(BodyKind::ALL),
        prop_oneof![1 => 0..=5_usize, 4 => Just(6_usize)],
        vec(noise_token(), 0..16),
    )
        .prop_map(
            |(cluster, from, incarnation, seq, to, kind, valid_parts, noise)| {
                let parts = vec![
                    msgpack(&cluster),
                    msgpack(&from),
                    msgpack(&incarnation),
                    msgpack(&seq),
                    msgpack(&to),
                    vec![0x92, kind.wire_number()],
                ];
                EnvelopeNoise {
                    cluster,
                    parts,
                    valid_parts,
                    noise,
                }
            },
        )
}

/// PROTO-6: envelope-shaped noise (a correct prefix of an envelope for this cluster, then
/// random MessagePack tokens, some with length fields far past the end) gets past the first
/// checks and still never panics or yields anything but a typed error or a round-tripping
/// envelope; with a key it is never accepted.
#[test]
fn proto_6_envelope_shaped_noise_decodes_totally() {
    let input = (envelope_noise(), option::of(key_spec()));
    check(ARBITRARY_CASES, input, |(noise, key)| {
        let frame = noise.bytes();
        let plain = FrameCodec::new(noise.cluster, None);
        let outcome = decode_checked(&plain, &frame)?;
        receive_checked(&plain, &frame, &outcome)?;
        if let Some(key) = key {
            let keyed = FrameCodec::new(noise.cluster, Some(key.key()));
            let outcome = decode_checked(&keyed, &frame)?;
            prop_assert!(outcome.is_err(), "noise passed authentication");
            receive_checked(&keyed, &frame, &outcome)?;
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// mutated valid frames

/// One alteration of a frame in flight.
#[derive(Debug, Clone)]
enum Mutation {
    FlipBit {
        at: Index,
        bit: u8,
    },
    SetByte {
        at: Index,
        value: u8,
    },
    Truncate {
        keep: Index,
    },
    Extend {
        junk: Vec<u8>,
    },
    /// The head of this frame up to `cut`, then the other frame from `from`.
    Splice {
        cut: Index,
        from: Index,
    },
    DuplicateRange {
        start: Index,
        len: Index,
        insert: Index,
    },
    /// Overwrite with a MessagePack marker whose length field claims far too much.
    ForgeLength {
        at: Index,
        marker: Vec<u8>,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 0..8_u8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        (any::<Index>(), any::<u8>()).prop_map(|(at, value)| Mutation::SetByte { at, value }),
        any::<Index>().prop_map(|keep| Mutation::Truncate { keep }),
        vec(any::<u8>(), 1..=32).prop_map(|junk| Mutation::Extend { junk }),
        (any::<Index>(), any::<Index>()).prop_map(|(cut, from)| Mutation::Splice { cut, from }),
        (any::<Index>(), any::<Index>(), any::<Index>())
            .prop_map(|(start, len, insert)| Mutation::DuplicateRange { start, len, insert }),
        (
            any::<Index>(),
            prop_oneof![
                Just(vec![0xdd, 0xff, 0xff, 0xff, 0xff]),
                Just(vec![0xdb, 0x7f, 0xff, 0xff, 0xff]),
                Just(vec![0xc6, 0xff, 0xff, 0xff, 0xf0]),
                Just(vec![0xdc, 0xff, 0xff]),
                Just(vec![0xd9, 0xff]),
            ]
        )
            .prop_map(|(at, marker)| Mutation::ForgeLength { at, marker }),
    ]
}

impl Mutation {
    fn apply(&self, frame: &mut Vec<u8>, other: &[u8]) {
        let len = frame.len();
        match self {
            Mutation::FlipBit { at, bit } if len > 0 => frame[at.index(len)] ^= 1 << bit,
            Mutation::SetByte { at, value } if len > 0 => frame[at.index(len)] = *value,
            Mutation::Truncate { keep } if len > 0 => frame.truncate(keep.index(len)),
            Mutation::Extend { junk } => frame.extend_from_slice(junk),
            Mutation::Splice { cut, from } => {
                frame.truncate(cut.index(len + 1));
                frame.extend_from_slice(&other[from.index(other.len() + 1)..]);
            }
            Mutation::DuplicateRange {
                start,
                len: span,
                insert,
            } if len > 0 => {
                let start = start.index(len);
                let end = start + 1 + span.index(len - start);
                let copy = frame[start..end].to_vec();
                let at = insert.index(len + 1);
                frame.splice(at..at, copy);
            }
            Mutation::ForgeLength { at, marker } if len > 0 => {
                let at = at.index(len);
                let end = (at + marker.len()).min(len);
                frame.splice(at..end, marker.iter().copied());
            }
            // Positional mutations of an already empty frame leave it empty.
            _ => {}
        }
    }
}

/// A mutation case: two envelopes of one cluster, a key, and one to three alterations.
fn mutation_case() -> impl Strategy<Value = ((Envelope, Envelope), KeySpec, Vec<Mutation>)> {
    (envelope_pair(), key_spec(), vec(mutation(), 1..=3))
}

/// PROTO-6, PROTO-5: valid frames of every body kind, altered by bit flips, byte changes,
/// truncation, junk, splicing with another frame, duplicated ranges and forged length fields,
/// never panic the codec or the receiver. Untagged, whatever still decodes round-trips. Tagged,
/// nothing is accepted unless the bytes are exactly one of the two authentic frames; when the
/// altered envelope is still well formed for this cluster, the answer is `BadTag`; and after
/// the authentic frame was received, its exact copy is a replay.
#[test]
fn proto_5_6_mutated_frames_are_refused_or_authentic() {
    check(
        MUTATION_CASES,
        mutation_case(),
        |((original, other), key, mutations)| {
            let cluster = original.cluster;
            let plain = FrameCodec::new(cluster, None);
            let keyed = FrameCodec::new(cluster, Some(key.key()));
            let encode = |codec: &FrameCodec, envelope: &Envelope| {
                codec
                    .encode(envelope, usize::MAX)
                    .map_err(|err| TestCaseError::fail(format!("valid envelope: {err}")))
            };

            // Untagged frames.
            let authentic = encode(&plain, &original)?;
            let other_frame = encode(&plain, &other)?;
            let mut altered = authentic.clone();
            for mutation in &mutations {
                mutation.apply(&mut altered, &other_frame);
            }
            let outcome = decode_checked(&plain, &altered)?;
            if altered == authentic {
                prop_assert_eq!(&outcome, &Ok(original.clone()));
            }
            receive_checked(&plain, &altered, &outcome)?;

            // Tagged frames.
            let authentic = encode(&keyed, &original)?;
            let other_frame = encode(&keyed, &other)?;
            let mut altered = authentic.clone();
            for mutation in &mutations {
                mutation.apply(&mut altered, &other_frame);
            }
            let outcome = decode_checked(&keyed, &altered)?;
            if altered == authentic {
                prop_assert_eq!(&outcome, &Ok(original.clone()));
            } else if altered == other_frame {
                prop_assert_eq!(&outcome, &Ok(other.clone()));
            } else {
                prop_assert!(
                    outcome.is_err(),
                    "altered tagged frame accepted: {outcome:?}"
                );
                let tag_len = keyed.tag_len();
                let envelope_still_ours = altered.len() > tag_len
                    && plain.decode(&altered[..altered.len() - tag_len]).is_ok();
                if envelope_still_ours {
                    prop_assert_eq!(&outcome, &Err(FrameError::BadTag));
                }
            }

            let mut receiver = FrameReceiver::new(keyed.clone());
            prop_assert_eq!(receiver.receive(&authentic), Ok(original.clone()));
            let after = receiver.receive(&altered);
            if altered == authentic {
                prop_assert!(matches!(after, Err(FrameError::Replay { .. })), "{after:?}");
            } else if altered != other_frame {
                prop_assert_eq!(after, outcome);
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// round trip and MTU

/// PROTO-2, PROTO-3, PROTO-4, PROTO-5: every envelope of every body kind encodes and decodes
/// back to itself, with and without a key; the sealed frame is as long as the unsealed one
/// plus exactly the tag, its header the same bytes; a frame fits an MTU of exactly its length and is refused with `Oversize`
/// (never truncated) at one byte less, and likewise against ESP-NOW v1.
#[test]
fn proto_2_4_envelopes_round_trip_and_never_truncate() {
    check(
        ROUND_TRIP_CASES,
        (envelope(), option::of(key_spec())),
        |(envelope, key)| {
            let plain = FrameCodec::new(envelope.cluster, None);
            let codec = FrameCodec::new(envelope.cluster, key.as_ref().map(KeySpec::key));
            let untagged = plain
                .encode(&envelope, usize::MAX)
                .map_err(|err| TestCaseError::fail(err.to_string()))?;
            let frame = codec
                .encode(&envelope, usize::MAX)
                .map_err(|err| TestCaseError::fail(err.to_string()))?;
            let len = frame.len();

            prop_assert_eq!(len, untagged.len() + codec.tag_len());
            // PROTO-9: the header is in clear, the body sealed in place (same length).
            let body_len = rmp_serde::to_vec(&envelope.body).map_or(0, |body| body.len());
            let header_len = untagged.len() - body_len;
            prop_assert_eq!(&frame[..header_len], &untagged[..header_len]);
            if key.is_none() {
                prop_assert_eq!(&frame[..], &untagged[..]);
            }
            prop_assert_eq!(codec.decode(&frame), Ok(envelope.clone()));
            prop_assert_eq!(
                FrameReceiver::new(codec.clone()).receive(&frame),
                Ok(envelope.clone())
            );

            prop_assert_eq!(codec.encode(&envelope, len), Ok(frame.clone()));
            prop_assert_eq!(
                codec.encode(&envelope, len - 1),
                Err(FrameError::Oversize { len, mtu: len - 1 })
            );
            let on_espnow = codec.encode(&envelope, ESPNOW_V1_MTU);
            if len <= ESPNOW_V1_MTU {
                prop_assert_eq!(on_espnow, Ok(frame));
            } else {
                prop_assert_eq!(
                    on_espnow,
                    Err(FrameError::Oversize {
                        len,
                        mtu: ESPNOW_V1_MTU
                    })
                );
            }
            Ok(())
        },
    );
}

/// PROTO-3: the strategies cover every body kind: each kind's strategy yields bodies of that
/// kind, and the mixed strategy the properties use reaches all of them.
#[test]
fn proto_3_strategies_cover_every_body_kind() {
    let mut runner = TestRunner::deterministic();
    for &kind in BodyKind::ALL {
        let strategy = body_of_kind(kind);
        for _ in 0..20 {
            let body = strategy
                .new_tree(&mut runner)
                .expect("no filters")
                .current();
            assert_eq!(body.kind(), kind);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let mixed = body();
    for _ in 0..2_000 {
        seen.insert(
            mixed
                .new_tree(&mut runner)
                .expect("no filters")
                .current()
                .kind(),
        );
    }
    assert_eq!(seen.len(), BodyKind::ALL.len(), "kinds never generated");
}

// ---------------------------------------------------------------------------------------------
// encodings the document promises the decoder accepts or refuses

/// A ping from gw-a to gw-b in cluster site-1, incarnation 3, seq 9, timestamp 5, written with
/// the given incarnation and cluster encodings.
fn ping_frame(incarnation: &[u8], cluster: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x97, PROTOCOL_VERSION];
    frame.extend_from_slice(cluster);
    frame.extend_from_slice(&[0xa4, b'g', b'w', b'-', b'a']);
    frame.extend_from_slice(incarnation);
    frame.extend_from_slice(&[0x09, 0xa4, b'g', b'w', b'-', b'b', 0x92, 0x02, 0x91, 0x05]);
    frame
}

/// PROTO-6 (docs/wire-protocol.md §4): the decoder accepts a uint or a string written wider
/// than the sender would, and reads the same envelope.
#[test]
fn proto_6_wider_encodings_are_accepted() {
    let cluster = ClusterId::new("site-1").unwrap();
    let codec = FrameCodec::new(cluster, None);
    let fixstr = [&[0xa6][..], b"site-1"].concat();
    let str8 = [&[0xd9, 0x06][..], b"site-1"].concat();
    let minimal = codec.decode(&ping_frame(&[0x03], &fixstr)).unwrap();
    assert_eq!(minimal.incarnation, 3);
    assert_eq!(minimal.body, Body::Ping(Ping { timestamp_ms: 5 }));
    let wide = ping_frame(&[0xcf, 0, 0, 0, 0, 0, 0, 0, 0x03], &str8);
    assert_eq!(codec.decode(&wide), Ok(minimal));
}

/// PROTO-6 (docs/wire-protocol.md §3): a number too large for its field's width is malformed.
#[test]
fn proto_6_numbers_wider_than_their_field_are_malformed() {
    let cluster = ClusterId::new("s").unwrap();
    let codec = FrameCodec::new(cluster, None);
    let frame = |fields: &[u8]| {
        let mut frame = vec![
            0x97,
            PROTOCOL_VERSION,
            0xa1,
            b's',
            0xa1,
            b'a',
            0x01,
            0x01,
            0xc0,
        ];
        frame.extend_from_slice(&[0x92, 52, 0x96]);
        frame.extend_from_slice(fields);
        frame
    };
    // peer_count, uptime_s, battery, then priority 7, round 2, forced false
    let fits = codec
        .decode(&frame(&[0xcd, 0xff, 0xff, 0x05, 0x64, 0x07, 0x02, 0xc2]))
        .unwrap();
    assert_eq!(
        fits.body,
        Body::MasterAnnounce(MasterAnnounce {
            peer_count: u16::MAX,
            uptime_s: 5,
            battery: 100,
            priority: 7,
            round: 2,
            forced: false,
        })
    );
    for too_wide in [
        &[0xce, 0x00, 0x01, 0x00, 0x00, 0x05, 0x64, 0x07, 0x02, 0xc2][..],
        &[
            0x01, 0xcf, 0, 0, 0, 0x01, 0, 0, 0, 0, 0x64, 0x07, 0x02, 0xc2,
        ],
        &[0x01, 0x05, 0xcd, 0x01, 0x00, 0x07, 0x02, 0xc2],
        &[
            0x01, 0x05, 0x64, 0xcf, 0, 0, 0, 0x01, 0, 0, 0, 0, 0x02, 0xc2,
        ],
    ] {
        assert!(
            matches!(
                codec.decode(&frame(too_wide)),
                Err(FrameError::Malformed(_))
            ),
            "{too_wide:02x?}"
        );
    }
}
