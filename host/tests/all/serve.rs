//! Issue 10, `longhand serve`: the HTTP API against the real binary on a
//! loopback port — the token (required, wrong is 401, made once and kept
//! 0600), `--no-auth` off loopback refused, paging and filters, errors with
//! stable codes, the SSE stream resumed with `Last-Event-ID`, a session
//! approved over the API running on in the server's own worker, a start
//! from an agent directory, memory search, blobs, and the OpenAPI document
//! covering every route. The browser test is at the end: Playwright drives
//! Chromium through the page.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, Proc, call, of_kind, run_script, scripted_agent, text_turn, tool_turn};

/// How long a condition the server reaches by itself (a worker running a
/// session to its next pause) may take before the test fails. Generous: a
/// debug build on two busy cores. Not a measurement.
const PATIENCE: Duration = Duration::from_secs(90);

/// A running `longhand serve`.
struct Server {
    proc: Proc,
    /// `127.0.0.1:port`.
    addr: String,
    token: String,
    /// What it printed before serving.
    banner: Vec<String>,
}

fn serve(home: &Home, extra: &[&str]) -> Server {
    let mut args = vec!["serve", "--addr", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut proc = Proc::spawn(home.cmd(&args));
    let first = proc.next_line().expect("serve prints where it listens");
    let addr = first
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {first}"))
        .to_owned();
    let mut banner = vec![first];
    // Until the line that says how to open the page.
    while let Some(line) = proc.next_line() {
        let last = line.starts_with("open ") || line.starts_with("no token");
        banner.push(line);
        if last {
            break;
        }
    }
    let token = std::fs::read_to_string(home.path().join("serve-token"))
        .map(|t| t.trim().to_owned())
        .unwrap_or_default();
    Server {
        proc,
        addr,
        token,
        banner,
    }
}

/// An HTTP reply.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Assert an API error: this status and code.
    #[track_caller]
    fn expect_error(&self, status: u16, code: &str) {
        let body = self.json();
        assert_eq!(self.status, status, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
}

fn connect(addr: &str) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect to serve");
    stream
        .set_read_timeout(Some(PATIENCE))
        .expect("read timeout");
    stream
}

fn send_request(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) {
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str("Host: 127.0.0.1\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    // As the page and any API client do: a change says its body is JSON
    // (the server refuses one that does not), unless the test says
    // otherwise.
    let typed = headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"));
    if !typed && (!body.is_empty() || !matches!(method, "GET" | "HEAD")) {
        head.push_str("Content-Type: application/json\r\n");
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write request");
    // The server may answer (413) and close before reading a large body.
    let _ = stream.write_all(body);
}

/// The status line and headers of a reply.
fn read_head(reader: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("status line: {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((n, v)) = line.split_once(':') {
            headers.push((n.trim().to_owned(), v.trim().to_owned()));
        }
    }
    (status, headers)
}

fn chunked(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    })
}

/// The next chunk of a chunked body; `None` at its end.
fn read_chunk(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut size = String::new();
    if reader.read_line(&mut size).ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(size.trim(), 16).ok()?;
    if size == 0 {
        return None;
    }
    let mut chunk = vec![0; size + 2];
    reader.read_exact(&mut chunk).ok()?;
    chunk.truncate(size);
    Some(chunk)
}

fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = connect(addr);
    send_request(&mut stream, method, path, headers, body);
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader);
    let mut body = Vec::new();
    if chunked(&headers) {
        while let Some(chunk) = read_chunk(&mut reader) {
            body.extend(chunk);
        }
    } else {
        reader.read_to_end(&mut body).expect("body");
    }
    Reply {
        status,
        headers,
        body,
    }
}

impl Server {
    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    fn get(&self, path: &str) -> Reply {
        request(
            &self.addr,
            "GET",
            path,
            &[("Authorization", &self.bearer())],
            b"",
        )
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        let body = body.to_string();
        request(
            &self.addr,
            "POST",
            path,
            &[("Authorization", &self.bearer())],
            body.as_bytes(),
        )
    }

    /// Open a session's event stream, after `last_event_id` if given.
    fn stream(&self, session: &str, last_event_id: Option<u64>) -> EventStream {
        let mut stream = connect(&self.addr);
        let id = last_event_id.map(|n| n.to_string());
        let mut headers = vec![("Authorization", self.bearer())];
        if let Some(id) = &id {
            headers.push(("Last-Event-ID", id.clone()));
        }
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        send_request(
            &mut stream,
            "GET",
            &format!("/api/sessions/{session}/events/stream"),
            &headers,
            b"",
        );
        let mut reader = BufReader::new(stream);
        let (status, headers) = read_head(&mut reader);
        assert_eq!(status, 200, "{headers:?}");
        assert!(
            headers
                .iter()
                .any(|(n, v)| n.eq_ignore_ascii_case("content-type")
                    && v.starts_with("text/event-stream")),
            "{headers:?}"
        );
        assert!(chunked(&headers), "{headers:?}");
        EventStream {
            reader,
            text: String::new(),
        }
    }

    /// Poll `path` until `done` holds of its JSON, for at most [`PATIENCE`].
    fn wait_for(&self, path: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let reply = self.get(path);
            assert_eq!(
                reply.status,
                200,
                "{}",
                String::from_utf8_lossy(&reply.body)
            );
            let value = reply.json();
            if done(&value) {
                return value;
            }
            if Instant::now() > deadline {
                let ended = self.proc_stderr_hint();
                panic!("{path} never got there: {value}\n{ended}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn proc_stderr_hint(&self) -> String {
        format!("(serve pid {})", self.proc.pid())
    }
}

/// One SSE message.
#[derive(Debug, Default, Clone)]
struct Message {
    id: Option<String>,
    event: Option<String>,
    data: String,
}

impl Message {
    fn record(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("data ({e}): {}", self.data))
    }
}

struct EventStream {
    reader: BufReader<TcpStream>,
    text: String,
}

impl EventStream {
    /// The next message (keep-alive comments skipped); `None` when the
    /// server closed the stream.
    fn next(&mut self) -> Option<Message> {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let mut message = Message::default();
                let mut any = false;
                for line in block.lines() {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "id" => message.id = Some(value.to_owned()),
                        "event" => message.event = Some(value.to_owned()),
                        "data" => {
                            if !message.data.is_empty() {
                                message.data.push('\n');
                            }
                            message.data.push_str(value);
                        }
                        _ => continue,
                    }
                    any = true;
                }
                if any {
                    return Some(message);
                }
                continue;
            }
            let chunk = read_chunk(&mut self.reader)?;
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Messages until one of type `kind` (an event's `type`), inclusive.
    fn until(&mut self, kind: &str) -> Vec<Message> {
        let mut seen = Vec::new();
        loop {
            let message = self
                .next()
                .unwrap_or_else(|| panic!("the stream closed before a {kind}: {seen:?}"));
            let done = message.event.is_none() && message.record()["type"] == kind;
            seen.push(message);
            if done {
                return seen;
            }
        }
    }
}

/// A scripted agent whose fs writes wait for approval: two writes, then
/// done. The first answer's text is `first_text`.
fn approving_agent(dir: &Path, first_text: &str) -> std::path::PathBuf {
    approving_agent_at(dir, first_text, "/w/a.txt")
}

/// [`approving_agent`] whose first write goes to `first_path` (the second
/// always to `/w/a.txt`).
fn approving_agent_at(dir: &Path, first_text: &str, first_path: &str) -> std::path::PathBuf {
    let write = |id: &str, content: &str| {
        tool_turn(
            &if id == "w1" {
                first_text.to_owned()
            } else {
                format!("writing {content}")
            },
            vec![call(
                id,
                "fs__write",
                json!({"path": if id == "w1" { first_path } else { "/w/a.txt" }, "content": content}),
            )],
            10,
            1,
        )
    };
    let script = scripted_agent(
        dir,
        "approving",
        "max_steps = 20",
        &[
            write("w1", "one"),
            write("w2", "two"),
            text_turn("done", 10, 1),
        ],
    );
    let toml = dir.join("agent.toml");
    let mut text = std::fs::read_to_string(&toml).expect("agent.toml");
    text.push_str("\n[approve]\nfs = \"writes\"\n");
    std::fs::write(&toml, text).expect("write agent.toml");
    script
}

/// A scripted agent that writes one file and finishes.
fn plain_agent(dir: &Path, name: &str) -> std::path::PathBuf {
    scripted_agent(
        dir,
        name,
        "max_steps = 20",
        &[
            tool_turn(
                "writing",
                vec![call(
                    "w1",
                    "fs__write",
                    json!({"path": "/w/a.txt", "content": "hello"}),
                )],
                10,
                1,
            ),
            text_turn("done", 10, 1),
        ],
    )
}

fn detach(home: &Home, dir: &Path, script: &Path) -> String {
    let out = home.run(&[
        "run",
        dir.to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--detach",
        "--json",
    ]);
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout[0]).expect("json");
    v["session"].as_str().expect("session").to_owned()
}

