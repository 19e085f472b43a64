//! Raft's election settings, their rules, and the two quorum rules (RAFT-2, RAFT-4, RAFT-6,
//! RAFT-7), adaptive failure detection's among them. [`RaftConfig::validate`] is the one place
//! raft's timing rules are checked; each problem names the [`RaftSetting`] it concerns.

use std::collections::BTreeSet;
use std::time::Duration;

use conclave_protocol::PeerId;

use crate::election::{ElectionError, RaftSetting, SettingProblem, millis};

/// Who counts towards a quorum (RAFT-6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuorumMode {
    /// A majority of the configured voters. At most one leader per term anywhere; required by
    /// the replicated log. Nodes outside the set follow but never campaign or vote.
    Voters(BTreeSet<PeerId>),
    /// Seed 000's room semantics: the electorate is this node plus the peers membership
    /// currently reports connected, with [`majority_threshold`]. Every partition can elect its
    /// own leader; on healing the higher term wins, and on an equal term the byte-wise larger
    /// peer id.
    Connected,
}

impl QuorumMode {
    /// `"voters"` or `"connected"`, as in the configuration and the status answer.
    pub fn label(&self) -> &'static str {
        match self {
            QuorumMode::Voters(_) => "voters",
            QuorumMode::Connected => "connected",
        }
    }
}

/// Votes needed among `total_nodes` (self included) in `connected` mode: 1 for one or two
/// nodes, so a pair survives the loss of either; a strict majority from three nodes up.
pub fn majority_threshold(total_nodes: usize) -> usize {
    if total_nodes <= 2 {
        1
    } else {
        total_nodes / 2 + 1
    }
}

/// The settings of one node's election state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftConfig {
    /// This node.
    pub id: PeerId,
    /// The quorum rule.
    pub quorum: QuorumMode,
    /// How often a leader sends heartbeats (RAFT-4).
    pub heartbeat_interval: Duration,
    /// Lower bound of the randomized election timeout (RAFT-2).
    pub election_timeout_min: Duration,
    /// Upper bound (exclusive) of the randomized election timeout; equal to the minimum for a
    /// fixed timeout.
    pub election_timeout_max: Duration,
    /// Run a pre-vote round before incrementing the term (RAFT-7).
    pub pre_vote: bool,
    /// A leader that cannot hear a quorum for an election timeout steps down, and followers
    /// that hear a leader ignore disruptive vote requests (RAFT-7).
    pub check_quorum: bool,
    /// Whether this node starts elections by itself (RAFT-8 `EnableAutoLeaderElection`).
    pub auto_election: bool,
    /// Stagger election timeouts by rank instead of spreading them uniformly over
    /// `[min, max)`: the electable nodes (the voters, or in `connected` mode this node and its
    /// connected peers), without the leader just lost, are ordered by RAFT-10 priority
    /// (when any is known) and then byte-wise larger id first, and rank `r` of `n` times out
    /// at `min + r·(max − min)/n`. The first survivor then campaigns right at the minimum
    /// with nobody to split the vote with, which is what makes failover fast; the slot gap
    /// keeps the others from competing unless it fails. The ordering agrees with the pre-vote
    /// stand-aside rule. Only a follower's first timeout is ranked; a node already
    /// campaigning retries on the uniform spread. Off gives the Raft paper's uniform
    /// randomized timeouts.
    pub ranked_timeouts: bool,
    /// RAFT-2, RAFT-7: failure detection that adapts to the link. A follower learns how far
    /// apart its leader's beats arrive and suspects the leader once it is overdue on this link
    /// (smoothed gap + 4 × its mean deviation + one heartbeat), never sooner than
    /// `suspicion_floor` nor later than `election_timeout_max`; that suspicion takes the place
    /// of `election_timeout_min` as the base of its election timeout (the rank slots or the
    /// random spread stay above it), and the leader lease it keeps against disruptive
    /// candidates shrinks with it. Until six gaps of the current leader were seen, the fixed
    /// timeout holds. Off gives the fixed `[min, max)` timeouts alone.
    pub adaptive_timeout: bool,
    /// The earliest a follower with [`RaftConfig::adaptive_timeout`] suspects its leader after
    /// last hearing it: at least two heartbeat intervals (a single lost heartbeat must never
    /// look like a dead leader), at most `election_timeout_max`. `None` (the default) derives
    /// it from the heartbeat ([`RaftConfig::suspicion_floor`]), so that a faster heartbeat
    /// brings it down with it.
    pub suspicion_floor: Option<Duration>,
    /// RAFT-10: this node's priority, 0–255 (higher is preferred). It ranks the election
    /// timeouts (priority first, then id) and lets a leader of lower priority hand over to
    /// this node. `None` (the default) ranks below every priority, and a leader without one is
    /// never preempted; in a cluster where no node has one, elections run exactly as without
    /// RAFT-10. A health reading with a priority
    /// ([`crate::election::HealthReading::priority`]) replaces it while the node runs, like
    /// keepalived's track scripts.
    pub priority: Option<u8>,
    /// RAFT-10: how long a healthy leader waits, once it hears a caught-up voter of higher
    /// priority, before it hands leadership to that voter.
    pub preempt_delay: Duration,
    /// RAFT-10: keepalived's `nopreempt`: this node, when it leads, never hands over to a
    /// voter only because that voter's priority is higher.
    pub nopreempt: bool,
    /// LOG-1..5: the replicated log, when this node carries one (`[log] enabled`); `None`
    /// elects exactly as without a log: heartbeats carry no entries and no leader appends.
    /// Needs `voters` quorum: a log committed by a `connected` majority is not a majority of
    /// anything.
    pub log: Option<LogConfig>,
}

