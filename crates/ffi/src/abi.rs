//! The C types of the ABI (EMB-2): the handle, the peer record, the callbacks, and the codes
//! the functions return and pass. The header is written from these (see [`crate::header`]).

use std::ffi::{c_char, c_void};

/// A running node, as C holds it: a number that is never reused, so a stale handle is
/// recognised and refused instead of pointing at freed memory. 0 is never a handle.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConclaveHandle(pub u64);

/// Bytes of `ConclavePeer::id`: the longest peer id (32 bytes, PROTO-1), its NUL, padding.
pub const PEER_ID_SIZE: usize = 36;

/// One peer of `GetPeerList`: its id (NUL-terminated), status and last round-trip time.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ConclavePeer {
    /// The peer id, NUL-terminated.
    pub id: [c_char; PEER_ID_SIZE],
    /// `CONCLAVE_PEER_CONNECTED` or `CONCLAVE_PEER_DISCONNECTED`.
    pub status: i32,
    /// The last round-trip time in microseconds; -1 until one was measured.
    pub rtt_us: i64,
}

/// Called on the callback thread when the leader this node knows changes.
pub type LeaderChangedCallback = Option<
    unsafe extern "C" fn(leader: *const c_char, term: u64, role: i32, user_data: *mut c_void),
>;

/// Called on the callback thread when a peer joins, leaves or changes status.
pub type PeerStatusCallback = Option<
    unsafe extern "C" fn(
        peer_id: *const c_char,
        old_status: i32,
        new_status: i32,
        user_data: *mut c_void,
    ),
>;

/// A `#define` of the header: name, value, doc line.
pub(crate) type Constant = (&'static str, i64, &'static str);

/// What every function returns: 0 or, for `IsLeader`, 1; a negative code on failure.
pub(crate) const STATUS_CODES: &[Constant] = &[
    ("CONCLAVE_OK", 0, "Success."),
    (
        "CONCLAVE_ERR_INVALID_ARGUMENT",
        -1,
        "A pointer argument is NULL, a string is not UTF-8, or a peer id breaks the id rules.",
    ),
    (
        "CONCLAVE_ERR_INVALID_HANDLE",
        -2,
        "The handle is 0, unknown, or its node was stopped with ConclaveStop.",
    ),
    (
        "CONCLAVE_ERR_CONFIG",
        -3,
        "The configuration is not TOML or was refused; the message lists every problem by key.",
    ),
    (
        "CONCLAVE_ERR_START",
        -4,
        "The node could not start: a port in use, a data directory another node holds, ...",
    ),
    (
        "CONCLAVE_ERR_STOPPED",
        -5,
        "The node has halted (its WAL failed) or is stopping.",
    ),
    (
        "CONCLAVE_ERR_REFUSED",
        -6,
        "The node refused: an election command (unknown peer, ...) or a lock (no log, not the leader).",
    ),
    (
        "CONCLAVE_ERR_BUFFER_TOO_SMALL",
        -7,
        "The caller's buffer is too small; what fits was written, NUL-terminated.",
    ),
    (
        "CONCLAVE_ERR_INTERNAL",
        -8,
        "A defect inside the library (a caught panic); the message says where.",
    ),
    (
        "CONCLAVE_ERR_TIMEOUT",
        -9,
        "ConclaveLock: another still held the lock when timeout_ms ran out.",
    ),
    (
        "CONCLAVE_ERR_NOT_HELD",
        -10,
        "ConclaveUnlock: the handle holds no lock of that name, or it was lost (its session ended).",
    ),
];

/// `role` of the leader-changed callback.
pub(crate) const ROLES: &[Constant] = &[
    (
        "CONCLAVE_ROLE_FOLLOWER",
        0,
        "Follows a leader or waits for one.",
    ),
    ("CONCLAVE_ROLE_CANDIDATE", 1, "Campaigns to lead."),
    ("CONCLAVE_ROLE_LEADER", 2, "Leads."),
];

