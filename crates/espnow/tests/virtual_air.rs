//! The simulated air between virtual dongles (ESP-7): who hears whom, what a sender is
//! told, RSSI, channels, partitions, power, loss and its determinism under a seed.

#![allow(clippy::unwrap_used)]

mod virtual_support;

use std::time::Duration;

use conclave_espnow::{
    Air, AirConfig, AirCounters, AirEvent, Mac, Message, ResetReason, Status, TxReport,
};
use virtual_support::{mac, quiet, ready, send, send_and_wait, trace};

/// ESP-7: two dongles on one channel exchange frames: the receiver's host gets `RX` with
/// sender, destination, the pair's RSSI (within its jitter), the channel and a timestamp
/// since boot; the unicast sender gets `TX_DONE{ok}`.
#[tokio::test(start_paused = true)]
async fn two_dongles_exchange_rx_with_src_dst_and_rssi() {
    let _trace = trace();
    let air = Air::new(7);
    air.set_rssi(mac(1), mac(2), -55);
    let (mut a, _da) = ready(&air, quiet(mac(1)), 6, &[mac(2)]).await;
    let (mut b, _db) = ready(&air, quiet(mac(2)), 6, &[]).await;
    tokio::time::sleep(Duration::from_millis(20)).await;

    assert!(send_and_wait(&mut a, mac(2), b"vote for me").await);
    let rx = b.recv().await;
    assert_eq!(rx.seq, 0);
    let Message::Rx {
        src,
        dst,
        rssi,
        channel,
        timestamp_us,
        payload,
    } = rx.message
    else {
        panic!("expected RX, got {rx:?}");
    };
    assert_eq!((src, dst, channel), (mac(1), mac(2), 6));
    assert!((-57..=-53).contains(&rssi), "{rssi}");
    assert!(timestamp_us >= 20_000, "{timestamp_us} µs since boot");
    assert_eq!(payload, b"vote for me");

    assert!(send_and_wait(&mut b, Mac::BROADCAST, b"heartbeat").await);
    let rx = a
        .until(|message| matches!(message, Message::Rx { .. }))
        .await;
    let Message::Rx { src, dst, .. } = rx.message else {
        unreachable!()
    };
    assert_eq!((src, dst), (mac(2), Mac::BROADCAST));
    assert_eq!(air.counters(mac(1)).delivered, 1);
    assert_eq!(air.counters(mac(2)).received, 1);
}

/// ESP-7: a broadcast reports `ok` to its sender whatever happened: no one listening, the
/// listener powered off or partitioned away, or the sender's own radio off.
#[tokio::test(start_paused = true)]
async fn broadcast_always_reports_ok() {
    let _trace = trace();
    let air = Air::new(7);
    let (mut a, da) = ready(&air, quiet(mac(1)), 1, &[]).await;
    assert!(send_and_wait(&mut a, Mac::BROADCAST, b"anyone?").await);
    let (_b, db) = ready(&air, quiet(mac(2)), 1, &[]).await;
    db.power_off();
    assert!(send_and_wait(&mut a, Mac::BROADCAST, b"anyone?").await);
    db.power_on();
    air.isolate(mac(2));
    assert!(send_and_wait(&mut a, Mac::BROADCAST, b"anyone?").await);
    da.power_off();
    assert!(send_and_wait(&mut a, Mac::BROADCAST, b"anyone?").await);
    assert_eq!(air.counters(mac(1)).delivered, 0);
}

/// ESP-7: a unicast reports failure when its destination is absent, powered off, on another
/// channel or partitioned away, and success again once it is back.
#[tokio::test(start_paused = true)]
async fn unicast_to_an_unreachable_node_reports_failure() {
    let _trace = trace();
    let air = Air::new(7);
    let (mut a, _da) = ready(&air, quiet(mac(1)), 1, &[mac(2), mac(3)]).await;
    assert!(!send_and_wait(&mut a, mac(3), b"absent").await);

    let (mut b, db) = ready(&air, quiet(mac(2)), 1, &[]).await;
    assert!(send_and_wait(&mut a, mac(2), b"present").await);
    db.power_off();
    assert!(!db.is_powered());
    assert!(!send_and_wait(&mut a, mac(2), b"off").await);
    db.power_on();
    assert!(send_and_wait(&mut a, mac(2), b"on").await);
    air.partition(&[&[mac(1)], &[mac(2)]]);
    assert!(!air.can_hear(mac(1), mac(2)));
    assert!(!send_and_wait(&mut a, mac(2), b"cut").await);
    air.heal();
    assert!(send_and_wait(&mut a, mac(2), b"healed").await);
    // Only what got through reached B's host.
    let mut heard = Vec::new();
    while heard.len() < 3 {
        if let Message::Rx { payload, .. } = b.recv().await.message {
            heard.push(payload);
        }
    }
    assert_eq!(
        heard,
        vec![b"present".to_vec(), b"on".to_vec(), b"healed".to_vec()]
    );
    assert_eq!(
        b.call(Message::SetChannel { channel: 11 }).await,
        Status::Ok
    );
    assert!(!send_and_wait(&mut a, mac(2), b"elsewhere").await);

    let counters = air.counters(mac(1));
    assert_eq!(counters.sent, 7);
    assert_eq!(counters.delivered, 3);
    assert_eq!(counters.unreachable, 4);
    assert_eq!(counters.lost, 0);
}

