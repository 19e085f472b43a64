//! Locks and sessions through the embedding API (SESS-1, SESS-4): a single node with the
//! replicated log hands a lock to one holder at a time, a waiter gets it once the holder
//! releases it, with a larger fencing token, and a released lock leaves no key behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::mpsc;
use std::time::Duration;

use conclave::api::{ErrorCode, SessionGrantRequest, SessionListQuery, SessionRevokeQuery};
use conclave::{Error, LockOptions, Node};
use support::{PATIENCE, node_toml, start, test_log, wait_for};
use tempfile::TempDir;

fn single_node_with_the_log(dir: &TempDir) -> Node {
    let mut toml = node_toml("lock-a", dir.path(), &["lock-a"], None);
    toml.push_str("[log]\nenabled = true\n");
    let node = start(&toml);
    wait_for("the single node to lead", || node.is_leader().then_some(()));
    node
}

/// SESS-4: one holder at a time; a waiter takes the lock once the holder releases it, with a
/// larger token; `wait(ZERO)` gives up at once while it is held; nothing stays behind.
#[test]
fn sess4_a_lock_has_one_holder_and_tokens_grow() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let node = single_node_with_the_log(&dir);
    let first = node.lock("report").unwrap();
    assert!(first.is_held());
    assert_eq!(first.key(), "conclave/locks/report");
    let holder = node.kv().get("conclave/locks/report").unwrap();
    assert_eq!(holder.kv.session, Some(first.session()));
    assert_eq!(holder.kv.create_revision, first.token());

    let busy = node.lock_with("report", LockOptions::default().wait(Duration::ZERO));
    assert!(
        matches!(busy, Err(Error::LockTimeout { ref key, .. }) if key == "conclave/locks/report"),
        "{busy:?}"
    );
    // Another name is another lock; a wait longer than the clock can count is no deadline.
    let other = node
        .lock_with("other", LockOptions::default().wait(Duration::MAX))
        .unwrap();

    std::thread::scope(|scope| {
        let (taken, waiter) = mpsc::channel();
        let node = &node;
        scope.spawn(move || {
            let guard = node.lock("report").unwrap();
            taken.send(guard.token()).unwrap();
            guard.release().unwrap();
        });
        // The waiter's own session is live, and it has not taken the lock.
        wait_for("the waiter's session", || {
            let sessions = node.sessions().list(SessionListQuery::default()).unwrap();
            (sessions.sessions.len() == 3).then_some(())
        });
        assert_eq!(waiter.try_recv(), Err(mpsc::TryRecvError::Empty));
        let token = first.token();
        first.release().unwrap();
        let second = waiter.recv_timeout(PATIENCE).unwrap();
        assert!(second > token, "tokens {token} then {second}");
    });
    drop(other);
    let absent = node.kv().get("conclave/locks/report");
    assert!(
        matches!(&absent, Err(Error::Api(error)) if error.error == ErrorCode::NotFound),
        "{absent:?}"
    );
    let live = node.sessions().list(SessionListQuery::default()).unwrap();
    assert_eq!(live.sessions, [], "every lock's session was revoked");
    node.stop();
}

/// SESS-1: grant, keepalive, list and revoke in process; a revoked session's keepalive is
/// `no_such_session`, and a guard whose session was revoked under it says it is not held.
#[test]
fn sess1_sessions_in_process() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let node = single_node_with_the_log(&dir);
    let sessions = node.sessions();
    let granted = sessions
        .grant(SessionGrantRequest {
            ttl_ms: 60_000,
            name: Some("in-process".into()),
            max_claims: None,
            request_id: None,
        })
        .unwrap();
    assert_eq!(sessions.keepalive(granted.session).unwrap().ttl_ms, 60_000);
    let listed = sessions.list(SessionListQuery::default()).unwrap();
    assert_eq!(listed.sessions[0].name.as_deref(), Some("in-process"));
    sessions
        .revoke(granted.session, SessionRevokeQuery::default())
        .unwrap();
    let gone = sessions.keepalive(granted.session);
    assert!(
        matches!(&gone, Err(Error::Api(error)) if error.error == ErrorCode::NoSuchSession),
        "{gone:?}"
    );

    let guard = node
        .lock_with(
            "lost",
            LockOptions::default().ttl(Duration::from_millis(600)),
        )
        .unwrap();
    sessions
        .revoke(guard.session(), SessionRevokeQuery::default())
        .unwrap();
    wait_for("the guard to notice its session ended", || {
        (!guard.is_held()).then_some(())
    });
    let released = guard.release();
    assert!(
        matches!(&released, Err(Error::Api(error)) if error.error == ErrorCode::NoSuchSession),
        "{released:?}"
    );
    node.stop();
}
