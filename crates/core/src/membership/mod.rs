//! Membership: who else is in the cluster and whether they are heard (MEM-1..5).
//!
//! - [`PeerTable`] (MEM-1) is the plain record of every known peer.
//! - [`Membership`] is the sans-IO state machine around it: discovery with `Hello` /
//!   `HelloAck` (MEM-2), refusal of a duplicate id (MEM-3), liveness with `Ping` / `Pong`,
//!   round-trip times and silence detection (MEM-4), and the `Joined` / `Left` /
//!   `StatusChanged` events (MEM-5) that the shell fans out to subscribers through
//!   [`crate::fanout`].
//!
//! Like every state machine in this crate it reads no clock and does no I/O. The shell
//! drives it:
//!
//! ```text
//!   frame received ──► handle_frame(now, from, origin, body) ─┐
//!   sender verified ─► handle_verified(now, peer, origin)      │
//!   contested Hello ─► handle_contested_hello(now, from, ..)   ├─► poll_action() ─► Send / Broadcast / Publish
//!   sender forgotten ► handle_forgotten(now, peer)             │
//!   timer fired    ──► handle_timeout(now)                    │   poll_timeout() ─► arm one timer
//!   shutting down  ──► handle_shutdown(now)                  ─┘
//! ```
//!
//! After every input the shell drains [`Membership::poll_action`] until it returns `None`,
//! carries the actions out in order, and arms its single timer at
//! [`Membership::poll_timeout`]. Every frame admission accepts goes to `handle_frame`, whatever
//! its body, because any frame proves its sender alive.
//!
//! The table holds only senders that [`crate::admission`] accepted, so it is bounded by that
//! machine's peer limit (PROTO-5). Admission also decides which address owns an id on each
//! link; a `Hello` from another address while the owner is live arrives through
//! [`Membership::handle_contested_hello`] and is refused (MEM-3). Membership's own check of a
//! `Hello` against the address it knows applies within one link: a node heard over two links
//! is one node.

mod peer_table;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use conclave_protocol::{Body, DUPLICATE_PEER_ID, Goodbye, Hello, HelloAck, PeerId, Ping, Pong};

use crate::Instant;

pub use peer_table::{LinkAddr, MembershipError, PeerInfo, PeerStatus, PeerTable};

/// Shortest timer period the machine accepts. A zero period would make `poll_timeout` return
/// `now` forever and spin the driver, so shorter settings are raised to this.
const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// A Connected peer whose other frames (election traffic: heartbeats, AppendEntries and their
/// answers) arrived within the last two ticks, or whose ping arrived since the last tick,
/// needs no ping to be known alive, so it is pinged only this many ticks apart, for a fresh
/// round-trip time (MEM-4). Between a leader and its followers this leaves the air to the
/// heartbeats; between two followers, which send each other nothing else, one pings every
/// tick and the other answers, where both used to ping.
pub const RTT_REFRESH_TICKS: u32 = 10;

/// Shortest time between two log lines about refused duplicate ids: each refusal is logged
/// as a count in the next line, so an impostor (or a flood of forged `Hello`s) cannot fill
/// the log.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Timing of discovery and liveness (`[membership]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MembershipConfig {
    /// Period of the liveness tick: pings go out and silence is checked (MEM-4).
    pub heartbeat_interval: Duration,
    /// A Connected peer silent for more than `heartbeat_interval × timeout_multiplier`
    /// becomes Disconnected (MEM-4).
    pub timeout_multiplier: u32,
    /// Period of the `Hello` broadcast while no peer is Connected (MEM-2).
    pub hello_interval: Duration,
    /// Period of the `Hello` broadcast while peers are connected. Nodes that missed each
    /// other's first announcements (a partition at start, a lost broadcast) and have no peer
    /// in common to relay frames would otherwise never meet; in `connected` quorum mode they
    /// would never count each other.
    pub announce_interval: Duration,
    /// How many peers this node expects (for example the other configured voters); while it
    /// knows fewer, it keeps announcing every `hello_interval`. Two nodes whose first
    /// announcements were lost (they started while the other's socket was not yet bound) and
    /// that each already hear a third would otherwise meet only at the next slow
    /// announcement. 0 when unknown.
    pub expected_peers: usize,
}

