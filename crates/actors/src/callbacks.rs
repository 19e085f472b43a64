//! The hook runner (CB-1, CB-2, CB-5, MEM-5, MEMB-1): [`CallbackActor`] reads the node's event bus and
//! runs the configured `[hooks]` commands, like keepalived's notify scripts.
//!
//! # Which hooks an event runs
//!
//! | event | hooks |
//! |---|---|
//! | `LeaderChanged`, leader is this node | `on_leader_change`, `on_leader` |
//! | `LeaderChanged`, leader is another node | `on_leader_change`, `on_follower` |
//! | `LeaderChanged`, this node stopped leading, no leader known | `on_leader_change`, `on_follower` |
//! | `LeaderChanged`, no leader, this node did not lead | `on_leader_change` |
//! | `PeerStatusChanged` (joined, left, connected, disconnected) | `on_peer_status` |
//! | `MembershipChanged` (the log cluster's configuration this node acts on) | `on_membership_change` |
//!
//! **`on_follower` runs on every transition out of leader** (CB-2), whatever the cause — the
//! quorum lost (check-quorum), a higher term, a resignation or transfer, a duplicate-id
//! quarantine, the node stopping or halting — with the cause in `CONCLAVE_CAUSE` and
//! `CONCLAVE_STEPPED_DOWN=true`, even when no new leader is known yet. It runs again, with
//! `CONCLAVE_STEPPED_DOWN=false`, whenever another node becomes the leader. A keepalived-style
//! pair — start a service in `on_leader`, stop it in `on_follower` — therefore never leaves the
//! service running on a node that no longer leads, and `on_follower` commands must be
//! idempotent (stopping what is already stopped).
//!
//! Each event runs every command of the hook's list, in list order; a command that fails does
//! not stop the ones after it. Each command is counted once in
//! `conclave_callbacks_total{hook,result}` with `result` one of `ok` (exit status 0), `failed`
//! (another exit status, or killed by a signal), `timeout` (still running after
//! `hooks.timeout_ms`, then killed) or `error` (could not be started, or an empty argv list).
//!
//! # Ordering and isolation (CB-2)
//!
//! Every hook has its own bounded queue and its own runner: one run at a time per hook, in
//! event order. Different hooks are independent of each other: a leader change that runs both
//! `on_leader` and `on_leader_change` starts both at once, in no particular order, and a slow
//! `on_leader_change` does not hold back `on_peer_status`.
//!
//! **A slow hook never blocks elections.** Publishing on the [`EventBus`](crate::events::EventBus)
//! never waits for a subscriber; this actor only queues runs in its handlers and carries out
//! each run in a task of its own. Nothing in the node waits for a hook to finish: not the
//! election, not the membership, not the publisher, not even this actor's other hooks.
//!
//! A hook that falls behind (MEM-5) keeps at most [`HOOK_QUEUE_CAPACITY`] runs pending; past
//! that the *oldest* pending runs are dropped, counted at once in
//! `conclave_events_lagged_total{subscriber="hook:<hook name>"}` and logged as a warning when
//! the runner reaches the gap, and the hook goes on with the newest events. The environment of
//! the newest event always describes the current state, so skipping stale runs loses nothing a
//! script should act on. Events lost before they reach this actor (the bus itself overflowed)
//! are counted under the subscription's own name by
//! [`EventSubscription`].
//!
//! # How a command runs
//!
//! - `HookCommand::Shell(s)` runs `/bin/sh -c s`; `HookCommand::Argv(v)` runs program `v[0]`
//!   with arguments `v[1..]`, without a shell.
//! - stdin is `/dev/null`. stdout is logged line by line at debug, stderr at warn, each up to
//!   [`HOOK_OUTPUT_LIMIT`] bytes; anything beyond is read and discarded (so the hook never
//!   stalls on a full pipe) with one warning. A background process the hook leaves behind that
//!   still holds the pipes open is not waited for once the command itself has exited.
//! - Each command is its own process group. At the timeout the whole group gets `SIGKILL`, so
//!   a shell's children die with it and cannot overlap the hook's next run; the command is then
//!   reaped. A command that exits in time keeps any background process it started.
//! - A node that stops gracefully first lets the runs of its last events finish (its own
//!   step-down's `on_follower` above all), bounded by [`SETTLE_TIMEOUTS`] hook timeouts
//!   ([`SettleHooks`]). When the actor stops, pending runs are dropped and running commands
//!   are killed with their whole process group, so a stopped node leaves no hook processes
//!   behind.
//! - The commands and the timeout can be replaced while the node runs ([`ReplaceHooks`],
//!   what a reload on SIGHUP does): a run in progress finishes with the commands it started
//!   with; every later run, pending ones included, uses the new ones.
//!
//! # Environment (CB-2, CB-5)
//!
//! The command inherits the gateway's environment, minus every variable whose name starts
//! with `CONCLAVE_`, so that only the variables below (which describe the event) carry that
//! prefix, and minus systemd's `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`, which are
//! the gateway's to use:
//!
//! | variable | events | value |
//! |---|---|---|
//! | `CONCLAVE_NODE_ID` | all | this node's id |
//! | `CONCLAVE_HOOK` | all | `on_leader`, `on_follower`, `on_leader_change`, `on_peer_status` or `on_membership_change` |
//! | `CONCLAVE_EVENT` | all | `leader_changed`, `peer_status_changed` or `membership_changed` |
//! | `CONCLAVE_AT_UNIX_MS` | all | when the event happened, milliseconds since the Unix epoch |
//! | `CONCLAVE_ROLE` | `leader_changed` | this node's role: `follower`, `candidate` (a raft pre-candidate too), `leader` |
//! | `CONCLAVE_TERM` | `leader_changed` | the term, a decimal number: raft's term, the gossip leadership epoch, the priority round, or the static assignment epoch |
//! | `CONCLAVE_LEADER` | `leader_changed` | the new leader's id; empty when there is none |
//! | `CONCLAVE_PREVIOUS_LEADER` | `leader_changed` | the last leader this node knew before this change (kept through leaderless stretches and restarts); empty only when it never knew one |
//! | `CONCLAVE_STEPPED_DOWN` | `leader_changed` | `true` when this node led until this change, else `false` |
//! | `CONCLAVE_CAUSE` | `leader_changed` | why (CB-6): `election_timeout`, `vote_won`, `leader_heard`, `higher_term`, `set_leader`, `transfer`, `resign`, `tie_break`, `quorum_lost`, `quarantined`, `shutdown`, `yield`, `priority`, `configured` (static mode: the leader the configuration names), `leader_lost` (static mode: the leader became unreachable) |
//! | `CONCLAVE_FENCING_TOKEN` | `leader_changed` | `<term>:<leader>`, e.g. `7:gw-a`; empty when there is no leader |
//! | `CONCLAVE_PEER_ID` | `peer_status_changed` | the peer's id |
//! | `CONCLAVE_PEER_CHANGE` | `peer_status_changed` | `joined`, `left` or `changed` (status change of a known peer) |
//! | `CONCLAVE_PEER_STATUS` | `peer_status_changed` | status now: `connected`, `disconnected`, or `none` when it left |
//! | `CONCLAVE_PEER_PREVIOUS_STATUS` | `peer_status_changed` | status before: `connected`, `disconnected`, or `none` when it just joined |
//! | `CONCLAVE_CONFIGURATION_INDEX` | `membership_changed` | the log index of the entry that carries the configuration; 0 for the one `cluster.voters` seeds |
//! | `CONCLAVE_VOTERS` | `membership_changed` | its voters, ascending, separated by spaces |
//! | `CONCLAVE_LEARNERS` | `membership_changed` | its learners, ascending, separated by spaces; empty without any |
//! | `CONCLAVE_MEMBER` | `membership_changed` | `true` when this node is in it (voter or learner), else `false` |
//! | `CONCLAVE_MEMBERSHIP` | `membership_changed` | what this node is in it: `voter`, `learner` or `none` |
//!
//! Whatever a hook drives should remember the highest `CONCLAVE_TERM` it has seen and refuse
//! orders stamped with a lower one: that is what keeps a deposed leader's late hook from
//! undoing the new leader's (CB-5).
//!
//! # In-process subscribers (CB-1)
//!
//! A Rust program embedding a node needs no hook: it subscribes to the bus directly and gets the
//! same events, with the same bounded-queue rule.
//!
//! ```
//! use conclave_actors::events::{EventBus, LeaderChange, NodeEvent, Received};
//! use conclave_actors::metrics::NodeMetrics;
//! use conclave_core::election::{LeaderChangeCause, Role};
//! use conclave_protocol::PeerId;
//!
//! # actix_rt::System::new().block_on(async {
//! let bus = EventBus::new(NodeMetrics::new());
//! let mut events = bus.subscribe("my-app");
//! # let me = PeerId::new("gw-a").unwrap();
//! # bus.publish(NodeEvent::LeaderChanged(LeaderChange {
//! #     term: 3, leader: Some(me), previous: None, stepped_down: false, role: Role::Leader,
//! #     cause: LeaderChangeCause::VoteWon, at_unix_ms: 0,
//! # }));
//! # drop(bus);
//! while let Some(received) = events.recv().await {
//!     match received {
//!         Received::Event(NodeEvent::LeaderChanged(change)) => {
//!             // `(term, leader)` is the fencing token (CB-5).
//!             println!("term {} leader {:?}", change.term, change.leader);
//!         }
//!         Received::Event(NodeEvent::PeerStatusChanged(change)) => {
//!             println!("{}: {:?} -> {:?}", change.peer, change.old, change.new);
//!         }
//!         Received::Event(NodeEvent::MembershipChanged(change)) => {
//!             println!("voters {:?}, learners {:?}", change.voters, change.learners);
//!         }
//!         // Some events were lost (already logged and counted): re-read the node's status.
//!         Received::Lagged(_missed) => {}
//!     }
//! }
//! # });
//! ```
//!
//! The hook runner is started the same way, on its own subscription:
//!
//! ```no_run
//! # use conclave_actors::callbacks::CallbackActor;
//! # use conclave_config::HooksConfig;
//! # use conclave_actors::{events::EventBus, metrics::NodeMetrics};
//! # use conclave_protocol::PeerId;
//! # actix_rt::System::new().block_on(async {
//! # let node_id = PeerId::new("gw-a").unwrap();
//! # let metrics = NodeMetrics::new();
//! # let bus = EventBus::new(metrics.clone());
//! let hooks = HooksConfig::default();
//! let runner = CallbackActor::new(node_id, hooks, metrics).start_with(bus.subscribe("hooks"));
//! # });
//! ```

