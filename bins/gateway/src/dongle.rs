//! `conclave dongle check PORT`: is there a working conclave dongle on this port? (ESP-1..3,
//! ESP-5; issue 10.)
//!
//! Opens the port as the gateway does (tokio-serial, 8N1, no flow control), runs the
//! handshake of `docs/dongle-protocol.md` §6 (a lone `0x00`, `HELLO`, up to five tries of
//! 500 ms, a `BOOT` starts the next try at once), prints the dongle's `INFO`, the round trip
//! of a few `PING`s and the `STATS` of a few seconds, and exits 0. It changes nothing on the
//! dongle: no channel, no peer, no `SEND`.
//!
//! Everything that can go wrong names the port and says what to do: a path that does not
//! exist, something that is not a serial port (`/dev/null`), a port another program holds, a
//! device that answers with text instead of frames (an ESP32 running its default firmware, or
//! MicroPython without the dongle script), another protocol version, silence.
//!
//! Exit codes: 0 a working dongle; 1 the device answered but is not a working conclave
//! dongle; 69 the port cannot be opened or nothing answers.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use conclave_espnow::frame::{DELIMITER, MAX_ENCODED, PROTOCOL_MAJOR, PROTOCOL_MINOR, RawFrame};
use conclave_espnow::{Frame, Info, Message, SerialLine, Status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, timeout, timeout_at};

use crate::EXIT_UNAVAILABLE;
use crate::output::{errln, outln};

/// `HELLO`s before giving up, and the wait for each (§6, rules 2 and 3).
const HELLO_TRIES: u32 = 5;
const HELLO_WAIT: Duration = Duration::from_millis(500);
/// `PING`s whose round trip is measured.
const PINGS: u32 = 5;
/// Wait for the `RESP` of one `PING` (§9).
const PING_WAIT: Duration = Duration::from_millis(500);
/// Bytes of unexpected output kept to show the operator.
const KEEP_RAW: usize = 4096;

/// What `conclave dongle check` is asked.
#[derive(Debug, Clone)]
pub(crate) struct CheckOptions {
    /// The port: `/dev/ttyACM0`, `/dev/conclave-dongle`, a pseudo-terminal.
    pub(crate) port: PathBuf,
    /// Baud rate (ignored by native USB).
    pub(crate) baud: u32,
    /// How long to print `STATS`.
    pub(crate) stats: Duration,
}

/// Why the check failed, with the exit code that goes with it.
#[derive(Debug)]
enum CheckError {
    /// The port cannot be used, or nothing answers: 69.
    Unavailable(String),
    /// Something answered, but not a working conclave dongle: 1.
    NotADongle(String),
}

/// `conclave dongle check`.
pub(crate) fn check(options: &CheckOptions) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            errln!("error: cannot start the I/O runtime: {err}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CheckError::Unavailable(message)) => {
            errln!("error: {message}");
            ExitCode::from(EXIT_UNAVAILABLE)
        }
        Err(CheckError::NotADongle(message)) => {
            errln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

async fn run(options: &CheckOptions) -> Result<(), CheckError> {
    let path = options.port.display().to_string();
    preflight(&options.port)?;
    let port = SerialLine::open(&path, options.baud).map_err(|err| open_error(&path, &err))?;
    not_shared(&options.port)?;
    let mut dongle = Port {
        path: path.clone(),
        io: port,
        buffer: Vec::new(),
        raw: Vec::new(),
        seq: 0,
    };
    let info = dongle.handshake(options.baud).await?;
    print_info(&path, &info);
    dongle.pings().await?;
    dongle.stats(options.stats).await?;
    Ok(())
}

/// Problems that are clearer from the file system than from the open call's error.
fn preflight(port: &Path) -> Result<(), CheckError> {
    let path = port.display();
    let meta = std::fs::metadata(port).map_err(|err| {
        if err.kind() == io::ErrorKind::NotFound {
            let dangling = std::fs::symlink_metadata(port).is_ok();
            CheckError::Unavailable(format!(
                "{path}: no such device{}: is the dongle plugged in? Its port is usually \
                 /dev/ttyACM0 (native USB) or /dev/ttyUSB0 (USB-UART bridge), or \
                 /dev/conclave-dongle with packaging/udev/99-conclave-dongle.rules installed",
                if dangling {
                    " (the link is there, the device it points to is not)"
                } else {
                    ""
                }
            ))
        } else {
            CheckError::Unavailable(format!("{path}: {err}"))
        }
    })?;
    use std::os::unix::fs::FileTypeExt;
    if !meta.file_type().is_char_device() {
        return Err(CheckError::Unavailable(format!(
            "{path} is not a serial port (not even a device file)"
        )));
    }
    Ok(())
}

/// After the port opened as a tty: is another program on it?
fn not_shared(port: &Path) -> Result<(), CheckError> {
    match holder_of(port) {
        Some(holder) => Err(CheckError::Unavailable(format!(
            "{} is busy: {holder} has it open. Stop it first (a running `conclave run`, a \
             serial monitor, ModemManager), since two programs on one port each get half of \
             the bytes",
            port.display()
        ))),
        None => Ok(()),
    }
}

/// Another process holding `port` open, as "process PID (NAME)": two readers would split
/// the dongle's bytes. The kernel's exclusive mode (TIOCEXCL, which tokio-serial sets)
/// refuses a second open, except to root; this finds the holder for root too.
fn holder_of(port: &Path) -> Option<String> {
    let target = std::fs::canonicalize(port).ok()?;
    let own = std::process::id().to_string();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if pid == own || !pid.bytes().all(|byte| byte.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|link| link == target) {
                let name = std::fs::read_to_string(entry.path().join("comm"))
                    .map(|comm| comm.trim().to_owned())
                    .unwrap_or_default();
                return Some(format!("process {pid} ({name})"));
            }
        }
    }
    None
}

