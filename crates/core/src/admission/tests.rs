//! Tests of the admission state machine (PROTO-5, MEM-3, TR-2). Each feeds frames and compares
//! the verdict and the drained actions exactly.

use std::time::Duration;

use conclave_protocol::{
    AppendEntries, Body, Challenge, ChallengeAck, DropReason, Goodbye, Hello, PeerId, Ping,
};

use super::*;
use crate::testing::{drain, id, ms};

const SEED: u64 = 7;
/// This node's start, in Unix seconds, and its incarnation.
const START: u64 = 1_700_000_000;

fn addr(text: &str) -> LinkAddr {
    LinkAddr::new(text)
}

/// The nonce the machine draws first: the first output of its RNG.
fn first_nonce() -> u64 {
    SeededRng::new(SEED).next_u64()
}

fn config() -> AdmissionConfig {
    AdmissionConfig {
        owner_timeout: Duration::from_millis(2000),
        ..AdmissionConfig::new(id("gw-a"), START)
    }
}

fn machine(config: AdmissionConfig) -> Admission {
    Admission::new(config, SeededRng::new(SEED))
}

fn header(from: &str, incarnation: u64, seq: u64) -> FrameHeader {
    FrameHeader {
        from: id(from),
        to: None,
        incarnation,
        seq,
    }
}

fn to_me(from: &str, incarnation: u64, seq: u64) -> FrameHeader {
    FrameHeader {
        to: Some(id("gw-a")),
        ..header(from, incarnation, seq)
    }
}

fn ping() -> Body {
    Body::Ping(Ping { timestamp_ms: 1 })
}

fn heartbeat() -> Body {
    Body::AppendEntries(AppendEntries::new(3, id("gw-b")))
}

fn challenge(nonce: u64) -> Body {
    Body::Challenge(Challenge { nonce })
}

fn ack(nonce: u64) -> Body {
    Body::ChallengeAck(ChallengeAck { nonce })
}

fn reply(to: &str, origin: &str, body: Body) -> AdmissionAction {
    AdmissionAction::Reply {
        to: id(to),
        origin: addr(origin),
        body,
    }
}

/// Feeds one frame at `now` with the clock at this node's start.
fn feed(
    admission: &mut Admission,
    now: Instant,
    origin: &str,
    header: FrameHeader,
    body: &Body,
) -> Verdict {
    admission.handle_frame(now, START, &addr(origin), &header, body)
}

/// A machine that has verified `gw-b` at `mem:2` with its answer at incarnation 5, seq 100.
fn with_b_verified() -> Admission {
    let mut admission = machine(config());
    feed(
        &mut admission,
        ms(0),
        "mem:2",
        header("gw-b", 5, 90),
        &ping(),
    );
    drain(&mut admission);
    assert_eq!(
        feed(
            &mut admission,
            ms(1),
            "mem:2",
            to_me("gw-b", 5, 100),
            &ack(first_nonce())
        ),
        Verdict::Consumed
    );
    drain(&mut admission);
    admission
}

// ---------------------------------------------------------------------------------------------
// PROTO-5: freshness across a restart

/// PROTO-5: a node that has just started admits nothing from a sender it has not verified:
/// the frame is dropped as `unverified` and the sender is challenged where the frame came from.
#[test]
fn proto5_unverified_frame_is_dropped_and_challenged() {
    let mut admission = machine(config());
    let verdict = feed(
        &mut admission,
        ms(0),
        "mem:2",
        header("gw-b", 5, 90),
        &ping(),
    );
    assert_eq!(verdict, Verdict::Drop(DropReason::Unverified));
    assert_eq!(
        drain(&mut admission),
        vec![reply("gw-b", "mem:2", challenge(first_nonce()))]
    );
    assert!(!admission.is_verified(&id("gw-b")));
    assert_eq!(admission.pending_count(), 1);
}

