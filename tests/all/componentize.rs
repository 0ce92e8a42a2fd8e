//! Components from the real Python and JavaScript toolchains load and run.
//!
//! Each test builds the tiny `greet` tool of `tools/componentize/` against
//! `wit/` with the pinned toolchain (componentize-py, componentize-js;
//! installed by `.ci/setup-componentize.sh`) into a temporary directory,
//! loads it into a [`Hands`] and calls it. Their output is what the host
//! must accept: CPython's libc imports `wasi:sockets`, and both have more
//! core instances than a Rust tool. Nothing built is committed.
//!
//! Sizes and times are printed, never asserted (they are the toolchains',
//! and this machine's). Without a toolchain a test says what it skipped,
//! and fails instead under `LONGHAND_REQUIRE_EXTERNAL=1`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use longhand_hands::{Grants, Hands, HandsConfig, ToolSource};
use serde_json::json;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_owned()
}

/// The toolchain's command: `$var`, else where the setup script puts it.
fn toolchain(var: &str, installed: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let path = repo_root().join("target/componentize").join(installed);
    path.is_file().then_some(path)
}

/// Fail under `LONGHAND_REQUIRE_EXTERNAL=1`; otherwise say what was skipped.
fn missing(what: &str) {
    let how = "run `eval \"$(bash .ci/setup-componentize.sh)\"` to install it";
    if std::env::var("LONGHAND_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
        panic!("{what} is missing and LONGHAND_REQUIRE_EXTERNAL=1: {how}");
    }
    eprintln!("skipped: {what} is missing; {how}");
}

/// Run a toolchain, failing with its output.
fn run(what: &str, command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Load the built component into a host of its own (the default pool, as
/// the CLI builds it), call `greet` a few times, print what it cost.
async fn load_and_greet(lang: &str, wasm: &Path, built_in: Duration) {
    let size = std::fs::metadata(wasm).expect("built").len();
    let hands = Hands::new(HandsConfig::default()).expect("engine");
    let started = Instant::now();
    let tool = hands
        .load(ToolSource::File(wasm))
        .await
        .unwrap_or_else(|e| panic!("the {lang} component must load: {e}"));
    let loaded_in = started.elapsed();
    assert!(tool.tool("greet").is_some(), "{:?}", tool.info().tools);

    let calls = 20u32;
    let mut wall = Duration::ZERO;
    for i in 0..calls {
        let name = format!("Ada {i}");
        let started = Instant::now();
        let outcome = hands
            .call(&tool, &Grants::default(), "greet", &json!({ "name": name }))
            .await;
        wall += started.elapsed();
        assert_eq!(
            outcome.result,
            Ok(json!({ "greeting": format!("Hello, {name}!") })),
            "receipt: {:#?}",
            outcome.receipt
        );
        assert!(outcome.receipt.denied.is_empty(), "{:?}", outcome.receipt);
    }
    eprintln!(
        "{lang}: {:.1} MB, built in {:.1} s, loaded (compiled) in {:.1} s, {:.2} ms a call \
         (mean of {calls}, fresh instance each); imports: {:?}",
        size as f64 / 1e6,
        built_in.as_secs_f64(),
        loaded_in.as_secs_f64(),
        wall.as_secs_f64() * 1e3 / f64::from(calls),
        tool.capabilities()
    );
}

#[tokio::test]
async fn python_component_loads_and_runs() {
    let Some(componentize) = toolchain("LONGHAND_COMPONENTIZE_PY", "venv/bin/componentize-py")
    else {
        return missing("componentize-py (LONGHAND_COMPONENTIZE_PY)");
    };
    let out = tempfile::tempdir().expect("tempdir");
    let wasm = out.path().join("greet.wasm");
    // The source is copied: componentize-py leaves __pycache__ beside it.
    let app = out.path().join("app");
    std::fs::create_dir(&app).expect("mkdir");
    std::fs::copy(
        repo_root().join("tools/componentize/python/app.py"),
        app.join("app.py"),
    )
    .expect("copy app.py");
    let started = Instant::now();
    run(
        "componentize-py",
        Command::new(&componentize)
            .current_dir(out.path())
            .arg("-d")
            .arg(repo_root().join("wit"))
            .args(["-w", "longhand:tool/tool", "componentize", "-p"])
            .arg(&app)
            .args(["app", "-o"])
            .arg(&wasm),
    );
    load_and_greet("python", &wasm, started.elapsed()).await;
}

#[tokio::test]
async fn javascript_component_loads_and_runs() {
    let Some(componentize) = toolchain(
        "LONGHAND_COMPONENTIZE_JS",
        "js/node_modules/.bin/componentize-js",
    ) else {
        return missing("componentize-js (LONGHAND_COMPONENTIZE_JS)");
    };
    let out = tempfile::tempdir().expect("tempdir");
    let wasm = out.path().join("greet.wasm");
    let started = Instant::now();
    run(
        "componentize-js",
        Command::new(&componentize)
            .current_dir(out.path())
            .arg(repo_root().join("tools/componentize/js/tool.js"))
            .arg("--wit")
            .arg(repo_root().join("wit"))
            .args(["--world-name", "tool", "-o"])
            .arg(&wasm),
    );
    load_and_greet("javascript", &wasm, started.elapsed()).await;
}
