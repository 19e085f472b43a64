//! Tests of loading and validation (docs/design.md §9), named after the rule they check.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use conclave_core::MembershipConfig;
use conclave_core::election::{ElectionConfig as ModeConfig, Mode};
use conclave_protocol::{AuthKey, DEFAULT_TAG_LEN, PeerId};

use super::schema::KEYS;
use super::*;
use crate::{
    AdminConfig, AdminToken, DonglePort, HealthConfig, HealthSource, HookCommand, HooksConfig,
    NodeConfig, TokenRole,
};
use conclave_core::gossip::GossipConfig;
use conclave_core::priority::PriorityConfig;
use conclave_core::static_leader::StaticConfig;

/// The raft configuration of a node in raft mode (its type is named only where it is built,
/// `crate::node`).
macro_rules! raft_of {
    ($config:expr) => {
        match &$config.election {
            ModeConfig::Raft(raft) => raft,
            other => panic!("raft mode expected, found {other:?}"),
        }
    };
}

/// Shows the log when a test fails, as CONVENTIONS.md asks.
fn log_to_test_output() -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_test_writer()
            .finish(),
    )
}

fn no_env() -> std::iter::Empty<(String, String)> {
    std::iter::empty()
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|&(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

fn settings(toml: &str) -> Settings {
    Settings::from_toml_str(toml).unwrap()
}

fn node_config(toml: &str) -> NodeConfig {
    settings(toml)
        .validate()
        .unwrap_or_else(|problems| panic!("unexpected problems: {problems:#?}"))
}

fn warnings(toml: &str) -> Vec<ConfigWarning> {
    settings(toml)
        .validate_with_warnings()
        .unwrap_or_else(|problems| panic!("unexpected problems: {problems:#?}"))
        .1
}

fn refused(toml: &str) -> Vec<ConfigProblem> {
    settings(toml)
        .validate()
        .expect_err("the configuration should be refused")
}

/// Asserts that one of `problems` concerns `key` and says `gist`.
#[track_caller]
fn assert_problem(problems: &[ConfigProblem], key: &str, gist: &str) {
    assert!(
        problems
            .iter()
            .any(|problem| problem.key == key && problem.message.contains(gist)),
        "no problem `{key}: …{gist}…` among {problems:#?}"
    );
}

/// Asserts that `problems` concern exactly `keys`, once each.
#[track_caller]
fn assert_keys(problems: &[ConfigProblem], keys: &[&str]) {
    let found: Vec<&str> = problems
        .iter()
        .map(|problem| problem.key.as_str())
        .collect();
    assert_eq!(found, keys, "{problems:#?}");
}

#[track_caller]
fn assert_warning(warnings: &[ConfigWarning], key: &str, gist: &str) {
    assert!(
        warnings
            .iter()
            .any(|warning| warning.key == key && warning.message.contains(gist)),
        "no warning `{key}: …{gist}…` among {warnings:#?}"
    );
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(node: &str) -> PathBuf {
    repo_root().join(format!("config/examples/three-udp/node-{node}.toml"))
}

/// Lets a test use a radio or an address beyond loopback without a key.
const INSECURE: &str = "[cluster]\ninsecure = true\n";

fn file_with(contents: &[u8]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(contents).unwrap();
    file.flush().unwrap();
    file
}

/// A TOML basic string holding `path`.
fn toml_path(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// docs/design.md §9: every setting has a default that serves a single-node start; the defaults
/// validate into a node that is its own only voter, on loopback, without a link.
#[test]
fn defaults_validate_into_a_single_node_config() {
    let _log = log_to_test_output();
    let settings = Settings::load_with_env(None, no_env()).unwrap();
    assert!(
        settings.read_problems().is_empty(),
        "{:#?}",
        settings.read_problems()
    );
    let (config, warnings) = settings.validate_with_warnings().unwrap();

    let id = PeerId::from_static("node-1");
    assert_eq!(config.node_id, id);
    assert_eq!(config.cluster_id.as_str(), "default");
    assert_eq!(config.data_dir, PathBuf::from("./conclave-data"));
    assert!(config.auth_key.is_none());
    assert_eq!(config.voters, vec![id]);
    assert!(config.election.auto_election());
    assert_eq!(raft_of!(config).quorum.label(), "voters");
    assert_eq!(config.election, ModeConfig::raft(id, [id]));
    assert_eq!(config.election.mode(), Mode::Raft);
    assert_eq!(config.membership, MembershipConfig::default());
    assert_eq!(config.udp, None);
    assert_eq!(config.admin.listen, Some(addr("127.0.0.1:7070")));
    assert!(config.admin.tokens.is_empty());
    assert_eq!(config.metrics.listen, Some(addr("127.0.0.1:9464")));
    assert_eq!(config.hooks, HooksConfig::default());
    // Issue 15: a single node with no link sends and receives no frames, so running it
    // without a key is nothing to warn about; nothing else is either.
    assert!(warnings.is_empty(), "{warnings:#?}");
}

/// The defaults agree with the core's and the protocol's own defaults.
#[test]
fn defaults_match_the_core_and_protocol_defaults() {
    let settings = Settings::load_with_env(None, no_env()).unwrap();
    assert_eq!(settings.cluster.tag_bytes, DEFAULT_TAG_LEN as u64);
    let membership = &settings.membership;
    let core = MembershipConfig::default();
    assert_eq!(
        Duration::from_millis(membership.heartbeat_ms),
        core.heartbeat_interval
    );
    assert_eq!(
        membership.timeout_multiplier,
        u64::from(core.timeout_multiplier)
    );
    assert_eq!(
        Duration::from_millis(membership.hello_interval_ms),
        core.hello_interval
    );
    assert_eq!(
        Duration::from_millis(membership.announce_interval_ms),
        core.announce_interval
    );
    assert_eq!(
        Duration::from_millis(settings.hooks.timeout_ms),
        HooksConfig::default().timeout
    );
}

/// Issue 9, item 7: the settings' defaults are read from the code's (the cores' configs, the
/// actors' `Default` impls), and going through the file form and back (milliseconds, strings)
/// loses nothing: the defaults validate into exactly the code's defaults, for raft, gossip and
/// priority cores, membership, admin bounds, hooks and health.
#[test]
fn code_defaults_equal_the_built_in_defaults() {
    let in_mode = |mode: &str| {
        Settings::load_with_env(None, env(&[("CONCLAVE__ELECTION__MODE", mode)]))
            .unwrap()
            .validate()
            .unwrap()
    };
    let id = PeerId::from_static("node-1");
    let raft = in_mode("raft");
    assert_eq!(raft.election, ModeConfig::raft(id, [id]));
    assert_eq!(
        in_mode("gossip").election,
        ModeConfig::Gossip(GossipConfig::new(id))
    );
    assert_eq!(
        in_mode("priority").election,
        ModeConfig::Priority(PriorityConfig::new(id))
    );
    assert_eq!(raft.membership, MembershipConfig::default());
    assert_eq!(raft.hooks, HooksConfig::default());
    assert_eq!(raft.health, HealthConfig::default());
    let admin = AdminConfig::default();
    assert_eq!(raft.admin.max_connections, admin.max_connections);
    assert_eq!(raft.admin.max_event_streams, admin.max_event_streams);
    assert_eq!(raft.admin.peer_urls, admin.peer_urls);
    assert_eq!(raft.admin.tokens, admin.tokens);
}

/// The key list that checks every layer names exactly the fields of the serde structs.
#[test]
fn key_list_matches_the_settings_structs() {
    // Every list non-empty and every optional section present: the serializer leaves out
    // empty arrays and absent sections.
    let full = settings(
        r#"
        [cluster]
        voters = ["gw-a"]
        [election.raft]
        priority = 1
        [link.udp]
        listen = "127.0.0.1:7946"
        peers = ["127.0.0.1:7947"]
        [link.espnow]
        port = "virtual"
        peer_lmks = ["gw-b=00112233445566778899aabbccddeeff"]
        [admin]
        peer_urls = ["gw-b=http://127.0.0.1:7071"]
        [hooks]
        on_leader = ["a"]
        on_follower = ["b"]
        on_leader_change = ["c"]
        on_peer_status = ["d"]
        on_membership_change = ["e"]
        "#,
    );
    let tree = config::Config::try_from(&full).unwrap().collect().unwrap();
    fn keys(table: &config::Map<String, config::Value>, prefix: &str, out: &mut BTreeSet<String>) {
        for (name, value) in table {
            let key = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            if let config::ValueKind::Table(inner) = &value.kind {
                keys(inner, &key, out);
            }
            out.insert(key);
        }
    }
    let mut serialized = BTreeSet::new();
    keys(&tree, "", &mut serialized);
    let listed: BTreeSet<String> = KEYS.iter().map(|(key, _)| key.clone()).collect();
    assert_eq!(serialized, listed);
}

/// The example cluster: each file validates and the three form one cluster on loopback.
#[test]
fn each_example_validates_and_they_form_one_cluster() {
    let _log = log_to_test_output();
    let mut listens = Vec::new();
    let mut configs = Vec::new();
    for (node, udp, admin, metrics) in [
        ("a", 7946, 7070, 9464),
        ("b", 7947, 7071, 9465),
        ("c", 7948, 7072, 9466),
    ] {
        let settings = Settings::load_with_env(Some(&example(node)), no_env()).unwrap();
        let (config, warnings) = settings
            .validate_with_warnings()
            .unwrap_or_else(|problems| panic!("node-{node}.toml: {problems:#?}"));
        let node_id = PeerId::new(&format!("gw-{node}")).expect("gw-{node} is a valid peer id");
        assert_eq!(config.node_id, node_id);
        assert_eq!(config.cluster_id.as_str(), "three-udp");
        assert_eq!(config.data_dir, PathBuf::from(format!("./data/gw-{node}")));
        assert_eq!(
            config.voters,
            vec![
                PeerId::from_static("gw-a"),
                PeerId::from_static("gw-b"),
                PeerId::from_static("gw-c")
            ]
        );
        assert_eq!(
            raft_of!(config).heartbeat_interval,
            Duration::from_millis(500)
        );
        assert_eq!(
            raft_of!(config).election_timeout_min,
            Duration::from_millis(1500)
        );
        assert_eq!(
            raft_of!(config).election_timeout_max,
            Duration::from_millis(3000)
        );
        let link = config.udp.clone().unwrap();
        assert_eq!(link.listen, addr(&format!("127.0.0.1:{udp}")));
        assert_eq!(link.peers.len(), 2);
        assert_eq!(
            config.admin.listen,
            Some(addr(&format!("127.0.0.1:{admin}")))
        );
        assert_eq!(
            config.metrics.listen,
            Some(addr(&format!("127.0.0.1:{metrics}")))
        );
        // The demo runs without a key and says so; nothing else.
        assert_eq!(warnings.len(), 1, "node-{node}.toml: {warnings:#?}");
        assert_warning(&warnings, "cluster.psk_file", "not authenticated");
        listens.push(link.listen);
        configs.push(config);
    }
    for config in &configs {
        let link = config.udp.as_ref().unwrap();
        let others: Vec<SocketAddr> = listens
            .iter()
            .copied()
            .filter(|&listen| listen != link.listen)
            .collect();
        assert_eq!(link.peers, others, "{} lists the other two", config.node_id);
    }
}

/// Issue 9: `config/examples/` holds a three-node set per mode; every file there validates
/// with no warning but the demo's missing key, each set is one cluster in its mode (each
/// node lists the other two's addresses), and the gossip and priority sets use ports of
/// their own, so they can run beside the raft set (static reuses raft's on purpose).
#[test]
fn every_example_validates_in_its_mode() {
    let _log = log_to_test_output();
    let dir = repo_root().join("config/examples");
    let mut sets: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    sets.sort();
    let mut ports_by_set = Vec::new();
    for set in &sets {
        let name = set.file_name().unwrap().to_str().unwrap().to_owned();
        let mode = match name.as_str() {
            "three-udp" => Mode::Raft,
            "three-gossip" => Mode::Gossip,
            "three-priority" => Mode::Priority,
            "three-static" => Mode::Static,
            other => panic!("config/examples/{other}: which mode is it an example of?"),
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(set)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        files.sort();
        assert_eq!(files.len(), 3, "{name}: a three-node set");
        let mut configs = Vec::new();
        for file in &files {
            let (config, warnings) = Settings::load_with_env(Some(file), no_env())
                .unwrap()
                .validate_with_warnings()
                .unwrap_or_else(|problems| panic!("{}: {problems:#?}", file.display()));
            assert!(
                warnings.iter().all(|w| w.key == "cluster.psk_file"),
                "{}: {warnings:#?}",
                file.display()
            );
            assert_eq!(config.election.mode(), mode, "{}", file.display());
            configs.push(config);
        }
        let listens: Vec<SocketAddr> = configs
            .iter()
            .map(|config| config.udp.as_ref().unwrap().listen)
            .collect();
        let mut ports = BTreeSet::new();
        for config in &configs {
            let link = config.udp.as_ref().unwrap();
            let others: Vec<SocketAddr> = listens
                .iter()
                .copied()
                .filter(|&listen| listen != link.listen)
                .collect();
            assert_eq!(
                link.peers, others,
                "{name}: {} lists the other two",
                config.node_id
            );
            assert_eq!(config.cluster_id.as_str(), name);
            ports.insert(link.listen.port());
            ports.insert(config.admin.listen.unwrap().port());
            ports.insert(config.metrics.listen.unwrap().port());
        }
        assert_eq!(ports.len(), 9, "{name}: nine ports of its own");
        ports_by_set.push((name, ports));
    }
    for (i, (a, ports_a)) in ports_by_set.iter().enumerate() {
        for (b, ports_b) in &ports_by_set[i + 1..] {
            let shared = ports_a.intersection(ports_b).count();
            let together = [a.as_str(), b.as_str()];
            if together.contains(&"three-static") && together.contains(&"three-udp") {
                continue;
            }
            assert_eq!(shared, 0, "{a} and {b} share ports");
        }
    }
    let names: Vec<&str> = ports_by_set.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "three-gossip",
            "three-priority",
            "three-static",
            "three-udp"
        ]
    );
}

/// docs/design.md §9: the environment overrides the file, which overrides the defaults.
#[test]
fn environment_overrides_a_file_value() {
    let vars = env(&[
        ("CONCLAVE__NODE__ID", "gw-b"),
        ("CONCLAVE__ELECTION__RAFT__HEARTBEAT_MS", "200"),
        ("CONCLAVE__ELECTION__RAFT__PRE_VOTE", "False"),
        // Not ours: the hook variables and everything else are ignored.
        ("CONCLAVE_NODE_ID", "ignored"),
        ("PATH", "/usr/bin"),
    ]);
    let settings = Settings::load_with_env(Some(&example("a")), vars).unwrap();
    assert!(
        settings.read_problems().is_empty(),
        "{:#?}",
        settings.read_problems()
    );
    assert_eq!(settings.node.id, "gw-b");
    assert_eq!(settings.election.raft.heartbeat_ms, 200);
    assert!(!settings.election.raft.pre_vote);
    // From the file, untouched by the environment.
    assert_eq!(settings.cluster.id, "three-udp");
    // From the defaults, untouched by both.
    assert_eq!(settings.hooks.timeout_ms, 5000);
    let config = settings.validate().unwrap();
    assert_eq!(config.node_id, PeerId::from_static("gw-b"));
    assert_eq!(
        raft_of!(config).heartbeat_interval,
        Duration::from_millis(200)
    );
}

/// Lists from the environment: comma-separated, empty for "", or a TOML array.
#[test]
fn environment_lists_are_comma_separated_or_toml_arrays() {
    let vars = env(&[
        ("CONCLAVE__CLUSTER__VOTERS", " gw-a, gw-b,gw-c ,"),
        ("CONCLAVE__LINK__UDP__LISTEN", "127.0.0.1:7946"),
        (
            "CONCLAVE__LINK__UDP__PEERS",
            "127.0.0.1:7947,127.0.0.1:7948",
        ),
        (
            "CONCLAVE__HOOKS__ON_LEADER",
            r#"[["logger", "-t", "conclave"], "echo up"]"#,
        ),
        ("CONCLAVE__HOOKS__ON_FOLLOWER", "echo follower, echo again"),
    ]);
    let settings = Settings::load_with_env(None, vars).unwrap();
    assert!(
        settings.read_problems().is_empty(),
        "{:#?}",
        settings.read_problems()
    );
    assert_eq!(settings.cluster.voters, ["gw-a", "gw-b", "gw-c"]);
    let udp = settings.link.udp.as_ref().unwrap();
    assert_eq!(udp.peers, ["127.0.0.1:7947", "127.0.0.1:7948"]);
    let config = settings.validate().unwrap();
    assert_eq!(
        config.hooks.on_leader,
        vec![
            HookCommand::Argv(vec!["logger".into(), "-t".into(), "conclave".into()]),
            HookCommand::Shell("echo up".into()),
        ]
    );
    assert_eq!(
        config.hooks.on_follower,
        vec![
            HookCommand::Shell("echo follower".into()),
            HookCommand::Shell("echo again".into()),
        ]
    );

    let file = file_with(b"[cluster]\nvoters = [\"gw-a\", \"gw-b\"]\n");
    let cleared =
        Settings::load_with_env(Some(file.path()), env(&[("CONCLAVE__CLUSTER__VOTERS", "")]))
            .unwrap();
    assert!(cleared.cluster.voters.is_empty());
}

/// A variable that cannot be read as its key's type is a problem naming the key and the
/// variable; the layer below supplies the value.
#[test]
fn environment_value_of_the_wrong_type_names_the_variable() {
    let vars = env(&[
        ("CONCLAVE__ELECTION__RAFT__HEARTBEAT_MS", "fast"),
        ("CONCLAVE__ELECTION__AUTO", "yes"),
        ("CONCLAVE__HOOKS__ON_LEADER", "[1, 2"),
    ]);
    let settings = Settings::load_with_env(None, vars).unwrap();
    assert_eq!(settings.election.raft.heartbeat_ms, 250);
    let problems = settings.validate().unwrap_err();
    assert_keys(
        &problems,
        &[
            "election.auto",
            "election.raft.heartbeat_ms",
            "hooks.on_leader",
        ],
    );
    assert_problem(
        &problems,
        "election.raft.heartbeat_ms",
        "expected a whole number, found \"fast\" (set by CONCLAVE__ELECTION__RAFT__HEARTBEAT_MS)",
    );
    assert_problem(&problems, "election.auto", "expected true or false");
    assert_problem(&problems, "hooks.on_leader", "not a valid TOML array");
}

/// An environment variable for a key that does not exist is reported, not ignored.
#[test]
fn environment_unknown_key_is_reported() {
    let vars = env(&[
        ("CONCLAVE__NODE__IDD", "gw-b"),
        ("CONCLAVE__LINK", "udp"),
        ("CONCLAVE__LINK__UDP", "127.0.0.1:7946"),
    ]);
    let problems = Settings::load_with_env(None, vars)
        .unwrap()
        .validate()
        .unwrap_err();
    assert_keys(&problems, &["link", "link.udp", "node.idd"]);
    assert_problem(&problems, "node.idd", "unknown key; did you mean node.id?");
    assert_problem(&problems, "node.idd", "set by CONCLAVE__NODE__IDD");
    assert_problem(&problems, "link.udp", "e.g. CONCLAVE__LINK__UDP__LISTEN");
    assert_problem(
        &problems,
        "link",
        "is a section, not a value (set by CONCLAVE__LINK)",
    );
}

/// A missing configuration file is an error that names it.
#[test]
fn missing_file_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.toml");
    let error = Settings::load_with_env(Some(&path), no_env()).unwrap_err();
    assert!(matches!(error, SettingsError::ReadFile { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.starts_with("cannot read config file"), "{message}");
}

/// A file that is not TOML is an error that names it and says where.
#[test]
fn unparsable_file_is_an_error_naming_the_file() {
    let file = file_with(b"[node]\nid = \"gw-a\n");
    let error = Settings::load_with_env(Some(file.path()), no_env()).unwrap_err();
    assert!(
        matches!(error, SettingsError::ParseFile { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&file.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("line 2"), "{message}");
}

/// Acceptance check: a configuration with three mistakes is refused with all three, each
/// with its key, whatever kind of mistake they are (a typo, an invalid value, a broken
/// relation between two keys).
#[test]
fn three_mistakes_are_reported_together_with_their_keys() {
    let problems = refused(
        r#"
        [node]
        id = "gw a"

        [election.raft]
        hearbeat_ms = 200
        election_timeout_max_ms = 1000
        "#,
    );
    assert_keys(
        &problems,
        &[
            "election.raft.hearbeat_ms",
            "node.id",
            "election.raft.election_timeout_max_ms",
        ],
    );
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "election.raft.hearbeat_ms: unknown key; did you mean election.raft.heartbeat_ms?",
            "node.id: \"gw a\": peer id has byte 0x20 at position 2; only A-Z a-z 0-9 . _ - \
             are allowed",
            "election.raft.election_timeout_max_ms: must not be less than the minimum \
             election timeout (1000ms < 1500ms)",
        ]
    );

    // Three rule violations of the values alone.
    let problems = problems_of_three_rules();
    assert_keys(
        &problems,
        &[
            "election.mode",
            "election.raft.heartbeat_ms",
            "admin.token_file",
        ],
    );
}

fn problems_of_three_rules() -> Vec<ConfigProblem> {
    refused(
        r#"
        [election]
        mode = "paxos"
        [election.raft]
        heartbeat_ms = 2000
        [admin]
        listen = "0.0.0.0:7070"
        "#,
    )
}

/// Typos are the commonest mistake: an unknown key is a problem naming it, with the key that
/// was probably meant or what the section accepts.
#[test]
fn unknown_keys_are_reported_with_their_names() {
    let problems = refused(
        r#"
        colour = "blue"
        [clusters]
        id = "x"
        [node]
        name = "gw-a"
        [election]
        quorum = "voters"
        [hooks]
        timeout = 100
        [link.tcp]
        listen = "127.0.0.1:1"
        "#,
    );
    assert_keys(
        &problems,
        &[
            "clusters",
            "colour",
            "election.quorum",
            "hooks.timeout",
            "link.tcp",
            "node.name",
        ],
    );
    assert_problem(&problems, "clusters", "did you mean cluster?");
    assert_problem(
        &problems,
        "colour",
        "the sections are node, cluster, election",
    );
    assert_problem(
        &problems,
        "election.quorum",
        "did you mean election.raft.quorum?",
    );
    assert_problem(&problems, "hooks.timeout", "did you mean hooks.timeout_ms?");
    assert_problem(&problems, "link.tcp", "[link] accepts udp, espnow");
    assert_problem(&problems, "node.name", "[node] accepts id, data_dir");
}

/// An unknown top-level key lists every section, in the order `check-config` has always
/// shown them (the table is read off the struct, so the struct's field order is that order).
#[test]
fn unknown_top_level_key_lists_every_section_in_order() {
    let problems = refused("colour = \"blue\"\n");
    assert_eq!(
        problems.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "colour: unknown key; the sections are node, cluster, election, membership, link, \
          admin, metrics, hooks, health, log"
        ]
    );
}

/// A value of the wrong type is a problem with its key (and item index); the default applies
/// meanwhile, so other keys are still checked and nothing is reported twice.
#[test]
fn wrong_types_are_reported_with_their_keys() {
    let problems = refused(
        r#"
        [cluster]
        voters = ["gw-a", 3]
        tag_bytes = -1
        [election]
        auto = "true"
        [election.raft]
        heartbeat_ms = "500"
        pre_vote = 1
        election_timeout_min_ms = 400
        [link.udp]
        listen = 7946
        peers = "127.0.0.1:7947"
        [hooks]
        on_leader = [5, ["logger", false]]
        [metrics]
        listen = []
        "#,
    );
    assert_keys(
        &problems,
        &[
            "cluster.tag_bytes",
            "cluster.voters[1]",
            "election.auto",
            "election.raft.heartbeat_ms",
            "election.raft.pre_vote",
            "hooks.on_leader[0]",
            "hooks.on_leader[1][1]",
            "link.udp.listen",
            "link.udp.peers",
            "metrics.listen",
        ],
    );
    assert_problem(
        &problems,
        "cluster.tag_bytes",
        "must not be negative, found -1",
    );
    assert_problem(
        &problems,
        "cluster.voters[1]",
        "expected a string, found integer 3",
    );
    assert_problem(&problems, "election.auto", "write it without quotes");
    assert_problem(
        &problems,
        "election.raft.heartbeat_ms",
        "write it without quotes",
    );
    assert_problem(
        &problems,
        "election.raft.pre_vote",
        "expected true or false",
    );
    assert_problem(
        &problems,
        "hooks.on_leader[0]",
        "a command string or an array",
    );
    assert_problem(&problems, "hooks.on_leader[1][1]", "found boolean false");
    assert_problem(&problems, "link.udp.listen", "put it in quotes");
    assert_problem(&problems, "link.udp.peers", "write [\"127.0.0.1:7947\"]");
    assert_problem(
        &problems,
        "metrics.listen",
        "expected a string, found an array",
    );
}

/// PROTO-1: node, cluster and voter ids follow the id rules, and the message states them.
#[test]
fn invalid_ids_are_refused_with_the_id_rules() {
    let long = "x".repeat(33);
    let problems = refused(&format!(
        r#"
        [node]
        id = "gw/a"
        [cluster]
        id = ""
        voters = ["gw-a", "{long}"]
        "#
    ));
    assert_keys(&problems, &["node.id", "cluster.id", "cluster.voters[1]"]);
    for problem in &problems {
        assert!(
            problem.message.contains("A-Z a-z 0-9 . _ -"),
            "the rules are missing from {problem}"
        );
    }
    assert_problem(&problems, "node.id", "\"gw/a\"");
    assert_problem(&problems, "cluster.id", "cluster id is empty");
    assert_problem(&problems, "cluster.voters[1]", "33 bytes long, at most 32");
}

/// The WAL needs a directory.
#[test]
fn data_dir_must_not_be_empty() {
    let problems = refused("[node]\ndata_dir = \"\"\n");
    assert_keys(&problems, &["node.data_dir"]);
    assert_problem(&problems, "node.data_dir", "must not be empty");
}

/// A voter listed twice is a problem at its second place.
#[test]
fn duplicate_voters_are_refused() {
    let problems = refused(
        r#"
        [node]
        id = "gw-a"
        [cluster]
        voters = ["gw-a", "gw-b", "gw-a"]
        "#,
    );
    assert_keys(&problems, &["cluster.voters[2]"]);
    assert_problem(
        &problems,
        "cluster.voters[2]",
        "\"gw-a\" is listed twice (also cluster.voters[0])",
    );
}

/// docs/design.md §4: the four modes are accepted; anything else is refused naming them.
#[test]
fn unknown_election_mode_is_refused_naming_the_modes() {
    for mode in ["raft", "gossip", "priority"] {
        let config = node_config(&format!("[election]\nmode = \"{mode}\"\n"));
        assert_eq!(config.election.mode().label(), mode);
    }
    let problems = refused("[election]\nmode = \"paxos\"\n");
    assert_keys(&problems, &["election.mode"]);
    assert_problem(
        &problems,
        "election.mode",
        "unknown mode \"paxos\"; expected \"raft\", \"gossip\", \"priority\" or \"static\"",
    );
}

/// GOS-1..5: gossip mode with no key of its own set runs Fabric's defaults, exactly
/// `GossipConfig::new`, with `election.auto` as its automatic-election switch; and nothing
/// but the node's own lack of a key is worth a warning.
#[test]
fn gossip_mode_defaults_are_fabrics() {
    let (config, warnings) = settings("[election]\nmode = \"gossip\"\n")
        .validate_with_warnings()
        .unwrap();
    assert_eq!(
        config.election,
        ModeConfig::Gossip(GossipConfig::new(PeerId::from_static("node-1")))
    );
    assert_keys(&[], &[]);
    assert!(
        warnings.iter().all(|w| w.key == "cluster.psk_file"),
        "{warnings:#?}"
    );
    let off = node_config("[election]\nmode = \"gossip\"\nauto = false\n");
    let ModeConfig::Gossip(core) = off.election else {
        panic!("gossip expected");
    };
    assert!(!core.auto_election);
}

/// GOS-1..5: every key of `[election.gossip]` reaches the core, from the file and from the
/// environment alike.
#[test]
fn gossip_mode_keys_reach_the_core() {
    let config = node_config(
        "[node]\nid = \"gw-b\"\n[election]\nmode = \"gossip\"\n[election.gossip]\n\
         startup_grace_period_ms = 3000\nmembership_sample_interval_ms = 200\n\
         leader_alive_threshold_ms = 2000\nleader_election_duration_ms = 1000\n",
    );
    let ModeConfig::Gossip(core) = config.election else {
        panic!("gossip expected");
    };
    assert_eq!(
        core,
        GossipConfig::new(PeerId::from_static("gw-b")).with_timings(
            Duration::from_millis(3000),
            Duration::from_millis(200),
            Duration::from_millis(2000),
            Duration::from_millis(1000),
        )
    );
    let vars = env(&[
        ("CONCLAVE__ELECTION__MODE", "gossip"),
        ("CONCLAVE__ELECTION__GOSSIP__USE_LEADER_ELECTION", "false"),
        ("CONCLAVE__ELECTION__GOSSIP__ORG_LEADER", "true"),
    ]);
    let config = Settings::load_with_env(None, vars)
        .unwrap()
        .validate()
        .unwrap();
    assert_eq!(
        config.election,
        ModeConfig::Gossip(GossipConfig::static_leadership(
            PeerId::from_static("node-1"),
            true
        ))
    );
}

/// GOS-1..5: bad gossip values are refused under their keys, the core's own rules included
/// (a dynamic election and a static org leader at once; an alive threshold whose half, the
/// declaration interval, would be zero).
#[test]
fn gossip_mode_bad_values_are_named() {
    let problems = refused(
        "[election]\nmode = \"gossip\"\n[election.gossip]\nstartup_grace_period_ms = 0\n\
         membership_sample_interval_ms = 0\nleader_election_duration_ms = 90000000\n",
    );
    assert_keys(
        &problems,
        &[
            "election.gossip.startup_grace_period_ms",
            "election.gossip.membership_sample_interval_ms",
            "election.gossip.leader_election_duration_ms",
        ],
    );
    let problems = refused(
        "[election]\nmode = \"gossip\"\n[election.gossip]\norg_leader = true\n\
         leader_alive_threshold_ms = 1\n",
    );
    assert_keys(
        &problems,
        &[
            "election.gossip.leader_alive_threshold_ms",
            "election.gossip.org_leader",
        ],
    );
    assert_problem(
        &problems,
        "election.gossip.leader_alive_threshold_ms",
        "must be at least 2ms",
    );
    assert_problem(
        &problems,
        "election.gossip.org_leader",
        "set use_leader_election = false",
    );
    let warnings = warnings(
        "[election]\nmode = \"gossip\"\n[election.gossip]\nstartup_grace_period_ms = 1000\n",
    );
    assert_warning(
        &warnings,
        "election.gossip.membership_sample_interval_ms",
        "always waits out the grace period",
    );
}

/// PRI-2..6: priority mode with no key of its own set runs seed 002's constants, exactly
/// `PriorityConfig::new`.
#[test]
fn priority_mode_defaults_are_the_seeds() {
    let config = node_config("[election]\nmode = \"priority\"\n");
    assert_eq!(
        config.election,
        ModeConfig::Priority(PriorityConfig::new(PeerId::from_static("node-1")))
    );
}

/// PRI-1..6: every key of `[election.priority]` reaches the core, and the battery assumed
/// before the first reading is `health.battery_percent`.
#[test]
fn priority_mode_keys_reach_the_core() {
    let config = node_config(
        "[election]\nmode = \"priority\"\nauto = false\n[election.priority]\n\
         discovery_timeout_ms = 100\ncampaign_timeout_ms = 40\nvote_timeout_ms = 60\n\
         jitter_max_ms = 0\nmax_retries = 5\nannounce_interval_ms = 250\n\
         master_timeout_ms = 750\nlow_battery_percent = 20\nforce_master = true\n\
         [health]\nbattery_percent = 80\n",
    );
    let expected = PriorityConfig {
        discovery_timeout: Duration::from_millis(100),
        campaign_timeout: Duration::from_millis(40),
        vote_timeout: Duration::from_millis(60),
        jitter_max: Duration::ZERO,
        max_retries: 5,
        announce_interval: Duration::from_millis(250),
        master_timeout: Duration::from_millis(750),
        battery_percent: 80,
        low_battery_percent: 20,
        force_master: true,
        auto_election: false,
        ..PriorityConfig::new(PeerId::from_static("node-1"))
    };
    assert_eq!(config.election, ModeConfig::Priority(expected));
}

/// PRI-2, PRI-3, PRI-5: bad priority values are refused under their keys, the core's rule
/// that a master announces more often than followers give it up included.
#[test]
fn priority_mode_bad_values_are_named() {
    let problems = refused(
        "[election]\nmode = \"priority\"\n[election.priority]\ndiscovery_timeout_ms = 0\n\
         max_retries = 256\nlow_battery_percent = 100\n",
    );
    assert_keys(
        &problems,
        &[
            "election.priority.discovery_timeout_ms",
            "election.priority.max_retries",
            "election.priority.low_battery_percent",
        ],
    );
    assert_problem(
        &problems,
        "election.priority.max_retries",
        "must be between 0 and 255, found 256",
    );
    let problems = refused(
        "[election]\nmode = \"priority\"\n[election.priority]\nannounce_interval_ms = 3000\n",
    );
    assert_keys(&problems, &["election.priority.announce_interval_ms"]);
    assert_problem(
        &problems,
        "election.priority.announce_interval_ms",
        "must be less than the master timeout (3000ms >= 3000ms)",
    );
}

/// RAFT-10: `priority`, `preempt_delay_ms` and `nopreempt` reach raft's core; without them,
/// raft's defaults (no priority, 5 s, preemption allowed).
#[test]
fn raft10_keys_reach_the_core() {
    let defaults = node_config("");
    let ModeConfig::Raft(core) = defaults.election else {
        panic!("raft expected");
    };
    assert_eq!(core.priority, None);
    assert_eq!(core.preempt_delay, Duration::from_secs(5));
    assert!(!core.nopreempt);
    let config =
        node_config("[election.raft]\npriority = 200\npreempt_delay_ms = 1500\nnopreempt = true\n");
    let ModeConfig::Raft(core) = config.election else {
        panic!("raft expected");
    };
    assert_eq!(core.priority, Some(200));
    assert_eq!(core.preempt_delay, Duration::from_millis(1500));
    assert!(core.nopreempt);
    let problems = refused("[election.raft]\npriority = 256\npreempt_delay_ms = 0\n");
    assert_keys(
        &problems,
        &["election.raft.preempt_delay_ms", "election.raft.priority"],
    );
    assert_problem(
        &problems,
        "election.raft.priority",
        "must be between 0 and 255, found 256",
    );
}

/// Issue 9, item 8: a key of another mode's section, set in the file, is refused naming the
/// key, its mode and the configured one; in every pairing of modes.
#[test]
fn a_key_of_another_mode_is_refused_naming_it() {
    let keys = [
        (
            "raft",
            "[election.raft]\nheartbeat_ms = 100\n",
            "election.raft.heartbeat_ms",
        ),
        (
            "gossip",
            "[election.gossip]\nstartup_grace_period_ms = 1000\n",
            "election.gossip.startup_grace_period_ms",
        ),
        (
            "priority",
            "[election.priority]\nforce_master = true\n",
            "election.priority.force_master",
        ),
        (
            "static",
            "[election.static]\nleader = \"node-1\"\n",
            "election.static.leader",
        ),
    ];
    for (mode, _, _) in keys {
        // Each mode's own key alongside the mode is accepted...
        let (_, own, _) = keys.iter().find(|(owner, _, _)| *owner == mode).unwrap();
        node_config(&format!("[election]\nmode = \"{mode}\"\n{own}"));
        // ... and every other mode's is refused, alone among the problems.
        for (owner, section, key) in keys.iter().filter(|(owner, _, _)| *owner != mode) {
            let own_needed = if mode == "static" { *own } else { "" };
            let problems = refused(&format!(
                "[election]\nmode = \"{mode}\"\n{own_needed}{section}"
            ));
            assert_keys(&problems, &[key]);
            assert_eq!(
                problems[0].to_string(),
                format!("{key}: is a setting of {owner} mode; election.mode is \"{mode}\"")
            );
        }
    }
}

/// Issue 9, item 8: a key of another mode set by the environment counts as the operator's
/// too, while the built-in defaults (which set every mode's keys) never do.
#[test]
fn a_key_of_another_mode_from_the_environment_is_refused() {
    let vars = env(&[
        ("CONCLAVE__ELECTION__MODE", "priority"),
        ("CONCLAVE__ELECTION__RAFT__NOPREEMPT", "true"),
    ]);
    let problems = Settings::load_with_env(None, vars)
        .unwrap()
        .validate()
        .unwrap_err();
    assert_keys(&problems, &["election.raft.nopreempt"]);
    assert_problem(
        &problems,
        "election.raft.nopreempt",
        "is a setting of raft mode; election.mode is \"priority\"",
    );
    for mode in ["gossip", "priority"] {
        let vars = env(&[("CONCLAVE__ELECTION__MODE", mode)]);
        Settings::load_with_env(None, vars)
            .unwrap()
            .validate()
            .unwrap_or_else(|problems| panic!("{mode}: {problems:#?}"));
    }
}

/// PRI-1, RAFT-10: the health source defaults to a fixed 100 %; a file or a command (a string
/// or an argv array, from the file or the environment) is accepted with its timings.
#[test]
fn health_sources_are_read() {
    let config = node_config("");
    assert_eq!(config.health, HealthConfig::default());
    assert_eq!(config.health.source, HealthSource::Fixed);
    assert_eq!(config.health.battery_percent, 100);
    let config = node_config(
        "[health]\nsource = \"file\"\nfile = \"/run/battery\"\ninterval_ms = 1000\n\
         timeout_ms = 500\nbattery_percent = 50\n",
    );
    assert_eq!(
        config.health,
        HealthConfig {
            source: HealthSource::File(PathBuf::from("/run/battery")),
            battery_percent: 50,
            interval: Duration::from_secs(1),
            timeout: Duration::from_millis(500),
        }
    );
    let config = node_config("[health]\nsource = \"command\"\ncommand = [\"battery\", \"-p\"]\n");
    assert_eq!(
        config.health.source,
        HealthSource::Command(HookCommand::Argv(vec!["battery".into(), "-p".into()]))
    );
    let vars = env(&[
        ("CONCLAVE__HEALTH__SOURCE", "command"),
        ("CONCLAVE__HEALTH__COMMAND", "cat /run/battery"),
    ]);
    let config = Settings::load_with_env(None, vars)
        .unwrap()
        .validate()
        .unwrap();
    assert_eq!(
        config.health.source,
        HealthSource::Command(HookCommand::Shell("cat /run/battery".into()))
    );
    let vars = env(&[
        ("CONCLAVE__HEALTH__SOURCE", "command"),
        ("CONCLAVE__HEALTH__COMMAND", r#"["battery", "-p"]"#),
    ]);
    let config = Settings::load_with_env(None, vars)
        .unwrap()
        .validate()
        .unwrap();
    assert_eq!(
        config.health.source,
        HealthSource::Command(HookCommand::Argv(vec!["battery".into(), "-p".into()]))
    );
}

/// A health file or command that the source does not read, and RAFT-10's preemption keys
/// without a priority, are warned about: valid, but probably not what was meant.
#[test]
fn settings_without_effect_warn() {
    let found = warnings("[health]\nfile = \"/run/battery\"\n");
    assert_warning(&found, "health.file", "ignored: health.source is \"fixed\"");
    let found = warnings("[health]\nsource = \"file\"\nfile = \"/b\"\ncommand = \"cat /b\"\n");
    assert_warning(
        &found,
        "health.command",
        "ignored: health.source is \"file\"",
    );
    assert!(found.iter().all(|w| w.key != "health.file"), "{found:#?}");
    let found = warnings("[election.raft]\nnopreempt = true\npreempt_delay_ms = 100\n");
    assert_warning(&found, "election.raft.nopreempt", "no effect without");
    assert_warning(
        &found,
        "election.raft.preempt_delay_ms",
        "no effect without",
    );
    let found = warnings("[election.raft]\npriority = 5\nnopreempt = true\n");
    assert!(
        found.iter().all(|w| !w.key.starts_with("election.raft")),
        "{found:#?}"
    );
}

/// PRI-1, RAFT-10: bad health settings are refused under their keys.
#[test]
fn health_bad_values_are_named() {
    let problems = refused("[health]\nsource = \"battery\"\nbattery_percent = 101\n");
    assert_keys(&problems, &["health.battery_percent", "health.source"]);
    assert_problem(&problems, "health.source", "unknown source \"battery\"");
    let problems = refused("[health]\nsource = \"file\"\n");
    assert_keys(&problems, &["health.file"]);
    let problems = refused("[health]\nsource = \"command\"\n");
    assert_keys(&problems, &["health.command[0]"]);
    let problems = refused("[health]\ninterval_ms = 1000\ntimeout_ms = 2000\n");
    assert_keys(&problems, &["health.timeout_ms"]);
    let problems = refused("[health]\ncommand = [\"a\", 1]\n");
    assert_keys(&problems, &["health.command[1]"]);
    let problems = refused("[health]\ncommand = 5\n");
    assert_problem(
        &problems,
        "health.command",
        "expected a command string or an array",
    );
}

/// STA-1: static mode validates into a static election led by `election.static.leader`,
/// whose possible leaders are `cluster.voters` as listed.
#[test]
fn sta1_static_mode_names_its_leader() {
    let config = settings(
        "[node]\nid = \"gw-b\"\n[cluster]\nvoters = [\"gw-a\", \"gw-b\"]\n\
         [election]\nmode = \"static\"\n[election.static]\nleader = \"gw-a\"\n",
    )
    .validate()
    .unwrap();
    assert_eq!(
        config.election,
        ModeConfig::Static(StaticConfig {
            id: PeerId::from_static("gw-b"),
            leader: PeerId::from_static("gw-a"),
            members: [PeerId::from_static("gw-a"), PeerId::from_static("gw-b")]
                .into_iter()
                .collect(),
        })
    );
    assert_eq!(config.election.mode(), Mode::Static);
    assert_eq!(
        config.voters,
        vec![PeerId::from_static("gw-a"), PeerId::from_static("gw-b")]
    );
    // Without a voter list, any node may be named; the list stays empty.
    for node in ["a", "b", "c"] {
        let path = repo_root().join(format!("config/examples/three-static/node-{node}.toml"));
        let (config, warnings) = Settings::load_with_env(Some(&path), no_env())
            .unwrap()
            .validate_with_warnings()
            .unwrap_or_else(|problems| panic!("{}: {problems:#?}", path.display()));
        assert!(
            warnings
                .iter()
                .all(|warning| warning.key == "cluster.psk_file"),
            "{}: {warnings:#?}",
            path.display()
        );
        let ModeConfig::Static(core) = &config.election else {
            panic!("{}: static mode expected", path.display());
        };
        assert_eq!(core.leader, PeerId::from_static("gw-a"));
        let node_id = PeerId::new(&format!("gw-{node}")).expect("gw-{node} is a valid peer id");
        assert_eq!(core.id, node_id);
        assert_eq!(core.members, config.voters.iter().copied().collect());
        assert_eq!(config.node_id, node_id);
    }
    let alone = settings("[election]\nmode = \"static\"\n[election.static]\nleader = \"gw-z\"\n")
        .validate()
        .unwrap();
    assert!(alone.voters.is_empty());
}

/// STA-1: static mode without a leader, with an invalid one, or with one outside
/// `cluster.voters` is refused naming `election.static.leader`.
#[test]
fn sta1_static_leader_is_checked() {
    let problems = refused("[election]\nmode = \"static\"\n");
    assert_keys(&problems, &["election.static.leader"]);
    assert_problem(
        &problems,
        "election.static.leader",
        "needs the node that leads",
    );
    let problems = refused("[election]\nmode = \"static\"\n[election.static]\nleader = \"a b\"\n");
    assert_keys(&problems, &["election.static.leader"]);
    let problems = refused(
        "[cluster]\nvoters = [\"gw-a\"]\n[election]\nmode = \"static\"\n\
         [election.static]\nleader = \"gw-x\"\n",
    );
    assert_problem(
        &problems,
        "election.static.leader",
        "gw-x is not one of the members, the nodes that may lead (gw-a)",
    );
}

/// RAFT-6: the quorum is `voters` or `connected`.
#[test]
fn quorum_must_be_voters_or_connected() {
    let problems = refused("[election.raft]\nquorum = \"majority\"\n");
    assert_keys(&problems, &["election.raft.quorum"]);
    assert_problem(
        &problems,
        "election.raft.quorum",
        "expected \"voters\" or \"connected\"",
    );
    let config = node_config("[election.raft]\nquorum = \"connected\"\n");
    assert_eq!(raft_of!(config).quorum.label(), "connected");
}

/// RAFT-2/RAFT-4: followers must hear heartbeats well within their election timeout.
#[test]
fn heartbeat_must_be_less_than_the_minimum_election_timeout() {
    let problems = refused(
        r#"
        [election.raft]
        heartbeat_ms = 500
        election_timeout_min_ms = 400
        election_timeout_max_ms = 800
        "#,
    );
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "election.raft.heartbeat_ms: must be less than the minimum election timeout (500ms \
             >= 400ms)"
        ]
    );
}

/// RAFT-2/RAFT-4, issue 9 item 7: raft's timing rule is `RaftConfig::validate`'s alone: its
/// problem is reported once, under the key of the setting it concerns, with the values as the
/// operator wrote them (1500, not raft's `Duration` of 1.5 s); and it is still found when
/// `node.id` is refused in the same file.
#[test]
fn raft_timing_problem_is_reported_once_under_its_key_in_milliseconds() {
    let problems = refused("[election.raft]\nheartbeat_ms = 1500\n");
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "election.raft.heartbeat_ms: must be less than the minimum election timeout \
             (1500ms >= 1500ms)"
        ]
    );
    let problems = refused(
        "[node]\nid = \"gw a\"\n[election.raft]\nheartbeat_ms = 2000\n\
         election_timeout_max_ms = 1000\n",
    );
    assert_keys(
        &problems,
        &[
            "node.id",
            "election.raft.heartbeat_ms",
            "election.raft.election_timeout_max_ms",
        ],
    );
    assert_problem(
        &problems,
        "election.raft.heartbeat_ms",
        "(2000ms >= 1500ms)",
    );
}

