//! The HTTP listeners of the admin API and the metrics endpoint, with TLS or without
//! (ADMIN-TLS, issue 26 item 1), and the answer a plain-HTTP request gets at a TLS one
//! ("a plain-HTTP request to a TLS listener gets a clear answer, not a hang").
//!
//! actix-web's `HttpServer` hands every connection of a TLS listener straight to the
//! handshake, which ends a plain-HTTP request's connection without a word: curl says "Empty
//! reply from server", which reads like a broken node. So a TLS listener here is put together
//! from the layers `HttpServer` is made of (actix-server's accept loop and connection bound,
//! actix-http's rustls acceptor and HTTP service, the same settings) with one step in front:
//! the first byte of each connection is peeked at, left unread. A TLS client's first record is
//! a handshake (byte [`TLS_HANDSHAKE`]), and its connection goes on untouched to the
//! handshake: one more system call per connection, no byte relayed or copied. Anything else
//! is answered `400 Bad Request` in plain text, one line that names `https://` and the CA
//! (it begins with [`HTTPS_ONLY_ANSWER`], by which the CLI knows it), and closed.
//!
//! The look costs nothing that is not bounded: a client that connects and sends nothing is
//! closed after [`FIRST_BYTE_TIMEOUT`] (the handshake that follows has its own 3 s), the
//! answer and the draining of the request after it take at most [`ANSWER_TIMEOUT`], and each
//! connection waits in its own task, counted in the listener's connection bound, never in
//! another's way. Listeners without TLS stay actix-web's `HttpServer`, with the same settings.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use actix_http::{HttpService, KeepAlive};
use actix_rt::net::TcpStream;
use actix_server::Server;
use actix_service::{IntoServiceFactory as _, ServiceFactoryExt as _, fn_service, map_config};
use actix_web::dev::{AppConfig, Extensions};
use actix_web::{App, HttpServer, web};
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

// What actix-web's `HttpServer` uses unless told otherwise, kept for the TLS listeners that
// no longer go through it, so that a connection is treated as before the look at its first
// byte.
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
    /// Connections served at once; past them the listener stops accepting.
    pub(super) max_connections: usize,
    /// Whether a connection whose client closed its sending side is kept (actix-web's
    /// `h1_allow_half_closed`).
    pub(super) allow_half_closed: bool,
    /// What the listener says to plain HTTP when it has TLS.
    pub(super) https_only: HttpsOnly,
}

/// Serves `setup` on `listener` (already bound, non-blocking), over TLS when `tls` is given:
/// one worker, no signal handling of its own (the node has it), and a stop that waits 1 s at
/// most for connections still open (an event stream or a scraper keeps one).
pub(super) fn serve<R, C>(
    listener: TcpListener,
    tls: Option<&ListenerTls>,
    setup: Listener<R, C>,
) -> io::Result<Server>
where
    R: Fn(&mut web::ServiceConfig) + Clone + Send + 'static,
    C: Fn(&mut Extensions) + Clone + Send + Sync + 'static,
{
    match tls {
        Some(tls) => serve_tls(listener, tls, setup),
        None => serve_plain(listener, setup),
    }
}

fn serve_plain<R, C>(listener: TcpListener, setup: Listener<R, C>) -> io::Result<Server>
where
    R: Fn(&mut web::ServiceConfig) + Clone + Send + 'static,
    C: Fn(&mut Extensions) + Clone + Send + Sync + 'static,
{
    let Listener {
        routes,
        on_connect,
        max_connections,
        allow_half_closed,
        https_only: _,
    } = setup;
    Ok(
        HttpServer::new(move || App::new().configure(routes.clone()))
            .workers(1)
            .max_connections(max_connections)
            .on_connect(move |_, extensions| on_connect(extensions))
            .h1_allow_half_closed(allow_half_closed)
            .shutdown_timeout(1)
            .disable_signals()
            .listen(listener)?
            .run(),
    )
}

fn serve_tls<R, C>(
    listener: TcpListener,
    tls: &ListenerTls,
    setup: Listener<R, C>,
) -> io::Result<Server>
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
    // Asks `tls` for the certificate and the client CAs at every handshake, so a reload
    // (SIGHUP) reaches this listener as it did through `HttpServer`.
    let config = tls.server_config();
    let name = format!("conclave-{}", https_only.section);
    Ok(Server::build()
        .workers(1)
        .max_concurrent_connections(max_connections)
        .shutdown_timeout(1)
        .disable_signals()
        .listen(name, listener, move || {
            let on_connect = on_connect.clone();
            let app = App::new()
                .configure(routes.clone())
                .into_factory()
                .map_err(|error| error.error_response());
            let http = HttpService::build()
                .keep_alive(KeepAlive::default())
                .client_request_timeout(CLIENT_REQUEST_TIMEOUT)
                .client_disconnect_timeout(CLIENT_DISCONNECT_TIMEOUT)
                .h1_allow_half_closed(allow_half_closed)
                .on_connect_ext(move |_, extensions| on_connect(extensions))
                // `HttpServer` would give the App its address, host name and `secure`; the
                // routes read none of them (no `connection_info`, no `url_for`).
                .finish(map_config(app, |()| AppConfig::default()))
                .rustls_0_23(config.clone())
                // actix-server drops a connection's outcome; only whether it goes on counts.
                .map_err(|_| ());
            fn_service(move |stream| first_look(stream, https_only)).and_then(http)
        })?
        .run())
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
}
