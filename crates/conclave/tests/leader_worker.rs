//! The `leader_worker` example as a user's program would run it (EMB-1): it starts its node,
//! becomes leader, gets its event, works under the fencing token, and stops with a hand-over
//! that its peer sees as a transfer to itself in a higher term.

#![allow(clippy::unwrap_used)]

mod support;

#[path = "../examples/leader_worker.rs"]
#[expect(
    dead_code,
    reason = "the example's main is for cargo run; the test calls run"
)]
mod leader_worker;

use std::sync::atomic::AtomicBool;

use conclave::{Event, LeaderChangeCause, Role};
use support::{free_udp_addrs, node_toml, others, start, test_log, wait_event};
use tempfile::TempDir;

/// EMB-1, CB-5: the example leads, works, and hands over when it stops.
#[test]
fn the_leader_worker_leads_works_and_hands_over() {
    let _log = test_log();
    let dir = TempDir::new().unwrap();
    let names = ["worker", "standby"];
    let addrs = free_udp_addrs(names.len());
    // The standby never campaigns by itself, so the worker's node is the one to lead; a
    // transfer still makes it campaign.
    let standby_toml = node_toml(
        names[1],
        dir.path(),
        &names,
        Some((&addrs[1], others(&addrs, 1))),
    )
    .replace(
        "[election.raft]",
        "[election]\nauto = false\n[election.raft]",
    );
    let standby = start(&standby_toml);
    let mut standby_events = standby.subscribe();
    let worker_config = conclave::config::from_toml_str(&node_toml(
        names[0],
        dir.path(),
        &names,
        Some((&addrs[0], others(&addrs, 0))),
    ))
    .unwrap();

    let mut out = Vec::new();
    leader_worker::run(worker_config, Some(3), &AtomicBool::new(false), &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("leading in term"), "{out}");
    assert!(out.contains("unit 2 under fencing token"), "{out}");
    assert!(
        out.ends_with("stopped after 3 units; leadership handed over\n"),
        "{out}"
    );

    let worker_term = wait_event(&mut standby_events, "the worker leading", |event| {
        let Event::LeaderChanged(change) = event else {
            return None;
        };
        (change.leader.is_some_and(|l| l.to_string() == "worker")).then_some(change.term)
    });
    let took_over = wait_event(&mut standby_events, "the standby taking over", |event| {
        let Event::LeaderChanged(change) = event else {
            return None;
        };
        (change.role == Role::Leader).then(|| change.clone())
    });
    assert_eq!(
        took_over.cause,
        LeaderChangeCause::Transfer,
        "{took_over:?}"
    );
    assert!(took_over.term > worker_term);
    assert!(standby.is_leader());
}
