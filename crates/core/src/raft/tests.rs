//! Unit tests of the election state machine beyond the Raft paper's claims (those are in
//! `tests/raft_paper.rs`): pre-vote and the leader lease, check-quorum, `connected` quorum and
//! its tie-break, manual `SetLeader` in both modes, transfer and pin, automatic election off,
//! once-only leader-change events, duplicate-id quarantine, resignation and restart.
//! Each fires one input and compares the drained actions exactly where that is practical.

use std::time::Duration;

use conclave_protocol::{
    AppendEntries, AppendResp, LeaderAssign, PeerId, RequestVote, TimeoutNow, Vote,
};

use crate::election::{
    Action, AmnesiaCause, Command, CommandOutcome, ElectionError, ElectionMessage, Event,
    HardState, LeaderChangeCause, Role,
};
use crate::raft::{LogPosition, Raft, RaftConfig, RaftMessage};
use crate::testing::{
    drain, id, leader_changes, ms, published as events, raft_config as config, raft_node,
    sent as sends,
};
use crate::time::Instant;

fn start(config: RaftConfig) -> Raft {
    start_from(config, HardState::default())
}

fn start_from(config: RaftConfig, state: HardState) -> Raft {
    raft_node(config, state, LogPosition::default(), 7)
}

fn heartbeat(term: u64, leader: &str) -> RaftMessage {
    RaftMessage::AppendEntries(AppendEntries::new(term, id(leader)))
}

/// A heartbeat of a leader pinned by a manual override.
fn pinned_heartbeat(term: u64, leader: &str) -> RaftMessage {
    let mut message = heartbeat(term, leader);
    if let RaftMessage::AppendEntries(beat) = &mut message {
        beat.pinned = true;
    }
    message
}

fn vote_request(term: u64, candidate: &str, pre_vote: bool) -> RaftMessage {
    RaftMessage::RequestVote(RequestVote {
        term,
        candidate: id(candidate),
        last_log_index: 0,
        last_log_term: 0,
        pre_vote,
        leadership_transfer: false,
        priority: None,
    })
}

fn vote(term: u64, granted: bool, pre_vote: bool) -> RaftMessage {
    RaftMessage::Vote(Vote {
        term,
        granted,
        pre_vote,
        priority: None,
    })
}

fn ok_response(term: u64) -> RaftMessage {
    RaftMessage::AppendResp(AppendResp {
        term,
        success: true,
        match_index: 0,
        ..AppendResp::default()
    })
}

/// Drives `raft` (a voter of `a, b, c`) to leadership of term 1 with `b`'s vote.
fn elect(raft: &mut Raft) -> Instant {
    let at = raft.poll_timeout().unwrap();
    raft.handle_timeout(at);
    if raft.phase() == "pre_candidate" {
        raft.handle_message(at, id("b"), vote(raft.term() + 1, true, true));
    }
    raft.handle_message(at, id("b"), vote(raft.term(), true, false));
    assert_eq!(raft.role(), Role::Leader);
    drain(raft);
    at
}

// ---------------------------------------------------------------------------------------------
// RAFT-7 pre-vote and leader lease

/// RAFT-7: a pre-candidate asks at term + 1 without changing its own term or vote, so nothing
/// is persisted; the request is marked `pre_vote`.
#[test]
fn raft7_pre_vote_changes_no_term() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    raft.handle_timeout(raft.poll_timeout().unwrap());
    let actions = drain(&mut raft);
    assert_eq!(raft.phase(), "pre_candidate");
    assert_eq!(raft.term(), 0);
    assert!(!actions.iter().any(|a| matches!(a, Action::Persist(_))));
    let request = vote_request(1, "a", true);
    assert_eq!(
        sends(&actions),
        vec![(id("b"), request.clone()), (id("c"), request)]
    );
}

/// RAFT-7: a follower that heard its leader within the minimum election timeout ignores
/// vote and pre-vote requests of higher terms (no answer, no term change): a node rejoining
/// after a partition cannot depose a healthy leader.
#[test]
fn raft7_follower_in_lease_ignores_disruptive_candidates() {
    let mut raft = start(config("b", &["a", "b", "c"]));
    raft.handle_message(ms(10), id("a"), heartbeat(3, "a"));
    drain(&mut raft);
    for pre_vote in [true, false] {
        raft.handle_message(ms(100), id("c"), vote_request(9, "c", pre_vote));
        assert_eq!(drain(&mut raft), vec![]);
        assert_eq!(raft.term(), 3);
        assert_eq!(raft.leader(), Some(id("a")));
    }
}

/// RAFT-7: the lease lasts the minimum election timeout less one heartbeat interval (150 − 50
/// ms here): a healthy leader is heard far more often than that, and the first-ranked
/// follower, campaigning at the minimum, finds every other follower's lease run out.
#[test]
fn raft7_lease_ends_one_heartbeat_before_the_minimum_timeout() {
    let mut raft = start(config("b", &["a", "b", "c"]));
    raft.handle_message(ms(10), id("a"), heartbeat(3, "a"));
    drain(&mut raft);
    raft.handle_message(ms(109), id("c"), vote_request(4, "c", true));
    assert_eq!(
        drain(&mut raft),
        vec![],
        "99 ms after the leader: still in the lease"
    );
    raft.handle_message(ms(111), id("c"), vote_request(4, "c", true));
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("c"), vote(4, true, true))]
    );
}

/// RAFT-7: once the lease has run out, a pre-vote is granted at the requested term without
/// the voter moving to that term or recording a vote.
#[test]
fn raft7_pre_vote_granted_after_lease_without_state_change() {
    let mut raft = start(config("b", &["a", "b", "c"]));
    raft.handle_message(ms(10), id("a"), heartbeat(3, "a"));
    drain(&mut raft);
    raft.handle_message(ms(170), id("c"), vote_request(4, "c", true));
    let actions = drain(&mut raft);
    assert_eq!(sends(&actions), vec![(id("c"), vote(4, true, true))]);
    assert!(!actions.iter().any(|a| matches!(a, Action::Persist(_))));
    assert_eq!(raft.term(), 3);
    assert_eq!(raft.hard_state().vote, None);
}

/// RAFT-7: a transfer campaign (after `TimeoutNow`) sets the lease aside.
#[test]
fn raft7_leadership_transfer_overrides_the_lease() {
    let mut raft = start(config("b", &["a", "b", "c"]));
    raft.handle_message(ms(10), id("a"), heartbeat(3, "a"));
    drain(&mut raft);
    let mut request = vote_request(4, "c", false);
    if let RaftMessage::RequestVote(r) = &mut request {
        r.leadership_transfer = true;
    }
    raft.handle_message(ms(20), id("c"), request);
    let actions = drain(&mut raft);
    assert_eq!(
        actions[0],
        Action::Persist(HardState {
            term: 4,
            vote: Some(id("c")),
            manual_override: None
        })
    );
    assert_eq!(sends(&actions), vec![(id("c"), vote(4, true, false))]);
}

/// RAFT-7: a pre-vote refused by a majority sends the pre-candidate back to follower without
/// any term change.
#[test]
fn raft7_pre_vote_lost() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    let at = raft.poll_timeout().unwrap();
    raft.handle_timeout(at);
    drain(&mut raft);
    raft.handle_message(at, id("b"), vote(0, false, true));
    assert_eq!(
        raft.phase(),
        "pre_candidate",
        "one refusal of three is not decisive"
    );
    raft.handle_message(at, id("c"), vote(0, false, true));
    assert_eq!(raft.role(), Role::Follower);
    assert_eq!(raft.term(), 0);
}

/// Starts a pre-vote round on `me` (a voter of a, b, c) with the given log position.
fn pre_candidate(me: &str, log: LogPosition) -> (Raft, Instant) {
    let mut raft = raft_node(
        config(me, &["a", "b", "c"]),
        HardState {
            term: 4,
            vote: None,
            manual_override: None,
        },
        log,
        7,
    );
    let at = raft.poll_timeout().unwrap();
    raft.handle_timeout(at);
    assert_eq!(raft.phase(), "pre_candidate");
    drain(&mut raft);
    (raft, at)
}

fn pre_vote_request(candidate: &str, log: LogPosition) -> RaftMessage {
    RaftMessage::RequestVote(RequestVote {
        term: 5,
        candidate: id(candidate),
        last_log_index: log.index,
        last_log_term: log.term,
        pre_vote: true,
        leadership_transfer: false,
        priority: None,
    })
}

