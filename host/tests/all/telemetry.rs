//! Issue 10, OpenTelemetry: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, a run
//! exports `invoke_agent`, `chat` and `execute_tool` spans over OTLP/HTTP
//! JSON to a local receiver, with GenAI token usage, one trace per session,
//! and nothing the model or a tool said; a bad setting is refused before
//! anything runs.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, call, read_http_request, scripted_agent, text_turn, tool_turn};

/// A local OTLP/HTTP receiver: every request's path and JSON body.
struct Receiver {
    addr: String,
    got: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Receiver {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = format!("http://{}", listener.local_addr().expect("addr"));
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let sink = sink.clone();
                std::thread::spawn(move || {
                    use std::io::Write;
                    // Keep-alive: several requests per connection.
                    while let Some((path, body)) = read_http_request(&stream) {
                        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        sink.lock().expect("lock").push((path, body));
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if (&stream).write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { addr, got }
    }

    /// Every span received, with the resource's `service.name`.
    fn spans(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (path, body) in self.got.lock().expect("lock").iter() {
            assert_eq!(path, "/v1/traces");
            for rs in body["resourceSpans"].as_array().expect("resourceSpans") {
                let service = attr(&rs["resource"], "service.name");
                for ss in rs["scopeSpans"].as_array().expect("scopeSpans") {
                    for span in ss["spans"].as_array().expect("spans") {
                        out.push((service.clone(), span.clone()));
                    }
                }
            }
        }
        out
    }
}

/// A string or integer attribute's value, as text ("" when absent).
fn attr(span: &Value, key: &str) -> String {
    span["attributes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["key"] == key)
        .map(|a| {
            let v = &a["value"];
            v["stringValue"]
                .as_str()
                .or(v["intValue"].as_str())
                .map(str::to_owned)
                .unwrap_or_else(|| v.to_string())
        })
        .unwrap_or_default()
}

#[test]
fn a_run_exports_genai_spans_to_the_otlp_endpoint() {
    let receiver = Receiver::start();
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let secret_text = "the launch code is 0000";
    let script = scripted_agent(
        dir.path(),
        "traced",
        "max_steps = 10",
        &[
            tool_turn(
                "writing",
                vec![
                    call(
                        "c1",
                        "fs__write",
                        json!({"path": "/w/note.txt", "content": secret_text}),
                    ),
                    // Outside the grant: a tool error.
                    call("c2", "fs__read", json!({"path": "/etc/passwd"})),
                ],
                120,
                7,
            ),
            text_turn("done", 200, 3),
        ],
    );
    let mut cmd = home.cmd(&[
        "run",
        dir.path().to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
    ]);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.addr)
        .env("OTEL_SERVICE_NAME", "longhand-test");
    let run = crate::support::run(cmd);
    run.expect_code(0);
    let session = crate::support::session_of_json(&run.stdout[0]);

    // The process flushed before it exited: everything is here already.
    let spans = receiver.spans();
    let by_op = |op: &str| -> Vec<&Value> {
        spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| attr(s, "gen_ai.operation.name") == op)
            .collect()
    };
    assert!(spans.iter().all(|(service, _)| service == "longhand-test"));
    let runs = by_op("invoke_agent");
    let chats = by_op("chat");
    let tools = by_op("execute_tool");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    assert_eq!(tools.len(), 2, "{spans:#?}");

    // One trace, the session's ULID; chat and tool spans under the run.
    let run_span = runs[0];
    let trace = ulid_hex(&session);
    assert_eq!(run_span["name"], "invoke_agent traced");
    assert_eq!(attr(run_span, "gen_ai.agent.name"), "traced");
    assert_eq!(attr(run_span, "gen_ai.conversation.id"), session);
    assert_eq!(attr(run_span, "longhand.status"), "finished");
    assert_eq!(run_span["status"]["code"], 1);
    for span in chats.iter().chain(&tools) {
        assert_eq!(span["traceId"], trace.as_str(), "{span}");
        assert_eq!(span["parentSpanId"], run_span["spanId"], "{span}");
        let (start, end) = (
            nanos(span, "startTimeUnixNano"),
            nanos(span, "endTimeUnixNano"),
        );
        assert!(start <= end, "{span}");
        assert!(nanos(run_span, "startTimeUnixNano") <= start + 1_000_000);
    }
    assert_eq!(run_span["traceId"], trace.as_str());

    // Token usage as the provider reported it, per request.
    let mut usage: Vec<(String, String, String)> = chats
        .iter()
        .map(|c| {
            assert_eq!(c["kind"], 3, "chat spans are client spans");
            assert_eq!(attr(c, "gen_ai.provider.name"), "script");
            (
                attr(c, "gen_ai.usage.input_tokens"),
                attr(c, "gen_ai.usage.output_tokens"),
                attr(c, "longhand.step"),
            )
        })
        .collect();
    usage.sort();
    assert_eq!(
        usage,
        vec![
            ("120".into(), "7".into(), "1".into()),
            ("200".into(), "3".into(), "2".into())
        ]
    );

    // Tool spans: the write ok, the denied read an error.
    let tool = |id: &str| {
        *tools
            .iter()
            .find(|t| attr(t, "gen_ai.tool.call.id") == id)
            .unwrap_or_else(|| panic!("no span of {id}"))
    };
    let write = tool("c1");
    assert_eq!(write["name"], "execute_tool fs__write");
    assert_eq!(attr(write, "gen_ai.tool.name"), "fs__write");
    assert_eq!(write["status"]["code"], 1);
    let read = tool("c2");
    assert_eq!(read["status"]["code"], 2, "{read}");
    assert_eq!(attr(read, "error.type"), "tool_error");

    // Nothing the model or a tool said left the process.
    let all = serde_json::to_string(&spans).expect("json");
    for said in [secret_text, "writing", "Follow the script", "/etc/passwd"] {
        assert!(!all.contains(said), "{said:?} was exported");
    }
}

#[test]
fn a_bad_telemetry_setting_is_refused_before_anything_runs() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = scripted_agent(dir.path(), "traced", "", &[text_turn("done", 1, 1)]);
    for (name, value, says) in [
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "grpc",
            "exports OTLP over http/json only",
        ),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "ftp://x",
            "not an http(s) URL",
        ),
    ] {
        let mut cmd = home.cmd(&[
            "run",
            dir.path().to_str().expect("utf-8"),
            "--script",
            script.to_str().expect("utf-8"),
        ]);
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
            .env(name, value);
        let out = crate::support::run(cmd);
        out.expect_code(2);
        assert!(out.stderr.contains(says), "{name}={value}: {}", out.stderr);
    }
    // Nothing started.
    let sessions = home.run(&["sessions", "--json"]);
    assert!(sessions.stdout.is_empty(), "{:?}", sessions.stdout);
}

fn ulid_hex(session: &str) -> String {
    // Crockford base32, 26 characters, 128 bits.
    const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut value: u128 = 0;
    let ulid = session.strip_prefix("s-").unwrap_or(session);
    for c in ulid.chars() {
        let digit = ALPHABET
            .find(c.to_ascii_uppercase())
            .unwrap_or_else(|| panic!("{session} is not a ULID"));
        value = (value << 5) | digit as u128;
    }
    format!("{value:032x}")
}

fn nanos(span: &Value, field: &str) -> u128 {
    span[field]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{field} is not a decimal string: {span}"))
}
