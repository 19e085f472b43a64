//! A small blocking client of the admin API, for the CLI's client commands.
//!
//! Requests and answers are the types of `conclave-api`, the same types the node reads and
//! writes. Every error names the URL that failed and what to do about it; an answer that is
//! not conclave's (the metrics port, another service) is reported as such. Every mutation
//! carries how long this client still waits (`conclave-timeout-ms`), which the node counts
//! from when it reads the request, so a node that gets to it only later refuses it instead of
//! carrying it out unasked, and a node whose clock is wrong still takes it. A request a
//! follower refuses with `not_leader`, naming the leader's admin API, can be sent there
//! instead ([`AdminClient::follow_leader`]).

use std::time::Duration;

use conclave_api::{ErrorAnswer, ErrorCode, HTTPS_ONLY_ANSWER, TIMEOUT_HEADER};
use conclave_config::settings::admin_url;
use ureq::tls::{RootCerts, TlsConfig};

use crate::client_tls::TlsArgs;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The most of an unexpected answer an error message quotes.
const QUOTE: usize = 120;

/// Why a client command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// `--admin` (or an endpoint) is not an address; the reason quotes it.
    #[error("{reason} (check --admin, CONCLAVE_ADMIN and --endpoints)")]
    BadAddress { reason: String },
    /// Nothing answers at the address.
    #[error(
        "cannot reach the admin API at {url}: {reason} (is `conclave run` running there? point \
         --admin or CONCLAVE_ADMIN at its admin.listen address)"
    )]
    Unreachable { url: String, reason: String },
    /// A node named another as the leader, and that one did not answer: it may have just
    /// died, with a new leader being elected.
    #[error(
        "{via} names {url} as the leader's admin API, but it does not answer: {reason} (the \
         leader may have just stopped and another be elected; run the command again)"
    )]
    LeaderUnreachable {
        via: String,
        url: String,
        reason: String,
    },
    /// Something answered, but not a conclave admin API.
    #[error(
        "{url} answered {status} but is not a conclave admin API ({what}); point --admin at the \
         node's admin.listen address, not its metrics endpoint or another service"
    )]
    NotConclave {
        url: String,
        status: u16,
        what: String,
    },
    /// The node answered with an error.
    #[error("{url} refused ({status} {}): {}{}", answer.error, answer.message, refusal_hint(answer))]
    Refused {
        url: String,
        status: u16,
        answer: Box<ErrorAnswer>,
    },
    /// An `http://` URL reached a listener with TLS, which answered so.
    #[error("{url} is a listener with TLS: use https:// with --cacert (it answered: {said})")]
    HttpsOnly { url: String, said: String },
    /// `--cacert`, `--cert` or `--key` cannot be used, or an `https://` URL has no CA to
    /// check the node against.
    #[error("{reason}")]
    Tls { reason: String },
    /// The answer was conclave's but not what this version of the CLI reads.
    #[error(
        "unexpected answer from {url}: {reason} (is the node a different version of conclave?)"
    )]
    Malformed { url: String, reason: String },
}

/// What the CLI adds to a refusal the node's message cannot know how to fix from the CLI.
fn refusal_hint(answer: &ErrorAnswer) -> &'static str {
    match answer.error {
        ErrorCode::Forbidden => {
            " (the token given with --token or CONCLAVE_ADMIN_TOKEN is known but does not cover \
             this; use a token with the role named, or ask for one)"
        }
        _ => "",
    }
}

