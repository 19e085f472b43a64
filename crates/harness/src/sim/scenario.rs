//! Randomized fault scenarios, one per seed, as `cargo test` and `CONCLAVE_SIM_SEEDS` run
//! them.
//!
//! Every seed picks a cluster size, the RAFT-7 switches (or, in static mode, the leader) and a
//! fault script, all from the seed: a chaos phase (crashes, crashes part-way through a node's
//! actions, graceful stops with their hand-over, restarts, partitions, isolated nodes, cut links, loss, duplication, long and reordering delays),
//! then — in `connected` mode — a stable partition whose every side must converge on one
//! leader, then healing: no more faults, every node restarted, and every live node must know
//! the same leader within a bound and keep it. Safety invariants are checked after every step
//! throughout. [`Scenario::WalLoss`] adds crashes that lose a node's whole WAL (WAL-2);
//! [`Scenario::Static`] runs the same chaos on static mode (STA-1), where the only leader is
//! the named node and every node must know it again once it is back.
//!
//! Gossip (GOS-1..6) and priority (PRI-1..6) elect without a quorum, so their chaos has no
//! one-leader rule to break; their fencing rules (CB-5) are checked instead, and after healing
//! exactly one leader that every live node names must appear within a bound built from the
//! mode's own failover formula ([`heal_bound`]), and then stay, token and all. Each runs with
//! timings a tenth ([`gossip_tightened`]) or a fifth ([`priority_tightened`]) of its defaults
//! for the bulk of the seeds, and with its defaults for a smaller set. Their restart flavour
//! ([`Scenario::GossipRestart`], [`Scenario::PriorityRestart`]) kills the leader of a settled
//! cluster (outright, or part-way through one of its steps), restarts it from what it
//! persisted — before or after the survivors replaced it — and requires a new leader within
//! the formula's bound each time ([`failover_bound`]).
//!
//! [`Scenario::AdaptiveLossy`] runs raft with adaptive failure detection (RAFT-2, RAFT-7)
//! through the same chaos, then kills the leader again and again on a link that stays lossy
//! and jittery: the safety invariants hold throughout, and every kill is followed by a new
//! leader. In half its seeds the nodes carry a log whose followers answer by turns, as over a
//! radio (issue 27), with a client writing throughout.

use std::io::Write as _;
use std::time::Duration;

use crate::sim::cluster::{LogCounts, SessionCounts, SimConfig, SimFailure, Simulation, node_id};
use crate::sim::invariants::liveness::{await_agreed_leader, check_still_agreed, describe};
use crate::sim::invariants::partition_convergence::check_partitions_converged;
use crate::sim::trace::TraceEntry;
use conclave_core::SeededRng;
use conclave_core::election::{Command, ElectionConfig, ModeStatus};
use conclave_core::gossip::GossipConfig;
use conclave_core::priority::PriorityConfig;
use conclave_core::raft::LogConfig;

/// Which family of randomized runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// `voters` quorum, 1–5 nodes.
    Voters,
    /// `connected` quorum (seed 000's rooms), 2–5 nodes, with a stable partition phase.
    Connected,
    /// `voters` quorum, 3–5 nodes, whose chaos also crashes nodes losing their whole WAL, one
    /// node at a time (WAL-2): the one-vote-per-term invariant remembers every vote a node id
    /// cast, across the lost WAL too.
    WalLoss,
    /// [`Scenario::WalLoss`] with one voter kept down from the start to the end (WAL-5), 3–5
    /// nodes: no second vote in a term, and once faults stop the live nodes — a node that lost
    /// its WAL among them — agree on a leader without the missing voter (with four or five
    /// voters; with three, the missing voter comes back at the end, since a node that lost its
    /// WAL must hear both others).
    WalLossVoterDown,
    /// Static mode (STA-1), 1–5 nodes, one of them named leader: nobody else ever leads, and
    /// once faults stop every node knows the named one.
    Static,
    /// Gossip mode (GOS-1..6), 1–5 nodes, Fabric's four timings at a tenth of its defaults
    /// ([`gossip_tightened`]); the chaos also makes leaders yield (`conclave leader resign`).
    Gossip,
    /// Gossip mode with Fabric's defaults (15 s grace, 1 s sampling, 10 s alive threshold,
    /// 5 s election) and membership's default 500 ms heartbeat.
    GossipDefaults,
    /// Priority mode (PRI-1..6), 1–5 nodes, seed 002's timings at a fifth
    /// ([`priority_tightened`]); the chaos also makes masters resign (`MasterResign` naming a
    /// successor) and drains batteries below the resignation threshold.
    Priority,
    /// Priority mode with seed 002's own timings and membership's default 500 ms heartbeat.
    PriorityDefaults,
    /// Gossip, tightened timings, 3–5 nodes: the leader of a settled cluster killed and
    /// restarted from what it persisted, again and again.
    GossipRestart,
    /// The same in priority mode.
    PriorityRestart,
    /// Raft's replicated log (LOG-1..3), `voters` quorum, 1–5 nodes: a client writes through
    /// random nodes throughout the chaos (crashes that lose unsynced entries, partial
    /// crashes, partitions, loss, duplication, reordering) with fsyncs that take time; the
    /// Figure 3 properties are checked as it runs, and once faults stop every live node must
    /// hold and apply every acknowledged write.
    ReplicatedLog,
    /// Sessions on the replicated log (SESS-0..2), `voters` quorum, 3–5 nodes: every node
    /// applies the entries to the built-in state machine and runs the leader's lease clock;
    /// holders grant sessions, tie a key and a job to them and send keepalives while leaders
    /// are killed, partitioned and cut off, keepalives are lost and wall clocks step (see
    /// `cluster/sessions.rs` for the invariants).
    Sessions,
    /// Adaptive failure detection (RAFT-2, RAFT-7), `voters` quorum, 3–5 nodes, every node
    /// with `adaptive_timeout` on and a floor of two to three heartbeats: the usual chaos,
    /// then a link that stays lossy (up to 15 %), duplicating and jittery (up to 20 ms of
    /// spread) while the leader is killed three times; a new leader known by every live node
    /// must follow each kill within the convergence bound, and the safety invariants hold
    /// throughout.
    AdaptiveLossy,
}

