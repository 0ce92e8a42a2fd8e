//! `longhand tool new` → `tool build` → `tool call` → `tool test`, per
//! language, through the binary, from a directory outside the repository.
//!
//! Rust builds offline from the crates cargo already has (the workspace uses
//! the same ones). Python and JavaScript need their pinned toolchains, which
//! `.ci/setup-componentize.sh` installs (a venv with componentize-py and the
//! SDK; a `node_modules` with componentize-js, componentize-qjs, esbuild and
//! the SDK) and names in `LONGHAND_PY_VENV` / `LONGHAND_JS_MODULES`; the
//! test links the project's `.venv` / `node_modules` to them, as `pip install`
//! / `npm install` would have made them. Without them each test says it was
//! skipped, unless `LONGHAND_REQUIRE_EXTERNAL=1`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use crate::support::{BIN, Ended, Home, Proc};

pub(crate) fn repo_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk")
}

/// `longhand <args>` in `dir`, with what a toolchain needs from the
/// environment (PATH, HOME, rustup's and cargo's homes) and nothing else.
pub(crate) fn longhand(home: &Home, dir: &Path, args: &[&str]) -> Ended {
    longhand_at(home.path(), dir, args)
}

/// [`longhand`] with the data directory `home` given as a path.
pub(crate) fn longhand_at(home: &Path, dir: &Path, args: &[&str]) -> Ended {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .env("LONGHAND_HOME", home)
        .env("CARGO_NET_OFFLINE", "true");
    for keep in [
        "PATH",
        "HOME",
        "RUSTUP_HOME",
        "CARGO_HOME",
        "RUSTUP_TOOLCHAIN",
    ] {
        if let Some(v) = std::env::var_os(keep) {
            cmd.env(keep, v);
        }
    }
    // One target dir for every run of the Rust template, so its
    // dependencies compile once per checkout.
    cmd.env(
        "CARGO_TARGET_DIR",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("author-rust-target"),
    );
    // A first build compiles the toolchain's dependencies (the Rust
    // template's serde, schemars and wit-bindgen, in release): minutes on
    // two busy cores, not the seconds a `longhand` command gets.
    Proc::spawn(cmd)
        .with_limit(Duration::from_secs(1200))
        .finish()
}

pub(crate) fn missing(what: &str) {
    let how = "run `eval \"$(bash .ci/setup-componentize.sh)\"` to install it";
    if std::env::var("LONGHAND_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
        panic!("{what} is missing and LONGHAND_REQUIRE_EXTERNAL=1: {how}");
    }
    eprintln!("skipped: {what} is missing; {how}");
}

/// new → build --json → call, and the build's report checked against the
/// file it names.
fn new_build_call(lang: &str, extra: &[&str], link: Option<(&str, PathBuf)>) {
    let home = Home::new();
    let outside = TempDir::new().unwrap();
    // Made inside another Cargo workspace's directory (as a tool made in a
    // repository's subfolder would be): the project still builds on its own.
    std::fs::write(
        outside.path().join("Cargo.toml"),
        "[workspace]\nmembers = []\n",
    )
    .unwrap();
    let sdk = repo_sdk();
    let mut args = vec![
        "tool",
        "new",
        "greet",
        "--lang",
        lang,
        "--sdk",
        sdk.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let made = longhand(&home, outside.path(), &args);
    made.expect_code(0);
    let project = outside.path().join("greet");
    assert!(project.join("longhand-tool.toml").is_file());
    if let Some((name, target)) = link {
        std::os::unix::fs::symlink(target, project.join(name)).unwrap();
    }

    let built = longhand(&home, &project, &["tool", "build", "--json"]);
    built.expect_code(0);
    let report: Value = serde_json::from_str(built.stdout.last().expect("a JSON line")).unwrap();
    let component = PathBuf::from(report["component"].as_str().unwrap());
    let bytes = std::fs::read(&component).unwrap();
    assert_eq!(report["size"], bytes.len() as u64);
    assert_eq!(
        report["digest"].as_str().unwrap(),
        format!(
            "sha256:{}",
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes))
        )
    );
    assert_eq!(report["tools"], serde_json::json!(["greet"]));
    // The same build from the project's parent, naming the directory.
    let from_outside = longhand(&home, outside.path(), &["tool", "build", "greet", "--json"]);
    from_outside.expect_code(0);
    let again: Value =
        serde_json::from_str(from_outside.stdout.last().expect("a JSON line")).unwrap();
    assert_eq!(again["component"], report["component"], "{again}");

    let call = longhand(
        &home,
        &project,
        &[
            "tool",
            "call",
            component.to_str().unwrap(),
            "greet",
            "--input",
            r#"{"name":"Ada"}"#,
        ],
    );
    call.expect_code(0);
    let out: Value = serde_json::from_str(&call.stdout_text()).unwrap();
    assert_eq!(out, serde_json::json!({"greeting": "Hello, Ada!"}));

    // The template's tool refuses an empty name as invalid input, a value
    // the model can act on, not a crash.
    let bad = longhand(
        &home,
        &project,
        &[
            "tool",
            "call",
            component.to_str().unwrap(),
            "greet",
            "--input",
            r#"{"name":" "}"#,
        ],
    );
    assert_ne!(bad.code, Some(0));
    assert!(bad.stderr.contains("`name` is empty"), "{}", bad.stderr);
    assert!(!bad.stderr.contains("crashed"), "{}", bad.stderr);

    // The template's fixtures (an output and an error) replay against the
    // component `build` made, found the way `build` found it.
    let tested = longhand(&home, &project, &["tool", "test"]);
    tested.expect_code(0);
    let stdout = tested.stdout_text();
    assert!(stdout.contains("ok    greet-ada"), "{stdout}");
    assert!(stdout.contains("ok    empty-name"), "{stdout}");
    assert!(stdout.contains("2 passed, 0 failed"), "{stdout}");
    // A fixture expecting another greeting fails, saying what differs.
    let ada = project.join("fixtures/greet-ada.json");
    let text = std::fs::read_to_string(&ada)
        .unwrap()
        .replace("Hello, Ada!", "Hi, Ada!");
    std::fs::write(&ada, text).unwrap();
    let failed = longhand(&home, &project, &["tool", "test"]);
    failed.expect_code(1);
    let stdout = failed.stdout_text();
    assert!(stdout.contains("FAIL  greet-ada"), "{stdout}");
    assert!(
        stdout.contains("-     \"greeting\": \"Hi, Ada!\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("+     \"greeting\": \"Hello, Ada!\""),
        "{stdout}"
    );
    assert!(stdout.contains("1 passed, 1 failed"), "{stdout}");
}

