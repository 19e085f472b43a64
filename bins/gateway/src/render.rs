//! Human-readable renderings of the admin API's answers, and when to use colour.

use std::fmt::Write;
use std::io::IsTerminal;

use conclave_api::{
    CommandAnswer, ConfigurationAnswer, DongleAnswer, HistoryAnswer, LogStatus, PeerAnswer,
    PeersAnswer, StatusAnswer, UnansweredAnswer, human_duration, rfc3339_utc,
};

/// Rows of cells as left-aligned columns two spaces apart, one line per row, without
/// trailing spaces (`member list`, `session list`).
pub(crate) fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect();
    lines.join("\n")
}

/// Whether output to `stream` may carry colour: only on a terminal, and never with `NO_COLOR`
/// set to anything (<https://no-color.org>).
pub(crate) fn colour(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// `1 voter`, `3 voters`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn or_dash(value: Option<&str>) -> &str {
    value.unwrap_or("-")
}

/// A round trip for people: microseconds below a millisecond, then milliseconds with the
/// digits that mean something; `unknown` when there is none (never measured, or the peer is
/// disconnected and an old figure would mislead).
pub(crate) fn rtt(rtt_ms: Option<f64>) -> String {
    match rtt_ms {
        None => "unknown".to_owned(),
        Some(ms) if ms < 1.0 => format!("{:.0} µs", ms * 1000.0),
        Some(ms) if ms < 10.0 => format!("{ms:.2} ms"),
        Some(ms) if ms < 100.0 => format!("{ms:.1} ms"),
        Some(ms) => format!("{ms:.0} ms"),
    }
}

/// `conclave status`.
pub(crate) fn status(status: &StatusAnswer) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "node        {} (cluster {}, incarnation {})",
        status.node_id, status.cluster_id, status.incarnation
    );
    // The phase is shown when it says more than the role (a raft pre-candidate).
    let role = if status.phase.is_empty() || status.phase == status.role {
        status.role.clone()
    } else {
        format!("{} ({})", status.role, status.phase)
    };
    let _ = writeln!(
        out,
        "role        {:<14} term {} ({} mode)",
        role, status.fencing.term, status.mode
    );
    let _ = writeln!(
        out,
        "leader      {:<14} fencing token {}",
        or_dash(status.fencing.leader.as_deref()),
        or_dash(status.fencing.fencing_token.as_deref())
    );
    quorum_lines(&mut out, status);
    if let Some(log) = &status.log {
        log_lines(&mut out, log);
    }
    mode_lines(&mut out, status);
    if let Some(dongle) = &status.dongle {
        dongle_lines(&mut out, dongle);
    }
    warning_lines(&mut out, status);
    out.push('\n');
    out.push_str(&peers(&status.peers));
    out.push_str(&unanswered(&status.unanswered));
    out
}

/// The quorum and election lines of `conclave status`.
fn quorum_lines(out: &mut String, status: &StatusAnswer) {
    let ready = if status.ready { "ready" } else { "NOT READY" };
    if status.quorum == "none" {
        let _ = writeln!(
            out,
            "quorum      none ({}; {} reachable; {ready})",
            unquorate_election(status),
            count(status.reachable_voters, "voter", "voters"),
        );
    } else {
        let _ = writeln!(
            out,
            "quorum      {} ({} of {}; {} reachable; {ready})",
            status.quorum,
            status.quorum_size,
            count(status.electorate, "vote", "votes"),
            count(status.reachable_voters, "voter", "voters"),
        );
    }
    let _ = writeln!(
        out,
        "election    auto {}, manual override {}",
        if status.auto_election { "on" } else { "OFF" },
        status
            .pinned_leader
            .as_ref()
            .map_or_else(|| "none".to_owned(), |pinned| format!("pins {pinned}"))
    );
}

