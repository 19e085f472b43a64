//! The driver across failures (ESP-3, ESP-5) against a scripted fake dongle: a reboot in
//! the middle of a session, an unplug (EOF), a dongle that stops answering, a port that
//! cannot be opened, and the driver's end when its handles are dropped.

mod driver_support;

use std::time::Duration;

use conclave_espnow::{DongleEvent, Mac, Message, Priority, ResetReason, Status, spawn_dongle};
use driver_support::{
    PEER_A, PEER_B, config, connect, expect_connected, fake_port, fake_port_failing, info,
    next_event, send_essential, settle, trace, within,
};

/// ESP-3 / ESP-5: a `BOOT` in the middle of a session publishes `Rebooted`, loses the
/// `SEND`s in flight (their credits with them), says `HELLO` again and re-sends channel and
/// peers, then publishes `Connected` again.
#[tokio::test(start_paused = true)]
async fn boot_mid_session_sets_the_dongle_up_again() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    handle.add_peer(PEER_A, false, [0; 16]).unwrap();
    let mut dongle = connect(&mut plugs, &mut events, &info(2), 1).await;

    send_essential(&handle, PEER_A, b"in flight");
    let (seq, _, _) = dongle.expect_send().await;
    dongle.respond(seq, Status::Ok).await;
    dongle
        .reply(
            0,
            Message::Boot {
                reason: ResetReason::Watchdog,
                major: 1,
                minor: 0,
            },
        )
        .await;
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::TxDone {
            mac: PEER_A,
            ok: false
        }
    );
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::Rebooted {
            reason: "dongle fake0 rebooted: watchdog".to_owned()
        }
    );

    // Frames queued while the dongle is set up again wait for it.
    send_essential(&handle, PEER_A, b"after");
    dongle.answer_hello(&info(2)).await;
    assert_eq!(dongle.ack().await, Message::SetChannel { channel: 1 });
    assert_eq!(
        dongle.ack().await,
        Message::AddPeer {
            mac: PEER_A,
            channel: 0,
            encrypt: false,
            key: [0; 16]
        }
    );
    expect_connected(&mut events).await;
    let (_, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"after");
    settle().await;
    let status = handle.status();
    assert!(status.connected);
    assert_eq!(status.credits_free, 1, "only the new SEND holds a credit");
    assert_eq!(status.tx_failures, 1);
    assert_eq!(status.reconnects, 0, "a reboot is not a reconnect");
    assert_eq!(plugs.calls(), 1, "the port stays open");
}

/// ESP-5: EOF on the port publishes `Disconnected`, drops the credits in flight, reopens the
/// port through the factory, and the frames queued meanwhile go out after the new handshake.
#[tokio::test(start_paused = true)]
async fn eof_reconnects_and_sends_what_was_queued() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let dongle = {
        let mut dongle = connect(&mut plugs, &mut events, &info(1), 0).await;
        send_essential(&handle, PEER_A, b"lost");
        dongle.expect_send().await;
        dongle
    };
    drop(dongle);
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::TxDone {
            mac: PEER_A,
            ok: false
        }
    );
    match next_event(&mut events).await {
        DongleEvent::Disconnected { reason } => assert_eq!(
            reason,
            "dongle fake0 unplugged or unreachable: end of file on the port"
        ),
        other => panic!("expected Disconnected, got {other:?}"),
    }
    let status = handle.status();
    assert!(!status.connected);
    assert_eq!(status.info, None);

    send_essential(&handle, PEER_B, b"queued 1");
    handle
        .send(PEER_B, b"queued 2".to_vec(), Priority::Droppable)
        .unwrap();
    let mut dongle = connect(&mut plugs, &mut events, &info(1), 0).await;
    assert_eq!(plugs.calls(), 2, "the factory reopened the port");
    let (seq, dst, payload) = dongle.expect_send().await;
    assert_eq!((dst, payload.as_slice()), (PEER_B, &b"queued 1"[..]));
    dongle.respond(seq, Status::Ok).await;
    dongle.tx_done(seq, PEER_B, true).await;
    let (_, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"queued 2");
    settle().await;
    let status = handle.status();
    assert_eq!(status.reconnects, 1);
    assert_eq!(status.tx_failures, 1);
}

