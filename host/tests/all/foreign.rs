//! Issue 31 §2: components written for other hosts. Three components this
//! project did not write, vendored with their licences under
//! `tests/foreign/` and built here from that source for wasm32-wasip2:
//!
//! - Wassette's `filesystem-rs` (four top-level functions, `result<_,
//!   string>`): described, called through `tool call` under a directory
//!   grant, and used by a scripted agent;
//! - the component-docs tutorial's `adder` (`docs:adder/add` interface,
//!   `u32` parameters): an interface function and its integer ranges;
//! - the same tutorial's `calculator`, which imports `docs:adder/add`: its
//!   imports are judged like ours, and it is refused.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use longhand_session::Event;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, blob, call, of_kind, run_script, text_turn, tool_turn, write};

/// The vendored components, by directory under `tests/foreign/`, and the
/// file each build produces.
const FOREIGN: &[(&str, &str)] = &[
    ("filesystem-rs", "filesystem.wasm"),
    ("adder", "adder.wasm"),
    ("calculator", "calculator.wasm"),
];

/// Build every vendored component (once per test process) and return the
/// path of `dir`'s `.wasm`. Each is its own workspace with its own lock
/// file; their shared target directory sits beside the host's.
fn foreign(dir: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let out = BUILT.get_or_init(|| {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("host/ sits in the repository");
        // target/<profile>/longhand → target/
        let target = Path::new(env!("CARGO_BIN_EXE_longhand"))
            .ancestors()
            .nth(2)
            .expect("the binary sits in target/<profile>/")
            .join("wasm-foreign");
        for (name, _) in FOREIGN {
            let manifest = repo.join("tests/foreign").join(name).join("Cargo.toml");
            let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
                .args([
                    "build",
                    "--release",
                    "--locked",
                    "--target",
                    "wasm32-wasip2",
                ])
                .arg("--manifest-path")
                .arg(&manifest)
                .arg("--target-dir")
                .arg(&target)
                .env_remove("RUSTFLAGS")
                .env_remove("CARGO_ENCODED_RUSTFLAGS")
                .env_remove("CARGO_TARGET_DIR")
                .env_remove("CARGO_BUILD_TARGET")
                .status()
                .expect("cannot run cargo");
            assert!(status.success(), "building {} failed", manifest.display());
        }
        target.join("wasm32-wasip2/release")
    });
    let file = FOREIGN
        .iter()
        .find(|(name, _)| *name == dir)
        .map(|(_, file)| *file)
        .expect("a vendored component");
    out.join(file)
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn json_of(stdout: &[String]) -> Value {
    serde_json::from_str(&stdout.join("\n")).expect("JSON on stdout")
}

#[test]
fn foreign_filesystem_rs_is_described_as_derived_tools() {
    let home = Home::new();
    let wasm = foreign("filesystem-rs");
    let run = home.run(&["tool", "describe", path_str(&wasm), "--json"]);
    run.expect_code(0);
    let described = json_of(&run.stdout);
    let info = &described["info"];
    let names: Vec<&str> = info["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "list-directory",
            "read-file",
            "search-file",
            "get-file-info"
        ]
    );
    let read = &info["tools"][1];
    assert_eq!(
        read["input_schema"],
        json!({
            "type": "object",
            "properties": { "path": { "type": "string" } },
            "required": ["path"],
            "additionalProperties": false,
        })
    );
    // Nobody declared an effect: the safe default.
    assert_eq!(read["effect"], "writes");
    let derived = &info["derived"];
    assert_eq!(derived["tools"][1]["export"], "read-file");
    assert_eq!(
        derived["tools"][1]["signature"],
        "func(path: string) -> result<string, string>"
    );
    assert_eq!(
        derived["tools"][2]["signature"],
        "func(path: string, pattern: string) -> result<string, string>"
    );
    // It imports the filesystem, judged by the same table as ours.
    let imports: Vec<&str> = described["imports"]
        .as_array()
        .expect("imports")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(imports.contains(&"filesystem"), "{imports:?}");

    // For people: what was derived, and from what.
    let text = home.run(&["tool", "describe", path_str(&wasm)]);
    text.expect_code(0);
    let printed = text.stdout.join("\n");
    assert!(
        printed.contains("derived: it exports no longhand:tool world"),
        "{printed}"
    );
    assert!(
        printed.contains("read-file <- read-file: func(path: string) -> result<string, string>"),
        "{printed}"
    );
}

#[test]
fn foreign_filesystem_rs_runs_through_tool_call_within_its_grant() {
    let home = Home::new();
    let wasm = foreign("filesystem-rs");
    let data = TempDir::new().expect("tempdir");
    write(&data.path().join("hello.txt"), "hello from the host");
    let grant = format!("{}:/data:ro", path_str(data.path()));
    let call = |tool: &str, input: Value| {
        home.run(&[
            "tool",
            "call",
            path_str(&wasm),
            tool,
            "--input",
            &input.to_string(),
            "--dir",
            &grant,
            "--json",
        ])
    };

    let read = call("read-file", json!({"path": "/data/hello.txt"}));
    read.expect_code(0);
    let out = json_of(&read.stdout);
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["output"], "hello from the host");

    let listed = call("list-directory", json!({"path": "/data"}));
    listed.expect_code(0);
    let out = json_of(&listed.stdout);
    assert_eq!(out["output"], json!(["[FILE] hello.txt\n"]), "{out}");

    // Its `err` is a tool error for the model, not a crash: nothing
    // outside the grant is there.
    let outside = call("read-file", json!({"path": "/etc/passwd"}));
    outside.expect_code(1);
    let out = json_of(&outside.stdout);
    assert_eq!(out["error"]["kind"], "failed", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Failed to read file")),
        "{out}"
    );

    // Input that does not fit the derived schema never reaches the guest.
    let wrong = call("read-file", json!({"path": 7}));
    wrong.expect_code(1);
    let out = json_of(&wrong.stdout);
    assert_eq!(out["error"]["kind"], "invalid-input", "{out}");
    let missing = call("search-file", json!({"path": "/data"}));
    missing.expect_code(1);
    let out = json_of(&missing.stdout);
    assert_eq!(out["error"]["kind"], "invalid-input", "{out}");
    assert!(
        out["error"]["message"].to_string().contains("pattern"),
        "{out}"
    );
}