impl Default for MembershipConfig {
    /// 500 ms heartbeat, silence after three of them, `Hello` every second.
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_millis(500),
            timeout_multiplier: 3,
            hello_interval: Duration::from_secs(1),
            announce_interval: Duration::from_secs(10),
            expected_peers: 0,
        }
    }
}

impl MembershipConfig {
    /// How long a Connected peer may stay silent: `heartbeat_interval × timeout_multiplier`.
    pub fn silence_timeout(&self) -> Duration {
        self.heartbeat_interval
            .checked_mul(self.timeout_multiplier)
            .unwrap_or(Duration::MAX)
    }
}

/// Something the shell must do on the state machine's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipAction {
    /// Send `body` to one peer.
    Send {
        /// The addressee.
        to: PeerId,
        /// What to send.
        body: Body,
    },
    /// Answer a frame through the link address it came from, whatever address the peer id
    /// is known by: a refusal of a duplicate id must reach the impostor, not the live holder.
    Reply {
        /// The addressee.
        to: PeerId,
        /// Where its frame came from.
        origin: LinkAddr,
        /// What to send.
        body: Body,
    },
    /// Send `body` to everyone reachable on every link.
    Broadcast {
        /// What to send.
        body: Body,
    },
    /// Hand an event to the subscribers (MEM-5).
    Publish(MembershipEvent),
}

/// A change of membership, published in the order it happened (MEM-5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipEvent {
    /// A peer entered the table.
    Joined {
        /// Who.
        peer: PeerId,
    },
    /// A peer left the table (it said `Goodbye`).
    Left {
        /// Who.
        peer: PeerId,
        /// Its status when it left.
        last: PeerStatus,
    },
    /// A peer went silent or was heard again.
    StatusChanged {
        /// Who.
        peer: PeerId,
        /// Status before the change.
        old: PeerStatus,
        /// Status after the change.
        new: PeerStatus,
    },
    /// A peer refused this node's id because another node already holds it (MEM-3). From now
    /// on this node sends nothing, and the shell must keep it out of elections.
    IdRefused {
        /// The peer that refused.
        by: PeerId,
        /// The reason it gave, such as [`DUPLICATE_PEER_ID`].
        reason: String,
    },
}

/// The last ping sent to a peer, so that the matching pong gives a microsecond RTT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SentPing {
    timestamp_ms: u64,
    sent_at: Instant,
}

/// What the ping schedule knows of one peer besides its table entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct PingSchedule {
    /// When a frame that is not membership's last came from it.
    heard_other: Option<Instant>,
    /// When its last ping came: answered with a pong, it proved both sides alive.
    heard_ping: Option<Instant>,
    /// When it was last pinged.
    pinged: Option<Instant>,
}

/// Why the machine may or may not speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Voice {
    /// Normal operation.
    Speaking,
    /// Another node holds this id (MEM-3): sending anything would impersonate it.
    Refused,
    /// `Goodbye` went out; anything sent after it would make peers add this node again.
    Departed,
}

/// The membership state machine of one node (MEM-2..5), driven by the shell.
#[derive(Debug, Clone)]
pub struct Membership {
    local: PeerId,
    config: MembershipConfig,
    peers: PeerTable,
    last_pings: BTreeMap<PeerId, SentPing>,
    /// Per known peer: what decides whether it is pinged at the next tick.
    schedules: BTreeMap<PeerId, PingSchedule>,
    actions: VecDeque<MembershipAction>,
    next_tick: Instant,
    /// When the last liveness tick ran (the machine's start before the first).
    last_tick: Instant,
    /// The tick before `last_tick`.
    tick_before_last: Instant,
    /// When the last `Hello` was broadcast.
    last_hello: Instant,
    voice: Voice,
    /// Refusals of a duplicate id not yet logged, and when one was last logged: a stream of
    /// contested `Hello`s is logged once per [`REFUSAL_LOG_INTERVAL`], with a count.
    refusals_unlogged: u64,
    last_refusal_log: Option<Instant>,
}