/// RAFT-7: of two pre-candidates with equal logs, the one with the smaller id stands aside
/// when it hears the other's pre-vote request: it returns to follower, keeps its term and
/// grants the pre-vote, so only one of them goes on to a real campaign and they cannot split
/// the vote.
#[test]
fn raft7_pre_candidate_stands_aside_for_a_higher_ranked_one() {
    let log = LogPosition::new(4, 9);
    let (mut raft, at) = pre_candidate("a", log);
    raft.handle_message(at, id("c"), pre_vote_request("c", log));
    assert_eq!(raft.role(), Role::Follower);
    assert_eq!(raft.term(), 4);
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("c"), vote(5, true, true))]
    );

    // The higher-ranked one grants the lower one's pre-vote but goes on campaigning.
    let (mut raft, at) = pre_candidate("c", log);
    raft.handle_message(at, id("a"), pre_vote_request("a", log));
    assert_eq!(raft.phase(), "pre_candidate");
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("a"), vote(5, true, true))]
    );
}

/// RAFT-7, Raft §5.4.1: a more up-to-date log outranks a larger id; a stale log never
/// makes anyone stand aside.
#[test]
fn raft7_log_position_ranks_before_id() {
    let (mut raft, at) = pre_candidate("c", LogPosition::new(4, 9));
    raft.handle_message(at, id("a"), pre_vote_request("a", LogPosition::new(4, 10)));
    assert_eq!(raft.role(), Role::Follower);

    let (mut raft, at) = pre_candidate("a", LogPosition::new(4, 9));
    raft.handle_message(at, id("c"), pre_vote_request("c", LogPosition::new(3, 20)));
    assert_eq!(raft.phase(), "pre_candidate");
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("c"), vote(4, false, true))]
    );
}

/// RAFT-7: a node stands aside for the same peer at most once per two maximum election
/// timeouts, so a higher-ranked peer that cannot win never holds the election up for long.
#[test]
fn raft7_stands_aside_once_per_window() {
    let log = LogPosition::new(4, 9);
    let (mut raft, at) = pre_candidate("a", log);
    raft.handle_message(at, id("c"), pre_vote_request("c", log));
    assert_eq!(raft.role(), Role::Follower);
    // c never wins; a's next timeout starts a new round, and this time a goes on.
    let again = raft.poll_timeout().unwrap();
    assert!(again - at < Duration::from_millis(600));
    raft.handle_timeout(again);
    assert_eq!(raft.phase(), "pre_candidate");
    raft.handle_message(again, id("c"), pre_vote_request("c", log));
    assert_eq!(raft.phase(), "pre_candidate");
    // Nobody answers, so every timeout starts a new round. Two maximum timeouts after the
    // first time, a stands aside for c again.
    let mut now = again;
    while now < at + Duration::from_millis(600) {
        now = raft.poll_timeout().unwrap();
        raft.handle_timeout(now);
        assert_eq!(raft.phase(), "pre_candidate");
    }
    raft.handle_message(now, id("c"), pre_vote_request("c", log));
    assert_eq!(raft.role(), Role::Follower);
}

// ---------------------------------------------------------------------------------------------
// ranked election timeouts

/// The election deadline `raft` set when it last reset its timer, relative to `since`.
fn timeout_after(raft: &Raft, since: Instant) -> Duration {
    raft.poll_timeout().unwrap() - since
}

/// RAFT-2, RAFT-10: with ranked timeouts, the followers of a leader time out in the order of
/// their ids (larger first), exactly one slot of `(max - min) / electable` apart; the leader
/// itself is left out of the ranking, before and after it is lost. Fixed timeouts, so that
/// the minimum is the base (with adaptive detection the suspicion is, `suspicion_tests.rs`).
#[test]
fn ranked_timeouts_follow_the_id_order_without_the_leader() {
    // Voters a..e, leader c: the four others are electable, slot = 150 ms / 4.
    let voters = ["a", "b", "c", "d", "e"];
    let slot = Duration::from_micros(37_500);
    for (name, rank) in [("e", 0u32), ("d", 1), ("b", 2), ("a", 3)] {
        let mut raft = start(config(name, &voters).with_fixed_timeout());
        for round in 0..20u64 {
            let at = ms(10 + round * 50);
            raft.handle_message(at, id("c"), heartbeat(1, "c"));
            drain(&mut raft);
            let timeout = timeout_after(&raft, at);
            assert_eq!(
                timeout,
                Duration::from_millis(150) + slot * rank,
                "{name}: rank {rank}"
            );
        }
        // The leader is lost and this node's pre-vote is refused: back to follower, its next
        // deadline still ranks without the lost leader.
        let lost_at = raft.poll_timeout().unwrap();
        raft.handle_timeout(lost_at);
        assert_eq!(raft.phase(), "pre_candidate");
        drain(&mut raft);
        for voter in voters.iter().filter(|v| **v != name && **v != "c") {
            raft.handle_message(lost_at, id(voter), vote(1, false, true));
        }
        assert_eq!(raft.role(), Role::Follower, "{name}");
        assert_eq!(
            timeout_after(&raft, lost_at),
            Duration::from_millis(150) + slot * rank,
            "{name} after the loss"
        );
    }
}

/// RAFT-2: a node already campaigning retries on the uniform spread over `[min, max)`, so the
/// first-ranked node cannot restart its campaign every minimum timeout when answers take
/// longer than that.
#[test]
fn campaigning_nodes_retry_on_the_uniform_spread() {
    let voters = ["a", "b", "c", "d", "e"];
    let mut raft = start(config("e", &voters));
    raft.handle_message(ms(10), id("c"), heartbeat(1, "c"));
    let mut retries = Vec::new();
    for _ in 0..200 {
        let at = raft.poll_timeout().unwrap();
        raft.handle_timeout(at);
        assert_eq!(raft.phase(), "pre_candidate");
        drain(&mut raft);
        retries.push(timeout_after(&raft, at));
    }
    let min = Duration::from_millis(150);
    assert!(
        retries
            .iter()
            .all(|t| *t >= min && *t < Duration::from_millis(300))
    );
    assert!(
        retries.iter().any(|t| *t > Duration::from_millis(250)),
        "retries spread over the whole range, not rank 0's slot"
    );
}

/// RAFT-2: without ranking, the Raft paper's uniform timeouts over `[min, max)` are used;
/// and a node outside the voters (which never campaigns) is not ranked either.
#[test]
fn unranked_timeouts_spread_over_the_whole_range() {
    let mut config = config("a", &["a", "b", "c"]).with_fixed_timeout();
    config.ranked_timeouts = false;
    let mut raft = start(config);
    let mut seen_late = false;
    for round in 0..200u64 {
        let at = ms(10 + round * 50);
        raft.handle_message(at, id("c"), heartbeat(1, "c"));
        drain(&mut raft);
        let timeout = timeout_after(&raft, at);
        assert!(timeout >= Duration::from_millis(150) && timeout < Duration::from_millis(300));
        seen_late |= timeout > Duration::from_millis(250);
    }
    assert!(seen_late, "uniform over the range reaches its upper part");
}

/// RAFT-2: a node whose election was lost (a split vote) retries on the uniform spread, not
/// on its ranked slot: two nodes that both rank first (in two voters, each with the other as
/// its lost leader) and split the vote would otherwise meet again at every round, a ranked
/// timeout carrying no jitter. Found by the simulator once a hard state's fsync took time.
#[test]
fn a_lost_election_retries_on_the_uniform_spread() {
    let mut config = config("b", &["a", "b"]);
    config.pre_vote = false;
    let mut raft = start(config);
    let mut retries = Vec::new();
    for _ in 0..200 {
        let at = raft.poll_timeout().unwrap();
        raft.handle_timeout(at);
        assert_eq!(raft.phase(), "candidate");
        drain(&mut raft);
        let refused = at + Duration::from_millis(1);
        raft.handle_message(refused, id("a"), vote(raft.term(), false, false));
        assert_eq!(raft.phase(), "follower");
        drain(&mut raft);
        retries.push(timeout_after(&raft, refused));
    }
    assert!(
        retries
            .iter()
            .all(|t| *t >= Duration::from_millis(150) && *t < Duration::from_millis(300))
    );
    assert!(
        retries.iter().any(|t| *t > Duration::from_millis(250)),
        "retries spread over the whole range, not rank 0's slot: {:?}",
        &retries[..10]
    );
}

// ---------------------------------------------------------------------------------------------
// RAFT-7 check-quorum

