//! The standard `process_*` series every Prometheus exporter offers (CB-4), read from `/proc`
//! at each scrape, so that dashboards and alerts written for any exporter (CPU, memory, file
//! descriptors near their limit, restarts) work on conclave too:
//!
//! | series | type | from |
//! |---|---|---|
//! | `process_cpu_seconds_total` | counter | user + system time, `/proc/self/stat` fields 14 and 15 |
//! | `process_resident_memory_bytes` | gauge | resident pages, `/proc/self/stat` field 24 |
//! | `process_virtual_memory_bytes` | gauge | `/proc/self/stat` field 23 |
//! | `process_open_fds` | gauge | entries of `/proc/self/fd` |
//! | `process_max_fds` | gauge | the soft limit of "Max open files", `/proc/self/limits` |
//! | `process_start_time_seconds` | gauge | boot time (`/proc/stat` `btime`) + field 22 |
//!
//! They describe the whole process: nodes sharing one (the demo, tests) show the same values.
//! Where `/proc` is missing or unreadable (not Linux) a series is left out, never guessed.

use std::fmt::Write as _;

/// One series: name, type, help, value.
type Series = (&'static str, &'static str, &'static str, f64);

/// Appends the series that can be read now to `out`, in the text exposition format.
pub(crate) fn render(out: &mut String) {
    for (name, kind, help, value) in read() {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        );
    }
}

fn read() -> Vec<Series> {
    let mut series = Vec::new();
    if let Some(stat) = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|text| parse_stat(&text))
    {
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        let page = rustix::param::page_size() as f64;
        if ticks > 0.0 {
            series.push((
                "process_cpu_seconds_total",
                "counter",
                "User and system CPU time this process used, in seconds",
                (stat.utime + stat.stime) as f64 / ticks,
            ));
        }
        series.push((
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory of this process, in bytes",
            stat.rss_pages as f64 * page,
        ));
        series.push((
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory of this process, in bytes",
            stat.vsize as f64,
        ));
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| parse_boot_time(&text));
        if let (Some(boot), true) = (boot, ticks > 0.0) {
            series.push((
                "process_start_time_seconds",
                "gauge",
                "When this process started, in seconds since the Unix epoch",
                boot as f64 + stat.start_ticks as f64 / ticks,
            ));
        }
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        series.push((
            "process_open_fds",
            "gauge",
            "File descriptors this process has open",
            entries.count() as f64,
        ));
    }
    if let Some(max) = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| parse_max_open_files(&text))
    {
        series.push((
            "process_max_fds",
            "gauge",
            "The most file descriptors this process may open (soft limit)",
            max,
        ));
    }
    series
}

/// The fields of `/proc/self/stat` used here.
#[derive(Debug, PartialEq)]
struct Stat {
    utime: u64,
    stime: u64,
    start_ticks: u64,
    vsize: u64,
    rss_pages: u64,
}

/// Parses `/proc/<pid>/stat` (proc(5)). The command name, field 2, is in parentheses and may
/// hold spaces and parentheses itself, so fields are counted after its last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state).
    let field = |number: usize| fields.get(number.checked_sub(3)?)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        start_ticks: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

/// `btime` of `/proc/stat`: boot time in seconds since the Unix epoch.
fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// The soft limit of the `Max open files` line of `/proc/self/limits`; `unlimited` is
/// reported as the largest value a float holds exactly, as other exporters do.
fn parse_max_open_files(text: &str) -> Option<f64> {
    let line = text
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        return Some(9_007_199_254_740_992.0);
    }
    soft.parse::<u64>().ok().map(|n| n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command name may hold spaces and parentheses; fields are counted after the last
    /// parenthesis.
    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let text = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 \
                    7 0 123456 98765432 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 \
                    1 0 0 0 0 0\n";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                utime: 250,
                stime: 130,
                start_ticks: 123456,
                vsize: 98765432,
                rss_pages: 2048,
            })
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn limits_and_boot_time_parse() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max cpu time              unlimited            unlimited            seconds\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_open_files(limits), Some(1024.0));
        assert_eq!(
            parse_max_open_files(
                "Max open files            unlimited            unlimited    files\n"
            ),
            Some(9_007_199_254_740_992.0)
        );
        assert_eq!(parse_max_open_files("nothing"), None);
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n"),
            Some(1_700_000_000)
        );
    }

    /// CB-4: on Linux every standard series is there, with plausible values.
    #[test]
    fn this_process_reports_every_series() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let series = read();
        let value = |wanted: &str| {
            series
                .iter()
                .find(|(name, ..)| *name == wanted)
                .map(|&(.., value)| value)
                .unwrap_or_else(|| panic!("{wanted} missing"))
        };
        assert!(value("process_cpu_seconds_total") >= 0.0);
        assert!(value("process_resident_memory_bytes") > 0.0);
        assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_start_time_seconds") > 1_500_000_000.0);
    }
}
