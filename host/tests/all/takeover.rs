//! Issue 16: a killed harness leaves nothing running and nothing waiting.
//!
//! A session's command check is a shell script that starts a background
//! `sleep` and then becomes a `sleep` itself. `longhand` (a `run`, or a
//! `worker`) is killed with SIGKILL while the check runs, and — like a
//! shell that has not reaped it yet — the test leaves the dead process
//! unreaped (a zombie) while it goes on:
//! - the check's own process dies with the harness (`PR_SET_PDEATHSIG`);
//! - `resume` (or a new `worker`) takes the session over at once, although
//!   the lease has most of its 60 s left: its holder is a dead process of
//!   this machine;
//! - before the check runs again, what the dead run left in the background
//!   is killed: the second run never sees the first one's process alive,
//!   and the check's script ran exactly twice.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;

use crate::support::{Home, Proc, text_turn, write};

/// The check: first run, a background sleep (its pid in `bg`) and the
/// script itself becoming a sleep (its pid the first line of `starts`);
/// second run, note whether the first run's background process is still
/// alive, then pass.
const CHECK: &str = r#"
echo $$ >> starts
if [ "$(wc -l < starts)" -ge 2 ]; then
    for p in $(cat bg) $(head -1 starts); do
        s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)
        if [ -n "$s" ] && [ "$s" != Z ]; then echo "$p alive ($s)" >> overlap; fi
    done
    exit 0
fi
sleep 120 &
echo $! > bg
exec sleep 120
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
read_only = ["/"]
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

/// A process that exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

fn pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// SIGKILL without reaping: the dead harness stays a zombie, as it does
/// until its parent (a shell, a supervisor) gets round to `wait`.
fn kill_unreaped(pid: u32) {
    // SAFETY: kill(2) on a process this test started.
    let r = unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert_eq!(r, 0, "kill {pid}");
}

/// After the kill: the check's leader dies with the harness, its
/// background child lives on (nothing signals a grandchild) until the next
/// run of the check reaps it.
fn assert_leader_died(work: &Path) -> (u32, u32) {
    let leader = pids(&work.join("starts"))[0];
    let bg = pids(&work.join("bg"))[0];
    let start = Instant::now();
    while alive(leader) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the check (pid {leader}) outlived the killed harness"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "takeover: check leader gone {:?} after the kill",
        start.elapsed()
    );
    (leader, bg)
}

/// What the second run found and what is left.
fn assert_one_copy(work: &Path, bg: u32) {
    assert_eq!(pids(&work.join("starts")).len(), 2, "the check ran twice");
    let overlap = std::fs::read_to_string(work.join("overlap")).unwrap_or_default();
    assert!(
        overlap.is_empty(),
        "the second run ran beside the first: {overlap}"
    );
    assert!(!alive(bg), "the first run's background process {bg} lives");
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
    kill_unreaped(run.pid());
    let killed = Instant::now();
    let (_, bg) = assert_leader_died(&work);

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
    assert_one_copy(&work, bg);
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
    kill_unreaped(worker.pid());
    let killed = Instant::now();
    let (_, bg) = assert_leader_died(&work);

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
    assert_one_copy(&work, bg);
    worker.kill();
}
