//! The queue of actions every election mode fills, and the two ordering rules they all keep
//! (RAFT-1, RAFT-9).
//!
//! - **Durable first.** A message is queued only after the hard state it may depend on: the
//!   [`Outbox::send`] and [`Outbox::broadcast`] of a mode queue a `Persist` of the hard state
//!   they are given first, when it differs from the last one persisted. (Raft, whose persisting
//!   has rules of its own — an abstaining node persists nothing, an amnesic one marks it —
//!   persists through [`Outbox::persist_as`] and queues its messages with [`Outbox::push`].)
//! - **Published once, after what made it true.** An input's events are published when the
//!   input ends ([`Outbox::finish`]), after its persist; then a `RoleChanged` if the role or
//!   phase differs from the last one published, and a `LeaderChanged` if the leader (with its
//!   term: the fencing token) differs from the last one published, each exactly once.
//!
//! A driver takes the queue one action at a time ([`Outbox::poll`], where a persist is durable
//! before the next action is carried out), or as a typed batch ([`Outbox::take_ready`], see
//! [`super::ready`]): there the persists are numbered, and an output queued behind a persist
//! the driver has not yet reported durable ([`Outbox::handle_persisted`]) waits for it.

use std::collections::VecDeque;

use conclave_protocol::PeerId;

use super::ready::{
    AfterPersist, DurableWrite, Outgoing, PersistBatch, PersistSeq, Ready, coalesce_appends,
};
use super::{Action, ElectionMessage, Event, HardState, LeaderChangeCause, Role};

/// What a mode has decided and its driver has not yet taken, with what was last persisted and
/// published. See the module docs.
#[derive(Debug)]
pub struct Outbox {
    actions: VecDeque<Action>,
    /// The hard state of the last persist action queued (or restored at start).
    persisted: HardState,
    /// Events of the input being handled, published when it ends.
    events: Vec<Event>,
    /// The role and phase the last `RoleChanged` said (or the starting ones).
    published_role: (Role, &'static str),
    /// The `(term, leader)` the last `LeaderChanged` named.
    published_leader: Option<(u64, PeerId)>,
    /// The number of the last persist batch [`Outbox::take_ready`] handed out.
    issued: PersistSeq,
    /// The last batch the driver reported durable.
    durable: PersistSeq,
    /// A batch [`Outbox::poll`] took and has not handed out whole yet.
    synchronous: VecDeque<Action>,
}

impl Outbox {
    /// An empty outbox for a machine that starts from the durable `restored` state, in `role`
    /// and `phase`, knowing no leader.
    pub(crate) fn new(restored: HardState, role: Role, phase: &'static str) -> Self {
        Self {
            actions: VecDeque::new(),
            persisted: restored,
            events: Vec::new(),
            published_role: (role, phase),
            published_leader: None,
            issued: PersistSeq::default(),
            durable: PersistSeq::default(),
            synchronous: VecDeque::new(),
        }
    }

    /// Queues `Persist(hard)` unless `hard` is what was persisted last.
    pub(crate) fn persist(&mut self, hard: HardState) {
        self.persist_as(hard, Action::Persist);
    }

    /// Queues `kind(hard)` unless `hard` is what was persisted last.
    pub(crate) fn persist_as(&mut self, hard: HardState, kind: fn(HardState) -> Action) {
        if hard != self.persisted {
            self.persist_again(hard, kind);
        }
    }

    /// Queues `kind(hard)` whatever was persisted before (raft's end of an abstention, which
    /// persists a state it never wrote).
    pub(crate) fn persist_again(&mut self, hard: HardState, kind: fn(HardState) -> Action) {
        self.persisted = hard;
        self.actions.push_back(kind(hard));
    }

    /// Queues `message` to `to`, after a persist of `hard` if it changed.
    pub(crate) fn send(&mut self, hard: HardState, to: PeerId, message: ElectionMessage) {
        self.persist(hard);
        self.actions.push_back(Action::Send { to, message });
    }

    /// Queues `message` to every peer, after a persist of `hard` if it changed.
    pub(crate) fn broadcast(&mut self, hard: HardState, message: ElectionMessage) {
        self.persist(hard);
        self.actions.push_back(Action::Broadcast { message });
    }

    /// Queues an action that depends on no hard state (`PersistAutoElection`, `Stopped`, or a
    /// message whose persist the mode queued itself).
    pub(crate) fn push(&mut self, action: Action) {
        self.actions.push_back(action);
    }