impl ClientError {
    /// The exit code: 69 when the API cannot be reached, 75 when the leader a node named does
    /// not answer (run again), 64 for a bad address (`http://` to a TLS listener included),
    /// else 1.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            ClientError::Unreachable { .. } => crate::EXIT_UNAVAILABLE,
            ClientError::LeaderUnreachable { .. } => crate::EXIT_TEMPFAIL,
            ClientError::BadAddress { .. }
            | ClientError::HttpsOnly { .. }
            | ClientError::Tls { .. } => crate::EXIT_USAGE,
            _ => 1,
        }
    }

    /// The exit code of a client command that failed with this: 75 for what may work when
    /// run again (a transient refusal, or any 503 and above), 64 for a request the node found
    /// malformed (400), 1 for another refusal, else [`ClientError::exit_code`].
    pub(crate) fn command_exit_code(&self) -> u8 {
        match self.refusal() {
            Some(answer) if answer.error.is_transient() || answer.status() >= 503 => {
                crate::EXIT_TEMPFAIL
            }
            Some(answer) if answer.status() == 400 => crate::EXIT_USAGE,
            Some(_) => 1,
            None => self.exit_code(),
        }
    }

    /// The node's error answer, when it refused.
    pub(crate) fn refusal(&self) -> Option<&ErrorAnswer> {
        match self {
            ClientError::Refused { answer, .. } => Some(answer),
            _ => None,
        }
    }
}

/// Redirects to the leader followed at most: the leader may change meanwhile.
const MAX_REDIRECTS: usize = 3;

/// A client of one node's admin API.
pub(crate) struct AdminClient {
    base: String,
    token: Option<String>,
    timeout: Duration,
    /// ADMIN-TLS: the CA, and the client certificate, for `https://` nodes.
    tls: Option<TlsConfig>,
}

impl AdminClient {
    /// A client of the admin API at `admin`: `http://host:port` or `host:port`.
    pub(crate) fn new(
        admin: &str,
        token: Option<String>,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let base = admin_url(admin.trim()).map_err(|reason| ClientError::BadAddress { reason })?;
        Ok(Self {
            base,
            token,
            timeout,
            tls: None,
        })
    }

    /// The same client, talking TLS as `tls` (`--cacert`, `--cert`, `--key`) says. An
    /// `https://` node needs `--cacert`.
    pub(crate) fn with_tls(mut self, tls: &TlsArgs) -> Result<Self, ClientError> {
        self.tls = tls.config().map_err(|reason| ClientError::Tls { reason })?;
        self.check_tls()?;
        Ok(self)
    }

    /// An `https://` node without a CA to check it against is refused before any request.
    fn check_tls(&self) -> Result<(), ClientError> {
        let has_ca = self
            .tls
            .as_ref()
            .is_some_and(|tls| matches!(tls.root_certs(), RootCerts::Specific(_)));
        if self.base.starts_with("https://") && !has_ca {
            return Err(ClientError::Tls {
                reason: format!(
                    "{} speaks TLS: give the CA that signed its certificate with --cacert FILE \
                     (or CONCLAVE_CACERT)",
                    self.base
                ),
            });
        }
        Ok(())
    }

    /// A client of another node with the same token and timeout.
    pub(crate) fn other(&self, admin: &str) -> Result<Self, ClientError> {
        let other = Self {
            tls: self.tls.clone(),
            ..Self::new(admin, self.token.clone(), self.timeout)?
        };
        other.check_tls()?;
        Ok(other)
    }

