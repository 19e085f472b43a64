//! Election time after a leader crash: the Raft paper's Figure 16 experiment (Ongaro and
//! Ousterhout, "In Search of an Understandable Consensus Algorithm", §9.3) rerun in the
//! deterministic simulator, the measurement behind docs/design.md §11's "at or below the paper in every
//! range". Five voters on a simulated network with a uniform 5–10 ms one-way delay (≈ 15 ms
//! round trip) elect a leader; the leader is crashed at a uniformly random point of its
//! heartbeat interval (half the minimum election timeout), and the virtual time until a live
//! node leads in a higher term — and until every survivor knows it — is recorded, together
//! with the election messages sent. Every figure is virtual time, so a run is exactly
//! reproducible from its seed on any machine; the wall clock only times the program itself.
//!
//! ```text
//! cargo run --release -p conclave-harness --example election_bench \
//!     [-- [--trials N] [--seed S] [--quick] [--threads T] [--delay A-B]]
//! ```

use std::cell::Cell;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use conclave_core::SeededRng;
use conclave_core::election::Role;
use conclave_harness::sim::invariants::{self, Invariant, liveness};
use conclave_harness::sim::{
    AdmissionModel, NetworkConfig, Observation, SentKind, SimConfig, Simulation,
};

/// Figure 16 has a 16 in it; any seed replays, this one is what `docs/benchmarks.md` records.
const DEFAULT_SEED: u64 = 16;
const DEFAULT_TRIALS: usize = 1000;
const QUICK_TRIALS: usize = 100;
const NODES: usize = 5;
/// One-way delay, uniform in between: mean 7.5 ms, so a request and its answer take ≈ 15 ms,
/// the paper's "broadcast time of roughly 15 ms".
const DELAY_MIN: Duration = Duration::from_millis(5);
const DELAY_MAX: Duration = Duration::from_millis(10);
/// A trial that has no new leader this long after the crash counts as "> 10 s".
const CAP: Duration = Duration::from_secs(10);
/// Nodes boot this far apart (twice the longest one-way delay) so that the first election
/// succeeds even with a fixed timeout, where simultaneous boots would split votes forever.
const BOOT_STAGGER: Duration = Duration::from_millis(20);
/// Bound on establishing the first leader before a crash.
const SETUP_BOUND: Duration = Duration::from_secs(10);

/// Election timeout ranges of Figure 16, in ms (the maximum is exclusive, so 150–150 is a
/// fixed 150 ms).
const RANGES: [(u64, u64); 7] = [
    (150, 150),
    (150, 151),
    (150, 155),
    (150, 175),
    (150, 200),
    (150, 300),
    (12, 24),
];

/// The paper's figures for a range, where §9.3 states one.
#[derive(Debug, Clone, Copy)]
enum PaperFigure {
    Median(f64),
    Max(f64),
    MeanAndMax(f64, f64),
    OverCap,
}

fn paper_figure(range: (u64, u64)) -> Option<PaperFigure> {
    match range {
        (150, 150) => Some(PaperFigure::OverCap),
        (150, 155) => Some(PaperFigure::Median(287.0)),
        (150, 200) => Some(PaperFigure::Max(513.0)),
        (12, 24) => Some(PaperFigure::MeanAndMax(35.0, 152.0)),
        _ => None,
    }
}

fn paper_label(figure: Option<PaperFigure>) -> String {
    match figure {
        None => String::new(),
        Some(PaperFigure::Median(median)) => format!("median {median:.0} ms"),
        Some(PaperFigure::Max(max)) => format!("worst {max:.0} ms"),
        Some(PaperFigure::MeanAndMax(mean, max)) => {
            format!("mean {mean:.0} ms, longest {max:.0} ms")
        }
        Some(PaperFigure::OverCap) => "over 10 s".to_owned(),
    }
}

/// The election switches of one table.
#[derive(Debug, Clone, Copy)]
struct Mode {
    title: &'static str,
    pre_vote: bool,
    check_quorum: bool,
    ranked_timeouts: bool,
}

