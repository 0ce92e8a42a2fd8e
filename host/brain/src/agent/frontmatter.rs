//! The front matter of a SKILL.md: a strict reader of a small YAML subset
//! (`key: value`, `key: [a, b]`, `- item` lists, one level of nested maps,
//! folded plain text), naming the line and the fix for every mistake.
//!
//! It reads structure only: which keys a skill has and what their values
//! mean is `skills::parse`'s. Errors are the caller's type, made by the
//! `err(line, message)` function it passes, so this reader imports nothing
//! from its caller. Why not a YAML crate: see `skills::parse`'s header.

/// A non-blank, non-comment front-matter line.
pub(super) struct Line<'a> {
    pub(super) no: usize,
    pub(super) indent: usize,
    pub(super) text: &'a str,
}

/// A scalar and the line it is on.
#[derive(Debug)]
pub(super) struct Scalar {
    pub(super) no: usize,
    pub(super) text: String,
}

/// A value in the front matter.
pub(super) enum Node {
    /// `key: value`.
    Scalar(Scalar),
    /// `key: [a, b]` or `- item` lines.
    List { no: usize, items: Vec<Scalar> },
    /// `key:` and indented `key: value` lines.
    Map {
        no: usize,
        entries: Vec<(Scalar, Node)>,
    },
    /// `key:` and indented plain lines, folded with spaces (a long
    /// description).
    Text(Scalar),
}

/// Parse `lines` (all indented by at least `indent`) as `key: value`
/// entries at exactly `indent`, with deeper lines as each key's block.
pub(super) fn parse_map<E, X>(
    lines: &[Line<'_>],
    indent: usize,
    err: &E,
) -> Result<Vec<(Scalar, Node)>, X>
where
    E: Fn(usize, String) -> X,
{
    let mut entries: Vec<(Scalar, Node)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        if line.indent != indent {
            return Err(err(
                line.no,
                format!(
                    "unexpected indentation: this line should start at column {}",
                    indent + 1
                ),
            ));
        }
        let Some((key, rest)) = split_key(line.text) else {
            return Err(err(
                line.no,
                "expected `key: value` (a value holding `: ` must be quoted)".to_owned(),
            ));
        };
        if let Some((first, _)) = entries.iter().find(|(k, _)| k.text == key) {
            return Err(err(
                line.no,
                format!("`{key}` appears twice (also line {}): keep one", first.no),
            ));
        }
        let end = lines[i + 1..]
            .iter()
            .position(|l| l.indent <= indent)
            .map_or(lines.len(), |p| i + 1 + p);
        let block = &lines[i + 1..end];
        let node = parse_value(key, rest, line.no, block, err)?;
        entries.push((
            Scalar {
                no: line.no,
                text: key.to_owned(),
            },
            node,
        ));
        i = end;
    }
    Ok(entries)
}

/// `key: rest` when `text` starts with a key (`[a-z_]+`) and `:`.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let (key, rest) = text.split_once(':')?;
    let is_key = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    (is_key && (rest.is_empty() || rest.starts_with(' '))).then(|| (key, rest.trim()))
}

