//! LOG-2 unit tests of the pipeline to one follower: a message still unanswered is taken as
//! lost only once the follower's retransmission timeout has passed, and that timeout is learnt
//! from the follower's round trips — so a slow link, where messages queue for the air, is not
//! flooded with copies of messages that are only waiting.

use std::time::Duration;

use conclave_protocol::AppendEntries;

use crate::election::HardState;
use crate::raft::{LogConfig, LogPosition, Raft, RaftMessage};
use crate::testing::{
    append_ack, drain, id, persist_log, raft_config, raft_node, sent, win_election,
};
use crate::time::Instant;

/// Heartbeat 50 ms (the test configuration's), election timeout 150–300 ms.
const ROUND_TRIP: Duration = Duration::from_millis(120);

/// `a` leads term 1 with `b`'s vote, and `b` holds the no-op: it is replicating to `b`.
/// Without check-quorum, so that the test answers only what it means to.
fn leader() -> (Raft, Instant) {
    let mut config = raft_config("a", &["a", "b", "c"]).with_log(LogConfig {
        max_append_bytes: 1024,
        max_append_entries: 64,
        max_inflight: 8,
        snapshot_entries: 10_000,
        shared_acks: false,
    });
    config.check_quorum = false;
    let mut raft = raft_node(config, HardState::default(), LogPosition::default(), 7);
    let at = win_election(&mut raft, &["b"]);
    persist_log(&mut raft, at);
    raft.handle_message(at, id("b"), append_ack(raft.term(), 1));
    drain(&mut raft);
    (raft, at)
}

/// The AppendEntries carrying entries that went to `b` among what the leader did.
fn entries_to_b(raft: &mut Raft) -> Vec<AppendEntries> {
    sent(&drain(raft))
        .into_iter()
        .filter_map(|(to, message)| match message {
            RaftMessage::AppendEntries(append) if to == id("b") && !append.entries.is_empty() => {
                Some(append)
            }
            _ => None,
        })
        .collect()
}

/// Runs the leader's timers up to `until`, collecting what went to `b` meanwhile.
fn run_until(raft: &mut Raft, until: Instant) -> Vec<AppendEntries> {
    let mut appends = Vec::new();
    while let Some(at) = raft.poll_timeout().filter(|at| *at <= until) {
        raft.handle_timeout(at);
        persist_log(raft, at);
        appends.extend(entries_to_b(raft));
    }
    appends
}

/// LOG-2: `b` answers every write 120 ms after it left — more than two heartbeat intervals.
/// Once the leader has measured that, each write goes to `b` once; a message that `b` really
/// never answers is still sent again, by the maximum election timeout at the latest.
#[test]
fn log2_a_slow_follower_is_not_sent_what_is_only_waiting() {
    let (mut raft, mut now) = leader();
    let term = raft.term();
    let mut copies = Vec::new();
    for write in 0..10u8 {
        now += Duration::from_millis(7);
        let position = raft
            .replicated_log()
            .unwrap()
            .propose(now, vec![write])
            .unwrap();
        persist_log(&mut raft, now);
        let mut appends = entries_to_b(&mut raft);
        appends.extend(run_until(&mut raft, now + ROUND_TRIP));
        copies.push(appends.len());
        now += ROUND_TRIP;
        raft.handle_message(now, id("b"), append_ack(term, position.index));
        let _ = entries_to_b(&mut raft);
    }
    // The first writes may be sent again while the round trip is learnt; none after.
    assert!(
        copies[5..].iter().all(|&n| n == 1),
        "copies per write: {copies:?}"
    );
    assert!(
        copies[0] > 1,
        "the first write is sent again before anything is measured"
    );

    now += Duration::from_millis(7);
    raft.replicated_log()
        .unwrap()
        .propose(now, vec![0xff])
        .unwrap();
    persist_log(&mut raft, now);
    assert_eq!(entries_to_b(&mut raft).len(), 1);
    let resent = run_until(&mut raft, now + Duration::from_millis(300 + 50));
    assert!(!resent.is_empty(), "an unanswered message is sent again");
}

