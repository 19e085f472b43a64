//! Seed 002's verification checklist, one test per row, at core level on a shared simulated
//! air (`priority_air`): pods running [`Priority`](conclave_core::priority::Priority) with
//! the seed's default timings, virtual time and a 2 ms radio. Each row runs over several seeds
//! (start jitter, random score byte). Also the seed's testing hooks (resign and status over
//! the serial console) and fencing across a failover (CB-5).
//!
//! | Test case (seed 002)            | Expected result                             | test |
//! |---------------------------------|---------------------------------------------|------|
//! | Single pod boots                | Becomes master after discovery timeout      | `single_pod_boots_master_after_discovery_timeout` |
//! | Two pods boot simultaneously    | Higher priority becomes master              | `two_pods_boot_simultaneously_higher_priority_is_master` |
//! | Pod joins existing network      | Becomes follower, knows master              | `pod_joins_existing_network_follower_knows_master` |
//! | Master battery drops to 15%     | Master resigns, new election                | `master_battery_drops_to_15_percent_resigns_new_election` |
//! | Master loses power suddenly     | Followers detect timeout, elect new         | `master_loses_power_followers_detect_timeout_elect_new` |
//! | Network partition heals         | Lower priority master yields                | `network_partition_heals_lower_priority_master_yields` |
//! | Force master via NVS            | Pod becomes master regardless of priority   | `force_master_via_config_regardless_of_priority` |
//! | Force master via BLE            | Pod becomes master immediately              | `force_master_via_command_immediately` |

#![allow(clippy::unwrap_used)]

mod priority_air;

use std::time::Duration;

use conclave_core::Instant;
use conclave_core::election::{Command, CommandOutcome, Event, LeaderChangeCause};
use conclave_core::priority::{PriorityConfig, PriorityState};
use priority_air::Air;

const SEEDS: u64 = 16;

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn defaults() -> PriorityConfig {
    PriorityConfig::new(conclave_protocol::PeerId::new("x").unwrap())
}

/// Boots pods with these batteries at time 0 and waits until they agree on a master.
fn settled(seed: u64, batteries: &[u8]) -> (Air, usize) {
    let mut air = Air::new(seed, batteries, |_, _| {});
    air.start_all();
    let deadline = air.now + ms(3000);
    air.run_until_condition(deadline, |air| air.agreed_master().is_some())
        .unwrap_or_else(|| panic!("no master within 3 s\n{}", air.report()));
    let master = air.agreed_master().unwrap();
    (air, master)
}

/// The pods that are up, except `skip`.
fn others(air: &Air, skip: usize) -> Vec<usize> {
    (0..air.pods.len())
        .filter(|&i| i != skip && air.pods[i].is_up())
        .collect()
}

/// Single pod boots → becomes master after the discovery timeout (PRI-4): not before the
/// 500 ms discovery, and within it plus the start and discovery jitter.
#[test]
fn single_pod_boots_master_after_discovery_timeout() {
    for seed in 0..SEEDS {
        let mut air = Air::new(seed, &[70], |_, _| {});
        air.start_all();
        let elected = air
            .run_until_condition(Instant::from_millis(2000), |air| !air.masters().is_empty())
            .unwrap_or_else(|| panic!("no master\n{}", air.report()));
        assert!(
            elected >= Instant::from_millis(500) && elected < Instant::from_millis(700),
            "seed {seed}: master at {elected:?}"
        );
        let pod = &air.pods[0];
        assert_eq!(pod.node().state(), PriorityState::Master);
        assert_eq!(pod.sent.get("candidate"), None, "nobody to campaign to");
        assert_eq!(
            pod.leader_changes(),
            vec![(elected, 2, Some(pod.id), LeaderChangeCause::VoteWon)]
        );
        // It keeps announcing, so pods that appear later find it.
        air.run_for(ms(3000));
        assert!(pod_announces(&air, 0) >= 4);
    }
}

fn pod_announces(air: &Air, index: usize) -> usize {
    air.pods[index]
        .sent
        .get("master_announce")
        .copied()
        .unwrap_or(0)
}

/// Two pods boot simultaneously → the higher priority becomes master (PRI-2), once: neither
/// pod ever publishes another master.
#[test]
fn two_pods_boot_simultaneously_higher_priority_is_master() {
    for seed in 0..SEEDS {
        for batteries in [[60, 90], [90, 60]] {
            let higher = if batteries[0] > batteries[1] { 0 } else { 1 };
            let (mut air, master) = settled(seed, &batteries);
            assert_eq!(
                master,
                higher,
                "seed {seed} {batteries:?}\n{}",
                air.report()
            );
            air.run_for(ms(10_000));
            assert_eq!(air.agreed_master(), Some(higher));
            for pod in &air.pods {
                let masters: Vec<_> = pod
                    .leader_changes()
                    .into_iter()
                    .map(|(_, _, leader, _)| leader)
                    .collect();
                assert_eq!(
                    masters,
                    vec![Some(air.pods[higher].id)],
                    "seed {seed}: {} flapped\n{}",
                    pod.id,
                    air.report()
                );
            }
        }
    }
}

