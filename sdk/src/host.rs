//! Services the host offers every tool: log lines and progress.
//!
//! Thin wrappers over the `longhand:tool/host` import. On targets other than
//! wasm32 there is no host to import from, and the generated bindings would
//! panic; there these helpers write to stderr instead, so tools that log can
//! still be unit-tested natively. (`cfg!` rather than `#[cfg]`, so that both
//! branches are compiled and linted on every target.)

use crate::bindings::longhand::tool::host as wit;

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Step-by-step detail, usually filtered out.
    Trace,
    /// Detail useful when debugging the tool.
    Debug,
    /// Normal operation worth recording.
    Info,
    /// Something unexpected that the tool worked around.
    Warn,
    /// Something failed.
    Error,
}

impl From<Level> for wit::LogLevel {
    fn from(level: Level) -> Self {
        match level {
            Level::Trace => Self::Trace,
            Level::Debug => Self::Debug,
            Level::Info => Self::Info,
            Level::Warn => Self::Warn,
            Level::Error => Self::Error,
        }
    }
}

/// Records a log line with the host.
///
/// The host caps the size and number of lines per call, so log what an
/// operator would want to read afterwards, not every step.
pub fn log(level: Level, message: &str) {
    if cfg!(target_arch = "wasm32") {
        wit::log(level.into(), message);
    } else {
        eprintln!("[{level:?}] {message}");
    }
}

/// Reports progress on a long call: `done` out of `total` units, if known.
pub fn progress(done: u64, total: Option<u64>, message: &str) {
    if cfg!(target_arch = "wasm32") {
        wit::progress(done, total, message);
    } else {
        match total {
            Some(total) => eprintln!("[progress {done}/{total}] {message}"),
            None => eprintln!("[progress {done}] {message}"),
        }
    }
}
