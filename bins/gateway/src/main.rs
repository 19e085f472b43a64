//! `conclave`: the gateway binary.
//!
//! `conclave run --config FILE` loads and validates the configuration (printing every problem
//! with its key and exiting with the usage code 64 when there is any), starts the node, and
//! stops it gracefully on SIGTERM, Ctrl-C and every other terminating signal; SIGHUP reloads
//! (see `run`). `conclave check-config FILE` only validates. `conclave completions SHELL`
//! and `conclave man` print a completion script and the manual page generated from these
//! clap definitions.
//! The other commands talk to a running node through its admin API (`--admin`, default
//! `http://127.0.0.1:7070`) and print a table, or JSON with `--json`.
//!
//! Exit codes: 0 success; 1 the node or the API refused or failed; 64 bad usage or
//! configuration; 69 the admin API cannot be reached; 70 the node halted on an internal error.

mod cli;
mod client;
mod demo;
mod generated;
mod logging;
mod notify;
mod reload;
mod render;
mod run;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Commands, LeaderCommand, Switch};
use crate::client::{AdminClient, ClientError};

/// sysexits' EX_USAGE: the command line or the configuration is wrong.
pub(crate) const EXIT_USAGE: u8 = 64;
/// sysexits' EX_UNAVAILABLE: the admin API does not answer.
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// sysexits' EX_SOFTWARE: the node stopped on an internal error.
pub(crate) const EXIT_SOFTWARE: u8 = 70;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Commands::Run { config, log } => run::run(&config, log.as_deref()),
        Commands::Completions { shell } => generated::completions(shell),
        Commands::Man => generated::man(),
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
        ref command => {
            let client = AdminClient::new(&cli.admin, cli.token.clone());
            match client_command(&client, command, cli.json) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("error: {err}");
                    ExitCode::from(match err {
                        ClientError::Unreachable { .. } => EXIT_UNAVAILABLE,
                        _ => 1,
                    })
                }
            }
        }
    }
}

fn client_command(client: &AdminClient, command: &Commands, json: bool) -> Result<(), ClientError> {
    let answer = match command {
        Commands::Status => client.get("/v1/status")?,
        Commands::Peers => client.get("/v1/peers")?,
        Commands::History => client.get("/v1/history")?,
        Commands::Leader {
            command: LeaderCommand::Set { peer_id },
        } => client.post("/v1/leader", &serde_json::json!({ "peer_id": peer_id }))?,
        Commands::Leader {
            command: LeaderCommand::Resign,
        } => client.post("/v1/leader/resign", &serde_json::json!({}))?,
        Commands::AutoElection { switch } => client.post(
            "/v1/auto-election",
            &serde_json::json!({ "enabled": *switch == Switch::On }),
        )?,
        Commands::Run { .. }
        | Commands::CheckConfig { .. }
        | Commands::Demo { .. }
        | Commands::Completions { .. }
        | Commands::Man => {
            return Ok(());
        }
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&answer).unwrap_or_else(|_| answer.to_string())
        );
        return Ok(());
    }
    let text = match command {
        Commands::Status => render::status(&answer),
        Commands::Peers => render::peers(answer.get("peers").unwrap_or(&answer)),
        Commands::History => render::history(&answer),
        _ => render::outcome(&answer),
    };
    print!("{text}");
    Ok(())
}
