//! Directory grants under attack: symlinks planted to redirect later grants,
//! directories swapped under a grant, FIFOs and other special files that
//! would hang a host thread, and a tool filling the disk.
//!
//! Each test asserts containment (the guest did not get what it reached
//! for), a clear error or receipt entry naming what happened, and that the
//! shared host serves a normal call afterwards.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use longhand_hands::{Access, CallError, DirSpec, Grants, Limits};
use serde_json::{Value, json};

use crate::support::{assert_still_serves, call_probe, dir, err, ok};

fn rw(path: &Path) -> Grants {
    Grants {
        dirs: vec![dir(path, "/w", Access::ReadWrite)],
        ..Grants::default()
    }
}

fn rw_with_symlinks(path: &Path) -> Grants {
    let spec = DirSpec {
        host_path: path.to_owned(),
        guest_path: "/w".to_owned(),
        access: Access::ReadWrite,
        symlinks: true,
    };
    Grants {
        dirs: vec![spec.resolve(Path::new("/")).expect("grant")],
        ..Grants::default()
    }
}

/// `proj/sub/inside.txt` in a fresh temporary directory.
fn project() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let proj = root.path().join("proj");
    std::fs::create_dir_all(proj.join("sub")).expect("mkdir");
    std::fs::write(proj.join("sub/inside.txt"), "inside").expect("write");
    (root, proj)
}

fn refused_message(outcome: &longhand_hands::CallOutcome) -> String {
    match err(outcome) {
        CallError::Refused { message } => message.clone(),
        other => panic!("expected the call to be refused, got {other:?}"),
    }
}

#[tokio::test]
async fn a_tool_cannot_plant_a_symlink_by_default() {
    let (_root, proj) = project();
    let grants = rw(&proj);
    // The published attack: move `sub` away, put a link to `/` in its place.
    let moved = call_probe(
        &grants,
        "rename",
        json!({ "from": "/w/sub", "to": "/w/old" }),
    )
    .await;
    assert_eq!(ok(&moved)["ok"], json!(true));
    for target in ["../../../../../../..", "/", "/etc", "old"] {
        let out = call_probe(
            &grants,
            "symlink",
            json!({ "target": target, "link": "/w/sub" }),
        )
        .await;
        assert_eq!(
            ok(&out)["ok"],
            json!(false),
            "symlink to {target} was created"
        );
        assert!(
            out.receipt
                .denied
                .iter()
                .any(|d| d.capability == "filesystem" && d.reason.contains("symbolic links")),
            "no denial in the receipt: {:?}",
            out.receipt.denied
        );
        assert!(std::fs::symlink_metadata(proj.join("sub")).is_err());
    }
    // Hard links inside the grant stay allowed: they cannot reach outside.
    let out = call_probe(
        &grants,
        "hardlink",
        json!({ "from": "/w/old/inside.txt", "to": "/w/again.txt" }),
    )
    .await;
    assert_eq!(ok(&out)["ok"], json!(true), "{}", ok(&out));
    assert_still_serves().await;
}

#[tokio::test]
async fn a_pinned_grant_refuses_a_directory_swapped_for_a_symlink() {
    let (_root, proj) = project();
    // Granted before the attack, as a session freezes its grants at start.
    let sub = Grants {
        dirs: vec![dir(&proj.join("sub"), "/sub", Access::ReadOnly)],
        ..Grants::default()
    };
    let read = call_probe(&sub, "read", json!({ "path": "/sub/inside.txt" })).await;
    assert_eq!(ok(&read)["content"], json!("inside"));

    // The operator allowed symlinks on the parent; a tool uses that.
    let parent = rw_with_symlinks(&proj);
    let moved = call_probe(
        &parent,
        "rename",
        json!({ "from": "/w/sub", "to": "/w/old" }),
    )
    .await;
    assert_eq!(ok(&moved)["ok"], json!(true));
    let planted = call_probe(
        &parent,
        "symlink",
        json!({ "target": "../../../../../../..", "link": "/w/sub" }),
    )
    .await;
    assert_eq!(ok(&planted)["ok"], json!(true), "{}", ok(&planted));

    // The pinned grant is refused, naming the grant and the link.
    let outcome = call_probe(&sub, "read", json!({ "path": "/sub/etc/passwd" })).await;
    let message = refused_message(&outcome);
    assert!(
        message.contains("/sub") && message.contains("symbolic link"),
        "{message}"
    );
    // A new grant of the same path is refused when it is made.
    let fresh = longhand_hands::DirGrant::new(proj.join("sub"), "/sub", Access::ReadOnly)
        .expect_err("a grant through a symlink");
    assert!(fresh.to_string().contains("is a symbolic link"), "{fresh}");

    // A directory of the same name is a different directory.
    std::fs::remove_file(proj.join("sub")).expect("rm link");
    std::fs::create_dir(proj.join("sub")).expect("mkdir");
    let message = refused_message(&call_probe(&sub, "list", json!({ "path": "/sub" })).await);
    assert!(message.contains("was replaced"), "{message}");

    // Put back, it is the granted directory again.
    std::fs::remove_dir(proj.join("sub")).expect("rmdir");
    std::fs::rename(proj.join("old"), proj.join("sub")).expect("mv back");
    let read = call_probe(&sub, "read", json!({ "path": "/sub/inside.txt" })).await;
    assert_eq!(ok(&read)["content"], json!("inside"));
    assert_still_serves().await;
}

