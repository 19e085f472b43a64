//! Membership-change families (MEMB-1, MEMB-2): a replicated-log cluster under a client's
//! writes and reads changes its configuration one server at a time, amid faults: a learner
//! added and promoted, a follower removed, the leader removed, a change during a partition, a
//! change cut short by a leader crash, a replaced node, a just-promoted voter that loses its
//! whole WAL (MEMB-2 with WAL-2). Every step keeps the Figure-3
//! invariants and the check that no two disjoint sets of voters elect a leader in one term
//! ([`ElectoratesIntersect`](crate::sim::invariants::ElectoratesIntersect)); once faults stop,
//! every change completes, every live node acts on the same configuration, every acknowledged
//! write is held and applied everywhere, and the history is linearizable.

use std::collections::VecDeque;
use std::time::Duration;

use conclave_core::SeededRng;
use conclave_core::raft::{LogConfig, MembershipChange};
use conclave_protocol::MemberAddress;

use crate::sim::cluster::{SimConfig, SimFailure, Simulation};
use crate::sim::invariants::liveness::{await_agreed_leader, check_still_agreed};
use crate::sim::scenario::{CONVERGENCE_BOUND, SETTLE, SeedRun, calm, inject_fault, random_split};

/// One family of membership changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MembershipFamily {
    /// A fresh node joins as a learner and is promoted, amid faults.
    AddAndPromote,
    /// A follower is removed, amid faults, then decommissioned.
    RemoveFollower,
    /// The leader removes itself, amid faults; it steps down once that commits.
    RemoveLeader,
    /// A change proposed while the cluster is split.
    DuringPartition,
    /// The leader crashes moments after proposing a change.
    CutShort,
    /// A voter removed and decommissioned, a fresh node added and promoted in its place.
    Replace,
    /// A fresh node added and promoted, then crashed losing its whole WAL and restarted,
    /// while faults and elections go on (MEMB-2, WAL-2).
    PromotedWalLoss,
}

impl MembershipFamily {
    /// Every family.
    pub const ALL: &'static [MembershipFamily] = &[
        MembershipFamily::AddAndPromote,
        MembershipFamily::RemoveFollower,
        MembershipFamily::RemoveLeader,
        MembershipFamily::DuringPartition,
        MembershipFamily::CutShort,
        MembershipFamily::Replace,
        MembershipFamily::PromotedWalLoss,
    ];

    /// The name used on the replay command line.
    pub fn name(self) -> &'static str {
        match self {
            MembershipFamily::AddAndPromote => "memb-add-promote",
            MembershipFamily::RemoveFollower => "memb-remove-follower",
            MembershipFamily::RemoveLeader => "memb-remove-leader",
            MembershipFamily::DuringPartition => "memb-partition",
            MembershipFamily::CutShort => "memb-cut-short",
            MembershipFamily::Replace => "memb-replace",
            MembershipFamily::PromotedWalLoss => "memb-promoted-wal-loss",
        }
    }

    /// The family a replay command names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|family| family.name() == name)
    }

    fn replay_command(self, seed: u64) -> String {
        format!(
            "CONCLAVE_SIM_REPLAY={}:{seed} cargo test -p conclave-harness --test membership_changes replay -- --ignored --nocapture",
            self.name()
        )
    }
}

/// What a family wants the configuration to reach, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// Node `index` is a learner.
    Learner(usize),
    /// Node `index` is a voter.
    Voter(usize),
    /// Node `index` is no member; once committed, it is decommissioned.
    Gone(usize),
}

/// How long faults go on while the changes are made.
const CHAOS: Duration = Duration::from_millis(1000);
/// Between two attempts at the next change.
const RETRY: Duration = Duration::from_millis(25);

