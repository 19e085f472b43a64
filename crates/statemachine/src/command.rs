//! The commands a log entry carries (LOG-5, LOG-6): a [`Write`] to the key-value store or the
//! job queue, with an optional client request id, and their encoding into an entry's data.
//!
//! # Encoding
//!
//! An entry's data is one format byte ([`COMMAND_FORMAT`]) followed by the [`Command`] as
//! MessagePack with named fields (`rmp_serde::to_vec_named`). Entries stay in the log and in
//! WALs for as long as the cluster lives and are read by later builds, so names are worth
//! their bytes: a later build can add a field with a default, or a new variant at the end of
//! an enum, and still read old entries; anything else bumps the format byte. Enums are
//! externally tagged (`{"Kv": {"Put": {...}}}`). A test pins the bytes of every command.
//!
//! # Everything is in the command
//!
//! Applying must give the same result on every node, now and when a WAL is replayed years
//! later, so a command carries every input explicitly: the leader stamps the time
//! (`now_unix_ms`) into claims and lease expiries, and fills in the queue name and attempt
//! limit a client left out ([`DEFAULT_QUEUE`], [`DEFAULT_MAX_ATTEMPTS`]) rather than the state
//! machine defaulting them, so a default changed in a later build does not change what old
//! entries meant.
//!
//! Bounds are checked when encoding (the leader refuses a bad write before proposing it) and
//! again when decoding (every node refuses the same entries, whoever wrote them).

use serde::{Deserialize, Serialize};

use crate::error::{Error, InvalidCommand, Result};
use crate::jobs::{ClaimRef, JobId};
use crate::sessions::{
    MAX_SESSION_CLAIMS, MAX_SESSION_TTL_MS, MIN_SESSION_TTL_MS, SessionCommand, SessionId,
};

/// The format byte in front of every encoded command.
pub const COMMAND_FORMAT: u8 = 1;

/// The longest request id, in bytes.
pub const MAX_REQUEST_ID_LEN: usize = 128;
/// The longest key, in bytes.
pub const MAX_KEY_LEN: usize = 512;
/// The largest value, in bytes.
pub const MAX_VALUE_LEN: usize = 64 * 1024;
/// The longest queue or worker name, in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// The largest job payload, in bytes.
pub const MAX_PAYLOAD_LEN: usize = 64 * 1024;
/// The longest reason a worker gives for a nack, in bytes.
pub const MAX_REASON_LEN: usize = 1024;
/// The longest lease a claim may ask for: a day.
pub const MAX_LEASE_MS: u64 = 24 * 60 * 60 * 1000;
/// The most attempts a job may be given.
pub const MAX_ATTEMPTS_LIMIT: u32 = 1000;
/// The most claims or sessions one expiry entry names; the leader writes more entries for
/// more.
pub const MAX_EXPIRE_BATCH: usize = 1000;

/// The queue of a job whose client named none; filled in by the node, not by the state machine.
pub const DEFAULT_QUEUE: &str = "default";
/// The attempts a job gets when its client named none; filled in by the node.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// One log entry's command: a write, and the client's request id if it gave one (LOG-6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// The client's id for this write. A write whose id was applied already answers what that
    /// first apply answered and changes nothing; see [`ClusterState`](crate::ClusterState).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// What to change.
    pub write: Write,
}

/// A write to one of the built-in state machines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Write {
    /// To the key-value store of cluster facts.
    Kv(KvCommand),
    /// To the job queue.
    Jobs(JobCommand),
    /// About sessions (SESS-1); appended, as variants are encoded by name.
    Sessions(SessionCommand),
}

/// A write to the key-value store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvCommand {
    /// Sets `key` to `value`, if the comparisons given hold.
    Put {
        /// The key.
        key: String,
        /// The new value.
        value: String,
        /// The key's `mod_revision` must be this; `Some(0)`: the key must not exist.
        #[serde(default)]
        if_revision: Option<u64>,
        /// The key must exist with this value.
        #[serde(default)]
        if_value: Option<String>,
        /// The session the key goes with (SESS-2): deleted when it ends. A put without one
        /// unties the key from the session it had.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<SessionId>,
    },
    /// Removes `key`, if the comparison given holds.
    Delete {
        /// The key.
        key: String,
        /// The key's `mod_revision` must be this.
        #[serde(default)]
        if_revision: Option<u64>,
    },
}

