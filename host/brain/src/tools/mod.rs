//! The one tool registry: every tool the model can call, whatever serves
//! it, as one kind of thing.
//!
//! A [`Toolset`] is one place tools come from — a component
//! ([`component`]), a tool the host serves itself (`host_tools`: memory,
//! skills, delegate) and an external MCP server ([`mcp`]). Each says which of
//! its tools this agent is offered and with what effect, what a call is
//! recorded under, what its approval fingerprint covers, and runs a call.
//! The [`Registry`] is built once per runner from the toolsets (by the
//! launcher) and is all the loop asks: dispatch, approvals, the read cache,
//! durability by effect, recovery after a crash and the tool list of each
//! role read entries of the registry and never ask what kind of source an
//! entry has. Adding a source is one new file that implements [`Toolset`]
//! and one line where the launcher lists the sources.

pub mod component;
pub mod mcp;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::agent::frozen::Frozen;
use crate::memory::MemoryBank;
use crate::model::ToolDef;
use longhand_hands::{Effect, Hands};
use longhand_session::Event;

/// What a toolset reads to say which tools it offers: fixed for a runner.
pub struct Offer<'a> {
    /// The agent as frozen into the session.
    pub frozen: &'a Frozen,
    /// The memory bank `[memory]` scopes refer to, when one is attached.
    pub memory: Option<&'a Arc<MemoryBank>>,
}

/// What one call may use: the narrow view an executor hands a toolset.
pub struct CallCx<'a> {
    /// The tool host components run in.
    pub hands: &'a Hands,
    /// The agent as frozen into the session.
    pub frozen: &'a Frozen,
    /// The memory bank, when one is attached.
    pub memory: Option<&'a Arc<MemoryBank>>,
    /// The session making the call.
    pub session: &'a str,
    /// The last event of the session when the call runs (a memory's
    /// provenance).
    pub seq: u64,
}

/// One tool a toolset offers this agent.
pub struct Offered {
    /// The definition the model reads; its name is the model's name for
    /// the tool (`fs__read`, `memory__search`, `delegate`).
    pub def: ToolDef,
    /// The toolset's own name for it, recorded in `tool_started.tool`.
    pub tool: String,
    /// What a call does to the world: how durably it is recorded, whether
    /// it may be re-run after a crash, whether `[approve] … = "writes"`
    /// holds it.
    pub effect: Effect,
}

/// How a toolset's calls run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// In the loop, through [`Toolset::call`].
    Inline,
    /// As child sessions, started and awaited by the loop (`delegate`):
    /// several in a row run side by side.
    AsChild,
}

/// What a call returned: whether it succeeded, its result as JSON bytes,
/// and its receipt (what it used, was denied, how long it took).
pub struct Outcome {
    pub ok: bool,
    pub result: Vec<u8>,
    pub receipt: Value,
}

impl Outcome {
    /// A call's result as the registry records it: the output, or
    /// `{"error": …}` (the hands' error as JSON), with its receipt.
    pub fn of(result: Result<Value, longhand_hands::CallError>, receipt: Value) -> Self {
        match result {
            Ok(output) => Outcome {
                ok: true,
                result: output.to_string().into_bytes(),
                receipt,
            },
            Err(error) => Outcome {
                ok: false,
                result: serde_json::json!({
                    "error": serde_json::to_value(&error).unwrap_or_else(
                        |_| serde_json::json!({"message": error.to_string()})
                    )
                })
                .to_string()
                .into_bytes(),
                receipt,
            },
        }
    }
}

/// One place tools come from.
#[async_trait::async_trait]
pub trait Toolset: Send + Sync {
    /// The component its calls are recorded under in `tool_started`: how
    /// recovery finds a call's toolset from the log alone.
    fn component(&self) -> &str;

    /// `tool_started.component_digest`: the bytes that run, or `host:…`
    /// when the host itself serves the call.
    fn digest(&self) -> &str;

