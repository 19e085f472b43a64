//! A simulated ESP-NOW medium shared by virtual dongles (ESP-7).
//!
//! [`Air`] stands for the radio space between the dongles of a test or of `conclave demo`
//! (CB-7): every node is a MAC address on a Wi-Fi channel; only nodes on the same channel, both
//! powered and in the same partition group hear each other; each copy of a frame may be lost
//! (globally or per directed pair) and arrives 1–3 ms after it was sent, with an RSSI derived
//! from the pair. The rules of the radio hold here as they do on an ESP32: a broadcast reports
//! success to its sender whatever happened, a unicast reports success only when its
//! destination received it (ESP-NOW's MAC-level acknowledgement).
//!
//! Every random choice (loss, latency, RSSI jitter) comes from one seeded generator and is
//! made when a frame is sent, in the order frames are sent, so a seeded run replays; delays
//! are `tokio::time` sleeps, so a test with a paused clock runs them instantly.
//!
//! Air time is not modelled by default: any number of frames may be in the air at once, so a
//! test's timings depend on the latency alone. With [`AirConfig::bit_rate`] set, a frame
//! occupies its channel for [`air_time`] of its payload, and frames on one channel that can
//! hear each other take turns: a frame sent while the medium is busy waits until it is free,
//! then lands after its own air time and the latency, and never before the frame sent ahead
//! of it (without the model, the latency drawn for each frame may reorder them). That is what bounds a cluster's commits
//! on real radios (about 107 full frames a second at ESP-NOW's ≈214 kbit/s), so a measurement
//! over virtual dongles can be set against it.
//!
//! A node's settings (power, partition group, RSSI overrides, counters) are kept by MAC and
//! outlive its attachment: a dongle that is unplugged and plugged again comes back at the
//! same place of the air.
//!
//! [`Air::monitor`] is a radio in monitor mode, as anyone in range could run: it records every
//! frame sent on the air, unicast or broadcast, whoever it was for — what a test of what
//! travels in clear (PROTO-9) must look at.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::trace;

use crate::message::Mac;

/// What goes wrong when a node joins the air or a virtual dongle is set up (ESP-7).
#[derive(Debug, thiserror::Error)]
pub enum VirtualError {
    /// Two radios with one MAC would make every unicast ambiguous.
    #[error("MAC {0} is already on the air")]
    MacInUse(Mac),
    /// The broadcast address names every node, never one.
    #[error("{0} is the broadcast address, not a node's")]
    BroadcastMac(Mac),
    /// `replug` of a virtual serial port that is plugged in: unplug it first.
    #[error("virtual serial port {0} is plugged in already")]
    Plugged(std::path::PathBuf),
    /// Creating, linking or removing a virtual serial port failed.
    #[error("virtual serial port {path}: {source}")]
    Io {
        /// The path concerned (the stable link, or the pseudo-terminal).
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Settings of an [`Air`].
#[derive(Debug, Clone, PartialEq)]
pub struct AirConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Probability that one copy of a frame is lost, for pairs without their own (0.0–1.0).
    pub loss: f64,
    /// Shortest delivery delay.
    pub latency_min: Duration,
    /// Longest delivery delay.
    pub latency_max: Duration,
    /// Each reception's RSSI varies by up to this many dB around the pair's value.
    pub rssi_jitter_db: u8,
    /// Frames a node's receive queue holds; more are dropped and counted in
    /// [`AirCounters::rx_overflow`], as the firmware's queue towards a slow host would.
    pub rx_queue: usize,
    /// The medium's bit rate, bits a second, when air time is modelled (see the
    /// [module docs](self)); `None`, the default, lets frames overlap freely.
    pub bit_rate: Option<NonZeroU32>,
}

/// Bytes an ESP-NOW frame takes on the air beside its payload: the 802.11 MAC header (24),
/// the action category (1), the Espressif OUI (3), the random value (4), the vendor-specific
/// element's header (7) and the frame check sequence (4).
pub const AIR_FRAME_OVERHEAD: usize = 43;

/// How long a frame with `payload_bytes` of ESP-NOW payload occupies the medium at
/// `bit_rate` bits a second: its payload and [`AIR_FRAME_OVERHEAD`], eight bits a byte.
/// 250 bytes at 214 kbit/s take about 11 ms.
pub fn air_time(payload_bytes: usize, bit_rate: NonZeroU32) -> Duration {
    let bits = (payload_bytes as u128 + AIR_FRAME_OVERHEAD as u128) * 8;
    let nanos = bits * 1_000_000_000 / u128::from(bit_rate.get());
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

impl Default for AirConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            loss: 0.0,
            latency_min: Duration::from_millis(1),
            latency_max: Duration::from_millis(3),
            rssi_jitter_db: 2,
            rx_queue: 64,
            bit_rate: None,
        }
    }
}

