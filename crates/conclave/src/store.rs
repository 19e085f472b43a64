//! The replicated log's key-value store and job queue through a node in this process (LOG-5,
//! LOG-8): [`Node::kv`] and [`Node::jobs`] take the same requests and give the same answers
//! as the admin API (the types of [`crate::api`]), because they run the same operations
//! (conclave-actors' `LogService`) — only without HTTP.
//!
//! Each call runs on the node's own event loop and waits for its answer on the calling
//! thread, as the façade's other calls do. A node that does not lead refuses a write, or a
//! linearizable read, with the API's `not_leader` error, naming the leader (and its admin API
//! when `admin.peer_urls` lists it); a stale read works on any node.

use std::collections::BTreeMap;
use std::future::Future;

use conclave_actors::log_service::{Answer, LogService};
use conclave_actors::node::{NodeError, NodeHandle};
use conclave_api as api;
use conclave_protocol::PeerId;
use tokio::sync::oneshot;

use crate::block::block_on;
use crate::error::{Error, Result};
use crate::node::Node;

/// The operations of one node, and the event loop they run on.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    service: LogService,
    arbiter: actix_rt::ArbiterHandle,
}

impl Store {
    pub(crate) fn new(
        node: NodeHandle,
        peer_urls: BTreeMap<PeerId, String>,
        arbiter: actix_rt::ArbiterHandle,
    ) -> Self {
        Self {
            service: LogService::new(node, peer_urls),
            arbiter,
        }
    }

    /// Runs `call` on the node's event loop (its timers are that loop's) and waits here for
    /// the answer.
    pub(crate) fn run<T, F, Fut>(&self, call: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(LogService) -> Fut + Send + 'static,
        Fut: Future<Output = Answer<T>> + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let service = self.service.clone();
        let started = self.arbiter.spawn_fn(move || {
            actix_rt::spawn(async move {
                let _ = answer.send(call(service).await);
            });
        });
        if !started {
            return Err(Error::Node(NodeError::Stopped));
        }
        match block_on(answered) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(Error::Api(error)),
            Err(_) => Err(Error::Node(NodeError::Stopped)),
        }
    }

    /// Starts `task` on the node's event loop, to run on its own; `false` when the node has
    /// stopped.
    pub(crate) fn spawn<F, Fut>(&self, task: F) -> bool
    where
        F: FnOnce(LogService) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let service = self.service.clone();
        self.arbiter.spawn_fn(move || {
            actix_rt::spawn(task(service));
        })
    }
}

/// The replicated key-value store, through one node: [`Node::kv`].
///
/// ```no_run
/// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
/// let written = node.kv().put("config/db", "postgres://db-2")?;
/// let read = node.kv().get("config/db")?;
/// assert_eq!(read.kv.value, "postgres://db-2");
/// assert!(read.kv.revision >= written.revision);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Kv<'node> {
    node: &'node Node,
}

impl Kv<'_> {
    /// Sets `key` to `value` (`PUT /v1/kv/{key}` without comparisons or request id).
    pub fn put(&self, key: &str, value: impl Into<String>) -> Result<api::KvWriteAnswer> {
        self.put_with(
            key,
            api::PutRequest {
                value: value.into(),
                if_revision: None,
                if_value: None,
                session: None,
                request_id: None,
            },
        )
    }

    /// Sets `key` as `request` says: with comparisons (a failed one is the error
    /// `compare_failed`, with the key as it is) and a request id applied at most once.
    pub fn put_with(&self, key: &str, request: api::PutRequest) -> Result<api::KvWriteAnswer> {
        let key = key.to_owned();
        self.node
            .store
            .run(move |service| async move { service.kv_put(&key, request).await })
    }

    /// The key, read linearizably on the leader (`not_found` when it is absent).
    pub fn get(&self, key: &str) -> Result<api::KvGetAnswer> {
        self.read(key, false)
    }

    /// The key as this node's copy holds it now, on any node.
    pub fn get_stale(&self, key: &str) -> Result<api::KvGetAnswer> {
        self.read(key, true)
    }

    fn read(&self, key: &str, stale: bool) -> Result<api::KvGetAnswer> {
        let key = key.to_owned();
        self.node
            .store
            .run(move |service| async move { service.kv_get(&key, stale).await })
    }

    /// Deletes `key` (`not_found` when it is absent).
    pub fn delete(&self, key: &str, query: api::KvDeleteQuery) -> Result<api::KvWriteAnswer> {
        let key = key.to_owned();
        self.node
            .store
            .run(move |service| async move { service.kv_delete(&key, query).await })
    }

    /// One page of the keys starting with `query.prefix`; pass the answer's `continue_from`
    /// back for the next one.
    pub fn list(&self, query: api::KvListQuery) -> Result<api::KvListAnswer> {
        self.node
            .store
            .run(move |service| async move { service.kv_list(&query).await })
    }
}

