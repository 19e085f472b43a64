//! Server-sent events as the CLI reads them (SESS-1, SESS-4): the streaming keepalive of a
//! session and the watch of a key, opened with [`crate::client::AdminClient::open_stream`],
//! arrive as `event:`, `id:` and `data:` lines ended by a blank line; comment lines (`:`),
//! which the node sends to keep an idle stream open, carry nothing.

use std::io::BufRead;

/// One event of a stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ServerEvent {
    /// Its `id:`, if it had one.
    pub(crate) id: Option<String>,
    /// Its `event:` name.
    pub(crate) name: String,
    /// Its `data:`, JSON.
    pub(crate) data: String,
}

/// The events of a stream, in order, until it ends; a read that fails (a broken connection, a
/// node silent for longer than the stream's idle bound) is the last item.
pub(crate) struct ServerEvents<R> {
    reader: R,
    done: bool,
}

impl<R: BufRead> ServerEvents<R> {
    pub(crate) fn new(reader: R) -> Self {
        Self {
            reader,
            done: false,
        }
    }
}

impl<R: BufRead> Iterator for ServerEvents<R> {
    type Item = std::io::Result<ServerEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut event = ServerEvent::default();
        let mut line = String::new();
        while !self.done {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) => self.done = true,
                Ok(_) => {
                    let line = line.trim_end_matches(['\r', '\n']);
                    if line.is_empty() {
                        if !event.data.is_empty() {
                            return Some(Ok(event));
                        }
                        event = ServerEvent::default();
                    } else if let Some(id) = line.strip_prefix("id:") {
                        event.id = Some(id.trim_start().to_owned());
                    } else if let Some(name) = line.strip_prefix("event:") {
                        name.trim_start().clone_into(&mut event.name);
                    } else if let Some(data) = line.strip_prefix("data:") {
                        event.data.push_str(data.trim_start());
                    }
                }
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SESS-1: events are read whole, comments skipped, and the end of the stream ends them.
    #[test]
    fn sess1_events_are_read_whole_and_comments_skipped() {
        let text = ": keepalive\n\nevent: keepalive\ndata: {\"type\":\"keepalive\"}\n\n\
                    id: 7\nevent: delete\ndata: {\"revision\":7}\n\nevent: cut";
        let events: Vec<ServerEvent> = ServerEvents::new(text.as_bytes())
            .map(|event| event.expect("read from memory"))
            .collect();
        assert_eq!(
            events,
            [
                ServerEvent {
                    id: None,
                    name: "keepalive".into(),
                    data: "{\"type\":\"keepalive\"}".into(),
                },
                ServerEvent {
                    id: Some("7".into()),
                    name: "delete".into(),
                    data: "{\"revision\":7}".into(),
                },
            ]
        );
    }
}