/// Runs one seed of `family`.
pub fn run_membership_seed(family: MembershipFamily, seed: u64, record_trace: bool) -> SeedRun {
    let mut plan = SeededRng::new(seed ^ 0x3e3b_e125_3e3b_e125);
    let sizes: &[usize] = match family {
        MembershipFamily::AddAndPromote => &[1, 2, 3, 3, 4],
        // Two voters at least besides the new one: a voter that lost its WAL votes only once
        // it caught up with a leader, which one other voter alone cannot elect (WAL-2).
        MembershipFamily::PromotedWalLoss => &[2, 3, 3, 4],
        MembershipFamily::RemoveFollower | MembershipFamily::RemoveLeader => &[2, 3, 3, 4, 5],
        MembershipFamily::DuringPartition
        | MembershipFamily::CutShort
        | MembershipFamily::Replace => &[3, 3, 4, 5],
    };
    let nodes = sizes[plan.below(sizes.len() as u64) as usize];
    let mut config = SimConfig::voters(
        nodes,
        Duration::from_millis(50),
        Duration::from_millis(150),
        Duration::from_millis(300),
    );
    if let Some(raft) = config.raft_mut() {
        raft.log = Some(LogConfig {
            max_append_bytes: [120, 1024][plan.below(2) as usize],
            max_append_entries: 1 + plan.below(16) as usize,
            max_inflight: 1 + plan.below(8) as usize,
            // Snapshots every few writes: a new learner far behind gets one, and the
            // configuration must outlive the entries compacted behind it.
            snapshot_entries: plan.between(5, 40),
            shared_acks: false,
        });
        raft.pre_vote = plan.chance(0.75);
        raft.check_quorum = plan.chance(0.75);
        raft.ranked_timeouts = plan.chance(0.5);
    }
    if let Some(membership) = &mut config.membership {
        membership.heartbeat_interval = Duration::from_millis(100);
    }
    config.disk_delay = Duration::from_millis(plan.between(0, 10));
    config.client_interval = Some(Duration::from_millis(plan.between(10, 40)));
    config.record_trace = record_trace;
    let mut sim = match Simulation::new(seed, config) {
        Ok(sim) => sim,
        Err(error) => return SeedRun::refused(seed, error, family.replay_command(seed)),
    };
    sim.set_replay_hint(family.replay_command(seed));
    let outcome = script(family, &mut sim, &mut plan);
    SeedRun::of(&sim, seed, nodes, outcome)
}

fn script(
    family: MembershipFamily,
    sim: &mut Simulation,
    plan: &mut SeededRng,
) -> Result<Duration, SimFailure> {
    sim.set_client_writes(true);
    await_agreed_leader(sim, CONVERGENCE_BOUND)?;
    let n = sim.len();
    let leader = sim.leaders().first().copied().unwrap_or(0);
    let follower = (leader + 1 + plan.below(n as u64 - 1) as usize) % n;
    let mut goals: VecDeque<Goal> = match family {
        MembershipFamily::AddAndPromote | MembershipFamily::PromotedWalLoss => {
            let new = sim.add_node();
            [Goal::Learner(new), Goal::Voter(new)].into()
        }
        MembershipFamily::RemoveFollower => [Goal::Gone(follower)].into(),
        MembershipFamily::RemoveLeader => [Goal::Gone(leader)].into(),
        MembershipFamily::DuringPartition | MembershipFamily::CutShort => {
            if plan.chance(0.5) {
                let target = plan.below(n as u64) as usize;
                [Goal::Gone(target)].into()
            } else {
                let new = sim.add_node();
                [Goal::Learner(new), Goal::Voter(new)].into()
            }
        }
        MembershipFamily::Replace => {
            let new = sim.add_node();
            [Goal::Gone(follower), Goal::Learner(new), Goal::Voter(new)].into()
        }
    };
    match family {
        MembershipFamily::DuringPartition => {
            let end = sim.now() + Duration::from_millis(plan.between(300, 1500));
            let groups = random_split(sim.len(), plan);
            sim.partition(groups);
            drive_until(sim, &mut goals, end)?;
            if plan.chance(0.5) {
                let groups = random_split(sim.len(), plan);
                sim.partition(groups);
                let end = sim.now() + Duration::from_millis(plan.between(100, 800));
                drive_until(sim, &mut goals, end)?;
            }
        }
        MembershipFamily::CutShort => {
            for _ in 0..1 + plan.below(2) {
                let by = sim.now() + Duration::from_secs(2);
                let mut proposed = false;
                while !proposed && sim.now() < by {
                    proposed = match goals.front() {
                        Some(&goal) => sim.propose_membership(change_of(sim, goal)).is_ok(),
                        None => false,
                    };
                    if !proposed {
                        sim.run_for(RETRY)?;
                    }
                }
                if !proposed {
                    break;
                }
                sim.run_for(Duration::from_millis(plan.below(30)))?;
                if let Some(&leader) = sim.leaders().first() {
                    sim.crash(leader);
                    sim.run_for(Duration::from_millis(plan.between(100, 800)))?;
                    sim.restart(leader);
                }
            }
        }
        MembershipFamily::PromotedWalLoss => promote_then_lose_wal(sim, plan, &mut goals)?,
        _ => chaos_with_changes(sim, plan, &mut goals)?,
    }
    calm(sim)?;
    let end = sim.now() + CONVERGENCE_BOUND;
    while !goals.is_empty() && sim.now() < end {
        drive_until(sim, &mut goals, sim.now() + RETRY)?;
        drive(sim, &mut goals);
    }
    if let Some(goal) = goals.front() {
        return Err(sim.failure(
            "membership change completes",
            format!(
                "{goal:?} not reached within {CONVERGENCE_BOUND:?} of healing; {}",
                crate::sim::invariants::liveness::describe(sim)
            ),
        ));
    }
    let convergence = await_agreed_leader(sim, CONVERGENCE_BOUND)?;
    sim.run_for(Duration::from_millis(plan.between(0, 300)))?;
    sim.set_client_writes(false);
    sim.await_log_converged(CONVERGENCE_BOUND)?;
    sim.check_linearizable()?;
    check_still_agreed(sim, SETTLE)?;
    check_configurations_agree(sim)?;
    Ok(convergence)
}

