//! Loading a tool component: bytes → digest → the operator's pin → imports,
//! read from the bytes and judged → compiled component (from the on-disk
//! cache when possible) → pre-linked instance → `describe`, validated.
//!
//! Everything that can refuse a component without running it comes before
//! compiling it: a component that will be refused is never compiled and
//! never cached, and costs a hash and a parse of its import section.
//!
//! A loaded tool is immutable and shared by every call; it holds no guest
//! state, only compiled code and the validated description.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::bindings::CommandToolPre;
use super::bound;
use super::call::CallState;
use super::caps::{UnsupportedImport, check_imports};
use super::derived::Derived;
use super::grants::Access;
pub use super::info::{CapabilityRequests, ComponentInfo, DirRequest, Effect, ToolSpec};
use super::schema::{InputSchema, SchemaLoader};
use super::seal::{self, HostKey, SEAL_LEN};
use wasmparser::{Chunk, ComponentTypeRef, Encoding, Parser, Payload};

/// A compiled, checked, described component, ready for calls.
pub struct LoadedTool {
    pub(crate) label: String,
    pub(crate) digest: String,
    pub(crate) info: ComponentInfo,
    pub(crate) capabilities: Vec<&'static str>,
    pub(crate) exports: Exports,
    pub(crate) validators: HashMap<String, InputSchema>,
}

/// How a loaded component is called.
pub(crate) enum Exports {
    /// It exports our world: `call(name, input)`.
    World(CommandToolPre<CallState>),
    /// It was written for another host: each tool is one of its exported
    /// functions ([`super::derived`]).
    Functions(Arc<Derived>),
}

impl LoadedTool {
    /// Where it came from: a built-in name or a file path.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// `sha256:<hex>` of the component bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// What `describe` reported.
    pub fn info(&self) -> &ComponentInfo {
        &self.info
    }

    /// Capability names the component's imports fall under (see
    /// [`super::caps::CAPABILITIES`]). A tool without `http` here cannot make
    /// a request whatever it is granted.
    pub fn capabilities(&self) -> &[&'static str] {
        &self.capabilities
    }

    /// The names of its tools, in `describe`'s order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.info.tools.iter().map(|t| t.name.as_str()).collect()
    }

    /// The spec of tool `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.info.tools.iter().find(|t| t.name == name)
    }
}

impl std::fmt::Debug for LoadedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedTool")
            .field("label", &self.label)
            .field("digest", &self.digest)
            .field(
                "tools",
                &self.info.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Why a component could not be loaded. The operator fixes the component
/// or its path; retrying the same bytes fails the same way.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No built-in tool has this name.
    #[error(
        "no built-in or installed tool named `{}` (built-ins: {known}; `longhand tool list` \
         shows what is installed); to load a file give a path ending in .wasm",
        bound::name(.name)
    )]
    UnknownBuiltin {
        /// The name asked for.
        name: String,
        /// The built-in names.
        known: String,
    },
    /// A built-in this binary was built without (see
    /// [`super::builtin::unbuilt`]); rebuilding with its toolchain adds it.
    #[error("{why}")]
    Unbuilt {
        /// The name asked for.
        name: String,
        /// Why it is missing and what to do.
        why: &'static str,
    },
    /// A tool installed under this name no longer verifies (its bytes
    /// changed since it was installed, its signer is no longer trusted, its
    /// record cannot be read). The operator reinstalls or re-trusts it.
    #[error(
        "installed tool `{}` was refused: {}",
        bound::name(.name),
        shown_reason(.reason)
    )]
    Installed {
        /// The name it was installed under.
        name: String,
        /// Why, and what to do.
        reason: String,
    },
    /// The kept bytes of a built-in a session froze (`kept.rs`) do not
    /// hash to their digest.
    #[error(
        "the kept bytes of built-in `{}` were refused: {}",
        bound::name(.name),
        shown_reason(.reason)
    )]
    Kept {
        /// The built-in's name.
        name: String,
        /// Why, and what to do.
        reason: String,
    },
    /// The file could not be read.
    #[error("cannot read {}: {cause}", shown_path(.path))]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The bytes are not a WebAssembly component.
    #[error(
        "{} is not a usable WebAssembly component: {}",
        shown_label(.label),
        shown_reason(.reason)
    )]
    NotComponent {
        /// Where it came from.
        label: String,
        /// What is wrong, and what to do.
        reason: String,
    },
    /// It imports something the host refuses to provide.
    #[error("{} was refused: {cause}", shown_label(.label))]
    Unsupported {
        /// Where it came from.
        label: String,
        /// The offending import.
        cause: UnsupportedImport,
    },
    /// It exports neither the `longhand:tool/tools` interface nor any
    /// function that can be called as a tool (the reason names what it
    /// does export and how to adapt it), or linking failed.
    #[error(
        "{} does not fit the longhand:tool world: {}",
        shown_label(.label),
        shown_reason(.reason)
    )]
    Link {
        /// Where it came from.
        label: String,
        /// Why.
        reason: String,
    },
    /// `describe` failed or returned something unusable.
    #[error(
        "{}: describe failed: {}",
        shown_label(.label),
        shown_reason(.reason)
    )]
    Describe {
        /// Where it came from.
        label: String,
        /// Why.
        reason: String,
    },
}

