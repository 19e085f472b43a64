//! The dongle side of the serial protocol, in software (ESP-7 over ESP-1..5).
//!
//! A [`VirtualDongle`] answers a host over any `AsyncRead + AsyncWrite` (a tokio duplex in
//! logic tests, a pseudo-terminal in [`crate::pty`]) as the firmware of a USB ESP32 dongle
//! does, and transmits and hears frames on a simulated [`Air`]:
//!
//! - start-up (ESP-3): `BOOT{PowerOn}` when it starts (unless told to start silent), `INFO`
//!   for `HELLO` with the same seq; after `RESET` (answered `RESP{Ok}`) or a reboot ordered
//!   through the [`VirtualDongleHandle`] it is deaf for a few milliseconds, then sends
//!   `BOOT{reason}` having forgotten channel, peers and keys, as the radio does;
//! - commands (ESP-2): `SET_CHANNEL` (1–14), `ADD_PEER` (at most `max_peers`; adding a known
//!   peer updates it), `DEL_PEER`, `SET_PMK`, `PING`, each answered by `RESP`; a frame of a
//!   kind it does not know gets `RESP{UnknownKind}`, one whose fields do not fit its kind
//!   `RESP{Malformed}`; a frame with a bad CRC, noise, and the lone `0x00` flush are dropped
//!   (and counted) without an answer (ESP-1);
//! - `SEND` (ESP-4): refused with `PayloadTooLarge` above `max_payload`, `UnknownPeer` for a
//!   unicast destination not in the peer table (as ESP-NOW refuses it), `NoCredit` when
//!   `tx_credits` sends are outstanding; otherwise `RESP{Ok}`, the frame goes on the air, and
//!   `TX_DONE` (same seq) follows after the air's latency and gives the credit back;
//! - frames heard on the air (addressed to it or broadcast, on its channel) go to the host as
//!   `RX` with the sender, RSSI and a timestamp in microseconds since boot; `STATS` every
//!   second; `LOG` lines when enabled.
//!
//! Messages the dongle sends unprompted (`BOOT`, `RX`, `STATS`, `LOG`) carry seq 0.
//!
//! The dongle stops when the host's end of the I/O closes (end of file or an I/O error), when
//! it is unplugged through its handle, or when its last handle is dropped; it then leaves the
//! air and drops its I/O, so the host reads end of file (ESP-5).

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use bytes::BytesMut;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior, interval_at, sleep_until};
use tokio_util::codec::{Decoder, Encoder, Framed};
use tracing::{debug, trace};

use crate::air::{Air, AirEvent, AirPort, VirtualError};
use crate::codec::{CodecStats, DongleCodec, Inbound};
use crate::error::FrameError;
use crate::frame::{DELIMITER, MAX_ENCODED, PROTOCOL_MAJOR, PROTOCOL_MINOR, RawFrame};
use crate::message::{Frame, Info, Mac, Message, ResetReason, Status, kind};

/// How a virtual dongle presents itself and behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualDongleConfig {
    /// Its MAC address on the air.
    pub mac: Mac,
    /// Protocol major in `INFO`, `BOOT` and every frame header; another than
    /// [`PROTOCOL_MAJOR`] lets a test present an incompatible dongle (ESP-3).
    pub protocol_major: u8,
    /// Protocol minor in `INFO` and `BOOT`.
    pub protocol_minor: u8,
    /// Firmware text in `INFO`.
    pub firmware: String,
    /// ESP-NOW version in `INFO`: 1 or 2.
    pub espnow_version: u8,
    /// Longest `SEND` payload: 250 for ESP-NOW v1, 1470 for v2.
    pub max_payload: u16,
    /// The channel the radio is on after every boot.
    pub channel: u8,
    /// `SEND`s that may be outstanding (ESP-4).
    pub tx_credits: u8,
    /// Peer table size.
    pub max_peers: u8,
    /// Send `BOOT{PowerOn}` on start; false starts silent, as a dongle whose boot message the
    /// host missed.
    pub announce_boot: bool,
    /// Period of `STATS`; `None` sends none.
    pub stats_interval: Option<Duration>,
    /// How long a reboot keeps the dongle deaf before its `BOOT`.
    pub reboot_time: Duration,
    /// Send `LOG` lines about boots and channel changes.
    pub log_events: bool,
}

