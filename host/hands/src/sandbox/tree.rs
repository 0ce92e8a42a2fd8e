//! A command's whole process tree, held so that no process of it outlives
//! its run or the harness that started it.
//!
//! How, on Linux:
//! 1. The command is forked from one thread that never exits ([`spawn`])
//!    with `PR_SET_PDEATHSIG(SIGKILL)`: that process, the *keeper*, dies
//!    the moment the harness does, `kill -9` included. (The signal follows
//!    the *thread* that forked, hence the one thread.)
//! 2. The keeper enters new user, pid and mount namespaces and forks once
//!    more. The second process is pid 1 of the new pid namespace; it sets
//!    its own `PR_SET_PDEATHSIG(SIGKILL)` towards the keeper, mounts a
//!    `/proc` of its namespace where the kernel allows it, and execs the
//!    command. The keeper waits for it and exits as it did (its code, or
//!    its signal), so the caller's child handle reads like the command's.
//! 3. When pid 1 of a pid namespace dies, the kernel kills every other
//!    process in it. So the whole tree dies when the command ends (what it
//!    left in the background too), when the keeper is killed (a time
//!    limit, a dropped run: kill the keeper or its process group), and when
//!    the harness dies.
//!
//! Why a pid namespace rather than a subreaper or a cgroup: a subreaper only
//! collects orphans, and it dies of `SIGKILL` like any process, handing
//! them to init; a cgroup needs a delegated subtree that an edge box rarely
//! gives an unprivileged user. A pid namespace needs only unprivileged user
//! namespaces, and the kernel does the killing, with no race against a
//! process that forks while it is being killed.
//!
//! What the command sees: pid 1 for itself (`$$`), a `/proc` of its own
//! namespace where the kernel lets one be mounted (so `/proc/$$` is its
//! own), its own uid and gid mapped onto themselves (so file ownership
//! reads as before), and no capability after exec unless it was root
//! outside. Its processes are still visible, with their outer pids, in the
//! harness's `/proc`.
//!
//! Where user namespaces are off (a sysctl, an LSM, another OS), the
//! command runs with `PR_SET_PDEATHSIG` alone and [`Tree::contained`] says
//! so: the command itself dies with the harness, what it started in the
//! background does not, and the caller must reap it some other way (a
//! command check does by an environment marker).
//!
//! This module must not decide what runs nor what it may touch: callers add
//! their own confinement (Landlock) after [`hold`], so that it applies in
//! the process that execs, not in the keeper.

/// How a command's process tree is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    contained: bool,
}

impl Tree {
    /// Whether the whole tree is held in a pid namespace of its own, and so
    /// dies with its run and with the harness. False where user namespaces
    /// are unavailable: then only the command's own process does.
    pub fn contained(&self) -> bool {
        self.contained
    }

    /// What was not held, and why, for people; `None` when the tree was.
    pub fn note(&self) -> Option<&'static str> {
        if self.contained {
            None
        } else {
            Some(
                "user namespaces are unavailable: processes the command leaves in the \
                 background do not die with the harness",
            )
        }
    }
}

/// How many processes a tree held by [`hold`] may have at once (its pid
/// namespace's `pid_max`, where the kernel keeps one per namespace; best
/// effort there, exact in [`hold_isolated`]): a fork bomb in a test the
/// model wrote stops at this, not at the machine's last pid.
pub const HELD_PROCESSES: u64 = 4096;

/// Prepare `command` so that its whole process tree is held (see the
/// module docs). Call it before adding any `pre_exec` step that must run in
/// the process that execs (Landlock): steps added after this run there.
/// Start the command with [`spawn`].
pub fn hold(command: &mut tokio::process::Command) -> Tree {
    die_with_parent(command);
    let contained = imp::available(imp::FLAGS);
    if contained {
        imp::enter_on_exec(command, false, HELD_PROCESSES);
    }
    Tree { contained }
}

/// What [`hold_isolated`] could not have from this kernel.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "this kernel does not let Longhand create user, pid, mount, network, IPC and UTS \
     namespaces (unprivileged user namespaces are off, or a seccomp or AppArmor rule refuses \
     them): a command cannot be confined, so it does not run"
)]
pub struct Unavailable;

/// The error number a held command fails to start with when its
/// processes cannot be bounded (see [`hold_isolated`]): a child between
/// fork and exec can report only a number, and no other step of the
/// start uses this one.
#[cfg(target_os = "linux")]
pub const PROCESSES_UNBOUNDED: i32 = libc::EUSERS;
#[cfg(not(target_os = "linux"))]
pub const PROCESSES_UNBOUNDED: i32 = 87;

