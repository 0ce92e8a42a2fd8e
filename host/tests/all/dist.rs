//! Distribution and trust (issue 18, part 3), through the binary: `tool
//! publish` to a real OCI registry (Debian's `docker-registry`, one per
//! test on a free loopback port, filesystem storage in a temporary
//! directory), `tool install` on a fresh home, calls and an agent by name,
//! signatures, the lock, upgrades held for review, the install store
//! verified at every load, and a hostile registry (a loopback server that
//! answers what no registry should).
//!
//! The component is the `greet` tool of `tool new --lang rust`, built once
//! per test run (v1, and v2 asking for one more host); the Python and
//! JavaScript ones come from their toolchains when
//! `.ci/setup-componentize.sh` installed them. `.ci/setup-registry.sh`
//! names the registry in `LONGHAND_REGISTRY_BIN`; without it the tests
//! that need one say they were skipped, unless
//! `LONGHAND_REQUIRE_EXTERNAL=1`, when they fail.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use longhand_session::Event;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{self, Ended, Home};

/// The host the v2 component asks for beyond v1.
const EXTRA_HOST: &str = "api.example.com";

fn required() -> bool {
    std::env::var("LONGHAND_REQUIRE_EXTERNAL").as_deref() == Ok("1")
}

fn missing(what: &str, how: &str) {
    if required() {
        panic!("{what} is missing and LONGHAND_REQUIRE_EXTERNAL=1: {how}");
    }
    eprintln!("skipped: {what} is missing; {how}");
}

/// A running `docker-registry` on 127.0.0.1, stopped when dropped.
struct Registry {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
}

impl Registry {
    /// A fresh registry, or `None` (skipped) when the binary is missing.
    fn start() -> Option<Self> {
        let bin = std::env::var_os("LONGHAND_REGISTRY_BIN")
            .map(PathBuf::from)
            .or_else(|| Some(PathBuf::from("/usr/bin/docker-registry")))
            .filter(|b| b.is_file());
        let Some(bin) = bin else {
            missing(
                "the OCI registry (LONGHAND_REGISTRY_BIN)",
                "run `eval \"$(bash .ci/setup-registry.sh)\"` to install it",
            );
            return None;
        };
        let dir = TempDir::new().unwrap();
        let port = free_port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let registry = Self {
            child: Some(child),
            port,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while get(port, "/v2/").is_none() {
            assert!(Instant::now() < deadline, "the registry did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(registry)
    }

    /// `oci://127.0.0.1:PORT/<repo_tag>`.
    fn url(&self, repo_tag: &str) -> String {
        format!("oci://127.0.0.1:{}/{repo_tag}", self.port)
    }

    /// Where the registry keeps the blob `digest`.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain GET to the registry; `None` when nothing answers.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

fn sha256(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))
    )
}

/// `longhand <args>` in `dir` with `home`, and what a toolchain needs from
/// the environment (see [`crate::author::longhand_at`]).
fn author(home: &Path, dir: &Path, args: &[&str]) -> Ended {
    crate::author::longhand_at(home, dir, args)
}

fn repo_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk")
}

/// `tool new NAME --lang LANG` in `outside`, then `tool build --json`:
/// the component's bytes.
fn new_and_build(
    home: &Path,
    outside: &Path,
    name: &str,
    lang_args: &[&str],
    link: Option<(&str, PathBuf)>,
    edit: impl FnOnce(&Path),
) -> Vec<u8> {
    let sdk = repo_sdk();
    let mut args = vec!["tool", "new", name];
    args.extend_from_slice(lang_args);
    args.extend_from_slice(&["--sdk", sdk.to_str().unwrap()]);
    author(home, outside, &args).expect_code(0);
    let project = outside.join(name);
    if let Some((link, target)) = link {
        std::os::unix::fs::symlink(target, project.join(link)).unwrap();
    }
    edit(&project);
    let built = author(home, &project, &["tool", "build", "--json"]);
    built.expect_code(0);
    let report: Value = serde_json::from_str(built.stdout.last().expect("a JSON line")).unwrap();
    std::fs::read(report["component"].as_str().unwrap()).unwrap()
}

/// The Rust `greet` component, v1 and v2 (v2 asks for [`EXTRA_HOST`]),
/// built once per run into the test's temporary directory.
fn greet_components() -> &'static (PathBuf, PathBuf) {
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dist-greet");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let home = TempDir::new().unwrap();
        let v1 = new_and_build(
            home.path(),
            &out,
            "greet",
            &["--lang", "rust"],
            None,
            |_| {},
        );
        std::fs::write(out.join("greet-v1.wasm"), &v1).unwrap();
        let lib = out.join("greet/src/lib.rs");
        let text = std::fs::read_to_string(&lib).unwrap();
        let asks_more = text.replacen(
            "    tools: [Greet],\n",
            &format!("    tools: [Greet],\n    requests: {{ hosts: [\"{EXTRA_HOST}\"] }},\n"),
            1,
        );
        assert_ne!(text, asks_more, "the template's export! changed shape");
        std::fs::write(&lib, asks_more).unwrap();
        let built = author(
            home.path(),
            &out.join("greet"),
            &["tool", "build", "--json"],
        );
        built.expect_code(0);
        let report: Value = serde_json::from_str(built.stdout.last().unwrap()).unwrap();
        let v2 = std::fs::read(report["component"].as_str().unwrap()).unwrap();
        assert_ne!(v1, v2);
        std::fs::write(out.join("greet-v2.wasm"), &v2).unwrap();
        (out.join("greet-v1.wasm"), out.join("greet-v2.wasm"))
    })
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A signing key pair in `dir`, trusted by each of `homes`.
fn key(dir: &Path, homes: &[&Home]) -> PathBuf {
    let secret = dir.join("signing.key");
    let any = Home::new();
    any.run(&["tool", "keygen", path_str(&secret)])
        .expect_code(0);
    let public = dir.join("signing.key.pub");
    for home in homes {
        home.run(&["trust", "add", path_str(&public)])
            .expect_code(0);
    }
    secret
}

