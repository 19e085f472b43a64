//! The membership endpoints (MEMB-1, MEMB-2, MEMB-3) over real HTTP to real nodes, every
//! answer checked by [`ApiClient`] against `docs/openapi.json`:
//!
//! - `GET /v1/members` lists the voters, then the learners, on any node; the leader adds how
//!   far each log matches and each learner's lag.
//! - `POST /v1/members` adds a learner with its addresses, answered once committed; the same
//!   request again answers the members (a retry is safe); a voter is 409 `already_member`.
//! - A learner that holds nothing is not promoted: 409 `not_caught_up`, saying how far
//!   behind; a stranger is 404 `no_such_member`; bad ids and addresses are 400.
//! - A follower redirects a change with 421 `not_leader` and names a member added at runtime
//!   with the admin URL the configuration gives it.
//! - The last voter is not removed: 409 `last_voter`.
//! - One change at a time: while a change is not committed, the next is 409
//!   `change_in_progress`; the first still commits once its leader reaches the voters.

use std::collections::BTreeMap;
use std::time::Duration;

use conclave_config::{AdminConfig, Quorum};
use conclave_core::election::ElectionConfig;
use conclave_core::raft::{LogConfig, RaftConfig};
use conclave_tests::api_client::{ApiClient, Body, Reply, serve, stop_server};
use conclave_tests::{ClusterOptions, MemoryCluster, test_log};
use serde_json::{Value, json};

/// The same, with each node's raft settings (its own id in `raft.id`) changed by `customize`.
async fn cluster_with_log_and(
    names: &[&str],
    customize: impl Fn(&mut RaftConfig),
) -> (MemoryCluster, usize) {
    let cluster =
        MemoryCluster::start_with(names, ClusterOptions::real_time(Quorum::Voters), |config| {
            if let ElectionConfig::Raft(raft) = &mut config.election {
                raft.log = Some(LogConfig::default());
                customize(raft);
            }
        })
        .await;
    let leader = cluster.await_leader(Duration::from_secs(10)).await;
    (cluster, leader)
}

#[track_caller]
fn expect(reply: &Reply, status: u16, error: Option<&str>) {
    assert_eq!(reply.status, status, "{}", reply.body);
    if let Some(code) = error {
        assert_eq!(reply.body["error"], code, "{}", reply.body);
        assert!(
            reply.body["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "an error without a message: {}",
            reply.body
        );
    }
}

/// The member `id` of a members answer.
fn member<'a>(answer: &'a Value, id: &str) -> Option<&'a Value> {
    answer["members"]
        .as_array()?
        .iter()
        .find(|member| member["id"] == id)
}

/// A leader's answer, once the member `id` is committed (a change is in force on a follower
/// when it appends it, and committed there a heartbeat later).
async fn committed_with(api: &ApiClient, id: &str) -> Value {
    members_once(api, &format!("{id} committed"), |answer| {
        answer["committed"] == true && member(answer, id).is_some()
    })
    .await
}

