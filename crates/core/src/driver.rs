//! The one driver of an election (RAFT-1, WAL-1, CB-6, LOG-1..4, LOG-7; issue 24, item 0):
//! what a shell must do with the core's [`Ready`] batches, in the order it must do it, without
//! doing any of it. The ElectionActor and the simulator both carry out what this hands them;
//! the ordering rules live here once.
//!
//! A shell feeds inputs to the [`Election`] ([`Driver::election_mut`]), then takes
//! [`Effect`]s with [`Driver::poll_effect`] until there are none, carrying out each in turn:
//!
//! - **Durable first.** The hard-state writes of a batch, and the leadership-history record of
//!   every leader change (CB-6), go to the next [`DiskWrite::Hard`]. One such write is with the
//!   disk at a time; what is decided while it syncs gathers into the next one (group commit).
//!   What the core says waits for a write — a message naming a term or vote not yet on disk,
//!   a leader change until its history record is durable, and everything decided after them —
//!   is held and handed out only once the shell reports the write with
//!   [`Driver::handle_written`]. What depends on nothing unwritten is handed out at once: a
//!   slow disk delays what a node says, never what it hears.
//! - **The log.** The core hands out the log's parts only while no hard-state write of its own
//!   is in flight, and one entry write at a time ([`Ready::entries`]): a leader's snapshot to
//!   install ([`Effect::Restore`], then its [`DiskWrite::Snapshot`]), entries to write
//!   ([`DiskWrite::Entries`]), committed entries to apply ([`Effect::Apply`]), in that order.
//!   A linearizable read's answer ([`Effect::Read`]) comes once everything up to its read
//!   index was handed out to apply.
//! - **Stopping.** The core's answer to a shutdown ([`Effect::Stopped`]) comes after
//!   everything it follows is durable and handed out; nothing the shell does after it matters.
//!
//! Writes complete in the order they were handed out (one WAL, one writer), so a report of one
//! covers every earlier one. A shell whose write fails must not carry out anything held behind
//! it: [`Driver::abandon`] says what it may still publish on its way out.

use std::collections::{BTreeMap, VecDeque};

use conclave_protocol::{LogEntry, PeerId};

use crate::election::{
    DurableWrite, Election, Event, HardState, LeaderChangeCause, Outgoing, PersistSeq, Persisted,
    Ready,
};
use crate::raft::{LogPosition, LogWrite, ReadError, ReadId};
use crate::storage::Snapshot;
use crate::time::Instant;

/// One record of a [`DiskWrite::Hard`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HardRecord {
    /// A term and vote.
    HardState(HardState),
    /// A term and vote after which the WAL stays amnesic (WAL-2): an amnesia marker follows it.
    Amnesic(HardState),
    /// The operator's automatic-election switch (RAFT-8).
    AutoElection(bool),
    /// A genesis: a durable "never voted" of a member of a new cluster (WAL-5).
    Genesis,
    /// A leader change, recorded in the leadership history before it is published (CB-6).
    LeaderChange {
        /// The term it happened in.
        term: u64,
        /// The new leader, `None` for "no leader".
        leader: Option<PeerId>,
        /// Why.
        cause: LeaderChangeCause,
    },
}

impl From<DurableWrite> for HardRecord {
    fn from(write: DurableWrite) -> Self {
        match write {
            DurableWrite::HardState(state) => HardRecord::HardState(state),
            DurableWrite::Amnesic(state) => HardRecord::Amnesic(state),
            DurableWrite::AutoElection(enabled) => HardRecord::AutoElection(enabled),
            DurableWrite::Genesis => HardRecord::Genesis,
        }
    }
}

/// Where a snapshot being saved comes from (for metrics and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotOrigin {
    /// The leader sent it and the machine was restored from it.
    Installed,
    /// This node took it of its own machine ([`Driver::snapshot_taken`]).
    Taken,
}

impl SnapshotOrigin {
    /// The metric label.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            SnapshotOrigin::Installed => "installed",
            SnapshotOrigin::Taken => "taken",
        }
    }
}

/// A write for the shell's storage; report it with [`Driver::handle_written`] once durable
/// ([`DiskWrite::written`] says how).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskWrite {
    /// Hard-state and history records, made durable with one fsync.
    Hard {
        /// The driver's number for it: increasing, starting at 1.
        number: u64,
        /// The records, in order.
        records: Vec<HardRecord>,
    },
    /// Log entries: every stored entry from the first one's index on is replaced (LOG-2).
    Entries(LogWrite),
    /// A snapshot: saved whole, the entries it covers dropped (LOG-4).
    Snapshot {
        /// The snapshot.
        snapshot: Snapshot,
        /// Where it comes from.
        origin: SnapshotOrigin,
    },
}

