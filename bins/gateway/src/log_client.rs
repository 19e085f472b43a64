//! `conclave kv` and `conclave jobs`: the replicated log's key-value store and job queue
//! through a node's admin API (LOG-1, LOG-8), with the requests and answers of `conclave-api`.
//!
//! Any node may be named with `--admin`: a write, or a linearizable read, that reaches a node
//! that does not lead is refused with `not_leader` and the leader's admin URL, and the request
//! is sent there instead ([`AdminClient::follow_leader`]). A write carries a request id — the
//! one given with `--request-id`, or one made up here — so that sending it again after an
//! answer that did not arrive applies it at most once (LOG-6). Lists are read a page at a
//! time until the last.
//!
//! Exit codes: 0 when the node did it; 1 when it answered no (absent key, failed compare, no
//! job ready, a job the worker does not hold, a retry or purge of a job that is not dead, a
//! write too large); 64 for a request the node calls malformed; 69 when no node answered; 75
//! when the cluster could not say in time (no leader, the write's outcome unknown: run it
//! again).

use std::io::BufRead;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use conclave_api::{
    AckRequest, ClaimRequest, Compacted, EnqueueRequest, Job, JobAnswer, JobListAnswer, JobState,
    KeyValue, KvDeleted, KvGetAnswer, KvListAnswer, KvWriteAnswer, NackRequest, PurgeAnswer,
    PurgeRequest, PutRequest, RetryRequest,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cli::{ClientArgs, JobsCommand, KvCommand};
use crate::client::{AdminClient, ClientError};
use crate::output::{errln, outln};

/// The client of a `kv` or `jobs` command: a write waits for its entry to be applied, which
/// the node answers within 10 s, so the timeout is at least a little more than that.
pub(crate) fn client(args: &ClientArgs) -> Result<AdminClient, ClientError> {
    AdminClient::new(
        &args.admin,
        args.token.clone(),
        Duration::from_secs(args.timeout).max(Duration::from_secs(12)),
    )?
    .with_tls(&args.tls)
}

/// `method path` (with `body`), on the leader if the node named is not it.
pub(crate) fn send<B: Serialize, T: DeserializeOwned>(
    client: &AdminClient,
    method: &str,
    path: &str,
    body: Option<&B>,
) -> Result<T, ClientError> {
    client.follow_leader(
        |client| client.request(method, path, body, Duration::ZERO),
        |_, _| {},
    )
}

/// A request id for a write the user gave none for: unique enough across clients and retries.
pub(crate) fn made_up_request_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("cli-{}-{nanos:x}", std::process::id())
}

/// Percent-encodes a key for a URL path (every byte but unreserved ones and `/`).
pub(crate) fn encode_key(key: &str) -> String {
    encode(key, true)
}

/// Percent-encodes a query value (every byte but unreserved ones).
pub(crate) fn encode_query(value: &str) -> String {
    encode(value, false)
}

fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte));
            }
            b'/' if keep_slash => out.push('/'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// Prints `answer` as JSON.
pub(crate) fn print_json<T: Serialize>(answer: &T) {
    match serde_json::to_string(answer) {
        Ok(text) => outln!("{text}"),
        Err(err) => errln!("error: cannot print the answer as JSON: {err}"),
    }
}

/// Reports a failed command; its exit code.
pub(crate) fn failed(args: &ClientArgs, err: &ClientError) -> ExitCode {
    if let (true, Some(answer)) = (args.json, err.refusal()) {
        print_json(answer);
    }
    errln!("error: {err}");
    ExitCode::from(err.command_exit_code())
}

/// Reports a value that could not be read (`-`, `@FILE`); its exit code.
fn input_failure(err: &crate::input::InputError) -> ExitCode {
    errln!("error: {err}");
    ExitCode::from(err.exit_code())
}

/// Runs `conclave kv ...`.
pub(crate) fn kv(args: &ClientArgs, command: &KvCommand) -> ExitCode {
    let client = match client(args) {
        Ok(client) => client,
        Err(err) => return failed(args, &err),
    };
    let result = match command {
        KvCommand::Put {
            key,
            value,
            if_revision,
            if_value,
            session,
            request_id,
        } => {
            let value = match crate::input::value("VALUE", value) {
                Ok(value) => value,
                Err(err) => return input_failure(&err),
            };
            let request = PutRequest {
                value,
                if_revision: *if_revision,
                if_value: if_value.clone(),
                session: *session,
                request_id: Some(request_id.clone().unwrap_or_else(made_up_request_id)),
            };
            let path = format!("/v1/kv/{}", encode_key(key));
            send::<_, KvWriteAnswer>(&client, "PUT", &path, Some(&request))
                .map(|answer| written(args, &answer))
        }
        KvCommand::Get { key, stale } => {
            let query = if *stale { "?stale=true" } else { "" };
            let path = format!("/v1/kv/{}{query}", encode_key(key));
            send::<(), KvGetAnswer>(&client, "GET", &path, None).map(|answer| {
                if args.json {
                    print_json(&answer);
                } else {
                    outln!("{}", answer.kv.value);
                }
            })
        }
        KvCommand::Del {
            key,
            if_revision,
            request_id,
        } => {
            let id = request_id.clone().unwrap_or_else(made_up_request_id);
            let mut query = format!("?request_id={}", encode_query(&id));
            if let Some(revision) = if_revision {
                query.push_str(&format!("&if_revision={revision}"));
            }
            let path = format!("/v1/kv/{}{query}", encode_key(key));
            send::<(), KvWriteAnswer>(&client, "DELETE", &path, None)
                .map(|answer| written(args, &answer))
        }
        KvCommand::Watch { key, from } => return watch(args, &client, key, *from),
        KvCommand::List { prefix, stale } => {
            list_keys(&client, prefix.as_deref().unwrap_or(""), *stale).map(|answer| {
                if args.json {
                    print_json(&answer);
                } else {
                    for item in &answer.items {
                        outln!("{} = {}", item.key, item.value);
                    }
                }
            })
        }
    };
    done(args, result)
}

/// A put's or delete's answer: `KEY: revision N`.
fn written(args: &ClientArgs, answer: &KvWriteAnswer) {
    if args.json {
        print_json(answer);
    } else {
        let again = if answer.replayed {
            " (applied before with this request id)"
        } else {
            ""
        };
        outln!("{}: revision {}{again}", answer.key, answer.revision);
    }
}

/// Every key starting with `prefix`, page by page: the last page's answer with every item.
fn list_keys(client: &AdminClient, prefix: &str, stale: bool) -> Result<KvListAnswer, ClientError> {
    let mut items = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let mut path = format!("/v1/kv?prefix={}", encode_query(prefix));
        if stale {
            path.push_str("&stale=true");
        }
        if let Some(token) = &next {
            path.push_str(&format!("&continue={}", encode_query(token)));
        }
        let mut page: KvListAnswer = send::<(), _>(client, "GET", &path, None)?;
        items.append(&mut page.items);
        next = page.continue_from.take();
        if next.is_none() {
            page.items = items;
            return Ok(page);
        }
    }
}

/// `conclave kv watch KEY`: prints each change of the key as the node's stream brings it.
fn watch(args: &ClientArgs, client: &AdminClient, key: &str, from: Option<u64>) -> ExitCode {
    let from = match from {
        Some(from) => from,
        // From now on: the store's revision after the latest change.
        None => match list_keys(client, key, true) {
            Ok(answer) => answer.revision + 1,
            Err(err) => return failed(args, &err),
        },
    };
    let url = format!("{}/v1/kv/{}?watch={from}", client.base(), encode_key(key));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.get(&url);
    if let Some(token) = &args.token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let response = match request.call() {
        Ok(response) if response.status().as_u16() == 200 => response,
        Ok(_) | Err(_) => {
            // The same request through the typed client, for its error.
            let path = format!("/v1/kv/{}?watch={from}", encode_key(key));
            let err = match client.get::<serde_json::Value>(&path) {
                Err(err) => err,
                Ok(_) => ClientError::Malformed {
                    url,
                    reason: "the watch did not start".to_owned(),
                },
            };
            return failed(args, &err);
        }
    };
    let reader = std::io::BufReader::new(response.into_body().into_reader());
    let mut next = from;
    let mut event = WatchLine::default();
    for line in reader.lines() {
        let Ok(line) = line else { break };
        if !line.is_empty() {
            event.read(&line);
            continue;
        }
        match event.take().print(args.json, from) {
            Printed::Change(revision) => next = next.max(revision + 1),
            Printed::Nothing => {}
            Printed::End(code) => return code,
        }
    }
    errln!(
        "error: the node ended the watch (it stopped, or the connection broke); watch again \
         with --from {next}"
    );
    ExitCode::from(crate::EXIT_TEMPFAIL)
}

