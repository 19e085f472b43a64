//! The running nodes behind the handles C holds (EMB-2): a handle is a number, never reused,
//! looked up in one table, so a NULL, unknown or stopped handle is refused with an error
//! instead of being dereferenced.
//!
//! Each entry owns its node and the callbacks registered on it. The table's lock is held
//! only to find or remove an entry; a node's lock is held only for one query or to take the
//! node out at `ConclaveStop`; no lock is held while a callback runs. A callback may therefore
//! call any function of the ABI, on its own node too.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::{JoinHandle, ThreadId};

use crate::abi::{ConclaveHandle, LeaderChangedCallback, PeerStatusCallback};
use crate::error::FfiError;

/// The host's `user_data`, handed back to its callbacks on the callback thread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UserData(pub(crate) *mut c_void);

// SAFETY: the pointer is never dereferenced here, only passed back to the host's own
// callback; the header's rules tell the host that its callbacks (and so this pointer) are
// used on the library's callback thread.
unsafe impl Send for UserData {}

/// The callbacks registered on one node, each with its `user_data`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Callbacks {
    pub(crate) leader_changed: Option<(LeaderChangedCallback, UserData)>,
    pub(crate) peer_status: Option<(PeerStatusCallback, UserData)>,
}

/// One running node.
#[derive(Debug)]
pub(crate) struct Entry {
    /// `None` once `ConclaveStop` took it.
    pub(crate) node: RwLock<Option<embedded::Node>>,
    pub(crate) callbacks: Mutex<Callbacks>,
    /// The thread that calls the callbacks, and its id (a stop called from a callback must
    /// not wait for itself).
    pub(crate) dispatcher: Mutex<Option<(JoinHandle<()>, ThreadId)>>,
    /// The locks taken with `ConclaveLock` and not yet unlocked, by name.
    pub(crate) locks: Mutex<BTreeMap<String, embedded::LockGuard>>,
}

impl Entry {
    /// Runs `query` on the node, or fails if it is being stopped.
    pub(crate) fn with_node<T>(
        &self,
        query: impl FnOnce(&embedded::Node) -> Result<T, FfiError>,
    ) -> Result<T, FfiError> {
        let node = self.node.read().unwrap_or_else(PoisonError::into_inner);
        query(node.as_ref().ok_or(FfiError::Stopping)?)
    }

    /// The callbacks as they are now.
    pub(crate) fn callbacks(&self) -> Callbacks {
        *self
            .callbacks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The locks held, to change.
    pub(crate) fn locks(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, embedded::LockGuard>> {
        self.locks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the callbacks.
    pub(crate) fn set_callbacks(&self, change: impl FnOnce(&mut Callbacks)) {
        change(
            &mut self
                .callbacks
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
    }
}

/// Every running node by handle, and the next handle.
struct Table {
    next: u64,
    entries: BTreeMap<ConclaveHandle, Arc<Entry>>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    next: 1,
    entries: BTreeMap::new(),
});

fn table() -> std::sync::MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Adds `entry` under a new handle.
pub(crate) fn insert(entry: Arc<Entry>) -> ConclaveHandle {
    let mut table = table();
    let handle = ConclaveHandle(table.next);
    table.next += 1;
    table.entries.insert(handle, entry);
    handle
}

/// The entry of a running node.
pub(crate) fn get(handle: ConclaveHandle) -> Result<Arc<Entry>, FfiError> {
    table()
        .entries
        .get(&handle)
        .cloned()
        .ok_or(FfiError::Handle(handle.0))
}

/// Takes the entry out: from now on the handle is refused.
pub(crate) fn remove(handle: ConclaveHandle) -> Result<Arc<Entry>, FfiError> {
    table()
        .entries
        .remove(&handle)
        .ok_or(FfiError::Handle(handle.0))
}
