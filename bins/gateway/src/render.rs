//! Human-readable renderings of the admin API's answers.

use std::fmt::Write;

use serde_json::Value;

fn text(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".to_owned(),
        Some(other) => other.to_string(),
    }
}

fn yes_no(value: &Value, key: &str) -> &'static str {
    if value.get(key).and_then(Value::as_bool).unwrap_or(false) {
        "on"
    } else {
        "off"
    }
}

/// `conclave status`.
pub(crate) fn status(status: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "node        {} (cluster {}, incarnation {})",
        text(status, "node_id"),
        text(status, "cluster_id"),
        text(status, "incarnation")
    );
    let _ = writeln!(
        out,
        "role        {:<14} term {}",
        text(status, "role"),
        text(status, "term")
    );
    let _ = writeln!(
        out,
        "leader      {:<14} fencing token {}",
        text(status, "leader"),
        text(status, "fencing_token")
    );
    let _ = writeln!(
        out,
        "quorum      {} ({} of {} votes)",
        text(status, "quorum"),
        text(status, "quorum_size"),
        text(status, "electorate")
    );
    let pinned = text(status, "pinned_leader");
    let _ = writeln!(
        out,
        "election    auto {}, manual override {}",
        yes_no(status, "auto_election"),
        if pinned == "-" {
            "none".to_owned()
        } else {
            format!("pins {pinned}")
        }
    );
    if let Some(dongle) = status.get("dongle").filter(|d| !d.is_null()) {
        let state = if dongle.get("connected").and_then(Value::as_bool) == Some(true) {
            format!(
                "connected, mac {}, firmware {}, channel {}",
                text(dongle, "mac"),
                text(dongle, "firmware"),
                text(dongle, "channel")
            )
        } else {
            format!("NOT CONNECTED ({})", text(dongle, "last_error"))
        };
        let _ = writeln!(out, "dongle      {} {state}", text(dongle, "port"));
        let _ = writeln!(
            out,
            "            {} sent, {} received, {} not delivered, {} CRC errors, queue {}",
            text(dongle, "tx_frames"),
            text(dongle, "rx_frames"),
            text(dongle, "tx_failures"),
            text(dongle, "crc_errors"),
            text(dongle, "queue_len")
        );
        // PRI-1 uses these; an operator placing nodes wants them too.
        if let Some(rssi) = dongle
            .get("rssi_dbm")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
        {
            let heard: Vec<String> = rssi
                .iter()
                .map(|(peer, dbm)| format!("{peer} {dbm} dBm"))
                .collect();
            let _ = writeln!(out, "            signal: {}", heard.join(", "));
        }
    }
    if status.get("abstaining").and_then(Value::as_bool) == Some(true) {
        let waiting: Vec<&str> = status
            .get("abstaining_until_heard")
            .and_then(Value::as_array)
            .map(|peers| peers.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "WARNING     abstaining: the WAL held no term or vote; no vote, no campaign until \
             {} answered (docs/wal.md)",
            if waiting.is_empty() {
                "the peers have".to_owned()
            } else {
                format!(
                    "{} {}",
                    waiting.join(", "),
                    if waiting.len() == 1 { "has" } else { "have" }
                )
            }
        );
    }
    if status.get("quarantined").and_then(Value::as_bool) == Some(true) {
        out.push_str("WARNING     this node's id is used by another live node; it takes no part in elections\n");
    }
    if status.get("authenticated").and_then(Value::as_bool) == Some(false) {
        out.push_str("WARNING     frames are not authenticated (no cluster.psk_file)\n");
    }
    out.push('\n');
    out.push_str(&peers(status.get("peers").unwrap_or(&Value::Null)));
    out
}

/// `conclave peers`.
pub(crate) fn peers(peers: &Value) -> String {
    let Some(list) = peers.as_array() else {
        return "no peers\n".to_owned();
    };
    if list.is_empty() {
        return "no peers\n".to_owned();
    }
    let mut out = format!(
        "{:<20} {:<13} {:>10} {:>12}  {}\n",
        "PEER", "STATUS", "RTT", "LAST SEEN", "ADDRESS"
    );
    for peer in list {
        let rtt = peer
            .get("rtt_ms")
            .and_then(Value::as_f64)
            .map_or("-".to_owned(), |ms| format!("{ms:.2} ms"));
        let seen = peer
            .get("last_seen_ms_ago")
            .and_then(Value::as_u64)
            .map_or("-".to_owned(), |ms| format!("{ms} ms ago"));
        let _ = writeln!(
            out,
            "{:<20} {:<13} {:>10} {:>12}  {}",
            text(peer, "peer_id"),
            text(peer, "status"),
            rtt,
            seen,
            text(peer, "address")
        );
    }
    out
}

