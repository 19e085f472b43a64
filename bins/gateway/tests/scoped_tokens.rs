//! Scoped admin tokens (SEC-2, issue 26 item 2) on a real `conclave run` process: the tokens
//! file is read again on SIGHUP, so a token added there works after it and a token removed is
//! refused with 401; a broken file on reload keeps the tokens in force. The CLI renders a 403
//! with the token's name and the role needed, and the node's log names the token of every
//! mutation but never shows a secret.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use support::{BOUND, ProcessCluster, conclave, text};

const OPS: &str = "ops-secret-0001";
const OLD: &str = "old-writer-secret-0002";
const NEW: &str = "new-writer-secret-0003";
const READER: &str = "reader-secret-0004";

/// SIGHUP's number, as `ProcessCluster::signal` takes it.
const SIGHUP: i32 = 1;

/// Writes the tokens file, readable by its owner only (it holds secrets in clear).
fn write_tokens(path: &Path, tokens: &[(&str, &str, &str)]) {
    use std::os::unix::fs::PermissionsExt as _;
    let text: String = tokens
        .iter()
        .map(|(name, role, secret)| {
            format!("[[token]]\nname = {name:?}\nrole = {role:?}\nsecret = {secret:?}\n\n")
        })
        .collect();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// PUTs a key at `addr` with `secret` as bearer token; the HTTP status.
fn put(addr: &str, key: &str, secret: &str) -> u16 {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    let body = "{\"value\": \"v\"}";
    write!(
        stream,
        "PUT /v1/kv/{key} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {secret}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer.split(' ').nth(1).unwrap_or_default();
    status.parse().unwrap_or(0)
}

/// Waits until node `id`'s log has grown a line containing every one of `needles` past byte
/// `from`; returns that line.
fn wait_for_log(cluster: &ProcessCluster, id: &str, from: usize, needles: &[&str]) -> String {
    cluster.wait_for(&format!("{id} to log {needles:?}"), |c| {
        let log = c.log(id);
        log.get(from..)?
            .lines()
            .find(|line| needles.iter().all(|needle| line.contains(needle)))
            .map(str::to_owned)
    })
}

/// SEC-2: SIGHUP reads the tokens file again: a token added works, a token removed gets 401,
/// a broken file changes nothing; no secret reaches the log.
#[test]
fn sec2_sighup_reloads_the_tokens_file() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    write_tokens(
        &tokens,
        &[
            ("ops", "admin", OPS),
            ("old-writer", "write", OLD),
            ("dash", "read", READER),
        ],
    );
    let mut cluster = ProcessCluster::new(&["solo"])
        .with_env("CONCLAVE__ADMIN__TOKENS_FILE", tokens.to_str().unwrap())
        .with_toml("[log]\nenabled = true\n");
    cluster.start_all();
    cluster.wait_for("a leader", ProcessCluster::agreed_leader);
    let admin = cluster.admin_addr("solo");

    cluster.wait_for("the old writer's first write", |_| {
        (put(&admin, "a", OLD) == 200).then_some(())
    });
    assert_eq!(put(&admin, "a", NEW), 401, "a token not yet in the file");

    // The CLI shows a 403 with the token's name and the role needed.
    let url = cluster.admin_url("solo");
    let refused = conclave(&["leader", "resign", "--admin", &url, "--token", READER]);
    let stderr = text(&refused.stderr);
    assert_ne!(refused.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("403 forbidden")
            && stderr.contains("token \"dash\" has role read")
            && stderr.contains("needs admin"),
        "{stderr}"
    );

    write_tokens(
        &tokens,
        &[
            ("ops", "admin", OPS),
            ("new-writer", "write", NEW),
            ("dash", "read", READER),
        ],
    );
    let mark = cluster.log("solo").len();
    cluster.signal("solo", SIGHUP);
    let reloaded = wait_for_log(&cluster, "solo", mark, &["admin tokens reloaded"]);
    assert!(
        reloaded.contains("new-writer") && !reloaded.contains("old-writer"),
        "{reloaded}"
    );
    assert_eq!(put(&admin, "b", NEW), 200, "the added token");
    assert_eq!(put(&admin, "b", OLD), 401, "the removed token");

    // A broken file: refused, named, and the tokens in force stay.
    std::fs::write(
        &tokens,
        "[[token]]\nname = \"x\"\nrole = \"root\"\nsecret = \"s\"\n",
    )
    .unwrap();
    let mark = cluster.log("solo").len();
    cluster.signal("solo", SIGHUP);
    let broken = wait_for_log(
        &cluster,
        "solo",
        mark,
        &["reload refused", "admin.tokens_file"],
    );
    assert!(broken.contains("role \"root\""), "{broken}");
    assert_eq!(put(&admin, "c", NEW), 200, "the tokens in force stay");

    let log = cluster.log("solo");
    assert!(
        log.lines().any(|line| line.contains("admin mutation")
            && line.contains("new-writer")
            && line.contains("/v1/kv/c")),
        "no mutation line names the token:\n{log}"
    );
    for secret in [OPS, OLD, NEW, READER] {
        assert!(!log.contains(secret), "a secret in the log:\n{log}");
    }
}
