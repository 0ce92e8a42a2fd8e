//! The API's handlers: JSON in, JSON out, errors as [`ApiError`].
//!
//! Reads go to the store, the folded state and the memory bank; changes go
//! through the [`Backend`](super::Backend). Bodies are parsed here rather
//! than by axum's extractors so that every refusal has the API's error
//! shape, and unknown fields are refused, not ignored.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::AppState;
use super::backend::{AnswerRequest, StartRequest};
use super::error::{ApiError, ApiResult};
use longhand_brain::core::state::SessionState;
use longhand_brain::{RunError, load_state};
use longhand_session::{BlobRef, ControlKind, SessionId, SessionStatus, SessionSummary};

/// Sessions per page of `GET /api/sessions`: default and most.
pub const SESSIONS_PAGE: (usize, usize) = (50, 200);
/// Events per page of `GET /api/sessions/{id}/events`: default and most.
pub const EVENTS_PAGE: (usize, usize) = (200, 1000);

/// The greatest seq an event can have: the stores keep seqs as signed
/// 64-bit integers (SQLite `INTEGER`, PostgreSQL `BIGINT`). An `after` at
/// or beyond it names a place past the end of every log, where there is
/// nothing to read — and the store is not asked, since it cannot take
/// such a number.
pub const MAX_SEQ: u64 = i64::MAX as u64;

/// The records of `id` after seq `after`, oldest first; none when `after`
/// is at or past [`MAX_SEQ`].
pub(super) async fn read_after(
    state: &AppState,
    id: &SessionId,
    after: u64,
) -> Result<Vec<longhand_session::EventRecord>, longhand_session::StoreError> {
    if after >= MAX_SEQ {
        return Ok(Vec::new());
    }
    state.store.read(id, after + 1).await
}

/// `GET /api/openapi.json`.
pub async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        super::OPENAPI,
    )
        .into_response()
}

/// The query string as pairs, percent-decoded. Repeated keys keep the last.
fn query(raw: Option<String>) -> ApiResult<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let Some(raw) = raw else { return Ok(out) };
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(decode(k)?, decode(v)?);
    }
    Ok(out)
}

fn decode(text: &str) -> ApiResult<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| ApiError::invalid("the query string has a bad %-escape"))?;
                out.push(hex);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| ApiError::invalid("the query string is not UTF-8"))
}

/// A whole number parameter in `min..=max`, or `default` when absent.
fn number(
    params: &BTreeMap<String, String>,
    name: &str,
    default: u64,
    min: u64,
    max: u64,
) -> ApiResult<u64> {
    match params.get(name) {
        None => Ok(default),
        Some(text) => text
            .parse::<u64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "`{name}` must be a whole number from {min} to {max}"
                ))
            }),
    }
}

/// A request body, its refusals in the API's shape: too large (413, at
/// once when `Content-Length` says so), or not all sent within
/// [`BODY_TIMEOUT`](super::BODY_TIMEOUT) (408; the connection is closed,
/// since the rest of the body is still on it).
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > super::MAX_BODY as u64) {
            return Err(too_large());
        }
        match tokio::time::timeout(super::BODY_TIMEOUT, Bytes::from_request(request, state)).await {
            Ok(Ok(bytes)) => Ok(RawBody(bytes)),
            Ok(Err(e)) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(too_large()),
            Ok(Err(e)) => Err(ApiError::new(e.status(), "invalid_request", e.body_text())),
            Err(_) => Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the body did not arrive within {} s; send it whole, at most {} KiB",
                    super::BODY_TIMEOUT.as_secs(),
                    super::MAX_BODY / 1024
                ),
            )),
        }
    }
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the body is larger than {} KiB", super::MAX_BODY / 1024),
    )
}

/// A JSON body; an empty body is `T::default()`.
fn body<T: DeserializeOwned + Default>(RawBody(bytes): &RawBody) -> ApiResult<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::invalid(format!("the body is not the JSON this route takes: {e}")))
}

/// A session id from the path.
pub(super) fn session_id(text: &str) -> ApiResult<SessionId> {
    text.parse::<SessionId>().map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_session_id",
            format!("not a session id: {e}"),
        )
    })
}

fn run_error(error: RunError) -> ApiError {
    match error {
        RunError::Store(e) => ApiError::from_store(e),
        other => ApiError::internal(other),
    }
}

/// A session's summary, 404 `session_not_found` if there is none.
pub(super) async fn summary(state: &AppState, id: &SessionId) -> ApiResult<SessionSummary> {
    state.store.summary(id).await.map_err(|e| match e {
        longhand_session::StoreError::NotFound { .. } => {
            ApiError::not_found("session_not_found", format!("no session {id}"))
        }
        other => ApiError::from_store(other),
    })
}