/// Issue 27, item 1: followers in step are sent the same AppendEntries, which leaves in one
/// [`Outgoing::Multicast`]; one that is not in step gets its own. A follower that refuses
/// the multicast it overheard, meant for the others, keeps its own pipeline.
#[test]
fn followers_in_step_share_one_append() {
    use crate::election::{Outgoing, Outputs};

    let (mut raft, now) = leader();
    let term = raft.term();
    raft.handle_message(now, id("c"), append_ack(term, 1));
    drain(&mut raft);
    raft.replicated_log()
        .unwrap()
        .propose(now, vec![1])
        .unwrap();
    persist_log(&mut raft, now);
    let ready = raft.take_ready();
    let shared: Vec<_> = ready
        .messages
        .iter()
        .filter_map(|outgoing| match outgoing {
            Outgoing::Multicast { to, message } => Some((to.clone(), message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(shared.len(), 1, "{:?}", ready.messages);
    assert_eq!(shared[0].0, vec![id("b"), id("c")]);
    assert!(
        !ready
            .messages
            .iter()
            .any(|outgoing| matches!(outgoing, Outgoing::Send { .. })),
        "nothing else goes one by one: {:?}",
        ready.messages
    );

    // `c` falls behind: it answers the next write only after two more are proposed to it.
    let mut last = 2;
    for write in 2..4u8 {
        last = raft
            .replicated_log()
            .unwrap()
            .propose(now, vec![write])
            .unwrap()
            .index;
        persist_log(&mut raft, now);
        drain(&mut raft);
    }
    raft.handle_message(now, id("b"), append_ack(term, last));
    // `c` overheard a later AppendEntries meant for `b` alone and refuses it: too short.
    let overheard = conclave_protocol::AppendResp {
        term,
        success: false,
        match_index: last,
        hint: Some(conclave_protocol::ConflictHint { index: 3, term: 0 }),
        ..conclave_protocol::AppendResp::default()
    };
    raft.handle_message(now, id("c"), RaftMessage::AppendResp(overheard));
    let resent: Vec<_> = sent(&drain(&mut raft))
        .into_iter()
        .filter(|(to, _)| *to == id("c"))
        .collect();
    assert!(
        resent.is_empty(),
        "an overheard refusal sends nothing again: {resent:?}"
    );
}

/// Issue 26: with a message to `b` unanswered, a client's write waits for `b`'s answer
/// instead of leaving alone in a second frame, and then rides with every write that came
/// meanwhile in one message; writes that fill a frame go at once, window permitting.
#[test]
fn log2_writes_behind_a_busy_pipeline_gather_into_one_frame() {
    let (mut raft, mut now) = leader();
    let term = raft.term();
    let propose = |raft: &mut Raft, now, data: Vec<u8>| {
        let position = raft.replicated_log().unwrap().propose(now, data).unwrap();
        persist_log(raft, now);
        position.index
    };
    // Nothing is unanswered: the first write goes at once.
    let first = propose(&mut raft, now, vec![1]);
    assert_eq!(entries_to_b(&mut raft).len(), 1);
    // Three more wait: a message is in flight and they do not fill a frame.
    for byte in 2..=4 {
        propose(&mut raft, now, vec![byte]);
        assert!(
            entries_to_b(&mut raft).is_empty(),
            "write {byte} left alone"
        );
    }
    // `b` answers the first: one message carries the three that waited.
    now += Duration::from_millis(1);
    raft.handle_message(now, id("b"), append_ack(term, first));
    let appends = entries_to_b(&mut raft);
    assert_eq!(appends.len(), 1, "{appends:?}");
    let carried: Vec<u8> = appends[0].entries.iter().map(|e| e.data[0]).collect();
    assert_eq!(carried, vec![2, 3, 4]);
    // Writes that fill a frame beside what waits go without an answer.
    let big = vec![7u8; 600];
    propose(&mut raft, now, big.clone());
    assert!(
        entries_to_b(&mut raft).is_empty(),
        "600 bytes fill no 1024-byte frame"
    );
    propose(&mut raft, now, big);
    let appends = entries_to_b(&mut raft);
    assert_eq!(appends.len(), 1, "a full frame waits for nothing");
    assert_eq!(
        appends[0].entries.len(),
        1,
        "what fits the frame: the first 600 bytes"
    );
}
