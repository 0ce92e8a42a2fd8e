//! Five-field cron expressions (`minute hour day-of-month month
//! day-of-week`), evaluated in UTC.
//!
//! Each field is `*`, a number, a range `a-b`, a step `*/n` or `a-b/n`, or
//! a comma list of those; months and weekdays also take names (`jan`,
//! `mon`), and weekday 7 is Sunday like 0. As in the classic cron, when
//! both day fields are restricted a day matches if either does. What this
//! does not take (`@daily`, seconds, `L`, `W`, `#`, time zones) is refused
//! with the reason, never guessed at.

use std::fmt;

/// A parsed expression: the allowed values of each field as bit sets.
#[derive(Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Whether the day-of-month / day-of-week field was `*`.
    any_day: bool,
    any_weekday: bool,
    text: String,
}

impl fmt::Debug for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cron({:?})", self.text)
    }
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Cron {
    /// Parse `text`, or say which field is wrong and why.
    pub fn parse(text: &str) -> Result<Self, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "cron `{text}` has {} fields; give five: minute hour day-of-month month day-of-week (UTC), e.g. \"0 7 * * *\"",
                fields.len()
            ));
        }
        let minutes = field(fields[0], "minute", 0, 59, &[])?;
        let hours = field(fields[1], "hour", 0, 23, &[])?;
        let days = field(fields[2], "day-of-month", 1, 31, &[])?;
        let months = field(fields[3], "month", 1, 12, &MONTHS)?;
        let mut weekdays = field(fields[4], "day-of-week", 0, 7, &WEEKDAYS)?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & !(1 << 7);
        }
        Ok(Self {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: weekdays as u8,
            any_day: fields[2] == "*",
            any_weekday: fields[4] == "*",
            text: text.to_owned(),
        })
    }

    /// The first minute strictly after `after_ms` (unix milliseconds, UTC)
    /// that matches, in unix milliseconds; `None` if none does within
    /// eight years (e.g. `0 0 31 2 *`).
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        let mut minute = after_ms / 60_000 + 1;
        let limit = minute + 8 * 366 * 24 * 60;
        while minute < limit {
            let (year, month, day, hour, min, weekday) = civil(minute);
            if self.months & (1 << month) == 0 {
                // Jump to the first minute of the next month.
                let (y, m) = if month == 12 {
                    (year + 1, 1)
                } else {
                    (year, month + 1)
                };
                minute = days_from_civil(y, m, 1) * 24 * 60;
                continue;
            }
            if !self.day_matches(day, weekday) {
                minute = (minute / (24 * 60) + 1) * 24 * 60;
                continue;
            }
            if self.hours & (1 << hour) == 0 {
                minute = (minute / 60 + 1) * 60;
                continue;
            }
            if self.minutes & (1 << min) != 0 {
                return Some(minute * 60_000);
            }
            minute += 1;
        }
        None
    }

    fn day_matches(&self, day: u32, weekday: u32) -> bool {
        let dom = self.days & (1 << day) != 0;
        let dow = self.weekdays & (1 << weekday) != 0;
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (true, false) => dow,
            (false, true) => dom,
            (false, false) => dom || dow,
        }
    }
}

/// One field as a bit set of the values it allows.
fn field(text: &str, what: &str, min: u32, max: u32, names: &[&str]) -> Result<u64, String> {
    let bad = |why: String| format!("cron {what} field `{text}`: {why}");
    let value = |s: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            // Months are numbered from 1, weekdays from 0.
            return Ok(i as u32 + min.min(1) * u32::from(max == 12));
        }
        let n: u32 = s
            .parse()
            .map_err(|_| bad(format!("`{s}` is not a number")))?;
        if n < min || n > max {
            return Err(bad(format!("{n} is outside {min}-{max}")));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| bad(format!("step `{s}` is not a number above 0")))?;
                (r, step)
            }
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (value(a)?, value(b)?);
            if a > b {
                return Err(bad(format!("the range {a}-{b} runs backwards")));
            }
            (a, b)
        } else {
            let a = value(range)?;
            // `5/15` means from 5 to the end, every 15.
            (a, if step > 1 { max } else { a })
        };
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    u64::try_from(era * 146_097 + doe - 719_468).unwrap_or(0)
}

/// (year, month, day, hour, minute, weekday 0=Sunday) of a unix minute.
fn civil(minute: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (minute / (24 * 60)) as i64;
    let in_day = minute % (24 * 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    // 1970-01-01 was a Thursday (4).
    let weekday = ((days + 4).rem_euclid(7)) as u32;
    (y, m, d, (in_day / 60) as u32, (in_day % 60) as u32, weekday)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix ms of a UTC date and time.
    fn at(y: i64, m: u32, d: u32, h: u64, min: u64) -> u64 {
        (days_from_civil(y, m, d) * 24 * 60 + h * 60 + min) * 60_000
    }

    #[test]
    fn calendar_arithmetic_round_trips() {
        for (y, m, d, weekday) in [
            (1970, 1, 1, 4),
            (2000, 2, 29, 2),
            (2026, 11, 30, 1),
            (2100, 3, 1, 1),
        ] {
            let minute = days_from_civil(y, m, d) * 24 * 60 + 7 * 60 + 5;
            assert_eq!(civil(minute), (y, m, d, 7, 5, weekday), "{y}-{m}-{d}");
        }
    }

    #[test]
    fn next_firings() {
        let now = at(2026, 11, 30, 21, 30); // a Monday
        let cases = [
            ("0 7 * * *", at(2026, 12, 1, 7, 0)),
            ("*/15 * * * *", at(2026, 11, 30, 21, 45)),
            ("30 21 * * *", at(2026, 12, 1, 21, 30)), // strictly after
            ("0 9 * * mon-fri", at(2026, 12, 1, 9, 0)),
            ("0 9 * * 0", at(2026, 12, 6, 9, 0)),
            ("0 9 * * 7", at(2026, 12, 6, 9, 0)),
            ("0 0 1 jan *", at(2027, 1, 1, 0, 0)),
            ("0 0 29 2 *", at(2028, 2, 29, 0, 0)),
            // Both days restricted: either matches (the 1st, or a Friday).
            ("0 12 1 * fri", at(2026, 12, 1, 12, 0)),
            ("0 12 15 * fri", at(2026, 12, 4, 12, 0)),
            ("5,35 22 * * *", at(2026, 11, 30, 22, 5)),
            ("10-20/5 * * * *", at(2026, 11, 30, 22, 10)),
        ];
        for (expr, want) in cases {
            let cron = Cron::parse(expr).unwrap();
            assert_eq!(cron.next_after(now), Some(want), "{expr}");
        }
        assert_eq!(Cron::parse("0 0 31 2 *").unwrap().next_after(now), None);
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        for (expr, says) in [
            ("@daily", "has 1 fields"),
            ("0 7 * *", "has 4 fields"),
            ("60 * * * *", "minute field `60`: 60 is outside 0-59"),
            ("0 24 * * *", "hour field"),
            ("0 0 0 * *", "day-of-month field"),
            ("0 0 * 13 *", "month field"),
            ("0 0 * * 8", "day-of-week field"),
            ("*/0 * * * *", "step `0`"),
            ("5-1 * * * *", "runs backwards"),
            ("0 0 L * *", "`L` is not a number"),
            ("0 0 * foo *", "`foo` is not a number"),
        ] {
            let err = Cron::parse(expr).unwrap_err();
            assert!(err.contains(says), "{expr}: {err}");
        }
    }
}
