//! Starting, wiring, querying and stopping one node's actors.
//!
//! [`NodeBuilder::start`] runs in phases, each a method of the builder that hands the next
//! what it made: reserve the admin and metrics listeners (a port in use fails before the
//! data directory is touched); open the storage (lock the data directory, open and recover
//! the WAL, advance the node's incarnation); bind the links; restore the election from what
//! the storage held (the operator's automatic-election switch, RAFT-8, and an abstention when
//! the WAL held no term or vote, WAL-2); spawn the TransportActor, WalActor, ElectionActor,
//! MembershipActor, CallbackActor and HealthActor, connected through recipients; and serve
//! the admin API and metrics endpoint when configured. Everything that can fail comes before
//! the first actor starts. The [`NodeHandle`] it returns is the in-process API: status,
//! peers, history, operator commands, event subscriptions (CB-1), and stopping — gracefully
//! (peers are told goodbye) or abruptly, as a crash would.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use actix::prelude::*;
use conclave_config::{DonglePort, EspNowLinkConfig, InitialState, NodeConfig};
use conclave_core::election::{
    AmnesiaCause, Command, CommandOutcome, Election, ElectionConfig, ElectionError, ElectionStatus,
};
use conclave_core::storage::DurableState;
use conclave_core::{Admission, AdmissionConfig, Membership, PeerInfo, SeededRng};
use conclave_protocol::{ClusterId, FrameCodec, PeerId};
use conclave_statemachine::StoreDemand;
use conclave_storage::{HistoryRecord, Recovered, WalError, WalFile, WalOptions};
use tracing::{info, warn};

use crate::callbacks::{CallbackActor, ReplaceHooks, SettleHooks};
use crate::clock::NodeClock;
use crate::election::{
    CommittedEntries, ElectionActor, ElectionCommand, ElectionOutputs, Fenced, GetElectionStatus,
    GetHistory, LeaveElection, ProposeMembership, ProposeWrite, ReadCommitted, ReadLinearizable,
    ReadLocal,
};
use crate::events::{EventBus, EventSubscription};
use crate::health::{HealthActor, ReplaceHealth};
use crate::job_wakeups::JobWakeups;
use crate::log_service::WaitingClaims;
use crate::machine::{ClusterMachine, MachineRead, WriteOutcome};
use crate::member_directory::MemberDirectory;
use crate::membership::{GetPeers, MembershipActor, MembershipOutputs, SayGoodbye};
use crate::memory::MemoryHub;
use crate::metrics::NodeMetrics;
use crate::tls::ListenerTls;
use crate::transport::{
    ConnectReceivers, DongleReport, Drain, EspNowLink, GetDongle, GetRoutes, GetUnanswered, Links,
    TransportActor,
};
use crate::wal::{AppendLog, CloseWal, Persist, SaveSnapshot, WalActor};
use conclave_core::raft::MembershipChange;

/// Why a node could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The WAL could not be opened or recovered.
    #[error(transparent)]
    Wal(#[from] WalError),
    /// A socket could not be bound.
    #[error("cannot bind {what} to {addr}: {source}")]
    Bind {
        /// Which socket (`link.udp.listen`, `admin.listen`, `metrics.listen`).
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The election settings were refused.
    #[error(transparent)]
    Election(#[from] ElectionError),
    /// The node's actors have stopped.
    #[error("the node has stopped")]
    Stopped,
    /// The built-in virtual dongle could not be created.
    #[error("link.espnow.port = \"virtual\": {0}")]
    VirtualDongle(String),
    /// The task recovering the WAL did not finish.
    #[error("WAL recovery did not complete: {0}")]
    Recovery(String),
    /// A listener's TLS files cannot be used (ADMIN-TLS).
    #[error("{section}.{problem}")]
    Tls {
        /// `admin.tls` or `metrics.tls`.
        section: &'static str,
        /// What is wrong, naming the file.
        problem: conclave_config::tls::TlsProblem,
    },
    /// Frame keys were given to a node that runs without a key (PROTO-9).
    #[error(
        "this node runs without a frame key: sealing is switched on by a restart with \
         cluster.psk_file set"
    )]
    NoFrameKey,
}

/// How long a stopping node waits for its `Goodbye` to leave the dongle: a few frame times
/// on the serial line and the air, with room for a busy queue.
const GOODBYE_DRAIN: std::time::Duration = std::time::Duration::from_millis(250);

/// Stops an actor at once (a crash, for the actor's purposes).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct StopActor;

macro_rules! stoppable {
    ($($actor:ty),*) => {$(
        impl Handler<StopActor> for $actor {
            type Result = ();
            fn handle(&mut self, _: StopActor, ctx: &mut Self::Context) {
                ctx.stop();
            }
        }
    )*};
}

stoppable!(
    TransportActor,
    MembershipActor,
    ElectionActor,
    CallbackActor,
    HealthActor
);

/// A random seed for the election timeouts of a real node. The standard library's hasher keys
/// come from the operating system's randomness, so no extra dependency is needed for it.
fn entropy_seed() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(u64::from(std::process::id()));
    hasher.finish()
}

/// Configures and starts a node.
#[derive(Debug)]
pub struct NodeBuilder {
    config: NodeConfig,
    memory: Option<(MemoryHub, u32)>,
    seed: Option<u64>,
    wal_on_event_loop: bool,
}

