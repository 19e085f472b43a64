//! MEMB-6 unit tests: an entry larger than a frame goes to a follower in chunks, a window
//! of them at a time, each within the frame budget; the follower gathers them and appends the entry only
//! once whole, so a partial entry is never applied nor counted for commit; a lost chunk is sent
//! again from where the follower is; a leader change mid-entry leaves nothing behind.

use std::time::Duration;

use conclave_protocol::{AppendEntries, AppendResp, EntryChunk, LogEntry};

use crate::election::HardState;
use crate::raft::node::CHUNK_OVERHEAD;
use crate::raft::{LogConfig, LogPosition, Raft, RaftMessage};
use crate::testing::{
    append_ack, drain, id, persist_log, raft_config, raft_node, sent, win_election,
};
use crate::time::Instant;

/// Frames of 128 bytes of entries.
const BUDGET: usize = 128;

fn node(me: &str) -> Raft {
    let mut config = raft_config(me, &["a", "b", "c"]).with_log(LogConfig {
        max_append_bytes: BUDGET,
        max_append_entries: 64,
        max_inflight: 8,
        snapshot_entries: 0,
        shared_acks: false,
    });
    config.check_quorum = false;
    raft_node(config, HardState::default(), LogPosition::default(), 7)
}

/// `a` leads term 1 with `b`'s vote, and `b` holds the no-op: it is replicating to `b`.
fn leader() -> (Raft, Instant) {
    let mut raft = node("a");
    let at = win_election(&mut raft, &["b"]);
    persist_log(&mut raft, at);
    raft.handle_message(at, id("b"), append_ack(raft.term(), 1));
    drain(&mut raft);
    (raft, at)
}

/// A follower `b` that holds `a`'s no-op of term 1.
fn follower(at: Instant) -> Raft {
    let mut raft = node("b");
    let noop = leader_append(
        1,
        0,
        0,
        vec![LogEntry {
            index: 1,
            term: 1,
            kind: conclave_protocol::EntryKind::Noop,
            data: Vec::new(),
        }],
    );
    raft.handle_message(at, id("a"), noop);
    persist_log(&mut raft, at);
    drain(&mut raft);
    raft
}

fn leader_append(
    term: u64,
    prev_index: u64,
    prev_term: u64,
    entries: Vec<LogEntry>,
) -> RaftMessage {
    RaftMessage::AppendEntries(AppendEntries {
        prev_index,
        prev_term,
        entries,
        ..AppendEntries::new(term, id("a"))
    })
}

/// What went to `to` among `raft`'s actions.
fn sent_to(raft: &mut Raft, to: &str) -> Vec<RaftMessage> {
    sent(&drain(raft))
        .into_iter()
        .filter(|(peer, _)| *peer == id(to))
        .map(|(_, message)| message)
        .collect()
}

fn chunks_in(messages: &[RaftMessage]) -> Vec<EntryChunk> {
    messages
        .iter()
        .filter_map(|message| match message {
            RaftMessage::AppendEntries(append) => append.chunk.as_deref().cloned(),
            _ => None,
        })
        .collect()
}

fn chunk_answers(messages: &[RaftMessage]) -> Vec<AppendResp> {
    messages
        .iter()
        .filter_map(|message| match message {
            RaftMessage::AppendResp(response) => Some(*response),
            _ => None,
        })
        .collect()
}

fn big_value(len: usize) -> Vec<u8> {
    (0..len).map(|n| (n * 7 % 251) as u8).collect()
}

