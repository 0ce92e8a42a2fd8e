//! The install store, `$LONGHAND_HOME/tools/`: one record per installed
//! name (`NAME.json`), the components by digest (`blobs/<hex>.wasm`), and
//! upgrades held for review (`held/NAME.json`).
//!
//! The store is what a name means to the hands ([`hands::Installed`]):
//! every time a name is loaded, its bytes are read, hashed against the
//! record and, when it was installed signed, verified against the trust
//! store as it is now. A blob changed on disk or a signer taken out of the
//! trust store is refused at the next load, not only at install.
//!
//! Writes are a temporary file renamed into place: a crash leaves the old
//! record or the new one, never half of one.
//!
//! [`hands::Installed`]: longhand_hands::Installed

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::DistError;
use super::names::{is_digest, is_tool_name};
use super::registry::MAX_COMPONENT_BYTES;
use super::review::Asks;
use super::sign::{self, Sealing, Signature, TrustStore};
use longhand_hands::{Installed, InstalledBytes, digest_of};

/// Largest record read, in bytes.
const MAX_RECORD_BYTES: u64 = 1 << 20;

/// Why an installed component is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trust {
    /// Signed by a key in the trust store; verified again at every load.
    Signed,
    /// Unsigned, installed with `--digest`: the operator named these bytes.
    Pinned,
    /// Unsigned, installed with `--allow-unsigned`.
    Unsigned,
}

/// What `tool install` recorded about a name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The name it is installed under.
    pub name: String,
    /// Where it came from, as given (`oci://…`, `https://…`, a path).
    pub source: String,
    /// The registry manifest's digest (`oci://` sources only).
    #[serde(default)]
    pub manifest_digest: Option<String>,
    /// `sha256:…` of the component bytes.
    pub digest: String,
    /// The trusted signer (`ed25519:<hex>`) when signed.
    #[serde(default)]
    pub signer: Option<String>,
    /// Why it is accepted.
    pub trust: Trust,
    /// Size of the component in bytes.
    pub size: u64,
    /// Its `describe` version.
    #[serde(default)]
    pub version: String,
    /// Its tools.
    #[serde(default)]
    pub tools: Vec<String>,
    /// What it asks for.
    pub asks: Asks,
}

/// What an install record's seal is for.
const RECORD_DOMAIN: &str = "longhand install record v1";

/// A record as it is written: the record, and the host key's seal over
/// its compact JSON, its kind (installed or held) and its name.
#[derive(Serialize, Deserialize)]
struct SealedRecord {
    #[serde(flatten)]
    record: Record,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seal: Option<String>,
}

/// The install store under a directory, with the trust store it verifies
/// signatures against.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    trust: TrustStore,
    seal: Sealing,
}

impl Store {
    /// The store in `root` (created on the first write), unsealed.
    pub fn new(root: PathBuf, trust: TrustStore) -> Self {
        Self {
            root,
            trust,
            seal: Sealing::Off,
        }
    }

    /// The same store, each record sealed when written and checked when
    /// read: a record this host did not write (one a tool granted the home
    /// rewrote to name its own bytes) is refused.
    pub fn sealed(mut self, seal: Sealing) -> Self {
        self.seal = seal;
        self
    }

    /// The trust store.
    pub fn trust(&self) -> &TrustStore {
        &self.trust
    }

    fn record_path(&self, name: &str) -> PathBuf {
        self.root.join(format!("{name}.json"))
    }

    fn held_path(&self, name: &str) -> PathBuf {
        self.root.join("held").join(format!("{name}.json"))
    }

