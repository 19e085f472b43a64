//! The host side of the dongle link: one tokio task per dongle that opens the serial port,
//! runs the handshake (ESP-3), sets the radio up, paces `SEND`s by TX credits (ESP-4) and
//! reconnects after an unplug or a reboot (ESP-5). The gateway talks to it through a
//! [`DongleHandle`] and hears from it through a stream of [`DongleEvent`]s.
//!
//! ```text
//!   DongleHandle::send ──► bounded queue ──┐            ┌──► DongleEvent (Connected, Received,
//!   DongleHandle::add_peer/del_peer ───────┤            │     TxDone, Rebooted, Disconnected…)
//!                                          ▼            │
//!                     driver task: open ─► handshake ─► setup ─► ready ─┐
//!                        ▲                   ▲                          │ EOF / I/O error
//!                        │                   └─── BOOT (rebooted) ──────┤
//!                        └──────────── backoff ◄────────────────────────┘
//! ```
//!
//! Decisions the requirements leave open, taken here:
//!
//! - **Handshake and `BOOT`.** A `BOOT` never stands in for `INFO`: the driver needs the
//!   credits, payload limit and MAC that only `INFO` carries, and a dongle that rebooted may
//!   have come back with other firmware. So a `BOOT` during the handshake makes the driver say
//!   `HELLO` again at once (without waiting for the try's timeout; it still counts as a try, so
//!   a dongle stuck in a boot loop ends the attempt), and a `BOOT` in a running session
//!   re-runs the whole handshake on the open port, then channel, PMK and peers. Each `HELLO`
//!   is preceded by a lone `0x00`, so a dongle whose decoder holds half a frame of noise
//!   resynchronises before it.
//! - **Ready means set up.** [`DongleEvent::Connected`] is published once `SET_CHANNEL` (and
//!   `SET_PMK`, when configured) are acknowledged, not at `INFO`: before that, frames would go
//!   out on the wrong channel. `SEND`s are held until then. A failed `ADD_PEER` does not hold
//!   traffic back: it is logged and retried on its own, and unicasts to that peer fail meanwhile.
//!   After a mid-session `BOOT`, `Rebooted` is followed by a fresh `Connected` (with the new
//!   `INFO`) once the dongle is set up again.
//! - **The dongle's limits are its `INFO`'s.** Payloads up to `max_payload`, `tx_credits`
//!   `SEND`s in flight, and `ADD_PEER` for at most `max_peers` peers: a firmware reports the
//!   limits of the build it runs on (the MicroPython reference dongle has fewer encrypted peers
//!   than ESP-IDF allows, which it refuses with `PEER_TABLE_FULL`). A peer that finds no room
//!   is not asked for again until another leaves or the dongle restarts; frames to it go out
//!   as broadcast, which its node hears and keeps by the envelope's destination (ESP-8: the
//!   frame's tag, not the radio, authenticates it).
//! - **Sends while disconnected queue up** in the same bounded queue, under the same drop
//!   policy, and go out after the next handshake. Nothing is refused just for being
//!   disconnected: an election must survive a replug of a few seconds.
//! - **Lost credits.** A `TX_DONE` can be lost to line noise (ESP-1 drops bad frames), which
//!   would leak its credit forever; an accepted `SEND` without `TX_DONE` after
//!   [`DongleConfig::tx_done_timeout`] has its credit reclaimed and counted. A `RESP{NoCredit}`
//!   (host and dongle disagree on credits) puts the frame back at the head of the queue and
//!   pauses sending until a `TX_DONE` or a short delay, instead of hammering the dongle.
//! - **Every written `SEND` gets exactly one [`DongleEvent::TxDone`]**: from the dongle's
//!   `TX_DONE`, or `ok: false` when it was refused, timed out, or lost to a reboot or unplug.
//! - **A silent dongle.** When [`DongleConfig::handshake_tries`] requests in a row go
//!   unanswered while nothing at all arrives from the dongle, the session is declared lost and
//!   the port reopened, as after an unplug.
//! - **State events are never dropped.** `Connected`, `Disconnected`, `Refused` and
//!   `Rebooted` wait for room in the event channel (they are rare and the gateway's
//!   `dongle_connected` depends on them); data events (`Received`, `TxDone`, `Stats`, `Log`)
//!   are dropped and counted when the channel is full, so a slow consumer cannot stall the
//!   serial line.
//! - **A refused dongle** (another protocol major) is retried only every
//!   [`DongleConfig::reconnect_backoff_max`]: someone has to reflash it or update the gateway,
//!   and the retry notices when they did. A connected dongle that turns out to be refused
//!   (reflashed, then rebooted) gets `Disconnected` and then `Refused`.
//! - **Logs an operator can read.** A failure is logged once at warning level (refusal: error)
//!   and its repetitions at debug level, so an unplugged dongle does not fill the log every
//!   five seconds; the next success or a different failure is logged again.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, mpsc};
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_util::codec::Framed;
use tracing::{debug, error, info, trace, warn};

use crate::codec::{CodecStats, DongleCodec, Inbound};
use crate::frame::{DELIMITER, MAX_PAYLOAD, PROTOCOL_MAJOR, PROTOCOL_MINOR};
use crate::message::{Frame, Info, Mac, Message, ResetReason, Status};

/// Longest `SEND` payload any dongle of this protocol could take: the frame's payload limit
/// minus the destination MAC and the length field. Used before the first `INFO` says better.
const MAX_SEND_PAYLOAD: usize = MAX_PAYLOAD - 6 - 2;

/// How long sending pauses after a `RESP{NoCredit}` when no `TX_DONE` comes first.
const NO_CREDIT_PAUSE: Duration = Duration::from_millis(20);

/// How the driver connects and behaves. `Default` gives the values in each field's doc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DongleConfig {
    /// Name of the dongle in logs, errors and events: the serial port's path
    /// (`/dev/ttyACM0`) or any name a test or the demo gives it. Default `"dongle"`.
    pub label: String,
    /// Wi-Fi channel (1–14) the radio is set to after every handshake. Default 1.
    pub channel: u8,
    /// ESP-NOW primary master key, sent with `SET_PMK` after every handshake. Default none.
    pub pmk: Option<[u8; 16]>,
    /// Wait for `INFO` after each `HELLO`, and for the `RESP` to any other request.
    /// Default 500 ms.
    pub handshake_timeout: Duration,
    /// `HELLO`s sent before an attempt is given up (ESP-3: 5). Also the number of requests
    /// in a row that may go unanswered before a silent dongle is reconnected. Default 5.
    pub handshake_tries: u32,
    /// Wait for `TX_DONE` after a `SEND` was accepted before its credit is reclaimed.
    /// Default 1 s.
    pub tx_done_timeout: Duration,
    /// A write to the port that cannot finish within this is an I/O failure. Default 2 s.
    pub write_timeout: Duration,
    /// Frames waiting for a TX credit or for the dongle to come back (ESP-4). Default 64.
    pub queue_capacity: usize,
    /// Room in the event channel. Default 1024.
    pub event_capacity: usize,
    /// First delay before reopening the port; doubles at every failure. Default 100 ms.
    pub reconnect_backoff_min: Duration,
    /// Longest delay between two attempts, and the delay after a refused dongle. Default 5 s.
    pub reconnect_backoff_max: Duration,
}