/// RAFT-7: a leader that hears no quorum for the minimum election timeout steps down and
/// publishes the loss of leadership with its cause; one that hears a quorum stays.
#[test]
fn raft7_check_quorum_steps_down_a_lonely_leader() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    let won = elect(&mut raft);
    // b answers the heartbeats for a while: the first check passes.
    raft.handle_message(won + Duration::from_millis(60), id("b"), ok_response(1));
    let first_check = won + Duration::from_millis(150);
    while raft.poll_timeout().unwrap() <= first_check {
        raft.handle_timeout(raft.poll_timeout().unwrap());
    }
    assert_eq!(raft.role(), Role::Leader);
    drain(&mut raft);
    // Then silence until the next check.
    let second_check = first_check + Duration::from_millis(150);
    while raft.poll_timeout().unwrap() <= second_check {
        raft.handle_timeout(raft.poll_timeout().unwrap());
    }
    let actions = drain(&mut raft);
    assert_eq!(raft.role(), Role::Follower);
    assert_eq!(
        leader_changes(&actions),
        vec![(1, None, LeaderChangeCause::QuorumLost)]
    );
}

/// RAFT-7: the voters that elected a leader count as heard in its first check-quorum window,
/// so a leader whose round trip is longer than the minimum election timeout is not deposed
/// before its first heartbeat can be answered.
#[test]
fn raft7_fresh_leader_survives_its_first_quorum_check() {
    let mut config = config("a", &["a", "b", "c"])
        .with_heartbeat(Duration::from_millis(6))
        .with_election_timeout(Duration::from_millis(12), Duration::from_millis(24));
    config.pre_vote = false;
    let mut raft = start(config);
    let won = elect(&mut raft);
    // No heartbeat answer arrives within 12 ms (the round trip is longer than that).
    let first_check = won + Duration::from_millis(12);
    while raft.poll_timeout().unwrap() <= first_check {
        raft.handle_timeout(raft.poll_timeout().unwrap());
    }
    assert_eq!(raft.role(), Role::Leader);
    // Answers then arrive; the next window is judged on them.
    raft.handle_message(
        first_check + Duration::from_millis(5),
        id("c"),
        ok_response(1),
    );
    let second_check = first_check + Duration::from_millis(12);
    while raft.poll_timeout().unwrap() <= second_check {
        raft.handle_timeout(raft.poll_timeout().unwrap());
    }
    assert_eq!(raft.role(), Role::Leader);
    // A window without any answer deposes it.
    let third_check = second_check + Duration::from_millis(12);
    while raft.poll_timeout().unwrap() <= third_check {
        raft.handle_timeout(raft.poll_timeout().unwrap());
    }
    assert_eq!(raft.role(), Role::Follower);
}

// ---------------------------------------------------------------------------------------------
// RAFT-6 connected mode

fn connected(me: &str, peers: &[&str]) -> Raft {
    let mut config = config(me, &[]);
    config.quorum = crate::raft::QuorumMode::Connected;
    let mut raft = start(config);
    for peer in peers {
        raft.handle_peer_status(ms(0), id(peer), true);
    }
    drain(&mut raft);
    raft
}

/// RAFT-6: in `connected` mode the threshold follows the connected peers: 4 connected peers
/// make 5 nodes and need 3 votes; when two drop out mid-campaign, 2 of 3 suffice.
#[test]
fn raft6_connected_threshold_follows_membership() {
    let mut raft = connected("a", &["b", "c", "d", "e"]);
    assert_eq!(raft.quorum_size(), 3);
    let at = raft.poll_timeout().unwrap();
    raft.handle_timeout(at);
    raft.handle_message(at, id("b"), vote(1, true, true));
    assert_eq!(raft.phase(), "pre_candidate");
    raft.handle_peer_status(at, id("d"), false);
    raft.handle_peer_status(at, id("e"), false);
    assert_eq!(raft.quorum_size(), 2);
    // The pre-vote is won now, and the real campaign needs b's vote again.
    assert_eq!(raft.role(), Role::Candidate);
    raft.handle_message(at, id("b"), vote(1, true, false));
    assert_eq!(raft.role(), Role::Leader);
}

/// RAFT-6: in `connected` mode a leader that meets another leader of its term yields when
/// the other id is byte-wise larger, and ignores it otherwise; either way a split brain is
/// reported.
#[test]
fn raft6_connected_equal_term_tie_break() {
    let mut small = connected("a", &[]);
    small.handle_timeout(small.poll_timeout().unwrap());
    assert_eq!(small.role(), Role::Leader);
    assert_eq!(small.term(), 1);
    drain(&mut small);

    small.handle_message(ms(400), id("b"), heartbeat(1, "b"));
    let actions = drain(&mut small);
    assert_eq!(small.role(), Role::Follower);
    assert_eq!(small.leader(), Some(id("b")));
    assert!(events(&actions).contains(&Event::SplitBrain {
        term: 1,
        known: id("a"),
        other: id("b")
    }));
    assert_eq!(
        leader_changes(&actions),
        vec![(1, Some(id("b")), LeaderChangeCause::TieBreak)]
    );

    let mut large = connected("z", &[]);
    large.handle_timeout(large.poll_timeout().unwrap());
    drain(&mut large);
    large.handle_message(ms(400), id("b"), heartbeat(1, "b"));
    assert_eq!(large.role(), Role::Leader);
    assert!(events(&drain(&mut large)).contains(&Event::SplitBrain {
        term: 1,
        known: id("z"),
        other: id("b")
    }));
}

/// RAFT-6: a follower of a leader meets a second leader of the same term: it follows the
/// larger id.
#[test]
fn raft6_connected_follower_switches_to_larger_leader() {
    let mut raft = connected("a", &["b", "c"]);
    raft.handle_message(ms(10), id("b"), heartbeat(2, "b"));
    drain(&mut raft);
    raft.handle_message(ms(20), id("c"), heartbeat(2, "c"));
    assert_eq!(raft.leader(), Some(id("c")));
    raft.handle_message(ms(30), id("b"), heartbeat(2, "b"));
    assert_eq!(
        raft.leader(),
        Some(id("c")),
        "the smaller claimant is ignored"
    );
}

// ---------------------------------------------------------------------------------------------
// RAFT-8 manual override

/// RAFT-8 `connected`: `SetLeader` persists term + 1 with the override before broadcasting
/// `LeaderAssign`, and adopts the assigned leader here.
#[test]
fn raft8_connected_set_leader_assigns() {
    let mut raft = connected("a", &["b", "c"]);
    raft.handle_message(ms(10), id("b"), heartbeat(4, "b"));
    drain(&mut raft);
    let outcome = raft.handle_command(ms(20), Command::SetLeader(id("c")));
    assert_eq!(outcome, Ok(CommandOutcome::Applied));
    let actions = drain(&mut raft);
    let assign = RaftMessage::LeaderAssign(LeaderAssign {
        term: 5,
        leader: id("c"),
        assigner: id("a"),
    });
    assert_eq!(
        actions[..3],
        [
            Action::Persist(HardState {
                term: 5,
                vote: None,
                manual_override: Some(id("c"))
            }),
            Action::Send {
                to: id("b"),
                message: assign.clone().into()
            },
            Action::Send {
                to: id("c"),
                message: assign.into()
            },
        ]
    );
    assert_eq!(
        leader_changes(&actions),
        vec![(5, Some(id("c")), LeaderChangeCause::SetLeader)]
    );
    assert_eq!(
        raft.handle_command(ms(30), Command::SetLeader(id("x"))),
        Err(ElectionError::UnknownPeer(id("x")))
    );
}

/// RAFT-8 `connected`: a node receiving `LeaderAssign` naming itself becomes leader of that
/// term at once and sends heartbeats; one naming another follows it.
#[test]
fn raft8_connected_leader_assign_is_adopted() {
    let mut raft = connected("c", &["a", "b"]);
    let assign = LeaderAssign {
        term: 3,
        leader: id("c"),
        assigner: id("a"),
    };
    raft.handle_message(ms(10), id("a"), RaftMessage::LeaderAssign(assign));
    let actions = drain(&mut raft);
    assert_eq!(raft.role(), Role::Leader);
    assert_eq!(raft.term(), 3);
    assert_eq!(raft.hard_state().manual_override, Some(id("c")));
    assert_eq!(
        sends(&actions),
        vec![
            (id("a"), pinned_heartbeat(3, "c")),
            (id("b"), pinned_heartbeat(3, "c"))
        ]
    );
}

