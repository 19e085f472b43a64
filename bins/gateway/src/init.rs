//! `conclave init`: creates a node's WAL as a member of a new cluster, with the genesis record
//! that lets it vote from its first start (WAL-5; `docs/wal.md`, "Creating a cluster"); and
//! `conclave init --join URL`, which brings a new node into a running cluster (MEMB-4).
//!
//! A joining node is added to the cluster's configuration as a learner through any member's
//! admin API (the request is passed on to the leader), and only then is its data directory
//! created, with the same genesis record: the node has never voted under its id, so it may
//! vote as soon as it is promoted. Started, it is sent the leader's snapshot and the entries
//! after it like any follower, and it campaigns and votes only once `conclave member promote`
//! makes it a voter. The order — data directory checked, member added, WAL written — means a
//! join that fails leaves either nothing or a learner that a second `init --join` (an
//! idempotent add) completes.

use std::path::Path;
use std::process::ExitCode;

use std::time::Duration;

use conclave_api::{AddMemberRequest, MemberRole, MembersAnswer, StatusAnswer};
use conclave_config::NodeConfig;
use conclave_core::election::ElectionConfig;
use conclave_core::raft::QuorumMode;
use conclave_storage::{WalError, WalFile};

use crate::client::{AdminClient, ClientError};
use crate::output::{errln, outln};
use crate::run::{Loaded, load};

/// `conclave init --join URL`: the running cluster to join and how this node is reached.
#[derive(Debug, Clone)]
pub(crate) struct Join {
    /// The admin API of any member of the cluster.
    pub(crate) url: String,
    /// Its bearer token, when it requires one.
    pub(crate) token: Option<String>,
    /// The UDP address the others reach this node at; `link.udp.listen` when absent.
    pub(crate) udp: Option<String>,
    /// This node's admin API as the others name it; from `admin.listen` when absent.
    pub(crate) admin_url: Option<String>,
    /// Seconds to wait for each answer; the add waits for its entry to commit on top.
    pub(crate) timeout: u64,
    /// TLS for an `https://` URL.
    pub(crate) tls: crate::client_tls::TlsArgs,
}

/// `conclave init [--config FILE]`: 0 when the WAL was created, 1 when the data directory was
/// used before, 64 for a bad configuration, and `run`'s codes for a data directory it cannot
/// create or write (73, 77); with 77, what this user may not write and how to fix it.
pub(crate) fn init(file: Option<&Path>, join: Option<&Join>) -> ExitCode {
    let Loaded { config, .. } = match load(file) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    if let Some(join) = join {
        if let Err(code) = join_cluster(&config, join) {
            return code;
        }
    }
    let mode = config.election.mode();
    match WalFile::init(&config.data_dir, mode) {
        Ok(_) if join.is_some() => {
            outln!(
                "initialised {}: its WAL starts with a genesis record (this id never voted)",
                config.data_dir.display()
            );
            outln!("start it with: {}", run_command(file));
            outln!(
                "once `conclave member list` shows it caught up, make it a voter: conclave \
                 member promote {}",
                config.node_id
            );
            ExitCode::SUCCESS
        }
        Ok(recovered) => {
            outln!(
                "initialised {} for node {} of new cluster {} ({} mode): its WAL starts with a \
                 genesis record (incarnation {}), so it votes from its first start",
                config.data_dir.display(),
                config.node_id,
                config.cluster_id,
                mode.label(),
                recovered.incarnation
            );
            outln!("start it with: {}", run_command(file));
            ExitCode::SUCCESS
        }
        Err(error @ WalError::NotNew { .. }) => {
            errln!("error: {error}");
            ExitCode::FAILURE
        }
        Err(error) => {
            errln!("error: {error}");
            let code = crate::run::wal_failure_code(&error);
            // Run as the service user before the service ever started, `init` meets a data
            // directory nothing has created yet: say which, for whom, and how to create it.
            if code == crate::EXIT_NOPERM {
                if let Some(fix) = crate::preflight::permission_fix(&config.data_dir) {
                    errln!("  {fix}");
                }
            }
            ExitCode::from(code)
        }
    }
}

fn run_command(file: Option<&Path>) -> String {
    file.map_or_else(
        || "conclave run".to_owned(),
        |file| format!("conclave run --config {}", file.display()),
    )
}

/// MEMB-4: checks that this node can join, then adds it to the running cluster's
/// configuration as a learner. On failure, what went wrong is said and the exit code returned.
fn join_cluster(config: &NodeConfig, join: &Join) -> Result<(), ExitCode> {
    check_joinable(config)?;
    add_as_learner(config, join)
}

