//! Issue 9: every election mode with three real `conclave` processes over UDP on loopback
//! (raft's own are in `three_processes.rs`). Gossip (GOS-1..6) and priority (PRI-1..6) elect one
//! leader that all three name, the status answer reports the real mode, the `on_leader` hook
//! runs with the mode's fencing token (`<epoch or round>:<leader>`), and after `kill -9` of the
//! leader the two survivors agree on another one in a later term; gossip's `leader resign` is a
//! yield and priority's `leader set` a hand-over. Static mode (STA-1) leads without an election,
//! reports a killed leader lost, and follows a reassignment. Priority mode also shows each
//! node's score and battery, read from a health file. `check-config` names each example's mode.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use support::ProcessCluster;

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];

/// Gossip with Fabric's timings scaled down (a dead leader is replaced within about 1.5 s
/// instead of 15 s).
const GOSSIP: &str = "[election]\nmode = \"gossip\"\n\
     [election.gossip]\nstartup_grace_period_ms = 1500\nmembership_sample_interval_ms = 300\n\
     leader_alive_threshold_ms = 1000\nleader_election_duration_ms = 500\n";

/// Priority with seed 002's timings scaled down.
const PRIORITY: &str = "[election]\nmode = \"priority\"\n\
     [election.priority]\ndiscovery_timeout_ms = 300\ncampaign_timeout_ms = 150\n\
     vote_timeout_ms = 200\nannounce_interval_ms = 300\nmaster_timeout_ms = 900\n";

/// The hook that records its environment in `<dir>/<node>.leader-env`, written whole.
fn recording_hook(dir: &Path) -> String {
    let file = dir.join("${CONCLAVE_NODE_ID}.leader-env");
    let file = file.display();
    format!(
        "[hooks]\non_leader = [\"env > \\\"{file}.tmp\\\" && mv \\\"{file}.tmp\\\" \\\"{file}\\\"\"]\n"
    )
}

/// Starts every node (with `env_of(id)` for its process), waits for one leader all three
/// name, and checks what every mode promises: the real mode in the status answer, no quorum,
/// and the `on_leader` hook run with the fencing token of the leader's term. Returns the
/// leader and its term.
fn elect(
    cluster: &mut ProcessCluster,
    mode: &str,
    env_of: impl Fn(&str) -> Vec<(String, String)>,
) -> (String, u64) {
    for id in NODES {
        let env = env_of(id);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        cluster.start_with(id, &env);
    }
    let (leader, term) = cluster.wait_for("one leader all three name", |c| c.agreed_leader());
    for id in NODES {
        let status = cluster.status(id).unwrap();
        assert_eq!(status["mode"], mode, "{id}: {status}");
        assert_eq!(status["quorum"], "none", "{id}: {status}");
    }
    let env_file = cluster.dir().join(format!("{leader}.leader-env"));
    let env = cluster.wait_for("the on_leader hook's environment", |_| {
        std::fs::read_to_string(&env_file).ok()
    });
    assert!(
        env.lines()
            .any(|line| line == format!("CONCLAVE_FENCING_TOKEN={term}:{leader}")),
        "{env}"
    );
    assert!(
        env.lines().any(|line| line == "CONCLAVE_ROLE=leader"),
        "{env}"
    );
    (leader, term)
}

/// `kill -9` of `leader`: the two survivors agree on another leader in a later term, which
/// is returned.
fn kill_and_reelect(cluster: &mut ProcessCluster, leader: &str, term: u64) -> String {
    cluster.kill(leader);
    let (successor, new_term) = cluster.wait_for("the survivors to agree on another leader", |c| {
        c.agreed_leader()
            .filter(|(candidate, t)| candidate != leader && *t > term)
    });
    assert!(new_term > term);
    successor
}

/// Runs the CLI against node `id`'s admin API; panics unless it exits 0.
fn cli(cluster: &ProcessCluster, id: &str, args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(args)
        .arg("--admin")
        .arg(cluster.admin_url(id))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{args:?} at {id}: {text}");
    text
}

fn stop_all(cluster: &mut ProcessCluster) {
    for id in NODES {
        if cluster.is_running(id) {
            let status = cluster.stop(id);
            assert_eq!(status.code(), Some(0), "{id} exited with {status}");
        }
    }
}

/// GOS-1..3 with real processes: one leader, its hook run with its epoch as the fencing
/// term, and a new leader in a later epoch after the leader is killed.
#[test]
fn gossip_mode_elects_and_replaces_a_killed_leader() {
    let cluster = ProcessCluster::new(&NODES).with_election(GOSSIP);
    let hook = recording_hook(cluster.dir());
    let mut cluster = cluster.with_toml(&hook);
    let (leader, term) = elect(&mut cluster, "gossip", |_| Vec::new());
    let successor = kill_and_reelect(&mut cluster, &leader, term);
    let status = cluster.status(&successor).unwrap();
    assert_eq!(status["gossip"]["use_leader_election"], true, "{status}");
    assert_eq!(status["role"], "leader", "{status}");
    // GOS-4: `leader resign` is Fabric's Yield: the other survivor takes over, and the one
    // that yielded does not take leadership back.
    cli(&cluster, &successor, &["leader", "resign"]);
    let (third, _) = cluster.wait_for("the other survivor to lead after the yield", |c| {
        c.agreed_leader().filter(|(id, _)| *id != successor)
    });
    assert_ne!(third, leader);
    let status = cluster.status(&successor).unwrap();
    assert_eq!(status["leader"], third.as_str(), "{status}");
    stop_all(&mut cluster);
}

