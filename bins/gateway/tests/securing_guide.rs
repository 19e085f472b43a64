//! docs/operations.md, "Securing a cluster", followed as written by an operator starting from
//! nothing (issue 26): every shell block of the section — and the ones it sends the reader to,
//! the cluster key of "First cluster" and the worker's token of "Scoped tokens" — runs through
//! `sh -e` as it is printed, and the node's TOML and Prometheus's YAML are used as printed.
//!
//! What the guide cannot say literally is changed in the open, and only that: `/etc/conclave`
//! is a directory of the test's, the guide's 10.0.0.1–3 are this cluster's loopback address
//! and ports (one address, so each node's certificate names the same IP), `gw-a`'s
//! certificate commands are run again for `gw-b` and `gw-c` as the guide says, and three
//! shell functions stand in for what needs a real host: `systemctl reload conclave` sends
//! SIGHUP to every node, `sudo` runs its command, and `chgrp` (to the service's group, which
//! exists only where the package is installed) does nothing. Prometheus, when it is not
//! installed, comes from Debian's package, as `dashboards/check.sh` installs it.
//!
//! Then the cluster must be what the guide promises: three nodes over TLS with mutual
//! certificates and the operators' token, `cluster status` and a write through the CLI
//! block, a worker's token that claims its queue and is refused a key, Prometheus scraping
//! every node over TLS, and a renewed certificate served after the reload.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use support::{ProcessCluster, apt_install, openssl, text};

const NODES: [&str; 3] = ["gw-a", "gw-b", "gw-c"];
const CLUSTER_LINE: &str = "[cluster]\nid = \"process-test\"\n";

/// The part of docs/operations.md under the heading `heading` (`## …` or `### …`), up to the
/// next heading of any level.
fn section(heading: &str) -> String {
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md"),
    )
    .unwrap();
    let start = guide
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/operations.md has no {heading:?}"));
    let body = &guide[start + heading.len() + 2..];
    let end = ["\n## ", "\n### "]
        .iter()
        .filter_map(|next| body.find(next))
        .min()
        .unwrap_or(body.len());
    body[..end].to_owned()
}

/// The fenced blocks of language `lang` in `text`, in order, each without its fences and with
/// its indentation (a block inside a list item) removed.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut current: Option<(usize, Vec<String>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match current.as_mut() {
            None if trimmed == format!("```{lang}") => current = Some((indent, Vec::new())),
            None => {}
            Some(_) if trimmed == "```" => {
                let (_, lines) = current.take().unwrap();
                found.push(lines.join("\n") + "\n");
            }
            Some((indent, lines)) => lines.push(line.get(*indent..).unwrap_or("").to_owned()),
        }
    }
    assert!(!found.is_empty(), "no ```{lang} block in {text}");
    found
}

/// The single `lang` block of section `heading`.
fn block(heading: &str, lang: &str) -> String {
    let mut all = blocks(&section(heading), lang);
    assert_eq!(all.len(), 1, "{heading} should show one {lang} block");
    all.remove(0)
}

/// The operator's machine and the nodes' `/etc`, in the test's directory.
struct Host {
    /// Stands for `/`: `/etc/conclave` is `root/etc/conclave`.
    root: PathBuf,
    /// The process ids `systemctl reload conclave` signals.
    pids: Vec<u32>,
}

impl Host {
    fn etc(&self) -> PathBuf {
        self.root.join("etc/conclave")
    }

    fn tls(&self) -> PathBuf {
        self.etc().join("tls")
    }

    /// `text` with the guide's paths under this host's root.
    fn paths(&self, text: &str) -> String {
        text.replace("/etc/conclave", &self.etc().display().to_string())
            .replace(
                "/etc/prometheus",
                &self.root.join("etc/prometheus").display().to_string(),
            )
    }

