//! Sessions in the simulator (SESS-0, SESS-1, SESS-2, on LOG-1..3): every node applies the
//! committed entries to a real [`ClusterState`] and runs a [`LeaseClock`] as the
//! ElectionActor does (`crates/actors/src/election/leases.rs`): when the earliest count of
//! its lease clock runs out on its own monotonic clock (and at least every second) a node
//! that leads proposes what [`LeaseClock::due`] returns, and a node that does not lead
//! forgets its counts. Simulated holders grant sessions, tie a key and a
//! job claim to them and send keepalives; the checks below run at every proposal and apply.
//!
//! - **Clocks.** A node's monotonic clock is the simulated time from an origin of its own
//!   (it runs on across a restart, as `CLOCK_MONOTONIC` does); its wall clock is skewed by
//!   minutes and stepped back and forth at random. The wall clock is only stamped into claims
//!   (`now_unix_ms`); no decision may depend on it.
//! - **Holders.** Each lives on a home node's side of the network. It asks the node it
//!   believes leads for a session (TTL 1.2–2.5 s); a follower refuses and names its leader, as
//!   the API's 421 does, and the holder follows. Once granted, the holder writes a key and
//!   claims a job under the session (some also take a job on a plain lease), then sends a
//!   keepalive every TTL/3. A keepalive is a direct call that reaches the node only if the
//!   node is up, the network connects it with the holder's home both ways, and it is not lost
//!   (the seed's keepalive loss on top of the network's); a node that leads answers it from
//!   its lease clock. Some holders die (their keepalives stop), some revoke.
//! - **Invariant 1 (SESS-0, SESS-1: no session ends while its keepalives reach the leader in
//!   time).** (a) When a leader proposes `Expire` naming S, S's whole TTL has passed on that
//!   leader's monotonic clock since the latest of: the moment it was first seen leading its
//!   term, the moment it applied S's grant, and the last keepalive of S it accepted in that
//!   term. Every `Expire` that ends a session was proposed so. (b) When an `Expire` ends S,
//!   the holder of S did not have every keepalive of the last TTL (two at least) accepted by
//!   the current leader — a leader no live node has seen a newer term than. (b) rests on (a)
//!   and on check-quorum, which this family keeps on as a node does: a deposed leader that
//!   still proposes an expiry steps down within an election timeout or two of its
//!   successor's election (150–300 ms here), well inside two thirds of the shortest TTL, so
//!   a holder that moved its keepalives to the successor had one accepted by the deposed
//!   leader in that leader's last TTL.
//! - **Invariant 2 (SESS-2: released exactly once).** When an entry ends S on a replica, the
//!   keys S owned just before are gone (`deleted_keys` counts them) and the jobs it held are
//!   exactly those requeued or dead-lettered, each once; no job leaves a session's hold in
//!   any other entry; every replica ends the same sessions with the same effects at the same
//!   index, and S ends at one index only.
//! - **Invariant 3.** On every replica at every applied index (and after a restore), every
//!   job claimed under a session is held by a live session, within its `max_claims`, and the
//!   queue's index of claims per session agrees. No job is held by two sessions on one
//!   replica by construction (a job has one state); across replicas that is invariant 4, and
//!   a job passing from one session to another without the first ending is invariant 2's.
//! - **Invariant 4.** Two replicas at the same applied index write byte-identical snapshots.
//!
//! Each invariant has a control that must fail ([`SessionControl`]). A node that crashes
//! keeps its state machine on disk half the time ([`Replica::saved`]) and
//! restores it at boot; otherwise it applies the log again from the start. Raft snapshots
//! are off in this family, so the log always holds what a replica needs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use conclave_core::Instant;
use conclave_core::driver::Driver;
use conclave_core::raft::ProposeError;
use conclave_protocol::{EntryKind, LogEntry};
use conclave_statemachine::{
    Applied, ClusterState, Command, EndedSession, JobCommand, JobId, JobState, KvCommand,
    LeaseClock, Outcome, SessionCommand, SessionId, SessionOutcome, StateConfig, StateMachine,
    Write,
};

use super::{SIM_UNIX_EPOCH, Simulation};

/// The longest a node goes between two lease upkeeps, and the shortest, as the
/// ElectionActor's: it looks again when the earliest count of its lease clock runs out,
/// within these.
const UPKEEP: Duration = Duration::from_secs(1);
const UPKEEP_FLOOR: Duration = Duration::from_millis(10);
/// How often a holder without a session tries again.
const HOLDER_RETRY: Duration = Duration::from_millis(100);
/// How long a holder waits for its grant to be applied before it asks again.
const GRANT_PATIENCE: Duration = Duration::from_secs(1);
/// Changes the state machines keep for watches: few, so snapshots stay small.
const WATCH_HISTORY: usize = 16;

