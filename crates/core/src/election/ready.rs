//! The typed batch an election hands its driver (RAFT-1, WAL-1, LOG-1..4, LOG-7; issue 16,
//! item 3; issue 24, item 0), in the shape of raft-rs's `Ready`: what to make durable, what
//! may leave now, what must wait for that write, and the replicated log's work. It is the
//! core's one output contract; [`crate::driver::Driver`] carries it out for every shell.
//!
//! - [`Ready::persist`]: the hard-state writes decided since the last batch, numbered with a
//!   [`PersistSeq`]; the driver writes them in one fsync and reports it with
//!   [`Election::handle_persisted`](super::Election::handle_persisted) ([`Persisted::Hard`]).
//! - [`Ready::messages`] and [`Ready::events`]: outputs that depend on no write still in
//!   flight: they leave now, whatever the disk is doing.
//! - [`Ready::after_persist`]: outputs decided after a write that is not yet durable (this
//!   batch's or an earlier one's): they leave once the write numbered
//!   [`AfterPersist::seq`] is durable. A message that names a term or a vote never leaves before
//!   the term or vote is on disk.
//! - The log's part, while no hard-state write is in flight: [`Ready::install`] (a leader's
//!   snapshot), [`Ready::entries`] (one write at a time, reported with
//!   [`Persisted::Entries`]), [`Ready::committed`] (to apply, in order) and [`Ready::reads`].
//!
//! The election keeps going meanwhile: inputs handled while a write is in flight are answered
//! from its state in memory, and everything they produce waits behind that write, however many
//! batches are taken before it completes. Writes complete in the order they were numbered (a
//! WAL appends them in turn), so reporting one reports every earlier one.
//!
//! A synchronous driver (the tests) may take the election's part one action at a time instead
//! ([`Outputs::poll_action`](super::Outputs::poll_action)), built on these batches.
//!
//! # One message for several followers (issue 27, item 1)
//!
//! A leader whose followers are in step sends each of them the same AppendEntries: the same
//! entries after the same index, the same commit. A batch hands those out once, as an
//! [`Outgoing::Multicast`] naming every addressee ([`coalesce_appends`]), so that a link that
//! reaches them all with one frame — the radio's broadcast — sends it once; a link that
//! cannot sends each a copy. Nothing else is merged: a vote or an answer stays addressed to
//! one peer. An AppendEntries may reach a peer it was not meant for (a radio broadcast is
//! heard by everyone in range) without harm: every follower checks it against its own log
//! (Raft's consistency check), takes it when it fits, and refuses it with a hint when not,
//! which the leader reads as it reads any refusal.

use conclave_protocol::{LogEntry, PeerId};

use crate::raft::{LogPosition, LogWrite, RaftMessage, ReadError, ReadId};
use crate::storage::Snapshot;

use super::{Action, ElectionMessage, Event, HardState};

impl Outgoing {
    /// The same output as the per-peer actions of a synchronous driver: a multicast becomes
    /// one send per addressee, in its order.
    fn into_actions(self) -> Vec<Action> {
        match self {
            Outgoing::Send { to, message } => vec![Action::Send { to, message }],
            Outgoing::Broadcast { message } => vec![Action::Broadcast { message }],
            Outgoing::Multicast { to, message } => to
                .into_iter()
                .map(|to| Action::Send {
                    to,
                    message: message.clone(),
                })
                .collect(),
        }
    }
}

/// Whether one copy of `message` may serve several addressees, and be heard by peers it was
/// not addressed to: an AppendEntries, which every follower checks against its own log.
fn is_shareable(message: &ElectionMessage) -> bool {
    matches!(
        message,
        ElectionMessage::Raft(RaftMessage::AppendEntries(_))
    )
}

