//! `longhand mcp`: the official MCP SDK clients against the real binary,
//! and the protocol's edges spoken by hand.
//!
//! The SDK tests run `tests/mcp/client.py` (PyPI `mcp`) and
//! `tests/mcp/client.mjs` (npm `@modelcontextprotocol/sdk`), over stdio and
//! over Streamable HTTP; each script builds its agent, starts the server,
//! and exits non-zero naming the first failed expectation (see the
//! scripts' docs for what they check). `.ci/setup-mcp.sh` installs both
//! SDKs; without them these tests say what they skipped, or fail when
//! `LONGHAND_REQUIRE_EXTERNAL=1`.
//!
//! The hand-spoken tests need nothing installed and never skip: lifecycle
//! and version negotiation, malformed frames, and the HTTP transport's
//! header, session and Origin checks.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{BIN, Home, write};

/// How long one SDK script may run before it is killed and fails.
const SCRIPT_LIMIT: Duration = Duration::from_secs(300);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ sits in the workspace root")
        .to_owned()
}

/// Fail under `LONGHAND_REQUIRE_EXTERNAL=1`; otherwise say what was skipped.
fn missing(what: &str) {
    let how = "run `eval \"$(bash .ci/setup-mcp.sh)\"` to install it";
    if std::env::var("LONGHAND_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
        panic!("{what} is missing and LONGHAND_REQUIRE_EXTERNAL=1: {how}");
    }
    eprintln!("skipped: {what} is missing; {how}");
}

/// The Python with the MCP SDK: `LONGHAND_MCP_PYTHON`, else the setup
/// script's venv.
fn sdk_python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LONGHAND_MCP_PYTHON").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let venv = repo_root().join("tests/mcp/.venv/bin/python");
    venv.is_file().then_some(venv)
}

/// Node, with the TypeScript SDK installed under tests/mcp.
fn sdk_node() -> Option<PathBuf> {
    let sdk = repo_root().join("tests/mcp/node_modules/@modelcontextprotocol/sdk/package.json");
    if !sdk.is_file() {
        return None;
    }
    let node = std::env::var_os("LONGHAND_MCP_NODE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("node"));
    let works = Command::new(&node)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    works.then_some(node)
}

/// Run an SDK script to its end (killed past [`SCRIPT_LIMIT`]) and assert
/// it passed.
fn run_script(interpreter: &Path, script: &str, transport: &str) {
    let home = Home::new();
    let mut child = Command::new(interpreter)
        .arg(repo_root().join("tests/mcp").join(script))
        .args([BIN, transport])
        .env("LONGHAND_HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", interpreter.display()));
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + SCRIPT_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll the script") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    let Some(status) = status else {
        panic!(
            "{script} {transport} ran past {SCRIPT_LIMIT:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    };
    assert!(
        status.success(),
        "{script} {transport} failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let summary = stdout.lines().last().unwrap_or("");
    assert!(
        summary.starts_with(&format!("ok: {transport} ")) && summary.ends_with(" checks"),
        "{script} {transport} printed no summary:\n{stdout}"
    );
    // Every call left a receipt on the server's stderr.
    assert!(
        stderr.contains("receipt {"),
        "no receipts on stderr:\n{stderr}"
    );
    eprintln!("{script}: {summary}");
}

#[test]
fn python_sdk_over_stdio() {
    match sdk_python() {
        Some(python) => run_script(&python, "client.py", "stdio"),
        None => missing("the MCP Python SDK (tests/mcp/.venv or LONGHAND_MCP_PYTHON)"),
    }
}

#[test]
fn python_sdk_over_http() {
    match sdk_python() {
        Some(python) => run_script(&python, "client.py", "http"),
        None => missing("the MCP Python SDK (tests/mcp/.venv or LONGHAND_MCP_PYTHON)"),
    }
}

#[test]
fn typescript_sdk_over_stdio() {
    match sdk_node() {
        Some(node) => run_script(&node, "client.mjs", "stdio"),
        None => missing("the MCP TypeScript SDK (tests/mcp/node_modules) or node"),
    }
}

#[test]
fn typescript_sdk_over_http() {
    match sdk_node() {
        Some(node) => run_script(&node, "client.mjs", "http"),
        None => missing("the MCP TypeScript SDK (tests/mcp/node_modules) or node"),
    }
}

/// `longhand mcp --stdio` spoken to line by line.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(home: &Home, args: &[&str]) -> Self {
        let mut child = home
            .cmd(&[&["mcp", "--stdio"], args].concat())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start longhand mcp");
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Self {
            child,
            stdin: Some(stdin),
            stdout,
        }
    }

    fn send(&mut self, frame: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{frame}").expect("write to the server");
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("read from the server");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    fn ask(&mut self, message: Value) -> Value {
        self.send(&message.to_string());
        self.recv()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn init(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "hand", "version": "0"}}})
}