impl NodeBuilder {
    /// A node running `config`.
    pub fn new(config: NodeConfig) -> Self {
        Self {
            config,
            memory: None,
            seed: None,
            wal_on_event_loop: false,
        }
    }

    /// Runs the WAL on the node's own event loop instead of its own thread: for tests with a
    /// paused clock only (see [`EventLoop`](crate::wal::EventLoop)); never for a real node
    /// (WAL-4).
    pub fn wal_on_event_loop(mut self) -> Self {
        self.wal_on_event_loop = true;
        self
    }

    /// Also attach to an in-process memory hub under `slot` (tests, demo).
    pub fn memory_link(mut self, hub: MemoryHub, slot: u32) -> Self {
        self.memory = Some((hub, slot));
        self
    }

    /// Use a fixed seed for the election's randomness (tests); by default it is random.
    pub fn rng_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Starts the node inside the running actix system, phase by phase.
    pub async fn start(mut self) -> Result<Node, NodeError> {
        // Everything that can fail comes before the first actor starts: an actor spawned and
        // then abandoned by a failed start would panic when the runtime drops it.
        let endpoints = self.reserve_endpoints()?;
        let storage = self.open_storage().await?;
        let instruments = Instruments::new();
        let links = self.bind_links(&instruments.metrics)?;
        let election = self.restore(&storage.recovered, instruments.clock)?;
        let machine = self.log_machine(&storage.recovered)?;
        let handle = self.spawn_actors(storage, links.links, election, machine, instruments);
        self.serve(handle, endpoints, links.virtual_port)
    }

    /// Binds the admin and metrics listeners first, so that a port in use fails the start
    /// before the data directory is locked and a new incarnation is recorded; refuses an
    /// admin API on a non-loopback address without a token.
    fn reserve_endpoints(&self) -> Result<Endpoints, NodeError> {
        let config = &self.config;
        if let (Some(addr), true) = (config.admin.listen, config.admin.tokens.is_empty()) {
            if !addr.ip().to_canonical().is_loopback() {
                return Err(NodeError::Bind {
                    what: "admin.listen",
                    addr,
                    source: io::Error::other(
                        "refusing to serve the admin API on a non-loopback address without \
                         admin.token_file or admin.tokens_file",
                    ),
                });
            }
        }
        Ok(Endpoints {
            admin: listener("admin.listen", config.admin.listen)?,
            metrics: listener("metrics.listen", config.metrics.listen)?,
        })
    }

    /// The state machine the replicated log runs (LOG-5), when the configuration turns it on:
    /// restored from the durable snapshot, if there is one (LOG-4), so that it stands where the
    /// core's log starts and the entries after the snapshot replay onto it.
    fn log_machine(&self, recovered: &Recovered) -> Result<Option<ClusterMachine>, NodeError> {
        match &self.config.election {
            ElectionConfig::Raft(raft) if raft.log.is_some() => {
                let limits = self.config.store_limits;
                let Some(snapshot) = &recovered.snapshot else {
                    return Ok(Some(ClusterMachine::new().with_limits(limits)));
                };
                let machine = ClusterMachine::restored(&snapshot.data)
                    .map_err(|err| {
                        NodeError::Recovery(format!(
                            "the snapshot at log index {} in {} does not decode: {err}",
                            snapshot.last.index,
                            self.config.data_dir.display()
                        ))
                    })?
                    .with_limits(limits);
                info!(
                    index = snapshot.last.index,
                    bytes = snapshot.data.len(),
                    "state machine restored from the snapshot"
                );
                Ok(Some(machine))
            }
            _ => Ok(None),
        }
    }

    /// Opens the storage: locks the data directory and opens the WAL, recovering what it
    /// holds and advancing the incarnation (WAL-1..5), off the event loop.
    async fn open_storage(&self) -> Result<OpenStorage, NodeError> {
        let config = &self.config;
        let data_dir = config.data_dir.clone();
        // `cluster.initial_state = "new"` writes no genesis at once: the core first asks the
        // voters whether the cluster exists (WAL-5, issue 24 item 2; see `restore`). `conclave
        // init` is the way to write one unasked.
        let options = WalOptions {
            mode: Some(config.election.mode()),
            ..WalOptions::default()
        };
        let (wal, recovered) =
            actix_rt::task::spawn_blocking(move || WalFile::open_with(&data_dir, options))
                .await
                .map_err(|err| NodeError::Recovery(err.to_string()))??;
        info!(
            node = %config.node_id,
            cluster = %config.cluster_id,
            incarnation = recovered.incarnation,
            term = recovered.hard_state.term,
            authenticated = config.auth_key.is_some(),
            "starting"
        );
        Ok(OpenStorage { wal, recovered })
    }

    /// Binds the links: the UDP socket, the in-process memory hub (tests, demo) and the
    /// ESP-NOW dongle (TR-1).
    fn bind_links(&mut self, metrics: &NodeMetrics) -> Result<BoundLinks, NodeError> {
        let config = &self.config;
        let mut links = Links::default();
        if let Some(udp) = &config.udp {
            let socket =
                crate::transport::bind_udp(udp.listen).map_err(|source| NodeError::Bind {
                    what: "link.udp.listen",
                    addr: udp.listen,
                    source,
                })?;
            links.udp = Some((Arc::new(socket), udp.peers.clone()));
        }
        links.memory = self.memory.take();
        let mut virtual_port = None;
        if let Some(espnow) = &config.espnow {
            let (link, port) = espnow_link(espnow, config)?;
            metrics.preregister_dongle();
            links.espnow = Some(link);
            virtual_port = port;
        }
        Ok(BoundLinks {
            links,
            virtual_port,
        })
    }

