//! Timestamps as articles and operators write them, to milliseconds since the Unix epoch (UTC),
//! and back to text; spans of time as operators write them (`30d`). Shared by the decision (an
//! article's event time, the retention window) and the audit. No time zone database: a written
//! offset (`Z`, `+08:00`) is applied; a timestamp without one is read in a fixed [`UtcOffset`]
//! (UTC unless configured: Chinese feeds often write Beijing time, `+08:00`, without saying so).

use serde::{Deserialize, Serialize};

pub const MS_PER_DAY: i64 = 86_400_000;

/// Reads a timestamp: RFC 3339 / ISO 8601 (`2024-03-01T08:00:00Z`, `2024-03-01T08:00:00.5+08:00`),
/// `2024-03-01 08:00[:00]`, `2024/3/1 8:00`, `2024年3月1日 08:00`, `2024-03-01` (midnight),
/// `20240301`, `20240301080000`, or a Unix time in seconds (10 digits) or milliseconds (13
/// digits). None when it is none of these or out of range (years 1000..=9999).
pub fn parse_time(text: &str) -> Option<i64> {
    parse_time_in(text, UtcOffset::UTC)
}

/// As [`parse_time`], reading a civil time written without an offset in `naive` (a written offset,
/// `Z` included, and Unix times are unaffected).
pub fn parse_time_in(text: &str, naive: UtcOffset) -> Option<i64> {
    let s = text.trim();
    if s.is_empty() {
        return None;
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return match s.len() {
            10 => s.parse::<i64>().ok().map(|secs| secs * 1000),
            13 => s.parse::<i64>().ok(),
            8 => civil_ms(num(&s[..4])?, num(&s[4..6])?, num(&s[6..])?, 0, 0, 0, 0),
            14 => civil_ms(
                num(&s[..4])?,
                num(&s[4..6])?,
                num(&s[6..8])?,
                num(&s[8..10])?,
                num(&s[10..12])?,
                num(&s[12..])?,
                0,
            ),
            _ => None,
        };
    }
    // Runs of digits with the character before each.
    let mut groups: Vec<(char, &str)> = Vec::new();
    let mut prev = ' ';
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_ascii_digit(), start) {
            (true, None) => start = Some((i, prev)),
            (false, Some((from, sep))) => {
                groups.push((sep, &s[from..i]));
                start = None;
            }
            _ => {}
        }
        if !c.is_ascii_digit() {
            prev = c;
        }
    }
    if let Some((from, sep)) = start {
        groups.push((sep, &s[from..]));
    }
    if groups.len() < 3 || groups[0].1.len() != 4 || groups[1].1.len() > 2 || groups[2].1.len() > 2
    {
        return None;
    }
    let (year, month, day) = (num(groups[0].1)?, num(groups[1].1)?, num(groups[2].1)?);
    let mut rest = &groups[3..];
    let (mut hour, mut minute, mut second, mut millis) = (0, 0, 0, 0);
    if rest.len() >= 2 && rest[1].0 == ':' {
        hour = num(rest[0].1)?;
        minute = num(rest[1].1)?;
        rest = &rest[2..];
        if let Some((':', digits)) = rest.first() {
            second = num(digits)?;
            rest = &rest[1..];
        }
        if let Some(('.' | ',', digits)) = rest.first() {
            // The first three digits of the fraction.
            let ms: String = digits.chars().chain("000".chars()).take(3).collect();
            millis = num(&ms)?;
            rest = &rest[1..];
        }
    }
    // A UTC offset: `+08:00`, `+0800`, `-05`; `Z` or nothing is UTC.
    let mut offset_minutes = i64::from(naive.minutes);
    let upper = s.to_ascii_uppercase();
    if upper.ends_with('Z') || upper.ends_with("UTC") || upper.ends_with("GMT") {
        offset_minutes = 0;
    }
    if let Some(&(sign @ ('+' | '-'), digits)) = rest.first() {
        let (h, m, used) = match (digits.len(), rest.get(1)) {
            (4, _) => (num(&digits[..2])?, num(&digits[2..])?, 1),
            (2, Some((':', mm))) if mm.len() == 2 => (num(digits)?, num(mm)?, 2),
            (2, _) => (num(digits)?, 0, 1),
            _ => return None,
        };
        if h > 23 || m > 59 {
            return None;
        }
        offset_minutes = (h * 60 + m) * if sign == '-' { -1 } else { 1 };
        rest = &rest[used..];
    }
    if !rest.is_empty() {
        return None;
    }
    Some(civil_ms(year, month, day, hour, minute, second, millis)? - offset_minutes * 60_000)
}