#[test]
fn every_api_route_needs_the_token_made_once_and_kept_private() {
    let home = Home::new();
    let server = serve(&home, &["--no-worker"]);
    // Made now, printed once, with the page's URL.
    assert_eq!(server.token.len(), 64);
    assert!(
        server
            .banner
            .iter()
            .any(|l| l == &format!("token: {}", server.token)),
        "{:?}",
        server.banner
    );
    assert!(
        server
            .banner
            .iter()
            .any(|l| l.ends_with(&format!("/#token={}", server.token))),
        "{:?}",
        server.banner
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path().join("serve-token"))
            .expect("token file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    for (method, path) in longhand_host::serve::routes() {
        let path = path
            .replace("{id}", "s-01ARZ3NDEKTSV4RRFFQ69G5FAV")
            .replace("{request}", "ap-1")
            .replace("{digest}", "sha256:00");
        let method = method.to_uppercase();
        let none = request(&server.addr, &method, &path, &[], b"");
        none.expect_error(401, "unauthorized");
        assert!(none.header("www-authenticate").is_some());
        let wrong = request(
            &server.addr,
            &method,
            &path,
            &[("Authorization", &format!("Bearer {}x", server.token))],
            b"",
        );
        wrong.expect_error(401, "unauthorized");
        let other_scheme = request(
            &server.addr,
            &method,
            &path,
            &[("Authorization", &format!("Basic {}", server.token))],
            b"",
        );
        other_scheme.expect_error(401, "unauthorized");
    }
    let ok = server.get("/api/sessions");
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json(), json!({"sessions": [], "next": null}));
    // A request naming another host (DNS rebinding) is refused, token or not.
    let rebound = request(
        &server.addr,
        "GET",
        "/api/sessions",
        &[
            ("Authorization", &server.bearer()),
            ("Host", "evil.example:7700"),
        ],
        b"",
    );
    rebound.expect_error(403, "forbidden_host");
    // The page needs no token (it holds no data) and carries a strict CSP.
    let page = request(&server.addr, "GET", "/", &[], b"");
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").expect("CSP");
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
    assert!(!csp.contains("unsafe-inline"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    drop(server);
    // Started again: the same token, not printed.
    let again = serve(&home, &["--no-worker"]);
    assert_eq!(again.token.len(), 64);
    assert!(
        again.banner.iter().all(|l| !l.contains(&again.token)),
        "{:?}",
        again.banner
    );
    assert_eq!(again.get("/api/sessions").status, 200);
}

#[test]
fn no_auth_is_refused_off_loopback_and_a_readable_token_file_too() {
    let home = Home::new();
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let out = home.run(&["serve", "--addr", addr, "--no-auth", "--no-worker"]);
        out.expect_code(2);
        assert!(out.stderr.contains("without a token"), "{}", out.stderr);
        assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    }
    // On loopback it serves without one.
    let open = serve(&home, &["--no-auth", "--no-worker"]);
    let reply = request(&open.addr, "GET", "/api/sessions", &[], b"");
    assert_eq!(reply.status, 200);
    drop(open);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(
            home.path().join("serve-token"),
            format!("{}\n", "a".repeat(64)),
        )
        .expect("token");
        std::fs::set_permissions(
            home.path().join("serve-token"),
            std::fs::Permissions::from_mode(0o644),
        )
        .expect("chmod");
        let out = home.run(&["serve", "--addr", "127.0.0.1:0", "--no-worker"]);
        out.expect_code(2);
        assert!(out.stderr.contains("chmod 600"), "{}", out.stderr);
    }
}

#[test]
fn sessions_page_filter_and_errors_have_stable_codes() {
    let home = Home::new();
    let dirs: Vec<TempDir> = (0..3).map(|_| TempDir::new().expect("tempdir")).collect();
    let mut finished = Vec::new();
    for dir in &dirs[..2] {
        let script = plain_agent(dir.path(), "plain");
        let (run, session) = run_script(&home, dir.path(), &script);
        run.expect_code(0);
        finished.push(session);
    }
    let other = plain_agent(dirs[2].path(), "other");
    let detached = detach(&home, dirs[2].path(), &other);
    let server = serve(&home, &["--no-worker"]);

    // Pages of one, newest first, each session once.
    let mut seen = Vec::new();
    let mut path = "/api/sessions?limit=1".to_owned();
    loop {
        let page = server.get(&path).json();
        let sessions = page["sessions"].as_array().expect("sessions");
        assert!(sessions.len() <= 1);
        seen.extend(
            sessions
                .iter()
                .map(|s| s["id"].as_str().expect("id").to_owned()),
        );
        match page["next"].as_str() {
            Some(cursor) => path = format!("/api/sessions?limit=1&cursor={cursor}"),
            None => break,
        }
    }
    let mut expected = vec![finished[0].clone(), finished[1].clone(), detached.clone()];
    expected.sort();
    expected.reverse();
    assert_eq!(seen, expected);

    let finished_only = server.get("/api/sessions?status=finished").json();
    let ids: Vec<&str> = finished_only["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [finished[1].as_str(), finished[0].as_str()]);
    let s = &finished_only["sessions"][0];
    assert_eq!(s["status"], "finished");
    assert_eq!(s["agent"], "plain");
    assert_eq!(s["spend"]["steps"], 2);
    assert_eq!(s["spend"]["tool_calls"], 1);
    assert_eq!(s["spend"]["input_tokens"], 20);
    let by_agent = server.get("/api/sessions?agent=other").json();
    assert_eq!(by_agent["sessions"].as_array().map(Vec::len), Some(1));
    assert_eq!(by_agent["sessions"][0]["id"], detached.as_str());
    assert_eq!(by_agent["sessions"][0]["status"], "running");
    assert_eq!(by_agent["sessions"][0]["awaiting_worker"], true);

    // One session, in detail.
    let one = server.get(&format!("/api/sessions/{}", finished[0])).json();
    assert_eq!(one["goal"], "Follow the script.");
    assert_eq!(one["summary"], "done");
    assert_eq!(one["has_plan"], false);

    // Events, paged: every seq once, in order, `next` until the end.
    let total = one["last_seq"].as_u64().expect("last_seq");
    let mut seqs = Vec::new();
    let mut after = 0;
    loop {
        let page = server
            .get(&format!(
                "/api/sessions/{}/events?after={after}&limit=3",
                finished[0]
            ))
            .json();
        let events = page["events"].as_array().expect("events");
        assert!(events.len() <= 3);
        seqs.extend(events.iter().map(|e| e["seq"].as_u64().expect("seq")));
        match page["next"].as_u64() {
            Some(n) => after = n,
            None => break,
        }
    }
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>());

    // The plan of a session without one.
    let plan = server
        .get(&format!("/api/sessions/{}/plan", finished[0]))
        .json();
    assert_eq!(plan["tasks"], json!([]));

    // Blobs: a tool input of this session, and not another session's.
    let events = server
        .get(&format!("/api/sessions/{}/events", finished[0]))
        .json();
    let input = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["type"] == "tool_started")
        .map(|e| e["input"]["digest"].as_str().expect("digest").to_owned())
        .expect("a tool call");
    let blob = server.get(&format!("/api/sessions/{}/blobs/{input}", finished[0]));
    assert_eq!(blob.status, 200);
    assert_eq!(
        blob.header("content-type"),
        Some("application/octet-stream")
    );
    // Opened directly, model and tool output cannot run as a page: the
    // blob keeps its own `sandbox` policy (not the page's), is not
    // sniffed, and is an attachment.
    let csp = blob.header("content-security-policy").expect("CSP");
    assert!(csp.starts_with("sandbox"), "{csp}");
    assert!(!csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(blob.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(blob.header("content-disposition"), Some("attachment"));
    let args: Value = serde_json::from_slice(&blob.body).expect("the input is JSON");
    assert_eq!(args["content"], "hello");
    server
        .get(&format!("/api/sessions/{detached}/blobs/{input}"))
        .expect_error(404, "blob_not_found");

    // Errors: each with its status and stable code.
    let unknown = "s-01ARZ3NDEKTSV4RRFFQ69G5FAV";
    server
        .get("/api/sessions?status=sleeping")
        .expect_error(400, "invalid_request");
    server
        .get("/api/sessions?limit=0")
        .expect_error(400, "invalid_request");
    server
        .get("/api/sessions/not-a-session")
        .expect_error(400, "invalid_session_id");
    server
        .get(&format!("/api/sessions/{unknown}"))
        .expect_error(404, "session_not_found");
    server
        .get(&format!("/api/sessions/{unknown}/events"))
        .expect_error(404, "session_not_found");
    server
        .get("/api/nothing")
        .expect_error(404, "route_not_found");
    request(
        &server.addr,
        "DELETE",
        "/api/sessions",
        &[("Authorization", &server.bearer())],
        b"",
    )
    .expect_error(405, "method_not_allowed");
    let pause_ended = server.post(&format!("/api/sessions/{}/pause", finished[0]), &json!({}));
    pause_ended.expect_error(409, "session_ended");
    server
        .post(&format!("/api/sessions/{}/resume", finished[0]), &json!({}))
        .expect_error(409, "session_ended");
    server
        .post(&format!("/api/sessions/{detached}/resume"), &json!({}))
        .expect_error(409, "not_paused");
    server
        .post(
            &format!("/api/sessions/{detached}/send"),
            &json!({"text": "  "}),
        )
        .expect_error(400, "invalid_request");
    server
        .post(
            &format!("/api/sessions/{detached}/pause"),
            &json!({"why": "x"}),
        )
        .expect_error(400, "invalid_request");
    let huge = json!({"text": "x".repeat(100_000)});
    server
        .post(&format!("/api/sessions/{detached}/send"), &huge)
        .expect_error(413, "payload_too_large");
    server
        .post("/api/sessions", &json!({"agent": dirs[0].path()}))
        .expect_error(403, "agent_not_allowed");

    // Steering a detached session posts to its inbox, never its log.
    let before = home.log(&detached).len();
    let sent = server.post(
        &format!("/api/sessions/{detached}/send"),
        &json!({"text": "also say hi"}),
    );
    assert_eq!(sent.status, 202, "{}", sent.json());
    let control = sent.json();
    assert_eq!(control["kind"], "send");
    assert_eq!(control["text"], "also say hi");
    assert_eq!(control["session"], detached.as_str());
    let paused = server.post(
        &format!("/api/sessions/{detached}/pause"),
        &json!({"reason": "lunch"}),
    );
    assert_eq!(paused.status, 202);
    assert_eq!(paused.json()["kind"], "pause");
    let cancelled = server.post(
        &format!("/api/sessions/{detached}/cancel"),
        &json!({"reason": "enough", "now": true}),
    );
    assert_eq!(cancelled.status, 202);
    assert_eq!(cancelled.json()["kind"], "cancel");
    assert_eq!(cancelled.json()["now"], true);
    server
        .post(
            &format!("/api/sessions/{detached}/pause"),
            &json!({"now": true}),
        )
        .expect_error(400, "invalid_request");
    assert_eq!(home.log(&detached).len(), before);
}

#[test]
fn an_approval_over_the_api_lets_the_session_go_on_and_the_stream_resumes() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = approving_agent(dir.path(), "writing one");
    let session = detach(&home, dir.path(), &script);
    let server = serve(&home, &[]);
    // The server's worker runs it to the first approval.
    let pending = server.wait_for("/api/approvals", |v| {
        v["approvals"].as_array().is_some_and(|a| !a.is_empty())
    });
    let first = &pending["approvals"][0];
    assert_eq!(first["session"], session.as_str());
    assert_eq!(first["tool"], "fs__write");
    assert_eq!(first["effect"], "idempotent");
    assert_eq!(first["input"]["content"], "one");
    let request_id = first["request"].as_str().expect("request").to_owned();
    let detail = server.get(&format!("/api/sessions/{session}")).json();
    assert_eq!(detail["status"], "paused");
    assert_eq!(detail["pending_approvals"], json!([request_id]));
    assert!(
        !dir.path().join("work/a.txt").exists(),
        "ran before approval"
    );

    // A live stream, open while the session waits.
    let mut stream = server.stream(&session, None);
    let upto = stream.until("approval_requested");
    let ids: Vec<u64> = upto
        .iter()
        .map(|m| m.id.as_deref().expect("id").parse().expect("seq"))
        .collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());

    // Unknown and malformed answers.
    let base = format!("/api/sessions/{session}/approvals");
    server
        .post(&format!("{base}/ap-999999/approve"), &json!({}))
        .expect_error(404, "request_not_found");
    server
        .post(
            &format!("{base}/{request_id}/approve"),
            &json!({"scope": "forever"}),
        )
        .expect_error(400, "invalid_request");
    server
        .post(
            &format!("{base}/{request_id}/deny"),
            &json!({"reason": " "}),
        )
        .expect_error(400, "invalid_request");

    // Approve and carry on: the answer and what follows arrive live.
    let approved = server.post(
        &format!("{base}/{request_id}/approve"),
        &json!({"resume": true}),
    );
    assert_eq!(approved.status, 200, "{}", approved.json());
    let approved = approved.json();
    assert_eq!(approved["resume"], session.as_str());
    assert_eq!(approved["resumed"], "running");
    let live = stream.until("approval_requested");
    let kinds: Vec<String> = live
        .iter()
        .map(|m| m.record()["type"].as_str().expect("type").to_owned())
        .collect();
    for kind in [
        "approval_granted",
        "resumed",
        "tool_started",
        "tool_finished",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} not in {kinds:?}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("work/a.txt")).expect("written"),
        "one"
    );
    // Answering it again is refused.
    server
        .post(&format!("{base}/{request_id}/approve"), &json!({}))
        .expect_error(409, "not_pending");

    // Deny the second; the session finishes and the stream ends.
    let second = server.wait_for("/api/approvals", |v| {
        v["approvals"][0]["input"]["content"] == "two"
    })["approvals"][0]["request"]
        .as_str()
        .expect("request")
        .to_owned();
    let denied = server.post(
        &format!("{base}/{second}/deny"),
        &json!({"reason": "one is enough", "resume": true}),
    );
    assert_eq!(denied.status, 200, "{}", denied.json());
    let rest = stream.until("finished");
    assert!(
        rest.iter().any(|m| m.record()["type"] == "approval_denied"),
        "{rest:?}"
    );
    let end = stream.next().expect("an end message");
    assert_eq!(end.event.as_deref(), Some("end"));
    assert!(stream.next().is_none(), "the stream closes after `end`");
    let last_seq = server.get(&format!("/api/sessions/{session}")).json()["last_seq"]
        .as_u64()
        .expect("last_seq");
    assert_eq!(end.data, last_seq.to_string());

    // Reconnecting with Last-Event-ID: exactly the events after it.
    let mut resumed = server.stream(&session, Some(5));
    let mut ids = Vec::new();
    while let Some(m) = resumed.next() {
        match m.event.as_deref() {
            Some("end") => break,
            _ => ids.push(m.id.expect("id").parse::<u64>().expect("seq")),
        }
    }
    assert_eq!(ids, (6..=last_seq).collect::<Vec<_>>());
    // A Last-Event-ID that is not a seq is refused.
    let bad = request(
        &server.addr,
        "GET",
        &format!("/api/sessions/{session}/events/stream"),
        &[("Authorization", &server.bearer()), ("Last-Event-ID", "x")],
        b"",
    );
    bad.expect_error(400, "invalid_request");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("work/a.txt")).expect("written"),
        "one"
    );
}