/// `tool publish` and the manifest digest it printed.
fn publish(home: &Home, component: &Path, target: &str, sign: Option<&Path>) -> String {
    let mut args = vec!["tool", "publish", path_str(component), target];
    if let Some(key) = sign {
        args.extend_from_slice(&["--sign", path_str(key)]);
    }
    let out = home.run(&args);
    out.expect_code(0);
    let digest = out.stdout_text().trim().to_owned();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    digest
}

fn greet(home: &Home, name: &str) -> Ended {
    home.run(&[
        "tool",
        "call",
        name,
        "greet",
        "--input",
        r#"{"name":"Ada"}"#,
    ])
}

fn expect_greeting(out: &Ended) {
    out.expect_code(0);
    let value: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert_eq!(value, json!({"greeting": "Hello, Ada!"}));
}

fn listed(home: &Home) -> Vec<Value> {
    let out = home.run(&["tool", "list", "--json"]);
    out.expect_code(0);
    out.json_lines()
        .into_iter()
        .filter(|l| l.get("source").is_some())
        .collect()
}

/// An agent in `dir` whose one tool is `component`, and a script that
/// calls its `greet` and then finishes.
fn greet_agent(dir: &Path, component: &str) -> PathBuf {
    support::write(
        &dir.join("agent.toml"),
        &format!(
            r#"name = "greeter"
instructions = "Greet Ada."
goal = "Greet Ada."

[model]
provider = "replay"
model = "script"
cassette = "unused-cassette.json"

[[tools]]
component = "{component}"
"#
        ),
    );
    let script = dir.join("script.json");
    let responses = [
        support::tool_turn(
            "greeting",
            vec![support::call(
                "g1",
                &format!("{component}__greet"),
                json!({"name": "Ada"}),
            )],
            10,
            5,
        ),
        support::text_turn("done", 10, 5),
    ];
    support::write(&script, &json!({"responses": responses}).to_string());
    script
}

fn greeting_in_log(home: &Home, session: &str) -> Value {
    let log = home.log(session);
    let result = log
        .iter()
        .find_map(|r| match &r.event {
            Event::ToolFinished {
                call_id,
                ok: true,
                result,
                ..
            } if call_id == "g1" => Some(result.clone()),
            _ => None,
        })
        .expect("the greet call finished ok");
    serde_json::from_slice(&support::blob(home, &result)).unwrap()
}

#[test]
fn a_signed_tool_goes_publish_install_call_and_runs_in_an_agent_by_name() {
    let Some(mut registry) = Registry::start() else {
        return;
    };
    let (v1, _) = greet_components();
    let keys = TempDir::new().unwrap();
    let author_home = Home::new();
    let home = Home::new();
    let secret = key(keys.path(), &[&home]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the secret key is private");
    }
    let source = registry.url("tools/greet:v1");
    let manifest = publish(&author_home, v1, &source, Some(&secret));

    let out = home.run(&["tool", "install", &source]);
    out.expect_code(0);
    let text = out.stdout_text();
    assert!(text.contains("installed greet from"), "{text}");
    assert!(text.contains(&format!("manifest: {manifest}")), "{text}");
    assert!(text.contains("signer:   ed25519:"), "{text}");
    assert!(text.contains("asks for"), "{text}");
    // Precompiled at install: the cache holds the installed digest.
    let installed = listed(&home);
    assert_eq!(installed.len(), 1, "{installed:?}");
    let digest = installed[0]["digest"].as_str().unwrap().to_owned();
    assert_eq!(installed[0]["source"], source);
    assert_eq!(installed[0]["manifest_digest"], manifest);
    assert!(
        installed[0]["signer"]
            .as_str()
            .unwrap()
            .starts_with("ed25519:")
    );
    let hex = digest.trim_start_matches("sha256:");
    let cached = support::files_under(&home.path().join("cache/components"));
    assert!(
        cached
            .iter()
            .any(|p| p.file_name().unwrap().to_str().unwrap().starts_with(hex)),
        "no compiled entry for {digest}"
    );
    let listed_text = home.run(&["tool", "list"]).stdout_text();
    assert!(listed_text.contains(&digest) && listed_text.contains("signer ed25519:"));

    expect_greeting(&greet(&home, "greet"));

    // An agent names it like a built-in, and runs offline.
    let agent = TempDir::new().unwrap();
    let script = greet_agent(agent.path(), "greet");
    let (run, session) = support::run_script(&home, agent.path(), &script);
    run.expect_code(0);
    assert_eq!(
        greeting_in_log(&home, &session),
        json!({"greeting": "Hello, Ada!"})
    );

    // The registry gone: calls come from the install store, and installing
    // the same source again is served from it too.
    registry.stop();
    expect_greeting(&greet(&home, "greet"));
    let again = home.run(&["tool", "install", &source]);
    again.expect_code(0);
    assert!(
        again.stderr.contains("using the copy installed"),
        "{}",
        again.stderr
    );
    // A fresh home cannot: nothing there, nowhere to fetch it from.
    let fresh = Home::new();
    let out = fresh.run(&["tool", "install", &source, "--allow-unsigned"]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains(&format!("127.0.0.1:{}", registry.port)),
        "{}",
        out.stderr
    );
}

