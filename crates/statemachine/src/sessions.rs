//! Sessions (SESS-1, SESS-2): a client's proof of life, held by the leader and ended through
//! the log. A session is granted with a time to live; what it holds (keys written with it,
//! jobs claimed with it) goes with it when it is revoked or expires.
//!
//! This module owns the replicated half: which sessions are live, with their TTL and the
//! claims each may hold. The other half, when a session's TTL runs out, is the leader's and
//! is never replicated: keepalives reach the leader only, and the leader's
//! [`LeaseClock`](crate::LeaseClock) decides from its own monotonic clock when to write
//! [`SessionCommand::Expire`]. Grants, revocations and expiries are entries, so every node
//! ends a session, deletes its keys and requeues its jobs at the same point of the log.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::jobs::JobId;

/// Live sessions at most, on every replica alike: past it a grant is refused
/// ([`SessionOutcome::TooManySessions`]). A constant of the state machine, not a setting:
/// replicas with different bounds would answer a grant differently.
pub const MAX_LIVE_SESSIONS: usize = 100_000;
/// The shortest TTL a session may ask for.
pub const MIN_SESSION_TTL_MS: u64 = 500;
/// The longest TTL a session may ask for: a day.
pub const MAX_SESSION_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// The claims a session may hold when its client named no bound; filled in by the node.
pub const DEFAULT_SESSION_CLAIMS: u32 = 64;
/// The most claims a session may be allowed to hold (seed 004's per-worker cap).
pub const MAX_SESSION_CLAIMS: u32 = 10_000;

/// A session's id, from 1, in the order sessions were granted; never given twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(pub u64);

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A live session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Its id.
    pub id: SessionId,
    /// What its client called it, for operators.
    pub name: Option<String>,
    /// How long the leader waits for a keepalive before it ends the session.
    pub ttl_ms: u64,
    /// The claims it may hold at once.
    pub max_claims: u32,
    /// The log index of the entry that granted it.
    pub granted_at: u64,
}

/// A write about sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionCommand {
    /// Starts a session.
    Grant {
        /// Its time to live.
        ttl_ms: u64,
        /// What its client calls it.
        #[serde(default)]
        name: Option<String>,
        /// The claims it may hold ([`DEFAULT_SESSION_CLAIMS`] when the client named none).
        max_claims: u32,
    },
    /// Ends a session at its client's request.
    Revoke {
        /// The session.
        session: SessionId,
    },
    /// Written by the leader only: these sessions got no keepalive for their TTL on the
    /// leader's clock. A session that ended already is skipped.
    Expire {
        /// The sessions.
        sessions: Vec<SessionId>,
    },
}

/// What a session held when it ended, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedSession {
    /// The session.
    pub session: SessionId,
    /// Keys deleted with it.
    pub deleted_keys: u64,
    /// Jobs it held, ready again.
    pub requeued: Vec<JobId>,
    /// Jobs it held whose attempts were used up: dead.
    pub dead_lettered: Vec<JobId>,
}

/// What a write about sessions answered, or why a write naming a session was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionOutcome {
    /// The session was granted.
    Granted(Box<Session>),
    /// The session was revoked.
    Revoked(EndedSession),
    /// The sessions of an [`SessionCommand::Expire`] that were still live ended.
    Expired {
        /// Each, in the order the command named them.
        ended: Vec<EndedSession>,
    },
    /// The session named is not live (never granted, or ended); nothing changed.
    UnknownSession {
        /// The session.
        session: SessionId,
    },
    /// [`MAX_LIVE_SESSIONS`] are live; nothing changed.
    TooManySessions {
        /// The bound.
        limit: u64,
    },
    /// A claim under a session that holds its `max_claims` already; nothing changed.
    TooManyClaims {
        /// The session.
        session: SessionId,
        /// Its bound.
        limit: u32,
    },
}

/// The live sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sessions {
    next_id: u64,
    live: BTreeMap<SessionId, Session>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self {
            next_id: 1,
            live: BTreeMap::new(),
        }
    }
}

impl Sessions {
    /// The session, if it is live.
    #[must_use]
    pub fn get(&self, session: SessionId) -> Option<&Session> {
        self.live.get(&session)
    }

    /// Every live session, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Session> {
        self.live.values()
    }

    /// How many sessions are live.
    #[must_use]
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether none is.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Grants a session in the entry at `index`, unless [`MAX_LIVE_SESSIONS`] are live.
    pub(crate) fn grant(
        &mut self,
        index: u64,
        ttl_ms: u64,
        name: Option<String>,
        max_claims: u32,
    ) -> SessionOutcome {
        if self.live.len() >= MAX_LIVE_SESSIONS {
            return SessionOutcome::TooManySessions {
                limit: MAX_LIVE_SESSIONS as u64,
            };
        }
        let id = SessionId(self.next_id);
        self.next_id = self.next_id.saturating_add(1);
        let session = Session {
            id,
            name,
            ttl_ms,
            max_claims,
            granted_at: index,
        };
        self.live.insert(id, session.clone());
        SessionOutcome::Granted(Box::new(session))
    }

    /// Ends a live session; `None` if it is not live.
    pub(crate) fn end(&mut self, session: SessionId) -> Option<Session> {
        self.live.remove(&session)
    }

    /// Checks sessions decoded from a snapshot.
    pub(crate) fn restored(self) -> Result<Self> {
        let consistent = self
            .live
            .iter()
            .all(|(id, session)| session.id == *id && id.0 != 0 && id.0 < self.next_id);
        if !consistent {
            return Err(Error::InconsistentSnapshot(
                "a session's id is out of place",
            ));
        }
        Ok(self)
    }
}