/// RAFT-8 `voters`: on the leader, `SetLeader(target)` starts a transfer. A target whose log
/// is known to match gets `TimeoutNow { pin: true }` at once.
#[test]
fn raft8_voters_set_leader_transfers_from_the_leader() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    let at = elect(&mut raft);
    let outcome = raft.handle_command(at, Command::SetLeader(id("c")));
    assert_eq!(
        outcome,
        Ok(CommandOutcome::TransferStarted { target: id("c") })
    );
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(
            id("c"),
            RaftMessage::TimeoutNow(TimeoutNow { term: 1, pin: true })
        )]
    );
    assert_eq!(
        raft.handle_command(at, Command::SetLeader(id("x"))),
        Err(ElectionError::NotAVoter(id("x")))
    );
}

/// RAFT-8 `voters`: a target not known to hold the leader's whole log is asked with a
/// heartbeat first; `TimeoutNow` follows its answer showing it caught up, and only then.
#[test]
fn raft8_transfer_waits_for_the_target_to_catch_up() {
    let state = HardState {
        term: 1,
        vote: None,
        manual_override: None,
    };
    let mut raft = raft_node(
        config("a", &["a", "b", "c"]),
        state,
        LogPosition::new(1, 5),
        7,
    );
    let at = elect(&mut raft);
    assert_eq!(raft.term(), 2);
    raft.handle_command(at, Command::SetLeader(id("c")))
        .unwrap();
    let probe = RaftMessage::AppendEntries(AppendEntries {
        prev_index: 5,
        prev_term: 1,
        ..AppendEntries::new(2, id("a"))
    });
    assert_eq!(sends(&drain(&mut raft)), vec![(id("c"), probe)]);
    let behind = RaftMessage::AppendResp(AppendResp {
        term: 2,
        success: true,
        match_index: 3,
        ..AppendResp::default()
    });
    raft.handle_message(at, id("c"), behind);
    assert_eq!(sends(&drain(&mut raft)), vec![]);
    let caught_up = RaftMessage::AppendResp(AppendResp {
        term: 2,
        success: true,
        match_index: 5,
        ..AppendResp::default()
    });
    raft.handle_message(at, id("c"), caught_up);
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(
            id("c"),
            RaftMessage::TimeoutNow(TimeoutNow { term: 2, pin: true })
        )]
    );
    // Ordered once.
    raft.handle_message(at, id("c"), ok_response(2));
    assert_eq!(sends(&drain(&mut raft)), vec![]);
}

/// RAFT-8 `voters`: a follower forwards `SetLeader` to the leader it knows; without a leader
/// it orders the target to campaign.
#[test]
fn raft8_voters_set_leader_on_a_follower() {
    let mut raft = start(config("b", &["a", "b", "c"]));
    raft.handle_message(ms(10), id("a"), heartbeat(2, "a"));
    drain(&mut raft);
    assert_eq!(
        raft.handle_command(ms(20), Command::SetLeader(id("c"))),
        Ok(CommandOutcome::Forwarded { to: id("a") })
    );
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(
            id("a"),
            RaftMessage::LeaderAssign(LeaderAssign {
                term: 2,
                leader: id("c"),
                assigner: id("b")
            })
        )]
    );

    let mut orphan = start(config("b", &["a", "b", "c"]));
    assert_eq!(
        orphan.handle_command(ms(20), Command::SetLeader(id("c"))),
        Ok(CommandOutcome::TransferStarted { target: id("c") })
    );
    assert_eq!(
        sends(&drain(&mut orphan)),
        vec![(
            id("c"),
            RaftMessage::TimeoutNow(TimeoutNow { term: 0, pin: true })
        )]
    );
}

/// RAFT-8: `TimeoutNow` makes a follower campaign at once, without pre-vote, as a transfer;
/// winning with `pin` pins it, and its heartbeats say so.
#[test]
fn raft8_timeout_now_campaigns_and_pins() {
    let mut raft = start(config("c", &["a", "b", "c"]));
    raft.handle_message(ms(10), id("a"), heartbeat(2, "a"));
    drain(&mut raft);
    raft.handle_message(
        ms(20),
        id("a"),
        RaftMessage::TimeoutNow(TimeoutNow { term: 2, pin: true }),
    );
    let actions = drain(&mut raft);
    assert_eq!(raft.role(), Role::Candidate);
    assert_eq!(raft.term(), 3);
    let (_, first) = &sends(&actions)[0];
    assert!(matches!(
        first,
        RaftMessage::RequestVote(RequestVote {
            pre_vote: false,
            leadership_transfer: true,
            term: 3,
            ..
        })
    ));
    raft.handle_message(ms(21), id("b"), vote(3, true, false));
    let actions = drain(&mut raft);
    assert_eq!(raft.role(), Role::Leader);
    assert_eq!(raft.hard_state().manual_override, Some(id("c")));
    assert_eq!(
        sends(&actions),
        vec![
            (id("a"), pinned_heartbeat(3, "c")),
            (id("b"), pinned_heartbeat(3, "c"))
        ]
    );
    assert_eq!(
        leader_changes(&actions),
        vec![(3, Some(id("c")), LeaderChangeCause::Transfer)]
    );
}

/// RAFT-8: with automatic election off, a lost leader is reported once and nobody
/// campaigns, however long it waits.
#[test]
fn raft8_auto_election_off_never_campaigns() {
    let mut config = config("b", &["a", "b", "c"]);
    config.auto_election = false;
    let mut raft = start(config);
    raft.handle_message(ms(10), id("a"), heartbeat(2, "a"));
    drain(&mut raft);
    let mut all = Vec::new();
    for _ in 0..50 {
        raft.handle_timeout(raft.poll_timeout().unwrap());
        all.extend(drain(&mut raft));
    }
    assert_eq!(raft.role(), Role::Follower);
    assert_eq!(sends(&all), vec![]);
    assert_eq!(
        leader_changes(&all),
        vec![(2, None, LeaderChangeCause::ElectionTimeout)]
    );
}

/// RAFT-8: followers mirror the pin their leader's heartbeats carry, set or cleared.
#[test]
fn raft8_followers_mirror_the_leaders_pin() {
    let mut raft = start(config("b", &["a", "b", "c"]));
    raft.handle_message(ms(10), id("a"), pinned_heartbeat(2, "a"));
    let actions = drain(&mut raft);
    assert_eq!(
        actions[0],
        Action::Persist(HardState {
            term: 2,
            vote: None,
            manual_override: Some(id("a"))
        })
    );
    raft.handle_message(ms(60), id("a"), heartbeat(2, "a"));
    assert_eq!(raft.hard_state().manual_override, None);
}

// ---------------------------------------------------------------------------------------------
// RAFT-9 events

/// RAFT-9: a follower that learns the leader of a higher term from one heartbeat publishes
/// that leader once, without an intermediate "no leader"; further heartbeats publish nothing.
#[test]
fn raft9_leader_change_published_once() {
    let mut raft = start(config("b", &["a", "b", "c"]));
    raft.handle_message(ms(10), id("a"), heartbeat(2, "a"));
    let actions = drain(&mut raft);
    assert_eq!(
        leader_changes(&actions),
        vec![(2, Some(id("a")), LeaderChangeCause::LeaderHeard)]
    );
    // Persisted before published.
    let persisted = actions
        .iter()
        .position(|a| matches!(a, Action::Persist(_)))
        .unwrap();
    let published = actions
        .iter()
        .position(|a| matches!(a, Action::Publish(Event::LeaderChanged { .. })))
        .unwrap();
    assert!(persisted < published);

    for at in [60, 110, 160] {
        raft.handle_message(ms(at), id("a"), heartbeat(2, "a"));
        assert_eq!(leader_changes(&drain(&mut raft)), vec![]);
    }
    // A new leader in a higher term: one event, in order.
    raft.handle_message(ms(200), id("c"), heartbeat(3, "c"));
    assert_eq!(
        leader_changes(&drain(&mut raft)),
        vec![(3, Some(id("c")), LeaderChangeCause::LeaderHeard)]
    );
}

/// RAFT-9: a won election is published with its duration, measured from the first campaign
/// after the leader was lost, across failed rounds.
#[test]
fn raft9_election_won_carries_its_duration() {
    let mut config = config("a", &["a", "b", "c"]);
    config.pre_vote = false;
    let mut raft = start(config);
    let first = raft.poll_timeout().unwrap();
    raft.handle_timeout(first);
    let second = raft.poll_timeout().unwrap();
    raft.handle_timeout(second);
    assert_eq!(raft.term(), 2, "the first round timed out");
    drain(&mut raft);
    let won_at = second + Duration::from_millis(3);
    raft.handle_message(won_at, id("b"), vote(2, true, false));
    let won: Vec<Event> = events(&drain(&mut raft))
        .into_iter()
        .filter(|e| matches!(e, Event::ElectionWon { .. }))
        .collect();
    assert_eq!(
        won,
        vec![Event::ElectionWon {
            term: 2,
            duration: won_at - first
        }]
    );
}