/// The lines of the priority, gossip and static modes, for the mode the node runs.
fn mode_lines(out: &mut String, status: &StatusAnswer) {
    if let Some(priority) = &status.priority {
        let _ = writeln!(
            out,
            "priority    {} score {:#010x} (battery {}%, uptime {} min, signal {}), round {}{}",
            priority.state,
            priority.score,
            priority.battery_percent,
            priority.uptime_minutes,
            priority.signal,
            priority.round,
            if priority.forced {
                ", FORCED master"
            } else {
                ""
            }
        );
    }
    if let Some(gossip) = &status.gossip {
        let dynamic = if gossip.use_leader_election {
            "dynamic election".to_owned()
        } else if gossip.org_leader {
            "static org leader".to_owned()
        } else {
            "static follower".to_owned()
        };
        let _ = writeln!(
            out,
            "gossip      {dynamic}, view of {} peers{}",
            gossip.view_size,
            if gossip.yielding { ", YIELDING" } else { "" }
        );
    }
    if let Some(fixed) = &status.static_leader {
        let reachable = if fixed.leader_reachable {
            "reachable"
        } else {
            "NOT REACHABLE"
        };
        let _ = writeln!(
            out,
            "static      leader {} ({reachable}; configured {})",
            fixed.assigned_leader, fixed.configured_leader
        );
    }
}

/// The dongle lines of `conclave status`.
fn dongle_lines(out: &mut String, dongle: &DongleAnswer) {
    let state = if dongle.connected {
        format!(
            "connected, mac {}, firmware {}, channel {}",
            or_dash(dongle.mac.as_deref()),
            or_dash(dongle.firmware.as_deref()),
            dongle
                .channel
                .map_or_else(|| "-".to_owned(), |c| c.to_string())
        )
    } else {
        format!("NOT CONNECTED ({})", or_dash(dongle.last_error.as_deref()))
    };
    let _ = writeln!(out, "dongle      {} {state}", dongle.port);
    let _ = writeln!(
        out,
        "            {} sent, {} received, {} not delivered, {} CRC errors, queue {}",
        dongle.tx_frames, dongle.rx_frames, dongle.tx_failures, dongle.crc_errors, dongle.queue_len
    );
    // PRI-1 uses these; an operator placing nodes wants them too.
    if !dongle.rssi_dbm.is_empty() {
        let heard: Vec<String> = dongle
            .rssi_dbm
            .iter()
            .map(|(peer, dbm)| format!("{peer} {dbm:.1} dBm"))
            .collect();
        let _ = writeln!(out, "            signal: {}", heard.join(", "));
    }
}

/// The WARNING lines of `conclave status`.
fn warning_lines(out: &mut String, status: &StatusAnswer) {
    if status.abstaining {
        let waiting = &status.abstaining_until_heard;
        let _ = writeln!(
            out,
            "WARNING     abstaining: the WAL held no term or vote; no vote, no campaign until \
             the other voters show which terms are over (docs/wal.md){}",
            if waiting.is_empty() {
                String::new()
            } else {
                format!("; not heard yet: {}", waiting.join(", "))
            }
        );
    }
    if status.quarantined {
        out.push_str("WARNING     this node's id is used by another live node; it takes no part in elections\n");
    }
    if !status.authenticated && networked(status) {
        out.push_str(
            "WARNING     frames are not authenticated (no cluster.psk_file): whoever reaches \
             its links can forge frames\n",
        );
    }
}

/// Whether the node exchanges frames with other hosts, where unauthenticated frames could be
/// forged: it has other voters, peers it heard, configured peer addresses, or a radio. A node
/// alone (the defaults of `conclave run`) has none, and its missing key is no risk worth a
/// warning. The answer does not carry the configured links, so these are what tells.
/// The replicated log's lines of `conclave status`: positions, followers, members.
fn log_lines(out: &mut String, log: &LogStatus) {
    let _ = writeln!(
        out,
        "log         last {}, commit {}, applied {}, durable {}{}",
        log.last_index,
        log.commit_index,
        log.applied_index,
        log.persisted_index,
        if log.snapshot_index > 0 {
            format!(", snapshot at {}", log.snapshot_index)
        } else {
            String::new()
        }
    );
    for follower in &log.followers {
        let _ = writeln!(
            out,
            "            {} matches {} ({} behind)",
            follower.peer_id, follower.match_index, follower.lag
        );
    }
    if let Some(configuration) = &log.configuration {
        let _ = writeln!(out, "members     {}", members(configuration));
    }
}

