//! The driver in a running session against a scripted fake dongle: setup after the handshake
//! (ESP-3), TX credits (ESP-4), the send queue's priorities (ESP-4), payload limits, and what
//! the dongle reports (RX, TX_DONE, STATS, LOG, garbage on the line — ESP-1).

mod driver_support;

use std::time::Duration;

use conclave_espnow::frame::cobs_encode;
use conclave_espnow::{DongleError, DongleEvent, Mac, Message, Priority, Status, spawn_dongle};
use driver_support::{
    PEER_A, PEER_B, config, connect, expect_connected, fake_port, info, next_event, send_essential,
    settle, trace,
};
use tokio::sync::mpsc::error::TryRecvError;

/// ESP-3: after the handshake the host sets the channel, the PMK and every peer it knows,
/// and keeps the dongle's peer table in step with later `add_peer` / `del_peer`.
#[tokio::test(start_paused = true)]
async fn setup_sends_channel_pmk_and_peers() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let mut config = config();
    config.channel = 6;
    config.pmk = Some([7; 16]);
    let (handle, mut events) = spawn_dongle(config, open);
    handle.add_peer(PEER_B, true, [9; 16]).unwrap();
    handle.add_peer(PEER_A, false, [0; 16]).unwrap();

    let mut dongle = plugs.next().await;
    dongle.answer_hello(&info(4)).await;
    assert_eq!(dongle.ack().await, Message::SetChannel { channel: 6 });
    assert_eq!(dongle.ack().await, Message::SetPmk { pmk: [7; 16] });
    assert_eq!(
        dongle.ack().await,
        Message::AddPeer {
            mac: PEER_A,
            channel: 0,
            encrypt: false,
            key: [0; 16]
        }
    );
    assert_eq!(
        dongle.ack().await,
        Message::AddPeer {
            mac: PEER_B,
            channel: 0,
            encrypt: true,
            key: [9; 16]
        }
    );
    assert_eq!(expect_connected(&mut events).await.channel, 6);

    let peer_c = Mac([0x02, 0, 0, 0, 0, 0x0c]);
    handle.add_peer(peer_c, false, [0; 16]).unwrap();
    assert_eq!(
        dongle.ack().await,
        Message::AddPeer {
            mac: peer_c,
            channel: 0,
            encrypt: false,
            key: [0; 16]
        }
    );
    handle.del_peer(PEER_A).unwrap();
    // A dongle that already forgot the peer says so; the host takes it as done.
    let del = dongle.answer(Status::UnknownPeer).await;
    assert_eq!(del.message, Message::DelPeer { mac: PEER_A });
    assert_eq!(handle.peers(), vec![PEER_B, peer_c]);
    dongle.expect_nothing_for(Duration::from_secs(10)).await;
}

/// ESP-3: a refused setup request is logged and tried again later; `Connected` waits for
/// the channel.
#[tokio::test(start_paused = true)]
async fn failed_setup_is_retried() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = plugs.next().await;
    dongle.answer_hello(&info(4)).await;
    let refused = dongle.answer(Status::BadArgument).await;
    assert_eq!(refused.message, Message::SetChannel { channel: 1 });
    settle().await;
    assert_eq!(events.try_recv(), Err(TryRecvError::Empty));
    let status = handle.status();
    assert!(!status.connected);
    assert_eq!(
        status.last_error.as_deref(),
        Some("dongle fake0: SET_CHANNEL 1 refused: bad argument")
    );
    assert_eq!(dongle.ack().await, Message::SetChannel { channel: 1 });
    expect_connected(&mut events).await;
}

/// ESP-4: with two credits, a third `SEND` is not written until a `TX_DONE` returns one.
#[tokio::test(start_paused = true)]
async fn credits_bound_the_sends_in_flight() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = connect(&mut plugs, &mut events, &info(2), 0).await;
    for payload in [b"one", b"two", b"six"] {
        handle
            .send(PEER_A, payload.to_vec(), Priority::Essential)
            .unwrap();
    }
    let (first, dst, payload) = dongle.expect_send().await;
    assert_eq!((dst, payload.as_slice()), (PEER_A, &b"one"[..]));
    dongle.respond(first, Status::Ok).await;
    let (second, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"two");
    dongle.respond(second, Status::Ok).await;
    dongle.expect_nothing_for(Duration::from_millis(300)).await;
    settle().await;
    let status = handle.status();
    assert_eq!(status.credits_free, 0);
    assert_eq!(status.queue_len, 1);

    dongle.tx_done(first, PEER_A, true).await;
    let (_, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"six");
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::TxDone {
            mac: PEER_A,
            ok: true
        }
    );
    assert_eq!(handle.status().tx_frames, 3);
}