// ---------------------------------------------------------------------------------------------
// MEM-3, resignation, restart, non-voters

/// MEM-3: a node whose id was refused leaves the election: no timer, no campaign, no answer,
/// commands refused.
#[test]
fn mem3_quarantined_node_takes_no_part() {
    let mut raft = start(config("b", &["a", "b", "c"]));
    raft.handle_id_refused(ms(5));
    drain(&mut raft);
    assert_eq!(raft.poll_timeout(), None);
    raft.handle_message(ms(10), id("a"), vote_request(5, "a", false));
    assert_eq!(drain(&mut raft), vec![]);
    assert_eq!(raft.term(), 0);
    assert_eq!(
        raft.handle_command(ms(20), Command::Resign),
        Err(ElectionError::Quarantined)
    );
    assert!(raft.is_quarantined());
}

/// Yield: a leader resigns by transferring to a peer it heard — the one with the longest
/// matching log, the smallest id among equals; without one it steps down.
#[test]
fn resign_hands_over_or_steps_down() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    let at = elect(&mut raft);
    // b voted for it and c answered a heartbeat: equal (empty) logs, so the smaller id.
    raft.handle_message(at, id("c"), ok_response(1));
    drain(&mut raft);
    assert_eq!(
        raft.handle_command(at, Command::Resign),
        Ok(CommandOutcome::TransferStarted { target: id("b") })
    );

    let state = HardState {
        term: 1,
        vote: None,
        manual_override: None,
    };
    let log = LogPosition::new(1, 5);
    let mut ahead = raft_node(config("a", &["a", "b", "c"]), state, log, 7);
    let at = elect(&mut ahead);
    let caught_up = RaftMessage::AppendResp(AppendResp {
        term: 2,
        success: true,
        match_index: 5,
        ..AppendResp::default()
    });
    ahead.handle_message(at, id("c"), caught_up);
    drain(&mut ahead);
    assert_eq!(
        ahead.handle_command(at, Command::Resign),
        Ok(CommandOutcome::TransferStarted { target: id("c") }),
        "c holds the whole log, b is not known to"
    );

    let mut alone = start(config("a", &["a"]));
    alone.handle_timeout(alone.poll_timeout().unwrap());
    assert_eq!(alone.role(), Role::Leader);
    drain(&mut alone);
    assert_eq!(
        alone.handle_command(ms(400), Command::Resign),
        Ok(CommandOutcome::SteppedDown)
    );
    assert_eq!(
        leader_changes(&drain(&mut alone)),
        vec![(1, None, LeaderChangeCause::Resign)]
    );
    assert_eq!(
        alone.handle_command(ms(401), Command::Resign),
        Err(ElectionError::NotLeader { leader: None })
    );
}

/// RAFT-1, WAL-2: restarted from its persisted hard state, a node does not vote for another
/// candidate in the term it already voted in, and re-grants to the same one.
#[test]
fn raft1_restart_keeps_the_vote() {
    let state = HardState {
        term: 5,
        vote: Some(id("a")),
        manual_override: None,
    };
    let mut raft = start_from(config("b", &["a", "b", "c"]), state);
    raft.handle_message(ms(1), id("c"), vote_request(5, "c", false));
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("c"), vote(5, false, false))]
    );
    raft.handle_message(ms(2), id("a"), vote_request(5, "a", false));
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("a"), vote(5, true, false))]
    );
}

/// RAFT-6 `voters`: a node outside the voter set follows the leader but never campaigns and
/// never grants a vote.
#[test]
fn raft6_non_voter_follows_but_never_campaigns() {
    let mut raft = start(config("x", &["a", "b", "c"]));
    let mut all = Vec::new();
    for _ in 0..20 {
        raft.handle_timeout(raft.poll_timeout().unwrap());
        all.extend(drain(&mut raft));
    }
    assert_eq!(raft.role(), Role::Follower);
    assert_eq!(sends(&all), vec![]);
    raft.handle_message(ms(10_000), id("a"), vote_request(1, "a", false));
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("a"), vote(1, false, false))]
    );
    raft.handle_message(ms(10_010), id("a"), heartbeat(1, "a"));
    assert_eq!(raft.leader(), Some(id("a")));
}

/// MEM-5 feeds the election: a peer that membership reports gone (it said `Goodbye`, or fell
/// silent) is not handed leadership, even though it answered within the last election timeout.
#[test]
fn resign_skips_a_peer_that_left() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    let at = elect(&mut raft);
    raft.handle_message(at, id("c"), ok_response(1));
    drain(&mut raft);
    // b voted for a, so it would be chosen (smallest id) — but it has just left.
    raft.handle_peer_status(at, id("b"), false);
    drain(&mut raft);
    assert_eq!(
        raft.handle_command(at, Command::Resign),
        Ok(CommandOutcome::TransferStarted { target: id("c") })
    );
}

// ---------------------------------------------------------------------------------------------
// WAL-2: abstention after a lost hard state

/// A voter of `a, b, c` that started without a hard state (or from `state`, a repaired WAL's).
fn abstaining(state: HardState) -> Raft {
    let mut raft = start_from(config("a", &["a", "b", "c"]), state);
    assert!(raft.begin_abstention(ms(0), AmnesiaCause::Lost));
    raft
}

/// The pre-vote request for term 0 with which an abstaining node asks for a peer's term.
fn probe(from: &str) -> RaftMessage {
    vote_request(0, from, true)
}

/// A voter of `a, b, c` started for a new cluster (`cluster.initial_state = "new"`) in an
/// empty data directory: it asks the voters before it takes part.
fn starting_new_cluster() -> Raft {
    let mut raft = start_from(config("a", &["a", "b", "c"]), HardState::default());
    assert!(raft.begin_abstention(ms(0), AmnesiaCause::NewCluster));
    raft
}

/// Issue 24 item 2, WAL-5: a node started for a new cluster probes the voters; a majority at
/// term 0 (itself and one other of three) is not enough, since the voter not heard may be the
/// one it voted for before its directory was emptied. Once every other voter answered at term
/// 0 it records a genesis and takes part: it grants a vote in term 1.
#[test]
fn wal5_a_new_cluster_start_takes_part_once_every_voter_is_at_term_zero() {
    let mut raft = starting_new_cluster();
    raft.handle_timeout(ms(0));
    let probes = drain(&mut raft);
    assert_eq!(probes.len(), 2, "{probes:?}");
    raft.handle_message(ms(5), id("b"), vote(0, false, true));
    assert!(!drain(&mut raft).contains(&Action::PersistGenesis));
    assert!(raft.is_abstaining());
    raft.handle_message(ms(5), id("c"), vote(0, false, true));
    let actions = drain(&mut raft);
    assert!(actions.contains(&Action::PersistGenesis), "{actions:?}");
    assert!(!raft.is_abstaining());
    raft.handle_message(ms(6), id("b"), vote_request(1, "b", false));
    let answered = drain(&mut raft);
    assert!(
        answered.iter().any(|action| matches!(
            action,
            Action::Send { message, .. } if *message == vote(1, true, false).into()
        )),
        "{answered:?}"
    );
}

/// Issue 24 item 2: a node started for a new cluster that hears a voter past term 0 learns
/// that the cluster exists: it records no genesis and abstains as a node that lost its WAL
/// does — it refuses a vote in the term it heard, and stays out until every voter was heard.
#[test]
fn wal5_a_new_cluster_start_into_an_existing_cluster_abstains() {
    let mut raft = starting_new_cluster();
    raft.handle_timeout(ms(0));
    drain(&mut raft);
    raft.handle_message(ms(5), id("b"), vote(7, false, true));
    let actions = drain(&mut raft);
    assert!(!actions.contains(&Action::PersistGenesis), "{actions:?}");
    assert!(raft.is_abstaining());
    raft.handle_message(ms(6), id("b"), vote_request(7, "b", false));
    let refused = drain(&mut raft);
    assert!(
        !refused.iter().any(|action| matches!(
            action,
            Action::Send { message, .. } if *message == vote(7, true, false).into()
        )),
        "{refused:?}"
    );
    // Every voter heard: the lost-WAL rule ends it at the highest term, never a vote in it.
    raft.handle_message(ms(7), id("c"), vote(7, false, true));
    let ended = drain(&mut raft);
    assert!(!raft.is_abstaining());
    assert!(
        ended.contains(&Action::PersistAmnesic(HardState {
            term: 7,
            ..HardState::default()
        })),
        "{ended:?}"
    );
    assert!(!ended.contains(&Action::PersistGenesis));
}