#[test]
fn unsigned_and_untrusted_components_are_refused_unless_allowed_or_pinned() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let (v1, _) = greet_components();
    let author_home = Home::new();
    let unsigned = registry.url("greet:unsigned");
    publish(&author_home, v1, &unsigned, None);

    let home = Home::new();
    let out = home.run(&["tool", "install", &unsigned]);
    out.expect_code(3);
    assert!(
        out.stderr.contains("is not signed; refused"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--allow-unsigned"), "{}", out.stderr);
    assert!(listed(&home).is_empty());
    assert_ne!(greet(&home, "greet").code, Some(0));

    // Signed by a key this home does not trust: refused the same way.
    let keys = TempDir::new().unwrap();
    let secret = key(keys.path(), &[]);
    let signed = registry.url("greet:signed");
    publish(&author_home, v1, &signed, Some(&secret));
    let out = home.run(&["tool", "install", &signed]);
    out.expect_code(3);
    assert!(
        out.stderr.contains("by no key in the trust store"),
        "{}",
        out.stderr
    );

    // Allowed explicitly, or pinned by digest: installed, and said so.
    let out = home.run(&["tool", "install", &unsigned, "--allow-unsigned"]);
    out.expect_code(0);
    assert!(
        out.stdout_text().contains("unsigned (allowed"),
        "{}",
        out.stdout_text()
    );
    expect_greeting(&greet(&home, "greet"));
    let digest = sha256(&std::fs::read(v1).unwrap());
    let pinned = Home::new();
    let wrong = format!("sha256:{}", "0".repeat(64));
    let out = pinned.run(&["tool", "install", &unsigned, "--digest", &wrong]);
    out.expect_code(3);
    assert!(out.stderr.contains("not the pinned"), "{}", out.stderr);
    let out = pinned.run(&[
        "tool", "install", &unsigned, "--digest", &digest, "--name", "hi",
    ]);
    out.expect_code(0);
    expect_greeting(&greet(&pinned, "hi"));
    // A built-in's name is never taken.
    let out = pinned.run(&[
        "tool",
        "install",
        &unsigned,
        "--allow-unsigned",
        "--name",
        "fs",
    ]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("name of a built-in tool"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_tampered_blob_in_the_registry_is_refused() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let (v1, _) = greet_components();
    let bytes = std::fs::read(v1).unwrap();
    let author_home = Home::new();
    let source = registry.url("greet:v1");
    publish(&author_home, v1, &source, None);
    let blob = registry.blob_file(&sha256(&bytes));
    let mut stored = std::fs::read(&blob).expect("the registry stored the layer");
    assert_eq!(stored, bytes);
    // One byte of the component's name section flipped, same length.
    let at = stored.len() - 3;
    stored[at] ^= 0x20;
    std::fs::write(&blob, &stored).unwrap();

    let home = Home::new();
    let out = home.run(&["tool", "install", &source, "--allow-unsigned"]);
    out.expect_code(3);
    assert!(
        out.stderr.contains("served changed bytes"),
        "{}",
        out.stderr
    );
    assert!(listed(&home).is_empty());
}

/// A tag or repository the registry does not have is a name to fix: exit
/// 2, saying so, not the exit code of a registry that failed.
#[test]
fn a_tag_or_repository_the_registry_lacks_is_a_usage_error() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let (v1, _) = greet_components();
    publish(&Home::new(), v1, &registry.url("greet:v1"), None);
    let home = Home::new();
    for source in [registry.url("greet:v9"), registry.url("nobody:v1")] {
        let out = home.run(&["tool", "install", &source, "--allow-unsigned"]);
        out.expect_code(2);
        assert!(
            out.stderr.contains("no such tag or repository"),
            "{source}: {}",
            out.stderr
        );
    }
    assert!(listed(&home).is_empty());
}

#[test]
fn a_moved_tag_fails_lock_locked_and_a_bigger_upgrade_is_held_until_approved() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let (v1, v2) = greet_components();
    let keys = TempDir::new().unwrap();
    let home = Home::new();
    let secret = key(keys.path(), &[&home]);
    let author_home = Home::new();
    let source = registry.url("greet:latest");
    let first = publish(&author_home, v1, &source, Some(&secret));
    home.run(&["tool", "install", &source]).expect_code(0);
    // The digest of the signed bytes, as published and installed.
    let v1_digest = listed(&home)[0]["digest"].as_str().unwrap().to_owned();

    let agent = TempDir::new().unwrap();
    let script = greet_agent(agent.path(), "greet");
    let dir = path_str(agent.path());
    let out = home.run(&["tool", "lock", dir]);
    out.expect_code(0);
    let lock = std::fs::read_to_string(agent.path().join("longhand.lock")).unwrap();
    assert!(lock.contains(&first), "{lock}");
    assert!(
        lock.contains(&source) && lock.contains("signer = \"ed25519:"),
        "{lock}"
    );
    home.run(&["tool", "lock", dir, "--locked"]).expect_code(0);

    // The tag moves to v2, which asks for one more host.
    let second = publish(&author_home, v2, &source, Some(&secret));
    assert_ne!(first, second);
    let out = home.run(&["tool", "lock", dir, "--locked"]);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("the tag moved"), "{}", out.stderr);
    assert!(out.stderr.contains(&second), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(agent.path().join("longhand.lock")).unwrap(),
        lock,
        "--locked writes nothing"
    );

    let out = home.run(&["tool", "upgrade", "greet"]);
    out.expect_code(3);
    assert!(
        out.stdout_text().contains(&format!("+ host {EXTRA_HOST}")),
        "{}",
        out.stdout_text()
    );
    assert!(out.stderr.contains("held"), "{}", out.stderr);
    assert_eq!(listed(&home)[0]["digest"], v1_digest, "nothing changed");

    let out = home.run(&["tool", "upgrade", "greet", "--approve"]);
    out.expect_code(0);
    let installed = listed(&home);
    assert_ne!(installed[0]["digest"], v1_digest);
    assert_eq!(installed[0]["manifest_digest"], second);
    expect_greeting(&greet(&home, "greet"));

    // The lock still pins v1: `run` refuses v2 before compiling it.
    let run = home.run(&["run", dir, "--script", path_str(&script), "--json"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains(&format!("pinned to {v1_digest}")),
        "{}",
        run.stderr
    );
    // `tool verify` beside the lock fails on it, and so does `--all`
    // (every installed tool, the lock still checked).
    for args in [&["tool", "verify"][..], &["tool", "verify", "--all"]] {
        let mut cmd = home.cmd(args);
        cmd.current_dir(agent.path());
        let out = support::run(cmd);
        out.expect_code(3);
        assert!(
            out.stdout_text().contains("longhand.lock pins"),
            "{args:?}: {}",
            out.stdout_text()
        );
    }
    // Locked again, it runs.
    home.run(&["tool", "lock", dir]).expect_code(0);
    let (run, _) = support::run_script(&home, agent.path(), &script);
    run.expect_code(0);
    home.run(&["tool", "verify"]).expect_code(0);
}

/// `tool install` names a tool by its component, not its repository;
/// `tool upgrade` moves a tool installed from a version tag to the
/// repository's newest version tag (not a pre-release, not `latest`), and
/// says which; one installed from `latest` re-reads `latest`.
#[test]
fn an_upgrade_moves_to_the_newest_version_tag() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let (v1, v2) = greet_components();
    let author = Home::new();
    publish(&author, v1, &registry.url("team/greeter:1.0"), None);
    publish(&author, v1, &registry.url("team/greeter:latest"), None);
    publish(&author, v2, &registry.url("team/greeter:1.10.0"), None);
    publish(&author, v1, &registry.url("team/greeter:1.9"), None);
    publish(&author, v1, &registry.url("team/greeter:2.0.0-rc.1"), None);
    let home = Home::new();
    home.run(&[
        "tool",
        "install",
        &registry.url("team/greeter:1.0"),
        "--allow-unsigned",
    ])
    .expect_code(0);
    // Named by the component (its describe says `greet`), not by the
    // repository it came from.
    assert_eq!(listed(&home)[0]["name"], "greet", "{:?}", listed(&home));
    let before = listed(&home)[0]["digest"].clone();
    let out = home.run(&["tool", "upgrade", "greet", "--approve"]);
    out.expect_code(0);
    assert!(
        out.stderr
            .contains("newest version tag is 1.10.0 (installed from 1.0)"),
        "{}",
        out.stderr
    );
    let after = listed(&home);
    assert_ne!(after[0]["digest"], before);
    assert!(
        after[0]["source"]
            .as_str()
            .unwrap()
            .ends_with("team/greeter:1.10.0"),
        "{}",
        after[0]
    );
    // Nothing newer than 1.10.0 (2.0.0-rc.1 is a pre-release).
    let out = home.run(&["tool", "upgrade", "greet"]);
    out.expect_code(0);
    assert!(
        out.stdout_text().contains("up to date"),
        "{}",
        out.stdout_text()
    );

    let latest = Home::new();
    latest
        .run(&[
            "tool",
            "install",
            &registry.url("team/greeter:latest"),
            "--allow-unsigned",
        ])
        .expect_code(0);
    let out = latest.run(&["tool", "upgrade", "greet"]);
    out.expect_code(0);
    assert!(!out.stderr.contains("newest version tag"), "{}", out.stderr);
    assert!(
        out.stdout_text().contains("up to date"),
        "{}",
        out.stdout_text()
    );
}

