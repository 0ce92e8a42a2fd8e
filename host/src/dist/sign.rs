//! Ed25519 signatures embedded in a component (the `wasmsign2` format: a
//! `signature` custom section first, over the hash of every section after
//! it), the operator's key files, and the trust store
//! (`$LONGHAND_HOME/trust/<signer>.pub`).
//!
//! A signer is named by its public key: `ed25519:<64 hex digits>`. The
//! name is the key, so a record that says who signed a component can be
//! checked against the trust store without anything else to look up.
//!
//! What it must not do: decide what is accepted. It says who signed (or
//! that nobody did, or nobody trusted); the installer and the store's
//! resolver decide what that means.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use wasmsign2::{KeyPair, PublicKey, SecretKey};

use super::error::DistError;

/// Largest key file read, in bytes (a PEM key is under 200).
const MAX_KEY_FILE_BYTES: u64 = 16 << 10;

/// Who signed a component, as far as the trust store is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signature {
    /// No signature section.
    Unsigned,
    /// A valid signature by this trusted signer (`ed25519:<hex>`).
    Trusted(String),
    /// Signed, but by no key in the trust store, or not validly (bytes
    /// changed after signing).
    Untrusted,
}

/// `ed25519:<hex>` of a public key.
pub fn signer_of(pk: &PublicKey) -> String {
    let bytes = pk.to_bytes();
    // The first byte is wasmsign2's key-type tag (Ed25519).
    format!(
        "ed25519:{}",
        hex::encode(bytes.get(1..).unwrap_or_default())
    )
}

/// Write a new key pair: the secret key to `secret` (mode 0600, refused
/// if the file exists) and the public key to `secret` + `.pub`. Returns
/// the signer name and the public key's path.
pub fn keygen(secret: &Path) -> Result<(String, PathBuf), DistError> {
    let public = pub_path(secret);
    for path in [secret, public.as_path()] {
        if path.exists() {
            return Err(DistError::Usage(format!(
                "{} exists; keygen does not overwrite a key (remove it or choose another path)",
                path.display()
            )));
        }
    }
    let pair = KeyPair::generate();
    write_new(secret, pair.sk.to_pem().as_bytes(), 0o600)?;
    write_new(&public, pair.pk.to_pem().as_bytes(), 0o644)?;
    Ok((signer_of(&pair.pk), public))
}

/// `KEY.pub` beside `KEY`.
fn pub_path(secret: &Path) -> PathBuf {
    let mut name = secret.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), DistError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options
        .open(path)
        .map_err(DistError::io(format!("creating {}", path.display())))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(DistError::io(format!("writing {}", path.display())))
}

fn read_key_file(path: &Path) -> Result<Vec<u8>, DistError> {
    let meta =
        std::fs::metadata(path).map_err(DistError::io(format!("reading {}", path.display())))?;
    if meta.len() > MAX_KEY_FILE_BYTES {
        return Err(DistError::Usage(format!(
            "{} is {} bytes; a key file is under {MAX_KEY_FILE_BYTES}",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read(path).map_err(DistError::io(format!("reading {}", path.display())))
}

/// The secret key in `path` (written by [`keygen`]). A secret key file that
/// others may read is refused: it signs for whoever trusts it.
pub fn read_secret(path: &Path) -> Result<SecretKey, DistError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path)
            .map_err(DistError::io(format!("reading {}", path.display())))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(DistError::Usage(format!(
                "{} may be read by others (mode {:o}); `chmod 600` it first",
                path.display(),
                meta.permissions().mode() & 0o777
            )));
        }
    }
    let bytes = read_key_file(path)?;
    SecretKey::from_any(&bytes).map_err(|e| {
        DistError::Usage(format!(
            "{} is not an Ed25519 secret key ({e}); make one with `longhand tool keygen`",
            path.display()
        ))
    })
}

/// The public key in `path` (a `.pub` from [`keygen`]).
pub fn read_public(path: &Path) -> Result<PublicKey, DistError> {
    let bytes = read_key_file(path)?;
    PublicKey::from_any(&bytes).map_err(|e| {
        DistError::Usage(format!(
            "{} is not an Ed25519 public key ({e}); give the KEY.pub that `longhand tool keygen` wrote",
            path.display()
        ))
    })
}

