//! The TransportActor (TR-1, TR-2, PROTO-2, PROTO-5, MEM-3): every frame in and out of a node.
//!
//! Outgoing bodies are stamped into envelopes (this node's id, its incarnation, a strictly
//! increasing sequence number), encoded once with an explicit MTU check and tagged, and handed
//! to every destination as the same [`Bytes`].
//!
//! Incoming frames take this path:
//!
//! ```text
//!   socket / hub / dongle ──► link reader: decode + authenticate ──► bounded queues ──► actor:
//!                              (garbage never queued; counted)      urgent │ other     admission ──► membership
//!                                                                   (full: dropped,    (core)    └─► election
//!                                                                    queue_full)
//! ```
//!
//! Each link's reader task decodes and authenticates what it reads, so that garbage and forgeries
//! never enter a queue, and sorts what passes into two bounded queues: election messages
//! (`urgent`), and everything else. The actor takes an urgent frame first (up to eight in a row
//! while other frames wait, so that membership is never starved), so a flood of other frames
//! (or of replays, which only the actor can recognise) does not delay a heartbeat by more than
//! one bounded queue's worth. A frame that finds its queue full is dropped and counted
//! (`queue_full`): nothing between a socket and the core queues without bound (TR-2). The
//! memory hub's slot queues are bounded the same way.
//!
//! On UDP each configured peer address (`link.udp.peers`) also has a socket of its own, on the
//! node's port and connected to that address, whose frames go to a third queue that the actor
//! takes first (up to 32 in a row while others wait): the kernel hands a
//! connected socket its peer's datagrams only, so a flood from anywhere else fills neither the
//! buffer nor the queue the members' frames wait in. Dropped frames are counted one by one and
//! summed up in one log line every ten seconds, never logged one by one above debug.
//!
//! The actor then asks [`conclave_core::admission`] whether the frame may act on this node:
//! after a restart a sender is challenged before any of its frames is admitted, replays are
//! refused, and a frame from an address that does not own the sender's id on that link while
//! the owner is live moves nothing (a fresh `Hello` from it goes to membership to be refused,
//! a paced few of them; a replayed one is a replay like any other). Every
//! refusal is counted by reason in `conclave_frames_dropped_total{reason}` and the frame never
//! reaches the rest of the node. The sender of garbage cannot crash or stall it: every failure
//! is a value, and receiving never blocks on anything but the socket. Only admitted frames go on
//! to membership and the election, at the rate their real senders send them.
//!
//! The transport learns which link and address reach each peer from the frames admission
//! accepts (and the address a sender answered a challenge from). A body for a peer with no
//! learned route goes to every configured address, addressed to that peer (others drop it as
//! misaddressed), which is how the first contact happens. The UDP addresses of members added
//! at runtime, which no configuration file names, come from the replicated configuration's
//! address book ([`MemberDirectory`], MEMB-3) and are tried the same way.
//!
//! Links: `udp` (a tokio socket), `espnow` (the USB dongle, through `conclave-espnow`'s
//! driver) and `memory` (a [`MemoryHub`], for tests). On ESP-NOW, a peer's MAC address is
//! learned from its frames and added to the dongle's peer table so that frames to it go
//! unicast; discovery, broadcasts, and an AppendEntries the core multicasts to two or more
//! radio peers (issue 27, item 1) use the radio's broadcast address; every frame is cut
//! to the dongle's payload limit; heartbeats and pings are marked droppable for the dongle's
//! queue, votes and everything else essential (ESP-4); the signal strength of each peer is
//! kept (PRI-1), exported as `conclave_dongle_rssi_dbm{peer}` and handed to the election
//! when it changed (by 1 dB, at most once a second per peer). ESP-NOW broadcast is
//! neither encrypted nor authenticated by the radio: sealed frames are what keep forged
//! frames out and values private (ESP-8, PROTO-9).
//!
//! With a key, frames are sealed (PROTO-9, issue 26 item 3): each start draws its first
//! sequence number at random ([`conclave_protocol::first_seq`]), which keeps the nonces of two
//! starts that share an incarnation apart, and [`ReplaceKeys`] moves the codec, which every
//! link reader shares, to a new ring of keys during a rotation.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use actix::prelude::*;
use bytes::Bytes;
use conclave_core::election::{ElectionMessage, PeerSignal};
use conclave_core::{Admission, AdmissionAction, AdmissionNotice, FrameHeader, LinkAddr, Verdict};
use conclave_espnow::{DongleEvent, DongleHandle, DongleStatus, Mac, Priority};
use conclave_protocol::{
    Body, BodyKind, DropReason, ESPNOW_V1_MTU, Envelope, FrameCodec, KeyRing, PROTOCOL_VERSION,
    PeerId, UDP_MTU, first_seq,
};
use futures_util::Stream;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};

use crate::clock::NodeClock;
use crate::member_directory::MemberDirectory;
use crate::memory::{MemoryFrame, MemoryHub};
use crate::messages::{
    Destination, ElectionArrived, FrameArrived, HelloContested, PeerAdmission, PeerSignalUpdate,
    Transmit,
};
use crate::metrics::NodeMetrics;

/// Largest datagram read from a socket; anything longer is cut by the kernel and then fails
/// to decode, which is what it deserves.
const MAX_DATAGRAM: usize = 2048;

/// Which link a frame used; the `link` label of `conclave_frames_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LinkKind {
    /// UDP over IP.
    Udp,
    /// The in-process memory hub.
    Memory,
    /// ESP-NOW radio through the dongle.
    EspNow,
}

impl LinkKind {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            LinkKind::Udp => "udp",
            LinkKind::Memory => "memory",
            LinkKind::EspNow => "espnow",
        }
    }
}

/// Where on a link a peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LinkAddress {
    /// A UDP socket address.
    Udp(SocketAddr),
    /// A memory hub slot.
    Memory(u32),
    /// An ESP-NOW MAC address.
    EspNow(Mac),
}

impl LinkAddress {
    /// The link it belongs to.
    pub fn kind(self) -> LinkKind {
        match self {
            LinkAddress::Udp(_) => LinkKind::Udp,
            LinkAddress::Memory(_) => LinkKind::Memory,
            LinkAddress::EspNow(_) => LinkKind::EspNow,
        }
    }

    /// The opaque form membership keeps: `udp:127.0.0.1:7946`, `mem:3`.
    pub fn to_link_addr(self) -> LinkAddr {
        match self {
            LinkAddress::Udp(addr) => LinkAddr::new(format!("udp:{addr}")),
            LinkAddress::Memory(slot) => LinkAddr::new(format!("mem:{slot}")),
            LinkAddress::EspNow(mac) => LinkAddr::new(format!("espnow:{mac}")),
        }
    }

    /// Parses the opaque form back.
    pub fn parse(addr: &LinkAddr) -> Option<Self> {
        let (scheme, rest) = addr.as_str().split_once(':')?;
        match scheme {
            "udp" => rest.parse().ok().map(LinkAddress::Udp),
            "mem" => rest.parse().ok().map(LinkAddress::Memory),
            "espnow" => rest.parse().ok().map(LinkAddress::EspNow),
            _ => None,
        }
    }
}

/// Frames each inbound queue holds: a few hundred frames is tens of milliseconds of an
/// election's traffic, and a bounded delay for a heartbeat behind a burst.
pub const INBOUND_QUEUE: usize = 256;

/// A frame a link reader decoded and authenticated, waiting for admission.
#[derive(Debug)]
struct Inbound {
    from: LinkAddress,
    envelope: Envelope,
    /// Signal strength, for frames heard over the radio.
    rssi: Option<i8>,
}

