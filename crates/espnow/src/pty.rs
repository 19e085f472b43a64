//! A virtual dongle behind a pseudo-terminal (ESP-7, ESP-5).
//!
//! [`PtyMaster`] is the emulator's end of a pseudo-terminal it creates itself: the gateway
//! opens the slave path with tokio-serial exactly as it opens a real `/dev/ttyACM0`, and the
//! emulator keeps the master and never opens the slave (tokio-serial takes the slave
//! exclusively with `TIOCEXCL` anyway). The master is raw and non-blocking, driven by
//! `tokio::io::unix::AsyncFd`, without a thread.
//!
//! A real dongle keeps its path when it is replugged (`/dev/ttyACM0` again, or a stable
//! `/dev/serial/by-id/...` link), while every new pseudo-terminal gets a new `/dev/pts/N`;
//! [`VirtualSerialPort`] therefore keeps a symbolic link at a path the caller chooses. Unplug
//! closes the master and removes the link; replug creates a new pseudo-terminal, points the
//! link at it and attaches a freshly booted dongle with the same MAC at the same place of the
//! air.
//!
//! What the host sees on Linux once the master is closed (checked by
//! `tests/virtual_pty.rs`): a read on its slave returns end of file (0 bytes, so a
//! tokio-serial stream ends), and a write fails with `EIO`.
//!
//! The host may also close and reopen the slave while the dongle stays plugged (a driver that
//! restarts). While no one has the slave open, a read on the master fails with `EIO` and
//! poll keeps reporting a hang-up; the master then stops watching the descriptor, checks again
//! every [`HOST_POLL`], and discards what the dongle writes, as a USB-serial bridge drops
//! bytes no host is reading. Before the slave was ever opened the kernel keeps what is
//! written, so a host that opens the port late still reads the dongle's `BOOT`.

use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{OptionalActions, tcgetattr, tcsetattr};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Sleep, sleep};
use tracing::debug;

use crate::air::{Air, VirtualError};
use crate::virtual_dongle::{VirtualDongle, VirtualDongleConfig, VirtualDongleHandle};

/// How often a master whose host has closed the slave looks whether it came back.
pub const HOST_POLL: Duration = Duration::from_millis(20);

/// The emulator's end of a pseudo-terminal: `AsyncRead + AsyncWrite`. See the
/// [module docs](self).
#[derive(Debug)]
pub struct PtyMaster {
    state: MasterState,
    slave: PathBuf,
    /// Whether the host had the slave open when last looked at; logs only the changes.
    host_present: bool,
}

#[derive(Debug)]
enum MasterState {
    /// Watched by the reactor.
    Watched(AsyncFd<OwnedFd>),
    /// The host closed the slave: tokio never clears a hang-up once seen, so the descriptor
    /// is taken out of the reactor and looked at again when `retry` fires.
    HostAway { fd: OwnedFd, retry: Pin<Box<Sleep>> },
    /// Between states, or after a failure to watch the descriptor again.
    Closed,
}

impl PtyMaster {
    /// Creates a pseudo-terminal in raw mode and returns its master; the slave's path is
    /// [`slave_path`](Self::slave_path). Must be called inside a tokio runtime with I/O.
    pub fn open() -> io::Result<PtyMaster> {
        let fd = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        grantpt(&fd)?;
        unlockpt(&fd)?;
        let name = ptsname(&fd, Vec::new())?;
        let slave = PathBuf::from(std::ffi::OsStr::from_bytes(name.as_bytes()));
        // Raw before anything is written: a new pseudo-terminal echoes and translates line
        // ends, which would send the dongle's frames back to it and mangle them. On Linux the
        // termios of the master is the slave's, so the host starts from raw too.
        let mut termios = tcgetattr(&fd)?;
        termios.make_raw();
        tcsetattr(&fd, OptionalActions::Now, &termios)?;
        let flags = fcntl_getfl(&fd)?;
        fcntl_setfl(&fd, flags | OFlags::NONBLOCK)?;
        Ok(PtyMaster {
            state: MasterState::Watched(watch(fd)?),
            slave,
            host_present: true,
        })
    }

    /// The slave's path (`/dev/pts/N`), for the host to open.
    pub fn slave_path(&self) -> &Path {
        &self.slave
    }

    /// Whether the host had the slave closed when last looked at.
    pub fn host_away(&self) -> bool {
        !self.host_present
    }

    fn host_left(&mut self) {
        if let MasterState::Watched(fd) = std::mem::replace(&mut self.state, MasterState::Closed) {
            if std::mem::take(&mut self.host_present) {
                debug!(slave = %self.slave.display(), "pty: host closed the slave");
            }
            self.state = MasterState::HostAway {
                fd: fd.into_inner(),
                retry: Box::pin(sleep(HOST_POLL)),
            };
        }
    }

    fn watch_again(&mut self) -> io::Result<()> {
        if let MasterState::HostAway { fd, .. } =
            std::mem::replace(&mut self.state, MasterState::Closed)
        {
            self.state = MasterState::Watched(watch(fd)?);
        }
        Ok(())
    }
}

/// Registers the master with the reactor.
///
/// tokio 1.54 deprecates the safe `AsyncFd::new` because a generic `T` could hand it a
/// descriptor that changes or closes while registered, and asks for the `unsafe`
/// `AsyncFd::register` instead, which this workspace forbids. An `OwnedFd` is the case that
/// cannot go wrong: it owns its descriptor, always returns the same one and closes it only
/// when dropped, after the registration.
#[allow(deprecated)]
fn watch(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    AsyncFd::new(fd)
}

fn is_hangup(err: &io::Error) -> bool {
    err.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error())
}

