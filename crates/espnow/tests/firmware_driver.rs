//! The real driver against the reference firmware (issue 10): each dongle is
//! `firmware/micropython/host_dongle.py` on its own pseudo-terminal, opened by the driver with
//! tokio-serial by path as a gateway opens `/dev/ttyACM0`, the dongles on one simulated air.
//! The handshake and the firmware's INFO (ESP-3), TX credits under a burst (ESP-4), a firmware
//! restart with boot text on the line (ESP-1, ESP-3), a `RESET` and the setup after it,
//! `kill -9` and a new process as unplug and replug (ESP-5), and INFO's peer limit respected
//! by the driver.
//!
//! Skipped, with a message, when `python3` is not installed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod firmware_support;

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use conclave_espnow::{
    DongleConfig, DongleError, DongleEvent, DongleHandle, Frame, Info, Mac, Message, Priority,
    SerialLine, open_serial, spawn_dongle,
};
use firmware_support::{AirAddress, Firmware, skip_without_python};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;

/// Bound on every wait: generous against a loaded machine.
const BOUND: Duration = Duration::from_secs(20);

const MAC_A: &str = "02:00:00:00:00:0a";
const MAC_B: &str = "02:00:00:00:00:0b";

fn mac(text: &str) -> Mac {
    text.parse().unwrap()
}

/// A driver on `firmware`'s port, on `channel`.
fn driver(firmware: &Firmware, channel: u8) -> (DongleHandle, mpsc::Receiver<DongleEvent>) {
    let port = firmware.port();
    spawn_dongle(
        DongleConfig::new(port.clone(), channel),
        open_serial(&port, 921_600),
    )
}

