//! EMB-3 from C#, seed 000's host language: `clients/ThreeNodes.cs`, compiled with `mcs` and
//! run with `mono`, drives three nodes through P/Invoke and checks that each node's callbacks
//! arrive in order. When `mcs` or `mono` is missing and the test runs as root on a system
//! with `apt-get`, it installs Debian's `mono-mcs` and `mono-runtime`; otherwise it is skipped
//! with a message saying what to install.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::{crate_dir, library_dir, run_client, three_node_args};
use tempfile::TempDir;

const PACKAGES: [&str; 2] = ["mono-mcs", "mono-runtime"];

/// Installs mono with apt-get where that can work; whether `mcs` and `mono` are there then.
fn mono_available() -> bool {
    support::install_with_apt(&PACKAGES, &["mcs", "mono"])
}

/// EMB-2, EMB-3: the C# program's flow holds and its callbacks arrive in order.
#[test]
fn three_nodes_from_csharp() {
    if !mono_available() {
        eprintln!(
            "skipped: mcs and mono are not installed and could not be (install Debian's {} \
             as root to run this test)",
            PACKAGES.join(" and ")
        );
        return;
    }
    let dir = TempDir::new().unwrap();
    let exe = dir.path().join("ThreeNodes.exe");
    let compiled = Command::new("mcs")
        .arg("-warnaserror+")
        .arg(format!("-out:{}", exe.display()))
        .arg(crate_dir().join("tests/clients/ThreeNodes.cs"))
        .output()
        .unwrap();
    assert!(
        compiled.status.success(),
        "mcs failed:\n{}{}",
        String::from_utf8_lossy(&compiled.stdout),
        String::from_utf8_lossy(&compiled.stderr)
    );
    let args = three_node_args(dir.path(), 3);
    let out = run_client(
        "C# client",
        Command::new("mono")
            .arg(&exe)
            .args(&args)
            .env("LD_LIBRARY_PATH", library_dir()),
    );
    println!("{out}");
    assert!(out.ends_with("ok\n"), "{out}");
}