fn num(digits: &str) -> Option<i64> {
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    digits.parse().ok()
}

/// Milliseconds since the epoch of a UTC civil time, None when a field is out of range.
fn civil_ms(
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    millis: i64,
) -> Option<i64> {
    let valid = (1000..=9999).contains(&year)
        && (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && (0..=23).contains(&hour)
        && (0..=59).contains(&minute)
        && (0..=60).contains(&second)
        && (0..=999).contains(&millis);
    valid.then(|| {
        days_from_civil(year, month, day) * MS_PER_DAY
            + ((hour * 60 + minute) * 60 + second) * 1000
            + millis
    })
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day) of a day number since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if month <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        month,
        day,
    )
}

/// `2024-03-01 08:05:09 UTC`.
pub fn format_utc(ms: i64) -> String {
    let (y, mo, d) = civil_from_days(ms.div_euclid(MS_PER_DAY));
    let secs = ms.rem_euclid(MS_PER_DAY) / 1000;
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// `2024-03-01T08:05:09Z` (RFC 3339, UTC; `.250` milliseconds only when there are some).
pub fn format_rfc3339(ms: i64) -> String {
    let (y, mo, d) = civil_from_days(ms.div_euclid(MS_PER_DAY));
    let in_day = ms.rem_euclid(MS_PER_DAY);
    let secs = in_day / 1000;
    let millis = in_day % 1000;
    let fraction = if millis == 0 {
        String::new()
    } else {
        format!(".{millis:03}")
    };
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}{fraction}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// A span of time as an operator writes it: a whole number and a unit, `30d`, `2w`, `12h`,
/// `90m`, `3600s` (weeks, days, hours, minutes, seconds). Written back in the largest unit up to
/// days that divides it (`2w` as `14d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimeSpan {
    ms: u64,
}

/// A span that is not `<number><unit>`.
/// A time argument (`--from-time`, `--to-time`) that is not a time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?} is not a time: use RFC 3339 (2024-03-01T08:00:00Z, 2024-03-01T16:00:00+08:00), \
     2024-03-01 08:00 or 2024-03-01 (UTC), or Unix seconds / milliseconds"
)]
pub struct BadTime {
    pub text: String,
}

/// Reads a `--from-time` / `--to-time` value (see [`parse_time`]).
pub fn parse_time_arg(text: &str) -> Result<i64, BadTime> {
    parse_time(text).ok_or_else(|| BadTime {
        text: text.to_owned(),
    })
}

/// A fixed offset from UTC, written `+08:00`, `-05:00`, `+0530` or `Z` (UTC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UtcOffset {
    minutes: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a UTC offset: write +HH:MM or -HH:MM (e.g. +08:00 for Beijing time), or Z for UTC")]
pub struct BadUtcOffset {
    pub text: String,
}

impl UtcOffset {
    pub const UTC: UtcOffset = UtcOffset { minutes: 0 };

    /// Minutes east of UTC.
    pub fn minutes(self) -> i32 {
        self.minutes
    }
}

impl std::str::FromStr for UtcOffset {
    type Err = BadUtcOffset;

