//! Cassettes: real model answers recorded once, replayed offline.
//!
//! A cassette is one JSON file:
//!
//! ```json
//! {"version": 1, "model": "gpt-4o",
//!  "turns": [{"request": {"turn": 0, "sha256": "…", "messages": 1, "excerpt": "user: …"},
//!             "response": { …ModelResponse… }}]}
//! ```
//!
//! `request` is a [`RequestSummary`]: the SHA-256 of the canonical JSON
//! (object keys sorted, no whitespace) of the request's `system`,
//! `messages` and `tools` — everything the model sees; not `max_tokens` or
//! `temperature`, which are knobs — plus a short excerpt of the last
//! message for humans.
//!
//! **Replay is stateless.** [`ReplayProvider`] answers a request with the
//! recorded turn whose hash matches it, not with "the next turn": so a run
//! that crashed after sending a request and re-sends it on wake gets the
//! same answer, in this process or another, and turns are found even after
//! a context reset or compaction has shortened the message list (where
//! "number of assistant messages" no longer counts turns). A request with
//! no matching hash fails loudly with [`ModelError::Diverged`], reporting
//! the turn the run is at (its number of assistant messages), what the
//! cassette recorded for that turn, and what the run sent — or `cassette
//! exhausted` when the run is past the last turn. If a recording holds the
//! same request twice, replay always gives the first answer: identical
//! requests get identical answers, which is what resuming needs.
//!
//! **Tools whose output varies.** A tool that runs a program (`exec`)
//! answers with timings and output that differ from run to run, so a
//! request holding its result never hashes the same twice. A cassette that
//! says `"match": "shape"` also finds a turn by its request's *shape*: the
//! same hash with every tool result's text left out (its call id and error
//! flag kept). The model's answers are then replayed whatever the tools
//! printed, in the same order of calls; a run that calls other tools, or
//! gets other instructions or check feedback, still diverges loudly.
//!
//! [`RecordingProvider`] wraps a real provider and appends each new turn to
//! the cassette, rewriting the file atomically (temp file, fsync, rename)
//! after every turn so a crash leaves the last complete cassette. It
//! answers requests already in the cassette from the cassette, without
//! calling the model: a resumed recording run thereby sees the same answers
//! the session log recorded, and recording and replay agree exactly.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::ModelError;
use super::model_provider::ModelProvider;
use super::types::{Message, ModelRequest, ModelResponse};

/// The cassette format version this code reads and writes.
pub const CASSETTE_VERSION: u32 = 1;

/// The longest excerpt kept, in characters.
const EXCERPT_CHARS: usize = 120;

/// A cassette file's contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cassette {
    /// Always [`CASSETTE_VERSION`].
    pub version: u32,
    /// The model the turns were recorded from, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How a request finds its turn. Default [`Match::Exact`].
    #[serde(default, rename = "match", skip_serializing_if = "Match::is_exact")]
    pub match_on: Match,
    /// Recorded turns, in the order they were recorded.
    pub turns: Vec<Turn>,
}

/// How replay finds the turn for a request (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Match {
    /// By the hash of everything the model saw.
    #[default]
    Exact,
    /// By that hash, else by the hash with tool results' text left out.
    Shape,
}

impl Match {
    fn is_exact(&self) -> bool {
        *self == Self::Exact
    }
}

/// One recorded request and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Enough of the request to recognise it.
    pub request: RequestSummary,
    /// What the model answered.
    pub response: ModelResponse,
}

/// What a cassette keeps of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestSummary {
    /// The number of assistant messages in the request: the turn a run
    /// without context resets is at. Informational; matching is by hash.
    pub turn: usize,
    /// Hex SHA-256 of the canonical JSON of `system`, `messages`, `tools`.
    pub sha256: String,
    /// Hex SHA-256 as `sha256`, with every tool result's text left out:
    /// what `"match": "shape"` finds a turn by. Absent in cassettes
    /// recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// How many messages the request had.
    pub messages: usize,
    /// The last message, shortened, for people reading a divergence.
    pub excerpt: String,
}

