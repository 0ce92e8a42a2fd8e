//! `list`: the entries of a directory, optionally recursive.

use std::ops::ControlFlow;

use longhand_sdk::{Effect, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::walk::{self, Kind};
use crate::{resolve, workspace};

const DEFAULT_MAX_ENTRIES: u64 = 1000;
const DEFAULT_RECURSIVE_DEPTH: u32 = 3;

fn default_max_entries() -> u64 {
    DEFAULT_MAX_ENTRIES
}

/// Input of `list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListInput {
    /// The directory: a guest path, or a path relative to `/workspace`.
    /// Default: `/workspace`.
    #[serde(default = "workspace")]
    path: String,
    /// Also list the contents of subdirectories. Default: false.
    #[serde(default)]
    recursive: bool,
    /// With `recursive`, how many levels to descend (1 = only this
    /// directory). Default: 3.
    #[schemars(range(min = 1, max = 64))]
    max_depth: Option<u32>,
    /// Most entries to return; `truncated` is set if there were more.
    /// Default: 1000.
    #[serde(default = "default_max_entries")]
    #[schemars(range(min = 1, max = 100_000))]
    max_entries: u64,
    /// Include entries whose name starts with `.`. Default: true.
    #[serde(default = "yes")]
    hidden: bool,
}

fn yes() -> bool {
    true
}

/// One entry of a listing.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct ListEntry {
    /// Path relative to the listed directory, `/`-separated.
    name: String,
    kind: Kind,
    /// Size in bytes, for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
}

/// Output of `list`.
#[derive(Debug, Serialize)]
pub(crate) struct ListOutput {
    path: String,
    entries: Vec<ListEntry>,
    truncated: bool,
    /// Subdirectories that could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unreadable: Vec<String>,
}

/// The `list` tool.
pub(crate) struct List;

impl Tool for List {
    const NAME: &'static str = "list";
    const DESCRIPTION: &'static str = "List a directory: each entry's name, kind (file, dir, \
        symlink, other) and, for files, size in bytes, sorted by name. With `recursive`, names \
        are paths relative to the directory, down to `max_depth` levels. Symlinks are not \
        followed.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = ListInput;
    type Output = ListOutput;

    fn call(input: ListInput) -> Result<ListOutput, ToolError> {
        let path = resolve("path", &input.path)?;
        let label = path.display().to_string();
        let max_depth = match (input.recursive, input.max_depth) {
            (false, _) => 1,
            (true, depth) => depth.unwrap_or(DEFAULT_RECURSIVE_DEPTH).max(1) as usize,
        };
        let mut entries = Vec::new();
        let mut truncated = false;
        let unreadable = walk::walk(
            &path,
            &label,
            &walk::Options {
                max_depth,
                hidden: input.hidden,
            },
            &mut |entry| {
                if entries.len() as u64 >= input.max_entries {
                    truncated = true;
                    return ControlFlow::Break(());
                }
                entries.push(ListEntry {
                    name: entry.rel.clone(),
                    kind: entry.kind,
                    size: entry.size,
                });
                ControlFlow::Continue(())
            },
        )
        .map_err(|e| not_a_directory(e, &path, &label))?;
        Ok(ListOutput {
            path: label,
            entries,
            truncated,
            unreadable,
        })
    }
}

/// `read_dir` on a file fails with an error whose kind varies by platform;
/// say plainly what happened instead.
fn not_a_directory(error: ToolError, path: &std::path::Path, label: &str) -> ToolError {
    if path.is_file() {
        ToolError::invalid_input(format!(
            "{label} is a file, not a directory; use `read` or `stat`"
        ))
    } else {
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;

    fn list(path: String, recursive: bool, max_entries: u64) -> ListOutput {
        List::call(ListInput {
            path,
            recursive,
            max_depth: None,
            max_entries,
            hidden: true,
        })
        .unwrap()
    }

    #[test]
    fn lists_flat_and_recursive() {
        let s = Scratch::new();
        s.file("b.txt", "12345");
        s.file("a/c.rs", "");
        let out = list(s.join(""), false, 100);
        assert_eq!(
            out.entries,
            [
                ListEntry {
                    name: "a".into(),
                    kind: Kind::Dir,
                    size: None
                },
                ListEntry {
                    name: "b.txt".into(),
                    kind: Kind::File,
                    size: Some(5)
                },
            ]
        );
        let out = list(s.join(""), true, 100);
        let names: Vec<_> = out.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "a/c.rs", "b.txt"]);
    }

    #[test]
    fn truncates_at_max_entries() {
        let s = Scratch::new();
        for name in ["1", "2", "3"] {
            s.file(name, "");
        }
        let out = list(s.join(""), false, 2);
        assert_eq!(out.entries.len(), 2);
        assert!(out.truncated);
        assert!(!list(s.join(""), false, 3).truncated);
    }

    #[test]
    fn a_file_is_not_a_directory() {
        let s = Scratch::new();
        s.file("f", "");
        let err = List::call(ListInput {
            path: s.join("f"),
            recursive: false,
            max_depth: None,
            max_entries: 10,
            hidden: true,
        })
        .unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("is a file")));
    }
}
