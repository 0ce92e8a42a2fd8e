//! Issue 16, the loop: steering notes never break the pairing of tool
//! calls and results (every wire format, against a local model server as
//! strict as the real APIs), `pause` and `cancel` act within a second
//! while a model call stalls, a money limit that cannot be counted is
//! refused at start, and a task's attempts are counted across resumes.

use std::collections::VecDeque;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use longhand_brain::model::WireFormat;
use longhand_brain::model::pairing::{check_wire, format_of_path};
use longhand_session::{Event, EventRecord};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{
    Home, Proc, blob, of_kind, plan_json, read_http_request, run_script, session_of_json,
    text_turn, write,
};

/// One answer of the model server: after `delay`, these calls (id, name,
/// arguments) or, with none, this text.
#[derive(Clone)]
struct Answer {
    delay: Duration,
    calls: Vec<(&'static str, &'static str, Value)>,
    text: &'static str,
    /// Arguments sent as this text instead (a call cut by `max_tokens`).
    raw: Option<&'static str>,
}

fn calls(calls: Vec<(&'static str, &'static str, Value)>) -> Answer {
    Answer {
        delay: Duration::ZERO,
        calls,
        text: "",
        raw: None,
    }
}

fn text(text: &'static str) -> Answer {
    Answer {
        delay: Duration::ZERO,
        calls: vec![],
        text,
        raw: None,
    }
}

/// One call whose arguments the model's answer cut half-way.
fn cut_call(id: &'static str, name: &'static str, raw: &'static str) -> Answer {
    let mut answer = calls(vec![(id, name, Value::Null)]);
    answer.raw = Some(raw);
    answer
}

/// `answer` as `format` spells a whole (not streamed) response.
fn body(format: WireFormat, answer: &Answer) -> Value {
    match format {
        WireFormat::OpenAiChat => {
            let mut message = json!({"role": "assistant", "content": answer.text});
            if !answer.calls.is_empty() {
                message["content"] = Value::Null;
                message["tool_calls"] = answer
                    .calls
                    .iter()
                    .map(|(id, name, args)| {
                        let args = answer.raw.map_or_else(|| args.to_string(), str::to_owned);
                        json!({"id": id, "type": "function",
                               "function": {"name": name, "arguments": args}})
                    })
                    .collect();
            }
            let finish = match (answer.calls.is_empty(), answer.raw) {
                (true, _) => "stop",
                (false, Some(_)) => "length",
                (false, None) => "tool_calls",
            };
            json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
                   "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})
        }
        WireFormat::Anthropic => {
            let mut content: Vec<Value> = Vec::new();
            if !answer.text.is_empty() {
                content.push(json!({"type": "text", "text": answer.text}));
            }
            content.extend(answer.calls.iter().map(|(id, name, args)| {
                json!({"type": "tool_use", "id": id, "name": name, "input": args})
            }));
            let stop = if answer.calls.is_empty() {
                "end_turn"
            } else {
                "tool_use"
            };
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                   "content": content, "stop_reason": stop,
                   "usage": {"input_tokens": 10, "output_tokens": 2}})
        }
        WireFormat::OpenAiResponses => {
            let mut output: Vec<Value> = Vec::new();
            if !answer.text.is_empty() {
                output.push(json!({"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": answer.text}]}));
            }
            output.extend(answer.calls.iter().map(|(id, name, args)| {
                let args = answer.raw.map_or_else(|| args.to_string(), str::to_owned);
                json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id,
                       "name": name, "arguments": args, "status": "completed"})
            }));
            json!({"id": "resp_1", "object": "response", "status": "completed",
                   "output": output, "usage": {"input_tokens": 10, "output_tokens": 2}})
        }
    }
}

/// What a model server saw: each request's path and body, and the
/// requests it refused (why).
#[derive(Default)]
struct Seen {
    requests: Vec<(String, Value)>,
    refused: Vec<String>,
}

/// A loopback model server for `format`, strict as the real APIs: a
/// request that breaks the pairing of tool calls and results gets a 400
/// (and no answer of the list); others get the next answer, after its
/// delay. Each connection is served on its own thread, so an answer that
/// stalls holds up no later request.
fn strict_model(format: WireFormat, answers: Vec<Answer>) -> (u16, Arc<Mutex<Seen>>) {
    windowed_model(format, answers, usize::MAX)
}