/// MEMB-6: a 1,000-byte entry goes to `b` in chunks that each fit the frame budget, up to
/// `max_inflight` of them unanswered at a time, in order; `b` appends it only with the last
/// one, and the leader commits it only once `b` acknowledged the whole entry durable.
#[test]
fn memb6_an_entry_larger_than_a_frame_travels_in_chunks_and_commits_whole() {
    let (mut a, now) = leader();
    let mut b = follower(now);
    let value = big_value(1_000);
    let step = BUDGET - CHUNK_OVERHEAD;
    let position = a
        .replicated_log()
        .unwrap()
        .propose(now, value.clone())
        .unwrap();
    persist_log(&mut a, now);
    let mut to_b = sent_to(&mut a, "b");
    let mut pieces = 0;
    let mut rounds = 0;
    loop {
        let chunks = chunks_in(&to_b);
        assert!(
            (1..=8).contains(&chunks.len()),
            "a window of at most max_inflight chunks: {to_b:?}"
        );
        for chunk in &chunks {
            assert!(chunk.data.len() + CHUNK_OVERHEAD <= BUDGET);
            assert_eq!(chunk.offset as usize, pieces * step, "in order, none twice");
            pieces += 1;
        }
        rounds += 1;
        let end = chunks
            .last()
            .map_or(0, |chunk| chunk.offset as usize + chunk.data.len());
        let last = end == value.len();
        for message in to_b {
            b.handle_message(now, id("a"), message);
        }
        if !last {
            assert_eq!(
                b.replicated_log().unwrap().last().index,
                1,
                "not appended yet"
            );
        }
        persist_log(&mut b, now);
        let answers = chunk_answers(&sent_to(&mut b, "a"));
        // Each chunk answered; the last one twice: at once, as received whole (so that the
        // leader may send on), and once the entry is durable (what counts for the commit).
        assert_eq!(
            answers.len(),
            chunks.len() + usize::from(last),
            "each chunk answered"
        );
        if last {
            let received = answers[answers.len() - 2];
            assert_eq!(
                received.chunk.map(|ack| ack.next_offset as usize),
                Some(value.len())
            );
            assert!(
                received.match_index < position.index,
                "received is not durable"
            );
        }
        if !last {
            assert_eq!(
                answers
                    .last()
                    .and_then(|answer| answer.chunk)
                    .map(|ack| ack.next_offset as usize),
                Some(end)
            );
            assert!(
                answers
                    .iter()
                    .all(|answer| answer.match_index < position.index)
            );
        }
        for answer in answers {
            a.handle_message(now, id("b"), RaftMessage::AppendResp(answer));
        }
        let committed = a.replicated_log().unwrap().status().commit;
        if last {
            assert_eq!(
                committed, position.index,
                "committed once whole and durable"
            );
            break;
        }
        assert!(
            committed < position.index,
            "a partial entry is never counted"
        );
        to_b = sent_to(&mut a, "b");
    }
    assert_eq!(pieces, value.len().div_ceil(step));
    assert_eq!(rounds, pieces.div_ceil(8), "a full window each round trip");
    let held = b.replicated_log().unwrap().committed_from(2, 1);
    assert!(held.is_empty() || held[0].data == value);
    // The next small write goes in a batch, as before.
    let small = a
        .replicated_log()
        .unwrap()
        .propose(now, vec![1, 2, 3])
        .unwrap();
    let batches: Vec<RaftMessage> = sent_to(&mut a, "b");
    assert!(batches.iter().any(|message| matches!(message,
        RaftMessage::AppendEntries(append) if append.chunk.is_none() && append.entries.last().map(|entry| entry.index) == Some(small.index))));
    // b holds the whole entry.
    b.handle_message(
        now,
        id("a"),
        leader_append(1, position.index, 1, Vec::new()),
    );
    drain(&mut b);
    let a_view = a.replicated_log().unwrap();
    assert_eq!(a_view.committed_from(position.index, 1)[0].data, value);
}

fn offsets(chunks: &[EntryChunk]) -> Vec<u32> {
    chunks.iter().map(|chunk| chunk.offset).collect()
}

