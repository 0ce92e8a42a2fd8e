//! `edit`: exact search-and-replace in one file.
//!
//! The rule that makes it safe for a model: `old` must occur exactly once
//! (unless `replace_all` is set), counting overlapping occurrences. Zero means
//! the model's picture of the file is stale; more than one means the edit is
//! ambiguous. Either way the file is left alone and the error says how many
//! times `old` was found, so the model can re-read or widen the context.
//!
//! The effect is `writes`, not `idempotent`: after a successful run `old` is
//! gone, so running the same input again fails (or, with `replace_all`,
//! may replace text the first run produced).

use std::fs;

use longhand_sdk::{Effect, IoResultExt, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resolve;

/// Input of `edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditInput {
    /// The file to change: a guest path, or a path relative to `/workspace`.
    path: String,
    /// The exact text to replace, including whitespace and indentation.
    /// Must occur exactly once in the file unless `replace_all` is true;
    /// include enough surrounding lines to make it unique.
    old: String,
    /// The text to put in its place.
    new: String,
    /// Replace every occurrence instead of requiring exactly one.
    /// Default: false.
    #[serde(default)]
    replace_all: bool,
}

/// Output of `edit`.
#[derive(Debug, Serialize)]
pub(crate) struct EditOutput {
    path: String,
    replacements: u64,
    /// Line on which the first replacement starts, counting from 1.
    first_line: u64,
}

/// The `edit` tool.
pub(crate) struct Edit;

impl Tool for Edit {
    const NAME: &'static str = "edit";
    const DESCRIPTION: &'static str = "Replace exact text in a file. `old` must match the file \
        byte for byte (whitespace included) and occur exactly once, otherwise nothing is \
        changed and the error says how many times it occurs; add surrounding lines to make it \
        unique, or set `replace_all`. Read the file first.";
    const EFFECT: Effect = Effect::Writes;
    type Input = EditInput;
    type Output = EditOutput;

    fn call(input: EditInput) -> Result<EditOutput, ToolError> {
        let path = resolve("path", &input.path)?;
        let label = path.display().to_string();
        let bytes = fs::read(&path).for_resource(&label)?;
        let content = String::from_utf8(bytes).map_err(|_| {
            ToolError::invalid_input(format!(
                "{label} is not UTF-8 text; `edit` only changes text files"
            ))
        })?;
        let edited = apply(&content, &input.old, &input.new, input.replace_all)
            .map_err(|e| e.for_file(&label))?;
        crate::replace_file(&path, edited.content.as_bytes()).for_resource(&label)?;
        Ok(EditOutput {
            path: label,
            replacements: edited.replacements,
            first_line: edited.first_line,
        })
    }
}

/// The result of a successful [`apply`].
#[derive(Debug, PartialEq, Eq)]
struct Edited {
    content: String,
    replacements: u64,
    first_line: u64,
}

/// Why [`apply`] refused.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    EmptyOld,
    NoChange,
    NotFound,
    Ambiguous(usize),
}

impl Refusal {
    fn for_file(self, label: &str) -> ToolError {
        ToolError::invalid_input(match self {
            Self::EmptyOld => {
                "`old` is empty; to create or overwrite a whole file use `write`".to_owned()
            }
            Self::NoChange => "`old` and `new` are the same; there is nothing to change".to_owned(),
            Self::NotFound => format!(
                "`old` occurs 0 times in {label}; read the file again and copy the text \
                 exactly, including whitespace"
            ),
            Self::Ambiguous(n) => format!(
                "`old` occurs {n} times in {label}; include more surrounding lines so it \
                 occurs once, or set `replace_all`"
            ),
        })
    }
}

