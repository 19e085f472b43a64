//! LOG-4 unit tests: a snapshot is due every `snapshot_entries` applied entries and compacts
//! the log; a follower behind the compaction point gets the snapshot in chunks, one in flight,
//! resumed from the offset it expects after a lost chunk, then entries; a follower installs a
//! snapshot and acknowledges it only once the driver reported it durable.

use bytes::Bytes;
use conclave_protocol::{AppendEntries, AppendResp, ConflictHint, InstallSnapshot, SnapshotResp};

use crate::election::{Action, HardState};
use crate::raft::{LogConfig, LogPosition, Raft, RaftMessage};
use crate::storage::Snapshot;
use crate::testing::{
    append_ack, drain, id, persist_log, raft_config, raft_node, sent, win_election,
};
use crate::time::Instant;

/// Chunks of 64 bytes, a snapshot every 5 entries.
fn log_config() -> LogConfig {
    LogConfig {
        max_append_bytes: 64,
        max_append_entries: 64,
        max_inflight: 8,
        snapshot_entries: 5,
        shared_acks: false,
    }
}

fn node(me: &str) -> Raft {
    raft_node(
        raft_config(me, &["a", "b", "c"]).with_log(log_config()),
        HardState::default(),
        LogPosition::default(),
        7,
    )
}

fn refusal(term: u64, index: u64) -> RaftMessage {
    RaftMessage::AppendResp(AppendResp {
        term,
        success: false,
        match_index: 0,
        hint: Some(ConflictHint { index, term: 0 }),
        ..AppendResp::default()
    })
}

/// `a` leads term 1 with `b`'s vote, has committed and applied its no-op and `writes` entries
/// (b acknowledged them), and took the snapshot that fell due, of `image` bytes; with what it
/// sent once it took it (c, never heard, is behind it).
fn leader_with_snapshot(writes: u64, image: usize) -> (Raft, Instant, Snapshot, Vec<Action>) {
    let mut raft = node("a");
    let at = win_election(&mut raft, &["b"]);
    let term = raft.term();
    for n in 0..writes {
        raft.replicated_log()
            .unwrap()
            .propose(at, vec![n as u8])
            .unwrap();
    }
    persist_log(&mut raft, at);
    raft.handle_message(at, id("b"), append_ack(term, writes + 1));
    drain(&mut raft);
    let mut log = raft.replicated_log().unwrap();
    assert_eq!(log.take_committed(usize::MAX).len() as u64, writes + 1);
    let due = log.snapshot_due().expect("a snapshot is due");
    assert_eq!(due, LogPosition::new(term, writes + 1));
    let snapshot = Snapshot {
        last: due,
        data: (0..image).map(|n| n as u8).collect(),
        config: None,
    };
    assert!(log.snapshot_taken(at, snapshot.clone()));
    assert_eq!(log.status().snapshot, due);
    assert_eq!(log.snapshot_due(), None);
    let actions = drain(&mut raft);
    (raft, at, snapshot, actions)
}

/// The one InstallSnapshot among `actions`, to `c`.
fn chunk_to_c(actions: &[Action]) -> Option<InstallSnapshot> {
    let chunks: Vec<InstallSnapshot> = sent(actions)
        .into_iter()
        .filter_map(|(to, message)| match message {
            RaftMessage::InstallSnapshot(chunk) if to == id("c") => Some(chunk),
            _ => None,
        })
        .collect();
    assert!(chunks.len() <= 1, "one chunk in flight: {chunks:?}");
    chunks.into_iter().next()
}

/// LOG-4: a snapshot is due once `snapshot_entries` entries were applied since the last one;
/// taking it drops the entries it covers, and one behind it or past the applied index is
/// refused.
#[test]
fn log4_a_snapshot_falls_due_and_compacts_the_log() {
    let (mut raft, at, snapshot, _) = leader_with_snapshot(5, 10);
    let mut log = raft.replicated_log().unwrap();
    // Behind the snapshot, and past what was applied: refused, nothing changes.
    assert!(!log.snapshot_taken(at, snapshot.clone()));
    let ahead = Snapshot {
        last: LogPosition::new(1, 9),
        data: Bytes::new(),
        config: None,
    };
    assert!(!log.snapshot_taken(at, ahead));
    assert_eq!(log.status().snapshot, snapshot.last);
    assert_eq!(raft.log_first_index(), 6);
    assert_eq!(raft.log_term_at(5), None);
    assert_eq!(raft.log_term_at(6), Some(1));
}