impl Default for DongleConfig {
    fn default() -> Self {
        Self {
            label: "dongle".to_owned(),
            channel: 1,
            pmk: None,
            handshake_timeout: Duration::from_millis(500),
            handshake_tries: 5,
            tx_done_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(2),
            queue_capacity: 64,
            event_capacity: 1024,
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(5),
        }
    }
}

impl DongleConfig {
    /// The defaults with this label (the port's path) and channel.
    pub fn new(label: impl Into<String>, channel: u8) -> Self {
        Self {
            label: label.into(),
            channel,
            ..Self::default()
        }
    }

    /// Settings the driver cannot work with are raised to the smallest that work, rather than
    /// refused: a zero-sized queue or zero tries would only make the link silently useless.
    fn normalized(mut self) -> Self {
        self.handshake_tries = self.handshake_tries.max(1);
        self.queue_capacity = self.queue_capacity.max(1);
        self.event_capacity = self.event_capacity.max(1);
        self.reconnect_backoff_min = self.reconnect_backoff_min.max(Duration::from_millis(1));
        self.reconnect_backoff_max = self.reconnect_backoff_max.max(self.reconnect_backoff_min);
        self
    }
}

/// How much a frame matters when the send queue is full (ESP-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Priority {
    /// Superseded by the next one (heartbeats, pings): the oldest is dropped to make room.
    Droppable,
    /// Must not be lost once queued (votes, log entries): never dropped, refused when the
    /// queue holds nothing droppable.
    Essential,
}

/// What the driver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DongleEvent {
    /// The dongle answered the handshake and is set up; sends flow. `info.channel` is the
    /// configured channel. Published again after a reboot, once it is set up again.
    Connected(Info),
    /// A connected dongle was lost (EOF, I/O error, silence); the driver reconnects.
    Disconnected {
        /// What happened, for an operator.
        reason: String,
    },
    /// The dongle speaks another protocol major version: the link is down (preceded by
    /// `Disconnected` when it was connected); retried after the longest backoff.
    Refused {
        /// What is wrong and what to do.
        reason: String,
    },
    /// The dongle restarted in the middle of a session; the driver sets it up again.
    Rebooted {
        /// The dongle's reset reason.
        reason: String,
    },
    /// A frame heard over the air.
    Received {
        /// Sender.
        src: Mac,
        /// Destination: this dongle or broadcast.
        dst: Mac,
        /// Signal strength, dBm.
        rssi: i8,
        /// The frame.
        payload: Vec<u8>,
    },
    /// The outcome of one `SEND`.
    TxDone {
        /// Its destination.
        mac: Mac,
        /// Delivered (broadcast: always true when the radio sent it).
        ok: bool,
    },
    /// The dongle's counters since its boot.
    Stats {
        /// Frames heard but dropped by the dongle (host too slow).
        rx_dropped: u32,
        /// Frames to send dropped by the dongle.
        tx_dropped: u32,
        /// Host frames the dongle dropped for a bad CRC.
        crc_errors: u32,
    },
    /// A log line from the dongle.
    Log {
        /// 0 error, 1 warning, 2 info, 3 debug.
        level: u8,
        /// The text.
        text: String,
    },
}

/// A snapshot of the driver's state and counters (counters run since the driver started).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DongleStatus {
    /// A dongle is connected and set up.
    pub connected: bool,
    /// Its `INFO` (channel: the configured one) while connected.
    pub info: Option<Info>,
    /// `SEND`s that may still be written before a credit comes back.
    pub credits_free: u8,
    /// Frames waiting in the send queue.
    pub queue_len: usize,
    /// Droppable frames dropped from a full queue to make room.
    pub dropped_droppable: u64,
    /// Frames refused: queue full of essentials, or payload too large.
    pub refused: u64,
    /// `RX` frames received from the dongle.
    pub rx_frames: u64,
    /// `SEND` frames written to the dongle.
    pub tx_frames: u64,
    /// `SEND`s that failed: refused by the dongle, not delivered, timed out or lost.
    pub tx_failures: u64,
    /// Frames from the dongle dropped for a bad CRC.
    pub crc_errors: u64,
    /// Frames from the dongle dropped as malformed, oversize or of an unknown kind.
    pub malformed_frames: u64,
    /// Times a dongle was connected again after a connection was lost.
    pub reconnects: u64,
    /// Credits reclaimed from `SEND`s whose `TX_DONE` never came.
    pub credits_reclaimed: u64,
    /// Data events dropped because the event channel was full.
    pub events_dropped: u64,
    /// The last problem, until the next successful connection.
    pub last_error: Option<String>,
}

/// What goes wrong with a dongle. Each message names the dongle ([`DongleConfig::label`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DongleError {
    /// A payload longer than the radio can carry.
    #[error("dongle {label}: payload of {len} bytes is larger than the radio's limit of {max}")]
    PayloadTooLarge {
        /// The dongle.
        label: String,
        /// The payload's length.
        len: usize,
        /// The limit (`INFO.max_payload`).
        max: usize,
    },
    /// The send queue is full of essential frames.
    #[error("dongle {label}: send queue full ({capacity} frames, none droppable); frame refused")]
    QueueFull {
        /// The dongle.
        label: String,
        /// The queue's capacity.
        capacity: usize,
    },
    /// The driver task is gone (all handles dropped, or the runtime shut down).
    #[error("dongle {label}: the driver has stopped")]
    Stopped {
        /// The dongle.
        label: String,
    },
    /// The port could not be opened.
    #[error("dongle {label}: cannot open the port: {detail}")]
    Open {
        /// The dongle.
        label: String,
        /// Why.
        detail: String,
    },
    /// The connection broke: EOF, an I/O error, or a dongle that stopped answering.
    #[error("dongle {label} unplugged or unreachable: {detail}")]
    Lost {
        /// The dongle.
        label: String,
        /// Why.
        detail: String,
    },
    /// No `INFO` after every try of the handshake.
    #[error("dongle {label}: no answer to HELLO after {tries} tries")]
    NoAnswer {
        /// The dongle.
        label: String,
        /// `HELLO`s sent.
        tries: u32,
    },
    /// The dongle speaks another protocol major version.
    #[error(
        "dongle {label} speaks protocol {dongle_major}.x, this gateway {host_major}.x; \
         update the firmware or the gateway"
    )]
    Version {
        /// The dongle.
        label: String,
        /// The dongle's major.
        dongle_major: u8,
        /// Ours.
        host_major: u8,
    },
}