    /// The API's base URL, `http://host:port`.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    fn agent(&self, timeout: Duration) -> ureq::Agent {
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false);
        if let Some(tls) = &self.tls {
            config = config.tls_config(tls.clone());
        }
        config.build().into()
    }

    /// GET `path`.
    pub(crate) fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.request::<(), T>("GET", path, None, Duration::ZERO)
    }

    /// GET `path` for a binary answer of type `media` (a saved snapshot): its bytes, read to
    /// the end however many there are. An error answer is reported as [`AdminClient::get`]
    /// reports it; a JSON answer where bytes were expected is malformed.
    pub(crate) fn get_binary(&self, path: &str, media: &str) -> Result<Vec<u8>, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.agent(self.timeout).get(&url);
        if let Some(token) = &self.token {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        let mut response = request.call().map_err(|err| unreachable(&url, &err))?;
        let binary = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with(media));
        if response.status().is_success() && binary {
            return response
                .body_mut()
                .with_config()
                .limit(u64::MAX)
                .read_to_vec()
                .map_err(|err| ClientError::Malformed {
                    url: url.clone(),
                    reason: format!("the answer was cut short: {err}"),
                });
        }
        let _: serde::de::IgnoredAny = answer(&url, response)?;
        Err(ClientError::Malformed {
            url,
            reason: format!("a JSON answer where {media} was expected"),
        })
    }

    /// POST `body` to `path`, waiting for the answer `extra` longer than the usual timeout
    /// (for a command that itself waits); the node refuses to start it after this client
    /// stops waiting.
    pub(crate) fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        extra: Duration,
    ) -> Result<T, ClientError> {
        self.request("POST", path, Some(body), extra)
    }

    /// `method path` with `body` as JSON, if any. Every method but GET is a mutation and
    /// carries its deadline. Reads need the token where the API listens beyond loopback, so
    /// the token goes with every request.
    pub(crate) fn request<B: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&B>,
        extra: Duration,
    ) -> Result<T, ClientError> {
        let url = format!("{}{path}", self.base);
        let timeout = self.timeout + extra;
        let agent = self.agent(timeout);
        let bearer = self.token.as_ref().map(|token| format!("Bearer {token}"));
        let waits_ms = timeout.as_millis().to_string();
        let response = match method {
            "GET" => {
                let mut request = agent.get(&url);
                if let Some(bearer) = &bearer {
                    request = request.header("Authorization", bearer);
                }
                request.call()
            }
            "DELETE" => {
                let mut request = agent.delete(&url).header(TIMEOUT_HEADER, &waits_ms);
                if let Some(bearer) = &bearer {
                    request = request.header("Authorization", bearer);
                }
                request.call()
            }
            _ => {
                let mut request = if method == "PUT" {
                    agent.put(&url)
                } else {
                    agent.post(&url)
                }
                .header(TIMEOUT_HEADER, &waits_ms);
                if let Some(bearer) = &bearer {
                    request = request.header("Authorization", bearer);
                }
                match body {
                    Some(body) => request.send_json(body),
                    None => request.send_empty(),
                }
            }
        }
        .map_err(|err| unreachable(&url, &err))?;
        answer(&url, response)
    }

    /// `method path` answered by a stream of server-sent events: the open stream, to be read
    /// a line at a time, or the node's error answer. A read that waits longer than
    /// `idle` for the next bytes fails (a node gone silent is noticed), and the whole stream
    /// ends after `total` when given. Mutations carry a deadline as [`AdminClient::request`]
    /// does: the moment this client stops waiting for the stream to start.
    pub(crate) fn open_stream(
        &self,
        method: &str,
        path: &str,
        idle: Duration,
        total: Option<Duration>,
    ) -> Result<impl std::io::BufRead + use<>, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut config = ureq::Agent::config_builder()
            .timeout_connect(Some(self.timeout))
            .timeout_recv_response(Some(self.timeout))
            .timeout_per_read(Some(idle))
            .timeout_global(total)
            .http_status_as_error(false);
        if let Some(tls) = &self.tls {
            config = config.tls_config(tls.clone());
        }
        let agent: ureq::Agent = config.build().into();
        let bearer = self.token.as_ref().map(|token| format!("Bearer {token}"));
        let response = if method == "GET" {
            let mut request = agent.get(&url);
            if let Some(bearer) = &bearer {
                request = request.header("Authorization", bearer);
            }
            request.call()
        } else {
            let waits_ms = self.timeout.as_millis().to_string();
            let mut request = agent.post(&url).header(TIMEOUT_HEADER, &waits_ms);
            if let Some(bearer) = &bearer {
                request = request.header("Authorization", bearer);
            }
            request.send_empty()
        }
        .map_err(|err| unreachable(&url, &err))?;
        let events = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if response.status().is_success() && events {
            return Ok(std::io::BufReader::new(response.into_body().into_reader()));
        }
        let _: serde::de::IgnoredAny = answer(&url, response)?;
        Err(ClientError::Malformed {
            url,
            reason: "a JSON answer where a stream of events was expected".to_owned(),
        })
    }

    /// Runs `call` on this node and, while a node refuses with `not_leader` naming the
    /// leader's admin API, on that one instead (at most [`MAX_REDIRECTS`] hops); `moved` is
    /// told of each hop, for the user.
    pub(crate) fn follow_leader<T>(
        &self,
        mut call: impl FnMut(&AdminClient) -> Result<T, ClientError>,
        mut moved: impl FnMut(&ErrorAnswer, &str),
    ) -> Result<T, ClientError> {
        let mut hops = 0;
        let mut other: Option<AdminClient> = None;
        // The node whose redirect led to `other`.
        let mut previous = self.base.clone();
        loop {
            let client = other.as_ref().unwrap_or(self);
            let err = match (call(client), &other) {
                (Err(ClientError::Unreachable { reason, .. }), Some(leader)) => {
                    return Err(ClientError::LeaderUnreachable {
                        via: previous.clone(),
                        url: leader.base.clone(),
                        reason,
                    });
                }
                (Err(err), _) => err,
                (done, _) => return done,
            };
            let Some(url) = err
                .refusal()
                .filter(|answer| answer.error == ErrorCode::NotLeader)
                .and_then(|answer| answer.leader_admin_url.clone())
            else {
                return Err(err);
            };
            let next = self.other(&url)?;
            if hops == MAX_REDIRECTS || next.base == client.base {
                return Err(err);
            }
            if let Some(answer) = err.refusal() {
                moved(answer, &url);
            }
            hops += 1;
            client.base.clone_into(&mut previous);
            other = Some(next);
        }
    }
}

