//! The HTTP listeners of the admin API and the metrics endpoint, with TLS or without
//! (ADMIN-TLS, issue 26 item 1), and the answer a plain-HTTP request gets at a TLS one
//! ("a plain-HTTP request to a TLS listener gets a clear answer, not a hang").
//!
//! Both listeners are put together from the layers actix-web's `HttpServer` is made of
//! (actix-server's accept loop, actix-http's rustls acceptor and HTTP service, the same
//! settings), so that one worker thread serves both ([`Listeners`] says why) and so that a TLS
//! listener can take one step before the handshake. `HttpServer` hands every connection of a
//! TLS listener straight to the handshake, which ends a plain-HTTP request's connection
//! without a word: curl says "Empty reply from server", which reads like a broken node. Here
//! the first byte of each connection is peeked at, left unread. A TLS client's first record is
//! a handshake (byte [`TLS_HANDSHAKE`]), and its connection goes on untouched to the
//! handshake: one more system call per connection, no byte relayed or copied. Anything else
//! is answered `400 Bad Request` in plain text, one line that names `https://` and the CA
//! (it begins with [`HTTPS_ONLY_ANSWER`], by which the CLI knows it), and closed.
//!
//! The look costs nothing that is not bounded: a client that connects and sends nothing is
//! closed after [`FIRST_BYTE_TIMEOUT`] (the handshake that follows has its own 3 s), the
//! answer and the draining of the request after it take at most [`ANSWER_TIMEOUT`], and each
//! connection waits in its own task, counted in its listener's connection bound, never in
//! another's way.

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix_http::{HttpService, KeepAlive};
use actix_rt::net::TcpStream;
use actix_server::{Server, ServerBuilder};
use actix_service::boxed::{self, BoxServiceFactory};
use actix_service::{
    IntoServiceFactory as _, Service, ServiceFactory, ServiceFactoryExt as _, fn_factory,
    fn_service, map_config,
};
use actix_web::dev::{AppConfig, Extensions};
use actix_web::{App, web};
use conclave_api::HTTPS_ONLY_ANSWER;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::timeout;

use crate::tls::ListenerTls;

/// The first byte of a TLS connection: the content type of a handshake record, which every
/// TLS version's ClientHello travels in. No HTTP request starts with it (a method is letters).
pub(super) const TLS_HANDSHAKE: u8 = 0x16;

/// How long a connection to a TLS listener may stay silent before it is closed: of the order
/// of the handshake's own timeout, so that a client that connects and sends nothing holds a
/// place no longer than it did before the first byte was looked at.
pub(super) const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long writing the answer to a plain-HTTP request and reading what is left of the
/// request may take together.
pub(super) const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// The most of a plain-HTTP request read after its answer. It is read, not left unread,
/// because closing a socket with unread bytes resets the connection, and a reset can reach the
/// client before it has read the answer.
const DRAIN_BYTES: usize = 64 * 1024;

// What actix-web's `HttpServer` uses unless told otherwise, kept so that a connection is
// treated as it was when the listeners were `HttpServer`s.
/// A request's head must arrive within this.
const CLIENT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection's closing handshake must end within this.
const CLIENT_DISCONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What a listener is, for the answer a plain-HTTP request gets when it has TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HttpsOnly {
    /// The configuration section that set TLS: `admin.tls` or `metrics.tls`.
    section: &'static str,
    /// The path to ask for.
    path: &'static str,
    /// How the usual clients are given the CA.
    clients: &'static str,
}

impl HttpsOnly {
    /// The admin API's listener.
    pub(super) const ADMIN: HttpsOnly = HttpsOnly {
        section: "admin.tls",
        path: "/",
        clients: "conclave --cacert, curl --cacert",
    };

    /// The metrics endpoint's listener.
    pub(super) const METRICS: HttpsOnly = HttpsOnly {
        section: "metrics.tls",
        path: "/metrics",
        clients: "Prometheus tls_config.ca_file, curl --cacert",
    };

