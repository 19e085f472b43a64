//! conclave-ffi: the C ABI of conclave (EMB-2), seed 000's calls over the embedding façade.
//!
//! `libconclave.so` / `libconclave.a` export `ConclaveStart`, `ConclaveStop`, `SetLeader`,
//! `EnableAutoLeaderElection`, `GetCurrentLeader`, `IsLeader`, `GetPeerList`,
//! `RegisterPeerStatusCallback`, `RegisterLeaderChangedCallback`, `ConclaveLastError`, and
//! the lock pair `ConclaveLock` / `ConclaveUnlock` (SESS-4), declared in
//! `include/conclave.h`, which [`header`] writes from the definitions here.
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

// Built to abort on a panic (the workspace's `release` profile, which keeps the gateway
// small), the library cannot keep the header's promise that a defect comes back as
// CONCLAVE_ERR_INTERNAL: the panic ends the host process. Cargo tells build scripts the
// target's default panic strategy, not the profile's, so only the compiler knows; and a
// deprecated item is the one way stable Rust lets a crate print a warning of its own.
#[cfg(panic = "abort")]
const _: () = {
    #[deprecated(
        note = "libconclave is being built with panic = \"abort\": a panic inside it will end \
                the C program instead of returning CONCLAVE_ERR_INTERNAL. Build the library \
                with `cargo build --profile release-ffi -p conclave-ffi` (target/release-ffi/)"
    )]
    const LIBCONCLAVE_ABORTS_ON_PANIC: () = ();
    LIBCONCLAVE_ABORTS_ON_PANIC
};
