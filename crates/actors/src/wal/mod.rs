//! The WAL actor (WAL-4): the node's [`WalFile`](conclave_storage::WalFile) on a thread of
//! its own, so that writes and fsyncs never block an event loop, answering [`Persist`] once
//! the records are durable (WAL-1). The file itself — format, recovery, corruption rules,
//! the data-directory lock, inspect and repair — lives in `conclave-storage`, which is
//! synchronous and knows nothing of actix.
//!
//! Start-up order: `WalFile::open` on the node's start path (it blocks, once), hand the
//! `Recovered` state to the election core (an amnesic WAL makes it abstain), then
//! [`WalActor::start`] with the file.

mod actor;

pub use actor::{AppendLog, CloseWal, History, InlineWalActor, Persist, SaveSnapshot, WalActor};
