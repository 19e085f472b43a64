//! How the API writes times and durations: round trips in milliseconds without float noise,
//! instants as RFC 3339 in UTC, and durations for people (the CLI's tables).

use std::fmt::Write as _;

/// A round trip in milliseconds to the microsecond, so JSON shows `0.42`, not
/// `0.41999999999999998`.
pub fn rtt_millis(rtt: std::time::Duration) -> f64 {
    // Microseconds of any RTT a peer table holds fit f64 exactly.
    rtt.as_micros() as f64 / 1000.0
}

/// `at_unix_ms` as RFC 3339 in UTC, to the millisecond: `2024-05-01T12:34:56.789Z`.
pub fn rfc3339_utc(at_unix_ms: u64) -> String {
    let seconds = at_unix_ms / 1000;
    let (year, month, day) = civil_date(seconds / 86_400);
    let in_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3600,
        (in_day / 60) % 60,
        in_day % 60,
        at_unix_ms % 1000
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01. Works in 400-year eras of 146,097
/// days, with years starting on 1 March so the leap day falls at the end.
fn civil_date(days: u64) -> (u64, u64, u64) {
    // Days since 0000-03-01.
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months counted from March: 0 = March … 11 = February.
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// A duration for people, two units at most: `850 ms`, `12 s`, `3 min 4 s`, `2 h 5 min`,
/// `3 d 4 h`.
pub fn human_duration(millis: u64) -> String {
    let seconds = millis / 1000;
    let mut out = String::new();
    let _ = match seconds {
        0 => write!(out, "{millis} ms"),
        1..60 => write!(out, "{seconds} s"),
        60..3600 => write!(out, "{} min {} s", seconds / 60, seconds % 60),
        3600..86_400 => write!(out, "{} h {} min", seconds / 3600, (seconds / 60) % 60),
        _ => write!(out, "{} d {} h", seconds / 86_400, (seconds / 3600) % 24),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_gregorian() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        // A leap day, and the end of a leap year.
        assert_eq!(rfc3339_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_utc(978_307_199_999), "2000-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_utc(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        // 2100 is not a leap year.
        assert_eq!(rfc3339_utc(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(850), "850 ms");
        assert_eq!(human_duration(12_400), "12 s");
        assert_eq!(human_duration(184_000), "3 min 4 s");
        assert_eq!(human_duration(7_500_000), "2 h 5 min");
        assert_eq!(human_duration(3 * 86_400_000 + 4 * 3_600_000), "3 d 4 h");
    }

    #[test]
    fn round_trips_have_no_float_noise() {
        let rtt = std::time::Duration::from_nanos(420_123);
        assert_eq!(
            serde_json::to_string(&rtt_millis(rtt)).unwrap_or_default(),
            "0.42"
        );
    }
}
