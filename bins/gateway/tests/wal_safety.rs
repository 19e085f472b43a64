//! What the WAL must never let happen, with real `conclave run` processes over UDP on a
//! loopback address of the test's own (WAL-2, RAFT-8, issue 8 items 1, 2 and 7):
//!
//! - a node killed with SIGKILL whose WAL is then deleted comes back abstaining: it says so at
//!   WARN, waits for every voter, and never records a second vote in a term, while the
//!   cluster still elects;
//! - a second `conclave run` on a data directory in use exits non-zero naming the holder's pid,
//!   and the WAL's bytes do not change; `conclave wal inspect` reads the running node's WAL,
//!   `conclave wal repair` refuses it;
//! - a damaged WAL is refused with its offset, and the documented repair procedure (inspect,
//!   repair, restart) brings the node back abstaining, then voting;
//! - `conclave auto-election off` survives a restart, and the start says it overrides the
//!   configuration and how to undo it.

#![allow(clippy::unwrap_used)]

mod support;

use conclave_storage::{LOCK_FILE_NAME, RecordContent, WAL_FILE_NAME, WalRecord, inspect};
use serde_json::Value;

use support::{ProcessCluster, assert_one_vote_per_term, conclave, text, votes};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];
const ABSTAINING_WARNING: &str =
    "grants no vote and does not campaign until it has heard every other voter";

