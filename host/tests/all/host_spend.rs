//! What a guest can make the host spend (issue 16, "Hands"), through the
//! real binary: host memory outside the guest's limit, file descriptors
//! that starve other calls, and symbolic links moved into a grant that
//! does not allow them.
//!
//! The guest is `tests/fixtures/probe` (its `hoard_fs`, `symlink`,
//! `rename` and `hardlink` tools), built here with
//! `hands::dev::build_component`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use longhand_hands::dev;
use serde_json::{Value, json};

use crate::support::{Home, write};

/// The probe fixture, built once per test run.
fn probe() -> &'static str {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/probe");
        dev::build_component(&crate_dir)
            .unwrap_or_else(|e| panic!("building the probe fixture: {e:#}"))
    })
    .to_str()
    .expect("utf-8 path")
}

/// `longhand tool call probe TOOL --json --input INPUT GRANTS…`, its JSON
/// answer, and the process's peak resident memory in KiB (from `wait4`, so
/// it is this process's own, not the test's other children's).
fn call_measured(home: &Home, tool: &str, input: Value, grants: &[&str]) -> (Value, u64) {
    let input = input.to_string();
    let args = [
        &[
            "tool",
            "call",
            probe(),
            tool,
            "--json",
            "--input",
            input.as_str(),
        ],
        grants,
    ]
    .concat();
    #[allow(
        clippy::zombie_processes,
        reason = "reaped below with wait4, which also gives its peak memory"
    )]
    let mut child = home
        .cmd(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start longhand");
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let mut text = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut text).expect("read stdout");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed `rusage` is a valid value for the kernel to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (std never waits
    // unless asked); `status` and `usage` are valid for writes.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 failed");
    let stderr = err.join().unwrap_or_default();
    let answer: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text}\nstderr:\n{stderr}"));
    (answer, u64::try_from(usage.ru_maxrss).unwrap_or(0))
}

fn call(home: &Home, tool: &str, input: Value, grants: &[&str]) -> Value {
    call_measured(home, tool, input, grants).0
}

fn limits_hit(answer: &Value) -> String {
    answer["receipt"]["limits_hit"].to_string()
}

fn denials(answer: &Value) -> String {
    answer["receipt"]["denied"].to_string()
}

/// A read-only grant of 60,000 files; the published attack opened ~1,000
/// listings of it with `--memory 16` and took the host to 2.1 GB. Now the
/// listings are read lazily and each holds two descriptors of the call's 64,
/// and the host grows by at most 64 MiB.
#[test]
fn listings_of_a_huge_directory_stay_within_the_host_budget() {
    let home = Home::new();
    let big = home.path().join("big");
    std::fs::create_dir_all(&big).expect("mkdir");
    for i in 0..60_000 {
        std::fs::File::create(big.join(format!("file-with-a-longish-name-{i:06}")))
            .expect("create");
    }
    let grant = format!("{}:/w:ro", big.display());
    let grants = ["--memory", "16", "--dir", grant.as_str()];
    let listing = |count: u64| json!({"path": "/w", "count": count, "how": "listings"});

    let (one, baseline) = call_measured(&home, "hoard_fs", listing(1), &grants);
    assert_eq!(one["output"]["made"], json!(1), "{one}");

    let started = Instant::now();
    let (many, peak) = call_measured(&home, "hoard_fs", listing(1000), &grants);
    let output = &many["output"];
    // 64 descriptors, two per listing.
    assert_eq!(output["made"], json!(32), "{many}");
    assert!(
        output["error"]
            .as_str()
            .unwrap_or_default()
            .contains("quota"),
        "{many}"
    );
    assert!(limits_hit(&many).contains("max_open_files"), "{many}");
    let growth_mib = peak.saturating_sub(baseline) / 1024;
    eprintln!(
        "60,000-file listing attack: peak RSS {} MiB against {} MiB for one listing \
         (growth {growth_mib} MiB) in {:?}",
        peak / 1024,
        baseline / 1024,
        started.elapsed()
    );
    assert!(growth_mib <= 64, "the host grew by {growth_mib} MiB");

    // A smaller host budget binds first, and the receipt names it.
    let small = [&grants[..], &["--host-memory", "1"]].concat();
    let capped = call(&home, "hoard_fs", listing(1000), &small);
    let made = capped["output"]["made"].as_u64().unwrap_or(u64::MAX);
    assert!((1..32).contains(&made), "{capped}");
    assert!(
        capped["output"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("insufficient-memory"),
        "{capped}"
    );
    assert!(limits_hit(&capped).contains("host_memory"), "{capped}");
}

/// Every way to hold a host descriptor counts: a handle, a stream that
/// outlived its handle, a listing.
#[test]
fn a_call_holds_at_most_its_descriptor_budget_however_it_holds_them() {
    let home = Home::new();
    let ws = home.path().join("ws");
    write(&ws.join("f.txt"), "data");
    let grant = format!("{}:/w:ro", ws.display());
    for (how, path, per) in [
        ("files", "/w/f.txt", 1),
        ("streams", "/w/f.txt", 1),
        ("listings", "/w", 2),
    ] {
        let out = call(
            &home,
            "hoard_fs",
            json!({"path": path, "count": 2000, "how": how}),
            &["--dir", grant.as_str()],
        );
        assert_eq!(out["output"]["made"], json!(64 / per), "{how}: {out}");
        assert!(
            out["output"]["error"]
                .as_str()
                .unwrap_or_default()
                .contains("quota"),
            "{how}: {out}"
        );
        assert!(limits_hit(&out).contains("max_open_files"), "{how}: {out}");
    }
}

/// `longhand mcp --stdio`, spoken to line by line.
struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    /// Answers read while waiting for another: calls finish in any order.
    early: std::collections::HashMap<u64, Value>,
}

