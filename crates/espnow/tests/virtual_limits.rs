//! ESP-NOW's limits as the virtual dongle enforces them (ESP-4, ESP-7): TX credits, the peer
//! table, the payload size, and unicast only to peers in the table.

#![allow(clippy::unwrap_used)]

mod virtual_support;

use conclave_espnow::{Air, Mac, Message, Status, VirtualDongleConfig};
use virtual_support::{add_peer, mac, quiet, ready, send, send_and_wait, trace};

/// ESP-4: with N credits, the N+1-th outstanding `SEND` gets `NoCredit` (and is counted in
/// `tx_dropped`); each `TX_DONE` returns a credit.
#[tokio::test(start_paused = true)]
async fn credits_are_enforced_and_returned_by_tx_done() {
    let _trace = trace();
    let air = Air::new(1);
    let config = VirtualDongleConfig {
        tx_credits: 3,
        ..quiet(mac(1))
    };
    let (mut host, dongle) = ready(&air, config, 1, &[]).await;
    // Requests go out back to back: no TX_DONE can come between them on a paused clock,
    // because the air's latency is at least 1 ms and no time passes while the dongle works.
    let mut seqs = Vec::new();
    for n in 0..4u8 {
        seqs.push(host.request(send(Mac::BROADCAST, &[n])).await);
    }
    let mut statuses = Vec::new();
    for seq in &seqs {
        statuses.push(host.resp(*seq).await);
    }
    assert_eq!(
        statuses,
        vec![Status::Ok, Status::Ok, Status::Ok, Status::NoCredit]
    );
    assert_eq!(dongle.state().outstanding_sends, 3);
    assert_eq!(dongle.state().tx_dropped, 1);
    let done = host
        .until(|message| matches!(message, Message::TxDone { .. }))
        .await;
    assert!(seqs[..3].contains(&done.seq));
    assert_eq!(host.call(send(Mac::BROADCAST, b"again")).await, Status::Ok);
    assert_eq!(
        host.call(send(Mac::BROADCAST, b"over")).await,
        Status::NoCredit
    );
    // Once every accepted SEND is reported, all credits are back.
    let mut state = dongle.watch_state();
    state
        .wait_for(|state| state.outstanding_sends == 0)
        .await
        .unwrap();
    assert_eq!(host.call(send(Mac::BROADCAST, b"free")).await, Status::Ok);
}

/// ESP-7: the peer table holds 20 peers; the 21st is refused with `PeerTableFull`; adding a
/// known peer again is an update, and deleting one makes room.
#[tokio::test(start_paused = true)]
async fn the_peer_table_holds_twenty() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, dongle) = ready(&air, quiet(mac(1)), 1, &[]).await;
    for n in 0..20 {
        assert_eq!(host.call(add_peer(mac(100 + n))).await, Status::Ok);
    }
    assert_eq!(host.call(add_peer(mac(200))).await, Status::PeerTableFull);
    assert_eq!(host.call(add_peer(mac(105))).await, Status::Ok);
    assert_eq!(dongle.state().peers.len(), 20);
    assert_eq!(
        host.call(Message::DelPeer { mac: mac(100) }).await,
        Status::Ok
    );
    assert_eq!(host.call(add_peer(mac(200))).await, Status::Ok);
    assert_eq!(dongle.state().peers.len(), 20);
}

/// ESP-7: ESP-NOW v1 carries at most 250 bytes; v2 1470.
#[tokio::test(start_paused = true)]
async fn payload_limit_is_250_bytes_for_v1_and_1470_for_v2() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, _dongle) = ready(&air, quiet(mac(1)), 1, &[]).await;
    assert!(send_and_wait(&mut host, Mac::BROADCAST, &[0x5a; 250]).await);
    assert_eq!(
        host.call(send(Mac::BROADCAST, &[0x5a; 251])).await,
        Status::PayloadTooLarge
    );

    let (mut host, _dongle) = ready(&air, quiet(mac(2)).espnow_v2(), 1, &[]).await;
    let seq = host.request(Message::Hello { major: 1, minor: 0 }).await;
    let info = host.recv().await;
    assert_eq!(info.seq, seq);
    let Message::Info(info) = info.message else {
        panic!("expected INFO");
    };
    assert_eq!((info.espnow_version, info.max_payload), (2, 1470));
    assert!(send_and_wait(&mut host, Mac::BROADCAST, &[0x5a; 1470]).await);
    assert_eq!(
        host.call(send(Mac::BROADCAST, &[0x5a; 1471])).await,
        Status::PayloadTooLarge
    );
}

/// ESP-7: like ESP-NOW, a unicast needs its destination in the peer table; broadcast does
/// not.
#[tokio::test(start_paused = true)]
async fn unicast_needs_a_peer_entry() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, dongle) = ready(&air, quiet(mac(1)), 1, &[]).await;
    assert_eq!(host.call(send(mac(2), b"hi")).await, Status::UnknownPeer);
    assert_eq!(dongle.state().outstanding_sends, 0, "no credit taken");
    assert_eq!(host.call(add_peer(mac(2))).await, Status::Ok);
    assert_eq!(host.call(send(mac(2), b"hi")).await, Status::Ok);
}