/// A deliberately broken variant, so that a check is shown to fail without its safeguard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionControl {
    /// Nothing broken.
    #[default]
    None,
    /// The lease clock keeps its counts across leadership changes: it is never forgotten and
    /// is told one term throughout. Invariant 1 must fail.
    KeepCountsAcrossTerms,
    /// The lease clock is fed the node's wall clock (skewed, stepped) instead of its
    /// monotonic one. Invariant 1 must fail.
    CountOnWallClock,
    /// A replica applies only the `Expire` entries it proposed itself (a node that trusts its
    /// own counts). Invariant 2 must fail.
    SkipOthersExpiries,
    /// A crashed node's saved state machine is written without its sessions table, as a
    /// build before sessions wrote it. Invariant 3 must fail.
    SaveWithoutSessions,
    /// A replica stamps each plain claim with its own wall clock when it applies it, instead
    /// of the leader's stamp in the entry. Invariant 4 must fail.
    StampOnApply,
}

/// What the sessions family counted in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionCounts {
    /// Sessions granted (first apply of a grant).
    pub granted: u64,
    /// Sessions ended by `Expire`.
    pub expired: u64,
    /// Sessions ended by `Revoke`.
    pub revoked: u64,
    /// Keepalives accepted by a node that led.
    pub keepalives: u64,
    /// Keepalives refused, lost or unanswered.
    pub keepalives_failed: u64,
    /// Keepalives a leader answered "no such live session" for a session no entry had ended:
    /// the leader had not applied its grant yet (a new leader still applying its log). The
    /// API tells the holder its session ended.
    pub keepalives_unknown_live: u64,
    /// Terms in which a node led (leader changes).
    pub leader_changes: u64,
    /// Sessions that lived at least three TTLs with keepalives accepted by two leaders or
    /// more: they outlived a leader change.
    pub survived_failover: u64,
    /// Plain leases ended by `ExpireClaims`.
    pub leases_expired: u64,
    /// Replicas restored from a saved state machine at boot.
    pub restored: u64,
}

/// One node's state machine and lease clock, as the node process holds them.
#[derive(Debug)]
struct Replica {
    state: ClusterState,
    clock: LeaseClock,
    next_upkeep: Instant,
    /// Added to the simulated time to read the node's monotonic clock, in ms.
    mono_origin_ms: u64,
    /// The wall clock's skew from the simulated Unix time, in ms; stepped at random.
    wall_skew_ms: i64,
    /// The term the node was first seen leading, and when (monotonic ms).
    led: Option<(u64, u64)>,
    /// The last keepalive accepted per session in the term of `led` (monotonic ms).
    keepalives: BTreeMap<SessionId, u64>,
    /// When this process applied each session's grant, or restored it (monotonic ms).
    grant_seen: BTreeMap<SessionId, u64>,
    /// Entries this node proposed while leading: term and what they were for.
    proposed: BTreeMap<u64, (u64, Proposal)>,
    /// The state machine as saved on disk at the last crash, if it was saved.
    saved: Option<Vec<u8>>,
    /// The term of the last entry this process applied (0 after a restore, whose entries'
    /// terms it does not know): a leader whose machine has applied no entry of its own term
    /// answers a keepalive for a session it does not know as busy, as the node does.
    applied_term: u64,
}

/// What an entry a node proposed was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proposal {
    /// A holder's grant.
    Grant(usize),
    /// An expiry from the lease clock.
    Expire,
    /// Anything else.
    Other,
}

/// What a holder is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No session yet: it asks for one.
    Asking,
    /// Its grant was proposed through a leader at this time.
    Granting(Instant),
    /// It holds this session.
    Live(SessionId),
    /// Its session ended, or it died.
    Gone,
}

/// A simulated client holding a session.
#[derive(Debug)]
struct Holder {
    home: usize,
    ttl: Duration,
    believed: usize,
    phase: Phase,
    next_at: Instant,
    /// When it dies (stops keepalives) or revokes, if it does.
    dies_at: Option<Instant>,
    revokes_at: Option<Instant>,
    /// Whether it also claims a job on a plain lease.
    leased_claim: bool,
    /// Each keepalive sent: when, and whether the current leader accepted it.
    keepalives: Vec<(Instant, bool)>,
    /// When its session was granted (first apply), and the terms whose leader accepted one.
    granted_at: Option<Instant>,
    accepting_terms: BTreeSet<u64>,
}

/// What the sessions family remembers across the run.
#[derive(Debug)]
pub(super) struct SessionBook {
    control: SessionControl,
    replicas: Vec<Replica>,
    holders: Vec<Holder>,
    /// The extra chance that a keepalive is lost, on top of the network's loss.
    keepalive_loss: f64,
    /// The snapshot hash at each applied index, as the first replica there had it.
    hashes: BTreeMap<u64, u64>,
    /// What the entry at each index ended, as the first replica to apply it saw.
    ended_at: BTreeMap<u64, Vec<EndedSession>>,
    /// The index that ended each session.
    session_end: BTreeMap<SessionId, u64>,
    /// Each session's holder.
    owner: BTreeMap<SessionId, usize>,
    /// `Expire` entries proposed by a lease clock: (index, term).
    expiries: BTreeSet<(u64, u64)>,
    /// Terms seen led.
    terms_led: BTreeSet<u64>,
    counts: SessionCounts,
    /// Whether invariant 1 (a) is checked.
    proposer_check: bool,
    /// A broken invariant, reported at the end of the step.
    violation: Option<String>,
}