    /// Where the component with `digest` is kept.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        self.root
            .join("blobs")
            .join(format!("{}.wasm", digest.trim_start_matches("sha256:")))
    }

    /// The record of `name`; `None` when nothing is installed under it.
    pub fn record(&self, name: &str) -> Result<Option<Record>, DistError> {
        if !is_tool_name(name) {
            return Ok(None);
        }
        self.read_record(&self.record_path(name), "installed", name)
    }

    /// The upgrade of `name` held for review, if any.
    pub fn held(&self, name: &str) -> Result<Option<Record>, DistError> {
        if !is_tool_name(name) {
            return Ok(None);
        }
        self.read_record(&self.held_path(name), "held", name)
    }

    /// Every installed record, by name.
    pub fn records(&self) -> Result<Vec<Record>, DistError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(DistError::io(format!("reading {}", self.root.display()))(e)),
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".json").map(str::to_owned)
            })
            .filter(|n| is_tool_name(n))
            .collect();
        names.sort();
        let mut records = Vec::new();
        for name in names {
            if let Some(record) = self.record(&name)? {
                records.push(record);
            }
        }
        Ok(records)
    }

    /// Keep `bytes` (whose digest is `record.digest`) and record them
    /// under `record.name`, replacing what was installed there and
    /// dropping any held upgrade of it.
    pub fn install(&self, record: &Record, bytes: &[u8]) -> Result<(), DistError> {
        self.put_blob(&record.digest, bytes)?;
        self.write_record(&self.record_path(&record.name), "installed", record)?;
        let held = self.held_path(&record.name);
        if held.exists() {
            std::fs::remove_file(&held)
                .map_err(DistError::io(format!("removing {}", held.display())))?;
        }
        Ok(())
    }

    /// Keep `bytes` as the held upgrade of `record.name`, for `--approve`.
    pub fn hold(&self, record: &Record, bytes: &[u8]) -> Result<(), DistError> {
        self.put_blob(&record.digest, bytes)?;
        self.write_record(&self.held_path(&record.name), "held", record)
    }

    fn record_seal(
        key: &longhand_hands::seal::HostKey,
        kind: &str,
        record: &Record,
    ) -> Result<[u8; 32], DistError> {
        let compact = serde_json::to_vec(record)
            .map_err(|e| DistError::Usage(format!("encoding the record: {e}")))?;
        Ok(key.seal(
            RECORD_DOMAIN,
            &[kind.as_bytes(), record.name.as_bytes(), &compact],
        ))
    }

    fn write_record(&self, path: &Path, kind: &str, record: &Record) -> Result<(), DistError> {
        let seal = match self.seal.key()? {
            Some(key) => Some(hex::encode(Self::record_seal(key, kind, record)?)),
            None => None,
        };
        write_json(
            path,
            &SealedRecord {
                record: record.clone(),
                seal,
            },
        )
    }

    fn read_record(
        &self,
        path: &Path,
        kind: &str,
        name: &str,
    ) -> Result<Option<Record>, DistError> {
        let Some(sealed) = read_record(path)? else {
            return Ok(None);
        };
        let record = sealed.record;
        if record.name != name {
            return Err(DistError::Refused(format!(
                "{} names `{}`, not `{name}`; reinstall the tool",
                path.display(),
                super::error::shown(&record.name, 64)
            )));
        }
        if let Some(key) = self.seal.key()? {
            let compact = serde_json::to_vec(&record)
                .map_err(|e| DistError::Usage(format!("encoding the record: {e}")))?;
            let ok = sealed
                .seal
                .as_deref()
                .and_then(|s| hex::decode(s).ok())
                .is_some_and(|seal| {
                    key.verify(
                        RECORD_DOMAIN,
                        &[kind.as_bytes(), record.name.as_bytes(), &compact],
                        &seal,
                    )
                });
            if !ok {
                return Err(DistError::Refused(format!(
                    "{} was not written by `longhand tool install` on this host (its seal is \
                     missing or does not verify: changed on disk, or written by an older \
                     longhand); reinstall it: `longhand tool install {}`",
                    path.display(),
                    super::error::shown(&record.source, 256)
                )));
            }
        }
        Ok(Some(record))
    }

    fn put_blob(&self, digest: &str, bytes: &[u8]) -> Result<(), DistError> {
        if digest_of(bytes) != digest {
            return Err(DistError::Refused(format!(
                "refusing to store bytes under {digest}: they hash to something else"
            )));
        }
        let path = self.blob_path(digest);
        if path.exists() && self.read_blob(digest).is_ok_and(|b| b == bytes) {
            return Ok(());
        }
        let dir = path.parent().unwrap_or(&self.root).to_owned();
        std::fs::create_dir_all(&dir)
            .map_err(DistError::io(format!("creating {}", dir.display())))?;
        write_atomic(&path, bytes)
    }

    /// The bytes kept under `digest`, bounded, not yet checked.
    pub fn read_blob(&self, digest: &str) -> Result<Vec<u8>, DistError> {
        if !is_digest(digest) {
            return Err(DistError::Refused(format!(
                "`{}` is not a digest",
                super::error::shown(digest, 128)
            )));
        }
        let path = self.blob_path(digest);
        let file = std::fs::File::open(&path)
            .map_err(DistError::io(format!("reading {}", path.display())))?;
        let mut bytes = Vec::new();
        file.take(MAX_COMPONENT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(DistError::io(format!("reading {}", path.display())))?;
        Ok(bytes)
    }

    /// The bytes of `record`, verified: hashed against its digest and, when
    /// it was installed signed, its signature checked against the trust
    /// store as it is now.
    pub fn verified(&self, record: &Record) -> Result<Vec<u8>, DistError> {
        let bytes = self.read_blob(&record.digest)?;
        let digest = digest_of(&bytes);
        if digest != record.digest {
            return Err(DistError::Refused(format!(
                "`{}`: the installed copy ({}) hashes to {digest}, not the {} it was installed as: \
                 it changed on disk; reinstall it",
                record.name,
                self.blob_path(&record.digest).display(),
                record.digest
            )));
        }
        if record.trust == Trust::Signed {
            let keys = self.trust.keys()?;
            match sign::check(&bytes, &keys) {
                Signature::Trusted(signer) if Some(&signer) == record.signer.as_ref() => {}
                Signature::Trusted(other) => {
                    return Err(DistError::Refused(format!(
                        "`{}` was installed signed by {}, but is now signed by {other}",
                        record.name,
                        record.signer.as_deref().unwrap_or("?")
                    )));
                }
                Signature::Untrusted | Signature::Unsigned => {
                    return Err(DistError::Refused(format!(
                        "`{}`: its signer {} is no longer in the trust store (or the signature \
                         no longer verifies); `longhand trust add` the signer's KEY.pub, or reinstall it",
                        record.name,
                        record.signer.as_deref().unwrap_or("?")
                    )));
                }
            }
        }
        Ok(bytes)
    }
}

