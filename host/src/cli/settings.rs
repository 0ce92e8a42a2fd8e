//! One resolver from defaults, environment and flags to validated settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use longhand_hands::{DirSpec, GrantError, GrantSpec, Grants, HandsConfig, LimitSpec};

/// Where sessions are stored: `$LONGHAND_HOME`, else
/// `$XDG_DATA_HOME/longhand`, else `~/.local/share/longhand`.
pub fn data_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("LONGHAND_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(home));
    }
    if let Some(data) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(data).join("longhand"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".local/share/longhand"))
}

/// Where compiled components are cached: `$LONGHAND_HOME/cache` when
/// `LONGHAND_HOME` is set, else `$XDG_CACHE_HOME/longhand`, else
/// `~/.cache/longhand`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("LONGHAND_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(home).join("cache"));
    }
    if let Some(cache) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(cache).join("longhand"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/longhand"))
}

/// The host key that seals the compile cache, install records and trusted
/// keys: `$LONGHAND_KEY_DIR/host.key`, else `host.key` in the cache
/// directory ([`cache_dir`]). No directory grant may contain it, with or
/// without `LONGHAND_ALLOW_HOME_GRANTS` (docs/security.md): to grant a
/// directory that holds the cache, put the key elsewhere first.
pub fn key_file() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("LONGHAND_KEY_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir).join("host.key"));
    }
    cache_dir().map(|d| d.join("host.key"))
}

/// The environment variable by which the operator allows directory grants
/// that reach the data directory, the compile cache or the trust store.
pub const ALLOW_HOME_GRANTS: &str = "LONGHAND_ALLOW_HOME_GRANTS";

/// Keep the host's own directories out of every directory grant this
/// process resolves (agent files, `--dir`/`--mount`, skills, `mcp`,
/// `serve`, command checks): the data directory, the install and trust
/// stores, the compile cache and the host key
/// ([`longhand_hands::dirs::protect`]). `LONGHAND_ALLOW_HOME_GRANTS=1`
/// allows all but the host key; nothing allows that.
pub fn protect_home() {
    use longhand_hands::dirs::{ProtectedPath, protect};
    let mut paths = Vec::new();
    let mut add = |what: &str, path: Option<PathBuf>, overridable: bool, inside_too: bool| {
        if let Some(path) = path {
            paths.push(ProtectedPath {
                what: what.to_owned(),
                path,
                overridable,
                inside_too,
            });
        }
    };
    // The data directory as a whole: a grant that contains it. Its stores
    // (and the cache, and the key, wherever they are): a grant that
    // contains them or lies inside them.
    add(
        "the data directory (LONGHAND_HOME)",
        data_dir(),
        true,
        false,
    );
    add(
        "the install store",
        data_dir().map(|d| d.join("tools")),
        true,
        true,
    );
    add(
        "the trust store",
        data_dir().map(|d| d.join("trust")),
        true,
        true,
    );
    add("the compile cache", cache_dir(), true, true);
    add("the host key (LONGHAND_KEY_DIR)", key_file(), false, true);
    let allow = std::env::var(ALLOW_HOME_GRANTS).is_ok_and(|v| v == "1");
    protect(
        paths,
        allow,
        &format!("set {ALLOW_HOME_GRANTS}=1 (docs/security.md says what that exposes)"),
    );
}

/// Engine settings for the CLI.
pub fn hands_config() -> HandsConfig {
    HandsConfig {
        cache_dir: cache_dir().map(|d| d.join("components")),
        cache_key: key_file(),
        // A session resumes on the bytes it froze, whatever a later
        // release embeds under the same name.
        kept_dir: data_dir().map(|d| d.join("components")),
        // One command runs one call at a time; keep the pool small so start-up
        // reserves little address space.
        max_concurrent_calls: 4,
        ..HandsConfig::default()
    }
}

