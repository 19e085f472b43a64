//! Membership changes of the log's cluster (MEMB-1, MEMB-2): one server at a time, through
//! configuration entries in the log (Raft dissertation §4.1).
//!
//! A leader turns a [`MembershipChange`] into the next configuration and appends it as an
//! [`EntryKind::Config`] entry. Every node acts on the latest configuration in its log as
//! soon as it is appended, committed or not (`log.rs`), and reverts when a truncation
//! removes it. The rules that keep a single leader per term across the change:
//!
//! - **One change at a time.** A change adds or removes one voter, so any majority of the old
//!   voters and any majority of the new ones share a node. A second change waits until the
//!   first is committed: otherwise two uncommitted changes in a row could reach a
//!   configuration whose majorities miss the first's.
//! - **A committed entry of the leader's own term first.** A leader elected under the old
//!   configuration may not know of a change an earlier leader appended but did not commit;
//!   committing an entry of its own term settles which changes survive before it adds one
//!   (the dissertation's fix, found after publication).
//! - **Learners** receive the log but never vote, campaign or count toward commit, so adding
//!   one changes no majority; a learner is promoted only once it holds the log through the
//!   commit index (etcd's rule), so the new voter does not slow every commit while it catches up.
//! - **A removed leader** replicates the configuration that removes it, counting only the
//!   voters of that configuration, and steps down once it commits (`replication.rs`).
//!
//! The argument in full is in `docs/design.md` (MEMB-1, MEMB-2).

use conclave_protocol::{Configuration, EntryKind, MemberAddress};

use super::*;

/// One change of the configuration (MEMB-1, MEMB-2, MEMB-3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipChange {
    /// A new member that receives the log and does not vote, with where it is reached
    /// (MEMB-3: kept in the configuration's address book, so every node can reach it).
    AddLearner(PeerId, MemberAddress),
    /// A learner becomes a voter, once caught up.
    Promote(PeerId),
    /// A voter or learner leaves the cluster.
    Remove(PeerId),
}

/// Why a membership change was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// Only the leader changes the configuration; the leader known, if any.
    #[error("not the leader")]
    NotLeader {
        /// The leader this node knows in its term.
        leader: Option<PeerId>,
    },
    /// The leader is handing over; the successor takes the change.
    #[error("leadership is being transferred")]
    Transferring,
    /// The node is stopping.
    #[error("the node is shutting down")]
    ShuttingDown,
    /// The log's cluster has no configuration: `connected` mode has no voter set.
    #[error("membership changes need quorum = \"voters\"")]
    NoConfiguration,
    /// A configuration entry is not committed yet: one change at a time.
    #[error(
        "the configuration change at index {index} is not committed yet (commit index {commit}); one change at a time"
    )]
    ChangeInProgress {
        /// The uncommitted configuration entry.
        index: u64,
        /// The commit index now.
        commit: u64,
    },
    /// This leader has not committed an entry of its own term yet.
    #[error("this leader has not committed an entry of its term {term} yet; retry once it has")]
    LeaderNotSettled {
        /// The leader's term.
        term: u64,
    },
    /// The peer is a member already.
    #[error("{peer} is already a {role} of the cluster")]
    AlreadyMember {
        /// The peer.
        peer: PeerId,
        /// `voter` or `learner`.
        role: &'static str,
    },
    /// Only a learner can be promoted.
    #[error("{peer} is not a learner of the cluster (voters are promoted already)")]
    NotALearner {
        /// The peer.
        peer: PeerId,
    },
    /// The learner does not hold the log through the commit index yet (etcd's rule).
    #[error(
        "learner {peer} is not caught up: it holds the log through index {matched}, {behind} entries behind the commit index {commit}"
    )]
    LearnerBehind {
        /// The learner.
        peer: PeerId,
        /// The last index known to match the leader's log.
        matched: u64,
        /// The leader's commit index.
        commit: u64,
        /// `commit - matched`.
        behind: u64,
    },
    /// The peer is not a member.
    #[error("{peer} is not a member of the cluster")]
    NotAMember {
        /// The peer.
        peer: PeerId,
    },
    /// The cluster would be left without a voter.
    #[error("{peer} is the last voter; a cluster needs one")]
    LastVoter {
        /// The peer.
        peer: PeerId,
    },
}

