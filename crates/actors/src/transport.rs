//! The TransportActor (TR-1, TR-2, PROTO-2, PROTO-5): every frame in and out of a node.
//!
//! Outgoing bodies are stamped into envelopes (this node's id, its incarnation, a strictly
//! increasing sequence number), encoded with an explicit MTU check and tagged. Incoming frames
//! are decoded, authenticated and checked against the replay window; a frame that fails any
//! check is dropped and counted by reason in `conclave_frames_dropped_total{reason}`, and
//! never reaches the rest of the node. The sender of garbage cannot crash or stall it: every
//! failure is a value, and receiving never blocks on anything but the socket.
//!
//! The transport learns which link and address reach each peer from the frames it accepts.
//! A body for a peer with no learned route goes to every configured address, addressed to
//! that peer (others drop it as misaddressed), which is how the first contact happens.
//!
//! Links: `udp` (a tokio socket) and `memory` (a [`MemoryHub`], for tests and the demo). The
//! ESP-NOW dongle link joins them in a later version.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use actix::prelude::*;
use conclave_core::LinkAddr;
use conclave_core::raft::RaftMessage;
use conclave_protocol::{Body, DropReason, Envelope, FrameCodec, FrameReceiver, PeerId, UDP_MTU};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::memory::{MemoryFrame, MemoryHub};
use crate::messages::{Destination, FrameArrived, RaftArrived, Transmit};
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
}

impl LinkKind {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            LinkKind::Udp => "udp",
            LinkKind::Memory => "memory",
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
}

impl LinkAddress {
    /// The link it belongs to.
    pub fn kind(self) -> LinkKind {
        match self {
            LinkAddress::Udp(_) => LinkKind::Udp,
            LinkAddress::Memory(_) => LinkKind::Memory,
        }
    }

    /// The opaque form membership keeps: `udp:127.0.0.1:7946`, `mem:3`.
    pub fn to_link_addr(self) -> LinkAddr {
        match self {
            LinkAddress::Udp(addr) => LinkAddr::new(format!("udp:{addr}")),
            LinkAddress::Memory(slot) => LinkAddr::new(format!("mem:{slot}")),
        }
    }

    /// Parses the opaque form back.
    pub fn parse(addr: &LinkAddr) -> Option<Self> {
        let (scheme, rest) = addr.as_str().split_once(':')?;
        match scheme {
            "udp" => rest.parse().ok().map(LinkAddress::Udp),
            "mem" => rest.parse().ok().map(LinkAddress::Memory),
            _ => None,
        }
    }
}

/// A raw frame read from a link (from the link's reader task to the actor).
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct RawFrame {
    from: LinkAddress,
    bytes: Vec<u8>,
}

/// Who receives accepted frames: set once after the node's actors are started.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct ConnectReceivers {
    /// Every accepted frame.
    pub membership: Recipient<FrameArrived>,
    /// Accepted election messages.
    pub election: Recipient<RaftArrived>,
}

/// The routes the transport has learned, for the status answer.
#[derive(Debug, Message)]
#[rtype(result = "Vec<(PeerId, LinkAddr)>")]
pub struct GetRoutes;

/// The links a transport uses.
#[derive(Debug, Default)]
pub struct Links {
    /// A bound UDP socket and the addresses to broadcast to.
    pub udp: Option<(Arc<UdpSocket>, Vec<SocketAddr>)>,
    /// A memory hub and this node's slot.
    pub memory: Option<(MemoryHub, u32)>,
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
    receiver: FrameReceiver,
    links: Links,
    routes: BTreeMap<PeerId, LinkAddress>,
    membership: Option<Recipient<FrameArrived>>,
    election: Option<Recipient<RaftArrived>>,
    metrics: NodeMetrics,
    readers: Vec<JoinHandle<()>>,
}

impl TransportActor {
    /// A transport for `node_id` in its `incarnation`, framing with `codec`.
    pub fn new(
        node_id: PeerId,
        incarnation: u64,
        codec: FrameCodec,
        links: Links,
        metrics: NodeMetrics,
    ) -> Self {
        Self {
            span: tracing::info_span!("node", id = %node_id),
            node_id,
            incarnation,
            next_seq: 0,
            receiver: FrameReceiver::new(codec.clone()),
            codec,
            links,
            routes: BTreeMap::new(),
            membership: None,
            election: None,
            metrics,
            readers: Vec::new(),
        }
    }

    fn seal(&mut self, to: Option<PeerId>, body: &Body) -> Option<Vec<u8>> {
        self.next_seq += 1;
        let envelope = Envelope::new(
            self.codec.cluster(),
            self.node_id,
            self.incarnation,
            self.next_seq,
            to,
            body.clone(),
        );
        // Every link here carries at least a UDP payload; the ESP-NOW link will pass its own.
        match self.codec.encode(&envelope, UDP_MTU) {
            Ok(frame) => Some(frame),
            Err(err) => {
                warn!(kind = body.kind().label(), %err, "frame not sent");
                None
            }
        }
    }

