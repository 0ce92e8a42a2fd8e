//! Issue 9, sub-agents: `delegate` starts a named child agent in its own
//! session and returns its answer; a child that would hold more than its
//! parent (a wider directory, a wider mode, another host) is refused with
//! an error the model reads; a slice that does not fit what the parent has
//! left is refused, so children never spend more than the parent had.

use std::path::Path;
use std::sync::Arc;

use longhand_brain::Runner;
use longhand_brain::agent::config::AgentConfig;
use longhand_brain::model::{
    Message, ModelError, ModelProvider, ModelRequest, ModelResponse, ToolCall,
};
use longhand_brain::{bind, freeze};
use longhand_hands::{Hands, HandsConfig};
use longhand_session::{Event, SessionId, SqliteStore, Store};
use serde_json::json;
use tempfile::TempDir;

use crate::support::{block_on, write};

/// Answers by conversation: the parent delegates, the reader reads.
struct Model;

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.to_string(),
    }
}

#[async_trait::async_trait]
impl ModelProvider for Model {
    fn name(&self) -> &str {
        "model"
    }
    fn model(&self) -> &str {
        "model"
    }
    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let goal = match req.messages.first() {
            Some(Message::User { text }) => text.clone(),
            _ => String::new(),
        };
        let answered = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let mut r = ModelResponse::default();
        match (goal.starts_with("PARENT"), answered) {
            (true, 0) => {
                let d = |id: &str, agent: &str| {
                    call(
                        id,
                        "delegate",
                        json!({"agent": agent, "goal": "read /w/x.txt and say what it holds"}),
                    )
                };
                r.tool_calls = vec![
                    d("d-wide", "wide"),
                    d("d-rw", "rw_docs"),
                    d("d-host", "hosty"),
                    d("d-secret", "secretive"),
                    d("d-reader", "reader"),
                    d("d-again", "reader"),
                ];
            }
            (true, _) => r.text = Some("done".into()),
            (false, 0) => {
                r.tool_calls = vec![call("r", "fs__read", json!({"path": "/w/x.txt"}))];
            }
            (false, _) => r.text = Some("it holds: forty-two".into()),
        }
        Ok(r)
    }
}

fn child(dir: &Path, name: &str, tools: &str) {
    write(
        &dir.join(name).join("agent.toml"),
        &format!(
            "name = \"{name}\"\ninstructions = \"Read what you are told.\"\n\
             [model]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             {tools}"
        ),
    );
}

/// What a parent's run left: its log, each call's result (ok, text), and
/// each child's log and state.
struct Ran {
    end: longhand_brain::RunEnd,
    log: Vec<longhand_session::EventRecord>,
    results: std::collections::BTreeMap<String, (bool, String)>,
    children: Vec<(
        Vec<longhand_session::EventRecord>,
        longhand_brain::core::state::SessionState,
    )>,
}

/// Freeze the agent in `root` (`lookup` for its variables), run it with
/// goal `PARENT`, `model` answering it and its children.
fn run_parent(
    root: &Path,
    model: Arc<dyn ModelProvider>,
    lookup: fn(&str) -> Option<String>,
    check: impl FnOnce(&longhand_brain::Frozen),
) -> Ran {
    let (config, base) = AgentConfig::load(root).expect("agent.toml");
    let store_dir = TempDir::new().expect("tempdir");
    block_on(async {
        let hands = Hands::new(HandsConfig::default()).expect("hands");
        let mut frozen = freeze(&hands, &config, &base, lookup)
            .await
            .expect("freeze");
        // The test model's price, as `run` freezes one: a money limit
        // needs it (nothing here costs anything).
        let prices = root.join("prices.toml");
        write(
            &prices,
            "as_of = \"2026-12-01\"\n[openai.\"m\"]\ninput = 0\noutput = 0\n",
        );
        frozen.freeze_prices(&longhand_brain::pricing::Prices::load(&prices).expect("prices.toml"));
        check(&frozen);
        let agent = bind(&hands, frozen, |_| None).await.expect("bind");
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(store_dir.path()).await.expect("store"));
        let mut runner = Runner::start(store.clone(), &hands, agent, model.clone(), "PARENT", "me")
            .await
            .expect("start");
        let end = runner.run().await.expect("run");
        let session = runner.session().clone();
        drop(runner);
        let log = store.read(&session, 1).await.expect("log");
        let mut children = Vec::new();
        let mut results = std::collections::BTreeMap::new();
        for r in &log {
            match &r.event {
                Event::ChildStarted { child, .. } => {
                    let id: SessionId = child.parse().expect("id");
                    children.push((
                        store.read(&id, 1).await.expect("child log"),
                        longhand_brain::load_state(store.as_ref(), &id)
                            .await
                            .expect("child state"),
                    ));
                }
                Event::ToolFinished {
                    call_id,
                    ok,
                    result,
                    ..
                } => {
                    let text =
                        String::from_utf8(store.get_blob(result).await.expect("blob").to_vec())
                            .expect("utf-8");
                    results.insert(call_id.clone(), (*ok, text));
                }
                _ => {}
            }
        }
        Ran {
            end,
            log,
            results,
            children,
        }
    })
}