#[test]
fn a_session_started_over_the_api_runs_in_the_server() {
    let home = Home::new();
    let agents = TempDir::new().expect("tempdir");
    let dir = agents.path().join("writer");
    let script = plain_agent(&dir, "writer");
    // Record the script's answers as the cassette the agent file names, so
    // the agent runs offline as it is.
    let recorded = home.run(&[
        "run",
        dir.to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--record",
        dir.join("unused-cassette.json").to_str().expect("utf-8"),
    ]);
    recorded.expect_code(0);
    std::fs::remove_file(dir.join("work/a.txt")).expect("reset");
    let elsewhere = TempDir::new().expect("tempdir");
    plain_agent(elsewhere.path(), "outsider");
    let server = serve(&home, &["--agents", agents.path().to_str().expect("utf-8")]);
    server
        .post("/api/sessions", &json!({"agent": elsewhere.path()}))
        .expect_error(403, "agent_not_allowed");
    server
        .post("/api/sessions", &json!({"agent": "writer"}))
        .expect_error(400, "invalid_request");
    server
        .post(
            "/api/sessions",
            &json!({"agent": agents.path().join("missing")}),
        )
        .expect_error(400, "invalid_request");
    server
        .post("/api/sessions", &json!({"agent": dir, "colour": "red"}))
        .expect_error(400, "invalid_request");
    let started = server.post("/api/sessions", &json!({"agent": dir, "priority": 2}));
    assert_eq!(started.status, 201, "{}", started.json());
    let session = started.json()["session"]
        .as_str()
        .expect("session")
        .to_owned();
    let done = server.wait_for(&format!("/api/sessions/{session}"), |v| {
        v["status"] == "finished" || v["status"] == "failed"
    });
    assert_eq!(done["status"], "finished", "{done}");
    assert_eq!(done["agent"], "writer");
    assert_eq!(
        std::fs::read_to_string(dir.join("work/a.txt")).expect("written"),
        "hello"
    );
}

#[test]
fn memory_is_searched_and_shown() {
    use longhand_brain::memory::{self, MemoryBank, NewMemory};
    let home = Home::new();
    let bank = MemoryBank::open(&memory::default_path(home.path())).expect("bank");
    let deploy = bank
        .remember(NewMemory {
            scope: "project:shop".into(),
            text: "Deploy with make ship <script>alert(1)</script>".into(),
            tags: vec!["deploy".into()],
            ..NewMemory::default()
        })
        .expect("remember");
    bank.remember(NewMemory {
        scope: "user:alice".into(),
        text: "Alice wants short notes".into(),
        ..NewMemory::default()
    })
    .expect("remember");
    drop(bank);
    let server = serve(&home, &["--no-worker"]);
    let found = server.get("/api/memory?q=deploy").json();
    let ids: Vec<&str> = found["memories"]
        .as_array()
        .expect("memories")
        .iter()
        .map(|m| m["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [deploy.id.as_str()]);
    let all = server.get("/api/memory").json();
    assert_eq!(all["memories"].as_array().map(Vec::len), Some(2));
    let scoped = server.get("/api/memory?scope=user%3Aalice").json();
    assert_eq!(scoped["memories"].as_array().map(Vec::len), Some(1));
    assert_eq!(scoped["memories"][0]["scope"], "user:alice");
    let one = server.get(&format!("/api/memory/{}", deploy.id)).json();
    assert_eq!(one["text"], deploy.text);
    server
        .get("/api/memory/m-nothing")
        .expect_error(404, "memory_not_found");
    server
        .get("/api/memory?q=%21%21")
        .expect_error(400, "invalid_request");
}

#[test]
fn the_openapi_document_covers_every_route() {
    let home = Home::new();
    let server = serve(&home, &["--no-worker"]);
    let doc = server.get("/api/openapi.json").json();
    assert_eq!(doc["openapi"], "3.1.0");
    for (method, path) in longhand_host::serve::routes() {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} is served but not documented"
        );
        let responses = &doc["paths"][path][method]["responses"];
        assert!(responses["401"].is_object(), "{method} {path}: no 401");
    }
}

/// What the browser test needs, or why it cannot run here.
fn browser() -> Result<(std::path::PathBuf, std::path::PathBuf), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .join("tests/browser");
    if !root.join("node_modules/playwright-core").is_dir() {
        return Err(format!(
            "no playwright-core in {} (run `npm ci` there, or .ci/setup-browser.sh)",
            root.display()
        ));
    }
    let chromium = std::env::var_os("CHROMIUM")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromium".into());
    if !chromium.is_file() {
        return Err(format!(
            "no Chromium at {} (apt-get install chromium, or .ci/setup-browser.sh)",
            chromium.display()
        ));
    }
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .map_or(true, |o| !o.status.success())
    {
        return Err("no `node` on PATH".to_owned());
    }
    Ok((root, chromium))
}

