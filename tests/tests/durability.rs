//! Whole nodes in one process (memory link, real WALs, paused clock) around what the WAL keeps
//! and what it must not lose (WAL-2, RAFT-8): a node whose WAL was deleted abstains until it
//! has heard every voter, a data directory opens once at a time, and the operator's
//! automatic-election switch outlives a restart.

#![expect(
    clippy::unwrap_used,
    reason = "the helpers are test code: a failed unwrap is a failed test"
)]

use std::path::PathBuf;
use std::time::Duration;

use conclave_actors::memory::MemoryHub;
use conclave_actors::node::{Node, NodeBuilder, NodeError};
use conclave_config::Quorum;
use conclave_core::election::{Command, CommandOutcome, ModeStatus, Role};
use conclave_protocol::PeerId;
use conclave_storage::{WAL_FILE_NAME, WalError, WalRecord, read_records};
use conclave_tests::{ClusterOptions, MemoryCluster, node_config, test_log};

const SETTLE: Duration = Duration::from_secs(10);
const NAMES: [&str; 3] = ["a", "b", "c"];

/// Three nodes on a memory hub, each with a data directory the test can reach.
struct Nodes {
    hub: MemoryHub,
    dir: tempfile::TempDir,
    nodes: Vec<Option<Node>>,
    starts: u64,
}

impl Nodes {
    async fn start() -> Self {
        let mut nodes = Self {
            hub: MemoryHub::new(),
            dir: tempfile::tempdir().unwrap(),
            nodes: vec![None, None, None],
            starts: 0,
        };
        for index in 0..NAMES.len() {
            nodes.start_node(index).await.unwrap();
        }
        nodes
    }

    fn data_dir(&self, index: usize) -> PathBuf {
        self.dir.path().join(NAMES[index])
    }

    fn builder(&mut self, index: usize) -> NodeBuilder {
        self.starts += 1;
        let options = ClusterOptions::paused_clock(Quorum::Voters);
        let config = node_config(NAMES[index], &NAMES, &options, &self.data_dir(index));
        NodeBuilder::new(config)
            .memory_link(self.hub.clone(), u32::try_from(index).unwrap())
            .rng_seed(self.starts * 7919 + index as u64)
            .wal_on_event_loop()
    }

    async fn start_node(&mut self, index: usize) -> Result<(), NodeError> {
        let node = self.builder(index).start().await?;
        self.nodes[index] = Some(node);
        Ok(())
    }

    async fn kill(&mut self, index: usize) {
        if let Some(node) = self.nodes[index].take() {
            node.kill().await;
        }
    }

    fn node(&self, index: usize) -> &Node {
        self.nodes[index].as_ref().unwrap()
    }

    /// The leader every running node names in the same term, with every node out of
    /// abstention.
    async fn agreed_leader(&self) -> Option<usize> {
        let mut agreed = None;
        for node in self.nodes.iter().flatten() {
            let status = node.handle().election_status().await.ok()?;
            if status.abstaining {
                return None;
            }
            let claim = (status.leader?, status.term);
            if agreed.is_some_and(|seen| seen != claim) {
                return None;
            }
            agreed = Some(claim);
        }
        let (leader, _) = agreed?;
        NAMES
            .iter()
            .position(|&name| PeerId::from_static(name) == leader)
    }

