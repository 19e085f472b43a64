//! The election claims of the Raft paper (Ongaro and Ousterhout, "In Search of an
//! Understandable Consensus Algorithm", §5.1, §5.2 and §5.4.1), checked against conclave's
//! sans-IO [`Raft`] the way tikv raft-rs checks its own core in `test_raft_paper.rs`: terms
//! and stale messages (§5.1), starting as follower, heartbeats, election timeouts, one round of
//! voting, one vote per term, candidates stepping down, randomized and non-conflicting
//! timeouts (§5.2), the up-to-date log rule (§5.4.1), and the pre-vote extension of RAFT-7.
//! Each test fires inputs at one node and asserts the exact actions it drains; the
//! non-conflicting-timeouts claim is measured on the deterministic cluster simulator. Unless a
//! test says otherwise, nodes run with pre-vote and check-quorum off, as in the paper.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use conclave_core::Instant;
use conclave_core::election::{Action, ElectionMessage, Event, HardState, LeaderChangeCause, Role};
use conclave_core::raft::{LogPosition, Raft, RaftConfig, RaftMessage};
use conclave_core::testing::{self, drain};
use conclave_harness::sim::{AdmissionModel, SimConfig, Simulation};
use conclave_protocol::{
    AppendEntries, AppendResp, LeaderAssign, PeerId, RequestVote, TimeoutNow, Vote,
};

/// Heartbeat interval of the unit tests.
const HEARTBEAT: Duration = Duration::from_millis(50);
/// `et` of the paper: election timeouts are drawn from `[ET, 2 * ET)`.
const ET: Duration = Duration::from_millis(150);

// ---------------------------------------------------------------------------------------------
// helpers

/// Sends this test's tracing output to the test harness, so a failure shows the node's log.
fn log_to_test_output() -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_test_writer()
            .finish(),
    )
}

/// Node `n` (1-based): `n1`, `n2`, ...
fn id(n: usize) -> PeerId {
    testing::id(&format!("n{n}"))
}

/// The settings of node `me` among voters `n1..=n{size}`: the paper's algorithm (no pre-vote,
/// no check-quorum), election timeout in `[ET, 2 * ET)`.
fn paper_config(me: usize, size: usize) -> RaftConfig {
    let mut config = RaftConfig::new(id(me), (1..=size).map(id))
        .with_heartbeat(HEARTBEAT)
        .with_election_timeout(ET, ET * 2);
    config.pre_vote = false;
    config.check_quorum = false;
    // The paper's uniform randomized timeouts, not conclave's ranked ones.
    config.ranked_timeouts = false;
    config
}

/// A node started at time zero from `hard` with its last log entry at `log`.
fn node_with(config: RaftConfig, hard: HardState, log: LogPosition) -> Raft {
    let seed = 0x5eed ^ u64::from(config.id.as_bytes()[1]);
    testing::raft_node(config, hard, log, seed)
}

/// A fresh paper node `me` of a `size`-voter cluster, empty log, term 0.
fn node(me: usize, size: usize) -> Raft {
    node_with(
        paper_config(me, size),
        HardState::default(),
        LogPosition::default(),
    )
}

fn hard(term: u64, vote: Option<PeerId>) -> HardState {
    HardState {
        term,
        vote,
        manual_override: None,
    }
}

/// One microsecond before `at`.
fn just_before(at: Instant) -> Instant {
    Instant::from_micros(at.as_micros() - 1)
}

/// Lets the election timer of a non-leader fire; returns when it fired.
fn fire_election_timeout(raft: &mut Raft) -> Instant {
    let at = raft.poll_timeout().unwrap();
    raft.handle_timeout(at);
    at
}

/// Makes `n1` of a `size`-voter cluster leader of term 1 with a bare majority of votes;
/// returns it with its actions drained and the time it won.
fn leader(size: usize) -> (Raft, Instant) {
    let mut raft = node(1, size);
    let at = fire_election_timeout(&mut raft);
    for peer in 2..=size / 2 + 1 {
        raft.handle_message(at, id(peer), vote(raft.term(), true));
    }
    assert_eq!(raft.role(), Role::Leader);
    drain(&mut raft);
    (raft, at)
}

fn request_vote(term: u64, candidate: PeerId, log: LogPosition) -> RaftMessage {
    RaftMessage::RequestVote(RequestVote {
        term,
        candidate,
        last_log_index: log.index,
        last_log_term: log.term,
        pre_vote: false,
        leadership_transfer: false,
        priority: None,
    })
}

fn pre_vote_request(term: u64, candidate: PeerId, log: LogPosition) -> RaftMessage {
    RaftMessage::RequestVote(RequestVote {
        term,
        candidate,
        last_log_index: log.index,
        last_log_term: log.term,
        pre_vote: true,
        leadership_transfer: false,
        priority: None,
    })
}

fn vote(term: u64, granted: bool) -> RaftMessage {
    RaftMessage::Vote(Vote {
        term,
        granted,
        pre_vote: false,
        priority: None,
    })
}