#[test]
fn the_page_follows_a_session_live_and_approves_in_chromium() {
    let (root, chromium) = match browser() {
        Ok(found) => found,
        Err(missing) if std::env::var("LONGHAND_REQUIRE_EXTERNAL").as_deref() == Ok("1") => {
            panic!("LONGHAND_REQUIRE_EXTERNAL=1 and the browser test cannot run: {missing}")
        }
        Err(missing) => {
            eprintln!(
                "skipped the browser test: {missing}; set it up with .ci/setup-browser.sh \
                 (LONGHAND_REQUIRE_EXTERNAL=1 makes this a failure)"
            );
            return;
        }
    };
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    // The first write's path has a right-to-left override in it: shown
    // plainly it reads `/w/notes"sh.md`; the page must show the override.
    let script = approving_agent_at(
        dir.path(),
        "writing <img src=x onerror=window.__pwned=1> one",
        "/w/notes\u{202e}dm.hs",
    );
    let session = detach(&home, dir.path(), &script);
    let server = serve(&home, &[]);
    let pending = server.wait_for("/api/approvals", |v| {
        v["approvals"].as_array().is_some_and(|a| !a.is_empty())
    });
    let request = pending["approvals"][0]["request"]
        .as_str()
        .expect("request")
        .to_owned();
    let profile = TempDir::new().expect("profile dir");
    let out = std::process::Command::new("node")
        .arg(root.join("serve.mjs"))
        .current_dir(&root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", profile.path())
        .env("LONGHAND_URL", format!("http://{}", server.addr))
        .env("LONGHAND_TOKEN", &server.token)
        .env("LONGHAND_SESSION", &session)
        .env("LONGHAND_REQUEST", &request)
        .env("CHROMIUM", &chromium)
        .env("PROFILE_DIR", profile.path().join("chromium"))
        .env(
            "SCREENSHOTS",
            std::env::var_os("LONGHAND_SCREENSHOTS").unwrap_or_default(),
        )
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("browser test passed"),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
    let done = server.get(&format!("/api/sessions/{session}")).json();
    assert_eq!(done["status"], "finished", "{done}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("work/a.txt")).expect("written"),
        "two"
    );
}

/// Issue 19's agent for the page: a plan of four tasks, five
/// dependencies, a failed first attempt (a claim before the work) and a
/// judge.
fn planned_for_page(dir: &Path) -> std::path::PathBuf {
    let task = |id: &str, deps: &[&str]| {
        format!(
            "[[tasks]]\nid = \"{id}\"\ntitle = \"make {id}.txt\"\ndepends_on = {deps}\n\
             [[tasks.done_when]]\nkind = \"tool\"\ntool = \"fs__stat\"\n\
             input = {{ path = \"/w/{id}.txt\" }}\nexpect = \".kind == \\\"file\\\"\"\n\n",
            deps = json!(deps)
        )
    };
    let mut plan = task("one", &[]);
    plan.push_str(&task("two", &["one"]));
    plan.push_str(&task("three", &["one", "two"]));
    plan.push_str(
        "[[tasks]]\nid = \"four\"\ntitle = \"review\"\ndepends_on = [\"two\", \"three\"]\n\
         [[tasks.done_when]]\nkind = \"judge\"\nrubric = \"the files exist\"\n",
    );
    let write_call = |id: &str, file: &str| {
        call(
            id,
            "fs__write",
            json!({"path": format!("/w/{file}"), "content": file}),
        )
    };
    let responses = [
        tool_turn("Writing one.", vec![write_call("w1", "one.txt")], 100, 10),
        text_turn("one done", 120, 5),
        text_turn("two done (not really)", 130, 5),
        tool_turn("Two, for real.", vec![write_call("w2", "two.txt")], 140, 10),
        text_turn("two done", 150, 5),
        tool_turn(
            "Writing three.",
            vec![write_call("w3", "three.txt")],
            160,
            10,
        ),
        text_turn("three done", 170, 5),
        text_turn("reviewed", 180, 5),
        tool_turn(
            "judge looks",
            vec![call("j1", "fs__stat", json!({"path": "/w/two.txt"}))],
            190,
            5,
        ),
        text_turn(
            r#"{"pass": true, "reasons": ["the files exist"], "missing": []}"#,
            200,
            5,
        ),
    ];
    let script = scripted_agent(dir, "planned", "max_steps = 100", &responses);
    let toml = dir.join("agent.toml");
    let mut text = std::fs::read_to_string(&toml).expect("agent.toml");
    text.push_str("\n[plan]\nfile = \"plan.toml\"\n");
    std::fs::write(&toml, text).expect("write agent.toml");
    std::fs::write(dir.join("plan.toml"), plan).expect("write plan.toml");
    script
}

/// Issue 19's hostile agent: its first answer's words carry markup, a
/// terminal escape and a bidi override over five lines, and its call
/// writes 1 MiB; then it finishes.
fn hostile_for_page(dir: &Path) -> std::path::PathBuf {
    let words = "Reading <img src=x onerror=window.__pwned=1> \u{1b}[31mred\u{1b}[0m and \u{202e}desrever\n\
                 line two\nline three\nline four\nline five";
    let big = format!("{}<script>window.__pwned=2</script>", "A".repeat(1 << 20));
    scripted_agent(
        dir,
        "hostile",
        "max_steps = 20",
        &[
            tool_turn(
                words,
                vec![call(
                    "big",
                    "fs__write",
                    json!({"path": "/w/big.txt", "content": big}),
                )],
                1000,
                50,
            ),
            text_turn("done <b>bold</b>", 1100, 20),
        ],
    )
}

/// Issue 19: `GET /api/agents` lists the agents under `--agents` (and
/// none without it); `GET …/previews` gives bounded views of a session's
/// blobs — a 1 MiB argument as a few thousand characters, cut with `…`,
/// the blob's size said — and nothing of a blob the session does not
/// name; the session's view says its limits and the list its goal.
#[test]
fn agents_are_listed_and_blob_previews_are_bounded() {
    let home = Home::new();
    let agents = TempDir::new().expect("tempdir");
    let dir = agents.path().join("hostile");
    let script = hostile_for_page(&dir);
    let (run, session) = run_script(&home, &dir, &script);
    run.expect_code(0);
    let server = serve(
        &home,
        &[
            "--no-worker",
            "--agents",
            agents.path().to_str().expect("utf-8"),
        ],
    );
    // An agent that does not load stops `serve` at start (its triggers are
    // read); one broken since is listed with what is wrong.
    std::fs::create_dir_all(agents.path().join("broken")).expect("mkdir");
    std::fs::write(agents.path().join("broken/agent.toml"), "name = ").expect("write");
    let listed = server.get("/api/agents");
    assert_eq!(listed.status, 200);
    let listed = listed.json();
    let list = listed["agents"].as_array().expect("agents");
    assert_eq!(list.len(), 2, "{listed}");
    let hostile = list
        .iter()
        .find(|a| a["name"] == "hostile")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(hostile["goal"], "Follow the script.");
    assert_eq!(hostile["planned"], false);
    let real = std::fs::canonicalize(&dir).expect("canonical");
    assert_eq!(hostile["path"], real.to_str().expect("utf-8"));
    let broken = list
        .iter()
        .find(|a| a["name"] == "broken")
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        broken["problem"].as_str().is_some_and(|p| !p.is_empty()),
        "{listed}"
    );
    // Without the token, refused like every route.
    request(&server.addr, "GET", "/api/agents", &[], b"").expect_error(401, "unauthorized");

    let events = server
        .get(&format!("/api/sessions/{session}/events"))
        .json();
    let started = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["type"] == "tool_started")
        .expect("a tool_started")
        .clone();
    let input = started["input"]["digest"].as_str().expect("digest");
    let reply = server.get(&format!(
        "/api/sessions/{session}/previews?max=500&blobs={input},sha256:{}",
        "0".repeat(64)
    ));
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert!(reply.body.len() < 2000, "{} bytes", reply.body.len());
    let previews = reply.json()["previews"].clone();
    let one = &previews[input];
    assert_eq!(one["cut"], true, "{one}");
    assert!(one["bytes"].as_u64().is_some_and(|b| b > 1 << 20), "{one}");
    assert_eq!(one["json"]["path"], "/w/big.txt");
    let content = one["json"]["content"].as_str().expect("content");
    assert!(
        content.ends_with('…') && content.chars().count() < 600,
        "{content}"
    );
    assert_eq!(previews.as_object().map(|o| o.len()), Some(1), "{previews}");
    for bad in ["", "?blobs=", "?blobs=a&max=0", "?blobs=a&max=99999"] {
        server
            .get(&format!("/api/sessions/{session}/previews{bad}"))
            .expect_error(400, "invalid_request");
    }
    let too_many = vec!["sha256:00"; 101].join(",");
    server
        .get(&format!(
            "/api/sessions/{session}/previews?blobs={too_many}"
        ))
        .expect_error(400, "invalid_request");

    let one = server.get(&format!("/api/sessions/{session}")).json();
    assert_eq!(one["limits"]["max_steps"], 20, "{one}");
    let list = server.get("/api/sessions").json();
    assert_eq!(list["sessions"][0]["goal"], "Follow the script.", "{list}");

    let bare = Home::new();
    let server = serve(&bare, &["--no-worker"]);
    assert_eq!(server.get("/api/agents").json(), json!({"agents": []}));
}

