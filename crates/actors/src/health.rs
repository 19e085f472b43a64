//! The health reader (PRI-1's battery, RAFT-10's priority): [`HealthActor`] reads the
//! `[health]` source and hands each good reading to the election as a [`HealthUpdate`]; the
//! core decides what it means (a priority master at a low battery resigns, a raft node's
//! priority changes). Nothing is decided here.
//!
//! - `source = "fixed"`: `battery_percent`, handed over once at start (and at a reload,
//!   [`ReplaceHealth`]).
//! - `source = "file"`: the file is read every `interval_ms`.
//! - `source = "command"`: the command (a string run with `/bin/sh -c`, or an argv array) runs
//!   every `interval_ms`; its standard output is the reading. It must exit with status 0
//!   within `timeout_ms`: at the timeout it is killed with its whole process group, as hook
//!   commands are. At most [`OUTPUT_LIMIT`] bytes of output are read.
//!
//! What a file or an output holds ([`parse_reading`]): a bare integer 0–100, the battery, or
//! lines `battery=NN` (0–100) and/or `priority=NN` (0–255), blank lines and surrounding spaces
//! ignored. A reading without `battery=` counts as the configured `battery_percent`; one
//! without `priority=` leaves the configured `election.raft.priority` in force. Anything else
//! — an unreadable file, a command that cannot start, fails or times out, text not of that
//! form — is a reading error: logged at WARN with the file or command and the text, counted
//! in `conclave_health_readings_total{result="error"}`, and the election keeps the last good
//! reading. `conclave_battery_percent` shows the battery of the last good reading.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;
use conclave_config::{HealthConfig, HealthSource, HookCommand};
use conclave_core::election::HealthReading;
use tokio::io::AsyncReadExt;
use tracing::{debug, warn};

use crate::callbacks::{GroupKillOnDrop, process_group, process_of};
use crate::messages::HealthUpdate;
use crate::metrics::NodeMetrics;

/// The most output of a health command (or bytes of a health file) read; more is an error.
pub const OUTPUT_LIMIT: usize = 4096;

/// What one reading says, before the configured values fill in what it leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParsedReading {
    /// `battery=NN` or the bare integer, 0–100.
    pub battery_percent: Option<u8>,
    /// `priority=NN`, 0–255.
    pub priority: Option<u8>,
}

/// Reads the text of a health file or command (see the [module docs](self)); the error says
/// what is wrong, lowercase, quoting the offending part.
pub fn parse_reading(text: &str) -> Result<ParsedReading, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(
            "empty; expected a battery percentage or battery=NN / priority=NN lines".into(),
        );
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(ParsedReading {
            battery_percent: Some(percent(trimmed)?),
            priority: None,
        });
    }
    let mut reading = ParsedReading::default();
    for line in trimmed
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
    {
        let Some((name, value)) = line.split_once('=') else {
            return Err(format!(
                "line {line:?} is neither a battery percentage nor name=value (battery=NN, \
                 priority=NN)"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        let slot = match name {
            "battery" => &mut reading.battery_percent,
            "priority" => &mut reading.priority,
            _ => {
                return Err(format!(
                    "unknown name {name:?} in line {line:?}; expected battery or priority"
                ));
            }
        };
        if slot.is_some() {
            return Err(format!("{name} is given twice"));
        }
        *slot = Some(match name {
            "battery" => percent(value)?,
            _ => value
                .parse::<u8>()
                .map_err(|_| format!("priority {value:?} is not a whole number 0-255"))?,
        });
    }
    Ok(reading)
}

/// A battery percentage, 0–100.
fn percent(text: &str) -> Result<u8, String> {
    match text.parse::<u8>() {
        Ok(percent) if percent <= 100 => Ok(percent),
        _ => Err(format!("battery {text:?} is not a whole number 0-100")),
    }
}

/// Where a reading came from, as a log line names it.
#[derive(Debug, Clone)]
enum Origin {
    File(PathBuf),
    Command(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "health.file {}", path.display()),
            Origin::Command(command) => write!(f, "health.command {command}"),
        }
    }
}

