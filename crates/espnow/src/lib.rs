//! conclave-espnow: the bridge between a conclave gateway and its USB ESP32 dongle
//! (docs/design.md §7, ESP-1..8).
//!
//! - [`frame`]: COBS framing with a CRC-16/KERMIT and the `ver | kind | seq | payload` header
//!   (ESP-1);
//! - [`message`]: every host command and dongle message with its payload layout (ESP-2);
//! - [`codec`]: the tokio-util codec of the serial line, counting and skipping bad frames;
//! - [`driver`]: the host's driver task: handshake, setup, TX credits, send queue with
//!   priorities, reconnect (ESP-3, ESP-4, ESP-5).
//! - [`serial`]: the serial port to a dongle, opened with tokio-serial, that never blocks the
//!   executor (ESP-1);
//! - [`air`]: a simulated ESP-NOW medium with channels, RSSI, loss, latency, partitions and
//!   power (ESP-7);
//! - [`virtual_dongle`]: the dongle side of the protocol in software, on that air (ESP-7);
//! - [`pty`]: a virtual dongle behind a pseudo-terminal at a stable path, which the gateway
//!   opens with tokio-serial like a real one, unplugged and replugged at will (ESP-5, ESP-7).
//!
//! `docs/dongle-protocol.md` specifies all of it byte by byte, so that firmware can be
//! written against it (ESP-6).

#![deny(missing_docs)]

pub mod air;
pub mod codec;
pub mod driver;
pub mod error;
pub mod frame;
pub mod message;
pub mod pty;
pub mod serial;
pub mod virtual_dongle;

pub use air::{
    AIR_FRAME_OVERHEAD, Air, AirConfig, AirCounters, AirEvent, AirFrame, AirMonitor, AirPort,
    TxReport, VirtualError, air_time,
};
pub use codec::{CodecStats, DongleCodec, Inbound};
pub use driver::{
    DongleConfig, DongleError, DongleEvent, DongleHandle, DongleStatus, Priority, spawn_dongle,
};
pub use error::FrameError;
pub use message::{Frame, Info, Mac, Message, ResetReason, Status};
pub use pty::{PtyMaster, VirtualSerialPort};
pub use serial::{SerialLine, open_serial};
pub use virtual_dongle::{
    DongleState, PeerEntry, VirtualDongle, VirtualDongleConfig, VirtualDongleHandle,
};
