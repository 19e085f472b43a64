//! TLS for the admin and metrics listeners (ADMIN-TLS, issue 26 item 1), against real
//! `conclave run` processes and the real CLI, with certificates made by `openssl` for each
//! test (installed from Debian's package when missing):
//!
//! - with a valid certificate the CLI's verbs work over `https://` with `--cacert`, and
//!   `/metrics` is served over TLS too; a plain-HTTP request to either TLS port is answered
//!   400, naming https://, and its connection ends, never left hanging; the CLI pointed at
//!   the TLS port with http:// says to use https:// with --cacert;
//! - a node checked against the wrong CA is refused by the CLI, naming the problem;
//! - with `admin.tls.client_ca_file`, a CLI without a client certificate, or with one from
//!   another CA, gets no answer; with one from the right CA it works;
//! - an expired certificate is refused by `check-config` and by `run`, naming the key;
//! - SIGHUP serves a renewed certificate without a restart.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::{ProcessCluster, conclave, libfaketime, openssl, text};

/// A CA, and certificates it (or a second CA) signed, in one directory.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// A CA `ca`, a second CA `other-ca`, a server certificate `server` for `ip` signed by
    /// `ca`, client certificates `client` (by `ca`) and `stranger` (by `other-ca`).
    fn new(dir: &Path, ip: &str) -> Self {
        let pki = Self {
            dir: dir.join("pki"),
        };
        std::fs::create_dir_all(&pki.dir).expect("a directory for the certificates");
        pki.ca("ca");
        pki.ca("other-ca");
        pki.issue(
            "server",
            "ca",
            &format!("subjectAltName=IP:{ip}\nextendedKeyUsage=serverAuth"),
            &[],
        );
        pki.issue("client", "ca", "extendedKeyUsage=clientAuth", &[]);
        pki.issue("stranger", "other-ca", "extendedKeyUsage=clientAuth", &[]);
        pki
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn openssl(&self, args: &[&str], env: &[(&str, &str)]) {
        let output = Command::new(openssl())
            .args(args)
            .envs(env.iter().copied())
            .current_dir(&self.dir)
            .output()
            .expect("run openssl");
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            text(&output.stderr)
        );
    }

    fn ca(&self, name: &str) {
        self.openssl(
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.pem"),
                "-days",
                "30",
                "-subj",
                &format!("/CN=conclave test {name}"),
            ],
            &[],
        );
    }

    /// `name.pem` and `name.key`, signed by `ca`, with the extensions `ext`, the clock of
    /// openssl set by `env` (libfaketime).
    fn issue(&self, name: &str, ca: &str, ext: &str, env: &[(&str, &str)]) {
        std::fs::write(self.dir.join(format!("{name}.ext")), format!("{ext}\n"))
            .expect("write the extensions");
        self.openssl(
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN={name}"),
            ],
            &[],
        );
        self.openssl(
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                &format!("{ca}.pem"),
                "-CAkey",
                &format!("{ca}.key"),
                "-CAcreateserial",
                "-out",
                &format!("{name}.pem"),
                "-days",
                "10",
                "-extfile",
                &format!("{name}.ext"),
            ],
            env,
        );
    }
}

/// `[admin.tls]` and `[metrics.tls]` with the server certificate, and client CAs when
/// `mutual`.
fn tls_toml(pki: &Pki, mutual: bool) -> String {
    let client_ca = if mutual {
        format!("client_ca_file = {:?}\n", pki.path("ca.pem"))
    } else {
        String::new()
    };
    format!(
        "[log]\nenabled = true\n\n\
         [admin.tls]\ncert_file = {cert:?}\nkey_file = {key:?}\n{client_ca}\n\
         [metrics.tls]\ncert_file = {cert:?}\nkey_file = {key:?}\n",
        cert = pki.path("server.pem"),
        key = pki.path("server.key"),
    )
}

/// `conclave ARGS --admin https://… --cacert CA [more]`: exit code, standard output and
/// standard error.
fn https_cli(cluster: &ProcessCluster, args: &[&str], tls: &[&str]) -> (i32, String, String) {
    let admin = format!("https://{}", cluster.admin_addr("gw-a"));
    // The options go before a `--` (after it, `lock` takes everything as its command).
    let split = args
        .iter()
        .position(|arg| *arg == "--")
        .unwrap_or(args.len());
    let mut all = args[..split].to_vec();
    all.extend_from_slice(&["--admin", &admin]);
    all.extend_from_slice(tls);
    all.extend_from_slice(&args[split..]);
    let output = conclave(&all);
    (
        output.status.code().unwrap_or(-1),
        text(&output.stdout),
        text(&output.stderr),
    )
}

/// Waits until the node, asked over TLS as `tls` says, leads.
fn wait_leading(cluster: &ProcessCluster, tls: &[&str]) {
    cluster.wait_for("gw-a leading, asked over TLS", |c| {
        let (code, out, _) = https_cli(c, &["status", "--json"], tls);
        let status: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        (code == 0 && status["role"] == "leader").then_some(())
    });
}

