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
    // No --sdk (and no LONGHAND_SDK: the environment is cleared): the
    // project carries the SDK the binary holds, as it does on a machine with
    // no Longhand checkout.
    let mut args = vec!["tool", "new", "greet", "--lang", lang];
    args.extend_from_slice(extra);
    let made = longhand(&home, outside.path(), &args);
    made.expect_code(0);
    let project = outside.path().join("greet");
    assert!(project.join("longhand-tool.toml").is_file());
    match link {
        // What `npm install` makes: the pinned toolchain (linked from the
        // one CI installed), and `@longhand/tool` a link to the `file:`
        // dependency package.json names, the SDK in vendor/.
        Some(("node_modules", modules)) => {
            let node_modules = project.join("node_modules");
            std::fs::create_dir(&node_modules).unwrap();
            for entry in std::fs::read_dir(&modules).unwrap() {
                let entry = entry.unwrap();
                if entry.file_name() != "@longhand" {
                    std::os::unix::fs::symlink(entry.path(), node_modules.join(entry.file_name()))
                        .unwrap();
                }
            }
            std::fs::create_dir(node_modules.join("@longhand")).unwrap();
            std::os::unix::fs::symlink(
                "../../vendor/longhand-tool",
                node_modules.join("@longhand/tool"),
            )
            .unwrap();
        }
        Some((name, target)) => std::os::unix::fs::symlink(target, project.join(name)).unwrap(),
        None => {}
    }
    // JavaScript and TypeScript: the documented host module (log,
    // progress) builds on both engines and reaches the receipt.
    if lang == "js" || lang == "ts" {
        let index = project.join(format!("src/index.{lang}"));
        let text = std::fs::read_to_string(&index).unwrap();
        let text = text
            .replacen(
                "import {",
                "import { log, progress } from '@longhand/tool/host';\nimport {",
                1,
            )
            .replacen(
                "    return {",
                "    log('info', `greeting ${name}`);\n    progress(1, 1, 'done');\n    return {",
                1,
            );
        assert!(text.contains("progress(1, 1"), "{text}");
        std::fs::write(&index, text).unwrap();
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
    // Nothing changed, so the same digest: Python and JavaScript toolchains
    // would make other bytes, so their build is skipped and says so; cargo
    // skips Rust's.
    assert_eq!(again["digest"], report["digest"], "{again}");
    assert_eq!(report["up_to_date"], false, "{report}");
    if lang != "rust" {
        assert_eq!(again["up_to_date"], true, "{again}");
        assert!(
            from_outside.stderr.contains("up to date"),
            "{}",
            from_outside.stderr
        );
    }

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
    if lang == "js" || lang == "ts" {
        assert!(
            call.stderr.contains("log    info greeting Ada"),
            "{}",
            call.stderr
        );
        assert!(call.stderr.contains("progress 1/1 done"), "{}", call.stderr);
        // And in plain Node, the project's own tests still run (`npm test`:
        // for TypeScript, esbuild strips the types first).
        let npm_test = Command::new("npm")
            .args(["test", "--silent"])
            .current_dir(&project)
            .output()
            .unwrap();
        assert!(
            npm_test.status.success(),
            "{}{}",
            String::from_utf8_lossy(&npm_test.stdout),
            String::from_utf8_lossy(&npm_test.stderr)
        );
    }

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

    // A source changed since the build: `tool test` says the component is
    // older than it, naming the file, and the next build is not skipped.
    let source = match lang {
        "rust" => "src/lib.rs",
        "python" => "app.py",
        "ts" => "src/index.ts",
        _ => "src/index.js",
    };
    let mut text = std::fs::read_to_string(project.join(source)).unwrap();
    text.push_str(
        "\n// changed\n"
            .replace("//", if lang == "python" { "#" } else { "//" })
            .as_str(),
    );
    std::fs::write(project.join(source), text).unwrap();
    let stale = longhand(&home, &project, &["tool", "test"]);
    assert!(
        stale
            .stderr
            .contains(&format!("was built before {source} changed")),
        "{}",
        stale.stderr
    );
    let rebuilt = longhand(&home, &project, &["tool", "build", "--json"]);
    rebuilt.expect_code(0);
    let rebuilt: Value = serde_json::from_str(rebuilt.stdout.last().expect("a JSON line")).unwrap();
    assert_eq!(rebuilt["up_to_date"], false, "{rebuilt}");
    let fresh = longhand(&home, &project, &["tool", "test"]);
    assert!(
        !fresh.stderr.contains("was built before"),
        "{}",
        fresh.stderr
    );
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

/// A Python project's own tests run against the SDK it carries, with
/// nothing but CPython: no venv, no index, no Longhand checkout (the SDK is
/// imported from vendor/, and from nowhere else).
#[test]
fn a_python_projects_tests_run_on_the_sdk_it_carries() {
    let home = Home::new();
    let outside = TempDir::new().unwrap();
    longhand(
        &home,
        outside.path(),
        &["tool", "new", "carried", "--lang", "python"],
    )
    .expect_code(0);
    let project = outside.path().join("carried");
    let requirements = std::fs::read_to_string(project.join("requirements.txt")).unwrap();
    assert!(
        requirements.lines().any(|l| l == "./vendor/longhand-tool"),
        "{requirements}"
    );
    let python = |args: &[&str]| {
        let out = Command::new("python3")
            .args(args)
            .current_dir(&project)
            .env("PYTHONPATH", "vendor/longhand-tool")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "python3 {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let found = python(&["-c", "import longhand_tool; print(longhand_tool.__file__)"]);
    assert!(
        Path::new(&found).starts_with("vendor/longhand-tool")
            || Path::new(&found).starts_with(&project),
        "longhand_tool came from {found}"
    );
    python(&["-m", "unittest", "discover", "-s", "tests"]);
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
fn a_typescript_tool_goes_new_build_call() {
    match js_modules() {
        Some(modules) => new_build_call("ts", &[], Some(("node_modules", modules))),
        None => missing("node_modules with componentize-js and esbuild (LONGHAND_JS_MODULES)"),
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
        engine
            .stderr
            .contains("--engine is for --lang js or ts only"),
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

/// A first load compiles the component for this machine, which takes
/// seconds: on a terminal the CLI says so while it lasts and how long it
/// took; piped, it prints nothing of it; cached, nothing at all.
#[test]
fn a_first_compile_shows_progress_on_a_terminal_and_nothing_when_piped() {
    // A home of its own: an empty compile cache.
    let home = TempDir::new().unwrap();
    let call = format!("{BIN} tool call sqlite schema --input '{{\"db\":\"none\"}}'");
    let on_terminal = |home: &Path| {
        let out = Command::new("script")
            .args(["-qec", &call, "/dev/null"])
            .env_clear()
            .env("LONGHAND_HOME", home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .expect("run script(1) (util-linux)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = on_terminal(home.path());
    if first.contains("no built-in") {
        return missing("the sqlite built-in (clang and wasi-libc: .ci/setup-wasm-c.sh)");
    }
    assert!(
        first.contains("compiling sqlite for this machine (once; later loads are cached)")
            && first.contains(": done in "),
        "{first}"
    );
    let cached = on_terminal(home.path());
    assert!(!cached.contains("compiling"), "{cached}");
    let piped = TempDir::new().unwrap();
    let out = longhand_at(
        piped.path(),
        piped.path(),
        &[
            "tool",
            "call",
            "sqlite",
            "schema",
            "--input",
            r#"{"db":"none"}"#,
        ],
    );
    assert!(!out.stderr.contains("compiling"), "{}", out.stderr);
}

/// `tool init` makes an existing directory a project around what is there:
/// its README is kept, its .gitignore gets what it lacks, and the project
/// builds and passes its fixtures. A directory already holding a file the
/// project would write is refused, naming it, and nothing is written.
#[test]
fn tool_init_makes_an_existing_directory_a_project_and_overwrites_nothing() {
    let home = Home::new();
    let outside = TempDir::new().unwrap();
    let dir = outside.path().join("inited");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("README.md"), "# mine\n").unwrap();
    std::fs::write(dir.join(".gitignore"), "target/\nnotes/\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "keep me").unwrap();
    let out = longhand(&home, &dir, &["tool", "init", "--lang", "rust"]);
    out.expect_code(0);
    assert!(
        out.stdout_text().contains("is the tool project `inited`"),
        "{}",
        out.stdout_text()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).unwrap(),
        "# mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "keep me"
    );
    let ignore = std::fs::read_to_string(dir.join(".gitignore")).unwrap();
    assert!(ignore.starts_with("target/\nnotes/\n"), "{ignore}");
    assert_eq!(ignore.matches("target/").count(), 1, "{ignore}");
    assert!(ignore.contains(".longhand/"), "{ignore}");
    assert!(dir.join("vendor/longhand-sdk/Cargo.toml").is_file());
    longhand(&home, &dir, &["tool", "build"]).expect_code(0);
    let tested = longhand(&home, &dir, &["tool", "test"]);
    tested.expect_code(0);
    assert!(tested.stdout_text().contains("2 passed, 0 failed"));

    let taken = outside.path().join("taken");
    std::fs::create_dir_all(taken.join("src")).unwrap();
    std::fs::write(taken.join("src/lib.rs"), "// mine").unwrap();
    let out = longhand(&home, &taken, &["tool", "init", "--lang", "rust"]);
    out.expect_code(2);
    assert!(out.stderr.contains("src/lib.rs"), "{}", out.stderr);
    assert!(out.stderr.contains("nothing was written"), "{}", out.stderr);
    assert!(!taken.join("longhand-tool.toml").exists());
    assert_eq!(
        std::fs::read_to_string(taken.join("src/lib.rs")).unwrap(),
        "// mine"
    );
    let bad = outside.path().join("Bad Name");
    std::fs::create_dir(&bad).unwrap();
    let out = longhand(&home, &bad, &["tool", "init", "--lang", "python"]);
    out.expect_code(2);
    assert!(out.stderr.contains("--name"), "{}", out.stderr);
}