    /// Builds the election from what the storage recovered: the operator's automatic-election
    /// switch over the configuration's (RAFT-8), the durable hard state, and an abstention
    /// when the WAL held no term or vote (WAL-2, WAL-5).
    fn restore(&self, recovered: &Recovered, clock: NodeClock) -> Result<Election, NodeError> {
        let config = &self.config;
        let mut election_config = config.election.clone();
        if let Some(enabled) = recovered.auto_election {
            // RAFT-8: the operator's last `auto-election on|off` outlives restarts.
            if enabled != election_config.auto_election() {
                let switch = |on: bool| if on { "on" } else { "off" };
                warn!(
                    "automatic election is {}: the operator's `conclave auto-election {}` \
                     recorded in the WAL overrides election.auto = {} in the configuration; \
                     `conclave auto-election {}` switches it back",
                    switch(enabled),
                    switch(enabled),
                    election_config.auto_election(),
                    switch(!enabled)
                );
            }
            election_config.set_auto_election(enabled);
        }
        // The replicated log's entries and snapshot come back with the hard state (raft with
        // `[log]`; every other mode takes the hard state alone).
        let durable = DurableState {
            hard: recovered.hard_state,
            snapshot: recovered.snapshot.clone(),
            entries: recovered.entries.clone(),
        };
        let mut election = Election::restored(
            election_config,
            &durable,
            SeededRng::new(self.seed.unwrap_or_else(entropy_seed)),
            clock.now(),
        )?;
        if recovered.amnesic {
            // WAL-2: the core decides whether this node must abstain, and logs it: at WARN for
            // a lost WAL, at INFO for a first start, which is no fault (the warning below
            // still says how a new cluster is created).
            let cause = match (recovered.fresh_directory, config.initial_state) {
                (true, InitialState::New) => AmnesiaCause::NewCluster,
                (true, InitialState::Existing) => AmnesiaCause::FirstStart,
                (false, _) => AmnesiaCause::Lost,
            };
            let abstains = election.begin_abstention(clock.now(), cause);
            if abstains && cause == AmnesiaCause::FirstStart {
                // WAL-5: most likely a node of a new cluster started without `conclave init`;
                // only the operator knows it is not a node that lost its WAL.
                warn!(
                    "{} held no WAL: if this node belongs to a cluster being created, stop it, \
                     remove the directory and run `conclave init` once (or set \
                     cluster.initial_state = \"new\"), so that it votes at once; never do so \
                     for a node that lost its WAL (docs/wal.md)",
                    config.data_dir.display()
                );
            }
        }
        Ok(election)
    }

    /// Starts the actors and connects them through recipients: TransportActor, WalActor,
    /// ElectionActor, MembershipActor, CallbackActor and HealthActor. Nothing here fails.
    fn spawn_actors(
        &self,
        storage: OpenStorage,
        links: Links,
        election: Election,
        machine: Option<ClusterMachine>,
        instruments: Instruments,
    ) -> NodeHandle {
        let config = &self.config;
        let OpenStorage { wal, recovered } = storage;
        let Instruments {
            metrics,
            events,
            clock,
        } = instruments;
        // MEMB-3: kept by the election from the replicated configuration, read by the
        // transport and the admin API.
        let directory = MemberDirectory::new();
        // SESS-3: bumped by the election, watched by the claims waiting for a job.
        let job_wakeups = JobWakeups::new();
        let transport =
            self.start_transport(recovered.incarnation, clock, links, &metrics, &directory);
        let (wal, wal_log, wal_snapshot, wal_close) = self.start_wal(wal, &metrics);
        let election = ElectionActor::new(
            election,
            clock,
            ElectionOutputs {
                transport: transport.clone().recipient(),
                wal,
                wal_log,
                wal_snapshot,
            },
            events.clone(),
            metrics.clone(),
            recovered.history,
            machine,
        )
        .with_member_directory(directory.clone())
        .with_job_wakeups(job_wakeups.clone());
        let election_stopped = election.stopped_watch();
        let election = election.start();
        let membership = self.start_membership(&transport, &election, &events, &metrics, clock);
        transport.do_send(ConnectReceivers {
            membership: membership.clone().recipient(),
            election: election.clone().recipient(),
            verified: membership.clone().recipient(),
            contested: membership.clone().recipient(),
            signal: election.clone().recipient(),
        });
        let callbacks = CallbackActor::new(config.node_id, config.hooks.clone(), metrics.clone())
            .start_with(events.subscribe("hooks"));
        let health = HealthActor::new(
            config.health.clone(),
            election.clone().recipient(),
            metrics.clone(),
        )
        .start();

        NodeHandle {
            inner: Arc::new(HandleInner {
                node_id: config.node_id,
                cluster_id: config.cluster_id,
                incarnation: recovered.incarnation,
                authenticated: config.auth_key.is_some(),
                voters: config.voters.clone(),
                clock,
                transport,
                membership,
                election,
                callbacks,
                health,
                wal_close,
                events,
                waiting_claims: WaitingClaims::new(job_wakeups, &metrics),
                metrics,
                directory,
                admin_tokens: crate::admin::AdminTokens::new(config.admin.tokens.clone()),
                election_stopped,
            }),
        }
    }