/// Merges the sends of one identical AppendEntries to several peers into one
/// [`Outgoing::Multicast`] (see the module docs), keeping the order in which each peer receives
/// its messages: a send joins an earlier one only when nothing else for its peer (a send or a
/// broadcast) was queued between them.
pub(crate) fn coalesce_appends(messages: Vec<Outgoing>) -> Vec<Outgoing> {
    if messages.len() < 2 {
        return messages;
    }
    let mut merged: Vec<Outgoing> = Vec::with_capacity(messages.len());
    // Per peer, the position in `merged` after its last message: it may join only later ones.
    let mut peer_floor: Vec<(PeerId, usize)> = Vec::new();
    let mut broadcast_floor = 0;
    for outgoing in messages {
        match outgoing {
            Outgoing::Send { to, message } if is_shareable(&message) => {
                let floor = peer_floor
                    .iter()
                    .find(|(peer, _)| *peer == to)
                    .map_or(0, |(_, floor)| *floor)
                    .max(broadcast_floor);
                let joined = merged[floor..]
                    .iter()
                    .position(|earlier| match earlier {
                        Outgoing::Send { message: other, .. }
                        | Outgoing::Multicast { message: other, .. } => *other == message,
                        Outgoing::Broadcast { .. } => false,
                    })
                    .map(|offset| floor + offset);
                let at = match joined {
                    Some(at) => {
                        let slot = &mut merged[at];
                        if let Outgoing::Multicast { to: peers, .. } = slot {
                            peers.push(to);
                        } else if let Outgoing::Send { to: first, .. } = slot {
                            let first = *first;
                            *slot = Outgoing::Multicast {
                                to: vec![first, to],
                                message,
                            };
                        }
                        at
                    }
                    None => {
                        merged.push(Outgoing::Send { to, message });
                        merged.len() - 1
                    }
                };
                set_floor(&mut peer_floor, to, at + 1);
            }
            Outgoing::Send { to, message } => {
                merged.push(Outgoing::Send { to, message });
                set_floor(&mut peer_floor, to, merged.len());
            }
            Outgoing::Multicast { to, message } => {
                for peer in &to {
                    set_floor(&mut peer_floor, *peer, merged.len() + 1);
                }
                merged.push(Outgoing::Multicast { to, message });
            }
            Outgoing::Broadcast { message } => {
                merged.push(Outgoing::Broadcast { message });
                broadcast_floor = merged.len();
            }
        }
    }
    merged
}

/// Records that `peer`'s next message may go no earlier than position `floor`.
fn set_floor(floors: &mut Vec<(PeerId, usize)>, peer: PeerId, floor: usize) {
    match floors.iter_mut().find(|(known, _)| *known == peer) {
        Some((_, known)) => *known = floor,
        None => floors.push((peer, floor)),
    }
}

/// The number of one [`Ready::persist`] batch: increasing, starting at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PersistSeq(pub u64);

/// One record the driver makes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurableWrite {
    /// A term and vote.
    HardState(HardState),
    /// A term and vote after which the WAL stays amnesic (WAL-2): the driver writes an amnesia
    /// marker after it. See [`Action::PersistAmnesic`](super::Action::PersistAmnesic).
    Amnesic(HardState),
    /// The operator's automatic-election switch (RAFT-8).
    AutoElection(bool),
    /// A genesis (WAL-5): a durable "never voted" of a member of a new cluster. See
    /// [`Action::PersistGenesis`](super::Action::PersistGenesis).
    Genesis,
}

/// A message for the transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// To one peer.
    Send {
        /// The addressee.
        to: PeerId,
        /// The message.
        message: ElectionMessage,
    },
    /// To each of several peers, the same AppendEntries (see the module docs): one frame where
    /// a link reaches them all at once, a copy each where it does not.
    Multicast {
        /// The addressees, at least two, in the order their sends were decided.
        to: Vec<PeerId>,
        /// The message.
        message: ElectionMessage,
    },
    /// To every peer reachable on every link.
    Broadcast {
        /// The message.
        message: ElectionMessage,
    },
}