/// RAFT-2: the election timeout is drawn from [min, max); max below min is refused, max equal
/// to min is allowed with a warning.
#[test]
fn maximum_election_timeout_must_not_be_below_the_minimum() {
    let problems = refused("[election.raft]\nelection_timeout_max_ms = 1499\n");
    assert_keys(&problems, &["election.raft.election_timeout_max_ms"]);
    assert_problem(
        &problems,
        "election.raft.election_timeout_max_ms",
        "must not be less than the minimum election timeout (1499ms < 1500ms)",
    );
    let warnings = warnings("[election.raft]\nelection_timeout_max_ms = 1500\n");
    assert_warning(
        &warnings,
        "election.raft.election_timeout_max_ms",
        "not randomized",
    );
}

/// RAFT-2, RAFT-7: `adaptive_timeout` and `suspicion_floor_ms` reach raft's core (on, and the
/// floor derived from the heartbeat, by default); a floor set below two heartbeats or above
/// the maximum election timeout is refused under the floor's key, and a floor set with
/// adaptive detection off is warned about.
#[test]
fn adaptive_detection_keys_reach_the_core_and_the_floor_is_bounded() {
    let ModeConfig::Raft(core) = node_config("").election else {
        panic!("raft expected");
    };
    assert!(core.adaptive_timeout);
    assert_eq!(core.suspicion_floor, None);
    assert_eq!(core.suspicion_floor(), Duration::from_millis(625));
    let config = node_config(
        "[election.raft]\nheartbeat_ms = 50\nelection_timeout_min_ms = 250\nelection_timeout_max_ms = 500\n",
    );
    let ModeConfig::Raft(core) = config.election else {
        panic!("raft expected");
    };
    assert_eq!(core.suspicion_floor(), Duration::from_millis(125));
    let config = node_config("[election.raft]\nsuspicion_floor_ms = 1000\n");
    let ModeConfig::Raft(core) = config.election else {
        panic!("raft expected");
    };
    assert!(core.adaptive_timeout);
    assert_eq!(core.suspicion_floor(), Duration::from_millis(1000));
    let config = node_config("[election.raft]\nadaptive_timeout = false\n");
    let ModeConfig::Raft(core) = config.election else {
        panic!("raft expected");
    };
    assert!(!core.adaptive_timeout);
    let problems = refused("[election.raft]\nsuspicion_floor_ms = 499\n");
    assert_keys(&problems, &["election.raft.suspicion_floor_ms"]);
    assert_problem(
        &problems,
        "election.raft.suspicion_floor_ms",
        "must be at least two heartbeat intervals, so that one lost heartbeat is not taken for \
         a dead leader (499ms < 500ms)",
    );
    let problems = refused("[election.raft]\nsuspicion_floor_ms = 3001\n");
    assert_problem(
        &problems,
        "election.raft.suspicion_floor_ms",
        "must not be more than the maximum election timeout (3001ms > 3000ms)",
    );
    let problems = refused("[election.raft]\nsuspicion_floor_ms = 0\n");
    assert_problem(
        &problems,
        "election.raft.suspicion_floor_ms",
        "must be greater than 0",
    );
    let found = warnings("[election.raft]\nadaptive_timeout = false\nsuspicion_floor_ms = 1000\n");
    assert_warning(
        &found,
        "election.raft.suspicion_floor_ms",
        "no effect without election.raft.adaptive_timeout",
    );
}

