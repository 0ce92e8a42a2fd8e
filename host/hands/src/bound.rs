//! Bounds on guest text crossing into the host.
//!
//! Every string a guest hands the host ends up somewhere a person or a
//! model reads it: a tool error goes to the model and the session log, a
//! `describe` text into every model request, a log line into a receipt. A
//! hostile guest can make any of them as large as its memory limit. This
//! module cuts each one to a bound and says so in the text: a cut string
//! ends with ` … [N bytes dropped]`, so neither a person nor a model takes
//! it for the whole.
//!
//! Bounds (documented in docs/security.md):
//! - tool error messages, denied resources and reasons: the call's
//!   `max_output_bytes` (default 1 MiB), like the output itself;
//! - `describe`: names and versions 256 bytes, descriptions 16 KiB, at most
//!   64 entries per capability-request list, each 1 KiB; at most
//!   [`MAX_TOOLS`] tools (more is refused at load);
//! - log lines and progress messages: [`super::receipt::MAX_LOG_LINE_BYTES`]
//!   each (cut in the receipt journal).
//!
//! The strings have already been copied out of guest memory when they get
//! here; that copy is bounded by the guest's memory limit. What this module
//! bounds is everything after: the log, the model's context, the terminal.

use super::bindings::longhand::tool::types as wit;

/// Most tools one component may declare.
pub const MAX_TOOLS: usize = 256;
/// Longest component or tool description kept, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 16 << 10;
/// Longest name or version kept, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Most entries kept in each capability-request list.
pub const MAX_REQUESTS: usize = 64;
/// Longest capability-request entry kept, in bytes.
pub const MAX_REQUEST_BYTES: usize = 1 << 10;

/// Cut `text` to at most `limit` bytes of its own (on a character
/// boundary), followed by a marker saying how much was dropped.
pub fn cut(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let end = text.floor_char_boundary(limit);
    let dropped = text.len() - end;
    text.truncate(end);
    text.push_str(&format!(" … [{dropped} bytes dropped]"));
    text
}

/// [`cut`] for borrowed text: borrowed as it is when it fits. For names
/// and paths that someone else chose, placed into the host's own messages.
pub fn cut_str(text: &str, limit: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= limit {
        return std::borrow::Cow::Borrowed(text);
    }
    let end = text.floor_char_boundary(limit);
    std::borrow::Cow::Owned(format!(
        "{} … [{} bytes dropped]",
        &text[..end],
        text.len() - end
    ))
}

/// A name someone else chose (a component, a tool, a method) cut to
/// [`MAX_NAME_BYTES`] for a message.
pub fn name(text: &str) -> std::borrow::Cow<'_, str> {
    cut_str(text, MAX_NAME_BYTES)
}

/// Longest path kept in a message, in bytes: Linux's `PATH_MAX`, so a
/// path the system could open is shown whole.
pub const MAX_PATH_BYTES: usize = 4096;

/// Longest reason kept in a load error, in bytes (a wasmtime error can
/// quote an import name of any length from the component's bytes).
pub const MAX_REASON_BYTES: usize = 16 << 10;

/// Cut every string of a tool error to `limit` bytes.
pub(crate) fn tool_error(err: wit::ToolError, limit: u64) -> wit::ToolError {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    match err {
        wit::ToolError::InvalidInput(m) => wit::ToolError::InvalidInput(cut(m, limit)),
        wit::ToolError::NotFound(m) => wit::ToolError::NotFound(cut(m, limit)),
        wit::ToolError::Failed(m) => wit::ToolError::Failed(cut(m, limit)),
        wit::ToolError::AccessDenied(d) => wit::ToolError::AccessDenied(wit::Denied {
            resource: cut(d.resource, limit),
            reason: cut(d.reason, limit),
        }),
    }
}

