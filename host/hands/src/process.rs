//! `longhand:tool/process`: a component runs a native program the
//! operator granted, confined to the component's own grants.
//!
//! The host side of the interface: it finds the granted program `argv[0]`
//! names (refusing any other as `access-denied`, naming it), checks the
//! program and every granted directory are still what was granted, builds
//! the command's view from the *same* grants the component's filesystem
//! has — each directory at its guest path, read-write only where granted
//! so — and runs it under [`crate::sandbox::confined`]: no network, no
//! other process, only granted variables, and the call's limits.
//!
//! What it decides: which program, which directories, which variables and
//! how long (never past the call's own deadline). What it must not do:
//! confine (that is [`crate::sandbox`]) or interpret the program's output.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::bindings::longhand::tool::process as api;
use super::bindings::longhand::tool::types::{Denied, ToolError};
use super::grants::{Access, DirGrant, Grants};
use super::programs::ProgramGrant;
use super::receipt::Journal;
use super::sandbox::{confined, view};

/// How long before the call's own deadline a command is stopped, so the
/// component still gets its outcome and can answer.
const MARGIN: Duration = Duration::from_millis(250);

/// Where a command's `HOME` points when the operator grants none: its own
/// fresh `/tmp`, so a program that keeps a cache or a config there works
/// and nothing of it outlives the run.
const DEFAULT_HOME: &str = "/tmp";

/// The `PATH` a command gets when the operator grants none: the
/// directories of its granted programs, then the system's.
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What one call may run: built from its grants when the call starts.
pub(crate) struct ProcessGrant {
    programs: Vec<ProgramGrant>,
    dirs: Vec<DirGrant>,
    toolchains: Vec<PathBuf>,
    env: Vec<(String, String)>,
    limits: confined::Limits,
    /// The call's deadline; a command ends [`MARGIN`] before it.
    deadline: Instant,
}

impl ProcessGrant {
    pub(crate) fn new(grants: &Grants) -> Self {
        let l = &grants.limits;
        let mut env: Vec<(String, String)> = grants
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !grants.env.contains_key("PATH") {
            let mut dirs: Vec<String> = Vec::new();
            for p in &grants.programs {
                if let Some(dir) = p.path.parent().and_then(Path::to_str)
                    && !dirs.iter().any(|d| d == dir)
                    && !SYSTEM_PATH.split(':').any(|d| d == dir)
                {
                    dirs.push(dir.to_owned());
                }
            }
            dirs.push(SYSTEM_PATH.to_owned());
            env.push(("PATH".into(), dirs.join(":")));
        }
        if !grants.env.contains_key("HOME") {
            env.push(("HOME".into(), DEFAULT_HOME.into()));
        }
        Self {
            programs: grants.programs.clone(),
            dirs: grants.dirs.clone(),
            toolchains: grants.toolchains.clone(),
            env,
            limits: confined::Limits {
                wall: l.timeout,
                cpu: l.timeout,
                memory: l.command_memory_bytes,
                processes: l.processes,
                open_files: confined::Limits::default().open_files,
                file_size: l.max_write_bytes,
                output: usize::try_from(l.max_output_bytes / 4)
                    .unwrap_or(usize::MAX)
                    .clamp(4 << 10, 256 << 10),
            },
            deadline: Instant::now() + l.timeout,
        }
    }
}

