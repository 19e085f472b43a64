//! Saved snapshots (MEMB-6, LOG-4): the file `conclave snapshot save` writes and `conclave
//! snapshot restore` reads, as `GET /v1/snapshot` serves it — one node's state-machine image at
//! a committed index, with a small self-describing header and a SHA-256 checksum, so that a
//! copy can be checked anywhere, long after it was taken, without a node.
//!
//! ```text
//! offset 0    8 bytes   magic b"CNCLSNAP"
//! offset 8    u32 LE    format version, 1
//! offset 12   u64 LE    index of the last entry the image covers (committed)
//! offset 20   u64 LE    term of that entry
//! offset 28   u64 LE    when the image was taken, Unix ms, by the serving node's clock
//! offset 36   u8        length L of the cluster id (0: none)
//! offset 37   L bytes   the cluster id of the cluster it was taken from
//! then        u64 LE    length of the image
//! then        the image: conclave-statemachine's snapshot bytes (a format byte, MessagePack)
//! then        32 bytes  SHA-256 of every byte before it
//! ```
//!
//! Decoding is total: any byte string is a [`SnapshotBackup`] or a [`BackupError`] that names
//! what is wrong (not a snapshot, another version, cut short, longer than announced, a
//! checksum that does not match), never a panic, and never an allocation a length field asks
//! for before the file shows it holds that many bytes. It checks the container only; whether
//! the image decodes is the state machine's to say.
//!
//! [`write_atomically`] puts a file in place as snapshot files are (WAL-3): a temp file beside
//! it, fsync, rename, directory fsync, so a reader finds the old file or the new one, whole.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use conclave_core::raft::LogPosition;
use conclave_protocol::ClusterId;
use sha2::{Digest, Sha256};

/// The first eight bytes of a saved snapshot.
pub const BACKUP_MAGIC: [u8; 8] = *b"CNCLSNAP";
/// The layout this version writes and reads.
pub const BACKUP_FORMAT_VERSION: u32 = 1;
/// Bytes of the checksum at the end.
const CHECKSUM_LEN: usize = 32;
/// Bytes before the cluster id: magic, version, index, term, time, the id's length.
const FIXED_HEADER_LEN: usize = 37;
/// The magic of a node's own snapshot files in `log/` (see `snapshot.rs`).
const INTERNAL_SNAPSHOT_MAGIC: &[u8] = b"CSN1";
/// The magic of a WAL.
const WAL_MAGIC: &[u8] = b"CWL1";

/// A state-machine image at a committed log position, as a saved snapshot holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotBackup {
    /// The cluster it was taken from, when the node named one.
    pub cluster: Option<ClusterId>,
    /// The last entry the image covers: its index and term.
    pub last: LogPosition,
    /// When it was taken, in milliseconds since the Unix epoch, by the serving node's clock.
    pub taken_at_unix_ms: u64,
    /// The state machine's snapshot bytes (conclave-statemachine's format).
    pub image: Vec<u8>,
}