/// One server-sent event as its lines come.
#[derive(Debug, Default)]
struct WatchLine {
    id: Option<String>,
    event: String,
    data: String,
}

/// One event of a watch as `--json` prints it, a line each.
#[derive(Serialize)]
struct WatchedEvent<'a> {
    event: &'a str,
    id: Option<&'a str>,
    data: serde_json::Value,
}

/// What printing an event did.
enum Printed {
    /// A change of this revision.
    Change(u64),
    /// A comment, or an event without data.
    Nothing,
    /// The watch is over, with this exit code.
    End(ExitCode),
}

impl WatchLine {
    fn read(&mut self, line: &str) {
        if let Some(id) = line.strip_prefix("id: ") {
            self.id = Some(id.to_owned());
        } else if let Some(name) = line.strip_prefix("event: ") {
            name.clone_into(&mut self.event);
        } else if let Some(data) = line.strip_prefix("data: ") {
            data.clone_into(&mut self.data);
        }
    }

    fn take(&mut self) -> Self {
        std::mem::take(self)
    }

    fn print(&self, json: bool, from: u64) -> Printed {
        if self.data.is_empty() {
            return Printed::Nothing;
        }
        if json {
            let data: serde_json::Value =
                serde_json::from_str(&self.data).unwrap_or(serde_json::Value::Null);
            print_json(&WatchedEvent {
                event: &self.event,
                id: self.id.as_deref(),
                data,
            });
        }
        match self.event.as_str() {
            "put" => match serde_json::from_str::<KeyValue>(&self.data) {
                Ok(kv) => {
                    if !json {
                        outln!("put {} @{}", kv.value, kv.revision);
                    }
                    Printed::Change(kv.revision)
                }
                Err(_) => Printed::Nothing,
            },
            "delete" => match serde_json::from_str::<KvDeleted>(&self.data) {
                Ok(deleted) => {
                    if !json {
                        outln!("delete @{}", deleted.revision);
                    }
                    Printed::Change(deleted.revision)
                }
                Err(_) => Printed::Nothing,
            },
            "compacted" => {
                let oldest = serde_json::from_str::<Compacted>(&self.data)
                    .map_or_else(|_| "a later one".to_owned(), |c| c.oldest.to_string());
                errln!(
                    "error: revision {from} is older than the history the node keeps; watch \
                     again from {oldest} or later"
                );
                Printed::End(ExitCode::from(1))
            }
            _ => Printed::Nothing,
        }
    }
}

/// Runs `conclave jobs ...`.
pub(crate) fn jobs(args: &ClientArgs, command: &JobsCommand) -> ExitCode {
    let client = match client(args) {
        Ok(client) => client,
        Err(err) => return failed(args, &err),
    };
    let write = match command {
        JobsCommand::Purge {
            job,
            queue,
            request_id,
            ..
        } => {
            let result = purge(&client, *job, queue.clone(), request_id);
            return done(args, result.map(|answer| purged(args, &answer)));
        }
        JobsCommand::List { state, stale } => {
            let result = list_jobs(&client, state.as_deref(), *stale);
            return done(args, result.map(|answer| listed_jobs(args, &answer)));
        }
        JobsCommand::Add {
            payload,
            queue,
            max_attempts,
            request_id,
        } => match crate::input::value("PAYLOAD", payload) {
            Ok(payload) => JobWrite::Enqueue(EnqueueRequest {
                payload,
                queue: queue.clone(),
                max_attempts: *max_attempts,
                request_id: request_id_of(request_id),
            }),
            Err(err) => return input_failure(&err),
        },
        JobsCommand::Claim {
            worker,
            queue,
            lease_ms,
            session,
            request_id,
            wait,
        } => JobWrite::Claim(ClaimRequest {
            worker: worker.clone(),
            queue: queue.clone(),
            lease_ms: *lease_ms,
            session: *session,
            request_id: request_id_of(request_id),
            wait_ms: wait.map(|secs| secs.saturating_mul(1000)),
        }),
        JobsCommand::Ack {
            job,
            worker,
            request_id,
        } => JobWrite::Ack(
            *job,
            AckRequest {
                worker: worker.clone(),
                request_id: request_id_of(request_id),
            },
        ),
        JobsCommand::Nack {
            job,
            worker,
            reason,
            request_id,
        } => JobWrite::Nack(
            *job,
            NackRequest {
                worker: worker.clone(),
                reason: reason.clone(),
                request_id: request_id_of(request_id),
            },
        ),
        JobsCommand::Retry { job, request_id } => JobWrite::Retry(
            *job,
            RetryRequest {
                request_id: request_id_of(request_id),
            },
        ),
    };
    write.run(args, &client)
}

