//! Bounded lists (`GET /v1/kv`, `GET /v1/jobs`): a page of at most `limit` items and, when more
//! follow, an opaque `continue` token that reads the next page — etcd's range `limit` and
//! Kubernetes' `continue`. A page is read at its own revision: items written between two
//! pages appear in the later one if they sort after where it starts.

/// Items a page holds when the request names no `limit`.
pub const DEFAULT_PAGE_LIMIT: usize = 100;
/// The largest `limit` a list takes.
pub const MAX_PAGE_LIMIT: usize = 1000;
/// Entries `GET /v1/log` returns when the request names no `limit`.
pub const LOG_DEFAULT_LIMIT: usize = 100;
/// The largest `limit` `GET /v1/log` takes.
pub const LOG_MAX_LIMIT: usize = 1000;

/// Where the next page starts: after this key, or after this job. Clients pass the token back
/// as they got it; its spelling is not part of the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Continuation {
    /// A key list goes on after this key.
    AfterKey(String),
    /// A job list goes on after this job id.
    AfterJob(u64),
}

/// A `continue` that is no token of the list it was given to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinuationError {
    /// What the list expected.
    pub expected: &'static str,
}

impl std::fmt::Display for ContinuationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "continue is not a token of {}: pass back the `continue` of the previous page \
             unchanged",
            self.expected
        )
    }
}

impl std::error::Error for ContinuationError {}

impl Continuation {
    /// The token as an answer carries it: `k` and the key's bytes in hex, or `j` and the id.
    pub fn encode(&self) -> String {
        match self {
            Self::AfterKey(key) => {
                let mut token = String::with_capacity(1 + 2 * key.len());
                token.push('k');
                for byte in key.bytes() {
                    token.push(char::from(HEX[usize::from(byte >> 4)]));
                    token.push(char::from(HEX[usize::from(byte & 0xf)]));
                }
                token
            }
            Self::AfterJob(id) => format!("j{id}"),
        }
    }

    /// The key a key list's token continues after.
    pub fn decode_key(token: &str) -> Result<String, ContinuationError> {
        let error = ContinuationError {
            expected: "a key list",
        };
        let hex = token.strip_prefix('k').ok_or(error.clone())?;
        if hex.len() % 2 != 0 {
            return Err(error);
        }
        let bytes = hex
            .as_bytes()
            .chunks(2)
            .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
            .collect::<Option<Vec<u8>>>()
            .ok_or(error.clone())?;
        String::from_utf8(bytes).map_err(|_| error)
    }

    /// The job id a job list's token continues after.
    pub fn decode_job(token: &str) -> Result<u64, ContinuationError> {
        token
            .strip_prefix('j')
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse().ok())
            .ok_or(ContinuationError {
                expected: "a job list",
            })
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn nibble(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any key survives the round trip, spaces, slashes and non-ASCII included, and the
    /// token needs no escaping in a query string.
    #[test]
    fn key_tokens_round_trip() {
        for key in ["a", "config/db url", "ключ/ü", ""] {
            let token = Continuation::AfterKey(key.to_owned()).encode();
            assert!(token.bytes().all(|b| b.is_ascii_alphanumeric()), "{token}");
            assert_eq!(Continuation::decode_key(&token).as_deref(), Ok(key));
        }
    }

    /// A job list's token is no key list's, nor the reverse, and garbage is refused.
    #[test]
    fn tokens_are_refused_by_the_other_list_and_garbage_is_refused() {
        let job = Continuation::AfterJob(42).encode();
        assert_eq!(Continuation::decode_job(&job), Ok(42));
        assert!(Continuation::decode_key(&job).is_err());
        let key = Continuation::AfterKey("x".to_owned()).encode();
        assert!(Continuation::decode_job(&key).is_err());
        for garbage in ["", "k6", "kzz", "k%", "j", "j-1", "jx", "k80"] {
            assert!(
                Continuation::decode_key(garbage).is_err()
                    && Continuation::decode_job(garbage).is_err(),
                "{garbage:?}"
            );
        }
    }
}
