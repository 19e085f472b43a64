//! The ESP-NOW pod "master election" of seed 002 (PRI-1..6), sans-IO: [`Priority`].
//!
//! Pods on batteries elect the one best placed to be master: the most battery, then the
//! longest uptime, then the best signal, then a random byte. There is no quorum: every group
//! of pods that can hear each other has a master, and when two groups meet the lower priority
//! yields (PRI-6). The election itself is seed 002's four phases, timed by its constants
//! ([`PriorityConfig::new`]).
//!
//! # The algorithm
//!
//! ```text
//!                    force_master, or pinned by `conclave leader set`
//!   start ────────────────────────────────────────────────────────────┐
//!     │ jitter                                                         ▼
//!     ▼                                                         ┌──────────────┐
//!  ┌──────┐  resigned: sits one election out                    │ ForcedMaster │
//!  │ Idle │  automatic election off: looks again every 3 s      └──────────────┘
//!  └──┬───┘
//!     │ broadcast Discover: at the round it has after a start, at round + 1 after a resignation
//!     ▼
//!  ┌─────────────┐  a master named at the highest round known (PRI-4)  ┌──────────┐
//!  │ Discovering │────────────────────────────────────────────────────►│          │
//!  └──┬───────┬──┘  500 ms + jitter                                    │          │
//!     │       └── nobody answered: master alone (PRI-4) ───────┐       │          │
//!     │ (round + 1 if it had not), broadcast Candidate          │       │ Follower │
//!     ▼                                                         │       │          │
//!  ┌─────────────┐  a candidate or voter outranks it:          │       │          │
//!  │ Campaigning │  accept it, wait for its announcement ──────┼──────►│          │
//!  └──┬──────────┘  200 ms (+ jitter on a retry)               │       └────┬─────┘
//!     ▼                                                         ▼            │ 3 s silence, or
//!  ┌─────────────────┐  every peer heard accepted         ┌────────┐        │ its master
//!  │ WaitingForVotes │───────────────────────────────────►│ Master │        │ discovers again:
//!  └──┬──────────────┘  300 ms                            └───┬────┘        │ round + 1,
//!     │ some did not: campaign again, at most 3 times;         │ announces   │ Discovering
//!     └─ then nobody it heard outranks it ────────────────────►│ every 1 s   ▼
//!                                                               │
//!          meets a master of higher claim at a higher round: Follower (PRI-6)
//! ```
//!
//! - **Discovering** (PRI-2): the node broadcasts `Discover` and collects answers for 500 ms
//!   plus jitter. A `DiscoverAck` naming a master whose round is the highest the node knows
//!   makes it a follower at once, without an election (PRI-4, the late joiner). If nobody
//!   answered, the node is master (PRI-4, the single pod) and keeps announcing, so pods that
//!   appear later find it. A node that lost no master (it just started, new or from its WAL,
//!   or does not campaign) discovers at the round it has and opens a new round only when no
//!   master answered: a `Discover` above the running master's round would make the master
//!   move above it (see fencing below), so a follower that merely restarted would change the
//!   fencing token of every client.
//! - **Campaigning / WaitingForVotes** (PRI-2): the node broadcasts `Candidate` with its score
//!   and round. Every node still electing answers with a vote: accept if the candidate
//!   outranks it (and no better candidate was accepted already), refuse otherwise. A node
//!   that accepts, or that is refused by a voter outranking it, becomes a follower waiting
//!   for that node to announce. A candidate wins as soon as every peer it heard in this
//!   election has accepted; after 200 + 300 ms without that it campaigns again (with
//!   jitter), and after 3 retries it falls back to seed 002's own rule: nobody it heard
//!   outranks it, so it is master.
//! - **Master** (PRI-3): announces every second. A master is not deposed by a candidate; it
//!   answers one with its announcement, and a follower of a live master answers one with a
//!   `DiscoverAck` naming the master.
//! - **Follower** (PRI-3): a master silent for 3 s is dead; the follower starts a new round.
//! - **Resign** (PRI-5): on low battery (at or below `low_battery_percent`, only when a peer
//!   has more), on `conclave leader resign`, or at shutdown, a master broadcasts
//!   `MasterResign` naming its best successor, which becomes master at once; the other
//!   followers of the resigning master start a new election, which the successor's first
//!   announcement ends. The resigning node sits that election out.
//! - **Two masters** (PRI-6): the lower claim yields. A forced master (`force_master`, or
//!   `conclave leader set` naming this node) outranks any score.
//!
//! # The score (PRI-1)
//!
//! `battery% << 24 | min(uptime minutes, 255) << 16 | signal << 8 | random & 0xFF`, see
//! [`priority_score`]. The battery comes from [`HealthReading`](crate::election::HealthReading)s
//! the shell reads (fixed, file or command); uptime counts from [`Priority::new`]'s `now`;
//! the signal is the inverted mean RSSI the transport reports per peer
//! ([`PeerSignal`](crate::election::PeerSignal), [`signal_strength`]); the random byte comes
//! from the injected RNG and is drawn again for every election. Claims compare as
//! `(forced, score, id)` ([`Claim`]): the id breaks an exact tie the same way everywhere.
//!
//! # Fencing (CB-5): the round is the term
//!
//! Every message carries a round and every node keeps the highest it has heard (its
//! [`HardState::term`](crate::election::HardState)). A node becomes master only with a round
//! **one above every round it has heard**, persisted (`Action::Persist`) before the
//! announcement that carries it leaves, and a restart starts from the persisted round. A
//! node takes a master only at the highest round it knows, and a master other than the one
//! of its last token only above that token's round, so the fencing token `(round, master)`
//! it reports never goes back and grows with every change of master. A follower persists
//! the master it follows at its round (as `HardState::vote`: the master it accepted in that
//! round), so after a restart it takes that master back at the same round and any other
//! only above it:
//!
//! - a master that hears a higher round (a node that declared it dead and started an
//!   election) moves above it at once and announces, so that node can follow it again;
//! - two masters that meet: the loser yields only to a round above its own (the winner
//!   moves above it first if it is not), and the loser's followers move to the winner only
//!   at that higher round;
//! - a node without a master that hears a live master it may not take (a round below its
//!   own, or the round of a token it held with another master) raises its own round above
//!   the master's and tells the master (a `DiscoverAck`); it follows once the master moved
//!   above.
//!
//! Without a quorum, two partitions can each have a master at the same round; the token
//! then orders them by id, and when they meet the survivor ends above the loser's round. A master
//! whose whole partition died cannot pass its round on: a resource that saw its token
//! rejects the next master's until that one's round passes it.
//!
//! # Where this differs from seed 002, and why
//!
//! - **Rounds everywhere.** The seed's round is a `uint8_t` in `Candidate` only. Here it is
//!   64-bit, carried by every priority body and persisted, because it is the fencing term;
//!   a vote echoes the round it answers so a late vote is not counted in a later one.
//! - **Master announcements carry the master's score, round and forced flag.** The seed
//!   recomputes a priority from uptime and battery (`calculatePriorityFromAnnounce`), which
//!   cannot recover the signal and random bytes; two masters must compare the same numbers.
//! - **Votes from everyone heard.** The seed's candidate wins when "I have the highest
//!   priority" after 500 ms, whatever it heard. Here it wins early once every peer it heard
//!   accepted, retries (at most 3 times) while some did not, and only then falls back to the
//!   seed's rule, so one lost `Candidate` rarely makes two masters.
//! - **A live master is not deposed by a candidate, and hearsay about a dead one is
//!   ignored.** In the seed any node that hears a higher `Candidate` follows it, and a
//!   `DiscoverAck` naming any master is trusted. Here the master answers a candidate with its
//!   announcement, a follower of a live master answers with a `DiscoverAck`, and a node only
//!   takes a master at the highest round it knows (so not the one it just declared dead).
//! - **A master that restarts** (its followers hear its `Discover` or `Candidate`) is given
//!   up at once instead of after 3 s.
//! - **A node that starts does not start a round.** The seed increments the round when a
//!   master is lost; a node that boots or restarts has lost none, so it looks for the running
//!   master at the round it persisted and increments only if it finds none. Since rounds are
//!   the fencing term here, a rejoining follower leaves the master's round alone.
//! - **Ties** of the whole 32-bit score are broken by id, not left to chance.
//! - **Low battery** resigns only when a peer has more battery than the threshold, so a pod
//!   of low batteries does not hand the master role around forever; a forced master does not
//!   resign for battery (the seed resigns from `kMaster` only).
//! - **Force master by command persists** (the pin in `HardState::manual_override`), like the
//!   seed's NVS flag, so a restart comes back forced; a resignation clears it.
//! - **Idle** is used for the start delay, a resigned master sitting out one election, and a
//!   node with automatic election off; the seed leaves it undescribed.
//!
//! Unit tests (`tests.rs`, exact action equality) are named after the PRI ids; the seed's
//! verification checklist runs in `tests/priority_checklist.rs` on a shared simulated air,
//! and `tests/priority_random.rs` checks one master after healing over many seeds.

mod config;
mod node;
mod score;
mod state;

#[cfg(test)]
mod tests;

pub use config::PriorityConfig;
pub use node::{PRIORITY_PROTOCOL_VERSION, Priority};
pub use score::{Claim, battery_of, priority_score, signal_strength};
pub use state::{PriorityState, PriorityStatus};
