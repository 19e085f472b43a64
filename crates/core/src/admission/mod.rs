//! Admission: whether an authenticated frame may act on this node (PROTO-5, MEM-3, TR-2).
//!
//! The transport decodes a frame and checks its tag; everything that depends on what this node
//! already knows about the sender is decided here, in one place, for every link:
//!
//! - **freshness across a restart of this node** (PROTO-5). A node that starts trusts no
//!   sender: replay windows are not persisted, so a frame captured before the start could
//!   otherwise be played back. An authenticated frame from a sender not yet verified is dropped
//!   (`unverified`) and answered with a [`Challenge`] to the address it came from, at most once
//!   per [`AdmissionConfig::challenge_interval`] per sender and address, and at most
//!   [`CHALLENGES_PER_ORIGIN`] times per interval to one address whatever ids its frames claim.
//!   The sender answers with a [`ChallengeAck`] carrying the nonce. Only this node issues challenges (its frames are
//!   tagged) and the nonce is new since its start, so the answer was made after the start; the
//!   sender's replay window starts at the answer's `(incarnation, seq)` with everything before
//!   it counted as seen. A [`Challenge`] is always answered, verified sender or not, so two nodes
//!   that both restarted verify each other;
//! - **the replay window** of each verified sender: every `(incarnation, seq)` is accepted once
//!   (PROTO-5);
//! - **who owns an id on a link** (MEM-3). The address a sender was verified or first accepted
//!   at owns the sender's id on that link (`udp`, `espnow`, `mem`, the part of the
//!   [`LinkAddr`] before its `:`), for as long as frames keep coming from it: until
//!   [`AdmissionConfig::owner_timeout`] passes without one, or the sender says `Goodbye`. A frame
//!   from another address on that link meanwhile moves nothing — not the replay window, not the
//!   route. A `Hello` that is new neither to the sender's window nor to the address it comes
//!   from (whose own sequence must have moved on) is a replay (`replay`), checked before
//!   anything else about it, so a captured `Hello` played back at full speed costs a counter
//!   each and is answered once at most; any other is handed to membership as
//!   [`Verdict::Contested`] so that MEM-3 refuses it through a reply to its origin, at most
//!   [`CONTESTED_PER_INTERVAL`] times per [`AdmissionConfig::challenge_interval`] per id and
//!   address (about the pace at which an address that proved nothing is challenged), and
//!   dropped (`duplicate_id`) past that;
//!   anything else is dropped (`duplicate_id`). One node may be heard over several links at
//!   once, at one address on each;
//! - **bounds** (PROTO-5): at most [`AdmissionConfig::max_peers`] verified senders besides the
//!   configured voters, which always have room (`peer_limit` past it; when every place is
//!   taken, the sender silent longest gives its place to a newcomer once silent for
//!   [`AdmissionConfig::forget_after`], and is [`AdmissionAction::Forgotten`]), and at most
//!   [`MAX_PENDING`] senders being challenged at once (the least recently heard is forgotten);
//! - **incarnations from the future** (PROTO-5): an incarnation more than
//!   [`AdmissionConfig::max_incarnation_ahead`] seconds ahead of this node's clock is refused
//!   (`incarnation_ahead`), so that one frame cannot push a sender's window beyond everything
//!   the real sender will ever send. Incarnations are Unix seconds at a node's start (or the
//!   previous one plus one, when a node restarts faster than once a second), so the clock is the
//!   reference; this node's own incarnation stands in for it when the clock is behind (a board
//!   without a real-time clock before NTP).
//!
//! Without a pre-shared key the same rules run: verification then proves that the sender
//! receives at the address it sends from and answers now, not who it is.
//!
//! ```text
//!   decoded, tagged frame ──► handle_frame(now, unix_secs, origin, header, body) ──► Verdict
//!                                                   │                 Accept / Contested / Consumed /
//!                                                   ▼                 Ignore / Drop(reason)
//!                                            poll_action() ──► Reply (Challenge, ChallengeAck)
//!                                                              Verified (greet, learn the route)
//!                                                              Forgotten (forget it, its route)
//!                                                              Notice (log it)
//! ```
//!
//! The machine has no timer of its own: whatever depends on time is looked at when the next
//! frame comes.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use conclave_protocol::{Body, Challenge, ChallengeAck, DropReason, PeerId, ReplayWindow};

use crate::membership::{LinkAddr, MembershipConfig};
use crate::rng::SeededRng;
use crate::time::Instant;