#[test]
fn foreign_adder_interface_function_is_a_tool_with_integer_ranges() {
    let home = Home::new();
    let wasm = foreign("adder");
    let described = home.run(&["tool", "describe", path_str(&wasm), "--json"]);
    described.expect_code(0);
    let info = json_of(&described.stdout)["info"].clone();
    assert_eq!(info["tools"][0]["name"], "add_add");
    assert_eq!(
        info["derived"]["tools"][0]["export"],
        "docs:adder/add@0.1.0#add"
    );
    assert_eq!(
        info["tools"][0]["input_schema"]["properties"]["x"],
        json!({"type": "integer", "minimum": 0, "maximum": 4294967295u64})
    );

    let call = |input: Value| {
        home.run(&[
            "tool",
            "call",
            path_str(&wasm),
            "add_add",
            "--input",
            &input.to_string(),
            "--json",
        ])
    };
    let sum = call(json!({"x": 40, "y": 2}));
    sum.expect_code(0);
    assert_eq!(json_of(&sum.stdout)["output"], 42);
    let negative = call(json!({"x": -1, "y": 2}));
    negative.expect_code(1);
    assert_eq!(json_of(&negative.stdout)["error"]["kind"], "invalid-input");
}

#[test]
fn foreign_calculator_importing_an_unknown_interface_is_refused() {
    let home = Home::new();
    let wasm = foreign("calculator");
    let run = home.run(&["tool", "describe", path_str(&wasm)]);
    assert_ne!(run.code, Some(0), "refused");
    let said = run.stderr.clone();
    assert!(said.contains("docs:adder/add"), "{said}");
}

#[test]
fn foreign_filesystem_rs_runs_in_a_scripted_agent() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let wasm = foreign("filesystem-rs");
    write(&dir.path().join("data/notes.txt"), "the answer is 42");
    write(
        &dir.path().join("agent.toml"),
        &format!(
            r#"name = "foreign"
instructions = "Do exactly what the script says."
goal = "Read the notes."

[model]
provider = "replay"
model = "script"
cassette = "unused-cassette.json"

[[tools]]
component = {component:?}
dirs = ["data:/data:ro"]
effects = {{ "*" = "read-only", "search-file" = "read-only" }}
"#,
            component = path_str(&wasm),
        ),
    );
    let script = dir.path().join("script.json");
    let responses = [
        tool_turn(
            "reading the notes",
            vec![
                call(
                    "c1",
                    "filesystem__read-file",
                    json!({"path": "/data/notes.txt"}),
                ),
                call("c2", "filesystem__list-directory", json!({"path": "/"})),
            ],
            10,
            1,
        ),
        text_turn("the notes say 42", 10, 1),
    ];
    write(&script, &json!({"responses": responses}).to_string());
    let (run, session) = run_script(&home, dir.path(), &script);
    run.expect_code(0);
    let log = home.log(&session);
    let started = of_kind(&log, "tool_started");
    assert_eq!(started.len(), 2);
    for record in &started {
        let Event::ToolStarted { effect, .. } = &record.event else {
            unreachable!()
        };
        assert_eq!(effect, "read-only", "the operator's `effects`");
    }
    let finished = of_kind(&log, "tool_finished");
    let result_of = |id: &str| {
        let record = finished
            .iter()
            .find(|r| matches!(&r.event, Event::ToolFinished { call_id, .. } if call_id == id))
            .expect("the call finished");
        let Event::ToolFinished { ok, result, .. } = &record.event else {
            unreachable!()
        };
        (*ok, String::from_utf8(blob(&home, result)).expect("utf-8"))
    };
    let (ok, text) = result_of("c1");
    assert!(ok, "{text}");
    assert!(text.contains("the answer is 42"), "{text}");
    // The guest sees its grant and nothing else: `/` is not a directory
    // it was given.
    let (ok, text) = result_of("c2");
    assert!(!ok, "{text}");
    assert_eq!(home.state(&session).status.as_str(), "finished");
}

#[test]
fn foreign_effects_are_refused_for_a_component_that_declares_its_own() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    write(
        &dir.path().join("agent.toml"),
        r#"name = "ours"
instructions = "x"
goal = "x"

[model]
provider = "replay"
model = "script"
cassette = "unused-cassette.json"

[[tools]]
component = "json"
effects = { "*" = "read-only" }
"#,
    );
    let script = dir.path().join("script.json");
    write(
        &script,
        &json!({"responses": [text_turn("done", 1, 1)]}).to_string(),
    );
    let run = home.run(&["run", path_str(dir.path()), "--script", path_str(&script)]);
    assert_ne!(run.code, Some(0));
    let said = run.stderr.clone();
    assert!(said.contains("`effects`"), "{said}");
    assert!(
        said.contains("declares the effect of each tool itself"),
        "{said}"
    );
}
