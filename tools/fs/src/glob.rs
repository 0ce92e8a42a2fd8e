//! `glob`: paths matching a pattern such as `src/**/*.rs`.
//!
//! Matching uses `globset` with `literal_separator`, so `*` stays within one
//! path component and only `**` crosses directories — the shell's rule, and
//! the one models expect. The walk starts below the pattern's literal prefix
//! (`src/` for `src/**/*.rs`) and, when there is no `**`, stops at the
//! pattern's depth, so a narrow pattern never walks the whole tree.

use std::fs;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use longhand_sdk::{Effect, IoResultExt, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::walk::{self, Kind};
use crate::{resolve, workspace};

const DEFAULT_MAX_RESULTS: u64 = 1000;

/// Depth limit for `**`: deep enough for any real tree, and a bound on a
/// pathological one.
const UNBOUNDED_DEPTH: usize = 64;

fn default_max_results() -> u64 {
    DEFAULT_MAX_RESULTS
}

/// Input of `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlobInput {
    /// The pattern, relative to `root` (or absolute): `*` and `?` match within
    /// one path component, `**` matches any number of directories, `[abc]`
    /// and `{a,b}` as in the shell. Example: `src/**/*.rs`.
    pattern: String,
    /// The directory the pattern is relative to: a guest path, or a path
    /// relative to `/workspace`. Default: `/workspace`.
    #[serde(default = "workspace")]
    root: String,
    /// Most paths to return; `truncated` is set if there were more.
    /// Default: 1000.
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1, max = 100_000))]
    max_results: u64,
    /// Also walk into entries whose name starts with `.` (such as `.git`).
    /// Default: false, unless the pattern itself names a dot entry.
    #[serde(default)]
    hidden: bool,
}

/// Output of `glob`.
#[derive(Debug, Serialize)]
pub(crate) struct GlobOutput {
    /// Matching guest paths in name order; directories end with `/`.
    matches: Vec<String>,
    truncated: bool,
    /// Directories that could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unreadable: Vec<String>,
}

/// The `glob` tool.
pub(crate) struct Glob;

impl Tool for Glob {
    const NAME: &'static str = "glob";
    const DESCRIPTION: &'static str = "Find files by path pattern, e.g. `src/**/*.rs` or \
        `*.toml`, relative to `root` (default `/workspace`). Returns matching guest paths sorted \
        by name, directories ending in `/`. Entries starting with `.` are skipped unless \
        `hidden` is true or the pattern names them. Symlinks are not followed.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = GlobInput;
    type Output = GlobOutput;

    fn call(input: GlobInput) -> Result<GlobOutput, ToolError> {
        let root = resolve("root", &input.root)?;
        let plan = Plan::new(&root, &input.pattern)?;
        // A wrong root is an error; a literal prefix that does not exist under
        // it (`docs/**` in a tree without docs/) simply matches nothing.
        if !input.pattern.starts_with('/') {
            fs::metadata(&root).for_resource(root.display())?;
        }
        let label = plan.start.display().to_string();
        let mut matches = Vec::new();
        let mut truncated = false;
        let unreadable = walk::walk(
            &plan.start,
            &label,
            &walk::Options {
                max_depth: plan.max_depth,
                hidden: input.hidden || plan.names_hidden,
            },
            &mut |entry| {
                if !plan.matcher.is_match(&entry.rel) {
                    return ControlFlow::Continue(());
                }
                if matches.len() as u64 >= input.max_results {
                    truncated = true;
                    return ControlFlow::Break(());
                }
                let mut path = entry.path.display().to_string();
                if entry.kind == Kind::Dir {
                    path.push('/');
                }
                matches.push(path);
                ControlFlow::Continue(())
            },
        );
        let unreadable = match unreadable {
            Err(ToolError::NotFound(_)) => Vec::new(),
            other => other?,
        };
        Ok(GlobOutput {
            matches,
            truncated,
            unreadable,
        })
    }
}

/// Where to walk and what to match, derived from root and pattern.
#[derive(Debug)]
struct Plan {
    /// Root joined with the pattern's literal leading directories.
    start: PathBuf,
    /// The rest of the pattern, matched against paths relative to `start`.
    matcher: GlobMatcher,
    max_depth: usize,
    /// The pattern itself names an entry starting with `.`.
    names_hidden: bool,
}