    /// The TransportActor, with this start's frame codec and admission (MEM-3, PROTO-2).
    fn start_transport(
        &self,
        incarnation: u64,
        clock: NodeClock,
        links: Links,
        metrics: &NodeMetrics,
        directory: &MemberDirectory,
    ) -> Addr<TransportActor> {
        let config = &self.config;
        let codec = FrameCodec::with_keys(config.cluster_id, config.key_ring());
        let admission = Admission::new(
            AdmissionConfig {
                reserved: config.voters.iter().copied().collect(),
                owner_timeout: AdmissionConfig::owner_timeout_for(&config.membership),
                ..AdmissionConfig::new(config.node_id, incarnation)
            },
            // Challenge nonces only have to be new since this start.
            SeededRng::new(self.seed.map_or_else(entropy_seed, |seed| !seed)),
        );
        TransportActor::new(
            config.node_id,
            incarnation,
            codec,
            admission,
            clock,
            links,
            metrics.clone(),
        )
        .with_member_directory(directory.clone())
        .start()
    }

    /// The WAL actor, on its own thread (or on the event loop, for paused-clock tests), and
    /// the recipients of its four messages.
    fn start_wal(&self, wal: WalFile, metrics: &NodeMetrics) -> WalRecipients {
        if self.wal_on_event_loop {
            let actor = WalActor::start_on_event_loop(wal, metrics.clone());
            (
                actor.clone().recipient(),
                actor.clone().recipient(),
                actor.clone().recipient(),
                actor.recipient(),
            )
        } else {
            let actor = WalActor::start_on_thread(wal, metrics.clone());
            (
                actor.clone().recipient(),
                actor.clone().recipient(),
                actor.clone().recipient(),
                actor.recipient(),
            )
        }
    }

    /// The MembershipActor, expecting the other voters or the configured UDP peers unless
    /// `membership.expected_peers` says how many.
    fn start_membership(
        &self,
        transport: &Addr<TransportActor>,
        election: &Addr<ElectionActor>,
        events: &EventBus,
        metrics: &NodeMetrics,
        clock: NodeClock,
    ) -> Addr<MembershipActor> {
        let config = &self.config;
        let mut membership_config = config.membership;
        if membership_config.expected_peers == 0 {
            let other_voters = config
                .voters
                .iter()
                .filter(|voter| **voter != config.node_id)
                .count();
            let udp_peers = config.udp.as_ref().map_or(0, |udp| udp.peers.len());
            membership_config.expected_peers = other_voters.max(udp_peers);
        }
        MembershipActor::new(
            Membership::new(config.node_id, membership_config, clock.now()),
            clock,
            MembershipOutputs {
                transport: transport.clone().recipient(),
                reachability: election.clone().recipient(),
                refused: election.clone().recipient(),
            },
            events.clone(),
            metrics.clone(),
        )
        .start()
    }

    /// Serves the admin API and the metrics endpoint on the listeners reserved first, and
    /// folds the metrics' histograms from now on. A server that cannot start stops the
    /// actors again.
    fn serve(
        self,
        handle: NodeHandle,
        endpoints: Endpoints,
        virtual_port: Option<conclave_espnow::VirtualSerialPort>,
    ) -> Result<Node, NodeError> {
        let config = &self.config;
        let Endpoints {
            admin: admin_listener,
            metrics: metrics_listener,
        } = endpoints;
        let admin_addr = admin_listener.as_ref().and_then(|l| l.local_addr().ok());
        let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
        let mut servers = Vec::new();
        let tls = match listener_tls(config) {
            Ok(tls) => tls,
            Err(err) => {
                handle.stop_actors();
                return Err(err);
            }
        };
        let tls_of = |section: &str| {
            tls.iter()
                .find(|(name, _)| *name == section)
                .map(|(_, tls)| tls)
        };
        // Both listeners on one HTTP worker (`admin/listener.rs` says why).
        let mut endpoints = Ok(crate::admin::HttpEndpoints::new());
        if let Some(listener) = admin_listener {
            let options = crate::admin::AdminOptions {
                tokens: handle.admin_tokens().clone(),
                ..crate::admin::AdminOptions::new(&config.admin)
            };
            endpoints = endpoints.and_then(|endpoints| {
                endpoints.admin(
                    handle.clone(),
                    listener,
                    config.admin.listen,
                    options,
                    tls_of("admin.tls"),
                )
            });
        }
        if let Some(listener) = metrics_listener {
            endpoints = endpoints.and_then(|endpoints| {
                endpoints.metrics(
                    handle.metrics().clone(),
                    listener,
                    config.metrics.listen,
                    tls_of("metrics.tls"),
                )
            });
        }
        match endpoints {
            Ok(endpoints) if endpoints.is_empty() => {}
            Ok(endpoints) => servers.push(endpoints.serve()),
            Err(err) => {
                handle.stop_actors();
                return Err(err);
            }
        }
        let upkeep = MetricsUpkeep::spawn(handle.metrics().clone());
        Ok(Node {
            handle,
            upkeep,
            servers,
            tls,
            admin_addr,
            metrics_addr,
            _virtual_port: virtual_port,
        })
    }
}

