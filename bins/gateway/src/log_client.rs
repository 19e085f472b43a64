//! `conclave kv` and `conclave jobs`: the replicated log's key-value store and job queue
//! through a node's admin API (LOG-1, LOG-8).
//!
//! Any node may be named with `--admin`: a write, or a linearizable read, that reaches a node
//! that does not lead is answered 421 with the leader's admin URL, and the request is sent
//! there instead (up to [`MAX_REDIRECTS`] hops, as the leader may change meanwhile). A write
//! carries a request id — the one given with `--request-id`, or one made up here — so that
//! sending it again after an answer that did not arrive applies it at most once (LOG-6).
//!
//! Exit codes: 0 when the node did it; 1 when it answered no (absent key, failed compare, no
//! job ready, a job the worker does not hold, a retry or purge of a job that is not dead); 69 when no node answered; 75 when the cluster
//! could not say in time (no leader, the write's outcome unknown: run it again).

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use conclave_actors::admin::api::DEADLINE_HEADER;
use conclave_actors::events::unix_millis;
use conclave_config::settings::admin_url;
use serde_json::{Value, json};

use crate::cli::{ClientArgs, JobsCommand, KvCommand};
use crate::output::{errln, outln};

/// Redirects followed at most.
const MAX_REDIRECTS: usize = 3;

/// What a node answered.
struct Answer {
    status: u16,
    body: Value,
    url: String,
}

/// Why no answer came.
enum Failure {
    /// Nothing answered at `url`.
    Unreachable { url: String, reason: String },
    /// `--admin` is not an address.
    BadAddress(String),
}

impl Failure {
    fn report(&self) -> ExitCode {
        match self {
            Failure::Unreachable { url, reason } => {
                errln!(
                    "error: cannot reach the admin API at {url}: {reason} (is `conclave run` \
                     running there? point --admin or CONCLAVE_ADMIN at its admin.listen address)"
                );
                ExitCode::from(crate::EXIT_UNAVAILABLE)
            }
            Failure::BadAddress(reason) => {
                errln!("error: {reason} (check --admin and CONCLAVE_ADMIN)");
                ExitCode::from(crate::EXIT_USAGE)
            }
        }
    }
}

/// One HTTP client bound to `--admin`, `--token` and `--timeout`.
struct LogClient {
    base: String,
    token: Option<String>,
    timeout: Duration,
}

impl LogClient {
    fn new(cli: &ClientArgs) -> Result<Self, Failure> {
        Ok(Self {
            base: admin_url(cli.admin.trim()).map_err(Failure::BadAddress)?,
            token: cli.token.clone(),
            // A write waits for its entry to be applied; the node answers within 10 s.
            timeout: Duration::from_secs(cli.timeout).max(Duration::from_secs(12)),
        })
    }

    /// Sends `method path` (with `body` as JSON), following the not-leader redirect.
    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Answer, Failure> {
        let mut base = self.base.clone();
        for _ in 0..=MAX_REDIRECTS {
            let answer = self.once(&base, method, path, body)?;
            if answer.status != 421 {
                return Ok(answer);
            }
            match answer
                .body
                .get("leader_admin_url")
                .and_then(Value::as_str)
                .map(admin_url)
            {
                Some(Ok(leader)) if leader != base => base = leader,
                // No leader known, or no URL for it: the caller reports the 421.
                _ => return Ok(answer),
            }
        }
        self.once(&base, method, path, body)
    }

    fn once(
        &self,
        base: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Failure> {
        let url = format!("{base}{path}");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let deadline = unix_millis(SystemTime::now() + self.timeout).to_string();
        let bearer = self.token.as_ref().map(|token| format!("Bearer {token}"));
        let unreachable = |err: ureq::Error| Failure::Unreachable {
            url: url.clone(),
            reason: err.to_string(),
        };
        let response = match (method, body) {
            ("GET", _) => {
                let mut request = agent.get(&url);
                if let Some(bearer) = &bearer {
                    request = request.header("Authorization", bearer);
                }
                request.call()
            }
            ("DELETE", _) => {
                let mut request = agent.delete(&url).header(DEADLINE_HEADER, &deadline);
                if let Some(bearer) = &bearer {
                    request = request.header("Authorization", bearer);
                }
                request.call()
            }
            (method, body) => {
                let mut request = if method == "PUT" {
                    agent.put(&url)
                } else {
                    agent.post(&url)
                }
                .header(DEADLINE_HEADER, &deadline);
                if let Some(bearer) = &bearer {
                    request = request.header("Authorization", bearer);
                }
                request.send_json(body.cloned().unwrap_or(Value::Null))
            }
        }
        .map_err(unreachable)?;
        let status = response.status().as_u16();
        let mut response = response;
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok(Answer { status, body, url })
    }
}

/// A request id for a write the user gave none for: unique enough across clients and retries.
fn made_up_request_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("cli-{}-{nanos:x}", std::process::id())
}

