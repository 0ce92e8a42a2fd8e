//! Issue 8: planned sessions through the real binary — a worker's "done"
//! never finishes a task whose check fails, the worker has no way to edit
//! the plan, a revision that removes a check is refused (and logged),
//! context resets through typed handoffs keep the plan and the handoffs
//! exact, and a planned run killed at every event boundary reaches the same
//! final plan.

use std::path::{Path, PathBuf};

use longhand_session::{Event, EventRecord, SessionId, SqliteStore, Store};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{
    Home, Proc, blob, block_on, call, of_kind, plan_json, run_script, session_of_json, text_turn,
    tool_turn, write,
};

/// A planned agent in `dir`: fs over `work/` (rw), the plan `plan_toml`,
/// `[plan]` settings `plan_section`, and a script of `responses`.
fn planned_agent(
    dir: &Path,
    model_extra: &str,
    plan_section: &str,
    plan_toml: &str,
    responses: &[Value],
) -> PathBuf {
    write(
        &dir.join("agent.toml"),
        &format!(
            r#"name = "planned"
instructions = "Work through the plan."
goal = "Do the plan."

[model]
provider = "replay"
model = "script"
cassette = "unused-cassette.json"
{model_extra}

[limits]
max_steps = 200
max_tool_calls = 200

[plan]
file = "plan.toml"
{plan_section}

[[tools]]
component = "fs"
only = ["read", "write", "stat"]
dirs = ["work:/w:rw"]
"#
        ),
    );
    write(&dir.join("plan.toml"), plan_toml);
    std::fs::create_dir_all(dir.join("work")).expect("create work/");
    let script = dir.join("script.json");
    write(&script, &json!({"responses": responses}).to_string());
    script
}

/// One task whose check is that `/w/<file>` exists.
fn file_task(id: &str, file: &str, depends_on: &[&str]) -> String {
    format!(
        "[[tasks]]\nid = \"{id}\"\ntitle = \"make {file}\"\ndepends_on = {deps}\n\
         [[tasks.done_when]]\nkind = \"tool\"\ntool = \"fs__stat\"\ninput = {{ path = \"/w/{file}\" }}\n\
         expect = \".kind == \\\"file\\\"\"\n\n",
        deps = json!(depends_on)
    )
}

#[test]
fn a_workers_done_never_finishes_a_task_whose_check_fails() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    // The worker says it is done twice without making the file.
    let script = planned_agent(
        dir.path(),
        "",
        "max_attempts = 2",
        &file_task("make", "out.txt", &[]),
        &[
            text_turn("Done: out.txt is written.", 10, 1),
            text_turn("Done, really.", 10, 1),
        ],
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(3);
    let log = home.log(&session);
    assert!(of_kind(&log, "finished").is_empty(), "a claim finished it");
    let checks = of_kind(&log, "check_finished");
    assert_eq!(checks.len(), 2);
    for check in &checks {
        let Event::CheckFinished { passed, kind, .. } = &check.event else {
            unreachable!()
        };
        assert!(!passed);
        assert_eq!(kind, "tool");
    }
    // The second attempt was told what failed.
    let starts = of_kind(&log, "task_started");
    assert_eq!(starts.len(), 2);
    let Event::TaskStarted { briefing, .. } = &starts[1].event else {
        unreachable!()
    };
    let text = String::from_utf8(blob(&home, briefing)).expect("utf-8");
    assert!(text.contains("attempt 2 of 2"), "{text}");
    assert!(text.contains("What failed in the last attempt"), "{text}");
    let plan = plan_json(&home, &session);
    let task = &plan["tasks"][0];
    assert_eq!(task["status"], "failed");
    assert_eq!(task["attempts"], 2);
    assert_eq!(task["checks"][0]["kind"], "tool");
    assert_eq!(task["checks"][0]["passed"], false);
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "paused");
}