impl Mcp {
    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write to the server");
    }

    /// The answer to request `id`; answers to other requests read on the
    /// way are kept for their own turn, notifications skipped.
    fn answer(&mut self, id: u64) -> Value {
        if let Some(early) = self.early.remove(&id) {
            return early;
        }
        loop {
            let mut line = String::new();
            let read = self.stdout.read_line(&mut line).expect("read");
            assert!(read > 0, "the server closed stdout before answering {id}");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            match message["id"].as_u64() {
                Some(got) if got == id => return message,
                Some(other) => {
                    self.early.insert(other, message);
                }
                None => {}
            }
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Twenty calls hoarding descriptors at once beside an ordinary call in
/// the same process: each hog is stopped at its budget, and the ordinary
/// call succeeds. The server starts with a soft limit of 400 open files
/// (the hard limit unchanged): the binary raises it, or the hogs would get
/// 8 descriptors each (their share of 400 with 32 calls at once) instead of
/// 64 — and before budgets, the hogs took every descriptor there was.
#[test]
fn twenty_descriptor_hogs_do_not_starve_a_normal_call() {
    const HOGS: u64 = 20;
    let home = Home::new();
    let ws = home.path().join("ws");
    write(&ws.join("f.txt"), "data");
    let grant = format!("{}:/w:rw", ws.display());
    let mut cmd = home.cmd(&[
        "mcp",
        "--stdio",
        "--tool",
        probe(),
        "--dir",
        grant.as_str(),
        "--max-concurrent",
        "32",
    ]);
    // SAFETY: between fork and exec only async-signal-safe calls:
    // getrlimit and setrlimit.
    unsafe {
        cmd.pre_exec(|| {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            limit.rlim_cur = limit.rlim_cur.min(400);
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start longhand mcp");
    let stdin = child.stdin.take().expect("piped");
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut mcp = Mcp {
        child,
        stdin,
        stdout,
        early: std::collections::HashMap::new(),
    };
    mcp.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "hogs", "version": "0"}}}),
    );
    mcp.answer(1);
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    for i in 0..HOGS {
        mcp.send(
            &json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {
            "name": "hoard_fs", "arguments": {
                "path": "/w/f.txt", "count": 5000, "how": "files",
                "held": format!("/w/held-{i}"), "release": "/w/release"}}}),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    while (0..HOGS).any(|i| !ws.join(format!("held-{i}")).exists()) {
        assert!(Instant::now() < deadline, "the hogs never all held");
        std::thread::sleep(Duration::from_millis(20));
    }

    mcp.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "read", "arguments": {"path": "/w/f.txt"}}}),
    );
    let normal = mcp.answer(7);
    write(&ws.join("release"), "");
    assert_eq!(normal["result"]["isError"], json!(false), "{normal}");
    assert_eq!(
        normal["result"]["structuredContent"]["content"],
        json!("data"),
        "{normal}"
    );

    for i in 0..HOGS {
        let hog = mcp.answer(100 + i);
        let result = &hog["result"]["structuredContent"];
        assert_eq!(result["made"], json!(64), "{hog}");
        assert!(
            result["error"]
                .as_str()
                .unwrap_or_default()
                .contains("quota"),
            "{hog}"
        );
        let receipt = hog["result"]["_meta"]["longhand/receipt"].to_string();
        assert!(receipt.contains("max_open_files"), "{hog}");
    }
}