/// A peer's status in `ConclavePeer` and the peer-status callback.
pub(crate) const PEER_STATUSES: &[Constant] = &[
    (
        "CONCLAVE_PEER_ABSENT",
        0,
        "Not in the peer table (as old status: it joined; as new: it left).",
    ),
    ("CONCLAVE_PEER_CONNECTED", 1, "Heard recently."),
    (
        "CONCLAVE_PEER_DISCONNECTED",
        2,
        "Silent too long; still probed.",
    ),
];

/// The value of the constant `name` in `table`.
const fn value(table: &[Constant], name: &str) -> i32 {
    let mut i = 0;
    while i < table.len() {
        if str_eq(table[i].0, name) {
            return table[i].1 as i32;
        }
        i += 1;
    }
    panic!("no such constant")
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

pub(crate) const OK: i32 = value(STATUS_CODES, "CONCLAVE_OK");
pub(crate) const ERR_INVALID_ARGUMENT: i32 = value(STATUS_CODES, "CONCLAVE_ERR_INVALID_ARGUMENT");
pub(crate) const ERR_INVALID_HANDLE: i32 = value(STATUS_CODES, "CONCLAVE_ERR_INVALID_HANDLE");
pub(crate) const ERR_CONFIG: i32 = value(STATUS_CODES, "CONCLAVE_ERR_CONFIG");
pub(crate) const ERR_START: i32 = value(STATUS_CODES, "CONCLAVE_ERR_START");
pub(crate) const ERR_STOPPED: i32 = value(STATUS_CODES, "CONCLAVE_ERR_STOPPED");
pub(crate) const ERR_REFUSED: i32 = value(STATUS_CODES, "CONCLAVE_ERR_REFUSED");
pub(crate) const ERR_BUFFER_TOO_SMALL: i32 = value(STATUS_CODES, "CONCLAVE_ERR_BUFFER_TOO_SMALL");
pub(crate) const ERR_INTERNAL: i32 = value(STATUS_CODES, "CONCLAVE_ERR_INTERNAL");
pub(crate) const ERR_TIMEOUT: i32 = value(STATUS_CODES, "CONCLAVE_ERR_TIMEOUT");
pub(crate) const ERR_NOT_HELD: i32 = value(STATUS_CODES, "CONCLAVE_ERR_NOT_HELD");

pub(crate) const ROLE_FOLLOWER: i32 = value(ROLES, "CONCLAVE_ROLE_FOLLOWER");
pub(crate) const ROLE_CANDIDATE: i32 = value(ROLES, "CONCLAVE_ROLE_CANDIDATE");
pub(crate) const ROLE_LEADER: i32 = value(ROLES, "CONCLAVE_ROLE_LEADER");

pub(crate) const PEER_ABSENT: i32 = value(PEER_STATUSES, "CONCLAVE_PEER_ABSENT");
pub(crate) const PEER_CONNECTED: i32 = value(PEER_STATUSES, "CONCLAVE_PEER_CONNECTED");
pub(crate) const PEER_DISCONNECTED: i32 = value(PEER_STATUSES, "CONCLAVE_PEER_DISCONNECTED");

/// The C code of a role.
pub(crate) fn role_code(role: embedded::Role) -> i32 {
    match role {
        embedded::Role::Follower => ROLE_FOLLOWER,
        embedded::Role::Candidate => ROLE_CANDIDATE,
        embedded::Role::Leader => ROLE_LEADER,
    }
}

/// The C code of a peer status; `None` is absent from the table.
pub(crate) fn peer_status_code(status: Option<embedded::PeerStatus>) -> i32 {
    match status {
        None => PEER_ABSENT,
        Some(embedded::PeerStatus::Connected) => PEER_CONNECTED,
        Some(embedded::PeerStatus::Disconnected) => PEER_DISCONNECTED,
    }
}
