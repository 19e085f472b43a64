//! A node running inside the host program (EMB-1, CB-1): [`Node::start`] gives the node an
//! actix system on a thread of its own and returns once it runs; the methods ask its actors
//! and wait for the answer on the calling thread; [`Node::stop`] (or dropping the [`Node`])
//! stops it as SIGTERM stops the daemon: a leader hands over first.
//!
//! The node is started by conclave-actors' `NodeBuilder` exactly as `conclave run` starts it;
//! this module only owns the thread, the way to reach the node from other threads, and the
//! translation of answers into the façade's types. No election decision is taken here.

use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use conclave_actors::node::{NodeBuilder, NodeError, NodeHandle, NodeStatus};
use conclave_config::NodeConfig;
use conclave_core::PeerStatus;
use conclave_core::election::{Command, CommandOutcome, FencingToken, Role};
use conclave_protocol::PeerId;
use tokio::sync::oneshot;
use tracing::{debug, warn};

use crate::block::block_on;
use crate::error::{Error, Result};
use crate::events::Subscription;

/// The `subscriber` label of the lag counter for subscribers made through this API.
const SUBSCRIBER_NAME: &str = "embedded";

/// One peer of the node's peer table, as [`Node::peers`] reports it.
///
/// ```no_run
/// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
/// for peer in node.peers()? {
///     println!("{} {:?} rtt {:?}", peer.id, peer.status, peer.rtt);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The peer's id.
    pub id: PeerId,
    /// Whether it is heard (`Connected`) or has been silent too long (`Disconnected`).
    pub status: PeerStatus,
    /// The last measured round-trip time; `None` until a probe has come back.
    pub rtt: Option<Duration>,
}

