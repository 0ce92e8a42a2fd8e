//! The escape suite at the sandbox's own level: each case a hostile
//! program run through [`confined::run`] with one read-write grant at
//! `/workspace`, and what it must not reach. Skipped (with a line on
//! stderr) where the kernel cannot confine at all: there `run` refuses.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::confined::{self, Limits, Outcome, Spec};
use super::view::Mount;

struct Work {
    dir: tempfile::TempDir,
}

impl Work {
    fn new() -> Self {
        Work {
            dir: tempfile::TempDir::new().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn spec(&self, program: &str, args: &[&str]) -> Spec {
        Spec {
            program: PathBuf::from(program),
            args: args.iter().map(|a| a.to_string()).collect(),
            arg0: program.rsplit('/').next().unwrap_or(program).to_owned(),
            cwd: "/workspace".into(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            stdin: None,
            mounts: vec![Mount {
                host: self.path().to_owned(),
                guest: "/workspace".into(),
                writable: true,
            }],
            system: confined::system_paths(),
            limits: Limits {
                wall: Duration::from_secs(20),
                ..Limits::default()
            },
            spill: None,
        }
    }

    fn sh(&self, script: &str) -> Spec {
        self.spec("/bin/sh", &["-c", script])
    }
}

fn can_confine() -> bool {
    match confined::available() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

async fn run(spec: &Spec) -> Outcome {
    confined::run(spec).await.expect("the run starts")
}

#[tokio::test]
async fn the_grant_is_seen_at_its_guest_path_and_written_through() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let out = run(&work.sh("pwd; echo hi > /workspace/out.txt; cat out.txt")).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout.text, "/workspace\nhi\n");
    assert_eq!(
        std::fs::read_to_string(work.path().join("out.txt")).unwrap(),
        "hi\n"
    );
}

#[tokio::test]
async fn nothing_of_the_host_outside_the_view_is_there() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let secret = tempfile::TempDir::new().unwrap();
    std::fs::write(secret.path().join("s"), "secret").unwrap();
    let script = format!(
        "for p in /etc/shadow {home}/.ssh {home} {} /var /root /home; do \
           if ls -d \"$p\" >/dev/null 2>&1 || cat \"$p\" >/dev/null 2>&1; then echo \"SEEN $p\"; fi; \
         done; cat {}/s; echo end",
        secret.path().display(),
        secret.path().display()
    );
    let out = run(&work.sh(&script)).await;
    assert!(!out.stdout.text.contains("SEEN"), "{out:?}");
    assert!(!out.stdout.text.contains("secret"), "{out:?}");
    assert!(out.stdout.text.ends_with("end\n"), "{out:?}");
}

#[tokio::test]
async fn a_read_only_grant_and_dot_git_in_a_writable_one_are_not_written() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    std::fs::create_dir(work.path().join(".git")).unwrap();
    std::fs::create_dir(work.path().join(".git/hooks")).unwrap();
    let data = tempfile::TempDir::new().unwrap();
    std::fs::write(data.path().join("d.csv"), "a,b\n").unwrap();
    let mut spec = work.sh(
        "cat /data/d.csv; echo x > /data/new 2>/dev/null && echo WROTE-DATA; \
         echo x > /workspace/.git/hooks/pre-commit 2>/dev/null && echo WROTE-HOOK; \
         echo x > /workspace/ok && echo wrote-work",
    );
    spec.mounts.push(Mount {
        host: data.path().to_owned(),
        guest: "/data".into(),
        writable: false,
    });
    let out = run(&spec).await;
    assert_eq!(out.stdout.text, "a,b\nwrote-work\n", "{out:?}");
    assert!(!data.path().join("new").exists());
    assert!(!work.path().join(".git/hooks/pre-commit").exists());
}