/// Verified senders besides the configured voters, by default. A cluster of gateways is a
/// handful of nodes; ESP-NOW itself holds 20 peers.
pub const DEFAULT_MAX_PEERS: usize = 64;
/// Senders being challenged at once; past it the least recently heard is forgotten (and
/// challenged again with a new nonce if it comes back).
pub const MAX_PENDING: usize = 64;
/// Addresses one pending sender is challenged at; a flood of replays from one address cannot
/// keep the real sender's address from being challenged.
pub const MAX_CHALLENGED_ORIGINS: usize = 4;
/// Default [`AdmissionConfig::max_incarnation_ahead`]: one day. A node restarted many times a
/// second runs ahead of its clock by one second per restart, and clocks of gateways may
/// disagree; a day covers both. A forged incarnation (it needs the key) locks its sender out
/// for at most that long.
pub const DEFAULT_MAX_INCARNATION_AHEAD: u64 = 86_400;
/// Contested `Hello`s from one id and address that go to membership (to be refused) per
/// [`AdmissionConfig::challenge_interval`]: a few, so that the refusal of a real duplicate is
/// not held back by the jitter between its announcements.
pub const CONTESTED_PER_INTERVAL: u32 = 3;
/// Challenges sent to one address per [`AdmissionConfig::challenge_interval`], whatever ids
/// its frames claim: a node has one id, and a few cover nodes that restarted behind one
/// address (a relay, a NAT).
pub const CHALLENGES_PER_ORIGIN: u32 = 4;
/// Default [`AdmissionConfig::forget_after`]: a minute, far past the few seconds after which
/// membership calls a silent peer disconnected, so that a peer behind a short partition keeps
/// its place.
pub const DEFAULT_FORGET_AFTER: Duration = Duration::from_secs(60);
/// Default [`AdmissionConfig::challenge_interval`].
pub const DEFAULT_CHALLENGE_INTERVAL: Duration = Duration::from_millis(100);
/// Shortest time between two notices of one kind, so a flood does not flood the log.
const NOTICE_INTERVAL: Duration = Duration::from_secs(10);

/// The rules of one node's admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// This node: its own frames echoed back by a link are ignored.
    pub local: PeerId,
    /// This node's incarnation, the lower bound of its clock.
    pub incarnation: u64,
    /// The configured voters: there is always room for them in the peer table.
    pub reserved: BTreeSet<PeerId>,
    /// Verified senders that may be known at once besides the reserved ones.
    pub max_peers: usize,
    /// How long an address keeps a sender's id on its link after the last frame from it. The
    /// node sets membership's silence timeout plus one heartbeat, so that membership has
    /// declared the owner gone before another address may take the id.
    pub owner_timeout: Duration,
    /// Shortest time between two challenges to one sender at one address.
    pub challenge_interval: Duration,
    /// How many seconds an incarnation may be ahead of this node's clock.
    pub max_incarnation_ahead: u64,
    /// How long a verified sender that is not a configured voter keeps its place among the
    /// `max_peers` once silent, when a newcomer needs the place.
    pub forget_after: Duration,
}

impl AdmissionConfig {
    /// The defaults for `local` in `incarnation`, with the owner timeout of the default
    /// membership settings.
    pub fn new(local: PeerId, incarnation: u64) -> Self {
        Self {
            local,
            incarnation,
            reserved: BTreeSet::new(),
            max_peers: DEFAULT_MAX_PEERS,
            owner_timeout: Self::owner_timeout_for(&MembershipConfig::default()),
            challenge_interval: DEFAULT_CHALLENGE_INTERVAL,
            max_incarnation_ahead: DEFAULT_MAX_INCARNATION_AHEAD,
            forget_after: DEFAULT_FORGET_AFTER,
        }
    }

    /// The owner timeout that fits `membership`: its silence timeout plus one heartbeat, the
    /// latest its liveness tick marks a silent peer Disconnected.
    pub fn owner_timeout_for(membership: &MembershipConfig) -> Duration {
        membership
            .silence_timeout()
            .saturating_add(membership.heartbeat_interval)
    }
}

/// What the envelope says about a frame, besides its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The sender.
    pub from: PeerId,
    /// The addressee; `None` is a broadcast.
    pub to: Option<PeerId>,
    /// The sender's incarnation.
    pub incarnation: u64,
    /// The sender's sequence number.
    pub seq: u64,
}