/// Durations of zero, or beyond a day, are refused, each with its key; a zero does not also
/// break the relation with the heartbeat.
#[test]
fn zero_and_huge_durations_are_refused() {
    let problems = refused(
        r#"
        [election.raft]
        heartbeat_ms = 0
        election_timeout_min_ms = 0
        election_timeout_max_ms = 0
        [membership]
        heartbeat_ms = 0
        hello_interval_ms = 0
        announce_interval_ms = 86400001
        [hooks]
        timeout_ms = 0
        "#,
    );
    assert_keys(
        &problems,
        &[
            "election.raft.heartbeat_ms",
            "election.raft.election_timeout_min_ms",
            "election.raft.election_timeout_max_ms",
            "membership.heartbeat_ms",
            "membership.hello_interval_ms",
            "membership.announce_interval_ms",
            "hooks.timeout_ms",
        ],
    );
    assert_problem(&problems, "hooks.timeout_ms", "must be greater than 0");
    assert_problem(
        &problems,
        "membership.announce_interval_ms",
        "must be at most 86400000 (one day), found 86400001",
    );
}

/// MEM-4: a peer is declared disconnected after at least two missed heartbeats.
#[test]
fn timeout_multiplier_must_be_at_least_two() {
    let problems = refused("[membership]\ntimeout_multiplier = 1\n");
    assert_keys(&problems, &["membership.timeout_multiplier"]);
    assert_problem(
        &problems,
        "membership.timeout_multiplier",
        "must be at least 2, found 1",
    );
    let problems = refused("[membership]\ntimeout_multiplier = 4294967296\n");
    assert_problem(
        &problems,
        "membership.timeout_multiplier",
        "must be at most",
    );
    let config = node_config("[membership]\ntimeout_multiplier = 2\n");
    assert_eq!(config.membership.timeout_multiplier, 2);
}

