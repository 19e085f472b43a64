//! A load generator for the admin API's writes, for `bench/kv_commit.py --load rustls`: N
//! keep-alive HTTP/1.1 connections, in clear or over TLS, spread over T threads that each run
//! a single-threaded tokio runtime. Each connection PUTs `/v1/kv/{tag}-{thread}-{n}` and waits
//! for the answer before the next (no pipelining), the keys numbered per thread as the wrk
//! script of kv_commit numbers them. It prints one line, `LOAD {json}`: the answered requests,
//! the measured seconds, p50 and p99 in microseconds, and the count of every status but 200.
//!
//! Why a load generator of our own, beside wrk: the secured-vs-plain comparison of issue 26
//! runs the load on the same two cores as the three nodes, so the client's TLS is charged to
//! the secured side. wrk reads TLS through OpenSSL with two reads per record, and its own tail
//! over TLS is long: `GET /health` on one connection had a p99 of 1.7–2.0 ms over TLS against
//! 0.13–0.22 ms in clear, where a Python client on the same node saw 0.17 against 0.14. This
//! one speaks TLS through rustls on *ring*, the library the node and the CLI use, and checks the
//! node's certificate against `--cacert`.
//!
//! ```text
//! cargo run --release -p conclave-gateway --example http_load -- \
//!     --url https://127.0.0.1:PORT --cacert ca.pem --connections 32 --threads 2 --seconds 5
//! ```
//!
//! Connections are opened (and their handshakes done) before the clock starts; an I/O error
//! on any connection ends the run with an error naming it.

#![expect(
    clippy::disallowed_types,
    reason = "a load generator measures real time"
)]

use std::collections::BTreeMap;
use std::io::{self, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const USAGE: &str = "usage: http_load --url http[s]://HOST:PORT [--cacert FILE] [--connections N] \
[--threads T] [--seconds S] [--value-bytes B] [--key-space K] [--tag TAG]";

/// What the command line asks for.
#[derive(Debug, Clone)]
struct Options {
    host: String,
    port: u16,
    tls: bool,
    cacert: Option<PathBuf>,
    connections: usize,
    threads: usize,
    seconds: f64,
    value_bytes: usize,
    /// Each thread writes its keys 1..=key_space in turn; 0: a new key every time.
    key_space: u64,
    tag: String,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut url = None;
        let mut options = Self {
            host: String::new(),
            port: 0,
            tls: false,
            cacert: None,
            connections: 1,
            threads: 1,
            seconds: 5.0,
            value_bytes: 64,
            key_space: 0,
            tag: "load".to_owned(),
        };
        while let Some(flag) = args.next() {
            let mut value = || args.next().ok_or(format!("{flag} needs a value\n{USAGE}"));
            let number = |text: String| {
                text.parse::<u64>()
                    .map_err(|err| format!("{flag} {text}: {err}"))
            };
            match flag.as_str() {
                "--url" => url = Some(value()?),
                "--cacert" => options.cacert = Some(PathBuf::from(value()?)),
                "--connections" => {
                    options.connections =
                        usize::try_from(number(value()?)?).map_err(|e| e.to_string())?
                }
                "--threads" => {
                    options.threads =
                        usize::try_from(number(value()?)?).map_err(|e| e.to_string())?
                }
                "--seconds" => {
                    let text = value()?;
                    options.seconds = text
                        .parse()
                        .map_err(|err| format!("--seconds {text}: {err}"))?;
                }
                "--value-bytes" => {
                    options.value_bytes =
                        usize::try_from(number(value()?)?).map_err(|e| e.to_string())?
                }
                "--key-space" => options.key_space = number(value()?)?,
                "--tag" => options.tag = value()?,
                "-h" | "--help" => return Err(USAGE.to_owned()),
                other => return Err(format!("unknown option {other}\n{USAGE}")),
            }
        }
        let url = url.ok_or(format!("--url is required\n{USAGE}"))?;
        let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!("--url {url}: not http:// or https://"));
        };
        let authority = rest.trim_end_matches('/');
        let (host, port) = authority
            .rsplit_once(':')
            .ok_or(format!("--url {url}: no port"))?;
        options.host = host.to_owned();
        options.port = port
            .parse()
            .map_err(|err| format!("--url {url}: port {port}: {err}"))?;
        options.tls = tls;
        if tls && options.cacert.is_none() {
            return Err(format!(
                "--url {url} is https: --cacert names the CA that signed the node's certificate"
            ));
        }
        if options.connections == 0 || options.threads == 0 {
            return Err("--connections and --threads must be at least 1".to_owned());
        }
        if options.seconds.is_nan() || options.seconds <= 0.0 {
            return Err("--seconds must be above 0".to_owned());
        }
        options.threads = options.threads.min(options.connections);
        Ok(options)
    }
}