/// PROTO-5: one challenge per sender and address per interval, with one nonce until the sender
/// answers; a flood from one address cannot keep another address from being challenged.
#[test]
fn proto5_challenges_are_paced_per_address() {
    let mut admission = machine(config());
    let nonce = first_nonce();
    feed(
        &mut admission,
        ms(0),
        "mem:2",
        header("gw-b", 5, 1),
        &ping(),
    );
    drain(&mut admission);
    for seq in 2..50 {
        let verdict = feed(
            &mut admission,
            ms(50),
            "mem:2",
            header("gw-b", 5, seq),
            &ping(),
        );
        assert_eq!(verdict, Verdict::Drop(DropReason::Unverified));
    }
    assert_eq!(drain(&mut admission), vec![], "paced");
    feed(
        &mut admission,
        ms(50),
        "mem:9",
        header("gw-b", 5, 60),
        &ping(),
    );
    assert_eq!(
        drain(&mut admission),
        vec![reply("gw-b", "mem:9", challenge(nonce))],
        "another address is asked at once, with the same nonce"
    );
    feed(
        &mut admission,
        ms(100),
        "mem:2",
        header("gw-b", 5, 61),
        &ping(),
    );
    assert_eq!(
        drain(&mut admission),
        vec![reply("gw-b", "mem:2", challenge(nonce))],
        "asked again once the interval has passed"
    );
}

/// PROTO-5: the answer with the nonce verifies the sender where it answered from; its window
/// starts at the answer with every earlier frame counted as seen, so nothing captured before
/// is accepted, not even inside the reorder window; newer frames are.
#[test]
fn proto5_answer_verifies_with_everything_before_it_seen() {
    let mut admission = machine(config());
    feed(
        &mut admission,
        ms(0),
        "mem:2",
        header("gw-b", 5, 90),
        &ping(),
    );
    drain(&mut admission);
    let verdict = feed(
        &mut admission,
        ms(1),
        "mem:2",
        to_me("gw-b", 5, 100),
        &ack(first_nonce()),
    );
    assert_eq!(verdict, Verdict::Consumed);
    assert_eq!(
        drain(&mut admission),
        vec![AdmissionAction::Verified {
            peer: id("gw-b"),
            origin: addr("mem:2"),
        }]
    );
    assert!(admission.is_verified(&id("gw-b")));
    assert_eq!(admission.pending_count(), 0);
    assert_eq!(
        admission.owner(&id("gw-b"), &addr("mem:0")),
        Some(&addr("mem:2"))
    );
    for (incarnation, seq) in [(5, 100), (5, 99), (5, 90), (5, 40), (4, 1_000)] {
        assert_eq!(
            feed(
                &mut admission,
                ms(2),
                "mem:2",
                header("gw-b", incarnation, seq),
                &heartbeat()
            ),
            Verdict::Drop(DropReason::Replay),
            "({incarnation}, {seq})"
        );
    }
    assert_eq!(
        feed(
            &mut admission,
            ms(2),
            "mem:2",
            header("gw-b", 5, 101),
            &heartbeat()
        ),
        Verdict::Accept
    );
    assert_eq!(
        feed(
            &mut admission,
            ms(2),
            "mem:2",
            header("gw-b", 5, 101),
            &heartbeat()
        ),
        Verdict::Drop(DropReason::Replay)
    );
    assert_eq!(drain(&mut admission), vec![]);
}

/// PROTO-5: an answer with another nonce (one captured before this node started), or from an
/// address that was not asked, verifies nothing.
#[test]
fn proto5_answer_to_another_challenge_is_refused() {
    let mut admission = machine(config());
    let nonce = first_nonce();
    feed(
        &mut admission,
        ms(0),
        "mem:2",
        header("gw-b", 5, 90),
        &ping(),
    );
    drain(&mut admission);
    assert_eq!(
        feed(
            &mut admission,
            ms(1),
            "mem:2",
            to_me("gw-b", 5, 95),
            &ack(nonce ^ 1)
        ),
        Verdict::Drop(DropReason::Unverified)
    );
    assert_eq!(
        feed(
            &mut admission,
            ms(1),
            "mem:7",
            to_me("gw-b", 5, 96),
            &ack(nonce)
        ),
        Verdict::Drop(DropReason::Unverified)
    );
    assert_eq!(drain(&mut admission), vec![]);
    assert!(!admission.is_verified(&id("gw-b")));
    // An answer with no challenge outstanding at all.
    assert_eq!(
        feed(
            &mut admission,
            ms(1),
            "mem:3",
            to_me("gw-c", 5, 1),
            &ack(nonce)
        ),
        Verdict::Drop(DropReason::Unverified)
    );
    assert_eq!(drain(&mut admission), vec![]);
}

