//! The log of `conclave run`: a filter that a reload can change and a destination that a
//! reload can reopen (issue 8, item 8).
//!
//! Lines go to standard error or, with `log.file`, are appended to that file. Standard error,
//! not standard output: a log is diagnostics, and journald collects standard error under
//! systemd all the same, while a shell redirection of standard output (`conclave run >
//! file`) or a pipe then carries no log lines mixed into what the command prints. SIGHUP
//! reopens the file, so logrotate can rename it first and the node then writes to a fresh
//! one; a path that cannot be opened is reported and the old destination kept. The filter
//! starts from `--log` / `RUST_LOG` when given, else from `log.level`; a reload that finds a
//! changed `log.level` in the file installs it.
//!
//! Colours (ANSI escapes) only when the lines go to a terminal and `NO_COLOR` is unset or
//! empty: never into a pipe, the journal or `log.file`, where the escapes would be read as
//! text. The choice is made again whenever the destination changes.

use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tracing_subscriber::fmt::format::{DefaultFields, Format};
use tracing_subscriber::layer::{Layered, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// Where log lines go.
#[derive(Debug)]
enum Destination {
    Stderr,
    File { path: PathBuf, file: File },
}

/// The subscriber the formatting layer sits on: the registry behind the reloadable filter.
type Filtered = Layered<reload::Layer<EnvFilter, Registry>, Registry>;
/// The formatting layer, reloadable so that a change of destination can switch colours.
type Formatter = tracing_subscriber::fmt::Layer<Filtered, DefaultFields, Format, SharedDestination>;

/// Whether lines written to `file` (standard error when `None`) get colours: only on a
/// terminal, and not when `NO_COLOR` is set to anything but the empty string.
fn colour(file: Option<&Path>) -> bool {
    file.is_none()
        && io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// The writer the formatter uses: whatever the destination is at the time of the line.
#[derive(Debug, Clone)]
struct SharedDestination(Arc<Mutex<Destination>>);

impl Write for SharedDestination {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut *self.0.lock().unwrap_or_else(PoisonError::into_inner) {
            Destination::Stderr => io::stderr().write(buf),
            Destination::File { file, .. } => file.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut *self.0.lock().unwrap_or_else(PoisonError::into_inner) {
            Destination::Stderr => io::stderr().flush(),
            Destination::File { file, .. } => file.flush(),
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for SharedDestination {
    type Writer = SharedDestination;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// The installed log: change its filter, reopen or move its file.
pub(crate) struct Log {
    filter: reload::Handle<EnvFilter, Registry>,
    format: reload::Handle<Formatter, Filtered>,
    destination: SharedDestination,
}

/// Where the HTTP server library reports a request it could not parse — a client's fault,
/// which it logs at ERROR.
const HTTP_PARSE_ERRORS: &str = "actix_http::h1::dispatcher";

/// A log filter, or why it is not one.
///
/// A malformed request from an HTTP client (a port scanner, a client speaking something else)
/// is answered 400 and is no error of the node's; the HTTP library logs it at ERROR, so its
/// target is left out unless `text` names it (`actix_http::h1::dispatcher=error` shows it).
pub(crate) fn parse_filter(text: &str) -> Result<EnvFilter, String> {
    let filter =
        EnvFilter::try_new(text).map_err(|err| format!("{text:?} is not a log filter: {err}"))?;
    if text.contains("actix_http") {
        return Ok(filter);
    }
    match format!("{HTTP_PARSE_ERRORS}=off").parse() {
        Ok(directive) => Ok(filter.add_directive(directive)),
        Err(_) => Ok(filter),
    }
}

impl Log {
    /// Installs the global subscriber: `filter`, written to `file` (standard error when
    /// `None`). Colour only on a terminal, and never with `NO_COLOR` set.
    pub(crate) fn install(filter: EnvFilter, file: Option<&Path>) -> io::Result<Log> {
        let destination = match file {
            Some(path) => Destination::File {
                path: path.to_path_buf(),
                file: open_append(path)?,
            },
            None => Destination::Stderr,
        };
        let destination = SharedDestination(Arc::new(Mutex::new(destination)));
        let (filter, filter_handle) = reload::Layer::new(filter);
        let (format, format_handle) = reload::Layer::new(
            tracing_subscriber::fmt::layer()
                .with_ansi(colour(file))
                .with_writer(destination.clone()),
        );
        tracing_subscriber::registry()
            .with(filter)
            .with(format)
            .try_init()
            .map_err(io::Error::other)?;
        Ok(Log {
            filter: filter_handle,
            format: format_handle,
            destination,
        })
    }

    /// Installs `filter` from now on.
    pub(crate) fn set_filter(&self, filter: EnvFilter) -> Result<(), String> {
        self.filter.reload(filter).map_err(|err| err.to_string())
    }

    /// Reopens the log at `file` (standard error when `None`), the same path or a new one,
    /// with colours as [`colour`] says for it. On failure the old destination stays and the
    /// error names the file.
    pub(crate) fn reopen(&self, file: Option<&Path>) -> Result<(), String> {
        let next = match file {
            Some(path) => Destination::File {
                path: path.to_path_buf(),
                file: open_append(path)
                    .map_err(|err| format!("cannot open log.file {}: {err}", path.display()))?,
            },
            None => Destination::Stderr,
        };
        // Colours off before a line can reach a file; on (for a terminal) only once the
        // lines go there. A failure leaves the formatter as it was, which is only cosmetic.
        let ansi = colour(file);
        if !ansi {
            let _ = self.format.modify(|format| format.set_ansi(false));
        }
        let mut current = self
            .destination
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Destination::File { file, .. } = &mut *current {
            let _ = file.flush();
        }
        *current = next;
        drop(current);
        if ansi {
            let _ = self.format.modify(|format| format.set_ansi(true));
        }
        Ok(())
    }

    /// The file the log goes to, if not standard error.
    pub(crate) fn file(&self) -> Option<PathBuf> {
        match &*self
            .destination
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Destination::Stderr => None,
            Destination::File { path, .. } => Some(path.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an event at `level` of `target` writes through `filter`.
    fn logged(filter: EnvFilter, target_is_http: bool) -> String {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let subscriber = tracing_subscriber::registry().with(filter).with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || SinkWriter(Arc::clone(&sink))),
        );
        tracing::subscriber::with_default(subscriber, || {
            if target_is_http {
                tracing::error!(
                    target: "actix_http::h1::dispatcher",
                    "stream error: request parse error: invalid Header provided"
                );
            } else {
                tracing::error!(target: "conclave_actors::wal", "fsync failed");
            }
        });
        let bytes = lines.lock().unwrap_or_else(PoisonError::into_inner).clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    struct SinkWriter(Arc<Mutex<Vec<u8>>>);

    impl Write for SinkWriter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Issue 15: a malformed request from an HTTP client is not logged at ERROR by the node's
    /// filter (it is the client's fault, answered 400); the node's own errors still are, and an
    /// operator who names the HTTP library's target gets its lines back.
    #[test]
    fn a_clients_malformed_http_is_not_an_error_of_the_node() {
        let filter = |text: &str| parse_filter(text).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(logged(filter("info"), true), "");
        assert_eq!(logged(filter("debug"), true), "");
        assert!(logged(filter("info"), false).contains("fsync failed"));
        assert!(
            logged(filter("info,actix_http=error"), true).contains("request parse error"),
            "named, it is shown"
        );
    }
}