/// WAL-2: an abstaining voter asks the other voters for their term at once and again every
/// heartbeat interval (only those it has not heard), refuses every vote and pre-vote with its
/// own term, never campaigns however long it waits, and persists nothing.
#[test]
fn wal2_abstaining_voter_refuses_votes_and_never_campaigns() {
    let mut raft = abstaining(HardState::default());
    let status = raft.status();
    assert!(raft.is_abstaining());
    assert_eq!(status.abstaining_until_heard, vec![id("b"), id("c")]);
    assert_eq!(raft.poll_timeout(), Some(ms(0)));

    raft.handle_timeout(ms(0));
    assert_eq!(
        drain(&mut raft),
        vec![
            Action::Send {
                to: id("b"),
                message: probe("a").into()
            },
            Action::Send {
                to: id("c"),
                message: probe("a").into()
            },
        ]
    );
    assert_eq!(raft.poll_timeout(), Some(ms(50)));

    for pre_vote in [false, true] {
        raft.handle_message(ms(10), id("b"), vote_request(3, "b", pre_vote));
        assert_eq!(
            drain(&mut raft),
            vec![
                Action::Send {
                    to: id("b"),
                    message: vote(0, false, pre_vote).into()
                },
                Action::Publish(Event::VoteCast {
                    term: 3,
                    candidate: id("b"),
                    granted: false,
                    pre_vote,
                }),
            ]
        );
    }
    assert_eq!(raft.status().abstaining_until_heard, vec![id("c")]);

    // Fifty maximum election timeouts later: still no campaign, only the probe to `c`.
    let mut actions = Vec::new();
    let mut now = ms(50);
    while now <= ms(15_000) {
        raft.handle_timeout(now);
        actions.extend(drain(&mut raft));
        now = raft.poll_timeout().unwrap();
    }
    assert!(!actions.is_empty());
    assert!(
        actions.iter().all(|action| *action
            == Action::Send {
                to: id("c"),
                message: probe("a").into()
            }),
        "{actions:?}"
    );
    assert_eq!(
        (raft.role(), raft.term(), raft.is_abstaining()),
        (Role::Follower, 0, true)
    );
}

/// WAL-2: once every other voter was heard — here the leader's heartbeat and the answer to a
/// probe — the abstention ends with the highest term heard adopted, with no vote recorded and
/// persisted as amnesic. Then it refuses every vote in that term, follows its leader (still
/// persisting amnesic states in it), and votes as usual in the next term, persisted plainly.
#[test]
fn wal2_abstention_ends_when_every_voter_was_heard() {
    let mut raft = abstaining(HardState::default());
    raft.handle_timeout(ms(0));
    drain(&mut raft);

    raft.handle_message(ms(10), id("b"), heartbeat(4, "b"));
    assert_eq!(
        drain(&mut raft),
        vec![],
        "it follows nobody while abstaining"
    );
    assert!(raft.is_abstaining());

    raft.handle_message(ms(20), id("c"), vote(4, false, true));
    assert_eq!(
        drain(&mut raft),
        vec![Action::PersistAmnesic(HardState {
            term: 4,
            vote: None,
            manual_override: None,
        })]
    );
    assert!(!raft.is_abstaining());
    assert!(raft.status().abstaining_until_heard.is_empty());

    raft.handle_message(ms(30), id("c"), vote_request(4, "c", false));
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("c"), vote(4, false, false))]
    );
    raft.handle_message(ms(35), id("b"), pinned_heartbeat(4, "b"));
    let actions = drain(&mut raft);
    assert_eq!(
        actions[0],
        Action::PersistAmnesic(HardState {
            term: 4,
            vote: None,
            manual_override: Some(id("b")),
        })
    );
    assert_eq!(raft.leader(), Some(id("b")));

    raft.handle_message(ms(2000), id("c"), vote_request(5, "c", false));
    let actions = drain(&mut raft);
    assert_eq!(
        actions[..3],
        [
            Action::Persist(HardState {
                term: 5,
                vote: Some(id("c")),
                manual_override: Some(id("b")),
            }),
            Action::Send {
                to: id("c"),
                message: vote(5, true, false).into()
            },
            Action::Publish(Event::VoteCast {
                term: 5,
                candidate: id("c"),
                granted: true,
                pre_vote: false,
            }),
        ]
    );
}

/// A voter of `a..e` that started without a hard state.
fn abstaining_of_five() -> Raft {
    let mut raft = start_from(
        config("a", &["a", "b", "c", "d", "e"]),
        HardState::default(),
    );
    assert!(raft.begin_abstention(ms(0), AmnesiaCause::Lost));
    raft
}

/// The peers `actions` sends an abstention probe to.
fn probed(actions: &[Action]) -> Vec<PeerId> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Send { to, message } if *message == probe("a").into() => Some(*to),
            _ => None,
        })
        .collect()
}

/// WAL-5: with five voters and `e` down for good, a node that lost its WAL does not wait for
/// `e`: once the settling time (two maximum election timeouts, 600 ms here) is over, the
/// answers of `ceil(5/2) = 3` other voters heard after it end the abstention, with the
/// highest term heard adopted and persisted as amnesic. Answers from before the settling time
/// do not count towards those three: they may predate the end of a campaign this node voted
/// in before it lost its WAL.
#[test]
fn wal5_a_settled_majority_ends_the_abstention_with_a_voter_down() {
    let mut raft = abstaining_of_five();
    raft.handle_timeout(ms(0));
    assert_eq!(
        probed(&drain(&mut raft)),
        vec![id("b"), id("c"), id("d"), id("e")]
    );
    for (peer, term) in [("b", 4), ("c", 3), ("d", 4)] {
        raft.handle_message(ms(10), id(peer), vote(term, false, true));
    }
    drain(&mut raft);
    assert_eq!(raft.status().abstaining_until_heard, vec![id("e")]);

    // Before the settling time only `e` is asked; at its end every voter not heard since is.
    let mut now = ms(10);
    while now < ms(600) {
        raft.handle_timeout(now);
        let actions = drain(&mut raft);
        assert!(
            probed(&actions).iter().all(|peer| *peer == id("e")),
            "{actions:?}"
        );
        now = raft.poll_timeout().unwrap();
    }
    assert!(
        raft.is_abstaining(),
        "three answers before the settling time end nothing"
    );
    raft.handle_timeout(now);
    assert_eq!(
        probed(&drain(&mut raft)),
        vec![id("b"), id("c"), id("d"), id("e")]
    );

    raft.handle_message(
        now + Duration::from_millis(5),
        id("b"),
        vote(4, false, true),
    );
    raft.handle_message(
        now + Duration::from_millis(6),
        id("c"),
        vote(5, false, true),
    );
    assert_eq!(drain(&mut raft), vec![]);
    assert!(
        raft.is_abstaining(),
        "two of the four others are not enough"
    );
    raft.handle_message(
        now + Duration::from_millis(7),
        id("d"),
        vote(4, false, true),
    );
    assert_eq!(
        drain(&mut raft),
        vec![Action::PersistAmnesic(HardState {
            term: 5,
            vote: None,
            manual_override: None,
        })]
    );
    assert!(!raft.is_abstaining());

    // No vote in the adopted term; the next one is open.
    raft.handle_message(
        now + Duration::from_millis(20),
        id("b"),
        vote_request(5, "b", false),
    );
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("b"), vote(5, false, false))]
    );
    raft.handle_message(
        now + Duration::from_millis(30),
        id("b"),
        vote_request(6, "b", false),
    );
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("b"), vote(6, true, false))]
    );
}

/// WAL-5: with five voters, two down, the two answering others are fewer than `ceil(5/2)`:
/// the abstention lasts however long they keep answering (the module docs' example: the two
/// heard may be a stale leader's side while the node's forgotten vote elected another).
#[test]
fn wal5_two_of_four_other_voters_never_end_the_abstention() {
    let mut raft = abstaining_of_five();
    let mut now = ms(0);
    while now <= ms(15_000) {
        raft.handle_timeout(now);
        let probes = probed(&drain(&mut raft));
        for peer in ["b", "c"] {
            if probes.contains(&id(peer)) {
                raft.handle_message(
                    now + Duration::from_millis(2),
                    id(peer),
                    vote(2, false, true),
                );
            }
        }
        assert_eq!(drain(&mut raft), vec![]);
        now = raft.poll_timeout().unwrap();
    }
    assert!(raft.is_abstaining());
    assert_eq!(raft.term(), 0);
}