/// ADMIN-TLS: the CLI's verbs over https:// with --cacert; /metrics over TLS; a plain-HTTP
/// request to either TLS port is answered 400 naming https://, then closed; the wrong CA is
/// refused with a clear message.
#[test]
fn the_cli_works_over_tls_and_plain_http_is_answered() {
    let cluster = ProcessCluster::new(&["gw-a"]);
    let pki = Pki::new(cluster.dir(), &cluster.ip().to_string());
    let mut cluster = cluster_with(cluster, &tls_toml(&pki, false));
    cluster.start("gw-a");
    let ca = pki.path("ca.pem");
    let tls = ["--cacert", ca.as_str()];
    wait_leading(&cluster, &tls);

    let snapshot = cluster.dir().join("backup.snap").display().to_string();
    let verbs: &[&[&str]] = &[
        &["status"],
        &["peers"],
        &["history"],
        &["kv", "put", "greeting", "hello"],
        &["kv", "get", "greeting"],
        &["kv", "list"],
        &["jobs", "add", "--queue", "q", "payload"],
        &["jobs", "list"],
        &["jobs", "claim", "--queue", "q", "--worker", "w"],
        &["session", "grant", "--ttl", "5000"],
        &["session", "list"],
        &["member", "list"],
        &["auto-election", "off"],
        &["auto-election", "on"],
        &["leader", "set", "gw-a"],
        &["lock", "tls-lock", "--", "true"],
        &["snapshot", "save", &snapshot],
        &[
            "cluster",
            "status",
            "--endpoints",
            &format!("https://{}", cluster.admin_addr("gw-a")),
        ],
    ];
    for verb in verbs {
        let (code, out, err) = https_cli(&cluster, verb, &tls);
        assert_eq!(code, 0, "conclave {verb:?} over TLS: {out}{err}");
    }
    let (code, out, err) = https_cli(&cluster, &["kv", "get", "greeting"], &tls);
    assert_eq!((code, out.trim()), (0, "hello"), "{err}");

    // The node's certificate checked against another CA: refused, saying why.
    let other = pki.path("other-ca.pem");
    let (code, _, err) = https_cli(&cluster, &["status"], &["--cacert", other.as_str()]);
    assert_ne!(code, 0);
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    // An https:// URL without a CA: refused before anything is sent, naming --cacert.
    let (code, _, err) = https_cli(&cluster, &["status"], &[]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--cacert"), "{err}");

    // The CLI pointed at the TLS port with http://: the node answers that it speaks HTTPS, and
    // the CLI says what to do, as for a bad address.
    let plain = conclave(&[
        "status",
        "--admin",
        &format!("http://{}", cluster.admin_addr("gw-a")),
    ]);
    assert_eq!(plain.status.code(), Some(64), "{}", text(&plain.stderr));
    assert!(
        text(&plain.stderr).contains("use https:// with --cacert"),
        "{}",
        text(&plain.stderr)
    );

    // /metrics over TLS.
    let metrics = conclave_metrics_over_tls(&cluster, &pki);
    assert!(metrics.contains("conclave_election_term"), "{metrics}");

    // Plain HTTP to either TLS port: a 400 that names https://, then the end of the
    // connection.
    let metrics_addr = cluster
        .metrics_url("gw-a")
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_owned();
    for (addr, section) in [
        (cluster.admin_addr("gw-a"), "admin.tls"),
        (metrics_addr, "metrics.tls"),
    ] {
        let answer = plain_http_get(&addr);
        assert!(answer.starts_with("HTTP/1.1 400"), "{addr}: {answer}");
        assert!(answer.contains("https://"), "{addr}: {answer}");
        assert!(answer.contains(section), "{addr}: {answer}");
    }
}

/// A plain-HTTP `GET /health` to `addr`: the whole answer, read until the node closes the
/// connection (a read that waits 20 s fails the test: the request was left hanging).
fn plain_http_get(addr: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a read timeout");
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    assert!(
        read.is_ok(),
        "a plain-HTTP request to {addr} was left hanging: {read:?}"
    );
    String::from_utf8_lossy(&answer).into_owned()
}

/// `GET /metrics` over TLS, with curl-free Rust: the CLI has no metrics verb, so a TLS
/// client is made here with the same CA.
fn conclave_metrics_over_tls(cluster: &ProcessCluster, pki: &Pki) -> String {
    let url = cluster
        .metrics_url("gw-a")
        .replacen("http://", "https://", 1);
    let output = Command::new(openssl())
        .args([
            "s_client",
            "-quiet",
            "-CAfile",
            &pki.path("ca.pem"),
            "-connect",
        ])
        .arg(
            url.trim_start_matches("https://")
                .trim_end_matches("/metrics"),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
            child.wait_with_output()
        })
        .expect("run openssl s_client");
    text(&output.stdout)
}