/// ESP-7: dongles on different channels do not hear each other.
#[tokio::test(start_paused = true)]
async fn different_channels_do_not_hear_each_other() {
    let _trace = trace();
    let air = Air::new(7);
    let (mut a, _da) = ready(&air, quiet(mac(1)), 1, &[]).await;
    let (mut b, _db) = ready(&air, quiet(mac(2)), 6, &[]).await;
    let (mut c, _dc) = ready(&air, quiet(mac(3)), 6, &[]).await;
    assert!(send_and_wait(&mut a, Mac::BROADCAST, b"channel 1").await);
    assert!(send_and_wait(&mut b, Mac::BROADCAST, b"channel 6").await);
    let rx = c.recv().await;
    assert!(matches!(rx.message, Message::Rx { src, channel: 6, .. } if src == mac(2)));
    c.expect_silence(Duration::from_millis(100)).await;
    a.expect_silence(Duration::from_millis(100)).await;
    assert_eq!(air.counters(mac(1)).delivered, 0);
    assert_eq!(air.counters(mac(2)).delivered, 1);
}

/// ESP-7: a partition splits the air into groups that hear only themselves, until healed.
#[tokio::test(start_paused = true)]
async fn partition_and_heal() {
    let _trace = trace();
    let air = Air::new(7);
    let (mut a, _da) = ready(&air, quiet(mac(1)), 1, &[]).await;
    let (mut b, _db) = ready(&air, quiet(mac(2)), 1, &[]).await;
    let (mut c, _dc) = ready(&air, quiet(mac(3)), 1, &[]).await;
    air.partition(&[&[mac(1), mac(2)], &[mac(3)]]);
    assert!(send_and_wait(&mut a, Mac::BROADCAST, b"split").await);
    assert!(matches!(b.recv().await.message, Message::Rx { .. }));
    c.expect_silence(Duration::from_millis(100)).await;
    assert!(send_and_wait(&mut c, Mac::BROADCAST, b"alone").await);
    a.expect_silence(Duration::from_millis(100)).await;
    b.expect_silence(Duration::from_millis(100)).await;

    air.heal();
    assert!(send_and_wait(&mut a, Mac::BROADCAST, b"whole").await);
    for host in [&mut b, &mut c] {
        let rx = host.recv().await;
        assert!(matches!(rx.message, Message::Rx { ref payload, .. } if payload == b"whole"));
    }
}

/// ESP-4, ESP-3: a reboot forgets the sends in flight: their `TX_DONE` never comes, and
/// every credit is back after `BOOT`.
#[tokio::test(start_paused = true)]
async fn a_reboot_forgets_sends_in_flight() {
    let _trace = trace();
    let air = Air::new(7);
    let (mut a, da) = ready(&air, quiet(mac(1)), 1, &[]).await;
    for _ in 0..4 {
        let seq = a.request(send(Mac::BROADCAST, b"in flight")).await;
        assert_eq!(a.resp(seq).await, Status::Ok);
    }
    da.reboot(ResetReason::Crash);
    let boot = a.recv().await;
    assert!(matches!(
        boot.message,
        Message::Boot {
            reason: ResetReason::Crash,
            ..
        }
    ));
    a.expect_silence(Duration::from_millis(100)).await;
    assert_eq!(da.state().outstanding_sends, 0);
    assert_eq!(air.counters(mac(1)).sent, 4);
}

