//! The settings of the gossip election: Fabric's four timings and its static leadership switch
//! (GOS-1..5), and their rules ([`GossipConfig::validate`], each problem under the
//! [`GossipSetting`] it concerns).

use std::time::Duration;

use conclave_protocol::PeerId;

use crate::election::{ElectionError, GossipSetting, SettingProblem, millis};

/// Fabric's `peer.gossip.election.startupGracePeriod` default.
pub const DEFAULT_STARTUP_GRACE_PERIOD: Duration = Duration::from_secs(15);
/// Fabric's `peer.gossip.election.membershipSampleInterval` default.
pub const DEFAULT_MEMBERSHIP_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// Fabric's `peer.gossip.election.leaderAliveThreshold` default.
pub const DEFAULT_LEADER_ALIVE_THRESHOLD: Duration = Duration::from_secs(10);
/// Fabric's `peer.gossip.election.leaderElectionDuration` default.
pub const DEFAULT_LEADER_ELECTION_DURATION: Duration = Duration::from_secs(5);

/// How many alive thresholds a yielding leader stays out of elections when no other leader
/// shows up (Fabric's yield timer: six times `leaderAliveThreshold`).
const YIELD_THRESHOLDS: u32 = 6;

/// The settings of one node's gossip election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipConfig {
    /// This node.
    pub id: PeerId,
    /// GOS-1: the longest a starting node waits for a stable membership view (15 s).
    pub startup_grace_period: Duration,
    /// GOS-1: how often the view is sampled while starting; two equal samples in a row make it
    /// stable (1 s).
    pub membership_sample_interval: Duration,
    /// GOS-3: a follower that hears no declaration of its leader for this long forgets it and
    /// runs an election (10 s). A leader declares every half of it.
    pub leader_alive_threshold: Duration,
    /// GOS-2: how long a proposer collects proposals and declarations before it declares
    /// itself (5 s).
    pub leader_election_duration: Duration,
    /// GOS-5: elect dynamically (Fabric's `useLeaderElection`, default true). When false the
    /// node never proposes; it leads if and only if `org_leader` is set.
    pub use_leader_election: bool,
    /// GOS-5: with `use_leader_election = false`, this node is its organisation's leader
    /// (Fabric's `orgLeader`, default false).
    pub org_leader: bool,
    /// The operator's automatic-election switch (`conclave auto-election`, persisted by the
    /// driver): when off, the node proposes nothing but still follows, and a leader keeps
    /// leading.
    pub auto_election: bool,
}

impl GossipConfig {
    /// Fabric's defaults: dynamic election, 15 s grace, 1 s sampling, 10 s alive threshold,
    /// 5 s election.
    pub fn new(id: PeerId) -> Self {
        Self {
            id,
            startup_grace_period: DEFAULT_STARTUP_GRACE_PERIOD,
            membership_sample_interval: DEFAULT_MEMBERSHIP_SAMPLE_INTERVAL,
            leader_alive_threshold: DEFAULT_LEADER_ALIVE_THRESHOLD,
            leader_election_duration: DEFAULT_LEADER_ELECTION_DURATION,
            use_leader_election: true,
            org_leader: false,
            auto_election: true,
        }
    }

    /// Static leadership (GOS-5): `use_leader_election = false` and `org_leader` as given.
    pub fn static_leadership(id: PeerId, org_leader: bool) -> Self {
        Self {
            use_leader_election: false,
            org_leader,
            ..Self::new(id)
        }
    }

    /// Sets the four timings at once, in Fabric's order.
    pub fn with_timings(
        mut self,
        startup_grace_period: Duration,
        membership_sample_interval: Duration,
        leader_alive_threshold: Duration,
        leader_election_duration: Duration,
    ) -> Self {
        self.startup_grace_period = startup_grace_period;
        self.membership_sample_interval = membership_sample_interval;
        self.leader_alive_threshold = leader_alive_threshold;
        self.leader_election_duration = leader_election_duration;
        self
    }

    /// How often a leader declares itself: half the alive threshold, as in Fabric, so a
    /// follower misses one declaration before it gives its leader up.
    pub fn declaration_interval(&self) -> Duration {
        self.leader_alive_threshold / 2
    }

