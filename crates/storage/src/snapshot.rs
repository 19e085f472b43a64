//! Snapshot files (LOG-4, WAL-3): the state machine's image at one log position, in a file of
//! its own in the log directory, `snap-<last index>-<last term>.snap`.
//!
//! ```text
//! offset 0    4 bytes   magic b"CSN1" ("conclave snapshot, layout 1")
//! offset 4    u64 LE    index of the last entry the snapshot covers
//! offset 12   u64 LE    term of that entry
//! offset 20   u64 LE    bytes of state machine data that follow
//! offset 28   the data
//! then        u32 LE    CRC-32 of every byte before it
//! ```
//!
//! A snapshot that carries the cluster's configuration (MEMB-1: the configuration the
//! compacted entries held, which must outlive them) is written in layout 2, magic `b"CSN2"`:
//! the same header and data, then a `u32 LE` length and the configuration's bytes
//! ([`Configuration::encode`]) before the checksum. A snapshot without one is written in
//! layout 1, byte for byte as before, and files of both layouts are read.
//!
//! A snapshot is written to `<name>.tmp`, fsynced, renamed to its name and the directory
//! fsynced (WAL-3), so a crash leaves the old snapshot or the new one, whole; a leftover
//! temporary file is dropped at the next open. A snapshot file that does not check out was
//! damaged after it was complete: it is refused, naming the file, and left as it is.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use conclave_core::raft::LogPosition;
use conclave_core::storage::Snapshot;
use conclave_protocol::Configuration;
use tracing::warn;

use crate::error::{LogDamage, WalError};
use crate::file::{io_error, remove_if_present, sync_dir};

/// The first four bytes of a snapshot file without a configuration.
const SNAPSHOT_MAGIC: [u8; 4] = *b"CSN1";
/// The first four bytes of a snapshot file with a configuration (MEMB-1).
const SNAPSHOT_MAGIC_WITH_CONFIG: [u8; 4] = *b"CSN2";
/// Bytes before the data: magic, index, term, data length.
const SNAPSHOT_HEADER_LEN: usize = 28;
/// The checksum after the data.
const SNAPSHOT_TRAILER_LEN: usize = 4;
const SNAPSHOT_PREFIX: &str = "snap-";
const SNAPSHOT_SUFFIX: &str = ".snap";
const TEMP_SUFFIX: &str = ".tmp";

/// The file name of a snapshot at `last`.
pub(crate) fn snapshot_file_name(last: LogPosition) -> String {
    format!(
        "{SNAPSHOT_PREFIX}{:020}-{:020}{SNAPSHOT_SUFFIX}",
        last.index, last.term
    )
}

/// The position a snapshot file's name says it holds, if it is a snapshot's name.
fn parse_snapshot_name(name: &str) -> Option<LogPosition> {
    let middle = name
        .strip_prefix(SNAPSHOT_PREFIX)?
        .strip_suffix(SNAPSHOT_SUFFIX)?;
    let (index, term) = middle.split_once('-')?;
    Some(LogPosition::new(term.parse().ok()?, index.parse().ok()?))
}

