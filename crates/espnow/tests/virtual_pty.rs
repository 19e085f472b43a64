//! A virtual dongle behind a pseudo-terminal, opened by the host with tokio-serial exactly
//! as a real `/dev/ttyACM0` (ESP-5, ESP-7). Real time: the kernel's pseudo-terminal is in
//! the loop.

#![allow(clippy::unwrap_used)]

mod virtual_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use conclave_espnow::{Air, Mac, Message, ResetReason, SerialLine, Status, VirtualSerialPort};
use tokio::io::AsyncWriteExt;
use virtual_support::{Host, mac, plug, quiet, send_and_wait, trace};

/// A directory of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("conclave-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens the port as the gateway's driver does.
fn open(path: &Path) -> std::io::Result<SerialLine> {
    SerialLine::open(&path.to_string_lossy(), 921_600)
}

async fn hello(host: &mut Host<SerialLine>) -> conclave_espnow::Info {
    host.raw(&[0x00]).await;
    let seq = host.request(Message::Hello { major: 1, minor: 0 }).await;
    let answer = host.recv().await;
    assert_eq!(answer.seq, seq);
    match answer.message {
        Message::Info(info) => info,
        other => panic!("expected INFO, got {other:?}"),
    }
}

/// ESP-7: tokio-serial opens the stable link to the pseudo-terminal at 921600 baud and
/// exchanges frames with the dongle, which also relays what it hears on the air.
#[tokio::test]
async fn tokio_serial_opens_the_link_and_talks_to_the_dongle() {
    let _trace = trace();
    let scratch = Scratch::new("pty-talk");
    let link = scratch.0.join("ttyVIRT-gw-a");
    let air = Air::new(1);
    let port = VirtualSerialPort::create(&link, &air, quiet(mac(1))).unwrap();
    assert_eq!(port.path(), link);
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        port.slave_path().unwrap()
    );
    let mut host = Host::new(open(&link).unwrap());
    let boot = host.recv().await;
    assert!(matches!(
        boot.message,
        Message::Boot {
            reason: ResetReason::PowerOn,
            ..
        }
    ));
    assert_eq!(hello(&mut host).await.mac, mac(1));
    assert_eq!(
        host.call(Message::SetChannel { channel: 6 }).await,
        Status::Ok
    );

    let (mut other, _other) = plug(&air, quiet(mac(2)));
    other.recv().await;
    assert_eq!(
        other.call(Message::SetChannel { channel: 6 }).await,
        Status::Ok
    );
    assert!(send_and_wait(&mut other, Mac::BROADCAST, b"over the air").await);
    let rx = host.recv().await;
    assert!(
        matches!(rx.message, Message::Rx { src, ref payload, .. } if src == mac(2) && payload == b"over the air"),
        "{rx:?}"
    );
}

/// ESP-5: unplugging closes the master and removes the link: the host's read returns end of
/// file (0 bytes) and its write fails with EIO; the path is gone until replug, which
/// brings a fresh dongle (`BOOT{PowerOn}`, state forgotten) with the same MAC back at it.
#[tokio::test]
async fn unplug_gives_eof_and_eio_and_replug_boots_a_fresh_dongle_at_the_same_path() {
    let _trace = trace();
    let scratch = Scratch::new("pty-unplug");
    let link = scratch.0.join("ttyVIRT-gw-a");
    let air = Air::new(1);
    let mut port = VirtualSerialPort::create(&link, &air, quiet(mac(1))).unwrap();
    let mut host = Host::new(open(&link).unwrap());
    host.recv().await;
    assert_eq!(
        host.call(Message::SetChannel { channel: 9 }).await,
        Status::Ok
    );

    port.unplug().await.unwrap();
    assert!(!port.is_plugged());
    assert!(air.nodes().is_empty(), "the radio left the air");
    assert!(host.next().await.is_none(), "end of file");
    let mut serial = host.into_inner();
    let err = serial.write_all(&[0x00]).await.unwrap_err();
    assert_eq!(err.raw_os_error(), Some(5), "EIO: {err}");
    assert!(link.symlink_metadata().is_err(), "the link is removed");
    assert!(open(&link).is_err());
    drop(serial);

    port.replug().unwrap();
    assert!(port.replug().is_err(), "plugged already");
    let mut host = Host::new(open(&link).unwrap());
    let boot = host.recv().await;
    assert!(matches!(
        boot.message,
        Message::Boot {
            reason: ResetReason::PowerOn,
            ..
        }
    ));
    let info = hello(&mut host).await;
    assert_eq!((info.mac, info.channel), (mac(1), 1));
    assert_eq!(air.nodes(), vec![mac(1)]);
}

/// ESP-5: the host may close the port and open it again while the dongle stays plugged (a
/// driver restarting): the dongle keeps its state and answers the new session.
#[tokio::test]
async fn the_host_may_close_and_reopen_the_port() {
    let _trace = trace();
    let scratch = Scratch::new("pty-reopen");
    let link = scratch.0.join("ttyVIRT-gw-a");
    let air = Air::new(1);
    let port = VirtualSerialPort::create(&link, &air, quiet(mac(1))).unwrap();
    let mut host = Host::new(open(&link).unwrap());
    host.recv().await;
    assert_eq!(
        host.call(Message::SetChannel { channel: 4 }).await,
        Status::Ok
    );
    drop(host);
    // The dongle's task shares this runtime: the sleep lets it see the hang-up. From then
    // on what it says is dropped, not queued for the next session.
    tokio::time::sleep(Duration::from_millis(50)).await;
    port.dongle().unwrap().log(2, "nobody listens");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(port.dongle().unwrap().is_running());

    let mut host = Host::new(open(&link).unwrap());
    host.skip_chatter = false;
    let info = hello(&mut host).await;
    assert_eq!(info.channel, 4, "no reboot: the state is kept");
    assert_eq!(port.dongle().unwrap().state().boots, 1);
}
