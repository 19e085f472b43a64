//! The peer table (MEM-1): what this node knows about every other member of the cluster.
//!
//! It is plain data. It publishes no events and runs no timers; the [`Membership`] state
//! machine decides when an entry changes and reports it. Everything else (the election core,
//! the admin API's `GET /v1/peers`, the `peers{status}` and `peer_rtt_seconds{peer}` metrics)
//! reads it, and because it can always be read whole it stays the truth when an event
//! subscriber falls behind (MEM-5).
//!
//! Entries are kept in a `BTreeMap`, so every listing comes out in peer-id order and two runs
//! of the simulator with the same seed walk the table identically.
//!
//! [`Membership`]: super::Membership

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use conclave_protocol::PeerId;

use crate::Instant;

/// The link address a frame came from, as the transport names it: `"udp:127.0.0.1:7946"`,
/// `"espnow:aa:bb:cc:dd:ee:ff"`, `"mem:3"`.
///
/// The core never parses it beyond its link name (the part before the first `:`). It compares
/// two of them, to tell a restart of the same node (same address) from a second node claiming
/// a live id (another address on the same link, MEM-3); one node may be heard over several
/// links at once, at one address on each.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkAddr(String);

impl LinkAddr {
    /// Wraps the transport's name for an address.
    pub fn new(addr: impl Into<String>) -> Self {
        Self(addr.into())
    }

    /// The address as the transport wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The link it is on: the part before the first `:` (`udp`, `espnow`, `mem`), or the whole
    /// address when it has none.
    pub fn link(&self) -> &str {
        self.0
            .split_once(':')
            .map_or(self.0.as_str(), |(link, _)| link)
    }

    /// Whether `other` is on the same link, where the two would compete for one id (MEM-3).
    pub fn same_link(&self, other: &LinkAddr) -> bool {
        self.link() == other.link()
    }
}

impl fmt::Display for LinkAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether a peer is currently heard (MEM-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerStatus {
    /// Heard within `heartbeat_interval × timeout_multiplier`.
    Connected,
    /// Silent for longer than that; still in the table and still probed.
    Disconnected,
}

impl PeerStatus {
    /// The lowercase name used in logs, the admin API and the `peers{status}` metric label.
    pub fn label(self) -> &'static str {
        match self {
            PeerStatus::Connected => "connected",
            PeerStatus::Disconnected => "disconnected",
        }
    }
}

