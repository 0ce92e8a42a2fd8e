//! `longhand tool new NAME --lang rust|python|js|ts [--engine …]` and `longhand tool init`.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cli::usage;

use super::config::{self, BuildConfig, Engine, Lang};
use super::sdk;

/// The WIT every project gets: the contract its component targets.
pub(crate) const WIT: &[(&str, &str)] = &[
    ("wit/tool.wit", include_str!("../../../../wit/tool.wit")),
    (
        "wit/deps/cli.wit",
        include_str!("../../../../wit/deps/cli.wit"),
    ),
    (
        "wit/deps/clocks.wit",
        include_str!("../../../../wit/deps/clocks.wit"),
    ),
    (
        "wit/deps/filesystem.wit",
        include_str!("../../../../wit/deps/filesystem.wit"),
    ),
    (
        "wit/deps/http.wit",
        include_str!("../../../../wit/deps/http.wit"),
    ),
    (
        "wit/deps/io.wit",
        include_str!("../../../../wit/deps/io.wit"),
    ),
    (
        "wit/deps/random.wit",
        include_str!("../../../../wit/deps/random.wit"),
    ),
    (
        "wit/deps/sockets.wit",
        include_str!("../../../../wit/deps/sockets.wit"),
    ),
];

const RUST: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("templates/rust/Cargo.toml")),
    (
        "rust-toolchain.toml",
        include_str!("templates/rust/rust-toolchain.toml"),
    ),
    ("src/lib.rs", include_str!("templates/rust/src/lib.rs")),
    ("README.md", include_str!("templates/rust/README.md")),
];

const PYTHON: &[(&str, &str)] = &[
    ("app.py", include_str!("templates/python/app.py")),
    (
        "requirements.txt",
        include_str!("templates/python/requirements.txt"),
    ),
    (
        "tests/test_app.py",
        include_str!("templates/python/tests/test_app.py"),
    ),
    ("README.md", include_str!("templates/python/README.md")),
];

const JS: &[(&str, &str)] = &[
    ("package.json", include_str!("templates/js/package.json")),
    ("src/index.js", include_str!("templates/js/src/index.js")),
    (
        "test/greet.test.js",
        include_str!("templates/js/test/greet.test.js"),
    ),
    ("README.md", include_str!("templates/js/README.md")),
];

const TS: &[(&str, &str)] = &[
    ("package.json", include_str!("templates/ts/package.json")),
    ("tsconfig.json", include_str!("templates/ts/tsconfig.json")),
    ("src/index.ts", include_str!("templates/ts/src/index.ts")),
    (
        "test/greet.test.js",
        include_str!("templates/ts/test/greet.test.js"),
    ),
    ("README.md", include_str!("templates/ts/README.md")),
];

/// Every project's tool tests (`longhand tool test`): calls written down
/// as `longhand tool call --record` writes them, input and output only.
const FIXTURES: &[(&str, &str)] = &[
    (
        "fixtures/greet-ada.json",
        include_str!("templates/fixtures/greet-ada.json"),
    ),
    (
        "fixtures/empty-name.json",
        include_str!("templates/fixtures/empty-name.json"),
    ),
];

/// What builds and installs write: `pip install` of the carried SDK writes
/// `build/` and `*.egg-info/` beside its `pyproject.toml`.
const GITIGNORE: &str = "target/\n.venv/\nnode_modules/\ndist/\n.longhand/\n*.wasm\n__pycache__/\n\
                         /vendor/*/build/\n*.egg-info/\n";

/// A checkout's `sdk/` to link instead of carrying the SDK: `--sdk`, else
/// `LONGHAND_SDK`, else none (the project carries the SDK in `vendor/`).
fn linked_sdk(flag: Option<&Path>) -> anyhow::Result<Option<PathBuf>> {
    let Some(chosen) = flag
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("LONGHAND_SDK").map(PathBuf::from))
    else {
        return Ok(None);
    };
    let root = chosen.canonicalize().map_err(|_| {
        usage(format!(
            "cannot find Longhand's SDKs at {} (--sdk or LONGHAND_SDK): give the `sdk/` folder \
             of a Longhand checkout, or leave both out and the project carries the SDK",
            chosen.display()
        ))
    })?;
    if !root.join("Cargo.toml").is_file()
        || !root.join("python").is_dir()
        || !root.join("js").is_dir()
    {
        return Err(usage(format!(
            "{} is not Longhand's `sdk/` folder (it needs Cargo.toml, python/ and js/): pass \
             --sdk PATH to the `sdk/` folder of a Longhand checkout, or leave --sdk and \
             LONGHAND_SDK out and the project carries the SDK",
            root.display()
        )));
    }
    Ok(Some(root))
}

