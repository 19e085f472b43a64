//! Creating a cluster, with real `conclave` processes over UDP on a loopback address of the
//! test's own (WAL-5, issue 15 item 1):
//!
//! - the README's three-node example, followed literally, elects once every voter answered:
//!   the example's `cluster.initial_state = "new"` makes each node ask the voters first, then
//!   record a genesis; the key left set is safe: a voter of the running cluster restarted on
//!   an emptied data directory learns that the cluster exists and votes in no old term;
//! - `conclave init` does the same for a node without the key, and refuses a data directory a
//!   node has used;
//! - a voter started without either says, in one line, how a new cluster is created, and
//!   abstains; its first start is said at INFO, not as a lost WAL, and its log goes to
//!   standard error, without colours when that is not a terminal;
//! - a voter whose WAL was deleted while another voter is down abstains, although its
//!   configuration still says `initial_state = "new"` (the lock file shows an earlier node),
//!   refuses every vote the remaining node asks for, and records no vote; once the voter is
//!   back the cluster elects, and no node ever recorded two votes in one term.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use conclave_storage::{RecordContent, WAL_FILE_NAME, WalRecord, inspect};

use support::{ProcessCluster, assert_one_vote_per_term, conclave, text, votes};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];
/// The one line a voter started without `conclave init` logs.
const INIT_HINT: &str = "run `conclave init` once (or set cluster.initial_state = \"new\")";

/// Whether the WAL in `data_dir` starts the node from a genesis record.
fn has_genesis(data_dir: &Path) -> bool {
    inspect(data_dir)
        .unwrap()
        .examination
        .records
        .iter()
        .any(|record| {
            matches!(
                record.content,
                RecordContent::Record(WalRecord::Genesis { .. })
            )
        })
}

/// The README's example configuration of node `name` (`node-a` …).
fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../config/examples/three-udp")
        .join(format!("{name}.toml"))
}

/// WAL-5, issue 24 item 2: the README's three example nodes, started from the example files
/// as the README says (with this test's addresses laid over them). With
/// `cluster.initial_state = "new"` a node asks the voters before it takes part, so two of
/// them wait for the third (a node whose data directory was emptied cannot tell itself from a
/// new one, and the voter not heard may be the one it voted for); once the third runs, every
/// voter has answered at term 0, they elect, and each WAL starts with a genesis record.
#[test]
fn wal5_readme_cluster_elects_once_every_voter_answered() {
    let mut cluster = ProcessCluster::new(&NODES);
    cluster.start_from_file("gw-a", &example("node-a"));
    cluster.start_from_file("gw-b", &example("node-b"));
    cluster.wait_for("the two started voters waiting for gw-c", |c| {
        let waiting = ["gw-a", "gw-b"].iter().all(|id| {
            c.status(id)
                .is_some_and(|status| status["abstaining"] == true)
        });
        waiting.then_some(())
    });
    cluster.start_from_file("gw-c", &example("node-c"));
    let (_, term) = cluster.wait_for(
        "all three agreeing, none abstaining",
        ProcessCluster::agreed_leader_none_abstaining,
    );
    assert!(term >= 1);
    for id in NODES {
        let log = cluster.log(id);
        assert!(!log.contains(INIT_HINT), "{log}");
        assert!(
            log.contains("a new cluster: every other voter answered"),
            "{log}"
        );
    }
    for id in NODES {
        cluster.kill(id);
        assert!(
            has_genesis(&cluster.data_dir(id)),
            "{id} has no genesis record"
        );
    }
}

