//! Failover time per election mode in the deterministic simulator (issue 9, item 11): a
//! settled 3-node cluster — membership, admission and the membership → election mailbox hop
//! as the actors run them, on a healthy LAN (0.5–5 ms one way) — has its leader killed at a
//! uniformly random moment of the leader's own rhythm (its heartbeat, declaration or
//! announcement interval); the virtual time until every survivor names the same new leader is
//! recorded. Each mode runs with its defaults and with tightened timings, next to the bound
//! its own formula predicts; gossip also next to Fabric's published default (a dead leader is
//! replaced after `leader_alive_threshold` + `leader_election_duration` = 15 s). Static mode
//! has no failover (the named leader is the only one) and is not measured.
//!
//! Every figure is virtual time, so a run is exactly reproducible from its seed on any
//! machine.
//!
//! ```text
//! cargo run --release -p conclave-harness --example failover_bench [-- [--trials N] [--seed S]]
//! ```

use std::process::ExitCode;
use std::time::Duration;

use conclave_core::SeededRng;
use conclave_core::gossip::GossipConfig;
use conclave_core::membership::MembershipConfig;
use conclave_core::priority::PriorityConfig;
use conclave_harness::sim::{SimConfig, Simulation, gossip_tightened, node_id, priority_tightened};

const NODES: usize = 3;
const DEFAULT_TRIALS: usize = 1000;
const DEFAULT_SEED: u64 = 11;
/// A trial without an agreed new leader this long after the kill counts as a failure.
const CAP: Duration = Duration::from_secs(120);
/// Fabric's documented defaults: `leaderAliveThreshold` 10 s + `leaderElectionDuration` 5 s.
const FABRIC_DEFAULT_FAILOVER: Duration = Duration::from_secs(15);

