//! The ElectionActor (RAFT-1..10, GOS-1..6, PRI-1..6, STA-1, CB-5, CB-6): drives the node's
//! [`Election`], whatever its mode, and carries out its
//! actions. Every decision — who campaigns, who votes for whom, who leads — is the core's;
//! this actor only moves messages, time and bytes, and names no mode's own types.
//!
//! The durability contract (RAFT-1, WAL-1, CB-6; issue 16, item 3) is the core's
//! [`Driver`]'s: it takes the election's batches and hands this actor [`Effect`]s in the order
//! they must happen — messages that may leave now, writes for the WAL, what waited for a
//! write once the WAL said it is durable (the driver is told with [`Driver::handle_written`]),
//! the replicated log's entries to write and apply. The simulator carries out the same
//! effects, so what it checks is what this actor does. This actor only does the I/O: frames
//! to the transport, records to the WAL (a hard state the core marks amnesic is followed by an
//! amnesia marker, WAL-2; a leader change becomes a leadership-history record stamped with the
//! wall clock), events to logs, metrics and subscribers. It never waits: frames, timers,
//! status queries and the log's clients are handled while the WAL thread syncs, so a slow
//! disk delays what a node says, never what it hears. If the WAL fails, the node cannot
//! promise not to vote twice, so the actor halts.
//!
//! Besides frames, reachability and commands, the core gets this node's health readings
//! ([`HealthUpdate`], from the [`crate::health`] reader: PRI-1's battery, RAFT-10's priority)
//! and each radio peer's signal strength ([`PeerSignalUpdate`], from the transport: PRI-1).
//!
//! What it publishes (CB-2, CB-5): each [`LeaderChange`] carries, besides the core's term,
//! leader, role and cause, the last leader known before it (kept through leaderless stretches
//! and recovered from the history at start) and whether this node led until that change, so
//! that the hook runner needs no guesswork to run `on_follower` on every way out of
//! leadership. A node that stops gracefully ([`LeaveElection`]) tells the core, which decides
//! how to leave (a raft leader hands over to a caught-up voter first) and answers with
//! `Action::Stopped`; the actor waits for that answer, bounded. A node that halts while it
//! still leads steps down at once and publishes it (cause `shutdown`).

use std::collections::{BTreeSet, VecDeque};
use std::time::SystemTime;

use actix::prelude::*;
use conclave_core::driver::{DiskWrite, Driver, Effect, HardRecord};
use conclave_core::election::{
    Command, CommandOutcome, Election, ElectionError, ElectionStatus, Event, Outgoing, Role,
};
use conclave_protocol::{DropReason, PeerId};
use conclave_storage::{HistoryRecord, WalError, WalRecord};
use tracing::{debug, error, info, warn};

use crate::clock::{CoreTimer, NodeClock};
use crate::events::{EventBus, LeaderChange, NodeEvent, unix_millis};
use crate::job_wakeups::JobWakeups;
use crate::messages::{
    Destination, ElectionArrived, HealthUpdate, IdRefused, PeerReachability, PeerSignalUpdate,
    Transmit,
};
use crate::metrics::NodeMetrics;
use crate::wal::{AppendLog, Persist, SaveSnapshot};

mod configuration;
mod leases;
mod members;
mod replication;

pub use leases::{SessionKeepalive, SessionsRemaining};
pub use members::ProposeMembership;
use replication::LogDriver;
pub use replication::{
    CommittedEntries, Fenced, LogRefusal, ProposeWrite, ReadCommitted, ReadLinearizable, ReadLocal,
};

/// How long a node leaving the election waits for its core to say it stopped before it cuts
/// the hand-over short: a backstop only, far beyond any mode's own bound (raft's is its
/// minimum election timeout).
const LEAVE_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// Senders of another mode's election messages logged once each, at most this many.
const WARNED_PEERS_BOUND: usize = 256;

/// The longest a node goes between two looks at its lease clock (SESS-0): a leader looks
/// again when the earliest lease or session it counts runs out, and at least this often, so
/// that a claim or a session applied since starts its count within it. An idle node wakes
/// no more often than this.
const LOG_UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Entries of the leadership history kept in memory for the admin API.
const HISTORY_IN_MEMORY: usize = 1000;

