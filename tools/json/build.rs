//! Splits the jq prelude (`src/prelude/*.jq`) into one snippet per
//! top-level definition, at build time, into `$OUT_DIR/snippets.rs`:
//!
//! * `SNIPPETS: [(name, source); N]` in prelude order (the order jaq loads
//!   them in), and
//! * `BY_NAME: [(name, index into SNIPPETS); N]` sorted by name, for a
//!   binary search.
//!
//! Done here rather than per call because every call is a fresh instance:
//! splitting the 8 KiB of text at run time cost ~0.2 M fuel on every query
//! that names anything at all. A top-level `def` starts a line; nested
//! definitions are indented and continuation lines start with a space, and
//! `src/prelude.rs` tests that the snippets parse to exactly jaq's own
//! definitions. Comment lines go with the definition before them.

use std::env;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The prelude files, in the order jaq loads them.
const SOURCES: [&str; 3] = ["core.jq", "std.jq", "json.jq"];

fn main() -> Result<(), String> {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let mut snippets: Vec<(String, String)> = Vec::new();
    for file in SOURCES {
        let path = manifest.join("src/prelude").join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        let source = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut starts: Vec<usize> = source
            .match_indices("\ndef ")
            .map(|(at, _)| at + 1)
            .collect();
        if source.starts_with("def ") {
            starts.insert(0, 0);
        }
        for (k, &start) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(source.len());
            let code = &source[start..end];
            let name = code["def ".len()..]
                .trim_start()
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '@'))
                .next()
                .unwrap_or_default();
            if name.is_empty() {
                return Err(format!("{file}: a `def` without a name: {code:?}"));
            }
            snippets.push((name.to_owned(), code.to_owned()));
        }
    }
    let mut by_name: Vec<(&str, usize)> = snippets
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (name.as_str(), i))
        .collect();
    // Stable: the indices of one name stay in prelude order.
    by_name.sort_by_key(|&(name, _)| name);

    let mut code = String::new();
    let n = snippets.len();
    // `{:?}` of a `str` is a valid Rust string literal.
    let _ = writeln!(code, "const SNIPPETS: [(&str, &str); {n}] = [");
    for (name, source) in &snippets {
        let _ = writeln!(code, "    ({name:?}, {source:?}),");
    }
    let _ = writeln!(code, "];\nconst BY_NAME: [(&str, usize); {n}] = [");
    for (name, i) in &by_name {
        let _ = writeln!(code, "    ({name:?}, {i}),");
    }
    let _ = writeln!(code, "];");
    let target = out.join("snippets.rs");
    std::fs::write(&target, code).map_err(|e| format!("cannot write {}: {e}", target.display()))
}