/// Every address is an ip:port; each bad one is reported with its key and list index.
#[test]
fn socket_addresses_must_parse() {
    let problems = refused(
        r#"
        [link.udp]
        listen = "localhost:7946"
        peers = ["127.0.0.1:7947", "nope", "[::1]:7948"]
        [admin]
        listen = "127.0.0.1"
        [metrics]
        listen = ":9464"
        "#,
    );
    assert_keys(
        &problems,
        &[
            "link.udp.listen",
            "link.udp.peers[1]",
            "admin.listen",
            "metrics.listen",
        ],
    );
    assert_problem(
        &problems,
        "link.udp.listen",
        "\"localhost:7946\" is not a socket address; expected ip:port",
    );
    assert_problem(&problems, "link.udp.peers[1]", "\"nope\"");
}

/// `[link.udp]` without a listen address is refused; with one it is the node's UDP link.
#[test]
fn udp_link_needs_a_listen_address() {
    let problems = refused("[link.udp]\npeers = [\"127.0.0.1:7947\"]\n");
    assert_keys(&problems, &["link.udp.listen"]);
    assert_problem(
        &problems,
        "link.udp.listen",
        "required when [link.udp] is present",
    );

    let config = node_config("[link.udp]\nlisten = \"[::1]:7946\"\n");
    let udp = config.udp.unwrap();
    assert_eq!(udp.listen, addr("[::1]:7946"));
    assert!(udp.peers.is_empty());
}