/// Like [`hold`], and also in network, IPC and UTS namespaces of its own
/// (no interface but a loopback that is down, no System V IPC or abstract
/// unix socket of the host), as a user that is not root inside (so the
/// command keeps no capability after exec, even where the harness runs as
/// root). Nothing is held less: where the kernel cannot give all of it,
/// the command does not start ([`Unavailable`]). The steps that build the
/// command's filesystem ([`super::view`]) are added after this one.
///
/// `processes` bounds how many processes the run may have at once, by the
/// pid namespace's own `pid_max` (Linux 6.14 and later). `RLIMIT_NPROC`
/// alone cannot: it counts per user on the host, and the kernel exempts
/// the host's root from it, so under a harness running as root a fork bomb
/// would take every pid of the machine. The kernel keeps the first 300
/// pids of a namespace for the ones that wrap around, so the bound is
/// `processes + 300`; where the host user is not root, `RLIMIT_NPROC`
/// holds the exact number as well. Under root on a kernel that keeps
/// `pid_max` global, the command does not start.
pub fn hold_isolated(
    command: &mut tokio::process::Command,
    processes: u64,
) -> Result<Tree, Unavailable> {
    if !imp::available(imp::ISOLATED) {
        return Err(Unavailable);
    }
    die_with_parent(command);
    imp::enter_on_exec(command, true, processes);
    Ok(Tree { contained: true })
}

/// Whether [`hold_isolated`] can work here.
pub fn isolation_available() -> bool {
    imp::available(imp::ISOLATED)
}

/// In the child: `PR_SET_PDEATHSIG(SIGKILL)`, so the command dies with the
/// harness. The signal follows the thread that forked, which is why
/// [`spawn`] forks from a thread that never exits. If the harness died
/// between the fork and the `prctl`, the child is an orphan already and
/// stops there.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut tokio::process::Command) {
    let parent = i32::try_from(std::process::id()).unwrap_or(0);
    // SAFETY: the closure runs between fork and exec and calls only prctl
    // and getppid, both async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                // No message: the child may not allocate, and the parent
                // sees only the number.
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut tokio::process::Command) {}

