//! The shared test harness of the core (the idea of raft-rs's `harness` crate): the one place
//! tests name peers, build raft nodes, drain a machine's outputs and take them apart, so that a
//! new [`Action`] variant or a new output changes this module and not every test file.
//!
//! It is not part of the crate's surface for users: it is compiled for the crate's own unit
//! tests and, through the `test-support` cargo feature, for its integration tests (the crate
//! is its own dev-dependency with that feature on). A build without the feature leaves it out.
//!
//! - Names and time: [`id`], [`ms`].
//! - Raft nodes as most tests start them: [`raft_config`] (heartbeat 50 ms, election timeout
//!   150–300 ms) and [`raft_node`]; a node made leader by the votes a test hands it
//!   ([`win_election`], [`granted_vote`]); a follower's acknowledgement ([`append_ack`]); the
//!   log's writes reported durable as a driver would ([`persist_log`]).
//! - Outputs: [`drain`] empties any machine of the core ([`Drain`]); [`sent`], [`published`]
//!   and [`leader_changes`] read a drained batch; [`carry`] sorts one action into what a test
//!   network does with it ([`Carried`]), the only `match` on [`Action`] a test network needs.
//!
//! A few raft nodes on a lossless network (`RaftNetwork`) and the whole simulator are in the
//! `conclave-harness` crate.

use std::time::Duration;

use conclave_protocol::{AppendResp, PeerId, Vote};

use crate::election::{
    Action, Election, ElectionMessage, Event, HardState, LeaderChangeCause, Outbox, Outputs as _,
};
use crate::gossip::Gossip;
use crate::priority::Priority;
use crate::raft::{LogPosition, Raft, RaftConfig, RaftMessage};
use crate::static_leader::StaticLeader;
use crate::{Admission, AdmissionAction, Instant, Membership, MembershipAction, SeededRng};

/// The peer named `name`; panics on a name [`PeerId::new`] refuses, which is a broken test.
pub fn id(name: &str) -> PeerId {
    PeerId::new(name).unwrap_or_else(|err| panic!("test peer id {name:?}: {err}"))
}

