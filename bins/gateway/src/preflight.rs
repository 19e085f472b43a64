//! What `conclave check-config` checks of `node.data_dir` beyond the file's values, so that it
//! does not say `ok` where `conclave run` then refuses to start (WAL-1, WAL-2, issue 15 item 4):
//! the directory (or the ancestor it would be created in), and its lock file and WAL when they
//! exist, must be writable by this user, and the WAL and the replicated log must be ones a
//! node can start from, the WAL of the configured `election.mode`.
//!
//! Nothing is created or changed: the WAL is read as `conclave wal inspect` reads it (without
//! the lock, so a running node's directory can be checked), and writability is asked of the
//! kernel (`access(2)`), which answers for this user as `run` would meet it.

use std::path::{Path, PathBuf};

use conclave_core::election::Mode;
use conclave_storage::{LOCK_FILE_NAME, LogVerdict, Verdict, WAL_FILE_NAME, WalError, inspect};
use rustix::fs::{Access, access};

/// Every reason `conclave run` would refuse the data directory `dir` for a node of election
/// `mode` (when the mode is known), each a sentence for the key `node.data_dir`.
pub(crate) fn data_dir_problems(dir: &Path, mode: Option<Mode>) -> Vec<String> {
    let mut problems = Vec::new();
    if !dir.exists() {
        if let Some(problem) = creatable(dir) {
            problems.push(problem);
        }
        return problems;
    }
    if !dir.is_dir() {
        // `Settings::validate` reports a file in its place already.
        return problems;
    }
    if let Err(err) = access(dir, Access::WRITE_OK | Access::EXEC_OK) {
        problems.push(format!(
            "{} is not writable by this user ({err}): the node writes its lock file and WAL \
             there",
            dir.display()
        ));
    }
    // A lock file or WAL left by another user (a first start as root) is as much in the way
    // as the directory itself.
    let lock = dir.join(LOCK_FILE_NAME);
    if lock.exists() {
        if let Err(err) = access(&lock, Access::READ_OK | Access::WRITE_OK) {
            problems.push(format!(
                "{} is not readable and writable by this user ({err})",
                lock.display()
            ));
        }
    }
    let wal = dir.join(WAL_FILE_NAME);
    if !wal.exists() {
        return problems;
    }
    if let Err(err) = access(&wal, Access::READ_OK | Access::WRITE_OK) {
        problems.push(format!(
            "{} is not readable and writable by this user ({err})",
            wal.display()
        ));
        return problems;
    }
    let inspection = match inspect(dir) {
        Ok(inspection) => inspection,
        Err(err) => {
            problems.push(err.to_string());
            return problems;
        }
    };
    let damage = match inspection.examination.verdict {
        Verdict::Clean | Verdict::TornTail { .. } => None,
        Verdict::Corrupt {
            offset,
            record,
            reason,
            next_valid,
        } => Some(format!(
            "record {record} at byte {offset} is damaged ({reason}) and a valid record follows \
             at byte {next_valid}"
        )),
        Verdict::Unreadable {
            offset,
            record,
            kind,
            reason,
        } => Some(format!(
            "record {record} (kind {kind}) at byte {offset} cannot be read ({reason})"
        )),
    };
    if let Some(damage) = damage {
        problems.push(format!(
            "the WAL {} is damaged: {damage}; the node refuses to start from it. `conclave wal \
             inspect {dir}` shows every record, `conclave wal repair {dir} --confirm` keeps the \
             valid ones (docs/wal.md)",
            wal.display(),
            dir = dir.display()
        ));
    }
    if let Some(LogVerdict::Refused(reason)) = inspection.log.as_ref().map(|log| &log.verdict) {
        problems.push(format!(
            "the replicated log is damaged, and the node refuses to start from it: {reason}"
        ));
    }
    let recorded = inspection.start.mode;
    if let (Some(recorded), Some(configured)) =
        (recorded, mode.filter(|&mode| Some(mode) != recorded))
    {
        problems.push(
            WalError::OtherMode {
                path: wal.clone(),
                recorded,
                configured,
            }
            .to_string(),
        );
    }
    problems
}

/// Why `dir`, which does not exist, could not be created by this user; `None` when it can.
fn creatable(dir: &Path) -> Option<String> {
    let ancestor = nearest_existing(dir)?;
    if !ancestor.is_dir() {
        return Some(format!(
            "{} cannot be created: {} is not a directory",
            dir.display(),
            ancestor.display()
        ));
    }
    access(&ancestor, Access::WRITE_OK | Access::EXEC_OK)
        .err()
        .map(|err| {
            format!(
                "{} does not exist and cannot be created: {} is not writable by this user \
                 ({err})",
                dir.display(),
                ancestor.display()
            )
        })
}

/// The nearest ancestor of `dir` that exists (`.` for a relative path with none).
fn nearest_existing(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .skip(1)
        .map(|ancestor| {
            if ancestor.as_os_str().is_empty() {
                Path::new(".")
            } else {
                ancestor
            }
        })
        .find(|ancestor| ancestor.exists())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use conclave_core::storage::Storage;
    use conclave_protocol::{EntryKind, LogEntry};

    use super::*;

    /// WAL-2, LOG-2: `check-config` reports a damaged replicated log, as `run` would refuse it,
    /// and reports nothing for a sound one.
    #[test]
    fn a_damaged_log_is_a_data_directory_problem() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = conclave_storage::WalFile::open(dir.path()).unwrap();
        for index in 1..=2 {
            wal.append_entries(&[LogEntry {
                index,
                term: 1,
                kind: EntryKind::Command,
                data: b"command".to_vec(),
            }])
            .unwrap();
            wal.sync().unwrap();
        }
        drop(wal);
        assert_eq!(data_dir_problems(dir.path(), None), Vec::<String>::new());

        let log = dir.path().join(conclave_storage::LOG_DIR_NAME);
        let segment = std::fs::read_dir(&log)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| path.extension().is_some_and(|ext| ext == "seg"))
            .unwrap();
        let mut bytes = std::fs::read(&segment).unwrap();
        bytes[20] ^= 0x04;
        std::fs::write(&segment, &bytes).unwrap();
        let problems = data_dir_problems(dir.path(), None);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("the replicated log is damaged"),
            "{problems:?}"
        );
        assert!(
            problems[0].contains(&segment.display().to_string()),
            "{problems:?}"
        );
    }
}
