//! Named admin tokens with roles (SEC-2, issue 26 item 2): the `admin.tokens_file` format, read
//! and checked, and the single `admin.token_file` as one admin token named `token_file`.
//!
//! A tokens file is TOML, one `[[token]]` table per token:
//!
//! ```toml
//! [[token]]
//! name = "worker-1"
//! role = "write"                 # read | write | admin
//! secret_sha256 = "5e88…"        # or secret = "…", the token in clear
//! queues = ["thumbnails"]        # write only: limits it to these queues…
//! key_prefixes = ["workers/1/"]  # …and to keys under these prefixes
//! ```
//!
//! Only digests leave this module: a secret given in clear is hashed as it is read, so the
//! node holds no token in clear and compares SHA-256 digests (of equal length, whatever was
//! presented) in constant time. The checks name the token by its position and name, never
//! its secret, because problems are printed and logged.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The name the token of `admin.token_file` goes by in log lines and refusals.
const TOKEN_FILE_NAME: &str = "token_file";

/// Longest token name: names appear in every mutation's log line.
const MAX_TOKEN_NAME: usize = 64;

/// What a token may do; each role may do all that the roles before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TokenRole {
    /// `read`: every GET, the event streams and watches.
    Read,
    /// `write`: also the key-value store's, the job queue's and the sessions' mutations.
    Write,
    /// `admin`: everything: the election's commands, membership, purges, snapshots.
    Admin,
}

impl TokenRole {
    /// The role as the tokens file and the API's messages spell it.
    pub fn label(self) -> &'static str {
        match self {
            TokenRole::Read => "read",
            TokenRole::Write => "write",
            TokenRole::Admin => "admin",
        }
    }

    fn parse(text: &str) -> Option<TokenRole> {
        match text {
            "read" => Some(TokenRole::Read),
            "write" => Some(TokenRole::Write),
            "admin" => Some(TokenRole::Admin),
            _ => None,
        }
    }
}

impl fmt::Display for TokenRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The limits of a write token that names `key_prefixes` or `queues`: it may change only the
/// keys under those prefixes and the jobs of those queues. Naming one list and not the other
/// leaves the other empty, so a worker's token given `queues` cannot write keys by omission;
/// `key_prefixes = [""]` covers every key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenScope {
    /// Keys this token may put, delete or compare-and-set start with one of these.
    pub key_prefixes: Vec<String>,
    /// Jobs this token may add, claim, ack, nack or retry are of one of these queues.
    pub queues: Vec<String>,
}

impl TokenScope {
    /// Whether `key` is under one of the prefixes.
    pub fn covers_key(&self, key: &str) -> bool {
        self.key_prefixes
            .iter()
            .any(|prefix| key.starts_with(prefix.as_str()))
    }

    /// Whether `queue` is one of the queues.
    pub fn covers_queue(&self, queue: &str) -> bool {
        self.queues.iter().any(|allowed| allowed == queue)
    }
}

/// One named token: its name, role, limits and the SHA-256 digest of its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken {
    /// The name log lines and refusals show.
    pub name: String,
    /// What it may do.
    pub role: TokenRole,
    /// A write token's limits; `None` is no limit.
    pub scope: Option<TokenScope>,
    /// SHA-256 of the secret.
    pub digest: [u8; 32],
}

impl AdminToken {
    /// The admin token of `admin.token_file`, whose content is `secret`.
    pub fn from_token_file(secret: &str) -> Self {
        Self {
            name: TOKEN_FILE_NAME.to_owned(),
            role: TokenRole::Admin,
            scope: None,
            digest: secret_digest(secret.as_bytes()),
        }
    }
}

impl fmt::Debug for AdminToken {
    /// Without the digest: a digest of a weak secret is as good as the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminToken")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// SHA-256 of a presented or configured secret.
pub fn secret_digest(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

/// One `[[token]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    #[serde(default)]
    name: String,
    #[serde(default)]
    role: String,
    secret: Option<String>,
    secret_sha256: Option<String>,
    key_prefixes: Option<Vec<String>>,
    queues: Option<Vec<String>>,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    token: Vec<TokenEntry>,
}

/// The tokens of a tokens file, and whether any secret is written in clear; or every problem
/// found, each a sentence that names the file and the token.
pub(crate) fn read_tokens_file(path: &Path) -> Result<(Vec<AdminToken>, bool), Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| vec![format!("cannot read {}: {error}", path.display())])?;
    let file: TokensFile = toml::from_str(&text).map_err(|error| {
        vec![format!(
            "{} is not a tokens file: {}",
            path.display(),
            error.to_string().trim_end()
        )]
    })?;
    if file.token.is_empty() {
        return Err(vec![format!(
            "{} names no token: give one [[token]] table per token, with name, role and secret \
             or secret_sha256",
            path.display()
        )]);
    }
    let mut problems = Vec::new();
    let mut tokens = Vec::new();
    let mut clear = false;
    for (index, entry) in file.token.iter().enumerate() {
        let what = format!("{}: token[{index}] ({:?})", path.display(), entry.name);
        let mut problem = |message: String| problems.push(format!("{what}: {message}"));
        clear |= entry.secret.is_some();
        if let Some(token) = check_entry(entry, &mut problem) {
            tokens.push(token);
        }
    }
    duplicates(path, &tokens, &mut problems);
    if problems.is_empty() {
        Ok((tokens, clear))
    } else {
        Err(problems)
    }
}

