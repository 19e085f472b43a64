//! MEMB-1, MEMB-2 unit tests: the configuration as replicated state, and the rules a leader
//! keeps when it changes it.

use conclave_protocol::{AppendEntries, Configuration, EntryKind, LogEntry, MemberAddress};

use crate::election::{Event, HardState, Role};
use crate::raft::{LogConfig, LogPosition, MembershipChange, MembershipError, Raft, RaftMessage};
use crate::testing::{
    append_ack, drain, id, persist_log, published, raft_config, raft_node, win_election,
};

fn log_config() -> LogConfig {
    LogConfig {
        max_append_bytes: 1024,
        max_append_entries: 64,
        max_inflight: 8,
        snapshot_entries: 10_000,
        shared_acks: false,
    }
}

/// `a` leads `a, b, c` in term 1, its no-op committed with `b`'s acknowledgement.
fn leader() -> (Raft, crate::time::Instant) {
    let config = raft_config("a", &["a", "b", "c"]).with_log(log_config());
    let mut raft = raft_node(config, HardState::default(), LogPosition::default(), 7);
    let at = win_election(&mut raft, &["b"]);
    persist_log(&mut raft, at);
    raft.handle_message(at, id("b"), append_ack(raft.term(), 1));
    drain(&mut raft);
    (raft, at)
}

fn change(
    raft: &mut Raft,
    now: crate::time::Instant,
    change: MembershipChange,
) -> Result<LogPosition, MembershipError> {
    raft.replicated_log()
        .unwrap()
        .propose_membership(now, change)
}

fn configuration(raft: &mut Raft) -> Configuration {
    raft.replicated_log().unwrap().configuration().unwrap()
}

/// MEMB-1: `cluster.voters` seeds the configuration; a change is in force on the leader as
/// soon as it is appended and published once; a second change waits for the first's commit.
#[test]
fn memb1_one_change_at_a_time_in_force_when_appended() {
    let (mut raft, now) = leader();
    assert_eq!(
        configuration(&mut raft),
        Configuration::with_voters([id("a"), id("b"), id("c")])
    );
    let position = change(
        &mut raft,
        now,
        MembershipChange::AddLearner(id("d"), MemberAddress::default()),
    )
    .unwrap();
    assert_eq!(position, LogPosition::new(1, 2));
    let config = configuration(&mut raft);
    assert_eq!(config.learners, [id("d")].into());
    let events = published(&drain(&mut raft));
    assert!(events.iter().any(|event| matches!(
        event,
        Event::ConfigurationChanged { index: 2, learners, .. } if learners == &vec![id("d")]
    )));
    assert_eq!(
        change(&mut raft, now, MembershipChange::Remove(id("c"))),
        Err(MembershipError::ChangeInProgress {
            index: 2,
            commit: 1
        })
    );
    persist_log(&mut raft, now);
    raft.handle_message(now, id("b"), append_ack(1, 2));
    drain(&mut raft);
    // A learner's acknowledgement never counts: `d` holds everything, yet it is behind
    // nothing and the next change is allowed only because `b` made the entry committed.
    assert!(change(&mut raft, now, MembershipChange::Remove(id("c"))).is_ok());
}

/// MEMB-3: a learner added with its addresses has them in the configuration, which every
/// node appends; its removal drops them.
#[test]
fn memb3_addresses_come_with_the_learner_and_go_with_its_removal() {
    let (mut raft, now) = leader();
    let address = MemberAddress {
        udp: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 7949))),
        admin_url: Some("http://127.0.0.1:7073".to_owned()),
    };
    change(
        &mut raft,
        now,
        MembershipChange::AddLearner(id("d"), address.clone()),
    )
    .unwrap();
    assert_eq!(
        configuration(&mut raft).addresses.get(&id("d")),
        Some(&address)
    );
    persist_log(&mut raft, now);
    raft.handle_message(now, id("b"), append_ack(1, 2));
    drain(&mut raft);
    change(&mut raft, now, MembershipChange::Remove(id("d"))).unwrap();
    let config = configuration(&mut raft);
    assert!(!config.contains(&id("d")));
    assert!(config.addresses.is_empty());
}

/// MEMB-2: a learner not caught up is not promoted, and the refusal says how far behind it
/// is; once it holds the log through the commit index it is.
#[test]
fn memb2_promote_waits_for_the_learner_to_catch_up() {
    let (mut raft, now) = leader();
    change(
        &mut raft,
        now,
        MembershipChange::AddLearner(id("d"), MemberAddress::default()),
    )
    .unwrap();
    persist_log(&mut raft, now);
    raft.handle_message(now, id("b"), append_ack(1, 2));
    drain(&mut raft);
    let refused = change(&mut raft, now, MembershipChange::Promote(id("d"))).unwrap_err();
    assert_eq!(
        refused,
        MembershipError::LearnerBehind {
            peer: id("d"),
            matched: 0,
            commit: 2,
            behind: 2
        }
    );
    assert!(
        refused.to_string().contains("2 entries behind"),
        "{refused}"
    );
    let status = raft.replicated_log().unwrap().status();
    assert_eq!(status.learner_lag, vec![(id("d"), 2)]);
    raft.handle_message(now, id("d"), append_ack(1, 2));
    change(&mut raft, now, MembershipChange::Promote(id("d"))).unwrap();
    assert_eq!(configuration(&mut raft).voters.len(), 4);
    assert_eq!(
        change(&mut raft, now, MembershipChange::Promote(id("b"))),
        Err(MembershipError::ChangeInProgress {
            index: 3,
            commit: 2
        })
    );
}