/// ESP-5: a dongle that stops answering (no EOF, no bytes) is given up after
/// `handshake_tries` unanswered requests and reconnected like an unplugged one.
#[tokio::test(start_paused = true)]
async fn silent_dongle_is_reconnected() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = connect(&mut plugs, &mut events, &info(8), 0).await;
    for n in 0..5u8 {
        handle.send(PEER_A, vec![n], Priority::Essential).unwrap();
    }
    for _ in 0..5 {
        dongle.expect_send().await;
    }
    let reason = within(async {
        loop {
            match next_event(&mut events).await {
                DongleEvent::TxDone { ok: false, .. } => {}
                DongleEvent::Disconnected { reason } => break reason,
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await;
    assert!(
        reason.contains("5 requests in a row went unanswered"),
        "{reason}"
    );
    dongle.expect_closed().await;
    let _again = connect(&mut plugs, &mut events, &info(8), 0).await;
    assert_eq!(handle.status().tx_failures, 5);
}

/// ESP-5: a port that cannot be opened is retried with a backoff that doubles from the
/// minimum; a successful handshake resets it to the minimum.
#[tokio::test(start_paused = true)]
async fn open_failures_back_off_exponentially() {
    let _log = trace();
    let (open, mut plugs) = fake_port_failing(3);
    let config = config();
    let min = config.reconnect_backoff_min;
    let (handle, mut events) = spawn_dongle(config, open);
    let dongle = connect(&mut plugs, &mut events, &info(4), 0).await;
    assert_eq!(plugs.calls(), 4);
    drop(dongle);
    match next_event(&mut events).await {
        DongleEvent::Disconnected { .. } => {}
        other => panic!("expected Disconnected, got {other:?}"),
    }
    let _again = connect(&mut plugs, &mut events, &info(4), 0).await;
    let times = plugs.times.lock().unwrap().clone();
    let gaps: Vec<Duration> = times.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert_eq!(
        gaps[..3],
        [min, min * 2, min * 4],
        "doubling while it fails"
    );
    assert_eq!(gaps[3], min, "back to the minimum after a handshake");
    settle().await;
    assert_eq!(handle.status().reconnects, 1);
}

/// The driver ends when its last handle is dropped: the port is closed and the event
/// channel ends.
#[tokio::test(start_paused = true)]
async fn dropping_the_handles_stops_the_driver() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = connect(&mut plugs, &mut events, &info(4), 0).await;
    let clone = handle.clone();
    drop(handle);
    clone
        .send(Mac::BROADCAST, b"x".to_vec(), Priority::Droppable)
        .unwrap();
    dongle.expect_send().await;
    drop(clone);
    dongle.expect_closed().await;
    assert_eq!(within(events.recv()).await, None);
}

/// ESP-3: a dongle that comes back from a reboot speaking another major (reflashed) ends the
/// session: `Disconnected`, then `Refused` with the clear error.
#[tokio::test(start_paused = true)]
async fn reboot_into_another_major_is_refused() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = connect(&mut plugs, &mut events, &info(4), 0).await;
    let mut wire = Vec::new();
    conclave_espnow::frame::RawFrame {
        version: 2,
        kind: conclave_espnow::message::kind::BOOT,
        seq: 0,
        payload: vec![0, 2, 0],
    }
    .encode_into(&mut wire);
    dongle.write_raw(&wire).await;
    let expected = "dongle fake0 speaks protocol 2.x, this gateway 1.x; \
                    update the firmware or the gateway";
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::Disconnected {
            reason: expected.to_owned()
        }
    );
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::Refused {
            reason: expected.to_owned()
        }
    );
    dongle.expect_closed().await;
    assert!(!handle.status().connected);
}
