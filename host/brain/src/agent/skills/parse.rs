//! Parsing a `SKILL.md`: the front matter's keys and their values, each
//! refusal naming the line and the fix. Pure: the text comes from
//! [`discover`](super::discover::discover) (or a test).
//!
//! The front matter is read by a small strict parser rather than a YAML
//! crate: the format has four keys, scalars and lists, and a strict parser
//! can name the line and the fix for every mistake, refuse unknown keys and
//! refuse the YAML features (anchors, tags, block scalars, flow maps) that
//! would make a file mean something else to another reader. What it
//! accepts is a subset of YAML that reads the same under a YAML parser.

use std::collections::BTreeSet;
use std::path::Path;

use super::types::{
    MAX_DESCRIPTION, MAX_FRONT_MATTER, MAX_INSTRUCTIONS, MAX_LIST, MAX_NAME, Skill, SkillDir,
    SkillError, SkillGrants,
};
use crate::agent::frontmatter::{Line, Node, Scalar, parse_map, scalar};
use crate::model::types::valid_tool_name;
use longhand_hands::{Access, HostPattern};

/// Parse the text of a SKILL.md (`path` names it in errors).
pub fn parse(path: &Path, text: &str) -> Result<Skill, SkillError> {
    let err = |line: usize, message: String| SkillError::Parse {
        path: path.to_owned(),
        line,
        message,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // Lines with their byte offset, to cut the body out of the text as is.
    let mut offset = 0;
    let mut lines = Vec::new();
    for raw in text.split_inclusive('\n') {
        lines.push((offset, raw.trim_end_matches(['\n', '\r'])));
        offset += raw.len();
    }
    if lines.first().map(|(_, l)| l.trim_end()) != Some("---") {
        return Err(err(
            1,
            "a SKILL.md begins with a `---` line, then the front matter (name, description, …), \
             then another `---` line"
                .to_owned(),
        ));
    }
    let Some(close) = lines
        .iter()
        .skip(1)
        .position(|(_, l)| l.trim_end() == "---")
        .map(|i| i + 1)
    else {
        return Err(err(
            1,
            "the front matter is not closed: add a `---` line after it".to_owned(),
        ));
    };
    let front_bytes = lines[close].0;
    if front_bytes > MAX_FRONT_MATTER {
        return Err(err(
            1,
            format!(
                "the front matter is larger than {MAX_FRONT_MATTER} bytes: shorten the description \
                 or the lists"
            ),
        ));
    }
    let body_start = lines
        .get(close + 1)
        .map_or(text.len(), |(offset, _)| *offset);
    let instructions = text[body_start..].trim().to_owned();
    if instructions.is_empty() {
        return Err(err(
            close + 1,
            "no instructions: write them in Markdown below the closing `---`".to_owned(),
        ));
    }
    if instructions.len() > MAX_INSTRUCTIONS {
        return Err(err(
            close + 2,
            format!(
                "the instructions are {} bytes, more than {MAX_INSTRUCTIONS}: shorten them or split \
                 the skill",
                instructions.len()
            ),
        ));
    }

    let mut front = Vec::new();
    for (i, (_, raw)) in lines.iter().enumerate().take(close).skip(1) {
        let no = i + 1;
        let trimmed = raw.trim_start_matches(' ');
        if trimmed.starts_with('\t') {
            return Err(err(no, "indent with spaces, not tabs".to_owned()));
        }
        let content = trimmed.trim_end();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        front.push(Line {
            no,
            indent: raw.len() - trimmed.len(),
            text: content,
        });
    }
    let top = parse_map(&front, 0, &err)?;

    let mut name = None;
    let mut description = None;
    let mut tools = Vec::new();
    let mut grants = SkillGrants::default();
    for (key, node) in top {
        match key.text.as_str() {
            "name" => name = Some(skill_name(scalar(node, "name", &err)?, &err)?),
            "description" => description = Some(skill_description(node, &err)?),
            "tools" => {
                tools = unique(list(node, "tools", &err)?, "tools", &err, |t| {
                    valid_tool_name(t).then_some(()).ok_or_else(|| {
                        format!(
                            "`{t}` is not a tool name: a tool is named as the model sees it, \
                             e.g. fs__read"
                        )
                    })
                })?;
            }
            "grants" => grants = skill_grants(node, &err)?,
            other => {
                return Err(err(
                    key.no,
                    format!(
                        "unknown key `{other}`: the keys are name, description, tools and grants"
                    ),
                ));
            }
        }
    }
    let name = name.ok_or_else(|| {
        err(
            1,
            "no `name`: add `name: <the directory's name>` to the front matter".to_owned(),
        )
    })?;
    let description = description.ok_or_else(|| {
        err(
            1,
            "no `description`: add `description: <when to use this skill>` to the front matter"
                .to_owned(),
        )
    })?;
    Ok(Skill {
        name,
        description,
        tools,
        grants,
        instructions,
    })
}

fn list<E>(node: Node, key: &str, err: &E) -> Result<Vec<Scalar>, SkillError>
where
    E: Fn(usize, String) -> SkillError,
{
    let (no, items) = match node {
        Node::List { no, items } => (no, items),
        Node::Scalar(Scalar { no, .. }) | Node::Map { no, .. } | Node::Text(Scalar { no, .. }) => {
            return Err(err(
                no,
                format!("`{key}` is a list: {key}: [a, b], or one `- item` a line below it"),
            ));
        }
    };
    if items.len() > MAX_LIST {
        return Err(err(
            no,
            format!("`{key}` has {} items, more than {MAX_LIST}", items.len()),
        ));
    }
    Ok(items)
}

/// The items' texts after `check`, refusing duplicates.
fn unique<E>(
    items: Vec<Scalar>,
    key: &str,
    err: &E,
    check: impl Fn(&str) -> Result<(), String>,
) -> Result<Vec<String>, SkillError>
where
    E: Fn(usize, String) -> SkillError,
{
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        check(&item.text).map_err(|m| err(item.no, m))?;
        if !seen.insert(item.text.clone()) {
            return Err(err(
                item.no,
                format!("`{}` is listed twice in `{key}`: keep one", item.text),
            ));
        }
        out.push(item.text);
    }
    Ok(out)
}