/// PRI-1 inside the same row: with equal batteries and uptimes, the pod that hears the others
/// best (inverted mean RSSI) becomes master.
#[test]
fn two_pods_boot_simultaneously_equal_battery_better_signal_wins() {
    for seed in 0..SEEDS {
        let mut air = Air::new(seed, &[80, 80, 80], |_, _| {});
        // Pod 2 sits between the others: it hears both at −35 dBm; they hear each other badly.
        air.set_rssi(0, 1, -90.0);
        air.set_rssi(0, 2, -35.0);
        air.set_rssi(1, 2, -35.0);
        air.start_all();
        air.run_until_condition(Instant::from_millis(3000), |air| {
            air.agreed_master().is_some()
        });
        assert_eq!(air.agreed_master(), Some(2), "{}", air.report());
        assert_eq!(air.pods[2].node().status().signal, 220);
    }
}

/// Pod joins existing network → becomes follower, knows master (PRI-4): even with a higher
/// score than the master, it follows at its first `DiscoverAck` without campaigning, and
/// nobody else notices a change.
#[test]
fn pod_joins_existing_network_follower_knows_master() {
    for seed in 0..SEEDS {
        // Pods 0-2 settle; pod 3, with the best battery, joins at 5 s.
        let mut air = Air::new(seed, &[90, 70, 50, 100], |_, _| {});
        for i in 0..3 {
            air.start(i);
        }
        air.run_until(Instant::from_millis(5000));
        assert_eq!(air.agreed_master(), Some(0), "{}", air.report());
        let before: Vec<usize> = air.pods.iter().map(|p| p.events.len()).collect();
        air.start(3);
        let joined = air
            .run_until_condition(Instant::from_millis(5300), |air| {
                air.pods[3].node().leader().is_some()
            })
            .unwrap_or_else(|| panic!("the joiner found no master\n{}", air.report()));
        assert!(joined < Instant::from_millis(5200), "{joined:?}");
        air.run_for(ms(5000));
        assert_eq!(air.agreed_master(), Some(0), "{}", air.report());
        let joiner = &air.pods[3];
        assert!(joiner.node().status().master_confirmed);
        assert_eq!(joiner.sent.get("candidate"), None, "no election");
        assert_eq!(
            joiner.node().fencing_token(),
            air.pods[0].node().fencing_token()
        );
        for (i, (pod, &seen)) in air.pods.iter().zip(&before).take(3).enumerate() {
            let new_changes = pod.events[seen..]
                .iter()
                .filter(|(_, e)| matches!(e, Event::LeaderChanged { .. }))
                .count();
            assert_eq!(new_changes, 0, "pod-{i} saw a change\n{}", air.report());
        }
    }
}

/// Master battery drops to 15% → master resigns, new election (PRI-5): it names the best
/// successor, which is master at once; the others start a new election that its first
/// announcement ends; the drained pod does not come back.
#[test]
fn master_battery_drops_to_15_percent_resigns_new_election() {
    for seed in 0..SEEDS {
        let (mut air, master) = settled(seed, &[90, 80, 60, 40]);
        assert_eq!(master, 0);
        air.run_for(ms(2000));
        let resigned_at = air.now;
        let old_round = air.pods[0].node().term();
        air.set_battery(0, 15);
        assert!(!air.pods[0].node().is_leader());
        let agreed = air
            .run_until_condition(resigned_at + ms(100), |air| air.agreed_master() == Some(1))
            .unwrap_or_else(|| panic!("no hand-over\n{}", air.report()));
        assert!(agreed <= resigned_at + ms(10), "{agreed:?}");
        let successor = &air.pods[1];
        let (_, round, leader, cause) = *successor.leader_changes().last().unwrap();
        assert_eq!(
            (leader, cause),
            (Some(successor.id), LeaderChangeCause::Resign)
        );
        assert!(round > old_round);
        for i in [2, 3] {
            assert!(
                air.pods[i].events.iter().any(|(at, e)| *at >= resigned_at
                    && matches!(e, Event::ElectionStarted { .. })),
                "pod-{i} started a new election"
            );
        }
        air.run_for(ms(10_000));
        assert_eq!(air.agreed_master(), Some(1), "{}", air.report());
    }
}