/// A write to the job queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobCommand {
    /// Adds a ready job at the back of `queue`.
    Enqueue {
        /// The queue ([`DEFAULT_QUEUE`] when the client named none).
        queue: String,
        /// What the job is; opaque to the queue.
        payload: String,
        /// Claims the job gets before it is dead-lettered ([`DEFAULT_MAX_ATTEMPTS`] when the
        /// client named none).
        max_attempts: u32,
    },
    /// Gives the oldest ready job of `queue` to `worker`, for `lease_ms` on the clock of the
    /// leader (SESS-0), or for as long as `session` lives.
    Claim {
        /// The queue.
        queue: String,
        /// Who takes the job.
        worker: String,
        /// How long the worker may hold it before it can be given to another.
        lease_ms: u64,
        /// The leader's wall clock when it proposed the claim: shown with the job, never used
        /// to end the lease.
        now_unix_ms: u64,
        /// The session that holds the claim (SESS-2): the job is the worker's while the
        /// session lives, and ready again when it ends; `lease_ms` does not apply.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<SessionId>,
    },
    /// `worker` finished `job`: it is done and never runs again.
    Ack {
        /// The job.
        job: JobId,
        /// The worker that claimed it.
        worker: String,
    },
    /// `worker` gives `job` back: it is ready again, or dead if its attempts are used up.
    Nack {
        /// The job.
        job: JobId,
        /// The worker that claimed it.
        worker: String,
        /// Why, kept on the job.
        #[serde(default)]
        reason: Option<String>,
    },
    /// Written by leaders of earlier builds only, and still applied as they meant it: every
    /// claim whose `lease_until_unix_ms` is at or before `now_unix_ms` is taken back. A
    /// wall-clock comparison, so a leader whose clock ran ahead ended leases early; later
    /// leaders write [`JobCommand::ExpireClaims`].
    ExpireLeases {
        /// The leader's clock when it proposed the expiry.
        now_unix_ms: u64,
    },
    // The variants below were added after the ones above had been written to logs. Variants
    // are encoded by name, so new ones go here, at the end, and the ones above never change.
    /// An operator puts dead `job` back: ready at the front of its queue, its attempts reset to
    /// 0. Refused for a job that is not dead.
    Retry {
        /// The dead job.
        job: JobId,
    },
    /// An operator deletes dead `job`. Refused for a job that is not dead.
    Purge {
        /// The dead job.
        job: JobId,
    },
    /// An operator deletes every dead job of `queue`, or of every queue without one.
    PurgeDead {
        /// Only this queue's dead jobs; all of them when `None`.
        #[serde(default)]
        queue: Option<String>,
    },
    /// Written by the leader only (SESS-0): these claims' leases ran out on the leader's
    /// monotonic clock. A claim named that has ended already (acked, given back, or claimed
    /// again since: another `claimed_at`) is skipped; the others are taken back, their jobs
    /// ready again or dead if their attempts are used up.
    ExpireClaims {
        /// The claims, at most [`MAX_EXPIRE_BATCH`].
        claims: Vec<ClaimRef>,
    },
}

impl Command {
    /// A command without a request id.
    #[must_use]
    pub fn new(write: Write) -> Self {
        Self {
            request_id: None,
            write,
        }
    }

