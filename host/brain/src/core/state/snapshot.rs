//! Session snapshots: the folded [`SessionState`] written to blobs so that
//! `wake` folds only the events after it, in a versioned format whose cost
//! per snapshot does not grow with the history it covers.
//!
//! This module owns the snapshot's bytes: [`encode`] (pure), [`decode`] and
//! [`load_state`] (wake: the latest snapshot plus the tail, or the whole log
//! when the snapshot cannot be used). It does not decide *when* to snapshot
//! (the journal does) and never writes to the store: the caller stores the
//! blobs [`encode`] returns together with the `snapshot` event.
//!
//! # Format, version 2
//!
//! The root blob is JSON:
//!
//! ```json
//! {"format": "longhand.snapshot", "version": 2,
//!  "state": {"last_seq": 412, "steps": 103, ...},
//!  "fields": {"agent": {"digest": "sha256:…", "bytes": 2875}},
//!  "history": {"chunk_items": 64, "len": 206, "chunks": [{"digest": …}, …]}}
//! ```
//!
//! - `state` is the serde form of [`SessionState`] without `history`. Every
//!   field of `SessionState` defaults when missing, so a snapshot written
//!   before a field existed still decodes; a change of *meaning* bumps
//!   [`VERSION`] instead.
//! - `fields` holds the top-level fields whose JSON is longer than
//!   [`OUT_OF_LINE_BYTES`] (the frozen agent, a long goal or summary), each
//!   in its own blob: they rarely change, so the store keeps one copy
//!   however many snapshots name them.
//! - `history` items live in chunks aligned on their absolute position in
//!   the conversation (`history_omitted + index`): chunk `k` holds positions
//!   `k * chunk_items .. (k + 1) * chunk_items` (a JSON array of
//!   `HistoryItem`s), cut short at the front by trimming and at the end by
//!   the newest item. History only grows at the end and is dropped from the
//!   front, so a full chunk is byte-identical in every later snapshot and,
//!   blobs being content-addressed, stored once. What a snapshot adds to the
//!   store is its root, the partial chunk at each end and any out-of-line
//!   field that changed. Only the sharing rests on that: were the fold ever
//!   to change an item in place, its chunk would simply be stored anew.
//!
//! Version 1 is the bare `SessionState` JSON written before this module
//! (no envelope, history inline); it is still read.
//!
//! # A snapshot is a cache
//!
//! The log is the truth; a snapshot only saves folding it. So anything
//! wrong with one (an unknown format or version, bytes that do not decode, a
//! missing or damaged chunk, a state that does not end at the seq its event
//! names) makes [`load_state`] log why and fold the log from seq 1, which
//! gives the same state. Only failures of the store itself (the database is
//! locked, the disk failed) are errors.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::core::state::{HistoryItem, SessionState};
use longhand_session::{BlobRef, Event, EventRecord, SessionId, Store, StoreError};

/// What the root's `format` says.
pub const FORMAT: &str = "longhand.snapshot";

/// The format version [`encode`] writes. [`decode`] reads this one and 1
/// (bare `SessionState` JSON).
pub const VERSION: u64 = 2;

/// History items per chunk (default 64). Recorded in each root, so changing
/// it leaves older snapshots readable. Smaller chunks make the partial
/// chunks at the ends cheaper to rewrite but the root longer (one reference
/// per chunk) and wake slower (one blob read per chunk); the numbers behind
/// 64 are in docs/design.md, "Snapshots".
pub const CHUNK_ITEMS: u64 = 64;

/// A top-level state field whose JSON is longer than this many bytes
/// (default 1 KiB) is stored as its own blob instead of inside the root.
pub const OUT_OF_LINE_BYTES: usize = 1024;

/// A snapshot ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// The root blob, for `Event::Snapshot::state`.
    pub root: BlobRef,
    /// Every blob the snapshot needs, the root last. Most are usually in
    /// the store already (full chunks, an unchanged agent): storing them
    /// again stores nothing.
    pub blobs: Vec<Vec<u8>>,
    /// The blobs only a snapshot produces and only snapshots refer to: the
    /// root and every history chunk (not the out-of-line fields, whose
    /// bytes could equal a blob something else refers to). What a writer
    /// may forget once newer snapshots no longer use them
    /// (`Store::forget_snapshot_blobs`).
    pub parts: Vec<BlobRef>,
}

/// The root blob of a version 2 snapshot.
#[derive(Debug, Serialize, Deserialize)]
struct Root {
    format: String,
    version: u64,
    /// Inline top-level fields of the state, `history` left out.
    state: Map<String, Value>,
    /// Top-level fields stored as their own blob (JSON of the value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    fields: BTreeMap<String, BlobRef>,
    history: HistoryIndex,
}

/// Where the history items are.
#[derive(Debug, Serialize, Deserialize)]
struct HistoryIndex {
    /// Alignment of the chunks (see [`CHUNK_ITEMS`]).
    chunk_items: u64,
    /// Items in all chunks together.
    len: u64,
    /// The chunks, oldest first.
    chunks: Vec<BlobRef>,
}

/// Why a snapshot cannot be used. Never an error to the caller: the log is
/// folded from seq 1 instead, and this says why in the log line.
#[derive(Debug, thiserror::Error)]
enum Unusable {
    #[error("blob {blob} is not in the store")]
    Missing { blob: BlobRef },
    #[error("blob {blob} is damaged: {detail}")]
    Damaged { blob: BlobRef, detail: String },
    #[error("not a snapshot: {0}")]
    NotSnapshot(String),
    #[error("format version {0} is unknown (this Longhand reads 1 and {VERSION})")]
    UnknownVersion(u64),
    #[error("{0}")]
    Inconsistent(String),
}

/// Encode `state` as a version 2 snapshot: the blobs to store (root last)
/// and the root's reference for `Event::Snapshot`. Pure: no I/O, and the
/// same state always gives the same bytes.
pub fn encode(state: &SessionState) -> Encoded {
    encode_with(state, CHUNK_ITEMS, &mut FullChunks::default())
}

