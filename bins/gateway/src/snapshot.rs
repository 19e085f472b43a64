//! `conclave snapshot save|status|restore` (MEMB-6): back up the replicated log's state
//! machine from a running cluster and restore it into a new one, as `etcdctl snapshot` does.
//!
//! - `save FILE` asks a node for `GET /v1/snapshot` (following the redirect to the leader),
//!   checks the answer as `status` does, and writes it atomically with conclave-storage's
//!   [`write_atomically`].
//! - `status FILE` checks a file: the container ([`SnapshotBackup::decode`]: header, size,
//!   SHA-256) and the image in it (the state machine restores from it, at the header's index).
//! - `restore FILE --config PATH` checks the file the same way, then seeds the configured node's
//!   empty data directory ([`WalFile::init_from_snapshot`]): a member of a new cluster whose
//!   log starts after the snapshot.
//!
//! Exit codes: 0 done; 1 the node refused, the file is not a whole snapshot, or the data
//! directory is not empty; 64 a bad configuration (or one without the replicated log); 66 FILE
//! cannot be read; 69 no node answered; 73 and 77 a file or directory that cannot be written;
//! 75 the cluster could not answer in time.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use conclave_actors::machine::ClusterMachine;
use conclave_api::{SNAPSHOT_MEDIA_TYPE, rfc3339_utc};
use conclave_config::NodeConfig;
use conclave_core::election::ElectionConfig;
use conclave_core::storage::Snapshot;
use conclave_storage::{SnapshotBackup, WalError, WalFile, write_atomically};
use serde::Serialize;

use crate::cli::ClientArgs;
use crate::client::{AdminClient, ClientError};
use crate::output::{errln, outln};
use crate::run::{Loaded, load};

/// What a whole saved snapshot holds, as `status` and `save` print it.
#[derive(Debug, Serialize)]
struct Summary {
    file: String,
    valid: bool,
    format_version: u32,
    cluster_id: Option<String>,
    index: u64,
    term: u64,
    taken_at_unix_ms: u64,
    taken_at: String,
    size_bytes: u64,
    image_bytes: u64,
    sha256: String,
    revision: u64,
    keys: usize,
    jobs: usize,
}

/// A file that is not a whole saved snapshot, as `status --json` prints it.
#[derive(Debug, Serialize)]
struct Refused<'a> {
    file: String,
    valid: bool,
    problem: &'a str,
}

/// A saved snapshot read and checked whole.
struct Checked {
    backup: SnapshotBackup,
    summary: Summary,
}

/// Checks `bytes` as a saved snapshot: the container, then the image (it must restore, at
/// the index the header names). The problem, in words, when it is not whole.
fn check(file: &Path, bytes: &[u8]) -> Result<Checked, String> {
    let (backup, checksum) = SnapshotBackup::decode(bytes).map_err(|err| err.to_string())?;
    let machine = ClusterMachine::restored(&backup.image)
        .map_err(|err| format!("the state machine's image does not decode: {err}"))?;
    if machine.applied_index() != backup.last.index {
        return Err(format!(
            "the image stands at log index {}, but the header says {}",
            machine.applied_index(),
            backup.last.index
        ));
    }
    let state = machine.state();
    let summary = Summary {
        file: file.display().to_string(),
        valid: true,
        format_version: conclave_storage::BACKUP_FORMAT_VERSION,
        cluster_id: backup.cluster.map(|id| id.to_string()),
        index: backup.last.index,
        term: backup.last.term,
        taken_at_unix_ms: backup.taken_at_unix_ms,
        taken_at: rfc3339_utc(backup.taken_at_unix_ms),
        size_bytes: bytes.len() as u64,
        image_bytes: backup.image.len() as u64,
        sha256: checksum.to_string(),
        revision: state.kv().revision(),
        keys: state.kv().len(),
        jobs: state.jobs().len(),
    };
    Ok(Checked { backup, summary })
}

/// Prints a summary, as JSON or as text under `headline`.
fn print(summary: &Summary, json: bool, headline: &str) {
    if json {
        match serde_json::to_string(summary) {
            Ok(text) => outln!("{text}"),
            Err(err) => errln!("error: cannot print the answer as JSON: {err}"),
        }
        return;
    }
    outln!("{headline}");
    outln!(
        "  cluster    {}",
        summary.cluster_id.as_deref().unwrap_or("(none)")
    );
    outln!("  index      {} (term {})", summary.index, summary.term);
    outln!("  taken at   {}", summary.taken_at);
    outln!(
        "  size       {} bytes (state machine image {} bytes)",
        summary.size_bytes,
        summary.image_bytes
    );
    outln!("  sha256     {}", summary.sha256);
    outln!(
        "  store      {} keys at revision {}",
        summary.keys,
        summary.revision
    );
    outln!("  jobs       {}", summary.jobs);
}

/// Reads FILE; on failure says why, with exit 66.
fn read(file: &Path) -> Result<Vec<u8>, ExitCode> {
    std::fs::read(file).map_err(|err| {
        errln!("error: cannot read {}: {err}", file.display());
        ExitCode::from(crate::EXIT_NOINPUT)
    })
}

