//! Watches a node's peers: prints the peer table with each peer's round-trip time, then every
//! change of a peer's status and of the leader as it happens, from a program without an async
//! runtime (the subscription's blocking iterator).
//!
//! ```text
//! cargo run -p conclave --example peer_watcher -- node-b.toml
//! ```

use conclave::{Event, Node};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(path) = std::env::args().nth(1) else {
        return Err("usage: peer_watcher CONFIG.toml".into());
    };
    let node = Node::start(conclave::config::from_file(path)?)?;
    // Subscribed before the table is read: a change in between is printed, not lost.
    let events = node.subscribe();
    for peer in node.peers()? {
        println!(
            "{:<32} {:<12} rtt {:?}",
            peer.id,
            peer.status.label(),
            peer.rtt
        );
    }
    for event in events {
        match event {
            Event::PeerStatusChanged(change) => println!(
                "{}: {} -> {}",
                change.peer,
                change.old.map_or("absent", |status| status.label()),
                change.new.map_or("absent", |status| status.label()),
            ),
            Event::LeaderChanged(change) => println!(
                "term {}: leader {}",
                change.term,
                change
                    .leader
                    .map_or("none".to_owned(), |leader| leader.to_string())
            ),
            Event::MembershipChanged(change) => println!(
                "members: voters {:?}, learners {:?}",
                change.voters, change.learners
            ),
            Event::Lagged { missed } => {
                println!("{missed} events missed; the table now:");
                for peer in node.peers()? {
                    println!("{:<32} {}", peer.id, peer.status.label());
                }
            }
        }
    }
    Ok(())
}