impl Scenario {
    /// The name used on the replay command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Voters => "voters",
            Scenario::Connected => "connected",
            Scenario::WalLoss => "wal-loss",
            Scenario::WalLossVoterDown => "wal-loss-voter-down",
            Scenario::Static => "static",
            Scenario::Gossip => "gossip",
            Scenario::GossipDefaults => "gossip-defaults",
            Scenario::Priority => "priority",
            Scenario::PriorityDefaults => "priority-defaults",
            Scenario::GossipRestart => "gossip-restart",
            Scenario::PriorityRestart => "priority-restart",
            Scenario::ReplicatedLog => "log",
            Scenario::Sessions => "sessions",
            Scenario::AdaptiveLossy => "adaptive-lossy",
        }
    }

    /// Every scenario.
    pub const ALL: &'static [Scenario] = &[
        Scenario::Voters,
        Scenario::Connected,
        Scenario::WalLoss,
        Scenario::WalLossVoterDown,
        Scenario::Static,
        Scenario::Gossip,
        Scenario::GossipDefaults,
        Scenario::Priority,
        Scenario::PriorityDefaults,
        Scenario::GossipRestart,
        Scenario::PriorityRestart,
        Scenario::ReplicatedLog,
        Scenario::Sessions,
        Scenario::AdaptiveLossy,
    ];

    /// The test file (`crates/harness/tests/<name>.rs`) that runs this scenario.
    pub fn test_file(self) -> &'static str {
        match self {
            Scenario::Voters | Scenario::Connected | Scenario::Static => "simulation",
            Scenario::WalLoss | Scenario::WalLossVoterDown => "wal_loss",
            Scenario::Gossip
            | Scenario::GossipDefaults
            | Scenario::Priority
            | Scenario::PriorityDefaults
            | Scenario::GossipRestart
            | Scenario::PriorityRestart => "simulation_modes",
            Scenario::ReplicatedLog => "replicated_log",
            Scenario::Sessions => "sessions",
            Scenario::AdaptiveLossy => "adaptive_detection",
        }
    }

    /// The scenario with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|scenario| scenario.name() == name)
    }

    /// The command that replays `seed` of this scenario with its trace printed.
    pub fn replay_command(self, seed: u64) -> String {
        format!(
            "CONCLAVE_SIM_REPLAY={}:{seed} cargo test -p conclave-harness --test {} replay -- --ignored --nocapture",
            self.name(),
            self.test_file()
        )
    }
}

/// Chaos lasts this long before healing.
pub(crate) const CHAOS: Duration = Duration::from_secs(3);
/// Bound on every convergence once faults stop; election timeouts are 150–300 ms, so this is
/// dozens of election rounds.
pub(crate) const CONVERGENCE_BOUND: Duration = Duration::from_secs(10);
/// After converging, the leader must stay the leader this long.
pub(crate) const SETTLE: Duration = Duration::from_secs(1);

/// What a passing seed did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Cluster size.
    pub nodes: usize,
    /// Time from healing to a leader known by every node.
    pub convergence: Duration,
    /// Simulation steps.
    pub steps: u64,
    /// Messages sent.
    pub messages: u64,
    /// Digest of the run's events.
    pub digest: u64,
    /// Crashes that lost a node's whole WAL ([`Scenario::WalLoss`]).
    pub wal_losses: u64,
    /// Live leaders at the moment faults stopped (gossip and priority: several when a partition
    /// healed with a leader on each side).
    pub leaders_at_heal: usize,
    /// What the client wrote ([`Scenario::ReplicatedLog`]).
    pub log: LogCounts,
    /// What the holders did ([`Scenario::Sessions`]).
    pub sessions: SessionCounts,
}

/// A finished run: its result and, when recording was asked for, its trace.
#[derive(Debug)]
pub struct SeedRun {
    /// Passed, or the first broken property.
    pub result: Result<SeedReport, SimFailure>,
    /// Every event of the run, when recorded.
    pub trace: Option<Vec<TraceEntry>>,
}

impl SeedRun {
    /// A seed whose cluster configuration the simulator refused before it ran a step.
    pub(crate) fn refused(seed: u64, error: impl std::fmt::Display, replay: String) -> Self {
        SeedRun {
            result: Err(SimFailure {
                seed,
                at: conclave_core::Instant::ZERO,
                invariant: "configuration",
                detail: error.to_string(),
                replay: Some(replay),
            }),
            trace: None,
        }
    }

    /// The run of `seed` on `nodes` nodes that ended with `outcome` (the time its cluster
    /// took to converge, or the first broken property), with what `sim` counted and recorded.
    pub(crate) fn of(
        sim: &Simulation,
        seed: u64,
        nodes: usize,
        outcome: Result<Duration, SimFailure>,
    ) -> Self {
        let result = outcome.map(|convergence| SeedReport {
            seed,
            nodes,
            convergence,
            steps: sim.steps(),
            messages: sim.messages_sent(),
            digest: sim.digest(),
            wal_losses: sim.wal_losses(),
            leaders_at_heal: sim.leaders_at_heal(),
            log: sim.log_counts(),
            sessions: sim.session_counts(),
        });
        SeedRun {
            result,
            trace: sim.trace().map(<[TraceEntry]>::to_vec),
        }
    }
}

/// Runs one seed of `scenario`.
pub fn run_seed(scenario: Scenario, seed: u64, record_trace: bool) -> SeedRun {
    run_seed_with(scenario, seed, record_trace, Control::None)
}

