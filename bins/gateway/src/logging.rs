//! The log of `conclave run`: a filter that a reload can change and a destination that a
//! reload can reopen (issue 8, item 8).
//!
//! Lines go to standard output (journald collects it under systemd) or, with `log.file`, are
//! appended to that file. SIGHUP reopens the file, so logrotate can rename it first and the
//! node then writes to a fresh one; a path that cannot be opened is reported and the old
//! destination kept. The filter starts from `--log` / `RUST_LOG` when given, else from
//! `log.level`; a reload that finds a changed `log.level` in the file installs it.

use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// Where log lines go.
#[derive(Debug)]
enum Destination {
    Stdout,
    File { path: PathBuf, file: File },
}

/// The writer the formatter uses: whatever the destination is at the time of the line.
#[derive(Debug, Clone)]
struct SharedDestination(Arc<Mutex<Destination>>);

impl Write for SharedDestination {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut *self.0.lock().unwrap_or_else(PoisonError::into_inner) {
            Destination::Stdout => io::stdout().write(buf),
            Destination::File { file, .. } => file.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut *self.0.lock().unwrap_or_else(PoisonError::into_inner) {
            Destination::Stdout => io::stdout().flush(),
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
    destination: SharedDestination,
}

/// A log filter, or why it is not one.
pub(crate) fn parse_filter(text: &str) -> Result<EnvFilter, String> {
    EnvFilter::try_new(text).map_err(|err| format!("{text:?} is not a log filter: {err}"))
}

impl Log {
    /// Installs the global subscriber: `filter`, written to `file` (standard output when
    /// `None`). Colour only on a terminal, and never with `NO_COLOR` set.
    pub(crate) fn install(filter: EnvFilter, file: Option<&Path>) -> io::Result<Log> {
        let destination = match file {
            Some(path) => Destination::File {
                path: path.to_path_buf(),
                file: open_append(path)?,
            },
            None => Destination::Stdout,
        };
        let ansi = file.is_none()
            && io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
        let destination = SharedDestination(Arc::new(Mutex::new(destination)));
        let (filter, handle) = reload::Layer::new(filter);
        tracing_subscriber::registry()
            .with(filter)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_writer(destination.clone()),
            )
            .try_init()
            .map_err(io::Error::other)?;
        Ok(Log {
            filter: handle,
            destination,
        })
    }

    /// Installs `filter` from now on.
    pub(crate) fn set_filter(&self, filter: EnvFilter) -> Result<(), String> {
        self.filter.reload(filter).map_err(|err| err.to_string())
    }

    /// Reopens the log at `file` (standard output when `None`), the same path or a new one.
    /// On failure the old destination stays and the error names the file.
    pub(crate) fn reopen(&self, file: Option<&Path>) -> Result<(), String> {
        let next = match file {
            Some(path) => Destination::File {
                path: path.to_path_buf(),
                file: open_append(path)
                    .map_err(|err| format!("cannot open log.file {}: {err}", path.display()))?,
            },
            None => Destination::Stdout,
        };
        let mut current = self
            .destination
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Destination::File { file, .. } = &mut *current {
            let _ = file.flush();
        }
        *current = next;
        Ok(())
    }

    /// The file the log goes to, if not standard output.
    pub(crate) fn file(&self) -> Option<PathBuf> {
        match &*self
            .destination
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Destination::Stdout => None,
            Destination::File { path, .. } => Some(path.clone()),
        }
    }
}
