//! RAFT-10 unit tests: priorities on the wire, ranked timeouts and the pre-vote stand-aside by
//! priority, preemption by leadership transfer (its delay, its guards, its retry), and health
//! readings that move the priority. Each fires one input and compares the drained actions
//! exactly where that is practical. A cluster without priorities is covered by the rest of
//! the raft tests, which run unchanged.

use std::time::Duration;

use conclave_protocol::{AppendResp, PeerId, RequestVote, TimeoutNow, Vote};

use crate::election::{Action, Command, HardState, HealthReading, LeaderChangeCause};
use crate::raft::{LogPosition, Raft, RaftConfig, RaftMessage};
use crate::testing::{drain, id, leader_changes, ms, raft_config, raft_node, sent as sends};
use crate::time::Instant;

const DELAY: Duration = Duration::from_millis(1000);

/// Heartbeat 50 ms, election timeout 150–300 ms, preempt_delay 1 s.
fn config(me: &str, voters: &[&str], priority: Option<u8>) -> RaftConfig {
    let mut config = raft_config(me, voters);
    config.priority = priority;
    config.preempt_delay = DELAY;
    config
}

fn start(config: RaftConfig, last_log: LogPosition) -> Raft {
    raft_node(config, HardState::default(), last_log, 7)
}

fn request(term: u64, candidate: &str, pre_vote: bool, priority: Option<u8>) -> RaftMessage {
    RaftMessage::RequestVote(RequestVote {
        term,
        candidate: id(candidate),
        last_log_index: 0,
        last_log_term: 0,
        pre_vote,
        leadership_transfer: false,
        priority,
    })
}

fn vote(term: u64, granted: bool, pre_vote: bool, priority: Option<u8>) -> RaftMessage {
    RaftMessage::Vote(Vote {
        term,
        granted,
        pre_vote,
        priority,
    })
}

fn answer(term: u64, match_index: u64, priority: Option<u8>) -> RaftMessage {
    RaftMessage::AppendResp(AppendResp {
        term,
        success: true,
        match_index,
        priority,
        ..AppendResp::default()
    })
}

fn lagging(term: u64, priority: Option<u8>) -> RaftMessage {
    RaftMessage::AppendResp(AppendResp {
        term,
        success: false,
        match_index: 0,
        priority,
        ..AppendResp::default()
    })
}

fn timeout_now(term: u64) -> (PeerId, RaftMessage) {
    (
        id("b"),
        RaftMessage::TimeoutNow(TimeoutNow { term, pin: false }),
    )
}

/// `a` of voters a, b, c wins term 1 with `b`'s pre-vote and vote, at 300 ms at the latest.
/// Returns the time it became leader.
fn elect_a(raft: &mut Raft) -> Instant {
    let at = raft.poll_timeout().unwrap();
    raft.handle_timeout(at);
    raft.handle_message(at, id("b"), vote(1, true, true, None));
    raft.handle_message(at, id("b"), vote(1, true, false, None));
    assert!(raft.is_leader());
    drain(raft);
    at
}

/// `a`, started with `config` and elected leader of term 1; and when.
fn leader_a(config: RaftConfig) -> (Raft, Instant) {
    let mut raft = start(config, LogPosition::default());
    let at = elect_a(&mut raft);
    (raft, at)
}

/// RAFT-10: a node sends its priority on vote requests, votes and heartbeat answers; a node
/// without one sends none.
#[test]
fn raft10_priority_goes_out_on_requests_votes_and_answers() {
    for priority in [Some(42), None] {
        let mut raft = start(
            config("a", &["a", "b", "c"], priority),
            LogPosition::default(),
        );
        let at = raft.poll_timeout().unwrap();
        raft.handle_timeout(at);
        let requests = sends(&drain(&mut raft));
        assert_eq!(
            requests,
            vec![
                (id("b"), request(1, "a", true, priority)),
                (id("c"), request(1, "a", true, priority)),
            ]
        );
        raft.handle_message(at, id("c"), request(1, "c", true, None));
        assert_eq!(
            sends(&drain(&mut raft)),
            vec![(id("c"), vote(1, true, true, priority))]
        );

        let mut follower = start(
            config("a", &["a", "b", "c"], priority),
            LogPosition::default(),
        );
        follower.handle_message(
            ms(10),
            id("b"),
            RaftMessage::AppendEntries(conclave_protocol::AppendEntries::new(1, id("b"))),
        );
        assert_eq!(
            sends(&drain(&mut follower)),
            vec![(id("b"), answer(1, 0, priority))]
        );
    }
}