#[test]
fn a_rust_tool_goes_new_build_call() {
    new_build_call("rust", &[], None);
}

#[test]
fn a_python_tool_goes_new_build_call() {
    match std::env::var_os("LONGHAND_PY_VENV").map(PathBuf::from) {
        Some(venv) if venv.join("bin/componentize-py").is_file() => {
            new_build_call("python", &[], Some((".venv", venv)))
        }
        _ => missing("a venv with componentize-py and the Python SDK (LONGHAND_PY_VENV)"),
    }
}

fn js_modules() -> Option<PathBuf> {
    std::env::var_os("LONGHAND_JS_MODULES")
        .map(PathBuf::from)
        .filter(|m| m.join("esbuild/package.json").is_file())
}

#[test]
fn a_javascript_tool_goes_new_build_call_on_spidermonkey() {
    match js_modules() {
        Some(modules) => new_build_call("js", &[], Some(("node_modules", modules))),
        None => missing("node_modules with componentize-js and esbuild (LONGHAND_JS_MODULES)"),
    }
}

#[test]
fn a_javascript_tool_goes_new_build_call_on_quickjs() {
    match js_modules() {
        Some(modules) => new_build_call(
            "js",
            &["--engine", "quickjs"],
            Some(("node_modules", modules)),
        ),
        None => missing("node_modules with componentize-qjs and esbuild (LONGHAND_JS_MODULES)"),
    }
}

#[test]
fn a_missing_or_wrong_toolchain_is_a_clear_error_saying_how_to_install_it() {
    let home = Home::new();
    let outside = TempDir::new().unwrap();
    let sdk = repo_sdk();
    let sdk = sdk.to_str().unwrap();
    for (name, lang) in [("py", "python"), ("js", "js")] {
        longhand(
            &home,
            outside.path(),
            &["tool", "new", name, "--lang", lang, "--sdk", sdk],
        )
        .expect_code(0);
    }
    // Python: a componentize-py that is not the pinned version.
    let fake = outside.path().join("py/.venv/bin");
    std::fs::create_dir_all(&fake).unwrap();
    let script = fake.join("componentize-py");
    std::fs::write(&script, "#!/bin/sh\necho componentize-py 0.1.0\n").unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    let out = longhand(&home, &outside.path().join("py"), &["tool", "build"]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("pins componentize-py 0.25.1"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("pip install"), "{}", out.stderr);
    // JavaScript: nothing installed yet.
    let out = longhand(&home, &outside.path().join("js"), &["tool", "build"]);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("npm install"), "{}", out.stderr);
    // Not a project at all.
    let out = longhand(&home, outside.path(), &["tool", "build"]);
    assert!(
        out.stderr.contains("has no longhand-tool.toml"),
        "{}",
        out.stderr
    );
    assert!(!outside.path().join("py.wasm").exists());
}

/// The author's mistakes are the author's to fix, and say so with the
/// usage exit code (2), never the code for Longhand's own failures (4): a
/// project that already exists, a flag that does not apply, a compile
/// error. A compile error is shown as cargo printed it, without advice
/// about a target that is installed.
#[test]
fn an_authors_mistakes_exit_2_and_a_compile_error_carries_no_stray_advice() {
    let home = Home::new();
    let outside = TempDir::new().unwrap();
    let sdk = repo_sdk();
    let sdk = sdk.to_str().unwrap();
    let new = |name: &str, extra: &[&str]| {
        let mut args = vec!["tool", "new", name, "--lang", "rust", "--sdk", sdk];
        args.extend_from_slice(extra);
        longhand(&home, outside.path(), &args)
    };
    // A name of its own: the Rust template's target directory is shared
    // between tests, and cargo tells same-named path packages apart by
    // their place in the workspace, not their absolute path.
    new("mistake", &[]).expect_code(0);
    let again = new("mistake", &[]);
    again.expect_code(2);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    let engine = new("other", &["--engine", "quickjs"]);
    engine.expect_code(2);
    assert!(
        engine.stderr.contains("--engine is for --lang js only"),
        "{}",
        engine.stderr
    );

    let project = outside.path().join("mistake");
    let lib = project.join("src/lib.rs");
    let mut text = std::fs::read_to_string(&lib).unwrap();
    text.push_str("\nfn broken( {\n");
    std::fs::write(&lib, text).unwrap();
    let built = longhand(&home, &project, &["tool", "build"]);
    built.expect_code(2);
    assert!(built.stderr.contains("error"), "{}", built.stderr);
    assert!(
        built.stderr.contains("its errors are above"),
        "{}",
        built.stderr
    );
    assert!(
        !built.stderr.contains("rustup target add"),
        "advice about an installed target:\n{}",
        built.stderr
    );
}