/// An operator's command (from the admin API or an in-process caller).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<CommandOutcome, ElectionError>")]
pub struct ElectionCommand(pub Command);

/// The election's status, for the status answer.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "ElectionStatus")]
pub struct GetElectionStatus;

/// The leadership history, newest last (CB-6).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Vec<HistoryRecord>")]
pub struct GetHistory;

/// The node is stopping gracefully: the core is told (`handle_shutdown`), a leader hands over
/// or steps down as its mode does it, and when the core says it stopped (everything it
/// persisted and published on the way out being done) the actor stops and this answers. The
/// wait is bounded here too, should the core never answer.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct LeaveElection;

/// A write on its way to the WAL actor: its answer.
type WalRequest = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Result<(), WalError>, MailboxError>>>,
>;

/// The history record of a leader change, stamped now; `None` for other events.
fn history_record(event: &Event) -> Option<(HistoryRecord, Role)> {
    let Event::LeaderChanged {
        term,
        leader,
        role,
        cause,
    } = event
    else {
        return None;
    };
    let record = HistoryRecord {
        term: *term,
        leader: *leader,
        cause: *cause,
        at_unix_ms: unix_millis(SystemTime::now()),
    };
    Some((record, *role))
}

/// Where the election's outputs go.
#[derive(Debug, Clone)]
pub struct ElectionOutputs {
    /// Frames to send.
    pub transport: Recipient<Transmit>,
    /// Durable writes.
    pub wal: Recipient<Persist>,
    /// The replicated log's entries (LOG-2), written and fsynced in batches.
    pub wal_log: Recipient<AppendLog>,
    /// The replicated log's snapshots (LOG-4), through the same mailbox as the entries.
    pub wal_snapshot: Recipient<SaveSnapshot>,
}

/// The ElectionActor. See the [module docs](self).
pub struct ElectionActor {
    /// `node = <id>`, entered in every handler so that logs of nodes sharing a process
    /// (tests, the demo) say whose they are.
    span: tracing::Span,
    /// The election and the order its outputs are carried out in.
    driver: Driver,
    clock: NodeClock,
    outputs: ElectionOutputs,
    events: EventBus,
    metrics: NodeMetrics,
    history: VecDeque<HistoryRecord>,
    timer: CoreTimer,
    /// The leader last published (`None` after "no leader"): whether this node led until a
    /// change.
    published_leader: Option<PeerId>,
    /// The last leader known before the change being published, kept through leaderless
    /// stretches and seeded from the history: each change's `previous`.
    last_known_leader: Option<PeerId>,
    /// Told to leave: once the actions in hand are carried out, the actor stops and says so.
    leaving: Option<tokio::sync::oneshot::Sender<()>>,
    /// Peers whose election messages of another mode were already logged (once each; every
    /// one is counted in `conclave_frames_dropped_total{reason="other_mode"}`).
    warned_other_mode: BTreeSet<PeerId>,
    /// The replicated log's state machine and waiting clients (raft with `[log]`).
    log: Option<LogDriver>,
    /// When each leader change on its way to the WAL was stamped, in order: its history
    /// record says so, and so does its announcement once the record is durable.
    stamps: VecDeque<u64>,
    /// Status queries that came while the core was ahead of the disk, answered once nothing is
    /// held: a status never names a term, vote or leader before it is durable and announced.
    status_waiters: Vec<tokio::sync::oneshot::Sender<ElectionStatus>>,
    /// MEMB-3: the address book of the configuration in force, shared with the transport and
    /// the admin API.
    directory: crate::member_directory::MemberDirectory,
    /// SESS-3: bumped when an applied entry made a job ready or the leader changed, for the
    /// claims waiting on this node.
    job_wakeups: JobWakeups,
    /// Turns true when the actor stops (a halt, or the end of a graceful stop), for whoever
    /// must notice without polling (`conclave run`).
    stopped: tokio::sync::watch::Sender<bool>,
}