/// Full history chunks already encoded by this process, by the absolute
/// position of their first item. A full chunk never changes (the history
/// only grows at its end and loses whole items at its front), so a runner
/// that snapshots every 100 events encodes each one once.
#[derive(Debug, Default)]
pub struct FullChunks(BTreeMap<u64, BlobRef>);

/// [`encode`], reusing (and adding to) `known`: the full chunks in it are
/// referenced without being encoded again, and their bytes are left out of
/// [`Encoded::blobs`] — the caller stored them with an earlier snapshot.
pub fn encode_reusing(state: &SessionState, known: &mut FullChunks) -> Encoded {
    encode_with(state, CHUNK_ITEMS, known)
}

/// [`encode`] with another chunk size (the measurements compare several).
fn encode_with(state: &SessionState, chunk_items: u64, known: &mut FullChunks) -> Encoded {
    let mut blobs = Vec::new();

    let mut inline = match serde_json::to_value(state) {
        Ok(Value::Object(map)) => map,
        // `SessionState` is a struct of plain data, string-keyed maps and
        // JSON values: serde_json turns it into an object or not at all, and
        // `to_value` fails only for non-string map keys or a failing
        // `Serialize` impl, neither of which it has. The round-trip tests
        // below fail at once if a new field breaks this.
        other => unreachable!("SessionState serialises to a JSON object, got {other:?}"),
    };
    inline.remove("history");
    let mut fields = BTreeMap::new();
    inline.retain(|key, value| {
        let bytes = to_json(value);
        if bytes.len() <= OUT_OF_LINE_BYTES {
            return true;
        }
        fields.insert(key.clone(), BlobRef::of(&bytes));
        blobs.push(bytes);
        false
    });

    let items: Vec<&HistoryItem> = state.history.iter().collect();
    let mut chunks = Vec::new();
    let mut start = 0;
    // Chunks that left the history will not be seen again.
    known.0 = known.0.split_off(&state.history_omitted);
    for n in chunk_lengths(state.history_omitted, items.len() as u64, chunk_items) {
        let end = start + n as usize;
        let position = state.history_omitted + start as u64;
        let full = n == chunk_items;
        if let Some(blob) = known.0.get(&position).filter(|_| full) {
            chunks.push(blob.clone());
        } else {
            let bytes = to_json(&items[start..end]);
            let blob = BlobRef::of(&bytes);
            if full {
                known.0.insert(position, blob.clone());
            }
            chunks.push(blob);
            blobs.push(bytes);
        }
        start = end;
    }

    let mut parts = chunks.clone();
    let root = Root {
        format: FORMAT.to_owned(),
        version: VERSION,
        state: inline,
        fields,
        history: HistoryIndex {
            chunk_items,
            len: items.len() as u64,
            chunks,
        },
    };
    let bytes = to_json(&root);
    let root = BlobRef::of(&bytes);
    blobs.push(bytes);
    parts.push(root.clone());
    Encoded { root, blobs, parts }
}

/// JSON of a value made of `HistoryItem`s, `BlobRef`s and JSON maps.
fn to_json<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    match serde_json::to_vec(value) {
        Ok(bytes) => bytes,
        // Same argument as in `encode`: no map with non-string keys, no
        // fallible `Serialize` impl.
        Err(e) => unreachable!("snapshot parts serialise to JSON: {e}"),
    }
}

/// Sizes of the chunks holding `len` items from absolute position `first`,
/// cut on multiples of `per_chunk`.
fn chunk_lengths(first: u64, len: u64, per_chunk: u64) -> impl Iterator<Item = u64> {
    let mut pos = first;
    let end = first.saturating_add(len);
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let n = (per_chunk - pos % per_chunk).min(end - pos);
        pos += n;
        Some(n)
    })
}

/// How many chunks `chunk_lengths` yields, computed without walking them (a
/// damaged root may claim any `len`).
fn chunk_count(first: u64, len: u64, per_chunk: u64) -> u128 {
    if len == 0 {
        return 0;
    }
    let (first, last, per) = (
        u128::from(first),
        u128::from(first) + u128::from(len) - 1,
        u128::from(per_chunk),
    );
    last / per - first / per + 1
}

/// Read a snapshot back from its root, fetching the blobs it names through
/// `store`. `Ok(None)` when the snapshot cannot be used (unknown format or
/// version, bytes that do not decode, a blob missing or damaged): the
/// caller then folds the log from seq 1. Errors are the store's own
/// failures (locked, I/O), which say nothing about the snapshot.
pub async fn decode(store: &dyn Store, root: &BlobRef) -> Result<Option<SessionState>, StoreError> {
    Ok(read(store, root).await?.ok())
}

/// [`decode`], saying why a snapshot cannot be used.
async fn read(
    store: &dyn Store,
    root: &BlobRef,
) -> Result<Result<SessionState, Unusable>, StoreError> {
    let bytes = match fetch(store, root).await? {
        Ok(bytes) => bytes,
        Err(why) => return Ok(Err(why)),
    };
    let value: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(e) => return Ok(Err(Unusable::NotSnapshot(format!("not JSON: {e}")))),
    };
    let Value::Object(object) = value else {
        return Ok(Err(Unusable::NotSnapshot("not a JSON object".into())));
    };
    match object.get("format") {
        // Version 1: the bare state. Every state ever written has
        // `last_seq`; requiring it keeps any other object (which would
        // decode as a default state, all fields being optional) out.
        None if object.contains_key("last_seq") => {
            Ok(serde_json::from_value(Value::Object(object))
                .map_err(|e| Unusable::NotSnapshot(format!("version 1 state: {e}"))))
        }
        None => Ok(Err(Unusable::NotSnapshot(
            "no `format` and no `last_seq`".into(),
        ))),
        Some(Value::String(format)) if format == FORMAT => {
            match object.get("version").and_then(Value::as_u64) {
                Some(VERSION) => read_v2(store, object).await,
                Some(other) => Ok(Err(Unusable::UnknownVersion(other))),
                None => Ok(Err(Unusable::NotSnapshot(
                    "`version` is missing or not a number".into(),
                ))),
            }
        }
        Some(other) => Ok(Err(Unusable::NotSnapshot(format!("format {other}")))),
    }
}

