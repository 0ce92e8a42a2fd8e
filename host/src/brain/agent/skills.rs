//! Skills: instructions an agent loads on demand, one directory each in the
//! agent's skills dir.
//!
//! A skill is `<skills dir>/<name>/SKILL.md`: front matter between `---`
//! lines (`name`, `description`, optional `tools` and `grants`), then the
//! Markdown instructions. The model sees only the names and descriptions
//! ([`catalogue`]) and loads a skill's instructions with the host tool
//! `skill__load` ([`load_tool_def`], [`load`]).
//!
//! This module owns discovery, parsing, the check of a skill against its
//! agent (tools by name, grants by the one rule of
//! [`attenuation`](super::attenuation)) and the tool's answer. It does not touch the loop, the log or the agent file:
//! the loop discovers and checks the skills when it freezes the agent
//! ([`discover`], [`check_against`]) and keeps the [`Skill`] values,
//! instructions included, in the session's first event — a session keeps
//! the skills it started with whatever the directory holds later.
//!
//! A skill grants nothing. Its `tools` and `grants` say what it needs, and
//! [`check_against`] refuses a skill that needs more than the agent holds:
//! instructions written for a wider agent would only fail mid-task, so the
//! mismatch is a configuration error at start.
//!
//! The front matter is read by a small strict parser rather than a YAML
//! crate: the format has four keys, scalars and lists, and a strict parser
//! can name the line and the fix for every mistake, refuse unknown keys and
//! refuse the YAML features (anchors, tags, block scalars, flow maps) that
//! would make a file mean something else to another reader. What it
//! accepts is a subset of YAML that reads the same under a YAML parser.

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::attenuation::{self, Capabilities, DirCap, Refusal, SecretCap};
use super::frontmatter::{Line, Node, Scalar, parse_map, scalar};
pub use super::skill_tool::{catalogue, load, load_tool_def};
use crate::brain::model::types::valid_tool_name;
use crate::hands::{Access, GrantSpec, HostPattern};

/// The component name `skill__load` is recorded under.
pub const COMPONENT: &str = "skill";
/// `tool_started.component_digest` of the host tool: no binary ran.
pub const HOST_DIGEST: &str = "host:skill";
/// The host tool that loads a skill's instructions. Read-only.
pub const LOAD: &str = "skill__load";
/// The file a skill directory holds.
pub const SKILL_FILE: &str = "SKILL.md";

/// Longest skill name, in bytes (`[a-z0-9-]`).
pub const MAX_NAME: usize = 64;
/// Longest description, in bytes.
pub const MAX_DESCRIPTION: usize = 1024;
/// Longest instructions (the body after the front matter), in bytes.
pub const MAX_INSTRUCTIONS: usize = 64 * 1024;
/// Longest front matter, in bytes.
pub const MAX_FRONT_MATTER: usize = 8 * 1024;
/// Most instruction bytes of all skills together: what a session freezes.
pub const MAX_TOTAL_INSTRUCTIONS: usize = 256 * 1024;
/// Most skills in one skills dir.
pub const MAX_SKILLS: usize = 64;
/// Most items in one list of the front matter (`tools`, `dirs`, …).
pub const MAX_LIST: usize = 64;
/// Most bytes of [`catalogue`]'s text.
pub const MAX_CATALOGUE: usize = 8 * 1024;

/// One skill as discovered and frozen into a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Skill {
    /// `[a-z0-9-]`, 1 to 64 bytes; the name of its directory.
    pub name: String,
    /// One paragraph, at most 1024 bytes: what the model reads to choose.
    pub description: String,
    /// Tools the skill uses, as the model names them (`fs__read`).
    /// Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// What the skill needs of the agent's grants. Default nothing.
    #[serde(default, skip_serializing_if = "SkillGrants::is_empty")]
    pub grants: SkillGrants,
    /// The Markdown body, at most 64 KiB.
    pub instructions: String,
}

/// What a skill needs of the agent's grants (never a grant itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillGrants {
    /// Guest directories and the access needed. Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<SkillDir>,
    /// Host patterns, normalised (see [`HostPattern`]). Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Environment variable names. Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Secret names (the `ENV_VAR` of an agent's `ENV_VAR@HOST` secret).
    /// Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl SkillGrants {
    /// Whether the skill needs no grant at all.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
            && self.hosts.is_empty()
            && self.env.is_empty()
            && self.secrets.is_empty()
    }
}