/// Grant flags as given on the command line.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct GrantFlags {
    /// Map a host directory: HOST_PATH[:GUEST_PATH][:ro|:rw]. The guest path
    /// defaults to /workspace, access to read-only. A spec that could be
    /// read two ways (a path containing `:`) is refused: use --mount.
    #[arg(long = "dir", value_name = "HOST_PATH[:GUEST_PATH][:ro|:rw]")]
    pub dirs: Vec<String>,
    /// Map a host directory, long form: src=PATH,dst=GUEST_PATH,mode=ro|rw
    /// [,symlinks=true]. dst defaults to /workspace, mode to ro; quote a
    /// value holding `,` ("..."). symlinks=true lets the tool create
    /// symbolic links in a rw directory (default: refused).
    #[arg(
        long = "mount",
        value_name = "src=PATH,dst=GUEST,mode=ro|rw[,symlinks=true]"
    )]
    pub mounts: Vec<String>,
    /// Allow outbound HTTP to host[:port]; `*.example.com` matches subdomains.
    /// Without a port only 80 and 443 match. Loopback and private addresses
    /// must be named literally (e.g. 127.0.0.1:8080).
    #[arg(long = "allow-host", value_name = "PATTERN")]
    pub hosts: Vec<String>,
    /// Pass the named environment variable (with its current value).
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
    /// Add the value of ENV_VAR to requests to HOST_PATTERN as HEADER
    /// (default `Authorization: Bearer <value>`). The tool never sees it.
    #[arg(long = "secret", value_name = "ENV_VAR@HOST_PATTERN[:HEADER]")]
    pub secrets: Vec<String>,
    /// Linear memory limit in MiB, 1 to 4096 (default 256).
    #[arg(long, value_name = "MiB")]
    pub memory: Option<u64>,
    /// Host memory the call may make the host hold for it (directory
    /// listings, buffered bodies, header maps), in MiB (default 4 × --memory).
    #[arg(long = "host-memory", value_name = "MiB")]
    pub host_memory: Option<u64>,
    /// Wall-clock limit, e.g. 500ms, 30s, 2m (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Output size limit in bytes (default 1048576).
    #[arg(long = "max-output", value_name = "BYTES")]
    pub max_output: Option<u64>,
    /// Bytes the call may write into granted directories (default
    /// 268435456); past it the tool gets "no space left".
    #[arg(long = "max-write", value_name = "BYTES")]
    pub max_write: Option<u64>,
    /// Fuel limit, about one unit per wasm instruction (default 20000000000).
    #[arg(long, value_name = "UNITS")]
    pub fuel: Option<u64>,
    /// Let the tool run this native program (a name on PATH, or an
    /// absolute path), pinned by its SHA-256; it sees only the granted
    /// directories, with no network. Repeat for more programs.
    #[arg(long = "program", value_name = "NAME|PATH")]
    pub programs: Vec<String>,
    /// A directory granted programs see read-only at its own path (a
    /// toolchain, e.g. ~/.rustup); the system's are always there.
    #[arg(long = "toolchain", value_name = "PATH")]
    pub toolchains: Vec<PathBuf>,
    /// Processes a granted program may have at once (default 256).
    #[arg(long, value_name = "N")]
    pub processes: Option<u64>,
    /// Address space of each process a granted program starts, in MiB
    /// (default 8192).
    #[arg(long = "command-memory", value_name = "MiB")]
    pub command_memory: Option<u64>,
    /// Let the tool query a PostgreSQL database by NAME; ENV_VAR holds its
    /// postgres:// URL on the host, which the tool never sees. Read-only
    /// unless mode=rw; loopback and private addresses must be named with
    /// allow=ADDRESS. Repeat for more databases.
    #[arg(
        long = "database",
        value_name = "NAME=ENV_VAR[,mode=rw][,allow=ADDRESS]"
    )]
    pub databases: Vec<String>,
    /// Require the component to have this digest (sha256:...).
    #[arg(long, value_name = "DIGEST")]
    pub digest: Option<String>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}); try 500ms, 30s or 2m"))
}

impl GrantFlags {
    /// The grant these flags write, in the shape an `agent.toml` tool
    /// table also produces. Short-form `--dir` specs are parsed against
    /// `cwd`.
    pub fn spec(&self, cwd: &Path) -> Result<GrantSpec, GrantError> {
        let short = self.dirs.iter().map(|d| DirSpec::parse(d, cwd));
        let long = self.mounts.iter().map(|m| DirSpec::parse_mount(m));
        Ok(GrantSpec {
            digest: self.digest.clone(),
            dirs: short.chain(long).collect::<Result<_, _>>()?,
            hosts: self.hosts.clone(),
            env: self.env.clone(),
            secrets: self.secrets.clone(),
            programs: self.programs.clone(),
            toolchains: self.toolchains.clone(),
            databases: self.databases.clone(),
            limits: LimitSpec {
                memory_mib: self.memory,
                timeout: self.timeout,
                fuel: self.fuel,
                max_output: self.max_output,
                max_write: self.max_write,
                host_memory_mib: self.host_memory,
                command_memory_mib: self.command_memory,
                processes: self.processes,
            },
        })
    }