    /// Records an event of the current input, published when it ends.
    pub(crate) fn publish(&mut self, event: Event) {
        self.events.push(event);
    }

    /// The `(term, leader)` the last `LeaderChanged` named.
    pub(crate) fn published_leader(&self) -> Option<(u64, PeerId)> {
        self.published_leader
    }

    /// Ends an input (after the mode's last persist): its events, then the role and the
    /// leader where they changed since they were last published.
    pub(crate) fn finish(&mut self, now: Published) {
        let events = std::mem::take(&mut self.events);
        self.actions.extend(events.into_iter().map(Action::Publish));
        if (now.role, now.phase) != self.published_role {
            self.published_role = (now.role, now.phase);
            self.actions.push_back(Action::Publish(Event::RoleChanged {
                term: now.term,
                role: now.role,
                phase: now.phase,
            }));
        }
        let observed = now.leader.map(|leader| (now.term, leader));
        if observed != self.published_leader {
            self.published_leader = observed;
            self.actions
                .push_back(Action::Publish(Event::LeaderChanged {
                    term: now.term,
                    leader: now.leader,
                    role: now.role,
                    cause: now.cause,
                }));
        }
    }

    /// The next action of a synchronous driver, in order, built on [`Outbox::take_ready`]: a
    /// batch is taken whole, counted durable at once, and handed out one action at a time —
    /// what may leave at once, the writes, then what waited for them (see [`Outputs`]).
    pub(crate) fn poll(&mut self) -> Option<Action> {
        if self.synchronous.is_empty() {
            let ready = self.take_ready();
            if let Some(batch) = &ready.persist {
                self.handle_persisted(batch.seq);
            }
            self.synchronous = ready.into_actions().into();
        }
        self.synchronous.pop_front()
    }

    /// Everything queued, as one typed batch: the persists in it numbered together, and each
    /// output sorted by whether a persist not yet durable comes before it.
    pub(crate) fn take_ready(&mut self) -> Ready {
        let mut ready = Ready::default();
        let mut writes = Vec::new();
        let mut after = (Vec::new(), Vec::new());
        // Behind a write not yet durable: an earlier batch's, or one of this batch.
        let mut behind = self.issued > self.durable;
        for action in self.actions.drain(..) {
            let outgoing = match action {
                Action::Persist(state) => {
                    writes.push(DurableWrite::HardState(state));
                    behind = true;
                    continue;
                }
                Action::PersistAmnesic(state) => {
                    writes.push(DurableWrite::Amnesic(state));
                    behind = true;
                    continue;
                }
                Action::PersistGenesis => {
                    writes.push(DurableWrite::Genesis);
                    behind = true;
                    continue;
                }
                Action::PersistAutoElection(enabled) => {
                    writes.push(DurableWrite::AutoElection(enabled));
                    behind = true;
                    continue;
                }
                Action::Publish(event) => {
                    if behind {
                        after.1.push(event);
                    } else {
                        ready.events.push(event);
                    }
                    continue;
                }
                Action::Stopped => {
                    ready.stopped = true;
                    continue;
                }
                Action::Send { to, message } => Outgoing::Send { to, message },
                Action::Broadcast { message } => Outgoing::Broadcast { message },
            };
            if behind {
                after.0.push(outgoing);
            } else {
                ready.messages.push(outgoing);
            }
        }
        if !writes.is_empty() {
            self.issued = PersistSeq(self.issued.0 + 1);
            ready.persist = Some(PersistBatch {
                seq: self.issued,
                writes,
            });
        }
        ready.messages = coalesce_appends(std::mem::take(&mut ready.messages));
        let (messages, events) = after;
        let messages = coalesce_appends(messages);
        if !messages.is_empty() || !events.is_empty() {
            ready.after_persist = Some(AfterPersist {
                seq: self.issued,
                messages,
                events,
            });
        }
        ready
    }

    /// The driver made the batch numbered `seq`, and every earlier one, durable.
    pub(crate) fn handle_persisted(&mut self, seq: PersistSeq) {
        self.durable = self.durable.max(seq.min(self.issued));
    }

