//! Issue 17: what a session runs with is decided once, at `run`, and every
//! process that wakes it runs with that. `--model` answers every role and
//! every child for the whole session — after `approve` and `resume`, and
//! through a `longhand worker` — and children's spend is priced at the
//! model that really answers them; a judge with its own `[roles.judge]`
//! keeps the flag's endpoint when the session is woken elsewhere.
//!
//! The model is a local OpenAI-compatible server on 127.0.0.1 that records
//! which model each request named and which agent or role asked.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use longhand_session::Event;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, call, read_http_request, session_of_json, text_turn, tool_turn, write};

/// One request a model server saw.
#[derive(Debug, Clone)]
struct Seen {
    /// The URL path.
    path: String,
    /// The `model` the body named.
    model: String,
    /// The system prompt.
    system: String,
    /// How many answers the conversation carried (the turn asked for).
    answers: usize,
}

/// Everything a server saw, in order.
type Log = Arc<Mutex<Vec<Seen>>>;

/// What a server answers a request with: a model answer in the script
/// format (`text`, `tool_calls`, `stop_reason`, `usage`), or `None` for a
/// 500 (a server that must not be asked).
type Answerer = dyn Fn(&Seen) -> Option<Value> + Send + Sync;

/// A loopback chat-completions server (`/v1/chat/completions`) answering
/// with `answer`, streamed when the request asks for a stream; returns its
/// base URL and what it saw. Each connection is served on its own thread:
/// children run beside their parent.
fn model_server(answer: Box<Answerer>) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().expect("local addr").port();
    let log = Log::default();
    let seen = Arc::clone(&log);
    let answer: Arc<Answerer> = Arc::from(answer);
    // Detached: it blocks in accept() and ends with the test process.
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (seen, answer) = (Arc::clone(&seen), Arc::clone(&answer));
            std::thread::spawn(move || serve_one(stream, &seen, answer.as_ref()));
        }
    });
    (format!("http://127.0.0.1:{port}/v1"), log)
}