impl ElectionActor {
    /// An actor around `election`, with the history recovered from the WAL.
    pub fn new(
        election: Election,
        clock: NodeClock,
        outputs: ElectionOutputs,
        events: EventBus,
        metrics: NodeMetrics,
        history: Vec<HistoryRecord>,
        machine: Option<crate::machine::ClusterMachine>,
    ) -> Self {
        let mut election = election;
        let log = machine
            .filter(|_| election.replicated_log().is_some())
            .map(LogDriver::new);
        if log.is_some() {
            metrics.preregister_log();
        }
        metrics.set_mode(election.mode().label());
        metrics.set_term(election.term());
        metrics.set_role(election.role());
        metrics.set_phase(election.phase());
        metrics.set_abstaining(election.is_abstaining());
        // A node starts without a leader: its first leaderless stretch starts now.
        metrics.set_leader_known(false);
        let skip = history.len().saturating_sub(HISTORY_IN_MEMORY);
        let last_known_leader = history.iter().rev().find_map(|record| record.leader);
        Self {
            span: tracing::info_span!("node", id = %election.id()),
            driver: Driver::new(election),
            clock,
            outputs,
            events,
            metrics,
            history: history.into_iter().skip(skip).collect(),
            timer: CoreTimer::default(),
            published_leader: None,
            last_known_leader,
            leaving: None,
            warned_other_mode: BTreeSet::new(),
            log,
            stamps: VecDeque::new(),
            status_waiters: Vec::new(),
            directory: crate::member_directory::MemberDirectory::new(),
            job_wakeups: JobWakeups::new(),
            stopped: tokio::sync::watch::channel(false).0,
        }
    }

    /// SESS-3: the wake-ups this actor gives the node's waiting claims (see
    /// [`crate::job_wakeups`]).
    pub(crate) fn with_job_wakeups(mut self, wakeups: JobWakeups) -> Self {
        self.job_wakeups = wakeups;
        self
    }

    /// What turns true once this actor has stopped.
    pub(crate) fn stopped_watch(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopped.subscribe()
    }

