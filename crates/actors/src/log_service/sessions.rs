//! Sessions as typed calls (SESS-1, SESS-2): grant, keepalive, the streaming keepalive,
//! revoke and list. Grants and revocations are log writes like any other; a keepalive is not:
//! it reaches the leader's lease clock and is answered from it, and a node that does not
//! lead refuses it with the usual redirect.

use std::collections::BTreeMap;
use std::time::Duration;

use conclave_api::{self as api, ErrorAnswer, ErrorCode, Fencing};
use conclave_statemachine::{
    DEFAULT_SESSION_CLAIMS, Outcome, SessionCommand, SessionId, SessionOutcome, Write,
};
use futures_util::StreamExt;

use super::{APPLY_TIMEOUT, Answer, LogService, fencing};

/// How many keepalives the streaming keepalive sends per TTL: one every third of it, so two
/// may be lost before the session ends.
const STREAM_KEEPALIVES_PER_TTL: u32 = 3;

/// How long the streaming keepalive waits before asking again a leader that answered `busy`
/// (elected moments ago, or handing over), and how many times it asks before it stops.
const STREAM_BUSY_PAUSE: Duration = Duration::from_millis(100);
const STREAM_BUSY_RETRIES: u32 = 20;

impl LogService {
    /// `POST /v1/sessions`.
    pub async fn session_grant(
        &self,
        request: api::SessionGrantRequest,
    ) -> Answer<api::SessionAnswer> {
        let write = Write::Sessions(SessionCommand::Grant {
            ttl_ms: request.ttl_ms,
            name: request.name,
            max_claims: request.max_claims.unwrap_or(DEFAULT_SESSION_CLAIMS),
        });
        let (outcome, fencing) = self.write(write, request.request_id).await?;
        match self.outcome(outcome.applied, &fencing)? {
            (Outcome::Sessions(SessionOutcome::Granted(session)), replayed) => {
                Ok(api::SessionAnswer {
                    session: session.id.0,
                    ttl_ms: session.ttl_ms,
                    replayed,
                    fencing,
                })
            }
            (Outcome::Sessions(refusal), _) => Err(self.session_refusal(refusal, fencing)),
            _ => Err(self.mismatched(fencing)),
        }
    }

    /// `POST /v1/sessions/{id}/keepalive`: the session's TTL counts again from now on the
    /// leader's clock.
    pub async fn session_keepalive(&self, session: u64) -> Answer<api::SessionAnswer> {
        match self.keepalive_once(SessionId(session)).await? {
            (Some(ttl_ms), fencing) => Ok(api::SessionAnswer {
                session,
                ttl_ms,
                replayed: false,
                fencing,
            }),
            (None, fencing) => Err(self.session_refusal(
                SessionOutcome::UnknownSession {
                    session: SessionId(session),
                },
                fencing,
            )),
        }
    }

    async fn keepalive_once(&self, session: SessionId) -> Answer<(Option<u64>, Fencing)> {
        let answer =
            match tokio::time::timeout(APPLY_TIMEOUT, self.node.session_keepalive(session)).await {
                Ok(answer) => answer.map_err(|err| self.unavailable(&err))?,
                Err(_) => return Err(self.timed_out().await),
            };
        let fencing = fencing(answer.term, answer.leader);
        match answer.outcome {
            Ok(ttl) => Ok((ttl, fencing)),
            Err(refusal) => Err(self.refused(refusal, fencing)),
        }
    }

    /// The streaming keepalive (`POST /v1/sessions/{id}/keepalive?stream=true`): one
    /// keepalive now — refused as a single keepalive is (`not_leader` on a follower,
    /// `no_such_session`), before any stream starts — and then one every third of the TTL for
    /// as long as the stream is read, each reported; the stream ends with `ended` when the
    /// session is no longer live, or with `stopped` when this node stops leading. A reader
    /// that goes away stops the keepalives, and the session then ends after its TTL.
    pub async fn session_stream(
        &self,
        session: u64,
    ) -> Answer<impl futures_util::Stream<Item = api::SessionStreamEvent> + use<>> {
        let first = self.session_keepalive(session).await?;
        let first_event = api::SessionStreamEvent::Keepalive {
            session,
            ttl_ms: first.ttl_ms,
        };
        let pause = Duration::from_millis(first.ttl_ms) / STREAM_KEEPALIVES_PER_TTL;
        // The pause before the next keepalive is taken when the next event is asked for, so
        // a reader that stops reading stops the keepalives too.
        let rest =
            futures_util::stream::unfold(Some((self.clone(), pause, 0)), move |next| async move {
                let (service, mut pause, mut busy) = next?;
                loop {
                    tokio::time::sleep(pause).await;
                    match service.keepalive_once(SessionId(session)).await {
                        Ok((Some(ttl_ms), _)) => {
                            let pause = Duration::from_millis(ttl_ms) / STREAM_KEEPALIVES_PER_TTL;
                            let event = api::SessionStreamEvent::Keepalive { session, ttl_ms };
                            return Some((event, Some((service, pause, 0))));
                        }
                        Ok((None, _)) => {
                            return Some((api::SessionStreamEvent::Ended { session }, None));
                        }
                        // A leader elected moments ago, or one handing over: ask again
                        // shortly, for a while, before giving the stream up.
                        Err(error)
                            if error.error == ErrorCode::Busy && busy < STREAM_BUSY_RETRIES =>
                        {
                            busy += 1;
                            pause = STREAM_BUSY_PAUSE;
                        }
                        Err(error) => {
                            return Some((api::SessionStreamEvent::Stopped { error }, None));
                        }
                    }
                }
            });
        Ok(futures_util::stream::once(std::future::ready(first_event)).chain(rest))
    }

