//! `conclave lock NAME -- CMD` (SESS-4): run a command while holding a cluster-wide lock, as
//! `etcdctl lock` and `consul lock` do, with a fencing token in its environment.
//!
//! The lock is the key `conclave/locks/NAME`, created with `if_revision: 0` (only where it
//! does not exist) and tied to a session of this process. Its holder is whoever created it;
//! the revision at which it was created is the fencing token, larger for every later holder
//! because the store's revision only grows. Releasing is revoking the session, which deletes
//! the key; a holder that dies without releasing stops sending keepalives, and the leader
//! ends its session, deleting the key, once the TTL runs out.
//!
//! Three activities run at once, each where it may block without stalling the others:
//! - the keepalives, on a thread of their own ([`Keeper`]): one ordinary keepalive request
//!   every third of the TTL rather than the streaming keepalive, because each request has
//!   its own timeout and follows a `not_leader` redirect to a new leader like any write,
//!   and because this side must decide for itself when the lock is lost: the leader started
//!   the session's TTL no earlier than this client sent the last keepalive it answered, so
//!   once a TTL has passed since that send without another answer, the session may have
//!   ended and the lock be someone else's. A stream, by contrast, can sit silent on a dead
//!   connection and ends at every change of leader.
//! - taking the lock, on another thread: the create, and while another holds the key, a
//!   watch of it from the next revision on until it is deleted, then the create again.
//! - this thread's event loop: signals, the outcome of the two others, and CMD's exit.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitCode;
use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::Duration;

use conclave_api::{KeyValue, KvWriteAnswer, PutRequest, SessionGrantRequest};
use rustix::process::{Pid, Signal};
use tokio::sync::mpsc;
// Tokio's clock reads the system's monotonic clock outside a runtime with a paused clock, and
// is the one clippy.toml allows.
use tokio::time::Instant;

use crate::cli::{ClientArgs, LockArgs};
use crate::client::{AdminClient, ClientError};
use crate::event_stream::ServerEvents;
use crate::log_client::{client, encode_key, failed, made_up_request_id, send};
use crate::output::errln;
use crate::session_client::{grant, keepalive, not_live, revoke};

/// Where the locks live in the key-value store: lock NAME is the key `conclave/locks/NAME`.
pub(crate) const LOCK_KEY_PREFIX: &str = "conclave/locks/";

/// `--wait` ran out while another held the lock; CMD did not run (as `timeout(1)`'s 124).
pub(crate) const EXIT_WAIT_EXPIRED: u8 = 124;
/// The lock was lost while CMD ran.
pub(crate) const EXIT_LOCK_LOST: u8 = 125;
/// CMD exists but could not be run (as a shell's 126).
const EXIT_CANNOT_RUN: u8 = 126;
/// CMD was not found (as a shell's 127).
const EXIT_NOT_FOUND: u8 = 127;

/// Keepalives sent per TTL: after a lost one, two more chances before the TTL runs out.
const KEEPALIVES_PER_TTL: u32 = 3;

/// The pause before trying again after the cluster could not answer (no leader yet).
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// The longest one watch of the key runs before the create is tried again: a watch served by
/// a node cut off from the cluster would otherwise wait for a delete it never hears of.
const WATCH_RECHECK: Duration = Duration::from_secs(30);

/// How long a watch may go without a byte: the node sends a comment every 15 s.
const WATCH_SILENCE: Duration = Duration::from_secs(45);

/// The most of CMD's command line the key's value quotes, for `kv get`.
const VALUE_QUOTE: usize = 200;

/// What `conclave lock` was asked to do.
#[derive(Debug)]
pub(crate) struct LockOptions {
    /// The lock's name.
    pub(crate) name: String,
    /// The session's time to live.
    pub(crate) ttl: Duration,
    /// How long to wait for a holder to let go; `None`: as long as it takes.
    pub(crate) wait: Option<Duration>,
    /// CMD and its arguments (clap requires at least CMD).
    pub(crate) command: Vec<OsString>,
}

