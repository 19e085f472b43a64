//! LOG-7 unit tests of the read index (Raft thesis §6.4): a read waits for the leader's first
//! commit of its term; a heartbeat round echoed by a majority confirms it; an echo of an
//! earlier round does not; a step-down fails the reads still waiting; a single voter answers
//! at once; a follower echoes the round and refuses reads itself; many reads share one round.

use conclave_protocol::{AppendEntries, AppendResp};

use crate::election::{HardState, Role};
use crate::raft::{LogConfig, LogPosition, Raft, RaftMessage, ReadError, ReadId};
use crate::testing::{drain, id, ms, persist_log, raft_config, raft_node, sent, win_election};
use crate::time::Instant;

fn node(me: &str, voters: &[&str]) -> Raft {
    raft_node(
        raft_config(me, voters).with_log(LogConfig::default()),
        HardState::default(),
        LogPosition::default(),
        7,
    )
}

/// An acknowledgement of `match_index`, echoing `round`.
fn ack(term: u64, match_index: u64, round: Option<u64>) -> RaftMessage {
    RaftMessage::AppendResp(AppendResp {
        term,
        success: true,
        match_index,
        read_round: round,
        chunk: None,
        ..AppendResp::default()
    })
}

/// `a` leads term 1 of `voters` with the votes of `b` and `c`; its no-op (index 1) is durable here but not
/// acknowledged by anyone, so nothing of its term is committed yet.
fn new_leader(voters: &[&str]) -> (Raft, Instant, u64) {
    let mut raft = node("a", voters);
    let at = win_election(&mut raft, &["b", "c"]);
    let term = raft.term();
    persist_log(&mut raft, at);
    drain(&mut raft);
    (raft, at, term)
}

fn request(raft: &mut Raft, now: Instant, read: u64) -> Result<(), ReadError> {
    raft.replicated_log()
        .unwrap()
        .request_read(now, ReadId(read))
}

fn results(raft: &mut Raft) -> Vec<(ReadId, Result<u64, ReadError>)> {
    raft.replicated_log().unwrap().take_read_results()
}

/// The read rounds the AppendEntries among `raft`'s actions carry, by addressee.
fn rounds_sent(raft: &mut Raft) -> Vec<(String, Option<u64>)> {
    sent(&drain(raft))
        .into_iter()
        .filter_map(|(to, message)| match message {
            RaftMessage::AppendEntries(append) => Some((to.to_string(), append.read_round)),
            _ => None,
        })
        .collect()
}

/// LOG-7: a read taken before the leader committed an entry of its own term waits, even when
/// a majority confirms its round; it is answered at the commit index of the moment the no-op
/// commits. Reference: Raft thesis §6.4, step 1.
#[test]
fn log7_a_read_waits_for_the_leaders_first_commit_of_its_term() {
    let (mut raft, at, term) = new_leader(&["a", "b", "c"]);
    request(&mut raft, at, 1).unwrap();
    // The round goes to both followers at once.
    assert_eq!(
        rounds_sent(&mut raft),
        vec![("b".into(), Some(1)), ("c".into(), Some(1))]
    );
    // b echoes the round but has not stored the no-op: confirmed, not committed.
    raft.handle_message(at, id("b"), ack(term, 0, Some(1)));
    assert_eq!(results(&mut raft), vec![]);
    raft.handle_message(at, id("b"), ack(term, 1, None));
    assert_eq!(raft.replicated_log().unwrap().status().commit, 1);
    assert_eq!(results(&mut raft), vec![(ReadId(1), Ok(1))]);
}