#[test]
fn the_worker_cannot_reach_a_plan_editing_tool() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = planned_agent(
        dir.path(),
        "",
        "",
        &file_task("make", "out.txt", &[]),
        &[
            tool_turn(
                "Let me just mark the task done in the plan.",
                vec![
                    call("c1", "plan__revise", json!({"tasks": []})),
                    call("c2", "plan__finish_task", json!({"id": "make"})),
                    call(
                        "c4",
                        "memory__remember",
                        json!({"text": "the plan is done"}),
                    ),
                ],
                10,
                1,
            ),
            tool_turn(
                "Then I do the work.",
                vec![call(
                    "c3",
                    "fs__write",
                    json!({"path": "/w/out.txt", "content": "x"}),
                )],
                10,
                1,
            ),
            text_turn("Wrote /w/out.txt.", 10, 1),
        ],
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);
    let refused: Vec<_> = of_kind(&log, "tool_finished")
        .into_iter()
        .filter(|r| matches!(&r.event, Event::ToolFinished { call_id, .. } if ["c1", "c2", "c4"].contains(&call_id.as_str())))
        .collect();
    assert_eq!(refused.len(), 3);
    for r in refused {
        let Event::ToolFinished { ok, result, .. } = &r.event else {
            unreachable!()
        };
        assert!(!ok);
        let text = String::from_utf8(blob(&home, result)).expect("utf-8");
        assert!(text.contains("there is no tool"), "{text}");
    }
    assert!(of_kind(&log, "plan_revised").is_empty());
    let plan = plan_json(&home, &session);
    assert_eq!(plan["revision"], 0);
    assert_eq!(plan["tasks"][0]["status"], "done");
    assert_eq!(plan["tasks"][0]["checks"][0]["passed"], true);
}

#[test]
fn a_revision_that_removes_a_check_is_refused_and_logged() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("work")).expect("mkdir");
    write(&dir.path().join("work/a.txt"), "a");
    write(&dir.path().join("work/b.txt"), "b");
    let stat = |file: &str| {
        json!({"kind": "tool", "tool": "fs__stat", "input": {"path": format!("/w/{file}")},
               "expect": ".kind == \"file\""})
    };
    // The planner first drops the operator's check, then extends properly.
    let weakened = json!({"tasks": [{"id": "a", "title": "make a.txt", "done_when": [
        {"kind": "judge", "rubric": "looks fine"}]}]});
    let extended = json!({"tasks": [
        {"id": "a", "title": "make a.txt", "done_when": [stat("a.txt")]},
        {"id": "b", "title": "make b.txt", "depends_on": ["a"], "done_when": [stat("b.txt")]}]});
    let script = planned_agent(
        dir.path(),
        "",
        "planner = \"extend\"",
        &file_task("a", "a.txt", &[]),
        &[
            text_turn(&weakened.to_string(), 10, 1),
            text_turn(&extended.to_string(), 10, 1),
            text_turn("a.txt is there.", 10, 1),
            text_turn("b.txt is there.", 10, 1),
        ],
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);
    let revisions = of_kind(&log, "plan_revised");
    assert_eq!(revisions.len(), 2);
    let Event::PlanRevised {
        accepted, weakened, ..
    } = &revisions[0].event
    else {
        unreachable!()
    };
    assert!(!accepted, "a weakening revision was accepted");
    assert_eq!(weakened.len(), 1, "{weakened:?}");
    assert!(weakened[0].contains("fs__stat"), "{weakened:?}");
    let Event::PlanRevised { accepted, .. } = &revisions[1].event else {
        unreachable!()
    };
    assert!(accepted);
    let plan = plan_json(&home, &session);
    assert_eq!(plan["revision"], 1);
    let tasks = plan["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["checks"][0]["kind"], "tool");
    assert!(tasks.iter().all(|t| t["status"] == "done"));
}

/// The handoff the script writes at reset `k`.
fn handoff_of(k: usize) -> Value {
    json!({"goal": "Do the plan.", "current_task": "long", "status": format!("reset {k}: {k} stats done"),
           "done": [], "remaining": ["long"], "decisions": [format!("decision {k}")],
           "open_questions": [], "calls_in_doubt": [], "artifacts": ["/w/a.txt"], "notes": []})
}