async fn unicast_run(seed: u64, frames: usize) -> (Vec<bool>, AirCounters) {
    let air = Air::with_config(AirConfig {
        seed,
        loss: 0.3,
        rx_queue: frames,
        ..AirConfig::default()
    });
    let a = air.attach(mac(1), 1).unwrap();
    let mut b = air.attach(mac(2), 1).unwrap();
    let mut a = a;
    let mut outcomes = vec![None; frames];
    for tag in 0..frames {
        a.transmit(mac(2), vec![0; 8], tag as u64);
    }
    for _ in 0..frames {
        let Some(AirEvent::TxDone(TxReport { tag, ok, .. })) = a.recv().await else {
            panic!("expected a report");
        };
        outcomes[tag as usize] = Some(ok);
    }
    let mut heard = 0;
    while let Ok(Some(AirEvent::Received(_))) =
        tokio::time::timeout(Duration::from_millis(10), b.recv()).await
    {
        heard += 1;
    }
    let outcomes: Vec<bool> = outcomes.into_iter().map(Option::unwrap).collect();
    assert_eq!(heard, outcomes.iter().filter(|ok| **ok).count());
    (outcomes, air.counters(mac(1)))
}

/// ESP-7: loss follows its probability, a lost unicast reports failure, and one seed gives
/// one run, frame by frame.
#[tokio::test(start_paused = true)]
async fn loss_statistics_replay_from_the_seed() {
    let _trace = trace();
    let (outcomes, counters) = unicast_run(42, 2000).await;
    let lost = outcomes.iter().filter(|ok| !**ok).count() as u64;
    assert_eq!(counters.lost, lost);
    assert_eq!(counters.delivered + counters.lost, 2000);
    assert_eq!(counters.sent, 2000);
    assert!((500..700).contains(&lost), "{lost} of 2000 lost at p = 0.3");
    let (again, counters_again) = unicast_run(42, 2000).await;
    assert_eq!(again, outcomes);
    assert_eq!(counters_again, counters);
    let (other, _) = unicast_run(43, 2000).await;
    assert_ne!(other, outcomes);
}

/// ESP-7: loss can be set per directed pair: a one-way link.
#[tokio::test(start_paused = true)]
async fn loss_per_directed_pair() {
    let _trace = trace();
    let air = Air::new(3);
    air.set_link_loss(mac(1), mac(2), 1.0);
    let (mut a, _da) = ready(&air, quiet(mac(1)), 1, &[mac(2)]).await;
    let (mut b, _db) = ready(&air, quiet(mac(2)), 1, &[mac(1)]).await;
    for _ in 0..10 {
        assert!(!send_and_wait(&mut a, mac(2), b"lost").await);
        assert!(send_and_wait(&mut b, mac(1), b"fine").await);
    }
    assert_eq!(air.counters(mac(1)).lost, 10);
    assert_eq!(air.counters(mac(2)).delivered, 10);
    air.clear_link_loss(mac(1), mac(2));
    assert!(send_and_wait(&mut a, mac(2), b"back").await);
}

/// ESP-7: a receiver whose queue is full drops what it hears and counts it, while the
/// sender is told the frame arrived (the radio acknowledged it).
#[tokio::test(start_paused = true)]
async fn a_full_receive_queue_drops_and_counts() {
    let _trace = trace();
    let air = Air::with_config(AirConfig {
        rx_queue: 2,
        ..AirConfig::default()
    });
    let mut a = air.attach(mac(1), 1).unwrap();
    let _b = air.attach(mac(2), 1).unwrap();
    for tag in 0..5 {
        a.transmit(mac(2), vec![1], tag);
    }
    for _ in 0..5 {
        assert!(matches!(
            a.recv().await,
            Some(AirEvent::TxDone(TxReport { ok: true, .. }))
        ));
    }
    let counters = air.counters(mac(2));
    assert_eq!((counters.received, counters.rx_overflow), (2, 3));
}

/// ESP-7: one MAC, one radio; a dropped port leaves the air and the MAC can come back, with
/// its place (RSSI) unchanged.
#[tokio::test(start_paused = true)]
async fn one_radio_per_mac() {
    let _trace = trace();
    let air = Air::new(0);
    let rssi = air.rssi(mac(1), mac(2));
    let port = air.attach(mac(1), 1).unwrap();
    assert!(air.attach(mac(1), 1).is_err());
    assert!(air.attach(Mac::BROADCAST, 1).is_err());
    drop(port);
    let _port = air.attach(mac(1), 1).unwrap();
    assert_eq!(air.rssi(mac(1), mac(2)), rssi);
}