/// Starts the driver task of one dongle. `open` is called for every (re)connection and
/// yields the byte stream to the dongle ([`open_serial`](crate::open_serial) for a serial port, a
/// `tokio::io::duplex` end in tests). The task runs until every clone of the handle is
/// dropped.
///
/// # Panics
///
/// Outside a tokio runtime, like `tokio::spawn`.
pub fn spawn_dongle<O, F, S>(
    config: DongleConfig,
    open: O,
) -> (DongleHandle, mpsc::Receiver<DongleEvent>)
where
    O: FnMut() -> F + Send + 'static,
    F: Future<Output = io::Result<S>> + Send + 'static,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let config = config.normalized();
    let (events, events_rx) = mpsc::channel(config.event_capacity);
    // Handles hold senders of a channel nobody writes to: when the last one is dropped,
    // the driver's `recv` returns and the task ends, closing the port.
    let (alive, mut alive_rx) = mpsc::channel::<Infallible>(1);
    let shared = Arc::new(Shared {
        label: config.label.clone(),
        capacity: config.queue_capacity,
        state: Mutex::new(SharedState {
            max_payload: MAX_SEND_PAYLOAD,
            ..SharedState::default()
        }),
        wake: Notify::new(),
    });
    let driver = Driver {
        config,
        shared: Arc::clone(&shared),
        events,
        next_seq: 0,
        line: CodecStats::default(),
        connected_before: false,
    };
    let stop = StopOnDrop(Arc::clone(&shared));
    tokio::spawn(async move {
        let stop = stop;
        tokio::select! {
            _ = driver.run(open) => {}
            _ = alive_rx.recv() => {
                debug!("dongle {}: every handle dropped; the driver stops", stop.0.label);
            }
        }
    });
    (
        DongleHandle {
            shared,
            _alive: alive,
        },
        events_rx,
    )
}

/// The gateway's side of a running driver. Cheap to clone; every method returns at once.
#[derive(Clone)]
pub struct DongleHandle {
    shared: Arc<Shared>,
    _alive: mpsc::Sender<Infallible>,
}

impl fmt::Debug for DongleHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DongleHandle")
            .field("label", &self.shared.label)
            .finish_non_exhaustive()
    }
}

impl DongleHandle {
    /// Queues `payload` for `dst` ([`Mac::BROADCAST`] for everyone). When the queue is full,
    /// the oldest droppable frame makes room; with none, the frame is refused. A payload
    /// longer than the dongle's `max_payload` (before any handshake: the protocol's limit) is
    /// refused up front.
    pub fn send(&self, dst: Mac, payload: Vec<u8>, priority: Priority) -> Result<(), DongleError> {
        let shared = &self.shared;
        let mut state = shared.lock();
        if state.stopped {
            return Err(DongleError::Stopped {
                label: shared.label.clone(),
            });
        }
        if payload.len() > state.max_payload {
            state.status.refused += 1;
            return Err(DongleError::PayloadTooLarge {
                label: shared.label.clone(),
                len: payload.len(),
                max: state.max_payload,
            });
        }
        if state.queue.len() >= shared.capacity {
            match state
                .queue
                .iter()
                .position(|queued| queued.priority == Priority::Droppable)
            {
                Some(oldest) => {
                    let dropped = state.queue.remove(oldest);
                    state.status.dropped_droppable += 1;
                    debug!(
                        dst = ?dropped.map(|frame| frame.dst),
                        "dongle {}: send queue full, oldest droppable frame dropped", shared.label
                    );
                }
                None => {
                    state.status.refused += 1;
                    return Err(DongleError::QueueFull {
                        label: shared.label.clone(),
                        capacity: shared.capacity,
                    });
                }
            }
        }
        state.queue.push_back(Outgoing {
            dst,
            payload,
            priority,
        });
        drop(state);
        shared.wake.notify_one();
        Ok(())
    }

    /// Adds (or changes) a unicast peer. The driver keeps the list and sends `ADD_PEER` now
    /// when connected and after every handshake. `key` is the peer's LMK (zeros when not
    /// encrypting).
    pub fn add_peer(&self, mac: Mac, encrypt: bool, key: [u8; 16]) -> Result<(), DongleError> {
        self.change_peers(|peers| {
            peers.insert(mac, PeerConfig { encrypt, key });
        })
    }

    /// Removes a peer from the list, and from the dongle when connected.
    pub fn del_peer(&self, mac: Mac) -> Result<(), DongleError> {
        self.change_peers(|peers| {
            peers.remove(&mac);
        })
    }

    /// The peers the driver keeps on the dongle.
    pub fn peers(&self) -> Vec<Mac> {
        self.shared.lock().peers.keys().copied().collect()
    }

    /// A snapshot of state and counters.
    pub fn status(&self) -> DongleStatus {
        let state = self.shared.lock();
        DongleStatus {
            queue_len: state.queue.len(),
            ..state.status.clone()
        }
    }

    fn change_peers(
        &self,
        change: impl FnOnce(&mut BTreeMap<Mac, PeerConfig>),
    ) -> Result<(), DongleError> {
        let mut state = self.shared.lock();
        if state.stopped {
            return Err(DongleError::Stopped {
                label: self.shared.label.clone(),
            });
        }
        change(&mut state.peers);
        state.peers_generation += 1;
        drop(state);
        self.shared.wake.notify_one();
        Ok(())
    }
}

/// What handles and driver share. A plain mutex: every critical section is a few field
/// updates, and `send` must work from synchronous code.
struct Shared {
    label: String,
    capacity: usize,
    state: Mutex<SharedState>,
    /// Wakes the driver when the queue or the peer list changed.
    wake: Notify,
}

#[derive(Default)]
struct SharedState {
    queue: VecDeque<Outgoing>,
    peers: BTreeMap<Mac, PeerConfig>,
    /// Bumped at every peer list change, so the driver compares only when something changed.
    peers_generation: u64,
    status: DongleStatus,
    /// The current (or last known) dongle's `max_payload`.
    max_payload: usize,
    stopped: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, SharedState> {
        // A panic elsewhere while holding the lock leaves plain counters behind: still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn status(&self, update: impl FnOnce(&mut DongleStatus)) {
        update(&mut self.lock().status);
    }
}

/// Marks the driver stopped however its task ends (handles dropped, runtime shut down).
struct StopOnDrop(Arc<Shared>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.stopped = true;
        state.status.connected = false;
        state.status.info = None;
    }
}

