//! Finding the skills of a skills dir and reading each `SKILL.md` from
//! disk, held to the size limits before anything is parsed. The only file
//! of the skills that reads the file system; what a file means is
//! [`parse`](super::parse::parse)'s.

use std::io::Read as _;
use std::path::Path;

use super::parse::parse;
use super::types::{
    MAX_FRONT_MATTER, MAX_INSTRUCTIONS, MAX_SKILLS, MAX_TOTAL_INSTRUCTIONS, SKILL_FILE, Skill,
    SkillError,
};

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