/// Runs seeds `0..seeds` of `scenario` and returns their reports; the first seed that fails
/// panics with its failure, which names the command that replays it (the randomized test runs
/// share this).
pub fn run_seeds(scenario: Scenario, seeds: u64) -> Vec<SeedReport> {
    (0..seeds)
        .map(|seed| match run_seed(scenario, seed, false).result {
            Ok(report) => report,
            Err(failure) => panic!("simulation seed failed: {failure}"),
        })
        .collect()
}

/// [`run_seeds`], then one line on standard error (a plain `cargo test` shows it; `println!`
/// would be captured): how many seeds and steps held every invariant, and the slowest
/// convergence, described by `slowest` ("convergence after healing").
pub fn run_seeds_reporting(scenario: Scenario, seeds: u64, slowest: &str) -> Vec<SeedReport> {
    let reports = run_seeds(scenario, seeds);
    let worst = reports
        .iter()
        .map(|report| report.convergence)
        .max()
        .unwrap_or_default();
    let steps: u64 = reports.iter().map(|report| report.steps).sum();
    let _ = writeln!(
        std::io::stderr(),
        "simulated {} seeds ({}): every invariant held after each of {steps} steps; slowest \
         {slowest} {worst:?}",
        reports.len(),
        scenario.name()
    );
    reports
}

/// Runs one seed of [`Scenario::WalLoss`] with a node that lost its WAL voting at once, as it
/// did before abstention existed (WAL-2): the control run that shows the invariant can fail.
pub fn run_seed_without_abstention(seed: u64) -> SeedRun {
    run_seed_with(Scenario::WalLoss, seed, false, Control::NoAbstention)
}

/// Runs one seed of `scenario` (a WAL-loss family) with every node that lost its whole data
/// directory restarted with `cluster.initial_state = "new"` still set (WAL-5, issue 24 item
/// 2): it asks the voters before it takes part, and must never vote twice in a term.
pub fn run_seed_restarting_wiped_as_new_cluster(scenario: Scenario, seed: u64) -> SeedRun {
    run_seed_with(scenario, seed, false, Control::RestartWipedAsNewCluster)
}

/// Runs one seed of [`Scenario::ReplicatedLog`] with a driver that reports log writes durable
/// before their fsync completes: the control run that shows a lost acknowledged write is
/// found when the core is told a write is durable too early.
pub fn run_log_seed_reporting_before_fsync(seed: u64) -> SeedRun {
    run_seed_with(
        Scenario::ReplicatedLog,
        seed,
        false,
        Control::ReportBeforeFsync,
    )
}

/// Runs one seed of [`Scenario::ReplicatedLog`] with the client's reads answered at once from
/// a random node's own copy rather than through the log: the control run that shows the
/// linearizability check finds a stale read.
pub fn run_log_seed_with_stale_reads(seed: u64) -> SeedRun {
    run_seed_with(Scenario::ReplicatedLog, seed, false, Control::StaleReads)
}

/// Runs one seed of [`Scenario::ReplicatedLog`] with a driver that lets the messages after a
/// hard-state write leave before its fsync completes (the write itself still completes
/// later, and a crash before loses it), and without the invariant that compares every
/// message with the sender's durable state: the control run that shows what holding them
/// back prevents — a vote forgotten in a crash and granted again, two leaders of a term, or a
/// committed write lost — is found by its consequences.
pub fn run_log_seed_sending_before_hard_sync(seed: u64) -> SeedRun {
    run_seed_with(
        Scenario::ReplicatedLog,
        seed,
        false,
        Control::SendBeforeHardSync,
    )
}

/// Runs one seed of [`Scenario::ReplicatedLog`] with reads answered by whichever node believes
/// it leads, at its commit index, without the heartbeat round of the read index: the control
/// run that shows the linearizability check finds a deposed leader's read.
pub fn run_log_seed_with_unconfirmed_reads(seed: u64) -> SeedRun {
    run_seed_with(
        Scenario::ReplicatedLog,
        seed,
        false,
        Control::UnconfirmedReads,
    )
}

/// A control run: one safeguard switched off, so that a check is shown to fail without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    /// Nothing switched off.
    None,
    /// A node that lost its WAL votes at once (WAL-2).
    NoAbstention,
    /// Log writes reported durable before their fsync (LOG-3).
    ReportBeforeFsync,
    /// Reads from a node's own copy (LOG-7).
    StaleReads,
    /// Messages leave before the hard-state write they follow is durable (RAFT-1, issue 16
    /// item 3).
    SendBeforeHardSync,
    /// Reads at a leader's commit index without a heartbeat round (LOG-7).
    UnconfirmedReads,
    /// Not a control: a node that lost its whole data directory restarts with
    /// `cluster.initial_state = "new"` still set (WAL-5, issue 24 item 2).
    RestartWipedAsNewCluster,
}

