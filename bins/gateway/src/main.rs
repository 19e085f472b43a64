//! `conclave`: the gateway binary.
//!
//! `conclave run [--config FILE]` loads and validates the configuration (printing every
//! problem with its key and exiting with the usage code 64 when there is any), starts the
//! node, and stops it gracefully on SIGTERM, Ctrl-C and every other terminating signal;
//! SIGHUP reloads (see `run`). `conclave check-config FILE` only validates. `conclave
//! completions SHELL` and `conclave man` print a completion script and the manual page
//! generated from these clap definitions. The other commands talk to running nodes through
//! their admin API (`--admin`, default `http://127.0.0.1:7070`, or `host:port`) and print a
//! table, or JSON with `--json`. `conclave dongle check PORT` talks to an ESP32 dongle
//! directly.
//!
//! `conclave wal inspect|repair DIR` work on a node's WAL file directly (see `wal.rs`).
//!
//! Exit codes: 0 success; 1 the node or the API refused or failed, a change did not complete,
//! or the cluster disagrees; 64 bad usage or configuration; 69 the admin API cannot be
//! reached, or the node cannot have a port or file it needs; 70 the node halted on an
//! internal error; 74 standard output could not be written (a reader that closed the pipe,
//! as `| head` does, is not an error: the rest of the output is dropped, see `output.rs`).

mod cli;
mod client;
mod commands;
mod demo;
mod dongle;
mod generated;
mod init;
mod logging;
mod notify;
mod output;
mod reload;
mod render;
mod run;
mod wal;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Commands, DongleCommand, WalCommand};

/// sysexits' EX_USAGE: the command line or the configuration is wrong.
pub(crate) const EXIT_USAGE: u8 = 64;
/// sysexits' EX_UNAVAILABLE: the admin API does not answer.
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// sysexits' EX_SOFTWARE: the node stopped on an internal error.
pub(crate) const EXIT_SOFTWARE: u8 = 70;

fn main() -> ExitCode {
    let code = command(Cli::parse());
    output::exit_code(code)
}

/// Runs the verb; its exit code.
fn command(cli: Cli) -> ExitCode {
    match cli.command {
        Commands::Run { config, log } => run::run(config.as_deref(), log.as_deref()),
        Commands::Completions { shell } => generated::completions(shell),
        Commands::Man => generated::man(),
        Commands::CheckConfig { file } => run::check_config(&file),
        Commands::Init { config } => init::init(config.as_deref()),
        Commands::Defaults => {
            output::out!("{}", conclave_config::settings::defaults_toml());
            ExitCode::SUCCESS
        }
        Commands::Wal {
            command: WalCommand::Inspect { dir },
        } => wal::inspect_command(&dir, cli.json),
        Commands::Wal {
            command: WalCommand::Repair { dir, confirm },
        } => wal::repair_command(&dir, confirm, cli.json),
        Commands::Demo {
            nodes,
            duration,
            seed,
            mode,
        } => demo::run(demo::DemoOptions {
            nodes,
            duration: duration.map(std::time::Duration::from_secs),
            seed,
            mode: match mode {
                cli::DemoMode::Raft => conclave_core::election::Mode::Raft,
                cli::DemoMode::Gossip => conclave_core::election::Mode::Gossip,
                cli::DemoMode::Priority => conclave_core::election::Mode::Priority,
            },
        }),
        Commands::Dongle {
            command: DongleCommand::Check { port, baud, stats },
        } => dongle::check(&dongle::CheckOptions {
            port,
            baud,
            stats: std::time::Duration::from_secs(stats),
        }),
        ref command => commands::run(&cli, command),
    }
}
