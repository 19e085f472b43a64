//! `open_serial` on a real tty (ESP-1, ESP-7): the slave side of a pseudo-terminal opened
//! with tokio-serial, exactly as a `/dev/ttyACM0` would be, with a minimal dongle answering
//! on the master side from a plain thread. Real time, but nothing waits longer than the
//! dongle takes to answer.

mod driver_support;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use conclave_espnow::{
    DongleCodec, DongleConfig, DongleEvent, Frame, Inbound, Mac, Message, Priority, Status,
    open_serial, spawn_dongle,
};
use driver_support::{info, trace};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use tokio_util::codec::{Decoder, Encoder};

/// Answers HELLO with INFO, every request with RESP{Ok}, and reports the SEND payloads.
fn serve(mut master: std::fs::File, stop: Arc<AtomicBool>, sent: std::sync::mpsc::Sender<Vec<u8>>) {
    let mut codec = DongleCodec::new();
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 1024];
    while !stop.load(Ordering::SeqCst) {
        match master.read(&mut chunk) {
            Ok(read) if read > 0 => buf.extend_from_slice(&chunk[..read]),
            // EIO while no one has the slave open: wait for the driver to open it.
            _ => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
        }
        while let Ok(Some(Inbound::Frame(frame))) = codec.decode(&mut buf) {
            let answer = match frame.message {
                Message::Hello { .. } => Message::Info(info(4)),
                Message::Send { payload, .. } => {
                    let _ = sent.send(payload);
                    Message::Resp { status: Status::Ok }
                }
                _ => Message::Resp { status: Status::Ok },
            };
            let mut out = BytesMut::new();
            codec
                .encode(Frame::new(frame.seq, answer), &mut out)
                .expect("encoding cannot fail");
            if master.write_all(&out).is_err() {
                return;
            }
        }
    }
}

/// ESP-7: the driver opens a pty slave path with tokio-serial, shakes hands and sends.
#[tokio::test]
async fn open_serial_drives_a_pseudo_terminal() {
    let _log = trace();
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let path = ptsname(&master, Vec::new()).unwrap().into_string().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (sent_tx, sent_rx) = std::sync::mpsc::channel();
    let server = {
        let master = std::fs::File::from(master);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || serve(master, stop, sent_tx))
    };

    let (handle, mut events) = spawn_dongle(
        DongleConfig::new(path.clone(), 1),
        open_serial(&path, 921_600),
    );
    let connected = tokio::time::timeout(Duration::from_secs(20), events.recv())
        .await
        .expect("no Connected within 20 s");
    assert!(
        matches!(connected, Some(DongleEvent::Connected(_))),
        "{connected:?}"
    );
    handle
        .send(Mac::BROADCAST, b"over a pty".to_vec(), Priority::Essential)
        .unwrap();
    let payload =
        tokio::task::spawn_blocking(move || sent_rx.recv_timeout(Duration::from_secs(20)))
            .await
            .unwrap()
            .expect("the SEND never reached the pty master");
    assert_eq!(payload, b"over a pty");

    drop(handle);
    stop.store(true, Ordering::SeqCst);
    // The server may sit in a blocking read; it ends with the process if not before.
    drop(server);
}

/// ESP-5: a path that does not exist is an `Open` failure naming the path, retried.
#[tokio::test(start_paused = true)]
async fn missing_port_is_reported_with_its_path() {
    let _log = trace();
    let path = "/dev/conclave-no-such-dongle";
    let (handle, _events) = spawn_dongle(DongleConfig::new(path, 1), open_serial(path, 921_600));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let status = handle.status();
    assert!(!status.connected);
    let error = status.last_error.unwrap();
    assert!(
        error.starts_with("dongle /dev/conclave-no-such-dongle: cannot open the port: "),
        "{error}"
    );
}
