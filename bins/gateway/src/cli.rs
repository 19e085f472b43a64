//! The command line (clap).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgGroup, Parser, Subcommand, ValueEnum};

use crate::client_tls::TlsArgs;

/// conclave: a leader-election gateway.
///
/// A group of conclave nodes, over UDP (and ESP-NOW radio through a USB dongle), agree on
/// exactly one leader, notice within moments when it dies and elect another, and tell the
/// world through hook commands, an admin API, an event stream and Prometheus metrics.
#[derive(Debug, Parser)]
#[command(
    name = "conclave",
    version,
    about = "a leader-election gateway",
    long_about
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Commands,
}

/// The options of the commands that talk to a node's admin API. Each such command declares
/// them (a group of verbs, such as `kv`, for all of its verbs), so that they are listed where
/// they apply and refused elsewhere: `conclave run --admin URL` is a usage error, not a node
/// that silently binds its own address. `global` makes them valid anywhere after the verb
/// that declares them (`conclave kv --admin URL put K V`, `conclave kv put K V --admin URL`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ClientArgs {
    /// Admin API of the node to talk to: http://host:port or host:port.
    #[arg(
        long,
        global = true,
        env = "CONCLAVE_ADMIN",
        default_value = "http://127.0.0.1:7070"
    )]
    pub(crate) admin: String,

    /// The admin APIs of every node: set from [`Endpoints`] by the commands that take
    /// `--endpoints` (see [`Commands::client_args`]), empty elsewhere.
    #[arg(skip)]
    pub(crate) endpoints: Vec<String>,

    /// Seconds to wait for each node's answer.
    #[arg(long, global = true, default_value_t = 5, value_name = "SECS")]
    pub(crate) timeout: u64,

    /// Bearer token, when the node requires one (its admin.token_file, or a named token of its
    /// admin.tokens_file whose role covers the command).
    #[arg(
        long,
        global = true,
        env = "CONCLAVE_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub(crate) token: Option<String>,

    /// Print the API's JSON answer instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,

    /// TLS for https:// admin URLs.
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
}

/// `--endpoints`, for the commands that act on every node: `cluster status` and
/// `auto-election --cluster`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Endpoints {
    /// Admin APIs of every node, comma-separated (for auto-election: with --cluster). By
    /// default they are learned from the node at --admin (its admin.peer_urls).
    // One value per occurrence (comma-separated, or the option repeated): several values
    // after one --endpoints would swallow the verb's own arguments (`auto-election
    // --endpoints A,B off`).
    #[arg(
        long,
        global = true,
        env = "CONCLAVE_ENDPOINTS",
        value_delimiter = ',',
        value_name = "URL,..."
    )]
    pub(crate) endpoints: Vec<String>,
}

/// The client options, as [`ClientArgs`] parses them, and whether each takes a value.
/// The longest `jobs claim --wait`, in seconds: the API's bound on a claim's wait.
const MAX_CLAIM_WAIT_SECS: u64 = conclave_api::MAX_CLAIM_WAIT_MS / 1000;

const CLIENT_OPTIONS: [(&str, bool); 5] = [
    ("--admin", true),
    ("--endpoints", true),
    ("--timeout", true),
    ("--token", true),
    ("--json", false),
];

/// The command line with client options written before the verb (`conclave --admin URL
/// status`, as scripts written for earlier versions do) moved to just after it, where the verb
/// declares them. A verb that does not take them then refuses them, naming the option, as it
/// refuses them written after it. Everything else is left as it is.
pub(crate) fn client_options_after_the_verb(
    args: impl IntoIterator<Item = OsString>,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    // args[0] is the program; client options start right after it.
    let mut verb = 1;
    while let Some(arg) = args.get(verb).and_then(|arg| arg.to_str()) {
        let Some(takes_value) = CLIENT_OPTIONS.iter().find_map(|&(name, takes_value)| {
            if arg == name {
                Some(takes_value)
            } else if takes_value && arg.strip_prefix(name)?.starts_with('=') {
                // `--admin=URL`: the value is in the same word.
                Some(false)
            } else {
                None
            }
        }) else {
            break;
        };
        verb += if takes_value { 2 } else { 1 };
    }
    let is_verb = args
        .get(verb)
        .and_then(|arg| arg.to_str())
        .is_some_and(|arg| !arg.starts_with('-'));
    if verb > 1 && is_verb {
        let moved: Vec<OsString> = args.drain(1..verb).collect();
        args.splice(2..2, moved);
    }
    args
}

