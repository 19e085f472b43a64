//! The replicated log in the simulator (LOG-1..4): each node's storage, fsyncs that take
//! time, a client that writes to whoever leads, a small state machine that is snapshotted and
//! restored, and the Raft paper's Figure 3 properties checked as the run goes.
//!
//! - **Storage.** A node's entries go to a [`MemStorage`] the moment the core hands them out;
//!   the fsync completes a random delay later (up to [`SimConfig::disk_delay`]), and only then
//!   is the core told they are durable. A crash in between loses them, as a power cut loses
//!   what the page cache held: every place where the core counts on a write before its fsync
//!   shows up as a lost acknowledged write or a broken property. The hard state goes the same
//!   way (issue 16, item 3): a `Persist` is durable when its fsync completes, in order with the
//!   log's writes; meanwhile the node goes on handling inputs, and every action it decides —
//!   the messages that may depend on the write first of all — is held back until then, as
//!   the ElectionActor holds them. A crash in between loses the write and what it held.
//! - **Snapshots.** Each node runs a [`SimMachine`]: a digest chained over every applied entry
//!   and a 16-slot register of the latest values, so that its image spans several chunks of
//!   the smaller batch budgets. When the core says a snapshot is due, the driver encodes the
//!   machine, hands the image to the core and saves it after a disk delay (in order with the
//!   log writes, as the WalActor's one thread does); an installed snapshot restores the machine
//!   at once and is saved the same way; a restart restores the machine from the durable
//!   snapshot and applies from there.
//! - **Client.** Every [`SimConfig::client_interval`] a client writes a unique value to one of
//!   three registers, or reads one, through a random live node; one write in ten is padded to
//!   one to four frames' worth of bytes, so that it travels in chunks (MEMB-6); a node that does not lead
//!   refuses it, as the admin API redirects. A write is *acknowledged* when the node that took
//!   it applies the entry at the position it was given, with its data — what the admin API
//!   answers 200 on. A read goes by the read index, as the node's linearizable reads do
//!   (LOG-7): the leader takes it ([`ReplicatedLog::request_read`](conclave_core::raft::ReplicatedLog::request_read)), and once the core gives
//!   its read index the read answers the register as the node's machine has it when it has
//!   applied that index; a read that fails (its leader stepped down) stays unanswered. The
//!   registers are part of the machine, so snapshots carry them.
//! - **Properties.** State machine safety: no two nodes apply different entries at one index,
//!   across restarts too (checked at every apply), every machine applies the index after the
//!   last it holds, and every machine's digest at an index — after applying it, or restored
//!   from a snapshot of it — is the one every other machine had there: a snapshot carries
//!   exactly the entries it covers. Leader completeness: a node that becomes
//!   leader of a term holds every write acknowledged by a leader of an earlier term (checked
//!   when it takes office). Log matching and the durability of every acknowledged write:
//!   checked once faults stop, over the logs of the live nodes ([`Simulation::await_log_converged`]);
//!   and the client's history is linearizable ([`Simulation::check_linearizable`]).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use conclave_protocol::LogEntry;

use super::linearizability::{Operation, OperationKind, check};
use super::{Observation, SimFailure, Simulation};
use conclave_core::Instant;
use conclave_core::driver::{DiskWrite, Driver, HardRecord, SnapshotOrigin, Written};
use conclave_core::election::{Election, Role};
use conclave_core::raft::{LogPosition, ReadId};
use conclave_core::storage::{MemStorage, Snapshot, Storage};

/// Slots of [`SimMachine`]'s register.
const SLOTS: usize = 16;

/// The simulator's state machine (LOG-4's stand-in for the key-value store): deterministic,
/// cheap, and with an image larger than one chunk at the small batch budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct SimMachine {
    /// The last index applied (or restored).
    applied: u64,
    /// A hash chained over every (index, term, data) applied.
    digest: u64,
    /// The latest value written to each slot (a value picks its slot).
    slots: [u64; SLOTS],
    /// The client's registers (LOG-7's linearizability check): what its reads return.
    registers: [u64; REGISTERS as usize],
}

