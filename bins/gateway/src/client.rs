//! A small blocking client of the admin API, for the CLI's client commands.

use std::time::Duration;

use serde_json::Value;

/// How long a client command waits for the node.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Why a client command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// Nothing answers at the address.
    #[error(
        "cannot reach the admin API at {url}: {reason} (is `conclave run` running there? set --admin)"
    )]
    Unreachable { url: String, reason: String },
    /// The node answered with an error.
    #[error("{status}: {message}")]
    Refused { status: u16, message: String },
    /// The answer was not the JSON the API sends.
    #[error("unexpected answer from {url}: {reason}")]
    Malformed { url: String, reason: String },
}

/// A client of one node's admin API.
pub(crate) struct AdminClient {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

impl AdminClient {
    pub(crate) fn new(base: &str, token: Option<String>) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token,
            agent,
        }
    }

    pub(crate) fn get(&self, path: &str) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let response = self
            .agent
            .get(&url)
            .call()
            .map_err(|err| unreachable(&url, &err))?;
        answer(&url, response)
    }

    pub(crate) fn post(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.agent.post(&url);
        if let Some(token) = &self.token {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        let response = request
            .send_json(body)
            .map_err(|err| unreachable(&url, &err))?;
        answer(&url, response)
    }
}

fn unreachable(url: &str, err: &ureq::Error) -> ClientError {
    ClientError::Unreachable {
        url: url.to_owned(),
        reason: err.to_string(),
    }
}

fn answer(url: &str, mut response: ureq::http::Response<ureq::Body>) -> Result<Value, ClientError> {
    let status = response.status().as_u16();
    let body: Value = response
        .body_mut()
        .read_json()
        .map_err(|err| ClientError::Malformed {
            url: url.to_owned(),
            reason: err.to_string(),
        })?;
    if (200..300).contains(&status) {
        return Ok(body);
    }
    let mut message = body
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("the node refused the request")
        .to_owned();
    if let Some(leader) = body.get("leader").and_then(Value::as_str) {
        if !message.contains(leader) {
            message.push_str(&format!(" (leader: {leader})"));
        }
    }
    Err(ClientError::Refused { status, message })
}
