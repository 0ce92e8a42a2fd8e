//! Messages read as sentences: no string literal in the sources the
//! binary is built from breaks a line and carries the source's indentation
//! into what it says (issue 31: the price refusal printed runs of 14 spaces
//! inside its sentences, a literal continued across lines without `\`).
//!
//! The rule, over every non-raw string literal of `host/src`, the floor
//! crates (`host/brain/src`, `host/hands/src`, `host/session/src`), `sdk/src`
//! and `tools/*/src`: a line break inside the literal is either escaped
//! (`\` at the end of the line, which drops the next line's indentation) or
//! followed by no indentation. A text whose layout is meant — a TOML or
//! WIT sample — is written as a raw string (`r"…"`), which says so; SQL
//! statements (a literal whose first word is a SQL verb) keep their layout,
//! which SQL ignores and nobody reads as a message. Sources are tokenised
//! with `proc-macro2`, so comments and doc comments never count.
//!
//! The printed side of the same rule: `a_cost_limit_on_a_model_without_a_price_is_refused_at_start`
//! (turns.rs) reads the refusal's stderr for runs of spaces.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{TokenStream, TokenTree};

/// The first words of a SQL statement.
const SQL: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "WITH", "PRAGMA", "BEGIN", "ALTER", "DROP",
];

#[test]
fn no_message_carries_the_source_indentation() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<PathBuf> = [
        "host/src",
        "host/brain/src",
        "host/hands/src",
        "host/session/src",
        "sdk/src",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    for tool in std::fs::read_dir(root.join("tools")).expect("tools/") {
        let src = tool.expect("a tool").path().join("src");
        if src.is_dir() {
            dirs.push(src);
        }
    }
    let mut files = Vec::new();
    for dir in &dirs {
        rust_files(dir, &mut files);
    }
    assert!(files.len() > 100, "only {} files found", files.len());
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file");
        let tokens = TokenStream::from_str(&text)
            .unwrap_or_else(|e| panic!("{} does not tokenise: {e}", file.display()));
        literals(tokens, &mut |literal| {
            if let Some(line) = indented_break(literal) {
                found.push(format!("{}: {line:?}", file.display()));
            }
        });
    }
    assert!(
        found.is_empty(),
        "string literals that carry the source's indentation into their text \
         (end the line with `\\`, or write a meant layout as a raw string):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_rule_sees_an_indented_break_and_nothing_else() {
    let cases = [
        ("\"has no price, so\n              it cannot\"", true),
        ("\"has no price, so \\\n              it cannot\"", false),
        ("\"a list:\n- one\n- two\"", false),
        ("r\"[openai.\\\"m\\\"]\n  input = 0\"", false),
        ("\"SELECT seq\n   FROM events\"", false),
        ("\"  leading spaces are the message's own\"", false),
        ("\"an escaped \\\\\n  backslash, then a break\"", true),
    ];
    for (literal, defect) in cases {
        assert_eq!(indented_break(literal).is_some(), defect, "{literal}");
    }
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Calls `each` with the source text of every literal in `tokens`.
fn literals(tokens: TokenStream, each: &mut impl FnMut(&str)) {
    for tree in tokens {
        match tree {
            TokenTree::Group(group) => literals(group.stream(), each),
            TokenTree::Literal(literal) => each(&literal.to_string()),
            TokenTree::Ident(_) | TokenTree::Punct(_) => {}
        }
    }
}

/// The first line of `literal` (as written in the source) that follows an
/// unescaped line break and starts with a space or a tab, when `literal` is
/// a plain string literal that is not a SQL statement.
fn indented_break(literal: &str) -> Option<String> {
    let body = literal.strip_prefix('"')?;
    let first = body.split_whitespace().next().unwrap_or("");
    if SQL.iter().any(|verb| first.eq_ignore_ascii_case(verb)) {
        return None;
    }
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            // An escape: whatever follows is taken as written, a line
            // break included (the `\` continuation).
            '\\' => {
                chars.next();
            }
            '\n' if chars
                .peek()
                .is_some_and(|(_, next)| matches!(next, ' ' | '\t')) =>
            {
                let rest = &body[i + 1..];
                return Some(rest.lines().next().unwrap_or("").to_owned());
            }
            _ => {}
        }
    }
    None
}
