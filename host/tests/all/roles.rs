//! Issue 8: the roles of a planned session through the real binary — the
//! planner writing a plan (its bad answers sent back with their errors,
//! three of them pausing the session), the planner revising a plan after a
//! task failed, the judge (unreadable verdicts, a refused writing call, a
//! read-only tool list) and the handoff writer (two bad answers and the
//! harness writes the handoff).
//!
//! Scripts answer by the loop's global step: every role's model turn
//! counts, in the order the session asks them.

use std::path::{Path, PathBuf};

use longhand_session::{BlobRef, Event, EventRecord, PauseKind, SqliteStore, Store};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{
    Home, blob, block_on, call, of_kind, plan_json, run_script, text_turn, tool_turn, write,
};

/// A planned agent in `dir`: fs over `work/` (rw), `[plan]` settings
/// `plan_section`, the operator's plan `plan_toml` when there is one (no
/// `file` otherwise: the planner writes the plan), and a script of
/// `responses`.
fn role_agent(
    dir: &Path,
    model_extra: &str,
    plan_section: &str,
    plan_toml: Option<&str>,
    responses: &[Value],
) -> PathBuf {
    let file = match plan_toml {
        Some(plan) => {
            write(&dir.join("plan.toml"), plan);
            "file = \"plan.toml\""
        }
        None => "",
    };
    write(
        &dir.join("agent.toml"),
        &format!(
            r#"name = "roles"
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
{file}
{plan_section}

[[tools]]
component = "fs"
only = ["read", "write", "stat"]
dirs = ["work:/w:rw"]
"#
        ),
    );
    std::fs::create_dir_all(dir.join("work")).expect("create work/");
    let script = dir.join("script.json");
    write(&script, &json!({"responses": responses}).to_string());
    script
}

/// A check that `/w/<file>` is a file, as plan JSON.
fn stat_check(file: &str) -> Value {
    json!({"kind": "tool", "tool": "fs__stat", "input": {"path": format!("/w/{file}")},
           "expect": ".kind == \"file\""})
}

/// One task whose check is that `/w/<file>` exists, as plan.toml.
fn file_task(id: &str, file: &str) -> String {
    format!(
        "[[tasks]]\nid = \"{id}\"\ntitle = \"make {file}\"\n\
         [[tasks.done_when]]\nkind = \"tool\"\ntool = \"fs__stat\"\ninput = {{ path = \"/w/{file}\" }}\n\
         expect = \".kind == \\\"file\\\"\"\n\n"
    )
}

/// One task whose only check is the judge's.
const JUDGED_TASK: &str = "[[tasks]]\nid = \"review\"\ntitle = \"review the work\"\n\
                           [[tasks.done_when]]\nkind = \"judge\"\nrubric = \"the work is fine\"\n";

/// The worker writes `/w/<file>`.
fn write_turn(id: &str, file: &str) -> Value {
    tool_turn(
        &format!("writing {file}"),
        vec![call(
            id,
            "fs__write",
            json!({"path": format!("/w/{file}"), "content": file}),
        )],
        10,
        1,
    )
}

fn blob_json(home: &Home, blob_ref: &BlobRef) -> Value {
    serde_json::from_slice(&blob(home, blob_ref)).expect("a JSON blob")
}

fn blob_text(home: &Home, blob_ref: &BlobRef) -> String {
    String::from_utf8(blob(home, blob_ref)).expect("utf-8")
}

/// The `model_requested` events of `role`, as (step, request manifest).
fn requests_of(home: &Home, log: &[EventRecord], want: &str) -> Vec<(u64, Value)> {
    log.iter()
        .filter_map(|r| match &r.event {
            Event::ModelRequested {
                step,
                role,
                request,
                ..
            } if role == want => Some((*step, blob_json(home, request))),
            _ => None,
        })
        .collect()
}

/// The messages of the `error` events, with their steps.
fn errors(log: &[EventRecord]) -> Vec<(Option<u64>, String)> {
    log.iter()
        .filter_map(|r| match &r.event {
            Event::Error { step, message } => Some((*step, message.clone())),
            _ => None,
        })
        .collect()
}