/// PROTO-5: every frame a sender sent before this node started, played back in any order
/// after the start, is refused — before the sender is verified and after.
#[test]
fn proto5_frames_captured_before_the_start_are_never_accepted() {
    // Before the restart: gw-b's frames (5, 1..=200) were all accepted by the old node.
    let captured: Vec<(FrameHeader, Body)> = (1..=200)
        .map(|seq| {
            let body = match seq % 3 {
                0 => heartbeat(),
                1 => ping(),
                _ => Body::Hello(Hello {}),
            };
            (header("gw-b", 5, seq), body)
        })
        .collect();
    let mut admission = machine(config());
    for (header, body) in captured.iter().rev() {
        let verdict = feed(&mut admission, ms(0), "mem:9", *header, body);
        assert_eq!(verdict, Verdict::Drop(DropReason::Unverified));
    }
    // The real gw-b answers the challenge its next live frame drew, from its own address.
    feed(
        &mut admission,
        ms(10),
        "mem:2",
        header("gw-b", 5, 230),
        &ping(),
    );
    drain(&mut admission);
    assert_eq!(
        feed(
            &mut admission,
            ms(11),
            "mem:2",
            to_me("gw-b", 5, 231),
            &ack(first_nonce())
        ),
        Verdict::Consumed
    );
    // Played back in order from another address, the Hellos look like a node whose own
    // frames move on (a copy started in the same second): a few go to membership to be
    // refused, the rest are dropped; played back again, every one is a replay. Anything else
    // from an address that does not own the id is refused as the duplicate's (MEM-3); from the
    // owner's address, everything is a replay.
    for origin in ["mem:9", "mem:9", "mem:2"] {
        let mut contested = 0;
        for (header, body) in &captured {
            let verdict = feed(&mut admission, ms(12), origin, *header, body);
            let expected = match (origin, body) {
                ("mem:9", Body::Hello(_)) if verdict == Verdict::Contested => {
                    contested += 1;
                    Verdict::Contested
                }
                ("mem:9", Body::Hello(_)) if contested > 0 => {
                    Verdict::Drop(DropReason::DuplicateId)
                }
                ("mem:9", Body::Hello(_)) | ("mem:2", _) => Verdict::Drop(DropReason::Replay),
                _ => Verdict::Drop(DropReason::DuplicateId),
            };
            assert_eq!(verdict, expected, "{header:?} from {origin}");
        }
        assert!(contested <= CONTESTED_PER_INTERVAL, "{contested} refusals");
        assert!(matches!(origin, "mem:9") || contested == 0);
    }
}

/// PROTO-5: a challenge is answered whatever this node knows of the challenger; a challenger
/// not yet verified is challenged back.
#[test]
fn proto5_challenge_is_always_answered() {
    let mut admission = machine(config());
    let verdict = feed(
        &mut admission,
        ms(0),
        "mem:2",
        to_me("gw-b", 5, 1),
        &challenge(42),
    );
    assert_eq!(verdict, Verdict::Consumed);
    assert_eq!(
        drain(&mut admission),
        vec![
            reply("gw-b", "mem:2", ack(42)),
            reply("gw-b", "mem:2", challenge(first_nonce())),
        ]
    );

    let mut admission = with_b_verified();
    let verdict = feed(
        &mut admission,
        ms(5),
        "mem:2",
        to_me("gw-b", 6, 1),
        &challenge(43),
    );
    assert_eq!(verdict, Verdict::Consumed);
    assert_eq!(drain(&mut admission), vec![reply("gw-b", "mem:2", ack(43))]);
    // From another address too: answering proves this node fresh and changes nothing here.
    let verdict = feed(
        &mut admission,
        ms(5),
        "mem:9",
        to_me("gw-b", 6, 2),
        &challenge(44),
    );
    assert_eq!(verdict, Verdict::Consumed);
    assert_eq!(drain(&mut admission), vec![reply("gw-b", "mem:9", ack(44))]);
    assert_eq!(
        admission.owner(&id("gw-b"), &addr("mem:0")),
        Some(&addr("mem:2"))
    );
}

