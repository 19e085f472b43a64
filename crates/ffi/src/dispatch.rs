//! The callback thread (EMB-2, CB-1): one thread per node reads the node's event subscription
//! and calls the registered callbacks, one at a time, in the order the node published the
//! events. Strings handed to a callback live until it returns.
//!
//! A callback registered later sees the events from then on. When the thread fell behind
//! (the host's callbacks were slower than the events), it re-reads the node's state and
//! passes it on as events: the leader-changed callback with the current leader and term, and
//! the peer-status callback for every peer in the table with the old status equal to the new
//! one. The host thus always ends up with the truth, though not every step to it.

use std::ffi::CString;
use std::sync::Weak;

use embedded::Event;
#[cfg(doc)]
use embedded::Subscription;
use tracing::warn;

use crate::abi::{peer_status_code, role_code};
use crate::registry::{Callbacks, Entry};

/// Calls the callbacks for each event until the node stops (the node's [`Subscription`], as
/// a blocking iterator).
pub(crate) fn run(events: impl IntoIterator<Item = Event>, entry: Weak<Entry>) {
    for event in events {
        let Some(entry) = entry.upgrade() else { return };
        match event {
            Event::LeaderChanged(change) => leader_changed(
                entry.callbacks(),
                change.leader.map(|l| l.to_string()),
                change.term,
                role_code(change.role),
            ),
            Event::PeerStatusChanged(change) => peer_status(
                entry.callbacks(),
                &change.peer.to_string(),
                peer_status_code(change.old),
                peer_status_code(change.new),
            ),
            // The C ABI has no membership callback (seed 000's API has none); a host that
            // needs the configuration reads it from the admin API's status.
            Event::MembershipChanged(_) => {}
            Event::Lagged { missed } => {
                warn!(
                    missed,
                    "the callbacks fell behind; passing on the node's state"
                );
                resync(&entry);
            }
        }
    }
}

/// Passes on the node's whole state after lost events.
fn resync(entry: &Entry) {
    let state = entry.with_node(|node| Ok((node.status()?, node.peers()?)));
    let Ok((status, peers)) = state else { return };
    leader_changed(
        entry.callbacks(),
        status.election.leader.map(|l| l.to_string()),
        status.election.term,
        role_code(status.election.role),
    );
    for peer in peers {
        let code = peer_status_code(Some(peer.status));
        peer_status(entry.callbacks(), &peer.id.to_string(), code, code);
    }
}

fn leader_changed(callbacks: Callbacks, leader: Option<String>, term: u64, role: i32) {
    let Some((Some(callback), user_data)) = callbacks.leader_changed else {
        return;
    };
    let leader = c_string(leader.as_deref().unwrap_or(""));
    // SAFETY: the host registered `callback` with this signature and promised (header rules)
    // that it may be called on this thread with its `user_data`; `leader` is a NUL-terminated
    // string that outlives the call.
    unsafe { callback(leader.as_ptr(), term, role, user_data.0) };
}

fn peer_status(callbacks: Callbacks, peer: &str, old: i32, new: i32) {
    let Some((Some(callback), user_data)) = callbacks.peer_status else {
        return;
    };
    let peer = c_string(peer);
    // SAFETY: as in `leader_changed`: the host's callback with its own signature and
    // `user_data`, and a NUL-terminated id that outlives the call.
    unsafe { callback(peer.as_ptr(), old, new, user_data.0) };
}

/// Peer ids have no NUL byte (PROTO-1), so the conversion cannot fail; an empty string
/// stands in if it ever did.
fn c_string(text: &str) -> CString {
    CString::new(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, c_char, c_void};
    use std::sync::{Arc, Mutex, RwLock};
    use std::time::Duration;

    use embedded::{LeaderChange, LeaderChangeCause, Role};

    use super::*;
    use crate::abi;
    use crate::registry::UserData;

    /// What the test's leader-changed callback was called with.
    type Seen = Mutex<Vec<(String, u64, i32)>>;

    unsafe extern "C" fn record(
        leader: *const c_char,
        term: u64,
        role: i32,
        user_data: *mut c_void,
    ) {
        // SAFETY: the test registers a pointer to its own `Seen`, which outlives the dispatch.
        let seen = unsafe { &*user_data.cast::<Seen>() };
        // SAFETY: the dispatcher passes a NUL-terminated string valid during the call.
        let leader = unsafe { CStr::from_ptr(leader) };
        let leader = leader.to_string_lossy().into_owned();
        seen.lock().unwrap().push((leader, term, role));
    }

    /// EMB-2, CB-1: events reach the callback in order, and after a lag the callback gets the
    /// node's current leader and term instead of the lost events.
    #[test]
    fn a_lag_passes_on_the_current_state() {
        let dir = tempfile::TempDir::new().unwrap();
        let toml = format!(
            "[node]\nid = \"solo\"\ndata_dir = {:?}\n\
             [election.raft]\nheartbeat_ms = 5\nelection_timeout_min_ms = 10\n\
             election_timeout_max_ms = 20\n[admin]\nlisten = \"\"\n[metrics]\nlisten = \"\"\n",
            dir.path().display().to_string()
        );
        let node = embedded::Node::start(embedded::config::from_toml_str(&toml).unwrap()).unwrap();
        let mut polls = 0;
        while !node.is_leader() {
            polls += 1;
            assert!(polls < 3000, "the single node never led");
            std::thread::sleep(Duration::from_millis(10));
        }
        let token = node.leader().unwrap().unwrap();
        let seen = Seen::default();
        let entry = Arc::new(Entry {
            node: RwLock::new(Some(node)),
            callbacks: Mutex::new(Callbacks {
                leader_changed: Some((
                    Some(record),
                    UserData(std::ptr::from_ref(&seen).cast_mut().cast()),
                )),
                peer_status: None,
            }),
            dispatcher: Mutex::new(None),
            locks: Mutex::default(),
        });
        let earlier = LeaderChange {
            term: 0,
            leader: Some("other".parse().unwrap()),
            previous: None,
            stepped_down: false,
            role: Role::Follower,
            cause: LeaderChangeCause::LeaderHeard,
            at_unix_ms: 0,
        };
        run(
            [Event::LeaderChanged(earlier), Event::Lagged { missed: 7 }],
            Arc::downgrade(&entry),
        );
        assert_eq!(
            *seen.lock().unwrap(),
            [
                ("other".to_owned(), 0, abi::ROLE_FOLLOWER),
                ("solo".to_owned(), token.term, abi::ROLE_LEADER),
            ]
        );
        let node = entry.node.write().unwrap().take().unwrap();
        node.stop();
    }
}