#[test]
fn children_never_hold_or_spend_more_than_their_parent() {
    let dir = TempDir::new().expect("tempdir");
    let root = dir.path();
    write(&root.join("work/sub/x.txt"), "forty-two");
    write(&root.join("docs/readme.txt"), "docs");
    write(&root.join("other/secret.txt"), "no");
    write(
        &root.join("agent.toml"),
        r#"name = "parent"
instructions = "Delegate."
[model]
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
[limits]
max_steps = 5
[[tools]]
component = "fs"
dirs = ["work:/w:rw", "docs:/docs:ro"]
[agents.reader]
path = "reader"
max_steps = 3
[agents.wide]
path = "wide"
[agents.rw_docs]
path = "rw_docs"
[agents.hosty]
path = "hosty"
[agents.secretive]
path = "secretive"
"#,
    );
    child(
        root,
        "reader",
        "[[tools]]\ncomponent = \"fs\"\ndirs = [\"../work/sub:/w:ro\"]\n",
    );
    child(
        root,
        "wide",
        "[[tools]]\ncomponent = \"fs\"\ndirs = [\"../other:/w:ro\"]\n",
    );
    child(
        root,
        "rw_docs",
        "[[tools]]\ncomponent = \"fs\"\ndirs = [\"../docs:/w:rw\"]\n",
    );
    child(
        root,
        "hosty",
        "[[tools]]\ncomponent = \"http\"\nallow_hosts = [\"example.com\"]\n",
    );
    child(
        root,
        "secretive",
        "[[tools]]\ncomponent = \"fs\"\ndirs = [\"../work/sub:/w:ro\"]\nsecrets = [\"TOKEN@127.0.0.1\"]\n",
    );
    // TOKEN is set for the child's freeze; the parent holds no secret.
    let ran = run_parent(
        root,
        Arc::new(Model),
        |name| (name == "TOKEN").then(|| "t".to_owned()),
        |frozen| {
            assert_eq!(frozen.agents.len(), 5);
            assert_eq!(frozen.agents["reader"].frozen.limits.max_steps, 3);
        },
    );
    assert_eq!(ran.end.status.as_str(), "finished", "{:?}", ran.end.detail);
    let (log, results, children) = (ran.log, ran.results, ran.children);
    // Refused, each saying why; nothing started for them.
    let refused = |id: &str, words: &str| {
        let (ok, text) = &results[id];
        assert!(!ok, "{id} ran: {text}");
        assert!(text.contains(words), "{id}: {text}");
    };
    refused("d-wide", "outside every directory granted here");
    refused("d-rw", "read-write to the child but only read-only here");
    refused("d-host", "host");
    refused("d-secret", "secret TOKEN is not held here");
    // The reader ran in its own session and answered.
    let (ok, text) = &results["d-reader"];
    assert!(ok, "{text}");
    assert!(text.contains("forty-two"), "{text}");
    // A second reader does not fit: 5 steps, 1 spent, 3 given away.
    refused("d-again", "needs 3 of max_steps");
    assert_eq!(children.len(), 1);
    let (child_log, child_state) = &children[0];
    assert!(child_state.steps <= 3);
    assert!(
        child_log
            .iter()
            .any(|r| matches!(&r.event, Event::Delegated { depth: 1, .. }))
    );
    let started = log
        .iter()
        .find_map(|r| match &r.event {
            Event::ChildStarted { slice, agent, .. } => Some((agent.clone(), slice.clone())),
            _ => None,
        })
        .expect("child_started");
    assert_eq!(started.0, "reader");
    assert_eq!(started.1["max_steps"], 3);
}

