//! `search`: lines matching a regular expression, in a file or a tree.
//!
//! Like `grep -rn`, with the limits a model needs: at most `max_results`
//! matches, each line cut to [`MAX_LINE_CHARS`] characters, files larger than
//! [`MAX_FILE_BYTES`] and binary files (a NUL byte in the first 8 KiB) skipped
//! and counted, so a search through a build directory does not return
//! megabytes of minified code. The regex dialect is Rust's `regex` crate:
//! linear time, no backreferences, so no pattern can hang the tool.

use std::fs;
use std::ops::ControlFlow;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use longhand_sdk::{Effect, IoResultExt, Tool, ToolError};
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::walk::{self, Kind};
use crate::{resolve, workspace};

const DEFAULT_MAX_RESULTS: u64 = 200;
/// Longest line returned, in characters; longer lines end with `…`.
const MAX_LINE_CHARS: usize = 400;
/// Files larger than this are skipped.
const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// How deep a search descends.
const MAX_DEPTH: usize = 64;
/// How much of a file is checked for NUL bytes.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

fn default_max_results() -> u64 {
    DEFAULT_MAX_RESULTS
}

/// Input of `search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchInput {
    /// Regular expression (Rust `regex` syntax, like PCRE without
    /// look-around or backreferences), matched against each line.
    pattern: String,
    /// File or directory to search: a guest path, or a path relative to
    /// `/workspace`. Default: `/workspace`.
    #[serde(default = "workspace")]
    root: String,
    /// Only search files matching this glob. Without a `/` it is matched
    /// against the file name (`*.rs`); with one, against the path relative to
    /// `root` (`src/**/*.rs`).
    glob: Option<String>,
    /// Match letters regardless of case. Default: false.
    #[serde(default)]
    case_insensitive: bool,
    /// Most matching lines to return; `truncated` is set if there were more.
    /// Default: 200.
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1, max = 10_000))]
    max_results: u64,
    /// Also search entries whose name starts with `.`. Default: false.
    #[serde(default)]
    hidden: bool,
}

/// One matching line.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct SearchMatch {
    /// Guest path of the file.
    path: String,
    /// 1-based.
    line_number: u64,
    /// The line without its line ending, cut to 400 characters.
    line: String,
}

/// Output of `search`.
#[derive(Debug, Serialize)]
pub(crate) struct SearchOutput {
    matches: Vec<SearchMatch>,
    truncated: bool,
    files_searched: u64,
    /// Files skipped as binary, larger than 8 MiB or unreadable, plus
    /// directories that could not be read.
    files_skipped: u64,
}

/// The `search` tool.
pub(crate) struct Search;

impl Tool for Search {
    const NAME: &'static str = "search";
    const DESCRIPTION: &'static str = "Search file contents with a regular expression, like \
        `grep -rn`. Returns matching lines with path and line number, in path order. Narrow it \
        with `root` and `glob` (e.g. `*.rs`). Binary files, files over 8 MiB and entries \
        starting with `.` are skipped; lines are cut to 400 characters.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = SearchInput;
    type Output = SearchOutput;

    fn call(input: SearchInput) -> Result<SearchOutput, ToolError> {
        let root = resolve("root", &input.root)?;
        let label = root.display().to_string();
        let regex = RegexBuilder::new(&input.pattern)
            .case_insensitive(input.case_insensitive)
            .build()
            .map_err(|e| ToolError::invalid_input(format!("`pattern`: {e}")))?;
        let filter = input.glob.as_deref().map(Filter::new).transpose()?;
        let mut search = Searcher {
            regex,
            max_results: input.max_results,
            out: SearchOutput {
                matches: Vec::new(),
                truncated: false,
                files_searched: 0,
                files_skipped: 0,
            },
        };

        let meta = fs::metadata(&root).for_resource(&label)?;
        if meta.is_file() {
            let _ = search.file(&root, meta.len());
            return Ok(search.out);
        }
        let unreadable = walk::walk(
            &root,
            &label,
            &walk::Options {
                max_depth: MAX_DEPTH,
                hidden: input.hidden,
            },
            &mut |entry| {
                if entry.kind != Kind::File
                    || filter.as_ref().is_some_and(|f| !f.matches(&entry.rel))
                {
                    return ControlFlow::Continue(());
                }
                search.file(&entry.path, entry.size.unwrap_or(0))
            },
        )?;
        search.out.files_skipped += unreadable.len() as u64;
        Ok(search.out)
    }
}