/// Run `command` under `grant`, recording what was used and refused.
pub(crate) async fn run(
    grant: Option<Arc<ProcessGrant>>,
    journal: Arc<Mutex<Journal>>,
    command: api::Command,
) -> Result<api::Outcome, ToolError> {
    let record = |f: &dyn Fn(&mut Journal)| {
        if let Ok(mut j) = journal.lock() {
            f(&mut j);
        }
    };
    let deny = |resource: &str, reason: String| {
        record(&|j| j.deny("process", cut(resource), reason.clone()));
        ToolError::AccessDenied(Denied {
            resource: cut(resource),
            reason,
        })
    };
    let Some((argv0, args)) = command.argv.split_first() else {
        return Err(ToolError::InvalidInput(
            "`argv` is empty: give the program and its arguments".into(),
        ));
    };
    if command.argv.iter().any(|a| a.contains('\0')) {
        return Err(ToolError::InvalidInput(
            "an argument contains a NUL character".into(),
        ));
    }
    let grant = match grant {
        Some(g) if !g.programs.is_empty() => g,
        _ => {
            return Err(deny(
                argv0,
                "no program is granted to this tool: the operator grants programs with \
                 `programs = [\"...\"]` in its [[tools]] entry or `--program NAME` on the \
                 command line"
                    .into(),
            ));
        }
    };
    let Some(program) = grant.programs.iter().find(|p| p.answers_to(argv0)) else {
        let granted: Vec<&str> = grant.programs.iter().map(|p| p.name.as_str()).collect();
        return Err(deny(
            argv0,
            format!(
                "not a granted program (granted: {}); no shell runs it either: argv[0] must \
                 name a granted program",
                granted.join(", ")
            ),
        ));
    };
    program
        .verify()
        .map_err(|e| deny(&program.name, e.to_string()))?;
    // Nothing a tool could have written into the host's home runs, or is
    // shown to a program, whatever was granted.
    super::dirs::check_protected(&program.file).map_err(|why| deny(&program.name, why))?;
    for toolchain in &grant.toolchains {
        super::dirs::check_protected(toolchain)
            .map_err(|why| deny(&toolchain.display().to_string(), why))?;
    }
    let cwd = guest_path(&command.cwd).ok_or_else(|| {
        ToolError::InvalidInput(format!(
            "`cwd` {:?} is not an absolute path without `..`; give a directory such as /workspace",
            cut(&command.cwd)
        ))
    })?;
    if !grant
        .dirs
        .iter()
        .any(|d| cwd.starts_with(Path::new(d.guest_path())))
    {
        let granted: Vec<&str> = grant.dirs.iter().map(DirGrant::guest_path).collect();
        return Err(deny(
            &command.cwd,
            if granted.is_empty() {
                "no directory is granted to this tool, so a command has nowhere to run".into()
            } else {
                format!(
                    "not inside a granted directory (granted: {})",
                    granted.join(", ")
                )
            },
        ));
    }
    // Each directory is the one pinned when the grant was made, or
    // nothing runs (the error names it).
    for dir in &grant.dirs {
        super::dirs::open(dir).map_err(|why| deny(dir.guest_path(), why))?;
    }
    let left = grant
        .deadline
        .saturating_duration_since(Instant::now())
        .saturating_sub(MARGIN);
    let mut limits = grant.limits.clone();
    limits.wall = match command.timeout_ms {
        Some(ms) => left.min(Duration::from_millis(ms)),
        None => left,
    };
    limits.cpu = limits.cpu.min(limits.wall).max(Duration::from_secs(1));
    if limits.wall.is_zero() {
        return Err(ToolError::Failed(
            "no time is left in this call to run a command; the operator sets a call's \
             time with `timeout`"
                .into(),
        ));
    }
    let system = system_view(&grant.toolchains, program);
    let spill = Spill::open(
        spill_grant(&grant.dirs, &cwd).as_ref(),
        grant.limits.file_size,
    );
    let spec = confined::Spec {
        program: program.file.clone(),
        args: args.to_vec(),
        arg0: program.arg0(),
        cwd,
        env: grant.env.clone(),
        stdin: command.stdin,
        mounts: mounts(&grant.dirs),
        system,
        limits,
        spill: spill.as_ref().map(|s| s.files.clone()),
    };
    let outcome = confined::run(&spec).await.map_err(|e| match e {
        confined::ConfinedError::View(view::ViewError::Guest(path)) => ToolError::InvalidInput(
            format!("the path {} cannot be used as a directory", path.display()),
        ),
        confined::ConfinedError::Spawn { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            ToolError::NotFound(format!(
                "`cwd` {} does not exist in the granted directories",
                spec.cwd.display()
            ))
        }
        other => ToolError::Failed(other.to_string()),
    })?;
    let detail = match (outcome.exit_code, outcome.signal) {
        (Some(code), _) => format!("exit {code} in {} ms", outcome.duration_ms),
        (None, Some(signal)) => format!("signal {signal} after {} ms", outcome.duration_ms),
        (None, None) => format!("ended after {} ms", outcome.duration_ms),
    };
    record(&|j| {
        j.use_cap("process", program.name.clone(), detail.clone());
        for limit in &outcome.limits_hit {
            j.limit_hit(format!("process {limit}"));
        }
    });
    let (stdout_saved, stderr_saved) = match spill {
        Some(spill) => spill.keep(outcome.stdout.cut > 0, outcome.stderr.cut > 0),
        None => (None, None),
    };
    let output = |c: confined::Captured, saved_to: Option<String>| api::Output {
        text: c.text,
        total_bytes: c.total,
        cut_bytes: c.cut,
        saved_to,
    };
    Ok(api::Outcome {
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        stdout: output(outcome.stdout, stdout_saved),
        stderr: output(outcome.stderr, stderr_saved),
        duration_ms: outcome.duration_ms,
        limits_hit: outcome
            .limits_hit
            .iter()
            .map(|l| l.replace('_', "-"))
            .collect(),
    })
}