/// Children of one answer run side by side: every child answer takes
/// 200 ms, and the calls in flight are counted.
struct Slow {
    in_flight: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl ModelProvider for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn model(&self) -> &str {
        "slow"
    }
    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        use std::sync::atomic::Ordering;
        let goal = match req.messages.first() {
            Some(Message::User { text }) => text.clone(),
            _ => String::new(),
        };
        let answered = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let mut r = ModelResponse::default();
        if goal.starts_with("PARENT") {
            if answered == 0 {
                r.tool_calls = (0..3)
                    .map(|i| {
                        call(
                            &format!("d{i}"),
                            "delegate",
                            json!({"agent": "reader", "goal": format!("part {i}")}),
                        )
                    })
                    .collect();
            } else {
                r.text = Some("all parts done".into());
            }
            return Ok(r);
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        r.text = Some(format!("{goal}: done"));
        Ok(r)
    }
}

#[test]
fn the_children_of_one_answer_run_side_by_side_up_to_the_cap() {
    let dir = TempDir::new().expect("tempdir");
    let root = dir.path();
    write(
        &root.join("agent.toml"),
        r#"name = "parent"
instructions = "Delegate."
[model]
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
[agents.reader]
path = "reader"
max_steps = 2
[delegation]
max_concurrent = 2
"#,
    );
    child(root, "reader", "");
    let model = Arc::new(Slow {
        in_flight: Default::default(),
        most: Default::default(),
    });
    let ran = run_parent(root, model.clone(), |_| None, |_| {});
    assert_eq!(ran.end.status.as_str(), "finished", "{:?}", ran.end.detail);
    let results: Vec<(String, bool, String)> = ran
        .log
        .iter()
        .filter_map(|r| match &r.event {
            Event::ToolFinished { call_id, .. } => {
                let (ok, text) = ran.results[call_id].clone();
                Some((call_id.clone(), ok, text))
            }
            _ => None,
        })
        .collect();
    // Two at a time, never three; every part answered, in call order.
    assert_eq!(model.most.load(std::sync::atomic::Ordering::SeqCst), 2);
    let ids: Vec<&str> = results.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, ["d0", "d1", "d2"]);
    for (i, (_, ok, text)) in results.iter().enumerate() {
        assert!(ok, "{text}");
        assert!(text.contains(&format!("part {i}: done")), "{text}");
    }
}

/// The parent asks two children; one answers the schema's JSON, one prose.
struct Shaped;

#[async_trait::async_trait]
impl ModelProvider for Shaped {
    fn name(&self) -> &str {
        "shaped"
    }
    fn model(&self) -> &str {
        "shaped"
    }
    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let goal = match req.messages.first() {
            Some(Message::User { text }) => text.clone(),
            _ => String::new(),
        };
        let answered = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let mut r = ModelResponse::default();
        r.text = Some(match (goal.as_str(), answered) {
            ("PARENT", 0) => {
                r.tool_calls = ["good", "bad"]
                    .iter()
                    .map(|g| call(g, "delegate", json!({"agent": "counter", "goal": g})))
                    .collect();
                return Ok(r);
            }
            ("PARENT", _) => "done".into(),
            ("good", _) => "Here: ```json\n{\"count\": 3}\n```".into(),
            _ => "three, I think".into(),
        });
        Ok(r)
    }
}

#[test]
fn a_child_answer_is_checked_against_its_result_schema() {
    let dir = TempDir::new().expect("tempdir");
    let root = dir.path();
    write(
        &root.join("agent.toml"),
        r#"name = "parent"
instructions = "Delegate."
[model]
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
[agents.counter]
path = "counter"
max_steps = 2
result_schema = "count.schema.json"
"#,
    );
    write(
        &root.join("count.schema.json"),
        r#"{"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"], "additionalProperties": false}"#,
    );
    child(root, "counter", "");
    let results = run_parent(root, Arc::new(Shaped), |_| None, |_| {}).results;
    let (ok, text) = &results["good"];
    assert!(ok, "{text}");
    let value: serde_json::Value = serde_json::from_str(text).expect("json");
    assert_eq!(value["result"]["count"], 3);
    let (ok, text) = &results["bad"];
    assert!(!ok, "{text}");
    assert!(text.contains("does not match its result schema"), "{text}");
}