/// LOG-7: once its term has a commit, a read is ready at the commit index when a majority of
/// the voters, the leader counting itself, echoed its round; one echo of five is not enough.
/// Reference: Raft thesis §6.4, steps 2–3.
#[test]
fn log7_a_majority_echoing_the_round_confirms_the_read() {
    let (mut raft, at, term) = new_leader(&["a", "b", "c", "d", "e"]);
    raft.handle_message(at, id("b"), ack(term, 1, None));
    raft.handle_message(at, id("c"), ack(term, 1, None));
    assert_eq!(raft.replicated_log().unwrap().status().commit, 1);
    drain(&mut raft);
    request(&mut raft, at, 7).unwrap();
    let rounds = rounds_sent(&mut raft);
    assert_eq!(rounds.len(), 4);
    assert!(
        rounds.iter().all(|(_, round)| *round == Some(1)),
        "{rounds:?}"
    );
    raft.handle_message(at, id("d"), ack(term, 1, Some(1)));
    assert_eq!(results(&mut raft), vec![], "two of five");
    raft.handle_message(at, id("e"), ack(term, 1, Some(1)));
    assert_eq!(results(&mut raft), vec![(ReadId(7), Ok(1))]);
    // Nothing waits any more: the next heartbeat carries no round.
    let next = raft.next_heartbeat().unwrap();
    raft.handle_timeout(next);
    assert!(
        rounds_sent(&mut raft)
            .iter()
            .all(|(_, round)| round.is_none())
    );
}

/// LOG-7: an echo of a round that started before the read was taken proves nothing about
/// the time after it, and does not confirm the read; an answer without a round neither.
#[test]
fn log7_an_echo_of_an_earlier_round_does_not_count() {
    let (mut raft, at, term) = new_leader(&["a", "b", "c"]);
    raft.handle_message(at, id("b"), ack(term, 1, None));
    request(&mut raft, at, 1).unwrap();
    drain(&mut raft);
    // Round 1 is in flight; read 2 waits for round 2.
    request(&mut raft, at, 2).unwrap();
    assert_eq!(
        rounds_sent(&mut raft),
        vec![],
        "one round in flight at a time"
    );
    raft.handle_message(at, id("c"), ack(term, 1, None));
    assert_eq!(results(&mut raft), vec![]);
    raft.handle_message(at, id("c"), ack(term, 1, Some(1)));
    assert_eq!(results(&mut raft), vec![(ReadId(1), Ok(1))]);
    // Round 2 starts as soon as round 1 is confirmed.
    assert_eq!(
        rounds_sent(&mut raft),
        vec![("b".into(), Some(2)), ("c".into(), Some(2))]
    );
    // A late or duplicated echo of round 1 from the other follower does not confirm read 2.
    raft.handle_message(at, id("b"), ack(term, 1, Some(1)));
    assert_eq!(results(&mut raft), vec![]);
    // Nor does an echo of a round never started.
    raft.handle_message(at, id("b"), ack(term, 1, Some(9)));
    assert_eq!(results(&mut raft), vec![(ReadId(2), Ok(1))]);
}

/// LOG-7: a leader that steps down (here: it hears a higher term) fails every read still
/// waiting, naming no leader yet, and refuses new ones as a follower.
#[test]
fn log7_a_step_down_fails_the_waiting_reads() {
    let (mut raft, at, term) = new_leader(&["a", "b", "c"]);
    raft.handle_message(at, id("b"), ack(term, 1, None));
    request(&mut raft, at, 1).unwrap();
    request(&mut raft, at, 2).unwrap();
    raft.handle_message(at, id("b"), ack(term + 1, 0, None));
    assert_eq!(raft.role(), Role::Follower);
    let not_leader = ReadError::NotLeader { leader: None };
    assert_eq!(
        results(&mut raft),
        vec![(ReadId(1), Err(not_leader)), (ReadId(2), Err(not_leader))]
    );
    assert_eq!(request(&mut raft, at, 3), Err(not_leader));
    // An echo arriving after the step-down changes nothing.
    raft.handle_message(at, id("c"), ack(term + 1, 1, Some(1)));
    assert_eq!(results(&mut raft), vec![]);
}

