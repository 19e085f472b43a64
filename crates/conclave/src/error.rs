//! The façade's one error type (EMB-1): what can go wrong loading a configuration, starting a
//! node, asking it something or giving it a command.

use std::fmt;

use conclave_config::settings::{ConfigProblem, SettingsError};

/// Why a call of the embedding API failed.
///
/// ```
/// let err = conclave::config::from_toml_str("[node]\nid = \"no spaces allowed\"").unwrap_err();
/// assert!(matches!(err, conclave::Error::Config(_)));
/// assert!(err.to_string().contains("node.id"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration could not be read at all (a missing file, text that is not TOML).
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The configuration was read but refused: every problem, each with its key, as
    /// `conclave check-config` reports them.
    #[error("{0}")]
    Config(ConfigProblems),
    /// The node could not start (a port in use, a data directory another process holds, a WAL
    /// of another election mode), or has stopped since.
    #[error(transparent)]
    Node(#[from] conclave_actors::node::NodeError),
    /// The election refused an operator command (`set_leader` to an unknown peer, a mode
    /// without automatic elections, a leader by configuration asked to resign).
    #[error("refused: {0}")]
    Refused(#[from] conclave_core::election::ElectionError),
    /// The replicated log's store or queue answered with an error: the admin API's, with its
    /// stable code (`not_leader`, `not_found`, `compare_failed`, `none_ready`, …) and message.
    #[error("{0}")]
    Api(Box<conclave_api::ErrorAnswer>),
    /// [`Node::lock_with`](crate::Node::lock_with): another still held the lock when the
    /// wait ran out.
    #[error("{key} is still held by another after {waited:?}")]
    LockTimeout {
        /// The lock's key.
        key: String,
        /// How long it was waited for.
        waited: std::time::Duration,
    },
    /// A peer id that breaks PROTO-1's rules (1–32 bytes of `[A-Za-z0-9._-]`).
    #[error(transparent)]
    Id(#[from] conclave_protocol::IdError),
    /// The thread that runs the node could not be created.
    #[error("cannot start the node's thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The node's thread ended without answering (it panicked).
    #[error("the node's thread ended unexpectedly")]
    ThreadLost,
}

/// Every problem found in one configuration, displayed one per line.
///
/// ```
/// let err = conclave::config::from_toml_str("[cluster]\nid = \"\"").unwrap_err();
/// let conclave::Error::Config(problems) = err else { panic!("{err}") };
/// assert!(problems.iter().any(|problem| problem.key == "cluster.id"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblems(pub Vec<ConfigProblem>);

impl ConfigProblems {
    /// The problems, in the order `check-config` lists them.
    ///
    /// ```
    /// let toml = "[election.raft]\nheartbeat_ms = 5000\nelection_timeout_min_ms = 100";
    /// let Err(conclave::Error::Config(problems)) = conclave::config::from_toml_str(toml) else {
    ///     panic!("a heartbeat slower than the election timeout was accepted");
    /// };
    /// for problem in problems.iter() {
    ///     eprintln!("{}: {}", problem.key, problem.message);
    /// }
    /// ```
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigProblem> {
        self.0.iter()
    }
}

impl fmt::Display for ConfigProblems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.0.len();
        write!(
            f,
            "{count} configuration problem{}",
            if count == 1 { "" } else { "s" }
        )?;
        for problem in &self.0 {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

/// The façade's result type.
///
/// ```
/// fn node_id_of(toml: &str) -> conclave::Result<String> {
///     Ok(conclave::config::from_toml_str(toml)?.node_id.to_string())
/// }
/// assert_eq!(node_id_of("[node]\nid = \"gw-a\"").unwrap(), "gw-a");
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;
