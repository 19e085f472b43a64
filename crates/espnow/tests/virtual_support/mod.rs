//! A scripted host for the virtual dongle tests: it speaks the host side of ESP-2 with the
//! crate's own `DongleCodec`, one frame at a time, so each test states exactly what it sends
//! and what it expects back.

#![allow(clippy::unwrap_used, dead_code, unreachable_pub)]

use std::time::Duration;

use conclave_espnow::{
    Air, DongleCodec, Frame, Inbound, Mac, Message, Status, VirtualDongle, VirtualDongleConfig,
    VirtualDongleHandle,
};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio_util::codec::Framed;

/// Installs a subscriber for this test only, so a failure shows the dongle's log.
pub fn trace() -> tracing::subscriber::DefaultGuard {
    let subscriber = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "debug".into()),
        )
        .finish();
    tracing::subscriber::set_default(subscriber)
}

/// Test MAC number `n`.
pub fn mac(n: u8) -> Mac {
    Mac([0x02, 0xc0, 0x4c, 0x00, 0x00, n])
}

/// The host's end of the serial line.
pub struct Host<T> {
    framed: Framed<T, DongleCodec>,
    next_seq: u16,
    /// Skip `STATS` and `LOG` in `recv`: they come on their own schedule.
    pub skip_chatter: bool,
}

impl<T: AsyncRead + AsyncWrite + Unpin> Host<T> {
    pub fn new(io: T) -> Self {
        Self {
            framed: Framed::new(io, DongleCodec::new()),
            next_seq: 1,
            skip_chatter: true,
        }
    }

    /// Sends a request; returns its seq.
    pub async fn request(&mut self, message: Message) -> u16 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.framed.send(Frame::new(seq, message)).await.unwrap();
        seq
    }

    /// Writes bytes as they are, bypassing the codec.
    pub async fn raw(&mut self, bytes: &[u8]) {
        let io = self.framed.get_mut();
        io.write_all(bytes).await.unwrap();
        io.flush().await.unwrap();
    }

    /// The next inbound item, or `None` at end of stream; panics after 10 s (of the test's
    /// clock) so that a hang fails with a message.
    pub async fn next(&mut self) -> Option<std::io::Result<Inbound>> {
        loop {
            let item = tokio::time::timeout(Duration::from_secs(10), self.framed.next())
                .await
                .expect("no frame from the dongle");
            if self.skip_chatter {
                if let Some(Ok(Inbound::Frame(Frame {
                    message: Message::Stats { .. } | Message::Log { .. },
                    ..
                }))) = &item
                {
                    continue;
                }
            }
            return item;
        }
    }

    /// The next frame of this protocol version.
    pub async fn recv(&mut self) -> Frame {
        match self.next().await {
            Some(Ok(Inbound::Frame(frame))) => frame,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// Sends a request and returns the status of its `RESP`, skipping unsolicited frames
    /// (`RX`, `TX_DONE`, `BOOT`) that come first.
    pub async fn call(&mut self, message: Message) -> Status {
        let seq = self.request(message).await;
        self.resp(seq).await
    }

    /// Waits for the `RESP` of `seq`.
    pub async fn resp(&mut self, seq: u16) -> Status {
        loop {
            let frame = self.recv().await;
            match frame.message {
                Message::Resp { status } if frame.seq == seq => return status,
                Message::Resp { .. } | Message::Info(_) => {
                    panic!("answer for another seq than {seq}: {frame:?}")
                }
                _ => {}
            }
        }
    }

    /// Waits for the next frame that matches, dropping the others.
    pub async fn until(&mut self, mut wanted: impl FnMut(&Message) -> bool) -> Frame {
        loop {
            let frame = self.recv().await;
            if wanted(&frame.message) {
                return frame;
            }
        }
    }

    /// Asserts that nothing but chatter arrives within `window` of the test's clock.
    pub async fn expect_silence(&mut self, window: Duration) {
        if let Ok(item) = tokio::time::timeout(window, self.next()).await {
            panic!("expected silence, got {item:?}");
        }
    }

    pub fn into_inner(self) -> T {
        self.framed.into_inner()
    }
}

/// A dongle on `air` behind a duplex, and the host's end.
pub fn plug(air: &Air, config: VirtualDongleConfig) -> (Host<DuplexStream>, VirtualDongleHandle) {
    let (host, device) = tokio::io::duplex(64 * 1024);
    let dongle = VirtualDongle::new(air, config).unwrap().spawn(device);
    (Host::new(host), dongle)
}

/// A config without `STATS`, for tests that count frames.
pub fn quiet(mac: Mac) -> VirtualDongleConfig {
    VirtualDongleConfig {
        stats_interval: None,
        ..VirtualDongleConfig::new(mac)
    }
}

/// A dongle that has booted and answered `HELLO`, on `channel`, with `peers` added.
pub async fn ready(
    air: &Air,
    config: VirtualDongleConfig,
    channel: u8,
    peers: &[Mac],
) -> (Host<DuplexStream>, VirtualDongleHandle) {
    let (mut host, dongle) = plug(air, config);
    let boot = host.recv().await;
    assert!(matches!(boot.message, Message::Boot { .. }), "{boot:?}");
    assert_eq!(host.call(Message::SetChannel { channel }).await, Status::Ok);
    for peer in peers {
        assert_eq!(host.call(add_peer(*peer)).await, Status::Ok);
    }
    (host, dongle)
}

pub fn add_peer(mac: Mac) -> Message {
    Message::AddPeer {
        mac,
        channel: 0,
        encrypt: false,
        key: [0; 16],
    }
}

pub fn send(dst: Mac, payload: &[u8]) -> Message {
    Message::Send {
        dst,
        payload: payload.to_vec(),
    }
}

/// Sends and waits for both the `RESP` and the `TX_DONE` of one frame; returns `ok`.
pub async fn send_and_wait<T: AsyncRead + AsyncWrite + Unpin>(
    host: &mut Host<T>,
    dst: Mac,
    payload: &[u8],
) -> bool {
    let seq = host.request(send(dst, payload)).await;
    assert_eq!(host.resp(seq).await, Status::Ok);
    let done = host
        .until(|message| matches!(message, Message::TxDone { .. }))
        .await;
    match done.message {
        Message::TxDone { send_seq, mac, ok } => {
            assert_eq!(send_seq, seq);
            assert_eq!(done.seq, seq);
            assert_eq!(mac, dst);
            ok
        }
        _ => unreachable!(),
    }
}