/// Issue 19 in Chromium: a planned session and a hostile one, finished,
/// seen without a click — turns with words and arguments, the waterfall,
/// the token chart, the plan as a graph — on a laptop and a phone; a
/// session started from the page's form, and one refused. The script is
/// tests/browser/pictures.mjs.
#[test]
fn the_page_shows_turns_pictures_and_the_plan_and_starts_sessions_in_chromium() {
    let (root, chromium) = match browser() {
        Ok(found) => found,
        Err(missing) if std::env::var("LONGHAND_REQUIRE_EXTERNAL").as_deref() == Ok("1") => {
            panic!("LONGHAND_REQUIRE_EXTERNAL=1 and the browser test cannot run: {missing}")
        }
        Err(missing) => {
            eprintln!("skipped the browser test: {missing}; set it up with .ci/setup-browser.sh");
            return;
        }
    };
    let home = Home::new();
    let agents = TempDir::new().expect("tempdir");
    let planned_dir = agents.path().join("planned");
    let script = planned_for_page(&planned_dir);
    let (run, planned) = run_script(&home, &planned_dir, &script);
    run.expect_code(0);
    let hostile_dir = agents.path().join("hostile");
    let script = hostile_for_page(&hostile_dir);
    // Recorded as the cassette its file names, so the page can start it
    // again, offline, as it is.
    let recorded = home.run(&[
        "run",
        hostile_dir.to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--record",
        hostile_dir
            .join("unused-cassette.json")
            .to_str()
            .expect("utf-8"),
        "--json",
    ]);
    recorded.expect_code(0);
    let hostile = crate::support::session_of_json(&recorded.stdout[0]);
    let elsewhere = TempDir::new().expect("tempdir");
    plain_agent(elsewhere.path(), "outsider");
    // A session paused at its step limit, for the pause's own buttons.
    let limited_dir = TempDir::new().expect("tempdir");
    let script = scripted_agent(
        limited_dir.path(),
        "limited",
        "max_steps = 1",
        &[
            tool_turn(
                "one step only",
                vec![call(
                    "w1",
                    "fs__write",
                    json!({"path": "/w/a.txt", "content": "a"}),
                )],
                10,
                1,
            ),
            text_turn("done", 10, 1),
        ],
    );
    let (run, limited) = run_script(&home, limited_dir.path(), &script);
    run.expect_code(3);
    let server = serve(
        &home,
        &[
            "--no-worker",
            "--agents",
            agents.path().to_str().expect("utf-8"),
        ],
    );
    let profile = TempDir::new().expect("profile dir");
    let out = std::process::Command::new("node")
        .arg(root.join("pictures.mjs"))
        .current_dir(&root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", profile.path())
        .env("LONGHAND_URL", format!("http://{}", server.addr))
        .env("LONGHAND_TOKEN", &server.token)
        .env("LONGHAND_PLANNED", &planned)
        .env("LONGHAND_HOSTILE", &hostile)
        .env(
            "LONGHAND_AGENT",
            std::fs::canonicalize(&hostile_dir).expect("canonical"),
        )
        .env("LONGHAND_OUTSIDER", elsewhere.path())
        .env("LONGHAND_LIMITED", &limited)
        .env("CHROMIUM", &chromium)
        .env("PROFILE_DIR", profile.path().join("chromium"))
        .env(
            "SCREENSHOTS",
            std::env::var_os("LONGHAND_SCREENSHOTS").unwrap_or_default(),
        )
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("browser test passed"),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
    // The pause's button raised the limit and resumed the session.
    let resumed = server.get(&format!("/api/sessions/{limited}")).json();
    assert_eq!(resumed["limits"]["max_steps"], 2, "{resumed}");
    assert_ne!(resumed["status"], "paused", "{resumed}");
    // The page's start is a real one: a third session, of the agent chosen.
    let list = server.get("/api/sessions?agent=hostile").json();
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(2), "{list}");
}

/// Webhook triggers (issue 10): `POST /hooks/<name>` needs no API token
/// but its own HMAC signature, fresh and used once; an accepted one starts
/// a session whose goal carries the body fenced as outside data, run by
/// the server. A webhook whose secret is not set is disabled (503), and
/// the server starts anyway, naming the variable on stderr.
#[test]
fn a_signed_webhook_starts_a_session_and_nothing_else_does() {
    use longhand_host::triggers::{sign_webhook, webhook_goal};
    let home = Home::new();
    let agents = TempDir::new().expect("tempdir");
    let dir = agents.path().join("hooked");
    let script = plain_agent(&dir, "hooked");
    let body = br#"{"ref":"main","pusher":"ci"}"#;
    // The cassette the agent replays is recorded with the goal the webhook
    // will give it (a replay answers only the request it recorded).
    let goal = webhook_goal("Note the push.", std::str::from_utf8(body).expect("utf-8"));
    let recorded = home.run(&[
        "run",
        dir.to_str().expect("utf-8"),
        "--goal",
        &goal,
        "--script",
        script.to_str().expect("utf-8"),
        "--record",
        dir.join("unused-cassette.json").to_str().expect("utf-8"),
    ]);
    recorded.expect_code(0);
    std::fs::remove_file(dir.join("work/a.txt")).expect("reset");
    let toml = dir.join("agent.toml");
    let mut text = std::fs::read_to_string(&toml).expect("agent.toml");
    text.push_str(
        "\n[[triggers]]\nname = \"on-push\"\nwebhook = true\nsecret_env = \"HOOK_SECRET\"\ngoal = \"Note the push.\"\n",
    );
    std::fs::write(&toml, text).expect("agent.toml");
    let root = agents.path().to_str().expect("utf-8");

    let secret = "hook-secret-1234";
    // The secret is not set: the server starts, the hook is off (even a
    // request signed with the right secret starts nothing), and stderr
    // names the variable to set.
    let sessions_before = home.run(&["sessions", "--json"]).stdout;
    let mut unset = Proc::spawn(home.cmd(&["serve", "--addr", "127.0.0.1:0", "--agents", root]));
    let first = unset.next_line().expect("serve starts without the hook");
    let addr = first
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {first}"))
        .to_owned();
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        .to_string();
    request(
        &addr,
        "POST",
        "/hooks/on-push",
        &[
            ("X-Longhand-Timestamp", &ts),
            (
                "X-Longhand-Signature",
                &sign_webhook(secret.as_bytes(), &ts, body),
            ),
        ],
        body,
    )
    .expect_error(503, "hook_disabled");
    let ended = unset.kill();
    assert!(
        ended.stderr.contains("warning:")
            && ended.stderr.contains("HOOK_SECRET")
            && ended.stderr.contains("on-push"),
        "{}",
        ended.stderr
    );
    assert_eq!(
        home.run(&["sessions", "--json"]).stdout,
        sessions_before,
        "the disabled hook started nothing"
    );

    let mut cmd = home.cmd(&["serve", "--addr", "127.0.0.1:0", "--agents", root]);
    cmd.env("HOOK_SECRET", secret);
    let mut proc = Proc::spawn(cmd);
    let first = proc.next_line().expect("serve prints where it listens");
    let addr = first
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {first}"))
        .to_owned();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs()
            .to_string()
    };
    let post = |headers: &[(&str, &str)], body: &[u8]| {
        request(&addr, "POST", "/hooks/on-push", headers, body)
    };
    // Unsigned, signed with another secret, signed over another body, or
    // with a stale timestamp: 401, nothing started. No API token needed
    // or accepted in place of the signature.
    let ts = now();
    let good = sign_webhook(secret.as_bytes(), &ts, body);
    post(&[], body).expect_error(401, "bad_signature");
    post(
        &[
            ("X-Longhand-Timestamp", &ts),
            ("X-Longhand-Signature", &sign_webhook(b"guess", &ts, body)),
        ],
        body,
    )
    .expect_error(401, "bad_signature");
    post(
        &[
            ("X-Longhand-Timestamp", &ts),
            ("X-Longhand-Signature", &good),
        ],
        br#"{"ref":"evil"}"#,
    )
    .expect_error(401, "bad_signature");
    let old = (now().parse::<u64>().expect("secs") - 3600).to_string();
    post(
        &[
            ("X-Longhand-Timestamp", &old),
            (
                "X-Longhand-Signature",
                &sign_webhook(secret.as_bytes(), &old, body),
            ),
        ],
        body,
    )
    .expect_error(401, "bad_signature");
    request(&addr, "POST", "/hooks/other", &[], body).expect_error(404, "hook_not_found");
    // Correctly signed but hostile bodies: not UTF-8, or past the
    // server's 64 KiB limit. Refused, nothing started.
    for (hostile, status) in [
        (vec![0xff_u8, 0xfe, 0x00, 0x80], 400),
        (vec![b'a'; 65 * 1024], 413),
    ] {
        let sig = sign_webhook(secret.as_bytes(), &ts, &hostile);
        let reply = post(
            &[
                ("X-Longhand-Timestamp", &ts),
                ("X-Longhand-Signature", &sig),
            ],
            &hostile,
        );
        assert_eq!(
            reply.status,
            status,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    let sessions = home.run(&["sessions", "--json"]);
    let before = sessions.stdout.len();

    // Signed: accepted, a session starts and the server runs it.
    let accepted = post(
        &[
            ("X-Longhand-Timestamp", &ts),
            ("X-Longhand-Signature", &good),
        ],
        body,
    );
    assert_eq!(accepted.status, 202, "{}", accepted.json());
    let session = accepted.json()["session"]
        .as_str()
        .expect("session")
        .to_owned();
    // The same request again is a replay.
    post(
        &[
            ("X-Longhand-Timestamp", &ts),
            ("X-Longhand-Signature", &good),
        ],
        body,
    )
    .expect_error(409, "replayed");
    let deadline = std::time::Instant::now() + PATIENCE;
    while home.state(&session).status.as_str() == "running" && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "finished");
    let goal = state.goal.clone().expect("goal");
    assert!(goal.starts_with("Note the push."), "{goal}");
    assert!(
        goal.contains("not instructions") && goal.contains(r#"{"ref":"main","pusher":"ci"}"#),
        "{goal}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("work/a.txt")).expect("written"),
        "hello"
    );
    let sessions = home.run(&["sessions", "--json"]);
    assert_eq!(
        sessions.stdout.len(),
        before + 1,
        "one session per accepted call"
    );
    proc.kill();
}

/// Send `raw` bytes as they are (a request the helpers would not write)
/// and read the reply.
fn raw_request(addr: &str, raw: &[u8]) -> Reply {
    let mut stream = connect(addr);
    stream.write_all(raw).expect("write request");
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader);
    let mut body = Vec::new();
    if chunked(&headers) {
        while let Some(chunk) = read_chunk(&mut reader) {
            body.extend(chunk);
        }
    } else {
        let _ = reader.read_to_end(&mut body);
    }
    Reply {
        status,
        headers,
        body,
    }
}