/// A session as the API shows it: its summary, spend and place in a tree;
/// with `detail`, also its goal, pause, outcome and pending approvals.
fn session_json(summary: &SessionSummary, state: &SessionState, detail: bool) -> Value {
    let mut value = json!({
        "id": summary.id.as_str(),
        "agent": summary.agent_name,
        "status": summary.status.as_str(),
        "created_ms": summary.created_ms,
        "updated_ms": summary.updated_ms,
        "last_seq": summary.last_seq,
        "parent": state.parent,
        "goal": state.goal.as_deref().map(|g| cut_chars(g, LIST_GOAL_CHARS)),
        "awaiting_worker": state.awaiting_worker,
        // A cancel ends a session `failed` in the store; the fold still
        // holds the cancel that ended it (it stands until the end).
        "cancelled": state.error.is_some()
            && state.stop_asked.as_ref().is_some_and(|s| s.cancel),
        "spend": {
            "steps": state.steps,
            "input_tokens": state.input_tokens,
            "output_tokens": state.output_tokens,
            "tool_calls": state.tool_calls,
            "cost_micros": state.cost_micros,
            "answers_without_price": state.cost_unknown,
        },
    });
    if detail && let Some(object) = value.as_object_mut() {
        let pending: Vec<&String> = state.approvals.pending().map(|(id, _)| id).collect();
        for (key, field) in [
            ("goal", json!(state.goal)),
            ("pause", json!(state.pause)),
            ("summary", json!(state.summary)),
            ("summary_blob", json!(state.summary_blob)),
            ("error", json!(state.error)),
            ("children", json!(state.children)),
            ("pending_approvals", json!(pending)),
            ("has_plan", json!(state.plan.is_some())),
            ("limits", limits_json(state)),
        ] {
            object.insert(key.to_owned(), field);
        }
    }
    value
}

/// A goal in the session list is cut to this many characters (the
/// session's own view has it whole).
pub const LIST_GOAL_CHARS: usize = 200;