/// Issue 24 item 2, WAL-5: `cluster.initial_state = "new"` left set is safe. A voter of the
/// running cluster restarted on an emptied data directory (pre-vote off, so that every
/// campaign of the others asks for a real vote) asks the voters, learns from their terms that
/// the cluster exists and says so in one line, records no genesis, and abstains as a node
/// that lost its WAL does until it has heard them; it never records a vote in a term it had
/// voted in, and the cluster agrees on a leader with it again.
#[test]
fn wal5_emptied_data_directory_with_initial_state_new_votes_in_no_old_term() {
    let mut cluster = ProcessCluster::new(&NODES)
        .with_env("CONCLAVE__CLUSTER__INITIAL_STATE", "new")
        .with_env("CONCLAVE__ELECTION__RAFT__PRE_VOTE", "false");
    cluster.start_all();
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let victim = NODES.iter().find(|id| **id != leader).unwrap().to_string();
    cluster.kill(&victim);
    let before = votes(&cluster.data_dir(&victim));
    let dir = cluster.data_dir(&victim);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    // The leader restarted too, so that the cluster campaigns while the victim asks around.
    cluster.kill(&leader);
    cluster.start(&victim);
    cluster.start(&leader);
    cluster.wait_for("the emptied node saying the cluster exists", |c| {
        c.log(&victim).contains("the cluster exists").then_some(())
    });
    let (_, term) = cluster.wait_for(
        "all three agreeing, none abstaining",
        ProcessCluster::agreed_leader_none_abstaining,
    );
    assert!(term >= 2, "a new term after the restarts: {term}");
    for id in NODES {
        cluster.kill(id);
    }
    assert!(!has_genesis(&cluster.data_dir(&victim)));
    let mut all = before;
    all.extend(votes(&cluster.data_dir(&victim)));
    assert_one_vote_per_term(&victim, &all);
    for id in NODES.iter().filter(|id| **id != victim) {
        assert_one_vote_per_term(id, &votes(&cluster.data_dir(id)));
    }
}

/// WAL-5: `conclave init` gives a node the genesis record without asking anyone: with two
/// nodes initialised, the two elect while the third voter is never started (the operator
/// vouches that they are new, which `cluster.initial_state = "new"` cannot do alone). `init` prints what it did and how to start the node, and a
/// second `init` on the same directory is refused (exit code 1), naming the WAL.
#[test]
fn wal5_init_lets_a_new_cluster_elect_with_a_voter_never_started() {
    let mut cluster = ProcessCluster::new(&NODES);
    let config = cluster.write_config("gw-a");
    let config = config.to_str().unwrap();
    let init = conclave(&["init", "--config", config]);
    assert!(init.status.success(), "{}", text(&init.stderr));
    let stdout = text(&init.stdout);
    assert!(
        stdout.contains("genesis record") && stdout.contains("conclave run --config"),
        "{stdout}"
    );
    assert!(has_genesis(&cluster.data_dir("gw-a")));

    let again = conclave(&["init", "--config", config]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stdout));
    let stderr = text(&again.stderr);
    assert!(
        stderr.contains("cannot initialise") && stderr.contains(WAL_FILE_NAME),
        "{stderr}"
    );

    let config_b = cluster.write_config("gw-b");
    let init_b = conclave(&["init", "--config", config_b.to_str().unwrap()]);
    assert!(init_b.status.success(), "{}", text(&init_b.stderr));
    cluster.start("gw-a");
    cluster.start("gw-b");
    cluster.wait_for("a leader of the two started voters", |c| c.agreed_leader());
    for id in ["gw-a", "gw-b"] {
        let status = cluster.status(id).unwrap();
        assert_eq!(status["abstaining"], false, "{status}");
    }
}

/// A `conclave run` started outside the harness, killed when dropped (a failed assertion
/// must not leave it running).
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// WAL-5: a voter of a new cluster started with neither `conclave init` nor the key abstains
/// and says in one line how a new cluster is created; `conclave init` on its directory
/// afterwards is refused, since a node has run there.
///
/// Its log goes to standard error, nothing to standard output, and without colours when
/// standard error is not a terminal (a pipe, a file, the journal). A first start says so at
/// INFO and is not reported as a lost WAL.
#[test]
fn wal5_voter_started_without_init_says_how_to_create_a_cluster() {
    let cluster = ProcessCluster::new(&NODES);
    let config = cluster.write_config("gw-a");
    let stdout = cluster.dir().join("gw-a.stdout");
    let stderr = cluster.dir().join("gw-a.stderr");
    let node = Running(
        cluster
            .command("gw-a")
            .args(["run", "--config"])
            .arg(&config)
            // Whatever the test's own environment says, colours are not wanted here.
            .env_remove("NO_COLOR")
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap(),
    );
    let log = || std::fs::read_to_string(&stderr).unwrap_or_default();
    cluster.wait_for("the hint on standard error", |_| {
        log()
            .lines()
            .any(|line| line.contains("WARN") && line.contains(INIT_HINT))
            .then_some(())
    });
    let status = cluster.status("gw-a").unwrap();
    assert_eq!(status["abstaining"], true, "{status}");
    drop(node);

    let log = log();
    assert_eq!(
        std::fs::read_to_string(&stdout).unwrap(),
        "",
        "stderr:\n{log}"
    );
    assert!(!log.contains('\u{1b}'), "colours in a file: {log:?}");
    let line = |text: &str| log.lines().find(|line| line.contains(text));
    let first = line("first start of a node in this directory").unwrap_or_else(|| panic!("{log}"));
    assert!(first.contains(" INFO "), "{first}");
    let abstains = line("first start in this data directory, so no term or vote yet")
        .unwrap_or_else(|| panic!("{log}"));
    assert!(abstains.contains(" INFO "), "{abstains}");
    assert!(
        abstains.contains("until it has heard every other voter"),
        "{abstains}"
    );
    assert!(line("lost or repaired WAL").is_none(), "{log}");
    assert!(line("WAL recovered").is_none(), "{log}");

    let config = cluster.write_config("gw-a");
    let init = conclave(&["init", "--config", config.to_str().unwrap()]);
    assert_eq!(init.status.code(), Some(1));
    assert!(
        text(&init.stderr).contains("cannot initialise"),
        "{}",
        text(&init.stderr)
    );
}