/// The HTTP listeners, bound before anything else ([`NodeBuilder::start`]'s first phase) and
/// served in its last.
#[derive(Debug)]
struct Endpoints {
    /// `admin.listen`, when configured.
    admin: Option<std::net::TcpListener>,
    /// `metrics.listen`, when configured.
    metrics: Option<std::net::TcpListener>,
}

/// The WAL actor's recipients: hard-state records, log entries, snapshots, and its close.
type WalRecipients = (
    Recipient<Persist>,
    Recipient<AppendLog>,
    Recipient<SaveSnapshot>,
    Recipient<CloseWal>,
);

/// What opening the storage hands on: the WAL, open and locked, and what it held.
#[derive(Debug)]
struct OpenStorage {
    wal: WalFile,
    recovered: Recovered,
}

/// The instruments every actor of the node shares: its metrics, its event bus and its clock,
/// started once the storage is open.
struct Instruments {
    metrics: NodeMetrics,
    events: EventBus,
    clock: NodeClock,
}

impl Instruments {
    fn new() -> Self {
        let metrics = NodeMetrics::new();
        let events = EventBus::new(metrics.clone());
        let clock = NodeClock::start();
        Self {
            metrics,
            events,
            clock,
        }
    }
}

/// The links, bound, and the virtual dongle's pseudo-terminal behind `port = "virtual"`, which
/// the node keeps open for its lifetime.
struct BoundLinks {
    links: Links,
    virtual_port: Option<conclave_espnow::VirtualSerialPort>,
}

/// The listening socket of an HTTP endpoint (`what` is its key), when it has an address.
fn listener(
    what: &'static str,
    addr: Option<SocketAddr>,
) -> Result<Option<std::net::TcpListener>, NodeError> {
    addr.map(|addr| {
        crate::admin::bind_listener(addr).map_err(|source| NodeError::Bind { what, addr, source })
    })
    .transpose()
}

/// Starts the dongle driver for `[link.espnow]`. A device port is opened with tokio-serial,
/// by path, whatever stands behind it (a real ESP32, or a pseudo-terminal a test or the demo
/// created). `"virtual"` puts a virtual dongle behind a pseudo-terminal in the data directory,
/// on a simulated air of its own: alone, it hears nobody, which is what a single `conclave
/// run` can offer; `conclave demo` shares one air between its nodes instead.
fn espnow_link(
    espnow: &EspNowLinkConfig,
    config: &NodeConfig,
) -> Result<(EspNowLink, Option<conclave_espnow::VirtualSerialPort>), NodeError> {
    let (path, virtual_port) = match &espnow.port {
        DonglePort::Device(path) => (path.clone(), None),
        DonglePort::Virtual => {
            let air = conclave_espnow::Air::new(entropy_seed());
            let mut dongle = conclave_espnow::VirtualDongleConfig::new(virtual_mac(config.node_id));
            dongle.channel = espnow.channel;
            let port = conclave_espnow::VirtualSerialPort::create(
                config.data_dir.join("ttyVIRT"),
                &air,
                dongle,
            )
            .map_err(|err| NodeError::VirtualDongle(err.to_string()))?;
            (port.path().to_path_buf(), Some(port))
        }
    };
    let label = path.display().to_string();
    let mut driver = conclave_espnow::DongleConfig::new(label.clone(), espnow.channel);
    driver.pmk = espnow.pmk;
    let (handle, events) =
        conclave_espnow::spawn_dongle(driver, conclave_espnow::open_serial(&label, espnow.baud));
    Ok((
        EspNowLink {
            port: label,
            handle,
            events: Some(events),
            lmk: espnow.lmk,
            peer_lmks: espnow.peer_lmks.clone(),
        },
        virtual_port,
    ))
}

/// A locally administered MAC address derived from a node id, for virtual dongles.
pub fn virtual_mac(id: PeerId) -> conclave_espnow::Mac {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&id, &mut hasher);
    let bytes = hasher.finish().to_le_bytes();
    // 0x02: locally administered, unicast.
    conclave_espnow::Mac([0x02, bytes[0], bytes[1], bytes[2], bytes[3], bytes[4]])
}

#[derive(Debug)]
struct HandleInner {
    node_id: PeerId,
    cluster_id: ClusterId,
    incarnation: u64,
    authenticated: bool,
    voters: Vec<PeerId>,
    clock: NodeClock,
    transport: Addr<TransportActor>,
    membership: Addr<MembershipActor>,
    election: Addr<ElectionActor>,
    callbacks: Addr<CallbackActor>,
    /// Reads `[health]`.
    health: Addr<HealthActor>,
    /// Releases the WAL file and the data-directory lock once the election has stopped.
    wal_close: Recipient<CloseWal>,
    events: EventBus,
    metrics: NodeMetrics,
    /// MEMB-3: where members added at runtime are reached.
    directory: MemberDirectory,
    /// SESS-3: the claims waiting on this node for a ready job.
    waiting_claims: WaitingClaims,
    /// SEC-2: the admin API's tokens, which a reload replaces.
    admin_tokens: crate::admin::AdminTokens,
    /// True once the election has stopped.
    election_stopped: tokio::sync::watch::Receiver<bool>,
}