/// Writes to make durable together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistBatch {
    /// Its number, reported back once the writes are durable.
    pub seq: PersistSeq,
    /// The records, in the order they were decided (the last hard state is the current one).
    pub writes: Vec<DurableWrite>,
}

/// Outputs that wait for a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfterPersist {
    /// They leave once this write (and so every earlier one) is durable.
    pub seq: PersistSeq,
    /// Messages, in order.
    pub messages: Vec<Outgoing>,
    /// Events, in order.
    pub events: Vec<Event>,
}

/// One batch of an election's outputs. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ready {
    /// What to make durable now, if anything.
    pub persist: Option<PersistBatch>,
    /// Messages that may leave now, in order.
    pub messages: Vec<Outgoing>,
    /// Events that may be published now, in order.
    pub events: Vec<Event>,
    /// Outputs that wait for a write not yet durable.
    pub after_persist: Option<AfterPersist>,
    /// The answer to `handle_shutdown`: once everything above is carried out, what waits for a
    /// write included, this node's part in the election is over (see
    /// [`Action::Stopped`](super::Action::Stopped)).
    pub stopped: bool,
    /// LOG-4: a leader's snapshot this follower received whole: the driver restores its state
    /// machine from it before it applies anything below, saves it, and reports
    /// [`Persisted::Snapshot`]. (The replicated log's parts of a batch — this and the three
    /// below — come only while no hard-state write is in flight, so that on disk they follow
    /// the hard state they come after.)
    pub install: Option<Snapshot>,
    /// LOG-2: entries to write, then report with [`Persisted::Entries`]; one write at a time
    /// (the next batch carries none until this one is reported), and what piles up meanwhile
    /// goes into the next one.
    pub entries: Option<LogWrite>,
    /// LOG-3: committed, durable entries to apply, in order, each handed out once.
    pub committed: Vec<LogEntry>,
    /// LOG-7: the outcomes of linearizable reads: the read index to serve each at once the
    /// machine applied it, or why it failed.
    pub reads: Vec<(ReadId, Result<u64, ReadError>)>,
}

/// What the driver made durable, reported with
/// [`Election::handle_persisted`](super::Election::handle_persisted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persisted {
    /// The persist batch numbered so, and every earlier one.
    Hard(PersistSeq),
    /// The entries written up to this position ([`LogWrite::last`]).
    Entries(LogPosition),
    /// The snapshot ending at this position (an installed one, or one the driver took).
    Snapshot(LogPosition),
}

impl Ready {
    /// The election's part of the batch as a synchronous driver carries it out, each write
    /// durable before the next action: what may leave at once, the writes, what waited for
    /// them, then `Stopped`. (A mode's own batch has no log parts; those come from
    /// [`Election::take_ready`](super::Election::take_ready).)
    #[must_use]
    pub fn into_actions(self) -> Vec<Action> {
        let mut actions: Vec<Action> = self
            .messages
            .into_iter()
            .flat_map(Outgoing::into_actions)
            .collect();
        for write in self.persist.into_iter().flat_map(|batch| batch.writes) {
            actions.push(match write {
                DurableWrite::HardState(state) => Action::Persist(state),
                DurableWrite::Amnesic(state) => Action::PersistAmnesic(state),
                DurableWrite::AutoElection(enabled) => Action::PersistAutoElection(enabled),
                DurableWrite::Genesis => Action::PersistGenesis,
            });
        }
        actions.extend(self.events.into_iter().map(Action::Publish));
        if let Some(after) = self.after_persist {
            actions.extend(after.messages.into_iter().flat_map(Outgoing::into_actions));
            actions.extend(after.events.into_iter().map(Action::Publish));
        }
        if self.stopped {
            actions.push(Action::Stopped);
        }
        actions
    }

    /// Nothing to do.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.persist.is_none()
            && self.messages.is_empty()
            && self.events.is_empty()
            && self.after_persist.is_none()
            && !self.stopped
            && self.install.is_none()
            && self.entries.is_none()
            && self.committed.is_empty()
            && self.reads.is_empty()
    }
}