/// A peer address equal to the node's own listen address is a likely copy-paste slip.
#[test]
fn udp_peer_equal_to_listen_warns() {
    let warnings = warnings(
        "[link.udp]\nlisten = \"127.0.0.1:7946\"\npeers = [\"127.0.0.1:7947\", \"127.0.0.1:7946\"]\n",
    );
    assert_warning(
        &warnings,
        "link.udp.peers[1]",
        "own link.udp.listen address",
    );
}

/// An empty listen address turns the admin API or the metrics endpoint off.
#[test]
fn empty_listen_disables_admin_and_metrics() {
    let config = node_config("[admin]\nlisten = \"\"\n[metrics]\nlisten = \"\"\n");
    assert_eq!(config.admin.listen, None);
    assert_eq!(config.metrics.listen, None);
}

/// CB-3: the admin API refuses a non-loopback address without a token, and accepts it with
/// one.
#[test]
fn admin_beyond_loopback_needs_a_token() {
    let problems = refused("[admin]\nlisten = \"0.0.0.0:7070\"\n");
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "admin.token_file: required (or admin.tokens_file) when admin.listen (0.0.0.0:7070) \
             is not a loopback address"
        ]
    );
    let problems = refused("[admin]\nlisten = \"[::]:7070\"\n");
    assert_keys(&problems, &["admin.token_file"]);
    let problems = refused("[admin]\nlisten = \"192.168.1.10:7070\"\n");
    assert_keys(&problems, &["admin.token_file"]);

    let token = file_with(b"  s3cret-token\n");
    let config = node_config(&format!(
        "[admin]\nlisten = \"0.0.0.0:7070\"\ntoken_file = {}\n",
        toml_path(token.path())
    ));
    assert_eq!(config.admin.listen, Some(addr("0.0.0.0:7070")));
    assert_eq!(
        config.admin.tokens,
        [AdminToken::from_token_file("s3cret-token")]
    );

    // Loopback in either family needs no token.
    for listen in ["127.0.0.1:7070", "[::1]:7070", "127.0.0.2:7070"] {
        let config = node_config(&format!("[admin]\nlisten = \"{listen}\"\n"));
        assert!(config.admin.tokens.is_empty());
    }
}

/// The token file, when named, must be readable and not empty.
#[test]
fn token_file_must_be_readable_and_not_empty() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing-token");
    let problems = refused(&format!(
        "[admin]\nlisten = \"0.0.0.0:7070\"\ntoken_file = {}\n",
        toml_path(&missing)
    ));
    // The unreadable file is the problem; "required" would only repeat it.
    assert_keys(&problems, &["admin.token_file"]);
    assert_problem(&problems, "admin.token_file", "cannot read");
    assert_problem(
        &problems,
        "admin.token_file",
        &missing.display().to_string(),
    );

    let blank = file_with(b" \n\n");
    let problems = refused(&format!(
        "[admin]\ntoken_file = {}\n",
        toml_path(blank.path())
    ));
    assert_keys(&problems, &["admin.token_file"]);
    assert_problem(&problems, "admin.token_file", "is empty");
}

/// A tokens file readable by its owner only, holding `text`.
fn tokens_file(text: &str) -> tempfile::NamedTempFile {
    // NamedTempFile creates the file 0600.
    file_with(text.as_bytes())
}

/// SEC-2: `admin.tokens_file` gives named tokens with roles; with `admin.token_file` too, that
/// token is one more admin token, named `token_file`, first; either one lets the API listen
/// beyond loopback.
#[test]
fn tokens_file_gives_named_tokens_with_roles() {
    let tokens = tokens_file(
        "[[token]]\nname = \"worker-1\"\nrole = \"write\"\nsecret = \"w-secret\"\n\
         queues = [\"thumbs\"]\n\n[[token]]\nname = \"dash\"\nrole = \"read\"\n\
         secret_sha256 = \"5E884898DA28047151D0E56F8DC6292773603D0D6AABBDD62A11EF721D1542D8\"\n",
    );
    let config = node_config(&format!(
        "[admin]\nlisten = \"0.0.0.0:7070\"\ntokens_file = {}\n",
        toml_path(tokens.path())
    ));
    let named: Vec<(&str, TokenRole)> = config
        .admin
        .tokens
        .iter()
        .map(|token| (token.name.as_str(), token.role))
        .collect();
    assert_eq!(
        named,
        [("worker-1", TokenRole::Write), ("dash", TokenRole::Read)]
    );
    assert_eq!(
        config.admin.tokens[1].digest,
        crate::secret_digest(b"password")
    );

    let single = file_with(b"single-secret\n");
    let config = node_config(&format!(
        "[admin]\ntoken_file = {}\ntokens_file = {}\n",
        toml_path(single.path()),
        toml_path(tokens.path())
    ));
    assert_eq!(config.admin.tokens.len(), 3);
    assert_eq!(
        config.admin.tokens[0],
        AdminToken::from_token_file("single-secret")
    );
    assert_eq!(config.admin.tokens[0].role, TokenRole::Admin);
}

/// SEC-2: a broken tokens file is a problem of `admin.tokens_file`, naming the token but never
/// its secret: unknown roles, limits on a role other than write, empty, duplicate secrets and
/// names; a secret shared with `admin.token_file`; a file that is missing.
#[test]
fn broken_tokens_files_are_refused_by_key() {
    let broken = tokens_file(
        "[[token]]\nname = \"a\"\nrole = \"superuser\"\nsecret = \"hidden-a\"\n\n\
         [[token]]\nname = \"b\"\nrole = \"read\"\nsecret = \"hidden-b\"\n\
         key_prefixes = [\"app/\"]\n\n[[token]]\nname = \"c\"\nrole = \"write\"\nsecret = \"\"\n",
    );
    let problems = refused(&format!(
        "[admin]\ntokens_file = {}\n",
        toml_path(broken.path())
    ));
    assert!(
        problems.iter().all(|p| p.key == "admin.tokens_file"),
        "{problems:#?}"
    );
    assert_problem(
        &problems,
        "admin.tokens_file",
        "role \"superuser\" is none of",
    );
    assert_problem(&problems, "admin.tokens_file", "limit a write token only");
    assert_problem(&problems, "admin.tokens_file", "the secret is empty");
    assert!(
        problems.iter().all(|p| !p.message.contains("hidden")),
        "a secret shown: {problems:#?}"
    );

    let twice = tokens_file(
        "[[token]]\nname = \"a\"\nrole = \"read\"\nsecret = \"same-one\"\n\n\
         [[token]]\nname = \"a\"\nrole = \"admin\"\nsecret = \"same-one\"\n",
    );
    let problems = refused(&format!(
        "[admin]\ntokens_file = {}\n",
        toml_path(twice.path())
    ));
    assert_problem(&problems, "admin.tokens_file", "given to two tokens");
    assert_problem(&problems, "admin.tokens_file", "have the same secret");

    let single = file_with(b"same-one\n");
    let one = tokens_file("[[token]]\nname = \"a\"\nrole = \"read\"\nsecret = \"same-one\"\n");
    let problems = refused(&format!(
        "[admin]\ntoken_file = {}\ntokens_file = {}\n",
        toml_path(single.path()),
        toml_path(one.path())
    ));
    assert_keys(&problems, &["admin.tokens_file"]);
    assert_problem(
        &problems,
        "admin.tokens_file",
        "same secret as admin.token_file",
    );

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("tokens.toml");
    let problems = refused(&format!(
        "[admin]\nlisten = \"0.0.0.0:7070\"\ntokens_file = {}\n",
        toml_path(&missing)
    ));
    // The unreadable file is the problem; "required" would only repeat it.
    assert_keys(&problems, &["admin.tokens_file"]);
    assert_problem(&problems, "admin.tokens_file", "cannot read");
}

/// SEC-2: a tokens file every user may read is refused while it holds a secret in clear, and
/// accepted with digests only; a world-readable `admin.token_file` is a warning (it was
/// accepted before tokens files existed).
#[test]
fn tokens_in_clear_must_not_be_world_readable() {
    use std::os::unix::fs::PermissionsExt as _;
    let readable = |file: &tempfile::NamedTempFile| {
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    };
    let clear = tokens_file("[[token]]\nname = \"a\"\nrole = \"read\"\nsecret = \"in-clear\"\n");
    readable(&clear);
    let problems = refused(&format!(
        "[admin]\ntokens_file = {}\n",
        toml_path(clear.path())
    ));
    assert_keys(&problems, &["admin.tokens_file"]);
    assert_problem(&problems, "admin.tokens_file", "chmod 600");

    let hashed = tokens_file(&format!(
        "[[token]]\nname = \"a\"\nrole = \"read\"\nsecret_sha256 = \"{}\"\n",
        "ab".repeat(32)
    ));
    readable(&hashed);
    node_config(&format!(
        "[admin]\ntokens_file = {}\n",
        toml_path(hashed.path())
    ));

    let single = file_with(b"single\n");
    readable(&single);
    let warnings = warnings(&format!(
        "[admin]\ntoken_file = {}\n",
        toml_path(single.path())
    ));
    assert_warning(&warnings, "admin.token_file", "chmod 600");
}

/// Admin and metrics are both TCP listeners and cannot share an address.
#[test]
fn admin_and_metrics_must_not_share_an_address() {
    let problems = refused("[metrics]\nlisten = \"0.0.0.0:7070\"\n");
    assert_keys(&problems, &["metrics.listen"]);
    assert_problem(
        &problems,
        "metrics.listen",
        "collides with admin.listen (127.0.0.1:7070)",
    );
    node_config("[metrics]\nlisten = \"127.0.0.2:9464\"\n");
}

/// PROTO-5: the key file holds exactly 64 hex digits (whitespace around them allowed, upper or
/// lower case) or exactly 32 raw bytes, and both give the same key for the same secret.
#[test]
fn psk_file_accepts_64_hex_digits_or_32_raw_bytes() {
    // The fingerprint is derived from the secret alone: equal fingerprints, equal keys.
    let tag_of = AuthKey::fingerprint;
    let secret: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(37) ^ 0xA5).collect();
    let hex: String = secret.iter().map(|byte| format!("{byte:02x}")).collect();
    let expected = tag_of(&AuthKey::new(&secret, DEFAULT_TAG_LEN).unwrap());

    for contents in [
        secret.clone(),
        format!("{hex}\n").into_bytes(),
        format!("  {hex}\r\n").into_bytes(),
        hex.to_uppercase().into_bytes(),
    ] {
        let file = file_with(&contents);
        let config = node_config(&format!(
            "[cluster]\npsk_file = {}\n",
            toml_path(file.path())
        ));
        let key = config.auth_key.unwrap();
        assert_eq!(key.tag_len(), DEFAULT_TAG_LEN);
        assert_eq!(tag_of(&key), expected, "{contents:?}");
    }

    // A raw key whose last byte happens to be a newline is still 32 raw bytes.
    let mut raw = secret.clone();
    raw[31] = b'\n';
    let file = file_with(&raw);
    let config = node_config(&format!(
        "[cluster]\npsk_file = {}\n",
        toml_path(file.path())
    ));
    assert_eq!(
        tag_of(&config.auth_key.unwrap()),
        tag_of(&AuthKey::new(&raw, 16).unwrap())
    );

    // With a key there is no warning about running unauthenticated.
    let file = file_with(hex.as_bytes());
    let warnings = warnings(&format!(
        "[cluster]\npsk_file = {}\n",
        toml_path(file.path())
    ));
    assert!(warnings.is_empty(), "{warnings:#?}");
}

