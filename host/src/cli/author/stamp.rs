//! What a tool project's component was built from: the build stamp.
//!
//! `tool build` writes `.longhand/build.json` after each build: the digest
//! of every source file (by path beneath the project), the toolchain that
//! built it (the pinned versions `build` checked, the SDK's files, this
//! binary's version), and the component's path, digest, size and tools.
//!
//! It serves two things:
//!
//! - **Skipping an up-to-date build.** Python and JavaScript toolchains take
//!   tens of seconds and do not make the same bytes twice (componentize-py
//!   and ComponentizeJS snapshot an interpreter's memory after running it,
//!   and that memory holds random seeds and clock readings). When the
//!   sources and toolchain are those of the stamp and the component on disk
//!   still has the stamp's digest, `build` does nothing and reports the
//!   same component, so an unchanged project keeps its digest — and its
//!   fixtures' `recorded_with`, its pins and its lock. Rust builds are left
//!   to cargo, which already skips them.
//! - **Saying when a test runs against a stale component.** `tool test`
//!   compares the project's sources with the stamp and names what changed.
//!
//! Sources are every file beneath the project except what builds make or
//! install (`.longhand/`, `.venv/`, `node_modules/`, `target/`, `dist/`,
//! `__pycache__/`, `.git/`, what `pip install` writes beside a
//! `pyproject.toml`, the component itself), fixtures and Markdown:
//! those change no byte of the component. Files are compared by content,
//! never by time, so a checkout or a `touch` changes nothing.
//!
//! What this module must not do: decide how to build (that is
//! [`super::build`]), or trust the stamp over the component: a component
//! whose digest is not the stamp's is rebuilt.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Stamp format written and read here.
const FORMAT: u32 = 1;

/// Most source files a stamp keeps; a project with more is built every
/// time (and `tool test` says nothing about staleness).
const MAX_FILES: usize = 20_000;

/// Directories beneath a project that hold no source.
const SKIPPED_DIRS: &[&str] = &[
    ".longhand",
    ".venv",
    "node_modules",
    "target",
    "dist",
    "__pycache__",
    ".git",
    "fixtures",
];

/// What `build` made: the component, its digest, size and tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Built {
    pub(crate) component: PathBuf,
    pub(crate) digest: String,
    pub(crate) size: u64,
    pub(crate) tools: Vec<String>,
}

/// A build stamp (`.longhand/build.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    longhand_build: u32,
    /// `sha256:…` of each source file, by path beneath the project.
    pub(crate) sources: BTreeMap<String, String>,
    /// What built it: tool versions, the SDK's digest, longhand's version.
    pub(crate) toolchain: BTreeMap<String, String>,
    /// The component, its digest, size and tools.
    pub(crate) component: PathBuf,
    pub(crate) digest: String,
    pub(crate) size: u64,
    pub(crate) tools: Vec<String>,
}

fn path_of(dir: &Path) -> PathBuf {
    dir.join(".longhand/build.json")
}

fn hex_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The digest of the file at `path`, streamed.
pub(crate) fn file_digest(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

/// The digest of everything beneath `dir` that is a regular file (by
/// relative path and content), for a toolchain part such as the SDK.
pub(crate) fn tree_digest(dir: &Path) -> anyhow::Result<String> {
    let mut files = BTreeMap::new();
    walk(dir, dir, &["__pycache__"], &mut files)?;
    let text = serde_json::to_string(&files)?;
    Ok(hex_digest(text.as_bytes()))
}

/// The project's sources (see the module's comment), `None` past
/// [`MAX_FILES`]. `component` is left out.
pub(crate) fn sources(
    dir: &Path,
    component: &Path,
) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    let mut files = BTreeMap::new();
    walk(dir, dir, SKIPPED_DIRS, &mut files)?;
    if let Ok(rel) = component.strip_prefix(dir) {
        files.remove(&rel.to_string_lossy().into_owned());
    }
    files.retain(|path, _| !path.ends_with(".md"));
    Ok((files.len() <= MAX_FILES).then_some(files))
}

fn walk(
    root: &Path,
    dir: &Path,
    skipped: &[&str],
    out: &mut BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        if out.len() > MAX_FILES {
            return Ok(());
        }
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        let name = entry.file_name();
        if kind.is_dir() {
            // `pip install` of a package (the SDK a project carries) writes
            // `build/` and `*.egg-info/` beside its pyproject.toml.
            let pip_output = name.to_string_lossy().ends_with(".egg-info")
                || (name == "build" && dir.join("pyproject.toml").is_file());
            if !skipped.iter().any(|s| name == *s) && !pip_output {
                walk(root, &path, skipped, out)?;
            }
        } else if kind.is_file() {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let digest =
                file_digest(&path).with_context(|| format!("cannot read {}", path.display()))?;
            out.insert(rel.to_string_lossy().replace('\\', "/"), digest);
        }
    }
    Ok(())
}