/// ESP-4: a non-OK `RESP` to a `SEND` returns its credit and reports the frame failed.
#[tokio::test(start_paused = true)]
async fn refused_send_returns_its_credit() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = connect(&mut plugs, &mut events, &info(1), 0).await;
    send_essential(&handle, PEER_B, b"a");
    send_essential(&handle, PEER_B, b"b");
    let (seq, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"a");
    dongle.respond(seq, Status::UnknownPeer).await;
    let (_, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"b");
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::TxDone {
            mac: PEER_B,
            ok: false
        }
    );
    assert_eq!(handle.status().tx_failures, 1);
}

/// ESP-4: a `RESP{NoCredit}` (host and dongle disagree on credits) puts the frame back at the
/// head of the queue; it goes out again, before the frames behind it.
#[tokio::test(start_paused = true)]
async fn no_credit_answer_requeues_the_frame() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = connect(&mut plugs, &mut events, &info(1), 0).await;
    send_essential(&handle, PEER_A, b"a");
    send_essential(&handle, PEER_A, b"b");
    let (seq, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"a");
    dongle.respond(seq, Status::NoCredit).await;
    let (seq, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"a", "the refused frame goes first");
    dongle.respond(seq, Status::Ok).await;
    dongle.tx_done(seq, PEER_A, true).await;
    let (_, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"b");
    assert_eq!(handle.status().tx_failures, 0);
}

/// ESP-4: a `TX_DONE` lost on the line does not leak its credit: it is reclaimed after
/// `tx_done_timeout`, counted, and the frame reported failed.
#[tokio::test(start_paused = true)]
async fn credit_of_a_lost_tx_done_is_reclaimed() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = connect(&mut plugs, &mut events, &info(1), 0).await;
    send_essential(&handle, PEER_A, b"a");
    send_essential(&handle, PEER_A, b"b");
    let (seq, _, _) = dongle.expect_send().await;
    dongle.respond(seq, Status::Ok).await;
    let (_, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"b");
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::TxDone {
            mac: PEER_A,
            ok: false
        }
    );
    let status = handle.status();
    assert_eq!(status.credits_reclaimed, 1);
    assert_eq!(status.tx_failures, 1);
}

/// ESP-4: when the queue is full, the oldest droppable frame makes room; essential frames
/// already queued are never dropped; what is left goes out in order once connected.
#[tokio::test(start_paused = true)]
async fn full_queue_drops_the_oldest_droppable() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let mut config = config();
    config.queue_capacity = 4;
    let (handle, mut events) = spawn_dongle(config, open);
    // Not connected yet: everything waits in the queue.
    handle
        .send(PEER_A, b"d1".to_vec(), Priority::Droppable)
        .unwrap();
    send_essential(&handle, PEER_A, b"e1");
    handle
        .send(PEER_A, b"d2".to_vec(), Priority::Droppable)
        .unwrap();
    send_essential(&handle, PEER_A, b"e2");
    send_essential(&handle, PEER_A, b"e3"); // drops d1
    handle
        .send(PEER_A, b"d3".to_vec(), Priority::Droppable)
        .unwrap(); // drops d2
    let status = handle.status();
    assert_eq!(status.queue_len, 4);
    assert_eq!(status.dropped_droppable, 2);
    assert_eq!(status.refused, 0);

    let mut dongle = connect(&mut plugs, &mut events, &info(8), 0).await;
    let mut sent = Vec::new();
    for _ in 0..4 {
        let (_, _, payload) = dongle.expect_send().await;
        sent.push(String::from_utf8(payload).unwrap());
    }
    assert_eq!(sent, ["e1", "e2", "e3", "d3"]);
}