#[tokio::test]
async fn a_symlink_to_slash_in_the_grant_leads_into_the_view_not_the_host() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    std::os::unix::fs::symlink("/", work.path().join("root")).unwrap();
    let marker = tempfile::TempDir::new().unwrap();
    let name = marker
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = run(&work.sh(&format!(
        "ls /workspace/root/tmp/ 2>/dev/null | grep -c {name}; echo x > /workspace/root/etc/evil 2>/dev/null && echo WROTE"
    )))
    .await;
    assert!(!out.stdout.text.contains("WROTE"), "{out:?}");
    assert!(out.stdout.text.starts_with('0'), "{out:?}");
    assert!(!Path::new("/etc/evil").exists());
}

#[tokio::test]
async fn no_network_loopback_tcp_udp_dns_or_abstract_sockets_of_the_host() {
    if !can_confine() || !Path::new("/usr/bin/python3").exists() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let abstract_name = format!("longhand-test-{}", std::process::id());
    let unix = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
    };
    unix.set_nonblocking(true).unwrap();
    let work = Work::new();
    let code = format!(
        r#"
import socket
def tcp(host):
    try:
        socket.create_connection((host, {port}), timeout=2); print("TCP", host)
    except OSError as e: print("no tcp", host)
tcp("127.0.0.1"); tcp("10.0.0.1")
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("127.0.0.1", {udp_port})); print("UDP sent")
except OSError: print("no udp")
try:
    socket.getaddrinfo("example.com", 80); print("DNS")
except OSError: print("no dns")
try:
    u = socket.socket(socket.AF_UNIX); u.connect("\0{abstract_name}"); print("ABSTRACT")
except OSError: print("no abstract")
"#
    );
    let out = run(&work.spec("/usr/bin/python3", &["-c", &code])).await;
    assert!(listener.accept().is_err(), "a connection reached the host");
    let mut buf = [0u8; 4];
    assert!(udp.recv(&mut buf).is_err(), "a datagram reached the host");
    assert!(unix.accept().is_err(), "the abstract socket was reached");
    let text = &out.stdout.text;
    for denied in [
        "no tcp 127.0.0.1",
        "no tcp 10.0.0.1",
        "no dns",
        "no abstract",
    ] {
        assert!(text.contains(denied), "{denied}: {out:?}");
    }
}

#[tokio::test]
async fn the_host_cannot_be_signalled_or_traced_and_no_capability_is_kept() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let me = std::process::id();
    let out = run(&work.sh(&format!(
        "kill -9 {me} 2>/dev/null && echo KILLED; kill -0 1 && echo own-init; \
         grep -E '^(CapEff|CapPrm):' /proc/self/status; id -u"
    )))
    .await;
    assert!(!out.stdout.text.contains("KILLED"), "{out:?}");
    // The harness (this test) is alive to read the outcome.
    let caps: Vec<&str> = out
        .stdout
        .text
        .lines()
        .filter(|l| l.starts_with("Cap"))
        .collect();
    assert_eq!(caps.len(), 2, "no /proc/self/status in the view: {out:?}");
    for line in caps {
        assert!(line.ends_with("0000000000000000"), "{line}: {out:?}");
    }
    let uid = out.stdout.text.lines().last().unwrap_or_default();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "uid {uid:?}: {out:?}"
    );
}

#[tokio::test]
async fn the_environment_is_only_what_was_given() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let mut spec = work.spec("/usr/bin/env", &[]);
    spec.env.push(("GIVEN".into(), "yes".into()));
    let out = run(&spec).await;
    let mut lines: Vec<&str> = out.stdout.text.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["GIVEN=yes", "PATH=/usr/bin:/bin"], "{out:?}");
}

#[tokio::test]
async fn a_fork_bomb_is_bounded_and_the_next_run_works() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let mut spec = work.sh("b() { b | b & }; b; sleep 1; echo survived");
    spec.limits.processes = 64;
    spec.limits.wall = Duration::from_secs(5);
    let out = run(&spec).await;
    assert!(
        out.duration_ms < 15_000,
        "{} ms, {:?}",
        out.duration_ms,
        out.limits_hit
    );
    let next = run(&work.sh("echo next")).await;
    assert_eq!(next.stdout.text, "next\n", "{next:?}");
}

