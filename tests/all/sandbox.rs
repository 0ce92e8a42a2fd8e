//! Files and environment: the guest sees granted directories and named
//! variables, and nothing else.
//!
//! Each test lays out a host tree with a secret *outside* the grant, so an
//! escape would show up as that secret's text in the guest's output rather
//! than as a vague "it did not fail".

use std::collections::BTreeMap;

use longhand_hands::{Access, Grants};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{assert_still_serves, call_probe, dir, ok};

const OUTSIDE_SECRET: &str = "outside-the-grant";

/// `root/granted/inside.txt`, `root/outside/secret.txt`, and two symlinks in
/// the grant pointing out of it: `granted/escape` (relative, to the
/// directory) and `granted/escape.txt` (absolute, to the file).
struct Tree {
    root: TempDir,
}

impl Tree {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let granted = root.path().join("granted");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(granted.join("sub")).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(granted.join("inside.txt"), "inside the grant").expect("write");
        std::fs::write(outside.join("secret.txt"), OUTSIDE_SECRET).expect("write");
        std::os::unix::fs::symlink("../outside", granted.join("escape")).expect("symlink");
        std::os::unix::fs::symlink(outside.join("secret.txt"), granted.join("escape.txt"))
            .expect("symlink");
        Self { root }
    }

    fn granted(&self) -> std::path::PathBuf {
        self.root.path().join("granted")
    }

    fn grants(&self, access: Access) -> Grants {
        Grants {
            dirs: vec![dir(&self.granted(), "/workspace", access)],
            ..Grants::default()
        }
    }
}

/// How a refused path looks from inside: an escape from a grant is "not
/// permitted"; a path no grant covers simply does not exist.
const ESCAPE: &str = "PermissionDenied";
const ABSENT: &str = "NotFound";

/// Read `path` in the guest and insist it failed, with error kind `kind`,
/// without leaking the secret.
async fn assert_unreadable(grants: &Grants, path: &str, kind: &str) -> Value {
    let outcome = call_probe(grants, "read", json!({ "path": path })).await;
    let out = ok(&outcome).clone();
    assert_eq!(out["ok"], json!(false), "{path} was readable: {out}");
    assert!(
        !out.to_string().contains(OUTSIDE_SECRET),
        "{path} leaked: {out}"
    );
    assert_eq!(out["kind"], kind, "{path}: {out}");
    let error = out["error"].as_str().unwrap_or_default();
    assert!(
        !error.is_empty(),
        "{path}: the guest got no error message: {out}"
    );
    out
}

#[tokio::test]
async fn reads_and_lists_inside_a_grant_work() {
    let tree = Tree::new();
    let grants = tree.grants(Access::ReadOnly);
    let out = call_probe(&grants, "read", json!({ "path": "/workspace/inside.txt" })).await;
    assert_eq!(ok(&out)["content"], "inside the grant");
    let out = call_probe(&grants, "list", json!({ "path": "/workspace" })).await;
    assert_eq!(
        ok(&out)["names"],
        json!(["escape", "escape.txt", "inside.txt", "sub"])
    );
    let out = call_probe(
        &grants,
        "read",
        json!({ "path": "/workspace/sub/../inside.txt" }),
    )
    .await;
    assert_eq!(
        ok(&out)["content"],
        "inside the grant",
        "`..` that stays inside is fine"
    );
}

#[tokio::test]
async fn dot_dot_cannot_leave_the_grant() {
    let tree = Tree::new();
    let grants = tree.grants(Access::ReadWrite);
    for path in [
        "/workspace/../outside/secret.txt",
        "/workspace/sub/../../outside/secret.txt",
        "/workspace/../../../../../../etc/passwd",
    ] {
        assert_unreadable(&grants, path, ESCAPE).await;
    }
    let out = call_probe(&grants, "list", json!({ "path": "/workspace/.." })).await;
    assert_eq!(
        ok(&out)["ok"],
        json!(false),
        "the grant's parent was listable: {}",
        ok(&out)
    );
    assert_eq!(ok(&out)["kind"], ESCAPE, "{}", ok(&out));
    assert_still_serves().await;
}

#[tokio::test]
async fn absolute_paths_outside_the_grant_do_not_exist() {
    let tree = Tree::new();
    let grants = tree.grants(Access::ReadWrite);
    let out = assert_unreadable(&grants, "/etc/passwd", ABSENT).await;
    assert!(!out.to_string().contains("root:"), "{out}");
    let host_path = tree.root.path().join("outside/secret.txt");
    assert_unreadable(&grants, &host_path.display().to_string(), ABSENT).await;
    assert_still_serves().await;
}