/// PROTO-5: two nodes that both restarted verify each other through the handshake alone, and
/// afterwards each admits the other's frames.
#[test]
fn proto5_two_restarted_nodes_verify_each_other() {
    let mut a = Admission::new(AdmissionConfig::new(id("gw-a"), START), SeededRng::new(1));
    let mut b = Admission::new(AdmissionConfig::new(id("gw-b"), START), SeededRng::new(2));
    let mut seqs = [0u64; 2];
    // (sender index, addressee, body) in flight; a is at mem:0, b at mem:1.
    let mut wire: Vec<(usize, Option<PeerId>, Body)> = vec![
        (0, None, Body::Hello(Hello {})),
        (1, None, Body::Hello(Hello {})),
    ];
    let mut verified = Vec::new();
    let mut rounds = 0;
    while let Some((sender, to, body)) = (!wire.is_empty()).then(|| wire.remove(0)) {
        rounds += 1;
        assert!(rounds < 20, "the handshake ends");
        seqs[sender] += 1;
        let (receiver, names, origin) = if sender == 0 {
            (&mut b, ("gw-a", "gw-b"), "mem:0")
        } else {
            (&mut a, ("gw-b", "gw-a"), "mem:1")
        };
        let header = FrameHeader {
            from: id(names.0),
            to,
            incarnation: START,
            seq: seqs[sender],
        };
        receiver.handle_frame(ms(rounds), START, &addr(origin), &header, &body);
        while let Some(action) = receiver.poll_action() {
            match action {
                AdmissionAction::Reply { to, body, .. } => wire.push((1 - sender, Some(to), body)),
                AdmissionAction::Verified { peer, .. } => verified.push((names.1, peer)),
                other => panic!("{other:?}"),
            }
        }
    }
    verified.sort();
    assert_eq!(verified, vec![("gw-a", id("gw-b")), ("gw-b", id("gw-a"))]);
    let next = |seq| FrameHeader {
        from: id("gw-b"),
        to: None,
        incarnation: START,
        seq,
    };
    assert_eq!(
        a.handle_frame(ms(50), START, &addr("mem:1"), &next(seqs[1] + 1), &ping()),
        Verdict::Accept
    );
}

/// PROTO-5: an incarnation more than a day ahead of the clock is refused and noticed (once
/// per ten seconds); up to the margin it is not. The node's own incarnation stands in for a
/// clock that is behind it.
#[test]
fn proto5_incarnation_far_ahead_of_the_clock_is_refused() {
    let mut admission = machine(config());
    let limit = START + DEFAULT_MAX_INCARNATION_AHEAD;
    let at_limit = feed(
        &mut admission,
        ms(0),
        "mem:2",
        header("gw-b", limit, 1),
        &ping(),
    );
    assert_eq!(at_limit, Verdict::Drop(DropReason::Unverified));
    drain(&mut admission);
    let beyond = feed(
        &mut admission,
        ms(0),
        "mem:3",
        header("gw-c", limit + 1, 1),
        &ping(),
    );
    assert_eq!(beyond, Verdict::Drop(DropReason::IncarnationAhead));
    assert_eq!(
        drain(&mut admission),
        vec![AdmissionAction::Notice(AdmissionNotice::IncarnationAhead {
            peer: id("gw-c"),
            origin: addr("mem:3"),
            incarnation: limit + 1,
            clock: START,
        })]
    );
    let max = feed(
        &mut admission,
        ms(5_000),
        "mem:3",
        header("gw-c", u64::MAX, 2),
        &ping(),
    );
    assert_eq!(max, Verdict::Drop(DropReason::IncarnationAhead));
    assert_eq!(drain(&mut admission), vec![], "one notice per ten seconds");
    feed(
        &mut admission,
        ms(10_000),
        "mem:3",
        header("gw-c", u64::MAX, 3),
        &ping(),
    );
    assert_eq!(drain(&mut admission).len(), 1);

    // A clock far behind (a board without a real-time clock, before NTP): the node's own
    // incarnation, from its last good start, is the reference.
    let verdict = admission.handle_frame(
        ms(20_000),
        0,
        &addr("mem:2"),
        &header("gw-b", limit, 2),
        &ping(),
    );
    assert_eq!(verdict, Verdict::Drop(DropReason::Unverified));
    let verdict = admission.handle_frame(
        ms(20_000),
        limit + 10,
        &addr("mem:4"),
        &header("gw-d", limit + 10, 1),
        &ping(),
    );
    assert_eq!(
        verdict,
        Verdict::Drop(DropReason::Unverified),
        "a clock ahead of the incarnation"
    );
}