/// PROTO-5: a key file that is not readable, or not exactly one of the two forms, is refused
/// with the file's name and length and the forms that are accepted — never read as a raw key
/// of some other length.
#[test]
fn psk_file_of_any_other_form_is_refused_naming_file_and_length() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("psk");
    let problems = refused(&format!("[cluster]\npsk_file = {}\n", toml_path(&missing)));
    assert_keys(&problems, &["cluster.psk_file"]);
    assert_problem(&problems, "cluster.psk_file", "cannot read");

    let hex = "0123456789abcdef".repeat(4);
    for contents in [
        b"hunter2\n".to_vec(),
        b"\n".to_vec(),
        Vec::new(),
        b"correct horse battery staple\n".to_vec(),
        // 32 raw bytes and a newline: 33 bytes.
        [[7u8; 32].as_slice(), b"\n"].concat(),
        // A hex key with one digit wrong (one missing: below).
        format!("{}g", &hex[..63]).into_bytes(),
    ] {
        let file = file_with(&contents);
        let problems = refused(&format!(
            "[cluster]\npsk_file = {}\n",
            toml_path(file.path())
        ));
        assert_keys(&problems, &["cluster.psk_file"]);
        assert_problem(
            &problems,
            "cluster.psk_file",
            &format!(
                "{} is {} bytes: expected exactly 64 hex digits (surrounding whitespace \
                 allowed) or exactly 32 raw bytes",
                file.path().display(),
                contents.len()
            ),
        );
    }

    // Hex digits only, one missing: the message counts digits, not bytes.
    let short = file_with(&hex.as_bytes()[..63]);
    let problems = refused(&format!(
        "[cluster]\npsk_file = {}\n",
        toml_path(short.path())
    ));
    assert_problem(
        &problems,
        "cluster.psk_file",
        &format!(
            "{} holds 63 hex digits: expected exactly 64",
            short.path().display()
        ),
    );

    // 32 bytes that are all hex digits are half a hex key (or `openssl rand -hex 16`), not a
    // random raw key, which would almost never be made of hex digits only.
    let half = file_with(&hex.as_bytes()[..32]);
    let problems = refused(&format!(
        "[cluster]\npsk_file = {}\n",
        toml_path(half.path())
    ));
    assert_problem(
        &problems,
        "cluster.psk_file",
        &format!(
            "{} is 32 hex digits (16 bytes): expected exactly 64 hex digits",
            half.path().display()
        ),
    );
}

/// PROTO-5, secure by default: without a key, a UDP address beyond loopback (listen or
/// peer) or an ESP-NOW dongle is refused, naming `cluster.psk_file` and `cluster.insecure`
/// and every exposed address; `insecure = true` allows it with a warning; loopback, the
/// virtual dongle and a key need neither.
#[test]
fn unauthenticated_links_beyond_loopback_need_insecure() {
    for exposed in [
        "[link.udp]\nlisten = \"0.0.0.0:7946\"\n",
        "[link.udp]\nlisten = \"192.168.1.10:7946\"\n",
        "[link.udp]\nlisten = \"127.0.0.1:7946\"\npeers = [\"127.0.0.1:7947\", \"10.0.0.2:7946\"]\n",
        "[link.espnow]\nport = \"/dev/ttyACM0\"\n",
    ] {
        let problems = refused(exposed);
        assert_keys(&problems, &["cluster.psk_file"]);
        let problem = &problems[0].message;
        for needed in [
            "cluster.psk_file",
            "cluster.insecure = true",
            "64 hex digits or 32 raw bytes",
        ] {
            assert!(problem.contains(needed), "{exposed}: {problem}");
        }
        let warnings = warnings(&format!("[cluster]\ninsecure = true\n{exposed}"));
        assert_warning(&warnings, "cluster.insecure", "not authenticated");
    }
    let problems = refused(
        "[link.udp]\nlisten = \"0.0.0.0:7946\"\npeers = [\"10.0.0.2:7946\"]\n\
         [link.espnow]\nport = \"/dev/ttyUSB0\"\n",
    );
    assert_problem(
        &problems,
        "cluster.psk_file",
        "link.udp.listen (0.0.0.0:7946), link.udp.peers[0] (10.0.0.2:7946), \
         link.espnow.port (/dev/ttyUSB0, a radio) can be reached by others",
    );

    for private in [
        "[link.udp]\nlisten = \"127.0.0.1:7946\"\npeers = [\"127.0.0.2:7947\", \"[::1]:7948\"]\n",
        "[link.espnow]\nport = \"virtual\"\n",
    ] {
        let warnings = warnings(private);
        assert_warning(&warnings, "cluster.psk_file", "not authenticated");
    }

    let psk = file_with("ab".repeat(32).as_bytes());
    let keyed = format!(
        "[cluster]\npsk_file = {}\n[link.udp]\nlisten = \"0.0.0.0:7946\"\n",
        toml_path(psk.path())
    );
    assert!(warnings(&keyed).is_empty());
    let warnings = warnings(&keyed.replace("[cluster]\n", "[cluster]\ninsecure = true\n"));
    assert_warning(&warnings, "cluster.insecure", "has no effect");
}

/// PROTO-9: sealed frames carry a 16-byte tag; any other `tag_bytes` is refused by name.
#[test]
fn tag_bytes_must_be_16() {
    for bad in [0, 7, 8, 32, 33] {
        let problems = refused(&format!("[cluster]\ntag_bytes = {bad}\n"));
        assert_keys(&problems, &["cluster.tag_bytes"]);
        assert_problem(
            &problems,
            "cluster.tag_bytes",
            &format!("must be 16, found {bad}: sealed frames carry a 16-byte tag"),
        );
    }
    let psk = file_with("0123456789abcdef".repeat(4).as_bytes());
    let config = node_config(&format!(
        "[cluster]\ntag_bytes = 16\npsk_file = {}\n",
        toml_path(psk.path())
    ));
    assert_eq!(config.auth_key.unwrap().tag_len(), 16);
}

/// PROTO-9: `cluster.psk_next_file` is read and checked like `psk_file`, must hold another
/// key and needs a current one; `cluster.psk_send` is "current" or "next", and "next" needs a
/// next key. A valid pair gives a ring that opens under both and sends under the named one.
#[test]
fn proto9_next_key_and_send_key_are_checked() {
    let current = file_with("0123456789abcdef".repeat(4).as_bytes());
    let next = file_with("fedcba9876543210".repeat(4).as_bytes());
    let short = file_with(b"0123");
    let keyed = |extra: &str| {
        format!(
            "[cluster]\npsk_file = {}\n{extra}",
            toml_path(current.path())
        )
    };

    let config = node_config(&keyed(&format!(
        "psk_next_file = {}\npsk_send = \"next\"\n",
        toml_path(next.path())
    )));
    let ring = config.key_ring().unwrap();
    assert_eq!(ring.send(), conclave_protocol::SendKey::Next);
    assert_eq!(ring.opening().count(), 2);
    assert_ne!(
        ring.sending().fingerprint(),
        config.auth_key.as_ref().unwrap().fingerprint()
    );

    let problems = refused(&keyed(&format!(
        "psk_next_file = {}\n",
        toml_path(current.path())
    )));
    assert_problem(
        &problems,
        "cluster.psk_next_file",
        "the same key as cluster.psk_file",
    );
    let problems = refused(&keyed(&format!(
        "psk_next_file = {}\n",
        toml_path(short.path())
    )));
    assert_keys(&problems, &["cluster.psk_next_file"]);
    let problems = refused(&keyed("psk_next_file = \"/nonexistent/next.psk\"\n"));
    assert_keys(&problems, &["cluster.psk_next_file"]);
    let problems = refused(&keyed("psk_send = \"next\"\n"));
    assert_problem(
        &problems,
        "cluster.psk_send",
        "cluster.psk_next_file is not set",
    );
    let problems = refused(&keyed("psk_send = \"newest\"\n"));
    assert_problem(
        &problems,
        "cluster.psk_send",
        "expected \"current\" or \"next\"",
    );
    let problems = refused(&format!(
        "[cluster]\npsk_next_file = {}\n",
        toml_path(next.path())
    ));
    assert_problem(
        &problems,
        "cluster.psk_next_file",
        "cluster.psk_file is not",
    );
}

/// ESP-1..8: `[link.espnow]` takes a device path or "virtual", a baud rate (921600 by
/// default), a channel 1–14 (1 by default), and optional 32-hex-character keys.
#[test]
fn espnow_link_settings() {
    let config = node_config(&format!(
        "{INSECURE}[link.espnow]\nport = \"/dev/ttyACM0\"\n"
    ));
    let espnow = config.espnow.unwrap();
    assert_eq!(espnow.port, DonglePort::Device("/dev/ttyACM0".into()));
    assert_eq!((espnow.baud, espnow.channel), (921_600, 1));
    assert_eq!((espnow.pmk, espnow.lmk), (None, None));

    let config = node_config(
        "[link.espnow]\nport = \"virtual\"\nbaud = 115200\nchannel = 6\n\
         pmk = \"00112233445566778899aabbccddeeff\"\n",
    );
    let espnow = config.espnow.unwrap();
    assert_eq!(espnow.port, DonglePort::Virtual);
    assert_eq!((espnow.baud, espnow.channel), (115_200, 6));
    assert_eq!(espnow.pmk.unwrap()[15], 0xff);

    let problems = refused("[link.espnow]\nport = \"\"\nbaud = 300\nchannel = 15\nlmk = \"abc\"\n");
    assert_keys(
        &problems,
        &[
            "link.espnow.port",
            "link.espnow.baud",
            "link.espnow.channel",
            "link.espnow.lmk",
        ],
    );
    assert_problem(&problems, "link.espnow.channel", "use 1 to 14");
    assert_problem(&problems, "link.espnow.lmk", "32 hex characters");
}

/// ESP-NOW keys per peer: `peer_lmks` gives some peers a key of their own; every malformed
/// entry is reported under its own index, and from the environment the list is
/// comma-separated like every other.
#[test]
fn espnow_peer_keys() {
    let config = node_config(&format!(
        "{INSECURE}[link.espnow]\nport = \"/dev/ttyACM0\"\nlmk = \"000102030405060708090a0b0c0d0e0f\"\n\
         peer_lmks = [\"gw-b=ffeeddccbbaa99887766554433221100\", \"gw-c = 0f0e0d0c0b0a09080706050403020100\"]\n",
    ));
    let espnow = config.espnow.unwrap();
    assert_eq!(espnow.lmk.unwrap()[1], 0x01);
    assert_eq!(espnow.peer_lmks.len(), 2);
    assert_eq!(espnow.peer_lmks[&PeerId::from_static("gw-b")][0], 0xff);
    assert_eq!(espnow.peer_lmks[&PeerId::from_static("gw-c")][15], 0x00);

    let problems = refused(
        "[cluster]\ninsecure = true\n[link.espnow]\nport = \"/dev/ttyACM0\"\npeer_lmks = [\"gw-b\", \"bad id!=00112233445566778899aabbccddeeff\", \
         \"gw-c=0011\", \"gw-d=\", \"gw-e=00112233445566778899aabbccddeeff\", \
         \"gw-e=00112233445566778899aabbccddeeff\"]\n",
    );
    assert_keys(
        &problems,
        &[
            "link.espnow.peer_lmks[0]",
            "link.espnow.peer_lmks[1]",
            "link.espnow.peer_lmks[2]",
            "link.espnow.peer_lmks[3]",
            "link.espnow.peer_lmks[5]",
        ],
    );
    assert_problem(
        &problems,
        "link.espnow.peer_lmks[0]",
        "<peer id>=<32 hex characters>",
    );
    assert_problem(&problems, "link.espnow.peer_lmks[2]", "32 hex characters");
    assert_problem(&problems, "link.espnow.peer_lmks[3]", "missing");
    assert_problem(
        &problems,
        "link.espnow.peer_lmks[5]",
        "a second key for gw-e",
    );

    let vars = env(&[
        ("CONCLAVE__CLUSTER__INSECURE", "true"),
        ("CONCLAVE__LINK__ESPNOW__PORT", "/dev/ttyUSB0"),
        (
            "CONCLAVE__LINK__ESPNOW__PEER_LMKS",
            "gw-b=ffeeddccbbaa99887766554433221100, gw-c=0f0e0d0c0b0a09080706050403020100",
        ),
    ]);
    let config = Settings::load_with_env(None, vars)
        .unwrap()
        .validate()
        .unwrap();
    let espnow = config.espnow.unwrap();
    assert_eq!(
        espnow.peer_lmks.keys().copied().collect::<Vec<_>>(),
        [PeerId::from_static("gw-b"), PeerId::from_static("gw-c")]
    );
}

/// CB-2: hook commands are strings or argv arrays; empty ones and a zero timeout are refused.
#[test]
fn hook_commands_must_not_be_empty() {
    let problems = refused(
        r#"
        [hooks]
        on_leader = ["", []]
        on_follower = [["", "-x"]]
        on_leader_change = ["  "]
        on_peer_status = ["logger ok"]
        timeout_ms = 0
        "#,
    );
    assert_keys(
        &problems,
        &[
            "hooks.on_leader[0]",
            "hooks.on_leader[1]",
            "hooks.on_follower[0]",
            "hooks.on_leader_change[0]",
            "hooks.timeout_ms",
        ],
    );
    assert_problem(&problems, "hooks.on_leader[0]", "empty command");
    assert_problem(
        &problems,
        "hooks.on_leader[1]",
        "needs at least the program",
    );
    assert_problem(
        &problems,
        "hooks.on_follower[0]",
        "the program (first item) is empty",
    );
    assert_problem(&problems, "hooks.timeout_ms", "must be greater than 0");
}

/// CB-2: strings run through the shell, arrays run directly, in the order given.
#[test]
fn hooks_accept_strings_and_argv_arrays() {
    let config = node_config(
        r#"
        [hooks]
        on_leader = ["systemctl start relay", ["/usr/bin/logger", "-t", "conclave"]]
        on_peer_status = [["notify"]]
        timeout_ms = 250
        "#,
    );
    assert_eq!(
        config.hooks.on_leader,
        vec![
            HookCommand::Shell("systemctl start relay".into()),
            HookCommand::Argv(vec![
                "/usr/bin/logger".into(),
                "-t".into(),
                "conclave".into()
            ]),
        ]
    );
    assert_eq!(
        config.hooks.on_peer_status,
        vec![HookCommand::Argv(vec!["notify".into()])]
    );
    assert!(config.hooks.on_follower.is_empty());
    assert_eq!(config.hooks.timeout, Duration::from_millis(250));
}

