//! What keeps the HTTP endpoints from exhausting the node's file descriptors (item 4 of
//! issue 8): the open-files limit raised at start, the connection and event-stream bounds
//! sized to leave descriptors in reserve, the small accept backlog, and the counting of every
//! connection and subscriber so that the one past a bound is refused, answered and counted.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustix::net::{AddressFamily, SocketFlags, SocketType};
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use crate::metrics::NodeMetrics;

/// Descriptors kept for everything but the HTTP endpoints: the WAL and its directory, the
/// UDP socket, the dongle's serial port, the pipes of running hooks (three per hook, one
/// hook of each kind at a time), the runtime's own (epoll, eventfd, timers), the standard
/// streams and log files, with room to spare.
pub const RESERVED_DESCRIPTORS: u64 = 128;

/// Connections past `admin.max_connections` that are still accepted, only to be answered
/// 503 and closed; one past these too is closed as soon as it is accepted, unanswered (the
/// metrics endpoint, served by the same worker, keeps its own places).
pub const OVERFLOW_CONNECTIONS: usize = 16;

/// Connections the metrics endpoint serves at once (a few scrapers).
pub const METRICS_MAX_CONNECTIONS: usize = 16;

/// Connections the kernel queues for each endpoint before refusing more, when both endpoints
/// are full and the server stops accepting. Small on purpose: a connection that waits long in
/// the queue belongs to a client that has likely given up.
pub const LISTEN_BACKLOG: i32 = 32;

/// The open-files limit before and after [`raise_open_files_limit`]; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The soft limit the process started with.
    pub before: Option<u64>,
    /// The soft limit now.
    pub soft: Option<u64>,
    /// The hard limit.
    pub hard: Option<u64>,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, as a server that holds many sockets
/// should (the soft limit is often 1024 where the hard one is far higher). With an unlimited
/// hard limit the soft one is raised to 2^20, which Linux accepts by default.
pub fn raise_open_files_limit() -> io::Result<OpenFilesLimit> {
    let limit = getrlimit(Resource::Nofile);
    let target = limit.maximum.or(Some(1 << 20));
    if limit.current.is_some() && limit.current < target {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: target,
                maximum: limit.maximum,
            },
        )?;
    }
    Ok(OpenFilesLimit {
        before: limit.current,
        soft: getrlimit(Resource::Nofile).current,
        hard: limit.maximum,
    })
}

/// The soft open-files limit now; `None` is unlimited.
pub fn open_files_soft_limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

/// The admin API's bounds after fitting them to the descriptors there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminBounds {
    /// Connections served at once.
    pub max_connections: usize,
    /// Event-stream subscribers at once.
    pub max_event_streams: usize,
}

/// Fits the configured bounds under `soft_limit`: the admin API (its connections and the
/// overflow), the metrics endpoint and [`RESERVED_DESCRIPTORS`] must fit. When they do not,
/// the connection bound shrinks (to 4 at the least) and the event streams with it, to at
/// most half the connections; the second value says so, for a warning.
pub fn fit_bounds(
    configured: AdminBounds,
    soft_limit: Option<u64>,
) -> (AdminBounds, Option<String>) {
    let Some(limit) = soft_limit else {
        return (configured, None);
    };
    let fixed = RESERVED_DESCRIPTORS + (OVERFLOW_CONNECTIONS + METRICS_MAX_CONNECTIONS) as u64;
    let room = usize::try_from(limit.saturating_sub(fixed)).unwrap_or(usize::MAX);
    if configured.max_connections <= room {
        return (configured, None);
    }
    let max_connections = room.max(4);
    let max_event_streams = configured.max_event_streams.min(max_connections / 2).max(1);
    let fitted = AdminBounds {
        max_connections,
        max_event_streams,
    };
    let warning = format!(
        "the open-files limit is {limit}: admin.max_connections lowered from {} to \
         {max_connections} and admin.max_event_streams from {} to {max_event_streams}, keeping \
         {RESERVED_DESCRIPTORS} descriptors for the WAL, sockets and hooks (raise the hard \
         limit, e.g. LimitNOFILE= in the systemd unit, to keep the configured bounds)",
        configured.max_connections, configured.max_event_streams
    );
    (fitted, Some(warning))
}

