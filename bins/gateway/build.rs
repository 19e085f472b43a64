//! Link options of the `conclave` executable, for the memory of an idle node
//! (docs/benchmarks.md, "Idle memory with the replicated log").
//!
//! Packed relative relocations (DT_RELR): a position-independent executable carries one
//! relocation per pointer in its read-only data (vtables, string tables), which the dynamic
//! loader reads at every start. As 24-byte RELA entries they were 0.35 MB, all of it resident
//! in every node for as long as it ran; as RELR bitmaps they are a few kilobytes. The loader
//! must understand them: glibc 2.36 or later. The linker records that as a need for the
//! version `GLIBC_ABI_DT_RELR`, so an older glibc refuses to start the program with a message
//! naming it instead of running it with unrelocated pointers.

use std::env;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let abi = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os != "linux" || abi != "gnu" {
        return;
    }
    println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
}
