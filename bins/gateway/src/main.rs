//! `conclave`: the gateway binary.
//!
//! `conclave run [--config FILE]` loads and validates the configuration (printing every
//! problem with its key and exiting with the usage code 64 when there is any), starts the
//! node, and stops it gracefully on SIGTERM, Ctrl-C and every other terminating signal;
//! SIGHUP reloads (see `run`). `conclave check-config FILE` only validates. `conclave
//! completions SHELL` and `conclave man` print a completion script and the manual page
//! generated from these clap definitions. The other commands talk to running nodes through
//! their admin API (`--admin`, default `http://127.0.0.1:7070`, or `host:port`) and print a
//! table, or JSON with `--json`: options these commands declare, refused by the others
//! (`cli::ClientArgs`). `conclave dongle check PORT` talks to an ESP32 dongle directly.
//!
//! Every usage error exits 64, clap's own (an unknown option, a missing argument, a bad
//! value) as the commands' own; `--help` and `--version` print and exit 0.
//!
//! `conclave wal inspect|repair DIR` work on a node's WAL file directly (see `wal.rs`);
//! `conclave snapshot save|status|restore` back up and restore the replicated log's state
//! (see `snapshot.rs`).
//!
//! Exit codes: [`EXIT_STATUSES`], the table `conclave man` prints under EXIT STATUS (sysexits.h
//! codes, so that a service manager can tell a problem restarting cures from one it cannot).

mod cli;
mod client;
mod client_tls;
mod cluster_members;
mod commands;
mod demo;
mod dongle;
mod event_stream;
mod generated;
mod init;
mod input;
mod lock;
mod log_client;
mod logging;
mod member_client;
mod notify;
mod output;
mod preflight;
mod reload;
mod render;
mod run;
mod session_client;
mod snapshot;
mod wal;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Commands, DongleCommand, SnapshotCommand, WalCommand};
use crate::output::errln;

/// Every exit code of the binary and what it means, as `conclave man` documents them.
pub(crate) const EXIT_STATUSES: &[(&str, &str)] = &[
    (
        "0",
        "Success. For run, a graceful stop (after any terminating signal).",
    ),
    (
        "1",
        "The node or the admin API refused or failed, a change did not complete, or the \
         cluster disagrees; demo --duration: the live nodes do not agree on a leader; wal \
         inspect: a node cannot start from the file; init: the data directory was used by a \
         node before; snapshot status, save, restore: the file is not a whole saved snapshot \
         (the problem is named); snapshot restore: the data directory is not empty.",
    ),
    (
        "64",
        "EX_USAGE: bad usage or configuration: an unknown command or option, a missing or bad \
         argument, an option the command does not take (the client options --admin, \
         --endpoints, --timeout, --token and --json belong to the commands that talk to a \
         node); kv put, jobs add: a value read from a file or standard input that is not \
         UTF-8 text. check-config exits 64 on any problem, those it finds in node.data_dir \
         included; run, also when the data directory holds a WAL of another election.mode. \
         Restarting does not help.",
    ),
    (
        "65",
        "EX_DATAERR: run: the WAL or the replicated log is damaged (a bad record followed by \
         valid ones, a damaged snapshot, a missing segment) or is not conclave's. The node does \
         not start until an operator inspects and repairs it (conclave wal inspect, conclave \
         wal repair); a service manager must not restart it.",
    ),
    (
        "66",
        "EX_NOINPUT: an input file cannot be read: wal inspect, wal repair: no such file or \
         directory, or no WAL in it; kv put, jobs add: the @FILE (or standard input, for -) \
         of the value; snapshot status, restore: the snapshot file.",
    ),
    (
        "69",
        "EX_UNAVAILABLE: the admin API cannot be reached; run: a port or the data directory is \
         held by another process; dongle check: the port cannot be opened or nothing answers.",
    ),
    (
        "70",
        "EX_SOFTWARE: the node halted on an internal error, or after it started (a WAL write or \
         fsync that failed, for example on a full disk: it takes no more writes and stops).",
    ),
    (
        "73",
        "EX_CANTCREAT: run, init, snapshot restore: the data directory or a file in it cannot \
         be created or written (a read-only or full file system, a file where a directory \
         should be); snapshot save: the file cannot be written.",
    ),
    ("74", "EX_IOERR: standard output could not be written."),
    (
        "75",
        "EX_TEMPFAIL: kv, jobs, session, lock, snapshot save: the cluster could not answer in time (no leader \
         known, or the write's outcome is not known yet). Run the command again: a write \
         carries its request id, so it is applied at most once.",
    ),
    (
        "77",
        "EX_NOPERM: run, init, snapshot restore: this user has no permission to create or \
         write the data directory or its files; snapshot save: nor the file.",
    ),
    (
        "124",
        "lock: --wait ran out while another held the lock; the command did not run.",
    ),
    (
        "125",
        "lock: the lock was lost while the command ran (its session ended, or no keepalive \
         reached the leader for a whole TTL); the command was sent SIGTERM.",
    ),
    (
        "126, 127",
        "lock: the command could not be run (126), or was not found (127). Otherwise lock \
         exits with the command's own exit code.",
    ),
    (
        "128+N",
        "A second terminating signal N during a graceful stop (run), or signal N ending demo \
         --duration before its verdict (after a graceful stop); lock: signal N ended the \
         command, or came before it ran.",
    ),
];

