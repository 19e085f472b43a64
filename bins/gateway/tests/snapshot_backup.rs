//! Backup and restore of the replicated log's state through real `conclave` processes
//! (MEMB-6, etcdctl's `snapshot save` / `restore` model):
//!
//! - three nodes take writes from three concurrent clients; `conclave snapshot save`, sent to
//!   a follower, follows the redirect to the leader and saves the state while the clients
//!   keep writing; `conclave snapshot status` checks the file;
//! - a fresh three-node cluster, on addresses and data directories of its own, is seeded with
//!   `conclave snapshot restore` on each node's data directory from that one file, then
//!   started: it elects, every write acknowledged before the save started is readable on every
//!   node (a write acknowledged later may be there too, with its own value, never another's),
//!   and it takes new writes that every node then holds;
//! - `restore` refuses a data directory that is not empty, and changes nothing in it.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};
use support::{ProcessCluster, conclave, text};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];
/// Every node runs the replicated log.
const LOG: &str = "[log]\nenabled = true\n";
/// Writes each client makes before the save, at least, and after it.
const WRITES_BEFORE: usize = 40;
const WRITES_AFTER: usize = 20;

/// Starts every node of `cluster`, each knowing the others' admin URLs (so that a follower
/// names the leader's in its redirect); returns the leader all agree on.
fn start(cluster: &mut ProcessCluster, new: bool) -> String {
    let urls = cluster.peer_urls();
    for id in NODES {
        let mut env = vec![("CONCLAVE__ADMIN__PEER_URLS", urls.as_str())];
        if new {
            env.push(("CONCLAVE__CLUSTER__INITIAL_STATE", "new"));
        }
        cluster.start_with(id, &env);
    }
    let (leader, _) = cluster.wait_for("a leader agreed by all", ProcessCluster::agreed_leader);
    leader
}

/// Writes made and acknowledged by the concurrent clients: `(key, value)` in the order their
/// acknowledgements arrived.
type Acked = Arc<Mutex<Vec<(String, String)>>>;

/// A client that writes `c{client}-{n}` = `v{n}-of-{client}` to `url` (the leader, or the
/// one a refusal names) until `stop`, one write at a time, recording each one the node
/// acknowledged.
fn writer(client: usize, url: String, acked: Acked, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(15)))
            .http_status_as_error(false)
            .build()
            .into();
        let mut url = url;
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            let key = format!("c{client}-{n:05}");
            let value = format!("v{n}-of-{client}");
            n += 1;
            let Ok(mut answer) = agent
                .put(&format!("{url}/v1/kv/{key}"))
                .send_json(json!({"value": value}))
            else {
                continue;
            };
            if answer.status() == 200 {
                acked.lock().unwrap().push((key, value));
            } else if let Ok(refusal) = answer.body_mut().read_json::<Value>() {
                // The leader changed: write to the new one.
                if let Some(leader) = refusal["leader_admin_url"].as_str() {
                    leader.clone_into(&mut url);
                }
            }
        }
    })
}

/// Every key starting with `c` in node `id`'s own copy, read page by page; `None` while the
/// node does not answer.
fn stored(cluster: &ProcessCluster, id: &str) -> Option<BTreeMap<String, String>> {
    let mut keys = BTreeMap::new();
    let mut next: Option<String> = None;
    loop {
        let page = match &next {
            Some(token) => format!("/v1/kv?prefix=c&stale=true&limit=1000&continue={token}"),
            None => "/v1/kv?prefix=c&stale=true&limit=1000".to_owned(),
        };
        let answer = cluster.get(id, &page)?;
        for item in answer["items"].as_array()? {
            keys.insert(
                item["key"].as_str()?.to_owned(),
                item["value"].as_str()?.to_owned(),
            );
        }
        match answer["continue"].as_str() {
            Some(token) => next = Some(token.to_owned()),
            None => return Some(keys),
        }
    }
}

/// `conclave ARGS`: its exit code, standard output as JSON (or `Null`), standard error.
fn run(args: &[&str]) -> (i32, Value, String) {
    let output = conclave(args);
    let answer = serde_json::from_str(text(&output.stdout).trim()).unwrap_or(Value::Null);
    (
        output.status.code().unwrap_or(-1),
        answer,
        text(&output.stderr),
    )
}