fn serve_one(mut stream: TcpStream, log: &Mutex<Vec<Seen>>, answer: &Answerer) {
    let Some((path, body)) = read_http_request(&stream) else {
        return;
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let seen = Seen {
        path,
        model: body["model"].as_str().unwrap_or_default().to_owned(),
        system: messages
            .iter()
            .find(|m| m["role"] == "system")
            .map(|m| m["content"].to_string())
            .unwrap_or_default(),
        answers: messages.iter().filter(|m| m["role"] == "assistant").count(),
    };
    log.lock().expect("lock").push(seen.clone());
    let Some(reply) = answer(&seen) else {
        let body = json!({"error": {"message": "this server must not be asked"}}).to_string();
        let _ = write!(
            stream,
            "HTTP/1.1 500 X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    };
    let text = reply["text"].as_str().unwrap_or_default();
    let calls: Vec<Value> = reply["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"index": i, "id": c["id"], "type": "function",
                   "function": {"name": c["name"], "arguments": c["arguments"]}})
        })
        .collect();
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let usage = json!({"prompt_tokens": reply["usage"]["input_tokens"],
                       "completion_tokens": reply["usage"]["output_tokens"]});
    if body["stream"] == true {
        let mut delta = json!({"role": "assistant", "content": text});
        if !calls.is_empty() {
            delta["tool_calls"] = Value::Array(calls);
        }
        let chunks = [
            json!({"id": "c1", "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
            json!({"id": "c1", "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
            json!({"id": "c1", "object": "chat.completion.chunk", "choices": [],
                   "usage": usage}),
        ];
        let mut out = String::from(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
        );
        for chunk in chunks {
            out.push_str(&format!("data: {chunk}\n\n"));
        }
        out.push_str("data: [DONE]\n\n");
        let _ = stream.write_all(out.as_bytes());
    } else {
        let mut message = json!({"role": "assistant", "content": text});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(
                calls
                    .into_iter()
                    .map(|mut c| {
                        c.as_object_mut().map(|o| o.remove("index"));
                        c
                    })
                    .collect(),
            );
        }
        let body = json!({"id": "c1", "object": "chat.completion",
                          "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                          "usage": usage})
        .to_string();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

/// The model the flag names, and its price (USD per million tokens, in
/// and out) in the data directory's price file.
const MODEL: &str = "m-local";
/// What one of the example's answers (600 tokens in, 60 out) costs at
/// `MODEL`'s price of $1 / $2 per million: 600 + 120 micro-dollars.
const TURN_MICROS: u64 = 720;

fn price_model(home: &Home) {
    write(
        &home.path().join("prices.toml"),
        &format!("as_of = \"2026-12-01\"\n[openai.\"{MODEL}\"]\ninput = 1.0\noutput = 2.0\n"),
    );
}

/// Copy `from` into `to`, recursively, leaving out `out/` (run output).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("read the example") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            if entry.file_name() == "out" {
                std::fs::create_dir_all(&target).expect("create out/");
            } else {
                copy_tree(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// `examples/research-team` copied into `dir`, and a server answering
/// its three agents (told apart by their instructions) with the answers
/// of the example's script: the lead's `responses`, and the reader's and
/// the writer's own lists.
fn research_team(dir: &Path) -> (PathBuf, String, Log) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/research-team");
    let root = dir.join("research-team");
    copy_tree(&example, &root);
    let script: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("script.json")).expect("script.json"),
    )
    .expect("script JSON");
    let (url, log) = model_server(Box::new(move |seen: &Seen| {
        let list = if seen.system.contains("You lead a small research team") {
            &script["responses"]
        } else if seen.system.contains("Read the files you are pointed to") {
            &script["agents"]["reader"]
        } else if seen.system.contains("Write exactly the file") {
            &script["agents"]["writer"]
        } else {
            return None;
        };
        list.get(seen.answers).cloned()
    }));
    (root, url, log)
}

/// Which of the research team asked.
fn agent_of(seen: &Seen) -> &'static str {
    if seen.system.contains("You lead a small research team") {
        "lead"
    } else if seen.system.contains("Read the files you are pointed to") {
        "reader"
    } else if seen.system.contains("Write exactly the file") {
        "writer"
    } else {
        "?"
    }
}

/// The pending approval: (session, request).
fn pending_approval(home: &Home) -> (String, String) {
    let out = home.run(&["approvals", "--json"]);
    out.expect_code(0);
    let line: Value = serde_json::from_str(out.stdout.first().expect("a pending approval"))
        .expect("approvals --json");
    (
        line["session"].as_str().expect("session").to_owned(),
        line["request"].as_str().expect("request").to_owned(),
    )
}

/// Every session of the store: (id, agent name).
fn sessions(home: &Home) -> Vec<(String, String)> {
    let out = home.run(&["sessions", "--json"]);
    out.expect_code(0);
    out.json_lines()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().expect("id").to_owned(),
                s["agent_name"].as_str().expect("agent_name").to_owned(),
            )
        })
        .collect()
}

/// The `(provider, model)` of every `model_requested` of `session`.
fn requested(home: &Home, session: &str) -> Vec<(String, String)> {
    home.log(session)
        .iter()
        .filter_map(|r| match &r.event {
            Event::ModelRequested {
                provider, model, ..
            } => Some((provider.clone(), model.clone())),
            _ => None,
        })
        .collect()
}

/// What the research team's run must show: the server answered every
/// agent with `MODEL`, every session's requests name it, each child's
/// spend is its answers at `MODEL`'s price, and the summary is written.
fn assert_the_team_ran_on_the_flag(home: &Home, root: &Path, log: &Log, lead: &str) {
    assert_eq!(home.state(lead).status.as_str(), "finished");
    let seen = log.lock().expect("lock").clone();
    for s in &seen {
        assert_eq!(s.path, "/v1/chat/completions");
        assert_eq!(s.model, MODEL, "a request named another model: {s:?}");
    }
    let count = |agent: &str| seen.iter().filter(|s| agent_of(s) == agent).count();
    assert_eq!(
        (count("lead"), count("reader"), count("writer"), count("?")),
        (3, 2, 2, 0),
        "{seen:#?}"
    );
    let all = sessions(home);
    assert_eq!(all.len(), 3, "{all:?}");
    for (id, agent) in &all {
        let requests = requested(home, id);
        assert!(!requests.is_empty(), "{agent}");
        for (provider, model) in &requests {
            assert_eq!(
                (provider.as_str(), model.as_str()),
                ("openai", MODEL),
                "{agent}"
            );
        }
        let state = home.state(id);
        if agent != "research-lead" {
            // The child's answers are priced at the model that gave them.
            assert_eq!(state.cost_unknown, 0, "{agent}");
            assert_eq!(
                state.cost_micros,
                state.steps * TURN_MICROS,
                "{agent}: {} steps",
                state.steps
            );
            assert!(state.cost_micros > 0, "{agent}");
        }
    }
    // `sessions` shows the children's spend.
    let listed = home.run(&["sessions", "--json"]);
    for s in listed.json_lines() {
        if s["agent_name"] != "research-lead" {
            assert_eq!(
                s["spend"]["cost_micros"].as_u64(),
                Some(2 * TURN_MICROS),
                "{s}"
            );
        }
    }
    let out = root.join("out");
    let runs: Vec<_> = std::fs::read_dir(&out).expect("out/").flatten().collect();
    assert_eq!(runs.len(), 1);
    let summary = std::fs::read_to_string(runs[0].path().join("summary.md")).expect("the summary");
    assert!(summary.contains("(solar.md)"), "{summary}");
}

#[test]
fn the_model_flag_answers_the_children_after_approve_and_resume() {
    let home = Home::new();
    price_model(&home);
    let dir = TempDir::new().expect("tempdir");
    let (root, url, log) = research_team(dir.path());
    let flag = format!("openai:{MODEL}@{url}");
    let run = home.run(&[
        "run",
        root.to_str().expect("utf-8"),
        "--model",
        &flag,
        "--json",
    ]);
    run.expect_code(3);
    let lead = session_of_json(&run.stdout[0]);
    let (writer, request) = pending_approval(&home);
    assert_ne!(writer, lead, "the writer's own session asks");
    home.run(&["approve", &writer, &request]).expect_code(0);
    // Resumed as a person does, without the flag.
    let resumed = home.run(&["resume", &lead]);
    resumed.expect_code(0);
    assert_the_team_ran_on_the_flag(&home, &root, &log, &lead);
}

#[test]
fn a_detached_run_with_the_model_flag_runs_every_request_on_it_through_a_worker() {
    let home = Home::new();
    price_model(&home);
    let dir = TempDir::new().expect("tempdir");
    let (root, url, log) = research_team(dir.path());
    let flag = format!("openai:{MODEL}@{url}");
    let run = home.run(&[
        "run",
        root.to_str().expect("utf-8"),
        "--model",
        &flag,
        "--detach",
        "--json",
    ]);
    run.expect_code(0);
    let lead = session_of_json(&run.stdout[0]);
    // The default concurrency: a worker with free slots must not claim the
    // children its own lead drives in-process (they run leased under a
    // child owner, not in the worker's name).
    let worker = ["worker", "--until-idle"];
    let first = home.run(&worker);
    first.expect_code(0);
    assert_eq!(
        home.state(&lead).status.as_str(),
        "paused",
        "{}",
        first.stderr
    );
    let (writer, request) = pending_approval(&home);
    home.run(&["approve", &writer, &request]).expect_code(0);
    home.run(&["resume", &lead, "--detach"]).expect_code(0);
    let second = home.run(&worker);
    second.expect_code(0);
    assert_eq!(
        home.state(&lead).status.as_str(),
        "finished",
        "first worker:\n{}\nsecond worker:\n{}",
        first.stderr,
        second.stderr
    );
    assert_the_team_ran_on_the_flag(&home, &root, &log, &lead);
}

/// A planned agent whose one task is judged: its own `[model]` and
/// `[roles.judge]` both at `own` (which must never be asked once a flag
/// replaced them), its write waiting for approval.
fn judged_agent(dir: &Path, own: &str) -> String {
    write(
        &dir.join("plan.toml"),
        "[[tasks]]\nid = \"note\"\ntitle = \"write the note\"\n\
         [[tasks.done_when]]\nkind = \"judge\"\nrubric = \"the note is written\"\n",
    );
    write(
        &dir.join("agent.toml"),
        &format!(
            r#"name = "judged"
instructions = "Write the note."
goal = "Write /w/note.txt."

[model]
provider = "openai"
model = "own-worker"
base_url = "{own}"

[roles.judge]
provider = "openai"
model = "own-judge"
base_url = "{own}"
stream = false

[plan]
file = "plan.toml"

[[tools]]
component = "fs"
only = ["read", "write"]
dirs = ["work:/w:rw"]

[approve]
fs__write = "always"
"#
        ),
    );
    std::fs::create_dir_all(dir.join("work")).expect("create work/");
    dir.to_str().expect("utf-8").to_owned()
}

/// The flag's server for [`judged_agent`]: the worker writes the note,
/// then says so; the judge passes it.
fn judged_server() -> (String, Log) {
    model_server(Box::new(|seen: &Seen| {
        Some(if seen.system.contains("You are the judge") {
            text_turn(
                r#"{"pass": true, "reasons": ["written"], "missing": []}"#,
                10,
                2,
            )
        } else if seen.answers == 0 {
            tool_turn(
                "writing the note",
                vec![call(
                    "w1",
                    "fs__write",
                    json!({"path": "/w/note.txt", "content": "note"}),
                )],
                10,
                2,
            )
        } else {
            text_turn("The note is written.", 10, 2)
        })
    }))
}

/// The judge was asked, at the flag's server with the flag's model, and
/// nothing reached the agent's own endpoint.
fn assert_the_judge_kept_the_flag(home: &Home, session: &str, flag: &Log, own: &Log) {
    assert_eq!(home.state(session).status.as_str(), "finished");
    let own = own.lock().expect("lock").clone();
    assert!(
        own.is_empty(),
        "the agent's own endpoint was asked: {own:#?}"
    );
    let seen = flag.lock().expect("lock").clone();
    let judge: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.system.contains("You are the judge"))
        .collect();
    assert_eq!(judge.len(), 1, "{seen:#?}");
    for s in &seen {
        assert_eq!(s.model, "x-flag", "{s:?}");
    }
    let log = home.log(session);
    let judged = log.iter().any(|r| {
        matches!(&r.event, Event::ModelRequested { role, provider, model, .. }
            if role == "judge" && provider == "openai" && model == "x-flag")
    });
    assert!(judged, "no judge request on the flag's model in the log");
    let passed = log.iter().any(
        |r| matches!(&r.event, Event::CheckFinished { kind, passed: true, .. } if kind == "judge"),
    );
    assert!(passed, "the judge's check did not pass");
}