/// The node's `GET /v1/members` answer once `holds` accepts it; panics, naming `what`, when
/// no answer does within 10 s.
async fn members_once(api: &ApiClient, what: &str, holds: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = api.call("GET", "/v1/members", Body::Empty).await;
        expect(&reply, 200, None);
        if holds(&reply.body) {
            return reply.body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {what}: {}",
            reply.body
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The answer to a change sent to a leader elected moments ago: it commits an entry of its
/// term before it changes the configuration, and says `not_ready` until then; the first
/// other answer, within 10 s.
async fn once_settled(api: &ApiClient, method: &str, path: &str, body: Body) -> Reply {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = api.call(method, path, body.clone()).await;
        if reply.body["error"] != "not_ready" || tokio::time::Instant::now() > deadline {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// MEMB-3: add, list, the refusals of promote, the follower's redirect and view, remove.
#[actix_rt::test]
async fn members_are_listed_added_refused_and_removed() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["a", "b", "c"]).await;
    let follower = (leader + 1) % 3;
    let leader_url = "http://leader.example:7070".to_owned();
    let (leader_addr, leader_server) = serve(cluster.handle(leader), AdminConfig::default());
    let (follower_addr, follower_server) = serve(
        cluster.handle(follower),
        AdminConfig {
            peer_urls: BTreeMap::from([(cluster.id(leader), leader_url.clone())]),
            ..AdminConfig::default()
        },
    );
    let api = ApiClient::new(leader_addr);
    let on_follower = ApiClient::new(follower_addr);

    let listed = api.call("GET", "/v1/members", Body::Empty).await;
    expect(&listed, 200, None);
    assert_eq!(listed.body["members"].as_array().map(Vec::len), Some(3));
    let own = member(&listed.body, cluster.id(leader).as_str()).unwrap();
    assert_eq!(own["role"], "voter");
    assert!(own["match_index"].is_u64(), "{}", listed.body);

    let add = json!({"id": "d", "udp": "127.0.0.1:7949", "admin_url": "http://127.0.0.1:7073"});
    let added = api
        .call("POST", "/v1/members", Body::Json(add.clone()))
        .await;
    expect(&added, 200, None);
    assert_eq!(added.body["committed"], true, "{}", added.body);
    let d = member(&added.body, "d").unwrap();
    assert_eq!(d["role"], "learner");
    assert_eq!(d["udp"], "127.0.0.1:7949");
    assert_eq!(d["admin_url"], "http://127.0.0.1:7073");
    assert!(
        d["lag"].as_u64().is_some_and(|lag| lag > 0),
        "{}",
        added.body
    );
    // The same request again (a retry, or the joining node asking for itself).
    let again = api.call("POST", "/v1/members", Body::Json(add)).await;
    expect(&again, 200, None);
    assert_eq!(
        again.body["configuration_index"],
        added.body["configuration_index"]
    );

    let voter = json!({"id": cluster.id(follower).as_str()});
    expect(
        &api.call("POST", "/v1/members", Body::Json(voter)).await,
        409,
        Some("already_member"),
    );
    let behind = api.call("POST", "/v1/members/d/promote", Body::Empty).await;
    expect(&behind, 409, Some("not_caught_up"));
    assert!(
        behind.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("entries behind"),
        "{}",
        behind.body
    );
    expect(
        &api.call("POST", "/v1/members/zz/promote", Body::Empty)
            .await,
        404,
        Some("no_such_member"),
    );
    expect(
        &api.call("DELETE", "/v1/members/zz", Body::Empty).await,
        404,
        Some("no_such_member"),
    );
    for bad in [
        json!({"id": "not an id!"}),
        json!({"id": "e", "udp": "localhost"}),
        json!({"id": "e", "admin_url": "ftp://x"}),
    ] {
        expect(
            &api.call("POST", "/v1/members", Body::Json(bad)).await,
            400,
            Some("invalid_argument"),
        );
    }

    // A follower lists what it acts on, with the learner's URL from the configuration, and
    // redirects a change to the leader.
    let seen = committed_with(&on_follower, "d").await;
    assert_eq!(
        member(&seen, "d").unwrap()["admin_url"],
        "http://127.0.0.1:7073"
    );
    assert_eq!(member(&seen, "d").unwrap()["match_index"], Value::Null);
    let redirected = on_follower
        .call("DELETE", "/v1/members/d", Body::Empty)
        .await;
    expect(&redirected, 421, Some("not_leader"));
    assert_eq!(
        redirected.header("location"),
        Some(format!("{leader_url}/v1/members/d").as_str())
    );

    let removed = api.call("DELETE", "/v1/members/d", Body::Empty).await;
    expect(&removed, 200, None);
    assert!(member(&removed.body, "d").is_none(), "{}", removed.body);
    stop_server(&leader_server).await;
    stop_server(&follower_server).await;
    cluster.stop().await;
}

/// MEMB-1: a cluster keeps a voter: the only one is not removed.
#[actix_rt::test]
async fn the_last_voter_is_not_removed() {
    let _log = test_log();
    let (cluster, leader) = MemoryCluster::start_with_log(&["solo"]).await;
    let (addr, server) = serve(cluster.handle(leader), AdminConfig::default());
    let api = ApiClient::new(addr);
    let refused = once_settled(&api, "DELETE", "/v1/members/solo", Body::Empty).await;
    expect(&refused, 409, Some("last_voter"));
    stop_server(&server).await;
    cluster.stop().await;
}

/// MEMB-1, MEMB-3: one change at a time (Raft dissertation §4.1). While the leader is cut off
/// from every voter, the learner it adds is in force in its log but cannot commit, and the
/// request waits; meanwhile a second add, a promote and a removal are each refused with 409
/// `change_in_progress` in the one error shape, changing nothing. Once the leader reaches its
/// followers again, the first change commits, its request is answered with it, and the next
/// change is taken.
#[actix_rt::test]
async fn a_change_is_refused_while_another_is_not_committed() {
    let _log = test_log();
    // Only `a` campaigns, and no leader steps down for want of a quorum: while `a` is cut off
    // its followers elect nobody, so it keeps leading with its change pending, neither
    // committed nor overwritten by another leader's log, for as long as the test needs.
    let (cluster, leader) = cluster_with_log_and(&["a", "b", "c"], |raft| {
        raft.auto_election = raft.id.as_str() == "a";
        raft.check_quorum = false;
    })
    .await;
    assert_eq!(cluster.id(leader).as_str(), "a");
    let (addr, server) = serve(cluster.handle(leader), AdminConfig::default());
    let api = ApiClient::new(addr);
    // A change that commits: the leader is settled, and `d` is a learner to promote or remove.
    let added = once_settled(&api, "POST", "/v1/members", Body::Json(json!({"id": "d"}))).await;
    expect(&added, 200, None);
    assert_eq!(added.body["committed"], true, "{}", added.body);

    cluster
        .hub
        .isolate(u32::try_from(leader).expect("few nodes"));
    let held = {
        let api = api.clone();
        actix_rt::spawn(async move {
            api.call("POST", "/v1/members", Body::Json(json!({"id": "e"})))
                .await
        })
    };
    // The leader appended the change: `e` is in the configuration it acts on, uncommitted.
    let pending = members_once(&api, "e appended", |answer| member(answer, "e").is_some()).await;
    assert_eq!(pending["committed"], false, "{pending}");
    let pending_index = pending["configuration_index"].clone();

    for (method, path, body) in [
        ("POST", "/v1/members", Body::Json(json!({"id": "f"}))),
        ("POST", "/v1/members/d/promote", Body::Empty),
        ("DELETE", "/v1/members/d", Body::Empty),
    ] {
        let refused = api.call(method, path, body).await;
        expect(&refused, 409, Some("change_in_progress"));
        let message = refused.body["message"].as_str().unwrap_or("");
        assert!(
            message.contains(&format!("index {pending_index} is not committed")),
            "{method} {path}: {}",
            refused.body
        );
    }
    assert!(
        !held.is_finished(),
        "a change was answered before it could commit"
    );
    let unchanged = api.call("GET", "/v1/members", Body::Empty).await;
    expect(&unchanged, 200, None);
    assert_eq!(unchanged.body["configuration_index"], pending_index);
    assert!(member(&unchanged.body, "f").is_none(), "{}", unchanged.body);
    assert_eq!(member(&unchanged.body, "d").unwrap()["role"], "learner");

    cluster.hub.heal();
    let answered = held.await.expect("the held request's task ends");
    expect(&answered, 200, None);
    assert_eq!(answered.body["committed"], true, "{}", answered.body);
    assert_eq!(answered.body["configuration_index"], pending_index);
    assert_eq!(member(&answered.body, "e").unwrap()["role"], "learner");
    assert!(member(&answered.body, "f").is_none(), "{}", answered.body);
    // Committed, the change no longer holds the next one back.
    let removed = api.call("DELETE", "/v1/members/d", Body::Empty).await;
    expect(&removed, 200, None);
    assert!(member(&removed.body, "d").is_none(), "{}", removed.body);
    stop_server(&server).await;
    cluster.stop().await;
}
