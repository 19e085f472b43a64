//! The membership of the cluster as `conclave cluster status` judges it (MEMB-1, MEMB-2): from
//! the configuration the nodes report, not from a voter list in a configuration file, which
//! only seeds the first configuration and goes stale with the first `member add` or `remove`.
//!
//! The leader's report wins: it is the node that proposes and commits changes, and it alone
//! knows each learner's lag. Without a leader, the configuration most answering nodes report
//! wins, the newest among equals. Nodes of a version that reports no configuration (or without
//! the replicated log) leave only their `cluster.voters`, which is then all there is.

use std::collections::{BTreeMap, BTreeSet};

use conclave_api::{ConfigurationAnswer, StatusAnswer};

use crate::render;

/// Who the cluster's members are, as judged from the answering nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Members {
    /// The configuration reported, when any node reports one.
    configuration: Option<ConfigurationAnswer>,
    /// Without one: the `cluster.voters` every answering node names.
    seed_voters: BTreeSet<String>,
}

impl Members {
    /// The members the answering nodes report (see the module docs).
    pub(crate) fn judge(answering: &[&StatusAnswer]) -> Self {
        let reported = |status: &&StatusAnswer| {
            status
                .log
                .as_ref()
                .and_then(|log| log.configuration.clone())
        };
        let from_leader = answering
            .iter()
            .filter(|status| status.role == "leader")
            .find_map(reported);
        let configuration =
            from_leader.or_else(|| most_reported(answering.iter().filter_map(reported)));
        Self {
            configuration,
            seed_voters: answering
                .iter()
                .flat_map(|status| status.voters.iter().cloned())
                .collect(),
        }
    }

    /// The voters.
    pub(crate) fn voters(&self) -> Vec<&str> {
        match &self.configuration {
            Some(configuration) => configuration.voters.iter().map(String::as_str).collect(),
            None => self.seed_voters.iter().map(String::as_str).collect(),
        }
    }

    /// Every member: voters, then learners.
    pub(crate) fn everyone(&self) -> Vec<&str> {
        let mut all = self.voters();
        if let Some(configuration) = &self.configuration {
            all.extend(configuration.learners.iter().map(String::as_str));
        }
        all
    }

    /// The ROLE column for `status`: its election role, except that a node that follows as a
    /// learner, or is no member at all, says so (a removed leader still leads until its
    /// removal commits, and says that).
    pub(crate) fn role_of(&self, status: &StatusAnswer) -> String {
        let Some(configuration) = &self.configuration else {
            return status.role.clone();
        };
        if status.role == "leader" || configuration.voters.contains(&status.node_id) {
            status.role.clone()
        } else if configuration.learners.contains(&status.node_id) {
            "learner".to_owned()
        } else {
            "not a member".to_owned()
        }
    }

    /// The line under the table: the configuration with each learner's lag, when reported.
    pub(crate) fn line(&self) -> Option<String> {
        self.configuration
            .as_ref()
            .map(|configuration| format!("members: {}", render::members(configuration)))
    }
}

/// The configuration most of `reports` name, the newest (highest index) among equals.
fn most_reported(
    reports: impl Iterator<Item = ConfigurationAnswer>,
) -> Option<ConfigurationAnswer> {
    // Keyed by what makes two reports the same configuration; counted with one of them.
    type Same = (u64, Vec<String>, Vec<String>);
    let mut tally: BTreeMap<Same, (usize, ConfigurationAnswer)> = BTreeMap::new();
    for report in reports {
        let key = (report.index, report.voters.clone(), report.learners.clone());
        tally.entry(key).or_insert((0, report)).0 += 1;
    }
    // Keys ascend by index, so `max_by_key`, which keeps the last of equal counts, picks the
    // newest among the most reported.
    tally
        .into_values()
        .max_by_key(|(count, _)| *count)
        .map(|(_, configuration)| configuration)
}