/// What one thread's connections saw.
#[derive(Debug, Default)]
struct Tally {
    /// Every answer's latency, in microseconds.
    latencies_us: Vec<u32>,
    /// Answers by status, 200 included.
    statuses: BTreeMap<u16, u64>,
    /// The measured time of this thread.
    elapsed: Duration,
}

impl Tally {
    fn merge(&mut self, other: Self) {
        self.latencies_us.extend(other.latencies_us);
        for (status, count) in other.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
        self.elapsed = self.elapsed.max(other.elapsed);
    }
}

/// A connection, in clear or over TLS.
trait Stream: AsyncRead + AsyncWrite + Unpin {}
impl<S: AsyncRead + AsyncWrite + Unpin> Stream for S {}

fn client_config(path: &PathBuf) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|err| format!("--cacert {}: {err}", path.display()))?;
    for certificate in certificates {
        let certificate =
            certificate.map_err(|err| format!("--cacert {}: {err}", path.display()))?;
        roots
            .add(certificate)
            .map_err(|err| format!("--cacert {}: {err}", path.display()))?;
    }
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|err| err.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

async fn connect(options: &Options, tls: Option<&TlsConnector>) -> io::Result<Box<dyn Stream>> {
    let tcp = TcpStream::connect((options.host.as_str(), options.port)).await?;
    tcp.set_nodelay(true)?;
    match tls {
        None => Ok(Box::new(tcp)),
        Some(connector) => {
            let name = ServerName::try_from(options.host.clone())
                .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err))?;
            Ok(Box::new(connector.connect(name, tcp).await?))
        }
    }
}

/// Appends what one read of `stream` brings to `buffer`; an end of stream is an error saying
/// `closed`.
async fn read_more(
    stream: &mut dyn Stream,
    chunk: &mut [u8],
    buffer: &mut Vec<u8>,
    closed: &str,
) -> io::Result<()> {
    let read = stream.read(chunk).await?;
    if read == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            closed.to_owned(),
        ));
    }
    buffer.extend_from_slice(&chunk[..read]);
    Ok(())
}

/// Reads one answer into `buffer`: its status. Errors on a malformed or chunked answer, or on
/// bytes past it (nothing is pipelined, so there can be none).
async fn read_answer(stream: &mut dyn Stream, buffer: &mut Vec<u8>) -> io::Result<u16> {
    buffer.clear();
    let malformed = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let mut chunk = [0_u8; 4096];
    let (head_end, body_len) = loop {
        read_more(stream, &mut chunk, buffer, "the node closed the connection").await?;
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head =
                std::str::from_utf8(&buffer[..at]).map_err(|_| malformed("a head not in UTF-8"))?;
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>())
                })
                .ok_or_else(|| malformed("an answer without Content-Length"))?
                .map_err(|_| malformed("a Content-Length that is not a number"))?;
            break (at + 4, length);
        }
    };
    while buffer.len() < head_end + body_len {
        read_more(
            stream,
            &mut chunk,
            buffer,
            "the node closed the connection mid-answer",
        )
        .await?;
    }
    if buffer.len() > head_end + body_len {
        return Err(malformed("bytes past the answer"));
    }
    let status = buffer
        .get(9..12)
        .and_then(|code| std::str::from_utf8(code).ok())
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| malformed("no status code"))?;
    Ok(status)
}

/// The keys of one thread: `{prefix}{n}`, n counting up, wrapping at the key space.
struct KeyCounter {
    prefix: String,
    next: std::cell::Cell<u64>,
    key_space: u64,
}

impl KeyCounter {
    fn next(&self) -> u64 {
        let mut n = self.next.get() + 1;
        if self.key_space > 0 {
            n = (n - 1) % self.key_space + 1;
        }
        self.next.set(n);
        n
    }
}

