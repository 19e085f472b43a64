//! Warns when libconclave is built to abort on a panic (the workspace's `release` profile
//! does, for the gateway's memory): its C callers are promised `CONCLAVE_ERR_INTERNAL`
//! instead (EMB-2), which only the `release-ffi` profile (or a debug build) keeps.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_PANIC").as_deref() == Ok("abort") {
        println!(
            "cargo::warning=libconclave built with panic = \"abort\": a panic inside it ends \
             the host process instead of returning CONCLAVE_ERR_INTERNAL; build it with \
             `cargo build --profile release-ffi -p conclave-ffi`"
        );
    }
}
