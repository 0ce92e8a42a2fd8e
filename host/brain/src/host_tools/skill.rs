//! `skill__load`: the host tool that reads a skill's body into the
//! conversation. The skills themselves — discovery, the catalogue and what
//! `load` returns — are the agent definition's (`brain::skills`); this file
//! only puts them behind [`Toolset`].

use serde_json::Value;

use crate::agent::frozen::Frozen;
use crate::agent::skills::{LOAD, load, load_tool_def};
use crate::tools::{CallCx, Offer, Offered, Outcome, Registered, Toolset};
use longhand_hands::Effect;

/// `skill__load`, offered when the agent has skills. Read-only: it returns
/// text frozen with the agent.
pub(crate) struct SkillLoad;

#[async_trait::async_trait]
impl Toolset for SkillLoad {
    fn component(&self) -> &str {
        crate::agent::skills::COMPONENT
    }

    fn digest(&self) -> &str {
        crate::agent::skills::HOST_DIGEST
    }

    fn offer(&self, offer: &Offer<'_>) -> Vec<Offered> {
        if offer.frozen.skills.is_empty() {
            return Vec::new();
        }
        let def = load_tool_def(&offer.frozen.skills);
        debug_assert_eq!(def.name, LOAD);
        vec![super::offered(def, Effect::ReadOnly)]
    }

    fn fingerprint_parts(&self, frozen: &Frozen) -> (String, Value) {
        super::fingerprint_parts(frozen)
    }

    async fn call(&self, cx: &CallCx<'_>, _: &Registered, input: &Value) -> Outcome {
        let started = std::time::Instant::now();
        super::timed(
            started,
            match load(&cx.frozen.skills, input) {
                Ok(value) => (true, value),
                Err(value) => (false, value),
            },
        )
    }
}
