//! Unit tests of the followers' turns to answer (issue 27, item 2; `node/acks.rs`): with
//! shared answers, each index is answered at once by the followers whose turn it is, the others
//! report it with their next answer, and the heartbeat's answer always goes.

use crate::election::HardState;
use crate::raft::reorder_tests::{answers, append, entry};
use conclave_protocol::AppendEntries;

use crate::raft::{LogConfig, LogPosition, Raft, RaftMessage};
use crate::testing::{drain, id, ms, persist_log, raft_config, raft_node};

/// Follower `b` of `a` among `a`, `b`, `c`, hearing `c`, answering in turns when `shared`.
fn follower(shared: bool) -> Raft {
    let mut config = raft_config("b", &["a", "b", "c"]).with_log(LogConfig {
        shared_acks: shared,
        ..LogConfig::default()
    });
    config.check_quorum = false;
    let mut b = raft_node(config, HardState::default(), LogPosition::default(), 7);
    b.handle_peer_status(ms(0), id("c"), true);
    drain(&mut b);
    b
}

/// The indexes `b` acknowledged while taking entries 1..=`last` one message each, durably.
fn acknowledged(b: &mut Raft, last: u64) -> Vec<u64> {
    let mut acknowledged = Vec::new();
    for index in 1..=last {
        let now = ms(10 * index);
        let prev = (u64::from(index > 1), index - 1);
        b.handle_message(now, id("a"), append("a", 1, prev, vec![entry(1, index)]));
        persist_log(b, now);
        acknowledged.extend(answers(b).iter().map(|answer| answer.match_index));
    }
    acknowledged
}

/// Of `b` and `c`, `b` (position 0) answers the even indexes at once, and each answer
/// covers the odd one before it; without shared answers, every index is answered.
#[test]
fn followers_take_turns_and_answers_are_cumulative() {
    let mut b = follower(true);
    assert_eq!(acknowledged(&mut b, 4), vec![2, 4]);
    let mut alone = follower(false);
    assert_eq!(acknowledged(&mut alone, 4), vec![1, 2, 3, 4]);
}

/// A heartbeat at the leader's older view of `b`'s match is answered at once with everything
/// `b` verified against this leader's log: the index whose answer it left to later.
#[test]
fn the_heartbeat_answer_reports_what_was_left_to_later() {
    let mut b = follower(true);
    assert_eq!(acknowledged(&mut b, 3), vec![2]);
    b.handle_message(ms(100), id("a"), append("a", 1, (1, 2), vec![]));
    let answered = answers(&mut b);
    assert_eq!(answered.len(), 1);
    assert!(answered[0].success);
    assert_eq!(answered[0].match_index, 3);
}

/// With nothing new to report, a heartbeat is answered every other time at 50 ms heartbeats
/// and a 150 ms minimum election timeout (an answer each 100 ms, one interval short of it);
/// one that carries a read round is always answered (LOG-7).
#[test]
fn a_quiet_follower_answers_every_other_heartbeat() {
    let mut b = follower(true);
    assert_eq!(acknowledged(&mut b, 2), vec![2]);
    let mut answered = Vec::new();
    for beat in 0..6 {
        b.handle_message(ms(100 + 50 * beat), id("a"), append("a", 1, (1, 2), vec![]));
        answered.push(answers(&mut b).len());
    }
    assert_eq!(answered, vec![0, 1, 0, 1, 0, 1]);
    let round = RaftMessage::AppendEntries(AppendEntries {
        prev_term: 1,
        prev_index: 2,
        read_round: Some(1),
        ..AppendEntries::new(1, id("a"))
    });
    b.handle_message(ms(500), id("a"), round);
    assert_eq!(answers(&mut b).len(), 1);
    // Quiet heartbeats are answered the same way without shared answers (a UDP cluster):
    // what an idle leader wakes for does not depend on the link.
    let mut plain = follower(false);
    acknowledged(&mut plain, 2);
    let mut answered = Vec::new();
    for beat in 0..4 {
        plain.handle_message(ms(100 + 50 * beat), id("a"), append("a", 1, (1, 2), vec![]));
        answered.push(answers(&mut plain).len());
    }
    assert_eq!(answered, vec![0, 1, 0, 1], "without shared answers");
}

/// With `c` disconnected, `b` is the only follower a commit can count on: it answers every
/// index at once.
#[test]
fn a_follower_alone_answers_everything() {
    let mut b = follower(true);
    b.handle_peer_status(ms(1), id("c"), false);
    drain(&mut b);
    assert_eq!(acknowledged(&mut b, 4), vec![1, 2, 3, 4]);
}

/// A message that shows nothing new is one the leader sent again, not having heard: it is
/// answered at once, whoever's turn it is (a probe resent at every heartbeat would otherwise
/// never be answered).
#[test]
fn a_message_sent_again_is_answered_at_once() {
    let mut b = follower(true);
    let first = append("a", 1, (0, 0), vec![entry(1, 1)]);
    b.handle_message(ms(10), id("a"), first.clone());
    persist_log(&mut b, ms(10));
    assert!(answers(&mut b).is_empty(), "index 1 is c's turn");
    b.handle_message(ms(60), id("a"), first);
    persist_log(&mut b, ms(60));
    let answered = answers(&mut b);
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].match_index, 1);
}