    /// The whole answer, head and body, to a plain-HTTP request that reached this listener at
    /// `local` (the address the client connected to, so that the URL named is one it reaches).
    fn answer(self, local: Option<SocketAddr>) -> String {
        let address = local.map_or_else(
            || "HOST:PORT".to_owned(),
            |local| SocketAddr::new(local.ip().to_canonical(), local.port()).to_string(),
        );
        let body = format!(
            "{HTTPS_ONLY_ANSWER} ({} is set): use https://{address}{} with the cluster's CA \
             ({})\n",
            self.section, self.path, self.clients
        );
        format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    }
}

/// What the admin API's and the metrics endpoint's listeners differ in.
pub(super) struct Listener<R, C> {
    /// The routes served.
    pub(super) routes: R,
    /// Run for every connection before its first request, with the connection's extensions
    /// (the admin API counts its open connections so).
    pub(super) on_connect: C,
    /// Connections open at once, handshakes included; one past them is closed as soon as it
    /// is accepted.
    pub(super) max_connections: usize,
    /// Whether a connection whose client closed its sending side is kept (actix-web's
    /// `h1_allow_half_closed`).
    pub(super) allow_half_closed: bool,
    /// What the listener says to plain HTTP when it has TLS.
    pub(super) https_only: HttpsOnly,
}

/// The HTTP listeners of a node (the admin API's and the metrics endpoint's), served by one
/// actix-server worker thread: no signal handling of its own (the node has it), and a stop
/// that waits 1 s at most for connections still open (an event stream or a scraper keeps
/// one).
///
/// One worker for both rather than a server each, because an idle worker is not free: each
/// HTTP service keeps actix-http's date clock, a 500 ms timer that tokio's timer wheel wakes
/// its thread for twice, and that was a fifth of an idle node's wake-ups per server. Two
/// clocks started together on one thread fall due together (docs/benchmarks.md, "Idle memory
/// with the replicated log", at fad2fd6).
///
/// Each listener keeps its own bound ([`Listener::max_connections`]): a connection past it is
/// closed as soon as it is accepted, so a flood of one listener cannot take the other's places.
/// The worker's own bound is their sum, so that when both are full it stops accepting.
pub(super) struct Listeners {
    builder: ServerBuilder,
    /// The sum of the listeners' bounds.
    bound: usize,
}

impl Listeners {
    /// No listener yet.
    pub(super) fn new() -> Self {
        Self {
            builder: Server::build()
                .workers(1)
                .shutdown_timeout(1)
                .disable_signals(),
            bound: 0,
        }
    }

    /// Adds `setup` on `listener` (already bound, non-blocking), over TLS when `tls` is given.
    pub(super) fn add<R, C>(
        mut self,
        listener: TcpListener,
        tls: Option<&ListenerTls>,
        setup: Listener<R, C>,
    ) -> io::Result<Self>
    where
        R: Fn(&mut web::ServiceConfig) + Clone + Send + 'static,
        C: Fn(&mut Extensions) + Clone + Send + Sync + 'static,
    {
        let Listener {
            routes,
            on_connect,
            max_connections,
            allow_half_closed,
            https_only,
        } = setup;
        let bound = ConnectionBound::new(max_connections);
        // Asks `tls` for the certificate and the client CAs at every handshake, so a reload
        // (SIGHUP) reaches this listener.
        let tls = tls.map(ListenerTls::server_config);
        let name = format!("conclave-{}", https_only.section.trim_end_matches(".tls"));
        self.builder = self.builder.listen(name, listener, move || {
            let on_connect = on_connect.clone();
            let app = App::new()
                .configure(routes.clone())
                .into_factory()
                .map_err(|error| error.error_response());
            // One HTTP service over TCP or over TLS: the types differ, the settings do not.
            macro_rules! http_service {
                () => {
                    HttpService::build()
                        .keep_alive(KeepAlive::default())
                        .client_request_timeout(CLIENT_REQUEST_TIMEOUT)
                        .client_disconnect_timeout(CLIENT_DISCONNECT_TIMEOUT)
                        .h1_allow_half_closed(allow_half_closed)
                        .on_connect_ext(move |_, extensions| on_connect(extensions))
                        // actix-web's `HttpServer` would give the App its address, host name
                        // and `secure`; the routes read none of them (no `connection_info`, no
                        // `url_for`).
                        .finish(map_config(app, |()| AppConfig::default()))
                };
            }
            match &tls {
                // A TLS listener looks at each connection's first byte before the handshake
                // (the module's documentation says why).
                Some(config) => bounded(
                    http_service!().rustls_0_23(config.clone()),
                    bound.clone(),
                    Some(https_only),
                ),
                None => bounded(http_service!().tcp(), bound.clone(), None),
            }
        })?;
        self.bound = self.bound.saturating_add(max_connections.max(1));
        Ok(self)
    }