/// Cut what `describe` returned to the bounds above; refuse a component
/// declaring more than [`MAX_TOOLS`] tools. Input schemas are bounded by
/// the schema loader, not here.
pub(crate) fn describe(mut info: wit::ComponentInfo) -> Result<wit::ComponentInfo, String> {
    if info.tools.len() > MAX_TOOLS {
        return Err(format!(
            "it declares {} tools; at most {MAX_TOOLS} are accepted",
            info.tools.len()
        ));
    }
    info.name = cut(info.name, MAX_NAME_BYTES);
    info.version = cut(info.version, MAX_NAME_BYTES);
    info.description = cut(info.description, MAX_DESCRIPTION_BYTES);
    for tool in &mut info.tools {
        tool.description = cut(std::mem::take(&mut tool.description), MAX_DESCRIPTION_BYTES);
    }
    let r = &mut info.requests;
    let list = |items: &mut Vec<String>| {
        items.truncate(MAX_REQUESTS);
        for item in items.iter_mut() {
            *item = cut(std::mem::take(item), MAX_REQUEST_BYTES);
        }
    };
    list(&mut r.hosts);
    list(&mut r.env);
    list(&mut r.secrets);
    r.dirs.truncate(MAX_REQUESTS);
    for dir in &mut r.dirs {
        dir.guest_path = cut(std::mem::take(&mut dir.guest_path), MAX_REQUEST_BYTES);
        dir.why = cut(std::mem::take(&mut dir.why), MAX_REQUEST_BYTES);
    }
    Ok(info)
}

/// Every character shown as an escape rather than as itself, as sorted,
/// disjoint, inclusive ranges of code points (newline and tab are not in
/// it: they lay text out visibly). `host/src/cli/term.rs`'s module docs give each row's reason.
pub const HIDDEN: &[(u32, u32)] = &[
    (0x0000, 0x0008),   // C0 controls before tab
    (0x000b, 0x001f),   // C0 controls after newline (CR, ESC, …)
    (0x007f, 0x009f),   // DEL and C1 controls (U+009B is an 8-bit CSI)
    (0x00ad, 0x00ad),   // soft hyphen
    (0x034f, 0x034f),   // combining grapheme joiner
    (0x061c, 0x061c),   // Arabic letter mark (bidi)
    (0x115f, 0x1160),   // Hangul choseong and jungseong fillers
    (0x17b4, 0x17b5),   // Khmer inherent vowels (invisible)
    (0x180b, 0x180f),   // Mongolian variation selectors and vowel separator
    (0x200b, 0x200f),   // zero-width space, ZWNJ, ZWJ, LRM, RLM
    (0x2028, 0x202e),   // line/paragraph separators, bidi embeddings and overrides
    (0x2060, 0x206f),   // word joiner, invisible operators, bidi isolates, deprecated controls
    (0x3164, 0x3164),   // Hangul filler
    (0xfe00, 0xfe0f),   // variation selectors
    (0xfeff, 0xfeff),   // zero-width no-break space (BOM)
    (0xffa0, 0xffa0),   // halfwidth Hangul filler
    (0xfff9, 0xfffb),   // interlinear annotation controls
    (0x1bca0, 0x1bca3), // shorthand format controls
    (0x1d173, 0x1d17a), // musical symbol format controls
    (0xe0000, 0xe007f), // tag characters
    (0xe0100, 0xe01ef), // variation selectors supplement
];

/// Whether `c` is in [`HIDDEN`]: shown as an escape, never as itself
/// (newline and tab are shown as themselves).
pub fn is_hidden(c: char) -> bool {
    let c = u32::from(c);
    HIDDEN
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// `text` with every [`HIDDEN`] character and every newline shown as a
/// visible escape (`\x1b`, `\u{202e}`, `\n`), cut to `limit` bytes: text
/// someone else wrote, placed where a model reads it as the host's (an MCP
/// server's tool description), so it cannot hide instructions in
/// invisible characters or reorder what a person reviewing it sees.
pub fn visible(text: &str, limit: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len().min(limit) + 16);
    for (at, c) in text.char_indices() {
        let before = out.len();
        if c == '\n' {
            out.push_str("\\n");
        } else if !is_hidden(c) {
            out.push(c);
        } else if c <= '\u{7f}' {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
        if out.len() > limit {
            // Never half an escape: the character that crossed goes whole.
            out.truncate(before);
            out.push_str(&format!(" … [{} bytes dropped]", text.len() - at));
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_short_text_and_marks_long_text() {
        assert_eq!(cut("short".to_owned(), 10), "short");
        assert_eq!(cut("abcdef".to_owned(), 3), "abc … [3 bytes dropped]");
        // Never splits a character: "é" is two bytes.
        assert_eq!(cut("éé".to_owned(), 3), "é … [2 bytes dropped]");
        assert_eq!(cut("x".repeat(100), 0), " … [100 bytes dropped]");
        assert_eq!(cut_str("abcdef", 3), "abc … [3 bytes dropped]");
        assert!(matches!(
            cut_str("abc", 3),
            std::borrow::Cow::Borrowed("abc")
        ));
        assert!(name(&"n".repeat(64 << 20)).len() < MAX_NAME_BYTES + 64);
    }
}