#[test]
fn the_judge_keeps_the_model_flags_endpoint_after_resume_and_through_a_worker() {
    let (own_url, own_log) = model_server(Box::new(|_: &Seen| None));

    // Paused for the approval, approved, resumed here.
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let agent = judged_agent(dir.path(), &own_url);
    let (url, log) = judged_server();
    let flag = format!("openai:x-flag@{url}");
    let run = home.run(&["run", &agent, "--model", &flag, "--json"]);
    run.expect_code(3);
    let session = session_of_json(&run.stdout[0]);
    let (asking, request) = pending_approval(&home);
    assert_eq!(asking, session);
    home.run(&["approve", &session, &request]).expect_code(0);
    home.run(&["resume", &session]).expect_code(0);
    assert_the_judge_kept_the_flag(&home, &session, &log, &own_log);

    // Detached: a worker runs it to the approval, another after it.
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let agent = judged_agent(dir.path(), &own_url);
    let (url, log) = judged_server();
    let flag = format!("openai:x-flag@{url}");
    let run = home.run(&["run", &agent, "--model", &flag, "--detach", "--json"]);
    run.expect_code(0);
    let session = session_of_json(&run.stdout[0]);
    home.run(&["worker", "--until-idle"]).expect_code(0);
    assert_eq!(home.state(&session).status.as_str(), "paused");
    let (_, request) = pending_approval(&home);
    home.run(&["approve", &session, &request]).expect_code(0);
    home.run(&["resume", &session, "--detach"]).expect_code(0);
    home.run(&["worker", "--until-idle"]).expect_code(0);
    assert_the_judge_kept_the_flag(&home, &session, &log, &own_log);
}

