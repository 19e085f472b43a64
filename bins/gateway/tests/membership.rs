//! Growing and shrinking the log's cluster at runtime through real `conclave run` processes
//! over UDP (MEMB-1, MEMB-2, MEMB-3), while a client writes without pause:
//!
//! - three voters start; `conclave member add` brings in a fourth node, started with its own
//!   configuration (its id not among `cluster.voters`, `link.udp.peers` naming the three):
//!   as a learner, then, once caught up, as a voter; then a fifth the same way (3 → 5);
//! - `conclave member remove` takes out a follower and then the leader (5 → 3): the leader
//!   steps down once its removal commits and says in one line that it was removed;
//! - every write the client saw acknowledged is then read back through each remaining
//!   member's admin API (linearizable, redirected to the leader) and found in each one's own
//!   copy.
//!
//! The original voters' files name neither newcomer: they reach them through the addresses
//! the configuration carries.
//!
//! Two runbooks of `docs/operations.md` are followed as written: a voter whose disk died is
//! replaced (removed, a new node joined with `conclave init --join` and promoted) under
//! writes (MEMB-4), and a node moved to a new UDP address follows again with the other
//! nodes' files unchanged.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use support::{ProcessCluster, conclave, text};

const ORIGINAL: [&str; 3] = ["gw-a", "gw-b", "gw-c"];
const ALL: [&str; 5] = ["gw-a", "gw-b", "gw-c", "gw-d", "gw-e"];

/// Node `id`'s configuration: the three original voters (their UDP and admin addresses
/// included, as an operator's files name them), the log on; the originals are a new cluster,
/// a newcomer joins an existing one.
fn config(cluster: &ProcessCluster, id: &str) -> String {
    let voters = ORIGINAL.map(|voter| format!("{voter:?}")).join(", ");
    let peers: Vec<String> = ORIGINAL
        .iter()
        .filter(|other| **other != id)
        .map(|other| format!("{:?}", cluster.udp_addr(other)))
        .collect();
    let urls: Vec<String> = ORIGINAL
        .iter()
        .map(|voter| format!("\"{voter}={}\"", cluster.admin_url(voter)))
        .collect();
    let new = if ORIGINAL.contains(&id) {
        "\ninitial_state = \"new\""
    } else {
        ""
    };
    let mut text: Vec<String> = cluster
        .config_text(id)
        .lines()
        .map(|line| {
            if line.starts_with("voters = ") {
                format!("voters = [{voters}]{new}")
            } else if line.starts_with("peers = ") {
                format!("peers = [{}]", peers.join(", "))
            } else if line == "[admin]" {
                format!("[admin]\npeer_urls = [{}]", urls.join(", "))
            } else {
                line.to_owned()
            }
        })
        .collect();
    text.push("[log]\nenabled = true\n".to_owned());
    text.join("\n")
}

/// `conclave ARGS --admin <node>`: exit code, standard output and error.
fn cli(cluster: &ProcessCluster, node: &str, args: &[&str]) -> (i32, String) {
    let admin = cluster.admin_url(node);
    let mut all = args.to_vec();
    all.extend_from_slice(&["--admin", admin.as_str()]);
    let output = conclave(&all);
    let shown = format!("{}{}", text(&output.stdout), text(&output.stderr));
    (output.status.code().unwrap_or(-1), shown)
}

/// The members `node` lists, with their roles.
fn members(cluster: &ProcessCluster, node: &str) -> Option<Vec<(String, String)>> {
    let answer = cluster.get(node, "/v1/members")?;
    Some(
        answer["members"]
            .as_array()?
            .iter()
            .map(|m| {
                (
                    m["id"].as_str().unwrap_or("").to_owned(),
                    m["role"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect(),
    )
}

/// A client writing `w/N` through the members named in `targets`, one after another, until
/// told to stop; the keys it saw acknowledged.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<String>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Writer {
    fn start(urls: Arc<Mutex<Vec<String>>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, acked) = (stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let admin = {
                        let urls = urls.lock().unwrap();
                        urls[(n as usize) % urls.len()].clone()
                    };
                    let key = format!("w/{n:05}");
                    let id = format!("writer-{n}");
                    let output = conclave(&[
                        "kv",
                        "put",
                        &key,
                        "v",
                        "--request-id",
                        &id,
                        "--admin",
                        &admin,
                    ]);
                    if output.status.success() {
                        acked.lock().unwrap().push(key);
                    }
                }
            })
        };
        Self {
            stop,
            acked,
            thread,
        }
    }

    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        Arc::try_unwrap(self.acked).unwrap().into_inner().unwrap()
    }
}