/// The configuration on one line: `voters gw-a gw-b gw-c; learners gw-d (12 behind) (index
/// 42)`. A learner's lag is known on the leader only.
pub(crate) fn members(configuration: &ConfigurationAnswer) -> String {
    let voters = if configuration.voters.is_empty() {
        "no voters".to_owned()
    } else {
        format!("voters {}", configuration.voters.join(" "))
    };
    let learners = if configuration.learners.is_empty() {
        "no learners".to_owned()
    } else {
        let named: Vec<String> = configuration
            .learners
            .iter()
            .map(|learner| {
                match configuration
                    .learner_lag
                    .iter()
                    .find(|lag| &lag.peer_id == learner)
                {
                    Some(lag) => format!("{learner} ({} behind)", lag.lag),
                    None => learner.clone(),
                }
            })
            .collect();
        format!("learners {}", named.join(" "))
    };
    let origin = match (configuration.index, configuration.committed) {
        (0, _) => "from cluster.voters".to_owned(),
        (index, true) => format!("index {index}"),
        (index, false) => format!("index {index}, NOT COMMITTED yet"),
    };
    format!("{voters}; {learners} ({origin})")
}

fn networked(status: &StatusAnswer) -> bool {
    status.voters.iter().any(|voter| *voter != status.node_id)
        || !status.peers.is_empty()
        || !status.unanswered.is_empty()
        || status.dongle.is_some()
}

/// Where a node stands, on one line: `gw-a: follower in term 7, leader gw-c (fencing token
/// 7:gw-c)`.
pub(crate) fn summary(status: &StatusAnswer) -> String {
    format!(
        "{}: {} in term {}, leader {} (fencing token {})",
        status.node_id,
        status.role,
        status.fencing.term,
        or_dash(status.fencing.leader.as_deref()),
        or_dash(status.fencing.fencing_token.as_deref())
    )
}

/// What decides the leader in a mode without a quorum (gossip, priority, static), for the
/// status's quorum line: these modes elect, but by another rule than a majority's votes.
fn unquorate_election(status: &StatusAnswer) -> &'static str {
    match status.mode.as_str() {
        "gossip"
            if status
                .gossip
                .as_ref()
                .is_some_and(|g| !g.use_leader_election) =>
        {
            "gossip, static leadership: the org leader by configuration, nobody elects"
        }
        "gossip" => "gossip: the lowest id heard leads; each partition elects its own",
        "priority" => "priority: the best score heard leads; each partition elects its own",
        "static" => "static: the configured leader leads, nobody elects",
        _ => "no quorum",
    }
}

/// `conclave peers`: the peer table, then the configured addresses that never answered.
pub(crate) fn peers_answer(answer: &PeersAnswer) -> String {
    let mut out = peers(&answer.peers);
    out.push_str(&unanswered(&answer.unanswered));
    out
}

/// Configured peer addresses nothing came from, one line each, saying where to look.
fn unanswered(addresses: &[UnansweredAnswer]) -> String {
    let mut out = String::new();
    for address in addresses {
        let _ = writeln!(
            out,
            "NOT ANSWERING  {}: nothing received from this link.udp.peers address in {} (wrong \
             host or port, peer down, or another cluster id or key)",
            address.address,
            human_duration(address.silent_ms)
        );
    }
    out
}

/// The peer table.
pub(crate) fn peers(peers: &[PeerAnswer]) -> String {
    if peers.is_empty() {
        return "no peers\n".to_owned();
    }
    let mut out = format!(
        "{:<20} {:<13} {:>10} {:>14}  {}\n",
        "PEER", "STATUS", "RTT", "LAST SEEN", "ADDRESS"
    );
    for peer in peers {
        let _ = writeln!(
            out,
            "{:<20} {:<13} {:>10} {:>14}  {}",
            peer.peer_id,
            peer.status,
            rtt(peer.rtt_ms),
            format!("{} ago", human_duration(peer.last_seen_ms_ago)),
            peer.address
        );
    }
    out
}