fn run_seed_with(scenario: Scenario, seed: u64, record_trace: bool, control: Control) -> SeedRun {
    if scenario == Scenario::Sessions {
        // A family of its own (`sessions_scenario.rs`); its controls are its own too.
        return crate::sim::sessions_scenario::run_sessions_seed(
            seed,
            record_trace,
            crate::sim::SessionControl::None,
        );
    }
    let mut plan = SeededRng::new(seed ^ 0x5ced_5ced_5ced_5ced);
    let sizes: &[usize] = match scenario {
        Scenario::Voters => &[1, 2, 3, 3, 4, 5, 5, 5],
        Scenario::Connected => &[2, 3, 3, 4, 5, 5],
        Scenario::WalLoss => &[3, 3, 3, 4, 5],
        Scenario::WalLossVoterDown => &[3, 4, 5, 5],
        Scenario::Static => &[1, 2, 3, 3, 4, 5],
        Scenario::Gossip
        | Scenario::GossipDefaults
        | Scenario::Priority
        | Scenario::PriorityDefaults => &[1, 2, 3, 3, 4, 5, 5],
        Scenario::GossipRestart | Scenario::PriorityRestart => &[3, 3, 4, 5],
        Scenario::ReplicatedLog | Scenario::Sessions => &[1, 2, 3, 3, 3, 4, 5, 5],
        Scenario::AdaptiveLossy => &[3, 3, 4, 5, 5],
    };
    let nodes = sizes[plan.below(sizes.len() as u64) as usize];
    let heartbeat = Duration::from_millis(50);
    let (min, max) = (Duration::from_millis(150), Duration::from_millis(300));
    let mut config = match scenario {
        Scenario::Voters | Scenario::WalLoss | Scenario::WalLossVoterDown => {
            SimConfig::voters(nodes, heartbeat, min, max)
        }
        Scenario::ReplicatedLog | Scenario::Sessions => {
            log_config(nodes, heartbeat, min, max, &mut plan)
        }
        Scenario::AdaptiveLossy => adaptive_config(nodes, heartbeat, min, max, &mut plan),
        Scenario::Connected => SimConfig::connected(nodes, heartbeat, min, max),
        Scenario::Static => {
            let leader = plan.below(nodes as u64) as usize;
            SimConfig::static_leader(nodes, leader, heartbeat)
        }
        Scenario::Gossip | Scenario::GossipRestart => {
            SimConfig::gossip(nodes, gossip_tightened(), heartbeat)
        }
        Scenario::GossipDefaults => {
            SimConfig::gossip(nodes, GossipConfig::new(node_id(0)), heartbeat)
        }
        Scenario::Priority | Scenario::PriorityRestart => {
            SimConfig::priority(nodes, priority_tightened(), heartbeat)
        }
        Scenario::PriorityDefaults => {
            SimConfig::priority(nodes, PriorityConfig::new(node_id(0)), heartbeat)
        }
    };
    if let Some(raft) = config.raft_mut() {
        raft.pre_vote = plan.chance(0.75);
        raft.check_quorum = plan.chance(0.75);
        raft.ranked_timeouts = plan.chance(0.5);
    }
    if let Some(membership) = &mut config.membership {
        if matches!(
            scenario,
            Scenario::GossipDefaults | Scenario::PriorityDefaults
        ) {
            // Membership's own defaults beside the mode's.
            *membership = conclave_core::membership::MembershipConfig::default();
        } else {
            membership.heartbeat_interval = Duration::from_millis(100);
        }
    }
    if !config.log_enabled() {
        // Half the seeds of every other family give a hard state's fsync time too (up to
        // 5 ms), as a disk does: the ElectionActor holds back what follows a write until it
        // is durable, in every mode. Drawn apart from the plan, so that the rest of each
        // seed's script stays what it was.
        let mut disk = SeededRng::new(seed ^ 0xd15c_d15c_d15c_d15c);
        config.hard_state_fsync = disk.chance(0.5);
        config.disk_delay = Duration::from_millis(disk.between(1, 5));
    }
    config.record_trace = record_trace;
    let election = config.election.clone();

    let mut sim = match Simulation::new(seed, config) {
        Ok(sim) => sim,
        Err(err) => return SeedRun::refused(seed, err, scenario.replay_command(seed)),
    };
    sim.set_replay_hint(scenario.replay_command(seed));
    sim.set_abstain_after_wal_loss(control != Control::NoAbstention);
    sim.set_restart_wiped_as_new_cluster(control == Control::RestartWipedAsNewCluster);
    sim.set_report_before_fsync(control == Control::ReportBeforeFsync);
    sim.set_stale_reads(control == Control::StaleReads);
    if control == Control::SendBeforeHardSync {
        sim.set_send_before_hard_sync(true);
        let invariants = crate::sim::invariants::standard(&election)
            .into_iter()
            .filter(|invariant| invariant.name() != "persisted before sent")
            .collect();
        sim.set_invariants(invariants);
    }
    sim.set_unconfirmed_reads(control == Control::UnconfirmedReads);
    let outcome = script(scenario, &mut sim, &mut plan);
    SeedRun::of(&sim, seed, nodes, outcome)
}

fn script(
    scenario: Scenario,
    sim: &mut Simulation,
    plan: &mut SeededRng,
) -> Result<Duration, SimFailure> {
    match scenario {
        Scenario::Gossip
        | Scenario::GossipDefaults
        | Scenario::Priority
        | Scenario::PriorityDefaults => return quorumless_script(sim, plan),
        Scenario::GossipRestart | Scenario::PriorityRestart => {
            return restart_script(sim, plan);
        }
        Scenario::WalLossVoterDown => return voter_down_script(sim, plan),
        Scenario::ReplicatedLog | Scenario::Sessions => return log_script(sim, plan),
        Scenario::AdaptiveLossy => return adaptive_script(sim, plan),
        Scenario::Voters | Scenario::Connected | Scenario::WalLoss | Scenario::Static => {}
    }
    if scenario == Scenario::WalLoss {
        chaos_with_wal_loss(sim, plan, CHAOS, None)?;
    } else {
        chaos(sim, plan, CHAOS)?;
    }
    if scenario == Scenario::Connected && sim.len() >= 2 {
        calm(sim)?;
        let groups = random_split(sim.len(), plan);
        sim.partition(groups);
        check_partitions_converged(sim, CONVERGENCE_BOUND)?;
        // A few more rounds so both sides have settled their terms before they meet.
        sim.run_for(Duration::from_millis(plan.between(0, 500)))?;
    }
    calm(sim)?;
    let convergence = await_agreed_leader(sim, CONVERGENCE_BOUND)?;
    check_still_agreed(sim, SETTLE)?;
    Ok(convergence)
}