/// Under a root harness the kernel exempts the host's root from
/// `RLIMIT_NPROC`; the pid namespace's own `pid_max` still bounds the run.
#[tokio::test]
async fn processes_are_bounded_even_under_root() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let mut spec = work.sh("n=0; while [ $n -lt 2000 ]; do sleep 5 & n=$((n+1)); echo $n; done");
    spec.limits.processes = 64;
    spec.limits.wall = Duration::from_secs(20);
    let out = run(&spec).await;
    let started: u64 = out
        .stdout
        .text
        .lines()
        .last()
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    assert!(started >= 10, "it could start processes at all: {out:?}");
    assert!(
        started <= 64 + 300,
        "{started} processes started under a bound of 64 (+300 the kernel keeps)"
    );
}

#[tokio::test]
async fn a_grandchild_does_not_outlive_the_wall_limit() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let mut spec = work.sh("(sleep 30; echo late > /workspace/late) & sleep 30");
    spec.limits.wall = Duration::from_millis(500);
    let out = run(&spec).await;
    assert_eq!(out.limits_hit, ["wall"], "{out:?}");
    assert!(out.duration_ms < 5_000, "{out:?}");
    // Nothing of the run is left to write it.
    let survivors = std::process::Command::new("pgrep")
        .args(["-f", "sleep 30; echo late"])
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    assert!(survivors.is_empty(), "left running: {survivors:?}");
}

#[tokio::test]
async fn a_gigabyte_of_output_keeps_head_and_tail_and_counts_the_rest() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let mut spec =
        work.sh("echo first; head -c 1000000000 /dev/zero | tr '\\0' x; echo; echo last");
    spec.limits.output = 1000;
    spec.limits.wall = Duration::from_secs(60);
    let out = run(&spec).await;
    assert_eq!(out.exit_code, Some(0), "{:?}", out.limits_hit);
    assert!(
        out.stdout.text.starts_with("first\nxxx"),
        "{}",
        &out.stdout.text[..40]
    );
    assert!(out.stdout.text.ends_with("x\nlast\n"));
    assert_eq!(out.stdout.total, 1_000_000_000 + 12);
    assert_eq!(out.stdout.cut, out.stdout.total - 1000);
    assert!(out.limits_hit.contains(&"output"));
}

#[tokio::test]
async fn cpu_and_file_size_limits_end_the_process() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let mut spin = work.sh("while :; do :; done");
    spin.limits.cpu = Duration::from_secs(1);
    let out = run(&spin).await;
    assert_eq!(
        out.limits_hit,
        ["cpu"],
        "{:?} after {} ms",
        out.signal,
        out.duration_ms
    );
    let mut big = work.sh("head -c 2000000 /dev/zero > /workspace/big");
    big.limits.file_size = 1 << 20;
    let out = run(&big).await;
    assert!(out.exit_code != Some(0), "{out:?}");
    assert!(std::fs::metadata(work.path().join("big")).unwrap().len() <= 1 << 20);
}

#[tokio::test]
async fn stdin_is_given_and_a_bad_guest_path_is_refused_by_name() {
    if !can_confine() {
        return;
    }
    let work = Work::new();
    let mut spec = work.spec("/usr/bin/wc", &["-c"]);
    spec.stdin = Some(b"12345".to_vec());
    let out = run(&spec).await;
    assert_eq!(out.stdout.text.trim(), "5", "{out:?}");
    let mut bad = work.sh("true");
    bad.mounts[0].guest = "/a/../etc".into();
    let err = confined::run(&bad).await.unwrap_err();
    assert!(err.to_string().contains("/a/../etc"), "{err}");
}