/// Where the answering nodes' configurations differ (a change on its way, or a node cut off
/// from the leader): `index 12 at a, b; index 10 at c`, or `None` when they agree.
fn disagreement(answering: &[&StatusAnswer]) -> Option<String> {
    let mut at: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for status in answering {
        if let Some(configuration) = status
            .log
            .as_ref()
            .and_then(|log| log.configuration.as_ref())
        {
            at.entry(configuration.index)
                .or_default()
                .push(&status.node_id);
        }
    }
    (at.len() > 1).then(|| {
        at.iter()
            .map(|(index, nodes)| format!("index {index} at {}", nodes.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// The note `cluster status` gives when the answering nodes' configurations differ.
pub(crate) fn disagreement_note(answering: &[&StatusAnswer]) -> Option<String> {
    disagreement(answering).map(|differ| {
        format!(
            "nodes act on different configurations ({differ}): a membership change is on its \
             way, or a node is cut off from the leader"
        )
    })
}

#[cfg(test)]
mod tests {
    use conclave_api::{LearnerLagAnswer, LogStatus};

    use super::*;

    fn configuration(index: u64, voters: &[&str], learners: &[&str]) -> ConfigurationAnswer {
        ConfigurationAnswer {
            voters: voters.iter().map(|v| (*v).to_owned()).collect(),
            learners: learners.iter().map(|l| (*l).to_owned()).collect(),
            index,
            committed: true,
            learner_lag: Vec::new(),
        }
    }

    fn node(id: &str, role: &str, reported: Option<ConfigurationAnswer>) -> StatusAnswer {
        let answer = serde_json::json!({
            "node_id": id, "cluster_id": "c", "mode": "raft", "quorum": "voters",
            "quorum_size": 2, "electorate": 3, "role": role, "term": 3, "leader": "a",
            "fencing_token": "3:a", "voted_for": null, "auto_election": true,
            "manual_override": false, "pinned_leader": null, "quarantined": false,
            "incarnation": 1, "authenticated": true, "peers": [], "dongle": null,
            "voters": ["a", "b", "c"],
        });
        let mut status: StatusAnswer = serde_json::from_value(answer).expect("a status answer");
        status.log = reported.map(|configuration| LogStatus {
            last_index: 9,
            commit_index: 9,
            applied_index: 9,
            persisted_index: 9,
            snapshot_index: 0,
            followers: Vec::new(),
            configuration: Some(configuration),
        });
        status
    }

    /// MEMB-1: the leader's configuration wins over the file's `cluster.voters` and over a
    /// follower that has not caught up; a learner and a removed node are named as such.
    #[test]
    fn memb1_the_leaders_configuration_names_the_members() {
        let mut newest = configuration(12, &["a", "b", "d"], &["e"]);
        newest.learner_lag = vec![LearnerLagAnswer {
            peer_id: "e".to_owned(),
            lag: 7,
        }];
        let nodes = [
            node("a", "leader", Some(newest.clone())),
            node(
                "b",
                "follower",
                Some(configuration(10, &["a", "b", "c"], &[])),
            ),
            node(
                "c",
                "follower",
                Some(configuration(10, &["a", "b", "c"], &[])),
            ),
            node("e", "follower", Some(newest)),
        ];
        let answering: Vec<&StatusAnswer> = nodes.iter().collect();
        let members = Members::judge(&answering);
        assert_eq!(members.voters(), ["a", "b", "d"]);
        assert_eq!(members.everyone(), ["a", "b", "d", "e"]);
        assert_eq!(members.role_of(&nodes[0]), "leader");
        assert_eq!(members.role_of(&nodes[2]), "not a member");
        assert_eq!(members.role_of(&nodes[3]), "learner");
        assert_eq!(
            members.line().as_deref(),
            Some("members: voters a b d; learners e (7 behind) (index 12)")
        );
        assert_eq!(
            disagreement(&answering).as_deref(),
            Some("index 10 at b, c; index 12 at a, e")
        );
    }

    /// MEMB-1: without a leader the configuration most nodes report wins; nodes that report
    /// none leave the file's voters.
    #[test]
    fn memb1_without_a_leader_the_most_reported_configuration_wins() {
        let nodes = [
            node(
                "a",
                "follower",
                Some(configuration(10, &["a", "b"], &["c"])),
            ),
            node(
                "b",
                "follower",
                Some(configuration(10, &["a", "b"], &["c"])),
            ),
            node(
                "c",
                "candidate",
                Some(configuration(8, &["a", "b", "c"], &[])),
            ),
        ];
        let answering: Vec<&StatusAnswer> = nodes.iter().collect();
        assert_eq!(Members::judge(&answering).voters(), ["a", "b"]);

        let old = [node("a", "leader", None), node("b", "follower", None)];
        let answering: Vec<&StatusAnswer> = old.iter().collect();
        let members = Members::judge(&answering);
        assert_eq!(members.everyone(), ["a", "b", "c"]);
        assert_eq!(members.role_of(&old[1]), "follower");
        assert_eq!(members.line(), None);
        assert_eq!(disagreement(&answering), None);
    }
}