/// The paper's settings, conclave's defaults, and — to tell their differences apart — the
/// defaults without ranked timeouts, and pre-vote alone.
const MODES: [Mode; 4] = [
    Mode {
        title: "as in the paper: pre-vote off, check-quorum off, uniform timeouts",
        pre_vote: false,
        check_quorum: false,
        ranked_timeouts: false,
    },
    Mode {
        title: "conclave defaults: pre-vote on, check-quorum on, ranked timeouts",
        pre_vote: true,
        check_quorum: true,
        ranked_timeouts: true,
    },
    Mode {
        title: "defaults but uniform timeouts (ranked_timeouts off)",
        pre_vote: true,
        check_quorum: true,
        ranked_timeouts: false,
    },
    Mode {
        title: "pre-vote alone: check-quorum off, uniform timeouts",
        pre_vote: true,
        check_quorum: false,
        ranked_timeouts: false,
    },
];

#[derive(Debug, Clone)]
pub(crate) struct Options {
    trials: usize,
    seed: u64,
    threads: usize,
    delay: (Duration, Duration),
    args: Vec<String>,
}

const USAGE: &str =
    "usage: election_bench [--trials N] [--seed S] [--quick] [--threads T] [--delay A-B]
  --trials N   trials per timeout range (default 1000; --quick: 100)
  --seed S     base seed, decimal or 0x-hex (default 16)
  --quick      100 trials per range unless --trials says otherwise
  --threads T  worker threads (default: available parallelism); figures do not depend on it
  --delay A-B  one-way network delay, uniform from A to B ms (default 5-10, the paper's
               15 ms round trip); other values are for diagnosis, not for the record";

/// `A-B` in milliseconds, fractions allowed, at microsecond resolution.
fn parse_delay(value: Option<&String>) -> Result<(Duration, Duration), String> {
    let value = value.ok_or("--delay needs a value such as 5-10")?;
    let millis = |text: &str| -> Result<Duration, String> {
        let ms: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("--delay: not a number of ms: {text}"))?;
        if !(0.0..=60_000.0).contains(&ms) {
            return Err(format!("--delay: out of range: {text}"));
        }
        Ok(Duration::from_micros((ms * 1000.0).round() as u64))
    };
    let (low, high) = value
        .split_once('-')
        .ok_or_else(|| format!("--delay: expected A-B, got {value}"))?;
    let (low, high) = (millis(low)?, millis(high)?);
    if high < low {
        return Err(format!("--delay: {value} is empty"));
    }
    Ok((low, high))
}

fn parse_number(flag: &str, value: Option<&String>) -> Result<u64, String> {
    let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
    let parsed = match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse(),
    };
    parsed.map_err(|_| format!("{flag}: not a number: {value}"))
}

pub(crate) fn parse_options(args: Vec<String>) -> Result<Options, String> {
    let mut trials = None;
    let mut seed = DEFAULT_SEED;
    let mut quick = false;
    let mut delay = (DELAY_MIN, DELAY_MAX);
    let mut threads = std::thread::available_parallelism().map_or(1, usize::from);
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--trials" => {
                let n = parse_number(arg, iter.next())?;
                trials = Some(usize::try_from(n).map_err(|_| "--trials too large".to_owned())?);
            }
            "--seed" => seed = parse_number(arg, iter.next())?,
            "--quick" => quick = true,
            "--delay" => delay = parse_delay(iter.next())?,
            "--threads" => {
                let n = parse_number(arg, iter.next())?;
                threads = usize::try_from(n).map_err(|_| "--threads too large".to_owned())?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    let trials = trials.unwrap_or(if quick { QUICK_TRIALS } else { DEFAULT_TRIALS });
    if trials == 0 || threads == 0 {
        return Err("--trials and --threads must be at least 1".to_owned());
    }
    Ok(Options {
        trials,
        seed,
        threads,
        delay,
        args,
    })
}

/// The seed of trial `trial` in range `range_index`: the same in every table, so each mode
/// starts from the same seeds (runs diverge once the modes behave differently).
fn trial_seed(base: u64, range_index: usize, trial: usize) -> u64 {
    SeededRng::new(base ^ ((range_index as u64) << 48) ^ trial as u64).next_u64()
}