/// LOG-7: a single voter is its own majority: a read is ready as soon as its no-op commits,
/// with no message sent for it.
#[test]
fn log7_a_single_voter_answers_at_once() {
    let mut raft = node("a", &["a"]);
    let at = raft.poll_timeout().unwrap();
    raft.handle_timeout(at);
    assert_eq!(raft.role(), Role::Leader);
    request(&mut raft, at, 1).unwrap();
    assert_eq!(results(&mut raft), vec![], "the no-op is not durable yet");
    persist_log(&mut raft, at);
    assert_eq!(results(&mut raft), vec![(ReadId(1), Ok(1))]);
    request(&mut raft, at, 2).unwrap();
    assert_eq!(results(&mut raft), vec![(ReadId(2), Ok(1))]);
    assert_eq!(rounds_sent(&mut raft), vec![]);
}

/// LOG-7: reads arriving while a round is in flight share the next one; a round lost with its
/// messages goes out again at the next heartbeat, as a new round.
#[test]
fn log7_reads_waiting_share_one_round_and_a_lost_round_is_sent_again() {
    let (mut raft, at, term) = new_leader(&["a", "b", "c"]);
    raft.handle_message(at, id("b"), ack(term, 1, None));
    request(&mut raft, at, 1).unwrap();
    drain(&mut raft);
    for read in 2..=10 {
        request(&mut raft, at, read).unwrap();
    }
    assert_eq!(rounds_sent(&mut raft), vec![]);
    // Round 1's messages are lost; the heartbeat starts round 2 for all ten reads.
    let next = raft.next_heartbeat().unwrap();
    raft.handle_timeout(next);
    let rounds = rounds_sent(&mut raft);
    assert!(!rounds.is_empty());
    assert!(
        rounds.iter().all(|(_, round)| *round == Some(2)),
        "{rounds:?}"
    );
    raft.handle_message(next, id("c"), ack(term, 1, Some(2)));
    let ready: Vec<u64> = results(&mut raft)
        .into_iter()
        .map(|(ReadId(read), index)| {
            assert_eq!(index, Ok(1));
            read
        })
        .collect();
    assert_eq!(ready, (1..=10).collect::<Vec<_>>());
    assert_eq!(
        rounds_sent(&mut raft),
        vec![],
        "nothing waits for a third round"
    );
}

/// LOG-7: a follower echoes the round of the leader it follows, on an acknowledgement and on
/// a refusal alike, and refuses reads itself, naming the leader: a read index is never taken
/// from a follower's own view.
#[test]
fn log7_a_follower_echoes_the_round_and_refuses_reads() {
    let mut raft = node("b", &["a", "b", "c"]);
    let beat = AppendEntries {
        read_round: Some(4),
        ..AppendEntries::new(1, id("a"))
    };
    raft.handle_message(ms(1), id("a"), RaftMessage::AppendEntries(beat.clone()));
    let answers = sent(&drain(&mut raft));
    assert!(
        matches!(
            answers.as_slice(),
            [(
                _,
                RaftMessage::AppendResp(AppendResp {
                    success: true,
                    read_round: Some(4),
                    ..
                })
            )]
        ),
        "{answers:?}"
    );
    let gap = AppendEntries {
        prev_index: 5,
        prev_term: 1,
        ..beat
    };
    raft.handle_message(ms(2), id("a"), RaftMessage::AppendEntries(gap));
    let answers = sent(&drain(&mut raft));
    assert!(
        matches!(
            answers.as_slice(),
            [(
                _,
                RaftMessage::AppendResp(AppendResp {
                    success: false,
                    read_round: Some(4),
                    ..
                })
            )]
        ),
        "{answers:?}"
    );
    assert_eq!(
        request(&mut raft, ms(3), 1),
        Err(ReadError::NotLeader {
            leader: Some(id("a"))
        })
    );
}

