//! What a skill is, as discovered and frozen into a session: [`Skill`]
//! and what it needs of its agent ([`SkillGrants`], [`SkillDir`]), the
//! limits every skills dir is held to, and [`SkillError`]. Plain data, the
//! bottom of the skills: reading, parsing and checking sit on it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use longhand_hands::Access;

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
/// Most bytes of [`catalogue`](super::catalogue)'s text.
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
    /// Host patterns, normalised (see [`HostPattern`](longhand_hands::HostPattern)).
    /// Default none.
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