/// Waits for the first event `pick` accepts, skipping the others.
async fn wait_for<T>(
    events: &mut mpsc::Receiver<DongleEvent>,
    what: &str,
    mut pick: impl FnMut(DongleEvent) -> Option<T>,
) -> T {
    tokio::time::timeout(BOUND, async {
        loop {
            let event = events.recv().await.expect("the driver stopped");
            if let Some(found) = pick(event) {
                return found;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {what} within {BOUND:?}"))
}

async fn connected(events: &mut mpsc::Receiver<DongleEvent>) -> Info {
    wait_for(events, "Connected", |event| match event {
        DongleEvent::Connected(info) => Some(info),
        _ => None,
    })
    .await
}

/// Waits for `payload` to arrive; returns the destination the radio says it had.
async fn received(events: &mut mpsc::Receiver<DongleEvent>, payload: &[u8]) -> Mac {
    wait_for(events, "the frame", |event| match event {
        DongleEvent::Received {
            dst, payload: got, ..
        } if got == payload => Some(dst),
        _ => None,
    })
    .await
}

/// ESP-3: the driver's handshake with the firmware; INFO says what the build can do, and the
/// driver sets the configured channel; STATS come every second.
#[tokio::test]
async fn the_driver_handshakes_with_the_firmware() {
    if skip_without_python("the_driver_handshakes_with_the_firmware") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let air = AirAddress::random();
    let firmware = Firmware::start(&air, MAC_A, &dir.path().join("a"), &[]);
    let (_handle, mut events) = driver(&firmware, 6);
    let info = connected(&mut events).await;
    assert!(
        info.firmware.starts_with("conclave-dongle-py 1.0.0"),
        "{}",
        info.firmware
    );
    assert_eq!(info.mac, mac(MAC_A));
    assert_eq!((info.protocol_major, info.protocol_minor), (1, 0));
    assert_eq!((info.espnow_version, info.max_payload), (1, 250));
    assert_eq!((info.tx_credits, info.max_peers), (8, 19));
    assert_eq!(info.channel, 6, "the driver set the configured channel");
    let stats = wait_for(&mut events, "STATS", |event| match event {
        DongleEvent::Stats {
            rx_dropped,
            tx_dropped,
            crc_errors,
        } => Some((rx_dropped, tx_dropped, crc_errors)),
        _ => None,
    })
    .await;
    assert_eq!(stats, (0, 0, 0));
}

/// ESP-4: a burst far larger than the firmware's eight credits goes through without one
/// `NO_CREDIT` or lost frame: the driver writes a `SEND` only with a credit.
#[tokio::test]
async fn credits_pace_a_burst_through_the_firmware() {
    if skip_without_python("credits_pace_a_burst_through_the_firmware") {
        return;
    }
    const FRAMES: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let air = AirAddress::random();
    // A patient radio: on a loaded machine a process can stall longer than the default
    // acknowledgement wait, which would count as a failed unicast.
    let patient = ["--ack-timeout-ms", "500"];
    let a = Firmware::start(&air, MAC_A, &dir.path().join("a"), &patient);
    let b = Firmware::start(&air, MAC_B, &dir.path().join("b"), &patient);
    let (sender, mut events_a) = driver(&a, 1);
    let (_receiver, mut events_b) = driver(&b, 1);
    connected(&mut events_a).await;
    connected(&mut events_b).await;
    sender.add_peer(mac(MAC_B), false, [0; 16]).unwrap();

    let burst = {
        let sender = sender.clone();
        tokio::spawn(async move {
            let mut sent = 0usize;
            while sent < FRAMES {
                let mut payload = vec![0x5a; 100];
                payload[..8].copy_from_slice(&(sent as u64).to_le_bytes());
                match sender.send(mac(MAC_B), payload, Priority::Essential) {
                    Ok(()) => sent += 1,
                    Err(DongleError::QueueFull { .. }) => {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    Err(err) => panic!("{err}"),
                }
            }
        })
    };
    let mut seen = vec![false; FRAMES];
    let mut count = 0;
    while count < FRAMES {
        let index = wait_for(
            &mut events_b,
            "the burst's next frame",
            |event| match event {
                DongleEvent::Received { payload, .. } if payload.len() == 100 => {
                    Some(u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize)
                }
                _ => None,
            },
        )
        .await;
        if !std::mem::replace(&mut seen[index], true) {
            count += 1;
        }
    }
    burst.await.unwrap();
    let status = sender.status();
    assert_eq!(status.tx_frames, FRAMES as u64);
    assert_eq!(status.tx_failures, 0, "{status:?}");
    assert_eq!(status.credits_reclaimed, 0, "{status:?}");
    let tx_dropped = wait_for(&mut events_a, "STATS", |event| match event {
        DongleEvent::Stats { tx_dropped, .. } => Some(tx_dropped),
        _ => None,
    })
    .await;
    assert_eq!(tx_dropped, 0, "the firmware refused no SEND");
}

/// ESP-1, ESP-3: the firmware restarts (as its watchdog would) and prints an ESP32 ROM
/// banner first: the driver counts the garbage, takes the BOOT, runs the handshake and the
/// setup again (peers included), and traffic resumes.
#[tokio::test]
async fn a_firmware_restart_with_boot_text_is_survived() {
    if skip_without_python("a_firmware_restart_with_boot_text_is_survived") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let air = AirAddress::random();
    let a = Firmware::start(&air, MAC_A, &dir.path().join("a"), &["--boot-text"]);
    let b = Firmware::start(&air, MAC_B, &dir.path().join("b"), &[]);
    let (sender, mut events_a) = driver(&a, 3);
    let (_receiver, mut events_b) = driver(&b, 3);
    connected(&mut events_a).await;
    connected(&mut events_b).await;
    sender.add_peer(mac(MAC_B), false, [0; 16]).unwrap();
    sender
        .send(mac(MAC_B), b"before".to_vec(), Priority::Essential)
        .unwrap();
    assert_eq!(received(&mut events_b, b"before").await, mac(MAC_B));
    let garbage_before = {
        let status = sender.status();
        status.crc_errors + status.malformed_frames
    };

    a.signal("USR1");
    let reason = wait_for(&mut events_a, "Rebooted", |event| match event {
        DongleEvent::Rebooted { reason } => Some(reason),
        _ => None,
    })
    .await;
    assert!(reason.contains("watchdog"), "{reason}");
    let info = connected(&mut events_a).await;
    assert_eq!(info.channel, 3, "the channel is set again");
    let status = sender.status();
    assert!(
        status.crc_errors + status.malformed_frames > garbage_before,
        "the boot text was counted as damaged frames: {status:?}"
    );
    assert_eq!(
        status.reconnects, 0,
        "a reboot on an open port is not a reconnect"
    );
    sender
        .send(mac(MAC_B), b"after".to_vec(), Priority::Essential)
        .unwrap();
    assert_eq!(
        received(&mut events_b, b"after").await,
        mac(MAC_B),
        "unicast again: the peer was added again after the reboot"
    );
}

/// The driver's port with a way in for the test: bytes handed to `inject` are written to the
/// firmware, after a lone delimiter, just before the driver's next write.
struct Tapped {
    line: SerialLine,
    inject: Arc<Mutex<Vec<u8>>>,
}

impl AsyncRead for Tapped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.line).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tapped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let pending = std::mem::take(&mut *self.inject.lock().unwrap());
        if !pending.is_empty() {
            let mut bytes = vec![0];
            bytes.extend_from_slice(&pending);
            // A few bytes into an empty pty buffer: written whole, or the test fails.
            match Pin::new(&mut self.line).poll_write(cx, &bytes) {
                Poll::Ready(Ok(written)) => assert_eq!(written, bytes.len()),
                other => panic!("injection not written: {other:?}"),
            }
        }
        Pin::new(&mut self.line).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.line).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.line).poll_shutdown(cx)
    }
}