impl Replica {
    fn new(mono_origin_ms: u64, wall_skew_ms: i64) -> Self {
        Self {
            state: ClusterState::new(StateConfig {
                watch_history: WATCH_HISTORY,
            }),
            clock: LeaseClock::new(),
            next_upkeep: Instant::ZERO,
            mono_origin_ms,
            wall_skew_ms,
            led: None,
            keepalives: BTreeMap::new(),
            grant_seen: BTreeMap::new(),
            proposed: BTreeMap::new(),
            saved: None,
            applied_term: 0,
        }
    }

    fn mono_ms(&self, now: Instant) -> u64 {
        self.mono_origin_ms + now.as_millis()
    }

    fn wall_ms(&self, now: Instant) -> u64 {
        let sim = (SIM_UNIX_EPOCH * 1_000 + now.as_millis()) as i64;
        sim.saturating_add(self.wall_skew_ms).max(0) as u64
    }
}

/// A cheap hash of a snapshot's bytes.
fn hash_bytes(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The jobs held under a session in `state`, with their session.
fn session_claims(state: &ClusterState) -> BTreeMap<JobId, SessionId> {
    state
        .jobs()
        .list(conclave_statemachine::JobStateKind::Claimed)
        .into_iter()
        .filter_map(|job| match &job.state {
            JobState::Claimed {
                session: Some(session),
                ..
            } => Some((job.id, *session)),
            _ => None,
        })
        .collect()
}

/// The keys tied to each session in `state`.
fn session_keys(state: &ClusterState) -> BTreeMap<SessionId, BTreeSet<String>> {
    let mut keys: BTreeMap<SessionId, BTreeSet<String>> = BTreeMap::new();
    for kv in state.kv().list("") {
        if let Some(session) = kv.session {
            keys.entry(session).or_default().insert(kv.key);
        }
    }
    keys
}

/// Invariant 3 on one replica's state: every session claim is held by a live session, and
/// no session holds more than its `max_claims`.
fn check_holds(state: &ClusterState) -> Result<(), String> {
    let mut held: BTreeMap<SessionId, u32> = BTreeMap::new();
    for (job, session) in session_claims(state) {
        let Some(live) = state.sessions().get(session) else {
            return Err(format!(
                "job {job} is held by session {session}, which is not live"
            ));
        };
        let count = held.entry(session).or_default();
        *count += 1;
        if *count > live.max_claims {
            return Err(format!(
                "session {session} holds {count} claims, over its {}",
                live.max_claims
            ));
        }
    }
    for (session, count) in &held {
        if state.jobs().held_by(*session) != *count as usize {
            return Err(format!(
                "session {session} holds {count} jobs, but the queue counts {}",
                state.jobs().held_by(*session)
            ));
        }
    }
    Ok(())
}

/// Invariant 2 on one replica's entry: what ended is exactly what the sessions held just
/// before, and no job left a session's hold otherwise.
fn check_release(
    before_claims: &BTreeMap<JobId, SessionId>,
    before_keys: &BTreeMap<SessionId, BTreeSet<String>>,
    state: &ClusterState,
    ended: &[EndedSession],
) -> Result<(), String> {
    for end in ended {
        let keys = before_keys.get(&end.session).cloned().unwrap_or_default();
        if end.deleted_keys != keys.len() as u64 {
            return Err(format!(
                "session {} ended deleting {} keys, but owned {}",
                end.session,
                end.deleted_keys,
                keys.len()
            ));
        }
        if let Some(key) = keys.iter().find(|key| state.kv().get(key).is_some()) {
            return Err(format!(
                "key {key} of ended session {} is still there",
                end.session
            ));
        }
        let held: BTreeSet<JobId> = before_claims
            .iter()
            .filter(|(_, session)| **session == end.session)
            .map(|(job, _)| *job)
            .collect();
        let mut released: Vec<JobId> = end.requeued.clone();
        released.extend(&end.dead_lettered);
        released.sort();
        let distinct: BTreeSet<JobId> = released.iter().copied().collect();
        if distinct.len() != released.len() || distinct != held {
            return Err(format!(
                "session {} held jobs {held:?} but its end released {released:?}",
                end.session
            ));
        }
    }
    let after = session_claims(state);
    for (job, session) in before_claims {
        if after.get(job) == Some(session) {
            continue;
        }
        if !ended.iter().any(|end| end.session == *session) {
            return Err(format!(
                "job {job} left session {session}'s hold in an entry that did not end it"
            ));
        }
    }
    Ok(())
}

/// The sessions an applied entry ended.
fn ended_by(applied: &Applied) -> Vec<EndedSession> {
    match applied {
        Applied::Answered(Outcome::Sessions(SessionOutcome::Revoked(ended))) => {
            vec![ended.clone()]
        }
        Applied::Answered(Outcome::Sessions(SessionOutcome::Expired { ended })) => ended.clone(),
        _ => Vec::new(),
    }
}

impl SessionBook {
    /// The book of a run with `nodes` nodes and `holders` holders, every random draw from
    /// `rng`; holders start in the first second and die or revoke within `span`.
    pub(super) fn new(
        nodes: usize,
        holders: usize,
        span: Duration,
        control: SessionControl,
        rng: &mut conclave_core::SeededRng,
    ) -> Self {
        let replicas = (0..nodes)
            .map(|_| {
                let origin = rng.between(0, 1_000_000_000);
                let skew = rng.between(0, 600_000) as i64 - 300_000;
                let mut replica = Replica::new(origin, skew);
                replica.next_upkeep = Instant::from_millis(rng.between(0, 100));
                replica
            })
            .collect();
        let span_ms = span.as_millis() as u64;
        let holders = (0..holders)
            .map(|_| {
                let home = rng.below(nodes as u64) as usize;
                let fate = rng.below(10);
                let at = Instant::from_millis(rng.between(span_ms / 3, span_ms));
                Holder {
                    home,
                    ttl: Duration::from_millis(rng.between(1_200, 2_500)),
                    believed: home,
                    phase: Phase::Asking,
                    next_at: Instant::from_millis(rng.between(0, 1_000)),
                    dies_at: (fate < 3).then_some(at),
                    revokes_at: (3..5).contains(&fate).then_some(at),
                    leased_claim: rng.chance(0.3),
                    keepalives: Vec::new(),
                    granted_at: None,
                    accepting_terms: BTreeSet::new(),
                }
            })
            .collect();
        Self {
            control,
            replicas,
            holders,
            keepalive_loss: rng.below(30) as f64 / 100.0,
            hashes: BTreeMap::new(),
            ended_at: BTreeMap::new(),
            session_end: BTreeMap::new(),
            owner: BTreeMap::new(),
            expiries: BTreeSet::new(),
            terms_led: BTreeSet::new(),
            counts: SessionCounts::default(),
            proposer_check: true,
            violation: None,
        }
    }

    /// The next upkeep of a live node or action of a holder: when, and which.
    pub(super) fn next_event(&self, alive: impl Fn(usize) -> bool) -> Option<(Instant, Target)> {
        let upkeeps = self
            .replicas
            .iter()
            .enumerate()
            .filter(|(index, _)| alive(*index))
            .map(|(index, replica)| (replica.next_upkeep, Target::Upkeep(index)));
        let holders = self
            .holders
            .iter()
            .enumerate()
            .filter(|(_, holder)| holder.phase != Phase::Gone)
            .map(|(index, holder)| (holder.next_at, Target::Holder(index)));
        upkeeps.chain(holders).min_by_key(|(at, _)| *at)
    }
}

/// What a sessions event acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// A node's lease upkeep.
    Upkeep(usize),
    /// A holder's next action.
    Holder(usize),
}