impl SimMachine {
    /// Applies `entry`, which must be the next index.
    fn apply(&mut self, entry: &LogEntry) -> Result<(), String> {
        if entry.index != self.applied + 1 {
            return Err(format!(
                "applied index {} after index {}",
                entry.index, self.applied
            ));
        }
        let mut digest = self.digest ^ 0x9e37_79b9_7f4a_7c15;
        for word in [entry.index, entry.term, entry.data.len() as u64]
            .into_iter()
            .chain(entry.data.iter().map(|&byte| u64::from(byte)))
        {
            digest = (digest ^ word)
                .wrapping_mul(0x0100_0000_01b3)
                .rotate_left(17);
        }
        self.digest = digest;
        if let Ok(bytes) = <[u8; 8]>::try_from(entry.data.as_slice()) {
            let value = u64::from_be_bytes(bytes);
            self.slots[(value % SLOTS as u64) as usize] = value;
        }
        if let [WRITE, key, rest @ ..] = entry.data.as_slice() {
            // A large write pads its value (MEMB-6); the padding is in the digest.
            if let (Some(register), Some(Ok(value))) = (
                self.registers.get_mut(usize::from(*key)),
                rest.get(..8).map(<[u8; 8]>::try_from),
            ) {
                *register = u64::from_be_bytes(value);
            }
        }
        self.applied = entry.index;
        Ok(())
    }

    /// The image: applied, digest and the slots, big-endian.
    fn encode(&self) -> Vec<u8> {
        [self.applied, self.digest]
            .iter()
            .chain(&self.slots)
            .chain(&self.registers)
            .flat_map(|word| word.to_be_bytes())
            .collect()
    }

    /// The machine an image holds; `None` when it is not one.
    fn decode(data: &[u8]) -> Option<Self> {
        if data.len() != 8 * (2 + SLOTS + REGISTERS as usize) {
            return None;
        }
        let mut words = data
            .chunks_exact(8)
            .map(|chunk| u64::from_be_bytes(chunk.try_into().unwrap_or_default()));
        let applied = words.next()?;
        let digest = words.next()?;
        let mut slots = [0; SLOTS];
        for slot in &mut slots {
            *slot = words.next()?;
        }
        let mut registers = [0; REGISTERS as usize];
        for register in &mut registers {
            *register = words.next()?;
        }
        Some(Self {
            applied,
            digest,
            slots,
            registers,
        })
    }
}

/// A write to a node's storage whose fsync has not completed.
#[derive(Debug, Clone)]
pub(super) enum PendingSync {
    /// Log entries, through the position.
    Entries(LogPosition),
    /// A snapshot, saved when the sync completes.
    Snapshot(Snapshot),
    /// A hard-state write of the driver (the WAL's records), durable when the sync completes.
    Hard {
        /// The driver's number for it.
        number: u64,
        /// The records.
        records: Vec<HardRecord>,
    },
}

/// One node's log as the simulator keeps it: what survives a crash, and what does not.
#[derive(Debug, Default)]
pub(super) struct NodeLog {
    /// Entries written, durable only up to the last sync.
    pub(super) storage: MemStorage,
    /// Writes whose fsync has not completed, in order: when each does, and what it was.
    syncs: VecDeque<(Instant, PendingSync)>,
    /// The state machine in the process's memory.
    machine: SimMachine,
    /// Operations the client made through this node while it led: position, entry data and
    /// the operation's place in the history.
    proposals: BTreeMap<u64, (u64, Vec<u8>, usize)>,
    /// LOG-7: reads this leader took and has not answered: the operation's place in the
    /// history, by the read's id.
    reads: BTreeMap<ReadId, usize>,
    /// Reads whose read index is known, waiting for the machine to apply it: the index and
    /// the operation's place in the history.
    reads_ready: Vec<(u64, usize)>,
    /// Its entries were lost with its WAL, and its log has not caught up with a leader's since.
    pub(super) lost: bool,
}

impl NodeLog {
    /// When a sync asked for now completes: a random disk delay, but never before an
    /// earlier one (fsyncs complete in the order they were asked for).
    fn next_sync_due(
        &self,
        now: Instant,
        rng: &mut conclave_core::SeededRng,
        max_delay: Duration,
    ) -> Instant {
        let drawn = now + rng.duration_between(Duration::ZERO, max_delay);
        self.syncs
            .back()
            .map_or(drawn, |&(last, _)| last.max(drawn))
    }

    /// The process died: unsynced writes are lost, and so is what the process knew.
    pub(super) fn crash(&mut self) {
        self.storage.crash();
        self.syncs.clear();
        self.proposals.clear();
        self.reads.clear();
        self.reads_ready.clear();
        self.machine = SimMachine::default();
    }

    /// The disk was lost.
    pub(super) fn wipe(&mut self) {
        self.crash();
        self.storage.wipe();
    }
}

