//! OpenTelemetry traces, following the GenAI semantic conventions.
//!
//! When `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is set, every
//! run of a session in this process becomes spans exported over OTLP/HTTP
//! with the JSON encoding:
//!
//! - `invoke_agent <agent>`: one run of a session in this process, from
//!   the start of the run to its end (the brain's [`longhand_brain::watch`]);
//! - `chat <model>`: one model request attempt, `model_requested` to
//!   `model_responded` (or `model_failed`), with token usage;
//! - `execute_tool <tool>`: one tool call, `tool_started` to
//!   `tool_finished` (or `tool_in_doubt`).
//!
//! Spans are derived from the events the runner appended, not from
//! instrumentation scattered through the loop: what a trace shows is what
//! the log says happened, with the store's times. A session's trace id is
//! its ULID, so every process that ever ran it (resumes, take-overs, other
//! workers) adds to one trace.
//!
//! Nothing a model or a tool said is exported: no prompts, answers, tool
//! inputs or outputs (the conventions make content opt-in; here it is not
//! offered, since a collector is one more place a secret could end up).
//! Export never slows or stops a run: spans go to a bounded queue (full:
//! dropped and counted) that a background task sends in batches; a
//! collector that is down costs a warning.
//!
//! Only `http/json` is spoken. A protocol setting asking for another, or
//! an endpoint that is not an http(s) URL, is refused when the process
//! starts, like any other bad configuration.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use longhand_brain::watch::Watch;
use longhand_session::{Event, EventRecord, SessionId};

/// Spans waiting to be sent, at most; more are dropped (and counted).
#[cfg(feature = "otel")]
const QUEUE: usize = 8192;
/// Spans per export request, at most.
#[cfg(feature = "otel")]
const BATCH: usize = 512;
/// How long spans wait for a batch to fill before being sent anyway.
#[cfg(feature = "otel")]
const LINGER: Duration = Duration::from_millis(500);
/// How long one export request may take.
#[cfg(feature = "otel")]
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// A telemetry setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry: {0}")]
pub struct TelemetryError(String);

/// Where and how spans are exported, read from the standard variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportConfig {
    /// The full traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`).
    pub headers: Vec<(String, String)>,
    /// `service.name` (`OTEL_SERVICE_NAME`, default `longhand`).
    pub service: String,
}

impl ExportConfig {
    /// The export settings from `var`, `None` when no endpoint is set or
    /// the SDK is disabled (`OTEL_SDK_DISABLED=true`,
    /// `OTEL_TRACES_EXPORTER=none`).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, TelemetryError> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none")
        {
            return Ok(None);
        }
        let endpoint = match (
            set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            set("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(full), _) => full.trim().to_owned(),
            (None, Some(base)) => format!("{}/v1/traces", base.trim().trim_end_matches('/')),
            (None, None) => return Ok(None),
        };
        let url = reqwest::Url::parse(&endpoint).map_err(|e| {
            TelemetryError(format!(
                "the OTLP endpoint `{endpoint}` is not a URL ({e}); set OTEL_EXPORTER_OTLP_ENDPOINT to e.g. http://127.0.0.1:4318"
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(TelemetryError(format!(
                "the OTLP endpoint `{endpoint}` is not an http(s) URL with a host; set OTEL_EXPORTER_OTLP_ENDPOINT to e.g. http://127.0.0.1:4318"
            )));
        }
        for name in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = set(name) {
                if protocol.trim() != "http/json" {
                    return Err(TelemetryError(format!(
                        "{name}={protocol}: Longhand exports OTLP over http/json only; set it to http/json or unset it"
                    )));
                }
                break;
            }
        }
        let mut headers = Vec::new();
        for pair in set("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| set("OTEL_EXPORTER_OTLP_HEADERS"))
            .unwrap_or_default()
            .split(',')
            .filter(|p| !p.trim().is_empty())
        {
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                TelemetryError(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: `{}` is not key=value",
                    pair.split_once('=').map_or(pair, |(k, _)| k).trim()
                ))
            })?;
            let (key, value) = (key.trim(), percent_decode(value.trim()));
            if http::HeaderName::from_bytes(key.as_bytes()).is_err()
                || http::HeaderValue::from_str(&value).is_err()
            {
                return Err(TelemetryError(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: the header `{key}` is not a valid HTTP header"
                )));
            }
            headers.push((key.to_owned(), value));
        }
        Ok(Some(Self {
            endpoint,
            headers,
            service: set("OTEL_SERVICE_NAME").unwrap_or_else(|| "longhand".to_owned()),
        }))
    }
}