struct Outgoing {
    dst: Mac,
    payload: Vec<u8>,
    priority: Priority,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PeerConfig {
    encrypt: bool,
    key: [u8; 16],
}

/// The reconnect loop and what outlives one connection.
struct Driver {
    config: DongleConfig,
    shared: Arc<Shared>,
    events: mpsc::Sender<DongleEvent>,
    next_seq: u16,
    /// Codec counters of the connections already closed.
    line: CodecStats,
    /// Some session reached `Connected` before: the next one is a reconnect.
    connected_before: bool,
}

impl Driver {
    async fn run<O, F, S>(mut self, mut open: O) -> Infallible
    where
        O: FnMut() -> F,
        F: Future<Output = io::Result<S>>,
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let label = self.shared.label.clone();
        let mut backoff = self.config.reconnect_backoff_min;
        loop {
            let (end, announced) = match open().await {
                Err(err) => {
                    // `open_serial` already names the path; say it once.
                    let detail = err.to_string();
                    let detail = detail
                        .strip_prefix(&format!("{label}: "))
                        .map_or_else(|| detail.clone(), str::to_owned);
                    (
                        DongleError::Open {
                            label: label.clone(),
                            detail,
                        },
                        false,
                    )
                }
                Ok(stream) => {
                    debug!("dongle {label}: port open, starting the handshake");
                    let mut session = Session::new(&mut self, stream);
                    let end = session.run().await;
                    let (handshaken, announced) = session.close();
                    if handshaken {
                        backoff = self.config.reconnect_backoff_min;
                    }
                    (end, announced)
                }
            };
            let refused = matches!(end, DongleError::Version { .. });
            // A refused dongle will not change by itself: no point knocking often.
            let delay = if refused {
                self.config.reconnect_backoff_max
            } else {
                backoff
            };
            let reason = end.to_string();
            let repeated = {
                let mut state = self.shared.lock();
                let status = &mut state.status;
                status.connected = false;
                status.info = None;
                status.credits_free = 0;
                let repeated = status.last_error.as_deref() == Some(reason.as_str());
                status.last_error = Some(reason.clone());
                repeated
            };
            // An unplugged dongle fails the same way every few seconds: tell the operator
            // once, and again when something changes.
            if repeated {
                debug!("{reason}; retrying in {delay:?}");
            } else if refused {
                error!("{reason}; retrying in {delay:?}");
            } else {
                warn!("{reason}; retrying in {delay:?}");
            }
            if announced {
                self.emit_state(DongleEvent::Disconnected {
                    reason: reason.clone(),
                })
                .await;
            }
            if refused {
                self.emit_state(DongleEvent::Refused { reason }).await;
            }
            sleep(delay).await;
            backoff = (backoff * 2).min(self.config.reconnect_backoff_max);
        }
    }

    fn next_seq(&mut self) -> u16 {
        self.next_seq = self.next_seq.wrapping_add(1);
        self.next_seq
    }

    /// State events wait for room: losing `Disconnected` would leave `dongle_connected` wrong.
    async fn emit_state(&self, event: DongleEvent) {
        // An error means nobody listens any more; the driver still serves the handles.
        let _ = self.events.send(event).await;
    }

    /// Data events are dropped when the consumer is behind, so the serial line never waits.
    fn emit_data(&self, event: DongleEvent) {
        match self.events.try_send(event) {
            Ok(()) | Err(TrySendError::Closed(_)) => {}
            Err(TrySendError::Full(event)) => {
                let mut state = self.shared.lock();
                state.status.events_dropped += 1;
                let dropped = state.status.events_dropped;
                drop(state);
                // Logged at powers of two so a stuck consumer does not flood the log.
                if dropped.is_power_of_two() {
                    warn!(
                        dropped,
                        "dongle {}: event channel full, {} event dropped",
                        self.shared.label,
                        event_name(&event)
                    );
                }
            }
        }
    }
}

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `HELLO` number `tries` sent with `seq`; waiting for its `INFO` until `deadline`.
    Handshake {
        seq: u16,
        tries: u32,
        deadline: Instant,
    },
    /// `INFO` received; channel (and PMK) not yet acknowledged.
    Setup,
    /// Set up: `SEND`s flow.
    Ready,
}

/// A request written to the dongle and not yet fully answered.
struct Pending {
    request: Request,
    deadline: Instant,
}

enum Request {
    Setup(SetupItem),
    Send {
        dst: Mac,
        priority: Priority,
        /// Kept until the `RESP`, so that a `NoCredit` can put the frame back in the queue.
        payload: Vec<u8>,
        /// `RESP{Ok}` received: now waiting for `TX_DONE`.
        accepted: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetupItem {
    Channel(u8),
    Pmk,
    AddPeer(Mac, PeerConfig),
    DelPeer(Mac),
}

/// What a setup request changes on the dongle; at most one request per target is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Channel,
    Pmk,
    Peer(Mac),
}

impl SetupItem {
    fn target(self) -> Target {
        match self {
            SetupItem::Channel(_) => Target::Channel,
            SetupItem::Pmk => Target::Pmk,
            SetupItem::AddPeer(mac, _) | SetupItem::DelPeer(mac) => Target::Peer(mac),
        }
    }
}

impl fmt::Display for SetupItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupItem::Channel(channel) => write!(f, "SET_CHANNEL {channel}"),
            SetupItem::Pmk => f.write_str("SET_PMK"),
            SetupItem::AddPeer(mac, _) => write!(f, "ADD_PEER {mac}"),
            SetupItem::DelPeer(mac) => write!(f, "DEL_PEER {mac}"),
        }
    }
}

/// What the dongle has acknowledged since its last boot.
#[derive(Default)]
struct Applied {
    channel: bool,
    pmk: bool,
    peers: BTreeMap<Mac, PeerConfig>,
}

/// One open connection: handshake, setup, traffic, until it breaks.
struct Session<'d, S> {
    driver: &'d mut Driver,
    framed: Framed<S, DongleCodec>,
    phase: Phase,
    info: Option<Info>,
    pending: HashMap<u16, Pending>,
    applied: Applied,
    /// Setup targets that failed, left alone until `retry_at`.
    failed: BTreeSet<Target>,
    /// Peers the host wants that the dongle has no room for: beyond `INFO.max_peers`, or
    /// refused `PEER_TABLE_FULL` (a build's limit of encrypted peers, which `INFO` does not
    /// carry). Frames to them go out as broadcast until room frees up.
    overflow: BTreeSet<Mac>,
    retry_at: Option<Instant>,
    retry_backoff: Duration,
    /// The desired state changed (peers, an answer, a retry): compare and send what differs.
    dirty: bool,
    peers_generation: u64,
    /// After `RESP{NoCredit}`: no `SEND` until then (or the next `TX_DONE`).
    paused_until: Option<Instant>,
    /// Requests unanswered in a row while nothing arrived at all.
    silent: u32,
    /// An `INFO` was accepted on this connection.
    handshaken: bool,
    /// `Connected` was published on this connection.
    announced: bool,
}