#[test]
fn an_installed_copy_changed_on_disk_or_untrusted_since_is_refused_at_every_load() {
    let (v1, _) = greet_components();
    let keys = TempDir::new().unwrap();
    let home = Home::new();
    let secret = key(keys.path(), &[&home]);
    // Sign a copy by publishing nowhere: a path install of a signed file.
    let signed = keys.path().join("greet-signed.wasm");
    let bytes = std::fs::read(v1).unwrap();
    std::fs::write(&signed, &bytes).unwrap();
    // `publish --sign` is the only signer; sign through it against a
    // registry when there is one, else use the library's format directly.
    let sk = wasmsign2::SecretKey::from_any(&std::fs::read(&secret).unwrap()).unwrap();
    let module = wasmsign2::Module::deserialize(&mut std::io::Cursor::new(&bytes)).unwrap();
    let mut out = Vec::new();
    sk.sign(module, None).unwrap().serialize(&mut out).unwrap();
    std::fs::write(&signed, &out).unwrap();

    home.run(&["tool", "install", path_str(&signed), "--name", "greet"])
        .expect_code(0);
    expect_greeting(&greet(&home, "greet"));
    home.run(&["tool", "verify", "--all"]).expect_code(0);

    // The trusted key removed: the next load refuses it.
    let trust = home.path().join("trust");
    let saved: Vec<(PathBuf, Vec<u8>)> = support::files_under(&trust)
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    for (p, _) in &saved {
        std::fs::remove_file(p).unwrap();
    }
    let out = greet(&home, "greet");
    out.expect_code(3);
    assert!(
        out.stderr.contains("no longer in the trust store"),
        "{}",
        out.stderr
    );
    for (p, b) in &saved {
        std::fs::write(p, b).unwrap();
    }
    expect_greeting(&greet(&home, "greet"));

    // The installed bytes changed on disk: refused at load and by verify.
    let blob = support::files_under(&home.path().join("tools/blobs"))
        .into_iter()
        .next()
        .expect("the installed blob");
    let mut changed = std::fs::read(&blob).unwrap();
    let at = changed.len() - 3;
    changed[at] ^= 0x20;
    std::fs::write(&blob, &changed).unwrap();
    let out = greet(&home, "greet");
    out.expect_code(3);
    assert!(out.stderr.contains("changed on disk"), "{}", out.stderr);
    let out = home.run(&["tool", "verify", "--all"]);
    out.expect_code(3);
    assert!(
        out.stdout_text().contains("FAILED greet"),
        "{}",
        out.stdout_text()
    );
}

