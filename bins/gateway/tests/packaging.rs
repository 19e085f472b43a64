//! The files of `packaging/` keep what the node relies on (issue 8, packaging): the example
//! configuration passes `conclave check-config`, and the systemd unit runs the node as a
//! `Type=notify` service whose reload is SIGHUP, whose stop leaves the node time to hand
//! over and finish its hooks, with a watchdog; systemd itself accepts the unit where
//! `systemd-analyze` is installed. `conclave defaults` prints the shipped defaults file.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

fn packaging(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../packaging")
        .join(file)
}

/// `Key=Value` lines of a unit's `[Service]` section; repeated keys keep every value.
fn service_settings(unit: &str) -> BTreeMap<String, Vec<String>> {
    let mut settings: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut in_service = false;
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if in_service && !line.starts_with('#') {
            if let Some((key, value)) = line.split_once('=') {
                settings
                    .entry(key.to_owned())
                    .or_default()
                    .push(value.to_owned());
            }
        }
    }
    settings
}

fn seconds(value: &str) -> u64 {
    value.trim_end_matches('s').parse().unwrap()
}

/// `conclave check-config FILE` with `env` set: whether it passed, and what it printed.
fn check_config(file: &Path, env: &[(&str, &OsStr)]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .arg("check-config")
        .arg(file)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// The configuration to start from passes every check (with a key file and a data directory
/// of the test's own: `/etc/conclave/psk` does not exist here).
#[test]
fn the_packaged_configuration_passes_check_config() {
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, format!("{}\n", "ab".repeat(32))).unwrap();
    // check-config also checks that node.data_dir can be created: /var/lib/conclave cannot,
    // by a user other than root.
    let data_dir = dir.path().join("state");
    let (passed, text) = check_config(
        &packaging("conclave.toml"),
        &[
            ("CONCLAVE__CLUSTER__PSK_FILE", psk.as_os_str()),
            ("CONCLAVE__NODE__DATA_DIR", data_dir.as_os_str()),
        ],
    );
    assert!(passed, "{text}");
    assert!(text.contains("node gw-a in cluster site-1"), "{text}");
    assert!(!text.contains("not authenticated"), "{text}");
}

/// `conclave defaults` prints `config/default.toml` as shipped, and that text, saved as a
/// configuration file, passes `check-config`: an operator can start from it.
#[test]
fn conclave_defaults_prints_the_defaults_file_and_it_checks() {
    let output = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .arg("defaults")
        .output()
        .unwrap();
    assert!(output.status.success());
    let printed = String::from_utf8(output.stdout).unwrap();
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/default.toml"),
    )
    .unwrap();
    assert_eq!(printed, shipped);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conclave.toml");
    std::fs::write(&file, &printed).unwrap();
    let (passed, text) = check_config(&file, &[]);
    assert!(passed, "{text}");
    assert!(text.contains("node node-1 in cluster default"), "{text}");
    assert!(text.contains("voters node-1\n"), "{text}");

    // The copy sets every mode's keys to their defaults: switching its mode is accepted, and
    // with no voters listed, check-config says what that means in this mode.
    let (passed, text) = check_config(&file, &[("CONCLAVE__ELECTION__MODE", OsStr::new("gossip"))]);
    assert!(passed, "{text}");
    assert!(text.contains("election gossip"), "{text}");
    assert!(text.contains("voters none listed"), "{text}");
}

/// The unit runs the node the way it was built to run.
#[test]
fn the_systemd_unit_keeps_what_the_node_relies_on() {
    let unit = std::fs::read_to_string(packaging("systemd/conclave.service")).unwrap();
    let service = service_settings(&unit);
    let one = |key: &str| -> &str {
        match service.get(key).map(Vec::as_slice) {
            Some([value]) => value,
            other => panic!("{key}: {other:?}"),
        }
    };
    assert_eq!(one("Type"), "notify");
    assert_eq!(one("NotifyAccess"), "main");
    assert!(one("ExecStart").ends_with("conclave run --config /etc/conclave/conclave.toml"));
    assert!(one("ExecReload").contains("-HUP $MAINPID"));
    // SIGTERM to the node alone: it stops its hooks itself after letting them finish.
    assert_eq!(one("KillMode"), "mixed");
    // Hand-over (election_timeout_max_ms, 3 s by default) + two hook timeouts (2 x 5 s).
    assert!(seconds(one("TimeoutStopSec")) >= 3 + 2 * 5 + 5);
    assert!(seconds(one("WatchdogSec")) >= 2);
    assert_eq!(one("RestartPreventExitStatus"), "64 65 77");
    assert_eq!(one("StateDirectory"), "conclave");
    for hardening in [
        "NoNewPrivileges",
        "ProtectSystem",
        "ProtectHome",
        "PrivateTmp",
        "RestrictAddressFamilies",
        "SystemCallFilter",
        "CapabilityBoundingSet",
    ] {
        assert!(service.contains_key(hardening), "{hardening} missing");
    }
    // The notification socket is AF_UNIX, the links AF_INET(6).
    assert_eq!(one("RestrictAddressFamilies"), "AF_UNIX AF_INET AF_INET6");
    // setrlimit (raising the open-file limit) is in @system-service, not taken away.
    assert!(
        service["SystemCallFilter"]
            .iter()
            .all(|filter| !filter.contains("@resources"))
    );
}

/// systemd accepts the unit (when `systemd-analyze` is there), the binary standing where the
/// unit expects it.
#[test]
fn systemd_analyze_accepts_the_unit() {
    let Ok(probe) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("skipped: no systemd-analyze");
        return;
    };
    if !probe.status.success() {
        eprintln!("skipped: systemd-analyze does not run here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(packaging("systemd/conclave.service"))
        .unwrap()
        .replace("/usr/bin/conclave", env!("CARGO_BIN_EXE_conclave"));
    let path = dir.path().join("conclave.service");
    std::fs::write(&path, unit).unwrap();
    let output = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    let complaints: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        // Outside a booted systemd (containers, CI) verify may say so; that is not the unit.
        .filter(|line| !line.contains("System has not been booted with systemd"))
        .filter(|line| !line.contains("Failed to connect to bus"))
        .collect();
    assert!(complaints.is_empty(), "systemd-analyze verify:\n{text}");
}