/// WAL-2: hearing a leader does not end the abstention while a voter is unheard. Here `a`
/// voted for `c` in term 3 before losing its WAL, and `b` — a stale leader of term 2 — is
/// heard first; ending then would let `a` vote again in term 3. `c`'s answer carries term 3,
/// so the abstention ends in term 3, and `b`'s request in term 3 is refused.
#[test]
fn wal2_a_leader_alone_does_not_end_the_abstention() {
    let mut raft = abstaining(HardState::default());
    raft.handle_message(ms(10), id("b"), heartbeat(2, "b"));
    raft.handle_timeout(ms(500));
    assert_eq!(
        drain(&mut raft),
        vec![Action::Send {
            to: id("c"),
            message: probe("a").into()
        }]
    );
    assert!(raft.is_abstaining());

    raft.handle_message(ms(510), id("c"), vote(3, false, true));
    assert_eq!(
        drain(&mut raft),
        vec![Action::PersistAmnesic(HardState {
            term: 3,
            vote: None,
            manual_override: None,
        })]
    );
    raft.handle_message(ms(520), id("b"), vote_request(3, "b", false));
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(id("b"), vote(3, false, false))]
    );
}

/// WAL-2: a repaired WAL's recovered term and vote stay when no voter is further ahead; a
/// stale leader is told the node's term; a pre-vote request shows its sender's term (one
/// below the term it asks for).
#[test]
fn wal2_abstention_keeps_a_recovered_term_and_vote() {
    let recovered = HardState {
        term: 7,
        vote: Some(id("c")),
        manual_override: None,
    };
    let mut raft = abstaining(recovered);
    raft.handle_message(ms(10), id("b"), heartbeat(5, "b"));
    assert_eq!(
        sends(&drain(&mut raft)),
        vec![(
            id("b"),
            RaftMessage::AppendResp(AppendResp {
                term: 7,
                success: false,
                match_index: 0,
                ..AppendResp::default()
            })
        )]
    );
    raft.handle_message(ms(20), id("c"), vote_request(8, "c", true));
    assert_eq!(
        drain(&mut raft),
        vec![
            Action::Send {
                to: id("c"),
                message: vote(7, false, true).into()
            },
            Action::PersistAmnesic(recovered),
            Action::Publish(Event::VoteCast {
                term: 8,
                candidate: id("c"),
                granted: false,
                pre_vote: true,
            }),
        ]
    );
}

/// WAL-2, RAFT-8: an abstaining node persists no hard state, not even when a command changes
/// it (a persisted hard state would end the abstention at the next start); the automatic
/// election switch is persisted on its own. `SetLeader` is refused while abstaining.
#[test]
fn wal2_abstaining_node_persists_no_hard_state() {
    let mut raft = abstaining(HardState {
        term: 2,
        vote: None,
        manual_override: Some(id("b")),
    });
    assert_eq!(
        raft.handle_command(ms(5), Command::EnableAutoElection(true)),
        Ok(CommandOutcome::Applied)
    );
    assert_eq!(drain(&mut raft), vec![Action::PersistAutoElection(true)]);
    assert_eq!(
        raft.handle_command(ms(6), Command::SetLeader(id("a"))),
        Err(ElectionError::Abstaining)
    );
    assert_eq!(drain(&mut raft), vec![]);
}

/// WAL-2: a single voter and a node that is not a voter need not abstain: nobody else's vote
/// could be repeated. The single voter elects itself at its first timeout.
#[test]
fn wal2_single_voter_and_non_voter_do_not_abstain() {
    let mut alone = start(config("a", &["a"]));
    assert!(!alone.begin_abstention(ms(0), AmnesiaCause::Lost));
    assert!(!alone.is_abstaining());
    let at = alone.poll_timeout().unwrap();
    alone.handle_timeout(at);
    drain(&mut alone);
    assert_eq!(alone.role(), Role::Leader);

    let mut outsider = start(config("x", &["a", "b", "c"]));
    assert!(!outsider.begin_abstention(ms(0), AmnesiaCause::Lost));
    assert!(!outsider.is_abstaining());
}

/// WAL-2: the probe (a pre-vote for term 0) is answered with the receiver's term and changes
/// nothing there: a refusal from a node in a later term, a granted pre-vote from a node still
/// in term 0.
#[test]
fn wal2_probe_is_answered_with_the_term_and_changes_nothing() {
    let mut follower = start_from(
        config("b", &["a", "b", "c"]),
        HardState {
            term: 5,
            vote: Some(id("c")),
            manual_override: None,
        },
    );
    follower.handle_message(ms(10), id("a"), probe("a"));
    assert_eq!(
        drain(&mut follower),
        vec![
            Action::Send {
                to: id("a"),
                message: vote(5, false, true).into()
            },
            Action::Publish(Event::VoteCast {
                term: 0,
                candidate: id("a"),
                granted: false,
                pre_vote: true,
            }),
        ]
    );
    assert_eq!(follower.term(), 5);

    let mut fresh = start(config("b", &["a", "b", "c"]));
    fresh.handle_message(ms(10), id("a"), probe("a"));
    assert_eq!(
        sends(&drain(&mut fresh)),
        vec![(id("a"), vote(0, true, true))]
    );
    assert_eq!(fresh.hard_state(), HardState::default());
}

/// WAL-2: the nodes of a brand-new cluster all start without a hard state; they hear each
/// other through their probes and answers, end their abstention in term 0 within one round
/// trip, and elect as usual.
#[test]
fn wal2_brand_new_nodes_end_each_others_abstention() {
    let mut a = start(config("a", &["a", "b"]));
    let mut b = start(config("b", &["a", "b"]));
    assert!(
        a.begin_abstention(ms(0), AmnesiaCause::Lost)
            && b.begin_abstention(ms(0), AmnesiaCause::Lost)
    );
    a.handle_timeout(ms(0));
    let to_b = sends(&drain(&mut a));
    assert_eq!(to_b, vec![(id("b"), probe("a"))]);
    b.handle_message(ms(1), id("a"), to_b[0].1.clone());
    let answer = sends(&drain(&mut b));
    assert_eq!(answer, vec![(id("a"), vote(0, false, true))]);
    assert!(
        b.is_abstaining(),
        "a probe says nothing of its sender's term"
    );
    a.handle_message(ms(2), id("b"), answer[0].1.clone());
    assert_eq!(drain(&mut a), vec![Action::Persist(HardState::default())]);
    assert!(!a.is_abstaining());
    b.handle_timeout(ms(0));
    let to_a = sends(&drain(&mut b));
    a.handle_message(ms(3), id("b"), to_a[0].1.clone());
    b.handle_message(ms(4), id("a"), sends(&drain(&mut a))[0].1.clone());
    assert_eq!(drain(&mut b), vec![Action::Persist(HardState::default())]);
}

/// WAL-2: in `connected` mode there is no configured electorate; the node abstains for at
/// least two maximum election timeouts and until every connected peer was heard.
#[test]
fn wal2_connected_mode_abstains_two_max_timeouts_and_until_peers_heard() {
    let mut raft = connected("a", &["b"]);
    assert!(raft.begin_abstention(ms(0), AmnesiaCause::Lost));
    raft.handle_timeout(ms(0));
    assert_eq!(sends(&drain(&mut raft)), vec![(id("b"), probe("a"))]);
    raft.handle_message(ms(5), id("b"), vote(3, false, true));
    assert_eq!(drain(&mut raft), vec![]);
    assert!(
        raft.is_abstaining(),
        "not before two maximum election timeouts"
    );
    raft.handle_peer_status(ms(100), id("c"), true);
    drain(&mut raft);
    assert_eq!(raft.status().abstaining_until_heard, vec![id("c")]);
    raft.handle_timeout(ms(650));
    assert_eq!(sends(&drain(&mut raft)), vec![(id("c"), probe("a"))]);
    assert!(raft.is_abstaining(), "c is connected and not heard yet");
    raft.handle_message(ms(660), id("c"), heartbeat(3, "c"));
    assert_eq!(
        drain(&mut raft),
        vec![Action::PersistAmnesic(HardState {
            term: 3,
            vote: None,
            manual_override: None,
        })]
    );
}