#[test]
fn tool_call_digest_refuses_the_wrong_component_before_compiling_it() {
    // A home of its own, with its own compile cache, to see what is cached.
    let home = TempDir::new().unwrap();
    let cache = home.path().join("cache/components");
    let wrong = format!("sha256:{}", "0".repeat(64));
    let run = |args: &[&str]| support::run(support::command(home.path(), args));
    let out = run(&["tool", "call", "json", "query", "--digest", &wrong]);
    out.expect_code(3);
    assert!(out.stderr.contains("but it is pinned to"), "{}", out.stderr);
    assert!(
        support::files_under(&cache).is_empty(),
        "a refused component was compiled and cached"
    );
    let described = run(&["tool", "describe", "json", "--json"]);
    described.expect_code(0);
    let digest = serde_json::from_str::<Value>(&described.stdout_text()).unwrap()["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(support::files_under(&cache).len(), 1);
    let out = run(&[
        "tool",
        "call",
        "json",
        "query",
        "--digest",
        &digest,
        "--input",
        r#"{"input":{"a":1},"filter":".a"}"#,
    ]);
    out.expect_code(0);
    assert!(out.stdout_text().contains('1'), "{}", out.stdout_text());
}

/// A loopback server that answers every request with `answer(path)`, and
/// counts the requests it got.
struct Hostile {
    port: u16,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Hostile {
    fn start(answer: impl Fn(&str) -> Vec<u8> + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some((head, _)) = support::read_http_request(&stream) else {
                    continue;
                };
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let _ = stream.write_all(&answer(&path));
            }
        });
        Self { port, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn response(status: &str, headers: &[(&str, String)], body: &[u8], length: bool) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if length {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

const OCI: &str = "application/vnd.oci.image.manifest.v1+json";

fn manifest_with(config_type: &str, layers: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI,
        "config": {"mediaType": config_type, "digest": format!("sha256:{}", "1".repeat(64)), "size": 2},
        "layers": layers,
    }))
    .unwrap()
}