fn pre_vote(term: u64, granted: bool) -> RaftMessage {
    RaftMessage::Vote(Vote {
        term,
        granted,
        pre_vote: true,
        priority: None,
    })
}

/// An empty `AppendEntries` of `leader` whose log ends at `log`.
fn heartbeat_at(term: u64, leader: PeerId, log: LogPosition) -> RaftMessage {
    RaftMessage::AppendEntries(AppendEntries {
        prev_index: log.index,
        prev_term: log.term,
        ..AppendEntries::new(term, leader)
    })
}

/// A heartbeat of a leader with an empty log.
fn heartbeat(term: u64, leader: PeerId) -> RaftMessage {
    heartbeat_at(term, leader, LogPosition::default())
}

fn append_resp(term: u64, success: bool) -> RaftMessage {
    RaftMessage::AppendResp(AppendResp {
        term,
        success,
        match_index: 0,
        ..AppendResp::default()
    })
}

fn send(to: PeerId, message: RaftMessage) -> Action {
    Action::Send {
        to,
        message: ElectionMessage::Raft(message),
    }
}

fn vote_cast(term: u64, candidate: PeerId, granted: bool, pre_vote: bool) -> Action {
    Action::Publish(Event::VoteCast {
        term,
        candidate,
        granted,
        pre_vote,
    })
}

/// A role change into one of the paper's roles, whose phase label is the role's own.
fn role_changed(term: u64, role: Role) -> Action {
    Action::Publish(Event::RoleChanged {
        term,
        role,
        phase: role.label(),
    })
}

/// A role change into RAFT-7's pre-vote round: a candidate in the phase `pre_candidate`.
fn pre_candidate_changed(term: u64) -> Action {
    Action::Publish(Event::RoleChanged {
        term,
        role: Role::Candidate,
        phase: "pre_candidate",
    })
}

fn leader_changed(
    term: u64,
    leader: Option<PeerId>,
    role: Role,
    cause: LeaderChangeCause,
) -> Action {
    Action::Publish(Event::LeaderChanged {
        term,
        leader,
        role,
        cause,
    })
}

fn election_started(term: u64, pre_vote: bool) -> Action {
    Action::Publish(Event::ElectionStarted {
        term,
        phase: if pre_vote { "pre_vote" } else { "election" },
    })
}

// ---------------------------------------------------------------------------------------------
// §5.1 terms

/// RAFT-2: a follower that sees a higher term in any message adopts it, clears its vote,
/// persists both before answering, and stays follower. Reference: Raft §5.1.
#[test]
fn follower_update_term_from_message() {
    check_update_term_from_message(Role::Follower);
}

/// RAFT-3: a candidate that sees a higher term in any message adopts it, clears its vote and
/// reverts to follower at once. Reference: Raft §5.1.
#[test]
fn candidate_update_term_from_message() {
    check_update_term_from_message(Role::Candidate);
}

/// RAFT-4: a leader that sees a higher term in any message adopts it, clears its vote and
/// reverts to follower at once. Reference: Raft §5.1.
#[test]
fn leader_update_term_from_message() {
    check_update_term_from_message(Role::Leader);
}

/// One message of term 5 and what it must make the node do.
struct HigherTermCase {
    message: RaftMessage,
    /// What the node persists first.
    persisted: HardState,
    /// Its answer to `n2`, if any.
    answer: Option<RaftMessage>,
    /// Whether it publishes a granted (`Some(true)`) or refused vote.
    vote_granted: Option<bool>,
    /// Whether it learns `n2` leads term 5.
    leader_heard: bool,
}

