//! `conclave`: the gateway binary.
//!
//! `conclave run [--config FILE]` loads and validates the configuration (printing every
//! problem with its key and exiting with the usage code 64 when there is any), starts the
//! node, and stops it gracefully on Ctrl-C or SIGTERM. `conclave check-config FILE` only
//! validates. The other commands talk to running nodes through their admin API (`--admin`,
//! default `http://127.0.0.1:7070`, or `host:port`) and print a table, or JSON with `--json`.
//!
//! Exit codes: 0 success; 1 the node or the API refused or failed, a change did not complete,
//! or the cluster disagrees; 64 bad usage or configuration; 69 the admin API cannot be
//! reached, or the node cannot have a port or file it needs; 70 the node halted on an
//! internal error.

mod cli;
mod client;
mod commands;
mod demo;
mod render;
mod run;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Commands};

/// sysexits' EX_USAGE: the command line or the configuration is wrong.
pub(crate) const EXIT_USAGE: u8 = 64;
/// sysexits' EX_UNAVAILABLE: the admin API does not answer.
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// sysexits' EX_SOFTWARE: the node stopped on an internal error.
pub(crate) const EXIT_SOFTWARE: u8 = 70;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Commands::Run { config, log } => run::run(config.as_deref(), &log),
        Commands::CheckConfig { file } => run::check_config(&file),
        Commands::Demo {
            nodes,
            duration,
            seed,
        } => demo::run(demo::DemoOptions {
            nodes,
            duration: duration.map(std::time::Duration::from_secs),
            seed,
        }),
        ref command => commands::run(&cli, command),
    }
}
