//! Settings of the priority election, with seed 002's timing constants as defaults (PRI-2,
//! PRI-3, PRI-5, PRI-6), and their rules ([`PriorityConfig::validate`], each problem under the
//! [`PrioritySetting`] it concerns).

use std::time::Duration;

use conclave_protocol::PeerId;

use crate::election::{ElectionError, PrioritySetting, SettingProblem, millis};

/// The settings of one node's priority election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityConfig {
    /// This node.
    pub id: PeerId,
    /// How long a node collects answers to its `Discover` (seed: `kDiscoveryTimeoutMs`,
    /// 500 ms).
    pub discovery_timeout: Duration,
    /// How long a candidate campaigns before it only waits for votes (seed:
    /// `kCampaignTimeoutMs`, 200 ms).
    pub campaign_timeout: Duration,
    /// How long a candidate then waits for the last votes (seed: `kVoteTimeoutMs`, 300 ms).
    pub vote_timeout: Duration,
    /// Upper bound (exclusive) of the random delay added before the first discovery, to every
    /// discovery and to every campaign retry, so that nodes started together do not speak at
    /// once (seed: `kRandomDelayMaxMs`, 100 ms).
    pub jitter_max: Duration,
    /// How many times a candidate that did not hear every peer accept it campaigns again
    /// before it falls back to the seed's own rule, "the highest priority I know of wins"
    /// (seed: `kMaxElectionRetries`, 3).
    pub max_retries: u8,
    /// How often the master announces itself (seed: `kHeartbeatIntervalMs`, 1 s).
    pub announce_interval: Duration,
    /// Silence after which a follower declares its master dead and starts a new round (seed:
    /// `kMasterTimeoutMs`, 3 s).
    pub master_timeout: Duration,
    /// The battery level assumed until the first [`HealthReading`](crate::election::HealthReading)
    /// (a gateway on mains: 100).
    pub battery_percent: u8,
    /// A master whose battery is at or below this level resigns, naming a successor whose
    /// battery is above it (seed 002's checklist: "Master battery drops to 15%"; default 15).
    pub low_battery_percent: u8,
    /// This node is master regardless of score from the start (seed: NVS `force_master`).
    pub force_master: bool,
    /// Whether this node campaigns by itself (`conclave auto-election`); off, it still
    /// discovers, votes and follows, and never becomes master by election.
    pub auto_election: bool,
}

impl PriorityConfig {
    /// Seed 002's defaults: discovery 500 ms, campaign 200 ms, votes 300 ms, jitter up to
    /// 100 ms, 3 retries, announce every 1 s, master dead after 3 s; battery 100 % until read,
    /// resign at 15 %; not forced; automatic election on.
    pub fn new(id: PeerId) -> Self {
        Self {
            id,
            discovery_timeout: Duration::from_millis(500),
            campaign_timeout: Duration::from_millis(200),
            vote_timeout: Duration::from_millis(300),
            jitter_max: Duration::from_millis(100),
            max_retries: 3,
            announce_interval: Duration::from_secs(1),
            master_timeout: Duration::from_secs(3),
            battery_percent: 100,
            low_battery_percent: 15,
            force_master: false,
            auto_election: true,
        }
    }

    /// The longest a leaderless cluster takes to elect, from the moment the last master
    /// stopped announcing, when no frame is lost: the master timeout, a jittered discovery,
    /// one campaign and its votes (issue 9's budget: 3 s + discovery + campaign + votes, plus
    /// the jitter).
    pub fn failover_budget(&self) -> Duration {
        self.master_timeout
            + self.discovery_timeout
            + self.jitter_max
            + self.campaign_timeout
            + self.vote_timeout
    }

    /// Every problem with these settings, in one error, each under the setting it concerns.
    pub fn validate(&self) -> Result<(), ElectionError> {
        let mut problems = Vec::new();
        for (setting, value) in [
            (PrioritySetting::DiscoveryTimeout, self.discovery_timeout),
            (PrioritySetting::CampaignTimeout, self.campaign_timeout),
            (PrioritySetting::VoteTimeout, self.vote_timeout),
            (PrioritySetting::AnnounceInterval, self.announce_interval),
            (PrioritySetting::MasterTimeout, self.master_timeout),
        ] {
            if value.is_zero() {
                problems.push(SettingProblem::new(setting, "must be greater than zero"));
            }
        }
        if self.announce_interval >= self.master_timeout {
            problems.push(SettingProblem::new(
                PrioritySetting::AnnounceInterval,
                format!(
                    "must be less than the master timeout ({} >= {}), or followers declare a \
                     live master dead",
                    millis(self.announce_interval),
                    millis(self.master_timeout)
                ),
            ));
        }
        if self.battery_percent > 100 {
            problems.push(SettingProblem::new(
                PrioritySetting::BatteryPercent,
                format!("must be 0-100, found {}", self.battery_percent),
            ));
        }
        if self.low_battery_percent >= 100 {
            problems.push(SettingProblem::new(
                PrioritySetting::LowBatteryPercent,
                format!(
                    "must be below 100, found {}, or every master resigns",
                    self.low_battery_percent
                ),
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

    /// PRI-2, PRI-3: the defaults are seed 002's constants, and they validate.
    #[test]
    fn pri2_pri3_defaults_are_the_seed_constants() {
        let config = PriorityConfig::new(PeerId::new("pod-1").unwrap());
        assert_eq!(config.discovery_timeout, Duration::from_millis(500));
        assert_eq!(config.campaign_timeout, Duration::from_millis(200));
        assert_eq!(config.vote_timeout, Duration::from_millis(300));
        assert_eq!(config.jitter_max, Duration::from_millis(100));
        assert_eq!(config.max_retries, 3);
        assert_eq!(config.announce_interval, Duration::from_secs(1));
        assert_eq!(config.master_timeout, Duration::from_secs(3));
        assert_eq!(config.failover_budget(), Duration::from_millis(4100));
        assert!(config.validate().is_ok());
    }

    /// PRI-2, PRI-3, PRI-5: validation names every bad setting at once, each problem under the
    /// setting it concerns.
    #[test]
    fn validation_lists_every_problem_under_its_setting() {
        let mut config = PriorityConfig::new(PeerId::new("pod-1").unwrap());
        config.vote_timeout = Duration::ZERO;
        config.announce_interval = Duration::from_secs(5);
        config.battery_percent = 101;
        config.low_battery_percent = 100;
        let ElectionError::InvalidConfig(problems) = config.validate().unwrap_err() else {
            panic!("expected InvalidConfig");
        };
        let settings: Vec<_> = problems.iter().map(|problem| problem.setting).collect();
        assert_eq!(
            settings,
            [
                PrioritySetting::VoteTimeout,
                PrioritySetting::AnnounceInterval,
                PrioritySetting::BatteryPercent,
                PrioritySetting::LowBatteryPercent,
            ]
            .map(Setting::Priority),
            "{problems:?}"
        );
        assert_eq!(
            problems[1].message,
            "must be less than the master timeout (5000ms >= 3000ms), or followers declare a \
             live master dead"
        );
    }
}
