//! From a named command check in agent.toml ([`CommandCheckConfig`]) to the
//! [`CommandSpec`] that [`super::command::run`] runs.
//!
//! The operator writes paths the way the agent sees them: `cwd` and
//! `writable` are guest paths inside the agent's granted directories
//! ([`GrantedDir`]), so a check can never reach further than the agent's own
//! grants, and can only write where the agent may write. Resolution maps
//! them to host paths, adds every granted directory as readable, expands
//! the extra read-only host paths (a toolchain), and looks the program up on
//! the host `PATH`, recording its absolute path.
//!
//! [`resolve`] is a function of its arguments and the filesystem only: the
//! config, the granted directories and an environment lookup (for `HOME`
//! and `PATH`). Call it when the agent starts, so a bad check is a config
//! error before anything runs, and again right before each run of the
//! check: a path inside a writable grant may have changed in between (a
//! symbolic link the worker planted is refused here, see [`resolve`]).
//!
//! This module must not run anything; [`super::command`] does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::command::CommandSpec;

/// Default [`CommandCheckConfig::timeout`]: 5 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Default [`CommandCheckConfig::max_output`]: 64 KiB.
pub const DEFAULT_MAX_OUTPUT: usize = 64 << 10;
/// Largest [`CommandCheckConfig::max_output`]: 16 MiB. What a check prints
/// ends up in the session log and, cut, in the worker's next context.
pub const MAX_OUTPUT_LIMIT: usize = 16 << 20;

/// One named command check as the operator wrote it in agent.toml
/// (`[checks.<name>]`):
///
/// ```toml
/// [checks.tests]
/// argv = ["cargo", "test", "--offline"]
/// cwd = "/out/crate"
/// writable = ["/out"]
/// read_only = ["~/.cargo", "~/.rustup", "/usr", "/lib", "/lib64", "/etc"]
/// env = ["PATH", "HOME"]
/// set_env = { CARGO_TARGET_DIR = "/out/target" }
/// timeout = "120s"
/// max_output = 65536
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandCheckConfig {
    /// Program and arguments, exactly; no shell unless it names one.
    /// `argv[0]` without a `/` is looked up on the host `PATH` when the
    /// check is resolved; with one it must be absolute. Required.
    pub argv: Vec<String>,
    /// Working directory: a guest path inside one of the agent's granted
    /// directories. It must exist when the check runs (not when it is
    /// resolved: it may be a directory the work creates). Required.
    pub cwd: String,
    /// Guest paths the command may write: granted read-write directories
    /// or paths inside them. Default none: every granted directory is
    /// read-only to the command.
    #[serde(default)]
    pub writable: Vec<String>,
    /// Extra host paths the command may read and execute (a toolchain,
    /// system libraries); `~` at the start is `$HOME`, and a relative path
    /// is relative to the agent's directory (made absolute when the agent
    /// is frozen, [`CommandCheckConfig::anchored`]). A path that does not
    /// exist is skipped, with a note: one agent file then serves machines
    /// with and without, say, `/lib64`, and skipping only ever denies more.
    /// Default none.
    #[serde(default)]
    pub read_only: Vec<String>,
    /// Names of variables passed through from the host environment; every
    /// other variable is removed. Default none.
    #[serde(default)]
    pub env: Vec<String>,
    /// Variables set to fixed values. A value that is a guest path of a
    /// granted directory, or a path inside one, becomes the host path
    /// (`/out/target` → `<host of /out>/target`). Default none.
    #[serde(default)]
    pub set_env: BTreeMap<String, String>,
    /// Wall-time limit, e.g. `"120s"`; the whole process group is killed at
    /// its end. Default 5 minutes.
    #[serde(
        default = "default_timeout",
        with = "crate::model::spec::duration_text"
    )]
    pub timeout: Duration,
    /// Bytes kept of stdout and of stderr each. Default 64 KiB, at most
    /// 16 MiB.
    #[serde(default = "default_max_output")]
    pub max_output: usize,
}

fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}

fn default_max_output() -> usize {
    DEFAULT_MAX_OUTPUT
}

/// A directory the agent was granted: where it is on the host, where its
/// tools see it, and whether they may write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantedDir {
    /// The directory on the host (absolute).
    pub host: PathBuf,
    /// Where the agent's tools see it, e.g. `/out`.
    pub guest: String,
    /// Granted read-write.
    pub writable: bool,
}

