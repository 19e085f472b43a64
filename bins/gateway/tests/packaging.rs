//! The files of `packaging/` keep what the node relies on (issue 8, packaging): the example
//! configuration passes `conclave check-config`, and the systemd unit runs the node as a
//! `Type=notify` service whose reload is SIGHUP, whose stop leaves the node time to hand
//! over and finish its hooks, with a watchdog; systemd itself accepts the unit where
//! `systemd-analyze` is installed. `conclave defaults` prints the shipped defaults file.
//!
//! The tmpfiles.d entry creates the configuration's data directory with the owner and mode
//! the unit gives it, and, run as root, the first-cluster steps of `docs/operations.md` work
//! as an unprivileged user in that order: `conclave init` as the service user before the
//! service ever started, refused with the fix named until the entry is applied.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// One line of a tmpfiles.d(5) file: `type path mode user group [age [argument]]`.
#[derive(Debug)]
struct TmpfilesLine {
    kind: String,
    path: String,
    mode: u32,
    user: String,
    group: String,
}

/// The lines of the shipped tmpfiles.d entry, comments and blank lines left out.
fn tmpfiles_lines() -> Vec<TmpfilesLine> {
    std::fs::read_to_string(packaging("systemd/conclave.tmpfiles"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert!(
                (5..=7).contains(&fields.len()),
                "not a tmpfiles.d line: {line}"
            );
            TmpfilesLine {
                kind: fields[0].to_owned(),
                path: fields[1].to_owned(),
                mode: u32::from_str_radix(fields[2], 8)
                    .unwrap_or_else(|_| panic!("mode {} of {line}", fields[2])),
                user: fields[3].to_owned(),
                group: fields[4].to_owned(),
            }
        })
        .collect()
}

/// `node.data_dir` of the packaged configuration.
fn packaged_data_dir() -> String {
    let text = std::fs::read_to_string(packaging("conclave.toml")).unwrap();
    let line = text
        .lines()
        .find(|line| line.trim_start().starts_with("data_dir"))
        .unwrap();
    line.split('"').nth(1).unwrap().to_owned()
}

/// The tmpfiles.d entry creates the packaged configuration's data directory as the unit
/// would at its first start (`StateDirectory=`, `StateDirectoryMode=`, `User=`, `Group=`), for
/// the user the sysusers entry creates; the guide installs and applies it before `init`.
#[test]
fn the_tmpfiles_entry_creates_the_data_directory_as_the_unit_does() {
    let unit = std::fs::read_to_string(packaging("systemd/conclave.service")).unwrap();
    let service = service_settings(&unit);
    let one = |key: &str| service[key][0].clone();
    let lines = tmpfiles_lines();
    let [entry] = lines.as_slice() else {
        panic!("one line expected: {lines:?}");
    };
    assert_eq!(entry.kind, "d", "{entry:?}");
    assert_eq!(
        entry.path,
        format!("/var/lib/{}", one("StateDirectory")),
        "{entry:?}"
    );
    assert_eq!(entry.path, packaged_data_dir(), "{entry:?}");
    assert_eq!(
        entry.mode,
        u32::from_str_radix(&one("StateDirectoryMode"), 8).unwrap(),
        "{entry:?}"
    );
    assert_eq!(entry.user, one("User"), "{entry:?}");
    assert_eq!(entry.group, one("Group"), "{entry:?}");
    let sysusers = std::fs::read_to_string(packaging("systemd/conclave.sysusers")).unwrap();
    assert!(
        sysusers
            .lines()
            .any(|line| line.starts_with(&format!("u {} ", entry.user))),
        "{sysusers}"
    );

    // The guide says to install and apply it before the first `init` (the steps may live in
    // the README or the operator guide).
    let guide = ["../../docs/operations.md", "../../README.md"]
        .iter()
        .map(|file| {
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
                .unwrap_or_default()
        })
        .collect::<String>();
    for step in [
        "packaging/systemd/conclave.tmpfiles /usr/lib/tmpfiles.d/conclave.conf",
        "systemd-tmpfiles --create conclave.conf",
        "sudo -u conclave conclave init --config /etc/conclave/conclave.toml",
    ] {
        assert!(guide.contains(step), "the guide lacks `{step}`");
    }
}