/// Reads the `[health]` source and hands the readings to the election. See the
/// [module docs](self).
pub struct HealthActor {
    config: HealthConfig,
    election: Recipient<HealthUpdate>,
    metrics: NodeMetrics,
    /// A reading is under way: a tick that finds one skips its turn.
    reading: bool,
    /// The timer of a file or command source.
    ticks: Option<SpawnHandle>,
    /// Counts the configurations taken on: a reading started under an earlier one is
    /// dropped when it ends.
    generation: u64,
}

/// Replaces the `[health]` settings (a configuration reload): the new source is read at
/// once, then every new interval; a reading of the old source still under way is dropped.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct ReplaceHealth(pub HealthConfig);

impl HealthActor {
    /// A reader of `config`'s source, handing readings to `election`.
    pub fn new(
        config: HealthConfig,
        election: Recipient<HealthUpdate>,
        metrics: NodeMetrics,
    ) -> Self {
        metrics.preregister_health(config.battery_percent);
        Self {
            config,
            election,
            metrics,
            reading: false,
            ticks: None,
            generation: 0,
        }
    }

    /// Takes on the configured source: a fixed reading at once, or a reading now and one
    /// every interval.
    fn begin(&mut self, ctx: &mut Context<Self>) {
        match self.config.source {
            HealthSource::Fixed => self.hand_over(ParsedReading::default(), ctx),
            HealthSource::File(_) | HealthSource::Command(_) => {
                self.read(ctx);
                self.ticks = Some(ctx.run_interval(self.config.interval, |actor, ctx| {
                    actor.read(ctx);
                }));
            }
        }
    }

    fn origin(&self) -> Option<Origin> {
        match &self.config.source {
            HealthSource::Fixed => None,
            HealthSource::File(path) => Some(Origin::File(path.clone())),
            HealthSource::Command(command) => Some(Origin::Command(match command {
                HookCommand::Shell(line) => line.clone(),
                HookCommand::Argv(argv) => format!("{argv:?}"),
            })),
        }
    }

    /// Starts one reading unless one is under way.
    fn read(&mut self, ctx: &mut Context<Self>) {
        if self.reading {
            debug!("previous health reading still under way; skipping this one");
            return;
        }
        let Some(origin) = self.origin() else {
            return;
        };
        self.reading = true;
        let generation = self.generation;
        let source = self.config.source.clone();
        let timeout = self.config.timeout;
        let text = async move {
            match source {
                HealthSource::File(path) => read_file(path).await,
                HealthSource::Command(command) => run_command(&command, timeout).await,
                HealthSource::Fixed => Err("a fixed source is not read".to_owned()),
            }
        };
        ctx.spawn(text.into_actor(self).map(move |text, actor, ctx| {
            if generation != actor.generation {
                debug!(source = %origin, "reading of a replaced health source dropped");
                return;
            }
            actor.reading = false;
            let parsed = text.and_then(|text| {
                parse_reading(&text).map_err(|problem| format!("{problem} (read {text:?})"))
            });
            match parsed {
                Ok(parsed) => actor.hand_over(parsed, ctx),
                Err(problem) => {
                    warn!(
                        source = %origin,
                        "health reading refused, the last good one stays in force: {problem}"
                    );
                    actor.metrics.health_reading(false);
                }
            }
        }));
    }

    /// A good reading: counted, shown, and handed to the election.
    fn hand_over(&mut self, parsed: ParsedReading, ctx: &mut Context<Self>) {
        let reading = HealthReading {
            battery_percent: parsed
                .battery_percent
                .unwrap_or(self.config.battery_percent),
            priority: parsed.priority,
        };
        debug!(?reading, "health reading");
        self.metrics.health_reading(true);
        self.metrics.set_battery(reading.battery_percent);
        if let Err(SendError::Closed(_)) = self.election.try_send(HealthUpdate(reading)) {
            // The election stopped: the node is going away.
            ctx.stop();
        }
        // A full mailbox drops this reading; the next one comes an interval later.
    }
}

impl Actor for HealthActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.begin(ctx);
    }
}

impl Handler<ReplaceHealth> for HealthActor {
    type Result = ();
    fn handle(&mut self, replace: ReplaceHealth, ctx: &mut Self::Context) {
        if let Some(ticks) = self.ticks.take() {
            ctx.cancel_future(ticks);
        }
        self.generation += 1;
        self.reading = false;
        self.config = replace.0;
        self.begin(ctx);
    }
}