#[test]
fn hostile_registry_answers_are_bounded_and_refused_with_what_was_wrong() {
    let home = Home::new();
    let install = |port: u16| {
        home.run(&[
            "tool",
            "install",
            &format!("oci://127.0.0.1:{port}/evil:v1"),
            "--allow-unsigned",
        ])
    };
    let wasm_layer = json!([{
        "mediaType": "application/wasm",
        "digest": format!("sha256:{}", "2".repeat(64)),
        "size": 100,
    }]);
    // (what the server answers a manifest request with, what the error says)
    let cases: Vec<(Vec<u8>, &str)> = vec![
        // 8 MiB without a Content-Length: cut while reading.
        (
            response(
                "200 OK",
                &[("Content-Type", OCI.to_owned())],
                &vec![b' '; 8 << 20],
                false,
            ),
            "over the 65536-byte limit",
        ),
        // A declared 1 GiB: refused before reading.
        (
            {
                let mut r = response(
                    "200 OK",
                    &[
                        ("Content-Type", OCI.to_owned()),
                        ("Content-Length", (1u64 << 30).to_string()),
                    ],
                    b"",
                    false,
                );
                r.extend_from_slice(b"{");
                r
            },
            "over the 65536-byte limit",
        ),
        (
            response(
                "200 OK",
                &[(
                    "Content-Type",
                    "application/vnd.docker.distribution.manifest.v2+json".to_owned(),
                )],
                &manifest_with("application/vnd.wasm.config.v0+json", wasm_layer.clone()),
                true,
            ),
            "of media type `application/vnd.docker.distribution.manifest.v2+json`",
        ),
        (
            response(
                "200 OK",
                &[("Content-Type", OCI.to_owned())],
                &manifest_with(
                    "application/vnd.oci.image.config.v1+json",
                    wasm_layer.clone(),
                ),
                true,
            ),
            "it is not a wasm artifact",
        ),
        (
            response(
                "200 OK",
                &[("Content-Type", OCI.to_owned())],
                &manifest_with(
                    "application/vnd.wasm.config.v0+json",
                    json!([{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": format!("sha256:{}", "2".repeat(64)), "size": 100}]),
                ),
                true,
            ),
            "the layer has media type `application/vnd.oci.image.layer.v1.tar`",
        ),
        (
            response(
                "200 OK",
                &[("Content-Type", OCI.to_owned())],
                b"{\"schemaVersion\": 2, \"lay",
                true,
            ),
            "the manifest is malformed",
        ),
    ];
    for (answer, says) in cases {
        let server = Hostile::start(move |_| answer.clone());
        let out = install(server.port);
        out.expect_code(3);
        assert!(out.stderr.contains(says), "want `{says}`: {}", out.stderr);
        assert!(
            out.stderr.len() < 4096,
            "{} bytes of error",
            out.stderr.len()
        );
    }

    // A redirect to another host (here another port, so another origin) is
    // refused without being followed.
    let elsewhere = Hostile::start(|_| response("200 OK", &[], b"", true));
    let target = format!("http://127.0.0.1:{}/v2/evil/manifests/v1", elsewhere.port);
    let redirecting = Hostile::start(move |_| {
        response(
            "307 Temporary Redirect",
            &[("Location", target.clone())],
            b"",
            true,
        )
    });
    let out = install(redirecting.port);
    out.expect_code(3);
    assert!(out.stderr.contains("was redirected to"), "{}", out.stderr);
    assert!(out.stderr.contains("another host"), "{}", out.stderr);
    assert_eq!(elsewhere.hits(), 0, "the redirect was followed");
    assert!(listed(&home).is_empty());
}

/// Python and JavaScript tools from `tool new`, published signed and
/// installed on a fresh home, then called by name and run in an agent.
fn publish_install_call(lang_args: &[&str], link: Option<(&str, PathBuf)>) {
    let Some(registry) = Registry::start() else {
        return;
    };
    let outside = TempDir::new().unwrap();
    let author_home = TempDir::new().unwrap();
    let bytes = new_and_build(
        author_home.path(),
        outside.path(),
        "hello",
        lang_args,
        link,
        |_| {},
    );
    let component = outside.path().join("hello.wasm");
    std::fs::write(&component, &bytes).unwrap();
    let keys = TempDir::new().unwrap();
    let home = Home::new();
    let secret = key(keys.path(), &[&home]);
    let source = registry.url("hello:v1");
    publish(&Home::new(), &component, &source, Some(&secret));
    home.run(&["tool", "install", &source]).expect_code(0);
    expect_greeting(&greet(&home, "hello"));
    // An agent names it and runs offline.
    let agent = TempDir::new().unwrap();
    let script = greet_agent(agent.path(), "hello");
    let (run, session) = support::run_script(&home, agent.path(), &script);
    run.expect_code(0);
    assert_eq!(
        greeting_in_log(&home, &session),
        json!({"greeting": "Hello, Ada!"})
    );
}

#[test]
fn a_python_tool_is_published_and_installed() {
    match std::env::var_os("LONGHAND_PY_VENV").map(PathBuf::from) {
        Some(venv) if venv.join("bin/componentize-py").is_file() => {
            publish_install_call(&["--lang", "python"], Some((".venv", venv)))
        }
        _ => missing(
            "a venv with componentize-py and the Python SDK (LONGHAND_PY_VENV)",
            "run `eval \"$(bash .ci/setup-componentize.sh)\"`",
        ),
    }
}

#[test]
fn a_javascript_tool_is_published_and_installed() {
    match std::env::var_os("LONGHAND_JS_MODULES")
        .map(PathBuf::from)
        .filter(|m| m.join("esbuild/package.json").is_file())
    {
        Some(modules) => publish_install_call(
            &["--lang", "js", "--engine", "quickjs"],
            Some(("node_modules", modules)),
        ),
        None => missing(
            "node_modules with componentize-qjs and esbuild (LONGHAND_JS_MODULES)",
            "run `eval \"$(bash .ci/setup-componentize.sh)\"`",
        ),
    }
}

// Issue 26, part 2: credentials, bounds on what is read, the trust store,
// SIGPIPE and upgrades that change tools.

/// A loopback server that records each request's head (lowercased) and
/// answers through `answer(path, head, stream)`, which may write as much
/// as it likes (an endless body ends when the client hangs up).
struct Spy {
    port: u16,
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Spy {
    fn start(answer: impl Fn(&str, &str, &mut TcpStream) + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = heads.clone();
        let answer = std::sync::Arc::new(answer);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let seen = seen.clone();
                let answer = answer.clone();
                std::thread::spawn(move || {
                    let Some(head) = read_head(&stream) else {
                        return;
                    };
                    let head = head.to_ascii_lowercase();
                    seen.lock().unwrap().push(head.clone());
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    answer(&path, &head, &mut stream);
                });
            }
        });
        Self { port, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// The request line and headers of one request (a GET: no body).
fn read_head(stream: &TcpStream) -> Option<String> {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::new(stream.try_clone().ok()?);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.trim_end().is_empty() {
            return Some(head);
        }
        head.push_str(&line);
    }
}

/// The credentials every test here sets.
const USER: &str = "alice";
const PASSWORD: &str = "s3cret-pass";

/// `tool install oci://127.0.0.1:PORT/evil:v1` with registry credentials
/// set, and `extra` environment.
fn install_with_credentials(home: &Home, port: u16, extra: &[(&str, String)]) -> Ended {
    let mut cmd = home.cmd(&[
        "tool",
        "install",
        &format!("oci://127.0.0.1:{port}/evil:v1"),
        "--allow-unsigned",
    ]);
    cmd.env("LONGHAND_REGISTRY_USERNAME", USER)
        .env("LONGHAND_REGISTRY_PASSWORD", PASSWORD);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    support::run(cmd)
}

/// A registry that asks every request without a bearer token for one
/// from `realm`, and answers 404 to the others.
fn token_registry(realm: String) -> Spy {
    Spy::start(move |_, head, stream| {
        let answer = if head.contains("authorization: bearer") {
            response("404 Not Found", &[], b"{}", true)
        } else {
            response(
                "401 Unauthorized",
                &[(
                    "WWW-Authenticate",
                    format!(r#"Bearer realm="{realm}",service="evil""#),
                )],
                b"{}",
                true,
            )
        };
        let _ = stream.write_all(&answer);
    })
}

#[test]
fn registry_credentials_go_only_to_the_registrys_origin_or_an_allowed_one() {
    let home = Home::new();
    let token = |_: &str, _: &str, stream: &mut TcpStream| {
        let _ = stream.write_all(&response(
            "200 OK",
            &[("Content-Type", "application/json".to_owned())],
            br#"{"token":"t0k3n"}"#,
            true,
        ));
    };
    let sent_credentials = |spy: &Spy| spy.heads().iter().any(|h| h.contains("authorization"));

    // Another port is another origin: asked anonymously, never with the
    // credentials.
    let elsewhere = Spy::start(token);
    let registry = token_registry(format!("http://127.0.0.1:{}/token", elsewhere.port));
    let out = install_with_credentials(&home, registry.port, &[]);
    assert_ne!(out.code, Some(0));
    assert!(!elsewhere.heads().is_empty(), "the token was asked for");
    assert!(
        !sent_credentials(&elsewhere),
        "credentials went to another origin: {:?}",
        elsewhere.heads()
    );
    assert!(
        out.stderr.contains("LONGHAND_REGISTRY_TOKEN_ORIGINS"),
        "{}",
        out.stderr
    );

    // Allowed by the operator, that origin gets them.
    let allowed = Spy::start(token);
    let registry = token_registry(format!("http://127.0.0.1:{}/token", allowed.port));
    install_with_credentials(
        &home,
        registry.port,
        &[(
            "LONGHAND_REGISTRY_TOKEN_ORIGINS",
            format!("http://127.0.0.1:{}", allowed.port),
        )],
    );
    assert!(sent_credentials(&allowed), "{:?}", allowed.heads());

    // A token service that redirects to another origin is not followed.
    let beyond = Spy::start(token);
    let target = format!("http://127.0.0.1:{}/token", beyond.port);
    let redirecting = Spy::start(move |_, _, stream| {
        let _ = stream.write_all(&response(
            "302 Found",
            &[("Location", target.clone())],
            b"",
            true,
        ));
    });
    let registry = token_registry(format!("http://127.0.0.1:{}/token", redirecting.port));
    let out = install_with_credentials(
        &home,
        registry.port,
        &[(
            "LONGHAND_REGISTRY_TOKEN_ORIGINS",
            format!("http://127.0.0.1:{}", redirecting.port),
        )],
    );
    out.expect_code(3);
    assert!(out.stderr.contains("was redirected to"), "{}", out.stderr);
    assert!(beyond.heads().is_empty(), "the redirect was followed");
    assert!(listed(&home).is_empty());
}

/// Run `cmd` to the end; its exit code (`None`: killed by a signal), its
/// stderr, and its peak resident memory in KiB (from `wait4`).
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4 (for its rusage), which `Child` does not see"
)]
fn run_measured(cmd: Command) -> (Option<i32>, String, u64) {
    use std::os::unix::process::ExitStatusExt;
    // The command's own peak, not the test process's: a child started
    // from this (large, many-threaded) process inherits its high-water RSS
    // at exec (the kernel keeps the old mm's peak), so `wait4` on it would
    // report whatever the busiest test beside it reached. A small Python
    // process starts the command instead and reports its child's peak.
    let report = tempfile::NamedTempFile::new().unwrap();
    let mut wrapper = Command::new("/usr/bin/python3");
    wrapper.env_clear().arg("-c").arg(
        "import os, sys\n\
         pid = os.fork()\n\
         if pid == 0:\n    os.execv(sys.argv[2], sys.argv[2:])\n\
         _, status, usage = os.wait4(pid, 0)\n\
         open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n\
         sys.exit(os.waitstatus_to_exitcode(status) % 256)\n",
    );
    wrapper
        .arg(report.path())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            wrapper.env(key, value);
        }
    }
    let mut cmd = wrapper;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let pid = child.id() as libc::pid_t;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let finished = done.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + support::PROCESS_LIMIT;
        while Instant::now() < deadline {
            if finished.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !finished.load(std::sync::atomic::Ordering::SeqCst) {
            // SAFETY: kill has no memory effects; the child is not reaped
            // yet (wait4 below has not returned), so the pid is still its.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut status = 0;
    // SAFETY: waiting on our own child with a valid status pointer.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, std::ptr::null_mut()) };
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(waited, pid);
    let status = std::process::ExitStatus::from_raw(status);
    let peak = std::fs::read_to_string(report.path())
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(u64::MAX);
    (status.code(), reader.join().unwrap(), peak)
}

#[test]
fn an_endless_token_answer_is_cut_at_64_kib() {
    let home = Home::new();
    // The registry's own origin names itself as the token service, and
    // streams a token that never ends.
    let registry = Spy::start(|path, _, stream| {
        if path.starts_with("/token") {
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
            );
            let chunk = vec![b'a'; 64 << 10];
            let start = br#"{"token":"aaaaaa"#;
            let mut first = format!("{:x}\r\n", start.len()).into_bytes();
            first.extend_from_slice(start);
            first.extend_from_slice(b"\r\n");
            let _ = stream.write_all(&first);
            loop {
                let mut out = format!("{:x}\r\n", chunk.len()).into_bytes();
                out.extend_from_slice(&chunk);
                out.extend_from_slice(b"\r\n");
                if stream.write_all(&out).is_err() {
                    return;
                }
            }
        }
        let port = stream.local_addr().unwrap().port();
        let _ = stream.write_all(&response(
            "401 Unauthorized",
            &[(
                "WWW-Authenticate",
                format!(r#"Bearer realm="http://127.0.0.1:{port}/token",service="evil""#),
            )],
            b"{}",
            true,
        ));
    });
    let mut cmd = home.cmd(&[
        "tool",
        "install",
        &format!("oci://127.0.0.1:{}/evil:v1", registry.port),
        "--allow-unsigned",
    ]);
    cmd.env("LONGHAND_REGISTRY_USERNAME", USER)
        .env("LONGHAND_REGISTRY_PASSWORD", PASSWORD);
    let started = Instant::now();
    let (code, stderr, max_rss_kib) = run_measured(cmd);
    let took = started.elapsed();
    eprintln!("token bomb: exit {code:?} after {took:?}, peak RSS {max_rss_kib} KiB");
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("over the 65536-byte limit"), "{stderr}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(max_rss_kib < 256 << 10, "peak RSS {max_rss_kib} KiB");
}

#[test]
fn devices_and_fifos_are_refused_as_components_and_keys() {
    let home = Home::new();
    let dir = TempDir::new().unwrap();
    let fifo = dir.path().join("fifo");
    let c_fifo = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo has no other effect.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
    let fifo = path_str(&fifo).to_owned();
    let component = dir.path().join("c.wasm");
    std::fs::write(&component, b"\0asm\x0d\0\x01\0").unwrap();
    let component = path_str(&component).to_owned();
    for args in [
        vec![
            "tool",
            "install",
            "/dev/zero",
            "--name",
            "z",
            "--allow-unsigned",
        ],
        vec!["tool", "install", &fifo, "--name", "f", "--allow-unsigned"],
        vec!["trust", "add", "/dev/zero"],
        vec!["trust", "add", &fifo],
        vec!["tool", "publish", "/dev/zero", "oci://127.0.0.1:9/x:v1"],
        vec![
            "tool",
            "publish",
            &component,
            "oci://127.0.0.1:9/x:v1",
            "--sign",
            "/dev/zero",
        ],
    ] {
        let started = Instant::now();
        let out = support::Proc::spawn(home.cmd(&args))
            .with_limit(Duration::from_secs(30))
            .finish();
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("is not a regular file"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(started.elapsed() < Duration::from_secs(20), "{args:?}");
    }
}

#[test]
fn the_trust_store_refuses_what_others_could_have_planted() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let keys = TempDir::new().unwrap();
    let secret = keys.path().join("k");
    home.run(&["tool", "keygen", path_str(&secret)])
        .expect_code(0);
    let public = keys.path().join("k.pub");
    home.run(&["trust", "add", path_str(&public)])
        .expect_code(0);
    let trust = home.path().join("trust");
    let list = || home.run(&["trust", "list"]);
    let listed = list();
    listed.expect_code(0);
    assert_eq!(listed.stdout.len(), 1, "{:?}", listed.stdout);
    let key_file = std::fs::read_dir(&trust)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "pub"))
        .unwrap();
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();

    // A directory others may write: whatever is in it could be theirs.
    mode(&trust, 0o777);
    let out = list();
    out.expect_code(3);
    assert!(out.stderr.contains("chmod go-w"), "{}", out.stderr);
    mode(&trust, 0o700);

    // A key file others may write.
    mode(&key_file, 0o666);
    let out = list();
    out.expect_code(3);
    assert!(out.stderr.contains("chmod 600"), "{}", out.stderr);
    mode(&key_file, 0o600);

    // A symbolic link to a key elsewhere.
    std::fs::remove_file(&key_file).unwrap();
    std::os::unix::fs::symlink(&public, &key_file).unwrap();
    let out = list();
    out.expect_code(3);
    assert!(out.stderr.contains("symbolic link"), "{}", out.stderr);
    std::fs::remove_file(&key_file).unwrap();

    // Added again, it is trusted again.
    home.run(&["trust", "add", path_str(&public)])
        .expect_code(0);
    list().expect_code(0);
}

