//! Unit tests of the gossip election: each fires one input and compares the drained actions
//! exactly. Fabric's whole-cluster scenarios are in `tests/gossip_scenarios.rs`.
//!
//! Timings are Fabric's defaults: start-up samples every 1 s with a 15 s grace period, an
//! election lasts 5 s, the alive threshold is 10 s and a leader declares every 5 s.

use std::time::Duration;

use conclave_protocol::{Declaration, Proposal};

use crate::election::{
    Action, Command, CommandOutcome, ElectionError, ElectionMessage, Event, FencingToken,
    GossipMessage, GossipSetting, HardState, HealthReading, LeaderChangeCause, Mode, PeerSignal,
    Role, Setting,
};
use crate::gossip::{Gossip, GossipConfig};
use crate::rng::SeededRng;
use crate::testing::{drain, id};
use crate::time::Instant;

fn secs(s: u64) -> Instant {
    Instant::from_millis(s * 1000)
}

fn start(me: &str) -> Gossip {
    start_with(GossipConfig::new(id(me)), HardState::default())
}

fn start_with(config: GossipConfig, restored: HardState) -> Gossip {
    Gossip::new(config, restored, SeededRng::new(1), secs(0)).unwrap()
}

/// Connects `peers` at time 0 and drains.
fn connect(gossip: &mut Gossip, peers: &[&str]) {
    for peer in peers {
        gossip.handle_peer_status(secs(0), id(peer), true);
    }
    drain(gossip);
}

/// Fires every deadline up to and including `until`; returns everything drained.
fn run_until(gossip: &mut Gossip, until: Instant) -> Vec<Action> {
    let mut actions = Vec::new();
    while let Some(at) = gossip.poll_timeout().filter(|at| *at <= until) {
        gossip.handle_timeout(at);
        actions.extend(drain(gossip));
    }
    actions
}

fn declaration(epoch: u64) -> GossipMessage {
    GossipMessage::Declaration(Declaration { epoch })
}

fn proposal(epoch: u64, leader: Option<&str>) -> GossipMessage {
    GossipMessage::Proposal(Proposal {
        epoch,
        leader: leader.map(id),
    })
}

fn broadcast(message: GossipMessage) -> Action {
    Action::Broadcast {
        message: ElectionMessage::Gossip(message),
    }
}

fn send(to: &str, message: GossipMessage) -> Action {
    Action::Send {
        to: id(to),
        message: ElectionMessage::Gossip(message),
    }
}

fn hard(term: u64, vote: &str) -> HardState {
    HardState {
        term,
        vote: Some(id(vote)),
        manual_override: None,
    }
}

fn role_changed(term: u64, role: Role, phase: &'static str) -> Action {
    Action::Publish(Event::RoleChanged { term, role, phase })
}

fn leader_changed(term: u64, leader: Option<&str>, role: Role, cause: LeaderChangeCause) -> Action {
    Action::Publish(Event::LeaderChanged {
        term,
        leader: leader.map(id),
        role,
        cause,
    })
}

/// Node `a` with peers `b` and `c`, leader of epoch 1 at 7 s: the view is filled at 0, found
/// stable at the second sample (2 s), and the election it starts then ends at 7 s.
fn leader_a() -> Gossip {
    let mut a = start("a");
    connect(&mut a, &["b", "c"]);
    run_until(&mut a, secs(7));
    assert_eq!(a.role(), Role::Leader);
    assert_eq!(a.term(), 1);
    a
}

/// Node `b` with peers `a` and `c`, following `leader` at `epoch` since 3 s (during start-up).
fn follower_b(leader: &str, epoch: u64) -> Gossip {
    let mut b = start("b");
    connect(&mut b, &["a", "c"]);
    b.handle_message(secs(3), id(leader), declaration(epoch));
    drain(&mut b);
    assert_eq!(b.leader(), Some(id(leader)));
    b
}

// ---------------------------------------------------------------------------------------------
// GOS-1: start-up

