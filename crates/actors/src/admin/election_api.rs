//! The election's endpoints (CB-3, CB-5, CB-6): the probes, status, peers, history and the
//! operator's commands (`leader set`, `leader resign`, `auto-election`), with the answers of
//! conclave-api built from the node's state.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use actix_web::web::{self, Data};
use actix_web::{HttpRequest, HttpResponse};
use conclave_api::{
    self as api, AutoElectionRequest, CommandAnswer, ConfigurationAnswer, DongleAnswer,
    ErrorAnswer, ErrorCode, Fencing, FollowerAnswer, GossipAnswer, HealthAnswer, HistoryAnswer,
    HistoryEntry, LearnerLagAnswer, LogStatus, Outcome, PeerAnswer, PeersAnswer, PriorityAnswer,
    ReadyAnswer, SetLeaderRequest, StaticAnswer, StatusAnswer, UnansweredAnswer,
};
use conclave_core::PeerInfo;
use conclave_core::election::{Command, CommandOutcome, ElectionError, ElectionStatus, ModeStatus};
use conclave_protocol::PeerId;
use conclave_storage::HistoryRecord;

use super::{Access, AdminState, resource};
use crate::events::unix_millis;
use crate::node::{NodeError, NodeHandle, NodeStatus};

/// How often `leader set` with `wait_ms` looks whether the new leader leads.
const WAIT_POLL: Duration = Duration::from_millis(10);

/// The election's routes.
pub(super) fn routes(config: &mut web::ServiceConfig) {
    config
        .service(resource("/health", "GET").route(web::get().to(health)))
        .service(resource("/ready", "GET").route(web::get().to(ready)))
        .service(resource("/v1/status", "GET").route(web::get().to(status)))
        .service(resource("/v1/peers", "GET").route(web::get().to(peers)))
        .service(resource("/v1/history", "GET").route(web::get().to(history)))
        .service(resource("/v1/events", "GET").route(web::get().to(super::streams::events)))
        .service(resource("/v1/leader", "POST").route(web::post().to(set_leader)))
        .service(resource("/v1/leader/resign", "POST").route(web::post().to(resign)))
        .service(resource("/v1/auto-election", "POST").route(web::post().to(auto_election)));
}

/// The fencing token of `status` (CB-5).
fn fencing(status: &ElectionStatus) -> Fencing {
    crate::log_service::fencing(status.term, status.leader)
}

fn peer_answer(peer: &PeerInfo, now: conclave_core::Instant) -> PeerAnswer {
    let connected = peer.status == conclave_core::PeerStatus::Connected;
    PeerAnswer {
        peer_id: peer.id.to_string(),
        status: peer.status.label().to_owned(),
        rtt_ms: peer.rtt.filter(|_| connected).map(api::rtt_millis),
        last_seen_ms_ago: u64::try_from(now.saturating_duration_since(peer.last_seen).as_millis())
            .unwrap_or(u64::MAX),
        address: peer.addr.as_str().to_owned(),
    }
}

/// Configured peer addresses that never answered, as the status and peers answers list them.
fn unanswered_answers(
    unanswered: &[(conclave_core::LinkAddr, std::time::Duration)],
) -> Vec<UnansweredAnswer> {
    unanswered
        .iter()
        .map(|(address, silent)| UnansweredAnswer {
            address: address.as_str().to_owned(),
            silent_ms: u64::try_from(silent.as_millis()).unwrap_or(u64::MAX),
        })
        .collect()
}

/// What only a mode with a quorum reports: the quorum rule (`none` without one), the votes
/// a quorum needs and the nodes that count now (0 without one), and this node's vote.
fn quorum_of(election: &ElectionStatus) -> (&'static str, usize, usize, Option<PeerId>) {
    match &election.detail {
        ModeStatus::Raft(raft) => (
            raft.quorum_mode,
            raft.quorum_size,
            raft.electorate,
            raft.vote,
        ),
        ModeStatus::Gossip(_) | ModeStatus::Priority(_) | ModeStatus::Static(_) => {
            ("none", 0, 0, None)
        }
    }
}

