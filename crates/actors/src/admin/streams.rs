//! The API's server-sent event streams (CB-1, LOG-5): `GET /v1/events` (leader and peer
//! changes) and `GET /v1/kv/{key}?watch=REV` (a key's changes), each event with an `id:` so
//! that an EventSource that reconnects resumes where it stopped, as the SSE standard means
//! `Last-Event-ID` to work.
//!
//! - `/v1/events`: the id is `INCARNATION.SEQ` — the node's incarnation and the event's number
//!   in this run of it. Resumed in the same run, the stream first sends the events the node
//!   still keeps after that id (the last 256) and a `lagged` event counting those it no longer
//!   has; resumed across a restart of the node, it sends `lagged` with `missed: null` and
//!   every event kept since the start. Without the header it starts with the next event.
//! - a watch: the id is the change's store revision; resumed, the watch goes on from the next
//!   revision, whatever revision its URL named.
//!
//! A comment line every 15 s keeps proxies from closing an idle stream and tells the node
//! that its reader has gone.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use actix_web::http::header;
use actix_web::web::{Bytes, Data};
use actix_web::{HttpRequest, HttpResponse};
use conclave_api::{ErrorAnswer, ErrorCode, KvWatchEvent, LAST_EVENT_ID_HEADER, StreamEvent};
use serde::Serialize;

use super::limits::{Refusal, Slot};
use super::{Access, AdminState};
use crate::events::{Numbered, Received};
use crate::log_service::LogService;

/// How often a stream sends a comment line so proxies keep it open, and so a stream whose
/// reader has gone is noticed.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// How often a watch looks for new changes in this node's copy.
const WATCH_POLL: Duration = Duration::from_millis(50);

/// One server-sent event: `id:` (if any), `event:`, `data:` and the blank line.
pub(super) fn sse<T: Serialize>(id: Option<&str>, name: &str, data: &T) -> String {
    let data = serde_json::to_string(data).unwrap_or_else(|_| "null".to_owned());
    match id {
        Some(id) => format!("id: {id}\nevent: {name}\ndata: {data}\n\n"),
        None => format!("event: {name}\ndata: {data}\n\n"),
    }
}

/// The `Last-Event-ID` the client sent, if any.
fn last_event_id(request: &HttpRequest) -> Option<String> {
    request
        .headers()
        .get(LAST_EVENT_ID_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// A place among `admin.max_event_streams`, or the refusal.
pub(super) fn stream_slot(state: &AdminState) -> Result<Slot, Box<ErrorAnswer>> {
    let permit = state.streams.open(state.options.max_event_streams);
    if permit.over() {
        return Err(state.busy(
            Refusal::EventStreams,
            ErrorCode::TooManyStreams,
            "admin.max_event_streams",
            state.options.max_event_streams,
            "event streams",
        ));
    }
    Ok(permit)
}

pub(super) fn event_stream(
    stream: impl futures_util::Stream<Item = Result<Bytes, Infallible>> + 'static,
) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .streaming(stream)
}

/// `GET /v1/events`.
pub(super) async fn events(state: Data<AdminState>, request: HttpRequest) -> HttpResponse {
    admit!(state, request, Access::Read);
    let incarnation = state.node.incarnation();
    // Where to resume: after event `seq` of this run, and whether events of an earlier run
    // (of unknown number) were missed.
    let (after, restarted) = match last_event_id(&request) {
        None => (state.node.last_event_seq(), false),
        Some(id) => match parse_event_id(&id) {
            Some((run, seq)) if run == incarnation => (seq, false),
            Some(_) => (0, true),
            None => {
                let error = ErrorAnswer::new(
                    ErrorCode::InvalidArgument,
                    format!(
                        "Last-Event-ID {id:?} is no id of this stream (they read \
                         INCARNATION.SEQ); reconnect without it to start from now"
                    ),
                );
                return state.error_response(&request, Box::new(error)).await;
            }
        },
    };
    let permit = match stream_slot(&state) {
        Ok(permit) => permit,
        Err(error) => return state.error_response(&request, error).await,
    };
    let resumed = state.node.subscribe_after("admin_events", after);
    let mut pending: VecDeque<String> = VecDeque::new();
    if restarted || resumed.missed > 0 {
        let missed = (!restarted).then_some(resumed.missed);
        pending.push_back(sse(
            None,
            "lagged",
            &StreamEvent::Lagged(conclave_api::LaggedEvent { missed }),
        ));
    }
    for numbered in &resumed.backlog {
        pending.push_back(numbered_event(incarnation, numbered));
    }
    let stream = futures_util::stream::unfold(
        (resumed.subscription, permit, pending),
        move |(mut subscription, permit, mut pending)| async move {
            if let Some(chunk) = pending.pop_front() {
                return Some((Ok(Bytes::from(chunk)), (subscription, permit, pending)));
            }
            let chunk = match tokio::time::timeout(KEEPALIVE, subscription.recv_numbered()).await {
                Err(_) => ": keepalive\n\n".to_owned(),
                Ok(None) => return None,
                Ok(Some((Some(seq), Received::Event(event)))) => {
                    numbered_event(incarnation, &Numbered { seq, event })
                }
                Ok(Some((_, Received::Event(event)))) => sse(None, event.name(), &event.to_api()),
                Ok(Some((_, Received::Lagged(missed)))) => sse(
                    None,
                    "lagged",
                    &StreamEvent::Lagged(conclave_api::LaggedEvent {
                        missed: Some(missed),
                    }),
                ),
            };
            Some((Ok(Bytes::from(chunk)), (subscription, permit, pending)))
        },
    );
    event_stream(stream)
}

fn numbered_event(incarnation: u64, numbered: &Numbered) -> String {
    let id = format!("{incarnation}.{}", numbered.seq);
    sse(Some(&id), numbered.event.name(), &numbered.event.to_api())
}

/// `INCARNATION.SEQ`.
fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (run, seq) = id.split_once('.')?;
    Some((run.parse().ok()?, seq.parse().ok()?))
}

