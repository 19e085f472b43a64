//! The state machine's values as the API shows them: snake_case states, tagged failures and
//! commands, one shape per object (conclave-api's types). The state machine's own serde form
//! is its log and snapshot format and never reaches a client.

use conclave_api as api;
use conclave_statemachine as machine;

/// A key as the API shows it.
pub(crate) fn key_value(kv: &machine::KeyValue) -> api::KeyValue {
    api::KeyValue {
        key: kv.key.clone(),
        value: kv.value.clone(),
        revision: kv.mod_revision,
        create_revision: kv.create_revision,
        version: kv.version,
        session: kv.session.map(|session| session.0),
    }
}

/// A job's state without its details.
pub(crate) fn job_state(state: &machine::JobState) -> api::JobState {
    match state.kind() {
        machine::JobStateKind::Ready => api::JobState::Ready,
        machine::JobStateKind::Claimed => api::JobState::Claimed,
        machine::JobStateKind::Done => api::JobState::Done,
        machine::JobStateKind::Dead => api::JobState::Dead,
    }
}

/// The state machine's state kind of an API state (`GET /v1/jobs?state=`).
pub(crate) fn state_kind(state: api::JobState) -> machine::JobStateKind {
    match state {
        api::JobState::Ready => machine::JobStateKind::Ready,
        api::JobState::Claimed => machine::JobStateKind::Claimed,
        api::JobState::Done => machine::JobStateKind::Done,
        api::JobState::Dead => machine::JobStateKind::Dead,
    }
}

/// A job as the API shows it.
pub(crate) fn job(job: &machine::Job) -> api::Job {
    let (worker, lease_until_unix_ms, lease_ms, session) = match &job.state {
        machine::JobState::Claimed {
            worker,
            session: Some(session),
            ..
        } => (Some(worker.clone()), None, None, Some(session.0)),
        machine::JobState::Claimed {
            worker,
            lease_until_unix_ms,
            lease_ms,
            ..
        } => (
            Some(worker.clone()),
            Some(*lease_until_unix_ms),
            // A claim older than recorded leases counts the default one.
            Some(if *lease_ms == 0 {
                machine::UNRECORDED_LEASE_MS
            } else {
                *lease_ms
            }),
            None,
        ),
        _ => (None, None, None, None),
    };
    api::Job {
        id: job.id.0,
        queue: job.queue.clone(),
        payload: job.payload.clone(),
        state: job_state(&job.state),
        attempts: job.attempts,
        max_attempts: job.max_attempts,
        worker,
        lease_until_unix_ms,
        lease_ms,
        session,
        last_failure: job.last_failure.as_ref().map(|failure| match failure {
            machine::AttemptFailure::LeaseExpired { worker } => api::AttemptFailure::LeaseExpired {
                worker: worker.clone(),
            },
            machine::AttemptFailure::Nacked { worker, reason } => api::AttemptFailure::Nacked {
                worker: worker.clone(),
                reason: reason.clone(),
            },
            machine::AttemptFailure::SessionEnded { worker, session } => {
                api::AttemptFailure::SessionEnded {
                    worker: worker.clone(),
                    session: session.0,
                }
            }
        }),
    }
}

/// A command of the log as the API shows it.
pub(crate) fn log_command(command: &machine::Command) -> api::LogCommand {
    let write = match &command.write {
        machine::Write::Kv(write) => kv_write(write),
        machine::Write::Jobs(write) => job_write(write),
        machine::Write::Sessions(write) => session_write(write),
    };
    api::LogCommand {
        write,
        request_id: command.request_id.clone(),
    }
}

fn kv_write(write: &machine::KvCommand) -> api::LogWrite {
    use machine::KvCommand;
    match write {
        KvCommand::Put {
            key,
            value,
            if_revision,
            if_value,
            session,
        } => api::LogWrite::KvPut {
            key: key.clone(),
            value: value.clone(),
            if_revision: *if_revision,
            if_value: if_value.clone(),
            session: session.map(|session| session.0),
        },
        KvCommand::Delete { key, if_revision } => api::LogWrite::KvDelete {
            key: key.clone(),
            if_revision: *if_revision,
        },
    }
}

fn job_write(write: &machine::JobCommand) -> api::LogWrite {
    use machine::JobCommand;
    match write {
        JobCommand::Enqueue {
            queue,
            payload,
            max_attempts,
        } => api::LogWrite::JobEnqueue {
            queue: queue.clone(),
            payload: payload.clone(),
            max_attempts: *max_attempts,
        },
        JobCommand::Claim {
            queue,
            worker,
            lease_ms,
            now_unix_ms,
            session,
        } => api::LogWrite::JobClaim {
            queue: queue.clone(),
            worker: worker.clone(),
            lease_ms: *lease_ms,
            now_unix_ms: *now_unix_ms,
            session: session.map(|session| session.0),
        },
        JobCommand::Ack { job, worker } => api::LogWrite::JobAck {
            job: job.0,
            worker: worker.clone(),
        },
        JobCommand::Nack {
            job,
            worker,
            reason,
        } => api::LogWrite::JobNack {
            job: job.0,
            worker: worker.clone(),
            reason: reason.clone(),
        },
        JobCommand::ExpireLeases { now_unix_ms } => api::LogWrite::JobExpireLeases {
            now_unix_ms: *now_unix_ms,
        },
        JobCommand::Retry { job } => api::LogWrite::JobRetry { job: job.0 },
        JobCommand::Purge { job } => api::LogWrite::JobPurge { job: job.0 },
        JobCommand::PurgeDead { queue } => api::LogWrite::JobPurgeDead {
            queue: queue.clone(),
        },
        JobCommand::ExpireClaims { claims } => api::LogWrite::JobExpireClaims {
            claims: claims
                .iter()
                .map(|claim| api::ExpiredClaim {
                    job: claim.job.0,
                    claimed_at: claim.claimed_at,
                })
                .collect(),
        },
    }
}

