//! The built-in tools (`fs`, `http`, `json`, from `tools/`) through the
//! host: the happy path of every tool, and the host-side checks (schema,
//! grants) as a model would meet them.
//!
//! These run the same components the `longhand` binary ships, loaded by
//! name, so they also prove a built-in gets no privilege a file would not.

use std::path::Path;
use std::sync::Arc;

use longhand_hands::{
    Access, CallError, CallOutcome, Grants, HostPattern, LoadError, LoadedTool, ToolSource,
};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::OnceCell;

use crate::support::server::Server;
use crate::support::{dir, err, hands, ok};

/// A built-in, loaded once per test binary.
type Cell = OnceCell<Arc<LoadedTool>>;

static FS: Cell = Cell::const_new();
static HTTP: Cell = Cell::const_new();
static JSON: Cell = Cell::const_new();

async fn builtin(cell: &'static Cell, name: &str) -> &'static LoadedTool {
    cell.get_or_init(|| async {
        hands()
            .load(ToolSource::Builtin(name))
            .await
            .unwrap_or_else(|e| panic!("cannot load built-in {name}: {e}"))
    })
    .await
}

async fn call(
    cell: &'static Cell,
    name: &str,
    grants: &Grants,
    tool: &str,
    input: Value,
) -> CallOutcome {
    hands()
        .call(builtin(cell, name).await, grants, tool, &input)
        .await
}

async fn fs(grants: &Grants, tool: &str, input: Value) -> CallOutcome {
    call(&FS, "fs", grants, tool, input).await
}

const MAIN_RS: &str = "fn main() {\n    println!(\"hello, world\");\n}\n";

/// A workspace with a few files, granted at `/workspace`.
fn workspace(access: Access) -> (TempDir, Grants) {
    let root = tempfile::tempdir().expect("tempdir");
    let file = |rel: &str, content: &str| {
        let path = root.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, content).expect("write");
    };
    file("notes.txt", "one\ntwo\nthree\n");
    file("src/main.rs", MAIN_RS);
    file("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n");
    file(
        "data/config.json",
        r#"{"name":"longhand","deps":{"b":"2","a":"1"}}"#,
    );
    let grants = Grants {
        dirs: vec![dir(root.path(), "/workspace", access)],
        ..Grants::default()
    };
    (root, grants)
}

fn read_host(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).expect("read host file")
}

#[tokio::test]
async fn unknown_builtin_names_the_known_ones() {
    let err = match hands().load(ToolSource::Builtin("shell")).await {
        Ok(_) => panic!("a `shell` built-in loaded"),
        Err(e) => e,
    };
    assert!(matches!(err, LoadError::UnknownBuiltin { .. }), "{err:?}");
    let message = err.to_string();
    for name in ["shell", "fs", "http", "json"] {
        assert!(message.contains(name), "{message}");
    }
}

