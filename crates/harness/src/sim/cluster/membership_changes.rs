//! Membership changes in the simulator (MEMB-1, MEMB-2): a fresh node added to a running
//! cluster, changes proposed at the leader, and removed nodes retired for good.

use conclave_core::election::Election;
use conclave_core::raft::{LogPosition, MembershipChange, MembershipError};
use conclave_protocol::{Configuration, PeerId};

use super::{LinkAddr, SimNode, Simulation, node_id};

impl Simulation {
    /// Starts a fresh node (the next `nK`) with an empty log and the seed configuration,
    /// which does not name it: it takes no part until a leader adds it, and then learns the
    /// log (and the configuration) as a learner. Returns its index.
    pub fn add_node(&mut self) -> usize {
        self.add_node_seeded(None)
    }

    /// [`Simulation::add_node`] with `cluster.voters` of its own (`None`: the simulation's):
    /// the control's node started with a configuration that names itself, as a careless join
    /// would.
    pub fn add_node_seeded(&mut self, seed_voters: Option<Vec<PeerId>>) -> usize {
        let index = self.nodes.len();
        let id = node_id(index);
        let mut node = SimNode::new(id, LinkAddr::new(format!("sim:{}", index + 1)));
        node.seed_voters = seed_voters;
        self.nodes.push(node);
        self.network.add_node();
        self.trace
            .record(self.now, id, || "new node started".to_string(), 9);
        self.boot(index);
        index
    }

    /// Node `index` leaves the simulation for good (a node removed from the cluster and
    /// decommissioned): it crashes and never restarts.
    pub fn retire(&mut self, index: usize) {
        self.crash(index);
        self.nodes[index].retired = true;
    }

    /// Whether node `index` was retired.
    pub fn is_retired(&self, index: usize) -> bool {
        self.nodes[index].retired
    }

    /// The live leader proposes `change` (MEMB-1); refused as a follower refuses when no live
    /// node leads.
    pub fn propose_membership(
        &mut self,
        change: MembershipChange,
    ) -> Result<LogPosition, MembershipError> {
        let Some(&leader) = self.leaders().first() else {
            return Err(MembershipError::NotLeader { leader: None });
        };
        let now = self.now;
        let id = self.nodes[leader].id;
        let shown = format!("{change:?}");
        let proposed = self.nodes[leader]
            .driver
            .as_mut()
            .and_then(|driver| driver.election_mut().replicated_log())
            .map(|mut log| log.propose_membership(now, change))
            .unwrap_or(Err(MembershipError::NotLeader { leader: None }));
        self.trace
            .record(now, id, || format!("{shown} proposed: {proposed:?}"), 9);
        self.pump(leader, None);
        proposed
    }

    /// The configuration node `index` acts on, while it runs.
    pub fn configuration(&self, index: usize) -> Option<Configuration> {
        match self.nodes[index].driver.as_ref()?.election() {
            Election::Raft(raft) => raft.configuration(),
            _ => None,
        }
    }
}
