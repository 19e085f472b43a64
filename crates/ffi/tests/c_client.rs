//! EMB-3 from C: `clients/three_nodes.c`, compiled with `cc` against `include/conclave.h`
//! and `libconclave.so`, runs three nodes over UDP on loopback in one process (see the
//! program's header for what it checks); once as it is, once built with AddressSanitizer
//! (and UndefinedBehaviorSanitizer), whose leak check at exit covers the library's memory
//! too. `clients/cycles.c` starts and stops a node 100 times (`CONCLAVE_LEAK_CYCLES` for
//! more) and checks that no thread, file descriptor or memory is left behind. Skipped, with a
//! message, where no C compiler (or no sanitizer runtime) is.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::{have, include_dir, library_dir, run_client, run_client_output, three_node_args};
use tempfile::TempDir;

/// The sanitizers of the second run.
const SANITIZE: [&str; 3] = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
];

/// Compiles `clients/<source>` into `dir` with the `extra` flags; the executable's path.
fn compile(source: &str, dir: &std::path::Path, extra: &[&str]) -> std::path::PathBuf {
    let lib = library_dir();
    let exe = dir.join(format!(
        "{}{}",
        source.trim_end_matches(".c"),
        if extra.is_empty() { "" } else { "-sanitized" }
    ));
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
/// leader hands over, callbacks in order and re-entrant, misuse refused). With
/// `CONCLAVE_LOG` set the library logs to standard error, without colours when that is a
/// pipe.
#[test]
fn three_nodes_from_c() {
    if !have("cc") {
        eprintln!("skipped: no C compiler (cc) to build the C client with");
        return;
    }
    let dir = TempDir::new().unwrap();
    let exe = compile("three_nodes.c", dir.path(), &[]);
    let args = three_node_args(dir.path(), 1);
    let (out, log) = run_client_output(
        "C client",
        Command::new(&exe)
            .args(&args)
            .env("CONCLAVE_LOG", "info")
            .env_remove("NO_COLOR"),
    );
    println!("{out}");
    assert!(out.ends_with("ok\n"), "{out}");
    assert!(log.contains(" INFO "), "no log on standard error: {log}");
    assert!(!log.contains('\u{1b}'), "colours into a pipe: {log:?}");
}

/// Whether `cc` can build and run a program with [`SANITIZE`] (libasan and libubsan present).
fn sanitizers_work(dir: &std::path::Path) -> bool {
    let source = dir.join("probe.c");
    std::fs::write(&source, "int main(void) { return 0; }\n").unwrap();
    let exe = dir.join("probe");
    Command::new("cc")
        .args(SANITIZE)
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
        && Command::new(&exe)
            .status()
            .is_ok_and(|status| status.success())
}

/// EMB-3: the C program's flow under AddressSanitizer and UndefinedBehaviorSanitizer: no bad
/// access in the program, and no memory of the program or the library left unreachable at
/// its exit (LeakSanitizer).
#[test]
fn three_nodes_from_c_under_address_sanitizer() {
    if !have("cc") {
        eprintln!("skipped: no C compiler (cc) to build the C client with");
        return;
    }
    let dir = TempDir::new().unwrap();
    if !sanitizers_work(dir.path()) {
        eprintln!("skipped: cc cannot build with -fsanitize=address,undefined (libasan, libubsan)");
        return;
    }
    let exe = compile("three_nodes.c", dir.path(), &SANITIZE);
    let args = three_node_args(dir.path(), 4);
    let out = run_client(
        "sanitized C client",
        Command::new(&exe)
            .args(&args)
            .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
            .env("UBSAN_OPTIONS", "print_stacktrace=1"),
    );
    assert!(out.ends_with("ok\n"), "{out}");
}

/// How many more bytes malloc may hold after the cycles than before them: garbage that
/// lock-free structures free lazily. A node that leaked would exceed it within 100 cycles
/// (its metrics' sample blocks alone, before they were folded at the stop, took 2.5 KB each).
const MAX_GROWTH_BYTES: u64 = 128 * 1024;

/// EMB-2: start/stop cycles of a node (with a UDP socket and a callback) through the C ABI
/// leave no thread, file descriptor or memory behind.
#[test]
fn start_stop_cycles_leak_nothing() {
    if !have("cc") {
        eprintln!("skipped: no C compiler (cc) to build the cycle program with");
        return;
    }
    let cycles: u32 = std::env::var("CONCLAVE_LEAK_CYCLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    let dir = TempDir::new().unwrap();
    let exe = compile("cycles.c", dir.path(), &[]);
    let config = dir.path().join("cycle.toml");
    // Elections of a few milliseconds: a single node leads after one election timeout.
    let toml = support::node_toml("cycler", dir.path(), &[], Some(("127.0.0.1:0", &[])))
        .replace("heartbeat_ms = 50", "heartbeat_ms = 5")
        .replace(
            "election_timeout_min_ms = 300",
            "election_timeout_min_ms = 10",
        )
        .replace(
            "election_timeout_max_ms = 600",
            "election_timeout_max_ms = 20",
        );
    std::fs::write(&config, toml).unwrap();
    let out = run_client(
        "cycle program",
        Command::new(&exe)
            .arg(&config)
            .arg(cycles.to_string())
            .arg(MAX_GROWTH_BYTES.to_string()),
    );
    println!("{out}");
    assert!(out.ends_with("ok\n"), "{out}");
}

/// SESS-4: the lock pair from C, on one node with the replicated log: a token, a held lock
/// refused at once with timeout 0, a waiting thread served after the unlock with a larger
/// token, misuse refused, locks released by ConclaveStop.
#[test]
fn sess4_lock_pair_from_c() {
    if !have("cc") {
        eprintln!("skipped: no C compiler (cc) to build the C client with");
        return;
    }
    let dir = TempDir::new().unwrap();
    let exe = compile("lock.c", dir.path(), &[]);
    let config = dir.path().join("locker.toml");
    let mut toml = support::node_toml(
        "locker",
        dir.path(),
        &["locker"],
        Some(("127.0.0.1:0", &[])),
    );
    toml.push_str("[log]\nenabled = true\n");
    std::fs::write(&config, toml).unwrap();
    let out = run_client("C lock client", Command::new(&exe).arg(&config));
    assert!(out.ends_with("ok\n"), "{out}");
}