/// LOG-7: a follower whose acknowledgement waits for an fsync still echoes the round at once,
/// acknowledging only what is durable already; the full acknowledgement follows the fsync.
#[test]
fn log7_a_follower_echoes_the_round_before_its_fsync() {
    let mut raft = node("b", &["a", "b", "c"]);
    let entry = conclave_protocol::LogEntry {
        index: 1,
        term: 1,
        kind: conclave_protocol::EntryKind::Noop,
        data: Vec::new(),
    };
    let append = AppendEntries {
        entries: vec![entry],
        read_round: Some(2),
        ..AppendEntries::new(1, id("a"))
    };
    raft.handle_message(ms(1), id("a"), RaftMessage::AppendEntries(append));
    let answers = sent(&drain(&mut raft));
    assert!(
        matches!(
            answers.as_slice(),
            [(
                _,
                RaftMessage::AppendResp(AppendResp {
                    success: true,
                    match_index: 0,
                    read_round: Some(2),
                    ..
                })
            )]
        ),
        "{answers:?}"
    );
    persist_log(&mut raft, ms(2));
    let answers = sent(&drain(&mut raft));
    assert!(
        matches!(
            answers.as_slice(),
            [(
                _,
                RaftMessage::AppendResp(AppendResp {
                    success: true,
                    match_index: 1,
                    read_round: Some(2),
                    ..
                })
            )]
        ),
        "{answers:?}"
    );
}

/// LOG-7 beside PROTO-4: a batch of entries that fills the frame's entry budget carries no
/// read round, which would push the frame past the link's limit (a 250-byte ESP-NOW frame);
/// a batch with room does, and a heartbeat carries it where entries did not.
#[test]
fn log7_a_round_rides_on_entries_only_where_it_fits() {
    const BUDGET: usize = 200;
    let mut raft = raft_node(
        raft_config("a", &["a", "b", "c"]).with_log(LogConfig {
            max_append_bytes: BUDGET,
            ..LogConfig::default()
        }),
        HardState::default(),
        LogPosition::default(),
        7,
    );
    let at = win_election(&mut raft, &["b", "c"]);
    let term = raft.term();
    persist_log(&mut raft, at);
    for follower in ["b", "c"] {
        raft.handle_message(at, id(follower), ack(term, 1, None));
    }
    drain(&mut raft);
    request(&mut raft, at, 1).unwrap();
    assert_eq!(
        rounds_sent(&mut raft),
        vec![("b".into(), Some(1)), ("c".into(), Some(1))]
    );

    // An entry that takes the whole budget: the round stays off its frames.
    let full = BUDGET - crate::raft::log::wire_size_of(0);
    raft.replicated_log()
        .unwrap()
        .propose(at, vec![7; full])
        .unwrap();
    let appends: Vec<(usize, Option<u64>)> = sent(&drain(&mut raft))
        .into_iter()
        .filter_map(|(_, message)| match message {
            RaftMessage::AppendEntries(append) => Some((append.entries.len(), append.read_round)),
            _ => None,
        })
        .collect();
    assert_eq!(appends, vec![(1, None), (1, None)]);
    // Answered (without the round), so that the next write is not held to fill a frame.
    for follower in ["b", "c"] {
        raft.handle_message(at, id(follower), ack(term, 2, None));
    }
    drain(&mut raft);

    // One with room to spare carries it.
    raft.replicated_log()
        .unwrap()
        .propose(at, vec![7; full - READ_ROUND_ROOM])
        .unwrap();
    assert_eq!(
        rounds_sent(&mut raft),
        vec![("b".into(), Some(1)), ("c".into(), Some(1))]
    );

    // The heartbeat sends the round again on an AppendEntries of its own.
    let next = raft.next_heartbeat().unwrap();
    raft.handle_timeout(next);
    let rounds = rounds_sent(&mut raft);
    assert!(
        ["b", "c"].iter().all(|peer| rounds
            .iter()
            .any(|(to, round)| to == peer && round.is_some())),
        "{rounds:?}"
    );
}

/// Room a read round takes beside entries (`READ_ROUND_WIRE_BYTES`, private to the node).
const READ_ROUND_ROOM: usize = 9;
