//! EMB-3 from C: `clients/three_nodes.c`, compiled with `cc` against `include/conclave.h`
//! and `libconclave.so`, runs three nodes over UDP on loopback in one process (see the
//! program's header for what it checks). Skipped, with a message, where no C compiler is.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::{have, include_dir, library_dir, run_client, three_node_args};
use tempfile::TempDir;

/// Compiles `clients/<source>` into `dir`; the executable's path.
fn compile(source: &str, dir: &std::path::Path, extra: &[&str]) -> std::path::PathBuf {
    let lib = library_dir();
    let exe = dir.join(source.trim_end_matches(".c"));
    let status = Command::new("cc")
        .args([
            "-std=c11",
            "-D_POSIX_C_SOURCE=200809L",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-g",
        ])
        .args(extra)
        .arg("-I")
        .arg(include_dir())
        .arg(support::crate_dir().join("tests/clients").join(source))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lconclave", "-lpthread"])
        .status()
        .unwrap();
    assert!(status.success(), "cc failed on {source}");
    exe
}

/// EMB-2, EMB-3: the C program's flow holds (one leader, SetLeader moves it, a stopped
/// leader hands over, callbacks in order and re-entrant, misuse refused).
#[test]
fn three_nodes_from_c() {
    if !have("cc") {
        eprintln!("skipped: no C compiler (cc) to build the C client with");
        return;
    }
    let dir = TempDir::new().unwrap();
    let exe = compile("three_nodes.c", dir.path(), &[]);
    let args = three_node_args(dir.path(), 1);
    let out = run_client("C client", Command::new(&exe).args(&args));
    println!("{out}");
    assert!(out.ends_with("ok\n"), "{out}");
}