/// Two grants: `/l` allows symbolic links, `/p` does not.
struct TwoGrants {
    home: Home,
    linked: PathBuf,
    plain: PathBuf,
    flags: Vec<String>,
}

impl TwoGrants {
    fn new() -> Self {
        let home = Home::new();
        let linked = home.path().join("linked");
        let plain = home.path().join("plain");
        std::fs::create_dir_all(&linked).expect("mkdir");
        std::fs::create_dir_all(&plain).expect("mkdir");
        let flags = vec![
            "--mount".to_owned(),
            format!("src={},dst=/l,mode=rw,symlinks=true", linked.display()),
            "--mount".to_owned(),
            format!("src={},dst=/p,mode=rw", plain.display()),
        ];
        Self {
            home,
            linked,
            plain,
            flags,
        }
    }

    fn call(&self, tool: &str, input: Value) -> Value {
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        call(&self.home, tool, input, &flags)
    }

    #[track_caller]
    fn refused(&self, tool: &str, input: Value, landed: &str) {
        let out = self.call(tool, input.clone());
        assert_eq!(out["output"]["ok"], json!(false), "{tool} {input}: {out}");
        assert!(
            denials(&out).contains("symbolic links"),
            "{tool} {input}: no denial in {out}"
        );
        assert!(
            std::fs::symlink_metadata(self.plain.join(landed)).is_err(),
            "{tool} {input}: {landed} landed in the plain grant"
        );
    }
}

#[test]
fn a_symlink_cannot_be_moved_or_linked_into_a_plain_grant() {
    let g = TwoGrants::new();
    let made = g.call(
        "symlink",
        json!({"target": "../../../../../../../etc/passwd", "link": "/l/link"}),
    );
    assert_eq!(made["output"]["ok"], json!(true), "{made}");

    g.refused(
        "rename",
        json!({"from": "/l/link", "to": "/p/link"}),
        "link",
    );
    g.refused(
        "hardlink",
        json!({"from": "/l/link", "to": "/p/hard"}),
        "hard",
    );
    assert!(std::fs::symlink_metadata(g.linked.join("link")).is_ok());

    // A directory from the linked grant may hold links: it stays there.
    std::fs::create_dir_all(g.linked.join("d")).expect("mkdir");
    std::os::unix::fs::symlink("/etc/passwd", g.linked.join("d/inner")).expect("symlink");
    g.refused("rename", json!({"from": "/l/d", "to": "/p/d"}), "d");

    // A link already in the plain grant cannot be moved about in it either.
    std::os::unix::fs::symlink("/etc/passwd", g.plain.join("old")).expect("symlink");
    g.refused("rename", json!({"from": "/p/old", "to": "/p/new"}), "new");

    // Ordinary files still move and link across, and links move where
    // links are granted.
    std::fs::write(g.linked.join("f.txt"), "f").expect("write");
    for (tool, from, to) in [
        ("rename", "/l/f.txt", "/p/f.txt"),
        ("hardlink", "/p/f.txt", "/p/g.txt"),
        ("rename", "/l/link", "/l/moved"),
    ] {
        let out = g.call(tool, json!({"from": from, "to": to}));
        assert_eq!(
            out["output"]["ok"],
            json!(true),
            "{tool} {from} {to}: {out}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(g.plain.join("g.txt")).expect("read"),
        "f"
    );
}

#[test]
fn grants_with_and_without_symlinks_may_not_overlap() {
    let g = TwoGrants::new();
    std::fs::create_dir_all(g.linked.join("sub")).expect("mkdir");
    let inner = format!("src={},dst=/s,mode=ro", g.linked.join("sub").display());
    let flags = [
        g.flags[0].as_str(),
        g.flags[1].as_str(),
        "--mount",
        inner.as_str(),
    ];
    let out = g.home.run(
        &[
            &[
                "tool",
                "call",
                probe(),
                "read",
                "--input",
                r#"{"path":"/s/x"}"#,
            ],
            &flags[..],
        ]
        .concat(),
    );
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("overlaps") && out.stderr.contains("/s"),
        "{}",
        out.stderr
    );
}
