//! What can fail across the C boundary, as a status code and a message (EMB-2): every
//! function's body runs inside [`guard`], which turns an error into its code, keeps its
//! message for `ConclaveLastError`, and catches any panic before it reaches C.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FfiError {
    /// A pointer argument was NULL.
    #[error("{0} is NULL")]
    Null(&'static str),
    /// A string argument was not UTF-8.
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    /// A peer id broke the id rules.
    #[error("{what}: {source}")]
    BadId {
        /// Which argument.
        what: &'static str,
        /// Why.
        #[source]
        source: embedded::IdError,
    },
    /// The handle is not one of a running node.
    #[error("handle {0} is not a running node (0, unknown, or stopped with ConclaveStop)")]
    Handle(u64),
    /// The node is stopping: another thread called `ConclaveStop`.
    #[error("the node is stopping")]
    Stopping,
    /// The node's election has halted (its WAL could not be written).
    #[error("the node has halted (its WAL could not be written; see its log)")]
    Halted,
    /// The embedding API failed.
    #[error(transparent)]
    Embedded(#[from] embedded::Error),
    /// `ConclaveUnlock` of a lock the handle does not hold.
    #[error("this handle holds no lock {0:?} (never taken, or unlocked already)")]
    NotHeld(String),
    /// `ConclaveUnlock` of a lock whose session had ended: it was lost while held.
    #[error(
        "lock {0:?} was lost before it was unlocked: its session ended (no keepalive reached \
         the leader within its TTL, or it was revoked), and another may have held it since"
    )]
    Lost(String),
    /// A caller's buffer was too small.
    #[error("{what} needs {needed} bytes; the buffer holds {given}")]
    BufferTooSmall {
        /// Which buffer.
        what: &'static str,
        /// What it would take.
        needed: usize,
        /// What it holds.
        given: usize,
    },
    /// The callback thread could not be created.
    #[error("cannot start the callback thread: {0}")]
    Thread(#[source] std::io::Error),
    /// A panic was caught at the boundary.
    #[error("internal error in {function}: {message}")]
    Panic {
        /// The C function.
        function: &'static str,
        /// The panic's message.
        message: String,
    },
}

impl FfiError {
    /// The status code C sees.
    pub(crate) fn code(&self) -> i32 {
        use embedded::Error as E;
        match self {
            FfiError::Null(_) | FfiError::NotUtf8(_) | FfiError::BadId { .. } => {
                abi::ERR_INVALID_ARGUMENT
            }
            FfiError::Handle(_) => abi::ERR_INVALID_HANDLE,
            FfiError::Stopping | FfiError::Halted => abi::ERR_STOPPED,
            FfiError::Embedded(E::Settings(_) | E::Config(_)) => abi::ERR_CONFIG,
            FfiError::Embedded(E::Id(_)) => abi::ERR_INVALID_ARGUMENT,
            FfiError::Embedded(E::Node(embedded::NodeError::Stopped)) => abi::ERR_STOPPED,
            FfiError::Embedded(E::Node(_)) => abi::ERR_START,
            // The log's refusals of a lock (not the leader, no log, ...) and the election's.
            FfiError::Embedded(E::Refused(_) | E::Api(_)) => abi::ERR_REFUSED,
            FfiError::Embedded(E::LockTimeout { .. }) => abi::ERR_TIMEOUT,
            FfiError::NotHeld(_) | FfiError::Lost(_) => abi::ERR_NOT_HELD,
            FfiError::BufferTooSmall { .. } => abi::ERR_BUFFER_TOO_SMALL,
            FfiError::Embedded(E::Thread(_) | E::ThreadLost)
            | FfiError::Thread(_)
            | FfiError::Panic { .. } => abi::ERR_INTERNAL,
        }
    }
}

thread_local! {
    /// The message of the last failed call on this thread.
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The message of the last failed call on this thread ("" when none failed yet).
pub(crate) fn last_error() -> String {
    LAST_ERROR.with(|last| last.borrow().clone())
}

fn set_last_error(message: String) {
    LAST_ERROR.with(|last| *last.borrow_mut() = message);
}

/// Runs one C function's body: its value (0, or `IsLeader`'s 1) on success, the error's code
/// on failure with the message kept for `ConclaveLastError`, and `CONCLAVE_ERR_INTERNAL` for a
/// panic, which never unwinds into C.
pub(crate) fn guard(function: &'static str, body: impl FnOnce() -> Result<i32, FfiError>) -> i32 {
    // Unwind safety: a panic leaves no half-changed state that C could observe afterwards;
    // the registry and the callbacks recover from poisoned locks.
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        Err(FfiError::Panic {
            function,
            message: panic_message(payload.as_ref()),
        })
    });
    match outcome {
        Ok(value) => value,
        Err(err) => {
            let code = err.code();
            let message = match &err {
                FfiError::Embedded(_) | FfiError::Panic { .. } => err.to_string(),
                _ => format!("{function}: {err}"),
            };
            set_last_error(message);
            code
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EMB-2: a panic is caught at the boundary and reported as an internal error.
    #[test]
    fn a_panic_becomes_an_error_code() {
        let code = guard("Test", || panic!("the sky fell"));
        assert_eq!(code, abi::ERR_INTERNAL);
        assert_eq!(last_error(), "internal error in Test: the sky fell");
    }

    /// EMB-2: an error's code is returned and its message kept; a success keeps the last
    /// failure's message.
    #[test]
    fn an_error_is_a_code_and_a_message() {
        assert_eq!(
            guard("SetLeader", || Err(FfiError::Null("peer_id"))),
            abi::ERR_INVALID_ARGUMENT
        );
        assert_eq!(guard("IsLeader", || Ok(1)), 1);
        assert_eq!(last_error(), "SetLeader: peer_id is NULL");
    }
}