/// PROTO-5: the peer table is bounded: past `max_peers` senders that are not configured
/// voters are refused (`peer_limit`, noticed) instead of challenged; voters always fit.
#[test]
fn proto5_peer_table_is_bounded_and_voters_always_fit() {
    let mut admission = machine(AdmissionConfig {
        max_peers: 1,
        reserved: [id("gw-v")].into_iter().collect(),
        ..config()
    });
    feed(
        &mut admission,
        ms(0),
        "mem:2",
        header("gw-b", 5, 1),
        &ping(),
    );
    drain(&mut admission);
    feed(
        &mut admission,
        ms(1),
        "mem:2",
        to_me("gw-b", 5, 2),
        &ack(first_nonce()),
    );
    drain(&mut admission);
    assert_eq!(admission.verified_count(), 1);

    let verdict = feed(
        &mut admission,
        ms(2),
        "mem:3",
        header("gw-c", 5, 1),
        &ping(),
    );
    assert_eq!(verdict, Verdict::Drop(DropReason::PeerLimit));
    assert_eq!(
        drain(&mut admission),
        vec![AdmissionAction::Notice(AdmissionNotice::PeerLimit {
            peer: id("gw-c"),
            origin: addr("mem:3"),
            limit: 1,
        })]
    );
    assert_eq!(
        admission.pending_count(),
        0,
        "nobody is challenged past the bound"
    );

    let verdict = feed(
        &mut admission,
        ms(3),
        "mem:4",
        header("gw-v", 5, 1),
        &ping(),
    );
    assert_eq!(verdict, Verdict::Drop(DropReason::Unverified));
    let second_nonce = {
        let mut rng = SeededRng::new(SEED);
        rng.next_u64();
        rng.next_u64()
    };
    assert_eq!(
        drain(&mut admission),
        vec![reply("gw-v", "mem:4", challenge(second_nonce))]
    );
    feed(
        &mut admission,
        ms(4),
        "mem:4",
        to_me("gw-v", 5, 2),
        &ack(second_nonce),
    );
    assert!(admission.is_verified(&id("gw-v")));

    // Once gw-b says goodbye there is room again.
    assert_eq!(
        feed(
            &mut admission,
            ms(5),
            "mem:2",
            header("gw-b", 5, 3),
            &Body::Goodbye(Goodbye {})
        ),
        Verdict::Accept
    );
    drain(&mut admission);
    let verdict = feed(
        &mut admission,
        ms(6),
        "mem:3",
        header("gw-c", 5, 2),
        &ping(),
    );
    assert_eq!(verdict, Verdict::Drop(DropReason::Unverified));
}

/// PROTO-5, TR-2: one address claiming ever new ids gets at most `CHALLENGES_PER_ORIGIN`
/// challenges per `challenge_interval`, not one per datagram; another address is challenged
/// all the same, and the next interval brings more.
#[test]
fn proto5_challenges_to_one_address_are_paced_whatever_the_ids() {
    let mut admission = machine(config());
    let challenged = |actions: Vec<AdmissionAction>| -> Vec<PeerId> {
        actions
            .into_iter()
            .filter_map(|action| match action {
                AdmissionAction::Reply {
                    to,
                    body: Body::Challenge(_),
                    ..
                } => Some(to),
                _ => None,
            })
            .collect()
    };
    for n in 0..100 {
        let verdict = feed(
            &mut admission,
            ms(n),
            "mem:9",
            header(&format!("x{n}"), 5, 1),
            &ping(),
        );
        assert_eq!(verdict, Verdict::Drop(DropReason::Unverified));
    }
    let first: Vec<PeerId> = (0..CHALLENGES_PER_ORIGIN)
        .map(|n| id(&format!("x{n}")))
        .collect();
    assert_eq!(challenged(drain(&mut admission)), first);
    feed(
        &mut admission,
        ms(99),
        "mem:2",
        header("gw-b", 5, 1),
        &ping(),
    );
    assert_eq!(challenged(drain(&mut admission)), vec![id("gw-b")]);
    let later = ms(0) + config().challenge_interval;
    feed(&mut admission, later, "mem:9", header("x50", 5, 2), &ping());
    assert_eq!(challenged(drain(&mut admission)), vec![id("x50")]);
}

/// PROTO-5: at most `MAX_PENDING` senders are challenged at once; the one heard least recently
/// is forgotten first.
#[test]
fn proto5_pending_challenges_are_bounded() {
    let mut admission = machine(AdmissionConfig {
        max_peers: 1_000,
        ..config()
    });
    for n in 0..=MAX_PENDING as u64 {
        let name = format!("n{n}");
        feed(&mut admission, ms(n), "mem:9", header(&name, 5, 1), &ping());
    }
    assert_eq!(admission.pending_count(), MAX_PENDING);
    // n0 was forgotten: its answer with the first nonce no longer verifies it.
    let verdict = feed(
        &mut admission,
        ms(100),
        "mem:9",
        to_me("n0", 5, 2),
        &ack(first_nonce()),
    );
    assert_eq!(verdict, Verdict::Drop(DropReason::Unverified));
}