/// What the log's properties remember across the whole run.
#[derive(Debug, Default)]
pub(super) struct LogBook {
    /// The entry applied at each index by the first node that applied it.
    applied: BTreeMap<u64, (u64, Vec<u8>)>,
    /// The machine digest after each index, as the first machine that got there had it.
    digests: BTreeMap<u64, u64>,
    /// Snapshots taken by the nodes' drivers (LOG-4).
    snapshots_taken: u64,
    /// Snapshots received from a leader and installed.
    snapshots_installed: u64,
    /// Machines restored from a durable snapshot at a restart.
    snapshots_restored: u64,
    /// InstallSnapshot chunks sent.
    snapshot_chunks: u64,
    /// Chunks answered with another offset than the one sent next: resumed transfers.
    snapshot_resumes: u64,
    /// Acknowledged writes: the position, the value, and the term of the leader that
    /// acknowledged it.
    acknowledged: Vec<(LogPosition, Vec<u8>, u64)>,
    /// When the client writes next.
    next_write: Option<Instant>,
    /// The next value written (unique).
    next_value: u64,
    /// Writes refused because the node did not lead.
    refused: u64,
    /// A broken property, reported at the end of the step.
    violation: Option<String>,
    /// The control run's driver: it tells the core a write is durable as soon as it is
    /// written, before its fsync (see [`Simulation::set_report_before_fsync`]).
    report_before_fsync: bool,
    /// The control run's driver: what follows a hard-state write leaves before its fsync
    /// completes (see [`Simulation::set_send_before_hard_sync`]).
    pub(super) send_before_hard_sync: bool,
    /// The client's operations on the registers, for the linearizability check.
    history: Vec<Operation>,
    /// The control run's reads: answered at once from a random node's own registers, not
    /// through the log (see [`Simulation::set_stale_reads`]).
    stale_reads: bool,
    /// The control run's reads: a node that believes it leads answers at its commit index,
    /// without a heartbeat round (see [`Simulation::set_unconfirmed_reads`]).
    unconfirmed_reads: bool,
    /// The id of the next read the client asks for (LOG-7).
    next_read: u64,
    /// Reads answered at their read index.
    reads_answered: u64,
}

/// What happens next beside messages and timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LogEvent {
    /// A node's oldest pending fsync completes.
    Sync(usize),
    /// The client writes or reads.
    ClientWrite,
    /// The sessions family's upkeep of a node or a holder's action.
    Sessions(super::sessions::Target),
}

/// Registers the client writes and reads (`k0`, `k1`, `k2`): few, so that operations on one
/// overlap.
const REGISTERS: u8 = 3;

/// The share of the client's writes that are larger than a frame (MEMB-6).
const LARGE_WRITES: f64 = 0.1;

/// The length of a write that is not padded: the kind, the register and the value.
const SMALL_WRITE_LEN: usize = 10;

/// The first byte of an entry's data: a write of a register.
const WRITE: u8 = b'W';

/// Counts of what the client did, for reports and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogCounts {
    /// Writes a node took.
    pub proposed: u64,
    /// Writes acknowledged.
    pub acknowledged: u64,
    /// Of those, writes padded past a frame, which travelled in chunks (MEMB-6).
    pub large_acknowledged: u64,
    /// Writes refused by a node that did not lead.
    pub refused: u64,
    /// Distinct indices applied anywhere.
    pub applied: u64,
    /// Snapshots taken by the nodes (LOG-4).
    pub snapshots_taken: u64,
    /// Snapshots a follower received from a leader and installed.
    pub snapshots_installed: u64,
    /// Restarts that restored the machine from a durable snapshot.
    pub snapshots_restored: u64,
    /// InstallSnapshot chunks sent.
    pub snapshot_chunks: u64,
    /// Chunks a follower answered with the offset it expected instead (lost, duplicated or
    /// reordered chunks resumed).
    pub snapshot_resumes: u64,
    /// Reads answered at their read index (LOG-7).
    pub reads_answered: u64,
}

impl Simulation {
    /// Whether the nodes carry a replicated log.
    pub(super) fn has_log(&self) -> bool {
        self.config.log_enabled()
    }

    /// The next log event: an fsync completing, the client's next write, or (in the
    /// sessions family) a node's lease upkeep or a holder's action.
    pub(super) fn next_log_event(&self) -> Option<(Instant, LogEvent)> {
        if !self.has_log() && !self.hard_state_takes_time() {
            return None;
        }
        let mut best: Option<(Instant, LogEvent)> = self
            .log_book
            .next_write
            .map(|at| (at, LogEvent::ClientWrite));
        for (index, node) in self.nodes.iter().enumerate() {
            if node.driver.is_none() {
                continue;
            }
            if let Some(&(due, _)) = node.log.syncs.front() {
                if best.is_none_or(|(at, _)| due < at) {
                    best = Some((due, LogEvent::Sync(index)));
                }
            }
        }
        if let Some((due, target)) = self.next_session_event() {
            if best.is_none_or(|(at, _)| due < at) {
                best = Some((due, LogEvent::Sessions(target)));
            }
        }
        best
    }