/// Issue 16: a web page elsewhere can make a browser send a `text/plain`,
/// form or multipart POST (no preflight), or any request with its own
/// `Origin` and `Sec-Fetch-Site: cross-site`. Against a `--no-auth` server
/// (where the token does not stop it) none of them approves, denies,
/// cancels, pauses or starts anything; the page's own requests still work.
#[test]
fn cross_site_requests_change_nothing_even_without_a_token() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = approving_agent(dir.path(), "writing one");
    let session = detach(&home, dir.path(), &script);
    let agents = dir.path().to_str().expect("utf-8");
    let server = serve(&home, &["--no-auth", "--agents", agents]);
    let pending = server.wait_for("/api/approvals", |v| {
        v["approvals"].as_array().is_some_and(|a| !a.is_empty())
    });
    let request_id = pending["approvals"][0]["request"]
        .as_str()
        .expect("request")
        .to_owned();
    let before = server.get(&format!("/api/sessions/{session}")).json();
    let sessions_before = server.get("/api/sessions").json()["sessions"]
        .as_array()
        .expect("sessions")
        .len();
    let addr = server.addr.clone();
    let approve = format!("/api/sessions/{session}/approvals/{request_id}/approve");
    let deny = format!("/api/sessions/{session}/approvals/{request_id}/deny");
    let changes = [
        (approve.clone(), r#"{"resume":true}"#.to_owned()),
        (deny.clone(), r#"{"reason":"x","resume":true}"#.to_owned()),
        (format!("/api/sessions/{session}/cancel"), "{}".to_owned()),
        (format!("/api/sessions/{session}/pause"), "{}".to_owned()),
        (format!("/api/sessions/{session}/resume"), "{}".to_owned()),
        (
            format!("/api/sessions/{session}/send"),
            r#"{"text":"delete everything"}"#.to_owned(),
        ),
        (
            "/api/sessions".to_owned(),
            json!({"agent": dir.path()}).to_string(),
        ),
    ];
    let mut replies = Vec::new();
    for (path, body) in &changes {
        // What a cross-site form or no-cors fetch can carry: refused 415,
        // with a message that says what to send.
        for content_type in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
        ] {
            let reply = request(
                &addr,
                "POST",
                path,
                &[("Content-Type", content_type)],
                body.as_bytes(),
            );
            reply.expect_error(415, "unsupported_media_type");
            assert!(
                reply.json()["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("application/json")),
                "{}",
                reply.json()
            );
            replies.push(reply);
        }
        // A form post of its fields, and a multipart one.
        let form = request(
            &addr,
            "POST",
            path,
            &[("Content-Type", "application/x-www-form-urlencoded")],
            b"resume=true&reason=x&text=hi",
        );
        form.expect_error(415, "unsupported_media_type");
        let multipart = request(
            &addr,
            "POST",
            path,
            &[("Content-Type", "multipart/form-data; boundary=X")],
            b"--X\r\nContent-Disposition: form-data; name=\"resume\"\r\n\r\ntrue\r\n--X--\r\n",
        );
        multipart.expect_error(415, "unsupported_media_type");
        // No type at all (`fetch(url, {method: "POST", mode: "no-cors"})`).
        let untyped = raw_request(
            &addr,
            format!(
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            )
            .as_bytes(),
        );
        untyped.expect_error(415, "unsupported_media_type");
        // JSON, but from another origin or site (as a browser labels it).
        for (name, value) in [
            ("Origin", "http://evil.example".to_owned()),
            ("Origin", "null".to_owned()),
            ("Origin", format!("http://{addr}.evil.example")),
            // Another port of 127.0.0.1 is another origin.
            (
                "Origin",
                format!(
                    "http://127.0.0.1:{}",
                    addr.rsplit(':')
                        .next()
                        .expect("port")
                        .parse::<u16>()
                        .expect("port")
                        ^ 1
                ),
            ),
        ] {
            let reply = request(&addr, "POST", path, &[(name, &value)], body.as_bytes());
            reply.expect_error(403, "cross_origin");
            replies.push(reply);
        }
        for site in ["cross-site", "same-site"] {
            let reply = request(
                &addr,
                "POST",
                path,
                &[("Sec-Fetch-Site", site)],
                body.as_bytes(),
            );
            reply.expect_error(403, "cross_site");
            replies.push(reply);
        }
        replies.extend([form, multipart, untyped]);
    }
    // Reading cross-site is refused too, and nothing is ever shared
    // across origins: no reply carries Access-Control-Allow-Origin, a
    // preflight included.
    request(
        &addr,
        "GET",
        &format!("/api/sessions/{session}/events/stream"),
        &[("Sec-Fetch-Site", "cross-site")],
        b"",
    )
    .expect_error(403, "cross_site");
    replies.push(request(
        &addr,
        "OPTIONS",
        &approve,
        &[
            ("Origin", "http://evil.example"),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type"),
        ],
        b"",
    ));
    replies.push(server.get("/api/sessions"));
    for reply in &replies {
        assert!(
            reply
                .headers
                .iter()
                .all(|(n, _)| !n.to_ascii_lowercase().starts_with("access-control-")),
            "{:?}",
            reply.headers
        );
    }
    // Nothing happened: the approval is pending, the log did not grow, no
    // session was started, the write did not run.
    let after = server.get(&format!("/api/sessions/{session}")).json();
    assert_eq!(after["last_seq"], before["last_seq"], "{after}");
    assert_eq!(after["status"], "paused");
    assert_eq!(after["pending_approvals"], json!([request_id]));
    assert_eq!(
        server.get("/api/sessions").json()["sessions"]
            .as_array()
            .expect("sessions")
            .len(),
        sessions_before
    );
    assert!(!dir.path().join("work/a.txt").exists());
    // The page's own request (same origin, as Chromium labels it) works.
    let own = request(
        &addr,
        "POST",
        &approve,
        &[
            ("Host", &addr),
            ("Origin", &format!("http://{addr}")),
            ("Sec-Fetch-Site", "same-origin"),
            ("Content-Type", "application/json; charset=utf-8"),
        ],
        br#"{"resume":true}"#,
    );
    assert_eq!(own.status, 200, "{}", own.json());
    server.wait_for(&format!("/api/sessions/{session}"), |s| {
        s["last_seq"].as_u64() > before["last_seq"].as_u64()
    });
}

/// Issue 16: README's `longhand serve --agents ./examples` with
/// `DIGEST_HOOK_SECRET` unset starts (the daily-digest webhook disabled,
/// the variable named on stderr) and prints the token; a start that
/// fails (the port taken) writes no token, so the first start that serves
/// is the one that prints it.
#[test]
fn serve_agents_examples_starts_without_a_webhook_secret_and_prints_the_token() {
    let home = Home::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .join("examples");
    let examples = examples.to_str().expect("utf-8");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = taken.local_addr().expect("addr").to_string();
    let failed = home.run(&["serve", "--addr", &port, "--agents", examples]);
    failed.expect_code(2);
    assert!(failed.stderr.contains("cannot listen"), "{}", failed.stderr);
    assert!(
        !home.path().join("serve-token").exists(),
        "a start that did not serve kept a token nobody was shown"
    );
    drop(taken);

    let server = serve(&home, &["--no-worker", "--agents", examples]);
    assert_eq!(server.token.len(), 64, "{:?}", server.banner);
    assert!(
        server
            .banner
            .iter()
            .any(|l| l == &format!("token: {}", server.token)),
        "{:?}",
        server.banner
    );
    let hook = request(
        &server.addr,
        "POST",
        "/hooks/digest-now",
        &[
            ("X-Longhand-Timestamp", "1"),
            ("X-Longhand-Signature", "sha256:00"),
        ],
        b"hello",
    );
    hook.expect_error(503, "hook_disabled");
    // The token server refuses what a page elsewhere could send, too.
    request(
        &server.addr,
        "POST",
        "/api/sessions",
        &[
            ("Authorization", &server.bearer()),
            ("Content-Type", "text/plain"),
        ],
        br#"{"agent":"/x"}"#,
    )
    .expect_error(415, "unsupported_media_type");
    let Server { mut proc, .. } = server;
    let ended = proc.kill();
    assert!(
        ended
            .stderr
            .lines()
            .any(|l| l.starts_with("warning:") && l.contains("DIGEST_HOOK_SECRET")),
        "{}",
        ended.stderr
    );
}

/// Read from `stream` until the server closes it; how long that took and
/// what came.
fn until_closed(mut stream: TcpStream) -> (Duration, Vec<u8>) {
    let start = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                panic!(
                    "still open after 60 s; got {:?}",
                    String::from_utf8_lossy(&got)
                )
            }
            Err(_) => break,
        }
    }
    (start.elapsed(), got)
}