#[test]
fn stdio_lifecycle_versions_and_bad_frames() {
    let home = Home::new();
    let ws = home.path().join("ws");
    write(&ws.join("a.json"), r#"{"n": 41}"#);
    let dir = format!("{}:/workspace:ro", ws.display());
    let args = ["--tool", "json", "--dir", dir.as_str()];
    let mut s = Server::start(&home, &args);

    // A 2026 client's probe is "method not found", not a hang-up.
    let probe = s.ask(json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover"}));
    assert_eq!(probe["error"]["code"], json!(-32601), "{probe}");
    let early = s.ask(json!({"jsonrpc": "2.0", "id": "e", "method": "tools/list"}));
    assert_eq!(early["error"]["code"], json!(-32600), "{early}");
    assert_eq!(early["id"], json!("e"));
    s.send("{not json");
    assert_eq!(s.recv()["error"]["code"], json!(-32700));
    s.send(r#"[{"jsonrpc":"2.0","id":9,"method":"ping"}]"#);
    assert_eq!(s.recv()["error"]["code"], json!(-32600));

    // An old client gets its version, and tools without annotations.
    let answer = s.ask(init("2024-11-05"));
    assert_eq!(answer["result"]["protocolVersion"], json!("2024-11-05"));
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let list = s.ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let tools = list["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["query", "query_file"]);
    assert!(
        tools.iter().all(|t| t.get("annotations").is_none()),
        "{list}"
    );
    assert_eq!(tools[0]["inputSchema"]["type"], json!("object"));

    let call = s.ask(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "query_file", "arguments": {"filter": ".n + 1", "path": "a.json"}}}),
    );
    let result = &call["result"];
    assert_eq!(result["isError"], json!(false), "{call}");
    assert_eq!(
        result["content"][0]["text"],
        json!(r#"{"results":[42],"truncated":false}"#)
    );
    // structuredContent arrived in 2025-06-18.
    assert!(result.get("structuredContent").is_none(), "{call}");

    let bad = s.ask(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "query", "arguments": {"filter": 7}}}),
    );
    assert_eq!(bad["result"]["isError"], json!(true), "{bad}");
    let text = bad["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.starts_with("invalid input"), "{text}");
    drop(s);

    // A version we do not speak is answered with our latest.
    let mut s = Server::start(&home, &args);
    let answer = s.ask(init("2026-07-28"));
    assert_eq!(answer["result"]["protocolVersion"], json!("2025-11-25"));
    let list = s.ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    assert_eq!(
        list["result"]["tools"][0]["annotations"]["readOnlyHint"],
        json!(true)
    );
    // Closing stdin ends the server cleanly.
    drop(s.stdin.take());
    let status = s.child.wait().expect("wait");
    assert!(status.success(), "{status}");
}

#[test]
fn refusals_at_start() {
    let home = Home::new();
    let remote = home.run(&["mcp", "--http", "0.0.0.0:0", "--tool", "json"]);
    remote.expect_code(2);
    assert!(remote.stderr.contains("loopback"), "{}", remote.stderr);
    let only = home.run(&["mcp", "--stdio", "--tool", "json", "--only", "jq"]);
    only.expect_code(2);
    assert!(only.stderr.contains("has no tool `jq`"), "{}", only.stderr);
    let neither = home.run(&["mcp", "--stdio"]);
    neither.expect_code(2);
}