use std::fmt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, Addr, AsyncContext, Context, Handler, Message, Recipient};
use conclave_config::{HookCommand, HooksConfig};
use conclave_core::{Delivery, SubscriberQueue};
use conclave_protocol::PeerId;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, error, warn};

use crate::events::{
    BusProgress, EventSubscription, LeaderChange, MemberRole, MembershipChange, NodeEvent,
    PeerChange, Received,
};
use crate::metrics::NodeMetrics;

/// Runs one hook may have pending before the oldest are dropped.
pub const HOOK_QUEUE_CAPACITY: usize = 64;

/// Bytes of each of a command's stdout and stderr that are logged; the rest is discarded.
pub const HOOK_OUTPUT_LIMIT: u64 = 64 * 1024;

/// The gateway's own dialogue with systemd: a hook must not speak for the service.
const SYSTEMD_VARIABLES: [&str; 3] = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// A stopping node waits at most this many hook timeouts for the runs of its last events.
pub const SETTLE_TIMEOUTS: u32 = 2;

/// How long to keep reading output after the command exited. What the command itself wrote
/// is already in the pipe and reads at once; only a background process it left behind can
/// keep the pipe open longer, and the next run must not wait for that.
const OUTPUT_GRACE: Duration = Duration::from_millis(100);

/// The five hooks of `[hooks]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hook {
    Leader,
    Follower,
    LeaderChange,
    PeerStatus,
    MembershipChange,
}

impl Hook {
    const ALL: [Hook; 5] = [
        Hook::Leader,
        Hook::Follower,
        Hook::LeaderChange,
        Hook::PeerStatus,
        Hook::MembershipChange,
    ];

    /// The config key, the `hook` metric label and `CONCLAVE_HOOK`.
    fn name(self) -> &'static str {
        match self {
            Hook::Leader => "on_leader",
            Hook::Follower => "on_follower",
            Hook::LeaderChange => "on_leader_change",
            Hook::PeerStatus => "on_peer_status",
            Hook::MembershipChange => "on_membership_change",
        }
    }

    /// The `subscriber` label of `events_lagged_total` for this hook's queue.
    fn lag_subscriber(self) -> &'static str {
        match self {
            Hook::Leader => "hook:on_leader",
            Hook::Follower => "hook:on_follower",
            Hook::LeaderChange => "hook:on_leader_change",
            Hook::PeerStatus => "hook:on_peer_status",
            Hook::MembershipChange => "hook:on_membership_change",
        }
    }

    /// The hook's place in [`Hook::ALL`].
    fn index(self) -> usize {
        match self {
            Hook::Leader => 0,
            Hook::Follower => 1,
            Hook::LeaderChange => 2,
            Hook::PeerStatus => 3,
            Hook::MembershipChange => 4,
        }
    }

    fn commands(self, hooks: &HooksConfig) -> &[HookCommand] {
        match self {
            Hook::Leader => &hooks.on_leader,
            Hook::Follower => &hooks.on_follower,
            Hook::LeaderChange => &hooks.on_leader_change,
            Hook::PeerStatus => &hooks.on_peer_status,
            Hook::MembershipChange => &hooks.on_membership_change,
        }
    }

    /// Whether `event`, seen by node `node_id`, runs this hook.
    fn runs_for(self, node_id: PeerId, event: &NodeEvent) -> bool {
        match (self, event) {
            (Hook::LeaderChange, NodeEvent::LeaderChanged(_)) => true,
            (Hook::Leader, NodeEvent::LeaderChanged(change)) => change.leader == Some(node_id),
            (Hook::Follower, NodeEvent::LeaderChanged(change)) => {
                change.stepped_down || change.leader.is_some_and(|leader| leader != node_id)
            }
            (Hook::PeerStatus, NodeEvent::PeerStatusChanged(_)) => true,
            (Hook::MembershipChange, NodeEvent::MembershipChanged(_)) => true,
            _ => false,
        }
    }
}

/// One hook's pending runs and the run in progress, if any.
#[derive(Debug)]
struct HookRunner {
    commands: Arc<[HookCommand]>,
    pending: SubscriberQueue<NodeEvent>,
    running: Option<JoinHandle<()>>,
}