    /// A batch [`Outbox::take_ready`] handed out is not yet reported durable.
    pub(crate) fn is_persisting(&self) -> bool {
        self.issued > self.durable
    }
}

/// The output plumbing every mode shares, written once: a mode keeps an [`Outbox`] and hands
/// it out through [`HasOutbox`]; its driver takes the outputs through these methods.
pub trait Outputs: HasOutbox {
    /// Everything decided since the last call, as one typed batch (see [`Ready`]).
    #[must_use]
    fn take_ready(&mut self) -> Ready {
        self.outbox_mut().take_ready()
    }

    /// The driver made the persist batch numbered `seq`, and every earlier one, durable.
    fn handle_persisted(&mut self, seq: PersistSeq) {
        self.outbox_mut().handle_persisted(seq);
    }

    /// A persist batch handed out by [`Outputs::take_ready`] is not yet reported durable.
    #[must_use]
    fn is_persisting(&self) -> bool {
        self.outbox().is_persisting()
    }

    /// The next action for a synchronous driver (the tests), which makes each write durable
    /// before it carries out the next action: built on [`Outputs::take_ready`], each batch
    /// counted durable as it is taken and flattened into what may leave at once, the writes,
    /// and what waited for them ([`Ready::into_actions`]). A driver uses this or
    /// `take_ready`, not both.
    #[must_use]
    fn poll_action(&mut self) -> Option<Action> {
        self.outbox_mut().poll()
    }
}

impl<M: HasOutbox> Outputs for M {}

/// A machine that keeps an [`Outbox`] (every election mode). Sealed: only the core's modes
/// implement it.
pub trait HasOutbox: sealed::Sealed {
    /// The outbox.
    #[doc(hidden)]
    fn outbox(&self) -> &Outbox;
    /// The outbox, to take from.
    #[doc(hidden)]
    fn outbox_mut(&mut self) -> &mut Outbox;
}

/// Implements [`HasOutbox`] for a mode whose `outbox` field holds its [`Outbox`]; invoked in
/// the mode's own module, where the field is visible.
macro_rules! has_outbox {
    ($mode:ty) => {
        impl $crate::election::SealedOutbox for $mode {}

        impl $crate::election::HasOutbox for $mode {
            fn outbox(&self) -> &$crate::election::Outbox {
                &self.outbox
            }

            fn outbox_mut(&mut self) -> &mut $crate::election::Outbox {
                &mut self.outbox
            }
        }
    };
}
pub(crate) use has_outbox;

pub(crate) mod sealed {
    /// Keeps [`super::HasOutbox`] to the core's modes.
    pub trait Sealed {}
}

/// Where a machine stands at the end of an input: what [`Outbox::finish`] publishes when it
/// changed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Published {
    /// The term (epoch, round).
    pub(crate) term: u64,
    /// The role.
    pub(crate) role: Role,
    /// The mode's phase label.
    pub(crate) phase: &'static str,
    /// The leader known, if any.
    pub(crate) leader: Option<PeerId>,
    /// Why the leader is what it is (published with a change of it).
    pub(crate) cause: LeaderChangeCause,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{drain, id};

    fn standing(term: u64, role: Role, leader: Option<PeerId>) -> Published {
        Published {
            term,
            role,
            phase: role.label(),
            leader,
            cause: LeaderChangeCause::VoteWon,
        }
    }

    /// RAFT-1: a message that follows a change of the hard state leaves after its persist; an
    /// unchanged hard state is not persisted again.
    #[test]
    fn a_message_leaves_after_the_hard_state_it_depends_on() {
        let mut outbox = Outbox::new(HardState::default(), Role::Follower, "follower");
        let voted = HardState {
            term: 2,
            vote: Some(id("a")),
            ..HardState::default()
        };
        let message = ElectionMessage::Gossip(crate::election::GossipMessage::Declaration(
            conclave_protocol::Declaration { epoch: 2 },
        ));
        outbox.send(voted, id("b"), message.clone());
        outbox.broadcast(voted, message.clone());
        assert_eq!(
            drain(&mut outbox),
            vec![
                Action::Persist(voted),
                Action::Send {
                    to: id("b"),
                    message: message.clone()
                },
                Action::Broadcast { message },
            ]
        );
    }