impl VirtualDongleConfig {
    /// An ESP-NOW v1 dongle of this protocol version with this MAC: 250-byte payloads, 4 TX
    /// credits, 20 peers, channel 1, `BOOT` on start, `STATS` every second, 5 ms reboots.
    pub fn new(mac: Mac) -> Self {
        Self {
            mac,
            protocol_major: PROTOCOL_MAJOR,
            protocol_minor: PROTOCOL_MINOR,
            firmware: format!("conclave-virtual {}", env!("CARGO_PKG_VERSION")),
            espnow_version: 1,
            max_payload: 250,
            channel: 1,
            tx_credits: 4,
            max_peers: 20,
            announce_boot: true,
            stats_interval: Some(Duration::from_secs(1)),
            reboot_time: Duration::from_millis(5),
            log_events: false,
        }
    }

    /// The same, as an ESP-NOW v2 radio (1470-byte payloads).
    pub fn espnow_v2(mut self) -> Self {
        self.espnow_version = 2;
        self.max_payload = 1470;
        self
    }
}

/// One entry of the dongle's peer table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerEntry {
    /// The peer.
    pub mac: Mac,
    /// Its channel as given (0: the current one).
    pub channel: u8,
    /// Frames to it are to be encrypted (stored; the air does not model encryption).
    pub encrypt: bool,
    /// Its local master key.
    pub key: [u8; 16],
}

/// What a virtual dongle holds, for tests and the demo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DongleState {
    /// Its task is running: not unplugged, its host I/O open.
    pub running: bool,
    /// Rebooting: deaf until its `BOOT`.
    pub booting: bool,
    /// `BOOT` messages sent.
    pub boots: u32,
    /// Reason of the last `BOOT` sent.
    pub last_boot: Option<ResetReason>,
    /// The channel the radio is on.
    pub channel: u8,
    /// The peer table, by MAC.
    pub peers: Vec<PeerEntry>,
    /// The primary master key, once set.
    pub pmk: Option<[u8; 16]>,
    /// `SEND`s accepted and not yet reported by `TX_DONE`.
    pub outstanding_sends: u8,
    /// Since boot: frames heard and dropped because the receive queue was full.
    pub rx_dropped: u32,
    /// Since boot: `SEND`s refused for want of a credit.
    pub tx_dropped: u32,
    /// Since boot: host frames dropped for a bad CRC.
    pub crc_errors: u32,
    /// Since it was plugged in: what the serial decoder delivered and dropped.
    pub codec: CodecStats,
}

#[derive(Debug)]
enum Control {
    Unplug,
    Reboot(ResetReason),
    Log { level: u8, text: String },
}

/// A virtual dongle on the air, not yet talking to a host. See the [module docs](self).
#[derive(Debug)]
pub struct VirtualDongle {
    config: VirtualDongleConfig,
    port: AirPort,
}

impl VirtualDongle {
    /// Puts the dongle's radio on the air, on its configured channel.
    pub fn new(air: &Air, config: VirtualDongleConfig) -> Result<VirtualDongle, VirtualError> {
        let port = air.attach(config.mac, config.channel)?;
        Ok(VirtualDongle { config, port })
    }

    /// Its MAC.
    pub fn mac(&self) -> Mac {
        self.config.mac
    }

    /// Starts answering the host on `io`, in a task of the current tokio runtime.
    pub fn spawn<T>(self, io: T) -> VirtualDongleHandle
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (control_tx, control) = mpsc::unbounded_channel();
        let (state_tx, state) = watch::channel(DongleState {
            running: true,
            booting: false,
            boots: 0,
            last_boot: None,
            channel: self.config.channel,
            peers: Vec::new(),
            pmk: None,
            outstanding_sends: 0,
            rx_dropped: 0,
            tx_dropped: 0,
            crc_errors: 0,
            codec: CodecStats::default(),
        });
        let handle = VirtualDongleHandle {
            mac: self.config.mac,
            air: self.port.air().clone(),
            control: control_tx,
            state,
        };
        let now = Instant::now();
        let firmware = Firmware {
            channel: self.config.channel,
            config: self.config,
            port: self.port,
            control,
            state: state_tx,
            generation: 0,
            boot: None,
            booted_at: now,
            peers: BTreeMap::new(),
            pmk: None,
            outstanding: 0,
            boots: 0,
            last_boot: None,
            tx_dropped: 0,
            rx_baseline: 0,
            crc_baseline: 0,
        };
        tokio::spawn(firmware.run(io));
        handle
    }
}