/// The first `n` characters of `text`, with `…` when it was longer.
fn cut_chars(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The limits in force: the frozen agent's, with the raises on top;
/// `null` when the agent is unreadable.
fn limits_json(state: &SessionState) -> Value {
    let Some(agent) = &state.agent else {
        return Value::Null;
    };
    let mut limits = serde_json::to_value(&agent.get().limits).unwrap_or(Value::Null);
    if let Some(object) = limits.as_object_mut() {
        for (name, value) in &state.raised {
            object.insert(name.clone(), json!(value));
        }
    }
    limits
}

/// `GET /api/sessions?status=&agent=&limit=&cursor=`: newest first;
/// `next` is the cursor of the next page, `null` on the last.
pub async fn list_sessions(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Value>> {
    let params = query(raw)?;
    let (default, most) = SESSIONS_PAGE;
    let limit = number(&params, "limit", default as u64, 1, most as u64)? as usize;
    let status = match params.get("status") {
        None => None,
        Some(text) => Some(SessionStatus::parse(text).ok_or_else(|| {
            ApiError::invalid(format!(
                "`status` must be created, running, paused, finished or failed, not `{text}`"
            ))
        })?),
    };
    let cursor = params.get("cursor").map(|c| session_id(c)).transpose()?;
    let mut all = state.store.list().await?;
    all.retain(|s| {
        status.is_none_or(|st| s.status == st)
            && params.get("agent").is_none_or(|a| &s.agent_name == a)
            && cursor.as_ref().is_none_or(|c| s.id < *c)
    });
    // Ids sort by creation time: newest first is the ids, descending.
    all.sort_by(|a, b| b.id.cmp(&a.id));
    let more = all.len() > limit;
    all.truncate(limit);
    let mut sessions = Vec::with_capacity(all.len());
    for summary in &all {
        let folded = load_state(state.store.as_ref(), &summary.id)
            .await
            .map_err(run_error)?;
        sessions.push(session_json(summary, &folded, false));
    }
    let next = more.then(|| all.last().map(|s| s.id.as_str().to_owned()));
    Ok(Json(json!({"sessions": sessions, "next": next.flatten()})))
}

/// `GET /api/sessions/{id}`.
pub async fn get_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = session_id(&id)?;
    let summary = summary(&state, &id).await?;
    let folded = load_state(state.store.as_ref(), &id)
        .await
        .map_err(run_error)?;
    Ok(Json(session_json(&summary, &folded, true)))
}

/// `GET /api/sessions/{id}/events?after=&limit=`: the events after seq
/// `after` (default 0), oldest first; `next` is the `after` of the next
/// page, `null` at the end of the log.
pub async fn list_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Value>> {
    let id = session_id(&id)?;
    let params = query(raw)?;
    let (default, most) = EVENTS_PAGE;
    let limit = number(&params, "limit", default as u64, 1, most as u64)? as usize;
    let after = number(&params, "after", 0, 0, u64::MAX)?;
    summary(&state, &id).await?;
    let mut records = read_after(&state, &id, after).await?;
    let more = records.len() > limit;
    records.truncate(limit);
    let next = if more {
        records.last().map(|r| r.seq)
    } else {
        None
    };
    Ok(Json(json!({"events": records, "next": next})))
}

/// `GET /api/sessions/{id}/plan`: as `longhand plan --json` prints it.
pub async fn get_plan(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = session_id(&id)?;
    summary(&state, &id).await?;
    Ok(Json(state.backend.plan(&id).await?))
}

/// Every blob reference in `value`: an object with a well-formed
/// `digest` and a `bytes` count, at any depth. New event kinds are covered
/// without a list to keep up to date.
fn blob_refs(value: &Value, out: &mut Vec<BlobRef>) {
    match value {
        Value::Object(map) => {
            if let (Some(Value::String(digest)), Some(Value::Number(bytes))) =
                (map.get("digest"), map.get("bytes"))
                && let Some(bytes) = bytes.as_u64()
            {
                let blob = BlobRef {
                    digest: digest.clone(),
                    bytes,
                };
                if blob.is_well_formed() {
                    out.push(blob);
                }
            }
            for v in map.values() {
                blob_refs(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| blob_refs(v, out)),
        _ => {}
    }
}

/// `GET /api/sessions/{id}/blobs/{digest}`: the bytes of a blob this
/// session's log refers to (a model request or response, a tool's input
/// or result, a briefing, a handoff). A blob of another session is not
/// found here, even if the store has it: the route shows a session, not
/// the store.
///
/// Sent as `application/octet-stream`, as an attachment, with `sandbox` in
/// its CSP: model and tool output opened directly cannot run as a page.
pub async fn get_blob(
    State(state): State<AppState>,
    Path((id, digest)): Path<(String, String)>,
) -> ApiResult<Response> {
    let id = session_id(&id)?;
    summary(&state, &id).await?;
    let missing = || {
        ApiError::not_found(
            "blob_not_found",
            format!("session {id} refers to no blob {digest}"),
        )
    };
    let records = state.store.read(&id, 1).await?;
    let mut refs = Vec::new();
    for record in &records {
        let value = serde_json::to_value(&record.event).map_err(ApiError::internal)?;
        blob_refs(&value, &mut refs);
        if refs.iter().any(|r| r.digest == digest) {
            break;
        }
    }
    let blob = refs
        .into_iter()
        .find(|r| r.digest == digest)
        .ok_or_else(missing)?;
    let bytes = state.store.get_blob(&blob).await?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("sandbox; default-src 'none'"),
            ),
        ],
        bytes,
    )
        .into_response())
}

/// `GET /api/sessions/{id}/previews`: at most this many blobs at once.
pub const PREVIEW_BLOBS: usize = 100;
/// A preview's characters: default and most.
pub const PREVIEW_CHARS: (u64, u64) = (2000, 16 * 1024);

/// Nesting a preview keeps; deeper values are a `…`.
const PREVIEW_DEPTH: usize = 32;

/// The length in characters of every string and key in `value`.
fn text_lengths(value: &Value, depth: usize, out: &mut Vec<usize>) {
    if depth > PREVIEW_DEPTH {
        return;
    }
    match value {
        Value::String(text) => out.push(text.chars().count()),
        Value::Array(items) => items.iter().for_each(|v| text_lengths(v, depth + 1, out)),
        Value::Object(map) => {
            for (key, v) in map {
                out.push(key.chars().count());
                text_lengths(v, depth + 1, out);
            }
        }
        _ => {}
    }
}

/// The longest a text may stay so that all of them fit `budget` together:
/// the short ones whole, the long ones sharing what is left equally (a
/// path beside a 1 MiB `content` is kept whole, whatever the key order).
fn fair_cap(mut lengths: Vec<usize>, budget: usize) -> usize {
    lengths.sort_unstable();
    let mut left = budget;
    let n = lengths.len();
    for (i, len) in lengths.iter().enumerate() {
        let share = left / (n - i);
        if *len > share {
            return share;
        }
        left -= len;
    }
    usize::MAX
}