/// MEMB-1: the voters of the configuration this node acts on; `cluster.voters` only seeds the
/// first one, and is all there is without the replicated log.
fn voters_in_force(status: &NodeStatus) -> Vec<PeerId> {
    match &status.election.detail {
        ModeStatus::Raft(raft) => match &raft.log {
            Some(log) if !log.configuration.voters.is_empty() => {
                log.configuration.voters.iter().copied().collect()
            }
            _ => status.voters.clone(),
        },
        _ => status.voters.clone(),
    }
}

/// Voters this node reaches (itself included when it is one), the votes a quorum needs, and
/// why the node is not ready, if it is not.
fn readiness(status: &NodeStatus) -> (usize, usize, Option<String>) {
    let election = &status.election;
    let (quorum_mode, quorum, electorate, _) = quorum_of(election);
    let reachable = if quorum_mode == "connected" {
        electorate
    } else {
        voters_in_force(status)
            .iter()
            .filter(|voter| {
                **voter == status.node_id
                    || status.peers.iter().any(|peer| {
                        peer.id == **voter && peer.status == conclave_core::PeerStatus::Connected
                    })
            })
            .count()
    };
    let reason = if election.quarantined {
        Some("this node's id is used by another live node; it takes no part in elections".into())
    } else if election.abstaining {
        let waiting: Vec<String> = election
            .detail
            .abstaining_until_heard()
            .iter()
            .map(ToString::to_string)
            .collect();
        Some(format!(
            "abstaining after starting without a term or vote (docs/wal.md); waiting to hear {}",
            waiting.join(", ")
        ))
    } else if election.leader.is_none() {
        Some(format!("no leader is known in term {}", election.term))
    } else if reachable < quorum {
        Some(format!(
            "reaches {reachable} of the {quorum} voters a quorum needs"
        ))
    } else {
        None
    };
    (reachable, quorum, reason)
}

/// The status answer.
fn status_answer(
    status: &NodeStatus,
    now: conclave_core::Instant,
    peer_urls: &BTreeMap<PeerId, String>,
) -> StatusAnswer {
    let election = &status.election;
    let (reachable_voters, _, not_ready) = readiness(status);
    let (quorum, quorum_size, electorate, vote) = quorum_of(election);
    StatusAnswer {
        node_id: status.node_id.to_string(),
        cluster_id: status.cluster_id.to_string(),
        mode: election.mode.label().to_owned(),
        quorum: quorum.to_owned(),
        quorum_size,
        electorate,
        role: election.role.label().to_owned(),
        phase: election.phase.to_owned(),
        fencing: fencing(election),
        voted_for: vote.map(|vote| vote.to_string()),
        auto_election: election.auto_election,
        manual_override: election.manual_override.is_some(),
        pinned_leader: election.manual_override.map(|leader| leader.to_string()),
        quarantined: election.quarantined,
        abstaining: election.abstaining,
        abstaining_until_heard: election
            .detail
            .abstaining_until_heard()
            .iter()
            .map(ToString::to_string)
            .collect(),
        incarnation: status.incarnation,
        authenticated: status.authenticated,
        peers: status.peers.iter().map(|p| peer_answer(p, now)).collect(),
        unanswered: Vec::new(),
        dongle: status.dongle.as_ref().map(dongle_answer),
        voters: status.voters.iter().map(ToString::to_string).collect(),
        reachable_voters,
        ready: not_ready.is_none(),
        peer_admin_urls: peer_urls
            .iter()
            .map(|(peer, url)| (peer.to_string(), url.clone()))
            .collect(),
        log: match &election.detail {
            ModeStatus::Raft(raft) => raft
                .log
                .as_ref()
                .map(|log| log_answer(log, raft.last_log.index)),
            _ => None,
        },
        priority: match &election.detail {
            ModeStatus::Priority(priority) => Some(PriorityAnswer {
                state: priority.state.label().to_owned(),
                score: priority.score,
                battery_percent: priority.battery,
                uptime_minutes: priority.uptime_minutes,
                signal: priority.signal,
                round: priority.round,
                master_confirmed: priority.master_confirmed,
                awaiting: priority.awaiting.map(|peer| peer.to_string()),
                forced: priority.forced,
                peers: priority.peers,
            }),
            _ => None,
        },
        gossip: match &election.detail {
            ModeStatus::Gossip(gossip) => Some(GossipAnswer {
                use_leader_election: gossip.use_leader_election,
                org_leader: gossip.org_leader,
                view_size: gossip.view_size,
                yielding: gossip.yielding,
                highest_epoch_seen: gossip.highest_epoch_seen,
                ignored_outside_view: gossip.ignored_outside_view,
            }),
            _ => None,
        },
        static_leader: match &election.detail {
            ModeStatus::Static(detail) => Some(StaticAnswer {
                configured_leader: detail.configured_leader.to_string(),
                assigned_leader: detail.assigned_leader.to_string(),
                leader_reachable: detail.leader_reachable,
            }),
            _ => None,
        },
    }
}