/// [`Scenario::ReplicatedLog`]: writes throughout the chaos and for a while after it, then
/// every acknowledged write held and applied everywhere, and the leader kept.
fn log_script(sim: &mut Simulation, plan: &mut SeededRng) -> Result<Duration, SimFailure> {
    sim.set_client_writes(true);
    if sim.len() >= 3 && plan.chance(0.5) {
        // WAL-2: a wiped voter lost its entries too; it must not vote them away.
        chaos_with_wal_loss(sim, plan, CHAOS, None)?;
    } else {
        chaos(sim, plan, CHAOS)?;
    }
    calm(sim)?;
    let convergence = await_agreed_leader(sim, CONVERGENCE_BOUND)?;
    sim.run_for(Duration::from_millis(plan.between(0, 300)))?;
    sim.set_client_writes(false);
    sim.await_log_converged(CONVERGENCE_BOUND)?;
    sim.check_linearizable()?;
    check_still_agreed(sim, SETTLE)?;
    Ok(convergence)
}

/// The log family's nodes (and the sessions family's): `voters` quorum with a log of small
/// batches and windows, a disk that takes its time and a client writing throughout.
fn log_config(
    nodes: usize,
    heartbeat: Duration,
    min: Duration,
    max: Duration,
    plan: &mut SeededRng,
) -> SimConfig {
    let mut config = SimConfig::voters(nodes, heartbeat, min, max);
    if let Some(raft) = config.raft_mut() {
        // Small batches and windows too, so that backing off, pipelining and lost
        // messages in a window all happen.
        raft.log = Some(LogConfig {
            max_append_bytes: [40, 120, 1024][plan.below(3) as usize],
            max_append_entries: 1 + plan.below(16) as usize,
            max_inflight: 1 + plan.below(8) as usize,
            // LOG-4: snapshots every few writes, so that compaction and
            // InstallSnapshot to a follower that was away happen in most seeds.
            snapshot_entries: plan.between(5, 50),
            // Issue 27, item 2: followers taking turns to answer, in half the seeds.
            shared_acks: plan.below(2) == 1,
        });
    }
    config.disk_delay = Duration::from_millis(plan.between(0, 20));
    config.client_interval = Some(Duration::from_millis(plan.between(5, 40)));
    config
}

/// [`Scenario::AdaptiveLossy`]'s nodes: `voters` quorum with adaptive detection on and a
/// floor of two to three heartbeats; in half the seeds a log answered by turns.
fn adaptive_config(
    nodes: usize,
    heartbeat: Duration,
    min: Duration,
    max: Duration,
    plan: &mut SeededRng,
) -> SimConfig {
    let mut config = SimConfig::voters(nodes, heartbeat, min, max);
    // Issue 27: in half the seeds a replicated log with writes, its followers answering by
    // turns as over a radio, so that the broadcast path, shared answers and the quiet
    // heartbeat's answers meet adaptive detection on the lossy link.
    let with_log = plan.below(2) == 1;
    if let Some(raft) = config.raft_mut() {
        raft.adaptive_timeout = true;
        // 100–150 ms with the family's 50 ms heartbeat.
        raft.suspicion_floor = Some(Duration::from_millis(plan.between(100, 151)));
        if with_log {
            raft.log = Some(LogConfig {
                max_append_bytes: 120,
                max_inflight: 4,
                snapshot_entries: 20,
                shared_acks: true,
                ..LogConfig::default()
            });
        }
    }
    if with_log {
        config.disk_delay = Duration::from_millis(plan.between(0, 10));
        config.client_interval = Some(Duration::from_millis(plan.between(10, 40)));
    }
    config
}

/// [`Scenario::AdaptiveLossy`]: the usual chaos and healing, then a lossy, jittery link on
/// which the leader is killed three times, each time after the followers had a while to learn
/// the link; a leader known by every live node must follow each kill. The slowest of those
/// failovers is what the run reports.
fn adaptive_script(sim: &mut Simulation, plan: &mut SeededRng) -> Result<Duration, SimFailure> {
    chaos(sim, plan, CHAOS)?;
    calm(sim)?;
    await_agreed_leader(sim, CONVERGENCE_BOUND)?;
    sim.set_loss(plan.below(16) as f64 / 100.0);
    sim.set_duplicate(plan.below(10) as f64 / 100.0);
    let spread = Duration::from_millis(plan.between(1, 21));
    sim.set_delay(
        Duration::from_micros(500),
        Duration::from_micros(500) + spread,
    );
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        // Heartbeats every 50 ms: a few dozen beats to learn the link from.
        sim.run_for(Duration::from_millis(plan.between(300, 1500)))?;
        // The lossy link may have moved leadership meanwhile: kill whoever leads by then.
        await_agreed_leader(sim, CONVERGENCE_BOUND)?;
        let Some(leader) = sim.agreed_leader(&sim.alive()) else {
            return Err(sim.failure("liveness", format!("no leader to kill; {}", describe(sim))));
        };
        sim.crash(leader);
        slowest = slowest.max(await_agreed_leader(sim, CONVERGENCE_BOUND)?);
        sim.restart(leader);
    }
    calm(sim)?;
    await_agreed_leader(sim, CONVERGENCE_BOUND)?;
    check_still_agreed(sim, SETTLE)?;
    Ok(slowest)
}

/// Faults at random moments for `duration`.
pub(crate) fn chaos(
    sim: &mut Simulation,
    plan: &mut SeededRng,
    duration: Duration,
) -> Result<(), SimFailure> {
    chaos_paced(sim, plan, duration, (20, 600))
}

/// Faults for `duration`, `gap_ms` (a range, in ms) apart.
fn chaos_paced(
    sim: &mut Simulation,
    plan: &mut SeededRng,
    duration: Duration,
    gap_ms: (u64, u64),
) -> Result<(), SimFailure> {
    let end = sim.now() + duration;
    sim.set_crash_mid_step(0.002);
    loop {
        let next = sim.now() + Duration::from_millis(plan.between(gap_ms.0, gap_ms.1));
        if next >= end {
            sim.run_until(end)?;
            return Ok(());
        }
        sim.run_until(next)?;
        inject_fault(sim, plan)?;
    }
}