impl Simulation {
    /// Turns the sessions family on (before the run starts).
    pub fn enable_sessions(&mut self, holders: usize, span: Duration, control: SessionControl) {
        let nodes = self.nodes.len();
        let book = SessionBook::new(nodes, holders, span, control, &mut self.rng);
        self.session_book = Some(Box::new(book));
    }

    /// Whether invariant 1 (a), the proposer's view, is checked (on by default). A control
    /// switches it off to show that the holder's view, (b), finds the same broken clock.
    pub fn set_session_proposer_check(&mut self, on: bool) {
        if let Some(book) = self.session_book.as_mut() {
            book.proposer_check = on;
        }
    }

    /// Records a broken session invariant (the first one of a step is reported).
    fn note_session_violation(&mut self, detail: String) {
        if let Some(book) = self.session_book.as_mut() {
            book.violation.get_or_insert(detail);
        }
    }

    /// A broken session invariant found in the last step.
    pub(super) fn take_session_violation(&mut self) -> Option<String> {
        self.session_book.as_mut()?.violation.take()
    }

    /// What the sessions family counted so far.
    pub fn session_counts(&self) -> SessionCounts {
        let Some(book) = self.session_book.as_ref() else {
            return SessionCounts::default();
        };
        let mut counts = book.counts;
        counts.leader_changes = book.terms_led.len() as u64;
        counts.survived_failover = book
            .holders
            .iter()
            .filter(|holder| {
                let lived = match (holder.granted_at, holder.keepalives.last()) {
                    (Some(from), Some((to, _))) => to.saturating_duration_since(from),
                    _ => Duration::ZERO,
                };
                lived >= holder.ttl * 3 && holder.accepting_terms.len() >= 2
            })
            .count() as u64;
        counts
    }

    /// The next sessions event, if the family is on.
    pub(super) fn next_session_event(&self) -> Option<(Instant, Target)> {
        let book = self.session_book.as_ref()?;
        book.next_event(|index| self.nodes[index].driver.is_some())
    }

    /// Carries out a sessions event.
    pub(super) fn session_event(&mut self, target: Target) {
        match target {
            Target::Upkeep(index) => self.lease_upkeep(index),
            Target::Holder(index) => self.holder_acts(index),
        }
    }

    fn book(&mut self) -> &mut SessionBook {
        self.session_book.as_mut().expect("sessions family on")
    }

    /// Whether node `index` leads, and its term.
    fn leading(&self, index: usize) -> Option<u64> {
        let election = self.nodes[index].driver.as_ref().map(Driver::election)?;
        election.is_leader().then(|| election.term())
    }