/// A resolved check: the spec to run, and what resolution skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What [`super::command::run`] runs.
    pub spec: CommandSpec,
    /// For people: read-only paths skipped because they do not exist.
    pub notes: Vec<String>,
}

/// A command check that cannot be resolved. The operator fixes agent.toml;
/// nothing ran. The message names the check and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("checks.{check}.{field}: {reason}")]
pub struct ResolveError {
    /// The check's name (`tests` for `[checks.tests]`).
    pub check: String,
    /// The field at fault (`argv`, `cwd`, ...).
    pub field: &'static str,
    /// What is wrong and what to do.
    pub reason: String,
}

impl CommandCheckConfig {
    /// This check with its relative `read_only` paths made absolute under
    /// `base` (the agent's directory), as `dirs` are; `~/…` and absolute
    /// paths stay as written. A frozen agent holds anchored checks, so
    /// every process that wakes its session reads the same paths.
    pub fn anchored(&self, base: &Path) -> Self {
        let mut check = self.clone();
        for text in &mut check.read_only {
            if !text.starts_with('~') && Path::new(text.as_str()).is_relative() {
                *text = base.join(text.as_str()).to_string_lossy().into_owned();
            }
        }
        check
    }
}

/// Resolve check `name` against the agent's granted directories. `lookup`
/// reads host environment variables (`HOME` for `~`, `PATH` for `argv[0]`).
///
/// Refused: an empty argv, a program not found, or one outside every
/// readable path (it could not start under Landlock); a `cwd` or
/// `writable` path that is not absolute, has `.` or `..`, lies outside
/// every granted directory, or (when it exists) leads out of its grant
/// through a symbolic link; a `writable` path in a read-only grant; a
/// relative `read_only` path (not [anchored](CommandCheckConfig::anchored));
/// an environment name listed in both `env` and
/// `set_env`; a zero timeout; a `max_output` of 0 or above 16 MiB.
pub fn resolve(
    name: &str,
    config: &CommandCheckConfig,
    dirs: &[GrantedDir],
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Resolved, ResolveError> {
    let err = |field: &'static str, reason: String| ResolveError {
        check: name.to_owned(),
        field,
        reason,
    };
    if config.timeout.is_zero() {
        return Err(err("timeout", "must be more than 0, e.g. \"120s\"".into()));
    }
    if config.max_output == 0 || config.max_output > MAX_OUTPUT_LIMIT {
        return Err(err(
            "max_output",
            format!(
                "{} is out of range: give 1 to {MAX_OUTPUT_LIMIT} bytes",
                config.max_output
            ),
        ));
    }

    let cwd = map_guest(&config.cwd, dirs).map_err(|r| err("cwd", r))?.0;
    let mut writable = Vec::new();
    for path in &config.writable {
        let (host, dir) = map_guest(path, dirs).map_err(|r| err("writable", r))?;
        if !dir.writable {
            return Err(err(
                "writable",
                format!(
                    "`{path}` is in `{}`, which the agent is granted read-only; a check writes \
                     only where the agent may: grant that directory rw, or drop `{path}`",
                    dir.guest
                ),
            ));
        }
        push_new(&mut writable, host);
    }

    let mut read_only = Vec::new();
    let mut notes = Vec::new();
    for dir in dirs {
        push_new(&mut read_only, dir.host.clone());
    }
    for text in &config.read_only {
        let path = expand_home(text, &lookup).map_err(|r| err("read_only", r))?;
        if !path.is_absolute() {
            return Err(err(
                "read_only",
                format!(
                    "`{text}` is relative and was not anchored at the agent's directory: \
                     give an absolute host path or one starting `~/`"
                ),
            ));
        }
        if path.exists() {
            // A check reads where the agent's grants could not reach; the
            // host's own directories stay out of that too.
            longhand_hands::dirs::check_protected(&path)
                .map_err(|r| err("read_only", format!("`{text}`: {r}")))?;
            push_new(&mut read_only, path);
        } else {
            notes.push(format!(
                "checks.{name}.read_only: `{text}` ({}) does not exist; skipped",
                path.display()
            ));
        }
    }

    let (program, args) = config.argv.split_first().ok_or_else(|| {
        err(
            "argv",
            "is empty: give the program and its arguments".into(),
        )
    })?;
    let program = find_program(program, &lookup).map_err(|r| err("argv", r))?;
    reachable(&program, read_only.iter().chain(&writable)).map_err(|r| err("argv", r))?;

    let mut env = Vec::new();
    for var in &config.env {
        valid_env_name(var).map_err(|r| err("env", r))?;
        if config.set_env.contains_key(var) {
            return Err(err(
                "env",
                format!("`{var}` is also in set_env: keep it in one of the two"),
            ));
        }
        if !env.contains(var) {
            env.push(var.clone());
        }
    }
    let mut set_env = BTreeMap::new();
    for (var, value) in &config.set_env {
        valid_env_name(var).map_err(|r| err("set_env", r))?;
        let value = map_value(value, dirs).map_err(|r| err("set_env", format!("`{var}`: {r}")))?;
        set_env.insert(var.clone(), value);
    }

    let mut argv = vec![program.to_string_lossy().into_owned()];
    argv.extend(args.iter().cloned());
    Ok(Resolved {
        spec: CommandSpec {
            argv,
            cwd,
            env,
            set_env,
            read_only,
            writable,
            timeout: config.timeout,
            max_output: config.max_output,
            confine: true,
        },
        notes,
    })
}

