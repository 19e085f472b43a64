//! A small scripted fake dongle for the driver tests: the dongle end of a `tokio::io::duplex`,
//! speaking through [`DongleCodec`], that does nothing unless the test tells it to. Every
//! call of the driver's port factory creates a new pair and hands the dongle end to the
//! test, so a test sees each (re)connection and counts them.
//!
//! Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use conclave_espnow::{
    DongleCodec, DongleConfig, DongleEvent, DongleHandle, Frame, Inbound, Info, Mac, Message,
    Priority, Status,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::{Decoder, Encoder};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::util::SubscriberInitExt;

/// The fake dongle's own MAC.
pub(crate) const DONGLE_MAC: Mac = Mac([0x24, 0x6f, 0x28, 0xaa, 0xbb, 0xcc]);
/// A peer somewhere on the air.
pub(crate) const PEER_A: Mac = Mac([0x02, 0, 0, 0, 0, 0x0a]);
/// Another one.
pub(crate) const PEER_B: Mac = Mac([0x02, 0, 0, 0, 0, 0x0b]);

/// Logs of the driver, shown by the test harness when a test fails.
pub(crate) fn trace() -> tracing::subscriber::DefaultGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("debug"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .set_default()
}

/// A test's driver settings: the defaults, named "fake0".
pub(crate) fn config() -> DongleConfig {
    DongleConfig::new("fake0", 1)
}

/// An `INFO` of protocol 1.0 with `tx_credits` credits and 250-byte payloads.
pub(crate) fn info(tx_credits: u8) -> Info {
    Info {
        protocol_major: 1,
        protocol_minor: 0,
        firmware: "1.2.0".to_owned(),
        mac: DONGLE_MAC,
        espnow_version: 1,
        max_payload: 250,
        channel: 11,
        tx_credits,
        max_peers: 20,
    }
}

/// Fails a test that waits for something that never comes, instead of hanging it. Under
/// paused time this costs no real time.
pub(crate) async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(600), future)
        .await
        .expect("the test waited 600 s (virtual) for something that never came")
}

/// Lets the driver task run until it waits for something.
pub(crate) async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// The test's side of the port factory: one [`FakeDongle`] per call.
pub(crate) struct Plugs {
    dongles: mpsc::UnboundedReceiver<FakeDongle>,
    calls: Arc<AtomicUsize>,
    /// When each call happened (tokio time).
    pub(crate) times: Arc<Mutex<Vec<Instant>>>,
}

impl Plugs {
    /// The dongle of the next factory call.
    pub(crate) async fn next(&mut self) -> FakeDongle {
        within(self.dongles.recv())
            .await
            .expect("the driver dropped its port factory")
    }

    /// Factory calls so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// A port factory for `spawn_dongle` that fails its first `failures` calls with "not
/// found", then plugs a new fake dongle in at every call.
pub(crate) fn fake_port_failing(
    failures: usize,
) -> (
    impl FnMut() -> std::future::Ready<io::Result<DuplexStream>> + Send + 'static,
    Plugs,
) {
    let (plug, dongles) = mpsc::unbounded_channel();
    let calls = Arc::new(AtomicUsize::new(0));
    let times = Arc::new(Mutex::new(Vec::new()));
    let plugs = Plugs {
        dongles,
        calls: Arc::clone(&calls),
        times: Arc::clone(&times),
    };
    let factory = move || {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        times.lock().expect("times lock").push(Instant::now());
        if call < failures {
            return std::future::ready(Err(io::Error::new(
                io::ErrorKind::NotFound,
                "/dev/fake0: no such device",
            )));
        }
        let (host, dongle) = tokio::io::duplex(64 * 1024);
        // The test may have stopped listening; the driver then talks to nobody.
        let _ = plug.send(FakeDongle::new(dongle));
        std::future::ready(Ok(host))
    };
    (factory, plugs)
}

/// A port factory that plugs a new fake dongle in at every call.
pub(crate) fn fake_port() -> (
    impl FnMut() -> std::future::Ready<io::Result<DuplexStream>> + Send + 'static,
    Plugs,
) {
    fake_port_failing(0)
}

/// The dongle end of one connection.
pub(crate) struct FakeDongle {
    io: DuplexStream,
    buf: BytesMut,
    codec: DongleCodec,
    /// Every byte the host wrote, as written.
    pub(crate) raw: Vec<u8>,
}

impl FakeDongle {
    fn new(io: DuplexStream) -> Self {
        Self {
            io,
            buf: BytesMut::new(),
            codec: DongleCodec::new(),
            raw: Vec::new(),
        }
    }

    /// The host's next frame, or `None` when the host closed the port.
    pub(crate) async fn recv(&mut self) -> Option<Frame> {
        loop {
            match self.codec.decode(&mut self.buf) {
                Ok(Some(Inbound::Frame(frame))) => return Some(frame),
                Ok(Some(Inbound::OtherVersion(raw))) => {
                    panic!("host sent another version: {raw:?}")
                }
                Ok(None) => {}
                Err(err) => panic!("codec error: {err}"),
            }
            let mut chunk = [0u8; 4096];
            let read = self.io.read(&mut chunk).await.ok()?;
            if read == 0 {
                return None;
            }
            self.raw.extend_from_slice(&chunk[..read]);
            self.buf.extend_from_slice(&chunk[..read]);
        }
    }