/// Whether a frame goes to the urgent queue: election messages, whose delay costs a leader.
///
/// The handshake is not urgent on purpose: a `ChallengeAck` that overtook its sender's older
/// frames would make them look like replays of frames made before the proof (they are
/// refused either way, but as `unverified`, which is what they are, when they come first).
fn is_urgent(kind: BodyKind) -> bool {
    matches!(
        kind,
        BodyKind::RequestVote
            | BodyKind::Vote
            | BodyKind::AppendEntries
            | BodyKind::AppendResp
            | BodyKind::InstallSnapshot
            | BodyKind::SnapshotResp
            | BodyKind::LeaderAssign
            | BodyKind::TimeoutNow
    )
}

/// What every link reader holds: the codec to decode and authenticate with, and the sending
/// ends of the two inbound queues.
#[derive(Debug, Clone)]
struct InboundSender {
    codec: FrameCodec,
    urgent: mpsc::Sender<Inbound>,
    other: mpsc::Sender<Inbound>,
    metrics: NodeMetrics,
}

impl InboundSender {
    /// The sender for a configured peer's own socket: everything it reads goes to the members'
    /// queue, in the order it came, whatever the body.
    fn for_members(&self, members: &mpsc::Sender<Inbound>) -> Self {
        Self {
            codec: self.codec.clone(),
            urgent: members.clone(),
            other: members.clone(),
            metrics: self.metrics.clone(),
        }
    }

    /// Decodes and authenticates one received frame and queues it; what fails, or finds its
    /// queue full, is dropped and counted (TR-2).
    fn offer(&self, from: LinkAddress, bytes: &[u8], rssi: Option<i8>) {
        let envelope = match self.codec.decode(bytes) {
            Ok(envelope) => envelope,
            Err(err) => {
                let reason = err.drop_reason();
                self.metrics.frame_dropped(reason);
                debug!(from = ?from, reason = reason.label(), %err, "frame dropped");
                return;
            }
        };
        let queue = if is_urgent(envelope.body.kind()) {
            &self.urgent
        } else {
            &self.other
        };
        let inbound = Inbound {
            from,
            envelope,
            rssi,
        };
        if let Err(TrySendError::Full(inbound)) = queue.try_send(inbound) {
            self.metrics.frame_dropped(DropReason::QueueFull);
            debug!(from = ?inbound.from, kind = inbound.envelope.body.kind().label(), "inbound queue full; frame dropped");
        }
    }
}

/// How often dropped frames are summed up in the log. A dropped frame is logged one by one
/// only at debug level: one line per frame would let whoever floods a node fill its disk.
const DROP_SUMMARY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);
/// Dropped frames in one [`DROP_SUMMARY_INTERVAL`] from which the summary is a warning: a few
/// are routine (frames for another node while routes are learned, a peer's first frames
/// before it answered the challenge); this many is a flood or a misconfiguration.
const DROP_SUMMARY_WARN: u64 = 100;

/// Urgent frames the actor takes in a row while other frames wait: election traffic goes first,
/// but a flood of it (replayed heartbeats, say) cannot starve membership's pings and the
/// handshake altogether.
const URGENT_STREAK: u32 = 8;

/// Frames from configured peers' own sockets the actor takes in a row while other frames
/// wait: members go first, but even a member that floods cannot stop everyone else.
const MEMBER_STREAK: u32 = 32;

/// The receiving ends of the inbound queues, as one stream that yields a configured peer's
/// frame whenever one is waiting (up to [`MEMBER_STREAK`] in a row while others wait), then an
/// urgent frame, except that after [`URGENT_STREAK`] of them in a row a waiting other frame
/// goes first.
#[derive(Debug)]
struct InboundQueues {
    /// Frames read from the sockets connected to configured peers: a flood from any other
    /// address never enters this queue.
    members: mpsc::Receiver<Inbound>,
    urgent: mpsc::Receiver<Inbound>,
    other: mpsc::Receiver<Inbound>,
    /// Members' frames yielded since the last frame of another queue.
    member_streak: u32,
    /// Urgent frames yielded since the last other frame.
    streak: u32,
}

impl InboundQueues {
    /// The urgent and other queues, urgent first within its streak.
    fn poll_shared(&mut self, cx: &mut TaskContext<'_>) -> Poll<Option<Inbound>> {
        if self.streak >= URGENT_STREAK {
            if let Poll::Ready(Some(inbound)) = self.other.poll_recv(cx) {
                self.streak = 0;
                return Poll::Ready(Some(inbound));
            }
        }
        let urgent = self.urgent.poll_recv(cx);
        if let Poll::Ready(Some(inbound)) = urgent {
            self.streak = self.streak.saturating_add(1);
            return Poll::Ready(Some(inbound));
        }
        match self.other.poll_recv(cx) {
            Poll::Ready(Some(inbound)) => {
                self.streak = 0;
                Poll::Ready(Some(inbound))
            }
            // The transport itself keeps a sender, so both close only when it is gone.
            Poll::Ready(None) if urgent.is_ready() => Poll::Ready(None),
            _ => Poll::Pending,
        }
    }
}

impl Stream for InboundQueues {
    type Item = Inbound;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Inbound>> {
        if self.member_streak < MEMBER_STREAK {
            if let Poll::Ready(Some(inbound)) = self.members.poll_recv(cx) {
                self.member_streak += 1;
                return Poll::Ready(Some(inbound));
            }
        }
        match self.poll_shared(cx) {
            Poll::Ready(next) => {
                self.member_streak = 0;
                Poll::Ready(next)
            }
            Poll::Pending => match self.members.poll_recv(cx) {
                // Nobody else is waiting: the members' streak goes on.
                Poll::Ready(Some(inbound)) => {
                    self.member_streak = 1;
                    Poll::Ready(Some(inbound))
                }
                _ => Poll::Pending,
            },
        }
    }
}

/// The inbound queues: the readers' sending ends (the shared ones, and the members') and the
/// actor's receiving end.
fn inbound_queues(
    codec: FrameCodec,
    metrics: NodeMetrics,
) -> (InboundSender, mpsc::Sender<Inbound>, InboundQueues) {
    let (members_tx, members_rx) = mpsc::channel(INBOUND_QUEUE);
    let (urgent_tx, urgent_rx) = mpsc::channel(INBOUND_QUEUE);
    let (other_tx, other_rx) = mpsc::channel(INBOUND_QUEUE);
    (
        InboundSender {
            codec,
            urgent: urgent_tx,
            other: other_tx,
            metrics,
        },
        members_tx,
        InboundQueues {
            members: members_rx,
            urgent: urgent_rx,
            other: other_rx,
            member_streak: 0,
            streak: 0,
        },
    )
}

/// Receive buffer asked for every UDP socket of the node. The kernel caps it at
/// `net.core.rmem_max` (often 208 KiB; raise it for more): a burst of a few thousand frames
/// waits there instead of being lost while the reader is busy.
const UDP_RECV_BUFFER: usize = 4 << 20;

