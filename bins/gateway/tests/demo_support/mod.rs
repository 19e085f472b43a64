//! A `conclave demo` process driven over pipes, as a user or a script would: its stdout read
//! line by line on a thread, commands written to its stdin, signals sent to it. Shared by the
//! demo's test files.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

/// Bound on every wait: generous against a loaded machine.
pub(crate) const BOUND: Duration = Duration::from_secs(30);

/// A running demo.
pub(crate) struct Demo {
    pub(crate) child: Child,
    /// `None` once closed: the demo then sees the end of its input.
    pub(crate) stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    /// The demo's `TMPDIR` when the caller gave none: the log it keeps there (and anything a
    /// killed demo leaves behind) goes with the test, not into the machine's `/tmp`.
    _own_tmp: Option<tempfile::TempDir>,
}

impl Demo {
    /// Starts `conclave demo ARGS`, in the temporary directory `tmp` (`TMPDIR`) when given,
    /// in one of its own otherwise.
    pub(crate) fn start(tmp: Option<&Path>, args: &[&str]) -> Self {
        let own_tmp = match tmp {
            Some(_) => None,
            None => Some(tempfile::tempdir().expect("a temporary directory for the demo")),
        };
        let tmp = tmp.or(own_tmp.as_ref().map(tempfile::TempDir::path));
        let mut command = Command::new(env!("CARGO_BIN_EXE_conclave"));
        command
            .arg("demo")
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(tmp) = tmp {
            command.env("TMPDIR", tmp);
        }
        let mut child = command.spawn().expect("spawn conclave demo");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("the demo's stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            _own_tmp: own_tmp,
        }
    }

    /// Waits (bounded) for a line `matches` accepts; returns it.
    pub(crate) fn wait_line(&mut self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let deadline = SystemTime::now() + BOUND;
        loop {
            let left = deadline
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if matches(&line) {
                        return line;
                    }
                }
                Err(_) => panic!("no {what} within {BOUND:?}:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// Types `command` and Enter.
    pub(crate) fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("the demo's stdin is open");
        writeln!(stdin, "{command}").expect("write to the demo");
        stdin.flush().expect("flush the demo's stdin");
    }

    /// Sends `signal` (`INT`, `TERM`, `HUP`) to the demo.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits (bounded) for the process to exit and for its last line; its exit code.
    pub(crate) fn wait_exit(&mut self) -> Option<i32> {
        let deadline = SystemTime::now() + BOUND;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the demo") {
                // The rest of what it printed.
                while let Ok(line) = self.lines.recv_timeout(BOUND) {
                    self.seen.push(line);
                }
                return status.code();
            }
            if SystemTime::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the demo did not exit within {BOUND:?}:\n{}",
                    self.seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every line read so far.
    pub(crate) fn output(&self) -> String {
        self.seen.join("\n")
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
