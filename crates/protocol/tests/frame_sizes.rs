//! Exact on-wire sizes of the frames that are sent all the time (heartbeat, vote request,
//! vote, ping, pong), checked against the numbers `docs/wire-protocol.md` states, so the
//! document cannot drift from the code. Also checks the document's annotated hex dump byte by
//! byte, the worst case with 32-byte ids, and how many log entries fit one ESP-NOW frame.
//!
//! Covers PROTO-2 (the envelope layout), PROTO-4 (frames fit the link; batches are cut to the
//! MTU) and the §11 target of at most 64 bytes for a heartbeat, vote or ping with its tag.

use conclave_protocol::{
    AppendEntries, AuthKey, Candidate, Challenge, ChallengeAck, ClusterId, Configuration,
    DEFAULT_TAG_LEN, Discover, DiscoverAck, ESPNOW_V1_MTU, EntryKind, Envelope, FrameCodec,
    FrameError, LogEntry, MAX_ID_LEN, MasterAnnounce, MasterResign, PeerId, Ping, Pong,
    PriorityVote, RequestVote, ResignReason, Vote,
};

/// The document whose numbers these tests hold to.
const WIRE_DOC: &str = include_str!("../../../docs/wire-protocol.md");

/// The key of the hex dump in the document, so other implementations can check their sealing.
const DOC_KEY: &[u8] = b"conclave-demo-key-site-1";

/// docs/design.md §11: heartbeat, vote and ping frames with their tag.
const TARGET: usize = 64;

/// Realistic values: a node on its third start, well into its life, in term 7.
const TERM: u64 = 7;
const INCARNATION: u64 = 3;
const SEQ: u64 = 123_456;
const LOG_INDEX: u64 = 1234;
const TIMESTAMP_MS: u64 = 1_700_000_000_000;

fn cluster(name: &str) -> ClusterId {
    ClusterId::new(name).expect("valid cluster id")
}

fn codec(cluster_id: ClusterId, tag_len: usize) -> FrameCodec {
    FrameCodec::new(
        cluster_id,
        Some(AuthKey::new(DOC_KEY, tag_len).expect("valid key")),
    )
}

/// The frames the document lists, in its order, for a cluster, two peers and numbers.
struct Scenario {
    cluster: ClusterId,
    a: PeerId,
    b: PeerId,
    term: u64,
    incarnation: u64,
    seq: u64,
    index: u64,
    timestamp_ms: u64,
    /// RAFT-10's priority on vote requests and votes; absent by default.
    priority: Option<u8>,
}

impl Scenario {
    fn realistic() -> Self {
        Self {
            cluster: cluster("site-1"),
            a: PeerId::from_static("gw-a"),
            b: PeerId::from_static("gw-b"),
            term: TERM,
            incarnation: INCARNATION,
            seq: SEQ,
            index: LOG_INDEX,
            timestamp_ms: TIMESTAMP_MS,
            priority: None,
        }
    }

    /// 32-byte ids and every number at its widest MessagePack encoding, RAFT-10's priority
    /// included.
    fn worst_case() -> Self {
        let long = |c: char| c.to_string().repeat(MAX_ID_LEN);
        Self {
            cluster: cluster(&long('c')),
            a: PeerId::new(&long('a')).expect("32 bytes is the longest valid peer id"),
            b: PeerId::new(&long('b')).expect("32 bytes is the longest valid peer id"),
            term: u64::MAX,
            incarnation: u64::MAX,
            seq: u64::MAX,
            index: u64::MAX,
            timestamp_ms: u64::MAX,
            priority: Some(u8::MAX),
        }
    }

    fn envelope(
        &self,
        from: PeerId,
        to: Option<PeerId>,
        body: conclave_protocol::Body,
    ) -> Envelope {
        Envelope::new(self.cluster, from, self.incarnation, self.seq, to, body)
    }

    fn append_entries(&self, to: Option<PeerId>, entries: Vec<LogEntry>) -> Envelope {
        self.envelope(
            self.a,
            to,
            AppendEntries {
                prev_index: self.index,
                prev_term: self.term,
                entries,
                commit: self.index,
                ..AppendEntries::new(self.term, self.a)
            }
            .into(),
        )
    }

    /// A heartbeat is an `AppendEntries` with no entries.
    fn heartbeat(&self, to: Option<PeerId>) -> Envelope {
        self.append_entries(to, Vec::new())
    }

