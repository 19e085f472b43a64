//! The simulated air's air-time model (ESP-7, issue 16 item 10): with a bit rate set, a frame
//! occupies its channel for its payload and ESP-NOW's 43 bytes of framing, and the frames of
//! one medium take turns; other channels, and nodes partitioned apart, do not wait. Without
//! it frames overlap freely, as they always did. Time is tokio's paused clock: the assertions
//! are about virtual time, never the wall clock.

#![allow(clippy::unwrap_used)]

use std::num::NonZeroU32;
use std::time::Duration;

use conclave_espnow::{AIR_FRAME_OVERHEAD, Air, AirConfig, AirEvent, AirFrame, AirPort, Mac};
use tokio::time::Instant;

/// ESP-NOW's usable rate as docs/benchmarks.md counts it.
const RATE: u32 = 214_000;

/// The tokio timer fires on whole milliseconds: a delivery may land up to this much after
/// its exact instant.
const TIMER_GRAIN: Duration = Duration::from_millis(1);

fn mac(n: u8) -> Mac {
    Mac([0x02, 0, 0, 0, 0, n])
}

/// An air with no latency, so that arrival times are the air time alone.
fn air(bit_rate: Option<u32>) -> Air {
    Air::with_config(AirConfig {
        seed: 1,
        latency_min: Duration::ZERO,
        latency_max: Duration::ZERO,
        bit_rate: bit_rate.map(|rate| NonZeroU32::new(rate).unwrap()),
        ..AirConfig::default()
    })
}

/// The next frame `port` hears, with when (virtual time) it arrived.
async fn heard(port: &mut AirPort) -> (AirFrame, Instant) {
    loop {
        if let Some(AirEvent::Received(frame)) = port.recv().await {
            return (frame, Instant::now());
        }
    }
}

fn assert_near(what: &str, got: Duration, expected: Duration) {
    assert!(
        got >= expected && got <= expected + TIMER_GRAIN,
        "{what}: arrived after {got:?}, expected {expected:?}"
    );
}

/// ESP-7: a full frame takes 293 bytes of air (250 + 43): about 10.95 ms at 214 kbit/s; a
/// 59-byte heartbeat 102 bytes, about 3.81 ms.
#[test]
fn air_time_counts_payload_and_framing_at_the_bit_rate() {
    let rate = NonZeroU32::new(RATE).unwrap();
    assert_eq!(AIR_FRAME_OVERHEAD, 43);
    assert_eq!(
        conclave_espnow::air_time(250, rate),
        Duration::from_nanos(293 * 8 * 1_000_000_000 / 214_000)
    );
    assert_eq!(
        conclave_espnow::air_time(59, rate),
        Duration::from_nanos(102 * 8 * 1_000_000_000 / 214_000)
    );
    // One bit a second: no overflow, 293 × 8 s.
    assert_eq!(
        conclave_espnow::air_time(250, NonZeroU32::new(1).unwrap()),
        Duration::from_secs(293 * 8)
    );
}

/// ESP-7: three frames sent at once from two radios on one channel land one after the
/// other, each after the previous one's air time and its own, in the order they were sent;
/// the counters say how many bytes each sender put on the air.
#[tokio::test(start_paused = true)]
async fn frames_on_one_channel_take_turns_at_the_bit_rate() {
    let air = air(Some(RATE));
    let a = air.attach(mac(1), 1).unwrap();
    let b = air.attach(mac(2), 1).unwrap();
    let mut receiver = air.attach(mac(9), 1).unwrap();
    let rate = NonZeroU32::new(RATE).unwrap();
    let full = conclave_espnow::air_time(250, rate);
    let small = conclave_espnow::air_time(59, rate);

    let start = Instant::now();
    a.transmit(mac(9), vec![1; 250], 1);
    b.transmit(mac(9), vec![2; 250], 2);
    a.transmit(mac(9), vec![3; 59], 3);

    let (first, at) = heard(&mut receiver).await;
    assert_eq!((first.src, first.payload[0]), (mac(1), 1));
    assert_near("the first frame", at - start, full);
    let (second, at) = heard(&mut receiver).await;
    assert_eq!((second.src, second.payload[0]), (mac(2), 2));
    assert_near("the second frame", at - start, full * 2);
    let (third, at) = heard(&mut receiver).await;
    assert_eq!((third.src, third.payload[0]), (mac(1), 3));
    assert_near("the third frame", at - start, full * 2 + small);
    // What each sender put on the air, framing included; the air's total adds them up.
    assert_eq!(air.counters(mac(1)).air_bytes, 293 + 102);
    assert_eq!(air.counters(mac(2)).air_bytes, 293);
    let total = air.total_counters();
    assert_eq!((total.sent, total.air_bytes), (3, 293 * 2 + 102));

    // Once the medium is idle again, a frame goes at once.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let idle = Instant::now();
    b.transmit(mac(9), vec![4; 250], 4);
    let (_, at) = heard(&mut receiver).await;
    assert_near("a frame on an idle medium", at - idle, full);
}