fn open_error(path: &str, err: &io::Error) -> CheckError {
    let text = err.to_string();
    let lower = text.to_lowercase();
    let detail = text
        .strip_prefix(&format!("{path}: "))
        .unwrap_or(&text)
        .to_owned();
    if lower.contains("inappropriate ioctl") || lower.contains("not a typewriter") {
        CheckError::Unavailable(format!(
            "{path} is not a serial port ({detail}); a dongle's port is a tty such as \
             /dev/ttyACM0 or /dev/ttyUSB0"
        ))
    } else if lower.contains("busy") {
        CheckError::Unavailable(format!(
            "{path} is busy: another program has it open (a running `conclave run`, a serial \
             monitor, ModemManager); stop it first ({detail})"
        ))
    } else if err.kind() == io::ErrorKind::PermissionDenied {
        CheckError::Unavailable(format!(
            "{path}: permission denied; add your user to the group that owns it (dialout on \
             Debian) or install packaging/udev/99-conclave-dongle.rules ({detail})"
        ))
    } else {
        CheckError::Unavailable(format!("cannot open {path}: {detail}"))
    }
}

fn print_info(path: &str, info: &Info) {
    outln!("dongle on {path}");
    outln!("  firmware      {}", info.firmware);
    outln!(
        "  protocol      {}.{} (this conclave: {PROTOCOL_MAJOR}.{PROTOCOL_MINOR})",
        info.protocol_major,
        info.protocol_minor
    );
    outln!("  mac           {}", info.mac);
    outln!("  channel       {}", info.channel);
    outln!(
        "  ESP-NOW       v{}, payloads up to {} bytes",
        info.espnow_version,
        info.max_payload
    );
    outln!("  TX credits    {}", info.tx_credits);
    outln!("  peers         up to {}", info.max_peers);
}

/// What came back while waiting for one answer.
enum Answer {
    Frame(Frame),
    OtherVersion(u8),
}

struct Port {
    path: String,
    io: SerialLine,
    /// Bytes read and not yet cut into frames.
    buffer: Vec<u8>,
    /// What the port sent that was not a frame, for the diagnosis.
    raw: Vec<u8>,
    seq: u16,
}