/// LOG-4: a follower behind the compaction point gets the snapshot in chunks of at most
/// `max_append_bytes`, one at a time; a lost chunk is sent again at the heartbeat and the
/// transfer resumes from the offset the follower expects, not from the start; once the
/// follower acknowledges the install, entries follow from the snapshot on.
#[test]
fn log4_a_follower_far_behind_gets_the_snapshot_in_chunks_then_entries() {
    let (mut raft, at, snapshot, actions) = leader_with_snapshot(5, 150);
    let term = raft.term();
    // c was being probed from the start, which the snapshot just compacted away.
    let first = chunk_to_c(&actions).expect("the first chunk");
    assert_eq!(
        first,
        InstallSnapshot {
            term,
            leader: id("a"),
            last_index: 6,
            last_term: term,
            offset: 0,
            data: snapshot.data[..64].to_vec(),
            done: false,
            config: None,
        }
    );
    let resp = |next_offset, success| {
        RaftMessage::SnapshotResp(SnapshotResp {
            term,
            last_index: 6,
            next_offset,
            success,
        })
    };
    raft.handle_message(at, id("c"), resp(64, true));
    let second = chunk_to_c(&drain(&mut raft)).expect("the second chunk");
    assert_eq!(
        (second.offset, second.data.len(), second.done),
        (64, 64, false)
    );
    // The second chunk is lost: nothing more goes out until the heartbeat sends it again.
    raft.handle_message(at, id("c"), resp(64, true));
    assert_eq!(chunk_to_c(&drain(&mut raft)), None);
    let beat = raft.poll_timeout().unwrap();
    raft.handle_timeout(beat);
    let again = chunk_to_c(&drain(&mut raft)).expect("the lost chunk again");
    assert_eq!(again, second);
    raft.handle_message(beat, id("c"), resp(128, true));
    let last = chunk_to_c(&drain(&mut raft)).expect("the last chunk");
    assert_eq!(
        (last.offset, last.data.as_slice(), last.done),
        (128, &snapshot.data[128..], true)
    );
    // A late refusal of the old probe changes nothing: the transfer goes on.
    raft.handle_message(beat, id("c"), refusal(term, 1));
    assert_eq!(chunk_to_c(&drain(&mut raft)), None);
    // c installed it durably: entries from the snapshot on.
    raft.replicated_log()
        .unwrap()
        .propose(beat, vec![9])
        .unwrap();
    drain(&mut raft);
    raft.handle_message(beat, id("c"), append_ack(term, 6));
    let to_c: Vec<RaftMessage> = sent(&drain(&mut raft))
        .into_iter()
        .filter(|(to, _)| *to == id("c"))
        .map(|(_, message)| message)
        .collect();
    let [RaftMessage::AppendEntries(append)] = to_c.as_slice() else {
        panic!("one AppendEntries after the install: {to_c:?}");
    };
    assert_eq!((append.prev_index, append.prev_term), (6, term));
    assert_eq!(append.entries.len(), 1);
    assert_eq!(append.entries[0].index, 7);
    let status = raft.replicated_log().unwrap().status();
    assert!(status.followers.contains(&(id("c"), 6)), "{status:?}");
}