/// ESP-7: the medium is per channel and per group of nodes that hear each other: a frame on
/// channel 6, or between nodes partitioned away, does not wait for channel 1's.
#[tokio::test(start_paused = true)]
async fn other_channels_and_partitions_do_not_wait() {
    let air = air(Some(RATE));
    let a = air.attach(mac(1), 1).unwrap();
    let mut a_receiver = air.attach(mac(2), 1).unwrap();
    let c = air.attach(mac(3), 6).unwrap();
    let mut c_receiver = air.attach(mac(4), 6).unwrap();
    let d = air.attach(mac(5), 1).unwrap();
    let mut d_receiver = air.attach(mac(6), 1).unwrap();
    air.partition(&[&[mac(1), mac(2), mac(3), mac(4)], &[mac(5), mac(6)]]);
    let full = conclave_espnow::air_time(250, NonZeroU32::new(RATE).unwrap());

    let start = Instant::now();
    a.transmit(mac(2), vec![1; 250], 1);
    c.transmit(mac(4), vec![2; 250], 2);
    d.transmit(mac(6), vec![3; 250], 3);
    for (what, port) in [
        ("channel 1", &mut a_receiver),
        ("channel 6", &mut c_receiver),
        ("the other partition", &mut d_receiver),
    ] {
        let (_, at) = heard(port).await;
        assert_near(what, at - start, full);
    }
}

/// ESP-7: without a bit rate (the default) frames overlap: three sent at once all land after
/// the latency alone, as before the model existed.
#[tokio::test(start_paused = true)]
async fn without_a_bit_rate_frames_overlap() {
    assert_eq!(AirConfig::default().bit_rate, None);
    let air = air(None);
    assert_eq!(air.bit_rate(), None);
    let a = air.attach(mac(1), 1).unwrap();
    let b = air.attach(mac(2), 1).unwrap();
    let mut receiver = air.attach(mac(9), 1).unwrap();

    let start = Instant::now();
    a.transmit(mac(9), vec![1; 250], 1);
    b.transmit(mac(9), vec![2; 250], 2);
    a.transmit(mac(9), vec![3; 250], 3);
    for n in 1..=3 {
        let (_, at) = heard(&mut receiver).await;
        assert_near(&format!("frame {n}"), at - start, Duration::ZERO);
    }
}

/// ESP-7: frames that took turns on one medium land in the order they were sent, whatever
/// latency each one drew: 50 short frames, each on the air for less time than the latency
/// varies, arrive in order.
#[tokio::test(start_paused = true)]
async fn frames_that_took_turns_land_in_order() {
    let air = Air::with_config(AirConfig {
        seed: 3,
        latency_min: Duration::ZERO,
        latency_max: Duration::from_millis(3),
        bit_rate: NonZeroU32::new(RATE),
        ..AirConfig::default()
    });
    let a = air.attach(mac(1), 1).unwrap();
    let mut receiver = air.attach(mac(9), 1).unwrap();
    for n in 0..50u8 {
        a.transmit(mac(9), vec![n], u64::from(n));
    }
    let mut order = Vec::new();
    for _ in 0..50 {
        order.push(heard(&mut receiver).await.0.payload[0]);
    }
    assert_eq!(order, (0..50).collect::<Vec<u8>>());
}
