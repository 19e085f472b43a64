//! A change of the log cluster's configuration seen from outside a node (MEMB-1, MEMB-2, CB-1,
//! CB-2, CB-3, CB-4): after a learner is added, then removed, through the members API, the
//! status answer names the configuration, whether it is committed and the learner's lag; the
//! metrics count the members and the learner's lag, and drop that series once it is no
//! learner; `/v1/events` carries a `membership_changed` event; the `on_membership_change` hook
//! runs with the configuration in its environment. In real time: hooks are real processes.

use std::path::Path;
use std::time::Duration;

use conclave_config::{AdminConfig, HookCommand, HooksConfig, Quorum};
use conclave_core::election::ElectionConfig;
use conclave_core::raft::LogConfig;
use conclave_tests::api_client::{ApiClient, Body, serve, stop_server};
use conclave_tests::{ClusterOptions, MemoryCluster, test_log};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(10);

/// A hook command that writes its `CONCLAVE_*` variables to `dir/<configuration index>`
/// through a temporary name, so a file that exists is complete.
fn dump_env(dir: &Path) -> HookCommand {
    HookCommand::Shell(format!(
        "f='{}'/\"$CONCLAVE_CONFIGURATION_INDEX\"; \
         env | grep ^CONCLAVE_ | sort > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"",
        dir.display()
    ))
}

/// The lines the hook run for the configuration at `index` wrote, once it did.
async fn hook_run(cluster: &MemoryCluster, dir: &Path, index: u64) -> Vec<String> {
    let path = dir.join(index.to_string());
    let ran = cluster.wait_for(BOUND, || async { path.exists() }).await;
    assert!(ran, "on_membership_change did not run for index {index}");
    std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.starts_with("CONCLAVE_AT_UNIX_MS="))
        .map(str::to_owned)
        .collect()
}

