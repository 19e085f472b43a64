//! One process per data directory (WAL-2): an advisory `flock` on `conclave.lock` in
//! `node.data_dir`, taken before any byte of the WAL is read or written and held as long as
//! the [`WalFile`](crate::WalFile) (or a repair) lives. A second process — or a second open
//! in the same process — on the same directory is refused with an error that names the
//! directory and the pid of the holder, which writes its pid into the lock file once it holds
//! the lock. The kernel drops the lock when the holder exits, however it exits, so a crashed
//! node never leaves a stale lock behind. `conclave wal inspect` reads without the lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use crate::error::WalError;

/// The lock file's name inside `node.data_dir`.
pub const LOCK_FILE_NAME: &str = "conclave.lock";

/// An exclusive hold on a data directory, released when dropped.
#[derive(Debug)]
pub struct DataDirLock {
    /// The open lock file: the `flock` belongs to this open file description.
    _file: File,
    path: PathBuf,
}

impl DataDirLock {
    /// Takes the lock on `dir` (which must exist) without waiting.
    ///
    /// Errors: [`WalError::Locked`] when another process, or another open in this process,
    /// holds it; I/O errors on the lock file.
    pub fn acquire(dir: &Path) -> Result<Self, WalError> {
        let path = dir.join(LOCK_FILE_NAME);
        // Its first write in the directory: a full disk or a read-only mount shows here, and
        // is the directory's problem, not the WAL's.
        let io_error = |source| WalError::LockFile {
            dir: dir.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_error)?;
        if let Err(errno) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
            if errno == rustix::io::Errno::WOULDBLOCK {
                return Err(WalError::Locked {
                    dir: dir.to_path_buf(),
                    pid: holder_pid(&mut file),
                });
            }
            return Err(io_error(errno.into()));
        }
        // Informational only (the lock is the flock, not the content), so no fsync.
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| writeln!(file, "{}", std::process::id()))
            .map_err(io_error)?;
        Ok(Self { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The pid the holder wrote into the lock file; `None` if it has not written it yet.
fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WAL-2 (one process per data directory): a second lock on the same directory is refused
    /// while the first is held, naming the directory and this process's pid; once the first is
    /// dropped the directory can be locked again.
    #[test]
    fn wal2_second_lock_is_refused_with_the_holders_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        assert_eq!(first.path(), dir.path().join(LOCK_FILE_NAME));
        let error = DataDirLock::acquire(dir.path()).unwrap_err();
        assert!(
            matches!(&error, WalError::Locked { dir: d, pid: Some(pid) }
                if d == dir.path() && *pid == std::process::id()),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        assert!(text.contains(&std::process::id().to_string()), "{text}");
        drop(first);
        DataDirLock::acquire(dir.path()).unwrap();
    }

    /// A lock file that cannot be written (here: a directory in its place; a full disk or a
    /// read-only mount alike) is reported as the data directory's problem, naming the
    /// directory and the lock file, not as a WAL at the lock file's path.
    #[test]
    fn wal2_an_unwritable_lock_file_names_the_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(LOCK_FILE_NAME)).unwrap();
        let error = DataDirLock::acquire(dir.path()).unwrap_err();
        assert!(
            matches!(&error, WalError::LockFile { dir: d, .. } if d == dir.path()),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.starts_with(&format!(
                "data directory {}: cannot write its lock file {LOCK_FILE_NAME}: ",
                dir.path().display()
            )),
            "{text}"
        );
    }
}
