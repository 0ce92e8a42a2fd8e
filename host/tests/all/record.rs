//! `longhand tool call --record` and `longhand tool test`: a call against a
//! loopback server, with a secret granted, written to a fixture that holds
//! no secret; the fixture replayed with the server gone; and replays that
//! must fail — a request that differs, one that was never recorded, an
//! output that differs — each with a diff that says what.
//!
//! The tool is the built-in `http` (its `get` makes one request and returns
//! status, headers and body), so no guest is built for most tests; one
//! builds a Python tool that fetches through `longhand_tool.http` (skipped
//! without componentize-py, as in [`crate::author`]), where the template's
//! `greet` fixtures are also replayed per language.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use base64::Engine as _;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Ended, Home, run};

/// One request's headers, lowercase names.
type Headers = Vec<(String, String)>;

/// A loopback HTTP/1.1 server that answers every request with 200 and a
/// JSON body naming its path and echoing its `authorization` header (in
/// the body and in `x-echo-auth`), as a careless real server might.
struct Echo {
    port: u16,
    seen: Arc<Mutex<Vec<Headers>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Echo {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("local addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                if let Some(headers) = answer(stream) {
                    seen2.lock().unwrap().push(headers);
                }
            }
        });
        Self {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Each request's headers, lowercase names.
    fn requests(&self) -> Vec<Headers> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Echo {
    /// Stop listening: afterwards the port refuses connections.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(stream: TcpStream) -> Option<Headers> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    let path = first.split(' ').nth(1)?.to_owned();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
        if name == "content-length" {
            length = value.parse().ok()?;
        }
        headers.push((name, value));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let auth = headers
        .iter()
        .find(|(n, _)| n == "authorization")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let body = json!({"path": path, "auth": auth}).to_string();
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-echo-auth: {auth}\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    Some(headers)
}

/// A secret fresh per test, long enough that redaction knows it anywhere.
fn secret() -> String {
    format!(
        "lh-rec-secret-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// `longhand tool call http get` against `server`, with `secret` granted
/// for it, recorded to `fixture`.
fn record(home: &Home, server: &Echo, secret: &str, fixture: &Path, path: &str) -> Ended {
    let input = json!({"url": server.url(path)}).to_string();
    let host = server.host();
    let secret_spec = format!("LH_REC_TOKEN@{host}");
    let mut cmd = home.cmd(&[
        "tool",
        "call",
        "http",
        "get",
        "--input",
        &input,
        "--allow-host",
        &host,
        "--secret",
        &secret_spec,
        "--record",
        fixture.to_str().unwrap(),
    ]);
    cmd.env("LH_REC_TOKEN", secret);
    run(cmd)
}

/// `longhand tool test DIR --component http`.
fn test(home: &Home, dir: &Path) -> Ended {
    home.run(&["tool", "test", dir.to_str().unwrap(), "--component", "http"])
}

/// A project dir with one fixture recorded against a live server, then
/// the server stopped; returns the dir and the fixture's path.
fn recorded(home: &Home) -> (TempDir, PathBuf, String) {
    let dir = TempDir::new().unwrap();
    let fixture = dir.path().join("fixtures/get.json");
    let server = Echo::start();
    let secret = secret();
    record(home, &server, &secret, &fixture, "/hello?x=1").expect_code(0);
    assert_eq!(server.requests().len(), 1);
    drop(server);
    (dir, fixture, secret)
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn write(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

#[test]
fn a_recording_keeps_input_exchange_and_output_but_no_secret() {
    let home = Home::new();
    let dir = TempDir::new().unwrap();
    let fixture = dir.path().join("fixtures/get.json");
    let server = Echo::start();
    let secret = secret();
    let out = record(&home, &server, &secret, &fixture, "/hello?x=1");
    out.expect_code(0);
    assert!(out.stderr.contains("recorded to"), "{}", out.stderr);
    assert!(out.stderr.contains("1 HTTP exchange"), "{}", out.stderr);

    // The server got the credential; the host added it.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0]
            .iter()
            .any(|(n, v)| n == "authorization" && *v == format!("Bearer {secret}")),
        "{requests:?}"
    );

    // The file holds none of it: not raw, not base64, not hex.
    let text = std::fs::read_to_string(&fixture).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("Bearer {secret}"));
    for form in [secret.clone(), b64, hex::encode(&secret)] {
        assert!(!text.contains(&form), "the fixture holds `{form}`:\n{text}");
    }
    let f: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(f["tool"], "get");
    assert_eq!(f["input"]["url"], server.url("/hello?x=1"));
    assert_eq!(f["grants"]["hosts"], json!([server.host()]));
    assert_eq!(
        f["grants"]["secrets"],
        json!([format!("LH_REC_TOKEN@{}", server.host())])
    );
    let exchange = &f["http"][0];
    assert_eq!(f["http"].as_array().unwrap().len(), 1, "{f:#}");
    assert_eq!(exchange["request"]["method"], "GET");
    assert_eq!(exchange["request"]["url"], server.url("/hello?x=1"));
    assert_eq!(
        exchange["request"]["secrets_added"],
        json!(["LH_REC_TOKEN"])
    );
    assert_eq!(exchange["response"]["status"], 200);
    // The echo came back redacted, in the header and the body, and so
    // did the output the tool made of it.
    let headers = exchange["response"]["headers"].as_array().unwrap();
    assert!(
        headers.contains(&json!(["x-echo-auth", "Bearer [REDACTED]"])),
        "{headers:?}"
    );
    let body: Value = serde_json::from_str(exchange["response"]["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"path": "/hello?x=1", "auth": "Bearer [REDACTED]"})
    );
    assert_eq!(f["output"]["status"], 200);
    assert!(
        f["output"]["body"]
            .as_str()
            .unwrap()
            .contains("Bearer [REDACTED]")
    );
    assert!(f.get("error").is_none());
}

#[test]
fn a_replay_with_the_server_stopped_passes() {
    let home = Home::new();
    let (dir, _fixture, _) = recorded(&home);
    // Nothing listens on the port now: a request that reached the network
    // would be refused, and the output would differ.
    let out = test(&home, dir.path());
    out.expect_code(0);
    let stdout = out.stdout_text();
    assert!(stdout.contains("ok    get"), "{stdout}");
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
}

#[test]
fn a_request_that_differs_from_the_recording_fails_with_a_diff() {
    let home = Home::new();
    let (dir, fixture, _) = recorded(&home);
    let mut f = read(&fixture);
    let recorded_url = f["http"][0]["request"]["url"].as_str().unwrap().to_owned();
    let other = recorded_url.replace("/hello", "/elsewhere");
    f["http"][0]["request"]["url"] = json!(other);
    f["http"][0]["request"]["headers"]
        .as_array_mut()
        .unwrap()
        .push(json!(["x-expected", "1"]));
    write(&fixture, &f);
    let out = test(&home, dir.path());
    out.expect_code(1);
    let stdout = out.stdout_text();
    assert!(stdout.contains("FAIL  get"), "{stdout}");
    assert!(
        stdout.contains("request 1 differs from the recording"),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("- url {other}")), "{stdout}");
    assert!(
        stdout.contains(&format!("+ url {recorded_url}")),
        "{stdout}"
    );
    assert!(stdout.contains("- header x-expected: 1"), "{stdout}");
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");
}

#[test]
fn a_request_that_was_never_recorded_fails_and_so_does_one_never_made() {
    let home = Home::new();
    let (dir, fixture, _) = recorded(&home);
    let f = read(&fixture);
    let url = f["http"][0]["request"]["url"].as_str().unwrap().to_owned();

    let mut none = f.clone();
    none["http"] = json!([]);
    write(&fixture, &none);
    let out = test(&home, dir.path());
    out.expect_code(1);
    let stdout = out.stdout_text();
    assert!(
        stdout.contains(&format!("request 1 was not recorded: GET {url}")),
        "{stdout}"
    );

    let mut two = f.clone();
    let again = two["http"][0].clone();
    two["http"].as_array_mut().unwrap().push(again);
    write(&fixture, &two);
    let out = test(&home, dir.path());
    out.expect_code(1);
    let stdout = out.stdout_text();
    assert!(
        stdout.contains(&format!(
            "request 2 was recorded but the tool did not make it: GET {url}"
        )),
        "{stdout}"
    );
}

#[test]
fn an_output_that_differs_from_the_recording_fails_with_a_diff() {
    let home = Home::new();
    let (dir, fixture, _) = recorded(&home);
    let mut f = read(&fixture);
    f["output"]["status"] = json!(201);
    write(&fixture, &f);
    let out = test(&home, dir.path());
    out.expect_code(1);
    let stdout = out.stdout_text();
    assert!(
        stdout.contains("the result differs from the recording"),
        "{stdout}"
    );
    assert!(stdout.contains("-     \"status\": 201"), "{stdout}");
    assert!(stdout.contains("+     \"status\": 200"), "{stdout}");
    // The requests themselves still matched.
    assert!(!stdout.contains("differs from the recording (- expected, + got):\n      - url"));

    // `--update` takes the result the component gives now, and says so;
    // the fixture then passes, its exchanges as recorded.
    let before = read(&fixture);
    let updated = home.run(&[
        "tool",
        "test",
        dir.path().to_str().unwrap(),
        "--component",
        "http",
        "--update",
    ]);
    updated.expect_code(0);
    let stdout = updated.stdout_text();
    assert!(stdout.contains("UPDATED get"), "{stdout}");
    assert!(stdout.contains("0 passed, 1 updated, 0 failed"), "{stdout}");
    let after = read(&fixture);
    assert_eq!(after["output"]["status"], json!(200));
    assert_eq!(after["http"], before["http"]);
    test(&home, dir.path()).expect_code(0);
}

/// `--update` rewrites only a result: a fixture whose requests differ too
/// is left as it was and fails, saying to record it again.
#[test]
fn update_leaves_a_fixture_whose_requests_differ() {
    let home = Home::new();
    let (dir, fixture, _) = recorded(&home);
    let mut f = read(&fixture);
    let url = f["http"][0]["request"]["url"].as_str().unwrap().to_owned();
    f["http"][0]["request"]["url"] = json!(url.replace("/hello", "/elsewhere"));
    f["output"]["status"] = json!(201);
    write(&fixture, &f);
    let text = std::fs::read_to_string(&fixture).unwrap();
    let out = home.run(&[
        "tool",
        "test",
        dir.path().to_str().unwrap(),
        "--component",
        "http",
        "--update",
    ]);
    out.expect_code(1);
    assert!(
        out.stdout_text().contains("record it again"),
        "{}",
        out.stdout_text()
    );
    assert_eq!(std::fs::read_to_string(&fixture).unwrap(), text);
}

#[test]
fn the_replay_is_granted_only_the_recorded_hosts() {
    let home = Home::new();
    let (dir, fixture, _) = recorded(&home);
    let mut f = read(&fixture);
    // The same exchange, but the grant it was recorded under is gone: the
    // request is refused by policy before the tape is asked.
    f["grants"]["hosts"] = json!(["127.0.0.2:1"]);
    write(&fixture, &f);
    let out = test(&home, dir.path());
    out.expect_code(1);
    let stdout = out.stdout_text();
    assert!(
        stdout.contains("request 1 was recorded but the tool did not make it"),
        "{stdout}"
    );
}

#[test]
fn what_cannot_be_recorded_or_tested_is_refused_saying_what_to_do() {
    let home = Home::new();
    let dir = TempDir::new().unwrap();
    let fixture = dir.path().join("f.json");
    let mut cmd = home.cmd(&[
        "tool",
        "call",
        "postgres",
        "schema",
        "--input",
        r#"{"database": "db"}"#,
        "--database",
        "db=LH_REC_DB_URL,allow=127.0.0.1",
        "--record",
        fixture.to_str().unwrap(),
    ]);
    cmd.env("LH_REC_DB_URL", "postgres://someone:pw@127.0.0.1:9/db");
    let out = run(cmd);
    out.expect_code(2);
    assert!(out.stderr.contains("--database"), "{}", out.stderr);
    assert!(!fixture.exists());

    let out = test(&home, dir.path());
    out.expect_code(2);
    assert!(out.stderr.contains("no fixtures in"), "{}", out.stderr);
    assert!(out.stderr.contains("--record"), "{}", out.stderr);

    // A broken fixture fails by itself, naming the field.
    std::fs::create_dir_all(dir.path().join("fixtures")).unwrap();
    std::fs::write(
        dir.path().join("fixtures/bad.json"),
        r#"{"tool": "get", "outptu": {}}"#,
    )
    .unwrap();
    let out = test(&home, dir.path());
    out.expect_code(1);
    let stdout = out.stdout_text();
    assert!(stdout.contains("FAIL  bad"), "{stdout}");
    assert!(stdout.contains("outptu"), "{stdout}");

    // Without --component, the project must be built.
    let out = home.run(&["tool", "test", dir.path().to_str().unwrap()]);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("longhand-tool.toml"), "{}", out.stderr);
}

/// A `tool new --lang python` project named `name` in a fresh directory,
/// its `.venv` the CI's; `None` (skipped) without one.
fn python_project(name: &str) -> Option<(Home, TempDir, PathBuf)> {
    let venv = match std::env::var_os("LONGHAND_PY_VENV").map(PathBuf::from) {
        Some(v) if v.join("bin/componentize-py").is_file() => v,
        _ => {
            crate::author::missing(
                "a venv with componentize-py and the Python SDK (LONGHAND_PY_VENV)",
            );
            return None;
        }
    };
    let home = Home::new();
    let outside = TempDir::new().unwrap();
    let sdk = crate::author::repo_sdk();
    let args = [
        "tool",
        "new",
        name,
        "--lang",
        "python",
        "--sdk",
        sdk.to_str().unwrap(),
    ];
    crate::author::longhand(&home, outside.path(), &args).expect_code(0);
    let project = outside.path().join(name);
    std::os::unix::fs::symlink(venv, project.join(".venv")).unwrap();
    Some((home, outside, project))
}

/// A Python tool that fetches through `longhand_tool.http` (wasi:http; CPython's
/// sockets are denied), recorded with a secret and replayed offline.
#[test]
fn a_python_tool_fetching_through_the_sdk_records_and_replays() {
    let Some((home, _outside, project)) = python_project("fetcher") else {
        return;
    };
    std::fs::write(
        project.join("app.py"),
        r#""""Fetches a URL through wasi:http."""

from dataclasses import dataclass

from longhand_tool import Effect, export, http, tool


@dataclass
class Get:
    """What to fetch."""

    url: str


@tool(effect=Effect.READ_ONLY)
def get(input: Get) -> dict:
    """GET a URL; return status, content type and body."""
    r = http.fetch(input.url, headers={"accept": "application/json"})
    return {"status": r.status, "type": r.header("content-type"), "body": r.json()}


Tools = export(name="fetcher", version="0.1.0", description="Fetches.")
"#,
    )
    .unwrap();
    // The template's greet fixtures are not this tool's.
    std::fs::remove_dir_all(project.join("fixtures")).unwrap();
    crate::author::longhand(&home, &project, &["tool", "build"]).expect_code(0);

    let server = Echo::start();
    let secret = secret();
    let fixture = project.join("fixtures/items.json");
    let input = json!({"url": server.url("/items?q=1")}).to_string();
    let host = server.host();
    let spec = format!("LH_REC_TOKEN@{host}");
    let mut cmd = home.cmd(&[
        "tool",
        "call",
        "fetcher.wasm",
        "get",
        "--input",
        &input,
        "--allow-host",
        &host,
        "--secret",
        &spec,
        "--record",
        fixture.to_str().unwrap(),
    ]);
    cmd.current_dir(&project).env("LH_REC_TOKEN", &secret);
    let out = run(cmd);
    out.expect_code(0);
    let got: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert_eq!(got["status"], 200, "{got}");
    assert_eq!(got["body"]["path"], "/items?q=1", "{got}");
    assert_eq!(got["body"]["auth"], "Bearer [REDACTED]", "{got}");
    assert_eq!(server.requests().len(), 1);
    let text = std::fs::read_to_string(&fixture).unwrap();
    assert!(!text.contains(&secret), "{text}");
    drop(server);

    let replay = crate::author::longhand(&home, &project, &["tool", "test"]);
    replay.expect_code(0);
    assert!(
        replay.stdout_text().contains("1 passed, 0 failed"),
        "{}",
        replay.stdout_text()
    );
}

/// `tool call fs … --dir D --record F`, run in `at`.
fn record_fs(home: &Home, at: &Path, tool: &str, dir: &str, input: &str, fixture: &str) -> Ended {
    let mut cmd = home.cmd(&[
        "tool", "call", "fs", tool, "--dir", dir, "--input", input, "--record", fixture,
    ]);
    cmd.current_dir(at);
    run(cmd)
}

/// A call over granted files keeps what it read (and only that), what it
/// listed and what it wrote; the replay runs in fresh directories with the
/// originals gone, and fails when the call reads or writes otherwise.
#[test]
fn a_call_over_granted_files_records_what_it_read_and_wrote_and_replays_without_them() {
    let home = Home::new();
    let root = TempDir::new().unwrap();
    let at = root.path();
    std::fs::create_dir_all(at.join("data/sub")).unwrap();
    std::fs::write(at.join("data/sales.csv"), "name,qty\nada,3\nbob,4\n").unwrap();
    std::fs::write(at.join("data/sub/secret-ish.txt"), "not read by the call").unwrap();
    std::fs::write(at.join("data/big.bin"), vec![7u8; 300_000]).unwrap();
    std::fs::create_dir_all(at.join("out")).unwrap();

    let recorded = record_fs(
        &home,
        at,
        "read",
        "data:/workspace",
        r#"{"path": "/workspace/sales.csv"}"#,
        "proj/fixtures/read.json",
    );
    recorded.expect_code(0);
    assert!(
        recorded.stderr.contains("1 file read"),
        "{}",
        recorded.stderr
    );
    let fixture = read(&at.join("proj/fixtures/read.json"));
    assert_eq!(
        fixture["grants"]["dirs"],
        json!([{"guest": "/workspace", "mode": "read-only"}])
    );
    assert_eq!(
        fixture["files"],
        json!([{
            "path": "/workspace/sales.csv",
            "content": "name,qty\nada,3\nbob,4\n",
            "modified": fixture["files"][0]["modified"],
        }])
    );
    let text = std::fs::read_to_string(at.join("proj/fixtures/read.json")).unwrap();
    assert!(!text.contains("not read by the call"), "{text}");
    assert!(
        !text.contains(at.to_str().unwrap()),
        "a host path in {text}"
    );

    // A listing keeps names and sizes, not contents.
    record_fs(
        &home,
        at,
        "list",
        "data:/workspace",
        r#"{"path": "/workspace"}"#,
        "proj/fixtures/list.json",
    )
    .expect_code(0);
    let listed = read(&at.join("proj/fixtures/list.json"));
    let big = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/workspace/big.bin")
        .expect("the listed file");
    assert_eq!(big["size"], 300_000);
    assert!(big.get("content").is_none(), "{big}");

    // A write keeps the file as the call left it.
    record_fs(
        &home,
        at,
        "write",
        "out:/workspace:rw",
        r#"{"path": "/workspace/report.md", "content": "3 rows"}"#,
        "proj/fixtures/write.json",
    )
    .expect_code(0);
    let wrote = read(&at.join("proj/fixtures/write.json"));
    assert_eq!(
        wrote["wrote"],
        json!([{"path": "/workspace/report.md", "content": "3 rows"}])
    );

    // The originals gone, the replays pass in fresh directories.
    std::fs::remove_dir_all(at.join("data")).unwrap();
    std::fs::remove_dir_all(at.join("out")).unwrap();
    let replay = |home: &Home| {
        let mut cmd = home.cmd(&["tool", "test", "proj", "--component", "fs"]);
        cmd.current_dir(at);
        run(cmd)
    };
    let out = replay(&home);
    out.expect_code(0);
    assert!(
        out.stdout_text().contains("3 passed, 0 failed"),
        "{}",
        out.stdout_text()
    );

    // What the file held is what the replay reads: changed, the output differs.
    let mut changed = fixture.clone();
    changed["files"][0]["content"] = json!("name,qty\nada,30\n");
    write(&at.join("proj/fixtures/read.json"), &changed);
    // And a write that differs from the recording fails, saying which file.
    let mut other = wrote.clone();
    other["wrote"][0]["content"] = json!("4 rows");
    write(&at.join("proj/fixtures/write.json"), &other);
    let out = replay(&home);
    out.expect_code(1);
    let stdout = out.stdout_text();
    assert!(stdout.contains("FAIL  read"), "{stdout}");
    assert!(stdout.contains("FAIL  write"), "{stdout}");
    assert!(stdout.contains("/workspace/report.md differs"), "{stdout}");
    assert!(stdout.contains("- \"4 rows\""), "{stdout}");
    assert!(stdout.contains("1 passed, 2 failed"), "{stdout}");

    // A fixture cannot make the replay write outside its directory.
    let mut escape = fixture.clone();
    escape["files"][0]["path"] = json!("/workspace/../../escaped.txt");
    write(&at.join("proj/fixtures/read.json"), &escape);
    let out = replay(&home);
    out.expect_code(1);
    assert!(
        out.stdout_text().contains("not a plain path"),
        "{}",
        out.stdout_text()
    );
    assert!(!at.join("escaped.txt").exists());
}

/// The issue's case: a Python CSV tool from `tool new`, recorded over a
/// granted file, replays offline with the file gone.
#[test]
fn a_python_csv_tool_gets_a_fixture_over_a_granted_file_that_replays() {
    let Some((home, outside, project)) = python_project("csvtally") else {
        return;
    };
    // examples/csv-tool, as its README has a person build it.
    std::fs::write(
        project.join("app.py"),
        include_str!("../../../examples/csv-tool/app.py"),
    )
    .unwrap();
    std::fs::remove_dir_all(project.join("fixtures")).unwrap();
    crate::author::longhand(&home, &project, &["tool", "build"]).expect_code(0);
    let data = outside.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("sales.csv"),
        include_str!("../../../examples/csv-tool/data/sales.csv"),
    )
    .unwrap();
    std::fs::write(data.join("other.csv"), "never,read\n").unwrap();

    let mut cmd = home.cmd(&[
        "tool",
        "call",
        "csvtally.wasm",
        "tally",
        "--dir",
        data.to_str().unwrap(),
        "--input",
        r#"{"path": "/workspace/sales.csv"}"#,
        "--record",
        "fixtures/sales.json",
    ]);
    cmd.current_dir(&project);
    let out = run(cmd);
    out.expect_code(0);
    let got: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert_eq!(got, json!({"rows": 2, "sums": {"qty": 7, "price": 30}}));
    let text = std::fs::read_to_string(project.join("fixtures/sales.json")).unwrap();
    assert!(text.contains("ada,3,10"), "{text}");
    assert!(!text.contains("never,read"), "{text}");

    std::fs::remove_dir_all(&data).unwrap();
    let replay = crate::author::longhand(&home, &project, &["tool", "test"]);
    replay.expect_code(0);
    assert!(
        replay.stdout_text().contains("1 passed, 0 failed"),
        "{}",
        replay.stdout_text()
    );

    // Not granted the directory it asks for: access denied, naming the
    // grant (Python's FileNotFoundError no longer reaches the model).
    let mut cmd = home.cmd(&[
        "tool",
        "call",
        "csvtally.wasm",
        "tally",
        "--input",
        r#"{"path": "/workspace/sales.csv"}"#,
    ]);
    cmd.current_dir(&project);
    let denied = run(cmd);
    assert_ne!(denied.code, Some(0));
    assert!(
        denied.stderr.contains("access denied")
            && denied
                .stderr
                .contains("/workspace is not granted to this tool")
            && denied.stderr.contains("the CSV files to sum"),
        "{}",
        denied.stderr
    );
}