impl Stamp {
    pub(crate) fn new(
        sources: BTreeMap<String, String>,
        toolchain: BTreeMap<String, String>,
        built: &Built,
    ) -> Self {
        Self {
            longhand_build: FORMAT,
            sources,
            toolchain,
            component: built.component.clone(),
            digest: built.digest.clone(),
            size: built.size,
            tools: built.tools.clone(),
        }
    }

    /// The stamp of the project in `dir`, if it has a readable one.
    pub(crate) fn read(dir: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(path_of(dir)).ok()?;
        serde_json::from_str::<Self>(&text)
            .ok()
            .filter(|s| s.longhand_build == FORMAT)
    }

    /// Write it (atomically). A stamp that cannot be written costs the
    /// next build its skip, nothing else: said, not failed.
    pub(crate) fn write(&self, dir: &Path) {
        let path = path_of(dir);
        let written = (|| -> anyhow::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let staging = path.with_extension(format!("json.{}.tmp", std::process::id()));
            std::fs::write(&staging, serde_json::to_string_pretty(self)? + "\n")?;
            std::fs::rename(&staging, &path)?;
            Ok(())
        })();
        if let Err(e) = written {
            eprintln!(
                "note: cannot write {} ({e:#}); the next build will not be skipped",
                path.display()
            );
        }
    }

    /// Whether the component on disk is still the one this stamp made.
    pub(crate) fn component_is_intact(&self) -> bool {
        std::fs::metadata(&self.component).is_ok_and(|m| m.len() == self.size)
            && file_digest(&self.component).is_ok_and(|d| d == self.digest)
    }

    /// The source files that differ from this stamp's (changed, added or
    /// removed), in path order.
    pub(crate) fn changed(&self, now: &BTreeMap<String, String>) -> Vec<String> {
        let mut out: Vec<String> = now
            .iter()
            .filter(|(path, digest)| self.sources.get(*path) != Some(*digest))
            .map(|(path, _)| path.clone())
            .collect();
        out.extend(
            self.sources
                .keys()
                .filter(|p| !now.contains_key(*p))
                .map(|p| format!("{p} (removed)")),
        );
        out.sort();
        out
    }
}

/// `tool test`'s warning when the component it is about to test was built
/// from other sources than the project holds now, or `None`.
pub(crate) fn staleness(dir: &Path, component: &Path) -> Option<String> {
    let dir = &dir.canonicalize().ok()?;
    let stamp = Stamp::read(dir)?;
    let same_file = component.canonicalize().ok()? == stamp.component.canonicalize().ok()?;
    if !same_file {
        return None;
    }
    if !stamp.component_is_intact() {
        return Some(format!(
            "{} is not the component `tool build` last made here; run `longhand tool build`",
            component.display()
        ));
    }
    let now = sources(dir, component).ok()??;
    let changed = stamp.changed(&now);
    if changed.is_empty() {
        return None;
    }
    let shown: Vec<&str> = changed.iter().take(5).map(String::as_str).collect();
    let more = changed.len().saturating_sub(shown.len());
    Some(format!(
        "{} was built before {}{} changed; this tests the old build (run `longhand tool build` \
         first)",
        component.display(),
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_compared_by_content_and_builds_outputs_are_not_sources() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("app.py"), "x = 1\n").unwrap();
        std::fs::write(dir.join("README.md"), "docs").unwrap();
        std::fs::create_dir_all(dir.join(".venv/lib")).unwrap();
        std::fs::write(dir.join(".venv/lib/big.py"), "installed").unwrap();
        std::fs::create_dir_all(dir.join("fixtures")).unwrap();
        std::fs::write(dir.join("fixtures/a.json"), "{}").unwrap();
        std::fs::write(dir.join("t.wasm"), "component").unwrap();
        let first = sources(dir, &dir.join("t.wasm")).unwrap().unwrap();
        assert_eq!(first.keys().collect::<Vec<_>>(), ["app.py"]);

        let built = Built {
            component: dir.join("t.wasm"),
            digest: file_digest(&dir.join("t.wasm")).unwrap(),
            size: 9,
            tools: vec!["greet".into()],
        };
        let stamp = Stamp::new(first.clone(), BTreeMap::new(), &built);
        stamp.write(dir);
        assert_eq!(Stamp::read(dir).as_ref(), Some(&stamp));
        assert!(stamp.component_is_intact());
        assert_eq!(staleness(dir, &dir.join("t.wasm")), None);

        // Rewritten with the same bytes: not a change.
        std::fs::write(dir.join("app.py"), "x = 1\n").unwrap();
        assert_eq!(staleness(dir, &dir.join("t.wasm")), None);
        std::fs::write(dir.join("app.py"), "x = 2\n").unwrap();
        std::fs::write(dir.join("util.py"), "").unwrap();
        let warning = staleness(dir, &dir.join("t.wasm")).unwrap();
        assert!(warning.contains("app.py, util.py changed"), "{warning}");
        std::fs::write(dir.join("t.wasm"), "other").unwrap();
        assert!(!stamp.component_is_intact());
    }
}