/// LOG-4: a follower buffers chunks in order and answers a chunk out of order with the
/// offset it expects; with the last chunk its log restarts after the snapshot, the driver
/// takes the snapshot, and the install is acknowledged only once the driver reports it
/// durable (LOG-3's rule). Entries after the snapshot are then appended as usual.
#[test]
fn log4_a_follower_installs_a_snapshot_and_acknowledges_it_once_durable() {
    let mut raft = node("b");
    let at = Instant::ZERO;
    let data: Vec<u8> = (0..100).collect();
    let chunk = |offset: usize, end: usize, done| {
        RaftMessage::InstallSnapshot(InstallSnapshot {
            term: 2,
            leader: id("a"),
            last_index: 40,
            last_term: 2,
            offset: offset as u64,
            data: data[offset..end].to_vec(),
            done,
            config: None,
        })
    };
    let answers = |raft: &mut Raft| -> Vec<RaftMessage> {
        sent(&drain(raft))
            .into_iter()
            .map(|(to, message)| {
                assert_eq!(to, id("a"));
                message
            })
            .collect()
    };
    let resp = |next_offset, success| {
        RaftMessage::SnapshotResp(SnapshotResp {
            term: 2,
            last_index: 40,
            next_offset,
            success,
        })
    };
    raft.handle_message(at, id("a"), chunk(0, 64, false));
    assert_eq!(answers(&mut raft), vec![resp(64, true)]);
    // The same chunk twice (a duplicate), then one from further on (one lost in between).
    raft.handle_message(at, id("a"), chunk(0, 64, false));
    assert_eq!(answers(&mut raft), vec![resp(64, true)]);
    raft.handle_message(at, id("a"), chunk(80, 100, true));
    assert_eq!(answers(&mut raft), vec![resp(64, false)]);
    assert!(
        raft.replicated_log()
            .unwrap()
            .take_snapshot_to_install()
            .is_none()
    );
    raft.handle_message(at, id("a"), chunk(64, 100, true));
    assert_eq!(
        answers(&mut raft),
        vec![],
        "no acknowledgement before it is durable"
    );
    let mut log = raft.replicated_log().unwrap();
    let installed = log.take_snapshot_to_install().expect("the driver gets it");
    assert_eq!(
        installed,
        Snapshot {
            last: LogPosition::new(2, 40),
            data: data.clone().into(),
            config: None,
        }
    );
    let status = log.status();
    assert_eq!(
        (status.snapshot, status.commit, status.applied),
        (LogPosition::new(2, 40), 40, 40)
    );
    assert!(log.take_committed(usize::MAX).is_empty());
    assert!(
        log.take_write().is_none(),
        "the snapshot is the driver's to save"
    );
    // The last chunk again while it is being saved: still no acknowledgement.
    raft.handle_message(at, id("a"), chunk(64, 100, true));
    assert_eq!(answers(&mut raft), vec![]);
    raft.replicated_log()
        .unwrap()
        .handle_snapshot_persisted(at, LogPosition::new(2, 40));
    assert_eq!(answers(&mut raft), vec![append_ack(2, 40)]);
    // Entries follow the snapshot.
    let entry = conclave_protocol::LogEntry {
        index: 41,
        term: 2,
        kind: conclave_protocol::EntryKind::Command,
        data: vec![1],
    };
    raft.handle_message(
        at,
        id("a"),
        RaftMessage::AppendEntries(AppendEntries {
            prev_index: 40,
            prev_term: 2,
            entries: vec![entry],
            commit: 41,
            ..AppendEntries::new(2, id("a"))
        }),
    );
    persist_log(&mut raft, at);
    assert_eq!(answers(&mut raft), vec![append_ack(2, 41)]);
    let applied = raft.replicated_log().unwrap().take_committed(usize::MAX);
    assert_eq!(
        applied.iter().map(|e| e.index).collect::<Vec<_>>(),
        vec![41]
    );
}

/// LOG-4: a chunk of a snapshot the follower already holds committed (a late chunk, or the
/// last one sent again) changes nothing and is answered with a durable acknowledgement.
#[test]
fn log4_a_snapshot_already_held_is_acknowledged_not_installed() {
    let (mut follower, at, _, _) = leader_with_snapshot(5, 10);
    // The node that led term 1 hears a leader of term 2 offer a snapshot it holds.
    follower.handle_message(
        at,
        id("b"),
        RaftMessage::InstallSnapshot(InstallSnapshot {
            term: 2,
            leader: id("b"),
            last_index: 4,
            last_term: 1,
            offset: 0,
            data: vec![0; 64],
            done: false,
            config: None,
        }),
    );
    let answers: Vec<RaftMessage> = sent(&drain(&mut follower))
        .into_iter()
        .map(|(_, message)| message)
        .collect();
    assert_eq!(answers, vec![append_ack(2, 4)]);
    let mut log = follower.replicated_log().unwrap();
    assert!(log.take_snapshot_to_install().is_none());
    assert_eq!(log.status().snapshot, LogPosition::new(1, 6));
}

/// `a` leads term 1 with the no-op and 5 writes durable and applied-to-be: `c` acknowledged
/// all 6, `b` only the first 3.
fn leader_with_b_behind() -> (Raft, Instant, u64) {
    let mut raft = node("a");
    let at = win_election(&mut raft, &["b"]);
    let term = raft.term();
    for n in 0..5 {
        raft.replicated_log().unwrap().propose(at, vec![n]).unwrap();
    }
    persist_log(&mut raft, at);
    raft.handle_message(at, id("c"), append_ack(term, 6));
    raft.handle_message(at, id("b"), append_ack(term, 3));
    (raft, at, term)
}

