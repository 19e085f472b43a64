//! The replicated log through the embedding API (EMB-1, LOG-5, LOG-8): a single node with the
//! log writes and reads keys and runs a job through its life with the admin API's own request
//! and answer types, and refusals come back as the API's error codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use conclave::api::{
    AckRequest, ClaimRequest, EnqueueRequest, ErrorCode, JobListQuery, JobState, KvListQuery,
    NackRequest, PutRequest,
};
use conclave::{Error, Node};
use conclave_statemachine::{ClusterState, StateMachine};
use support::{node_toml, start, test_log, wait_for};
use tempfile::TempDir;

fn api_error(result: conclave::Result<impl std::fmt::Debug>) -> Box<conclave::api::ErrorAnswer> {
    match result {
        Err(Error::Api(error)) => error,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn single_node_with_the_log(dir: &TempDir) -> Node {
    let mut toml = node_toml("store-a", dir.path(), &["store-a"], None);
    toml.push_str("[log]\nenabled = true\n");
    let node = start(&toml);
    wait_for("the single node to lead", || node.is_leader().then_some(()));
    node
}

/// LOG-8 in process: put, compare-and-set, get, list a page at a time; the answers carry the
/// fencing token, and a failed compare or an absent key is the API's error with its code.
#[test]
fn keys_are_written_and_read_in_process() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let node = single_node_with_the_log(&dir);
    let kv = node.kv();
    let first = kv.put("cfg/a", "1").unwrap();
    assert_eq!(
        (first.key.as_str(), first.previous.is_none()),
        ("cfg/a", true)
    );
    let token = node.leader().unwrap().unwrap();
    assert_eq!(first.fencing.fencing_token, Some(token.to_string()));
    kv.put("cfg/b", "2").unwrap();
    kv.put("cfg/c", "3").unwrap();

    let refused = api_error(kv.put_with(
        "cfg/a",
        PutRequest {
            value: "x".into(),
            if_revision: Some(first.revision + 100),
            if_value: None,
            session: None,
            request_id: None,
        },
    ));
    assert_eq!(refused.error, ErrorCode::CompareFailed, "{refused:?}");
    assert_eq!(refused.current.clone().flatten().unwrap().value, "1");

    assert_eq!(kv.get("cfg/b").unwrap().kv.value, "2");
    assert_eq!(kv.get_stale("cfg/c").unwrap().kv.value, "3");
    assert_eq!(api_error(kv.get("cfg/none")).error, ErrorCode::NotFound);

    let page = kv
        .list(KvListQuery {
            prefix: "cfg/".into(),
            limit: Some(2),
            ..KvListQuery::default()
        })
        .unwrap();
    let keys: Vec<_> = page.items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["cfg/a", "cfg/b"]);
    let rest = kv
        .list(KvListQuery {
            prefix: "cfg/".into(),
            continue_from: page.continue_from.clone(),
            ..KvListQuery::default()
        })
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.continue_from, None);
    node.stop();
}

