//! Unit tests of adaptive failure detection in the election state machine (RAFT-2, RAFT-7):
//! a follower that learned its leader's beats campaigns sooner than the fixed minimum once the
//! leader dies, never before the floor, in rank order, and its leader lease shrinks with its
//! suspicion. The estimator's own tests are beside it, in `node/suspicion.rs`.

use std::time::Duration;

use conclave_protocol::{AppendEntries, RequestVote, Vote};

use crate::election::HardState;
use crate::raft::{LogPosition, Raft, RaftConfig, RaftMessage};
use crate::testing::{drain, id, ms, raft_config, raft_node, sent as sends};
use crate::time::Instant;

/// Heartbeat 50 ms, election timeout 150–300 ms (the unit tests' timings), adaptive detection
/// with a floor of 125 ms: two and a half heartbeats, the defaults' ratio.
fn adaptive(me: &str) -> RaftConfig {
    raft_config(me, &["a", "b", "c"]).with_adaptive_timeout(Duration::from_millis(125))
}

const FLOOR: Duration = Duration::from_millis(125);
const MIN: Duration = Duration::from_millis(150);

fn heartbeat(term: u64, leader: &str) -> RaftMessage {
    RaftMessage::AppendEntries(AppendEntries::new(term, id(leader)))
}

fn pre_vote_request(term: u64, candidate: &str) -> RaftMessage {
    RaftMessage::RequestVote(RequestVote {
        term,
        candidate: id(candidate),
        last_log_index: 0,
        last_log_term: 0,
        pre_vote: true,
        leadership_transfer: false,
        priority: None,
    })
}

fn granted_pre_vote(term: u64) -> RaftMessage {
    RaftMessage::Vote(Vote {
        term,
        granted: true,
        pre_vote: true,
        priority: None,
    })
}

/// `raft` hears `leader`'s heartbeats of term 1 every 50 ms from 10 ms on, `beats` of them;
/// the time of the last.
fn steady_beats(raft: &mut Raft, leader: &str, beats: u64) -> Instant {
    let mut last = ms(10);
    for beat in 0..beats {
        last = ms(10 + beat * 50);
        raft.handle_message(last, id(leader), heartbeat(1, leader));
    }
    drain(raft);
    last
}

/// RAFT-2: on a steady link, a follower whose leader dies campaigns (pre-vote first) sooner
/// than the fixed minimum election timeout, and not before the floor. The same follower
/// without adaptive detection waits the minimum, which is the control.
#[test]
fn raft2_adaptive_follower_suspects_a_dead_leader_before_the_minimum_and_not_before_the_floor() {
    // `c` ranks first once `a` is lost (larger id first), so its base is its whole timeout.
    let mut raft = raft_node(
        adaptive("c"),
        HardState::default(),
        LogPosition::default(),
        7,
    );
    let last = steady_beats(&mut raft, "a", 20);
    let deadline = raft.poll_timeout().unwrap();
    assert!(deadline >= last + FLOOR, "{deadline:?} {last:?}");
    assert!(deadline < last + MIN, "{deadline:?} {last:?}");
    raft.handle_timeout(last + (FLOOR - Duration::from_millis(1)));
    assert_eq!(raft.phase(), "follower", "never before the floor");
    raft.handle_timeout(deadline);
    assert_eq!(raft.phase(), "pre_candidate");
    let request = pre_vote_request(2, "c");
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("a"), request.clone()), (id("b"), request)]
    );

    let mut fixed = raft_node(
        raft_config("c", &["a", "b", "c"]).with_fixed_timeout(),
        HardState::default(),
        LogPosition::default(),
        7,
    );
    let last = steady_beats(&mut fixed, "a", 20);
    assert_eq!(fixed.poll_timeout(), Some(last + MIN));
}

/// RAFT-2: with too few beats of the current leader seen, or from a new leader in a new
/// term, the fixed minimum holds: the estimate is of one leader in one term.
#[test]
fn raft2_adaptive_follower_keeps_the_fixed_timeout_until_it_knows_the_leader() {
    let mut raft = raft_node(
        adaptive("c"),
        HardState::default(),
        LogPosition::default(),
        7,
    );
    let last = steady_beats(&mut raft, "a", 5);
    assert_eq!(
        raft.poll_timeout(),
        Some(last + MIN),
        "five beats, four gaps"
    );
    let last = steady_beats(&mut raft, "a", 20);
    assert!(raft.poll_timeout().unwrap() < last + MIN);
    // `b` leads term 2: what was learnt of `a` says nothing of it.
    let at = last + Duration::from_millis(50);
    raft.handle_message(at, id("b"), heartbeat(2, "b"));
    drain(&mut raft);
    assert_eq!(raft.leader(), Some(id("b")));
    // `c` is still first once `b` is lost.
    assert_eq!(raft.poll_timeout(), Some(at + MIN));
}

/// RAFT-2: ranked timeouts still keep split votes away: the rank slots stay on top of the
/// adaptive base, so the first-ranked follower times out first and the second a slot later.
#[test]
fn raft2_rank_slots_stay_above_the_adaptive_base() {
    let mut first = raft_node(
        adaptive("c"),
        HardState::default(),
        LogPosition::default(),
        7,
    );
    let mut second = raft_node(
        adaptive("b"),
        HardState::default(),
        LogPosition::default(),
        7,
    );
    let last = steady_beats(&mut first, "a", 20);
    steady_beats(&mut second, "a", 20);
    let (early, late) = (
        first.poll_timeout().unwrap(),
        second.poll_timeout().unwrap(),
    );
    assert!(early < late, "{early:?} {late:?}");
    // Half of what is left to the maximum: the second of two slots.
    let base = early - last;
    assert!(base < MIN, "the adaptive base, not the minimum: {base:?}");
    assert_eq!(late - last, base + (Duration::from_millis(300) - base) / 2);
}

/// RAFT-7: the leader lease shrinks with the adaptive suspicion: a follower still in its
/// lease (suspicion less one heartbeat) ignores a pre-vote; once past it, it grants the
/// pre-vote, although a fixed lease (the minimum less one heartbeat, 100 ms) would still hold.
/// The first follower to suspect is therefore not refused by the others' fixed lease.
#[test]
fn raft7_lease_shrinks_with_the_adaptive_suspicion() {
    let mut raft = raft_node(
        adaptive("b"),
        HardState::default(),
        LogPosition::default(),
        7,
    );
    let last = steady_beats(&mut raft, "a", 20);
    // The lease of a steady link: the floor less one heartbeat, 75 ms.
    raft.handle_message(
        last + Duration::from_millis(74),
        id("c"),
        pre_vote_request(2, "c"),
    );
    assert_eq!(
        drain(&mut raft),
        vec![],
        "74 ms after the leader: in the lease"
    );
    raft.handle_message(
        last + Duration::from_millis(76),
        id("c"),
        pre_vote_request(2, "c"),
    );
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("c"), granted_pre_vote(2))]
    );
    assert_eq!(raft.term(), 1, "a pre-vote changes no term");

    // Control: the fixed lease still refuses at the same moment.
    let mut fixed = raft_node(
        raft_config("b", &["a", "b", "c"]).with_fixed_timeout(),
        HardState::default(),
        LogPosition::default(),
        7,
    );
    let last = steady_beats(&mut fixed, "a", 20);
    fixed.handle_message(
        last + Duration::from_millis(76),
        id("c"),
        pre_vote_request(2, "c"),
    );
    assert_eq!(drain(&mut fixed), vec![]);
}