/// `conclave history`, with times in UTC and how long ago they were, seen from `now_unix_ms`.
pub(crate) fn history(answer: &HistoryAnswer, now_unix_ms: u64) -> String {
    if answer.history.is_empty() {
        return "no leader changes recorded\n".to_owned();
    }
    let mut out = format!(
        "{:<23}  {:>14}  {:>6}  {:<20} {}\n",
        "AT (UTC)", "AGO", "TERM", "LEADER", "CAUSE"
    );
    for record in &answer.history {
        // `2024-05-01T12:34:56.789Z` → `2024-05-01 12:34:56.789`.
        let at = rfc3339_utc(record.at_unix_ms)
            .replace('T', " ")
            .trim_end_matches('Z')
            .to_owned();
        let ago = human_duration(now_unix_ms.saturating_sub(record.at_unix_ms));
        let _ = writeln!(
            out,
            "{at:<23}  {ago:>14}  {:>6}  {:<20} {}",
            record.term,
            or_dash(record.leader.as_deref()),
            record.cause
        );
    }
    out
}

/// The answer to `leader set`, `leader resign`, `auto-election`.
pub(crate) fn outcome(answer: &CommandAnswer) -> String {
    let mut out = answer.outcome.describe().to_owned();
    if let Some(peer) = &answer.peer_id {
        let _ = write!(out, ": {peer}");
    }
    if answer.completed == Some(true) {
        out.push_str(" (completed)");
    }
    let _ = writeln!(
        out,
        "\nterm {}, leader {}, fencing token {}",
        answer.fencing.term,
        or_dash(answer.fencing.leader.as_deref()),
        or_dash(answer.fencing.fencing_token.as_deref())
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use conclave_api::{
        DongleAnswer, Fencing, GossipAnswer, HistoryEntry, Outcome, PriorityAnswer, StaticAnswer,
    };

    fn fencing(term: u64, leader: &str) -> Fencing {
        Fencing {
            term,
            leader: Some(leader.to_owned()),
            fencing_token: Some(format!("{term}:{leader}")),
        }
    }

    fn status_answer() -> StatusAnswer {
        StatusAnswer {
            node_id: "gw-a".to_owned(),
            cluster_id: "site-1".to_owned(),
            mode: "raft".to_owned(),
            quorum: "voters".to_owned(),
            quorum_size: 2,
            electorate: 3,
            role: "leader".to_owned(),
            phase: "leader".to_owned(),
            fencing: fencing(5, "gw-a"),
            voted_for: Some("gw-a".to_owned()),
            auto_election: true,
            manual_override: false,
            pinned_leader: None,
            quarantined: false,
            abstaining: false,
            abstaining_until_heard: Vec::new(),
            incarnation: 3,
            authenticated: true,
            peers: vec![
                PeerAnswer {
                    peer_id: "gw-b".to_owned(),
                    status: "connected".to_owned(),
                    rtt_ms: Some(0.42),
                    last_seen_ms_ago: 120,
                    address: "udp:127.0.0.1:7947".to_owned(),
                },
                PeerAnswer {
                    peer_id: "gw-c".to_owned(),
                    status: "disconnected".to_owned(),
                    rtt_ms: None,
                    last_seen_ms_ago: 12_000,
                    address: "udp:127.0.0.1:7948".to_owned(),
                },
            ],
            unanswered: Vec::new(),
            dongle: None,
            voters: vec!["gw-a".into(), "gw-b".into(), "gw-c".into()],
            reachable_voters: 2,
            ready: true,
            peer_admin_urls: Default::default(),
            log: None,
            priority: None,
            gossip: None,
            static_leader: None,
        }
    }

    #[test]
    fn status_table_shows_leader_and_token() {
        let text = status(&status_answer());
        assert!(text.contains("fencing token 5:gw-a"), "{text}");
        assert!(text.contains("term 5 (raft mode)"), "{text}");
        assert!(text.contains("leader      gw-a"), "{text}");
        assert!(text.contains("420 µs"), "{text}");
        assert!(text.contains("manual override none"), "{text}");
        assert!(text.contains("2 voters reachable; ready"), "{text}");
        assert!(!text.contains("WARNING"), "{text}");
    }

    /// A configured peer address that never answered is listed, with how long, in the status
    /// and in `conclave peers`; none, no line.
    #[test]
    fn unanswered_addresses_are_listed_with_how_long() {
        let mut answer = status_answer();
        assert!(!status(&answer).contains("NOT ANSWERING"));
        answer.unanswered = vec![UnansweredAnswer {
            address: "udp:127.0.0.1:7949".to_owned(),
            silent_ms: 42_000,
        }];
        let line = "NOT ANSWERING  udp:127.0.0.1:7949: nothing received from this link.udp.peers \
                    address in 42 s";
        let text = status(&answer);
        assert!(text.contains(line), "{text}");
        let text = peers_answer(&PeersAnswer {
            peers: answer.peers.clone(),
            unanswered: answer.unanswered.clone(),
            fencing: fencing(5, "gw-a"),
        });
        assert!(text.contains("gw-b") && text.contains(line), "{text}");
    }

    /// The status names the mode; a static node has no quorum to show, and a phase that says
    /// more than the role (a raft pre-candidate) is shown beside it.
    #[test]
    fn status_table_shows_mode_and_phase() {
        let mut answer = status_answer();
        answer.mode = "static".to_owned();
        answer.quorum = "none".to_owned();
        let text = status(&answer);
        assert!(text.contains("term 5 (static mode)"), "{text}");
        assert!(
            text.contains(
                "quorum      none (static: the configured leader leads, nobody elects; 2 voters \
                 reachable; ready)"
            ),
            "{text}"
        );
        // Issue 15: gossip and priority elect without a quorum; the line says by what rule.
        answer.mode = "priority".to_owned();
        let text = status(&answer);
        assert!(
            text.contains(
                "quorum      none (priority: the best score heard leads; each \
                           partition elects its own; 2 voters reachable; ready)"
            ),
            "{text}"
        );
        answer.mode = "gossip".to_owned();
        let text = status(&answer);
        assert!(
            text.contains("(gossip: the lowest id heard leads; each partition elects its own;"),
            "{text}"
        );
        assert!(!text.contains("nobody elects"), "{text}");
        let mut answer = status_answer();
        answer.role = "candidate".to_owned();
        answer.phase = "pre_candidate".to_owned();
        let text = status(&answer);
        assert!(text.contains("candidate (pre_candidate)"), "{text}");
    }

    /// Each mode's own detail has a line of its own: priority's score and its parts, gossip's
    /// view, static's assigned leader.
    #[test]
    fn status_table_shows_each_modes_detail() {
        let mut answer = status_answer();
        answer.mode = "priority".to_owned();
        answer.priority = Some(PriorityAnswer {
            state: "master".to_owned(),
            score: 0x5a12_c033,
            battery_percent: 90,
            uptime_minutes: 18,
            signal: 192,
            round: 4,
            master_confirmed: true,
            awaiting: None,
            forced: false,
            peers: 2,
        });
        let text = status(&answer);
        assert!(
            text.contains(
                "priority    master score 0x5a12c033 (battery 90%, uptime 18 min, signal 192), \
                 round 4\n"
            ),
            "{text}"
        );
        let mut answer = status_answer();
        answer.gossip = Some(GossipAnswer {
            use_leader_election: true,
            org_leader: false,
            view_size: 2,
            yielding: true,
            highest_epoch_seen: 3,
            ignored_outside_view: 0,
        });
        let text = status(&answer);
        assert!(
            text.contains("gossip      dynamic election, view of 2 peers, YIELDING"),
            "{text}"
        );
        let mut answer = status_answer();
        answer.static_leader = Some(StaticAnswer {
            configured_leader: "gw-a".to_owned(),
            assigned_leader: "gw-b".to_owned(),
            leader_reachable: false,
        });
        let text = status(&answer);
        assert!(
            text.contains("static      leader gw-b (NOT REACHABLE; configured gw-a)"),
            "{text}"
        );
    }

    /// MEMB-1, MEMB-2: the status shows the configuration in force, each learner's lag where
    /// the leader reports it, and whether the configuration is committed yet.
    #[test]
    fn status_table_shows_members_and_learner_lag() {
        let mut answer = status_answer();
        answer.log = Some(LogStatus {
            last_index: 50,
            commit_index: 48,
            applied_index: 48,
            persisted_index: 50,
            snapshot_index: 0,
            followers: Vec::new(),
            configuration: Some(ConfigurationAnswer {
                voters: vec!["gw-a".into(), "gw-b".into(), "gw-c".into()],
                learners: vec!["gw-d".into(), "gw-e".into()],
                index: 42,
                committed: true,
                learner_lag: vec![conclave_api::LearnerLagAnswer {
                    peer_id: "gw-d".into(),
                    lag: 12,
                }],
            }),
        });
        let text = status(&answer);
        assert!(
            text.contains(
                "members     voters gw-a gw-b gw-c; learners gw-d (12 behind) gw-e (index 42)\n"
            ),
            "{text}"
        );
        let log = answer.log.as_mut().unwrap();
        let configuration = log.configuration.as_mut().unwrap();
        configuration.committed = false;
        configuration.index = 49;
        configuration.learners.clear();
        assert_eq!(
            members(configuration),
            "voters gw-a gw-b gw-c; no learners (index 49, NOT COMMITTED yet)"
        );
        configuration.index = 0;
        assert!(members(configuration).ends_with("(from cluster.voters)"));
        // A node of an older version reports no configuration: no line.
        log.configuration = None;
        assert!(!status(&answer).contains("members"));
    }

    /// A disconnected peer's round trip is unknown, not its last figure.
    #[test]
    fn round_trips_read_cleanly() {
        let text = status(&status_answer());
        let gw_c = text.lines().find(|l| l.starts_with("gw-c")).unwrap_or("");
        assert!(gw_c.contains("unknown"), "{text}");
        assert!(gw_c.contains("12 s ago"), "{text}");
        assert_eq!(rtt(Some(0.123_456)), "123 µs");
        assert_eq!(rtt(Some(1.5)), "1.50 ms");
        assert_eq!(rtt(Some(42.25)), "42.2 ms");
        assert_eq!(rtt(Some(250.4)), "250 ms");
        assert_eq!(rtt(None), "unknown");
    }

    /// Frames without a key are a risk where other hosts can send them: a node with other
    /// voters, peers or a radio warns of it; a node alone, with no link to anyone, does not.
    #[test]
    fn only_a_networked_node_warns_of_unauthenticated_frames() {
        let warning = "frames are not authenticated";
        let mut lone = status_answer();
        lone.authenticated = false;
        lone.voters = vec!["gw-a".to_owned()];
        lone.peers = Vec::new();
        assert!(!status(&lone).contains(warning), "{}", status(&lone));
        lone.voters = Vec::new();
        assert!(!status(&lone).contains(warning), "{}", status(&lone));
        // And it is counted in the singular.
        (lone.quorum_size, lone.electorate, lone.reachable_voters) = (1, 1, 1);
        let text = status(&lone);
        assert!(
            text.contains("(1 of 1 vote; 1 voter reachable; ready)"),
            "{text}"
        );

        let mut networked = status_answer();
        networked.authenticated = false;
        assert!(
            status(&networked).contains(warning),
            "{}",
            status(&networked)
        );
        // Other voters, none heard yet.
        networked.peers = Vec::new();
        assert!(
            status(&networked).contains(warning),
            "{}",
            status(&networked)
        );
        // Alone in the voters, but a radio or a configured peer address reaches others.
        let mut radio = lone.clone();
        radio.dongle = Some(DongleAnswer::default());
        assert!(status(&radio).contains(warning), "{}", status(&radio));
        let mut addressed = lone.clone();
        addressed.unanswered = vec![UnansweredAnswer {
            address: "udp:10.0.0.2:7947".to_owned(),
            silent_ms: 1000,
        }];
        assert!(
            status(&addressed).contains(warning),
            "{}",
            status(&addressed)
        );
        networked.authenticated = true;
        assert!(
            !status(&networked).contains(warning),
            "{}",
            status(&networked)
        );
    }

    /// WAL-2: an abstaining node says so, and names the peers it waits for.
    #[test]
    fn status_table_warns_while_abstaining() {
        let mut answer = status_answer();
        answer.abstaining = true;
        answer.abstaining_until_heard = vec!["gw-b".to_owned(), "gw-c".to_owned()];
        let text = status(&answer);
        assert!(
            text.contains(
                "WARNING     abstaining: the WAL held no term or vote; no vote, no campaign \
                 until the other voters show which terms are over (docs/wal.md); not heard yet: \
                 gw-b, gw-c"
            ),
            "{text}"
        );
    }

    #[test]
    fn status_table_shows_the_dongle_and_signal() {
        let mut answer = status_answer();
        answer.dongle = Some(DongleAnswer {
            port: "/dev/ttyACM0".to_owned(),
            connected: true,
            mac: Some("02:00:00:00:00:01".to_owned()),
            firmware: Some("conclave-esp32 1.0".to_owned()),
            channel: Some(6),
            tx_frames: 10,
            rx_frames: 12,
            tx_failures: 1,
            rssi_dbm: [("gw-b".to_owned(), -48.5), ("gw-c".to_owned(), -71.0)].into(),
            ..DongleAnswer::default()
        });
        let text = status(&answer);
        assert!(
            text.contains("dongle      /dev/ttyACM0 connected, mac 02:00:00:00:00:01"),
            "{text}"
        );
        assert!(
            text.contains("10 sent, 12 received, 1 not delivered"),
            "{text}"
        );
        assert!(
            text.contains("signal: gw-b -48.5 dBm, gw-c -71.0 dBm"),
            "{text}"
        );

        answer.dongle = Some(DongleAnswer {
            port: "/dev/ttyACM0".to_owned(),
            last_error: Some("dongle /dev/ttyACM0: end of file on the port".to_owned()),
            ..DongleAnswer::default()
        });
        let text = status(&answer);
        assert!(
            text.contains("NOT CONNECTED (dongle /dev/ttyACM0: end of file on the port)"),
            "{text}"
        );
        assert!(!text.contains("signal:"), "{text}");
    }

    /// History shows when each change happened in UTC and how long ago, not Unix ms.
    #[test]
    fn history_times_are_for_people() {
        let answer = HistoryAnswer {
            history: vec![HistoryEntry {
                term: 4,
                leader: Some("gw-b".to_owned()),
                cause: "vote_won".to_owned(),
                at_unix_ms: 1_700_000_000_123,
                at: String::new(),
            }],
            fencing: fencing(4, "gw-b"),
        };
        let text = history(&answer, 1_700_000_184_123);
        assert!(
            text.contains("2023-11-14 22:13:20.123       3 min 4 s       4  gw-b"),
            "{text}"
        );
        assert!(!text.contains("1700000000123"), "{text}");
    }

    #[test]
    fn outcome_names_the_peer() {
        let answer = CommandAnswer {
            outcome: Outcome::TransferStarted,
            peer_id: Some("gw-c".to_owned()),
            node_id: "gw-a".to_owned(),
            completed: None,
            fencing: fencing(5, "gw-a"),
        };
        assert_eq!(
            outcome(&answer),
            "transfer started: gw-c\nterm 5, leader gw-a, fencing token 5:gw-a\n"
        );
    }
}