impl<'d, S> Session<'d, S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    fn new(driver: &'d mut Driver, stream: S) -> Self {
        let retry_backoff = driver.config.reconnect_backoff_min;
        Self {
            driver,
            framed: Framed::new(stream, DongleCodec::new()),
            phase: Phase::Setup,
            info: None,
            pending: HashMap::new(),
            applied: Applied::default(),
            failed: BTreeSet::new(),
            overflow: BTreeSet::new(),
            retry_at: None,
            retry_backoff,
            dirty: true,
            peers_generation: 0,
            paused_until: None,
            silent: 0,
            handshaken: false,
            announced: false,
        }
    }

    fn label(&self) -> &str {
        &self.driver.shared.label
    }

    async fn run(&mut self) -> DongleError {
        match self.drive().await {
            Ok(never) => match never {},
            Err(end) => end,
        }
    }

    async fn drive(&mut self) -> Result<Infallible, DongleError> {
        self.start_handshake(0).await?;
        let shared = Arc::clone(&self.driver.shared);
        loop {
            self.reconcile().await?;
            self.pump().await?;
            self.publish();
            let deadline = self.next_deadline();
            tokio::select! {
                inbound = self.framed.next() => match inbound {
                    None => return Err(self.lost("end of file on the port".to_owned())),
                    Some(Err(err)) => return Err(self.lost(format!("read error: {err}"))),
                    Some(Ok(inbound)) => {
                        self.silent = 0;
                        self.on_inbound(inbound).await?;
                    }
                },
                () = shared.wake.notified() => {}
                () = wait_until(deadline) => self.on_timers().await?,
            }
        }
    }

    /// Ends the session: `SEND`s in flight are lost with the connection, their credits with
    /// them. Returns whether a handshake succeeded and whether `Connected` was published.
    fn close(mut self) -> (bool, bool) {
        self.fail_sends_in_flight("the connection closed");
        let stats = self.framed.codec().stats();
        let line = &mut self.driver.line;
        line.frames += stats.frames;
        line.crc_errors += stats.crc_errors;
        line.malformed += stats.malformed;
        line.unknown_kind += stats.unknown_kind;
        line.oversize += stats.oversize;
        (self.handshaken, self.announced)
    }

    fn lost(&self, detail: String) -> DongleError {
        DongleError::Lost {
            label: self.label().to_owned(),
            detail,
        }
    }

    fn version_error(&self, dongle_major: u8) -> DongleError {
        DongleError::Version {
            label: self.label().to_owned(),
            dongle_major,
            host_major: PROTOCOL_MAJOR,
        }
    }

    /// Sends `HELLO` number `previous_tries + 1`, after a lone delimiter that ends whatever
    /// half frame the dongle's decoder may hold.
    async fn start_handshake(&mut self, previous_tries: u32) -> Result<(), DongleError> {
        let tries = previous_tries + 1;
        let seq = self.driver.next_seq();
        let hello = Frame::new(
            seq,
            Message::Hello {
                major: PROTOCOL_MAJOR,
                minor: PROTOCOL_MINOR,
            },
        );
        debug!(
            "dongle {}: HELLO, try {tries} of {}",
            self.label(),
            self.driver.config.handshake_tries
        );
        let framed = &mut self.framed;
        let written = timeout(self.driver.config.write_timeout, async {
            framed.get_mut().write_all(&[DELIMITER]).await?;
            framed.get_mut().flush().await?;
            framed.send(hello).await
        })
        .await;
        self.check_written(written)?;
        self.phase = Phase::Handshake {
            seq,
            tries,
            deadline: Instant::now() + self.driver.config.handshake_timeout,
        };
        Ok(())
    }

    /// Another try, or the end of the attempt when every try is used.
    async fn retry_handshake(&mut self, tries: u32) -> Result<(), DongleError> {
        if tries >= self.driver.config.handshake_tries {
            return Err(DongleError::NoAnswer {
                label: self.label().to_owned(),
                tries,
            });
        }
        self.start_handshake(tries).await
    }

    fn check_written(
        &self,
        written: Result<io::Result<()>, tokio::time::error::Elapsed>,
    ) -> Result<(), DongleError> {
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(self.lost(format!("write error: {err}"))),
            Err(_) => Err(self.lost(format!(
                "a write did not finish within {:?}",
                self.driver.config.write_timeout
            ))),
        }
    }

    async fn write(&mut self, frames: Vec<Frame>) -> Result<(), DongleError> {
        if frames.is_empty() {
            return Ok(());
        }
        let framed = &mut self.framed;
        let written = timeout(self.driver.config.write_timeout, async {
            for frame in frames {
                framed.feed(frame).await?;
            }
            framed.flush().await
        })
        .await;
        self.check_written(written)
    }

    async fn on_inbound(&mut self, inbound: Inbound) -> Result<(), DongleError> {
        let frame = match inbound {
            // Whatever it says, its layout may differ from ours: refuse rather than guess.
            Inbound::OtherVersion(raw) => return Err(self.version_error(raw.version)),
            Inbound::Frame(frame) => frame,
        };
        let Phase::Handshake { seq, tries, .. } = self.phase else {
            return self.on_message(frame).await;
        };
        match frame.message {
            Message::Info(info) if frame.seq == seq => self.on_info(info),
            Message::Boot { major, .. } if major != PROTOCOL_MAJOR => {
                Err(self.version_error(major))
            }
            Message::Boot { reason, .. } => {
                info!(
                    "dongle {} booted ({}) during the handshake; saying HELLO again",
                    self.label(),
                    describe_reset(reason)
                );
                self.retry_handshake(tries).await
            }
            other => {
                // ESP-3: everything before the INFO is ignored (stale answers, RX, logs).
                trace!(
                    "dongle {}: {} ignored during the handshake",
                    self.label(),
                    other.name()
                );
                Ok(())
            }
        }
    }

    fn on_info(&mut self, info: Info) -> Result<(), DongleError> {
        if info.protocol_major != PROTOCOL_MAJOR {
            return Err(self.version_error(info.protocol_major));
        }
        if info.protocol_minor != PROTOCOL_MINOR {
            info!(
                "dongle {} speaks protocol {}.{}, this gateway {}.{}: compatible",
                self.label(),
                info.protocol_major,
                info.protocol_minor,
                PROTOCOL_MAJOR,
                PROTOCOL_MINOR
            );
        }
        if info.tx_credits == 0 {
            warn!(
                "dongle {} reports no TX credits: nothing can be sent through it",
                self.label()
            );
        }
        debug!(?info, "dongle {}: handshake done", self.label());
        self.driver.shared.lock().max_payload = usize::from(info.max_payload);
        self.info = Some(info);
        self.handshaken = true;
        self.phase = Phase::Setup;
        self.applied = Applied::default();
        self.failed.clear();
        self.overflow.clear();
        self.retry_at = None;
        self.retry_backoff = self.driver.config.reconnect_backoff_min;
        self.dirty = true;
        Ok(())
    }

    async fn on_message(&mut self, frame: Frame) -> Result<(), DongleError> {
        match frame.message {
            Message::Resp { status } => self.on_resp(frame.seq, status).await,
            Message::TxDone { send_seq, mac, ok } => {
                self.on_tx_done(send_seq, mac, ok);
                Ok(())
            }
            Message::Rx {
                src,
                dst,
                rssi,
                payload,
                ..
            } => {
                self.driver.shared.status(|status| status.rx_frames += 1);
                self.driver.emit_data(DongleEvent::Received {
                    src,
                    dst,
                    rssi,
                    payload,
                });
                Ok(())
            }
            Message::Boot { major, .. } if major != PROTOCOL_MAJOR => {
                Err(self.version_error(major))
            }
            Message::Boot { reason, .. } => self.on_reboot(reason).await,
            Message::Stats {
                rx_dropped,
                tx_dropped,
                crc_errors,
            } => {
                self.driver.emit_data(DongleEvent::Stats {
                    rx_dropped,
                    tx_dropped,
                    crc_errors,
                });
                Ok(())
            }
            Message::Log { level, text } => {
                let label = self.label();
                match level {
                    0 => error!("dongle {label} says: {text}"),
                    1 => warn!("dongle {label} says: {text}"),
                    2 => info!("dongle {label} says: {text}"),
                    _ => debug!("dongle {label} says: {text}"),
                }
                self.driver.emit_data(DongleEvent::Log { level, text });
                Ok(())
            }
            other => {
                // A late INFO, or a host command echoed back: nothing to act on.
                debug!(
                    "dongle {}: unexpected {} (seq {}) ignored",
                    self.label(),
                    other.name(),
                    frame.seq
                );
                Ok(())
            }
        }
    }

    async fn on_resp(&mut self, seq: u16, status: Status) -> Result<(), DongleError> {
        if status == Status::Ok {
            if let Some(Pending {
                request: Request::Send {
                    accepted, payload, ..
                },
                deadline,
            }) = self.pending.get_mut(&seq)
            {
                if !*accepted {
                    // Accepted: the credit stays taken until TX_DONE; the frame is no longer
                    // needed for a requeue.
                    *accepted = true;
                    *payload = Vec::new();
                    *deadline = Instant::now() + self.driver.config.tx_done_timeout;
                }
                return Ok(());
            }
        }
        let Some(pending) = self.pending.remove(&seq) else {
            debug!(
                "dongle {}: RESP for unknown seq {seq} ignored",
                self.label()
            );
            return Ok(());
        };
        match pending.request {
            Request::Send {
                dst,
                priority,
                payload,
                accepted,
            } => {
                self.on_send_refused(dst, priority, payload, accepted, status);
                Ok(())
            }
            Request::Setup(item) => self.on_setup_answer(item, status).await,
        }
    }

    /// A non-OK `RESP` to a `SEND`: its credit is back (ESP-4).
    fn on_send_refused(
        &mut self,
        dst: Mac,
        priority: Priority,
        payload: Vec<u8>,
        accepted: bool,
        status: Status,
    ) {
        if status == Status::NoCredit && !accepted {
            // The dongle counts fewer free credits than we do; it keeps the frame's place.
            debug!(
                "dongle {}: SEND to {dst} refused for lack of credit; requeued",
                self.label()
            );
            self.driver.shared.lock().queue.push_front(Outgoing {
                dst,
                payload,
                priority,
            });
            self.paused_until = Some(Instant::now() + NO_CREDIT_PAUSE);
            return;
        }
        warn!(
            "dongle {}: SEND to {dst} refused: {}",
            self.label(),
            describe_status(status)
        );
        self.driver.shared.status(|status| status.tx_failures += 1);
        self.driver.emit_data(DongleEvent::TxDone {
            mac: dst,
            ok: false,
        });
    }

    fn on_tx_done(&mut self, send_seq: u16, mac: Mac, ok: bool) {
        let is_send = matches!(
            self.pending.get(&send_seq),
            Some(Pending {
                request: Request::Send { .. },
                ..
            })
        );
        if !is_send {
            // Its credit was reclaimed after a timeout, or it belongs to a forgotten session.
            debug!(
                "dongle {}: TX_DONE for unknown SEND {send_seq} ignored",
                self.label()
            );
            return;
        }
        self.pending.remove(&send_seq);
        // A credit came back: the dongle has room again.
        self.paused_until = None;
        if !ok {
            self.driver.shared.status(|status| status.tx_failures += 1);
        }
        self.driver.emit_data(DongleEvent::TxDone { mac, ok });
    }

    async fn on_reboot(&mut self, reason: ResetReason) -> Result<(), DongleError> {
        let reason = describe_reset(reason);
        warn!(
            "dongle {} rebooted ({reason}); it forgot channel, peers and keys: setting them up again",
            self.label()
        );
        self.fail_sends_in_flight("the dongle rebooted");
        self.pending.clear();
        self.applied = Applied::default();
        self.failed.clear();
        self.overflow.clear();
        self.retry_at = None;
        self.paused_until = None;
        self.info = None;
        self.driver.shared.status(|status| {
            status.connected = false;
            status.info = None;
        });
        let reason = format!("dongle {} rebooted: {reason}", self.label());
        self.driver
            .emit_state(DongleEvent::Rebooted { reason })
            .await;
        self.start_handshake(0).await
    }

    async fn on_setup_answer(
        &mut self,
        item: SetupItem,
        status: Status,
    ) -> Result<(), DongleError> {
        self.dirty = true;
        let done = status == Status::Ok
            || (matches!(item, SetupItem::DelPeer(_)) && status == Status::UnknownPeer);
        if let (SetupItem::AddPeer(mac, _), Status::PeerTableFull) = (item, status) {
            // Asking again would be refused again until a peer leaves: reach it by broadcast.
            self.no_room_for(mac, "the dongle's peer table is full");
            return Ok(());
        }
        if !done {
            self.setup_failed(
                item.target(),
                format!("{item} refused: {}", describe_status(status)),
            );
            return Ok(());
        }
        match item {
            SetupItem::Channel(_) => self.applied.channel = true,
            SetupItem::Pmk => self.applied.pmk = true,
            SetupItem::AddPeer(mac, config) => {
                self.applied.peers.insert(mac, config);
            }
            SetupItem::DelPeer(mac) => {
                self.applied.peers.remove(&mac);
                // Room for a peer that had none: the next pass offers it again.
                self.overflow.clear();
            }
        }
        if self.failed.is_empty() {
            self.retry_backoff = self.driver.config.reconnect_backoff_min;
        }
        if self.phase == Phase::Setup
            && self.applied.channel
            && (self.applied.pmk || self.driver.config.pmk.is_none())
        {
            self.become_ready().await;
        }
        Ok(())
    }

    /// A peer the dongle cannot hold (`INFO.max_peers` reached, or `PEER_TABLE_FULL`): its
    /// unicasts go out as broadcast, which every node hears and filters by the envelope's
    /// destination, so the frames still arrive, unacknowledged and unencrypted by the radio
    /// (ESP-8: conclave's own tag authenticates them).
    fn no_room_for(&mut self, mac: Mac, why: &str) {
        if self.overflow.insert(mac) {
            info!(
                "dongle {}: no room for peer {mac} ({why}); frames to it go out as broadcast",
                self.label()
            );
        }
    }

    fn setup_failed(&mut self, target: Target, what: String) {
        let delay = self.retry_at.map_or(self.retry_backoff, |at| {
            at.saturating_duration_since(Instant::now())
        });
        warn!("dongle {}: {what}; retrying in {delay:?}", self.label());
        let last_error = format!("dongle {}: {what}", self.label());
        self.driver
            .shared
            .status(|status| status.last_error = Some(last_error));
        self.failed.insert(target);
        if self.retry_at.is_none() {
            self.retry_at = Some(Instant::now() + self.retry_backoff);
            self.retry_backoff =
                (self.retry_backoff * 2).min(self.driver.config.reconnect_backoff_max);
        }
    }

    async fn become_ready(&mut self) {
        let Some(info) = self.info.as_mut() else {
            return;
        };
        info.channel = self.driver.config.channel;
        let info = info.clone();
        self.phase = Phase::Ready;
        info!(
            "dongle {} connected: firmware {}, mac {}, channel {}, {} credits, \
             payloads up to {} bytes, protocol {}.{}",
            self.label(),
            info.firmware,
            info.mac,
            info.channel,
            info.tx_credits,
            info.max_payload,
            info.protocol_major,
            info.protocol_minor
        );
        // A reboot inside this session is not a reconnect.
        let reconnect = !self.announced && self.driver.connected_before;
        self.driver.connected_before = true;
        self.announced = true;
        let snapshot = info.clone();
        self.driver.shared.status(|status| {
            status.connected = true;
            status.info = Some(snapshot);
            status.last_error = None;
            if reconnect {
                status.reconnects += 1;
            }
        });
        self.driver.emit_state(DongleEvent::Connected(info)).await;
    }

    /// Sends whatever setup request the dongle lacks: channel, PMK, and the difference
    /// between the host's peer list and what the dongle acknowledged. Level-triggered, so a
    /// peer changed while its request was in flight is corrected by the next pass.
    async fn reconcile(&mut self) -> Result<(), DongleError> {
        if matches!(self.phase, Phase::Handshake { .. }) {
            return Ok(());
        }
        let (generation, desired) = {
            let state = self.driver.shared.lock();
            if !self.dirty && state.peers_generation == self.peers_generation {
                return Ok(());
            }
            (state.peers_generation, state.peers.clone())
        };
        self.peers_generation = generation;
        self.dirty = false;
        let mut items = Vec::new();
        if !self.applied.channel {
            items.push(SetupItem::Channel(self.driver.config.channel));
        }
        if self.driver.config.pmk.is_some() && !self.applied.pmk {
            items.push(SetupItem::Pmk);
        }
        let in_flight: BTreeSet<Target> = self
            .pending
            .values()
            .filter_map(|pending| match pending.request {
                Request::Setup(item) => Some(item.target()),
                Request::Send { .. } => None,
            })
            .collect();
        // INFO.max_peers is the most this dongle holds: peers it has, or is being given.
        let max_peers = self
            .info
            .as_ref()
            .map_or(usize::MAX, |info| usize::from(info.max_peers));
        let mut holding = self.applied.peers.len()
            + in_flight
                .iter()
                .filter(|target| match target {
                    Target::Peer(mac) => {
                        desired.contains_key(mac) && !self.applied.peers.contains_key(mac)
                    }
                    Target::Channel | Target::Pmk => false,
                })
                .count();
        self.overflow.retain(|mac| desired.contains_key(mac));
        let macs: BTreeSet<Mac> = desired
            .keys()
            .chain(self.applied.peers.keys())
            .copied()
            .collect();
        for mac in macs {
            match (desired.get(&mac), self.applied.peers.get(&mac)) {
                (Some(want), None) => {
                    if in_flight.contains(&Target::Peer(mac)) || self.overflow.contains(&mac) {
                        continue;
                    }
                    if holding >= max_peers {
                        self.no_room_for(mac, &format!("it holds {max_peers} peers"));
                        continue;
                    }
                    holding += 1;
                    items.push(SetupItem::AddPeer(mac, *want));
                }
                (Some(want), Some(have)) if have != want => {
                    items.push(SetupItem::AddPeer(mac, *want));
                }
                (None, Some(_)) => items.push(SetupItem::DelPeer(mac)),
                _ => {}
            }
        }
        let deadline = Instant::now() + self.driver.config.handshake_timeout;
        let mut frames = Vec::new();
        for item in items {
            let target = item.target();
            if in_flight.contains(&target) || self.failed.contains(&target) {
                continue;
            }
            let message = match item {
                SetupItem::Channel(channel) => Message::SetChannel { channel },
                SetupItem::Pmk => match self.driver.config.pmk {
                    Some(pmk) => Message::SetPmk { pmk },
                    None => continue,
                },
                SetupItem::AddPeer(mac, config) => Message::AddPeer {
                    mac,
                    channel: 0,
                    encrypt: config.encrypt,
                    key: config.key,
                },
                SetupItem::DelPeer(mac) => Message::DelPeer { mac },
            };
            let seq = self.driver.next_seq();
            debug!("dongle {}: {item}", self.label());
            self.pending.insert(
                seq,
                Pending {
                    request: Request::Setup(item),
                    deadline,
                },
            );
            frames.push(Frame::new(seq, message));
        }
        self.write(frames).await
    }

    fn sends_in_flight(&self) -> usize {
        self.pending
            .values()
            .filter(|pending| matches!(pending.request, Request::Send { .. }))
            .count()
    }

    fn credits_free(&self) -> usize {
        let credits = self
            .info
            .as_ref()
            .map_or(0, |info| usize::from(info.tx_credits));
        credits.saturating_sub(self.sends_in_flight())
    }

    /// Writes queued frames while credits last (ESP-4).
    async fn pump(&mut self) -> Result<(), DongleError> {
        if self.phase != Phase::Ready || self.paused_until.is_some() {
            return Ok(());
        }
        let Some(max_payload) = self.info.as_ref().map(|info| usize::from(info.max_payload)) else {
            return Ok(());
        };
        let mut free = self.credits_free();
        let deadline = Instant::now() + self.driver.config.handshake_timeout;
        let mut frames = Vec::new();
        while free > 0 {
            let Some(out) = self.driver.shared.lock().queue.pop_front() else {
                break;
            };
            if out.payload.len() > max_payload {
                // Queued before this dongle said how much it takes (or for a bigger one).
                warn!(
                    "dongle {}: frame of {} bytes to {} dropped: the radio takes at most {max_payload}",
                    self.label(),
                    out.payload.len(),
                    out.dst
                );
                self.driver.shared.status(|status| status.refused += 1);
                continue;
            }
            let seq = self.driver.next_seq();
            let wire_dst = if self.overflow.contains(&out.dst) {
                Mac::BROADCAST
            } else {
                out.dst
            };
            frames.push(Frame::new(
                seq,
                Message::Send {
                    dst: wire_dst,
                    payload: out.payload.clone(),
                },
            ));
            self.pending.insert(
                seq,
                Pending {
                    request: Request::Send {
                        dst: out.dst,
                        priority: out.priority,
                        payload: out.payload,
                        accepted: false,
                    },
                    deadline,
                },
            );
            free -= 1;
        }
        let written = frames.len() as u64;
        self.write(frames).await?;
        if written > 0 {
            self.driver
                .shared
                .status(|status| status.tx_frames += written);
        }
        Ok(())
    }

    async fn on_timers(&mut self) -> Result<(), DongleError> {
        let now = Instant::now();
        if let Phase::Handshake {
            tries, deadline, ..
        } = self.phase
        {
            if deadline <= now {
                debug!("dongle {}: no INFO after HELLO try {tries}", self.label());
                self.retry_handshake(tries).await?;
            }
            return Ok(());
        }
        let mut expired: Vec<u16> = self
            .pending
            .iter()
            .filter(|(_, pending)| pending.deadline <= now)
            .map(|(seq, _)| *seq)
            .collect();
        expired.sort_unstable();
        for seq in expired {
            let Some(pending) = self.pending.remove(&seq) else {
                continue;
            };
            match pending.request {
                Request::Send {
                    dst,
                    accepted: false,
                    ..
                } => {
                    self.silent += 1;
                    warn!("dongle {}: no answer to SEND {seq} to {dst}", self.label());
                    self.driver.shared.status(|status| status.tx_failures += 1);
                    self.driver.emit_data(DongleEvent::TxDone {
                        mac: dst,
                        ok: false,
                    });
                }
                Request::Send { dst, .. } => {
                    warn!(
                        "dongle {}: no TX_DONE for SEND {seq} to {dst}; its credit is reclaimed",
                        self.label()
                    );
                    self.driver.shared.status(|status| {
                        status.tx_failures += 1;
                        status.credits_reclaimed += 1;
                    });
                    self.driver.emit_data(DongleEvent::TxDone {
                        mac: dst,
                        ok: false,
                    });
                }
                Request::Setup(item) => {
                    self.silent += 1;
                    self.setup_failed(item.target(), format!("no answer to {item}"));
                }
            }
        }
        if self.silent >= self.driver.config.handshake_tries {
            return Err(self.lost(format!("{} requests in a row went unanswered", self.silent)));
        }
        if self.retry_at.is_some_and(|at| at <= now) {
            self.retry_at = None;
            self.failed.clear();
            self.dirty = true;
        }
        if self.paused_until.is_some_and(|at| at <= now) {
            self.paused_until = None;
        }
        Ok(())
    }

    fn next_deadline(&self) -> Option<Instant> {
        let handshake = match self.phase {
            Phase::Handshake { deadline, .. } => Some(deadline),
            Phase::Setup | Phase::Ready => None,
        };
        self.pending
            .values()
            .map(|pending| pending.deadline)
            .chain(handshake)
            .chain(self.retry_at)
            .chain(self.paused_until)
            .min()
    }

    /// Loses the `SEND`s in flight (reboot, unplug): each gets its failed `TxDone`.
    fn fail_sends_in_flight(&mut self, why: &str) {
        let mut lost = Vec::new();
        self.pending.retain(|_, pending| match pending.request {
            Request::Send { dst, .. } => {
                lost.push(dst);
                false
            }
            Request::Setup(_) => true,
        });
        if lost.is_empty() {
            return;
        }
        debug!(
            "dongle {}: {} SEND(s) in flight lost: {why}",
            self.label(),
            lost.len()
        );
        self.driver
            .shared
            .status(|status| status.tx_failures += lost.len() as u64);
        for mac in lost {
            self.driver
                .emit_data(DongleEvent::TxDone { mac, ok: false });
        }
    }

    /// Copies the counters only the session knows into the shared status.
    fn publish(&self) {
        let codec = self.framed.codec().stats();
        let line = self.driver.line;
        let credits_free = if self.phase == Phase::Ready {
            u8::try_from(self.credits_free()).unwrap_or(u8::MAX)
        } else {
            0
        };
        self.driver.shared.status(|status| {
            status.crc_errors = line.crc_errors + codec.crc_errors;
            status.malformed_frames = line.malformed
                + line.unknown_kind
                + line.oversize
                + codec.malformed
                + codec.unknown_kind
                + codec.oversize;
            status.credits_free = credits_free;
        });
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn wait_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn describe_reset(reason: ResetReason) -> String {
    match reason {
        ResetReason::PowerOn => "power-on".to_owned(),
        ResetReason::HostRequest => "reset requested by the host".to_owned(),
        ResetReason::Watchdog => "watchdog".to_owned(),
        ResetReason::Crash => "crash".to_owned(),
        ResetReason::BrownOut => "brown-out".to_owned(),
        ResetReason::Other(code) => format!("reset reason {code}"),
    }
}

fn describe_status(status: Status) -> String {
    match status {
        Status::Ok => "ok".to_owned(),
        Status::UnknownKind => "unknown message kind".to_owned(),
        Status::Malformed => "malformed request".to_owned(),
        Status::BadArgument => "bad argument".to_owned(),
        Status::NoCredit => "no TX credit".to_owned(),
        Status::PeerTableFull => "peer table full".to_owned(),
        Status::UnknownPeer => "unknown peer".to_owned(),
        Status::PayloadTooLarge => "payload too large".to_owned(),
        Status::RadioError => "radio error".to_owned(),
        Status::Other(code) => format!("status {code}"),
    }
}

fn event_name(event: &DongleEvent) -> &'static str {
    match event {
        DongleEvent::Connected(_) => "connected",
        DongleEvent::Disconnected { .. } => "disconnected",
        DongleEvent::Refused { .. } => "refused",
        DongleEvent::Rebooted { .. } => "rebooted",
        DongleEvent::Received { .. } => "received",
        DongleEvent::TxDone { .. } => "tx_done",
        DongleEvent::Stats { .. } => "stats",
        DongleEvent::Log { .. } => "log",
    }
}
