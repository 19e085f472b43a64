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
    /// Admin API of the node to talk to (client commands).
    #[arg(
        long,
        global = true,
        env = "CONCLAVE_ADMIN",
        default_value = "http://127.0.0.1:7070"
    )]
    pub(crate) admin: String,

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
    /// Reads the built-in defaults, then FILE, then environment variables named
    /// CONCLAVE__SECTION__KEY (for example CONCLAVE__NODE__ID=gw-b). Every configuration
    /// problem is printed with its key and the command exits with code 64.
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
        /// Configuration file (TOML).
        #[arg(long, short)]
        config: PathBuf,
        /// Log filter, as in RUST_LOG (for example `info` or `conclave_actors=debug`); given,
        /// it overrides `log.level` of the configuration at start.
        #[arg(long, env = "RUST_LOG")]
        log: Option<String>,
    },
    /// Run a whole cluster in this process, on virtual ESP-NOW dongles: no hardware, no
    /// configuration.
    ///
    /// N nodes (5 by default) each get a virtual ESP32 dongle behind a pseudo-terminal that
    /// the node opens like a real serial device; the dongles share one simulated air. Every
    /// node's admin API and metrics endpoint are printed at start. Without --duration, a live
    /// view shows every node and the recent events, and typed commands kill, revive and
    /// partition nodes (`kill 3`, `revive 3`, `partition 1,2 3,4,5`, `heal`, `quit`). With
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
    /// Switch automatic elections on or off.
    AutoElection {
        /// `on` or `off`.
        switch: Switch,
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

#[derive(Debug, Subcommand)]
pub(crate) enum LeaderCommand {
    /// Make PEER_ID the leader (connected mode: assign it; voters mode: transfer to it) and pin
    /// it until it is lost.
    Set {
        /// The node that is to lead.
        peer_id: String,
    },
    /// The leader hands leadership to the best peer, or steps down.
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
                switch: Switch::Off
            }
        ));
        let cli = Cli::parse_from(["conclave", "--admin", "http://10.0.0.2:7070", "status"]);
        assert_eq!(cli.admin, "http://10.0.0.2:7070");
        let cli = Cli::parse_from(["conclave", "completions", "zsh"]);
        assert!(matches!(
            cli.command,
            Commands::Completions {
                shell: clap_complete::Shell::Zsh
            }
        ));
    }
}