/// The text of a health file, at most [`OUTPUT_LIMIT`] bytes.
async fn read_file(path: PathBuf) -> Result<String, String> {
    let shown = path.display().to_string();
    let bytes = actix_rt::task::spawn_blocking(move || std::fs::read(&path))
        .await
        .map_err(|err| format!("cannot read {shown}: {err}"))?
        .map_err(|err| format!("cannot read {shown}: {err}"))?;
    if bytes.len() > OUTPUT_LIMIT {
        return Err(format!(
            "{shown} is {} bytes, more than a reading's {OUTPUT_LIMIT}",
            bytes.len()
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))
}

/// Runs a health command and returns its standard output; killed, with its process group,
/// at `timeout`.
async fn run_command(command: &HookCommand, timeout: Duration) -> Result<String, String> {
    let Some(mut process) = process_of(command) else {
        return Err("the command is an empty argv list".to_owned());
    };
    let mut child = process
        .spawn()
        .map_err(|err| format!("cannot start: {err}"))?;
    let group = GroupKillOnDrop(process_group(child.id()));
    let mut stdout = child.stdout.take();
    let run = async {
        let mut output = Vec::new();
        if let Some(stdout) = stdout.as_mut() {
            let limit = u64::try_from(OUTPUT_LIMIT + 1).unwrap_or(u64::MAX);
            stdout
                .take(limit)
                .read_to_end(&mut output)
                .await
                .map_err(|err| format!("cannot read its output: {err}"))?;
        }
        if output.len() > OUTPUT_LIMIT {
            return Err(format!("its output is longer than {OUTPUT_LIMIT} bytes"));
        }
        let status = child
            .wait()
            .await
            .map_err(|err| format!("cannot wait for it: {err}"))?;
        if !status.success() {
            return Err(format!(
                "it failed ({status}) after printing {:?}",
                String::from_utf8_lossy(&output)
            ));
        }
        String::from_utf8(output).map_err(|_| "its output is not UTF-8 text".to_owned())
    };
    let outcome = tokio::time::timeout(timeout, run).await;
    // Whatever happened, nothing of the command may outlive its reading (the guard kills
    // the group when dropped; a command that exited in time leaves nothing to kill).
    drop(group);
    outcome.unwrap_or_else(|_| {
        Err(format!(
            "still running after health.timeout_ms ({} ms); killed",
            timeout.as_millis()
        ))
    })
}

#[cfg(test)]
mod tests {
    //! Real time: the commands are real processes, which a paused clock cannot wait for.
    //! Every wait polls an observable effect with a generous bound.

    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    fn test_log() -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_test_writer()
                .finish(),
        )
    }

    fn reading(battery: Option<u8>, priority: Option<u8>) -> ParsedReading {
        ParsedReading {
            battery_percent: battery,
            priority,
        }
    }

    /// PRI-1: a bare integer is the battery; surrounding whitespace and a newline are fine.
    #[test]
    fn pri1_a_bare_integer_is_the_battery() {
        assert_eq!(parse_reading("87\n"), Ok(reading(Some(87), None)));
        assert_eq!(parse_reading("  0 "), Ok(reading(Some(0), None)));
        assert_eq!(parse_reading("100"), Ok(reading(Some(100), None)));
        assert!(parse_reading("101").unwrap_err().contains("0-100"));
        assert!(parse_reading("99999999999").unwrap_err().contains("0-100"));
    }

    /// PRI-1, RAFT-10: `battery=` and `priority=` lines, either or both, in any order, with
    /// blank lines and spaces around.
    #[test]
    fn pri1_raft10_name_value_lines() {
        assert_eq!(
            parse_reading("battery=40\npriority=7\n"),
            Ok(reading(Some(40), Some(7)))
        );
        assert_eq!(
            parse_reading("\n priority = 255 \n\n battery = 5\n"),
            Ok(reading(Some(5), Some(255)))
        );
        assert_eq!(parse_reading("priority=0"), Ok(reading(None, Some(0))));
        assert_eq!(parse_reading("battery=100"), Ok(reading(Some(100), None)));
    }

    /// Anything else is an error that quotes what was wrong.
    #[test]
    fn anything_else_is_a_reading_error() {
        for (text, gist) in [
            ("", "empty"),
            (" \n ", "empty"),
            ("charging", "neither a battery percentage"),
            ("87%", "neither a battery percentage"),
            ("-3", "neither a battery percentage"),
            ("battery=87\n12", "\"12\" is neither"),
            ("voltage=3.7", "unknown name \"voltage\""),
            ("battery=101", "battery \"101\""),
            ("battery=", "battery \"\""),
            ("priority=256", "priority \"256\""),
            ("priority=-1", "priority \"-1\""),
            ("battery=1\nbattery=2", "battery is given twice"),
        ] {
            let problem = parse_reading(text).expect_err(text);
            assert!(problem.contains(gist), "{text:?}: {problem}");
        }
    }

    /// Collects what the health reader hands to the election.
    #[derive(Default, Clone)]
    struct Received(Arc<Mutex<Vec<HealthReading>>>);

    impl Received {
        fn all(&self) -> Vec<HealthReading> {
            self.0.lock().unwrap().clone()
        }
    }

    struct FakeElection(Received);

    impl Actor for FakeElection {
        type Context = Context<Self>;
    }

    impl Handler<HealthUpdate> for FakeElection {
        type Result = ();
        fn handle(&mut self, update: HealthUpdate, _: &mut Self::Context) {
            self.0.0.lock().unwrap().push(update.0);
        }
    }

    fn start(
        source: HealthSource,
        timeout: Duration,
    ) -> (Received, NodeMetrics, Addr<HealthActor>) {
        let received = Received::default();
        let election = FakeElection(received.clone()).start();
        let metrics = NodeMetrics::new();
        // A command runs once (the reading at start): every fork of this test process
        // briefly holds the lock files of the WAL tests running beside it.
        let interval = match source {
            HealthSource::Command(_) => Duration::from_secs(3600),
            _ => Duration::from_millis(50),
        };
        let config = HealthConfig {
            source,
            battery_percent: 90,
            interval,
            timeout,
        };
        let reader = HealthActor::new(config, election.recipient(), metrics.clone()).start();
        (received, metrics, reader)
    }

    fn count(metrics: &NodeMetrics, result: &str) -> f64 {
        metrics
            .value("conclave_health_readings_total", &[("result", result)])
            .unwrap_or(0.0)
    }

    async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
        for _ in 0..1000 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }

    /// PRI-1: a fixed source hands over `battery_percent` once, at start.
    #[actix_rt::test]
    async fn pri1_fixed_source_reads_once() {
        let _log = test_log();
        let (received, metrics, _reader) = start(HealthSource::Fixed, Duration::from_secs(1));
        eventually("the fixed reading", || !received.all().is_empty()).await;
        assert_eq!(
            received.all(),
            [HealthReading {
                battery_percent: 90,
                priority: None
            }]
        );
        assert_eq!(count(&metrics, "ok"), 1.0);
        assert_eq!(metrics.value("conclave_battery_percent", &[]), Some(90.0));
    }

    /// PRI-1, RAFT-10: a file is read every interval; a reading it cannot understand is
    /// counted as an error and nothing reaches the election (the last good reading stays);
    /// a reading without a battery counts as `battery_percent`.
    #[actix_rt::test]
    async fn pri1_raft10_file_source_follows_the_file() {
        let _log = test_log();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        write!(file, "battery=40\npriority=7\n").unwrap();
        let (received, metrics, _reader) = start(
            HealthSource::File(file.path().to_path_buf()),
            Duration::from_secs(1),
        );
        let first = HealthReading {
            battery_percent: 40,
            priority: Some(7),
        };
        eventually("the file's reading", || received.all().contains(&first)).await;
        assert_eq!(metrics.value("conclave_battery_percent", &[]), Some(40.0));

        std::fs::write(file.path(), "charging\n").unwrap();
        let before = received.all().len();
        let errors = count(&metrics, "error");
        eventually("a reading error", || count(&metrics, "error") > errors).await;
        // Let the reader pass once more over the garbage: still nothing handed over.
        let errors = count(&metrics, "error");
        eventually("another reading error", || {
            count(&metrics, "error") > errors
        })
        .await;
        assert!(received.all()[before..].iter().all(|r| *r == first));
        assert_eq!(metrics.value("conclave_battery_percent", &[]), Some(40.0));

        std::fs::write(file.path(), "priority=3").unwrap();
        let next = HealthReading {
            battery_percent: 90,
            priority: Some(3),
        };
        eventually("the new reading", || received.all().contains(&next)).await;
    }

    /// A reload ([`ReplaceHealth`]) takes on the new source at once and reads the old one no
    /// more; a fixed source's battery reaches the election too.
    #[actix_rt::test]
    async fn replaced_source_applies_at_once() {
        let _log = test_log();
        let battery = |percent| HealthReading {
            battery_percent: percent,
            priority: None,
        };
        let old = tempfile::NamedTempFile::new().unwrap();
        let new = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(old.path(), "battery=40").unwrap();
        std::fs::write(new.path(), "battery=70").unwrap();
        let (received, metrics, reader) = start(
            HealthSource::File(old.path().to_path_buf()),
            Duration::from_secs(1),
        );
        eventually("the old file's reading", || {
            received.all().contains(&battery(40))
        })
        .await;
        let replaced = |source| HealthConfig {
            source,
            battery_percent: 90,
            interval: Duration::from_millis(50),
            timeout: Duration::from_secs(1),
        };
        reader
            .send(ReplaceHealth(replaced(HealthSource::File(
                new.path().to_path_buf(),
            ))))
            .await
            .unwrap();
        eventually("the new file's reading", || {
            received.all().contains(&battery(70))
        })
        .await;
        // Both files change; by the time the new one's change arrives, the old one would have
        // been read again on the same timer, had it still been.
        std::fs::write(old.path(), "battery=41").unwrap();
        std::fs::write(new.path(), "battery=71").unwrap();
        eventually("the new file's change", || {
            received.all().contains(&battery(71))
        })
        .await;
        eventually("a second reading of it", || {
            received.all().iter().filter(|r| **r == battery(71)).count() >= 2
        })
        .await;
        assert!(!received.all().contains(&battery(41)));

        reader
            .send(ReplaceHealth(replaced(HealthSource::Fixed)))
            .await
            .unwrap();
        eventually("the fixed reading", || {
            received.all().last() == Some(&battery(90))
        })
        .await;
        assert_eq!(metrics.value("conclave_battery_percent", &[]), Some(90.0));
    }

    /// A missing file is a reading error, not a crash.
    #[actix_rt::test]
    async fn missing_file_is_a_reading_error() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let (received, metrics, _reader) = start(
            HealthSource::File(dir.path().join("absent")),
            Duration::from_secs(1),
        );
        eventually("a reading error", || count(&metrics, "error") >= 2.0).await;
        assert!(received.all().is_empty());
    }

    /// PRI-1: a command's standard output is the reading; a failing command is an error.
    #[actix_rt::test]
    async fn pri1_command_source_reads_the_output() {
        let _log = test_log();
        let (received, metrics, _reader) = start(
            HealthSource::Command(HookCommand::Argv(vec!["echo".into(), "55".into()])),
            Duration::from_secs(5),
        );
        let expected = HealthReading {
            battery_percent: 55,
            priority: None,
        };
        eventually("the command's reading", || {
            received.all().contains(&expected)
        })
        .await;
        assert_eq!(count(&metrics, "error"), 0.0);

        let (received, metrics, _reader) = start(
            HealthSource::Command(HookCommand::Shell("echo 20; exit 3".into())),
            Duration::from_secs(5),
        );
        eventually("a failed command counted", || {
            count(&metrics, "error") >= 1.0
        })
        .await;
        assert!(received.all().is_empty());
    }

    /// A command still running at `timeout_ms` is killed with what it started, and counted as
    /// an error; the reader goes on.
    #[actix_rt::test]
    async fn hung_command_is_killed_at_the_timeout() {
        let _log = test_log();
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
        let (received, metrics, _reader) = start(
            HealthSource::Command(HookCommand::Shell(script)),
            Duration::from_millis(200),
        );
        eventually("a timed-out command counted", || {
            count(&metrics, "error") >= 1.0
        })
        .await;
        assert!(received.all().is_empty());
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        // Read from /proc rather than with `kill -0` in a child: a zombie (the killed sleep,
        // left to an init that may reap it late) is dead, and forking in a loop would hold
        // the WAL tests' lock files (see `start`).
        let alive = || {
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                .ok()
                .and_then(|stat| {
                    let state = stat.rsplit_once(") ")?.1.chars().next()?;
                    Some(state != 'Z' && state != 'X')
                })
                .unwrap_or(false)
        };
        eventually("the command's child to be killed", || !alive()).await;
    }
}