/// The bytes of a snapshot file.
pub(crate) fn encode(snapshot: &Snapshot) -> Vec<u8> {
    let mut bytes =
        Vec::with_capacity(SNAPSHOT_HEADER_LEN + snapshot.data.len() + SNAPSHOT_TRAILER_LEN);
    let config = snapshot.config.as_ref().map(Configuration::encode);
    bytes.extend_from_slice(if config.is_some() {
        &SNAPSHOT_MAGIC_WITH_CONFIG
    } else {
        &SNAPSHOT_MAGIC
    });
    bytes.extend_from_slice(&snapshot.last.index.to_le_bytes());
    bytes.extend_from_slice(&snapshot.last.term.to_le_bytes());
    bytes.extend_from_slice(&(snapshot.data.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&snapshot.data);
    if let Some(config) = config {
        bytes.extend_from_slice(&(config.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&config);
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// Reads a snapshot file's bytes, or says why they are not a whole snapshot.
pub(crate) fn decode(bytes: &[u8]) -> Result<Snapshot, &'static str> {
    if bytes.len() < SNAPSHOT_HEADER_LEN + SNAPSHOT_TRAILER_LEN {
        return Err("shorter than a snapshot's header and checksum");
    }
    let with_config = match &bytes[..4] {
        magic if magic == SNAPSHOT_MAGIC.as_slice() => false,
        magic if magic == SNAPSHOT_MAGIC_WITH_CONFIG.as_slice() => true,
        _ => return Err("not a conclave snapshot (bad magic)"),
    };
    let (body, crc) = bytes.split_at(bytes.len() - SNAPSHOT_TRAILER_LEN);
    let mut stored = [0; 4];
    stored.copy_from_slice(crc);
    if crc32fast::hash(body) != u32::from_le_bytes(stored) {
        return Err("checksum mismatch");
    }
    let word = |at: usize| {
        let mut array = [0; 8];
        array.copy_from_slice(&body[at..at + 8]);
        u64::from_le_bytes(array)
    };
    let rest = &body[SNAPSHOT_HEADER_LEN..];
    let (data, config) = if with_config {
        let data_len = usize::try_from(word(20)).map_err(|_| "data length out of range")?;
        if rest.len() < data_len.saturating_add(4) {
            return Err("data length does not match the file's size");
        }
        let (data, tail) = rest.split_at(data_len);
        let (len, config) = tail.split_at(4);
        let mut array = [0; 4];
        array.copy_from_slice(len);
        if u32::from_le_bytes(array) as usize != config.len() {
            return Err("configuration length does not match the file's size");
        }
        let config = Configuration::decode(config).map_err(|_| "configuration does not decode")?;
        (data, Some(config))
    } else {
        if word(20) != rest.len() as u64 {
            return Err("data length does not match the file's size");
        }
        (rest, None)
    };
    Ok(Snapshot {
        last: LogPosition::new(word(12), word(4)),
        data: data.to_vec().into(),
        config,
    })
}

/// Writes `snapshot` into `dir` durably (WAL-3): temp file, fsync, rename, directory fsync.
/// Returns its path. On an error before the rename the old snapshot is intact and the temp
/// file removed; an error from the directory fsync leaves the rename perhaps not durable,
/// which the caller treats as a failed storage.
pub(crate) fn write(dir: &Path, snapshot: &Snapshot) -> Result<PathBuf, SnapshotWriteError> {
    let path = dir.join(snapshot_file_name(snapshot.last));
    let temp = dir.join(format!(
        "{}{TEMP_SUFFIX}",
        snapshot_file_name(snapshot.last)
    ));
    remove_if_present(&temp).map_err(SnapshotWriteError::BeforeRename)?;
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut file| {
            file.write_all(&encode(snapshot))?;
            // sync_all: the new file's size and existence are metadata.
            file.sync_all()
        })
        .and_then(|()| fs::rename(&temp, &path));
    if let Err(source) = written {
        let _ = fs::remove_file(&temp);
        return Err(SnapshotWriteError::BeforeRename(WalError::Io {
            path: temp,
            source,
        }));
    }
    sync_dir(dir).map_err(SnapshotWriteError::AfterRename)?;
    Ok(path)
}

/// Why [`write`] failed, and whether the snapshot may be half-durable.
#[derive(Debug)]
pub(crate) enum SnapshotWriteError {
    /// Nothing changed: the old snapshot is the one a restart reads.
    BeforeRename(WalError),
    /// The new file is in place but its name may not survive a crash.
    AfterRename(WalError),
}

/// The newest snapshot in `dir` (the highest index), read and checked, and the files to
/// remove once the whole log is judged sound: leftover temporary files and every older
/// snapshot (a crash between writing a new snapshot and removing the old one leaves both).
/// Changes nothing itself.
///
/// Errors: the newest snapshot file is damaged ([`WalError::LogDamaged`]); I/O.
pub(crate) fn recover(dir: &Path) -> Result<(Option<Snapshot>, Vec<PathBuf>), WalError> {
    let mut found: Vec<(LogPosition, PathBuf)> = Vec::new();
    let mut leftovers = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(SNAPSHOT_PREFIX) && name.ends_with(TEMP_SUFFIX) {
            leftovers.push(entry.path());
        } else if let Some(position) = parse_snapshot_name(&name) {
            found.push((position, entry.path()));
        }
    }
    found.sort_by_key(|(position, _)| (position.index, position.term));
    let Some((named, path)) = found.pop() else {
        return Ok((None, leftovers));
    };
    let bytes = fs::read(&path).map_err(io_error(&path))?;
    let damaged = |reason| WalError::LogDamaged {
        path: path.clone(),
        damage: LogDamage::BadSnapshot(reason),
    };
    let snapshot = decode(&bytes).map_err(damaged)?;
    if snapshot.last != named {
        return Err(damaged(
            "its header names another position than its file name",
        ));
    }
    leftovers.extend(found.into_iter().map(|(_, older)| older));
    Ok((Some(snapshot), leftovers))
}

/// Every snapshot file in `dir` with its size and the position it holds, or why it is not a
/// whole snapshot: what `conclave wal inspect` shows. Temporary files are left out.
pub(crate) fn list(dir: &Path) -> Result<Vec<SnapshotFile>, WalError> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let Some(named) = parse_snapshot_name(&entry.file_name().to_string_lossy()) else {
            continue;
        };
        let path = entry.path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            // Superseded since the listing (a running node's directory).
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(io_error(&path)(error)),
        };
        let content = match decode(&bytes) {
            Ok(snapshot) if snapshot.last == named => Ok(snapshot.last),
            Ok(_) => Err("its header names another position than its file name"),
            Err(reason) => Err(reason),
        };
        files.push(SnapshotFile {
            path,
            size_bytes: bytes.len() as u64,
            content,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// One snapshot file as `conclave wal inspect` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    /// The file.
    pub path: PathBuf,
    /// Its size.
    pub size_bytes: u64,
    /// The last log position it covers, or why it is not a whole snapshot.
    pub content: Result<LogPosition, &'static str>,
}

/// Removes what [`recover`] found left over.
pub(crate) fn remove_leftovers(leftovers: &[PathBuf]) -> Result<(), WalError> {
    for path in leftovers {
        warn!(path = %path.display(), "removing an interrupted or superseded snapshot file");
        remove_if_present(path)?;
    }
    Ok(())
}

/// Removes every snapshot file in `dir` but `keep`, once `keep` is durable.
pub(crate) fn remove_others(dir: &Path, keep: &Path) -> Result<(), WalError> {
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let name = entry.file_name();
        if parse_snapshot_name(&name.to_string_lossy()).is_some() && entry.path() != keep {
            remove_if_present(&entry.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(index: u64, term: u64, data: &[u8]) -> Snapshot {
        Snapshot {
            last: LogPosition::new(term, index),
            data: data.to_vec().into(),
            config: None,
        }
    }

    /// LOG-4: a snapshot round-trips through its bytes, its name carries its position, and
    /// names sort by index.
    #[test]
    fn log4_snapshot_bytes_and_name_round_trip() {
        let image = snapshot(42, 7, b"state machine image");
        assert_eq!(decode(&encode(&image)), Ok(image.clone()));
        assert_eq!(
            decode(&encode(&snapshot(1, 1, b""))),
            Ok(snapshot(1, 1, b""))
        );
        let name = snapshot_file_name(image.last);
        assert_eq!(name, "snap-00000000000000000042-00000000000000000007.snap");
        assert_eq!(parse_snapshot_name(&name), Some(image.last));
        assert_eq!(parse_snapshot_name("snap-1-2.snap.tmp"), None);
        assert_eq!(parse_snapshot_name("00000000000000000001.seg"), None);
    }

    /// LOG-4, WAL-2: every flipped bit and every cut of a snapshot file is refused with a
    /// reason, never a panic and never a snapshot.
    #[test]
    fn log4_damaged_snapshot_bytes_are_refused() {
        let bytes = encode(&snapshot(3, 2, b"abc"));
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[at] ^= 1 << bit;
                assert!(decode(&damaged).is_err(), "bit {bit} of byte {at}");
            }
            assert!(decode(&bytes[..at]).is_err(), "cut at {at}");
        }
    }

    /// MEMB-1: a snapshot with the cluster's configuration is written in layout 2 and reads
    /// back whole, damaged copies are refused; one without is written in layout 1, byte for
    /// byte as files written before layout 2 existed, which still read.
    #[test]
    fn memb1_the_configuration_survives_in_the_snapshot_file() {
        let id = |name: &str| conclave_protocol::PeerId::new(name).unwrap();
        let with = Snapshot {
            config: Some(Configuration {
                voters: [id("a"), id("b")].into(),
                learners: [id("c")].into(),
                addresses: Default::default(),
            }),
            ..snapshot(9, 3, b"image")
        };
        let bytes = encode(&with);
        assert_eq!(&bytes[..4], b"CSN2");
        assert_eq!(decode(&bytes), Ok(with));
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(decode(&damaged).is_err(), "byte {at}");
            assert!(decode(&bytes[..at]).is_err(), "cut at {at}");
        }

        // A layout-1 file as an earlier version wrote it, laid out by hand.
        let mut old = b"CSN1".to_vec();
        old.extend_from_slice(&9u64.to_le_bytes());
        old.extend_from_slice(&3u64.to_le_bytes());
        old.extend_from_slice(&5u64.to_le_bytes());
        old.extend_from_slice(b"image");
        let crc = crc32fast::hash(&old);
        old.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&old), Ok(snapshot(9, 3, b"image")));
        assert_eq!(encode(&snapshot(9, 3, b"image")), old);
    }
}