/// RAFT-10, RAFT-2: the ranked timeouts order the survivors by priority first. Voters a, b,
/// c, d; `d` leads. Without priorities `a` (the smallest id) ranks last of three: 250 ms.
/// With priority 100, knowing `b` has 200 and nothing of `c`, it ranks second: 200 ms.
#[test]
fn raft10_ranked_timeouts_order_by_priority_first() {
    let voters = ["a", "b", "c", "d"];
    let beat = RaftMessage::AppendEntries(conclave_protocol::AppendEntries::new(1, id("d")));
    let mut plain = start(config("a", &voters, None), LogPosition::default());
    plain.handle_message(ms(0), id("d"), beat.clone());
    assert_eq!(plain.poll_timeout(), Some(ms(250)));

    let mut ranked = start(config("a", &voters, Some(100)), LogPosition::default());
    // A stale vote (term 0) changes nothing but what `a` knows of `b`'s priority.
    ranked.handle_message(ms(0), id("b"), vote(0, false, false, Some(200)));
    assert_eq!(sends(&drain(&mut ranked)), vec![]);
    ranked.handle_message(ms(0), id("d"), beat.clone());
    assert_eq!(ranked.poll_timeout(), Some(ms(200)));

    // Once `c` is known at 150 it ranks ahead of `a` too: last of three again.
    ranked.handle_message(ms(0), id("c"), vote(0, false, false, Some(150)));
    ranked.handle_message(ms(0), id("d"), beat.clone());
    assert_eq!(ranked.poll_timeout(), Some(ms(250)));

    // And a higher priority than every known one puts `a` first, at the minimum.
    ranked.handle_health(
        ms(0),
        HealthReading {
            battery_percent: 100,
            priority: Some(250),
        },
    );
    ranked.handle_message(ms(0), id("d"), beat);
    assert_eq!(ranked.poll_timeout(), Some(ms(150)));
}

/// RAFT-10, RAFT-7: with equal logs a pre-candidate stands aside for a pre-candidate of
/// higher priority even when its own id is larger; without priorities the larger id goes on
/// (the control).
#[test]
fn raft10_pre_vote_stand_aside_ranks_priority_before_id() {
    for (a_priority, stands_aside) in [(Some(100), true), (None, false)] {
        let mut c = start(
            config("c", &["a", "b", "c"], Some(50)),
            LogPosition::default(),
        );
        let at = c.poll_timeout().unwrap();
        c.handle_timeout(at);
        assert_eq!(c.phase(), "pre_candidate");
        drain(&mut c);
        c.handle_message(at, id("a"), request(1, "a", true, a_priority));
        let expected_phase = if stands_aside {
            "follower"
        } else {
            "pre_candidate"
        };
        assert_eq!(c.phase(), expected_phase, "a's priority {a_priority:?}");
        // Either way the pre-vote is granted: a pre-vote commits nothing.
        assert_eq!(
            sends(&drain(&mut c)),
            vec![(id("a"), vote(1, true, true, Some(50)))]
        );
    }
}

/// RAFT-10: a leader of priority 10 hearing a caught-up voter of priority 20 hands over after
/// `preempt_delay` of it, not a millisecond before, with an ordinary `TimeoutNow`; it steps
/// down with the cause `priority` when the target's campaign reaches it.
#[test]
fn raft10_leader_preempted_after_delay_not_before() {
    let (mut raft, elected) = leader_a(config("a", &["a", "b", "c"], Some(10)));
    let t0 = elected + Duration::from_millis(1);
    raft.handle_message(t0, id("b"), answer(1, 0, Some(20)));
    assert_eq!(drain(&mut raft), vec![]);
    // The leader asks to be woken when the delay runs out.
    assert!(raft.poll_timeout().unwrap() <= t0 + DELAY);

    // `b` keeps answering every heartbeat until just before the delay has passed.
    let mut now = t0;
    while now + Duration::from_millis(50) < t0 + DELAY {
        now += Duration::from_millis(50);
        raft.handle_timeout(now);
        raft.handle_message(now, id("b"), answer(1, 0, Some(20)));
        assert!(
            !sends(&drain(&mut raft))
                .iter()
                .any(|(_, m)| matches!(m, RaftMessage::TimeoutNow(_))),
            "preempted early at {now:?}"
        );
    }
    let just_before = t0 + (DELAY - Duration::from_millis(1));
    raft.handle_message(just_before, id("b"), answer(1, 0, Some(20)));
    assert_eq!(drain(&mut raft), vec![]);

    raft.handle_message(t0 + DELAY, id("b"), answer(1, 0, Some(20)));
    assert_eq!(sends(&drain(&mut raft)), vec![timeout_now(1)]);
    assert!(raft.is_leader(), "a leads until its successor wins");

    // `b` campaigns in term 2 as the transfer asked; `a` steps down, saying why.
    let mut campaign = request(2, "b", false, Some(20));
    if let RaftMessage::RequestVote(r) = &mut campaign {
        r.leadership_transfer = true;
    }
    raft.handle_message(t0 + DELAY, id("b"), campaign);
    let actions = drain(&mut raft);
    assert_eq!(
        leader_changes(&actions),
        vec![(2, None, LeaderChangeCause::Priority)]
    );
    assert_eq!(
        sends(&actions),
        vec![(id("b"), vote(2, true, false, Some(10)))]
    );
}

