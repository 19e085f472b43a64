//! `conclave session`: sessions through a node's admin API (SESS-1), with the requests and
//! answers of `conclave-api`; also the calls `conclave lock` makes (SESS-4).
//!
//! grant, keepalive and revoke go to the leader, following a `not_leader` redirect as
//! `conclave kv` does; grant and revoke carry a request id (made up unless given). `keepalive
//! --follow` first sends one keepalive the ordinary way, which follows the redirect to the
//! leader, then opens the streaming keepalive there (which a follower would refuse with the
//! redirect, before any stream). Its exit codes say why it ended: 1 when the session is
//! no longer live (`ended`), 75 when the keepalives stopped while it may still live
//! (`stopped`, or a stream that broke or went silent for a whole TTL). Other exit codes as for
//! `conclave kv`.

use std::process::ExitCode;
use std::time::Duration;

use conclave_api::{
    ErrorCode, Session, SessionAnswer, SessionGrantRequest, SessionListAnswer, SessionRevokeAnswer,
    SessionStreamEvent,
};

use crate::cli::{ClientArgs, SessionCommand};
use crate::client::{AdminClient, ClientError};
use crate::event_stream::ServerEvents;
use crate::log_client::{client, done, encode_query, failed, made_up_request_id, print_json, send};
use crate::output::{errln, outln};

/// Runs `conclave session ...`.
pub(crate) fn session(args: &ClientArgs, command: &SessionCommand) -> ExitCode {
    let client = match client(args) {
        Ok(client) => client,
        Err(err) => return failed(args, &err),
    };
    match command {
        SessionCommand::Grant {
            ttl,
            name,
            max_claims,
            request_id,
        } => {
            let request = SessionGrantRequest {
                ttl_ms: *ttl,
                name: name.clone(),
                max_claims: *max_claims,
                request_id: Some(request_id.clone().unwrap_or_else(made_up_request_id)),
            };
            let result = grant(&client, &request).map(|answer| {
                if args.json {
                    print_json(&answer);
                } else {
                    // The id alone, so that `S=$(conclave session grant --ttl 10000)` works.
                    outln!("{}", answer.session);
                }
            });
            done(args, result)
        }
        SessionCommand::Keepalive {
            session,
            follow: false,
        } => {
            let result = keepalive(&client, *session).map(|answer| kept(args, &answer));
            done(args, result)
        }
        SessionCommand::Keepalive {
            session,
            follow: true,
        } => follow(args, &client, *session),
        SessionCommand::Revoke {
            session,
            request_id,
        } => {
            let request_id = request_id.clone().unwrap_or_else(made_up_request_id);
            let result = revoke(&client, *session, &request_id).map(|answer| {
                if args.json {
                    print_json(&answer);
                } else {
                    outln!("{}", revoked(&answer));
                }
            });
            done(args, result)
        }
        SessionCommand::List { stale } => {
            let path = if *stale {
                "/v1/sessions?stale=true"
            } else {
                "/v1/sessions"
            };
            let result = send::<(), SessionListAnswer>(&client, "GET", path, None).map(|answer| {
                if args.json {
                    print_json(&answer);
                } else {
                    outln!("{}", table(&answer.sessions));
                }
            });
            done(args, result)
        }
    }
}

/// `POST /v1/sessions`, on the leader.
pub(crate) fn grant(
    client: &AdminClient,
    request: &SessionGrantRequest,
) -> Result<SessionAnswer, ClientError> {
    send(client, "POST", "/v1/sessions", Some(request))
}

/// `POST /v1/sessions/{id}/keepalive`, on the leader.
pub(crate) fn keepalive(client: &AdminClient, session: u64) -> Result<SessionAnswer, ClientError> {
    send::<(), _>(
        client,
        "POST",
        &format!("/v1/sessions/{session}/keepalive"),
        None,
    )
}

/// `DELETE /v1/sessions/{id}`, on the leader.
pub(crate) fn revoke(
    client: &AdminClient,
    session: u64,
    request_id: &str,
) -> Result<SessionRevokeAnswer, ClientError> {
    let path = format!(
        "/v1/sessions/{session}?request_id={}",
        encode_query(request_id)
    );
    send::<(), _>(client, "DELETE", &path, None)
}

/// Whether the node said the session is not live (never granted, revoked, expired).
pub(crate) fn not_live(err: &ClientError) -> bool {
    err.refusal()
        .is_some_and(|refusal| refusal.error == ErrorCode::NoSuchSession)
}

/// A keepalive's answer: its JSON, or the time the session has again.
fn kept(args: &ClientArgs, answer: &SessionAnswer) {
    if args.json {
        print_json(answer);
    } else {
        outln!(
            "session {}: kept alive for {} ms",
            answer.session,
            answer.ttl_ms
        );
    }
}

