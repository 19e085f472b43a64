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

use embedded::{Event, Subscription};
use tracing::warn;

use crate::abi::{peer_status_code, role_code};
use crate::registry::{Callbacks, Entry};

/// Calls the callbacks for each event until the node stops.
pub(crate) fn run(events: Subscription, entry: Weak<Entry>) {
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
