//! `read`: a file's text, optionally a line range, capped in bytes.
//!
//! The file is streamed, not loaded: only the selected lines are kept, and
//! lines are counted to the end so the model learns how long the file is and
//! can ask for the next range. When the cap is hit the content stops at a line
//! boundary (the last line in `end_line` is complete) unless the very first
//! selected line is itself longer than the cap; then it is cut at a UTF-8
//! character boundary.

use std::fs::File;
use std::io;

use longhand_sdk::{Effect, IoResultExt, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resolve;

/// Default byte cap: 256 KiB, a few thousand lines of code.
const DEFAULT_MAX_BYTES: u64 = 256 * 1024;

fn default_max_bytes() -> u64 {
    DEFAULT_MAX_BYTES
}

/// Input of `read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadInput {
    /// The file: a guest path such as `/workspace/src/main.rs`, or a path
    /// relative to `/workspace`.
    path: String,
    /// First line to return, counting from 1. Default: 1.
    #[schemars(range(min = 1))]
    start_line: Option<u64>,
    /// Last line to return, inclusive. Default: the last line of the file.
    #[schemars(range(min = 1))]
    end_line: Option<u64>,
    /// Most bytes of content to return. Longer content stops at the end of
    /// the last whole line that fits, and `truncated` is set. Default: 262144.
    #[serde(default = "default_max_bytes")]
    #[schemars(range(min = 1, max = 16_777_216))]
    max_bytes: u64,
}

/// Output of `read`.
#[derive(Debug, Serialize)]
pub(crate) struct ReadOutput {
    path: String,
    /// The selected lines, with their line endings. Invalid UTF-8 is replaced
    /// by U+FFFD.
    content: String,
    start_line: u64,
    /// Last line (possibly partial, if `truncated` and it is `start_line`)
    /// in `content`; 0 for an empty file.
    end_line: u64,
    total_lines: u64,
    truncated: bool,
}

/// The `read` tool.
pub(crate) struct Read;

impl Tool for Read {
    const NAME: &'static str = "read";
    const DESCRIPTION: &'static str = "Read a text file. Returns `content` (optionally only lines \
        `start_line`..=`end_line`, counting from 1), `total_lines` in the file, and the range \
        actually returned. Output is capped at `max_bytes` (default 256 KiB); when `truncated` is \
        true, read on from `end_line + 1`.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = ReadInput;
    type Output = ReadOutput;

    fn call(input: ReadInput) -> Result<ReadOutput, ToolError> {
        let path = resolve("path", &input.path)?;
        let label = path.display().to_string();
        let start = input.start_line.unwrap_or(1);
        if start == 0 {
            return Err(ToolError::invalid_input(
                "`start_line` counts from 1; 0 is not a line",
            ));
        }
        let end = input.end_line.unwrap_or(u64::MAX);
        if end < start {
            return Err(ToolError::invalid_input(format!(
                "`end_line` ({end}) is before `start_line` ({start})"
            )));
        }
        if path.metadata().for_resource(&label)?.is_dir() {
            return Err(ToolError::invalid_input(format!(
                "{label} is a directory; use `list` to see what it contains"
            )));
        }
        let file = File::open(&path).for_resource(&label)?;
        let max = usize::try_from(input.max_bytes).unwrap_or(usize::MAX);
        let selected = select(file, start, end, max).for_resource(&label)?;
        if start > selected.total_lines.max(1) {
            return Err(ToolError::invalid_input(format!(
                "`start_line` ({start}) is past the end of {label}, which has {} lines",
                selected.total_lines
            )));
        }
        Ok(ReadOutput {
            path: label,
            content: String::from_utf8_lossy(&selected.content).into_owned(),
            start_line: start,
            end_line: selected.last_line,
            total_lines: selected.total_lines,
            truncated: selected.truncated,
        })
    }
}

/// What [`select`] kept.
#[derive(Debug, PartialEq, Eq)]
struct Selected {
    content: Vec<u8>,
    /// Last line with bytes in `content`, 0 if none.
    last_line: u64,
    total_lines: u64,
    truncated: bool,
}

/// Streams `reader`, keeping lines `first..=last` up to `max` bytes and
/// counting all lines. A final line without `\n` counts as a line.
fn select(mut reader: impl io::Read, first: u64, last: u64, max: usize) -> io::Result<Selected> {
    let mut buf = vec![0; 64 * 1024];
    let mut out = Vec::new();
    let mut line = 1;
    let mut line_start_in_out = 0;
    let mut last_line = 0;
    let mut full = false;
    let mut truncated = false;
    let mut ends_with_newline = true;
    let mut empty = true;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        empty = false;
        let mut chunk = &buf[..n];
        while !chunk.is_empty() {
            let (segment, rest) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => chunk.split_at(i + 1),
                None => (chunk, &[][..]),
            };
            chunk = rest;
            let newline = segment.last() == Some(&b'\n');
            if !full && (first..=last).contains(&line) {
                if out.len() + segment.len() <= max {
                    out.extend_from_slice(segment);
                    last_line = line;
                } else {
                    full = true;
                    truncated = true;
                    if line == first {
                        // Nothing whole fits: a prefix of the line beats nothing.
                        let room = max - out.len();
                        out.extend_from_slice(&segment[..room]);
                        trim_partial_char(&mut out);
                        last_line = line;
                    } else {
                        out.truncate(line_start_in_out);
                        last_line = line - 1;
                    }
                }
            }
            if newline {
                line += 1;
                line_start_in_out = out.len();
            }
            ends_with_newline = newline;
        }
    }
    let total_lines = match (empty, ends_with_newline) {
        (true, _) => 0,
        (false, true) => line - 1,
        (false, false) => line,
    };
    Ok(Selected {
        content: out,
        last_line,
        total_lines,
        truncated,
    })
}