    /// Runs `script` with `sh -e` in `dir`, with the stand-ins of the module's comment, the
    /// CLI on PATH and `env`; returns its standard output, failing the test if it fails.
    fn sh(&self, dir: &Path, script: &str, env: &[(&str, &str)]) -> String {
        let binaries = Path::new(env!("CARGO_BIN_EXE_conclave")).parent().unwrap();
        let pids: Vec<String> = self.pids.iter().map(u32::to_string).collect();
        let prelude = format!(
            "systemctl() {{ [ \"$1 $2\" = 'reload conclave' ] && kill -HUP {pids}; }}\n\
             sudo() {{ \"$@\"; }}\n\
             chgrp() {{ :; }}\n",
            pids = pids.join(" ")
        );
        let output = Command::new("sh")
            .args(["-e", "-c", &format!("{prelude}{script}")])
            .current_dir(dir)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    binaries.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("HOME", self.tls())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "the guide's commands failed:\n{script}\n{}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
        text(&output.stdout)
    }
}

/// `text`, written for gw-a at 10.0.0.1, made node `id`'s: `gw-a` and `id` swap names, and
/// 10.0.0.1 and `id`'s guide address swap too.
fn as_node(text: &str, id: &str) -> String {
    let index = NODES.iter().position(|node| *node == id).unwrap();
    let (address, name) = (format!("10.0.0.{}", index + 1), id);
    text.replace("gw-a", "\u{1}")
        .replace("10.0.0.1", "\u{2}")
        .replace(name, "gw-a")
        .replace(&address, "10.0.0.1")
        .replace('\u{1}', name)
        .replace('\u{2}', &address)
}

/// The guide's addresses made this cluster's: `10.0.0.N:7070` the admin API of the N-th
/// node, `10.0.0.N:9464` its metrics, and a bare `10.0.0.N` (in a certificate) the address.
fn addresses(text: &str, cluster: &ProcessCluster) -> String {
    let mut text = text.to_owned();
    for (index, id) in NODES.iter().enumerate() {
        let guide = format!("10.0.0.{}", index + 1);
        text = text
            .replace(&format!("{guide}:7070"), &cluster.admin_addr(id))
            .replace(&format!("{guide}:9464"), &metrics_addr(cluster, id));
    }
    for index in 1..=NODES.len() {
        text = text.replace(&format!("10.0.0.{index}"), &cluster.ip().to_string());
    }
    text
}

fn metrics_addr(cluster: &ProcessCluster, id: &str) -> String {
    cluster
        .metrics_url(id)
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_owned()
}

/// Node `id`'s whole configuration: the harness's (its cluster, link and timings) with the
/// guide's `[admin]` and `[metrics]` in place of the harness's, and the cluster key.
fn node_config(cluster: &ProcessCluster, host: &Host, id: &str, guide_toml: &str) -> String {
    let harness = cluster.config_text(id);
    let listeners = format!(
        "[admin]\nlisten = {:?}\n\n[metrics]\nlisten = \"{}\"\n\n",
        cluster.admin_addr(id),
        metrics_addr(cluster, id)
    );
    assert!(harness.contains(&listeners), "{harness}");
    let psk = format!(
        "psk_file = {:?}\n",
        host.etc().join("psk").display().to_string()
    );
    harness
        .replace(&listeners, "")
        .replace(CLUSTER_LINE, &format!("{CLUSTER_LINE}{psk}"))
        + &addresses(&host.paths(&as_node(guide_toml, id)), cluster)
}

/// The serial number of the certificate the admin API of `id` serves.
fn served_serial(cluster: &ProcessCluster, host: &Host, id: &str) -> Option<String> {
    let tls = host.tls();
    let script = format!(
        "{openssl} s_client -connect {addr} -CAfile ca.pem -cert ops.pem -key ops.key \
         </dev/null 2>/dev/null | {openssl} x509 -noout -serial",
        openssl = openssl(),
        addr = cluster.admin_addr(id)
    );
    let output = Command::new("sh")
        .args(["-c", &script])
        .current_dir(tls)
        .output()
        .ok()?;
    let serial = text(&output.stdout).trim().to_owned();
    (output.status.success() && serial.starts_with("serial=")).then_some(serial)
}