/// Counts election messages — pre-vote and vote requests and answers — from the simulator's
/// per-step observations. It is installed beside the standard invariants and never fails.
/// Anything a non-leader sends in a term above `above_term` (the crashed leader's) is an
/// election message; so are pre-votes and granted votes in any term. What a leader sends in
/// its own term is a heartbeat and is left out, as are the followers' answers to heartbeats of
/// the crashed leader that were still in flight.
struct ElectionMessages {
    count: Rc<Cell<u64>>,
    above_term: Rc<Cell<u64>>,
}

impl Invariant for ElectionMessages {
    fn name(&self) -> &'static str {
        "election message count (never fails)"
    }

    fn check(&mut self, sim: &Simulation, observations: &[Observation]) -> Result<(), String> {
        for observation in observations {
            let Observation::Sent {
                from, term, kind, ..
            } = observation
            else {
                continue;
            };
            let counts = match kind {
                SentKind::PreVote | SentKind::VoteGranted => true,
                SentKind::Other => {
                    let heartbeat = sim
                        .index_of(*from)
                        .and_then(|i| sim.raft(i))
                        .is_some_and(|raft| raft.role() == Role::Leader && raft.term() == *term);
                    *term > self.above_term.get() && !heartbeat
                }
            };
            if counts {
                self.count.set(self.count.get() + 1);
            }
        }
        Ok(())
    }
}

/// What one trial measured. `None` times are trials that hit the cap.
#[derive(Debug, Clone, Copy)]
struct Trial {
    /// Crash until some live node leads in a higher term.
    leaderless: Option<Duration>,
    /// Crash until every live node names the same leader of the same term.
    all_know: Option<Duration>,
    /// Whether the first new leader was replaced by one of a higher term before every survivor
    /// knew a leader (`None` when nobody got that far).
    deposed: Option<bool>,
    /// Whether the leader everyone knew still led, known by all, two maximum election timeouts
    /// later (`None` when nobody got that far).
    kept: Option<bool>,
    /// Every Raft message sent from the crash until the new leader exists
    /// (`raft_messages_sent()` delta: includes the winner's first heartbeats and answers to
    /// heartbeats in flight at the crash).
    messages: u64,
    /// Election messages only (see [`ElectionMessages`]).
    election_messages: u64,
}

/// Why a trial measured nothing.
#[derive(Debug, Clone)]
enum TrialError {
    /// No leader lasted long enough to be crashed: a finding about the settings, reported.
    Setup(String),
    /// A safety invariant broke: a bug in the election code.
    Safety(String),
}

fn classify(failure: conclave_harness::sim::SimFailure) -> TrialError {
    if failure.invariant == "liveness" {
        TrialError::Setup(failure.detail)
    } else {
        TrialError::Safety(failure.to_string())
    }
}

