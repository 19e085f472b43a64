//! Hyperledger Fabric's gossip leader election (GOS-1..6, seeds 001 and 003), sans-IO.
//!
//! [`Gossip`] is one node's state machine. The algorithm, as Fabric's `gossip/election` runs
//! it: a starting node waits until its membership view stops changing between two samples
//! `membership_sample_interval` apart, a declaration arrives, or `startup_grace_period` passes
//! (GOS-1). A node without a leader gossips a `Proposal` and collects messages for
//! `leader_election_duration`; if a `Declaration` arrives it stops and follows, if a lower id
//! proposed it waits as a follower, otherwise it declares itself leader (GOS-2). Peers break the
//! symmetry by id alone: the lowest id wins an election, and a leader that hears a declaration
//! from a lower id steps down; but a follower never challenges a leader, so a leader keeps its
//! place against a later, lower newcomer. A leader broadcasts a `Declaration` every half
//! `leader_alive_threshold`; a follower that hears none from its leader for the whole threshold
//! gives it up and runs an election (GOS-3). `Yield` (`conclave leader resign`) makes a leader
//! step down and propose nothing until another leader is seen or six alive thresholds pass;
//! messages from peers outside the membership view are ignored (GOS-4). With
//! `use_leader_election = false` nobody elects: the node with `org_leader = true` leads and
//! declares, the others follow (GOS-5). A partition elects one leader per side; once healed, the
//! leaders hear each other and all but the lowest id step down (GOS-6).
//!
//! ```text
//!              start
//!                │
//!                ▼
//!        ┌──────────────┐  view stable, or grace over    ┌──────────────┐
//!        │   starting   │ ─────────────────────────────▶ │  proposing   │ ◀──────────┐
//!        └──────────────┘                                │  (Candidate) │            │
//!                │ declaration                           └──────────────┘            │
//!                │                 declaration, or a lower  │        │ nothing lower │
//!                ▼                 id proposed              │        │ in the window │
//!        ┌──────────────┐ ◀──────────────────────────────────┘        ▼               │
//!        │  following   │                                     ┌──────────────┐       │
//!        │ (or leader-  │ ◀─────────── lower-id declaration ── │   leading    │       │
//!        │  less, or    │ ◀─────────── Yield, shutdown ─────── │ declares each│       │
//!        │  yielding)   │                                     │ threshold / 2│       │
//!        └──────────────┘                                     └──────────────┘       │
//!                │ no declaration of the leader for leader_alive_threshold           │
//!                └───────────────────────────────────────────────────────────────────┘
//! ```
//!
//! # Fencing: the leadership epoch (CB-5)
//!
//! Fabric's election has no term, so conclave gives it one. A node that becomes leader takes a
//! **leadership epoch** one above every epoch it has seen, persists it
//! (`Action::Persist(HardState { term: epoch, vote: Some(itself) })`) and only then sends the
//! `Declaration { epoch }` that carries it. A node follows a declaration only if that keeps its
//! token growing: an epoch above its own, or the very epoch and leader it already follows
//! (`HardState.vote` records the leader of the node's epoch, and survives a restart). Its term
//! is the epoch of the leader it follows, so `(term, leader)` — the
//! [`FencingToken`](crate::election::FencingToken) — grows with every change of leader on
//! every node, across restarts too, and is the same on the leader and all its followers.
//!
//! Two leaders can take the same epoch on two sides of a partition, and a leader's epoch can be
//! below its new followers' after a heal. Three rules repair that, so that the surviving leader
//! ends above every epoch it deposed:
//! - a leader that hears a rival with a higher id declare an epoch not below its own takes a new
//!   epoch above it (the rival steps down when it hears it);
//! - a node without a leader that hears a declaration it cannot follow (its epoch is too old)
//!   answers the declarer with a `Proposal { epoch, leader }` carrying its own epoch and leader;
//! - a leader that receives a proposal of a later epoch, or of its own epoch naming another
//!   leader, takes a new epoch above it; any other proposal it answers with its declaration.
//!
//! # Where it differs from Fabric, and why
//!
//! - Deadlines instead of goroutines and sleeps; the timings are Fabric's four, with Fabric's
//!   defaults ([`GossipConfig::new`]), and the declaration interval (half the alive threshold)
//!   and the yield period (six thresholds) are derived from them as in Fabric.
//! - A follower gives its leader up exactly `leader_alive_threshold` after the last declaration
//!   of that leader. Fabric checks in fixed periods of the threshold, so it notices a dead
//!   leader between one and two thresholds later; here a dead leader is replaced within
//!   `leader_alive_threshold + leader_election_duration` ([`GossipConfig::failover_budget`]).
//! - The epochs above, two fields on the wire (`Declaration.epoch`, `Proposal.epoch` and
//!   `Proposal.leader`), and the proposal a node sends to a leader it cannot follow yet.
//! - A leader answers a proposal with its declaration at once, and sends it to a peer that joins
//!   its view; a proposer sends its proposal to a peer that joins its view (whichever side's
//!   membership learns of the other last, the leader is heard). With Fabric's defaults the
//!   declaration interval equals the election duration (5 s), so a newcomer's election could
//!   end just before the next periodic declaration and a lower-id newcomer could take over;
//!   answering keeps Fabric's promise that a leader is not displaced by a later peer.
//! - A start-up wait ends as soon as a declaration arrives (Fabric: at the next sample), and
//!   the view counts as stable when the *set* of peers is unchanged between two samples (Fabric
//!   compares sizes, which misses one peer leaving as another joins).
//! - Only proposals received during an election, or within one election duration before it
//!   started, count against it (Fabric keeps them until the next follower period), so a
//!   lower-id proposer that died does not cost a second round.
//! - A static leader (GOS-5) declares periodically, so its followers report the leader and its
//!   loss as static mode does (STA-1); Fabric's static leader sends nothing. Static leaders do
//!   not contest one another; hearing another leader is reported as `SplitBrain`, as it is for
//!   a dynamic leader.
//! - `Yield` of a static leader and `SetLeader` are refused with an error that says why;
//!   `EnableAutoElection(false)` stops a node proposing, like a permanent yield; a node that
//!   stops while leading publishes that it no longer leads (cause `shutdown`); a duplicate id
//!   (MEM-3) takes the node out for good.
//! - Messages from outside the membership view are counted
//!   ([`GossipStatus::ignored_outside_view`]) as well as ignored.

mod config;
mod node;

#[cfg(test)]
mod tests;

pub use config::{
    DEFAULT_LEADER_ALIVE_THRESHOLD, DEFAULT_LEADER_ELECTION_DURATION,
    DEFAULT_MEMBERSHIP_SAMPLE_INTERVAL, DEFAULT_STARTUP_GRACE_PERIOD, GossipConfig,
};
pub use node::{Gossip, GossipStatus};