/// Master loses power suddenly → followers detect the timeout and elect a new master
/// (PRI-3): nobody moves before the 3 s timeout can have run out, and the highest survivor
/// leads within the failover budget (3 s + discovery + jitter + campaign + votes).
#[test]
fn master_loses_power_followers_detect_timeout_elect_new() {
    let budget = defaults().failover_budget() + ms(20);
    for seed in 0..SEEDS {
        let (mut air, master) = settled(seed, &[90, 80, 60, 40]);
        air.run_for(ms(1500 + seed * 37));
        let crashed_at = air.now;
        let old_round = air.pods[master].node().term();
        // The last announcement any follower heard left at most a second before the crash.
        let last_announce = Instant::from_micros(crashed_at.as_micros().saturating_sub(1_000_000));
        air.crash(master);
        let early = air.run_until_condition(last_announce + ms(3000), |air| {
            others(air, master)
                .iter()
                .any(|&i| air.pods[i].node().leader().is_none())
        });
        assert!(
            early.is_none_or(|t| t >= last_announce + ms(3000)),
            "a follower gave up before 3 s: {early:?}"
        );
        let elected = air
            .run_until_condition(crashed_at + budget, |air| air.agreed_master().is_some())
            .unwrap_or_else(|| panic!("no new master within {budget:?}\n{}", air.report()));
        assert_eq!(air.agreed_master(), Some(1), "{}", air.report());
        assert!(air.pods[1].node().term() > old_round);
        assert!(elected - crashed_at >= ms(2000), "{elected:?}");
    }
}

/// Network partition heals → the lower priority master yields (PRI-6), whichever side it is
/// on, within an announcement interval; the survivor's round ends above the loser's (CB-5).
#[test]
fn network_partition_heals_lower_priority_master_yields() {
    for seed in 0..SEEDS {
        for drained in [false, true] {
            let (mut air, master) = settled(seed, &[90, 80, 60, 40]);
            assert_eq!(master, 0);
            air.partition(&[0, 1, 0, 1]);
            air.run_for(ms(6000));
            assert_eq!(air.masters(), vec![0, 1], "{}", air.report());
            if drained {
                // Pod 0's side had the better master; now pod 1 outranks it.
                air.set_battery(1, 100);
            }
            let (winner, loser) = if drained { (1, 0) } else { (0, 1) };
            let rounds = [air.pods[0].node().term(), air.pods[1].node().term()];
            air.heal_partition();
            let healed_at = air.now;
            air.run_until_condition(healed_at + ms(1100), |air| {
                air.agreed_master() == Some(winner)
            })
            .unwrap_or_else(|| panic!("not settled within 1.1 s\n{}", air.report()));
            let (_, _, leader, cause) = *air.pods[loser].leader_changes().last().unwrap();
            assert_eq!(
                (leader, cause),
                (Some(air.pods[winner].id), LeaderChangeCause::Priority)
            );
            // The loser's followers move to a round above the loser's (CB-5).
            assert!(air.pods[winner].node().term() > rounds[loser]);
            assert!(air.pods[winner].node().term() >= rounds[winner]);
            air.run_for(ms(10_000));
            assert_eq!(air.agreed_master(), Some(winner), "{}", air.report());
        }
    }
}

/// Force master via NVS (`force_master` in the configuration) → the pod is master regardless
/// of priority: at boot with everyone, and when it joins a pod that already has a master.
#[test]
fn force_master_via_config_regardless_of_priority() {
    for seed in 0..SEEDS {
        let forced = |index: usize, config: &mut PriorityConfig| {
            config.force_master = index == 3;
        };
        let mut air = Air::new(seed, &[90, 80, 60, 10], forced);
        air.start_all();
        air.run_until(Instant::from_millis(2000));
        assert_eq!(air.agreed_master(), Some(3), "{}", air.report());
        assert_eq!(air.pods[3].node().state(), PriorityState::ForcedMaster);
        air.run_for(ms(10_000));
        assert_eq!(air.agreed_master(), Some(3));

        let mut late = Air::new(seed, &[90, 80, 60, 10], forced);
        for i in 0..3 {
            late.start(i);
        }
        late.run_until(Instant::from_millis(3000));
        assert_eq!(late.agreed_master(), Some(0));
        late.start(3);
        late.run_for(ms(1100));
        assert_eq!(late.agreed_master(), Some(3), "{}", late.report());
        let (_, _, _, cause) = *late.pods[0].leader_changes().last().unwrap();
        assert_eq!(cause, LeaderChangeCause::Priority);
    }
}

