//! One resolver from defaults, environment and flags to validated settings.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::hands::{DirSpec, Grants, HandsConfig, HostPattern, Limits, SecretGrant};

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

/// Engine settings for the CLI.
pub fn hands_config() -> HandsConfig {
    HandsConfig {
        cache_dir: cache_dir().map(|d| d.join("components")),
        // One command runs one call at a time; keep the pool small so start-up
        // reserves little address space.
        max_concurrent_calls: 4,
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
    /// Linear memory limit in MiB (default 256).
    #[arg(long, value_name = "MiB")]
    pub memory: Option<u64>,
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
    /// Require the component to have this digest (sha256:...).
    #[arg(long, value_name = "DIGEST")]
    pub digest: Option<String>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}); try 500ms, 30s or 2m"))
}

impl GrantFlags {
    /// Resolve the flags into validated grants, reading env and secret
    /// values from the process environment.
    pub fn resolve(&self) -> anyhow::Result<Grants> {
        let mut grants = Grants {
            component_digest: self.digest.clone(),
            ..Grants::default()
        };
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        for spec in &self.dirs {
            grants.dirs.push(DirSpec::parse(spec, &cwd)?.resolve(&cwd)?);
        }
        for spec in &self.mounts {
            grants.dirs.push(DirSpec::parse_mount(spec)?.resolve(&cwd)?);
        }
        for spec in &self.hosts {
            grants.hosts.push(HostPattern::parse(spec)?);
        }
        let mut env = BTreeMap::new();
        for name in &self.env {
            let value = std::env::var(name).with_context(|| {
                format!("--env {name}: the variable is not set (or not UTF-8) in this environment")
            })?;
            env.insert(name.clone(), value);
        }
        grants.env = env;
        for spec in &self.secrets {
            grants
                .secrets
                .push(SecretGrant::parse(spec, |var| std::env::var(var).ok())?);
        }
        let defaults = Limits::default();
        grants.limits = Limits {
            memory_bytes: match self.memory {
                Some(0) => bail!("--memory must be at least 1 MiB"),
                Some(mib) => mib.saturating_mul(1 << 20),
                None => defaults.memory_bytes,
            },
            timeout: self.timeout.unwrap_or(defaults.timeout),
            fuel: self.fuel.unwrap_or(defaults.fuel),
            max_output_bytes: self.max_output.unwrap_or(defaults.max_output_bytes),
            max_write_bytes: self.max_write.unwrap_or(defaults.max_write_bytes),
            ..defaults
        };
        grants.validate()?;
        Ok(grants)
    }
}
