//! `GET /v1/snapshot` as a typed call (MEMB-6, LOG-4, LOG-7): a consistent image of the state
//! machine at a committed index, in the saved-snapshot file of conclave-storage
//! ([`SnapshotBackup`]), for `conclave snapshot save`.
//!
//! - **Where.** By default on the leader, after the same read barrier as a linearizable read
//!   (a read index a heartbeat round confirmed, applied here): the image holds every write
//!   acknowledged before the request arrived. A node that does not lead answers `not_leader`
//!   with the redirect, as for a read. With `stale` any node answers from its own copy as it
//!   is — still a committed index, since only committed entries are applied.
//! - **Without stopping writes.** The read step only copies the state in memory (a clone of
//!   the store and the queue, at the index the barrier gave); the node goes on applying
//!   entries at once. Encoding the copy, hashing it and building the file happen on a blocking
//!   thread, off the node's event loop.
//! - **The term.** The image's term is the term of the entry at its index, read from the log
//!   just after the copy: that entry is committed, so its term cannot change. Should the log
//!   have been compacted past it meanwhile (its snapshot then covers a later index), the copy
//!   is taken again, a few times at most, then the client is told `busy`.

use std::time::SystemTime;

use conclave_api::{ErrorCode, Fencing};
use conclave_core::election::ModeStatus;
use conclave_core::raft::LogPosition;
use conclave_protocol::ClusterId;
use conclave_statemachine::{ClusterState, StateMachine};
use conclave_storage::{Checksum, SnapshotBackup};
use tracing::{info, warn};

use super::{Answer, LogService};
use crate::events::unix_millis;

/// Copies taken at most when the log is compacted past each one before its term is read.
const ATTEMPTS: usize = 3;

/// A saved snapshot, ready to be sent.
#[derive(Debug)]
pub struct SnapshotImage {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// The last entry the image covers.
    pub last: LogPosition,
    /// The checksum the file ends with.
    pub checksum: Checksum,
    /// The fencing token of the read that took it.
    pub fencing: Fencing,
}

impl LogService {
    /// `GET /v1/snapshot`: the state machine's image at a committed index (the leader's read
    /// index, or this node's applied index with `stale`), as a saved-snapshot file.
    pub async fn snapshot(&self, stale: bool) -> Answer<SnapshotImage> {
        for _ in 0..ATTEMPTS {
            let read = self.read(stale, ClusterState::clone).await?;
            let state = read.value;
            let index = state.applied_index();
            let Some(term) = self.term_at(index).await? else {
                continue;
            };
            let cluster = match self.node.status().await {
                Ok(status) => Some(status.cluster_id),
                Err(err) => return Err(self.unavailable(&err)),
            };
            let last = LogPosition::new(term, index);
            let (bytes, checksum) = self.encode(state, cluster, last, &read.fencing).await?;
            info!(index, term, bytes = bytes.len(), %checksum, stale, "snapshot served");
            return Ok(SnapshotImage {
                bytes,
                last,
                checksum,
                fencing: read.fencing,
            });
        }
        Err(self
            .error_now(
                ErrorCode::Busy,
                "the log was compacted past each copy of the state before its term could be \
                 read; retry",
            )
            .await)
    }

    /// The saved-snapshot file of a copy of the state at `last`, encoded and hashed on a
    /// blocking thread, off the node's event loop.
    async fn encode(
        &self,
        state: ClusterState,
        cluster: Option<ClusterId>,
        last: LogPosition,
        fencing: &Fencing,
    ) -> Answer<(Vec<u8>, Checksum)> {
        let taken_at_unix_ms = unix_millis(SystemTime::now());
        let encoded = actix_rt::task::spawn_blocking(move || {
            let image = state.snapshot()?;
            let backup = SnapshotBackup {
                cluster,
                last,
                taken_at_unix_ms,
                image,
            };
            Ok::<_, conclave_statemachine::Error>(backup.encode())
        })
        .await;
        let message = match encoded {
            Ok(Ok(encoded)) => return Ok(encoded),
            Ok(Err(err)) => {
                warn!(%err, index = last.index, "the state machine could not be snapshotted");
                format!("the state machine could not be snapshotted: {err}")
            }
            Err(err) => format!("the snapshot's encoding did not finish: {err}"),
        };
        Err(self.error(ErrorCode::Internal, message, Some(fencing.clone())))
    }

    /// The term of the committed entry at `index`: from the log, or from its snapshot when
    /// that ends there; `None` when the log was compacted past it.
    async fn term_at(&self, index: u64) -> Answer<Option<u64>> {
        if index == 0 {
            return Ok(Some(0));
        }
        let entries = self
            .node
            .committed_entries(index, 1)
            .await
            .map_err(|err| self.unavailable(&err))?;
        if let Ok(read) = &entries.outcome {
            if let Some(entry) = read.entries.first().filter(|entry| entry.index == index) {
                return Ok(Some(entry.term));
            }
        }
        let status = self
            .node
            .election_status()
            .await
            .map_err(|err| self.unavailable(&err))?;
        let compacted_at = match status.detail {
            ModeStatus::Raft(raft) => raft.log.map(|log| log.snapshot),
            _ => None,
        };
        Ok(compacted_at
            .filter(|snapshot| snapshot.index == index)
            .map(|snapshot| snapshot.term))
    }
}
