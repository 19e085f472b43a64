//! Who may call what on the admin API (SEC-2, issue 26 item 2): the named tokens in force,
//! swapped whole on SIGHUP, and the rule of each endpoint: the role it needs and, for a write
//! token limited to key prefixes or queues, whether the key or queue is covered.
//!
//! A presented secret is hashed and its digest compared with every token's, each comparison
//! running to the end and none skipped once one matched, so the time an answer takes says
//! nothing about which token, or how much of one, was guessed. Only digests are held.
//!
//! The roles nest (`admin` ⊇ `write` ⊇ `read`); a token's limits apply to mutations only: a
//! limited write token reads what a read token reads.

use std::sync::{Arc, PoisonError, RwLock};

use conclave_config::{AdminToken, TokenRole, TokenScope, secret_digest};

/// The tokens in force, shared by the admin API's workers and whoever reloads them (the
/// node's handle, on SIGHUP). Cheap to clone; every clone sees a replacement at once.
#[derive(Debug, Clone, Default)]
pub struct AdminTokens {
    current: Arc<RwLock<Arc<TokenSet>>>,
}

impl AdminTokens {
    /// A cell holding `tokens`.
    pub fn new(tokens: Vec<AdminToken>) -> Self {
        Self {
            current: Arc::new(RwLock::new(Arc::new(TokenSet::new(tokens)))),
        }
    }

    /// Puts `tokens` in force: a request admitted from now on is checked against them.
    pub fn replace(&self, tokens: Vec<AdminToken>) {
        let set = Arc::new(TokenSet::new(tokens));
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = set;
    }

    /// The tokens in force now (a request keeps the set it was admitted with).
    pub(super) fn set(&self) -> Arc<TokenSet> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// One generation of tokens.
#[derive(Debug, Default)]
pub(super) struct TokenSet {
    tokens: Vec<Arc<AdminToken>>,
}

impl TokenSet {
    fn new(tokens: Vec<AdminToken>) -> Self {
        Self {
            tokens: tokens.into_iter().map(Arc::new).collect(),
        }
    }

    /// Whether no token is configured: then the API is open, as it was before tokens.
    pub(super) fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The token whose secret is `presented`, if any. Every token's digest is compared in
    /// full: no early exit tells by its timing which one matched.
    pub(super) fn authenticate(&self, presented: &[u8]) -> Option<Arc<AdminToken>> {
        let digest = secret_digest(presented);
        let mut found = None;
        for token in &self.tokens {
            if constant_time_eq(&digest, &token.digest) {
                found = Some(Arc::clone(token));
            }
        }
        found
    }
}

/// Compares without stopping at the first difference, so response time says nothing about
/// how much of a guessed value was right.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who a request comes from: a token, or nobody (no token configured, or a read that needs
/// none and presented none).
#[derive(Debug, Clone, Default)]
pub(super) struct Caller {
    token: Option<Arc<AdminToken>>,
}

impl Caller {
    pub(super) fn anonymous() -> Self {
        Self { token: None }
    }

    pub(super) fn token(token: Arc<AdminToken>) -> Self {
        Self { token: Some(token) }
    }

    /// The name a log line shows: the token's, or `-` when the request carried none.
    pub(super) fn name(&self) -> &str {
        self.token.as_ref().map_or("-", |token| token.name.as_str())
    }

    /// The role of the token, if the request carried one.
    pub(super) fn role(&self) -> Option<TokenRole> {
        self.token.as_ref().map(|token| token.role)
    }

    /// The limits of a limited write token; `None` for every other caller.
    fn scope(&self) -> Option<&TokenScope> {
        self.token.as_ref().and_then(|token| token.scope.as_ref())
    }

    /// Whether the caller may change `key`: `Err` with the refusal's message if not.
    pub(super) fn may_write_key(&self, what: &str, key: &str) -> Result<(), String> {
        match self.scope() {
            Some(scope) if !scope.covers_key(key) => Err(format!(
                "token {:?} has role write, limited to keys under {}; {what} on key {key:?} \
                 needs a write token whose key_prefixes cover it, or admin",
                self.name(),
                listed(&scope.key_prefixes),
            )),
            _ => Ok(()),
        }
    }

    /// Whether the caller may change the jobs of `queue`: `Err` with the refusal's message if
    /// not.
    pub(super) fn may_use_queue(&self, what: &str, queue: &str) -> Result<(), String> {
        match self.scope() {
            Some(scope) if !scope.covers_queue(queue) => Err(format!(
                "token {:?} has role write, limited to the queues {}; {what} on queue {queue:?} \
                 needs a write token whose queues include it, or admin",
                self.name(),
                listed(&scope.queues),
            )),
            _ => Ok(()),
        }
    }

    /// Whether the caller's queues are limited (an ack must then look up its job's queue).
    pub(super) fn queues_limited(&self) -> bool {
        self.scope().is_some()
    }
}

/// `["a", "b"]`, or `none` for an empty list.
fn listed(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        format!("{items:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(name: &str, role: TokenRole, secret: &str) -> AdminToken {
        AdminToken {
            name: name.to_owned(),
            role,
            scope: None,
            digest: secret_digest(secret.as_bytes()),
        }
    }

    #[test]
    fn comparison_runs_to_the_end() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secre"));
    }

    /// SEC-2: a secret names its token; an unknown one none; a reload replaces the set for
    /// every clone of the cell.
    #[test]
    fn secrets_name_their_tokens_and_reloads_replace_them() {
        let cell = AdminTokens::new(vec![
            token("ops", TokenRole::Admin, "one"),
            token("dash", TokenRole::Read, "two"),
        ]);
        let seen = cell.clone();
        let found = seen.set().authenticate(b"two").map(|t| t.name.clone());
        assert_eq!(found.as_deref(), Some("dash"));
        assert!(seen.set().authenticate(b"three").is_none());
        assert!(seen.set().authenticate(b"").is_none());
        cell.replace(vec![token("new", TokenRole::Write, "three")]);
        assert!(seen.set().authenticate(b"two").is_none());
        let found = seen.set().authenticate(b"three").map(|t| t.name.clone());
        assert_eq!(found.as_deref(), Some("new"));
        assert!(AdminTokens::default().set().is_empty());
    }

    /// SEC-2: a limited write token may change only what its lists cover.
    #[test]
    fn limits_refuse_naming_the_token() {
        let mut worker = token("worker-1", TokenRole::Write, "w");
        worker.scope = Some(TokenScope {
            key_prefixes: vec!["app/".to_owned()],
            queues: vec!["thumbs".to_owned()],
        });
        let caller = Caller::token(Arc::new(worker));
        assert!(caller.may_write_key("PUT", "app/x").is_ok());
        let refused = caller.may_write_key("PUT", "other").unwrap_err();
        assert!(refused.contains("\"worker-1\""), "{refused}");
        assert!(caller.may_use_queue("claim", "thumbs").is_ok());
        assert!(caller.may_use_queue("claim", "default").is_err());
        let open = Caller::token(Arc::new(token("w", TokenRole::Write, "x")));
        assert!(open.may_write_key("PUT", "other").is_ok());
        assert!(!open.queues_limited());
    }
}