    /// After an input: carries out what the driver hands out, snapshots the machine when the
    /// core wants it, then re-arms the timer.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        loop {
            while let Some(effect) = self.driver.poll_effect() {
                if !self.carry_out(effect, ctx) {
                    return;
                }
            }
            if !self.take_due_snapshot() {
                break;
            }
        }
        self.metrics
            .set_abstaining(self.driver.election().is_abstaining());
        self.log_metrics();
        self.arm_timer(ctx);
        if self.driver.is_settled() {
            self.answer_status_waiters();
        }
    }

    /// Carries out one effect. Returns false once the actor stopped.
    fn carry_out(&mut self, effect: Effect, ctx: &mut Context<Self>) -> bool {
        match effect {
            Effect::Send(message) => self.transmit(message),
            Effect::Publish(event) => match history_record(&event) {
                Some((mut record, role)) => {
                    if let Some(at_unix_ms) = self.stamps.pop_front() {
                        record.at_unix_ms = at_unix_ms;
                    }
                    self.announce(record, role);
                }
                None => self.observe(event),
            },
            Effect::Write(write) => self.write(write, ctx),
            Effect::Restore(snapshot) => return self.restore(&snapshot, ctx),
            Effect::Apply(entries) => {
                for entry in &entries {
                    self.apply_entry(entry);
                }
            }
            Effect::Read { id, outcome } => self.answer_read(id, outcome),
            Effect::Stopped => {
                // The core's answer to `handle_shutdown`: everything it had to persist and
                // publish on the way out is done.
                self.leave(ctx);
                return false;
            }
        }
        true
    }

    fn transmit(&self, message: Outgoing) {
        let (to, message) = match message {
            Outgoing::Send { to, message } => (Destination::Peer(to), message),
            Outgoing::Multicast { to, message } => (Destination::Peers(to), message),
            Outgoing::Broadcast { message } => (Destination::Broadcast, message),
        };
        self.outputs.transport.do_send(Transmit {
            to,
            body: message.into(),
        });
    }

    /// Hands a write to the WAL. The actor goes on handling inputs meanwhile; once the WAL
    /// answers, the driver is told and what waited for the write comes out of it.
    fn write(&mut self, write: DiskWrite, ctx: &mut Context<Self>) {
        let written = write.written();
        let request: WalRequest = match write {
            DiskWrite::Hard { records, .. } => {
                let records = self.wal_records(records);
                Box::pin(self.outputs.wal.send(Persist(records)))
            }
            DiskWrite::Entries(write) => {
                Box::pin(self.outputs.wal_log.send(AppendLog(write.entries)))
            }
            DiskWrite::Snapshot { snapshot, origin } => {
                let bytes = snapshot.data.len();
                let saved = self.outputs.wal_snapshot.send(SaveSnapshot(snapshot));
                let metrics = self.metrics.clone();
                Box::pin(async move {
                    let result = saved.await;
                    if matches!(result, Ok(Ok(()))) {
                        metrics.snapshot_saved(origin.label(), bytes);
                    }
                    result
                })
            }
        };
        // Not `ctx.wait`: the actor goes on serving while the disk works.
        ctx.spawn(request.into_actor(self).map(move |result, actor, ctx| {
            let _span = actor.span.clone().entered();
            match result {
                Ok(Ok(())) => {
                    let now = actor.clock.now();
                    actor.driver.handle_written(now, written);
                    actor.pump(ctx);
                }
                Ok(Err(err)) => actor.halt(&err.to_string(), ctx),
                Err(err) => actor.halt(&format!("WAL actor unreachable: {err}"), ctx),
            }
        }));
    }

    /// The WAL's records for a hard write: a leader change is stamped now (its announcement
    /// carries the same stamp), an amnesic hard state is followed by an amnesia marker.
    fn wal_records(&mut self, records: Vec<HardRecord>) -> Vec<WalRecord> {
        let now = unix_millis(SystemTime::now());
        let mut wal = Vec::with_capacity(records.len() + 1);
        for record in records {
            match record {
                HardRecord::HardState(state) => wal.push(WalRecord::HardState(state)),
                HardRecord::Amnesic(state) => {
                    wal.push(WalRecord::HardState(state));
                    // WAL-2: a restart before a later term is recorded abstains again.
                    wal.push(WalRecord::Amnesia { at_unix_ms: now });
                }
                HardRecord::AutoElection(enabled) => wal.push(WalRecord::AutoElection(enabled)),
                HardRecord::Genesis => wal.push(WalRecord::Genesis { at_unix_ms: now }),
                HardRecord::LeaderChange {
                    term,
                    leader,
                    cause,
                } => {
                    self.stamps.push_back(now);
                    wal.push(WalRecord::LeaderChange(HistoryRecord {
                        term,
                        leader,
                        cause,
                        at_unix_ms: now,
                    }));
                }
            }
        }
        wal
    }

    /// Answers the status queries that waited for a hard-state write.
    fn answer_status_waiters(&mut self) {
        if self.status_waiters.is_empty() {
            return;
        }
        let status = self.driver.election().status();
        for waiter in self.status_waiters.drain(..) {
            let _ = waiter.send(status.clone());
        }
    }

    /// Answers [`LeaveElection`] and stops the actor.
    fn leave(&mut self, ctx: &mut Context<Self>) {
        if let Some(left) = self.leaving.take() {
            let _ = left.send(());
        }
        self.answer_status_waiters();
        self.abandon_waiters();
        ctx.stop();
    }

    fn halt(&mut self, reason: &str, ctx: &mut Context<Self>) {
        error!(
            %reason,
            "the WAL could not make the election state durable; this node stops taking part \
             rather than risk voting twice in a term"
        );
        // What waited for the write that failed never leaves: it may depend on it. A halting
        // leader still says it no longer leads, so that its hooks stop what they started; the
        // history cannot record it, the WAL being what failed.
        let now = self.clock.now();
        for event in self.driver.abandon(now) {
            match history_record(&event) {
                Some((record, role)) => self.announce(record, role),
                None => self.observe(event),
            }
        }
        self.leaving = None;
        self.abandon_waiters();
        self.answer_status_waiters();
        ctx.stop();
    }

    /// A durable leader change: logs, metrics, the in-memory history and the event bus.
    fn announce(&mut self, record: HistoryRecord, role: Role) {
        let HistoryRecord {
            term,
            leader,
            cause,
            at_unix_ms,
        } = record;
        let me = self.driver.election().id();
        let stepped_down = self.published_leader == Some(me) && leader != Some(me);
        let previous = self.last_known_leader;
        self.published_leader = leader;
        if leader.is_some() {
            self.last_known_leader = leader;
        }
        match leader {
            Some(leader) => {
                info!(term, %leader, role = role.label(), cause = cause.label(), "leader changed");
            }
            None => warn!(term, cause = cause.label(), "no leader"),
        }
        self.metrics.leader_changed();
        self.metrics.set_leader_known(leader.is_some());
        self.metrics.set_term(term);
        self.metrics.set_role(role);
        self.history.push_back(record);
        while self.history.len() > HISTORY_IN_MEMORY {
            self.history.pop_front();
        }
        // SESS-3: a claim waiting on a node that no longer leads answers `not_leader`.
        self.job_wakeups.wake();
        self.events.publish(NodeEvent::LeaderChanged(LeaderChange {
            term,
            leader,
            previous,
            stepped_down,
            role,
            cause,
            at_unix_ms,
        }));
    }

    /// Metrics and logs of the events that are not leader changes.
    fn observe(&mut self, event: Event) {
        match event {
            Event::LeaderChanged { .. } => {
                // Leader changes go through the WAL first and are announced.
                debug_assert!(false, "leader change observed without its history record");
            }
            Event::RoleChanged { term, role, phase } => {
                debug!(term, role = role.label(), phase, "role changed");
                self.metrics.set_role(role);
                self.metrics.set_phase(phase);
                self.metrics.set_term(term);
            }
            Event::ElectionStarted { term, phase } => {
                info!(term, phase, "campaign started");
                self.metrics.election_started(phase);
            }
            Event::ElectionWon { term, duration } => {
                info!(term, ?duration, "election won");
                self.metrics.election_won(duration);
            }
            Event::VoteCast {
                term,
                candidate,
                granted,
                pre_vote,
            } => {
                debug!(term, %candidate, granted, pre_vote, "vote answered");
                if !pre_vote {
                    self.metrics.vote_cast(granted);
                }
            }
            Event::SplitBrain { term, known, other } => {
                warn!(term, %known, %other, "two leaders claim the same term");
                self.metrics.split_brain();
            }
            Event::TransferAborted { target } => {
                warn!(%target, "leadership transfer did not complete in time");
            }
            Event::ConfigurationChanged {
                index,
                voters,
                learners,
            } => {
                self.configuration_changed(index, voters, learners);
                self.learn_member_addresses();
            }
        }
    }

    fn arm_timer(&mut self, ctx: &mut Context<Self>) {
        let deadline = self.driver.election().poll_timeout();
        self.timer.arm(
            ctx,
            &self.clock,
            deadline,
            |actor| &mut actor.timer,
            |actor, ctx| {
                let _span = actor.span.clone().entered();
                let now = actor.clock.now();
                actor.driver.election_mut().handle_timeout(now);
                actor.pump(ctx);
            },
        );
    }
}

