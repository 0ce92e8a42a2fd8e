//! `longhand tool publish | install | keygen | lock | upgrade | verify` and
//! `longhand trust add`: the door to [`crate::dist`].
//!
//! Every check lives in `dist` (sizes, media types, digests, signatures)
//! or the hands (imports, compiling, `describe`); this module orders them,
//! and prints what the operator decides on: what a tool is, who signed it,
//! and what it asks for.

use std::path::{Path, PathBuf};

use super::env::{env, hands, install_store};
use super::settings::data_dir;
use super::term::one_line;
use super::{Outcome, usage};
use crate::dist::file::read_regular;
use crate::dist::lock::{FILE_NAME, Lock, Locked};
use crate::dist::registry;
use crate::dist::review::Asks;
use crate::dist::sign::{self, Signature};
use crate::dist::store::{Record, Store, Trust};
use crate::dist::{DistError, OciRef, Source, is_digest, is_tool_name};
use longhand_brain::agent::config::AgentConfig;
use longhand_hands::{LoadedTool, ToolSource, builtin};

/// `trust` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TrustCommand {
    /// Trust a publisher's public key (KEY.pub from `longhand tool keygen`):
    /// components it signed may be installed without --allow-unsigned.
    Add {
        /// The public key file.
        key: PathBuf,
    },
    /// List the trusted signers.
    List,
}

/// `longhand trust …`.
pub fn trust(cmd: TrustCommand) -> anyhow::Result<Outcome> {
    let store = store()?;
    match cmd {
        TrustCommand::Add { key } => {
            let signer = store.trust().add(&key)?;
            println!("trusted {signer}");
        }
        TrustCommand::List => {
            for key in store.trust().keys()? {
                println!("{}", sign::signer_of(&key));
            }
        }
    }
    Ok(Outcome::Done)
}

fn store() -> anyhow::Result<Store> {
    install_store().ok_or_else(|| {
        usage("cannot find a data directory: set LONGHAND_HOME (or HOME / XDG_DATA_HOME)")
    })
}

/// `tool keygen [KEYFILE]`: a new key pair, the secret key mode 0600.
pub fn keygen(path: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let path = match path {
        Some(path) => path,
        None => {
            let dir = data_dir()
                .ok_or_else(|| usage("give a KEYFILE path (no data directory is set)"))?
                .join("keys");
            std::fs::create_dir_all(&dir)
                .map_err(DistError::io(format!("creating {}", dir.display())))?;
            dir.join("signing.key")
        }
    };
    let (signer, public) = sign::keygen(&path)?;
    println!("secret key: {} (keep it; mode 0600)", path.display());
    println!("public key: {}", public.display());
    println!("signer:     {signer}");
    println!(
        "next: `longhand tool publish COMPONENT oci://… --sign {}`; users run `longhand trust add {}`",
        path.display(),
        public.display()
    );
    Ok(Outcome::Done)
}