/// A directory a skill needs: a guest path and the access to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillDir {
    /// Absolute, normalised guest path (`/data/in`).
    pub guest: String,
    /// Default read-only.
    #[serde(default)]
    pub access: Access,
}

/// What the agent holds, as [`check_against`] compares a skill to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentView {
    /// Tool names as the model sees them (`fs__read`, `memory__search`).
    pub tools: Vec<String>,
    /// Granted guest directories and their access.
    pub dirs: Vec<(String, Access)>,
    /// Allowed host patterns as written in agent.toml.
    pub hosts: Vec<String>,
    /// Environment variable names passed through.
    pub env: Vec<String>,
    /// Secret names: the `ENV_VAR` part of `ENV_VAR@HOST_PATTERN[:HEADER]`.
    pub secrets: Vec<String>,
}

impl AgentView {
    /// Add one tool component's grant (as `ToolConfig::grant_spec` gives
    /// it): the union over components is what the agent holds.
    pub fn add_grants(&mut self, spec: &GrantSpec) {
        self.dirs
            .extend(spec.dirs.iter().map(|d| (d.guest_path.clone(), d.access)));
        self.hosts.extend(spec.hosts.iter().cloned());
        self.env.extend(spec.env.iter().cloned());
        self.secrets.extend(spec.secrets.iter().map(|s| {
            s.split_once('@')
                .map_or(s.as_str(), |(name, _)| name)
                .to_owned()
        }));
    }
}

/// Why the skills could not be read. Every variant is a configuration
/// error: the caller refuses to start the session and shows the message to
/// the operator, who fixes the file it names.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// The directory or a file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// What was being read.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A SKILL.md is malformed at a line (1-based; the line of the opening
    /// `---` for what is missing).
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The SKILL.md.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong and what to do.
        message: String,
    },
    /// A skill directory or file is wrong as a whole (no SKILL.md, too
    /// large, a name that differs from its directory).
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
    /// More than [`MAX_SKILLS`] skills, or more than
    /// [`MAX_TOTAL_INSTRUCTIONS`] bytes of instructions in all.
    #[error("{}: {message}", dir.display())]
    TooMuch {
        /// The skills dir.
        dir: PathBuf,
        /// What is too large and what to do.
        message: String,
    },
}

/// Every skill of `dir`, sorted by name.
///
/// Each sub-directory must hold a valid `SKILL.md` whose `name` is the
/// directory's name; files and hidden entries (`.git`) beside the skill
/// directories are ignored. A `dir` that does not exist has no skills
/// (`Ok(vec![])`): the default `skills/` is optional, and a caller whose
/// operator named a dir explicitly checks that it exists.
pub fn discover(dir: &Path) -> Result<Vec<Skill>, SkillError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| SkillError::Io { path, source }
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(dir)(e)),
    };
    let mut skill_dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Follows symlinks: the skills dir is the operator's, like agent.toml.
        if !std::fs::metadata(&path).map_err(io(&path))?.is_dir() {
            continue;
        }
        skill_dirs.push(path);
        if skill_dirs.len() > MAX_SKILLS {
            return Err(SkillError::TooMuch {
                dir: dir.to_owned(),
                message: format!(
                    "more than {MAX_SKILLS} skill directories: remove some or split the agent"
                ),
            });
        }
    }
    skill_dirs.sort();
    let mut skills = Vec::with_capacity(skill_dirs.len());
    let mut total = 0;
    for skill_dir in skill_dirs {
        let skill = read_skill(&skill_dir)?;
        total += skill.instructions.len();
        skills.push(skill);
    }
    if total > MAX_TOTAL_INSTRUCTIONS {
        return Err(SkillError::TooMuch {
            dir: dir.to_owned(),
            message: format!(
                "the skills' instructions total {total} bytes, more than the {MAX_TOTAL_INSTRUCTIONS} \
                 a session keeps: shorten or remove skills"
            ),
        });
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(skills)
}