fn push_new(paths: &mut Vec<PathBuf>, path: PathBuf) {
    if !paths.contains(&path) {
        paths.push(path);
    }
}

/// The components of an absolute guest path, refusing `.` and `..`.
fn guest_components(path: &str) -> Result<Vec<&str>, String> {
    if !path.starts_with('/') {
        return Err(format!(
            "`{path}` is not absolute: give a guest path such as `/out/crate`"
        ));
    }
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    if parts.iter().any(|c| *c == "." || *c == "..") {
        return Err(format!("`{path}` may not contain `.` or `..`"));
    }
    Ok(parts)
}

/// The granted directory holding guest path `path` (the innermost, when
/// grants nest) and the host path it maps to.
fn map_guest<'d>(path: &str, dirs: &'d [GrantedDir]) -> Result<(PathBuf, &'d GrantedDir), String> {
    let parts = guest_components(path)?;
    let mut best: Option<(usize, &GrantedDir)> = None;
    for dir in dirs {
        let Ok(root) = guest_components(&dir.guest) else {
            continue;
        };
        if parts.starts_with(&root) && best.is_none_or(|(len, _)| root.len() > len) {
            best = Some((root.len(), dir));
        }
    }
    let Some((len, dir)) = best else {
        let granted: Vec<&str> = dirs.iter().map(|d| d.guest.as_str()).collect();
        return Err(format!(
            "`{path}` is outside every directory the agent is granted ({}): a check reaches \
             only what the agent may",
            if granted.is_empty() {
                "it has none".to_owned()
            } else {
                granted.join(", ")
            }
        ));
    };
    let host = parts[len..].iter().fold(dir.host.clone(), |p, c| p.join(c));
    stays_inside(&host, &dir.host).map_err(|reason| format!("`{path}`: {reason}"))?;
    Ok((host, dir))
}

/// Refuse a host path that leads out of `root` through a symbolic link: the
/// deepest part of it that exists must resolve inside `root`. (A path that
/// does not exist yet is judged by its nearest existing parent; the command
/// cannot create it through a link outside, as it may write nowhere else.)
fn stays_inside(host: &Path, root: &Path) -> Result<(), String> {
    let root_real = std::fs::canonicalize(root).map_err(|e| {
        format!(
            "its granted directory {} cannot be opened: {e}",
            root.display()
        )
    })?;
    let mut existing = host;
    while !existing.exists() {
        match existing.parent() {
            Some(parent) if parent.starts_with(root) => existing = parent,
            _ => return Ok(()),
        }
    }
    let real = std::fs::canonicalize(existing)
        .map_err(|e| format!("{} cannot be opened: {e}", existing.display()))?;
    if real.starts_with(&root_real) {
        Ok(())
    } else {
        Err(format!(
            "{} leads to {} through a symbolic link, outside its grant {}",
            existing.display(),
            real.display(),
            root.display()
        ))
    }
}

/// `~` and `~/x` become `$HOME` and `$HOME/x`; other text is a path as is.
fn expand_home(text: &str, lookup: &impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    let rest = match text.strip_prefix('~') {
        None => return Ok(PathBuf::from(text)),
        Some("") => "",
        Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/'),
        Some(_) => {
            return Err(format!(
                "`{text}`: only `~` and `~/...` (this user's home) are understood"
            ));
        }
    };
    let home = lookup("HOME")
        .filter(|h| h.starts_with('/'))
        .ok_or_else(|| format!("`{text}` starts with `~`, but HOME is not an absolute path"))?;
    Ok(Path::new(&home).join(rest))
}