#[tokio::test]
async fn symlinks_out_of_the_grant_are_not_followed() {
    let tree = Tree::new();
    let grants = tree.grants(Access::ReadWrite);
    assert_unreadable(&grants, "/workspace/escape/secret.txt", ESCAPE).await;
    assert_unreadable(&grants, "/workspace/escape.txt", ESCAPE).await;
    let out = call_probe(&grants, "list", json!({ "path": "/workspace/escape" })).await;
    assert_eq!(
        ok(&out)["ok"],
        json!(false),
        "listed through a symlink: {}",
        ok(&out)
    );
    // Writing through the symlink must not touch the file outside either.
    let out = call_probe(
        &grants,
        "write",
        json!({ "path": "/workspace/escape.txt", "content": "overwritten" }),
    )
    .await;
    assert_eq!(
        ok(&out)["ok"],
        json!(false),
        "wrote through a symlink: {}",
        ok(&out)
    );
    let after = std::fs::read_to_string(tree.root.path().join("outside/secret.txt")).expect("read");
    assert_eq!(after, OUTSIDE_SECRET);
    assert_still_serves().await;
}

#[tokio::test]
async fn read_only_grant_refuses_writes() {
    let tree = Tree::new();
    let grants = tree.grants(Access::ReadOnly);
    for path in ["/workspace/new.txt", "/workspace/inside.txt"] {
        let out = call_probe(&grants, "write", json!({ "path": path, "content": "x" })).await;
        let out = ok(&out);
        assert_eq!(out["ok"], json!(false), "{path} was writable: {out}");
        assert_eq!(out["kind"], ESCAPE, "{out}");
    }
    assert!(!tree.granted().join("new.txt").exists());
    let inside = std::fs::read_to_string(tree.granted().join("inside.txt")).expect("read");
    assert_eq!(inside, "inside the grant");
    assert_still_serves().await;
}

#[tokio::test]
async fn read_write_grant_allows_writes_inside() {
    let tree = Tree::new();
    let grants = tree.grants(Access::ReadWrite);
    let out = call_probe(
        &grants,
        "write",
        json!({ "path": "/workspace/sub/new.txt", "content": "written by the guest" }),
    )
    .await;
    assert_eq!(ok(&out)["ok"], json!(true), "{}", ok(&out));
    let written = std::fs::read_to_string(tree.granted().join("sub/new.txt")).expect("read");
    assert_eq!(written, "written by the guest");
}

#[tokio::test]
async fn no_grant_means_no_files() {
    let tree = Tree::new();
    let none = Grants::default();
    assert_unreadable(&none, "/workspace/inside.txt", ABSENT).await;
    let out = call_probe(&none, "list", json!({ "path": "/" })).await;
    assert_eq!(ok(&out)["ok"], json!(false), "{}", ok(&out));
    // The tree is still there; it simply was not granted.
    assert!(tree.granted().join("inside.txt").exists());
}

/// A grant of a directory that is gone by call time is refused, not a crash.
#[tokio::test]
async fn vanished_grant_is_refused() {
    let tree = Tree::new();
    let grants = tree.grants(Access::ReadOnly);
    std::fs::remove_dir_all(tree.granted()).expect("remove");
    let outcome = call_probe(&grants, "read", json!({ "path": "/workspace/inside.txt" })).await;
    let err = crate::support::err(&outcome);
    assert!(
        matches!(err, longhand_hands::CallError::Refused { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains(&tree.granted().display().to_string()),
        "{err}"
    );
    assert_still_serves().await;
}

#[tokio::test]
async fn only_granted_env_vars_are_visible() {
    let grants = Grants {
        env: BTreeMap::from([("GRANTED_VAR".to_owned(), "granted value".to_owned())]),
        ..Grants::default()
    };
    let out = call_probe(&grants, "env_all", json!({})).await;
    // Exactly the grant: nothing of the host's PATH, HOME, CARGO_* and so on.
    assert_eq!(ok(&out)["vars"], json!({ "GRANTED_VAR": "granted value" }));
    let out = call_probe(&grants, "env", json!({ "name": "GRANTED_VAR" })).await;
    assert_eq!(ok(&out)["value"], "granted value");
    for name in ["PATH", "HOME", "CARGO_MANIFEST_DIR"] {
        let out = call_probe(&grants, "env", json!({ "name": name })).await;
        assert_eq!(
            ok(&out)["value"],
            Value::Null,
            "{name} leaked into the guest"
        );
    }
    let out = call_probe(&Grants::default(), "env_all", json!({})).await;
    assert_eq!(ok(&out)["vars"], json!({}));
}