/// Controls a running virtual dongle and reads its state. Clones control the same dongle;
/// when the last one is dropped the dongle is unplugged.
#[derive(Debug, Clone)]
pub struct VirtualDongleHandle {
    mac: Mac,
    air: Air,
    control: mpsc::UnboundedSender<Control>,
    state: watch::Receiver<DongleState>,
}

impl VirtualDongleHandle {
    /// Its MAC.
    pub fn mac(&self) -> Mac {
        self.mac
    }

    /// The air it is on.
    pub fn air(&self) -> &Air {
        &self.air
    }

    /// Its state now.
    pub fn state(&self) -> DongleState {
        self.state.borrow().clone()
    }

    /// A receiver of its state, to wait for a change.
    pub fn watch_state(&self) -> watch::Receiver<DongleState> {
        self.state.clone()
    }

    /// Reboots it as if its watchdog fired: it forgets channel, peers and keys and sends
    /// `BOOT{Watchdog}` unprompted; the host must set them again (ESP-3).
    pub fn reset(&self) {
        self.reboot(ResetReason::Watchdog);
    }

    /// Reboots it for `reason`, as [`reset`](Self::reset) does.
    pub fn reboot(&self, reason: ResetReason) {
        let _ = self.control.send(Control::Reboot(reason));
    }

    /// Makes it send a `LOG` line.
    pub fn log(&self, level: u8, text: impl Into<String>) {
        let _ = self.control.send(Control::Log {
            level,
            text: text.into(),
        });
    }

    /// Turns its radio off: it neither hears nor reaches anyone; the serial link stays up.
    pub fn power_off(&self) {
        self.air.power_off(self.mac);
    }

    /// Turns its radio back on.
    pub fn power_on(&self) {
        self.air.power_on(self.mac);
    }

    /// Whether its radio is on the air and powered.
    pub fn is_powered(&self) -> bool {
        self.air.is_powered(self.mac)
    }

    /// Whether it still runs.
    pub fn is_running(&self) -> bool {
        self.state.borrow().running
    }

    /// Unplugs it: it leaves the air and closes its host I/O, so the host reads end of file
    /// (a pseudo-terminal's host also gets `EIO` on write). Returns once that is done.
    pub async fn unplug(&self) {
        let _ = self.control.send(Control::Unplug);
        self.stopped().await;
    }

    /// Waits until it stops (unplugged, or its host I/O closed).
    pub async fn stopped(&self) {
        let mut state = self.state.clone();
        // An error means the task is gone, which is stopped too.
        let _ = state.wait_for(|state| !state.running).await;
    }
}

/// The dongle's task: the firmware's state between two boots and what it needs to run.
struct Firmware {
    config: VirtualDongleConfig,
    port: AirPort,
    control: mpsc::UnboundedReceiver<Control>,
    state: watch::Sender<DongleState>,
    /// Counts boots, so that a transmission's report from before a reboot is recognised
    /// and forgotten, as the rebooted radio knows nothing of it.
    generation: u32,
    /// A reboot under way: when it ends and why.
    boot: Option<(Instant, ResetReason)>,
    booted_at: Instant,
    channel: u8,
    peers: BTreeMap<Mac, PeerEntry>,
    pmk: Option<[u8; 16]>,
    outstanding: u8,
    boots: u32,
    last_boot: Option<ResetReason>,
    tx_dropped: u32,
    rx_baseline: u64,
    crc_baseline: u64,
}

type HostIo<T> = Framed<T, DongleSide>;