/// The read-only host paths a granted program sees at their own paths:
/// the system's, the toolchains, and the program itself.
pub(crate) fn system_view(toolchains: &[PathBuf], program: &ProgramGrant) -> Vec<PathBuf> {
    let mut system = confined::system_paths();
    system.extend(toolchains.iter().cloned());
    if !system.iter().any(|s| program.file.starts_with(s)) {
        system.push(program.file.clone());
    }
    system
}

/// Directory grants as the view mounts them: each at its guest path,
/// writable only where granted so.
pub(crate) fn mounts(dirs: &[DirGrant]) -> Vec<view::Mount> {
    dirs.iter()
        .map(|d| view::Mount {
            host: d.host_path().to_owned(),
            guest: PathBuf::from(d.guest_path()),
            writable: d.access() == Access::ReadWrite,
        })
        .collect()
}

/// The grant the whole output of a cut stream is saved in: the one
/// holding the working directory when it is read-write, else the first
/// read-write grant; none when nothing is granted read-write.
fn spill_grant(dirs: &[DirGrant], cwd: &Path) -> Option<DirGrant> {
    let writable = |d: &&DirGrant| d.access() == Access::ReadWrite;
    dirs.iter()
        .filter(writable)
        .find(|d| cwd.starts_with(Path::new(d.guest_path())))
        .or_else(|| dirs.iter().find(writable))
        .cloned()
}

/// The directory, beneath a read-write grant, where cut output is saved.
const SPILL_DIR: &str = ".longhand-exec";

/// Two files in [`SPILL_DIR`] of a read-write grant, receiving the whole
/// of each stream; the one whose stream was not cut is removed after the
/// run. Made through descriptors with no symlink followed: the program
/// writes in the same grant and may have put a link where the directory
/// should be.
struct Spill {
    files: confined::Spill,
    root: std::fs::File,
    dir: std::fs::File,
    guest_dir: String,
    names: [String; 2],
}

impl Spill {
    fn open(grant: Option<&DirGrant>, limit: u64) -> Option<Self> {
        use rustix::fs::{Mode, OFlags};
        let grant = grant?;
        let root = super::dirs::open(grant).ok()?;
        let mode = Mode::from_bits_truncate(0o755);
        match rustix::fs::mkdirat(&root, SPILL_DIR, mode) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(_) => return None,
        }
        let dir = rustix::fs::openat(
            &root,
            SPILL_DIR,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let names = [format!("{stamp}.stdout"), format!("{stamp}.stderr")];
        let create = |name: &str| {
            rustix::fs::openat(
                &dir,
                name,
                OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_bits_truncate(0o644),
            )
            .ok()
            .map(|fd| Arc::new(std::fs::File::from(fd)))
        };
        let stdout = create(&names[0])?;
        let stderr = create(&names[1])?;
        Some(Self {
            files: confined::Spill {
                stdout,
                stderr,
                limit,
            },
            root,
            dir: std::fs::File::from(dir),
            guest_dir: format!("{}/{SPILL_DIR}", grant.guest_path().trim_end_matches('/')),
            names,
        })
    }

    /// Keep the files of the streams that were cut (their guest paths),
    /// remove the others.
    fn keep(self, stdout_cut: bool, stderr_cut: bool) -> (Option<String>, Option<String>) {
        let [out, err] = &self.names;
        let settle = |name: &str, cut: bool| {
            if cut {
                Some(format!("{}/{name}", self.guest_dir))
            } else {
                let _ = rustix::fs::unlinkat(&self.dir, name, rustix::fs::AtFlags::empty());
                None
            }
        };
        let kept = (settle(out, stdout_cut), settle(err, stderr_cut));
        if kept == (None, None) {
            // Removed when empty; kept when another run's files are
            // there (and never followed: a link is not a directory).
            let _ = rustix::fs::unlinkat(&self.root, SPILL_DIR, rustix::fs::AtFlags::REMOVEDIR);
        }
        kept
    }
}

/// `text` as an absolute path with no `.` or `..`, or `None`.
fn guest_path(text: &str) -> Option<PathBuf> {
    let path = Path::new(text);
    if !path.is_absolute() || text.contains('\0') {
        return None;
    }
    path.components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        .then(|| path.to_owned())
}

/// Names from a guest, bounded before they enter a receipt or a message.
fn cut(text: &str) -> String {
    super::bound::cut_str(text, 512).into_owned()
}