/// Puts `n1` of three voters, log at (1, 3), in `role` at term 2 having voted, then hands it
/// each kind of message from `n2` at term 5 and checks the exact actions: the new term with a
/// cleared vote (or, for a granted request, the vote for `n2`) is persisted first, the answer
/// carries term 5, and a candidate or leader publishes its return to follower.
fn check_update_term_from_message(role: Role) {
    let _log = log_to_test_output();
    let my_log = LogPosition::new(1, 3);
    let stale_log = LogPosition::new(1, 2);
    let in_role = || {
        let mut raft = match role {
            Role::Follower => node_with(paper_config(1, 3), hard(2, Some(id(3))), my_log),
            Role::Candidate | Role::Leader => {
                let mut raft = node_with(paper_config(1, 3), hard(1, None), my_log);
                let at = fire_election_timeout(&mut raft);
                if role == Role::Leader {
                    raft.handle_message(at, id(2), vote(2, true));
                }
                raft
            }
        };
        drain(&mut raft);
        assert_eq!((raft.role(), raft.term()), (role, 2));
        assert!(raft.hard_state().vote.is_some());
        raft
    };
    let now = Instant::from_millis(10);
    let (n2, cleared, voted_n2) = (id(2), hard(5, None), hard(5, Some(id(2))));

    let case = |message, persisted, answer, vote_granted, leader_heard| HigherTermCase {
        message,
        persisted,
        answer,
        vote_granted,
        leader_heard,
    };
    let cases = [
        case(
            heartbeat(5, n2),
            cleared,
            Some(append_resp(5, true)),
            None,
            true,
        ),
        case(vote(5, false), cleared, None, None, false),
        case(append_resp(5, false), cleared, None, None, false),
        case(
            request_vote(5, n2, stale_log),
            cleared,
            Some(vote(5, false)),
            Some(false),
            false,
        ),
        case(
            request_vote(5, n2, my_log),
            voted_n2,
            Some(vote(5, true)),
            Some(true),
            false,
        ),
    ];
    for HigherTermCase {
        message,
        persisted,
        answer,
        vote_granted,
        leader_heard,
    } in cases
    {
        let mut raft = in_role();
        raft.handle_message(now, n2, message.clone());

        let mut expected = vec![Action::Persist(persisted)];
        expected.extend(answer.map(|answer| send(n2, answer)));
        expected.extend(vote_granted.map(|granted| vote_cast(5, n2, granted, false)));
        if role != Role::Follower {
            expected.push(role_changed(5, Role::Follower));
        }
        if leader_heard {
            expected.push(leader_changed(
                5,
                Some(n2),
                Role::Follower,
                LeaderChangeCause::LeaderHeard,
            ));
        } else if role == Role::Leader {
            // It led term 2; now nobody it knows leads term 5.
            expected.push(leader_changed(
                5,
                None,
                Role::Follower,
                LeaderChangeCause::HigherTerm,
            ));
        }
        assert_eq!(drain(&mut raft), expected, "{role:?} given {message:?}");
        assert_eq!(raft.role(), Role::Follower, "{message:?}");
        assert_eq!(raft.term(), 5, "{message:?}");
        assert_eq!(raft.hard_state(), persisted, "{message:?}");
        assert_eq!(raft.leader(), leader_heard.then_some(n2), "{message:?}");
    }
}

/// RAFT-5: a message of a stale term is rejected: a vote request is refused with the current
/// term and a stale leader's heartbeat is answered with an `AppendResp` carrying the current
/// term (so the sender learns it is behind); every other stale message is ignored, changes no
/// state and does not reset the election timer. Reference: Raft §5.1.
#[test]
fn reject_stale_term_message() {
    let _log = log_to_test_output();
    let fresh = || {
        let raft = node_with(paper_config(1, 3), hard(3, None), LogPosition::default());
        let deadline = raft.poll_timeout().unwrap();
        (raft, deadline)
    };
    let now = Instant::from_millis(10);
    let n2 = id(2);
    let up_to_date = LogPosition::new(2, 9);

    // (stale message from n2, exact answer)
    let cases: Vec<(RaftMessage, Vec<Action>)> = vec![
        (
            request_vote(2, n2, up_to_date),
            vec![send(n2, vote(3, false)), vote_cast(2, n2, false, false)],
        ),
        (
            pre_vote_request(2, n2, up_to_date),
            vec![send(n2, pre_vote(3, false)), vote_cast(2, n2, false, true)],
        ),
        (heartbeat(2, n2), vec![send(n2, append_resp(3, false))]),
        (vote(2, true), vec![]),
        (pre_vote(2, true), vec![]),
        (append_resp(2, true), vec![]),
        (
            RaftMessage::TimeoutNow(TimeoutNow {
                term: 2,
                pin: false,
            }),
            vec![],
        ),
        (
            RaftMessage::LeaderAssign(LeaderAssign {
                term: 2,
                leader: n2,
                assigner: n2,
            }),
            vec![],
        ),
    ];
    for (message, expected) in cases {
        let (mut raft, deadline) = fresh();
        raft.handle_message(now, n2, message.clone());
        assert_eq!(drain(&mut raft), expected, "{message:?}");
        assert_eq!(raft.hard_state(), hard(3, None), "{message:?}");
        assert_eq!(raft.role(), Role::Follower, "{message:?}");
        assert_eq!(raft.leader(), None, "{message:?}");
        assert_eq!(raft.poll_timeout(), Some(deadline), "{message:?}");
    }

    // A candidate does not count a stale grant; a leader does not yield to a stale leader.
    let mut candidate = node(1, 3);
    fire_election_timeout(&mut candidate);
    let at = fire_election_timeout(&mut candidate);
    drain(&mut candidate);
    assert_eq!(candidate.term(), 2);
    candidate.handle_message(at, n2, vote(1, true));
    assert_eq!(drain(&mut candidate), vec![]);
    assert_eq!((candidate.role(), candidate.term()), (Role::Candidate, 2));

    let (mut leader, at) = leader(3);
    leader.handle_message(at, n2, heartbeat(0, n2));
    assert_eq!(drain(&mut leader), vec![send(n2, append_resp(1, false))]);
    assert_eq!((leader.role(), leader.term()), (Role::Leader, 1));
}

// ---------------------------------------------------------------------------------------------
// §5.2 leader election