/// `millis` milliseconds after the origin of virtual time.
pub fn ms(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// The raft settings of node `me` among `voters` that the unit tests share: heartbeat 50 ms,
/// election timeout drawn from 150–300 ms, every other setting at its default.
pub fn raft_config(me: &str, voters: &[&str]) -> RaftConfig {
    RaftConfig::new(id(me), voters.iter().map(|voter| id(voter)))
        .with_heartbeat(Duration::from_millis(50))
        .with_election_timeout(Duration::from_millis(150), Duration::from_millis(300))
}

/// A granted vote (or pre-vote) of `term`.
pub fn granted_vote(term: u64, pre_vote: bool) -> RaftMessage {
    RaftMessage::Vote(Vote {
        term,
        granted: true,
        pre_vote,
        priority: None,
    })
}

/// A follower's acknowledgement of its log up to `match_index`.
pub fn append_ack(term: u64, match_index: u64) -> RaftMessage {
    RaftMessage::AppendResp(AppendResp {
        term,
        success: true,
        match_index,
        ..AppendResp::default()
    })
}

/// Reports what the node handed out for its log durable at `now`, as a driver does once the
/// fsync ends.
pub fn persist_log(raft: &mut Raft, now: Instant) {
    if let Some(mut log) = raft.replicated_log() {
        if let Some(write) = log.take_write() {
            log.handle_persisted(now, write.last());
        }
    }
}

/// Makes `raft` leader at its first election timeout with the (pre-)votes of `voters`, in
/// turn, until it wins; returns when. Panics if they are not enough.
pub fn win_election(raft: &mut Raft, voters: &[&str]) -> Instant {
    let at = raft
        .poll_timeout()
        .expect("a node that may campaign has a timer");
    raft.handle_timeout(at);
    for voter in voters {
        if raft.phase() == "pre_candidate" {
            raft.handle_message(at, id(voter), granted_vote(raft.term() + 1, true));
        }
    }
    let term = raft.term();
    for voter in voters {
        if raft.role() != crate::election::Role::Leader {
            raft.handle_message(at, id(voter), granted_vote(term, false));
        }
    }
    assert_eq!(
        raft.role(),
        crate::election::Role::Leader,
        "the votes elect it"
    );
    at
}

/// A raft node started at time zero from the durable `restored` state, its last log entry at
/// `last_log`, its randomness seeded with `seed`; panics on settings the node refuses.
pub fn raft_node(
    config: RaftConfig,
    restored: HardState,
    last_log: LogPosition,
    seed: u64,
) -> Raft {
    Raft::with_last_log(
        config,
        restored,
        last_log,
        SeededRng::new(seed),
        Instant::ZERO,
    )
    .unwrap_or_else(|err| panic!("test raft node refused its settings: {err}"))
}

/// A machine of the core whose outputs are polled one at a time, so that [`drain`] empties
/// any of them.
pub trait Drain {
    /// What the machine outputs.
    type Output;

    /// The next output, if any (the machine's own `poll_action`).
    fn next_output(&mut self) -> Option<Self::Output>;
}

/// Everything `machine` has queued, in order.
pub fn drain<M: Drain>(machine: &mut M) -> Vec<M::Output> {
    std::iter::from_fn(|| machine.next_output()).collect()
}

macro_rules! drain_by_poll_action {
    ($($machine:ty => $output:ty),* $(,)?) => {$(
        impl Drain for $machine {
            type Output = $output;
            fn next_output(&mut self) -> Option<$output> {
                self.poll_action()
            }
        }
    )*};
}

drain_by_poll_action!(
    Raft => Action,
    Priority => Action,
    Gossip => Action,
    StaticLeader => Action,
    Election => Action,
    Membership => MembershipAction,
    Admission => AdmissionAction,
);

impl Drain for Outbox {
    type Output = Action;
    fn next_output(&mut self) -> Option<Action> {
        self.poll()
    }
}

/// The raft messages among `actions`, with their addressee, in order.
pub fn sent(actions: &[Action]) -> Vec<(PeerId, RaftMessage)> {
    actions
        .iter()
        .filter_map(|action| match carry(action.clone()) {
            Carried::Message {
                to: Some(to),
                message: ElectionMessage::Raft(message),
            } => Some((to, message)),
            _ => None,
        })
        .collect()
}

/// The events among `actions`, in order.
pub fn published(actions: &[Action]) -> Vec<Event> {
    actions
        .iter()
        .filter_map(|action| match carry(action.clone()) {
            Carried::Event(event) => Some(event),
            _ => None,
        })
        .collect()
}

/// The leader changes among `actions`, in order: (term, leader, cause).
pub fn leader_changes(actions: &[Action]) -> Vec<(u64, Option<PeerId>, LeaderChangeCause)> {
    published(actions)
        .into_iter()
        .filter_map(|event| match event {
            Event::LeaderChanged {
                term,
                leader,
                cause,
                ..
            } => Some((term, leader, cause)),
            _ => None,
        })
        .collect()
}

/// What a test network does with one action of an election machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carried {
    /// Record the hard state as durable; `amnesic` when the WAL is to stay amnesic (WAL-2).
    Durable {
        /// The state made durable.
        hard: HardState,
        /// Whether it was a [`Action::PersistAmnesic`].
        amnesic: bool,
    },
    /// Put a message on the network.
    Message {
        /// The addressee, or `None` for every peer.
        to: Option<PeerId>,
        /// The message.
        message: ElectionMessage,
    },
    /// Keep what was published.
    Event(Event),
    /// The machine answered `handle_shutdown`: nothing follows.
    Stopped,
    /// Something the node keeps to itself and no test network acts on (the operator's
    /// automatic-election switch, RAFT-8), kept for a test that looks.
    Local(Action),
}

/// Sorts `action` into what a test network does with it. The one exhaustive `match` on
/// [`Action`] of the tests: a new variant is sorted here.
pub fn carry(action: Action) -> Carried {
    match action {
        Action::Persist(hard) => Carried::Durable {
            hard,
            amnesic: false,
        },
        Action::PersistAmnesic(hard) => Carried::Durable {
            hard,
            amnesic: true,
        },
        Action::Send { to, message } => Carried::Message {
            to: Some(to),
            message,
        },
        Action::Broadcast { message } => Carried::Message { to: None, message },
        Action::Publish(event) => Carried::Event(event),
        Action::Stopped => Carried::Stopped,
        action @ (Action::PersistAutoElection(_) | Action::PersistGenesis) => {
            Carried::Local(action)
        }
    }
}