/// Per-node counters, kept across attachments (ESP-7).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AirCounters {
    /// Frames this node transmitted.
    pub sent: u64,
    /// Bytes those frames took on the air: each one's payload and [`AIR_FRAME_OVERHEAD`],
    /// counted whether air time is modelled or not, so that a run can be set against the
    /// bytes a second a real radio carries.
    pub air_bytes: u64,
    /// Copies of its frames that reached a receiver (a broadcast heard by three counts three).
    pub delivered: u64,
    /// Copies of its frames dropped by the loss model.
    pub lost: u64,
    /// Its unicasts whose destination could not hear them: absent, powered off, on another
    /// channel, in another partition, or this node itself powered off.
    pub unreachable: u64,
    /// Frames this node heard.
    pub received: u64,
    /// Frames this node heard but dropped because its receive queue was full.
    pub rx_overflow: u64,
}

/// A frame as a receiver hears it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AirFrame {
    /// Sender.
    pub src: Mac,
    /// Destination: the receiver or broadcast.
    pub dst: Mac,
    /// Received signal strength, dBm.
    pub rssi: i8,
    /// Channel it was heard on.
    pub channel: u8,
    /// The frame.
    pub payload: Vec<u8>,
}

/// The outcome of one transmission, for its sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxReport {
    /// The tag given to [`AirPort::transmit`].
    pub tag: u64,
    /// The frame's destination.
    pub dst: Mac,
    /// Broadcast: always true. Unicast: the destination received it.
    pub ok: bool,
}

/// What a node's [`AirPort`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AirEvent {
    /// A frame heard.
    Received(AirFrame),
    /// One of this node's transmissions is over.
    TxDone(TxReport),
}

/// The shared medium. Cheap to clone: clones are the same air. See the [module docs](self).
#[derive(Clone)]
pub struct Air {
    inner: Arc<Mutex<AirState>>,
}

impl std::fmt::Debug for Air {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Air")
            .field("config", &state.config)
            .field("nodes", &state.nodes.keys().collect::<Vec<_>>())
            .finish()
    }
}

struct AirState {
    config: AirConfig,
    rng: SplitMix64,
    /// By MAC, so that iteration (and with it the order of random draws) is deterministic.
    nodes: BTreeMap<Mac, Node>,
    link_loss: HashMap<(Mac, Mac), f64>,
    /// Keyed by the ordered pair, as RSSI is taken to be symmetric.
    rssi: HashMap<(Mac, Mac), i8>,
    next_attachment: u64,
    next_group: u32,
    /// With air time modelled, for each medium (channel, partition group): when it is free
    /// again and when the last frame sent on it lands. Nodes that cannot hear each other do
    /// not share a medium.
    medium: HashMap<(u8, u32), (Instant, Instant)>,
    /// Radios in monitor mode ([`Air::monitor`]).
    monitors: Vec<AirMonitor>,
}

/// Every frame sent on an [`Air`] since [`Air::monitor`] was called, as a radio in monitor
/// mode hears them: sender, destination and payload, in the order they were sent. Keeps at
/// most [`AirMonitor::CAPACITY`] frames and counts the rest.
#[derive(Debug, Clone, Default)]
pub struct AirMonitor {
    heard: Arc<Mutex<(Vec<AirFrame>, u64)>>,
}

impl AirMonitor {
    /// Frames kept; a test that sends more sees [`AirMonitor::missed`] grow.
    pub const CAPACITY: usize = 100_000;

    /// The frames heard so far.
    pub fn frames(&self) -> Vec<AirFrame> {
        self.lock().0.clone()
    }

    /// Frames sent past [`AirMonitor::CAPACITY`], not kept.
    pub fn missed(&self) -> u64 {
        self.lock().1
    }

    fn record(&self, frame: AirFrame) {
        let mut heard = self.lock();
        if heard.0.len() < Self::CAPACITY {
            heard.0.push(frame);
        } else {
            heard.1 += 1;
        }
    }