/// GOS-1: a new node queues nothing; it samples the view every `membership_sample_interval`
/// and proposes once two samples in a row saw the same peers.
#[test]
fn gos1_start_waits_for_a_stable_view() {
    let mut a = start("a");
    assert_eq!(drain(&mut a), vec![]);
    assert_eq!(a.poll_timeout(), Some(secs(1)));
    assert_eq!(a.phase(), "starting");
    connect(&mut a, &["b"]);

    // At 1 s the view differs from the empty view at start: not stable yet.
    a.handle_timeout(secs(1));
    assert_eq!(drain(&mut a), vec![]);
    assert_eq!(a.poll_timeout(), Some(secs(2)));

    // At 2 s it is the same as at 1 s: propose.
    a.handle_timeout(secs(2));
    assert_eq!(
        drain(&mut a),
        vec![
            broadcast(proposal(0, None)),
            Action::Publish(Event::ElectionStarted {
                term: 1,
                phase: "proposal"
            }),
            role_changed(0, Role::Candidate, "proposing"),
        ]
    );
    assert_eq!(a.poll_timeout(), Some(secs(7)));
}

/// GOS-1: a view that keeps changing is waited for until `startup_grace_period`, then the node
/// proposes anyway.
#[test]
fn gos1_grace_period_ends_a_changing_view() {
    let mut a = start("a");
    let mut actions = Vec::new();
    for s in 1..15 {
        // A new peer appears just before every sample.
        a.handle_peer_status(secs(s), id(&format!("p{s}")), true);
        actions.extend(drain(&mut a));
        assert_eq!(a.poll_timeout(), Some(secs(s)));
        a.handle_timeout(secs(s));
        actions.extend(drain(&mut a));
    }
    assert_eq!(actions, vec![]);
    assert_eq!(a.poll_timeout(), Some(secs(15)));
    a.handle_timeout(secs(15));
    assert_eq!(drain(&mut a)[0], broadcast(proposal(0, None)));
    assert_eq!(a.role(), Role::Candidate);
}

/// GOS-1: a declaration ends the start-up wait at once; the node follows its sender and
/// persists the epoch before it publishes the new leader.
#[test]
fn gos1_declaration_ends_the_start_up() {
    let mut b = start("b");
    connect(&mut b, &["a"]);
    b.handle_message(Instant::from_millis(500), id("a"), declaration(3));
    assert_eq!(
        drain(&mut b),
        vec![
            Action::Persist(hard(3, "a")),
            role_changed(3, Role::Follower, "following"),
            leader_changed(3, Some("a"), Role::Follower, LeaderChangeCause::LeaderHeard),
        ]
    );
    assert_eq!(b.poll_timeout(), Some(Instant::from_millis(10_500)));
    assert_eq!(
        b.fencing_token(),
        Some(FencingToken {
            term: 3,
            leader: id("a")
        })
    );
}

// ---------------------------------------------------------------------------------------------
// GOS-2: elections

/// GOS-2: with no proposal from a lower id and no declaration within
/// `leader_election_duration`, the proposer takes epoch 1, persists it, then declares.
#[test]
fn gos2_proposer_declares_itself_after_the_election_duration() {
    let mut a = start("a");
    connect(&mut a, &["b", "c"]);
    run_until(&mut a, secs(2));
    // A proposal of a higher id changes nothing.
    a.handle_message(secs(3), id("c"), proposal(0, None));
    assert_eq!(drain(&mut a), vec![]);
    a.handle_timeout(secs(7));
    assert_eq!(
        drain(&mut a),
        vec![
            Action::Persist(hard(1, "a")),
            broadcast(declaration(1)),
            Action::Publish(Event::ElectionWon {
                term: 1,
                duration: Duration::from_secs(7)
            }),
            role_changed(1, Role::Leader, "leading"),
            leader_changed(1, Some("a"), Role::Leader, LeaderChangeCause::VoteWon),
        ]
    );
    assert_eq!(a.poll_timeout(), Some(secs(12)));
}

/// GOS-2: a proposal from a lower id makes the proposer wait as a follower without a leader
/// for the alive threshold, for the lower id's declaration.
#[test]
fn gos2_lower_id_proposal_makes_the_proposer_wait() {
    let mut b = start("b");
    connect(&mut b, &["a", "c"]);
    run_until(&mut b, secs(2));
    b.handle_message(secs(3), id("a"), proposal(0, None));
    assert_eq!(drain(&mut b), vec![]);
    b.handle_timeout(secs(7));
    assert_eq!(
        drain(&mut b),
        vec![role_changed(0, Role::Follower, "leaderless")]
    );
    assert_eq!(b.leader(), None);
    assert_eq!(b.poll_timeout(), Some(secs(17)));
    // The lower id declares: follow it.
    b.handle_message(secs(8), id("a"), declaration(1));
    assert_eq!(
        drain(&mut b),
        vec![
            Action::Persist(hard(1, "a")),
            role_changed(1, Role::Follower, "following"),
            leader_changed(1, Some("a"), Role::Follower, LeaderChangeCause::LeaderHeard),
        ]
    );
}