/// Force master via BLE (`conclave leader set` naming the pod) → the pod becomes master
/// immediately, whatever its score, and everyone follows at its announcement.
#[test]
fn force_master_via_command_immediately() {
    for seed in 0..SEEDS {
        let (mut air, master) = settled(seed, &[90, 80, 60, 10]);
        assert_eq!(master, 0);
        air.run_for(ms(1234));
        let id = air.pods[3].id;
        assert_eq!(
            air.command(3, Command::SetLeader(id)),
            Ok(CommandOutcome::Applied)
        );
        assert_eq!(air.pods[3].node().state(), PriorityState::ForcedMaster);
        let commanded = air.now;
        air.run_until_condition(commanded + ms(50), |air| air.agreed_master() == Some(3))
            .unwrap_or_else(|| panic!("others did not follow\n{}", air.report()));
        air.run_for(ms(10_000));
        assert_eq!(air.agreed_master(), Some(3));
        // The pin survives a restart.
        air.crash(3);
        air.start(3);
        air.run_for(ms(1100));
        assert_eq!(air.agreed_master(), Some(3), "{}", air.report());
    }
}

/// Seed 002's serial `resign_master` (user request, PRI-5): the master hands over to the
/// best successor at once and does not take the role back.
#[test]
fn serial_resign_master_hands_over_to_the_best_successor() {
    for seed in 0..SEEDS {
        let (mut air, master) = settled(seed, &[90, 80, 60, 40]);
        assert_eq!(master, 0);
        assert_eq!(
            air.command(0, Command::Resign),
            Ok(CommandOutcome::TransferStarted {
                target: air.pods[1].id
            })
        );
        let resigned = air.now;
        air.run_until_condition(resigned + ms(20), |air| air.agreed_master() == Some(1))
            .unwrap_or_else(|| panic!("no hand-over\n{}", air.report()));
        air.run_for(ms(10_000));
        assert_eq!(air.agreed_master(), Some(1), "{}", air.report());
    }
}

/// PRI-5 at shutdown: a master that stops gracefully names its successor, so the pods keep a
/// master without waiting out the 3 s timeout.
#[test]
fn master_shutdown_hands_over_without_timeout() {
    for seed in 0..SEEDS {
        let (mut air, _) = settled(seed, &[90, 80, 60, 40]);
        air.shutdown(0);
        let stopped = air.now;
        air.run_until_condition(stopped + ms(20), |air| air.agreed_master() == Some(1))
            .unwrap_or_else(|| panic!("no hand-over\n{}", air.report()));
        air.run_for(ms(10_000));
        assert_eq!(air.agreed_master(), Some(1));
    }
}

/// Seed 002's serial `election_status`: state, score and peer count of every pod.
#[test]
fn serial_election_status_reports_state_score_and_peers() {
    let (air, master) = settled(5, &[90, 80, 60]);
    for (index, pod) in air.pods.iter().enumerate() {
        let status = pod.node().status();
        assert_eq!(status.peers, 2, "pod-{index}");
        assert_eq!(
            conclave_core::priority::battery_of(status.score),
            pod.battery
        );
        assert_eq!(status.master, Some(air.pods[master].id));
        let expected = if index == master {
            PriorityState::Master
        } else {
            PriorityState::Follower
        };
        assert_eq!(status.state, expected);
    }
}

/// CB-5: through successive failovers and restarts, every new master's round is above every
/// earlier master's, and a restarted pod follows the current master at its round.
#[test]
fn fencing_round_grows_with_every_master_across_restarts() {
    for seed in 0..SEEDS {
        let (mut air, _) = settled(seed, &[90, 80, 60, 40]);
        for _ in 0..6 {
            let master = air.agreed_master().expect("a master");
            air.crash(master);
            air.run_for(ms(5000));
            air.start(master);
            air.run_for(ms(2000));
            assert!(air.agreed_master().is_some(), "{}", air.report());
        }
        let mut assumptions: Vec<(Instant, u64)> = air
            .pods
            .iter()
            .flat_map(|pod| {
                pod.leader_changes()
                    .into_iter()
                    .filter(move |&(_, _, leader, _)| leader == Some(pod.id))
                    .map(|(at, term, _, _)| (at, term))
            })
            .collect();
        assumptions.sort();
        assert!(assumptions.len() >= 7, "{assumptions:?}");
        for pair in assumptions.windows(2) {
            assert!(
                pair[1].1 > pair[0].1,
                "seed {seed}: master rounds {assumptions:?}"
            );
        }
    }
}