/// A UDP socket bound at `local`, non-blocking, with the receive buffer raised; with
/// `share_port`, other sockets of this process may bind the same address (`SO_REUSEPORT`),
/// which is how each configured peer gets a socket of its own on the node's port.
fn udp_socket(local: SocketAddr, share_port: bool) -> std::io::Result<std::net::UdpSocket> {
    let family = if local.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let socket = rustix::net::socket_with(family, SocketType::DGRAM, SocketFlags::CLOEXEC, None)?;
    if share_port {
        rustix::net::sockopt::set_socket_reuseport(&socket, true)?;
    }
    // Best effort: a smaller buffer than asked for is what the system allows.
    if let Err(err) = rustix::net::sockopt::set_socket_recv_buffer_size(&socket, UDP_RECV_BUFFER) {
        debug!(%err, "udp receive buffer not raised");
    }
    rustix::net::bind(&socket, &local)?;
    let socket = std::net::UdpSocket::from(socket);
    socket.set_nonblocking(true)?;
    Ok(socket)
}

/// Binds the node's UDP socket (`link.udp.listen`). A port another process holds fails with
/// "address in use" as with any plain bind: the port is tried without sharing first. The
/// socket is then bound for sharing within this node, where [`TransportActor`] gives each
/// configured peer a socket connected to it, on the same port: the kernel hands a
/// connected socket only its peer's datagrams, so a flood from any other address, however
/// large, never fills the buffer the members' frames wait in (TR-2).
pub fn bind_udp(listen: SocketAddr) -> std::io::Result<UdpSocket> {
    let local = std::net::UdpSocket::bind(listen)?.local_addr()?;
    UdpSocket::from_std(udp_socket(local, true)?)
}

/// A socket on the node's port connected to the configured peer at `peer`: it receives that
/// address's datagrams and nothing else.
fn member_socket(local: SocketAddr, peer: SocketAddr) -> std::io::Result<UdpSocket> {
    let socket = udp_socket(local, true)?;
    socket.connect(peer)?;
    UdpSocket::from_std(socket)
}

/// Something the dongle driver reported (from the driver's event channel to the actor).
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct DongleNotice(DongleEvent);

/// Who receives accepted frames: set once after the node's actors are started.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct ConnectReceivers {
    /// Every accepted frame.
    pub membership: Recipient<FrameArrived>,
    /// Accepted election messages.
    pub election: Recipient<ElectionArrived>,
    /// Senders admission just verified (membership greets them) or forgot (membership
    /// forgets them too).
    pub verified: Recipient<PeerAdmission>,
    /// `Hello`s admission found contested (membership refuses them, MEM-3).
    pub contested: Recipient<HelloContested>,
    /// Peers' smoothed radio signal strength, when it changed (the election, PRI-1).
    pub signal: Recipient<PeerSignalUpdate>,
}

/// The routes the transport has learned, for the status answer.
#[derive(Debug, Message)]
#[rtype(result = "Vec<(PeerId, LinkAddr)>")]
pub struct GetRoutes;

/// Configured UDP peer addresses from which no frame has come since the node started, with
/// how long they have been sent to, for the status answer.
#[derive(Debug, Message)]
#[rtype(result = "Vec<(LinkAddr, std::time::Duration)>")]
pub struct GetUnanswered;

/// The dongle's state, for the status answer.
#[derive(Debug, Message)]
#[rtype(result = "Option<DongleReport>")]
pub struct GetDongle;

/// Waits until what the links hold for sending has left — the dongle's queue is empty and
/// every `SEND` acknowledged — or `within` has passed. A stopping node asks for it after its
/// `Goodbye`: the UDP and memory links send at once, but a dongle queues, and stopping the
/// driver with the `Goodbye` still queued would leave the peers to find out by silence.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Drain {
    /// The longest wait.
    pub within: std::time::Duration,
}

/// The ESP-NOW link as the status answer shows it.
#[derive(Debug, Clone)]
pub struct DongleReport {
    /// The port (device path).
    pub port: String,
    /// The driver's snapshot.
    pub status: DongleStatus,
    /// Signal strength of each peer heard over the radio, dBm (smoothed).
    pub rssi: Vec<(PeerId, f64)>,
}

/// The ESP-NOW link: the driver's handle and its events.
#[derive(Debug)]
pub struct EspNowLink {
    /// The port, for logs and the status answer.
    pub port: String,
    /// The driver.
    pub handle: DongleHandle,
    /// The driver's events, taken by the actor when it starts.
    pub events: Option<mpsc::Receiver<DongleEvent>>,
    /// The local master key for unicast peers; frames to them are encrypted when set.
    pub lmk: Option<[u8; 16]>,
    /// Peers with a local master key of their own, used instead of `lmk`.
    pub peer_lmks: BTreeMap<PeerId, [u8; 16]>,
}

/// The links a transport uses.
#[derive(Debug, Default)]
pub struct Links {
    /// A bound UDP socket and the addresses to broadcast to.
    pub udp: Option<(Arc<UdpSocket>, Vec<SocketAddr>)>,
    /// A memory hub and this node's slot.
    pub memory: Option<(MemoryHub, u32)>,
    /// The ESP-NOW dongle.
    pub espnow: Option<EspNowLink>,
}

/// How much of the smoothed RSSI a new reading replaces.
const RSSI_WEIGHT: f64 = 0.2;
/// A peer's signal strength goes to the election at most this often (PRI-1)...
const SIGNAL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
/// ... and only once it moved by this much, in dB, since it last went.
const SIGNAL_STEP_DB: f64 = 1.0;
/// ESP-NOW peers added to the dongle for unicast; the radio holds 20, and one place is left
/// free so that a newcomer can always be answered.
const MAX_ESPNOW_PEERS: usize = 19;

/// Whether the dongle may drop this body first when its queue is full (ESP-4): heartbeats,
/// pings and other periodic frames are sent again anyway; votes, assignments and log entries
/// are not.
fn radio_priority(body: &Body) -> Priority {
    match body {
        Body::Ping(_) | Body::Pong(_) | Body::Hello(_) | Body::AppendResp(_) => Priority::Droppable,
        Body::AppendEntries(append) if append.entries.is_empty() => Priority::Droppable,
        _ => Priority::Essential,
    }
}

/// A frame encoded and tagged for sending, with what its metrics and the dongle's queue need
/// to know of its body.
struct SealedFrame {
    bytes: Bytes,
    kind: &'static str,
    priority: Priority,
}

/// The TransportActor. See the [module docs](self).
pub struct TransportActor {
    /// `node = <id>`, entered in every handler so that logs of nodes sharing a process
    /// (tests, the demo) say whose they are.
    span: tracing::Span,
    node_id: PeerId,
    incarnation: u64,
    next_seq: u64,
    codec: FrameCodec,
    /// Whether an authenticated frame may act on this node (PROTO-5, MEM-3).
    admission: Admission,
    clock: NodeClock,
    /// The readers' end of the inbound queues; the dongle's reader is given a clone.
    inbound: InboundSender,
    /// The members' queue, for the readers of sockets connected to configured peers.
    members: mpsc::Sender<Inbound>,
    /// The actor's end, until it starts.
    inbound_queues: Option<InboundQueues>,
    links: Links,
    routes: BTreeMap<PeerId, LinkAddress>,
    /// Configured UDP peer addresses a decoded, authenticated frame has come from.
    answered: BTreeSet<SocketAddr>,
    /// When the node started sending to the configured addresses.
    started: conclave_core::Instant,
    membership: Option<Recipient<FrameArrived>>,
    election: Option<Recipient<ElectionArrived>>,
    verified: Option<Recipient<PeerAdmission>>,
    contested: Option<Recipient<HelloContested>>,
    metrics: NodeMetrics,
    readers: Vec<JoinHandle<()>>,
    /// MACs added to the dongle's peer table.
    espnow_peers: BTreeSet<Mac>,
    /// Smoothed signal strength of each peer heard over the radio (PRI-1).
    rssi: BTreeMap<PeerId, f64>,
    signal: Option<Recipient<PeerSignalUpdate>>,
    /// The strength last handed to the election for each peer, and when.
    signal_sent: BTreeMap<PeerId, (f64, conclave_core::Instant)>,
    /// MEMB-3: the addresses of members added at runtime, tried as configured ones are.
    directory: MemberDirectory,
}