async fn drive(
    mut stream: Box<dyn Stream>,
    options: &Options,
    keys: &KeyCounter,
    body: &[u8],
    deadline: Instant,
) -> io::Result<Tally> {
    let mut tally = Tally::default();
    let mut request = Vec::with_capacity(256 + body.len());
    let mut answer = Vec::with_capacity(4096);
    while Instant::now() < deadline {
        request.clear();
        write!(
            request,
            "PUT /v1/kv/{}{} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            keys.prefix,
            keys.next(),
            options.host,
            options.port,
            body.len()
        )?;
        request.extend_from_slice(body);
        let sent = Instant::now();
        stream.write_all(&request).await?;
        stream.flush().await?;
        let status = read_answer(stream.as_mut(), &mut answer).await?;
        let micros = u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX);
        tally.latencies_us.push(micros);
        *tally.statuses.entry(status).or_default() += 1;
    }
    Ok(tally)
}

/// One thread: opens its connections, waits for every thread to have opened theirs, then
/// writes until the deadline.
fn run_thread(
    options: Arc<Options>,
    index: usize,
    connections: usize,
    tls: Option<TlsConnector>,
    ready: Arc<Barrier>,
) -> Result<Tally, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|err| format!("a tokio runtime: {err}"))?;
    let local = tokio::task::LocalSet::new();
    let streams = local.block_on(&runtime, async {
        let mut streams = Vec::with_capacity(connections);
        for _ in 0..connections {
            streams.push(connect(&options, tls.as_ref()).await?);
        }
        Ok::<_, io::Error>(streams)
    });
    // Every thread passes the barrier, connected or not, so none waits forever.
    ready.wait();
    let streams =
        streams.map_err(|err| format!("connecting to {}:{}: {err}", options.host, options.port))?;
    let body = format!("{{\"value\":\"{}\"}}", "v".repeat(options.value_bytes)).into_bytes();
    let keys = std::rc::Rc::new(KeyCounter {
        prefix: format!("{}-{index}-", options.tag),
        next: std::cell::Cell::new(0),
        key_space: options.key_space,
    });
    let body = std::rc::Rc::new(body);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(options.seconds);
    let tallies = local.block_on(&runtime, async {
        let tasks: Vec<_> = streams
            .into_iter()
            .map(|stream| {
                let (options, keys, body) = (options.clone(), keys.clone(), body.clone());
                tokio::task::spawn_local(async move {
                    drive(stream, &options, &keys, &body, deadline).await
                })
            })
            .collect();
        let mut tallies = Vec::with_capacity(tasks.len());
        for task in tasks {
            tallies.push(task.await);
        }
        tallies
    });
    let elapsed = start.elapsed();
    let mut total = Tally::default();
    for tally in tallies {
        let tally = tally
            .map_err(|err| format!("a connection's task: {err}"))?
            .map_err(|err| format!("writing to {}:{}: {err}", options.host, options.port))?;
        total.merge(tally);
    }
    total.elapsed = elapsed;
    Ok(total)
}

/// The `p`th percentile (0–100) of sorted values, 0 when there are none.
fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn run(options: Options) -> Result<String, String> {
    let tls = match (&options.tls, &options.cacert) {
        (true, Some(path)) => Some(TlsConnector::from(client_config(path)?)),
        _ => None,
    };
    let options = Arc::new(options);
    let ready = Arc::new(Barrier::new(options.threads));
    let threads: Vec<_> = (0..options.threads)
        .map(|index| {
            // The connections as evenly as they go, the first threads taking one more.
            let share = options.connections / options.threads
                + usize::from(index < options.connections % options.threads);
            let (options, tls, ready) = (options.clone(), tls.clone(), ready.clone());
            std::thread::spawn(move || run_thread(options, index, share, tls, ready))
        })
        .collect();
    let mut total = Tally::default();
    for thread in threads {
        let tally = thread
            .join()
            .map_err(|_| "a load thread panicked".to_owned())??;
        total.merge(tally);
    }
    total.latencies_us.sort_unstable();
    let requests = total.latencies_us.len();
    let others: Vec<String> = total
        .statuses
        .iter()
        .filter(|(status, _)| **status != 200)
        .map(|(status, count)| format!("\"{status}\": {count}"))
        .collect();
    Ok(format!(
        "LOAD {{\"requests\": {requests}, \"seconds\": {:.6}, \"p50_us\": {}, \"p99_us\": {}, \"others\": {{{}}}}}",
        total.elapsed.as_secs_f64(),
        percentile(&total.latencies_us, 50.0),
        percentile(&total.latencies_us, 99.0),
        others.join(", ")
    ))
}

fn main() -> ExitCode {
    let result = Options::parse(std::env::args().skip(1)).and_then(run);
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("http_load: {message}");
            ExitCode::FAILURE
        }
    }
}
