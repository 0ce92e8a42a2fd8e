//! `stat`: what a path is, how big, when it last changed, and whether this
//! tool can write it.
//!
//! `readonly` is *measured*, not read from permission bits: WASI has no mode
//! bits, so std's `Permissions::readonly` cannot see a read-only grant. What
//! the model wants to know is whether a `write` or `edit` would succeed, so
//! the tool opens the file for writing — without creating, truncating or
//! touching its content — and reports whether that was refused.

use std::fs::{self, OpenOptions};
use std::time::{SystemTime, UNIX_EPOCH};

use longhand_sdk::{Effect, IoResultExt, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resolve;
use crate::walk::Kind;

/// Input of `stat`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatInput {
    /// The file or directory: a guest path, or a path relative to
    /// `/workspace`.
    path: String,
}

/// Output of `stat`.
#[derive(Debug, Serialize)]
pub(crate) struct StatOutput {
    path: String,
    /// `file`, `dir`, `symlink` (not followed) or `other`.
    kind: Kind,
    /// Size in bytes.
    size: u64,
    /// Last modification, RFC 3339 UTC, if the filesystem reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    modified: Option<String>,
    /// For files: true if this tool cannot open it for writing. Absent for
    /// other kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    readonly: Option<bool>,
}

/// The `stat` tool.
pub(crate) struct Stat;

impl Tool for Stat {
    const NAME: &'static str = "stat";
    const DESCRIPTION: &'static str = "Describe a path without reading it: kind (file, dir, \
        symlink, other), size in bytes, last modification time (RFC 3339, UTC) and, for files, \
        whether it is read-only for this tool. Use it to check that a path exists.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = StatInput;
    type Output = StatOutput;

    fn call(input: StatInput) -> Result<StatOutput, ToolError> {
        let path = resolve("path", &input.path)?;
        let label = path.display().to_string();
        let meta = fs::symlink_metadata(&path).for_resource(&label)?;
        let kind = Kind::of(meta.file_type());
        let readonly =
            (kind == Kind::File).then(|| OpenOptions::new().write(true).open(&path).is_err());
        Ok(StatOutput {
            path: label,
            kind,
            size: meta.len(),
            modified: meta.modified().ok().and_then(rfc3339),
            readonly,
        })
    }
}

/// Formats a time as `YYYY-MM-DDTHH:MM:SSZ`; `None` before 1970.
fn rfc3339(time: SystemTime) -> Option<String> {
    let secs = time.duration_since(UNIX_EPOCH).ok()?.as_secs();
    let days = i64::try_from(secs / 86_400).ok()?;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `civil_from_days`): a few lines instead of a date crate.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;
    use std::time::Duration;

    #[test]
    fn formats_rfc3339() {
        let at = |secs| rfc3339(UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_709_210_096), "2024-02-29T12:34:56Z");
        assert_eq!(at(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn stats_files_and_dirs() {
        let s = Scratch::new();
        s.file("f.txt", "hello");
        let out = Stat::call(StatInput {
            path: s.join("f.txt"),
        })
        .unwrap();
        assert_eq!(out.kind, Kind::File);
        assert_eq!(out.size, 5);
        assert_eq!(out.readonly, Some(false));
        assert!(out.modified.is_some());

        let out = Stat::call(StatInput { path: s.join("") }).unwrap();
        assert_eq!((out.kind, out.readonly), (Kind::Dir, None));

        let err = Stat::call(StatInput {
            path: s.join("missing"),
        })
        .unwrap_err();
        assert!(matches!(err, ToolError::NotFound(_)));
    }
}