/// MEMB-1: a leader that has not committed an entry of its own term changes nothing (the
/// dissertation's fix); followers refuse with the leader's id; the last voter stays.
#[test]
fn memb1_the_own_term_rule_the_leader_only_and_the_last_voter() {
    let config = raft_config("a", &["a", "b", "c"]).with_log(log_config());
    let mut raft = raft_node(config, HardState::default(), LogPosition::default(), 7);
    assert_eq!(
        change(
            &mut raft,
            crate::time::Instant::ZERO,
            MembershipChange::Remove(id("c"))
        ),
        Err(MembershipError::NotLeader { leader: None })
    );
    let now = win_election(&mut raft, &["b"]);
    assert_eq!(
        change(&mut raft, now, MembershipChange::Remove(id("c"))),
        Err(MembershipError::LeaderNotSettled { term: 1 })
    );

    let single = raft_config("a", &["a"]).with_log(log_config());
    let mut alone = raft_node(single, HardState::default(), LogPosition::default(), 7);
    let now = win_election(&mut alone, &[]);
    persist_log(&mut alone, now);
    drain(&mut alone);
    assert_eq!(
        change(&mut alone, now, MembershipChange::Remove(id("a"))),
        Err(MembershipError::LastVoter { peer: id("a") })
    );
    assert_eq!(
        change(&mut alone, now, MembershipChange::Promote(id("z"))),
        Err(MembershipError::NotALearner { peer: id("z") })
    );
}

/// MEMB-1: a leader that removes itself keeps leading until the removal commits, counting
/// only the remaining voters, then steps down and never campaigns again.
#[test]
fn memb1_a_removed_leader_steps_down_once_its_removal_commits() {
    let (mut raft, now) = leader();
    change(&mut raft, now, MembershipChange::Remove(id("a"))).unwrap();
    persist_log(&mut raft, now);
    raft.handle_message(now, id("b"), append_ack(1, 2));
    // `a` holds it and `b` does: a majority of the old voters, not of `b, c`.
    assert_eq!(raft.role(), Role::Leader);
    raft.handle_message(now, id("c"), append_ack(1, 2));
    assert_eq!(raft.role(), Role::Follower);
    drain(&mut raft);
    let later = now + std::time::Duration::from_secs(10);
    raft.handle_timeout(later);
    assert_eq!(raft.role(), Role::Follower);
    assert!(!configuration(&mut raft).voters.contains(&id("a")));
}

/// MEMB-1: a follower acts on a configuration entry as soon as it appends it, and reverts
/// when the leader's log replaces it; a learner never campaigns.
#[test]
fn memb1_a_follower_acts_on_appended_configurations_and_reverts_on_truncation() {
    let config = raft_config("d", &["a", "b", "c"]).with_log(log_config());
    let mut raft = raft_node(config, HardState::default(), LogPosition::default(), 7);
    let with_d = Configuration {
        voters: [id("a"), id("b"), id("c"), id("d")].into(),
        learners: Default::default(),
        addresses: Default::default(),
    };
    let entry = |index, term, kind, data| LogEntry {
        index,
        term,
        kind,
        data,
    };
    let append = |term, prev: (u64, u64), entries| {
        RaftMessage::AppendEntries(AppendEntries {
            term,
            leader: id("a"),
            prev_index: prev.0,
            prev_term: prev.1,
            entries,
            commit: 0,
            pinned: false,
            read_round: None,
            chunk: None,
        })
    };
    let now = crate::time::Instant::ZERO;
    raft.handle_message(
        now,
        id("a"),
        append(
            1,
            (0, 0),
            vec![
                entry(1, 1, EntryKind::Noop, Vec::new()),
                entry(2, 1, EntryKind::Config, with_d.encode()),
            ],
        ),
    );
    assert_eq!(configuration(&mut raft), with_d);
    // A new leader of term 2 never had entry 2: it goes, and the seed is back.
    raft.handle_message(
        now,
        id("b"),
        append(2, (1, 1), vec![entry(2, 2, EntryKind::Noop, Vec::new())]),
    );
    assert_eq!(
        configuration(&mut raft),
        Configuration::with_voters([id("a"), id("b"), id("c")])
    );
    let events = published(&drain(&mut raft));
    let indices: Vec<u64> = events
        .iter()
        .filter_map(|event| match event {
            Event::ConfigurationChanged { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    assert_eq!(indices, vec![2, 0]);
    // Not a voter of the seed: it never campaigns, however long it waits.
    let later = now + std::time::Duration::from_secs(10);
    raft.handle_timeout(later);
    assert_eq!(raft.role(), Role::Follower);
    assert_eq!(raft.term(), 2);
}

/// MEMB-1, LOG-7: a leader that removed itself is no part of any majority while it still
/// leads: with `b` the only voter left, a read is confirmed only once `b` echoes the round.
#[test]
fn memb1_a_removed_leader_confirms_no_read_alone() {
    let config = raft_config("a", &["a", "b"]).with_log(log_config());
    let mut raft = raft_node(config, HardState::default(), LogPosition::default(), 7);
    let now = win_election(&mut raft, &["b"]);
    persist_log(&mut raft, now);
    raft.handle_message(now, id("b"), append_ack(1, 1));
    drain(&mut raft);
    change(&mut raft, now, MembershipChange::Remove(id("a"))).unwrap();
    persist_log(&mut raft, now);
    drain(&mut raft);
    assert_eq!(raft.role(), Role::Leader);
    let mut log = raft.replicated_log().unwrap();
    log.request_read(now, crate::raft::ReadId(1)).unwrap();
    let later = now + std::time::Duration::from_millis(60);
    raft.handle_timeout(later);
    drain(&mut raft);
    let answered = raft.replicated_log().unwrap().take_read_results();
    assert!(answered.is_empty(), "answered alone: {answered:?}");
}