/// A listening TCP socket on `addr` with [`LISTEN_BACKLOG`], non-blocking, as the HTTP
/// server wants it.
pub fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let socket = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    // As every server does: a restarted node rebinds at once despite connections of its
    // previous life in TIME_WAIT; a live listener on the port still makes bind fail.
    rustix::net::sockopt::set_socket_reuseaddr(&socket, true)?;
    rustix::net::bind(&socket, &addr)?;
    rustix::net::listen(&socket, LISTEN_BACKLOG)?;
    let listener = TcpListener::from(socket);
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Which bound refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// `admin.max_connections`.
    Connections,
    /// `admin.max_event_streams`.
    EventStreams,
    /// A mutation whose client's deadline had passed.
    Deadline,
    /// A request without a token, or with one nobody has, where one is needed (401).
    Unauthorized,
    /// A token whose role or limits do not cover the request (403, SEC-2).
    Forbidden,
}

impl Refusal {
    /// The `reason` label of `conclave_admin_refused_total`.
    pub(super) fn label(self) -> &'static str {
        match self {
            Refusal::Connections => "connections",
            Refusal::EventStreams => "event_streams",
            Refusal::Deadline => "deadline",
            Refusal::Unauthorized => "unauthorized",
            Refusal::Forbidden => "forbidden",
        }
    }

    /// Every reason, for creating the series at zero.
    pub(super) const ALL: [Refusal; 5] = [
        Refusal::Connections,
        Refusal::EventStreams,
        Refusal::Deadline,
        Refusal::Unauthorized,
        Refusal::Forbidden,
    ];
}

/// A count of open things (connections, event streams) mirrored in a gauge.
#[derive(Debug, Clone)]
pub(super) struct OpenCount {
    open: Arc<AtomicUsize>,
    metrics: NodeMetrics,
    gauge: &'static str,
}

impl OpenCount {
    pub(super) fn new(metrics: NodeMetrics, gauge: &'static str) -> Self {
        metrics.set_admin_open(gauge, 0);
        Self {
            open: Arc::new(AtomicUsize::new(0)),
            metrics,
            gauge,
        }
    }

    /// Counts one more open thing; the slot says whether it is past `bound`, and uncounts it
    /// when dropped.
    pub(super) fn open(&self, bound: usize) -> Slot {
        let open = self.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.metrics.set_admin_open(self.gauge, open);
        Slot {
            over: open > bound,
            count: self.clone(),
        }
    }
}

/// One open connection or event stream; closing it (dropping this) frees its place.
#[derive(Debug)]
pub(super) struct Slot {
    over: bool,
    count: OpenCount,
}

impl Slot {
    /// Whether this one is past its bound and must be refused.
    pub(super) fn over(&self) -> bool {
        self.over
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let open = self
            .count
            .open
            .fetch_sub(1, Ordering::SeqCst)
            .saturating_sub(1);
        self.count.metrics.set_admin_open(self.count.gauge, open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(max_connections: usize, max_event_streams: usize) -> AdminBounds {
        AdminBounds {
            max_connections,
            max_event_streams,
        }
    }

    /// Item 4: with descriptors to spare the configured bounds stand; with too few, the
    /// connection bound shrinks to what the limit leaves after the reserve, and the streams
    /// to at most half of it.
    #[test]
    fn bounds_keep_descriptors_in_reserve() {
        assert_eq!(
            fit_bounds(bounds(64, 16), Some(1024)),
            (bounds(64, 16), None)
        );
        assert_eq!(fit_bounds(bounds(64, 16), None), (bounds(64, 16), None));
        let (fitted, warning) = fit_bounds(bounds(2000, 1000), Some(1024));
        let room = 1024 - 128 - 16 - 16;
        assert_eq!(fitted, bounds(room, room / 2));
        let warning = warning.unwrap_or_default();
        assert!(
            warning.contains("admin.max_connections lowered from 2000"),
            "{warning}"
        );
        let (fitted, _) = fit_bounds(bounds(64, 16), Some(100));
        assert_eq!(fitted, bounds(4, 2));
    }

    /// Item 4: the soft limit ends at the hard one.
    #[test]
    fn open_files_limit_is_raised_to_the_hard_limit() {
        let limit = raise_open_files_limit().unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(open_files_soft_limit(), limit.soft);
        if let Some(hard) = limit.hard {
            assert_eq!(limit.soft, Some(hard));
        }
    }

    #[test]
    fn slots_count_and_free() {
        let count = OpenCount::new(NodeMetrics::new(), "conclave_admin_event_streams");
        let first = count.open(1);
        let second = count.open(1);
        assert!(!first.over());
        assert!(second.over());
        drop(second);
        drop(first);
        assert!(!count.open(1).over());
    }
}
