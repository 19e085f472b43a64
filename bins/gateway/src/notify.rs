//! systemd's notification protocol (`sd_notify(3)`), spoken without libsystemd: each state is
//! one datagram of `KEY=VALUE` lines sent to the `AF_UNIX` socket named by `$NOTIFY_SOCKET`
//! (a path, or an abstract name written with a leading `@`).
//!
//! `conclave run` under `Type=notify` (`packaging/systemd/conclave.service`) sends
//!
//! - `READY=1` once the node is started (WAL recovered, sockets bound, actors running);
//! - `RELOADING=1` with `MONOTONIC_USEC=` when a SIGHUP reload starts, `READY=1` when it ends;
//! - `STOPPING=1` when a graceful stop begins (before a leader hands over);
//! - `WATCHDOG=1` every half `$WATCHDOG_USEC` (`WatchdogSec=`), but only while the node is
//!   healthy: its election answers a status query within that half period. A node whose
//!   election halted or whose event loop is stuck stops pinging, and systemd restarts it.
//!
//! Without `$NOTIFY_SOCKET` none of this happens. A `$WATCHDOG_PID` naming another process
//! means the watchdog is not ours. The variables stay out of hook environments (see
//! `conclave_actors::callbacks`).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Where systemd listens for this service's notifications.
#[derive(Debug)]
pub(crate) struct Notifier {
    socket: UnixDatagram,
    target: SocketAddr,
    shown: String,
}

impl Notifier {
    /// The notifier `$NOTIFY_SOCKET` asks for: `Ok(None)` when it is not set, an error naming
    /// the variable's value when it cannot be used.
    pub(crate) fn from_env() -> io::Result<Option<Notifier>> {
        std::env::var_os("NOTIFY_SOCKET")
            .filter(|value| !value.is_empty())
            .map(|value| Notifier::new(&value))
            .transpose()
    }

    /// A notifier sending to `address`: a filesystem path (`/run/systemd/notify`) or an
    /// abstract socket name with a leading `@`.
    pub(crate) fn new(address: &OsStr) -> io::Result<Notifier> {
        let shown = address.to_string_lossy().into_owned();
        let bytes = address.as_bytes();
        let target = match bytes.first() {
            Some(b'@') => abstract_address(&bytes[1..])?,
            Some(b'/') => SocketAddr::from_pathname(address)?,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("NOTIFY_SOCKET={shown:?}: neither a path nor an abstract name (@name)"),
                ));
            }
        };
        Ok(Notifier {
            socket: UnixDatagram::unbound()?,
            target,
            shown,
        })
    }

    /// Sends `state` (one or more `KEY=VALUE` lines) in one datagram.
    pub(crate) fn notify(&self, state: &str) -> io::Result<()> {
        self.socket
            .send_to_addr(state.as_bytes(), &self.target)
            .map(drop)
            .map_err(|err| {
                io::Error::new(err.kind(), format!("NOTIFY_SOCKET={}: {err}", self.shown))
            })
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn abstract_address(name: &[u8]) -> io::Result<SocketAddr> {
    #[cfg(target_os = "android")]
    use std::os::android::net::SocketAddrExt;
    #[cfg(target_os = "linux")]
    use std::os::linux::net::SocketAddrExt;
    SocketAddr::from_abstract_name(name)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn abstract_address(_name: &[u8]) -> io::Result<SocketAddr> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract socket names exist on Linux only",
    ))
}

/// How often to ping the watchdog: half of `$WATCHDOG_USEC`, when the watchdog is this
/// process's (`$WATCHDOG_PID` unset or equal to its pid). `Err` names a bad value.
pub(crate) fn watchdog_interval(
    usec: Option<OsString>,
    pid: Option<OsString>,
    own_pid: u32,
) -> Result<Option<Duration>, String> {
    let Some(usec) = usec.filter(|value| !value.is_empty()) else {
        return Ok(None);
    };
    if let Some(pid) = pid.filter(|value| !value.is_empty()) {
        let pid = pid.to_string_lossy();
        match pid.trim().parse::<u32>() {
            Ok(pid) if pid == own_pid => {}
            Ok(_) => return Ok(None),
            Err(_) => return Err(format!("WATCHDOG_PID={pid:?} is not a process id")),
        }
    }
    let text = usec.to_string_lossy();
    match text.trim().parse::<u64>() {
        Ok(0) | Err(_) => Err(format!("WATCHDOG_USEC={text:?} is not a positive number")),
        Ok(usec) => Ok(Some(Duration::from_micros(usec) / 2)),
    }
}

/// `MONOTONIC_USEC=` for `RELOADING=1`: `CLOCK_MONOTONIC` now, in microseconds.
pub(crate) fn monotonic_usec() -> u128 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u128::try_from(now.tv_sec).unwrap_or(0) * 1_000_000
        + u128::try_from(now.tv_nsec).unwrap_or(0) / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(socket: &UnixDatagram) -> String {
        let mut buf = [0u8; 256];
        let n = socket.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// A state reaches a socket bound at a path.
    #[test]
    fn notifies_a_socket_at_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::new(path.as_os_str()).unwrap();
        notifier.notify("READY=1").unwrap();
        notifier.notify("STOPPING=1\nSTATUS=bye").unwrap();
        assert_eq!(received(&listener), "READY=1");
        assert_eq!(received(&listener), "STOPPING=1\nSTATUS=bye");
    }

    /// `@name` is an abstract socket: no file, the name in the kernel's namespace.
    #[cfg(target_os = "linux")]
    #[test]
    fn notifies_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("conclave-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&address).unwrap();
        let notifier = Notifier::new(OsStr::new(&format!("@{name}"))).unwrap();
        notifier.notify("WATCHDOG=1").unwrap();
        assert_eq!(received(&listener), "WATCHDOG=1");
    }

    /// A value that is neither, or a socket nobody listens on, is an error naming it.
    #[test]
    fn bad_addresses_are_errors_naming_the_variable() {
        let err = Notifier::new(OsStr::new("vsock:2:1234")).unwrap_err();
        assert!(
            err.to_string().contains("NOTIFY_SOCKET=\"vsock:2:1234\""),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let nobody = dir.path().join("nobody");
        let notifier = Notifier::new(nobody.as_os_str()).unwrap();
        let err = notifier.notify("READY=1").unwrap_err();
        assert!(err.to_string().contains("NOTIFY_SOCKET="), "{err}");
    }

    /// Half of `WATCHDOG_USEC`, only for this process.
    #[test]
    fn watchdog_interval_is_half_the_timeout_for_this_process_only() {
        let os = |text: &str| Some(OsString::from(text));
        assert_eq!(watchdog_interval(None, None, 7), Ok(None));
        assert_eq!(
            watchdog_interval(os("10000000"), None, 7),
            Ok(Some(Duration::from_secs(5)))
        );
        assert_eq!(
            watchdog_interval(os("10000000"), os("7"), 7),
            Ok(Some(Duration::from_secs(5)))
        );
        assert_eq!(watchdog_interval(os("10000000"), os("8"), 7), Ok(None));
        assert!(watchdog_interval(os("soon"), None, 7).is_err());
        assert!(watchdog_interval(os("0"), None, 7).is_err());
        assert!(watchdog_interval(os("1000"), os("x"), 7).is_err());
    }
}