/// Faults at random moments while the changes are attempted.
fn chaos_with_changes(
    sim: &mut Simulation,
    plan: &mut SeededRng,
    goals: &mut VecDeque<Goal>,
) -> Result<(), SimFailure> {
    let end = sim.now() + CHAOS;
    sim.set_crash_mid_step(0.002);
    while sim.now() < end {
        let next = sim.now() + Duration::from_millis(plan.between(20, 400));
        drive_until(sim, goals, next.min(end))?;
        if next < end {
            inject_fault(sim, plan)?;
        }
    }
    Ok(())
}

/// MEMB-2, WAL-2: the learner is added and promoted under loss and reordering, then, at once
/// or a little later (caught up or not), crashes losing its whole WAL; it restarts at a
/// random moment of the faults that follow, the leader crashed first in half the seeds so
/// that elections run while the new voter has no memory of its votes or entries. A change
/// that does not complete here is reported by the script once calm.
fn promote_then_lose_wal(
    sim: &mut Simulation,
    plan: &mut SeededRng,
    goals: &mut VecDeque<Goal>,
) -> Result<(), SimFailure> {
    let Some(&Goal::Voter(new)) = goals.back() else {
        return Ok(());
    };
    if plan.chance(0.5) {
        sim.set_delay(Duration::from_millis(1), Duration::from_millis(40));
    }
    sim.set_loss(plan.below(10) as f64 / 100.0);
    let by = sim.now() + CONVERGENCE_BOUND;
    while !goals.is_empty() && sim.now() < by {
        drive_until(sim, goals, sim.now() + RETRY)?;
    }
    if !goals.is_empty() {
        return Ok(());
    }
    sim.run_for(Duration::from_millis(plan.below(300)))?;
    sim.crash_losing_wal(new);
    if plan.chance(0.5)
        && let Some(&leader) = sim.leaders().iter().find(|leader| **leader != new)
    {
        sim.crash(leader);
    }
    let end = sim.now() + CHAOS;
    let restart_at = sim.now() + Duration::from_millis(plan.between(50, 800));
    let mut restarted = false;
    while sim.now() < end {
        let next = (sim.now() + Duration::from_millis(plan.between(20, 300))).min(end);
        if !restarted && restart_at <= next {
            sim.run_until(restart_at)?;
            sim.restart(new);
            restarted = true;
        }
        sim.run_until(next)?;
        if next < end {
            inject_fault(sim, plan)?;
        }
    }
    Ok(())
}

/// Runs until `end`, attempting the next change every [`RETRY`].
fn drive_until(
    sim: &mut Simulation,
    goals: &mut VecDeque<Goal>,
    end: conclave_core::Instant,
) -> Result<(), SimFailure> {
    loop {
        drive(sim, goals);
        let next = sim.now() + RETRY;
        if next >= end {
            return sim.run_until(end);
        }
        sim.run_until(next)?;
    }
}