/// Percent-encodes a key for a URL path (every byte but unreserved ones and `/`).
fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for byte in key.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(char::from(byte));
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// Runs `conclave kv ...`.
pub(crate) fn kv(cli: &ClientArgs, command: &KvCommand) -> ExitCode {
    let client = match LogClient::new(cli) {
        Ok(client) => client,
        Err(failure) => return failure.report(),
    };
    let result = match command {
        KvCommand::Put {
            key,
            value,
            if_revision,
            if_value,
            request_id,
        } => {
            let value = match crate::input::value("VALUE", value) {
                Ok(value) => value,
                Err(err) => return input_failure(&err),
            };
            let mut body = json!({
                "value": value,
                "request_id": request_id.clone().unwrap_or_else(made_up_request_id),
            });
            if let Some(revision) = if_revision {
                body["if_revision"] = json!(revision);
            }
            if let Some(expected) = if_value {
                body["if_value"] = json!(expected);
            }
            client.send("PUT", &format!("/v1/kv/{}", encode_key(key)), Some(&body))
        }
        KvCommand::Get { key, stale } => {
            let query = if *stale { "?stale=true" } else { "" };
            client.send("GET", &format!("/v1/kv/{}{query}", encode_key(key)), None)
        }
        KvCommand::Del {
            key,
            if_revision,
            request_id,
        } => {
            let id = request_id.clone().unwrap_or_else(made_up_request_id);
            let mut query = format!("?request_id={}", encode_key(&id));
            if let Some(revision) = if_revision {
                query.push_str(&format!("&if_revision={revision}"));
            }
            client.send(
                "DELETE",
                &format!("/v1/kv/{}{query}", encode_key(key)),
                None,
            )
        }
        KvCommand::Watch { key, from } => return watch(cli, &client, key, *from),
        KvCommand::List { prefix, stale } => {
            let mut query = format!("?prefix={}", encode_key(prefix.as_deref().unwrap_or("")));
            if *stale {
                query.push_str("&stale=true");
            }
            client.send("GET", &format!("/v1/kv{query}"), None)
        }
    };
    finish(cli, result, |answer| match command {
        KvCommand::Get { .. } => {
            outln!(
                "{}",
                answer
                    .body
                    .get("value")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            );
        }
        KvCommand::List { .. } => {
            let items = answer.body.get("items").and_then(Value::as_array);
            for item in items.into_iter().flatten() {
                outln!(
                    "{} = {}",
                    item.get("key").and_then(Value::as_str).unwrap_or(""),
                    item.get("value").and_then(Value::as_str).unwrap_or("")
                );
            }
        }
        KvCommand::Watch { .. } => {}
        KvCommand::Put { key, .. } | KvCommand::Del { key, .. } => {
            outln!(
                "{key}: revision {}",
                answer.body.get("revision").cloned().unwrap_or(Value::Null)
            );
        }
    })
}

/// `conclave kv watch KEY`: prints each change of the key as the node's stream brings it.
fn watch(cli: &ClientArgs, client: &LogClient, key: &str, from: Option<u64>) -> ExitCode {
    let from = match from {
        Some(from) => from,
        None => {
            // From now on: the store's revision after the latest change.
            let path = format!("/v1/kv?prefix={}&stale=true", encode_key(key));
            match client.send("GET", &path, None) {
                Ok(answer) if answer.status == 200 => {
                    answer.body["revision"].as_u64().unwrap_or(0) + 1
                }
                Ok(answer) => return finish(cli, Ok(answer), |_| {}),
                Err(failure) => return failure.report(),
            }
        }
    };
    let url = format!("{}/v1/kv/{}?watch={from}", client.base, encode_key(key));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.get(&url);
    if let Some(token) = &client.token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let response = match request.call() {
        Ok(response) => response,
        Err(err) => {
            return Failure::Unreachable {
                url,
                reason: err.to_string(),
            }
            .report();
        }
    };
    if response.status().as_u16() != 200 {
        let status = response.status().as_u16();
        let mut response = response;
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        return finish(cli, Ok(Answer { status, body, url }), |_| {});
    }
    let reader = std::io::BufReader::new(response.into_body().into_reader());
    let mut event = String::new();
    for line in std::io::BufRead::lines(reader) {
        let Ok(line) = line else { break };
        if let Some(name) = line.strip_prefix("event: ") {
            event = name.to_owned();
        } else if let Some(data) = line.strip_prefix("data: ") {
            let data: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            if cli.json {
                outln!("{}", json!({ "event": event, "data": data }));
                continue;
            }
            match event.as_str() {
                "put" => outln!(
                    "put {} @{}",
                    data["value"].as_str().unwrap_or(""),
                    data["mod_revision"]
                ),
                "delete" => outln!("delete @{}", data["revision"]),
                "compacted" => {
                    errln!(
                        "error: revision {from} is older than the history the node keeps;                          watch again from {} or later",
                        data["oldest"]
                    );
                    return ExitCode::from(1);
                }
                _ => {}
            }
        }
    }
    ExitCode::SUCCESS
}