    /// RAFT-9: an input's events come out when it ends, after its persist; the role and the
    /// leader are published once per change, never repeated.
    #[test]
    fn role_and_leader_are_published_once_per_change() {
        let mut outbox = Outbox::new(HardState::default(), Role::Follower, "follower");
        let started = Event::ElectionStarted {
            term: 1,
            phase: "election",
        };
        outbox.publish(started.clone());
        outbox.persist(HardState {
            term: 1,
            ..HardState::default()
        });
        outbox.finish(standing(1, Role::Leader, Some(id("a"))));
        let actions = drain(&mut outbox);
        assert!(matches!(actions[0], Action::Persist(_)), "{actions:?}");
        assert_eq!(actions[1], Action::Publish(started));
        assert!(
            matches!(
                actions[2],
                Action::Publish(Event::RoleChanged {
                    role: Role::Leader,
                    ..
                })
            ),
            "{actions:?}"
        );
        assert!(
            matches!(
                actions[3],
                Action::Publish(Event::LeaderChanged { term: 1, .. })
            ),
            "{actions:?}"
        );
        assert_eq!(actions.len(), 4);
        outbox.finish(standing(1, Role::Leader, Some(id("a"))));
        assert_eq!(drain(&mut outbox), vec![]);
        // The same leader in a later term is a new fencing token: published again.
        outbox.finish(standing(2, Role::Leader, Some(id("a"))));
        assert!(matches!(
            drain(&mut outbox)[..],
            [Action::Publish(Event::LeaderChanged { term: 2, .. })]
        ));
    }

    fn gossip_declaration(epoch: u64) -> ElectionMessage {
        ElectionMessage::Gossip(crate::election::GossipMessage::Declaration(
            conclave_protocol::Declaration { epoch },
        ))
    }

    fn voted(term: u64) -> HardState {
        HardState {
            term,
            vote: Some(id("a")),
            ..HardState::default()
        }
    }

    /// Issue 16, item 3: in a typed batch, the message that follows a persist waits for it,
    /// and so does everything decided before the driver reports it durable, however many
    /// batches are taken meanwhile; once it is, outputs leave at once again.
    #[test]
    fn a_batch_holds_back_what_follows_a_write_until_it_is_reported_durable() {
        let mut outbox = Outbox::new(HardState::default(), Role::Follower, "follower");
        outbox.push(Action::Broadcast {
            message: gossip_declaration(1),
        });
        outbox.send(voted(2), id("b"), gossip_declaration(2));
        let first = outbox.take_ready();
        // What came before the persist depends on nothing unwritten.
        assert_eq!(
            first.messages,
            vec![Outgoing::Broadcast {
                message: gossip_declaration(1)
            }]
        );
        let persist = first.persist.expect("the vote is persisted");
        assert_eq!(persist.seq, PersistSeq(1));
        assert_eq!(persist.writes, vec![DurableWrite::HardState(voted(2))]);
        let after = first.after_persist.expect("the answer waits");
        assert_eq!((after.seq, after.messages.len()), (PersistSeq(1), 1));
        assert!(outbox.is_persisting());

        // Decided while the write is in flight: no persist of its own, but it waits for #1.
        outbox.send(voted(2), id("c"), gossip_declaration(2));
        outbox.publish(Event::TransferAborted { target: id("c") });
        outbox.finish(standing(2, Role::Follower, None));
        let second = outbox.take_ready();
        assert!(second.persist.is_none() && second.messages.is_empty());
        assert!(second.events.is_empty());
        let after = second.after_persist.expect("behind the write in flight");
        assert_eq!(after.seq, PersistSeq(1));
        assert_eq!((after.messages.len(), after.events.len()), (1, 1));

        // A second write while the first is in flight: what follows it waits for #2, even
        // once #1 is durable.
        outbox.send(voted(3), id("b"), gossip_declaration(3));
        let third = outbox.take_ready();
        assert_eq!(third.persist.as_ref().map(|p| p.seq), Some(PersistSeq(2)));
        outbox.handle_persisted(PersistSeq(1));
        assert!(outbox.is_persisting());
        outbox.send(voted(3), id("c"), gossip_declaration(3));
        let fourth = outbox.take_ready();
        assert_eq!(fourth.after_persist.map(|a| a.seq), Some(PersistSeq(2)));

        // Reported durable: nothing waits any more. A report past what was handed out does
        // not count a batch not yet taken as durable.
        outbox.handle_persisted(PersistSeq(9));
        assert!(!outbox.is_persisting());
        outbox.send(voted(3), id("b"), gossip_declaration(3));
        let fifth = outbox.take_ready();
        assert!(fifth.after_persist.is_none() && fifth.persist.is_none());
        assert_eq!(fifth.messages.len(), 1);
        outbox.send(voted(4), id("b"), gossip_declaration(4));
        let sixth = outbox.take_ready();
        assert_eq!(sixth.persist.map(|p| p.seq), Some(PersistSeq(3)));
        assert_eq!(sixth.after_persist.map(|a| a.seq), Some(PersistSeq(3)));
        assert!(outbox.take_ready().is_empty());
    }

