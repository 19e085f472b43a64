//! `conclave dongle check PORT` (issue 10), as an operator runs it: against the reference
//! firmware on a pseudo-terminal it prints INFO, PING round trips and STATS and exits 0;
//! against a missing path, `/dev/null`, a port another program holds, and a board that
//! prints text instead of frames (an ESP32 with its default firmware, MicroPython without the
//! dongle script) it exits non-zero with a message that names the path and says what to do.
//!
//! The firmware tests are skipped, with a message, when `python3` is not installed.

#![allow(clippy::unwrap_used)]

#[path = "../../../crates/espnow/tests/firmware_support/mod.rs"]
mod firmware_support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use conclave_espnow::PtyMaster;
use firmware_support::{AirAddress, Firmware, skip_without_python};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn check(port: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_conclave"))
        .args(["dongle", "check"])
        .arg(port)
        .args(extra)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn check_prints_info_pings_and_stats_of_the_firmware() {
    if skip_without_python("check_prints_info_pings_and_stats_of_the_firmware") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let firmware = Firmware::start(
        &AirAddress::random(),
        "02:00:00:00:00:0c",
        &dir.path().join("dongle"),
        &[],
    );
    let output = check(&firmware.link, &["--stats", "2"]);
    let stdout = text(&output.stdout);
    println!("{stdout}{}", text(&output.stderr));
    assert!(output.status.success(), "{output:?}");
    assert!(stdout.contains(&format!("dongle on {}", firmware.port())));
    assert!(stdout.contains("firmware      conclave-dongle-py 1.0.0 host"));
    assert!(stdout.contains("mac           02:00:00:00:00:0c"));
    assert!(stdout.contains("TX credits    8"));
    assert!(stdout.contains("peers         up to 19"));
    assert!(stdout.contains("(5 PINGs)"));
    assert!(
        stdout.contains("rx_dropped 0  tx_dropped 0  crc_errors 0"),
        "at least one STATS in two seconds"
    );
}

#[test]
fn check_names_a_missing_port() {
    let dir = tempfile::tempdir().unwrap();
    let port = dir.path().join("ttyACM9");
    let output = check(&port, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains(&format!("{}: no such device", port.display())),
        "{stderr}"
    );
}

#[test]
fn check_refuses_what_is_not_a_serial_port() {
    let output = check(Path::new("/dev/null"), &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("/dev/null is not a serial port"),
        "{stderr}"
    );
}

#[test]
fn check_says_who_holds_a_busy_port() {
    if skip_without_python("check_says_who_holds_a_busy_port") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let firmware = Firmware::start(
        &AirAddress::random(),
        "02:00:00:00:00:0d",
        &dir.path().join("dongle"),
        &[],
    );
    let _held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&firmware.link)
        .unwrap();
    let output = check(&firmware.link, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} is busy: process {}",
            firmware.port(),
            std::process::id()
        )),
        "{stderr}"
    );
}

/// A board that prints `banner` when its port opens and `reply` for every line it gets (a
/// prompt, as MicroPython's console); returns what `conclave dongle check` made of it.
async fn check_a_board_that_prints(banner: &'static [u8], reply: &'static [u8]) -> Output {
    let mut master = PtyMaster::open().unwrap();
    let slave = master.slave_path().to_path_buf();
    // Kept by the kernel until the check opens the port.
    master.write_all(banner).await.unwrap();
    let board = tokio::spawn(async move {
        let mut chunk = [0u8; 256];
        while let Ok(read) = master.read(&mut chunk).await {
            if read == 0 || master.write_all(reply).await.is_err() {
                break;
            }
        }
    });
    let output = tokio::task::spawn_blocking(move || check(&slave, &[]))
        .await
        .unwrap();
    board.abort();
    output
}

#[tokio::test]
async fn check_says_an_esp32_with_its_default_firmware_prints_boot_text() {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        check_a_board_that_prints(
            b"ets Jul 29 2019 12:21:46\r\n\r\nrst:0x1 (POWERON_RESET),boot:0x13 \
              (SPI_FAST_FLASH_BOOT)\r\nconfigsip: 0, SPIWP:0xee\r\nentry 0x40080680\r\n",
            b"",
        ),
    )
    .await
    .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("answers with text, not dongle frames"),
        "{stderr}"
    );
    assert!(stderr.contains("| rst:0x1 (POWERON_RESET)"), "{stderr}");
    assert!(
        stderr.contains("an ESP32 still running its default firmware"),
        "{stderr}"
    );
}

#[tokio::test]
async fn check_says_micropython_runs_without_the_dongle_script() {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        check_a_board_that_prints(
            b"MicroPython v1.22.2 on 2024-02-22; ESP32C3 module with ESP32C3\r\n\
              Type \"help()\" for more information.\r\n>>> ",
            b"\r\n>>> ",
        ),
    )
    .await
    .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("MicroPython is running, but not the conclave dongle script"),
        "{stderr}"
    );
}
