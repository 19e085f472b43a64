//! The reference dongle firmware (`firmware/micropython`) as child processes, for tests: each
//! is `host_dongle.py` under CPython, its protocol logic unchanged from the board's, behind a
//! pseudo-terminal reached through a symbolic link, on a simulated air (UDP multicast on
//! loopback) shared by the processes given the same [`AirAddress`]. `kill -9` of one is its
//! dongle pulled out.
//!
//! Standard library only: the gateway's, the workspace tests' and the benchmark's crates
//! include this file too (`#[path]`). Every test that uses it first calls
//! [`skip_without_python`], which prints why it skips when `python3` is not installed.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a firmware process may take to start (CPython's start-up on a loaded machine).
pub(crate) const START_BOUND: Duration = Duration::from_secs(30);

/// The repository's root, found from the including crate's manifest directory.
pub(crate) fn repo_root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        if dir.join("firmware/micropython/host_dongle.py").is_file() {
            return dir;
        }
        assert!(
            dir.pop(),
            "firmware/micropython/host_dongle.py not found above {}",
            env!("CARGO_MANIFEST_DIR")
        );
    }
}

/// A file of `firmware/micropython`.
pub(crate) fn firmware_file(name: &str) -> PathBuf {
    repo_root().join("firmware/micropython").join(name)
}

/// Whether `python3` runs.
pub(crate) fn python_available() -> bool {
    Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// True, after saying so, when `python3` is missing: the test then returns without checking
/// anything. Everywhere conclave is built and tested (CI included) it is there.
pub(crate) fn skip_without_python(test: &str) -> bool {
    if python_available() {
        return false;
    }
    // Straight to the standard error, past the test harness's capture of `println!`, so the
    // skip shows in the output of a passing `cargo test`.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: python3 is not installed, and the reference dongle firmware \
         (firmware/micropython) runs under CPython on the host"
    );
    true
}

/// A simulated air of its own: a multicast group and port no other test uses.
#[derive(Debug, Clone)]
pub(crate) struct AirAddress(pub String);

impl AirAddress {
    /// A random group in 239.0.0.0/8 (administratively scoped, and the processes send with
    /// TTL 0: it never leaves the machine) and a port the system just handed out.
    pub(crate) fn random() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        let mix = nanos ^ std::process::id().rotate_left(13) ^ next_counter().rotate_left(7);
        let [a, b, c, _] = mix.to_le_bytes();
        let port = UdpSocket::bind("127.0.0.1:0")
            .and_then(|socket| socket.local_addr())
            .map(|address| address.port())
            .expect("a free UDP port");
        AirAddress(format!("239.{a}.{b}.{}:{port}", c.max(1)))
    }
}

fn next_counter() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    COUNTER.fetch_add(0x9e37_79b9, Ordering::Relaxed)
}

/// One firmware process.
#[derive(Debug)]
pub(crate) struct Firmware {
    child: Option<Child>,
    /// The pseudo-terminal's slave.
    pub(crate) pty: PathBuf,
    /// The symbolic link to it: the port a gateway opens.
    pub(crate) link: PathBuf,
    /// Its MAC, as given.
    pub(crate) mac: String,
}

impl Firmware {
    /// Starts `host_dongle.py` on `air` with `mac`, its port linked at `link`, with `extra`
    /// options; returns once it is ready (its `BOOT` is on the line).
    pub(crate) fn start(air: &AirAddress, mac: &str, link: &Path, extra: &[&str]) -> Firmware {
        let mut child = Command::new("python3")
            .arg("-u")
            .arg(firmware_file("host_dongle.py"))
            .args([
                "--exit-with-parent",
                "--air",
                &air.0,
                "--mac",
                mac,
                "--link",
            ])
            .arg(link)
            .args(extra)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(START_BOUND) {
            Ok(line) if line.starts_with("ready ") => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("firmware {mac} did not start: {other:?}");
            }
        };
        let pty = line
            .split_whitespace()
            .find_map(|field| field.strip_prefix("pty="))
            .map(PathBuf::from)
            .expect("the ready line names the pty");
        Firmware {
            child: Some(child),
            pty,
            link: link.to_path_buf(),
            mac: mac.to_owned(),
        }
    }

    /// The port's path, as a gateway's configuration names it.
    pub(crate) fn port(&self) -> String {
        self.link.to_string_lossy().into_owned()
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// `kill -9`: the dongle is pulled out; its gateway reads end of file.
    pub(crate) fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (`USR1`: the dongle restarts as its watchdog would).
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {}", self.pid());
    }
}

impl Drop for Firmware {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A test's own end of a firmware's serial line: the pty's slave opened by path, with a
/// thread reading it so that a frame is waited for with a bound.
pub(crate) struct Line {
    port: std::fs::File,
    bytes: mpsc::Receiver<Vec<u8>>,
    pending: Vec<u8>,
}

impl Line {
    /// Opens `path` (the firmware keeps its pseudo-terminal raw).
    pub(crate) fn open(path: &Path) -> Line {
        let port = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        let mut reader = port.try_clone().expect("a second descriptor");
        let (tx, bytes) = mpsc::channel();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(read) = reader.read(&mut chunk) {
                if read == 0 || tx.send(chunk[..read].to_vec()).is_err() {
                    break;
                }
            }
        });
        Line {
            port,
            bytes,
            pending: Vec::new(),
        }
    }

    /// Writes `bytes` in one `write`.
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        self.port.write_all(bytes).expect("write to the pty");
    }

    /// The next frame with its delimiter (a lone delimiter is a frame of its own), or `None`
    /// when none is complete within `within`. Wall-clock time: the firmware is another
    /// process, which no test clock controls.
    #[allow(clippy::disallowed_types)]
    pub(crate) fn next_frame(&mut self, within: Duration) -> Option<Vec<u8>> {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(end) = self.pending.iter().position(|&byte| byte == 0) {
                return Some(self.pending.drain(..=end).collect());
            }
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            match self.bytes.recv_timeout(left) {
                Ok(chunk) => self.pending.extend_from_slice(&chunk),
                Err(_) => return None,
            }
        }
    }

    /// The next frame; fails the test after `within` without one.
    pub(crate) fn expect_frame(&mut self, what: &str, within: Duration) -> Vec<u8> {
        self.next_frame(within)
            .unwrap_or_else(|| panic!("no frame within {within:?}: expected {what}"))
    }
}