impl Actor for ElectionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.arm_timer(ctx);
        if self.log.is_some() {
            self.schedule_log_upkeep(ctx, LOG_UPKEEP_INTERVAL);
        }
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        // SESS-3: claims waiting for a job look again, find the node stopped and say so.
        self.job_wakeups.wake();
        self.stopped.send_replace(true);
    }
}

impl Handler<ElectionArrived> for ElectionActor {
    type Result = ();
    fn handle(&mut self, arrived: ElectionArrived, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        if let Err(err) =
            self.driver
                .election_mut()
                .handle_message(now, arrived.from, arrived.message)
        {
            self.metrics.frame_dropped(DropReason::OtherMode);
            // Bounded like the peer table admission keeps: log each sender once.
            if self.warned_other_mode.len() < WARNED_PEERS_BOUND
                && self.warned_other_mode.insert(arrived.from)
            {
                warn!(from = %arrived.from, %err, "election message dropped");
            }
            return;
        }
        self.pump(ctx);
    }
}

impl Handler<PeerReachability> for ElectionActor {
    type Result = ();
    fn handle(&mut self, change: PeerReachability, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        self.driver
            .election_mut()
            .handle_peer_status(now, change.peer, change.connected);
        self.pump(ctx);
    }
}

impl Handler<HealthUpdate> for ElectionActor {
    type Result = ();
    fn handle(&mut self, update: HealthUpdate, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        self.driver.election_mut().handle_health(now, update.0);
        self.pump(ctx);
    }
}

