//! A running node's admin API over real HTTP, for the tests that hold it to its contract:
//! [`ApiClient::call`] sends a request as any client would and checks every answer against
//! `docs/openapi.json` ([`crate::openapi_check`]), against the rule that every JSON answer
//! carries the fencing token (but `/health`, a 401 and a 503 `unavailable`), and against Rust
//! variant names leaking into the JSON. A binary answer (a saved snapshot) must be one the
//! document names for its status.

use std::net::SocketAddr;
use std::time::Duration;

pub use conclave_actors::admin::stop_server;
use conclave_actors::admin::{bind_listener, serve_admin};
use conclave_actors::node::NodeHandle;
use conclave_config::AdminConfig;
use serde_json::Value;

use crate::openapi_check::OpenApi;

/// Writes `value` under `key` through `node`'s admin API over HTTP, on a server of its own
/// that stops after the answer; the answer comes once the write is committed, so a majority
/// received it over the link first.
pub async fn put_value(node: &NodeHandle, key: &str, value: &str) {
    let (addr, server) = serve(node, AdminConfig::default());
    let reply = ApiClient::new(addr)
        .call(
            "PUT",
            &format!("/v1/kv/{key}"),
            Body::Json(serde_json::json!({ "value": value })),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    stop_server(&server).await;
}

/// Serves `node`'s admin API on an ephemeral loopback port, with `config`'s other settings
/// (`peer_urls`, a token); the server runs on the current actix system until it stops.
pub fn serve(node: &NodeHandle, config: AdminConfig) -> (SocketAddr, actix_web::dev::ServerHandle) {
    let listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let listener = bind_listener(listen).expect("an ephemeral loopback port");
    let addr = listener
        .local_addr()
        .expect("a bound listener has an address");
    let config = AdminConfig {
        listen: Some(listen),
        ..config
    };
    let server = serve_admin(node.clone(), listener, &config).expect("the admin API starts");
    (addr, server)
}

/// What a request sends as its body.
#[derive(Debug, Clone)]
pub enum Body {
    /// None.
    Empty,
    /// JSON, with `Content-Type: application/json`.
    Json(Value),
    /// These bytes with this content type (none when `None`).
    Raw(Option<&'static str>, Vec<u8>),
}

/// What the node answered.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The headers, names in lowercase.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// The body as sent, its fields in the node's order.
    pub text: String,
    /// The body's bytes (a binary answer's: `text` is lossy there).
    pub bytes: Vec<u8>,
}

impl Reply {
    /// The value of header `name` (lowercase), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A client of one node's admin API that checks every answer.
#[derive(Debug, Clone)]
pub struct ApiClient {
    base: String,
    spec: OpenApi,
    token: Option<String>,
}

impl ApiClient {
    /// A client of the API at `addr`, checking answers against `docs/openapi.json`.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            base: format!("http://{addr}"),
            spec: OpenApi::load(),
            token: None,
        }
    }

    /// The same client sending `token` as its bearer token.
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    /// The API's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends `method path` with `body` and extra `headers`, and checks the answer: it fits
    /// the document, carries the fencing token where the contract says it does, and names no
    /// Rust variant. Panics, naming the request, when it does not.
    pub async fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Body,
        headers: &[(&str, &str)],
    ) -> Reply {
        let url = format!("{}{path}", self.base);
        let token = self.token.clone();
        let method_owned = method.to_owned();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let reply = actix_rt::task::spawn_blocking(move || {
            send(&method_owned, &url, body, token.as_deref(), &headers)
        })
        .await
        .expect("the request's thread ends");
        let route = path.split('?').next().unwrap_or(path);
        let content_type = reply.header("content-type").unwrap_or("").to_owned();
        if content_type.starts_with("application/json") {
            if let Err(error) =
                self.spec
                    .check_answer(method, route, reply.status, &content_type, &reply.body)
            {
                panic!("{method} {path}: the answer does not fit docs/openapi.json: {error}");
            }
            assert_fenced(method, route, &reply);
            assert_no_variant_names(&reply.body, &format!("{method} {path}"));
        } else if !content_type.is_empty() && !content_type.starts_with("text/event-stream") {
            let media = content_type.split(';').next().unwrap_or("").trim();
            if let Err(error) = self.spec.check_media(method, route, reply.status, media) {
                panic!("{method} {path}: the answer does not fit docs/openapi.json: {error}");
            }
        }
        reply
    }

    /// [`ApiClient::call_with`] without extra headers.
    pub async fn call(&self, method: &str, path: &str, body: Body) -> Reply {
        self.call_with(method, path, body, &[]).await
    }

    /// Opens an event stream at `path` (with extra `headers`) and reads it until `enough`
    /// says so or `patience` runs out; the events read, each checked against the document.
    pub async fn events(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        patience: Duration,
        enough: impl Fn(&[Event]) -> bool + Send + 'static,
    ) -> Vec<Event> {
        let url = format!("{}{path}", self.base);
        let token = self.token.clone();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let events = actix_rt::task::spawn_blocking(move || {
            read_events(&url, token.as_deref(), &headers, patience, enough)
        })
        .await
        .expect("the stream's thread ends");
        let route = path.split('?').next().unwrap_or(path);
        for event in &events {
            let data: Value = serde_json::from_str(&event.data)
                .unwrap_or_else(|err| panic!("event data is not JSON ({err}): {event:?}"));
            if let Err(error) =
                self.spec
                    .check_answer("GET", route, 200, "text/event-stream", &data)
            {
                panic!("GET {path}: an event does not fit docs/openapi.json: {error}");
            }
            assert_no_variant_names(&data, &format!("GET {path}"));
        }
        events
    }
}

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// Its `id:`, if any.
    pub id: Option<String>,
    /// Its `event:` name.
    pub name: String,
    /// Its `data:` line.
    pub data: String,
}

