//! Tools the host serves itself rather than a component: [`memory`]
//! (`memory__search`, `memory__remember`), [`skill`] (`skill__load`) and
//! [`delegate`] (`delegate`, a child session).
//!
//! Each is one [`Toolset`] of the tool registry (`crate::tools`), listed
//! by [`sets`]: which of its tools this agent is offered, each tool's
//! effect, and how a call runs. What a call sees is a `tools::CallCx`: the
//! frozen agent, the memory bank and where in the session the call is; it
//! never sees the runner.
//!
//! A toolset with `Runs::AsChild` (delegate) is not run by
//! [`Toolset::call`]: its calls start child sessions through the one
//! launcher door (`core::ctx::Launch`), run side by side
//! (`host_tools::delegate`). Its `call` answers that it cannot run inline.
//! No host tool imports an executor or the runner.

pub mod delegate;
pub mod memory;
pub mod skill;

use std::sync::Arc;

use serde_json::Value;

use crate::agent::frozen::Frozen;
use crate::model::ToolDef;
use crate::tools::{Offered, Outcome, Toolset};
use longhand_hands::Effect;

/// Every host toolset, in the order their tools are offered to the model
/// (after the components').
pub fn sets() -> Vec<Arc<dyn Toolset>> {
    vec![
        Arc::new(memory::Memory),
        Arc::new(delegate::Delegate),
        Arc::new(skill::SkillLoad),
    ]
}

/// A host tool's tool as the registry offers it: recorded under its name
/// after the `<component>__` the model sees (`memory__search` is `search`),
/// or its whole name when it has none (`delegate`).
fn offered(def: ToolDef, effect: Effect) -> Offered {
    let tool = def
        .name
        .split_once(crate::agent::config::NAME_SEPARATOR)
        .map_or(def.name.as_str(), |(_, t)| t)
        .to_owned();
    Offered { def, tool, effect }
}

/// What an approval of a host tool's call covers besides the call: the
/// memory grants. Every host tool answers the same, as releases before the
/// registry did, so an approval granted before an upgrade still matches.
fn fingerprint_parts(frozen: &Frozen) -> (String, Value) {
    (
        memory::HOST_DIGEST.to_owned(),
        serde_json::to_value(&frozen.memory).unwrap_or_default(),
    )
}

/// A host call's outcome: its result, and a receipt of how long it took.
fn timed(started: std::time::Instant, (ok, value): (bool, Value)) -> Outcome {
    Outcome {
        ok,
        result: value.to_string().into_bytes(),
        receipt: serde_json::json!({"wall_us": started.elapsed().as_micros() as u64}),
    }
}
