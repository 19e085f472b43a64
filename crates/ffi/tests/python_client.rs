//! EMB-3 from Python: `clients/three_nodes.py` drives three nodes through `ctypes`, the flow
//! of the C client; it is also the example a Python program copies. Skipped, with a message,
//! where no `python3` is.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::{crate_dir, have, library, run_client, three_node_args};
use tempfile::TempDir;

/// EMB-2, EMB-3: the Python program's flow holds.
#[test]
fn three_nodes_from_python() {
    if !have("python3") {
        eprintln!("skipped: no python3 to run the ctypes client with");
        return;
    }
    let dir = TempDir::new().unwrap();
    let args = three_node_args(dir.path(), 2);
    let out = run_client(
        "Python client",
        Command::new("python3")
            .arg(crate_dir().join("tests/clients/three_nodes.py"))
            .arg(library())
            .args(&args),
    );
    println!("{out}");
    assert!(out.ends_with("ok\n"), "{out}");
}