#[test]
fn a_registry_client_is_not_killed_by_sigpipe() {
    let home = Home::new();
    // A registry that takes the request and answers nothing until told.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Mutex::new(rx);
    let (got_tx, got) = std::sync::mpsc::channel::<()>();
    let got_tx = std::sync::Mutex::new(got_tx);
    let registry = Spy::start(move |_, _, _stream| {
        let _ = got_tx.lock().unwrap().send(());
        let _ = rx.lock().unwrap().recv_timeout(Duration::from_secs(60));
    });
    let mut proc = support::Proc::spawn(home.cmd(&[
        "tool",
        "install",
        &format!("oci://127.0.0.1:{}/evil:v1", registry.port),
        "--allow-unsigned",
    ]));
    got.recv_timeout(Duration::from_secs(60))
        .expect("the install reached the registry");
    // What a peer closing a connection mid-write raises: it must be an
    // error the client reports, not a silent death with 141.
    // SAFETY: kill has no memory effects.
    assert_eq!(unsafe { libc::kill(proc.pid() as i32, libc::SIGPIPE) }, 0);
    std::thread::sleep(Duration::from_millis(300));
    let _ = tx.send(());
    let out = proc.finish();
    assert!(
        out.code.is_some(),
        "tool install was killed by a signal: {}",
        out.stderr
    );
    assert!(out.stderr.contains("error:"), "{}", out.stderr);
}