/// RAFT-10: the highest-priority voter is chosen (ties by the larger id), and one that has not
/// answered within the minimum election timeout is not.
#[test]
fn raft10_preemption_picks_the_highest_connected_voter() {
    let (mut raft, elected) = leader_a(config("a", &["a", "b", "c"], Some(10)));
    let t0 = elected + Duration::from_millis(1);
    // `c` has the highest priority but falls silent; `b` keeps answering.
    raft.handle_message(t0, id("c"), answer(1, 0, Some(90)));
    raft.handle_message(t0, id("b"), answer(1, 0, Some(20)));
    let mut now = t0;
    while now < t0 + DELAY {
        now += Duration::from_millis(50);
        raft.handle_timeout(now);
        raft.handle_message(now, id("b"), answer(1, 0, Some(20)));
        let orders: Vec<_> = sends(&drain(&mut raft))
            .into_iter()
            .filter(|(_, m)| matches!(m, RaftMessage::TimeoutNow(_)))
            .collect();
        if !orders.is_empty() {
            assert_eq!(orders, vec![timeout_now(1)]);
            return;
        }
    }
    panic!("no preemption to b by {now:?}");
}

/// RAFT-10: `nopreempt` keeps the leader; so does a leader without a priority.
#[test]
fn raft10_nopreempt_and_no_priority_keep_the_leader() {
    let mut nopreempt = config("a", &["a", "b", "c"], Some(10));
    nopreempt.nopreempt = true;
    for config in [nopreempt, config("a", &["a", "b", "c"], None)] {
        let (mut raft, elected) = leader_a(config);
        let mut now = elected;
        while now < elected + DELAY * 3 {
            now += Duration::from_millis(50);
            raft.handle_timeout(now);
            raft.handle_message(now, id("b"), answer(1, 0, Some(200)));
            assert!(
                !sends(&drain(&mut raft))
                    .iter()
                    .any(|(_, m)| matches!(m, RaftMessage::TimeoutNow(_)))
            );
        }
        assert!(raft.is_leader());
    }
}

/// RAFT-10, RAFT-8: an operator's pin blocks preemption, and so does automatic election off.
#[test]
fn raft10_pin_and_auto_election_off_block_preemption() {
    for command in [
        Command::SetLeader(id("a")),
        Command::EnableAutoElection(false),
    ] {
        let (mut raft, elected) = leader_a(config("a", &["a", "b", "c"], Some(10)));
        raft.handle_command(elected, command).unwrap();
        drain(&mut raft);
        let mut now = elected;
        while now < elected + DELAY * 3 {
            now += Duration::from_millis(50);
            raft.handle_timeout(now);
            raft.handle_message(now, id("b"), answer(1, 0, Some(200)));
            assert!(
                !sends(&drain(&mut raft))
                    .iter()
                    .any(|(_, m)| matches!(m, RaftMessage::TimeoutNow(_))),
                "{command:?}"
            );
        }
        assert!(raft.is_leader(), "{command:?}");
    }
}

/// RAFT-10: a voter whose log lags is not handed leadership; the delay counts from when it has
/// caught up.
#[test]
fn raft10_lagging_voter_waits_until_caught_up() {
    let mut raft = start(
        config("a", &["a", "b", "c"], Some(10)),
        LogPosition::new(1, 5),
    );
    let at = raft.poll_timeout().unwrap();
    raft.handle_timeout(at);
    let granted = |term, pre_vote| vote(term, true, pre_vote, None);
    raft.handle_message(at, id("c"), granted(1, true));
    raft.handle_message(at, id("c"), granted(1, false));
    assert!(raft.is_leader());
    drain(&mut raft);
    let term = raft.term();

    let mut now = at;
    while now < at + DELAY * 2 {
        now += Duration::from_millis(50);
        raft.handle_timeout(now);
        // No transfer starts: the tick sends one heartbeat to each follower and nothing else
        // (a transfer would ask `b` again, and time out with `TransferAborted`).
        let tick = drain(&mut raft);
        assert_eq!(
            tick.iter()
                .filter(|a| matches!(a, Action::Send { .. } | Action::Publish(_)))
                .count(),
            2,
            "at {now:?}: {tick:?}"
        );
        raft.handle_message(now, id("b"), lagging(term, Some(20)));
        raft.handle_message(now, id("c"), answer(term, 5, None));
        assert_eq!(drain(&mut raft), vec![], "at {now:?}");
    }
    let caught_up = now + Duration::from_millis(1);
    raft.handle_message(caught_up, id("b"), answer(term, 5, Some(20)));
    assert_eq!(drain(&mut raft), vec![]);
    raft.handle_message(caught_up + DELAY, id("b"), answer(term, 5, Some(20)));
    assert_eq!(sends(&drain(&mut raft)), vec![timeout_now(term)]);
}

