//! Where the members of the log's cluster are reached, as the replicated configuration says
//! (MEMB-3): each member added at runtime brings its UDP address and admin URL in the
//! configuration entry that adds it, and every node learns them from there.
//!
//! The ElectionActor replaces the directory's contents whenever the configuration in force
//! changes (the same moment it publishes `ConfigurationChanged`); the TransportActor reads it
//! for addresses to try before a member's frames have shown its route (first contact), and the
//! admin API for the admin URL it names in a 421 redirect, in the status and in the members
//! list. Those are readers on other actors and HTTP workers, and the contents change only with
//! a configuration entry, so one small shared map under a lock is simpler than messages to
//! each of them. The addresses the configuration file gives (`link.udp.peers`,
//! `admin.peer_urls`) are not here and take precedence where both name one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use conclave_protocol::{Configuration, MemberAddress, PeerId};

/// The address book of the configuration in force. Cheap to clone; clones share it.
#[derive(Debug, Clone, Default)]
pub struct MemberDirectory {
    addresses: Arc<RwLock<BTreeMap<PeerId, MemberAddress>>>,
}

impl MemberDirectory {
    /// An empty directory: a node before it saw a configuration with addresses.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the address book of `config`, the configuration now in force: a member removed
    /// is forgotten with it.
    pub fn replace(&self, config: &Configuration) {
        let mut addresses = match self.addresses.write() {
            Ok(guard) => guard,
            // A writer that panicked left a map that is still a map; the next write fixes it.
            Err(poisoned) => poisoned.into_inner(),
        };
        addresses.clone_from(&config.addresses);
    }

    /// Every member's UDP address, to try for a peer whose route is not known yet.
    pub fn udp_addresses(&self) -> Vec<SocketAddr> {
        self.read(|addresses| addresses.values().filter_map(|a| a.udp).collect())
    }

    /// `peer`'s address, when the configuration gives one.
    pub fn address(&self, peer: &PeerId) -> Option<MemberAddress> {
        self.read(|addresses| addresses.get(peer).cloned())
    }

    /// `peer`'s admin URL, when the configuration gives one.
    pub fn admin_url(&self, peer: &PeerId) -> Option<String> {
        self.address(peer).and_then(|address| address.admin_url)
    }

    /// Every member's admin URL that the configuration gives.
    pub fn admin_urls(&self) -> BTreeMap<PeerId, String> {
        self.read(|addresses| {
            addresses
                .iter()
                .filter_map(|(peer, address)| Some((*peer, address.admin_url.clone()?)))
                .collect()
        })
    }

    fn read<T>(&self, read: impl FnOnce(&BTreeMap<PeerId, MemberAddress>) -> T) -> T {
        match self.addresses.read() {
            Ok(guard) => read(&guard),
            Err(poisoned) => read(&poisoned.into_inner()),
        }
    }
}

/// Admin URLs by peer: those of `admin.peer_urls`, and, for members it does not name, those
/// the configuration gives (MEMB-3).
#[derive(Debug, Clone)]
pub struct AdminUrls {
    configured: BTreeMap<PeerId, String>,
    directory: MemberDirectory,
}

impl AdminUrls {
    /// `admin.peer_urls` first, then `directory`.
    pub fn new(configured: BTreeMap<PeerId, String>, directory: MemberDirectory) -> Self {
        Self {
            configured,
            directory,
        }
    }

    /// The admin URL of `peer`, when either names it.
    pub fn get(&self, peer: &PeerId) -> Option<String> {
        self.configured
            .get(peer)
            .cloned()
            .or_else(|| self.directory.admin_url(peer))
    }

    /// Every admin URL known, by peer.
    pub fn all(&self) -> BTreeMap<PeerId, String> {
        let mut all = self.directory.admin_urls();
        all.extend(self.configured.clone());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MEMB-3: the directory holds the configuration's address book and forgets a member the
    /// next configuration removed; the configuration file's URL wins over the book's.
    #[test]
    fn memb3_the_directory_follows_the_configuration() {
        let d = PeerId::from_static("d");
        let a = PeerId::from_static("a");
        let directory = MemberDirectory::new();
        let mut config = Configuration::with_voters([a]);
        config.learners.insert(d);
        config.addresses.insert(
            d,
            MemberAddress {
                udp: Some(SocketAddr::from(([127, 0, 0, 1], 7949))),
                admin_url: Some("http://127.0.0.1:7073".to_owned()),
            },
        );
        config.addresses.insert(
            a,
            MemberAddress {
                udp: None,
                admin_url: Some("http://book-a".to_owned()),
            },
        );
        directory.replace(&config);
        assert_eq!(
            directory.udp_addresses(),
            vec![SocketAddr::from(([127, 0, 0, 1], 7949))]
        );
        let urls = AdminUrls::new([(a, "http://file-a".to_owned())].into(), directory.clone());
        assert_eq!(urls.get(&d).as_deref(), Some("http://127.0.0.1:7073"));
        assert_eq!(urls.get(&a).as_deref(), Some("http://file-a"));
        assert_eq!(urls.all().len(), 2);
        directory.replace(&Configuration::with_voters([a]));
        assert_eq!(urls.get(&d), None);
        assert!(directory.udp_addresses().is_empty());
    }
}
