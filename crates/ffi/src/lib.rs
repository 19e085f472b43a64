//! conclave-ffi: the C ABI of conclave (EMB-2), seed 000's calls over the embedding façade.
//!
//! `libconclave.so` / `libconclave.a` export `ConclaveStart`, `ConclaveStop`, `SetLeader`,
//! `EnableAutoLeaderElection`, `GetCurrentLeader`, `IsLeader`, `GetPeerList`,
//! `RegisterPeerStatusCallback`, `RegisterLeaderChangedCallback` and `ConclaveLastError`,
//! declared in `include/conclave.h`, which [`header`] writes from the definitions here.
//!
//! Everything a function does goes through the façade crate `conclave`; this crate only
//! turns C's arguments into Rust values and back ([`api`]), keeps the running nodes behind
//! numeric handles ([`registry`]), runs each node's callback thread ([`dispatch`]) and maps
//! errors and panics to status codes ([`error`]). The unsafe code is confined to reading and
//! writing the caller's pointers and calling the caller's callbacks; each block says why it
//! is sound.

// The pointer contract of every function is stated once, in the header's rules, rather than
// in a `# Safety` section per function.
#![expect(
    clippy::missing_safety_doc,
    reason = "the header's rules state the pointer contract of every function once"
)]

pub mod abi;
pub mod api;
mod dispatch;
mod error;
#[cfg(test)]
mod header;
mod registry;