/// What the shell does with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Act on it: membership hears the sender, the election gets its message, the route to
    /// the sender is the frame's origin.
    Accept,
    /// A `Hello` from an address that does not own the id on its link while the owner is live:
    /// membership refuses it (MEM-3) through a reply to its origin. Nothing else happens: no
    /// route, no proof of life for the id.
    Contested,
    /// A handshake frame, handled here; nothing else is to be done with it.
    Consumed,
    /// This node's own frame, echoed by a link.
    Ignore,
    /// Drop it and count it under this reason (TR-2).
    Drop(DropReason),
}

/// Something admission tells the operator, at most once per kind every ten seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmissionNotice {
    /// A frame's incarnation is far ahead of this node's clock: the sender's clock or this
    /// node's is wrong, or the frame is forged.
    IncarnationAhead {
        /// The sender.
        peer: PeerId,
        /// Where the frame came from.
        origin: LinkAddr,
        /// Its incarnation (Unix seconds at the sender's start).
        incarnation: u64,
        /// This node's clock, in Unix seconds (or its own incarnation when that is later).
        clock: u64,
    },
    /// A new sender was refused because the peer table is full.
    PeerLimit {
        /// The sender.
        peer: PeerId,
        /// Where its frame came from.
        origin: LinkAddr,
        /// The limit.
        limit: usize,
    },
}

/// Something the shell must do on admission's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmissionAction {
    /// Send `body` to `to` through `origin`, the address its frame came from.
    Reply {
        /// The addressee.
        to: PeerId,
        /// Where to send it.
        origin: LinkAddr,
        /// A [`Challenge`] or a [`ChallengeAck`].
        body: Body,
    },
    /// `peer` proved its frames are fresh, at `origin`: route to it there, and let membership
    /// greet it now rather than at its next announcement (its earlier frames were dropped).
    Verified {
        /// The sender.
        peer: PeerId,
        /// Where it answered from; it owns the id on that link.
        origin: LinkAddr,
    },
    /// `peer`, not a configured voter, was silent for [`AdmissionConfig::forget_after`] and
    /// its place was needed: it is no longer verified. Forget its route and its membership;
    /// if it comes back it proves itself again.
    Forgotten {
        /// The sender forgotten.
        peer: PeerId,
    },
    /// Log it.
    Notice(AdmissionNotice),
}

/// The address that owns a sender's id on one link.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    addr: LinkAddr,
    last_heard: Instant,
}

/// A sender that proved its frames are fresh.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verified {
    window: ReplayWindow,
    /// At most one owner per link.
    owners: Vec<Owner>,
}

impl Verified {
    /// When any of its addresses was last heard.
    fn last_heard(&self) -> Instant {
        self.owners
            .iter()
            .map(|owner| owner.last_heard)
            .max()
            .unwrap_or(Instant::ZERO)
    }
}

/// Answers of one kind to one key (an address, an id at an address) since `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pace {
    since: Instant,
    count: u32,
}

/// Counts one more answer to `key` in its current window of `interval`, and says whether it
/// may go: no more than `limit` per window. At most [`MAX_PENDING`] keys are kept; the one
/// whose window started first is forgotten.
fn within_pace<K: Ord + Clone>(
    paces: &mut BTreeMap<K, Pace>,
    key: K,
    now: Instant,
    interval: Duration,
    limit: u32,
) -> bool {
    if !paces.contains_key(&key) && paces.len() >= MAX_PENDING {
        let oldest = paces
            .iter()
            .min_by_key(|(_, pace)| pace.since)
            .map(|(key, _)| key.clone());
        if let Some(oldest) = oldest {
            paces.remove(&oldest);
        }
    }
    let pace = paces.entry(key).or_insert(Pace {
        since: now,
        count: 0,
    });
    if now - pace.since >= interval {
        *pace = Pace {
            since: now,
            count: 0,
        };
    }
    if pace.count >= limit {
        return false;
    }
    pace.count += 1;
    true
}

/// A sender being challenged.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    nonce: u64,
    /// Addresses challenged and when, at most [`MAX_CHALLENGED_ORIGINS`].
    asked: Vec<(LinkAddr, Instant)>,
    last_heard: Instant,
}