    fn vote_request(&self, to: Option<PeerId>) -> Envelope {
        self.envelope(
            self.a,
            to,
            RequestVote {
                term: self.term,
                candidate: self.a,
                last_log_index: self.index,
                last_log_term: self.term,
                pre_vote: false,
                leadership_transfer: false,
                priority: self.priority,
            }
            .into(),
        )
    }

    /// The rows of the document's size tables, label first.
    fn frames(&self) -> Vec<(&'static str, Envelope)> {
        vec![
            ("heartbeat, broadcast", self.heartbeat(None)),
            ("heartbeat, unicast", self.heartbeat(Some(self.b))),
            ("vote request, broadcast", self.vote_request(None)),
            ("vote request, unicast", self.vote_request(Some(self.b))),
            (
                "vote",
                self.envelope(
                    self.b,
                    Some(self.a),
                    Vote {
                        term: self.term,
                        granted: true,
                        pre_vote: false,
                        priority: self.priority,
                    }
                    .into(),
                ),
            ),
            (
                "ping",
                self.envelope(
                    self.a,
                    Some(self.b),
                    Ping {
                        timestamp_ms: self.timestamp_ms,
                    }
                    .into(),
                ),
            ),
            (
                "pong",
                self.envelope(
                    self.b,
                    Some(self.a),
                    Pong {
                        timestamp_ms: self.timestamp_ms,
                    }
                    .into(),
                ),
            ),
        ]
    }
}

fn encoded_len(codec: &FrameCodec, envelope: &Envelope) -> usize {
    codec
        .encode(envelope, usize::MAX)
        .expect("encodes without an MTU")
        .len()
}

/// The numeric cells of the document's table row whose first cell is `label`, in the section
/// that starts with `heading`.
fn doc_row(heading: &str, label: &str) -> Vec<usize> {
    let section = WIRE_DOC
        .split_once(heading)
        .unwrap_or_else(|| panic!("docs/wire-protocol.md has no heading {heading:?}"))
        .1;
    let section = section.split("\n#").next().unwrap_or(section);
    let row = section
        .lines()
        .find(|line| {
            line.split('|')
                .nth(1)
                .is_some_and(|cell| cell.trim() == label)
        })
        .unwrap_or_else(|| panic!("no row {label:?} under {heading:?} in docs/wire-protocol.md"));
    row.split('|')
        .skip(2)
        .filter_map(|cell| cell.trim().trim_matches('*').parse().ok())
        .collect()
}

const REALISTIC_HEADING: &str = "### Sizes of the frequent frames";
const HANDSHAKE_HEADING: &str = "### Sizes of the handshake frames";
/// The nonce of the document's handshake rows: a random 64-bit number is almost always this
/// wide (nine bytes of MessagePack).
const NONCE: u64 = 0x9e37_79b9_7f4a_7c15;
const WORST_HEADING: &str = "### Worst case";
const BATCH_HEADING: &str = "### Log entries per ESP-NOW frame";

/// PROTO-4, docs/design.md §11: with a 16-byte tag, each frequent frame is at most 64 bytes, and its
/// envelope, tag and total are exactly what the document's table says.
#[test]
fn frequent_frames_fit_the_target_and_match_the_doc() {
    let scenario = Scenario::realistic();
    let codec = codec(scenario.cluster, DEFAULT_TAG_LEN);
    let mut checked = 0;
    for (label, envelope) in scenario.frames() {
        let len = encoded_len(&codec, &envelope);
        assert!(len <= TARGET, "{label}: {len} bytes exceeds {TARGET}");
        assert_eq!(
            doc_row(REALISTIC_HEADING, label),
            vec![len - DEFAULT_TAG_LEN, DEFAULT_TAG_LEN, len],
            "{label}: envelope, tag and total in docs/wire-protocol.md"
        );
        checked += 1;
    }
    assert_eq!(checked, 7);
}

/// PROTO-4, PROTO-5: the challenge handshake's two frames (unicast, as they are always sent)
/// are what the document's table says, and each stays within the 64-byte target.
#[test]
fn handshake_frames_match_the_doc() {
    let scenario = Scenario::realistic();
    let codec = codec(scenario.cluster, DEFAULT_TAG_LEN);
    let rows = [
        (
            "challenge",
            scenario.envelope(
                scenario.a,
                Some(scenario.b),
                Challenge { nonce: NONCE }.into(),
            ),
        ),
        (
            "challenge_ack",
            scenario.envelope(
                scenario.b,
                Some(scenario.a),
                ChallengeAck { nonce: NONCE }.into(),
            ),
        ),
    ];
    for (label, envelope) in rows {
        let len = encoded_len(&codec, &envelope);
        assert!(len <= TARGET, "{label}: {len} bytes exceeds {TARGET}");
        assert_eq!(
            doc_row(HANDSHAKE_HEADING, label),
            vec![len - DEFAULT_TAG_LEN, DEFAULT_TAG_LEN, len],
            "{label}: envelope, tag and total in docs/wire-protocol.md"
        );
    }
}