/// RAFT-1: a server starts as a follower, with the term and vote it persisted, no known
/// leader, nothing to do yet, and an election timer armed. Reference: Raft §5.2.
#[test]
fn start_as_follower() {
    let _log = log_to_test_output();
    let mut raft = node_with(
        paper_config(1, 3),
        hard(4, Some(id(2))),
        LogPosition::new(4, 7),
    );
    assert_eq!(raft.role(), Role::Follower);
    assert_eq!(raft.term(), 4);
    assert_eq!(raft.hard_state(), hard(4, Some(id(2))));
    assert_eq!(raft.leader(), None);
    assert_eq!(drain(&mut raft), vec![]);
    let deadline = raft.poll_timeout().unwrap();
    assert!(
        (Instant::ZERO + ET..Instant::ZERO + ET * 2).contains(&deadline),
        "{deadline:?}"
    );
}

/// RAFT-4: a new leader sends an empty `AppendEntries` (heartbeat) to every other server at
/// once, and again every heartbeat interval, and nothing in between. Reference: Raft §5.2.
#[test]
fn leader_bcast_beat() {
    let _log = log_to_test_output();
    let log = LogPosition::new(2, 7);
    let mut raft = node_with(paper_config(1, 3), hard(2, None), log);
    let won_at = fire_election_timeout(&mut raft);
    drain(&mut raft);
    raft.handle_message(won_at, id(3), vote(3, true));
    let beat = |to: usize| send(id(to), heartbeat_at(3, id(1), log));
    assert_eq!(
        drain(&mut raft),
        vec![
            beat(2),
            beat(3),
            Action::Publish(Event::ElectionWon {
                term: 3,
                duration: Duration::ZERO
            }),
            role_changed(3, Role::Leader),
            leader_changed(3, Some(id(1)), Role::Leader, LeaderChangeCause::VoteWon),
        ]
    );

    let mut next = won_at + HEARTBEAT;
    for _ in 0..5 {
        assert_eq!(raft.poll_timeout(), Some(next));
        raft.handle_timeout(just_before(next));
        assert_eq!(drain(&mut raft), vec![], "no heartbeat before the interval");
        raft.handle_timeout(next);
        assert_eq!(drain(&mut raft), vec![beat(2), beat(3)]);
        next += HEARTBEAT;
    }
    assert_eq!(raft.role(), Role::Leader);
}

/// RAFT-2, RAFT-3, RAFT-1: a follower that hears no leader for an election timeout becomes
/// candidate: term + 1, a vote for itself persisted before any request leaves, then
/// `RequestVote` carrying its last log position to every other voter. Reference: Raft §5.2,
/// §5.4.1.
#[test]
fn follower_start_election() {
    let _log = log_to_test_output();
    let log = LogPosition::new(1, 4);
    let mut raft = node_with(paper_config(1, 3), hard(1, None), log);
    let heard = Instant::from_millis(20);
    raft.handle_message(heard, id(2), heartbeat_at(2, id(2), log));
    drain(&mut raft);
    assert_eq!((raft.role(), raft.leader()), (Role::Follower, Some(id(2))));

    let deadline = raft.poll_timeout().unwrap();
    assert!(deadline >= heard + ET, "the heartbeat restarted the timer");
    raft.handle_timeout(just_before(deadline));
    assert_eq!(drain(&mut raft), vec![], "no election before the timeout");

    raft.handle_timeout(deadline);
    let actions = drain(&mut raft);
    let request = |to: usize| send(id(to), request_vote(3, id(1), log));
    assert_eq!(
        actions,
        vec![
            Action::Persist(hard(3, Some(id(1)))),
            request(2),
            request(3),
            election_started(3, false),
            role_changed(3, Role::Candidate),
            leader_changed(3, None, Role::Candidate, LeaderChangeCause::ElectionTimeout),
        ]
    );
    assert_persist_before_sends(&actions);
    assert_eq!((raft.role(), raft.term()), (Role::Candidate, 3));
}

/// RAFT-3, RAFT-1: a candidate that neither wins nor loses within an election timeout starts a
/// new election: term + 1, a new vote for itself persisted first, a new round of `RequestVote`
/// to every other voter. Reference: Raft §5.2.
#[test]
fn candidate_start_new_election() {
    let _log = log_to_test_output();
    let log = LogPosition::new(1, 4);
    let mut raft = node_with(paper_config(1, 3), hard(2, None), log);
    fire_election_timeout(&mut raft);
    drain(&mut raft);
    assert_eq!((raft.role(), raft.term()), (Role::Candidate, 3));

    let deadline = raft.poll_timeout().unwrap();
    raft.handle_timeout(just_before(deadline));
    assert_eq!(drain(&mut raft), vec![], "no new round before the timeout");

    raft.handle_timeout(deadline);
    let actions = drain(&mut raft);
    let request = |to: usize| send(id(to), request_vote(4, id(1), log));
    assert_eq!(
        actions,
        vec![
            Action::Persist(hard(4, Some(id(1)))),
            request(2),
            request(3),
            election_started(4, false),
        ]
    );
    assert_persist_before_sends(&actions);
    assert_eq!((raft.role(), raft.term()), (Role::Candidate, 4));
}

/// The first action persists, and every send comes after it (RAFT-1).
fn assert_persist_before_sends(actions: &[Action]) {
    let persist = actions
        .iter()
        .position(|a| matches!(a, Action::Persist(_)))
        .expect("the new term and vote are persisted");
    let first_send = actions
        .iter()
        .position(|a| matches!(a, Action::Send { .. }))
        .expect("requests go out");
    assert!(persist < first_send, "{actions:?}");
}

