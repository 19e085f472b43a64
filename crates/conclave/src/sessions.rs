//! Sessions and locks through a node in this process (SESS-1, SESS-4).
//!
//! [`Node::sessions`] grants, keeps alive, revokes and lists sessions with the admin API's
//! own types, as [`Node::kv`] does for keys. [`Node::lock`] builds a lock on them, the same
//! lock `conclave lock NAME` takes (the two exclude each other): a session of this node, the
//! key `conclave/locks/NAME` created with `if_revision: 0` and that session, and a task on
//! the node's event loop that keeps the session alive while the [`LockGuard`] lives.
//! Dropping the guard (or [`LockGuard::release`]) revokes the session, which deletes the key.
//!
//! While another holds the lock, the waiter reads the key's changes from this node's own copy
//! (the same read a watch of the admin API makes, with no log entry and no network) until
//! the key is deleted, then tries the create again. It polls with a back-off from 10 ms to
//! 200 ms rather than subscribing: the admin API's watch is itself a poll of that read, the
//! node offers no notification of a key's change to build on, and the back-off keeps a long
//! wait to five cheap reads a second while a release is noticed within 200 ms.
//!
//! Like every write of the façade, these calls are served by this node: on a node that does
//! not lead they are refused with `not_leader`, naming the leader. A program that runs on
//! every node of a cluster takes its locks where it leads, or through the admin API
//! (`conclave lock`) elsewhere.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use conclave_actors::log_service::{Answer, LogService};
use conclave_api::{self as api, ErrorCode, KvWatchEvent};
use tokio::sync::oneshot;
// Tokio's clock reads the system's monotonic clock outside a runtime with a paused clock, and
// is the one clippy.toml allows.
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::node::Node;
use crate::store::Store;

/// Where the locks live in the key-value store: lock NAME is the key `conclave/locks/NAME`,
/// as `conclave lock NAME` names it.
pub const LOCK_KEY_PREFIX: &str = "conclave/locks/";

/// Keepalives sent per TTL: after a lost one, two more chances before the TTL runs out.
const KEEPALIVES_PER_TTL: u32 = 3;

/// The first pause between two reads of a held key's changes, doubled up to [`LAST_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(10);

/// The longest pause between two reads of a held key's changes.
const LAST_POLL: Duration = Duration::from_millis(200);

/// Sessions, through one node: [`Node::sessions`].
///
/// ```no_run
/// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
/// use conclave::api::{PutRequest, SessionGrantRequest, SessionRevokeQuery};
/// let session = node.sessions().grant(SessionGrantRequest {
///     ttl_ms: 10_000,
///     name: Some("worker-1".into()),
///     max_claims: None,
///     request_id: None,
/// })?;
/// // A key that lives only as long as the session does.
/// node.kv().put_with(
///     "workers/worker-1",
///     PutRequest {
///         value: "alive".into(),
///         if_revision: None,
///         if_value: None,
///         session: Some(session.session),
///         request_id: None,
///     },
/// )?;
/// node.sessions().keepalive(session.session)?; // at least once per TTL
/// node.sessions().revoke(session.session, SessionRevokeQuery::default())?; // the key goes too
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Sessions<'node> {
    node: &'node Node,
}

impl Sessions<'_> {
    /// Starts a session (`POST /v1/sessions`): it lives while a keepalive reaches the leader
    /// at least once per `ttl_ms`, and what is tied to it ends with it.
    pub fn grant(&self, request: api::SessionGrantRequest) -> Result<api::SessionAnswer> {
        grant(&self.node.store, request)
    }

    /// Keeps a session alive: its TTL counts again from now (`no_such_session` when it is no
    /// longer live).
    pub fn keepalive(&self, session: u64) -> Result<api::SessionAnswer> {
        self.node
            .store
            .run(move |service| async move { service.session_keepalive(session).await })
    }

    /// Ends a session now: its keys are deleted, its claimed jobs ready again.
    pub fn revoke(
        &self,
        session: u64,
        query: api::SessionRevokeQuery,
    ) -> Result<api::SessionRevokeAnswer> {
        revoke(&self.node.store, session, query)
    }

    /// Every live session; on the leader with how long each has left.
    pub fn list(&self, query: api::SessionListQuery) -> Result<api::SessionListAnswer> {
        self.node
            .store
            .run(move |service| async move { service.sessions_list(&query).await })
    }
}

fn grant(store: &Store, request: api::SessionGrantRequest) -> Result<api::SessionAnswer> {
    store.run(move |service| async move { service.session_grant(request).await })
}

fn revoke(
    store: &Store,
    session: u64,
    query: api::SessionRevokeQuery,
) -> Result<api::SessionRevokeAnswer> {
    store.run(move |service| async move { service.session_revoke(session, query).await })
}

