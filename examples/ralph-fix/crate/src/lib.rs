//! Durations written the short way: `1h30m`, `45s`, `2h5m10s`.

/// Seconds in `text`: numbers each followed by a unit, `h`, `m` or `s`,
/// largest unit first or not, e.g. `1h30m` is 5400. `None` for text that
/// is not such a duration: empty, a number without a unit, another unit.
pub fn parse_duration(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number.parse().ok()?;
        number.clear();
        let unit = match c {
            'h' => 60 * 60,
            'm' => 60 * 60,
            's' => 1,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    (number.is_empty() && !text.is_empty()).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn single_units() {
        assert_eq!(parse_duration("45s"), Some(45));
        assert_eq!(parse_duration("2h"), Some(7200));
        assert_eq!(parse_duration("2m"), Some(120));
    }

    #[test]
    fn combined_units() {
        assert_eq!(parse_duration("1h30m"), Some(5400));
        assert_eq!(parse_duration("2h5m10s"), Some(7510));
    }

    #[test]
    fn not_durations() {
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("1x"), None);
        assert_eq!(parse_duration("h"), None);
    }
}