fn run_trial(
    mode: Mode,
    range: (u64, u64),
    delay: (Duration, Duration),
    seed: u64,
) -> Result<Trial, TrialError> {
    let timeout_min = Duration::from_millis(range.0);
    let timeout_max = Duration::from_millis(range.1);
    let heartbeat = timeout_min / 2;
    let calm = timeout_max.max(timeout_min) * 2;
    let mut trial_rng = SeededRng::new(seed);

    let mut config = SimConfig::voters(NODES, heartbeat, timeout_min, timeout_max);
    config.membership = None;
    // The election alone, as the paper measured it: without membership's pings nothing would
    // keep restarted nodes verified, so admission is off too.
    config.admission = AdmissionModel::Off;
    let raft = config.raft_mut().expect("a raft cluster");
    raft.pre_vote = mode.pre_vote;
    raft.check_quorum = mode.check_quorum;
    raft.ranked_timeouts = mode.ranked_timeouts;
    // The figure measures fixed timeout ranges, so adaptive detection (on by default, issue
    // 27) is off in every table: with a heartbeat of half the minimum, its floor of two and
    // a half heartbeats would replace the range under test.
    raft.adaptive_timeout = false;
    config.network = NetworkConfig {
        delay_min: delay.0,
        delay_max: delay.1,
        loss: 0.0,
        duplicate: 0.0,
    };
    let election = config.election.clone();
    let mut sim = Simulation::new(trial_rng.next_u64(), config)
        .map_err(|error| TrialError::Setup(format!("settings refused: {error}")))?;
    let count = Rc::new(Cell::new(0));
    let above_term = Rc::new(Cell::new(u64::MAX));
    let mut checks = invariants::standard(&election);
    checks.push(Box::new(ElectionMessages {
        count: Rc::clone(&count),
        above_term: Rc::clone(&above_term),
    }));
    sim.set_invariants(checks);

    // A stable leader: staggered boots, a first election, then two maximum timeouts of calm.
    for node in 1..NODES {
        sim.crash(node);
    }
    for node in 1..NODES {
        sim.run_for(BOOT_STAGGER).map_err(classify)?;
        sim.restart(node);
    }
    liveness::await_agreed_leader(&mut sim, SETUP_BOUND).map_err(classify)?;
    let leader = liveness::check_still_agreed(&mut sim, calm).map_err(classify)?;

    // Align on the leader's heartbeat, then crash it uniformly within the next interval.
    let next = sim
        .raft(leader)
        .and_then(|raft| raft.next_heartbeat())
        .ok_or_else(|| TrialError::Setup("the leader has no heartbeat timer".to_owned()))?;
    sim.run_until(next).map_err(classify)?;
    let offset = trial_rng.duration_between(Duration::ZERO, heartbeat);
    sim.run_until(next + offset).map_err(classify)?;
    let old_term = match sim.raft(leader) {
        Some(raft) if raft.role() == Role::Leader => raft.term(),
        _ => {
            return Err(TrialError::Setup(format!(
                "the leader stepped down before the crash: {}",
                liveness::describe(&sim)
            )));
        }
    };
    sim.crash(leader);
    let crashed_at = sim.now();
    let deadline = crashed_at + CAP;
    let messages_before = sim.raft_messages_sent();
    above_term.set(old_term);
    let count_before = count.get();

    let elected = sim
        .run_until_condition(deadline, |sim| {
            sim.leaders()
                .iter()
                .any(|&i| sim.raft(i).is_some_and(|raft| raft.term() > old_term))
        })
        .map_err(classify)?;
    let messages = sim.raft_messages_sent() - messages_before;
    let election_messages = count.get() - count_before;
    let all_know_leader = |sim: &Simulation| {
        let alive = sim.alive();
        sim.agreed_leader(&alive)
            .and_then(|i| sim.raft(i).map(|raft| (i, raft.term())))
    };
    let first_term = sim
        .leaders()
        .iter()
        .filter_map(|&i| sim.raft(i).map(|raft| raft.term()))
        .find(|&term| term > old_term);
    let known = match elected {
        Some(_) => sim
            .run_until_condition(deadline, |sim| all_know_leader(sim).is_some())
            .map_err(classify)?,
        None => None,
    };
    let agreed = known.and_then(|_| all_know_leader(&sim));
    let deposed = agreed
        .zip(first_term)
        .map(|((_, agreed_term), first_term)| agreed_term != first_term);
    let kept = match (known, all_know_leader(&sim)) {
        (Some(_), Some(agreed)) => {
            sim.run_for(calm).map_err(classify)?;
            Some(all_know_leader(&sim) == Some(agreed))
        }
        _ => None,
    };
    Ok(Trial {
        leaderless: elected.map(|at| at - crashed_at),
        all_know: known.map(|at| at - crashed_at),
        deposed,
        kept,
        messages,
        election_messages,
    })
}

