//! What SIGHUP does to a running node (issue 8, item 8): reopen the log, re-read the
//! configuration, apply the keys that can change while the node runs, and refuse — by name,
//! at WARN — every other key that changed.
//!
//! The file is read and checked exactly as at start (defaults, the `--config` file, then the
//! `CONCLAVE__*` environment of the process, every rule of `check-config`). If it cannot be
//! read or any problem is found, every problem is logged at ERROR and **nothing changes**:
//! the node goes on with the configuration it has. Otherwise the new settings are compared key
//! by key with the ones the node runs with:
//!
//! | key | on reload |
//! |---|---|
//! | `hooks.*` (commands and `timeout_ms`) | applied: later runs use the new commands |
//! | `log.level` | applied: the new filter from the next line on |
//! | `log.file` | applied: the log moves to the new file (or standard error) |
//! | `health.*` | applied: the new battery/priority source is read at once (PRI-1, RAFT-10) |
//! | `admin.token_file`, `admin.tokens_file` | applied: the files are read again on every reload, changed or not, and the admin API checks the next request against their tokens (SEC-2) |
//! | `cluster.psk_file`, `cluster.psk_next_file`, `cluster.psk_send` | applied while a key is set: the key files are read again on every reload and the node seals under the named key from its next frame (PROTO-9, a key rotation); setting or removing the only key takes a restart |
//! | anything else | kept as it runs; a WARN names the key, the value in use and the file's |
//!
//! Each applied key is reported at INFO with its old and new value; the values of the radio
//! keys (`link.espnow.pmk`, `lmk`, `peer_lmks`) are never shown. A refused key stays refused:
//! the next reload warns again until the node is restarted. Of the files named by the
//! configuration, the admin tokens' are read again at every reload (a token added, removed or
//! changed there takes effect without a change of the configuration file; a broken one keeps
//! the tokens in force, like any other problem), and so are the cluster key files (a key file
//! rewritten in place is taken too). Token secrets are never logged, only the names of the
//! tokens in force.
//!
//! To make another key reloadable (a priority source, say), add a [`Reloadable`] variant, map
//! its keys to it in [`Reloadable::of`], and apply it in [`Reloader::apply`]: everything else
//! — reading, checking, diffing, reporting — is shared.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use conclave_actors::node::NodeHandle;
use conclave_config::settings::{ConfigWarning, Settings};
use conclave_config::{AdminToken, NodeConfig};
use serde_json::Value;
use tracing::{error, info, warn};

use crate::logging::{Log, parse_filter};

/// A group of keys that a running node can take on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reloadable {
    /// `hooks.*`.
    Hooks,
    /// `log.level`.
    LogLevel,
    /// `log.file`.
    LogFile,
    /// `health.*`: the battery and priority source.
    Health,
    /// `admin.token_file`, `admin.tokens_file`: the admin API's tokens.
    AdminTokens,
    /// `cluster.psk_file`, `cluster.psk_next_file`, `cluster.psk_send`: the frame keys.
    ClusterKeys,
}

impl Reloadable {
    /// The group `key` belongs to; `None` when changing it takes a restart.
    pub(crate) fn of(key: &str) -> Option<Reloadable> {
        if key == "hooks" || key.starts_with("hooks.") {
            Some(Reloadable::Hooks)
        } else if key == "log.level" {
            Some(Reloadable::LogLevel)
        } else if key == "log.file" {
            Some(Reloadable::LogFile)
        } else if key == "health" || key.starts_with("health.") {
            Some(Reloadable::Health)
        } else if key == "admin.token_file" || key == "admin.tokens_file" {
            Some(Reloadable::AdminTokens)
        } else if CLUSTER_KEY_KEYS.contains(&key) {
            Some(Reloadable::ClusterKeys)
        } else {
            None
        }
    }
}

/// The settings that name the frame keys (PROTO-9).
const CLUSTER_KEY_KEYS: &[&str] = &[
    "cluster.psk_file",
    "cluster.psk_next_file",
    "cluster.psk_send",
];

/// Keys whose values are secrets: a change is named, its values never shown.
const SECRET_KEYS: &[&str] = &[
    "link.espnow.pmk",
    "link.espnow.lmk",
    "link.espnow.peer_lmks",
];

/// Every key of `settings` with its value, dotted (`election.raft.heartbeat_ms`); lists are
/// values, not sections.
pub(crate) fn flatten(settings: &Settings) -> BTreeMap<String, Value> {
    fn walk(prefix: &str, value: Value, out: &mut BTreeMap<String, Value>) {
        match value {
            Value::Object(map) => {
                for (name, inner) in map {
                    let key = if prefix.is_empty() {
                        name
                    } else {
                        format!("{prefix}.{name}")
                    };
                    walk(&key, inner, out);
                }
            }
            leaf => {
                out.insert(prefix.to_owned(), leaf);
            }
        }
    }
    let mut out = BTreeMap::new();
    if let Ok(value) = serde_json::to_value(settings) {
        walk("", value, &mut out);
    }
    out
}