impl RequestSummary {
    /// Summarises `req`.
    pub fn of(req: &ModelRequest) -> Self {
        let hash = |messages: &[Message]| {
            let seen = serde_json::json!({
                "system": req.system,
                "messages": messages,
                "tools": req.tools,
            });
            let mut canon = String::new();
            canonical_json(&seen, &mut canon);
            hex::encode(Sha256::digest(canon.as_bytes()))
        };
        let shaped: Vec<Message> = req
            .messages
            .iter()
            .map(|m| match m {
                Message::ToolResult {
                    call_id, is_error, ..
                } => Message::ToolResult {
                    call_id: call_id.clone(),
                    content: String::new(),
                    is_error: *is_error,
                },
                other => other.clone(),
            })
            .collect();
        Self {
            turn: req
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Assistant { .. }))
                .count(),
            sha256: hash(&req.messages),
            shape: Some(hash(&shaped)),
            messages: req.messages.len(),
            excerpt: excerpt(req.messages.last()),
        }
    }
}

/// Writes `v` with object keys sorted and no whitespace, so equal values
/// hash equally whatever order their maps were built in.
pub(crate) fn canonical_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn excerpt(m: Option<&Message>) -> String {
    let full = match m {
        None => return "(no messages)".into(),
        Some(Message::User { text }) => format!("user: {text}"),
        Some(Message::Assistant {
            text, tool_calls, ..
        }) => {
            let mut s = format!("assistant: {}", text.as_deref().unwrap_or(""));
            if !tool_calls.is_empty() {
                let names: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
                s.push_str(&format!(" [calls {}]", names.join(", ")));
            }
            s
        }
        Some(Message::ToolResult {
            call_id,
            content,
            is_error,
        }) => format!(
            "tool_result {call_id}{}: {content}",
            if *is_error { " (error)" } else { "" }
        ),
    };
    let flat = full.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > EXCERPT_CHARS {
        let mut s: String = flat.chars().take(EXCERPT_CHARS).collect();
        s.push('…');
        s
    } else {
        flat
    }
}

/// Opening or reading a cassette failed. The caller aborts: a run told to
/// replay a cassette it cannot read must not silently call a real model.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    /// The file could not be read or written.
    #[error("cassette {}: {source}", path.display())]
    Io {
        /// The cassette.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a cassette.
    #[error("cassette {} is not valid: {source}", path.display())]
    Parse {
        /// The cassette.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The file is a cassette of another format version.
    #[error("cassette {} has version {found}; this build reads version {CASSETTE_VERSION}", path.display())]
    Version {
        /// The cassette.
        path: PathBuf,
        /// The version it declares.
        found: u32,
    },
}

impl Cassette {
    /// An empty cassette.
    pub fn new(model: Option<String>) -> Self {
        Self {
            version: CASSETTE_VERSION,
            model,
            match_on: Match::Exact,
            turns: Vec::new(),
        }
    }

    /// Reads a cassette file.
    pub fn load(path: &Path) -> Result<Self, CassetteError> {
        let bytes = std::fs::read(path).map_err(|source| CassetteError::Io {
            path: path.to_owned(),
            source,
        })?;
        let c: Cassette =
            serde_json::from_slice(&bytes).map_err(|source| CassetteError::Parse {
                path: path.to_owned(),
                source,
            })?;
        if c.version != CASSETTE_VERSION {
            return Err(CassetteError::Version {
                path: path.to_owned(),
                found: c.version,
            });
        }
        Ok(c)
    }

    /// Writes the cassette to `path` atomically: a temp file beside it,
    /// fsynced, then renamed over it; a crash leaves the old file or the
    /// new one, never half of either.
    pub fn save(&self, path: &Path) -> Result<(), CassetteError> {
        let io = |source| CassetteError::Io {
            path: path.to_owned(),
            source,
        };
        let mut bytes = serde_json::to_vec_pretty(self).map_err(|source| CassetteError::Parse {
            path: path.to_owned(),
            source,
        })?;
        bytes.push(b'\n');
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            // Make the rename itself durable; not every platform can open
            // a directory, so this is best effort.
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })
    }

    /// The first turn recorded for each request hash, and, when the
    /// cassette matches by shape, for each shape (keys `shape:<hex>`).
    fn index(&self) -> HashMap<String, usize> {
        let mut by_hash = HashMap::new();
        for (i, t) in self.turns.iter().enumerate() {
            by_hash.entry(t.request.sha256.clone()).or_insert(i);
        }
        if self.match_on == Match::Shape {
            for (i, t) in self.turns.iter().enumerate() {
                if let Some(shape) = &t.request.shape {
                    by_hash.entry(format!("shape:{shape}")).or_insert(i);
                }
            }
        }
        by_hash
    }

    /// Add turn `i` to `index` (as [`Cassette::index`] would).
    fn add_to_index(&self, index: &mut HashMap<String, usize>, i: usize) {
        let request = &self.turns[i].request;
        index.entry(request.sha256.clone()).or_insert(i);
        if self.match_on == Match::Shape
            && let Some(shape) = &request.shape
        {
            index.entry(format!("shape:{shape}")).or_insert(i);
        }
    }

    /// The divergence error for a request the cassette does not hold.
    fn diverged(&self, got: &RequestSummary) -> ModelError {
        match self.turns.get(got.turn) {
            None => ModelError::Diverged {
                turn: got.turn,
                expected_excerpt: "cassette exhausted".into(),
                got_excerpt: got.excerpt.clone(),
            },
            Some(t) => {
                let mut got_excerpt = got.excerpt.clone();
                if t.request.excerpt == got.excerpt {
                    got_excerpt.push_str(
                        " (same last message; earlier messages, tools or system prompt differ)",
                    );
                }
                ModelError::Diverged {
                    turn: got.turn,
                    expected_excerpt: t.request.excerpt.clone(),
                    got_excerpt,
                }
            }
        }
    }
}