/// Moves past every goal a live leader holds committed (decommissioning removed nodes), then
/// proposes the next one; a refusal (no leader, a change in progress, a learner behind) is
/// tried again later.
fn drive(sim: &mut Simulation, goals: &mut VecDeque<Goal>) {
    while let Some(&goal) = goals.front() {
        if !reached(sim, goal) {
            let _ = sim.propose_membership(change_of(sim, goal));
            return;
        }
        if let Goal::Gone(index) = goal {
            sim.retire(index);
        }
        goals.pop_front();
    }
}

/// The change that moves towards `goal`.
fn change_of(sim: &Simulation, goal: Goal) -> MembershipChange {
    match goal {
        Goal::Learner(index) => {
            MembershipChange::AddLearner(sim.id(index), MemberAddress::default())
        }
        Goal::Voter(index) => MembershipChange::Promote(sim.id(index)),
        Goal::Gone(index) => MembershipChange::Remove(sim.id(index)),
    }
}

/// Whether a live leader's committed configuration has reached `goal`.
fn reached(sim: &Simulation, goal: Goal) -> bool {
    sim.leaders().into_iter().any(|leader| {
        let Some(status) = sim.raft(leader).and_then(|raft| raft.log_status()) else {
            return false;
        };
        if status.configuration_index > status.commit {
            return false;
        }
        let config = &status.configuration;
        match goal {
            Goal::Learner(index) => config.learners.contains(&sim.id(index)),
            Goal::Voter(index) => config.voters.contains(&sim.id(index)),
            Goal::Gone(index) => !config.contains(&sim.id(index)),
        }
    })
}

/// Once settled, every live node acts on the leader's configuration.
fn check_configurations_agree(sim: &Simulation) -> Result<(), SimFailure> {
    let alive = sim.alive();
    let Some(leader) = sim.agreed_leader(&alive) else {
        return Ok(());
    };
    let expected = sim.configuration(leader);
    for index in alive {
        if sim.configuration(index) != expected {
            return Err(sim.failure(
                "configurations agree",
                format!(
                    "{} acts on {:?}, its leader {} on {expected:?}",
                    sim.id(index),
                    sim.configuration(index),
                    sim.id(leader)
                ),
            ));
        }
    }
    Ok(())
}

/// The control of [`ElectoratesIntersect`](crate::sim::invariants::ElectoratesIntersect): two
/// fresh nodes join a running cluster started with a `cluster.voters` that names only the two
/// of them (a join that skips the learner step and seeds its own configuration), without the
/// one-leader-per-term check. They elect one of themselves in a term the cluster also elects
/// in, by a majority disjoint from the cluster's, and the invariant must say so.
pub fn run_disjoint_seed_control(seed: u64) -> Result<(), SimFailure> {
    let mut config = SimConfig::voters(
        3,
        Duration::from_millis(50),
        Duration::from_millis(150),
        Duration::from_millis(300),
    );
    if let Some(raft) = config.raft_mut() {
        raft.log = Some(LogConfig::default());
    }
    let election = config.election.clone();
    let mut sim = Simulation::new(seed, config).map_err(|error| SimFailure {
        seed,
        at: conclave_core::Instant::ZERO,
        invariant: "configuration",
        detail: error.to_string(),
        replay: None,
    })?;
    let invariants = crate::sim::invariants::standard(&election)
        .into_iter()
        .filter(|invariant| invariant.name() != "one leader per term")
        .collect();
    sim.set_invariants(invariants);
    let pair = [
        crate::sim::cluster::node_id(3),
        crate::sim::cluster::node_id(4),
    ];
    sim.add_node_seeded(Some(pair.to_vec()));
    sim.add_node_seeded(Some(pair.to_vec()));
    // Leaders come and go on both sides until two of them share a term.
    let mut plan = SeededRng::new(seed ^ 0x0c0d_e15d_0c0d_e15d);
    for _ in 0..40 {
        sim.run_for(Duration::from_millis(plan.between(100, 400)))?;
        let leaders = sim.leaders();
        if let Some(&leader) = leaders.first() {
            sim.crash(leader);
            sim.run_for(Duration::from_millis(plan.between(10, 100)))?;
            sim.restart(leader);
        }
    }
    Ok(())
}