    fn from_str(text: &str) -> Result<UtcOffset, BadUtcOffset> {
        let bad = || BadUtcOffset {
            text: text.to_owned(),
        };
        let s = text.trim();
        if s.eq_ignore_ascii_case("z") || s.eq_ignore_ascii_case("utc") {
            return Ok(UtcOffset::UTC);
        }
        let sign = match s.chars().next() {
            Some('+') => 1,
            Some('-') => -1,
            _ => return Err(bad()),
        };
        let digits: String = s[1..].chars().filter(|c| *c != ':').collect();
        let colon_ok = s[1..].matches(':').count() <= 1 && (s.len() - 1) - digits.len() <= 1;
        if !colon_ok || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let (h, m) = match digits.len() {
            2 => (digits.parse::<i32>().map_err(|_| bad())?, 0),
            4 => (
                digits[..2].parse::<i32>().map_err(|_| bad())?,
                digits[2..].parse::<i32>().map_err(|_| bad())?,
            ),
            _ => return Err(bad()),
        };
        if h > 23 || m > 59 {
            return Err(bad());
        }
        Ok(UtcOffset {
            minutes: sign * (h * 60 + m),
        })
    }
}

impl std::fmt::Display for UtcOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.minutes < 0 { '-' } else { '+' };
        let m = self.minutes.unsigned_abs();
        write!(f, "{sign}{:02}:{:02}", m / 60, m % 60)
    }
}

impl Serialize for UtcOffset {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for UtcOffset {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a span of time: write a whole number and a unit, e.g. 30d, 2w, 12h, 90m or 3600s (days, weeks, hours, minutes, seconds), at least 1s")]
pub struct BadTimeSpan {
    pub text: String,
}

const SPAN_UNITS: [(char, u64); 5] = [
    ('w', 7 * 86_400_000),
    ('d', 86_400_000),
    ('h', 3_600_000),
    ('m', 60_000),
    ('s', 1_000),
];

impl TimeSpan {
    pub fn from_secs(secs: u64) -> TimeSpan {
        TimeSpan {
            ms: secs.saturating_mul(1000),
        }
    }

    pub fn from_days(days: u64) -> TimeSpan {
        TimeSpan {
            ms: days.saturating_mul(86_400_000),
        }
    }

    /// The span in milliseconds (at most `i64::MAX`, so it can be subtracted from a time).
    pub fn as_ms(self) -> i64 {
        i64::try_from(self.ms).unwrap_or(i64::MAX)
    }
}

impl std::str::FromStr for TimeSpan {
    type Err = BadTimeSpan;

    fn from_str(text: &str) -> Result<TimeSpan, BadTimeSpan> {
        let bad = || BadTimeSpan {
            text: text.to_owned(),
        };
        let s = text.trim();
        let unit = s.chars().last().ok_or_else(bad)?;
        let (_, per) = SPAN_UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .ok_or_else(bad)?;
        let digits = &s[..s.len() - unit.len_utf8()];
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        let ms = n.checked_mul(*per).ok_or_else(bad)?;
        if ms == 0 || i64::try_from(ms).is_err() {
            return Err(bad());
        }
        Ok(TimeSpan { ms })
    }
}

impl std::fmt::Display for TimeSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match SPAN_UNITS[1..]
            .iter()
            .find(|(_, per)| self.ms >= *per && self.ms.is_multiple_of(*per))
        {
            Some((unit, per)) => write!(f, "{}{unit}", self.ms / per),
            None => write!(f, "{}ms", self.ms),
        }
    }
}

impl Serialize for TimeSpan {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TimeSpan {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The width of the bars of a chart over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    Minute,
    Hour,
    Day,
    /// Seven days from a Monday.
    Week,
    Month,
}

impl Bucket {
    /// The widest-but-useful bucket for a span: at most ~60 bars.
    pub fn for_span(first_ms: i64, last_ms: i64) -> Bucket {
        let span = last_ms.saturating_sub(first_ms);
        if span <= 2 * 3_600_000 {
            Bucket::Minute
        } else if span <= 2 * MS_PER_DAY {
            Bucket::Hour
        } else if span <= 60 * MS_PER_DAY {
            Bucket::Day
        } else if span <= 420 * MS_PER_DAY {
            Bucket::Week
        } else {
            Bucket::Month
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Bucket::Minute => "minute",
            Bucket::Hour => "hour",
            Bucket::Day => "day",
            Bucket::Week => "week",
            Bucket::Month => "month",
        }
    }