    /// Carries out the log event chosen by [`Simulation::next_log_event`].
    pub(super) fn log_event(&mut self, event: LogEvent) {
        match event {
            LogEvent::Sync(index) => self.complete_sync(index),
            LogEvent::ClientWrite => self.client_write(),
            LogEvent::Sessions(target) => self.session_event(target),
        }
    }

    /// Node `index`'s oldest pending fsync completes: the write is durable, and its driver
    /// learns it (unless the control's driver told it at write time already).
    fn complete_sync(&mut self, index: usize) {
        let Some((_, pending)) = self.nodes[index].log.syncs.pop_front() else {
            return;
        };
        match pending {
            PendingSync::Hard { number, records } => {
                self.make_durable(index, records);
                if !self.log_book.send_before_hard_sync {
                    self.report_written(index, Written::Hard(number));
                }
            }
            PendingSync::Snapshot(snapshot) => {
                // Saved whole when its sync completes (temp file, fsync, rename): a crash
                // before loses it, never half of it.
                let last = snapshot.last;
                let _ = self.nodes[index].log.storage.save_snapshot(snapshot);
                self.report_written(index, Written::Snapshot(last));
            }
            PendingSync::Entries(last) => {
                // A sync covers every write before it; later writes become durable too, which
                // only makes the model kinder than a disk that loses them. The core is told
                // of `last` only.
                let _ = self.nodes[index].log.storage.sync();
                if !self.log_book.report_before_fsync {
                    self.report_written(index, Written::Entries(last));
                }
            }
        }
        self.pump(index, None);
    }

    /// Node `index` asks for an fsync of what it wrote: it completes a random disk delay
    /// later, in order with its earlier ones (the WalActor's one thread does them in turn).
    pub(super) fn sync_later(&mut self, index: usize, pending: PendingSync) {
        let now = self.now;
        let max_delay = self.config.disk_delay;
        let node = &mut self.nodes[index];
        let due = node.log.next_sync_due(now, &mut self.rng, max_delay);
        node.log.syncs.push_back((due, pending));
    }

    /// The client writes a unique value through a random live node, or reads one register.
    fn client_write(&mut self) {
        let Some(interval) = self.config.client_interval else {
            self.log_book.next_write = None;
            return;
        };
        self.log_book.next_write = Some(self.now + interval);
        let alive = self.alive();
        if alive.is_empty() {
            return;
        }
        let index = alive[self.rng.below(alive.len() as u64) as usize];
        let key = self.rng.below(u64::from(REGISTERS)) as u8;
        let read = self.rng.chance(0.4);
        self.log_book.next_value += 1;
        let value = self.log_book.next_value;
        let now = self.now;
        if read && self.log_book.stale_reads {
            // The control: this node's own copy, however far behind it is.
            let seen = self.nodes[index].log.machine.registers[usize::from(key)];
            self.log_book.history.push(Operation {
                key,
                kind: OperationKind::Read(Some(seen)),
                invoked: now,
                answered: Some(now),
            });
            return;
        }
        // Drawn for reads as well, so that a seed's draws do not depend on what it drew.
        let data = self.write_payload(key, value);
        let operation = self.log_book.history.len();
        let has_log = self.nodes[index]
            .driver
            .as_mut()
            .is_some_and(|driver| driver.election_mut().replicated_log().is_some());
        if !has_log {
            return;
        }
        if read {
            self.client_read(index, key, operation);
        } else {
            self.client_propose(index, key, value, data, operation);
        }
        self.pump(index, None);
    }

    /// The bytes of a write of `value` to register `key`; now and then several frames long.
    fn write_payload(&mut self, key: u8, value: u64) -> Vec<u8> {
        let mut data = vec![WRITE, key];
        data.extend_from_slice(&value.to_be_bytes());
        if self.rng.chance(LARGE_WRITES) {
            // MEMB-6: a write several frames long, sent in chunks; its bytes follow from the
            // value, so a chunk misplaced anywhere shows in the digests.
            let frame = match &self.config.election {
                super::ElectionConfig::Raft(raft) => raft.log.map(|log| log.max_append_bytes),
                _ => None,
            };
            let frame = frame.unwrap_or(1024);
            let len = frame * self.rng.between(1, 5) as usize;
            data.extend((0..len).map(|n| (value as usize).wrapping_add(n * 31) as u8));
        }
        data
    }