/// Runs the `[hooks]` commands for the events of one node (CB-2); see the module docs.
#[derive(Debug)]
pub struct CallbackActor {
    node_id: PeerId,
    timeout: Duration,
    metrics: NodeMetrics,
    /// One per hook, at [`Hook::index`].
    runners: [HookRunner; 5],
    subscription: Option<EventSubscription>,
    reader: Option<JoinHandle<()>>,
    /// Events published on the bus since this runner subscribed, and how many of them (or
    /// reports of lost ones) it has received: a settle waits for the two to meet.
    progress: Option<BusProgress>,
    received: u64,
    /// Callers of [`SettleHooks`] waiting for every run to end.
    settling: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl CallbackActor {
    /// A runner of `hooks` for node `node_id`, each hook queueing up to
    /// [`HOOK_QUEUE_CAPACITY`] runs.
    pub fn new(node_id: PeerId, hooks: HooksConfig, metrics: NodeMetrics) -> Self {
        let configured: Vec<&str> = Hook::ALL
            .iter()
            .filter(|hook| !hook.commands(&hooks).is_empty())
            .map(|hook| hook.name())
            .collect();
        metrics.preregister_hooks(&configured);
        let runners = Hook::ALL.map(|hook| HookRunner {
            commands: hook.commands(&hooks).into(),
            pending: SubscriberQueue::new(HOOK_QUEUE_CAPACITY),
            running: None,
        });
        Self {
            node_id,
            timeout: hooks.timeout,
            metrics,
            runners,
            subscription: None,
            reader: None,
            progress: None,
            received: 0,
            settling: Vec::new(),
        }
    }

    /// Sets how many runs each hook may have pending (at least one) before the oldest are
    /// dropped.
    pub fn with_queue_capacity(mut self, capacity: usize) -> Self {
        for runner in &mut self.runners {
            runner.pending = SubscriberQueue::new(capacity);
        }
        self
    }

    /// Starts the actor on the current arbiter, running hooks for the events of
    /// `subscription` until the bus closes or the actor stops.
    pub fn start_with(mut self, subscription: EventSubscription) -> Addr<Self> {
        self.progress = Some(subscription.progress());
        self.subscription = Some(subscription);
        self.start()
    }

    /// Installs `hooks` in place of the configured commands and timeout (see the module docs).
    fn replace_hooks(&mut self, hooks: &HooksConfig) {
        let configured: Vec<&str> = Hook::ALL
            .iter()
            .filter(|hook| !hook.commands(hooks).is_empty())
            .map(|hook| hook.name())
            .collect();
        self.metrics.preregister_hooks(&configured);
        for hook in Hook::ALL {
            self.runners[hook.index()].commands = hook.commands(hooks).into();
        }
        self.timeout = hooks.timeout;
    }

    /// Whether every event published so far has reached this runner and no run is pending
    /// or in progress.
    fn settled(&self) -> bool {
        let caught_up = self
            .progress
            .as_ref()
            .is_none_or(|progress| self.received >= progress.published_since());
        caught_up
            && self
                .runners
                .iter()
                .all(|runner| runner.running.is_none() && runner.pending.is_empty())
    }

    /// Answers the callers of [`SettleHooks`] once settled.
    fn answer_settled(&mut self) {
        if !self.settling.is_empty() && self.settled() {
            for waiter in self.settling.drain(..) {
                let _ = waiter.send(());
            }
        }
    }

    /// Queues a run of every hook `event` concerns and starts the idle ones.
    fn enqueue(&mut self, event: &NodeEvent, ctx: &mut Context<Self>) {
        for hook in Hook::ALL {
            if !hook.runs_for(self.node_id, event) {
                continue;
            }
            let runner = &mut self.runners[hook.index()];
            if runner.commands.is_empty() {
                continue;
            }
            let lagged_before = runner.pending.total_lagged();
            runner.pending.push(event.clone());
            // Counted at once, so the metric shows a stuck hook while it is stuck; the
            // warning waits for the runner to reach the gap, once per episode.
            let dropped = runner.pending.total_lagged().saturating_sub(lagged_before);
            if dropped > 0 {
                self.metrics.events_lagged(hook.lag_subscriber(), dropped);
            }
            self.start_next(hook, ctx);
        }
    }

    /// Starts the next pending run of `hook` unless one is in progress.
    fn start_next(&mut self, hook: Hook, ctx: &mut Context<Self>) {
        let runner = &mut self.runners[hook.index()];
        if runner.running.is_some() {
            return;
        }
        let event = loop {
            match runner.pending.pop() {
                None => return,
                Some(Delivery::Lagged { missed }) => warn!(
                    hook = hook.name(),
                    missed,
                    "hook {} fell behind: its {missed} oldest pending runs were dropped; \
                     going on with the newest events",
                    hook.name()
                ),
                Some(Delivery::Event(event)) => break event,
            }
        };
        let run = HookRun {
            hook,
            commands: Arc::clone(&runner.commands),
            environment: hook_environment(self.node_id, hook, &event),
            timeout: self.timeout,
            metrics: self.metrics.clone(),
        };
        let finished: Recipient<RunFinished> = ctx.address().recipient();
        runner.running = Some(actix_rt::spawn(async move {
            run.execute().await;
            finished.do_send(RunFinished(hook));
        }));
    }
}

impl Actor for CallbackActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let Some(mut subscription) = self.subscription.take() else {
            warn!("hook runner started without an event subscription; no hook will run");
            return;
        };
        let events: Recipient<EventReceived> = ctx.address().recipient();
        // `send` waits for the handler, which only queues: the actor's mailbox stays small
        // and events keep their order.
        self.reader = Some(actix_rt::spawn(async move {
            while let Some(received) = subscription.recv().await {
                if events.send(EventReceived(received)).await.is_err() {
                    return;
                }
            }
            debug!("event bus closed; the hook runner takes no more events");
        }));
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        // Dropping a run's future drops its `Child`, which kills the command (`kill_on_drop`),
        // and its group guard, which kills whatever the command started.
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
        for runner in &mut self.runners {
            if let Some(running) = runner.running.take() {
                running.abort();
            }
        }
    }
}

/// An event, or a report of lost ones, read from the node's event bus.
#[derive(Message)]
#[rtype(result = "()")]
struct EventReceived(Received);

/// Answers `true` once every event published so far has been received and every run it
/// caused has ended, or `false` after [`SETTLE_TIMEOUTS`] hook timeouts (the current
/// `hooks.timeout_ms`). A stopping node sends it before stopping the runner, so that its last
/// events' hooks are not killed half-way.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "bool")]
pub struct SettleHooks;

/// Replaces the hook commands and their timeout (a configuration reload).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct ReplaceHooks(pub HooksConfig);

impl Handler<SettleHooks> for CallbackActor {
    type Result = actix::ResponseFuture<bool>;

    fn handle(&mut self, _: SettleHooks, _: &mut Self::Context) -> Self::Result {
        let (waiter, settled) = tokio::sync::oneshot::channel();
        self.settling.push(waiter);
        self.answer_settled();
        let bound = self.timeout * SETTLE_TIMEOUTS;
        Box::pin(async move { matches!(tokio::time::timeout(bound, settled).await, Ok(Ok(()))) })
    }
}

impl Handler<ReplaceHooks> for CallbackActor {
    type Result = ();

    fn handle(&mut self, msg: ReplaceHooks, _: &mut Self::Context) {
        self.replace_hooks(&msg.0);
    }
}

/// A hook's run is over; the hook may start its next.
#[derive(Message)]
#[rtype(result = "()")]
struct RunFinished(Hook);

impl Handler<EventReceived> for CallbackActor {
    type Result = ();

    fn handle(&mut self, msg: EventReceived, ctx: &mut Self::Context) {
        match msg.0 {
            Received::Event(event) => {
                self.received += 1;
                self.enqueue(&event, ctx);
            }
            Received::Lagged(missed) => {
                self.received += missed;
                debug!(
                    missed,
                    "hook runner fell behind the event bus; counted under its subscription"
                );
            }
        }
        self.answer_settled();
    }
}

impl Handler<RunFinished> for CallbackActor {
    type Result = ();

    fn handle(&mut self, msg: RunFinished, ctx: &mut Self::Context) {
        let hook = msg.0;
        self.runners[hook.index()].running = None;
        self.start_next(hook, ctx);
        self.answer_settled();
    }
}

/// The environment a run of `hook` for `event` gets; see the table in the module docs.
fn hook_environment(node_id: PeerId, hook: Hook, event: &NodeEvent) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("CONCLAVE_NODE_ID", node_id.to_string()),
        ("CONCLAVE_HOOK", hook.name().to_owned()),
        ("CONCLAVE_EVENT", event.name().to_owned()),
    ];
    let id_or_empty = |id: Option<PeerId>| id.map(|id| id.to_string()).unwrap_or_default();
    match event {
        NodeEvent::LeaderChanged(LeaderChange {
            term,
            leader,
            previous,
            stepped_down,
            role,
            cause,
            at_unix_ms,
        }) => env.extend([
            ("CONCLAVE_AT_UNIX_MS", at_unix_ms.to_string()),
            ("CONCLAVE_ROLE", role.label().to_owned()),
            ("CONCLAVE_TERM", term.to_string()),
            ("CONCLAVE_LEADER", id_or_empty(*leader)),
            ("CONCLAVE_PREVIOUS_LEADER", id_or_empty(*previous)),
            ("CONCLAVE_STEPPED_DOWN", stepped_down.to_string()),
            ("CONCLAVE_CAUSE", cause.label().to_owned()),
            (
                "CONCLAVE_FENCING_TOKEN",
                leader
                    .map(|leader| format!("{term}:{leader}"))
                    .unwrap_or_default(),
            ),
        ]),
        NodeEvent::PeerStatusChanged(PeerChange {
            peer,
            old,
            new,
            at_unix_ms,
        }) => {
            let change = match (old, new) {
                (None, Some(_)) => "joined",
                (Some(_), None) => "left",
                _ => "changed",
            };
            env.extend([
                ("CONCLAVE_AT_UNIX_MS", at_unix_ms.to_string()),
                ("CONCLAVE_PEER_ID", peer.to_string()),
                ("CONCLAVE_PEER_CHANGE", change.to_owned()),
                (
                    "CONCLAVE_PEER_STATUS",
                    new.map_or("none", |s| s.label()).to_owned(),
                ),
                (
                    "CONCLAVE_PEER_PREVIOUS_STATUS",
                    old.map_or("none", |s| s.label()).to_owned(),
                ),
            ]);
        }
        NodeEvent::MembershipChanged(change) => env.extend(membership_environment(change)),
    }
    env
}