/// ESP-4: a queue full of essential frames refuses a new frame of either priority, with an
/// error, and keeps the ones it has.
#[tokio::test(start_paused = true)]
async fn full_queue_of_essentials_refuses_new_frames() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let mut config = config();
    config.queue_capacity = 3;
    let (handle, mut events) = spawn_dongle(config, open);
    for payload in [b"e1", b"e2", b"e3"] {
        handle
            .send(PEER_A, payload.to_vec(), Priority::Essential)
            .unwrap();
    }
    let refused = handle.send(PEER_A, b"e4".to_vec(), Priority::Essential);
    assert_eq!(
        refused,
        Err(DongleError::QueueFull {
            label: "fake0".to_owned(),
            capacity: 3
        })
    );
    assert!(
        handle
            .send(PEER_A, b"d1".to_vec(), Priority::Droppable)
            .is_err()
    );
    let status = handle.status();
    assert_eq!(status.refused, 2);
    assert_eq!(status.dropped_droppable, 0);
    assert_eq!(status.queue_len, 3);

    let mut dongle = connect(&mut plugs, &mut events, &info(8), 0).await;
    for expected in [b"e1", b"e2", b"e3"] {
        let (_, _, payload) = dongle.expect_send().await;
        assert_eq!(&payload, expected);
    }
}

/// ESP-4 / PROTO-4: a payload longer than the radio takes is refused up front, with the
/// limit in the error; before the first handshake the protocol's own limit applies, and a
/// frame queued then that the dongle cannot carry is dropped and counted, not sent.
#[tokio::test(start_paused = true)]
async fn oversize_payloads_are_refused() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let too_long = handle.send(PEER_A, vec![0; 1493], Priority::Essential);
    assert_eq!(
        too_long.unwrap_err().to_string(),
        "dongle fake0: payload of 1493 bytes is larger than the radio's limit of 1492"
    );
    handle
        .send(PEER_A, vec![1; 1492], Priority::Essential)
        .unwrap();

    let mut dongle = connect(&mut plugs, &mut events, &info(4), 0).await;
    let err = handle
        .send(PEER_A, vec![2; 251], Priority::Essential)
        .unwrap_err();
    assert!(matches!(err, DongleError::PayloadTooLarge { max: 250, .. }));
    handle
        .send(PEER_A, vec![3; 250], Priority::Essential)
        .unwrap();
    let (_, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, vec![3; 250]);
    // 1493 up front, 1492 when dequeued for this 250-byte radio, 251 up front.
    assert_eq!(handle.status().refused, 3);
}

/// ESP-2: an `RX` becomes `Received` with its RSSI; `STATS` and `LOG` become events too.
#[tokio::test(start_paused = true)]
async fn rx_stats_and_log_become_events() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = connect(&mut plugs, &mut events, &info(4), 0).await;
    dongle
        .reply(
            0,
            Message::Rx {
                src: PEER_B,
                dst: Mac::BROADCAST,
                rssi: -67,
                channel: 1,
                timestamp_us: 123_456,
                payload: b"heartbeat".to_vec(),
            },
        )
        .await;
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::Received {
            src: PEER_B,
            dst: Mac::BROADCAST,
            rssi: -67,
            payload: b"heartbeat".to_vec()
        }
    );
    dongle
        .reply(
            0,
            Message::Stats {
                rx_dropped: 1,
                tx_dropped: 2,
                crc_errors: 3,
            },
        )
        .await;
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::Stats {
            rx_dropped: 1,
            tx_dropped: 2,
            crc_errors: 3
        }
    );
    dongle
        .reply(
            0,
            Message::Log {
                level: 1,
                text: "radio busy".to_owned(),
            },
        )
        .await;
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::Log {
            level: 1,
            text: "radio busy".to_owned()
        }
    );
    settle().await;
    assert_eq!(handle.status().rx_frames, 1);
}

