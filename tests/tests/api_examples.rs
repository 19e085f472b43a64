//! Every example of `docs/api.md` runs against a running cluster: each ```http request block
//! is sent, in the document's order, to a three-node cluster with the replicated log (to the
//! leader, or to the node an `<!-- to gw-b -->` line names), and the answer must be the
//! ```http answer block that follows it — the status, the headers it shows, the JSON (or the
//! server-sent events) — so the document cannot drift from the node.
//!
//! The document names the leader `gw-a` and the followers `gw-b` and `gw-c`; only `gw-a`
//! campaigns, so the nodes of those names hold those roles (the members examples list them in
//! id order), and the test maps the names in paths, request bodies, headers and answers to the
//! nodes that hold the roles all the same. Values that differ from run to run (a term, a
//! fencing token, a time, how far a follower's acknowledgements have come) are compared by
//! kind only. After a deliberate change of the answers, `CONCLAVE_WRITE_API_EXAMPLES=1 cargo
//! test -p conclave-tests --test api_examples` writes every answer block anew from what the
//! cluster answered.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use conclave_config::{AdminConfig, Quorum};
use conclave_core::election::ElectionConfig;
use conclave_core::raft::LogConfig;
use conclave_tests::api_client::{ApiClient, Body, Event, serve, stop_server};
use conclave_tests::{ClusterOptions, MemoryCluster, test_log};
use serde_json::Value;

/// Keys whose values change from run to run: compared by JSON type only. A follower's
/// `match_index` on the leader moves with its acknowledgements, which may still be on their
/// way when the leader answers (a change commits on the first follower's).
const VOLATILE: [&str; 9] = [
    "term",
    "expires_in_ms",
    "fencing_token",
    "lease_until_unix_ms",
    "now_unix_ms",
    "at_unix_ms",
    "at",
    "incarnation",
    "match_index",
];

/// The names the document gives the nodes: the leader first.
const DOC_NAMES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md")
}

/// One ```http block.
#[derive(Debug, Clone)]
struct Block {
    /// Line index of the opening fence.
    start: usize,
    /// Line index of the closing fence.
    end: usize,
    /// The block's lines.
    lines: Vec<String>,
    /// The node an `<!-- to NAME -->` line before it names.
    to: Option<String>,
}

/// A request or an answer: its first line, headers and body.
#[derive(Debug, Clone)]
struct Message {
    first: String,
    headers: Vec<(String, String)>,
    body: String,
}

fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        if lines[index].trim() == "```http" {
            let start = index;
            let end = (start + 1..lines.len())
                .find(|i| lines[*i].trim() == "```")
                .expect("every ```http block is closed");
            let to = lines[..start]
                .iter()
                .rev()
                .find(|line| !line.trim().is_empty())
                .and_then(|line| line.trim().strip_prefix("<!-- to "))
                .and_then(|rest| rest.strip_suffix(" -->"))
                .map(str::to_owned);
            found.push(Block {
                start,
                end,
                lines: lines[start + 1..end]
                    .iter()
                    .map(|l| (*l).to_owned())
                    .collect(),
                to,
            });
            index = end + 1;
        } else {
            index += 1;
        }
    }
    found
}