/// `conclave history`.
pub(crate) fn history(answer: &Value) -> String {
    let Some(list) = answer.get("history").and_then(Value::as_array) else {
        return "no leader changes recorded\n".to_owned();
    };
    if list.is_empty() {
        return "no leader changes recorded\n".to_owned();
    }
    let mut out = format!(
        "{:<15} {:>6}  {:<20} {}\n",
        "AT (unix ms)", "TERM", "LEADER", "CAUSE"
    );
    for record in list {
        let _ = writeln!(
            out,
            "{:<15} {:>6}  {:<20} {}",
            text(record, "at_unix_ms"),
            text(record, "term"),
            text(record, "leader"),
            text(record, "cause")
        );
    }
    out
}

/// The answer to `leader set`, `leader resign`, `auto-election`.
pub(crate) fn outcome(answer: &Value) -> String {
    let mut out = text(answer, "outcome").replace('_', " ");
    let peer = text(answer, "peer_id");
    if peer != "-" {
        let _ = write!(out, ": {peer}");
    }
    let _ = writeln!(
        out,
        "\nterm {}, leader {}, fencing token {}",
        text(answer, "term"),
        text(answer, "leader"),
        text(answer, "fencing_token")
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_table_shows_leader_and_token() {
        let answer = json!({
            "node_id": "gw-a", "cluster_id": "site-1", "incarnation": 3, "role": "leader",
            "term": 5, "leader": "gw-a", "fencing_token": "5:gw-a", "quorum": "voters",
            "quorum_size": 2, "electorate": 3, "auto_election": true, "pinned_leader": null,
            "quarantined": false, "authenticated": true,
            "peers": [{"peer_id": "gw-b", "status": "connected", "rtt_ms": 0.42,
                       "last_seen_ms_ago": 120, "address": "udp:127.0.0.1:7947"}]
        });
        let text = status(&answer);
        assert!(text.contains("fencing token 5:gw-a"), "{text}");
        assert!(text.contains("leader      gw-a"), "{text}");
        assert!(text.contains("0.42 ms"), "{text}");
        assert!(text.contains("manual override none"), "{text}");
        assert!(!text.contains("WARNING"), "{text}");
    }

    /// WAL-2: an abstaining node says so, and names the peers it waits for.
    #[test]
    fn status_table_warns_while_abstaining() {
        let answer = json!({
            "node_id": "gw-a", "role": "follower", "term": 0, "leader": null,
            "authenticated": true, "peers": [], "abstaining": true,
            "abstaining_until_heard": ["gw-b", "gw-c"]
        });
        let text = status(&answer);
        assert!(
            text.contains("WARNING     abstaining: the WAL held no term or vote; no vote, no campaign until gw-b, gw-c have answered"),
            "{text}"
        );
    }

    #[test]
    fn status_table_shows_the_dongle_and_signal() {
        let answer = json!({
            "node_id": "gw-a", "role": "follower", "term": 2, "leader": "gw-b",
            "authenticated": true, "peers": [],
            "dongle": {"port": "/dev/ttyACM0", "connected": true, "mac": "02:00:00:00:00:01",
                       "firmware": "conclave-esp32 1.0", "channel": 6, "tx_frames": 10,
                       "rx_frames": 12, "tx_failures": 1, "crc_errors": 0, "queue_len": 0,
                       "rssi_dbm": {"gw-b": -48.5, "gw-c": -71.0}}
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

        let unplugged = json!({"node_id": "gw-a", "peers": [], "dongle": {
            "port": "/dev/ttyACM0", "connected": false,
            "last_error": "dongle /dev/ttyACM0: end of file on the port", "rssi_dbm": {}}});
        let text = status(&unplugged);
        assert!(
            text.contains("NOT CONNECTED (dongle /dev/ttyACM0: end of file on the port)"),
            "{text}"
        );
        assert!(!text.contains("signal:"), "{text}");
    }

    #[test]
    fn outcome_names_the_peer() {
        let answer = json!({"outcome": "transfer_started", "peer_id": "gw-c", "term": 5,
                            "leader": "gw-a", "fencing_token": "5:gw-a"});
        assert_eq!(
            outcome(&answer),
            "transfer started: gw-c\nterm 5, leader gw-a, fencing token 5:gw-a\n"
        );
    }
}