/// WAL-5, WAL-2: with `gw-c` down, a follower whose WAL is deleted comes back abstaining —
/// its configuration still says `initial_state = "new"`, but its data directory shows an
/// earlier node — and the remaining node, restarted so that it campaigns (pre-vote off, so
/// each campaign asks for a real vote in a new term), is refused vote after vote for more than
/// the abstention's settling time: a majority of three voters
/// without the node itself is both others. Once `gw-c` is back, the cluster elects, and no
/// node recorded two votes in one term, across the deleted WAL too.
#[test]
fn wal5_wiped_voter_with_a_voter_down_never_votes_twice() {
    // Without pre-vote, every campaign is a real vote request in a new term.
    let mut cluster = ProcessCluster::new(&NODES)
        .with_env("CONCLAVE__CLUSTER__INITIAL_STATE", "new")
        .with_env("CONCLAVE__ELECTION__RAFT__PRE_VOTE", "false");
    cluster.start_all();
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let mut others = NODES.iter().filter(|id| **id != leader);
    let victim = others.next().unwrap().to_string();
    let down = others.next().unwrap().to_string();

    cluster.kill(&down);
    cluster.kill(&victim);
    let before = votes(&cluster.data_dir(&victim));
    // What its first start logged (a first start of a node of a new cluster) is not read.
    let logged_before = cluster.log(&victim).len();
    std::fs::remove_file(cluster.data_dir(&victim).join(WAL_FILE_NAME)).unwrap();
    cluster.start(&victim);
    cluster.wait_for("the wiped node abstaining", |c| {
        let status = c.status(&victim)?;
        (status["abstaining"] == true).then_some(())
    });
    assert!(!has_genesis(&cluster.data_dir(&victim)));
    // A deleted WAL is a warning, not a first start.
    let log = cluster.log(&victim).split_off(logged_before);
    assert!(
        log.lines()
            .any(|line| line.contains(" WARN ") && line.contains("no term or vote recovered")),
        "{log}"
    );
    assert!(!log.contains("first start"), "{log}");

    // The leader, restarted from its WAL, finds no leader and campaigns again and again.
    cluster.kill(&leader);
    cluster.start(&leader);
    cluster.wait_for("ten votes refused by the abstaining node", |c| {
        let metrics = c.metrics(&victim)?;
        let refused = metrics
            .lines()
            .find(|line| line.starts_with("conclave_votes_total{result=\"refused\"}"))?
            .rsplit(' ')
            .next()?
            .parse::<f64>()
            .ok()?;
        (refused >= 10.0).then_some(())
    });
    let status = cluster.status(&victim).unwrap();
    assert_eq!(status["abstaining"], true, "{status}");
    assert_eq!(status["voted_for"], serde_json::Value::Null, "{status}");
    assert!(
        votes(&cluster.data_dir(&victim)).is_empty(),
        "the abstaining node recorded a vote"
    );
    assert!(cluster.status(&leader).unwrap()["leader"].is_null());

    cluster.start(&down);
    cluster.wait_for(
        "all three agreeing, none abstaining",
        ProcessCluster::agreed_leader_none_abstaining,
    );
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
