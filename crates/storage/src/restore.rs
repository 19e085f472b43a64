//! Seeding a data directory from a saved snapshot (MEMB-6, WAL-5): what `conclave snapshot
//! restore` does for each node of a new cluster, as `etcdctl snapshot restore` does.
//!
//! The node must start with the snapshot's state as a member of a new cluster that has voted
//! in no term yet, and its log must start after the snapshot. So the directory gets:
//!
//! 1. the snapshot, as the replicated log's snapshot file (`log/snap-….snap`): the log starts
//!    after its index and the state machine is restored from it at every start;
//! 2. in `conclave.wal`, the election mode, then in one group commit a hard state of the
//!    snapshot's term with no vote, and a genesis record (as `conclave init` writes).
//!
//! The hard state's term is the snapshot's, not 0: a node's term must never be below the term
//! of the last entry in its log, or its first leader would append entries of a lower term
//! after it and a node without them would look more up to date than those that have them
//! (Raft §5.4.1). No node of the new cluster has voted in any term, so no vote is forgotten.
//!
//! Only an empty (or absent) directory is seeded. The snapshot is durable before the hard
//! state is written; a crash in between leaves a WAL without a hard state, which a node treats
//! as a lost WAL (it abstains) and a second restore refuses as not empty: the operator empties
//! the directory and restores again.

use std::fs;
use std::io;
use std::path::Path;

use conclave_core::election::{HardState, Mode};
use conclave_core::storage::{Snapshot, Storage};

use crate::error::WalError;
use crate::file::{Recovered, WalFile, WalOptions, io_error};
use crate::record::WalRecord;

impl WalFile {
    /// Seeds `dir` for a member of a new cluster restored from `snapshot` (see the module
    /// docs): refused ([`WalError::NotEmpty`]) unless `dir` is empty or absent. Returns what a
    /// start recovers from it: the snapshot, and a hard state of its term with no vote.
    pub fn init_from_snapshot(
        dir: &Path,
        mode: Mode,
        snapshot: Snapshot,
    ) -> Result<Recovered, WalError> {
        refuse_unless_empty(dir)?;
        let options = WalOptions {
            mode: Some(mode),
            ..WalOptions::default()
        };
        let last = snapshot.last;
        {
            let (mut wal, _) = Self::open_with(dir, options)?;
            if last.index > 0 {
                wal.save_snapshot(snapshot)?;
            }
            let hard = HardState {
                term: last.term,
                ..HardState::default()
            };
            // One write and one fsync: a torn write keeps the hard state or nothing, never a
            // genesis without it.
            wal.append(&[
                WalRecord::HardState(hard),
                WalRecord::Genesis {
                    at_unix_ms: crate::clock::unix_millis(std::time::SystemTime::now()),
                },
            ])?;
        }
        let (_wal, recovered) = Self::open_with(dir, options)?;
        Ok(recovered)
    }
}

/// `Ok` when `dir` does not exist or holds nothing.
fn refuse_unless_empty(dir: &Path) -> Result<(), WalError> {
    let mut entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io_error(dir)(error)),
    };
    match entries.next() {
        None => Ok(()),
        Some(entry) => Err(WalError::NotEmpty {
            dir: dir.to_path_buf(),
            entry: entry
                .map_err(io_error(dir))?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use conclave_core::raft::LogPosition;

    use super::*;

    fn snapshot(index: u64, term: u64) -> Snapshot {
        Snapshot {
            last: LogPosition::new(term, index),
            data: b"\x01image".to_vec().into(),
            config: None,
        }
    }

    /// MEMB-6, WAL-5: a restored directory starts a node with the snapshot as its log's start,
    /// a hard state of the snapshot's term with no vote, and a genesis record: it takes part
    /// in elections at once, and its first term is above the snapshot's.
    #[test]
    fn memb6_restored_directory_starts_from_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("node");
        let recovered = WalFile::init_from_snapshot(&data, Mode::Raft, snapshot(120, 7)).unwrap();
        assert_eq!(recovered.snapshot, Some(snapshot(120, 7)));
        assert!(recovered.entries.is_empty());
        assert_eq!(recovered.hard_state.term, 7);
        assert_eq!(recovered.hard_state.vote, None);
        assert!(!recovered.amnesic);
        assert!(recovered.genesis_at_unix_ms.is_some());
        assert_eq!(recovered.mode, Some(Mode::Raft));

        // A start finds the same.
        let (_wal, again) = WalFile::open_for_mode(&data, Mode::Raft).unwrap();
        assert_eq!(again.snapshot, Some(snapshot(120, 7)));
        assert_eq!((again.hard_state.term, again.amnesic), (7, false));
    }

    /// MEMB-6: a directory that holds anything is refused, naming what it holds, and left as
    /// it was; an empty one is taken.
    #[test]
    fn memb6_restore_refuses_a_directory_that_is_not_empty() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
        let error =
            WalFile::init_from_snapshot(dir.path(), Mode::Raft, snapshot(3, 1)).unwrap_err();
        assert!(
            matches!(&error, WalError::NotEmpty { entry, .. } if entry == "notes.txt"),
            "{error}"
        );
        assert!(error.to_string().contains("not empty"), "{error}");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);

        // A directory restored once is refused the second time.
        let empty = tempfile::tempdir().unwrap();
        WalFile::init_from_snapshot(empty.path(), Mode::Raft, snapshot(3, 1)).unwrap();
        assert!(matches!(
            WalFile::init_from_snapshot(empty.path(), Mode::Raft, snapshot(3, 1)),
            Err(WalError::NotEmpty { .. })
        ));
    }

    /// An image taken before anything was applied (index 0) gives a new member with an empty
    /// log, as `conclave init` does.
    #[test]
    fn an_image_at_index_zero_seeds_an_empty_member() {
        let dir = tempfile::tempdir().unwrap();
        let recovered =
            WalFile::init_from_snapshot(dir.path(), Mode::Raft, snapshot(0, 0)).unwrap();
        assert_eq!(recovered.snapshot, None);
        assert!(!recovered.amnesic);
    }
}
