//! `conclave run` and `conclave check-config`: load, validate, start, stop.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use conclave_actors::config::NodeConfig;
use conclave_actors::node::{NodeBuilder, NodeError};
use conclave_actors::settings::Settings;
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

use crate::{EXIT_SOFTWARE, EXIT_UNAVAILABLE, EXIT_USAGE};

/// Loads and validates `file` (the built-in defaults alone when `None`), printing every
/// problem; the exit code on failure.
fn load(file: Option<&Path>) -> Result<NodeConfig, ExitCode> {
    let settings = Settings::load(file).map_err(|err| {
        eprintln!("error: {err}");
        ExitCode::from(EXIT_USAGE)
    })?;
    settings.validate().map_err(|problems| {
        eprintln!(
            "{}: {} configuration problem{}:",
            file.map_or_else(
                || "built-in defaults".to_owned(),
                |file| file.display().to_string()
            ),
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        for problem in problems {
            eprintln!("  {problem}");
        }
        ExitCode::from(EXIT_USAGE)
    })
}

/// `conclave check-config FILE`.
pub(crate) fn check_config(file: &Path) -> ExitCode {
    match load(Some(file)) {
        Ok(config) => {
            println!("{}: ok", file.display());
            println!("  node {} in cluster {}", config.node_id, config.cluster_id);
            println!(
                "  voters {}",
                config
                    .election
                    .voters
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if let Some(udp) = &config.udp {
                println!("  udp {} (peers: {})", udp.listen, udp.peers.len());
            }
            match config.admin.listen {
                Some(listen) => println!(
                    "  admin http://{listen} (at most {} connections, {} event streams)",
                    config.admin.max_connections, config.admin.max_event_streams
                ),
                None => println!("  admin off"),
            }
            for (peer, url) in &config.admin.peer_urls {
                println!("  admin of {peer}: {url}");
            }
            match config.metrics.listen {
                Some(listen) => println!("  metrics http://{listen}/metrics"),
                None => println!("  metrics off"),
            }
            if config.auth_key.is_none() {
                println!("  warning: no cluster.psk_file, frames are not authenticated");
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `conclave run [--config FILE]`.
pub(crate) fn run(file: Option<&Path>, log: &str) -> ExitCode {
    let filter = match EnvFilter::try_new(log) {
        Ok(filter) => filter,
        Err(err) => {
            eprintln!("error: --log {log:?}: {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(crate::render::colour(&std::io::stderr()))
        .init();
    if file.is_none() {
        info!("no --config: running on the built-in defaults (config/default.toml)");
    }
    // Before any socket: the admin API's bounds are fitted to the limit this leaves.
    conclave_actors::admin::log_open_files_limit(&conclave_actors::admin::raise_open_files_limit());
    let config = match load(file) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let system = actix_rt::System::new();
    system.block_on(async move {
        let admin = config.admin.listen;
        let metrics = config.metrics.listen;
        let node = match NodeBuilder::new(config).start().await {
            Ok(node) => node,
            Err(err) => {
                error!("cannot start: {err}");
                return ExitCode::from(start_failure_code(&err));
            }
        };
        if let Some(admin) = admin {
            info!("admin API on http://{admin}");
        }
        if let Some(metrics) = metrics {
            info!("metrics on http://{metrics}/metrics");
        }
        let halted = wait_for_stop(&node).await;
        node.stop().await;
        if halted {
            ExitCode::from(EXIT_SOFTWARE)
        } else {
            info!("stopped");
            ExitCode::SUCCESS
        }
    })
}

/// The exit code of a node that could not start: 69 (EX_UNAVAILABLE) when something it needs
/// is taken or missing (a port another process holds), 70 (EX_SOFTWARE) otherwise.
fn start_failure_code(err: &NodeError) -> u8 {
    match err {
        NodeError::Bind { .. } => EXIT_UNAVAILABLE,
        _ => EXIT_SOFTWARE,
    }
}

/// Waits for Ctrl-C, SIGTERM, or the node halting; `true` when it halted.
async fn wait_for_stop(node: &conclave_actors::node::Node) -> bool {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => Some(signal),
            Err(err) => {
                error!("cannot watch SIGTERM: {err}");
                None
            }
        };
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {
                info!("interrupted; stopping");
                return false;
            }
            _ = async {
                match terminate.as_mut() {
                    Some(signal) => { signal.recv().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {
                info!("terminated; stopping");
                return false;
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                if !node.handle().is_running() {
                    error!("the node halted");
                    return true;
                }
            }
        }
    }
}