/// The exit code of a command that printed its answer, or of its failure.
pub(crate) fn done(args: &ClientArgs, result: Result<(), ClientError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => failed(args, &err),
    }
}

/// A job list: its JSON, or a line per job.
fn listed_jobs(args: &ClientArgs, answer: &JobListAnswer) {
    if args.json {
        print_json(answer);
    } else {
        for job in &answer.jobs {
            outln!("{}\t{}\t{}\t{}", job.id, job.state, job.queue, job.payload);
        }
    }
}

/// A write to the queue that answers with a job, as the API takes it.
enum JobWrite {
    Enqueue(EnqueueRequest),
    Claim(ClaimRequest),
    Ack(u64, AckRequest),
    Nack(u64, NackRequest),
    Retry(u64, RetryRequest),
}

/// The request id a write carries: the user's, or one made up.
fn request_id_of(given: &Option<String>) -> Option<String> {
    Some(given.clone().unwrap_or_else(made_up_request_id))
}

impl JobWrite {
    /// Sends it and prints what became of the job; the exit code.
    fn run(&self, args: &ClientArgs, client: &AdminClient) -> ExitCode {
        let result = self.send(client).map(|answer| {
            if args.json {
                print_json(&answer);
            } else {
                outln!("{}", self.describe(&answer.job));
            }
        });
        done(args, result)
    }

    fn send(&self, client: &AdminClient) -> Result<JobAnswer, ClientError> {
        match self {
            Self::Enqueue(request) => send(client, "POST", "/v1/jobs", Some(request)),
            Self::Claim(request) => match request.wait_ms {
                Some(wait_ms) if wait_ms > 0 => claim_waiting(client, request, wait_ms),
                _ => send(client, "POST", "/v1/jobs/claim", Some(request)),
            },
            Self::Ack(job, request) => send(
                client,
                "POST",
                &format!("/v1/jobs/{job}/ack"),
                Some(request),
            ),
            Self::Nack(job, request) => send(
                client,
                "POST",
                &format!("/v1/jobs/{job}/nack"),
                Some(request),
            ),
            Self::Retry(job, request) => send(
                client,
                "POST",
                &format!("/v1/jobs/{job}/retry"),
                Some(request),
            ),
        }
    }

    /// What became of the job, for people.
    fn describe(&self, job: &Job) -> String {
        match self {
            Self::Enqueue(_) => format!("job {}", job.id),
            Self::Claim(_) => format!("{}\t{}", job.id, job.payload),
            Self::Ack(..) => format!("job {} done", job.id),
            Self::Nack(..) => nacked(job),
            Self::Retry(..) => format!("job {} ready again (attempts reset)", job.id),
        }
    }
}

/// `jobs claim --wait`: the node may answer only when the wait has passed, so this client
/// waits that much longer than usual; a node that stops leading meanwhile sends the claim to
/// the new leader, which is asked to wait for what is left of the time.
fn claim_waiting(
    client: &AdminClient,
    request: &ClaimRequest,
    wait_ms: u64,
) -> Result<JobAnswer, ClientError> {
    let deadline = SystemTime::now() + Duration::from_millis(wait_ms);
    client.follow_leader(
        |client| {
            let left = deadline
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            let request = ClaimRequest {
                wait_ms: Some(u64::try_from(left.as_millis()).unwrap_or(wait_ms)),
                ..request.clone()
            };
            client.request("POST", "/v1/jobs/claim", Some(&request), left)
        },
        |_, _| {},
    )
}

