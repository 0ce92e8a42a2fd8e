//! Durations as a model writes them in a tool's input (`"30s"`).

use std::time::Duration;

use crate::ToolError;

/// Parse a `timeout` input: `30s`, `2m`, `1h`, `500ms` or a bare number of
/// seconds. Anything else, zero or a value past any clock is
/// `invalid-input` saying what to write.
pub fn parse_timeout(text: &str) -> Result<Duration, ToolError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let bad = || {
        ToolError::invalid_input(format!(
            "`timeout` {text:?} is not a duration: write e.g. \"30s\", \"2m\" or \"500ms\""
        ))
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(bad()),
    };
    if !(seconds.is_finite() && seconds > 0.0 && seconds < 1e9) {
        return Err(ToolError::invalid_input(format!(
            "`timeout` {text:?} must be above zero"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_in_the_units_people_write() {
        assert_eq!(parse_timeout("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_timeout("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_timeout("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_timeout("1.5").unwrap(), Duration::from_millis(1500));
        for bad in ["", "s", "-1s", "0s", "3 weeks", "1e400s", "NaN"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }
}
