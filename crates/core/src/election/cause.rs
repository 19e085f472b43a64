//! Why a leader changed (CB-6), in the words every election mode shares. The WAL stores a
//! cause by its position in [`LeaderChangeCause::ALL`], so causes are only ever appended.

/// Why the leader changed, recorded in the leadership history (CB-6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaderChangeCause {
    /// The leader was not heard for an election timeout.
    ElectionTimeout,
    /// This node won an election.
    VoteWon,
    /// A leader's message (heartbeat or higher term) named the leader.
    LeaderHeard,
    /// A message with a higher term made the old leader stale.
    HigherTerm,
    /// A manual `SetLeader` / `LeaderAssign` (RAFT-8).
    SetLeader,
    /// A leadership transfer completed.
    Transfer,
    /// The leader resigned (Yield).
    Resign,
    /// Two leaders met in one term; the larger id stayed (RAFT-6 connected mode).
    TieBreak,
    /// The leader could not hear a quorum and stepped down (RAFT-7).
    QuorumLost,
    /// This node's id was refused as a duplicate and it left the election (MEM-3).
    Quarantined,
    /// This node stopped while it led, without a successor taking over first.
    Shutdown,
    /// A gossip leader gave leadership up on purpose (GOS-4 `Yield`).
    Yield,
    /// A leader of higher priority took over: a priority-mode split brain resolved (PRI-6) or a
    /// raft leader handing over to a caught-up voter of higher priority (RAFT-10).
    Priority,
    /// The leader is the one the configuration names (STA-1, GOS-5, PRI-6's forced master).
    Configured,
    /// Membership reports the leader unreachable (its liveness timeout ran out, or it said
    /// goodbye) in a mode where nobody elects a replacement: a static follower (STA-1).
    LeaderLost,
}

impl LeaderChangeCause {
    /// Every cause, in a fixed order (the WAL stores a cause by its position here, so new
    /// causes are only ever appended).
    pub const ALL: &'static [LeaderChangeCause] = &[
        LeaderChangeCause::ElectionTimeout,
        LeaderChangeCause::VoteWon,
        LeaderChangeCause::LeaderHeard,
        LeaderChangeCause::HigherTerm,
        LeaderChangeCause::SetLeader,
        LeaderChangeCause::Transfer,
        LeaderChangeCause::Resign,
        LeaderChangeCause::TieBreak,
        LeaderChangeCause::QuorumLost,
        LeaderChangeCause::Quarantined,
        LeaderChangeCause::Shutdown,
        LeaderChangeCause::Yield,
        LeaderChangeCause::Priority,
        LeaderChangeCause::Configured,
        LeaderChangeCause::LeaderLost,
    ];

    /// The cause with this label.
    pub fn from_label(label: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|cause| cause.label() == label)
    }

    /// A snake_case name for history records, logs and hooks.
    pub fn label(self) -> &'static str {
        match self {
            LeaderChangeCause::ElectionTimeout => "election_timeout",
            LeaderChangeCause::VoteWon => "vote_won",
            LeaderChangeCause::LeaderHeard => "leader_heard",
            LeaderChangeCause::HigherTerm => "higher_term",
            LeaderChangeCause::SetLeader => "set_leader",
            LeaderChangeCause::Transfer => "transfer",
            LeaderChangeCause::Resign => "resign",
            LeaderChangeCause::TieBreak => "tie_break",
            LeaderChangeCause::QuorumLost => "quorum_lost",
            LeaderChangeCause::Quarantined => "quarantined",
            LeaderChangeCause::Shutdown => "shutdown",
            LeaderChangeCause::Yield => "yield",
            LeaderChangeCause::Priority => "priority",
            LeaderChangeCause::Configured => "configured",
            LeaderChangeCause::LeaderLost => "leader_lost",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CB-6: every cause has a distinct label that maps back to it.
    #[test]
    fn cause_labels_round_trip() {
        let mut labels = std::collections::BTreeSet::new();
        for &cause in LeaderChangeCause::ALL {
            assert!(labels.insert(cause.label()));
            assert_eq!(LeaderChangeCause::from_label(cause.label()), Some(cause));
        }
        assert_eq!(LeaderChangeCause::from_label("nope"), None);
    }
}
