//! conclave-actors: the actix shell around conclave-core.
//!
//! Skeleton; the actors land in the following commits.

pub mod config;
pub mod events;
pub mod metrics;
pub mod settings;