/// ESP-1: garbage and a frame with a bad CRC are counted and skipped; the frame after them
/// arrives, and the session carries on.
#[tokio::test(start_paused = true)]
async fn garbage_on_the_line_is_counted_and_skipped() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let mut dongle = connect(&mut plugs, &mut events, &info(4), 0).await;

    // A COBS code running past the end of its frame: malformed.
    dongle.write_raw(&[0x13, 0x37, 0xde, 0xad, 0x00]).await;
    // A well-formed RX frame whose CRC is off by one.
    let mut body = vec![1, 0x83, 0, 0];
    body.extend_from_slice(
        &Message::Rx {
            src: PEER_A,
            dst: Mac::BROADCAST,
            rssi: -50,
            channel: 1,
            timestamp_us: 0,
            payload: b"forged".to_vec(),
        }
        .encode_payload(),
    );
    let crc = conclave_espnow::frame::crc16_kermit(&body).wrapping_add(1);
    body.extend_from_slice(&crc.to_le_bytes());
    let mut wire = Vec::new();
    cobs_encode(&body, &mut wire);
    wire.push(0);
    dongle.write_raw(&wire).await;
    dongle
        .reply(
            0,
            Message::Rx {
                src: PEER_B,
                dst: Mac::BROADCAST,
                rssi: -71,
                channel: 1,
                timestamp_us: 0,
                payload: b"real".to_vec(),
            },
        )
        .await;
    assert_eq!(
        next_event(&mut events).await,
        DongleEvent::Received {
            src: PEER_B,
            dst: Mac::BROADCAST,
            rssi: -71,
            payload: b"real".to_vec()
        }
    );
    settle().await;
    let status = handle.status();
    assert_eq!(status.crc_errors, 1);
    assert_eq!(status.malformed_frames, 1);
    assert_eq!(status.rx_frames, 1);
    assert!(status.connected);

    send_essential(&handle, PEER_B, b"still here");
    let (_, _, payload) = dongle.expect_send().await;
    assert_eq!(payload, b"still here");
}

/// ESP-3 (INFO's limits), ESP-4: the driver gives the dongle at most `INFO.max_peers` peers;
/// frames to a peer that found no room go out as broadcast instead of failing at the dongle
/// with `UNKNOWN_PEER`, and the peer gets its place once another leaves.
#[tokio::test(start_paused = true)]
async fn peers_beyond_info_max_peers_are_reached_by_broadcast() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    let peer_c = Mac([0x02, 0, 0, 0, 0, 0x0c]);
    handle.add_peer(PEER_A, false, [0; 16]).unwrap();
    handle.add_peer(PEER_B, false, [0; 16]).unwrap();
    handle.add_peer(peer_c, false, [0; 16]).unwrap();
    let mut small = info(4);
    small.max_peers = 2;
    let mut dongle = connect(&mut plugs, &mut events, &small, 2).await;
    send_essential(&handle, peer_c, b"to c");
    send_essential(&handle, PEER_A, b"to a");
    let (seq, dst, payload) = dongle.expect_send().await;
    assert_eq!(
        (dst, payload.as_slice()),
        (Mac::BROADCAST, &b"to c"[..]),
        "no ADD_PEER beyond INFO.max_peers: the frame goes to everyone"
    );
    dongle.respond(seq, Status::Ok).await;
    let (_, dst, _) = dongle.expect_send().await;
    assert_eq!(dst, PEER_A, "peers with a place are unicast");

    handle.del_peer(PEER_A).unwrap();
    assert_eq!(dongle.ack().await, Message::DelPeer { mac: PEER_A });
    assert_eq!(
        dongle.ack().await,
        Message::AddPeer {
            mac: peer_c,
            channel: 0,
            encrypt: false,
            key: [0; 16]
        },
        "the freed place goes to the peer that had none"
    );
    settle().await;
    send_essential(&handle, peer_c, b"to c again");
    let (_, dst, _) = dongle.expect_send().await;
    assert_eq!(dst, peer_c);
}

/// ESP-3: `PEER_TABLE_FULL` (a build's lower limit of encrypted peers, which INFO does not
/// carry) is not retried while nothing changes, and frames to that peer go out as broadcast.
#[tokio::test(start_paused = true)]
async fn a_peer_refused_for_a_full_table_is_reached_by_broadcast() {
    let _log = trace();
    let (open, mut plugs) = fake_port();
    let (handle, mut events) = spawn_dongle(config(), open);
    handle.add_peer(PEER_A, true, [1; 16]).unwrap();
    let mut dongle = plugs.next().await;
    dongle.answer_hello(&info(4)).await;
    assert!(matches!(dongle.ack().await, Message::SetChannel { .. }));
    let refused = dongle.answer(Status::PeerTableFull).await;
    assert!(matches!(
        refused.message,
        Message::AddPeer { mac: PEER_A, .. }
    ));
    expect_connected(&mut events).await;
    send_essential(&handle, PEER_A, b"to a");
    let (_, dst, payload) = dongle.expect_send().await;
    assert_eq!((dst, payload.as_slice()), (Mac::BROADCAST, &b"to a"[..]));
    // No ADD_PEER again, however long: the table is as full as it was.
    dongle.expect_nothing_for(Duration::from_secs(30)).await;
}