/// RAFT-6: in connected mode the voters list is ignored, which is worth a warning but not a
/// refusal.
#[test]
fn connected_quorum_ignores_voters_with_a_warning() {
    let toml = r#"
        [cluster]
        voters = ["node-1", "gw-b"]
        [election.raft]
        quorum = "connected"
        [link.udp]
        listen = "127.0.0.1:7946"
        "#;
    let config = node_config(toml);
    assert_eq!(raft_of!(config).quorum.label(), "connected");
    assert_warning(&warnings(toml), "cluster.voters", "ignored");
    assert!(
        warnings("[election.raft]\nquorum = \"connected\"\n")
            .iter()
            .all(|warning| warning.key != "cluster.voters")
    );
}

/// RAFT-6: an empty voter list in voters mode is a single-node cluster of `node.id`.
#[test]
fn empty_voters_mean_this_node_alone() {
    let config = node_config("[node]\nid = \"solo\"\n[cluster]\nvoters = []\n");
    assert_eq!(config.voters, vec![PeerId::from_static("solo")]);
}

/// A node missing from a non-empty voter list is allowed: it follows without voting, and the
/// warning says so.
#[test]
fn node_outside_the_voters_is_a_non_voting_follower() {
    let toml = r#"
        [node]
        id = "gw-d"
        [cluster]
        voters = ["gw-a", "gw-b", "gw-c"]
        [link.udp]
        listen = "127.0.0.1:7949"
        peers = ["127.0.0.1:7946"]
        "#;
    let config = node_config(toml);
    assert_eq!(config.voters.len(), 3);
    assert!(!config.voters.contains(&PeerId::from_static("gw-d")));
    let warnings = warnings(toml);
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert_warning(&warnings, "cluster.voters", "non-voting follower");
}

/// With the replicated log, a node outside `cluster.voters` is one waiting to be added: the
/// warning says how it becomes a voter instead of saying it never will.
#[test]
fn an_unlisted_node_with_the_log_is_told_how_it_joins() {
    let toml = r#"
        [node]
        id = "gw-d"
        [cluster]
        voters = ["gw-a", "gw-b", "gw-c"]
        [link.udp]
        listen = "127.0.0.1:7949"
        peers = ["127.0.0.1:7946"]
        [log]
        enabled = true
        "#;
    let warnings = warnings(toml);
    assert_warning(&warnings, "cluster.voters", "conclave init --join URL");
    assert_warning(&warnings, "cluster.voters", "conclave member promote gw-d");
}

/// Other voters but no link: no quorum can ever be reached, which deserves a warning.
#[test]
fn voters_without_a_link_warn() {
    let warnings = warnings("[node]\nid = \"gw-a\"\n[cluster]\nvoters = [\"gw-a\", \"gw-b\"]\n");
    assert_warning(&warnings, "cluster.voters", "no link is configured");
}

/// The radio is a link too: voters reached over ESP-NOW only draw no such warning.
#[test]
fn voters_over_the_radio_alone_do_not_warn() {
    let warnings = warnings(
        "[node]\nid = \"gw-a\"\n[cluster]\nvoters = [\"gw-a\", \"gw-b\"]\ninsecure = true\n\
         [link.espnow]\nport = \"/dev/ttyACM0\"\n",
    );
    assert!(
        warnings.iter().all(|w| !w.to_string().contains("no link")),
        "{warnings:#?}"
    );
}

/// A problem shows as `key: message`.
#[test]
fn problems_display_as_key_colon_message() {
    let problem = ConfigProblem::new("link.udp.peers[1]", "\"nope\" is not a socket address");
    assert_eq!(
        problem.to_string(),
        "link.udp.peers[1]: \"nope\" is not a socket address"
    );
    let warning = ConfigWarning::new("cluster.voters", "ignored");
    assert_eq!(warning.to_string(), "cluster.voters: ignored");
}

/// A log sink shared with the test, for asserting on what was logged.
#[derive(Clone, Default)]
struct CapturedLog(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `validate` logs the warnings, with their keys, instead of returning them.
#[test]
fn validate_logs_warnings() {
    let log = CapturedLog::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        node_config(
            "[election.raft]\nelection_timeout_max_ms = 1500\n\
             [link.udp]\nlisten = \"127.0.0.1:7946\"\n",
        );
    });
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("WARN"), "{text}");
    assert!(
        text.contains("election.raft.election_timeout_max_ms"),
        "{text}"
    );
    assert!(text.contains("not randomized"), "{text}");
    assert!(text.contains("cluster.psk_file"), "{text}");
}

/// UDP peers may be host names, resolved at start to addresses of the listen address's
/// family; a name that does not resolve is a problem naming the key and the name.
#[test]
fn udp_peers_may_be_host_names() {
    let config = node_config(
        "[link.udp]\nlisten = \"127.0.0.1:7946\"\npeers = [\"localhost:7947\", \"127.0.0.1:7948\"]\n",
    );
    let peers = config.udp.unwrap().peers;
    assert!(peers.contains(&addr("127.0.0.1:7947")), "{peers:?}");
    assert!(peers.contains(&addr("127.0.0.1:7948")), "{peers:?}");
    assert!(peers.iter().all(SocketAddr::is_ipv4), "{peers:?}");

    let problems = refused(
        "[link.udp]\nlisten = \"127.0.0.1:7946\"\npeers = [\"no-such-host.invalid:7947\", \"gw-b\"]\n",
    );
    assert_keys(&problems, &["link.udp.peers[0]", "link.udp.peers[1]"]);
    assert_problem(
        &problems,
        "link.udp.peers[0]",
        "cannot resolve the host name \"no-such-host.invalid\"",
    );
    assert_problem(
        &problems,
        "link.udp.peers[1]",
        "expected ip:port or host:port",
    );
}

/// `admin.peer_urls`: `id=URL` each, the scheme optional (http), http or https, one per
/// peer.
#[test]
fn admin_peer_urls_name_each_peers_api() {
    let config = node_config(
        "[admin]\npeer_urls = [\"gw-b=http://10.0.0.2:7070/\", \"gw-c=gw-c.lan:7070\", \
         \"gw-d=https://gw-d.lan:7443\"]\n",
    );
    assert_eq!(
        config.admin.peer_urls,
        [
            (
                PeerId::from_static("gw-b"),
                "http://10.0.0.2:7070".to_owned()
            ),
            (
                PeerId::from_static("gw-c"),
                "http://gw-c.lan:7070".to_owned()
            ),
            (
                PeerId::from_static("gw-d"),
                "https://gw-d.lan:7443".to_owned()
            ),
        ]
        .into()
    );
    let problems = refused(
        "[admin]\npeer_urls = [\"gw-b\", \"gw c=http://x:1\", \"gw-d=ftp://x:1\", \
         \"gw-e=x\", \"gw-f=x:1\", \"gw-f=y:2\"]\n",
    );
    assert_keys(
        &problems,
        &[
            "admin.peer_urls[0]",
            "admin.peer_urls[1]",
            "admin.peer_urls[2]",
            "admin.peer_urls[3]",
            "admin.peer_urls[5]",
        ],
    );
    assert_problem(
        &problems,
        "admin.peer_urls[0]",
        "must be \"<peer id>=<admin URL>\"",
    );
    assert_problem(
        &problems,
        "admin.peer_urls[2]",
        "speaks http or https (admin.tls), not ftp",
    );
    assert_problem(&problems, "admin.peer_urls[3]", "expected http://host:port");
    assert_problem(&problems, "admin.peer_urls[5]", "a second URL for gw-f");
}

/// Item 4: the admin bounds are at least 1, and fewer event streams than connections.
#[test]
fn admin_bounds_leave_room_for_status_and_commands() {
    let config = node_config("");
    assert_eq!(config.admin.max_connections, 64);
    assert_eq!(config.admin.max_event_streams, 16);
    let problems = refused("[admin]\nmax_connections = 8\nmax_event_streams = 8\n");
    assert_keys(&problems, &["admin.max_event_streams"]);
    assert_problem(
        &problems,
        "admin.max_event_streams",
        "must be less than admin.max_connections (8 >= 8)",
    );
    let problems = refused("[admin]\nmax_connections = 0\n");
    assert_keys(&problems, &["admin.max_connections"]);
}

/// Item 11: a data directory that is a file is reported by `check-config` before the node
/// tries to open its WAL there.
#[test]
fn a_data_dir_that_is_a_file_is_a_problem() {
    let file = file_with(b"not a directory");
    let problems = refused(&format!("[node]\ndata_dir = {}\n", toml_path(file.path())));
    assert_keys(&problems, &["node.data_dir"]);
    assert_problem(
        &problems,
        "node.data_dir",
        "is a file; it must be a directory",
    );
}

/// Issue 9, item 7: every key is declared once, with its default and its doc lines, in the
/// section structs; `config/default.toml` is what they write (`conclave check-config
/// --print-defaults`), so the file, the defaults and the docs cannot drift apart. Regenerate it
/// with `CONCLAVE_WRITE_DEFAULTS=1 cargo test -p conclave-config defaults_file`.
#[test]
fn defaults_file_is_written_from_the_declarations() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/default.toml");
    let written = super::defaults_toml();
    if std::env::var_os("CONCLAVE_WRITE_DEFAULTS").is_some() {
        std::fs::write(&path, &written).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap();
    assert!(
        on_disk == written,
        "config/default.toml differs from the declarations in crates/config/src/settings/mod.rs; \
         regenerate it with CONCLAVE_WRITE_DEFAULTS=1 cargo test -p conclave-config defaults_file"
    );
}

/// The defaults file reads back as the declared defaults, and every example it shows
/// commented out (the links, `election.raft.priority`) is a key the settings accept, with a
/// value of the right type.
#[test]
fn defaults_file_reads_back_and_its_examples_are_keys() {
    let read = Settings::from_toml_str(&super::defaults_toml()).unwrap();
    assert!(
        read.read_problems().is_empty(),
        "{:?}",
        read.read_problems()
    );
    assert_eq!(read, Settings::default());

    let uncommented: String = super::defaults_toml()
        .lines()
        .map(|line| match line.strip_prefix("# ") {
            // `# key = value` and `# [section]`: the examples; other comments stay.
            Some(rest)
                if rest.starts_with('[')
                    || rest.split_once(" = ").is_some_and(|(key, _)| {
                        !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                    }) =>
            {
                format!("{rest}\n")
            }
            _ => format!("{line}\n"),
        })
        .collect();
    let read = Settings::from_toml_str(&uncommented).unwrap();
    assert!(
        read.read_problems().is_empty(),
        "{:?}",
        read.read_problems()
    );
    assert!(read.link.udp.is_some() && read.link.espnow.is_some());
    assert_eq!(read.election.raft.priority, Some(100));
}

/// `conclave defaults` shows the defaults text to operators, who know the features by what
/// they do: a doc line that names a requirement id (`RAFT-10`), a seed note (`seed 002`), a
/// design-document section (`§9`) or an issue number tells them nothing. The scan is plain
/// text, so it reports every such line at once with its number.
#[test]
fn defaults_text_names_features_not_internal_references() {
    let found: Vec<String> = super::defaults_toml()
        .lines()
        .enumerate()
        .filter_map(|(i, line)| {
            internal_reference(line).map(|what| format!("line {}: {what:?} in {line:?}", i + 1))
        })
        .collect();
    assert!(
        found.is_empty(),
        "the defaults text carries internal references; name the feature instead:\n{}",
        found.join("\n")
    );
}

/// The first internal reference in `line`, if any: `seed 0…`, `§`, `design.md`, `issue <n>`,
/// or a requirement id, a word of 2 to 5 capitals followed by `-` and a digit (`PROTO-5`,
/// `LOG-1..8`), UTF-8 excepted: that one is a name operators know.
fn internal_reference(line: &str) -> Option<String> {
    for marker in ["seed 0", "§", "design.md"] {
        if line.contains(marker) {
            return Some(marker.to_owned());
        }
    }
    // Lower-casing ASCII only keeps byte offsets, so `at` indexes `line` too.
    let lower = line.to_ascii_lowercase();
    let issue = lower
        .match_indices("issue ")
        .find(|&(at, word)| lower[at + word.len()..].starts_with(|c: char| c.is_ascii_digit()));
    if let Some((at, _)) = issue {
        return Some(line[at..].to_owned());
    }
    let bytes = line.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let word_start = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        if !(word_start && bytes[start].is_ascii_uppercase()) {
            start += 1;
            continue;
        }
        let capitals = bytes[start..].iter().take_while(|b| b.is_ascii_uppercase());
        let end = start + capitals.count();
        if (2..=5).contains(&(end - start))
            && bytes.get(end) == Some(&b'-')
            && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)
        {
            // `end + 1` is an ASCII digit, so `end + 2` is a character boundary.
            let id = &line[start..end + 2];
            if id != "UTF-8" {
                return Some(id.to_owned());
            }
        }
        start = end;
    }
    None
}