    /// Start (ms) of the bucket holding `ms`.
    pub fn start(self, ms: i64) -> i64 {
        match self {
            Bucket::Minute => ms - ms.rem_euclid(60_000),
            Bucket::Hour => ms - ms.rem_euclid(3_600_000),
            Bucket::Day => ms - ms.rem_euclid(MS_PER_DAY),
            // 1970-01-01 was a Thursday: Mondays are day numbers ≡ 4 (mod 7).
            Bucket::Week => {
                let days = ms.div_euclid(MS_PER_DAY);
                (days - (days - 4).rem_euclid(7)) * MS_PER_DAY
            }
            Bucket::Month => {
                let (y, m, _) = civil_from_days(ms.div_euclid(MS_PER_DAY));
                days_from_civil(y, m, 1) * MS_PER_DAY
            }
        }
    }

    /// Start of the next bucket after the one starting at `start`.
    pub fn next(self, start: i64) -> i64 {
        match self {
            Bucket::Minute => start + 60_000,
            Bucket::Hour => start + 3_600_000,
            Bucket::Day => start + MS_PER_DAY,
            Bucket::Week => start + 7 * MS_PER_DAY,
            Bucket::Month => {
                let (y, m, _) = civil_from_days(start.div_euclid(MS_PER_DAY));
                let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                days_from_civil(y, m, 1) * MS_PER_DAY
            }
        }
    }

