//! The state machine a node runs on its replicated log (LOG-4, LOG-5, LOG-6): conclave-statemachine's
//! [`ClusterState`] — the key-value store of cluster facts and seed 004's job queue — as the
//! ElectionActor's [`LogMachine`], and the JSON its writes answer with.
//!
//! Every committed entry is applied, in order: a client's command, a leader's no-op and a
//! read barrier (an entry without data, which older versions wrote for linearizable reads)
//! alike, so that the state's applied index is the log's.
//! A write's answer is `{"kv": <outcome>}` or `{"jobs": <outcome>}`, with `"replayed": true`
//! when its request id was applied before (LOG-6: the first answer, nothing changed), or
//! `{"error": ...}` for an entry the state refused; the admin API turns it into its HTTP
//! answer.

use conclave_protocol::{EntryKind, LogEntry};
use conclave_statemachine::{
    Applied, ClusterState, Command, JobCommand, JobStateKind, Outcome, StateMachine, Write,
};
use serde_json::{Value, json};
use tracing::warn;

use crate::election::{LogMachine, MachineError};

/// The built-in state machine of a node with `[log] enabled`.
#[derive(Debug, Default)]
pub struct ClusterMachine {
    state: ClusterState,
}

impl ClusterMachine {
    /// An empty state: a node that replays its log from the start.
    pub fn new() -> Self {
        Self::default()
    }

    /// The state a snapshot holds (LOG-4): a node that starts from its durable snapshot and
    /// replays the entries after it.
    pub fn restored(snapshot: &[u8]) -> Result<Self, MachineError> {
        let mut machine = Self::new();
        machine.restore(snapshot)?;
        Ok(machine)
    }

    /// The state, for reads.
    pub fn state(&self) -> &ClusterState {
        &self.state
    }
}

impl LogMachine for ClusterMachine {
    fn apply(&mut self, entry: &LogEntry) -> Value {
        let applied = if entry.kind == EntryKind::Noop || entry.data.is_empty() {
            self.state.apply_noop(entry.index)
        } else {
            self.state.apply(entry.index, &entry.data)
        };
        answer(applied)
    }

    fn upkeep(&self, now_unix_ms: u64) -> Option<Vec<u8>> {
        let lapsed = self
            .state
            .jobs()
            .list(JobStateKind::Claimed)
            .iter()
            .any(|job| match &job.state {
                conclave_statemachine::JobState::Claimed {
                    lease_until_unix_ms,
                    ..
                } => *lease_until_unix_ms <= now_unix_ms,
                _ => false,
            });
        if !lapsed {
            return None;
        }
        Command::new(Write::Jobs(JobCommand::ExpireLeases { now_unix_ms }))
            .encode()
            .ok()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn snapshot(&self) -> Result<Vec<u8>, MachineError> {
        Ok(self.state.snapshot()?)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), MachineError> {
        Ok(self.state.restore(snapshot)?)
    }

    fn applied_index(&self) -> u64 {
        self.state.applied_index()
    }
}

/// The JSON answer of one apply.
fn answer(applied: Applied) -> Value {
    match applied {
        Applied::Answered(outcome) => outcome_json(&outcome, false),
        Applied::Replayed(outcome) => outcome_json(&outcome, true),
        Applied::RequestIdInUse { request_id } => json!({
            "error": "request_id_in_use",
            "request_id": request_id,
        }),
        Applied::Noop => Value::Null,
        Applied::Rejected(error) => {
            warn!(%error, "a log entry is not a valid command; applied as a no-op");
            json!({ "error": "rejected", "reason": error.to_string() })
        }
        Applied::NotNext { index, applied } => {
            // The log hands out every entry once, in order; this would be a bug in the node.
            warn!(
                index,
                applied, "a log entry arrived out of order at the state machine"
            );
            json!({ "error": "not_next", "index": index, "applied": applied })
        }
    }
}

fn outcome_json(outcome: &Outcome, replayed: bool) -> Value {
    let mut value = match outcome {
        Outcome::Kv(kv) => json!({ "kv": kv }),
        Outcome::Jobs(jobs) => json!({ "jobs": jobs }),
    };
    if replayed {
        value["replayed"] = Value::Bool(true);
    }
    value
}

/// Runs `read` on the node's [`ClusterMachine`]; `Null` if the machine is another.
pub fn read_cluster(machine: &dyn LogMachine, read: impl FnOnce(&ClusterState) -> Value) -> Value {
    machine
        .as_any()
        .downcast_ref::<ClusterMachine>()
        .map_or(Value::Null, |machine| read(machine.state()))
}