/// Why a load with a digest pin ([`crate::Hands::load_pinned`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum PinnedLoadError {
    /// The bytes are not the pinned component. Nothing was compiled or
    /// cached; the operator reviews the new component and updates the pin.
    #[error(
        "{} is {actual}, but it is pinned to {expected}; review the new component and update the pin",
        shown_label(.label)
    )]
    Mismatch {
        /// Where it came from.
        label: String,
        /// The pinned digest, as the operator gave it.
        expected: String,
        /// `sha256:<hex>` of the bytes found.
        actual: String,
    },
    /// The bytes are the pinned component, and loading them failed.
    #[error(transparent)]
    Load(#[from] LoadError),
}

// A load error names what the operator (or an agent file, or an API
// client) asked for and quotes what wasmtime or the guest said: any of it
// can be of any length. Each is cut when the error is shown, so every
// place that prints or records the error gets the bounded form.

/// A component label (a built-in name or a path) as a load error shows it.
fn shown_label(label: &str) -> std::borrow::Cow<'_, str> {
    bound::cut_str(label, bound::MAX_PATH_BYTES)
}

/// A path as a load error shows it.
fn shown_path(path: &Path) -> String {
    shown_label(&path.display().to_string()).into_owned()
}

/// A reason (wasmtime's or the guest's words) as a load error shows it.
fn shown_reason(reason: &str) -> std::borrow::Cow<'_, str> {
    bound::cut_str(reason, bound::MAX_REASON_BYTES)
}

/// `sha256:<hex>` of some bytes.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The component's top-level imports, each with whether it is an instance
/// (an interface), read from its bytes without compiling or validating
/// them: the import section is all the host needs to refuse a component.
/// Nested core modules and components are skipped; their imports are
/// satisfied inside the component, never by the host.
///
/// Bytes that do not parse as far as their end are not a component; the
/// full validation happens when a component that passed is compiled.
pub(crate) fn imports_of<'a>(
    label: &str,
    bytes: &'a [u8],
) -> Result<Vec<(&'a str, bool)>, LoadError> {
    let not_component = |reason: String| LoadError::NotComponent {
        label: label.to_owned(),
        reason,
    };
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(not_component(
            "it does not start with the WebAssembly magic bytes (is it a .wasm file?)".to_owned(),
        ));
    }
    if bytes[4..8] == [1, 0, 0, 0] {
        return Err(not_component(
            "it is a core WebAssembly module, not a component; build it with \
             `cargo build --target wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
                .to_owned(),
        ));
    }
    let mut imports = Vec::new();
    // Only the outer component's sections are read: a nested module or
    // component (most of the bytes: the code) is stepped over whole, so a
    // load does not walk every function body of a megabyte-sized tool.
    let mut parser = Parser::new(0);
    let mut rest = bytes;
    let ends_early = || not_component("it ends before its last section".to_owned());
    loop {
        let payload = match parser
            .parse(rest, true)
            .map_err(|e| not_component(e.to_string()))?
        {
            Chunk::Parsed { consumed, payload } => {
                rest = &rest[consumed..];
                payload
            }
            Chunk::NeedMoreData(_) => return Err(ends_early()),
        };
        match payload {
            Payload::Version { encoding, .. } if encoding != Encoding::Component => {
                return Err(not_component("it is not a component".to_owned()));
            }
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                rest = rest.get(unchecked_range.len()..).ok_or_else(ends_early)?;
            }
            Payload::End(_) => return Ok(imports),
            Payload::ComponentImportSection(section) => {
                for import in section {
                    let import = import.map_err(|e| not_component(e.to_string()))?;
                    let instance = matches!(import.ty, ComponentTypeRef::Instance(_));
                    imports.push((import.name.name, instance));
                }
            }
            _ => {}
        }
    }
}

