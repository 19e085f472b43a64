//! Loading a node's configuration for an embedding program (EMB-1): the same layers and the
//! same checks as `conclave check-config` — the built-in defaults, then the given TOML; every
//! unknown key, mistyped value and contradiction reported with its key — so a file that the
//! daemon accepts starts the same node in a program.
//!
//! The process environment (`CONCLAVE__…` variables) is not read: in a program, the host
//! decides what its node runs with. Warnings (no pre-shared key on loopback, say) are logged
//! through `tracing` as the daemon logs them. A [`NodeConfig`] can also be built in code; the
//! node trusts it as given.

use std::path::Path;

use conclave_config::NodeConfig;
use conclave_config::settings::Settings;

use crate::error::{ConfigProblems, Error, Result};

/// The configuration in the TOML text `toml`, laid over the built-in defaults and checked.
///
/// ```
/// let config = conclave::config::from_toml_str(
///     r#"
///     [node]
///     id = "worker-1"
///     data_dir = "/var/lib/my-program/conclave"
///     [admin]
///     listen = ""
///     [metrics]
///     listen = ""
///     "#,
/// )?;
/// assert_eq!(config.node_id.to_string(), "worker-1");
/// assert!(config.admin.listen.is_none());
/// # Ok::<(), conclave::Error>(())
/// ```
pub fn from_toml_str(toml: &str) -> Result<NodeConfig> {
    validate(&Settings::from_toml_str(toml)?)
}

/// The configuration in the TOML file at `path`, laid over the built-in defaults and checked.
///
/// ```no_run
/// let config = conclave::config::from_file("/etc/conclave/conclave.toml")?;
/// println!("node {} of cluster {}", config.node_id, config.cluster_id);
/// # Ok::<(), conclave::Error>(())
/// ```
pub fn from_file(path: impl AsRef<Path>) -> Result<NodeConfig> {
    validate(&Settings::load_with_env(
        Some(path.as_ref()),
        std::iter::empty(),
    )?)
}

fn validate(settings: &Settings) -> Result<NodeConfig> {
    settings
        .validate()
        .map_err(|problems| Error::Config(ConfigProblems(problems)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EMB-1: a mistake is reported with its key, as check-config reports it.
    #[test]
    fn a_bad_key_is_named() {
        let Err(Error::Config(problems)) = from_toml_str("[election]\nmode = \"paxos\"") else {
            panic!("an unknown election mode was accepted");
        };
        assert!(
            problems.iter().any(|p| p.key == "election.mode"),
            "{problems}"
        );
    }

    /// EMB-1: an unknown key is refused, not ignored.
    #[test]
    fn an_unknown_key_is_refused() {
        let Err(Error::Config(problems)) = from_toml_str("[node]\nname = \"x\"") else {
            panic!("an unknown key was accepted");
        };
        assert!(
            problems.iter().any(|p| p.key.contains("node.name")),
            "{problems}"
        );
    }

    /// EMB-1: text that is not TOML is a settings error, not a panic.
    #[test]
    fn text_that_is_not_toml_is_an_error() {
        assert!(matches!(from_toml_str("[node"), Err(Error::Settings(_))));
    }

    /// EMB-1: a missing file is an error naming it.
    #[test]
    fn a_missing_file_is_named() {
        let err = from_file("/nonexistent/conclave.toml").unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/conclave.toml"),
            "{err}"
        );
    }
}