#[test]
fn record_keeps_every_agents_answers_in_one_cassette_across_a_resume() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let (root, _, _) = research_team(dir.path());
    let root_arg = root.to_str().expect("utf-8");
    let script = root.join("script.json");
    let cassette = dir.path().join("recorded.json");
    let record = cassette.to_str().expect("utf-8");
    let run = home.run(&[
        "run",
        root_arg,
        "--script",
        script.to_str().expect("utf-8"),
        "--record",
        record,
        "--json",
    ]);
    run.expect_code(3);
    let lead = session_of_json(&run.stdout[0]);
    let (writer, request) = pending_approval(&home);
    home.run(&["approve", &writer, &request]).expect_code(0);
    home.run(&["resume", &lead, "--record", record])
        .expect_code(0);
    assert_eq!(home.state(&lead).status.as_str(), "finished");
    // Every answer of every session — the lead's three, the reader's two,
    // the writer's two (one before the pause, one after) — is in the file.
    let answered: usize = sessions(&home)
        .iter()
        .map(|(id, _)| {
            home.log(id)
                .iter()
                .filter(|r| matches!(r.event, Event::ModelResponded { .. }))
                .count()
        })
        .sum();
    assert_eq!(answered, 7);
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&cassette).expect("the cassette"))
            .expect("cassette JSON");
    assert_eq!(
        recorded["turns"].as_array().map(Vec::len),
        Some(answered),
        "{recorded}"
    );
    // And it replays the whole tree offline.
    let again = Home::new();
    let replayed = again.run(&["run", root_arg, "--cassette", record, "--json"]);
    replayed.expect_code(3);
    let lead = session_of_json(&replayed.stdout[0]);
    let (writer, request) = pending_approval(&again);
    again.run(&["approve", &writer, &request]).expect_code(0);
    again.run(&["resume", &lead]).expect_code(0);
}