/// `jobs purge ID` or `jobs purge --all [--queue Q]`.
fn purge(
    client: &AdminClient,
    job: Option<u64>,
    queue: Option<String>,
    request_id: &Option<String>,
) -> Result<PurgeAnswer, ClientError> {
    let request_id = request_id_of(request_id).unwrap_or_default();
    match job {
        Some(job) => {
            let path = format!("/v1/jobs/{job}?request_id={}", encode_query(&request_id));
            send::<(), _>(client, "DELETE", &path, None)
        }
        None => {
            let request = PurgeRequest {
                queue,
                request_id: Some(request_id),
            };
            send(client, "POST", "/v1/jobs/purge", Some(&request))
        }
    }
}

/// Every job (of `state`), page by page: the last page's answer with every job.
fn list_jobs(
    client: &AdminClient,
    state: Option<&str>,
    stale: bool,
) -> Result<JobListAnswer, ClientError> {
    let mut jobs = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let mut query = Vec::new();
        if let Some(state) = state {
            query.push(format!("state={}", encode_query(state)));
        }
        if stale {
            query.push("stale=true".to_owned());
        }
        if let Some(token) = &next {
            query.push(format!("continue={}", encode_query(token)));
        }
        let path = if query.is_empty() {
            "/v1/jobs".to_owned()
        } else {
            format!("/v1/jobs?{}", query.join("&"))
        };
        let mut page: JobListAnswer = send::<(), _>(client, "GET", &path, None)?;
        jobs.append(&mut page.jobs);
        next = page.continue_from.take();
        if next.is_none() {
            page.jobs = jobs;
            return Ok(page);
        }
    }
}

/// A purge's answer: how many dead jobs went, and which.
fn purged(args: &ClientArgs, answer: &PurgeAnswer) {
    if args.json {
        print_json(answer);
    } else if answer.jobs.is_empty() {
        outln!("purged 0");
    } else {
        let ids: Vec<String> = answer.jobs.iter().map(u64::to_string).collect();
        let more = answer.purged.saturating_sub(answer.jobs.len());
        if more == 0 {
            outln!("purged {} ({})", answer.purged, ids.join(" "));
        } else {
            outln!(
                "purged {} ({} and {more} more)",
                answer.purged,
                ids.join(" ")
            );
        }
    }
}

/// What became of a job given back: ready for another attempt, or dead with its attempts used
/// up, and how to put it back then.
fn nacked(job: &Job) -> String {
    let id = job.id;
    match job.state {
        JobState::Dead => format!(
            "job {id} dead: its attempts are used up ({} of {}); conclave jobs retry {id} puts it \
             back",
            job.attempts, job.max_attempts
        ),
        _ => format!(
            "job {id} ready again (attempt {} of {})",
            job.attempts + 1,
            job.max_attempts
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: JobState, attempts: u32) -> Job {
        Job {
            id: 1,
            queue: "default".into(),
            payload: "p".into(),
            state,
            attempts,
            max_attempts: 5,
            worker: None,
            lease_until_unix_ms: None,
            lease_ms: None,
            session: None,
            last_failure: None,
        }
    }

    /// A nack says what became of the job: ready for its next attempt, or dead with its
    /// attempts used up and how to put it back.
    #[test]
    fn a_nack_says_whether_the_job_is_ready_again_or_dead() {
        assert_eq!(
            nacked(&job(JobState::Ready, 1)),
            "job 1 ready again (attempt 2 of 5)"
        );
        assert_eq!(
            nacked(&job(JobState::Dead, 5)),
            "job 1 dead: its attempts are used up (5 of 5); conclave jobs retry 1 puts it back"
        );
    }

    /// Keys keep their slashes in a path; a query value escapes them.
    #[test]
    fn keys_and_query_values_are_percent_encoded() {
        assert_eq!(encode_key("cfg/db url"), "cfg/db%20url");
        assert_eq!(encode_query("a/b&c"), "a%2Fb%26c");
    }
}
