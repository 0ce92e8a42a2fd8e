//! `skill__load`: the host tool that reads a skill's body into the
//! conversation. The skills themselves — discovery, the catalogue and what
//! `load` returns — are the agent definition's (`brain::skills`); this file
//! only puts them behind [`HostTool`].

use serde_json::Value;

use super::{HostCtx, HostTool};
use crate::agent::skills::{LOAD, load, load_tool_def};
use crate::model::ToolDef;
use longhand_hands::Effect;

/// `skill__load`, offered when the agent has skills. Read-only: it returns
/// text frozen with the agent.
pub(crate) struct SkillLoad;

#[async_trait::async_trait]
impl HostTool for SkillLoad {
    fn name(&self) -> &'static str {
        "skill"
    }

    fn defs(&self, ctx: &HostCtx<'_>) -> Vec<ToolDef> {
        if ctx.frozen.skills.is_empty() {
            return Vec::new();
        }
        vec![load_tool_def(&ctx.frozen.skills)]
    }

    fn effect(&self, ctx: &HostCtx<'_>, tool: &str) -> Option<Effect> {
        (tool == LOAD && !ctx.frozen.skills.is_empty()).then_some(Effect::ReadOnly)
    }

    async fn call(&self, ctx: &HostCtx<'_>, _tool: &str, input: &Value) -> (bool, Value) {
        match load(&ctx.frozen.skills, input) {
            Ok(value) => (true, value),
            Err(value) => (false, value),
        }
    }
}