/// `value` with every string and key cut to `cap` characters (a cut one
/// ends with `…`), and at most `room / 4` values and fields in all:
/// those past it are left out, with a marker saying how many; nothing
/// deeper than [`PREVIEW_DEPTH`]. Sets `cut` when anything was left out.
fn shrink(value: &Value, cap: usize, room: &mut usize, depth: usize, cut: &mut bool) -> Value {
    const ITEM: usize = 4;
    fn text(t: &str, cap: usize, cut: &mut bool) -> String {
        match t.char_indices().nth(cap) {
            Some(_) => {
                *cut = true;
                cut_chars(t, cap)
            }
            None => t.to_owned(),
        }
    }
    if depth > PREVIEW_DEPTH {
        *cut = true;
        return Value::String("…".into());
    }
    *room = room.saturating_sub(ITEM);
    match value {
        Value::String(t) => Value::String(text(t, cap, cut)),
        Value::Array(items) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                if *room == 0 {
                    *cut = true;
                    out.push(Value::String(format!("… {} more", items.len() - i)));
                    break;
                }
                out.push(shrink(item, cap, room, depth + 1, cut));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (i, (key, item)) in map.iter().enumerate() {
                if *room == 0 {
                    *cut = true;
                    out.insert("…".into(), json!(format!("{} more", map.len() - i)));
                    break;
                }
                let key = text(key, cap, cut);
                out.insert(key, shrink(item, cap, room, depth + 1, cut));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// A blob's preview: its size, and its JSON shrunk to `max` characters of
/// text (`json`), or, when it is not JSON, its first `max` characters as
/// text, invalid UTF-8 replaced (`text`).
fn preview(bytes: &[u8], max: usize) -> Value {
    let mut cut = false;
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => {
            let mut lengths = Vec::new();
            text_lengths(&value, 0, &mut lengths);
            let cap = fair_cap(lengths, max);
            let mut room = max;
            let json = shrink(&value, cap, &mut room, 0, &mut cut);
            json!({"bytes": bytes.len(), "cut": cut, "json": json})
        }
        Err(_) => {
            // Enough bytes for `max` characters of any width, then cut.
            let head = &bytes[..bytes.len().min(max.saturating_mul(4))];
            let lossy = String::from_utf8_lossy(head);
            let text = cut_chars(&lossy, max);
            let cut = text.len() < lossy.len() || head.len() < bytes.len();
            json!({"bytes": bytes.len(), "cut": cut, "text": text})
        }
    }
}

/// `GET /api/sessions/{id}/previews?blobs=D1,D2&max=`: short views of
/// blobs this session's log refers to, by digest, for a page that shows a
/// turn's words and arguments without downloading them whole. Each is
/// `{"bytes", "cut", "json"}` (the blob's JSON with at most `max`
/// characters of text, cuts ending in `…`) or `{"bytes", "cut", "text"}`;
/// a digest the log does not name is left out. At most
/// [`PREVIEW_BLOBS`] digests; `max` defaults to 2000 characters, at most
/// 16 Ki. The whole blob stays at `…/blobs/{digest}`.
pub async fn previews(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Value>> {
    let id = session_id(&id)?;
    let params = query(raw)?;
    let (default, most) = PREVIEW_CHARS;
    let max = number(&params, "max", default, 1, most)? as usize;
    let wanted: Vec<&str> = params
        .get("blobs")
        .map(|b| b.split(',').filter(|d| !d.is_empty()).collect())
        .unwrap_or_default();
    if wanted.is_empty() || wanted.len() > PREVIEW_BLOBS {
        return Err(ApiError::invalid(format!(
            "`blobs` must name 1 to {PREVIEW_BLOBS} digests, comma-separated"
        )));
    }
    summary(&state, &id).await?;
    let records = state.store.read(&id, 1).await?;
    let mut refs = Vec::new();
    for record in &records {
        let value = serde_json::to_value(&record.event).map_err(ApiError::internal)?;
        blob_refs(&value, &mut refs);
    }
    let mut out = serde_json::Map::new();
    for digest in wanted {
        if out.contains_key(digest) {
            continue;
        }
        let Some(blob) = refs.iter().find(|r| r.digest == digest) else {
            continue;
        };
        let bytes = state.store.get_blob(blob).await?;
        out.insert(digest.to_owned(), preview(&bytes, max));
    }
    Ok(Json(json!({"previews": out})))
}

/// `GET /api/agents`: the agents `POST /api/sessions` may start — each
/// agent directory under the server's `--agents` directories, with its
/// name, goal and whether it is planned; one whose file does not load is
/// listed with `problem` (what loading it said) so the page can say why.
pub async fn list_agents(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let roots = state.backend.agent_roots();
    let found = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for root in &roots {
            for dir in super::hooks::agent_dirs(root) {
                let path = dir.to_string_lossy().into_owned();
                out.push(
                    match longhand_brain::agent::config::AgentConfig::load(&dir) {
                        Ok((config, _)) => json!({
                            "path": path,
                            "name": config.name,
                            "goal": config.goal,
                            "planned": config.plan.is_some(),
                        }),
                        Err(e) => json!({
                            "path": path,
                            "name": dir.file_name().map(|n| n.to_string_lossy().into_owned()),
                            "problem": e.to_string(),
                        }),
                    },
                );
            }
        }
        out
    })
    .await
    .map_err(ApiError::internal)?;
    Ok(Json(json!({"agents": found})))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    agent: Option<String>,
    goal: Option<String>,
    #[serde(default)]
    priority: i64,
}

/// `POST /api/sessions` `{"agent", "goal"?, "priority"?}`: 201
/// `{"session"}`, the session left for a worker.
pub async fn start_session(State(state): State<AppState>, raw: RawBody) -> ApiResult<Response> {
    let body: StartBody = body(&raw)?;
    let agent = body
        .agent
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("`agent` is required: the agent's directory or file"))?;
    if body.goal.as_deref().is_some_and(|g| g.trim().is_empty()) {
        return Err(ApiError::invalid(
            "`goal` is empty; leave it out for the agent's own",
        ));
    }
    let session = state
        .backend
        .start(StartRequest {
            agent: agent.into(),
            goal: body.goal,
            priority: body.priority,
        })
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"session": session.as_str()})),
    )
        .into_response())
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonBody {
    reason: Option<String>,
    #[serde(default)]
    now: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendBody {
    text: Option<String>,
}

async fn post_control(
    state: &AppState,
    id: &str,
    kind: ControlKind,
    text: Option<String>,
) -> ApiResult<Response> {
    let id = session_id(id)?;
    let status = summary(state, &id).await?.status;
    match (kind, status) {
        (_, SessionStatus::Finished | SessionStatus::Failed) => {
            return Err(ApiError::conflict(
                "session_ended",
                format!("session {id} has already {status}; there is nothing to steer"),
            ));
        }
        (ControlKind::Pause, SessionStatus::Paused) => {
            return Err(ApiError::conflict(
                "already_paused",
                format!("session {id} is already paused"),
            ));
        }
        _ => {}
    }
    let control = state.backend.control(&id, kind, text).await?;
    let mut value = serde_json::to_value(&control).map_err(ApiError::internal)?;
    if let Some(object) = value.as_object_mut() {
        object.insert("session".into(), id.as_str().into());
    }
    Ok((StatusCode::ACCEPTED, Json(value)).into_response())
}

/// `POST /api/sessions/{id}/pause` `{"reason"?}`: 202, the control posted.
pub async fn pause(
    State(state): State<AppState>,
    Path(id): Path<String>,
    raw: RawBody,
) -> ApiResult<Response> {
    let body: ReasonBody = body(&raw)?;
    if body.now {
        return Err(ApiError::invalid("`now` is for cancel"));
    }
    post_control(&state, &id, ControlKind::Pause, body.reason).await
}

/// `POST /api/sessions/{id}/cancel` `{"reason"?, "now"?}`: 202.
pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    raw: RawBody,
) -> ApiResult<Response> {
    let body: ReasonBody = body(&raw)?;
    let kind = ControlKind::Cancel { now: body.now };
    post_control(&state, &id, kind, body.reason).await
}