/// What the keepalive and lock-taking threads report to the event loop.
enum LockEvent {
    /// The lock is held: the key was created at this revision (the fencing token).
    Acquired(u64),
    /// The lock could not be taken.
    NotAcquired(NotAcquired),
    /// The session ended, or may have: why.
    Lost(String),
}

/// Why the lock was not taken.
enum NotAcquired {
    /// `--wait` ran out; the key as it was last seen.
    WaitExpired(Option<KeyValue>),
    /// The cluster refused, or could not be reached.
    Client(ClientError),
}

impl From<&LockArgs> for LockOptions {
    fn from(args: &LockArgs) -> Self {
        Self {
            name: args.name.clone(),
            ttl: Duration::from_millis(args.ttl),
            wait: args.wait.map(Duration::from_secs),
            command: args.command.clone(),
        }
    }
}

/// Runs `conclave lock`.
pub(crate) fn lock(lock_args: &LockArgs) -> ExitCode {
    let args = lock_args.client.client_args();
    let options = LockOptions::from(lock_args);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            errln!("error: cannot start conclave lock's event loop: {err}");
            return ExitCode::from(crate::EXIT_SOFTWARE);
        }
    };
    runtime.block_on(lock_and_run(&args, &options))
}

/// Grants the session, takes the lock, runs CMD, releases.
async fn lock_and_run(args: &ClientArgs, options: &LockOptions) -> ExitCode {
    // Watched before anything is held, so that a signal never leaves a session behind.
    let mut signals = match Signals::watch() {
        Ok(signals) => signals,
        Err(err) => {
            errln!("error: cannot watch signals: {err}");
            return ExitCode::from(crate::EXIT_SOFTWARE);
        }
    };
    let key = format!("{LOCK_KEY_PREFIX}{}", options.name);
    let (events_sender, mut events) = mpsc::channel(4);
    let session = match Session::grant(args, options, events_sender.clone()) {
        Ok(session) => session,
        Err(code) => return code,
    };
    // A wait too long to be a moment on this clock is no deadline at all.
    let deadline = options
        .wait
        .and_then(|wait| Instant::now().checked_add(wait));
    let taker = LockTaker {
        client: match session.client.other(session.client.base()) {
            Ok(client) => client,
            Err(err) => return session.release_after(failed(args, &err)),
        },
        key: key.clone(),
        session: session.id,
        value: holder_value(&options.command),
        deadline,
    };
    if let Err(err) = taker.start(events_sender) {
        errln!("error: cannot start taking the lock: {err}");
        return session.release_after(ExitCode::from(crate::EXIT_SOFTWARE));
    }
    let token = match wait_for_lock(&mut signals, &mut events).await {
        Waited::Acquired(token) => token,
        Waited::NotAcquired(NotAcquired::WaitExpired(holder)) => {
            let since = holder.map_or_else(String::new, |kv| {
                format!(
                    " (held since revision {}: {})",
                    kv.create_revision, kv.value
                )
            });
            errln!(
                "error: {key} is still held by another after {} s{since}; CMD did not run",
                options.wait.unwrap_or_default().as_secs()
            );
            return session.release_after(ExitCode::from(EXIT_WAIT_EXPIRED));
        }
        Waited::NotAcquired(NotAcquired::Client(err)) => {
            return session.release_after(failed(args, &err));
        }
        Waited::Lost(why) => {
            errln!("error: {why}, before {key} was taken; CMD did not run: run it again");
            return session.release_after(ExitCode::from(crate::EXIT_TEMPFAIL));
        }
        Waited::Signal(signal) => {
            return session.release_after(ExitCode::from(signal_exit(signal)));
        }
    };
    let held = Held {
        key,
        session: session.id,
        token,
        ttl: options.ttl,
    };
    let outcome = held.run(&options.command, &mut signals, &mut events).await;
    session.release_after(outcome)
}

