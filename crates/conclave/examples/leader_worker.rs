//! A worker that does its work only while its node leads, stamping each unit of work with the
//! fencing token so that whatever receives it can refuse a deposed leader's late work (CB-5).
//!
//! ```text
//! cargo run -p conclave --example leader_worker -- node-a.toml            # until stdin closes
//! cargo run -p conclave --example leader_worker -- node-a.toml --units 5  # 5 units, then stop
//! ```
//!
//! Start one per node of a cluster (e.g. with `config/examples/three-udp`, admin and metrics
//! set to "" or to ports of their own); stopping the leader's worker hands leadership over,
//! and another worker takes up the work.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use conclave::{Event, FencingToken, Node, NodeConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        return Err("usage: leader_worker CONFIG.toml [--units N]".into());
    };
    let units = match (args.next().as_deref(), args.next()) {
        (Some("--units"), Some(n)) => Some(n.parse()?),
        (None, _) => None,
        _ => return Err("usage: leader_worker CONFIG.toml [--units N]".into()),
    };
    let config = conclave::config::from_file(path)?;
    let quit = Arc::new(AtomicBool::new(false));
    if units.is_none() {
        let quit = Arc::clone(&quit);
        // Reading stdin to its end is the portable "until told to stop" without a signal crate.
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            quit.store(true, Ordering::SeqCst);
        });
    }
    run(config, units, &quit, &mut std::io::stdout())?;
    Ok(())
}

/// Runs the worker: waits to lead, does `units` units of work (for ever when `None`, until
/// `quit`), then stops the node, which hands leadership over.
pub(crate) fn run(
    config: NodeConfig,
    units: Option<u32>,
    quit: &AtomicBool,
    out: &mut impl Write,
) -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::start(config)?;
    let mut events = node.subscribe();
    let mut done = 0;
    while units.is_none_or(|units| done < units) && !quit.load(Ordering::SeqCst) {
        // Between units, the events say whether this node still leads; `leader()` is the
        // truth after a lag.
        match events.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::LeaderChanged(change)) if change.leader == Some(node.id()) => {
                writeln!(out, "leading in term {}", change.term)?;
            }
            Ok(Event::Lagged { missed }) => writeln!(out, "{missed} events missed")?,
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if let Some(token) = node.leader()?.filter(|token| token.leader == node.id()) {
            do_work(&token, done, out)?;
            done += 1;
        }
    }
    node.stop();
    writeln!(out, "stopped after {done} units; leadership handed over")?;
    Ok(())
}

/// One unit of the leader's work. A real worker sends `token` along with it (as `term:leader`)
/// and the receiver keeps the highest term it has seen, refusing anything older.
fn do_work(token: &FencingToken, unit: u32, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "unit {unit} under fencing token {token}")
}