impl Plan {
    fn new(root: &Path, pattern: &str) -> Result<Self, ToolError> {
        if pattern.is_empty() {
            return Err(ToolError::invalid_input("`pattern` is empty"));
        }
        let (base, relative) = match pattern.strip_prefix('/') {
            Some(rest) => (PathBuf::from("/"), rest),
            None => (root.to_path_buf(), pattern),
        };
        let (prefix, rest) = split_literal_prefix(relative);
        if rest.is_empty() {
            return Err(ToolError::invalid_input(
                "`pattern` ends with `/`; name what to match, e.g. `src/*`",
            ));
        }
        let matcher = GlobBuilder::new(rest)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::invalid_input(format!("`pattern`: {e}")))?
            .compile_matcher();
        let max_depth = if rest.contains("**") {
            UNBOUNDED_DEPTH
        } else {
            rest.split('/').count()
        };
        let names_hidden = rest.starts_with('.') || rest.contains("/.");
        Ok(Self {
            start: prefix.iter().fold(base, |path, dir| path.join(dir)),
            matcher,
            max_depth,
            names_hidden,
        })
    }
}

/// Splits off the leading components without glob syntax. The last component
/// always stays in the pattern, since it is what gets matched.
fn split_literal_prefix(pattern: &str) -> (Vec<&str>, &str) {
    let mut prefix = Vec::new();
    let mut rest = pattern;
    while let Some((head, tail)) = rest.split_once('/') {
        if head.contains(['*', '?', '[', '{', '\\']) {
            break;
        }
        if !head.is_empty() && head != "." {
            prefix.push(head);
        }
        rest = tail;
    }
    (prefix, rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;

    #[test]
    fn literal_prefixes_are_walked_directly() {
        assert_eq!(
            split_literal_prefix("src/**/*.rs"),
            (vec!["src"], "**/*.rs")
        );
        assert_eq!(split_literal_prefix("a/b/c.txt"), (vec!["a", "b"], "c.txt"));
        assert_eq!(split_literal_prefix("*.toml"), (vec![], "*.toml"));
        assert_eq!(split_literal_prefix("./x/*/y"), (vec!["x"], "*/y"));
        let plan = Plan::new(Path::new("/workspace"), "/data/logs/*.log").unwrap();
        assert_eq!(plan.start, Path::new("/data/logs"));
        assert_eq!(plan.max_depth, 1);
        let plan = Plan::new(Path::new("/workspace"), "crates/*/src/**").unwrap();
        assert_eq!(plan.start, Path::new("/workspace/crates"));
        assert_eq!(plan.max_depth, UNBOUNDED_DEPTH);
    }

    #[test]
    fn star_stays_within_a_component() {
        let plan = Plan::new(Path::new("/w"), "*.rs").unwrap();
        assert!(plan.matcher.is_match("main.rs"));
        assert!(!plan.matcher.is_match("src/main.rs"));
        let plan = Plan::new(Path::new("/w"), "**/*.rs").unwrap();
        assert!(plan.matcher.is_match("main.rs"));
        assert!(plan.matcher.is_match("a/b/main.rs"));
    }

    #[test]
    fn bad_patterns_are_invalid_input() {
        for pattern in ["", "src/", "a/[b"] {
            assert!(
                matches!(
                    Plan::new(Path::new("/w"), pattern),
                    Err(ToolError::InvalidInput(_))
                ),
                "{pattern:?}"
            );
        }
    }

    fn glob(root: String, pattern: &str, hidden: bool) -> Vec<String> {
        let out = Glob::call(GlobInput {
            pattern: pattern.into(),
            root: root.clone(),
            max_results: 100,
            hidden,
        })
        .unwrap();
        out.matches
            .into_iter()
            .map(|m| m.strip_prefix(&root).unwrap().to_owned())
            .collect()
    }

    #[test]
    fn finds_files_by_pattern() {
        let s = Scratch::new();
        s.file("Cargo.toml", "");
        s.file("src/main.rs", "");
        s.file("src/a/b.rs", "");
        s.file("src/a/c.txt", "");
        s.file(".hidden/x.rs", "");
        let root = s.join("");
        assert_eq!(
            glob(root.clone(), "src/**/*.rs", false),
            ["src/a/b.rs", "src/main.rs"]
        );
        assert_eq!(glob(root.clone(), "*.toml", false), ["Cargo.toml"]);
        assert_eq!(
            glob(root.clone(), "src/*", false),
            ["src/a/", "src/main.rs"]
        );
        assert_eq!(glob(root.clone(), "**/x.rs", false), Vec::<String>::new());
        assert_eq!(glob(root.clone(), "**/x.rs", true), [".hidden/x.rs"]);
        assert_eq!(glob(root.clone(), ".hidden/*", false), [".hidden/x.rs"]);
        assert_eq!(glob(root, "nope/**", false), Vec::<String>::new());
        let err = Glob::call(GlobInput {
            pattern: "*".into(),
            root: s.join("missing"),
            max_results: 10,
            hidden: false,
        })
        .unwrap_err();
        assert!(matches!(err, ToolError::NotFound(_)));
    }
}