/// One key whose value differs between the running settings and the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    /// The dotted key.
    pub(crate) key: String,
    /// Its value in use (`None`: the key does not exist now, e.g. a section not configured).
    pub(crate) running: Option<Value>,
    /// Its value in the file.
    pub(crate) file: Option<Value>,
}

/// A value as a log line shows it.
struct Shown<'a>(&'a str, &'a Option<Value>);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            _ if SECRET_KEYS.contains(&self.0) => f.write_str("(secret, not shown)"),
            None => f.write_str("(not set)"),
            Some(value) => write!(f, "{value}"),
        }
    }
}

/// What a reload will do: the keys to apply, grouped, and the keys it refuses.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    /// Changed keys that can be applied, by group.
    pub(crate) apply: BTreeMap<Reloadable, Vec<Change>>,
    /// Changed keys that take a restart.
    pub(crate) refused: Vec<Change>,
}

/// Compares the settings in use with the file's.
pub(crate) fn plan(running: &BTreeMap<String, Value>, file: &BTreeMap<String, Value>) -> Plan {
    let keys: BTreeSet<&String> = running.keys().chain(file.keys()).collect();
    let mut plan = Plan::default();
    for key in keys {
        let (old, new) = (running.get(key), file.get(key));
        if old == new {
            continue;
        }
        let change = Change {
            key: key.clone(),
            running: old.cloned(),
            file: new.cloned(),
        };
        match Reloadable::of(key) {
            Some(group) => plan.apply.entry(group).or_default().push(change),
            None => plan.refused.push(change),
        }
    }
    plan
}

/// The configuration file of a running node and the settings it runs with.
pub(crate) struct Reloader {
    /// The configuration file; `None` when the node runs on the built-in defaults alone.
    file: Option<PathBuf>,
    running: BTreeMap<String, Value>,
    /// The admin tokens in force (SEC-2), to tell whether a reload changed them.
    tokens: Vec<AdminToken>,
}

impl Reloader {
    /// `settings`, read from `file`, are what the node started with, and `config` what they
    /// gave.
    pub(crate) fn new(file: Option<&Path>, settings: &Settings, config: &NodeConfig) -> Self {
        Self {
            file: file.map(Path::to_path_buf),
            running: flatten(settings),
            tokens: config.admin.tokens.clone(),
        }
    }

    /// Puts the admin tokens of `config` in force when they differ from those in force, and
    /// says so by name (never by secret).
    fn reload_tokens(&mut self, node: &NodeHandle, config: &NodeConfig) {
        if config.admin.tokens == self.tokens {
            return;
        }
        node.admin_tokens().replace(config.admin.tokens.clone());
        self.tokens = config.admin.tokens.clone();
        let names: Vec<&str> = self.tokens.iter().map(|t| t.name.as_str()).collect();
        info!(
            tokens = self.tokens.len(),
            "admin tokens reloaded: [{}] now in force",
            names.join(", ")
        );
    }