/// Sends a membership change to the lone node's members API until it takes it (a new leader
/// takes none before it has committed an entry of its term); the configuration entry's index.
async fn change(api: &ApiClient, method: &str, path: &str, body: Body) -> u64 {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let answer = api.call(method, path, body.clone()).await;
        if answer.status == 200 {
            return answer.body["configuration_index"]
                .as_u64()
                .expect("an index");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{method} {path} was never taken: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The `configuration` of the node's status answer, once `ready` says it is what the test
/// waits for.
async fn configuration(api: &ApiClient, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let status = api.call("GET", "/v1/status", Body::Empty).await;
        let configuration = status.body["log"]["configuration"].clone();
        if ready(&configuration) {
            return configuration;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the status never showed it; last: {configuration}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// MEMB-1, MEMB-2, CB-1..4: a learner added and removed shows in status, metrics, the event
/// stream and the hook.
#[actix_rt::test]
async fn a_membership_change_shows_in_status_metrics_events_and_hooks() {
    let _log = test_log();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut options = ClusterOptions::real_time(Quorum::Voters);
    options.hooks = HooksConfig {
        on_membership_change: vec![dump_env(dir.path())],
        ..HooksConfig::default()
    };
    let cluster = MemoryCluster::start_with(&["solo"], options, |config| {
        if let ElectionConfig::Raft(raft) = &mut config.election {
            raft.log = Some(LogConfig::default());
        }
    })
    .await;
    cluster.await_leader(BOUND).await;
    let (addr, server) = serve(cluster.handle(0), AdminConfig::default());
    let api = ApiClient::new(addr);
    let metrics = cluster.handle(0).metrics().clone();

    // Before: the seed, committed, no learner, no lag series.
    let seed = configuration(&api, |c| !c.is_null()).await;
    assert_eq!(
        seed,
        json!({"voters": ["solo"], "learners": [], "index": 0, "committed": true,
               "learner_lag": []})
    );
    assert_eq!(metrics.value("conclave_log_voters", &[]), Some(1.0));
    assert_eq!(metrics.value("conclave_log_learners", &[]), Some(0.0));
    assert_eq!(
        metrics.value("conclave_log_configuration_changes_total", &[]),
        Some(0.0)
    );

    // A learner that never answers: in force at once, committed by the lone voter, as far
    // behind as the log is long.
    let added = change(
        &api,
        "POST",
        "/v1/members",
        Body::Json(json!({"id": "gw-d"})),
    )
    .await;
    let shown = configuration(&api, |c| c["committed"] == true && c["index"] != 0).await;
    assert_eq!(shown["index"], added);
    assert_eq!(shown["voters"], json!(["solo"]));
    assert_eq!(shown["learners"], json!(["gw-d"]));
    assert_eq!(shown["learner_lag"][0]["peer_id"], "gw-d");
    let lag = shown["learner_lag"][0]["lag"].as_u64().unwrap_or_default();
    assert!(lag >= added, "{shown}");
    assert_eq!(metrics.value("conclave_log_learners", &[]), Some(1.0));
    assert_eq!(
        metrics.value("conclave_log_configuration_index", &[]),
        Some(added as f64)
    );
    assert!(
        metrics
            .value("conclave_log_learner_lag_entries", &[("peer", "gw-d")])
            .is_some_and(|entries| entries >= added as f64),
        "{}",
        metrics.render()
    );
    assert_eq!(
        hook_run(&cluster, dir.path(), added).await,
        [
            format!("CONCLAVE_CONFIGURATION_INDEX={added}"),
            "CONCLAVE_EVENT=membership_changed".to_owned(),
            "CONCLAVE_HOOK=on_membership_change".to_owned(),
            "CONCLAVE_LEARNERS=gw-d".to_owned(),
            "CONCLAVE_MEMBER=true".to_owned(),
            "CONCLAVE_MEMBERSHIP=voter".to_owned(),
            "CONCLAVE_NODE_ID=solo".to_owned(),
            "CONCLAVE_VOTERS=solo".to_owned(),
        ]
    );

    // Removed again: the lag series goes with it.
    let removed = change(&api, "DELETE", "/v1/members/gw-d", Body::Empty).await;
    let shown = configuration(&api, |c| {
        c["committed"] == true && c["learners"] == json!([])
    })
    .await;
    assert_eq!(shown["index"], removed);
    assert_eq!(shown["learner_lag"], json!([]));
    assert_eq!(metrics.value("conclave_log_learners", &[]), Some(0.0));
    assert_eq!(
        metrics.value("conclave_log_learner_lag_entries", &[("peer", "gw-d")]),
        None
    );
    assert_eq!(
        metrics.value("conclave_log_configuration_changes_total", &[]),
        Some(2.0)
    );
    let second = hook_run(&cluster, dir.path(), removed).await;
    assert!(
        second.contains(&"CONCLAVE_LEARNERS=".to_owned()),
        "{second:?}"
    );

    // The event stream kept both, each checked against the API document.
    let incarnation = api.call("GET", "/v1/status", Body::Empty).await.body["incarnation"]
        .as_u64()
        .unwrap_or_default();
    let from_start = format!("{incarnation}.0");
    let events = api
        .events(
            "/v1/events",
            &[("Last-Event-ID", &from_start)],
            BOUND,
            |events| {
                events
                    .iter()
                    .filter(|event| event.name == "membership_changed")
                    .count()
                    >= 2
            },
        )
        .await;
    let changes: Vec<Value> = events
        .iter()
        .filter(|event| event.name == "membership_changed")
        .map(|event| serde_json::from_str(&event.data).unwrap_or_default())
        .collect();
    assert_eq!(changes.len(), 2, "{events:?}");
    assert_eq!(changes[0]["event"], "membership_changed");
    assert_eq!(changes[0]["index"], added);
    assert_eq!(changes[0]["learners"], json!(["gw-d"]));
    assert_eq!(changes[0]["member"], true);
    assert_eq!(changes[0]["membership"], "voter");
    assert_eq!(changes[1]["index"], removed);
    assert_eq!(changes[1]["learners"], json!([]));
    stop_server(&server).await;
}