/// The admission state machine of one node. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Admission {
    config: AdmissionConfig,
    rng: SeededRng,
    verified: BTreeMap<PeerId, Verified>,
    pending: BTreeMap<PeerId, Pending>,
    actions: VecDeque<AdmissionAction>,
    /// How many contested `Hello`s from each id and address went to membership lately, at
    /// most [`MAX_PENDING`] of them (the oldest is forgotten).
    refused: BTreeMap<(PeerId, LinkAddr), Pace>,
    /// The newest `(incarnation, seq)` of a contested `Hello` from each id and address, at
    /// most [`MAX_PENDING`] of them.
    contender_last: BTreeMap<(PeerId, LinkAddr), (u64, u64)>,
    /// How many challenges went to each address lately, whatever ids it claimed, at most
    /// [`MAX_PENDING`] addresses (the oldest is forgotten).
    challenged_origins: BTreeMap<LinkAddr, Pace>,
    /// When each kind of notice was last given (0: incarnation ahead, 1: peer limit).
    last_notice: [Option<Instant>; 2],
}

impl Admission {
    /// A node that has just started: it trusts no sender yet. `rng` draws the challenge nonces.
    pub fn new(config: AdmissionConfig, rng: SeededRng) -> Self {
        Self {
            config,
            rng,
            verified: BTreeMap::new(),
            pending: BTreeMap::new(),
            actions: VecDeque::new(),
            refused: BTreeMap::new(),
            challenged_origins: BTreeMap::new(),
            contender_last: BTreeMap::new(),
            last_notice: [None; 2],
        }
    }

    /// Decides about one decoded, authenticated frame that came from `origin`. `unix_secs` is
    /// the wall clock, for the incarnation check only.
    pub fn handle_frame(
        &mut self,
        now: Instant,
        unix_secs: u64,
        origin: &LinkAddr,
        header: &FrameHeader,
        body: &Body,
    ) -> Verdict {
        if header.from == self.config.local {
            return Verdict::Ignore;
        }
        if header.to.is_some_and(|to| to != self.config.local) {
            return Verdict::Drop(DropReason::Misaddressed);
        }
        let clock = unix_secs.max(self.config.incarnation);
        if header.incarnation > clock.saturating_add(self.config.max_incarnation_ahead) {
            self.notice(
                now,
                AdmissionNotice::IncarnationAhead {
                    peer: header.from,
                    origin: origin.clone(),
                    incarnation: header.incarnation,
                    clock,
                },
            );
            return Verdict::Drop(DropReason::IncarnationAhead);
        }
        match body {
            Body::Challenge(challenge) => return self.on_challenge(now, origin, header, challenge),
            Body::ChallengeAck(ack) => return self.on_challenge_ack(now, origin, header, ack),
            _ => {}
        }
        let owner_timeout = self.config.owner_timeout;
        let Some(sender) = self.verified.get_mut(&header.from) else {
            return self.unverified(now, origin, header.from);
        };
        let owner = sender
            .owners
            .iter()
            .position(|owner| owner.addr.same_link(origin));
        if let Some(index) = owner {
            let owner = &sender.owners[index];
            if owner.addr != *origin && now - owner.last_heard <= owner_timeout {
                if !matches!(body, Body::Hello(_)) {
                    return Verdict::Drop(DropReason::DuplicateId);
                }
                let fresh = sender.window.would_admit(header.incarnation, header.seq);
                return self.contested(now, origin, header, fresh);
            }
        }
        if !sender.window.admit(header.incarnation, header.seq) {
            return Verdict::Drop(DropReason::Replay);
        }
        let heard = Owner {
            addr: origin.clone(),
            last_heard: now,
        };
        match owner {
            Some(index) => sender.owners[index] = heard,
            None => sender.owners.push(heard),
        }
        if matches!(body, Body::Goodbye(_)) {
            // It left on purpose: its id is free, and if it comes back it proves itself again.
            self.verified.remove(&header.from);
        }
        Verdict::Accept
    }