    /// The same command carrying the client's request id.
    #[must_use]
    pub fn with_request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self
    }

    /// The entry data for this command: [`COMMAND_FORMAT`], then MessagePack. A command that
    /// breaks a bound is refused here, so a leader never proposes one.
    pub fn encode(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let mut data = vec![COMMAND_FORMAT];
        rmp_serde::encode::write_named(&mut data, self).map_err(Error::EncodeCommand)?;
        Ok(data)
    }

    /// The command in an entry's data. Garbage, an unknown format and a command out of bounds
    /// are errors, never a panic.
    pub fn decode(data: &[u8]) -> Result<Self> {
        let Some((&COMMAND_FORMAT, body)) = data.split_first() else {
            return Err(Error::CommandFormat {
                found: data.first().copied(),
                expected: COMMAND_FORMAT,
            });
        };
        let command: Self = crate::codec::decode(body).map_err(|source| Error::DecodeCommand {
            len: data.len(),
            source,
        })?;
        command.validate()?;
        Ok(command)
    }

    /// Checks every bound of the command.
    pub fn validate(&self) -> Result<(), InvalidCommand> {
        if let Some(id) = &self.request_id {
            check_length("request id", id, MAX_REQUEST_ID_LEN)?;
        }
        match &self.write {
            Write::Kv(command) => validate_kv(command),
            Write::Jobs(command) => validate_jobs(command),
            Write::Sessions(command) => validate_sessions(command),
        }
    }
}

fn validate_kv(command: &KvCommand) -> Result<(), InvalidCommand> {
    match command {
        KvCommand::Put {
            key,
            value,
            if_value,
            ..
        } => {
            check_length("key", key, MAX_KEY_LEN)?;
            check_size("value", value, MAX_VALUE_LEN)?;
            if let Some(expected) = if_value {
                check_size("if_value", expected, MAX_VALUE_LEN)?;
            }
            Ok(())
        }
        KvCommand::Delete { key, .. } => check_length("key", key, MAX_KEY_LEN),
    }
}

fn validate_jobs(command: &JobCommand) -> Result<(), InvalidCommand> {
    match command {
        JobCommand::Enqueue {
            queue,
            payload,
            max_attempts,
        } => {
            check_length("queue", queue, MAX_NAME_LEN)?;
            check_size("payload", payload, MAX_PAYLOAD_LEN)?;
            check_range(
                "max_attempts",
                u64::from(*max_attempts),
                1,
                u64::from(MAX_ATTEMPTS_LIMIT),
            )
        }
        JobCommand::Claim {
            queue,
            worker,
            lease_ms,
            ..
        } => {
            check_length("queue", queue, MAX_NAME_LEN)?;
            check_length("worker", worker, MAX_NAME_LEN)?;
            check_range("lease_ms", *lease_ms, 1, MAX_LEASE_MS)
        }
        JobCommand::Ack { worker, .. } => check_length("worker", worker, MAX_NAME_LEN),
        JobCommand::Nack { worker, reason, .. } => {
            check_length("worker", worker, MAX_NAME_LEN)?;
            match reason {
                Some(reason) => check_size("reason", reason, MAX_REASON_LEN),
                None => Ok(()),
            }
        }
        JobCommand::PurgeDead { queue: Some(queue) } => check_length("queue", queue, MAX_NAME_LEN),
        JobCommand::ExpireClaims { claims } => {
            check_range("claims", claims.len() as u64, 1, MAX_EXPIRE_BATCH as u64)
        }
        JobCommand::ExpireLeases { .. }
        | JobCommand::Retry { .. }
        | JobCommand::Purge { .. }
        | JobCommand::PurgeDead { queue: None } => Ok(()),
    }
}

fn validate_sessions(command: &SessionCommand) -> Result<(), InvalidCommand> {
    match command {
        SessionCommand::Grant {
            ttl_ms,
            name,
            max_claims,
        } => {
            check_range("ttl_ms", *ttl_ms, MIN_SESSION_TTL_MS, MAX_SESSION_TTL_MS)?;
            if let Some(name) = name {
                check_length("name", name, MAX_NAME_LEN)?;
            }
            check_range(
                "max_claims",
                u64::from(*max_claims),
                1,
                u64::from(MAX_SESSION_CLAIMS),
            )
        }
        SessionCommand::Expire { sessions } => check_range(
            "sessions",
            sessions.len() as u64,
            1,
            MAX_EXPIRE_BATCH as u64,
        ),
        SessionCommand::Revoke { .. } => Ok(()),
    }
}

fn check_length(field: &'static str, text: &str, max: usize) -> Result<(), InvalidCommand> {
    if text.is_empty() || text.len() > max {
        return Err(InvalidCommand::Length {
            field,
            len: text.len(),
            max,
        });
    }
    Ok(())
}

