//! conclave's test harness (the place raft-rs gives its `harness` crate): the deterministic
//! cluster simulator ([`sim`], docs/design.md §10) and, in `tests/` and `examples/`, the
//! scenario families, the Raft paper's checks and the simulator's benchmark programs.
//!
//! Nothing here is part of a node: `conclave-core` holds the state machines and the one
//! [`Driver`](conclave_core::driver::Driver) that carries out their outputs; the simulator
//! drives them through that driver exactly as the ElectionActor does, on a simulated network
//! and disk in virtual time. Keeping it out of the core keeps the core's production surface to
//! what a node runs.

pub mod sim;
