//! conclave-actors: the actix shell around conclave-core.
//!
//! Six actors per node, each a thin driver of a sans-IO state machine or of one kind of I/O
//! (docs/design.md §1, CONVENTIONS "The actors are a thin shell"):
//!
//! ```text
//!             frames                      every frame              peer reachability
//!  links ──► TransportActor ─────────────► MembershipActor ─────────────────┐
//!  (udp,     │    ▲                              │ events                     ▼
//!  memory)   │    └───── Transmit ───────────────┤                    ElectionActor ──► WalActor
//!            │                                   ▼                     │   ▲  Persist   (fsync,
//!            └── election messages ──────────────────────────────────► │   │            own thread)
//!                                             EventBus ◄── leader changes ─┘
//!                                                 │
//!                                   CallbackActor (hooks), admin API (SSE), subscribers
//! ```
//!
//! Beside them, the HealthActor ([`health`]) reads the `[health]` source (a fixed battery, a
//! file or a command) and hands each good reading to the ElectionActor; the transport hands
//! it each radio peer's smoothed signal strength.
//!
//! No election decision is taken here: the actors feed inputs to `conclave-core`, carry out
//! its actions in order (a `Persist` is durable before anything after it happens), arm one
//! timer each from `poll_timeout`, and record metrics. [`node::NodeBuilder`] starts and wires
//! them from a validated `NodeConfig`, which conclave-config produces from the configuration
//! files.

pub mod admin;
pub mod callbacks;
pub mod clock;
pub mod election;
pub mod events;
pub mod health;
mod job_wakeups;
pub mod log_service;
pub mod machine;
pub mod member_directory;
pub mod membership;
pub mod memory;
pub mod messages;
pub mod metrics;
pub mod node;
mod process_metrics;
pub mod tls;
pub mod transport;
pub mod wal;