/// [`strict_model`] with a context window: a request whose body is longer
/// than `window` bytes is refused as llama.cpp's server refuses one that
/// does not fit (HTTP 400, `exceed_context_size_error`), taking no answer.
fn windowed_model(
    format: WireFormat,
    answers: Vec<Answer>,
    window: usize,
) -> (u16, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().expect("local addr").port();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let answers = Arc::new(Mutex::new(VecDeque::from(answers)));
    let shared = Arc::clone(&seen);
    // Detached: it blocks in accept() and ends with the test process.
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (seen, answers) = (Arc::clone(&shared), Arc::clone(&answers));
            std::thread::spawn(move || answer(format, stream, &seen, &answers, window));
        }
    });
    (port, seen)
}

fn answer(
    format: WireFormat,
    mut stream: TcpStream,
    seen: &Mutex<Seen>,
    answers: &Mutex<VecDeque<Answer>>,
    window: usize,
) {
    let Some((path, bytes)) = read_http_request(&stream) else {
        return;
    };
    let request: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert_eq!(format_of_path(&path), Some(format), "{path}");
    if bytes.len() > window {
        let error = json!({"error": {"code": 400, "type": "exceed_context_size_error",
            "message": format!("request ({} tokens) exceeds the available context size ({} \
                                tokens), try increasing it", bytes.len() / 4, window / 4)}});
        seen.lock().expect("lock").requests.push((path, request));
        let reply = error.to_string();
        let head = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: \
             {}\r\nconnection: close\r\n\r\n",
            reply.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(reply.as_bytes());
        return;
    }
    let verdict = check_wire(format, &request);
    let (status, reply, delay) = {
        let mut seen = seen.lock().expect("lock");
        seen.requests.push((path, request));
        match verdict {
            Err(why) => {
                seen.refused.push(why.clone());
                let error = json!({"type": "error",
                                   "error": {"type": "invalid_request_error", "message": why}});
                (400, error, Duration::ZERO)
            }
            Ok(()) => match answers.lock().expect("lock").pop_front() {
                Some(a) => (200, body(format, &a), a.delay),
                None => (
                    500,
                    json!({"error": {"message": "no more answers"}}),
                    Duration::ZERO,
                ),
            },
        }
    };
    std::thread::sleep(delay);
    let reply = reply.to_string();
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        reply.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(reply.as_bytes());
}

/// `[model]` for `format` at the server on `port`.
fn model_section(format: WireFormat, port: u16) -> String {
    let base = match format {
        WireFormat::Anthropic => format!("http://127.0.0.1:{port}"),
        _ => format!("http://127.0.0.1:{port}/v1"),
    };
    format!(
        "[model]\nprovider = \"{}\"\nmodel = \"m\"\nstream = false\nbase_url = \"{base}\"\n",
        format.as_str()
    )
}

/// An agent with `fs` over `work/` (read-write), its model at `port`.
fn agent(dir: &Path, format: WireFormat, port: u16, extra: &str) -> String {
    write(&dir.join("work/x.txt"), "x");
    write(
        &dir.join("agent.toml"),
        &format!(
            "name = \"turns\"\ninstructions = \"Do it.\"\ngoal = \"Read /w/x.txt.\"\n\n{}\n{extra}\n\
             [[tools]]\ncomponent = \"fs\"\nonly = [\"read\", \"write\"]\ndirs = [\"work:/w:rw\"]\n",
            model_section(format, port)
        ),
    );
    dir.to_str().expect("utf-8 path").to_owned()
}

const FORMATS: [WireFormat; 3] = [
    WireFormat::OpenAiChat,
    WireFormat::Anthropic,
    WireFormat::OpenAiResponses,
];

const NOTE: &str = "also look at b.txt";

/// Posts a control with `--json`; returns when it was posted (unix ms).
fn post(home: &Home, args: &[&str]) -> u64 {
    let mut all = args.to_vec();
    all.push("--json");
    let out = home.run(&all);
    out.expect_code(0);
    let control: Value = serde_json::from_str(&out.stdout[0]).expect("control JSON");
    control["posted_ms"].as_u64().expect("posted_ms")
}

