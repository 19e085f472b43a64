//! The MembershipActor (MEM-1..5): drives [`conclave_core::Membership`] and carries out its
//! actions. It decides nothing itself.
//!
//! Every frame the transport's admission accepts comes in as [`FrameArrived`], a sender it
//! just verified or forgot as [`PeerAdmission`] (greeted at once, or removed) and a `Hello` it found contested as
//! [`HelloContested`] (refused, MEM-3); one timer is armed from
//! `poll_timeout`; sends go to the transport; events go to the election (reliably, because its
//! electorate depends on them), to the event bus (bounded, for hooks and the admin stream) and
//! to metrics.

use actix::prelude::*;
use conclave_core::{Membership, MembershipAction, MembershipEvent, PeerInfo, PeerStatus};
use tracing::info;

use crate::clock::{CoreTimer, NodeClock};
use crate::events::{EventBus, NodeEvent, PeerChange, unix_millis};
use crate::messages::{
    Destination, FrameArrived, HelloContested, IdRefused, PeerAdmission, PeerReachability, Transmit,
};
use crate::metrics::NodeMetrics;

/// The peer table, whole (MEM-5: the truth a lagging subscriber re-reads).
#[derive(Debug, Message)]
#[rtype(result = "Vec<PeerInfo>")]
pub struct GetPeers;

/// The node is shutting down: say goodbye to the peers.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct SayGoodbye;

/// Where membership's outputs go.
#[derive(Debug, Clone)]
pub struct MembershipOutputs {
    /// Frames to send.
    pub transport: Recipient<Transmit>,
    /// Reachability changes, for the electorate.
    pub reachability: Recipient<PeerReachability>,
    /// This node's id was refused as a duplicate.
    pub refused: Recipient<IdRefused>,
}

/// The MembershipActor. See the [module docs](self).
pub struct MembershipActor {
    /// `node = <id>`, entered in every handler so that logs of nodes sharing a process
    /// (tests, the demo) say whose they are.
    span: tracing::Span,
    core: Membership,
    clock: NodeClock,
    outputs: MembershipOutputs,
    events: EventBus,
    metrics: NodeMetrics,
    timer: CoreTimer,
}

impl MembershipActor {
    /// An actor around `core`.
    pub fn new(
        core: Membership,
        clock: NodeClock,
        outputs: MembershipOutputs,
        events: EventBus,
        metrics: NodeMetrics,
    ) -> Self {
        Self {
            span: tracing::info_span!("node", id = %core.local()),
            core,
            clock,
            outputs,
            events,
            metrics,
            timer: CoreTimer::default(),
        }
    }

    /// Carries out every pending action, then arms the timer.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        while let Some(action) = self.core.poll_action() {
            match action {
                MembershipAction::Send { to, body } => self.outputs.transport.do_send(Transmit {
                    to: Destination::Peer(to),
                    body,
                }),
                MembershipAction::Reply { to, origin, body } => {
                    self.outputs.transport.do_send(Transmit {
                        to: Destination::Reply { peer: to, origin },
                        body,
                    });
                }
                MembershipAction::Broadcast { body } => self.outputs.transport.do_send(Transmit {
                    to: Destination::Broadcast,
                    body,
                }),
                MembershipAction::Publish(event) => self.publish(event),
            }
        }
        self.record_peers();
        self.arm_timer(ctx);
    }

    fn publish(&mut self, event: MembershipEvent) {
        let now = unix_millis(std::time::SystemTime::now());
        let (peer, old, new) = match event {
            MembershipEvent::Joined { peer } => {
                info!(%peer, "peer joined");
                (peer, None, Some(PeerStatus::Connected))
            }
            MembershipEvent::Left { peer, last } => {
                info!(%peer, "peer left");
                (peer, Some(last), None)
            }
            MembershipEvent::StatusChanged { peer, old, new } => {
                info!(%peer, old = old.label(), new = new.label(), "peer status changed");
                (peer, Some(old), Some(new))
            }
            MembershipEvent::IdRefused { by, reason } => {
                // The core already logged the error; the election must stand down.
                tracing::error!(%by, %reason, "leaving the election: this node's id is taken");
                self.outputs.refused.do_send(IdRefused);
                return;
            }
        };
        self.outputs.reachability.do_send(PeerReachability {
            peer,
            connected: new == Some(PeerStatus::Connected),
        });
        self.events
            .publish(NodeEvent::PeerStatusChanged(PeerChange {
                peer,
                old,
                new,
                at_unix_ms: now,
            }));
    }

    fn record_peers(&self) {
        let table = self.core.peers();
        let connected = table.connected_count();
        self.metrics.set_peers(connected, table.len() - connected);
        for peer in table.list() {
            if let Some(rtt) = peer.rtt {
                self.metrics.set_peer_rtt(peer.id.as_str(), rtt);
            }
        }
    }

    fn arm_timer(&mut self, ctx: &mut Context<Self>) {
        let deadline = self.core.poll_timeout();
        self.timer.arm(
            ctx,
            &self.clock,
            deadline,
            |actor| &mut actor.timer,
            |actor, ctx| {
                let _span = actor.span.clone().entered();
                let now = actor.clock.now();
                actor.core.handle_timeout(now);
                actor.pump(ctx);
            },
        );
    }
}

impl Actor for MembershipActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // The core queued its first Hello when it was created.
        self.pump(ctx);
    }
}

impl Handler<FrameArrived> for MembershipActor {
    type Result = ();
    fn handle(&mut self, frame: FrameArrived, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        match &frame.body {
            Some(body) => self.core.handle_frame(now, frame.from, &frame.origin, body),
            None => self.core.handle_heard(now, frame.from, &frame.origin),
        }
        self.pump(ctx);
    }
}

impl Handler<PeerAdmission> for MembershipActor {
    type Result = ();
    fn handle(&mut self, change: PeerAdmission, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        match change {
            PeerAdmission::Verified { peer, origin } => {
                self.core.handle_verified(now, peer, &origin);
            }
            PeerAdmission::Forgotten { peer } => self.core.handle_forgotten(now, peer),
        }
        self.pump(ctx);
    }
}

impl Handler<HelloContested> for MembershipActor {
    type Result = ();
    fn handle(&mut self, contested: HelloContested, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        self.core
            .handle_contested_hello(now, contested.from, &contested.origin);
        self.pump(ctx);
    }
}

impl Handler<GetPeers> for MembershipActor {
    type Result = MessageResult<GetPeers>;
    fn handle(&mut self, _: GetPeers, _: &mut Self::Context) -> Self::Result {
        let _span = self.span.clone().entered();
        MessageResult(self.core.peers().list().cloned().collect())
    }
}

impl Handler<SayGoodbye> for MembershipActor {
    type Result = ();
    fn handle(&mut self, _: SayGoodbye, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        let now = self.clock.now();
        self.core.handle_shutdown(now);
        self.pump(ctx);
    }
}
