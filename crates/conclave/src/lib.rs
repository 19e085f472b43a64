//! conclave inside a program: the embedding API (EMB-1, CB-1, CB-5).
//!
//! A program starts a conclave node in its own process, asks whether it leads, reads the
//! fencing token, the peer table and the whole status, gives the operator's commands
//! (`set_leader`, `enable_auto_election`, `resign`), subscribes to leader and peer changes,
//! reads and writes the replicated key-value store and job queue ([`Node::kv`],
//! [`Node::jobs`], with the admin API's own types, [`api`]), keeps sessions and takes
//! cluster-wide locks with a fencing token ([`Node::sessions`], [`Node::lock`]), and stops
//! the node with a hand-over. The node is the daemon's node, started the same way
//! from the same configuration; it runs on a thread of its own with its own actix system, so
//! the program may use tokio, another runtime, or none.
//!
//! ```no_run
//! let config = conclave::config::from_file("conclave.toml")?;
//! let node = conclave::Node::start(config)?;
//! for event in node.subscribe() {
//!     if let conclave::Event::LeaderChanged(change) = event {
//!         if change.leader == Some(node.id()) {
//!             println!("leading in term {}", change.term);
//!             break;
//!         }
//!     }
//! }
//! node.stop(); // a leader hands over to a caught-up peer first
//! # Ok::<(), conclave::Error>(())
//! ```
//!
//! The C ABI of seed 000 (`SetLeader`, `IsLeader`, `RegisterLeaderChangedCallback`, ...) is
//! built on this crate by `conclave-ffi`. `docs/embedding.md` gives the threading rules and
//! the fencing token's use.

mod block;
pub mod config;
mod error;
mod events;
mod node;
mod sessions;
mod store;

pub use conclave_actors::node::{NodeError, NodeStatus};
/// The admin API's requests and answers, which [`Node::kv`] and [`Node::jobs`] take and give.
pub use conclave_api as api;
pub use conclave_config::NodeConfig;
pub use conclave_core::PeerStatus;
pub use conclave_core::election::{CommandOutcome, FencingToken, LeaderChangeCause, Role};
pub use conclave_protocol::{ClusterId, IdError, PeerId};
pub use error::{ConfigProblems, Error, Result};
pub use events::{
    BlockingEvents, Event, LeaderChange, MemberRole, MembershipChange, PeerChange, Subscription,
};
pub use node::{Node, Peer};
pub use sessions::{LOCK_KEY_PREFIX, LockGuard, LockOptions, Sessions};
pub use store::{Backup, Jobs, Kv};