/// `conclave member add ID` through `via`, until it says the node is a voter.
fn add_voter(cluster: &ProcessCluster, via: &str, id: &str) {
    let udp = cluster.udp_addr(id);
    let url = cluster.admin_url(id);
    let (code, shown) = cli(
        cluster,
        via,
        &["member", "add", id, "--udp", &udp, "--admin-url", &url],
    );
    assert_eq!(code, 0, "member add {id}: {shown}");
    assert!(shown.contains(&format!("{id} is a learner")), "{shown}");
    assert!(shown.contains(&format!("{id} is a voter")), "{shown}");
    // Every running member acts on the configuration that makes it a voter.
    cluster.wait_for(&format!("{id} a voter everywhere"), |c| {
        ALL.iter()
            .filter(|node| c.is_running(node))
            .all(|node| {
                members(c, node).is_some_and(|m| m.contains(&(id.to_owned(), "voter".to_owned())))
            })
            .then_some(())
    });
}

/// MEMB-3: 3 → 5 → 3 voters under continuous writes; no acknowledged write is lost.
#[test]
fn memb3_grow_to_five_and_shrink_to_three_under_writes() {
    let mut cluster = ProcessCluster::new(&ALL);
    for id in ORIGINAL {
        let text = config(&cluster, id);
        cluster.start_with_config(id, &text);
    }
    let (first, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let targets = Arc::new(Mutex::new(
        ORIGINAL.map(|id| cluster.admin_url(id)).to_vec(),
    ));
    let writer = Writer::start(targets.clone());

    for newcomer in ["gw-d", "gw-e"] {
        let text = config(&cluster, newcomer);
        cluster.start_with_config(newcomer, &text);
        add_voter(&cluster, &first, newcomer);
        targets.lock().unwrap().push(cluster.admin_url(newcomer));
    }
    assert_eq!(members(&cluster, &first).unwrap().len(), 5);

    // Out go a follower and the leader, through a node that stays.
    let (leader, _) = cluster.wait_for("the leader", ProcessCluster::agreed_leader);
    let follower = ORIGINAL.into_iter().find(|id| *id != leader).unwrap();
    let stays = ALL
        .into_iter()
        .filter(|id| *id != leader && *id != follower)
        .collect::<Vec<_>>();
    targets
        .lock()
        .unwrap()
        .retain(|url| stays.iter().any(|id| cluster.admin_url(id) == *url));
    for gone in [follower, leader.as_str()] {
        let (code, shown) = cli(&cluster, stays[0], &["member", "remove", gone]);
        assert_eq!(code, 0, "member remove {gone}: {shown}");
        assert!(shown.contains(&format!("{gone} is removed")), "{shown}");
    }
    cluster.wait_for("the removed leader says so", |c| {
        c.log(&leader)
            .contains("this node was removed from the cluster")
            .then_some(())
    });
    cluster.stop(follower);
    cluster.stop(&leader);
    let (successor, _) =
        cluster.wait_for("a leader among the three", ProcessCluster::agreed_leader);
    assert!(stays.contains(&successor.as_str()), "{successor}");

    let acked: BTreeSet<String> = writer.finish().into_iter().collect();
    assert!(
        acked.len() > 10,
        "the writer got few writes through: {}",
        acked.len()
    );
    for node in &stays {
        assert_eq!(members(&cluster, node).unwrap().len(), 3, "{node}");
    }
    assert_readable_everywhere(&cluster, &stays, &acked);
}

/// Every key of `acked` is read back through each of `nodes` (linearizable, redirected to the
/// leader) and found in each one's own copy.
fn assert_readable_everywhere(cluster: &ProcessCluster, nodes: &[&str], acked: &BTreeSet<String>) {
    for node in nodes {
        let (code, shown) = cli(cluster, node, &["kv", "list", "w/", "--json"]);
        assert_eq!(code, 0, "{shown}");
        let listed: Value = serde_json::from_str(shown.trim()).unwrap_or(Value::Null);
        let keys = keys_of(&listed);
        let missing: Vec<&String> = acked.iter().filter(|k| !keys.contains(*k)).collect();
        assert!(missing.is_empty(), "through {node}, missing {missing:?}");
        cluster.wait_for(&format!("every acknowledged write in {node}'s copy"), |c| {
            let own = c.get(node, "/v1/kv?prefix=w/&limit=1000&stale=true")?;
            let keys = keys_of(&own);
            acked.iter().all(|k| keys.contains(k)).then_some(())
        });
    }
}

/// docs/operations.md, "Replace a voter whose disk died", followed as written under writes:
/// the dead voter is removed, a new node with a new id joins with `conclave init --join`,
/// starts, and is promoted once caught up; every acknowledged write is then on all three.
#[test]
fn memb4_a_dead_voter_is_replaced_by_the_runbook() {
    let mut cluster = ProcessCluster::new(&ALL);
    for id in ORIGINAL {
        let text = config(&cluster, id);
        cluster.start_with_config(id, &text);
    }
    cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let targets = Arc::new(Mutex::new(
        ["gw-a", "gw-b"].map(|id| cluster.admin_url(id)).to_vec(),
    ));
    let writer = Writer::start(targets.clone());

    // gw-c's disk dies.
    cluster.wait_for("a few writes", |_| {
        (writer.acked.lock().unwrap().len() > 3).then_some(())
    });
    cluster.kill("gw-c");
    std::fs::remove_dir_all(cluster.data_dir("gw-c")).unwrap();

    // 1. The dead voter is removed, from a live node (once the two have a leader again: the
    //    dead one may have led).
    cluster.wait_for("gw-c removed", |c| {
        let (code, _) = cli(c, "gw-a", &["member", "remove", "gw-c"]);
        (code == 0).then_some(())
    });

    // 2. A new node, a new id: init --join, start, promote once caught up.
    let joining = config(&cluster, "gw-d");
    let path = cluster.config_path("gw-d");
    std::fs::write(&path, &joining).unwrap();
    let path = path.to_string_lossy().into_owned();
    let via = cluster.admin_url("gw-b");
    let joined = conclave(&["init", "--join", &via, "--config", &path]);
    let shown = format!("{}{}", text(&joined.stdout), text(&joined.stderr));
    assert!(joined.status.success(), "init --join: {shown}");
    assert!(
        shown.contains("gw-d joined cluster") && shown.contains("as a learner"),
        "{shown}"
    );
    // A second init on the same directory is refused, and adds nothing twice.
    let again = conclave(&["init", "--join", &via, "--config", &path]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    cluster.start_with_config("gw-d", &joining);
    cluster.wait_for("gw-d promoted", |c| {
        let (code, _) = cli(c, "gw-a", &["member", "promote", "gw-d"]);
        (code == 0).then_some(())
    });
    targets.lock().unwrap().push(cluster.admin_url("gw-d"));
    cluster.wait_for("a write through gw-d", |_| {
        let n = writer.acked.lock().unwrap().len();
        (n > 0).then_some(())
    });

    let acked: BTreeSet<String> = writer.finish().into_iter().collect();
    let now: Vec<(String, String)> = ["gw-a", "gw-b", "gw-d"]
        .map(|id| (id.to_owned(), "voter".to_owned()))
        .to_vec();
    cluster.wait_for("gw-a, gw-b, gw-d the voters everywhere", |c| {
        ["gw-a", "gw-b", "gw-d"]
            .iter()
            .all(|node| members(c, node).is_some_and(|m| m == now))
            .then_some(())
    });
    assert_readable_everywhere(&cluster, &["gw-a", "gw-b", "gw-d"], &acked);
    // The replaced cluster elects without gw-c: stop its leader, two of three remain.
    let (leader, _) = cluster.wait_for("the leader", ProcessCluster::agreed_leader);
    cluster.kill(&leader);
    cluster.wait_for("a leader of the two others", |c| {
        let others: Vec<&str> = ["gw-a", "gw-b", "gw-d"]
            .into_iter()
            .filter(|id| *id != leader)
            .collect();
        let views: BTreeSet<String> = others
            .iter()
            .filter_map(|id| c.status(id)?["leader"].as_str().map(str::to_owned))
            .collect();
        (views.len() == 1 && views.iter().all(|l| others.contains(&l.as_str()))).then_some(())
    });
}

/// docs/operations.md, "Move a node to a new address": a follower restarted on another UDP
/// port, the other nodes' files unchanged, follows the leader again and gets new writes.
#[test]
fn memb_a_node_moved_to_a_new_address_follows_again() {
    let mut cluster = ProcessCluster::new(&ALL);
    for id in ORIGINAL {
        let text = config(&cluster, id);
        cluster.start_with_config(id, &text);
    }
    let (leader, _) = cluster.wait_for("a first leader", ProcessCluster::agreed_leader);
    let moved = ORIGINAL.into_iter().find(|id| *id != leader).unwrap();
    cluster.stop(moved);
    // The address of a node this cluster never starts: free on its loopback address.
    let old = cluster.udp_addr(moved);
    let new = cluster.udp_addr("gw-e");
    let text =
        config(&cluster, moved).replace(&format!("listen = {old:?}"), &format!("listen = {new:?}"));
    assert!(text.contains(&new), "the UDP listen address is in the file");
    cluster.start_with_config(moved, &text);
    let (code, shown) = cli(&cluster, &leader, &["kv", "put", "w/after-move", "here"]);
    assert_eq!(code, 0, "{shown}");
    cluster.wait_for(&format!("the write in {moved}'s copy"), |c| {
        let own = c.get(moved, "/v1/kv/w/after-move?stale=true")?;
        (own["value"].as_str() == Some("here")).then_some(())
    });
    let status = cluster.status(moved).unwrap();
    assert_eq!(status["leader"].as_str(), Some(leader.as_str()), "{status}");
}

/// The keys of a `kv list` answer.
fn keys_of(answer: &Value) -> BTreeSet<String> {
    answer["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["key"].as_str().map(str::to_owned))
        .collect()
}