fn message(lines: &[String]) -> Message {
    let first = lines.first().cloned().unwrap_or_default();
    let mut headers = Vec::new();
    let mut rest = lines[1.min(lines.len())..].iter();
    for line in rest.by_ref() {
        if line.trim().is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').expect("a header line has a colon");
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let body = rest.cloned().collect::<Vec<_>>().join("\n");
    Message {
        first,
        headers,
        body,
    }
}

/// Replaces whole node names by the map's, in one pass.
fn rename(text: &str, map: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'outer: while !rest.is_empty() {
        for (from, to) in map {
            if let Some(after) = rest.strip_prefix(from.as_str()) {
                out.push_str(to);
                rest = after;
                continue 'outer;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// Where `actual` differs from `documented`, volatile keys compared by kind only.
fn differences(documented: &Value, actual: &Value, at: &str, out: &mut Vec<String>) {
    match (documented, actual) {
        (Value::Object(doc), Value::Object(got)) => {
            for key in doc.keys().chain(got.keys()) {
                let here = format!("{at}.{key}");
                match (doc.get(key), got.get(key)) {
                    (Some(d), Some(g)) if VOLATILE.contains(&key.as_str()) => {
                        if std::mem::discriminant(d) != std::mem::discriminant(g) {
                            out.push(format!("{here}: documented {d}, answered {g}"));
                        }
                    }
                    (Some(d), Some(g)) => differences(d, g, &here, out),
                    (Some(_), None) => out.push(format!("{here}: documented, not answered")),
                    (None, Some(g)) => out.push(format!("{here}: answered {g}, not documented")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(doc), Value::Array(got)) if doc.len() == got.len() => {
            for (index, (d, g)) in doc.iter().zip(got).enumerate() {
                differences(d, g, &format!("{at}[{index}]"), out);
            }
        }
        (d, g) if d != g => out.push(format!("{at}: documented {d}, answered {g}")),
        _ => {}
    }
}

fn events_text(events: &[Event]) -> String {
    events
        .iter()
        .map(|event| {
            let id = event
                .id
                .as_ref()
                .map(|id| format!("id: {id}\n"))
                .unwrap_or_default();
            format!("{id}event: {}\ndata: {}\n", event.name, event.data)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Compact JSON laid out one field a line, two spaces deep, its fields in the order the node
/// wrote them.
fn pretty(compact: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                let closing = if c == '{' { '}' } else { ']' };
                if chars.peek() == Some(&closing) {
                    out.push(closing);
                    chars.next();
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// The answer block the cluster's answer calls for, in the document's names.
fn written_answer(
    status: u16,
    headers: &[(String, String)],
    shown: &[String],
    body: &str,
) -> Vec<String> {
    let reason = actix_web::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("");
    let mut lines = vec![format!("HTTP/1.1 {status} {reason}")];
    for name in shown {
        if let Some((_, value)) = headers.iter().find(|(key, _)| key == name) {
            lines.push(format!("{}: {value}", display_header(name)));
        }
    }
    lines.push(String::new());
    lines.extend(body.lines().map(str::to_owned));
    lines
}

fn display_header(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |c| {
                c.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// LOG-8, CB-3: every request/answer example of docs/api.md, against a running cluster.
#[actix_rt::test]
async fn every_example_of_the_api_document_is_what_a_node_answers() {
    let _log = test_log();
    let cluster = MemoryCluster::start_with(
        &DOC_NAMES,
        ClusterOptions::real_time(Quorum::Voters),
        |config| {
            if let ElectionConfig::Raft(raft) = &mut config.election {
                // Calm timings, and only the document's leader campaigns: the examples need
                // `gw-a` to lead from start to end (a list of members is in id order, so the
                // names the document gives the followers must be theirs).
                raft.auto_election = raft.id.as_str() == DOC_NAMES[0];
                *raft = raft
                    .clone()
                    .with_heartbeat(Duration::from_millis(200))
                    .with_election_timeout(
                        Duration::from_millis(1000),
                        Duration::from_millis(2000),
                    );
                raft.log = Some(LogConfig::default());
            }
        },
    )
    .await;
    let leader = cluster.await_leader(Duration::from_secs(20)).await;
    let order: Vec<usize> = std::iter::once(leader)
        .chain((0..3).filter(|index| *index != leader))
        .collect();
    // The document's names, mapped to the nodes that hold their roles, and back.
    let to_actual: BTreeMap<String, String> = DOC_NAMES
        .iter()
        .zip(&order)
        .map(|(doc, index)| ((*doc).to_owned(), cluster.id(*index).to_string()))
        .collect();
    let to_doc: BTreeMap<String, String> = to_actual
        .iter()
        .map(|(d, a)| (a.clone(), d.clone()))
        .collect();
    let peer_urls = (0..3)
        .map(|index| {
            let id = cluster.id(index);
            (id, format!("http://{id}.example:7070"))
        })
        .collect::<BTreeMap<_, _>>();
    let mut clients = BTreeMap::new();
    let mut servers = Vec::new();
    for index in 0..3 {
        let (addr, server) = serve(
            cluster.handle(index),
            AdminConfig {
                peer_urls: peer_urls.clone(),
                ..AdminConfig::default()
            },
        );
        clients.insert(cluster.id(index).to_string(), ApiClient::new(addr));
        servers.push(server);
    }

    let text = std::fs::read_to_string(doc_path()).expect("docs/api.md is readable");
    let blocks = blocks(&text);
    assert!(blocks.len() >= 2, "docs/api.md has no examples");
    let write = std::env::var_os("CONCLAVE_WRITE_API_EXAMPLES").is_some();
    let mut rewritten: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut problems = Vec::new();
    let mut pairs = blocks.chunks(2);
    for pair in pairs.by_ref() {
        let [request_block, answer_block] = pair else {
            panic!("a request block without its answer block at the end of docs/api.md");
        };
        let request = message(&request_block.lines);
        let answer = message(&answer_block.lines);
        assert!(
            answer.first.starts_with("HTTP/1.1 "),
            "docs/api.md line {}: an answer block must start with HTTP/1.1, found {:?}",
            answer_block.start + 2,
            answer.first
        );
        let (method, path) = request
            .first
            .split_once(' ')
            .expect("a request line is METHOD PATH");
        let path = rename(path, &to_actual);
        let target = request_block.to.as_deref().unwrap_or("gw-a");
        let client = &clients[&to_actual[target]];
        let headers: Vec<(String, String)> = request
            .headers
            .iter()
            .filter(|(name, _)| name != "content-type")
            .map(|(name, value)| (name.clone(), rename(value, &to_actual)))
            .collect();
        let header_refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        let documented_status: u16 = answer.first["HTTP/1.1 ".len()..]
            .split(' ')
            .next()
            .and_then(|code| code.parse().ok())
            .expect("an answer line has a status");
        let what = format!(
            "docs/api.md line {}: {method} {path}",
            request_block.start + 2
        );
        let streams = answer
            .headers
            .iter()
            .any(|(name, value)| name == "content-type" && value == "text/event-stream");
        let shown: Vec<String> = answer
            .headers
            .iter()
            .map(|(name, _)| name.clone())
            .collect();
        if streams {
            let documented = Event::parse_all(&rename(&answer.body, &to_actual));
            let count = documented.len();
            let got = client
                .events(
                    &path,
                    &header_refs,
                    Duration::from_secs(10),
                    move |events| events.len() >= count,
                )
                .await;
            if write {
                let body = rename(&events_text(&got), &to_doc);
                let lines = written_answer(
                    200,
                    &[("content-type".to_owned(), "text/event-stream".to_owned())],
                    &shown,
                    &body,
                );
                rewritten.push((answer_block.start, answer_block.end, lines));
            } else if got != documented {
                problems.push(format!(
                    "{what}: documented events\n{}\nanswered\n{}",
                    events_text(&documented),
                    events_text(&got)
                ));
            }
            continue;
        }
        let body = if request.body.trim().is_empty() {
            Body::Empty
        } else {
            let json: Value = serde_json::from_str(&rename(&request.body, &to_actual))
                .unwrap_or_else(|err| panic!("{what}: the request body is not JSON: {err}"));
            Body::Json(json)
        };
        let reply = client.call_with(method, &path, body, &header_refs).await;
        if write {
            let headers: Vec<(String, String)> = reply
                .headers
                .iter()
                .map(|(name, value)| (name.clone(), rename(value, &to_doc)))
                .collect();
            let lines = written_answer(
                reply.status,
                &headers,
                &shown,
                &rename(&pretty(&reply.text), &to_doc),
            );
            rewritten.push((answer_block.start, answer_block.end, lines));
            continue;
        }
        if reply.status != documented_status {
            problems.push(format!(
                "{what}: documented {documented_status}, answered {} {}",
                reply.status, reply.body
            ));
            continue;
        }
        for (name, value) in &answer.headers {
            let expected = rename(value, &to_actual);
            let got = reply.header(name).unwrap_or("");
            let fits = if name == "content-type" {
                got.starts_with(&expected)
            } else {
                got == expected
            };
            if !fits {
                problems.push(format!(
                    "{what}: header {name}: documented {expected:?}, answered {got:?}"
                ));
            }
        }
        let documented: Value = serde_json::from_str(&rename(&answer.body, &to_actual))
            .unwrap_or_else(|err| panic!("{what}: the answer body is not JSON: {err}"));
        let mut found = Vec::new();
        differences(&documented, &reply.body, "$", &mut found);
        for difference in found {
            problems.push(format!("{what}: {difference}"));
        }
    }
    if write {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        for (start, end, block) in rewritten.into_iter().rev() {
            lines.splice(start + 1..end, block);
        }
        std::fs::write(doc_path(), lines.join("\n") + "\n").expect("docs/api.md is writable");
    }
    for server in servers {
        stop_server(&server).await;
    }
    cluster.stop().await;
    assert!(
        problems.is_empty(),
        "docs/api.md is not what the node answers (CONCLAVE_WRITE_API_EXAMPLES=1 writes the \
         answers anew):\n{}",
        problems.join("\n\n")
    );
}