#[tokio::test]
async fn a_symlink_in_any_component_of_a_grant_is_refused() {
    let (root, proj) = project();
    std::fs::create_dir_all(proj.join("a/b")).expect("mkdir");
    let grant = Grants {
        dirs: vec![dir(&proj.join("a/b"), "/b", Access::ReadOnly)],
        ..Grants::default()
    };
    // A middle component becomes a link to a look-alike tree elsewhere.
    std::fs::create_dir_all(root.path().join("elsewhere/b")).expect("mkdir");
    std::fs::rename(proj.join("a"), proj.join("a-real")).expect("mv");
    std::os::unix::fs::symlink(root.path().join("elsewhere"), proj.join("a")).expect("ln");
    let message = refused_message(&call_probe(&grant, "list", json!({ "path": "/b" })).await);
    assert!(
        message.contains("symbolic link") && message.contains("/a"),
        "{message}"
    );
    assert_still_serves().await;
}

/// Run `f` and insist it returns well before `limit`.
async fn quickly<T>(limit: Duration, f: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let out = tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("did not finish within {limit:?}"));
    assert!(started.elapsed() < limit);
    out
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo failed");
}

#[tokio::test]
async fn special_files_are_refused_without_blocking() {
    let (_root, proj) = project();
    mkfifo(&proj.join("fifo"));
    let _socket =
        std::os::unix::net::UnixListener::bind(proj.join("socket")).expect("bind a socket");
    std::os::unix::fs::symlink("fifo", proj.join("to-fifo")).expect("ln");
    let mut grants = rw(&proj);
    grants.limits.timeout = Duration::from_secs(5);
    for (tool, input) in [
        ("read", json!({ "path": "/w/fifo" })),
        ("open", json!({ "path": "/w/fifo", "write": true })),
        ("read", json!({ "path": "/w/to-fifo" })),
        ("read", json!({ "path": "/w/socket" })),
        ("write", json!({ "path": "/w/fifo", "content": "x" })),
    ] {
        let outcome = quickly(
            Duration::from_secs(3),
            call_probe(&grants, tool, input.clone()),
        )
        .await;
        let out: &Value = ok(&outcome);
        assert_eq!(out["ok"], json!(false), "{tool} {input} succeeded: {out}");
        assert_eq!(
            out["kind"],
            json!("PermissionDenied"),
            "{tool} {input}: {out}"
        );
        assert!(
            outcome
                .receipt
                .denied
                .iter()
                .any(|d| d.capability == "filesystem"
                    && d.reason.contains("only regular files and directories")),
            "{tool} {input}: no denial naming it: {:?}",
            outcome.receipt.denied
        );
    }
    // /dev/null and friends are outside any grant; a grant of /dev itself
    // still yields no device.
    let dev = Grants {
        dirs: vec![dir(Path::new("/dev"), "/dev", Access::ReadOnly)],
        ..Grants::default()
    };
    let outcome = quickly(
        Duration::from_secs(3),
        call_probe(&dev, "read", json!({ "path": "/dev/zero" })),
    )
    .await;
    assert_eq!(ok(&outcome)["kind"], json!("PermissionDenied"));
    assert_still_serves().await;
}

fn with_write_limit(path: &Path, limit: u64) -> Grants {
    let mut grants = rw(path);
    grants.limits = Limits {
        max_write_bytes: limit,
        ..Limits::default()
    };
    grants
}

#[tokio::test]
async fn writes_are_counted_and_stopped_at_the_limit() {
    let (_root, proj) = project();
    let limit = 1 << 20;
    let grants = with_write_limit(&proj, limit);

    // Within the limit: counted exactly (data plus one block for the file).
    let out = call_probe(
        &grants,
        "fill",
        json!({ "path": "/w/small", "bytes": 100_000 }),
    )
    .await;
    assert_eq!(ok(&out)["written"], json!(100_000));
    assert_eq!(out.receipt.bytes_written, 100_000 + 4096);
    assert!(out.receipt.limits_hit.is_empty());

    // Past it, however the bytes are written.
    for how in ["stream", "truncate", "sparse"] {
        let out = call_probe(
            &grants,
            "fill",
            json!({ "path": format!("/w/big-{how}"), "bytes": 8 << 20, "how": how }),
        )
        .await;
        let value = ok(&out);
        assert_eq!(value["ok"], json!(false), "{how}: {value}");
        // `set-size` answers insufficient-space (ENOSPC). A failing write
        // stream reaches a wasi-libc guest as EIO: wasi-libc does not ask
        // `filesystem-error-code`, which would say insufficient-space.
        if how == "truncate" {
            assert!(
                value["error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("space"),
                "{how}: the guest should see 'no space': {value}"
            );
        }
        assert!(
            out.receipt.bytes_written <= limit,
            "{how}: {:?}",
            out.receipt
        );
        assert!(
            out.receipt
                .limits_hit
                .iter()
                .any(|l| l.contains("write limit")),
            "{how}: {:?}",
            out.receipt.limits_hit
        );
        // Size and blocks allocated: a sparse file's holes use no disk, the
        // bytes written far past its end each take a block.
        let on_disk = std::fs::metadata(proj.join(format!("big-{how}")))
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                m.len().max(m.blocks() * 512)
            })
            .unwrap_or(0);
        assert!(on_disk <= limit, "{how}: {on_disk} bytes reached the disk");
    }

    // Empty entries are not free: a flood of directories hits it too.
    let out = call_probe(&grants, "mkdirs", json!({ "path": "/w", "count": 100_000 })).await;
    assert_eq!(ok(&out)["ok"], json!(false));
    assert!(out.receipt.bytes_written <= limit);
    let made = std::fs::read_dir(&proj).expect("ls").count();
    assert!(made < 300, "{made} entries were created");
    assert_still_serves().await;
}