/// Answers from a cassette; never calls a model. See the module docs.
#[derive(Debug)]
pub struct ReplayProvider {
    cassette: Cassette,
    by_hash: HashMap<String, usize>,
    model: String,
}

impl ReplayProvider {
    /// Loads the cassette at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CassetteError> {
        Ok(Self::new(Cassette::load(path.as_ref())?))
    }

    /// Replays an in-memory cassette.
    pub fn new(cassette: Cassette) -> Self {
        Self {
            by_hash: cassette.index(),
            model: cassette.model.clone().unwrap_or_else(|| "replay".into()),
            cassette,
        }
    }
}

#[async_trait::async_trait]
impl ModelProvider for ReplayProvider {
    fn name(&self) -> &str {
        "replay"
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let got = RequestSummary::of(req);
        match lookup(&self.by_hash, &got) {
            Some(i) => Ok(self.cassette.turns[i].response.clone()),
            None => Err(self.cassette.diverged(&got)),
        }
    }
}

/// The turn `got` finds in `index`: by its hash, else by its shape (which
/// the index holds only for a cassette that matches by shape).
fn lookup(index: &HashMap<String, usize>, got: &RequestSummary) -> Option<usize> {
    index.get(&got.sha256).copied().or_else(|| {
        got.shape
            .as_ref()
            .and_then(|shape| index.get(&format!("shape:{shape}")).copied())
    })
}

/// Wraps a provider and records its answers to a cassette. See the module
/// docs.
pub struct RecordingProvider<P> {
    inner: P,
    path: PathBuf,
    // A tokio mutex: held across the file write, so writes land in order.
    // Shared by the recorders of one cassette (see `share`).
    state: std::sync::Arc<tokio::sync::Mutex<(Cassette, HashMap<String, usize>)>>,
}

impl<P: ModelProvider> RecordingProvider<P> {
    /// Records `inner`'s answers to `path`. An existing cassette there is
    /// loaded and extended (its answers are reused); otherwise the file is
    /// created at the first answer.
    pub fn open(inner: P, path: impl Into<PathBuf>) -> Result<Self, CassetteError> {
        let path = path.into();
        let cassette = if path.exists() {
            Cassette::load(&path)?
        } else {
            Cassette::new(Some(inner.model().to_owned()))
        };
        let index = cassette.index();
        Ok(Self {
            inner,
            path,
            state: std::sync::Arc::new(tokio::sync::Mutex::new((cassette, index))),
        })
    }

    /// A recorder of `inner` into the same cassette, e.g. for another
    /// role's model: answers land in one file, in the order they came,
    /// and replay finds each by its request.
    pub fn share<Q: ModelProvider>(&self, inner: Q) -> RecordingProvider<Q> {
        RecordingProvider {
            inner,
            path: self.path.clone(),
            state: self.state.clone(),
        }
    }