/// The replicated job queue, through one node: [`Node::jobs`].
///
/// ```no_run
/// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
/// use conclave::api::{AckRequest, ClaimRequest, EnqueueRequest};
/// let jobs = node.jobs();
/// jobs.enqueue(EnqueueRequest {
///     payload: "resize photo 7".into(),
///     queue: None,
///     max_attempts: None,
///     request_id: None,
/// })?;
/// // Waits up to 30 s for a job when none is ready (`wait_ms`).
/// let claimed = jobs.claim(ClaimRequest {
///     worker: "worker-1".into(),
///     queue: None,
///     lease_ms: Some(60_000),
///     session: None,
///     request_id: None,
///     wait_ms: Some(30_000),
/// })?;
/// // ... do the work, then:
/// jobs.ack(claimed.job.id, AckRequest { worker: "worker-1".into(), request_id: None })?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Jobs<'node> {
    node: &'node Node,
}

impl Jobs<'_> {
    /// Puts a job in a queue.
    pub fn enqueue(&self, request: api::EnqueueRequest) -> Result<api::JobAnswer> {
        self.node
            .store
            .run(move |service| async move { service.enqueue(request).await })
    }

    /// Gives the oldest ready job of a queue to a worker (`none_ready` when there is none).
    ///
    /// With `wait_ms`, a claim that finds no job ready blocks the calling thread until one
    /// becomes ready (and is claimed) or `wait_ms` has passed (`none_ready`), at most
    /// [`api::MAX_CLAIM_WAIT_MS`]; it waits on the leader, so a node that does not lead, or
    /// stops leading meanwhile, answers `not_leader` naming the leader: claim there.
    pub fn claim(&self, request: api::ClaimRequest) -> Result<api::JobAnswer> {
        self.node
            .store
            .run(move |service| async move { service.claim(request).await })
    }

    /// The worker finished the job: it never runs again.
    pub fn ack(&self, job: u64, request: api::AckRequest) -> Result<api::JobAnswer> {
        self.node
            .store
            .run(move |service| async move { service.ack(job, request).await })
    }

    /// The worker gives the job back: ready again, or dead once its attempts are used up.
    pub fn nack(&self, job: u64, request: api::NackRequest) -> Result<api::JobAnswer> {
        self.node
            .store
            .run(move |service| async move { service.nack(job, request).await })
    }

    /// A dead job back in its queue, its attempts reset.
    pub fn retry(&self, job: u64, request: api::RetryRequest) -> Result<api::JobAnswer> {
        self.node
            .store
            .run(move |service| async move { service.retry(job, request).await })
    }

    /// Deletes every dead job (of a queue).
    pub fn purge(&self, request: api::PurgeRequest) -> Result<api::PurgeAnswer> {
        self.node
            .store
            .run(move |service| async move { service.purge(request).await })
    }

    /// One page of the jobs (of a state), by id.
    pub fn list(&self, query: api::JobListQuery) -> Result<api::JobListAnswer> {
        self.node
            .store
            .run(move |service| async move { service.jobs_list(&query).await })
    }
}

/// A backup of the replicated state (MEMB-6): the file `conclave snapshot save` writes, which
/// `conclave snapshot status` checks and `conclave snapshot restore` seeds a new cluster from.
#[derive(Debug, Clone)]
pub struct Backup {
    /// The file's bytes: header, the state machine's image, and its SHA-256.
    pub bytes: Vec<u8>,
    /// The last log index the image covers (a committed one).
    pub index: u64,
    /// The term of the entry at that index.
    pub term: u64,
    /// The checksum the file ends with, as 64 lowercase hex digits.
    pub sha256: String,
}

impl Node {
    /// A backup of the replicated state (MEMB-6), as `GET /v1/snapshot` answers it: on the
    /// leader after a read barrier, so it holds every write acknowledged before the call
    /// (another node refuses with `not_leader`), or with `stale` this node's own copy at its
    /// applied index. Writes go on meanwhile; write [`Backup::bytes`] to a file to keep it.
    pub fn backup(&self, stale: bool) -> Result<Backup> {
        let image = self
            .store
            .run(move |service| async move { service.snapshot(stale).await })?;
        Ok(Backup {
            bytes: image.bytes,
            index: image.last.index,
            term: image.last.term,
            sha256: image.checksum.to_string(),
        })
    }

    /// The replicated key-value store through this node (the node runs with
    /// `log.enabled = true`; otherwise every call is the error `log_disabled`).
    pub fn kv(&self) -> Kv<'_> {
        Kv { node: self }
    }

    /// The replicated job queue through this node (with `log.enabled = true`).
    pub fn jobs(&self) -> Jobs<'_> {
        Jobs { node: self }
    }
}
