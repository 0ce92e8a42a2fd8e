//! A sorted, depth-limited directory walk shared by `list`, `glob` and
//! `search`.
//!
//! Symbolic links are reported but never followed: following them could
//! leave the granted tree (the host would refuse, but only after the walk had
//! wandered) or loop. Entries are visited in name order so that every result,
//! and every truncation point, is the same from one call to the next.
//! A subdirectory that cannot be read is recorded and skipped rather than
//! failing the whole walk; the root failing is an error.

use std::fs;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use longhand_sdk::{IoResultExt, ToolError};
use serde::Serialize;

/// What an entry is, without following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    pub(crate) fn of(file_type: fs::FileType) -> Self {
        if file_type.is_symlink() {
            Self::Symlink
        } else if file_type.is_dir() {
            Self::Dir
        } else if file_type.is_file() {
            Self::File
        } else {
            Self::Other
        }
    }
}

/// One entry met on the walk.
pub(crate) struct Entry {
    /// Path relative to the walk's root, `/`-separated.
    pub(crate) rel: String,
    /// Full guest path.
    pub(crate) path: PathBuf,
    pub(crate) kind: Kind,
    /// Size in bytes, for files.
    pub(crate) size: Option<u64>,
}

/// How far and how wide to walk.
pub(crate) struct Options {
    /// 1 = the root's children only.
    pub(crate) max_depth: usize,
    /// Whether to enter and report names starting with `.`.
    pub(crate) hidden: bool,
}

/// Walks `root` depth-first in name order, calling `visit` for every entry
/// until it breaks. Returns the directories that could not be read, relative
/// to `root`.
pub(crate) fn walk(
    root: &Path,
    root_label: &str,
    options: &Options,
    visit: &mut dyn FnMut(&Entry) -> ControlFlow<()>,
) -> Result<Vec<String>, ToolError> {
    let children = read_sorted(root).for_resource(root_label)?;
    let mut walker = Walker {
        options,
        visit,
        unreadable: Vec::new(),
    };
    // A break only means the visitor has seen enough.
    let _ = walker.dir(root, "", children, 1);
    Ok(walker.unreadable)
}

struct Walker<'a> {
    options: &'a Options,
    visit: &'a mut dyn FnMut(&Entry) -> ControlFlow<()>,
    unreadable: Vec<String>,
}

impl Walker<'_> {
    fn dir(
        &mut self,
        dir: &Path,
        prefix: &str,
        children: Vec<fs::DirEntry>,
        depth: usize,
    ) -> ControlFlow<()> {
        for child in children {
            let name = child.file_name().to_string_lossy().into_owned();
            if !self.options.hidden && name.starts_with('.') {
                continue;
            }
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(file_type) = child.file_type() else {
                self.unreadable.push(rel);
                continue;
            };
            let kind = Kind::of(file_type);
            let size = match kind {
                Kind::File => child.metadata().ok().map(|m| m.len()),
                _ => None,
            };
            let entry = Entry {
                rel,
                path: dir.join(&name),
                kind,
                size,
            };
            (self.visit)(&entry)?;
            if kind == Kind::Dir && depth < self.options.max_depth {
                match read_sorted(&entry.path) {
                    Ok(grandchildren) => {
                        self.dir(&entry.path, &entry.rel, grandchildren, depth + 1)?;
                    }
                    Err(_) => self.unreadable.push(entry.rel),
                }
            }
        }
        ControlFlow::Continue(())
    }
}

fn read_sorted(dir: &Path) -> std::io::Result<Vec<fs::DirEntry>> {
    let mut entries = fs::read_dir(dir)?.collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(fs::DirEntry::file_name);
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;

    fn collect(root: &Path, max_depth: usize, hidden: bool) -> Vec<String> {
        let mut seen = Vec::new();
        walk(root, "root", &Options { max_depth, hidden }, &mut |e| {
            seen.push(e.rel.clone());
            ControlFlow::Continue(())
        })
        .unwrap();
        seen
    }

    #[test]
    fn walks_in_name_order_within_depth() {
        let s = Scratch::new();
        s.file("b.txt", "");
        s.file("a/z.rs", "");
        s.file("a/deep/x.rs", "");
        s.file(".git/config", "");
        assert_eq!(collect(s.path(), 1, false), ["a", "b.txt"]);
        assert_eq!(
            collect(s.path(), 2, false),
            ["a", "a/deep", "a/z.rs", "b.txt"]
        );
        assert_eq!(
            collect(s.path(), 9, true),
            [
                ".git",
                ".git/config",
                "a",
                "a/deep",
                "a/deep/x.rs",
                "a/z.rs",
                "b.txt"
            ]
        );
    }

    #[test]
    fn stops_when_visit_breaks() {
        let s = Scratch::new();
        for name in ["1", "2", "3"] {
            s.file(name, "");
        }
        let mut seen = 0;
        walk(
            s.path(),
            "root",
            &Options {
                max_depth: 1,
                hidden: false,
            },
            &mut |_| {
                seen += 1;
                if seen == 2 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        )
        .unwrap();
        assert_eq!(seen, 2);
    }

    #[test]
    fn missing_root_is_not_found() {
        let s = Scratch::new();
        let err = walk(
            &s.path().join("nope"),
            "/workspace/nope",
            &Options {
                max_depth: 1,
                hidden: false,
            },
            &mut |_| ControlFlow::Continue(()),
        )
        .unwrap_err();
        assert_eq!(err, ToolError::not_found("/workspace/nope"));
    }
}