/// Judge a component's imports ([`imports_of`]) against the capability
/// table: the capability names it may use, or why it is refused.
pub(crate) fn judge_imports(
    label: &str,
    imports: &[(&str, bool)],
) -> Result<Vec<&'static str>, LoadError> {
    check_imports(imports.iter().copied()).map_err(|cause| LoadError::Unsupported {
        label: label.to_owned(),
        cause,
    })
}

/// The compile cache: a directory of compiled components, each sealed with
/// the host key ([`super::seal`]).
///
/// `Component::deserialize` maps the bytes it is given as native code and
/// runs them: wasmtime documents it as safe only for bytes it produced
/// itself. The directory's owner and mode say nothing about who wrote an
/// entry (a guest granted a directory that contains the cache writes as
/// this user), so every entry carries an HMAC-SHA256 seal over the
/// component's digest, the engine's compatibility hash and the compiled
/// bytes, under a key no grant can reach. An entry is read once into
/// memory, its seal checked, and only those bytes are deserialized: a
/// foreign entry (another component's code, renamed), a truncated one or
/// one with bytes changed is a miss, compiled again and rewritten.
#[derive(Debug)]
pub(crate) struct Cache {
    pub(crate) dir: PathBuf,
    pub(crate) key: HostKey,
}

/// What a seal of a cache entry is for.
const CACHE_DOMAIN: &str = "longhand compile cache v1";

/// Largest cache entry read: 1 GiB. A 40 MiB component compiles to about
/// three times its size; anything near the limit is not one of ours.
const MAX_CACHE_ENTRY_BYTES: u64 = 1 << 30;

/// A compiled component, and where to cache it once it has passed every
/// check (`None`: it came from the cache, or there is no cache).
pub(crate) struct Compiled {
    pub(crate) component: Component,
    pub(crate) cache_to: Option<CacheEntry>,
    /// Whether Cranelift ran (false for a cache hit).
    pub(crate) fresh: bool,
}

/// Where one component's compiled form is cached, and what its seal binds.
pub(crate) struct CacheEntry {
    path: PathBuf,
    digest: String,
    engine: String,
}