/// How the replicated log travels (LOG-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// Bytes of entries in one AppendEntries at most: what fits the smallest link's frame
    /// beside the envelope (UDP: one datagram; ESP-NOW: 250-byte frames). An entry larger than
    /// this travels alone, in chunks that fit it (MEMB-6).
    pub max_append_bytes: usize,
    /// Entries in one AppendEntries at most.
    pub max_append_entries: usize,
    /// AppendEntries sent to one follower and not yet answered, at most: the pipeline's
    /// window.
    pub max_inflight: usize,
    /// LOG-4: a snapshot is due once this many entries were applied since the last one, and the
    /// log is compacted behind it; 0 never snapshots (the log then grows without bound).
    pub snapshot_entries: u64,
    /// Issue 27, item 2: followers take turns answering AppendEntries with entries, so that
    /// each index gets the answers its commit needs at once and the others ride on later
    /// answers (`node/acks.rs`). For a broadcast link, where every answer takes the air from
    /// every other frame; the configuration turns it on with an ESP-NOW link.
    pub shared_acks: bool,
}

impl Default for LogConfig {
    /// One UDP datagram well below a 1500-byte MTU, 64 entries, a window of 8, a snapshot
    /// every 10,000 entries.
    fn default() -> Self {
        Self {
            max_append_bytes: 1024,
            max_append_entries: 64,
            max_inflight: 8,
            snapshot_entries: 10_000,
            shared_acks: false,
        }
    }
}

impl RaftConfig {
    /// Defaults of docs/design.md §9: voters mode with `voters`, heartbeat 250 ms, election timeout
    /// 1500–3000 ms, pre-vote and check-quorum on, automatic election on, adaptive detection
    /// on with its floor derived from the heartbeat (625 ms: two and a half heartbeats).
    pub fn new(id: PeerId, voters: impl IntoIterator<Item = PeerId>) -> Self {
        Self {
            id,
            quorum: QuorumMode::Voters(voters.into_iter().collect()),
            heartbeat_interval: Duration::from_millis(250),
            election_timeout_min: Duration::from_millis(1500),
            election_timeout_max: Duration::from_millis(3000),
            pre_vote: true,
            check_quorum: true,
            auto_election: true,
            ranked_timeouts: true,
            adaptive_timeout: true,
            suspicion_floor: None,
            priority: None,
            preempt_delay: Duration::from_secs(5),
            nopreempt: false,
            log: None,
        }
    }

    /// The same settings with the replicated log on.
    pub fn with_log(mut self, log: LogConfig) -> Self {
        self.log = Some(log);
        self
    }

    /// The same settings in `connected` quorum mode.
    pub fn connected(id: PeerId) -> Self {
        Self {
            quorum: QuorumMode::Connected,
            ..Self::new(id, [])
        }
    }

    /// Sets both election timeout bounds.
    pub fn with_election_timeout(mut self, min: Duration, max: Duration) -> Self {
        self.election_timeout_min = min;
        self.election_timeout_max = max;
        self
    }