/// A copy of the defaults file (`conclave defaults > conclave.toml`) sets every key of every
/// mode to its default: switching its `election.mode` is not refused for the other modes'
/// keys, while a key of another mode changed from its default still is.
#[test]
fn a_copy_of_the_defaults_file_may_switch_mode() {
    let copy = super::defaults_toml().replace("mode = \"raft\"", "mode = \"gossip\"");
    let config = Settings::from_toml_str(&copy).unwrap().validate().unwrap();
    assert_eq!(
        config.election.mode(),
        conclave_core::election::Mode::Gossip
    );

    let changed = copy.replace(
        "heartbeat_ms = 250\n# A follower",
        "heartbeat_ms = 400\n# A follower",
    );
    assert_ne!(changed, copy);
    let problems = Settings::from_toml_str(&changed)
        .unwrap()
        .validate()
        .unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].key, "election.raft.heartbeat_ms");
    assert!(problems[0].message.contains("raft mode"), "{problems:?}");
}

/// Every key that validation names in a problem or a warning, written as a literal in
/// `validate.rs`, is a key of the declarations: a renamed key cannot leave a check reporting
/// under its old name.
#[test]
fn keys_named_by_the_checks_are_declared() {
    let source = include_str!("validate.rs");
    let sections: BTreeSet<&str> = KEYS
        .iter()
        .filter_map(|(key, _)| (!key.contains('.')).then_some(key.as_str()))
        .collect();
    let declared: BTreeSet<&str> = KEYS.iter().map(|(key, _)| key.as_str()).collect();
    let mut named = 0;
    for literal in string_literals(source) {
        let key = literal.split('[').next().unwrap_or_default();
        let looks_like_a_key = key.split('.').count() > 1
            && key.split('.').all(|part| !part.is_empty())
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
            && key
                .split('.')
                .next()
                .is_some_and(|first| sections.contains(first));
        if looks_like_a_key {
            named += 1;
            assert!(
                declared.contains(key),
                "validate.rs names {key:?}, which is not a key"
            );
        }
    }
    assert!(
        named > 30,
        "only {named} keys found in validate.rs: is the scan still right?"
    );
}

/// The string literals of Rust `source` (escapes left as written; comments and `'"'` skipped).
fn string_literals(source: &str) -> Vec<String> {
    let mut literals = Vec::new();
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '\'' if chars.peek() == Some(&'"') => {
                chars.next();
            }
            '"' => {
                let mut literal = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            literal.push(c);
                            literal.extend(chars.next());
                        }
                        '"' => break,
                        c => literal.push(c),
                    }
                }
                literals.push(literal);
            }
            _ => {}
        }
    }
    literals
}

/// WAL-5: `cluster.initial_state` is "existing" unless set; "new" asks for a genesis record at
/// the first start; anything else is refused, naming the key and both values.
#[test]
fn initial_state_is_existing_by_default_and_new_when_set() {
    assert_eq!(node_config("").initial_state, crate::InitialState::Existing);
    let new = node_config("[cluster]\ninitial_state = \"new\"\n");
    assert_eq!(new.initial_state, crate::InitialState::New);
    let problems = refused("[cluster]\ninitial_state = \"fresh\"\n");
    assert_keys(&problems, &["cluster.initial_state"]);
    assert_problem(
        &problems,
        "cluster.initial_state",
        "expected \"new\" or \"existing\"",
    );
}

/// ADMIN-TLS: no TLS by default; a certificate without its key, client CAs without a
/// certificate, or a file that cannot be read are refused under the key that names it.
#[test]
fn listener_tls_files_are_checked_by_key() {
    let config = node_config("");
    assert_eq!((config.admin.tls, config.metrics.tls), (None, None));
    let problems = refused("[admin.tls]\ncert_file = \"/nowhere/cert.pem\"\n");
    assert_keys(&problems, &["admin.tls.key_file"]);
    assert_problem(&problems, "admin.tls.key_file", "go together");
    let problems = refused("[metrics.tls]\nclient_ca_file = \"/nowhere/ca.pem\"\n");
    assert_keys(&problems, &["metrics.tls.client_ca_file"]);
    assert_problem(&problems, "metrics.tls.client_ca_file", "over TLS only");
    let problems = refused(
        "[admin.tls]\ncert_file = \"/nowhere/cert.pem\"\nkey_file = \"/nowhere/key.pem\"\n",
    );
    assert_keys(&problems, &["admin.tls.cert_file"]);
    assert_problem(
        &problems,
        "admin.tls.cert_file",
        "/nowhere/cert.pem cannot be read",
    );
}

/// STORE-1, STORE-2: `log.max_store_bytes` and `log.max_jobs` have their defaults, are taken
/// within range, and are refused outside it, both in one pass.
#[test]
fn store_bounds_have_defaults_and_ranges() {
    let default = node_config("");
    assert_eq!(
        default.store_limits,
        conclave_statemachine::StoreLimits::default()
    );
    let set = node_config("[log]\nmax_store_bytes = 1048576\nmax_jobs = 7\n");
    assert_eq!(
        set.store_limits,
        conclave_statemachine::StoreLimits {
            max_bytes: 1 << 20,
            max_jobs: 7
        }
    );
    let problems = refused("[log]\nmax_store_bytes = 1000\nmax_jobs = 0\n");
    assert_keys(&problems, &["log.max_store_bytes", "log.max_jobs"]);
    assert_problem(
        &problems,
        "log.max_store_bytes",
        "must be between 1048576 and 1099511627776, found 1000",
    );
}

/// Issue 15 item 4 (docs/design.md §9: every problem in one pass): an unknown quorum does not hide
/// raft's timing rules, nor a refused raft priority; each is reported with the others.
#[test]
fn an_unknown_quorum_does_not_hide_the_raft_timing_problems() {
    let _log = log_to_test_output();
    let problems = refused(
        r#"
[election.raft]
quorum = "sometimes"
heartbeat_ms = 5000
election_timeout_min_ms = 100
election_timeout_max_ms = 200
priority = 300
"#,
    );
    assert_problem(&problems, "election.raft.quorum", "sometimes");
    assert_problem(&problems, "election.raft.priority", "between 0 and 255");
    assert_problem(
        &problems,
        "election.raft.heartbeat_ms",
        "less than the minimum election timeout",
    );
}

/// Issue 15, CB-2: a hook key given one command as a string, not in an array, is that one
/// command (run by /bin/sh -c), as the README says; an array of them is unchanged.
#[test]
fn a_hook_given_as_a_string_is_one_command() {
    let config = node_config(
        r#"
[hooks]
on_leader = "systemctl start my-service"
on_follower = ["systemctl stop my-service", ["/usr/bin/logger", "follower"]]
"#,
    );
    assert_eq!(
        config.hooks.on_leader,
        vec![HookCommand::Shell("systemctl start my-service".to_owned())]
    );
    assert_eq!(config.hooks.on_follower.len(), 2);
}

/// Issue 15, PROTO-5: a key file of hex digits of the wrong count is described as what it
/// holds — 63 hex digits and a newline — not as a byte count that reads like the right
/// number; one short enough to be 32 bytes with its newline is not taken for a raw key.
#[test]
fn a_key_file_of_too_few_hex_digits_says_how_many() {
    let key = file_with(format!("{}\n", "a".repeat(63)).as_bytes());
    let problems = refused(&format!(
        "[cluster]\npsk_file = {}\n",
        toml_path(key.path())
    ));
    assert_problem(
        &problems,
        "cluster.psk_file",
        &format!(
            "{} holds 63 hex digits and a newline: expected exactly 64 hex digits",
            key.path().display()
        ),
    );
    let key = file_with(format!("{}\n", "b".repeat(31)).as_bytes());
    let problems = refused(&format!(
        "[cluster]\npsk_file = {}\n",
        toml_path(key.path())
    ));
    assert_problem(
        &problems,
        "cluster.psk_file",
        "holds 31 hex digits and a newline",
    );
}

/// Issue 15 item 4: a link reachable by others without a key is refused in the same pass as
/// another section's problem, not only once the rest is right.
#[test]
fn a_missing_key_is_reported_with_the_other_problems() {
    let problems = refused(
        r#"
[election.raft]
quorum = "sometimes"
[link.udp]
listen = "0.0.0.0:7946"
"#,
    );
    assert_problem(&problems, "election.raft.quorum", "sometimes");
    assert_problem(&problems, "cluster.psk_file", "required");
}

/// LOG-1..3: `[log] enabled` turns the replicated log on in raft mode with the `voters`
/// quorum, with the batch settings given; off by default, where raft elects as before.
#[test]
fn the_replicated_log_is_configured_in_raft_mode_with_voters() {
    let config = node_config("[node]\nid = \"a\"\n[cluster]\nvoters = [\"a\", \"b\", \"c\"]\n");
    let ModeConfig::Raft(raft) = &config.election else {
        panic!("raft by default");
    };
    assert_eq!(raft.log, None);
    let config = node_config(
        "[node]\nid = \"a\"\n[cluster]\nvoters = [\"a\", \"b\", \"c\"]\n\
         [log]\nenabled = true\nmax_append_bytes = 200\nmax_inflight = 2\n",
    );
    let ModeConfig::Raft(raft) = &config.election else {
        panic!("raft by default");
    };
    assert_eq!(
        raft.log,
        Some(conclave_core::raft::LogConfig {
            max_append_bytes: 200,
            max_append_entries: 64,
            max_inflight: 2,
            snapshot_entries: 10_000,
            shared_acks: false,
        })
    );
}

/// PROTO-4, LOG-2: with an ESP-NOW link the batches are cut to what a 250-byte radio frame
/// holds beside the envelope with these ids and tag; with ids too long for any room, the log
/// is refused, naming the reason.
#[test]
fn log_batches_are_cut_to_an_espnow_frame() {
    let config = node_config(
        "[node]\nid = \"gw-a\"\n[cluster]\nvoters = [\"gw-a\", \"gw-b\", \"gw-c\"]\n\
         [link.espnow]\nport = \"virtual\"\n[log]\nenabled = true\n",
    );
    let ModeConfig::Raft(raft) = &config.election else {
        panic!("raft");
    };
    let budget = raft.log.unwrap().max_append_bytes;
    assert!((64..250).contains(&budget), "{budget}");
    // What a write may take must not shrink unnoticed: 164 bytes with these ids and the
    // default tag. Counting a read round here once cut it to 155 and turned every key-value
    // write of a 64-byte value over the radio into a 413 (the leader leaves a round off a
    // batch that has no room for it instead).
    assert_eq!(budget, 164);
    let long = "x".repeat(32);
    let problems = refused(&format!(
        "[node]\nid = \"{long}\"\n[cluster]\nid = \"{long}\"\nvoters = [\"{long}\"]\n\
         [link.espnow]\nport = \"virtual\"\n[log]\nenabled = true\n"
    ));
    assert_problem(&problems, "log.enabled", "room for only");
}

/// PROTO-4, LOG-2: `log.max_append_bytes` goes no higher than what one UDP datagram holds
/// beside the envelope with the longest ids and tag (a larger batch could never be sent, and
/// a write that large would wait for a commit that never comes), and the documented maximum is
/// that number.
#[test]
fn log_batches_fit_one_udp_datagram_whatever_the_ids() {
    let longest = "x".repeat(conclave_protocol::MAX_ID_LEN);
    let worst = validate::frame_entry_budget(
        conclave_protocol::ClusterId::new(&longest).unwrap(),
        PeerId::new(&longest).unwrap(),
        Some(conclave_protocol::SEALED_TAG_LEN),
        conclave_protocol::UDP_MTU,
    );
    assert_eq!(worst, usize::try_from(MAX_APPEND_BYTES).ok());
    let problems = refused(&format!(
        "[log]\nmax_append_bytes = {}\n",
        MAX_APPEND_BYTES + 1
    ));
    assert_problem(
        &problems,
        "log.max_append_bytes",
        &format!("must be between 64 and {MAX_APPEND_BYTES}"),
    );
    let config = node_config(&format!(
        "[node]\nid = \"{longest}\"\n[cluster]\nid = \"{longest}\"\nvoters = [\"{longest}\"]\n\
         [log]\nenabled = true\nmax_append_bytes = {MAX_APPEND_BYTES}\n"
    ));
    let ModeConfig::Raft(raft) = &config.election else {
        panic!("raft by default");
    };
    assert_eq!(
        raft.log.map(|log| log.max_append_bytes as u64),
        Some(MAX_APPEND_BYTES)
    );
}

/// LOG-1: the replicated log is refused with the `connected` quorum and outside raft mode,
/// naming `log.enabled` and the key it conflicts with; its numbers are refused out of range.
#[test]
fn the_replicated_log_is_refused_where_it_cannot_keep_a_commit() {
    let problems = refused("[election.raft]\nquorum = \"connected\"\n[log]\nenabled = true\n");
    assert_problem(
        &problems,
        "log.enabled",
        "election.raft.quorum = \"voters\"",
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    let problems = refused("[election]\nmode = \"gossip\"\n[log]\nenabled = true\n");
    assert_problem(&problems, "log.enabled", "election.mode is \"gossip\"");
    let problems = refused("[log]\nmax_append_bytes = 10\nmax_inflight = 0\n");
    assert_keys(&problems, &["log.max_append_bytes", "log.max_inflight"]);
    // LOG-4: 0 turns snapshots off; a handful of entries is refused.
    let problems = refused("[log]\nsnapshot_entries = 3\n");
    assert_keys(&problems, &["log.snapshot_entries"]);
}
