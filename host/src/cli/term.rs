//! Text that reaches a terminal: guest and model text made harmless.
//!
//! A tool's `describe` text, its error messages and its output, and a
//! model's answers are written by someone else. Printed raw they can drive
//! the operator's terminal: clear the screen (`ESC [2J`), set the window
//! title (`ESC ]0;`), write the clipboard (OSC 52), or reorder what is shown
//! with bidi overrides so a line reads differently from what it says.
//!
//! Every human-readable line the CLI prints passes foreign text through
//! [`printable`] (or [`one_line`] where the CLI prints exactly one line, so
//! a newline cannot forge a second one). Machine output (`--json`) passes
//! through [`json_safe`], which keeps it exact JSON: the same value once
//! parsed, with the dangerous characters as `\uXXXX` escapes.
//!
//! What is escaped, and why each class:
//! - C0 controls U+0000..U+001F except `\n` and `\t` (ESC starts every
//!   escape sequence; `\r` overwrites a line; BEL, BS and the rest move or
//!   sound), and DEL U+007F;
//! - C1 controls U+0080..U+009F: U+009B is a one-character CSI and U+009D an
//!   OSC in terminals that honour 8-bit controls;
//! - bidi embeddings, overrides and isolates U+202A..U+202E and
//!   U+2066..U+2069, and the bidi marks U+200E, U+200F, U+061C, which make
//!   text display in another order than it reads (the "Trojan Source"
//!   trick: `/out/notes\u{202e}dm.hs` shows as `/out/notessh.md`);
//! - invisible characters: zero-width space, joiners and word joiner
//!   (U+200B..U+200D, U+2060..U+2064, U+FEFF), the soft hyphen, the
//!   combining grapheme joiner, Hangul and Khmer fillers, Mongolian
//!   separators, line and paragraph separators (U+2028, U+2029), the
//!   deprecated format controls U+206A..U+206F, interlinear annotations,
//!   variation selectors (U+FE00..U+FE0F, U+E0100..U+E01EF) and tag
//!   characters (U+E0000..U+E007F): each makes two different strings look
//!   the same, or hides text a reader never sees.
//!
//! The set is [`HIDDEN`], one table: the web page of `longhand serve`
//! receives it from the server (`serve/page.rs` writes it into the page's
//! script), so what a person approves in the browser and in the terminal
//! is shown by the same rule.
//!
//! This module owns the rule; it must not decide what is foreign text: the
//! commands do, at each place they print.

use std::borrow::Cow;
use std::fmt::Write as _;

pub use longhand_hands::bound::{HIDDEN, is_hidden};

/// Whether `c` must not reach a terminal as itself (newline and tab may).
fn is_dangerous(c: char) -> bool {
    is_hidden(c)
}

/// `text` with every control character except newline and tab, and every
/// bidi override or isolate, shown as a visible escape: `\x1b` for C0 and
/// DEL, `\u{9b}` for C1 and bidi characters. Borrowed when nothing needed
/// escaping, which is nearly always.
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, is_dangerous)
}

/// Like [`printable`], and newlines are shown as `\n` too: for guest or
/// model text placed inside one line of output, where a newline would
/// start a line the CLI did not write.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || is_dangerous(c))
}