/// Issue 16: a client that stalls holds nothing for long. The head of a
/// request (or the next one on a kept-alive connection) must come within
/// the header timeout (10 s), a body within the body timeout (30 s: 408);
/// a body declared larger than 64 KiB is refused at once. Each stall runs
/// on its own thread, so the test takes about the longest bound.
#[test]
fn stalled_clients_are_dropped_within_the_timeouts() {
    let home = Home::new();
    let server = serve(&home, &["--no-auth", "--no-worker"]);
    let addr = server.addr.clone();
    let header_bound = Duration::from_secs(10 + 5);
    let body_bound = Duration::from_secs(30 + 5);
    // (what, the bytes sent before stalling)
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("nothing sent", Vec::new()),
        (
            "half a head",
            b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".to_vec(),
        ),
        (
            "idle after a kept-alive request",
            b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec(),
        ),
        (
            "a body that stops",
            [
                &b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n"[..],
                &[b' '; 1000][..],
            ]
            .concat(),
        ),
        (
            "a chunked body that stops",
            b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"agent\": \"/x\", \r\n"
                .to_vec(),
        ),
        (
            "10 MB declared",
            b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\n\r\n{\"agent\":"
                .to_vec(),
        ),
    ];
    let threads: Vec<_> = cases
        .into_iter()
        .map(|(what, bytes)| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(&addr).expect("connect");
                stream.write_all(&bytes).expect("send");
                let (took, got) = until_closed(stream);
                (what, took, String::from_utf8_lossy(&got).into_owned())
            })
        })
        .collect();
    for thread in threads {
        let (what, took, got) = thread.join().expect("a stall thread");
        eprintln!("{what}: closed after {took:?}");
        match what {
            "nothing sent" | "half a head" => {
                assert!(took < header_bound, "{what}: {took:?}");
            }
            "idle after a kept-alive request" => {
                assert!(got.starts_with("HTTP/1.1 200"), "{what}: {got}");
                assert!(took < header_bound, "{what}: {took:?}");
            }
            "a body that stops" | "a chunked body that stops" => {
                assert!(got.starts_with("HTTP/1.1 408"), "{what}: {got}");
                assert!(got.contains("body_timeout"), "{what}: {got}");
                assert!(took < body_bound, "{what}: {took:?}");
            }
            _ => {
                assert!(got.starts_with("HTTP/1.1 413"), "{what}: {got}");
                assert!(took < Duration::from_secs(5), "{what}: {took:?}");
            }
        }
    }
    // And the server still answers.
    assert_eq!(request(&addr, "GET", "/api/sessions", &[], b"").status, 200);
}

/// Issue 16: `after` and `Last-Event-ID` take any whole number up to
/// 2^64−1; one past the end of the log (up to 2^63−1, the largest seq a
/// store keeps, and beyond) reads nothing — never a 500 — and the `end`
/// message of a finished session carries its last seq, not the client's
/// number. Negative, too large and non-numbers are 400.
#[test]
fn event_positions_past_the_end_read_nothing_and_end_names_the_last_seq() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = plain_agent(dir.path(), "plain");
    let (ran, session) = run_script(&home, dir.path(), &script);
    ran.expect_code(0);
    let server = serve(&home, &["--no-worker"]);
    let last = server.get(&format!("/api/sessions/{session}")).json()["last_seq"]
        .as_u64()
        .expect("last_seq");
    let past = [
        last,
        last + 7,
        (1u64 << 63) - 1,
        1u64 << 63,
        (1u64 << 63) + 1,
        u64::MAX - 1,
        u64::MAX,
    ];
    for after in past {
        let page = server.get(&format!("/api/sessions/{session}/events?after={after}"));
        assert_eq!(page.status, 200, "after={after}: {}", page.json());
        assert_eq!(page.json(), json!({"events": [], "next": null}), "{after}");
        for mut stream in [server.stream(&session, Some(after)), {
            let mut stream = connect(&server.addr);
            send_request(
                &mut stream,
                "GET",
                &format!("/api/sessions/{session}/events/stream?after={after}"),
                &[("Authorization", &server.bearer())],
                b"",
            );
            let mut reader = BufReader::new(stream);
            let (status, _) = read_head(&mut reader);
            assert_eq!(status, 200, "after={after}");
            EventStream {
                reader,
                text: String::new(),
            }
        }] {
            let end = stream.next().expect("an end message");
            assert_eq!(end.event.as_deref(), Some("end"), "{after}: {end:?}");
            assert_eq!(end.data, last.to_string(), "after={after}");
            assert!(stream.next().is_none());
        }
    }
    let two_pow_64 = "18446744073709551616";
    for bad in [two_pow_64, "-1", "abc", "1e3", "", " 1"] {
        let q = bad.replace(' ', "%20");
        server
            .get(&format!("/api/sessions/{session}/events?after={q}"))
            .expect_error(400, "invalid_request");
        server
            .get(&format!("/api/sessions/{session}/events/stream?after={q}"))
            .expect_error(400, "invalid_request");
        if !bad.is_empty() && !bad.starts_with(' ') {
            request(
                &server.addr,
                "GET",
                &format!("/api/sessions/{session}/events/stream"),
                &[("Authorization", &server.bearer()), ("Last-Event-ID", bad)],
                b"",
            )
            .expect_error(400, "invalid_request");
        }
    }
}

/// The open descriptors and resident memory (KiB) of process `pid`.
#[cfg(target_os = "linux")]
fn footprint(pid: u32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0);
    (fds, rss)
}

/// Issue 16: a burst of concurrent reads leaves no descriptors behind.
/// SQLite parks (does not close) a closed reader's database descriptor
/// while the writer holds its lock, so the store bounds its read
/// connections: 200 clients at once cost at most a few descriptors once
/// they are done, not one each.
#[cfg(target_os = "linux")]
#[test]
fn a_burst_of_reads_leaves_no_descriptors_behind() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = plain_agent(dir.path(), "plain");
    let (ran, session) = run_script(&home, dir.path(), &script);
    ran.expect_code(0);
    let server = serve(&home, &["--no-auth", "--no-worker"]);
    let pid = server.proc.pid();
    let paths = [
        "/api/sessions".to_owned(),
        format!("/api/sessions/{session}"),
        format!("/api/sessions/{session}/events"),
        "/api/approvals".to_owned(),
    ];
    for path in &paths {
        assert_eq!(request(&server.addr, "GET", path, &[], b"").status, 200);
    }
    let (fds_before, rss_before) = footprint(pid);
    let threads: Vec<_> = (0..200)
        .map(|i| {
            let addr = server.addr.clone();
            let path = paths[i % paths.len()].clone();
            std::thread::spawn(move || request(&addr, "GET", &path, &[], b"").status)
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().expect("a client"), 200);
    }
    let (fds_peak, rss_peak) = footprint(pid);
    // Sockets of finished requests close within moments; what stays is
    // the pool (8 connections of 3 descriptors each at most).
    let bound = fds_before + 3 * 8;
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut fds_after, mut rss_after) = footprint(pid);
    while fds_after > bound && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        (fds_after, rss_after) = footprint(pid);
    }
    eprintln!(
        "descriptors: {fds_before} before, {fds_peak} right after, {fds_after} settled; \
         RSS KiB: {rss_before} before, {rss_peak} right after, {rss_after} settled"
    );
    assert!(
        fds_after <= bound,
        "{fds_after} descriptors after the burst, {fds_before} before"
    );
}

/// The big writer's goal: longer than the list shows (120 characters).
const BIG_GOAL: &str = "Write the big file: all of it, one mebibyte of the letter A and one \
                        right-to-left override at its very end, then say that it is done.";

/// Issue 31 §3: an agent whose write of 1 MiB (with a U+202E at its very
/// end, past any preview) waits for approval.
fn big_approval_agent(dir: &Path) -> std::path::PathBuf {
    let big = format!("{}\u{202e}", "A".repeat(1 << 20));
    let script = scripted_agent(
        dir,
        "big-writer",
        "max_steps = 20",
        &[
            tool_turn(
                "writing a lot",
                vec![call(
                    "w1",
                    "fs__write",
                    json!({"path": "/w/big.txt", "content": big}),
                )],
                10,
                1,
            ),
            text_turn("done", 10, 1),
        ],
    );
    let toml = dir.join("agent.toml");
    let mut text = std::fs::read_to_string(&toml).expect("agent.toml");
    text = text.replace(
        "goal = \"Follow the script.\"",
        &format!("goal = \"{BIG_GOAL}\""),
    );
    text.push_str("\n[approve]\nfs = \"writes\"\n");
    std::fs::write(&toml, text).expect("write agent.toml");
    script
}

/// Issue 31 §3: `GET /api/approvals` is polled by every open page every
/// few seconds, so it sends bounded previews, as `…/previews` does: a
/// 1 MiB argument arrives as a few KB, its path whole and its content cut
/// with `…`, saying its size, where the whole is, and the hidden
/// characters of the whole (one U+202E past the preview); each request
/// names its agent and goal. Before, the whole MiB came on every poll.
#[test]
fn approvals_are_bounded_previews_naming_agent_and_goal() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = big_approval_agent(dir.path());
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(3);
    let server = serve(&home, &["--no-worker"]);
    let reply = server.get("/api/approvals");
    assert_eq!(reply.status, 200);
    assert!(
        reply.body.len() < 8 * 1024,
        "{} bytes for one approval",
        reply.body.len()
    );
    let listed = reply.json();
    let a = &listed["approvals"][0];
    assert_eq!(a["session"], session.as_str());
    assert_eq!(a["agent"], "big-writer", "{a}");
    assert_eq!(a["goal"], BIG_GOAL, "{a}");
    assert_eq!(a["input"]["path"], "/w/big.txt", "{a}");
    let content = a["input"]["content"].as_str().expect("content");
    assert!(
        content.ends_with('…') && content.chars().count() < 2100,
        "{content}"
    );
    assert_eq!(a["input_cut"], true);
    assert!(
        a["input_bytes"].as_u64().is_some_and(|b| b > 1 << 20),
        "{a}"
    );
    assert_eq!(
        a["input_hidden"], 1,
        "the U+202E past the preview is counted"
    );
    // The whole is one request away, at the blob route.
    let digest = a["input_blob"]["digest"].as_str().expect("digest");
    let whole = server.get(&format!("/api/sessions/{session}/blobs/{digest}"));
    assert_eq!(whole.status, 200);
    assert_eq!(Some(whole.body.len() as u64), a["input_bytes"].as_u64());
    // `max` bounds it further, and is checked.
    let small = server.get("/api/approvals?max=100");
    assert!(small.body.len() < 2048, "{} bytes", small.body.len());
    for bad in ["?max=0", "?max=99999", "?max=x"] {
        server
            .get(&format!("/api/approvals{bad}"))
            .expect_error(400, "invalid_request");
    }
}