/// Compile `bytes`, or load the compiled form from `cache`. Only for
/// bytes whose digest and imports have passed ([`imports_of`]).
///
/// The cache key is the content digest plus a hash of everything in the
/// engine configuration that affects compiled code, so a changed binary or
/// a changed engine never reuses stale code. An entry is used only when
/// its seal verifies (see [`Cache`]). Entries are written to a temporary
/// file and renamed into place, so a crash leaves no torn entry (and a
/// torn one would not verify).
pub(crate) fn compile(
    engine: &Engine,
    cache: Option<&Cache>,
    label: &str,
    bytes: &[u8],
    digest: &str,
) -> Result<Compiled, LoadError> {
    let not_component = |reason: String| LoadError::NotComponent {
        label: label.to_owned(),
        reason,
    };

    let entry = cache.filter(|c| trusted_cache_dir(&c.dir)).map(|c| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_hash = format!("{:016x}", hasher.finish());
        let hex = digest.trim_start_matches("sha256:");
        (
            c,
            CacheEntry {
                path: c.dir.join(format!("{hex}-{engine_hash}.cwasm")),
                digest: digest.to_owned(),
                engine: engine_hash,
            },
        )
    });
    if let Some((cache, entry)) = &entry {
        match read_sealed(cache, entry) {
            Ok(None) => {}
            Ok(Some(compiled)) => {
                // SAFETY: `compiled` is the exact bytes whose seal was just
                // verified under the host key: bytes `Component::serialize`
                // produced in `remember` for this digest and this engine.
                // They are in our memory, so nothing can change them
                // between the check and the use.
                match unsafe { Component::deserialize(engine, &compiled) } {
                    Ok(component) => {
                        return Ok(Compiled {
                            component,
                            cache_to: None,
                            fresh: false,
                        });
                    }
                    Err(err) => {
                        tracing::warn!(path = %entry.path.display(), %err, "ignoring unusable cache entry");
                    }
                }
            }
            Err(why) => {
                tracing::warn!(
                    path = %entry.path.display(),
                    "the compile cache entry was not written by this host for {digest} ({why}); \
                     compiling it again"
                );
            }
        }
    }

    let component = Component::new(engine, bytes).map_err(|e| not_component(format!("{e:#}")))?;
    Ok(Compiled {
        component,
        cache_to: entry.map(|(_, e)| e),
        fresh: true,
    })
}

