//! Longhand's SDKs, carried in the binary and written into each new project.
//!
//! A project `tool new` writes must build on a machine that has only the
//! `longhand` binary and the language's toolchain: no Longhand checkout, no
//! package registry holding the SDK. So the binary holds the SDK's files
//! (the Rust crate, the Python package, the JavaScript package) and `new`
//! writes the one the project needs under `vendor/`, where its manifest
//! names it by a relative path. The project then moves, builds and ships as
//! one directory, and installing its requirements writes only inside it.
//!
//! `--sdk PATH` (or `LONGHAND_SDK`) instead links a checkout's `sdk/` by
//! absolute path: for people changing the SDK itself.
//!
//! What this module must not do: drift from `sdk/`. The test below fails
//! when a file under `sdk/` that a tool needs is missing here or differs.

use super::config::Lang;

/// `(path beneath the SDK's folder, text)` for each file of a list, read
/// from the workspace's `sdk/` at compile time.
macro_rules! sdk_files {
    ($base:literal: $($path:literal),+ $(,)?) => {
        &[$((
            $path,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk/", $base, $path)),
        )),+]
    };
}

/// The Rust crate `longhand-sdk` (self-contained: its manifest reads no
/// workspace table), as `cargo package` would ship it.
const RUST: &[(&str, &str)] = sdk_files!("":
    "Cargo.toml",
    "README.md",
    "src/component.rs",
    "src/duration.rs",
    "src/error.rs",
    "src/export.rs",
    "src/host.rs",
    "src/http.rs",
    "src/lib.rs",
    "src/process.rs",
    "src/sql.rs",
    "src/tool.rs",
    "wit/tool.wit",
    "wit/deps/cli.wit",
    "wit/deps/clocks.wit",
    "wit/deps/filesystem.wit",
    "wit/deps/http.wit",
    "wit/deps/io.wit",
    "wit/deps/random.wit",
    "wit/deps/sockets.wit",
);

/// The Python package `longhand-tool` (import name `longhand_tool`).
const PYTHON: &[(&str, &str)] = sdk_files!("python/":
    "pyproject.toml",
    "README.md",
    "longhand_tool/__init__.py",
    "longhand_tool/_export.py",
    "longhand_tool/http.py",
    "longhand_tool/schema.py",
    "longhand_tool/py.typed",
);

/// The npm package `@longhand/tool`.
const JS: &[(&str, &str)] = sdk_files!("js/":
    "package.json",
    "README.md",
    "index.js",
    "index.d.ts",
    "host.js",
    "host-node.js",
    "host.d.ts",
);

/// Where a new project keeps its SDK, relative to the project: what its
/// manifest names.
pub(crate) fn vendor_path(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "vendor/longhand-sdk",
        Lang::Python | Lang::Js | Lang::Ts => "vendor/longhand-tool",
    }
}

/// The SDK files for `lang`, by path beneath [`vendor_path`].
pub(crate) fn files(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js | Lang::Ts => JS,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use super::*;

    /// Every file beneath `dir` except tests, build outputs and installs.
    fn on_disk(dir: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                let skipped = ["tests", "test", "build", "node_modules", "__pycache__"];
                if !skipped.contains(&name.as_str()) && !name.ends_with(".egg-info") {
                    on_disk(&path, &rel.join(&name), out);
                }
            } else {
                out.insert(rel.join(&name), std::fs::read_to_string(&path).unwrap());
            }
        }
    }

    /// The binary carries every file of each SDK a tool needs, as it is in
    /// `sdk/`: a file added there and not here fails, so does a stale copy.
    #[test]
    fn the_carried_sdks_are_the_workspace_sdks() {
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
        for (lang, base, leave_out) in [
            (Lang::Rust, sdk.clone(), &["python", "js"][..]),
            (Lang::Python, sdk.join("python"), &[][..]),
            (Lang::Js, sdk.join("js"), &["package-lock.json"][..]),
        ] {
            let mut disk = BTreeMap::new();
            on_disk(&base, Path::new(""), &mut disk);
            disk.retain(|path, _| {
                let first = path.components().next().unwrap().as_os_str();
                !leave_out.iter().any(|l| first == *l)
            });
            let carried: BTreeMap<PathBuf, String> = files(lang)
                .iter()
                .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
                .collect();
            assert_eq!(
                carried.keys().collect::<Vec<_>>(),
                disk.keys().collect::<Vec<_>>(),
                "{lang:?}: the files sdk.rs carries are not those under {}",
                base.display()
            );
            for (path, text) in &disk {
                assert!(
                    carried[path] == *text,
                    "{lang:?}: {} differs",
                    path.display()
                );
            }
        }
    }
}
