//! The node's Prometheus metrics (CB-4, docs/design.md §8). The names are part of the interface.
//!
//! Each node owns its own registry (a `metrics` recorder from `metrics-exporter-prometheus`,
//! not the process-global one), so that several nodes in one process — the actor tests, the
//! demo — keep their figures apart, and the `/metrics` endpoint renders exactly its node. No
//! metric is labelled with the node's own id: Prometheus adds `instance`. Peer labels are
//! bounded by the cluster size.
//!
//! Beside the registry, a render adds what the exporter cannot hold: the standard `process_*`
//! series of the whole process, read from `/proc` at each scrape (see
//! `process_metrics`), and `conclave_leaderless_seconds_total`, a counter of
//! fractional seconds (the exporter's counters count whole numbers) that includes the
//! leaderless stretch still running at the scrape. `conclave_build_info{version,commit}` is 1,
//! with the commit the binary was built from (`unknown` outside a git checkout;
//! `CONCLAVE_BUILD_COMMIT` at build time overrides it). The output passes
//! `promtool check metrics` (`dashboards/check.sh` checks a live node).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use actix::clock::Instant;

use conclave_core::election::Role;
use conclave_protocol::{DropReason, PeerId};
use conclave_statemachine::{StoreLimits, StoreUse};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Label, Level, Metadata, Recorder, Unit};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

const METADATA: Metadata<'static> = Metadata::new("conclave", Level::INFO, Some(module_path!()));

/// Every metric name the node exports, with its help text. The dashboard and alert rules are
/// checked against a live scrape, and this list is what a scrape shows.
pub const METRIC_NAMES: &[(&str, &str)] = &[
    (
        "conclave_build_info",
        "Always 1; the labels say which version and commit this binary was built from",
    ),
    (
        "conclave_election_term",
        "Current term of this node, the term of its fencing token: the raft term, the gossip \
         leadership epoch, the priority round or the static assignment epoch",
    ),
    (
        "conclave_election_is_leader",
        "1 when this node is the leader",
    ),
    (
        "conclave_election_leader_known",
        "1 when this node knows a leader",
    ),
    ("conclave_election_role", "1 for this node's current role"),
    (
        "conclave_election_phase",
        "1 for this node's current phase: the role, or its mode's finer name for it \
         (pre_candidate in raft mode)",
    ),
    (
        "conclave_election_mode",
        "Always 1; the label says which election mode this node runs (election.mode)",
    ),
    (
        "conclave_election_abstaining",
        "1 while this node abstains after starting without a term or vote (docs/wal.md)",
    ),
    (
        "conclave_leader_changes_total",
        "Leader changes seen by this node",
    ),
    (
        "conclave_elections_started_total",
        "Campaigns started by this node, by kind",
    ),
    ("conclave_elections_won_total", "Elections won by this node"),
    (
        "conclave_election_duration_seconds",
        "Time from the first campaign after losing the leader to winning",
    ),
    (
        "conclave_leaderless_seconds_total",
        "Time this node spent without a known leader",
    ),
    (
        "conclave_votes_total",
        "Votes this node answered, by result",
    ),
    (
        "conclave_split_brain_total",
        "Two different leaders claimed for one term",
    ),
    ("conclave_peers", "Peers in the table, by status"),
    (
        "conclave_peer_rtt_seconds",
        "Last ping round-trip time per peer",
    ),
    (
        "conclave_frames_total",
        "Frames sent and received, by link, direction and kind",
    ),
    (
        "conclave_frames_dropped_total",
        "Received frames dropped, by reason",
    ),
    (
        "conclave_wal_fsync_seconds",
        "Time to make a WAL append durable",
    ),
    (
        "conclave_log_entries_per_fsync",
        "Replicated log entries made durable by one fsync (group commit)",
    ),
    (
        "conclave_log_commit_index",
        "Highest replicated log index known committed",
    ),
    (
        "conclave_log_applied_index",
        "Highest replicated log index applied to the state machine",
    ),
    (
        "conclave_replication_lag_entries",
        "On the leader: entries each follower is behind its log",
    ),
    (
        "conclave_log_voters",
        "Voters in the configuration of the log's cluster this node acts on",
    ),
    (
        "conclave_log_learners",
        "Learners (members that receive the log and do not vote) in the configuration this \
         node acts on",
    ),
    (
        "conclave_log_configuration_index",
        "Log index of the entry that carries the configuration in force (0: the one \
         cluster.voters seeds)",
    ),
    (
        "conclave_log_configuration_changes_total",
        "Changes of the configuration this node acts on: configuration entries appended, or \
         taken away by a truncation",
    ),
    (
        "conclave_log_learner_lag_entries",
        "On the leader: entries each learner is behind its log",
    ),
    (
        "conclave_log_proposals_total",
        "Client writes offered to the replicated log, by result",
    ),
    (
        "conclave_log_reads_total",
        "Linearizable reads of the replicated log (by read index), by result",
    ),
    (
        "conclave_log_claims_waiting",
        "Job claims waiting on this node for a job to become ready (wait_ms)",
    ),
    (
        "conclave_log_snapshots_total",
        "Snapshots of the state machine saved, by origin: taken here, or installed from the leader",
    ),
    (
        "conclave_log_snapshot_bytes",
        "Size of the latest snapshot of the state machine",
    ),
    (
        "conclave_log_sessions",
        "Live sessions in this node's copy of the state machine",
    ),
    (
        "conclave_log_store_bytes",
        "What this node's copy of the store weighs as log.max_store_bytes counts it: keys and \
         jobs not done",
    ),
    ("conclave_log_store_max_bytes", "log.max_store_bytes"),
    (
        "conclave_log_store_jobs",
        "Jobs not done (ready, claimed or dead) in this node's copy",
    ),
    ("conclave_log_store_max_jobs", "log.max_jobs"),
    (
        "conclave_log_store_full",
        "1 while the store is at its bounds: the largest write might be refused with 507 \
         store_full, or the job queue holds log.max_jobs jobs",
    ),
    (
        "conclave_log_expiries_total",
        "On the leader: job leases and sessions whose time ran out on its clock, proposed for \
         expiry, by kind",
    ),
    ("conclave_callbacks_total", "Hook runs, by hook and result"),
    (
        "conclave_events_lagged_total",
        "Events lost by subscribers that fell behind",
    ),
    (
        "conclave_dongle_connected",
        "1 while the ESP-NOW dongle is connected and set up",
    ),
    (
        "conclave_dongle_rssi_dbm",
        "Signal strength of each peer as the dongle hears it",
    ),
    (
        "conclave_dongle_tx_failures_total",
        "ESP-NOW sends the radio reported as not delivered",
    ),
    (
        "conclave_dongle_crc_errors_total",
        "Frames from the dongle dropped for a bad CRC",
    ),
    (
        "conclave_dongle_dropped_total",
        "Frames dropped before reaching the dongle, by reason",
    ),
    (
        "conclave_admin_refused_total",
        "Admin API requests refused at a bound or past their deadline, by reason",
    ),
    (
        "conclave_admin_connections",
        "Open connections to the admin API",
    ),
    (
        "conclave_admin_event_streams",
        "Open admin event streams (GET /v1/events)",
    ),
    (
        "conclave_health_readings_total",
        "Readings of the [health] source, by result (ok, or error: unreadable, failed, timed \
         out or not understood)",
    ),
    (
        "conclave_battery_percent",
        "This node's battery as its [health] source last reported it",
    ),
];