#[test]
fn five_context_resets_keep_the_plan_and_the_handoffs_exact() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("work")).expect("mkdir");
    write(&dir.path().join("work/a.txt"), "a");
    const RESETS: usize = 5;
    let mut responses = Vec::new();
    for k in 1..=RESETS {
        // 600 tokens of a 1000-token window: past `handoff_at = 0.5`.
        responses.push(tool_turn(
            &format!("stat {k}"),
            vec![call(
                &format!("s{k}"),
                "fs__stat",
                json!({"path": "/w/a.txt"}),
            )],
            590,
            10,
        ));
        responses.push(text_turn(&handoff_of(k).to_string(), 600, 50));
    }
    responses.push(text_turn("All stats done.", 100, 5));
    let script = planned_agent(
        dir.path(),
        "context_window = 1000",
        "handoff_at = 0.5",
        &file_task("long", "a.txt", &[]),
        &responses,
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);
    let handoffs = of_kind(&log, "handoff");
    assert_eq!(handoffs.len(), RESETS);
    for (k, record) in handoffs.iter().enumerate() {
        let Event::Handoff {
            task,
            handoff,
            briefing,
            context_tokens,
            by_model,
            ..
        } = &record.event
        else {
            unreachable!()
        };
        assert!(by_model);
        assert_eq!(task.as_deref(), Some("long"));
        assert_eq!(*context_tokens, 600);
        let stored: Value = serde_json::from_slice(&blob(&home, handoff)).expect("json");
        assert_eq!(stored, handoff_of(k + 1), "handoff {} is not exact", k + 1);
        let text = String::from_utf8(blob(&home, briefing)).expect("utf-8");
        assert!(text.contains(&format!("reset {}: ", k + 1)), "{text}");
        assert!(text.contains(&format!("- decision {}", k + 1)), "{text}");
        assert!(text.contains("# Your task: long"), "{text}");
    }
    // Every worker request after a reset started from the briefing alone:
    // the request manifests say how much history each carried.
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "finished");
    let plan = state.plan.expect("a plan");
    assert_eq!(plan.tasks["long"].attempts, 1);
    assert_eq!(plan.status("long").as_str(), "done");
    let requests = of_kind(&log, "model_requested");
    assert_eq!(requests.len(), 2 * RESETS + 1);
    let roles: Vec<&str> = requests
        .iter()
        .map(|r| match &r.event {
            Event::ModelRequested { role, .. } => role.as_str(),
            _ => unreachable!(),
        })
        .collect();
    let mut want = Vec::new();
    for _ in 0..RESETS {
        want.extend(["worker", "handoff"]);
    }
    want.push("worker");
    assert_eq!(roles, want);
    for r in &requests {
        let Event::ModelRequested { request, .. } = &r.event else {
            unreachable!()
        };
        let manifest: Value = serde_json::from_slice(&blob(&home, request)).expect("json");
        // A fresh context holds one turn at most: the answer and its call.
        assert!(
            manifest["history_items"].as_u64().expect("items") <= 2,
            "{manifest}"
        );
    }
}

/// The planned run the crash test repeats: three tasks, tool checks and a
/// judge, a failed attempt and a handoff.
fn crash_agent(dir: &Path) -> PathBuf {
    let mut plan = file_task("one", "one.txt", &[]);
    plan.push_str(&file_task("two", "two.txt", &["one"]));
    plan.push_str(
        "[[tasks]]\nid = \"three\"\ntitle = \"review\"\ndepends_on = [\"two\"]\n\
         [[tasks.done_when]]\nkind = \"judge\"\nrubric = \"both files exist\"\n",
    );
    let write_call = |id: &str, file: &str| {
        call(
            id,
            "fs__write",
            json!({"path": format!("/w/{file}"), "content": file}),
        )
    };
    let responses = vec![
        tool_turn("one", vec![write_call("w1", "one.txt")], 10, 1),
        text_turn("one done", 10, 1),
        // Task two: a claim before the work fails its check.
        text_turn("two done (not really)", 10, 1),
        tool_turn("two, for real", vec![write_call("w2", "two.txt")], 700, 1),
        text_turn(&handoff_of(1).to_string(), 10, 1),
        text_turn("two done", 10, 1),
        // Task three: the worker claims, the judge looks and passes it.
        text_turn("reviewed", 10, 1),
        tool_turn(
            "judge looks",
            vec![call("j1", "fs__stat", json!({"path": "/w/two.txt"}))],
            10,
            1,
        ),
        text_turn(
            r#"{"pass": true, "reasons": ["both exist"], "missing": []}"#,
            10,
            1,
        ),
    ];
    planned_agent(
        dir,
        "context_window = 1000",
        "handoff_at = 0.5",
        &plan,
        &responses,
    )
}

