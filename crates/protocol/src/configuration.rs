//! The membership of a replicated log's cluster as the log carries it (MEMB-1, MEMB-2).
//!
//! A [`Configuration`] is the data of an [`EntryKind::Config`](crate::EntryKind::Config)
//! entry: the voters, who elect and count toward commit, and the learners, who receive the
//! log and do neither. It is encoded as MessagePack, two arrays of peer ids, so that a node
//! decodes exactly the set the leader proposed.
//!
//! A member added at runtime (MEMB-3) is named in no node's configuration file, so the
//! configuration also carries an address book: where each such member listens for frames and
//! serves its admin API. It is a third element, written only when it holds an entry, so that
//! a configuration without one keeps the two-array form, and an entry written before the
//! address book existed still decodes (as a configuration without addresses).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::PeerId;

/// The voters and learners of one configuration (MEMB-1, MEMB-2). A peer is in one set at
/// most.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    /// Members that vote and count toward commit and quorum.
    pub voters: BTreeSet<PeerId>,
    /// Members that receive the log and never vote or count.
    pub learners: BTreeSet<PeerId>,
    /// MEMB-3: where members added at runtime are reached; the voters `cluster.voters` seeds
    /// have none (the configuration file names them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub addresses: BTreeMap<PeerId, MemberAddress>,
}

/// MEMB-3: where a member is reached: the UDP address its frames come from and its admin API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberAddress {
    /// Its `link.udp.listen` address, tried until a frame from it shows its route. On the
    /// wire the text `ip:port`, not serde's binary form of an address, so that the encoding
    /// the protocol document gives is plain.
    #[serde(with = "socket_addr_text")]
    pub udp: Option<SocketAddr>,
    /// The URL of its admin API (`http://host:port`), named in redirects and listings.
    pub admin_url: Option<String>,
}

impl MemberAddress {
    /// Whether it names nothing (a member added without addresses keeps no entry).
    pub fn is_empty(&self) -> bool {
        self.udp.is_none() && self.admin_url.is_none()
    }
}

/// A configuration entry's data did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("configuration entry does not decode: {0}")]
pub struct ConfigurationError(String);

impl Configuration {
    /// Only `voters`, no learner: the configuration `cluster.voters` seeds.
    pub fn with_voters(voters: impl IntoIterator<Item = PeerId>) -> Self {
        Self {
            voters: voters.into_iter().collect(),
            learners: BTreeSet::new(),
            addresses: BTreeMap::new(),
        }
    }

    /// Whether `peer` is a voter or a learner.
    pub fn contains(&self, peer: &PeerId) -> bool {
        self.voters.contains(peer) || self.learners.contains(peer)
    }

    /// Every member, voters then learners.
    pub fn members(&self) -> impl Iterator<Item = &PeerId> {
        self.voters.iter().chain(self.learners.iter())
    }

    /// The bytes of a configuration entry's data.
    pub fn encode(&self) -> Vec<u8> {
        // Two arrays of short strings cannot fail to encode into a Vec.
        rmp_serde::to_vec(self).unwrap_or_default()
    }

    /// A configuration entry's data back; a peer in both sets counts as a voter.
    pub fn decode(bytes: &[u8]) -> Result<Self, ConfigurationError> {
        let mut config: Self =
            rmp_serde::from_slice(bytes).map_err(|error| ConfigurationError(error.to_string()))?;
        let voters = config.voters.clone();
        config.learners.retain(|peer| !voters.contains(peer));
        // An address is kept for members only: the book never outlives a removal.
        let members: BTreeSet<PeerId> = config.members().copied().collect();
        config.addresses.retain(|peer, _| members.contains(peer));
        Ok(config)
    }
}