impl ReplicatedLog<'_> {
    /// MEMB-1, MEMB-2: appends the configuration `change` leads to, on the leader; the answer
    /// is the entry's position. The change is in force on every node that appends it and is
    /// done when that entry commits. Refused while another change is uncommitted, before this
    /// leader committed an entry of its term, for a learner not caught up, and for the last
    /// voter (see the module docs).
    pub fn propose_membership(
        &mut self,
        now: Instant,
        change: MembershipChange,
    ) -> Result<LogPosition, MembershipError> {
        let raft = &mut *self.raft;
        let asked = change.clone();
        let next = raft.next_configuration(change)?;
        let term = raft.hard.term;
        let index = raft.log.append_new(term, EntryKind::Config, next.encode());
        info!(index, change = ?asked, "membership change proposed");
        raft.replicate_to_all(now);
        // A single voter commits alone, once its write is durable.
        raft.advance_commit(now);
        raft.finish();
        Ok(LogPosition::new(term, index))
    }

    /// MEMB-1: the configuration in force (`cluster.voters` until the log holds one); `None`
    /// in `connected` mode.
    pub fn configuration(&self) -> Option<Configuration> {
        self.raft.configuration()
    }

    /// MEMB-1: the configuration in force at `index` (at or after the snapshot's) as the log
    /// holds it; `None` when no configuration entry or snapshot ever carried one.
    pub(crate) fn configuration_at(&self, index: u64) -> Option<Configuration> {
        self.raft.log.configuration_at(index).cloned()
    }
}

impl Raft {
    /// The configuration `change` leads to, or why it may not be made now.
    fn next_configuration(
        &self,
        change: MembershipChange,
    ) -> Result<Configuration, MembershipError> {
        if self.shutdown.is_some() {
            return Err(MembershipError::ShuttingDown);
        }
        if !self.is_leader() {
            return Err(MembershipError::NotLeader {
                leader: self.leader,
            });
        }
        if self.transfer().is_some() {
            return Err(MembershipError::Transferring);
        }
        let mut config = self
            .configuration()
            .ok_or(MembershipError::NoConfiguration)?;
        let commit = self.log.commit();
        if let Some(index) = self
            .log
            .configuration_index()
            .filter(|index| *index > commit)
        {
            return Err(MembershipError::ChangeInProgress { index, commit });
        }
        if self.log.term_at(commit) != Some(self.hard.term) {
            return Err(MembershipError::LeaderNotSettled {
                term: self.hard.term,
            });
        }
        match change {
            MembershipChange::AddLearner(peer, address) => {
                if let Some(role) = role_in(&config, peer) {
                    return Err(MembershipError::AlreadyMember { peer, role });
                }
                config.learners.insert(peer);
                if !address.is_empty() {
                    config.addresses.insert(peer, address);
                }
            }
            MembershipChange::Promote(peer) => {
                if !config.learners.contains(&peer) {
                    return Err(MembershipError::NotALearner { peer });
                }
                let matched = self.match_index_of(peer);
                if matched < commit {
                    return Err(MembershipError::LearnerBehind {
                        peer,
                        matched,
                        commit,
                        behind: commit - matched,
                    });
                }
                config.learners.remove(&peer);
                config.voters.insert(peer);
            }
            MembershipChange::Remove(peer) => {
                if role_in(&config, peer).is_none() {
                    return Err(MembershipError::NotAMember { peer });
                }
                if config.voters.len() == 1 && config.voters.contains(&peer) {
                    return Err(MembershipError::LastVoter { peer });
                }
                config.voters.remove(&peer);
                config.learners.remove(&peer);
                config.addresses.remove(&peer);
            }
        }
        Ok(config)
    }

    /// MEMB-2: on the leader, how many entries each learner of the configuration in force is
    /// behind this leader's last entry.
    pub(super) fn learner_lag(&self) -> Vec<(PeerId, u64)> {
        if !self.is_leader() {
            return Vec::new();
        }
        let last = self.log.last().index;
        self.learners()
            .map(|peer| (peer, last.saturating_sub(self.match_index_of(peer))))
            .collect()
    }
}

/// `voter` or `learner`, when `peer` is a member of `config`.
fn role_in(config: &Configuration, peer: PeerId) -> Option<&'static str> {
    if config.voters.contains(&peer) {
        Some("voter")
    } else if config.learners.contains(&peer) {
        Some("learner")
    } else {
        None
    }
}