impl TransportActor {
    /// A transport for `node_id` in its `incarnation`, framing with `codec` and admitting
    /// frames with `admission`; `clock` is the node's.
    pub fn new(
        node_id: PeerId,
        incarnation: u64,
        codec: FrameCodec,
        admission: Admission,
        clock: NodeClock,
        links: Links,
        metrics: NodeMetrics,
    ) -> Self {
        let (inbound, members, inbound_queues) = inbound_queues(codec.clone(), metrics.clone());
        Self {
            span: tracing::info_span!("node", id = %node_id),
            node_id,
            incarnation,
            // `seal` counts up before it stamps, so the first frame carries `first_seq`.
            next_seq: first_seq(start_point()) - 1,
            codec,
            admission,
            clock,
            inbound,
            members,
            inbound_queues: Some(inbound_queues),
            started: clock.now(),
            links,
            routes: BTreeMap::new(),
            answered: BTreeSet::new(),
            membership: None,
            election: None,
            verified: None,
            contested: None,
            metrics,
            readers: Vec::new(),
            espnow_peers: BTreeSet::new(),
            rssi: BTreeMap::new(),
            signal: None,
            signal_sent: BTreeMap::new(),
            directory: MemberDirectory::new(),
        }
    }

    /// MEMB-3: also tries the UDP addresses the replicated configuration gives its members.
    #[must_use]
    pub fn with_member_directory(mut self, directory: MemberDirectory) -> Self {
        self.directory = directory;
        self
    }

    /// The largest frame every link can carry: the dongle's payload limit once it is known
    /// (ESP-NOW v1: 250 bytes), the UDP limit otherwise (PROTO-4).
    fn mtu(&self) -> usize {
        match &self.links.espnow {
            Some(link) => link
                .handle
                .status()
                .info
                .map_or(ESPNOW_V1_MTU, |info| usize::from(info.max_payload))
                .min(UDP_MTU),
            None => UDP_MTU,
        }
    }

    /// Wraps `body` in the next envelope and encodes it once, for every address it goes to.
    fn seal(&mut self, to: Option<PeerId>, body: Body) -> Option<SealedFrame> {
        let kind = body.kind().label();
        let priority = radio_priority(&body);
        self.next_seq += 1;
        let envelope = Envelope::new(
            self.codec.cluster(),
            self.node_id,
            self.incarnation,
            self.next_seq,
            to,
            body,
        );
        match self.codec.encode(&envelope, self.mtu()) {
            Ok(bytes) => Some(SealedFrame {
                bytes: Bytes::from(bytes),
                kind,
                priority,
            }),
            Err(err) => {
                warn!(kind, %err, "frame not sent");
                None
            }
        }
    }

    fn send_to(&self, address: LinkAddress, sealed: &SealedFrame) {
        let frame = &sealed.bytes[..];
        match address {
            LinkAddress::Udp(addr) => {
                let Some((socket, _)) = &self.links.udp else {
                    return;
                };
                // A UDP send that would block is a lost datagram, which the protocol survives;
                // waiting for the socket would stall every other frame instead.
                if let Err(err) = socket.try_send_to(frame, addr) {
                    debug!(%addr, %err, "udp send failed");
                    return;
                }
            }
            LinkAddress::Memory(slot) => {
                let Some((hub, own)) = &self.links.memory else {
                    return;
                };
                hub.send(*own, slot, sealed.bytes.clone());
            }
            LinkAddress::EspNow(mac) => {
                let Some(link) = &self.links.espnow else {
                    return;
                };
                // Unicast only to peers in the dongle's table; the others hear a broadcast
                // addressed to them inside the envelope. The driver owns what it queues, so
                // this is the one copy of a frame on its way out.
                let dst = if mac.is_broadcast() || self.espnow_peers.contains(&mac) {
                    mac
                } else {
                    Mac::BROADCAST
                };
                if let Err(err) = link.handle.send(dst, frame.to_vec(), sealed.priority) {
                    debug!(%err, "espnow send refused");
                    return;
                }
            }
        }
        self.metrics
            .frame(address.kind().label(), "out", sealed.kind);
    }

    /// Every address to try when no route is known: the configured UDP peers, every memory
    /// slot, and the radio's broadcast address.
    fn bootstrap_addresses(&self) -> Vec<LinkAddress> {
        let mut addresses = Vec::new();
        if self.links.espnow.is_some() {
            addresses.push(LinkAddress::EspNow(Mac::BROADCAST));
        }
        if let Some((socket, peers)) = &self.links.udp {
            addresses.extend(peers.iter().copied().map(LinkAddress::Udp));
            let local = socket.local_addr().ok();
            addresses.extend(
                self.directory
                    .udp_addresses()
                    .into_iter()
                    .filter(|addr| !peers.contains(addr) && Some(*addr) != local)
                    .map(LinkAddress::Udp),
            );
        }
        if let Some((hub, own)) = &self.links.memory {
            addresses.extend(
                hub.slots()
                    .into_iter()
                    .filter(|slot| slot != own)
                    .map(LinkAddress::Memory),
            );
        }
        addresses
    }

    fn transmit(&mut self, transmit: Transmit) {
        let body = transmit.body;
        match transmit.to {
            Destination::Peer(peer) => self.send_to_peer(peer, body),
            Destination::Peers(peers) => self.send_to_peers(peers, body),
            Destination::Reply { peer, origin } => {
                let Some(frame) = self.seal(Some(peer), body) else {
                    return;
                };
                match LinkAddress::parse(&origin) {
                    Some(address) => self.send_to(address, &frame),
                    None => warn!(%origin, "cannot reply: unknown link address"),
                }
            }
            Destination::Broadcast => {
                let Some(frame) = self.seal(None, body) else {
                    return;
                };
                let mut addresses = self.bootstrap_addresses();
                // One radio broadcast reaches every ESP-NOW peer at once.
                addresses.extend(
                    self.routes
                        .values()
                        .copied()
                        .filter(|address| address.kind() != LinkKind::EspNow),
                );
                addresses.sort();
                addresses.dedup();
                for address in addresses {
                    self.send_to(address, &frame);
                }
            }
        }
    }

    /// Sends `body` to `peer` by its learned route, or to every bootstrap address.
    fn send_to_peer(&mut self, peer: PeerId, body: Body) {
        let Some(frame) = self.seal(Some(peer), body) else {
            return;
        };
        match self.routes.get(&peer).copied() {
            Some(address) => self.send_to(address, &frame),
            None => {
                for address in self.bootstrap_addresses() {
                    self.send_to(address, &frame);
                }
            }
        }
    }