/// Buckets for election durations: a fast LAN election is tens of milliseconds, a slow one
/// several election timeouts.
const ELECTION_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
/// Buckets for entries per fsync: one alone up to a busy batch.
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
/// Buckets for fsync: SSDs answer in tens of microseconds, SD cards in tens of milliseconds.
const FSYNC_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// The values of `conclave_log_proposals_total{result}`.
const PROPOSAL_RESULTS: &[&str] = &[
    "committed",
    "not_leader",
    "lost",
    "busy",
    "too_large",
    "store_full",
];

/// The values of `conclave_log_reads_total{result}`.
const READ_RESULTS: &[&str] = &["served", "not_leader", "busy"];

/// `conclave_leaderless_seconds_total`, rendered by [`NodeMetrics::render`] itself.
const LEADERLESS: &str = "conclave_leaderless_seconds_total";

/// `conclave_log_learner_lag_entries{peer}`, rendered by [`NodeMetrics::render`] itself: the
/// exporter cannot drop one series, and a peer that stopped being a learner (promoted,
/// removed) or a node that stopped leading must not keep showing its last lag.
const LEARNER_LAG: &str = "conclave_log_learner_lag_entries";

/// The commit this crate was built from (`build.rs`), `unknown` outside a git checkout.
pub const BUILD_COMMIT: &str = env!("CONCLAVE_BUILD_COMMIT");

/// Time without a known leader: the stretches that ended, and the one running, if any.
#[derive(Debug, Default)]
struct Leaderless {
    total: Duration,
    since: Option<Instant>,
}

impl Leaderless {
    fn seconds_at(&self, now: Instant) -> f64 {
        let running = self
            .since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        (self.total + running).as_secs_f64()
    }
}

#[derive(Debug)]
struct Inner {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    leaderless: Mutex<Leaderless>,
    /// The phase `conclave_election_phase` shows at 1, so a change can set it back to 0.
    phase: Mutex<&'static str>,
    /// `conclave_frames_dropped_total{reason}`, one handle per [`DropReason::ALL`], registered
    /// once: a flood is counted frame by frame, and a lookup by owned label per frame would
    /// cost more than the drop itself.
    dropped: Vec<Counter>,
    /// Frames dropped per reason since the transport last logged a summary of them.
    dropped_unlogged: Vec<AtomicU64>,
    /// On the leader, each learner's lag: the series of [`LEARNER_LAG`].
    learner_lag: Mutex<BTreeMap<PeerId, u64>>,
    /// STORE-3: the store is at its bounds (`conclave_log_store_full`), for `/health` too.
    store_full: AtomicBool,
}

/// One node's metrics. Cheap to clone; clones share the registry.
#[derive(Debug, Clone)]
pub struct NodeMetrics {
    inner: Arc<Inner>,
}