/// One HTTP/1.1 exchange: (status, headers lower-cased, body).
fn http(
    addr: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {raw}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn http_sessions_headers_and_origins() {
    let home = Home::new();
    let mut child = home
        .cmd(&["mcp", "--http", "127.0.0.1:0", "--tool", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start longhand mcp --http");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("read the address");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.strip_suffix("/mcp\n"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    let _drain = std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let accept = ("Accept", "application/json, text/event-stream");
    let json_type = ("Content-Type", "application/json");
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

    // DNS rebinding: a foreign Origin or Host is refused before anything.
    let (status, _, _) = http(
        &addr,
        "POST",
        &[accept, json_type, ("Origin", "https://evil.example")],
        &init("2025-11-25").to_string(),
    );
    assert_eq!(status, 403);
    let (status, _, _) = http(
        &addr,
        "POST",
        &[accept, json_type, ("Host", "evil.example")],
        &init("2025-11-25").to_string(),
    );
    assert_eq!(status, 403);
    let (status, headers, _) = http(&addr, "GET", &[("Accept", "text/event-stream")], "");
    assert_eq!(status, 405);
    assert_eq!(header(&headers, "allow"), Some("POST, DELETE"));
    let (status, _, _) = http(&addr, "POST", &[accept, json_type], list);
    assert_eq!(status, 400, "no session");

    // A page served from another port of this machine is another site:
    // refused unless named with --allow-origin. So is a request a browser
    // sends across sites without asking (a form, text/plain).
    let (status, _, _) = http(
        &addr,
        "POST",
        &[accept, json_type, ("Origin", "http://localhost:6274")],
        &init("2025-11-25").to_string(),
    );
    assert_eq!(status, 403);
    let (status, _, _) = http(
        &addr,
        "POST",
        &[accept, json_type, ("Sec-Fetch-Site", "same-site")],
        &init("2025-11-25").to_string(),
    );
    assert_eq!(status, 403);
    for form in ["text/plain", "application/x-www-form-urlencoded"] {
        let (status, _, _) = http(
            &addr,
            "POST",
            &[accept, ("Content-Type", form)],
            &init("2025-11-25").to_string(),
        );
        assert_eq!(status, 415, "{form}");
    }

    let own = format!("http://{addr}");
    let (status, headers, body) = http(
        &addr,
        "POST",
        &[accept, json_type, ("Origin", own.as_str())],
        &init("2025-11-25").to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let session = header(&headers, "mcp-session-id")
        .expect("a session id")
        .to_owned();
    assert_eq!(session.len(), 32, "128 random bits in hex: {session}");
    let with = |version: &'static str| {
        vec![
            accept,
            json_type,
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", version),
        ]
    };
    let (status, _, _) = http(
        &addr,
        "POST",
        &with("2025-11-25"),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(status, 202);
    let (status, _, body) = http(&addr, "POST", &with("2025-11-25"), list);
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(listed["result"]["tools"][0]["name"], json!("query"));
    // A version we do not speak, or not the session's, is refused.
    let (status, _, _) = http(&addr, "POST", &with("2099-01-01"), list);
    assert_eq!(status, 400);
    let (status, _, _) = http(&addr, "POST", &with("2025-06-18"), list);
    assert_eq!(status, 400);
    let (status, _, _) = http(
        &addr,
        "POST",
        &[accept, json_type, ("Mcp-Session-Id", "0123")],
        list,
    );
    assert_eq!(status, 404, "unknown session");

    // A call answers as an SSE stream.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "query", "arguments": {"filter": ".[0]", "input": [5]}}});
    let (status, headers, body) = http(&addr, "POST", &with("2025-11-25"), &call.to_string());
    assert_eq!(status, 200);
    assert!(
        header(&headers, "content-type").is_some_and(|t| t.starts_with("text/event-stream")),
        "{headers:?}"
    );
    let data = body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no event in {body:?}"));
    let answer: Value = serde_json::from_str(data).expect("JSON event");
    assert_eq!(answer["id"], json!(3));
    assert_eq!(answer["result"]["structuredContent"]["results"], json!([5]));

    // DELETE ends the session.
    let (status, _, _) = http(&addr, "DELETE", &with("2025-11-25"), "");
    assert_eq!(status, 204);
    let (status, _, _) = http(&addr, "POST", &with("2025-11-25"), list);
    assert_eq!(status, 404);

    // Past the cap, the least recently used idle session makes room.
    let open = |i: usize| {
        let (status, headers, body) = http(
            &addr,
            "POST",
            &[accept, json_type],
            &init("2025-06-18").to_string(),
        );
        assert_eq!(status, 200, "session {i}: {body}");
        header(&headers, "mcp-session-id")
            .expect("a session id")
            .to_owned()
    };
    let first = open(0);
    let second = open(1);
    let ask = |session: &str| {
        let headers = [accept, json_type, ("Mcp-Session-Id", session)];
        http(&addr, "POST", &headers, list).0
    };
    // `first` is now more recently used than `second`.
    assert_eq!(ask(&first), 200);
    let mut last = String::new();
    for i in 2..=256 {
        last = open(i);
    }
    assert_eq!(ask(&second), 404, "the least recently used session ended");
    assert_eq!(ask(&first), 200);
    assert_eq!(ask(&last), 200);

    // SIGTERM ends the server.
    // SAFETY: signals a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// The server's memory growth is measured against this: what it holds
/// after start, `initialize` and one call (the component compiled and
/// instantiated once).
fn warmed(s: &mut Server) -> u64 {
    let answer = s.ask(init("2025-11-25"));
    assert!(answer.get("result").is_some(), "{answer}");
    let call = s.ask(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "query", "arguments": {"filter": "[range(80000)]", "input": null}}}),
    );
    assert_eq!(call["result"]["isError"], json!(false), "{call}");
    status_kib(s.child.id(), "VmHWM")
}

#[test]
fn stdio_skips_an_over_long_line_in_constant_memory() {
    let home = Home::new();
    let mut s = Server::start(&home, &["--tool", "json"]);
    let before = warmed(&mut s);
    // 256 MiB without a newline, then a request on the same stream. The
    // server must answer the first with a parse error and the second
    // correctly, holding no more than one line's bound of it.
    const LONG: usize = 256 << 20;
    let stdin = s.stdin.as_mut().expect("stdin");
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..LONG / chunk.len() {
        stdin.write_all(&chunk).expect("write the long line");
    }
    writeln!(stdin).expect("newline");
    s.send(r#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#);
    let refused = s.recv();
    assert_eq!(refused["error"]["code"], json!(-32700), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(&LONG.to_string()), "{message}");
    let ping = s.recv();
    assert_eq!(ping["id"], json!("after"), "{ping}");
    assert_eq!(ping["result"], json!({}));
    let grown = status_kib(s.child.id(), "VmHWM").saturating_sub(before);
    eprintln!("over-long line of {LONG} bytes: peak memory grew {grown} KiB");
    // The bound of one line (16 MiB) and its buffer's growth, no more.
    assert!(grown < 40 << 10, "peak memory grew {grown} KiB");
}

#[test]
fn stdio_stops_reading_while_answers_wait_and_stays_bounded() {
    let home = Home::new();
    let mut s = Server::start(&home, &["--tool", "json"]);
    let before = warmed(&mut s);
    // 600 calls whose answers are ~470 KB each (the output as text and as
    // structuredContent), written by a thread while nobody reads stdout:
    // unbounded, the answers alone would be 280 MB. Each request carries
    // 1 KB the filter ignores, so that 600 of them are far more than the
    // pipe and the server's read buffer hold.
    const CALLS: u64 = 600;
    let mut stdin = s.stdin.take().expect("stdin");
    let pad = "p".repeat(1000);
    let writer = std::thread::spawn(move || {
        for id in 0..CALLS {
            let call = json!({"jsonrpc": "2.0", "id": 100 + id, "method": "tools/call",
                "params": {"name": "query",
                "arguments": {"filter": "[range(40000)]", "input": pad}}});
            writeln!(stdin, "{call}").expect("write a call");
        }
        stdin
    });
    // Wait until the server stops making progress: its memory settles.
    let pid = s.child.id();
    let mut last = 0;
    let mut still = 0;
    let started = Instant::now();
    while still < 6 && started.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(500));
        let now = status_kib(pid, "VmRSS");
        still = if now.abs_diff(last) < 1024 {
            still + 1
        } else {
            0
        };
        last = now;
    }
    assert!(
        !writer.is_finished(),
        "the server read all {CALLS} calls while none was answered"
    );
    let stalled = status_kib(pid, "VmHWM").saturating_sub(before);
    // Now read: every call is answered, in full.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..CALLS {
        let answer = s.recv();
        assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(text.len() > 200_000, "{} bytes", text.len());
        seen.insert(answer["id"].as_u64().expect("id"));
    }
    assert_eq!(seen.len() as u64, CALLS);
    s.stdin = Some(writer.join().expect("the writer"));
    let grown = status_kib(pid, "VmHWM").saturating_sub(before);
    eprintln!(
        "{CALLS} calls, stdout unread: peak grew {stalled} KiB while stalled, {grown} KiB in all"
    );
    assert!(grown < 64 << 10, "peak memory grew {grown} KiB");
}

