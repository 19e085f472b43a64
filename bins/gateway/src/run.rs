//! `conclave run` and `conclave check-config`: load, validate, start, stop; signals, reload and
//! systemd's notifications (issue 8, item 8).
//!
//! # Signals
//!
//! | signal | what `conclave run` does |
//! |---|---|
//! | `SIGHUP` | reopens the log and reloads the configuration file ([`crate::reload`]); the node keeps running, a leader keeps leading |
//! | `SIGTERM`, `SIGINT`, `SIGQUIT`, `SIGUSR1`, `SIGUSR2`, `SIGALRM`, `SIGVTALRM`, `SIGPROF`, `SIGXCPU`, `SIGXFSZ`, `SIGIO`, `SIGPWR`, `SIGSTKFLT`, `SIGRTMIN`…`SIGRTMAX` | a graceful stop, exit code 0: a leader hands over first, peers are told goodbye, the hooks of the last events finish |
//! | a second one of those during the stop | exits at once with 128 + the signal's number |
//!
//! Every signal whose default action would end the process is caught, so none of them kills a
//! leader without a hand-over (a `kill -9`-like failover). Left alone: `SIGKILL` and `SIGSTOP`
//! (they cannot be caught), the faults (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`, `SIGTRAP`,
//! `SIGSYS`, `SIGABRT`: the process is broken, a hand-over cannot be trusted), `SIGPIPE`
//! (ignored, as in every Rust program), and the signals whose default action is not to
//! terminate (`SIGCHLD`, `SIGWINCH`, `SIGURG`, `SIGCONT`, `SIGTSTP`, `SIGTTIN`, `SIGTTOU`).
//!
//! # systemd
//!
//! Under `Type=notify` the node says `READY=1` once started, `RELOADING=1` / `READY=1` around
//! a reload, `STOPPING=1` when it begins to stop, and pings the watchdog while it is healthy
//! ([`crate::notify`]).

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use conclave_actors::node::{Node, NodeBuilder, NodeError, NodeHandle};
use conclave_config::NodeConfig;
use conclave_config::settings::{ConfigWarning, Settings};
use conclave_config::tls::TlsFiles;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};

use crate::logging::{Log, parse_filter};
use crate::notify::{Notifier, monotonic_usec, watchdog_interval};
use crate::output::{errln, outln};
use crate::preflight;
use crate::reload::{self, Reloader};
use crate::{
    EXIT_CANTCREAT, EXIT_DATAERR, EXIT_NOPERM, EXIT_SOFTWARE, EXIT_UNAVAILABLE, EXIT_USAGE,
};

/// A configuration that passed every check.
pub(crate) struct Loaded {
    pub(crate) settings: Settings,
    pub(crate) config: NodeConfig,
    pub(crate) warnings: Vec<ConfigWarning>,
}