// ---------------------------------------------------------------------------------------------
// MEM-3: who owns an id

/// MEM-3: while the owner of an id is live, a frame from another address on the same link —
/// even one with a newer incarnation — moves neither the window nor the owner; the owner's
/// next frame is still accepted.
#[test]
fn mem3_frame_from_another_address_moves_nothing() {
    let mut admission = with_b_verified();
    let duplicate = feed(
        &mut admission,
        ms(10),
        "mem:9",
        header("gw-b", 9, 1),
        &heartbeat(),
    );
    assert_eq!(duplicate, Verdict::Drop(DropReason::DuplicateId));
    assert_eq!(drain(&mut admission), vec![]);
    assert_eq!(
        feed(
            &mut admission,
            ms(11),
            "mem:2",
            header("gw-b", 5, 101),
            &heartbeat()
        ),
        Verdict::Accept,
        "the real node is not refused as a replay"
    );
    assert_eq!(
        admission.owner(&id("gw-b"), &addr("mem:0")),
        Some(&addr("mem:2"))
    );
}

/// MEM-3: a `Hello` from another address while the owner is live goes to membership as
/// contested (so that it can be refused), and moves nothing either.
#[test]
fn mem3_hello_from_another_address_is_contested() {
    let mut admission = with_b_verified();
    let hello = Body::Hello(Hello {});
    assert_eq!(
        feed(
            &mut admission,
            ms(10),
            "mem:9",
            header("gw-b", 9, 1),
            &hello
        ),
        Verdict::Contested
    );
    assert_eq!(drain(&mut admission), vec![]);
    assert_eq!(
        feed(
            &mut admission,
            ms(11),
            "mem:2",
            header("gw-b", 5, 101),
            &hello
        ),
        Verdict::Accept
    );
}

/// MEM-3, PROTO-5, TR-2: a `Hello` the owner already sent, played back from another address
/// while the owner is live, goes to membership (to be refused) once, the first time that
/// address sends it; every copy after that, and every older frame, is a replay, dropped as
/// such before membership hears of it: a flood of one captured `Hello` costs a counter each,
/// not a refusal, a reply and a log line each.
#[test]
fn mem3_replayed_hello_from_another_address_is_answered_once_then_a_replay() {
    let mut admission = with_b_verified();
    let hello = Body::Hello(Hello {});
    assert_eq!(
        feed(
            &mut admission,
            ms(10),
            "mem:2",
            header("gw-b", 5, 101),
            &hello
        ),
        Verdict::Accept
    );
    let mut verdicts = Vec::new();
    for n in 0..1_000 {
        // The captured frame, and older ones, at full speed.
        for seq in [101, 100, 50] {
            verdicts.push(feed(
                &mut admission,
                ms(11 + n),
                "mem:9",
                header("gw-b", 5, seq),
                &hello,
            ));
        }
    }
    let mut expected = vec![Verdict::Drop(DropReason::Replay); verdicts.len()];
    expected[0] = Verdict::Contested;
    assert_eq!(verdicts, expected);
    assert_eq!(drain(&mut admission), vec![]);
    assert_eq!(
        feed(
            &mut admission,
            ms(2_000),
            "mem:2",
            header("gw-b", 5, 102),
            &ping()
        ),
        Verdict::Accept,
        "the owner is untouched"
    );
}

/// MEM-3: a copy of a node started in the same second has the same incarnation and lower
/// sequence numbers than the real node, which the owner's window alone would take for
/// replays; its own sequence moves on, so each of its `Hello`s goes to membership to be
/// refused.
#[test]
fn mem3_copy_started_in_the_same_second_is_contested() {
    let mut admission = with_b_verified();
    let hello = Body::Hello(Hello {});
    for seq in 1..=5 {
        assert_eq!(
            feed(
                &mut admission,
                ms(seq * 1_000),
                "mem:9",
                header("gw-b", 5, seq),
                &hello
            ),
            Verdict::Contested,
            "seq {seq}"
        );
        // The real node keeps the id.
        assert_eq!(
            feed(
                &mut admission,
                ms(seq * 1_000),
                "mem:2",
                header("gw-b", 5, 100 + seq),
                &ping()
            ),
            Verdict::Accept
        );
    }
}