async fn read_v2(
    store: &dyn Store,
    root: Map<String, Value>,
) -> Result<Result<SessionState, Unusable>, StoreError> {
    let root: Root = match serde_json::from_value(Value::Object(root)) {
        Ok(root) => root,
        Err(e) => return Ok(Err(Unusable::NotSnapshot(format!("version 2 root: {e}")))),
    };
    let mut inline = root.state;
    for (key, blob) in &root.fields {
        let bytes = match fetch(store, blob).await? {
            Ok(bytes) => bytes,
            Err(why) => return Ok(Err(why)),
        };
        let value: Value = match serde_json::from_slice(&bytes) {
            Ok(value) => value,
            Err(e) => {
                return Ok(Err(Unusable::NotSnapshot(format!("field `{key}`: {e}"))));
            }
        };
        if inline.insert(key.clone(), value).is_some() {
            return Ok(Err(Unusable::Inconsistent(format!(
                "field `{key}` is both inline and in a blob"
            ))));
        }
    }
    let mut state: SessionState = match serde_json::from_value(Value::Object(inline)) {
        Ok(state) => state,
        Err(e) => return Ok(Err(Unusable::NotSnapshot(format!("version 2 state: {e}")))),
    };

    let index = root.history;
    if index.chunk_items == 0 {
        return Ok(Err(Unusable::Inconsistent("chunk_items is 0".into())));
    }
    let first = state.history_omitted;
    let expected = chunk_count(first, index.len, index.chunk_items);
    if expected != index.chunks.len() as u128 {
        return Ok(Err(Unusable::Inconsistent(format!(
            "{} history items from position {first} fill {expected} chunks of {}, the root names {}",
            index.len,
            index.chunk_items,
            index.chunks.len()
        ))));
    }
    state.history.clear();
    let lengths = chunk_lengths(first, index.len, index.chunk_items);
    for (blob, len) in index.chunks.iter().zip(lengths) {
        let bytes = match fetch(store, blob).await? {
            Ok(bytes) => bytes,
            Err(why) => return Ok(Err(why)),
        };
        let items: Vec<HistoryItem> = match serde_json::from_slice(&bytes) {
            Ok(items) => items,
            Err(e) => {
                return Ok(Err(Unusable::NotSnapshot(format!(
                    "history chunk {blob}: {e}"
                ))));
            }
        };
        if items.len() as u64 != len {
            return Ok(Err(Unusable::Inconsistent(format!(
                "history chunk {blob} holds {} items, its place needs {len}",
                items.len()
            ))));
        }
        state.history.extend(items);
    }
    Ok(Ok(state))
}

/// A blob of the snapshot. Missing or damaged makes the snapshot unusable;
/// any other store failure is the caller's.
async fn fetch(store: &dyn Store, blob: &BlobRef) -> Result<Result<Vec<u8>, Unusable>, StoreError> {
    match store.get_blob(blob).await {
        Ok(bytes) => Ok(Ok(bytes)),
        Err(StoreError::NotFound { .. }) => Ok(Err(Unusable::Missing { blob: blob.clone() })),
        Err(StoreError::Corrupt { detail, .. }) => Ok(Err(Unusable::Damaged {
            blob: blob.clone(),
            detail,
        })),
        Err(e) => Err(e),
    }
}

/// Wake: the state of `session` from its latest snapshot and the events
/// after it; from the whole log when there is no snapshot or it cannot be
/// used (logged as a warning saying why). Either way the state is the one
/// a fold of the whole log gives.
pub async fn load_state(
    store: &dyn Store,
    session: &SessionId,
) -> Result<SessionState, StoreError> {
    let log = store.wake_log(session).await?;
    let Some(EventRecord {
        seq,
        event: Event::Snapshot {
            state: root,
            through_seq,
        },
        ..
    }) = &log.snapshot
    else {
        // No snapshot: the tail is the whole log.
        return Ok(SessionState::fold(&log.tail));
    };
    match read(store, root).await? {
        // The tail starts after `through_seq`: a state that ends anywhere
        // else would skip events or misplace them.
        Ok(mut state) if state.last_seq == *through_seq => {
            for record in &log.tail {
                state.apply(record);
            }
            return Ok(state);
        }
        Ok(state) => tracing::warn!(
            %session,
            seq,
            "snapshot ignored: its state ends at seq {}, its event says {through_seq}; folding the log from seq 1",
            state.last_seq
        ),
        Err(why) => tracing::warn!(
            %session,
            seq,
            "snapshot ignored ({why}); folding the log from seq 1"
        ),
    }
    let records = store.read(session, 1).await?;
    Ok(SessionState::fold(&records))
}

#[cfg(test)]
mod tests {
    //! Round trips (generated histories and real folds), the sharing of
    //! full chunks between snapshots, older shapes and versions, and wake
    //! through the real SQLite store falling back to a full fold. Events and
    //! history items are built from JSON, as the log holds them, so these
    //! tests follow the event and state types as they grow.

    use std::collections::{HashMap, HashSet};
    use std::sync::Mutex;
    use std::time::Duration;

    use async_trait::async_trait;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use longhand_session::{Lease, SessionSummary, SqliteStore};

    /// Blobs in memory; everything else refused. `failing` makes every read
    /// fail the way a locked database does.
    #[derive(Debug, Default)]
    struct MemStore {
        blobs: Mutex<HashMap<String, Vec<u8>>>,
        failing: bool,
    }

    impl MemStore {
        fn with(blobs: &[Vec<u8>]) -> Self {
            let store = MemStore::default();
            for bytes in blobs {
                store.put(bytes.clone());
            }
            store
        }

        fn put(&self, bytes: Vec<u8>) -> BlobRef {
            let blob = BlobRef::of(&bytes);
            self.blobs
                .lock()
                .unwrap()
                .insert(blob.digest.clone(), bytes);
            blob
        }