/// The replicated log's part of the status answer; `last` is the log's last index.
fn log_answer(log: &conclave_core::raft::LogStatus, last: u64) -> LogStatus {
    LogStatus {
        last_index: last,
        commit_index: log.commit,
        applied_index: log.applied,
        persisted_index: log.persisted,
        snapshot_index: log.snapshot.index,
        followers: log
            .followers
            .iter()
            .map(|(peer, matched)| FollowerAnswer {
                peer_id: peer.to_string(),
                match_index: *matched,
                lag: last.saturating_sub(*matched),
            })
            .collect(),
        configuration: Some(configuration_answer(log)),
    }
}

/// MEMB-1, MEMB-2: the configuration in force, whether its entry is committed, and on the
/// leader each learner's lag.
fn configuration_answer(log: &conclave_core::raft::LogStatus) -> ConfigurationAnswer {
    let names = |peers: &std::collections::BTreeSet<PeerId>| {
        peers.iter().map(ToString::to_string).collect()
    };
    ConfigurationAnswer {
        voters: names(&log.configuration.voters),
        learners: names(&log.configuration.learners),
        index: log.configuration_index,
        // The seed (index 0) and a configuration that came with a snapshot are committed.
        committed: log.configuration_index <= log.commit.max(log.snapshot.index),
        learner_lag: log
            .learner_lag
            .iter()
            .map(|(peer, lag)| LearnerLagAnswer {
                peer_id: peer.to_string(),
                lag: *lag,
            })
            .collect(),
    }
}

/// The ESP-NOW dongle's state as the status answer shows it.
fn dongle_answer(report: &crate::transport::DongleReport) -> DongleAnswer {
    let status = &report.status;
    let info = status.info.as_ref();
    DongleAnswer {
        port: report.port.clone(),
        connected: status.connected,
        mac: info.map(|info| info.mac.to_string()),
        firmware: info.map(|info| info.firmware.clone()),
        channel: info.map(|info| info.channel),
        max_payload: info.map(|info| info.max_payload),
        credits_free: u64::from(status.credits_free),
        queue_len: status.queue_len as u64,
        tx_frames: status.tx_frames,
        rx_frames: status.rx_frames,
        tx_failures: status.tx_failures,
        crc_errors: status.crc_errors,
        dropped_from_queue: status.dropped_droppable,
        refused: status.refused,
        reconnects: status.reconnects,
        last_error: status.last_error.clone(),
        rssi_dbm: report
            .rssi
            .iter()
            .map(|(peer, rssi)| (peer.to_string(), (rssi * 10.0).round() / 10.0))
            .collect(),
    }
}

/// One history record as the API shows it.
fn history_entry(record: &HistoryRecord) -> HistoryEntry {
    HistoryEntry {
        term: record.term,
        leader: record.leader.map(|leader| leader.to_string()),
        cause: record.cause.label().to_owned(),
        at_unix_ms: record.at_unix_ms,
        at: api::rfc3339_utc(record.at_unix_ms),
    }
}

async fn health(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Open);
    let alive = state.node.is_alive();
    let mut alarms = Vec::new();
    if state.node.metrics().store_full() {
        alarms.push("store_full".to_owned());
    }
    let answer = HealthAnswer {
        status: if alive { "ok" } else { "stopped" }.to_owned(),
        node_id: state.node.node_id().to_string(),
        alarms,
    };
    if alive {
        HttpResponse::Ok().json(answer)
    } else {
        HttpResponse::ServiceUnavailable().json(answer)
    }
}

