//! The command line (clap).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// conclave: a leader-election gateway.
///
/// A group of conclave nodes, over UDP (and ESP-NOW radio through a USB dongle), agree on
/// exactly one leader, notice within moments when it dies and elect another, and tell the
/// world through hook commands, an admin API, an event stream and Prometheus metrics.
#[derive(Debug, Parser)]
#[command(name = "conclave", version, about, long_about)]
pub(crate) struct Cli {
    /// Admin API of the node to talk to (client commands): http://host:port or host:port.
    #[arg(
        long,
        global = true,
        env = "CONCLAVE_ADMIN",
        default_value = "http://127.0.0.1:7070"
    )]
    pub(crate) admin: String,

    /// Admin APIs of every node, comma-separated, for `cluster status` and
    /// `auto-election --cluster`. By default they are learned from the node at --admin (its
    /// admin.peer_urls).
    #[arg(
        long,
        global = true,
        env = "CONCLAVE_ENDPOINTS",
        value_delimiter = ',',
        num_args = 1..
    )]
    pub(crate) endpoints: Vec<String>,

    /// Seconds a client command waits for each node's answer.
    #[arg(long, global = true, default_value_t = 5, value_name = "SECS")]
    pub(crate) timeout: u64,

    /// Bearer token for commands that change something, when the node requires one.
    #[arg(
        long,
        global = true,
        env = "CONCLAVE_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub(crate) token: Option<String>,

    /// Print the API's JSON answer instead of a table (client commands).
    #[arg(long, global = true)]
    pub(crate) json: bool,

    #[command(subcommand)]
    pub(crate) command: Commands,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Commands {
    /// Run a node.
    ///
    /// Reads the built-in defaults, then FILE (when given), then environment variables named
    /// CONCLAVE__SECTION__KEY (for example CONCLAVE__NODE__ID=gw-b). Without --config the
    /// defaults make a single node on loopback. Every configuration problem is printed with
    /// its key and the command exits with code 64; a port or file the node cannot have ends
    /// it with 69, an internal failure with 70. Ctrl-C or SIGTERM stops the node gracefully:
    /// its peers are told it is leaving.
    Run {
        /// Configuration file (TOML); the built-in defaults when absent.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Log filter, as in RUST_LOG (for example `info` or `conclave_actors=debug`).
        #[arg(long, env = "RUST_LOG", default_value = "info")]
        log: String,
    },
    /// Run a whole cluster in this process, on virtual ESP-NOW dongles: no hardware, no
    /// configuration.
    ///
    /// N nodes (5 by default) each get a virtual ESP32 dongle behind a pseudo-terminal that
    /// the node opens like a real serial device; the dongles share one simulated air. Every
    /// node's admin API and metrics endpoint are printed at start. Without --duration, a live
    /// view shows every node and the recent events, and typed commands kill, revive and
    /// partition nodes (`kill 3`, `kill 1,2`, `kill leader`, `revive 3`, `partition 1,2 3,4,5`,
    /// `heal`, `quit`). Colour only on a terminal, never with NO_COLOR set. With
    /// --duration it runs unattended, prints one line per event, kills the leader once halfway,
    /// and exits 0 only if every live node knows the same leader at the end.
    Demo {
        /// How many nodes.
        #[arg(long, default_value_t = 5)]
        nodes: usize,
        /// Run unattended for this many seconds and report, instead of the live view.
        #[arg(long)]
        duration: Option<u64>,
        /// Seed of the simulated air (random by default).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Check a configuration file and print every problem with its key.
    CheckConfig {
        /// Configuration file (TOML).
        file: PathBuf,
    },
    /// Role, term, leader, fencing token, quorum and peers of the node.
    Status,
    /// The node's peer table: status, round-trip time, last seen.
    Peers,
    /// The leadership history: every leader change with its cause and time.
    History,
    /// Choose the leader, or make the leader step down.
    Leader {
        #[command(subcommand)]
        command: LeaderCommand,
    },
    /// Switch automatic elections on or off, on one node or on every voter.
    ///
    /// The switch is per node (seed 000's EnableAutoLeaderElection): with it off on one node
    /// only, the others still elect. --cluster applies it on every voter, reports each, and
    /// exits 1 unless every voter applied it.
    AutoElection {
        /// `on` or `off`.
        switch: Switch,
        /// Apply it on every voter (see --endpoints), not only the node at --admin.
        #[arg(long)]
        cluster: bool,
    },
    /// The whole cluster at a glance.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ClusterCommand {
    /// One line per node, from each node's own admin API: role, term, leader, automatic
    /// election, readiness. Flags disagreement (two leaders, different terms or leaders, a
    /// node that does not answer) and exits 1 when there is any.
    Status,
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
    Resign,
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

    #[test]
    fn parses_the_verbs() {
        let cli = Cli::parse_from(["conclave", "--json", "leader", "set", "gw-b"]);
        assert!(cli.json);
        assert!(matches!(
            cli.command,
            Commands::Leader {
                command: LeaderCommand::Set { .. }
            }
        ));
        let cli = Cli::parse_from(["conclave", "auto-election", "off"]);
        assert!(matches!(
            cli.command,
            Commands::AutoElection {
                switch: Switch::Off,
                cluster: false
            }
        ));
        let cli = Cli::parse_from(["conclave", "auto-election", "off", "--cluster"]);
        assert!(matches!(
            cli.command,
            Commands::AutoElection { cluster: true, .. }
        ));
        let cli = Cli::parse_from([
            "conclave",
            "cluster",
            "status",
            "--endpoints",
            "10.0.0.1:7070,10.0.0.2:7070",
        ]);
        assert_eq!(cli.endpoints, ["10.0.0.1:7070", "10.0.0.2:7070"]);
        let cli = Cli::parse_from(["conclave", "run"]);
        assert!(matches!(cli.command, Commands::Run { config: None, .. }));
        let cli = Cli::parse_from(["conclave", "--admin", "http://10.0.0.2:7070", "status"]);
        assert_eq!(cli.admin, "http://10.0.0.2:7070");
    }
}