#[derive(Debug, Subcommand)]
pub(crate) enum Commands {
    /// Run a node.
    ///
    /// Reads the built-in defaults, then FILE (when given), then environment variables named
    /// CONCLAVE__SECTION__KEY (for example CONCLAVE__NODE__ID=gw-b). Without --config the
    /// defaults make a single node on loopback. Every configuration problem is printed with
    /// its key and the command exits with code 64; a damaged WAL ends it with 65, a port or
    /// data directory another process holds with 69, a data directory it cannot create or
    /// write with 73 (77 without the permission), an internal failure with 70 (EXIT STATUS
    /// in `conclave man` has them all).
    ///
    /// Signals: SIGHUP reopens the log file and reloads FILE, applying the hooks and the log
    /// settings at once and naming (at WARN) every other changed key, which needs a restart;
    /// a file with problems is refused and the node runs on unchanged. SIGTERM, Ctrl-C
    /// (SIGINT), SIGQUIT, SIGUSR1, SIGUSR2 and every other signal that would end the process
    /// stop it gracefully: a leader hands over first, the peers are told it is leaving, and
    /// the exit code is 0; a second such signal during the stop exits at once. Under systemd
    /// (Type=notify) it reports READY, RELOADING, STOPPING and pings the watchdog while
    /// healthy.
    Run {
        /// Configuration file (TOML); the built-in defaults when absent.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Log filter, as in RUST_LOG (for example `info` or `conclave_actors=debug`); given,
        /// it overrides `log.level` of the configuration at start.
        #[arg(long, env = "RUST_LOG")]
        log: Option<String>,
    },
    /// Create this node's WAL as a member of a new cluster, before its first start.
    ///
    /// Writes a genesis record into node.data_dir: the node has voted in no term, so from its
    /// first start it votes and campaigns at once, and a new cluster elects as soon as a
    /// majority of its voters runs. Without it (and without cluster.initial_state = "new"), a
    /// voter that starts without a WAL abstains until the other voters show which terms are
    /// over, as a node that lost its WAL must. Refused (exit code 1) for a data directory a
    /// node has used before: never initialise a node that lost its WAL (docs/wal.md).
    ///
    /// With --join URL, the node joins a running cluster instead (raft with [log]): it is
    /// added to the cluster's configuration as a learner through the admin API at URL (any
    /// member; the request is passed on to the leader), then its WAL is created. Started, it
    /// receives the leader's snapshot and the entries after it; it votes only once `conclave
    /// member promote ID` makes it a voter. Its configuration lists the cluster's voters in
    /// cluster.voters, not itself, and the other nodes in link.udp.peers. Exit codes as for
    /// the client commands (docs/cli.md) when the cluster refuses or cannot be reached.
    Init {
        /// Configuration file (TOML) of the node; the built-in defaults when absent.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Join the running cluster whose admin API is at URL (http://host:port or host:port).
        #[arg(long, value_name = "URL")]
        join: Option<String>,
        /// Bearer token of the cluster's admin API, when it requires one (with --join).
        #[arg(
            long,
            env = "CONCLAVE_ADMIN_TOKEN",
            hide_env_values = true,
            requires = "join"
        )]
        token: Option<String>,
        /// The UDP address the other nodes reach this one at (with --join); by default
        /// link.udp.listen, unless that is 0.0.0.0.
        #[arg(long, value_name = "ADDR", requires = "join")]
        udp: Option<String>,
        /// This node's admin API as the others should name it (with --join); by default
        /// http:// and admin.listen, unless that is 0.0.0.0.
        #[arg(long, value_name = "URL", requires = "join")]
        admin_url: Option<String>,
        /// Seconds to wait for each answer of the cluster (with --join).
        #[arg(long, value_name = "SECS", default_value_t = 10, requires = "join")]
        timeout: u64,
        /// TLS for an https:// --join URL.
        #[command(flatten)]
        tls: TlsArgs,
    },
    /// Run a whole cluster in this process, on virtual ESP-NOW dongles: no hardware, no
    /// configuration.
    ///
    /// N nodes (5 by default) each get a virtual ESP32 dongle behind a pseudo-terminal that
    /// the node opens like a real serial device; the dongles share one simulated air. Every
    /// node's admin API and metrics endpoint are printed at start. Without --duration, a live
    /// view shows every node and the recent events, and typed commands kill, revive and
    /// partition nodes (`kill 3`, `kill 1,2`, `kill leader`, `revive 3`, `partition 1,2 3,4,5`,
    /// `heal`, `battery 2 10`, `air`, `quit`). --mode picks the election. Colour only on a
    /// terminal, never with NO_COLOR set. `quit`, Ctrl-C, SIGTERM, SIGHUP and the end of
    /// standard input stop every node gracefully and remove the demo's temporary directory.
    /// With --duration it runs unattended, prints one line per event (and the nodes' warnings
    /// on standard error), kills the leader once halfway, and exits 0 only if every live node
    /// knows the same leader at the end (128 + N when signal N stopped it first). Either way
    /// the nodes' log is written to conclave-demo-PID.log in the temporary directory ($TMPDIR,
    /// else /tmp), named at start, and kept when the demo ends. --log runs the replicated log
    /// (raft only): `conclave kv` and `conclave jobs` work against any node's admin URL.
    /// --air-kbps models the radio's air time.
    Demo {
        /// How many nodes.
        #[arg(long, default_value_t = 5)]
        nodes: usize,
        /// Run unattended for this many seconds (at least 1) and report, instead of the live
        /// view.
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
        duration: Option<u64>,
        /// Seed of the simulated air (random by default).
        #[arg(long)]
        seed: Option<u64>,
        /// The election every node runs: raft, gossip (Fabric's) or priority (the ESP-NOW
        /// pods'; the live view shows each node's score and battery, and `battery N PCT`
        /// drains one to force a resign).
        #[arg(long, value_enum, default_value_t = DemoMode::Raft)]
        mode: DemoMode,
        /// Run the replicated log on every node (raft mode only): `conclave kv put KEY VALUE
        /// --admin URL` and `conclave jobs` against any node's admin URL, a follower
        /// redirecting to the leader.
        #[arg(long)]
        log: bool,
        /// Model the air time of the simulated radio at this many kbit/s (ESP-NOW's is about
        /// 214): frames on one channel take turns instead of overlapping. Off by default.
        #[arg(long, value_name = "KBPS", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        air_kbps: Option<u32>,
    },
    /// Talk to an ESP32 dongle directly, without a node (see firmware/micropython).
    Dongle {
        #[command(subcommand)]
        command: DongleCommand,
    },
    /// Print the built-in defaults: every key with its default and what it does, as TOML.
    ///
    /// This is the bottom layer of every configuration (the text of config/default.toml).
    /// A configuration file needs only the keys it changes; this shows what the others are.
    Defaults,
    /// Check a configuration file and print every problem with its key.
    ///
    /// Checks what `run` would refuse to start with, in one pass: every key's value, and the
    /// data directory (node.data_dir): that this user can create or write it, and that a WAL
    /// in it is undamaged and of the configured election.mode. Prints the warnings `run` would
    /// log too (for example node.id missing from cluster.voters). Exits 0 when `run` would
    /// start, 64 on any problem. Reads the WAL without changing anything.
    CheckConfig {
        /// Configuration file (TOML); --config FILE, as `run` and `init` take it, says the same.
        #[arg(
            value_name = "FILE",
            required_unless_present = "config",
            conflicts_with = "config"
        )]
        file: Option<PathBuf>,
        /// Configuration file (TOML), as `run` takes it.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Check the file's values only, not node.data_dir on this machine: for a
        /// configuration meant for another host.
        #[arg(long)]
        file_only: bool,
    },
    /// Role, term, leader, fencing token, quorum and peers of the node.
    Status {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// The node's peer table: status, round-trip time, last seen.
    Peers {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// The leadership history: every leader change with its cause and time.
    History {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Choose the leader, or make the leader step down.
    Leader {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: LeaderCommand,
    },
    /// Switch automatic elections on or off, on one node or on every voter.
    ///
    /// The switch is per node: with it off on one node only, the others still elect. --cluster applies it on every voter, reports each, and
    /// exits 1 unless every voter applied it.
    ///
    /// The switch is recorded in the node's WAL and outlives restarts, overriding election.auto
    /// from the configuration.
    AutoElection {
        /// `on` or `off`.
        switch: Switch,
        /// Apply it on every voter (see --endpoints), not only the node at --admin.
        #[arg(long)]
        cluster: bool,
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        endpoints: Endpoints,
    },
    /// Look at a node's write-ahead log, or repair a damaged one (docs/wal.md).
    Wal {
        /// Print the result as JSON instead of text.
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: WalCommand,
    },
    /// The replicated log's key-value store of cluster facts (needs log.enabled = true).
    ///
    /// Any node may be named with --admin: a node that does not lead redirects to the leader
    /// (421), which this follows. Reads are linearizable unless --stale reads the node's own
    /// copy. A write carries a request id (made up unless --request-id gives one), so running
    /// it again after an unanswered attempt applies it at most once. Exits 0 when done, 1 when
    /// the node said no (absent key, failed compare), 69 when no node answered, 75 when the
    /// cluster could not answer in time (run it again).
    Kv {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: KvCommand,
    },
    /// The replicated log's job queue (needs log.enabled = true).
    ///
    /// add puts a job in a queue; claim gives the oldest ready one to a worker with a lease;
    /// ack finishes it (it never runs again); nack gives it back. A lease that ends before the
    /// ack is taken back by the leader, and a job that used up its attempts is dead-lettered:
    /// `list --state dead` shows the dead letters, retry puts one back in its queue, purge
    /// deletes them. Redirects, request ids and exit codes as for `kv`.
    Jobs {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// The voters and learners of the replicated log's cluster (needs log.enabled = true).
    ///
    /// list shows the members as the node at --admin sees them (the leader adds how far each
    /// log matches). add brings in a new node as a learner, waits until it holds the log,
    /// then makes it a voter; promote and remove change one member. A change goes to the
    /// leader (a node that does not lead redirects, which this follows) and is answered once
    /// committed; one change runs at a time. Exits 0 when done, 1 when the cluster said no
    /// (a learner not caught up, the last voter, an unknown member), 69 when no node
    /// answered, 75 when the cluster could not answer in time or another change is under way
    /// (run it again).
    Member {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: MemberCommand,
    },
    /// Sessions: a client's proof of life, which keys and claimed jobs can be tied to
    /// (needs log.enabled = true).
    ///
    /// A session lives while keepalives reach the leader: the leader ends it when none came
    /// within its TTL (counted on the leader's own clock; a new leader starts every session's
    /// TTL afresh), or when it is revoked. What it holds ends with it: the keys written with
    /// `kv put --session ID` are deleted (watchers see the delete), the jobs claimed with
    /// `jobs claim --session ID` are ready again at once. So a client that dies, or is cut
    /// off from the leader, lets go of what it held within one TTL, without anyone cleaning
    /// up after it. grant starts one and prints its id; keepalive keeps it alive once, or
    /// with --follow for as long as it runs; revoke ends it; list shows the live ones.
    /// Redirects, request ids and exit codes as for `kv`.
    Session {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: SessionCommand,
    },
    /// Run CMD while holding the cluster-wide lock NAME, with a fencing token in its
    /// environment (needs log.enabled = true).
    ///
    /// `conclave lock NAME -- CMD ARGS...` starts a session (TTL --ttl), keeps it alive while
    /// it runs, and takes the lock by creating the key conclave/locks/NAME with that session
    /// (a create that succeeds only where the key does not exist). While another holds the
    /// lock it waits, watching the key until it is deleted, then tries again; --wait gives up
    /// after SECS. Once it holds the lock it runs CMD with CONCLAVE_LOCK_TOKEN (the store
    /// revision at which the key was created: larger for every later holder, so a resource
    /// can refuse a holder older than the last one it served), CONCLAVE_LOCK_KEY and
    /// CONCLAVE_SESSION in its environment. When CMD exits the session is revoked, which
    /// deletes the key, and the next waiter takes the lock. SIGINT, SIGTERM and SIGHUP are
    /// passed to CMD; the lock is released once CMD exits.
    ///
    /// If the keepalives stop while CMD runs (the session ended, or no keepalive reached the
    /// leader for a whole TTL), the lock may be someone else's already: conclave lock says so,
    /// sends CMD SIGTERM (SIGKILL one TTL later if it still runs) and exits 125. If conclave
    /// lock itself is killed with SIGKILL, its keepalives stop and the leader ends the session
    /// — and so the lock — within one TTL: that is how a crashed holder lets go. CMD is not
    /// stopped then, which is why a resource should check the token.
    ///
    /// Exit codes: CMD's own exit code (128+N when signal N ended it); 124 when --wait ran
    /// out before the lock was free (CMD did not run); 125 when the lock was lost while CMD
    /// ran; 126 when CMD could not be run, 127 when it was not found; before CMD runs, as for
    /// `kv`: 1 refused, 64 usage, 69 no node answered, 75 the cluster could not answer in
    /// time (or the session ended while waiting); 128+N when signal N came before CMD ran.
    Lock(LockArgs),
    /// Back up the replicated log's state to a file, and restore it into a new cluster.
    ///
    /// save takes a consistent, checksummed image of the key-value store and the job queue
    /// from a running cluster, without stopping it; status checks a saved file; restore seeds
    /// the data directory of each node of a new cluster from one (docs/operations.md, "Backup
    /// and restore").
    Snapshot {
        #[command(subcommand)]
        command: SnapshotCommand,
    },
    /// The whole cluster at a glance.
    Cluster {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        endpoints: Endpoints,
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Print a shell completion script for SHELL to standard output.
    ///
    /// bash: `conclave completions bash > /etc/bash_completion.d/conclave`; zsh: into a
    /// directory of $fpath as `_conclave`; fish: `~/.config/fish/completions/conclave.fish`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) to standard output.
    ///
    /// `conclave man > /usr/local/share/man/man1/conclave.1`, then `man conclave`.
    Man,
}

impl Commands {
    /// The client options of a command that talks to a node's admin API, with its
    /// `--endpoints` where it takes them; `None` for the others.
    pub(crate) fn client_args(&self) -> Option<ClientArgs> {
        match self {
            Commands::Status { client }
            | Commands::Peers { client }
            | Commands::History { client }
            | Commands::Leader { client, .. }
            | Commands::Kv { client, .. }
            | Commands::Jobs { client, .. }
            | Commands::Member { client, .. }
            | Commands::Session { client, .. }
            | Commands::Snapshot {
                command: SnapshotCommand::Save { client, .. },
            } => Some(client.clone()),
            Commands::AutoElection {
                client, endpoints, ..
            }
            | Commands::Cluster {
                client, endpoints, ..
            } => Some(ClientArgs {
                endpoints: endpoints.endpoints.clone(),
                ..client.clone()
            }),
            Commands::Lock(lock) => Some(lock.client.client_args()),
            Commands::Run { .. }
            | Commands::Init { .. }
            | Commands::Demo { .. }
            | Commands::Dongle { .. }
            | Commands::Defaults
            | Commands::CheckConfig { .. }
            | Commands::Wal { .. }
            | Commands::Snapshot { .. }
            | Commands::Completions { .. }
            | Commands::Man => None,
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum WalCommand {
    /// Every record with its offset and content, the damage found, and whether a node can
    /// start from the file.
    ///
    /// Reads without locking and changes nothing, so it works on the WAL of a running node.
    /// Exits 0 when a node can start from the file (clean, or a torn tail that the node cuts
    /// off by itself), 1 when it is corrupt or cannot be read, 66 when there is no WAL there
    /// (no such file or directory, or none in it). --json prints it as JSON.
    Inspect {
        /// The node's data directory (node.data_dir), or the WAL file itself.
        dir: PathBuf,
    },
    /// Repair a corrupt WAL: keep every valid record and make the node abstain at its next
    /// start.
    ///
    /// Refuses while a node runs on the directory. Copies the damaged file, unchanged, to
    /// conclave.wal.damaged-<unix ms> beside it; writes a new WAL with every valid record in
    /// order, the damaged spans dropped; and ends it with an amnesia marker, so that the node
    /// abstains (no vote, no campaign) at its next start until the other voters show which
    /// terms are over (docs/wal.md): a dropped record may have held its newest vote. Without
    /// --confirm it only says what it would do. Exits 66 when there is no WAL in the
    /// directory.
    Repair {
        /// The node's data directory (node.data_dir).
        dir: PathBuf,
        /// Do it.
        #[arg(long)]
        confirm: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SnapshotCommand {
    /// Save a consistent, checksummed image of the replicated state machine to FILE.
    ///
    /// Asks the node at --admin; one that does not lead redirects to the leader, which takes
    /// the image after a linearizable read barrier: it holds every write acknowledged before
    /// the command started, at a committed index of the log. Writes go on meanwhile: the node
    /// only copies its state in memory. The file is checked (header, size, sha256 checksum)
    /// before it is written, and written whole or not at all (a temporary file beside FILE,
    /// renamed over it), readable by its owner only, replacing an older FILE. Prints the
    /// index, term, size and checksum. Exits 0 when saved, 1 when the node refused or sent
    /// something that is not a whole snapshot, 69 when no node answered, 73 when FILE cannot
    /// be written, 75 when the cluster could not answer in time (run it again).
    Save {
        /// Where to write the snapshot.
        file: PathBuf,
        /// Take the image from the node at --admin as it is, without asking the leader: a
        /// committed index, perhaps without the latest acknowledged writes.
        #[arg(long)]
        stale: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Check a saved snapshot and print what it holds.
    ///
    /// Checks the header, the size and the sha256 checksum, and that the state machine's
    /// image in it decodes; prints the cluster it was taken from, the log index and term it
    /// stands at, when it was taken, its size and checksum, and the store's revision, keys and
    /// jobs. Needs no node. Exits 0 when the file is whole, 1 when it is damaged or not a saved
    /// snapshot (the problem is named), 66 when it cannot be read.
    Status {
        /// The saved snapshot.
        file: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Seed a node's empty data directory from a saved snapshot, for a new cluster.
    ///
    /// Reads node.data_dir and the election from --config, checks FILE as status does, and
    /// writes the data directory so that `conclave run` with that configuration starts with
    /// the snapshot's state, as a member of a new cluster of the configured voters that has
    /// voted in no term yet. Restore every voter of the new cluster from the same file, then
    /// start them. Refused (exit 1) unless the data directory is empty or absent; exits 64 for
    /// a configuration without the replicated log, 66 when FILE cannot be read, 73 or 77 when
    /// the data directory cannot be written.
    Restore {
        /// The saved snapshot.
        file: PathBuf,
        /// Configuration file (TOML) of the node whose data directory is seeded.
        #[arg(long, short, value_name = "FILE")]
        config: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum KvCommand {
    /// Set KEY to VALUE; prints the store's new revision.
    ///
    /// VALUE is taken as written, except `-`, which reads it from standard input, and `@FILE`,
    /// which reads it from FILE (`@@…` is a value starting with `@`; a value that is `-`
    /// itself: `printf %s - | conclave kv put KEY -`). What is read is stored byte for byte,
    /// a trailing newline included (`echo` adds one, `printf` does not), and must be UTF-8
    /// text. A write's value (a job's payload) may be up to 64 KiB (65,536 bytes), its key up to
    /// 512 bytes (a job's queue up to 128) and its request id up to 128 bytes; a write larger than
    /// one frame travels in pieces, over UDP and ESP-NOW links alike. A larger write is refused
    /// (exit 1).
    Put {
        key: String,
        /// The value: text, `-` for standard input, or `@FILE`.
        value: String,
        /// Only if the key's revision is N (0: only if the key does not exist); else exit 1.
        #[arg(long, value_name = "N")]
        if_revision: Option<u64>,
        /// Only if the key's value is this; else exit 1.
        #[arg(long, value_name = "VALUE")]
        if_value: Option<String>,
        /// Tie the key to live session ID (`conclave session grant`): it is deleted when the
        /// session ends. Without it, a put unties the key from any session.
        #[arg(long, value_name = "ID")]
        session: Option<u64>,
        /// The write's request id (applied at most once); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Print KEY's value; exit 1 when it is absent.
    Get {
        key: String,
        /// Read this node's copy as it is, without asking the leader.
        #[arg(long)]
        stale: bool,
    },
    /// Remove KEY; exit 1 when it is absent.
    Del {
        key: String,
        /// Only if the key's revision is N; else exit 1.
        #[arg(long, value_name = "N")]
        if_revision: Option<u64>,
        /// The write's request id (applied at most once); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Print KEY's changes as they happen, one line each (`put VALUE @REVISION` or
    /// `delete @REVISION`), until interrupted. Served by the node at --admin from its own copy.
    Watch {
        key: String,
        /// Start at this store revision (earlier changes still in the history are printed
        /// first); by default, from now on.
        #[arg(long, value_name = "REV")]
        from: Option<u64>,
    },
    /// Every key starting with PREFIX (all without one), as `key = value` lines.
    List {
        prefix: Option<String>,
        /// Read this node's copy as it is, without asking the leader.
        #[arg(long)]
        stale: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum JobsCommand {
    /// Put a job (PAYLOAD, any text) in a queue; prints its id.
    ///
    /// PAYLOAD is taken as written, except `-`, which reads it from standard input, and
    /// `@FILE`, which reads it from FILE (`@@…` is a payload starting with `@`). What is read
    /// is stored byte for byte, a trailing newline included (`echo` adds one, `printf` does
    /// not), and must be UTF-8 text. A write's value (a job's payload) may be up to 64 KiB (65,536
    /// bytes), its key up to 512 bytes (a job's queue up to 128) and its request id up to 128
    /// bytes; a write larger than one frame travels in pieces, over UDP and ESP-NOW links alike. A
    /// larger write is refused (exit 1).
    Add {
        /// The job: text, `-` for standard input, or `@FILE`.
        payload: String,
        /// The queue ("default" when absent).
        #[arg(long)]
        queue: Option<String>,
        /// Claims it gets before it is dead-lettered (5 when absent).
        #[arg(long, value_name = "N")]
        max_attempts: Option<u32>,
        /// The write's request id (applied at most once); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Give the oldest ready job of a queue to WORKER; prints its id and payload, exit 1 when
    /// none is ready.
    ///
    /// With --wait, a claim that finds no job ready waits up to SECS seconds (at most 60) on the
    /// leader for one, and exits 1 only when none became ready in that time. If the leader
    /// changes meanwhile, the claim goes on waiting on the new leader for the rest of the time.
    Claim {
        /// Who takes the job.
        #[arg(long)]
        worker: String,
        /// The queue ("default" when absent).
        #[arg(long)]
        queue: Option<String>,
        /// How long the worker may hold it before the leader takes it back (30000 when absent).
        #[arg(long, value_name = "MS", conflicts_with = "session")]
        lease_ms: Option<u64>,
        /// Hold the job for as long as live session ID lives, instead of for a lease: when the
        /// session ends (revoked, or no keepalive within its TTL) the job is ready again at once.
        #[arg(long, value_name = "ID")]
        session: Option<u64>,
        /// The write's request id (applied at most once); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
        /// When no job is ready, wait up to SECS seconds (0 to 60) for one (--timeout is
        /// counted on top of the wait).
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(0..=MAX_CLAIM_WAIT_SECS))]
        wait: Option<u64>,
    },
    /// WORKER finished job ID: it never runs again. Exit 1 when the worker does not hold it.
    Ack {
        job: u64,
        #[arg(long)]
        worker: String,
        /// The write's request id (applied at most once); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// WORKER gives job ID back: ready again, or dead once its attempts are used up.
    Nack {
        job: u64,
        #[arg(long)]
        worker: String,
        /// Why, kept on the job.
        #[arg(long)]
        reason: Option<String>,
        /// The write's request id (applied at most once); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Put dead job ID back in its queue: ready again, with its attempts reset to 0.
    ///
    /// For a job that was dead-lettered (its attempts used up) once what made it fail is
    /// fixed. It keeps its id, payload and queue, and is claimed before the jobs enqueued
    /// after it. Exit 1 when the job is not dead (its state is said) or unknown.
    Retry {
        job: u64,
        /// The write's request id (applied at most once); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Delete dead jobs for good: dead job ID, or with --all every dead job (of --queue).
    ///
    /// `purge ID` deletes one dead job; exit 1 when it is not dead (its state is said) or
    /// unknown. `purge --all` deletes every dead job of every queue, `purge --all --queue Q`
    /// those of queue Q; both print how many were deleted and their ids. Jobs in any other
    /// state are never deleted. Nothing is purged without ID or --all.
    #[command(group(ArgGroup::new("which").required(true).args(["job", "all"])))]
    Purge {
        /// The dead job to delete.
        job: Option<u64>,
        /// Delete every dead job (of --queue only, when given).
        #[arg(long)]
        all: bool,
        /// With --all: only this queue's dead jobs.
        // `requires = "all"` alone lets `purge ID --queue Q` through (--all, a flag, counts
        // as present with its default), so a queue beside an id is refused explicitly.
        #[arg(long, requires = "all", conflicts_with = "job")]
        queue: Option<String>,
        /// The write's request id (applied at most once); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// The jobs, one per line: id, state, queue, payload.
    List {
        /// Only jobs in this state: ready, claimed, done or dead.
        #[arg(long)]
        state: Option<String>,
        /// Read this node's copy as it is, without asking the leader.
        #[arg(long)]
        stale: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum MemberCommand {
    /// One line per member: id, role, UDP address, admin URL and, from the leader, how far
    /// its log matches and how far a learner is behind.
    List,
    /// Add node ID: as a learner, then, once it holds the log, as a voter (printing each
    /// step). Start the node first, with its own node.id, cluster.voters naming the current
    /// voters (not itself) and link.udp.peers naming them.
    Add {
        /// The new node's node.id.
        id: String,
        /// Its link.udp.listen address, IP:PORT: where every node reaches it.
        #[arg(long, value_name = "ADDR")]
        udp: String,
        /// Its admin API (http://host:port), named in redirects and listings.
        #[arg(long, value_name = "URL")]
        admin_url: Option<String>,
        /// Stop once it is a learner; `member promote ID` makes it a voter later.
        #[arg(long)]
        learner: bool,
        /// Seconds to wait for the learner to catch up before giving up (exit 75; it stays
        /// a learner, and `member promote ID` finishes the job).
        #[arg(long, value_name = "SECS", default_value_t = 60)]
        wait: u64,
    },
    /// Make the learner ID a voter; refused (exit 1) while it is behind, saying how far.
    Promote {
        /// The learner's node id.
        id: String,
    },
    /// Remove the voter or learner ID. A leader that removes itself steps down once the
    /// change is committed; stop a removed node afterwards.
    Remove {
        /// The member's node id.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SessionCommand {
    /// Start a session with a time to live; prints its id.
    ///
    /// The session lives while a keepalive reaches the leader at least once per TTL
    /// (`session keepalive ID --follow` sends them for as long as it runs). Keys written with
    /// `kv put --session ID` and jobs claimed with `jobs claim --session ID` are held by it,
    /// and let go when it ends.
    Grant {
        /// How long the leader waits for a keepalive before it ends the session, in
        /// milliseconds (500 to 86400000).
        #[arg(long, value_name = "MS")]
        ttl: u64,
        /// What to call it, for operators (shown by `session list`).
        #[arg(long)]
        name: Option<String>,
        /// The jobs it may hold claimed at once (1 to 10000; 64 when absent).
        #[arg(long, value_name = "N")]
        max_claims: Option<u32>,
        /// The write's request id (applied at most once: run again, it prints the same
        /// session); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// Keep session ID alive: its TTL counts again from now on the leader's clock.
    ///
    /// Once by default (exit 1 when the session is no longer live). With --follow, for as
    /// long as this runs: the leader sends a keepalive every third of the TTL over one
    /// streaming request, and a line is printed for each. It ends when the session ends
    /// (revoked or expired: exit 1) or when the node stops leading or stops answering (exit
    /// 75; the session lives on until its TTL runs out, so run it again to reach the new
    /// leader). Interrupting it stops the keepalives: the session then ends within its TTL.
    Keepalive {
        /// The session.
        session: u64,
        /// Keep it alive until interrupted, printing each keepalive.
        #[arg(long)]
        follow: bool,
    },
    /// End session ID now; prints what ended with it.
    ///
    /// The keys written with it are deleted (watchers see the delete), the jobs it held are
    /// ready again (or dead, when their attempts are used up). Exit 1 when it is not live.
    Revoke {
        /// The session.
        session: u64,
        /// The write's request id (applied at most once); made up when absent.
        #[arg(long, value_name = "ID")]
        request_id: Option<String>,
    },
    /// The live sessions, one per line: id, name, TTL, time left, keys and claims held.
    List {
        /// Read this node's copy as it is, without asking the leader (no time left then).
        #[arg(long)]
        stale: bool,
    },
}

/// The arguments of `conclave lock`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LockArgs {
    /// The lock's name: the key conclave/locks/NAME holds it.
    pub(crate) name: String,
    /// The session's time to live in milliseconds: how long the lock outlives a holder
    /// that stopped sending keepalives (killed, cut off from the leader).
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(500..=86_400_000)
    )]
    pub(crate) ttl: u64,
    /// Give up (exit 124) when the lock is still held by another after SECS; without it,
    /// wait for as long as it takes.
    #[arg(long, value_name = "SECS")]
    pub(crate) wait: Option<u64>,
    /// The command to run while holding the lock, and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<OsString>,
    #[command(flatten)]
    pub(crate) client: LockClientArgs,
}

/// The client options of `conclave lock`: those of [`ClientArgs`] but `--json`, since
/// standard output belongs to the command run under the lock.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LockClientArgs {
    /// Admin API of the node to talk to: http://host:port or host:port.
    #[arg(long, env = "CONCLAVE_ADMIN", default_value = "http://127.0.0.1:7070")]
    pub(crate) admin: String,
    /// Seconds to wait for each node's answer.
    #[arg(long, default_value_t = 5, value_name = "SECS")]
    pub(crate) timeout: u64,
    /// Bearer token, when the node requires one (its admin.token_file, or a named token of its
    /// admin.tokens_file whose role covers the command).
    #[arg(long, env = "CONCLAVE_ADMIN_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// TLS for an https:// admin URL.
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
}

impl LockClientArgs {
    /// The same options as the other client commands take them.
    pub(crate) fn client_args(&self) -> ClientArgs {
        ClientArgs {
            admin: self.admin.clone(),
            endpoints: Vec::new(),
            timeout: self.timeout,
            token: self.token.clone(),
            json: false,
            tls: self.tls.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum ClusterCommand {
    /// One line per node, from each node's own admin API: role, term, leader, automatic
    /// election, readiness. Flags disagreement (two leaders, different terms or leaders, a
    /// node that does not answer) and exits 1 when there is any.
    Status,
}

#[derive(Debug, Subcommand)]
pub(crate) enum DongleCommand {
    /// Check the dongle on PORT: handshake, print its INFO (firmware, MAC, channel, limits),
    /// the round trip of a few PINGs and a few seconds of STATS. Changes nothing on it.
    ///
    /// Exits 0 for a working dongle, 1 when the device answers but is not one (another
    /// protocol, boot text of an ESP32 without the dongle firmware), 69 when the port cannot
    /// be opened (absent, busy, not a serial port) or nothing answers.
    Check {
        /// The dongle's serial port: /dev/ttyACM0, /dev/ttyUSB0, /dev/conclave-dongle.
        port: PathBuf,
        /// Baud rate on USB-UART boards; native USB ignores it.
        #[arg(long, default_value_t = 921_600)]
        baud: u32,
        /// Seconds of STATS to print (the dongle sends one a second).
        #[arg(long, default_value_t = 3)]
        stats: u64,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum LeaderCommand {
    /// Make PEER_ID the leader (connected mode: assign it; voters mode: transfer to it) and pin
    /// it until it is lost.
    ///
    /// Waits (--wait seconds) until the node asked sees PEER_ID lead, prints the state after
    /// the change, and exits 1 when the change did not complete (for example PEER_ID is
    /// down).
    Set {
        /// The node that is to lead.
        peer_id: String,
        /// Seconds to wait for PEER_ID to lead.
        #[arg(long, default_value_t = 10, value_name = "SECS")]
        wait: u64,
        /// Answer as soon as the change started, without waiting for it.
        #[arg(long, conflicts_with = "wait")]
        no_wait: bool,
    },
    /// The leader hands leadership to the best peer, or steps down. Sent to a follower, it is
    /// passed on to the leader's admin API when the follower names it (admin.peer_urls).
    ///
    /// Waits (--wait seconds) until the node that resigned names a new leader (or leads again
    /// in a later term: alone, it is re-elected), prints the state after the change, and exits
    /// 1 when that did not happen in time.
    Resign {
        /// Seconds to wait for the outcome.
        #[arg(long, default_value_t = 10, value_name = "SECS")]
        wait: u64,
        /// Answer as soon as the resignation started, without waiting for its outcome.
        #[arg(long, conflicts_with = "wait")]
        no_wait: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Switch {
    /// Automatic elections on.
    On,
    /// Automatic elections off: a lost leader is not replaced until an operator acts.
    Off,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// `jobs purge` deletes one dead job by id or, with --all, every dead job (of --queue);
    /// anything that leaves which ones unclear is a usage error, so nothing is purged by
    /// mistake.
    #[test]
    fn jobs_purge_takes_an_id_or_all() {
        let purge = |args: &[&str]| {
            let line = ["conclave", "jobs", "purge"].iter().chain(args).copied();
            Cli::try_parse_from(line).map(|cli| match cli.command {
                Commands::Jobs {
                    command:
                        JobsCommand::Purge {
                            job, all, queue, ..
                        },
                    ..
                } => (job, all, queue),
                other => panic!("parsed as {other:?}"),
            })
        };
        assert_eq!(purge(&["7"]).unwrap(), (Some(7), false, None));
        assert_eq!(purge(&["--all"]).unwrap(), (None, true, None));
        assert_eq!(
            purge(&["--all", "--queue", "mail"]).unwrap(),
            (None, true, Some("mail".to_owned()))
        );
        for refused in [
            &[][..],
            &["--queue", "mail"],
            &["7", "--all"],
            &["7", "--queue", "mail"],
        ] {
            assert!(purge(refused).is_err(), "{refused:?}");
        }
        let cli = Cli::parse_from(["conclave", "jobs", "retry", "7", "--request-id", "r"]);
        assert!(matches!(
            cli.command,
            Commands::Jobs {
                command: JobsCommand::Retry { job: 7, .. },
                ..
            }
        ));
    }

    /// Parses `conclave ARGS` as `main` does, client options before the verb moved after it.
    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let line = std::iter::once("conclave").chain(args.iter().copied());
        Cli::try_parse_from(client_options_after_the_verb(line.map(OsString::from)))
    }

    /// The client options of `conclave ARGS`.
    fn client(args: &[&str]) -> ClientArgs {
        let cli = parse(args).unwrap_or_else(|err| panic!("{args:?}: {err}"));
        cli.command
            .client_args()
            .unwrap_or_else(|| panic!("{args:?} is not a client command"))
    }

    #[test]
    fn parses_the_verbs() {
        let cli = Cli::parse_from(["conclave", "leader", "set", "gw-b", "--json"]);
        assert!(matches!(
            cli.command,
            Commands::Leader {
                command: LeaderCommand::Set { .. },
                client: ClientArgs { json: true, .. },
            }
        ));
        let cli = Cli::parse_from(["conclave", "auto-election", "off"]);
        assert!(matches!(
            cli.command,
            Commands::AutoElection {
                switch: Switch::Off,
                cluster: false,
                ..
            }
        ));
        let cli = Cli::parse_from(["conclave", "auto-election", "off", "--cluster"]);
        assert!(matches!(
            cli.command,
            Commands::AutoElection { cluster: true, .. }
        ));
        let endpoints = client(&[
            "cluster",
            "status",
            "--endpoints",
            "10.0.0.1:7070,10.0.0.2:7070",
        ])
        .endpoints;
        assert_eq!(endpoints, ["10.0.0.1:7070", "10.0.0.2:7070"]);
        // One value per --endpoints: the verb's own arguments are not swallowed.
        let cli = parse(&[
            "auto-election",
            "--endpoints",
            "a:1,b:1",
            "off",
            "--cluster",
        ])
        .unwrap();
        assert_eq!(cli.command.client_args().unwrap().endpoints, ["a:1", "b:1"]);
        let cli = Cli::parse_from(["conclave", "run"]);
        assert!(matches!(cli.command, Commands::Run { config: None, .. }));
        let cli = Cli::parse_from([
            "conclave",
            "dongle",
            "check",
            "/dev/ttyACM0",
            "--stats",
            "5",
        ]);
        assert!(matches!(
            cli.command,
            Commands::Dongle {
                command: DongleCommand::Check {
                    stats: 5,
                    baud: 921_600,
                    ..
                }
            }
        ));
        let cli = Cli::parse_from(["conclave", "wal", "repair", "/var/lib/x", "--confirm"]);
        assert!(matches!(
            cli.command,
            Commands::Wal {
                command: WalCommand::Repair { confirm: true, .. },
                json: false,
            }
        ));
        let cli = Cli::parse_from(["conclave", "wal", "inspect", "/var/lib/x", "--json"]);
        assert!(matches!(cli.command, Commands::Wal { json: true, .. }));
        let cli = Cli::parse_from(["conclave", "completions", "zsh"]);
        assert!(matches!(
            cli.command,
            Commands::Completions {
                shell: clap_complete::Shell::Zsh
            }
        ));
    }

    /// The client options are taken anywhere after the verb that declares them, a group's
    /// verbs included, and before it as earlier versions took them.
    #[test]
    fn client_options_are_taken_after_the_verb_and_before_it() {
        let url = "http://10.0.0.2:7070";
        for args in [
            &["kv", "put", "K", "V", "--admin", url][..],
            &["kv", "--admin", url, "put", "K", "V"],
            &["kv", "put", "--admin", url, "K", "V"],
            &["--admin", url, "kv", "put", "K", "V"],
            &[&format!("--admin={url}"), "kv", "put", "K", "V"],
            &["jobs", "ack", "1", "--worker", "w", "--admin", url],
            &["status", "--admin", url],
            &["--admin", url, "status"],
            &["leader", "--admin", url, "resign"],
            &["cluster", "status", "--admin", url],
            &["auto-election", "on", "--admin", url],
            &["snapshot", "save", "f.snapshot", "--admin", url],
            &["snapshot", "save", "--admin", url, "f.snapshot", "--stale"],
            &["session", "list", "--admin", url],
            &["--admin", url, "session", "keepalive", "7", "--follow"],
            &["lock", "L", "--admin", url, "--", "true"],
            &["--admin", url, "lock", "L", "--", "true"],
        ] {
            assert_eq!(client(args).admin, url, "{args:?}");
        }
        let all = client(&["--json", "--timeout", "9", "kv", "get", "K", "--token", "t"]);
        assert!(all.json);
        assert_eq!((all.timeout, all.token.as_deref()), (9, Some("t")));
        let defaults = client(&["peers"]);
        assert!(!defaults.json);
        assert_eq!(defaults.timeout, 5);
        // A value is no verb: `--admin status` leaves the line alone (and clap says what is
        // wrong).
        assert!(parse(&["--admin", "status"]).is_err());
        let cli = parse(&["--json", "wal", "inspect", "/var/lib/x"]).unwrap();
        assert!(matches!(cli.command, Commands::Wal { json: true, .. }));
    }

    /// SESS-3: `jobs claim --wait SECS` takes 0 to 60 seconds, the API's bound; more is a
    /// usage error.
    #[test]
    fn a_claim_waits_at_most_a_minute() {
        let claim = |wait: &str| parse(&["jobs", "claim", "--worker", "w", "--wait", wait]);
        let cli = claim("60").unwrap();
        assert!(matches!(
            cli.command,
            Commands::Jobs {
                command: JobsCommand::Claim { wait: Some(60), .. },
                ..
            }
        ));
        assert!(claim("0").is_ok());
        assert!(claim("61").is_err());
    }

    /// A client option is refused by a command it does not affect, naming the option, and
    /// is not listed in its help: `run --admin` does not silently bind its own address.
    #[test]
    fn init_takes_its_client_options_only_with_join() {
        for args in [
            &["init", "--timeout", "3"][..],
            &["init", "--token", "t"],
            &["init", "--udp", "127.0.0.1:1"],
        ] {
            let err = parse(args).map(|_| ()).unwrap_err();
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{args:?}"
            );
        }
        assert!(parse(&["init", "--join", "h:1", "--token", "t", "--timeout", "3"]).is_ok());
    }

    #[test]
    fn client_options_are_refused_where_they_do_not_apply() {
        for args in [
            &["run", "--admin", "127.0.0.1:17999"][..],
            &["--admin", "127.0.0.1:17999", "run"],
            &["defaults", "--json"],
            &["--json", "defaults"],
            &["demo", "--token", "t"],
            &["init", "--admin", "x"],
            &["man", "--json"],
            &["completions", "bash", "--admin", "x"],
            &["check-config", "f.toml", "--json"],
            &["dongle", "check", "/dev/ttyACM0", "--admin", "x"],
            &["wal", "inspect", "/x", "--admin", "x"],
            &["status", "--endpoints", "a:1"],
            &["kv", "get", "K", "--endpoints", "a:1"],
            &["snapshot", "status", "f.snapshot", "--admin", "x"],
            &[
                "snapshot",
                "restore",
                "f.snapshot",
                "--config",
                "c.toml",
                "--token",
                "t",
            ],
            &["snapshot", "save", "f.snapshot", "--endpoints", "a:1"],
            &["lock", "L", "--json", "--", "true"],
            &["--json", "lock", "L", "--", "true"],
        ] {
            let err = parse(args).map(|_| ()).unwrap_err();
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::UnknownArgument,
                "{args:?}"
            );
            let option = args.iter().find(|arg| arg.starts_with("--")).unwrap();
            assert!(err.to_string().contains(option), "{args:?}: {err}");
        }
        let mut command = Cli::command();
        command.build();
        // `init` takes --token and --timeout, for --join only
        // (`init_takes_its_client_options_only_with_join`); never --admin, --endpoints, --json.
        let init = command.find_subcommand("init").unwrap();
        assert!(
            init.get_arguments()
                .filter_map(|arg| arg.get_long())
                .all(|option| !["admin", "endpoints", "json"].contains(&option))
        );
        for verb in [
            "run",
            "defaults",
            "demo",
            "man",
            "completions",
            "check-config",
        ] {
            let verb = command.find_subcommand(verb).unwrap();
            let options: Vec<&str> = verb
                .get_arguments()
                .filter_map(|arg| arg.get_long())
                .collect();
            for option in ["admin", "endpoints", "timeout", "token", "json"] {
                assert!(
                    !options.contains(&option),
                    "{} takes --{option}: {options:?}",
                    verb.get_name()
                );
            }
        }
    }

    /// `check-config` takes the file as `run` and `init` do, or as its argument; not both.
    #[test]
    fn check_config_takes_its_file_either_way() {
        for args in [
            &["check-config", "a.toml"][..],
            &["check-config", "--config", "a.toml"],
        ] {
            let cli = parse(args).unwrap();
            let Commands::CheckConfig { file, config, .. } = cli.command else {
                panic!("{args:?}");
            };
            assert_eq!(file.or(config), Some(PathBuf::from("a.toml")), "{args:?}");
        }
        assert!(parse(&["check-config"]).is_err());
        assert!(parse(&["check-config", "a.toml", "--config", "b.toml"]).is_err());
    }

    /// `snapshot save` talks to a node, `status` and `restore` take files; `restore` needs
    /// the configuration of the node it seeds.
    #[test]
    fn snapshot_verbs_take_their_files() {
        let cli = parse(&["snapshot", "save", "b.snapshot", "--stale", "--json"]).unwrap();
        assert!(matches!(
            cli.command,
            Commands::Snapshot {
                command: SnapshotCommand::Save {
                    stale: true,
                    client: ClientArgs { json: true, .. },
                    ..
                }
            }
        ));
        let cli = parse(&["snapshot", "status", "b.snapshot", "--json"]).unwrap();
        assert!(matches!(
            cli.command,
            Commands::Snapshot {
                command: SnapshotCommand::Status { json: true, .. }
            }
        ));
        let cli = parse(&["snapshot", "restore", "b.snapshot", "-c", "n.toml"]).unwrap();
        let Commands::Snapshot {
            command: SnapshotCommand::Restore { file, config },
        } = cli.command
        else {
            panic!("not a restore");
        };
        assert_eq!(
            (file, config),
            (PathBuf::from("b.snapshot"), PathBuf::from("n.toml"))
        );
        assert!(parse(&["snapshot", "restore", "b.snapshot"]).is_err());
        assert!(parse(&["snapshot", "save"]).is_err());
    }

    /// SESS-4: `lock` takes its command after `--`, whole (its options stay its own), and
    /// refuses a TTL the cluster would refuse.
    #[test]
    fn sess4_lock_takes_its_command_after_the_separator() {
        let cli = parse(&[
            "lock",
            "build",
            "--ttl",
            "2000",
            "--wait",
            "3",
            "--",
            "sh",
            "-c",
            "make --jobs 2",
        ])
        .unwrap();
        let Commands::Lock(lock) = cli.command else {
            panic!("not a lock");
        };
        assert_eq!(
            (lock.name.as_str(), lock.ttl, lock.wait),
            ("build", 2000, Some(3))
        );
        assert_eq!(lock.command, ["sh", "-c", "make --jobs 2"]);
        assert!(parse(&["lock", "build"]).is_err());
        assert!(parse(&["lock", "build", "--ttl", "100", "--", "true"]).is_err());
        let cli = parse(&["session", "grant", "--ttl", "5000", "--max-claims", "2"]).unwrap();
        assert!(matches!(
            cli.command,
            Commands::Session {
                command: SessionCommand::Grant {
                    ttl: 5000,
                    max_claims: Some(2),
                    ..
                },
                ..
            }
        ));
    }

    /// `demo --duration 0` would end before it began: a usage error.
    #[test]
    fn a_demo_lasts_at_least_a_second() {
        assert!(parse(&["demo", "--duration", "0"]).is_err());
        let cli = parse(&["demo", "--duration", "1"]).unwrap();
        assert!(matches!(
            cli.command,
            Commands::Demo {
                duration: Some(1),
                ..
            }
        ));
    }

    /// One size limit for a write, said the same way by `kv put --help`, `jobs add --help`,
    /// `conclave defaults` and the node's 413 answer (conclave-api's `WRITE_SIZE_LIMIT`).
    #[test]
    fn the_write_limit_is_said_one_way() {
        let flat = |text: &str| {
            text.replace('#', " ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        let limit = flat(conclave_api::WRITE_SIZE_LIMIT);
        let mut command = Cli::command();
        for path in [["kv", "put"], ["jobs", "add"]] {
            let verb = command
                .find_subcommand_mut(path[0])
                .and_then(|group| group.find_subcommand_mut(path[1]))
                .expect("the verb exists");
            let help = flat(&verb.render_long_help().to_string());
            assert!(help.contains(&limit), "{path:?}: {help}");
        }
        let defaults = flat(&conclave_config::settings::defaults_toml());
        assert!(defaults.contains(&limit["A ".len()..]), "{defaults}");
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for page in ["README.md", "docs/api.md", "docs/configuration.md"] {
            let text = flat(&std::fs::read_to_string(root.join(page)).unwrap_or_default());
            assert!(text.contains(&limit), "{page} does not say: {limit}");
        }
    }

    /// No requirement ids or design notes in what users read.
    #[test]
    fn help_names_features_not_requirement_ids() {
        let mut command = Cli::command();
        let mut texts = vec![command.render_long_help().to_string()];
        fn every_help(command: &mut clap::Command, texts: &mut Vec<String>) {
            for verb in command.get_subcommands_mut() {
                texts.push(verb.render_long_help().to_string());
                every_help(verb, texts);
            }
        }
        every_help(&mut command, &mut texts);
        for text in texts {
            assert!(!text.contains("seed 00"), "{text}");
            let id = text
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .find(|word| {
                    *word != "UTF-8"
                        && word.split_once('-').is_some_and(|(name, number)| {
                            (2..=5).contains(&name.len())
                                && name.chars().all(|c| c.is_ascii_uppercase())
                                && number.starts_with(|c: char| c.is_ascii_digit())
                        })
                });
            assert_eq!(id, None, "{text}");
        }
    }
}

/// `conclave demo --mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DemoMode {
    /// Raft: a majority of the voters elects the leader, term by term.
    Raft,
    /// Hyperledger Fabric's gossip election: the lowest id heard leads.
    Gossip,
    /// The ESP-NOW pods' priority election: the best score (battery, uptime, signal) leads.
    Priority,
}