async fn ready(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let status = match state.node.status().await {
        Ok(status) => status,
        Err(err) => {
            return state
                .error_response(&request, state.service.unavailable(&err))
                .await;
        }
    };
    let (reachable_voters, quorum_size, reason) = readiness(&status);
    let answer = ReadyAnswer {
        ready: reason.is_none(),
        reason,
        reachable_voters,
        quorum_size,
        fencing: fencing(&status.election),
    };
    if answer.ready {
        HttpResponse::Ok().json(answer)
    } else {
        HttpResponse::ServiceUnavailable().json(answer)
    }
}

async fn status(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let (status, unanswered) = match (state.node.status().await, state.node.unanswered().await) {
        (Ok(status), Ok(unanswered)) => (status, unanswered),
        (Err(err), _) | (_, Err(err)) => {
            return state
                .error_response(&request, state.service.unavailable(&err))
                .await;
        }
    };
    let mut answer = status_answer(&status, state.node.now(), &state.service.admin_urls().all());
    answer.unanswered = unanswered_answers(&unanswered);
    HttpResponse::Ok().json(answer)
}

async fn peers(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let (peers, election, unanswered) = match (
        state.node.peers().await,
        state.node.election_status().await,
        state.node.unanswered().await,
    ) {
        (Ok(peers), Ok(election), Ok(unanswered)) => (peers, election, unanswered),
        (Err(err), _, _) | (_, Err(err), _) | (_, _, Err(err)) => {
            return state
                .error_response(&request, state.service.unavailable(&err))
                .await;
        }
    };
    let now = state.node.now();
    HttpResponse::Ok().json(PeersAnswer {
        peers: peers.iter().map(|p| peer_answer(p, now)).collect(),
        unanswered: unanswered_answers(&unanswered),
        fencing: fencing(&election),
    })
}

async fn history(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let (history, election) = match (
        state.node.history().await,
        state.node.election_status().await,
    ) {
        (Ok(history), Ok(election)) => (history, election),
        (Err(err), _) | (_, Err(err)) => {
            return state
                .error_response(&request, state.service.unavailable(&err))
                .await;
        }
    };
    HttpResponse::Ok().json(HistoryAnswer {
        history: history.iter().map(history_entry).collect(),
        fencing: fencing(&election),
    })
}

fn outcome_answer(outcome: CommandOutcome) -> (Outcome, Option<PeerId>) {
    match outcome {
        CommandOutcome::Applied => (Outcome::Applied, None),
        CommandOutcome::Forwarded { to } => (Outcome::ForwardedToLeader, Some(to)),
        CommandOutcome::TransferStarted { target } => (Outcome::TransferStarted, Some(target)),
        CommandOutcome::SteppedDown => (Outcome::SteppedDown, None),
    }
}

/// Runs a command: the answer with its outcome and the fencing token after it, or the error.
async fn run_command(
    state: &AdminState,
    command: Command,
) -> Result<CommandAnswer, Box<ErrorAnswer>> {
    let unavailable = |err: NodeError| state.service.unavailable(&err);
    let outcome = state.node.command(command).await.map_err(unavailable)?;
    let status = state.node.election_status().await.map_err(unavailable)?;
    let node_id = state.node.node_id().to_string();
    match outcome {
        Ok(outcome) => {
            let (outcome, peer) = outcome_answer(outcome);
            Ok(CommandAnswer {
                outcome,
                peer_id: peer.map(|p| p.to_string()),
                node_id,
                completed: None,
                fencing: fencing(&status),
            })
        }
        Err(err) => {
            // A verb the mode does not offer (gossip's `leader set`) is `not_offered`, which
            // says so by the mode's name; a leader by configuration (static, a gossip org
            // leader) refusing `leader resign` is `not_allowed`; a follower asked to resign
            // sends the client to the leader, as the log's writes do.
            let code = match err {
                ElectionError::NotLeader { .. } => ErrorCode::NotLeader,
                ElectionError::StaticLeaderCannotResign { .. }
                | ElectionError::OrgLeaderCannotResign { .. } => ErrorCode::NotAllowed,
                ElectionError::Quarantined => ErrorCode::Quarantined,
                ElectionError::Abstaining => ErrorCode::Abstaining,
                ElectionError::ShuttingDown => ErrorCode::Unavailable,
                ElectionError::NotOffered { .. } | ElectionError::StaticModeElectsNobody => {
                    ErrorCode::NotOffered
                }
                ElectionError::NotAVoter(_)
                | ElectionError::UnknownPeer(_)
                | ElectionError::InvalidConfig(_)
                | ElectionError::OtherMode { .. } => ErrorCode::InvalidArgument,
            };
            let mut message = format!("{node_id}: {err}");
            let mut leader_admin_url = None;
            if let ElectionError::NotLeader { leader } = err {
                leader_admin_url = state.admin_url(leader);
                if let (Some(leader), None) = (leader, &leader_admin_url) {
                    message.push_str(&format!(
                        "; send the request to {leader}'s admin API (list it in \
                         admin.peer_urls to have it named here)"
                    ));
                }
            }
            let mut error = state.service.error(code, message, Some(fencing(&status)));
            error.leader_admin_url = leader_admin_url;
            Err(error)
        }
    }
}