/// One entry's token, or `None` after reporting what is wrong with it.
fn check_entry(entry: &TokenEntry, problem: &mut impl FnMut(String)) -> Option<AdminToken> {
    let name_ok = valid_name(&entry.name);
    if !name_ok {
        problem(format!(
            "the name must be 1 to {MAX_TOKEN_NAME} characters of A-Z a-z 0-9 . _ - (it is \
             shown in log lines and refusals)"
        ));
    }
    let role = TokenRole::parse(&entry.role);
    if role.is_none() {
        problem(format!(
            "role {:?} is none of read, write, admin",
            entry.role
        ));
    }
    let digest = match (&entry.secret, &entry.secret_sha256) {
        (Some(secret), None) if secret.is_empty() => {
            problem("the secret is empty".to_owned());
            None
        }
        (Some(secret), None) if secret.chars().any(char::is_whitespace) => {
            problem(
                "the secret holds whitespace, which an Authorization header cannot carry \
                 intact"
                    .to_owned(),
            );
            None
        }
        (Some(secret), None) => Some(secret_digest(secret.as_bytes())),
        (None, Some(hex)) => {
            let digest = decode_digest(hex.trim());
            if digest.is_none() {
                problem(
                    "secret_sha256 must be 64 hex digits, the SHA-256 of the secret (printf %s \
                     \"$SECRET\" | sha256sum)"
                        .to_owned(),
                );
            }
            digest
        }
        (Some(_), Some(_)) => {
            problem("give secret or secret_sha256, not both".to_owned());
            None
        }
        (None, None) => {
            problem("has no secret: give secret_sha256 (or secret, in clear)".to_owned());
            None
        }
    };
    let limited = entry.key_prefixes.is_some() || entry.queues.is_some();
    if limited && role.is_some_and(|role| role != TokenRole::Write) {
        problem(
            "key_prefixes and queues limit a write token only (a read token writes nothing, an \
             admin token everything)"
                .to_owned(),
        );
        return None;
    }
    let scope = limited.then(|| TokenScope {
        key_prefixes: entry.key_prefixes.clone().unwrap_or_default(),
        queues: entry.queues.clone().unwrap_or_default(),
    });
    Some(AdminToken {
        name: entry.name.clone(),
        role: role?,
        scope,
        digest: digest.filter(|_| name_ok)?,
    })
}

/// Two tokens of one name, or of one secret, are a problem: a name must say who called, and a
/// secret must say which token it is.
fn duplicates(path: &Path, tokens: &[AdminToken], problems: &mut Vec<String>) {
    let mut names = BTreeMap::new();
    let mut secrets = BTreeMap::new();
    for token in tokens {
        if let Some(first) = names.insert(token.name.as_str(), token.name.as_str()) {
            problems.push(format!(
                "{}: the name {first:?} is given to two tokens",
                path.display()
            ));
        }
        if let Some(first) = secrets.insert(token.digest, token.name.as_str()) {
            problems.push(format!(
                "{}: tokens {first:?} and {:?} have the same secret",
                path.display(),
                token.name
            ));
        }
    }
}

/// Checks the token of `admin.token_file` against the tokens file's: the name `token_file` is
/// taken, and its secret must not be one of theirs.
pub(crate) fn clash_with_token_file(single: &AdminToken, tokens: &[AdminToken]) -> Option<String> {
    tokens.iter().find_map(|token| {
        if token.name == TOKEN_FILE_NAME {
            Some(format!(
                "the name {TOKEN_FILE_NAME:?} is the token of admin.token_file: give this token \
                 another name"
            ))
        } else if token.digest == single.digest {
            Some(format!(
                "token {:?} has the same secret as admin.token_file",
                token.name
            ))
        } else {
            None
        }
    })
}

