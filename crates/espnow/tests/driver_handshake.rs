//! The driver's handshake (ESP-3) against a scripted fake dongle: flush byte and `HELLO`,
//! retries, giving up and backing off, `BOOT` during the handshake, version checks.

mod driver_support;

use conclave_espnow::frame::{DELIMITER, RawFrame};
use conclave_espnow::message::kind;
use conclave_espnow::{DongleEvent, Message, ResetReason, spawn_dongle};
use driver_support::{
    DONGLE_MAC, config, connect, expect_connected, fake_port, info, next_event, settle, trace,
};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::time::Instant;

/// ESP-3: the host writes a lone 0x00 and then `HELLO{1.0}`; an `INFO` with the same seq and
/// an acknowledged `SET_CHANNEL` make the dongle `Connected`.
#[tokio::test(start_paused = true)]
async fn handshake_flushes_then_says_hello_and_connects() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = plugs.next().await;
    let hello = dongle.expect().await;
    assert_eq!(hello.message, Message::Hello { major: 1, minor: 0 });
    assert_eq!(dongle.raw[0], DELIMITER, "a lone delimiter comes first");
    assert_ne!(dongle.raw[1], DELIMITER, "then the HELLO frame");
    dongle.reply(hello.seq, Message::Info(info(4))).await;
    assert_eq!(dongle.ack().await, Message::SetChannel { channel: 1 });
    let connected = expect_connected(&mut events).await;
    assert_eq!(connected.mac, DONGLE_MAC);
    assert_eq!(
        connected.channel, 1,
        "Connected reports the configured channel"
    );
    assert_eq!(connected.tx_credits, 4);
    settle().await;
    let status = handle.status();
    assert!(status.connected);
    assert_eq!(status.info, Some(connected));
    assert_eq!(status.credits_free, 4);
    assert_eq!(status.reconnects, 0);
    assert_eq!(plugs.calls(), 1);
}

/// ESP-3: a dongle silent for three tries and answering the fourth connects, on the same
/// port; every try has its own seq.
#[tokio::test(start_paused = true)]
async fn handshake_retries_until_the_dongle_answers() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (_handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = plugs.next().await;
    let mut seqs = Vec::new();
    for _ in 0..3 {
        seqs.push(dongle.expect_hello().await);
    }
    let last = dongle.expect_hello().await;
    seqs.push(last);
    seqs.dedup();
    assert_eq!(seqs.len(), 4, "every HELLO has a fresh seq");
    dongle.reply(last, Message::Info(info(4))).await;
    dongle.ack().await;
    expect_connected(&mut events).await;
    assert_eq!(plugs.calls(), 1);
}

/// ESP-3: an `INFO` answering an earlier `HELLO` (another seq) is not taken for the answer.
#[tokio::test(start_paused = true)]
async fn info_with_a_stale_seq_is_ignored() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (_handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = plugs.next().await;
    let first = dongle.expect_hello().await;
    dongle
        .reply(first.wrapping_add(100), Message::Info(info(4)))
        .await;
    let second = dongle.expect_hello().await;
    assert_ne!(first, second);
    dongle.reply(second, Message::Info(info(4))).await;
    dongle.ack().await;
    expect_connected(&mut events).await;
}

/// ESP-3 and ESP-5: a dongle silent for all five tries ends the attempt: the port is closed,
/// the failure recorded, no event published, and the port reopened after a backoff.
#[tokio::test(start_paused = true)]
async fn handshake_gives_up_after_five_tries_and_backs_off() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let config = config();
    let backoff_min = config.reconnect_backoff_min;
    let (handle, mut events) = spawn_dongle(config, open);
    let mut dongle = plugs.next().await;
    for _ in 0..5 {
        dongle.expect_hello().await;
    }
    dongle.expect_closed().await;
    let closed_at = Instant::now();
    settle().await;
    let status = handle.status();
    assert!(!status.connected);
    assert_eq!(
        status.last_error.as_deref(),
        Some("dongle fake0: no answer to HELLO after 5 tries")
    );
    assert_eq!(events.try_recv(), Err(TryRecvError::Empty));

    let mut second = plugs.next().await;
    assert!(
        Instant::now() - closed_at >= backoff_min,
        "not reopened at once"
    );
    assert_eq!(plugs.calls(), 2);
    second.answer_hello(&info(4)).await;
    second.ack().await;
    expect_connected(&mut events).await;
    settle().await;
    assert_eq!(handle.status().last_error, None);
}