    /// The highest term any live node has seen.
    fn newest_term(&self) -> u64 {
        self.nodes
            .iter()
            .filter_map(|node| node.driver.as_ref().map(|driver| driver.election().term()))
            .max()
            .unwrap_or(0)
    }

    /// Notes that node `index` leads `term` at `mono`: a new term starts its counts.
    fn note_leading(&mut self, index: usize, term: u64, mono: u64) {
        let book = self.book();
        book.terms_led.insert(term);
        let replica = &mut book.replicas[index];
        if replica.led.map(|(led, _)| led) != Some(term) {
            replica.led = Some((term, mono));
            replica.keepalives.clear();
        }
    }

    /// The time the node's lease clock is told, and the term: as the actor does, or as the
    /// control breaks it.
    fn clock_reading(&self, index: usize, term: u64) -> (u64, u64) {
        let book = self.session_book.as_ref().expect("sessions family on");
        let replica = &book.replicas[index];
        let now = match book.control {
            SessionControl::CountOnWallClock => replica.wall_ms(self.now),
            _ => replica.mono_ms(self.now),
        };
        let term = match book.control {
            SessionControl::KeepCountsAcrossTerms => 0,
            _ => term,
        };
        (now, term)
    }

    /// Node `index`'s upkeep tick: a leader proposes what its lease clock says is due; a node
    /// that does not lead forgets its counts. The wall clock steps now and then.
    fn lease_upkeep(&mut self, index: usize) {
        let now = self.now;
        if self.rng.chance(0.03) {
            let skew = self.rng.between(0, 600_000) as i64 - 300_000;
            self.book().replicas[index].wall_skew_ms = skew;
        }
        self.book().replicas[index].next_upkeep = now + UPKEEP;
        let mono = self.book().replicas[index].mono_ms(now);
        let Some(term) = self.leading(index) else {
            let control = self.book().control;
            let replica = &mut self.book().replicas[index];
            replica.led = None;
            if control != SessionControl::KeepCountsAcrossTerms {
                replica.clock.forget();
            }
            return;
        };
        self.note_leading(index, term, mono);
        let (clock_now, clock_term) = self.clock_reading(index, term);
        let replica = &mut self.book().replicas[index];
        let due = replica.clock.due(&replica.state, clock_term, clock_now);
        for command in due {
            if let Write::Sessions(SessionCommand::Expire { sessions }) = &command.write {
                if self.book().proposer_check {
                    self.check_expiry_proposal(index, sessions, mono);
                }
            }
            self.propose(index, &command, Proposal::Expire);
        }
        let replica = &mut self.book().replicas[index];
        if let Some(deadline) = replica.clock.next_deadline() {
            let due_in = Duration::from_millis(deadline.saturating_sub(clock_now));
            replica.next_upkeep = now + due_in.clamp(UPKEEP_FLOOR, UPKEEP);
        }
        if self.nodes[index].driver.is_some() {
            self.pump(index, None);
        }
    }

    /// Invariant 1 (a) at the moment a leader proposes an expiry.
    fn check_expiry_proposal(&mut self, index: usize, sessions: &[SessionId], mono: u64) {
        let id = self.nodes[index].id;
        let book = self.session_book.as_ref().expect("sessions family on");
        let replica = &book.replicas[index];
        let led_since = replica.led.map_or(mono, |(_, since)| since);
        let mut problem = None;
        for session in sessions {
            let Some(ttl) = replica.state.sessions().get(*session).map(|s| s.ttl_ms) else {
                continue;
            };
            let started = [
                Some(led_since),
                replica.grant_seen.get(session).copied(),
                replica.keepalives.get(session).copied(),
            ]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(mono);
            if mono < started + ttl {
                problem = Some(format!(
                    "invariant 1 (SESS-1): {id} proposed the expiry of session {session} \
                     (TTL {ttl} ms) {} ms after it began counting it (led since {led_since}, \
                     grant applied at {:?}, last keepalive at {:?}, now {mono}, monotonic ms)",
                    mono.saturating_sub(started),
                    replica.grant_seen.get(session),
                    replica.keepalives.get(session)
                ));
                break;
            }
        }
        if let Some(problem) = problem {
            self.note_session_violation(problem);
        }
    }

    /// Proposes `command` through node `index`, if it leads; the index it got.
    fn propose(&mut self, index: usize, command: &Command, what: Proposal) -> Option<u64> {
        let data = command.encode().ok()?;
        let now = self.now;
        let driver = self.nodes[index].driver.as_mut()?;
        let proposed = driver
            .election_mut()
            .replicated_log()
            .map(|mut log| log.propose(now, data));
        match proposed.unwrap_or(Err(ProposeError::ShuttingDown)) {
            Ok(position) => {
                let book = self.book();
                book.replicas[index]
                    .proposed
                    .insert(position.index, (position.term, what));
                if what == Proposal::Expire {
                    book.expiries.insert((position.index, position.term));
                }
                Some(position.index)
            }
            Err(_) => None,
        }
    }