/// The lock's session, from its grant to its revocation, with its keepalives.
struct Session {
    client: AdminClient,
    id: u64,
    ttl: Duration,
    keeper: Keeper,
}

impl Session {
    /// Grants the session and starts its keepalives, which report to `events` when it is
    /// lost; the exit code of a failure, said on standard error.
    fn grant(
        args: &ClientArgs,
        options: &LockOptions,
        events: mpsc::Sender<LockEvent>,
    ) -> Result<Self, ExitCode> {
        // One keepalive waits at most until the next is due, so a silent leader leaves time
        // for more tries within the TTL.
        let clients = client(args).and_then(|client| {
            let keepalives = AdminClient::new(
                &args.admin,
                args.token.clone(),
                options.ttl / KEEPALIVES_PER_TTL,
            )?
            .with_tls(&args.tls)?;
            Ok((client, keepalives))
        });
        let (client, keepalives) = clients.map_err(|err| failed(args, &err))?;
        let request = SessionGrantRequest {
            ttl_ms: u64::try_from(options.ttl.as_millis()).unwrap_or(u64::MAX),
            name: Some(format!("conclave lock {}", options.name)),
            max_claims: None,
            request_id: Some(made_up_request_id()),
        };
        // Taken before the grant is sent: the leader starts the TTL no earlier.
        let sent = Instant::now();
        let id = grant(&client, &request)
            .map_err(|err| failed(args, &err))?
            .session;
        let keeper = match Keeper::start(keepalives, id, options.ttl, sent, events) {
            Ok(keeper) => keeper,
            Err(err) => {
                errln!("error: cannot start the keepalive thread: {err}");
                // The session would otherwise live on for a TTL with nobody behind it.
                let _ = revoke(&client, id, &made_up_request_id());
                return Err(ExitCode::from(crate::EXIT_SOFTWARE));
            }
        };
        Ok(Self {
            client,
            id,
            ttl: options.ttl,
            keeper,
        })
    }

    /// Stops the keepalives and revokes the session, deleting the key if it was held; then
    /// `code`. A session that cannot be revoked ends when its TTL runs out, and is said so.
    fn release_after(self, code: ExitCode) -> ExitCode {
        self.keeper.stop();
        match revoke(&self.client, self.id, &made_up_request_id()) {
            Ok(_) => {}
            // Over already: expired, or revoked by an operator.
            Err(err) if not_live(&err) => {}
            Err(err) => errln!(
                "warning: session {} could not be revoked ({err}); the leader ends it, and \
                 the lock with it, once its TTL of {} ms runs out",
                self.id,
                self.ttl.as_millis()
            ),
        }
        code
    }
}

/// The thread that keeps the session alive.
struct Keeper {
    stop: std_mpsc::Sender<()>,
}

impl Keeper {
    fn start(
        client: AdminClient,
        session: u64,
        ttl: Duration,
        granted: Instant,
        events: mpsc::Sender<LockEvent>,
    ) -> std::io::Result<Self> {
        let (stop, stopped) = std_mpsc::channel();
        thread::Builder::new()
            .name("lock keepalive".to_owned())
            .spawn(move || keep_alive(&client, session, ttl, granted, &stopped, &events))?;
        Ok(Self { stop })
    }

    /// Stops the keepalives. A keepalive in flight is not waited for: its answer no longer
    /// matters.
    fn stop(self) {
        let _ = self.stop.send(());
    }
}