/// Votes a candidate receives: `(peer, granted)`.
type Answers<'a> = &'a [(usize, bool)];

/// RAFT-3, RAFT-6: in one round of `RequestVote`, a candidate wins with votes from a majority
/// of the voters (itself included), returns to follower once a majority refused, and stays
/// candidate while neither is decided. Reference: Raft §5.2.
#[test]
fn leader_election_in_one_round_rpc() {
    let _log = log_to_test_output();
    // (cluster size, answers from n2.., expected role)
    let cases: &[(usize, Answers<'_>, Role)] = &[
        // a majority granted
        (1, &[], Role::Leader),
        (3, &[(2, true), (3, true)], Role::Leader),
        (3, &[(2, true)], Role::Leader),
        (
            5,
            &[(2, true), (3, true), (4, true), (5, true)],
            Role::Leader,
        ),
        (5, &[(2, true), (3, true), (4, true)], Role::Leader),
        (5, &[(2, true), (3, true)], Role::Leader),
        (5, &[(2, false), (3, true), (4, true)], Role::Leader),
        // a majority refused
        (3, &[(2, false), (3, false)], Role::Follower),
        (
            5,
            &[(2, false), (3, false), (4, false), (5, false)],
            Role::Follower,
        ),
        (
            5,
            &[(2, true), (3, false), (4, false), (5, false)],
            Role::Follower,
        ),
        (5, &[(2, false), (3, false), (4, false)], Role::Follower),
        // undecided
        (3, &[], Role::Candidate),
        (3, &[(2, false)], Role::Candidate),
        (5, &[], Role::Candidate),
        (5, &[(2, true)], Role::Candidate),
        (5, &[(2, false), (3, false)], Role::Candidate),
        (5, &[(2, true), (3, false), (4, false)], Role::Candidate),
    ];
    for (i, &(size, answers, want)) in cases.iter().enumerate() {
        let mut raft = node(1, size);
        let at = fire_election_timeout(&mut raft);
        for &(peer, granted) in answers {
            raft.handle_message(at, id(peer), vote(1, granted));
        }
        assert_eq!(raft.role(), want, "#{i}: size {size}, answers {answers:?}");
        assert_eq!(raft.term(), 1, "#{i}: losing does not change the term");
        let leader = (want == Role::Leader).then_some(id(1));
        assert_eq!(raft.leader(), leader, "#{i}");
        assert_eq!(raft.is_leader(), want == Role::Leader, "#{i}");
    }
}

/// RAFT-5: a follower votes for at most one candidate per term, first come first served, and
/// answers a repeated request of the candidate it voted for with the same grant. Reference:
/// Raft §5.2.
#[test]
fn follower_vote() {
    let _log = log_to_test_output();
    let log = LogPosition::new(1, 1);
    // (vote already cast in term 1, candidate asking, granted)
    let cases = [
        (None, 2, true),
        (None, 3, true),
        (Some(2), 2, true),
        (Some(3), 3, true),
        (Some(2), 3, false),
        (Some(3), 2, false),
    ];
    for (voted, candidate, granted) in cases {
        let voted = voted.map(id);
        let mut raft = node_with(paper_config(1, 3), hard(1, voted), log);
        raft.handle_message(
            Instant::ZERO,
            id(candidate),
            request_vote(1, id(candidate), log),
        );
        let mut expected = Vec::new();
        if voted.is_none() {
            expected.push(Action::Persist(hard(1, Some(id(candidate)))));
        }
        expected.push(send(id(candidate), vote(1, granted)));
        expected.push(vote_cast(1, id(candidate), granted, false));
        assert_eq!(
            drain(&mut raft),
            expected,
            "voted {voted:?}, asked by {candidate}"
        );
        assert_eq!(raft.hard_state().vote, voted.or(Some(id(candidate))));
    }

    // The same, as one follower sees it: n2 first, then n3, then n2's request again.
    let mut raft = node(1, 3);
    let t = Instant::from_millis(1);
    let ask = LogPosition::default();
    raft.handle_message(t, id(2), request_vote(1, id(2), ask));
    assert_eq!(
        drain(&mut raft),
        vec![
            Action::Persist(hard(1, Some(id(2)))),
            send(id(2), vote(1, true)),
            vote_cast(1, id(2), true, false),
        ]
    );
    raft.handle_message(t, id(3), request_vote(1, id(3), ask));
    assert_eq!(
        drain(&mut raft),
        vec![
            send(id(3), vote(1, false)),
            vote_cast(1, id(3), false, false)
        ]
    );
    raft.handle_message(t, id(2), request_vote(1, id(2), ask));
    assert_eq!(
        drain(&mut raft),
        vec![send(id(2), vote(1, true)), vote_cast(1, id(2), true, false)]
    );
    assert_eq!(raft.hard_state(), hard(1, Some(id(2))));
}

/// RAFT-3: a candidate that receives `AppendEntries` from a leader whose term is at least its
/// own recognises that leader and returns to follower. Reference: Raft §5.2.
#[test]
fn candidate_fallback() {
    let _log = log_to_test_output();
    for term in [1, 2] {
        let mut raft = node(1, 3);
        let at = fire_election_timeout(&mut raft);
        drain(&mut raft);
        assert_eq!((raft.role(), raft.term()), (Role::Candidate, 1));

        raft.handle_message(at, id(2), heartbeat(term, id(2)));
        let mut expected = Vec::new();
        if term > 1 {
            expected.push(Action::Persist(hard(term, None)));
        }
        expected.extend([
            send(id(2), append_resp(term, true)),
            role_changed(term, Role::Follower),
            leader_changed(
                term,
                Some(id(2)),
                Role::Follower,
                LeaderChangeCause::LeaderHeard,
            ),
        ]);
        assert_eq!(drain(&mut raft), expected, "leader of term {term}");
        assert_eq!(raft.role(), Role::Follower);
        assert_eq!(raft.term(), term);
        assert_eq!(raft.leader(), Some(id(2)));
    }
}

/// RAFT-2: a follower's election timeout is drawn anew each time its timer restarts, uniformly
/// from `[et, 2 * et)`. Reference: Raft §5.2.
#[test]
fn follower_election_timeout_randomized() {
    check_election_timeout_randomized(Role::Follower);
}

/// RAFT-3: a candidate's election timeout is drawn anew for each round, uniformly from
/// `[et, 2 * et)`. Reference: Raft §5.2.
#[test]
fn candidate_election_timeout_randomized() {
    check_election_timeout_randomized(Role::Candidate);
}

/// Restarts the timer of a node in `role` 1,000 times and measures, by behaviour, when it
/// fires: nothing one microsecond before the deadline `poll_timeout` names, an election at it.
/// Every timeout lies in `[ET, 2 * ET)`, nearly all differ, and each tenth of the range is hit.
fn check_election_timeout_randomized(role: Role) {
    let _log = log_to_test_output();
    const ROUNDS: usize = 1000;
    const BUCKETS: usize = 10;
    let mut raft = node(1, 3);
    let mut now = Instant::ZERO;
    if role == Role::Candidate {
        now = fire_election_timeout(&mut raft);
    }
    let mut distinct = BTreeSet::new();
    let mut buckets = [0usize; BUCKETS];
    for _ in 0..ROUNDS {
        if role == Role::Follower {
            // A leader of a new term restarts the follower's timer.
            raft.handle_message(now, id(2), heartbeat(raft.term() + 1, id(2)));
        }
        drain(&mut raft);
        assert_eq!(raft.role(), role);
        let term = raft.term();

        let deadline = raft.poll_timeout().unwrap();
        raft.handle_timeout(just_before(deadline));
        assert_eq!(drain(&mut raft), vec![], "fired before its deadline");
        raft.handle_timeout(deadline);
        assert!(
            drain(&mut raft).iter().any(|a| matches!(
                a,
                Action::Send { message: ElectionMessage::Raft(RaftMessage::RequestVote(r)), .. } if r.term == term + 1
            )),
            "no election at the deadline"
        );

        let timeout = deadline - now;
        assert!((ET..ET * 2).contains(&timeout), "{timeout:?}");
        distinct.insert(timeout);
        buckets[((timeout - ET).as_micros() * BUCKETS as u128 / ET.as_micros()) as usize] += 1;
        now = deadline;
    }
    println!(
        "{role}: {} distinct timeouts in {ROUNDS}, per tenth of [et, 2et): {buckets:?}",
        distinct.len()
    );
    assert!(distinct.len() >= ROUNDS * 9 / 10, "{}", distinct.len());
    // Uniform: about 100 per bucket; 50 is far below anything a uniform draw produces.
    assert!(buckets.iter().all(|&n| n >= 50), "{buckets:?}");
}

/// RAFT-2, RAFT-3: randomized timeouts make split votes rare. In a five-node cluster on a LAN
/// (0.5–5 ms one way, heartbeat 50 ms, election timeout 150–300 ms, no pre-vote as in the
/// paper), over 1,000 rounds of "crash the leader at a random moment, let the others elect,
/// restart it", the first election after the crash fails to produce a leader (more than one
/// candidate in the first term, or no leader of that term) in at most 30% of rounds.
/// Reference: Raft §5.2 (and §9.3, which measured this on a real cluster).
#[test]
fn nonleaders_election_timeout_nonconflict() {
    const ROUNDS: usize = 1000;
    let randomized = split_vote_rate(ET, ET * 2, ROUNDS, 4);
    println!(
        "split-vote rate with timeouts in [150, 300) ms: {}/{ROUNDS} = {:.1}%",
        randomized.0,
        randomized.1 * 100.0
    );
    assert!(
        randomized.1 <= 0.3,
        "split votes in {randomized:?} of rounds"
    );

    // The measurement can see conflicts: without randomization most rounds split.
    const CONTROL_ROUNDS: usize = 100;
    let fixed = split_vote_rate(ET, ET, CONTROL_ROUNDS, 5);
    println!(
        "control, fixed 150 ms timeout: {}/{CONTROL_ROUNDS} = {:.1}%",
        fixed.0,
        fixed.1 * 100.0
    );
    assert!(fixed.1 > 0.3, "control rate {fixed:?}");
}

/// Runs `rounds` crash-and-elect rounds on five simulated nodes and counts the rounds whose
/// first election after the crash did not produce a leader: several candidates in the first
/// new term, or a leader of a later term, or none within ten seconds.
fn split_vote_rate(
    timeout_min: Duration,
    timeout_max: Duration,
    rounds: usize,
    seed: u64,
) -> (usize, f64) {
    const NODES: usize = 5;
    const BOUND: Duration = Duration::from_secs(10);
    let mut config = SimConfig::voters(NODES, HEARTBEAT, timeout_min, timeout_max);
    let raft = config.raft_mut().expect("a raft cluster");
    raft.pre_vote = false;
    raft.check_quorum = false;
    raft.ranked_timeouts = false;
    // The election does not depend on membership in voters mode; without it the run is faster.
    // Without membership's pings nothing keeps a restarted node verified by the others, so
    // admission is off too: this measures the randomized timeouts alone.
    config.membership = None;
    config.admission = AdmissionModel::Off;
    config.network.delay_min = Duration::from_micros(500);
    config.network.delay_max = Duration::from_millis(5);
    let mut sim = Simulation::new(seed, config).unwrap();
    let all: Vec<usize> = (0..NODES).collect();

    let mut failed = 0;
    for round in 0..rounds {
        let deadline = sim.now() + BOUND;
        let agreed = sim
            .run_until_condition(deadline, |s| s.agreed_leader(&all).is_some())
            .unwrap();
        assert!(agreed.is_some(), "round {round}: no leader to start from");

        // Crash the leader anywhere in its heartbeat cycle.
        let delay = sim.rng().below(2 * HEARTBEAT.as_micros() as u64);
        sim.run_for(Duration::from_micros(delay)).unwrap();
        let crashed = match sim.leaders()[..] {
            [leader] => leader,
            ref leaders => panic!("round {round}: leaders {leaders:?} in a healthy cluster"),
        };
        let first_term = sim.raft(crashed).unwrap().term() + 1;
        sim.crash(crashed);
        let survivors: Vec<usize> = all.iter().copied().filter(|&i| i != crashed).collect();

        let mut candidates = BTreeSet::new();
        let deadline = sim.now() + BOUND;
        let elected = sim
            .run_until_condition(deadline, |s| {
                for &i in &survivors {
                    let raft = s.raft(i).unwrap();
                    if raft.role() == Role::Candidate && raft.term() == first_term {
                        candidates.insert(i);
                    }
                }
                s.agreed_leader(&survivors).is_some()
            })
            .unwrap();
        let leader_term = elected
            .and_then(|_| sim.agreed_leader(&survivors))
            .and_then(|leader| sim.raft(leader))
            .map(Raft::term);
        if candidates.len() > 1 || leader_term != Some(first_term) {
            failed += 1;
        }
        sim.restart(crashed);
    }
    (failed, failed as f64 / rounds as f64)
}

// ---------------------------------------------------------------------------------------------
// §5.4.1 election restriction

/// RAFT-5: a voter refuses a candidate whose log is less up to date than its own (a lower last
/// term, or the same last term and a shorter log) and grants one whose log is at least as up to
/// date. Reference: Raft §5.4.1.
#[test]
fn voter() {
    let _log = log_to_test_output();
    let at = LogPosition::new;
    // (voter's last log, candidate's last log, granted)
    let cases = [
        // lower last term, even with a longer log
        (at(2, 5), at(1, 9), false),
        (at(3, 2), at(2, 10), false),
        (at(1, 1), at(0, 0), false),
        // same last term, shorter
        (at(2, 5), at(2, 4), false),
        // same last term, as long or longer
        (at(2, 5), at(2, 5), true),
        (at(2, 5), at(2, 6), true),
        (at(0, 0), at(0, 0), true),
        // higher last term, even with a shorter log
        (at(2, 5), at(3, 1), true),
        (at(0, 0), at(1, 1), true),
    ];
    for (mine, theirs, granted) in cases {
        let mut raft = node_with(paper_config(1, 3), hard(1, None), mine);
        raft.handle_message(Instant::ZERO, id(2), request_vote(4, id(2), theirs));
        let vote_for = granted.then_some(id(2));
        assert_eq!(
            drain(&mut raft),
            vec![
                Action::Persist(hard(4, vote_for)),
                send(id(2), vote(4, granted)),
                vote_cast(4, id(2), granted, false),
            ],
            "voter at {mine:?}, candidate at {theirs:?}"
        );
        assert_eq!(raft.hard_state(), hard(4, vote_for));
    }
}

// ---------------------------------------------------------------------------------------------
// RAFT-7 pre-vote

/// Settings of node `me` of three voters with RAFT-7 on: pre-vote and check-quorum.
fn pre_vote_config(me: usize) -> RaftConfig {
    let mut config = paper_config(me, 3);
    config.pre_vote = true;
    config.check_quorum = true;
    config
}

/// RAFT-7: a pre-vote round changes no term: the pre-candidate asks at term + 1 without
/// persisting anything, keeps its term through a refusal by a majority and through any number
/// of unanswered rounds, and a voter that grants or refuses a pre-vote keeps its term and
/// remains free to vote in that term. Reference: Raft thesis §9.6 (pre-vote), extending §5.2.
#[test]
fn pre_vote_does_not_change_terms() {
    let _log = log_to_test_output();
    let log = LogPosition::new(2, 4);
    let mut pre_candidate = node_with(pre_vote_config(1), hard(2, None), log);
    let at = fire_election_timeout(&mut pre_candidate);
    let ask = |to: usize| send(id(to), pre_vote_request(3, id(1), log));
    assert_eq!(
        drain(&mut pre_candidate),
        vec![
            ask(2),
            ask(3),
            election_started(3, true),
            pre_candidate_changed(2),
        ]
    );
    assert_eq!(pre_candidate.phase(), "pre_candidate");
    assert_eq!(pre_candidate.hard_state(), hard(2, None));

    // A voter with the same log grants, one with a longer log refuses; neither changes term.
    let mut granting = node_with(pre_vote_config(2), hard(2, None), log);
    granting.handle_message(at, id(1), pre_vote_request(3, id(1), log));
    assert_eq!(
        drain(&mut granting),
        vec![
            send(id(1), pre_vote(3, true)),
            vote_cast(3, id(1), true, true)
        ]
    );
    assert_eq!(
        (granting.role(), granting.hard_state()),
        (Role::Follower, hard(2, None))
    );
    let mut refusing = node_with(pre_vote_config(3), hard(2, None), LogPosition::new(2, 5));
    refusing.handle_message(at, id(1), pre_vote_request(3, id(1), log));
    assert_eq!(
        drain(&mut refusing),
        vec![
            send(id(1), pre_vote(2, false)),
            vote_cast(3, id(1), false, true)
        ]
    );
    assert_eq!(refusing.hard_state(), hard(2, None));

    // Having granted a pre-vote, the voter still has its real vote of term 3 to give.
    granting.handle_message(at, id(3), request_vote(3, id(3), log));
    assert_eq!(
        drain(&mut granting),
        vec![
            Action::Persist(hard(3, Some(id(3)))),
            send(id(3), vote(3, true)),
            vote_cast(3, id(3), true, false),
        ]
    );

    // Refused by a majority: back to follower, same term, nothing persisted.
    pre_candidate.handle_message(at, id(3), pre_vote(2, false));
    assert_eq!(drain(&mut pre_candidate), vec![]);
    pre_candidate.handle_message(at, id(2), pre_vote(2, false));
    assert_eq!(
        drain(&mut pre_candidate),
        vec![role_changed(2, Role::Follower)]
    );
    assert_eq!(
        (pre_candidate.role(), pre_candidate.hard_state()),
        (Role::Follower, hard(2, None))
    );

    // Cut off from everyone, it keeps asking at term 3 and never raises its own term.
    for _ in 0..20 {
        fire_election_timeout(&mut pre_candidate);
        let actions = drain(&mut pre_candidate);
        assert!(
            !actions.iter().any(|a| matches!(a, Action::Persist(_))),
            "{actions:?}"
        );
        assert!(actions.contains(&ask(2)) && actions.contains(&ask(3)));
        assert_eq!(pre_candidate.hard_state(), hard(2, None));
    }
}

/// RAFT-7, RAFT-3: pre-votes granted by a majority lead to a real campaign at term + 1: the
/// new term and the vote for itself are persisted, then real `RequestVote`s go out, and real
/// votes of that term make it leader. Reference: Raft thesis §9.6, §5.2.
#[test]
fn pre_vote_majority_starts_real_campaign() {
    let _log = log_to_test_output();
    let log = LogPosition::new(2, 4);
    let mut raft = node_with(pre_vote_config(1), hard(2, None), log);
    let at = fire_election_timeout(&mut raft);
    drain(&mut raft);
    assert_eq!(raft.phase(), "pre_candidate");

    raft.handle_message(at, id(2), pre_vote(3, true));
    let actions = drain(&mut raft);
    let request = |to: usize| send(id(to), request_vote(3, id(1), log));
    assert_eq!(
        actions,
        vec![
            Action::Persist(hard(3, Some(id(1)))),
            request(2),
            request(3),
            election_started(3, false),
            role_changed(3, Role::Candidate),
        ]
    );
    assert_persist_before_sends(&actions);

    // A late pre-vote grant does not count as a real vote.
    raft.handle_message(at, id(3), pre_vote(3, true));
    assert_eq!(drain(&mut raft), vec![]);
    assert_eq!(raft.role(), Role::Candidate);

    raft.handle_message(at, id(3), vote(3, true));
    assert_eq!(raft.role(), Role::Leader);
    assert_eq!(raft.term(), 3);
    assert_eq!(raft.leader(), Some(id(1)));
}