/// `session keepalive ID --follow`: one keepalive through any node (which finds the leader),
/// then the leader's streaming keepalive until it ends.
fn follow(args: &ClientArgs, client: &AdminClient, session: u64) -> ExitCode {
    let path = format!("/v1/sessions/{session}/keepalive");
    let mut leader_url = None;
    let first = client.follow_leader(
        |client| client.request::<(), SessionAnswer>("POST", &path, None, Duration::ZERO),
        |_, url| leader_url = Some(url.to_owned()),
    );
    let first = match first {
        Ok(first) => first,
        Err(err) => return failed(args, &err),
    };
    kept(args, &first);
    let leader = match leader_url.map(|url| client.other(&url)).transpose() {
        Ok(leader) => leader,
        Err(err) => return failed(args, &err),
    };
    let leader = leader.as_ref().unwrap_or(client);
    // The leader sends a keepalive every third of the TTL: a whole TTL without one means the
    // leader is gone or cut off, and the session may be ending.
    let silence = Duration::from_millis(first.ttl_ms);
    let stream = match leader.open_stream("POST", &format!("{path}?stream=true"), silence, None) {
        Ok(stream) => stream,
        Err(err) => return failed(args, &err),
    };
    for event in ServerEvents::new(stream) {
        let event = match event {
            Ok(event) => event,
            Err(err) => {
                errln!(
                    "error: the keepalive stream from {} broke: {err}; session {session} lives \
                     until its TTL runs out on the leader: run the command again",
                    leader.base()
                );
                return ExitCode::from(crate::EXIT_TEMPFAIL);
            }
        };
        let Ok(parsed) = serde_json::from_str::<SessionStreamEvent>(&event.data) else {
            continue;
        };
        if args.json {
            print_json(&parsed);
        }
        match parsed {
            SessionStreamEvent::Keepalive { session, ttl_ms } => {
                if !args.json {
                    outln!("session {session}: kept alive for {ttl_ms} ms");
                }
            }
            SessionStreamEvent::Ended { session } => {
                errln!(
                    "session {session} ended: it was revoked, or expired before a keepalive \
                     reached the leader"
                );
                return ExitCode::from(1);
            }
            SessionStreamEvent::Stopped { error } => {
                errln!(
                    "error: the keepalives stopped ({}: {}); session {session} lives until its \
                     TTL runs out on the leader: run the command again to reach it",
                    error.error,
                    error.message
                );
                return ExitCode::from(crate::EXIT_TEMPFAIL);
            }
        }
    }
    errln!(
        "error: {} ended the keepalive stream (it stopped, or the connection broke); session \
         {session} lives until its TTL runs out on the leader: run the command again",
        leader.base()
    );
    ExitCode::from(crate::EXIT_TEMPFAIL)
}

/// What ended with a revoked session, for people.
fn revoked(answer: &SessionRevokeAnswer) -> String {
    let ids = |jobs: &[u64]| {
        jobs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("{n} {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let mut text = format!(
        "session {} revoked: {} deleted",
        answer.session,
        plural(
            usize::try_from(answer.deleted_keys).unwrap_or(usize::MAX),
            "key",
            "keys"
        )
    );
    if !answer.requeued.is_empty() {
        text.push_str(&format!(
            ", {} ready again ({})",
            plural(answer.requeued.len(), "job", "jobs"),
            ids(&answer.requeued)
        ));
    }
    if !answer.dead_lettered.is_empty() {
        text.push_str(&format!(
            ", {} dead, its attempts used up ({})",
            plural(answer.dead_lettered.len(), "job", "jobs"),
            ids(&answer.dead_lettered)
        ));
    }
    if answer.replayed {
        text.push_str(" (applied before with this request id)");
    }
    text
}

/// The live sessions as a table.
fn table(sessions: &[Session]) -> String {
    let mut rows = vec![["ID", "NAME", "TTL", "LEFT", "KEYS", "CLAIMS"].map(str::to_owned)];
    for session in sessions {
        rows.push([
            session.session.to_string(),
            session.name.clone().unwrap_or_else(|| "-".to_owned()),
            format!("{} ms", session.ttl_ms),
            session
                .expires_in_ms
                .map_or_else(|| "-".to_owned(), |left| format!("{left} ms")),
            session.keys.to_string(),
            format!("{}/{}", session.claims, session.max_claims),
        ]);
    }
    crate::render::columns(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use conclave_api::Fencing;

    /// SESS-1: a revoke says what ended with the session, and only what did.
    #[test]
    fn sess1_a_revoke_says_what_ended_with_the_session() {
        let mut answer = SessionRevokeAnswer {
            session: 4,
            deleted_keys: 1,
            requeued: vec![],
            dead_lettered: vec![],
            replayed: false,
            fencing: Fencing::default(),
        };
        assert_eq!(revoked(&answer), "session 4 revoked: 1 key deleted");
        answer.deleted_keys = 0;
        answer.requeued = vec![7, 9];
        answer.dead_lettered = vec![3];
        assert_eq!(
            revoked(&answer),
            "session 4 revoked: 0 keys deleted, 2 jobs ready again (7 9), 1 job dead, its \
             attempts used up (3)"
        );
    }

    /// SESS-1: the list shows each session's holdings, and a dash for what a stale read does
    /// not know.
    #[test]
    fn sess1_the_list_shows_each_session() {
        let session = Session {
            session: 12,
            name: Some("backup".into()),
            ttl_ms: 10_000,
            max_claims: 64,
            granted_at_index: 3,
            expires_in_ms: None,
            keys: 2,
            claims: 1,
        };
        let text = table(&[session]);
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("ID  NAME    TTL       LEFT  KEYS  CLAIMS")
        );
        assert_eq!(lines.next(), Some("12  backup  10000 ms  -     2     1/64"));
    }
}