fn agent(timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(timeout)
        .build()
        .into()
}

fn send(
    method: &str,
    url: &str,
    body: Body,
    token: Option<&str>,
    headers: &[(String, String)],
) -> Reply {
    let agent = agent(Some(Duration::from_secs(30)));
    let mut builder = ureq::http::Request::builder().method(method).uri(url);
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let bytes = match body {
        Body::Empty => Vec::new(),
        Body::Json(value) => {
            builder = builder.header("content-type", "application/json");
            serde_json::to_vec(&value).unwrap_or_default()
        }
        Body::Raw(content_type, bytes) => {
            if let Some(content_type) = content_type {
                builder = builder.header("content-type", content_type);
            }
            bytes
        }
    };
    let request = builder.body(bytes).expect("a well-formed request");
    let mut response = agent
        .run(request)
        .unwrap_or_else(|err| panic!("{method} {url}: no answer: {err}"));
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_ascii_lowercase(),
                value.to_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let bytes = response
        .body_mut()
        .with_config()
        .limit(u64::MAX)
        .read_to_vec()
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
        bytes,
    }
}

fn read_events(
    url: &str,
    token: Option<&str>,
    headers: &[(String, String)],
    patience: Duration,
    enough: impl Fn(&[Event]) -> bool,
) -> Vec<Event> {
    use std::io::BufRead;
    let agent = agent(Some(patience));
    let mut request = agent.get(url);
    if let Some(token) = token {
        request = request.header("authorization", &format!("Bearer {token}"));
    }
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request
        .call()
        .unwrap_or_else(|err| panic!("GET {url}: no answer: {err}"));
    assert_eq!(response.status().as_u16(), 200, "GET {url}");
    let reader = std::io::BufReader::new(response.into_body().into_reader());
    let mut events = Vec::new();
    let mut event = Event::default();
    for line in reader.lines() {
        let Ok(line) = line else { break };
        if let Some(whole) = event.read(&line) {
            events.push(whole);
            if enough(&events) {
                break;
            }
        }
    }
    events
}

impl Event {
    /// Takes one line of a stream: the event it completes (at its blank line), if any.
    pub fn read(&mut self, line: &str) -> Option<Event> {
        if line.trim().is_empty() {
            let whole = std::mem::take(self);
            return (!whole.data.is_empty()).then_some(whole);
        }
        if let Some(id) = line.strip_prefix("id: ") {
            self.id = Some(id.to_owned());
        } else if let Some(name) = line.strip_prefix("event: ") {
            name.clone_into(&mut self.name);
        } else if let Some(data) = line.strip_prefix("data: ") {
            data.clone_into(&mut self.data);
        }
        None
    }

    /// The events of a stream's text.
    pub fn parse_all(text: &str) -> Vec<Event> {
        let mut event = Event::default();
        text.lines()
            .chain(std::iter::once(""))
            .filter_map(|line| event.read(line))
            .collect()
    }
}

/// CB-5: every JSON answer carries the fencing token, but `/health`, a 401 and a 503
/// `unavailable`.
#[track_caller]
fn assert_fenced(method: &str, route: &str, reply: &Reply) {
    let exempt = route == "/health" || reply.status == 401 || reply.body["error"] == "unavailable";
    if exempt {
        return;
    }
    for key in ["term", "leader", "fencing_token"] {
        assert!(
            reply.body.get(key).is_some(),
            "{method} {route} ({}): no {key} in {}",
            reply.status,
            reply.body
        );
    }
}

/// No object key and no state-like value is a Rust variant name (`Dead`, `{"Nacked": …}`,
/// `{"Kv": {"Put": …}}`): JSON is snake_case, values included.
#[track_caller]
pub fn assert_no_variant_names(value: &Value, what: &str) {
    const VARIANTS: [&str; 12] = [
        "Ready",
        "Claimed",
        "Done",
        "Dead",
        "Nacked",
        "LeaseExpired",
        "Kv",
        "Jobs",
        "Put",
        "Delete",
        "Enqueue",
        "Applied",
    ];
    match value {
        Value::Object(map) => {
            for (key, field) in map {
                assert!(
                    !key.starts_with(|c: char| c.is_ascii_uppercase()),
                    "{what}: key {key:?} is a Rust name in {value}"
                );
                assert_no_variant_names(field, what);
            }
        }
        Value::Array(items) => {
            for item in items {
                assert_no_variant_names(item, what);
            }
        }
        Value::String(text) => {
            assert!(
                !VARIANTS.contains(&text.as_str()),
                "{what}: the value {text:?} is a Rust variant name"
            );
        }
        _ => {}
    }
}