    fn lock(&self) -> MutexGuard<'_, (Vec<AirFrame>, u64)> {
        self.heard.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Node {
    channel: u8,
    powered: bool,
    /// Nodes hear each other only within one group; 0 is everyone not put elsewhere.
    group: u32,
    attachment: Option<Attachment>,
    counters: AirCounters,
}

struct Attachment {
    id: u64,
    rx: mpsc::Sender<AirFrame>,
    done: mpsc::UnboundedSender<TxReport>,
}

impl Node {
    fn new(channel: u8) -> Self {
        Self {
            channel,
            powered: true,
            group: 0,
            attachment: None,
            counters: AirCounters::default(),
        }
    }
}

/// One copy of a frame on its way to one receiver.
struct Delivery {
    to: Mac,
    rssi: i8,
}

impl Air {
    /// An air with default settings and this seed.
    pub fn new(seed: u64) -> Air {
        Air::with_config(AirConfig {
            seed,
            ..AirConfig::default()
        })
    }

    /// An air with these settings.
    pub fn with_config(config: AirConfig) -> Air {
        Air {
            inner: Arc::new(Mutex::new(AirState {
                rng: SplitMix64::new(config.seed),
                config,
                nodes: BTreeMap::new(),
                link_loss: HashMap::new(),
                rssi: HashMap::new(),
                next_attachment: 1,
                next_group: 1,
                medium: HashMap::new(),
                monitors: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, AirState> {
        // A panic elsewhere cannot leave the air half-updated in a way that matters to a
        // simulation; keep serving rather than cascade the panic.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts a radio with this MAC on the air, on `channel`, powered on. Its settings and
    /// counters from an earlier attachment are kept.
    pub fn attach(&self, mac: Mac, channel: u8) -> Result<AirPort, VirtualError> {
        if mac.is_broadcast() {
            return Err(VirtualError::BroadcastMac(mac));
        }
        let mut state = self.lock();
        let id = state.next_attachment;
        state.next_attachment += 1;
        let capacity = state.config.rx_queue.max(1);
        let node = state.nodes.entry(mac).or_insert_with(|| Node::new(channel));
        if node.attachment.is_some() {
            return Err(VirtualError::MacInUse(mac));
        }
        let (rx_tx, rx) = mpsc::channel(capacity);
        let (done_tx, done) = mpsc::unbounded_channel();
        node.channel = channel;
        // A radio that is plugged in has power, whatever happened to the one before it.
        node.powered = true;
        node.attachment = Some(Attachment {
            id,
            rx: rx_tx,
            done: done_tx,
        });
        Ok(AirPort {
            air: self.clone(),
            mac,
            attachment: id,
            rx,
            done,
        })
    }

    /// A radio in monitor mode: from now on it records every frame sent on this air, whoever
    /// it was for (see [`AirMonitor`]).
    pub fn monitor(&self) -> AirMonitor {
        let monitor = AirMonitor::default();
        self.lock().monitors.push(monitor.clone());
        monitor
    }

    /// MACs of the radios attached now.
    pub fn nodes(&self) -> Vec<Mac> {
        self.lock()
            .nodes
            .iter()
            .filter(|(_, node)| node.attachment.is_some())
            .map(|(mac, _)| *mac)
            .collect()
    }

    /// Loss probability of every pair without its own.
    pub fn set_loss(&self, probability: f64) {
        self.lock().config.loss = probability.clamp(0.0, 1.0);
    }

    /// Loss probability of frames from `from` to `to` (one direction only).
    pub fn set_link_loss(&self, from: Mac, to: Mac, probability: f64) {
        self.lock()
            .link_loss
            .insert((from, to), probability.clamp(0.0, 1.0));
    }

    /// Frames from `from` to `to` follow the global loss probability again.
    pub fn clear_link_loss(&self, from: Mac, to: Mac) {
        self.lock().link_loss.remove(&(from, to));
    }

    /// Sets the RSSI between two nodes, both ways.
    pub fn set_rssi(&self, a: Mac, b: Mac, dbm: i8) {
        self.lock().rssi.insert(ordered(a, b), dbm);
    }

    /// The RSSI between two nodes before jitter: the one set, or one derived from the pair,
    /// between -40 and -70 dBm.
    pub fn rssi(&self, a: Mac, b: Mac) -> i8 {
        self.lock().base_rssi(a, b)
    }

    /// Splits the air: nodes of different groups cannot hear each other. Nodes in no group
    /// form one more group together.
    pub fn partition(&self, groups: &[&[Mac]]) {
        let mut state = self.lock();
        for node in state.nodes.values_mut() {
            node.group = 0;
        }
        for group in groups {
            let id = state.next_group;
            state.next_group += 1;
            for mac in *group {
                state.node_mut(*mac).group = id;
            }
        }
    }

    /// Cuts one node off from every other, leaving the other groups as they are.
    pub fn isolate(&self, mac: Mac) {
        let mut state = self.lock();
        let id = state.next_group;
        state.next_group += 1;
        state.node_mut(mac).group = id;
    }

    /// Ends every partition.
    pub fn heal(&self) {
        for node in self.lock().nodes.values_mut() {
            node.group = 0;
        }
    }

    /// Turns a node's radio off: it neither hears nor reaches anyone until powered on.
    pub fn power_off(&self, mac: Mac) {
        self.lock().node_mut(mac).powered = false;
    }

    /// Turns a node's radio back on.
    pub fn power_on(&self, mac: Mac) {
        self.lock().node_mut(mac).powered = true;
    }

    /// Whether a node's radio is on (an unknown node is not).
    pub fn is_powered(&self, mac: Mac) -> bool {
        self.lock()
            .nodes
            .get(&mac)
            .is_some_and(|node| node.powered && node.attachment.is_some())
    }

    /// The channel a node is on.
    pub fn channel(&self, mac: Mac) -> Option<u8> {
        self.lock().nodes.get(&mac).map(|node| node.channel)
    }

    /// Whether a frame from `from` would reach `to` now, loss aside.
    pub fn can_hear(&self, from: Mac, to: Mac) -> bool {
        self.lock().reachable(from, to)
    }

    /// Every node's counters added up: what the whole air carried.
    pub fn total_counters(&self) -> AirCounters {
        let state = self.lock();
        let mut total = AirCounters::default();
        for counters in state.nodes.values().map(|node| &node.counters) {
            total.sent += counters.sent;
            total.air_bytes += counters.air_bytes;
            total.delivered += counters.delivered;
            total.lost += counters.lost;
            total.unreachable += counters.unreachable;
            total.received += counters.received;
            total.rx_overflow += counters.rx_overflow;
        }
        total
    }

    /// The bit rate air time is modelled at, if it is.
    pub fn bit_rate(&self) -> Option<NonZeroU32> {
        self.lock().config.bit_rate
    }

    /// A node's counters (zeros for a node the air never saw).
    pub fn counters(&self, mac: Mac) -> AirCounters {
        self.lock()
            .nodes
            .get(&mac)
            .map(|node| node.counters)
            .unwrap_or_default()
    }

    /// Decides the fate of each copy of a frame now, then delivers the copies that survive
    /// and reports to the sender after the latency (and, when air time is modelled, after
    /// the frame's turn on the medium and its air time).
    fn transmit(&self, src: Mac, dst: Mac, payload: Vec<u8>, tag: u64) {
        let mut state = self.lock();
        if !state.monitors.is_empty() {
            let channel = state.nodes.get(&src).map_or(0, |node| node.channel);
            for monitor in &state.monitors {
                monitor.record(AirFrame {
                    src,
                    dst,
                    rssi: 0,
                    channel,
                    payload: payload.clone(),
                });
            }
        }
        let latency = state.draw_latency();
        let delay = state.occupy_medium(src, payload.len(), latency);
        let deliveries = state.plan(src, dst, payload.len());
        drop(state);
        let air = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            air.land(src, dst, payload, tag, deliveries);
        });
    }

    fn land(&self, src: Mac, dst: Mac, payload: Vec<u8>, tag: u64, deliveries: Vec<Delivery>) {
        let mut state = self.lock();
        let channel = state.nodes.get(&src).map_or(0, |node| node.channel);
        let mut delivered = 0;
        let mut reached_dst = false;
        for delivery in deliveries {
            // The world may have changed while the frame was in flight.
            if !state.reachable(src, delivery.to) {
                if !dst.is_broadcast() {
                    state.node_mut(src).counters.unreachable += 1;
                }
                continue;
            }
            let frame = AirFrame {
                src,
                dst,
                rssi: delivery.rssi,
                channel,
                payload: payload.clone(),
            };
            let receiver = state.node_mut(delivery.to);
            let Some(attachment) = &receiver.attachment else {
                continue;
            };
            // The radio acknowledged the frame even when the firmware's queue is full: the
            // sender sees success, the receiver's host never sees the frame.
            match attachment.rx.try_send(frame) {
                Ok(()) => receiver.counters.received += 1,
                Err(_) => receiver.counters.rx_overflow += 1,
            }
            delivered += 1;
            reached_dst |= delivery.to == dst;
        }
        let sender = state.node_mut(src);
        sender.counters.delivered += delivered;
        let ok = dst.is_broadcast() || reached_dst;
        trace!(%src, %dst, ok, delivered, "air: frame landed");
        if let Some(attachment) = &sender.attachment {
            // A sender that went away no longer waits for the report.
            let _ = attachment.done.send(TxReport { tag, dst, ok });
        }
    }

    fn detach(&self, mac: Mac, attachment: u64) {
        let mut state = self.lock();
        if let Some(node) = state.nodes.get_mut(&mac) {
            if node.attachment.as_ref().is_some_and(|a| a.id == attachment) {
                node.attachment = None;
            }
        }
    }

    fn set_channel(&self, mac: Mac, channel: u8) {
        self.lock().node_mut(mac).channel = channel;
    }
}

impl AirState {
    fn node_mut(&mut self, mac: Mac) -> &mut Node {
        self.nodes.entry(mac).or_insert_with(|| Node::new(1))
    }

    fn base_rssi(&self, a: Mac, b: Mac) -> i8 {
        if let Some(dbm) = self.rssi.get(&ordered(a, b)) {
            return *dbm;
        }
        let (low, high) = ordered(a, b);
        let mut key = 0u64;
        for byte in low.0.iter().chain(high.0.iter()) {
            key = (key << 8 | u64::from(*byte)).rotate_left(3);
        }
        // 31 values: -40 down to -70 dBm.
        let spread = SplitMix64::new(key).next_u64() % 31;
        -40 - i8::try_from(spread).unwrap_or(0)
    }

    fn reachable(&self, from: Mac, to: Mac) -> bool {
        let (Some(sender), Some(receiver)) = (self.nodes.get(&from), self.nodes.get(&to)) else {
            return false;
        };
        from != to
            && sender.powered
            && receiver.powered
            && sender.attachment.is_some()
            && receiver.attachment.is_some()
            && sender.channel == receiver.channel
            && sender.group == receiver.group
    }

    /// How long from now a frame of `payload_bytes` sent by `src` lands: the `latency`
    /// alone without the air-time model (or from a radio that is off: it sends nothing).
    /// With it, the frame books the sender's medium from when that is free (now, if idle) for
    /// its air time, and lands the latency after that, never before the frame ahead of it on
    /// the medium: frames that took turns on one medium arrive in the order they were sent.
    fn occupy_medium(&mut self, src: Mac, payload_bytes: usize, latency: Duration) -> Duration {
        let Some(bit_rate) = self.config.bit_rate else {
            return latency;
        };
        let Some(sender) = self.nodes.get(&src).filter(|node| node.powered) else {
            return latency;
        };
        let medium = (sender.channel, sender.group);
        let now = Instant::now();
        let (free, last_landing) = self.medium.get(&medium).copied().unwrap_or((now, now));
        let end = free.max(now) + air_time(payload_bytes, bit_rate);
        let landing = (end + latency).max(last_landing);
        self.medium.insert(medium, (end, landing));
        landing - now
    }

    fn draw_latency(&mut self) -> Duration {
        let min = self.config.latency_min;
        let max = self.config.latency_max.max(min);
        let span = u64::try_from((max - min).as_micros()).unwrap_or(u64::MAX);
        let extra = if span == 0 {
            0
        } else {
            self.rng.below(span.saturating_add(1))
        };
        min + Duration::from_micros(extra)
    }

    fn plan(&mut self, src: Mac, dst: Mac, payload_bytes: usize) -> Vec<Delivery> {
        let counters = &mut self.node_mut(src).counters;
        counters.sent += 1;
        counters.air_bytes += (payload_bytes + AIR_FRAME_OVERHEAD) as u64;
        let candidates: Vec<Mac> = if dst.is_broadcast() {
            self.nodes
                .keys()
                .copied()
                .filter(|mac| *mac != src)
                .collect()
        } else {
            vec![dst]
        };
        let mut deliveries = Vec::new();
        for to in candidates {
            if !self.reachable(src, to) {
                if !dst.is_broadcast() {
                    self.node_mut(src).counters.unreachable += 1;
                }
                continue;
            }
            let loss = self
                .link_loss
                .get(&(src, to))
                .copied()
                .unwrap_or(self.config.loss);
            if self.rng.chance(loss) {
                self.node_mut(src).counters.lost += 1;
                continue;
            }
            let jitter = i16::from(self.config.rssi_jitter_db);
            let offset = if jitter == 0 {
                0
            } else {
                let draw = self.rng.below(u64::from(jitter.unsigned_abs()) * 2 + 1);
                i16::try_from(draw).unwrap_or(0) - jitter
            };
            let rssi = (i16::from(self.base_rssi(src, to)) + offset)
                .clamp(i16::from(i8::MIN), i16::from(i8::MAX));
            deliveries.push(Delivery {
                to,
                rssi: i8::try_from(rssi).unwrap_or(i8::MIN),
            });
        }
        deliveries
    }
}

fn ordered(a: Mac, b: Mac) -> (Mac, Mac) {
    if a <= b { (a, b) } else { (b, a) }
}

/// One radio's attachment to the [`Air`]: it transmits, and yields what it hears and how its
/// transmissions ended. Dropping it takes the radio off the air.
#[derive(Debug)]
pub struct AirPort {
    air: Air,
    mac: Mac,
    attachment: u64,
    rx: mpsc::Receiver<AirFrame>,
    done: mpsc::UnboundedReceiver<TxReport>,
}

impl AirPort {
    /// This radio's MAC.
    pub fn mac(&self) -> Mac {
        self.mac
    }

    /// The air it is on.
    pub fn air(&self) -> &Air {
        &self.air
    }

    /// Tunes the radio to a channel.
    pub fn set_channel(&self, channel: u8) {
        self.air.set_channel(self.mac, channel);
    }

    /// The channel the radio is on.
    pub fn channel(&self) -> u8 {
        self.air.channel(self.mac).unwrap_or(0)
    }

    /// Sends `payload` to `dst` (or broadcast) on the current channel. The outcome comes back
    /// from [`recv`](Self::recv) as [`AirEvent::TxDone`] carrying `tag`, after the latency.
    /// Must be called inside a tokio runtime: the delivery is a task.
    pub fn transmit(&self, dst: Mac, payload: Vec<u8>, tag: u64) {
        self.air.transmit(self.mac, dst, payload, tag);
    }

    /// The next frame heard or transmission done; reports come first, so a sender's credits
    /// return as early as they can. Cancel-safe.
    pub async fn recv(&mut self) -> Option<AirEvent> {
        tokio::select! {
            biased;
            Some(report) = self.done.recv() => Some(AirEvent::TxDone(report)),
            Some(frame) = self.rx.recv() => Some(AirEvent::Received(frame)),
            else => None,
        }
    }

    /// Discards what was heard and not yet taken, as a rebooting radio loses its queue.
    pub fn discard_received(&mut self) {
        while self.rx.try_recv().is_ok() {}
    }

    /// This radio's counters.
    pub fn counters(&self) -> AirCounters {
        self.air.counters(self.mac)
    }
}

impl Drop for AirPort {
    fn drop(&mut self) {
        self.air.detach(self.mac, self.attachment);
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator with a 64-bit state, good enough
/// for loss draws and jitter, and trivially seeded.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A draw in `0..bound` (`bound` > 0); the modulo bias is far below what a test sees.
    fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound.max(1)
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        // 53 random bits make a uniform f64 in [0, 1).
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ESP-7: one seed, one sequence; the generator's output is spread over its range.
    #[test]
    fn generator_is_seeded_and_spread() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let first: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let second: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(first, second);
        let mut rng = SplitMix64::new(1);
        let hits = (0..10_000).filter(|_| rng.chance(0.25)).count();
        assert!((2_200..2_800).contains(&hits), "{hits}");
    }

    /// ESP-7: the derived RSSI of a pair is symmetric and between -40 and -70 dBm.
    #[test]
    fn derived_rssi_is_symmetric_and_in_range() {
        let air = Air::new(0);
        for n in 0..50u8 {
            let a = Mac([2, 0, 0, 0, 0, n]);
            let b = Mac([2, 0, 0, 0, 1, n.wrapping_mul(7)]);
            let rssi = air.rssi(a, b);
            assert_eq!(rssi, air.rssi(b, a));
            assert!((-70..=-40).contains(&rssi), "{rssi}");
        }
    }
}