    /// Sends the same `body` to several peers (issue 27, item 1): the peers the radio reaches
    /// hear it in one broadcast frame, addressed to nobody in particular, when two or more of
    /// them would otherwise get a copy each; every other peer gets its own frame. The core
    /// multicasts only what any peer may hear (an AppendEntries).
    fn send_to_peers(&mut self, peers: Vec<PeerId>, body: Body) {
        let (radio, others): (Vec<PeerId>, Vec<PeerId>) = peers.into_iter().partition(|peer| {
            self.routes
                .get(peer)
                .is_some_and(|address| address.kind() == LinkKind::EspNow)
        });
        if radio.len() >= 2 {
            if let Some(frame) = self.seal(None, body.clone()) {
                self.send_to(LinkAddress::EspNow(Mac::BROADCAST), &frame);
            }
        } else {
            for peer in radio {
                self.send_to_peer(peer, body.clone());
            }
        }
        for peer in others {
            self.send_to_peer(peer, body.clone());
        }
    }

    /// Sends `body` to `to` through `origin`, whatever route is known: the admission
    /// handshake goes where the frame that asked for it came from.
    fn reply(&mut self, to: PeerId, origin: &LinkAddr, body: Body) {
        let Some(address) = LinkAddress::parse(origin) else {
            warn!(%origin, "cannot reply: unknown link address");
            return;
        };
        if let Some(frame) = self.seal(Some(to), body) {
            self.send_to(address, &frame);
        }
    }

    /// A decoded, authenticated frame from a link reader: admission decides what it may do.
    fn receive(&mut self, inbound: Inbound) {
        let Inbound {
            from: address,
            envelope,
            rssi,
        } = inbound;
        let link = address.kind().label();
        let kind = envelope.body.kind().label();
        if let LinkAddress::Udp(addr) = address {
            self.note_answer(addr);
        }
        let origin = address.to_link_addr();
        let header = FrameHeader {
            from: envelope.from,
            to: envelope.to,
            incarnation: envelope.incarnation,
            seq: envelope.seq,
        };
        let unix_secs = crate::events::unix_millis(std::time::SystemTime::now()) / 1000;
        let verdict = self.admission.handle_frame(
            self.clock.now(),
            unix_secs,
            &origin,
            &header,
            &envelope.body,
        );
        match verdict {
            Verdict::Ignore => {}
            Verdict::Drop(reason) => {
                self.metrics.frame_dropped(reason);
                debug!(
                    from = %header.from,
                    at = %origin,
                    incarnation = header.incarnation,
                    seq = header.seq,
                    kind,
                    reason = reason.label(),
                    "frame dropped"
                );
            }
            Verdict::Consumed => self.metrics.frame(link, "in", kind),
            Verdict::Contested => {
                self.metrics.frame(link, "in", kind);
                if let Some(contested) = &self.contested {
                    contested.do_send(HelloContested {
                        from: header.from,
                        origin,
                    });
                }
            }
            Verdict::Accept => {
                self.metrics.frame(link, "in", kind);
                let leaving = matches!(envelope.body, Body::Goodbye(_));
                self.routes.insert(header.from, address);
                if let LinkAddress::EspNow(mac) = address {
                    self.learn_radio_peer(header.from, mac, rssi);
                }
                self.deliver(header.from, origin, envelope.body);
                if leaving {
                    // Admission forgot it too; what is learned of peers stays bounded by the
                    // peers admission knows.
                    self.routes.remove(&header.from);
                    self.rssi.remove(&header.from);
                    self.signal_sent.remove(&header.from);
                }
            }
        }
        self.carry_out_admission();
    }

    /// Hands an admitted frame on. Every frame goes to membership as proof of life; an
    /// election message's body goes only to the election, so that it is not copied for a
    /// reader that ignores it.
    fn deliver(&self, from: PeerId, origin: LinkAddr, body: Body) {
        let (membership_body, election_message) = match ElectionMessage::try_from(body) {
            Ok(message) => (None, Some(message)),
            Err(body) => (Some(body), None),
        };
        if let Some(membership) = &self.membership {
            membership.do_send(FrameArrived {
                from,
                origin,
                body: membership_body,
            });
        }
        if let (Some(election), Some(message)) = (&self.election, election_message) {
            election.do_send(ElectionArrived { from, message });
        }
    }

    /// Carries out what admission asked for: handshake replies, newly verified senders,
    /// notices for the operator.
    fn carry_out_admission(&mut self) {
        while let Some(action) = self.admission.poll_action() {
            match action {
                AdmissionAction::Reply { to, origin, body } => self.reply(to, &origin, body),
                AdmissionAction::Verified { peer, origin } => {
                    debug!(%peer, at = %origin, "peer verified");
                    if let Some(address) = LinkAddress::parse(&origin) {
                        self.routes.insert(peer, address);
                    }
                    if let Some(verified) = &self.verified {
                        verified.do_send(PeerAdmission::Verified { peer, origin });
                    }
                }
                AdmissionAction::Forgotten { peer } => {
                    debug!(%peer, "silent peer forgotten to make room for a new one");
                    self.routes.remove(&peer);
                    self.rssi.remove(&peer);
                    self.signal_sent.remove(&peer);
                    if let Some(verified) = &self.verified {
                        verified.do_send(PeerAdmission::Forgotten { peer });
                    }
                }
                AdmissionAction::Notice(AdmissionNotice::IncarnationAhead {
                    peer,
                    origin,
                    incarnation,
                    clock,
                }) => warn!(
                    %peer,
                    at = %origin,
                    incarnation,
                    clock,
                    ahead_s = incarnation.saturating_sub(clock),
                    "refusing frames whose incarnation is more than {} s ahead of this node's \
                     clock: check that both clocks are synchronised (NTP); otherwise the frame \
                     is forged or replayed with a key that has leaked",
                    self.admission.config().max_incarnation_ahead
                ),
                AdmissionAction::Notice(AdmissionNotice::PeerLimit {
                    peer,
                    origin,
                    limit,
                }) => warn!(
                    %peer,
                    at = %origin,
                    limit,
                    "peer table full: refusing a new peer that is not a configured voter \
                     (cluster.voters always have room)"
                ),
            }
        }
    }
}

impl TransportActor {
    /// A frame came from `addr`: if it is a configured peer address, it has answered.
    fn note_answer(&mut self, addr: SocketAddr) {
        if self.answered.contains(&addr) {
            return;
        }
        if let Some((_, peers)) = &self.links.udp {
            if peers.contains(&addr) {
                self.answered.insert(addr);
            }
        }
    }

    /// Gives each configured UDP peer a socket of its own, connected to it on this node's
    /// port, read into the members' queue (TR-2): what it sends waits neither behind a flood
    /// in the kernel's buffer of the shared socket nor in the shared queues. Without them
    /// (a system that refuses to share the port) the members' frames take the shared path.
    fn start_member_readers(&mut self) {
        let Some((socket, peers)) = &self.links.udp else {
            return;
        };
        let Ok(local) = socket.local_addr() else {
            return;
        };
        let inbound = self.inbound.for_members(&self.members);
        for &peer in peers {
            if peer == local || peer.is_ipv4() != local.is_ipv4() {
                continue;
            }
            let member = match member_socket(local, peer) {
                Ok(member) => member,
                Err(err) => {
                    warn!(
                        %peer,
                        %err,
                        "no socket of its own for this link.udp.peers address; its frames \
                         share the socket every other sender uses"
                    );
                    continue;
                }
            };
            let inbound = inbound.clone();
            self.readers.push(actix_rt::spawn(async move {
                let mut buffer = vec![0u8; MAX_DATAGRAM];
                loop {
                    match member.recv(&mut buffer).await {
                        Ok(len) => inbound.offer(LinkAddress::Udp(peer), &buffer[..len], None),
                        // "Connection refused" while the peer is down: nothing to do here.
                        Err(err) => debug!(%peer, %err, "udp receive failed"),
                    }
                }
            }));
        }
    }