/// A conclave node running in this process.
///
/// The node runs on a thread of its own with its own actix system, whatever the calling
/// program runs (tokio, another runtime, none). Every method may be called from any thread;
/// the queries wait for the node's answer (one message to its event loop). Dropping the node
/// stops it as [`Node::stop`] does.
///
/// ```no_run
/// let config = conclave::config::from_file("/etc/my-program/conclave.toml")?;
/// let node = conclave::Node::start(config)?;
/// if node.is_leader() {
///     println!("leading with fencing token {:?}", node.leader()?);
/// }
/// node.stop();
/// # Ok::<(), conclave::Error>(())
/// ```
#[derive(Debug)]
pub struct Node {
    id: PeerId,
    handle: NodeHandle,
    /// The replicated log's operations, run on the node's own event loop.
    pub(crate) store: crate::store::Store,
    /// Tells the node's thread to stop gracefully; `None` once sent.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Node {
    /// Starts a node running `config` and returns once its actors run and its sockets are
    /// bound: the WAL is opened (which locks the data directory), the links are bound, the
    /// admin and metrics servers start when `config` has them. The node logs through the
    /// `tracing` subscriber in force on the calling thread.
    ///
    /// ```no_run
    /// let config = conclave::config::from_toml_str(
    ///     r#"
    ///     [node]
    ///     id = "gw-a"
    ///     data_dir = "/var/lib/my-program/gw-a"
    ///     [cluster]
    ///     voters = ["gw-a", "gw-b", "gw-c"]
    ///     [link.udp]
    ///     listen = "127.0.0.1:7946"
    ///     peers = ["127.0.0.1:7947", "127.0.0.1:7948"]
    ///     [admin]
    ///     listen = ""
    ///     [metrics]
    ///     listen = ""
    ///     "#,
    /// )?;
    /// let node = conclave::Node::start(config)?;
    /// # Ok::<(), conclave::Error>(())
    /// ```
    pub fn start(config: NodeConfig) -> Result<Node> {
        let id = config.node_id;
        let peer_urls = config.admin.peer_urls.clone();
        let (ready_sender, ready) = mpsc::sync_channel(1);
        let (stop, stop_requested) = oneshot::channel();
        // The node logs where its starter logs: to the subscriber in force on this thread
        // (a scoped one, as tests install, or the global one).
        let log = tracing::dispatcher::get_default(Clone::clone);
        let thread = thread::Builder::new()
            .name(thread_name(id))
            .spawn(move || {
                let _log = tracing::dispatcher::set_default(&log);
                run(config, ready_sender, stop_requested);
            })
            .map_err(Error::Thread)?;
        match ready.recv() {
            Ok(Ok((handle, arbiter))) => Ok(Node {
                id,
                store: crate::store::Store::new(handle.clone(), peer_urls, arbiter),
                handle,
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(err)) => {
                let _ = thread.join();
                Err(err.into())
            }
            Err(mpsc::RecvError) => {
                let _ = thread.join();
                Err(Error::ThreadLost)
            }
        }
    }

    /// This node's id.
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) {
    /// println!("I am {}", node.id());
    /// # }
    /// ```
    pub fn id(&self) -> PeerId {
        self.id
    }

    /// Whether the node's election still runs: `false` once it has halted, which it does
    /// when its WAL can no longer be written (the daemon then exits). A halted node neither
    /// votes nor leads; stop it, and start it again once the disk is fixed.
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) {
    /// if !node.is_running() {
    ///     eprintln!("the node halted; see its log");
    /// }
    /// # }
    /// ```
    pub fn is_running(&self) -> bool {
        self.handle.is_running()
    }

    /// Whether this node leads now; `false` too once the node has halted.
    ///
    /// A leader may be deposed at any moment after this answer: whatever it drives should
    /// check the fencing token of [`Node::leader`] (CB-5).
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) {
    /// if node.is_leader() {
    ///     println!("doing the leader's work");
    /// }
    /// # }
    /// ```
    pub fn is_leader(&self) -> bool {
        match block_on(self.handle.election_status()) {
            Ok(status) => status.role == Role::Leader,
            Err(err) => {
                // Not a warning: a host polling a halted node would repeat it for ever; the
                // halt itself is logged once, by the node.
                debug!(node = %self.id, "is_leader: {err}");
                false
            }
        }
    }

    /// The leader this node knows, with its term: the fencing token `(term, leader)` that
    /// whatever the leader drives can compare, to refuse a deposed leader's late commands
    /// (CB-5). `None` while no leader is known.
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
    /// match node.leader()? {
    ///     Some(token) => println!("{} leads in term {} (token {token})", token.leader, token.term),
    ///     None => println!("no leader known"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn leader(&self) -> Result<Option<FencingToken>> {
        Ok(block_on(self.handle.election_status())?.fencing_token)
    }

    /// The peer table: each peer's id, status and last round-trip time.
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
    /// let connected = node
    ///     .peers()?
    ///     .into_iter()
    ///     .filter(|peer| peer.status == conclave::PeerStatus::Connected)
    ///     .count();
    /// println!("{connected} peers connected");
    /// # Ok(()) }
    /// ```
    pub fn peers(&self) -> Result<Vec<Peer>> {
        Ok(block_on(self.handle.peers())?
            .into_iter()
            .map(|info| Peer {
                id: info.id,
                status: info.status,
                rtt: info.rtt,
            })
            .collect())
    }

    /// The node's whole status, as `GET /v1/status` reports it: identity, the election's
    /// state (role, term, leader, fencing token, mode detail) and the peer table.
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
    /// let status = node.status()?;
    /// println!(
    ///     "{} in {}: {} in term {}",
    ///     status.node_id,
    ///     status.cluster_id,
    ///     status.election.role.label(),
    ///     status.election.term
    /// );
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> Result<NodeStatus> {
        Ok(block_on(self.handle.status())?)
    }

    /// Makes `peer` the leader (seed 000's `SetLeader`, force master): a leadership transfer
    /// in raft; from a follower the request goes to the leader it knows.
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
    /// let outcome = node.set_leader("gw-b".parse()?)?;
    /// println!("{outcome:?}");
    /// # Ok(()) }
    /// ```
    pub fn set_leader(&self, peer: PeerId) -> Result<CommandOutcome> {
        self.command(Command::SetLeader(peer))
    }

