//! Issue 16: a killed harness leaves nothing running and nothing waiting.
//!
//! A session's command check is a shell script that starts a background
//! `sleep`, another one that leaves the process group and clears its
//! environment (`setsid env -i sleep`), and then becomes a `sleep` itself.
//! `longhand` (a `run`, or a `worker`) is killed with SIGKILL while the
//! check runs, and — like a shell that has not reaped it yet — the test
//! leaves the dead process unreaped (a zombie) while it goes on:
//! - the check's whole process tree dies with the harness, at once (issue
//!   26: it is held in a pid namespace, `sandbox::tree`; before, the
//!   background processes lived on under init until a resume reaped the
//!   ones still carrying the check's marker, and the one that cleared its
//!   environment forever);
//! - `resume` (or a new `worker`) takes the session over at once, although
//!   the lease has most of its 60 s left: its holder is a dead process of
//!   this machine;
//! - the check's script ran exactly twice, and nothing of it is left.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;

use crate::support::{Home, Proc, text_turn, write};

/// The check: first run, a background sleep, a sleep out of the process
/// group without the check's environment, and the script itself becoming a
/// sleep (`bg` written once they are started); second run, pass. Pids are
/// not written down: inside the check's pid namespace they are not the
/// ones the test sees.
const CHECK: &str = r#"
echo run >> starts
if [ "$(wc -l < starts)" -ge 2 ]; then
    exit 0
fi
sleep 120 &
setsid env -i /bin/sleep 121 &
echo started > bg
exec sleep 122
"#;

fn agent(dir: &Path) -> std::path::PathBuf {
    write(
        &dir.join("agent.toml"),
        &format!(
            r#"name = "checked"
instructions = "Work through the plan."
goal = "Do the plan."

[model]
provider = "replay"
model = "script"
cassette = "unused-cassette.json"

[limits]
max_steps = 20
max_tool_calls = 20

[plan]
file = "plan.toml"

[[tools]]
component = "fs"
only = ["read", "write", "stat"]
dirs = ["work:/w:rw"]

[checks.slow]
argv = ["/bin/sh", "-c", {check}]
cwd = "/w"
writable = ["/w"]
read_only = ["/usr", "/bin", "/lib", "/lib64", "/etc", "/dev/null"]
set_env = {{ PATH = "/usr/bin:/bin" }}
timeout = "300s"
"#,
            check = json!(CHECK)
        ),
    );
    write(
        &dir.join("plan.toml"),
        "[[tasks]]\nid = \"t\"\ntitle = \"wait for the check\"\n\
         [[tasks.done_when]]\nkind = \"command\"\nname = \"slow\"\n",
    );
    std::fs::create_dir_all(dir.join("work")).expect("work/");
    let script = dir.join("script.json");
    let done = text_turn("Done.", 10, 1);
    write(
        &script,
        &json!({"responses": [done.clone(), done.clone(), done]}).to_string(),
    );
    script
}

/// Waits until `path` exists and is not empty.
fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while std::fs::metadata(path).map_or(true, |m| m.len() == 0) {
        assert!(
            start.elapsed() < limit,
            "{} did not appear within {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The live (not zombie) processes whose working directory is `dir`: the
/// check's, as the test sees them from outside its pid namespace.
fn processes_in(dir: &Path) -> Vec<(u32, String)> {
    let dir = dir.canonicalize().expect("canonical work dir");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == dir))
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_owned();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (state != "Z").then_some((pid, cmdline))
        })
        .collect()
}

/// Waits until the check's three sleeps run (the script has become one).
fn wait_for_tree(work: &Path) {
    let start = Instant::now();
    while processes_in(work)
        .iter()
        .filter(|(_, cmd)| cmd.contains("sleep 12"))
        .count()
        < 3
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the check's sleeps did not start: {:?}",
            processes_in(work)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL without reaping: the dead harness stays a zombie, as it does
/// until its parent (a shell, a supervisor) gets round to `wait`.
fn kill_unreaped(pid: u32) {
    // SAFETY: kill(2) on a process this test started.
    let r = unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert_eq!(r, 0, "kill {pid}");
}

/// After the kill: every process of the check — the sleep it became, the
/// one in the background, the one that left its group and environment —
/// dies with the harness, before anything resumes the session.
fn assert_tree_died(work: &Path) {
    let start = Instant::now();
    let before = processes_in(work);
    loop {
        let left = processes_in(work);
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the check's processes outlived the killed harness: {left:?} (of {before:?})"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "takeover: the check's {} processes gone {:?} after the kill",
        before.len(),
        start.elapsed()
    );
}

/// What the second run found and what is left.
fn assert_ran_twice_and_nothing_is_left(work: &Path) {
    let starts = std::fs::read_to_string(work.join("starts")).unwrap_or_default();
    assert_eq!(starts.lines().count(), 2, "the check ran twice");
    let left = processes_in(work);
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn a_killed_run_is_resumed_at_once_and_its_check_runs_once_more() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = agent(dir.path());
    let work = dir.path().join("work");
    let mut run = Proc::spawn(home.cmd(&[
        "run",
        dir.path().to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
    ]));
    let first = run.next_line().expect("the session line");
    let session = crate::support::session_of_json(&first);
    wait_for(&work.join("bg"), Duration::from_secs(60));
    wait_for_tree(&work);
    kill_unreaped(run.pid());
    let killed = Instant::now();
    assert_tree_died(&work);

    // At once, with the dead `run` still a zombie and its lease 60 s long.
    let resumed = home.run(&["resume", &session]);
    let took = killed.elapsed();
    assert_eq!(
        resumed.code,
        Some(0),
        "resume right after the kill:\n{}",
        resumed.stderr
    );
    eprintln!("takeover: `resume` finished the session {took:?} after the kill");
    assert!(took < Duration::from_secs(30), "{took:?}");
    let log = home.log(&session);
    let resumed_by = log
        .iter()
        .find(|r| r.event.kind() == "resumed")
        .expect("a resumed event");
    let text = serde_json::to_string(&resumed_by.event).expect("json");
    assert!(text.contains("no longer running"), "{text}");
    assert_eq!(
        crate::support::of_kind(&log, "check_finished").len(),
        1,
        "the killed run's check never finished; the resumed one did"
    );
    assert_eq!(home.state(&session).status.as_str(), "finished");
    assert_ran_twice_and_nothing_is_left(&work);
    run.kill();
}

#[test]
fn a_new_worker_takes_a_killed_workers_session_at_once() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = agent(dir.path());
    let work = dir.path().join("work");
    let detached = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--detach",
        "--json",
    ]);
    assert_eq!(detached.code, Some(0), "{}", detached.stderr);
    let session = crate::support::session_of_json(&detached.stdout[0]);
    let mut worker = Proc::spawn(home.cmd(&["worker"]));
    wait_for(&work.join("bg"), Duration::from_secs(60));
    wait_for_tree(&work);
    kill_unreaped(worker.pid());
    let killed = Instant::now();
    assert_tree_died(&work);

    let second = home.run(&["worker", "--until-idle"]);
    let took = killed.elapsed();
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    eprintln!("takeover: a new worker finished the session {took:?} after the kill");
    assert_eq!(
        home.state(&session).status.as_str(),
        "finished",
        "{}",
        second.stderr
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert_ran_twice_and_nothing_is_left(&work);
    worker.kill();
}