impl AsyncRead for PtyMaster {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                MasterState::Watched(fd) => {
                    let mut guard = ready!(fd.poll_read_ready(cx))?;
                    let unfilled = buf.initialize_unfilled();
                    match guard.try_io(|fd| {
                        rustix::io::read(fd.get_ref(), &mut *unfilled).map_err(io::Error::from)
                    }) {
                        Ok(Ok(n)) => {
                            if !std::mem::replace(&mut this.host_present, true) {
                                debug!(slave = %this.slave.display(), "pty: host is back");
                            }
                            buf.advance(n);
                            return Poll::Ready(Ok(()));
                        }
                        Ok(Err(err)) if is_hangup(&err) => {
                            drop(guard);
                            this.host_left();
                        }
                        Ok(Err(err)) => return Poll::Ready(Err(err)),
                        Err(_would_block) => {}
                    }
                }
                MasterState::HostAway { retry, .. } => {
                    ready!(retry.as_mut().poll(cx));
                    this.watch_again()?;
                }
                MasterState::Closed => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl AsyncWrite for PtyMaster {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                MasterState::Watched(fd) => {
                    let mut guard = ready!(fd.poll_write_ready(cx))?;
                    match guard
                        .try_io(|fd| rustix::io::write(fd.get_ref(), buf).map_err(Into::into))
                    {
                        Ok(result) => return Poll::Ready(result),
                        Err(_would_block) => {}
                    }
                }
                // No one listens: the bytes are gone, as on a USB-serial bridge.
                MasterState::HostAway { .. } => return Poll::Ready(Ok(buf.len())),
                MasterState::Closed => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Written bytes are in the kernel's buffer already.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A virtual dongle on a pseudo-terminal, reachable at a stable path that survives unplug and
/// replug. See the [module docs](self).
#[derive(Debug)]
pub struct VirtualSerialPort {
    link: PathBuf,
    air: Air,
    config: VirtualDongleConfig,
    plugged: Option<Plugged>,
}

#[derive(Debug)]
struct Plugged {
    slave: PathBuf,
    dongle: VirtualDongleHandle,
}

impl VirtualSerialPort {
    /// Plugs a virtual dongle in: creates a pseudo-terminal, makes `link` point at its slave
    /// (replacing a stale link, never a file) and starts the dongle on it. Must be called
    /// inside a tokio runtime with I/O and time.
    pub fn create(
        link: impl Into<PathBuf>,
        air: &Air,
        config: VirtualDongleConfig,
    ) -> Result<VirtualSerialPort, VirtualError> {
        let mut port = VirtualSerialPort {
            link: link.into(),
            air: air.clone(),
            config,
            plugged: None,
        };
        port.replug()?;
        Ok(port)
    }

    /// The stable path the host opens.
    pub fn path(&self) -> &Path {
        &self.link
    }

    /// The pseudo-terminal's slave path while plugged.
    pub fn slave_path(&self) -> Option<&Path> {
        self.plugged.as_ref().map(|plugged| plugged.slave.as_path())
    }

    /// The dongle while plugged.
    pub fn dongle(&self) -> Option<&VirtualDongleHandle> {
        self.plugged.as_ref().map(|plugged| &plugged.dongle)
    }

    /// Whether a dongle is plugged in.
    pub fn is_plugged(&self) -> bool {
        self.plugged.is_some()
    }

    /// Unplugs the dongle: removes the link, stops the dongle (it leaves the air) and closes
    /// the master, so the host reads end of file and its writes fail with `EIO`. Does nothing
    /// when unplugged already.
    pub async fn unplug(&mut self) -> Result<(), VirtualError> {
        let Some(plugged) = self.plugged.take() else {
            return Ok(());
        };
        let removed = remove_link(&self.link);
        plugged.dongle.unplug().await;
        removed
    }

    /// Plugs a new dongle in with the same settings and MAC: a new pseudo-terminal, the link
    /// pointed at it, a dongle that announces `BOOT{PowerOn}`. Unplug first if plugged.
    pub fn replug(&mut self) -> Result<(), VirtualError> {
        if self.plugged.is_some() {
            return Err(VirtualError::Plugged(self.link.clone()));
        }
        let io_error = |path: &Path, source| VirtualError::Io {
            path: path.to_path_buf(),
            source,
        };
        let master =
            PtyMaster::open().map_err(|source| io_error(Path::new("/dev/ptmx"), source))?;
        let slave = master.slave_path().to_path_buf();
        let dongle = VirtualDongle::new(&self.air, self.config.clone())?;
        point_link(&self.link, &slave).map_err(|source| io_error(&self.link, source))?;
        debug!(link = %self.link.display(), slave = %slave.display(), mac = %self.config.mac, "pty: plugged");
        let dongle = dongle.spawn(master);
        self.plugged = Some(Plugged { slave, dongle });
        Ok(())
    }
}

impl Drop for VirtualSerialPort {
    fn drop(&mut self) {
        if let Some(plugged) = self.plugged.take() {
            // Best effort: the dongle stops when its last handle is gone.
            let _ = remove_link(&self.link);
            drop(plugged);
        }
    }
}

/// Points `link` at `target` atomically: a reconnecting host sees the old target or the new
/// one, never no link at all. Refuses to replace anything but a symbolic link.
fn point_link(link: &Path, target: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(link) {
        Ok(meta) if !meta.file_type().is_symlink() => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a symbolic link",
            ));
        }
        Ok(_) | Err(_) => {}
    }
    let mut temporary = link.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let _ = std::fs::remove_file(&temporary);
    std::os::unix::fs::symlink(target, &temporary)?;
    std::fs::rename(&temporary, link).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

fn remove_link(link: &Path) -> Result<(), VirtualError> {
    match std::fs::remove_file(link) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(VirtualError::Io {
            path: link.to_path_buf(),
            source,
        }),
    }
}
