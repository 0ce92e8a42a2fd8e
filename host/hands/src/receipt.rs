//! Receipts: what one call cost and what it touched.
//!
//! A [`Journal`] is filled while the call runs (by the HTTP policy, the
//! resource limiter, the `host` interface); when the call ends it becomes the
//! [`Receipt`] returned with the outcome. The session layer records receipts
//! in its log; nothing here persists anything.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Most log lines a guest may record per call; later ones are counted only.
pub const MAX_LOG_LINES: usize = 256;
/// Longest log line kept, in bytes.
pub const MAX_LOG_LINE_BYTES: usize = 4096;

/// A capability the guest used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityUse {
    /// Capability name from [`super::caps::CAPABILITIES`], e.g. `http`.
    pub capability: String,
    /// The host, path or variable.
    pub resource: String,
    /// What was done, e.g. `GET /v1 -> 200`.
    pub detail: String,
}

/// A capability the host refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// Capability name, e.g. `http` or `secret`.
    pub capability: String,
    /// The host, path or variable refused.
    pub resource: String,
    /// Why, in words an operator can act on.
    pub reason: String,
}

/// One line the guest logged through `longhand:tool/host.log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// `trace`, `debug`, `info`, `warn` or `error`.
    pub level: String,
    /// The message, cut at [`MAX_LOG_LINE_BYTES`].
    pub message: String,
}

/// The last progress report of the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Units done.
    pub done: u64,
    /// Units in all, when known.
    pub total: Option<u64>,
    /// What is being done.
    pub message: String,
}

/// Captured output of one stdio stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captured {
    /// What was kept (lossy UTF-8), at most `Limits::max_stdio_bytes`.
    pub text: String,
    /// Bytes written past the cap and dropped.
    pub dropped_bytes: u64,
}

/// What one call cost and touched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// `sha256:<hex>` of the component that ran.
    pub component_digest: String,
    /// The tool called.
    pub tool: String,
    /// Wall time from the start of the call to its end, in microseconds.
    pub wall_us: u64,
    /// Fuel consumed (about one unit per wasm instruction).
    pub fuel_used: u64,
    /// Highest total linear memory, in bytes.
    pub peak_memory_bytes: u64,
    /// Bytes of input handed to the guest.
    pub input_bytes: u64,
    /// Bytes of output the guest returned.
    pub output_bytes: u64,
    /// Bytes of HTTP response bodies received for the guest.
    pub http_bytes_in: u64,
    /// Bytes the call wrote into granted directories, as counted against
    /// `Limits::max_write_bytes` (data, truncation growth, 4 KiB per created
    /// entry).
    #[serde(default)]
    pub bytes_written: u64,
    /// Capabilities used, in order.
    pub used: Vec<CapabilityUse>,
    /// Capabilities refused, in order.
    pub denied: Vec<Denial>,
    /// Limits hit, in words (at most a few).
    pub limits_hit: Vec<String>,
    /// Guest log lines.
    pub logs: Vec<LogLine>,
    /// Log lines dropped past [`MAX_LOG_LINES`].
    pub logs_dropped: u64,
    /// Last progress report.
    pub progress: Option<Progress>,
    /// Captured stdout.
    pub stdout: Captured,
    /// Captured stderr.
    pub stderr: Captured,
}

impl Receipt {
    /// Wall time as a [`Duration`].
    pub fn wall(&self) -> Duration {
        Duration::from_micros(self.wall_us)
    }
}

/// A directory a component asks for (in `describe`) that its grants leave
/// out, reached for during a call. Without a refusing preopen there the
/// guest's libc finds none and says "not found", and the model goes
/// searching for a file that is there; with it the guest gets "access
/// denied" and the call's error names the grant (see `fs.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ungranted {
    /// The guest path the component asks for.
    pub guest_path: String,
    /// What to do about it, for the model and the operator.
    pub advice: String,
}

/// Written to during a call; turned into a [`Receipt`] at its end.
#[derive(Debug, Default)]
pub struct Journal {
    pub(crate) used: Vec<CapabilityUse>,
    pub(crate) denied: Vec<Denial>,
    pub(crate) limits_hit: Vec<String>,
    pub(crate) logs: Vec<LogLine>,
    pub(crate) logs_dropped: u64,
    pub(crate) progress: Option<Progress>,
    pub(crate) http_requests: u32,
    pub(crate) http_bytes_in: u64,
    /// Shared with the call's write quota, which counts into it.
    pub(crate) written: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The first directory the component asked for, was not granted and
    /// reached for anyway: the call's error then names the grant.
    pub(crate) ungranted: Option<Ungranted>,
}

/// Most entries kept per list, so a hostile guest cannot grow the receipt.
const MAX_ENTRIES: usize = 64;

impl Journal {
    /// Bytes written into granted directories so far.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.written.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn use_cap(&mut self, capability: &str, resource: String, detail: String) {
        if self.used.len() < MAX_ENTRIES {
            self.used.push(CapabilityUse {
                capability: capability.to_owned(),
                resource: super::bound::cut(resource, MAX_LOG_LINE_BYTES),
                detail: super::bound::cut(detail, MAX_LOG_LINE_BYTES),
            });
        }
    }

    pub(crate) fn deny(&mut self, capability: &str, resource: String, reason: String) {
        if self.denied.len() < MAX_ENTRIES {
            self.denied.push(Denial {
                capability: capability.to_owned(),
                resource: super::bound::cut(resource, MAX_LOG_LINE_BYTES),
                reason: super::bound::cut(reason, MAX_LOG_LINE_BYTES),
            });
        }
    }

    pub(crate) fn ungranted(&mut self, dir: &Ungranted) {
        if self.ungranted.is_none() {
            self.ungranted = Some(dir.clone());
        }
    }

    pub(crate) fn limit_hit(&mut self, what: String) {
        if self.limits_hit.len() < MAX_ENTRIES && !self.limits_hit.contains(&what) {
            self.limits_hit.push(what);
        }
    }

    pub(crate) fn log(&mut self, level: &str, message: &str) {
        if self.logs.len() >= MAX_LOG_LINES {
            self.logs_dropped += 1;
            return;
        }
        self.logs.push(LogLine {
            level: level.to_owned(),
            message: super::bound::cut(message.to_owned(), MAX_LOG_LINE_BYTES),
        });
    }
}