/// LOG-5 in process: a job is enqueued, claimed, nacked once, claimed again and acked; every
/// answer is the job in one shape, and an ack by a worker that does not hold it is `not_held`.
#[test]
fn a_job_goes_through_its_life_in_process() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let node = single_node_with_the_log(&dir);
    let jobs = node.jobs();
    let added = jobs
        .enqueue(EnqueueRequest {
            payload: "resize 7".into(),
            queue: None,
            max_attempts: Some(3),
            request_id: None,
        })
        .unwrap();
    assert_eq!(
        (
            added.job.state,
            added.job.attempts,
            added.job.queue.as_str()
        ),
        (JobState::Ready, 0, "default")
    );
    let claim = |worker: &str| ClaimRequest {
        worker: worker.into(),
        queue: None,
        lease_ms: Some(60_000),
        session: None,
        request_id: None,
        wait_ms: None,
    };
    let claimed = jobs.claim(claim("w1")).unwrap();
    assert_eq!(claimed.job.id, added.job.id);
    assert_eq!(claimed.job.worker.as_deref(), Some("w1"));
    let nacked = jobs
        .nack(
            added.job.id,
            NackRequest {
                worker: "w1".into(),
                reason: Some("disk full".into()),
                request_id: None,
            },
        )
        .unwrap();
    assert_eq!(
        (nacked.job.state, nacked.job.attempts),
        (JobState::Ready, 1)
    );
    jobs.claim(claim("w2")).unwrap();
    let wrong = api_error(jobs.ack(
        added.job.id,
        AckRequest {
            worker: "w1".into(),
            request_id: None,
        },
    ));
    assert_eq!(
        (wrong.error, wrong.state),
        (ErrorCode::NotHeld, Some(JobState::Claimed))
    );
    let done = jobs
        .ack(
            added.job.id,
            AckRequest {
                worker: "w2".into(),
                request_id: None,
            },
        )
        .unwrap();
    assert_eq!(done.job.state, JobState::Done);
    assert_eq!(
        api_error(jobs.claim(claim("w3"))).error,
        ErrorCode::NoneReady
    );
    let listed = jobs
        .list(JobListQuery {
            state: Some(JobState::Done),
            ..JobListQuery::default()
        })
        .unwrap();
    assert_eq!(listed.jobs, [done.job]);
    node.stop();
}

/// SESS-3 in process: a claim with `wait_ms` blocks until a job is enqueued and answers with
/// it, or answers `none_ready` once its wait has passed.
#[test]
fn a_claim_waits_for_a_job_in_process() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let node = std::sync::Arc::new(single_node_with_the_log(&dir));
    let claim = |wait_ms: u64| ClaimRequest {
        worker: "w1".into(),
        queue: Some("photos".into()),
        lease_ms: None,
        session: None,
        request_id: None,
        wait_ms: Some(wait_ms),
    };
    assert_eq!(
        api_error(node.jobs().claim(claim(50))).error,
        ErrorCode::NoneReady
    );
    let waiting = {
        let node = std::sync::Arc::clone(&node);
        std::thread::spawn(move || node.jobs().claim(claim(60_000)))
    };
    // Whether the claim is waiting yet or not, the job is its: it is the only claim.
    let added = node
        .jobs()
        .enqueue(EnqueueRequest {
            payload: "resize 8".into(),
            queue: Some("photos".into()),
            max_attempts: None,
            request_id: None,
        })
        .unwrap();
    let claimed = waiting.join().unwrap().unwrap();
    assert_eq!(
        (claimed.job.id, claimed.job.worker.as_deref()),
        (added.job.id, Some("w1"))
    );
    let too_long = api_error(node.jobs().claim(claim(60_001)));
    assert_eq!(too_long.error, ErrorCode::InvalidArgument, "{too_long:?}");
    assert!(too_long.message.contains("wait_ms"), "{too_long:?}");
}

/// MEMB-6 in process: a backup of a node with keys is the file `conclave snapshot status`
/// accepts — its header names the index and term it reports, and its image holds the keys
/// written before it; a stale backup works the same on the node's own copy.
#[test]
fn a_backup_holds_what_was_written_before_it() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let node = single_node_with_the_log(&dir);
    let kv = node.kv();
    kv.put("site/owner", "ops").unwrap();
    let written = kv.put("site/zone", "eu").unwrap();
    let backup = node.backup(false).unwrap();
    assert!(backup.index >= written.revision, "{backup:?}");
    let (saved, checksum) = conclave_storage::SnapshotBackup::decode(&backup.bytes).unwrap();
    assert_eq!(checksum.to_string(), backup.sha256);
    assert_eq!(
        (saved.last.index, saved.last.term),
        (backup.index, backup.term)
    );
    let mut state = ClusterState::default();
    state.restore(&saved.image).unwrap();
    assert_eq!(state.applied_index(), backup.index);
    assert_eq!(state.kv().get("site/owner").unwrap().value, "ops");
    assert_eq!(state.kv().get("site/zone").unwrap().value, "eu");
    let stale = node.backup(true).unwrap();
    assert!(stale.index >= backup.index);
}