/// MEMB-6: a chunk lost on the way shows as answers that stop moving: the leader sends again
/// from there once, however many chunks behind the lost one repeat the answer; with every
/// answer lost, the chunks go again from the offset the follower holds once the
/// retransmission timeout passed; a follower that lost what it had asks for an earlier offset
/// and gets it.
#[test]
fn memb6_a_lost_chunk_is_sent_again() {
    let (mut a, mut now) = leader();
    let value = big_value(500);
    a.replicated_log().unwrap().propose(now, value).unwrap();
    persist_log(&mut a, now);
    let step = (BUDGET - CHUNK_OVERHEAD) as u32;
    let all: Vec<u32> = (0..6).map(|n| n * step).collect();
    assert_eq!(offsets(&chunks_in(&sent_to(&mut a, "b"))), all);
    // b holds the first chunk; the second is lost, so the four behind it are answered with
    // the offset b still waits for.
    a.handle_message(now, id("b"), chunk_ack(1, 1, 2, step));
    assert!(
        chunks_in(&sent_to(&mut a, "b")).is_empty(),
        "an answer that moves sends nothing new: all went"
    );
    a.handle_message(now, id("b"), chunk_ack(1, 1, 2, step));
    assert_eq!(
        offsets(&chunks_in(&sent_to(&mut a, "b"))),
        all[1..],
        "back to the lost chunk once"
    );
    for _ in 0..3 {
        a.handle_message(now, id("b"), chunk_ack(1, 1, 2, step));
        assert!(
            chunks_in(&sent_to(&mut a, "b")).is_empty(),
            "the same answer again sends nothing"
        );
    }
    // Everything sent again is lost: nothing more goes until the timeout (a heartbeat
    // interval before any measurement).
    let mut resent = Vec::new();
    while resent.is_empty() {
        let at = a.poll_timeout().expect("a leader has a heartbeat timer");
        assert!(
            at <= now + Duration::from_secs(1),
            "resent within the election timeout"
        );
        now = at;
        a.handle_timeout(now);
        resent = chunks_in(&sent_to(&mut a, "b"));
    }
    assert_eq!(offsets(&resent), all[1..]);
    // b restarted and lost what it had: it asks for the start again.
    a.handle_message(now, id("b"), chunk_ack(1, 1, 2, 0));
    assert_eq!(offsets(&chunks_in(&sent_to(&mut a, "b"))), all);
    // A duplicate of that answer sends nothing more.
    a.handle_message(now, id("b"), chunk_ack(1, 1, 2, 0));
    assert!(chunks_in(&sent_to(&mut a, "b")).is_empty());
}

fn chunk_ack(term: u64, matched: u64, index: u64, next_offset: u32) -> RaftMessage {
    RaftMessage::AppendResp(AppendResp {
        term,
        success: true,
        match_index: matched,
        chunk: Some(conclave_protocol::ChunkAck { index, next_offset }),
        ..AppendResp::default()
    })
}

fn chunk_of(
    term: u64,
    leader: &str,
    entry_term: u64,
    value: &[u8],
    offset: usize,
    len: usize,
) -> RaftMessage {
    RaftMessage::AppendEntries(AppendEntries {
        prev_index: 1,
        prev_term: 1,
        commit: 1,
        chunk: Some(Box::new(EntryChunk {
            index: 2,
            term: entry_term,
            kind: conclave_protocol::EntryKind::Command,
            offset: offset as u32,
            total_len: value.len() as u32,
            data: value[offset..offset + len].to_vec(),
        })),
        ..AppendEntries::new(term, id(leader))
    })
}

/// MEMB-6: a follower that received half an entry from the leader of term 1 drops it when
/// the leader of term 2 speaks: that leader's chunk from the middle is answered with offset 0,
/// and an entry is appended only from one leader's whole stream.
#[test]
fn memb6_a_leader_change_mid_entry_leaves_nothing_half_written() {
    let now = Instant::ZERO;
    let mut b = follower(now);
    let old = big_value(300);
    b.handle_message(now, id("a"), chunk_of(1, "a", 1, &old, 0, 100));
    let answers = chunk_answers(&sent_to(&mut b, "a"));
    assert_eq!(answers[0].chunk.map(|ack| ack.next_offset), Some(100));
    // c leads term 2 with another entry at index 2, and starts mid-way (its own stream).
    let new: Vec<u8> = old.iter().map(|byte| byte ^ 0xff).collect();
    b.handle_message(now, id("c"), chunk_of(2, "c", 2, &new, 100, 100));
    persist_log(&mut b, now);
    let answers = chunk_answers(&sent_to(&mut b, "c"));
    assert_eq!(
        answers
            .last()
            .and_then(|ack| ack.chunk)
            .map(|ack| ack.next_offset),
        Some(0)
    );
    // a's old chunks, of a stale term, are refused and change nothing.
    b.handle_message(now, id("a"), chunk_of(1, "a", 1, &old, 100, 200));
    drain(&mut b);
    assert_eq!(
        b.replicated_log().unwrap().last().index,
        1,
        "nothing half-written"
    );
    // c's whole stream appends c's entry.
    for offset in [0, 100, 200] {
        b.handle_message(now, id("c"), chunk_of(2, "c", 2, &new, offset, 100));
    }
    persist_log(&mut b, now);
    let answers = chunk_answers(&sent_to(&mut b, "c"));
    assert_eq!(
        answers
            .last()
            .map(|ack| (ack.success, ack.match_index, ack.chunk)),
        Some((true, 2, None))
    );
    b.handle_message(
        now,
        id("c"),
        RaftMessage::AppendEntries(AppendEntries {
            prev_index: 2,
            prev_term: 2,
            commit: 2,
            ..AppendEntries::new(2, id("c"))
        }),
    );
    persist_log(&mut b, now);
    drain(&mut b);
    let mut log = b.replicated_log().unwrap();
    let applied = log.take_committed(usize::MAX);
    assert_eq!(
        applied
            .last()
            .map(|entry| (entry.index, entry.term, entry.data.clone())),
        Some((2, 2, new))
    );
}