/// The variables of a `membership_changed` event; lists are space-separated, as a shell's
/// `for` reads them (peer ids hold no spaces).
fn membership_environment(change: &MembershipChange) -> [(&'static str, String); 6] {
    let list = |ids: &[PeerId]| {
        ids.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    [
        ("CONCLAVE_AT_UNIX_MS", change.at_unix_ms.to_string()),
        ("CONCLAVE_CONFIGURATION_INDEX", change.index.to_string()),
        ("CONCLAVE_VOTERS", list(&change.voters)),
        ("CONCLAVE_LEARNERS", list(&change.learners)),
        (
            "CONCLAVE_MEMBER",
            (change.role != MemberRole::None).to_string(),
        ),
        ("CONCLAVE_MEMBERSHIP", change.role.label().to_owned()),
    ]
}

/// One run of a hook: its commands, in order, for one event.
struct HookRun {
    hook: Hook,
    commands: Arc<[HookCommand]>,
    environment: Vec<(&'static str, String)>,
    timeout: Duration,
    metrics: NodeMetrics,
}

impl HookRun {
    async fn execute(self) {
        for command in self.commands.iter() {
            let outcome = self.run_command(command).await;
            self.metrics.callback(self.hook.name(), outcome.label());
        }
    }

    async fn run_command(&self, command: &HookCommand) -> RunOutcome {
        let hook = self.hook.name();
        let shown = CommandLine(command);
        let Some(mut process) = process_of(command) else {
            error!(hook, "hook command is an empty argv list; nothing to run");
            return RunOutcome::Error;
        };
        process.stderr(Stdio::piped());
        for (name, _) in std::env::vars_os() {
            if name.as_encoded_bytes().starts_with(b"CONCLAVE_") {
                process.env_remove(name);
            }
        }
        for name in SYSTEMD_VARIABLES {
            process.env_remove(name);
        }
        process.envs(self.environment.iter().map(|(name, value)| (name, value)));

        let mut child = match process.spawn() {
            Ok(child) => child,
            Err(err) => {
                error!(hook, command = %shown, error = %err, "hook command could not be started");
                return RunOutcome::Error;
            }
        };
        let pid = child.id();
        debug!(hook, command = %shown, pid, "hook command started");
        // If this run is dropped while the command runs (the node stops), the whole group goes,
        // not only the command: `kill_on_drop` alone would leave its children behind.
        let mut group_guard = GroupKillOnDrop(process_group(pid));

        let stdout = log_output(hook, &shown, OutputStream::Stdout, child.stdout.take());
        let stderr = log_output(hook, &shown, OutputStream::Stderr, child.stderr.take());
        let output = async { tokio::join!(stdout, stderr) };
        tokio::pin!(output);

        let deadline = Instant::now() + self.timeout;
        let mut output_done = false;
        // `Child::wait` is cancel-safe, so it can be re-polled on every turn.
        let exit = loop {
            tokio::select! {
                status = child.wait() => break Some(status),
                _ = &mut output, if !output_done => output_done = true,
                () = tokio::time::sleep_until(deadline) => break None,
            }
        };

        // The command has ended (or is killed below): nothing left for the guard to do.
        group_guard.0 = None;
        let outcome = match exit {
            Some(Ok(status)) if status.success() => {
                debug!(hook, command = %shown, "hook command succeeded");
                RunOutcome::Ok
            }
            Some(Ok(status)) => {
                warn!(hook, command = %shown, %status, "hook command failed");
                RunOutcome::Failed
            }
            Some(Err(err)) => {
                error!(hook, command = %shown, error = %err, "waiting for hook command failed");
                RunOutcome::Error
            }
            None => {
                warn!(
                    hook,
                    command = %shown,
                    timeout_ms = self.timeout.as_millis(),
                    "hook command timed out; killing it"
                );
                kill_and_reap(&mut child, pid, self.timeout, hook, &shown).await;
                RunOutcome::Timeout
            }
        };
        if !output_done
            && tokio::time::timeout(OUTPUT_GRACE, &mut output)
                .await
                .is_err()
        {
            debug!(
                hook,
                command = %shown,
                "a process left behind by the hook command still holds its output open; \
                 no longer reading it"
            );
        }
        outcome
    }
}

/// The process that runs `command` (a string through `/bin/sh -c`, an argv list as it is):
/// no stdin, stdout piped, killed when dropped, and the leader of its own process group, so
/// that a timeout kills what a shell started too. `None` for an empty argv list. Shared with
/// the health source's command runner.
pub(crate) fn process_of(command: &HookCommand) -> Option<Command> {
    let mut process = match command {
        HookCommand::Shell(script) => {
            let mut process = Command::new("/bin/sh");
            process.arg("-c").arg(script);
            process
        }
        HookCommand::Argv(argv) => {
            let (program, args) = argv.split_first()?;
            let mut process = Command::new(program);
            process.args(args);
            process
        }
    };
    process
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    Some(process)
}

/// The process group a command started with `process_group(0)` leads: its own pid. Shared
/// with the health source's command runner.
pub(crate) fn process_group(pid: Option<u32>) -> Option<rustix::process::Pid> {
    pid.and_then(|pid| i32::try_from(pid).ok())
        // Never 0 or 1: kill(0) and kill(-1) would signal far more than the hook.
        .filter(|&pid| pid > 1)
        .and_then(rustix::process::Pid::from_raw)
}

/// Kills a still-running command's whole process group when dropped.
pub(crate) struct GroupKillOnDrop(pub(crate) Option<rustix::process::Pid>);

impl Drop for GroupKillOnDrop {
    fn drop(&mut self) {
        if let Some(group) = self.0.take() {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

/// Kills a timed-out command's process group and waits for the command itself to exit.
async fn kill_and_reap(
    child: &mut Child,
    pid: Option<u32>,
    limit: Duration,
    hook: &str,
    shown: &CommandLine<'_>,
) {
    if let Some(group) = process_group(pid) {
        if let Err(err) = rustix::process::kill_process_group(group, rustix::process::Signal::KILL)
        {
            debug!(hook, command = %shown, error = %err, "could not kill the hook's process group");
        }
    }
    // The group kill already covers the command, unless it could not be sent.
    if let Err(err) = child.start_kill() {
        debug!(hook, command = %shown, error = %err, "could not kill the hook command");
    }
    match tokio::time::timeout(limit, child.wait()).await {
        Ok(Ok(status)) => debug!(hook, command = %shown, %status, "killed hook command reaped"),
        Ok(Err(err)) => {
            warn!(hook, command = %shown, error = %err, "could not reap the killed hook command");
        }
        // tokio reaps it in the background once the `Child` is dropped.
        Err(_) => warn!(hook, command = %shown, "killed hook command has not exited yet"),
    }
}

/// How a command ended, as the `result` label of `callbacks_total`.
#[derive(Debug)]
enum RunOutcome {
    Ok,
    Failed,
    Timeout,
    Error,
}

impl RunOutcome {
    fn label(&self) -> &'static str {
        match self {
            RunOutcome::Ok => "ok",
            RunOutcome::Failed => "failed",
            RunOutcome::Timeout => "timeout",
            RunOutcome::Error => "error",
        }
    }
}

/// A hook command as logs show it.
struct CommandLine<'a>(&'a HookCommand);

impl fmt::Display for CommandLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            HookCommand::Shell(script) => f.write_str(script),
            HookCommand::Argv(argv) => write!(f, "{argv:?}"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum OutputStream {
    Stdout,
    Stderr,
}

/// Logs `source` line by line up to [`HOOK_OUTPUT_LIMIT`] bytes, then reads and discards the
/// rest so the command never blocks writing to a full pipe.
async fn log_output(
    hook: &str,
    shown: &CommandLine<'_>,
    stream: OutputStream,
    source: Option<impl AsyncRead + Unpin>,
) {
    let Some(source) = source else {
        return;
    };
    let mut reader = BufReader::new(source).take(HOOK_OUTPUT_LIMIT);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches(['\n', '\r']);
                match stream {
                    OutputStream::Stdout => debug!(hook, command = %shown, "stdout: {text}"),
                    OutputStream::Stderr => warn!(hook, command = %shown, "stderr: {text}"),
                }
            }
            Err(err) => {
                debug!(hook, command = %shown, ?stream, error = %err, "reading hook output failed");
                return;
            }
        }
    }
    if reader.limit() > 0 {
        return;
    }
    let mut rest = reader.into_inner();
    match tokio::io::copy(&mut rest, &mut tokio::io::sink()).await {
        Ok(0) => {}
        Ok(discarded) => warn!(
            hook,
            command = %shown,
            ?stream,
            discarded,
            "hook output beyond {HOOK_OUTPUT_LIMIT} bytes was discarded"
        ),
        Err(err) => {
            debug!(hook, command = %shown, ?stream, error = %err, "reading hook output failed");
        }
    }
}

#[cfg(test)]
mod tests {
    //! These tests run real `/bin/sh` processes, so tokio time is *not* paused here: a paused
    //! clock jumps to the next timer whenever the runtime waits on a child process, which
    //! would fire every hook timeout at once. Nothing asserts on elapsed time; the waits below
    //! only bound how long a broken run may hang the suite.

    use std::io;
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use conclave_core::PeerStatus;
    use conclave_core::election::{LeaderChangeCause, Role};
    use tracing::subscriber::DefaultGuard;

    use super::*;
    use crate::events::EventBus;

    /// Shows the node's log (down to debug) when a test fails.
    fn test_log() -> DefaultGuard {
        tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_ansi(false)
                .with_test_writer()
                .finish(),
        )
    }

    /// Collects formatted log output so a test can assert what was logged.
    #[derive(Clone, Default)]
    struct CapturedLog(Arc<Mutex<Vec<u8>>>);

    impl CapturedLog {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    impl io::Write for CapturedLog {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    struct Node {
        bus: EventBus,
        metrics: NodeMetrics,
        _runner: Addr<CallbackActor>,
    }

    fn start(me: PeerId, hooks: HooksConfig, capacity: usize) -> Node {
        let metrics = NodeMetrics::new();
        let bus = EventBus::new(metrics.clone());
        let runner = CallbackActor::new(me, hooks, metrics.clone())
            .with_queue_capacity(capacity)
            .start_with(bus.subscribe("hooks"));
        Node {
            bus,
            metrics,
            _runner: runner,
        }
    }

    fn hooks(timeout: Duration) -> HooksConfig {
        HooksConfig {
            timeout,
            ..HooksConfig::default()
        }
    }

    fn shell(script: String) -> HookCommand {
        HookCommand::Shell(script)
    }

    fn leader_changed(
        term: u64,
        leader: Option<PeerId>,
        previous: Option<PeerId>,
        role: Role,
        cause: LeaderChangeCause,
    ) -> NodeEvent {
        NodeEvent::LeaderChanged(LeaderChange {
            term,
            leader,
            previous,
            stepped_down: false,
            role,
            cause,
            at_unix_ms: 1_700_000_000_000 + term,
        })
    }

    /// This node, leader until now, stepped down for `cause` in `term`; no leader known.
    fn stepped_down(me: PeerId, term: u64, cause: LeaderChangeCause) -> NodeEvent {
        NodeEvent::LeaderChanged(LeaderChange {
            term,
            leader: None,
            previous: Some(me),
            stepped_down: true,
            role: Role::Follower,
            cause,
            at_unix_ms: 1_700_000_000_000 + term,
        })
    }

    /// A follower that lost its leader to an election timeout in `term`: the event that
    /// needs no particular field.
    fn leaderless(term: u64) -> NodeEvent {
        leader_changed(
            term,
            None,
            None,
            Role::Follower,
            LeaderChangeCause::ElectionTimeout,
        )
    }

    fn peer_changed(
        id: &'static str,
        old: Option<PeerStatus>,
        new: Option<PeerStatus>,
    ) -> NodeEvent {
        NodeEvent::PeerStatusChanged(PeerChange {
            peer: PeerId::from_static(id),
            old,
            new,
            at_unix_ms: 1_700_000_000_500,
        })
    }

    fn runs(metrics: &NodeMetrics, hook: &str, result: &str) -> f64 {
        metrics
            .value(
                "conclave_callbacks_total",
                &[("hook", hook), ("result", result)],
            )
            .unwrap_or(0.0)
    }

    fn lagged(metrics: &NodeMetrics, subscriber: &str) -> f64 {
        metrics
            .value(
                "conclave_events_lagged_total",
                &[("subscriber", subscriber)],
            )
            .unwrap_or(0.0)
    }

    /// Polls `check` until it holds; panics naming `what` if it never does.
    async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
        for _ in 0..500 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("gave up waiting for {what}");
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// The `CONCLAVE_*` lines a hook dumped with `env`, sorted.
    fn env_lines(path: &Path) -> Vec<String> {
        let mut lines: Vec<String> = read(path).lines().map(str::to_owned).collect();
        lines.sort();
        lines
    }

    fn expected(lines: &[&str]) -> Vec<String> {
        let mut lines: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        lines.sort();
        lines
    }

    /// A command that dumps the hook's `CONCLAVE_*` variables into `dir/<name>`.
    fn dump_env(dir: &Path, name: &str) -> HookCommand {
        shell(format!(
            "env | grep '^CONCLAVE_' > '{}/{name}'",
            dir.display()
        ))
    }

    /// Whether `pid` names a live process; a zombie waiting for its parent counts as gone.
    fn is_alive(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
                .is_some_and(|state| !matches!(state, 'Z' | 'X')),
            Err(_) if Path::new("/proc/self/stat").exists() => false,
            Err(_) => std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("kill -0 {pid} 2>/dev/null"))
                .status()
                .is_ok_and(|status| status.success()),
        }
    }

    /// CB-2: every hook has its own runner slot, named as in `[hooks]`.
    #[test]
    fn hooks_have_distinct_slots_and_config_names() {
        for (position, hook) in Hook::ALL.iter().enumerate() {
            assert_eq!(hook.index(), position);
            assert_eq!(hook.lag_subscriber(), format!("hook:{}", hook.name()));
        }
    }

    /// CB-2, CB-5: a leader change to this node runs `on_leader` and `on_leader_change` (not
    /// `on_follower`), each with the event, its fencing token and its own hook name in the
    /// environment, and with no inherited `CONCLAVE_*` variable.
    #[actix_rt::test]
    async fn cb2_leader_change_to_self_runs_on_leader_with_environment() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let me = PeerId::from_static("gw-a");
        let mut config = hooks(Duration::from_secs(10));
        config.on_leader = vec![dump_env(dir.path(), "on_leader")];
        config.on_follower = vec![dump_env(dir.path(), "on_follower")];
        config.on_leader_change = vec![dump_env(dir.path(), "on_leader_change")];
        let node = start(me, config, HOOK_QUEUE_CAPACITY);

        node.bus.publish(leader_changed(
            7,
            Some(me),
            Some(PeerId::from_static("gw-b")),
            Role::Leader,
            LeaderChangeCause::VoteWon,
        ));
        eventually("on_leader and on_leader_change to run", || {
            runs(&node.metrics, "on_leader", "ok") == 1.0
                && runs(&node.metrics, "on_leader_change", "ok") == 1.0
        })
        .await;

        let common = [
            "CONCLAVE_NODE_ID=gw-a",
            "CONCLAVE_EVENT=leader_changed",
            "CONCLAVE_AT_UNIX_MS=1700000000007",
            "CONCLAVE_ROLE=leader",
            "CONCLAVE_TERM=7",
            "CONCLAVE_LEADER=gw-a",
            "CONCLAVE_PREVIOUS_LEADER=gw-b",
            "CONCLAVE_STEPPED_DOWN=false",
            "CONCLAVE_CAUSE=vote_won",
            "CONCLAVE_FENCING_TOKEN=7:gw-a",
        ];
        let mut on_leader = common.to_vec();
        on_leader.push("CONCLAVE_HOOK=on_leader");
        assert_eq!(
            env_lines(&dir.path().join("on_leader")),
            expected(&on_leader)
        );
        let mut on_change = common.to_vec();
        on_change.push("CONCLAVE_HOOK=on_leader_change");
        assert_eq!(
            env_lines(&dir.path().join("on_leader_change")),
            expected(&on_change)
        );

        assert!(!dir.path().join("on_follower").exists());
        assert_eq!(
            node.metrics.value(
                "conclave_callbacks_total",
                &[("hook", "on_follower"), ("result", "ok")]
            ),
            Some(0.0)
        );
    }

    /// CB-2, MEMB-1: a configuration change runs `on_membership_change` (and no leader hook)
    /// with the configuration in the environment; a node removed from it reads
    /// `CONCLAVE_MEMBER=false`, so that its hook can stop what it runs.
    #[actix_rt::test]
    async fn cb2_membership_change_runs_its_hook_with_the_configuration() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let me = PeerId::from_static("gw-c");
        let mut config = hooks(Duration::from_secs(10));
        config.on_leader_change = vec![dump_env(dir.path(), "on_leader_change")];
        config.on_membership_change = vec![shell(format!(
            "env | grep '^CONCLAVE_' > '{}'/change-\"$CONCLAVE_CONFIGURATION_INDEX\"",
            dir.path().display()
        ))];
        let node = start(me, config, HOOK_QUEUE_CAPACITY);
        let ids = |names: &[&'static str]| -> Vec<PeerId> {
            names.iter().map(|n| PeerId::from_static(n)).collect()
        };
        let change = |index, voters: Vec<PeerId>, learners: Vec<PeerId>| {
            let role = MemberRole::of(me, &voters, &learners);
            NodeEvent::MembershipChanged(MembershipChange {
                index,
                voters,
                learners,
                role,
                at_unix_ms: 1_700_000_000_900,
            })
        };
        node.bus.publish(change(
            12,
            ids(&["gw-a", "gw-b", "gw-c"]),
            ids(&["gw-d", "gw-e"]),
        ));
        node.bus
            .publish(change(15, ids(&["gw-a", "gw-b"]), Vec::new()));
        eventually("on_membership_change to run twice", || {
            runs(&node.metrics, "on_membership_change", "ok") == 2.0
        })
        .await;

        let common = [
            "CONCLAVE_NODE_ID=gw-c",
            "CONCLAVE_HOOK=on_membership_change",
            "CONCLAVE_EVENT=membership_changed",
            "CONCLAVE_AT_UNIX_MS=1700000000900",
        ];
        let mut member = common.to_vec();
        member.extend([
            "CONCLAVE_CONFIGURATION_INDEX=12",
            "CONCLAVE_VOTERS=gw-a gw-b gw-c",
            "CONCLAVE_LEARNERS=gw-d gw-e",
            "CONCLAVE_MEMBER=true",
            "CONCLAVE_MEMBERSHIP=voter",
        ]);
        assert_eq!(env_lines(&dir.path().join("change-12")), expected(&member));
        let mut removed = common.to_vec();
        removed.extend([
            "CONCLAVE_CONFIGURATION_INDEX=15",
            "CONCLAVE_VOTERS=gw-a gw-b",
            "CONCLAVE_LEARNERS=",
            "CONCLAVE_MEMBER=false",
            "CONCLAVE_MEMBERSHIP=none",
        ]);
        assert_eq!(env_lines(&dir.path().join("change-15")), expected(&removed));
        assert!(!dir.path().join("on_leader_change").exists());
    }

    /// CB-2, CB-5: a leader change to another node runs `on_follower` and `on_leader_change`
    /// (not `on_leader`); losing the leader runs only `on_leader_change`, with an empty
    /// leader and fencing token.
    #[actix_rt::test]
    async fn cb2_leader_change_to_other_runs_on_follower_with_environment() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let me = PeerId::from_static("gw-a");
        let mut config = hooks(Duration::from_secs(10));
        config.on_leader = vec![dump_env(dir.path(), "on_leader")];
        config.on_follower = vec![dump_env(dir.path(), "on_follower")];
        config.on_leader_change = vec![shell(format!(
            "env | grep '^CONCLAVE_' > '{}'/change-\"$CONCLAVE_TERM\"",
            dir.path().display()
        ))];
        let node = start(me, config, HOOK_QUEUE_CAPACITY);

        node.bus.publish(leader_changed(
            3,
            Some(PeerId::from_static("gw-b")),
            None,
            Role::Follower,
            LeaderChangeCause::LeaderHeard,
        ));
        node.bus.publish(leader_changed(
            4,
            None,
            Some(PeerId::from_static("gw-b")),
            Role::Candidate,
            LeaderChangeCause::QuorumLost,
        ));
        eventually("on_follower once and on_leader_change twice", || {
            runs(&node.metrics, "on_follower", "ok") == 1.0
                && runs(&node.metrics, "on_leader_change", "ok") == 2.0
        })
        .await;

        assert_eq!(
            env_lines(&dir.path().join("on_follower")),
            expected(&[
                "CONCLAVE_NODE_ID=gw-a",
                "CONCLAVE_HOOK=on_follower",
                "CONCLAVE_EVENT=leader_changed",
                "CONCLAVE_AT_UNIX_MS=1700000000003",
                "CONCLAVE_ROLE=follower",
                "CONCLAVE_TERM=3",
                "CONCLAVE_LEADER=gw-b",
                "CONCLAVE_PREVIOUS_LEADER=",
                "CONCLAVE_STEPPED_DOWN=false",
                "CONCLAVE_CAUSE=leader_heard",
                "CONCLAVE_FENCING_TOKEN=3:gw-b",
            ])
        );
        assert_eq!(
            env_lines(&dir.path().join("change-4")),
            expected(&[
                "CONCLAVE_NODE_ID=gw-a",
                "CONCLAVE_HOOK=on_leader_change",
                "CONCLAVE_EVENT=leader_changed",
                "CONCLAVE_AT_UNIX_MS=1700000000004",
                "CONCLAVE_ROLE=candidate",
                "CONCLAVE_TERM=4",
                "CONCLAVE_LEADER=",
                "CONCLAVE_PREVIOUS_LEADER=gw-b",
                "CONCLAVE_STEPPED_DOWN=false",
                "CONCLAVE_CAUSE=quorum_lost",
                "CONCLAVE_FENCING_TOKEN=",
            ])
        );
        assert!(dir.path().join("change-3").exists());
        assert!(!dir.path().join("on_leader").exists());
    }

    /// CB-2 (issue 8, item 6): every transition out of leader runs `on_follower`, with the
    /// cause and `CONCLAVE_STEPPED_DOWN=true`, even when no new leader is known: a
    /// keepalived-style pair of hooks must not leave a service running on an ex-leader. A
    /// node that did not lead and merely lost its leader runs no `on_follower`.
    #[actix_rt::test]
    async fn cb2_every_step_down_runs_on_follower_with_its_cause() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let me = PeerId::from_static("gw-a");
        let mut config = hooks(Duration::from_secs(10));
        config.on_follower = vec![shell(format!(
            "env | grep '^CONCLAVE_' > '{}'/follower-\"$CONCLAVE_TERM\"",
            dir.path().display()
        ))];
        let node = start(me, config, HOOK_QUEUE_CAPACITY);

        let causes = [
            LeaderChangeCause::QuorumLost,
            LeaderChangeCause::HigherTerm,
            LeaderChangeCause::Resign,
            LeaderChangeCause::Transfer,
            LeaderChangeCause::Quarantined,
            LeaderChangeCause::Shutdown,
        ];
        for (term, cause) in (1_u64..).zip(causes) {
            node.bus.publish(leader_changed(
                term,
                Some(me),
                None,
                Role::Leader,
                LeaderChangeCause::VoteWon,
            ));
            node.bus.publish(stepped_down(me, term, cause));
        }
        // Not a step-down: this node followed gw-b and lost it.
        node.bus.publish(leader_changed(
            10,
            None,
            Some(PeerId::from_static("gw-b")),
            Role::Follower,
            LeaderChangeCause::ElectionTimeout,
        ));
        node.bus.publish(leaderless(11));
        eventually("on_follower once per step-down", || {
            runs(&node.metrics, "on_follower", "ok") == 6.0
        })
        .await;

        for (term, cause) in (1_u64..).zip(causes) {
            assert_eq!(
                env_lines(&dir.path().join(format!("follower-{term}"))),
                expected(&[
                    "CONCLAVE_NODE_ID=gw-a",
                    "CONCLAVE_HOOK=on_follower",
                    "CONCLAVE_EVENT=leader_changed",
                    &format!("CONCLAVE_AT_UNIX_MS={}", 1_700_000_000_000 + term),
                    "CONCLAVE_ROLE=follower",
                    &format!("CONCLAVE_TERM={term}"),
                    "CONCLAVE_LEADER=",
                    "CONCLAVE_PREVIOUS_LEADER=gw-a",
                    "CONCLAVE_STEPPED_DOWN=true",
                    &format!("CONCLAVE_CAUSE={}", cause.label()),
                    "CONCLAVE_FENCING_TOKEN=",
                ]),
                "{cause:?}"
            );
        }
        assert!(!dir.path().join("follower-10").exists());
        assert!(!dir.path().join("follower-11").exists());
    }

    /// CB-2: a settle answers only once the runs of every event published before it have
    /// ended, so a stopping node does not kill its last hooks half-way.
    #[actix_rt::test]
    async fn cb2_settle_waits_for_the_runs_of_published_events() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("done");
        let mut config = hooks(Duration::from_secs(10));
        config.on_follower = vec![shell(format!("sleep 0.3; touch '{}'", done.display()))];
        let me = PeerId::from_static("gw-a");
        let metrics = NodeMetrics::new();
        let bus = EventBus::new(metrics.clone());
        let runner =
            CallbackActor::new(me, config, metrics.clone()).start_with(bus.subscribe("hooks"));

        // Published and settled at once: the runner has not even received the event yet.
        bus.publish(stepped_down(me, 3, LeaderChangeCause::Shutdown));
        assert!(runner.send(SettleHooks).await.unwrap());
        assert!(done.exists(), "settled before the on_follower run ended");
        assert_eq!(runs(&metrics, "on_follower", "ok"), 1.0);
        // Nothing pending: answered at once.
        assert!(runner.send(SettleHooks).await.unwrap());
    }

    /// CB-2: a settle gives up after two hook timeouts: three runs of a hook that hangs until
    /// killed take three.
    #[actix_rt::test]
    async fn cb2_settle_gives_up_after_two_hook_timeouts() {
        let _log = test_log();
        let mut config = hooks(Duration::from_millis(300));
        config.on_leader_change = vec![shell("sleep 30".to_owned())];
        let me = PeerId::from_static("gw-a");
        let metrics = NodeMetrics::new();
        let bus = EventBus::new(metrics.clone());
        let runner =
            CallbackActor::new(me, config, metrics.clone()).start_with(bus.subscribe("hooks"));
        for term in 1..=3 {
            bus.publish(leaderless(term));
        }
        assert!(!runner.send(SettleHooks).await.unwrap());
        assert!(runs(&metrics, "on_leader_change", "timeout") < 3.0);
    }

    /// CB-2: replaced hooks apply from the next run; the new timeout too.
    #[actix_rt::test]
    async fn cb2_replaced_hooks_apply_to_later_runs() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let me = PeerId::from_static("gw-a");
        let mut config = hooks(Duration::from_secs(10));
        config.on_leader_change = vec![shell(format!(
            "echo old-$CONCLAVE_TERM >> '{}'/trace",
            dir.path().display()
        ))];
        let metrics = NodeMetrics::new();
        let bus = EventBus::new(metrics.clone());
        let runner =
            CallbackActor::new(me, config, metrics.clone()).start_with(bus.subscribe("hooks"));
        bus.publish(leaderless(1));
        runner.send(SettleHooks).await.unwrap();

        let mut replaced = hooks(Duration::from_millis(200));
        replaced.on_leader_change = vec![shell(format!(
            "echo new-$CONCLAVE_TERM >> '{}'/trace",
            dir.path().display()
        ))];
        replaced.on_peer_status = vec![shell("sleep 5".to_owned())];
        runner.send(ReplaceHooks(replaced)).await.unwrap();
        bus.publish(leaderless(2));
        bus.publish(peer_changed("gw-b", None, Some(PeerStatus::Connected)));
        runner.send(SettleHooks).await.unwrap();

        assert_eq!(read(&dir.path().join("trace")), "old-1\nnew-2\n");
        assert_eq!(runs(&metrics, "on_peer_status", "timeout"), 1.0);
    }

    /// CB-2: peer events run `on_peer_status` with the peer, the kind of change and both
    /// statuses (`none` for "not in the table").
    #[actix_rt::test]
    async fn cb2_peer_status_hook_gets_peer_environment() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let mut config = hooks(Duration::from_secs(10));
        config.on_peer_status = vec![shell(format!(
            "env | grep '^CONCLAVE_' > '{}'/peer-\"$CONCLAVE_PEER_CHANGE\"",
            dir.path().display()
        ))];
        config.on_leader_change = vec![dump_env(dir.path(), "on_leader_change")];
        let node = start(PeerId::from_static("gw-a"), config, HOOK_QUEUE_CAPACITY);

        node.bus
            .publish(peer_changed("gw-c", None, Some(PeerStatus::Connected)));
        node.bus.publish(peer_changed(
            "gw-c",
            Some(PeerStatus::Connected),
            Some(PeerStatus::Disconnected),
        ));
        node.bus
            .publish(peer_changed("gw-c", Some(PeerStatus::Disconnected), None));
        eventually("three on_peer_status runs", || {
            runs(&node.metrics, "on_peer_status", "ok") == 3.0
        })
        .await;

        let with = |change: &str, status: &str, previous: &str| {
            expected(&[
                "CONCLAVE_NODE_ID=gw-a",
                "CONCLAVE_HOOK=on_peer_status",
                "CONCLAVE_EVENT=peer_status_changed",
                "CONCLAVE_AT_UNIX_MS=1700000000500",
                "CONCLAVE_PEER_ID=gw-c",
                &format!("CONCLAVE_PEER_CHANGE={change}"),
                &format!("CONCLAVE_PEER_STATUS={status}"),
                &format!("CONCLAVE_PEER_PREVIOUS_STATUS={previous}"),
            ])
        };
        assert_eq!(
            env_lines(&dir.path().join("peer-joined")),
            with("joined", "connected", "none")
        );
        assert_eq!(
            env_lines(&dir.path().join("peer-changed")),
            with("changed", "disconnected", "connected")
        );
        assert_eq!(
            env_lines(&dir.path().join("peer-left")),
            with("left", "none", "disconnected")
        );
        assert!(!dir.path().join("on_leader_change").exists());
    }

    /// CB-2: runs of one hook never overlap and follow event order; every command of the
    /// list runs, in list order (here an argv command running a script file, then a shell
    /// string).
    #[actix_rt::test]
    async fn cb2_runs_of_one_hook_are_serial_and_in_order() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace");
        let script = dir.path().join("hook.sh");
        std::fs::write(
            &script,
            format!(
                "echo \"start $CONCLAVE_TERM\" >> '{0}'\nsleep 0.05\necho \"end $CONCLAVE_TERM\" >> '{0}'\n",
                trace.display()
            ),
        )
        .unwrap();
        let mut config = hooks(Duration::from_secs(10));
        config.on_leader_change = vec![
            HookCommand::Argv(vec!["/bin/sh".to_owned(), script.display().to_string()]),
            shell(format!(
                "echo \"after $CONCLAVE_TERM\" >> '{}'",
                trace.display()
            )),
        ];
        let node = start(PeerId::from_static("gw-a"), config, HOOK_QUEUE_CAPACITY);

        for term in 1..=5 {
            node.bus.publish(leaderless(term));
        }
        eventually("ten on_leader_change commands", || {
            runs(&node.metrics, "on_leader_change", "ok") == 10.0
        })
        .await;

        let want: Vec<String> = (1..=5)
            .flat_map(|n| {
                [
                    format!("start {n}"),
                    format!("end {n}"),
                    format!("after {n}"),
                ]
            })
            .collect();
        let got: Vec<String> = read(&trace).lines().map(str::to_owned).collect();
        assert_eq!(got, want);
    }

    /// CB-2: a command still running at the timeout is killed together with the processes it
    /// started, reaped, and counted as `timeout`.
    #[actix_rt::test]
    async fn cb2_hook_exceeding_timeout_is_killed() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let shell_pid = dir.path().join("shell.pid");
        let sleep_pid = dir.path().join("sleep.pid");
        let mut config = hooks(Duration::from_millis(200));
        config.on_leader_change = vec![shell(format!(
            "echo $$ > '{}'; sleep 30 & echo $! > '{}'; wait",
            shell_pid.display(),
            sleep_pid.display()
        ))];
        let node = start(PeerId::from_static("gw-a"), config, HOOK_QUEUE_CAPACITY);

        node.bus.publish(leaderless(1));
        eventually("the run to time out", || {
            runs(&node.metrics, "on_leader_change", "timeout") == 1.0
        })
        .await;

        // A machine too loaded to write a pid file within the timeout kills the hook before
        // it could start that process, which is gone all the same.
        for pid_file in [&shell_pid, &sleep_pid] {
            let pid = read(pid_file);
            let pid = pid.trim();
            if !pid.is_empty() {
                eventually("the killed process to be gone", || !is_alive(pid)).await;
            }
        }
        assert_eq!(runs(&node.metrics, "on_leader_change", "ok"), 0.0);
        assert_eq!(runs(&node.metrics, "on_leader_change", "failed"), 0.0);
    }

    /// CB-2: a non-zero exit or a signal counts `failed`, a program that cannot be started or
    /// an empty argv counts `error`, and neither stops the commands after it.
    #[actix_rt::test]
    async fn cb2_failed_and_unspawnable_commands_are_counted() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("done");
        let mut config = hooks(Duration::from_secs(10));
        config.on_leader_change = vec![
            shell("exit 3".to_owned()),
            shell("kill -9 $$".to_owned()),
            HookCommand::Argv(vec!["/nonexistent/conclave-hook".to_owned()]),
            HookCommand::Argv(Vec::new()),
            shell(format!("touch '{}'", done.display())),
        ];
        let node = start(PeerId::from_static("gw-a"), config, HOOK_QUEUE_CAPACITY);

        node.bus.publish(leaderless(1));
        eventually("the last command to run", || {
            runs(&node.metrics, "on_leader_change", "ok") == 1.0
        })
        .await;

        assert_eq!(runs(&node.metrics, "on_leader_change", "failed"), 2.0);
        assert_eq!(runs(&node.metrics, "on_leader_change", "error"), 2.0);
        assert_eq!(runs(&node.metrics, "on_leader_change", "timeout"), 0.0);
        assert!(done.exists());
    }

    /// CB-2: while one hook is stuck, the publisher goes on and other hooks run later events
    /// to completion.
    #[actix_rt::test]
    async fn cb2_slow_hook_does_not_delay_other_hooks() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let release = dir.path().join("release");
        let peers = dir.path().join("peers");
        let mut config = hooks(Duration::from_secs(20));
        config.on_leader_change = vec![shell(format!(
            "while [ ! -e '{}' ]; do sleep 0.02; done",
            release.display()
        ))];
        config.on_peer_status = vec![shell(format!(
            "echo \"$CONCLAVE_PEER_ID\" >> '{}'",
            peers.display()
        ))];
        let node = start(PeerId::from_static("gw-a"), config, HOOK_QUEUE_CAPACITY);

        node.bus.publish(leaderless(1));
        node.bus
            .publish(peer_changed("gw-b", None, Some(PeerStatus::Connected)));
        node.bus
            .publish(peer_changed("gw-c", None, Some(PeerStatus::Connected)));
        eventually("on_peer_status to run both later events", || {
            runs(&node.metrics, "on_peer_status", "ok") == 2.0
        })
        .await;

        // The leader-change hook cannot have finished: it waits for a file nobody made yet.
        assert_eq!(read(&peers), "gw-b\ngw-c\n");
        assert_eq!(runs(&node.metrics, "on_leader_change", "ok"), 0.0);
        assert_eq!(runs(&node.metrics, "on_leader_change", "timeout"), 0.0);

        std::fs::write(&release, "").unwrap();
        eventually("the released hook to finish", || {
            runs(&node.metrics, "on_leader_change", "ok") == 1.0
        })
        .await;
    }

    /// MEM-5, CB-2: a hook that falls behind loses its oldest pending runs, counted under
    /// `hook:<name>`, and then runs the newest events in order.
    #[actix_rt::test]
    async fn mem5_overflowing_hook_queue_counts_lag_and_runs_newest() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let release = dir.path().join("release");
        let terms = dir.path().join("terms");
        let mut config = hooks(Duration::from_secs(20));
        config.on_leader_change = vec![shell(format!(
            "echo \"$CONCLAVE_TERM\" >> '{}'; while [ ! -e '{}' ]; do sleep 0.02; done",
            terms.display(),
            release.display()
        ))];
        let node = start(PeerId::from_static("gw-a"), config, 2);

        // Term 1 starts at once and blocks; 2..=20 queue behind it in room for two.
        for term in 1..=20 {
            node.bus.publish(leaderless(term));
        }
        eventually("the lag to be counted", || {
            lagged(&node.metrics, "hook:on_leader_change") == 17.0
        })
        .await;
        assert_eq!(runs(&node.metrics, "on_leader_change", "ok"), 0.0);

        std::fs::write(&release, "").unwrap();
        eventually("the surviving runs", || {
            runs(&node.metrics, "on_leader_change", "ok") == 3.0
        })
        .await;
        assert_eq!(read(&terms), "1\n19\n20\n");
        assert_eq!(lagged(&node.metrics, "hook:on_leader_change"), 17.0);
        assert_eq!(lagged(&node.metrics, "hooks"), 0.0);
    }

    /// CB-2: stdout is logged line by line at debug and stderr at warn; output past the limit
    /// is discarded without stalling the command.
    #[actix_rt::test]
    async fn cb2_hook_output_is_logged_and_bounded() {
        let log = CapturedLog::default();
        let writer = log.clone();
        let _log = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish(),
        );
        let mut config = hooks(Duration::from_secs(10));
        config.on_leader_change = vec![
            shell("echo hello from stdout; echo oops on stderr >&2".to_owned()),
            // About three times the limit, one short line after another.
            shell("i=0; while [ $i -lt 20000 ]; do echo 0123456789; i=$((i+1)); done".to_owned()),
        ];
        let node = start(PeerId::from_static("gw-a"), config, HOOK_QUEUE_CAPACITY);

        node.bus.publish(leaderless(1));
        eventually("both commands to succeed", || {
            runs(&node.metrics, "on_leader_change", "ok") == 2.0
        })
        .await;

        let text = log.text();
        let line_with = |needle: &str| {
            text.lines()
                .find(|line| line.contains(needle))
                .unwrap_or_else(|| panic!("no log line with {needle:?}"))
                .to_owned()
        };
        assert!(line_with("stdout: hello from stdout").contains("DEBUG"));
        assert!(line_with("stderr: oops on stderr").contains("WARN"));
        let discarded = line_with("hook output beyond 65536 bytes was discarded");
        assert!(discarded.contains("WARN"), "{discarded}");
        // 20000 lines of 11 bytes: the limit holds 5957 whole lines and one cut short.
        assert_eq!(text.matches("stdout: 0123456789").count(), 5957);
        assert!(discarded.contains("discarded=154464"), "{discarded}");
    }
}