/// Start `command` (prepared with [`hold`]) on the one thread that forks
/// every held command, registered with the calling task's runtime (which
/// reaps it).
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits,
/// not the process. The async task may sit on any runtime thread, and the
/// blocking pool's threads exit after ten idle seconds: a command forked
/// there would be killed mid-run for no reason. Forking here ties the
/// signal to the process's life.
pub async fn spawn(mut command: tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    use std::sync::OnceLock;
    use std::sync::mpsc;

    type Job = Box<dyn FnOnce() + Send>;

    fn queue() -> Option<&'static mpsc::Sender<Job>> {
        static QUEUE: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
        QUEUE
            .get_or_init(|| {
                let (tx, rx) = mpsc::channel::<Job>();
                std::thread::Builder::new()
                    .name("longhand-spawner".into())
                    .spawn(move || {
                        for job in rx {
                            job();
                        }
                    })
                    .ok()?;
                Some(tx)
            })
            .as_ref()
    }

    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _runtime = handle.enter();
        let _ = tx.send(command.spawn());
    });
    let gone = || std::io::Error::other("the thread that starts commands is gone");
    queue().ok_or_else(gone)?.send(job).map_err(|_| gone())?;
    rx.await.map_err(|_| gone())?
}

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::CString;
    use std::sync::OnceLock;

    pub const FLAGS: libc::c_int = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    pub const ISOLATED: libc::c_int =
        FLAGS | libc::CLONE_NEWNET | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;

    /// The uid (or gid) an isolated command has inside: its own, unless
    /// that is root, which would keep every capability across exec.
    const UNPRIVILEGED: libc::uid_t = 1000;

    /// Whether this process may create the namespaces, found once by trying
    /// in a throwaway child: a sysctl, an AppArmor rule or a seccomp filter
    /// can each refuse, and only trying tells them all apart from success.
    pub fn available(flags: libc::c_int) -> bool {
        static PLAIN: OnceLock<bool> = OnceLock::new();
        static ISOLATED_OK: OnceLock<bool> = OnceLock::new();
        let once = if flags == FLAGS { &PLAIN } else { &ISOLATED_OK };
        *once.get_or_init(|| {
            // SAFETY: the child calls only unshare and _exit, both
            // async-signal-safe, so forking a threaded process is sound;
            // the parent reaps it at once.
            unsafe {
                match libc::fork() {
                    -1 => false,
                    0 => libc::_exit(i32::from(libc::unshare(flags) != 0)),
                    pid => {
                        let mut status = 0;
                        loop {
                            let r = libc::waitpid(pid, &mut status, 0);
                            if r == pid {
                                break;
                            }
                            if r == -1
                                && std::io::Error::last_os_error().raw_os_error()
                                    != Some(libc::EINTR)
                            {
                                return false;
                            }
                        }
                        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
                    }
                }
            }
        })
    }

    /// Everything the child needs, built before the fork: the child may
    /// not allocate.
    struct Prepared {
        flags: libc::c_int,
        setgroups: CString,
        uid_map: CString,
        gid_map: CString,
        uid_line: Vec<u8>,
        gid_line: Vec<u8>,
        root: CString,
        proc_dir: CString,
        proc_fs: CString,
        pid_max: CString,
        /// The namespace's `pid_max`.
        pid_max_line: Vec<u8>,
        /// Whether the bound must hold by `pid_max` alone (the host user
        /// is root, whom `RLIMIT_NPROC` does not stop).
        pid_max_needed: bool,
    }

    /// The pids a pid namespace keeps for wrapping around (the kernel's
    /// `RESERVED_PIDS`): after the first wrap, new pids start above them.
    const RESERVED_PIDS: u64 = 300;

    /// `isolated`: also network, IPC and UTS namespaces, as a user that is
    /// not root inside, and the bound on `processes` must hold (see
    /// `hold_isolated`).
    pub fn enter_on_exec(command: &mut tokio::process::Command, isolated: bool, processes: u64) {
        // SAFETY: getuid and getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let inside = |id: libc::uid_t| {
            if isolated && id == 0 {
                UNPRIVILEGED
            } else {
                id
            }
        };
        let prepared = Prepared {
            flags: if isolated { ISOLATED } else { FLAGS },
            setgroups: CString::from(c"/proc/self/setgroups"),
            uid_map: CString::from(c"/proc/self/uid_map"),
            gid_map: CString::from(c"/proc/self/gid_map"),
            uid_line: format!("{} {uid} 1\n", inside(uid)).into_bytes(),
            gid_line: format!("{} {gid} 1\n", inside(gid)).into_bytes(),
            root: CString::from(c"/"),
            proc_dir: CString::from(c"/proc"),
            proc_fs: CString::from(c"proc"),
            pid_max: CString::from(c"/proc/sys/kernel/pid_max"),
            pid_max_line: format!("{}\n", processes.saturating_add(RESERVED_PIDS + 1)).into_bytes(),
            pid_max_needed: isolated && uid == 0,
        };
        // SAFETY: `enter` makes only async-signal-safe system calls and
        // allocates nothing (every buffer is built above); see there.
        unsafe {
            command.pre_exec(move || enter(&prepared));
        }
    }

    /// Writes `line` to the file `path`; whether all of it was written.
    /// Failing to write the uid and gid maps is ignored: without them the
    /// command runs as the overflow uid, which still works.
    unsafe fn write_file(path: &CString, line: &[u8]) -> bool {
        // SAFETY: a valid C string; the descriptor is closed before return.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return false;
            }
            let written = libc::write(fd, line.as_ptr().cast(), line.len());
            libc::close(fd);
            usize::try_from(written) == Ok(line.len())
        }
    }

    /// Between fork and exec: enter the namespaces and fork pid 1, which
    /// returns to exec the command; this process becomes the keeper and
    /// never returns.
    unsafe fn enter(p: &Prepared) -> std::io::Result<()> {
        // SAFETY: every call below is a plain system call on memory built
        // before the fork; nothing allocates or takes a lock.
        unsafe {
            if libc::unshare(p.flags) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            write_file(&p.setgroups, b"deny");
            write_file(&p.uid_map, &p.uid_line);
            write_file(&p.gid_map, &p.gid_line);
            let mut fds = [0 as libc::c_int; 2];
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let [alive, keeper_end] = fds;
            match libc::fork() {
                -1 => Err(std::io::Error::last_os_error()),
                0 => {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::close(keeper_end);
                    // The keeper holds its end until it exits: end of file
                    // here means it is gone already, and the signal set
                    // above can no longer come.
                    let mut byte = 0u8;
                    if libc::read(alive, (&raw mut byte).cast(), 1) == 0 {
                        libc::_exit(1);
                    }
                    libc::close(alive);
                    // A /proc of this namespace, so `/proc/$$` is the
                    // command's own. Mounts made here never reach the
                    // harness's namespace (private first); if the kernel
                    // refuses (a /proc with parts masked), the outer one
                    // stays, which only shows outer pids.
                    let mut own_proc = libc::mount(
                        std::ptr::null(),
                        p.root.as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) == 0;
                    own_proc = own_proc
                        && libc::mount(
                            p.proc_fs.as_ptr(),
                            p.proc_dir.as_ptr(),
                            p.proc_fs.as_ptr(),
                            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                            std::ptr::null(),
                        ) == 0;
                    // Only through this namespace's own /proc: the outer
                    // one names the outer namespace's pid_max.
                    let bounded = own_proc && write_file(&p.pid_max, &p.pid_max_line);
                    if !bounded && p.pid_max_needed {
                        // The parent sees only the error number; see
                        // `PROCESSES_UNBOUNDED`.
                        return Err(std::io::Error::from_raw_os_error(
                            super::PROCESSES_UNBOUNDED,
                        ));
                    }
                    Ok(())
                }
                child => keep(child, keeper_end),
            }
        }
    }

    /// The keeper: hold no descriptor but the one pid 1 watches (the
    /// command's pipes must close when the command's side does), wait for
    /// pid 1 and end as it did.
    unsafe fn keep(child: libc::pid_t, keep_fd: libc::c_int) -> ! {
        // SAFETY: plain system calls on this process's own descriptors
        // and child.
        unsafe {
            close_all_but(keep_fd);
            let mut status = 0;
            loop {
                let r = libc::waitpid(child, &mut status, 0);
                if r == child {
                    break;
                }
                if r == -1 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    libc::_exit(127);
                }
            }
            if libc::WIFEXITED(status) {
                libc::_exit(libc::WEXITSTATUS(status));
            }
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal)
        }
    }

    unsafe fn close_all_but(keep: libc::c_int) {
        let keep = keep as libc::c_uint;
        // SAFETY: closing descriptors this process owns.
        unsafe {
            let ranges = [(0, keep.saturating_sub(1)), (keep + 1, libc::c_uint::MAX)];
            for (first, last) in ranges {
                if first > last || (first == 0 && keep == 0) {
                    continue;
                }
                if libc::syscall(libc::SYS_close_range, first, last, 0) != 0 {
                    // Kernels before 5.9: one by one, as far as any
                    // harness plausibly opens.
                    for fd in first..last.min(65_536) {
                        libc::close(fd as libc::c_int);
                    }
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub const FLAGS: i32 = 0;
    pub const ISOLATED: i32 = 1;

    pub fn available(_: i32) -> bool {
        false
    }

    pub fn enter_on_exec(_: &mut tokio::process::Command, _: bool, _: u64) {}
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .is_some_and(|state| state != "Z")
        })
    }

    /// The outer pids of the processes whose parent is `pid`.
    fn children(pid: u32) -> Vec<u32> {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    fn shell(script: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("/bin/sh");
        command
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        command
    }

    #[tokio::test]
    async fn the_command_sees_itself_as_pid_one_and_exits_as_it_did() {
        let mut command = shell("echo $$; exit 7");
        let tree = hold(&mut command);
        let out = spawn(command)
            .await
            .unwrap()
            .wait_with_output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(7));
        if tree.contained() {
            assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
        } else {
            assert!(tree.note().is_some());
        }
    }

    #[tokio::test]
    async fn killing_the_keeper_kills_what_the_command_left_in_the_background() {
        let mut command = shell("sleep 30 & sleep 30; true");
        let tree = hold(&mut command);
        if !tree.contained() {
            return;
        }
        let mut child = spawn(command).await.unwrap();
        let keeper = child.id().unwrap();
        // Pid 1 of the namespace, then its two sleeps.
        let start = Instant::now();
        let (init, sleeps) = loop {
            let init = children(keeper);
            let sleeps: Vec<u32> = init.iter().flat_map(|p| children(*p)).collect();
            if init.len() == 1 && sleeps.len() == 2 {
                break (init[0], sleeps);
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no tree");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        child.kill().await.unwrap();
        let start = Instant::now();
        while alive(init) || sleeps.iter().any(|p| alive(*p)) {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "the tree outlived its keeper"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
