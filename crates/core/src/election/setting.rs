//! Which setting of an election core a configuration problem concerns (issue 9, item 7).
//!
//! Every mode's `validate()` reports each broken rule as a [`SettingProblem`]: the [`Setting`]
//! it concerns, typed, and a message in the core's words. Whoever reads the settings from a
//! file (conclave-config's settings) maps each [`Setting`] to its own key with an exhaustive `match`,
//! so a setting added here is a compile error there until it has a key, and no problem is
//! matched to a key by searching its text.
//!
//! Only the settings some rule checks have a variant: a setting no rule can refuse needs no
//! name here.

use std::fmt;
use std::time::Duration;

use crate::election::Mode;

/// The setting of an election core that a [`SettingProblem`] concerns, by mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Setting {
    /// A setting of raft's configuration (`RaftConfig`).
    Raft(RaftSetting),
    /// A setting of the gossip election's configuration (`GossipConfig`).
    Gossip(GossipSetting),
    /// A setting of the priority election's configuration (`PriorityConfig`).
    Priority(PrioritySetting),
    /// A setting of static leadership (`StaticConfig`).
    Static(StaticSetting),
}

/// A field of raft's configuration that a rule checks (RAFT-2, RAFT-4, RAFT-6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RaftSetting {
    /// `quorum`: voters mode needs a voter.
    Quorum,
    /// `heartbeat_interval`: positive, and below the minimum election timeout.
    HeartbeatInterval,
    /// `election_timeout_max`: not below the minimum.
    ElectionTimeoutMax,
    /// `suspicion_floor`: with adaptive detection, at least two heartbeat intervals and at
    /// most the maximum election timeout.
    SuspicionFloor,
    /// The replicated log (`[log]`): only with `voters` quorum, positive batch sizes (LOG-1).
    ReplicatedLog,
}

/// A field of the gossip election's configuration that a rule checks (GOS-1..5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GossipSetting {
    /// `startup_grace_period`: positive.
    StartupGracePeriod,
    /// `membership_sample_interval`: positive.
    MembershipSampleInterval,
    /// `leader_alive_threshold`: at least 2 ms, since the leader declares every half of it.
    LeaderAliveThreshold,
    /// `leader_election_duration`: positive.
    LeaderElectionDuration,
    /// `org_leader`: not together with `use_leader_election`.
    OrgLeader,
}

/// A field of the priority election's configuration that a rule checks (PRI-2..6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PrioritySetting {
    /// `discovery_timeout`: positive.
    DiscoveryTimeout,
    /// `campaign_timeout`: positive.
    CampaignTimeout,
    /// `vote_timeout`: positive.
    VoteTimeout,
    /// `announce_interval`: positive, and below the master timeout.
    AnnounceInterval,
    /// `master_timeout`: positive.
    MasterTimeout,
    /// `battery_percent`: 0–100.
    BatteryPercent,
    /// `low_battery_percent`: below 100.
    LowBatteryPercent,
}

/// A field of static leadership's configuration that a rule checks (STA-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StaticSetting {
    /// `leader`: one of the members, when there are any.
    Leader,
}

impl Setting {
    /// The field's name in its mode's configuration, such as `heartbeat_interval`.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Raft(setting) => match setting {
                RaftSetting::Quorum => "quorum",
                RaftSetting::HeartbeatInterval => "heartbeat_interval",
                RaftSetting::ElectionTimeoutMax => "election_timeout_max",
                RaftSetting::SuspicionFloor => "suspicion_floor",
                RaftSetting::ReplicatedLog => "log",
            },
            Setting::Gossip(setting) => match setting {
                GossipSetting::StartupGracePeriod => "startup_grace_period",
                GossipSetting::MembershipSampleInterval => "membership_sample_interval",
                GossipSetting::LeaderAliveThreshold => "leader_alive_threshold",
                GossipSetting::LeaderElectionDuration => "leader_election_duration",
                GossipSetting::OrgLeader => "org_leader",
            },
            Setting::Priority(setting) => match setting {
                PrioritySetting::DiscoveryTimeout => "discovery_timeout",
                PrioritySetting::CampaignTimeout => "campaign_timeout",
                PrioritySetting::VoteTimeout => "vote_timeout",
                PrioritySetting::AnnounceInterval => "announce_interval",
                PrioritySetting::MasterTimeout => "master_timeout",
                PrioritySetting::BatteryPercent => "battery_percent",
                PrioritySetting::LowBatteryPercent => "low_battery_percent",
            },
            Setting::Static(setting) => match setting {
                StaticSetting::Leader => "leader",
            },
        }
    }

    /// The mode the setting belongs to.
    pub fn mode(self) -> Mode {
        match self {
            Setting::Raft(_) => Mode::Raft,
            Setting::Gossip(_) => Mode::Gossip,
            Setting::Priority(_) => Mode::Priority,
            Setting::Static(_) => Mode::Static,
        }
    }
}

impl fmt::Display for Setting {
    /// `raft heartbeat_interval`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.mode(), self.name())
    }
}

impl From<RaftSetting> for Setting {
    fn from(setting: RaftSetting) -> Self {
        Setting::Raft(setting)
    }
}

impl From<GossipSetting> for Setting {
    fn from(setting: GossipSetting) -> Self {
        Setting::Gossip(setting)
    }
}

impl From<PrioritySetting> for Setting {
    fn from(setting: PrioritySetting) -> Self {
        Setting::Priority(setting)
    }
}

impl From<StaticSetting> for Setting {
    fn from(setting: StaticSetting) -> Self {
        Setting::Static(setting)
    }
}

/// One broken rule of an election core's configuration: the setting it concerns and what is
/// wrong with it.
///
/// The message is relative to the setting ("must be greater than zero") and shows durations in
/// whole milliseconds where they are whole ([`millis`]), the unit the configuration file
/// writes them in. Displayed as `raft heartbeat_interval: must be greater than zero`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingProblem {
    /// The setting.
    pub setting: Setting,
    /// What is wrong, lowercase, with the offending values.
    pub message: String,
}

impl SettingProblem {
    /// A problem with `setting`.
    pub fn new(setting: impl Into<Setting>, message: impl Into<String>) -> Self {
        Self {
            setting: setting.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for SettingProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.setting, self.message)
    }
}

/// `duration` as a problem message shows it: `1500ms` when it is a whole number of
/// milliseconds (every duration read from a configuration file is), so the operator sees the
/// value as written; otherwise as `Debug` prints it (`1.5ms`).
pub fn millis(duration: Duration) -> String {
    if duration.subsec_nanos() % 1_000_000 == 0 {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{duration:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations are shown in whole milliseconds, as a configuration file writes them, and
    /// only fractions fall back to `Debug`.
    #[test]
    fn durations_are_shown_in_milliseconds() {
        assert_eq!(millis(Duration::from_millis(1500)), "1500ms");
        assert_eq!(millis(Duration::from_secs(86_400)), "86400000ms");
        assert_eq!(millis(Duration::ZERO), "0ms");
        assert_eq!(millis(Duration::from_micros(1500)), "1.5ms");
    }

    /// A problem reads as its mode, its setting and its message.
    #[test]
    fn a_problem_names_its_mode_and_setting() {
        let problem = SettingProblem::new(RaftSetting::HeartbeatInterval, "must be positive");
        assert_eq!(
            problem.setting,
            Setting::Raft(RaftSetting::HeartbeatInterval)
        );
        assert_eq!(
            problem.to_string(),
            "raft heartbeat_interval: must be positive"
        );
    }
}