    /// LOG-7: a linearizable read of register `key` through node `index`, history entry
    /// `operation`. The control skips the heartbeat round only: a deposed leader that has not
    /// heard of its successor answers from its own commit index.
    fn client_read(&mut self, index: usize, key: u8, operation: usize) {
        let now = self.now;
        let node = &mut self.nodes[index];
        let Some(driver) = node.driver.as_mut() else {
            return;
        };
        let taken = if self.log_book.unconfirmed_reads {
            match unconfirmed_read_index(driver) {
                Some(index) => {
                    node.log.reads_ready.push((index, operation));
                    Ok(())
                }
                None => Err(()),
            }
        } else {
            self.log_book.next_read += 1;
            let id = ReadId(self.log_book.next_read);
            let taken = driver.request_read(now, id).map_err(|_| ());
            if taken.is_ok() {
                node.log.reads.insert(id, operation);
            }
            taken
        };
        match taken {
            Ok(()) => self.log_book.history.push(Operation {
                key,
                kind: OperationKind::Read(None),
                invoked: now,
                answered: None,
            }),
            Err(()) => self.log_book.refused += 1,
        }
    }

    /// Proposes `data`, a write of `value` to register `key`, through node `index`, history
    /// entry `operation`.
    fn client_propose(
        &mut self,
        index: usize,
        key: u8,
        value: u64,
        data: Vec<u8>,
        operation: usize,
    ) {
        let now = self.now;
        let proposed = self.nodes[index]
            .driver
            .as_mut()
            .and_then(|driver| driver.election_mut().replicated_log())
            .map(|mut log| log.propose(now, data.clone()));
        match proposed.unwrap_or(Err(conclave_core::raft::ProposeError::ShuttingDown)) {
            Ok(position) => {
                self.log_book.history.push(Operation {
                    key,
                    kind: OperationKind::Write(value),
                    invoked: now,
                    answered: None,
                });
                self.nodes[index]
                    .log
                    .proposals
                    .insert(position.index, (position.term, data, operation));
            }
            Err(_) => self.log_book.refused += 1,
        }
    }

    /// Writes to node `index`'s storage. A hard-state write is durable at once without a log
    /// (the WalActor's fsync is not modelled there); with one — and every log write — it is
    /// durable when its fsync completes, a disk delay later, and lost with a crash before.
    pub(super) fn write(&mut self, index: usize, write: DiskWrite) {
        match write {
            DiskWrite::Hard { number, records } => {
                if self.hard_state_takes_time() {
                    self.sync_later(index, PendingSync::Hard { number, records });
                    if self.log_book.send_before_hard_sync {
                        // The control's driver lets what waits leave before the fsync.
                        self.report_written(index, Written::Hard(number));
                    }
                } else {
                    self.make_durable(index, records);
                    self.report_written(index, Written::Hard(number));
                }
            }
            DiskWrite::Entries(write) => {
                let last = write.last();
                let _ = self.nodes[index].log.storage.append_entries(&write.entries);
                self.sync_later(index, PendingSync::Entries(last));
                if self.log_book.report_before_fsync {
                    // The control's driver tells the core at write time, before the fsync.
                    self.report_written(index, Written::Entries(last));
                }
            }
            DiskWrite::Snapshot { snapshot, origin } => {
                if origin == SnapshotOrigin::Taken {
                    self.log_book.snapshots_taken += 1;
                }
                self.sync_later(index, PendingSync::Snapshot(snapshot));
            }
        }
    }

    /// LOG-4: node `index`'s machine takes a leader's snapshot.
    pub(super) fn install(&mut self, index: usize, snapshot: &Snapshot) {
        self.log_book.snapshots_installed += 1;
        self.restore_machine(index, snapshot);
    }

    /// Node `index` applies committed entries: each is checked against what every other
    /// node applied at its index, and the client's writes through it are answered.
    pub(super) fn apply(&mut self, index: usize, entries: Vec<LogEntry>) {
        let Some(election) = self.nodes[index].driver.as_ref().map(Driver::election) else {
            return;
        };
        let term = election.term();
        let is_leader = election.role() == Role::Leader;
        for entry in entries {
            self.note_applied(index, &entry, term, is_leader);
        }
        self.answer_ready_reads(index);
    }

    /// LOG-7: the driver's answer to a read: served from the machine as it is now (everything
    /// up to its read index applied), or failed — a failed read stays unanswered in the
    /// history: it says nothing.
    pub(super) fn answer_read(&mut self, index: usize, id: ReadId, serve: bool) {
        let Some(operation) = self.nodes[index].log.reads.remove(&id) else {
            return;
        };
        if serve {
            let applied = self.nodes[index].log.machine.applied;
            self.nodes[index].log.reads_ready.push((applied, operation));
            self.answer_ready_reads(index);
        }
    }