/// One measured configuration.
struct Setup {
    mode: &'static str,
    timings: &'static str,
    config: SimConfig,
    /// The leader's rhythm: the kill falls uniformly within one of these after settling.
    period: Duration,
    /// What the mode's formula predicts, in words and as a figure.
    formula: String,
    bound: Duration,
    /// A published figure to print beside ours.
    reference: Option<String>,
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn setups() -> Vec<Setup> {
    let placeholder = node_id(0);
    let mut setups = Vec::new();

    // Raft: defaults (docs/design.md §9) and docs/design.md §11's failover setting.
    for (timings, heartbeat, min, max) in [
        ("defaults", ms(500), ms(1500), ms(3000)),
        ("tightened", ms(50), ms(250), ms(500)),
    ] {
        let mut config = SimConfig::voters(NODES, heartbeat, min, max);
        if timings == "defaults" {
            config.membership = Some(MembershipConfig::default());
        }
        setups.push(Setup {
            mode: "raft",
            timings,
            config,
            period: heartbeat,
            formula: format!(
                "election_timeout_max {max:?} (+ pre-vote and vote round trips; ranked timeouts \
                 fire the first survivor near the minimum {min:?})"
            ),
            bound: max,
            reference: None,
        });
    }

    // Gossip: Fabric's defaults and a tenth of them.
    for (timings, gossip, membership) in [
        (
            "defaults",
            GossipConfig::new(placeholder),
            MembershipConfig::default(),
        ),
        ("tightened", gossip_tightened(), tightened_membership()),
    ] {
        let period = gossip.declaration_interval();
        let formula = format!(
            "leader_alive_threshold {:?} + leader_election_duration {:?} = {:?}",
            gossip.leader_alive_threshold,
            gossip.leader_election_duration,
            gossip.failover_budget()
        );
        let bound = gossip.failover_budget();
        let mut config = SimConfig::gossip(NODES, gossip, ms(100));
        config.membership = Some(membership);
        setups.push(Setup {
            mode: "gossip",
            timings,
            config,
            period,
            formula,
            bound,
            reference: (timings == "defaults").then(|| {
                format!(
                    "Fabric's published default: a dead leader replaced after \
                     leaderAliveThreshold + leaderElectionDuration = {FABRIC_DEFAULT_FAILOVER:?}"
                )
            }),
        });
    }

    // Priority: seed 002's constants and a fifth of them.
    for (timings, priority, membership) in [
        (
            "defaults",
            PriorityConfig::new(placeholder),
            MembershipConfig::default(),
        ),
        ("tightened", priority_tightened(), tightened_membership()),
    ] {
        let period = priority.announce_interval;
        let formula = format!(
            "master_timeout {:?} + discovery {:?} + jitter {:?} + campaign {:?} + votes {:?} = {:?}",
            priority.master_timeout,
            priority.discovery_timeout,
            priority.jitter_max,
            priority.campaign_timeout,
            priority.vote_timeout,
            priority.failover_budget()
        );
        let bound = priority.failover_budget();
        let mut config = SimConfig::priority(NODES, priority, ms(100));
        config.membership = Some(membership);
        setups.push(Setup {
            mode: "priority",
            timings,
            config,
            period,
            formula,
            bound,
            reference: None,
        });
    }
    setups
}

/// Membership at the pace of the tightened election timings: a 100 ms heartbeat.
fn tightened_membership() -> MembershipConfig {
    MembershipConfig {
        heartbeat_interval: ms(100),
        timeout_multiplier: 3,
        hello_interval: ms(200),
        announce_interval: ms(2000),
        expected_peers: 0,
    }
}

/// One trial: settle, kill the leader at a random moment of its rhythm, time the failover.
fn trial(setup: &Setup, seed: u64) -> Result<Duration, String> {
    let mut dice = SeededRng::new(seed);
    let mut sim = Simulation::new(dice.next_u64(), setup.config.clone())
        .map_err(|error| format!("settings refused: {error}"))?;
    let all: Vec<usize> = (0..NODES).collect();
    let settle_by = sim.now() + CAP;
    sim.run_until_condition(settle_by, |sim| sim.agreed_leader(&all).is_some())
        .map_err(|failure| failure.to_string())?
        .ok_or("no first leader")?;
    // A few rhythms of steady state, then a uniformly random moment within one more.
    sim.run_for(setup.period * 3)
        .map_err(|failure| failure.to_string())?;
    sim.run_for(dice.duration_between(Duration::ZERO, setup.period))
        .map_err(|failure| failure.to_string())?;
    let leader = sim
        .agreed_leader(&all)
        .ok_or("the first leader did not stay agreed")?;
    sim.crash(leader);
    let killed_at = sim.now();
    let agreed = sim
        .run_until_condition(killed_at + CAP, |sim| {
            let alive = sim.alive();
            sim.agreed_leader(&alive).is_some()
        })
        .map_err(|failure| failure.to_string())?
        .ok_or_else(|| format!("no agreed new leader within {CAP:?}"))?;
    Ok(agreed - killed_at)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn fmt(duration: Duration) -> String {
    if duration >= Duration::from_secs(1) {
        format!("{:.2} s", duration.as_secs_f64())
    } else {
        format!("{:.0} ms", duration.as_secs_f64() * 1000.0)
    }
}

fn parse(args: &[String]) -> Result<(usize, u64), String> {
    let (mut trials, mut seed) = (DEFAULT_TRIALS, DEFAULT_SEED);
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--trials" => {
                trials = value
                    .parse()
                    .map_err(|_| format!("--trials {value}: not a number"))?;
            }
            "--seed" => {
                seed = value
                    .parse()
                    .map_err(|_| format!("--seed {value}: not a number"))?;
            }
            other => return Err(format!("unknown option {other} (--trials N, --seed S)")),
        }
    }
    if trials == 0 {
        return Err("--trials must be at least 1".to_owned());
    }
    Ok((trials, seed))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (trials, seed) = match parse(&args) {
        Ok(options) => options,
        Err(problem) => {
            eprintln!("failover_bench: {problem}");
            return ExitCode::FAILURE;
        }
    };
    #[allow(clippy::disallowed_types)] // wall clock for the footer only; figures are virtual
    let started = std::time::Instant::now();
    println!(
        "failover after the leader of a settled {NODES}-node cluster is killed, until every \
         survivor names the same new leader (virtual time; {trials} trials each, seed {seed})"
    );
    println!();
    println!(
        "{:<9} {:<10} {:>9} {:>9} {:>9} {:>9}  {:>9}  within",
        "mode", "timings", "min", "median", "p90", "max", "formula"
    );
    let mut ok = true;
    let mut notes = Vec::new();
    for (index, setup) in setups().iter().enumerate() {
        let mut times = Vec::with_capacity(trials);
        for trial_index in 0..trials {
            let trial_seed = seed
                .wrapping_mul(1_000_003)
                .wrapping_add((index as u64) << 32)
                .wrapping_add(trial_index as u64);
            match trial(setup, trial_seed) {
                Ok(time) => times.push(time),
                Err(problem) => {
                    ok = false;
                    eprintln!(
                        "{} {} trial {trial_index} (seed {trial_seed}): {problem}",
                        setup.mode, setup.timings
                    );
                }
            }
        }
        if times.is_empty() {
            continue;
        }
        times.sort();
        let within = times.iter().filter(|&&time| time <= setup.bound).count();
        println!(
            "{:<9} {:<10} {:>9} {:>9} {:>9} {:>9}  {:>9}  {within}/{}",
            setup.mode,
            setup.timings,
            fmt(times[0]),
            fmt(percentile(&times, 0.5)),
            fmt(percentile(&times, 0.9)),
            fmt(times[times.len() - 1]),
            fmt(setup.bound),
            times.len()
        );
        notes.push(format!(
            "  {} {}: {}",
            setup.mode, setup.timings, setup.formula
        ));
        if let Some(reference) = &setup.reference {
            notes.push(format!("    {reference}"));
        }
    }
    println!();
    println!("formulas:");
    for note in notes {
        println!("{note}");
    }
    println!();
    println!(
        "static mode: no failover to measure (the named leader is the only leader; survivors \
         report it lost, STA-1)"
    );
    println!("wall clock: {:.1} s", started.elapsed().as_secs_f64());
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