/// A template with its placeholders filled. Values are paths and pinned
/// versions; a path holding a quote or backslash would break the TOML, JSON
/// or requirements line it lands in, so such a path is refused up front.
fn fill(text: &str, vars: &[(&str, String)]) -> String {
    let mut out = text.to_owned();
    for (key, value) in vars {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    out
}

/// `longhand tool new`: write `./NAME/` (under `parent`) for `lang`.
pub(crate) fn new(
    parent: &Path,
    name: &str,
    lang: Lang,
    engine: Option<Engine>,
    sdk: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    let dir = parent.join(name);
    if config::check_name(name).is_ok() && dir.exists() {
        return Err(usage(format!(
            "{} already exists: pick another name or remove it (nothing was written), or run \
             `longhand tool init` in it",
            dir.display()
        )));
    }
    let files = project_files(name, lang, engine, sdk)?;
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    // Written into a sibling temporary directory and renamed into place, so
    // a failure half-way leaves no half-made project behind.
    let staging = parent.join(format!(".{name}.new-{}", std::process::id()));
    std::fs::create_dir(&staging)
        .with_context(|| format!("cannot write in {}", parent.display()))?;
    if let Err(e) = write_files(&staging, &files).and_then(|()| {
        std::fs::rename(&staging, &dir).with_context(|| format!("cannot create {}", dir.display()))
    }) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    Ok(dir)
}

/// What `tool init` did besides writing the project's files.
#[derive(Debug, Default)]
pub(crate) struct Initialized {
    /// The tool's name.
    pub(crate) name: String,
    /// Files that were there and were kept (a README).
    pub(crate) kept: Vec<String>,
    /// `.gitignore` lines added to an existing one.
    pub(crate) ignored: usize,
}

/// `longhand tool init`: make the existing directory `dir` a tool project
/// named `name` (default: the directory's name). Its README is kept and
/// its `.gitignore` gets the lines it lacks; any other file the project
/// would write that is already there stops it before anything is written.
pub(crate) fn init(
    dir: &Path,
    name: Option<&str>,
    lang: Lang,
    engine: Option<Engine>,
    sdk: Option<&Path>,
) -> anyhow::Result<Initialized> {
    if !dir.is_dir() {
        return Err(usage(format!(
            "{} is not a directory: `longhand tool init` works in an existing one (`tool new \
             NAME` makes one)",
            dir.display()
        )));
    }
    let name = match name {
        Some(name) => name.to_owned(),
        None => {
            let own = std::path::absolute(dir)
                .ok()
                .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_default();
            if config::check_name(&own).is_err() {
                return Err(usage(format!(
                    "the directory's name `{}` cannot name a tool (lowercase letters, digits, \
                     `-`, `_`): give one with --name",
                    crate::cli::term::one_line(&own)
                )));
            }
            own
        }
    };
    let files = project_files(&name, lang, engine, sdk)?;
    let mut done = Initialized {
        name,
        ..Initialized::default()
    };
    let mut taken = Vec::new();
    let mut write = Vec::new();
    for (path, text) in &files {
        let there = dir.join(path);
        if !there.exists() {
            write.push((path.as_str(), text.clone()));
        } else if path == "README.md" {
            done.kept.push(path.clone());
        } else if path == ".gitignore" {
            let old = std::fs::read_to_string(&there)
                .with_context(|| format!("cannot read {}", there.display()))?;
            let missing: Vec<&str> = text
                .lines()
                .filter(|l| !old.lines().any(|o| o.trim() == *l))
                .collect();
            done.ignored = missing.len();
            if !missing.is_empty() {
                let sep = if old.is_empty() || old.ends_with('\n') {
                    ""
                } else {
                    "\n"
                };
                write.push((path.as_str(), format!("{old}{sep}{}\n", missing.join("\n"))));
            }
        } else {
            taken.push(path.as_str());
        }
    }
    if !taken.is_empty() {
        let shown = taken.len().min(10);
        return Err(usage(format!(
            "{} already holds {} of the files a tool project has: {}{}; move them away or run \
             `longhand tool new NAME` elsewhere (nothing was written)",
            dir.display(),
            taken.len(),
            taken[..shown].join(", "),
            if taken.len() > shown { ", …" } else { "" }
        )));
    }
    let write: Vec<(&str, &str)> = write.iter().map(|(p, t)| (*p, t.as_str())).collect();
    write_files(dir, &write)?;
    Ok(done)
}

/// Every file of a new project named `name` in `lang`: path beneath the
/// project, text.
fn project_files(
    name: &str,
    lang: Lang,
    engine: Option<Engine>,
    sdk: Option<&Path>,
) -> anyhow::Result<Vec<(String, String)>> {
    config::check_name(name)?;
    if engine.is_some() && !lang.is_js() {
        return Err(usage("--engine is for --lang js or ts only"));
    }
    let engine = engine.unwrap_or(Engine::Spidermonkey);
    // The manifests name the SDK: the carried copy by a relative path, so
    // the project moves as one directory, or a linked checkout by its
    // absolute path.
    let linked = linked_sdk(sdk)?;
    let sdk_text = match &linked {
        None => match lang {
            Lang::Python => format!("./{}", sdk::vendor_path(lang)),
            Lang::Rust | Lang::Js | Lang::Ts => sdk::vendor_path(lang).to_owned(),
        },
        Some(root) => {
            let path = match lang {
                Lang::Rust => root.clone(),
                Lang::Python => root.join("python"),
                Lang::Js | Lang::Ts => root.join("js"),
            };
            let text = path.to_string_lossy().into_owned();
            if text.contains(['"', '\\', '\n']) {
                return Err(usage(format!(
                    "the SDK path {} holds a quote, backslash or newline, which the project's \
                     manifests cannot spell: move the checkout",
                    path.display()
                )));
            }
            text
        }
    };
    let (engine_package, engine_version) = engine.package();
    let vars = [
        ("name", name.to_owned()),
        ("crate", name.replace('-', "_")),
        ("sdk", sdk_text),
        (
            "sdk_note",
            match &linked {
                None => format!(
                    "`{}/` is the SDK, written by the `longhand` that made this project \
                     (version {}): the project builds from it alone, with no Longhand \
                     checkout. Keep it with the sources.",
                    sdk::vendor_path(lang),
                    env!("CARGO_PKG_VERSION")
                ),
                Some(root) => format!(
                    "The SDK is linked from the Longhand checkout at {} (`--sdk`).",
                    root.display()
                ),
            },
        ),
        ("componentize_py", config::COMPONENTIZE_PY.to_owned()),
        ("esbuild", config::ESBUILD.to_owned()),
        ("engine", engine.name().to_owned()),
        ("engine_package", engine_package.to_owned()),
        ("engine_version", engine_version.to_owned()),
        (
            "engine_note",
            if engine == Engine::Quickjs {
                "\n\nQuickJS cannot import wasi:http: this component targets the \
                 `offline-tool` world (no outbound requests), and handlers must be \
                 synchronous. Use `--engine spidermonkey` for `fetch` and async handlers."
                    .to_owned()
            } else {
                String::new()
            },
        ),
    ];
    let templates = match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
        Lang::Ts => TS,
    };
    let config_text = toml::to_string(&BuildConfig::for_new(name, lang, engine))?;
    let header = "# How `longhand tool build` makes this tool's component. The versions are \
                  pinned:\n# a component's bindings come from its toolchain.\n";
    let owned = |(path, text): &(&str, &str)| ((*path).to_owned(), (*text).to_owned());
    let mut all = vec![
        (config::FILE.to_owned(), format!("{header}{config_text}")),
        (".gitignore".to_owned(), GITIGNORE.to_owned()),
    ];
    all.extend(
        templates
            .iter()
            .map(|(path, text)| ((*path).to_owned(), fill(text, &vars))),
    );
    all.extend(WIT.iter().map(owned));
    all.extend(FIXTURES.iter().map(owned));
    if linked.is_none() {
        let vendor = sdk::vendor_path(lang);
        all.extend(
            sdk::files(lang)
                .iter()
                .map(|(path, text)| (format!("{vendor}/{path}"), (*text).to_owned())),
        );
    }
    Ok(all)
}