/// The priority frames (PRI-2..5) of a pod: `gw-a` is master; `gw-b` discovers, campaigns
/// and votes. Realistic values: a score of 90 % battery, 42 minutes up, signal 190 and a
/// random byte; 5 peers; an hour up. The worst case puts every number at its widest.
fn priority_frames(scenario: &Scenario, worst: bool) -> Vec<(&'static str, Envelope)> {
    let (priority, round, uptime_s, peer_count) = if worst {
        (u32::MAX, u64::MAX, u32::MAX, u16::MAX)
    } else {
        (0x5a2a_be7f, scenario.term, 3600, 5)
    };
    let (a, b) = (scenario.a, scenario.b);
    vec![
        (
            "discover",
            scenario.envelope(
                b,
                None,
                Discover {
                    protocol_version: 1,
                    priority,
                    round,
                }
                .into(),
            ),
        ),
        (
            "discover_ack",
            scenario.envelope(
                a,
                Some(b),
                DiscoverAck {
                    priority,
                    known_master: Some(a),
                    round,
                }
                .into(),
            ),
        ),
        (
            "candidate",
            scenario.envelope(b, None, Candidate { priority, round }.into()),
        ),
        (
            "priority_vote",
            scenario.envelope(
                a,
                Some(b),
                PriorityVote {
                    candidate: b,
                    voter_priority: priority,
                    accept: true,
                    round,
                }
                .into(),
            ),
        ),
        (
            "master_announce",
            scenario.envelope(
                a,
                None,
                MasterAnnounce {
                    peer_count,
                    uptime_s,
                    battery: 90,
                    priority,
                    round,
                    forced: false,
                }
                .into(),
            ),
        ),
        (
            "master_resign",
            scenario.envelope(
                a,
                None,
                MasterResign {
                    reason: ResignReason::LowBattery,
                    successor: Some(b),
                    round,
                }
                .into(),
            ),
        ),
    ]
}

const PRIORITY_HEADING: &str = "### Sizes of the priority frames";

/// Room the priority frames leave in an ESP-NOW v1 frame even in the worst case with a full
/// tag, so that a field added later does not push them over.
const PRIORITY_ROOM: usize = 20;

/// PROTO-4, PRI-2..5: every priority frame is at most 64 bytes with realistic values and its
/// 16-byte tag, fits ESP-NOW v1 with room to spare in the worst case, and the document's table
/// says exactly these sizes.
#[test]
fn priority_frames_fit_espnow_and_match_the_doc() {
    let realistic = Scenario::realistic();
    let worst = Scenario::worst_case();
    let short_tag = codec(realistic.cluster, DEFAULT_TAG_LEN);
    let worst_full_tag = codec(worst.cluster, DEFAULT_TAG_LEN);
    let rows = priority_frames(&realistic, false)
        .into_iter()
        .zip(priority_frames(&worst, true));
    let mut checked = 0;
    for ((label, envelope), (_, worst_envelope)) in rows {
        let len = encoded_len(&short_tag, &envelope);
        let worst_len = encoded_len(&worst_full_tag, &worst_envelope);
        assert!(len <= TARGET, "{label}: {len} bytes exceeds {TARGET}");
        assert!(
            worst_len + PRIORITY_ROOM <= ESPNOW_V1_MTU,
            "{label}: {worst_len} bytes leaves less than {PRIORITY_ROOM} of {ESPNOW_V1_MTU}"
        );
        assert_eq!(
            doc_row(PRIORITY_HEADING, label),
            vec![len - DEFAULT_TAG_LEN, len, worst_len],
            "{label}: envelope, frame and worst case in docs/wire-protocol.md"
        );
        checked += 1;
    }
    assert_eq!(checked, 6);
}

/// PROTO-4, PROTO-9: a heartbeat as a sealed node sends it today — its incarnation the Unix
/// second of its start, its sequence from a random start — is at most 64 bytes broadcast and
/// unicast, the sizes the document states.
#[test]
fn heartbeat_as_sent_fits_the_target_and_matches_the_doc() {
    let scenario = Scenario {
        incarnation: 1_764_000_000,
        seq: conclave_protocol::first_seq(u64::MAX),
        ..Scenario::realistic()
    };
    let codec = codec(scenario.cluster, DEFAULT_TAG_LEN);
    let broadcast = encoded_len(&codec, &scenario.heartbeat(None));
    let unicast = encoded_len(&codec, &scenario.heartbeat(Some(scenario.b)));
    assert!(unicast <= TARGET, "{unicast} bytes");
    let sentence = format!("{broadcast} bytes broadcast and {unicast} unicast");
    let prose = WIRE_DOC.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        prose.contains(&sentence),
        "docs/wire-protocol.md should say {sentence:?}"
    );
}