    /// Where the cassette is written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl<P> std::fmt::Debug for RecordingProvider<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingProvider")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl<P: ModelProvider> ModelProvider for RecordingProvider<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let summary = RequestSummary::of(req);
        {
            let state = self.state.lock().await;
            if let Some(i) = lookup(&state.1, &summary) {
                return Ok(state.0.turns[i].response.clone());
            }
        }
        // Not holding the lock across the model call: concurrent callers
        // (if any) need not wait on each other's answers.
        let response = self.inner.complete(req).await?;
        let mut state = self.state.lock().await;
        if let Some(i) = lookup(&state.1, &summary) {
            // The same request was answered meanwhile; keep one answer.
            return Ok(state.0.turns[i].response.clone());
        }
        let (cassette, index) = &mut *state;
        cassette.turns.push(Turn {
            request: summary,
            response: response.clone(),
        });
        cassette.add_to_index(index, cassette.turns.len() - 1);
        let snapshot = cassette.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || snapshot.save(&path))
            .await
            .map_err(|e| ModelError::Cassette(format!("writing the cassette: {e}")))?
            .map_err(|e| ModelError::Cassette(e.to_string()))?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::model::http::HttpConfig;
    use crate::model::openai::OpenAiProvider;
    use crate::model::testing::{Reply, TestServer};
    use crate::model::types::{ReasoningBlock, StopReason, ToolCall, ToolDef, Usage, WireFormat};

    fn answer(text: &str) -> ModelResponse {
        ModelResponse {
            text: Some(text.into()),
            tool_calls: vec![],
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 3,
                output_tokens: 1,
                ..Usage::default()
            },
            reasoning: vec![],
        }
    }

    fn tool_answer() -> ModelResponse {
        ModelResponse {
            text: None,
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "fs__read".into(),
                arguments: "{\"path\":\"a\"}".into(),
            }],
            stop_reason: StopReason::ToolUse,
            usage: Usage::default(),
            reasoning: vec![],
        }
    }

    fn req0() -> ModelRequest {
        ModelRequest {
            system: "sys".into(),
            messages: vec![Message::User {
                text: "read a".into(),
            }],
            tools: vec![ToolDef {
                name: "fs__read".into(),
                description: "Read".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            }],
            max_tokens: 100,
            temperature: None,
            step: 0,
            agent: String::new(),
        }
    }

    fn req1() -> ModelRequest {
        let mut r = req0();
        r.messages.push(Message::Assistant {
            text: None,
            tool_calls: tool_answer().tool_calls,
            reasoning: vec![],
        });
        r.messages.push(Message::ToolResult {
            call_id: "c1".into(),
            content: "AAA".into(),
            is_error: false,
        });
        r
    }

    fn two_turns() -> Cassette {
        let mut c = Cassette::new(Some("m".into()));
        c.turns.push(Turn {
            request: RequestSummary::of(&req0()),
            response: tool_answer(),
        });
        c.turns.push(Turn {
            request: RequestSummary::of(&req1()),
            response: answer("a says AAA"),
        });
        c
    }

    #[tokio::test]
    async fn plays_back_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        two_turns().save(&path).unwrap();
        let p = ReplayProvider::open(&path).unwrap();
        assert_eq!(p.model(), "m");
        assert_eq!(p.complete(&req0()).await.unwrap(), tool_answer());
        assert_eq!(p.complete(&req1()).await.unwrap(), answer("a says AAA"));
        // max_tokens and temperature are not part of what must match.
        let mut r = req1();
        r.max_tokens = 5;
        r.temperature = Some(0.1);
        assert_eq!(p.complete(&r).await.unwrap(), answer("a says AAA"));
    }

    /// A cassette matching by shape replays past tool output that differs
    /// (timings, a program's output), and still diverges on anything else:
    /// an error where there was a result, another call, other text.
    #[tokio::test]
    async fn a_shape_cassette_tolerates_tool_output_and_nothing_else() {
        let mut cassette = two_turns();
        let varied = |content: &str, is_error: bool| {
            let mut r = req1();
            r.messages[2] = Message::ToolResult {
                call_id: "c1".into(),
                content: content.into(),
                is_error,
            };
            r
        };
        // Exact by default: the varied output diverges.
        let exact = ReplayProvider::new(cassette.clone());
        assert!(exact.complete(&varied("BBB", false)).await.is_err());
        cassette.match_on = Match::Shape;
        // The setting survives a save and a load.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        cassette.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"match\": \"shape\""), "{text}");
        let p = ReplayProvider::open(&path).unwrap();
        assert_eq!(
            p.complete(&varied("BBB, 1.25s", false)).await.unwrap(),
            answer("a says AAA")
        );
        assert!(
            p.complete(&varied("AAA", true)).await.is_err(),
            "error flag"
        );
        let mut other_text = req1();
        other_text.messages[0] = Message::User {
            text: "read b".into(),
        };
        assert!(p.complete(&other_text).await.is_err(), "user text");
        let mut other_call = req1();
        other_call.messages[2] = Message::ToolResult {
            call_id: "c2".into(),
            content: "AAA".into(),
            is_error: false,
        };
        assert!(p.complete(&other_call).await.is_err(), "call id");
    }

    #[tokio::test]
    async fn diverges_loudly() {
        let p = ReplayProvider::new(two_turns());
        let mut r = req1();
        r.messages[2] = Message::ToolResult {
            call_id: "c1".into(),
            content: "BBB".into(),
            is_error: false,
        };
        let e = p.complete(&r).await.unwrap_err();
        assert_eq!(
            e,
            ModelError::Diverged {
                turn: 1,
                expected_excerpt: "tool_result c1: AAA".into(),
                got_excerpt: "tool_result c1: BBB".into(),
            }
        );
        assert!(!e.retryable());
        let shown = e.to_string();
        assert!(shown.contains("turn 1") && shown.contains("AAA") && shown.contains("BBB"));

        // Same last message, different tools: still caught, and said so.
        let mut r = req0();
        r.tools.clear();
        let ModelError::Diverged { got_excerpt, .. } = p.complete(&r).await.unwrap_err() else {
            panic!("expected divergence");
        };
        assert!(got_excerpt.contains("differ"), "{got_excerpt}");
    }

    #[tokio::test]
    async fn exhausted() {
        let p = ReplayProvider::new(two_turns());
        let mut r = req1();
        r.messages.push(Message::Assistant {
            text: Some("a says AAA".into()),
            tool_calls: vec![],
            reasoning: vec![],
        });
        r.messages.push(Message::User {
            text: "and b?".into(),
        });
        let e = p.complete(&r).await.unwrap_err();
        assert_eq!(
            e,
            ModelError::Diverged {
                turn: 2,
                expected_excerpt: "cassette exhausted".into(),
                got_excerpt: "user: and b?".into(),
            }
        );
    }

    #[tokio::test]
    async fn stateless_same_request_same_answer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        two_turns().save(&path).unwrap();
        let p = ReplayProvider::open(&path).unwrap();
        // Out of order, and repeated, as a run resumed after a crash would.
        assert_eq!(p.complete(&req1()).await.unwrap(), answer("a says AAA"));
        assert_eq!(p.complete(&req1()).await.unwrap(), answer("a says AAA"));
        assert_eq!(p.complete(&req0()).await.unwrap(), tool_answer());
        // A second "process".
        let q = ReplayProvider::open(&path).unwrap();
        assert_eq!(q.complete(&req1()).await.unwrap(), answer("a says AAA"));
    }

    #[test]
    fn hash_ignores_map_order_but_not_content() {
        let a = req0();
        let mut b = req0();
        b.tools[0].input_schema =
            serde_json::from_str(r#"{"properties":{"path":{"type":"string"}},"type":"object"}"#)
                .unwrap();
        assert_eq!(RequestSummary::of(&a), RequestSummary::of(&b));
        b.system = "other".into();
        assert_ne!(RequestSummary::of(&a).sha256, RequestSummary::of(&b).sha256);
        let long = Message::User {
            text: "word\n ".repeat(100),
        };
        let e = excerpt(Some(&long));
        assert!(e.chars().count() <= EXCERPT_CHARS + 1 && e.ends_with('…') && !e.contains('\n'));
    }

    #[test]
    fn rejects_other_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, r#"{"version": 2, "turns": []}"#).unwrap();
        assert!(matches!(
            ReplayProvider::open(&path),
            Err(CassetteError::Version { found: 2, .. })
        ));
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(
            ReplayProvider::open(&path),
            Err(CassetteError::Parse { .. })
        ));
    }

    /// Answers by turn and counts its calls.
    struct Fake(AtomicUsize);

    #[async_trait::async_trait]
    impl ModelProvider for Fake {
        fn name(&self) -> &str {
            "fake"
        }
        fn model(&self) -> &str {
            "fake-1"
        }
        async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(if req.messages.len() == 1 {
                tool_answer()
            } else {
                answer("a says AAA")
            })
        }
    }

    #[tokio::test]
    async fn record_then_replay_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.json");
        let rec = RecordingProvider::open(Fake(AtomicUsize::new(0)), &path).unwrap();
        assert_eq!(rec.complete(&req0()).await.unwrap(), tool_answer());
        assert_eq!(rec.complete(&req1()).await.unwrap(), answer("a says AAA"));
        // Re-sent (as after a crash): answered from the cassette.
        assert_eq!(rec.complete(&req1()).await.unwrap(), answer("a says AAA"));
        assert_eq!(rec.inner.0.load(Ordering::SeqCst), 2);
        // Only the cassette in the directory: no temp file left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("rec.json")]);

        let on_disk: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk["version"], 1);
        assert_eq!(on_disk["model"], "fake-1");
        assert_eq!(on_disk["turns"].as_array().unwrap().len(), 2);
        assert_eq!(on_disk["turns"][1]["request"]["turn"], 1);

        let replay = ReplayProvider::open(&path).unwrap();
        assert_eq!(replay.complete(&req0()).await.unwrap(), tool_answer());
        assert_eq!(
            replay.complete(&req1()).await.unwrap(),
            answer("a says AAA")
        );

        // A new recorder on the same file (a resumed run) reuses answers.
        let again = RecordingProvider::open(Fake(AtomicUsize::new(0)), &path).unwrap();
        assert_eq!(again.complete(&req1()).await.unwrap(), answer("a says AAA"));
        assert_eq!(again.inner.0.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn recorders_of_one_cassette_share_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("roles.json");
        let worker = RecordingProvider::open(Fake(AtomicUsize::new(0)), &path).unwrap();
        let judge = worker.share(Fake(AtomicUsize::new(0)));
        assert_eq!(worker.complete(&req0()).await.unwrap(), tool_answer());
        assert_eq!(judge.complete(&req1()).await.unwrap(), answer("a says AAA"));
        // One file holds both roles' turns; each recorder sees the other's.
        let on_disk: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk["turns"].as_array().unwrap().len(), 2);
        assert_eq!(
            worker.complete(&req1()).await.unwrap(),
            answer("a says AAA")
        );
        assert_eq!(worker.inner.0.load(Ordering::SeqCst), 1);
        let replay = ReplayProvider::open(&path).unwrap();
        assert_eq!(replay.complete(&req0()).await.unwrap(), tool_answer());
        assert_eq!(
            replay.complete(&req1()).await.unwrap(),
            answer("a says AAA")
        );
    }

    #[tokio::test]
    async fn records_a_real_provider_over_http() {
        let server = TestServer::start(vec![Reply::ok(json!({
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "from the wire"}}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 3},
        }))])
        .await;
        let mut cfg = HttpConfig::new("gpt-test");
        cfg.base_url = server.url.clone();
        cfg.stream = false;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.json");
        let rec = RecordingProvider::open(OpenAiProvider::new(cfg).unwrap(), &path).unwrap();
        let live = rec.complete(&req0()).await.unwrap();
        assert_eq!(live.text.as_deref(), Some("from the wire"));
        drop(server); // replay needs no server
        let replay = ReplayProvider::open(&path).unwrap();
        assert_eq!(replay.model(), "gpt-test");
        assert_eq!(replay.complete(&req0()).await.unwrap(), live);
    }

    /// `req1`'s digest, computed from its canonical JSON outside this code.
    const PINNED_REQ1_DIGEST: &str =
        "eac40b76bcda04787f843ab396962e948bf39db933b7271700a3acd9444a5c89";

    /// The digest of a request whose answers carry no reasoning is what
    /// it was before reasoning existed (pinned from a build without it), so
    /// old cassettes still match; reasoning, when present, is part of what
    /// the model sees and changes it.
    #[test]
    fn digests_without_reasoning_are_unchanged() {
        let before = RequestSummary::of(&req1()).sha256;
        assert_eq!(before, PINNED_REQ1_DIGEST);
        let mut r = req1();
        let Message::Assistant { reasoning, .. } = &mut r.messages[1] else {
            unreachable!("req1's second message is the assistant's")
        };
        reasoning.push(ReasoningBlock {
            format: WireFormat::Anthropic,
            item: json!({"type": "thinking", "thinking": "t", "signature": "s"}),
        });
        assert_ne!(RequestSummary::of(&r).sha256, before);
    }
}