/// The names in a request's tool list.
fn tool_names(home: &Home, manifest: &Value) -> Vec<String> {
    let tools: BlobRef =
        serde_json::from_value(manifest["tools"].clone()).expect("the manifest names its tools");
    blob_json(home, &tools)
        .as_array()
        .expect("a list of tools")
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_owned())
        .collect()
}

#[test]
fn the_planner_is_told_what_was_wrong_until_its_plan_is_valid() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let unchecked = json!({"tasks": [{"id": "make", "title": "make out.txt", "done_when": []}]});
    let valid = json!({"tasks": [{"id": "make", "title": "make out.txt",
                                  "done_when": [stat_check("out.txt")]}]});
    let script = role_agent(
        dir.path(),
        "",
        "",
        None,
        &[
            text_turn("I would start by looking around.", 10, 1),
            text_turn(&unchecked.to_string(), 10, 1),
            text_turn(&valid.to_string(), 10, 1),
            write_turn("w1", "out.txt"),
            text_turn("out.txt is written.", 10, 1),
        ],
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);
    // Both bad answers were refused, each about its own step.
    let errors = errors(&log);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0].0, Some(1));
    assert!(errors[0].1.contains("no JSON object"), "{errors:?}");
    assert_eq!(errors[1].0, Some(2));
    assert!(errors[1].1.contains("has no check"), "{errors:?}");
    // Each try went back to the planner with what came before: its own
    // answers and the harness's notes.
    let planner = requests_of(&home, &log, "planner");
    let steps: Vec<u64> = planner.iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, [1, 2, 3]);
    let items: Vec<u64> = planner
        .iter()
        .map(|(_, m)| m["history_items"].as_u64().expect("history_items"))
        .collect();
    assert_eq!(items, [0, 2, 4]);
    // One plan, by the planner; the worker did its task and it was checked.
    let created = of_kind(&log, "plan_created");
    assert_eq!(created.len(), 1);
    let Event::PlanCreated { plan, author } = &created[0].event else {
        unreachable!()
    };
    assert_eq!(author, "planner");
    assert_eq!(plan["tasks"][0]["id"], "make");
    let roles: Vec<String> = log
        .iter()
        .filter_map(|r| match &r.event {
            Event::ModelRequested { role, .. } => Some(role.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(roles, ["planner", "planner", "planner", "worker", "worker"]);
    let plan = plan_json(&home, &session);
    assert_eq!(plan["tasks"][0]["status"], "done");
    assert_eq!(plan["tasks"][0]["checks"][0]["passed"], true);
    assert_eq!(home.state(&session).status.as_str(), "finished");
}

#[test]
fn three_invalid_plans_in_a_row_pause_the_session() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let unchecked = json!({"tasks": [{"id": "make", "title": "make out.txt"}]});
    let script = role_agent(
        dir.path(),
        "",
        "",
        None,
        &[
            text_turn("no plan here", 10, 1),
            text_turn(&unchecked.to_string(), 10, 1),
            text_turn(r#"{"tasks": "all of them"}"#, 10, 1),
            // Never reached: a fourth try the planner does not get.
            text_turn(
                &json!({"tasks": [{"id": "make", "title": "t", "done_when": [stat_check("x")]}]})
                    .to_string(),
                10,
                1,
            ),
        ],
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(3);
    let log = home.log(&session);
    assert!(of_kind(&log, "plan_created").is_empty());
    assert_eq!(requests_of(&home, &log, "planner").len(), 3);
    assert_eq!(errors(&log).len(), 3);
    let paused = of_kind(&log, "paused");
    assert_eq!(paused.len(), 1);
    let Event::Paused { reason } = &paused[0].event else {
        unreachable!()
    };
    assert_eq!(reason.kind, PauseKind::Plan);
    assert!(
        reason.detail.contains("no valid plan in 3 answers"),
        "{}",
        reason.detail
    );
    assert_eq!(home.state(&session).status.as_str(), "paused");
}

#[test]
fn a_failed_task_is_revised_by_the_planner_and_gets_fresh_attempts() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let operator = json!({"tasks": [{"id": "b", "title": "make b.txt",
                                     "done_when": [stat_check("b.txt")]}]});
    let revised = json!({"tasks": [
        {"id": "a", "title": "make a.txt", "done_when": [stat_check("a.txt")]},
        {"id": "b", "title": "make b.txt", "depends_on": ["a"],
         "done_when": [stat_check("b.txt")]}]});
    let script = role_agent(
        dir.path(),
        "",
        "planner = \"extend\"\nmax_attempts = 1",
        Some(&file_task("b", "b.txt")),
        &[
            // The planner extends the operator's plan by nothing.
            text_turn(&operator.to_string(), 10, 1),
            // The worker claims b without making it: b fails.
            text_turn("b is done.", 10, 1),
            // The planner adds a task before b, keeping b's check.
            text_turn(&revised.to_string(), 10, 1),
            write_turn("wa", "a.txt"),
            text_turn("a is done.", 10, 1),
            write_turn("wb", "b.txt"),
            text_turn("b is done now.", 10, 1),
        ],
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);
    let revisions = of_kind(&log, "plan_revised");
    assert_eq!(revisions.len(), 2);
    for r in &revisions {
        let Event::PlanRevised {
            accepted,
            weakened,
            author,
            ..
        } = &r.event
        else {
            unreachable!()
        };
        assert!(accepted);
        assert!(weakened.is_empty(), "{weakened:?}");
        assert_eq!(author, "planner");
    }
    let Event::PlanRevised { reason, .. } = &revisions[1].event else {
        unreachable!()
    };
    assert!(reason.contains("task b failed"), "{reason}");
    // The planner was asked to revise, with the failure in its briefing.
    let asked: Vec<&EventRecord> = of_kind(&log, "role_started")
        .into_iter()
        .filter(|r| matches!(&r.event, Event::RoleStarted { role, .. } if role == "planner"))
        .collect();
    assert_eq!(asked.len(), 2);
    let Event::RoleStarted { task, briefing, .. } = &asked[1].event else {
        unreachable!()
    };
    assert_eq!(task.as_deref(), Some("b"));
    let text = blob_text(&home, briefing);
    assert!(text.contains("# Revise the plan"), "{text}");
    assert!(text.contains("Task `b` failed"), "{text}");
    assert!(text.contains("- tool fs__stat expecting"), "{text}");
    // The revision came after b failed; b then started again with a fresh
    // set of attempts, numbered on from the one before (issue 16).
    let order: Vec<String> = log
        .iter()
        .filter_map(|r| match &r.event {
            Event::TaskStarted { task, attempt, .. } => Some(format!("start {task} {attempt}")),
            Event::TaskFinished { task, status, .. } => Some(format!("{status} {task}")),
            Event::PlanRevised { .. } => Some("revised".to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        [
            "revised",
            "start b 1",
            "failed b",
            "revised",
            "start a 1",
            "done a",
            "start b 2",
            "done b"
        ]
    );
    let plan = plan_json(&home, &session);
    assert_eq!(plan["revision"], 2);
    let tasks = plan["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 2);
    for task in tasks {
        assert_eq!(task["status"], "done", "{task}");
        // Every attempt that ran: b's failed one counts.
        let ran = if task["id"] == "b" { 2 } else { 1 };
        assert_eq!(task["attempts"], ran, "{task}");
        assert_eq!(task["checks"][0]["passed"], true, "{task}");
    }
    assert_eq!(home.state(&session).status.as_str(), "finished");
}

#[test]
fn a_judge_without_a_readable_verdict_fails_the_check() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = role_agent(
        dir.path(),
        "",
        "max_attempts = 1",
        Some(JUDGED_TASK),
        &[
            text_turn("Reviewed; all good.", 10, 1),
            text_turn("It looks fine to me.", 10, 1),
            text_turn(r#"{"pass": "yes"}"#, 10, 1),
            text_turn(r#"{"pass": true, "score": 10}"#, 10, 1),
            // Never reached.
            text_turn(r#"{"pass": true, "reasons": [], "missing": []}"#, 10, 1),
        ],
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(3);
    let log = home.log(&session);
    assert_eq!(requests_of(&home, &log, "judge").len(), 3);
    // The first two were sent back, the third ended it.
    let errors = errors(&log);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors
            .iter()
            .all(|(_, m)| m.contains("The verdict was not readable")),
        "{errors:?}"
    );
    let checks = of_kind(&log, "check_finished");
    assert_eq!(checks.len(), 1);
    let Event::CheckFinished {
        passed,
        kind,
        detail,
        ..
    } = &checks[0].event
    else {
        unreachable!()
    };
    assert!(!passed);
    assert_eq!(kind, "judge");
    assert!(
        detail.contains("the judge gave no readable verdict in 3 answers"),
        "{detail}"
    );
    let finished = of_kind(&log, "task_finished");
    assert_eq!(finished.len(), 1);
    assert!(matches!(
        &finished[0].event,
        Event::TaskFinished { status, .. } if status == "failed"
    ));
    let plan = plan_json(&home, &session);
    assert_eq!(plan["tasks"][0]["status"], "failed");
    assert_eq!(plan["tasks"][0]["checks"][0]["kind"], "judge");
    assert_eq!(plan["tasks"][0]["checks"][0]["passed"], false);
    assert_eq!(home.state(&session).status.as_str(), "paused");
}

#[test]
fn the_judge_cannot_write_and_is_offered_read_only_tools() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = role_agent(
        dir.path(),
        "",
        "max_attempts = 1",
        Some(JUDGED_TASK),
        &[
            text_turn("Reviewed; all good.", 10, 1),
            tool_turn(
                "Let me fix it myself first.",
                vec![call(
                    "jw",
                    "fs__write",
                    json!({"path": "/w/judged.txt", "content": "the judge was here"}),
                )],
                10,
                1,
            ),
            text_turn(
                r#"{"pass": true, "reasons": ["fine"], "missing": []}"#,
                10,
                1,
            ),
        ],
    );
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);
    // The call was refused, and nothing was written.
    let call_end = log
        .iter()
        .find_map(|r| match &r.event {
            Event::ToolFinished {
                call_id,
                ok,
                result,
                ..
            } if call_id == "jw" => Some((*ok, result.clone())),
            _ => None,
        })
        .expect("the judge's call was answered");
    assert!(!call_end.0);
    let text = blob_text(&home, &call_end.1);
    assert!(text.contains("read-only"), "{text}");
    assert!(!dir.path().join("work/judged.txt").exists());
    assert!(
        std::fs::read_dir(dir.path().join("work"))
            .expect("work/")
            .next()
            .is_none()
    );
    // The verdict after it passed the task.
    let checks = of_kind(&log, "check_finished");
    assert_eq!(checks.len(), 1);
    assert!(matches!(
        &checks[0].event,
        Event::CheckFinished { passed: true, kind, .. } if kind == "judge"
    ));
    let plan = plan_json(&home, &session);
    assert_eq!(plan["tasks"][0]["status"], "done");
    // The judge was offered the read-only tools, the worker all of them.
    let judge = requests_of(&home, &log, "judge");
    assert_eq!(judge.len(), 2);
    for (_, manifest) in &judge {
        let mut names = tool_names(&home, manifest);
        names.sort();
        assert_eq!(names, ["fs__read", "fs__stat"]);
    }
    let worker = requests_of(&home, &log, "worker");
    assert_eq!(worker.len(), 1);
    assert!(tool_names(&home, &worker[0].1).contains(&"fs__write".to_owned()));
}

/// Three tasks in a 1000-token window; in task two the worker's context
/// passes `handoff_at = 0.5` and the handoff writer answers badly twice.
fn handoff_agent(dir: &Path) -> PathBuf {
    let mut plan = file_task("one", "one.txt");
    plan.push_str(&file_task("two", "two.txt").replace(
        "title = \"make two.txt\"\n",
        "title = \"make two.txt\"\ndepends_on = [\"one\"]\n",
    ));
    plan.push_str(&file_task("three", "three.txt").replace(
        "title = \"make three.txt\"\n",
        "title = \"make three.txt\"\ndepends_on = [\"two\"]\n",
    ));
    let mut full = write_turn("w2", "two.txt");
    // 700 of a 1000-token window.
    full["usage"]["input_tokens"] = json!(700);
    role_agent(
        dir,
        "context_window = 1000",
        "handoff_at = 0.5",
        Some(&plan),
        &[
            write_turn("w1", "one.txt"),
            text_turn("one done", 10, 1),
            full,
            text_turn("Where was I? Somewhere.", 10, 1),
            text_turn(r#"{"status": "two is written", "mood": "good"}"#, 10, 1),
            text_turn("two done", 10, 1),
            write_turn("w3", "three.txt"),
            text_turn("three done", 10, 1),
        ],
    )
}

/// What [`handoff_agent`]'s run must leave: two refusals, one handoff
/// written by the harness naming the remaining tasks, and a finished plan.
fn assert_the_harness_wrote_the_handoff(home: &Home, session: &str) {
    let log = home.log(session);
    let refused: Vec<String> = errors(&log)
        .into_iter()
        .map(|(_, m)| m)
        .filter(|m| m.contains("the handoff was refused"))
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(requests_of(home, &log, "handoff").len(), 2);
    let handoffs = of_kind(&log, "handoff");
    assert_eq!(handoffs.len(), 1);
    let Event::Handoff {
        task,
        handoff,
        briefing,
        by_model,
        ..
    } = &handoffs[0].event
    else {
        unreachable!()
    };
    assert!(!by_model);
    assert_eq!(task.as_deref(), Some("two"));
    let written = blob_json(home, handoff);
    assert_eq!(written["current_task"], "two");
    assert_eq!(written["done"], json!(["one: make one.txt"]));
    assert_eq!(
        written["remaining"],
        json!(["two: make two.txt", "three: make three.txt"])
    );
    assert_eq!(written["artifacts"], json!(["/w/two.txt"]));
    let text = blob_text(home, briefing);
    assert!(text.contains("# Your task: two"), "{text}");
    assert!(
        text.contains("ran out of room before it wrote a handoff"),
        "{text}"
    );
    // The run went on from it: the worker finished two and three.
    let plan = plan_json(home, session);
    let tasks = plan["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 3);
    assert!(tasks.iter().all(|t| t["status"] == "done"), "{plan}");
    assert_eq!(home.state(session).status.as_str(), "finished");
}

#[test]
fn two_bad_handoffs_and_the_harness_writes_one_from_the_plan() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = handoff_agent(dir.path());
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    assert_the_harness_wrote_the_handoff(&home, &session);
}

/// Plays a script by the loop's step, as `--script` does, without its
/// check that the request carries the answer of the step before.
struct ByStep(Vec<longhand_brain::model::ModelResponse>);

#[async_trait::async_trait]
impl longhand_brain::model::ModelProvider for ByStep {
    fn name(&self) -> &str {
        "by-step"
    }
    fn model(&self) -> &str {
        "by-step"
    }
    async fn complete(
        &self,
        req: &longhand_brain::model::ModelRequest,
    ) -> Result<longhand_brain::model::ModelResponse, longhand_brain::model::ModelError> {
        let turn = usize::try_from(req.step.saturating_sub(1)).unwrap_or(usize::MAX);
        self.0
            .get(turn)
            .cloned()
            .ok_or_else(|| longhand_brain::model::ModelError::Diverged {
                turn,
                expected_excerpt: "the script is exhausted".to_owned(),
                got_excerpt: String::new(),
            })
    }
}

#[test]
fn two_bad_handoffs_and_the_harness_writes_one_from_the_plan_in_process() {
    use longhand_brain::Runner;
    use longhand_brain::agent::config::AgentConfig;
    use longhand_brain::{bind, freeze};
    use longhand_hands::{Hands, HandsConfig};
    use std::sync::Arc;
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = handoff_agent(dir.path());
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(&script).expect("script")).expect("json");
    let responses =
        serde_json::from_value(file["responses"].clone()).expect("responses are model answers");
    let (config, base) = AgentConfig::load(dir.path()).expect("agent.toml");
    let store_home = home.path().to_owned();
    let session = block_on(async move {
        let hands = Hands::new(HandsConfig::default()).expect("hands");
        let frozen = freeze(&hands, &config, &base, |_| None)
            .await
            .expect("freeze");
        let agent = bind(&hands, frozen, |_| None).await.expect("bind");
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&store_home).await.expect("store"));
        let mut runner = Runner::start(
            store,
            &hands,
            agent,
            Arc::new(ByStep(responses)),
            "Do the plan.",
            "me",
        )
        .await
        .expect("start");
        let end = runner.run().await.expect("run");
        assert_eq!(end.status.as_str(), "finished", "{:?}", end.detail);
        runner.session().to_string()
    });
    assert_the_harness_wrote_the_handoff(&home, &session);
}