/// Drops an incomplete UTF-8 sequence left at the end by a byte cut.
fn trim_partial_char(bytes: &mut Vec<u8>) {
    let tail_start = bytes.len().saturating_sub(3);
    for i in (tail_start..bytes.len()).rev() {
        let b = bytes[i];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // continuation byte: keep looking for the lead
        }
        let needed = match b {
            0xF0..=0xF7 => 4,
            0xE0..=0xEF => 3,
            0xC0..=0xDF => 2,
            _ => 1,
        };
        if bytes.len() - i < needed {
            bytes.truncate(i);
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;

    fn sel(text: &str, first: u64, last: u64, max: usize) -> Selected {
        select(text.as_bytes(), first, last, max).unwrap()
    }

    fn content(s: &Selected) -> &str {
        std::str::from_utf8(&s.content).unwrap()
    }

    #[test]
    fn counts_lines_like_an_editor() {
        assert_eq!(sel("", 1, u64::MAX, 100).total_lines, 0);
        assert_eq!(sel("a", 1, u64::MAX, 100).total_lines, 1);
        assert_eq!(sel("a\n", 1, u64::MAX, 100).total_lines, 1);
        assert_eq!(sel("a\nb", 1, u64::MAX, 100).total_lines, 2);
        assert_eq!(sel("a\n\n", 1, u64::MAX, 100).total_lines, 2);
    }

    #[test]
    fn selects_an_inclusive_range() {
        let s = sel("1\n2\n3\n4\n", 2, 3, 100);
        assert_eq!(content(&s), "2\n3\n");
        assert_eq!((s.last_line, s.total_lines, s.truncated), (3, 4, false));
        let s = sel("1\n2\n3", 3, u64::MAX, 100);
        assert_eq!((content(&s), s.last_line), ("3", 3));
    }

    #[test]
    fn cap_stops_at_a_line_boundary() {
        let s = sel("aaa\nbbb\nccc\n", 1, u64::MAX, 9);
        assert_eq!(content(&s), "aaa\nbbb\n");
        assert_eq!((s.last_line, s.total_lines, s.truncated), (2, 3, true));
        // Exactly full: the next line is what overflows.
        let s = sel("aaa\nbbb\n", 1, u64::MAX, 8);
        assert!(!s.truncated);
    }

    #[test]
    fn a_long_first_line_is_cut_at_a_char_boundary() {
        let s = sel("héllo\nworld\n", 1, u64::MAX, 2);
        assert_eq!(content(&s), "h");
        assert_eq!((s.last_line, s.truncated), (1, true));
        let s = sel("x\nhéllo\n", 2, 2, 3);
        assert_eq!(content(&s), "hé");
    }

    #[test]
    fn lines_spanning_reads_are_kept_whole() {
        // A reader that returns one byte at a time exercises the chunk joins.
        struct Trickle<'a>(&'a [u8]);
        impl io::Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let Some((&b, rest)) = self.0.split_first() else {
                    return Ok(0);
                };
                buf[0] = b;
                self.0 = rest;
                Ok(1)
            }
        }
        let s = select(Trickle(b"one\ntwo\nthree\n"), 1, u64::MAX, 10).unwrap();
        assert_eq!(content(&s), "one\ntwo\n");
        assert_eq!((s.last_line, s.total_lines, s.truncated), (2, 3, true));
    }

    #[test]
    fn reads_through_the_tool() {
        let s = Scratch::new();
        s.file("f.txt", "1\n2\n3\n");
        let out = Read::call(ReadInput {
            path: s.join("f.txt"),
            start_line: Some(2),
            end_line: None,
            max_bytes: DEFAULT_MAX_BYTES,
        })
        .unwrap();
        assert_eq!(out.content, "2\n3\n");
        assert_eq!((out.start_line, out.end_line, out.total_lines), (2, 3, 3));

        let past_end = Read::call(ReadInput {
            path: s.join("f.txt"),
            start_line: Some(9),
            end_line: None,
            max_bytes: DEFAULT_MAX_BYTES,
        });
        assert!(matches!(past_end, Err(ToolError::InvalidInput(m)) if m.contains("has 3 lines")));

        let missing = Read::call(ReadInput {
            path: s.join("nope.txt"),
            start_line: None,
            end_line: None,
            max_bytes: DEFAULT_MAX_BYTES,
        });
        assert!(matches!(missing, Err(ToolError::NotFound(_))));

        let dir = Read::call(ReadInput {
            path: s.join(""),
            start_line: None,
            end_line: None,
            max_bytes: DEFAULT_MAX_BYTES,
        });
        assert!(matches!(dir, Err(ToolError::InvalidInput(m)) if m.contains("is a directory")));
    }
}