/// A running node, with its HTTP servers.
pub struct Node {
    handle: NodeHandle,
    /// Folds the histograms' samples now and then, scraped or not.
    upkeep: MetricsUpkeep,
    servers: Vec<actix_web::dev::ServerHandle>,
    /// ADMIN-TLS: the listeners served over TLS, by section, for [`Node::reload_tls`].
    tls: Vec<(&'static str, ListenerTls)>,
    admin_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    /// The pseudo-terminal behind `port = "virtual"`, kept open for the node's lifetime.
    _virtual_port: Option<conclave_espnow::VirtualSerialPort>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("node_id", &self.handle.node_id())
            .finish_non_exhaustive()
    }
}

/// The TLS of the listeners `config` serves over TLS, read and checked, by section.
fn listener_tls(config: &NodeConfig) -> Result<Vec<(&'static str, ListenerTls)>, NodeError> {
    let wanted = [
        (
            "admin.tls",
            config.admin.listen.and(config.admin.tls.as_ref()),
        ),
        (
            "metrics.tls",
            config.metrics.listen.and(config.metrics.tls.as_ref()),
        ),
    ];
    wanted
        .into_iter()
        .filter_map(|(section, files)| Some((section, files?)))
        .map(|(section, files)| {
            ListenerTls::load(files)
                .map(|tls| (section, tls))
                .map_err(|problem| NodeError::Tls { section, problem })
        })
        .collect()
}

impl Node {
    /// ADMIN-TLS (SIGHUP): reads every TLS listener's files again and serves what they hold
    /// from the next handshake on; a listener whose files fail the checks keeps what it had.
    /// Each listener's section with the outcome, for the log.
    pub fn reload_tls(&self) -> Vec<(&'static str, Result<(), conclave_config::tls::TlsProblem>)> {
        self.tls
            .iter()
            .map(|(section, tls)| (*section, tls.reload()))
            .collect()
    }

    /// The in-process API of the node.
    pub fn handle(&self) -> &NodeHandle {
        &self.handle
    }

    /// Where the admin API listens (the port the system chose, when configured as 0).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Where the metrics endpoint listens.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Graceful shutdown. The election is told first and leaves as its mode does it — a raft
    /// leader hands leadership to the best caught-up peer and waits (at most its minimum
    /// election timeout) until the successor takes over, so the cluster does not sit
    /// leaderless for an election timeout; a leader whose successor did not take over in time
    /// steps down, cause `shutdown`, so its `on_follower` hook runs — and then stops, so this
    /// node neither votes nor leads while the rest winds down; then the peers are told goodbye, the hooks of the last events finish (bounded by two
    /// hook timeouts), the HTTP servers finish their requests, and the remaining actors stop.
    pub async fn stop(self) {
        info!(node = %self.handle.node_id(), "stopping");
        // Awaited, not fire-and-forget: a heartbeat answer the election sends after the
        // `Goodbye` would make every peer add this node back as a member.
        let _ = self.handle.inner.election.send(LeaveElection).await;
        let _ = self.handle.inner.membership.send(SayGoodbye).await;
        // The `Goodbye` is in the transport's mailbox now; let it reach the air.
        let _ = self
            .handle
            .inner
            .transport
            .send(Drain {
                within: GOODBYE_DRAIN,
            })
            .await;
        if !matches!(
            self.handle.inner.callbacks.send(SettleHooks).await,
            Ok(true)
        ) {
            warn!("hooks still running at shutdown are killed");
        }
        for server in &self.servers {
            crate::admin::stop_server(server).await;
        }
        self.handle.stop_actors();
        self.handle.close_wal().await;
        self.upkeep.finish(self.handle.metrics());
    }

    /// Stops everything at once, without a goodbye: what a crash looks like to the peers. The
    /// WAL is closed and the data directory unlocked once the election has stopped, as the
    /// kernel would at a crash, so the node can be started again in this process.
    pub async fn kill(self) {
        for server in &self.servers {
            server.stop(false).await;
        }
        let _ = self.handle.inner.election.send(StopActor).await;
        self.handle.stop_actors();
        self.handle.close_wal().await;
        self.upkeep.finish(self.handle.metrics());
    }
}

/// How often the histograms' samples are folded into their summaries when nobody scrapes the
/// node: the exporter keeps each sample until a render or an upkeep, so an unscraped node
/// would otherwise grow for as long as it runs.
const METRICS_UPKEEP: std::time::Duration = std::time::Duration::from_secs(10);

/// The task that runs [`NodeMetrics::run_upkeep`] every [`METRICS_UPKEEP`]; dropping it stops
/// it.
#[derive(Debug)]
struct MetricsUpkeep(actix_rt::task::JoinHandle<()>);

impl MetricsUpkeep {
    fn spawn(metrics: NodeMetrics) -> Self {
        Self(actix_rt::spawn(async move {
            let mut every = actix_rt::time::interval(METRICS_UPKEEP);
            loop {
                every.tick().await;
                metrics.run_upkeep();
            }
        }))
    }

    /// Stops the task and folds the last samples: dropping the registry does not free them.
    fn finish(&self, metrics: &NodeMetrics) {
        self.0.abort();
        metrics.run_upkeep();
    }
}

