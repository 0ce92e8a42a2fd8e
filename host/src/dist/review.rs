//! What a component asks for, for people to review: the capabilities its
//! imports fall under (what it *can* use once granted) and what its
//! `describe` requests (what it *says* it needs). Recorded at install, in
//! the lock, and compared on upgrade: a new version that asks for anything
//! the installed one did not is held until the operator approves it.
//!
//! Asking is not having: nothing here grants anything. Grants name a
//! component digest, so a new version inherits none of the old one's.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use longhand_hands::{Access, CapabilityRequests, Effect, LoadedTool};

/// A tool as the review shows it: `NAME (effect)`.
fn tool_line(name: &str, effect: Effect) -> String {
    let effect = match effect {
        Effect::ReadOnly => "read-only",
        Effect::Idempotent => "idempotent",
        Effect::Writes => "writes",
    };
    format!("{name} ({effect})")
}

/// What a component asks for, in a form that diffs line by line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asks {
    /// Capability names its imports fall under (`hands::caps::CAPABILITIES`).
    pub imports: BTreeSet<String>,
    /// Directories it requests, `GUEST_PATH (ro|rw)`.
    #[serde(default)]
    pub dirs: BTreeSet<String>,
    /// Outbound host patterns it requests.
    #[serde(default)]
    pub hosts: BTreeSet<String>,
    /// Environment variable names it requests.
    #[serde(default)]
    pub env: BTreeSet<String>,
    /// Secret names it requests.
    #[serde(default)]
    pub secrets: BTreeSet<String>,
    /// Its tools with their effects, `NAME (read-only|idempotent|writes)`.
    /// Tool names drive approvals and `only`; effects drive what is re-run
    /// after a crash: a change to either is the operator's to approve.
    #[serde(default)]
    pub tools: BTreeSet<String>,
}

impl Asks {
    /// What `tool` asks for.
    pub fn of(tool: &LoadedTool) -> Self {
        let mut asks = Self::from_parts(tool.capabilities(), &tool.info().requests);
        asks.tools = tool
            .info()
            .tools
            .iter()
            .map(|t| tool_line(&t.name, t.effect))
            .collect();
        asks
    }

    fn from_parts(imports: &[&str], requests: &CapabilityRequests) -> Self {
        Self {
            tools: BTreeSet::new(),
            imports: imports.iter().map(|s| (*s).to_owned()).collect(),
            dirs: requests
                .dirs
                .iter()
                .map(|d| {
                    let access = match d.access {
                        Access::ReadOnly => "ro",
                        Access::ReadWrite => "rw",
                    };
                    format!("{} ({access})", d.guest_path)
                })
                .collect(),
            hosts: requests.hosts.iter().cloned().collect(),
            env: requests.env.iter().cloned().collect(),
            secrets: requests.secrets.iter().cloned().collect(),
        }
    }

    /// Each item as `KIND VALUE` (`host api.example.com`), sorted.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (kind, set) in self.sets() {
            lines.extend(set.iter().map(|v| format!("{kind} {v}")));
        }
        lines
    }

    fn sets(&self) -> [(&'static str, &BTreeSet<String>); 6] {
        [
            ("tool", &self.tools),
            ("import", &self.imports),
            ("dir", &self.dirs),
            ("host", &self.hosts),
            ("env", &self.env),
            ("secret", &self.secrets),
        ]
    }

    /// What `new` asks for beyond `self` (`+ host x`) and no longer asks
    /// for (`- host y`). Empty when they ask for the same.
    pub fn diff(&self, new: &Self) -> Diff {
        let old: BTreeSet<String> = self.lines().into_iter().collect();
        let now: BTreeSet<String> = new.lines().into_iter().collect();
        Diff {
            more: now.difference(&old).cloned().collect(),
            less: old.difference(&now).cloned().collect(),
        }
    }
}

/// [`Asks::diff`]: what a new version adds and drops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// Asked for now and not before: these hold an upgrade.
    pub more: Vec<String>,
    /// Asked for before and not now.
    pub less: Vec<String>,
}

impl Diff {
    /// What holds an upgrade until the operator approves it: everything
    /// asked for anew, and every tool dropped (a name an approval rule or
    /// an `only` list relies on; with a changed effect, the old line is
    /// dropped and the new one added).
    pub fn to_approve(&self) -> Vec<String> {
        let dropped = self
            .less
            .iter()
            .filter(|l| l.starts_with("tool "))
            .map(|l| format!("no longer {l}"));
        self.more.iter().cloned().chain(dropped).collect()
    }

    /// `+ …` and `- …` lines, the additions first.
    pub fn lines(&self) -> Vec<String> {
        let plus = self.more.iter().map(|l| format!("+ {l}"));
        let minus = self.less.iter().map(|l| format!("- {l}"));
        plus.chain(minus).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhand_hands::DirRequest;

    #[test]
    fn one_more_host_is_more_and_a_dropped_one_is_less() {
        let mut requests = CapabilityRequests {
            hosts: vec!["a.example".to_owned()],
            dirs: vec![DirRequest {
                guest_path: "/w".to_owned(),
                access: Access::ReadOnly,
                why: String::new(),
            }],
            ..CapabilityRequests::default()
        };
        let old = Asks::from_parts(&["http"], &requests);
        assert!(old.diff(&old).more.is_empty());
        requests.hosts = vec!["b.example".to_owned()];
        let new = Asks::from_parts(&["http", "fs"], &requests);
        let diff = old.diff(&new);
        assert_eq!(diff.more, ["host b.example", "import fs"]);
        assert_eq!(diff.less, ["host a.example"]);
        assert_eq!(diff.lines()[0], "+ host b.example");
        assert_eq!(
            old.lines(),
            ["import http", "dir /w (ro)", "host a.example"]
        );
    }

    #[test]
    fn an_added_or_dropped_tool_or_a_changed_effect_needs_approval() {
        let old = Asks {
            tools: [
                tool_line("a", Effect::ReadOnly),
                tool_line("b", Effect::ReadOnly),
            ]
            .into(),
            ..Asks::default()
        };
        let mut new = old.clone();
        assert!(old.diff(&new).to_approve().is_empty());
        new.tools = [
            tool_line("a", Effect::Writes),
            tool_line("c", Effect::ReadOnly),
        ]
        .into();
        let approve = old.diff(&new).to_approve();
        assert_eq!(
            approve,
            [
                "tool a (writes)",
                "tool c (read-only)",
                "no longer tool a (read-only)",
                "no longer tool b (read-only)"
            ]
        );
    }
}