    /// Short label of the bucket starting at `start`: `08:05`, `03-01 08h`, `2024-03-01`,
    /// `2024-03`.
    pub fn label(self, start: i64) -> String {
        let (y, mo, d) = civil_from_days(start.div_euclid(MS_PER_DAY));
        match self {
            Bucket::Minute => {
                let minutes = start.rem_euclid(MS_PER_DAY) / 60_000;
                format!("{:02}:{:02}", minutes / 60, minutes % 60)
            }
            Bucket::Hour => format!(
                "{mo:02}-{d:02} {:02}h",
                start.rem_euclid(MS_PER_DAY) / 3_600_000
            ),
            Bucket::Day | Bucket::Week => format!("{y:04}-{mo:02}-{d:02}"),
            Bucket::Month => format!("{y:04}-{mo:02}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_offset_less_times_in_the_configured_offset() {
        let beijing: UtcOffset = "+08:00".parse().unwrap();
        let base = 1_709_280_000_000; // 2024-03-01T08:00:00Z
        assert_eq!(parse_time_in("2024-03-01 16:00:00", beijing), Some(base));
        assert_eq!(parse_time_in("2024年3月1日 16:00", beijing), Some(base));
        // A written offset, Z, UTC and Unix times are not moved.
        for text in [
            "2024-03-01T08:00:00Z",
            "2024-03-01T03:00:00-05:00",
            "2024-03-01 08:00:00 UTC",
            "1709280000",
        ] {
            assert_eq!(parse_time_in(text, beijing), Some(base), "{text}");
        }
        let west: UtcOffset = "-05:30".parse().unwrap();
        assert_eq!(west.minutes(), -330);
        assert_eq!(west.to_string(), "-05:30");
        assert_eq!("Z".parse::<UtcOffset>().unwrap(), UtcOffset::UTC);
        assert_eq!("+0800".parse::<UtcOffset>().unwrap(), beijing);
        for bad in [
            "8",
            "+8",
            "+24:00",
            "+08:60",
            "Asia/Shanghai",
            "+08::00",
            "",
        ] {
            assert!(bad.parse::<UtcOffset>().is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_the_usual_forms() {
        let base = 1_709_280_000_000; // 2024-03-01T08:00:00Z
        for text in [
            "2024-03-01T08:00:00Z",
            "2024-03-01T08:00:00+00:00",
            "2024-03-01T16:00:00+08:00",
            "2024-03-01T16:00:00+0800",
            "2024-03-01T03:00:00-05",
            "2024-03-01 08:00:00",
            "2024-03-01 08:00",
            "2024/3/1 8:00",
            "2024年3月1日 08:00",
            "20240301080000",
            "1709280000",
            "1709280000000",
            " 2024-03-01T08:00:00.000Z ",
        ] {
            assert_eq!(parse_time(text), Some(base), "{text}");
        }
        assert_eq!(parse_time("2024-03-01T08:00:00.25Z"), Some(base + 250));
        assert_eq!(parse_time("2024-03-01"), Some(base - 8 * 3_600_000));
        assert_eq!(parse_time("20240301"), Some(base - 8 * 3_600_000));
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("2024-02-29"), Some(1_709_164_800_000));
    }

    #[test]
    fn refuses_what_is_not_a_time() {
        for text in [
            "",
            "yesterday",
            "2024-13-01",
            "2023-02-29",
            "2024-03-01T25:00",
            "24-03-01",
            "2024-03-01T08:00:00+99:00",
            "2024-03-01 08:00 extra 5",
            "12345",
        ] {
            assert_eq!(parse_time(text), None, "{text}");
        }
    }

    #[test]
    fn spans_of_time() {
        for (text, ms, back) in [
            ("30d", 30 * MS_PER_DAY, "30d"),
            ("12h", 12 * 3_600_000, "12h"),
            ("2w", 14 * MS_PER_DAY, "14d"),
            ("14d", 14 * MS_PER_DAY, "14d"),
            ("90m", 90 * 60_000, "90m"),
            ("3600s", 3_600_000, "1h"),
            (" 7d ", 7 * MS_PER_DAY, "7d"),
        ] {
            let span: TimeSpan = text.parse().unwrap();
            assert_eq!(span.as_ms(), ms, "{text}");
            assert_eq!(span.to_string(), back, "{text}");
        }
        for text in [
            "",
            "30",
            "d",
            "0d",
            "-1d",
            "1.5d",
            "30 days",
            "30D",
            "1y",
            "99999999999999w",
        ] {
            let err = text.parse::<TimeSpan>().unwrap_err();
            assert!(err.to_string().contains("e.g. 30d"), "{text}: {err}");
        }
        let json: TimeSpan = serde_json::from_str("\"30d\"").unwrap();
        assert_eq!(json, TimeSpan::from_days(30));
        assert_eq!(serde_json::to_string(&json).unwrap(), "\"30d\"");
    }

    #[test]
    fn formats_and_buckets() {
        assert_eq!(format_rfc3339(1_709_280_000_000), "2024-03-01T08:00:00Z");
        assert_eq!(
            format_rfc3339(1_709_280_000_250),
            "2024-03-01T08:00:00.250Z"
        );
        let t = parse_time("2024-03-06T13:45:10Z").unwrap();
        assert_eq!(format_utc(t), "2024-03-06 13:45:10 UTC");
        assert_eq!(format_utc(-1000), "1969-12-31 23:59:59 UTC");
        assert_eq!(Bucket::Minute.label(Bucket::Minute.start(t)), "13:45");
        assert_eq!(Bucket::Hour.label(Bucket::Hour.start(t)), "03-06 13h");
        assert_eq!(Bucket::Day.label(Bucket::Day.start(t)), "2024-03-06");
        // 2024-03-06 is a Wednesday; its week starts on Monday the 4th.
        assert_eq!(Bucket::Week.label(Bucket::Week.start(t)), "2024-03-04");
        assert_eq!(Bucket::Month.label(Bucket::Month.start(t)), "2024-03");
        let dec = parse_time("2023-12-15").unwrap();
        assert_eq!(
            format_utc(Bucket::Month.next(Bucket::Month.start(dec))),
            "2024-01-01 00:00:00 UTC"
        );
        assert_eq!(Bucket::for_span(0, 3_600_000), Bucket::Minute);
        assert_eq!(Bucket::for_span(0, 5 * 3_600_000), Bucket::Hour);
        assert_eq!(Bucket::for_span(0, 10 * MS_PER_DAY), Bucket::Day);
        assert_eq!(Bucket::for_span(0, 100 * MS_PER_DAY), Bucket::Week);
        assert_eq!(Bucket::for_span(0, 1000 * MS_PER_DAY), Bucket::Month);
    }
}