/// Serialized JSON with every character [`printable`] would escape written
/// as a JSON `\uXXXX` escape, so the text is still exact JSON for the same
/// value.
///
/// serde_json already escapes C0 controls inside strings, but writes DEL,
/// C1 controls and bidi characters as themselves. Outside strings JSON text
/// is ASCII punctuation, digits, literals and whitespace, so every character
/// replaced here sits inside a string, where `\uXXXX` means the same
/// character; one outside the Basic Multilingual Plane (tags, variation
/// selectors) is written as its UTF-16 surrogate pair, as JSON requires.
pub fn json_safe(json: &str) -> Cow<'_, str> {
    if !json
        .chars()
        .any(|c| c != '\n' && c != '\t' && is_dangerous(c))
    {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c != '\n' && c != '\t' && is_dangerous(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{:04x}", unit);
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `value` as compact JSON, made terminal-safe by [`json_safe`].
pub fn json_line<T: serde::Serialize + ?Sized>(value: &T) -> String {
    json_safe(&serde_json::to_string(value).unwrap_or_default()).into_owned()
}

/// Indented JSON is printed only while it is at most this many times the
/// compact form, plus [`PRETTY_SLACK`] bytes. Indentation grows with
/// depth, so a deeply nested value (`[[[[…]]]]`) would otherwise print
/// a hundred times its size (an 800 KB output as 103 MB); past the bound
/// the value is printed compact, which is the same JSON.
pub const PRETTY_FACTOR: usize = 3;

/// What any value may grow by when indented, whatever its size: small
/// values always print indented.
pub const PRETTY_SLACK: usize = 4096;

/// `value` as indented JSON when that stays within [`PRETTY_FACTOR`] times
/// its compact form (plus [`PRETTY_SLACK`]), else compact; made
/// terminal-safe by [`json_safe`]. The indented form is written into a
/// buffer that refuses to grow past the bound, so the explosion is never
/// built in memory either.
pub fn json_pretty<T: serde::Serialize + ?Sized>(value: &T) -> String {
    /// A buffer that fails a write past its limit.
    struct Capped {
        bytes: Vec<u8>,
        limit: usize,
    }
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.bytes.len() + buf.len() > self.limit {
                return Err(std::io::Error::other("over the pretty-printing bound"));
            }
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let compact = serde_json::to_string(value).unwrap_or_default();
    let mut pretty = Capped {
        bytes: Vec::new(),
        limit: compact
            .len()
            .saturating_mul(PRETTY_FACTOR)
            .saturating_add(PRETTY_SLACK),
    };
    let text = match serde_json::to_writer_pretty(&mut pretty, value) {
        // serde_json writes UTF-8.
        Ok(()) => String::from_utf8(pretty.bytes).unwrap_or(compact),
        Err(_) => compact,
    };
    json_safe(&text).into_owned()
}

fn escape(text: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !escaped(c) {
            out.push(c);
        } else if c == '\n' {
            out.push_str("\\n");
        } else if c <= '\u{7f}' {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character class from the module docs, as a hostile tool sends
    /// it: clear screen, window title, OSC 52 clipboard write, 8-bit CSI,
    /// bidi override, carriage return, DEL.
    const HOSTILE: &str =
        "a\u{1b}[2Jb\u{1b}]0;owned\u{7}c\u{1b}]52;c;aGk=\u{1b}\\d\u{9b}31me\u{202e}f\rg\u{7f}h";

    fn assert_harmless(text: &str) {
        for c in text.chars() {
            assert!(
                c == '\n' || c == '\t' || !(c.is_control() || is_dangerous(c)),
                "{c:?} survived in {text:?}"
            );
        }
    }

    #[test]
    fn printable_escapes_every_class_visibly() {
        let out = printable(HOSTILE);
        assert_harmless(&out);
        assert_eq!(
            out,
            "a\\x1b[2Jb\\x1b]0;owned\\x07c\\x1b]52;c;aGk=\\x1b\\d\\u{9b}31me\\u{202e}f\\x0dg\\x7fh"
        );
    }

    #[test]
    fn printable_keeps_newline_tab_and_ordinary_unicode() {
        let text = "line one\n\tline two: naïve — 日本語 🙂 \u{a0}nbsp \u{2009}thin";
        assert!(matches!(printable(text), Cow::Borrowed(_)));
        assert_eq!(printable(text), text);
    }

    #[test]
    fn every_escaped_character_is_in_the_table_and_the_table_is_sound() {
        // Sorted and disjoint, so the binary search is right.
        for pair in HIDDEN.windows(2) {
            assert!(pair[0].0 <= pair[0].1 && pair[0].1 < pair[1].0, "{pair:?}");
        }
        let mut buf = [0; 4];
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let in_table = HIDDEN
                .iter()
                .any(|&(lo, hi)| (lo..=hi).contains(&u32::from(c)));
            assert_eq!(is_hidden(c), in_table, "{c:?}");
            // Every control but newline and tab is in it.
            if c.is_control() && c != '\n' && c != '\t' {
                assert!(in_table, "{c:?}");
            }
            let text = c.encode_utf8(&mut buf);
            assert_eq!(matches!(printable(text), Cow::Owned(_)), in_table, "{c:?}");
        }
        // The classes the module docs name, each by a member.
        for c in [
            '\u{202a}',
            '\u{202e}',
            '\u{2066}',
            '\u{2069}',
            '\u{200e}',
            '\u{200f}',
            '\u{61c}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{2064}',
            '\u{feff}',
            '\u{ad}',
            '\u{34f}',
            '\u{115f}',
            '\u{3164}',
            '\u{180e}',
            '\u{2028}',
            '\u{2029}',
            '\u{206a}',
            '\u{fff9}',
            '\u{fe0f}',
            '\u{e0100}',
            '\u{e0041}',
            '\u{e007f}',
        ] {
            assert!(is_hidden(c), "{c:?}");
        }
        // Visible text stays itself: letters, marks that show, spaces that
        // show as space, symbols, emoji.
        for c in [
            'a', 'é', '\u{301}', '\u{a0}', '\u{2009}', '\u{3000}', '→', '日', '🙂', '\n', '\t',
        ] {
            assert!(!is_hidden(c), "{c:?}");
        }
    }

    #[test]
    fn json_safe_escapes_astral_hidden_characters_as_surrogate_pairs() {
        let value = serde_json::json!({"tag": "a\u{e0041}b\u{e0100}c"});
        let text = json_line(&value);
        assert!(text.contains("\\udb40\\udc41"), "{text}");
        assert!(!text.contains('\u{e0041}'), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn one_line_also_escapes_newlines() {
        let forged = "ok\nreceipt: 0.01 ms, fuel 1\u{1b}[2J";
        let out = one_line(forged);
        assert!(!out.contains('\n'), "{out}");
        assert_eq!(out, "ok\\nreceipt: 0.01 ms, fuel 1\\x1b[2J");
        assert_eq!(one_line("tab\tstays"), "tab\tstays");
    }

    #[test]
    fn json_safe_is_exact_json_without_raw_dangerous_characters() {
        let value = serde_json::json!({
            "text": HOSTILE,
            HOSTILE: [HOSTILE, 1, null, "plain"],
            "astral": "🙂",
        });
        for text in [json_line(&value), json_pretty(&value)] {
            assert_harmless(&text.replace(['\n', '\t'], " "));
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, value, "{text}");
        }
        // serde_json alone leaves C1 and bidi characters raw: the reason
        // json_safe exists.
        let raw = serde_json::to_string(&value).unwrap();
        assert!(raw.contains('\u{9b}') && raw.contains('\u{202e}'));
        assert!(json_line(&value).contains("\\u009b"));
        assert!(json_line(&value).contains("\\u202e"));
    }

    #[test]
    fn json_safe_borrows_clean_text() {
        let text = serde_json::to_string(&serde_json::json!({"a": "b\u{1b}"})).unwrap();
        assert!(matches!(json_safe(&text), Cow::Borrowed(_)));
    }
}