/// LOG-4: a leader does not compact away what a follower catching up by entries still lacks:
/// the snapshot waits while `b`'s pipeline runs behind, falls due once `b` holds what was
/// applied, and does not wait past twice `snapshot_entries` for a follower that stays behind.
#[test]
fn log4_a_leader_waits_for_a_follower_catching_up_by_entries() {
    let (mut raft, at, term) = leader_with_b_behind();
    let propose = |raft: &mut Raft, writes: std::ops::Range<u8>| {
        for n in writes {
            raft.replicated_log().unwrap().propose(at, vec![n]).unwrap();
        }
        persist_log(raft, at);
    };
    drain(&mut raft);
    let mut log = raft.replicated_log().unwrap();
    assert_eq!(log.take_committed(usize::MAX).len(), 6);
    assert_eq!(
        log.snapshot_due(),
        None,
        "b would need the snapshot for 3 entries"
    );

    raft.handle_message(at, id("b"), append_ack(term, 6));
    drain(&mut raft);
    let log = raft.replicated_log().unwrap();
    assert_eq!(log.snapshot_due(), Some(LogPosition::new(term, 6)));

    // b stays at 6 while 5 more are applied (11 since the last snapshot, none taken yet):
    // past twice `snapshot_entries`, the snapshot no longer waits.
    propose(&mut raft, 5..10);
    raft.handle_message(at, id("c"), append_ack(term, 11));
    drain(&mut raft);
    let mut log = raft.replicated_log().unwrap();
    assert_eq!(log.take_committed(usize::MAX).len(), 5);
    assert_eq!(log.snapshot_due(), Some(LogPosition::new(term, 11)));
}

/// LOG-4: a follower being probed again (it refused a message, as a busy follower on a link
/// that reorders frames does) still holds the snapshot back while it answers; once it has been
/// silent for a few heartbeat intervals it holds nothing back.
#[test]
fn log4_a_probed_follower_that_answers_holds_the_snapshot_back_a_silent_one_does_not() {
    let (mut raft, at, term) = leader_with_b_behind();
    // b refuses a message whose predecessor it has not seen yet: probed again from 4.
    raft.handle_message(at, id("b"), refusal(term, 4));
    drain(&mut raft);
    let mut log = raft.replicated_log().unwrap();
    assert_eq!(log.take_committed(usize::MAX).len(), 6);
    assert_eq!(
        log.snapshot_due(),
        None,
        "b answers and would need the snapshot for 3 entries"
    );

    // b falls silent: after a few heartbeats the snapshot no longer waits for it.
    for _ in 0..4 {
        let now = raft.next_heartbeat().unwrap();
        raft.handle_timeout(now);
        raft.handle_message(now, id("c"), append_ack(term, 6));
        drain(&mut raft);
    }
    assert_eq!(
        raft.replicated_log().unwrap().snapshot_due(),
        Some(LogPosition::new(term, 6))
    );
}

/// LOG-4: what a follower holds of a snapshot being received is bounded. Past the bound it
/// drops what it holds and refuses the rest of that snapshot, even from its start again,
/// answering each chunk as a copy of one it has (so the leader resends only at heartbeat
/// pace) and installing nothing; another snapshot is received afresh.
#[test]
fn log4_a_snapshot_past_the_bound_is_dropped_and_refused() {
    let mut raft = node("b");
    raft.limit_incoming_snapshot(100);
    let at = Instant::ZERO;
    let data: Vec<u8> = (0..=255).collect();
    let chunk = |last_index: u64, offset: usize, end: usize, done| {
        RaftMessage::InstallSnapshot(InstallSnapshot {
            term: 2,
            leader: id("a"),
            last_index,
            last_term: 2,
            offset: offset as u64,
            data: data[offset..end].to_vec(),
            done,
            config: None,
        })
    };
    let resp = |last_index, next_offset, success| {
        RaftMessage::SnapshotResp(SnapshotResp {
            term: 2,
            last_index,
            next_offset,
            success,
        })
    };
    let answers = |raft: &mut Raft| -> Vec<RaftMessage> {
        sent(&drain(raft))
            .into_iter()
            .map(|(_, message)| message)
            .collect()
    };
    raft.handle_message(at, id("a"), chunk(40, 0, 64, false));
    assert_eq!(answers(&mut raft), vec![resp(40, 64, true)]);
    // 128 bytes would be held: past the bound.
    raft.handle_message(at, id("a"), chunk(40, 64, 128, false));
    assert_eq!(answers(&mut raft), vec![resp(40, 64, true)]);
    for (offset, end, done) in [(0, 64, false), (64, 128, false), (128, 200, true)] {
        raft.handle_message(at, id("a"), chunk(40, offset, end, done));
        assert_eq!(answers(&mut raft), vec![resp(40, offset as u64, true)]);
    }
    assert!(
        raft.replicated_log()
            .unwrap()
            .take_snapshot_to_install()
            .is_none()
    );
    assert_eq!(
        raft.replicated_log().unwrap().last(),
        LogPosition::default()
    );
    // A new snapshot is another matter.
    raft.handle_message(at, id("a"), chunk(50, 0, 64, false));
    assert_eq!(answers(&mut raft), vec![resp(50, 64, true)]);
}
