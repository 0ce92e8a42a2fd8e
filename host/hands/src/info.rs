//! What a component is, as the host knows it once loaded: its name, its
//! tools (name, description, input schema, effect), what it asks the
//! operator for, and — for a component written for another host — how its
//! tools were derived from the functions it exports.
//!
//! Plain data, shared by loading ([`super::component`]), derivation
//! ([`super::derived`]) and everyone who shows or checks a tool. It must
//! not load, compile or call anything.

use serde::{Deserialize, Serialize};

use super::grants::Access;

/// What running a tool does to the world; decides what is re-run after a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// Only reads: safe to re-run.
    ReadOnly,
    /// Writes, but twice is the same as once: safe to re-run.
    Idempotent,
    /// Writes that must not be repeated: an unfinished call is "outcome unknown".
    Writes,
}

impl Effect {
    /// Whether a call that was started but not finished may simply run again.
    pub fn safe_to_retry(self) -> bool {
        matches!(self, Self::ReadOnly | Self::Idempotent)
    }
}

/// One tool of a component, as `describe` reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name, unique within the component.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: serde_json::Value,
    /// What a call does to the world.
    pub effect: Effect,
}

/// A directory the component asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirRequest {
    /// Guest path it expects.
    pub guest_path: String,
    /// Access it wants.
    pub access: Access,
    /// Why.
    pub why: String,
}

/// What the component asks the operator to grant. Information only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityRequests {
    /// Directories.
    pub dirs: Vec<DirRequest>,
    /// Outbound host patterns.
    pub hosts: Vec<String>,
    /// Environment variable names.
    pub env: Vec<String>,
    /// Secret names.
    pub secrets: Vec<String>,
}

/// Everything `describe` reported, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentInfo {
    /// Component name.
    pub name: String,
    /// Component version.
    pub version: String,
    /// What the component is for.
    pub description: String,
    /// Its tools.
    pub tools: Vec<ToolSpec>,
    /// What it asks for.
    pub requests: CapabilityRequests,
    /// Set when the component exports no `longhand:tool` world and its
    /// tools were derived from the functions it exports
    /// ([`super::derived`]): which function each tool calls, and which
    /// functions were left out and why. Default `None`: it described itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<Derivation>,
}

/// How each derived tool was found, and what was left out: shown by
/// `tool describe` so the operator sees what was derived, not declared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Derivation {
    /// The functions turned into tools.
    pub tools: Vec<DerivedTool>,
    /// The functions that were not, and why.
    pub skipped: Vec<SkippedExport>,
}

/// One exported function turned into a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DerivedTool {
    /// The tool's name.
    pub tool: String,
    /// The export it calls: `func` or `ns:pkg/iface@v#func`.
    pub export: String,
    /// Its WIT signature, as the component declares it.
    pub signature: String,
}

/// An exported function that is not offered as a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedExport {
    /// The export: `func` or `ns:pkg/iface@v#func`.
    pub export: String,
    /// Why it was left out.
    pub reason: String,
}
