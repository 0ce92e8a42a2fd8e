//! What every test module shares: one [`Hands`] with the probe loaded, call
//! helpers, a loopback HTTP server and the probe's memory-scan hash.

pub mod server;

use std::path::Path;
use std::sync::{Arc, LazyLock};

use longhand_hands::{
    Access, CallError, CallOutcome, DirGrant, Grants, Hands, HandsConfig, LoadedTool, ToolSource,
};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::fixtures;

/// One engine for the whole binary, as in the real process: tests also
/// prove that what one call does (trap, flood, time out) does not spoil the
/// engine for the next, which is what the shared instance is for.
///
/// It caches compiled components under cargo's scratch directory for
/// integration tests, as the CLI caches under `$LONGHAND_HOME`: compiling
/// the built-ins takes seconds, and every run after the first skips it.
/// `loading::compile_cache_*` covers the uncached path and the cache itself.
static HANDS: LazyLock<Hands> = LazyLock::new(|| {
    let config = HandsConfig {
        cache_dir: Some(Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache")),
        ..HandsConfig::default()
    };
    Hands::new(config).unwrap_or_else(|e| panic!("cannot build the engine: {e:#}"))
});

static PROBE: OnceCell<Arc<LoadedTool>> = OnceCell::const_new();

/// The shared tool host.
pub fn hands() -> &'static Hands {
    &HANDS
}

/// The `probe` fixture, compiled once per test binary.
pub async fn probe() -> &'static LoadedTool {
    PROBE
        .get_or_init(|| async {
            hands()
                .load(ToolSource::File(fixtures::PROBE.as_ref()))
                .await
                .unwrap_or_else(|e| panic!("cannot load the probe: {e}"))
        })
        .await
}

/// Call a probe tool.
pub async fn call_probe(grants: &Grants, name: &str, input: Value) -> CallOutcome {
    hands().call(probe().await, grants, name, &input).await
}

/// The output of a call that must succeed, or a panic showing why it did not.
#[track_caller]
pub fn ok(outcome: &CallOutcome) -> &Value {
    match &outcome.result {
        Ok(value) => value,
        Err(err) => panic!("call failed: {err}\nreceipt: {:#?}", outcome.receipt),
    }
}

/// The error of a call that must fail.
#[track_caller]
pub fn err(outcome: &CallOutcome) -> &CallError {
    match &outcome.result {
        Ok(value) => panic!("call succeeded with {value}, but it should have failed"),
        Err(err) => err,
    }
}

/// The message of a [`CallError::Limit`], or a panic naming what came instead.
#[track_caller]
pub fn limit_message(outcome: &CallOutcome) -> &str {
    match err(outcome) {
        CallError::Limit { message } => message,
        other => panic!("expected a limit error, got {other:?}"),
    }
}

/// Check the shared host still runs an ordinary call: after a guest was
/// stopped, refused or crashed, the next one must not notice.
pub async fn assert_still_serves() {
    let outcome = call_probe(&Grants::default(), "echo", json!({ "value": "still here" })).await;
    assert_eq!(ok(&outcome), &json!({ "value": "still here" }));
}

/// A directory grant, resolved and pinned.
#[track_caller]
pub fn dir(host_path: &Path, guest_path: &str, access: Access) -> DirGrant {
    DirGrant::new(host_path, guest_path, access)
        .unwrap_or_else(|e| panic!("cannot grant {}: {e}", host_path.display()))
}

/// Base of the probe's rolling hash; see `fixtures/probe/src/lib.rs`.
const HASH_BASE: u64 = 0x0000_0100_0000_01b3;

/// A `scan_memory` needle for `text`: its hash and length, never the text,
/// so asking the probe to look for a secret does not hand it the secret.
pub fn needle(text: &str) -> Value {
    let hash = text.bytes().fold(0u64, |h, b| {
        h.wrapping_mul(HASH_BASE).wrapping_add(u64::from(b))
    });
    json!({ "hash": hash, "len": text.len() })
}

/// A value unlikely to occur anywhere by chance, different on every run.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{:x}-{:x}", std::process::id(), nanos)
}