/// MEMB-6: a chunk whose previous entry this log does not hold is refused, like entries, and
/// drops the entry being received; a chunk of an entry already held is acknowledged as that
/// entry; a chunk past its entry's length, or of an entry over the limit, is dropped.
#[test]
fn memb6_chunks_are_checked_like_entries() {
    let now = Instant::ZERO;
    let mut b = follower(now);
    let value = big_value(300);
    b.handle_message(now, id("a"), chunk_of(1, "a", 1, &value, 0, 100));
    drain(&mut b);
    let mut stray = chunk_of(1, "a", 1, &value, 100, 100);
    if let RaftMessage::AppendEntries(append) = &mut stray {
        append.prev_index = 5;
        if let Some(chunk) = &mut append.chunk {
            chunk.index = 6;
        }
    }
    b.handle_message(now, id("a"), stray);
    let answers = chunk_answers(&sent_to(&mut b, "a"));
    assert_eq!(
        answers.iter().map(|ack| ack.success).collect::<Vec<_>>(),
        [false]
    );
    // The partial was dropped: the next chunk of the first stream asks for offset 0.
    b.handle_message(now, id("a"), chunk_of(1, "a", 1, &value, 100, 100));
    let answers = chunk_answers(&sent_to(&mut b, "a"));
    assert_eq!(answers[0].chunk.map(|ack| ack.next_offset), Some(0));
    // Malformed: past the entry's length.
    let mut long = chunk_of(1, "a", 1, &value, 200, 100);
    if let RaftMessage::AppendEntries(append) = &mut long {
        if let Some(chunk) = &mut append.chunk {
            chunk.total_len = 250;
        }
    }
    b.handle_message(now, id("a"), long);
    assert!(
        chunk_answers(&sent_to(&mut b, "a")).is_empty(),
        "dropped unanswered"
    );
    // The whole entry, then its last chunk again: acknowledged as held.
    for offset in [0, 100, 200] {
        b.handle_message(now, id("a"), chunk_of(1, "a", 1, &value, offset, 100));
    }
    persist_log(&mut b, now);
    drain(&mut b);
    b.handle_message(now, id("a"), chunk_of(1, "a", 1, &value, 200, 100));
    let answers = chunk_answers(&sent_to(&mut b, "a"));
    assert_eq!(
        answers
            .iter()
            .map(|ack| (ack.success, ack.match_index, ack.chunk))
            .collect::<Vec<_>>(),
        [(true, 2, None)]
    );
}

/// MEMB-6: a write larger than an entry may carry is refused; one at the limit is taken.
#[test]
fn memb6_the_entry_limit_is_enforced_at_the_proposal() {
    let (mut a, now) = leader();
    let limit = crate::raft::MAX_ENTRY_BYTES;
    let mut log = a.replicated_log().unwrap();
    assert!(log.propose(now, vec![0; limit]).is_ok());
    assert_eq!(
        log.propose(now, vec![0; limit + 1]),
        Err(crate::raft::ProposeError::TooLarge {
            size: limit + 1,
            max: limit
        })
    );
}
