//! PROTO-5, secure by default, with the real binary: without a pre-shared key, `conclave run`
//! on a UDP address beyond loopback refuses to start before it touches anything, and both it
//! and `conclave check-config` say why, naming `cluster.psk_file` and `cluster.insecure`;
//! `cluster.insecure = true` or a key makes the same configuration acceptable; a key file of
//! the wrong form is refused naming the file and its length.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

/// Bound on a process that should exit at once.
const BOUND: Duration = Duration::from_secs(30);

/// A configuration listening on every interface (port 0, so nothing fixed is ever bound),
/// with the HTTP servers off, plus `extra` in the `[cluster]` section.
fn config(dir: &Path, cluster: &str) -> std::path::PathBuf {
    let path = dir.join("node.toml");
    let text = format!(
        "[node]\nid = \"gw-a\"\ndata_dir = {data:?}\n\n[cluster]\n{cluster}\n\n\
         [link.udp]\nlisten = \"0.0.0.0:0\"\n\n[admin]\nlisten = \"\"\n\n[metrics]\nlisten = \"\"\n",
        data = dir.join("data").display().to_string(),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `conclave` with `args`, waits (bounded) for it to exit and returns its output.
fn conclave(args: &[&str], config: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(args)
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = SystemTime::now() + BOUND;
    while child.try_wait().unwrap().is_none() {
        if SystemTime::now() > deadline {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!(
                "conclave {args:?} did not exit: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// PROTO-5: no key, an address beyond loopback: `run` exits 64 without creating its data
/// directory, and `run` and `check-config` both name the address and both keys.
#[test]
fn run_without_a_key_beyond_loopback_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "");
    for verb in [["run", "--config"].as_slice(), ["check-config"].as_slice()] {
        let output = conclave(verb, &path);
        let said = text(&output);
        assert_eq!(output.status.code(), Some(64), "{verb:?}: {said}");
        for needed in [
            "cluster.psk_file",
            "cluster.insecure = true",
            "link.udp.listen (0.0.0.0:0)",
            "64 hex digits or 32 raw bytes",
        ] {
            assert!(
                said.contains(needed),
                "{verb:?} should say {needed:?}: {said}"
            );
        }
    }
    assert!(
        !dir.path().join("data").exists(),
        "refused before touching the data directory"
    );
}

/// PROTO-5: the same configuration is accepted with `insecure = true`, or with a key.
#[test]
fn insecure_or_a_key_makes_it_acceptable() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "insecure = true");
    let output = conclave(&["check-config"], &path);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));

    let psk = dir.path().join("psk");
    std::fs::write(&psk, format!("{}\n", "5a".repeat(32))).unwrap();
    let path = config(
        dir.path(),
        &format!("psk_file = {:?}", psk.display().to_string()),
    );
    let output = conclave(&["check-config"], &path);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        !text(&output).contains("not authenticated"),
        "{}",
        text(&output)
    );
}

/// PROTO-5: a key file that is neither 64 hex digits nor 32 raw bytes is refused, naming the
/// file, its length and the accepted forms.
#[test]
fn key_file_of_the_wrong_form_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, [7u8; 33]).unwrap();
    let path = config(
        dir.path(),
        &format!("psk_file = {:?}", psk.display().to_string()),
    );
    let output = conclave(&["check-config"], &path);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(64), "{said}");
    let expected = format!(
        "{} is 33 bytes: expected exactly 64 hex digits (surrounding whitespace allowed) or \
         exactly 32 raw bytes",
        psk.display()
    );
    assert!(said.contains(&expected), "{said}");
}