/// Issue 26: `run --json` printed a child's `child_started` only when the
/// child ended (it sat in an append the parent had not waited for while the
/// child ran): the parent's events must show as they happen. The reader's
/// answers here take 1.5 s each, so its run lasts at least 3 s; its
/// `child_started` must be printed long before the `tool_finished` of the
/// `delegate` call that waits for it.
#[test]
fn run_json_prints_child_started_while_the_child_runs() {
    const THINK: std::time::Duration = std::time::Duration::from_millis(1500);
    let home = Home::new();
    price_model(&home);
    let dir = TempDir::new().expect("tempdir");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/research-team");
    let root = dir.path().join("research-team");
    copy_tree(&example, &root);
    let script: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("script.json")).expect("script.json"),
    )
    .expect("script JSON");
    let (url, _log) = model_server(Box::new(move |seen: &Seen| {
        let list = if seen.system.contains("You lead a small research team") {
            &script["responses"]
        } else if seen.system.contains("Read the files you are pointed to") {
            std::thread::sleep(THINK);
            &script["agents"]["reader"]
        } else if seen.system.contains("Write exactly the file") {
            &script["agents"]["writer"]
        } else {
            return None;
        };
        list.get(seen.answers).cloned()
    }));
    let flag = format!("openai:{MODEL}@{url}");
    let mut run = crate::support::Proc::spawn(home.cmd(&[
        "run",
        root.to_str().expect("utf-8"),
        "--model",
        &flag,
        "--json",
    ]));
    let mut started_at = None;
    let mut finished_at = None;
    let mut call = None;
    while let Some(line) = run.next_line() {
        let now = std::time::Instant::now();
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        match v["event"]["type"].as_str().or(v["type"].as_str()) {
            Some("child_started") if started_at.is_none() => {
                let event = if v["event"].is_object() {
                    &v["event"]
                } else {
                    &v
                };
                call = event["call_id"].as_str().map(str::to_owned);
                started_at = Some(now);
            }
            Some("tool_finished") => {
                let event = if v["event"].is_object() {
                    &v["event"]
                } else {
                    &v
                };
                if call.is_some() && event["call_id"].as_str() == call.as_deref() {
                    finished_at = Some(now);
                    break;
                }
            }
            _ => {}
        }
    }
    run.kill();
    let (Some(started), Some(finished)) = (started_at, finished_at) else {
        panic!("no child_started and tool_finished of its delegate call in the output");
    };
    let gap = finished - started;
    eprintln!("run --json: child_started printed {gap:?} before its delegate call finished");
    assert!(
        gap >= THINK,
        "child_started was printed only {gap:?} before the child's call finished: \
         held back until the child ended"
    );
}