impl Handler<PeerSignalUpdate> for ElectionActor {
    type Result = ();
    fn handle(&mut self, update: PeerSignalUpdate, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        self.driver.election_mut().handle_peer_signal(now, update.0);
        self.pump(ctx);
    }
}

impl Handler<IdRefused> for ElectionActor {
    type Result = ();
    fn handle(&mut self, _: IdRefused, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        self.driver.election_mut().handle_id_refused(now);
        self.pump(ctx);
    }
}

impl Handler<ElectionCommand> for ElectionActor {
    type Result = Result<CommandOutcome, ElectionError>;
    fn handle(&mut self, command: ElectionCommand, ctx: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        info!(?command, "operator command");
        let outcome = self.driver.election_mut().handle_command(now, command.0);
        self.pump(ctx);
        outcome
    }
}

impl Handler<LeaveElection> for ElectionActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, _: LeaveElection, ctx: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        let (left, done) = tokio::sync::oneshot::channel();
        self.leaving = Some(left);
        let now = self.clock.now();
        // The core decides how this node leaves (a raft leader hands over, bounded by its own
        // timer) and says when it is done with `Action::Stopped`.
        self.driver.election_mut().handle_shutdown(now);
        self.pump(ctx);
        // A backstop in case the core's answer never comes: cut the hand-over short, then stop
        // regardless.
        ctx.run_later(LEAVE_BOUND, |actor, ctx| {
            let _span = actor.span.clone().entered();
            warn!(bound = ?LEAVE_BOUND, "still leaving the election; cutting the hand-over short");
            let now = actor.clock.now();
            actor.driver.election_mut().handle_shutdown(now);
            actor.pump(ctx);
            ctx.run_later(LEAVE_BOUND / 10, |actor, ctx| {
                error!("the election core did not stop; stopping without it");
                actor.leave(ctx);
            });
        });
        // Answered when the core said it stopped, everything before that durable and
        // published, or at once if the actor halted on the way (the sender is then dropped).
        Box::pin(async move {
            let _ = done.await;
        })
    }
}

impl Handler<GetElectionStatus> for ElectionActor {
    type Result = ResponseFuture<ElectionStatus>;
    fn handle(&mut self, _: GetElectionStatus, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        if self.driver.is_settled() {
            let status = self.driver.election().status();
            return Box::pin(async move { status });
        }
        // During a hard-state write the core is ahead of the disk: answer once it is durable.
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.status_waiters.push(answer);
        let fallback = self.driver.election().status();
        Box::pin(async move { answered.await.unwrap_or(fallback) })
    }
}