/// `%XX` escapes decoded (the headers variable is W3C-baggage style).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The process's exporter, when telemetry is on.
static GLOBAL: OnceLock<Telemetry> = OnceLock::new();

/// Start exporting with the settings of the environment; nothing when no
/// endpoint is set. Call once, inside the runtime, before any run.
pub fn init_from_env() -> Result<(), TelemetryError> {
    match ExportConfig::from_vars(|name| std::env::var(name).ok())? {
        Some(config) => init(config),
        None => Ok(()),
    }
}

/// Start exporting to `config`: refused in a build without the exporter
/// (an endpoint was set; ignoring it would lose what the operator asked for).
#[cfg(not(feature = "otel"))]
pub fn init(config: ExportConfig) -> Result<(), TelemetryError> {
    Err(TelemetryError(format!(
        "an endpoint is set ({}), but this longhand was built without the exporter \
         (cargo feature `otel`): unset OTEL_EXPORTER_OTLP_ENDPOINT, or build with \
         `cargo build --release` (all features)",
        config.endpoint
    )))
}

/// Start exporting to `config`. A second call is refused.
#[cfg(feature = "otel")]
pub fn init(config: ExportConfig) -> Result<(), TelemetryError> {
    let client = longhand_brain::http_client::client()
        .map_err(|e| TelemetryError(format!("building the exporter's HTTP client: {e}")))?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let telemetry = Telemetry {
        tx,
        open: Mutex::new(Open::default()),
        dropped: AtomicU64::new(0),
    };
    GLOBAL
        .set(telemetry)
        .map_err(|_| TelemetryError("already started".to_owned()))?;
    if longhand_brain::watch::install(Box::new(Exporter)).is_err() {
        return Err(TelemetryError(
            "another watch of runs is installed in this process".to_owned(),
        ));
    }
    tokio::spawn(export(client, config, rx));
    Ok(())
}

/// Send every span recorded so far, waiting at most `timeout`. Call before
/// the process exits.
pub async fn shutdown(timeout: Duration) {
    let Some(t) = GLOBAL.get() else {
        return;
    };
    let (done, wait) = oneshot::channel();
    if t.tx.send(Msg::Flush(done)).await.is_ok() {
        let _ = tokio::time::timeout(timeout, wait).await;
    }
    let dropped = t.dropped.load(Ordering::Relaxed);
    if dropped > 0 {
        tracing::warn!("OpenTelemetry: {dropped} spans were dropped (the export queue was full)");
    }
}

#[cfg_attr(
    not(feature = "otel"),
    allow(
        dead_code,
        reason = "read by the exporter, which this build leaves out"
    )
)]
enum Msg {
    Span(Value),
    Flush(oneshot::Sender<()>),
}

struct Telemetry {
    tx: mpsc::Sender<Msg>,
    open: Mutex<Open>,
    dropped: AtomicU64,
}

/// Spans begun and not yet ended, by what ends them.
#[derive(Default)]
struct Open {
    runs: HashMap<SessionId, Begun>,
    chats: HashMap<(SessionId, u64), Begun>,
    tools: HashMap<(SessionId, String), Begun>,
}

struct Begun {
    span_id: String,
    start_ns: u64,
    name: String,
    kind: u8,
    attributes: Vec<Value>,
}

const INTERNAL: u8 = 1;
const CLIENT: u8 = 3;