fn session_write(write: &machine::SessionCommand) -> api::LogWrite {
    use machine::SessionCommand;
    match write {
        SessionCommand::Grant {
            ttl_ms,
            name,
            max_claims,
        } => api::LogWrite::SessionGrant {
            ttl_ms: *ttl_ms,
            name: name.clone(),
            max_claims: *max_claims,
        },
        SessionCommand::Revoke { session } => api::LogWrite::SessionRevoke { session: session.0 },
        SessionCommand::Expire { sessions } => api::LogWrite::SessionExpire {
            sessions: sessions.iter().map(|session| session.0).collect(),
        },
    }
}

/// An entry of the log as the API shows it.
pub(crate) fn log_entry(entry: &conclave_protocol::LogEntry) -> api::LogEntry {
    use conclave_protocol::EntryKind;
    let (kind, command) = match entry.kind {
        EntryKind::Noop => (api::LogEntryKind::Noop, None),
        // MEMB-1: nothing proposes configuration entries through the API yet; they carry no
        // command, so they show as raft's own entries until the API gets a kind for them.
        EntryKind::Config => (api::LogEntryKind::Noop, None),
        // Read barriers: older versions wrote one per linearizable read, and logs and
        // snapshots written then still hold them.
        EntryKind::Command if entry.data.is_empty() => (api::LogEntryKind::Barrier, None),
        EntryKind::Command => match machine::Command::decode(&entry.data) {
            Ok(command) => (api::LogEntryKind::Command, Some(log_command(&command))),
            Err(_) => (api::LogEntryKind::Invalid, None),
        },
    };
    api::LogEntry {
        index: entry.index,
        term: entry.term,
        kind,
        command,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// No Rust variant name reaches a client: a job's state is a snake_case word, its failure
    /// a tagged object, and a claimed job names its worker and lease beside its state.
    #[test]
    fn a_job_is_snake_case_and_tagged() {
        let claimed = machine::Job {
            id: machine::JobId(7),
            queue: "mail".into(),
            payload: "send 1".into(),
            max_attempts: 5,
            attempts: 2,
            state: machine::JobState::Claimed {
                worker: "w2".into(),
                lease_until_unix_ms: 1_700_000_000_000,
                lease_ms: 30_000,
                claimed_at: 12,
                session: None,
            },
            last_failure: Some(machine::AttemptFailure::Nacked {
                worker: "w1".into(),
                reason: Some("smtp down".into()),
            }),
        };
        assert_eq!(
            serde_json::to_value(job(&claimed)).unwrap(),
            json!({
                "id": 7, "queue": "mail", "payload": "send 1", "state": "claimed",
                "attempts": 2, "max_attempts": 5, "worker": "w2",
                "lease_until_unix_ms": 1_700_000_000_000u64, "lease_ms": 30_000,
                "session": null,
                "last_failure": {"kind": "nacked", "worker": "w1", "reason": "smtp down"},
            })
        );
        let dead = machine::Job {
            state: machine::JobState::Dead,
            last_failure: Some(machine::AttemptFailure::LeaseExpired {
                worker: "w2".into(),
            }),
            ..claimed
        };
        let json = serde_json::to_value(job(&dead)).unwrap();
        assert_eq!(json["state"], "dead");
        assert_eq!(json["worker"], serde_json::Value::Null);
        assert_eq!(json["lease_ms"], serde_json::Value::Null);
        assert_eq!(
            json["last_failure"],
            json!({"kind": "lease_expired", "worker": "w2"})
        );
        // SESS-2: a claim held by a session names it, and shows no lease.
        let held = machine::Job {
            state: machine::JobState::Claimed {
                worker: "w3".into(),
                lease_until_unix_ms: u64::MAX,
                lease_ms: 30_000,
                claimed_at: 14,
                session: Some(machine::SessionId(4)),
            },
            last_failure: Some(machine::AttemptFailure::SessionEnded {
                worker: "w2".into(),
                session: machine::SessionId(3),
            }),
            ..dead
        };
        let json = serde_json::to_value(job(&held)).unwrap();
        assert_eq!(json["session"], 4);
        assert_eq!(json["lease_until_unix_ms"], serde_json::Value::Null);
        assert_eq!(json["lease_ms"], serde_json::Value::Null);
        assert_eq!(
            json["last_failure"],
            json!({"kind": "session_ended", "worker": "w2", "session": 3})
        );
    }

    /// A command of the log is one object tagged by `type`, with its request id beside it.
    #[test]
    fn a_log_command_is_tagged_by_type() {
        let command = machine::Command::new(machine::Write::Kv(machine::KvCommand::Put {
            key: "color".into(),
            value: "red".into(),
            if_revision: Some(0),
            if_value: None,
            session: None,
        }))
        .with_request_id("r1");
        assert_eq!(
            serde_json::to_value(log_command(&command)).unwrap(),
            json!({
                "type": "kv_put", "key": "color", "value": "red", "if_revision": 0,
                "if_value": null, "session": null, "request_id": "r1",
            })
        );
        let purge = machine::Command::new(machine::Write::Jobs(machine::JobCommand::PurgeDead {
            queue: None,
        }));
        assert_eq!(
            serde_json::to_value(log_command(&purge)).unwrap(),
            json!({"type": "job_purge_dead", "queue": null, "request_id": null})
        );
    }
}