/// [`chaos`] with crashes that lose a node's whole WAL among the faults. Only one node at a
/// time is without its WAL (lost, or abstaining since): the abstention's guarantee rests on
/// the other voters' memories. A node that voted for someone else is the likeliest victim,
/// since a forgotten vote is what abstention protects.
///
/// `kept_down`, if given, is a voter that stays crashed throughout: whatever the faults
/// restart, it is crashed again at the end of the same fault.
fn chaos_with_wal_loss(
    sim: &mut Simulation,
    plan: &mut SeededRng,
    duration: Duration,
    kept_down: Option<usize>,
) -> Result<(), SimFailure> {
    let end = sim.now() + duration;
    sim.set_crash_mid_step(0.002);
    loop {
        let next = sim.now() + Duration::from_millis(plan.between(20, 300));
        if next >= end {
            sim.run_until(end)?;
            return Ok(());
        }
        sim.run_until(next)?;
        let n = sim.len();
        let lost = (0..n).find(|&i| sim.is_amnesic(i));
        match lost {
            Some(index) if !sim.is_alive(index) => {
                if plan.chance(0.5) {
                    sim.restart(index);
                }
            }
            Some(_) => inject_fault(sim, plan)?,
            None if plan.chance(0.4) => {
                let alive = sim.alive();
                let voted_for_another: Vec<usize> = alive
                    .iter()
                    .copied()
                    .filter(|&i| {
                        sim.raft(i)
                            .and_then(|raft| raft.hard_state().vote)
                            .is_some_and(|vote| vote != sim.id(i))
                    })
                    .collect();
                let pool = if voted_for_another.is_empty() {
                    alive
                } else {
                    voted_for_another
                };
                if !pool.is_empty() {
                    sim.crash_losing_wal(pool[plan.below(pool.len() as u64) as usize]);
                }
            }
            None => inject_fault(sim, plan)?,
        }
        if let Some(down) = kept_down {
            sim.crash(down);
        }
    }
}

/// [`Scenario::WalLossVoterDown`]: one voter crashed from the start and kept down through
/// the chaos and, with four or more voters, through the convergence check too (WAL-5: a node
/// that lost its WAL ends its abstention on a settled majority, without the missing voter).
fn voter_down_script(sim: &mut Simulation, plan: &mut SeededRng) -> Result<Duration, SimFailure> {
    let down = plan.below(sim.len() as u64) as usize;
    sim.crash(down);
    chaos_with_wal_loss(sim, plan, CHAOS, Some(down))?;
    calm(sim)?;
    if sim.len() >= 4 {
        sim.crash(down);
    }
    let convergence = await_agreed_leader(sim, CONVERGENCE_BOUND)?;
    check_still_agreed(sim, SETTLE)?;
    Ok(convergence)
}

pub(crate) fn inject_fault(sim: &mut Simulation, plan: &mut SeededRng) -> Result<(), SimFailure> {
    let n = sim.len();
    let quorumless = matches!(
        sim.election_mode(),
        ElectionConfig::Gossip(_) | ElectionConfig::Priority(_)
    );
    if quorumless && plan.chance(1.0 / 12.0) {
        return mode_fault(sim, plan);
    }
    match plan.below(11) {
        0 | 1 => {
            let alive = sim.alive();
            if !alive.is_empty() {
                sim.crash(alive[plan.below(alive.len() as u64) as usize]);
            }
        }
        2 | 3 => {
            let crashed: Vec<usize> = (0..n).filter(|&i| !sim.is_alive(i)).collect();
            if !crashed.is_empty() {
                sim.restart(crashed[plan.below(crashed.len() as u64) as usize]);
            }
        }
        4 => {
            let groups = random_split(n, plan);
            sim.partition(groups);
        }
        5 => sim.isolate(plan.below(n as u64) as usize),
        6 => sim.heal(),
        7 => {
            let loss = plan.below(30) as f64 / 100.0;
            let duplicate = plan.below(20) as f64 / 100.0;
            sim.set_loss(loss);
            sim.set_duplicate(duplicate);
        }
        8 => {
            if n >= 2 {
                let from = plan.below(n as u64) as usize;
                let to = (from + 1 + plan.below(n as u64 - 1) as usize) % n;
                sim.cut(from, to);
            }
        }
        9 => {
            if plan.chance(0.5) {
                // Long and widely spread delays reorder messages heavily.
                sim.set_delay(Duration::from_millis(1), Duration::from_millis(40));
            } else {
                sim.set_delay(Duration::from_micros(500), Duration::from_millis(5));
            }
        }
        _ => {
            // A graceful stop, of the leader when there is one: its hand-over runs amid
            // whatever else goes wrong (CB-2).
            let leaders = sim.leaders();
            let pool = if leaders.is_empty() {
                sim.alive()
            } else {
                leaders
            };
            if !pool.is_empty() {
                sim.stop_gracefully(pool[plan.below(pool.len() as u64) as usize])?;
            }
        }
    }
    Ok(())
}

/// A fault only gossip and priority have: their leaders step down by command. A gossip
/// leader yields (GOS-4) — only while no other node yields, so that some node always
/// proposes once the network heals (a node that yields alone waits out six alive
/// thresholds, which `gossip_scenarios` covers). A priority master resigns to its best
/// successor (PRI-5, `MasterResign`), or its battery drops below the resignation threshold.
fn mode_fault(sim: &mut Simulation, plan: &mut SeededRng) -> Result<(), SimFailure> {
    let leaders = sim.leaders();
    if leaders.is_empty() {
        return Ok(());
    }
    let leader = leaders[plan.below(leaders.len() as u64) as usize];
    match sim.election_mode() {
        ElectionConfig::Gossip(_) => {
            let someone_yields = sim.alive().into_iter().any(|i| is_yielding(sim, i));
            if !someone_yields && sim.len() >= 2 {
                // Refused answers (a node that stopped leading meanwhile) are part of the game.
                let _ = sim.command(leader, Command::Resign)?;
            }
        }
        ElectionConfig::Priority(_) => {
            if plan.chance(0.5) {
                let _ = sim.command(leader, Command::Resign)?;
            } else {
                sim.set_battery(leader, plan.below(15) as u8)?;
            }
        }
        ElectionConfig::Raft(_) | ElectionConfig::Static(_) => {}
    }
    Ok(())
}