#[test]
fn money_is_sliced_down_the_tree_and_a_child_without_a_slice_is_refused() {
    let dir = TempDir::new().expect("tempdir");
    let root = dir.path();
    let agent = |slice: &str| {
        format!(
            r#"name = "parent"
instructions = "Delegate."
[model]
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
[limits]
max_cost_micros = 30000
[agents.reader]
path = "reader"
max_steps = 2
{slice}
"#
        )
    };
    child(root, "reader", "");
    // A child of a cost-limited parent must be given its slice.
    write(&root.join("agent.toml"), &agent(""));
    let (config, base) = AgentConfig::load(root).expect("agent.toml");
    let refused = block_on(async {
        let hands = Hands::new(HandsConfig::default()).expect("hands");
        freeze(&hands, &config, &base, |_| None).await.err()
    })
    .expect("refused");
    assert!(refused.to_string().contains("max_cost_micros"), "{refused}");
    // $0.02 of $0.03 each: the first fits, the others do not.
    write(&root.join("agent.toml"), &agent("max_cost_micros = 20000"));
    let model = Arc::new(Slow {
        in_flight: Default::default(),
        most: Default::default(),
    });
    let ran = run_parent(
        root,
        model,
        |_| None,
        |frozen| {
            assert_eq!(frozen.agents["reader"].frozen.limits.max_cost_micros, 20000);
        },
    );
    let (ok, text) = &ran.results["d0"];
    assert!(ok, "{text}");
    for id in ["d1", "d2"] {
        let (ok, text) = &ran.results[id];
        assert!(!ok, "{id}: {text}");
        assert!(
            text.contains("needs 20000 of max_cost_micros"),
            "{id}: {text}"
        );
    }
    assert_eq!(ran.children.len(), 1);
}

/// A parent that asks for children the hostile way.
struct Hostile;

#[async_trait::async_trait]
impl ModelProvider for Hostile {
    fn name(&self) -> &str {
        "hostile"
    }
    fn model(&self) -> &str {
        "hostile"
    }
    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let answered = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let mut r = ModelResponse::default();
        if answered > 0 {
            r.text = Some("done".into());
            return Ok(r);
        }
        let long = "x".repeat(100 * 1024);
        r.tool_calls = vec![
            call("long", "delegate", json!({"agent": "reader", "goal": long})),
            call(
                "empty",
                "delegate",
                json!({"agent": "reader", "goal": "  "}),
            ),
            call(
                "unknown",
                "delegate",
                json!({"agent": "y".repeat(10_000), "goal": "g"}),
            ),
            call("typed", "delegate", json!({"agent": 7, "goal": ["g"]})),
            call(
                "extra",
                "delegate",
                json!({"agent": "reader", "goal": "g", "grants": "all"}),
            ),
        ];
        Ok(r)
    }
}

#[test]
fn hostile_delegate_inputs_start_no_child_and_say_why() {
    let dir = TempDir::new().expect("tempdir");
    let root = dir.path();
    write(
        &root.join("agent.toml"),
        r#"name = "parent"
instructions = "Delegate."
[model]
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
[limits]
max_consecutive_failures = 10
[agents.reader]
path = "reader"
max_steps = 2
"#,
    );
    child(root, "reader", "");
    let ran = run_parent(root, Arc::new(Hostile), |_| None, |_| {});
    assert_eq!(ran.end.status.as_str(), "finished", "{:?}", ran.end.detail);
    assert!(ran.children.is_empty(), "a child started");
    for id in ["long", "empty", "unknown", "typed", "extra"] {
        let (ok, text) = &ran.results[id];
        assert!(!ok, "{id}: {text}");
        // Nothing the model sent is echoed back at length.
        assert!(text.len() < 2048, "{id}: {} bytes", text.len());
    }
    assert!(ran.results["long"].1.contains("bytes of text"));
    assert!(ran.results["unknown"].1.contains("no agent"));
    assert!(ran.results["extra"].1.contains("give exactly"));
    assert!(ran.results["typed"].1.contains("give exactly"));
}