/// PRI-1..5 with real processes: the master is the node with the fullest battery (read from
/// a health file: the battery is the score's top byte), its hook runs with its round as the
/// fencing term, `leader set` hands over to the named node, and after `kill -9` the fullest
/// battery left takes over in a later round.
#[test]
fn priority_mode_elects_by_battery_and_replaces_a_killed_master() {
    let cluster = ProcessCluster::new(&NODES).with_election(PRIORITY);
    let urls = cluster.peer_urls();
    let cluster = cluster.with_env("CONCLAVE__ADMIN__PEER_URLS", &urls);
    let dir = cluster.dir().to_owned();
    let batteries = [("gw-a", 30), ("gw-b", 90), ("gw-c", 60)];
    for (id, percent) in batteries {
        std::fs::write(dir.join(format!("{id}.battery")), format!("{percent}\n")).unwrap();
    }
    let hook = recording_hook(&dir);
    let mut cluster = cluster
        .with_toml(&hook)
        .with_toml("[health]\nsource = \"file\"\ninterval_ms = 200\ntimeout_ms = 200\n");
    let (leader, _) = elect(&mut cluster, "priority", |id| {
        let percent = batteries.iter().find(|(b, _)| *b == id).unwrap().1;
        vec![
            (
                "CONCLAVE__HEALTH__FILE".to_owned(),
                dir.join(format!("{id}.battery")).display().to_string(),
            ),
            // The battery assumed until the first reading: the same, so the order of
            // the first reading and the first campaign does not matter.
            (
                "CONCLAVE__HEALTH__BATTERY_PERCENT".to_owned(),
                percent.to_string(),
            ),
        ]
    });
    assert_eq!(leader, "gw-b", "the fullest battery leads");
    let status = cluster.status("gw-b").unwrap();
    assert_eq!(status["priority"]["battery_percent"], 90, "{status}");
    assert_eq!(status["priority"]["state"], "master", "{status}");
    // `leader set gw-c` sent to a follower is passed on to the master, which resigns naming
    // gw-c as its successor (PRI-5); the CLI waits for gw-c to lead.
    let text = cli(&cluster, "gw-a", &["leader", "set", "gw-c"]);
    assert!(
        text.contains("passing the request on to the leader gw-b"),
        "{text}"
    );
    let (leader, term) = cluster.wait_for("gw-c to lead after the hand-over", |c| {
        c.agreed_leader().filter(|(id, _)| id == "gw-c")
    });
    let successor = kill_and_reelect(&mut cluster, &leader, term);
    assert_eq!(successor, "gw-b", "the fullest battery left takes over");
    stop_all(&mut cluster);
}

/// Issue 9 item 8: `check-config` accepts each mode's example set and says which mode it
/// runs and what bounds its failover, from that mode's own formula.
#[test]
fn check_config_names_each_examples_mode() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/examples");
    for (set, expected) in [
        ("three-udp", "election raft (voters quorum"),
        (
            "three-gossip",
            "election gossip (a dead leader is replaced within",
        ),
        (
            "three-priority",
            "election priority (a dead master is replaced within",
        ),
        ("three-static", "election static (leader gw-a"),
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_conclave"))
            .arg("check-config")
            .arg(examples.join(set).join("node-a.toml"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{set}: {text}");
        assert!(text.contains(expected), "{set}: {text}");
    }
}

/// STA-1 with real processes: the configured leader leads with no election; after `kill -9`
/// of it the survivors report it lost (nobody elects in static mode), and `leader set`, sent
/// to each survivor, makes them agree on a new one.
#[test]
fn static_mode_reports_a_killed_leader_lost_and_follows_a_reassignment() {
    let cluster = ProcessCluster::new(&NODES)
        .with_election("[election]\nmode = \"static\"\n[election.static]\nleader = \"gw-a\"\n");
    let hook = recording_hook(cluster.dir());
    let mut cluster = cluster.with_toml(&hook);
    let (leader, term) = elect(&mut cluster, "static", |_| Vec::new());
    assert_eq!(leader, "gw-a");
    cluster.kill("gw-a");
    for id in ["gw-b", "gw-c"] {
        cluster.wait_for("the survivors to report the leader lost", |c| {
            c.status(id).filter(|status| status["leader"].is_null())
        });
    }
    for id in ["gw-b", "gw-c"] {
        cli(&cluster, id, &["leader", "set", "gw-b", "--no-wait"]);
    }
    let (new_leader, new_term) = cluster.wait_for("the survivors to follow gw-b", |c| {
        c.agreed_leader().filter(|(id, _)| id == "gw-b")
    });
    assert_eq!(new_leader, "gw-b");
    assert!(new_term > term);
    stop_all(&mut cluster);
}