impl Membership {
    /// A node named `local` starting at `now`. Its first action, a broadcast `Hello`, is
    /// queued at once (MEM-2).
    pub fn new(local: PeerId, config: MembershipConfig, now: Instant) -> Self {
        let config = MembershipConfig {
            heartbeat_interval: config.heartbeat_interval.max(MIN_INTERVAL),
            hello_interval: config.hello_interval.max(MIN_INTERVAL),
            announce_interval: config.announce_interval.max(MIN_INTERVAL),
            ..config
        };
        let mut membership = Self {
            local,
            config,
            peers: PeerTable::new(local),
            last_pings: BTreeMap::new(),
            schedules: BTreeMap::new(),
            actions: VecDeque::new(),
            next_tick: now + config.heartbeat_interval,
            last_tick: now,
            tick_before_last: now,
            last_hello: now,
            voice: Voice::Speaking,
            refusals_unlogged: 0,
            last_refusal_log: None,
        };
        membership.broadcast(Body::Hello(Hello {}));
        membership
    }

    /// Feeds one received frame: `from` is the authenticated sender, `origin` the link address
    /// it came from. Every frame belongs here, whatever its body: any frame is proof of life
    /// (MEM-4), and a frame from an unknown sender makes it a member (TR-1).
    pub fn handle_frame(&mut self, now: Instant, from: PeerId, origin: &LinkAddr, body: &Body) {
        if !self.listens_to(from) {
            return;
        }
        match body {
            Body::Hello(_) => self.on_hello(now, from, origin),
            Body::Goodbye(_) => self.on_goodbye(from),
            other => {
                self.heard(now, from, origin);
                match other {
                    Body::HelloAck(ack) => self.on_hello_ack(from, ack),
                    Body::Ping(ping) => {
                        self.heard_ping(now, from);
                        self.send(
                            from,
                            Body::Pong(Pong {
                                timestamp_ms: ping.timestamp_ms,
                            }),
                        );
                    }
                    Body::Pong(pong) => self.on_pong(now, from, pong),
                    _ => self.heard_other(now, from),
                }
            }
        }
    }

    /// A frame whose body is not membership's (an election message, which the driver hands to
    /// the election instead) arrived from `from` at `origin`: the same as [`handle_frame`]
    /// with that body, without the driver having to copy the body for it.
    ///
    /// [`handle_frame`]: Self::handle_frame
    pub fn handle_heard(&mut self, now: Instant, from: PeerId, origin: &LinkAddr) {
        if self.listens_to(from) {
            self.heard(now, from, origin);
            self.heard_other(now, from);
        }
    }

    /// A `Hello` from `origin` claiming `from`'s id, which another address owns on that link
    /// while it is live (the transport's admission decided that; MEM-3): it is refused with
    /// `HelloAck{success: false, error_reason: "duplicate_peer_id"}` through a reply to
    /// `origin`. Nothing else changes: the frame is no proof of life for the id.
    pub fn handle_contested_hello(&mut self, now: Instant, from: PeerId, origin: &LinkAddr) {
        if !self.listens_to(from) {
            return;
        }
        let live_addr = self
            .peers
            .get(&from)
            .map_or_else(|| LinkAddr::new("unknown"), |peer| peer.addr.clone());
        self.refuse(now, from, &live_addr, origin);
    }

    /// `peer` just proved to the transport that its frames are fresh, at `origin` (PROTO-5):
    /// its earlier frames, its `Hello` among them, were dropped while it was unverified, so it
    /// is greeted with a `Hello` now, through `origin`, rather than at its next announcement.
    /// Its answer (a `HelloAck`, or any frame) makes it a member.
    pub fn handle_verified(&mut self, _now: Instant, peer: PeerId, origin: &LinkAddr) {
        if self.listens_to(peer) {
            self.reply(peer, origin, Body::Hello(Hello {}));
        }
    }

    /// The transport's admission forgot `peer` (PROTO-5: it was silent long enough and its
    /// place among the peers was needed): it leaves the table as if it had said `Goodbye`,
    /// so the table stays bounded by admission's peer limit.
    pub fn handle_forgotten(&mut self, _now: Instant, peer: PeerId) {
        self.on_goodbye(peer);
    }