/// ESP-3, §5.4: a `RESET` reaches the firmware (here from the test, on the driver's own line):
/// it answers, restarts, forgets channel and peers and says `BOOT{HOST_REQUEST}`; the driver
/// takes the reboot, runs the handshake and the setup again, and unicasts flow again.
#[tokio::test]
async fn the_driver_sets_the_firmware_up_again_after_a_reset() {
    if skip_without_python("the_driver_sets_the_firmware_up_again_after_a_reset") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let air = AirAddress::random();
    let a = Firmware::start(&air, MAC_A, &dir.path().join("a"), &[]);
    let b = Firmware::start(&air, MAC_B, &dir.path().join("b"), &[]);
    let inject = Arc::new(Mutex::new(Vec::new()));
    let port = a.port();
    let tap = Arc::clone(&inject);
    let (sender, mut events_a) = spawn_dongle(DongleConfig::new(port.clone(), 4), move || {
        let tap = Arc::clone(&tap);
        let opened = SerialLine::open(&port, 921_600).map(|line| Tapped { line, inject: tap });
        std::future::ready(opened)
    });
    let (_receiver, mut events_b) = driver(&b, 4);
    connected(&mut events_a).await;
    connected(&mut events_b).await;
    sender.add_peer(mac(MAC_B), false, [0; 16]).unwrap();

    let mut reset = Vec::new();
    Frame::new(0xfff0, Message::Reset)
        .to_raw()
        .encode_into(&mut reset);
    *inject.lock().unwrap() = reset;
    sender
        .send(mac(MAC_B), b"with the reset".to_vec(), Priority::Essential)
        .unwrap();
    let reason = wait_for(&mut events_a, "Rebooted", |event| match event {
        DongleEvent::Rebooted { reason } => Some(reason),
        _ => None,
    })
    .await;
    assert!(reason.contains("reset requested by the host"), "{reason}");
    assert_eq!(connected(&mut events_a).await.channel, 4);
    sender
        .send(mac(MAC_B), b"after the reset".to_vec(), Priority::Essential)
        .unwrap();
    assert_eq!(
        received(&mut events_b, b"after the reset").await,
        mac(MAC_B),
        "unicast: the peer was added again"
    );
}

/// ESP-5: `kill -9` of the firmware is an unplug (the port ends); a new firmware process at
/// the same path is a replug, found again by the driver's backoff.
#[tokio::test]
async fn killed_firmware_is_an_unplug_and_a_new_one_a_replug() {
    if skip_without_python("killed_firmware_is_an_unplug_and_a_new_one_a_replug") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let air = AirAddress::random();
    let link = dir.path().join("a");
    let mut a = Firmware::start(&air, MAC_A, &link, &[]);
    let (handle, mut events) = driver(&a, 1);
    connected(&mut events).await;
    a.kill9();
    let reason = wait_for(&mut events, "Disconnected", |event| match event {
        DongleEvent::Disconnected { reason } => Some(reason),
        _ => None,
    })
    .await;
    assert!(reason.contains(&a.port()), "{reason}");
    assert!(!handle.status().connected);

    let _again = Firmware::start(&air, MAC_A, &link, &[]);
    let info = connected(&mut events).await;
    assert_eq!(info.mac, mac(MAC_A));
    let status = handle.status();
    assert!(status.connected);
    assert_eq!(status.reconnects, 1);
}

/// ESP-3, issue 10: the driver gives the firmware no more peers than its INFO says; a frame to
/// a peer beyond that goes out as broadcast and still arrives.
#[tokio::test]
async fn the_driver_keeps_within_the_firmwares_peer_limit() {
    if skip_without_python("the_driver_keeps_within_the_firmwares_peer_limit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let air = AirAddress::random();
    let a = Firmware::start(&air, MAC_A, &dir.path().join("a"), &["--max-peers", "1"]);
    let b = Firmware::start(&air, MAC_B, &dir.path().join("b"), &[]);
    let (sender, mut events_a) = driver(&a, 1);
    let (_receiver, mut events_b) = driver(&b, 1);
    assert_eq!(connected(&mut events_a).await.max_peers, 1);
    connected(&mut events_b).await;
    // An absent peer takes the only place (it sorts first); b finds none.
    sender
        .add_peer(mac("02:00:00:00:00:01"), false, [0; 16])
        .unwrap();
    sender.add_peer(mac(MAC_B), false, [0; 16]).unwrap();
    sender
        .send(mac(MAC_B), b"to b".to_vec(), Priority::Essential)
        .unwrap();
    assert_eq!(received(&mut events_b, b"to b").await, Mac::BROADCAST);
    assert_eq!(sender.status().tx_failures, 0);
}