/// PROTO-4: the sentence the document leads with names the real heartbeat size.
#[test]
fn doc_states_the_heartbeat_size() {
    let scenario = Scenario::realistic();
    let len = encoded_len(
        &codec(scenario.cluster, DEFAULT_TAG_LEN),
        &scenario.heartbeat(None),
    );
    let sentence = format!("a heartbeat frame with its 16-byte tag is {len} bytes");
    // Prose is wrapped at any space; compare with line breaks folded.
    let prose = WIRE_DOC.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        prose.contains(&sentence),
        "docs/wire-protocol.md should say {sentence:?}"
    );
}

/// PROTO-4: with 32-byte ids and the widest numbers, every frequent frame still fits ESP-NOW
/// v1 sealed (tag included); the document's worst-case table matches.
#[test]
fn worst_case_frames_fit_espnow_and_match_the_doc() {
    let scenario = Scenario::worst_case();
    let sealed = codec(scenario.cluster, DEFAULT_TAG_LEN);
    for (label, envelope) in scenario.frames() {
        let len = encoded_len(&sealed, &envelope);
        assert!(len <= ESPNOW_V1_MTU, "{label}: {len} bytes");
        assert_eq!(
            doc_row(WORST_HEADING, label),
            vec![len - DEFAULT_TAG_LEN, len],
            "{label}: worst case in docs/wire-protocol.md"
        );
    }
}

/// PROTO-4, LOG-7: a worst-case unicast heartbeat that also carries the widest read round is
/// 9 bytes longer and still fits ESP-NOW v1: the size the document states.
#[test]
fn worst_case_heartbeat_with_a_read_round_fits_espnow() {
    let scenario = Scenario::worst_case();
    let full_tag = codec(scenario.cluster, DEFAULT_TAG_LEN);
    let plain = scenario.heartbeat(Some(scenario.b));
    let mut with_round = plain.clone();
    if let conclave_protocol::Body::AppendEntries(append) = &mut with_round.body {
        append.read_round = Some(u64::MAX);
    }
    let len = encoded_len(&full_tag, &with_round);
    assert_eq!(len, encoded_len(&full_tag, &plain) + 9);
    assert!(len <= ESPNOW_V1_MTU, "{len} bytes");
    assert!(
        WIRE_DOC.contains(&format!("{len} bytes unicast, sealed")),
        "docs/wire-protocol.md states {len} bytes"
    );
}