/// ESP-3: a `BOOT` during the handshake (the port opening reset the chip) makes the host say
/// `HELLO` again at once, without waiting for the try's timeout.
#[tokio::test(start_paused = true)]
async fn boot_during_the_handshake_prompts_a_new_hello() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let config = config();
    let try_timeout = config.handshake_timeout;
    let (_handle, mut events) = spawn_dongle(config, open);
    let mut dongle = plugs.next().await;
    dongle.expect_hello().await;
    let booted_at = Instant::now();
    dongle
        .reply(
            0,
            Message::Boot {
                reason: ResetReason::PowerOn,
                major: 1,
                minor: 0,
            },
        )
        .await;
    let seq = dongle.expect_hello().await;
    assert!(
        Instant::now() - booted_at < try_timeout,
        "the new HELLO follows the BOOT, not the timeout"
    );
    dongle.reply(seq, Message::Info(info(4))).await;
    dongle.ack().await;
    expect_connected(&mut events).await;
}

/// ESP-3: a dongle whose frames carry another protocol major is refused with a clear error,
/// and tried again only after the longest backoff.
#[tokio::test(start_paused = true)]
async fn frames_of_another_major_are_refused() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let config = config();
    let backoff_max = config.reconnect_backoff_max;
    let (handle, mut events) = spawn_dongle(config, open);
    let mut dongle = plugs.next().await;
    let seq = dongle.expect_hello().await;
    let mut wire = Vec::new();
    RawFrame {
        version: 2,
        kind: kind::INFO,
        seq,
        payload: vec![2, 0, 5, b'2', b'.', b'0', b'.', b'0'],
    }
    .encode_into(&mut wire);
    dongle.write_raw(&wire).await;
    let refused_at = Instant::now();
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::Refused {
            reason: "dongle fake0 speaks protocol 2.x, this gateway 1.x; \
                     update the firmware or the gateway"
                .to_owned()
        }
    );
    dongle.expect_closed().await;
    settle().await;
    assert!(!handle.status().connected);

    let mut again = plugs.next().await;
    assert!(
        Instant::now() - refused_at >= backoff_max,
        "a refused dongle is not retried in a tight loop"
    );
    again.expect_hello().await;
}

/// ESP-3: an `INFO` announcing protocol 2.x is refused the same way.
#[tokio::test(start_paused = true)]
async fn info_of_another_major_is_refused() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (_handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = plugs.next().await;
    let seq = dongle.expect_hello().await;
    let mut newer = info(4);
    newer.protocol_major = 2;
    newer.protocol_minor = 3;
    dongle.reply(seq, Message::Info(newer)).await;
    match next_event(&mut events).await {
        DongleEvent::Refused { reason } => assert_eq!(
            reason,
            "dongle fake0 speaks protocol 2.x, this gateway 1.x; update the firmware or the gateway"
        ),
        other => panic!("expected Refused, got {other:?}"),
    }
    dongle.expect_closed().await;
}

/// ESP-3: another minor version of the same major is accepted.
#[tokio::test(start_paused = true)]
async fn another_minor_is_accepted() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (_handle, mut events) = spawn_dongle(config(), open);
    let mut newer = info(4);
    newer.protocol_minor = 7;
    let _dongle = connect(&mut plugs, &mut events, &newer, 0).await;
}