/// An optional socket address as its text, `ip:port`.
mod socket_addr_text {
    use std::net::SocketAddr;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        addr: &Option<SocketAddr>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match addr {
            Some(addr) => serializer.serialize_some(&addr.to_string()),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<SocketAddr>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|text| text.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MEMB-1: a configuration survives its entry's encoding.
    #[test]
    fn memb1_a_configuration_round_trips() {
        let config = Configuration {
            voters: [PeerId::from_static("a"), PeerId::from_static("b")].into(),
            learners: [PeerId::from_static("c")].into(),
            addresses: [(
                PeerId::from_static("c"),
                MemberAddress {
                    udp: Some(SocketAddr::from(([127, 0, 0, 1], 7949))),
                    admin_url: Some("http://127.0.0.1:7073".to_owned()),
                },
            )]
            .into(),
        };
        assert_eq!(Configuration::decode(&config.encode()), Ok(config));
        assert!(Configuration::decode(&[0xc1]).is_err());
    }

    /// MEMB-1: the wire form docs/wire-protocol.md gives: `[voters, learners]`, ascending.
    #[test]
    fn memb1_a_configuration_is_two_arrays_of_peer_ids() {
        let config = Configuration {
            voters: [PeerId::from_static("b"), PeerId::from_static("a")].into(),
            learners: Default::default(),
            addresses: Default::default(),
        };
        assert_eq!(
            config.encode(),
            vec![0x92, 0x92, 0xa1, b'a', 0xa1, b'b', 0x90]
        );
    }

    /// MEMB-3: an entry written before configurations carried addresses (two arrays) decodes
    /// as a configuration without any; one with addresses is a third element.
    #[test]
    fn memb3_an_old_configuration_decodes_without_addresses() {
        let old = [0x92, 0x91, 0xa1, b'a', 0x91, 0xa1, b'd'];
        let config = Configuration::decode(&old).unwrap();
        assert_eq!(config.voters, [PeerId::from_static("a")].into());
        assert_eq!(config.learners, [PeerId::from_static("d")].into());
        assert!(config.addresses.is_empty());
        let mut with = config.clone();
        with.addresses.insert(
            PeerId::from_static("d"),
            MemberAddress {
                udp: None,
                admin_url: Some("http://d:7070".to_owned()),
            },
        );
        let bytes = with.encode();
        assert_eq!(bytes[0], 0x93);
        // The address book: a map of peer id to `[udp, admin_url]`.
        assert_eq!(
            &bytes[7..],
            &[
                0x81, 0xa1, b'd', 0x92, 0xc0, 0xad, b'h', b't', b't', b'p', b':', b'/', b'/', b'd',
                b':', b'7', b'0', b'7', b'0'
            ]
        );
        assert_eq!(Configuration::decode(&bytes), Ok(with));
    }

    /// MEMB-3: an address of a peer that is no member is dropped on decoding.
    #[test]
    fn memb3_addresses_of_non_members_are_dropped() {
        let mut config = Configuration::with_voters([PeerId::from_static("a")]);
        config
            .addresses
            .insert(PeerId::from_static("z"), MemberAddress::default());
        assert!(
            Configuration::decode(&config.encode())
                .unwrap()
                .addresses
                .is_empty()
        );
    }

    /// MEMB-1: an `InstallSnapshot` without a configuration is the seven fields it always
    /// was; with one, the eighth field carries it, and both decode.
    #[test]
    fn memb1_install_snapshot_carries_a_configuration_only_when_given_one() {
        let chunk = crate::InstallSnapshot {
            term: 2,
            leader: PeerId::from_static("a"),
            last_index: 9,
            last_term: 2,
            offset: 0,
            data: vec![1, 2],
            done: true,
            config: None,
        };
        let bytes = rmp_serde::to_vec(&chunk).unwrap();
        assert_eq!(bytes[0], 0x97);
        assert_eq!(
            rmp_serde::from_slice::<crate::InstallSnapshot>(&bytes).unwrap(),
            chunk
        );
        let with = crate::InstallSnapshot {
            config: Some(Box::new(Configuration::with_voters([PeerId::from_static(
                "a",
            )]))),
            ..chunk
        };
        let bytes = rmp_serde::to_vec(&with).unwrap();
        assert_eq!(bytes[0], 0x98);
        assert_eq!(
            rmp_serde::from_slice::<crate::InstallSnapshot>(&bytes).unwrap(),
            with
        );
    }
}