/// MEMB-6: save under concurrent writes, restore into a fresh three-node cluster, every write
/// acknowledged before the save readable on every node, and new writes taken.
#[test]
fn memb6_snapshot_save_and_restore_round_trip_a_cluster_under_writes() {
    let mut old = ProcessCluster::new(&NODES).with_toml(LOG);
    let leader = start(&mut old, true);
    let follower = NODES.iter().copied().find(|id| *id != leader).unwrap();

    let acked: Acked = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<JoinHandle<()>> = (0..3)
        .map(|client| {
            writer(
                client,
                old.admin_url(&leader),
                Arc::clone(&acked),
                Arc::clone(&stop),
            )
        })
        .collect();
    old.wait_for("the clients' first writes acknowledged", |_| {
        (acked.lock().unwrap().len() >= 3 * WRITES_BEFORE).then_some(())
    });

    // Everything acknowledged up to here was acknowledged before the save was asked for.
    let before_save: Vec<(String, String)> = acked.lock().unwrap().clone();
    // Outside the cluster's directory, which goes with it.
    let backups = tempfile::tempdir().unwrap();
    let file = backups.path().join("backup.snapshot");
    let file_arg = file.display().to_string();
    let admin = old.admin_url(follower);
    let (code, saved, stderr) = run(&["snapshot", "save", &file_arg, "--admin", &admin, "--json"]);
    assert_eq!(
        code, 0,
        "snapshot save through {follower}: {saved} {stderr}"
    );
    let acked_at_save = acked.lock().unwrap().len();
    // The clients go on writing after the save; the cluster never stopped for it.
    old.wait_for("more writes acknowledged after the save", |_| {
        (acked.lock().unwrap().len() >= acked_at_save + 3 * WRITES_AFTER).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    let index = saved["index"].as_u64().unwrap();
    assert!(index > before_save.len() as u64, "{saved}");
    assert_eq!(saved["cluster_id"], "process-test", "{saved}");
    assert!(
        saved["keys"].as_u64().unwrap() >= before_save.len() as u64,
        "{saved}"
    );

    // `status` checks the file and says the same.
    let (code, status, stderr) = run(&["snapshot", "status", &file_arg, "--json"]);
    assert_eq!(code, 0, "{status} {stderr}");
    for field in ["index", "term", "sha256", "size_bytes", "keys", "revision"] {
        assert_eq!(status[field], saved[field], "{field}: {status} vs {saved}");
    }
    assert_eq!(status["valid"], true);
    drop(old);

    // A fresh cluster, seeded node by node from the one file.
    let mut new = ProcessCluster::new(&NODES).with_toml(LOG);
    for id in NODES {
        let config = new.write_config(id);
        let config = config.display().to_string();
        let (code, _, stderr) = run(&["snapshot", "restore", &file_arg, "--config", &config]);
        assert_eq!(code, 0, "restore {id}: {stderr}");
        // Both clusters are called process-test here: restore says what that risks.
        assert!(stderr.contains("keeps the id of the cluster"), "{stderr}");
    }
    restore_refuses_a_used_directory(&new, &file_arg);
    let leader = start(&mut new, false);

    for id in NODES {
        let keys = new.wait_for(&format!("{id}'s restored keys"), |c| stored(c, id));
        for (key, value) in &before_save {
            assert_eq!(
                keys.get(key),
                Some(value),
                "{id}: {key}, acknowledged before the save"
            );
        }
        // Nothing but what the clients wrote, each key with its own value.
        for (key, value) in &keys {
            let (client, n) = key[1..].split_once('-').unwrap();
            let n: u64 = n.parse().unwrap();
            assert_eq!(*value, format!("v{n}-of-{client}"), "{id}: {key}");
        }
        assert_eq!(
            keys.len() as u64,
            saved["keys"].as_u64().unwrap(),
            "{id} holds what was saved"
        );
        let status = new.status(id).unwrap();
        assert!(
            status["log"]["applied_index"].as_u64().unwrap() >= index,
            "{id}: {status}"
        );
        assert!(
            status["term"].as_u64().unwrap() > saved["term"].as_u64().unwrap(),
            "{id} elected in a term after the snapshot's: {status}"
        );
    }

    // The restored cluster takes new writes, through any node, and every node gets them.
    let admin = new.admin_url(NODES.iter().copied().find(|id| *id != leader).unwrap());
    let (code, answer, stderr) = run(&[
        "kv", "put", "c9-00000", "v0-of-9", "--admin", &admin, "--json",
    ]);
    assert_eq!(
        code, 0,
        "a write to the restored cluster: {answer} {stderr}"
    );
    assert!(
        answer["revision"].as_u64().unwrap() > saved["revision"].as_u64().unwrap(),
        "{answer}"
    );
    for id in NODES {
        new.wait_for(&format!("the new write on {id}"), |c| {
            let value = c.get(id, "/v1/kv/c9-00000?stale=true")?;
            (value["value"] == "v0-of-9").then_some(())
        });
    }
}

/// MEMB-6: a second restore into a node's seeded directory is refused with exit 1, naming
/// the directory, and leaves it as it was.
fn restore_refuses_a_used_directory(cluster: &ProcessCluster, file: &str) {
    let id = NODES[0];
    let before = listing(&cluster.data_dir(id));
    let config = cluster.config_path(id).display().to_string();
    let (code, _, stderr) = run(&["snapshot", "restore", file, "--config", &config]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is not empty"), "{stderr}");
    assert_eq!(listing(&cluster.data_dir(id)), before);
}

/// The names and sizes of the files under `dir`.
fn listing(dir: &Path) -> Vec<(String, u64)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.is_dir() {
            files.extend(listing(&path));
        } else {
            files.push((path.display().to_string(), entry.metadata().unwrap().len()));
        }
    }
    files.sort();
    files
}