/// Replaces `old` with `new` in `content` under the uniqueness rule.
fn apply(content: &str, old: &str, new: &str, replace_all: bool) -> Result<Edited, Refusal> {
    if old.is_empty() {
        return Err(Refusal::EmptyOld);
    }
    if old == new {
        return Err(Refusal::NoChange);
    }
    let Some(first) = content.find(old) else {
        return Err(Refusal::NotFound);
    };
    let first_line = content[..first].matches('\n').count() as u64 + 1;
    if replace_all {
        let replacements = content.matches(old).count() as u64;
        return Ok(Edited {
            content: content.replace(old, new),
            replacements,
            first_line,
        });
    }
    let occurrences = count_overlapping(content, old);
    if occurrences > 1 {
        return Err(Refusal::Ambiguous(occurrences));
    }
    let mut edited = String::with_capacity(content.len() - old.len() + new.len());
    edited.push_str(&content[..first]);
    edited.push_str(new);
    edited.push_str(&content[first + old.len()..]);
    Ok(Edited {
        content: edited,
        replacements: 1,
        first_line,
    })
}

/// Occurrences of `needle` in `haystack`, overlapping ones included: `aa`
/// occurs twice in `aaa`, and replacing "the" one would be a guess.
fn count_overlapping(haystack: &str, needle: &str) -> usize {
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = haystack[from..].find(needle) {
        count += 1;
        // Step one character, not one byte, to stay on a char boundary.
        let step = haystack[from + at..]
            .chars()
            .next()
            .map_or(1, char::len_utf8);
        from += at + step;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;

    #[test]
    fn replaces_a_unique_occurrence() {
        let edited = apply("a\nfn x() {}\nb\n", "fn x() {}", "fn y() {}", false).unwrap();
        assert_eq!(
            edited,
            Edited {
                content: "a\nfn y() {}\nb\n".into(),
                replacements: 1,
                first_line: 2,
            }
        );
    }

    #[test]
    fn refuses_missing_and_ambiguous_text() {
        assert_eq!(apply("abc", "x", "y", false), Err(Refusal::NotFound));
        assert_eq!(apply("x x x", "x", "y", false), Err(Refusal::Ambiguous(3)));
        assert_eq!(apply("aaa", "aa", "b", false), Err(Refusal::Ambiguous(2)));
        assert_eq!(apply("abc", "", "y", false), Err(Refusal::EmptyOld));
        assert_eq!(apply("abc", "b", "b", false), Err(Refusal::NoChange));
    }

    #[test]
    fn replace_all_replaces_every_occurrence() {
        let edited = apply("x\nx\n", "x", "yy", true).unwrap();
        assert_eq!(edited.content, "yy\nyy\n");
        assert_eq!((edited.replacements, edited.first_line), (2, 1));
        assert_eq!(apply("abc", "x", "y", true), Err(Refusal::NotFound));
    }

    #[test]
    fn counts_overlaps_on_char_boundaries() {
        assert_eq!(count_overlapping("ééé", "éé"), 2);
        assert_eq!(count_overlapping("abab", "ab"), 2);
        assert_eq!(count_overlapping("abc", "d"), 0);
    }

    #[test]
    fn errors_say_how_many_times() {
        let s = Scratch::new();
        s.file("f.rs", "let a = 1;\nlet a = 1;\n");
        let err = Edit::call(EditInput {
            path: s.join("f.rs"),
            old: "let a = 1;".into(),
            new: "let a = 2;".into(),
            replace_all: false,
        })
        .unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidInput(m) if m.contains("occurs 2 times")),
            "{err}"
        );
        assert_eq!(
            fs::read_to_string(s.path().join("f.rs")).unwrap(),
            "let a = 1;\nlet a = 1;\n",
            "the file is untouched"
        );
        let out = Edit::call(EditInput {
            path: s.join("f.rs"),
            old: "let a = 1;\nlet a".into(),
            new: "let a = 1;\nlet b".into(),
            replace_all: false,
        })
        .unwrap();
        assert_eq!(out.first_line, 1);
        assert_eq!(
            fs::read_to_string(s.path().join("f.rs")).unwrap(),
            "let a = 1;\nlet b = 1;\n"
        );
    }
}