/// Where the note sits in the log: after the answer with calls and before
/// the result of `call` (the order that used to break every request).
fn note_lands_between_call_and_result(log: &[EventRecord], call: &str) {
    let at = |f: &dyn Fn(&Event) -> bool| log.iter().position(|r| f(&r.event));
    let answered = at(&|e| matches!(e, Event::ModelResponded { step: 1, .. })).expect("answer");
    let note = at(&|e| matches!(e, Event::Steered { kind, .. } if kind == "send")).expect("note");
    let result = at(&|e| matches!(e, Event::ToolFinished { call_id, .. } if call_id == call))
        .expect("result");
    assert!(
        answered < note && note < result,
        "the note did not land mid-turn (answer {answered}, note {note}, result {result})"
    );
}

/// The note reached the model in the request after the turn, after the
/// call's result: in the order of the request's items (Anthropic's blocks
/// within its messages).
fn note_follows_result(format: WireFormat, request: &Value) {
    let items: Vec<&Value> = match format {
        WireFormat::OpenAiChat => request["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .collect(),
        WireFormat::OpenAiResponses => request["input"].as_array().expect("input").iter().collect(),
        WireFormat::Anthropic => request["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .flat_map(|m| m["content"].as_array().into_iter().flatten())
            .collect(),
    };
    let is_result = |v: &Value| {
        v["role"] == "tool" || v["type"] == "tool_result" || v["type"] == "function_call_output"
    };
    let result = items.iter().rposition(|v| is_result(v)).expect("a result");
    let note = items
        .iter()
        .position(|v| v.to_string().contains(NOTE))
        .expect("the note is sent");
    assert!(result < note, "{format:?}: {request}");
}

#[test]
fn a_note_sent_during_a_model_call_goes_after_the_results_on_every_wire_format() {
    for format in FORMATS {
        // The first answer takes 3 s: the note arrives while it is on its
        // way and is recorded right after it, before its call runs.
        let mut first = calls(vec![("call_1", "fs__read", json!({"path": "/w/x.txt"}))]);
        first.delay = Duration::from_secs(3);
        let (port, seen) = strict_model(format, vec![first, text("x holds x.")]);
        let home = Home::new();
        let dir = TempDir::new().expect("tempdir");
        let agent = agent(dir.path(), format, port, "");
        let mut run = Proc::spawn(home.cmd(&["run", &agent, "--json"]));
        let session = session_of_json(&run.next_line().expect("a first line"));
        post(&home, &["send", &session, NOTE]);
        let ended = run.finish();
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.refused, Vec::<String>::new(), "{format:?}");
        ended.expect_code(0);
        note_lands_between_call_and_result(&home.log(&session), "call_1");
        assert_eq!(seen.requests.len(), 2, "{format:?}");
        note_follows_result(format, &seen.requests[1].1);
    }
}

#[test]
fn a_note_sent_during_an_approval_wait_resumes_on_every_wire_format() {
    for format in FORMATS {
        let (port, seen) = strict_model(
            format,
            vec![
                calls(vec![(
                    "call_w",
                    "fs__write",
                    json!({"path": "/w/b.txt", "content": "x"}),
                )]),
                text("wrote b.txt"),
            ],
        );
        let home = Home::new();
        let dir = TempDir::new().expect("tempdir");
        let agent = agent(dir.path(), format, port, "[approve]\nfs = \"writes\"\n");
        let run = home.run(&["run", &agent, "--json"]);
        run.expect_code(3);
        let session = session_of_json(&run.stdout[0]);
        // While it waits: a note, then the approval. The log then holds
        // the note between the call and its result, as logs written
        // before the fix do; resuming it must work.
        post(&home, &["send", &session, NOTE]);
        let pending = home.run(&["approvals", "--json"]);
        let request: Value = serde_json::from_str(&pending.stdout[0]).expect("json");
        let request = request["request"].as_str().expect("request id").to_owned();
        home.run(&["approve", &session, &request]).expect_code(0);
        let resumed = home.run(&["resume", &session]);
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.refused, Vec::<String>::new(), "{format:?}");
        resumed.expect_code(0);
        note_lands_between_call_and_result(&home.log(&session), "call_w");
        note_follows_result(format, &seen.requests[1].1);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("work/b.txt")).ok(),
            Some("x".to_owned())
        );
    }
}

