//! Who holds a lease: the process behind it, named so that a worker on the
//! same machine can tell whether that process still lives — and take a dead
//! holder's session at once instead of waiting out its lease.
//!
//! A lease row records, beside its owner name, the holder's host name, pid,
//! process start time (clock ticks after boot, field 22 of
//! `/proc/<pid>/stat`) and a *machine key*: the kernel's boot id
//! (`/proc/sys/kernel/random/boot_id`) and the holder's PID namespace
//! (`/proc/self/ns/pid`). A pid means the same process only under the same
//! kernel boot and in the same PID namespace, so only then is the holder
//! judged:
//! - no process with that pid, or one with another start time (the pid was
//!   reused), or a zombie (killed, not yet reaped): **dead**;
//! - otherwise **alive** — including a stopped or hung process: liveness is
//!   about the process, and a hung holder's lease still runs out by time.
//!
//! A holder on another machine, in another PID namespace, or recorded by a
//! Longhand that did not write these columns is never judged here: its
//! lease expires by time (the store's clock), as before.
//!
//! The store stamps every lease it grants with the identity of the process
//! it runs in ([`Process::current`]): the store client always lives in the
//! process that acts on the lease. Tests give a store handle another
//! identity to play a second process.
//!
//! This module reads `/proc`; it must not know SQL or the store's rules.

use std::sync::OnceLock;

/// The process behind a lease.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Process {
    /// Host name, for people (never used to judge liveness).
    pub host: String,
    /// Process id, in the PID namespace `machine` names.
    pub pid: u32,
    /// Start time in clock ticks after boot: tells a reused pid apart.
    pub started: u64,
    /// `<boot id>/<pid namespace inode>`: equal only for processes whose
    /// pids are comparable (same kernel boot, same PID namespace).
    pub machine: String,
}

/// What a worker can say about a lease's holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// A process of this machine that is running.
    Alive,
    /// A process of this machine that is gone; the text says how we know.
    Dead(String),
    /// Another machine (another boot id): only time tells.
    OtherMachine,
    /// This machine, another PID namespace (a container): only time tells.
    OtherNamespace,
    /// The row names no process (written by an older Longhand, or a
    /// platform without `/proc`): only time tells.
    Unknown,
}

impl Liveness {
    /// Whether the holder is proven dead.
    pub fn is_dead(&self) -> bool {
        matches!(self, Liveness::Dead(_))
    }

    /// For messages: "alive on this machine", "on another machine", ….
    pub fn describe(&self) -> String {
        match self {
            Liveness::Alive => "alive on this machine".into(),
            Liveness::Dead(why) => format!("dead: {why}"),
            Liveness::OtherMachine => "on another machine".into(),
            Liveness::OtherNamespace => "in another PID namespace of this machine".into(),
            Liveness::Unknown => "liveness unknown".into(),
        }
    }
}

impl Process {
    /// This process, read once; `None` where `/proc` does not say (not
    /// Linux, a restricted `/proc`): its leases then expire by time only.
    pub fn current() -> Option<Process> {
        static CURRENT: OnceLock<Option<Process>> = OnceLock::new();
        CURRENT.get_or_init(read_current).clone()
    }

    /// Whether this process is alive, judged from `me` (the process
    /// asking).
    pub fn liveness(&self, me: Option<&Process>) -> Liveness {
        let Some(me) = me else {
            return Liveness::Unknown;
        };
        if self.machine != me.machine {
            let boot = |m: &str| m.split('/').next().map(str::to_owned);
            return if boot(&self.machine) == boot(&me.machine) {
                Liveness::OtherNamespace
            } else {
                Liveness::OtherMachine
            };
        }
        match proc_stat(self.pid) {
            None => Liveness::Dead(format!("process {} no longer exists", self.pid)),
            Some(stat) if stat.started != self.started => {
                Liveness::Dead(format!("pid {} now belongs to another process", self.pid))
            }
            Some(stat) if matches!(stat.state, 'Z' | 'X' | 'x') => Liveness::Dead(format!(
                "process {} has exited (not yet reaped by its parent)",
                self.pid
            )),
            Some(_) => Liveness::Alive,
        }
    }
}

/// Judges an optional holder: [`Liveness::Unknown`] when the row names no
/// process.
pub fn liveness(holder: Option<&Process>, me: Option<&Process>) -> Liveness {
    holder.map_or(Liveness::Unknown, |h| h.liveness(me))
}

/// The parts of `/proc/<pid>/stat` we read.
struct Stat {
    state: char,
    started: u64,
}

/// `/proc/<pid>/stat`'s state and start time; `None` when there is no such
/// process (or no `/proc`).
fn proc_stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// The command name (field 2) is in parentheses and may hold spaces and
/// parentheses itself: the fields after it start after the *last* `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, starttime field 22.
    let state = fields.first()?.chars().next()?;
    let started = fields.get(19)?.parse().ok()?;
    Some(Stat { state, started })
}

fn read_current() -> Option<Process> {
    let pid = std::process::id();
    let started = proc_stat(pid)?.started;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
    // "pid:[4026531836]" → "4026531836".
    let ns = ns.to_string_lossy();
    let ns = ns.trim_start_matches("pid:[").trim_end_matches(']');
    Some(Process {
        host: host_name(),
        pid,
        started,
        machine: format!("{}/{ns}", boot.trim()),
    })
}

/// This machine's name: the kernel's (what `hostname` prints), else
/// `/etc/hostname`, else `localhost`.
pub fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p)
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_last_parenthesis() {
        let line = "42 (a) b (c)) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.started, 777);
        assert!(parse_stat("garbage").is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_alive_a_gone_or_reused_pid_is_dead() {
        let me = Process::current().expect("Linux has /proc");
        assert_eq!(me.liveness(Some(&me)), Liveness::Alive);
        let reused = Process {
            started: me.started + 1,
            ..me.clone()
        };
        assert!(reused.liveness(Some(&me)).is_dead());
        // A child that exited and was reaped: its pid is gone.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let started = proc_stat(pid).map(|s| s.started);
        child.wait().unwrap();
        let gone = Process {
            pid,
            started: started.unwrap_or(0),
            ..me.clone()
        };
        assert!(gone.liveness(Some(&me)).is_dead());
        // Elsewhere, nothing is judged.
        let far = Process {
            machine: "another-boot/1".into(),
            ..me.clone()
        };
        assert_eq!(far.liveness(Some(&me)), Liveness::OtherMachine);
        let boot = me.machine.split('/').next().unwrap();
        let container = Process {
            machine: format!("{boot}/1"),
            ..me.clone()
        };
        assert_eq!(container.liveness(Some(&me)), Liveness::OtherNamespace);
        assert_eq!(liveness(None, Some(&me)), Liveness::Unknown);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_killed_unreaped_child_is_dead() {
        let me = Process::current().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let started = proc_stat(pid).unwrap().started;
        let holder = Process {
            pid,
            started,
            ..me.clone()
        };
        assert_eq!(holder.liveness(Some(&me)), Liveness::Alive);
        child.kill().unwrap();
        // Not waited for: a zombie until reaped.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !holder.liveness(Some(&me)).is_dead() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(holder.liveness(Some(&me)).is_dead());
        child.wait().unwrap();
    }
}