    /// Whether holder `holder` reaches node `index` now (up, connected both ways, not lost).
    fn holder_reaches(&mut self, holder: usize, index: usize) -> bool {
        let home = self.book().holders[holder].home;
        let loss = self.network.config.loss + self.book().keepalive_loss;
        self.nodes[index].driver.is_some()
            && self.network.reachable(home, index)
            && self.network.reachable(index, home)
            && !self.rng.chance(loss)
    }

    /// The node a holder should talk to: the one it believes leads, or the leader that node
    /// names (one redirect, as a client follows a 421). `None` when it cannot reach a leader.
    fn reach_leader(&mut self, holder: usize) -> Option<(usize, u64)> {
        let believed = self.book().holders[holder].believed;
        if !self.holder_reaches(holder, believed) {
            let n = self.nodes.len() as u64;
            let guess = self.rng.below(n) as usize;
            self.book().holders[holder].believed = guess;
            return None;
        }
        if let Some(term) = self.leading(believed) {
            return Some((believed, term));
        }
        let named = self.nodes[believed]
            .driver
            .as_ref()
            .and_then(|driver| driver.election().leader())
            .and_then(|leader| self.index_of(leader))?;
        self.book().holders[holder].believed = named;
        if !self.holder_reaches(holder, named) {
            return None;
        }
        self.leading(named).map(|term| (named, term))
    }

    /// Holder `holder`'s next action.
    fn holder_acts(&mut self, holder: usize) {
        let now = self.now;
        let (phase, ttl) = {
            let h = &self.book().holders[holder];
            (h.phase, h.ttl)
        };
        match phase {
            Phase::Gone => {}
            Phase::Granting(since) if now < since + GRANT_PATIENCE => {
                self.book().holders[holder].next_at = now + HOLDER_RETRY;
            }
            Phase::Asking | Phase::Granting(_) => {
                self.book().holders[holder].next_at = now + HOLDER_RETRY;
                if let Some((node, _)) = self.reach_leader(holder) {
                    let grant = Command::new(Write::Sessions(SessionCommand::Grant {
                        ttl_ms: ttl.as_millis() as u64,
                        name: Some(format!("h{holder}")),
                        max_claims: 2,
                    }));
                    if self
                        .propose(node, &grant, Proposal::Grant(holder))
                        .is_some()
                    {
                        self.book().holders[holder].phase = Phase::Granting(now);
                    }
                    self.pump(node, None);
                }
            }
            Phase::Live(session) => self.holder_keeps_alive(holder, session),
        }
    }

    /// A live holder dies, revokes or sends its keepalive.
    fn holder_keeps_alive(&mut self, holder: usize, session: SessionId) {
        let now = self.now;
        let h = &self.book().holders[holder];
        let (ttl, dies_at, revokes_at) = (h.ttl, h.dies_at, h.revokes_at);
        self.book().holders[holder].next_at = now + ttl / 3;
        if dies_at.is_some_and(|at| at <= now) {
            self.book().holders[holder].phase = Phase::Gone;
            return;
        }
        let Some((node, term)) = self.reach_leader(holder) else {
            self.book().counts.keepalives_failed += 1;
            self.book().holders[holder].keepalives.push((now, false));
            return;
        };
        if revokes_at.is_some_and(|at| at <= now) {
            let revoke = Command::new(Write::Sessions(SessionCommand::Revoke { session }));
            self.propose(node, &revoke, Proposal::Other);
            self.pump(node, None);
            return;
        }
        let mono = self.book().replicas[node].mono_ms(now);
        self.note_leading(node, term, mono);
        let (clock_now, clock_term) = self.clock_reading(node, term);
        let current = term >= self.newest_term();
        let book = self.book();
        let replica = &mut book.replicas[node];
        let answer = replica
            .clock
            .keepalive(&replica.state, clock_term, session, clock_now);
        // As the node does (crates/actors/src/election/leases.rs): a leader that has applied
        // no entry of its own term may not have applied the grant yet, and answers busy.
        let busy = answer.is_none() && replica.applied_term < term;
        if busy {
            book.counts.keepalives_failed += 1;
        } else if answer.is_some() {
            replica.keepalives.insert(session, mono);
            book.counts.keepalives += 1;
            book.holders[holder].accepting_terms.insert(term);
        } else {
            book.counts.keepalives_failed += 1;
            if !book.session_end.contains_key(&session) {
                book.counts.keepalives_unknown_live += 1;
            }
        }
        book.holders[holder]
            .keepalives
            .push((now, answer.is_some() && current));
    }

