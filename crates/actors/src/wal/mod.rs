//! The WAL actor (WAL-4): the node's [`WalFile`](conclave_storage::WalFile) on a thread of
//! its own, so that writes and fsyncs never block an event loop, answering [`Persist`] once
//! the records are durable (WAL-1). The file itself — format, recovery, corruption rules,
//! the data-directory lock, inspect and repair — lives in `conclave-storage`, which is
//! synchronous and knows nothing of actix. The actor reaches it through [`WalStorage`]: raft's
//! `Storage` trait and the WAL's own records.
//!
//! Start-up order: `WalFile::open` on the node's start path (it blocks, once), hand the
//! `Recovered` state to the election core (an amnesic WAL makes it abstain), then
//! [`WalActor::start_on_thread`] with the file.

mod actor;
mod storage;
mod writer;

pub use actor::{
    AppendLog, CloseWal, EventLoop, History, OwnThread, Persist, SaveSnapshot, WalActor,
};
pub use storage::WalStorage;