    /// The tools this agent is offered, in the order the model reads them.
    fn offer(&self, offer: &Offer<'_>) -> Vec<Offered>;

    /// What an approval's fingerprint covers besides the tool, its
    /// arguments and its effect: (the digest of what runs, the grants it
    /// runs with as JSON).
    fn fingerprint_parts(&self, frozen: &Frozen) -> (String, Value);

    /// Whether the judge may be offered its read-only tools (it is never
    /// offered one that changes things).
    fn judge_may_use(&self) -> bool {
        false
    }

    /// How its calls run. Default: inline.
    fn runs(&self) -> Runs {
        Runs::Inline
    }

    /// Run a call of `tool` with `input`. Only called for a tool this
    /// toolset offered, with `Runs::Inline`.
    async fn call(&self, cx: &CallCx<'_>, tool: &Registered, input: &Value) -> Outcome;

    /// The event a successful call `call_id` of `tool` is followed by in
    /// the log, read from its `result` (memory's `memory_written`).
    fn followed_by(&self, _tool: &Registered, _call_id: &str, _result: &[u8]) -> Option<Event> {
        None
    }
}

/// A tool in the registry.
pub struct Registered {
    /// The model's name for it.
    pub name: String,
    /// The toolset's own name for it (`tool_started.tool`).
    pub tool: String,
    pub effect: Effect,
    pub def: ToolDef,
    set: Arc<dyn Toolset>,
}

impl Registered {
    /// The toolset that serves it.
    pub fn set(&self) -> &dyn Toolset {
        &*self.set
    }

    /// Whether its calls run as child sessions.
    pub fn runs_as_child(&self) -> bool {
        self.set.runs() == Runs::AsChild
    }

    /// Whether the judge is offered it: read-only, from a toolset the judge
    /// may use.
    pub fn offered_to_judge(&self) -> bool {
        self.effect == Effect::ReadOnly && self.set.judge_may_use()
    }

    /// Run a call of it (see [`Toolset::call`]).
    pub async fn call(&self, cx: &CallCx<'_>, input: &Value) -> Outcome {
        self.set.call(cx, self, input).await
    }

    /// The event a successful call is followed by (see
    /// [`Toolset::followed_by`]).
    pub fn followed_by(&self, call_id: &str, result: &[u8]) -> Option<Event> {
        self.set.followed_by(self, call_id, result)
    }
}

/// Every tool a runner's model may call, by its name.
#[derive(Default)]
pub struct Registry {
    tools: Vec<Registered>,
    by_name: BTreeMap<String, usize>,
    /// `(component, tool)` as `tool_started` records them.
    by_record: BTreeMap<(String, String), usize>,
}

impl Registry {
    /// The tools `sets` offer under `offer`, in order; a later tool of a
    /// name already taken is left out (names are checked unique when an
    /// agent is frozen; this keeps the first if one slips through).
    pub fn new(sets: Vec<Arc<dyn Toolset>>, offer: &Offer<'_>) -> Self {
        let mut registry = Registry::default();
        for set in sets {
            for offered in set.offer(offer) {
                let name = offered.def.name.clone();
                if registry.by_name.contains_key(&name) {
                    continue;
                }
                let index = registry.tools.len();
                registry.by_name.insert(name.clone(), index);
                registry
                    .by_record
                    .entry((set.component().to_owned(), offered.tool.clone()))
                    .or_insert(index);
                registry.tools.push(Registered {
                    name,
                    tool: offered.tool,
                    effect: offered.effect,
                    def: offered.def,
                    set: Arc::clone(&set),
                });
            }
        }
        registry
    }

    /// The tool the model names `name`, if this agent is offered one.
    pub fn get(&self, name: &str) -> Option<&Registered> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// The tool a `tool_started` of `component` and `tool` recorded.
    pub fn recorded(&self, component: &str, tool: &str) -> Option<&Registered> {
        self.by_record
            .get(&(component.to_owned(), tool.to_owned()))
            .map(|&i| &self.tools[i])
    }

    /// The tools offered to the judge (`judging`) or to the worker, in
    /// order.
    pub fn offered(&self, judging: bool) -> impl Iterator<Item = &Registered> {
        self.tools
            .iter()
            .filter(move |t| !judging || t.offered_to_judge())
    }

    /// Their definitions, as the model reads them.
    pub fn defs(&self, judging: bool) -> Vec<ToolDef> {
        self.offered(judging).map(|t| t.def.clone()).collect()
    }
}