/// GOS-2: a proposal collected while starting counts against the election that follows, but
/// one older than an election duration before the election started does not (the proposer
/// would have declared by then).
#[test]
fn gos2_only_recent_lower_proposals_count() {
    // Heard at 1 s, election from 2 s to 7 s: counts.
    let mut b = start("b");
    connect(&mut b, &["a"]);
    b.handle_message(secs(1), id("a"), proposal(0, None));
    run_until(&mut b, secs(7));
    assert_eq!(b.role(), Role::Follower);

    // Heard at 1 s, but the view keeps changing until 7 s, so the election runs from 8 s to
    // 13 s: 1 s is more than 5 s before 8 s, so it no longer counts.
    let mut b = start("b");
    b.handle_peer_status(secs(0), id("a"), true);
    b.handle_message(secs(1), id("a"), proposal(0, None));
    for s in 1..8 {
        b.handle_peer_status(secs(s), id(&format!("p{s}")), true);
        b.handle_timeout(secs(s));
    }
    drain(&mut b);
    assert_eq!(b.phase(), "starting");
    run_until(&mut b, secs(8));
    assert_eq!(b.role(), Role::Candidate);
    run_until(&mut b, secs(12));
    assert_eq!(b.role(), Role::Candidate);
    run_until(&mut b, secs(13));
    assert_eq!(b.role(), Role::Leader);
}

/// GOS-2: a declaration ends an election at once; the proposer follows.
#[test]
fn gos2_declaration_stops_an_election() {
    let mut a = start("a");
    connect(&mut a, &["b"]);
    run_until(&mut a, secs(2));
    a.handle_message(secs(4), id("b"), declaration(2));
    assert_eq!(
        drain(&mut a),
        vec![
            Action::Persist(hard(2, "b")),
            role_changed(2, Role::Follower, "following"),
            leader_changed(2, Some("b"), Role::Follower, LeaderChangeCause::LeaderHeard),
        ]
    );
    // No declaration at the old election deadline.
    assert_eq!(run_until(&mut a, secs(13)), vec![]);
}

// ---------------------------------------------------------------------------------------------
// GOS-3: leaders and followers

/// GOS-3: a leader declares every half alive threshold, and nothing else.
#[test]
fn gos3_leader_declares_every_half_threshold() {
    let mut a = leader_a();
    assert_eq!(a.poll_timeout(), Some(secs(12)));
    assert_eq!(
        run_until(&mut a, secs(17)),
        vec![broadcast(declaration(1)), broadcast(declaration(1))]
    );
    assert_eq!(a.poll_timeout(), Some(secs(22)));
}

/// GOS-3: a leader that hears a lower id declare a later epoch reports the split brain, steps
/// down and follows it.
#[test]
fn gos3_leader_steps_down_for_a_lower_id() {
    let mut b = start("b");
    connect(&mut b, &["a", "c"]);
    run_until(&mut b, secs(7));
    assert_eq!(b.role(), Role::Leader);
    b.handle_message(secs(8), id("a"), declaration(2));
    assert_eq!(
        drain(&mut b),
        vec![
            Action::Persist(hard(2, "a")),
            Action::Publish(Event::SplitBrain {
                term: 1,
                known: id("b"),
                other: id("a")
            }),
            role_changed(2, Role::Follower, "following"),
            leader_changed(2, Some("a"), Role::Follower, LeaderChangeCause::TieBreak),
        ]
    );
}