/// What this node's own configuration and data directory say, before any cluster is asked:
/// 64 for a configuration that cannot join, 1 for a used data directory.
fn check_joinable(config: &NodeConfig) -> Result<(), ExitCode> {
    let usage = |message: String| {
        errln!("error: {message}");
        ExitCode::from(crate::EXIT_USAGE)
    };
    let ElectionConfig::Raft(raft) = &config.election else {
        return Err(usage(format!(
            "init --join needs election.mode = \"raft\" (this configuration runs {}): the \
             members of a cluster live in its replicated log",
            config.election.mode().label()
        )));
    };
    if raft.log.is_none() || !matches!(raft.quorum, QuorumMode::Voters(_)) {
        return Err(usage(
            "init --join needs [log] enabled = true and election.raft.quorum = \"voters\": the \
             members of a cluster live in its replicated log"
                .to_owned(),
        ));
    }
    let me = config.node_id;
    if config.voters.contains(&me) {
        return Err(usage(format!(
            "node.id {me} is listed in cluster.voters: a joining node starts as a learner, so \
             list only the cluster's voters there (the cluster's configuration makes it a voter \
             once `conclave member promote {me}` runs)"
        )));
    }
    if let Err(error) = WalFile::check_new(&config.data_dir) {
        errln!("error: {error}");
        return Err(ExitCode::FAILURE);
    }
    Ok(())
}

/// Asks the cluster at `join.url` to add this node as a learner, unless it is one already;
/// refused for another cluster's id and for a voter.
fn add_as_learner(config: &NodeConfig, join: &Join) -> Result<(), ExitCode> {
    let me = config.node_id;
    let request = AddMemberRequest {
        id: me.to_string(),
        udp: join.udp.clone().or_else(|| advertised_udp(config)),
        admin_url: join.admin_url.clone().or_else(|| advertised_admin(config)),
    };
    let failed = |error: ClientError| {
        errln!("error: {error}");
        ExitCode::from(error.command_exit_code())
    };
    let client = AdminClient::new(
        &join.url,
        join.token.clone(),
        Duration::from_secs(join.timeout),
    )
    .and_then(|client| client.with_tls(&join.tls))
    .map_err(failed)?;
    let status: StatusAnswer = client.get("/v1/status").map_err(failed)?;
    if status.cluster_id != config.cluster_id.to_string() {
        errln!(
            "error: {} is a node of cluster {}, and this configuration's cluster.id is {}: \
             join the cluster this node belongs to, or set cluster.id",
            client.base(),
            status.cluster_id,
            config.cluster_id
        );
        return Err(ExitCode::FAILURE);
    }
    let members: MembersAnswer = client.get("/v1/members").map_err(failed)?;
    match members
        .members
        .iter()
        .find(|member| member.id == request.id)
    {
        Some(member) if member.role == MemberRole::Voter => {
            errln!(
                "error: {me} is a voter of cluster {} already: a node that lost its data \
                 directory starts empty without init and catches up (docs/wal.md); to replace \
                 it with a new node, remove it (`conclave member remove {me}`) and join the new \
                 one under a new id",
                status.cluster_id
            );
            return Err(ExitCode::FAILURE);
        }
        Some(_) => {
            outln!("{me} is a learner of cluster {} already", status.cluster_id);
            return Ok(());
        }
        None => {}
    }
    if request.udp.is_none() && config.espnow.is_none() {
        errln!(
            "note: link.udp.listen is not an address others can send to; the cluster learns \
             this node's address from its frames (give --udp ADDR to name it)"
        );
    }
    // Answered once the configuration entry commits: wait as long as a write may.
    let added: MembersAnswer = client
        .follow_leader(
            |node| node.post("/v1/members", &request, Duration::from_secs(join.timeout)),
            |_, _| {},
        )
        .map_err(failed)?;
    outln!(
        "{me} joined cluster {} as a learner (configuration entry {}, {} voters)",
        status.cluster_id,
        added.configuration_index,
        added
            .members
            .iter()
            .filter(|member| member.role == MemberRole::Voter)
            .count()
    );
    Ok(())
}

/// `link.udp.listen`, when it is an address another host can send to.
fn advertised_udp(config: &NodeConfig) -> Option<String> {
    let listen = config.udp.as_ref()?.listen;
    (!listen.ip().is_unspecified()).then(|| listen.to_string())
}

/// `admin.listen` as a URL, when it is an address another host can connect to.
fn advertised_admin(config: &NodeConfig) -> Option<String> {
    let listen = config.admin.listen?;
    (!listen.ip().is_unspecified()).then(|| format!("http://{listen}"))
}