/// PROTO-2, PROTO-5: the document's annotated hex dump is the exact heartbeat frame, tag
/// included, under the key the document names; offsets in its first column are right.
#[test]
fn doc_hex_dump_is_the_real_heartbeat() {
    let scenario = Scenario::realistic();
    let frame = codec(scenario.cluster, DEFAULT_TAG_LEN)
        .encode(&scenario.heartbeat(None), ESPNOW_V1_MTU)
        .expect("fits");
    assert!(
        WIRE_DOC.contains(&format!("`{}`", String::from_utf8_lossy(DOC_KEY))),
        "the document names the key of its dump"
    );

    let dump = WIRE_DOC
        .split_once("<!-- heartbeat-dump:begin -->")
        .and_then(|(_, rest)| rest.split_once("<!-- heartbeat-dump:end -->"))
        .map(|(dump, _)| dump)
        .expect("docs/wire-protocol.md has the heartbeat dump markers");
    let mut documented = Vec::new();
    for row in dump.lines() {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Some(offset) = cells.get(1).and_then(|c| c.parse::<usize>().ok()) else {
            continue; // header and separator rows
        };
        assert_eq!(offset, documented.len(), "offset column of row {row:?}");
        let bytes = cells.get(2).expect("a bytes column").trim_matches('`');
        for pair in bytes.split_whitespace() {
            documented.push(u8::from_str_radix(pair, 16).expect("hex byte"));
        }
    }
    assert_eq!(
        documented,
        frame,
        "docs/wire-protocol.md dump vs the encoder (hex: {})",
        frame
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// How many `payload`-byte entries a unicast `AppendEntries` carries under `mtu`: the largest
/// batch that encodes, found by growing it until the codec answers `Oversize`.
fn largest_batch(codec: &FrameCodec, scenario: &Scenario, payload: usize, mtu: usize) -> usize {
    let mut entries = Vec::new();
    loop {
        let count = entries.len();
        entries.push(LogEntry {
            index: scenario.index + 1 + count as u64,
            term: scenario.term,
            kind: EntryKind::Command,
            data: vec![0x5a; payload],
        });
        let envelope = scenario.append_entries(Some(scenario.b), entries.clone());
        match codec.encode(&envelope, mtu) {
            Ok(frame) => assert!(frame.len() <= mtu),
            Err(FrameError::Oversize { len, mtu: limit }) => {
                assert_eq!(limit, mtu);
                assert!(len > mtu);
                return count;
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
}

/// PROTO-4: a leader cuts `AppendEntries` batches to the MTU; the largest batch of N-byte
/// entries that fits ESP-NOW v1 is what the document's table says.
#[test]
fn largest_append_entries_batch_matches_the_doc() {
    let scenario = Scenario::realistic();
    let codec = codec(scenario.cluster, DEFAULT_TAG_LEN);
    for payload in [0, 16, 64, 200] {
        let count = largest_batch(&codec, &scenario, payload, ESPNOW_V1_MTU);
        assert_eq!(
            doc_row(BATCH_HEADING, &format!("{payload} B")),
            vec![count],
            "{payload}-byte entries in docs/wire-protocol.md"
        );
    }
    // A 250-byte frame has room for one entry of 250 - 59 - 8 = 183 bytes, not 184.
    assert_eq!(largest_batch(&codec, &scenario, 183, ESPNOW_V1_MTU), 1);
    assert_eq!(largest_batch(&codec, &scenario, 184, ESPNOW_V1_MTU), 0);
}

/// MEMB-6: what a chunk of an entry adds to an AppendEntries beside its data is at most 36
/// bytes (the nil standing for an absent read round, then the chunk's fields at their widest),
/// the overhead the leader counts against `log.max_append_bytes` when it cuts an entry.
#[test]
fn an_entry_chunk_adds_at_most_36_bytes_beside_its_data() {
    let scenario = Scenario::worst_case();
    let codec = FrameCodec::new(scenario.cluster, None);
    let base = codec
        .encode(&scenario.heartbeat(Some(scenario.b)), usize::MAX)
        .expect("a heartbeat encodes")
        .len();
    for len in [0, 1, 200, 255, 256, 1221] {
        let mut envelope = scenario.heartbeat(Some(scenario.b));
        if let conclave_protocol::Body::AppendEntries(append) = &mut envelope.body {
            append.chunk = Some(Box::new(conclave_protocol::EntryChunk {
                index: u64::MAX,
                term: u64::MAX,
                kind: EntryKind::Command,
                offset: u32::MAX,
                total_len: u32::MAX,
                data: vec![0xa5; len],
            }));
        }
        let frame = codec
            .encode(&envelope, usize::MAX)
            .expect("a chunk encodes");
        assert!(
            frame.len() - base - len <= 36,
            "{len} bytes of data: {} beside them",
            frame.len() - base - len
        );
    }
}

/// MEMB-1: a configuration entry is an entry like any other on the wire (its kind is one
/// byte, as a command's), and a five-voter, two-learner configuration of realistic ids fits
/// one ESP-NOW v1 frame, so it needs no chunks.
#[test]
fn memb1_a_configuration_entry_fits_espnow_v1() {
    let scenario = Scenario::realistic();
    let codec = codec(scenario.cluster, DEFAULT_TAG_LEN);
    let id = |name: &str| PeerId::new(name).unwrap();
    let config = Configuration {
        voters: ["gw-a", "gw-b", "gw-c", "gw-d", "gw-e"].map(id).into(),
        learners: ["gw-f", "gw-g"].map(id).into(),
        addresses: Default::default(),
    };
    let data = config.encode();
    let entry = |kind| LogEntry {
        index: scenario.index + 1,
        term: scenario.term,
        kind,
        data: data.clone(),
    };
    let config_frame = codec
        .encode(
            &scenario.append_entries(Some(scenario.b), vec![entry(EntryKind::Config)]),
            ESPNOW_V1_MTU,
        )
        .unwrap();
    let command_frame = codec
        .encode(
            &scenario.append_entries(Some(scenario.b), vec![entry(EntryKind::Command)]),
            ESPNOW_V1_MTU,
        )
        .unwrap();
    assert_eq!(config_frame.len(), command_frame.len());
    assert!(config_frame.len() <= ESPNOW_V1_MTU);
}