/// Read and parse `<dir>/SKILL.md`; its name must be the directory's.
fn read_skill(dir: &Path) -> Result<Skill, SkillError> {
    let path = dir.join(SKILL_FILE);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SkillError::Invalid {
                path: dir.to_owned(),
                message: format!(
                    "no {SKILL_FILE} in this skill directory: add one or remove the directory"
                ),
            });
        }
        Err(source) => return Err(SkillError::Io { path, source }),
    };
    // Read one byte past the limit to tell "at the limit" from "over it"
    // without trusting the file's reported size.
    let limit = MAX_FRONT_MATTER + MAX_INSTRUCTIONS + 64;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| SkillError::Io {
            path: path.clone(),
            source,
        })?;
    if bytes.len() > limit {
        return Err(SkillError::Invalid {
            path,
            message: format!(
                "larger than {limit} bytes: keep the instructions under {MAX_INSTRUCTIONS} bytes"
            ),
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| SkillError::Invalid {
        path: path.clone(),
        message: format!("not UTF-8 ({e}): save it as UTF-8"),
    })?;
    let skill = parse(&path, &text)?;
    let dir_name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    if dir_name.as_deref() != Some(skill.name.as_str()) {
        return Err(SkillError::Invalid {
            path,
            message: format!(
                "the skill is named `{}` but its directory is `{}`: rename one to match",
                skill.name,
                dir_name.unwrap_or_default()
            ),
        });
    }
    Ok(skill)
}

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

/// Whether `skill` needs no more than `agent` holds; otherwise one
/// sentence per thing it lacks.
///
/// Tools by name; grants by the one rule of [`attenuation::covers`]
/// (directories compared as guest paths, the only ones a skill names;
/// secrets by name).
pub fn check_against(skill: &Skill, agent: &AgentView) -> Result<(), Vec<String>> {
    let name = &skill.name;
    let mut refusals = Vec::new();
    for tool in &skill.tools {
        if !agent.tools.iter().any(|t| t == tool) {
            refusals.push(format!(
                "skill `{name}` uses tool `{tool}`, which this agent does not have: add it to \
                 the agent or drop it from the skill."
            ));
        }
    }
    let held = Capabilities {
        dirs: agent
            .dirs
            .iter()
            .map(|(guest, access)| guest_dir(guest, *access))
            .collect(),
        hosts: agent.hosts.clone(),
        env: agent.env.clone(),
        secrets: agent.secrets.iter().map(|s| secret_named(s)).collect(),
        budget: Default::default(),
    };
    let needed = Capabilities {
        dirs: skill
            .grants
            .dirs
            .iter()
            .map(|d| guest_dir(&d.guest, d.access))
            .collect(),
        hosts: skill.grants.hosts.clone(),
        env: skill.grants.env.clone(),
        secrets: skill
            .grants
            .secrets
            .iter()
            .map(|s| secret_named(s))
            .collect(),
        budget: Default::default(),
    };
    if let Err(lacking) = attenuation::covers(&held, &needed) {
        refusals.extend(lacking.into_iter().map(|r| refusal_text(name, r)));
    }
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(refusals)
    }
}

fn guest_dir(guest: &str, access: Access) -> DirCap {
    DirCap {
        path: guest.into(),
        shown: guest.to_owned(),
        access,
        symlinks: false,
    }
}

fn secret_named(name: &str) -> SecretCap {
    SecretCap {
        name: name.to_owned(),
        sent_to: None,
    }
}