/// Loads and validates `file` (the built-in defaults alone when `None`), printing every
/// problem; the exit code on failure.
pub(crate) fn load(file: Option<&Path>) -> Result<Loaded, ExitCode> {
    let settings = Settings::load(file).map_err(|err| {
        errln!("error: {err}");
        ExitCode::from(EXIT_USAGE)
    })?;
    let (config, warnings) = reload::validate(&settings).map_err(|problems| {
        errln!(
            "{}: {} configuration problem{}:",
            file.map_or_else(
                || "built-in defaults".to_owned(),
                |file| file.display().to_string()
            ),
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        for problem in problems {
            errln!("  {problem}");
        }
        ExitCode::from(EXIT_USAGE)
    })?;
    Ok(Loaded {
        settings,
        config,
        warnings,
    })
}

/// How clients reach a listener at `listen`: `https://…` with TLS (ADMIN-TLS), `http://…`
/// without.
fn listener_url(listen: SocketAddr, tls: Option<&TlsFiles>) -> String {
    let scheme = if tls.is_some() { "https" } else { "http" };
    format!("{scheme}://{listen}")
}

/// The mode and what bounds its failover, for `check-config`: an operator choosing timings
/// sees what they add up to.
fn election_summary(election: &conclave_core::election::ElectionConfig) -> String {
    use conclave_core::election::ElectionConfig;
    let millis = |d: std::time::Duration| d.as_millis();
    match election {
        ElectionConfig::Raft(raft) if raft.adaptive_timeout => format!(
            "raft ({} quorum; a dead leader is replaced once it is overdue for the link, \
             {}–{} ms after it was last heard)",
            raft.quorum.label(),
            millis(raft.suspicion_floor()),
            millis(raft.election_timeout_max)
        ),
        ElectionConfig::Raft(raft) => format!(
            "raft ({} quorum; a dead leader is replaced after an election timeout of {}–{} ms)",
            raft.quorum.label(),
            millis(raft.election_timeout_min),
            millis(raft.election_timeout_max)
        ),
        ElectionConfig::Gossip(gossip) if !gossip.use_leader_election => format!(
            "gossip (static leadership: this node {} the org leader)",
            if gossip.org_leader { "is" } else { "is not" }
        ),
        ElectionConfig::Gossip(gossip) => format!(
            "gossip (a dead leader is replaced within {} ms: leader_alive_threshold + \
             leader_election_duration)",
            millis(gossip.failover_budget())
        ),
        ElectionConfig::Priority(priority) => format!(
            "priority (a dead master is replaced within {} ms: master timeout + discovery + \
             campaign + votes + jitter)",
            millis(priority.failover_budget())
        ),
        ElectionConfig::Static(fixed) => format!("static (leader {}; nobody elects)", fixed.leader),
    }
}

/// `conclave check-config FILE`: every problem `conclave run` would refuse to start with, in
/// one pass — the file's values, and what [`preflight`] finds in `node.data_dir` unless
/// `data_dir` is false (`--file-only`) — and the warnings `run` would log.
pub(crate) fn check_config(file: &Path, data_dir: bool) -> ExitCode {
    let settings = match Settings::load(Some(file)) {
        Ok(settings) => settings,
        Err(err) => {
            errln!("error: {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let validated = reload::validate(&settings);
    let mode = match &validated {
        Ok((config, _)) => Some(config.election.mode()),
        Err(_) => conclave_core::election::Mode::from_label(&settings.election.mode),
    };
    let mut problems = match &validated {
        Ok(_) => Vec::new(),
        Err(problems) => problems.clone(),
    };
    if data_dir && !settings.node.data_dir.as_os_str().is_empty() {
        problems.extend(
            preflight::data_dir_problems(&settings.node.data_dir, mode)
                .into_iter()
                .map(|problem| format!("node.data_dir: {problem}")),
        );
    }
    let (config, warnings) = match validated {
        Ok(valid) if problems.is_empty() => valid,
        _ => {
            errln!(
                "{}: {} configuration problem{}:",
                file.display(),
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
            for problem in problems {
                errln!("  {problem}");
            }
            return ExitCode::from(EXIT_USAGE);
        }
    };
    outln!("{}: ok", file.display());
    outln!("  node {} in cluster {}", config.node_id, config.cluster_id);
    if config.voters.is_empty() {
        outln!("  voters none listed (every node heard in the cluster takes part)");
    } else {
        let voters: Vec<String> = config.voters.iter().map(ToString::to_string).collect();
        outln!("  voters {}", voters.join(", "));
    }
    outln!("  election {}", election_summary(&config.election));
    if let Some(udp) = &config.udp {
        outln!("  udp {} (peers: {})", udp.listen, udp.peers.len());
    }
    match config.admin.listen {
        Some(listen) => outln!(
            "  admin {} (at most {} connections, {} event streams)",
            listener_url(listen, config.admin.tls.as_ref()),
            config.admin.max_connections,
            config.admin.max_event_streams
        ),
        None => outln!("  admin off"),
    }
    for (peer, url) in &config.admin.peer_urls {
        outln!("  admin of {peer}: {url}");
    }
    match config.metrics.listen {
        Some(listen) => outln!(
            "  metrics {}/metrics",
            listener_url(listen, config.metrics.tls.as_ref())
        ),
        None => outln!("  metrics off"),
    }
    // What `run` logs at WARN at start, said here too: a typo in cluster.voters that makes
    // this node a silent non-voter must not pass as `ok` alone.
    for warning in &warnings {
        outln!("  warning: {warning}");
    }
    ExitCode::SUCCESS
}

/// `conclave run [--config FILE]`; `log` is `--log` / `RUST_LOG`, which overrides
/// `log.level` at start.
pub(crate) fn run(file: Option<&Path>, log: Option<&str>) -> ExitCode {
    let Loaded {
        settings,
        config,
        warnings,
    } = match load(file) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let filter = match parse_filter(log.unwrap_or(&settings.log.level)) {
        Ok(filter) => filter,
        Err(err) => {
            errln!("error: --log: {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let log = match Log::install(filter, reload::log_file(&settings).as_deref()) {
        Ok(log) => log,
        Err(err) => {
            errln!(
                "error: cannot open log.file {}: {err}",
                settings.log.file.display()
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if file.is_none() {
        info!("no --config: running on the built-in defaults (config/default.toml)");
    }
    for warning in &warnings {
        warn!(key = %warning.key, "configuration: {}", warning.message);
    }
    // Before any socket: the admin API's bounds are fitted to the limit this leaves.
    conclave_actors::admin::log_open_files_limit(&conclave_actors::admin::raise_open_files_limit());
    let notifier = match Notifier::from_env() {
        Ok(notifier) => notifier.map(Rc::new),
        Err(err) => {
            warn!("{err}; not notifying systemd");
            None
        }
    };
    let watchdog = match watchdog_interval(
        std::env::var_os("WATCHDOG_USEC"),
        std::env::var_os("WATCHDOG_PID"),
        std::process::id(),
    ) {
        Ok(every) => every,
        Err(err) => {
            warn!("{err}; not pinging the systemd watchdog");
            None
        }
    };
    let notify = |state: &str| {
        if let Some(notifier) = &notifier {
            if let Err(err) = notifier.notify(state) {
                warn!("cannot notify systemd: {err}");
            }
        }
    };

    let mut reloader = Reloader::new(file, &settings, &config);
    let system = actix_rt::System::new();
    system.block_on(async {
        // Before anything else: a signal during the start-up must not take its default action.
        let mut signals = Signals::listen();
        let admin = config
            .admin
            .listen
            .map(|listen| listener_url(listen, config.admin.tls.as_ref()));
        let metrics = config
            .metrics
            .listen
            .map(|listen| listener_url(listen, config.metrics.tls.as_ref()));
        let node_id = config.node_id;
        let data_dir = config.data_dir.clone();
        let node = match NodeBuilder::new(config).start().await {
            Ok(node) => node,
            Err(err) => {
                let code = start_failure_code(&err);
                // A data directory this user may not write: which, for whom, and the fix.
                match (code == EXIT_NOPERM)
                    .then(|| preflight::permission_fix(&data_dir))
                    .flatten()
                {
                    Some(fix) => error!("cannot start: {err}; {fix}"),
                    None => error!("cannot start: {err}"),
                }
                return ExitCode::from(code);
            }
        };
        if let Some(admin) = admin {
            info!("admin API on {admin}");
        }
        if let Some(metrics) = metrics {
            info!("metrics on {metrics}/metrics");
        }
        notify(&format!("READY=1\nSTATUS=node {node_id} running"));
        if let (Some(every), Some(notifier)) = (watchdog, &notifier) {
            info!(
                every_ms = every.as_millis(),
                "pinging the systemd watchdog while healthy"
            );
            let notifier = Rc::clone(notifier);
            let handle = node.handle().clone();
            actix_rt::spawn(watchdog_loop(
                every,
                move || healthy(handle.clone(), every),
                move || {
                    if let Err(err) = notifier.notify("WATCHDOG=1") {
                        warn!("cannot ping the systemd watchdog: {err}");
                    }
                },
            ));
        }

        let halted = loop {
            tokio::select! {
                received = signals.next() => match received {
                    Some(libc::SIGHUP) => {
                        notify(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()));
                        reloader.reload(node.handle(), &log).await;
                        reload_tls(&node);
                        notify(&format!("READY=1\nSTATUS=node {node_id} running"));
                    }
                    Some(number) => {
                        info!(
                            signal = signal_name(number),
                            "{}: stopping gracefully (a leader hands over first)",
                            signal_name(number)
                        );
                        break false;
                    }
                    None => std::future::pending::<()>().await,
                },
                // Waited on, not polled: an idle node wakes for nothing here.
                () = node.handle().election_stopped() => {
                    error!("the node halted");
                    break true;
                }
            }
        };
        notify("STOPPING=1");
        if let Some(number) = stop_unless_signalled(node, &mut signals).await {
            warn!(
                signal = signal_name(number),
                "{} during the graceful stop: exiting at once",
                signal_name(number)
            );
            return ExitCode::from(u8::try_from(128 + number).unwrap_or(u8::MAX));
        }
        if halted {
            ExitCode::from(EXIT_SOFTWARE)
        } else {
            info!("stopped");
            ExitCode::SUCCESS
        }
    })
}

/// The exit code of a node that could not start (sysexits.h; `main.rs` lists them all):
///
/// - 64 (EX_USAGE): the configuration contradicts the data directory (a WAL of another
///   election mode);
/// - 65 (EX_DATAERR): the WAL or the replicated log is damaged, or not conclave's. Restarting
///   cannot help, so the systemd unit lists it in `RestartPreventExitStatus=`; an operator
///   inspects and repairs it (`docs/wal.md`);
/// - 69 (EX_UNAVAILABLE): something it needs is taken (a port another process holds, a data
///   directory another process has locked);
/// - 73 (EX_CANTCREAT): the data directory or a file in it cannot be created or written (a
///   read-only or full file system, a file where a directory should be);
/// - 77 (EX_NOPERM): the same, because this user lacks the permission;
/// - 70 (EX_SOFTWARE) otherwise.
fn start_failure_code(err: &NodeError) -> u8 {
    match err {
        NodeError::Bind { .. } => EXIT_UNAVAILABLE,
        NodeError::Wal(wal) => wal_failure_code(wal),
        _ => EXIT_SOFTWARE,
    }
}

/// The exit code of a WAL that could not be opened or created, by [`start_failure_code`]'s
/// rules; `conclave init` uses them too.
pub(crate) fn wal_failure_code(err: &conclave_storage::WalError) -> u8 {
    use conclave_storage::WalError;
    match err {
        WalError::OtherMode { .. } => EXIT_USAGE,
        WalError::Corrupt { .. }
        | WalError::BadRecord { .. }
        | WalError::ForeignFile { .. }
        | WalError::LogDamaged { .. }
        | WalError::LogGap { .. } => EXIT_DATAERR,
        WalError::Locked { .. } => EXIT_UNAVAILABLE,
        WalError::Io { source, .. } | WalError::LockFile { source, .. } => {
            if source.kind() == std::io::ErrorKind::PermissionDenied {
                EXIT_NOPERM
            } else {
                EXIT_CANTCREAT
            }
        }
        _ => EXIT_SOFTWARE,
    }
}

/// Stops `node` gracefully; a terminating signal received meanwhile cuts it short (its
/// number is returned; SIGHUP is ignored by then).
async fn stop_unless_signalled(node: Node, signals: &mut Signals) -> Option<i32> {
    let stop = node.stop();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return None,
            received = signals.next() => match received {
                Some(libc::SIGHUP) => debug!("SIGHUP while stopping: ignored"),
                Some(number) => return Some(number),
                None => {
                    stop.as_mut().await;
                    return None;
                }
            },
        }
    }
}

/// Whether the node is healthy enough for a watchdog ping: its election runs and answers a
/// status query within `within`.
async fn healthy(handle: NodeHandle, within: Duration) -> bool {
    handle.is_running()
        && tokio::time::timeout(within, handle.election_status())
            .await
            .is_ok_and(|status| status.is_ok())
}

/// Every `every`, pings (`ping`) when `check` says the node is healthy; logs once when it
/// stops being so and once when it recovers.
async fn watchdog_loop<C, F, P>(every: Duration, check: C, ping: P)
where
    C: Fn() -> F,
    F: std::future::Future<Output = bool>,
    P: Fn(),
{
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut was_healthy = true;
    loop {
        ticker.tick().await;
        let is_healthy = check().await;
        if is_healthy {
            ping();
        }
        match (was_healthy, is_healthy) {
            (true, false) => {
                warn!("the node is not healthy: withholding the systemd watchdog ping");
            }
            (false, true) => info!("the node is healthy again: pinging the systemd watchdog"),
            _ => {}
        }
        was_healthy = is_healthy;
    }
}

/// The signals `conclave run` handles, as they arrive.
struct Signals {
    received: mpsc::Receiver<i32>,
}

/// Every catchable signal whose default action ends the process, and SIGHUP.
fn handled_signals() -> Vec<i32> {
    let mut numbers = vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGIO,
    ];
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        numbers.extend([libc::SIGPWR, libc::SIGSTKFLT]);
        numbers.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    }
    numbers
}

/// A signal's name for the log.
fn signal_name(number: i32) -> String {
    let named = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGVTALRM, "SIGVTALRM"),
        (libc::SIGPROF, "SIGPROF"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGIO, "SIGIO"),
        #[cfg(any(target_os = "linux", target_os = "android"))]
        (libc::SIGPWR, "SIGPWR"),
        #[cfg(any(target_os = "linux", target_os = "android"))]
        (libc::SIGSTKFLT, "SIGSTKFLT"),
    ];
    if let Some((_, name)) = named.iter().find(|(n, _)| *n == number) {
        return (*name).to_owned();
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&number) {
        return format!("SIGRTMIN+{}", number - libc::SIGRTMIN());
    }
    format!("signal {number}")
}

impl Signals {
    /// Starts watching every handled signal; a signal that cannot be watched is logged and
    /// keeps its default action.
    fn listen() -> Self {
        // A burst of signals beyond this is one signal repeated; the extra ones are dropped.
        let (sender, received) = mpsc::channel(16);
        for number in handled_signals() {
            match signal(SignalKind::from_raw(number)) {
                Ok(mut stream) => {
                    let sender = sender.clone();
                    actix_rt::spawn(async move {
                        while stream.recv().await.is_some() {
                            let _ = sender.try_send(number);
                        }
                    });
                }
                Err(err) => warn!(
                    signal = signal_name(number),
                    "cannot watch {}: {err}; it keeps its default action",
                    signal_name(number)
                ),
            }
        }
        Self { received }
    }

    /// The next signal received.
    async fn next(&mut self) -> Option<i32> {
        self.received.recv().await
    }
}

/// ADMIN-TLS on SIGHUP: every TLS listener reads its certificate, key and client CAs again,
/// so a renewed certificate is served without a restart; files that fail the checks leave
/// the listener as it was.
fn reload_tls(node: &conclave_actors::node::Node) {
    for (section, outcome) in node.reload_tls() {
        match outcome {
            Ok(()) => info!("{section}: certificate, key and client CAs read again"),
            Err(problem) => {
                error!("{section}.{problem}; the listener keeps the certificate it had")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// Every handled signal has a name, and the graceful ones exclude SIGHUP only.
    #[test]
    fn handled_signals_are_named_and_include_every_terminating_one() {
        let handled = handled_signals();
        for number in &handled {
            assert!(!signal_name(*number).starts_with("signal "), "{number}");
        }
        for must in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGHUP,
        ] {
            assert!(handled.contains(&must), "{}", signal_name(must));
        }
        for never in [
            libc::SIGKILL,
            libc::SIGSTOP,
            libc::SIGSEGV,
            libc::SIGPIPE,
            libc::SIGCHLD,
        ] {
            assert!(!handled.contains(&never), "{}", signal_name(never));
        }
        #[cfg(target_os = "linux")]
        assert_eq!(signal_name(libc::SIGRTMIN() + 3), "SIGRTMIN+3");
    }

    /// The watchdog pings every period while healthy and withholds pings while not.
    #[actix_rt::test]
    async fn watchdog_pings_only_while_healthy() {
        tokio::time::pause();
        let health = Rc::new(Cell::new(true));
        let pings = Rc::new(Cell::new(0_u32));
        let (check_health, count) = (Rc::clone(&health), Rc::clone(&pings));
        let task = actix_rt::spawn(watchdog_loop(
            Duration::from_secs(1),
            move || {
                let healthy = check_health.get();
                async move { healthy }
            },
            move || count.set(count.get() + 1),
        ));
        // The first tick is immediate, then one per period.
        tokio::time::sleep(Duration::from_millis(3500)).await;
        assert_eq!(pings.get(), 4);
        health.set(false);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(pings.get(), 4, "no ping while unhealthy");
        health.set(true);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(pings.get(), 6);
        task.abort();
    }
}
