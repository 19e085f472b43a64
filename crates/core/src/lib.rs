//! conclave-core: the sans-IO state machines of conclave, and the one driver that carries out
//! their outputs.
//!
//! This crate is fully deterministic. It contains no networking, no file access, no threads
//! and no clock: every input carries the current time as a virtual [`Instant`], randomness
//! comes from an injected [`SeededRng`], and every output is data the caller carries out. The
//! same inputs always give the same outputs, which is what lets the simulator (the
//! `conclave-harness` crate) replay a whole cluster from a seed. The actors in `conclave-actors` are a thin shell around it; no election
//! decision is taken outside this crate.
//!
//! # The state machines
//!
//! - [`admission`]: whether an authenticated frame may act on this node: freshness across a
//!   restart (a challenge handshake), the replay window, which address owns an id on each
//!   link, and the bounds of the peer table (PROTO-5, MEM-3, TR-2);
//! - [`membership`]: the peer table, discovery, duplicate ids, ping/pong liveness and RTT
//!   (MEM-1..5); [`fanout`] carries its events to subscribers through bounded queues.
//! - [`election`]: the seam every election mode sits behind: the shared vocabulary (role,
//!   cause, fencing token, events, actions, messages, status) and [`election::Election`], the
//!   closed enum of the modes with one `handle_*`/`poll_*` interface;
//! - [`raft`]: Raft leader election with pre-vote, check-quorum, both quorum modes, manual
//!   override and leader-change events (RAFT-1..9);
//! - [`static_leader`]: a leader named in the configuration, whose liveness followers track
//!   (STA-1);
//! - [`storage`]: what raft keeps durable, behind the [`storage::Storage`] trait, with the
//!   simulator's in-memory twin where a crash loses every write not yet synced (WAL-1..3);
//! - [`driver`]: the one driver of an election's outputs, shared by the ElectionActor and the
//!   simulator (RAFT-1, WAL-1, CB-6, LOG-1..4, LOG-7).
//!
//! The tests' shared harness, `testing`, is compiled only for the crate's own tests and with the
//! `test-support` feature; it is no part of the surface.
//!
//! # Driving them
//!
//! Each machine is driven the same way (the shape of quinn-proto's `Connection` and raft-rs's
//! `RawNode`): feed one input, drain every output, arm one timer.
//!
//! ```text
//!            frames from peers          timer fired          operator command
//!                   │                        │                       │
//!                   ▼                        ▼                       ▼
//!   handle_frame / handle_message    handle_timeout(now)    handle_command(now, ..)
//!                   └────────────────────────┼───────────────────────┘
//!                                            ▼
//!                               ┌────────────────────────┐
//!                               │ Membership / Election  │  pure: no I/O, no clock
//!                               └────────────────────────┘
//!                                            │ take_ready() → Ready
//!                                            ▼
//!                               ┌────────────────────────┐
//!                               │ Driver: what waits for │  handle_written(now, ..)
//!                               │ which write, in order  │◄──── from the shell
//!                               └────────────────────────┘
//!                                            │ poll_effect() → Effect
//!            ┌───────────────────────────────┼────────────────────────────┐
//!            ▼                               ▼                            ▼
//!   Write (hard state, entries,        Send (encode,         Publish / Apply / Read
//!   snapshot: to the disk)             transmit)             (hooks, API, machine)
//!                                            │
//!                                            ▼
//!                               poll_timeout() → arm one timer
//! ```
//!
//! An election's one output contract is [`Election::take_ready`](election::Election::take_ready)
//! ([`election::Ready`]): the hard-state writes to make durable, numbered; the messages and
//! events that may leave now; those that wait for a write; and, with raft's replicated log, a
//! snapshot to install, entries to write, committed entries to apply and read outcomes. The
//! driver reports what became durable with one
//! [`Election::handle_persisted`](election::Election::handle_persisted). The ordering rules a
//! driver keeps — a message naming a term or vote leaves after its write, a leader change is
//! published after its history record, one write with the disk at a time and the next one
//! gathering what piles up — are written once, in [`driver::Driver`], which the ElectionActor
//! and the simulator both use: the actor only does the I/O. A synchronous driver (the tests)
//! may instead take one action at a time with `poll_action`, built on the same batches, each
//! write counted durable at once. Membership events reach the election as
//! [`Election::handle_peer_status`](election::Election::handle_peer_status).
//!
//! ```
//! use std::time::Duration;
//! use conclave_core::{Instant, SeededRng};
//! use conclave_core::election::{Action, Election, ElectionConfig, HardState, Role};
//! use conclave_core::raft::RaftConfig;
//! use conclave_protocol::PeerId;
//!
//! let me = PeerId::new("gw-a").unwrap();
//! // A single raft voter: it elects itself at its first election timeout.
//! let mut election = Election::new(
//!     ElectionConfig::Raft(RaftConfig::new(me, [me])),
//!     HardState::default(),
//!     SeededRng::new(42),
//!     Instant::ZERO,
//! )
//! .unwrap();
//! let deadline = election.poll_timeout().unwrap();
//! assert!(deadline >= Instant::ZERO + Duration::from_millis(1500));
//! election.handle_timeout(deadline);
//! let actions: Vec<Action> = std::iter::from_fn(|| election.poll_action()).collect();
//! assert!(matches!(actions[0], Action::Persist(HardState { term: 1, .. })));
//! assert_eq!(election.role(), Role::Leader);
//! ```

#![deny(missing_docs)]

pub mod admission;
pub mod driver;
pub mod election;
pub mod fanout;
pub mod gossip;
pub mod membership;
pub mod priority;
pub mod raft;
mod rng;
pub mod static_leader;
pub mod storage;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
mod time;

pub use admission::{
    Admission, AdmissionAction, AdmissionConfig, AdmissionNotice, FrameHeader, Verdict,
};
pub use fanout::{Delivery, DrainOutcome, Fanout, SubscriberQueue};
pub use membership::{
    LinkAddr, Membership, MembershipAction, MembershipConfig, MembershipError, MembershipEvent,
    PeerInfo, PeerStatus, PeerTable,
};
pub use rng::SeededRng;
pub use time::Instant;