/// `bytes` with an embedded signature by `key` (any earlier signature is
/// replaced). The digest of the result is what gets published.
pub fn sign(bytes: &[u8], key: &SecretKey) -> Result<Vec<u8>, DistError> {
    let module = wasmsign2::Module::deserialize(&mut Cursor::new(bytes)).map_err(|e| {
        DistError::Usage(format!("cannot sign it: not a WebAssembly component ({e})"))
    })?;
    let signed = key
        .sign(module, None)
        .map_err(|e| DistError::Usage(format!("signing failed: {e}")))?;
    let mut out = Vec::with_capacity(bytes.len() + 256);
    signed
        .serialize(&mut out)
        .map_err(|e| DistError::Usage(format!("signing failed: {e}")))?;
    Ok(out)
}

/// Who signed `bytes`, judged against `trusted`.
pub fn check(bytes: &[u8], trusted: &[PublicKey]) -> Signature {
    let signed = wasmsign2::signature_info_from_reader(&mut Cursor::new(bytes), None)
        .is_ok_and(|info| info.is_signed());
    if !signed {
        return Signature::Unsigned;
    }
    for pk in trusted {
        if pk.verify(&mut Cursor::new(bytes), None).is_ok() {
            return Signature::Trusted(signer_of(pk));
        }
    }
    Signature::Untrusted
}

/// The trust store: one `.pub` per trusted signer under `dir`.
#[derive(Debug, Clone)]
pub struct TrustStore {
    dir: PathBuf,
}

impl TrustStore {
    /// The store in `dir` (created on the first [`TrustStore::add`]).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// Trust the public key in `path`; returns its signer name. Adding a
    /// key already trusted is not an error.
    pub fn add(&self, path: &Path) -> Result<String, DistError> {
        let pk = read_public(path)?;
        let signer = signer_of(&pk);
        std::fs::create_dir_all(&self.dir)
            .map_err(DistError::io(format!("creating {}", self.dir.display())))?;
        let file = self.dir.join(format!("{}.pub", file_stem(&signer)));
        let tmp = self.dir.join(format!(".tmp-{}", std::process::id()));
        std::fs::write(&tmp, pk.to_pem())
            .and_then(|()| std::fs::rename(&tmp, &file))
            .map_err(DistError::io(format!("writing {}", file.display())))?;
        Ok(signer)
    }

    /// Every trusted key. A file that is not a key is skipped with a
    /// warning (it trusts nobody).
    pub fn keys(&self) -> Result<Vec<PublicKey>, DistError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(DistError::io(format!("reading {}", self.dir.display()))(e)),
        };
        let mut keys = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "pub") {
                match read_public(&path) {
                    Ok(pk) => keys.push(pk),
                    Err(e) => tracing::warn!(path = %path.display(), %e, "not a trusted key"),
                }
            }
        }
        Ok(keys)
    }
}

/// A signer name as a file name (`ed25519-<hex>`).
fn file_stem(signer: &str) -> String {
    signer.replace(':', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: the header alone.
    const EMPTY_COMPONENT: &[u8] = &[0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

    #[test]
    fn a_signature_is_trusted_only_by_its_key_and_only_over_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("key");
        let (signer, public) = keygen(&secret).unwrap();
        assert!(
            signer.starts_with("ed25519:") && signer.len() == 8 + 64,
            "{signer}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(matches!(keygen(&secret), Err(DistError::Usage(_))));
        let signed = sign(EMPTY_COMPONENT, &read_secret(&secret).unwrap()).unwrap();
        assert_eq!(check(EMPTY_COMPONENT, &[]), Signature::Unsigned);
        assert_eq!(check(&signed, &[]), Signature::Untrusted);
        let trust = TrustStore::new(dir.path().join("trust"));
        assert_eq!(trust.add(&public).unwrap(), signer);
        let keys = trust.keys().unwrap();
        assert_eq!(check(&signed, &keys), Signature::Trusted(signer));
        // A byte appended after signing: the signature no longer covers it.
        let mut changed = signed.clone();
        changed.extend_from_slice(&[0, 1, b'x']);
        assert_eq!(check(&changed, &keys), Signature::Untrusted);
        // Another key signs; ours does not vouch for it.
        let other = dir.path().join("other");
        keygen(&other).unwrap();
        let by_other = sign(EMPTY_COMPONENT, &read_secret(&other).unwrap()).unwrap();
        assert_eq!(check(&by_other, &keys), Signature::Untrusted);
    }
}