    /// Whether no listener was added.
    pub(super) fn is_empty(&self) -> bool {
        self.bound == 0
    }

    /// Starts serving (the server runs once spawned on the current actix system).
    pub(super) fn run(self) -> Server {
        self.builder
            .max_concurrent_connections(self.bound.max(1))
            .run()
    }
}

/// The connections one listener has open, and how many it may.
#[derive(Debug, Clone)]
struct ConnectionBound {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// One connection's place under its listener's bound, freed when it is dropped.
#[derive(Debug)]
struct ConnectionPlace(Arc<AtomicUsize>);

impl ConnectionBound {
    fn new(max: usize) -> Self {
        Self {
            open: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A place for one more connection, if there is one.
    fn take(&self) -> Option<ConnectionPlace> {
        self.open
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |open| {
                (open < self.max).then_some(open + 1)
            })
            .ok()
            .map(|_| ConnectionPlace(self.open.clone()))
    }
}

impl Drop for ConnectionPlace {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `http` (a connection's whole life, handshake included) behind `bound`, and, for a TLS
/// listener, behind the look at the first byte.
fn bounded<F>(
    http: F,
    bound: ConnectionBound,
    https_only: Option<HttpsOnly>,
) -> BoxServiceFactory<(), TcpStream, (), (), ()>
where
    F: ServiceFactory<TcpStream, Config = ()> + 'static,
    F::Service: 'static,
    F::InitError: fmt::Debug,
{
    boxed::factory(fn_factory(move || {
        let http = http.new_service(());
        let bound = bound.clone();
        async move {
            let http = Rc::new(http.await.map_err(|error| {
                tracing::error!("an HTTP listener could not start its service: {error:?}");
            })?);
            Ok(fn_service(move |stream: TcpStream| {
                let (http, bound) = (http.clone(), bound.clone());
                async move {
                    // Closed at once when the listener is full: the place is the
                    // connection's until it ends, handshake and requests included.
                    let Some(_place) = bound.take() else {
                        return Ok(());
                    };
                    let stream = match https_only {
                        Some(https_only) => first_look(stream, https_only).await?,
                        None => stream,
                    };
                    std::future::poll_fn(|cx| http.poll_ready(cx))
                        .await
                        .map_err(drop)?;
                    // actix-server drops a connection's outcome; only whether it goes on
                    // counts.
                    http.call(stream).await.map(drop).map_err(drop)
                }
            }))
        }
    }))
}

/// Hands on a connection whose first byte starts a TLS handshake, unread; answers any other
/// as [`HttpsOnly::answer`] says, and closes it, as it does one that ends or stays silent
/// past [`FIRST_BYTE_TIMEOUT`]. `Err` when there is nothing to hand on.
pub(super) async fn first_look(stream: TcpStream, https_only: HttpsOnly) -> Result<TcpStream, ()> {
    let mut first = [0_u8; 1];
    match timeout(FIRST_BYTE_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(1..)) if first[0] == TLS_HANDSHAKE => Ok(stream),
        Ok(Ok(1..)) => {
            refuse_plain(stream, https_only).await;
            Err(())
        }
        // Closed before a byte came, failed, or silent too long.
        Ok(Ok(0) | Err(_)) | Err(_) => Err(()),
    }
}

/// Writes the 400 answer, closes the sending side, and reads what is left of the request so
/// that closing the socket does not reset the connection before the client has read it. A
/// client that fails or stalls in any of this is left there: the connection is closed anyway.
async fn refuse_plain(mut stream: TcpStream, https_only: HttpsOnly) {
    let answer = https_only.answer(stream.local_addr().ok());
    let exchange = async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        let mut rest = [0_u8; 4096];
        let mut drained = 0;
        while drained < DRAIN_BYTES {
            match stream.read(&mut rest).await? {
                0 => break,
                read => drained += read,
            }
        }
        io::Result::Ok(())
    };
    // Either way the connection is closed next; there is nobody to tell of a failure.
    let _ = timeout(ANSWER_TIMEOUT, exchange).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected pair: the server's side as accepted, and the client's.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("address"))
            .await
            .expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        (server, client)
    }