    async fn await_leader(&self) -> usize {
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            if let Some(leader) = self.agreed_leader().await {
                return leader;
            }
            assert!(tokio::time::Instant::now() < deadline, "no agreed leader");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop(mut self) {
        for node in self.nodes.iter_mut() {
            if let Some(node) = node.take() {
                node.stop().await;
            }
        }
    }
}

/// Every `(term, vote)` a node's WAL records.
fn votes(records: &[WalRecord]) -> Vec<(u64, String)> {
    records
        .iter()
        .filter_map(|record| match record {
            WalRecord::HardState(state) => state.vote.map(|vote| (state.term, vote.to_string())),
            _ => None,
        })
        .collect()
}

/// Panics if any term holds two different votes.
fn assert_one_vote_per_term(votes: &[(u64, String)]) {
    let mut seen = std::collections::BTreeMap::new();
    for (term, vote) in votes {
        let first = seen.entry(*term).or_insert(vote.clone());
        assert_eq!(first, vote, "two votes in term {term}: {votes:?}");
    }
}

/// WAL-2: a follower whose WAL is deleted comes back amnesic and abstains: while the leader is
/// down it reports so and waits for exactly that voter, so the third node cannot win an
/// election with its vote; once the leader is back, the abstention ends, the cluster agrees
/// on a leader again, and across the lost WAL the node recorded no second vote in any term.
#[actix_rt::test]
async fn wal2_node_that_lost_its_wal_abstains_until_every_voter_is_heard() {
    let _log = test_log();
    tokio::time::pause();
    let mut nodes = Nodes::start().await;
    let leader = nodes.await_leader().await;
    let victim = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    nodes.kill(victim).await;
    nodes.kill(leader).await;
    let wal = nodes.data_dir(victim).join(WAL_FILE_NAME);
    let before = read_records(&nodes.data_dir(victim)).unwrap();
    assert!(!votes(&before).is_empty(), "it voted before: {before:?}");
    std::fs::remove_file(&wal).unwrap();

    nodes.start_node(victim).await.unwrap();
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let status = nodes.node(victim).handle().election_status().await.unwrap();
        assert!(status.abstaining, "it abstains from its start");
        if status.detail.abstaining_until_heard() == [PeerId::from_static(NAMES[leader])] {
            let ModeStatus::Raft(raft) = &status.detail else {
                panic!("a raft node reports raft's detail: {status:?}");
            };
            assert_eq!(raft.vote, None);
            assert_eq!(status.role, Role::Follower);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{status:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        nodes
            .node(victim)
            .handle()
            .metrics()
            .value("conclave_election_abstaining", &[]),
        Some(1.0)
    );
    let other_status = nodes.node(other).handle().election_status().await.unwrap();
    assert_ne!(
        other_status.role,
        Role::Leader,
        "no majority without the victim's vote"
    );

    nodes.start_node(leader).await.unwrap();
    nodes.await_leader().await;
    let status = nodes.node(victim).handle().election_status().await.unwrap();
    assert!(!status.abstaining);
    assert_eq!(
        nodes
            .node(victim)
            .handle()
            .metrics()
            .value("conclave_election_abstaining", &[]),
        Some(0.0)
    );
    let after = read_records(&nodes.data_dir(victim)).unwrap();
    let mut all = votes(&before);
    all.extend(votes(&after));
    assert_one_vote_per_term(&all);
    nodes.stop().await;
}

/// WAL-2 (one process per data directory): a second node on a data directory in use is
/// refused before it reads or writes a byte of the WAL, naming the directory and the pid.
#[actix_rt::test]
async fn wal2_second_node_on_a_data_directory_is_refused() {
    let _log = test_log();
    tokio::time::pause();
    let mut nodes = Nodes::start().await;
    nodes.await_leader().await;
    let wal = nodes.data_dir(0).join(WAL_FILE_NAME);
    let bytes = std::fs::read(&wal).unwrap();
    let error = nodes.builder(0).start().await.unwrap_err();
    assert!(
        matches!(&error, NodeError::Wal(WalError::Locked { dir, pid: Some(pid) })
            if dir == &nodes.data_dir(0) && *pid == std::process::id()),
        "{error:?}"
    );
    assert_eq!(std::fs::read(&wal).unwrap(), bytes);
    nodes.stop().await;
}

/// RAFT-8: `auto-election off` on a node survives its restart, overriding `election.auto =
/// true` of its configuration, and `on` is remembered the same way.
#[actix_rt::test]
async fn raft8_auto_election_switch_survives_a_restart() {
    let _log = test_log();
    tokio::time::pause();
    let mut cluster =
        MemoryCluster::start(&NAMES, ClusterOptions::paused_clock(Quorum::Voters)).await;
    let leader = cluster.await_leader(SETTLE).await;
    let node = (leader + 1) % 3;
    for enabled in [false, true] {
        let outcome = cluster
            .handle(node)
            .command(Command::EnableAutoElection(enabled))
            .await
            .unwrap();
        assert_eq!(outcome, Ok(CommandOutcome::Applied));
        cluster.restart(node).await;
        let status = cluster.handle(node).election_status().await.unwrap();
        assert_eq!(status.auto_election, enabled);
    }
    cluster.stop().await;
}
