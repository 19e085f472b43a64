//! The deterministic cluster simulator (docs/design.md §10).
//!
//! N nodes, each a [`Membership`](conclave_core::Membership) and an
//! [`Election`](conclave_core::election::Election) of any mode driven exactly as the actors drive them
//! (the mailbox hop between membership and the election included), exchange messages over a simulated network in virtual
//! time. Every random choice — election timeouts, delays, loss, duplication, which fault and
//! when — derives from one seed, so a run replays exactly: [`Simulation::digest`] and the
//! optional trace are identical for identical seeds.
//!
//! - [`Simulation`]: the harness, with `step`, `run_until`, `crash`, `crash_losing_wal`,
//!   `restart`, `partition`, `isolate`, `cut`, `heal`, loss/duplication/delay settings and
//!   operator commands;
//! - [`invariants`]: the properties checked after every step or at the end of a phase;
//! - [`scenario`]: randomized fault scripts, one per seed, with the replay command a failure
//!   prints;
//! - the sessions family ([`run_sessions_seed`], SESS-0..2): every node runs the built-in
//!   state machine and the leader's lease clock under the same faults, with holders that
//!   grant sessions and keep them alive; no session ends while its keepalives reach the
//!   leader in time, an ended session's keys and jobs are released once, in the entry that
//!   ends it, alike everywhere, no job is held by a session that is not live, and replicas at
//!   one index hold byte-identical snapshots. Each check has a control that must fail.

mod cluster;
pub mod invariants;
mod membership_scenario;
mod network;
pub mod scenario;
mod sessions_scenario;
mod trace;

pub use cluster::{
    AdmissionModel, DEFAULT_MAILBOX_DELAY, LogCounts, Observation, SIM_UNIX_EPOCH, SentKind,
    SessionControl, SessionCounts, SimConfig, SimFailure, Simulation, node_id,
};
pub use membership_scenario::{MembershipFamily, run_disjoint_seed_control, run_membership_seed};
pub use network::NetworkConfig;
pub use scenario::{
    Scenario, SeedReport, SeedRun, failover_bound, gossip_tightened, heal_bound,
    priority_tightened, run_log_seed_reporting_before_fsync, run_log_seed_sending_before_hard_sync,
    run_log_seed_with_stale_reads, run_log_seed_with_unconfirmed_reads, run_seed,
    run_seed_restarting_wiped_as_new_cluster, run_seed_without_abstention, run_seeds,
    run_seeds_reporting, seed_count,
};
pub use sessions_scenario::{run_sessions_seed, run_sessions_seed_checking_holders_only};
pub use trace::TraceEntry;