/// `conclave snapshot status FILE [--json]`.
pub(crate) fn status(file: &Path, json: bool) -> ExitCode {
    let bytes = match read(file) {
        Ok(bytes) => bytes,
        Err(code) => return code,
    };
    match check(file, &bytes) {
        Ok(checked) => {
            let headline = format!("{}: a whole saved snapshot", file.display());
            print(&checked.summary, json, &headline);
            ExitCode::SUCCESS
        }
        Err(problem) => {
            if json {
                let refused = Refused {
                    file: file.display().to_string(),
                    valid: false,
                    problem: &problem,
                };
                if let Ok(text) = serde_json::to_string(&refused) {
                    outln!("{text}");
                }
            }
            errln!(
                "error: {} is not a whole saved snapshot: {problem}",
                file.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// `conclave snapshot save FILE [--stale]`.
pub(crate) fn save(args: &ClientArgs, file: &Path, stale: bool) -> ExitCode {
    // The node answers a linearizable read within 10 s; a large image then takes its time
    // to travel.
    let timeout = Duration::from_secs(args.timeout).max(Duration::from_secs(30));
    let client = match AdminClient::new(&args.admin, args.token.clone(), timeout)
        .and_then(|client| client.with_tls(&args.tls))
    {
        Ok(client) => client,
        Err(err) => return failed(&err),
    };
    let path = if stale {
        "/v1/snapshot?stale=true"
    } else {
        "/v1/snapshot"
    };
    let fetched = client.follow_leader(
        |client| client.get_binary(path, SNAPSHOT_MEDIA_TYPE),
        |_, _| {},
    );
    let bytes = match fetched {
        Ok(bytes) => bytes,
        Err(err) => return failed(&err),
    };
    let checked = match check(file, &bytes) {
        Ok(checked) => checked,
        Err(problem) => {
            errln!(
                "error: the node sent something that is not a whole saved snapshot ({problem}); \
                 nothing was written"
            );
            return ExitCode::FAILURE;
        }
    };
    if let Err(err) = write_atomically(file, &bytes) {
        errln!("error: cannot write {}: {err}", file.display());
        let code = if err.kind() == std::io::ErrorKind::PermissionDenied {
            crate::EXIT_NOPERM
        } else {
            crate::EXIT_CANTCREAT
        };
        return ExitCode::from(code);
    }
    print(
        &checked.summary,
        args.json,
        &format!("saved {}", file.display()),
    );
    ExitCode::SUCCESS
}

/// Reports a failed request; its exit code (75 for what may work when run again).
fn failed(err: &ClientError) -> ExitCode {
    errln!("error: {err}");
    ExitCode::from(err.command_exit_code())
}

/// `conclave snapshot restore FILE --config PATH`.
pub(crate) fn restore(file: &Path, config_path: &Path) -> ExitCode {
    let Loaded { config, .. } = match load(Some(config_path)) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let runs_the_log = matches!(&config.election, ElectionConfig::Raft(raft) if raft.log.is_some());
    if !runs_the_log {
        errln!(
            "error: {}: node {} runs no replicated log, so a snapshot gives it nothing: restore \
             into nodes with log.enabled = true (raft mode, quorum = \"voters\")",
            config_path.display(),
            config.node_id
        );
        return ExitCode::from(crate::EXIT_USAGE);
    }
    let bytes = match read(file) {
        Ok(bytes) => bytes,
        Err(code) => return code,
    };
    let Checked { backup, summary } = match check(file, &bytes) {
        Ok(checked) => checked,
        Err(problem) => {
            errln!(
                "error: {} is not a whole saved snapshot: {problem}; nothing was written",
                file.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let same_cluster = backup.cluster == Some(config.cluster_id);
    let snapshot = Snapshot {
        last: backup.last,
        data: backup.image.into(),
        // A restore seeds a new cluster: its configuration is the new `cluster.voters`, not
        // the one the backed-up cluster had (etcdctl's model).
        config: None,
    };
    let mode = config.election.mode();
    match WalFile::init_from_snapshot(&config.data_dir, mode, snapshot) {
        Ok(recovered) => {
            let seeded = Seeded {
                file,
                config_path,
                summary: &summary,
                term: recovered.hard_state.term,
            };
            report_restored(&config, &seeded, same_cluster);
            ExitCode::SUCCESS
        }
        Err(error @ WalError::NotEmpty { .. }) => {
            errln!("error: {error}");
            ExitCode::FAILURE
        }
        Err(error) => {
            errln!("error: {error}");
            ExitCode::from(crate::run::wal_failure_code(&error))
        }
    }
}

/// What `restore` seeded a node with: the file, the node's configuration file, the state the
/// file holds and the term its new WAL starts at.
struct Seeded<'a> {
    file: &'a Path,
    config_path: &'a Path,
    summary: &'a Summary,
    term: u64,
}

/// Tells the operator what `restore` wrote, what to do next, and warns when the new cluster
/// keeps the backed-up cluster's id.
fn report_restored(config: &NodeConfig, seeded: &Seeded<'_>, same_cluster: bool) {
    let Seeded {
        file,
        config_path,
        summary,
        term,
    } = seeded;
    outln!(
        "restored {} into {} for node {} of new cluster {}: its state stands at log index {} \
         (term {}; keys: {}, jobs: {}), and its WAL starts at term {} with a genesis record, so \
         it votes from its first start",
        file.display(),
        config.data_dir.display(),
        config.node_id,
        config.cluster_id,
        summary.index,
        summary.term,
        summary.keys,
        summary.jobs,
        term
    );
    if same_cluster {
        errln!(
            "warning: the new cluster keeps the id of the cluster the snapshot was taken from \
             ({}): make sure no node of that cluster still runs where the new one can hear it, \
             or give the new cluster another cluster.id, whose frames the old nodes refuse",
            config.cluster_id
        );
    }
    let voters: Vec<String> = config.voters.iter().map(ToString::to_string).collect();
    outln!(
        "restore every voter ({}) from this same file, then start each with: conclave run \
         --config {}",
        voters.join(", "),
        config_path.display()
    );
}