fn check_size(field: &'static str, text: &str, max: usize) -> Result<(), InvalidCommand> {
    if text.len() > max {
        return Err(InvalidCommand::TooLarge {
            field,
            len: text.len(),
            max,
        });
    }
    Ok(())
}

fn check_range(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), InvalidCommand> {
    if !(min..=max).contains(&value) {
        return Err(InvalidCommand::OutOfRange {
            field,
            value,
            min,
            max,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str) -> Command {
        Command::new(Write::Kv(KvCommand::Put {
            key: key.into(),
            value: value.into(),
            if_revision: None,
            if_value: None,
            session: None,
        }))
    }

    /// LOG-5: a command survives encoding; the data starts with the format byte and names its
    /// fields, so later builds can read it.
    #[test]
    fn a_command_round_trips_and_names_its_fields() {
        let command = put("leader/eu", "node-a").with_request_id("req-1");
        let data = command.encode().unwrap();
        assert_eq!(data[0], COMMAND_FORMAT);
        assert!(
            data.windows(b"request_id".len())
                .any(|w| w == b"request_id")
        );
        assert!(data.windows(b"Put".len()).any(|w| w == b"Put"));
        assert_eq!(Command::decode(&data).unwrap(), command);
    }

    /// LOG-5: entries written by earlier builds stay in logs and WALs, so the bytes of every
    /// existing command are pinned here: a new variant or field must leave them unchanged
    /// (variants are named, so appending one renumbers nothing, but a rename would show).
    #[test]
    fn existing_commands_encode_to_the_same_bytes() {
        let pinned = [
            (
                put("k", "v").with_request_id("r"),
                concat!(
                    "0182aa726571756573745f6964a172a5777269746581a24b7681a350757484a3",
                    "6b6579a16ba576616c7565a176ab69665f7265766973696f6ec0a869665f7661",
                    "6c7565c0",
                ),
            ),
            (
                Command::new(Write::Kv(KvCommand::Delete {
                    key: "k".into(),
                    if_revision: Some(3),
                })),
                "0181a5777269746581a24b7681a644656c65746582a36b6579a16bab69665f7265766973696f6e03",
            ),
            (
                Command::new(Write::Jobs(JobCommand::Enqueue {
                    queue: "q".into(),
                    payload: "p".into(),
                    max_attempts: 2,
                }))
                .with_request_id("r"),
                concat!(
                    "0182aa726571756573745f6964a172a5777269746581a44a6f627381a7456e71",
                    "7565756583a57175657565a171a77061796c6f6164a170ac6d61785f61747465",
                    "6d70747302",
                ),
            ),
            (
                Command::new(Write::Jobs(JobCommand::Claim {
                    queue: "q".into(),
                    worker: "w".into(),
                    lease_ms: 500,
                    now_unix_ms: 1_700_000_000_000,
                    session: None,
                })),
                concat!(
                    "0181a5777269746581a44a6f627381a5436c61696d84a57175657565a171a677",
                    "6f726b6572a177a86c656173655f6d73cd01f4ab6e6f775f756e69785f6d73cf",
                    "0000018bcfe56800",
                ),
            ),
            (
                Command::new(Write::Jobs(JobCommand::Ack {
                    job: JobId(7),
                    worker: "w".into(),
                })),
                "0181a5777269746581a44a6f627381a341636b82a36a6f6207a6776f726b6572a177",
            ),
            (
                Command::new(Write::Jobs(JobCommand::Nack {
                    job: JobId(7),
                    worker: "w".into(),
                    reason: Some("x".into()),
                })),
                concat!(
                    "0181a5777269746581a44a6f627381a44e61636b83a36a6f6207a6776f726b65",
                    "72a177a6726561736f6ea178",
                ),
            ),
            (
                Command::new(Write::Jobs(JobCommand::ExpireLeases { now_unix_ms: 9 })),
                concat!(
                    "0181a5777269746581a44a6f627381ac4578706972654c656173657381ab6e6f",
                    "775f756e69785f6d7309",
                ),
            ),
        ];
        for (command, hex) in pinned {
            let data = command.encode().unwrap();
            let found: String = data.iter().map(|byte| format!("{byte:02x}")).collect();
            assert_eq!(found, hex, "{command:?}");
            assert_eq!(Command::decode(&data).unwrap(), command);
        }
    }

    /// LOG-5: garbage, an empty entry, an unknown format and a truncated command are errors.
    #[test]
    fn garbage_data_is_an_error_not_a_panic() {
        assert!(matches!(
            Command::decode(&[]),
            Err(Error::CommandFormat { found: None, .. })
        ));
        assert!(matches!(
            Command::decode(&[9, 1, 2]),
            Err(Error::CommandFormat { found: Some(9), .. })
        ));
        let data = put("k", "v").encode().unwrap();
        for cut in 1..data.len() {
            assert!(Command::decode(&data[..cut]).is_err(), "cut at {cut}");
        }
        // A map that claims billions of entries must not allocate them.
        assert!(Command::decode(&[COMMAND_FORMAT, 0xdf, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(Command::decode(&[COMMAND_FORMAT, 0xc1]).is_err());
        // An unknown field holding arrays nested a hundred thousand deep must not exhaust
        // the stack while it is skipped.
        let mut deep = vec![COMMAND_FORMAT, 0x81, 0xa1, b'x'];
        deep.extend(std::iter::repeat_n(0x91, 100_000));
        deep.push(0xc0);
        assert!(Command::decode(&deep).is_err());
        // Bytes after a whole command make it garbage, not a command and something else.
        let mut trailing = put("k", "v").encode().unwrap();
        trailing.push(0xc0);
        assert!(matches!(
            Command::decode(&trailing),
            Err(Error::DecodeCommand { .. })
        ));
    }

    /// LOG-6: an oversized request id is refused by the leader and by every decoder.
    #[test]
    fn bounds_are_checked_on_both_sides() {
        let long_id = "x".repeat(MAX_REQUEST_ID_LEN + 1);
        let command = put("k", "v").with_request_id(long_id);
        assert!(matches!(
            command.encode(),
            Err(Error::InvalidCommand(InvalidCommand::Length {
                field: "request id",
                ..
            }))
        ));
        // Written by a build that did not check: still refused on decoding.
        let mut data = vec![COMMAND_FORMAT];
        rmp_serde::encode::write_named(&mut data, &command).unwrap();
        assert!(matches!(
            Command::decode(&data),
            Err(Error::InvalidCommand(_))
        ));

        let empty_key = put("", "v");
        assert!(empty_key.encode().is_err());
        let zero_lease = Command::new(Write::Jobs(JobCommand::Claim {
            queue: DEFAULT_QUEUE.into(),
            worker: "w".into(),
            lease_ms: 0,
            now_unix_ms: 1,
            session: None,
        }));
        assert_eq!(
            zero_lease.validate(),
            Err(InvalidCommand::OutOfRange {
                field: "lease_ms",
                value: 0,
                min: 1,
                max: MAX_LEASE_MS
            })
        );
        let no_attempts = Command::new(Write::Jobs(JobCommand::Enqueue {
            queue: DEFAULT_QUEUE.into(),
            payload: String::new(),
            max_attempts: 0,
        }));
        assert!(no_attempts.validate().is_err());
        let long_queue = Command::new(Write::Jobs(JobCommand::PurgeDead {
            queue: Some("q".repeat(MAX_NAME_LEN + 1)),
        }));
        assert!(long_queue.encode().is_err());
    }

    /// The operator's commands on dead letters round-trip; a purge of every queue is a
    /// command of its own, not a purge of a queue named "".
    #[test]
    fn dead_letter_commands_round_trip() {
        for write in [
            JobCommand::Retry { job: JobId(3) },
            JobCommand::Purge { job: JobId(3) },
            JobCommand::PurgeDead { queue: None },
            JobCommand::PurgeDead {
                queue: Some("mail".into()),
            },
        ] {
            let command = Command::new(Write::Jobs(write)).with_request_id("r");
            assert_eq!(
                Command::decode(&command.encode().unwrap()).unwrap(),
                command
            );
        }
        let empty_queue = Command::new(Write::Jobs(JobCommand::PurgeDead {
            queue: Some(String::new()),
        }));
        assert!(empty_queue.validate().is_err());
    }
}