impl Port {
    fn next_seq(&mut self) -> u16 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), CheckError> {
        let written = timeout(Duration::from_secs(2), self.io.write_all(bytes)).await;
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(CheckError::Unavailable(format!(
                "{}: write failed: {err}",
                self.path
            ))),
            Err(_) => Err(CheckError::Unavailable(format!(
                "{}: a write did not finish within 2 s (nothing reads the port?)",
                self.path
            ))),
        }
    }

    async fn send(&mut self, message: Message) -> Result<u16, CheckError> {
        let seq = self.next_seq();
        let mut bytes = Vec::new();
        Frame::new(seq, message).to_raw().encode_into(&mut bytes);
        self.write(&bytes).await?;
        Ok(seq)
    }

    /// The next frame before `deadline`, or `None`. Damaged frames and runs that cannot be
    /// frames are kept in `raw` for the diagnosis.
    async fn next(&mut self, deadline: Instant) -> Result<Option<Answer>, CheckError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&byte| byte == DELIMITER) {
                let chunk: Vec<u8> = self.buffer.drain(..=end).collect();
                let encoded = &chunk[..end];
                if encoded.is_empty() {
                    continue;
                }
                match RawFrame::decode(encoded) {
                    Ok(raw) if raw.version != PROTOCOL_MAJOR => {
                        return Ok(Some(Answer::OtherVersion(raw.version)));
                    }
                    Ok(raw) => match Frame::from_raw(&raw) {
                        Ok(frame) => return Ok(Some(Answer::Frame(frame))),
                        Err(_) => self.keep(&chunk),
                    },
                    Err(_) => self.keep(&chunk),
                }
                continue;
            }
            if self.buffer.len() > MAX_ENCODED {
                let run = std::mem::take(&mut self.buffer);
                self.keep(&run);
            }
            let mut chunk = [0u8; 1024];
            let read = match timeout_at(deadline, self.io.read(&mut chunk)).await {
                Err(_) => return Ok(None),
                Ok(Ok(0)) => {
                    return Err(CheckError::Unavailable(format!(
                        "{}: the port closed (end of file): the dongle was unplugged or reset \
                         its USB connection",
                        self.path
                    )));
                }
                Ok(Ok(read)) => read,
                Ok(Err(err)) => {
                    return Err(CheckError::Unavailable(format!(
                        "{}: read failed: {err}",
                        self.path
                    )));
                }
            };
            self.buffer.extend_from_slice(&chunk[..read]);
        }
    }

    fn keep(&mut self, bytes: &[u8]) {
        let room = KEEP_RAW.saturating_sub(self.raw.len());
        self.raw.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// §6: a lone `0x00`, `HELLO`, wait for its `INFO`; five tries; `BOOT` retries at once.
    async fn handshake(&mut self, baud: u32) -> Result<Info, CheckError> {
        for _ in 0..HELLO_TRIES {
            self.write(&[DELIMITER]).await?;
            let seq = self
                .send(Message::Hello {
                    major: PROTOCOL_MAJOR,
                    minor: PROTOCOL_MINOR,
                })
                .await?;
            let deadline = Instant::now() + HELLO_WAIT;
            loop {
                match self.next(deadline).await? {
                    None => break,
                    Some(Answer::OtherVersion(major)) => {
                        return Err(CheckError::NotADongle(format!(
                            "{} speaks dongle protocol {major}, this conclave speaks \
                             {PROTOCOL_MAJOR}: update the firmware (firmware/micropython) or \
                             conclave",
                            self.path
                        )));
                    }
                    Some(Answer::Frame(Frame {
                        seq: answered,
                        message: Message::Info(info),
                    })) if answered == seq => return Ok(info),
                    Some(Answer::Frame(Frame {
                        message: Message::Boot { .. },
                        ..
                    })) => break,
                    Some(Answer::Frame(_)) => {}
                }
            }
        }
        Err(self.no_info(baud))
    }

    /// Why five `HELLO`s got no `INFO`, from what the port sent instead.
    fn no_info(&self, baud: u32) -> CheckError {
        let path = &self.path;
        let mut raw = self.raw.clone();
        raw.extend_from_slice(&self.buffer);
        if raw.is_empty() {
            return CheckError::Unavailable(format!(
                "no answer from {path} to {HELLO_TRIES} HELLOs at {baud} baud: no conclave \
                 dongle firmware runs there. Flash it (firmware/micropython/README.md); on a \
                 board with a USB-UART bridge, check the baud rate too (--baud)"
            ));
        }
        let text = text_of(&raw);
        if text.chars().filter(|c| c.is_ascii_alphanumeric()).count() >= 8 {
            let what = if text.contains(">>>") || text.contains("MicroPython") {
                "MicroPython is running, but not the conclave dongle script (main.py): copy \
                 it as firmware/micropython/README.md says, and reset the board"
            } else {
                "this is an ESP32 still running its default firmware (or another program): \
                 its boot text, not dongle frames. Flash MicroPython and the conclave dongle \
                 script (firmware/micropython/README.md)"
            };
            let excerpt: Vec<String> = text
                .lines()
                .map(str::trim_end)
                .filter(|line| !line.is_empty())
                .take(8)
                .map(|line| format!("    | {}", line.chars().take(100).collect::<String>()))
                .collect();
            return CheckError::NotADongle(format!(
                "{path} answers with text, not dongle frames:\n{}\n{what}",
                excerpt.join("\n")
            ));
        }
        CheckError::NotADongle(format!(
            "{path} sent {} bytes but no dongle frame in answer to {HELLO_TRIES} HELLOs: \
             another device, or another baud rate than {baud}. An ESP32 still running its \
             default firmware prints its boot text at 115200 baud, which reads as garbage at \
             any other rate (--baud 115200 shows it); MicroPython's console on a USB-UART \
             board also runs at 115200 until the dongle script switches it",
            raw.len()
        ))
    }

    /// Round trips of a few `PING`s (§5.10).
    async fn pings(&mut self) -> Result<(), CheckError> {
        let mut times = Vec::new();
        for _ in 0..PINGS {
            let start = Instant::now();
            let seq = self.send(Message::Ping).await?;
            let deadline = start + PING_WAIT;
            loop {
                match self.next(deadline).await? {
                    None => {
                        return Err(CheckError::NotADongle(format!(
                            "{}: no answer to PING within {PING_WAIT:?} after a good \
                             handshake: the firmware stalls",
                            self.path
                        )));
                    }
                    Some(Answer::Frame(Frame {
                        seq: answered,
                        message: Message::Resp { status },
                    })) if answered == seq => {
                        if status != Status::Ok {
                            return Err(CheckError::NotADongle(format!(
                                "{}: PING answered {status:?}",
                                self.path
                            )));
                        }
                        times.push(start.elapsed());
                        break;
                    }
                    Some(_) => {}
                }
            }
        }
        let millis = |time: Duration| time.as_secs_f64() * 1000.0;
        let total: Duration = times.iter().sum();
        outln!(
            "  ping          {:.2} ms min, {:.2} ms average, {:.2} ms max ({PINGS} PINGs)",
            millis(times.iter().copied().min().unwrap_or_default()),
            millis(total / PINGS),
            millis(times.iter().copied().max().unwrap_or_default())
        );
        Ok(())
    }

    /// Prints every `STATS` (and `LOG`, and a tally of what the radio heard) for `window`.
    async fn stats(&mut self, window: Duration) -> Result<(), CheckError> {
        if window.is_zero() {
            return Ok(());
        }
        let start = Instant::now();
        let end = start + window;
        let mut stats = 0;
        let mut heard = 0u64;
        let mut strongest: Option<i8> = None;
        loop {
            match self.next(end).await? {
                None => break,
                Some(Answer::Frame(frame)) => match frame.message {
                    Message::Stats {
                        rx_dropped,
                        tx_dropped,
                        crc_errors,
                    } => {
                        stats += 1;
                        outln!(
                            "  stats {:>5.1} s  rx_dropped {rx_dropped}  tx_dropped \
                             {tx_dropped}  crc_errors {crc_errors}",
                            start.elapsed().as_secs_f64()
                        );
                    }
                    Message::Log { level, text } => outln!("  log (level {level})  {text}"),
                    Message::Rx { rssi, .. } => {
                        heard += 1;
                        strongest = Some(strongest.map_or(rssi, |best| best.max(rssi)));
                    }
                    Message::Boot { reason, .. } => {
                        outln!("  boot          the dongle restarted ({reason:?}) during the check")
                    }
                    _ => {}
                },
                Some(Answer::OtherVersion(_)) => {}
            }
        }
        if let Some(rssi) = strongest {
            outln!("  radio         heard {heard} frames on its channel, strongest {rssi} dBm");
        } else {
            outln!("  radio         heard nothing on its channel");
        }
        if stats == 0 && window >= Duration::from_secs(2) {
            return Err(CheckError::NotADongle(format!(
                "{}: no STATS in {:.0} s (a dongle sends one every second, \
                 docs/dongle-protocol.md §5.16): the gateway would take it for dead",
                self.path,
                window.as_secs_f64()
            )));
        }
        Ok(())
    }
}

/// The printable part of `raw`: text lines, other bytes dropped.
fn text_of(raw: &[u8]) -> String {
    raw.iter()
        .filter(|&&byte| byte == b'\n' || byte == b'\t' || (0x20..0x7f).contains(&byte))
        .map(|&byte| char::from(byte))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_of_keeps_printable_lines() {
        assert_eq!(text_of(b"ets \x01Jul\r\n>>> \xff"), "ets Jul\n>>> ");
    }
}