impl Installed for Store {
    fn resolve(&self, name: &str) -> Result<Option<InstalledBytes>, String> {
        let Some(record) = self.record(name).map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let bytes = self.verified(&record).map_err(|e| e.to_string())?;
        Ok(Some(InstalledBytes {
            bytes,
            digest: record.digest,
        }))
    }
}

fn read_record(path: &Path) -> Result<Option<SealedRecord>, DistError> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(DistError::io(format!("reading {}", path.display()))(e)),
    };
    let mut text = Vec::new();
    file.take(MAX_RECORD_BYTES)
        .read_to_end(&mut text)
        .map_err(DistError::io(format!("reading {}", path.display())))?;
    serde_json::from_slice(&text).map(Some).map_err(|e| {
        DistError::Refused(format!(
            "{} is not an install record ({e}); reinstall the tool",
            path.display()
        ))
    })
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), DistError> {
    let text = serde_json::to_vec_pretty(value)
        .map_err(|e| DistError::Usage(format!("encoding {}: {e}", path.display())))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(DistError::io(format!("creating {}", dir.display())))?;
    }
    write_atomic(path, &text)
}

/// Write `bytes` to a temporary file beside `path`, sync, rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DistError> {
    use std::io::Write;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("entry");
    let tmp = path.with_file_name(format!(".tmp-{}-{name}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        DistError::io(format!("writing {}", path.display()))(e)
    })
}