fn cluster_with(cluster: ProcessCluster, toml: &str) -> ProcessCluster {
    cluster.with_toml(toml)
}

/// ADMIN-TLS, mutual: with admin.tls.client_ca_file a client must present a certificate of
/// that CA; without one, or with another CA's, it gets no answer.
#[test]
fn a_client_certificate_of_the_right_ca_is_required() {
    let cluster = ProcessCluster::new(&["gw-a"]);
    let pki = Pki::new(cluster.dir(), &cluster.ip().to_string());
    let mut cluster = cluster_with(cluster, &tls_toml(&pki, true));
    cluster.start("gw-a");
    let ca = pki.path("ca.pem");
    let (cert, key) = (pki.path("client.pem"), pki.path("client.key"));
    let good = [
        "--cacert",
        ca.as_str(),
        "--cert",
        cert.as_str(),
        "--key",
        key.as_str(),
    ];
    wait_leading(&cluster, &good);
    let (code, out, err) = https_cli(&cluster, &["kv", "put", "k", "v"], &good);
    assert_eq!(code, 0, "{out}{err}");

    let (code, _, err) = https_cli(&cluster, &["status"], &["--cacert", ca.as_str()]);
    assert_eq!(code, 69, "without a client certificate: {err}");
    let (stranger, stranger_key) = (pki.path("stranger.pem"), pki.path("stranger.key"));
    let (code, _, err) = https_cli(
        &cluster,
        &["status"],
        &[
            "--cacert",
            ca.as_str(),
            "--cert",
            stranger.as_str(),
            "--key",
            stranger_key.as_str(),
        ],
    );
    assert_eq!(code, 69, "with another CA's client certificate: {err}");
    // The same options from the environment.
    let admin = format!("https://{}", cluster.admin_addr("gw-a"));
    let output = Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["kv", "get", "k"])
        .env("CONCLAVE_ADMIN", &admin)
        .env("CONCLAVE_CACERT", &ca)
        .env("CONCLAVE_CERT", &cert)
        .env("CONCLAVE_KEY", &key)
        .output()
        .expect("run conclave");
    assert_eq!(text(&output.stdout).trim(), "v", "{}", text(&output.stderr));
}

/// ADMIN-TLS: an expired certificate is refused by check-config and by run, naming the key
/// and saying it expired.
#[test]
fn an_expired_certificate_is_refused_naming_the_key() {
    let cluster = ProcessCluster::new(&["gw-a"]);
    let pki = Pki::new(cluster.dir(), &cluster.ip().to_string());
    let faketime = libfaketime().display().to_string();
    // Issued 40 days ago for 10 days.
    pki.issue(
        "server",
        "ca",
        &format!("subjectAltName=IP:{}", cluster.ip()),
        &[("LD_PRELOAD", faketime.as_str()), ("FAKETIME", "-40d")],
    );
    let cluster = cluster_with(cluster, &tls_toml(&pki, false));
    let config = cluster.write_config("gw-a");
    let checked = conclave(&["check-config", &config.display().to_string()]);
    assert!(!checked.status.success());
    let said = format!("{}{}", text(&checked.stdout), text(&checked.stderr));
    assert!(
        said.contains("admin.tls.cert_file") && said.contains("expired"),
        "{said}"
    );
    let run = cluster
        .command("gw-a")
        .args(["run", "--config"])
        .arg(&config)
        .status()
        .expect("run conclave");
    assert!(!run.success());
    let log = cluster.log("gw-a");
    assert!(
        log.contains("admin.tls.cert_file") && log.contains("expired"),
        "{log}"
    );
}

/// ADMIN-TLS: SIGHUP reads the certificate files again; the node serves the new one without
/// a restart (here, one signed by another CA, so the switch is visible to the client).
#[test]
fn sighup_serves_a_renewed_certificate() {
    let cluster = ProcessCluster::new(&["gw-a"]);
    let pki = Pki::new(cluster.dir(), &cluster.ip().to_string());
    let mut cluster = cluster_with(cluster, &tls_toml(&pki, false));
    cluster.start("gw-a");
    let (ca, other) = (pki.path("ca.pem"), pki.path("other-ca.pem"));
    wait_leading(&cluster, &["--cacert", ca.as_str()]);

    pki.issue(
        "server",
        "other-ca",
        &format!("subjectAltName=IP:{}", cluster.ip()),
        &[],
    );
    cluster.signal("gw-a", libc::SIGHUP);
    wait_leading(&cluster, &["--cacert", other.as_str()]);
    let (code, _, err) = https_cli(&cluster, &["status"], &["--cacert", ca.as_str()]);
    assert_ne!(code, 0, "the old certificate is still served: {err}");
    let log = cluster.log("gw-a");
    assert!(
        log.contains("admin.tls: certificate, key and client CAs read again"),
        "{log}"
    );
}
