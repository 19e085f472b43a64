//! The virtual dongle's side of start-up, commands, reboots and a noisy line (ESP-1, ESP-2,
//! ESP-3, ESP-7), over a tokio duplex with a scripted host on a paused clock.

#![allow(clippy::unwrap_used)]

mod virtual_support;

use std::time::Duration;

use conclave_espnow::frame::{PROTOCOL_MAJOR, PROTOCOL_MINOR, RawFrame};
use conclave_espnow::message::kind;
use conclave_espnow::{Air, Frame, Inbound, Message, ResetReason, Status, VirtualDongleConfig};
use virtual_support::{add_peer, mac, plug, quiet, trace};

/// ESP-3, ESP-7: a dongle announces `BOOT{PowerOn}` with its protocol version, and answers
/// `HELLO` with `INFO` carrying the same seq and its description.
#[tokio::test(start_paused = true)]
async fn boot_then_hello_is_answered_by_info_with_the_same_seq() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, dongle) = plug(&air, quiet(mac(1)));
    let boot = host.recv().await;
    assert_eq!(
        boot.message,
        Message::Boot {
            reason: ResetReason::PowerOn,
            major: PROTOCOL_MAJOR,
            minor: PROTOCOL_MINOR
        }
    );
    // The host's flush byte, then HELLO.
    host.raw(&[0x00]).await;
    let seq = host
        .request(Message::Hello {
            major: PROTOCOL_MAJOR,
            minor: PROTOCOL_MINOR,
        })
        .await;
    let answer = host.recv().await;
    assert_eq!(answer.seq, seq);
    let Message::Info(info) = answer.message else {
        panic!("expected INFO, got {answer:?}");
    };
    assert_eq!(info.protocol_major, PROTOCOL_MAJOR);
    assert_eq!(info.protocol_minor, PROTOCOL_MINOR);
    assert_eq!(info.mac, mac(1));
    assert_eq!(info.espnow_version, 1);
    assert_eq!(info.max_payload, 250);
    assert_eq!(info.channel, 1);
    assert_eq!(info.tx_credits, 4);
    assert_eq!(info.max_peers, 20);
    assert!(info.firmware.starts_with("conclave-virtual"));
    assert_eq!(dongle.state().boots, 1);
    assert_eq!(dongle.state().last_boot, Some(ResetReason::PowerOn));
}

/// ESP-3: a dongle can start silent, as one whose `BOOT` the host missed; `HELLO` still
/// finds it.
#[tokio::test(start_paused = true)]
async fn a_silent_dongle_sends_no_boot_and_answers_hello() {
    let _trace = trace();
    let air = Air::new(1);
    let config = VirtualDongleConfig {
        announce_boot: false,
        ..quiet(mac(1))
    };
    let (mut host, _dongle) = plug(&air, config);
    host.expect_silence(Duration::from_millis(500)).await;
    let seq = host.request(Message::Hello { major: 1, minor: 0 }).await;
    let answer = host.recv().await;
    assert_eq!(answer.seq, seq);
    assert!(matches!(answer.message, Message::Info(_)));
}

/// ESP-3: a dongle of another major version says so in its frames' header and in `INFO`;
/// the host's codec hands such frames up as another version for the handshake to refuse.
#[tokio::test(start_paused = true)]
async fn a_dongle_can_present_another_major_version() {
    let _trace = trace();
    let air = Air::new(1);
    let config = VirtualDongleConfig {
        protocol_major: PROTOCOL_MAJOR + 1,
        protocol_minor: 7,
        ..quiet(mac(1))
    };
    let (mut host, _dongle) = plug(&air, config);
    let Some(Ok(Inbound::OtherVersion(boot))) = host.next().await else {
        panic!("expected a BOOT of another version");
    };
    assert_eq!(boot.version, PROTOCOL_MAJOR + 1);
    assert_eq!(boot.kind, kind::BOOT);
    let seq = host.request(Message::Hello { major: 1, minor: 0 }).await;
    let Some(Ok(Inbound::OtherVersion(info))) = host.next().await else {
        panic!("expected an INFO of another version");
    };
    assert_eq!(info.kind, kind::INFO);
    assert_eq!(info.seq, seq);
    // This virtual firmware keeps the v1 layout, so the payload reads as an INFO.
    let Message::Info(info) = Message::decode_payload(info.kind, &info.payload).unwrap() else {
        panic!("not an INFO");
    };
    assert_eq!(
        (info.protocol_major, info.protocol_minor),
        (PROTOCOL_MAJOR + 1, 7)
    );
}

/// ESP-3: a host of another major version still gets `INFO` for its `HELLO`, so it can
/// tell the versions apart; its other frames are dropped.
#[tokio::test(start_paused = true)]
async fn hello_of_another_major_is_answered() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, _dongle) = plug(&air, quiet(mac(1)));
    host.recv().await;
    let mut bytes = Vec::new();
    RawFrame {
        version: PROTOCOL_MAJOR + 1,
        kind: kind::PING,
        seq: 40,
        payload: vec![],
    }
    .encode_into(&mut bytes);
    RawFrame {
        version: PROTOCOL_MAJOR + 1,
        kind: kind::HELLO,
        seq: 41,
        payload: vec![PROTOCOL_MAJOR + 1, 0],
    }
    .encode_into(&mut bytes);
    host.raw(&bytes).await;
    let answer = host.recv().await;
    assert_eq!(answer.seq, 41);
    assert!(matches!(answer.message, Message::Info(_)));
}