/// A throwaway system user of the test's own, removed with its group when dropped.
struct SystemUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl SystemUser {
    /// Creates it with `useradd`, as `systemd-sysusers` creates `conclave`: a system user
    /// with a group of its name, no home directory, no login shell.
    fn create() -> Result<SystemUser, String> {
        let name = format!("conclave-t{}", std::process::id());
        let add = || {
            Command::new("useradd")
                .args([
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--home-dir",
                    "/nonexistent",
                    "--shell",
                    "/usr/sbin/nologin",
                ])
                .arg(&name)
                .output()
        };
        let mut output = add().map_err(|err| format!("no useradd ({err})"))?;
        if output.status.code() == Some(9) {
            // Left by an earlier run of this test that was killed under the same pid.
            let _ = Command::new("userdel").arg(&name).output();
            output = add().map_err(|err| format!("no useradd ({err})"))?;
        }
        if !output.status.success() {
            return Err(format!(
                "useradd {name} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
        let fields: Vec<&str> = passwd
            .lines()
            .find(|line| line.starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} is not in /etc/passwd"))
            .split(':')
            .collect();
        Ok(SystemUser {
            uid: fields[2].parse().unwrap(),
            gid: fields[3].parse().unwrap(),
            name,
        })
    }

    /// `conclave ARGS` run as this user (its uid and group, no supplementary groups), in
    /// `dir`.
    fn conclave(&self, dir: &Path, args: &[&OsStr]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_conclave"))
            .args(args)
            .uid(self.uid)
            .gid(self.gid)
            .current_dir(dir)
            .output()
            .unwrap()
    }
}

impl Drop for SystemUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
        // userdel removes the user's own group on Debian; elsewhere it may stay.
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

/// Applies the shipped tmpfiles.d entry under `root`, the entry's user and group standing
/// for `user`: with `systemd-tmpfiles --root` where it runs (so systemd itself reads the
/// file), else by doing what its `d` line says.
fn apply_tmpfiles_entry(root: &Path, user: &SystemUser) {
    let entry_file = packaging("systemd/conclave.tmpfiles");
    let lines = tmpfiles_lines();
    let tmpfiles = Command::new("systemd-tmpfiles")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if tmpfiles {
        // systemd-tmpfiles --root resolves names in the root's own account files.
        let etc = root.join("etc");
        let mut passwd = String::new();
        let mut group = String::new();
        for line in &lines {
            passwd.push_str(&format!(
                "{}:x:{}:{}::/nonexistent:/usr/sbin/nologin\n",
                line.user, user.uid, user.gid
            ));
            group.push_str(&format!("{}:x:{}:\n", line.group, user.gid));
        }
        std::fs::write(etc.join("passwd"), passwd).unwrap();
        std::fs::write(etc.join("group"), group).unwrap();
        let output = Command::new("systemd-tmpfiles")
            .arg("--create")
            .arg(format!("--root={}", root.display()))
            .arg(&entry_file)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "systemd-tmpfiles: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        return;
    }
    for line in &lines {
        assert_eq!(line.kind, "d", "{line:?}");
        let path = root.join(line.path.trim_start_matches('/'));
        std::fs::create_dir_all(&path).unwrap();
        std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(line.mode)).unwrap();
    }
}

fn said(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// The guide's first-cluster steps on a packaged install, as an unprivileged system user of
/// the test's own under a temporary root standing for `/`: `/etc/conclave` as the install
/// makes it, and `/var/lib` writable by root alone. Before the tmpfiles.d entry is applied,
/// `check-config` and `init` run as the user name the data directory and how to create it,
/// and `init` exits 77; a directory root created by hand is refused with the `chown` that
/// fixes it; once the entry is applied, `check-config` passes and `init` creates the WAL,
/// owned by the user. Needs root (to make the user); skipped with a message otherwise.
#[test]
fn the_first_cluster_steps_work_as_the_service_user() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: only root can create the throwaway system user this test runs as");
        return;
    }
    let user = match SystemUser::create() {
        Ok(user) => user,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let root_dir = tempfile::tempdir().unwrap();
    let root = root_dir.path();
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let to_group = |path: &Path| {
        std::os::unix::fs::chown(path, Some(0), Some(user.gid)).unwrap();
    };
    mode(root, 0o755);
    for dir in ["etc", "var", "var/lib"] {
        std::fs::create_dir(root.join(dir)).unwrap();
        mode(&root.join(dir), 0o755);
    }
    // sudo install -d -m 0750 -g conclave /etc/conclave, and the configuration and key.
    let etc = root.join("etc/conclave");
    std::fs::create_dir(&etc).unwrap();
    to_group(&etc);
    mode(&etc, 0o750);
    let data_dir = root.join(packaged_data_dir().trim_start_matches('/'));
    let psk = etc.join("psk");
    let config = std::fs::read_to_string(packaging("conclave.toml"))
        .unwrap()
        .replace(
            &format!("\"{}\"", packaged_data_dir()),
            &format!("{:?}", data_dir.display().to_string()),
        )
        .replace(
            "\"/etc/conclave/psk\"",
            &format!("{:?}", psk.display().to_string()),
        );
    let config_file = etc.join("conclave.toml");
    for (file, text) in [(&config_file, config), (&psk, "cd".repeat(32) + "\n")] {
        std::fs::write(file, text).unwrap();
        to_group(file);
        mode(file, 0o640);
    }
    let check = [OsStr::new("check-config"), config_file.as_os_str()];
    let init = [
        OsStr::new("init"),
        OsStr::new("--config"),
        config_file.as_os_str(),
    ];
    let name = &user.name;
    let data = data_dir.display();

    // Without the entry: nothing has created the data directory.
    let output = user.conclave(root, &check);
    assert!(!output.status.success(), "{}", said(&output));
    let create = format!("install -d -o {name} -g {name} -m 0700 {data}");
    assert!(
        said(&output).contains(&format!("node.data_dir: {data} does not exist")),
        "{}",
        said(&output)
    );
    assert!(said(&output).contains(&create), "{}", said(&output));
    let output = user.conclave(root, &init);
    assert_eq!(output.status.code(), Some(77), "{}", said(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "node.data_dir {data} does not exist, and user {name} may not create it"
        )),
        "{stderr}"
    );
    assert!(stderr.contains(&create), "{stderr}");
    assert!(!data_dir.exists());

    // Created by root by hand: there, but not the user's.
    std::fs::create_dir(&data_dir).unwrap();
    mode(&data_dir, 0o755);
    let output = user.conclave(root, &init);
    assert_eq!(output.status.code(), Some(77), "{}", said(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("{data} is not writable by user {name}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("chown -R {name}:{name} {data}")),
        "{stderr}"
    );

    // The install's `systemd-tmpfiles --create conclave.conf`, then the guide's steps.
    apply_tmpfiles_entry(root, &user);
    let meta = std::fs::metadata(&data_dir).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (user.uid, 0o700));
    let output = user.conclave(root, &check);
    assert!(output.status.success(), "{}", said(&output));
    let output = user.conclave(root, &init);
    assert!(output.status.success(), "{}", said(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("initialised"),
        "{}",
        said(&output)
    );
    let wal = std::fs::metadata(data_dir.join(conclave_storage::WAL_FILE_NAME)).unwrap();
    assert_eq!(wal.uid(), user.uid);
}
