//! The jq definitions a filter may call (`map`, `select`, `to_entries`, …),
//! loaded per filter: only those the filter can reach.
//!
//! jaq's own `jaq_core::defs()`, `jaq_std::defs()` and `jaq_json::defs()`
//! parse all ~130 definitions, and the compiler then compiles every one of
//! them. Every call runs in a fresh instance, so that work was paid on every
//! call: about 0.6 ms and 5 M fuel for `.`, which needs none of it. Here the
//! same definitions are kept as source text, split at build time
//! (`build.rs`) into one snippet per top-level `def`; a filter's names
//! decide which snippets are lexed and parsed, and only those reach the
//! compiler.
//!
//! Which names a filter "can reach" is over-approximated, never under: every
//! word and `@format` token of the filter (keywords, field names and
//! parameters included) is a name it may call, and so is every word of each
//! snippet taken, transitively. Every definition sharing a name with a wanted
//! one is taken, whatever its arity, and the taken ones keep their order, so
//! each call resolves to the same definition as with the whole prelude:
//! jaq resolves a call to the last earlier definition with its name and
//! arity, else to a native filter, and every definition that could match is
//! present. Native filters are filtered by the same names.
//!
//! `prelude/*.jq` are verbatim copies of the `defs.jq` files of the jaq
//! crates this crate is built with (jaq-core 3.1.2, jaq-std 3.0.4, jaq-json
//! 2.0.3; MIT licensed); a test checks that they parse to exactly the
//! definitions those crates return, so upgrading jaq without refreshing them
//! fails the tests instead of changing the language quietly.

use std::collections::BTreeSet;

use jaq_core::load::lex::{StrPart, Tok, Token};
use jaq_core::load::parse::Def;
use jaq_core::load::{Lexer, Parser};

// `SNIPPETS` (every top-level definition of `prelude/*.jq` as `(name,
// source)`, in prelude order) and `BY_NAME` (`(name, index)` sorted by
// name), split by `build.rs`.
include!(concat!(env!("OUT_DIR"), "/snippets.rs"));

/// The prelude definitions `filter` can reach, in prelude order, and every
/// name it may call (for filtering the native filters).
///
/// A filter that does not lex gets no definitions: the loader reports the
/// same lexer errors with or without a prelude.
pub(crate) fn reachable(filter: &str) -> (Vec<Def<&'static str>>, BTreeSet<&str>) {
    let mut names = BTreeSet::new();
    if let Ok(tokens) = Lexer::new(filter).lex() {
        words(&tokens, &mut names);
    }
    if names.is_empty() {
        return (Vec::new(), names);
    }
    // Lexed tokens of each snippet taken so far, by its index in SNIPPETS.
    let mut taken: Vec<Option<Vec<Token<&'static str>>>> = Vec::new();
    taken.resize_with(SNIPPETS.len(), || None);
    let mut queue: Vec<&str> = names.iter().copied().collect();
    while let Some(name) = queue.pop() {
        let first = BY_NAME.partition_point(|&(n, _)| n < name);
        for &(_, i) in BY_NAME[first..].iter().take_while(|&&(n, _)| n == name) {
            if taken[i].is_some() {
                continue;
            }
            // The snippets lex: the sources test checks every one of them.
            let tokens = Lexer::new(SNIPPETS[i].1).lex().unwrap_or_default();
            let mut found = BTreeSet::new();
            words(&tokens, &mut found);
            for word in found {
                if names.insert(word) {
                    queue.push(word);
                }
            }
            taken[i] = Some(tokens);
        }
    }
    let defs = taken
        .iter()
        .flatten()
        .flat_map(|tokens| Parser::new(tokens).parse(|p| p.defs()).unwrap_or_default())
        .collect();
    (defs, names)
}

/// Adds the words (`map`, `f`, `if`, `a::b`) and formats (`@base64`) of
/// `tokens`, inside blocks and string interpolations too, to `names`.
fn words<'s>(tokens: &[Token<&'s str>], names: &mut BTreeSet<&'s str>) {
    for Token(text, tok) in tokens {
        match tok {
            Tok::Word | Tok::Fmt => {
                names.insert(*text);
            }
            Tok::Block(inner) => words(inner, names),
            Tok::Str(parts) => {
                for part in parts {
                    if let StrPart::Term(term) = part {
                        words(std::slice::from_ref(term), names);
                    }
                }
            }
            Tok::Var | Tok::Num | Tok::Sym => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debug(defs: impl IntoIterator<Item = Def<&'static str>>) -> Vec<String> {
        defs.into_iter().map(|d| format!("{d:?}")).collect()
    }

    #[test]
    fn sources_are_jaqs_definitions_split_one_per_snippet() {
        let jaq = debug(
            jaq_core::defs()
                .chain(jaq_std::defs())
                .chain(jaq_json::defs()),
        );
        let mut ours = Vec::new();
        for (name, code) in SNIPPETS {
            let tokens = Lexer::new(code).lex().unwrap();
            let defs = Parser::new(&tokens).parse(|p| p.defs()).unwrap();
            assert_eq!(defs.len(), 1, "snippet {code:?} holds one definition");
            assert_eq!(defs[0].name, name, "the snippet's name is its definition's");
            ours.extend(debug(defs));
        }
        assert_eq!(ours, jaq, "prelude/*.jq must be jaq's defs.jq files");
    }

    fn names_of(defs: &[Def<&'static str>]) -> Vec<&'static str> {
        defs.iter().map(|d| d.name).collect()
    }

    #[test]
    fn takes_only_what_a_filter_reaches() {
        let (defs, names) = reachable(".");
        assert!(defs.is_empty() && names.is_empty());
        // `length` is native: no definition.
        let (defs, names) = reachable(".a[0] | length");
        assert!(defs.is_empty());
        assert!(names.contains("length"));
        // `select` calls `empty`; `map` nothing of the prelude.
        let (defs, _) = reachable("map(select(.n > 1))");
        assert_eq!(names_of(&defs), ["empty", "select", "map"]);
        // Every arity of a name, in prelude order; formats and names in
        // string interpolations count.
        let (defs, _) = reachable(r#"@base64 "\(range(3))""#);
        assert_eq!(
            names_of(&defs),
            ["tostring", "range", "range", "@base64"],
            "{defs:?}"
        );
    }

    #[test]
    fn a_filter_that_does_not_lex_takes_nothing() {
        let (defs, _) = reachable("map(. ");
        assert!(defs.is_empty());
    }
}