fn parse_value<E, X>(
    key: &str,
    inline: &str,
    no: usize,
    block: &[Line<'_>],
    err: &E,
) -> Result<Node, X>
where
    E: Fn(usize, String) -> X,
{
    if !inline.is_empty() {
        if let Some(first) = block.first() {
            // A plain value may go on over indented lines (YAML folds
            // them); anything else under a value belongs to nothing.
            if inline.starts_with(['[', '"', '\'']) || first.text.starts_with("- ") {
                return Err(err(
                    first.no,
                    format!(
                        "`{key}` has its value on its line (line {no}): this indented line \
                         belongs to nothing"
                    ),
                ));
            }
            if split_key(first.text).is_some() {
                return Err(err(
                    first.no,
                    "unexpected indentation: start a key at the column of the key above it"
                        .to_owned(),
                ));
            }
            let mut text = unquote(inline, no, err)?;
            text.push(' ');
            text.push_str(&fold(key, block, err)?);
            return Ok(Node::Text(Scalar { no, text }));
        }
        if inline.starts_with('[') {
            return Ok(Node::List {
                no,
                items: flow_list(inline, no, err)?,
            });
        }
        return Ok(Node::Scalar(Scalar {
            no,
            text: unquote(inline, no, err)?,
        }));
    }
    let Some(first) = block.first() else {
        return Err(err(no, format!("`{key}` has no value")));
    };
    if first.text == "-" || first.text.starts_with("- ") {
        let mut items = Vec::with_capacity(block.len());
        for line in block {
            let item = match line.text.strip_prefix("- ") {
                Some(item) if line.indent == first.indent => item.trim(),
                _ => {
                    return Err(err(
                        line.no,
                        format!(
                            "expected `- item` at column {} (one item a line, no nesting)",
                            first.indent + 1
                        ),
                    ));
                }
            };
            items.push(Scalar {
                no: line.no,
                text: unquote(item, line.no, err)?,
            });
        }
        return Ok(Node::List { no, items });
    }
    if split_key(first.text).is_some() {
        return Ok(Node::Map {
            no,
            entries: parse_map(block, first.indent, err)?,
        });
    }
    let text = fold(key, block, err)?;
    Ok(Node::Text(Scalar { no, text }))
}

/// Plain lines joined with spaces, as YAML folds a multi-line plain value.
fn fold<E, X>(key: &str, block: &[Line<'_>], err: &E) -> Result<String, X>
where
    E: Fn(usize, String) -> X,
{
    let mut text = String::new();
    for line in block {
        // YAML folds plain lines only; a quote would start another value.
        if line.text.starts_with(['"', '\'']) {
            return Err(err(
                line.no,
                format!("`{key}` on several lines is plain text: drop the quotes"),
            ));
        }
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&unquote(line.text, line.no, err)?);
    }
    Ok(text)
}

/// The items of `[a, "b", 'c']`.
fn flow_list<E, X>(text: &str, no: usize, err: &E) -> Result<Vec<Scalar>, X>
where
    E: Fn(usize, String) -> X,
{
    let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) else {
        return Err(err(
            no,
            "a list written inline ends with `]` on the same line: [a, b]".to_owned(),
        ));
    };
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut items = Vec::new();
    let mut start = 0;
    // Split at commas outside quotes. A quote opens a quoted item only at
    // the item's start, as in YAML (`[it's, x]` is two plain items); `\"`
    // and `''` inside quotes do not close them.
    let mut quote = None;
    let mut chars = inner.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            (None, '"' | '\'') if inner[start..i].trim().is_empty() => quote = Some(c),
            (None, ',') => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            (Some('"'), '\\') => {
                chars.next();
            }
            (Some('\''), '\'') if chars.peek().is_some_and(|(_, n)| *n == '\'') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .map(|item| {
            let item = item.trim();
            if item.is_empty() {
                return Err(err(
                    no,
                    "an empty item in the list: remove the extra `,`".to_owned(),
                ));
            }
            Ok(Scalar {
                no,
                text: unquote(item, no, err)?,
            })
        })
        .collect()
}

/// A scalar's text: `"…"` (escapes `\"` and `\\`), `'…'` (`''` for `'`)
/// or plain. Plain text YAML would read otherwise is refused.
fn unquote<E, X>(text: &str, no: usize, err: &E) -> Result<String, X>
where
    E: Fn(usize, String) -> X,
{
    if let Some(rest) = text.strip_prefix('"') {
        let Some(inner) = rest.strip_suffix('"') else {
            return Err(err(no, "a `\"` quoted value must end with `\"`".to_owned()));
        };
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e @ ('"' | '\\')) => out.push(e),
                    _ => {
                        return Err(err(
                            no,
                            "only the escapes \\\" and \\\\ are understood in a quoted value"
                                .to_owned(),
                        ));
                    }
                },
                '"' => {
                    return Err(err(
                        no,
                        "write a `\"` inside a quoted value as \\\"".to_owned(),
                    ));
                }
                c => out.push(c),
            }
        }
        return Ok(out);
    }
    if let Some(rest) = text.strip_prefix('\'') {
        let Some(inner) = rest.strip_suffix('\'') else {
            return Err(err(no, "a `'` quoted value must end with `'`".to_owned()));
        };
        if inner.replace("''", "").contains('\'') {
            return Err(err(no, "write a `'` inside a '…' value as ''".to_owned()));
        }
        return Ok(inner.replace("''", "'"));
    }
    let first = text.chars().next().unwrap_or(' ');
    if "[]{}&*!|>%@`,?#".contains(first) || text == "-" || text.starts_with("- ") {
        return Err(err(
            no,
            format!(
                "quote this value (\"…\"): a leading `{first}` means something else in YAML, \
                 e.g. hosts: [\"*.example.com\"]"
            ),
        ));
    }
    if text.contains(": ") || text.contains(" #") || text.ends_with(':') {
        return Err(err(
            no,
            "quote this value (\"…\"): `: ` and ` #` mean something else in YAML".to_owned(),
        ));
    }
    Ok(text.to_owned())
}

pub(super) fn scalar<E, X>(node: Node, key: &str, err: &E) -> Result<Scalar, X>
where
    E: Fn(usize, String) -> X,
{
    match node {
        Node::Scalar(s) => Ok(s),
        Node::List { no, .. } | Node::Map { no, .. } | Node::Text(Scalar { no, .. }) => Err(err(
            no,
            format!("`{key}` takes one value on its line: {key}: …"),
        )),
    }
}