/// `POST /api/sessions/{id}/send` `{"text"}`: 202.
pub async fn send(
    State(state): State<AppState>,
    Path(id): Path<String>,
    raw: RawBody,
) -> ApiResult<Response> {
    let body: SendBody = body(&raw)?;
    let text = body
        .text
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("`text` is required and must not be blank"))?;
    post_control(&state, &id, ControlKind::Send, Some(text)).await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResumeBody {
    #[serde(default)]
    raise: BTreeMap<String, u64>,
}

/// `POST /api/sessions/{id}/resume` `{"raise"?: {"max_steps": 100}}`:
/// 202 `{"session", "status"}`, left for a worker.
pub async fn resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
    raw: RawBody,
) -> ApiResult<Response> {
    let body: ResumeBody = body(&raw)?;
    let id = session_id(&id)?;
    if resumable(&state, &id).await? == SessionStatus::Paused {
        still_stopped(&state, &id, &body.raise).await?;
    }
    let after = state.backend.resume(&id, body.raise).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"session": id.as_str(), "status": after.as_str()})),
    )
        .into_response())
}

/// 409 `limit_still_reached` when resuming `id` with `raise` would pause it
/// again at once (a limit or breaker still holds once the raises are on
/// top): the client is told which limit and how to raise it, instead of a
/// 202 followed by the same pause.
async fn still_stopped(
    state: &AppState,
    id: &SessionId,
    raise: &BTreeMap<String, u64>,
) -> ApiResult<()> {
    let folded = load_state(state.store.as_ref(), id)
        .await
        .map_err(run_error)?;
    let Some(agent) = &folded.agent else {
        return Ok(());
    };
    // A cancel waiting in the inbox is read first at the resume, and ends
    // the session whatever its limits: that resume is how a paused
    // session's cancel takes effect.
    let waiting = state
        .store
        .controls(id, folded.last_control)
        .await
        .map_err(ApiError::from_store)?;
    if waiting
        .iter()
        .any(|c| matches!(c.kind, ControlKind::Cancel { .. }))
    {
        return Ok(());
    }
    let limits = &agent.get().limits;
    match longhand_brain::core::decide::limit_after_resume(&folded, limits, raise) {
        None => Ok(()),
        Some(reason) => {
            let how = match &reason.limit {
                Some(name) => format!(
                    "; raise it: POST {{\"raise\": {{\"{name}\": <higher>}}}} (the CLI: \
                     longhand resume {id} --raise {name}=<higher>)"
                ),
                None => String::new(),
            };
            Err(ApiError::conflict(
                "limit_still_reached",
                format!(
                    "resuming {id} as asked would pause it again at once: {}{how}",
                    reason.detail
                ),
            ))
        }
    }
}

