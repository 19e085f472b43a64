//! The admin API checks the bearer token before it reads a mutation's body (CB-3, issue 15):
//! a request without the token gets 401 whatever its body, so a client without the token
//! learns nothing about what the API accepts; with the token, a malformed body gets 400.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;

use support::{BOUND, ProcessCluster};

const TOKEN: &str = "s3cret-admin-token";

/// POSTs `body` to `path` at `addr` (with `token` as bearer token when given); the status line.
fn post(addr: &str, path: &str, body: &str, token: Option<&str>) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    let authorization = token.map_or_else(String::new, |token| {
        format!("Authorization: Bearer {token}\r\n")
    });
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         {authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn the_token_is_checked_before_the_body() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("admin-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let mut cluster = ProcessCluster::new(&["solo"])
        .with_env("CONCLAVE__ADMIN__TOKEN_FILE", token_file.to_str().unwrap());
    cluster.start_all();
    cluster.wait_for("the admin API", |c| c.status("solo"));
    let admin = cluster.admin_addr("solo");

    for (path, body) in [
        ("/v1/leader", "{not json"),
        ("/v1/leader", "{\"peer\": 3}"),
        ("/v1/auto-election", "[]"),
    ] {
        let status = post(&admin, path, body, None);
        assert!(
            status.starts_with("HTTP/1.1 401"),
            "{path} {body}: {status}"
        );
        let status = post(&admin, path, body, Some("wrong"));
        assert!(
            status.starts_with("HTTP/1.1 401"),
            "{path} {body}: {status}"
        );
        let status = post(&admin, path, body, Some(TOKEN));
        assert!(
            status.starts_with("HTTP/1.1 400"),
            "{path} {body}: {status}"
        );
    }
}