    /// Whether frames from `from` count: never our own echo, nothing once we have left.
    fn listens_to(&self, from: PeerId) -> bool {
        from != self.local && self.voice != Voice::Departed
    }

    /// Runs whatever timers are due at `now`: the liveness tick and the `Hello` rebroadcast.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.voice == Voice::Departed {
            return;
        }
        if now >= self.next_tick {
            self.tick(now);
            self.next_tick += self.config.heartbeat_interval;
            if self.next_tick <= now {
                // The shell woke late; skipping the missed ticks avoids a burst of pings.
                self.next_tick = now + self.config.heartbeat_interval;
            }
        }
        // After the tick, so that losing the last peer in this very tick is already counted.
        if self.voice == Voice::Speaking && now >= self.next_hello() {
            self.broadcast(Body::Hello(Hello {}));
            self.last_hello = now;
        }
    }

    /// The node is leaving on purpose: tell everyone with a broadcast `Goodbye`. Afterwards the
    /// machine is inert: it sends nothing, sets no timer and ignores frames.
    pub fn handle_shutdown(&mut self, _now: Instant) {
        if self.voice == Voice::Departed {
            return;
        }
        self.broadcast(Body::Goodbye(Goodbye {}));
        self.voice = Voice::Departed;
    }

    /// When the shell must call [`handle_timeout`](Self::handle_timeout) next; `None` once the
    /// node has said `Goodbye`. The instant may already be past (for example right after the
    /// last peer left), meaning "call it now".
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.voice == Voice::Departed {
            return None;
        }
        if self.voice == Voice::Speaking {
            Some(self.next_tick.min(self.next_hello()))
        } else {
            Some(self.next_tick)
        }
    }

    /// The next thing to do, oldest first; `None` when there is nothing left.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<MembershipAction> {
        self.actions.pop_front()
    }

    /// The peer table, always complete and current (MEM-5: a lagged subscriber reads it).
    pub fn peers(&self) -> &PeerTable {
        &self.peers
    }

    /// This node's id.
    pub fn local(&self) -> PeerId {
        self.local
    }

    /// The timing in force (intervals below 1 ms are raised to 1 ms).
    pub fn config(&self) -> &MembershipConfig {
        &self.config
    }

    /// Whether a peer refused this node's id (MEM-3). A refused node sends nothing and must
    /// take no part in elections.
    pub fn is_refused(&self) -> bool {
        self.voice == Voice::Refused
    }

    // -----------------------------------------------------------------------------------------
    // inputs

    fn on_hello(&mut self, now: Instant, from: PeerId, origin: &LinkAddr) {
        let Some(known) = self.peers.get(&from) else {
            self.join(now, from, origin);
            self.accept(from, origin);
            return;
        };
        match known.status {
            PeerStatus::Connected if known.addr == *origin => {
                // The same node restarted (or repeats itself) from where we already hear it.
                self.peers.touch(&from, now);
                self.accept(from, origin);
            }
            PeerStatus::Connected if !known.addr.same_link(origin) => {
                // The same node heard over a second link (UDP and ESP-NOW at once): ids are
                // contested per link, and the transport's admission has already found this
                // address to own the id on its link.
                self.peers.touch(&from, now);
                self.accept(from, origin);
            }
            PeerStatus::Connected => {
                let live_addr = known.addr.clone();
                self.refuse(now, from, &live_addr, origin);
            }
            PeerStatus::Disconnected => {
                // The id's holder went silent, so this is most likely the same node back,
                // possibly on another link; nobody live is being impersonated.
                self.revive(now, from, origin);
                self.accept(from, origin);
            }
        }
    }

    /// MEM-3: refuses a `Hello` claiming `from`'s live id from `origin`, through a reply to
    /// `origin` so that it reaches the impostor and not the live holder.
    fn refuse(&mut self, now: Instant, from: PeerId, live_addr: &LinkAddr, origin: &LinkAddr) {
        self.refusals_unlogged += 1;
        if self
            .last_refusal_log
            .is_none_or(|at| now - at >= REFUSAL_LOG_INTERVAL)
        {
            tracing::warn!(
                peer = %from,
                live_addr = %live_addr,
                claimed_from = %origin,
                refused = self.refusals_unlogged,
                "refusing hello: the id is live at another address (refused counts this one and \
                 those since the last such line, logged at most every {} s)",
                REFUSAL_LOG_INTERVAL.as_secs()
            );
            self.refusals_unlogged = 0;
            self.last_refusal_log = Some(now);
        }
        self.reply(
            from,
            origin,
            Body::HelloAck(HelloAck {
                success: false,
                error_reason: Some(DUPLICATE_PEER_ID.to_owned()),
            }),
        );
    }

    fn on_hello_ack(&mut self, from: PeerId, ack: &HelloAck) {
        if ack.success {
            return;
        }
        let reason = ack
            .error_reason
            .clone()
            .unwrap_or_else(|| "unspecified".to_owned());
        tracing::error!(
            by = %from,
            local = %self.local,
            reason = %reason,
            "this node's id was refused; it will stay silent and out of elections"
        );
        self.voice = Voice::Refused;
        self.publish(MembershipEvent::IdRefused { by: from, reason });
    }

    fn on_pong(&mut self, now: Instant, from: PeerId, pong: &Pong) {
        let rtt = match self.last_pings.get(&from) {
            Some(ping) if ping.timestamp_ms == pong.timestamp_ms => {
                let rtt = now - ping.sent_at;
                // A duplicated pong must not be measured against the same send time again.
                self.last_pings.remove(&from);
                rtt
            }
            // An older ping's pong, or one we did not send in this life: only the echoed
            // millisecond timestamp is left to measure with.
            _ => Duration::from_millis(now.as_millis().saturating_sub(pong.timestamp_ms)),
        };
        // `heard` has already refreshed last_seen (and added an unknown sender).
        if let Some(peer) = self.peers.get_mut(&from) {
            peer.rtt = Some(rtt);
        }
    }

    fn on_goodbye(&mut self, from: PeerId) {
        if let Some(gone) = self.peers.remove(&from) {
            self.last_pings.remove(&from);
            self.schedules.remove(&from);
            self.publish(MembershipEvent::Left {
                peer: from,
                last: gone.status,
            });
        }
    }

    /// A frame arrived from `from`: it is alive, and a member even if it was unknown.
    fn heard(&mut self, now: Instant, from: PeerId, origin: &LinkAddr) {
        match self.peers.status(&from) {
            None => self.join(now, from, origin),
            Some(PeerStatus::Connected) => {
                // The stored address stays: it is what MEM-3 checks a later `Hello` against,
                // and a frame from elsewhere must not let an impostor take it over.
                self.peers.touch(&from, now);
            }
            Some(PeerStatus::Disconnected) => self.revive(now, from, origin),
        }
    }

    /// A ping came from `from`: with the pong that answers it, it proves both sides alive, so
    /// this node need not ping `from` as well until its round-trip time is due (MEM-4).
    fn heard_ping(&mut self, now: Instant, from: PeerId) {
        if self.peers.get(&from).is_some() {
            self.schedules.entry(from).or_default().heard_ping = Some(now);
        }
    }

    /// A frame that is not membership's came from `from`, which [`Self::heard`] has just
    /// made a member: it proves `from` alive without a ping.
    fn heard_other(&mut self, now: Instant, from: PeerId) {
        if self.peers.get(&from).is_some() {
            self.schedules.entry(from).or_default().heard_other = Some(now);
        }
    }

    fn join(&mut self, now: Instant, peer: PeerId, origin: &LinkAddr) {
        // Cannot fail: callers checked that `peer` is unknown, and frames from `local` are
        // dropped before any handler runs.
        if self.peers.add(peer, origin.clone(), now).is_ok() {
            tracing::debug!(peer = %peer, addr = %origin, "peer joined");
            self.publish(MembershipEvent::Joined { peer });
        }
    }

    /// A Disconnected peer is heard again, possibly from a new address (it may have moved).
    fn revive(&mut self, now: Instant, peer: PeerId, origin: &LinkAddr) {
        if let Some(info) = self.peers.get_mut(&peer) {
            info.addr = origin.clone();
            info.last_seen = now;
        }
        self.change_status(peer, PeerStatus::Connected);
    }

    fn change_status(&mut self, peer: PeerId, new: PeerStatus) {
        match self.peers.update_status(&peer, new) {
            Some(old) if old != new => {
                tracing::debug!(peer = %peer, old = old.label(), new = new.label(), "peer status changed");
                self.publish(MembershipEvent::StatusChanged { peer, old, new });
            }
            _ => {}
        }
    }

    fn accept(&mut self, to: PeerId, origin: &LinkAddr) {
        self.reply(
            to,
            origin,
            Body::HelloAck(HelloAck {
                success: true,
                error_reason: None,
            }),
        );
    }

    // -----------------------------------------------------------------------------------------
    // timers

    fn tick(&mut self, now: Instant) {
        let silence_timeout = self.config.silence_timeout();
        let silent: Vec<PeerId> = self
            .peers
            .list()
            .filter(|peer| {
                peer.status == PeerStatus::Connected && now - peer.last_seen > silence_timeout
            })
            .map(|peer| peer.id)
            .collect();
        for peer in silent {
            self.change_status(peer, PeerStatus::Disconnected);
        }

        if self.voice != Voice::Speaking {
            return;
        }
        // Disconnected peers are probed too: when a partition heals, their pong (or their
        // answer to our ping) is what makes them Connected again without waiting for a Hello.
        // A Connected peer whose other frames arrived within the last two ticks, or whose
        // ping arrived since the last one, is pinged only for its round-trip time
        // (RTT_REFRESH_TICKS). It still hears from this node: by the frames this node sends
        // it, or else by the pongs to its own pings, which it keeps sending because it hears
        // no ping from here.
        let timestamp_ms = now.as_millis();
        let since = self.last_tick;
        // Election frames may come every other tick (a follower on a radio link answers
        // every other heartbeat): two ticks still leave a tick before the silence timeout.
        let since_two = self.tick_before_last;
        self.tick_before_last = since;
        self.last_tick = now;
        let refresh = self
            .config
            .heartbeat_interval
            .saturating_mul(RTT_REFRESH_TICKS);
        let due: Vec<PeerId> = self
            .peers
            .list()
            .filter(|peer| {
                let schedule = self.schedules.get(&peer.id).copied().unwrap_or_default();
                let proven = peer.status == PeerStatus::Connected
                    && (schedule.heard_other.is_some_and(|at| at > since_two)
                        || schedule.heard_ping.is_some_and(|at| at > since));
                let rtt_fresh = schedule.pinged.is_some_and(|at| now - at < refresh);
                !(proven && rtt_fresh)
            })
            .map(|peer| peer.id)
            .collect();
        for peer in due {
            self.schedules.entry(peer).or_default().pinged = Some(now);
            self.last_pings.insert(
                peer,
                SentPing {
                    timestamp_ms,
                    sent_at: now,
                },
            );
            self.send(peer, Body::Ping(Ping { timestamp_ms }));
        }
    }

    /// MEM-2: announce every `hello_interval` while nobody is heard or fewer peers are known
    /// than expected, and every `announce_interval` otherwise. Computed from the last
    /// announcement, so losing the last peer makes an announcement due at once when one is
    /// overdue.
    fn next_hello(&self) -> Instant {
        let searching =
            self.peers.connected_count() == 0 || self.peers.len() < self.config.expected_peers;
        let interval = if searching {
            self.config.hello_interval
        } else {
            self.config.announce_interval
        };
        self.last_hello + interval
    }

    // -----------------------------------------------------------------------------------------
    // outputs

    fn send(&mut self, to: PeerId, body: Body) {
        if self.voice == Voice::Speaking {
            self.actions.push_back(MembershipAction::Send { to, body });
        }
    }

    fn reply(&mut self, to: PeerId, origin: &LinkAddr, body: Body) {
        if self.voice == Voice::Speaking {
            self.actions.push_back(MembershipAction::Reply {
                to,
                origin: origin.clone(),
                body,
            });
        }
    }

    fn broadcast(&mut self, body: Body) {
        if self.voice == Voice::Speaking {
            self.actions.push_back(MembershipAction::Broadcast { body });
        }
    }

    fn publish(&mut self, event: MembershipEvent) {
        self.actions.push_back(MembershipAction::Publish(event));
    }
}