/// sysexits' EX_USAGE: the command line or the configuration is wrong.
pub(crate) const EXIT_USAGE: u8 = 64;
/// sysexits' EX_NOINPUT: an input file (a WAL, a value's @FILE) cannot be read.
pub(crate) const EXIT_NOINPUT: u8 = 66;
/// sysexits' EX_UNAVAILABLE: the admin API does not answer.
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// sysexits' EX_TEMPFAIL: the cluster could not answer a `kv` or `jobs` command in time.
pub(crate) const EXIT_TEMPFAIL: u8 = 75;
/// sysexits' EX_SOFTWARE: the node stopped on an internal error.
pub(crate) const EXIT_SOFTWARE: u8 = 70;
/// sysexits' EX_DATAERR: the WAL or the replicated log is damaged (or not conclave's);
/// restarting cannot help.
pub(crate) const EXIT_DATAERR: u8 = 65;
/// sysexits' EX_CANTCREAT: the data directory or a file in it cannot be created or written.
pub(crate) const EXIT_CANTCREAT: u8 = 73;
/// sysexits' EX_NOPERM: this user may not write the data directory.
pub(crate) const EXIT_NOPERM: u8 = 77;

fn main() -> ExitCode {
    let args = cli::client_options_after_the_verb(std::env::args_os());
    let code = match Cli::try_parse_from(args) {
        Ok(cli) => command(cli),
        Err(err) => usage_error(&err),
    };
    output::exit_code(code)
}

/// Prints clap's message: `--help` and `--version` to standard output, exit 0; a usage
/// error to standard error, exit 64 (clap's own code, 2, is not the one documented).
fn usage_error(err: &clap::Error) -> ExitCode {
    // A reader gone away (`conclave --help | head -1`) is no failure of the command.
    let _ = err.print();
    if err.use_stderr() {
        ExitCode::from(EXIT_USAGE)
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs the verb; its exit code.
fn command(cli: Cli) -> ExitCode {
    match cli.command {
        Commands::Run { config, log } => run::run(config.as_deref(), log.as_deref()),
        Commands::Completions { shell } => generated::completions(shell),
        Commands::Man => generated::man(),
        Commands::CheckConfig {
            file,
            config,
            file_only,
        } => match file.or(config) {
            Some(file) => run::check_config(&file, !file_only),
            // clap requires one of the two.
            None => {
                errln!("error: check-config needs the configuration file: FILE or --config FILE");
                ExitCode::from(EXIT_USAGE)
            }
        },
        Commands::Init {
            config,
            join,
            token,
            udp,
            admin_url,
            timeout,
            tls,
        } => {
            let join = join.map(|url| init::Join {
                url,
                token,
                udp,
                admin_url,
                timeout,
                tls,
            });
            init::init(config.as_deref(), join.as_ref())
        }
        Commands::Defaults => {
            output::out!("{}", conclave_config::settings::defaults_toml());
            ExitCode::SUCCESS
        }
        Commands::Kv { client, command } => log_client::kv(&client, &command),
        Commands::Jobs { client, command } => log_client::jobs(&client, &command),
        Commands::Member { client, command } => member_client::member(&client, &command),
        Commands::Session { client, command } => session_client::session(&client, &command),
        Commands::Lock(lock) => lock::lock(&lock),
        Commands::Wal {
            json,
            command: WalCommand::Inspect { dir },
        } => wal::inspect_command(&dir, json),
        Commands::Snapshot { command } => match command {
            SnapshotCommand::Save {
                file,
                stale,
                client,
            } => snapshot::save(&client, &file, stale),
            SnapshotCommand::Status { file, json } => snapshot::status(&file, json),
            SnapshotCommand::Restore { file, config } => snapshot::restore(&file, &config),
        },
        Commands::Wal {
            json,
            command: WalCommand::Repair { dir, confirm },
        } => wal::repair_command(&dir, confirm, json),
        Commands::Demo {
            nodes,
            duration,
            seed,
            mode,
            log,
            air_kbps,
        } => demo::run(demo::DemoOptions {
            nodes,
            duration: duration.map(std::time::Duration::from_secs),
            seed,
            log,
            air_bit_rate: air_kbps
                .and_then(|kbps| std::num::NonZeroU32::new(kbps.saturating_mul(1000))),
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
        command => commands::run(&command),
    }
}