impl Default for NodeMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeMetrics {
    /// A fresh registry with every metric described and the fixed label sets at zero, so
    /// dashboards see a series before the first event.
    pub fn new() -> Self {
        let builder = PrometheusBuilder::new();
        let builder = builder
            .set_buckets_for_metric(
                Matcher::Full("conclave_election_duration_seconds".to_owned()),
                ELECTION_BUCKETS,
            )
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("conclave_wal_fsync_seconds".to_owned()),
                    FSYNC_BUCKETS,
                )
            })
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("conclave_log_entries_per_fsync".to_owned()),
                    BATCH_BUCKETS,
                )
            })
            // Only fails on empty bucket lists, and these are constants.
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        for (name, help) in METRIC_NAMES {
            if *name == LEADERLESS || *name == LEARNER_LAG {
                continue;
            }
            let unit = name.ends_with("_seconds").then_some(Unit::Seconds);
            recorder.describe_gauge(KeyName::from(*name), unit, (*help).into());
        }
        let dropped = DropReason::ALL
            .iter()
            .map(|reason| {
                recorder.register_counter(
                    &Self::key(
                        "conclave_frames_dropped_total",
                        &[("reason", reason.label().to_owned())],
                    ),
                    &METADATA,
                )
            })
            .collect();
        let metrics = Self {
            inner: Arc::new(Inner {
                recorder,
                handle,
                leaderless: Mutex::new(Leaderless::default()),
                phase: Mutex::new(Role::Follower.label()),
                dropped,
                dropped_unlogged: DropReason::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
                learner_lag: Mutex::new(BTreeMap::new()),
                store_full: AtomicBool::new(false),
            }),
        };
        metrics.preregister();
        metrics
    }

    fn preregister(&self) {
        self.gauge(
            "conclave_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION").to_owned()),
                ("commit", BUILD_COMMIT.to_owned()),
            ],
        )
        .set(1.0);
        self.gauge("conclave_election_term", &[]).set(0.0);
        self.gauge("conclave_election_is_leader", &[]).set(0.0);
        self.gauge("conclave_election_leader_known", &[]).set(0.0);
        self.gauge("conclave_election_abstaining", &[]).set(0.0);
        self.set_role(Role::Follower);
        self.gauge(
            "conclave_election_phase",
            &[("phase", Role::Follower.label().to_owned())],
        )
        .set(1.0);
        self.counter("conclave_leader_changes_total", &[])
            .absolute(0);
        for kind in ["pre_vote", "election"] {
            self.counter(
                "conclave_elections_started_total",
                &[("kind", kind.to_owned())],
            )
            .absolute(0);
        }
        self.counter("conclave_elections_won_total", &[])
            .absolute(0);
        for result in ["granted", "refused"] {
            self.counter("conclave_votes_total", &[("result", result.to_owned())])
                .absolute(0);
        }
        self.counter("conclave_split_brain_total", &[]).absolute(0);
        self.set_peers(0, 0);
        for reason in DropReason::ALL {
            self.counter(
                "conclave_frames_dropped_total",
                &[("reason", reason.label().to_owned())],
            )
            .absolute(0);
        }
        // Histograms exist from the start so that the first election and the first fsync are
        // counted by `increase()`, which needs a series to exist before its first change.
        let _ = self.histogram("conclave_election_duration_seconds");
        let _ = self.histogram("conclave_wal_fsync_seconds");
        for subscriber in ["hooks", "admin_events"] {
            self.counter(
                "conclave_events_lagged_total",
                &[("subscriber", subscriber.to_owned())],
            )
            .absolute(0);
        }
    }

    /// Creates at zero the series of the configured hooks (`callbacks_total` for every
    /// result, the hook queues' lag), so that the first failure of a hook is visible to
    /// `increase()` and to the alert rules.
    pub fn preregister_hooks(&self, hooks: &[&str]) {
        for hook in hooks {
            for result in ["ok", "failed", "timeout", "error"] {
                self.counter(
                    "conclave_callbacks_total",
                    &[("hook", (*hook).to_owned()), ("result", result.to_owned())],
                )
                .absolute(0);
            }
            self.counter(
                "conclave_events_lagged_total",
                &[("subscriber", format!("hook:{hook}"))],
            )
            .absolute(0);
        }
    }

    /// The Prometheus text exposition of everything recorded so far, the leaderless time up
    /// to now and the process's own series.
    pub fn render(&self) -> String {
        let mut text = self.inner.handle.render();
        let leaderless = self.leaderless_seconds();
        let help = METRIC_NAMES
            .iter()
            .find(|(name, _)| *name == LEADERLESS)
            .map_or("", |(_, help)| help);
        let _ = write!(
            text,
            "# HELP {LEADERLESS} {help}\n# TYPE {LEADERLESS} counter\n{LEADERLESS} {leaderless}\n"
        );
        self.render_learner_lag(&mut text);
        crate::process_metrics::render(&mut text);
        text
    }

    /// The series of [`LEARNER_LAG`], when this node leads a cluster with learners: a family
    /// without samples is left out, as the exporter leaves out its own.
    fn render_learner_lag(&self, text: &mut String) {
        let lag = self
            .inner
            .learner_lag
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if lag.is_empty() {
            return;
        }
        let help = METRIC_NAMES
            .iter()
            .find(|(name, _)| *name == LEARNER_LAG)
            .map_or("", |(_, help)| help);
        let _ = writeln!(
            text,
            "# HELP {LEARNER_LAG} {help}\n# TYPE {LEARNER_LAG} gauge"
        );
        for (peer, entries) in lag.iter() {
            // Peer ids are letters, digits, `.`, `_` and `-`: nothing to escape in a label.
            let _ = writeln!(text, "{LEARNER_LAG}{{peer=\"{peer}\"}} {entries}");
        }
    }

    /// Folds the samples recorded into the histograms since the last render into their
    /// summaries, as a scrape does. Every node runs it every 10 s and once stopped
    /// (`node.rs`), scraped or not: the exporter keeps each histogram's raw samples in blocks
    /// that only a render or this frees, and dropping the registry does not.
    pub fn run_upkeep(&self) {
        self.inner.handle.run_upkeep();
    }

    /// `conclave_leaderless_seconds_total` now, the running stretch included.
    pub fn leaderless_seconds(&self) -> f64 {
        self.inner
            .leaderless
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .seconds_at(Instant::now())
    }

    fn key(name: &'static str, labels: &[(&'static str, String)]) -> Key {
        let labels: Vec<Label> = labels
            .iter()
            .map(|(key, value)| Label::new(*key, value.clone()))
            .collect();
        Key::from_parts(name, labels)
    }

    fn counter(&self, name: &'static str, labels: &[(&'static str, String)]) -> Counter {
        self.inner
            .recorder
            .register_counter(&Self::key(name, labels), &METADATA)
    }

    fn gauge(&self, name: &'static str, labels: &[(&'static str, String)]) -> Gauge {
        self.inner
            .recorder
            .register_gauge(&Self::key(name, labels), &METADATA)
    }

    fn histogram(&self, name: &'static str) -> Histogram {
        self.inner
            .recorder
            .register_histogram(&Self::key(name, &[]), &METADATA)
    }

    // ---------------------------------------------------------------------------------------
    // election

    /// `conclave_election_term`.
    pub fn set_term(&self, term: u64) {
        // Terms stay far below 2^53, where f64 is exact.
        self.gauge("conclave_election_term", &[]).set(term as f64);
    }

    /// `conclave_election_role{role}` and `conclave_election_is_leader`.
    pub fn set_role(&self, role: Role) {
        for candidate in Role::ALL {
            let value = if *candidate == role { 1.0 } else { 0.0 };
            self.gauge(
                "conclave_election_role",
                &[("role", candidate.label().to_owned())],
            )
            .set(value);
        }
        let is_leader = if role == Role::Leader { 1.0 } else { 0.0 };
        self.gauge("conclave_election_is_leader", &[])
            .set(is_leader);
    }

    /// `conclave_election_phase{phase}`: 1 for `phase`, 0 for the phase shown before. Phases
    /// are a mode's fixed names, so the label set stays small.
    pub fn set_phase(&self, phase: &'static str) {
        let mut shown = self
            .inner
            .phase
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *shown != phase {
            self.gauge("conclave_election_phase", &[("phase", (*shown).to_owned())])
                .set(0.0);
            *shown = phase;
        }
        self.gauge("conclave_election_phase", &[("phase", phase.to_owned())])
            .set(1.0);
    }

    /// `conclave_election_mode{mode}`, set once at start.
    pub fn set_mode(&self, mode: &'static str) {
        self.gauge("conclave_election_mode", &[("mode", mode.to_owned())])
            .set(1.0);
    }

    /// `conclave_election_leader_known`; also starts or ends a stretch of
    /// `conclave_leaderless_seconds_total`.
    pub fn set_leader_known(&self, known: bool) {
        self.gauge("conclave_election_leader_known", &[])
            .set(if known { 1.0 } else { 0.0 });
        let now = Instant::now();
        let mut leaderless = self
            .inner
            .leaderless
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match (known, leaderless.since) {
            (true, Some(since)) => {
                leaderless.total += now.saturating_duration_since(since);
                leaderless.since = None;
            }
            (false, None) => leaderless.since = Some(now),
            _ => {}
        }
    }

    /// `conclave_election_abstaining` (WAL-2).
    pub fn set_abstaining(&self, abstaining: bool) {
        self.gauge("conclave_election_abstaining", &[])
            .set(if abstaining { 1.0 } else { 0.0 });
    }

    /// `conclave_leader_changes_total`.
    pub fn leader_changed(&self) {
        self.counter("conclave_leader_changes_total", &[])
            .increment(1);
    }

    /// `conclave_elections_started_total{kind}`: `kind` is the mode's name for the attempt
    /// (`pre_vote` and `election` in raft mode).
    pub fn election_started(&self, kind: &'static str) {
        self.counter(
            "conclave_elections_started_total",
            &[("kind", kind.to_owned())],
        )
        .increment(1);
    }

    /// `conclave_elections_won_total` and `conclave_election_duration_seconds`.
    pub fn election_won(&self, duration: Duration) {
        self.counter("conclave_elections_won_total", &[])
            .increment(1);
        self.histogram("conclave_election_duration_seconds")
            .record(duration.as_secs_f64());
    }

    /// `conclave_votes_total{result}`.
    pub fn vote_cast(&self, granted: bool) {
        let result = if granted { "granted" } else { "refused" };
        self.counter("conclave_votes_total", &[("result", result.to_owned())])
            .increment(1);
    }

    /// `conclave_split_brain_total`.
    pub fn split_brain(&self) {
        self.counter("conclave_split_brain_total", &[]).increment(1);
    }

    // ---------------------------------------------------------------------------------------
    // membership and transport

    /// `conclave_peers{status}`.
    pub fn set_peers(&self, connected: usize, disconnected: usize) {
        self.gauge("conclave_peers", &[("status", "connected".to_owned())])
            .set(connected as f64);
        self.gauge("conclave_peers", &[("status", "disconnected".to_owned())])
            .set(disconnected as f64);
    }

    /// `conclave_peer_rtt_seconds{peer}`.
    pub fn set_peer_rtt(&self, peer: &str, rtt: Duration) {
        self.gauge("conclave_peer_rtt_seconds", &[("peer", peer.to_owned())])
            .set(rtt.as_secs_f64());
    }

    /// `conclave_frames_total{link,direction,kind}`.
    pub fn frame(&self, link: &'static str, direction: &'static str, kind: &'static str) {
        self.counter(
            "conclave_frames_total",
            &[
                ("link", link.to_owned()),
                ("direction", direction.to_owned()),
                ("kind", kind.to_owned()),
            ],
        )
        .increment(1);
    }

    /// `conclave_frames_dropped_total{reason}`, and the tally of the next drop summary.
    pub fn frame_dropped(&self, reason: DropReason) {
        let Some(index) = DropReason::ALL.iter().position(|known| *known == reason) else {
            return;
        };
        if let Some(counter) = self.inner.dropped.get(index) {
            counter.increment(1);
        }
        if let Some(tally) = self.inner.dropped_unlogged.get(index) {
            tally.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Frames dropped by reason since the last call (reasons with none left out), and the
    /// tally starts again: what one summary line in the log says (TR-2).
    pub fn take_dropped_tally(&self) -> Vec<(DropReason, u64)> {
        DropReason::ALL
            .iter()
            .zip(&self.inner.dropped_unlogged)
            .filter_map(|(reason, tally)| {
                let count = tally.swap(0, Ordering::Relaxed);
                (count > 0).then_some((*reason, count))
            })
            .collect()
    }

    // ---------------------------------------------------------------------------------------
    // WAL, callbacks, subscribers

    /// `conclave_wal_fsync_seconds`.
    pub fn wal_fsync(&self, duration: Duration) {
        self.histogram("conclave_wal_fsync_seconds")
            .record(duration.as_secs_f64());
    }

    /// `conclave_log_commit_index` and `conclave_log_applied_index` (LOG-3).
    pub fn set_log_indices(&self, commit: u64, applied: u64) {
        self.gauge("conclave_log_commit_index", &[])
            .set(commit as f64);
        self.gauge("conclave_log_applied_index", &[])
            .set(applied as f64);
    }

    /// `conclave_replication_lag_entries{peer}`: on the leader, how far each follower's log is
    /// known to be behind its own.
    pub fn set_replication_lag(&self, peer: PeerId, lag: u64) {
        self.gauge(
            "conclave_replication_lag_entries",
            &[("peer", peer.to_string())],
        )
        .set(lag as f64);
    }

    /// `conclave_log_voters`, `conclave_log_learners` and `conclave_log_configuration_index`
    /// (MEMB-1, MEMB-2): the configuration this node acts on.
    pub fn set_configuration(&self, voters: usize, learners: usize, index: u64) {
        self.gauge("conclave_log_voters", &[]).set(voters as f64);
        self.gauge("conclave_log_learners", &[])
            .set(learners as f64);
        self.gauge("conclave_log_configuration_index", &[])
            .set(index as f64);
    }

    /// `conclave_log_store_bytes`, `conclave_log_store_max_bytes`, `conclave_log_store_jobs`,
    /// `conclave_log_store_max_jobs` and the alarm `conclave_log_store_full` (STORE-3): what
    /// this node's copy of the store holds against its bounds.
    pub fn set_store(&self, used: StoreUse, limits: StoreLimits) {
        let full = used.is_full(limits);
        self.gauge("conclave_log_store_bytes", &[])
            .set(used.bytes as f64);
        self.gauge("conclave_log_store_max_bytes", &[])
            .set(limits.max_bytes as f64);
        self.gauge("conclave_log_store_jobs", &[])
            .set(used.jobs as f64);
        self.gauge("conclave_log_store_max_jobs", &[])
            .set(limits.max_jobs as f64);
        self.gauge("conclave_log_store_full", &[])
            .set(if full { 1.0 } else { 0.0 });
        self.inner.store_full.store(full, Ordering::Relaxed);
    }

    /// STORE-3: whether the store was at its bounds when last looked at (every second).
    pub fn store_full(&self) -> bool {
        self.inner.store_full.load(Ordering::Relaxed)
    }

    /// `conclave_log_sessions` (SESS-1): live sessions in this node's copy.
    pub fn set_sessions(&self, live: usize) {
        self.gauge("conclave_log_sessions", &[]).set(live as f64);
    }

    /// `conclave_log_expiries_total{kind}` (SESS-0, SESS-1): on the leader, `count` job leases
    /// (`lease`) or sessions (`session`) proposed for expiry.
    pub fn expiries_proposed(&self, kind: &'static str, count: usize) {
        self.counter("conclave_log_expiries_total", &[("kind", kind.to_owned())])
            .increment(count as u64);
    }

    /// `conclave_log_configuration_changes_total` (MEMB-1).
    pub fn configuration_changed(&self) {
        self.counter("conclave_log_configuration_changes_total", &[])
            .increment(1);
    }

    /// `conclave_log_learner_lag_entries{peer}` (MEMB-2): on the leader, each learner's lag;
    /// empty elsewhere. Replaces the whole set, so that a peer no longer a learner, or a node
    /// that no longer leads, shows no stale lag.
    pub fn set_learner_lag(&self, lag: &[(PeerId, u64)]) {
        let mut kept = self
            .inner
            .learner_lag
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Compared first: this runs after every input, and a replaced map would allocate.
        if kept.len() != lag.len() || lag.iter().any(|(peer, n)| kept.get(peer) != Some(n)) {
            *kept = lag.iter().copied().collect();
        }
    }

    /// Creates the replicated log's series at zero on a node that runs the log (LOG-3): the
    /// indices, every proposal result and the batch histogram, so that the dashboard shows the
    /// log before its first write and `increase()` sees the first proposal of each result.
    /// `conclave_replication_lag_entries{peer}` is left to the leader, which alone knows it.
    pub fn preregister_log(&self) {
        self.set_log_indices(0, 0);
        for result in PROPOSAL_RESULTS {
            self.counter(
                "conclave_log_proposals_total",
                &[("result", (*result).to_owned())],
            )
            .absolute(0);
        }
        for result in READ_RESULTS {
            self.counter(
                "conclave_log_reads_total",
                &[("result", (*result).to_owned())],
            )
            .absolute(0);
        }
        let _ = self.histogram("conclave_log_entries_per_fsync");
        for origin in ["taken", "installed"] {
            self.counter(
                "conclave_log_snapshots_total",
                &[("origin", origin.to_owned())],
            )
            .absolute(0);
        }
        self.gauge("conclave_log_snapshot_bytes", &[]).set(0.0);
        self.set_sessions(0);
        for kind in ["lease", "session"] {
            self.counter("conclave_log_expiries_total", &[("kind", kind.to_owned())])
                .absolute(0);
        }
        self.claims_waiting().set(0.0);
        // The configuration's gauges wait for the ElectionActor's first look at its log: a
        // zero here would read as a cluster without voters.
        self.counter("conclave_log_configuration_changes_total", &[])
            .absolute(0);
    }

    /// `conclave_log_proposals_total{result}`, one of `PROPOSAL_RESULTS`: `committed`,
    /// `not_leader`, `lost` (the entry was replaced: its leader lost its term), `busy` (the
    /// leader is handing over or stopping) or `too_large` (larger than a log entry may carry).
    pub fn proposal(&self, result: &'static str) {
        self.counter(
            "conclave_log_proposals_total",
            &[("result", result.to_owned())],
        )
        .increment(1);
    }

    /// `conclave_log_reads_total{result}`, one of `READ_RESULTS` (LOG-7): a linearizable read
    /// `served` at its read index, refused or failed as `not_leader` (this node does not lead,
    /// or stepped down before a heartbeat round confirmed the read), or `busy` (stopping, or
    /// too many reads waiting).
    pub fn read(&self, result: &'static str) {
        self.counter("conclave_log_reads_total", &[("result", result.to_owned())])
            .increment(1);
    }

    /// `conclave_log_snapshots_total{origin}` and `conclave_log_snapshot_bytes` (LOG-4): a
    /// snapshot was saved, `taken` by this node or `installed` from the leader.
    pub fn snapshot_saved(&self, origin: &'static str, bytes: usize) {
        self.counter(
            "conclave_log_snapshots_total",
            &[("origin", origin.to_owned())],
        )
        .increment(1);
        self.gauge("conclave_log_snapshot_bytes", &[])
            .set(bytes as f64);
    }

    /// `conclave_log_claims_waiting` (SESS-3): the gauge of the claims waiting for a ready
    /// job, taken once and kept by the node's waiting claims, which add and take away one each.
    pub(crate) fn claims_waiting(&self) -> Gauge {
        self.gauge("conclave_log_claims_waiting", &[])
    }

    /// `conclave_log_entries_per_fsync`: how many log entries one fsync made durable (group
    /// commit, LOG-3).
    pub fn log_entries_synced(&self, entries: usize) {
        self.histogram("conclave_log_entries_per_fsync")
            .record(entries as f64);
    }

    /// `conclave_callbacks_total{hook,result}`; result is `ok`, `failed`, `timeout` or
    /// `error` (could not start).
    pub fn callback(&self, hook: &str, result: &'static str) {
        self.counter(
            "conclave_callbacks_total",
            &[("hook", hook.to_owned()), ("result", result.to_owned())],
        )
        .increment(1);
    }

    /// `conclave_health_readings_total{result}`; result is `ok` or `error`.
    pub fn health_reading(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.counter(
            "conclave_health_readings_total",
            &[("result", result.to_owned())],
        )
        .increment(1);
    }

    /// Creates the health series: both results at zero, and the battery assumed at start.
    pub fn preregister_health(&self, battery_percent: u8) {
        for result in ["ok", "error"] {
            self.counter(
                "conclave_health_readings_total",
                &[("result", result.to_owned())],
            )
            .absolute(0);
        }
        self.set_battery(battery_percent);
    }

    /// `conclave_battery_percent`.
    pub fn set_battery(&self, battery_percent: u8) {
        self.gauge("conclave_battery_percent", &[])
            .set(f64::from(battery_percent));
    }

    /// Creates the dongle's series at zero; only nodes with an ESP-NOW link export them, so a
    /// UDP-only node never looks like one with an unplugged dongle.
    pub fn preregister_dongle(&self) {
        self.set_dongle_connected(false);
        self.counter("conclave_dongle_tx_failures_total", &[])
            .absolute(0);
        self.counter("conclave_dongle_crc_errors_total", &[])
            .absolute(0);
        self.set_dongle_dropped(0, 0);
    }

    /// `conclave_dongle_connected`.
    pub fn set_dongle_connected(&self, connected: bool) {
        self.gauge("conclave_dongle_connected", &[])
            .set(if connected { 1.0 } else { 0.0 });
    }

    /// `conclave_dongle_rssi_dbm{peer}`.
    pub fn set_peer_rssi(&self, peer: &str, rssi_dbm: f64) {
        self.gauge("conclave_dongle_rssi_dbm", &[("peer", peer.to_owned())])
            .set(rssi_dbm);
    }

    /// `conclave_dongle_tx_failures_total`.
    pub fn dongle_tx_failure(&self) {
        self.counter("conclave_dongle_tx_failures_total", &[])
            .increment(1);
    }

    /// `conclave_dongle_crc_errors_total`, set from the driver's running count.
    pub fn set_dongle_crc_errors(&self, total: u64) {
        self.counter("conclave_dongle_crc_errors_total", &[])
            .absolute(total);
    }

    /// `conclave_dongle_dropped_total{reason}`, set from the driver's running counts: frames
    /// dropped from a full queue (heartbeats first) and frames refused.
    pub fn set_dongle_dropped(&self, queue_full: u64, refused: u64) {
        self.counter(
            "conclave_dongle_dropped_total",
            &[("reason", "queue_full".to_owned())],
        )
        .absolute(queue_full);
        self.counter(
            "conclave_dongle_dropped_total",
            &[("reason", "refused".to_owned())],
        )
        .absolute(refused);
    }

    // ---------------------------------------------------------------------------------------
    // admin API

    /// `conclave_admin_refused_total{reason}` at zero for every `reason`, once the admin API
    /// runs.
    pub fn preregister_admin(&self, reasons: &[&'static str]) {
        for reason in reasons {
            self.counter(
                "conclave_admin_refused_total",
                &[("reason", (*reason).to_owned())],
            )
            .absolute(0);
        }
    }

    /// `conclave_admin_refused_total{reason}`: `connections`, `event_streams` or `deadline`.
    pub fn admin_refused(&self, reason: &'static str) {
        self.counter(
            "conclave_admin_refused_total",
            &[("reason", reason.to_owned())],
        )
        .increment(1);
    }

    /// `conclave_admin_connections` or `conclave_admin_event_streams` (`gauge`).
    pub fn set_admin_open(&self, gauge: &'static str, open: usize) {
        self.gauge(gauge, &[]).set(open as f64);
    }

    /// `conclave_events_lagged_total{subscriber}`.
    pub fn events_lagged(&self, subscriber: &str, missed: u64) {
        self.counter(
            "conclave_events_lagged_total",
            &[("subscriber", subscriber.to_owned())],
        )
        .increment(missed);
    }

    /// The current value of a series, read back from a render (for tests and the status
    /// answer). `labels` must match exactly, in the exporter's order.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted = if labels.is_empty() {
            name.to_owned()
        } else {
            let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            format!("{name}{{{}}}", inner.join(","))
        };
        self.render().lines().find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            (series == wanted).then(|| value.parse().ok()).flatten()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CB-4: every documented metric name shows up in a render of a fresh registry except the
    /// ones that only exist once something happened.
    #[test]
    fn fresh_registry_exports_the_fixed_series() {
        let metrics = NodeMetrics::new();
        let text = metrics.render();
        for name in [
            "conclave_election_term",
            "conclave_election_is_leader",
            "conclave_election_role",
            "conclave_leader_changes_total",
            "conclave_frames_dropped_total",
            "conclave_peers",
            "conclave_votes_total",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
        assert_eq!(
            metrics.value("conclave_election_role", &[("role", "follower")]),
            Some(1.0)
        );
        assert_eq!(
            metrics.value("conclave_election_phase", &[("phase", "follower")]),
            Some(1.0)
        );
        metrics.set_phase("pre_candidate");
        metrics.set_phase("pre_candidate");
        assert_eq!(
            metrics.value("conclave_election_phase", &[("phase", "follower")]),
            Some(0.0)
        );
        assert_eq!(
            metrics.value("conclave_election_phase", &[("phase", "pre_candidate")]),
            Some(1.0)
        );
        assert_eq!(
            metrics.value("conclave_wal_fsync_seconds_count", &[]),
            Some(0.0)
        );
        assert_eq!(
            metrics.value("conclave_election_duration_seconds_count", &[]),
            Some(0.0)
        );
        metrics.preregister_hooks(&["on_leader"]);
        assert_eq!(
            metrics.value(
                "conclave_callbacks_total",
                &[("hook", "on_leader"), ("result", "timeout")]
            ),
            Some(0.0)
        );
        assert_eq!(
            metrics.value(
                "conclave_events_lagged_total",
                &[("subscriber", "hook:on_leader")]
            ),
            Some(0.0)
        );
    }

    /// LOG-3: a node running the log exports its indices, every proposal result and the
    /// batch histogram at zero before its first write.
    #[test]
    fn log_series_exist_before_the_first_write() {
        let metrics = NodeMetrics::new();
        assert_eq!(metrics.value("conclave_log_commit_index", &[]), None);
        metrics.preregister_log();
        assert_eq!(metrics.value("conclave_log_commit_index", &[]), Some(0.0));
        assert_eq!(metrics.value("conclave_log_applied_index", &[]), Some(0.0));
        for result in PROPOSAL_RESULTS {
            assert_eq!(
                metrics.value("conclave_log_proposals_total", &[("result", result)]),
                Some(0.0),
                "{result}"
            );
        }
        for result in READ_RESULTS {
            assert_eq!(
                metrics.value("conclave_log_reads_total", &[("result", result)]),
                Some(0.0),
                "{result}"
            );
        }
        assert_eq!(
            metrics.value("conclave_log_entries_per_fsync_count", &[]),
            Some(0.0)
        );
    }

    /// MEMB-1, MEMB-2: the configuration's gauges, the change counter, and a learner's lag
    /// that disappears from the scrape once the peer is no learner (or the node no leader).
    #[test]
    fn memb2_learner_lag_series_go_with_the_learner() {
        let metrics = NodeMetrics::new();
        metrics.preregister_log();
        assert_eq!(
            metrics.value("conclave_log_configuration_changes_total", &[]),
            Some(0.0)
        );
        assert_eq!(metrics.value("conclave_log_voters", &[]), None);
        assert!(!metrics.render().contains(LEARNER_LAG));

        let (d, e) = (PeerId::from_static("gw-d"), PeerId::from_static("gw-e"));
        metrics.set_configuration(3, 2, 42);
        metrics.configuration_changed();
        metrics.set_learner_lag(&[(d, 12), (e, 0)]);
        assert_eq!(metrics.value("conclave_log_voters", &[]), Some(3.0));
        assert_eq!(metrics.value("conclave_log_learners", &[]), Some(2.0));
        assert_eq!(
            metrics.value("conclave_log_configuration_index", &[]),
            Some(42.0)
        );
        assert_eq!(
            metrics.value("conclave_log_configuration_changes_total", &[]),
            Some(1.0)
        );
        assert_eq!(metrics.value(LEARNER_LAG, &[("peer", "gw-d")]), Some(12.0));
        let text = metrics.render();
        assert_eq!(
            text.matches(&format!("# TYPE {LEARNER_LAG} gauge\n"))
                .count(),
            1,
            "{text}"
        );

        // gw-d promoted: its series goes, gw-e's stays.
        metrics.set_learner_lag(&[(e, 3)]);
        assert_eq!(metrics.value(LEARNER_LAG, &[("peer", "gw-d")]), None);
        assert_eq!(metrics.value(LEARNER_LAG, &[("peer", "gw-e")]), Some(3.0));
        // No longer leading: no learner lag at all, not even the family's header.
        metrics.set_learner_lag(&[]);
        assert!(!metrics.render().contains(LEARNER_LAG));
    }

    /// Two registries do not share values.
    #[test]
    fn registries_are_per_node() {
        let a = NodeMetrics::new();
        let b = NodeMetrics::new();
        a.frame_dropped(DropReason::BadTag);
        a.frame_dropped(DropReason::BadTag);
        assert_eq!(
            a.value("conclave_frames_dropped_total", &[("reason", "bad_tag")]),
            Some(2.0)
        );
        assert_eq!(
            b.value("conclave_frames_dropped_total", &[("reason", "bad_tag")]),
            Some(0.0)
        );
    }

    /// CB-4: `conclave_build_info` is 1 with the crate's version and the build's commit.
    #[test]
    fn build_info_names_version_and_commit() {
        let metrics = NodeMetrics::new();
        assert_eq!(
            metrics.value(
                "conclave_build_info",
                &[
                    ("version", env!("CARGO_PKG_VERSION")),
                    ("commit", BUILD_COMMIT)
                ]
            ),
            Some(1.0)
        );
        assert!(!BUILD_COMMIT.is_empty());
    }

    /// CB-4: the leaderless time is a counter of fractional seconds that grows while no leader
    /// is known, the running stretch included, and stands still while one is.
    #[actix_rt::test]
    async fn leaderless_seconds_is_a_counter_that_counts_the_running_stretch() {
        tokio::time::pause();
        let metrics = NodeMetrics::new();
        let text = metrics.render();
        assert!(
            text.contains("# TYPE conclave_leaderless_seconds_total counter\n"),
            "{text}"
        );
        assert_eq!(metrics.value(LEADERLESS, &[]), Some(0.0));
        metrics.set_leader_known(false);
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(metrics.value(LEADERLESS, &[]), Some(1.5));
        metrics.set_leader_known(false);
        tokio::time::advance(Duration::from_millis(250)).await;
        metrics.set_leader_known(true);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(metrics.value(LEADERLESS, &[]), Some(1.75));
        metrics.set_leader_known(false);
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(metrics.leaderless_seconds(), 2.0);
    }

    /// CB-4: the standard process series are part of every render (on Linux), each with its
    /// type line.
    #[test]
    fn render_has_the_process_series() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let text = NodeMetrics::new().render();
        for (name, kind) in [
            ("process_cpu_seconds_total", "counter"),
            ("process_resident_memory_bytes", "gauge"),
            ("process_virtual_memory_bytes", "gauge"),
            ("process_open_fds", "gauge"),
            ("process_max_fds", "gauge"),
            ("process_start_time_seconds", "gauge"),
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} {kind}\n")),
                "{name}: {text}"
            );
        }
    }

    /// Histograms render with their buckets.
    #[test]
    fn histograms_have_buckets() {
        let metrics = NodeMetrics::new();
        metrics.wal_fsync(Duration::from_micros(300));
        metrics.election_won(Duration::from_millis(120));
        let text = metrics.render();
        assert!(
            text.contains("conclave_wal_fsync_seconds_bucket{le=\"0.0005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("conclave_election_duration_seconds_bucket{le=\"0.25\"} 1"),
            "{text}"
        );
    }
}