/// The final plan, without the session id.
fn final_plan(home: &Home, session: &str) -> Value {
    let mut plan = plan_json(home, session);
    plan.as_object_mut().expect("object").remove("session");
    plan
}

#[test]
fn a_planned_run_killed_at_every_event_boundary_reaches_the_same_plan() {
    let reference_home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = crash_agent(dir.path());
    let (run, session) = run_script(&reference_home, dir.path(), &script);
    run.expect_code(0);
    let reference = final_plan(&reference_home, &session);
    assert!(
        reference["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .all(|t| t["status"] == "done"),
        "{reference}"
    );
    let events = reference_home.log(&session).len();
    assert!(events > 30, "{events} events");
    // Kill after the k-th event for every k, then resume until it ends.
    for k in 2..events {
        let home = Home::new();
        let dir = TempDir::new().expect("tempdir");
        let script = crash_agent(dir.path());
        let mut proc = Proc::spawn(home.cmd(&[
            "run",
            dir.path().to_str().expect("utf-8"),
            "--script",
            script.to_str().expect("utf-8"),
            "--json",
        ]));
        let first = proc.next_line().expect("a first line");
        let session = session_of_json(&first);
        let mut seen = 0;
        while seen < k {
            match proc.next_line() {
                Some(line) if line.contains("\"seq\"") => seen += 1,
                Some(_) => {}
                None => break,
            }
        }
        proc.kill();
        let mut rounds = 0;
        loop {
            let state = home.state(&session);
            if state.is_terminal() {
                break;
            }
            rounds += 1;
            assert!(rounds < 5, "kill at {k}: not done after {rounds} resumes");
            let out = home.run(&["resume", &session, "--json"]);
            assert!(
                matches!(out.code, Some(0)),
                "kill at {k}: resume exited {:?}:\n{}",
                out.code,
                out.stderr
            );
        }
        let state = home.state(&session);
        assert_eq!(state.status.as_str(), "finished", "kill at {k}");
        assert_eq!(final_plan(&home, &session), reference, "kill at {k}");
        // The log has no gaps.
        let log = home.log(&session);
        for (i, r) in log.iter().enumerate() {
            assert_eq!(r.seq, i as u64 + 1, "kill at {k}");
        }
        let _: SessionId = session.parse().expect("id");
    }
}

#[test]
fn memories_reach_fresh_contexts_and_the_tools_write_with_provenance() {
    use longhand_brain::memory::{MemoryBank, NewMemory, default_path};
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("work")).expect("mkdir");
    write(&dir.path().join("work/a.txt"), "a");
    let bank = MemoryBank::open(&default_path(home.path())).expect("bank");
    let seeded = bank
        .remember(NewMemory {
            scope: "project:demo".into(),
            text: "The build needs the offline flag: always pass --offline to cargo.".into(),
            tags: vec!["build".into()],
            source: None,
            supersedes: None,
        })
        .expect("seed");
    let other = bank
        .remember(NewMemory {
            scope: "user:someone".into(),
            text: "Private: the offline build password is hunter2.".into(),
            tags: vec![],
            source: None,
            supersedes: None,
        })
        .expect("seed");
    drop(bank);
    let mut plan = String::from(
        "[[tasks]]\nid = \"build\"\ntitle = \"Run the build offline\"\n\
         [[tasks.done_when]]\nkind = \"tool\"\ntool = \"fs__stat\"\ninput = { path = \"/w/a.txt\" }\n",
    );
    plan.push('\n');
    let script = planned_agent(
        dir.path(),
        "",
        "",
        &plan,
        &[
            tool_turn(
                "What do we know?",
                vec![call(
                    "m1",
                    "memory__search",
                    json!({"query": "offline build"}),
                )],
                10,
                1,
            ),
            tool_turn(
                "Noting the lesson.",
                vec![call(
                    "m2",
                    "memory__remember",
                    json!({"text": "Lesson: the build passes with --offline.", "tags": ["build"]}),
                )],
                10,
                1,
            ),
            text_turn("Built offline.", 10, 1),
        ],
    );
    let agent = dir.path().join("agent.toml");
    let mut text = std::fs::read_to_string(&agent).expect("agent.toml");
    text.push_str(
        "\n[memory]\nread = [\"project:demo\"]\nsearch = [\"project:demo\"]\nremember = \"project:demo\"\n",
    );
    write(&agent, &text);
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);

    // The briefing held the project's memory, not another scope's.
    let Event::TaskStarted {
        briefing, memories, ..
    } = &of_kind(&log, "task_started")[0].event
    else {
        unreachable!()
    };
    assert_eq!(memories, &vec![seeded.id.clone()]);
    let text = String::from_utf8(blob(&home, briefing)).expect("utf-8");
    assert!(text.contains("always pass --offline"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");

    // The search tool reads the granted scope only.
    let results: Vec<&EventRecord> = of_kind(&log, "tool_finished");
    let search = results
        .iter()
        .find(|r| matches!(&r.event, Event::ToolFinished { call_id, .. } if call_id == "m1"))
        .expect("the search ran");
    let Event::ToolFinished { ok, result, .. } = &search.event else {
        unreachable!()
    };
    assert!(ok);
    let found = String::from_utf8(blob(&home, result)).expect("utf-8");
    assert!(found.contains(&seeded.id), "{found}");
    assert!(!found.contains(&other.id), "{found}");

    // The write is an event with provenance, and in the bank.
    let written = of_kind(&log, "memory_written");
    assert_eq!(written.len(), 1);
    let Event::MemoryWritten {
        id, scope, call_id, ..
    } = &written[0].event
    else {
        unreachable!()
    };
    assert_eq!(scope, "project:demo");
    assert_eq!(call_id.as_deref(), Some("m2"));
    let bank = MemoryBank::open(&default_path(home.path())).expect("bank");
    let entry = bank.get(id).expect("read").expect("the entry");
    assert_eq!(
        entry.source.as_ref().map(|s| s.session.as_str()),
        Some(session.as_str())
    );
    let used = bank.get(&seeded.id).expect("read").expect("seeded");
    assert!(
        used.used_by.iter().any(|u| u.session == session),
        "{used:?}"
    );
}

/// A model for parallel tasks: it reads its task from the briefing, writes
/// `/w/<task>.txt`, then says it is done; every answer takes 100 ms (task
/// `slow`'s 2 s), and it counts how many calls were in flight at once.
struct TaskModel {
    in_flight: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl longhand_brain::model::ModelProvider for TaskModel {
    fn name(&self) -> &str {
        "task-model"
    }
    fn model(&self) -> &str {
        "task-model"
    }
    async fn complete(
        &self,
        req: &longhand_brain::model::ModelRequest,
    ) -> Result<longhand_brain::model::ModelResponse, longhand_brain::model::ModelError> {
        use longhand_brain::model::{Message, ModelResponse, ToolCall};
        use std::sync::atomic::Ordering;
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let first = match req.messages.first() {
            Some(Message::User { text }) => text.clone(),
            _ => String::new(),
        };
        let task = first
            .split("# Your task: ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or("unknown")
            .to_owned();
        // Task `slow` takes ten times as long as the others.
        let ms = if task == "slow" { 2000 } else { 100 };
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let answered = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let mut response = ModelResponse::default();
        if answered == 0 {
            response.text = Some(format!("Writing {task}.txt"));
            response.tool_calls = vec![ToolCall {
                id: format!("w-{task}"),
                name: "fs__write".into(),
                arguments: json!({"path": format!("/w/{task}.txt"), "content": task}).to_string(),
            }];
        } else {
            response.text = Some(format!("{task}.txt is written."));
        }
        Ok(response)
    }
}

/// Runs a planned agent in `dir` with [`TaskModel`]; returns the end, the
/// parent's log, each child's state, and the most calls in flight at once.
fn run_task_model(
    dir: &Path,
) -> (
    longhand_brain::RunEnd,
    Vec<EventRecord>,
    Vec<(String, longhand_brain::core::state::SessionState)>,
    usize,
) {
    use longhand_brain::Runner;
    use longhand_brain::agent::config::AgentConfig;
    use longhand_brain::{bind, freeze};
    use longhand_hands::{Hands, HandsConfig};
    use std::sync::Arc;
    let model = Arc::new(TaskModel {
        in_flight: Default::default(),
        most: Default::default(),
    });
    let (config, base) = AgentConfig::load(dir).expect("agent.toml");
    let store_dir = TempDir::new().expect("tempdir");
    let (end, log, children) = block_on(async {
        let hands = Hands::new(HandsConfig::default()).expect("hands");
        let frozen = freeze(&hands, &config, &base, |_| None)
            .await
            .expect("freeze");
        let agent = bind(&hands, frozen, |_| None).await.expect("bind");
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(store_dir.path()).await.expect("store"));
        let mut runner = Runner::start(store.clone(), &hands, agent, model.clone(), "g", "me")
            .await
            .expect("start");
        let end = runner.run().await.expect("run");
        let session = runner.session().clone();
        drop(runner);
        let log = store.read(&session, 1).await.expect("log");
        let mut children = Vec::new();
        for r in &log {
            if let Event::TaskStarted {
                child: Some(child), ..
            } = &r.event
            {
                let id: SessionId = child.parse().expect("child id");
                let state = longhand_brain::load_state(store.as_ref(), &id)
                    .await
                    .expect("child state");
                children.push((child.clone(), state));
            }
        }
        (end, log, children)
    });
    let most = model.most.load(std::sync::atomic::Ordering::SeqCst);
    (end, log, children, most)
}

/// Task starts and ends in the parent's log, in order.
fn task_order(log: &[EventRecord]) -> Vec<String> {
    log.iter()
        .filter_map(|r| match &r.event {
            Event::TaskStarted { task, .. } => Some(format!("start {task}")),
            Event::TaskFinished { task, status, .. } => Some(format!("{status} {task}")),
            _ => None,
        })
        .collect()
}

#[test]
fn a_freed_slot_starts_the_next_ready_task_while_a_slow_one_runs() {
    let dir = TempDir::new().expect("tempdir");
    let mut plan = file_task("fast", "fast.txt", &[]);
    plan.push_str(&file_task("slow", "slow.txt", &[]));
    plan.push_str(&file_task("next", "next.txt", &["fast"]));
    planned_agent(dir.path(), "", "max_parallel_tasks = 2", &plan, &[]);
    let (end, log, children, most) = run_task_model(dir.path());
    assert_eq!(end.status.as_str(), "finished", "{:?}", end.detail);
    assert_eq!(children.len(), 3);
    assert!(most >= 2);
    // `next` needs only `fast`: it starts when `fast` ends, while `slow`
    // still runs, not after it.
    assert_eq!(
        task_order(&log),
        [
            "start fast",
            "start slow",
            "done fast",
            "start next",
            "done next",
            "done slow"
        ],
    );
}

#[test]
fn independent_tasks_run_side_by_side_in_child_sessions() {
    let dir = TempDir::new().expect("tempdir");
    let mut plan = file_task("a", "a.txt", &[]);
    plan.push_str(&file_task("b", "b.txt", &[]));
    plan.push_str(&file_task("c", "c.txt", &["a", "b"]));
    planned_agent(dir.path(), "", "max_parallel_tasks = 2", &plan, &[]);
    let (end, log, children, most) = run_task_model(dir.path());
    assert_eq!(end.status.as_str(), "finished", "{:?}", end.detail);
    // Each task ran in its own child session, which finished its task.
    assert_eq!(children.len(), 3);
    for (child, state) in &children {
        assert_eq!(state.status.as_str(), "finished", "{child}");
        let plan = state.plan.as_ref().expect("a one-task plan");
        assert_eq!(plan.plan.tasks.len(), 1, "{child}");
        assert!(plan.all_done(), "{child}");
    }
    // a and b side by side; c after both.
    assert!(most >= 2, "the two independent tasks did not overlap");
    let order = task_order(&log);
    assert_eq!(&order[..2], ["start a", "start b"]);
    assert_eq!(order.last().map(String::as_str), Some("done c"));
    let c = order
        .iter()
        .position(|o| o == "start c")
        .expect("c started");
    for done in ["done a", "done b"] {
        assert!(
            order.iter().position(|o| o == done).expect(done) < c,
            "{order:?}"
        );
    }
    for file in ["a.txt", "b.txt", "c.txt"] {
        assert!(dir.path().join("work").join(file).is_file(), "{file}");
    }
    // The parent's plan records each child's check results.
    let checks = of_kind(&log, "check_finished");
    assert_eq!(checks.len(), 3);
}

/// Parallel tasks through the binary: every child's script is the same
/// (write the shared file, then say done), so `--script` drives them all.
fn parallel_agent(dir: &Path) -> PathBuf {
    let shared = |id: &str, deps: &[&str]| file_task(id, "shared.txt", deps);
    let mut plan = shared("a", &[]);
    plan.push_str(&shared("b", &[]));
    plan.push_str(&shared("c", &["a", "b"]));
    planned_agent(
        dir,
        "",
        "max_parallel_tasks = 2",
        &plan,
        &[
            tool_turn(
                "writing",
                vec![call(
                    "w",
                    "fs__write",
                    json!({"path": "/w/shared.txt", "content": "x"}),
                )],
                10,
                1,
            ),
            text_turn("done", 10, 1),
        ],
    )
}

#[test]
fn a_parallel_run_killed_at_every_parent_event_runs_each_task_once() {
    let reference_home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = parallel_agent(dir.path());
    let (run, session) = run_script(&reference_home, dir.path(), &script);
    run.expect_code(0);
    let reference = final_plan(&reference_home, &session);
    let events = reference_home.log(&session).len();
    assert!(events >= 12, "{events} parent events");
    for k in 2..events {
        let home = Home::new();
        let dir = TempDir::new().expect("tempdir");
        let script = parallel_agent(dir.path());
        let mut proc = Proc::spawn(home.cmd(&[
            "run",
            dir.path().to_str().expect("utf-8"),
            "--script",
            script.to_str().expect("utf-8"),
            "--json",
        ]));
        let session = session_of_json(&proc.next_line().expect("a first line"));
        let mut seen = 0;
        while seen < k {
            match proc.next_line() {
                Some(line) if line.contains("\"seq\"") => seen += 1,
                Some(_) => {}
                None => break,
            }
        }
        proc.kill();
        for round in 0.. {
            if home.state(&session).is_terminal() {
                break;
            }
            assert!(round < 5, "kill at {k}: not done after {round} resumes");
            let out = home.run(&["resume", &session, "--json"]);
            assert_eq!(out.code, Some(0), "kill at {k}: {}", out.stderr);
        }
        assert_eq!(final_plan(&home, &session), reference, "kill at {k}");
        // Each task ran in exactly one child, which finished; a child
        // created but never named (a kill between the two) never ran.
        let log = home.log(&session);
        let named: Vec<String> = log
            .iter()
            .filter_map(|r| match &r.event {
                Event::TaskStarted { child: Some(c), .. } => Some(c.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(named.len(), 3, "kill at {k}: {named:?}");
        let listed = home.run(&["sessions", "--json"]);
        for line in &listed.stdout {
            let s: Value = serde_json::from_str(line).expect("json");
            let id = s["id"].as_str().expect("id").to_owned();
            if id == session {
                continue;
            }
            let child_log = home.log(&id);
            if named.contains(&id) {
                assert_eq!(home.state(&id).status.as_str(), "finished", "kill at {k}");
                let writes = child_log
                    .iter()
                    .filter(|r| r.event.kind() == "model_responded")
                    .count();
                assert_eq!(writes, 2, "kill at {k}: child {id} answered {writes} times");
            } else {
                assert!(
                    child_log.len() <= 2,
                    "kill at {k}: unnamed child {id} ran: {} events",
                    child_log.len()
                );
            }
        }
    }
}

#[test]
fn a_bad_plan_or_command_check_is_refused_before_a_session_exists() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    // A jq expression that does not compile.
    let plan = "[[tasks]]\nid = \"t\"\ntitle = \"t\"\n[[tasks.done_when]]\nkind = \"tool\"\n\
                tool = \"fs__stat\"\ninput = { path = \"/w/a\" }\nexpect = \".kind ==\"\n";
    let script = planned_agent(dir.path(), "", "", plan, &[text_turn("x", 1, 1)]);
    let run = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
    ]);
    run.expect_code(2);
    assert!(run.stderr.contains("does not compile"), "{}", run.stderr);
    // A tool check naming a tool that writes.
    let plan = "[[tasks]]\nid = \"t\"\ntitle = \"t\"\n[[tasks.done_when]]\nkind = \"tool\"\n\
                tool = \"fs__write\"\ninput = { path = \"/w/a\", content = \"x\" }\n";
    write(&dir.path().join("plan.toml"), plan);
    let run = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
    ]);
    run.expect_code(2);
    assert!(run.stderr.contains("fs__write"), "{}", run.stderr);
    // A command check that would write into a read-only grant.
    write(&dir.path().join("plan.toml"), &file_task("t", "a.txt", &[]));
    let agent = dir.path().join("agent.toml");
    let text = std::fs::read_to_string(&agent).expect("agent.toml");
    let text = text.replace("dirs = [\"work:/w:rw\"]", "dirs = [\"work:/w:ro\"]");
    write(
        &agent,
        &format!(
            "{text}\n[checks.tests]\nargv = [\"/bin/true\"]\ncwd = \"/w\"\nwritable = [\"/w\"]\nread_only = [\"/\"]\n"
        ),
    );
    let run = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
    ]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("checks.tests.writable"),
        "{}",
        run.stderr
    );
    // Nothing was started.
    let listed = home.run(&["sessions", "--json"]);
    assert!(listed.stdout.is_empty(), "{:?}", listed.stdout);
}