fn valid_name(name: &str) -> bool {
    (1..=MAX_TOKEN_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

fn decode_digest(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(digest)
}

/// Whether users other than the file's owner and group may read `path`.
pub(crate) fn readable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|meta| meta.permissions().mode() & 0o004 != 0)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file
    }

    fn problems(text: &str) -> Vec<String> {
        read_tokens_file(file(text).path()).expect_err("the file should be refused")
    }

    /// SEC-2: a token is its name, role, limits and the digest of its secret, whether the
    /// secret is given in clear or as its digest.
    #[test]
    fn tokens_are_read_with_their_roles_and_limits() {
        let digest = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8";
        let tokens = file(&format!(
            "[[token]]\nname = \"ops\"\nrole = \"admin\"\nsecret = \"s3cret-admin\"\n\n\
             [[token]]\nname = \"worker-1\"\nrole = \"write\"\nsecret_sha256 = \"{digest}\"\n\
             queues = [\"thumbs\"]\n\n[[token]]\nname = \"dash\"\nrole = \"read\"\n\
             secret = \"read-only\"\n"
        ));
        let (tokens, clear) = read_tokens_file(tokens.path()).unwrap();
        assert!(clear);
        assert_eq!(tokens.len(), 3);
        assert_eq!(tokens[0].role, TokenRole::Admin);
        assert_eq!(tokens[0].digest, secret_digest(b"s3cret-admin"));
        // The digest of "password".
        assert_eq!(tokens[1].digest, secret_digest(b"password"));
        assert_eq!(
            tokens[1].scope,
            Some(TokenScope {
                key_prefixes: Vec::new(),
                queues: vec!["thumbs".to_owned()],
            })
        );
        assert_eq!(tokens[2].role, TokenRole::Read);
        assert_eq!(tokens[2].scope, None);
        assert!(TokenRole::Read < TokenRole::Write && TokenRole::Write < TokenRole::Admin);
    }

    /// SEC-2: every broken rule is reported, naming the token, never its secret.
    #[test]
    fn broken_tokens_are_named() {
        let found = problems(
            "[[token]]\nname = \"a\"\nrole = \"writer\"\nsecret = \"hidden-1\"\n\n\
             [[token]]\nname = \"b\"\nrole = \"read\"\nsecret = \"\"\n\n\
             [[token]]\nname = \"c\"\nrole = \"admin\"\nsecret = \"hidden-3\"\nqueues = [\"q\"]\n\n\
             [[token]]\nname = \"bad name\"\nrole = \"read\"\nsecret = \"hidden-4\"\n\n\
             [[token]]\nname = \"e\"\nrole = \"read\"\n",
        );
        let all = found.join("\n");
        for gist in [
            "token[0] (\"a\"): role \"writer\" is none of read, write, admin",
            "token[1] (\"b\"): the secret is empty",
            "token[2] (\"c\"): key_prefixes and queues limit a write token only",
            "token[3] (\"bad name\"): the name must be",
            "token[4] (\"e\"): has no secret",
        ] {
            assert!(all.contains(gist), "no {gist:?} in {all}");
        }
        assert!(!all.contains("hidden"), "a secret shown: {all}");
    }

    /// SEC-2: names and secrets are unique, so that a secret says which token called.
    #[test]
    fn names_and_secrets_are_unique() {
        let found = problems(
            "[[token]]\nname = \"a\"\nrole = \"read\"\nsecret = \"one-secret\"\n\n\
             [[token]]\nname = \"a\"\nrole = \"read\"\nsecret = \"two-secret\"\n\n\
             [[token]]\nname = \"c\"\nrole = \"admin\"\nsecret = \"one-secret\"\n",
        )
        .join("\n");
        assert!(
            found.contains("the name \"a\" is given to two tokens"),
            "{found}"
        );
        assert!(
            found.contains("tokens \"a\" and \"c\" have the same secret"),
            "{found}"
        );
        assert!(!found.contains("one-secret"), "{found}");
    }

    /// A file that is not TOML, names an unknown field, or names no token is refused.
    #[test]
    fn malformed_files_are_refused() {
        assert!(problems("[[token]\n")[0].contains("is not a tokens file"));
        assert!(
            problems("[[token]]\nname = \"a\"\nrole = \"read\"\nsecret = \"x\"\nsecrte = 1\n")[0]
                .contains("unknown field")
        );
        assert!(problems("")[0].contains("names no token"));
    }

    /// A write token limited to queues writes no key unless it names key prefixes too.
    #[test]
    fn scopes_cover_what_they_name() {
        let scope = TokenScope {
            key_prefixes: vec!["jobs/".to_owned()],
            queues: vec!["thumbs".to_owned()],
        };
        assert!(scope.covers_key("jobs/1"));
        assert!(!scope.covers_key("job"));
        assert!(scope.covers_queue("thumbs"));
        assert!(!scope.covers_queue("thumbs2"));
        let everything = TokenScope {
            key_prefixes: vec![String::new()],
            queues: Vec::new(),
        };
        assert!(everything.covers_key("any"));
        assert!(!everything.covers_queue("default"));
    }
}