    /// A node that lost its entries with its WAL has them back once its log caught up with
    /// a leader's.
    pub(super) fn note_log_caught_up(&mut self, index: usize) {
        let node = &mut self.nodes[index];
        if !node.log.lost {
            return;
        }
        if let Some(Election::Raft(raft)) = node.driver.as_ref().map(Driver::election) {
            node.log.lost = raft.is_catching_up() || raft.is_abstaining();
        }
    }

    /// LOG-7: answers the reads whose read index node `index`'s machine has applied, with the
    /// registers as the machine has them now.
    fn answer_ready_reads(&mut self, index: usize) {
        let now = self.now;
        let log = &mut self.nodes[index].log;
        let machine = log.machine;
        let history = &mut self.log_book.history;
        let answered = &mut self.log_book.reads_answered;
        log.reads_ready.retain(|&(read_index, operation)| {
            if read_index > machine.applied {
                return true;
            }
            *answered += 1;
            if let Some(op) = history.get_mut(operation) {
                op.answered = Some(now);
                op.kind = OperationKind::Read(Some(machine.registers[usize::from(op.key)]));
            }
            false
        });
    }

    /// Snapshots node `index`'s machine if the core says one is due: the image goes to the
    /// core and, after a disk delay, to storage. Whether the core took one.
    pub(super) fn take_due_snapshot(&mut self, index: usize) -> bool {
        let now = self.now;
        let node = &mut self.nodes[index];
        let Some(driver) = node.driver.as_mut() else {
            return false;
        };
        let Some(last) = driver.snapshot_due() else {
            return false;
        };
        if node.log.machine.applied != last.index {
            let id = node.id;
            self.log_book.violation.get_or_insert(format!(
                "{id}'s core asked for a snapshot at index {} but its machine applied {}",
                last.index, node.log.machine.applied
            ));
            return false;
        }
        let snapshot = Snapshot {
            last,
            data: node.log.machine.encode().into(),
            config: None,
        };
        driver.snapshot_taken(now, snapshot)
    }

    /// Replaces node `index`'s machine with a snapshot's, checking it is the machine every
    /// other node had at that index.
    fn restore_machine(&mut self, index: usize, snapshot: &Snapshot) {
        let id = self.nodes[index].id;
        let Some(machine) = SimMachine::decode(&snapshot.data) else {
            self.log_book.violation.get_or_insert(format!(
                "{id} got a snapshot at index {} that does not decode",
                snapshot.last.index
            ));
            return;
        };
        if machine.applied != snapshot.last.index {
            self.log_book.violation.get_or_insert(format!(
                "{id} got a snapshot at index {} of a machine at index {}",
                snapshot.last.index, machine.applied
            ));
        }
        self.check_digest(index, machine.applied, machine.digest);
        let log = &mut self.nodes[index].log;
        log.machine = machine;
        // Writes the snapshot covers were not seen applied here: their outcome is unknown to
        // this node, as to a client whose leader was replaced.
        log.proposals.retain(|&at, _| at > machine.applied);
    }

    /// At a (re)start: the machine restored from the durable snapshot, if any.
    pub(super) fn restore_machine_at_boot(&mut self, index: usize) {
        if !self.has_log() {
            return;
        }
        self.nodes[index].log.machine = SimMachine::default();
        if let Some(snapshot) = self.nodes[index].log.storage.durable().snapshot.clone() {
            self.log_book.snapshots_restored += 1;
            self.restore_machine(index, &snapshot);
        }
    }

    /// The digest a machine has after `applied` must be the one every machine had there.
    fn check_digest(&mut self, index: usize, applied: u64, digest: u64) {
        if applied == 0 {
            return;
        }
        let first = *self.log_book.digests.entry(applied).or_insert(digest);
        if first != digest {
            let id = self.nodes[index].id;
            self.log_book.violation.get_or_insert(format!(
                "{id}'s state machine at index {applied} differs from the one other nodes had                  there"
            ));
        }
    }

    /// Counts a snapshot message a node sends (LOG-4), for the reports.
    pub(super) fn note_snapshot_message(&mut self, message: &conclave_core::raft::RaftMessage) {
        match message {
            conclave_core::raft::RaftMessage::InstallSnapshot(_) => {
                self.log_book.snapshot_chunks += 1
            }
            conclave_core::raft::RaftMessage::SnapshotResp(response) if !response.success => {
                self.log_book.snapshot_resumes += 1;
            }
            _ => {}
        }
    }

