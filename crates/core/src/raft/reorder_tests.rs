//! LOG-2 unit tests of a follower's reorder buffer: a pipelined AppendEntries that overtook its
//! predecessor is held and applied once the gap is filled, with no refusal; what is held is
//! still checked against the log when it is applied; a probe past the log's end, a full
//! buffer and a new term are answered as without a buffer.

use conclave_protocol::{AppendEntries, AppendResp, EntryKind, LogEntry};

use crate::election::HardState;
use crate::raft::{LogConfig, LogPosition, Raft, RaftMessage};
use crate::testing::{drain, id, ms, persist_log, raft_config, raft_node, sent};
use crate::time::Instant;

fn follower() -> Raft {
    let mut config = raft_config("b", &["a", "b", "c"]).with_log(LogConfig {
        max_append_bytes: 1024,
        max_append_entries: 64,
        max_inflight: 2,
        snapshot_entries: 0,
        shared_acks: false,
    });
    config.check_quorum = false;
    raft_node(config, HardState::default(), LogPosition::default(), 7)
}

pub(super) fn entry(term: u64, index: u64) -> LogEntry {
    LogEntry {
        index,
        term,
        kind: EntryKind::Command,
        data: vec![index as u8],
    }
}

/// `leader`'s AppendEntries in `term` after `(prev_term, prev_index)` carrying `entries`.
pub(super) fn append(
    leader: &str,
    term: u64,
    prev: (u64, u64),
    entries: Vec<LogEntry>,
) -> RaftMessage {
    RaftMessage::AppendEntries(AppendEntries {
        prev_term: prev.0,
        prev_index: prev.1,
        entries,
        ..AppendEntries::new(term, id(leader))
    })
}

/// The answers `raft` sent.
pub(super) fn answers(raft: &mut Raft) -> Vec<AppendResp> {
    sent(&drain(raft))
        .into_iter()
        .filter_map(|(_, message)| match message {
            RaftMessage::AppendResp(response) => Some(response),
            _ => None,
        })
        .collect()
}

/// `b` has accepted `a`'s entry 1 of term 1, durably.
fn following(now: Instant) -> Raft {
    let mut b = follower();
    b.handle_message(now, id("a"), append("a", 1, (0, 0), vec![entry(1, 1)]));
    persist_log(&mut b, now);
    drain(&mut b);
    b
}

/// LOG-2: entries 2 and 3 leave in two pipelined messages and the second arrives first. It
/// is held, not refused (a refusal would send the leader back to probing); once the first
/// arrives, both are appended and acknowledged through 3 once durable.
#[test]
fn log2_an_overtaking_append_is_held_and_used_without_a_refusal() {
    let now = ms(10);
    let mut b = following(now);
    b.handle_message(now, id("a"), append("a", 1, (1, 2), vec![entry(1, 3)]));
    assert_eq!(
        answers(&mut b),
        Vec::new(),
        "held: neither refused nor acknowledged"
    );
    assert_eq!(b.held_appends(), Some(1));
    b.handle_message(now, id("a"), append("a", 1, (1, 1), vec![entry(1, 2)]));
    assert_eq!(b.replicated_log().unwrap().last(), LogPosition::new(1, 3));
    assert_eq!(
        answers(&mut b),
        Vec::new(),
        "nothing acknowledged before the fsync"
    );
    persist_log(&mut b, now);
    let answers = answers(&mut b);
    assert!(answers.iter().all(|answer| answer.success), "{answers:?}");
    assert_eq!(answers.last().map(|answer| answer.match_index), Some(3));
    assert_eq!(b.held_appends(), Some(0));
}

/// LOG-2: a held message still goes through the match check when the gap is filled: one
/// whose `prev_term` does not match the entry the gap brought is refused with a hint.
#[test]
fn log2_a_held_append_is_checked_when_the_gap_is_filled() {
    let now = ms(10);
    let mut b = following(now);
    b.handle_message(now, id("a"), append("a", 1, (7, 2), vec![entry(7, 3)]));
    assert_eq!(answers(&mut b), Vec::new());
    b.handle_message(now, id("a"), append("a", 1, (1, 1), vec![entry(1, 2)]));
    persist_log(&mut b, now);
    let answers = answers(&mut b);
    assert!(
        answers
            .iter()
            .any(|answer| !answer.success && answer.hint.is_some())
    );
    assert_eq!(
        b.replicated_log().unwrap().last(),
        LogPosition::new(1, 2),
        "nothing unchecked appended"
    );
}

/// LOG-2: a leader's first message past the log's end (its probe from the end of its log)
/// is refused with the hint, as is one that does not fit a full buffer; a new term empties
/// the buffer.
#[test]
fn log2_probes_full_buffers_and_new_terms_are_answered_as_before() {
    let now = ms(10);
    let mut b = following(now);
    // Another leader of a later term: its heartbeat at the match it knows (none yet) is
    // accepted, but no entries were, so its probe from the end of its log is refused.
    b.handle_message(now, id("c"), append("c", 2, (0, 0), Vec::new()));
    assert!(answers(&mut b).iter().all(|answer| answer.success));
    assert!(
        b.held_appends().is_none(),
        "the new term emptied the buffer"
    );
    b.handle_message(now, id("c"), append("c", 2, (2, 5), vec![entry(2, 6)]));
    let refused = answers(&mut b);
    assert_eq!(refused.len(), 1);
    assert!(!refused[0].success);

    let mut b = following(now);
    for prev in 3..5 {
        b.handle_message(
            now,
            id("a"),
            append("a", 1, (1, prev), vec![entry(1, prev + 1)]),
        );
        assert_eq!(answers(&mut b), Vec::new());
    }
    // max_inflight is 2: the third does not fit; the buffer is emptied and it is refused.
    b.handle_message(now, id("a"), append("a", 1, (1, 5), vec![entry(1, 6)]));
    let refused = answers(&mut b);
    assert_eq!(refused.len(), 1);
    assert!(!refused[0].success);
    assert_eq!(b.held_appends(), Some(0));
}

/// LOG-2: a message sent again while a copy of it is held (the leader waits for its answer)
/// is refused, so the buffer never keeps a leader waiting.
#[test]
fn log2_a_message_sent_again_while_held_is_refused() {
    let now = ms(10);
    let mut b = following(now);
    let overtaking = append("a", 1, (1, 2), vec![entry(1, 3)]);
    b.handle_message(now, id("a"), overtaking.clone());
    assert_eq!(answers(&mut b), Vec::new());
    b.handle_message(now, id("a"), overtaking);
    let refused = answers(&mut b);
    assert_eq!(refused.len(), 1);
    assert!(!refused[0].success);
    assert_eq!(b.held_appends(), Some(0));
}