    /// Several writes decided between two batches go out as one group, and `Stopped` is
    /// carried as a flag after everything else.
    #[test]
    fn writes_between_two_batches_are_one_group() {
        let mut outbox = Outbox::new(HardState::default(), Role::Follower, "follower");
        outbox.persist(voted(1));
        outbox.push(Action::PersistAutoElection(false));
        outbox.persist_as(voted(2), Action::PersistAmnesic);
        outbox.push(Action::Stopped);
        let ready = outbox.take_ready();
        assert_eq!(
            ready.persist,
            Some(PersistBatch {
                seq: PersistSeq(1),
                writes: vec![
                    DurableWrite::HardState(voted(1)),
                    DurableWrite::AutoElection(false),
                    DurableWrite::Amnesic(voted(2)),
                ],
            })
        );
        assert!(ready.stopped && ready.after_persist.is_none());
    }

    fn append(commit: u64) -> ElectionMessage {
        ElectionMessage::Raft(crate::raft::RaftMessage::AppendEntries(
            conclave_protocol::AppendEntries {
                commit,
                ..conclave_protocol::AppendEntries::new(1, id("a"))
            },
        ))
    }

    fn send(to: &str, message: ElectionMessage) -> Action {
        Action::Send {
            to: id(to),
            message,
        }
    }

    /// Issue 27, item 1: the same AppendEntries to two followers leaves once, naming both;
    /// different ones, and anything that is not an AppendEntries, stay one per peer.
    #[test]
    fn the_same_append_to_several_followers_is_one_multicast() {
        let mut outbox = Outbox::new(HardState::default(), Role::Leader, "leader");
        outbox.push(send("b", append(3)));
        outbox.push(send("c", append(3)));
        outbox.push(send("d", append(2)));
        outbox.push(send("b", gossip_declaration(1)));
        outbox.push(send("c", gossip_declaration(1)));
        let ready = outbox.take_ready();
        assert_eq!(
            ready.messages,
            vec![
                Outgoing::Multicast {
                    to: vec![id("b"), id("c")],
                    message: append(3),
                },
                Outgoing::Send {
                    to: id("d"),
                    message: append(2),
                },
                Outgoing::Send {
                    to: id("b"),
                    message: gossip_declaration(1),
                },
                Outgoing::Send {
                    to: id("c"),
                    message: gossip_declaration(1),
                },
            ]
        );
        // A synchronous driver sees one send per peer, as before.
        assert_eq!(
            ready.into_actions(),
            vec![
                send("b", append(3)),
                send("c", append(3)),
                send("d", append(2)),
                send("b", gossip_declaration(1)),
                send("c", gossip_declaration(1)),
            ]
        );
    }

    /// A send joins an earlier copy only when nothing else for its peer came between them:
    /// every peer receives its messages in the order they were decided.
    #[test]
    fn coalescing_keeps_each_peers_order() {
        let mut outbox = Outbox::new(HardState::default(), Role::Leader, "leader");
        outbox.push(send("b", append(3)));
        outbox.push(send("c", append(4)));
        // c's copy of the first message would overtake its `append(4)`: it stays apart.
        outbox.push(send("c", append(3)));
        outbox.push(send("b", append(4)));
        outbox.push(Action::Broadcast {
            message: gossip_declaration(1),
        });
        // Nothing may join a copy queued before a broadcast everyone hears.
        outbox.push(send("d", append(3)));
        let messages = outbox.take_ready().messages;
        assert_eq!(
            messages,
            vec![
                Outgoing::Send {
                    to: id("b"),
                    message: append(3),
                },
                Outgoing::Multicast {
                    to: vec![id("c"), id("b")],
                    message: append(4),
                },
                Outgoing::Send {
                    to: id("c"),
                    message: append(3),
                },
                Outgoing::Broadcast {
                    message: gossip_declaration(1),
                },
                Outgoing::Send {
                    to: id("d"),
                    message: append(3),
                },
            ]
        );
    }
}