/// GOS-3, CB-5: a leader that steps down for a lower id whose epoch is not above its own does
/// not follow it (the token would go back) and asks it for a newer epoch; when it comes, it
/// follows.
#[test]
fn gos3_stepping_down_to_an_older_epoch_asks_for_a_newer_one() {
    let mut b = start_with(GossipConfig::new(id("b")), hard(4, "x"));
    connect(&mut b, &["a", "c"]);
    run_until(&mut b, secs(7));
    assert_eq!(b.term(), 5);
    b.handle_message(secs(8), id("a"), declaration(2));
    assert_eq!(
        drain(&mut b),
        vec![
            send("a", proposal(5, Some("b"))),
            Action::Publish(Event::SplitBrain {
                term: 5,
                known: id("b"),
                other: id("a")
            }),
            role_changed(5, Role::Follower, "leaderless"),
            leader_changed(5, None, Role::Follower, LeaderChangeCause::TieBreak),
        ]
    );
    b.handle_message(secs(8), id("a"), declaration(6));
    assert_eq!(
        drain(&mut b),
        vec![
            Action::Persist(hard(6, "a")),
            role_changed(6, Role::Follower, "following"),
            leader_changed(6, Some("a"), Role::Follower, LeaderChangeCause::LeaderHeard),
        ]
    );
}

/// GOS-6, CB-5: a leader that hears a higher-id rival at its own epoch or later takes a new
/// epoch above it, so the rival's followers can follow it once the rival steps down.
#[test]
fn gos3_leader_takes_a_new_epoch_over_a_rival() {
    let mut a = leader_a();
    a.handle_message(secs(8), id("c"), declaration(1));
    assert_eq!(
        drain(&mut a),
        vec![
            Action::Persist(hard(2, "a")),
            broadcast(declaration(2)),
            Action::Publish(Event::SplitBrain {
                term: 1,
                known: id("a"),
                other: id("c")
            }),
            leader_changed(2, Some("a"), Role::Leader, LeaderChangeCause::TieBreak),
        ]
    );
    assert_eq!(a.poll_timeout(), Some(secs(13)));
}

/// GOS-3: a leader that hears a higher-id rival of an older epoch declares again at once (as
/// Fabric's leader, woken by any declaration, does), reporting the rival only once.
#[test]
fn gos3_leader_answers_an_older_rival_at_once() {
    let mut a = start_with(GossipConfig::new(id("a")), hard(2, "a"));
    connect(&mut a, &["b", "c"]);
    run_until(&mut a, secs(7));
    assert_eq!(a.term(), 3);
    a.handle_message(secs(8), id("c"), declaration(1));
    assert_eq!(
        drain(&mut a),
        vec![
            broadcast(declaration(3)),
            Action::Publish(Event::SplitBrain {
                term: 3,
                known: id("a"),
                other: id("c")
            }),
        ]
    );
    a.handle_message(secs(9), id("c"), declaration(1));
    assert_eq!(drain(&mut a), vec![broadcast(declaration(3))]);
}

/// GOS-3: a follower that hears no declaration of its leader for the alive threshold gives it
/// up and proposes at once; each declaration restarts the threshold.
#[test]
fn gos3_follower_gives_up_a_silent_leader() {
    let mut b = follower_b("a", 1);
    assert_eq!(b.poll_timeout(), Some(secs(13)));
    b.handle_message(secs(8), id("a"), declaration(1));
    assert_eq!(drain(&mut b), vec![]);
    assert_eq!(b.poll_timeout(), Some(secs(18)));
    b.handle_timeout(secs(18));
    assert_eq!(
        drain(&mut b),
        vec![
            broadcast(proposal(1, Some("a"))),
            Action::Publish(Event::ElectionStarted {
                term: 2,
                phase: "proposal"
            }),
            role_changed(1, Role::Candidate, "proposing"),
            leader_changed(1, None, Role::Candidate, LeaderChangeCause::ElectionTimeout),
        ]
    );
}

/// GOS-3: a reordered or duplicated old declaration of the leader followed now changes
/// nothing, and does not keep the leader alive.
#[test]
fn gos3_old_declaration_of_the_leader_is_ignored() {
    let mut b = follower_b("a", 2);
    b.handle_message(secs(8), id("a"), declaration(1));
    assert_eq!(drain(&mut b), vec![]);
    assert_eq!(b.term(), 2);
    assert_eq!(b.poll_timeout(), Some(secs(13)));
}