/// MEM-3, TR-2: fresh `Hello`s claiming a live id from another address (an impostor, or
/// forgeries where no key is needed) go to membership to be refused at most
/// `CONTESTED_PER_INTERVAL` times per `challenge_interval` per id and address; the rest are
/// dropped as `duplicate_id`. Another address is paced on its own.
#[test]
fn mem3_contested_hellos_are_paced_per_address() {
    let mut admission = with_b_verified();
    let hello = Body::Hello(Hello {});
    let interval = config().challenge_interval;
    let burst = CONTESTED_PER_INTERVAL as usize;
    let verdicts: Vec<Verdict> = (1..=10)
        .map(|seq| {
            feed(
                &mut admission,
                ms(10 + seq),
                "mem:9",
                header("gw-b", 9, seq),
                &hello,
            )
        })
        .collect();
    let mut expected = vec![Verdict::Contested; burst];
    expected.resize(10, Verdict::Drop(DropReason::DuplicateId));
    assert_eq!(verdicts, expected);
    assert_eq!(
        feed(
            &mut admission,
            ms(30),
            "mem:8",
            header("gw-b", 9, 11),
            &hello
        ),
        Verdict::Contested
    );
    let next = ms(11) + interval;
    assert_eq!(
        feed(&mut admission, next, "mem:9", header("gw-b", 9, 12), &hello),
        Verdict::Contested
    );
    // The owner kept the id throughout.
    assert_eq!(
        feed(
            &mut admission,
            next,
            "mem:2",
            header("gw-b", 5, 101),
            &ping()
        ),
        Verdict::Accept
    );
}

/// PROTO-5: without a key, answering a challenge is all it takes to be verified, so places
/// among `max_peers` must not be held for ever: once every place is taken, a newcomer takes
/// the place of the sender silent longest if it was silent for `forget_after`, which is
/// forgotten (and said so, for membership and the routes). A sender heard more recently keeps
/// its place, and configured voters never count against the limit.
#[test]
fn proto5_silent_peers_give_their_place_to_newcomers() {
    let forget_after = Duration::from_secs(60);
    let mut admission = machine(AdmissionConfig {
        max_peers: 2,
        forget_after,
        reserved: [id("gw-v")].into_iter().collect(),
        ..config()
    });
    let mut rng = SeededRng::new(SEED);
    let mut verify = |admission: &mut Admission, name: &str, at: Instant| {
        let nonce = rng.next_u64();
        feed(admission, at, "mem:2", header(name, 5, 1), &ping());
        assert_eq!(
            drain(admission),
            vec![reply(name, "mem:2", challenge(nonce))]
        );
        feed(admission, at, "mem:2", to_me(name, 5, 2), &ack(nonce));
        assert!(admission.is_verified(&id(name)), "{name}");
        drain(admission);
    };
    verify(&mut admission, "x1", ms(0));
    verify(&mut admission, "x2", ms(1_000));
    verify(&mut admission, "gw-v", ms(1_000));
    // x1 keeps talking until 10 s; x2 stays silent from 1 s on.
    assert_eq!(
        feed(
            &mut admission,
            ms(10_000),
            "mem:2",
            header("x1", 5, 3),
            &ping()
        ),
        Verdict::Accept
    );

    // Full, and nobody silent for a minute yet.
    let early = ms(1_000) + (forget_after - Duration::from_millis(1));
    assert_eq!(
        feed(&mut admission, early, "mem:3", header("x3", 5, 1), &ping()),
        Verdict::Drop(DropReason::PeerLimit)
    );
    drain(&mut admission);

    // A minute after x2's last frame, x3 takes its place; x1 and the voter stay.
    let late = ms(1_000) + forget_after;
    assert_eq!(
        feed(&mut admission, late, "mem:3", header("x3", 5, 2), &ping()),
        Verdict::Drop(DropReason::Unverified)
    );
    let actions = drain(&mut admission);
    assert_eq!(actions[0], AdmissionAction::Forgotten { peer: id("x2") });
    assert!(matches!(
        &actions[1..],
        [AdmissionAction::Reply {
            body: Body::Challenge(_),
            ..
        }]
    ));
    assert!(!admission.is_verified(&id("x2")));
    assert!(admission.is_verified(&id("x1")));
    assert!(admission.is_verified(&id("gw-v")));
    // x2 back: it proves itself again, and there is no room until someone else is silent.
    assert_eq!(
        feed(&mut admission, late, "mem:2", header("x2", 5, 9), &ping()),
        Verdict::Drop(DropReason::Unverified)
    );
}

