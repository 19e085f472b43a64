//! What `conclave check-config` checks of `node.data_dir` beyond the file's values, so that it
//! does not say `ok` where `conclave run` then refuses to start (WAL-1, WAL-2, issue 15 item 4):
//! the directory (or the ancestor it would be created in), and its lock file and WAL when they
//! exist, must be writable by this user, and the WAL and the replicated log must be ones a
//! node can start from, the WAL of the configured `election.mode`.
//!
//! Nothing is created or changed: the WAL is read as `conclave wal inspect` reads it (without
//! the lock, so a running node's directory can be checked), and writability is asked of the
//! kernel (`access(2)`), which answers for this user as `run` would meet it.
//!
//! A directory this user may not create or write is reported with the user's name and the
//! command, run as root, that fixes it ([`permission_fix`]): `check-config` says so, and so do
//! `conclave init` and `conclave run` when they exit 77 for it. Nothing creates the data
//! directory of a packaged install before the service's first start but the tmpfiles.d entry
//! the package ships (`packaging/systemd/conclave.tmpfiles`), so an operator who runs `conclave
//! init` as the service user first must create it.

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
    let account = Account::current();
    if let Err(err) = access(dir, Access::WRITE_OK | Access::EXEC_OK) {
        problems.push(format!(
            "{} is not writable by this user ({err}): the node writes its lock file and WAL \
             there; {}",
            dir.display(),
            chown_fix(dir, &account)
        ));
    }
    // A lock file or WAL left by another user (a first start as root) is as much in the way
    // as the directory itself.
    let lock = dir.join(LOCK_FILE_NAME);
    if lock.exists() {
        if let Err(err) = access(&lock, Access::READ_OK | Access::WRITE_OK) {
            problems.push(format!(
                "{} is not readable and writable by this user ({err}); {}",
                lock.display(),
                chown_fix(dir, &account)
            ));
        }
    }
    let wal = dir.join(WAL_FILE_NAME);
    if !wal.exists() {
        return problems;
    }
    if let Err(err) = access(&wal, Access::READ_OK | Access::WRITE_OK) {
        problems.push(format!(
            "{} is not readable and writable by this user ({err}); {}",
            wal.display(),
            chown_fix(dir, &account)
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
                 ({err}); {}",
                dir.display(),
                ancestor.display(),
                create_fix(dir, &Account::current())
            )
        })
}

/// The data directory of a packaged install (`packaging/conclave.toml`), which the package's
/// tmpfiles.d entry creates for the user `conclave`.
const PACKAGED_DATA_DIR: &str = "/var/lib/conclave";
/// The user the packaged service runs as (`User=` of `packaging/systemd/conclave.service`).
const PACKAGED_USER: &str = "conclave";

/// What to do when this user may not write the data directory `dir`, for `conclave init`
/// and `conclave run` when they exit 77: which directory, which user, and the command that
/// fixes it, run as root. `None` when nothing of `dir` is in this user's way, so the denial
/// came from elsewhere and the error alone says it.
pub(crate) fn permission_fix(dir: &Path) -> Option<String> {
    let account = Account::current();
    if !dir.exists() {
        let ancestor = nearest_existing(dir)?;
        if access(&ancestor, Access::WRITE_OK | Access::EXEC_OK).is_ok() {
            return None;
        }
        return Some(format!(
            "node.data_dir {} does not exist, and user {} may not create it in {}; {}",
            dir.display(),
            account.user,
            ancestor.display(),
            create_fix(dir, &account)
        ));
    }
    let in_the_way = [
        dir.to_path_buf(),
        dir.join(LOCK_FILE_NAME),
        dir.join(WAL_FILE_NAME),
    ]
    .into_iter()
    .filter(|path| path.exists())
    .find(|path| {
        let needs = if path.is_dir() {
            Access::WRITE_OK | Access::EXEC_OK
        } else {
            Access::READ_OK | Access::WRITE_OK
        };
        access(path, needs).is_err()
    })?;
    Some(format!(
        "{} is not writable by user {}{}; {}",
        in_the_way.display(),
        account.user,
        owner_and_mode(&in_the_way),
        chown_fix(dir, &account)
    ))
}

/// How to create `dir` for `account`, as root: the packaged tmpfiles.d entry where it
/// applies (the packaged directory and user), else `install -d`. Mode 0700, as the unit's
/// `StateDirectoryMode=` makes it: the WAL is the node's alone.
fn create_fix(dir: &Path, account: &Account) -> String {
    let install = format!(
        "`install -d -o {user} -g {group} -m 0700 {dir}`",
        user = shell_word(&account.user),
        group = shell_word(&account.group),
        dir = shell_word(&dir.display().to_string())
    );
    if dir == Path::new(PACKAGED_DATA_DIR) && account.user == PACKAGED_USER {
        format!(
            "create it once, as root, with `systemd-tmpfiles --create conclave.conf` (the \
             package's tmpfiles.d entry, packaging/systemd/conclave.tmpfiles) or {install}"
        )
    } else {
        format!("create it once, as root, with {install}")
    }
}

/// How to give `dir`, and what an earlier start as another user left in it, to `account`.
fn chown_fix(dir: &Path, account: &Account) -> String {
    format!(
        "give it to user {user}, as root, with `chown -R {user}:{group} {dir}`",
        user = shell_word(&account.user),
        group = shell_word(&account.group),
        dir = shell_word(&dir.display().to_string())
    )
}

/// ` (owned by USER:GROUP, mode NNNN)` of `path`, or nothing when it cannot be read.
fn owner_and_mode(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    path.metadata().map_or_else(
        |_| String::new(),
        |meta| {
            format!(
                " (owned by {}:{}, mode {:04o})",
                name_of("/etc/passwd", meta.uid()).unwrap_or_else(|| meta.uid().to_string()),
                name_of("/etc/group", meta.gid()).unwrap_or_else(|| meta.gid().to_string()),
                meta.mode() & 0o7777
            )
        },
    )
}

/// `word` as one shell word: as it is when it holds nothing a shell would split or expand,
/// else single-quoted, so a fix can be pasted as printed.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@,=%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The user and group this process runs as, by name where the system's account files name
/// them (by number otherwise): what an operator types after `chown` and `install -o`.
struct Account {
    user: String,
    group: String,
}

impl Account {
    fn current() -> Account {
        // Effective ids: they own what the node creates.
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        Account {
            user: name_of("/etc/passwd", uid).unwrap_or_else(|| uid.to_string()),
            group: name_of("/etc/group", gid).unwrap_or_else(|| gid.to_string()),
        }
    }
}

/// The name of `id` in `database`, a file of `name:password:id:...` lines (`/etc/passwd`,
/// `/etc/group`). Users known only to a directory service (LDAP, NSS modules) are not found,
/// and are then named by number, which `chown` and `install` take as well.
fn name_of(database: &str, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(database).ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let number = fields.nth(1)?.parse::<u32>().ok()?;
        (number == id && !name.is_empty()).then(|| name.to_owned())
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
