//! Tools the host serves itself rather than a component: [`memory`]
//! (`memory__search`, `memory__remember`), [`skill`] (`skill__load`) and
//! [`delegate`] (`delegate`, a child session).
//!
//! Each is one [`HostTool`]: which of its tools this agent is offered, each
//! tool's effect, and how a call runs. The loop finds them through
//! [`REGISTRY`] — by asking each host tool whether it serves a name, and
//! what a call of it is followed by in the log — and never compares tool
//! names itself. What a host tool sees is a
//! [`HostCtx`]: the frozen agent, the memory bank and where in the session
//! the call is; it never sees the runner.
//!
//! A host tool with [`Runs::AsChild`] (delegate) is not run by
//! [`HostTool::call`]: its calls start child sessions through the one
//! launcher door (`core::ctx::Launch`), run side by side
//! (`host_tools::delegate`). Its `call` answers that it cannot run inline.
//! No host tool imports an executor or the runner.

pub mod delegate;
pub mod memory;
pub mod skill;

use std::sync::Arc;

use serde_json::Value;

use crate::agent::frozen::Frozen;
use crate::memory::MemoryBank;
use crate::model::ToolDef;
use longhand_hands::Effect;
use longhand_session::Event;

/// What a host tool's call may read.
pub(crate) struct HostCtx<'a> {
    /// The agent as frozen into the session.
    pub frozen: &'a Frozen,
    /// The memory bank `[memory]` scopes refer to, when one is attached.
    pub memory: Option<&'a Arc<MemoryBank>>,
    /// The session making the call.
    pub session: &'a str,
    /// The last event of the session when the call runs (a memory's
    /// provenance).
    pub seq: u64,
}

/// How a host tool's calls run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runs {
    /// In the loop, through [`HostTool::call`].
    Inline,
    /// As child sessions, started and awaited by the loop (`delegate`).
    AsChild,
}

/// One tool (or family of tools) the host serves.
#[async_trait::async_trait]
pub(crate) trait HostTool: Sync {
    /// The component its calls are recorded under in `tool_started`
    /// (`memory`, `skill`, and `agents` for delegate): how recovery knows a
    /// host tool's call from the log alone.
    fn name(&self) -> &'static str;

    /// The tools this agent is offered, as the model sees them: none when
    /// the agent is not granted them.
    fn defs(&self, ctx: &HostCtx<'_>) -> Vec<ToolDef>;

    /// The effect of a call of `tool`, when this host tool serves `tool`
    /// to this agent; `None` otherwise.
    fn effect(&self, ctx: &HostCtx<'_>, tool: &str) -> Option<Effect>;

    /// How its calls run. Default: inline.
    fn runs(&self) -> Runs {
        Runs::Inline
    }

    /// Run a call of `tool` with `input`: `(ok, result JSON)`. Only called
    /// for a tool [`HostTool::effect`] accepted.
    async fn call(&self, ctx: &HostCtx<'_>, tool: &str, input: &Value) -> (bool, Value);

    /// The event a successful call `call_id` of `tool` is followed by in
    /// the log, read from its `result` (memory's `memory_written`). Default:
    /// none.
    fn followed_by(&self, _tool: &str, _call_id: &str, _result: &[u8]) -> Option<Event> {
        None
    }
}

/// Every host tool, in the order their tools are offered to the model.
pub(crate) static REGISTRY: &[&dyn HostTool] =
    &[&memory::Memory, &delegate::Delegate, &skill::SkillLoad];

/// The host tool serving `tool` to this agent, with the call's effect.
pub(crate) fn find(ctx: &HostCtx<'_>, tool: &str) -> Option<(&'static dyn HostTool, Effect)> {
    REGISTRY
        .iter()
        .find_map(|host| host.effect(ctx, tool).map(|effect| (*host, effect)))
}

/// The host tools this agent is offered, as the model sees them.
pub(crate) fn defs(ctx: &HostCtx<'_>) -> Vec<ToolDef> {
    REGISTRY.iter().flat_map(|host| host.defs(ctx)).collect()
}