/// RAFT-8: every `EnableAutoElection` command asks the driver to persist the switch, so the
/// operator's choice survives a restart.
#[test]
fn raft8_auto_election_switch_is_persisted() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    for enabled in [false, true, false] {
        assert_eq!(
            raft.handle_command(ms(1), Command::EnableAutoElection(enabled)),
            Ok(CommandOutcome::Applied)
        );
        assert_eq!(drain(&mut raft), vec![Action::PersistAutoElection(enabled)]);
        assert_eq!(raft.auto_election(), enabled);
    }
}

// ---------------------------------------------------------------------------------------------
// CB-2: every way out of leadership is published with its cause

/// CB-2, RAFT-9: a leader that stops with nobody to hand over to (the voter it heard has
/// left) steps down and says so: a role change, then "no leader" with cause `shutdown`, and
/// nothing to persist (term and vote are unchanged); then it says it stopped, and ignores
/// every input after. A follower that stops publishes nothing, and stops at once.
#[test]
fn cb2_a_stopping_leader_publishes_its_step_down() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    let at = elect(&mut raft);
    raft.handle_peer_status(at, id("b"), false);
    drain(&mut raft);
    raft.handle_shutdown(at);
    assert_eq!(
        drain(&mut raft),
        vec![
            Action::Publish(Event::RoleChanged {
                term: 1,
                role: Role::Follower,
                phase: "follower",
            }),
            Action::Publish(Event::LeaderChanged {
                term: 1,
                leader: None,
                role: Role::Follower,
                cause: LeaderChangeCause::Shutdown,
            }),
            Action::Stopped,
        ]
    );
    assert!(raft.is_stopped());
    assert_eq!(raft.poll_timeout(), None);
    raft.handle_message(ms(1000), id("c"), vote_request(5, "c", false));
    raft.handle_timeout(ms(5000));
    raft.handle_shutdown(ms(5000));
    assert_eq!(
        drain(&mut raft),
        vec![],
        "a stopped node neither votes nor campaigns"
    );
    assert_eq!(
        raft.handle_command(ms(5000), Command::Resign),
        Err(ElectionError::ShuttingDown)
    );

    let mut follower = start(config("b", &["a", "b", "c"]));
    follower.handle_message(ms(10), id("a"), heartbeat(1, "a"));
    drain(&mut follower);
    follower.handle_shutdown(ms(20));
    assert_eq!(drain(&mut follower), vec![Action::Stopped]);
}

/// CB-2, RAFT-8: a stopping leader hands over as a resignation does: once the voter it heard
/// is known to be caught up it orders it to campaign (`TimeoutNow`), keeps leading meanwhile,
/// and stops when the successor's campaign reaches it: it grants the vote (persisted first),
/// publishes its step-down with cause `resign`, then says it stopped.
#[test]
fn cb2_a_stopping_leader_hands_over_then_stops() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    let at = elect(&mut raft);
    raft.handle_message(at, id("b"), ok_response(1));
    drain(&mut raft);
    raft.handle_shutdown(at);
    assert_eq!(
        drain(&mut raft),
        vec![Action::Send {
            to: id("b"),
            message: RaftMessage::TimeoutNow(TimeoutNow {
                term: 1,
                pin: false
            })
            .into(),
        }]
    );
    assert_eq!(raft.role(), Role::Leader);
    assert!(!raft.is_stopped());

    let mut campaign = vote_request(2, "b", false);
    if let RaftMessage::RequestVote(request) = &mut campaign {
        request.leadership_transfer = true;
    }
    raft.handle_message(at + Duration::from_millis(5), id("b"), campaign);
    let actions = drain(&mut raft);
    assert_eq!(
        actions[0],
        Action::Persist(HardState {
            term: 2,
            vote: Some(id("b")),
            manual_override: None,
        })
    );
    assert_eq!(
        leader_changes(&actions),
        vec![(2, None, LeaderChangeCause::Resign)]
    );
    // Its vote may be lost on the way: it stays, answering b's next campaign, until it hears
    // b lead — bounded, and without campaigning itself.
    assert!(!actions.contains(&Action::Stopped), "{actions:?}");
    assert!(!raft.is_stopped());
    let retry = vote_request(3, "b", false);
    raft.handle_message(at + Duration::from_millis(400), id("b"), retry);
    let actions = drain(&mut raft);
    assert!(
        actions.iter().any(|action| matches!(
            action,
            Action::Send { to, message } if *to == id("b")
                && matches!(message, ElectionMessage::Raft(RaftMessage::Vote(vote)) if vote.granted)
        )),
        "the retried campaign gets its vote: {actions:?}"
    );
    assert!(!raft.is_stopped());
    raft.handle_message(at + Duration::from_millis(410), id("b"), heartbeat(3, "b"));
    let actions = drain(&mut raft);
    assert_eq!(actions.last(), Some(&Action::Stopped));
    assert!(raft.is_stopped());
}

/// CB-2: a stopping ex-leader that never hears its successor lead stops at its own bound,
/// without ever campaigning.
#[test]
fn cb2_a_stopping_leader_waits_for_its_successor_bounded() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    let at = elect(&mut raft);
    raft.handle_message(at, id("b"), ok_response(1));
    drain(&mut raft);
    raft.handle_shutdown(at);
    drain(&mut raft);
    let mut campaign = vote_request(2, "b", false);
    if let RaftMessage::RequestVote(request) = &mut campaign {
        request.leadership_transfer = true;
    }
    raft.handle_message(at + Duration::from_millis(5), id("b"), campaign);
    drain(&mut raft);
    let mut actions = Vec::new();
    while !raft.is_stopped() {
        let next = raft.poll_timeout().unwrap();
        assert!(
            next <= at + Duration::from_secs(1),
            "bounded by twice the maximum election timeout"
        );
        raft.handle_timeout(next);
        actions.extend(drain(&mut raft));
    }
    assert!(
        !actions
            .iter()
            .any(|action| matches!(action, Action::Send { .. } | Action::Broadcast { .. })),
        "a stopping node never campaigns: {actions:?}"
    );
    assert_eq!(actions.last(), Some(&Action::Stopped));
}

/// CB-2: a hand-over that does not complete within the minimum election timeout ends with
/// the leader stepping down (cause `shutdown`) and stopping; and a driver that cannot wait
/// that long calls `handle_shutdown` again, which steps down at once.
#[test]
fn cb2_a_stopping_leaders_hand_over_is_bounded() {
    for cut_short in [false, true] {
        let mut raft = start(config("a", &["a", "b", "c"]));
        let at = elect(&mut raft);
        raft.handle_shutdown(at);
        drain(&mut raft);
        assert_eq!(raft.role(), Role::Leader, "handing over to b");
        let actions = if cut_short {
            raft.handle_shutdown(at + Duration::from_millis(10));
            drain(&mut raft)
        } else {
            let mut actions = Vec::new();
            while !raft.is_stopped() {
                let next = raft.poll_timeout().unwrap();
                assert!(
                    next <= at + Duration::from_millis(150),
                    "bounded by the minimum timeout"
                );
                raft.handle_timeout(next);
                actions.extend(drain(&mut raft));
            }
            actions
        };
        assert_eq!(
            leader_changes(&actions),
            vec![(1, None, LeaderChangeCause::Shutdown)],
            "cut short: {cut_short}"
        );
        assert_eq!(actions.last(), Some(&Action::Stopped));
    }
}

/// CB-2, CB-6: a resigning leader learns its successor's term from the successor's vote
/// request before it hears the successor lead; its step-down is recorded as the resignation
/// it is, not as a stray higher term.
#[test]
fn cb2_step_down_of_a_hand_over_carries_its_cause() {
    let mut raft = start(config("a", &["a", "b", "c"]));
    let at = elect(&mut raft);
    raft.handle_message(at, id("b"), ok_response(1));
    drain(&mut raft);
    assert_eq!(
        raft.handle_command(at, Command::Resign),
        Ok(CommandOutcome::TransferStarted { target: id("b") })
    );
    drain(&mut raft);
    let mut request = vote_request(2, "b", false);
    if let RaftMessage::RequestVote(campaign) = &mut request {
        campaign.leadership_transfer = true;
    }
    raft.handle_message(at, id("b"), request);
    assert_eq!(
        leader_changes(&drain(&mut raft)),
        vec![(2, None, LeaderChangeCause::Resign)]
    );
    // A higher term from anyone but the successor is still just that.
    let mut other = start(config("a", &["a", "b", "c"]));
    let at = elect(&mut other);
    other.handle_message(at, id("c"), heartbeat(5, "c"));
    assert_eq!(
        leader_changes(&drain(&mut other)),
        vec![(5, Some(id("c")), LeaderChangeCause::LeaderHeard)]
    );
}