/// `tool publish COMPONENT oci://… [--sign KEYFILE]`.
pub async fn publish(
    component: &Path,
    target: &str,
    key: Option<&Path>,
) -> anyhow::Result<Outcome> {
    registry::can_publish()?;
    let Source::Oci(target) = Source::parse(target)? else {
        return Err(usage(
            "publish to an OCI registry: oci://HOST[:PORT]/REPO:TAG",
        ));
    };
    let bytes = read_regular(component, registry::MAX_COMPONENT_BYTES, "a component")?;
    let bytes = match key {
        Some(key) => sign::sign(&bytes, &sign::read_secret(key)?)?,
        None => bytes,
    };
    // What is published must load: its imports, its export, its describe.
    let hands = hands()?;
    let file_name = component.file_name().map_or_else(
        || component.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let _working = super::progress::Working::start(super::progress::compiling(&file_name));
    let tool = hands
        .load(ToolSource::Bytes {
            label: &component.display().to_string(),
            bytes: &bytes,
        })
        .await?;
    let digest = registry::publish(&target, &bytes, env).await?;
    eprintln!(
        "published {} {} ({}, {} bytes{}) to {target}",
        one_line(&tool.info().name),
        one_line(&tool.info().version),
        tool.digest(),
        bytes.len(),
        if key.is_some() {
            ", signed"
        } else {
            ", unsigned"
        }
    );
    println!("{digest}");
    Ok(Outcome::Done)
}

/// What a source gave: the bytes and the digests that named them.
struct Fetched {
    /// The source as recorded.
    source: String,
    manifest_digest: Option<String>,
    digest: String,
    bytes: Vec<u8>,
}

/// Fetch `source`. An `oci://` source pinned to a manifest digest already
/// installed, or one whose registry cannot be reached and that is
/// installed from that same source, is served from the install store
/// (verified again).
async fn fetch(source: &Source, text: &str, store: &Store) -> anyhow::Result<Fetched> {
    match source {
        Source::Path(path) => {
            let bytes = read_regular(path, registry::MAX_COMPONENT_BYTES, "a component")?;
            let source = std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.clone())
                .display()
                .to_string();
            Ok(Fetched {
                source,
                manifest_digest: None,
                digest: longhand_hands::digest_of(&bytes),
                bytes,
            })
        }
        Source::Https(url) => {
            let bytes = registry::download(url).await?;
            Ok(Fetched {
                source: url.clone(),
                manifest_digest: None,
                digest: longhand_hands::digest_of(&bytes),
                bytes,
            })
        }
        Source::Oci(r) => {
            let installed = store.records()?;
            if let Some(pin) = &r.digest
                && let Some(hit) = installed
                    .iter()
                    .find(|rec| rec.manifest_digest.as_ref() == Some(pin))
            {
                return from_store(store, hit, text);
            }
            match registry::pull(r).await {
                Ok(pulled) => Ok(Fetched {
                    source: text.to_owned(),
                    manifest_digest: Some(pulled.manifest_digest),
                    digest: pulled.digest,
                    bytes: pulled.bytes,
                }),
                Err(DistError::Remote(why)) => {
                    let Some(hit) = installed.iter().find(|rec| rec.source == text) else {
                        return Err(DistError::Remote(why).into());
                    };
                    eprintln!(
                        "note: {}; using the copy installed from {text} as `{}`",
                        one_line(&why),
                        hit.name
                    );
                    from_store(store, hit, text)
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

fn from_store(store: &Store, record: &Record, text: &str) -> anyhow::Result<Fetched> {
    let bytes = store.verified(record)?;
    Ok(Fetched {
        source: text.to_owned(),
        manifest_digest: record.manifest_digest.clone(),
        digest: record.digest.clone(),
        bytes,
    })
}

/// Whether `fetched` may be installed, and why: a digest pin must match;
/// a signature must be by a trusted key; an unsigned component needs
/// `--digest` (the operator names the bytes) or `--allow-unsigned`. An
/// `https://` source needs a pin or a trusted signature either way: a URL
/// says nothing about what it serves.
fn admit(
    fetched: &Fetched,
    source: &Source,
    pin: Option<&str>,
    allow_unsigned: bool,
    store: &Store,
) -> anyhow::Result<(Trust, Option<String>)> {
    if let Some(pin) = pin
        && pin != fetched.digest
    {
        return Err(DistError::Refused(format!(
            "{} is {}, not the pinned {pin}; refused (nothing was installed)",
            fetched.source, fetched.digest
        ))
        .into());
    }
    let https = matches!(source, Source::Https(_));
    match sign::check(&fetched.bytes, &store.trust().keys()?) {
        Signature::Trusted(signer) => Ok((Trust::Signed, Some(signer))),
        _ if pin.is_some() => Ok((Trust::Pinned, None)),
        _ if https => Err(DistError::Refused(format!(
            "{} is not signed by a trusted key, and an https:// source needs a digest pin or a \
             trusted signature: pass --digest {} after checking it, or `longhand trust add` the \
             publisher's KEY.pub",
            fetched.source, fetched.digest
        ))
        .into()),
        Signature::Unsigned if allow_unsigned => Ok((Trust::Unsigned, None)),
        Signature::Untrusted if allow_unsigned => Ok((Trust::Unsigned, None)),
        Signature::Unsigned => Err(DistError::Refused(format!(
            "{} ({}) is not signed; refused. Install it anyway with --allow-unsigned, or pin \
             these bytes with --digest {}",
            fetched.source, fetched.digest, fetched.digest
        ))
        .into()),
        Signature::Untrusted => Err(DistError::Refused(format!(
            "{} ({}) is signed, but by no key in the trust store (or it changed after signing); \
             refused. `longhand trust add` the publisher's KEY.pub, or pass --allow-unsigned",
            fetched.source, fetched.digest
        ))
        .into()),
    }
}

/// The name a source installs under when `--name` is not given: the
/// repository's last part, or the file's stem.
fn default_name(source: &Source) -> Option<String> {
    let stem = match source {
        Source::Oci(r) => r.repository.rsplit('/').next().map(str::to_owned),
        Source::Path(p) => p.file_stem().and_then(|s| s.to_str()).map(str::to_owned),
        Source::Https(url) => url
            .rsplit('/')
            .next()
            .map(|s| s.split(['?', '#']).next().unwrap_or(s))
            .map(|s| s.trim_end_matches(".wasm").to_owned()),
    }?;
    let name = stem.to_ascii_lowercase().replace(['_', '.'], "-");
    is_tool_name(&name).then_some(name)
}

/// The name `tool`'s describe gives it, when it is one a tool may be
/// installed under (a-z, 0-9 and `-`; `_` and `.` become `-`).
fn own_name(tool: &LoadedTool) -> Option<String> {
    let name = tool
        .info()
        .name
        .to_ascii_lowercase()
        .replace(['_', '.'], "-");
    is_tool_name(&name).then_some(name)
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if !is_tool_name(name) {
        return Err(usage(format!(
            "`{}` cannot name a tool: use 1-24 of a-z, 0-9 and `-`, starting with a letter or digit",
            longhand_hands::bound::name(name)
        )));
    }
    if builtin::builtin(name).is_some() {
        return Err(usage(format!(
            "`{name}` is the name of a built-in tool; install it under another --name"
        )));
    }
    Ok(())
}

/// The record of what was just loaded.
fn record_of(
    name: &str,
    fetched: &Fetched,
    trust: Trust,
    signer: Option<String>,
    tool: &LoadedTool,
) -> Record {
    Record {
        name: name.to_owned(),
        source: fetched.source.clone(),
        manifest_digest: fetched.manifest_digest.clone(),
        digest: fetched.digest.clone(),
        signer,
        trust,
        size: fetched.bytes.len() as u64,
        version: tool.info().version.clone(),
        tools: tool.info().tools.iter().map(|t| t.name.clone()).collect(),
        asks: Asks::of(tool),
    }
}

/// `tool install SOURCE [--name NAME] [--digest D] [--allow-unsigned]`.
///
/// A bare SOURCE that is no file here and names a tool whose sources the
/// binary carries (`python`, `js`) is built first ([`super::bundled`]), then
/// installed as the file it built. It needs no `--allow-unsigned`: its bytes
/// were made on this machine from sources inside this binary, so they are
/// as trusted as the binary itself; a `--digest` pin is still checked.
pub async fn install(
    source_text: &str,
    name: Option<&str>,
    pin: Option<&str>,
    allow_unsigned: bool,
) -> anyhow::Result<Outcome> {
    let bundled = super::bundled::find(source_text)
        .filter(|_| !source_text.contains('/') && !Path::new(source_text).exists());
    let Some(bundled) = bundled else {
        return install_from(source_text, name, pin, allow_unsigned).await;
    };
    let data = data_dir().ok_or_else(|| {
        usage("cannot find a data directory: set LONGHAND_HOME (or HOME / XDG_DATA_HOME)")
    })?;
    let component = bundled.build(&hands()?, &data).await?;
    let text = component.to_str().ok_or_else(|| {
        usage(format!(
            "the data directory's path {} is not UTF-8; set LONGHAND_HOME to one that is",
            data.display()
        ))
    })?;
    println!("built {} from the sources in this binary", bundled.name);
    install_from(text, Some(name.unwrap_or(bundled.name)), pin, true).await
}

async fn install_from(
    source_text: &str,
    name: Option<&str>,
    pin: Option<&str>,
    allow_unsigned: bool,
) -> anyhow::Result<Outcome> {
    let source = Source::parse(source_text)?;
    if let Some(pin) = pin
        && !is_digest(pin)
    {
        return Err(usage("--digest takes sha256:<64 lowercase hex digits>"));
    }
    if let Some(name) = name {
        check_name(name)?;
    }
    let store = store()?;
    let fetched = fetch(&source, source_text, &store).await?;
    let (trust, signer) = admit(&fetched, &source, pin, allow_unsigned, &store)?;
    // Imports judged, compiled into the cache, described: the first call
    // by name compiles nothing.
    let hands = hands()?;
    let label = default_name(&source).unwrap_or_else(|| "the component".to_owned());
    let working = super::progress::Working::start(super::progress::compiling(&label));
    let tool = hands
        .load(ToolSource::Bytes {
            label: &label,
            bytes: &fetched.bytes,
        })
        .await?;
    drop(working);
    // The name the component gives itself (its describe), as a tool name;
    // else the source's last part (repository, file name).
    let name = match name {
        Some(name) => name.to_owned(),
        None => own_name(&tool)
            .or_else(|| default_name(&source))
            .ok_or_else(|| {
                usage("cannot derive a tool name from the component or its source; give one with --name")
            })?,
    };
    check_name(&name)?;
    if let Some(old) = store.record(&name)?
        && old.digest != fetched.digest
    {
        return Err(usage(format!(
            "`{name}` is installed already ({} from {}); `longhand tool upgrade {name}` reviews \
             a new version, or install this one under another --name",
            old.digest, old.source
        )));
    }
    let record = record_of(&name, &fetched, trust, signer, &tool);
    store.install(&record, &fetched.bytes)?;
    println!("installed {name} from {}", one_line(&record.source));
    print_record(&record);
    super::describe::print_description(&tool);
    Ok(Outcome::Done)
}

fn print_record(record: &Record) {
    if let Some(m) = &record.manifest_digest {
        println!("manifest: {m}");
    }
    println!("digest:   {}", record.digest);
    let signer = match (&record.trust, &record.signer) {
        (Trust::Signed, Some(signer)) => signer.clone(),
        (Trust::Pinned, _) => "unsigned (pinned by digest)".to_owned(),
        _ => "unsigned (allowed with --allow-unsigned)".to_owned(),
    };
    println!("signer:   {signer}");
}

/// The installed tools, for `tool list`.
pub fn installed() -> anyhow::Result<Vec<Record>> {
    match install_store() {
        Some(store) => Ok(store.records()?),
        None => Ok(Vec::new()),
    }
}

/// `tool upgrade NAME [--approve]`.
/// What `tool upgrade` reads: the repository's newest version tag when the
/// installed tag is a version (`1.0` → `1.2`), else the tag itself again
/// (`latest`, which moves).
async fn newest(r: OciRef) -> anyhow::Result<OciRef> {
    let Some(current) = r.tag.clone() else {
        return Ok(r);
    };
    let tags = registry::tags(&r).await?;
    Ok(match crate::dist::source::newest_tag(&current, &tags) {
        Some(tag) => {
            eprintln!(
                "{}: newest version tag is {tag} (installed from {current})",
                r.repository
            );
            OciRef {
                tag: Some(tag.to_owned()),
                ..r
            }
        }
        None => r,
    })
}

pub async fn upgrade(name: &str, approve: bool) -> anyhow::Result<Outcome> {
    let store = store()?;
    let old = store.record(name)?.ok_or_else(|| {
        usage(format!(
            "nothing is installed as `{}`",
            longhand_hands::bound::name(name)
        ))
    })?;
    if old.trust == Trust::Pinned {
        return Err(usage(format!(
            "`{name}` was installed pinned to {}; install the new version with `longhand tool \
             install SOURCE --digest …` after checking it",
            old.digest
        )));
    }
    // An approval installs what was reviewed: the held version, not
    // whatever the tag names by now.
    let held = if approve { store.held(name)? } else { None };
    let fetched = match &held {
        Some(held) => {
            let bytes = store.read_blob(&held.digest)?;
            if longhand_hands::digest_of(&bytes) != held.digest {
                return Err(DistError::Refused(format!(
                    "the held version of `{name}` changed on disk; run `longhand tool upgrade {name}` again"
                ))
                .into());
            }
            Fetched {
                source: held.source.clone(),
                manifest_digest: held.manifest_digest.clone(),
                digest: held.digest.clone(),
                bytes,
            }
        }
        None => {
            let source = match Source::parse(&old.source)? {
                Source::Oci(r) => Source::Oci(newest(r.unpinned()).await?),
                other => other,
            };
            let text = source.to_string();
            let mut fetched = fetch(&source, &text, &store).await?;
            fetched.source = text;
            fetched
        }
    };
    if fetched.digest == old.digest {
        println!("{name} is up to date ({})", old.digest);
        return Ok(Outcome::Done);
    }
    let source = Source::parse(&fetched.source)?;
    // A signed tool stays signed: its upgrade must be too.
    let allow_unsigned = old.trust == Trust::Unsigned;
    let (trust, signer) = admit(&fetched, &source, None, allow_unsigned, &store)?;
    let hands = hands()?;
    let working = super::progress::Working::start(super::progress::compiling(name));
    let tool = hands
        .load(ToolSource::Bytes {
            label: name,
            bytes: &fetched.bytes,
        })
        .await?;
    drop(working);
    let new = record_of(name, &fetched, trust, signer, &tool);
    let diff = old.asks.diff(&new.asks);
    println!(
        "{name}: {} {} -> {} {}",
        one_line(&old.version),
        old.digest,
        one_line(&new.version),
        new.digest
    );
    if diff.lines().is_empty() {
        println!("asks for the same as the installed version");
    }
    for line in diff.lines() {
        println!("  {}", one_line(&line));
    }
    let to_approve = diff.to_approve();
    if !to_approve.is_empty() && !approve {
        store.hold(&new, &fetched.bytes)?;
        return Err(DistError::Refused(format!(
            "held: the new version of `{name}` asks for more than the installed one, or changes \
             its tools or their effects ({}); nothing changed. Review it, then `longhand tool \
             upgrade {name} --approve`",
            one_line(&to_approve.join(", "))
        ))
        .into());
    }
    store.install(&new, &fetched.bytes)?;
    println!(
        "upgraded {name}; grants that pin {} do not carry over: update their digest (and `longhand tool lock`)",
        old.digest
    );
    Ok(Outcome::Done)
}

/// `tool verify [--all]`: the installed copies against their records and,
/// without `--all`, the tools `./longhand.lock` names against the lock.
pub fn verify(all: bool) -> anyhow::Result<Outcome> {
    let store = store()?;
    // The lock here is checked either way: `--all` adds the installed
    // tools it does not name, it never skips what it pins.
    let lock = Lock::read(Path::new(FILE_NAME))?;
    let records = store.records()?;
    let mut checked = 0;
    let mut failed = Vec::new();
    for record in &records {
        let locked = lock.as_ref().and_then(|l| l.get(&record.name));
        if !all && lock.is_some() && locked.is_none() {
            continue;
        }
        checked += 1;
        let result = store
            .verified(record)
            .map_err(|e| e.to_string())
            .and_then(|_| match locked {
                Some(l) if l.digest != record.digest => Err(format!(
                    "{FILE_NAME} pins {}, but {} is installed",
                    l.digest, record.digest
                )),
                _ => Ok(()),
            });
        match result {
            Ok(()) => println!("ok     {} {}", record.name, record.digest),
            Err(why) => {
                println!("FAILED {}: {}", record.name, one_line(&why));
                failed.push(record.name.clone());
            }
        }
    }
    if let Some(lock) = &lock {
        for entry in &lock.tools {
            let is_name = !entry.component.contains('/') && !entry.component.ends_with(".wasm");
            if is_name
                && builtin::builtin(&entry.component).is_none()
                && !records.iter().any(|r| r.name == entry.component)
            {
                println!(
                    "FAILED {}: in {FILE_NAME} but not installed",
                    entry.component
                );
                failed.push(entry.component.clone());
            }
        }
    }
    if !failed.is_empty() {
        return Err(DistError::Refused(format!(
            "{} of {} tools failed verification: {}",
            failed.len(),
            checked.max(failed.len()),
            failed.join(", ")
        ))
        .into());
    }
    println!("{checked} verified");
    Ok(Outcome::Done)
}

/// The lock entry of `component` as `agent.toml` names it.
async fn locked_entry(
    hands: &longhand_hands::Hands,
    store: &Store,
    component: &str,
    base: &Path,
) -> anyhow::Result<Locked> {
    let is_file = component.contains('/') || component.ends_with(".wasm");
    if !is_file && builtin::builtin(component).is_none() {
        let record = store.record(component)?.ok_or_else(|| {
            usage(format!(
                "`{}` in the agent file is neither a built-in nor an installed tool; \
                 `longhand tool install SOURCE --name {0}` first",
                longhand_hands::bound::name(component)
            ))
        })?;
        store.verified(&record)?;
        return Ok(Locked {
            component: component.to_owned(),
            source: record.source,
            manifest_digest: record.manifest_digest,
            digest: record.digest,
            signer: record.signer,
            asks: record.asks,
        });
    }
    let path;
    let source = if is_file {
        path = base.join(component);
        ToolSource::File(&path)
    } else {
        ToolSource::Builtin(component)
    };
    let tool = {
        let _working = super::progress::Working::start(super::progress::compiling(component));
        hands.load(source).await?
    };
    Ok(Locked {
        component: component.to_owned(),
        source: if is_file {
            component.to_owned()
        } else {
            "builtin".to_owned()
        },
        manifest_digest: None,
        digest: tool.digest().to_owned(),
        signer: None,
        asks: Asks::of(&tool),
    })
}

/// `tool lock AGENT [--locked]`.
pub async fn lock(agent: &Path, locked: bool) -> anyhow::Result<Outcome> {
    let (config, base) = AgentConfig::load(agent)?;
    let store = store()?;
    let hands = hands()?;
    let mut entries = Vec::new();
    for tool in &config.tools {
        if entries
            .iter()
            .any(|e: &Locked| e.component == tool.component)
        {
            continue;
        }
        entries.push(locked_entry(&hands, &store, &tool.component, &base).await?);
    }
    let new = Lock::new(entries);
    let path = base.join(FILE_NAME);
    if !locked {
        new.write(&path)?;
        println!("wrote {} ({} tools)", path.display(), new.tools.len());
        return Ok(Outcome::Done);
    }
    let old = Lock::read(&path)?.ok_or_else(|| {
        DistError::Refused(format!(
            "--locked: there is no {} yet; write it with `longhand tool lock {}`",
            path.display(),
            agent.display()
        ))
    })?;
    let mut changes = old.changes(&new);
    // The registry still names what is locked: a tag moved since is a
    // change, whatever is installed.
    for entry in &new.tools {
        let (Some(locked_manifest), Ok(Source::Oci(r))) =
            (&entry.manifest_digest, Source::parse(&entry.source))
        else {
            continue;
        };
        if r.digest.is_some() {
            continue;
        }
        let now = registry::resolve(&r).await?;
        if &now != locked_manifest {
            changes.push(format!(
                "{}: {r} now resolves to {now}, not the locked {locked_manifest} (the tag moved; \
                 `longhand tool upgrade {}` reviews the new version)",
                entry.component, entry.component
            ));
        }
    }
    if !changes.is_empty() {
        return Err(DistError::Refused(format!(
            "--locked: {} would change:\n  {}",
            path.display(),
            changes.join("\n  ")
        ))
        .into());
    }
    println!(
        "{} is up to date ({} tools)",
        path.display(),
        new.tools.len()
    );
    Ok(Outcome::Done)
}

/// Pin each of the agent's tools to its digest in `longhand.lock`, when
/// there is one beside the agent file; what `run` does before freezing. A
/// tool the lock does not name, or that `agent.toml` pins to another
/// digest, is refused.
pub(super) fn apply_lock(config: &mut AgentConfig, base: &Path) -> anyhow::Result<()> {
    let path = base.join(FILE_NAME);
    let Some(lock) = Lock::read(&path)? else {
        return Ok(());
    };
    for tool in &mut config.tools {
        let entry = lock.get(&tool.component).ok_or_else(|| {
            usage(format!(
                "{} does not name tool `{}`; write it again with `longhand tool lock`",
                path.display(),
                longhand_hands::bound::name(&tool.component)
            ))
        })?;
        match &tool.digest {
            Some(pinned) if *pinned != entry.digest => {
                return Err(usage(format!(
                    "tool `{}`: agent.toml pins {pinned}, {} pins {}; make them agree",
                    longhand_hands::bound::name(&tool.component),
                    path.display(),
                    entry.digest
                )));
            }
            _ => tool.digest = Some(entry.digest.clone()),
        }
    }
    Ok(())
}