/// GOS-6, CB-5: a node without a leader does not follow another leader at its own epoch (two
/// leaders of one epoch after a partition); it asks that leader for a newer epoch.
#[test]
fn gos3_another_leader_of_the_same_epoch_is_asked_for_a_newer_one() {
    let mut b = follower_b("a", 2);
    run_until(&mut b, secs(13));
    assert_eq!(b.leader(), None);
    b.handle_message(secs(14), id("c"), declaration(2));
    assert_eq!(
        drain(&mut b),
        vec![
            send("c", proposal(2, Some("a"))),
            role_changed(2, Role::Follower, "leaderless"),
        ]
    );
    // While it follows a leader, a stale declaration of another is only ignored.
    let mut b = follower_b("a", 2);
    b.handle_message(secs(4), id("c"), declaration(2));
    assert_eq!(drain(&mut b), vec![]);
    assert_eq!(b.leader(), Some(id("a")));
}

/// GOS-3: a leader answers a proposal of an older epoch with its declaration, to the proposer
/// alone, at once; and one of its own epoch naming itself too.
#[test]
fn gos3_leader_answers_a_proposal_with_its_declaration() {
    let mut a = leader_a();
    a.handle_message(secs(8), id("c"), proposal(0, None));
    assert_eq!(drain(&mut a), vec![send("c", declaration(1))]);
    a.handle_message(secs(8), id("b"), proposal(1, Some("a")));
    assert_eq!(drain(&mut a), vec![send("b", declaration(1))]);
    assert_eq!(a.term(), 1);
}

/// CB-5: a leader that receives a proposal of a later epoch, or of its own epoch naming another
/// leader, takes an epoch above it and declares it to everyone.
#[test]
fn cb5_leader_renews_its_epoch_above_a_proposer() {
    let mut a = leader_a();
    a.handle_message(secs(8), id("c"), proposal(5, Some("c")));
    assert_eq!(
        drain(&mut a),
        vec![
            Action::Persist(hard(6, "a")),
            broadcast(declaration(6)),
            leader_changed(6, Some("a"), Role::Leader, LeaderChangeCause::HigherTerm),
        ]
    );
    a.handle_message(secs(9), id("b"), proposal(6, Some("c")));
    assert_eq!(
        drain(&mut a),
        vec![
            Action::Persist(hard(7, "a")),
            broadcast(declaration(7)),
            leader_changed(7, Some("a"), Role::Leader, LeaderChangeCause::HigherTerm),
        ]
    );
}

/// CB-5: a new leader's epoch is above every epoch it has seen, not only its own.
#[test]
fn cb5_new_epoch_is_above_every_epoch_seen() {
    let mut a = start("a");
    connect(&mut a, &["b", "c"]);
    run_until(&mut a, secs(2));
    // A higher id proposes with epoch 8: it does not stop `a`, but `a` will lead above it.
    a.handle_message(secs(3), id("c"), proposal(8, Some("c")));
    let actions = run_until(&mut a, secs(7));
    assert_eq!(actions[0], Action::Persist(hard(9, "a")));
    assert_eq!(actions[1], broadcast(declaration(9)));
    assert_eq!(a.status().highest_epoch_seen, 9);
}

/// CB-5: the epoch survives a restart; a restarted follower follows the same leader and epoch
/// again without persisting anything, and a restarted node leads above its old epoch.
#[test]
fn cb5_epoch_survives_a_restart() {
    let mut b = start_with(GossipConfig::new(id("b")), hard(3, "a"));
    connect(&mut b, &["a"]);
    b.handle_message(secs(1), id("a"), declaration(3));
    assert_eq!(
        drain(&mut b),
        vec![
            role_changed(3, Role::Follower, "following"),
            leader_changed(3, Some("a"), Role::Follower, LeaderChangeCause::LeaderHeard),
        ]
    );

    let mut a = start_with(GossipConfig::new(id("a")), hard(3, "a"));
    connect(&mut a, &["b"]);
    let actions = run_until(&mut a, secs(7));
    assert_eq!(actions[0], broadcast(proposal(3, Some("a"))));
    assert!(actions.contains(&Action::Persist(hard(4, "a"))));
    assert_eq!(a.term(), 4);
}

/// GOS-3: a leader tells a peer that joins its view who leads, without waiting for the next
/// round.
#[test]
fn gos3_leader_declares_to_a_newcomer() {
    let mut a = leader_a();
    a.handle_peer_status(secs(8), id("d"), true);
    assert_eq!(drain(&mut a), vec![send("d", declaration(1))]);
    // A peer already in the view gets nothing more.
    a.handle_peer_status(secs(8), id("d"), true);
    assert_eq!(drain(&mut a), vec![]);
}