    /// A holder's grant came back: it writes its key and claims a job under the session
    /// through the node that answered, if that node still leads.
    fn holder_granted(&mut self, holder: usize, node: usize, session: SessionId) {
        let now = self.now;
        let h = &mut self.book().holders[holder];
        if h.phase == Phase::Gone || matches!(h.phase, Phase::Live(_)) {
            return;
        }
        h.phase = Phase::Live(session);
        h.next_at = now + h.ttl / 3;
        h.granted_at = Some(now);
        let leased = h.leased_claim;
        self.book().owner.insert(session, holder);
        if self.leading(node).is_none() {
            return;
        }
        let stamp = self.book().replicas[node].wall_ms(now);
        let mut writes = vec![
            Write::Jobs(JobCommand::Enqueue {
                queue: "q".into(),
                payload: format!("h{holder}"),
                max_attempts: 3,
            }),
            Write::Kv(KvCommand::Put {
                key: format!("holder/{holder}"),
                value: "up".into(),
                if_revision: None,
                if_value: None,
                session: Some(session),
            }),
            Write::Jobs(JobCommand::Claim {
                queue: "q".into(),
                worker: format!("h{holder}"),
                lease_ms: 1_000,
                now_unix_ms: stamp,
                session: Some(session),
            }),
        ];
        if leased {
            writes.push(Write::Jobs(JobCommand::Enqueue {
                queue: "q".into(),
                payload: format!("h{holder}-leased"),
                max_attempts: 3,
            }));
            writes.push(Write::Jobs(JobCommand::Claim {
                queue: "q".into(),
                worker: format!("h{holder}-leased"),
                lease_ms: 500 + (holder as u64 % 10) * 100,
                now_unix_ms: stamp,
                session: None,
            }));
        }
        for write in writes {
            self.propose(node, &Command::new(write), Proposal::Other);
        }
    }

    /// Node `index` applies a committed entry to its state machine; invariants 2, 3 and 4
    /// are checked, and invariant 1 (b) when the entry ends a session by expiry.
    pub(super) fn session_apply(&mut self, index: usize, entry: &LogEntry) {
        let now = self.now;
        let Some(book) = self.session_book.as_mut() else {
            return;
        };
        let control = book.control;
        let replica = &mut book.replicas[index];
        let before_claims = session_claims(&replica.state);
        let before_keys = session_keys(&replica.state);
        let decoded = (entry.kind == EntryKind::Command)
            .then(|| Command::decode(&entry.data).ok())
            .flatten();
        let own = replica
            .proposed
            .get(&entry.index)
            .filter(|(term, _)| *term == entry.term)
            .map(|(_, what)| *what);
        let is_expire = matches!(
            decoded.as_ref().map(|c| &c.write),
            Some(Write::Sessions(SessionCommand::Expire { .. }))
        );
        let applied = match (&control, decoded) {
            (SessionControl::SkipOthersExpiries, Some(_))
                if is_expire && own != Some(Proposal::Expire) =>
            {
                replica.state.apply_noop(entry.index)
            }
            (
                SessionControl::StampOnApply,
                Some(Command {
                    request_id,
                    write:
                        Write::Jobs(JobCommand::Claim {
                            queue,
                            worker,
                            lease_ms,
                            session: None,
                            ..
                        }),
                }),
            ) => {
                let restamped = Command {
                    request_id,
                    write: Write::Jobs(JobCommand::Claim {
                        queue,
                        worker,
                        lease_ms,
                        now_unix_ms: replica.wall_ms(now),
                        session: None,
                    }),
                };
                let data = restamped.encode().unwrap_or_default();
                replica.state.apply(entry.index, &data)
            }
            _ => replica.state.apply_entry(entry),
        };
        if matches!(applied, Applied::NotNext { .. }) {
            // Restored from a saved state machine past this entry.
            return;
        }
        replica.applied_term = entry.term;
        let mono = replica.mono_ms(now);
        if let Some(Outcome::Sessions(SessionOutcome::Granted(session))) = applied.outcome() {
            replica.grant_seen.insert(session.id, mono);
        }
        if let Applied::Answered(Outcome::Jobs(
            conclave_statemachine::JobOutcome::LeasesExpired {
                requeued,
                dead_lettered,
            },
        )) = &applied
        {
            if !book.hashes.contains_key(&entry.index) {
                book.counts.leases_expired += (requeued.len() + dead_lettered.len()) as u64;
            }
        }
        let ended = ended_by(&applied);
        let granted = match (own, applied.outcome()) {
            (
                Some(Proposal::Grant(holder)),
                Some(Outcome::Sessions(SessionOutcome::Granted(session))),
            ) => Some((holder, session.id)),
            _ => None,
        };
        let id = self.nodes[index].id;
        if let Err(problem) = self.check_session_entry(
            index,
            entry,
            &before_claims,
            &before_keys,
            &ended,
            is_expire,
        ) {
            self.note_session_violation(format!("{id} at index {}: {problem}", entry.index));
        }
        if let Some((holder, session)) = granted {
            self.holder_granted(holder, index, session);
        }
    }