/// A refusal as the operator reads it about skill `name`.
fn refusal_text(name: &str, refusal: Refusal) -> String {
    match refusal {
        Refusal::DirOutside { dir } => format!(
            "skill `{name}` needs directory {dir}, which is outside every directory granted to \
             this agent."
        ),
        Refusal::DirReadWrite { dir, granted } => format!(
            "skill `{name}` needs directory {dir} read-write, but this agent holds it read-only \
             (granted as {granted})."
        ),
        Refusal::Host { pattern } => {
            format!("skill `{name}` needs host {pattern}, which this agent may not reach.")
        }
        Refusal::Env { name: var } => format!(
            "skill `{name}` needs environment variable {var}, which this agent does not pass \
             through."
        ),
        Refusal::Secret { name: secret } => {
            format!("skill `{name}` needs secret {secret}, which this agent does not hold.")
        }
        // A skill names no symbolic links and no budget.
        other @ (Refusal::DirSymlinks { .. } | Refusal::Budget { .. }) => {
            format!("skill `{name}`: {other}.")
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::hands::DirSpec;

    const GOOD: &str = "---
name: csv-report
# A comment line.
description: Summarise a CSV file of the data directory into a Markdown
  report in the output directory.
tools: [fs__read, fs__write]
grants:
  dirs:
    - /data:ro
    - /out/reports:rw
  hosts: [\"*.example.com\", api.other.org:8443]
  env: [LANG]
  secrets:
    - API_TOKEN
---

# CSV report

1. Read the file with fs__read.
";

    fn parsed(text: &str) -> Result<Skill, SkillError> {
        parse(Path::new("skills/x/SKILL.md"), text)
    }

    /// The line and message of a parse error.
    fn parse_error(text: &str) -> (usize, String) {
        match parsed(text) {
            Err(SkillError::Parse { line, message, .. }) => (line, message),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    fn with_front(front: &str) -> String {
        format!("---\n{front}\n---\nDo the thing.\n")
    }

    #[test]
    fn a_good_skill_parses() {
        let skill = parsed(GOOD).unwrap();
        assert_eq!(skill.name, "csv-report");
        assert_eq!(
            skill.description,
            "Summarise a CSV file of the data directory into a Markdown report in the output \
             directory."
        );
        assert_eq!(skill.tools, ["fs__read", "fs__write"]);
        assert_eq!(
            skill.grants.dirs,
            [
                SkillDir {
                    guest: "/data".into(),
                    access: Access::ReadOnly
                },
                SkillDir {
                    guest: "/out/reports".into(),
                    access: Access::ReadWrite
                }
            ]
        );
        assert_eq!(skill.grants.hosts, ["*.example.com", "api.other.org:8443"]);
        assert_eq!(skill.grants.env, ["LANG"]);
        assert_eq!(skill.grants.secrets, ["API_TOKEN"]);
        assert_eq!(
            skill.instructions,
            "# CSV report\n\n1. Read the file with fs__read."
        );
        // The frozen form round-trips.
        let json = serde_json::to_value(&skill).unwrap();
        assert_eq!(serde_json::from_value::<Skill>(json).unwrap(), skill);
    }

    #[test]
    fn quoting_crlf_and_minimal_front_matter() {
        let skill = parsed(
            "\u{feff}---\r\nname: 'it-s'\r\ndescription: \"Say \\\"hi\\\": it's fine\"\r\n---\r\nBody\r\n",
        )
        .unwrap();
        assert_eq!(skill.name, "it-s");
        assert_eq!(skill.description, "Say \"hi\": it's fine");
        assert!(skill.tools.is_empty() && skill.grants.is_empty());
        assert_eq!(skill.instructions, "Body");
        let json = serde_json::to_value(&skill).unwrap();
        assert!(json.get("grants").is_none() && json.get("tools").is_none());
    }

    #[test]
    fn front_matter_errors_name_the_line_and_the_fix() {
        let cases: &[(&str, usize, &str)] = &[
            (
                "name: a\ndescription: d\ncolour: red",
                4,
                "unknown key `colour`",
            ),
            (
                "name: a\nname: b\ndescription: d",
                3,
                "appears twice (also line 2)",
            ),
            ("name: Big_Name\ndescription: d", 2, "a-z, 0-9"),
            (
                &format!("name: {}\ndescription: d", "a".repeat(65)),
                2,
                "1 to 64",
            ),
            ("description: d", 1, "no `name`"),
            ("name: a", 1, "no `description`"),
            (
                &format!("name: a\ndescription: {}", "x".repeat(1025)),
                3,
                "more than 1024",
            ),
            ("name: a\ndescription:\n  - x", 3, "one paragraph"),
            ("name: a\ndescription: d\ntools: fs__read", 4, "is a list"),
            (
                "name: a\ndescription: d\ntools: [fs.read]",
                4,
                "not a tool name",
            ),
            ("name: a\ndescription: d\ntools: [a, a]", 4, "listed twice"),
            ("name: a\ndescription: d\ntools: [a, ]", 4, "empty item"),
            ("name: a\ndescription: d\ntools: [a", 4, "ends with `]`"),
            (
                "name: a\ndescription: d\ngrants:\n  files: [/x]",
                5,
                "unknown grant `files`",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  dirs: [../x]",
                5,
                "not a guest directory",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  dirs:\n    - /x/\n",
                6,
                "trailing `/`",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  hosts: [*.x.com]",
                5,
                "quote this value",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  hosts: [\"http://x.com\"]",
                5,
                "not a URL",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  env: [1X]",
                5,
                "not a variable name",
            ),
            (
                "name: a\ndescription: d\ngrants: all",
                4,
                "indented `dirs:`",
            ),
            ("name: a\n\tdescription: d", 3, "not tabs"),
            ("name: a\n  description: d", 3, "unexpected indentation"),
            ("name: a\ndescription: d: e", 3, "quote this value"),
            ("name: a\ndescription: &anchor d", 3, "quote this value"),
            ("name: a\ndescription: \"open", 3, "must end with"),
            ("name: a\ndescription: d\ntools:", 4, "has no value"),
            (
                "name: a\ndescription: d\nnot a key",
                4,
                "expected `key: value`",
            ),
            (
                "name: a\ndescription: d\ntools: [a]\n  - b",
                5,
                "belongs to nothing",
            ),
        ];
        for (front, line, needle) in cases {
            let (got_line, message) = parse_error(&with_front(front));
            assert!(
                message.contains(needle),
                "{front:?}: `{message}` lacks `{needle}`"
            );
            assert_eq!(got_line, *line, "{front:?}: {message}");
        }
    }

    #[test]
    fn inline_lists_split_as_yaml_does() {
        let skill = needing(
            "grants:\n  env: [A, 'B']\n  dirs: [\"/a,b:rw\", '/it''s', \"/q\\\"x\", /its'x, /y]",
        );
        assert_eq!(skill.grants.env, ["A", "B"]);
        let dirs: Vec<&str> = skill.grants.dirs.iter().map(|d| d.guest.as_str()).collect();
        assert_eq!(dirs, ["/a,b", "/it's", "/q\"x", "/its'x", "/y"]);
        assert_eq!(skill.grants.dirs[0].access, Access::ReadWrite);
    }

    #[test]
    fn the_frame_and_the_body_are_checked() {
        assert!(
            parse_error("name: a\n---\nx")
                .1
                .contains("begins with a `---`")
        );
        assert!(
            parse_error("---\nname: a\ndescription: d\n")
                .1
                .contains("not closed")
        );
        let (line, message) = parse_error("---\nname: a\ndescription: d\n---\n\n  \n");
        assert_eq!(line, 4);
        assert!(message.contains("no instructions"), "{message}");
        let big = format!(
            "---\nname: a\ndescription: d\n---\n{}",
            "x".repeat(MAX_INSTRUCTIONS + 1)
        );
        assert!(parse_error(&big).1.contains("more than 65536"));
        let at_limit = format!(
            "---\nname: a\ndescription: d\n---\n{}",
            "x".repeat(MAX_INSTRUCTIONS)
        );
        assert!(parsed(&at_limit).is_ok());
    }

    fn write_skill(root: &Path, dir: &str, text: &str) {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        std::fs::write(root.join(dir).join(SKILL_FILE), text).unwrap();
    }

    fn skill_text(name: &str, body: &str) -> String {
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\n{body}\n")
    }

    #[test]
    fn discover_reads_every_skill_dir_sorted() {
        let root = tempfile::tempdir().unwrap();
        write_skill(root.path(), "zeta", &skill_text("zeta", "Z."));
        write_skill(root.path(), "alpha", &skill_text("alpha", "A."));
        std::fs::write(root.path().join("README.md"), "not a skill").unwrap();
        std::fs::create_dir(root.path().join(".git")).unwrap();
        let skills = discover(root.path()).unwrap();
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["alpha", "zeta"]);
        assert!(discover(&root.path().join("absent")).unwrap().is_empty());
    }

    #[test]
    fn the_fixture_skills_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/skills");
        let skills = discover(&dir).unwrap();
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["csv-report", "plain-notes"]);
        assert_eq!(skills[0].grants.dirs.len(), 2);
        assert!(skills[1].tools.is_empty() && skills[1].grants.is_empty());
    }

    #[test]
    fn discover_refuses_bad_directories() {
        let root = tempfile::tempdir().unwrap();
        write_skill(root.path(), "alpha", &skill_text("beta", "B."));
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(
            e.contains("named `beta` but its directory is `alpha`"),
            "{e}"
        );

        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("empty")).unwrap();
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(e.contains("no SKILL.md"), "{e}");

        let root = tempfile::tempdir().unwrap();
        write_skill(root.path(), "bad", "---\nname: bad\n---\nx\n");
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(e.contains("bad/SKILL.md:1: no `description`"), "{e}");

        // Five skills of 60 KiB each: more than a session keeps.
        let root = tempfile::tempdir().unwrap();
        for i in 0..5 {
            let name = format!("s{i}");
            write_skill(
                root.path(),
                &name,
                &skill_text(&name, &"x".repeat(60 * 1024)),
            );
        }
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(e.contains("more than the 262144"), "{e}");

        let root = tempfile::tempdir().unwrap();
        for i in 0..=MAX_SKILLS {
            std::fs::create_dir(root.path().join(format!("s{i}"))).unwrap();
        }
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(e.contains("more than 64 skill directories"), "{e}");
    }

    fn agent() -> AgentView {
        let mut view = AgentView {
            tools: vec!["fs__read".into(), "fs__write".into()],
            ..AgentView::default()
        };
        view.add_grants(&GrantSpec {
            digest: None,
            dirs: vec![
                DirSpec::parse("data:/data:ro", Path::new("/base")).unwrap(),
                DirSpec::parse("out:/out:rw", Path::new("/base")).unwrap(),
            ],
            hosts: vec!["*.example.com".into(), "api.other.org:8443".into()],
            env: vec!["LANG".into()],
            secrets: vec!["API_TOKEN@api.other.org:8443".into()],
            limits: Default::default(),
        });
        view
    }

    fn needing(front: &str) -> Skill {
        parsed(&with_front(&format!("name: s\ndescription: d\n{front}"))).unwrap()
    }

    #[test]
    fn a_skill_within_the_agent_is_accepted() {
        let skill = parsed(GOOD).unwrap();
        assert_eq!(check_against(&skill, &agent()), Ok(()));
        // Narrower than the grants: a sub-directory, ro under rw, a host
        // under the wildcard.
        let narrower = needing(
            "grants:\n  dirs: [/data/2024, /out/x:ro, /out/y:rw]\n  hosts: [a.b.example.com]",
        );
        assert_eq!(check_against(&narrower, &agent()), Ok(()));
    }

    #[test]
    fn a_skill_asking_for_more_is_refused_one_sentence_each() {
        let cases = [
            (
                "tools: [shell__run]",
                "uses tool `shell__run`, which this agent does not have",
            ),
            (
                "grants:\n  dirs: [/]",
                "directory /, which is outside every directory",
            ),
            ("grants:\n  dirs: [/etc]", "outside every directory"),
            ("grants:\n  dirs: [/database]", "outside every directory"),
            (
                "grants:\n  dirs: [/data/x:rw]",
                "/data/x read-write, but this agent holds it read-only",
            ),
            (
                "grants:\n  hosts: [other.com]",
                "host other.com, which this agent may not reach",
            ),
            ("grants:\n  hosts: [\"*\"]", "host *,"),
            ("grants:\n  hosts: [example.com]", "host example.com,"),
            ("grants:\n  hosts: [\"*.com\"]", "host *.com,"),
            ("grants:\n  hosts: [api.other.org]", "host api.other.org,"),
            (
                "grants:\n  hosts: [a.example.com:22]",
                "host a.example.com:22,",
            ),
            ("grants:\n  hosts: [\"10.0.0.1:443\"]", "host 10.0.0.1:443,"),
            ("grants:\n  env: [HOME]", "environment variable HOME"),
            (
                "grants:\n  secrets: [OTHER_TOKEN]",
                "secret OTHER_TOKEN, which this agent does not hold",
            ),
        ];
        for (front, needle) in cases {
            let refusals = check_against(&needing(front), &agent()).unwrap_err();
            assert_eq!(refusals.len(), 1, "{front}: {refusals:?}");
            assert!(refusals[0].contains(needle), "{front}: {refusals:?}");
        }
        let all = needing(
            "tools: [x__y]\ngrants:\n  dirs: [/etc:rw]\n  hosts: [x.org]\n  env: [A]\n  secrets: [B]",
        );
        assert_eq!(check_against(&all, &agent()).unwrap_err().len(), 5);
    }

    #[test]
    fn literal_addresses_need_a_literal_grant() {
        let view = AgentView {
            hosts: vec!["*".into(), "127.0.0.1:9000".into(), "[::1]:9000".into()],
            ..AgentView::default()
        };
        let ok = needing("grants:\n  hosts: [\"127.0.0.1:9000\", \"[::1]:9000\", \"*.any.org\"]");
        assert_eq!(check_against(&ok, &view), Ok(()));
        let loopback = needing("grants:\n  hosts: [\"127.0.0.1:9001\", localhost]");
        assert_eq!(check_against(&loopback, &view).unwrap_err().len(), 2);
    }

    fn many(count: usize, description: &str) -> Vec<Skill> {
        (0..count)
            .map(|i| Skill {
                name: format!("skill-{i:02}"),
                description: description.to_owned(),
                tools: Vec::new(),
                grants: SkillGrants::default(),
                instructions: "x".into(),
            })
            .collect()
    }

    #[test]
    fn the_catalogue_is_bounded() {
        assert_eq!(catalogue(&[]), "");
        let few = many(2, "Does a thing.");
        let text = catalogue(&few);
        assert!(text.contains("- skill-00: Does a thing.\n- skill-01: Does a thing.\n"));
        assert!(!text.contains("Also"));

        let long = "d".repeat(MAX_DESCRIPTION);
        let text = catalogue(&many(MAX_SKILLS, &long));
        assert!(text.len() <= MAX_CATALOGUE, "{}", text.len());
        assert!(text.contains("- skill-00: ddd"));
        assert!(text.contains("Also (load to read what they do): skill-07"));
        assert!(text.contains("skill-63"), "every name fits: {text}");

        // Names that do not fit are counted.
        let mut long_names = many(200, "d");
        for (i, s) in long_names.iter_mut().enumerate() {
            s.name = format!("{i:03}-{}", "n".repeat(60));
        }
        let text = catalogue(&long_names);
        assert!(text.len() <= MAX_CATALOGUE, "{}", text.len());
        assert!(text.trim_end().ends_with("more"), "{text}");
    }

    #[test]
    fn the_tool_lists_the_names() {
        let def = load_tool_def(&many(2, "d"));
        assert_eq!(def.name, LOAD);
        assert!(valid_tool_name(&def.name));
        assert_eq!(
            def.input_schema["properties"]["name"]["enum"],
            json!(["skill-00", "skill-01"])
        );
    }

    #[test]
    fn load_answers_known_unknown_and_hostile_input() {
        let skills = vec![parsed(GOOD).unwrap()];
        let ok = load(&skills, &json!({"name": "csv-report"})).unwrap();
        assert_eq!(ok["name"], "csv-report");
        assert_eq!(ok["tools"], json!(["fs__read", "fs__write"]));
        assert!(
            ok["instructions"]
                .as_str()
                .unwrap()
                .starts_with("# CSV report")
        );

        let kind = |v: Value| {
            let e = load(&skills, &v).unwrap_err();
            let message = e["error"]["message"].as_str().unwrap().to_owned();
            assert!(message.len() < 400, "{message}");
            (e["error"]["kind"].as_str().unwrap().to_owned(), message)
        };
        let (k, m) = kind(json!({"name": "nope"}));
        assert_eq!(k, "not-found");
        assert!(m.contains("`nope`") && m.contains("csv-report"), "{m}");
        let huge = "x".repeat(1 << 20);
        let (k, m) = kind(json!({ "name": huge }));
        assert_eq!(k, "not-found");
        assert!(m.contains('…'), "{m}");
        let (k, m) = kind(json!({ "name": "csv-report", huge.clone(): 1 }));
        assert_eq!(k, "invalid-input");
        assert!(m.contains("unknown field"), "{m}");
        for bad in [
            json!(null),
            json!("csv-report"),
            json!([1]),
            json!({}),
            json!({"name": 7}),
        ] {
            assert_eq!(kind(bad).0, "invalid-input");
        }
        // A multi-byte name is cut at a char boundary.
        let (_, m) = kind(json!({"name": "é".repeat(100)}));
        assert!(m.contains('…'));
    }
}