/// Write each `(path beneath dir, text)` of `files`, making directories.
pub(crate) fn write_files(dir: &Path, files: &[(&str, &str)]) -> anyhow::Result<()> {
    for (path, text) in files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&target, text)
            .with_context(|| format!("cannot write {}", target.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdk() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk")
    }

    #[test]
    fn each_language_gets_sources_wit_a_pinned_config_a_readme_and_a_test() {
        let parent = tempfile::TempDir::new().unwrap();
        for (name, lang, engine, test) in [
            ("g-rust", Lang::Rust, None, "src/lib.rs"),
            ("g-py", Lang::Python, None, "tests/test_app.py"),
            ("g-js", Lang::Js, None, "test/greet.test.js"),
            ("g-ts", Lang::Ts, None, "src/index.ts"),
            (
                "g-qjs",
                Lang::Js,
                Some(Engine::Quickjs),
                "test/greet.test.js",
            ),
        ] {
            let dir = new(parent.path(), name, lang, engine, Some(&sdk())).unwrap();
            for file in [
                config::FILE,
                "README.md",
                "wit/tool.wit",
                "wit/deps/http.wit",
                "fixtures/greet-ada.json",
                test,
            ] {
                assert!(dir.join(file).is_file(), "{name}: no {file}");
            }
            let config = BuildConfig::load(&dir).unwrap();
            assert_eq!((config.tool.name.as_str(), config.tool.lang), (name, lang));
            for (path, _) in RUST.iter().chain(PYTHON).chain(JS).chain(TS) {
                if let Ok(text) = std::fs::read_to_string(dir.join(path)) {
                    assert!(
                        !text.contains("{{"),
                        "{name}/{path} has an unfilled placeholder"
                    );
                }
            }
        }
        let qjs = std::fs::read_to_string(parent.path().join("g-qjs/package.json")).unwrap();
        assert!(qjs.contains("\"componentize-qjs\": \"0.4.5\""), "{qjs}");
        let py = std::fs::read_to_string(parent.path().join("g-py/requirements.txt")).unwrap();
        assert!(py.contains("componentize-py==0.25.1"), "{py}");
    }

    #[test]
    fn an_existing_directory_or_a_bad_name_is_refused_and_nothing_is_written() {
        let parent = tempfile::TempDir::new().unwrap();
        std::fs::create_dir(parent.path().join("taken")).unwrap();
        let err = new(parent.path(), "taken", Lang::Rust, None, Some(&sdk())).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        assert!(new(parent.path(), "Bad", Lang::Rust, None, Some(&sdk())).is_err());
        let err = new(
            parent.path(),
            "x",
            Lang::Rust,
            Some(Engine::Quickjs),
            Some(&sdk()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("--engine"), "{err}");
        let err = new(parent.path(), "y", Lang::Js, None, Some(parent.path())).unwrap_err();
        assert!(err.to_string().contains("--sdk"), "{err}");
        let left: Vec<_> = std::fs::read_dir(parent.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only `taken` is there: {left:?}");
    }

    /// Without --sdk the project carries its SDK in vendor/ and names it by
    /// a relative path: nothing in it points outside the project.
    #[test]
    fn a_new_project_carries_its_sdk_and_names_it_relatively() {
        if std::env::var_os("LONGHAND_SDK").is_some() {
            // The unlinked default is what this test is about; a developer
            // who links a checkout for every project still runs the rest.
            return;
        }
        let parent = tempfile::TempDir::new().unwrap();
        for (name, lang, manifest, line) in [
            (
                "c-rust",
                Lang::Rust,
                "Cargo.toml",
                "longhand-sdk = { path = \"vendor/longhand-sdk\" }",
            ),
            (
                "c-py",
                Lang::Python,
                "requirements.txt",
                "./vendor/longhand-tool",
            ),
            (
                "c-js",
                Lang::Js,
                "package.json",
                "\"@longhand/tool\": \"file:vendor/longhand-tool\"",
            ),
        ] {
            let dir = new(parent.path(), name, lang, None, None).unwrap();
            let text = std::fs::read_to_string(dir.join(manifest)).unwrap();
            assert!(text.contains(line), "{name}/{manifest}: {text}");
            for (path, body) in sdk::files(lang) {
                let written = dir.join(sdk::vendor_path(lang)).join(path);
                assert_eq!(
                    std::fs::read_to_string(&written).unwrap(),
                    *body,
                    "{name}/{path}"
                );
            }
            let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
            for file in [manifest, "README.md", config::FILE] {
                let text = std::fs::read_to_string(dir.join(file)).unwrap();
                assert!(
                    !text.contains(&*checkout.to_string_lossy()),
                    "{name}/{file} names the checkout: {text}"
                );
            }
        }
    }
}