#[test]
fn stdio_refuses_arguments_that_are_not_an_object() {
    let home = Home::new();
    let mut s = Server::start(&home, &["--tool", "json"]);
    s.ask(init("2025-11-25"));
    for (id, arguments) in [json!([]), json!("{}"), json!(1), json!(false)]
        .into_iter()
        .enumerate()
    {
        let answer = s.ask(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "query", "arguments": arguments}}));
        assert_eq!(answer["id"], json!(id), "{answer}");
        assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains("must be an object"), "{message}");
    }
    // A name or method the client made up is cut in the error.
    let long = "t".repeat(8 << 20);
    let answer = s.ask(json!({"jsonrpc": "2.0", "id": "n", "method": "tools/call",
        "params": {"name": long}}));
    assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
    assert!(
        answer.to_string().len() < 1024,
        "{} bytes",
        answer.to_string().len()
    );
    let answer = s.ask(json!({"jsonrpc": "2.0", "id": "m", "method": long}));
    assert_eq!(answer["error"]["code"], json!(-32601));
    assert!(
        answer.to_string().len() < 1024,
        "{} bytes",
        answer.to_string().len()
    );
}

#[test]
fn a_read_only_grant_serves_no_tool_that_can_only_fail() {
    let home = Home::new();
    let ws = home.path().join("ws");
    write(&ws.join("a.txt"), "kept");
    let ro = format!("{}:/workspace:ro", ws.display());
    let mut s = Server::start(&home, &["--tool", "fs", "--dir", &ro]);
    s.ask(init("2025-11-25"));
    let list = s.ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let tools = list["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"read"), "{names:?}");
    assert!(
        !names.contains(&"write") && !names.contains(&"edit"),
        "{names:?}"
    );
    assert!(
        tools
            .iter()
            .all(|t| t["annotations"]["readOnlyHint"] == json!(true)),
        "{list}"
    );
    // Calling one anyway is an unknown tool; the file is untouched.
    let call = s.ask(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "write", "arguments": {"path": "/workspace/a.txt", "content": "x"}}}),
    );
    assert_eq!(call["error"]["code"], json!(-32602), "{call}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "kept");
    drop(s);

    // The same directory read-write: they are served.
    let rw = format!("{}:/workspace:rw", ws.display());
    let mut s = Server::start(&home, &["--tool", "fs", "--dir", &rw]);
    s.ask(init("2025-11-25"));
    let list = s.ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let names: Vec<String> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    assert!(names.iter().any(|n| n == "write") && names.iter().any(|n| n == "edit"));
    drop(s);

    // Asking for one by name under a read-only grant is refused at start,
    // saying what to grant; the stderr note names what is left out.
    let only = home.run(&[
        "mcp", "--stdio", "--tool", "fs", "--dir", &ro, "--only", "edit",
    ]);
    only.expect_code(2);
    assert!(only.stderr.contains("read-write"), "{}", only.stderr);
}