async fn set_leader(
    state: Data<AdminState>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    admit!(state, request, Access::Admin);
    let body: SetLeaderRequest = attempt!(state, request, state.json_body(&request, payload).await);
    let target = match PeerId::new(&body.peer_id) {
        Ok(target) => target,
        Err(err) => {
            let error = ErrorAnswer::new(
                ErrorCode::InvalidArgument,
                format!("peer_id {:?}: {err}", body.peer_id),
            );
            return state.error_response(&request, Box::new(error)).await;
        }
    };
    // The deadline was checked by `refuse`; here it also ends the wait.
    let deadline = state.deadline(&request).ok().flatten();
    let mut answer = match run_command(&state, Command::SetLeader(target)).await {
        Ok(answer) => answer,
        Err(error) => return state.error_response(&request, error).await,
    };
    let Some(wait_ms) = body.wait_ms else {
        return state.ok(&request, &answer);
    };
    let mut wait = Duration::from_millis(wait_ms);
    if let Some(deadline) = deadline {
        let left = deadline.saturating_sub(unix_millis(SystemTime::now()));
        wait = wait.min(Duration::from_millis(left));
    }
    match wait_for_leader(&state.node, target, wait).await {
        Ok(status) => {
            answer.completed = Some(true);
            answer.fencing = fencing(&status);
            state.ok(&request, &answer)
        }
        Err(Some(status)) => {
            let leader = status
                .leader
                .map_or_else(|| "unknown".to_owned(), |leader| leader.to_string());
            let error = state.service.error(
                ErrorCode::Timeout,
                format!(
                    "{target} did not take the lead within {} ms: the leader is {leader} in term \
                     {} (is {target} running and connected? `conclave peers` shows what this \
                     node hears)",
                    wait.as_millis(),
                    status.term
                ),
                Some(fencing(&status)),
            );
            state.error_response(&request, error).await
        }
        Err(None) => {
            let error = state.service.unavailable(&NodeError::Stopped);
            state.error_response(&request, error).await
        }
    }
}

/// Waits (at most `wait`) until this node sees `target` lead; the election status then, or
/// at the end of the wait (`None` if the node stopped).
async fn wait_for_leader(
    node: &NodeHandle,
    target: PeerId,
    wait: Duration,
) -> Result<ElectionStatus, Option<ElectionStatus>> {
    let end = actix::clock::Instant::now() + wait;
    loop {
        let status = node.election_status().await.map_err(|_| None)?;
        if status.leader == Some(target) {
            return Ok(status);
        }
        if actix::clock::Instant::now() >= end {
            return Err(Some(status));
        }
        actix::clock::sleep(WAIT_POLL).await;
    }
}

async fn resign(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Admin);
    let answer = run_command(&state, Command::Resign).await;
    state.respond(&request, answer).await
}

async fn auto_election(
    state: Data<AdminState>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    admit!(state, request, Access::Admin);
    let body: AutoElectionRequest =
        attempt!(state, request, state.json_body(&request, payload).await);
    let answer = run_command(&state, Command::EnableAutoElection(body.enabled)).await;
    state.respond(&request, answer).await
}