/// ESP-2: every command is answered with its seq; bounds are checked; the state follows.
#[tokio::test(start_paused = true)]
async fn commands_are_answered_and_change_the_state() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, dongle) = plug(&air, quiet(mac(1)));
    host.recv().await;
    assert_eq!(host.call(Message::Ping).await, Status::Ok);
    assert_eq!(
        host.call(Message::SetChannel { channel: 0 }).await,
        Status::BadArgument
    );
    assert_eq!(
        host.call(Message::SetChannel { channel: 15 }).await,
        Status::BadArgument
    );
    assert_eq!(
        host.call(Message::SetChannel { channel: 11 }).await,
        Status::Ok
    );
    assert_eq!(air.channel(mac(1)), Some(11));
    assert_eq!(host.call(add_peer(mac(2))).await, Status::Ok);
    let with_key = Message::AddPeer {
        mac: mac(2),
        channel: 11,
        encrypt: true,
        key: [7; 16],
    };
    assert_eq!(
        host.call(with_key).await,
        Status::Ok,
        "adding again updates"
    );
    assert_eq!(
        host.call(Message::AddPeer {
            mac: mac(3),
            channel: 15,
            encrypt: false,
            key: [0; 16]
        })
        .await,
        Status::BadArgument
    );
    assert_eq!(
        host.call(Message::SetPmk { pmk: [9; 16] }).await,
        Status::Ok
    );
    let state = dongle.state();
    assert_eq!(state.channel, 11);
    assert_eq!(state.peers.len(), 1);
    assert_eq!(state.peers[0].mac, mac(2));
    assert!(state.peers[0].encrypt);
    assert_eq!(state.peers[0].key, [7; 16]);
    assert_eq!(state.pmk, Some([9; 16]));
    assert_eq!(
        host.call(Message::DelPeer { mac: mac(3) }).await,
        Status::UnknownPeer
    );
    assert_eq!(
        host.call(Message::DelPeer { mac: mac(2) }).await,
        Status::Ok
    );
    assert!(dongle.state().peers.is_empty());
    // INFO reports the current channel.
    let seq = host.request(Message::Hello { major: 1, minor: 0 }).await;
    let Frame {
        seq: answered,
        message: Message::Info(info),
    } = host.recv().await
    else {
        panic!("expected INFO");
    };
    assert_eq!((answered, info.channel), (seq, 11));
}

/// ESP-2: a frame of an unknown kind gets `RESP{UnknownKind}`, one of the dongle's own
/// kinds too, and one whose fields do not fit its kind `RESP{Malformed}`, each with its seq.
#[tokio::test(start_paused = true)]
async fn unknown_and_malformed_frames_are_answered_with_their_seq() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, dongle) = plug(&air, quiet(mac(1)));
    host.recv().await;
    let mut bytes = Vec::new();
    RawFrame {
        version: PROTOCOL_MAJOR,
        kind: 0x42,
        seq: 500,
        payload: vec![1, 2, 3],
    }
    .encode_into(&mut bytes);
    RawFrame {
        version: PROTOCOL_MAJOR,
        kind: kind::SET_CHANNEL,
        seq: 501,
        payload: vec![1, 2],
    }
    .encode_into(&mut bytes);
    host.raw(&bytes).await;
    assert_eq!(host.resp(500).await, Status::UnknownKind);
    assert_eq!(host.resp(501).await, Status::Malformed);
    assert_eq!(
        host.call(Message::Resp { status: Status::Ok }).await,
        Status::UnknownKind
    );
    let codec = dongle.state().codec;
    assert_eq!((codec.unknown_kind, codec.malformed), (1, 1));
}

/// ESP-1, ESP-7: noise, a frame with a bad CRC and flush bytes are counted and never
/// answered; the next good request is answered; `STATS` reports the CRC errors.
#[tokio::test(start_paused = true)]
async fn garbage_is_counted_never_answered_and_the_next_request_is() {
    let _trace = trace();
    let air = Air::new(1);
    let config = VirtualDongleConfig {
        stats_interval: Some(Duration::from_secs(1)),
        ..VirtualDongleConfig::new(mac(1))
    };
    let (mut host, dongle) = plug(&air, config);
    host.recv().await;
    let mut damaged = Vec::new();
    Frame::new(77, Message::Ping)
        .to_raw()
        .encode_into(&mut damaged);
    damaged[3] ^= 0x20;
    host.raw(&[0x13, 0x37, 0xfe, 0x00, 0x00, 0x00]).await;
    host.raw(&damaged).await;
    host.raw(&[0xaa; 40]).await; // no delimiter yet: glued to the next frame's bytes
    host.raw(&[0x00]).await;
    host.expect_silence(Duration::from_millis(300)).await;
    assert_eq!(host.call(Message::Ping).await, Status::Ok);
    let state = dongle.state();
    assert_eq!(state.codec.crc_errors, 1, "{:?}", state.codec);
    assert_eq!(state.codec.malformed, 2, "{:?}", state.codec);
    assert_eq!(state.crc_errors, 1);
    host.skip_chatter = false;
    let stats = host
        .until(|message| matches!(message, Message::Stats { .. }))
        .await;
    assert_eq!(stats.seq, 0);
    assert_eq!(
        stats.message,
        Message::Stats {
            rx_dropped: 0,
            tx_dropped: 0,
            crc_errors: 1
        }
    );
}