// ---------------------------------------------------------------------------------------------
// GOS-4: yield and the membership view

/// GOS-3: a proposer sends its proposal to a peer that joins its view during the election, so
/// that a leader whose declarations it could not hear before answers it.
#[test]
fn gos3_proposer_proposes_to_a_newcomer() {
    let mut b = start("b");
    connect(&mut b, &["c"]);
    run_until(&mut b, secs(2));
    assert_eq!(b.role(), Role::Candidate);
    b.handle_peer_status(secs(3), id("a"), true);
    assert_eq!(drain(&mut b), vec![send("a", proposal(0, None))]);
    b.handle_message(secs(3), id("a"), declaration(4));
    assert_eq!(b.leader(), Some(id("a")));
}

/// GOS-4: messages from a peer outside the membership view are ignored and counted, and a
/// peer that leaves the view takes its proposal with it.
#[test]
fn gos4_messages_from_outside_the_view_are_ignored() {
    let mut b = start("b");
    connect(&mut b, &["c"]);
    b.handle_message(secs(1), id("a"), declaration(1));
    b.handle_message(secs(1), id("a"), proposal(0, None));
    assert_eq!(drain(&mut b), vec![]);
    assert_eq!(b.status().ignored_outside_view, 2);
    assert_eq!(b.leader(), None);

    // A proposal of `a` while in the view, then `a` leaves: it no longer counts.
    b.handle_peer_status(secs(1), id("a"), true);
    b.handle_message(secs(1), id("a"), proposal(0, None));
    b.handle_peer_status(secs(1), id("a"), false);
    drain(&mut b);
    run_until(&mut b, secs(15));
    assert_eq!(b.role(), Role::Leader);
}

/// GOS-4: `Resign` is Fabric's `Yield`: the leader steps down once (a second yield is refused
/// and publishes nothing), proposes nothing while yielding, and proposes again when the yield
/// period (six alive thresholds) ends.
#[test]
fn gos4_yield_steps_down_once_and_keeps_out() {
    let mut a = leader_a();
    assert_eq!(
        a.handle_command(secs(8), Command::Resign),
        Ok(CommandOutcome::SteppedDown)
    );
    assert_eq!(
        drain(&mut a),
        vec![
            role_changed(1, Role::Follower, "yielding"),
            leader_changed(1, None, Role::Follower, LeaderChangeCause::Yield),
        ]
    );
    assert_eq!(
        a.handle_command(secs(8), Command::Resign),
        Err(ElectionError::NotLeader { leader: None })
    );
    assert_eq!(drain(&mut a), vec![]);
    assert!(a.status().yielding);

    // Alive thresholds pass without a leader: still no proposal.
    assert_eq!(run_until(&mut a, secs(67)), vec![]);
    // The yield period ends at 68 s: propose (and, alone, lead again).
    assert_eq!(a.poll_timeout(), Some(secs(68)));
    a.handle_timeout(secs(68));
    assert_eq!(drain(&mut a)[0], broadcast(proposal(1, Some("a"))));
    run_until(&mut a, secs(73));
    assert_eq!(a.role(), Role::Leader);
    assert_eq!(a.term(), 2);
}

/// GOS-4: a yield ends when another leader declares itself; the old leader follows it and does
/// not take leadership back.
#[test]
fn gos4_yield_ends_when_another_leader_declares() {
    let mut a = leader_a();
    a.handle_command(secs(8), Command::Resign).unwrap();
    drain(&mut a);
    a.handle_message(secs(20), id("b"), declaration(2));
    assert_eq!(
        drain(&mut a),
        vec![
            Action::Persist(hard(2, "b")),
            role_changed(2, Role::Follower, "following"),
            leader_changed(2, Some("b"), Role::Follower, LeaderChangeCause::LeaderHeard),
        ]
    );
    assert!(!a.status().yielding);
    // `b` keeps declaring: `a` never proposes although its id is lower.
    let mut actions = Vec::new();
    for s in (25..200).step_by(5) {
        a.handle_message(secs(s), id("b"), declaration(2));
        actions.extend(run_until(&mut a, secs(s)));
    }
    assert_eq!(actions, vec![]);
    assert_eq!(a.leader(), Some(id("b")));
}

