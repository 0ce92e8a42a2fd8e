//! A search text, written by a model, turned into an FTS5 query that can
//! only mean "any of these words".
//!
//! FTS5 has a query language: `"` phrases, `*` prefixes, `^` anchors,
//! `col:` column filters, `NEAR(…)`, `AND`/`OR`/`NOT`, parentheses. Passed
//! raw, a model's text either fails to parse (an error for an ordinary
//! apostrophe) or means something it did not intend (a `text:` filter, a
//! `NOT` that empties the result). So the text is cut into words (runs of
//! letters and digits, the same characters the `unicode61` tokenizer keeps),
//! each word is quoted as a string, and the words are joined with `OR`:
//! bm25 then ranks entries that match more, and rarer, words first. A quoted
//! word holds only letters and digits, so it cannot close its quotes.

/// At most this many distinct words of a search text are used; the rest
/// are ignored. A long text (a paragraph pasted as a query) would otherwise
/// cost one index lookup per word and match nearly everything.
pub const MAX_TERMS: usize = 16;

/// A word longer than this many characters is cut to it: no real word is,
/// and a 100 kB "word" is an attack on the tokenizer, not a search.
const MAX_TERM_CHARS: usize = 64;

/// The FTS5 `MATCH` expression for `text`, or `None` when it holds no word
/// (empty, punctuation only): there is nothing to rank by.
pub fn fts_query(text: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let term: String = word.chars().take(MAX_TERM_CHARS).collect::<String>();
        let term = term.to_lowercase();
        if !terms.contains(&term) {
            terms.push(term);
            if terms.len() == MAX_TERMS {
                break;
            }
        }
    }
    if terms.is_empty() {
        return None;
    }
    let quoted: Vec<String> = terms.iter().map(|t| format!("\"{t}\"")).collect();
    Some(quoted.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_and_ored() {
        assert_eq!(
            fts_query("Deploy the API, then NOT rollback").as_deref(),
            Some(r#""deploy" OR "the" OR "api" OR "then" OR "not" OR "rollback""#)
        );
        assert_eq!(
            fts_query(r#"text:secret NEAR(a b) "x*"#).as_deref(),
            Some(r#""text" OR "secret" OR "near" OR "a" OR "b" OR "x""#)
        );
    }

    #[test]
    fn nothing_to_search_is_none() {
        for text in ["", "   ", "\"", "*", ") (", "-- ;", "\u{202e}"] {
            assert_eq!(fts_query(text), None, "{text:?}");
        }
    }

    #[test]
    fn terms_are_capped_deduplicated_and_cut() {
        let many: String = (0..100).map(|i| format!("w{i} ")).collect();
        let query = fts_query(&many).unwrap_or_default();
        assert_eq!(query.matches(" OR ").count(), MAX_TERMS - 1);
        assert_eq!(fts_query("a A a").as_deref(), Some(r#""a""#));
        let long = "x".repeat(10_000);
        let query = fts_query(&long).unwrap_or_default();
        assert_eq!(query.len(), MAX_TERM_CHARS + 2);
    }
}