impl fmt::Display for PeerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One entry of the [`PeerTable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    /// The peer's identity.
    pub id: PeerId,
    /// The link address its frames come from; what MEM-3's duplicate check compares.
    pub addr: LinkAddr,
    /// Whether it is currently heard.
    pub status: PeerStatus,
    /// The last measured round-trip time, `None` until a pong has come back.
    pub rtt: Option<Duration>,
    /// When a frame of any kind last arrived from it.
    pub last_seen: Instant,
    /// When it entered the table.
    pub joined_at: Instant,
}

/// Errors of the membership module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// The id is already in the table; MEM-1 forbids two entries for one id.
    #[error("peer {0} is already in the peer table")]
    AlreadyKnown(PeerId),
    /// The id is the local node's own, which never appears among its peers.
    #[error("peer {0} is the local node and cannot be its own peer")]
    LocalId(PeerId),
}

/// Every known peer of one node, keyed and listed by id (MEM-1).
///
/// The local node is never an entry, so counts such as [`connected_count`] are counts of
/// *other* nodes, which is what quorum arithmetic expects.
///
/// [`connected_count`]: PeerTable::connected_count
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTable {
    local: PeerId,
    peers: BTreeMap<PeerId, PeerInfo>,
}

impl PeerTable {
    /// An empty table for the node `local`.
    pub fn new(local: PeerId) -> Self {
        Self {
            local,
            peers: BTreeMap::new(),
        }
    }

    /// The node this table belongs to (never one of its entries).
    pub fn local(&self) -> PeerId {
        self.local
    }

    /// Adds `id`, reached at `addr`, as Connected and last seen `now`: a peer only enters the
    /// table because something was just heard from it.
    ///
    /// Refuses an id already present ([`MembershipError::AlreadyKnown`]) and the local id
    /// ([`MembershipError::LocalId`]).
    pub fn add(&mut self, id: PeerId, addr: LinkAddr, now: Instant) -> Result<(), MembershipError> {
        if id == self.local {
            return Err(MembershipError::LocalId(id));
        }
        if self.peers.contains_key(&id) {
            return Err(MembershipError::AlreadyKnown(id));
        }
        self.peers.insert(
            id,
            PeerInfo {
                id,
                addr,
                status: PeerStatus::Connected,
                rtt: None,
                last_seen: now,
                joined_at: now,
            },
        );
        Ok(())
    }

    /// Removes `id`, giving back its last entry.
    pub fn remove(&mut self, id: &PeerId) -> Option<PeerInfo> {
        self.peers.remove(id)
    }

    /// Sets the status of `id` and returns the status it had before (which may be the same),
    /// or `None` when `id` is unknown.
    pub fn update_status(&mut self, id: &PeerId, status: PeerStatus) -> Option<PeerStatus> {
        let peer = self.peers.get_mut(id)?;
        Some(std::mem::replace(&mut peer.status, status))
    }

    /// Whether `id` is in the table, whatever its status.
    pub fn has(&self, id: &PeerId) -> bool {
        self.peers.contains_key(id)
    }

    /// The entry of `id`.
    pub fn get(&self, id: &PeerId) -> Option<&PeerInfo> {
        self.peers.get(id)
    }

    /// Every entry, in peer-id order.
    pub fn list(&self) -> impl Iterator<Item = &PeerInfo> {
        self.peers.values()
    }

    /// The ids of the Connected peers, in order.
    pub fn connected_peers(&self) -> Vec<PeerId> {
        self.peers
            .values()
            .filter(|peer| peer.status == PeerStatus::Connected)
            .map(|peer| peer.id)
            .collect()
    }

    /// The last measured round-trip time to `id`; `None` if unknown or never measured.
    pub fn rtt(&self, id: &PeerId) -> Option<Duration> {
        self.peers.get(id).and_then(|peer| peer.rtt)
    }

    /// The status of `id`; `None` if unknown.
    pub fn status(&self, id: &PeerId) -> Option<PeerStatus> {
        self.peers.get(id).map(|peer| peer.status)
    }

    /// How many other nodes are Connected; the local node is never counted.
    pub fn connected_count(&self) -> usize {
        self.peers
            .values()
            .filter(|peer| peer.status == PeerStatus::Connected)
            .count()
    }

    /// Records that a frame from `id` arrived at `now`. Only `last_seen` changes: deciding
    /// what hearing a peer means for its status is the state machine's job. Returns whether
    /// `id` is known.
    pub fn touch(&mut self, id: &PeerId, now: Instant) -> bool {
        match self.peers.get_mut(id) {
            Some(peer) => {
                peer.last_seen = now;
                true
            }
            None => false,
        }
    }

    /// Number of peers, whatever their status.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether no peer is known.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Mutable access for the state machine, which also moves addresses and records RTTs.
    pub(super) fn get_mut(&mut self, id: &PeerId) -> Option<&mut PeerInfo> {
        self.peers.get_mut(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{id, ms as at_ms};

    fn table_with(peers: &[&str]) -> PeerTable {
        let mut table = PeerTable::new(id("self"));
        for (n, peer) in peers.iter().enumerate() {
            table
                .add(id(peer), LinkAddr::new(format!("mem:{n}")), at_ms(0))
                .unwrap();
        }
        table
    }

    /// MEM-1: an added peer is Connected, unmeasured, and seen and joined at the time of adding.
    #[test]
    fn mem1_add_records_a_connected_peer() {
        let mut table = PeerTable::new(id("self"));
        table
            .add(id("gw-b"), LinkAddr::new("udp:10.0.0.2:7946"), at_ms(42))
            .unwrap();
        assert_eq!(
            table.get(&id("gw-b")),
            Some(&PeerInfo {
                id: id("gw-b"),
                addr: LinkAddr::new("udp:10.0.0.2:7946"),
                status: PeerStatus::Connected,
                rtt: None,
                last_seen: at_ms(42),
                joined_at: at_ms(42),
            })
        );
        assert!(table.has(&id("gw-b")));
        assert_eq!(table.len(), 1);
        assert!(!table.is_empty());
    }

    /// MEM-1: adding a known id is refused and leaves the first entry untouched.
    #[test]
    fn mem1_add_rejects_a_known_id() {
        let mut table = table_with(&["gw-b"]);
        let before = table.get(&id("gw-b")).cloned();
        assert_eq!(
            table.add(id("gw-b"), LinkAddr::new("mem:9"), at_ms(5)),
            Err(MembershipError::AlreadyKnown(id("gw-b")))
        );
        assert_eq!(table.get(&id("gw-b")).cloned(), before);
        assert_eq!(table.len(), 1);
    }

    /// MEM-1: the local node is never its own peer, so it is never counted.
    #[test]
    fn mem1_add_rejects_the_local_id() {
        let mut table = PeerTable::new(id("self"));
        assert_eq!(
            table.add(id("self"), LinkAddr::new("mem:0"), at_ms(0)),
            Err(MembershipError::LocalId(id("self")))
        );
        assert!(table.is_empty());
        assert_eq!(table.connected_count(), 0);
        assert_eq!(table.local(), id("self"));
    }

    /// MEM-1: remove hands back the entry and forgets the peer; removing again finds nothing.
    #[test]
    fn mem1_remove_forgets_the_peer() {
        let mut table = table_with(&["gw-b", "gw-c"]);
        let removed = table.remove(&id("gw-b")).unwrap();
        assert_eq!(removed.id, id("gw-b"));
        assert!(!table.has(&id("gw-b")));
        assert_eq!(table.remove(&id("gw-b")), None);
        assert_eq!(table.len(), 1);
    }

    /// MEM-1: update_status returns the previous status, and None for an unknown peer.
    #[test]
    fn mem1_update_status_returns_the_old_status() {
        let mut table = table_with(&["gw-b"]);
        assert_eq!(
            table.update_status(&id("gw-b"), PeerStatus::Disconnected),
            Some(PeerStatus::Connected)
        );
        assert_eq!(table.status(&id("gw-b")), Some(PeerStatus::Disconnected));
        assert_eq!(
            table.update_status(&id("gw-b"), PeerStatus::Disconnected),
            Some(PeerStatus::Disconnected)
        );
        assert_eq!(
            table.update_status(&id("nobody"), PeerStatus::Connected),
            None
        );
        assert_eq!(table.status(&id("nobody")), None);
    }

    /// MEM-1: list is in peer-id order whatever the order of adding.
    #[test]
    fn mem1_list_is_sorted_by_id() {
        let table = table_with(&["gw-c", "gw-a", "gw-b"]);
        let ids: Vec<PeerId> = table.list().map(|peer| peer.id).collect();
        assert_eq!(ids, vec![id("gw-a"), id("gw-b"), id("gw-c")]);
    }

    /// MEM-1: connected peers and the connected count leave Disconnected peers out.
    #[test]
    fn mem1_connected_peers_and_count_skip_disconnected() {
        let mut table = table_with(&["gw-d", "gw-b", "gw-c"]);
        assert_eq!(table.connected_count(), 3);
        table.update_status(&id("gw-c"), PeerStatus::Disconnected);
        assert_eq!(table.connected_peers(), vec![id("gw-b"), id("gw-d")]);
        assert_eq!(table.connected_count(), 2);
        assert_eq!(table.len(), 3);
    }

    /// MEM-1: the RTT of a peer is None until measured, and None for an unknown peer.
    #[test]
    fn mem1_rtt_of_a_peer() {
        let mut table = table_with(&["gw-b"]);
        assert_eq!(table.rtt(&id("gw-b")), None);
        table.get_mut(&id("gw-b")).unwrap().rtt = Some(Duration::from_micros(12_345));
        assert_eq!(table.rtt(&id("gw-b")), Some(Duration::from_micros(12_345)));
        assert_eq!(table.rtt(&id("nobody")), None);
    }

    /// MEM-1: touch moves last_seen only, and reports whether the peer is known.
    #[test]
    fn mem1_touch_refreshes_last_seen_only() {
        let mut table = table_with(&["gw-b"]);
        table.update_status(&id("gw-b"), PeerStatus::Disconnected);
        assert!(table.touch(&id("gw-b"), at_ms(900)));
        let peer = table.get(&id("gw-b")).unwrap();
        assert_eq!(peer.last_seen, at_ms(900));
        assert_eq!(peer.joined_at, at_ms(0));
        assert_eq!(peer.status, PeerStatus::Disconnected);
        assert!(!table.touch(&id("nobody"), at_ms(900)));
    }

    /// MEM-1: status labels are the metric and API spellings; addresses print as given.
    #[test]
    fn mem1_labels_and_addresses() {
        assert_eq!(PeerStatus::Connected.label(), "connected");
        assert_eq!(PeerStatus::Disconnected.to_string(), "disconnected");
        let addr = LinkAddr::new("espnow:aa:bb:cc:dd:ee:ff");
        assert_eq!(addr.as_str(), "espnow:aa:bb:cc:dd:ee:ff");
        assert_eq!(addr.link(), "espnow");
        assert!(addr.same_link(&LinkAddr::new("espnow:02:00:00:00:00:01")));
        assert!(!addr.same_link(&LinkAddr::new("udp:127.0.0.1:7946")));
        assert_eq!(LinkAddr::new("udp:[::1]:7946").link(), "udp");
        assert_eq!(LinkAddr::new("bare").link(), "bare");
        assert_eq!(addr.to_string(), "espnow:aa:bb:cc:dd:ee:ff");
        assert_eq!(
            MembershipError::AlreadyKnown(id("gw-b")).to_string(),
            "peer gw-b is already in the peer table"
        );
    }
}