/// MEM-3: the owner keeps the id up to `owner_timeout` after its last frame; after that an
/// address with fresh frames takes it, and the old owner becomes the contender.
#[test]
fn mem3_owner_keeps_the_id_until_it_is_silent() {
    let mut admission = with_b_verified();
    feed(
        &mut admission,
        ms(1_000),
        "mem:2",
        header("gw-b", 5, 101),
        &ping(),
    );
    let timeout = config().owner_timeout;
    let last_heard = ms(1_000);
    assert_eq!(
        feed(
            &mut admission,
            last_heard + timeout,
            "mem:9",
            header("gw-b", 5, 102),
            &ping()
        ),
        Verdict::Drop(DropReason::DuplicateId),
        "still live at the timeout"
    );
    let after = last_heard + timeout + Duration::from_millis(1);
    assert_eq!(
        feed(
            &mut admission,
            after,
            "mem:9",
            header("gw-b", 5, 40),
            &ping()
        ),
        Verdict::Drop(DropReason::Replay),
        "a silent owner's id still needs fresh frames"
    );
    assert_eq!(
        admission.owner(&id("gw-b"), &addr("mem:0")),
        Some(&addr("mem:2"))
    );
    assert_eq!(
        feed(
            &mut admission,
            after,
            "mem:9",
            header("gw-b", 5, 103),
            &ping()
        ),
        Verdict::Accept
    );
    assert_eq!(
        admission.owner(&id("gw-b"), &addr("mem:0")),
        Some(&addr("mem:9"))
    );
    assert_eq!(
        feed(
            &mut admission,
            after,
            "mem:2",
            header("gw-b", 5, 104),
            &ping()
        ),
        Verdict::Drop(DropReason::DuplicateId)
    );
}

/// MEM-3: `Goodbye` frees the id at once; whoever uses it next proves itself again.
#[test]
fn mem3_goodbye_frees_the_id() {
    let mut admission = with_b_verified();
    assert_eq!(
        feed(
            &mut admission,
            ms(10),
            "mem:2",
            header("gw-b", 5, 101),
            &Body::Goodbye(Goodbye {})
        ),
        Verdict::Accept
    );
    assert!(!admission.is_verified(&id("gw-b")));
    assert_eq!(
        feed(
            &mut admission,
            ms(11),
            "mem:9",
            header("gw-b", 6, 1),
            &ping()
        ),
        Verdict::Drop(DropReason::Unverified)
    );
    assert!(matches!(
        drain(&mut admission).as_slice(),
        [AdmissionAction::Reply {
            body: Body::Challenge(_),
            ..
        }]
    ));
}

/// MEM-3, TR-1: one node may be heard over several links: the id has one owner per link, so
/// the node's frames over a second link are accepted, and another address on that link is not.
#[test]
fn mem3_ownership_is_per_link() {
    let mut admission = with_b_verified();
    assert_eq!(
        feed(
            &mut admission,
            ms(10),
            "espnow:02:00:00:00:00:0b",
            header("gw-b", 5, 101),
            &ping()
        ),
        Verdict::Accept
    );
    assert_eq!(
        admission.owner(&id("gw-b"), &addr("espnow:ff:ff:ff:ff:ff:ff")),
        Some(&addr("espnow:02:00:00:00:00:0b"))
    );
    assert_eq!(
        feed(
            &mut admission,
            ms(11),
            "mem:2",
            header("gw-b", 5, 102),
            &ping()
        ),
        Verdict::Accept
    );
    assert_eq!(
        feed(
            &mut admission,
            ms(12),
            "espnow:02:00:00:00:00:99",
            header("gw-b", 5, 103),
            &ping()
        ),
        Verdict::Drop(DropReason::DuplicateId)
    );
}

// ---------------------------------------------------------------------------------------------
// TR-2

/// TR-2: this node's own frames echoed by a link are ignored (not counted); a frame for
/// another node is dropped as misaddressed before anything else is looked at.
#[test]
fn tr2_own_echo_is_ignored_and_misaddressed_frames_are_dropped() {
    let mut admission = machine(config());
    assert_eq!(
        feed(
            &mut admission,
            ms(0),
            "mem:0",
            header("gw-a", START, 1),
            &challenge(1)
        ),
        Verdict::Ignore
    );
    let misaddressed = FrameHeader {
        to: Some(id("gw-z")),
        ..header("gw-b", 5, 1)
    };
    assert_eq!(
        feed(&mut admission, ms(0), "mem:2", misaddressed, &challenge(1)),
        Verdict::Drop(DropReason::Misaddressed)
    );
    assert_eq!(drain(&mut admission), vec![]);
}