impl Handler<GetHistory> for ElectionActor {
    type Result = MessageResult<GetHistory>;
    fn handle(&mut self, _: GetHistory, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        MessageResult(self.history.iter().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    //! The durability contract of the module docs, with a WAL whose fsync ends only when the
    //! test says so.

    use std::time::Duration;

    use conclave_core::SeededRng;
    use conclave_core::election::{ElectionConfig, ElectionMessage, HardState};
    use conclave_core::raft::{RaftConfig, RaftMessage};
    use conclave_protocol::{Body, RequestVote};
    use conclave_storage::WalError;
    use tokio::sync::{mpsc, oneshot};

    use super::*;

    /// A WAL thread whose writes become durable only when the test answers them.
    struct HeldWal {
        writes: mpsc::UnboundedSender<(Vec<WalRecord>, oneshot::Sender<()>)>,
    }

    impl Actor for HeldWal {
        type Context = Context<Self>;
    }

    impl Handler<Persist> for HeldWal {
        type Result = ResponseFuture<Result<(), WalError>>;
        fn handle(&mut self, Persist(records): Persist, _: &mut Context<Self>) -> Self::Result {
            let (durable, synced) = oneshot::channel();
            let _ = self.writes.send((records, durable));
            Box::pin(async move {
                let _ = synced.await;
                Ok(())
            })
        }
    }

    impl Handler<AppendLog> for HeldWal {
        type Result = Result<(), WalError>;
        fn handle(&mut self, _: AppendLog, _: &mut Context<Self>) -> Self::Result {
            Ok(())
        }
    }

    impl Handler<SaveSnapshot> for HeldWal {
        type Result = Result<(), WalError>;
        fn handle(&mut self, _: SaveSnapshot, _: &mut Context<Self>) -> Self::Result {
            Ok(())
        }
    }

    /// A transport that hands every frame to the test.
    struct SeenTransport {
        sent: mpsc::UnboundedSender<Transmit>,
    }

    impl Actor for SeenTransport {
        type Context = Context<Self>;
    }

    impl Handler<Transmit> for SeenTransport {
        type Result = ();
        fn handle(&mut self, transmit: Transmit, _: &mut Context<Self>) {
            let _ = self.sent.send(transmit);
        }
    }

    type HeldWrites = mpsc::UnboundedReceiver<(Vec<WalRecord>, oneshot::Sender<()>)>;

    /// An ElectionActor of raft node `me` among `voters`, on a [`HeldWal`] and a
    /// [`SeenTransport`]: the writes it hands the WAL, and the frames it sends. Its timeouts are
    /// far beyond any test, so that it never campaigns on its own.
    fn node_of(
        me: PeerId,
        voters: &[PeerId],
    ) -> (
        Addr<ElectionActor>,
        HeldWrites,
        mpsc::UnboundedReceiver<Transmit>,
    ) {
        let clock = NodeClock::start();
        let config = RaftConfig::new(me, voters.iter().copied())
            .with_election_timeout(Duration::from_secs(600), Duration::from_secs(1200));
        let election = Election::new(
            ElectionConfig::Raft(config),
            HardState::default(),
            SeededRng::new(7),
            clock.now(),
        )
        .expect("a valid election config");
        let (writes_tx, writes) = mpsc::unbounded_channel();
        let wal = HeldWal { writes: writes_tx }.start();
        let (sent_tx, sent) = mpsc::unbounded_channel();
        let transport = SeenTransport { sent: sent_tx }.start();
        let metrics = NodeMetrics::new();
        let actor = ElectionActor::new(
            election,
            clock,
            ElectionOutputs {
                transport: transport.recipient(),
                wal: wal.clone().recipient(),
                wal_log: wal.clone().recipient(),
                wal_snapshot: wal.recipient(),
            },
            EventBus::new(metrics.clone()),
            metrics,
            Vec::new(),
            None,
        )
        .start();
        (actor, writes, sent)
    }

    fn vote_request(candidate: PeerId) -> ElectionArrived {
        vote_request_in(candidate, 1)
    }

    fn vote_request_in(candidate: PeerId, term: u64) -> ElectionArrived {
        ElectionArrived {
            from: candidate,
            message: ElectionMessage::Raft(RaftMessage::RequestVote(RequestVote {
                term,
                candidate,
                last_log_index: 0,
                last_log_term: 0,
                pre_vote: false,
                leadership_transfer: false,
                priority: None,
            })),
        }
    }

    /// RAFT-1, WAL-1 and issue 16 item 3: a granted vote leaves only once the vote is on
    /// disk — and so does the same answer to a request repeated meanwhile — while the actor
    /// goes on handling frames during the fsync; a status query waits for it.
    #[actix_rt::test]
    async fn a_vote_leaves_after_its_fsync_while_the_actor_goes_on_serving() {
        let (a, b) = (PeerId::from_static("a"), PeerId::from_static("b"));
        let (actor, mut writes, mut sent) = node_of(b, &[a, b]);

        actor.send(vote_request(a)).await.expect("the actor runs");
        let (records, durable) = writes.recv().await.expect("the vote goes to the WAL");
        assert!(
            matches!(
                records.as_slice(),
                [WalRecord::HardState(HardState { term: 1, vote: Some(voted), .. })] if *voted == a
            ),
            "{records:?}"
        );

        // The fsync has not ended: the actor goes on handling frames (the same request once
        // more: its answer depends on the vote too) ...
        let mut status = std::pin::pin!(actor.send(GetElectionStatus));
        tokio::time::timeout(Duration::from_secs(60), actor.send(vote_request(a)))
            .await
            .expect("the actor handles frames while the WAL syncs")
            .expect("the actor runs");
        assert!(
            sent.try_recv().is_err(),
            "nothing may leave before the vote is durable"
        );
        // ... and a status query, handled before that frame, is answered once the vote is
        // durable: it never names a term or vote the disk does not hold yet.
        assert!(
            tokio::time::timeout(Duration::ZERO, status.as_mut())
                .await
                .is_err(),
            "a status answered before the vote is durable"
        );

        durable.send(()).expect("the WAL waits for the test");
        for _ in 0..2 {
            let transmit = sent.recv().await.expect("the votes leave");
            assert!(
                matches!(transmit.to, Destination::Peer(to) if to == a),
                "{transmit:?}"
            );
            assert!(
                matches!(transmit.body, Body::Vote(vote) if vote.granted && vote.term == 1),
                "{transmit:?}"
            );
        }
        let status = status.await.expect("the actor runs");
        assert_eq!(status.term, 1);
        assert!(writes.try_recv().is_err(), "the vote was written once");
    }

    /// Issue 16, item 3 (group commit): a vote decided while an earlier one is still being
    /// written goes to the WAL in the next write, once the first is durable; each answer leaves
    /// only once the write it depends on is durable, in order.
    #[actix_rt::test]
    async fn a_write_decided_during_an_fsync_goes_into_the_next_one() {
        let (a, b, c) = (
            PeerId::from_static("a"),
            PeerId::from_static("b"),
            PeerId::from_static("c"),
        );
        let (actor, mut writes, mut sent) = node_of(b, &[a, b, c]);

        actor
            .send(vote_request_in(a, 1))
            .await
            .expect("the actor runs");
        let (first, first_durable) = writes.recv().await.expect("the first vote is written");
        // A later term's candidate while the first write is in flight: b votes for c in term 2,
        // in memory; the write waits for the first one.
        actor
            .send(vote_request_in(c, 2))
            .await
            .expect("the actor runs");
        assert!(
            writes.try_recv().is_err(),
            "one write with the WAL at a time"
        );
        assert!(
            sent.try_recv().is_err(),
            "nothing leaves before its vote is durable"
        );
        assert!(
            matches!(
                first.as_slice(),
                [WalRecord::HardState(HardState { term: 1, .. })]
            ),
            "{first:?}"
        );

        first_durable.send(()).expect("the WAL waits for the test");
        let answer = sent.recv().await.expect("the first answer leaves");
        assert!(
            matches!(answer.to, Destination::Peer(to) if to == a)
                && matches!(answer.body, Body::Vote(vote) if vote.granted && vote.term == 1),
            "{answer:?}"
        );
        let (second, second_durable) = writes.recv().await.expect("then the second write");
        assert!(
            matches!(
                second.as_slice(),
                [WalRecord::HardState(HardState { term: 2, vote: Some(voted), .. })] if *voted == c
            ),
            "{second:?}"
        );
        actor.send(GetHistory).await.expect("the actor runs");
        assert!(
            sent.try_recv().is_err(),
            "the second answer waits for its own write"
        );
        second_durable.send(()).expect("the WAL waits for the test");
        let answer = sent.recv().await.expect("the second answer leaves");
        assert!(
            matches!(answer.to, Destination::Peer(to) if to == c)
                && matches!(answer.body, Body::Vote(vote) if vote.granted && vote.term == 2),
            "{answer:?}"
        );
    }
}