/// The `glob` filter: on the file name, or on the relative path if it has a `/`.
struct Filter {
    matcher: GlobMatcher,
    on_path: bool,
}

impl Filter {
    fn new(glob: &str) -> Result<Self, ToolError> {
        let matcher = GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::invalid_input(format!("`glob`: {e}")))?
            .compile_matcher();
        Ok(Self {
            matcher,
            on_path: glob.contains('/'),
        })
    }

    fn matches(&self, rel: &str) -> bool {
        if self.on_path {
            self.matcher.is_match(rel)
        } else {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            self.matcher.is_match(name)
        }
    }
}

struct Searcher {
    regex: Regex,
    max_results: u64,
    out: SearchOutput,
}

impl Searcher {
    /// Searches one file; breaks once `max_results` is exceeded.
    fn file(&mut self, path: &Path, size: u64) -> ControlFlow<()> {
        if size > MAX_FILE_BYTES {
            self.out.files_skipped += 1;
            return ControlFlow::Continue(());
        }
        let Ok(bytes) = fs::read(path) else {
            self.out.files_skipped += 1;
            return ControlFlow::Continue(());
        };
        if bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
            self.out.files_skipped += 1;
            return ControlFlow::Continue(());
        }
        self.out.files_searched += 1;
        let text = String::from_utf8_lossy(&bytes);
        let label = path.display().to_string();
        for (index, line) in text.lines().enumerate() {
            if !self.regex.is_match(line) {
                continue;
            }
            if self.out.matches.len() as u64 >= self.max_results {
                self.out.truncated = true;
                return ControlFlow::Break(());
            }
            self.out.matches.push(SearchMatch {
                path: label.clone(),
                line_number: index as u64 + 1,
                line: clip(line),
            });
        }
        ControlFlow::Continue(())
    }
}

/// Cuts a line to [`MAX_LINE_CHARS`] characters, marking the cut with `…`.
fn clip(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;

    fn search(root: String, pattern: &str, glob: Option<&str>, max: u64) -> SearchOutput {
        Search::call(SearchInput {
            pattern: pattern.into(),
            root,
            glob: glob.map(Into::into),
            case_insensitive: false,
            max_results: max,
            hidden: false,
        })
        .unwrap()
    }

    #[test]
    fn finds_lines_with_numbers() {
        let s = Scratch::new();
        s.file("src/a.rs", "fn main() {}\nfn helper() {}\n");
        s.file("src/b.txt", "fn not_rust\n");
        s.file("bin.dat", "fn\0binary");
        let out = search(s.join(""), r"^fn \w+", Some("*.rs"), 10);
        let lines: Vec<_> = out
            .matches
            .iter()
            .map(|m| (m.line_number, m.line.as_str()))
            .collect();
        assert_eq!(lines, [(1, "fn main() {}"), (2, "fn helper() {}")]);
        assert!(out.matches[0].path.ends_with("src/a.rs"));

        let out = search(s.join(""), "fn", None, 10);
        assert_eq!(out.matches.len(), 3);
        assert_eq!(out.files_skipped, 1, "the binary file");
        assert_eq!(out.files_searched, 2);
    }

    #[test]
    fn stops_at_max_results() {
        let s = Scratch::new();
        s.file("a.txt", "x\nx\nx\n");
        let out = search(s.join(""), "x", None, 2);
        assert_eq!(out.matches.len(), 2);
        assert!(out.truncated);
        let out = search(s.join("a.txt"), "x", None, 3);
        assert!(!out.truncated);
    }

    #[test]
    fn path_globs_match_relative_paths() {
        let f = Filter::new("src/**/*.rs").unwrap();
        assert!(f.matches("src/x/y.rs"));
        assert!(!f.matches("tests/y.rs"));
        let f = Filter::new("*.rs").unwrap();
        assert!(f.matches("deep/down/y.rs"));
    }

    #[test]
    fn bad_regex_is_invalid_input() {
        let err = Search::call(SearchInput {
            pattern: "(".into(),
            root: "/".into(),
            glob: None,
            case_insensitive: false,
            max_results: 1,
            hidden: false,
        })
        .unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.starts_with("`pattern`")));
    }

    #[test]
    fn long_lines_are_clipped() {
        let long = "é".repeat(MAX_LINE_CHARS + 10);
        let clipped = clip(&long);
        assert_eq!(clipped.chars().count(), MAX_LINE_CHARS + 1);
        assert!(clipped.ends_with('…'));
        assert_eq!(clip("short"), "short");
    }
}