fn skill_name<E>(name: Scalar, err: &E) -> Result<String, SkillError>
where
    E: Fn(usize, String) -> SkillError,
{
    let ok = (1..=MAX_NAME).contains(&name.text.len())
        && name
            .text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok {
        return Err(err(
            name.no,
            format!(
                "`name` is 1 to {MAX_NAME} characters of a-z, 0-9 and `-` (like the directory): \
                 e.g. csv-report"
            ),
        ));
    }
    Ok(name.text)
}

fn skill_description<E>(node: Node, err: &E) -> Result<String, SkillError>
where
    E: Fn(usize, String) -> SkillError,
{
    let text = match node {
        Node::Scalar(s) | Node::Text(s) => s,
        Node::List { no, .. } | Node::Map { no, .. } => {
            return Err(err(
                no,
                "`description` is one paragraph of text, on its line or on indented lines below"
                    .to_owned(),
            ));
        }
    };
    if text.text.trim().is_empty() {
        return Err(err(
            text.no,
            "`description` is empty: say what the skill does and when to use it".to_owned(),
        ));
    }
    if text.text.len() > MAX_DESCRIPTION {
        return Err(err(
            text.no,
            format!(
                "`description` is {} bytes, more than {MAX_DESCRIPTION}: keep it to a short \
                 paragraph and put details in the instructions",
                text.text.len()
            ),
        ));
    }
    Ok(text.text)
}

fn skill_grants<E>(node: Node, err: &E) -> Result<SkillGrants, SkillError>
where
    E: Fn(usize, String) -> SkillError,
{
    let entries = match node {
        Node::Map { entries, .. } => entries,
        Node::Scalar(Scalar { no, .. }) | Node::List { no, .. } | Node::Text(Scalar { no, .. }) => {
            return Err(err(
                no,
                "`grants` holds indented `dirs:`, `hosts:`, `env:` and `secrets:` lists".to_owned(),
            ));
        }
    };
    let mut grants = SkillGrants::default();
    for (key, node) in entries {
        match key.text.as_str() {
            "dirs" => {
                let items = list(node, "dirs", err)?;
                let mut seen = BTreeSet::new();
                for item in items {
                    let dir = skill_dir(&item.text).map_err(|m| err(item.no, m))?;
                    if !seen.insert(dir.guest.clone()) {
                        return Err(err(
                            item.no,
                            format!("`{}` is listed twice in `dirs`: keep one", dir.guest),
                        ));
                    }
                    grants.dirs.push(dir);
                }
            }
            "hosts" => {
                let items = list(node, "hosts", err)?;
                let normalised = items
                    .into_iter()
                    .map(|item| {
                        HostPattern::parse(&item.text)
                            .map(|p| Scalar {
                                no: item.no,
                                text: p.to_string(),
                            })
                            .map_err(|e| err(item.no, e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                grants.hosts = unique(normalised, "hosts", err, |_| Ok(()))?;
            }
            "env" => grants.env = unique(list(node, "env", err)?, "env", err, env_name)?,
            "secrets" => {
                grants.secrets = unique(list(node, "secrets", err)?, "secrets", err, env_name)?;
            }
            other => {
                return Err(err(
                    key.no,
                    format!("unknown grant `{other}`: the grants are dirs, hosts, env and secrets"),
                ));
            }
        }
    }
    Ok(grants)
}

/// `GUEST_PATH[:ro|:rw]`, read-only without a suffix.
fn skill_dir(text: &str) -> Result<SkillDir, String> {
    let (guest, access) = match text.rsplit_once(':') {
        Some((guest, "ro")) => (guest, Access::ReadOnly),
        Some((guest, "rw")) => (guest, Access::ReadWrite),
        _ => (text, Access::ReadOnly),
    };
    let normal = guest == "/"
        || (guest.starts_with('/')
            && guest[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".."));
    if !normal {
        return Err(format!(
            "`{text}` is not a guest directory: write an absolute path without `.`, `..` or a \
             trailing `/`, then `:ro` or `:rw`, e.g. /data:ro"
        ));
    }
    Ok(SkillDir {
        guest: guest.to_owned(),
        access,
    })
}

fn env_name(name: &str) -> Result<(), String> {
    let mut bytes = name.bytes();
    let ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.len() <= 128;
    ok.then_some(()).ok_or_else(|| {
        format!("`{name}` is not a variable name: letters, digits and `_`, e.g. API_TOKEN")
    })
}
