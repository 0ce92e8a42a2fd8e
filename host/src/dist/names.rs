//! What a digest and an installed tool's name may look like: checked
//! wherever one is read from the outside.

/// `sha256:<64 lowercase hex>`, the only digest form accepted anywhere a
/// digest is read from the outside.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A name a tool may be installed under: 1-24 of `a-z`, `0-9` and `-`,
/// starting with a letter or digit. It becomes a file name and the prefix
/// the model sees (`NAME__TOOL`, at most 24 characters), so no `_`.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 24
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}