/// GOS-4: only a leader yields.
#[test]
fn gos4_follower_cannot_yield() {
    let mut b = follower_b("a", 1);
    assert_eq!(
        b.handle_command(secs(4), Command::Resign),
        Err(ElectionError::NotLeader {
            leader: Some(id("a"))
        })
    );
    assert_eq!(drain(&mut b), vec![]);
}

// ---------------------------------------------------------------------------------------------
// GOS-5: static leadership

/// GOS-5: with `use_leader_election = false` and `org_leader = true` the node leads at its
/// first deadline (its construction time), with cause `configured`, and declares periodically.
#[test]
fn gos5_static_org_leader_leads_at_once() {
    let mut a = start_with(GossipConfig::static_leadership(id("a"), true), hard(4, "a"));
    assert_eq!(drain(&mut a), vec![]);
    assert_eq!(a.poll_timeout(), Some(secs(0)));
    a.handle_timeout(secs(0));
    assert_eq!(
        drain(&mut a),
        vec![
            Action::Persist(hard(5, "a")),
            broadcast(declaration(5)),
            role_changed(5, Role::Leader, "leading"),
            leader_changed(5, Some("a"), Role::Leader, LeaderChangeCause::Configured),
        ]
    );
    assert_eq!(run_until(&mut a, secs(5)), vec![broadcast(declaration(5))]);
}

/// GOS-5: a static leader does not contest another leader (it reports it once) and cannot
/// yield.
#[test]
fn gos5_static_leader_neither_contests_nor_yields() {
    let mut b = start_with(
        GossipConfig::static_leadership(id("b"), true),
        HardState::default(),
    );
    connect(&mut b, &["a"]);
    run_until(&mut b, secs(0));
    b.handle_message(secs(1), id("a"), declaration(7));
    assert_eq!(
        drain(&mut b),
        vec![Action::Publish(Event::SplitBrain {
            term: 1,
            known: id("b"),
            other: id("a")
        })]
    );
    b.handle_message(secs(2), id("a"), declaration(7));
    assert_eq!(drain(&mut b), vec![]);
    assert_eq!(b.role(), Role::Leader);
    assert!(matches!(
        b.handle_command(secs(3), Command::Resign),
        Err(ElectionError::OrgLeaderCannotResign { leader }) if leader == id("b")
    ));
    assert_eq!(b.role(), Role::Leader);
}