/// RAFT-10, RAFT-8: a preemption transfer that fails leaves the leader leading, and the next
/// attempt comes `preempt_delay` after the first, not at the next heartbeat.
#[test]
fn raft10_failed_preemption_retries_after_the_delay() {
    let (mut raft, elected) = leader_a(config("a", &["a", "b", "c"], Some(10)));
    let t0 = elected + Duration::from_millis(1);
    let mut orders = Vec::new();
    let mut now = t0;
    raft.handle_message(now, id("b"), answer(1, 0, Some(20)));
    while now < t0 + DELAY * 2 + Duration::from_millis(100) {
        now += Duration::from_millis(10);
        raft.handle_timeout(now);
        raft.handle_message(now, id("b"), answer(1, 0, Some(20)));
        let actions = drain(&mut raft);
        if sends(&actions)
            .iter()
            .any(|(_, m)| matches!(m, RaftMessage::TimeoutNow(_)))
        {
            orders.push(now);
        }
    }
    // `b` never campaigned: each transfer timed out, and `a` still leads.
    assert!(raft.is_leader());
    assert_eq!(orders.len(), 2, "{orders:?}");
    assert!(orders[1].saturating_duration_since(orders[0]) >= DELAY);
}

/// RAFT-10: a health reading lowering a leader's priority below a caught-up voter's gets it
/// preempted `preempt_delay` later; a reading without a priority brings back the configured
/// one (and with it, no preemption).
#[test]
fn raft10_health_reading_lowers_the_leader_priority() {
    let (mut raft, elected) = leader_a(config("a", &["a", "b", "c"], Some(30)));
    let t0 = elected + Duration::from_millis(1);
    raft.handle_message(t0, id("b"), answer(1, 0, Some(20)));
    assert_eq!(drain(&mut raft), vec![]);
    let reading = |priority| HealthReading {
        battery_percent: 100,
        priority,
    };
    raft.handle_health(t0, reading(Some(10)));
    assert_eq!(raft.priority(), Some(10));
    assert_eq!(raft.status().priority, Some(10));
    assert_eq!(drain(&mut raft), vec![]);

    // Back to the configured 30 half-way: nothing happens at the end of the delay.
    let half = t0 + DELAY / 2;
    raft.handle_message(half, id("b"), answer(1, 0, Some(20)));
    raft.handle_health(half, reading(None));
    assert_eq!(raft.priority(), Some(30));
    raft.handle_message(t0 + DELAY, id("b"), answer(1, 0, Some(20)));
    assert_eq!(drain(&mut raft), vec![]);

    // Down again: preempted a whole delay later.
    let t1 = t0 + DELAY;
    raft.handle_health(t1, reading(Some(10)));
    let mut now = t1;
    while now + Duration::from_millis(50) < t1 + DELAY {
        now += Duration::from_millis(50);
        raft.handle_message(now, id("b"), answer(1, 0, Some(20)));
    }
    drain(&mut raft);
    raft.handle_message(t1 + DELAY, id("b"), answer(1, 0, Some(20)));
    assert_eq!(sends(&drain(&mut raft)), vec![timeout_now(1)]);
}

/// RAFT-10: a follower's health reading changes the priority its next answer carries.
#[test]
fn raft10_health_reading_goes_out_on_the_next_answer() {
    let mut follower = start(
        config("c", &["a", "b", "c"], Some(5)),
        LogPosition::default(),
    );
    follower.handle_health(
        ms(1),
        HealthReading {
            battery_percent: 80,
            priority: Some(99),
        },
    );
    assert_eq!(drain(&mut follower), vec![]);
    follower.handle_message(
        ms(2),
        id("a"),
        RaftMessage::AppendEntries(conclave_protocol::AppendEntries::new(1, id("a"))),
    );
    assert_eq!(
        sends(&drain(&mut follower)),
        vec![(id("a"), answer(1, 0, Some(99)))]
    );
}