        fn remove(&self, blob: &BlobRef) {
            self.blobs.lock().unwrap().remove(&blob.digest);
        }
    }

    fn refused<T>() -> Result<T, StoreError> {
        Err(StoreError::Invalid("MemStore holds blobs only".into()))
    }

    #[async_trait]
    impl Store for MemStore {
        async fn create(&self, _: &str, _: &Event) -> Result<SessionId, StoreError> {
            refused()
        }
        async fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
            refused()
        }
        async fn summary(&self, _: &SessionId) -> Result<SessionSummary, StoreError> {
            refused()
        }
        async fn acquire_lease(
            &self,
            _: &SessionId,
            _: &str,
            _: Duration,
        ) -> Result<Lease, StoreError> {
            refused()
        }
        async fn renew(&self, _: &Lease, _: Duration) -> Result<Lease, StoreError> {
            refused()
        }
        async fn take_over(
            &self,
            _: &SessionId,
            _: &str,
            _: &str,
            _: Duration,
        ) -> Result<Lease, StoreError> {
            refused()
        }
        async fn release(&self, _: &Lease) -> Result<(), StoreError> {
            refused()
        }
        async fn append(
            &self,
            _: &SessionId,
            _: &Lease,
            _: u64,
            _: &[Event],
        ) -> Result<u64, StoreError> {
            refused()
        }
        async fn read(&self, _: &SessionId, _: u64) -> Result<Vec<EventRecord>, StoreError> {
            refused()
        }
        async fn latest_snapshot(&self, _: &SessionId) -> Result<Option<EventRecord>, StoreError> {
            refused()
        }
        async fn post_control(
            &self,
            _: &SessionId,
            _: longhand_session::ControlKind,
            _: Option<String>,
            _: &str,
        ) -> Result<longhand_session::Control, StoreError> {
            refused()
        }
        async fn controls(
            &self,
            _: &SessionId,
            _: u64,
        ) -> Result<Vec<longhand_session::Control>, StoreError> {
            refused()
        }
        async fn settle_control(&self, _: &Lease, _: u64) -> Result<(), StoreError> {
            refused()
        }
        async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
            Ok(self.put(bytes))
        }
        async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
            if self.failing {
                return Err(StoreError::Db {
                    context: "reading a blob".into(),
                    source: "database is locked".into(),
                });
            }
            self.blobs
                .lock()
                .unwrap()
                .get(&blob.digest)
                .cloned()
                .ok_or_else(|| StoreError::NotFound {
                    what: format!("blob {blob}"),
                })
        }
    }

    async fn round_trip(state: &SessionState) -> Option<SessionState> {
        let encoded = encode(state);
        decode(&MemStore::with(&encoded.blobs), &encoded.root)
            .await
            .unwrap()
    }

    /// A reference to `size` bytes named by `tag`.
    fn blob(tag: &str, size: u64) -> Value {
        json!({"digest": BlobRef::of(tag.as_bytes()).digest, "bytes": size})
    }

    fn event(value: Value) -> Event {
        serde_json::from_value(value).unwrap()
    }

    /// A frozen agent with a context budget, as long as a real one (and
    /// one the fold reads as an agent: the state holds it typed).
    fn agent(context_tokens: u64) -> Value {
        let tool = |prefix: &str, bytes: &[u8]| {
            json!({"prefix": prefix, "digest": BlobRef::of(bytes).digest,
                   "config": {"component": prefix}})
        };
        json!({
            "name": "snap",
            "instructions": "Work through the task one tool call at a time. ".repeat(30),
            "model": {"provider": "replay", "model": "m", "max_tokens": 4096},
            "tools": [tool("json", b"json"), tool("fs", b"fs")],
            "limits": {"context_tokens": context_tokens, "max_steps": 100_000},
            "completion": null,
            "base_dir": "/srv/snap",
        })
    }

    /// The log of a session of `steps` turns, each one tool call, with the
    /// other things a log holds now and then: retries, in-doubt calls,
    /// failures, a pause and a resume with raised limits, snapshots.
    fn conversation(steps: u64, context_tokens: u64) -> Vec<Event> {
        let mut events = vec![
            event(json!({
                "type": "session_created",
                "agent_name": "snap",
                "agent": agent(context_tokens),
                "config_digest": BlobRef::of(b"config").digest,
            })),
            event(json!({"type": "goal_set", "goal": "sum the numbers in data/*.json"})),
        ];
        for step in 1..=steps {
            let call = format!("call_{step}");
            events.push(event(json!({
                "type": "model_requested", "step": step, "role": "worker",
                "provider": "script", "model": "m",
                "request": blob(&format!("request {step}"), 300), "attempt": 1,
            })));
            if step % 17 == 0 {
                events.push(event(json!({
                    "type": "model_failed", "step": step, "attempt": 1,
                    "error": "HTTP 529 overloaded", "retryable": true,
                })));
            }
            events.push(event(json!({
                "type": "model_responded", "step": step,
                "response": blob(&format!("response {step}"), 200 + step % 300),
                "input_tokens": 1000 + step, "output_tokens": 50, "latency_ms": 7,
                "stop_reason": "tool_use", "calls": [call],
            })));
            let effect = if step % 11 == 0 {
                "writes"
            } else {
                "read-only"
            };
            events.push(event(json!({
                "type": "tool_started", "step": step, "call_id": call,
                "component": "json", "component_digest": BlobRef::of(b"json").digest,
                "tool": "query", "effect": effect,
                "input": blob(&format!("input {}", step % 5), 40),
            })));
            if step % 23 == 0 {
                events.push(event(json!({
                    "type": "tool_in_doubt", "step": step, "call_id": call,
                    "reason": "worker died during call",
                })));
            } else {
                events.push(event(json!({
                    "type": "tool_finished", "step": step, "call_id": call,
                    "ok": step % 7 != 0,
                    "result": blob(&format!("result {step}"), 60 + step % 50),
                    "receipt": {"wall_us": 1500, "bytes_written": step % 3},
                })));
            }
            if step % 41 == 0 {
                events.push(event(json!({
                    "type": "paused",
                    "reason": {"kind": "limit", "limit": "tool_calls", "detail": "limit hit"},
                })));
                events.push(event(json!({
                    "type": "resumed", "raised": {"tool_calls": step * 2},
                })));
            }
            if step % 25 == 0 {
                events.push(event(json!({
                    "type": "snapshot",
                    "state": blob(&format!("snapshot {step}"), 1000),
                    "through_seq": 1,
                })));
            }
        }
        events.push(event(
            json!({"type": "finished", "summary": "the sum is 42"}),
        ));
        events
    }

    fn records(events: &[Event]) -> Vec<EventRecord> {
        events
            .iter()
            .enumerate()
            .map(|(i, event)| EventRecord {
                seq: i as u64 + 1,
                at_ms: 1_700_000_000_000 + i as u64,
                event: event.clone(),
            })
            .collect()
    }

    #[tokio::test]
    async fn real_folds_round_trip_at_every_event() {
        // A small budget trims history from the front all the time, so the
        // first chunk starts anywhere inside its 64 positions.
        let records = records(&conversation(250, 6_000));
        let mut state = SessionState::default();
        let mut most = 0;
        for record in &records {
            state.apply(record);
            most = most.max(state.history.len());
            assert_eq!(
                round_trip(&state).await.as_ref(),
                Some(&state),
                "at seq {}",
                record.seq
            );
        }
        assert!(
            state.history_omitted > 300,
            "trimmed: {}",
            state.history_omitted
        );
        assert!(most > 64, "spans chunks: {most}");
    }

    #[tokio::test]
    async fn a_long_session_at_the_item_cap_round_trips() {
        let records = records(&conversation(700, 1_000_000));
        let mut state = SessionState::default();
        for (i, record) in records.iter().enumerate() {
            state.apply(record);
            if i % 97 == 0 || i + 1 == records.len() {
                assert_eq!(
                    round_trip(&state).await.as_ref(),
                    Some(&state),
                    "at seq {}",
                    record.seq
                );
            }
        }
        assert_eq!(state.history.len() as u64 + state.history_omitted, 1400);
        assert!(state.history_omitted > 0);
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_0-9]{0,12}",
            any::<String>(),
            Just("\u{1b}[2J\u{202e}\0\"\\".to_owned()),
        ]
    }

    fn blob_ref() -> impl Strategy<Value = Value> {
        (any::<[u8; 4]>(), any::<u64>())
            .prop_map(|(b, bytes)| json!({"digest": BlobRef::of(&b).digest, "bytes": bytes}))
    }

    fn history_item() -> impl Strategy<Value = Value> {
        prop_oneof![
            (any::<u64>(), any::<u64>(), blob_ref()).prop_map(|(seq, step, response)| {
                json!({"kind": "assistant", "seq": seq, "step": step, "response": response})
            }),
            (
                any::<u64>(),
                text(),
                any::<bool>(),
                proptest::option::of(blob_ref()),
                proptest::option::of(text()),
            )
                .prop_map(|(seq, call_id, ok, result, note)| {
                    json!({"kind": "tool_result", "seq": seq, "call_id": call_id,
                           "ok": ok, "result": result, "note": note})
                }),
        ]
    }

    /// States with any history at any position, and the other fields either
    /// small or long enough to go out of line.
    fn state() -> impl Strategy<Value = SessionState> {
        (
            prop::collection::vec(history_item(), 0..200),
            prop_oneof![0..300u64, any::<u32>().prop_map(u64::from)],
            any::<u64>(),
            proptest::option::of(prop_oneof![text(), "[a-z ]{1000,3000}"]),
            prop::collection::btree_map(text(), any::<u64>(), 0..4),
        )
            .prop_map(|(history, omitted, last_seq, goal, raised)| {
                serde_json::from_value(json!({
                    "history": history,
                    "history_omitted": omitted,
                    "last_seq": last_seq,
                    "goal": goal,
                    "raised": raised,
                    "agent": agent(5_000),
                    "status": "running",
                }))
                .unwrap()
            })
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 64,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn any_history_round_trips(state in state()) {
            let encoded = encode(&state);
            prop_assert_eq!(&encode(&state), &encoded, "encoding is deterministic");
            let decoded = runtime().block_on(decode(&MemStore::with(&encoded.blobs), &encoded.root));
            prop_assert_eq!(decoded.unwrap(), Some(state));
        }

        /// After items are added at the end and dropped from the front, a
        /// later snapshot shares every full chunk still inside its history
        /// and adds at most its root and a partial chunk at each end.
        #[test]
        fn later_snapshots_reuse_full_chunks(
            state in state(),
            added in prop::collection::vec(history_item(), 0..150),
            dropped in 0usize..150,
        ) {
            let before = encode(&state);
            let mut later = state.clone();
            later.history.extend(added.into_iter().map(|v| serde_json::from_value(v).unwrap()));
            let dropped = dropped.min(later.history.len());
            later.history.drain(..dropped);
            later.history_omitted += dropped as u64;
            let after = encode(&later);

            let old: HashSet<Vec<u8>> = before.blobs.iter().cloned().collect();
            let new: HashSet<Vec<u8>> = after.blobs.iter().cloned().collect();
            let (old_first, old_end) = span(&state);
            let (first, end) = span(&later);
            let full_in = |pos: u64, n: u64, first: u64, end: u64| {
                n == CHUNK_ITEMS && pos >= first && pos + n <= end
            };
            for (blob, (pos, n)) in chunks_of(&before).iter().zip(placed(&state)) {
                if full_in(pos, n, first, end) {
                    prop_assert!(new.contains(blob), "full chunk at {} is shared", pos);
                }
            }
            // What is new: the chunk at each end, and chunks that were not
            // full in the earlier snapshot.
            let placed_after = placed(&later);
            let last = placed_after.len().saturating_sub(1);
            for (i, (blob, (pos, n))) in chunks_of(&after).iter().zip(placed_after).enumerate() {
                if !old.contains(blob) && i != 0 && i != last {
                    prop_assert!(!full_in(pos, n, old_first, old_end), "chunk at {} rewritten", pos);
                }
            }
        }
    }

    /// The positions of `state`'s history: first, and one past the last.
    fn span(state: &SessionState) -> (u64, u64) {
        let first = state.history_omitted;
        (first, first + state.history.len() as u64)
    }

    /// Each chunk's first position and length.
    fn placed(state: &SessionState) -> Vec<(u64, u64)> {
        let mut pos = state.history_omitted;
        chunk_lengths(pos, state.history.len() as u64, CHUNK_ITEMS)
            .map(|n| {
                pos += n;
                (pos - n, n)
            })
            .collect()
    }

    /// The history chunks of an encoded snapshot, in order.
    fn chunks_of(encoded: &Encoded) -> Vec<Vec<u8>> {
        let root: Root = serde_json::from_slice(encoded.blobs.last().unwrap()).unwrap();
        let by_digest: HashMap<String, &Vec<u8>> = encoded
            .blobs
            .iter()
            .map(|b| (BlobRef::of(b).digest, b))
            .collect();
        root.history
            .chunks
            .iter()
            .map(|c| by_digest[&c.digest].clone())
            .collect()
    }

    fn folded(steps: u64, context_tokens: u64) -> SessionState {
        SessionState::fold(&records(&conversation(steps, context_tokens)))
    }

    #[tokio::test]
    async fn the_root_is_small_and_the_agent_goes_out_of_line() {
        let state = folded(300, 1_000_000);
        let agent = state.agent.as_ref().expect("the fold reads the agent");
        assert_eq!(agent.get().name, "snap");
        let encoded = encode(&state);
        let root: Root = serde_json::from_slice(encoded.blobs.last().unwrap()).unwrap();
        assert_eq!(BlobRef::of(encoded.blobs.last().unwrap()), encoded.root);
        assert!(root.fields.contains_key("agent"), "{:?}", root.fields);
        assert!(!root.state.contains_key("agent"));
        assert!(!root.state.contains_key("history"));
        assert_eq!(root.history.chunks.len(), 10, "600 items from position 0");
        assert!(
            encoded.root.bytes < 4096,
            "root of {} bytes",
            encoded.root.bytes
        );
    }

    #[tokio::test]
    async fn a_version_1_snapshot_decodes_including_an_older_shape() {
        let state = folded(120, 6_000);
        let store = MemStore::default();
        let bare = store.put(serde_json::to_vec(&state).unwrap());
        assert_eq!(decode(&store, &bare).await.unwrap(), Some(state.clone()));

        // Written before `bytes_written` and `summary_blob` existed.
        let mut value = serde_json::to_value(&state).unwrap();
        let object = value.as_object_mut().unwrap();
        object.remove("bytes_written").unwrap();
        object.remove("summary_blob").unwrap();
        let older = store.put(serde_json::to_vec(&value).unwrap());
        let decoded = decode(&store, &older).await.unwrap().unwrap();
        assert_eq!(decoded.bytes_written, 0);
        assert_ne!(state.bytes_written, 0);
        assert_eq!(
            decoded,
            SessionState {
                bytes_written: 0,
                summary_blob: None,
                ..state
            }
        );
    }

    #[tokio::test]
    async fn a_version_2_snapshot_of_an_older_shape_decodes_with_defaults() {
        let mut state = folded(120, 6_000);
        state.summary_blob = Some(BlobRef::of(b"the whole answer"));
        let encoded = encode(&state);
        let store = MemStore::with(&encoded.blobs);
        let mut root: Value = serde_json::from_slice(encoded.blobs.last().unwrap()).unwrap();
        let inline = root["state"].as_object_mut().unwrap();
        inline.remove("bytes_written").unwrap();
        inline.remove("summary_blob").unwrap();
        let older = store.put(serde_json::to_vec(&root).unwrap());
        assert_eq!(
            decode(&store, &older).await.unwrap(),
            Some(SessionState {
                bytes_written: 0,
                summary_blob: None,
                ..state
            })
        );
    }

    #[tokio::test]
    async fn a_snapshot_that_cannot_be_used_decodes_to_none() {
        let state = folded(200, 6_000);
        let encoded = encode(&state);
        let root: Value = serde_json::from_slice(encoded.blobs.last().unwrap()).unwrap();
        let with = |f: &dyn Fn(&mut Value)| {
            let mut root = root.clone();
            f(&mut root);
            serde_json::to_vec(&root).unwrap()
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("garbage", b"\x00\xffnot json".to_vec()),
            ("an array", b"[1, 2]".to_vec()),
            ("an empty object", b"{}".to_vec()),
            (
                "another format",
                with(&|r| r["format"] = json!("other.snapshot")),
            ),
            ("version 3", with(&|r| r["version"] = json!(3))),
            (
                "no version",
                with(&|r| drop(r.as_object_mut().unwrap().remove("version"))),
            ),
            (
                "a chunk too few",
                with(&|r| drop(r["history"]["chunks"].as_array_mut().unwrap().pop())),
            ),
            (
                "items miscounted",
                with(&|r| r["history"]["len"] = json!(state.history.len() + 1)),
            ),
            (
                "chunk_items 0",
                with(&|r| r["history"]["chunk_items"] = json!(0)),
            ),
            (
                "misaligned",
                with(&|r| r["state"]["history_omitted"] = json!(state.history_omitted + 1)),
            ),
            ("a field twice", with(&|r| r["state"]["agent"] = json!({}))),
            (
                "a state of the wrong type",
                with(&|r| r["state"]["steps"] = json!("many")),
            ),
        ];
        for (what, bytes) in cases {
            let store = MemStore::with(&encoded.blobs);
            let root = store.put(bytes);
            assert_eq!(decode(&store, &root).await.unwrap(), None, "{what}");
        }

        // A blob it names is missing: the root itself, a chunk, a field.
        let root_blob = decode(&MemStore::default(), &encoded.root).await.unwrap();
        assert_eq!(root_blob, None, "no root");
        for missing in &encoded.blobs[..encoded.blobs.len() - 1] {
            let store = MemStore::with(&encoded.blobs);
            store.remove(&BlobRef::of(missing));
            assert_eq!(decode(&store, &encoded.root).await.unwrap(), None);
        }

        // A store that fails says so: that is not the snapshot's fault.
        let failing = MemStore {
            failing: true,
            ..MemStore::with(&encoded.blobs)
        };
        let err = decode(&failing, &encoded.root).await.unwrap_err();
        assert!(matches!(err, StoreError::Db { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn a_snapshot_trimmed_at_the_front_round_trips() {
        let mut state = folded(300, 1_000_000);
        for dropped in [1, 37, 63, 64, 65, 200] {
            let mut trimmed = state.clone();
            trimmed.history.drain(..dropped);
            trimmed.history_omitted += dropped as u64;
            assert_eq!(
                round_trip(&trimmed).await,
                Some(trimmed.clone()),
                "{dropped}"
            );
        }
        state.history.clear();
        state.history_omitted = 600;
        assert_eq!(round_trip(&state).await, Some(state));
    }

    /// A SQLite store holding `events` as one session, leased.
    async fn sqlite(dir: &tempfile::TempDir, events: &[Event]) -> (SqliteStore, SessionId, Lease) {
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let id = store.create("snap", &events[0]).await.unwrap();
        let lease = store
            .acquire_lease(&id, "test", Duration::from_secs(60))
            .await
            .unwrap();
        store.append(&id, &lease, 2, &events[1..]).await.unwrap();
        (store, id, lease)
    }

    /// Wake a session whose log is `conversation` with, halfway, a snapshot
    /// event through the event before it, naming the root `snapshot` makes
    /// from the records up to there (and storing the blobs it gives).
    /// Returns the woken state and the full fold.
    async fn wake_with(
        snapshot: impl FnOnce(&[EventRecord]) -> (Vec<Vec<u8>>, BlobRef),
    ) -> (SessionState, SessionState) {
        // Without the conversation's own snapshot events: the one under
        // test must be the latest.
        let events: Vec<Event> = conversation(150, 6_000)
            .into_iter()
            .filter(|e| !matches!(e, Event::Snapshot { .. }))
            .collect();
        let (head, tail) = events.split_at(events.len() / 2);
        let dir = tempfile::tempdir().unwrap();
        let (store, id, lease) = sqlite(&dir, head).await;
        let head = store.read(&id, 1).await.unwrap();
        let (blobs, root) = snapshot(&head);
        for bytes in blobs {
            store.put_blob(bytes).await.unwrap();
        }
        let through_seq = head.len() as u64;
        let event = Event::Snapshot {
            state: root,
            through_seq,
        };
        store
            .append(&id, &lease, through_seq + 1, &[event])
            .await
            .unwrap();
        store
            .append(&id, &lease, through_seq + 2, tail)
            .await
            .unwrap();
        let woken = load_state(&store, &id).await.unwrap();
        let full = SessionState::fold(&store.read(&id, 1).await.unwrap());
        (woken, full)
    }

    fn encoded(state: &SessionState) -> (Vec<Vec<u8>>, BlobRef) {
        let e = encode(state);
        (e.blobs, e.root)
    }

    #[tokio::test]
    async fn wake_uses_a_snapshot_that_decodes() {
        let (woken, full) = wake_with(|r| encoded(&SessionState::fold(r))).await;
        assert_eq!(woken, full);
        let (woken, full) = wake_with(|r| {
            let bytes = serde_json::to_vec(&SessionState::fold(r)).unwrap();
            let root = BlobRef::of(&bytes);
            (vec![bytes], root)
        })
        .await;
        assert_eq!(woken, full, "version 1");

        // Proof that the snapshot was read rather than the log refolded: a
        // snapshot one millisecond off wakes one millisecond off.
        let (woken, full) = wake_with(|r| {
            let mut marked = SessionState::fold(r);
            marked.active_ms += 1;
            encoded(&marked)
        })
        .await;
        assert_eq!(woken.active_ms, full.active_ms + 1);
    }

    #[tokio::test]
    async fn wake_folds_from_seq_1_when_the_snapshot_cannot_be_used() {
        fn root_with(r: &[EventRecord], f: impl Fn(&mut Value)) -> (Vec<Vec<u8>>, BlobRef) {
            let mut e = encode(&SessionState::fold(r));
            let mut root: Value = serde_json::from_slice(&e.blobs.pop().unwrap()).unwrap();
            f(&mut root);
            let bytes = serde_json::to_vec(&root).unwrap();
            let blob = BlobRef::of(&bytes);
            e.blobs.push(bytes);
            (e.blobs, blob)
        }
        type Case = Box<dyn FnOnce(&[EventRecord]) -> (Vec<Vec<u8>>, BlobRef)>;
        let cases: Vec<(&str, Case)> = vec![
            (
                "unknown version",
                Box::new(|r| root_with(r, |root| root["version"] = json!(99))),
            ),
            (
                "garbage",
                Box::new(|_| {
                    let bytes = b"\x89PNG not a snapshot".to_vec();
                    let blob = BlobRef::of(&bytes);
                    (vec![bytes], blob)
                }),
            ),
            (
                "missing chunk",
                Box::new(|r| {
                    let (mut blobs, root) = encoded(&SessionState::fold(r));
                    // The root is last, the newest chunk before it.
                    blobs.remove(blobs.len() - 2);
                    (blobs, root)
                }),
            ),
            (
                "missing root",
                Box::new(|r| (Vec::new(), encode(&SessionState::fold(r)).root)),
            ),
            (
                // Folding the tail onto it would skip three events.
                "a state that ends before the seq its event names",
                Box::new(|r| encoded(&SessionState::fold(&r[..r.len() - 3]))),
            ),
        ];
        for (what, snapshot) in cases {
            let (woken, full) = wake_with(snapshot).await;
            assert_eq!(woken, full, "{what}");
        }
    }

    /// Bytes each snapshot adds to the store over a 1000-step session (one
    /// tool call a step, history at the 1024-item cap from about step 512,
    /// a snapshot every 100 events as the loop takes them), whole-state
    /// JSON against chunked roots of several chunk sizes, and the time to
    /// decode the last snapshot from a SQLite store on disk. Numbers in
    /// docs/design.md, "Snapshots". Run with
    /// `cargo test -p longhand-host --release --lib snapshot_sizes -- --ignored --nocapture`.
    #[tokio::test]
    #[ignore = "measurement: prints sizes and times, asserts nothing"]
    async fn snapshot_sizes() {
        const EVERY: u64 = 100;
        let events: Vec<Event> = conversation(1000, 100_000)
            .into_iter()
            .filter(|e| !matches!(e, Event::Snapshot { .. }))
            .collect();
        let sizes = [16, 32, 64, 128];
        let mut seen: Vec<HashSet<String>> = vec![HashSet::new(); sizes.len()];
        let mut added = vec![0u64; sizes.len()];
        let mut capped_added = vec![0u64; sizes.len()];
        let mut roots = vec![0u64; sizes.len()];
        let mut reads = vec![0usize; sizes.len()];
        let (mut whole, mut capped_whole, mut snapshots, mut capped) = (0u64, 0u64, 0u64, 0u64);
        let mut state = SessionState::default();
        let mut seq = 0;
        let mut apply = |state: &mut SessionState, event: Event| {
            seq += 1;
            state.apply(&EventRecord {
                seq,
                at_ms: 0,
                event,
            });
        };
        for event in events {
            apply(&mut state, event);
            if state.since_snapshot < EVERY {
                continue;
            }
            snapshots += 1;
            let at_cap = state.history_omitted > 0;
            capped += u64::from(at_cap);
            let bare = serde_json::to_vec(&state).unwrap().len() as u64;
            whole += bare;
            if at_cap {
                capped_whole += bare;
            }
            for (i, &size) in sizes.iter().enumerate() {
                let encoded = encode_with(&state, size, &mut FullChunks::default());
                roots[i] += encoded.root.bytes;
                reads[i] = encoded.blobs.len();
                for bytes in &encoded.blobs {
                    if seen[i].insert(BlobRef::of(bytes).digest) {
                        added[i] += bytes.len() as u64;
                        if at_cap {
                            capped_added[i] += bytes.len() as u64;
                        }
                    }
                }
            }
            let through_seq = state.last_seq;
            let root = BlobRef::of(b"");
            apply(
                &mut state,
                Event::Snapshot {
                    state: root,
                    through_seq,
                },
            );
        }
        let kb = |b: u64| b as f64 / 1000.0;
        println!(
            "{} steps, {} snapshots ({capped} at the item cap), history {} items, {} omitted",
            state.steps,
            snapshots,
            state.history.len(),
            state.history_omitted
        );
        println!(
            "whole state JSON (version 1): {:.1} kB in all, {:.1} kB per snapshot, {:.1} kB at the cap",
            kb(whole),
            kb(whole / snapshots),
            kb(capped_whole / capped.max(1))
        );
        for (i, size) in sizes.iter().enumerate() {
            println!(
                "chunks of {size:>3}: {:.1} kB new in all ({:.1}x smaller), {:.1} kB per snapshot, \
                 {:.1} kB per snapshot at the cap, root {:.1} kB, {} blobs to read",
                kb(added[i]),
                whole as f64 / added[i] as f64,
                kb(added[i] / snapshots),
                kb(capped_added[i] / capped.max(1)),
                kb(roots[i] / snapshots),
                reads[i],
            );
        }

        // Wake: the last state's snapshot read back from a store on disk.
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let v1 = store
            .put_blob(serde_json::to_vec(&state).unwrap())
            .await
            .unwrap();
        let encoded = encode(&state);
        let reads = encoded.blobs.len();
        for bytes in encoded.blobs {
            store.put_blob(bytes).await.unwrap();
        }
        let time = |start: std::time::Instant| start.elapsed().as_secs_f64() * 1000.0 / 20.0;
        let start = std::time::Instant::now();
        for _ in 0..20 {
            assert_eq!(decode(&store, &v1).await.unwrap().as_ref(), Some(&state));
        }
        let v1_ms = time(start);
        let start = std::time::Instant::now();
        for _ in 0..20 {
            assert_eq!(
                decode(&store, &encoded.root).await.unwrap().as_ref(),
                Some(&state)
            );
        }
        let v2_ms = time(start);
        let start = std::time::Instant::now();
        for _ in 0..20 {
            let _ = encode(&state);
        }
        println!(
            "decode from SQLite: version 1 {v1_ms:.2} ms (1 blob), version 2 {v2_ms:.2} ms ({reads} blobs); \
             encode {:.2} ms",
            time(start)
        );
    }

    #[test]
    fn reusing_known_full_chunks_gives_the_same_root_and_fewer_blobs() {
        let mut known = FullChunks::default();
        let mut state = SessionState::default();
        let mut seq = 0;
        let mut previous_full = 0;
        for round in 0..6u64 {
            for _ in 0..100 {
                seq += 1;
                state.history.push_back(HistoryItem::Assistant {
                    seq,
                    step: seq,
                    response: BlobRef::of(&seq.to_be_bytes()),
                });
            }
            // Trim the front as the fold would, keeping absolute positions.
            while state.history.len() > 250 {
                state.history.pop_front();
                state.history_omitted += 1;
            }
            let whole = encode(&state);
            let reused = encode_reusing(&state, &mut known);
            assert_eq!(reused.root, whole.root, "round {round}");
            let full_now = chunk_lengths(
                state.history_omitted,
                state.history.len() as u64,
                CHUNK_ITEMS,
            )
            .filter(|n| *n == CHUNK_ITEMS)
            .count();
            // Every full chunk seen before is left out; new ones are in.
            assert!(
                reused.blobs.len() < whole.blobs.len() || previous_full == 0,
                "round {round}"
            );
            assert!(
                known.0.len() == full_now,
                "only chunks still in the history are kept"
            );
            assert!(known.0.keys().all(|p| *p >= state.history_omitted));
            previous_full = full_now;
        }
    }
}