/// GOS-5: a static follower never proposes; it follows the org leader's declarations and
/// reports the leader lost after the alive threshold.
#[test]
fn gos5_static_follower_follows_and_never_proposes() {
    let mut b = start_with(
        GossipConfig::static_leadership(id("b"), false),
        HardState::default(),
    );
    connect(&mut b, &["a"]);
    assert_eq!(
        run_until(&mut b, secs(30)),
        vec![role_changed(0, Role::Follower, "leaderless")]
    );
    b.handle_message(secs(31), id("a"), declaration(1));
    assert_eq!(
        drain(&mut b),
        vec![
            Action::Persist(hard(1, "a")),
            role_changed(1, Role::Follower, "following"),
            leader_changed(1, Some("a"), Role::Follower, LeaderChangeCause::LeaderHeard),
        ]
    );
    assert_eq!(
        run_until(&mut b, secs(100)),
        vec![
            role_changed(1, Role::Follower, "leaderless"),
            leader_changed(1, None, Role::Follower, LeaderChangeCause::ElectionTimeout),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// commands, shutdown, quarantine, inputs of other modes

/// `SetLeader` is refused with an error naming the mode and what to use instead; automatic
/// election off is persisted and stops proposals (a leader keeps leading).
#[test]
fn commands_set_leader_refused_and_auto_election_switch() {
    let mut a = start("a");
    let Err(ElectionError::NotOffered {
        mode: Mode::Gossip,
        reason,
    }) = a.handle_command(secs(0), Command::SetLeader(id("b")))
    else {
        panic!("SetLeader must be refused");
    };
    assert!(reason.contains("election.mode = gossip"), "{reason}");
    assert!(reason.contains("leader resign"), "{reason}");
    assert_eq!(drain(&mut a), vec![]);

    assert_eq!(
        a.handle_command(secs(0), Command::EnableAutoElection(false)),
        Ok(CommandOutcome::Applied)
    );
    assert_eq!(drain(&mut a), vec![Action::PersistAutoElection(false)]);
    connect(&mut a, &["b"]);
    assert_eq!(
        run_until(&mut a, secs(60)),
        vec![role_changed(0, Role::Follower, "leaderless")]
    );
    a.handle_command(secs(60), Command::EnableAutoElection(true))
        .unwrap();
    assert_eq!(drain(&mut a), vec![Action::PersistAutoElection(true)]);
    run_until(&mut a, secs(80));
    assert_eq!(a.role(), Role::Leader);
    assert!(a.status().auto_election);
}

/// Shutdown: a leader yields before stopping (cause `shutdown`), and the machine does nothing
/// more afterwards.
#[test]
fn shutdown_of_a_leader_publishes_that_it_no_longer_leads() {
    let mut a = leader_a();
    a.handle_shutdown(secs(8));
    assert_eq!(
        drain(&mut a),
        vec![
            role_changed(1, Role::Follower, "stopped"),
            leader_changed(1, None, Role::Follower, LeaderChangeCause::Shutdown),
            Action::Stopped,
        ]
    );
    assert_eq!(a.poll_timeout(), None);
    a.handle_message(secs(9), id("b"), proposal(0, None));
    a.handle_timeout(secs(20));
    a.handle_peer_status(secs(20), id("e"), true);
    assert_eq!(drain(&mut a), vec![]);

    // A follower stopping publishes no leader change.
    let mut b = follower_b("a", 1);
    b.handle_shutdown(secs(4));
    assert_eq!(
        drain(&mut b),
        vec![role_changed(1, Role::Follower, "stopped"), Action::Stopped]
    );
}

/// MEM-3: a node whose id is refused as a duplicate leaves the election for good.
#[test]
fn quarantined_node_takes_no_part() {
    let mut a = leader_a();
    a.handle_id_refused(secs(8));
    assert_eq!(
        drain(&mut a),
        vec![
            role_changed(1, Role::Follower, "quarantined"),
            leader_changed(1, None, Role::Follower, LeaderChangeCause::Quarantined),
        ]
    );
    assert_eq!(a.poll_timeout(), None);
    assert!(a.status().quarantined);
    a.handle_message(secs(9), id("b"), declaration(5));
    assert_eq!(drain(&mut a), vec![]);
    assert_eq!(
        a.handle_command(secs(9), Command::Resign),
        Err(ElectionError::Quarantined)
    );
}

/// Signal strength and health readings are inputs of other modes; gossip ignores them.
#[test]
fn inputs_of_other_modes_change_nothing() {
    let mut a = leader_a();
    a.handle_peer_signal(
        secs(8),
        PeerSignal {
            peer: id("b"),
            rssi_dbm: -40.0,
        },
    );
    a.handle_health(
        secs(8),
        HealthReading {
            battery_percent: 3,
            priority: None,
        },
    );
    assert_eq!(drain(&mut a), vec![]);
    assert_eq!(a.poll_timeout(), Some(secs(12)));
}

/// The status reports the mode's own detail.
#[test]
fn status_reports_the_gossip_detail() {
    let a = leader_a();
    let status = a.status();
    assert_eq!(status.id, id("a"));
    assert_eq!(status.role, Role::Leader);
    assert_eq!(status.phase, "leading");
    assert_eq!(status.term, 1);
    assert_eq!(status.leader, Some(id("a")));
    assert_eq!(
        status.fencing_token,
        Some(FencingToken {
            term: 1,
            leader: id("a")
        })
    );
    assert_eq!(status.view_size, 2);
    assert!(status.use_leader_election && !status.org_leader && !status.yielding);
}

/// Invalid settings are refused at construction.
#[test]
fn invalid_config_is_refused() {
    let mut config = GossipConfig::new(id("a"));
    config.org_leader = true;
    let Err(ElectionError::InvalidConfig(problems)) =
        Gossip::new(config, HardState::default(), SeededRng::new(1), secs(0))
    else {
        panic!("org_leader with use_leader_election must be refused");
    };
    let settings: Vec<_> = problems.iter().map(|problem| problem.setting).collect();
    assert_eq!(settings, [Setting::Gossip(GossipSetting::OrgLeader)]);
}