/// Sends a keepalive every third of the TTL until told to stop, or until the session is lost:
/// ended (the leader says it is not live), or possibly ended (a whole TTL since the send of
/// the last keepalive the leader answered).
fn keep_alive(
    client: &AdminClient,
    session: u64,
    ttl: Duration,
    granted: Instant,
    stopped: &std_mpsc::Receiver<()>,
    events: &mpsc::Sender<LockEvent>,
) {
    let interval = ttl / KEEPALIVES_PER_TTL;
    let mut last_answered = granted;
    let mut last_failure: Option<ClientError> = None;
    loop {
        let expiry = last_answered + ttl;
        let pause = interval.min(expiry.saturating_duration_since(Instant::now()));
        if !matches!(
            stopped.recv_timeout(pause),
            Err(std_mpsc::RecvTimeoutError::Timeout)
        ) {
            return;
        }
        if Instant::now() >= expiry {
            let last = last_failure.map_or_else(String::new, |err| format!(" (last try: {err})"));
            let why = format!(
                "no keepalive of session {session} reached the leader for its TTL of {} ms{last}",
                ttl.as_millis()
            );
            let _ = events.blocking_send(LockEvent::Lost(why));
            return;
        }
        let sent = Instant::now();
        match keepalive(client, session) {
            Ok(_) => {
                last_answered = sent;
                last_failure = None;
            }
            Err(err) if not_live(&err) => {
                let why = format!(
                    "session {session} ended (revoked, or expired before a keepalive reached \
                     the leader)"
                );
                let _ = events.blocking_send(LockEvent::Lost(why));
                return;
            }
            Err(err) => last_failure = Some(err),
        }
    }
}

/// Takes the lock on a thread of its own: creates the key, and while another holds it,
/// watches it until it is deleted, then tries again.
struct LockTaker {
    client: AdminClient,
    key: String,
    session: u64,
    /// What the key holds: who holds the lock, for `kv get`.
    value: String,
    deadline: Option<Instant>,
}

impl LockTaker {
    fn start(self, events: mpsc::Sender<LockEvent>) -> std::io::Result<()> {
        thread::Builder::new()
            .name("lock".to_owned())
            .spawn(move || {
                let event = match self.take() {
                    Ok(token) => LockEvent::Acquired(token),
                    Err(why) => LockEvent::NotAcquired(why),
                };
                let _ = events.blocking_send(event);
            })
            .map(|_| ())
    }

    /// The fencing token once the lock is held.
    fn take(&self) -> Result<u64, NotAcquired> {
        let path = format!("/v1/kv/{}", encode_key(&self.key));
        let mut said_waiting = false;
        loop {
            let request = PutRequest {
                value: self.value.clone(),
                if_revision: Some(0),
                if_value: None,
                session: Some(self.session),
                request_id: Some(made_up_request_id()),
            };
            let refusal = match send::<_, KvWriteAnswer>(&self.client, "PUT", &path, Some(&request))
            {
                Ok(answer) => return Ok(answer.revision),
                Err(err) => err,
            };
            let holder = match refusal.refusal().and_then(|answer| answer.current.clone()) {
                // An earlier create whose answer was lost: the key is this session's.
                Some(Some(kv)) if kv.session == Some(self.session) => {
                    return Ok(kv.create_revision);
                }
                Some(holder) => holder,
                None if refusal.command_exit_code() == crate::EXIT_TEMPFAIL => {
                    self.pause();
                    None
                }
                None => return Err(NotAcquired::Client(refusal)),
            };
            if self
                .deadline
                .is_some_and(|deadline| Instant::now() >= deadline)
            {
                return Err(NotAcquired::WaitExpired(holder));
            }
            if let Some(kv) = holder {
                if !said_waiting {
                    errln!(
                        "conclave lock: {} is held (since revision {}: {}); waiting",
                        self.key,
                        kv.create_revision,
                        kv.value
                    );
                    said_waiting = true;
                }
                self.wait_for_release(kv.revision);
            }
        }
    }