/// A SHA-256 checksum, shown as 64 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checksum(pub [u8; CHECKSUM_LEN]);

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// Why bytes are not a whole saved snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackupError {
    /// No bytes at all.
    #[error("the file is empty: not a saved conclave snapshot")]
    Empty,
    /// The magic is not there.
    #[error("not a saved conclave snapshot: it starts with {found:02x?}, not \"CNCLSNAP\"{hint}")]
    NotASnapshot {
        /// Its first bytes (at most eight).
        found: Vec<u8>,
        /// What the file looks like instead, when that is known.
        hint: &'static str,
    },
    /// A layout this version does not read.
    #[error(
        "saved snapshot format version {found}, but this conclave reads version \
         {BACKUP_FORMAT_VERSION}: read it with the version that saved it or a newer one (or the \
         file is damaged)"
    )]
    UnsupportedVersion {
        /// The version the file says.
        found: u32,
    },
    /// The file ends inside its header.
    #[error("truncated: the file ends at byte {len}, inside its header (in the {field})")]
    TruncatedHeader {
        /// The file's size.
        len: u64,
        /// The field it ends in.
        field: &'static str,
    },
    /// The file is shorter than its header says: a copy cut short.
    #[error(
        "truncated: the file holds {len} bytes, but its header announces {expected} (an image \
         of {image_len} bytes and a 32-byte checksum): the copy was cut short, or its header is \
         damaged"
    )]
    Truncated {
        /// The file's size.
        len: u64,
        /// The size the header announces.
        expected: u64,
        /// The image size the header announces.
        image_len: u64,
    },
    /// Bytes follow where the file should end.
    #[error(
        "{extra} bytes after the end: the file holds {len} bytes, but its header announces \
         {expected}; something was appended, or its header is damaged"
    )]
    TrailingBytes {
        /// The file's size.
        len: u64,
        /// The size the header announces.
        expected: u64,
        /// How many bytes too many.
        extra: u64,
    },
    /// The checksum does not match the content.
    #[error(
        "checksum mismatch: the file records SHA-256 {stored}, but its content hashes to \
         {computed}: the file is damaged"
    )]
    ChecksumMismatch {
        /// The checksum the file ends with.
        stored: Checksum,
        /// The checksum of what precedes it.
        computed: Checksum,
    },
    /// The checksum holds but a header field is not valid: written by something else.
    #[error("bad header: {0}")]
    BadHeader(&'static str),
}

impl SnapshotBackup {
    /// The file's bytes, and the checksum they end with.
    #[must_use]
    pub fn encode(&self) -> (Vec<u8>, Checksum) {
        let cluster = self.cluster.as_ref().map_or(&[][..], ClusterId::as_bytes);
        let mut bytes = Vec::with_capacity(
            FIXED_HEADER_LEN + cluster.len() + 8 + self.image.len() + CHECKSUM_LEN,
        );
        bytes.extend_from_slice(&BACKUP_MAGIC);
        bytes.extend_from_slice(&BACKUP_FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&self.last.index.to_le_bytes());
        bytes.extend_from_slice(&self.last.term.to_le_bytes());
        bytes.extend_from_slice(&self.taken_at_unix_ms.to_le_bytes());
        // A cluster id is at most 32 bytes (PROTO-1).
        bytes.push(u8::try_from(cluster.len()).unwrap_or(u8::MAX));
        bytes.extend_from_slice(cluster);
        bytes.extend_from_slice(&(self.image.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&self.image);
        let checksum = Checksum(Sha256::digest(&bytes).into());
        bytes.extend_from_slice(&checksum.0);
        (bytes, checksum)
    }

    /// Reads a saved snapshot's bytes, checked whole: the header, the announced size and the
    /// checksum. Returns it with its checksum, or says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<(Self, Checksum), BackupError> {
        let mut reader = Reader { bytes, at: 0 };
        reader.magic()?;
        let version = u32::from_le_bytes(reader.array("format version")?);
        if version != BACKUP_FORMAT_VERSION {
            return Err(BackupError::UnsupportedVersion { found: version });
        }
        let index = reader.u64("index")?;
        let term = reader.u64("term")?;
        let taken_at_unix_ms = reader.u64("time it was taken")?;
        let [cluster_len] = reader.array("cluster id's length")?;
        let cluster = reader.take(usize::from(cluster_len), "cluster id")?;
        let image_len = reader.u64("image's length")?;
        let expected = (reader.at as u64)
            .saturating_add(image_len)
            .saturating_add(CHECKSUM_LEN as u64);
        let len = bytes.len() as u64;
        if len < expected {
            return Err(BackupError::Truncated {
                len,
                expected,
                image_len,
            });
        }
        if len > expected {
            return Err(BackupError::TrailingBytes {
                len,
                expected,
                extra: len - expected,
            });
        }
        let (content, stored) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
        let mut stored_sum = [0; CHECKSUM_LEN];
        stored_sum.copy_from_slice(stored);
        let stored = Checksum(stored_sum);
        let computed = Checksum(Sha256::digest(content).into());
        if stored != computed {
            return Err(BackupError::ChecksumMismatch { stored, computed });
        }
        let cluster = match cluster {
            [] => None,
            id => Some(
                std::str::from_utf8(id)
                    .ok()
                    .and_then(|id| ClusterId::new(id).ok())
                    .ok_or(BackupError::BadHeader(
                        "the cluster id is not 1 to 32 characters of [A-Za-z0-9._-]",
                    ))?,
            ),
        };
        let image = content[reader.at..].to_vec();
        let backup = Self {
            cluster,
            last: LogPosition::new(term, index),
            taken_at_unix_ms,
            image,
        };
        Ok((backup, stored))
    }
}