/// WAL-2: kill -9 a follower, delete its WAL, and kill the leader too. The follower restarts
/// with no term or vote: it logs the warning, reports that it abstains and waits for the
/// leader that is down, so the third node cannot win with its vote. Once the old leader is
/// back, it takes part again and the cluster agrees on a leader; then that leader is killed and
/// the two others elect a new one. Across the deleted WAL — its records before and after —
/// the node never recorded a second vote in a term, nor did any other node.
#[test]
fn wal2_node_whose_wal_was_deleted_abstains_and_never_votes_twice() {
    let mut cluster = ProcessCluster::new(&NODES);
    cluster.start_all();
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let victim = NODES.iter().find(|id| **id != leader).unwrap().to_string();

    cluster.kill(&victim);
    let before = votes(&cluster.data_dir(&victim));
    assert!(!before.is_empty(), "{victim} voted before: {before:?}");
    std::fs::remove_file(cluster.data_dir(&victim).join(WAL_FILE_NAME)).unwrap();
    cluster.kill(&leader);

    cluster.start(&victim);
    let status = cluster.wait_for("the wiped node abstaining, waiting for the leader", |c| {
        let status = c.status(&victim)?;
        (status["abstaining_until_heard"] == serde_json::json!([leader])).then_some(status)
    });
    assert_eq!(status["abstaining"], true, "{status}");
    assert_eq!(status["voted_for"], Value::Null, "{status}");
    let log = cluster.log(&victim);
    assert!(
        log.lines()
            .any(|line| line.contains("WARN") && line.contains(ABSTAINING_WARNING)),
        "{log}"
    );
    let metrics = cluster.metrics(&victim).unwrap_or_default();
    assert!(
        metrics.contains("conclave_election_abstaining 1"),
        "{metrics}"
    );
    let ready = cluster.get(&victim, "/ready").unwrap();
    assert_eq!(ready["ready"], false, "{ready}");
    assert!(
        ready["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("abstaining") && reason.contains(&leader)),
        "{ready}"
    );

    cluster.start(&leader);
    let (elected, term) = cluster.wait_for(
        "all three agreeing, none abstaining",
        ProcessCluster::agreed_leader_none_abstaining,
    );
    cluster.kill(&elected);
    cluster.wait_for("a new leader of the two others", |c| {
        c.agreed_leader()
            .filter(|(candidate, t)| *candidate != elected && *t > term)
    });

    for id in NODES {
        cluster.kill(id);
    }
    let mut all = before;
    all.extend(votes(&cluster.data_dir(&victim)));
    assert_one_vote_per_term(&victim, &all);
    for id in NODES.iter().filter(|id| **id != victim) {
        assert_one_vote_per_term(id, &votes(&cluster.data_dir(id)));
    }
}

/// WAL-2 (one process per data directory): a second `conclave run` on the data directory of a
/// running node — on other ports, so that only the lock can stop it — exits with 69, naming
/// the data directory and the running node's pid, and the WAL's bytes are the same before and
/// after. `conclave wal inspect` reads the running node's WAL without the lock and changes
/// nothing; `conclave wal repair --confirm` refuses it.
#[test]
fn wal2_second_process_on_a_data_directory_is_refused() {
    let mut cluster = ProcessCluster::new(&["gw-a"]);
    cluster.start_all();
    cluster.wait_for("the single node leading", |c| {
        c.status("gw-a").filter(|s| s["role"] == "leader")
    });
    let data_dir = cluster.data_dir("gw-a");
    let wal = data_dir.join(WAL_FILE_NAME);
    let bytes = std::fs::read(&wal).unwrap();

    let ip = cluster.ip().to_string();
    let second = cluster
        .config_text("gw-a")
        .replace(&format!("{ip}:7946"), &format!("{ip}:8946"))
        .replace(&format!("{ip}:7070"), &format!("{ip}:8070"))
        .replace(&format!("{ip}:9464"), &format!("{ip}:8464"));
    let second_path = cluster.dir().join("second.toml");
    std::fs::write(&second_path, second).unwrap();
    let output = conclave(&["run", "--config", second_path.to_str().unwrap()]);
    let stderr = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(69), "{stderr}");

    let holder: u32 = std::fs::read_to_string(data_dir.join(LOCK_FILE_NAME))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The pid in the lock file is the running node's: its command line names its config.
    let cmdline = std::fs::read(format!("/proc/{holder}/cmdline")).unwrap();
    assert!(
        text(&cmdline).contains(&cluster.config_path("gw-a").display().to_string()),
        "{}",
        text(&cmdline)
    );
    assert!(
        stderr.contains(&format!(
            "data directory {} is in use by process {holder}",
            data_dir.display()
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&wal).unwrap(), bytes);

    let inspected = conclave(&["wal", "inspect", data_dir.to_str().unwrap()]);
    assert!(inspected.status.success(), "{}", text(&inspected.stderr));
    assert!(
        text(&inspected.stdout).contains("verdict     clean"),
        "{}",
        text(&inspected.stdout)
    );
    let repaired = conclave(&["wal", "repair", data_dir.to_str().unwrap(), "--confirm"]);
    assert_eq!(repaired.status.code(), Some(1));
    assert!(
        text(&repaired.stderr).contains(&format!("in use by process {holder}")),
        "{}",
        text(&repaired.stderr)
    );
    assert_eq!(std::fs::read(&wal).unwrap(), bytes);
    assert!(
        cluster.status("gw-a").is_some(),
        "the running node is unharmed"
    );
}

/// WAL-2, the repair procedure of docs/wal.md: a flipped bit in the newest hard state of a
/// follower's WAL makes `conclave run` refuse to start, naming the file, the offset and the
/// record, without touching the file. `conclave wal inspect` shows the damage and exits 1;
/// `conclave wal repair` without `--confirm` only explains; with it, it keeps a backup and
/// rewrites the WAL; the node then starts, abstains (it says so), and rejoins the cluster.
#[test]
fn wal2_corrupt_wal_is_refused_then_repaired_knowingly() {
    let mut cluster = ProcessCluster::new(&NODES);
    cluster.start_all();
    let (leader, _) = cluster.wait_for("a leader", ProcessCluster::agreed_leader);
    let victim = NODES.iter().find(|id| **id != leader).unwrap().to_string();
    cluster.kill(&victim);

    let data_dir = cluster.data_dir(&victim);
    let wal = data_dir.join(WAL_FILE_NAME);
    let inspection = inspect(&data_dir).unwrap();
    let newest = inspection
        .examination
        .records
        .iter()
        .rev()
        .find(|r| matches!(r.content, RecordContent::Record(WalRecord::HardState(_))))
        .unwrap();
    let (offset, number) = (newest.offset, newest.number);
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[usize::try_from(offset).unwrap() + 9] ^= 0x01;
    std::fs::write(&wal, &bytes).unwrap();

    cluster.start(&victim);
    let status = cluster.wait_exit(&victim);
    assert!(!status.success());
    let log = cluster.log(&victim);
    assert!(
        log.contains(&format!(
            "WAL {}: corrupt: record {number} at byte {offset}",
            wal.display()
        )),
        "{log}"
    );
    assert_eq!(std::fs::read(&wal).unwrap(), bytes, "the file is untouched");

    let dir = data_dir.to_str().unwrap();
    let inspected = conclave(&["wal", "inspect", dir]);
    assert_eq!(inspected.status.code(), Some(1));
    assert!(
        text(&inspected.stdout).contains(&format!("CORRUPT at byte {offset}")),
        "{}",
        text(&inspected.stdout)
    );
    let json = conclave(&["wal", "inspect", dir, "--json"]);
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["verdict"]["verdict"], "corrupt");
    assert_eq!(json["verdict"]["offset"], offset);
    assert_eq!(json["node_can_start"], false);

    let plan = conclave(&["wal", "repair", dir]);
    assert_eq!(plan.status.code(), Some(64));
    assert!(
        text(&plan.stderr).contains("--confirm"),
        "{}",
        text(&plan.stderr)
    );
    assert_eq!(std::fs::read(&wal).unwrap(), bytes);

    let repaired = conclave(&["wal", "repair", dir, "--confirm"]);
    assert!(repaired.status.success(), "{}", text(&repaired.stderr));
    let backups: Vec<_> = std::fs::read_dir(&data_dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("conclave.wal.damaged-")
        })
        .collect();
    assert_eq!(backups.len(), 1);
    assert_eq!(std::fs::read(backups[0].path()).unwrap(), bytes);

    cluster.start(&victim);
    cluster.wait_for(
        "all three agreeing, none abstaining",
        ProcessCluster::agreed_leader_none_abstaining,
    );
    let log = cluster.log(&victim);
    assert!(log.contains(ABSTAINING_WARNING), "{log}");
}

/// RAFT-8: `conclave auto-election off` survives a restart of the node; at the start the node
/// says that the WAL overrides `election.auto` and how to switch it back.
#[test]
fn raft8_auto_election_off_survives_a_restart() {
    let mut cluster = ProcessCluster::new(&["gw-a"]);
    cluster.start_all();
    cluster.wait_for("the single node leading", |c| {
        c.status("gw-a").filter(|s| s["role"] == "leader")
    });
    let admin = cluster.admin_url("gw-a");
    let off = conclave(&["auto-election", "off", "--admin", &admin]);
    assert!(off.status.success(), "{}", text(&off.stderr));
    assert!(cluster.stop("gw-a").success());

    cluster.start("gw-a");
    let status = cluster.wait_for("the node answering again", |c| c.status("gw-a"));
    assert_eq!(status["auto_election"], false, "{status}");
    let log = cluster.log("gw-a");
    assert!(
        log.contains(
            "overrides election.auto = true in the configuration; `conclave auto-election on` \
             switches it back"
        ),
        "{log}"
    );
}