/// ESP-3: `RESET` is answered `RESP{Ok}`, then the dongle sends `BOOT{HostRequest}` and has
/// forgotten channel, peers and key; requests during the reboot go unanswered.
#[tokio::test(start_paused = true)]
async fn reset_answers_then_boots_and_forgets_the_state() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, dongle) = plug(&air, quiet(mac(1)));
    host.recv().await;
    assert_eq!(
        host.call(Message::SetChannel { channel: 6 }).await,
        Status::Ok
    );
    assert_eq!(host.call(add_peer(mac(2))).await, Status::Ok);
    assert_eq!(
        host.call(Message::SetPmk { pmk: [1; 16] }).await,
        Status::Ok
    );
    assert_eq!(host.call(Message::Reset).await, Status::Ok);
    assert!(dongle.state().booting);
    host.request(Message::Ping).await; // lost: the dongle is rebooting
    let boot = host.recv().await;
    assert_eq!(boot.seq, 0);
    assert_eq!(
        boot.message,
        Message::Boot {
            reason: ResetReason::HostRequest,
            major: PROTOCOL_MAJOR,
            minor: PROTOCOL_MINOR
        }
    );
    let state = dongle.state();
    assert!(!state.booting);
    assert_eq!((state.channel, state.boots), (1, 2));
    assert!(state.peers.is_empty());
    assert_eq!(state.pmk, None);
    assert_eq!(air.channel(mac(1)), Some(1));
    assert_eq!(host.call(Message::Ping).await, Status::Ok);
}

/// ESP-3, ESP-5: a reboot through the handle (the watchdog) sends `BOOT{Watchdog}`
/// unprompted and forgets the state, so the host must set channel and peers again.
#[tokio::test(start_paused = true)]
async fn a_watchdog_reset_sends_boot_unprompted() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, dongle) = plug(&air, quiet(mac(1)));
    host.recv().await;
    assert_eq!(
        host.call(Message::SetChannel { channel: 3 }).await,
        Status::Ok
    );
    assert_eq!(host.call(add_peer(mac(2))).await, Status::Ok);
    dongle.reset();
    let boot = host.recv().await;
    assert!(matches!(
        boot.message,
        Message::Boot {
            reason: ResetReason::Watchdog,
            ..
        }
    ));
    let state = dongle.state();
    assert_eq!((state.channel, state.peers.len()), (1, 0));
    assert_eq!(state.last_boot, Some(ResetReason::Watchdog));
}

/// ESP-2: `LOG` lines reach the host when asked for, and boots are logged when enabled.
#[tokio::test(start_paused = true)]
async fn log_lines_reach_the_host() {
    let _trace = trace();
    let air = Air::new(1);
    let config = VirtualDongleConfig {
        log_events: true,
        ..quiet(mac(1))
    };
    let (mut host, dongle) = plug(&air, config);
    host.skip_chatter = false;
    assert!(matches!(host.recv().await.message, Message::Boot { .. }));
    assert!(matches!(
        host.recv().await.message,
        Message::Log { level: 2, .. }
    ));
    dongle.log(1, "radio is warm");
    assert_eq!(
        host.recv().await.message,
        Message::Log {
            level: 1,
            text: "radio is warm".into()
        }
    );
}

/// ESP-5: unplugging closes the host's end (end of file) and takes the radio off the air;
/// a host closing its end stops the dongle too.
#[tokio::test(start_paused = true)]
async fn unplug_closes_the_host_end_and_leaves_the_air() {
    let _trace = trace();
    let air = Air::new(1);
    let (mut host, dongle) = plug(&air, quiet(mac(1)));
    host.recv().await;
    assert_eq!(air.nodes(), vec![mac(1)]);
    dongle.unplug().await;
    assert!(!dongle.is_running());
    assert!(host.next().await.is_none(), "end of file");
    assert!(air.nodes().is_empty());
    assert!(!dongle.is_powered());

    let (host, dongle) = plug(&air, quiet(mac(1)));
    drop(host);
    dongle.stopped().await;
    assert!(air.nodes().is_empty());
    // The same MAC can come back.
    let (mut host, _dongle) = plug(&air, quiet(mac(1)));
    assert!(matches!(host.recv().await.message, Message::Boot { .. }));
}