    /// One log line for the frames dropped since the last one, by reason (TR-2): every one is
    /// counted in `conclave_frames_dropped_total`, none is logged on its own above debug.
    fn summarise_drops(&self) {
        let tally = self.metrics.take_dropped_tally();
        let total: u64 = tally.iter().map(|(_, count)| count).sum();
        if total == 0 {
            return;
        }
        let by_reason = tally
            .iter()
            .map(|(reason, count)| format!("{}={count}", reason.label()))
            .collect::<Vec<_>>()
            .join(" ");
        let window_s = DROP_SUMMARY_INTERVAL.as_secs();
        // A peer that cannot be understood at all is a configuration to fix, not a flood:
        // another protocol version, or frames sealed under a key this node does not hold.
        // Said at warning level however few came.
        if let Some((_, count)) = tally.iter().find(|(r, _)| *r == DropReason::Version) {
            warn!(
                dropped = count,
                "frames of another protocol version dropped in the last {window_s} s: a peer runs \
                 a conclave release that does not speak version {PROTOCOL_VERSION} of the wire \
                 protocol; upgrade every node (docs/operations.md, \"Upgrading\")"
            );
        }
        if let Some((_, count)) = tally.iter().find(|(r, _)| *r == DropReason::BadTag) {
            warn!(
                dropped = count,
                "frames that do not open dropped in the last {window_s} s: sealed under a key \
                 this node does not hold (check cluster.psk_file and cluster.psk_next_file on \
                 every node), corrupted, or forged"
            );
        }
        if total >= DROP_SUMMARY_WARN {
            warn!(
                dropped = total,
                %by_reason,
                "received frames dropped in the last {window_s} s (flood, replays or a \
                 misconfigured peer?); see conclave_frames_dropped_total"
            );
        } else {
            debug!(dropped = total, %by_reason, "received frames dropped in the last {window_s} s");
        }
    }

    /// A frame came over the radio from `peer` at `mac`: add it to the dongle's peer table
    /// (for unicast) and smooth its signal strength (PRI-1).
    fn learn_radio_peer(&mut self, peer: PeerId, mac: Mac, rssi: Option<i8>) {
        if let Some(link) = &self.links.espnow {
            if !self.espnow_peers.contains(&mac) && self.espnow_peers.len() < MAX_ESPNOW_PEERS {
                let lmk = link.peer_lmks.get(&peer).copied().or(link.lmk);
                match link
                    .handle
                    .add_peer(mac, lmk.is_some(), lmk.unwrap_or([0; 16]))
                {
                    Ok(()) => {
                        self.espnow_peers.insert(mac);
                    }
                    Err(err) => debug!(%err, %mac, "espnow peer not added"),
                }
            }
        }
        if let Some(rssi) = rssi {
            let reading = f64::from(rssi);
            let smoothed = self
                .rssi
                .get(&peer)
                .map_or(reading, |old| old + RSSI_WEIGHT * (reading - old));
            self.rssi.insert(peer, smoothed);
            self.metrics.set_peer_rssi(peer.as_str(), smoothed);
            self.hand_over_signal(peer, smoothed);
        }
    }

    /// Hands a peer's smoothed signal strength to the election (PRI-1's signal component):
    /// the first time, then only once it moved by [`SIGNAL_STEP_DB`] and at most every
    /// [`SIGNAL_INTERVAL`], not per frame. A full election mailbox drops it (the next frame
    /// tries again).
    fn hand_over_signal(&mut self, peer: PeerId, rssi_dbm: f64) {
        let Some(signal) = &self.signal else {
            return;
        };
        let now = self.clock.now();
        if signal_due(self.signal_sent.get(&peer).copied(), rssi_dbm, now)
            && signal
                .try_send(PeerSignalUpdate(PeerSignal { peer, rssi_dbm }))
                .is_ok()
        {
            self.signal_sent.insert(peer, (rssi_dbm, now));
        }
    }

    fn dongle_event(&mut self, event: DongleEvent) {
        let Some(link) = &self.links.espnow else {
            return;
        };
        let port = link.port.clone();
        match event {
            // The dongle's reader task decodes these into the inbound queues.
            DongleEvent::Received { .. } => {}
            DongleEvent::Connected(info) => {
                // The driver already logged the details at info level.
                debug!(
                    %port,
                    mac = %info.mac,
                    firmware = %info.firmware,
                    channel = info.channel,
                    max_payload = info.max_payload,
                    "ESP-NOW dongle ready"
                );
                self.metrics.set_dongle_connected(true);
            }
            DongleEvent::Disconnected { reason } => {
                warn!(%port, %reason, "ESP-NOW dongle lost; frames queue until it is back");
                self.metrics.set_dongle_connected(false);
            }
            DongleEvent::Refused { reason } => {
                error!(%port, %reason, "ESP-NOW dongle refused");
                self.metrics.set_dongle_connected(false);
            }
            DongleEvent::Rebooted { reason } => {
                warn!(%port, %reason, "ESP-NOW dongle rebooted; setting it up again");
            }
            DongleEvent::TxDone { mac, ok } => {
                if !ok {
                    debug!(%mac, "espnow frame not delivered");
                    self.metrics.dongle_tx_failure();
                }
            }
            DongleEvent::Stats { .. } => {}
            DongleEvent::Log { level, text } => debug!(%port, level, %text, "dongle log"),
        }
        if let Some(link) = &self.links.espnow {
            let status = link.handle.status();
            self.metrics.set_dongle_crc_errors(status.crc_errors);
            self.metrics
                .set_dongle_dropped(status.dropped_droppable, status.refused);
        }
    }
}

impl Actor for TransportActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if let Some(queues) = self.inbound_queues.take() {
            ctx.add_stream(queues);
        }
        ctx.run_interval(DROP_SUMMARY_INTERVAL, |actor, _| {
            let _span = actor.span.clone().entered();
            actor.summarise_drops();
        });
        let me = ctx.address();
        if let Some((socket, _)) = &self.links.udp {
            let socket = Arc::clone(socket);
            let inbound = self.inbound.clone();
            self.readers.push(actix_rt::spawn(async move {
                let mut buffer = vec![0u8; MAX_DATAGRAM];
                loop {
                    match socket.recv_from(&mut buffer).await {
                        Ok((len, from)) => {
                            inbound.offer(LinkAddress::Udp(from), &buffer[..len], None);
                        }
                        // ICMP "port unreachable" from a peer that is down surfaces here on
                        // some systems; it says nothing about this socket.
                        Err(err) => debug!(%err, "udp receive failed"),
                    }
                }
            }));
            self.start_member_readers();
        }
        if let Some((hub, slot)) = &self.links.memory {
            let mut frames = hub.attach(*slot);
            let inbound = self.inbound.clone();
            self.readers.push(actix_rt::spawn(async move {
                while let Some(MemoryFrame { from, bytes }) = frames.recv().await {
                    inbound.offer(LinkAddress::Memory(from), &bytes, None);
                }
            }));
        }
        if let Some(mut events) = self
            .links
            .espnow
            .as_mut()
            .and_then(|link| link.events.take())
        {
            let inbound = self.inbound.clone();
            self.readers.push(actix_rt::spawn(async move {
                while let Some(event) = events.recv().await {
                    match event {
                        DongleEvent::Received {
                            src, rssi, payload, ..
                        } => inbound.offer(LinkAddress::EspNow(src), &payload, Some(rssi)),
                        // The driver's own state and acknowledgements: as many as this node
                        // sends, never driven by what others send.
                        other => me.do_send(DongleNotice(other)),
                    }
                }
            }));
        }
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        for reader in self.readers.drain(..) {
            reader.abort();
        }
        if let Some((hub, slot)) = &self.links.memory {
            hub.detach(*slot);
        }
    }
}

