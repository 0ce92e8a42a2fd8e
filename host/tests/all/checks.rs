//! The harness's checks, run for real.
//!
//! - `tool` predicates: jq expressions evaluated in the sandbox by the
//!   built-in `json` component, including hostile ones a limit must stop.
//! - `command` checks: the example crate of `examples/ralph-fix/` tested
//!   with the real `cargo` under Landlock, from a [`CommandCheckConfig`]
//!   resolved the way the harness resolves agent.toml: the buggy crate
//!   fails, the fixed one passes, and a test that writes outside the
//!   writable directory is denied.
//!
//! The command tests read the real environment (`HOME`, `PATH`): they run
//! the machine's own toolchain, which is their point. They need nothing
//! from the network (`--offline`, a crate with no dependencies).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use longhand_brain::checks::command::{self, CommandOutcome};
use longhand_brain::checks::resolve::{CommandCheckConfig, GrantedDir, resolve};
use longhand_brain::checks::tool::{PredicateError, predicate_holds, validate_predicate};
use longhand_hands::{Hands, HandsConfig};
use serde_json::{Value, json};

fn hands() -> &'static Hands {
    static HANDS: OnceLock<Hands> = OnceLock::new();
    HANDS.get_or_init(|| {
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("longhand-host-all-cache");
        std::fs::create_dir_all(&cache).unwrap();
        Hands::new(HandsConfig {
            cache_dir: Some(cache),
            ..HandsConfig::default()
        })
        .unwrap()
    })
}