// A plain-HTTP request to a node with admin.tls is answered (400, [`HTTPS_ONLY_ANSWER`]), not
// dropped, so a failure here is no sign of a wrong scheme and needs no hint about one.
fn unreachable(url: &str, err: &ureq::Error) -> ClientError {
    ClientError::Unreachable {
        url: url.to_owned(),
        reason: err.to_string(),
    }
}

/// The start of `text` on one line, for an error message.
fn quote(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > QUOTE {
        format!("{}…", line.chars().take(QUOTE).collect::<String>())
    } else {
        line
    }
}

fn answer<T: DeserializeOwned>(
    url: &str,
    mut response: ureq::http::Response<ureq::Body>,
) -> Result<T, ClientError> {
    let status = response.status().as_u16();
    let json = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|err| ClientError::Malformed {
            url: url.to_owned(),
            reason: err.to_string(),
        })?;
    let not_conclave = |what: String| ClientError::NotConclave {
        url: url.to_owned(),
        status,
        what,
    };
    // A listener with TLS asked in plain HTTP says so in plain text: pass its line on with
    // what to do from the CLI.
    if status == 400 && body.starts_with(HTTPS_ONLY_ANSWER) {
        return Err(ClientError::HttpsOnly {
            url: url.to_owned(),
            // One line, as the node writes it, but bounded: whatever starts so is quoted.
            said: body
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(4 * QUOTE)
                .collect(),
        });
    }
    if !json {
        return Err(not_conclave(if body.trim().is_empty() {
            "an empty answer".to_owned()
        } else {
            format!("it said {:?}", quote(&body))
        }));
    }
    if (200..300).contains(&status) {
        return serde_json::from_str(&body).map_err(|err| ClientError::Malformed {
            url: url.to_owned(),
            reason: err.to_string(),
        });
    }
    match serde_json::from_str::<ErrorAnswer>(&body) {
        Ok(answer) => Err(ClientError::Refused {
            url: url.to_owned(),
            status,
            answer: Box::new(answer),
        }),
        Err(_) => Err(not_conclave(format!("its JSON was {:?}", quote(&body)))),
    }
}