    /// Watches the key from the revision after `revision` until it is deleted (or a watch
    /// can no longer say), at most until the deadline or [`WATCH_RECHECK`].
    fn wait_for_release(&self, revision: u64) {
        let left = self.left();
        if left.is_zero() {
            return;
        }
        let path = format!(
            "/v1/kv/{}?watch={}",
            encode_key(&self.key),
            revision.saturating_add(1)
        );
        let stream = match self
            .client
            .open_stream("GET", &path, WATCH_SILENCE, Some(left))
        {
            Ok(stream) => stream,
            Err(_) => {
                // Too many streams, a node restarting: the create tells what is wrong, once
                // the pause keeps this from spinning.
                self.pause();
                return;
            }
        };
        for event in ServerEvents::new(stream) {
            match event {
                // Rewritten by its holder: still held.
                Ok(event) if event.name == "put" => {}
                // Deleted, or the history no longer reaches back, or the watch ended: try.
                Ok(_) | Err(_) => return,
            }
        }
    }

    /// How long one wait may last: until the deadline, at most [`WATCH_RECHECK`].
    fn left(&self) -> Duration {
        self.deadline.map_or(WATCH_RECHECK, |deadline| {
            deadline
                .saturating_duration_since(Instant::now())
                .min(WATCH_RECHECK)
        })
    }

    /// Waits before trying again, no longer than the deadline allows.
    fn pause(&self) {
        thread::sleep(RETRY_PAUSE.min(self.left()));
    }
}

/// What waiting for the lock came to.
enum Waited {
    Acquired(u64),
    NotAcquired(NotAcquired),
    Lost(String),
    Signal(Signal),
}

/// Waits for the lock, a signal, or the loss of the session, whichever comes first.
async fn wait_for_lock(signals: &mut Signals, events: &mut mpsc::Receiver<LockEvent>) -> Waited {
    tokio::select! {
        signal = signals.recv() => Waited::Signal(signal),
        event = events.recv() => match event {
            Some(LockEvent::Acquired(token)) => Waited::Acquired(token),
            Some(LockEvent::NotAcquired(why)) => Waited::NotAcquired(why),
            Some(LockEvent::Lost(why)) => Waited::Lost(why),
            // Both threads hold a sender until they have reported.
            None => Waited::Lost("the lock's threads stopped".to_owned()),
        },
    }
}

/// The lock, held.
struct Held {
    key: String,
    session: u64,
    token: u64,
    ttl: Duration,
}

impl Held {
    /// Runs CMD with the token in its environment, passing signals on, until it exits; its
    /// exit code, or [`EXIT_LOCK_LOST`] when the lock was lost meanwhile.
    async fn run(
        &self,
        command: &[OsString],
        signals: &mut Signals,
        events: &mut mpsc::Receiver<LockEvent>,
    ) -> ExitCode {
        let Some((program, arguments)) = command.split_first() else {
            return ExitCode::from(crate::EXIT_USAGE);
        };
        let mut child = match tokio::process::Command::new(program)
            .args(arguments)
            .env("CONCLAVE_LOCK_TOKEN", self.token.to_string())
            .env("CONCLAVE_LOCK_KEY", &self.key)
            .env("CONCLAVE_SESSION", self.session.to_string())
            .spawn()
        {
            Ok(child) => child,
            Err(err) => {
                errln!("error: cannot run {}: {err}", program.to_string_lossy());
                return ExitCode::from(if err.kind() == std::io::ErrorKind::NotFound {
                    EXIT_NOT_FOUND
                } else {
                    EXIT_CANNOT_RUN
                });
            }
        };
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        let mut lost = false;
        // When CMD, told to stop after the lock was lost, is killed if it still runs.
        let mut kill_at: Option<Instant> = None;
        loop {
            tokio::select! {
                status = child.wait() => {
                    return match status {
                        _ if lost => ExitCode::from(EXIT_LOCK_LOST),
                        Ok(status) => ExitCode::from(exit_code_of(status)),
                        Err(err) => {
                            errln!("error: cannot wait for {}: {err}", program.to_string_lossy());
                            ExitCode::from(crate::EXIT_SOFTWARE)
                        }
                    };
                }
                signal = signals.recv() => send_signal(pid, signal),
                event = events.recv(), if !lost => {
                    // The keepalive thread holds a sender for as long as it keeps the session
                    // alive: a closed channel is keepalives that stopped.
                    let lost_now = match event {
                        Some(LockEvent::Lost(why)) => Some(why),
                        None => Some("the keepalives stopped".to_owned()),
                        Some(_) => None,
                    };
                    if let Some(why) = lost_now {
                        errln!(
                            "conclave lock: lost {}: {why}; another may hold it now. Sending \
                             {} SIGTERM",
                            self.key,
                            program.to_string_lossy()
                        );
                        send_signal(pid, Signal::TERM);
                        lost = true;
                        kill_at = Some(Instant::now() + self.ttl);
                    }
                }
                () = sleep_until(kill_at), if kill_at.is_some() => {
                    errln!(
                        "conclave lock: {} still runs one TTL after SIGTERM; sending SIGKILL",
                        program.to_string_lossy()
                    );
                    send_signal(pid, Signal::KILL);
                    kill_at = None;
                }
            }
        }
    }
}