/// Waits until the server holds `requests` requests.
fn wait_for_request(seen: &Mutex<Seen>, requests: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().expect("lock").requests.len() < requests {
        assert!(Instant::now() < deadline, "the request never arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn pause_and_cancel_during_a_stalled_model_call_act_within_a_second() {
    let format = WireFormat::OpenAiChat;
    let mut stall = text("too late");
    stall.delay = Duration::from_secs(10);
    let (port, seen) = strict_model(
        format,
        vec![stall.clone(), text("done after the pause"), stall],
    );
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let agent = agent(dir.path(), format, port, "");

    // Pause: acted on while the call stalls; resume sends it again.
    let mut run = Proc::spawn(home.cmd(&["run", &agent, "--json"]));
    let session = session_of_json(&run.next_line().expect("a first line"));
    wait_for_request(&seen, 1);
    let posted = post(&home, &["pause", &session, "--reason", "lunch"]);
    let started = Instant::now();
    let ended = run.finish();
    let exited = started.elapsed();
    ended.expect_code(3);
    let log = home.log(&session);
    let paused = of_kind(&log, "paused");
    assert_eq!(paused.len(), 1);
    let pause_ms = paused[0].at_ms - posted;
    eprintln!("pause during a stalled model call: paused {pause_ms} ms after it was posted");
    assert!(pause_ms < 1000, "paused {pause_ms} ms after the post");
    assert!(
        exited < Duration::from_secs(2),
        "exited {exited:?} after the post"
    );
    assert!(of_kind(&log, "model_responded").is_empty());
    let resumed = home.run(&["resume", &session, "--json"]);
    resumed.expect_code(0);
    assert!(resumed.stdout_text().contains("done after the pause"));
    let log = home.log(&session);
    let attempts: Vec<u32> = log
        .iter()
        .filter_map(|r| match &r.event {
            Event::ModelRequested { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, vec![1, 2], "the request was sent again");

    // Cancel: the same, and the session ends.
    let mut run = Proc::spawn(home.cmd(&["run", &agent, "--json"]));
    let session = session_of_json(&run.next_line().expect("a first line"));
    wait_for_request(&seen, 3);
    let posted = post(&home, &["cancel", &session, "--reason", "wrong goal"]);
    let ended = run.finish();
    ended.expect_code(1);
    let log = home.log(&session);
    let failed = of_kind(&log, "failed");
    assert_eq!(failed.len(), 1);
    let cancel_ms = failed[0].at_ms - posted;
    eprintln!("cancel during a stalled model call: ended {cancel_ms} ms after it was posted");
    assert!(cancel_ms < 1000, "cancelled {cancel_ms} ms after the post");
}

#[test]
fn a_cost_limit_on_a_model_without_a_price_is_refused_at_start() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let root = dir.path();
    // No server: nothing may be sent. The model is on another machine
    // (192.0.2.1 is a documentation address): one on this machine's
    // loopback is free by rule (below).
    let agent = agent(
        root,
        WireFormat::OpenAiChat,
        9,
        "[limits]\nmax_cost_micros = 1000\n",
    );
    let toml = root.join("agent.toml");
    let text = std::fs::read_to_string(&toml).expect("agent.toml");
    write(&toml, &text.replace("127.0.0.1", "192.0.2.1"));
    let out = home.run(&["run", &agent]);
    out.expect_code(2);
    for needle in [
        "`m`",
        "no price",
        "prices.toml",
        "[openai.\"m\"]",
        "max_cost_micros",
    ] {
        assert!(
            out.stderr.contains(needle),
            "no {needle:?} in:\n{}",
            out.stderr
        );
    }
    assert_eq!(home.run(&["sessions", "--json"]).stdout_text().trim(), "");
    // Issue 31: its sentences are not broken by runs of spaces (a string
    // continued across source lines without `\` kept the indentation);
    // only the TOML sample is indented, by two.
    for line in out.stderr.lines() {
        let text = line.trim_start();
        assert!(!text.contains("   "), "a run of spaces in {line:?}");
    }
    assert!(
        out.stderr.contains("input = 0 and output = 0"),
        "how to price a local model: {}",
        out.stderr
    );

    // A child's slice: the parent's model is priced, the child's is not.
    write(
        &root.join("reader/agent.toml"),
        "name = \"reader\"\ninstructions = \"Read.\"\n[model]\nprovider = \"openai\"\n\
         model = \"local-reader\"\nbase_url = \"http://192.0.2.1:9/v1\"\n",
    );
    write(
        &root.join("agent.toml"),
        "name = \"parent\"\ninstructions = \"Delegate.\"\ngoal = \"g\"\n[model]\n\
         provider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         [limits]\nmax_cost_micros = 30000\n[agents.reader]\npath = \"reader\"\n\
         max_cost_micros = 20000\n",
    );
    let out = home.run(&["run", &agent, "--detach"]);
    out.expect_code(2);
    for needle in [
        "`local-reader`",
        "[agents.reader]",
        "[openai.\"local-reader\"]",
    ] {
        assert!(
            out.stderr.contains(needle),
            "no {needle:?} in:\n{}",
            out.stderr
        );
    }
    assert_eq!(home.run(&["sessions", "--json"]).stdout_text().trim(), "");

    // Priced the way the message says: it starts.
    write(
        &home.path().join("prices.toml"),
        "as_of = \"2026-12-01\"\n[openai.\"local-reader\"]\ninput = 1.0\noutput = 2.0\n",
    );
    home.run(&["run", &agent, "--detach"]).expect_code(0);
}

#[test]
fn a_cost_limit_on_a_model_served_on_loopback_without_a_price_starts_at_zero() {
    // README's live-model line for a local model, with a money limit and no
    // prices.toml: the model on 127.0.0.1 is priced 0 by rule and runs.
    let format = WireFormat::OpenAiChat;
    let (port, seen) = strict_model(format, vec![text("all read")]);
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let agent = agent(
        dir.path(),
        format,
        port,
        "[limits]\nmax_cost_micros = 1000\n",
    );
    let out = home.run(&["run", &agent, "--json"]);
    out.expect_code(0);
    assert!(
        out.stdout_text().contains("all read"),
        "{}",
        out.stdout_text()
    );
    wait_for_request(&seen, 1);
    let session = session_of_json(out.stdout_text().lines().next().expect("a first line"));
    let log = home.log(&session);
    let created = serde_json::to_value(&log[0].event).expect("json");
    let prices = &created["agent"]["prices"];
    let price = prices
        .as_object()
        .and_then(|p| p.values().next())
        .unwrap_or_else(|| panic!("a frozen price in {created}"));
    assert_eq!((&price["input"], &price["output"]), (&json!(0), &json!(0)));
    assert!(
        price["source"]
            .as_str()
            .is_some_and(|s| s.starts_with("loopback rule")),
        "{price}"
    );
    assert!(of_kind(&log, "paused").is_empty(), "no pause for a price");
}

#[test]
fn attempts_are_counted_across_a_resume() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    // One task whose check never passes; two attempts a set; the worker
    // says it is done every time.
    write(
        &dir.path().join("agent.toml"),
        "name = \"tries\"\ninstructions = \"Work.\"\ngoal = \"Make out.txt.\"\n\
         [model]\nprovider = \"replay\"\nmodel = \"script\"\ncassette = \"unused.json\"\n\
         [plan]\nfile = \"plan.toml\"\nmax_attempts = 2\n\
         [[tools]]\ncomponent = \"fs\"\nonly = [\"read\", \"stat\"]\ndirs = [\"work:/w:rw\"]\n",
    );
    write(
        &dir.path().join("plan.toml"),
        "[[tasks]]\nid = \"make\"\ntitle = \"make out.txt\"\n[[tasks.done_when]]\n\
         kind = \"tool\"\ntool = \"fs__stat\"\ninput = { path = \"/w/out.txt\" }\n\
         expect = \".kind == \\\"file\\\"\"\n",
    );
    std::fs::create_dir_all(dir.path().join("work")).expect("work/");
    let script = dir.path().join("script.json");
    let said: Vec<Value> = (1..=4)
        .map(|i| text_turn(&format!("done ({i})"), 10, 1))
        .collect();
    write(&script, &json!({"responses": said}).to_string());
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(3);
    assert_eq!(plan_json(&home, &session)["tasks"][0]["attempts"], 2);
    // A person resumes: a fresh set of two, counted on from two.
    home.run(&["resume", &session]).expect_code(3);
    let plan = plan_json(&home, &session);
    assert_eq!(plan["tasks"][0]["attempts"], 4, "{plan}");
    assert_eq!(plan["tasks"][0]["status"], "failed");
    let log = home.log(&session);
    let started: Vec<u32> = log
        .iter()
        .filter_map(|r| match &r.event {
            Event::TaskStarted { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![1, 2, 3, 4]);
    let Event::TaskStarted { briefing, .. } = &of_kind(&log, "task_started")[2].event else {
        unreachable!()
    };
    let text = String::from_utf8(blob(&home, briefing)).expect("utf-8");
    assert!(text.contains("attempt 3 of 4"), "{text}");
}

/// Issue 26: an answer cut by `max_tokens` half-way through a call leaves
/// arguments that do not parse. The call is answered with an error and the
/// session goes on: every later request carries a valid object in the
/// call's place (llama.cpp's server refuses the whole request otherwise,
/// with HTTP 500, on every resume), with the model's text inside it.
#[test]
fn arguments_cut_by_max_tokens_never_make_the_history_invalid() {
    // The wires that carry arguments as text (Anthropic's are an object
    // in the answer already).
    for format in [WireFormat::OpenAiChat, WireFormat::OpenAiResponses] {
        let (port, seen) = strict_model(
            format,
            vec![
                cut_call("call_cut", "fs__read", "{\"path\": \"/w/x."),
                text("x holds x."),
            ],
        );
        let home = Home::new();
        let dir = TempDir::new().expect("tempdir");
        let agent = agent(dir.path(), format, port, "");
        let run = home.run(&["run", &agent, "--json"]);
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.refused, Vec::<String>::new(), "{format:?}");
        run.expect_code(0);
        assert_eq!(seen.requests.len(), 2, "{format:?}");
        let second = seen.requests[1].1.to_string();
        assert!(second.contains("_raw_arguments"), "{format:?}: {second}");
        assert!(second.contains(r#"\"/w/x."#), "{format:?}: {second}");
    }
}

/// Issue 26: trimming puts a note on the left-out items right after the
/// goal, two user messages in a row, which strict chat templates refuse
/// ("roles must alternate"). Every request keeps roles alternating.
#[test]
fn a_trimmed_history_keeps_roles_alternating() {
    for format in FORMATS {
        let read = |id| calls(vec![(id, "fs__read", json!({"path": "/w/big.txt"}))]);
        let (port, seen) = strict_model(
            format,
            vec![read("r1"), read("r2"), read("r3"), text("read it thrice")],
        );
        let home = Home::new();
        let dir = TempDir::new().expect("tempdir");
        let agent = agent(
            dir.path(),
            format,
            port,
            "[limits]\ncontext_tokens = 1500\n",
        );
        write(&dir.path().join("work/big.txt"), &"abcd ".repeat(800));
        let run = home.run(&["run", &agent, "--json"]);
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.refused, Vec::<String>::new(), "{format:?}");
        run.expect_code(0);
        let last = seen.requests.last().expect("requests").1.to_string();
        assert!(
            last.contains("were left out"),
            "{format:?}: trimmed: {last}"
        );
    }
}

/// Issue 26: a request the model's window cannot hold is recognised
/// (llama.cpp's `exceed_context_size_error`), the history is cut and the
/// request asked once more, and the session goes on; a window too small
/// even for the last turn pauses saying what to change, and
/// `resume --raise context_tokens=N` is a limit resume accepts.
#[test]
fn a_context_overflow_trims_and_asks_again_then_pauses_saying_what_to_change() {
    let format = WireFormat::OpenAiChat;
    let read = |id| calls(vec![(id, "fs__read", json!({"path": "/w/big.txt"}))]);
    // Each result is ~4 KB; the window holds about two of them.
    let (port, seen) = windowed_model(
        format,
        vec![read("r1"), read("r2"), read("r3"), text("done")],
        10_000,
    );
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let roomy = agent(dir.path(), format, port, "");
    write(&dir.path().join("work/big.txt"), &"abcd ".repeat(800));
    let run = home.run(&["run", &roomy, "--json"]);
    run.expect_code(0);
    let session = session_of_json(&run.stdout[0]);
    let log = home.log(&session);
    let overflowed: Vec<&EventRecord> = of_kind(&log, "model_failed");
    assert_eq!(overflowed.len(), 1, "one overflow, then a smaller request");
    assert!(
        matches!(&overflowed[0].event, Event::ModelFailed { kind: Some(k), .. } if k == "context_overflow"),
        "{:?}",
        overflowed[0].event
    );
    let seen = seen.lock().expect("lock");
    let sizes: Vec<usize> = seen
        .requests
        .iter()
        .map(|r| r.1.to_string().len())
        .collect();
    let refused = sizes.iter().position(|n| *n > 10_000).expect("one refused");
    assert!(sizes[refused + 1] < sizes[refused], "{sizes:?}");
    drop(seen);

    // A window smaller than the goal and one result: nothing left to cut.
    let (port, _seen) = windowed_model(format, vec![read("r1"), text("done")], 3_000);
    let dir = TempDir::new().expect("tempdir");
    let small = agent(dir.path(), format, port, "");
    write(&dir.path().join("work/big.txt"), &"abcd ".repeat(800));
    let run = home.run(&["run", &small, "--json"]);
    run.expect_code(3);
    let session = session_of_json(&run.stdout[0]);
    let state = home.state(&session);
    let reason = state.pause.expect("paused").detail;
    for needle in [
        "context window",
        "--raise context_tokens",
        "exceeds the available context",
    ] {
        assert!(reason.contains(needle), "{needle:?} in {reason}");
    }
    // The operator sets a smaller budget: accepted as a limit (it used to
    // be refused as unknown); the request still does not fit, so it pauses
    // again, with the budget the operator set.
    let resumed = home.run(&["resume", &session, "--raise", "context_tokens=500"]);
    assert_ne!(resumed.code, Some(2), "{}", resumed.stderr);
    assert_eq!(home.state(&session).context_tokens, 500);
}

/// Issue 26: the harness's completion check is not a call of the model's.
/// A model that says it is done three times before it is counts no tool
/// calls and trips no breaker for the checks that refused it (it used to
/// pause with "the same call failed 3 times: fs/stat/sha256:…").
#[test]
fn completion_checks_count_toward_no_tool_limit_or_breaker() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    write(
        &dir.path().join("agent.toml"),
        "name = \"claims\"\ninstructions = \"Work.\"\ngoal = \"Make out.txt.\"\n\
         [model]\nprovider = \"replay\"\nmodel = \"script\"\ncassette = \"unused.json\"\n\
         [limits]\nmax_tool_calls = 2\n\
         [completion]\ntool = \"fs__stat\"\ninput = { path = \"/w/out.txt\" }\n\
         [[tools]]\ncomponent = \"fs\"\nonly = [\"write\", \"stat\"]\ndirs = [\"work:/w:rw\"]\n",
    );
    std::fs::create_dir_all(dir.path().join("work")).expect("work/");
    let script = dir.path().join("script.json");
    let mut said: Vec<Value> = (1..=4)
        .map(|i| text_turn(&format!("done ({i})"), 10, 1))
        .collect();
    said.push(crate::support::tool_turn(
        "writing",
        vec![crate::support::call(
            "w",
            "fs__write",
            json!({"path": "/w/out.txt", "content": "made"}),
        )],
        10,
        1,
    ));
    said.push(text_turn("done, really", 10, 1));
    write(&script, &json!({"responses": said}).to_string());
    let (run, session) = run_script(&home, dir.path(), &script);
    let state = home.state(&session);
    assert_eq!(state.pause, None, "{:?}", state.pause);
    run.expect_code(0);
    assert_eq!(state.tool_calls, 1, "the write only");
    assert_eq!(state.consecutive_failures, 0);
    assert!(
        state.repeated_failures.is_empty(),
        "{:?}",
        state.repeated_failures
    );
}

/// Issue 26: progress lines on a stderr that is not a terminal (a log file,
/// a CI job) came one model call late: the tool call of step 1 was printed
/// only once the answer of step 2 was in. They are printed before the wait.
#[test]
fn progress_lines_are_printed_before_the_next_model_call_not_after() {
    use std::io::BufRead;
    let format = WireFormat::OpenAiChat;
    let mut slow = text("x holds x.");
    slow.delay = Duration::from_secs(4);
    let (port, seen) = strict_model(
        format,
        vec![
            calls(vec![("call_1", "fs__read", json!({"path": "/w/x.txt"}))]),
            slow,
        ],
    );
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let agent = agent(dir.path(), format, port, "");
    let mut cmd = home.cmd(&["run", &agent]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn longhand");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let printed = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("tool call call_1 ok") => break Instant::now(),
            Ok(_) => {}
            Err(e) => panic!("no progress line for the tool call ({e})"),
        }
    };
    // Printed while the second answer is still 4 s away (or before the
    // second request is even sent).
    assert!(seen.lock().expect("lock").requests.len() <= 2);
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the line came only when the run ended"
    );
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    let ended = Instant::now();
    assert!(
        ended.duration_since(printed) > Duration::from_secs(2),
        "printed {:?} before the end, not during the wait",
        ended.duration_since(printed)
    );
}