/// Runs `conclave jobs ...`.
pub(crate) fn jobs(cli: &ClientArgs, command: &JobsCommand) -> ExitCode {
    let client = match LogClient::new(cli) {
        Ok(client) => client,
        Err(failure) => return failure.report(),
    };
    let id = |given: &Option<String>| given.clone().unwrap_or_else(made_up_request_id);
    let result = match command {
        JobsCommand::Add {
            payload,
            queue,
            max_attempts,
            request_id,
        } => {
            let payload = match crate::input::value("PAYLOAD", payload) {
                Ok(payload) => payload,
                Err(err) => return input_failure(&err),
            };
            let mut body = json!({ "payload": payload, "request_id": id(request_id) });
            if let Some(queue) = queue {
                body["queue"] = json!(queue);
            }
            if let Some(attempts) = max_attempts {
                body["max_attempts"] = json!(attempts);
            }
            client.send("POST", "/v1/jobs", Some(&body))
        }
        JobsCommand::Claim {
            worker,
            queue,
            lease_ms,
            request_id,
        } => {
            let mut body = json!({ "worker": worker, "request_id": id(request_id) });
            if let Some(queue) = queue {
                body["queue"] = json!(queue);
            }
            if let Some(lease) = lease_ms {
                body["lease_ms"] = json!(lease);
            }
            client.send("POST", "/v1/jobs/claim", Some(&body))
        }
        JobsCommand::Ack {
            job,
            worker,
            request_id,
        } => {
            let body = json!({ "worker": worker, "request_id": id(request_id) });
            client.send("POST", &format!("/v1/jobs/{job}/ack"), Some(&body))
        }
        JobsCommand::Nack {
            job,
            worker,
            reason,
            request_id,
        } => {
            let mut body = json!({ "worker": worker, "request_id": id(request_id) });
            if let Some(reason) = reason {
                body["reason"] = json!(reason);
            }
            client.send("POST", &format!("/v1/jobs/{job}/nack"), Some(&body))
        }
        JobsCommand::Retry { job, request_id } => {
            let body = json!({ "request_id": id(request_id) });
            client.send("POST", &format!("/v1/jobs/{job}/retry"), Some(&body))
        }
        JobsCommand::Purge {
            job: Some(job),
            request_id,
            ..
        } => {
            let query = format!("?request_id={}", encode_key(&id(request_id)));
            client.send("DELETE", &format!("/v1/jobs/{job}{query}"), None)
        }
        JobsCommand::Purge {
            job: None,
            queue,
            request_id,
            ..
        } => {
            let mut body = json!({ "request_id": id(request_id) });
            if let Some(queue) = queue {
                body["queue"] = json!(queue);
            }
            client.send("POST", "/v1/jobs/purge", Some(&body))
        }
        JobsCommand::List { state, stale } => {
            let mut query = String::new();
            if let Some(state) = state {
                query = format!("?state={state}");
            }
            if *stale {
                query.push_str(if query.is_empty() { "?" } else { "&" });
                query.push_str("stale=true");
            }
            client.send("GET", &format!("/v1/jobs{query}"), None)
        }
    };
    finish(cli, result, |answer| match command {
        JobsCommand::List { .. } => {
            let jobs = answer.body.get("jobs").and_then(Value::as_array);
            for job in jobs.into_iter().flatten() {
                let state = match job.get("state") {
                    Some(Value::String(state)) => state.to_lowercase(),
                    Some(Value::Object(map)) => map
                        .keys()
                        .next()
                        .map_or_else(String::new, |k| k.to_lowercase()),
                    _ => String::new(),
                };
                outln!(
                    "{}\t{state}\t{}\t{}",
                    job.get("id").cloned().unwrap_or(Value::Null),
                    job.get("queue").and_then(Value::as_str).unwrap_or(""),
                    job.get("payload").and_then(Value::as_str).unwrap_or("")
                );
            }
        }
        JobsCommand::Claim { .. } => {
            let job = answer.body.get("claimed").cloned().unwrap_or(Value::Null);
            outln!(
                "{}\t{}",
                job.get("id").cloned().unwrap_or(Value::Null),
                job.get("payload").and_then(Value::as_str).unwrap_or("")
            );
        }
        JobsCommand::Purge { .. } => {
            let ids: Vec<String> = answer
                .body
                .get("jobs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(Value::to_string)
                .collect();
            if ids.is_empty() {
                outln!("purged 0");
            } else {
                outln!("purged {} ({})", ids.len(), ids.join(" "));
            }
        }
        JobsCommand::Ack { .. } => outln!("job {} done", job_id(answer)),
        JobsCommand::Nack { .. } => outln!("{}", nacked(answer)),
        _ => outln!("job {}", job_id(answer)),
    })
}

/// The job an answer names.
fn job_id(answer: &Answer) -> Value {
    answer.body.get("job").cloned().unwrap_or(Value::Null)
}

/// What became of a job given back: ready for another attempt, or dead with its attempts used
/// up, and how to put it back then.
fn nacked(answer: &Answer) -> String {
    let job = job_id(answer);
    let attempts = answer.body.get("attempts").and_then(Value::as_u64);
    // The answer carries the attempts made; the limit only where the node says it.
    let limit = answer.body.get("max_attempts").and_then(Value::as_u64);
    match (answer.body.get("state").and_then(Value::as_str), attempts) {
        (Some("dead"), Some(attempts)) => format!(
            "job {job} dead: its attempts are used up ({attempts} of {}); conclave jobs retry \
             {job} puts it back",
            limit.unwrap_or(attempts)
        ),
        (Some("dead"), None) => {
            format!(
                "job {job} dead: its attempts are used up; conclave jobs retry {job} puts it back"
            )
        }
        (_, Some(attempts)) => match limit {
            Some(limit) => format!(
                "job {job} ready again (attempt {} of {limit})",
                attempts + 1
            ),
            None => format!("job {job} ready again (attempt {} next)", attempts + 1),
        },
        (_, None) => format!("job {job} ready again"),
    }
}

/// Reports a value that could not be read (`-`, `@FILE`); its exit code.
fn input_failure(err: &crate::input::InputError) -> ExitCode {
    errln!("error: {err}");
    ExitCode::from(err.exit_code())
}

/// Prints an answer (its JSON with `--json`, else `human`) and picks the exit code.
fn finish(
    cli: &ClientArgs,
    result: Result<Answer, Failure>,
    human: impl FnOnce(&Answer),
) -> ExitCode {
    let answer = match result {
        Ok(answer) => answer,
        Err(failure) => return failure.report(),
    };
    if (200..300).contains(&answer.status) {
        if cli.json {
            outln!("{}", answer.body);
        } else {
            human(&answer);
        }
        return ExitCode::SUCCESS;
    }
    if cli.json {
        outln!("{}", answer.body);
    }
    let error = answer
        .body
        .get("message")
        .or_else(|| answer.body.get("error"))
        .map_or_else(
            || answer.body.to_string(),
            |value| match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            },
        );
    errln!("error: {} answered {}: {error}", answer.url, answer.status);
    match answer.status {
        404 | 409 | 412 | 413 => ExitCode::from(1),
        421 | 503 | 504 => ExitCode::from(crate::EXIT_TEMPFAIL),
        400 => ExitCode::from(crate::EXIT_USAGE),
        _ => ExitCode::from(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: Value) -> Answer {
        Answer {
            status: 200,
            body,
            url: "http://127.0.0.1:7070/v1/jobs/1/nack".to_owned(),
        }
    }

    /// A nack says what became of the job: ready for its next attempt, or dead with its
    /// attempts used up and how to put it back.
    #[test]
    fn a_nack_says_whether_the_job_is_ready_again_or_dead() {
        let ready = json!({ "job": 1, "state": "ready", "attempts": 1 });
        assert_eq!(nacked(&answer(ready)), "job 1 ready again (attempt 2 next)");
        let ready = json!({ "job": 1, "state": "ready", "attempts": 1, "max_attempts": 5 });
        assert_eq!(nacked(&answer(ready)), "job 1 ready again (attempt 2 of 5)");
        let dead = json!({ "job": 1, "state": "dead", "attempts": 5 });
        assert_eq!(
            nacked(&answer(dead)),
            "job 1 dead: its attempts are used up (5 of 5); conclave jobs retry 1 puts it back"
        );
    }
}
