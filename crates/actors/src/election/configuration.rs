//! The log cluster's configuration as the ElectionActor reports it (MEMB-1, MEMB-2, CB-1, CB-2,
//! CB-4). The core decides who votes and who only learns; this shell only says so: each
//! `ConfigurationChanged` the core publishes is logged, counted in
//! `conclave_log_configuration_changes_total` and published on the event bus as a
//! [`MembershipChange`] (the `membership_changed` event of `/v1/events`, the
//! `on_membership_change` hook, the façade's subscribers), with what this node is in the new
//! configuration, so that a removed node's hook can stop what it runs. After every input the
//! configuration in force and, on the leader, each learner's lag go to the metrics, from the
//! same log status the admin API's status answer is built from.

use std::time::SystemTime;

use conclave_core::raft::LogStatus;
use conclave_protocol::PeerId;
use tracing::info;

use super::ElectionActor;
use crate::events::{MemberRole, MembershipChange, NodeEvent, unix_millis};

impl ElectionActor {
    /// MEMB-1: the configuration this node acts on changed.
    pub(super) fn configuration_changed(
        &mut self,
        index: u64,
        voters: Vec<PeerId>,
        learners: Vec<PeerId>,
    ) {
        let role = MemberRole::of(self.driver.election().id(), &voters, &learners);
        info!(
            index,
            ?voters,
            ?learners,
            this_node = role.label(),
            "cluster configuration changed"
        );
        self.metrics.configuration_changed();
        self.events
            .publish(NodeEvent::MembershipChanged(MembershipChange {
                index,
                voters,
                learners,
                role,
                at_unix_ms: unix_millis(SystemTime::now()),
            }));
    }

    /// MEMB-1, MEMB-2: the configuration in force and the learners' lag, for the metrics.
    pub(super) fn configuration_metrics(&self, status: &LogStatus) {
        self.metrics.set_configuration(
            status.configuration.voters.len(),
            status.configuration.learners.len(),
            status.configuration_index,
        );
        self.metrics.set_learner_lag(&status.learner_lag);
    }
}