    /// Switches automatic elections on or off (seed 000's `EnableAutoLeaderElection`); the
    /// choice is recorded in the WAL and outlives restarts.
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
    /// node.enable_auto_election(false)?;
    /// # Ok(()) }
    /// ```
    pub fn enable_auto_election(&self, enabled: bool) -> Result<CommandOutcome> {
        self.command(Command::EnableAutoElection(enabled))
    }

    /// A leader hands leadership to the best caught-up peer, or steps down when none is
    /// reachable; a follower is refused.
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) -> conclave::Result<()> {
    /// if node.is_leader() {
    ///     node.resign()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn resign(&self) -> Result<CommandOutcome> {
        self.command(Command::Resign)
    }

    /// A new subscriber of this node's leader and peer status changes, from now on (CB-1).
    ///
    /// ```no_run
    /// # fn demo(node: &conclave::Node) {
    /// let events = node.subscribe();
    /// std::thread::spawn(move || {
    ///     for event in events {
    ///         println!("{event:?}");
    ///     }
    /// });
    /// # }
    /// ```
    pub fn subscribe(&self) -> Subscription {
        Subscription::new(self.handle.subscribe(SUBSCRIBER_NAME))
    }

    /// Stops the node gracefully and waits until it has stopped, as SIGTERM stops the daemon:
    /// a leader hands leadership over to a caught-up peer first, the peers are told goodbye,
    /// the hooks of the last events finish, the WAL is closed and the data directory
    /// unlocked. The subscriptions end once every event is delivered.
    ///
    /// ```no_run
    /// # fn demo(node: conclave::Node) {
    /// node.stop();
    /// # }
    /// ```
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn command(&self, command: Command) -> Result<CommandOutcome> {
        Ok(block_on(self.handle.command(command))??)
    }

    fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                warn!(node = %self.id, "the node's thread panicked");
            }
        }
    }
}

impl Drop for Node {
    /// Stops the node as [`Node::stop`] does.
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// `conclave <id>`, cut to the 15 bytes Linux keeps of a thread's name.
fn thread_name(id: PeerId) -> String {
    let mut name = format!("conclave {id}");
    // Peer ids are ASCII (PROTO-1), so any cut is at a character boundary.
    name.truncate(15);
    name
}

/// The node's thread: its actix system, from the start to the graceful stop.
fn run(
    config: NodeConfig,
    ready: mpsc::SyncSender<std::result::Result<(NodeHandle, actix_rt::ArbiterHandle), NodeError>>,
    stop_requested: oneshot::Receiver<()>,
) {
    let system = actix_rt::System::new();
    system.block_on(async move {
        let node = match NodeBuilder::new(config).start().await {
            Ok(node) => node,
            Err(err) => {
                let _ = ready.send(Err(err));
                return;
            }
        };
        // The node folds its histograms' samples itself, now and then and when it stops.
        let arbiter = actix_rt::Arbiter::current();
        if ready.send(Ok((node.handle().clone(), arbiter))).is_ok() {
            // A sent request and a dropped sender both mean: stop now.
            let _ = stop_requested.await;
        }
        node.stop().await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_between_threads<T: Send + Sync>() {}

    /// EMB-1: a host may share one node between threads (`Arc<Node>`) and call it from any.
    #[test]
    fn a_node_can_be_shared_between_threads() {
        shared_between_threads::<Node>();
    }

    /// EMB-1: a thread name keeps within Linux's 15 bytes, whatever the id's length.
    #[test]
    fn thread_names_fit() {
        assert_eq!(thread_name("gw-a".parse().unwrap()), "conclave gw-a");
        let long = thread_name("a-very-long-gateway-name".parse().unwrap());
        assert_eq!(long, "conclave a-very");
    }
}