/// What a watch carries from one step to the next.
struct Watching {
    service: LogService,
    key: String,
    /// The next revision to look for.
    next: u64,
    /// Events not yet sent.
    queue: VecDeque<String>,
    /// The history no longer holds `next`: the stream ends once the queue is sent.
    finished: bool,
    /// When something was last sent (for the keep-alive comment).
    last_sent: tokio::time::Instant,
    /// Holds the stream's place among `admin.max_event_streams`.
    _permit: Slot,
}

impl Watching {
    /// The next piece of the stream: an event, a keep-alive comment, or `None` when the
    /// stream ends (the history no longer reaches back, or the node stopped).
    async fn next_chunk(&mut self) -> Option<String> {
        loop {
            if let Some(chunk) = self.queue.pop_front() {
                self.last_sent = tokio::time::Instant::now();
                return Some(chunk);
            }
            if self.finished {
                return None;
            }
            // The node stopped, or runs no log: the stream ends.
            match self.service.kv_changes(&self.key, self.next).await.ok()? {
                Err(compacted) => {
                    self.queue.push_back(sse(None, "compacted", &compacted));
                    self.finished = true;
                    continue;
                }
                Ok(events) => {
                    for event in events {
                        let revision = event.revision();
                        self.next = self.next.max(revision + 1);
                        let id = revision.to_string();
                        self.queue.push_back(match &event {
                            KvWatchEvent::Put(kv) => sse(Some(&id), event.name(), kv),
                            KvWatchEvent::Delete(deleted) => sse(Some(&id), event.name(), deleted),
                        });
                    }
                }
            }
            if !self.queue.is_empty() {
                continue;
            }
            if self.last_sent.elapsed() >= KEEPALIVE {
                self.queue.push_back(": keepalive\n\n".to_owned());
                continue;
            }
            tokio::time::sleep(WATCH_POLL).await;
        }
    }
}

/// `GET /v1/kv/{key}?watch=REV`: the key's changes from revision `from` on (or after the
/// client's `Last-Event-ID`), as server-sent events, from this node's copy (any node serves
/// it, as etcd's watch does).
pub(super) async fn watch(
    state: &AdminState,
    request: &HttpRequest,
    key: String,
    from: u64,
) -> HttpResponse {
    let from = match last_event_id(request) {
        None => from,
        Some(id) => match id.parse::<u64>() {
            Ok(revision) => revision.saturating_add(1),
            Err(_) => {
                let error = ErrorAnswer::new(
                    ErrorCode::InvalidArgument,
                    format!(
                        "Last-Event-ID {id:?} is no id of a watch (they are store revisions); \
                         reconnect without it to start at the URL's revision"
                    ),
                );
                return state.error_response(request, Box::new(error)).await;
            }
        },
    };
    if key.is_empty() {
        let error = ErrorAnswer::new(
            ErrorCode::InvalidArgument,
            "the key to watch is empty: name it in the path, /v1/kv/{key}?watch=REV",
        );
        return state.error_response(request, Box::new(error)).await;
    }
    let permit = match stream_slot(state) {
        Ok(permit) => permit,
        Err(error) => return state.error_response(request, error).await,
    };
    let watching = Watching {
        service: state.service.clone(),
        key,
        next: from,
        queue: VecDeque::new(),
        finished: false,
        last_sent: tokio::time::Instant::now(),
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(watching, |mut watching| async move {
        let chunk = watching.next_chunk().await?;
        Some((Ok::<_, Infallible>(Bytes::from(chunk)), watching))
    });
    event_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event's id names the node's run and the event's number in it.
    #[test]
    fn event_ids_parse() {
        assert_eq!(parse_event_id("7.42"), Some((7, 42)));
        for bad in ["", "7", "7.", ".42", "a.b", "7.42.1"] {
            assert_eq!(parse_event_id(bad), None, "{bad:?}");
        }
        let line = sse(
            Some("3.9"),
            "lagged",
            &conclave_api::LaggedEvent { missed: None },
        );
        assert_eq!(line, "id: 3.9\nevent: lagged\ndata: {\"missed\":null}\n\n");
    }
}
