//! conclave-core: the sans-IO state machines of conclave.
//!
//! Placeholder crate docs; the driving loop is documented once raft lands.

#![deny(missing_docs)]

pub mod fanout;
pub mod membership;
pub mod raft;
mod rng;
pub mod sim;
mod time;

pub use fanout::{Delivery, DrainOutcome, Fanout, SubscriberQueue};
pub use membership::{
    LinkAddr, Membership, MembershipAction, MembershipConfig, MembershipError, MembershipEvent,
    PeerInfo, PeerStatus, PeerTable,
};
pub use rng::SeededRng;
pub use time::Instant;