    /// How long a leader that yielded stays out of elections if no other leader appears.
    pub fn yield_duration(&self) -> Duration {
        self.leader_alive_threshold * YIELD_THRESHOLDS
    }

    /// The failover budget the timings predict: a dead leader is given up after the alive
    /// threshold, and its successor declares one election later (15 s with the defaults).
    pub fn failover_budget(&self) -> Duration {
        self.leader_alive_threshold + self.leader_election_duration
    }

    /// Every problem with these settings, in one error, each under the setting it concerns.
    pub fn validate(&self) -> Result<(), ElectionError> {
        let mut problems = Vec::new();
        for (setting, value) in [
            (GossipSetting::StartupGracePeriod, self.startup_grace_period),
            (
                GossipSetting::MembershipSampleInterval,
                self.membership_sample_interval,
            ),
            (
                GossipSetting::LeaderElectionDuration,
                self.leader_election_duration,
            ),
        ] {
            if value.is_zero() {
                problems.push(SettingProblem::new(setting, "must be greater than zero"));
            }
        }
        // The declaration interval is half of it, and must not be zero either.
        if self.leader_alive_threshold < Duration::from_millis(2) {
            problems.push(SettingProblem::new(
                GossipSetting::LeaderAliveThreshold,
                format!(
                    "must be at least 2ms, found {}: the leader declares every half of it",
                    millis(self.leader_alive_threshold)
                ),
            ));
        }
        if self.use_leader_election && self.org_leader {
            problems.push(SettingProblem::new(
                GossipSetting::OrgLeader,
                "is true while use_leader_election is true too: a node either takes part in \
                 the dynamic election or is its organisation's static leader; set \
                 use_leader_election = false to make this node the static leader",
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ElectionError::InvalidConfig(problems))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::election::Setting;

    /// GOS-1..3: the defaults are Fabric's (core.yaml `peer.gossip.election`).
    #[test]
    fn defaults_are_fabrics() {
        let config = GossipConfig::new(PeerId::new("a").unwrap());
        assert_eq!(config.startup_grace_period, Duration::from_secs(15));
        assert_eq!(config.membership_sample_interval, Duration::from_secs(1));
        assert_eq!(config.leader_alive_threshold, Duration::from_secs(10));
        assert_eq!(config.leader_election_duration, Duration::from_secs(5));
        assert_eq!(config.declaration_interval(), Duration::from_secs(5));
        assert_eq!(config.yield_duration(), Duration::from_secs(60));
        assert_eq!(config.failover_budget(), Duration::from_secs(15));
        assert!(config.use_leader_election && !config.org_leader && config.auto_election);
        assert!(config.validate().is_ok());
        assert!(
            GossipConfig::static_leadership(PeerId::new("a").unwrap(), true)
                .validate()
                .is_ok()
        );
    }

    /// GOS-1..5: validation lists every problem at once, each under the setting it concerns.
    #[test]
    fn validation_lists_every_problem_under_its_setting() {
        let mut config = GossipConfig::new(PeerId::new("a").unwrap()).with_timings(
            Duration::ZERO,
            Duration::ZERO,
            Duration::from_millis(1),
            Duration::ZERO,
        );
        config.org_leader = true;
        let Err(ElectionError::InvalidConfig(problems)) = config.validate() else {
            panic!("expected InvalidConfig");
        };
        let settings: Vec<_> = problems.iter().map(|problem| problem.setting).collect();
        assert_eq!(
            settings,
            [
                GossipSetting::StartupGracePeriod,
                GossipSetting::MembershipSampleInterval,
                GossipSetting::LeaderElectionDuration,
                GossipSetting::LeaderAliveThreshold,
                GossipSetting::OrgLeader,
            ]
            .map(Setting::Gossip),
            "{problems:?}"
        );
        assert_eq!(
            problems[3].message,
            "must be at least 2ms, found 1ms: the leader declares every half of it"
        );
        assert!(
            problems[4].message.contains("use_leader_election"),
            "{problems:?}"
        );
    }
}