    /// `DELETE /v1/sessions/{id}`: the session ends now, with its keys and claims.
    pub async fn session_revoke(
        &self,
        session: u64,
        query: api::SessionRevokeQuery,
    ) -> Answer<api::SessionRevokeAnswer> {
        let write = Write::Sessions(SessionCommand::Revoke {
            session: SessionId(session),
        });
        let (outcome, fencing) = self.write(write, query.request_id).await?;
        match self.outcome(outcome.applied, &fencing)? {
            (Outcome::Sessions(SessionOutcome::Revoked(ended)), replayed) => {
                Ok(api::SessionRevokeAnswer {
                    session,
                    deleted_keys: ended.deleted_keys,
                    requeued: ended.requeued.iter().map(|job| job.0).collect(),
                    dead_lettered: ended.dead_lettered.iter().map(|job| job.0).collect(),
                    replayed,
                    fencing,
                })
            }
            (Outcome::Sessions(refusal), _) => Err(self.session_refusal(refusal, fencing)),
            _ => Err(self.mismatched(fencing)),
        }
    }

    /// `GET /v1/sessions`: every live session; on the leader with how long each has left.
    pub async fn sessions_list(
        &self,
        query: &api::SessionListQuery,
    ) -> Answer<api::SessionListAnswer> {
        let read = self
            .read(query.stale, |state| {
                state
                    .sessions()
                    .iter()
                    .map(|session| api::Session {
                        session: session.id.0,
                        name: session.name.clone(),
                        ttl_ms: session.ttl_ms,
                        max_claims: session.max_claims,
                        granted_at_index: session.granted_at,
                        expires_in_ms: None,
                        keys: state.kv().owned_by(session.id) as u64,
                        claims: state.jobs().held_by(session.id) as u64,
                    })
                    .collect::<Vec<_>>()
            })
            .await?;
        let mut sessions = read.value;
        if !query.stale {
            let remaining: BTreeMap<SessionId, u64> = match self.node.sessions_remaining().await {
                Ok(answer) => answer.outcome.unwrap_or_default(),
                Err(_) => BTreeMap::new(),
            };
            for session in &mut sessions {
                session.expires_in_ms = remaining.get(&SessionId(session.session)).copied();
            }
        }
        Ok(api::SessionListAnswer {
            sessions,
            fencing: read.fencing,
        })
    }

    /// The error of a write refused because of a session: not live, too many, too many
    /// claims.
    pub(super) fn session_refusal(
        &self,
        refusal: SessionOutcome,
        fencing: Fencing,
    ) -> Box<ErrorAnswer> {
        let (code, message) = match refusal {
            SessionOutcome::UnknownSession { session } => (
                ErrorCode::NoSuchSession,
                format!(
                    "no live session {session}: never granted, revoked, or expired because no \
                     keepalive reached the leader within its ttl_ms; grant a new one with POST \
                     /v1/sessions"
                ),
            ),
            SessionOutcome::TooManySessions { limit } => (
                ErrorCode::TooManySessions,
                format!(
                    "{limit} sessions are live, as many as the cluster keeps; revoke sessions \
                     that are no longer used (GET /v1/sessions lists them)"
                ),
            ),
            SessionOutcome::TooManyClaims { session, limit } => (
                ErrorCode::TooManyClaims,
                format!(
                    "session {session} holds {limit} claims, its max_claims; ack or nack one \
                     first, or grant the session a larger max_claims"
                ),
            ),
            other => {
                tracing::warn!(
                    ?other,
                    "a write answered with a session outcome it cannot have"
                );
                (
                    ErrorCode::Internal,
                    "the state machine answered this write with a session's outcome".to_owned(),
                )
            }
        };
        self.error(code, message, Some(fencing))
    }
}