impl Drop for MetricsUpkeep {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The in-process API of a running node (CB-1). Cheap to clone.
#[derive(Debug, Clone)]
pub struct NodeHandle {
    inner: Arc<HandleInner>,
}

/// A node's status: the election's and the peer table, as the admin API reports it.
#[derive(Debug, Clone)]
pub struct NodeStatus {
    /// This node.
    pub node_id: PeerId,
    /// Its cluster.
    pub cluster_id: ClusterId,
    /// Its incarnation (grows at every start).
    pub incarnation: u64,
    /// Whether frames are authenticated.
    pub authenticated: bool,
    /// `cluster.voters`.
    pub voters: Vec<PeerId>,
    /// The election's state.
    pub election: ElectionStatus,
    /// The peer table.
    pub peers: Vec<PeerInfo>,
    /// The ESP-NOW dongle, when the node has that link.
    pub dongle: Option<DongleReport>,
}

impl NodeHandle {
    /// This node's id.
    pub fn node_id(&self) -> PeerId {
        self.inner.node_id
    }

    /// This node's incarnation: it grows at every start (PROTO-2).
    pub fn incarnation(&self) -> u64 {
        self.inner.incarnation
    }

    /// The node's clock reading, in the time base of its peer table.
    pub fn now(&self) -> conclave_core::Instant {
        self.inner.clock.now()
    }

    /// This node's metrics.
    pub fn metrics(&self) -> &NodeMetrics {
        &self.inner.metrics
    }

    /// MEMB-3: the addresses the replicated configuration gives members added at runtime.
    pub fn member_directory(&self) -> &MemberDirectory {
        &self.inner.directory
    }

    /// SESS-3: the claims waiting on this node for a ready job, whichever client sent them.
    pub(crate) fn waiting_claims(&self) -> &WaitingClaims {
        &self.inner.waiting_claims
    }

