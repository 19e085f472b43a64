//! The functions of the C ABI (EMB-2), with seed 000's names. Each is declared once, in the
//! [`c_api!`] block below: the macro makes it an exported `extern "C"` function whose body
//! runs inside [`guard`] (status code, last error, no panic across the boundary), and records
//! its name, parameters (their C types come from [`CType`]) and doc lines for the header.

use std::ffi::{CStr, c_char, c_void};
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex, Once, RwLock};

use crate::abi::{
    self, ConclaveHandle, ConclavePeer, LeaderChangedCallback, PEER_ID_SIZE, PeerStatusCallback,
};
use crate::error::{FfiError, guard, last_error};
#[cfg(test)]
use crate::header::{CType, Function};
use crate::registry::{self, Entry, UserData};

/// Declares the exported functions and [`FUNCTIONS`], their description for the header.
macro_rules! c_api {
    ($(
        $(#[doc = $doc:literal])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block
    )*) => {
        $(
            $(#[doc = $doc])*
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> i32 {
                guard(stringify!($name), || $body)
            }
        )*

        /// Every exported function, in the header's order.
        #[cfg(test)]
        pub(crate) const FUNCTIONS: &[Function] = &[$(
            Function {
                name: stringify!($name),
                doc: &[$($doc),*],
                params: &[$((<$ty as CType>::NAME, stringify!($arg))),*],
            }
        ),*];
    };
}

c_api! {
    /// Starts a node from the TOML text `config_toml` (the same keys and checks as
    /// `conclave check-config`; the process environment is not read) and stores its handle
    /// in `*handle`. Returns once the node runs: its WAL is open (its data directory locked)
    /// and its sockets bound. Set admin.listen and metrics.listen to "" unless the program
    /// wants those servers.
    fn ConclaveStart(config_toml: *const c_char, handle: *mut ConclaveHandle) {
        if handle.is_null() {
            return Err(FfiError::Null("handle"));
        }
        // SAFETY: checked for NULL just above; the caller provides a NUL-terminated string
        // (header rules), which is copied before this returns.
        let toml = unsafe { string_arg(config_toml, "config_toml") }?;
        install_log();
        let config = embedded::config::from_toml_str(&toml)?;
        let node = embedded::Node::start(config)?;
        let events = node.subscribe();
        let entry = Arc::new(Entry {
            node: RwLock::new(Some(node)),
            callbacks: Mutex::default(),
            dispatcher: Mutex::new(None),
            locks: Mutex::default(),
        });
        let weak = Arc::downgrade(&entry);
        let dispatcher = std::thread::Builder::new()
            .name("conclave events".to_owned())
            .spawn(move || crate::dispatch::run(events, weak))
            .map_err(FfiError::Thread)?;
        let id = dispatcher.thread().id();
        *entry.dispatcher.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((dispatcher, id));
        let new_handle = registry::insert(entry);
        // SAFETY: `handle` is not NULL (checked above) and points to a ConclaveHandle the
        // caller owns (header rules).
        unsafe { handle.write(new_handle) };
        Ok(abi::OK)
    }

    /// Stops the node gracefully, as SIGTERM stops the daemon: a leader hands leadership to
    /// a caught-up peer first, peers are told goodbye, the WAL is closed. Returns once the
    /// node has stopped and its callback thread has delivered its last event (unless called
    /// from a callback, which returns without waiting for its own thread). The handle is
    /// refused from then on. Locks the handle holds are released first. A ConclaveLock
    /// waiting on another thread is waited for.
    fn ConclaveStop(handle: ConclaveHandle) {
        let entry = registry::remove(handle)?;
        // Released while the node still runs: their sessions are revoked, their keys deleted.
        let locks = std::mem::take(&mut *entry.locks());
        drop(locks);
        let node = entry
            .node
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(node) = node {
            node.stop();
        }
        let dispatcher = entry
            .dispatcher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some((thread, id)) = dispatcher {
            if id != std::thread::current().id() {
                let _ = thread.join();
            }
        }
        Ok(abi::OK)
    }

    /// Makes `peer_id` the leader (force master): a leadership transfer; asked of a follower,
    /// the request goes to the leader it knows. Returns once the request is under way; the
    /// leader-changed callback says when it took effect.
    fn SetLeader(handle: ConclaveHandle, peer_id: *const c_char) {
        // SAFETY: the caller provides NULL or a NUL-terminated string (header rules).
        let peer = unsafe { string_arg(peer_id, "peer_id") }?;
        let peer = peer
            .parse()
            .map_err(|source| FfiError::BadId { what: "peer_id", source })?;
        registry::get(handle)?.with_node(|node| Ok(node.set_leader(peer)?))?;
        Ok(abi::OK)
    }

    /// Switches automatic elections on or off (recorded in the WAL; outlives restarts).
    fn EnableAutoLeaderElection(handle: ConclaveHandle, enabled: bool) {
        registry::get(handle)?.with_node(|node| Ok(node.enable_auto_election(enabled)?))?;
        Ok(abi::OK)
    }

    /// The leader this node knows, written to `leader` (NUL-terminated; "" when none is
    /// known), and its term to `*term`: together the fencing token. `leader_len` is the
    /// buffer's size; CONCLAVE_PEER_ID_SIZE always suffices.
    fn GetCurrentLeader(
        handle: ConclaveHandle,
        leader: *mut c_char,
        leader_len: usize,
        term: *mut u64,
    ) {
        if leader.is_null() {
            return Err(FfiError::Null("leader"));
        }
        if term.is_null() {
            return Err(FfiError::Null("term"));
        }
        let status = registry::get(handle)?.with_node(|node| Ok(node.status()?))?;
        let name = status.election.leader.map(|l| l.to_string()).unwrap_or_default();
        // SAFETY: `term` is not NULL (checked above) and points to a uint64_t the caller owns.
        unsafe { term.write(status.election.term) };
        // SAFETY: `leader` is not NULL and the caller owns `leader_len` bytes there.
        unsafe { write_string(&name, leader, leader_len, "leader") }?;
        Ok(abi::OK)
    }

    /// 1 when this node leads, 0 when it does not; CONCLAVE_ERR_STOPPED once the node has
    /// halted (its WAL could not be written), another negative code on other failures.
    fn IsLeader(handle: ConclaveHandle) {
        let leads = registry::get(handle)?.with_node(|node| {
            if node.is_running() {
                Ok(node.is_leader())
            } else {
                Err(FfiError::Halted)
            }
        })?;
        Ok(i32::from(leads))
    }

    /// The peer table: at most `capacity` peers are written to `peers`, and `*count` is
    /// set to the number of peers in the table. When that is more than `capacity`, the
    /// first `capacity` are written and CONCLAVE_ERR_BUFFER_TOO_SMALL is returned. `peers`
    /// may be NULL when `capacity` is 0 (to ask for the count).
    fn GetPeerList(
        handle: ConclaveHandle,
        peers: *mut ConclavePeer,
        capacity: usize,
        count: *mut usize,
    ) {
        if count.is_null() {
            return Err(FfiError::Null("count"));
        }
        if peers.is_null() && capacity > 0 {
            return Err(FfiError::Null("peers"));
        }
        let table = registry::get(handle)?.with_node(|node| Ok(node.peers()?))?;
        let written = table.len().min(capacity);
        // The caller's records may be uninitialised: they are only ever written.
        let out: &mut [MaybeUninit<ConclavePeer>] = if written == 0 {
            &mut []
        } else {
            // SAFETY: `peers` is not NULL (capacity > 0 here) and holds `capacity` records
            // the caller owns (header rules); `written <= capacity`; MaybeUninit makes no
            // claim about their contents.
            unsafe { std::slice::from_raw_parts_mut(peers.cast(), written) }
        };
        for (slot, peer) in out.iter_mut().zip(&table) {
            slot.write(ConclavePeer {
                id: peer_id_field(&peer.id.to_string()),
                status: abi::peer_status_code(Some(peer.status)),
                rtt_us: peer
                    .rtt
                    .map_or(-1, |rtt| i64::try_from(rtt.as_micros()).unwrap_or(i64::MAX)),
            });
        }
        // SAFETY: `count` is not NULL (checked above) and points to a size_t the caller owns.
        unsafe { count.write(table.len()) };
        if table.len() > capacity {
            return Err(FfiError::BufferTooSmall {
                what: "the peer list",
                needed: table.len(),
                given: capacity,
            });
        }
        Ok(abi::OK)
    }

    /// Registers the function called on the callback thread for each peer that joins,
    /// leaves or changes status (replacing any earlier one; NULL unregisters). Its strings
    /// live until it returns.
    fn RegisterPeerStatusCallback(
        handle: ConclaveHandle,
        callback: PeerStatusCallback,
        user_data: *mut c_void,
    ) {
        registry::get(handle)?.set_callbacks(|callbacks| {
            callbacks.peer_status = callback.map(|cb| (Some(cb), UserData(user_data)));
        });
        Ok(abi::OK)
    }

    /// Registers the function called on the callback thread each time the leader this node
    /// knows changes, with the new leader ("" when none), its term and this node's role
    /// (replacing any earlier one; NULL unregisters). Its strings live until it returns.
    fn RegisterLeaderChangedCallback(
        handle: ConclaveHandle,
        callback: LeaderChangedCallback,
        user_data: *mut c_void,
    ) {
        registry::get(handle)?.set_callbacks(|callbacks| {
            callbacks.leader_changed = callback.map(|cb| (Some(cb), UserData(user_data)));
        });
        Ok(abi::OK)
    }

    /// Takes the cluster-wide lock `name` (the key conclave/locks/NAME of the replicated
    /// log, the lock `conclave lock NAME` takes) and writes its fencing token to `*token`:
    /// the store revision at which the lock was taken, larger for every later holder. Waits
    /// while another holds it (this handle too, if it holds `name` already), at most
    /// `timeout_ms` (0: try once; UINT64_MAX: as long as it takes), then
    /// CONCLAVE_ERR_TIMEOUT. The lock's session is kept alive by the library
    /// until ConclaveUnlock or ConclaveStop; if this process dies, the lock ends one session
    /// TTL (10 s) later. Served by this node: needs log.enabled = true, and the node must
    /// lead (CONCLAVE_ERR_REFUSED otherwise, the message naming the leader).
    fn ConclaveLock(
        handle: ConclaveHandle,
        name: *const c_char,
        timeout_ms: u64,
        token: *mut u64,
    ) {
        if token.is_null() {
            return Err(FfiError::Null("token"));
        }
        // SAFETY: the caller provides NULL or a NUL-terminated string (header rules).
        let name = unsafe { string_arg(name, "name") }?;
        let mut options = embedded::LockOptions::default();
        if timeout_ms != u64::MAX {
            options = options.wait(std::time::Duration::from_millis(timeout_ms));
        }
        let entry = registry::get(handle)?;
        let guard = entry.with_node(|node| Ok(node.lock_with(&name, options)?))?;
        let value = guard.token();
        // A guard left under this name was lost (another took the lock since): dropped
        // outside the table's lock, it tries to revoke its ended session.
        let lost = entry.locks().insert(name, guard);
        drop(lost);
        // SAFETY: `token` is not NULL (checked above) and points to a uint64_t the caller owns.
        unsafe { token.write(value) };
        Ok(abi::OK)
    }

    /// Releases the lock `name` taken with ConclaveLock on this handle: its session is
    /// revoked and the key deleted, and the next waiter takes it. CONCLAVE_ERR_NOT_HELD when
    /// the handle does not hold it, or when it was lost meanwhile (its session ended: the
    /// message says so, and whatever the lock protected may have been changed by another).
    fn ConclaveUnlock(handle: ConclaveHandle, name: *const c_char) {
        // SAFETY: the caller provides NULL or a NUL-terminated string (header rules).
        let name = unsafe { string_arg(name, "name") }?;
        let entry = registry::get(handle)?;
        let guard = entry.locks().remove(&name);
        let guard = guard.ok_or_else(|| FfiError::NotHeld(name.clone()))?;
        match guard.release() {
            Ok(_) => Ok(abi::OK),
            Err(embedded::Error::Api(error))
                if error.error == embedded::api::ErrorCode::NoSuchSession =>
            {
                Err(FfiError::Lost(name))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Writes the message of the last call on this thread that failed into `message`
    /// (NUL-terminated, "" when none failed), truncated to `message_len` bytes with
    /// CONCLAVE_ERR_BUFFER_TOO_SMALL when it does not fit. Does not change the message.
    fn ConclaveLastError(message: *mut c_char, message_len: usize) {
        if message.is_null() {
            return Err(FfiError::Null("message"));
        }
        let text = last_error();
        // SAFETY: `message` is not NULL and the caller owns `message_len` bytes there.
        let written = unsafe { write_string(&text, message, message_len, "message") };
        match written {
            Ok(()) => Ok(abi::OK),
            // Reporting this failure would overwrite the very message being read.
            Err(_) => Ok(abi::ERR_BUFFER_TOO_SMALL),
        }
    }
}

/// Copies the NUL-terminated string at `ptr`.
///
/// # Safety
///
/// `ptr` is NULL or points to a NUL-terminated string that stays valid during the call.
unsafe fn string_arg(ptr: *const c_char, what: &'static str) -> Result<String, FfiError> {
    if ptr.is_null() {
        return Err(FfiError::Null(what));
    }
    // SAFETY: not NULL, and NUL-terminated and valid per this function's contract.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str()
        .map(str::to_owned)
        .map_err(|_| FfiError::NotUtf8(what))
}

/// Writes `text` NUL-terminated into the caller's buffer; what fits when it does not.
///
/// # Safety
///
/// `buffer` is not NULL and points to `len` writable bytes.
unsafe fn write_string(
    text: &str,
    buffer: *mut c_char,
    len: usize,
    what: &'static str,
) -> Result<(), FfiError> {
    if len == 0 {
        return Err(FfiError::BufferTooSmall {
            what,
            needed: text.len() + 1,
            given: 0,
        });
    }
    // SAFETY: `buffer` holds `len` writable bytes per this function's contract, and nothing
    // else refers to them during the call; they may be uninitialised, which MaybeUninit
    // allows, and are only written.
    let out = unsafe { std::slice::from_raw_parts_mut(buffer.cast(), len) };
    if copy_truncated(text, out) {
        Ok(())
    } else {
        Err(FfiError::BufferTooSmall {
            what,
            needed: text.len() + 1,
            given: len,
        })
    }
}

/// Copies as much of `text` as fits into `out` with a NUL after it; whether all of it fit.
/// `out` must not be empty.
fn copy_truncated(text: &str, out: &mut [MaybeUninit<c_char>]) -> bool {
    let room = out.len().saturating_sub(1);
    let bytes = text.as_bytes();
    let n = bytes.len().min(room);
    for (slot, byte) in out.iter_mut().zip(&bytes[..n]) {
        slot.write(c_char::from_ne_bytes([*byte]));
    }
    if let Some(nul) = out.get_mut(n) {
        nul.write(0);
    }
    bytes.len() <= room
}

/// `ConclavePeer::id` for `id`: NUL-terminated and NUL-padded (peer ids have at most 32 bytes,
/// PROTO-1; a longer one would be cut, never overflow).
fn peer_id_field(id: &str) -> [c_char; PEER_ID_SIZE] {
    let mut field = [0; PEER_ID_SIZE];
    for (slot, byte) in field.iter_mut().zip(id.bytes().take(PEER_ID_SIZE - 1)) {
        *slot = c_char::from_ne_bytes([byte]);
    }
    field
}

/// `CONCLAVE_LOG` (a `tracing` filter such as `info` or `conclave_actors=debug`) sends the
/// nodes' logs to standard error; without it the library logs nothing. Colours only when
/// standard error is a terminal and `NO_COLOR` is unset or empty: the host program's stderr
/// is as often a pipe or a log file, where escapes would be read as text.
fn install_log() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Some(filter) = std::env::var_os("CONCLAVE_LOG") else {
            return;
        };
        let filter = tracing_subscriber::EnvFilter::new(filter.to_string_lossy());
        let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
            && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(colour)
            .with_writer(std::io::stderr)
            .try_init();
    });
}