#[test]
fn the_checks_run_when_the_worker_spends_its_steps_without_a_claim() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("work")).expect("mkdir");
    write(&dir.path().join("work/a.txt"), "a");
    let stat = |i: usize| {
        tool_turn(
            &format!("looking {i}"),
            vec![call(
                &format!("s{i}"),
                "fs__stat",
                json!({"path": "/w/a.txt"}),
            )],
            10,
            1,
        )
    };
    // It never says it is done; after 3 answers the harness checks anyway.
    let script = planned_agent(
        dir.path(),
        "",
        "steps_per_attempt = 3",
        &file_task("t", "a.txt", &[]),
        &[stat(1), stat(2), stat(3), stat(4)],
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);
    assert_eq!(of_kind(&log, "model_responded").len(), 3);
    let checks = of_kind(&log, "check_finished");
    assert_eq!(checks.len(), 1);
    assert!(matches!(
        &checks[0].event,
        Event::CheckFinished { passed: true, .. }
    ));
    // The calls of the last answer ran before the checks.
    let last_call = log
        .iter()
        .position(|r| matches!(&r.event, Event::ToolFinished { call_id, .. } if call_id == "s3"))
        .expect("s3 ran");
    assert!(
        last_call
            < log
                .iter()
                .position(|r| r.event.kind() == "check_finished")
                .expect("check")
    );
}

#[test]
fn a_planned_session_folds_the_same_through_a_snapshot_at_any_event() {
    use longhand_brain::core::state::SessionState;
    use longhand_brain::core::state::snapshot::{decode, encode};
    // The crash test's run: a plan, a failed attempt, a handoff, a judge.
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = crash_agent(dir.path());
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);
    let whole = SessionState::fold(&log);
    assert!(whole.plan.is_some());
    let store_dir = TempDir::new().expect("tempdir");
    block_on(async {
        let store = SqliteStore::open(store_dir.path()).await.expect("store");
        for k in 1..log.len() {
            let prefix = SessionState::fold(&log[..k]);
            let encoded = encode(&prefix);
            for bytes in encoded.blobs {
                store.put_blob(bytes).await.expect("put");
            }
            let mut state = decode(&store, &encoded.root)
                .await
                .expect("decode")
                .expect("a usable snapshot");
            assert_eq!(state, prefix, "snapshot after event {k}");
            for record in &log[k..] {
                state.apply(record);
            }
            assert_eq!(state, whole, "folded on from event {k}");
        }
    });
}
