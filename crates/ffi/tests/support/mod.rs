//! What the client tests share: the built library, three node configurations on loopback
//! with fast timings and their own data directories, and running a client program with a
//! deadline.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::net::{Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The three nodes every client starts.
pub(crate) const IDS: [&str; 3] = ["ffi-a", "ffi-b", "ffi-c"];

/// Where a client program may take before it counts as hung.
const CLIENT_PATIENCE: Duration = Duration::from_secs(120);

/// The crate's root.
pub(crate) fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `include/` of the repository.
pub(crate) fn include_dir() -> PathBuf {
    crate_dir().join("../../include")
}

/// The directory holding `libconclave.so`: the profile directory this test was built into
/// (`target/debug` for `target/debug/deps/<test>`). Cargo builds the library before the
/// tests of its package; should it be missing anyway (a test binary copied elsewhere), it is
/// built here.
pub(crate) fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from <target>/<profile>/deps")
        .to_path_buf();
    if !profile_dir.join("libconclave.so").exists() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "conclave-ffi"])
            .current_dir(crate_dir())
            .status()
            .expect("cannot run cargo to build libconclave");
        assert!(status.success(), "cargo build -p conclave-ffi failed");
    }
    assert!(
        profile_dir.join("libconclave.so").exists(),
        "no libconclave.so in {}",
        profile_dir.display()
    );
    profile_dir
}

/// The path of `libconclave.so`.
pub(crate) fn library() -> PathBuf {
    library_dir().join("libconclave.so")
}

/// Whether `program --version` (or `-V`) runs.
pub(crate) fn have(program: &str) -> bool {
    ["--version", "-V"].iter().any(|flag| {
        Command::new(program)
            .arg(flag)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Installs Debian's `packages` with apt-get where that can work (as root, with apt-get);
/// whether all of `programs` run afterwards (at once when they already did).
pub(crate) fn install_with_apt(packages: &[&str], programs: &[&str]) -> bool {
    let all_there = || programs.iter().all(|program| have(program));
    if all_there() {
        return true;
    }
    if !running_as_root() || !have("apt-get") {
        return false;
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    // The package lists may be missing or stale on a fresh machine: update once if needed.
    if !install() {
        let _ = Command::new("apt-get")
            .args(["update", "-q"])
            .stdout(Stdio::null())
            .status();
        let _ = install();
    }
    all_there()
}

/// `n` UDP addresses free a moment ago, on a loopback address of this process's own.
fn free_udp_addrs(n: usize, salt: u32) -> Vec<String> {
    let seed = std::process::id().wrapping_mul(31).wrapping_add(salt);
    let ip = Ipv4Addr::new(
        127,
        1 + (seed % 250) as u8,
        1 + ((seed >> 8) % 250) as u8,
        1 + ((seed >> 16) % 250) as u8,
    );
    let sockets: Vec<UdpSocket> = (0..n).map(|_| UdpSocket::bind((ip, 0)).unwrap()).collect();
    sockets
        .iter()
        .map(|socket| socket.local_addr().unwrap().to_string())
        .collect()
}

/// A node's TOML: the election ten times faster than the defaults (as the workspace's
/// other cluster tests), no HTTP servers, its own data directory under `dir`.
pub(crate) fn node_toml(
    id: &str,
    dir: &Path,
    voters: &[&str],
    udp: Option<(&str, &[String])>,
) -> String {
    let voters: Vec<String> = voters.iter().map(|v| format!("{v:?}")).collect();
    let mut toml = format!(
        "[node]\nid = {id:?}\ndata_dir = {dir:?}\n\
         [cluster]\nid = \"ffi-test\"\nvoters = [{voters}]\n\
         [election.raft]\nheartbeat_ms = 50\nelection_timeout_min_ms = 300\n\
         election_timeout_max_ms = 600\n\
         [membership]\nheartbeat_ms = 100\n\
         [admin]\nlisten = \"\"\n[metrics]\nlisten = \"\"\n",
        dir = dir.join(id).display().to_string(),
        voters = voters.join(", "),
    );
    if let Some((listen, peers)) = udp {
        let peers: Vec<String> = peers.iter().map(|p| format!("{p:?}")).collect();
        toml.push_str(&format!(
            "[link.udp]\nlisten = {listen:?}\npeers = [{}]\n",
            peers.join(", ")
        ));
    }
    toml
}

/// Writes the three nodes' configurations into `dir`; the arguments every client takes:
/// `ID_A A.toml ID_B B.toml ID_C C.toml`.
pub(crate) fn three_node_args(dir: &Path, salt: u32) -> Vec<String> {
    let addrs = free_udp_addrs(IDS.len(), salt);
    let mut args = Vec::new();
    for (i, id) in IDS.iter().enumerate() {
        let peers: Vec<String> = addrs
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, addr)| addr.clone())
            .collect();
        let path = dir.join(format!("{id}.toml"));
        std::fs::write(&path, node_toml(id, dir, &IDS, Some((&addrs[i], &peers)))).unwrap();
        args.push((*id).to_owned());
        args.push(path.display().to_string());
    }
    args
}

/// Runs `command` to its end (killing it after a generous deadline) and fails the test with
/// its output unless it succeeded; its standard output.
pub(crate) fn run_client(what: &str, command: &mut Command) -> String {
    run_client_output(what, command).0
}

/// [`run_client`], returning standard output and standard error.
pub(crate) fn run_client_output(what: &str, command: &mut Command) -> (String, String) {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run the {what}: {err}"));
    let pid = child.id();
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    let output = match outcome.recv_timeout(CLIENT_PATIENCE) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            let output = outcome.recv().unwrap().unwrap();
            panic!(
                "the {what} hung; killed:\n--- stdout\n{}\n--- stderr\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "the {what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    (stdout, stderr)
}