/// A Prometheus server, stopped when dropped.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs Prometheus with the guide's scrape configuration (scraping every second) and waits
/// until `up{job="conclave"}` is 1 for every node.
fn prometheus_scrapes_every_node(cluster: &ProcessCluster, host: &Host) {
    apt_install(
        "prometheus",
        "this test scrapes the nodes with Prometheus as docs/operations.md shows",
        || {
            Command::new("prometheus")
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        },
    );
    let prometheus_etc = host.root.join("etc/prometheus");
    std::fs::create_dir_all(&prometheus_etc).unwrap();
    // Prometheus's host has the cluster's CA and a client certificate, made as ops's.
    for (from, to) in [
        ("ca.pem", "conclave-ca.pem"),
        ("ops.pem", "conclave-scraper.pem"),
        ("ops.key", "conclave-scraper.key"),
    ] {
        std::fs::copy(host.tls().join(from), prometheus_etc.join(to)).unwrap();
    }
    let yaml = addresses(&host.paths(&block("### Prometheus", "yaml")), cluster);
    let config = prometheus_etc.join("prometheus.yml");
    std::fs::write(&config, format!("global:\n  scrape_interval: 1s\n{yaml}")).unwrap();
    let listen = format!("{}:9090", cluster.ip());
    let _server = Prometheus(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                host.root.join("prometheus-data").display()
            ))
            .arg(format!("--web.listen-address={listen}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let query = format!("http://{listen}/api/v1/query?query=up%7Bjob%3D%22conclave%22%7D");
    cluster.wait_for("Prometheus scraping all three nodes over TLS", |_| {
        let answer: Value = ureq::get(&query).call().ok()?.body_mut().read_json().ok()?;
        let up = answer["data"]["result"].as_array()?;
        (up.len() == NODES.len() && up.iter().all(|series| series["value"][1] == "1")).then_some(())
    });
}

/// Issue 26: "Securing a cluster" from nothing to TLS, tokens and a sealed cluster key, as
/// written.
#[test]
fn the_securing_guide_works_as_written() {
    let mut cluster = ProcessCluster::new(&NODES).with_toml("[log]\nenabled = true\n");
    let mut host = Host {
        root: cluster.dir().join("root"),
        pids: Vec::new(),
    };
    std::fs::create_dir_all(host.tls()).unwrap();
    openssl();

    // The CA, gw-a's certificate and the operators' client certificate, then gw-b's and
    // gw-c's from gw-a's commands.
    let certificates = host.paths(&block("### A CA and certificates", "sh"));
    let start = certificates
        .find("# gw-a's certificate")
        .expect("the guide makes gw-a's certificate");
    let end = certificates
        .find("# A client certificate")
        .expect("then a client certificate");
    let node_certificate = &certificates[start..end];
    host.sh(&host.tls(), &addresses(&certificates, &cluster), &[]);
    for id in &NODES[1..] {
        let commands = addresses(&as_node(node_certificate, id), &cluster);
        host.sh(&host.tls(), &commands, &[]);
    }
    assert!(host.tls().join("gw-c.pem").exists());

    // The cluster key, made as "First cluster" says, and the operators' token.
    let key = blocks(&section("## First cluster"), "sh").remove(0);
    assert!(key.contains("/etc/conclave/psk"), "{key}");
    host.sh(&host.root, &host.paths(&key), &[]);
    let tokens = host.paths(&block("### Tokens", "sh"));
    let ops_token = host.sh(
        &host.root,
        &format!("{tokens}printf %s \"$OPS_TOKEN\"\n"),
        &[],
    );
    assert_eq!(ops_token.len(), 64, "{ops_token}");

    // Each node with the guide's TOML; gw-a's file is the guide's /etc/conclave/conclave.toml.
    let guide_toml = block("### The node", "toml");
    for id in NODES {
        let config = node_config(&cluster, &host, id, &guide_toml);
        if id == "gw-a" {
            std::fs::write(host.etc().join("conclave.toml"), &config).unwrap();
        }
        cluster.start_with_config(id, &config);
    }
    host.pids = NODES.iter().map(|id| cluster.pid(id)).collect();

    // The CLI block: the operator's environment, `cluster status`, a write and a read.
    let cli = addresses(&host.paths(&block("### The CLI", "sh")), &cluster);
    let exports: String = cli
        .lines()
        .filter(|line| line.starts_with("export "))
        .map(|line| format!("{line}\n"))
        .collect();
    let env = [("OPS_TOKEN", ops_token.as_str())];
    cluster.wait_for(
        "a leader, asked over TLS with the guide's environment",
        |_| {
            let script = format!("{exports}conclave status --json 2>/dev/null || true\n");
            let status: Value = serde_json::from_str(&host.sh(&host.root, &script, &env)).ok()?;
            status["leader"].as_str().map(str::to_owned)
        },
    );
    let printed = host.sh(&host.root, &cli, &env);
    assert!(printed.trim_end().ends_with("active"), "{printed}");
    for id in NODES {
        assert!(printed.contains(id), "cluster status names {id}: {printed}");
    }

    // The worker's token of "Scoped tokens": checked, reloaded on every node, then it claims
    // its queue and is refused a key.
    let marks: Vec<usize> = NODES.iter().map(|id| cluster.log(id).len()).collect();
    let worker = host.paths(&block("### Scoped tokens", "sh"));
    let printed = host.sh(
        &host.root,
        &format!("{worker}printf '\\n%s' \"$TOKEN\"\n"),
        &[],
    );
    assert!(
        printed.contains(": ok"),
        "check-config passed the file: {printed}"
    );
    assert!(
        printed.contains("  admin https://") && printed.contains("  metrics https://"),
        "check-config names the TLS listeners' scheme: {printed}"
    );
    let worker_token = printed.lines().last().unwrap_or_default().to_owned();
    assert_eq!(worker_token.len(), 64, "{printed}");
    for (id, mark) in NODES.iter().zip(marks) {
        cluster.wait_for(&format!("{id} reloading its tokens"), |c| {
            c.log(id)
                .get(mark..)?
                .contains("configuration reloaded")
                .then_some(())
        });
    }
    let as_worker = format!(
        "{exports}export CONCLAVE_ADMIN_TOKEN={worker_token}\n\
         CONCLAVE_ADMIN_TOKEN=$OPS_TOKEN conclave jobs add --queue thumbnails cat.jpg\n\
         conclave jobs claim --queue thumbnails --worker thumbnailer-1\n\
         if conclave kv put config/mode off 2>refused; then exit 1; fi\n\
         cat refused\n"
    );
    let printed = host.sh(&host.root, &as_worker, &env);
    assert!(printed.contains("cat.jpg"), "the worker claimed: {printed}");
    assert!(printed.contains("forbidden"), "the key refused: {printed}");

    prometheus_scrapes_every_node(&cluster, &host);

    // "Renewing a certificate": gw-a's commands again over the old files, then the reload.
    let before = served_serial(&cluster, &host, "gw-a").expect("gw-a serves its certificate");
    host.sh(&host.tls(), &addresses(node_certificate, &cluster), &[]);
    assert!(section("### Renewing a certificate").contains("`systemctl reload conclave`"));
    host.sh(&host.root, "systemctl reload conclave\n", &[]);
    cluster.wait_for("gw-a serving its renewed certificate", |c| {
        served_serial(c, &host, "gw-a").filter(|serial| *serial != before)
    });

    for id in NODES {
        assert_eq!(cluster.stop(id).code(), Some(0), "{id} stops cleanly");
    }
}