/// Whether node `index` is a gossip node that yielded (GOS-4) and proposes nothing yet.
fn is_yielding(sim: &Simulation, index: usize) -> bool {
    sim.election(index).is_some_and(|election| {
        matches!(election.status().detail, ModeStatus::Gossip(gossip) if gossip.yielding)
    })
}

/// Gossip's and priority's randomized run: chaos at the pace of the mode's timings, then
/// healing (a node that was down stays down half the time), then exactly one leader known by
/// every live node within [`heal_bound`], which still leads, with the same fencing token, a
/// while later.
fn quorumless_script(sim: &mut Simulation, plan: &mut SeededRng) -> Result<Duration, SimFailure> {
    let unit = pace_unit(sim.election_mode());
    // Chaos lasts a few failovers, with faults a tenth to one and a half failovers apart.
    let chaos_for = unit * 4;
    let gap = (
        (unit.as_millis() / 10).max(20) as u64,
        (unit.as_millis() * 3 / 2).max(100) as u64,
    );
    chaos_paced(sim, plan, chaos_for, gap)?;
    sim.note_leaders_at_heal();
    // A node that is down comes back, or (half the time) stays down for good — a sudden power
    // loss whose followers must time out on it — as long as one node is left.
    let down: Vec<usize> = (0..sim.len())
        .filter(|&i| !sim.is_alive(i) || sim.is_stopping(i))
        .collect();
    let stay_down: Vec<usize> = down
        .iter()
        .copied()
        .filter(|_| plan.chance(0.5))
        .take(sim.len() - 1)
        .collect();
    calm(sim)?;
    for &index in &stay_down {
        sim.crash(index);
    }
    if sim.alive().into_iter().all(|i| is_yielding(sim, i)) {
        // Only nodes that yielded would be left, and they propose nothing for six alive
        // thresholds (GOS-4, not a failover): bring the others back.
        for &index in &stay_down {
            sim.restart(index);
        }
    }
    let bound = heal_bound(sim.election_mode());
    let healed_at = sim.now();
    let convergence = await_agreed_leader(sim, bound)?;
    // Timers started before healing may still run out until the bound; from then on nothing
    // changes: same leader, same token.
    sim.run_until(healed_at + bound)?;
    let (leader, token) = settled_token(sim, "at the end of the bound after healing")?;
    sim.run_for(unit)?;
    let (leader_after, token_after) = settled_token(sim, "after the bound")?;
    if (leader_after, token_after) != (leader, token) {
        return Err(sim.failure(
            "liveness",
            format!(
                "the leader or its token changed after the bound: {}:{token:?} then {}:{token_after:?}; {}",
                sim.id(leader),
                sim.id(leader_after),
                describe(sim)
            ),
        ));
    }
    Ok(convergence)
}

/// The restart flavour: a settled cluster's leader is killed — at once, or part-way through
/// one of its steps — and restarted from what it persisted, either after the survivors
/// replaced it or while they are still at it; each time a leader known by every live node
/// must appear within [`failover_bound`] of the kill or the restart.
fn restart_script(sim: &mut Simulation, plan: &mut SeededRng) -> Result<Duration, SimFailure> {
    let first = first_leader_bound(sim.election_mode());
    await_agreed_leader(sim, first)?;
    let bound = failover_bound(sim.election_mode());
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        // Let the cluster run a while, so the kill falls anywhere in the leader's rhythm.
        sim.run_for(Duration::from_millis(
            plan.between(0, bound.as_millis() as u64 / 2),
        ))?;
        let Some(&leader) = sim.leaders().first() else {
            return Err(sim.failure("liveness", format!("no leader to kill; {}", describe(sim))));
        };
        if plan.chance(0.5) {
            sim.crash(leader);
        } else {
            // Part-way through one of its steps: whatever it had not carried out is lost.
            sim.set_crash_mid_step(0.05);
            let crashed = sim.run_until_condition(sim.now() + bound, |sim| !sim.is_alive(leader));
            sim.set_crash_mid_step(0.0);
            crashed?;
            sim.crash(leader);
            for other in 0..sim.len() {
                if other != leader {
                    sim.restart(other);
                }
            }
        }
        let early = plan.chance(0.3);
        if early {
            // Back while the survivors are still replacing it.
            sim.run_for(Duration::from_millis(
                plan.between(0, bound.as_millis() as u64 / 2),
            ))?;
            sim.restart(leader);
        }
        slowest = slowest.max(await_agreed_leader(sim, bound)?);
        if !early {
            sim.run_for(Duration::from_millis(
                plan.between(0, bound.as_millis() as u64),
            ))?;
            sim.restart(leader);
            slowest = slowest.max(await_agreed_leader(sim, bound)?);
        }
    }
    check_still_agreed(sim, pace_unit(sim.election_mode()))?;
    Ok(slowest)
}

/// The leader every live node names, alone in leading, and its fencing token.
fn settled_token(
    sim: &Simulation,
    when: &str,
) -> Result<(usize, Option<conclave_core::election::FencingToken>), SimFailure> {
    let alive = sim.alive();
    match sim.agreed_leader(&alive) {
        Some(leader) if sim.leaders() == [leader] => Ok((
            leader,
            sim.election(leader)
                .and_then(|election| election.fencing_token()),
        )),
        _ => Err(sim.failure(
            "liveness",
            format!("no single agreed leader {when}; {}", describe(sim)),
        )),
    }
}