impl StreamHandler<Inbound> for TransportActor {
    fn handle(&mut self, inbound: Inbound, _: &mut Self::Context) {
        let _span = self.span.clone().entered();
        self.receive(inbound);
    }

    /// The transport keeps a sender of its own, so the queues end only with it; nothing to do.
    fn finished(&mut self, _: &mut Self::Context) {}
}

impl Handler<Transmit> for TransportActor {
    type Result = ();
    fn handle(&mut self, transmit: Transmit, _: &mut Self::Context) {
        let _span = self.span.clone().entered();
        self.transmit(transmit);
    }
}

impl Handler<DongleNotice> for TransportActor {
    type Result = ();
    fn handle(&mut self, notice: DongleNotice, _: &mut Self::Context) {
        let _span = self.span.clone().entered();
        self.dongle_event(notice.0);
    }
}

impl Handler<GetDongle> for TransportActor {
    type Result = MessageResult<GetDongle>;
    fn handle(&mut self, _: GetDongle, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.links.espnow.as_ref().map(|link| {
            DongleReport {
                port: link.port.clone(),
                status: link.handle.status(),
                rssi: self
                    .rssi
                    .iter()
                    .map(|(peer, rssi)| (*peer, *rssi))
                    .collect(),
            }
        }))
    }
}

impl Handler<Drain> for TransportActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, drain: Drain, _: &mut Self::Context) -> Self::Result {
        let dongle = self.links.espnow.as_ref().map(|link| link.handle.clone());
        Box::pin(async move {
            let Some(dongle) = dongle else {
                return;
            };
            let deadline = actix::clock::Instant::now() + drain.within;
            loop {
                let status = dongle.status();
                let all_credits_back = status
                    .info
                    .as_ref()
                    .is_none_or(|info| status.credits_free >= info.tx_credits);
                // A dongle that is not there has nothing on its way either.
                let idle = !status.connected || (status.queue_len == 0 && all_credits_back);
                if idle || actix::clock::Instant::now() >= deadline {
                    return;
                }
                actix::clock::sleep(std::time::Duration::from_millis(2)).await;
            }
        })
    }
}

/// Whether a peer's smoothed signal strength `rssi_dbm` goes to the election `now`, given
/// what went last and when: the first one always, later ones once they moved by
/// [`SIGNAL_STEP_DB`] and [`SIGNAL_INTERVAL`] has passed.
fn signal_due(
    last: Option<(f64, conclave_core::Instant)>,
    rssi_dbm: f64,
    now: conclave_core::Instant,
) -> bool {
    last.is_none_or(|(sent, at)| {
        (rssi_dbm - sent).abs() >= SIGNAL_STEP_DB
            && now.saturating_duration_since(at) >= SIGNAL_INTERVAL
    })
}

impl Handler<ConnectReceivers> for TransportActor {
    type Result = ();
    fn handle(&mut self, receivers: ConnectReceivers, _: &mut Self::Context) {
        let _span = self.span.clone().entered();
        self.membership = Some(receivers.membership);
        self.election = Some(receivers.election);
        self.verified = Some(receivers.verified);
        self.contested = Some(receivers.contested);
        self.signal = Some(receivers.signal);
    }
}

impl Handler<GetUnanswered> for TransportActor {
    type Result = MessageResult<GetUnanswered>;
    fn handle(&mut self, _: GetUnanswered, _: &mut Self::Context) -> Self::Result {
        let silent = self.clock.now().saturating_duration_since(self.started);
        let Some((socket, peers)) = &self.links.udp else {
            return MessageResult(Vec::new());
        };
        let local = socket.local_addr().ok();
        MessageResult(
            peers
                .iter()
                .filter(|addr| !self.answered.contains(addr) && Some(**addr) != local)
                .map(|addr| (LinkAddress::Udp(*addr).to_link_addr(), silent))
                .collect(),
        )
    }
}

/// What this start's first sequence number is drawn from (PROTO-5, PROTO-9): the millisecond
/// within the current Unix second in the top 10 bits, random bits below (bit 53 clear).
/// [`first_seq`] takes the top 31 bits, so the first sequence number is 2^16, plus 2^21 per
/// millisecond, plus up to 2^20 at random.
///
/// Why the millisecond: a node that lost its WAL and starts again within the same second gets
/// the same incarnation (the Unix second) as its previous start. Its peers' replay windows
/// admit it only above the highest sequence number they took from that start, and its stream
/// key is the same, so its nonces must not meet the previous start's either. Starting at
/// least 2^20 above anything the previous start (a millisecond earlier or more) began with
/// gives both, unless that start sent a million frames within the second.
fn start_point() -> u64 {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |now| u64::from(now.subsec_millis()));
    (millis << 54) | (start_entropy() & ((1 << 53) - 1))
}

/// 64 random bits for this start's first sequence number (PROTO-9). The standard library keys
/// each hasher from the operating system's randomness, so this needs no generator of its own;
/// the process id and the time are mixed in only as a second source.
fn start_entropy() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(since) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(since.as_nanos());
    }
    hasher.finish()
}

/// Moves the transport, and every link reader, to a new ring of frame keys: a step of a key
/// rotation (PROTO-9). Answers whether the keys were replaced: a node that runs without a key
/// cannot start sealing by a reload.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct ReplaceKeys(pub KeyRing);

impl Handler<ReplaceKeys> for TransportActor {
    type Result = bool;
    fn handle(&mut self, ReplaceKeys(ring): ReplaceKeys, _: &mut Self::Context) -> bool {
        let _span = self.span.clone().entered();
        let before = self.codec.keys().map(|ring| ring.describe());
        let after = ring.describe();
        if !self.codec.replace_keys(ring) {
            return false;
        }
        if before.as_deref() != Some(after.as_str()) {
            info!(
                before = before.as_deref().unwrap_or("none"),
                "frame keys replaced: {after}"
            );
        }
        true
    }
}