    /// The next thing to do, oldest first; `None` when there is nothing left.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<AdmissionAction> {
        self.actions.pop_front()
    }

    /// Whether `peer` has proven its frames fresh since this node started.
    pub fn is_verified(&self, peer: &PeerId) -> bool {
        self.verified.contains_key(peer)
    }

    /// The address that owns `peer`'s id on `origin`'s link, live or not.
    pub fn owner(&self, peer: &PeerId, link: &LinkAddr) -> Option<&LinkAddr> {
        self.verified
            .get(peer)?
            .owners
            .iter()
            .find(|owner| owner.addr.same_link(link))
            .map(|owner| &owner.addr)
    }

    /// How many senders are verified.
    pub fn verified_count(&self) -> usize {
        self.verified.len()
    }

    /// How many senders are being challenged.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// The rules in force.
    pub fn config(&self) -> &AdmissionConfig {
        &self.config
    }

    // -----------------------------------------------------------------------------------------

    /// Always answered: that is how the challenger verifies this node, whatever this node
    /// knows of it. The answer changes nothing here; a sender not yet verified is challenged
    /// back, since it is talking to this node.
    fn on_challenge(
        &mut self,
        now: Instant,
        origin: &LinkAddr,
        header: &FrameHeader,
        challenge: &Challenge,
    ) -> Verdict {
        self.actions.push_back(AdmissionAction::Reply {
            to: header.from,
            origin: origin.clone(),
            body: Body::ChallengeAck(ChallengeAck {
                nonce: challenge.nonce,
            }),
        });
        if !self.verified.contains_key(&header.from) && self.has_room_for(now, header.from) {
            self.challenge(now, origin, header.from);
        }
        Verdict::Consumed
    }

    fn on_challenge_ack(
        &mut self,
        now: Instant,
        origin: &LinkAddr,
        header: &FrameHeader,
        ack: &ChallengeAck,
    ) -> Verdict {
        if let Some(sender) = self.verified.get(&header.from) {
            // A second answer to a challenge that was sent twice; it proves nothing new.
            return if sender.window.would_admit(header.incarnation, header.seq) {
                Verdict::Consumed
            } else {
                Verdict::Drop(DropReason::Replay)
            };
        }
        let answers = self.pending.get(&header.from).is_some_and(|pending| {
            pending.nonce == ack.nonce && pending.asked.iter().any(|(asked, _)| asked == origin)
        });
        if !answers {
            // An answer to a challenge this node did not send since it started: captured
            // earlier and played back, or meant for an address it did not ask.
            return Verdict::Drop(DropReason::Unverified);
        }
        if !self.has_room_for(now, header.from) {
            self.peer_limit(now, origin, header.from);
            return Verdict::Drop(DropReason::PeerLimit);
        }
        self.pending.remove(&header.from);
        self.verified.insert(
            header.from,
            Verified {
                window: ReplayWindow::floor_at(header.incarnation, header.seq),
                owners: vec![Owner {
                    addr: origin.clone(),
                    last_heard: now,
                }],
            },
        );
        self.actions.push_back(AdmissionAction::Verified {
            peer: header.from,
            origin: origin.clone(),
        });
        Verdict::Consumed
    }

    /// A frame from a sender not verified since this node started.
    fn unverified(&mut self, now: Instant, origin: &LinkAddr, from: PeerId) -> Verdict {
        if !self.has_room_for(now, from) {
            self.peer_limit(now, origin, from);
            return Verdict::Drop(DropReason::PeerLimit);
        }
        self.challenge(now, origin, from);
        Verdict::Drop(DropReason::Unverified)
    }

    /// Challenges `from` at `origin` unless it was challenged there less than
    /// `challenge_interval` ago. The nonce stays the same until the sender is verified, so an
    /// answer to any of the challenges counts.
    fn challenge(&mut self, now: Instant, origin: &LinkAddr, from: PeerId) {
        if !self.pending.contains_key(&from) && self.pending.len() >= MAX_PENDING {
            let stalest = self
                .pending
                .iter()
                .min_by_key(|(_, pending)| pending.last_heard)
                .map(|(id, _)| *id);
            if let Some(stalest) = stalest {
                self.pending.remove(&stalest);
            }
        }
        let rng = &mut self.rng;
        let pending = self.pending.entry(from).or_insert_with(|| Pending {
            nonce: rng.next_u64(),
            asked: Vec::new(),
            last_heard: now,
        });
        pending.last_heard = now;
        let interval = self.config.challenge_interval;
        let position = pending.asked.iter().position(|(asked, _)| asked == origin);
        if position.is_some_and(|index| now - pending.asked[index].1 < interval) {
            return;
        }
        let nonce = pending.nonce;
        // One address claiming ever new ids must not get a challenge per datagram: each is a
        // datagram sent to an address that proved nothing (a reflector, without a key).
        if !within_pace(
            &mut self.challenged_origins,
            origin.clone(),
            now,
            interval,
            CHALLENGES_PER_ORIGIN,
        ) {
            return;
        }
        let Some(pending) = self.pending.get_mut(&from) else {
            return;
        };
        match position {
            Some(index) => pending.asked[index].1 = now,
            None => {
                if pending.asked.len() >= MAX_CHALLENGED_ORIGINS {
                    // The address asked longest ago gives way.
                    let oldest = pending
                        .asked
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, (_, at))| *at)
                        .map_or(0, |(index, _)| index);
                    pending.asked.remove(oldest);
                }
                pending.asked.push((origin.clone(), now));
            }
        }
        self.actions.push_back(AdmissionAction::Reply {
            to: from,
            origin: origin.clone(),
            body: Body::Challenge(Challenge { nonce }),
        });
    }

    /// A `Hello` from `origin` claiming the id of a sender live at another address (MEM-3).
    ///
    /// A replay is a replay wherever it comes from: one captured `Hello` played back at full
    /// speed must cost a counter, not a refusal and a log line each. So the `Hello` is
    /// dropped (`replay`) unless it is new either to the owner's window (`fresh_for_owner`) or
    /// to this address, whose own frames must have moved on past the last one it sent: a second
    /// node started with a copied configuration in the same second as the real one has the
    /// same incarnation and lower sequence numbers, which the owner's window alone would take
    /// for replays. What is left goes to membership to be refused at most
    /// [`CONTESTED_PER_INTERVAL`] times per `challenge_interval` per id and address, and is
    /// dropped (`duplicate_id`) past that: without a key anyone can make fresh frames, and each
    /// refusal is a datagram sent to an address that proved nothing.
    fn contested(
        &mut self,
        now: Instant,
        origin: &LinkAddr,
        header: &FrameHeader,
        fresh_for_owner: bool,
    ) -> Verdict {
        let key = (header.from, origin.clone());
        let stamp = (header.incarnation, header.seq);
        let last = self.contender_last.get(&key).copied();
        if !fresh_for_owner && last.is_some_and(|last| stamp <= last) {
            return Verdict::Drop(DropReason::Replay);
        }
        if last.is_none() && self.contender_last.len() >= MAX_PENDING {
            // Forget the contender heard of longest ago: at worst its next `Hello` is refused
            // once more.
            let stalest = self.contender_last.keys().next().cloned();
            if let Some(stalest) = stalest {
                self.contender_last.remove(&stalest);
            }
        }
        self.contender_last
            .insert(key.clone(), last.map_or(stamp, |last| last.max(stamp)));
        let interval = self.config.challenge_interval;
        if within_pace(
            &mut self.refused,
            key,
            now,
            interval,
            CONTESTED_PER_INTERVAL,
        ) {
            Verdict::Contested
        } else {
            Verdict::Drop(DropReason::DuplicateId)
        }
    }

    /// Whether `peer` may be verified: a configured voter, or room among the others. When
    /// the others fill every place, the one silent longest goes if it has been silent for
    /// [`AdmissionConfig::forget_after`]: without a key, answering a challenge is all it takes
    /// to hold a place, so made-up ids must not hold them until a restart.
    fn has_room_for(&mut self, now: Instant, peer: PeerId) -> bool {
        if self.config.reserved.contains(&peer) || self.verified.contains_key(&peer) {
            return true;
        }
        let others = || {
            self.verified
                .iter()
                .filter(|(id, _)| !self.config.reserved.contains(id))
        };
        if others().count() < self.config.max_peers {
            return true;
        }
        let stalest = others()
            .map(|(id, sender)| (*id, sender.last_heard()))
            .min_by_key(|(_, heard)| *heard);
        match stalest {
            Some((id, heard)) if now - heard >= self.config.forget_after => {
                self.verified.remove(&id);
                self.actions
                    .push_back(AdmissionAction::Forgotten { peer: id });
                true
            }
            _ => false,
        }
    }

    fn peer_limit(&mut self, now: Instant, origin: &LinkAddr, peer: PeerId) {
        let limit = self.config.max_peers;
        self.notice(
            now,
            AdmissionNotice::PeerLimit {
                peer,
                origin: origin.clone(),
                limit,
            },
        );
    }

    fn notice(&mut self, now: Instant, notice: AdmissionNotice) {
        let kind = match notice {
            AdmissionNotice::IncarnationAhead { .. } => 0,
            AdmissionNotice::PeerLimit { .. } => 1,
        };
        if self.last_notice[kind].is_some_and(|at| now - at < NOTICE_INTERVAL) {
            return;
        }
        self.last_notice[kind] = Some(now);
        self.actions.push_back(AdmissionAction::Notice(notice));
    }
}