/// Gossip with Fabric's four timings at a tenth of its defaults: 1.5 s start-up grace,
/// 100 ms membership sampling, 1 s alive threshold, 500 ms election (failover budget 1.5 s).
pub fn gossip_tightened() -> GossipConfig {
    GossipConfig::new(node_id(0)).with_timings(
        Duration::from_millis(1500),
        Duration::from_millis(100),
        Duration::from_millis(1000),
        Duration::from_millis(500),
    )
}

/// Priority with seed 002's timings at a fifth: 100 ms discovery, 40 ms campaign, 60 ms
/// votes, 20 ms jitter, announcements every 200 ms, master dead after 600 ms (failover budget
/// 820 ms).
pub fn priority_tightened() -> PriorityConfig {
    let mut config = PriorityConfig::new(node_id(0));
    config.discovery_timeout = Duration::from_millis(100);
    config.campaign_timeout = Duration::from_millis(40);
    config.vote_timeout = Duration::from_millis(60);
    config.jitter_max = Duration::from_millis(20);
    config.announce_interval = Duration::from_millis(200);
    config.master_timeout = Duration::from_millis(600);
    config
}

/// The time scale of a mode's runs: its failover budget (raft and static: the raft runs'
/// 3 s of chaos).
fn pace_unit(election: &ElectionConfig) -> Duration {
    match election {
        ElectionConfig::Gossip(gossip) => gossip.failover_budget(),
        ElectionConfig::Priority(priority) => priority.failover_budget(),
        ElectionConfig::Raft(_) | ElectionConfig::Static(_) => CHAOS,
    }
}

/// How long after a leader is killed (or restarted) every live node must name one new
/// leader: the mode's failover budget — gossip: `leader_alive_threshold +
/// leader_election_duration` ([`GossipConfig::failover_budget`]); priority: master timeout +
/// discovery + jitter + campaign + votes ([`PriorityConfig::failover_budget`]) — plus what
/// the formula leaves out: frames in flight (a few one-way delays of the healthy network, at
/// most 5 ms each) and membership's news reaching the election through the mailbox hop.
pub fn failover_bound(election: &ElectionConfig) -> Duration {
    match election {
        ElectionConfig::Gossip(gossip) => gossip.failover_budget() + FRAME_SLACK,
        ElectionConfig::Priority(priority) => priority.failover_budget() + FRAME_SLACK,
        ElectionConfig::Raft(_) | ElectionConfig::Static(_) => CONVERGENCE_BOUND,
    }
}

/// How long a cluster started together takes to name its first leader: gossip: the start-up
/// wait (at most `startup_grace_period`, GOS-1) and one election (GOS-2); priority: its
/// failover budget, which holds a discovery and a campaign with room to spare.
fn first_leader_bound(election: &ElectionConfig) -> Duration {
    match election {
        ElectionConfig::Gossip(gossip) => {
            gossip.startup_grace_period + gossip.leader_election_duration + FRAME_SLACK
        }
        ElectionConfig::Priority(_) | ElectionConfig::Raft(_) | ElectionConfig::Static(_) => {
            failover_bound(election)
        }
    }
}

/// Frames in flight and mailbox hops the failover formulas leave out: a handful of one-way
/// delays (5 ms at most once the network is healthy) and of mailbox hops (2 ms at most).
const FRAME_SLACK: Duration = Duration::from_millis(50);

/// How long after healing every live node must name one leader: the same as after a kill
/// ([`failover_bound`]). The formula covers the slowest path out of a healed fault — a leader
/// that died (or was cut off) just before healing, which its followers give up only after the
/// alive threshold or master timeout, then one election — and everything else is faster: two
/// leaders that survived a partition hear each other as soon as membership reconnects them
/// (a gossip leader declares to every peer joining its view, a priority master answers any
/// announcement of a rival), and a node restarted at healing learns the leader from its first
/// exchange (a gossip declaration ends its start-up wait, GOS-1; a priority `DiscoverAck`
/// names the master, PRI-4).
pub fn heal_bound(election: &ElectionConfig) -> Duration {
    failover_bound(election)
}

/// Stops every fault: healed network, no loss, nominal delays, every node running (a node
/// still handing over from a graceful stop finishes stopping first, then starts again).
pub(crate) fn calm(sim: &mut Simulation) -> Result<(), SimFailure> {
    for index in 0..sim.len() {
        if sim.is_stopping(index) {
            sim.stop_gracefully(index)?;
        }
    }
    sim.set_crash_mid_step(0.0);
    sim.heal();
    sim.set_loss(0.0);
    sim.set_duplicate(0.0);
    sim.set_delay(Duration::from_micros(500), Duration::from_millis(5));
    // A stop cut short still ends behind the writes on their way to the disk (as the
    // ElectionActor's does): wait for it, a disk delay at most.
    let stopped_by = sim.now() + Duration::from_secs(1);
    sim.run_until_condition(stopped_by, |sim| {
        (0..sim.len()).all(|index| !sim.is_stopping(index))
    })?;
    for index in 0..sim.len() {
        sim.restart(index);
    }
    Ok(())
}

/// Two non-empty sides (for two or more nodes).
pub(crate) fn random_split(n: usize, plan: &mut SeededRng) -> Vec<u32> {
    loop {
        let groups: Vec<u32> = (0..n).map(|_| plan.below(2) as u32).collect();
        let ones = groups.iter().filter(|&&g| g == 1).count();
        if n < 2 || (ones > 0 && ones < n) {
            return groups;
        }
    }
}

/// Seeds to run: `CONCLAVE_SIM_SEEDS` when set to a number, else `default`.
pub fn seed_count(default: u64) -> u64 {
    std::env::var("CONCLAVE_SIM_SEEDS")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(default)
}