async fn holds(expr: &str, value: Value) -> (bool, String) {
    let v = predicate_holds(hands(), expr, &value)
        .await
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    (v.holds, v.detail)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicate_holds_when_it_yields_only_true() {
    assert_eq!(
        holds(".ok", json!({"ok": true})).await,
        (true, "true".into())
    );
    assert_eq!(
        holds(".ok", json!({"ok": false})).await,
        (false, "false".into())
    );
    assert_eq!(
        holds(".items | length > 0", json!({"items": [1]})).await,
        (true, "true".into())
    );
    // Non-booleans never pass, not even ones that look true.
    assert_eq!(holds(".n", json!({"n": 1})).await, (false, "1".into()));
    assert_eq!(
        holds(".s", json!({"s": "true"})).await,
        (false, "\"true\"".into())
    );
    // Several results: all must be true.
    assert_eq!(
        holds(".[]", json!([true, true])).await,
        (true, "2 results: true, true".into())
    );
    assert_eq!(
        holds(".[]", json!([true, false])).await,
        (false, "2 results: true, false".into())
    );
    // Saying nothing is not saying yes.
    assert_eq!(holds(".[]", json!([])).await, (false, "no result".into()));
    assert_eq!(
        holds("empty", json!(null)).await,
        (false, "no result".into())
    );
    // An endless stream of `true` is cut at the cap and fails.
    let (ok, detail) = holds("repeat(true)", json!(null)).await;
    assert!(
        !ok && detail.starts_with("more than 16 results"),
        "{detail}"
    );
    // A runtime error is a verdict about this value, with the error.
    let (ok, detail) = holds(".a.b", json!({"a": "text"})).await;
    assert!(!ok && detail.contains("cannot index"), "{detail}");
    // ... even one whose text imitates a compile error.
    let (ok, detail) = holds("error(\"undefined filter `x/0`\")", json!(null)).await;
    assert!(!ok && detail.contains("raised an error"), "{detail}");
    // A tool's whole output (up to its default 1 MiB cap) fits the limits.
    let items: Vec<Value> = (0..20_000)
        .map(|i| json!({"id": i, "name": format!("item number {i}"), "ok": true}))
        .collect();
    let big = json!({ "items": items });
    assert!(big.to_string().len() > 900_000);
    assert_eq!(
        holds("all(.items[]; .ok) and (.items | length == 20000)", big).await,
        (true, "true".into())
    );
    // Long details are cut.
    let (ok, detail) = holds(".", json!("x".repeat(100_000))).await;
    assert!(
        !ok && detail.len() < 3000 && detail.contains("more bytes cut"),
        "{detail}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_or_hostile_expression_fails_without_harming_the_host() {
    for expr in [".a |", "nosuch(1)", "import \"x\" as y; .", "$undefined"] {
        let e = predicate_holds(hands(), expr, &json!({}))
            .await
            .unwrap_err();
        assert!(matches!(e, PredicateError::Compile { .. }), "{expr}: {e}");
        let v = validate_predicate(hands(), expr).await.unwrap_err();
        assert_eq!(v, e, "{expr}");
    }
    // Endless, or allocating without bound: a sandbox limit stops each.
    for expr in [
        "last(repeat(1))",
        "[repeat(\"xxxxxxxx\")] | length > 0",
        "def f: [f]; f",
    ] {
        let e = predicate_holds(hands(), expr, &json!(null))
            .await
            .unwrap_err();
        assert!(matches!(e, PredicateError::Stopped { .. }), "{expr}: {e}");
        // A validator only reports compile errors.
        validate_predicate(hands(), expr).await.unwrap();
    }
    // Fails on `null` at run time: still a valid expression.
    validate_predicate(hands(), ".[] | .x").await.unwrap();
    validate_predicate(hands(), "all(.tests[]; .passed)")
        .await
        .unwrap();
}

/// The example crate, copied into `<tmp>/out/crate`.
fn copy_example(tmp: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ralph-fix/crate");
    let dst = tmp.join("out/crate");
    std::fs::create_dir_all(dst.join("src")).unwrap();
    for file in ["Cargo.toml", "Cargo.lock", "src/lib.rs"] {
        std::fs::copy(src.join(file), dst.join(file)).unwrap();
    }
    dst
}

/// The check as the example's agent.toml writes it, found on this machine
/// (Linux, rustup toolchain in `~/.rustup`, Landlock ABI 7) by denying
/// everything and adding what `cargo test` failed on:
///
/// - `~/.cargo/bin` for the rustup proxy `cargo` (a link to `rustup`), and
///   `~/.rustup` for `settings.toml` and the toolchain. Not the rest of
///   `~/.cargo`: cargo only fails to take its package-cache lock there,
///   which it tolerates with `--offline` and no dependencies, so
///   `CARGO_HOME` needs to be neither writable nor redirected (and the
///   registry token in it stays unreadable).
/// - `/usr`, `/lib`, `/lib64`: the linker (`cc`), libc, the loader.
/// - `/dev/null`: cargo starts `rustc -vV` with stdin from it; without it
///   that spawn fails with "Permission denied". Read-only is enough.
/// - `TMPDIR` inside the writable directory: `cc` writes temporary files
///   there ("Cannot create temporary file in /tmp/").
/// - `CARGO_TARGET_DIR` inside it too, so the build never writes into the
///   crate's neighbours.
/// - `PATH` (for `cc`) and `HOME` (for rustup to find `~/.rustup`).
///
/// Not needed, so not given: `/etc` (the loader uses `/etc/ld.so.cache`
/// when it can, and falls back), `/proc` (which would expose the
/// environment of the host's other processes: API keys), `/dev/urandom`
/// (Rust uses the getrandom system call).
const TESTS_CHECK: &str = r#"
argv = ["cargo", "test", "--offline"]
cwd = "/out/crate"
writable = ["/out"]
read_only = ["~/.cargo/bin", "~/.rustup", "/usr", "/lib", "/lib64", "/dev/null"]
env = ["PATH", "HOME"]
set_env = { CARGO_TARGET_DIR = "/out/target", TMPDIR = "/out" }
timeout = "300s"
max_output = 65536
"#;

async fn run_tests_check(out: &Path) -> CommandOutcome {
    let config: CommandCheckConfig = toml::from_str(TESTS_CHECK).unwrap();
    let dirs = [GrantedDir {
        host: out.to_owned(),
        guest: "/out".into(),
        writable: true,
    }];
    let resolved = resolve("tests", &config, &dirs, |n| std::env::var(n).ok()).unwrap();
    command::run(&resolved.spec).await.unwrap()
}

/// The example's bug fixed: one line.
fn fix(krate: &Path) {
    let lib = krate.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    let fixed = text.replace("'m' => 60 * 60,", "'m' => 60,");
    assert_ne!(
        fixed, text,
        "the example's bug is not where this test expects it"
    );
    std::fs::write(lib, fixed).unwrap();
}

#[tokio::test]
async fn the_example_crate_fails_then_passes_confined() {
    let tmp = tempfile::TempDir::new().unwrap();
    let out = tmp.path().canonicalize().unwrap().join("out");
    let krate = copy_example(tmp.path());

    let buggy = run_tests_check(&out).await;
    assert!(!buggy.passed && buggy.code == Some(101), "{buggy:#?}");
    assert!(!buggy.timed_out);
    // The test output is captured for the worker's next attempt.
    assert!(
        buggy
            .stdout
            .contains("test result: FAILED. 1 passed; 2 failed"),
        "{buggy:#?}"
    );
    assert!(buggy.stdout.contains("left: Some(7200)"), "{buggy:#?}");

    fix(&krate);
    let fixed = run_tests_check(&out).await;
    assert!(fixed.passed && fixed.code == Some(0), "{fixed:#?}");
    assert!(
        fixed.stdout.contains("test result: ok. 3 passed"),
        "{fixed:#?}"
    );
    // Built where the check said, not beside the crate.
    assert!(out.join("target/debug").is_dir());
    assert!(!krate.join("target").exists());
    eprintln!(
        "confined cargo test: buggy crate (cold build) {} ms, fixed {} ms; {:?}",
        buggy.wall_ms, fixed.wall_ms, fixed.confinement
    );
}

#[tokio::test]
async fn a_test_cannot_write_outside_or_connect_under_the_check() {
    let tmp = tempfile::TempDir::new().unwrap();
    let out = tmp.path().canonicalize().unwrap().join("out");
    let krate = copy_example(tmp.path());
    fix(&krate);
    // Outside every path of the check (the system temp directory).
    let outside = tempfile::TempDir::new().unwrap();
    let target = outside.path().join("escaped.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::fs::create_dir(krate.join("tests")).unwrap();
    std::fs::write(
        krate.join("tests/escape.rs"),
        format!(
            r#"
#[test]
fn writes_outside() {{
    std::fs::write({target:?}, "out").expect("write outside");
}}

#[test]
fn connects() {{
    std::net::TcpStream::connect("127.0.0.1:{port}").expect("connect");
}}
"#
        ),
    )
    .unwrap();

    let outcome = run_tests_check(&out).await;
    let accepted = listener.accept().is_ok();
    if outcome.confinement.filesystem {
        assert!(!outcome.passed, "{outcome:#?}");
        assert!(!target.exists(), "the test wrote outside: {outcome:#?}");
        assert!(
            outcome.stdout.contains("test writes_outside ... FAILED")
                && outcome.stdout.contains("Permission denied"),
            "{outcome:#?}"
        );
    } else {
        // Without Landlock the outcome says nothing was confined.
        assert!(outcome.confinement.note.is_some(), "{outcome:#?}");
    }
    if outcome.confinement.network {
        assert!(!accepted, "the connection reached the listener");
        assert!(
            outcome.stdout.contains("test connects ... FAILED"),
            "{outcome:#?}"
        );
    } else {
        assert!(outcome.confinement.note.is_some(), "{outcome:#?}");
    }
    // The crate's own tests still ran and passed.
    assert!(
        outcome.stdout.contains("test result: ok. 3 passed"),
        "{outcome:#?}"
    );
}