/// Runs every trial of one range on `threads` threads; results are in trial order whatever the
/// thread count.
fn run_range(
    mode: Mode,
    range_index: usize,
    options: &Options,
) -> Vec<(usize, Result<Trial, TrialError>)> {
    let range = RANGES[range_index];
    let threads = options.threads.min(options.trials);
    let mut results: Vec<(usize, Result<Trial, TrialError>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                scope.spawn(move || {
                    (worker..options.trials)
                        .step_by(threads)
                        .map(|trial| {
                            let seed = trial_seed(options.seed, range_index, trial);
                            (trial, run_trial(mode, range, options.delay, seed))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a benchmark worker panicked"))
            .collect()
    });
    results.sort_by_key(|(trial, _)| *trial);
    results
}

/// Summary of one range. Capped trials sort after every measured one.
#[derive(Debug)]
struct Summary {
    trials: usize,
    median: Option<Duration>,
    mean: Mean,
    p99: Option<Duration>,
    max: Option<Duration>,
    capped: usize,
    messages: Option<f64>,
    election_messages: Option<f64>,
    all_know_median: Option<Duration>,
    /// Share of trials that reached "all know" whose first new leader had been replaced.
    deposed: Option<f64>,
    /// Share of trials that reached "all know" whose leader then stayed.
    kept: Option<f64>,
}

#[derive(Debug)]
enum Mean {
    Exact(Duration),
    /// Some trials hit the cap; counting them as 10 s gives this lower bound.
    AtLeast(Duration),
}

/// Nearest-rank percentile; `None` when it falls on a capped trial (or there are no trials).
fn percentile(sorted: &[Option<Duration>], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn sorted_times(times: impl Iterator<Item = Option<Duration>>) -> Vec<Option<Duration>> {
    let mut times: Vec<Option<Duration>> = times.collect();
    times.sort_by_key(|time| time.unwrap_or(Duration::MAX));
    times
}

fn summarize(trials: &[Trial]) -> Summary {
    let leaderless = sorted_times(trials.iter().map(|t| t.leaderless));
    let all_know = sorted_times(trials.iter().map(|t| t.all_know));
    let capped = leaderless.iter().filter(|t| t.is_none()).count();
    let total: Duration = leaderless.iter().map(|t| t.unwrap_or(CAP)).sum();
    let mean = total / u32::try_from(trials.len().max(1)).unwrap_or(u32::MAX);
    let elected: Vec<&Trial> = trials.iter().filter(|t| t.leaderless.is_some()).collect();
    let average = |f: fn(&Trial) -> u64| {
        (!elected.is_empty())
            .then(|| elected.iter().map(|t| f(t) as f64).sum::<f64>() / elected.len() as f64)
    };
    let share = |flags: Vec<bool>| {
        (!flags.is_empty())
            .then(|| flags.iter().filter(|&&flag| flag).count() as f64 * 100.0 / flags.len() as f64)
    };
    let deposed = share(trials.iter().filter_map(|t| t.deposed).collect());
    let kept = share(trials.iter().filter_map(|t| t.kept).collect());
    Summary {
        trials: trials.len(),
        median: percentile(&leaderless, 0.5),
        mean: if capped == 0 {
            Mean::Exact(mean)
        } else {
            Mean::AtLeast(mean)
        },
        p99: percentile(&leaderless, 0.99),
        max: leaderless.last().copied().flatten(),
        capped,
        messages: average(|t| t.messages),
        election_messages: average(|t| t.election_messages),
        all_know_median: percentile(&all_know, 0.5),
        deposed,
        kept,
    }
}

fn fmt_time(time: Option<Duration>) -> String {
    match time {
        Some(time) => format!("{:.1}", time.as_secs_f64() * 1000.0),
        None => "> 10 s".to_owned(),
    }
}

fn fmt_mean(mean: &Mean) -> String {
    match mean {
        Mean::Exact(mean) => fmt_time(Some(*mean)),
        Mean::AtLeast(mean) if *mean >= CAP => "> 10 s".to_owned(),
        Mean::AtLeast(mean) => format!("> {}", fmt_time(Some(*mean))),
    }
}

fn fmt_count(count: Option<f64>) -> String {
    count.map_or_else(|| "-".to_owned(), |count| format!("{count:.1}"))
}

fn fmt_share(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_owned(), |share| format!("{share:.1}%"))
}

fn fmt_ms(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    if ms.fract() == 0.0 {
        format!("{ms:.0}")
    } else {
        format!("{ms}")
    }
}

fn range_label(range: (u64, u64)) -> String {
    format!("{}-{}", range.0, range.1)
}

/// Where a range stands against the paper's figure: `None` when the paper gives none.
fn verdict(range: (u64, u64), summary: &Summary) -> Option<String> {
    if summary.trials == 0 {
        return Some(format!(
            "{:<8} no trial measured: see the setup failures",
            range_label(range)
        ));
    }
    let ours = |time: Option<Duration>| time.map(|t| t.as_secs_f64() * 1000.0);
    let compare = |what: &str, ours: Option<f64>, paper: f64| {
        let standing = match ours {
            Some(ours) if ours <= paper => "at or below the paper",
            _ => "ABOVE the paper",
        };
        let ours = ours.map_or_else(|| "> 10 s".to_owned(), |v| format!("{v:.1} ms"));
        format!("{what} {ours} vs {paper:.0} ms: {standing}")
    };
    let mean = match summary.mean {
        Mean::Exact(mean) => Some(mean),
        Mean::AtLeast(_) => None,
    };
    let text = match paper_figure(range)? {
        PaperFigure::Median(paper) => compare("median", ours(summary.median), paper),
        PaperFigure::Max(paper) => compare("worst", ours(summary.max), paper),
        PaperFigure::MeanAndMax(paper_mean, paper_max) => format!(
            "{}; {}",
            compare("mean", ours(mean), paper_mean),
            compare("longest", ours(summary.max), paper_max)
        ),
        PaperFigure::OverCap => {
            let share = summary.capped as f64 * 100.0 / summary.trials as f64;
            format!(
                "{share:.1}% of trials over 10 s, median {} ms (paper: over 10 s): at or below the paper",
                fmt_time(summary.median)
            )
        }
    };
    Some(format!("{:<8} {text}", range_label(range)))
}

fn main() -> ExitCode {
    #[allow(clippy::disallowed_types)] // wall clock for the footer only; figures are virtual
    let started = std::time::Instant::now();
    let options = match parse_options(std::env::args().skip(1).collect()) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("election_bench: {message}");
            }
            eprintln!("{USAGE}");
            return if message.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    let (text, safe) = report(&options);
    print!("{text}");
    // On standard error, so that standard output is the same on every run and machine.
    eprintln!(
        "wall clock: {:.1} s on {} thread(s) (virtual-time figures do not depend on it)",
        started.elapsed().as_secs_f64(),
        options.threads
    );
    if safe {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Everything the program prints on standard output for `options`, and whether every safety
/// invariant held. A pure function of the options (the simulator is deterministic), which is
/// what lets `crates/harness/tests/figure16_doc.rs` hold `docs/benchmarks.md` to it.
pub(crate) fn report(options: &Options) -> (String, bool) {
    let mut out = String::new();
    macro_rules! println {
        () => {
            out.push('\n')
        };
        ($($arg:tt)*) => {{
            use std::fmt::Write as _;
            let _ = writeln!(out, $($arg)*);
        }};
    }

    let mut command = "cargo run --release -p conclave-harness --example election_bench".to_owned();
    if !options.args.is_empty() {
        command.push_str(" -- ");
        command.push_str(&options.args.join(" "));
    }
    let (delay_min, delay_max) = options.delay;
    println!("Raft paper Figure 16 (Ongaro & Ousterhout, §9.3) in the conclave simulator");
    println!("command:  {command}");
    println!(
        "seed:     {} (each range and trial gets its own derived seed, the same in every table)",
        options.seed
    );
    println!(
        "cluster:  {NODES} voters, membership off, one-way delay uniform {}-{} ms (mean {} ms, \
         round trip about {} ms), no loss",
        fmt_ms(delay_min),
        fmt_ms(delay_max),
        fmt_ms((delay_min + delay_max) / 2),
        fmt_ms(delay_min + delay_max),
    );
    println!(
        "trial:    boots staggered by {} ms; first leader must keep leading for 2 max timeouts; \
         heartbeat = min timeout / 2;",
        BOOT_STAGGER.as_millis()
    );
    println!(
        "          leader crashed at a uniform point of its heartbeat interval; {} trials per \
         range; cap {} s of virtual time",
        options.trials,
        CAP.as_secs()
    );
    println!(
        "columns:  ms of virtual time from the crash, nearest-rank percentiles; median..max: \
         until a live node leads in a higher term"
    );
    println!(
        "          (time without leader); capped: trials with no leader after 10 s; msgs: all \
         Raft messages sent from the crash"
    );
    println!(
        "          until then; votes: (pre-)vote requests and answers among them; all-know: \
         median until every survivor names"
    );
    println!(
        "          the leader; deposed: share of those whose first new leader had been replaced \
         by a higher term first;"
    );
    println!("          kept: share of those whose leader still led 2 max timeouts later");

    let mut safety: Vec<String> = Vec::new();
    let mut verdicts: Vec<String> = Vec::new();
    for mode in MODES {
        println!();
        println!("## {}", mode.title);
        println!(
            "{:<8} {:>6} {:>8} {:>9} {:>8} {:>8} {:>7} {:>6} {:>6} {:>8} {:>7} {:>6}  paper (§9.3)",
            "range",
            "trials",
            "median",
            "mean",
            "p99",
            "max",
            "capped",
            "msgs",
            "votes",
            "all-know",
            "deposed",
            "kept"
        );
        let mut setup_notes: Vec<String> = Vec::new();
        for (range_index, range) in RANGES.iter().copied().enumerate() {
            let results = run_range(mode, range_index, options);
            let mut trials = Vec::with_capacity(results.len());
            let mut setup_failures: Vec<(usize, String)> = Vec::new();
            for (trial, result) in results {
                let seed = trial_seed(options.seed, range_index, trial);
                match result {
                    Ok(measured) => trials.push(measured),
                    Err(TrialError::Setup(detail)) => setup_failures.push((trial, detail)),
                    Err(TrialError::Safety(detail)) => safety.push(format!(
                        "[{}] {} trial {trial} (trial seed {seed}): {detail}",
                        mode.title,
                        range_label(range)
                    )),
                }
            }
            let summary = summarize(&trials);
            let capped = summary.capped as f64 * 100.0 / summary.trials.max(1) as f64;
            let row = format!(
                "{:<8} {:>6} {:>8} {:>9} {:>8} {:>8} {:>6.1}% {:>6} {:>6} {:>8} {:>7} {:>6}  {}",
                range_label(range),
                summary.trials,
                fmt_time(summary.median),
                fmt_mean(&summary.mean),
                fmt_time(summary.p99),
                fmt_time(summary.max),
                capped,
                fmt_count(summary.messages),
                fmt_count(summary.election_messages),
                fmt_time(summary.all_know_median),
                fmt_share(summary.deposed),
                fmt_share(summary.kept),
                paper_label(paper_figure(range)),
            );
            println!("{}", row.trim_end());
            if let Some((trial, detail)) = setup_failures.first() {
                setup_notes.push(format!(
                    "{}: {} of {} trials had no leader that kept leading for 2 max timeouts \
                     before the crash, so they measured nothing; first, trial {trial}: {detail}",
                    range_label(range),
                    setup_failures.len(),
                    options.trials
                ));
            }
            if let Some(verdict) = verdict(range, &summary) {
                verdicts.push(format!("[{}] {verdict}", mode.title));
            }
        }
        for note in &setup_notes {
            println!("note: {note}");
        }
    }

    println!();
    println!("## against the paper (docs/design.md §11: at or below the paper in every range)");
    for verdict in &verdicts {
        println!("{verdict}");
    }
    if !safety.is_empty() {
        println!();
        println!("## safety invariants broken ({} trials)", safety.len());
        for failure in safety.iter().take(20) {
            println!("{failure}");
        }
    }
    let safe = safety.is_empty();
    (out, safe)
}