    /// ADMIN-TLS: a plain-HTTP request to a TLS listener gets a 400 naming https:// and the
    /// CA, then the end of the connection.
    #[tokio::test]
    async fn plain_http_is_answered_400_and_closed() {
        let (server, mut client) = pair().await;
        let port = client.peer_addr().expect("address").port();
        client
            .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("send");
        let look = tokio::spawn(first_look(server, HttpsOnly::ADMIN));
        // The answer ends with the server's side closing; the client closes its own after
        // reading it, which lets the server's draining end.
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.expect("read");
        drop(client);
        assert!(look.await.expect("the look ran").is_err());
        let body = format!(
            "{HTTPS_ONLY_ANSWER} (admin.tls is set): use https://127.0.0.1:{port}/ with the \
             cluster's CA (conclave --cacert, curl --cacert)\n"
        );
        assert_eq!(
            answer,
            format!(
                "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
        );
    }

    /// ADMIN-TLS: a connection that starts a TLS handshake is handed on with its first bytes
    /// unread, for the TLS acceptor.
    #[tokio::test]
    async fn a_tls_handshake_is_handed_on_unread() {
        let (server, mut client) = pair().await;
        client
            .write_all(&[TLS_HANDSHAKE, 0x03, 0x01])
            .await
            .expect("send");
        let mut server = first_look(server, HttpsOnly::METRICS)
            .await
            .expect("handed on");
        let mut start = [0_u8; 3];
        server.read_exact(&mut start).await.expect("read");
        assert_eq!(start, [TLS_HANDSHAKE, 0x03, 0x01]);
    }

    /// ADMIN-TLS: a client that connects and sends nothing holds its connection no longer
    /// than the bound; one that closes at once is let go.
    #[tokio::test]
    async fn a_silent_or_closed_client_is_let_go() {
        let (server, _silent) = pair().await;
        tokio::time::pause();
        let start = tokio::time::Instant::now();
        assert!(first_look(server, HttpsOnly::ADMIN).await.is_err());
        assert!(
            start.elapsed() >= FIRST_BYTE_TIMEOUT,
            "let go before the bound"
        );
        tokio::time::resume();

        let (server, client) = pair().await;
        drop(client);
        assert!(first_look(server, HttpsOnly::ADMIN).await.is_err());
    }

    /// ADMIN-TLS: the metrics listener names its own section and path.
    #[test]
    fn the_metrics_answer_names_metrics_tls() {
        let answer = HttpsOnly::METRICS.answer(Some(SocketAddr::from(([10, 0, 0, 7], 9100))));
        assert!(
            answer.ends_with(
                "(metrics.tls is set): use https://10.0.0.7:9100/metrics with the cluster's CA \
                 (Prometheus tls_config.ca_file, curl --cacert)\n"
            ),
            "{answer}"
        );
    }

    /// A listener's bound: places are taken up to it, one past it is refused, and a place
    /// comes back when its connection ends, so the next one is served again.
    #[test]
    fn a_listener_takes_connections_up_to_its_bound_and_frees_them() {
        let bound = ConnectionBound::new(2);
        let first = bound.take().expect("a first place");
        let second = bound.take().expect("a second place");
        assert!(bound.take().is_none(), "no third place past a bound of two");
        drop(first);
        let third = bound.take().expect("the freed place is taken again");
        assert!(bound.take().is_none());
        drop((second, third));
        assert_eq!(bound.open.load(Ordering::SeqCst), 0);
    }
}