/// The absolute path of `program`: as given when it has a `/` (then it must
/// be absolute), else the first executable file of that name in the
/// absolute directories of `PATH`. The path is kept as found, not
/// canonicalized: a rustup proxy (`cargo` → `rustup`) picks the tool by the
/// name it was started as.
fn find_program(
    program: &str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        if !path.is_absolute() {
            return Err(format!(
                "`{program}` is relative: give an absolute path or a program name on PATH"
            ));
        }
        if !is_executable(&path) {
            return Err(format!("`{program}` is not an executable file"));
        }
        return Ok(path);
    }
    if program.is_empty() {
        return Err("the program name is empty".into());
    }
    let path_var = lookup("PATH").unwrap_or_default();
    // Relative PATH entries would depend on the directory the host was
    // started in; they are ignored.
    std::env::split_paths(&path_var)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            format!(
                "`{program}` is not on the host PATH ({path_var}): give its absolute path or \
                 fix PATH"
            )
        })
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Under Landlock the program (the file its links lead to) must be inside
/// a path the command may read, or it cannot start: say so now, not as a
/// failed check later.
fn reachable<'p>(
    program: &Path,
    readable: impl Iterator<Item = &'p PathBuf>,
) -> Result<(), String> {
    let real = std::fs::canonicalize(program)
        .map_err(|e| format!("{} cannot be opened: {e}", program.display()))?;
    let inside = readable
        .filter_map(|root| std::fs::canonicalize(root).ok())
        .any(|root| real.starts_with(root));
    if inside {
        return Ok(());
    }
    let via = if real == program {
        String::new()
    } else {
        format!(" (a link to {})", real.display())
    };
    Err(format!(
        "the program {}{via} is outside every path the command may read: add its directory \
         to read_only",
        program.display()
    ))
}

fn valid_env_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(format!(
            "`{name}` is not a variable name (empty, or has `=` or NUL)"
        ));
    }
    Ok(())
}

/// A `set_env` value: a guest path inside a granted directory becomes its
/// host path; anything else is kept as written.
fn map_value(value: &str, dirs: &[GrantedDir]) -> Result<String, String> {
    if !value.starts_with('/') || guest_components(value).is_err() {
        return Ok(value.to_owned());
    }
    match map_guest(value, dirs) {
        Ok((host, _)) => host.to_str().map(str::to_owned).ok_or_else(|| {
            format!(
                "the host path of `{value}`, {}, is not UTF-8",
                host.display()
            )
        }),
        // Not inside a grant: a host path or plain text, kept as written.
        Err(_) if !inside_any(value, dirs) => Ok(value.to_owned()),
        Err(reason) => Err(reason),
    }
}

