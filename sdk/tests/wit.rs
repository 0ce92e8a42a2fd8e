//! The SDK's `wit/` is a copy of the workspace's canonical `wit/`, kept
//! inside the package because `cargo package` builds the crate from its own
//! tarball. This test fails when the copy drifts; fix it with
//! `cp -r wit/. sdk/wit/` from the workspace root (or remove what the
//! canonical tree dropped).
//!
//! Not shipped in the package (see `include` in Cargo.toml): outside the
//! workspace there is no canonical tree to compare with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every file under `root`, by path relative to it, with its bytes.
fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(dir) = todo.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let bytes = std::fs::read(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                let relative = path.strip_prefix(root).expect("under root").to_owned();
                out.insert(relative, bytes);
            }
        }
    }
    out
}

#[test]
fn sdk_wit_is_a_byte_equal_copy_of_the_canonical_wit() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("wit");
    let canonical = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let copy = files(&sdk);
    let source = files(&canonical);
    assert!(
        copy.contains_key(Path::new("tool.wit")),
        "sdk/wit has no tool.wit"
    );
    let mut drift = Vec::new();
    for (path, bytes) in &copy {
        match source.get(path) {
            None => drift.push(format!(
                "sdk/wit/{} is not in wit/ (remove it)",
                path.display()
            )),
            Some(canonical) if canonical != bytes => {
                drift.push(format!("sdk/wit/{} differs from wit/", path.display()))
            }
            Some(_) => {}
        }
    }
    for path in source.keys().filter(|p| !copy.contains_key(*p)) {
        drift.push(format!("wit/{} is missing from sdk/wit", path.display()));
    }
    assert!(
        drift.is_empty(),
        "the SDK's WIT drifted from the canonical WIT; run `cp -r wit/. sdk/wit/` \
         from the workspace root:\n{}",
        drift.join("\n")
    );
}