/// The status of a session that may be resumed (paused, or created and
/// never run); 409 otherwise.
async fn resumable(state: &AppState, id: &SessionId) -> ApiResult<SessionStatus> {
    let status = summary(state, id).await?.status;
    match status {
        SessionStatus::Paused | SessionStatus::Created => Ok(status),
        SessionStatus::Finished | SessionStatus::Failed => Err(ApiError::conflict(
            "session_ended",
            format!("session {id} has already {status}"),
        )),
        SessionStatus::Running => Err(ApiError::conflict(
            "not_paused",
            format!("session {id} is running; a worker runs it (pause it first to resume it)"),
        )),
    }
}

/// `GET /api/approvals?max=&limit=&session=`: the pending requests,
/// across sessions or of one `session`, each with its session's agent and
/// goal (cut to [`LIST_GOAL_CHARS`]) and its arguments bounded as
/// `…/previews` bounds a blob: `input` holds at most `max` characters of
/// text (default 2000, at most 16 Ki; long strings cut with `…`),
/// `input_bytes` and `input_cut` say how much there is and whether it was
/// cut, `input_blob` is where the whole is (`…/blobs/{digest}`), and
/// `input_hidden` counts the invisible or reordering characters in the
/// *whole* input, so a warning does not depend on what the preview kept.
/// At most `limit` requests are sent (default [`APPROVALS_SHOWN`].0, at
/// most [`APPROVALS_SHOWN`].1; 0 sends only the count), the oldest
/// sessions' first; `total` counts them all. A page polls this every few
/// seconds: neither a 1 MiB argument nor a thousand waiting requests may
/// travel each time — the response is at most `limit × max` characters
/// of arguments.
pub async fn list_approvals(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Value>> {
    let params = query(raw)?;
    let (default, most) = PREVIEW_CHARS;
    let max = number(&params, "max", default, 1, most)? as usize;
    let (default, most) = APPROVALS_SHOWN;
    let limit = number(&params, "limit", default, 0, most)? as usize;
    let only = params.get("session").map(|s| session_id(s)).transpose()?;
    let mut pending = longhand_brain::control::approvals::pending_everywhere(state.store.as_ref())
        .await
        .map_err(run_error)?;
    if let Some(only) = &only {
        pending.retain(|(session, _, _)| session == only);
    }
    let total = pending.len();
    pending.truncate(limit);
    let mut sessions: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    let mut out = Vec::with_capacity(pending.len());
    for (session, request, a) in pending {
        if !sessions.contains_key(session.as_str()) {
            let agent = summary(&state, &session).await?.agent_name;
            let goal = load_state(state.store.as_ref(), &session)
                .await
                .map_err(run_error)?
                .goal
                .map(|g| cut_chars(&g, LIST_GOAL_CHARS));
            sessions.insert(session.as_str().to_owned(), (agent, goal));
        }
        let (agent, goal) = sessions.get(session.as_str()).cloned().unwrap_or_default();
        let bytes = state
            .store
            .get_blob(&a.input)
            .await
            .map_err(ApiError::from_store)?;
        let shown = preview(&bytes, max);
        out.push(json!({
            "session": session.as_str(),
            "agent": agent,
            "goal": goal,
            "request": request,
            "step": a.step,
            "call_id": a.call_id,
            "tool": a.tool,
            "effect": a.effect,
            "fingerprint": a.fingerprint,
            "input": shown.get("json").or_else(|| shown.get("text")).cloned().unwrap_or(Value::Null),
            "input_bytes": bytes.len(),
            "input_cut": shown["cut"],
            "input_blob": a.input,
            "input_hidden": hidden_chars(&bytes),
        }));
    }
    Ok(Json(json!({"approvals": out, "total": total})))
}

/// Requests `GET /api/approvals` sends: default and most.
pub const APPROVALS_SHOWN: (u64, u64) = (20, 200);

/// How many characters of the CLI's hidden table (bidi controls,
/// zero-width characters, controls) a blob's text holds: in its JSON's
/// strings and keys (where `\u202e` escapes are decoded), or in its text.
fn hidden_chars(bytes: &[u8]) -> usize {
    fn walk(value: &Value, depth: usize) -> usize {
        let count = |t: &str| {
            t.chars()
                .filter(|c| crate::cli::term::is_hidden(*c))
                .count()
        };
        match value {
            Value::String(t) => count(t),
            Value::Array(items) if depth < 64 => items.iter().map(|v| walk(v, depth + 1)).sum(),
            Value::Object(fields) if depth < 64 => fields
                .iter()
                .map(|(k, v)| count(k) + walk(v, depth + 1))
                .sum(),
            _ => 0,
        }
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => walk(&value, 0),
        Err(_) => String::from_utf8_lossy(bytes)
            .chars()
            .filter(|c| crate::cli::term::is_hidden(*c))
            .count(),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    scope: Option<String>,
    expires: Option<String>,
    #[serde(default)]
    resume: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DenyBody {
    reason: Option<String>,
    #[serde(default)]
    resume: bool,
}

async fn answer(
    state: &AppState,
    id: &str,
    request: &str,
    answer: AnswerRequest,
    resume: bool,
) -> ApiResult<Json<Value>> {
    let id = session_id(id)?;
    summary(state, &id).await?;
    let root = state.backend.answer(&id, request, answer).await?;
    let mut out = json!({"session": id.as_str(), "request": request, "resume": root});
    if resume {
        let resumed = match session_id(&root) {
            Ok(root) => match resumable(state, &root).await {
                Ok(_) => state.backend.resume(&root, BTreeMap::new()).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        if let Some(object) = out.as_object_mut() {
            match resumed {
                Ok(status) => {
                    object.insert("resumed".into(), json!(status.as_str()));
                }
                // The answer is recorded either way; say why it did not
                // carry on, in the error shape.
                Err(e) => {
                    object.insert("resumed".into(), Value::Null);
                    object.insert(
                        "resume_error".into(),
                        json!({"code": e.code, "message": e.message}),
                    );
                }
            }
        }
    }
    Ok(Json(out))
}

/// `POST /api/sessions/{id}/approvals/{request}/approve`
/// `{"scope"?: "once"|"session", "expires"?: "30m", "resume"?: bool}`.
pub async fn approve(
    State(state): State<AppState>,
    Path((id, request)): Path<(String, String)>,
    raw: RawBody,
) -> ApiResult<Json<Value>> {
    let body: ApproveBody = body(&raw)?;
    let scope = body.scope.unwrap_or_else(|| "once".to_owned());
    let request_answer = AnswerRequest::Approve {
        scope,
        expires: body.expires,
    };
    answer(&state, &id, &request, request_answer, body.resume).await
}

/// `POST /api/sessions/{id}/approvals/{request}/deny`
/// `{"reason", "resume"?: bool}`.
pub async fn deny(
    State(state): State<AppState>,
    Path((id, request)): Path<(String, String)>,
    raw: RawBody,
) -> ApiResult<Json<Value>> {
    let body: DenyBody = body(&raw)?;
    let reason = body
        .reason
        .filter(|r| !r.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("`reason` is required: the model is told why"))?;
    answer(
        &state,
        &id,
        &request,
        AnswerRequest::Deny { reason },
        body.resume,
    )
    .await
}

/// The memory bank, opened for one request (off the async threads: it is
/// SQLite).
async fn with_bank<T: Send + 'static>(
    state: &AppState,
    work: impl FnOnce(
        &longhand_brain::memory::MemoryBank,
    ) -> Result<T, longhand_brain::memory::MemoryError>
    + Send
    + 'static,
) -> ApiResult<T> {
    let path = state.memory_db.clone();
    tokio::task::spawn_blocking(move || {
        let bank = longhand_brain::memory::MemoryBank::open(&path)?;
        work(&bank)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|e| match e {
        longhand_brain::memory::MemoryError::Invalid { .. } => ApiError::invalid(e.to_string()),
        other => ApiError::internal(other),
    })
}

/// `GET /api/memory?q=&scope=&limit=`: with `q`, current entries matching
/// any of its words, best first; without, the newest current entries.
pub async fn search_memory(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Value>> {
    let params = query(raw)?;
    let limit = number(
        &params,
        "limit",
        50,
        1,
        longhand_brain::memory::MAX_LIMIT as u64,
    )? as usize;
    let q = params.get("q").cloned().filter(|q| !q.trim().is_empty());
    if q.as_ref()
        .is_some_and(|q| !q.chars().any(char::is_alphanumeric))
    {
        return Err(ApiError::invalid("`q` has no word to search for"));
    }
    let scope = params.get("scope").cloned().filter(|s| !s.is_empty());
    let found = with_bank(&state, move |bank| {
        let scopes = match scope {
            Some(scope) => {
                longhand_brain::memory::validate_scope(&scope)?;
                vec![scope]
            }
            None => bank.scopes()?,
        };
        match q {
            Some(q) => bank.search(&q, &scopes, limit),
            None => bank.list(&scopes, limit),
        }
    })
    .await?;
    Ok(Json(json!({"memories": found})))
}

/// `GET /api/memory/{id}`: one entry, superseded and forgotten ones too.
pub async fn get_memory(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let wanted = id.clone();
    let found = with_bank(&state, move |bank| bank.get(&wanted)).await?;
    let memory = found
        .ok_or_else(|| ApiError::not_found("memory_not_found", format!("no memory has id {id}")))?;
    Ok(Json(json!(memory)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_and_numbers_are_bounded() {
        let q = query(Some("q=a+b%21&limit=5&empty".into())).unwrap();
        assert_eq!(q["q"], "a b!");
        assert_eq!(q["empty"], "");
        assert_eq!(number(&q, "limit", 1, 1, 10).unwrap(), 5);
        assert!(number(&q, "limit", 1, 6, 10).is_err());
        assert!(number(&q, "q", 1, 1, 10).is_err());
        assert_eq!(number(&q, "absent", 7, 1, 10).unwrap(), 7);
        assert!(query(Some("a=%zz".into())).is_err());
        assert!(query(Some("a=%ff".into())).is_err());
    }

    #[test]
    fn previews_are_bounded_and_say_so() {
        let big = "x".repeat(1 << 20);
        let v = preview(
            json!({"path": "/w/a", "content": big, "n": [1, 2, 3]})
                .to_string()
                .as_bytes(),
            100,
        );
        assert_eq!(v["cut"], true);
        let shown = v["json"].to_string();
        assert!(shown.len() < 300, "{shown}");
        assert!(v["json"]["content"].as_str().unwrap().ends_with('…'));
        assert_eq!(v["json"]["path"], "/w/a");
        let small = preview(br#"{"a":"b"}"#, 100);
        assert_eq!(small["cut"], false);
        assert_eq!(small["json"]["a"], "b");
        let many = preview(json!(vec![1; 10_000]).to_string().as_bytes(), 40);
        assert!(many["json"].as_array().unwrap().len() < 20);
        // Short texts stay whole beside a long one, whatever the order.
        let mixed = preview(
            json!({"a": "x".repeat(5000), "b": "short", "c": "y".repeat(5000)})
                .to_string()
                .as_bytes(),
            1000,
        );
        assert_eq!(mixed["json"]["b"], "short");
        let a = mixed["json"]["a"].as_str().unwrap().chars().count();
        let c = mixed["json"]["c"].as_str().unwrap().chars().count();
        assert!(a == c && a > 400 && a < 500, "{a} {c}");
        assert_eq!(fair_cap(vec![1, 2, 100], 50), 47);
        assert_eq!(fair_cap(vec![1, 2], 50), usize::MAX);
        let text = preview("héllo\u{1b}[31m world".as_bytes(), 3);
        assert_eq!(text["text"], "hél…");
        assert_eq!(text["cut"], true);
        assert_eq!(cut_chars("abc", 3), "abc");
        assert_eq!(cut_chars("abcd", 3), "abc…");
    }

    #[test]
    fn blob_refs_are_found_at_any_depth() {
        let a = BlobRef::of(b"a");
        let b = BlobRef::of(b"b");
        let v = json!({"x": a, "y": [{"z": b}], "fake": {"digest": "sha256:zz", "bytes": 1}});
        let mut out = Vec::new();
        blob_refs(&v, &mut out);
        assert_eq!(out.len(), 2);
        assert!(out.contains(&a) && out.contains(&b));
    }
}