/// The compiled bytes of `entry` when they carry a valid seal; `Ok(None)`
/// when there is no entry; `Err(why)` when there is one that is not ours.
fn read_sealed(cache: &Cache, entry: &CacheEntry) -> Result<Option<Vec<u8>>, String> {
    let file = match seal::open_private(&entry.path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut bytes = Vec::new();
    file.take(MAX_CACHE_ENTRY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_CACHE_ENTRY_BYTES {
        return Err(format!("it is over {MAX_CACHE_ENTRY_BYTES} bytes"));
    }
    let Some(split) = bytes.len().checked_sub(SEAL_LEN) else {
        return Err("it is shorter than a seal".to_owned());
    };
    let (compiled, tag) = bytes.split_at(split);
    if !cache.key.verify(
        CACHE_DOMAIN,
        &[entry.digest.as_bytes(), entry.engine.as_bytes(), compiled],
        tag,
    ) {
        return Err(
            "its seal does not verify: another component's entry, truncated, or changed".to_owned(),
        );
    }
    bytes.truncate(split);
    Ok(Some(bytes))
}

/// Store a compiled component that passed its checks in the cache, sealed.
pub(crate) fn remember(cache: &Cache, entry: &CacheEntry, component: &Component) {
    if let Err(err) = write_cache(cache, entry, component) {
        tracing::warn!(path = %entry.path.display(), %err, "could not write the compile cache");
    }
}

/// Compiled code in the cache is loaded only with a valid seal, but a
/// directory others may write is refused as well: they could at least
/// delete or fill it. If it exists and is not ours, the cache is not used
/// (and we say so).
fn trusted_cache_dir(dir: &Path) -> bool {
    if !dir.exists() {
        return true; // created 0700 by us on first write
    }
    match seal::check_dir(dir) {
        Ok(()) => true,
        Err(why) => {
            tracing::warn!(dir = %dir.display(), "not using the compile cache: {why}");
            false
        }
    }
}

fn write_cache(cache: &Cache, entry: &CacheEntry, component: &Component) -> anyhow::Result<()> {
    let path = &entry.path;
    let dir = path
        .parent()
        .ok_or_else(|| anyhow::anyhow!("cache path has no parent"))?;
    seal::private_dir(dir)?;
    let mut bytes = component.serialize()?;
    let tag = cache.key.seal(
        CACHE_DOMAIN,
        &[entry.digest.as_bytes(), entry.engine.as_bytes(), &bytes],
    );
    bytes.extend_from_slice(&tag);
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry")
    ));
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let _ = std::fs::remove_file(&tmp);
        let mut file = options.open(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Check what `describe` returned and compile the input schemas.
pub(crate) fn validate_info(
    label: &str,
    raw: super::bindings::longhand::tool::types::ComponentInfo,
) -> Result<(ComponentInfo, HashMap<String, InputSchema>), LoadError> {
    use super::bindings::longhand::tool::types as wit;
    let bad = |reason: String| LoadError::Describe {
        label: label.to_owned(),
        reason,
    };
    let mut tools = Vec::with_capacity(raw.tools.len());
    let mut validators = HashMap::new();
    let mut schemas = SchemaLoader::new();
    if raw.tools.is_empty() {
        return Err(bad("the component offers no tools".to_owned()));
    }
    for t in raw.tools {
        let name_ok = !t.name.is_empty()
            && t.name.len() <= 64
            && t.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !name_ok {
            // The guest's name, of any length: quoted cut.
            return Err(bad(format!(
                "tool name `{}` must be 1-64 characters of a-z, 0-9, `-` or `_`",
                bound::name(&t.name)
            )));
        }
        if validators.contains_key(&t.name) {
            return Err(bad(format!("tool `{}` is declared twice", t.name)));
        }
        // The schema is hostile input: compiled under the bounds of
        // `schema.rs` before anything else reads it, so a refused one is
        // never even parsed twice.
        let validator = schemas
            .compile(&t.input_schema)
            .map_err(|e| bad(format!("tool `{}`: input schema refused: {e}", t.name)))?;
        let schema: serde_json::Value = serde_json::from_str(&t.input_schema)
            .map_err(|e| bad(format!("tool `{}`: input schema is not JSON: {e}", t.name)))?;
        validators.insert(t.name.clone(), validator);
        tools.push(ToolSpec {
            name: t.name,
            description: t.description,
            input_schema: schema,
            effect: match t.effect {
                wit::Effect::ReadOnly => Effect::ReadOnly,
                wit::Effect::Idempotent => Effect::Idempotent,
                wit::Effect::Writes => Effect::Writes,
            },
        });
    }
    let requests = CapabilityRequests {
        dirs: raw
            .requests
            .dirs
            .into_iter()
            .map(|d| DirRequest {
                guest_path: d.guest_path,
                access: match d.access {
                    wit::DirAccess::ReadOnly => Access::ReadOnly,
                    wit::DirAccess::ReadWrite => Access::ReadWrite,
                },
                why: d.why,
            })
            .collect(),
        hosts: raw.requests.hosts,
        env: raw.requests.env,
        secrets: raw.requests.secrets,
    };
    Ok((
        ComponentInfo {
            name: raw.name,
            version: raw.version,
            description: raw.description,
            tools,
            requests,
            derived: None,
        },
        validators,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::longhand::tool::types as wit;

    /// A guest's name of any length, and a label of any length, come back
    /// cut in the error that quotes them.
    #[test]
    fn load_errors_cut_what_they_quote() {
        let huge = "T".repeat(64 << 20);
        let raw = wit::ComponentInfo {
            name: "x".to_owned(),
            version: "0".to_owned(),
            description: String::new(),
            tools: vec![wit::ToolSpec {
                name: huge.clone(),
                description: String::new(),
                input_schema: r#"{"type":"object"}"#.to_owned(),
                effect: wit::Effect::ReadOnly,
            }],
            requests: wit::CapabilityRequests {
                dirs: Vec::new(),
                hosts: Vec::new(),
                env: Vec::new(),
                secrets: Vec::new(),
            },
        };
        let err = validate_info(&huge, raw).expect_err("refused");
        let shown = err.to_string();
        assert!(shown.len() < 8 << 10, "{} bytes", shown.len());
        assert!(shown.contains("must be 1-64 characters"), "{shown}");
        for err in [
            LoadError::UnknownBuiltin {
                name: huge.clone(),
                known: "fs".to_owned(),
            },
            LoadError::Read {
                path: PathBuf::from(&huge),
                cause: std::io::Error::other("too long"),
            },
            LoadError::Link {
                label: huge.clone(),
                reason: huge.clone(),
            },
        ] {
            let shown = err.to_string();
            assert!(shown.len() < 24 << 10, "{} bytes", shown.len());
            assert!(shown.contains("bytes dropped]"), "{}", &shown[..300]);
        }
    }
}