impl Firmware {
    async fn run<T>(mut self, io: T)
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        let mut io = Framed::new(io, DongleSide::new(self.config.protocol_major));
        match self.serve(&mut io).await {
            Ok(()) => debug!(mac = %self.config.mac, "virtual dongle: stopped"),
            Err(err) => debug!(mac = %self.config.mac, %err, "virtual dongle: host I/O failed"),
        }
        // Close the host's I/O and leave the air before saying so: whoever waits on
        // `stopped` may plug a new dongle with this MAC, or read end of file, next.
        drop(io);
        let Firmware { port, state, .. } = self;
        drop(port);
        state.send_modify(|state| state.running = false);
    }

    async fn serve<T>(&mut self, io: &mut HostIo<T>) -> io::Result<()>
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        if self.config.announce_boot {
            self.finish_boot(io, ResetReason::PowerOn).await?;
        }
        let mut stats = self.config.stats_interval.map(|period| {
            let mut stats = interval_at(Instant::now() + period, period);
            stats.set_missed_tick_behavior(MissedTickBehavior::Delay);
            stats
        });
        loop {
            self.publish(io.codec());
            let boot_at = self.boot.map(|(at, _)| at);
            tokio::select! {
                biased;
                control = self.control.recv() => match control {
                    None | Some(Control::Unplug) => return Ok(()),
                    Some(Control::Reboot(reason)) => self.begin_reboot(reason),
                    Some(Control::Log { level, text }) => {
                        if self.boot.is_none() {
                            write(io, 0, Message::Log { level, text }).await?;
                        }
                    }
                },
                () = sleep_until_some(boot_at) => {
                    if let Some((_, reason)) = self.boot.take() {
                        self.finish_boot(io, reason).await?;
                    }
                }
                inbound = io.next() => match inbound {
                    None => return Ok(()),
                    Some(inbound) => self.handle_host(io, inbound?).await?,
                },
                event = self.port.recv() => match event {
                    None => return Ok(()),
                    Some(event) => self.handle_air(io, event).await?,
                },
                () = tick(&mut stats) => {
                    if self.boot.is_none() {
                        let stats = self.stats(io.codec());
                        write(io, 0, stats).await?;
                    }
                }
            }
        }
    }

    fn begin_reboot(&mut self, reason: ResetReason) {
        debug!(mac = %self.config.mac, ?reason, "virtual dongle: rebooting");
        self.generation = self.generation.wrapping_add(1);
        self.boot = Some((Instant::now() + self.config.reboot_time, reason));
        self.channel = self.config.channel;
        self.port.set_channel(self.channel);
        self.peers.clear();
        self.pmk = None;
        self.outstanding = 0;
        self.port.discard_received();
    }

    async fn finish_boot<T>(&mut self, io: &mut HostIo<T>, reason: ResetReason) -> io::Result<()>
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        self.boots += 1;
        self.last_boot = Some(reason);
        self.booted_at = Instant::now();
        // STATS counts since boot.
        self.tx_dropped = 0;
        self.rx_baseline = self.port.counters().rx_overflow;
        self.crc_baseline = io.codec().inner.stats().crc_errors;
        self.publish(io.codec());
        write(
            io,
            0,
            Message::Boot {
                reason,
                major: self.config.protocol_major,
                minor: self.config.protocol_minor,
            },
        )
        .await?;
        if self.config.log_events {
            let text = format!("boot ({reason:?}) on channel {}", self.channel);
            write(io, 0, Message::Log { level: 2, text }).await?;
        }
        Ok(())
    }

    async fn handle_host<T>(&mut self, io: &mut HostIo<T>, inbound: HostInbound) -> io::Result<()>
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        if self.boot.is_some() {
            // A rebooting ESP32 does not read its UART: the host retries after BOOT.
            trace!(mac = %self.config.mac, ?inbound, "virtual dongle: ignored while booting");
            return Ok(());
        }
        match inbound {
            HostInbound::Frame(Frame { seq, message }) => self.command(io, seq, message).await,
            // Whatever the host's version, HELLO must be answered so it can see ours and
            // refuse us with a clear error (ESP-3); other frames cannot be read.
            HostInbound::OtherVersion(raw) if raw.kind == kind::HELLO => {
                write(io, raw.seq, Message::Info(self.info())).await
            }
            HostInbound::OtherVersion(raw) => {
                debug!(
                    version = raw.version,
                    kind = raw.kind,
                    "virtual dongle: frame of another version dropped"
                );
                Ok(())
            }
            HostInbound::UnknownKind { seq } => respond(io, seq, Status::UnknownKind).await,
            HostInbound::Malformed { seq } => respond(io, seq, Status::Malformed).await,
        }
    }

    async fn command<T>(&mut self, io: &mut HostIo<T>, seq: u16, message: Message) -> io::Result<()>
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        let status = match message {
            Message::Hello { .. } => return write(io, seq, Message::Info(self.info())).await,
            Message::Reset => {
                respond(io, seq, Status::Ok).await?;
                self.begin_reboot(ResetReason::HostRequest);
                return Ok(());
            }
            Message::SetChannel { channel } => {
                if (1..=14).contains(&channel) {
                    self.channel = channel;
                    self.port.set_channel(channel);
                    if self.config.log_events {
                        let text = format!("channel {channel}");
                        write(io, 0, Message::Log { level: 2, text }).await?;
                    }
                    Status::Ok
                } else {
                    Status::BadArgument
                }
            }
            Message::AddPeer {
                mac,
                channel,
                encrypt,
                key,
            } => {
                if channel > 14 {
                    Status::BadArgument
                } else if self.peers.contains_key(&mac)
                    || self.peers.len() < usize::from(self.config.max_peers)
                {
                    let entry = PeerEntry {
                        mac,
                        channel,
                        encrypt,
                        key,
                    };
                    self.peers.insert(mac, entry);
                    Status::Ok
                } else {
                    Status::PeerTableFull
                }
            }
            Message::DelPeer { mac } => match self.peers.remove(&mac) {
                Some(_) => Status::Ok,
                None => Status::UnknownPeer,
            },
            Message::SetPmk { pmk } => {
                self.pmk = Some(pmk);
                Status::Ok
            }
            Message::Ping => Status::Ok,
            Message::Send { dst, payload } => self.send(seq, dst, payload),
            // The dongle's own messages make no sense coming from the host.
            Message::Resp { .. }
            | Message::Info(_)
            | Message::Boot { .. }
            | Message::Rx { .. }
            | Message::TxDone { .. }
            | Message::Stats { .. }
            | Message::Log { .. } => Status::UnknownKind,
        };
        respond(io, seq, status).await
    }

    fn send(&mut self, seq: u16, dst: Mac, payload: Vec<u8>) -> Status {
        if payload.len() > usize::from(self.config.max_payload) {
            Status::PayloadTooLarge
        } else if !dst.is_broadcast() && !self.peers.contains_key(&dst) {
            Status::UnknownPeer
        } else if self.outstanding >= self.config.tx_credits {
            self.tx_dropped = self.tx_dropped.saturating_add(1);
            Status::NoCredit
        } else {
            self.outstanding += 1;
            self.port
                .transmit(dst, payload, tx_tag(self.generation, seq));
            Status::Ok
        }
    }

    async fn handle_air<T>(&mut self, io: &mut HostIo<T>, event: AirEvent) -> io::Result<()>
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        match event {
            AirEvent::TxDone(report) => {
                let (generation, seq) = split_tx_tag(report.tag);
                if generation != self.generation {
                    return Ok(());
                }
                self.outstanding = self.outstanding.saturating_sub(1);
                let done = Message::TxDone {
                    send_seq: seq,
                    mac: report.dst,
                    ok: report.ok,
                };
                write(io, seq, done).await
            }
            AirEvent::Received(frame) => {
                if self.boot.is_some() {
                    return Ok(());
                }
                // The firmware's microsecond clock is 32 bits wide and wraps, as the
                // protocol says.
                let timestamp_us = (Instant::now() - self.booted_at).as_micros() as u32;
                let rx = Message::Rx {
                    src: frame.src,
                    dst: frame.dst,
                    rssi: frame.rssi,
                    channel: frame.channel,
                    timestamp_us,
                    payload: frame.payload,
                };
                write(io, 0, rx).await
            }
        }
    }

    fn info(&self) -> Info {
        Info {
            protocol_major: self.config.protocol_major,
            protocol_minor: self.config.protocol_minor,
            firmware: self.config.firmware.clone(),
            mac: self.config.mac,
            espnow_version: self.config.espnow_version,
            max_payload: self.config.max_payload,
            channel: self.channel,
            tx_credits: self.config.tx_credits,
            max_peers: self.config.max_peers,
        }
    }

    fn since_boot(&self, codec: &DongleSide) -> (u32, u32) {
        let rx_dropped = self
            .port
            .counters()
            .rx_overflow
            .saturating_sub(self.rx_baseline);
        let crc_errors = codec
            .inner
            .stats()
            .crc_errors
            .saturating_sub(self.crc_baseline);
        (
            u32::try_from(rx_dropped).unwrap_or(u32::MAX),
            u32::try_from(crc_errors).unwrap_or(u32::MAX),
        )
    }

    fn stats(&self, codec: &DongleSide) -> Message {
        let (rx_dropped, crc_errors) = self.since_boot(codec);
        Message::Stats {
            rx_dropped,
            tx_dropped: self.tx_dropped,
            crc_errors,
        }
    }

    fn publish(&self, codec: &DongleSide) {
        let (rx_dropped, crc_errors) = self.since_boot(codec);
        let now = DongleState {
            running: true,
            booting: self.boot.is_some(),
            boots: self.boots,
            last_boot: self.last_boot,
            channel: self.channel,
            peers: self.peers.values().copied().collect(),
            pmk: self.pmk,
            outstanding_sends: self.outstanding,
            rx_dropped,
            tx_dropped: self.tx_dropped,
            crc_errors,
            codec: codec.inner.stats(),
        };
        self.state.send_if_modified(|state| {
            let changed = *state != now;
            if changed {
                *state = now;
            }
            changed
        });
    }
}

