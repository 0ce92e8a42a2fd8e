//! `longhand.lock`, beside `agent.toml`: for each `[[tools]]` component,
//! where it comes from, the registry manifest's digest, the component's
//! digest, who signed it, and what it asks for. `longhand run` pins every
//! component to the digest here (a different one is refused before it is
//! compiled); `longhand tool lock AGENT --locked` fails, naming what
//! changed, when the lock it would write differs from the one on disk.
//!
//! The lock is data about an agent, written and compared here; computing
//! an entry (loading a component, reading an install record, asking a
//! registry) is the CLI's, which has the agent file and the tool host.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::DistError;
use super::review::Asks;

/// The lock's file name, beside the agent file.
pub const FILE_NAME: &str = "longhand.lock";

/// The format version written; a lock of another version is refused.
const VERSION: u32 = 1;

/// Largest lock read, in bytes.
const MAX_LOCK_BYTES: u64 = 4 << 20;

/// A whole lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// Format version ([`VERSION`]).
    pub version: u32,
    /// One entry per `[[tools]]` component, in the agent file's order.
    #[serde(default, rename = "tool")]
    pub tools: Vec<Locked>,
}

/// One component's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locked {
    /// The component as `agent.toml` names it (a built-in, an installed
    /// name, a path).
    pub component: String,
    /// Where it comes from: `builtin`, a path, or the source it was
    /// installed from (`oci://…`, `https://…`).
    pub source: String,
    /// The registry manifest's digest, for `oci://` sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_digest: Option<String>,
    /// `sha256:…` of the component.
    pub digest: String,
    /// `ed25519:<hex>` of its trusted signer, when signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// Its imports (capability names) and requested capabilities.
    #[serde(flatten)]
    pub asks: Asks,
}

impl Lock {
    /// A lock of `tools`.
    pub fn new(tools: Vec<Locked>) -> Self {
        Self {
            version: VERSION,
            tools,
        }
    }

    /// The lock at `path`; `None` when there is none.
    pub fn read(path: &Path) -> Result<Option<Self>, DistError> {
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(DistError::io(format!("reading {}", path.display()))(e)),
        };
        if meta.len() > MAX_LOCK_BYTES {
            return Err(DistError::Usage(format!(
                "{} is {} bytes, over the {MAX_LOCK_BYTES}-byte limit of a lock",
                path.display(),
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(DistError::io(format!("reading {}", path.display())))?;
        let lock: Self = toml::from_str(&text).map_err(|e| {
            DistError::Usage(format!(
                "{} is not a lock ({e}); write it again with `longhand tool lock AGENT`",
                path.display()
            ))
        })?;
        if lock.version != VERSION {
            return Err(DistError::Usage(format!(
                "{} is lock version {}; this longhand reads version {VERSION}: write it again \
                 with `longhand tool lock AGENT`",
                path.display(),
                lock.version
            )));
        }
        Ok(Some(lock))
    }

    /// The lock as written to disk, with a header saying what it is.
    pub fn render(&self) -> Result<String, DistError> {
        let body = toml::to_string_pretty(self)
            .map_err(|e| DistError::Usage(format!("encoding the lock: {e}")))?;
        Ok(format!(
            "# {FILE_NAME}: written by `longhand tool lock`; `longhand run` refuses a component\n\
             # whose digest differs from the one here. Do not edit it by hand.\n\n{body}"
        ))
    }

    /// Write the lock to `path` (atomically).
    pub fn write(&self, path: &Path) -> Result<(), DistError> {
        super::store::write_atomic(path, self.render()?.as_bytes())
    }

    /// The entry of `component`.
    pub fn get(&self, component: &str) -> Option<&Locked> {
        self.tools.iter().find(|t| t.component == component)
    }

    /// What differs from `self` (on disk) to `new` (what would be
    /// written), one line per change, naming the component and the field.
    pub fn changes(&self, new: &Self) -> Vec<String> {
        let mut lines = Vec::new();
        for old in &self.tools {
            if new.get(&old.component).is_none() {
                lines.push(format!("{}: no longer in the agent file", old.component));
            }
        }
        for now in &new.tools {
            let Some(old) = self.get(&now.component) else {
                lines.push(format!("{}: not in the lock", now.component));
                continue;
            };
            let mut field = |name: &str, was: Option<&str>, is: Option<&str>| {
                if was != is {
                    lines.push(format!(
                        "{}: {name} {} -> {}",
                        now.component,
                        was.unwrap_or("(none)"),
                        is.unwrap_or("(none)")
                    ));
                }
            };
            field("source", Some(&old.source), Some(&now.source));
            field(
                "manifest digest",
                old.manifest_digest.as_deref(),
                now.manifest_digest.as_deref(),
            );
            field("digest", Some(&old.digest), Some(&now.digest));
            field("signer", old.signer.as_deref(), now.signer.as_deref());
            for line in old.asks.diff(&now.asks).lines() {
                lines.push(format!("{}: asks {line}", now.component));
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn entry(digest: &str, hosts: &[&str]) -> Locked {
        Locked {
            component: "greet".to_owned(),
            source: "oci://127.0.0.1:5000/greet:v1".to_owned(),
            manifest_digest: Some(A.to_owned()),
            digest: digest.to_owned(),
            signer: None,
            asks: Asks {
                imports: ["http".to_owned()].into(),
                hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
                ..Asks::default()
            },
        }
    }

    #[test]
    fn a_lock_reads_back_and_names_each_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let lock = Lock::new(vec![entry(A, &["a.example"])]);
        lock.write(&path).unwrap();
        assert_eq!(Lock::read(&path).unwrap(), Some(lock.clone()));
        assert!(lock.changes(&lock).is_empty());
        let moved = Lock::new(vec![entry(B, &["a.example", "b.example"])]);
        let changes = lock.changes(&moved);
        assert_eq!(
            changes,
            [
                format!("greet: digest {A} -> {B}"),
                "greet: asks + host b.example".to_owned()
            ]
        );
        assert_eq!(
            lock.changes(&Lock::new(Vec::new())),
            ["greet: no longer in the agent file"]
        );
        std::fs::write(&path, "version = 7\n").unwrap();
        assert!(
            Lock::read(&path)
                .unwrap_err()
                .to_string()
                .contains("version 7")
        );
    }
}