/// Sleeps until `at` (for ever without one: the branch is disabled then).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Sends `signal` to CMD. CMD is reaped only by the `wait` that ends [`Held::run`], so its pid
/// cannot have been given to another process while this may be called.
fn send_signal(pid: Option<Pid>, signal: Signal) {
    if let Some(pid) = pid {
        // CMD may have exited a moment ago; its exit is reported next.
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// The exit code a shell reports for CMD: its own, or 128+N when signal N ended it.
fn exit_code_of(status: std::process::ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => signal_exit_number(signal),
        (None, None) => 1,
    }
}

/// 128 + the signal's number.
fn signal_exit(signal: Signal) -> u8 {
    signal_exit_number(signal.as_raw())
}

fn signal_exit_number(number: i32) -> u8 {
    u8::try_from(128 + number).unwrap_or(u8::MAX)
}

/// What the key holds while the lock is held: who holds it, for an operator's `kv get`.
fn holder_value(command: &[OsString]) -> String {
    let line: Vec<String> = command
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let mut line = line.join(" ");
    if line.chars().count() > VALUE_QUOTE {
        line = format!("{}…", line.chars().take(VALUE_QUOTE).collect::<String>());
    }
    format!("conclave lock, pid {}: {line}", std::process::id())
}

/// The signals passed on to CMD (before CMD runs, they end the wait): SIGINT (Ctrl-C), SIGTERM
/// (`kill`, a service manager), SIGHUP (the terminal closed). Watched from the start: once
/// watched, they no longer end this process by themselves, so no session is left behind.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hang_up: tokio::signal::unix::Signal,
}

impl Signals {
    fn watch() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hang_up: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal received.
    async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.interrupt.recv() => Signal::INT,
            _ = self.terminate.recv() => Signal::TERM,
            _ = self.hang_up.recv() => Signal::HUP,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SESS-4: CMD's exit code is passed on as a shell reports it.
    #[test]
    fn sess4_exit_codes_are_passed_on_as_a_shell_reports_them() {
        let exited = |raw: i32| exit_code_of(std::process::ExitStatus::from_raw(raw));
        assert_eq!(exited(0), 0);
        assert_eq!(exited(3 << 8), 3);
        // Killed by SIGTERM (15): 143.
        assert_eq!(exited(15), 143);
        assert_eq!(signal_exit(Signal::INT), 130);
    }

    /// SESS-4: the key's value names the holder and quotes a long command line only in part.
    #[test]
    fn sess4_the_key_names_its_holder() {
        let value = holder_value(&["sh".into(), "-c".into(), "echo hi".into()]);
        assert!(value.ends_with(": sh -c echo hi"), "{value}");
        let long = holder_value(&["x".repeat(500).into()]);
        assert!(long.ends_with('…') && long.len() < 300, "{long}");
    }
}