    fn send_to(&self, address: LinkAddress, frame: &[u8], kind: &'static str) {
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
                hub.send(*own, slot, frame.to_vec());
            }
        }
        self.metrics.frame(address.kind().label(), "out", kind);
    }

    /// Every address to try when no route is known: the configured UDP peers and every
    /// memory slot.
    fn bootstrap_addresses(&self) -> Vec<LinkAddress> {
        let mut addresses = Vec::new();
        if let Some((_, peers)) = &self.links.udp {
            addresses.extend(peers.iter().copied().map(LinkAddress::Udp));
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
        let kind = transmit.body.kind().label();
        match transmit.to {
            Destination::Peer(peer) => {
                let Some(frame) = self.seal(Some(peer), &transmit.body) else {
                    return;
                };
                match self.routes.get(&peer).copied() {
                    Some(address) => self.send_to(address, &frame, kind),
                    None => {
                        for address in self.bootstrap_addresses() {
                            self.send_to(address, &frame, kind);
                        }
                    }
                }
            }
            Destination::Reply { peer, origin } => {
                let Some(frame) = self.seal(Some(peer), &transmit.body) else {
                    return;
                };
                match LinkAddress::parse(&origin) {
                    Some(address) => self.send_to(address, &frame, kind),
                    None => warn!(%origin, "cannot reply: unknown link address"),
                }
            }
            Destination::Broadcast => {
                let Some(frame) = self.seal(None, &transmit.body) else {
                    return;
                };
                let mut addresses = self.bootstrap_addresses();
                addresses.extend(self.routes.values().copied());
                addresses.sort();
                addresses.dedup();
                for address in addresses {
                    self.send_to(address, &frame, kind);
                }
            }
        }
    }

    fn receive(&mut self, raw: RawFrame) {
        let link = raw.from.kind().label();
        let envelope = match self.receiver.receive(&raw.bytes) {
            Ok(envelope) => envelope,
            Err(err) => {
                let reason = err.drop_reason();
                self.metrics.frame_dropped(reason);
                debug!(from = ?raw.from, reason = reason.label(), %err, "frame dropped");
                return;
            }
        };
        if envelope.from == self.node_id {
            // Our own broadcast echoed back by a link (or a node using our id, which
            // membership's duplicate check deals with through Hello).
            return;
        }
        if envelope.to.is_some_and(|to| to != self.node_id) {
            self.metrics.frame_dropped(DropReason::Misaddressed);
            return;
        }
        self.metrics.frame(link, "in", envelope.body.kind().label());
        self.routes.insert(envelope.from, raw.from);
        let origin = raw.from.to_link_addr();
        if let Some(membership) = &self.membership {
            membership.do_send(FrameArrived {
                from: envelope.from,
                origin,
                body: envelope.body.clone(),
            });
        }
        if let (Some(election), Ok(message)) =
            (&self.election, RaftMessage::try_from(envelope.body))
        {
            election.do_send(RaftArrived {
                from: envelope.from,
                message,
            });
        }
    }
}

impl Actor for TransportActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let me = ctx.address();
        if let Some((socket, _)) = &self.links.udp {
            let socket = Arc::clone(socket);
            let me = me.clone();
            self.readers.push(actix_rt::spawn(async move {
                let mut buffer = vec![0u8; MAX_DATAGRAM];
                loop {
                    match socket.recv_from(&mut buffer).await {
                        Ok((len, from)) => me.do_send(RawFrame {
                            from: LinkAddress::Udp(from),
                            bytes: buffer[..len].to_vec(),
                        }),
                        // ICMP "port unreachable" from a peer that is down surfaces here on
                        // some systems; it says nothing about this socket.
                        Err(err) => debug!(%err, "udp receive failed"),
                    }
                }
            }));
        }
        if let Some((hub, slot)) = &self.links.memory {
            let mut frames = hub.attach(*slot);
            self.readers.push(actix_rt::spawn(async move {
                while let Some(MemoryFrame { from, bytes }) = frames.recv().await {
                    me.do_send(RawFrame {
                        from: LinkAddress::Memory(from),
                        bytes,
                    });
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

impl Handler<RawFrame> for TransportActor {
    type Result = ();
    fn handle(&mut self, raw: RawFrame, _: &mut Self::Context) {
        let _span = self.span.clone().entered();
        self.receive(raw);
    }
}

impl Handler<Transmit> for TransportActor {
    type Result = ();
    fn handle(&mut self, transmit: Transmit, _: &mut Self::Context) {
        let _span = self.span.clone().entered();
        self.transmit(transmit);
    }
}

impl Handler<ConnectReceivers> for TransportActor {
    type Result = ();
    fn handle(&mut self, receivers: ConnectReceivers, _: &mut Self::Context) {
        let _span = self.span.clone().entered();
        self.membership = Some(receivers.membership);
        self.election = Some(receivers.election);
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

    #[test]
    fn link_addresses_round_trip() {
        for address in [
            LinkAddress::Udp("127.0.0.1:7946".parse().unwrap()),
            LinkAddress::Udp("[::1]:7946".parse().unwrap()),
            LinkAddress::Memory(3),
        ] {
            assert_eq!(LinkAddress::parse(&address.to_link_addr()), Some(address));
        }
        assert_eq!(LinkAddress::parse(&LinkAddr::new("espnow:aa:bb")), None);
        assert_eq!(LinkAddress::parse(&LinkAddr::new("garbage")), None);
    }
}