/// The Rust `greet` component with its tool's effect changed to `writes`.
fn greet_writes() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dist-greet-writes");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let home = TempDir::new().unwrap();
        let bytes = new_and_build(
            home.path(),
            &out,
            "greet",
            &["--lang", "rust"],
            None,
            |project| {
                let lib = project.join("src/lib.rs");
                let text = std::fs::read_to_string(&lib).unwrap();
                let writes = text.replacen(
                    "const EFFECT: Effect = Effect::ReadOnly;",
                    "const EFFECT: Effect = Effect::Writes;",
                    1,
                );
                assert_ne!(text, writes, "the template's effect changed shape");
                std::fs::write(&lib, writes).unwrap();
            },
        );
        std::fs::write(out.join("greet-writes.wasm"), &bytes).unwrap();
        out.join("greet-writes.wasm")
    })
}

#[test]
fn an_upgrade_that_changes_a_tools_effect_is_held_until_approved() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let (v1, _) = greet_components();
    let writes = greet_writes();
    let keys = TempDir::new().unwrap();
    let home = Home::new();
    let secret = key(keys.path(), &[&home]);
    let author_home = Home::new();
    let source = registry.url("greet:latest");
    publish(&author_home, v1, &source, Some(&secret));
    home.run(&["tool", "install", &source]).expect_code(0);
    let v1_digest = listed(&home)[0]["digest"].as_str().unwrap().to_owned();

    // Same imports, same requests: only the effect differs.
    publish(&author_home, writes, &source, Some(&secret));
    let out = home.run(&["tool", "upgrade", "greet"]);
    out.expect_code(3);
    let shown = out.stdout_text();
    assert!(shown.contains("+ tool greet (writes)"), "{shown}");
    assert!(shown.contains("- tool greet (read-only)"), "{shown}");
    assert!(out.stderr.contains("held"), "{}", out.stderr);
    assert_eq!(listed(&home)[0]["digest"], v1_digest, "nothing changed");

    home.run(&["tool", "upgrade", "greet", "--approve"])
        .expect_code(0);
    assert_ne!(listed(&home)[0]["digest"], v1_digest);
}