/// How [`Node::lock_with`] takes a lock: the session's TTL (10 s by default) and how long to
/// wait for another holder to let go (as long as it takes, by default).
///
/// ```
/// use std::time::Duration;
/// let options = conclave::LockOptions::default()
///     .ttl(Duration::from_secs(5))
///     .wait(Duration::from_secs(30));
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct LockOptions {
    ttl: Duration,
    wait: Option<Duration>,
}

impl Default for LockOptions {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(10),
            wait: None,
        }
    }
}

impl LockOptions {
    /// How long the lock outlives a holder that stopped keeping it alive (its process
    /// killed, its node cut off from the leader): the session's TTL (500 ms to 24 h).
    pub fn ttl(self, ttl: Duration) -> Self {
        Self { ttl, ..self }
    }

    /// Give up with [`Error::LockTimeout`] when another still holds the lock after `wait`
    /// (`Duration::ZERO`: try once).
    pub fn wait(self, wait: Duration) -> Self {
        Self {
            wait: Some(wait),
            ..self
        }
    }
}

/// What the keepalive task knows of the lock's session.
#[derive(Debug)]
struct SessionHealth {
    /// The leader said the session is no longer live.
    ended: AtomicBool,
    /// When the last keepalive the leader answered was sent (the grant, at first): the
    /// leader's TTL started no earlier.
    last_answered: Mutex<Instant>,
}

impl SessionHealth {
    fn answered(&self, sent: Instant) {
        *self
            .last_answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = sent;
    }

    fn alive(&self, ttl: Duration) -> bool {
        let last = *self
            .last_answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        !self.ended.load(Ordering::Relaxed) && last.elapsed() < ttl
    }
}

/// A held lock: its fencing token, kept alive by a task on the node's event loop while it
/// lives, released (its session revoked, the key deleted) when dropped or
/// [`released`](LockGuard::release).
///
/// The token is the store revision at which the lock's key was created: every later holder
/// gets a larger one. Pass it with whatever the lock protects, and let that resource refuse a
/// token smaller than the largest it has seen: a holder paused or cut off long enough to lose
/// the lock cannot then overwrite its successor's work.
///
/// ```no_run
/// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
/// let guard = node.lock("nightly-backup")?;
/// println!("holding {} with token {}", guard.key(), guard.token());
/// // ... the work, stamped with guard.token() ...
/// guard.release()?; // or let it drop
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LockGuard {
    store: Store,
    key: String,
    session: u64,
    token: u64,
    ttl: Duration,
    health: Arc<SessionHealth>,
    /// Dropped to stop the keepalive task; `None` once released.
    keeper: Option<oneshot::Sender<()>>,
}

impl LockGuard {
    /// The fencing token: the store revision at which the lock's key was created.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The lock's key, `conclave/locks/NAME`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The session that holds the lock.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Whether the lock is still held as far as this node can tell: `false` once the leader
    /// said its session ended, or once a whole TTL passed without a keepalive answered (the
    /// leader may have ended it, and another may hold the lock now).
    pub fn is_held(&self) -> bool {
        self.health.alive(self.ttl)
    }

    /// Releases the lock: revokes its session, which deletes the key. The error
    /// `no_such_session` says the session had ended before: the lock was lost meanwhile.
    pub fn release(mut self) -> Result<api::SessionRevokeAnswer> {
        self.revoke()
    }

    fn revoke(&mut self) -> Result<api::SessionRevokeAnswer> {
        // Dropping the sender ends the keepalive task.
        self.keeper.take();
        revoke(
            &self.store,
            self.session,
            api::SessionRevokeQuery::default(),
        )
    }
}

impl Drop for LockGuard {
    /// Releases the lock as [`LockGuard::release`] does; a failure is only logged: the
    /// session then ends, and the lock with it, when its TTL runs out on the leader.
    fn drop(&mut self) {
        if self.keeper.is_none() {
            return;
        }
        if let Err(err) = self.revoke() {
            tracing::debug!(key = %self.key, session = self.session, "lock not released: {err}");
        }
    }
}