    /// The host's next frame; fails the test if the port closes.
    pub(crate) async fn expect(&mut self) -> Frame {
        within(self.recv())
            .await
            .expect("the driver closed the port")
    }

    /// Waits for the host to close the port, ignoring what it still sends.
    pub(crate) async fn expect_closed(&mut self) {
        within(async { while self.recv().await.is_some() {} }).await;
    }

    /// Fails the test if the host writes a frame within `time`.
    pub(crate) async fn expect_nothing_for(&mut self, time: Duration) {
        if let Ok(frame) = tokio::time::timeout(time, self.recv()).await {
            panic!("expected silence from the host, got {frame:?}");
        }
    }

    /// Writes a message with `seq`.
    pub(crate) async fn reply(&mut self, seq: u16, message: Message) {
        let mut out = BytesMut::new();
        DongleCodec::new()
            .encode(Frame::new(seq, message), &mut out)
            .expect("encoding cannot fail");
        self.write_raw(&out).await;
    }

    /// Answers the request `seq` with `RESP{status}`.
    pub(crate) async fn respond(&mut self, seq: u16, status: Status) {
        self.reply(seq, Message::Resp { status }).await;
    }

    /// Reports the radio done with the `SEND` of `send_seq` (a `TX_DONE`, seq 0).
    pub(crate) async fn tx_done(&mut self, send_seq: u16, mac: Mac, ok: bool) {
        self.reply(0, Message::TxDone { send_seq, mac, ok }).await;
    }

    /// Writes bytes as they are.
    pub(crate) async fn write_raw(&mut self, bytes: &[u8]) {
        self.io
            .write_all(bytes)
            .await
            .expect("the driver closed the port");
        self.io.flush().await.expect("the driver closed the port");
    }

    /// Expects a `HELLO` of protocol 1.0 and returns its seq.
    pub(crate) async fn expect_hello(&mut self) -> u16 {
        let frame = self.expect().await;
        assert_eq!(
            frame.message,
            Message::Hello { major: 1, minor: 0 },
            "expected HELLO"
        );
        frame.seq
    }

    /// Expects a `HELLO` and answers it with `info`.
    pub(crate) async fn answer_hello(&mut self, info: &Info) {
        let seq = self.expect_hello().await;
        self.reply(seq, Message::Info(info.clone())).await;
    }

    /// Expects a request and answers `RESP{status}`; returns the request.
    pub(crate) async fn answer(&mut self, status: Status) -> Frame {
        let frame = self.expect().await;
        self.respond(frame.seq, status).await;
        frame
    }

    /// Expects a request and acknowledges it; returns its message.
    pub(crate) async fn ack(&mut self) -> Message {
        self.answer(Status::Ok).await.message
    }

    /// Expects a `SEND` and returns its seq, destination and payload (unanswered).
    pub(crate) async fn expect_send(&mut self) -> (u16, Mac, Vec<u8>) {
        let frame = self.expect().await;
        match frame.message {
            Message::Send { dst, payload } => (frame.seq, dst, payload),
            other => panic!("expected SEND, got {other:?}"),
        }
    }
}

/// Queues `payload` for `dst` as an essential frame; the queue must take it.
pub(crate) fn send_essential(handle: &DongleHandle, dst: Mac, payload: &[u8]) {
    handle
        .send(dst, payload.to_vec(), Priority::Essential)
        .expect("the driver's queue takes the frame");
}

/// The driver's next event.
pub(crate) async fn next_event(events: &mut mpsc::Receiver<DongleEvent>) -> DongleEvent {
    within(events.recv())
        .await
        .expect("the driver dropped its event channel")
}

/// Expects `Connected` as the next event and returns its `INFO`.
pub(crate) async fn expect_connected(events: &mut mpsc::Receiver<DongleEvent>) -> Info {
    match next_event(events).await {
        DongleEvent::Connected(info) => info,
        other => panic!("expected Connected, got {other:?}"),
    }
}

/// Plugs the next dongle in, answers its handshake with `info`, acknowledges the
/// `SET_CHANNEL` (and `extra_setup` more setup requests), and waits for `Connected`.
pub(crate) async fn connect(
    plugs: &mut Plugs,
    events: &mut mpsc::Receiver<DongleEvent>,
    info: &Info,
    extra_setup: usize,
) -> FakeDongle {
    let mut dongle = plugs.next().await;
    dongle.answer_hello(info).await;
    let first = dongle.ack().await;
    assert!(
        matches!(first, Message::SetChannel { .. }),
        "expected SET_CHANNEL first, got {first:?}"
    );
    for _ in 0..extra_setup {
        dongle.ack().await;
    }
    expect_connected(events).await;
    dongle
}
