//! A follower that stops and starts again rejoins its pod as a late joiner (PRI-4): it hears
//! the running master before it may campaign, and the master keeps its round, so its fencing
//! token (CB-5) does not change for a node that merely came back. Runs on the shared simulated
//! air (`priority_air`) with `config/examples/three-priority`'s settings (batteries 80, 100 and
//! 60; announce every 500 ms, master dead after 1.5 s), over several seeds.

#![allow(clippy::unwrap_used)]

mod priority_air;

use std::time::Duration;

use conclave_core::Instant;
use conclave_core::election::{Event, FencingToken};
use conclave_core::priority::PriorityConfig;
use priority_air::Air;

const SEEDS: u64 = 16;

/// The example's batteries: gw-a, gw-b, gw-c; gw-b (pod 1) leads.
const BATTERIES: [u8; 3] = [80, 100, 60];
const MASTER: usize = 1;

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn example_timings(_: usize, config: &mut PriorityConfig) {
    config.announce_interval = ms(500);
    config.master_timeout = ms(1500);
}

/// The example's three pods, settled on pod 1, and the master's token.
fn settled(seed: u64) -> (Air, FencingToken) {
    let mut air = Air::new(seed, &BATTERIES, example_timings);
    air.start_all();
    air.run_until_condition(Instant::from_millis(3000), |air| {
        air.agreed_master().is_some()
    })
    .unwrap_or_else(|| panic!("no master within 3 s\n{}", air.report()));
    assert_eq!(air.agreed_master(), Some(MASTER), "{}", air.report());
    // A few announcements, so every pod has its round durable.
    air.run_for(ms(2000));
    let token = air.pods[MASTER].node().fencing_token().unwrap();
    (air, token)
}

/// Stops `follower` (gracefully or by power loss), starts it again from its WAL after
/// `down`, and checks that it follows the same master with the same token, that it never
/// campaigned, and that no running pod saw a change of master or round.
fn rejoin(seed: u64, follower: usize, graceful: bool, down: Duration) {
    let (mut air, token) = settled(seed);
    if graceful {
        air.shutdown(follower);
    } else {
        air.crash(follower);
    }
    air.run_for(down);
    let seen: Vec<usize> = air.pods.iter().map(|pod| pod.events.len()).collect();
    let candidates_before = air.pods[follower].sent.get("candidate").copied();
    air.start(follower);
    air.run_until_condition(air.now + ms(1500), |air| {
        air.pods[follower].node().status().master_confirmed
    })
    .unwrap_or_else(|| panic!("the restarted pod found no master\n{}", air.report()));
    air.run_for(ms(5000));
    let context = format!(
        "seed {seed}, pod-{follower} {}\n{}",
        if graceful { "stopped" } else { "crashed" },
        air.report()
    );
    assert_eq!(air.agreed_master(), Some(MASTER), "{context}");
    assert_eq!(
        air.pods[MASTER].node().fencing_token(),
        Some(token),
        "the master's token moved: {context}"
    );
    assert_eq!(
        air.pods[follower].node().fencing_token(),
        Some(token),
        "{context}"
    );
    assert_eq!(
        air.pods[follower].sent.get("candidate").copied(),
        candidates_before,
        "the restarted pod campaigned: {context}"
    );
    for (index, pod) in air.pods.iter().enumerate() {
        if index == follower {
            continue;
        }
        let changes: Vec<&Event> = pod.events[seen[index]..]
            .iter()
            .map(|(_, event)| event)
            .filter(|event| matches!(event, Event::LeaderChanged { .. }))
            .collect();
        assert!(changes.is_empty(), "pod-{index} saw {changes:?}: {context}");
    }
}

/// The case: a follower stopped with SIGTERM (a graceful stop) and started again.
#[test]
fn stopped_follower_rejoins_without_moving_the_master_round() {
    for seed in 0..SEEDS {
        for follower in [0, 2] {
            rejoin(seed, follower, true, ms(1000));
        }
    }
}

/// The same after a power loss, and after being down longer than the master timeout.
#[test]
fn crashed_follower_rejoins_without_moving_the_master_round() {
    for seed in 0..SEEDS {
        for down in [ms(200), ms(4000)] {
            rejoin(seed, 2, false, down);
        }
    }
}