    /// Reopens the log and reloads the configuration (see the module docs). Returns whether
    /// the file was accepted (some keys may still have been refused).
    pub(crate) async fn reload(&mut self, node: &NodeHandle, log: &Log) -> bool {
        let file = self.file.as_ref().map_or_else(
            || "built-in defaults".to_owned(),
            |file| file.display().to_string(),
        );
        info!(config = %file, "SIGHUP: reopening the log and reloading the configuration");
        if let Some(path) = log.file() {
            match log.reopen(Some(&path)) {
                Ok(()) => info!(log_file = %path.display(), "log file reopened"),
                Err(err) => error!("{err}; logging on to the file that was open"),
            }
        }
        let settings = match Settings::load(self.file.as_deref()) {
            Ok(settings) => settings,
            Err(err) => {
                error!("reload refused: {err}; the running configuration stays");
                return false;
            }
        };
        let config = match validate(&settings) {
            Ok((config, _warnings)) => config,
            Err(problems) => {
                for problem in &problems {
                    error!(config = %file, "reload refused: {problem}");
                }
                error!(
                    config = %file,
                    problems = problems.len(),
                    "reload refused: the file has {} problem{}; the running configuration stays",
                    problems.len(),
                    if problems.len() == 1 { "" } else { "s" }
                );
                return false;
            }
        };

        self.reload_tokens(node, &config);
        let mut plan = plan(&self.running, &flatten(&settings));
        if config.auth_key.is_some() {
            // The key files are read again even when no key setting changed: a key file
            // rewritten in place is a rotation too. Nothing is logged unless the keys change.
            plan.apply.entry(Reloadable::ClusterKeys).or_default();
        }
        for change in &plan.refused {
            warn!(
                key = %change.key,
                "{} changed in {file} but takes a restart: still running with {}, the file says {}",
                change.key,
                Shown(&change.key, &change.running),
                Shown(&change.key, &change.file),
            );
        }
        let mut applied = Vec::new();
        for (group, changes) in plan.apply {
            match self.apply(group, node, log, &config, &settings).await {
                Ok(()) => {
                    for change in changes {
                        info!(
                            key = %change.key,
                            "{} reloaded: {} -> {}",
                            change.key,
                            Shown(&change.key, &change.running),
                            Shown(&change.key, &change.file),
                        );
                        match &change.file {
                            Some(value) => self.running.insert(change.key.clone(), value.clone()),
                            None => self.running.remove(&change.key),
                        };
                        applied.push(change.key);
                    }
                }
                Err(err) => error!(?group, "could not apply the reloaded keys: {err}"),
            }
        }
        if applied.is_empty() && plan.refused.is_empty() {
            info!(config = %file, "configuration reloaded: nothing changed");
        } else {
            info!(
                config = %file,
                applied = applied.len(),
                refused = plan.refused.len(),
                "configuration reloaded: applied [{}]; needing a restart [{}]",
                applied.join(", "),
                plan.refused
                    .iter()
                    .map(|change| change.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        true
    }

    /// Carries out one group of changed keys.
    async fn apply(
        &self,
        group: Reloadable,
        node: &NodeHandle,
        log: &Log,
        config: &NodeConfig,
        settings: &Settings,
    ) -> Result<(), String> {
        match group {
            Reloadable::Hooks => node
                .replace_hooks(config.hooks.clone())
                .await
                .map_err(|err| err.to_string()),
            Reloadable::LogLevel => log.set_filter(parse_filter(&settings.log.level)?),
            Reloadable::LogFile => log.reopen(log_file(settings).as_deref()),
            Reloadable::Health => node
                .replace_health(config.health.clone())
                .await
                .map_err(|err| err.to_string()),
            // Already in force: the files are read again at every reload.
            Reloadable::AdminTokens => Ok(()),
            Reloadable::ClusterKeys => apply_cluster_keys(node, config).await,
        }
    }
}

/// PROTO-9: the frame keys of the reloaded configuration, from the next frame on.
async fn apply_cluster_keys(node: &NodeHandle, config: &NodeConfig) -> Result<(), String> {
    let Some(keys) = config.key_ring() else {
        return Err(
            "cluster.psk_file is no longer set, and turning sealing off takes a restart: the \
             node keeps its keys"
                .to_owned(),
        );
    };
    node.replace_keys(keys).await.map_err(|err| err.to_string())
}

/// `log.file` as a path; `None` for standard error.
pub(crate) fn log_file(settings: &Settings) -> Option<PathBuf> {
    (!settings.log.file.as_os_str().is_empty()).then(|| settings.log.file.clone())
}

/// Every rule of `check-config`, plus the log filter: the node's configuration and the
/// warnings, or every problem, each naming its key.
pub(crate) fn validate(
    settings: &Settings,
) -> Result<(NodeConfig, Vec<ConfigWarning>), Vec<String>> {
    let level_problem = parse_filter(&settings.log.level)
        .err()
        .map(|message| format!("log.level: {message}"));
    match settings.validate_with_warnings() {
        Ok(valid) => match level_problem {
            None => Ok(valid),
            Some(problem) => Err(vec![problem]),
        },
        Err(problems) => Err(problems
            .iter()
            .map(ToString::to_string)
            .chain(level_problem)
            .collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str) -> Settings {
        Settings::from_toml_str(toml).unwrap()
    }

    const BASE: &str = r#"
        [node]
        id = "gw-a"
        [hooks]
        on_leader = ["systemctl start relay"]
        [link.espnow]
        port = "virtual"
        lmk = "00112233445566778899aabbccddeeff"
    "#;

    /// Item 8: hook and log keys are applied, everything else is refused by name; nothing
    /// changed gives an empty plan.
    #[test]
    fn reload_applies_hooks_and_log_and_refuses_the_rest() {
        let running = flatten(&settings(BASE));
        assert_eq!(plan(&running, &running), Plan::default());

        let edited = BASE
            .replace("gw-a", "gw-b")
            .replace("systemctl start relay", "systemctl start relay2")
            + "\n[log]\nlevel = \"debug\"\n[metrics]\nlisten = \"\"\n[health]\nbattery_percent = 40\n";
        let plan = plan(&running, &flatten(&settings(&edited)));
        let keys = |changes: &[Change]| -> Vec<String> {
            changes.iter().map(|change| change.key.clone()).collect()
        };
        assert_eq!(
            plan.apply.keys().copied().collect::<Vec<_>>(),
            vec![Reloadable::Hooks, Reloadable::LogLevel, Reloadable::Health]
        );
        assert_eq!(
            keys(&plan.apply[&Reloadable::Health]),
            vec!["health.battery_percent"]
        );
        assert_eq!(
            keys(&plan.apply[&Reloadable::Hooks]),
            vec!["hooks.on_leader"]
        );
        assert_eq!(
            plan.apply[&Reloadable::LogLevel][0],
            Change {
                key: "log.level".to_owned(),
                running: Some(Value::from("info")),
                file: Some(Value::from("debug")),
            }
        );
        assert_eq!(keys(&plan.refused), vec!["metrics.listen", "node.id"]);
    }

    /// SEC-2: the admin token files are reloadable keys (their contents are read again at
    /// every reload whether or not the keys changed); the admin API's address is not.
    #[test]
    fn admin_token_files_are_reloadable() {
        for key in ["admin.token_file", "admin.tokens_file"] {
            assert_eq!(Reloadable::of(key), Some(Reloadable::AdminTokens), "{key}");
        }
        assert_eq!(Reloadable::of("admin.listen"), None);
        let running = flatten(&settings(BASE));
        let edited = format!("{BASE}\n[admin]\ntokens_file = \"/etc/conclave/tokens.toml\"\n");
        let plan = plan(&running, &flatten(&settings(&edited)));
        assert!(plan.refused.is_empty(), "{plan:?}");
        assert_eq!(
            plan.apply.keys().copied().collect::<Vec<_>>(),
            vec![Reloadable::AdminTokens]
        );
    }

    /// PROTO-9: the key settings of a rotation are applied, not refused.
    #[test]
    fn proto9_key_settings_are_reloadable() {
        let running = flatten(&settings(BASE));
        let edited = format!(
            "{BASE}\n[cluster]\npsk_file = \"/etc/conclave/psk.new\"\n\
             psk_next_file = \"/etc/conclave/psk.next\"\npsk_send = \"next\"\n"
        );
        let plan = plan(&running, &flatten(&settings(&edited)));
        assert!(plan.refused.is_empty(), "{:?}", plan.refused);
        let keys: Vec<&str> = plan.apply[&Reloadable::ClusterKeys]
            .iter()
            .map(|change| change.key.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "cluster.psk_file",
                "cluster.psk_next_file",
                "cluster.psk_send"
            ]
        );
    }

    /// A section that appears or disappears shows as its keys changing from or to "not set".
    #[test]
    fn sections_added_or_removed_are_changes_of_their_keys() {
        let running = flatten(&settings(BASE));
        let with_udp = format!("{BASE}\n[link.udp]\nlisten = \"127.0.0.1:7946\"\n");
        let plan = plan(&running, &flatten(&settings(&with_udp)));
        let refused: Vec<(&str, Option<&Value>)> = plan
            .refused
            .iter()
            .map(|change| (change.key.as_str(), change.file.as_ref()))
            .collect();
        assert_eq!(
            refused,
            vec![
                ("link.udp.listen", Some(&Value::from("127.0.0.1:7946"))),
                ("link.udp.peers", Some(&Value::Array(Vec::new()))),
            ]
        );
        assert!(plan.refused.iter().all(|change| change.running.is_none()));
    }

    /// Radio keys are named but never shown.
    #[test]
    fn secrets_are_not_shown() {
        let value = Some(Value::from("00112233445566778899aabbccddeeff"));
        assert_eq!(
            Shown("link.espnow.lmk", &value).to_string(),
            "(secret, not shown)"
        );
        assert_eq!(
            Shown("node.id", &Some(Value::from("gw-a"))).to_string(),
            "\"gw-a\""
        );
        assert_eq!(Shown("link.udp.listen", &None).to_string(), "(not set)");
    }

    /// A reload checks the whole file, the log filter included, and names the key.
    #[test]
    fn a_broken_file_is_refused_with_its_problems() {
        let problems = validate(&settings(
            "[node]\nid = \"not a valid id\"\n[log]\nlevel = \"info,[\"\n",
        ))
        .unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("node.id:"), "{problems:?}");
        assert!(problems[1].starts_with("log.level:"), "{problems:?}");
        assert!(validate(&settings(BASE)).is_ok());
    }
}