/// Reads the header field by field, saying which one the bytes end in.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn magic(&mut self) -> Result<(), BackupError> {
        if self.bytes.is_empty() {
            return Err(BackupError::Empty);
        }
        let head = &self.bytes[..self.bytes.len().min(BACKUP_MAGIC.len())];
        if head == BACKUP_MAGIC {
            self.at = BACKUP_MAGIC.len();
            return Ok(());
        }
        if BACKUP_MAGIC.starts_with(head) {
            return Err(BackupError::TruncatedHeader {
                len: self.bytes.len() as u64,
                field: "magic",
            });
        }
        let hint = if head.starts_with(INTERNAL_SNAPSHOT_MAGIC) {
            " (it is a node's own snapshot file from its log directory; `conclave snapshot \
             save` takes one from a running node)"
        } else if head.starts_with(WAL_MAGIC) {
            " (it is a node's WAL)"
        } else {
            ""
        };
        Err(BackupError::NotASnapshot {
            found: head.to_vec(),
            hint,
        })
    }

    fn take(&mut self, count: usize, field: &'static str) -> Result<&'a [u8], BackupError> {
        let end = self
            .at
            .checked_add(count)
            .filter(|end| *end <= self.bytes.len())
            .ok_or(BackupError::TruncatedHeader {
                len: self.bytes.len() as u64,
                field,
            })?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], BackupError> {
        let mut array = [0; N];
        array.copy_from_slice(self.take(N, field)?);
        Ok(array)
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, BackupError> {
        self.array(field).map(u64::from_le_bytes)
    }
}

/// Writes `bytes` to `path` so that a reader finds the old file or the new one, whole (WAL-3):
/// a temp file beside it (`.NAME.tmp-PID`), fsync, rename over `path`, directory fsync. On an
/// error before the rename, `path` is as it was and the temp file is removed. The file is
/// created readable and writable by its owner only: a saved snapshot holds every value.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let temp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&temp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            // sync_all: the new file's size and existence are metadata.
            file.sync_all()
        })
        .and_then(|()| fs::rename(&temp, path));
    if let Err(error) = written {
        let _ = fs::remove_file(&temp);
        return Err(error);
    }
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backup(image: &[u8], cluster: Option<&str>) -> SnapshotBackup {
        SnapshotBackup {
            cluster: cluster.map(|id| ClusterId::new(id).unwrap()),
            last: LogPosition::new(4, 1234),
            taken_at_unix_ms: 1_764_316_800_000,
            image: image.to_vec(),
        }
    }

    /// MEMB-6: a saved snapshot round-trips through its bytes, with and without a cluster id
    /// and with an empty image, and the checksum it ends with is the one decoding reports.
    #[test]
    fn memb6_saved_snapshot_round_trips() {
        for original in [
            backup(b"\x01state machine image", Some("three-udp")),
            backup(b"", None),
            backup(&[0xAB; 4096], Some("a")),
        ] {
            let (bytes, checksum) = original.encode();
            assert_eq!(&bytes[..8], b"CNCLSNAP");
            assert_eq!(bytes[bytes.len() - 32..], checksum.0);
            assert_eq!(SnapshotBackup::decode(&bytes), Ok((original, checksum)));
        }
        let (bytes, checksum) = backup(b"x", None).encode();
        assert_eq!(checksum.to_string().len(), 64);
        assert_eq!(
            checksum.to_string(),
            Checksum(Sha256::digest(&bytes[..bytes.len() - 32]).into()).to_string()
        );
    }

    /// MEMB-6: every truncation of a saved snapshot is refused as one, naming where it ends,
    /// never a panic and never a snapshot.
    #[test]
    fn memb6_every_truncation_is_refused() {
        let (bytes, _) = backup(b"\x01image bytes", Some("three-udp")).encode();
        assert_eq!(SnapshotBackup::decode(&[]), Err(BackupError::Empty));
        for cut in 1..bytes.len() {
            let error = SnapshotBackup::decode(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(
                    error,
                    BackupError::TruncatedHeader { .. } | BackupError::Truncated { .. }
                ),
                "cut at {cut}: {error}"
            );
            assert!(error.to_string().contains("truncated"), "{error}");
        }
        // Cut inside the image: the sizes are named.
        let error = SnapshotBackup::decode(&bytes[..bytes.len() - 40]).unwrap_err();
        assert_eq!(
            error,
            BackupError::Truncated {
                len: bytes.len() as u64 - 40,
                expected: bytes.len() as u64,
                image_len: 12,
            }
        );
    }

    /// MEMB-6: every flipped bit of a saved snapshot is refused with a reason; one in the image
    /// or the checksum is a checksum mismatch, which says the file is damaged.
    #[test]
    fn memb6_every_flipped_bit_is_refused() {
        let image = b"\x01image bytes";
        let (bytes, _) = backup(image, Some("three-udp")).encode();
        let image_start = bytes.len() - 32 - image.len();
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[at] ^= 1 << bit;
                let error = SnapshotBackup::decode(&damaged).unwrap_err();
                assert!(!error.to_string().is_empty());
                if at >= image_start {
                    assert!(
                        matches!(error, BackupError::ChecksumMismatch { .. }),
                        "bit {bit} of byte {at}: {error}"
                    );
                    assert!(error.to_string().contains("damaged"), "{error}");
                }
            }
        }
    }

    /// A file that is not a saved snapshot is named for what it is; trailing bytes and another
    /// version are refused with their reason.
    #[test]
    fn foreign_files_and_versions_are_named() {
        let error = SnapshotBackup::decode(b"CSN1\0\0\0\0\0\0\0\0").unwrap_err();
        assert!(error.to_string().contains("own snapshot file"), "{error}");
        let error = SnapshotBackup::decode(b"CWL1\0\0\0\0").unwrap_err();
        assert!(error.to_string().contains("WAL"), "{error}");
        let error = SnapshotBackup::decode(b"{\"error\": \"not_leader\"}").unwrap_err();
        assert!(matches!(error, BackupError::NotASnapshot { .. }), "{error}");

        let (mut bytes, _) = backup(b"image", None).encode();
        bytes.push(0);
        assert!(matches!(
            SnapshotBackup::decode(&bytes),
            Err(BackupError::TrailingBytes { extra: 1, .. })
        ));
        let (mut bytes, _) = backup(b"image", None).encode();
        bytes[8] = 2;
        assert_eq!(
            SnapshotBackup::decode(&bytes),
            Err(BackupError::UnsupportedVersion { found: 2 })
        );
        // A length field claiming far more than the file holds allocates nothing.
        let (mut bytes, _) = backup(b"image", None).encode();
        let image_len_at = FIXED_HEADER_LEN;
        bytes[image_len_at..image_len_at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            SnapshotBackup::decode(&bytes),
            Err(BackupError::Truncated { .. })
        ));
    }

    /// WAL-3: the file is written whole under its name, replacing an older one, and no temp
    /// file is left.
    #[test]
    fn writes_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.snapshot");
        write_atomically(&path, b"old").unwrap();
        write_atomically(&path, b"new bytes").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new bytes");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["cluster.snapshot"]);
    }
}
