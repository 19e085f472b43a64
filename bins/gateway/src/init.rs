//! `conclave init`: creates a node's WAL as a member of a new cluster, with the genesis record
//! that lets it vote from its first start (WAL-5; `docs/wal.md`, "Creating a cluster").

use std::path::Path;
use std::process::ExitCode;

use conclave_storage::{WalError, WalFile};

use crate::output::{errln, outln};
use crate::run::{Loaded, load};

/// `conclave init [--config FILE]`: 0 when the WAL was created, 1 when the data directory was
/// used before, 64 for a bad configuration, and `run`'s codes for a data directory it cannot
/// create or write (73, 77); with 77, what this user may not write and how to fix it.
pub(crate) fn init(file: Option<&Path>) -> ExitCode {
    let Loaded { config, .. } = match load(file) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let mode = config.election.mode();
    match WalFile::init(&config.data_dir, mode) {
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
            let run = file.map_or_else(
                || "conclave run".to_owned(),
                |file| format!("conclave run --config {}", file.display()),
            );
            outln!("start it with: {run}");
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