impl Handler<GetRoutes> for TransportActor {
    type Result = MessageResult<GetRoutes>;
    fn handle(&mut self, _: GetRoutes, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        MessageResult(
            self.routes
                .iter()
                .map(|(peer, address)| (*peer, address.to_link_addr()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PROTO-9: each start draws its own first sequence number (what keeps the nonces of two
    /// starts that share an incarnation apart: a wiped data directory, a clock stepped back,
    /// the same id on two machines), and it keeps the sequence's 5-byte encoding.
    #[test]
    fn a_later_start_within_the_second_begins_above_an_earlier_one() {
        // Two starts of one node in the same second share its incarnation: the later must
        // begin above whatever the earlier began with, whatever their random bits.
        for millis in [0u64, 1, 500, 998] {
            let earliest_late = first_seq((millis + 1) << 54);
            let latest_early = first_seq((millis << 54) | ((1 << 53) - 1));
            assert!(earliest_late >= latest_early + (1 << 20), "{millis}");
        }
        assert!(first_seq((999 << 54) | ((1 << 53) - 1)) < (1 << 31) + (1 << 16));
    }

    #[test]
    fn proto9_each_start_draws_its_own_first_sequence() {
        let draws: BTreeSet<u64> = (0..64).map(|_| first_seq(start_entropy())).collect();
        assert_eq!(draws.len(), 64);
        assert!(draws.iter().all(|seq| (1 << 16..1 << 32).contains(seq)));
    }

    /// PRI-1: a peer's signal goes to the election the first time, then only once it moved
    /// by a whole dB and a second has passed: not per frame.
    #[test]
    fn pri1_signal_hand_over_is_rate_limited() {
        let start = conclave_core::Instant::from_millis(10_000);
        let later = |ms| start + std::time::Duration::from_millis(ms);
        assert!(signal_due(None, -60.0, start));
        let sent = Some((-60.0, start));
        // Moved enough, too soon; long enough, not moved enough; both.
        assert!(!signal_due(sent, -65.0, later(999)));
        assert!(!signal_due(sent, -60.9, later(5_000)));
        assert!(signal_due(sent, -61.0, later(1_000)));
        assert!(signal_due(sent, -55.0, later(1_000)));
    }

    #[test]
    fn link_addresses_round_trip() {
        for address in [
            LinkAddress::Udp("127.0.0.1:7946".parse().unwrap()),
            LinkAddress::Udp("[::1]:7946".parse().unwrap()),
            LinkAddress::Memory(3),
            LinkAddress::EspNow(Mac([0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x0e])),
            LinkAddress::EspNow(Mac::BROADCAST),
        ] {
            assert_eq!(LinkAddress::parse(&address.to_link_addr()), Some(address));
        }
        assert_eq!(LinkAddress::parse(&LinkAddr::new("espnow:aa:bb")), None);
        assert_eq!(LinkAddress::parse(&LinkAddr::new("garbage")), None);
    }

    /// TR-2: the readers' path: garbage is counted and never queued; each queue holds
    /// `INBOUND_QUEUE` frames and counts what finds it full; the actor's stream takes election
    /// frames first, but never more than `URGENT_STREAK` in a row while other frames wait.
    #[tokio::test]
    async fn tr2_inbound_queues_are_bounded_and_election_frames_go_first() {
        use conclave_protocol::{AppendEntries, ClusterId, Ping};
        use futures_util::StreamExt;

        let metrics = NodeMetrics::new();
        let codec = FrameCodec::new(ClusterId::new("test").unwrap(), None);
        let (sender, _members, mut queues) = inbound_queues(codec.clone(), metrics.clone());
        let peer = PeerId::new("gw-b").unwrap();
        let frame = |seq: u64, body: Body| {
            codec
                .encode(
                    &Envelope::new(codec.cluster(), peer, 1, seq, None, body),
                    UDP_MTU,
                )
                .unwrap()
        };
        let heartbeat = |seq| frame(seq, AppendEntries::new(1, peer).into());
        let from = LinkAddress::Memory(1);
        let extra = 10;
        for seq in 0..(INBOUND_QUEUE as u64 + extra) {
            sender.offer(from, &heartbeat(seq), None);
        }
        for seq in 1_000..1_003 {
            sender.offer(from, &frame(seq, Ping { timestamp_ms: seq }.into()), None);
        }
        sender.offer(from, b"garbage", None);
        let dropped =
            |reason: &str| metrics.value("conclave_frames_dropped_total", &[("reason", reason)]);
        assert_eq!(dropped("queue_full"), Some(extra as f64));
        assert_eq!(dropped("malformed"), Some(1.0));

        let mut order = Vec::new();
        for _ in 0..(INBOUND_QUEUE + 3) {
            let inbound = queues.next().await.unwrap();
            order.push(is_urgent(inbound.envelope.body.kind()));
        }
        let streak = URGENT_STREAK as usize;
        let mut expected = Vec::new();
        for _ in 0..3 {
            expected.extend(std::iter::repeat_n(true, streak));
            expected.push(false);
        }
        expected.extend(std::iter::repeat_n(true, INBOUND_QUEUE - 3 * streak));
        assert_eq!(order, expected);
    }

    /// TR-2: a socket connected to a configured peer on the node's port receives that peer's
    /// datagrams and only those; any other sender's go to the node's shared socket. A flood
    /// from elsewhere therefore cannot fill the buffer a member's frames wait in.
    #[tokio::test]
    async fn tr2_a_configured_peer_has_a_socket_of_its_own() {
        let shared = bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
        let local = shared.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let stranger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let member = member_socket(local, peer.local_addr().unwrap()).unwrap();
        // A plain bind of the same port still fails: another process cannot share it.
        assert!(std::net::UdpSocket::bind(local).is_err());

        for n in 0..100u8 {
            stranger.send_to(&[b's', n], local).await.unwrap();
        }
        peer.send_to(b"member", local).await.unwrap();
        let deadline = std::time::Duration::from_secs(10);
        let mut buffer = [0u8; 64];
        let len = tokio::time::timeout(deadline, member.recv(&mut buffer))
            .await
            .expect("the member's datagram reaches its socket")
            .unwrap();
        assert_eq!(&buffer[..len], b"member");
        for n in 0..100u8 {
            let (len, from) = tokio::time::timeout(deadline, shared.recv_from(&mut buffer))
                .await
                .expect("the stranger's datagrams reach the shared socket")
                .unwrap();
            assert_eq!(
                (&buffer[..len], from),
                (&[b's', n][..], stranger.local_addr().unwrap())
            );
        }
        assert!(
            member.try_recv(&mut buffer).is_err(),
            "nothing else on the member's socket"
        );
    }

    /// TR-2: with the shared queues full of a flood, a member's frames still come first, in
    /// the order they were read; after `MEMBER_STREAK` of them in a row a waiting frame of the
    /// shared queues goes, so that even a member cannot stop everyone else.
    #[tokio::test]
    async fn tr2_members_frames_go_before_a_flood() {
        use conclave_protocol::{ClusterId, Hello, Ping};
        use futures_util::StreamExt;

        let metrics = NodeMetrics::new();
        let codec = FrameCodec::new(ClusterId::new("test").unwrap(), None);
        let (sender, members, mut queues) = inbound_queues(codec.clone(), metrics.clone());
        let member_sender = sender.for_members(&members);
        let frame = |from: &str, seq: u64, body: Body| {
            let from = PeerId::new(from).unwrap();
            codec
                .encode(
                    &Envelope::new(codec.cluster(), from, 1, seq, None, body),
                    UDP_MTU,
                )
                .unwrap()
        };
        let stranger = LinkAddress::Memory(9);
        for seq in 0..(2 * INBOUND_QUEUE as u64) {
            sender.offer(stranger, &frame("gw-x", seq, Hello {}.into()), None);
        }
        assert_eq!(
            metrics.value("conclave_frames_dropped_total", &[("reason", "queue_full")]),
            Some(INBOUND_QUEUE as f64)
        );
        let member = LinkAddress::Memory(2);
        let count = u64::from(MEMBER_STREAK) + 5;
        for seq in 0..count {
            member_sender.offer(
                member,
                &frame("gw-b", seq, Ping { timestamp_ms: seq }.into()),
                None,
            );
        }
        let mut order = Vec::new();
        for _ in 0..(count + 2) {
            let inbound = queues.next().await.unwrap();
            order.push((inbound.from, inbound.envelope.seq));
        }
        let mut expected: Vec<(LinkAddress, u64)> = (0..u64::from(MEMBER_STREAK))
            .map(|seq| (member, seq))
            .collect();
        expected.push((stranger, 0));
        expected.extend((u64::from(MEMBER_STREAK)..count).map(|seq| (member, seq)));
        expected.push((stranger, 1));
        assert_eq!(order, expected);
    }
}