    /// MEMB-3: an operator's membership change, on the leader: answered with the index of its
    /// configuration entry once that entry is applied, or refused at once (`not_leader`
    /// naming the leader, or the core's reason).
    pub async fn change_membership(
        &self,
        change: MembershipChange,
    ) -> Result<Fenced<u64>, NodeError> {
        self.inner
            .election
            .send(ProposeMembership(change))
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// A new event subscriber named `name` (CB-1).
    pub fn subscribe(&self, name: impl Into<String>) -> EventSubscription {
        self.inner.events.subscribe(name)
    }

    /// The number of the last event published in this run; 0 before any.
    pub fn last_event_seq(&self) -> u64 {
        self.inner.events.last_seq()
    }

    /// A subscriber that resumes after event number `after` of this run (the admin API's
    /// event stream with `Last-Event-ID`): the events still kept after it, then the new ones.
    pub fn subscribe_after(&self, name: impl Into<String>, after: u64) -> crate::events::Resumed {
        self.inner.events.subscribe_after(name, after)
    }

    /// Whether the node's election still runs (it halts if its WAL fails).
    pub fn is_running(&self) -> bool {
        self.inner.election.connected()
    }

    /// Resolves once the node's election has stopped: it halted (its WAL failed), or a
    /// graceful stop ended. What `conclave run` waits on instead of polling
    /// [`Self::is_running`].
    pub async fn election_stopped(&self) {
        let mut stopped = self.inner.election_stopped.clone();
        // An error means the actor is gone, which is stopped too.
        let _ = stopped.wait_for(|stopped| *stopped).await;
    }

    /// Whether every actor of the node still runs (the liveness of `/health`).
    pub fn is_alive(&self) -> bool {
        self.inner.transport.connected()
            && self.inner.membership.connected()
            && self.inner.election.connected()
            && self.inner.callbacks.connected()
    }

    /// The election's status alone.
    pub async fn election_status(&self) -> Result<ElectionStatus, NodeError> {
        self.inner
            .election
            .send(GetElectionStatus)
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// The node's whole status.
    pub async fn status(&self) -> Result<NodeStatus, NodeError> {
        let election = self.election_status().await?;
        let peers = self.peers().await?;
        let dongle = self.dongle().await?;
        Ok(NodeStatus {
            node_id: self.inner.node_id,
            cluster_id: self.inner.cluster_id,
            incarnation: self.inner.incarnation,
            authenticated: self.inner.authenticated,
            voters: self.inner.voters.clone(),
            election,
            peers,
            dongle,
        })
    }

    /// The peer table.
    pub async fn peers(&self) -> Result<Vec<PeerInfo>, NodeError> {
        self.inner
            .membership
            .send(GetPeers)
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// The link addresses learned for each peer.
    pub async fn routes(&self) -> Result<Vec<(PeerId, conclave_core::LinkAddr)>, NodeError> {
        self.inner
            .transport
            .send(GetRoutes)
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// Configured peer addresses nothing has come from since the node started, and for how
    /// long.
    pub async fn unanswered(
        &self,
    ) -> Result<Vec<(conclave_core::LinkAddr, std::time::Duration)>, NodeError> {
        self.inner
            .transport
            .send(GetUnanswered)
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// The ESP-NOW dongle's state, when the node has that link.
    pub async fn dongle(&self) -> Result<Option<DongleReport>, NodeError> {
        self.inner
            .transport
            .send(GetDongle)
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// The leadership history, oldest first (CB-6).
    pub async fn history(&self) -> Result<Vec<HistoryRecord>, NodeError> {
        self.inner
            .election
            .send(GetHistory)
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// An operator command (RAFT-8).
    pub async fn command(
        &self,
        command: Command,
    ) -> Result<Result<CommandOutcome, ElectionError>, NodeError> {
        self.inner
            .election
            .send(ElectionCommand(command))
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// A client's write to the replicated log (LOG-1): answered once applied, with the state
    /// machine's answer; refused at once by a node that does not lead. Either way with the
    /// fencing token as the node knew it then.
    /// `demand` is what the write asks of the store's room (`Write::demand`), which the
    /// leader checks before it appends the write (STORE-1, STORE-2).
    pub async fn propose(
        &self,
        data: Vec<u8>,
        demand: StoreDemand,
    ) -> Result<Fenced<WriteOutcome>, NodeError> {
        self.inner
            .election
            .send(ProposeWrite { data, demand })
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// A read of the replicated state machine: linearizable (on the leader, at a read index a
    /// heartbeat round confirmed, LOG-7) or of this node's copy as it is (`stale`). `read`
    /// runs in the ElectionActor, on the state at that point; what it returns is the answer.
    pub async fn read<T: Send + 'static>(
        &self,
        stale: bool,
        read: impl FnOnce(&conclave_statemachine::ClusterState) -> T + Send + 'static,
    ) -> Result<Fenced<T>, NodeError> {
        let (result, value) = tokio::sync::oneshot::channel();
        let read: MachineRead = Box::new(move |state| {
            let _ = result.send(read(state));
        });
        let election = &self.inner.election;
        let answer = if stale {
            election.send(ReadLocal(read)).await
        } else {
            election.send(ReadLinearizable(read)).await
        }
        .map_err(|_| NodeError::Stopped)?;
        // The read ran (and sent its value) before the actor answered `Ok`.
        let value = match answer.outcome {
            Ok(()) => Ok(value.await.map_err(|_| NodeError::Stopped)?),
            Err(refusal) => Err(refusal),
        };
        Ok(Fenced {
            outcome: value,
            term: answer.term,
            leader: answer.leader,
        })
    }

    /// A session's keepalive (SESS-1), answered by the leader from its own clock: the
    /// session's TTL, counted again from now, or `None` when no such session is live.
    pub async fn session_keepalive(
        &self,
        session: conclave_statemachine::SessionId,
    ) -> Result<Fenced<Option<u64>>, NodeError> {
        self.inner
            .election
            .send(crate::election::SessionKeepalive { session })
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// How long each live session has left on the leader's clock (SESS-1).
    pub async fn sessions_remaining(
        &self,
    ) -> Result<Fenced<std::collections::BTreeMap<conclave_statemachine::SessionId, u64>>, NodeError>
    {
        self.inner
            .election
            .send(crate::election::SessionsRemaining)
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// Committed log entries from `from` on, at most `max` (`GET /v1/log`), with the commit
    /// index.
    pub async fn committed_entries(
        &self,
        from: u64,
        max: usize,
    ) -> Result<Fenced<CommittedEntries>, NodeError> {
        self.inner
            .election
            .send(ReadCommitted { from, max })
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// Replaces the hook commands and their timeout from the next run on (a reload).
    pub async fn replace_hooks(
        &self,
        hooks: conclave_config::HooksConfig,
    ) -> Result<(), NodeError> {
        self.inner
            .callbacks
            .send(ReplaceHooks(hooks))
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// Replaces the `[health]` source and its timings (a reload): the new source is read at
    /// once.
    pub async fn replace_health(
        &self,
        health: conclave_config::HealthConfig,
    ) -> Result<(), NodeError> {
        self.inner
            .health
            .send(ReplaceHealth(health))
            .await
            .map_err(|_| NodeError::Stopped)
    }

    /// The admin API's tokens in force (SEC-2): [`crate::admin::AdminTokens::replace`] on
    /// this puts a reloaded set in force for the node's admin API.
    pub fn admin_tokens(&self) -> &crate::admin::AdminTokens {
        &self.inner.admin_tokens
    }

    /// Moves the node to a new ring of frame keys (a step of a key rotation, PROTO-9): it opens
    /// frames under every key of `keys` and seals under the one it names, from the next frame
    /// on. Fails for a node started without a key: sealing is switched on by a restart.
    pub async fn replace_keys(&self, keys: conclave_protocol::KeyRing) -> Result<(), NodeError> {
        let replaced = self
            .inner
            .transport
            .send(crate::transport::ReplaceKeys(keys))
            .await
            .map_err(|_| NodeError::Stopped)?;
        if replaced {
            Ok(())
        } else {
            Err(NodeError::NoFrameKey)
        }
    }

    /// Releases the WAL and the data-directory lock; the election must have stopped.
    async fn close_wal(&self) {
        let _ = self.inner.wal_close.send(CloseWal).await;
    }

    fn stop_actors(&self) {
        self.inner.transport.do_send(StopActor);
        self.inner.membership.do_send(StopActor);
        self.inner.election.do_send(StopActor);
        self.inner.callbacks.do_send(StopActor);
        self.inner.health.do_send(StopActor);
    }
}