impl Telemetry {
    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn emit(
        &self,
        session: &SessionId,
        parent: Option<&str>,
        begun: Begun,
        end_ns: u64,
        error: Option<(&str, String)>,
    ) {
        let mut attributes = begun.attributes;
        let status = match &error {
            Some((kind, message)) => {
                attributes.push(attr("error.type", kind));
                json!({"code": 2, "message": message})
            }
            None => json!({"code": 1}),
        };
        let mut span = json!({
            "traceId": trace_id(session),
            "spanId": begun.span_id,
            "name": begun.name,
            "kind": begun.kind,
            "startTimeUnixNano": begun.start_ns.to_string(),
            "endTimeUnixNano": end_ns.max(begun.start_ns).to_string(),
            "attributes": attributes,
            "status": status,
        });
        if let Some(parent) = parent {
            span["parentSpanId"] = json!(parent);
        }
        if self.tx.try_send(Msg::Span(span)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The exporter as the brain's [`Watch`]: installed by [`init`], it turns
/// each run and each committed event into spans.
struct Exporter;

impl Watch for Exporter {
    fn run_started(&self, session: &SessionId, agent: &str, parent: Option<&str>) {
        begin_run(session, agent, parent);
    }

    fn event(&self, session: &SessionId, record: &EventRecord) {
        observe(session, record);
    }

    fn run_ended(&self, session: &SessionId, status: &str, error: Option<String>) {
        end_run(session, status, error);
    }
}

/// Begin the `invoke_agent` span of a run of `session` (of `agent`, a
/// child of `parent` when it is one).
fn begin_run(session: &SessionId, agent: &str, parent: Option<&str>) {
    let Some(t) = GLOBAL.get() else {
        return;
    };
    let mut attributes = vec![
        attr("gen_ai.operation.name", "invoke_agent"),
        attr("gen_ai.agent.name", agent),
        attr("gen_ai.conversation.id", session.as_str()),
    ];
    if let Some(parent) = parent {
        attributes.push(attr("longhand.parent_session", parent));
    }
    t.open().runs.insert(
        session.clone(),
        Begun {
            span_id: span_id(),
            start_ns: now_ns(),
            name: format!("invoke_agent {agent}"),
            kind: INTERNAL,
            attributes,
        },
    );
}

/// End the run of `session`: `status` is the session's status after it
/// (`finished`, `paused`, …), `error` what stopped it, if something did.
fn end_run(session: &SessionId, status: &str, error: Option<String>) {
    let Some(t) = GLOBAL.get() else {
        return;
    };
    let session = session.clone();
    let end = now_ns();
    let (run, chats, tools) = {
        let mut open = t.open();
        let run = open.runs.remove(&session);
        let chats: Vec<Begun> = take_of(&mut open.chats, &session);
        let tools: Vec<Begun> = take_of(&mut open.tools, &session);
        (run, chats, tools)
    };
    let parent = run.as_ref().map(|r| r.span_id.clone());
    // What began in this run and never ended in it (the lease was
    // lost, the process is stopping) is shown as unfinished.
    for begun in chats.into_iter().chain(tools) {
        t.emit(
            &session,
            parent.as_deref(),
            begun,
            end,
            Some((
                "unfinished",
                "did not end before this run stopped".to_owned(),
            )),
        );
    }
    if let Some(mut run) = run {
        run.attributes.push(attr("longhand.status", status));
        let failed = status == "failed" || error.is_some();
        t.emit(
            &session,
            None,
            run,
            end,
            failed.then(|| {
                (
                    "run_error",
                    error.unwrap_or_else(|| "the session failed".to_owned()),
                )
            }),
        );
    }
}

fn take_of<K: Eq + std::hash::Hash + Clone>(
    map: &mut HashMap<(SessionId, K), Begun>,
    session: &SessionId,
) -> Vec<Begun> {
    let keys: Vec<(SessionId, K)> = map.keys().filter(|k| &k.0 == session).cloned().collect();
    keys.into_iter().filter_map(|k| map.remove(&k)).collect()
}

/// Turn one appended event into span starts and ends. Cheap when
/// telemetry is off.
fn observe(session: &SessionId, record: &EventRecord) {
    let Some(t) = GLOBAL.get() else {
        return;
    };
    let at = record.at_ms.saturating_mul(1_000_000);
    let parent = || t.open().runs.get(session).map(|r| r.span_id.clone());
    match &record.event {
        Event::ModelRequested {
            step,
            role,
            provider,
            model,
            attempt,
            ..
        } => {
            let begun = Begun {
                span_id: span_id(),
                start_ns: at,
                name: format!("chat {model}"),
                kind: CLIENT,
                attributes: vec![
                    attr("gen_ai.operation.name", "chat"),
                    attr("gen_ai.provider.name", provider.as_str()),
                    attr("gen_ai.request.model", model.as_str()),
                    attr("gen_ai.conversation.id", session.as_str()),
                    attr("longhand.role", role.as_str()),
                    int_attr("longhand.step", *step),
                    int_attr("longhand.attempt", u64::from(*attempt)),
                ],
            };
            t.open().chats.insert((session.clone(), *step), begun);
        }
        Event::ModelResponded {
            step,
            input_tokens,
            output_tokens,
            stop_reason,
            cached_input_tokens,
            ..
        } => {
            let Some(mut begun) = t.open().chats.remove(&(session.clone(), *step)) else {
                return;
            };
            begun.attributes.extend([
                int_attr("gen_ai.usage.input_tokens", *input_tokens),
                int_attr("gen_ai.usage.output_tokens", *output_tokens),
                json!({"key": "gen_ai.response.finish_reasons",
                       "value": {"arrayValue": {"values": [{"stringValue": stop_reason}]}}}),
            ]);
            if *cached_input_tokens > 0 {
                begun.attributes.push(int_attr(
                    "gen_ai.usage.cache_read.input_tokens",
                    *cached_input_tokens,
                ));
            }
            t.emit(session, parent().as_deref(), begun, at, None);
        }
        Event::ModelFailed {
            step,
            error,
            retryable,
            ..
        } => {
            let Some(begun) = t.open().chats.remove(&(session.clone(), *step)) else {
                return;
            };
            let kind = if *retryable {
                "retryable"
            } else {
                "model_error"
            };
            t.emit(
                session,
                parent().as_deref(),
                begun,
                at,
                Some((kind, error.clone())),
            );
        }
        Event::ToolStarted {
            step,
            call_id,
            component,
            component_digest,
            tool,
            effect,
            ..
        } => {
            let name = format!("{component}__{tool}");
            let begun = Begun {
                span_id: span_id(),
                start_ns: at,
                name: format!("execute_tool {name}"),
                kind: INTERNAL,
                attributes: vec![
                    attr("gen_ai.operation.name", "execute_tool"),
                    attr("gen_ai.tool.name", name.as_str()),
                    attr("gen_ai.tool.call.id", call_id.as_str()),
                    attr("gen_ai.tool.type", "function"),
                    attr("gen_ai.conversation.id", session.as_str()),
                    attr("longhand.tool.effect", effect.as_str()),
                    attr("longhand.tool.component_digest", component_digest.as_str()),
                    int_attr("longhand.step", *step),
                ],
            };
            t.open()
                .tools
                .insert((session.clone(), call_id.clone()), begun);
        }
        Event::ToolFinished { call_id, ok, .. } => {
            let Some(begun) = t.open().tools.remove(&(session.clone(), call_id.clone())) else {
                return;
            };
            let error = (!ok).then(|| ("tool_error", "the tool returned an error".to_owned()));
            t.emit(session, parent().as_deref(), begun, at, error);
        }
        Event::ToolInDoubt {
            call_id, reason, ..
        } => {
            let Some(begun) = t.open().tools.remove(&(session.clone(), call_id.clone())) else {
                return;
            };
            t.emit(
                session,
                parent().as_deref(),
                begun,
                at,
                Some(("in_doubt", reason.clone())),
            );
        }
        _ => {}
    }
}

/// Send spans in batches until every sender is gone.
#[cfg(feature = "otel")]
async fn export(client: reqwest::Client, config: ExportConfig, mut rx: mpsc::Receiver<Msg>) {
    let resource = json!({"attributes": [
        attr("service.name", config.service.as_str()),
        attr("service.version", env!("CARGO_PKG_VERSION")),
    ]});
    let mut batch: Vec<Value> = Vec::new();
    let mut failures = 0u64;
    loop {
        let msg = if batch.is_empty() {
            rx.recv().await
        } else {
            match tokio::time::timeout(LINGER, rx.recv()).await {
                Ok(msg) => msg,
                Err(_) => {
                    send(&client, &config, &resource, &mut batch, &mut failures).await;
                    continue;
                }
            }
        };
        match msg {
            Some(Msg::Span(span)) => {
                batch.push(span);
                if batch.len() >= BATCH {
                    send(&client, &config, &resource, &mut batch, &mut failures).await;
                }
            }
            Some(Msg::Flush(done)) => {
                send(&client, &config, &resource, &mut batch, &mut failures).await;
                let _ = done.send(());
            }
            None => {
                send(&client, &config, &resource, &mut batch, &mut failures).await;
                return;
            }
        }
    }
}

#[cfg(feature = "otel")]
async fn send(
    client: &reqwest::Client,
    config: &ExportConfig,
    resource: &Value,
    batch: &mut Vec<Value>,
    failures: &mut u64,
) {
    if batch.is_empty() {
        return;
    }
    let spans = std::mem::take(batch);
    let count = spans.len();
    let body = json!({"resourceSpans": [{
        "resource": resource,
        "scopeSpans": [{
            "scope": {"name": "longhand", "version": env!("CARGO_PKG_VERSION")},
            "spans": spans,
        }],
    }]});
    let mut request = client
        .post(&config.endpoint)
        .timeout(EXPORT_TIMEOUT)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_string());
    for (key, value) in &config.headers {
        request = request.header(key.as_str(), value.as_str());
    }
    let outcome = match request.send().await {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) => Err(format!("the collector answered {}", response.status())),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = outcome {
        *failures += 1;
        // The first failure, then every hundredth: a collector that is
        // down should not flood the operator's terminal.
        if *failures % 100 == 1 {
            tracing::warn!(
                "OpenTelemetry: {count} spans not exported to {}: {e}",
                config.endpoint
            );
        }
    }
}

fn attr(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

/// OTLP JSON writes 64-bit integers as strings.
fn int_attr(key: &str, value: u64) -> Value {
    json!({"key": key, "value": {"intValue": value.to_string()}})
}

/// A session's trace id: its ULID's 128 bits (the id is `s-<ULID>`), so all of a session's runs,
/// in any process, share one trace.
fn trace_id(session: &SessionId) -> String {
    let text = session.as_str();
    match ulid::Ulid::from_string(text.strip_prefix("s-").unwrap_or(text)) {
        Ok(id) => format!("{:032x}", id.0),
        Err(_) => hex::encode(sha2_16(session.as_str())),
    }
}

fn sha2_16(text: &str) -> [u8; 16] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// A fresh, non-zero span id.
fn span_id() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() || bytes == [0; 8] {
        // No randomness: a counter still gives distinct, non-zero ids.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        bytes = NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes();
    }
    hex::encode(bytes)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn off_unless_an_endpoint_is_set_or_when_disabled() {
        assert_eq!(ExportConfig::from_vars(vars(&[])).unwrap(), None);
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")];
        let config = ExportConfig::from_vars(vars(&on)).unwrap().unwrap();
        assert_eq!(config.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(config.service, "longhand");
        for off in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(
                ExportConfig::from_vars(vars(&[on[0], off])).unwrap(),
                None,
                "{off:?}"
            );
        }
    }

    #[test]
    fn the_traces_endpoint_is_used_as_given_and_headers_are_decoded() {
        let config = ExportConfig::from_vars(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://collector.example/otlp/traces",
            ),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20abc, x-team = agents",
            ),
            ("OTEL_SERVICE_NAME", "night-shift"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(config.endpoint, "https://collector.example/otlp/traces");
        assert_eq!(
            config.headers,
            vec![
                ("authorization".to_owned(), "Bearer abc".to_owned()),
                ("x-team".to_owned(), "agents".to_owned()),
            ]
        );
        assert_eq!(config.service, "night-shift");
    }

    #[test]
    fn bad_settings_are_refused_with_what_to_do() {
        for (bad, says) in [
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")],
                "not a URL",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "file:///tmp/spans")],
                "not an http(s) URL",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ],
                "http/json only",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "secret-token-without-equals"),
                ],
                "not key=value",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "bad header=x"),
                ],
                "not a valid HTTP header",
            ),
        ] {
            let err = ExportConfig::from_vars(vars(&bad)).unwrap_err().to_string();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn a_session_trace_id_is_its_ulid() {
        let id = SessionId::generate(1_700_000_000_000);
        let trace = trace_id(&id);
        assert_eq!(trace.len(), 32);
        assert_eq!(
            u128::from_str_radix(&trace, 16).unwrap(),
            ulid::Ulid::from_string(&id.as_str()[2..]).unwrap().0
        );
        assert_eq!(span_id().len(), 16);
        assert_ne!(span_id(), span_id());
    }

    #[test]
    fn percent_decoding_leaves_broken_escapes_alone() {
        assert_eq!(percent_decode("a%20b%2"), "a b%2");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