    /// State machine safety at every apply, and the client's acknowledgements.
    fn note_applied(&mut self, index: usize, entry: &LogEntry, term: u64, is_leader: bool) {
        let id = self.nodes[index].id;
        let machine = &mut self.nodes[index].log.machine;
        if let Err(problem) = machine.apply(entry) {
            self.log_book
                .violation
                .get_or_insert(format!("{id}'s state machine {problem}"));
        }
        let (applied, digest) = (machine.applied, machine.digest);
        self.check_digest(index, applied, digest);
        match self.log_book.applied.get(&entry.index) {
            Some((first_term, first_data)) => {
                if (*first_term, first_data) != (entry.term, &entry.data) {
                    self.log_book.violation.get_or_insert(format!(
                        "{id} applied term {} at index {}, where term {first_term} was applied \
                         before",
                        entry.term, entry.index
                    ));
                }
            }
            None => {
                self.log_book
                    .applied
                    .insert(entry.index, (entry.term, entry.data.clone()));
            }
        }
        if let Some((proposed_term, data, operation)) =
            self.nodes[index].log.proposals.remove(&entry.index)
        {
            if proposed_term == entry.term && data == entry.data {
                // The node that took the operation answers the client now; it led when it
                // took it, and acknowledges in the term it holds now.
                let _ = is_leader;
                self.log_book.acknowledged.push((
                    LogPosition::new(entry.term, entry.index),
                    data,
                    term,
                ));
                let now = self.now;
                if let Some(op) = self.log_book.history.get_mut(operation) {
                    op.answered = Some(now);
                }
            }
        }
        self.session_apply(index, entry);
        self.observations.push(Observation::Applied {
            node: index,
            index: entry.index,
        });
    }

    /// Leader completeness, checked when a node takes office: it holds every write a leader
    /// of an earlier term acknowledged.
    pub(super) fn check_new_leader_log(&mut self, index: usize) {
        let Some(raft) = self.raft(index) else {
            return;
        };
        let term = raft.term();
        let id = raft.id();
        for (position, _, acked_in) in &self.log_book.acknowledged {
            if *acked_in >= term {
                continue;
            }
            if position.index <= raft.log_first_index() {
                // In its snapshot: the digests vouch for what the snapshot carries.
                continue;
            }
            if raft.log_term_at(position.index) != Some(position.term) {
                self.log_book.violation.get_or_insert(format!(
                    "{id} became leader of term {term} without the write acknowledged at index \
                     {} (term {}) in term {acked_in}",
                    position.index, position.term
                ));
                return;
            }
        }
    }

    /// A broken log property found in the last step.
    pub(super) fn take_log_violation(&mut self) -> Option<String> {
        self.log_book.violation.take()
    }

    /// What the client did so far.
    pub fn log_counts(&self) -> LogCounts {
        LogCounts {
            proposed: self.log_book.next_value - self.log_book.refused,
            acknowledged: self.log_book.acknowledged.len() as u64,
            large_acknowledged: self
                .log_book
                .acknowledged
                .iter()
                .filter(|(_, data, _)| data.len() > SMALL_WRITE_LEN)
                .count() as u64,
            refused: self.log_book.refused,
            applied: self.log_book.applied.len() as u64,
            snapshots_taken: self.log_book.snapshots_taken,
            snapshots_installed: self.log_book.snapshots_installed,
            snapshots_restored: self.log_book.snapshots_restored,
            snapshot_chunks: self.log_book.snapshot_chunks,
            snapshot_resumes: self.log_book.snapshot_resumes,
            reads_answered: self.log_book.reads_answered,
        }
    }

    /// The control run: a driver that reports each write durable when it is written, before
    /// its fsync completes, so a crash can take back what the core counted. The checks must
    /// then find a lost acknowledged write; without this switch they never may.
    pub fn set_report_before_fsync(&mut self, on: bool) {
        self.log_book.report_before_fsync = on;
    }

    /// The control run for RAFT-1 with a disk that takes time (issue 16, item 3): the
    /// messages after a hard-state write leave at once, before its fsync completes; a crash
    /// in between then forgets a vote that was granted, or a term that was acknowledged.
    pub fn set_send_before_hard_sync(&mut self, on: bool) {
        self.log_book.send_before_hard_sync = on;
    }

    /// The control run for linearizability: reads answered at once from a random node's own
    /// copy instead of through the log. A follower that lags behind then returns a value
    /// older than one a finished write put, and the check must find it.
    pub fn set_stale_reads(&mut self, on: bool) {
        self.log_book.stale_reads = on;
    }

    /// The control run for the read index's heartbeat round: a node that believes it leads
    /// answers a read at its commit index at once, without confirming that it still leads. A
    /// leader cut off from the majority keeps answering until it hears of its successor (or
    /// check-quorum deposes it), so a read there misses a write its successor acknowledged,
    /// and the check must find it.
    pub fn set_unconfirmed_reads(&mut self, on: bool) {
        self.log_book.unconfirmed_reads = on;
    }