    /// Resolve the flags into validated grants, relative paths against the
    /// current directory, env and secret values from the process
    /// environment.
    pub fn resolve(&self) -> anyhow::Result<Grants> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        Ok(self
            .spec(&cwd)?
            .resolve(&cwd, |name| std::env::var(name).ok())?)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use longhand_brain::agent::config::ToolConfig;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        grants: GrantFlags,
    }

    fn flags(args: &[&str]) -> GrantFlags {
        Flags::try_parse_from(std::iter::once("longhand").chain(args.iter().copied()))
            .unwrap()
            .grants
    }

    fn tool(fields: &str) -> ToolConfig {
        toml::from_str(&format!("component = \"fs\"\n{fields}")).unwrap()
    }

    fn lookup(name: &str) -> Option<String> {
        match name {
            "LANG" => Some("C.UTF-8".to_owned()),
            "TOKEN" => Some("t0ken".to_owned()),
            _ => None,
        }
    }

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_same_grant_as_flags_and_as_agent_toml_resolves_equal() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("src")).unwrap();
        std::fs::create_dir(tmp.path().join("data:2024")).unwrap();
        let base = tmp.path();
        let from_flags = flags(&[
            "--dir",
            "src:/src:rw",
            "--mount",
            "src=data:2024,dst=/data,mode=rw,symlinks=true",
            "--allow-host",
            "api.example.com",
            "--allow-host",
            "127.0.0.1:8080",
            "--env",
            "LANG",
            "--secret",
            "TOKEN@api.example.com:x-api-key",
            "--memory",
            "64",
            "--timeout",
            "5s",
            "--fuel",
            "1000000",
            "--max-output",
            "4096",
            "--max-write",
            "65536",
            "--digest",
            DIGEST,
        ]);
        let from_toml = tool(&format!(
            r#"digest = "{DIGEST}"
dirs = ["src:/src:rw", {{ host = "data:2024", guest = "/data", mode = "rw", symlinks = true }}]
allow_hosts = ["api.example.com", "127.0.0.1:8080"]
env = ["LANG"]
secrets = ["TOKEN@api.example.com:x-api-key"]
memory_mib = 64
timeout = "5s"
fuel = 1000000
max_output = 4096
max_write = 65536
"#
        ));
        let spec = from_flags.spec(base).unwrap();
        assert_eq!(spec, from_toml.grant_spec(base).unwrap());
        let grants = spec.resolve(base, lookup).unwrap();
        assert_eq!(grants, from_toml.grants(base, lookup).unwrap());
        // Every limit was taken from what was written, none defaulted.
        let l = &grants.limits;
        assert_eq!(
            (
                l.memory_bytes,
                l.timeout,
                l.fuel,
                l.max_output_bytes,
                l.max_write_bytes
            ),
            (64 << 20, Duration::from_secs(5), 1_000_000, 4096, 65536)
        );
        assert_eq!(grants.dirs.len(), 2);
        assert_eq!(grants.env.get("LANG").map(String::as_str), Some("C.UTF-8"));
        // Nothing written, nothing granted, the same defaults from both.
        let none = flags(&[]).spec(base).unwrap();
        assert_eq!(none, tool("").grant_spec(base).unwrap());
        assert_eq!(none.resolve(base, lookup).unwrap(), Grants::default());
    }

    #[test]
    fn a_bad_grant_gives_the_same_error_from_flags_and_agent_toml() {
        let base = Path::new("/");
        let overflow = i64::MAX.to_string();
        for (flag, field) in [
            (
                vec!["--memory", overflow.as_str()],
                format!("memory_mib = {overflow}"),
            ),
            (vec!["--memory", "0"], "memory_mib = 0".to_owned()),
            (vec!["--memory", "4097"], "memory_mib = 4097".to_owned()),
            (vec!["--fuel", "0"], "fuel = 0".to_owned()),
            (vec!["--timeout", "0s"], "timeout = \"0s\"".to_owned()),
            (vec!["--env", "UNSET"], "env = [\"UNSET\"]".to_owned()),
            (
                vec!["--allow-host", "http://x"],
                "allow_hosts = [\"http://x\"]".to_owned(),
            ),
            (
                vec!["--digest", "sha256:00"],
                "digest = \"sha256:00\"".to_owned(),
            ),
        ] {
            let from_flags = flags(&flag).spec(base).unwrap().resolve(base, lookup);
            let from_toml = tool(&field).grants(base, lookup);
            let err = from_flags.expect_err(&field);
            assert_eq!(Err(err.clone()), from_toml, "{field}");
            if field.starts_with("memory") {
                assert!(err.to_string().contains("give 1 to 4096 MiB"), "{err}");
            }
        }
        // The most memory there is, 4 GiB, is accepted from both.
        let most = flags(&["--memory", "4096"]).spec(base).unwrap();
        assert_eq!(
            most.resolve(base, lookup).unwrap().limits.memory_bytes,
            4 << 30
        );
    }
}