/// Issue 31, the outside tester's second run: bounded previews bound one
/// request, not the poll. Twenty-two sessions wait for approval; the poll
/// sends at most `limit` (default 20) and counts them all in `total`;
/// `limit=0` is the count alone (the badge's poll), `session=` one
/// session's (the session view's), and both are checked.
#[test]
fn approvals_are_bounded_in_number_and_asked_for_by_session() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = approving_agent(dir.path(), "writing one");
    let mut sessions = Vec::new();
    for _ in 0..22 {
        let (run, session) = run_script(&home, dir.path(), &script);
        run.expect_code(3);
        sessions.push(session);
    }
    let server = serve(&home, &["--no-worker"]);
    let all = server.get("/api/approvals");
    assert_eq!(all.status, 200);
    let listed = all.json();
    assert_eq!(listed["total"], 22, "{listed}");
    assert_eq!(listed["approvals"].as_array().map(Vec::len), Some(20));
    let per = all.body.len() / 20;
    eprintln!(
        "GET /api/approvals, 22 waiting: {} bytes for 20 ({per} each)",
        all.body.len()
    );
    let count = server.get("/api/approvals?limit=0");
    let counted = count.json();
    assert_eq!(counted["total"], 22);
    assert_eq!(counted["approvals"], json!([]));
    assert!(count.body.len() < 64, "{} bytes", count.body.len());
    let one = &sessions[21];
    let mine = server.get(&format!("/api/approvals?session={one}")).json();
    assert_eq!(mine["total"], 1, "{mine}");
    assert_eq!(mine["approvals"][0]["session"], one.as_str());
    for bad in ["?limit=201", "?limit=x", "?session=nope"] {
        let reply = server.get(&format!("/api/approvals{bad}"));
        assert_eq!(reply.status, 400, "{bad}: {}", reply.body.len());
    }
}

/// Issue 31: Resume on a limit's pause took the resume (202) and the
/// session paused again at once, saying nothing. Now a resume whose raise
/// does not lift the limit is refused with 409 `limit_still_reached`,
/// naming the limit and how to raise it; one that lifts it is taken. A
/// cancel waiting in a paused session's inbox is not refused: the resume
/// is how it takes effect, and the session then shows as cancelled
/// (`cancelled: true`, in the list too) while the store keeps `failed`.
#[test]
fn a_resume_that_would_pause_again_is_refused_and_a_cancel_shows_as_one() {
    let home = Home::new();
    let limited = |name: &str| {
        let dir = TempDir::new().expect("tempdir");
        let script = scripted_agent(
            dir.path(),
            name,
            "max_steps = 1",
            &[
                tool_turn(
                    "one step only",
                    vec![call(
                        "w1",
                        "fs__write",
                        json!({"path": "/w/a.txt", "content": "a"}),
                    )],
                    10,
                    1,
                ),
                text_turn("done", 10, 1),
            ],
        );
        let (run, session) = run_script(&home, dir.path(), &script);
        run.expect_code(3);
        (dir, session)
    };
    let (_a, raised) = limited("raised");
    let (_b, cancelled) = limited("cancelled");
    let server = serve(&home, &["--no-worker"]);
    let resume =
        |session: &str, body: Value| server.post(&format!("/api/sessions/{session}/resume"), &body);
    for body in [json!({}), json!({"raise": {"max_steps": 1}})] {
        let refused = resume(&raised, body.clone());
        assert_eq!(refused.status, 409, "{body}");
        let error = refused.json();
        assert_eq!(error["error"]["code"], "limit_still_reached", "{error}");
        let message = error["error"]["message"].as_str().expect("message");
        for needle in ["max_steps", "(1 of 1)", "\"raise\"", "--raise max_steps="] {
            assert!(message.contains(needle), "no {needle:?} in {message}");
        }
    }
    assert!(
        of_kind(&home.log(&raised), "resumed").is_empty(),
        "a refused resume leaves no trace"
    );
    let taken = resume(&raised, json!({"raise": {"max_steps": 5}}));
    assert_eq!(taken.status, 202, "{}", taken.json());

    // A cancel of a paused session, then the resume that carries it out.
    let posted = server.post(
        &format!("/api/sessions/{cancelled}/cancel"),
        &json!({"reason": "wrong goal"}),
    );
    assert_eq!(posted.status, 202);
    let taken = resume(&cancelled, json!({}));
    assert_eq!(taken.status, 202, "{}", taken.json());
    home.run(&["worker", "--until-idle"]);
    let detail = server.get(&format!("/api/sessions/{cancelled}")).json();
    assert_eq!(detail["status"], "failed", "{detail}");
    assert_eq!(detail["cancelled"], true, "{detail}");
    let list = server.get("/api/sessions").json();
    let row = |id: &str| {
        list["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .find(|s| s["id"] == id)
            .cloned()
            .expect("listed")
    };
    assert_eq!(row(&cancelled)["cancelled"], true);
    assert_eq!(row(&raised)["cancelled"], false);
}

/// An agent whose one call fails with a tool error (a file that is not
/// there), then finishes.
fn failing_call_agent(dir: &Path) -> std::path::PathBuf {
    scripted_agent(
        dir,
        "failing",
        "max_steps = 20",
        &[
            tool_turn(
                "reading what is not there",
                vec![call("r1", "fs__read", json!({"path": "/w/missing.txt"}))],
                10,
                1,
            ),
            text_turn("done anyway", 10, 1),
        ],
    )
}

/// Issue 31 §3 in Chromium (tests/browser/honest.mjs): the page never
/// misleads. A failed call is not pinned over the page and says its error
/// in words; the waterfall times tools by their receipts and draws checks;
/// calls cut by a pause or a cancel are not "running"; a cancel is asked
/// for and shown as cancelled; approvals are bounded, name their agent and
/// goal, and show the whole on request; the new-session form's goal
/// follows the agent it will start; Resume on a limit's pause says which
/// limit instead of re-pausing; `?` costs and cut labels explain
/// themselves. The logs that no scripted run makes (a 509 ms write
/// recorded in one instant, a command check, a pause over a running call,
/// a cancel) are served to the page by the script itself, as the API
/// would, through Playwright's routing.
#[test]
fn the_page_never_misleads_in_chromium() {
    let (root, chromium) = match browser() {
        Ok(found) => found,
        Err(missing) if std::env::var("LONGHAND_REQUIRE_EXTERNAL").as_deref() == Ok("1") => {
            panic!("LONGHAND_REQUIRE_EXTERNAL=1 and the browser test cannot run: {missing}")
        }
        Err(missing) => {
            eprintln!("skipped the browser test: {missing}; set it up with .ci/setup-browser.sh");
            return;
        }
    };
    let home = Home::new();
    let agents = TempDir::new().expect("tempdir");
    let big_dir = agents.path().join("big-writer");
    let script = big_approval_agent(&big_dir);
    let (run, big) = run_script(&home, &big_dir, &script);
    run.expect_code(3);
    let failing_dir = agents.path().join("failing");
    let script = failing_call_agent(&failing_dir);
    // Recorded as the cassette its file names, so the page's form can
    // start it again, offline.
    let recorded = home.run(&[
        "run",
        failing_dir.to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--record",
        failing_dir
            .join("unused-cassette.json")
            .to_str()
            .expect("utf-8"),
        "--json",
    ]);
    recorded.expect_code(0);
    let failing = crate::support::session_of_json(&recorded.stdout[0]);
    let limited_dir = TempDir::new().expect("tempdir");
    let script = scripted_agent(
        limited_dir.path(),
        "limited",
        "max_steps = 1",
        &[
            tool_turn(
                "one step only",
                vec![call(
                    "w1",
                    "fs__write",
                    json!({"path": "/w/a.txt", "content": "a"}),
                )],
                10,
                1,
            ),
            text_turn("done", 10, 1),
        ],
    );
    let (run, limited) = run_script(&home, limited_dir.path(), &script);
    run.expect_code(3);
    // A second one, cancelled by its operator: the cancel is read at the
    // resume, which ends it.
    let (run, cancelled) = run_script(&home, limited_dir.path(), &script);
    run.expect_code(3);
    home.run(&["cancel", &cancelled, "--reason", "wrong goal"])
        .expect_code(0);
    home.run(&["resume", &cancelled]);
    let server = serve(
        &home,
        &[
            "--no-worker",
            "--agents",
            agents.path().to_str().expect("utf-8"),
        ],
    );
    let profile = TempDir::new().expect("profile dir");
    let out = std::process::Command::new("node")
        .arg(root.join("honest.mjs"))
        .current_dir(&root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", profile.path())
        .env("LONGHAND_URL", format!("http://{}", server.addr))
        .env("LONGHAND_TOKEN", &server.token)
        .env("LONGHAND_BIG", &big)
        .env("LONGHAND_FAILING", &failing)
        .env("LONGHAND_LIMITED", &limited)
        .env("LONGHAND_CANCELLED", &cancelled)
        .env("LONGHAND_BIG_GOAL", BIG_GOAL)
        .env(
            "LONGHAND_BIG_AGENT",
            std::fs::canonicalize(&big_dir).expect("canonical"),
        )
        .env(
            "LONGHAND_FAILING_AGENT",
            std::fs::canonicalize(&failing_dir).expect("canonical"),
        )
        .env("CHROMIUM", &chromium)
        .env("PROFILE_DIR", profile.path().join("chromium"))
        .env(
            "SCREENSHOTS",
            std::env::var_os("LONGHAND_SCREENSHOTS").unwrap_or_default(),
        )
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("browser test passed"),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
    // Resume on the limit's pause posted nothing: still paused, not resumed.
    let still = server.get(&format!("/api/sessions/{limited}")).json();
    assert_eq!(still["status"], "paused", "{still}");
    let log = server
        .get(&format!("/api/sessions/{limited}/events"))
        .json();
    assert!(
        !log["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["type"] == "resumed"),
        "{log}"
    );
    // The form started the failing agent by its typed path with its own
    // goal, not the big writer's.
    let list = server.get("/api/sessions?agent=failing").json();
    let sessions = list["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 2, "{list}");
    assert!(
        sessions.iter().all(|s| s["goal"] == "Follow the script."),
        "{list}"
    );
}