impl DiskWrite {
    /// What to report once this write is durable.
    #[must_use]
    pub fn written(&self) -> Written {
        match self {
            DiskWrite::Hard { number, .. } => Written::Hard(*number),
            DiskWrite::Entries(write) => Written::Entries(write.last()),
            DiskWrite::Snapshot { snapshot, .. } => Written::Snapshot(snapshot.last),
        }
    }
}

/// A write the shell made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The [`DiskWrite::Hard`] of this number.
    Hard(u64),
    /// Entries up to this position.
    Entries(LogPosition),
    /// The snapshot ending here.
    Snapshot(LogPosition),
}

/// One thing for the shell to do, in order. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// A message for the transport.
    Send(Outgoing),
    /// An event for logs, metrics, hooks and subscribers; a leader change comes after its
    /// history record is durable.
    Publish(Event),
    /// A write for storage.
    Write(DiskWrite),
    /// LOG-4: restore the state machine from a leader's snapshot, before applying what follows.
    Restore(Snapshot),
    /// LOG-3: apply these committed entries, in order.
    Apply(Vec<LogEntry>),
    /// LOG-7: the read `id` may be served now from the machine (everything up to its read
    /// index was handed out to apply), or failed.
    Read {
        /// The read.
        id: ReadId,
        /// Serve it, or why not.
        outcome: Result<(), ReadError>,
    },
    /// The core's answer to a shutdown: this node's part in the election is over.
    Stopped,
}

/// An output held until a hard write is durable.
#[derive(Debug)]
enum Held {
    Send(Outgoing),
    Publish(Event),
    Stopped,
}

impl From<Held> for Effect {
    fn from(held: Held) -> Self {
        match held {
            Held::Send(message) => Effect::Send(message),
            Held::Publish(event) => Effect::Publish(event),
            Held::Stopped => Effect::Stopped,
        }
    }
}

/// A hard write gathering while another one syncs.
#[derive(Debug)]
struct Gathering {
    number: u64,
    records: Vec<HardRecord>,
    /// The core's last persist batch among the records.
    seq: Option<PersistSeq>,
}

/// Carries an [`Election`]'s batches out in order, for any shell. See the [module docs](self).
#[derive(Debug)]
pub struct Driver {
    election: Election,
    /// The hard write with the disk: its number and the core's batch it carries.
    writing: Option<(u64, Option<PersistSeq>)>,
    gathering: Option<Gathering>,
    /// The number of the last hard write handed out.
    last_write: u64,
    /// The number of the last hard write reported durable.
    durable_write: u64,
    /// Outputs waiting for a hard write, with its number, in order.
    held: VecDeque<(u64, Held)>,
    effects: VecDeque<Effect>,
    /// The highest log index handed out to apply (or restored).
    applied: u64,
    /// LOG-7: reads whose read index is known, by that index, until it is handed out to apply.
    reads: BTreeMap<u64, Vec<ReadId>>,
}

impl Driver {
    /// A driver of `election`, whose state machine (if it has a log) holds everything up to
    /// the log's applied index (the snapshot it restarted from).
    #[must_use]
    pub fn new(mut election: Election) -> Self {
        let applied = election
            .replicated_log()
            .map_or(0, |log| log.status().applied);
        Self {
            election,
            writing: None,
            gathering: None,
            last_write: 0,
            durable_write: 0,
            held: VecDeque::new(),
            effects: VecDeque::new(),
            applied,
            reads: BTreeMap::new(),
        }
    }

    /// The election.
    #[must_use]
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// The election, to hand it an input; then take the effects.
    pub fn election_mut(&mut self) -> &mut Election {
        &mut self.election
    }

