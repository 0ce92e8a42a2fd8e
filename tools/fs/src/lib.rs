//! `fs`: the built-in file tools — read, write, list, glob, search, edit, stat.
//!
//! Every path is a *guest* path. The operator maps host directories in at
//! guest paths (this component asks for `/workspace`); anything outside a
//! mapped directory simply does not exist for the tool, and trying to use it
//! comes back as `access-denied` naming the path. Relative paths are taken
//! relative to `/workspace`, because that is where a model expects them to
//! be: the WASI working directory is `/`, where nothing is mapped.
//!
//! This crate must not enforce the sandbox itself: the host's preopens do
//! that, and a second, weaker check here would only disagree with them. What
//! it owns is turning I/O outcomes into messages a model can act on, and
//! bounding what it returns (bytes, lines, entries, matches) so that one call
//! cannot flood a context window.

mod edit;
mod glob;
mod list;
mod read;
mod search;
mod stat;
mod walk;
mod write;

use std::path::PathBuf;

use longhand_sdk::ToolError;

/// The directory this component asks for, and where relative paths point.
pub(crate) const WORKSPACE: &str = "/workspace";

/// Resolves a path from the input: relative paths are under [`WORKSPACE`].
pub(crate) fn resolve(field: &str, path: &str) -> Result<PathBuf, ToolError> {
    if path.is_empty() {
        return Err(ToolError::invalid_input(format!("`{field}` is empty")));
    }
    if path.contains('\0') {
        return Err(ToolError::invalid_input(format!(
            "`{field}` contains a NUL character"
        )));
    }
    Ok(PathBuf::from(WORKSPACE).join(path))
}

/// Replace a file's contents so that a crash at any instant leaves either
/// the old contents or the new, never a truncated file: write a temporary
/// file beside it, sync it, and rename it over the target (rename within a
/// directory is atomic). The temporary name starts with `.` and carries a
/// random part (WASI has no process id), so concurrent calls do not share one.
pub(crate) fn replace_file(path: &std::path::Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    use std::hash::{BuildHasher as _, Hasher as _};
    let nonce = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let tmp = path.with_file_name(format!(".{name}.longhand-{nonce:016x}.tmp"));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Default for `root`-like fields: the workspace.
pub(crate) fn workspace() -> String {
    WORKSPACE.to_owned()
}

longhand_sdk::export! {
    name: "fs",
    description: "Read, write, list, find, search and edit files in the directories the operator maps in.",
    tools: [
        read::Read,
        write::Write,
        list::List,
        glob::Glob,
        search::Search,
        edit::Edit,
        stat::Stat,
    ],
    requests: {
        dirs: [("/workspace", read_write, "the files the agent works on")],
    },
}

#[cfg(test)]
pub(crate) mod testing {
    //! A scratch directory per test, removed on drop (no `tempfile`: the
    //! crate also builds for wasm32-wasip2, tests included).

    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    pub(crate) struct Scratch(PathBuf);

    impl Scratch {
        pub(crate) fn new() -> Self {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "longhand-tool-fs-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }

        /// Writes `content` at `rel`, creating parents.
        pub(crate) fn file(&self, rel: &str, content: &str) -> PathBuf {
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, content).unwrap();
            path
        }

        pub(crate) fn join(&self, rel: &str) -> String {
            self.0.join(rel).to_str().unwrap().to_owned()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_under_the_workspace() {
        assert_eq!(
            resolve("path", "src/main.rs").unwrap(),
            PathBuf::from("/workspace/src/main.rs")
        );
        assert_eq!(
            resolve("path", "/data/x").unwrap(),
            PathBuf::from("/data/x")
        );
        assert!(matches!(
            resolve("path", ""),
            Err(ToolError::InvalidInput(m)) if m == "`path` is empty"
        ));
    }
}