/// Whether guest path `value` lies inside a granted directory (whatever
/// else is wrong with it).
fn inside_any(value: &str, dirs: &[GrantedDir]) -> bool {
    let Ok(parts) = guest_components(value) else {
        return false;
    };
    dirs.iter()
        .any(|d| guest_components(&d.guest).is_ok_and(|root| parts.starts_with(&root)))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    struct Fixture {
        _tmp: tempfile::TempDir,
        out: PathBuf,
        src: PathBuf,
        bin: PathBuf,
        dirs: Vec<GrantedDir>,
    }

    /// `/out` granted rw, `/src` ro, and a `bin` directory with one
    /// executable `tool` (outside both grants).
    fn fixture() -> Fixture {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::TempDir::new().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let (out, src, bin) = (root.join("out"), root.join("src"), root.join("bin"));
        for d in [&out, &src, &bin] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(bin.join("tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(bin.join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(bin.join("data"), "not executable").unwrap();
        let dirs = vec![
            GrantedDir {
                host: out.clone(),
                guest: "/out".into(),
                writable: true,
            },
            GrantedDir {
                host: src.clone(),
                guest: "/src/".into(),
                writable: false,
            },
        ];
        Fixture {
            _tmp: tmp,
            out,
            src,
            bin,
            dirs,
        }
    }

    fn config(toml_text: &str) -> CommandCheckConfig {
        toml::from_str(toml_text).unwrap()
    }

    impl Fixture {
        fn lookup(&self) -> impl Fn(&str) -> Option<String> + use<> {
            let path = format!("relative/bin:{}", self.bin.display());
            let home = self.bin.parent().unwrap().display().to_string();
            move |name| match name {
                "PATH" => Some(path.clone()),
                "HOME" => Some(home.clone()),
                _ => None,
            }
        }

        fn resolve(&self, c: &CommandCheckConfig) -> Result<Resolved, ResolveError> {
            resolve("t", c, &self.dirs, self.lookup())
        }
    }

    /// A relative `read_only` path is the agent directory's, once the
    /// check is anchored; unanchored, it is refused rather than read
    /// against whatever directory the process happens to be in.
    #[test]
    fn relative_read_only_paths_are_anchored_at_the_agent_directory() {
        let f = fixture();
        let c = config(
            r#"
            argv = ["tool"]
            cwd = "/out"
            read_only = ["../bin", "~/bin", "/usr"]
            "#,
        );
        let e = f.resolve(&c).unwrap_err();
        assert_eq!(e.field, "read_only");
        assert!(e.reason.contains("not anchored"), "{e}");

        let agent_dir = f.src.clone();
        let anchored = c.anchored(&agent_dir);
        assert_eq!(
            anchored.read_only,
            [
                agent_dir.join("../bin").display().to_string(),
                "~/bin".to_owned(),
                "/usr".to_owned()
            ]
        );
        let r = f.resolve(&anchored).unwrap();
        assert!(
            r.spec.read_only.contains(&agent_dir.join("../bin")),
            "{r:?}"
        );
        // Anchoring twice changes nothing.
        assert_eq!(anchored.anchored(Path::new("/elsewhere")), anchored);
    }

    #[test]
    fn maps_guest_paths_and_finds_the_program() {
        let f = fixture();
        let c = config(
            r#"
            argv = ["tool", "--flag"]
            cwd = "/out/crate"
            writable = ["/out//target/", "/out"]
            read_only = ["~/bin", "/no/such/path"]
            env = ["PATH", "PATH"]
            set_env = { TARGET = "/out/target", PLAIN = "x", HOSTPATH = "/usr/lib" }
            timeout = "2m"
            "#,
        );
        let r = f.resolve(&c).unwrap();
        assert_eq!(
            r.spec.argv,
            [f.bin.join("tool").display().to_string(), "--flag".into()]
        );
        assert_eq!(r.spec.cwd, f.out.join("crate"));
        assert_eq!(r.spec.writable, [f.out.join("target"), f.out.clone()]);
        assert_eq!(
            r.spec.read_only,
            [f.out.clone(), f.src.clone(), f.bin.clone()]
        );
        assert_eq!(r.spec.env, ["PATH"]);
        assert_eq!(
            r.spec.set_env["TARGET"],
            f.out.join("target").display().to_string()
        );
        assert_eq!(r.spec.set_env["PLAIN"], "x");
        assert_eq!(r.spec.set_env["HOSTPATH"], "/usr/lib");
        assert_eq!(r.spec.timeout, Duration::from_secs(120));
        assert_eq!(r.spec.max_output, DEFAULT_MAX_OUTPUT);
        // Always confined: agent.toml has no key that says otherwise.
        assert!(r.spec.confine);
        let unconfined = format!("confine = false\n{}", toml::to_string(&c).unwrap());
        let refused = toml::from_str::<CommandCheckConfig>(&unconfined).unwrap_err();
        assert!(refused.to_string().contains("confine"), "{refused}");
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].contains("/no/such/path"), "{:?}", r.notes);
        // Pure: the same inputs give the same spec.
        assert_eq!(f.resolve(&c).unwrap(), r);
        // The config survives a round trip (it is frozen with the agent).
        let text = toml::to_string(&c).unwrap();
        assert_eq!(config(&text), c);
    }

    #[test]
    fn refusals_name_the_field_and_the_fix() {
        let f = fixture();
        let base = r#"argv = ["tool"]
            cwd = "/out"
            read_only = ["~/bin"]
            "#;
        let cases: &[(&str, &str, &str)] = &[
            ("writable = [\"/src\"]", "writable", "read-only"),
            ("writable = [\"/src/sub\"]", "writable", "read-only"),
            (
                "writable = [\"/elsewhere\"]",
                "writable",
                "outside every directory",
            ),
            ("writable = [\"/out/../src\"]", "writable", "`..`"),
            ("writable = [\"out\"]", "writable", "not absolute"),
            ("env = [\"A=B\"]", "env", "not a variable name"),
            (
                "env = [\"X\"]\nset_env = { X = \"1\" }",
                "env",
                "also in set_env",
            ),
            ("timeout = \"0s\"", "timeout", "more than 0"),
            ("max_output = 0", "max_output", "out of range"),
            ("max_output = 999999999", "max_output", "out of range"),
        ];
        for (extra, field, words) in cases {
            let c = config(&format!("{base}{extra}"));
            let e = f.resolve(&c).unwrap_err();
            assert_eq!(e.field, *field, "{extra}: {e}");
            assert!(e.to_string().contains(words), "{extra}: {e}");
            assert!(e.to_string().starts_with("checks.t."), "{e}");
        }
        let cwd = |cwd: &str| {
            config(&format!(
                "argv = [\"tool\"]\ncwd = \"{cwd}\"\nread_only = [\"~/bin\"]"
            ))
        };
        assert_eq!(f.resolve(&cwd("/nope")).unwrap_err().field, "cwd");
        assert_eq!(f.resolve(&cwd("relative")).unwrap_err().field, "cwd");
        // The cwd may be in a read-only grant and need not exist yet.
        assert!(f.resolve(&cwd("/src/not/yet")).is_ok());
        let argv = |argv: &str| {
            config(&format!(
                "argv = {argv}\ncwd = \"/out\"\nread_only = [\"~/bin\"]"
            ))
        };
        for (bad, words) in [
            ("[]", "is empty"),
            ("[\"nosuch\"]", "not on the host PATH"),
            ("[\"data\"]", "not on the host PATH"),
            ("[\"bin/tool\"]", "relative"),
            ("[\"~/bin/tool\"]", "relative"),
        ] {
            let e = f.resolve(&argv(bad)).unwrap_err();
            assert_eq!(e.field, "argv", "{bad}: {e}");
            assert!(e.to_string().contains(words), "{bad}: {e}");
        }
        // Found, but outside every readable path: it could not start.
        let c = config("argv = [\"tool\"]\ncwd = \"/out\"");
        let e = f.resolve(&c).unwrap_err();
        assert!(
            e.to_string().contains("add its directory to read_only"),
            "{e}"
        );
        // Absolute paths are taken as given.
        let abs = format!("[\"{}\"]", f.bin.join("tool").display());
        assert!(f.resolve(&argv(&abs)).is_ok());
        // Unknown fields are refused when the agent file is read.
        assert!(
            toml::from_str::<CommandCheckConfig>("argv = []\ncwd = \"/\"\nshell = true").is_err()
        );
        assert!(
            f.resolve(&config(
                "argv = [\"tool\"]\ncwd = \"/out\"\nread_only = [\"rel\"]"
            ))
            .is_err()
        );
        assert!(
            f.resolve(&config(
                "argv = [\"tool\"]\ncwd = \"/out\"\nread_only = [\"~x/bin\"]"
            ))
            .is_err()
        );
    }

    #[test]
    fn a_symlink_out_of_a_grant_is_refused() {
        let f = fixture();
        std::os::unix::fs::symlink(&f.src, f.out.join("link")).unwrap();
        let c = config(
            "argv = [\"tool\"]\ncwd = \"/out\"\nread_only = [\"~/bin\"]\nwritable = [\"/out/link/x\"]",
        );
        let e = f.resolve(&c).unwrap_err();
        assert_eq!(e.field, "writable");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let c = config(
            "argv = [\"tool\"]\ncwd = \"/out\"\nread_only = [\"~/bin\"]\nset_env = { T = \"/out/link\" }",
        );
        assert_eq!(f.resolve(&c).unwrap_err().field, "set_env");
        // A link that stays inside is fine.
        std::fs::create_dir(f.out.join("real")).unwrap();
        std::os::unix::fs::symlink(f.out.join("real"), f.out.join("inner")).unwrap();
        let c = config(
            "argv = [\"tool\"]\ncwd = \"/out/inner\"\nread_only = [\"~/bin\"]\nwritable = [\"/out/inner\"]",
        );
        assert!(f.resolve(&c).is_ok());
    }

    #[test]
    fn nested_grants_use_the_innermost() {
        let mut f = fixture();
        std::fs::create_dir(f.out.join("ro")).unwrap();
        f.dirs.push(GrantedDir {
            host: f.out.join("ro"),
            guest: "/out/ro".into(),
            writable: false,
        });
        let c = config(
            "argv = [\"tool\"]\ncwd = \"/out\"\nread_only = [\"~/bin\"]\nwritable = [\"/out/ro/x\"]",
        );
        assert!(f.resolve(&c).unwrap_err().to_string().contains("read-only"));
        let c = config(
            "argv = [\"tool\"]\ncwd = \"/out\"\nread_only = [\"~/bin\"]\nwritable = [\"/out/rox\"]",
        );
        assert!(f.resolve(&c).is_ok());
    }
}