async fn write<T>(io: &mut HostIo<T>, seq: u16, message: Message) -> io::Result<()>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    io.send(Frame::new(seq, message)).await
}

async fn respond<T>(io: &mut HostIo<T>, seq: u16, status: Status) -> io::Result<()>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    write(io, seq, Message::Resp { status }).await
}

/// A transmission's tag: the boot it belongs to and the `SEND`'s seq.
fn tx_tag(generation: u32, seq: u16) -> u64 {
    u64::from(generation) << 16 | u64::from(seq)
}

fn split_tx_tag(tag: u64) -> (u32, u16) {
    // The truncating casts take the two fields back out of the tag built above.
    ((tag >> 16) as u32, tag as u16)
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn tick(interval: &mut Option<Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// What the dongle gets from the host.
#[derive(Debug)]
enum HostInbound {
    Frame(Frame),
    OtherVersion(RawFrame),
    /// A good frame of a kind this side does not know: answered `RESP{UnknownKind}`.
    UnknownKind {
        seq: u16,
    },
    /// A good frame whose payload does not fit its kind: answered `RESP{Malformed}`.
    Malformed {
        seq: u16,
    },
}

/// The dongle's end of the serial line: [`DongleCodec`] does the decoding and the counting,
/// and this wrapper recovers the seq of the frames it drops for their content rather than
/// for damage, because the firmware answers those. It also writes frames with the dongle's
/// protocol major in their header, so a test can present another version.
#[derive(Debug)]
struct DongleSide {
    inner: DongleCodec,
    major: u8,
    /// Mirrors the inner codec's: the next delimiter ends a run that was too long.
    discarding: bool,
}

impl DongleSide {
    fn new(major: u8) -> Self {
        Self {
            inner: DongleCodec::new(),
            major,
            discarding: false,
        }
    }
}

impl Decoder for DongleSide {
    type Item = HostInbound;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<HostInbound>> {
        loop {
            let Some(end) = src.iter().position(|&byte| byte == DELIMITER) else {
                if src.len() > MAX_ENCODED {
                    self.discarding = true;
                }
                // Lets the inner codec count and drop a run without a delimiter.
                return Ok(self.inner.decode(src)?.map(from_inbound));
            };
            // One frame at a time, so that a frame the inner codec drops is known.
            let mut chunk = src.split_to(end + 1);
            let was_discarding = std::mem::take(&mut self.discarding);
            let copy = chunk.clone();
            if let Some(inbound) = self.inner.decode(&mut chunk)? {
                return Ok(Some(from_inbound(inbound)));
            }
            if was_discarding {
                continue;
            }
            // Dropped: damaged frames (no valid CRC) stay unanswered; a sound frame with an
            // unknown kind or bad fields is answered.
            let Ok(raw) = RawFrame::decode(&copy[..end]) else {
                continue;
            };
            return Ok(Some(
                match Message::decode_payload(raw.kind, &raw.payload) {
                    Err(FrameError::UnknownKind(_)) => HostInbound::UnknownKind { seq: raw.seq },
                    _ => HostInbound::Malformed { seq: raw.seq },
                },
            ));
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> io::Result<Option<HostInbound>> {
        let item = self.decode(src)?;
        if item.is_none() {
            // A frame cut by the end of the stream is noise like any other.
            src.clear();
        }
        Ok(item)
    }
}

fn from_inbound(inbound: Inbound) -> HostInbound {
    match inbound {
        Inbound::Frame(frame) => HostInbound::Frame(frame),
        Inbound::OtherVersion(raw) => HostInbound::OtherVersion(raw),
    }
}

impl Encoder<Frame> for DongleSide {
    type Error = io::Error;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> io::Result<()> {
        let mut raw = frame.to_raw();
        raw.version = self.major;
        let mut bytes = Vec::new();
        raw.encode_into(&mut bytes);
        dst.extend_from_slice(&bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(frame: &RawFrame) -> Vec<u8> {
        let mut bytes = Vec::new();
        frame.encode_into(&mut bytes);
        bytes
    }

    /// ESP-1, ESP-2: the dongle's decoder answers sound frames it cannot use with their seq,
    /// skips damaged ones, and keeps the inner codec's counters.
    #[test]
    fn decoder_recovers_seq_of_unknown_and_malformed_frames() {
        let mut codec = DongleSide::new(PROTOCOL_MAJOR);
        let mut src = BytesMut::new();
        src.extend_from_slice(&[0x00, 0x13, 0x37, 0x00]);
        let mut bad_crc = wire(&Frame::new(9, Message::Ping).to_raw());
        bad_crc[2] ^= 0x01;
        src.extend_from_slice(&bad_crc);
        src.extend_from_slice(&wire(&RawFrame {
            version: PROTOCOL_MAJOR,
            kind: 0x42,
            seq: 7,
            payload: vec![1, 2],
        }));
        src.extend_from_slice(&wire(&RawFrame {
            version: PROTOCOL_MAJOR,
            kind: kind::SET_CHANNEL,
            seq: 8,
            payload: vec![],
        }));
        src.extend_from_slice(&wire(&Frame::new(10, Message::Ping).to_raw()));
        assert!(matches!(
            codec.decode(&mut src).unwrap(),
            Some(HostInbound::UnknownKind { seq: 7 })
        ));
        assert!(matches!(
            codec.decode(&mut src).unwrap(),
            Some(HostInbound::Malformed { seq: 8 })
        ));
        assert!(matches!(
            codec.decode(&mut src).unwrap(),
            Some(HostInbound::Frame(Frame {
                seq: 10,
                message: Message::Ping
            }))
        ));
        assert!(codec.decode(&mut src).unwrap().is_none());
        let stats = codec.inner.stats();
        assert_eq!(stats.crc_errors, 1);
        assert_eq!(stats.unknown_kind, 1);
        assert_eq!(stats.frames, 1);
    }

    /// ESP-1: after a run longer than any frame, the frame after the next delimiter is read.
    #[test]
    fn decoder_survives_an_oversize_run() {
        let mut codec = DongleSide::new(PROTOCOL_MAJOR);
        let mut src = BytesMut::from(&vec![0x55; MAX_ENCODED + 10][..]);
        assert!(codec.decode(&mut src).unwrap().is_none());
        src.extend_from_slice(&[0x55; 20]);
        src.extend_from_slice(&wire(&RawFrame {
            version: PROTOCOL_MAJOR,
            kind: 0x42,
            seq: 1,
            payload: vec![],
        }));
        // The unknown-kind frame's bytes were the tail of the oversize run: dropped unanswered.
        assert!(codec.decode(&mut src).unwrap().is_none());
        src.extend_from_slice(&wire(&Frame::new(2, Message::Ping).to_raw()));
        assert!(matches!(
            codec.decode(&mut src).unwrap(),
            Some(HostInbound::Frame(Frame { seq: 2, .. }))
        ));
        assert_eq!(codec.inner.stats().oversize, 1);
    }

    /// ESP-3: frames leave with the configured major in their header.
    #[test]
    fn encoder_writes_the_configured_major() {
        let mut codec = DongleSide::new(PROTOCOL_MAJOR + 1);
        let mut dst = BytesMut::new();
        codec
            .encode(Frame::new(3, Message::Ping), &mut dst)
            .unwrap();
        let raw = RawFrame::decode(&dst[..dst.len() - 1]).unwrap();
        assert_eq!(raw.version, PROTOCOL_MAJOR + 1);
        assert_eq!(raw.seq, 3);
    }

    /// ESP-4: a transmission's tag keeps its boot and seq apart.
    #[test]
    fn tx_tag_round_trips() {
        assert_eq!(
            split_tx_tag(tx_tag(0xdead_beef, 0x1234)),
            (0xdead_beef, 0x1234)
        );
    }
}