#[tokio::test]
async fn builtins_describe_their_tools() {
    let expect: [(&'static Cell, &str, &[&str]); 3] = [
        (
            &FS,
            "fs",
            &["read", "write", "list", "glob", "search", "edit", "stat"],
        ),
        (&HTTP, "http", &["get", "fetch"]),
        (&JSON, "json", &["query", "query_file"]),
    ];
    for (cell, name, tools) in expect {
        let tool = builtin(cell, name).await;
        assert_eq!(tool.info().name, name);
        let offered: Vec<&str> = tool.info().tools.iter().map(|t| t.name.as_str()).collect();
        for t in tools {
            assert!(offered.contains(t), "{name} lacks {t}: {offered:?}");
        }
    }
}

#[tokio::test]
async fn fs_read_and_stat() {
    let (_root, grants) = workspace(Access::ReadOnly);
    let out = fs(&grants, "read", json!({ "path": "notes.txt" })).await;
    let out = ok(&out);
    assert_eq!(out["content"], "one\ntwo\nthree\n");
    assert_eq!(out["path"], "/workspace/notes.txt");
    assert_eq!(out["total_lines"], 3);
    assert_eq!(out["truncated"], false);

    let out = fs(
        &grants,
        "read",
        json!({ "path": "/workspace/notes.txt", "start_line": 2, "end_line": 2 }),
    )
    .await;
    assert_eq!(ok(&out)["content"], "two\n");

    let out = fs(&grants, "stat", json!({ "path": "src/main.rs" })).await;
    let out = ok(&out);
    assert_eq!(out["kind"], "file");
    assert_eq!(out["size"], MAIN_RS.len());
}

#[tokio::test]
async fn fs_list_glob_and_search() {
    let (_root, grants) = workspace(Access::ReadOnly);
    let out = fs(&grants, "list", json!({})).await;
    let names: Vec<&str> = ok(&out)["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for want in ["notes.txt", "src", "data"] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }

    let out = fs(&grants, "glob", json!({ "pattern": "**/*.rs" })).await;
    assert_eq!(
        ok(&out)["matches"],
        json!(["/workspace/src/lib.rs", "/workspace/src/main.rs"])
    );

    let out = fs(
        &grants,
        "search",
        json!({ "pattern": "fn \\w+\\(", "glob": "*.rs" }),
    )
    .await;
    let out = ok(&out);
    let found: Vec<(String, u64)> = out["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap_or_default().to_owned(),
                m["line_number"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("/workspace/src/lib.rs".to_owned(), 1),
            ("/workspace/src/main.rs".to_owned(), 1)
        ]
    );
}

#[tokio::test]
async fn fs_write_and_edit() {
    let (root, grants) = workspace(Access::ReadWrite);
    let out = fs(
        &grants,
        "write",
        json!({ "path": "out/new.txt", "content": "fresh", "create_dirs": true }),
    )
    .await;
    let out = ok(&out);
    assert_eq!(out["bytes_written"], 5);
    assert_eq!(out["created"], true);
    assert_eq!(read_host(root.path(), "out/new.txt"), "fresh");

    let out = fs(
        &grants,
        "edit",
        json!({ "path": "src/main.rs", "old": "hello, world", "new": "hello, there" }),
    )
    .await;
    let out = ok(&out);
    assert_eq!(out["replacements"], 1);
    assert_eq!(out["first_line"], 2);
    assert!(read_host(root.path(), "src/main.rs").contains("hello, there"));
}

#[tokio::test]
async fn fs_schema_errors_name_the_field_and_nothing_runs() {
    let (_root, grants) = workspace(Access::ReadWrite);
    for (tool, input, field) in [
        ("read", json!({}), "path"),
        ("read", json!({ "path": 7 }), "path"),
        (
            "read",
            json!({ "path": "notes.txt", "bogus": true }),
            "bogus",
        ),
        ("write", json!({ "path": "x.txt" }), "content"),
        (
            "read",
            json!({ "path": "notes.txt", "start_line": 0 }),
            "start_line",
        ),
    ] {
        let outcome = fs(&grants, tool, input.clone()).await;
        let CallError::InvalidInput { message } = err(&outcome) else {
            panic!(
                "{tool} {input}: expected invalid input, got {:?}",
                err(&outcome)
            );
        };
        assert!(
            message.contains(field),
            "{tool} {input}: should name `{field}`: {message}"
        );
        assert_eq!(
            outcome.receipt.fuel_used, 0,
            "{tool} {input}: the guest ran"
        );
    }
}

#[tokio::test]
async fn fs_outside_the_grant_is_refused_by_name() {
    let (_root, grants) = workspace(Access::ReadOnly);
    let outcome = fs(
        &grants,
        "read",
        json!({ "path": "/workspace/../etc/passwd" }),
    )
    .await;
    match err(&outcome) {
        CallError::AccessDenied { resource, .. } => {
            assert!(resource.contains("/workspace/../etc/passwd"), "{resource}")
        }
        other => panic!("expected access denied, got {other:?}"),
    }
    // A path no grant covers does not exist for the tool.
    let outcome = fs(&grants, "read", json!({ "path": "/etc/passwd" })).await;
    let e = err(&outcome);
    assert!(
        matches!(
            e,
            CallError::NotFound { .. } | CallError::AccessDenied { .. }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("/etc/passwd"), "{e}");
}

#[tokio::test]
async fn fs_write_to_a_read_only_grant_is_access_denied() {
    let (root, grants) = workspace(Access::ReadOnly);
    let outcome = fs(
        &grants,
        "write",
        json!({ "path": "notes.txt", "content": "gone" }),
    )
    .await;
    let CallError::AccessDenied { resource, reason } = err(&outcome) else {
        panic!("expected access denied, got {:?}", err(&outcome));
    };
    assert_eq!(resource, "/workspace/notes.txt");
    assert!(
        reason.contains("read-only"),
        "the reason should say the grant is read-only: {reason}"
    );
    assert_eq!(read_host(root.path(), "notes.txt"), "one\ntwo\nthree\n");
}

#[tokio::test]
async fn http_get_and_fetch_against_a_loopback_server() {
    let server = Server::echo("builtin-marker");
    let grants = Grants {
        hosts: vec![HostPattern::parse(&format!("127.0.0.1:{}", server.port())).expect("pattern")],
        ..Grants::default()
    };
    let out = call(
        &HTTP,
        "http",
        &grants,
        "get",
        json!({ "url": server.url("/get?q=1") }),
    )
    .await;
    let out = ok(&out);
    assert_eq!(out["status"], 200, "{out}");
    assert_eq!(out["headers"]["content-type"], "application/json");
    let body: Value =
        serde_json::from_str(out["body"].as_str().unwrap_or_default()).expect("json body");
    assert_eq!(body["marker"], "builtin-marker");
    assert_eq!(body["path"], "/get?q=1");
    assert_eq!(out["truncated"], false);

    let out = call(
        &HTTP,
        "http",
        &grants,
        "fetch",
        json!({
            "url": server.url("/post"),
            "method": "POST",
            "headers": { "content-type": "text/plain" },
            "body": "payload",
        }),
    )
    .await;
    assert_eq!(ok(&out)["status"], 200);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].method, "POST");
    assert_eq!(requests[1].body, b"payload");
    assert_eq!(requests[1].header("content-type"), Some("text/plain"));
}

#[tokio::test]
async fn http_get_to_an_ungranted_host_is_access_denied() {
    let server = Server::echo("m");
    let outcome = call(
        &HTTP,
        "http",
        &Grants::default(),
        "get",
        json!({ "url": server.url("/") }),
    )
    .await;
    let CallError::AccessDenied { resource, .. } = err(&outcome) else {
        panic!("expected access denied, got {:?}", err(&outcome));
    };
    assert!(
        resource.contains(&format!("127.0.0.1:{}", server.port())),
        "{resource}"
    );
    assert!(server.requests().is_empty());
    assert_eq!(
        outcome.receipt.denied.len(),
        1,
        "{:?}",
        outcome.receipt.denied
    );
}

#[tokio::test]
async fn json_query_and_query_file() {
    let out = call(
        &JSON,
        "json",
        &Grants::default(),
        "query",
        json!({
            "filter": ".items[] | select(.price > 10) | .name",
            "input": { "items": [
                { "name": "cheap", "price": 5 },
                { "name": "dear", "price": 50 },
                { "name": "dearer", "price": 500 },
            ] },
        }),
    )
    .await;
    assert_eq!(ok(&out)["results"], json!(["dear", "dearer"]));
    assert_eq!(ok(&out)["truncated"], false);

    let (_root, grants) = workspace(Access::ReadOnly);
    let out = call(
        &JSON,
        "json",
        &grants,
        "query_file",
        json!({ "filter": ".deps | keys", "path": "data/config.json" }),
    )
    .await;
    assert_eq!(ok(&out)["results"], json!([["a", "b"]]));
}

#[tokio::test]
async fn json_bad_filter_is_invalid_input() {
    let outcome = call(
        &JSON,
        "json",
        &Grants::default(),
        "query",
        json!({ "filter": ".a | [", "input": {} }),
    )
    .await;
    let CallError::InvalidInput { message } = err(&outcome) else {
        panic!("expected invalid input, got {:?}", err(&outcome));
    };
    assert!(!message.is_empty());
}