    /// LOG-7: whether the client's register history is linearizable.
    pub fn check_linearizable(&self) -> Result<(), SimFailure> {
        check(&self.log_book.history).map_err(|detail| self.failure("linearizability", detail))
    }

    /// Starts the client's writes (with [`SimConfig::client_interval`](super::SimConfig::client_interval)) or stops them.
    pub fn set_client_writes(&mut self, on: bool) {
        self.log_book.next_write =
            (on && self.config.client_interval.is_some()).then_some(self.now);
    }

    /// Once faults have stopped: waits (up to `bound`) until every live node has committed
    /// and applied every acknowledged write, then checks log matching over the live nodes'
    /// logs and that each holds every acknowledged write where it was acknowledged.
    pub fn await_log_converged(&mut self, bound: Duration) -> Result<(), SimFailure> {
        // Writes taken before the client stopped are still being acknowledged meanwhile.
        let highest = |sim: &Simulation| {
            sim.log_book
                .acknowledged
                .iter()
                .map(|(position, _, _)| position.index)
                .max()
                .unwrap_or(0)
        };
        let deadline = self.now + bound;
        let caught_up = self.run_until_condition(deadline, |sim| {
            let highest = highest(sim);
            sim.alive().iter().all(|&index| {
                sim.raft(index)
                    .and_then(|raft| raft.log_status())
                    .is_some_and(|status| status.applied >= highest)
            })
        })?;
        let highest = highest(self);
        if caught_up.is_none() {
            let behind: Vec<String> = self
                .alive()
                .iter()
                .map(|&index| {
                    let applied = self
                        .raft(index)
                        .and_then(|raft| raft.log_status())
                        .map_or(0, |status| status.applied);
                    format!("{} applied {applied}", self.id(index))
                })
                .collect();
            return Err(self.failure(
                "log converges",
                format!(
                    "within {bound:?} of healing, not every live node applied index {highest}: \
                     {}; {}",
                    behind.join(", "),
                    crate::sim::invariants::liveness::describe(self)
                ),
            ));
        }
        let alive = self.alive();
        self.check_acknowledged_held(&alive)?;
        self.check_log_matching(&alive)
    }

    /// Every live node holds every acknowledged write where it was acknowledged (or has
    /// compacted it into its snapshot).
    fn check_acknowledged_held(&self, alive: &[usize]) -> Result<(), SimFailure> {
        for &index in alive {
            let raft = self.raft(index).expect("alive");
            for (position, _, _) in &self.log_book.acknowledged {
                if position.index <= raft.log_first_index() {
                    // Compacted into its snapshot, whose machine the digests checked.
                    continue;
                }
                if raft.log_term_at(position.index) != Some(position.term) {
                    return Err(self.failure(
                        "acknowledged writes are durable",
                        format!(
                            "{} does not hold the write acknowledged at index {} (term {}): it \
                             holds term {:?} there, its log ends at {:?}, {:?}",
                            raft.id(),
                            position.index,
                            position.term,
                            raft.log_term_at(position.index),
                            raft.log_last(),
                            raft.log_status()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Log matching (Figure 3): where two live nodes' logs hold an entry of the same index and
    /// term, they hold the same entries up to it.
    fn check_log_matching(&self, alive: &[usize]) -> Result<(), SimFailure> {
        for (a_pos, &a) in alive.iter().enumerate() {
            for &b in &alive[a_pos + 1..] {
                let (ra, rb) = (self.raft(a).expect("alive"), self.raft(b).expect("alive"));
                let top = ra.log_last().index.min(rb.log_last().index);
                let from = ra.log_first_index().max(rb.log_first_index());
                let mut matched_above = false;
                for i in (from..=top).rev() {
                    let same = ra.log_term_at(i) == rb.log_term_at(i);
                    if same {
                        matched_above = true;
                    } else if matched_above {
                        return Err(self.failure(
                            "log matching",
                            format!(
                                "{} and {} agree on a later entry but differ at index {i}",
                                ra.id(),
                                rb.id()
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The control's read index: the commit index of a node that believes it leads and has
/// committed an entry of its term, with no round confirming it still leads.
fn unconfirmed_read_index(driver: &Driver) -> Option<u64> {
    match driver.election() {
        Election::Raft(raft) if raft.is_leader() => raft
            .log_status()
            .map(|status| status.commit)
            .filter(|&commit| raft.log_term_at(commit) == Some(raft.term())),
        _ => None,
    }
}