    /// Switches adaptive failure detection on with `floor` as its earliest suspicion.
    pub fn with_adaptive_timeout(mut self, floor: Duration) -> Self {
        self.adaptive_timeout = true;
        self.suspicion_floor = Some(floor);
        self
    }

    /// Switches adaptive failure detection off: the fixed `[min, max)` timeouts alone.
    pub fn with_fixed_timeout(mut self) -> Self {
        self.adaptive_timeout = false;
        self
    }

    /// The floor adaptive detection uses: the one set, or else two and a half heartbeat
    /// intervals (one lost heartbeat and half an interval of lateness are never a dead
    /// leader), but no more than `election_timeout_max`.
    pub fn suspicion_floor(&self) -> Duration {
        self.suspicion_floor
            .unwrap_or_else(|| (self.heartbeat_interval * 5 / 2).min(self.election_timeout_max))
    }

    /// Sets the heartbeat interval.
    pub fn with_heartbeat(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Every problem with these settings, in one error, each under the setting it concerns.
    pub fn validate(&self) -> Result<(), ElectionError> {
        let mut problems = Vec::new();
        if self.heartbeat_interval.is_zero() {
            problems.push(SettingProblem::new(
                RaftSetting::HeartbeatInterval,
                "must be greater than zero",
            ));
        }
        if self.heartbeat_interval >= self.election_timeout_min {
            // Followers must hear a heartbeat well within their election timeout (RAFT-4).
            problems.push(SettingProblem::new(
                RaftSetting::HeartbeatInterval,
                format!(
                    "must be less than the minimum election timeout ({} >= {})",
                    millis(self.heartbeat_interval),
                    millis(self.election_timeout_min)
                ),
            ));
        }
        if self.election_timeout_max < self.election_timeout_min {
            problems.push(SettingProblem::new(
                RaftSetting::ElectionTimeoutMax,
                format!(
                    "must not be less than the minimum election timeout ({} < {})",
                    millis(self.election_timeout_max),
                    millis(self.election_timeout_min)
                ),
            ));
        }
        if self.adaptive_timeout {
            self.check_suspicion_floor(&mut problems);
        }
        if let QuorumMode::Voters(voters) = &self.quorum {
            if voters.is_empty() {
                problems.push(SettingProblem::new(
                    RaftSetting::Quorum,
                    "voters mode needs at least one voter",
                ));
            }
        }
        if let Some(log) = &self.log {
            if matches!(self.quorum, QuorumMode::Connected) {
                problems.push(SettingProblem::new(
                    RaftSetting::ReplicatedLog,
                    "the replicated log needs quorum = \"voters\": a majority of whoever is \
                     connected does not keep a committed entry",
                ));
            }
            if log.max_append_entries == 0 || log.max_inflight == 0 || log.max_append_bytes == 0 {
                problems.push(SettingProblem::new(
                    RaftSetting::ReplicatedLog,
                    "batch size, bytes per message and the in-flight window must be greater than zero",
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ElectionError::InvalidConfig(problems))
        }
    }

    /// RAFT-2, RAFT-7: a floor that was set lets one heartbeat be lost (at least two
    /// intervals) and is a suspicion the maximum allows. A derived floor is within the maximum
    /// by construction.
    fn check_suspicion_floor(&self, problems: &mut Vec<SettingProblem>) {
        let Some(floor) = self.suspicion_floor else {
            return;
        };
        let least = self.heartbeat_interval * 2;
        if floor < least {
            problems.push(SettingProblem::new(
                RaftSetting::SuspicionFloor,
                format!(
                    "must be at least two heartbeat intervals, so that one lost heartbeat is \
                     not taken for a dead leader ({} < {})",
                    millis(floor),
                    millis(least)
                ),
            ));
        }
        if floor > self.election_timeout_max {
            problems.push(SettingProblem::new(
                RaftSetting::SuspicionFloor,
                format!(
                    "must not be more than the maximum election timeout ({} > {})",
                    millis(floor),
                    millis(self.election_timeout_max)
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RAFT-6 (seed 000 verification): `majority_threshold` for 1, 2, 3, 5 and 7 nodes.
    #[test]
    fn majority_threshold() {
        assert_eq!(super::majority_threshold(1), 1);
        assert_eq!(super::majority_threshold(2), 1);
        assert_eq!(super::majority_threshold(3), 2);
        assert_eq!(super::majority_threshold(4), 3);
        assert_eq!(super::majority_threshold(5), 3);
        assert_eq!(super::majority_threshold(7), 4);
    }

    /// RAFT-2, RAFT-4, RAFT-6: validation reports every problem at once, each under the
    /// setting it concerns, with the durations in milliseconds.
    #[test]
    fn validation_lists_every_problem_under_its_setting() {
        let id = PeerId::new("a").unwrap();
        let mut config = RaftConfig::new(id, []);
        config.heartbeat_interval = Duration::from_millis(2000);
        config.election_timeout_max = Duration::from_millis(1000);
        let ElectionError::InvalidConfig(problems) = config.validate().unwrap_err() else {
            panic!("expected InvalidConfig");
        };
        assert_eq!(
            problems,
            [
                SettingProblem::new(
                    RaftSetting::HeartbeatInterval,
                    "must be less than the minimum election timeout (2000ms >= 1500ms)"
                ),
                SettingProblem::new(
                    RaftSetting::ElectionTimeoutMax,
                    "must not be less than the minimum election timeout (1000ms < 1500ms)"
                ),
                SettingProblem::new(RaftSetting::Quorum, "voters mode needs at least one voter"),
            ]
        );
        config.heartbeat_interval = Duration::ZERO;
        let ElectionError::InvalidConfig(problems) = config.validate().unwrap_err() else {
            panic!("expected InvalidConfig");
        };
        assert_eq!(
            problems[0],
            SettingProblem::new(RaftSetting::HeartbeatInterval, "must be greater than zero")
        );
        assert!(RaftConfig::new(id, [id]).validate().is_ok());
        assert!(RaftConfig::connected(id).validate().is_ok());
    }

    /// RAFT-2, RAFT-7: with adaptive detection on, a floor that was set is at least two
    /// heartbeats and at most the maximum election timeout; with it off, the floor is not
    /// checked; a floor left unset is two and a half heartbeats, within the maximum.
    #[test]
    fn validation_bounds_the_suspicion_floor_when_adaptive_detection_is_on() {
        let id = PeerId::new("a").unwrap();
        let defaults = RaftConfig::new(id, [id]);
        assert!(defaults.adaptive_timeout);
        assert_eq!(defaults.suspicion_floor(), Duration::from_millis(625));
        let fast = RaftConfig::new(id, [id])
            .with_heartbeat(Duration::from_millis(50))
            .with_election_timeout(Duration::from_millis(250), Duration::from_millis(500));
        assert_eq!(fast.suspicion_floor(), Duration::from_millis(125));
        let narrow = RaftConfig::new(id, [id])
            .with_heartbeat(Duration::from_millis(100))
            .with_election_timeout(Duration::from_millis(150), Duration::from_millis(200));
        assert_eq!(narrow.suspicion_floor(), Duration::from_millis(200));
        assert!(narrow.validate().is_ok());
        let config = RaftConfig::new(id, [id]).with_adaptive_timeout(Duration::from_millis(400));
        let ElectionError::InvalidConfig(problems) = config.validate().unwrap_err() else {
            panic!("expected InvalidConfig");
        };
        assert_eq!(
            problems,
            [SettingProblem::new(
                RaftSetting::SuspicionFloor,
                "must be at least two heartbeat intervals, so that one lost heartbeat is not \
                 taken for a dead leader (400ms < 500ms)"
            )]
        );
        let config = RaftConfig::new(id, [id]).with_adaptive_timeout(Duration::from_millis(3500));
        let ElectionError::InvalidConfig(problems) = config.validate().unwrap_err() else {
            panic!("expected InvalidConfig");
        };
        assert_eq!(
            problems,
            [SettingProblem::new(
                RaftSetting::SuspicionFloor,
                "must not be more than the maximum election timeout (3500ms > 3000ms)"
            )]
        );
        for floor in [500, 3000] {
            let config =
                RaftConfig::new(id, [id]).with_adaptive_timeout(Duration::from_millis(floor));
            assert!(config.validate().is_ok(), "floor {floor}");
        }
        let mut off = RaftConfig::new(id, [id]).with_fixed_timeout();
        off.suspicion_floor = Some(Duration::ZERO);
        assert!(off.validate().is_ok());
    }
}