impl Node {
    /// Sessions through this node (with `log.enabled = true`; a node that does not lead
    /// refuses grants, keepalives and revocations with `not_leader`).
    pub fn sessions(&self) -> Sessions<'_> {
        Sessions { node: self }
    }

    /// Takes the lock `name`, waiting for as long as another holds it, with a session of a
    /// 10 s TTL: [`Node::lock_with`] with the default [`LockOptions`].
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
    /// let guard = node.lock("schema-migration")?;
    /// // Only one holder at a time, cluster-wide; guard.token() fences a late one.
    /// drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(name, LockOptions::default())
    }

    /// Takes the lock `name` as `options` say. While another holds it, waits until it is
    /// released (its holder revoked its session, or stopped keeping it alive for a TTL),
    /// then takes it; [`Error::LockTimeout`] when the wait runs out first. Other failures
    /// are the API's errors (`not_leader` on a node that does not lead).
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
    /// use std::time::Duration;
    /// let options = conclave::LockOptions::default().wait(Duration::from_secs(5));
    /// match node.lock_with("report", options) {
    ///     Ok(guard) => println!("token {}", guard.token()),
    ///     Err(conclave::Error::LockTimeout { .. }) => println!("busy; try later"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_with(&self, name: &str, options: LockOptions) -> Result<LockGuard> {
        let key = format!("{LOCK_KEY_PREFIX}{name}");
        let sent = Instant::now();
        let session = grant(
            &self.store,
            api::SessionGrantRequest {
                ttl_ms: u64::try_from(options.ttl.as_millis()).unwrap_or(u64::MAX),
                name: Some(format!("lock {name}")),
                max_claims: None,
                request_id: None,
            },
        )?
        .session;
        let health = Arc::new(SessionHealth {
            ended: AtomicBool::new(false),
            last_answered: Mutex::new(sent),
        });
        let (keeper, stopped) = oneshot::channel();
        let task_health = Arc::clone(&health);
        let ttl = options.ttl;
        self.store.spawn(move |service| async move {
            keep_alive(service, session, ttl, task_health, stopped).await;
        });
        // From here on the guard exists: a failure below drops it, which revokes the session.
        let mut guard = LockGuard {
            store: self.store.clone(),
            key,
            session,
            token: 0,
            ttl,
            health,
            keeper: Some(keeper),
        };
        let value = format!("node {}, session {session}", self.id());
        let wanted = guard.key.clone();
        // A wait too long to be a moment on this clock is no deadline at all.
        let deadline = options
            .wait
            .and_then(|wait| Instant::now().checked_add(wait));
        let taken = self.store.run(move |service| async move {
            take(&service, &wanted, session, &value, deadline).await
        })?;
        match taken {
            Some(token) => {
                guard.token = token;
                Ok(guard)
            }
            None => Err(Error::LockTimeout {
                key: guard.key.clone(),
                waited: options.wait.unwrap_or_default(),
            }),
        }
    }
}

/// Keeps `session` alive every third of its TTL until `stopped` resolves (its sender dropped),
/// recording each answer in `health`.
async fn keep_alive(
    service: LogService,
    session: u64,
    ttl: Duration,
    health: Arc<SessionHealth>,
    mut stopped: oneshot::Receiver<()>,
) {
    let interval = ttl / KEEPALIVES_PER_TTL;
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            () = tokio::time::sleep(interval) => {}
        }
        let sent = Instant::now();
        match service.session_keepalive(session).await {
            Ok(_) => health.answered(sent),
            Err(error) if error.error == ErrorCode::NoSuchSession => {
                health.ended.store(true, Ordering::Relaxed);
                return;
            }
            // A lost leader, a busy one: `is_held` turns false once a TTL passes unanswered.
            Err(_) => {}
        }
    }
}

/// Creates `key` for `session` where it does not exist; while another holds it, waits for its
/// deletion and tries again. The fencing token, or `None` when `deadline` passed first.
async fn take(
    service: &LogService,
    key: &str,
    session: u64,
    value: &str,
    deadline: Option<Instant>,
) -> Answer<Option<u64>> {
    loop {
        let request = api::PutRequest {
            value: value.to_owned(),
            if_revision: Some(0),
            if_value: None,
            session: Some(session),
            request_id: None,
        };
        let refusal = match service.kv_put(key, request).await {
            Ok(written) => return Ok(Some(written.revision)),
            Err(refusal) => refusal,
        };
        let holder = match (refusal.error, refusal.current.clone()) {
            (ErrorCode::CompareFailed, Some(Some(kv))) if kv.session == Some(session) => {
                return Ok(Some(kv.create_revision));
            }
            (ErrorCode::CompareFailed, Some(holder)) => holder,
            _ => return Err(refusal),
        };
        // Deleted between the create and its answer: try again at once.
        let Some(holder) = holder else { continue };
        let released = released(service, key, holder.revision.saturating_add(1));
        match deadline {
            None => released.await?,
            Some(deadline) => match tokio::time::timeout_at(deadline, released).await {
                Ok(outcome) => outcome?,
                Err(_) => return Ok(None),
            },
        }
    }
}

/// Reads `key`'s changes from revision `from` on in this node's copy until one is its
/// deletion (or the history no longer reaches back, when only a new create can tell).
async fn released(service: &LogService, key: &str, mut from: u64) -> Answer<()> {
    let mut pause = FIRST_POLL;
    loop {
        match service.kv_changes(key, from).await? {
            Err(_compacted) => return Ok(()),
            Ok(changes) => {
                if changes
                    .iter()
                    .any(|change| matches!(change, KvWatchEvent::Delete(_)))
                {
                    return Ok(());
                }
                if let Some(last) = changes.last() {
                    from = last.revision().saturating_add(1);
                    pause = FIRST_POLL;
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LAST_POLL);
    }
}