    /// The next thing to do, after the core's latest decisions; `None` when there is nothing
    /// until the next input or report.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        loop {
            if let Some(effect) = self.effects.pop_front() {
                return Some(effect);
            }
            let ready = self.election.take_ready();
            if ready.is_empty() {
                return None;
            }
            self.carry_out(ready);
        }
    }

    /// A write handed out as an [`Effect::Write`] is durable: the core is told, and what
    /// waited for it comes next.
    pub fn handle_written(&mut self, now: Instant, written: Written) {
        match written {
            Written::Hard(number) => {
                let Some((in_flight, seq)) = self.writing else {
                    return;
                };
                if in_flight != number {
                    return;
                }
                self.writing = None;
                self.durable_write = number;
                if let Some(seq) = seq {
                    self.election.handle_persisted(now, Persisted::Hard(seq));
                }
                while self
                    .held
                    .front()
                    .is_some_and(|&(waits_for, _)| waits_for <= number)
                {
                    if let Some((_, held)) = self.held.pop_front() {
                        self.effects.push_back(held.into());
                    }
                }
                self.start_write();
            }
            Written::Entries(last) => {
                self.election
                    .handle_persisted(now, Persisted::Entries(last));
            }
            Written::Snapshot(last) => {
                self.election
                    .handle_persisted(now, Persisted::Snapshot(last));
            }
        }
    }

    /// LOG-7: asks the core for a linearizable read; its answer comes as an [`Effect::Read`].
    pub fn request_read(&mut self, now: Instant, id: ReadId) -> Result<(), ReadError> {
        match self.election.replicated_log() {
            Some(mut log) => log.request_read(now, id),
            None => Err(ReadError::NotLeader { leader: None }),
        }
    }

    /// LOG-4: where the core wants a snapshot of the machine, if it wants one now (never
    /// while a hard-state write of the core is in flight: the log's writes follow it).
    #[must_use]
    pub fn snapshot_due(&mut self) -> Option<LogPosition> {
        if self.election.is_persisting() {
            return None;
        }
        self.election.replicated_log()?.snapshot_due()
    }

    /// LOG-4: the machine's image at `snapshot.last`: the core compacts its log behind it, and
    /// it is saved ([`DiskWrite::Snapshot`]). Whether the core took it.
    pub fn snapshot_taken(&mut self, now: Instant, mut snapshot: Snapshot) -> bool {
        let Some(mut log) = self.election.replicated_log() else {
            return false;
        };
        // MEMB-1: the configuration the compacted entries carried is saved with the image.
        if snapshot.config.is_none() {
            snapshot.config = log.configuration_at(snapshot.last.index);
        }
        if !log.snapshot_taken(now, snapshot.clone()) {
            return false;
        }
        self.effects.push_back(Effect::Write(DiskWrite::Snapshot {
            snapshot,
            origin: SnapshotOrigin::Taken,
        }));
        true
    }

    /// A hard write is gathering or with the disk.
    #[must_use]
    pub fn is_writing(&self) -> bool {
        self.writing.is_some() || self.gathering.is_some()
    }

    /// Nothing the core decided waits for the disk: its status is what the disk holds.
    #[must_use]
    pub fn is_settled(&self) -> bool {
        !self.is_writing() && self.held.is_empty() && self.effects.is_empty()
    }

    /// The shell's storage failed: nothing held behind the failed write may leave, so it is
    /// dropped; the core is told to stop at once (a leader steps down without a hand-over),
    /// and the events it publishes on the way out are returned, for the shell to publish
    /// without recording them (the WAL being what failed).
    pub fn abandon(&mut self, now: Instant) -> Vec<Event> {
        self.held.clear();
        self.gathering = None;
        self.effects.clear();
        // The second call steps a leader down at once: there is no time for a hand-over.
        self.election.handle_shutdown(now);
        self.election.handle_shutdown(now);
        let ready = self.election.take_ready();
        let after = ready.after_persist.map(|after| after.events);
        ready
            .events
            .into_iter()
            .chain(after.into_iter().flatten())
            .collect()
    }

    /// Sorts one batch into what goes now, what goes to the next hard write, and what waits.
    fn carry_out(&mut self, ready: Ready) {
        let Ready {
            persist,
            messages,
            events,
            after_persist,
            stopped,
            install,
            entries,
            committed,
            reads,
        } = ready;
        self.effects.extend(messages.into_iter().map(Effect::Send));
        if let Some(batch) = persist {
            let records = batch.writes.into_iter().map(HardRecord::from).collect();
            self.gather(records, Some(batch.seq));
        }
        for event in events {
            self.publish(0, event);
        }
        if let Some(after) = after_persist {
            let waits_for = self.write_carrying(after.seq);
            for message in after.messages {
                self.hold_or_go(waits_for, Held::Send(message));
            }
            for event in after.events {
                self.publish(waits_for, event);
            }
        }
        if stopped {
            // After everything, what is on its way to the disk included.
            let last = self
                .gathering
                .as_ref()
                .map_or(self.last_write, |write| write.number);
            self.hold_or_go(last, Held::Stopped);
        }
        if self.writing.is_none() {
            self.start_write();
        }
        self.carry_out_log(install, entries, committed, reads);
    }

    /// The log's part of a batch: the snapshot to install before anything after it, the
    /// entries to write, what to apply, then the reads that may be served.
    fn carry_out_log(
        &mut self,
        install: Option<Snapshot>,
        entries: Option<LogWrite>,
        committed: Vec<LogEntry>,
        reads: Vec<(ReadId, Result<u64, ReadError>)>,
    ) {
        if let Some(snapshot) = install {
            self.applied = self.applied.max(snapshot.last.index);
            self.effects.push_back(Effect::Restore(snapshot.clone()));
            self.effects.push_back(Effect::Write(DiskWrite::Snapshot {
                snapshot,
                origin: SnapshotOrigin::Installed,
            }));
        }
        if let Some(write) = entries {
            self.effects
                .push_back(Effect::Write(DiskWrite::Entries(write)));
        }
        if let Some(last) = committed.last() {
            self.applied = self.applied.max(last.index);
            self.effects.push_back(Effect::Apply(committed));
        }
        for (id, outcome) in reads {
            match outcome {
                Ok(index) => self.reads.entry(index).or_default().push(id),
                Err(err) => self.effects.push_back(Effect::Read {
                    id,
                    outcome: Err(err),
                }),
            }
        }
        while let Some(entry) = self.reads.first_entry() {
            if *entry.key() > self.applied {
                break;
            }
            for id in entry.remove() {
                self.effects.push_back(Effect::Read {
                    id,
                    outcome: Ok(()),
                });
            }
        }
    }

    /// An event, after the write numbered `waits_for`: a leader change is recorded in the
    /// history first, in the next write, and published once that write is durable.
    fn publish(&mut self, waits_for: u64, event: Event) {
        if let Event::LeaderChanged {
            term,
            leader,
            cause,
            ..
        } = event
        {
            let number = self.gather(
                vec![HardRecord::LeaderChange {
                    term,
                    leader,
                    cause,
                }],
                None,
            );
            self.hold_or_go(number, Held::Publish(event));
        } else {
            self.hold_or_go(waits_for, Held::Publish(event));
        }
    }

    /// Adds `records` to the next hard write (the core's batch `seq` among them); its number.
    fn gather(&mut self, records: Vec<HardRecord>, seq: Option<PersistSeq>) -> u64 {
        let next = self.last_write + 1;
        let write = self.gathering.get_or_insert_with(|| Gathering {
            number: next,
            records: Vec::new(),
            seq: None,
        });
        write.records.extend(records);
        write.seq = write.seq.max(seq);
        write.number
    }

    /// The number of the hard write that makes the core's batch `seq` durable.
    fn write_carrying(&self, seq: PersistSeq) -> u64 {
        match (self.writing, &self.gathering) {
            (Some((number, Some(carried))), _) if carried >= seq => number,
            (_, Some(write)) if write.seq >= Some(seq) => write.number,
            // Already durable.
            _ => self.durable_write,
        }
    }

    /// Hands `held` out now if nothing it must follow is still on its way to the disk;
    /// otherwise holds it, in order.
    fn hold_or_go(&mut self, waits_for: u64, held: Held) {
        let waits_for = self
            .held
            .back()
            .map_or(waits_for, |&(last, _)| last.max(waits_for));
        if waits_for > self.durable_write {
            self.held.push_back((waits_for, held));
        } else {
            self.effects.push_back(held.into());
        }
    }

    /// Hands what gathered to the shell as the next hard write.
    fn start_write(&mut self) {
        let Some(write) = self.gathering.take() else {
            return;
        };
        self.last_write = write.number;
        self.writing = Some((write.number, write.seq));
        self.effects.push_back(Effect::Write(DiskWrite::Hard {
            number: write.number,
            records: write.records,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::election::{Command, ElectionConfig, Role};
    use crate::raft::{LogConfig, RaftConfig};
    use crate::rng::SeededRng;
    use crate::testing::id;

    fn single_voter(log: bool) -> Driver {
        let mut config = RaftConfig::new(id("a"), [id("a")]);
        if log {
            config.log = Some(LogConfig::default());
        }
        let election = Election::new(
            ElectionConfig::Raft(config),
            HardState::default(),
            SeededRng::new(7),
            Instant::ZERO,
        )
        .expect("valid settings");
        Driver::new(election)
    }

    fn effects(driver: &mut Driver) -> Vec<Effect> {
        std::iter::from_fn(|| driver.poll_effect()).collect()
    }

    fn elect(driver: &mut Driver) -> Instant {
        let deadline = driver.election().poll_timeout().expect("a timer");
        driver.election_mut().handle_timeout(deadline);
        deadline
    }

    /// RAFT-1, CB-6: a new term and its leader change go to one hard write; the leader change
    /// is published only once it is reported durable, and not before.
    #[test]
    fn a_leader_change_is_published_after_its_write() {
        let mut driver = single_voter(false);
        let now = elect(&mut driver);
        let first = effects(&mut driver);
        let Some(Effect::Write(DiskWrite::Hard { number, records })) = first
            .iter()
            .find(|effect| matches!(effect, Effect::Write(_)))
            .cloned()
        else {
            panic!("a hard write: {first:?}");
        };
        assert!(
            records
                .iter()
                .any(|record| matches!(record, HardRecord::HardState(HardState { term: 1, .. })))
        );
        assert!(
            records
                .iter()
                .any(|record| matches!(record, HardRecord::LeaderChange { term: 1, .. }))
        );
        assert!(
            !first
                .iter()
                .any(|effect| matches!(effect, Effect::Publish(Event::LeaderChanged { .. }))),
            "published before durable: {first:?}"
        );
        assert!(!driver.is_settled());
        driver.handle_written(now, Written::Hard(number));
        let after = effects(&mut driver);
        assert!(
            after.iter().any(|effect| matches!(
                effect,
                Effect::Publish(Event::LeaderChanged { term: 1, .. })
            )),
            "{after:?}"
        );
        assert!(driver.is_settled());
        assert_eq!(driver.election().role(), Role::Leader);
    }

    /// What is decided while a hard write syncs goes into the next one (group commit), and a
    /// report for a write that is not the one in flight changes nothing.
    #[test]
    fn writes_decided_during_a_sync_gather_into_the_next() {
        let mut driver = single_voter(false);
        let now = elect(&mut driver);
        let first = effects(&mut driver);
        let writes = first
            .iter()
            .filter(|effect| matches!(effect, Effect::Write(DiskWrite::Hard { .. })))
            .count();
        assert_eq!(writes, 1, "{first:?}");
        let outcome = driver
            .election_mut()
            .handle_command(now, Command::EnableAutoElection(false));
        assert!(outcome.is_ok());
        assert!(
            effects(&mut driver).is_empty(),
            "nothing may go while write 1 syncs"
        );
        driver.handle_written(now, Written::Hard(7));
        assert!(effects(&mut driver).is_empty());
        driver.handle_written(now, Written::Hard(1));
        let second = effects(&mut driver);
        assert!(
            second.iter().any(|effect| matches!(
                effect,
                Effect::Write(DiskWrite::Hard { number: 2, records })
                    if records.contains(&HardRecord::AutoElection(false))
            )),
            "{second:?}"
        );
    }

    /// LOG-1..3: a single voter's write is written, then applied once reported durable; a
    /// linearizable read is answered once its read index was handed out to apply.
    #[test]
    fn a_write_is_applied_after_its_entries_are_durable() {
        let mut driver = single_voter(true);
        let now = elect(&mut driver);
        for effect in effects(&mut driver) {
            if let Effect::Write(write) = effect {
                driver.handle_written(now, write.written());
            }
        }
        // The leader's empty entry of its term.
        let mut pending = effects(&mut driver);
        while let Some(Effect::Write(write)) = pending
            .iter()
            .find(|effect| matches!(effect, Effect::Write(DiskWrite::Entries(_))))
            .cloned()
        {
            driver.handle_written(now, write.written());
            pending = effects(&mut driver);
        }
        let position = driver
            .election_mut()
            .replicated_log()
            .expect("a log")
            .propose(now, b"x".to_vec())
            .expect("the leader takes it");
        let written = effects(&mut driver);
        let Some(Effect::Write(write)) = written
            .iter()
            .find(|effect| matches!(effect, Effect::Write(DiskWrite::Entries(_))))
            .cloned()
        else {
            panic!("the entry is written: {written:?}");
        };
        assert!(
            !written
                .iter()
                .any(|effect| matches!(effect, Effect::Apply(_))),
            "applied before durable: {written:?}"
        );
        driver.handle_written(now, write.written());
        let applied = effects(&mut driver);
        assert!(
            applied.iter().any(|effect| matches!(
                effect,
                Effect::Apply(entries) if entries.last().map(|e| e.index) == Some(position.index)
            )),
            "{applied:?}"
        );
        assert!(driver.request_read(now, ReadId(1)).is_ok());
        assert_eq!(
            effects(&mut driver),
            vec![Effect::Read {
                id: ReadId(1),
                outcome: Ok(())
            }]
        );
    }
}