    /// The checks of one applied entry on node `index`'s replica.
    fn check_session_entry(
        &mut self,
        index: usize,
        entry: &LogEntry,
        before_claims: &BTreeMap<JobId, SessionId>,
        before_keys: &BTreeMap<SessionId, BTreeSet<String>>,
        ended: &[EndedSession],
        is_expire: bool,
    ) -> Result<(), String> {
        let now = self.now;
        let book = self.session_book.as_mut().expect("sessions family on");
        let state = &book.replicas[index].state;
        check_holds(state).map_err(|problem| format!("invariant 3 (SESS-2): {problem}"))?;
        check_release(before_claims, before_keys, state, ended)
            .map_err(|problem| format!("invariant 2 (SESS-2): {problem}"))?;
        let first = book
            .ended_at
            .entry(entry.index)
            .or_insert_with(|| ended.to_vec());
        if first.as_slice() != ended {
            return Err(format!(
                "invariant 2 (SESS-2): this replica's entry ended {ended:?}, another's ended \
                 {first:?}"
            ));
        }
        let bytes = state.snapshot().map_err(|err| err.to_string())?;
        let hash = hash_bytes(&bytes);
        let first_time = !book.hashes.contains_key(&entry.index);
        if *book.hashes.entry(entry.index).or_insert(hash) != hash {
            return Err(
                "invariant 4: the snapshot differs from another replica's at this index".to_owned(),
            );
        }
        if first_time && entry.kind == EntryKind::Command {
            if let Ok(Command {
                write: Write::Sessions(SessionCommand::Grant { .. }),
                ..
            }) = Command::decode(&entry.data)
            {
                book.counts.granted += 1;
            }
        }
        for end in ended {
            match book.session_end.get(&end.session) {
                Some(at) if *at != entry.index => {
                    return Err(format!(
                        "invariant 2 (SESS-2): session {} ended again, first at index {at}",
                        end.session
                    ));
                }
                Some(_) => continue,
                None => {}
            }
            book.session_end.insert(end.session, entry.index);
            if !is_expire {
                book.counts.revoked += 1;
            } else {
                book.counts.expired += 1;
                if !book.expiries.contains(&(entry.index, entry.term)) {
                    return Err(format!(
                        "invariant 1 (SESS-1): session {} ended by an expiry no lease clock \
                         proposed",
                        end.session
                    ));
                }
            }
            let Some(&holder) = book.owner.get(&end.session) else {
                continue;
            };
            let h = &mut book.holders[holder];
            // A holder that died or began revoking stopped its keepalives on purpose.
            let quitting = [h.dies_at, h.revokes_at]
                .into_iter()
                .flatten()
                .any(|at| at <= now);
            let alive = h.phase == Phase::Live(end.session) && !quitting;
            h.phase = Phase::Gone;
            if !is_expire || !alive {
                continue;
            }
            let window: Vec<bool> = h
                .keepalives
                .iter()
                .filter(|(at, _)| *at + h.ttl > now)
                .map(|(_, accepted)| *accepted)
                .collect();
            if window.len() >= 2 && window.iter().all(|accepted| *accepted) {
                return Err(format!(
                    "invariant 1 (SESS-1): session {} of holder h{holder} (TTL {:?}) expired \
                     though its {} keepalives of the last TTL were all accepted by the current \
                     leader",
                    end.session,
                    h.ttl,
                    window.len()
                ));
            }
        }
        Ok(())
    }

    /// At a crash: the state machine is saved on disk half the time (in the control, without
    /// its sessions table); the process's counts are gone.
    pub(super) fn session_crash(&mut self, index: usize) {
        if self.session_book.is_none() {
            return;
        }
        let save = self.rng.chance(0.5);
        let book = self.book();
        let control = book.control;
        let replica = &mut book.replicas[index];
        replica.saved = if save {
            let snapshot = replica.state.snapshot().ok();
            match control {
                SessionControl::SaveWithoutSessions => {
                    snapshot.and_then(|bytes| without_sessions(&bytes, &replica.state))
                }
                _ => snapshot,
            }
        } else {
            None
        };
    }

    /// At a (re)start: a fresh process, its state machine restored from what it saved, if
    /// anything; invariant 3 holds of what it restored.
    pub(super) fn session_boot(&mut self, index: usize) {
        let now = self.now;
        let Some(book) = self.session_book.as_mut() else {
            return;
        };
        let replica = &mut book.replicas[index];
        let saved = replica.saved.take();
        let (origin, skew) = (replica.mono_origin_ms, replica.wall_skew_ms);
        *replica = Replica::new(origin, skew);
        replica.next_upkeep = now + UPKEEP;
        let Some(saved) = saved else {
            return;
        };
        if replica.state.restore(&saved).is_err() {
            return;
        }
        book.counts.restored += 1;
        let mono = replica.mono_ms(now);
        let live: Vec<SessionId> = replica.state.sessions().iter().map(|s| s.id).collect();
        for session in live {
            replica.grant_seen.insert(session, mono);
        }
        if let Err(problem) = check_holds(&replica.state) {
            let id = self.nodes[index].id;
            self.note_session_violation(format!(
                "{id} restored its state machine: invariant 3 (SESS-2): {problem}"
            ));
        }
    }
}

/// The control's saved state machine: the snapshot as a build before sessions wrote it, the
/// sessions table (the last field) left out.
fn without_sessions(bytes: &[u8], state: &ClusterState) -> Option<Vec<u8>> {
    let sessions = rmp_serde::to_vec(state.sessions()).ok()?;
    let body = bytes.strip_suffix(sessions.as_slice())?;
    let mut old = body.to_vec();
    // The state is a MessagePack array of six fields (a fixarray, 0x96): five without it.
    if old.get(1) != Some(&0x96) {
        return None;
    }
    old[1] = 0x95;
    Some(old)
}
