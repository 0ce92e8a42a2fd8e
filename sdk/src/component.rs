//! [`Component`]: the table [`export!`](crate::export) builds, and what
//! `describe` and `call` are answered from.
//!
//! Everything here is `const`-constructible so that the macro can build the
//! whole table at compile time, and so that a bad tool name or a duplicate is
//! a compile error rather than a component the host refuses at load time.

use crate::ToolError;
use crate::bindings::longhand::tool::types as wit;
use crate::tool::{self, Effect, Tool};

/// Access a tool asks for on a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DirAccess {
    /// Read files and list directories.
    ReadOnly,
    /// Also create, write and remove.
    ReadWrite,
}

impl From<DirAccess> for wit::DirAccess {
    fn from(access: DirAccess) -> Self {
        match access {
            DirAccess::ReadOnly => Self::ReadOnly,
            DirAccess::ReadWrite => Self::ReadWrite,
        }
    }
}

/// A directory the component would like to have mapped in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirRequest {
    /// The guest path the tool expects, e.g. `/workspace`.
    pub guest_path: &'static str,
    /// The access it needs.
    pub access: DirAccess,
    /// Why, for the operator reading `longhand tool describe`.
    pub why: &'static str,
}

/// What the component asks the operator for.
///
/// Requests are information only: nothing is granted because it is requested.
/// The default asks for nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Requests {
    /// Directories to map in.
    pub dirs: &'static [DirRequest],
    /// Outbound `host[:port]` patterns, `*.` wildcards allowed.
    pub hosts: &'static [&'static str],
    /// Environment variable names.
    pub env: &'static [&'static str],
    /// Names of secrets the host should add to outgoing requests. The
    /// component never sees a secret's value.
    pub secrets: &'static [&'static str],
}

/// One row of the dispatch table: a tool's name and its type-erased entry
/// points. Build it with [`ToolEntry::of`].
#[derive(Clone, Copy)]
pub struct ToolEntry {
    name: &'static str,
    description: &'static str,
    effect: Effect,
    schema: fn() -> serde_json::Value,
    call: fn(&str) -> Result<String, ToolError>,
}

impl ToolEntry {
    /// The entry for tool `T`.
    pub const fn of<T: Tool>() -> Self {
        Self {
            name: T::NAME,
            description: T::DESCRIPTION,
            effect: T::EFFECT,
            schema: tool::input_schema::<T>,
            call: tool::call_json::<T>,
        }
    }

    /// The tool's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The tool's spec as `describe` reports it.
    pub fn spec(&self) -> wit::ToolSpec {
        wit::ToolSpec {
            name: self.name.to_owned(),
            description: self.description.to_owned(),
            input_schema: (self.schema)().to_string(),
            effect: self.effect.into(),
        }
    }
}

impl std::fmt::Debug for ToolEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolEntry")
            .field("name", &self.name)
            .field("effect", &self.effect)
            .finish_non_exhaustive()
    }
}

/// A component: its metadata, its tools and its requests.
///
/// [`export!`](crate::export) builds one as a constant and answers the WIT
/// `describe` and `call` exports from it. It is public so that tool authors
/// can build one in a unit test and drive [`call`](Self::call) natively.
#[derive(Debug, Clone, Copy)]
pub struct Component {
    name: &'static str,
    version: &'static str,
    description: &'static str,
    tools: &'static [ToolEntry],
    requests: Requests,
}

impl Component {
    /// Builds the table, checking the tool names.
    ///
    /// # Panics
    ///
    /// If a tool name is empty or uses anything but lowercase ASCII letters,
    /// digits, `-` and `_`, if two tools share a name, or if there are no
    /// tools. Evaluated in a `const`, as `export!` does, each of these is a
    /// compile error.
    pub const fn new(
        name: &'static str,
        version: &'static str,
        description: &'static str,
        tools: &'static [ToolEntry],
        requests: Requests,
    ) -> Self {
        assert!(
            !tools.is_empty(),
            "a component must offer at least one tool"
        );
        let mut i = 0;
        while i < tools.len() {
            assert!(
                valid_tool_name(tools[i].name),
                "tool names must be non-empty and use only lowercase ASCII letters, digits, `-` and `_`"
            );
            let mut j = 0;
            while j < i {
                assert!(
                    !str_eq(tools[i].name, tools[j].name),
                    "two tools in one component share a name"
                );
                j += 1;
            }
            i += 1;
        }
        Self {
            name,
            version,
            description,
            tools,
            requests,
        }
    }

    /// The tools, in the order they were listed.
    pub const fn tools(&self) -> &'static [ToolEntry] {
        self.tools
    }

    /// What the WIT `describe` export returns.
    pub fn describe(&self) -> wit::ComponentInfo {
        let strings = |xs: &[&str]| xs.iter().map(|s| (*s).to_owned()).collect();
        wit::ComponentInfo {
            name: self.name.to_owned(),
            version: self.version.to_owned(),
            description: self.description.to_owned(),
            tools: self.tools.iter().map(ToolEntry::spec).collect(),
            requests: wit::CapabilityRequests {
                dirs: self
                    .requests
                    .dirs
                    .iter()
                    .map(|d| wit::DirRequest {
                        guest_path: d.guest_path.to_owned(),
                        access: d.access.into(),
                        why: d.why.to_owned(),
                    })
                    .collect(),
                hosts: strings(self.requests.hosts),
                env: strings(self.requests.env),
                secrets: strings(self.requests.secrets),
            },
        }
    }

    /// What the WIT `call` export returns: runs tool `name` on JSON `input`.
    ///
    /// An unknown name is [`ToolError::NotFound`], listing the names that
    /// exist.
    pub fn call(&self, name: &str, input: &str) -> Result<String, ToolError> {
        match self.tools.iter().find(|t| t.name == name) {
            Some(entry) => (entry.call)(input),
            None => {
                let known: Vec<&str> = self.tools.iter().map(|t| t.name).collect();
                Err(ToolError::not_found(format!(
                    "tool `{name}` (component `{}` offers: {})",
                    self.name,
                    known.join(", ")
                )))
            }
        }
    }
}

/// The WIT rule for tool names: lowercase ASCII letters, digits, `-`, `_`.
const fn valid_tool_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if !matches!(bytes[i], b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_') {
            return false;
        }
        i += 1;
    }
    true
}

/// `a == b`, usable in `const` (`PartialEq` is not yet).
const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_wit_rule() {
        assert!(valid_tool_name("read"));
        assert!(valid_tool_name("query_file-2"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("Read"));
        assert!(!valid_tool_name("read file"));
        assert!(str_eq("abc", "abc"));
        assert!(!str_eq("abc", "abd"));
        assert!(!str_eq("abc", "ab"));
    }
}
